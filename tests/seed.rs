//! The seed pull request (fixtures/seed), reviewed from the diff alone and with its repository.
mod common;

use common::*;
use payreview::config::Settings;
use payreview::review::{Decision, Lang};

fn seed_diff() -> Vec<u8> {
    read("seed/pr.diff")
}

#[test]
fn diff_only_finds_the_hand_made_index_and_the_broad_except() {
    let review = review(&seed_diff(), &Settings::diff_only());
    assert!(
        has(
            &review,
            "DIFF001",
            "app/payments/service.py",
            None,
            "important"
        ),
        "{:#?}",
        places(&review)
    );
    assert!(has(
        &review,
        "ERR001",
        "app/payments/client.py",
        Some((41, 43)),
        "blocker"
    ));
    // Hashes cannot be checked without the files.
    assert!(!review.findings.iter().any(|f| f.rule == "DIFF002"));
    assert_eq!(review.decision(), Decision::RequestChanges);
    insta::assert_snapshot!("seed_diff_only_en", json(&review, Lang::En));
}

#[test]
fn repository_mode_also_checks_the_index_hashes() {
    let settings = repo_settings(&fixture("seed/head"));
    let review = review(&seed_diff(), &settings);
    assert!(has(
        &review,
        "DIFF001",
        "app/payments/service.py",
        None,
        "important"
    ));
    assert!(has(
        &review,
        "DIFF002",
        "app/payments/service.py",
        None,
        "important"
    ));
    assert!(has(
        &review,
        "ERR001",
        "app/payments/client.py",
        Some((41, 43)),
        "blocker"
    ));
    // client.py's index line is git's own: its hashes match the files.
    assert!(
        !review
            .findings
            .iter()
            .any(|f| f.rule == "DIFF002" && f.path == "app/payments/client.py")
    );
    assert!(review.errors.is_empty(), "{:?}", review.errors);
    insta::assert_snapshot!("seed_repository_en", json(&review, Lang::En));
}

#[test]
fn repository_mode_rebuilds_the_base_exactly() {
    // Reverse-applying the diff to head/ must give base/ byte for byte, or hashes and line maps
    // would be off.
    let patch = payreview::diff::parse_patch(&seed_diff()).expect("seed diff parses");
    let settings = repo_settings(&fixture("seed/head"));
    for file in &patch.files {
        let versions = payreview::source::reconstruct(file, &settings.workspace);
        let base =
            std::fs::read_to_string(fixture("seed/base").join(file.path())).expect("base file");
        assert_eq!(
            versions.old.map(|v| v.text.to_string()),
            Some(base),
            "{}",
            file.path()
        );
    }
}

#[test]
fn russian_report_uses_russian_texts() {
    let review = review(&seed_diff(), &Settings::diff_only());
    let out = json(&review, Lang::Ru);
    assert!(out.contains("глотает все ошибки"), "{out}");
    insta::assert_snapshot!("seed_diff_only_ru", out);
}

/// The seed with the review's suggestions applied: nothing a reviewer would have to ask for.
#[test]
fn fixed_seeds_have_no_blocker_and_no_important_finding() {
    for dir in ["seed-fixed", "seed-fixed-nx", "seed-restyled-fixed"] {
        let diff = read(&format!("{dir}/pr.diff"));
        let repo = repo_settings(&fixture(&format!("{dir}/head")));
        for (mode, settings) in [("diff-only", Settings::diff_only()), ("repository", repo)] {
            let review = review(&diff, &settings);
            let serious: Vec<String> = places(&review)
                .into_iter()
                .filter(|p| p.ends_with(" blocker") || p.ends_with(" important"))
                .collect();
            assert!(serious.is_empty(), "{dir} ({mode}): {serious:#?}");
            assert_ne!(
                review.decision(),
                Decision::RequestChanges,
                "{dir} ({mode})"
            );
        }
    }
}

