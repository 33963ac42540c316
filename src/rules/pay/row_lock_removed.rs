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
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    if cx.facts.is_some_and(|f| f.is_test) {
        return;
    }
    // The old text first: most files never locked anything.
    if !cx
        .versions
        .old
        .as_ref()
        .is_some_and(|old| holds_rows(&old.text))
    {
        return;
    }
    // Only functions of the change that hold no lock now and move money are asked of the old
    // version; most files have none, and need no old tree.
    let unlocked: Vec<(Node<'_>, Node<'_>)> = idx
        .all(kinds::FUNCTION_DEFINITION)
        .iter()
        .copied()
        .filter(|f| {
            let (first, last) = syntax::lines(*f);
            cx.touches_added(first, last)
                && !holds_rows(syntax::text(*f, src))
                // Moved into a helper of the file (`_locked_wallet(...)`): still taken.
                && !super::calls_a_helper_that(idx, *f, src, |h| holds_rows(syntax::text(h, src)))
        })
        .filter_map(|f| Some((f, money_after_read(cx, idx, f, src)?)))
        .collect();
    if unlocked.is_empty() {
        return;
    }
    let Some(old) = cx.other.get() else {
        return;
    };
    let (old_idx, old_src) = (old.index(), old.text());
    for (func, money) in unlocked {
        let name = facts::qualname(func, idx, src);
        let Some(before) = old_idx
            .all(kinds::FUNCTION_DEFINITION)
            .iter()
            .copied()
            .find(|f| facts::qualname(*f, old_idx, old_src) == name)
        else {
            continue;
        };
        let Some(lock) = lock_line(syntax::text(before, old_src)) else {
            continue;
        };
        let old_line = syntax::lines(before).0 + lock.0;
        let finding = cx
            .report(&RULE, money)
            .arg("function", name.clone())
            .arg("lock", lock.1)
            .arg("old_line", old_line.to_string())
            .arg("money", crate::rules::pay::first_line(money, src));
        finding.function = name;
    }
}

/// The first call of `func` that moves money: a payment, an HTTP payment, a refund, payout or
/// credit written (PAY022's reading).
fn money_after_read<'t>(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    src: &str,
) -> Option<Node<'t>> {
    idx.within(func, kinds::CALL).iter().copied().find(|c| {
        crate::rules::idem::owned_by(idx, *c, Some(func))
            && (super::pays(cx, *c, src)
                || super::state_checked_then_set::moves_money(cx, *c, src)
                || super::http_payment(cx, *c))
    })
}

/// The line (from the function's first) and the text of the lock an old function took.
fn lock_line(text: &str) -> Option<(u32, String)> {
    text.lines()
        .enumerate()
        .find_map(|(i, line)| holds_rows(line).then(|| (i as u32, line.trim().to_string())))
}
