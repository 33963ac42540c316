//! Configuration files, their precedence and errors; rule selection; suppressions; --staged.
mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::*;

fn run(dir: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    run_binary(dir, args, stdin.map(str::as_bytes))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write(dir: &Path, rel: &str, content: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, content).expect("write");
}

fn rules_of(report: &str) -> Vec<(String, String)> {
    let json: serde_json::Value = serde_json::from_str(report).expect("valid JSON");
    json["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap_or_default().to_string(),
                f["severity"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// A broad except returning None in a function that is on the payment path only if `settle` is
/// a payment operation.
const SETTLE: &str = "def close_day(ledger) -> dict:\n    try:\n        return ledger.settle()\n    except Exception:\n        return None\n";

fn settle_diff() -> String {
    added_file_diff("app/day_jobs.py", SETTLE)
}

fn review_json(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "review",
        "-",
        "--diff-only",
        "--format",
        "json",
        "--fail-on",
        "never",
    ];
    args.extend_from_slice(extra);
    run(dir, &args, Some(&settle_diff()))
}

#[test]
fn custom_payment_operations_put_a_function_on_the_payment_path() {
    let dir = tempfile::tempdir().expect("temp dir");
    let o = review_json(dir.path(), &[]);
    assert_eq!(
        rules_of(&text(&o.stdout)),
        [("ERR001".to_string(), "nit".to_string())]
    );
    write(
        dir.path(),
        "payreview.toml",
        "payment-operations = [\"settle\"]\n",
    );
    let o = review_json(dir.path(), &[]);
    assert_eq!(
        rules_of(&text(&o.stdout)),
        [("ERR001".to_string(), "blocker".to_string())]
    );
}

#[test]
fn pyproject_section_wins_over_payreview_toml() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "pyproject.toml",
        "[project]\nname = \"x\"\n\n[tool.payreview]\nignore = [\"ERR\"]\n",
    );
    write(
        dir.path(),
        "payreview.toml",
        "payment-operations = [\"settle\"]\n",
    );
    let o = review_json(dir.path(), &[]);
    assert!(rules_of(&text(&o.stdout)).is_empty(), "{}", text(&o.stdout));
    let o = run(dir.path(), &["config"], None);
    assert!(
        text(&o.stdout).contains("pyproject.toml"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn pyproject_without_a_section_is_skipped_for_the_next_candidate() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "pyproject.toml",
        "[tool.ruff]\nline-length = 100\n",
    );
    write(
        dir.path(),
        ".payreview.toml",
        "[severity]\nERR001 = \"important\"\n",
    );
    let o = review_json(dir.path(), &[]);
    assert_eq!(
        rules_of(&text(&o.stdout)),
        [("ERR001".to_string(), "important".to_string())]
    );
}

#[test]
fn config_flag_overrides_and_isolated_ignores() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), "payreview.toml", "ignore = [\"ERR001\"]\n");
    write(
        dir.path(),
        "other.toml",
        "payment-operations = [\"settle\"]\n",
    );
    assert!(rules_of(&text(&review_json(dir.path(), &[]).stdout)).is_empty());
    let o = review_json(dir.path(), &["--config", "other.toml"]);
    assert_eq!(
        rules_of(&text(&o.stdout)),
        [("ERR001".to_string(), "blocker".to_string())]
    );
    let o = review_json(dir.path(), &["--isolated"]);
    assert_eq!(
        rules_of(&text(&o.stdout)),
        [("ERR001".to_string(), "nit".to_string())]
    );
}

#[test]
fn flags_win_over_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "payreview.toml",
        "fail-on = \"nit\"\nlang = \"ru\"\n",
    );
    let o = run(
        dir.path(),
        &["review", "-", "--diff-only", "--format", "json"],
        Some(&settle_diff()),
    );
    assert_eq!(o.status.code(), Some(1), "fail-on = nit from the file");
    assert!(
        text(&o.stdout).contains("Широкий"),
        "lang = ru from the file"
    );
    let o = run(
        dir.path(),
        &[
            "review",
            "-",
            "--diff-only",
            "--format",
            "json",
            "--fail-on",
            "blocker",
            "--lang",
            "en",
        ],
        Some(&settle_diff()),
    );
    assert_eq!(o.status.code(), Some(0));
    assert!(text(&o.stdout).contains("Broad"));
}

#[test]
fn unknown_keys_and_wrong_types_name_the_key_and_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "payreview.toml",
        "fail-on = \"blocker\"\nfial-on = \"nit\"\n",
    );
    let o = review_json(dir.path(), &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("payreview.toml") && err.contains("unknown field `fial-on`"),
        "{err}"
    );
    write(dir.path(), "payreview.toml", "select = \"ERR\"\n");
    let err = text(&review_json(dir.path(), &[]).stderr);
    assert!(
        err.contains("payreview.toml") && err.contains("invalid type"),
        "{err}"
    );
    write(dir.path(), "payreview.toml", "ignore = [\"NOPE\"]\n");
    let err = text(&review_json(dir.path(), &[]).stderr);
    assert!(err.contains("no rule id starts with `NOPE`"), "{err}");
}

