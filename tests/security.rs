//! Hostile input: paths that leave the repository, special files, and output that must not
//! depend on the thread count. Each test asserts the exact behaviour, not just "no panic".
mod common;

use std::process::Command;

use common::*;

fn modify_diff(path: &str) -> String {
    format!(
        "diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    )
}

fn temp_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("app")).expect("mkdir");
    dir
}

fn errors(review: &payreview::review::Review) -> Vec<String> {
    review
        .errors
        .iter()
        .map(|e| format!("{}: {}", e.path, e.message))
        .collect()
}

#[test]
fn symlink_to_etc_passwd_is_refused_and_never_read() {
    let repo = temp_repo();
    std::os::unix::fs::symlink("/etc/passwd", repo.path().join("app/evil.py")).expect("symlink");
    let review = review(
        modify_diff("app/evil.py").as_bytes(),
        &repo_settings(repo.path()),
    );
    assert_eq!(
        errors(&review),
        [
            "app/evil.py: refused path \"app/evil.py\": it leads outside the repository; reviewed from the diff alone"
        ]
    );
    let json = json(&review, payreview::review::Lang::En);
    assert!(
        !json.contains("root:"),
        "nothing of /etc/passwd reaches the report"
    );
}

#[test]
fn parent_directory_paths_are_refused() {
    let repo = temp_repo();
    for (path, why) in [
        ("../../etc/passwd", "it climbs out with `..`"),
        ("../../etc/passwd.py", "it climbs out with `..`"),
        ("app/../../outside.py", "it climbs out with `..`"),
    ] {
        let review = review(modify_diff(path).as_bytes(), &repo_settings(repo.path()));
        let all = errors(&review);
        assert!(
            all.iter()
                .any(|e| e.contains(&format!("refused path \"{path}\": {why}"))),
            "{path}: {all:?}"
        );
    }
}

#[test]
fn absolute_paths_are_refused() {
    let repo = temp_repo();
    let diff = "--- /etc/shadow.py\n+++ /etc/shadow.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n";
    let review = review(diff.as_bytes(), &repo_settings(repo.path()));
    assert_eq!(
        errors(&review),
        [
            "/etc/shadow.py: refused path \"/etc/shadow.py\": it is absolute; reviewed from the diff alone"
        ]
    );
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let repo = temp_repo();
    let fifo = repo.path().join("app/pipe.py");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let review = review(
        modify_diff("app/pipe.py").as_bytes(),
        &repo_settings(repo.path()),
    );
    assert_eq!(
        errors(&review),
        [
            "app/pipe.py: refused path \"app/pipe.py\": not a regular file; reviewed from the diff alone"
        ]
    );
}

#[test]
fn a_missing_file_falls_back_to_the_diff() {
    let repo = temp_repo();
    let review = review(
        modify_diff("app/gone.py").as_bytes(),
        &repo_settings(repo.path()),
    );
    assert_eq!(
        errors(&review),
        ["app/gone.py: app/gone.py is not in the repository; reviewed from the diff alone"]
    );
}

#[test]
fn output_is_identical_whatever_the_thread_count() {
    // Many files, so that threads really interleave.
    let mut diff = String::new();
    for n in 0..64 {
        diff.push_str(&added_file_diff(
            &format!("app/payments/m{n:02}.py"),
            "import httpx\n\n\ndef pay(order) -> dict:\n    try:\n        return httpx.post('u', timeout=5).json()\n    except Exception:\n        return None\n",
        ));
    }
    diff.push_str(&String::from_utf8(read("seed/pr.diff")).expect("utf-8"));
    let run = |threads: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_payreview"))
            .args(["review", "-", "--diff-only", "--format", "json"])
            .env("RAYON_NUM_THREADS", threads)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("binary runs");
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(diff.as_bytes())
            .expect("write");
        child.wait_with_output().expect("exits").stdout
    };
    let one = run("1");
    assert!(one.len() > 1000);
    assert_eq!(one, run("8"));
    assert_eq!(one, run("8"));
}

#[test]
fn a_file_of_deeply_nested_blocks_does_not_overflow_the_stack() {
    let mut code = String::new();
    for depth in 0..5000 {
        code.push_str(&" ".repeat(depth));
        code.push_str("if x:\n");
    }
    code.push_str(&" ".repeat(5000));
    code.push_str("pass\n");
    let diff = added_file_diff("app/deep.py", &code);
    // The review completes; whatever tree-sitter made of it, no rule recursed.
    let review = review(diff.as_bytes(), &payreview::config::Settings::diff_only());
    assert_eq!(review.files.len(), 1);
}

#[test]
fn dropping_trees_to_bound_memory_changes_nothing_in_the_review() {
    // With no room for trees, every file is parsed twice (facts, then rules) instead of once;
    // with room for some, a file may keep its new tree and have its old one parsed again from
    // it; the project index then reads the facts taken before the drop.
    let render = |diff: &[u8], settings: &payreview::config::Settings| {
        json(&review(diff, settings), payreview::review::Lang::En)
    };
    // seed-context is the seed's pull request against a fuller head.
    let diff = read("seed/pr.diff");
    for (case, rule) in [("seed", "IDEM001"), ("seed-context", "RETRY005")] {
        for settings in [
            repo_settings(&fixture(&format!("{case}/head"))),
            payreview::config::Settings::diff_only(),
        ] {
            let kept = render(&diff, &settings);
            let in_repo = matches!(
                settings.workspace,
                payreview::source::Workspace::Repository { .. }
            );
            if in_repo || case == "seed" {
                assert!(kept.contains(rule), "{case} has {rule} to compare");
            }
            for budget in [0, 1_500, 4_000] {
                let mut tight = settings.clone();
                tight.kept_source_bytes = budget;
                assert_eq!(
                    kept,
                    render(&diff, &tight),
                    "{case} with {budget} bytes of trees"
                );
            }
        }
    }
}
