//! Gates (`rules::gate`) only spare work: a rule skipped on a file would have said nothing
//! there. Every fixture diff is reviewed with gates and without, in each mode it has, and the
//! reports must be the same byte for byte.
mod common;

use std::path::Path;

use common::*;
use payreview::config::Settings;
use payreview::review::Lang;

/// Diff-only, and the repository the fixture comes with: `<name>.repo/` beside it, or `head/`
/// in its folder (the seed and its variants).
fn modes(diff: &Path) -> Vec<Settings> {
    let mut out = vec![Settings::diff_only()];
    let repo = diff.with_extension("repo");
    let head = diff.with_file_name("head");
    for root in [repo, head] {
        if root.is_dir() {
            out.push(repo_settings(&root));
        }
    }
    out
}

#[test]
fn every_fixture_reviews_the_same_without_gates() {
    let all = diff_files(&root().join("fixtures"));
    let mut compared = 0;
    let mut with_findings = 0;
    for path in &all {
        let Ok(diff) = std::fs::read(path) else {
            continue;
        };
        for gated in modes(path) {
            // A diff the parser refuses has no review to compare.
            let Ok(with) = payreview::review_diff(&diff, &gated) else {
                continue;
            };
            let mut open = gated.clone();
            open.gates = false;
            let without = review(&diff, &open);
            assert_eq!(
                json(&with, Lang::En),
                json(&without, Lang::En),
                "{} reviews differently with gates",
                path.display()
            );
            compared += 1;
            with_findings += usize::from(!with.findings.is_empty());
        }
    }
    // The comparison means something only over many reviews that do find things.
    assert!(compared > 100, "only {compared} reviews compared");
    assert!(
        with_findings > 50,
        "only {with_findings} reviews with findings"
    );
}
