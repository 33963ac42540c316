//! PAY025 row-lock-removed: the change takes away the row lock (`with_for_update()`,
//! `select_for_update()`, `FOR UPDATE`, an advisory lock) of a function that still moves money
//! after reading the rows. Whatever the lock kept apart (two refunds of one order sized at
//! once, two payouts of one balance) now runs side by side, and both read the same state.
//!
//! Read only where the old version of the file is known: the function of the same qualified
//! name held a lock before and holds none now. A lock moved into a function it now calls is
//! not seen, so the finding asks where the lock went.
use tree_sitter::Node;

use super::balance_reset_after_payout::holds_rows;
use crate::python::{NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY025",
    doc: include_str!("../../../rules/pay/PAY025.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a lock the old version held: the new one must move money.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && (s.facts.payment_module || s.facts.functions.iter().any(|f| f.payment || f.http))
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    // The old text first: most files never locked anything.
    if !cx
        .versions
        .old
        .as_ref()
        .is_some_and(|old| holds_rows(&old.text))
    {
        return;
    }
    // Only functions of the change that move money are asked of the old version; most files
    // have none, and need no old tree.
    let moving: Vec<(Node<'_>, Node<'_>)> = idx
        .all(kinds::FUNCTION_DEFINITION)
        .iter()
        .copied()
        .filter(|f| {
            let (first, last) = syntax::lines(*f);
            cx.touches_added(first, last)
                // Moved into a helper of the file (`_locked_wallet(...)`): still taken. Or
                // given way to a claim, here or in a helper (`update(Earning).where(
                // Earning.status == AVAILABLE).values(status=RESERVED)`): the rows are taken by
                // one run only.
                && !claims_rows(syntax::text(*f, src))
                // Moved into a helper of another module named for it
                // (`payouts.lock_payout(session, payout_id)`): taken there.
                && !calls_a_lock(idx, *f, src)
                && !super::calls_a_helper_that(idx, *f, src, |h| {
                    let text = syntax::text(h, src);
                    holds_rows(text) || claims_rows(text)
                })
        })
        .filter_map(|f| Some((f, money_after_read(cx, idx, f, 0, src)?)))
        .collect();
    if moving.is_empty() {
        return;
    }
    let Some(old) = cx.other.get() else {
        return;
    };
    let (old_idx, old_src) = (old.index(), old.text());
    for (func, money) in moving {
        let name = facts::qualname(func, idx, src);
        let Some(before) = facts::function_by_qualname(old_idx, old_src, &name) else {
            continue;
        };
        let Some(lock) = lock_lost(syntax::text(before, old_src), syntax::text(func, src)) else {
            continue;
        };
        let old_line = syntax::lines(before).0 + lock.0;
        let finding = cx
            .report(&RULE, money)
            .arg("function", name.clone())
            .arg("lock", lock.1)
            .arg("old_line", old_line.to_string())
            .arg("money", crate::rules::pay::first_line(money, src));
        if let Some(kept) = lock.2 {
            finding.arg("kept", kept).note("other");
        }
        finding.function = name;
    }
}

/// Whether `func` calls a function named for taking a lock (`lock_payout`, `_locked_wallet`,
/// `acquire_row_lock`).
pub(super) fn calls_a_lock(idx: &NodeIndex<'_>, func: Node<'_>, src: &str) -> bool {
    idx.within(func, kinds::CALL).iter().any(|c| {
        syntax::name_words(syntax::callee_name(*c, src))
            .iter()
            .any(|w| matches!(w.as_str(), "lock" | "locked" | "locking"))
    })
}

/// A conditional update of a status (SQLAlchemy's `update(...).where(...).values(status=...)`,
/// Django's `.filter(status=...).update(status=...)`, peewee's, SQL's `UPDATE ... SET status
/// ... WHERE`): a claim that one run wins.
pub(super) fn claims_rows(code: &str) -> bool {
    (code.contains("update(") || code.contains("UPDATE "))
        && (code.contains("where(") || code.contains("WHERE ") || code.contains(".filter("))
        && code.contains("status")
}

/// The first call of `func` (its own, starting after byte `after`) that moves money: a
/// payment, an HTTP payment, a refund, payout or credit written (PAY022's reading).
pub(super) fn money_after_read<'t>(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    after: usize,
    src: &str,
) -> Option<Node<'t>> {
    idx.within(func, kinds::CALL).iter().copied().find(|c| {
        c.start_byte() > after
            && crate::rules::idem::owned_by(idx, *c, Some(func))
            && (super::pays(cx, *c, src)
                || super::state_checked_then_set::moves_money(cx, *c, src)
                || super::http_payment(cx, *c))
    })
}

/// The first lock the old function took that the new one no longer takes: the line (from the
/// function's first), its text, and a lock the new one still takes on other rows. With no lock left, any; otherwise one on rows none of the
/// new locks names (`select(Order)...with_for_update()` gone while `session.get(Event, ...,
/// with_for_update=...)` stays). A lock that names no model is kept if any lock is.
fn lock_lost(before: &str, after: &str) -> Option<(u32, String, Option<String>)> {
    let locks = |text: &str| -> Vec<(u32, String, Vec<String>)> {
        let lines: Vec<&str> = text.lines().collect();
        lines
            .iter()
            .enumerate()
            .filter(|(_, line)| holds_rows(line))
            .map(|(i, line)| {
                // `.with_for_update()` on a line of its own locks what the lines above select.
                let from = if line.trim_start().starts_with(['.', ')']) {
                    i.saturating_sub(2)
                } else {
                    i
                };
                let subjects = lines[from..=i].iter().flat_map(|l| models(l)).collect();
                (i as u32, line.trim().to_string(), subjects)
            })
            .collect()
    };
    let now = locks(after);
    locks(before)
        .into_iter()
        .find(|(_, _, subjects)| {
            now.is_empty()
                || !subjects.is_empty()
                    && !now
                        .iter()
                        .any(|(_, _, held)| held.iter().any(|m| subjects.contains(m)))
        })
        .map(|(line, text, _)| (line, text, now.first().map(|(_, kept, _)| kept.clone())))
}

/// The models a line names (`Order` of `select(Order).where(Order.reference == ref)`), and
/// the tables it selects from (`authorizations` of `sa.select(authorizations)`).
pub(super) fn models(line: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let bytes = line.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let start = at;
        while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_') {
            at += 1;
        }
        if at == start {
            at += 1;
            continue;
        }
        let word = &line[start..at];
        let before = line[..start].trim_end();
        let selected = ["select(", "query(", "get("]
            .iter()
            .any(|s| before.ends_with(s));
        let model = word.starts_with(|c: char| c.is_ascii_uppercase())
            && word.chars().any(|c| c.is_ascii_lowercase())
            && !matches!(word, "True" | "False" | "None");
        if (model || selected && !word.starts_with(|c: char| c.is_ascii_digit()))
            && !out.iter().any(|w| w == word)
        {
            out.push(word.to_string());
        }
    }
    out
}
