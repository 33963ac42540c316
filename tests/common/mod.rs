//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use payreview::config::Settings;
use payreview::report;
use payreview::review::{Lang, Review};
use payreview::source::{Repo, Workspace};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixture(rel: &str) -> PathBuf {
    root().join("fixtures").join(rel)
}

pub fn read(rel: &str) -> Vec<u8> {
    std::fs::read(fixture(rel)).unwrap_or_else(|e| panic!("fixture {rel}: {e}"))
}

/// A unified diff that adds `path` with `text`, as git writes it.
pub fn added_file_diff(path: &str, text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = format!(
        "diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{} @@\n",
        lines.len()
    );
    for line in lines {
        out.push('+');
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Every `.diff` under `dir`, sorted, leaving out the repositories fixtures come with
/// (`<name>.repo/`).
pub fn diff_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() && !path.to_string_lossy().ends_with(".repo") {
            out.extend(diff_files(&path));
        } else if path.extension().is_some_and(|e| e == "diff") {
            out.push(path);
        }
    }
    out
}

pub fn repo_settings(root: &Path) -> Settings {
    let mut settings = Settings::diff_only();
    settings.workspace = Workspace::Repository {
        repo: Repo::open(root, settings.max_file_bytes).expect("fixture repository exists"),
        base: None,
        staged: false,
        head: None,
    };
    settings
}

pub fn review(diff: &[u8], settings: &Settings) -> Review {
    payreview::review_diff(diff, settings).expect("the diff parses")
}

/// The JSON report with the version number masked, for snapshots.
pub fn json(review: &Review, lang: Lang) -> String {
    let mut out = Vec::new();
    report::render(review, payreview::config::Format::Json, lang, &mut out).expect("renders");
    String::from_utf8(out)
        .expect("utf-8")
        .replace(env!("CARGO_PKG_VERSION"), "[version]")
}

/// `rule path:lines severity` of every finding, for assertion messages.
pub fn places(review: &Review) -> Vec<String> {
    review
        .findings
        .iter()
        .map(|f| {
            let lines = f
                .lines
                .map(|(a, b)| format!(":{a}-{b}"))
                .unwrap_or_default();
            format!("{} {}{lines} {}", f.rule, f.path, f.severity.as_str())
        })
        .collect()
}

pub fn has(
    review: &Review,
    rule: &str,
    path: &str,
    lines: Option<(u32, u32)>,
    severity: &str,
) -> bool {
    review.findings.iter().any(|f| {
        f.rule == rule && f.path == path && f.lines == lines && f.severity.as_str() == severity
    })
}

/// Runs the built binary in `dir` with `args`, feeding `stdin`; English, no colour.
pub fn run_binary(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_payreview"))
        .args(args)
        .current_dir(dir)
        .env_remove("PAYREVIEW_LANG")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("binary runs");
    if let Some(input) = stdin {
        // The process may exit (a usage error) before it reads its input: a closed pipe is fine.
        let _ = child.stdin.take().expect("stdin").write_all(input);
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("binary exits")
}
