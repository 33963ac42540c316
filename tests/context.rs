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
    // The formula is RETRY001's, with the units in the report's language.
    let ru = message(f, Lang::Ru);
    assert!(
        ru.contains("3 × 15 с + 2 + 4 + 8 ≈ 59 с") && ru.contains("`soft_time_limit=30` у таска"),
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
fn exhausted_retries_name_the_task_that_stops_retrying() {
    let review = context_review();
    assert!(has(&review, "ERR002", CLIENT, Some((45, 46)), "blocker"));
    let f = finding(&review, "ERR002").expect("ERR002");
    let text = message(f, Lang::En);
    assert!(text.contains("`charge_order` (app/tasks.py:9)"), "{text}");
    // The concrete note replaces the general one about what a task might do.
    assert!(
        !text.contains("with `autoretry_for=(Exception,)`"),
        "{text}"
    );
    assert_eq!(f.evidence.len(), 1);
}

#[test]
fn questions_the_repository_answers_are_not_asked() {
    let review = context_review();
    let asked = asked(&review);
    assert!(!asked.contains(&"task-config"), "{asked:?}");
    assert!(!asked.contains(&"idem-cache-config"), "{asked:?}");
    // Only the Celery task runs it, and nothing on the way up is `async def`.
    assert!(!asked.contains(&"retry-async-callers"), "{asked:?}");
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
        assert!(asked.contains(&"retry-async-callers"), "{asked:?}");
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

#[test]
fn sarif_with_related_locations_follows_the_schema() {
    let review = context_review();
    let mut out = Vec::new();
    report::render(&review, Format::Sarif, Lang::Ru, &mut out).expect("renders");
    let sarif: serde_json::Value = serde_json::from_slice(&out).expect("SARIF is JSON");
    let schema =
        std::fs::read_to_string(root().join("tests/data/sarif-schema-2.1.0.json")).expect("schema");
    let schema: serde_json::Value = serde_json::from_str(&schema).expect("schema is JSON");
    let validator = jsonschema::options()
        .build(&schema)
        .expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&sarif)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let related: Vec<&serde_json::Value> = sarif["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter_map(|r| r.get("relatedLocations"))
        .collect();
    assert_eq!(
        related.len(),
        5,
        "IDEM002, ERR002, ERR003, RETRY005 and TEST001 cite a place"
    );
}

/// A repository around one added client module, for the shapes of clients and tasks the rules
/// must recognise whatever they are called.
fn added_module_review(module: &str, files: &[(&str, &str)]) -> Review {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut all = files.to_vec();
    all.push(("app/payments/gateway.py", module));
    for (path, text) in &all {
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(file, text).expect("write");
    }
    let diff = added_file_diff("app/payments/gateway.py", module);
    review(diff.as_bytes(), &repo_settings(dir.path()))
}

#[test]
fn an_async_client_imported_as_a_module_attribute_is_resolved() {
    let module = "import httpx\n\nimport app.store as store\n\n\nasync def idempotency_key(order_id: str) -> str:\n    cached = await store.kv.get(f\"idem:{order_id}\")\n    if cached is not None:\n        return cached.decode()\n    return order_id\n\n\nasync def pay(order_id: str) -> dict:\n    key = await idempotency_key(order_id)\n    async with httpx.AsyncClient() as client:\n        response = await client.post(\"https://psp.example/pay\", headers={\"Idempotency-Key\": key}, timeout=5)\n    return response.json()\n";
    let store = "from redis import asyncio as aioredis\n\nkv = aioredis.from_url(\"redis://cache\", decode_responses=True)\n";
    let review = added_module_review(module, &[("app/store.py", store)]);
    let f = finding(&review, "IDEM002").unwrap_or_else(|| panic!("{:#?}", places(&review)));
    assert_eq!(f.severity.as_str(), "blocker", "{:#?}", places(&review));
    assert_eq!(f.evidence[0].path, "app/store.py");
    assert_eq!(f.evidence[0].line, 3);
}

#[test]
fn a_bare_app_task_decorator_is_a_task_without_limits() {
    let module = "import time\n\nimport httpx\n\n\ndef charge(order_id: str) -> dict:\n    for attempt in range(5):\n        try:\n            response = httpx.post(\"https://psp.example/charge\", json={\"order\": order_id}, timeout=30)\n            response.raise_for_status()\n            return response.json()\n        except httpx.TransportError:\n            time.sleep(2 ** attempt)\n    raise RuntimeError(\"gateway down\")\n";
    let tasks = "from app.payments.gateway import charge\nfrom app.worker import app\n\n\n@app.task\ndef charge_task(order_id):\n    charge(order_id)\n";
    let review = added_module_review(module, &[("app/tasks.py", tasks)]);
    // Found, so not asked about; without limits there is nothing to exceed.
    assert!(
        !asked(&review).contains(&"task-config"),
        "{:?}",
        review.questions
    );
    assert!(finding(&review, "RETRY005").is_none());
    let limited = tasks.replace("@app.task", "@app.task(time_limit=60)");
    let review = added_module_review(module, &[("app/tasks.py", &limited)]);
    let f = finding(&review, "RETRY005").unwrap_or_else(|| panic!("{:#?}", places(&review)));
    // 5 × 30 s + 1 + 2 + 4 + 8 + 16 ≈ 181 s, and no idempotency key at all.
    assert!(
        message(f, Lang::En).contains("≈ 181 s"),
        "{}",
        message(f, Lang::En)
    );
    assert_eq!(f.severity.as_str(), "blocker");
}

#[test]
fn a_task_decorator_from_the_configuration_is_recognised() {
    let module = "import time\n\nimport httpx\n\n\ndef charge(order_id: str) -> dict:\n    for attempt in range(5):\n        try:\n            response = httpx.post(\"https://psp.example/charge\", json={\"order\": order_id}, timeout=30)\n            response.raise_for_status()\n            return response.json()\n        except httpx.TransportError:\n            time.sleep(2 ** attempt)\n    raise RuntimeError(\"gateway down\")\n";
    let tasks = "from app.payments.gateway import charge\nfrom app.worker import worker\n\n\n@worker.background(time_limit=60)\ndef charge_task(order_id):\n    charge(order_id)\n";
    let plain = added_module_review(module, &[("app/tasks.py", tasks)]);
    assert!(finding(&plain, "RETRY005").is_none());
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in [("app/tasks.py", tasks), ("app/payments/gateway.py", module)] {
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(file, text).expect("write");
    }
    let mut settings = repo_settings(dir.path());
    settings
        .vocabulary
        .task_decorators
        .push("worker.background".to_string());
    let diff = added_file_diff("app/payments/gateway.py", module);
    let review = review(diff.as_bytes(), &settings);
    assert!(
        finding(&review, "RETRY005").is_some(),
        "{:#?}",
        places(&review)
    );
}

#[test]
fn unreadable_or_odd_files_are_left_out_of_the_index_quietly() {
    let dir = variant(&[]);
    let root = dir.path();
    std::fs::write(root.join("app/latin1.py"), b"x = '\xe9\xff'\ndef f(:\n").expect("write");
    std::fs::write(root.join("app/broken.py"), "def (((\n@@@\n").expect("write");
    std::fs::write(root.join("app/empty.py"), "").expect("write");
    let mut settings = repo_settings(root);
    let big = "x = 1\n".repeat(50_000);
    std::fs::write(root.join("app/big.py"), &big).expect("write");
    settings.max_file_bytes = 200_000;
    if let payreview::source::Workspace::Repository { repo, .. } = &mut settings.workspace {
        *repo = payreview::source::Repo::open(root, 200_000).expect("repo");
    }
    let review = review(&seed_diff(), &settings);
    // The context is still found, and the files that could not be indexed are no error of the
    // review.
    assert!(has(&review, "IDEM002", CLIENT, Some((52, 52)), "blocker"));
    assert!(finding(&review, "RETRY005").is_some());
    assert!(review.errors.is_empty(), "{:?}", review.errors);
}

#[test]
fn a_test_outside_the_change_that_now_reaches_redis_is_reported_on_the_function() {
    let review = context_review();
    let outside: Vec<&Finding> = review
        .findings
        .iter()
        .filter(|f| f.rule == "TEST001" && f.path == CLIENT)
        .collect();
    assert_eq!(outside.len(), 1, "{:#?}", places(&review));
    let f = outside[0];
    assert_eq!(f.lines, Some((16, 16)), "the `def create_charge` line");
    let cited: Vec<(&str, u32)> = f
        .evidence
        .iter()
        .map(|e| (e.path.as_str(), e.line))
        .collect();
    // The test that patches `redis_client` is not cited.
    assert_eq!(cited, [("tests/test_charges_contract.py", 9)]);
    let text = message(f, Lang::En);
    assert!(text.contains("test_charge_sends_the_order"), "{text}");
    assert!(text.contains("does not show"), "{text}");
    // The tests in the diff are still reported where they are.
    assert!(has(
        &review,
        "TEST001",
        "tests/test_payments.py",
        Some((14, 23)),
        "important"
    ));
}

#[test]
fn repository_tests_marked_live_by_their_module_or_class_are_left_alone() {
    let contract =
        std::fs::read_to_string(fixture("seed-context/head/tests/test_charges_contract.py"))
            .expect("contract tests");
    let outside = |review: &Review| {
        review
            .findings
            .iter()
            .filter(|f| f.rule == "TEST001" && f.path == CLIENT)
            .count()
    };
    let imports = "from unittest.mock import patch\n";
    // The module's marks: run on request only, as its decorators would say.
    let module = contract.replace(
        imports,
        &format!("{imports}\nimport pytest\n\npytestmark = [pytest.mark.integration, pytest.mark.django_db]\n"),
    );
    assert_ne!(module, contract);
    let dir = variant(&[("tests/test_charges_contract.py", &module)]);
    assert_eq!(
        outside(&review(&seed_diff(), &repo_settings(dir.path()))),
        0
    );
    // A class's: its tests only.
    let test = "@patch(\"app.payments.client.httpx.post\")\ndef test_charge_sends_the_order(mock_post):\n    mock_post.return_value.json.return_value = {\"id\": \"ch_1\", \"status\": \"succeeded\"}\n    create_charge(\"order-9\", 100, \"RUB\")\n    assert mock_post.call_args.kwargs[\"json\"][\"order_id\"] == \"order-9\"\n";
    let in_class = "import pytest\n\n\nclass TestLive:\n    pytestmark = pytest.mark.live\n\n    @patch(\"app.payments.client.httpx.post\")\n    def test_charge_sends_the_order(self, mock_post):\n        mock_post.return_value.json.return_value = {\"id\": \"ch_1\", \"status\": \"succeeded\"}\n        create_charge(\"order-9\", 100, \"RUB\")\n        assert mock_post.call_args.kwargs[\"json\"][\"order_id\"] == \"order-9\"\n";
    let class = contract.replace(test, in_class);
    assert_ne!(class, contract);
    let dir = variant(&[("tests/test_charges_contract.py", &class)]);
    assert_eq!(
        outside(&review(&seed_diff(), &repo_settings(dir.path()))),
        0
    );
    // A mark that says nothing of how a test runs leaves it reported.
    let plain = contract.replace(
        imports,
        &format!("{imports}\nimport pytest\n\npytestmark = pytest.mark.django_db\n"),
    );
    let dir = variant(&[("tests/test_charges_contract.py", &plain)]);
    assert_eq!(
        outside(&review(&seed_diff(), &repo_settings(dir.path()))),
        1
    );
}

#[test]
fn repository_context_is_identical_whatever_the_thread_count() {
    let diff = fixture("seed/pr.diff");
    let repo = fixture("seed-context/head");
    let run = |threads: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_payreview"))
            .args(["review", "--format", "sarif", "--isolated", "--repo"])
            .arg(&repo)
            .arg(&diff)
            .env("RAYON_NUM_THREADS", threads)
            .env_remove("PAYREVIEW_LANG")
            .output()
            .expect("binary runs");
        out.stdout
    };
    let one = run("1");
    assert!(String::from_utf8_lossy(&one).contains("relatedLocations"));
    assert_eq!(one, run("8"));
    assert_eq!(one, run("3"));
}

#[test]
fn autoretry_through_a_constant_is_read_and_exception_still_retries() {
    let constant = "import httpx\n\nfrom app.celery_app import celery_app\nfrom app.payments.service import process_order_payment\n\nRETRYABLE = (httpx.TimeoutException, httpx.ConnectError)\n\n\n@celery_app.task(autoretry_for=RETRYABLE, soft_time_limit=30)\ndef charge_order(order_id, amount, currency):\n    process_order_payment(order_id, amount, currency)\n";
    let dir = variant(&[("app/tasks.py", constant)]);
    let first = review(&seed_diff(), &repo_settings(dir.path()));
    let err = finding(&first, "ERR003").expect("ERR003");
    let text = message(err, Lang::En);
    assert!(
        text.contains("httpx.TimeoutException, httpx.ConnectError"),
        "{text}"
    );
    // With `autoretry_for=(Exception,)` the `AttributeError` is retried: nothing is lost.
    let broad = constant.replace("autoretry_for=RETRYABLE", "autoretry_for=(Exception,)");
    let dir = variant(&[("app/tasks.py", &broad)]);
    let second = review(&seed_diff(), &repo_settings(dir.path()));
    let err = finding(&second, "ERR003").expect("ERR003");
    assert!(err.evidence.is_empty());
    assert!(!message(err, Lang::En).contains("no longer fires"));
}

#[test]
fn an_async_retry_loop_run_by_a_task_is_held_to_its_limit() {
    let module = "import asyncio\n\nimport httpx\n\n\nasync def refund(refund_id: str) -> dict:\n    async with httpx.AsyncClient() as client:\n        for attempt in range(4):\n            try:\n                response = await client.post(f\"https://psp.example/refunds/{refund_id}\", timeout=10)\n                response.raise_for_status()\n                return response.json()\n            except httpx.TransportError:\n                if attempt == 3:\n                    raise\n                await asyncio.sleep(5)\n    raise RuntimeError(\"unreachable\")\n";
    let tasks = "import asyncio\n\nfrom celery import shared_task\n\nfrom app.payments.gateway import refund\n\n\n@shared_task(soft_time_limit=45)\ndef refund_task(refund_id):\n    return asyncio.run(refund(refund_id))\n";
    let review = added_module_review(module, &[("app/tasks.py", tasks)]);
    let f = finding(&review, "RETRY005").unwrap_or_else(|| panic!("{:#?}", places(&review)));
    // 4 attempts × 10 s and 3 sleeps of 5 s (none after the last attempt).
    let text = message(f, Lang::En);
    assert!(text.contains("4 × 10 s + 5 + 5 + 5 ≈ 55 s"), "{text}");
    assert!(text.contains("soft_time_limit=45"), "{text}");
}

#[test]
fn a_task_whose_options_hide_in_a_splat_is_still_asked_about() {
    let tasks = "from app.celery_app import celery_app\nfrom app.payments.service import process_order_payment\nfrom app.settings import TASK_OPTIONS\n\n\n@celery_app.task(**TASK_OPTIONS)\ndef charge_order(order_id, amount, currency):\n    process_order_payment(order_id, amount, currency)\n";
    let dir = variant(&[("app/tasks.py", tasks)]);
    let review = review(&seed_diff(), &repo_settings(dir.path()));
    assert!(
        asked(&review).contains(&"task-config"),
        "{:?}",
        review.questions
    );
    assert!(finding(&review, "RETRY005").is_none());
}

#[test]
fn indexing_every_fixture_is_quiet_and_deterministic() {
    // Hundreds of files of every shape the project keeps as fixtures, some of them broken.
    let repo = payreview::source::Repo::open(&root().join("fixtures"), 1 << 20).expect("repo");
    let focus: std::collections::BTreeSet<String> = ["create_charge", "charge", "get", "pay"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let build = || {
        let listing = payreview::index::Listing::start(repo.root(), payreview::index::MAX_FILES);
        let (index, errors) = payreview::index::ProjectIndex::build(
            &repo,
            listing,
            &std::collections::BTreeSet::new(),
            std::collections::BTreeMap::new(),
            &focus,
        );
        assert!(errors.is_empty(), "{errors:?}");
        format!("{:?}", index.modules())
    };
    let first = build();
    assert!(first.contains("seed-context/head/app/tasks.py"));
    assert_eq!(first, build());
}

#[test]
fn a_test_module_with_an_autouse_fake_cache_is_not_cited() {
    let covered = "import fakeredis\nimport pytest\nfrom unittest.mock import patch\n\nfrom app.payments.client import create_charge\n\n\n@pytest.fixture(autouse=True)\ndef fake_cache(monkeypatch):\n    monkeypatch.setattr(\"app.payments.client.redis_client\", fakeredis.FakeRedis())\n\n\n@patch(\"app.payments.client.httpx.post\")\ndef test_charge_with_a_fake_cache(mock_post):\n    create_charge(\"order-11\", 100, \"RUB\")\n";
    let dir = variant(&[("tests/test_charges_fake.py", covered)]);
    let review = review(&seed_diff(), &repo_settings(dir.path()));
    let f = review
        .findings
        .iter()
        .find(|f| f.rule == "TEST001" && f.path == CLIENT)
        .expect("the contract test is still cited");
    let cited: Vec<&str> = f.evidence.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(cited, ["tests/test_charges_contract.py"]);
}

/// Many files whose rules all ask for the index at once, on many threads: the index is built
/// once, nobody deadlocks waiting for it, and the output does not depend on the thread count.
#[test]
fn many_rules_asking_for_the_index_at_once_neither_deadlock_nor_differ() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let write = |rel: &str, text: &str| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write(
        "app/cache.py",
        "import redis\n\nredis_client = redis.Redis(decode_responses=True)\n",
    );
    let mut diff = String::new();
    for n in 0..40 {
        let text = format!(
            "from app.cache import redis_client\n\n\ndef key_{n}(order_id: str) -> str:\n    cached = redis_client.get(\"idem:\" + order_id)\n    if cached is not None:\n        return cached.decode()\n    return order_id\n"
        );
        let rel = format!("app/payments/m{n:02}.py");
        write(&rel, &text);
        diff.push_str(&added_file_diff(&rel, &text));
    }
    for n in 0..600 {
        let m = n % 40;
        write(
            &format!("app/filler/f{n}.py"),
            &format!(
                "from app.payments.m{m:02} import key_{m}\n\n\ndef use_{n}(o):\n    return key_{m}(o)\n"
            ),
        );
    }
    write("pr.diff", &diff);
    let run = |threads: &str| {
        // The report goes to a file: a full pipe would block the child and look like a hang.
        let out = root.join(format!("out-{threads}.json"));
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_payreview"))
            .args([
                "review",
                "pr.diff",
                "--repo",
                ".",
                "--format",
                "json",
                "--isolated",
            ])
            .arg("--output")
            .arg(&out)
            .current_dir(root)
            .env("RAYON_NUM_THREADS", threads)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("binary runs");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        loop {
            if child.try_wait().expect("wait").is_some() {
                break;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("the review did not finish with {threads} threads");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::fs::read(&out).expect("report written")
    };
    let one = run("1");
    let text = String::from_utf8_lossy(&one);
    assert_eq!(text.matches("\"rule\": \"IDEM002\"").count(), 40, "{text}");
    assert_eq!(text.matches("\"severity\": \"blocker\"").count(), 40);
    for threads in ["8", "3", "8"] {
        assert_eq!(one, run(threads), "{threads} threads");
    }
}

#[test]
fn a_client_the_class_builds_for_itself_is_resolved() {
    let module = "import redis\n\nfrom app.settings import REDIS_URL\n\n\nclass PaymentKeys:\n    def __init__(self):\n        self.store = redis.Redis.from_url(REDIS_URL, decode_responses=True)\n\n    def payment_key(self, payment_id: str) -> str:\n        cached = self.store.get(\"pay:\" + payment_id)\n        if cached is not None:\n            return cached.decode()\n        return payment_id\n";
    let review = added_module_review(
        module,
        &[("app/settings.py", "REDIS_URL = \"redis://cache\"\n")],
    );
    let f = finding(&review, "IDEM002").unwrap_or_else(|| panic!("{:#?}", places(&review)));
    assert_eq!(f.severity.as_str(), "blocker");
    let cited: Vec<(&str, u32)> = f
        .evidence
        .iter()
        .map(|e| (e.path.as_str(), e.line))
        .collect();
    assert_eq!(cited, [("app/payments/gateway.py", 8)]);
    assert!(message(f, Lang::En).contains("`PaymentKeys.store` is built"));
    // Injected, it stays a question.
    let injected = module
        .replace(
            "def __init__(self):\n        self.store = redis.Redis.from_url(REDIS_URL, decode_responses=True)",
            "def __init__(self, redis_cache):\n        self.redis_cache = redis_cache",
        )
        .replace("self.store.get", "self.redis_cache.get");
    let review = added_module_review(&injected, &[]);
    assert!(
        has(
            &review,
            "IDEM002",
            "app/payments/gateway.py",
            Some((13, 13)),
            "important"
        ),
        "{:#?}",
        places(&review)
    );
    assert!(review.findings.iter().all(|f| f.evidence.is_empty()));
}

#[test]
fn a_caller_outside_the_diff_that_trusts_the_old_contract_is_reported_on_its_file() {
    const REFUNDS: &str = "app/payments/refunds.py";
    const SAFE: &str = "app/payments/safe.py";
    let dir = variant(&[
        (
            REFUNDS,
            "from app.payments.client import create_charge\n\n\ndef recharge(order):\n    result = create_charge(order.id, order.amount, order.currency)\n    order.charge_id = result.id\n    order.save()\n",
        ),
        (
            SAFE,
            "from app.payments.client import create_charge\n\n\ndef try_charge(order):\n    result = create_charge(order.id, order.amount, order.currency)\n    if result is None:\n        raise RuntimeError(\"charge failed\")\n    return result.id\n",
        ),
    ]);
    let review = review(&seed_diff(), &repo_settings(dir.path()));
    let outside: Vec<&Finding> = review
        .findings
        .iter()
        .filter(|f| f.rule == "ERR003" && f.path == REFUNDS)
        .collect();
    assert_eq!(outside.len(), 1, "{:?}", places(&review));
    let f = outside[0];
    // A file-level finding: the file is not in the diff, so no line comment on unchanged code.
    assert_eq!(f.lines, None);
    assert!(f.notes.contains(&"outside"));
    assert_eq!(
        f.evidence
            .iter()
            .map(|e| (e.path.as_str(), e.line))
            .collect::<Vec<_>>(),
        [(REFUNDS, 5)]
    );
    let text = message(f, Lang::En);
    assert!(text.contains("`result` is used on line 6"), "{text}");
    assert!(text.contains("not in the diff"), "{text}");
    // The caller that checks for `None` is fine.
    assert!(
        !review.findings.iter().any(|f| f.path == SAFE),
        "{:?}",
        places(&review)
    );
    // The Markdown report lists it apart from the line comments.
    let mut md = Vec::new();
    report::render(
        &review,
        payreview::config::Format::Markdown,
        Lang::En,
        &mut md,
    )
    .expect("md");
    let md = String::from_utf8(md).expect("utf-8");
    let outside_at = md.find("Outside this diff").expect("an outside section");
    assert!(md[outside_at..].contains("app/payments/refunds.py"), "{md}");
    // Without the repository nothing can be said about files the diff does not show.
    let alone = payreview::review_diff(&seed_diff(), &payreview::config::Settings::diff_only())
        .expect("parses");
    assert!(!alone.findings.iter().any(|f| f.path == REFUNDS));
}

#[test]
fn the_sleep_finding_stops_asking_for_the_task_limits_once_they_are_known() {
    let limits_noted = |review: &Review| {
        review
            .findings
            .iter()
            .find(|f| f.rule == "RETRY001")
            .map(|f| f.notes.contains(&"limits"))
    };
    // With the task in the repository, RETRY005 has compared the numbers already.
    assert_eq!(limits_noted(&context_review()), Some(false));
    // Without it, the sleep finding still says what to compare.
    let plain = review(&seed_diff(), &repo_settings(&fixture("seed/head")));
    assert_eq!(limits_noted(&plain), Some(true));
}

#[test]
fn a_proven_decoding_client_changes_what_the_decode_comment_is_titled() {
    let title = |review: &Review, lang: Lang| {
        let f = finding(review, "IDEM002").expect("IDEM002");
        report::resolve(f, lang).title
    };
    let context = context_review();
    assert_eq!(
        title(&context, Lang::En),
        "`.decode()` on a value the Redis client already decodes to `str`"
    );
    assert_eq!(
        title(&context, Lang::Ru),
        "`.decode()` значения, которое клиент Redis уже декодирует в `str`"
    );
    // Unknown configuration: the title says it depends.
    let plain = review(&seed_diff(), &repo_settings(&fixture("seed/head")));
    assert!(title(&plain, Lang::En).contains("depends on the client's configuration"));
}

#[test]
fn an_async_endpoint_on_the_way_to_the_client_keeps_the_async_question() {
    // Besides the task, a FastAPI-style endpoint awaits nothing but calls the service directly:
    // the blocking retry would stall its event loop.
    let dir = variant(&[(
        "app/api.py",
        "from app.payments.service import process_order_payment\n\n\nasync def pay_now(order_id: str, amount: int, currency: str):\n    process_order_payment(order_id, amount, currency)\n    return {\"ok\": True}\n",
    )]);
    let review = review(&seed_diff(), &repo_settings(dir.path()));
    let asked = asked(&review);
    assert!(asked.contains(&"retry-async-callers"), "{asked:?}");
    // The task is still found, and its own question still answered.
    assert!(!asked.contains(&"task-config"), "{asked:?}");
}
