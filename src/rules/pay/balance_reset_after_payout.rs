//! PAY008 balance-reset-after-payout: a payee's balance is read, paid out by a slow call to the
//! provider, and then written back as zero (`payee.pending_balance = 0`) or as the stale value
//! less the payout (`wallet.balance -= amount`), with nothing holding the row meanwhile. Whatever
//! was credited while the call ran (an order delivered, a refund reversed) is wiped: the payee is
//! underpaid and nobody notices, or the balance goes wrong the other way for a debit.
//!
//! Left alone: a row held for the run (`select_for_update`, `with_for_update`, `FOR UPDATE`,
//! a lock), a balance taken away before the call (reserved first, paid after), and a decrement
//! the database does (`update(balance=F("balance") - amount)`).
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY008",
    doc: include_str!("../../../rules/pay/PAY008.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding writes a balance-like attribute, after a payout, in a file that takes no row
/// lock. The facts first: a payout is a payment call or an HTTP one, or in a payment module.
fn gate(s: &Scan<'_>) -> bool {
    let pays = || s.facts.payment_module || s.facts.functions.iter().any(|f| f.payment || f.http);
    !s.facts.is_test
        && pays()
        && s.mentions(&[
            "balance", "earnings", "owed", "payable", "accrued", "unpaid",
        ])
        && !holds_rows(s.src())
}

/// Whether code holds the rows it reads for the run: an ORM's row lock, SQL's, or a lock
/// object.
pub(super) fn holds_rows(src: &str) -> bool {
    [
        "select_for_update",
        "with_for_update",
        "for_update",
        "FOR UPDATE",
        "advisory",
        ".lock(",
        "_lock(",
        "Lock(",
    ]
    .iter()
    .any(|w| src.contains(w))
}

/// Words of an attribute that holds what is owed to a payee.
fn owed(attribute: &str) -> bool {
    syntax::name_words(attribute).iter().any(|w| {
        matches!(
            w.as_str(),
            "balance" | "earnings" | "owed" | "payable" | "accrued" | "unpaid" | "outstanding"
        )
    })
}

/// Words of a call that sends money out; a class built (`Payout(...)`) is a record, not the
/// payout.
fn pays_out(cx: &Ctx<'_>, call: Node<'_>, src: &str) -> bool {
    let name = syntax::callee_name(call, src);
    if name.starts_with(|c: char| c.is_ascii_uppercase()) {
        return false;
    }
    crate::rules::pay::pays(cx, call, src)
        || syntax::name_words(syntax::callee(call, src))
            .iter()
            .any(|w| {
                matches!(
                    w.as_str(),
                    "payout"
                        | "payouts"
                        | "transfer"
                        | "disburse"
                        | "disbursement"
                        | "withdraw"
                        | "withdrawal"
                        | "remit"
                        | "pay"
                )
            })
}

/// What a write does to the balance: resets it, or takes the payout off the value read
/// earlier.
fn write_kind(stmt: Node<'_>, target: &str, src: &str) -> Option<&'static str> {
    match stmt.kind() {
        kinds::ASSIGNMENT => {
            let right = stmt.field("right")?;
            let text = syntax::text(right, src).replace(' ', "");
            let zero = matches!(
                text.as_str(),
                "0" | "0.0"
                    | "Decimal(0)"
                    | "Decimal(\"0\")"
                    | "Decimal('0')"
                    | "Decimal(\"0.00\")"
            );
            if zero {
                Some("reset")
            } else if right.kind() == kinds::BINARY_OPERATOR
                && right.field("operator").map(|o| o.kind()) == Some("-")
                && right
                    .field("left")
                    .is_some_and(|l| syntax::text(l, src) == target)
            {
                Some("decrement")
            } else {
                None
            }
        }
        kinds::AUGMENTED_ASSIGNMENT => {
            let operator = stmt.field("operator").map(|o| o.kind());
            (operator == Some("-=")).then_some("decrement")
        }
        _ => None,
    }
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    if cx.facts.is_some_and(|f| f.is_test) || holds_rows(src) {
        return;
    }
    let writes: Vec<Node<'_>> = idx
        .all(kinds::ASSIGNMENT)
        .iter()
        .chain(idx.all(kinds::AUGMENTED_ASSIGNMENT))
        .copied()
        .collect();
    let mut reported: Vec<usize> = Vec::new();
    for write in writes {
        let Some(left) = write.field("left").filter(|l| l.kind() == kinds::ATTRIBUTE) else {
            continue;
        };
        let Some(attribute) = left.field("attribute") else {
            continue;
        };
        if !owed(syntax::text(attribute, src)) {
            continue;
        }
        let target = syntax::text(left, src);
        let Some(kind) = write_kind(write, target, src) else {
            continue;
        };
        let Some(func) = idx.enclosing(write, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        if reported.contains(&func.id()) {
            continue;
        }
        let Some((read, call)) = read_then_paid(cx, idx, func, write, target, src) else {
            continue;
        };
        reported.push(func.id());
        cx.report(&RULE, write)
            .arg("function", facts::qualname(func, idx, src))
            .arg("balance", target.to_string())
            .arg("read_line", syntax::lines(read).0.to_string())
            .arg("call", crate::rules::pay::first_line(call, src))
            .arg("call_line", syntax::lines(call).0.to_string())
            .note(kind);
    }
}

/// The first read of `target` in `func` before `write`, and a payout call between the two.
fn read_then_paid<'t>(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'t>,
    func: Node<'_>,
    write: Node<'_>,
    target: &str,
    src: &str,
) -> Option<(Node<'t>, Node<'t>)> {
    let read = idx
        .within(func, kinds::ATTRIBUTE)
        .iter()
        .copied()
        .find(|a| {
            a.end_byte() <= write.start_byte()
                && syntax::text(*a, src) == target
                // A write of the balance is not a read of it.
                && !a.parent().is_some_and(|p| {
                    matches!(p.kind(), kinds::ASSIGNMENT | kinds::AUGMENTED_ASSIGNMENT)
                        && p.field("left").is_some_and(|l| l.id() == a.id())
                })
        })?;
    let call = idx.within(func, kinds::CALL).iter().copied().find(|c| {
        c.start_byte() > read.end_byte()
            && c.end_byte() <= write.start_byte()
            && pays_out(cx, *c, src)
    })?;
    Some((read, call))
}
