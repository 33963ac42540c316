//! Repository context (fixtures/seed-context): the review reads the Celery task and the Redis
//! client from the repository instead of asking about them.
mod common;

use std::path::Path;

use common::*;
use payreview::config::{Format, Settings};
use payreview::report;
use payreview::review::{Finding, Lang, Review};

const CLIENT: &str = "app/payments/client.py";
const SERVICE: &str = "app/payments/service.py";

fn seed_diff() -> Vec<u8> {
    read("seed/pr.diff")
}

fn context_review() -> Review {
    review(&seed_diff(), &repo_settings(&fixture("seed-context/head")))
}

fn finding<'r>(review: &'r Review, rule: &str) -> Option<&'r Finding> {
    review.findings.iter().find(|f| f.rule == rule)
}

fn message(f: &Finding, lang: Lang) -> String {
    report::resolve(f, lang).message
}

fn asked(review: &Review) -> Vec<&str> {
    review.questions.iter().map(|q| q.id).collect()
}

/// A copy of the seed-context head in a temporary directory (not a git work tree), with
/// `changes` written over it.
fn variant(changes: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_tree(&fixture("seed-context/head"), dir.path());
    for (path, text) in changes {
        std::fs::write(dir.path().join(path), text).expect("write");
    }
    dir
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

#[test]
fn decode_of_a_value_from_a_decoding_client_is_a_blocker_citing_the_client() {
    let review = context_review();
    assert!(
        has(&review, "IDEM002", CLIENT, Some((52, 52)), "blocker"),
        "{:#?}",
        places(&review)
    );
    let f = finding(&review, "IDEM002").expect("IDEM002");
    let cited: Vec<(&str, u32)> = f
        .evidence
        .iter()
        .map(|e| (e.path.as_str(), e.line))
        .collect();
    assert_eq!(cited, [("app/cache.py", 7)]);
    assert!(message(f, Lang::En).contains("decode_responses=True"));
    assert!(message(f, Lang::Ru).contains("app/cache.py:7"));
}

#[test]
fn retry_budget_over_the_task_limit_is_reported_with_the_task() {
    let review = context_review();
    let f = finding(&review, "RETRY005").unwrap_or_else(|| panic!("{:#?}", places(&review)));
    assert_eq!(f.path, CLIENT);
    // The idempotency key is a fresh uuid cached in Redis: a re-run may send another one.
    assert_eq!(f.severity.as_str(), "blocker");
    let text = message(f, Lang::En);
    assert!(text.contains("3 × 15 s + 2 + 4 + 8 ≈ 59 s"), "{text}");
    assert!(text.contains("soft_time_limit=30"), "{text}");
    assert!(text.contains("app/tasks.py:9"), "{text}");
    let cited: Vec<(&str, u32)> = f
        .evidence
        .iter()
        .map(|e| (e.path.as_str(), e.line))
        .collect();
    assert_eq!(cited, [("app/tasks.py", 9)]);
    // The formula is RETRY001's, units as it writes them; the limit is in the message's words.
    let ru = message(f, Lang::Ru);
    assert!(
        ru.contains("≈ 59 s") && ru.contains("soft_time_limit=30` с"),
        "{ru}"
    );
}

#[test]
fn the_contract_change_says_the_tasks_autoretry_no_longer_fires() {
    let review = context_review();
    assert!(
        has(&review, "ERR003", SERVICE, Some((28, 30)), "important"),
        "{:#?}",
        places(&review)
    );
    let f = finding(&review, "ERR003").expect("ERR003");
    let text = message(f, Lang::En);
    assert!(text.contains("autoretry no longer fires"), "{text}");
    assert!(text.contains("httpx.HTTPError"), "{text}");
    assert_eq!(f.evidence.len(), 1);
    assert_eq!(f.evidence[0].path, "app/tasks.py");
    assert_eq!(f.evidence[0].line, 9);
    assert!(message(f, Lang::Ru).contains("autoretry таска больше не срабатывает"));
}

#[test]
fn questions_the_repository_answers_are_not_asked() {
    let review = context_review();
    let asked = asked(&review);
    assert!(!asked.contains(&"task-config"), "{asked:?}");
    assert!(!asked.contains(&"idem-cache-config"), "{asked:?}");
    // What no code shows is still asked.
    assert!(asked.contains(&"idem-cache-durability"), "{asked:?}");
    assert!(asked.contains(&"idem-gateway-contract"), "{asked:?}");
    let mut out = Vec::new();
    report::render(&review, Format::Markdown, Lang::En, &mut out).expect("renders");
    let markdown = String::from_utf8(out).expect("utf-8");
    assert!(
        !markdown.contains("The Celery task that calls"),
        "{markdown}"
    );
    assert!(
        markdown.contains("Evidence: `app/tasks.py:9`"),
        "{markdown}"
    );
}

#[test]
fn without_the_repository_the_questions_come_back() {
    for review in [
        review(&seed_diff(), &Settings::diff_only()),
        review(&seed_diff(), &repo_settings(&fixture("seed/head"))),
    ] {
        let asked = asked(&review);
        assert!(asked.contains(&"task-config"), "{asked:?}");
        assert!(asked.contains(&"idem-cache-config"), "{asked:?}");
        assert!(finding(&review, "RETRY005").is_none());
        assert!(has(&review, "IDEM002", CLIENT, Some((52, 52)), "important"));
        assert!(review.findings.iter().all(|f| f.evidence.is_empty()));
    }
}

#[test]
fn a_client_that_returns_bytes_makes_the_decode_right() {
    for construction in [
        "redis_client = redis.Redis.from_url(REDIS_URL)",
        "redis_client = redis.Redis.from_url(REDIS_URL, decode_responses=False)",
    ] {
        let cache =
            format!("import redis\n\nfrom app.settings import REDIS_URL\n\n{construction}\n");
        let dir = variant(&[("app/cache.py", &cache)]);
        let review = review(&seed_diff(), &repo_settings(dir.path()));
        assert!(
            finding(&review, "IDEM002").is_none(),
            "{construction}: {:#?}",
            places(&review)
        );
        assert!(!asked(&review).contains(&"idem-cache-config"));
    }
}

#[test]
fn a_client_built_from_options_stays_a_question() {
    let cache = "import redis\n\nfrom app.settings import REDIS_OPTIONS, REDIS_URL\n\nredis_client = redis.Redis.from_url(REDIS_URL, **REDIS_OPTIONS)\n";
    let dir = variant(&[("app/cache.py", cache)]);
    let review = review(&seed_diff(), &repo_settings(dir.path()));
    assert!(has(&review, "IDEM002", CLIENT, Some((52, 52)), "important"));
    assert!(asked(&review).contains(&"idem-cache-config"));
    // The task is still found: its question stays answered.
    assert!(!asked(&review).contains(&"task-config"));
}

#[test]
fn a_task_with_room_for_the_retries_gets_no_retry005() {
    let tasks = "import httpx\n\nfrom app.celery_app import celery_app\nfrom app.payments import service\n\nSOFT_LIMIT_SECONDS = 5 * 60\n\n\n@celery_app.task(bind=True, autoretry_for=(httpx.HTTPError,), soft_time_limit=SOFT_LIMIT_SECONDS)\ndef charge_order(self, order_id, amount, currency):\n    service.process_order_payment(order_id, amount, currency)\n";
    let dir = variant(&[("app/tasks.py", tasks)]);
    let review = review(&seed_diff(), &repo_settings(dir.path()));
    assert!(
        finding(&review, "RETRY005").is_none(),
        "{:#?}",
        places(&review)
    );
    // Found through `from app.payments import service`: still no task question, and the
    // autoretry is still lost.
    assert!(!asked(&review).contains(&"task-config"));
    let err = finding(&review, "ERR003").expect("ERR003");
    assert_eq!(err.evidence.first().map(|e| e.line), Some(9));
}

#[test]
fn a_shared_task_with_a_constant_limit_is_found() {
    let tasks = "from celery import shared_task\n\nfrom app.payments.service import process_order_payment as pay\n\nLIMIT = 20\n\n\n@shared_task(time_limit=LIMIT)\ndef charge_order(order_id, amount, currency):\n    pay(order_id, amount, currency)\n";
    let dir = variant(&[("app/tasks.py", tasks)]);
    let review = review(&seed_diff(), &repo_settings(dir.path()));
    let f = finding(&review, "RETRY005").unwrap_or_else(|| panic!("{:#?}", places(&review)));
    let text = message(f, Lang::En);
    assert!(text.contains("time_limit=20"), "{text}");
    // No autoretry_for: nothing to lose, no note.
    let err = finding(&review, "ERR003").expect("ERR003");
    assert!(err.evidence.is_empty());
}

#[test]
fn every_format_shows_the_evidence_and_output_is_stable() {
    let review = context_review();
    for (format, needle) in [
        (Format::Json, "\"evidence\""),
        (Format::Sarif, "relatedLocations"),
        (Format::Text, "app/tasks.py:9"),
        (Format::Markdown, "app/cache.py:7"),
    ] {
        let mut out = Vec::new();
        report::render(&review, format, Lang::En, &mut out).expect("renders");
        let text = String::from_utf8(out).expect("utf-8");
        assert!(text.contains(needle), "{format:?}: {text}");
    }
    let again = context_review();
    assert_eq!(json(&review, Lang::En), json(&again, Lang::En));
}
