//! IDEM016 window-from-last-send: the window that stops a payment being sent again under its
//! stored key is measured from a time every attempt moves (`now - refund.updated_at >=
//! RESUBMIT_WINDOW`, `now - (payout.last_attempt_at or payout.created_at)`, or a start time the
//! claim writes anew on every send). The provider keeps the key from its first use; measured from
//! the last send, the window never closes while the answers stay lost, and the payment goes out
//! again after the key is forgotten, as a new charge or refund.
//!
//! Read on comparisons the change writes, of a time since a record's stamp against a window of
//! resends or a key's lifetime, where the stamp is named for the last write or the last attempt,
//! or the function writes it the clock on every pass. A backoff measured from the last attempt
//! (`RETRY_BACKOFF`) and a lease's staleness are other windows and are left alone.
use tree_sitter::Node;

use super::key_numbered_by_count::{last_written, stamps_time, the_time};
use super::resend_window_outlives_key::{names_a_key_lifetime, names_a_window};
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "IDEM016",
    doc: include_str!("../../../rules/idem/IDEM016.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding compares with a window of resends or a key's lifetime, in code that sends
/// payments or names an idempotency key.
fn gate(s: &Scan<'_>) -> bool {
    super::resend_window_outlives_key::pays_under_keys(s)
        && s.mentions(&[
            "WINDOW",
            "window",
            "TTL",
            "ttl",
            "_AGE",
            "_age",
            "DEADLINE",
            "deadline",
            "RETENTION",
            "EXPIRY",
            "LIFETIME",
        ])
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    for &comparison in idx.all(kinds::COMPARISON_OPERATOR) {
        let (first, last) = syntax::lines(comparison);
        if !cx.touches_added(first, last) || !orders(comparison, src) {
            continue;
        }
        let Some(window) = window_in(comparison, src) else {
            continue;
        };
        let Some(stamp) = stamp_in(idx, comparison, window, src) else {
            continue;
        };
        let Some(field) = stamp.field("attribute").map(|a| syntax::text(a, src)) else {
            continue;
        };
        let written = if moved_by_every_write(field) {
            None
        } else {
            match written_each_pass(idx, comparison, field, src) {
                Some(line) => Some(line),
                None => continue,
            }
        };
        let finding = cx
            .report(&RULE, comparison)
            .arg("stamp", syntax::normalized(stamp, src))
            .arg("window", syntax::normalized(window, src));
        match written {
            Some(line) => finding
                .arg("written_line", line.to_string())
                .note("written"),
            None => finding.note("named"),
        };
    }
}

/// `<`, `<=`, `>`, `>=`: a span measured against a bound.
fn orders(comparison: Node<'_>, src: &str) -> bool {
    let mut cursor = comparison.walk();
    comparison
        .children(&mut cursor)
        .filter(|c| !c.is_named())
        .any(|c| matches!(syntax::text(c, src), "<" | "<=" | ">" | ">="))
}

/// The window the span is held against: a name for how long payments are sent again
/// (`RESUBMIT_WINDOW`, `settings.retry_window`) or for how long a key is kept.
fn window_in<'t>(comparison: Node<'t>, src: &str) -> Option<Node<'t>> {
    syntax::descendants(comparison, &[kinds::IDENTIFIER, kinds::ATTRIBUTE])
        .into_iter()
        .filter(|n| {
            // The last name of a dotted one: `settings.retry_window`, not `settings`.
            n.parent()
                .is_none_or(|p| p.kind() != kinds::ATTRIBUTE || p.field("attribute") != Some(*n))
        })
        .find(|n| {
            let name = match n.kind() {
                kinds::ATTRIBUTE => n.field("attribute").map_or("", |a| syntax::text(a, src)),
                _ => syntax::text(*n, src),
            };
            names_a_window(name) || names_a_key_lifetime(name)
        })
        .map(|n| {
            // The whole of `self._settings.capture_retry_window`.
            let mut node = n;
            while let Some(p) = node.parent().filter(|p| p.kind() == kinds::ATTRIBUTE) {
                node = p;
            }
            node
        })
}

