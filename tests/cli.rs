//! The built binary: exit statuses, standard input, diagnostics, the catalogue commands.
mod common;

use std::process::{Command, Output};

use clap::Parser;
use common::*;

fn payreview(args: &[&str], stdin: Option<&[u8]>) -> Output {
    run_binary(&root(), args, stdin)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Standard error as one line of words: miette wraps a diagnostic to the width of its gutter,
/// so where a line breaks depends on the length of the paths in it.
fn stderr_words(o: &Output) -> String {
    stderr(o)
        .split_whitespace()
        .filter(|w| !["│", "×"].contains(w))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn blocker_gives_exit_1_and_fail_on_never_gives_0() {
    let diff = fixture("seed/pr.diff");
    let diff = diff.to_str().expect("utf-8 path");
    let o = payreview(&["review", diff, "--diff-only", "--format", "json"], None);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("valid JSON");
    assert_eq!(report["verdict"]["decision"], "request-changes");
    let o = payreview(&["review", diff, "--diff-only", "--fail-on", "never"], None);
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn reads_the_diff_from_standard_input() {
    let o = payreview(
        &["review", "-", "--diff-only", "--format", "json"],
        Some(&read("seed/pr.diff")),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("\"rule\": \"ERR001\""));
}

#[test]
fn clean_change_exits_0() {
    let diff = added_file_diff(
        "app/util.py",
        "def double(x: int) -> int:\n    return 2 * x\n",
    );
    let o = payreview(
        &["review", "-", "--diff-only", "--format", "json"],
        Some(diff.as_bytes()),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("valid JSON");
    assert_eq!(report["verdict"]["decision"], "approve");
    assert_eq!(report["files"][0]["status"], "added");
    assert_eq!(report["files"][0]["added"], 2);
}

#[test]
fn malformed_diff_gives_exit_2_and_points_at_the_line() {
    let diff = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-a\n+b\n";
    let o = payreview(&["review", "-", "--diff-only"], Some(diff.as_bytes()));
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("diff line"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn empty_input_is_an_error_not_a_panic() {
    let o = payreview(&["review", "-", "--diff-only"], Some(b""));
    assert_eq!(o.status.code(), Some(2));
    assert!(!stderr(&o).contains("panicked"));
}

#[test]
fn missing_diff_file_is_an_input_error() {
    let o = payreview(&["review", "no/such.diff", "--diff-only"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("could not read the diff from no/such.diff"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let o = payreview(&["review", "--frobnicate"], None);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn every_format_renders_from_the_command_line() {
    for format in ["text", "json", "markdown", "sarif", "github"] {
        for lang in ["en", "ru"] {
            let o = payreview(
                &[
                    "review",
                    "-",
                    "--diff-only",
                    "--format",
                    format,
                    "--lang",
                    lang,
                ],
                Some(&read("seed/pr.diff")),
            );
            assert_eq!(o.status.code(), Some(1), "{format} {lang}: {}", stderr(&o));
            assert!(!stdout(&o).is_empty(), "{format} {lang}");
            assert!(!stdout(&o).contains('\u{1b}'), "NO_COLOR: no escape codes");
        }
    }
}

#[test]
fn sarif_to_a_file_then_markdown_to_stdout() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sarif = dir.path().join("x.sarif");
    let description = fixture("seed/description.en.md");
    let o = payreview(
        &[
            "review",
            "-",
            "--diff-only",
            "--format",
            "sarif",
            "--output",
            sarif.to_str().expect("utf-8"),
        ],
        Some(&read("seed/pr.diff")),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&sarif).expect("written")).expect("JSON");
    assert_eq!(written["version"], "2.1.0");
    let o = payreview(
        &[
            "review",
            "-",
            "--diff-only",
            "--format",
            "markdown",
            "--description",
            description.to_str().expect("utf-8"),
        ],
        Some(&read("seed/pr.diff")),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let md = stdout(&o);
    assert!(md.contains("### 1. Verdict"), "{md}");
    assert!(md.contains("**Merge after fixes.**"), "{md}");
    assert!(md.contains("Check against the description"), "{md}");
}

#[test]
fn payreview_lang_sets_the_language() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_payreview"));
    let o = cmd
        .args([
            "review",
            "fixtures/seed/pr.diff",
            "--diff-only",
            "--format",
            "markdown",
        ])
        .current_dir(root())
        .env("PAYREVIEW_LANG", "ru")
        .output()
        .expect("binary runs");
    assert!(String::from_utf8_lossy(&o.stdout).contains("### 1. Вердикт"));
}

#[test]
fn rules_lists_every_rule_and_rule_prints_its_doc() {
    let o = payreview(&["rules"], None);
    assert_eq!(o.status.code(), Some(0));
    let listing = stdout(&o);
    for rule in payreview::rules::ALL {
        assert!(
            listing.contains(rule.id),
            "{} missing from `payreview rules`",
            rule.id
        );
    }
    let o = payreview(&["rule", "err001"], None);
    assert_eq!(o.status.code(), Some(0));
    let doc = stdout(&o);
    assert!(doc.starts_with("ERR001 broad-except-returns-none"), "{doc}");
    assert!(
        doc.contains("except Exception:"),
        "the bad example is shown: {doc}"
    );
    let o = payreview(&["rule", "ERR001", "--lang", "ru"], None);
    assert!(stdout(&o).contains("Почему это важно"));
    let o = payreview(&["rule", "NOPE999"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("there is no rule NOPE999"));
}

#[test]
fn output_file_is_written_and_stdout_left_empty() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("review.json");
    let o = payreview(
        &[
            "review",
            "-",
            "--diff-only",
            "--format",
            "json",
            "--output",
            out.to_str().expect("utf-8"),
        ],
        Some(&read("seed/pr.diff")),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).is_empty());
    let written = std::fs::read_to_string(&out).expect("report written");
    assert!(written.contains("\"decision\": \"request-changes\""));
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).expect("dir").collect();
    assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
}

#[test]
fn repository_mode_from_the_command_line() {
    let diff = fixture("seed/pr.diff");
    let head = fixture("seed/head");
    let o = payreview(
        &[
            "review",
            diff.to_str().expect("utf-8"),
            "--repo",
            head.to_str().expect("utf-8"),
            "--format",
            "json",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).contains("\"rule\": \"DIFF002\""));
}

fn git(dir: &std::path::Path, args: &[&str]) {
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
fn base_reviews_the_work_tree_against_a_revision_without_a_diff_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let copy = |from: &str| {
        let src = fixture(from);
        for rel in [
            "app/payments/client.py",
            "app/payments/service.py",
            "tests/test_payments.py",
        ] {
            let to = dir.path().join(rel);
            std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
            std::fs::copy(src.join(rel), to).expect("copy");
        }
    };
    copy("seed/base");
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "base"]);
    copy("seed/head");
    let o = Command::new(env!("CARGO_BIN_EXE_payreview"))
        .args(["review", "--base", "HEAD", "--format", "json"])
        .current_dir(dir.path())
        .output()
        .expect("binary runs");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("valid JSON");
    let rules: Vec<&str> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["rule"].as_str())
        .collect();
    assert!(rules.contains(&"ERR001"), "{rules:?}");
    // git wrote this diff itself: its index lines are right.
    assert!(
        !rules.contains(&"DIFF001") && !rules.contains(&"DIFF002"),
        "{rules:?}"
    );
    assert_eq!(report["files"].as_array().map(Vec::len), Some(3));
}

#[test]
fn pre_commit_hook_reviews_the_staged_change() {
    let hooks = std::fs::read_to_string(root().join(".pre-commit-hooks.yaml")).expect("hook file");
    let entry = hooks
        .lines()
        .find_map(|l| l.trim().strip_prefix("entry: "))
        .expect("an entry line");
    let mut words = entry.split_whitespace();
    assert_eq!(words.next(), Some("payreview"));
    let args: Vec<&str> = words.collect();
    // The hook's arguments must be ones the CLI accepts: parse them for real.
    let parsed = payreview::cli::Cli::try_parse_from(
        std::iter::once("payreview").chain(args.iter().copied()),
    );
    assert!(parsed.is_ok(), "{entry}: {parsed:?}");
    assert!(args.contains(&"--staged"));
    assert!(hooks.contains("pass_filenames: false"));
}

#[test]
fn a_diff_without_python_files_says_so_and_exits_0() {
    let diff = "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-old\n+new\n";
    let o = payreview(
        &["review", "-", "--diff-only", "--format", "json"],
        Some(diff.as_bytes()),
    );
    assert_eq!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("touches no Python files"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn outside_a_repository_the_fallback_is_explained() {
    let dir = tempfile::tempdir().expect("temp dir");
    let o = Command::new(env!("CARGO_BIN_EXE_payreview"))
        .args([
            "review",
            fixture("seed/pr.diff").to_str().expect("utf-8"),
            "--format",
            "json",
        ])
        .current_dir(dir.path())
        .output()
        .expect("binary runs");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("reviewing from the diff alone"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn quiet_keeps_the_report_and_drops_the_remarks() {
    let diff = "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-old\n+new\n";
    let args = ["review", "-", "--diff-only", "--format", "json"];
    let loud = payreview(&args, Some(diff.as_bytes()));
    let quiet = payreview(&[&args[..], &["--quiet"]].concat(), Some(diff.as_bytes()));
    assert!(stderr(&loud).contains("touches no Python files"));
    assert_eq!(stderr(&quiet), "");
    assert_eq!(quiet.status.code(), Some(0));
    assert_eq!(
        quiet.stdout, loud.stdout,
        "--quiet must not change the report"
    );
    // The flag is global: it is accepted before the subcommand too.
    let before = payreview(
        &["-q", "review", "-", "--diff-only", "--format", "json"],
        Some(diff.as_bytes()),
    );
    assert_eq!(stderr(&before), "");
}

#[test]
fn no_progress_bar_when_standard_error_is_not_a_terminal() {
    // Sixty files: past the bar's threshold, so only the missing terminal keeps it away.
    let diff: String = (0..60)
        .map(|i| added_file_diff(&format!("pkg/m{i}.py"), "def f():\n    return 1\n"))
        .collect();
    let o = payreview(
        &["review", "-", "--diff-only", "--format", "json"],
        Some(diff.as_bytes()),
    );
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stderr(&o), "");
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(report["files"].as_array().map(Vec::len), Some(60));
}

#[test]
fn version_names_the_rule_catalogue_release() {
    let o = payreview(&["--version"], None);
    assert_eq!(o.status.code(), Some(0));
    let release = payreview::rules::catalogue_release();
    assert_eq!(
        stdout(&o).trim(),
        format!(
            "payreview {} (rule catalogue {}, {} rules)",
            env!("CARGO_PKG_VERSION"),
            release.version,
            payreview::rules::ALL.len()
        )
    );
    assert_ne!(release.version, "unknown", "rules/catalogue.toml parses");
}

#[test]
fn completions_are_generated_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F _payreview"),
        ("zsh", "#compdef payreview"),
        ("fish", "complete -c payreview"),
    ] {
        let o = payreview(&["completions", shell], None);
        assert_eq!(o.status.code(), Some(0), "{shell}: {}", stderr(&o));
        let script = stdout(&o);
        assert!(script.contains(marker), "{shell}: no {marker:?}");
        // The scripts know the subcommands and the review flags (fish spells `--base` `-l base`).
        for word in [
            "review",
            "rules",
            "base",
            "staged",
            "fail-on",
            "description",
        ] {
            assert!(script.contains(word), "{shell}: {word} missing");
        }
    }
    let o = payreview(&["completions", "tcsh"], None);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_diff_over_max_diff_bytes_is_refused_with_exit_2() {
    let diff = std::fs::read(fixture("seed/pr.diff")).expect("seed diff");
    let size = diff.len().to_string();
    let smaller = (diff.len() - 1).to_string();
    let path = fixture("seed/pr.diff");
    let path = path.to_str().expect("utf-8");
    // Exactly at the cap: reviewed (the seed has blockers, so 1).
    let at = payreview(
        &["review", path, "--diff-only", "--max-diff-bytes", &size],
        None,
    );
    assert_eq!(at.status.code(), Some(1), "{}", stderr(&at));
    // One byte over, from a file and from standard input: refused, naming the cap.
    for (input, stdin) in [(path, None), ("-", Some(diff.as_slice()))] {
        let over = payreview(
            &["review", input, "--diff-only", "--max-diff-bytes", &smaller],
            stdin,
        );
        assert_eq!(over.status.code(), Some(2));
        assert!(over.stdout.is_empty());
        assert!(
            stderr_words(&over).contains(&format!("is larger than {smaller} bytes")),
            "{}",
            stderr(&over)
        );
    }
}

#[test]
fn head_reviews_a_branch_against_its_merge_base_without_touching_the_work_tree() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    let copy = |from: &str| {
        for rel in [
            "app/payments/client.py",
            "app/payments/service.py",
            "tests/test_payments.py",
        ] {
            let to = root.join(rel);
            std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
            std::fs::copy(fixture(from).join(rel), to).expect("copy");
        }
    };
    copy("seed/base");
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "base"]);
    git(root, &["checkout", "-q", "-b", "feature"]);
    copy("seed/head");
    git(root, &["commit", "-qam", "retries"]);
    git(root, &["checkout", "-q", "main"]);
    // main moves on after the branch left it, and the work tree has edits of its own: neither
    // is part of the pull request.
    std::fs::write(
        root.join("app/payments/refunds.py"),
        "import httpx\n\n\ndef refund(order):\n    return httpx.post('https://gw/refunds', json={'id': order.id}).json()\n",
    )
    .expect("write");
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "refunds on main"]);
    std::fs::write(root.join("app/payments/client.py"), "# work in progress\n").expect("write");

    let o = Command::new(env!("CARGO_BIN_EXE_payreview"))
        .args([
            "review", "--base", "main", "--head", "feature", "--format", "json",
        ])
        .current_dir(root)
        .output()
        .expect("binary runs");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("valid JSON");
    let files: Vec<&str> = report["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    assert_eq!(
        files,
        [
            "app/payments/client.py",
            "app/payments/service.py",
            "tests/test_payments.py"
        ]
    );
    let places: Vec<String> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| format!("{} {}:{}", f["rule"], f["path"], f["line"]))
        .collect();
    // The seed's own blockers, at the seed's lines: the branch was read, not the work tree.
    assert!(
        places.contains(&"\"ERR001\" \"app/payments/client.py\":41".to_string()),
        "{places:?}"
    );
    assert!(
        places.contains(&"\"IDEM001\" \"app/payments/client.py\":49".to_string()),
        "{places:?}"
    );
    // Nothing about the refund that only main has, and git's own diff has right index lines.
    assert!(
        !places.iter().any(|p| p.contains("refunds.py")),
        "{places:?}"
    );
    assert!(!places.iter().any(|p| p.contains("DIFF00")), "{places:?}");
    assert!(
        report["errors"].as_array().is_some_and(Vec::is_empty),
        "{}",
        report["errors"]
    );

    // --head needs --base.
    let o = Command::new(env!("CARGO_BIN_EXE_payreview"))
        .args(["review", "--head", "feature"])
        .current_dir(root)
        .output()
        .expect("binary runs");
    assert_eq!(o.status.code(), Some(2));
}
