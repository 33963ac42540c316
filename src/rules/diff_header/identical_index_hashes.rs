//! DIFF001 identical-index-hashes: `index a..a` on a file whose hunks change it.
use crate::rules::{Check, Ctx, Gate, Rule};

pub(crate) static RULE: Rule = Rule {
    id: "DIFF001",
    doc: include_str!("../../../rules/diff/DIFF001.md"),
    check: Check::Change(check),
    gate: Gate::Always,
};

fn check(cx: &mut Ctx<'_>) {
    let Some(index) = &cx.patch.index else {
        return;
    };
    // git writes the blob ids of the two sides; equal ids with a changed body cannot come
    // from git, so the diff (or this part of it) was edited by hand.
    let changes = cx.patch.hunks.iter().any(|h| {
        h.lines
            .iter()
            .any(|l| l.kind != crate::diff::LineKind::Context)
    });
    if !changes || !index.old.eq_ignore_ascii_case(&index.new) {
        return;
    }
    cx.report_file(&RULE)
        .arg("hash", index.old.clone())
        .arg("diff_line", index.diff_line.to_string());
}