/// The record's stamp the span is measured from: the right side of `now - stamp` (or the first
/// of `stamp or created_at` there), a stamp moved on by the window (`stamp + WINDOW < now`), or
/// one held against the window's start (`stamp < now - WINDOW`).
fn stamp_in<'t>(
    idx: &NodeIndex<'t>,
    comparison: Node<'t>,
    window: Node<'t>,
    src: &str,
) -> Option<Node<'t>> {
    // `started = shipment.last_attempt_at or now` before `now - started < KEY_RETRY_WINDOW`:
    // the stamp a local was given.
    let func = idx.enclosing(comparison, kinds::FUNCTION_DEFINITION);
    let through_local = |node: Node<'t>| match node.kind() {
        kinds::IDENTIFIER => func
            .and_then(|f| {
                idx.assigned_before(
                    Some(f),
                    syntax::text(node, src),
                    comparison.start_byte(),
                    src,
                )
            })
            .and_then(preferred),
        _ => Some(node),
    };
    let stamp = |candidate: Node<'t>| {
        preferred(candidate).and_then(through_local).filter(|s| {
            s.kind() == kinds::ATTRIBUTE
                && s.field("attribute").is_some_and(|a| {
                    let field = syntax::text(a, src);
                    stamps_time(field) || last_written(field)
                })
        })
    };
    let in_arithmetic = syntax::descendants(comparison, &[kinds::BINARY_OPERATOR])
        .into_iter()
        .find_map(|op| {
            let operator = op.field("operator").map(|o| syntax::text(o, src))?;
            let (left, right) = (op.field("left")?, op.field("right")?);
            match operator {
                "-" if !syntax::contains(right, window) => stamp(right),
                "+" if syntax::contains(right, window) => stamp(left),
                "+" if syntax::contains(left, window) => stamp(right),
                _ => None,
            }
        });
    in_arithmetic.or_else(|| {
        let mut cursor = comparison.walk();
        let operands: Vec<Node<'t>> = comparison.named_children(&mut cursor).collect();
        let bound = operands.iter().any(|o| syntax::contains(*o, window));
        operands
            .into_iter()
            .filter(|o| !syntax::contains(*o, window))
            .find_map(|o| {
                // `age = now - (capture.last_attempt_at or capture.created_at)` before `age >=
                // self._retry_window`: the span a local was given.
                let span = (o.kind() == kinds::IDENTIFIER)
                    .then(|| {
                        idx.assigned_before(
                            func,
                            syntax::text(o, src),
                            comparison.start_byte(),
                            src,
                        )
                    })
                    .flatten()
                    .filter(|v| {
                        v.kind() == kinds::BINARY_OPERATOR
                            && v.field("operator")
                                .is_some_and(|op| syntax::text(op, src) == "-")
                    })
                    .and_then(|v| v.field("right"))
                    .and_then(stamp);
                span.or_else(|| stamp(o)).filter(|_| bound)
            })
    })
}

/// The stamp read first: `(payout.last_attempt_at or payout.created_at)` is the last attempt's
/// time whenever there was one.
fn preferred(node: Node<'_>) -> Option<Node<'_>> {
    let mut node = node;
    loop {
        node = match node.kind() {
            kinds::PARENTHESIZED_EXPRESSION => node.named_child(0)?,
            kinds::BOOLEAN_OPERATOR => node.field("left")?,
            _ => return Some(node),
        };
    }
}

/// A stamp moved by every write of the record, or by every attempt: `updated_at`,
/// `last_sent_at`, `last_attempt_at`.
fn moved_by_every_write(field: &str) -> bool {
    let words = syntax::name_words(field);
    last_written(field)
        || words
            .first()
            .is_some_and(|w| matches!(w.as_str(), "last" | "latest"))
}

/// The line where the comparison's function writes the stamp the clock, on every pass: not under
/// a condition, and not kept when it is set (`started = renewal.charge_started_at or now`).
fn written_each_pass(
    idx: &NodeIndex<'_>,
    comparison: Node<'_>,
    field: &str,
    src: &str,
) -> Option<u32> {
    let func = idx.enclosing(comparison, kinds::FUNCTION_DEFINITION)?;
    let clock = |value: Node<'_>| {
        let text = syntax::text(value, src);
        the_time(text) || text.ends_with("clock()")
    };
    let unconditional = |node: Node<'_>| {
        let mut at = node.parent();
        while let Some(n) = at.filter(|n| n.id() != func.id()) {
            if matches!(
                n.kind(),
                kinds::IF_STATEMENT
                    | kinds::ELIF_CLAUSE
                    | kinds::ELSE_CLAUSE
                    | kinds::CONDITIONAL_EXPRESSION
                    | kinds::EXCEPT_CLAUSE
                    | kinds::FUNCTION_DEFINITION
                    | kinds::LAMBDA
            ) {
                return false;
            }
            at = n.parent();
        }
        true
    };
    // `.update(charge_started_at=now)`, `.values(...)`, `Model(...)`.
    let keyword = idx.within(func, kinds::CALL).iter().find_map(|&call| {
        syntax::keyword_args(call, src)
            .into_iter()
            .find(|&(name, value)| name == field && clock(value) && unconditional(call))
            .map(|(_, value)| value)
    });
    let assigned = || {
        idx.within(func, kinds::ASSIGNMENT)
            .iter()
            .copied()
            .find(|a| {
                a.field("left").is_some_and(|l| {
                    l.kind() == kinds::ATTRIBUTE
                        && l.field("attribute")
                            .is_some_and(|n| syntax::text(n, src) == field)
                }) && a.field("right").is_some_and(clock)
                    && unconditional(*a)
            })
    };
    keyword.or_else(assigned).map(|n| syntax::lines(n).0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_of_the_last_write_or_attempt_are_told_by_their_names() {
        for moved in ["updated_at", "last_sent_at", "last_attempt_at", "modified"] {
            assert!(moved_by_every_write(moved), "{moved}");
        }
        for kept in [
            "created_at",
            "first_sent_at",
            "charge_started_at",
            "submitted_at",
        ] {
            assert!(!moved_by_every_write(kept), "{kept}");
        }
    }
}
