//! PAY029 settled-refunds-only: what has gone back (refunds, payouts, reversals) is added up
//! from the rows that reached the final success state alone (`Refund.status == "succeeded"`,
//! `status="refunded"`), and the sum is taken from, or weighed against, money: what is still
//! refundable, what the payout carries. A refund sent and not yet confirmed is money already on
//! its way back; left out of the sum, it counts as still here, and a second refund or the payout
//! goes out on top of it.
//!
//! Left alone: a sum that also counts the rows in flight (`status != "failed"`, `.in_(...)` of
//! a set of states), and one only shown or returned (no arithmetic on it).
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY029",
    doc: include_str!("../../../rules/pay/PAY029.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// States in which money that went back has arrived.
const SETTLED: &[&str] = &[
    "succeeded",
    "success",
    "successful",
    "settled",
    "completed",
    "complete",
    "refunded",
    "paid",
    "done",
    "processed",
    "confirmed",
    "finished",
];

/// Every finding is a sum in code that names refunds or payouts.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(&["sum(", "Sum(", "SUM("])
        && s.mentions(&["efund", "ayout", "ithdrawal", "eversal"])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    for &assign in idx.all(kinds::ASSIGNMENT) {
        let (Some(left), Some(right)) = (assign.field("left"), assign.field("right")) else {
            continue;
        };
        if left.kind() != kinds::IDENTIFIER {
            continue;
        }
        let text = syntax::text(right, src);
        if !adds_up_what_went_back(text) {
            continue;
        }
        let Some((filter, state)) = settled_only(text) else {
            continue;
        };
        let name = syntax::text(left, src);
        let func = idx.enclosing(assign, kinds::FUNCTION_DEFINITION);
        let Some(used) = weighed(idx, func, assign, name, src) else {
            continue;
        };
        let function = func
            .map(|f| facts::qualname(f, idx, src))
            .unwrap_or_default();
        let finding = cx
            .report(&RULE, assign)
            .arg("name", name.to_string())
            .arg("filter", filter)
            .arg("state", state)
            .arg("use", super::first_line(used, src))
            .arg("use_line", syntax::lines(used).0.to_string());
        finding.function = function;
    }
}

/// A sum (`func.sum(`, `Sum(`, SQL `SUM(`, Python's `sum(`) of refunds, payouts, withdrawals
/// or reversals.
fn adds_up_what_went_back(text: &str) -> bool {
    ["sum(", "Sum(", "SUM("].iter().any(|s| text.contains(s))
        && ["refund", "payout", "withdrawal", "reversal"]
            .iter()
            .any(|w| syntax::contains_lowercase(text, w))
}

/// The one status the sum keeps, when it keeps only a settled one: `Refund.status ==
/// "succeeded"`, `status="refunded"`, `.status == RefundStatus.SUCCEEDED`. As the test written
/// and the state. `None` where a test of a status keeps others too (`!=`, `.in_(`, `__in`).
fn settled_only(text: &str) -> Option<(String, String)> {
    let mut found = None;
    for field in ["status", "state"] {
        for (at, _) in text.match_indices(field) {
            let rest = &text[at + field.len()..];
            let rest = rest.trim_start_matches(['"', '\'']);
            let trimmed = rest.trim_start();
            // A test that keeps more than one state, or all but one: the rows in flight count.
            if [
                "!=", ".in_(", ".notin_(", "__in", " IN ", " in ", " not in ",
            ]
            .iter()
            .any(|t| trimmed.starts_with(t.trim_start()) || rest.starts_with(t))
            {
                return None;
            }
            let Some(value) = trimmed
                .strip_prefix("==")
                .or_else(|| trimmed.strip_prefix('=').filter(|v| !v.starts_with('=')))
            else {
                continue;
            };
            let value = value.trim_start();
            let end = value
                .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '"' | '\'')))
                .unwrap_or(value.len());
            let token = &value[..end];
            let state = token
                .trim_matches(|c| c == '"' || c == '\'')
                .rsplit('.')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            if !SETTLED.contains(&state.as_str()) {
                return None;
            }
            let op = if trimmed.starts_with("==") {
                " == "
            } else {
                "="
            };
            let written = format!("{field}{op}{token}");
            found = Some((written, state));
        }
    }
    found
}

/// Where the sum is taken from or weighed against money after it is set: `gross - refunded`,
/// `captured - refunded_minor >= amount`, `row.done + row.units > row.captured` of a labelled
/// subquery.
fn weighed<'t>(
    idx: &NodeIndex<'t>,
    func: Option<Node<'t>>,
    assign: Node<'t>,
    name: &str,
    src: &str,
) -> Option<Node<'t>> {
    let scope: Vec<Node<'t>> = match func {
        Some(f) => [kinds::BINARY_OPERATOR, kinds::COMPARISON_OPERATOR]
            .iter()
            .flat_map(|k| idx.within(f, k).iter().copied())
            .collect(),
        None => Vec::new(),
    };
    let labelled = format!(".{name}");
    let in_file = [kinds::BINARY_OPERATOR, kinds::COMPARISON_OPERATOR]
        .iter()
        .flat_map(|k| idx.all(k).iter().copied());
    let own = scope
        .into_iter()
        .filter(|op| op.start_byte() > assign.end_byte() && uses_in_money(*op, name, src));
    let mut found: Vec<Node<'t>> = own.collect();
    // A subquery labelled with its name (`done.label("done")`) is read back as `row.done`.
    let scope_text = syntax::text(func.unwrap_or(assign), src);
    if scope_text.contains(&format!("label(\"{name}\")")) {
        found
            .extend(in_file.filter(|op| syntax::text(*op, src).contains(&labelled) && weighs(*op)));
    }
    found.into_iter().min_by_key(|n| n.start_byte())
}

/// Whether `op` subtracts `name`, or compares with it, or adds it to be compared.
fn uses_in_money(op: Node<'_>, name: &str, src: &str) -> bool {
    weighs(op)
        && crate::python::named_children(op)
            .iter()
            .any(|c| c.kind() == kinds::IDENTIFIER && syntax::text(*c, src) == name)
}

/// An operator that takes from, adds to, or weighs against: `-`, `+`, `>`, `<`, `>=`, `<=`.
fn weighs(op: Node<'_>) -> bool {
    op.child(1)
        .is_some_and(|o| matches!(o.kind(), "-" | "+" | ">" | "<" | ">=" | "<="))
}