/// The seed's bugs under other names and in other styles, the same points at the same
/// severities: `fixtures/seed-restyled` (a class, `requests`, Django's cache, a `while` loop) and
/// `fixtures/seed-restyled-async` (an injected `httpx.AsyncClient`, `redis.asyncio`, a `for`
/// loop with `asyncio.sleep`, a `mark_paid(...)` helper).
#[test]
fn a_restyled_seed_gets_the_seeds_review() {
    let restyled = {
        let (gateway, service) = ("shop/billing/gateway.py", "shop/billing/services.py");
        let tests = "tests/test_gateway.py";
        vec![
            // The token's get and set race; `except Exception: return None`; `None` when
            // every try timed out; the amount from the caller.
            ("IDEM001", gateway, "blocker"),
            ("ERR001", gateway, "blocker"),
            ("ERR002", gateway, "blocker"),
            ("PAY001", service, "blocker"),
            // The cache's outage on the payment path; retries that miss a dropped connection
            // and 502/503/504; a sleep after the last try; a caller that records success first.
            ("IDEM003", gateway, "important"),
            ("RETRY002", gateway, "important"),
            ("RETRY001", gateway, "important"),
            ("ERR003", service, "important"),
            ("PAY002", service, "important"),
            // Tests that keep neither the cache out nor the real backoff.
            ("TEST001", tests, "important"),
            ("TEST002", tests, "important"),
            // The attempts' names and a log line without its traceback.
            ("RETRY004", gateway, "nit"),
            ("ERR004", gateway, "nit"),
        ]
    };
    let restyled_async = {
        let (psp, checkout, tests) = (
            "svc/payments/psp.py",
            "svc/payments/checkout.py",
            "tests/test_psp.py",
        );
        vec![
            ("IDEM001", psp, "blocker"),
            ("ERR001", psp, "blocker"),
            ("ERR002", psp, "blocker"),
            ("PAY001", checkout, "blocker"),
            ("IDEM003", psp, "important"),
            ("RETRY002", psp, "important"),
            ("RETRY001", psp, "important"),
            ("ERR003", checkout, "important"),
            // `mark_paid(order, payment["id"])` before the status is looked at.
            ("PAY002", checkout, "important"),
            ("TEST001", tests, "important"),
            ("TEST002", tests, "important"),
        ]
    };
    for (dir, mut expected) in [
        ("seed-restyled", restyled),
        ("seed-restyled-async", restyled_async),
    ] {
        expected.sort();
        let diff = read(&format!("{dir}/pr.diff"));
        let repo = repo_settings(&fixture(&format!("{dir}/head")));
        for (mode, settings) in [("diff-only", Settings::diff_only()), ("repository", repo)] {
            let review = review(&diff, &settings);
            let mut found: Vec<(&str, &str, &str)> = review
                .findings
                .iter()
                .map(|f| (f.rule, f.path.as_str(), f.severity.as_str()))
                .collect();
            found.sort();
            assert_eq!(found, expected, "{dir} ({mode})");
            assert_eq!(
                review.decision(),
                Decision::RequestChanges,
                "{dir} ({mode})"
            );
        }
    }
}

/// Both ways of reviewing the seed: from the diff alone and with its repository.
fn both_modes() -> Vec<payreview::review::Review> {
    vec![
        review(&seed_diff(), &Settings::diff_only()),
        review(&seed_diff(), &repo_settings(&fixture("seed/head"))),
    ]
}

#[test]
fn seed_err_exhausted_retries_contract_and_traceback() {
    for review in both_modes() {
        let client = "app/payments/client.py";
        let service = "app/payments/service.py";
        assert!(
            has(&review, "ERR002", client, Some((45, 46)), "blocker"),
            "{:#?}",
            places(&review)
        );
        assert!(
            has(&review, "ERR003", service, Some((28, 30)), "important"),
            "{:#?}",
            places(&review)
        );
        assert!(
            has(&review, "ERR004", client, Some((42, 42)), "nit"),
            "{:#?}",
            places(&review)
        );
        // The warning in the handler that goes on to the next attempt is not a lost traceback.
        assert!(
            !review
                .findings
                .iter()
                .any(|f| f.rule == "ERR004" && f.lines.is_some_and(|(a, _)| a < 41))
        );
        assert!(review.questions.iter().any(|q| q.id == "task-config"));
    }
}

