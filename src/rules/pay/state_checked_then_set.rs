//! PAY022 state-checked-then-set: a function reads a record's state, turns a repeat away on it
//! (`if member.status is CANCELLED: raise AlreadyCancelled`), moves money (a refund written, a
//! payment sent without a key, a balance changed), and writes the new state only later, on a
//! row it never locked. Two requests at once (a double tap, a client's retry after a timeout)
//! both read the old state, both pass, and both refund.
//!
//! Left alone: a row locked for the check (`select_for_update`, `with_for_update`) or a claim
//! taken after it (`cache.add`, `SET NX`), a state moved by a conditional update whose count is
//! checked, and a payment sent with an idempotency key or a reference the provider
//! deduplicates on.
use tree_sitter::Node;

use super::balance_reset_after_payout::holds_rows;
use crate::python::{Fields, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY022",
    doc: include_str!("../../../rules/pay/PAY022.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a test of a state in code that refunds or pays.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(&[".status", ".state"])
        && (s.mentions(&["refund", "Refund", "payout", "Payout", "credit", "balance"])
            || s.facts.payment_module
            || s.facts.functions.iter().any(|f| f.payment))
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    // As the gate: a test's state checks guard nothing.
    if cx.facts.is_some_and(|f| f.is_test) {
        return;
    }
    let mut reported: Vec<usize> = Vec::new();
    for &stmt in idx.all(kinds::IF_STATEMENT) {
        let (Some(condition), Some(body)) = (stmt.field("condition"), stmt.field("consequence"))
        else {
            continue;
        };
        if syntax::block_falls_through(body, src) {
            continue;
        }
        let Some((record, field)) = state_tested(condition, src) else {
            continue;
        };
        let Some(func) = idx.enclosing(stmt, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        if reported.contains(&func.id()) || holds_rows(syntax::text(func, src)) {
            continue;
        }
        // Loaded in the function: a record handed in may be locked by the caller.
        if idx
            .assigned_before(Some(func), record, stmt.start_byte(), src)
            .is_none_or(|v| crate::rules::idem::strip_await(v).kind() != kinds::CALL)
        {
            continue;
        }
        let owned = |n: &Node<'_>| crate::rules::idem::owned_by(idx, *n, Some(func));
        let Some(write) = idx
            .within(func, kinds::ASSIGNMENT)
            .iter()
            .copied()
            .filter(owned)
            .find(|a| {
                a.start_byte() > stmt.end_byte()
                    && a.field("left")
                        .is_some_and(|l| syntax::text(l, src) == format!("{record}.{field}"))
            })
        else {
            continue;
        };
        // A claim one racer wins (`cache.add(...)`, `set(..., nx=True)`) after the check
        // serialises what follows as a row lock would.
        let claimed = idx.within(func, kinds::CALL).iter().any(|&c| {
            c.start_byte() > stmt.end_byte()
                && crate::rules::idem::cache_call(c, cx)
                    .is_some_and(|c| c.op == crate::rules::idem::Op::AtomicWrite)
        });
        if claimed {
            continue;
        }
        let Some(money) = idx
            .within(func, kinds::CALL)
            .iter()
            .copied()
            .filter(owned)
            .find(|c| c.start_byte() > stmt.end_byte() && moves_money(cx, *c, src))
        else {
            continue;
        };
        reported.push(func.id());
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, stmt)
            .arg("function", function.clone())
            .arg("state", format!("{record}.{field}"))
            .arg("write_line", syntax::lines(write).0.to_string())
            .arg("money", crate::rules::pay::first_line(money, src))
            .arg("money_line", syntax::lines(money).0.to_string());
        finding.function = function;
    }
}

/// The record and the field a condition tests a state of: `member.status is
/// MemberStatus.CANCELLED`, `order.state in ("refunded", "cancelled")`.
fn state_tested<'s>(condition: Node<'_>, src: &'s str) -> Option<(&'s str, &'s str)> {
    if condition.kind() != kinds::COMPARISON_OPERATOR {
        return None;
    }
    let left = condition.named_child(0)?;
    if left.kind() != kinds::ATTRIBUTE {
        return None;
    }
    let (object, field) = (left.field("object")?, left.field("attribute")?);
    let field = syntax::text(field, src);
    (object.kind() == kinds::IDENTIFIER && matches!(field, "status" | "state"))
        .then(|| (syntax::text(object, src), field))
}

/// A call that moves money: a payment sent without an idempotency key, a refund, payout or
/// credit written (`Refund.create(...)`, `session.add(Payout(...))`), a balance changed by an
/// expression (`update(balance_pence=F("balance_pence") - amount)`).
fn moves_money(cx: &Ctx<'_>, call: Node<'_>, src: &str) -> bool {
    // A payment the provider tells apart by a key or its own reference (`reference=` of
    // Paystack) is deduplicated there, whoever sends it twice.
    let keyed = || {
        syntax::contains_lowercase(syntax::text(call, src), "idempotency")
            || syntax::keyword_args(call, src)
                .iter()
                .any(|(k, _)| crate::rules::idem::key_made_per_attempt::dedup_handle(k))
    };
    if crate::rules::pay::pays(cx, call, src)
        && crate::rules::pay::passes_money(call, src, cx.vocab)
        && !keyed()
    {
        return true;
    }
    let callee = syntax::callee(call, src);
    let words = syntax::name_words(callee);
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    let record = has(&["refund", "payout", "credit", "withdrawal", "transfer"])
        && (has(&["create", "insert", "add"])
            || callee.starts_with(|c: char| c.is_ascii_uppercase()));
    let balance = callee.ends_with("update")
        && syntax::keyword_args(call, src).iter().any(|(k, v)| {
            syntax::name_words(k).iter().any(|w| w == "balance")
                && syntax::text(*v, src).starts_with("F(")
        });
    record || balance
}
