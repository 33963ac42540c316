//! Rule fixtures: every `fixtures/rules/<family>/<ID>/*.diff` is reviewed and its findings are
//! compared with the `# expect: ID` marks written on its lines, before the findings are
//! snapshotted, so a wrong snapshot cannot slip in.
//!
//! - A mark sits on a line of the diff (added or context); `# expect: ID` or `# expect: ID(severity)`,
//!   several separated by commas. It is met by a finding of that rule whose new-side line range
//!   holds the marked line. `# expect-file: ID` anywhere marks a finding about the whole file.
//! - Every finding must be met by a mark: a fixture says everything the review should say.
//! - `ok_*.diff` fixtures are correct code and carry no marks: nothing may be reported on them.
//! - `ok_*` and `neg_*` fixtures in a rule's folder (`…/IDEM001/`) are negatives of that rule: it
//!   must not fire there. A `neg_*` fixture may hold other rules' findings, marked as usual.
//! - A folder `<name>.repo/` beside `<name>.diff` makes it a repository-mode review of that folder.
mod common;

use std::path::Path;

use common::*;
use payreview::config::Settings;
use payreview::diff::LineKind;
use payreview::review::Review;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Mark {
    rule: String,
    severity: Option<String>,
    path: String,
    /// New-side line; `None` for `expect-file`.
    line: Option<u32>,
}

fn parse_marks(spec: &str, path: &str, line: Option<u32>) -> Vec<Mark> {
    spec.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| {
            let (rule, severity) = match item.split_once('(') {
                Some((rule, rest)) => (
                    rule.trim(),
                    Some(rest.trim_end_matches(')').trim().to_string()),
                ),
                None => (item, None),
            };
            Mark {
                rule: rule.to_string(),
                severity,
                path: path.to_string(),
                line,
            }
        })
        .collect()
}

fn marks(diff: &[u8]) -> Vec<Mark> {
    let patch = payreview::diff::parse_patch(diff).expect("fixture diff parses");
    let mut out = Vec::new();
    for file in &patch.files {
        for hunk in &file.hunks {
            let mut new_line = if hunk.new_count == 0 {
                hunk.new_start + 1
            } else {
                hunk.new_start
            };
            for line in &hunk.lines {
                let on_new = line.kind != LineKind::Removed;
                if let Some((_, spec)) = line.text.split_once("# expect-file:") {
                    out.extend(parse_marks(spec, file.path(), None));
                } else if let Some((_, spec)) = line.text.split_once("# expect:")
                    && on_new
                {
                    out.extend(parse_marks(spec, file.path(), Some(new_line)));
                }
                if on_new {
                    new_line += 1;
                }
            }
        }
    }
    out
}

fn check(fixture: &Path) -> Result<String, String> {
    let diff = std::fs::read(fixture).map_err(|e| e.to_string())?;
    let repo = fixture.with_extension("repo");
    let settings = if repo.is_dir() {
        repo_settings(&repo)
    } else {
        Settings::diff_only()
    };
    let review: Review = review(&diff, &settings);
    let expected = marks(&diff);
    let name = fixture
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.starts_with("ok_") && !expected.is_empty() {
        return Err(format!("{name}: ok_ fixtures carry no marks"));
    }
    let mut problems = Vec::new();
    let folder_rule = fixture
        .parent()
        .and_then(|d| d.file_name())
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.starts_with("ok_") || name.starts_with("neg_") {
        if expected.iter().any(|m| m.rule == folder_rule) {
            problems.push(format!(
                "{name} is a negative of {folder_rule} but marks it"
            ));
        }
        if review.findings.iter().any(|f| f.rule == folder_rule) {
            problems.push(format!("{folder_rule} fires on its own negative fixture"));
        }
    }
    // `RULE(cited)`: a place a finding of RULE in the same file cites as evidence, as TEST001
    // cites the other tests of a suite it folds into one finding.
    let cited = |m: &Mark| m.severity.as_deref() == Some("cited");
    for mark in expected.iter().filter(|m| cited(m)) {
        let met = review.findings.iter().any(|f| {
            f.rule == mark.rule
                && f.path == mark.path
                && f.evidence
                    .iter()
                    .any(|e| e.path == mark.path && Some(e.line) == mark.line)
        });
        if !met {
            problems.push(format!("expected but not cited: {mark:?}"));
        }
    }
    for mark in expected.iter().filter(|m| !cited(m)) {
        let met = review.findings.iter().any(|f| {
            f.rule == mark.rule
                && f.path == mark.path
                && match (mark.line, f.lines) {
                    (None, None) => true,
                    (Some(l), Some((a, b))) => a <= l && l <= b,
                    _ => false,
                }
                && mark
                    .severity
                    .as_deref()
                    .is_none_or(|s| s == f.severity.as_str())
        });
        if !met {
            problems.push(format!("expected but not reported: {mark:?}"));
        }
    }
    for f in &review.findings {
        let met = expected.iter().filter(|m| !cited(m)).any(|m| {
            m.rule == f.rule
                && m.path == f.path
                && match (m.line, f.lines) {
                    (None, None) => true,
                    (Some(l), Some((a, b))) => a <= l && l <= b,
                    _ => false,
                }
        });
        if !met {
            problems.push(format!(
                "reported but not expected: {} {} {:?} {}",
                f.rule,
                f.path,
                f.lines,
                f.severity.as_str()
            ));
        }
    }
    if !problems.is_empty() {
        return Err(format!(
            "{}:\n  {}",
            fixture.display(),
            problems.join("\n  ")
        ));
    }
    let mut text = String::new();
    for f in &review.findings {
        let texts = payreview::report::resolve(f, payreview::review::Lang::En);
        let place = f
            .lines
            .map(|(a, b)| format!(":{a}-{b}"))
            .unwrap_or_default();
        text.push_str(&format!(
            "{} {} {}{place}\n  {}\n  {}\n",
            f.rule,
            f.severity.as_str(),
            f.path,
            texts.title,
            texts.message
        ));
        let evidence = payreview::report::resolve_evidence(
            f,
            payreview::review::Lang::En,
            payreview::rules::catalogue::fill,
        );
        for e in evidence {
            text.push_str(&format!("  = {}:{} {}\n", e.path, e.line, e.text));
        }
    }
    for q in &review.questions {
        text.push_str(&format!(
            "? {}\n",
            payreview::report::question_text(q, payreview::review::Lang::En)
        ));
    }
    if text.is_empty() {
        text.push_str("(no findings)\n");
    }
    Ok(text)
}

#[test]
fn rule_fixtures_report_exactly_their_marks() {
    let all = diff_files(&root().join("fixtures/rules"));
    let mut failures = Vec::new();
    for fixture in &all {
        match check(fixture) {
            Ok(text) => {
                let rel = fixture
                    .strip_prefix(root().join("fixtures/rules"))
                    .unwrap_or(fixture);
                let name = rel
                    .to_string_lossy()
                    .replace(['/', '\\'], "__")
                    .replace(".diff", "");
                insta::with_settings!({ snapshot_path => "snapshots/rules", prepend_module_to_snapshot => false }, {
                    insta::assert_snapshot!(name, text);
                });
            }
            Err(problem) => failures.push(problem),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