#[test]
fn seed_pay_amount_source_and_early_status() {
    for review in both_modes() {
        let service = "app/payments/service.py";
        assert!(
            has(&review, "PAY001", service, Some((28, 28)), "blocker"),
            "{:#?}",
            places(&review)
        );
        assert!(
            has(&review, "PAY002", service, Some((28, 31)), "important"),
            "{:#?}",
            places(&review)
        );
        assert!(review.questions.iter().any(|q| q.id == "pay-amount-source"));
    }
}

#[test]
fn seed_idem_and_http_findings() {
    let repo = repo_settings(&fixture("seed/head"));
    for settings in [Settings::diff_only(), repo] {
        let review = review(&seed_diff(), &settings);
        let client = "app/payments/client.py";
        for (rule, lines, severity) in [
            ("IDEM001", (49, 55), "blocker"),
            ("IDEM002", (52, 52), "important"),
            ("IDEM003", (22, 22), "important"),
            ("HTTP001", (20, 20), "important"),
        ] {
            assert!(
                has(&review, rule, client, Some(lines), severity),
                "{rule}: {:#?}",
                places(&review)
            );
        }
        // Only the paying function hears about the Redis outage, not the helper's own calls.
        assert!(
            !review
                .findings
                .iter()
                .any(|f| f.rule == "IDEM003" && f.lines != Some((22, 22)))
        );
        // httpx has a default timeout: no HTTP002 on the seed.
        assert!(!review.findings.iter().any(|f| f.rule == "HTTP002"));
        let timeout = review
            .findings
            .iter()
            .find(|f| f.rule == "HTTP001")
            .map(|f| payreview::report::resolve(f, Lang::En).message)
            .unwrap_or_default();
        assert!(timeout.contains("line 30"), "{timeout}");
        for id in [
            "idem-gateway-contract",
            "idem-cache-config",
            "idem-repeat-charges",
        ] {
            assert!(
                review.questions.iter().any(|q| q.id == id),
                "{id}: {:?}",
                review.questions
            );
        }
    }
}

#[test]
fn seed_idem_and_http_silent_on_the_fixed_seeds() {
    for dir in ["seed-fixed", "seed-fixed-nx"] {
        let diff = read(&format!("{dir}/pr.diff"));
        let repo = repo_settings(&fixture(&format!("{dir}/head")));
        for settings in [Settings::diff_only(), repo] {
            let review = review(&diff, &settings);
            assert!(
                !review
                    .findings
                    .iter()
                    .any(|f| f.rule.starts_with("IDEM") || f.rule.starts_with("HTTP")),
                "{dir}: {:#?}",
                places(&review)
            );
            assert!(
                !review.questions.iter().any(|q| q.id.starts_with("idem-")),
                "{dir}"
            );
        }
    }
}

/// The retry family's comments on the seed: the same in both modes (client.py is whole in the
/// diff).
fn assert_seed_retry(review: &payreview::review::Review) {
    let client = "app/payments/client.py";
    for (rule, lines, severity) in [
        ("RETRY001", (39, 39), "important"),
        ("RETRY002", (34, 34), "important"),
        ("RETRY004", (12, 12), "nit"),
        ("RETRY004", (13, 13), "nit"),
        ("RETRY004", (54, 54), "nit"),
    ] {
        assert!(
            has(review, rule, client, Some(lines), severity),
            "{rule} {lines:?}: {:#?}",
            places(review)
        );
    }
    // No async code in the seed.
    assert!(!review.findings.iter().any(|f| f.rule == "RETRY003"));
    let sleep = review
        .findings
        .iter()
        .find(|f| f.rule == "RETRY001")
        .map(|f| payreview::report::resolve(f, Lang::En).message)
        .unwrap_or_default();
    assert!(sleep.contains("3 × 15 s + 2 + 4 + 8 ≈ 59 s"), "{sleep}");
    assert!(sleep.contains("soft_time_limit"), "{sleep}");
    let asked: Vec<&str> = review.questions.iter().map(|q| q.id).collect();
    assert!(asked.contains(&"task-config"), "{asked:?}");
    assert!(asked.contains(&"retry-async-callers"), "{asked:?}");
}

