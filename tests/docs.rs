//! `docs/rules/ID.md` are rendered from `rules/`; this keeps them in sync (and writes them with
//! `UPDATE_DOCS=1 cargo test --test docs`).
mod common;

use std::collections::BTreeSet;

#[test]
fn rule_pages_match_the_catalogue() {
    let dir = common::root().join("docs/rules");
    let update = std::env::var_os("UPDATE_DOCS").is_some();
    if update {
        std::fs::create_dir_all(&dir).expect("docs/rules");
    }
    let mut stale = Vec::new();
    for rule in payreview::rules::ALL {
        let path = dir.join(format!("{}.md", rule.id));
        let page = payreview::report::rule_page(rule);
        assert!(page.contains(rule.id), "{} renders a page", rule.id);
        if update {
            std::fs::write(&path, &page).expect("write page");
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(page.as_str()) {
            stale.push(rule.id);
        }
    }
    assert!(
        stale.is_empty(),
        "out of date (run UPDATE_DOCS=1 cargo test --test docs): {stale:?}"
    );
    let on_disk: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("docs/rules")
        .filter_map(|e| {
            e.ok()?
                .path()
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
        })
        .collect();
    let registered: BTreeSet<String> = payreview::rules::ALL
        .iter()
        .map(|r| r.id.to_string())
        .collect();
    assert_eq!(
        on_disk, registered,
        "a page per rule, and no page without a rule"
    );
}