#[test]
fn config_prints_the_effective_configuration() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "payreview.toml",
        "select = [\"ERR\", \"DIFF\"]\nentities = [\"Booking\"]\n",
    );
    let o = run(dir.path(), &["config"], None);
    assert_eq!(o.status.code(), Some(0));
    let effective: toml::Table = toml::from_str(&text(&o.stdout)).expect("TOML");
    assert_eq!(effective["select"].as_array().map(Vec::len), Some(2));
    let entities = effective["entities"].as_array().expect("entities");
    assert!(
        entities.iter().any(|e| e.as_str() == Some("order")),
        "defaults stay"
    );
    assert!(
        entities.iter().any(|e| e.as_str() == Some("booking")),
        "additions are added"
    );
}

#[test]
fn suppressions_with_and_without_reason_and_unused_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let code = "def close_day(ledger) -> dict:\n    try:\n        return ledger.settle()\n    except Exception:  # payreview: ignore[ERR001] the nightly job retries None\n        return None\n\n\ndef refund_day(ledger) -> dict:\n    try:\n        return ledger.refund()\n    except Exception:  # payreview: ignore[ERR001]\n        return None\n\n\nTOTAL = 0  # noqa: ERR001\n";
    let diff = added_file_diff("app/payments/jobs.py", code);
    let o = run(
        dir.path(),
        &[
            "review",
            "-",
            "--diff-only",
            "--format",
            "json",
            "--fail-on",
            "never",
        ],
        Some(&diff),
    );
    let report: serde_json::Value = serde_json::from_str(&text(&o.stdout)).expect("JSON");
    let found: Vec<(String, u64)> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap_or_default().to_string(),
                f["line"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        found,
        [("SUP001".to_string(), 11), ("SUP002".to_string(), 15)]
    );
    let sups = report["suppressions"]
        .as_array()
        .expect("suppressions listed");
    let used: Vec<(u64, bool)> = sups
        .iter()
        .map(|s| {
            (
                s["line"].as_u64().unwrap_or(0),
                s["used"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert_eq!(used, [(4, true), (11, true), (15, false)]);
    assert_eq!(sups[0]["reason"], "the nightly job retries None");
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

#[test]
fn staged_reviews_the_index_not_the_work_tree() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "app/payments/pay.py",
        "def pay(gw) -> dict:\n    return gw.charge()\n",
    );
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "base"]);
    write(
        dir.path(),
        "app/payments/pay.py",
        "def pay(gw) -> dict:\n    try:\n        return gw.charge()\n    except Exception:\n        return None\n",
    );
    git(dir.path(), &["add", "-A"]);
    // An unstaged edit on top must not be what is reviewed.
    write(
        dir.path(),
        "app/payments/pay.py",
        "def pay(gw) -> dict:\n    return gw.charge()\n",
    );
    let o = run(
        dir.path(),
        &["review", "--staged", "--format", "json"],
        None,
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert_eq!(
        rules_of(&text(&o.stdout)),
        [("ERR001".to_string(), "blocker".to_string())]
    );
}

/// A payment operation under a house name: PAY001 knows it only once the configuration says so.
#[test]
fn custom_payment_operations_make_pay001_fire_on_a_renamed_function() {
    let diff = "diff --git a/app/orders/flow.py b/app/orders/flow.py\n--- a/app/orders/flow.py\n+++ b/app/orders/flow.py\n@@ -1,4 +1,4 @@\n def settle_order(order_id, amount):\n     order = get_order(order_id)\n-    ledger.post_entry(order.id, order.amount)\n+    ledger.post_entry(order.id, amount)\n     return order\n";
    let dir = tempfile::tempdir().expect("temp dir");
    let args = [
        "review",
        "-",
        "--diff-only",
        "--format",
        "json",
        "--fail-on",
        "never",
    ];
    let o = run(dir.path(), &args, Some(diff));
    assert!(rules_of(&text(&o.stdout)).is_empty(), "{}", text(&o.stdout));
    write(
        dir.path(),
        "payreview.toml",
        "payment-operations = [\"post_entry\"]\n",
    );
    let o = run(dir.path(), &args, Some(diff));
    assert_eq!(
        rules_of(&text(&o.stdout)),
        [("PAY001".to_string(), "blocker".to_string())]
    );
}

#[test]
fn rules_lists_as_json() {
    let dir = tempfile::tempdir().expect("temp dir");
    let o = run(dir.path(), &["rules", "--format", "json"], None);
    let rows: serde_json::Value = serde_json::from_str(&text(&o.stdout)).expect("JSON");
    let rows = rows.as_array().expect("array");
    assert_eq!(rows.len(), payreview::rules::ALL.len());
    for row in rows {
        let keys: Vec<&str> = row
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys.len(), 4, "{keys:?}");
        for key in ["id", "name", "severity", "title"] {
            assert!(
                row[key].as_str().is_some_and(|v| !v.is_empty()),
                "{key} in {row}"
            );
        }
    }
}