#[test]
fn seed_retry_diff_only() {
    assert_seed_retry(&review(&seed_diff(), &Settings::diff_only()));
}

#[test]
fn seed_retry_repository_mode() {
    assert_seed_retry(&review(&seed_diff(), &repo_settings(&fixture("seed/head"))));
}

#[test]
fn seed_test_family_repository_mode() {
    let review = review(&seed_diff(), &repo_settings(&fixture("seed/head")));
    let tests = "tests/test_payments.py";
    assert!(
        has(&review, "TEST001", tests, Some((14, 23)), "important"),
        "{:#?}",
        places(&review)
    );
    assert!(has(&review, "TEST002", tests, Some((26, 38)), "important"));
    // The retry test patches `redis_client`: it does not reach Redis.
    assert!(
        !review
            .findings
            .iter()
            .any(|f| f.rule == "TEST001" && f.lines == Some((26, 38)))
    );
}

#[test]
fn seed_test_family_diff_only() {
    let review = review(&seed_diff(), &Settings::diff_only());
    let tests = "tests/test_payments.py";
    // The diff shows only the end of the old test (its `def` comes from the hunk header), so
    // the finding covers what is shown of it: lines 20-23 of 14-23.
    assert!(
        has(&review, "TEST001", tests, Some((20, 23)), "important"),
        "{:#?}",
        places(&review)
    );
    assert!(has(&review, "TEST002", tests, Some((26, 38)), "important"));
    assert!(
        !review
            .findings
            .iter()
            .any(|f| f.rule == "TEST001" && f.lines == Some((26, 38)))
    );
}

#[test]
fn the_description_that_denies_touching_billing_is_contradicted_by_the_service_change() {
    for (file, claim) in [
        (
            "seed/description.en.md",
            "Did not touch payment processing in billing",
        ),
        (
            "seed/description.ru.md",
            "Обработку платежей в биллинге не трогал",
        ),
    ] {
        let description = String::from_utf8(read(file)).expect("utf-8");
        for mut settings in [Settings::diff_only(), repo_settings(&fixture("seed/head"))] {
            settings.description = Some(description.clone());
            let review = review(&seed_diff(), &settings);
            let undeclared: Vec<_> = review
                .findings
                .iter()
                .filter(|f| f.rule == "SCOPE001")
                .collect();
            // Only the service: the client and the test are what the description is about.
            assert_eq!(undeclared.len(), 1, "{file}: {:?}", places(&review));
            let finding = undeclared[0];
            assert_eq!(finding.path, "app/payments/service.py");
            // It changes the charged amount (PAY001), so it is a blocker, and it contradicts
            // the description's own words.
            assert_eq!(finding.severity.as_str(), "blocker", "{file}");
            assert_eq!(finding.notes, ["contradicts", "amount"], "{file}");
            let contradicts = finding
                .args
                .iter()
                .find(|(k, _)| *k == "contradicts")
                .map(|(_, v)| v.as_str())
                .unwrap_or_default();
            assert!(contradicts.contains(claim), "{file}: {contradicts}");
        }
    }
    // Without a description there is nothing to check against.
    let review = review(&seed_diff(), &Settings::diff_only());
    assert!(!review.findings.iter().any(|f| f.rule == "SCOPE001"));
}
