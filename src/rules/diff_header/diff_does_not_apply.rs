//! DIFF003 diff-does-not-apply: the hunks disagree with the file in the repository.
use crate::rules::{Check, Ctx, Gate, Rule};

pub(crate) static RULE: Rule = Rule {
    id: "DIFF003",
    doc: include_str!("../../../rules/diff/DIFF003.md"),
    check: Check::Change(check),
    gate: Gate::Always,
};

fn check(cx: &mut Ctx<'_>) {
    let Some(mismatch) = &cx.versions.mismatch else {
        return;
    };
    let on_disk = mismatch.on_disk.as_deref().map_or_else(
        || "nothing (the file is shorter)".to_string(),
        |l| format!("`{}`", l.trim()),
    );
    let line = mismatch.line;
    cx.report_lines(&RULE, (line, line), String::new())
        .arg("line", line.to_string())
        .arg("in_diff", mismatch.in_diff.trim().to_string())
        .arg("on_disk", on_disk);
}
