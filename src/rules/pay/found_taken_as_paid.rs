//! PAY030 found-taken-as-paid: a payment looked up at the provider (`search_transactions`,
//! `find_attempt`, `PaymentIntent.retrieve`) after an outcome went unknown is recorded as paid
//! because it was found, with its status never read. The lookup finds declined, failed and
//! voided attempts as readily as settled ones: the invoice is marked paid with nothing
//! collected, and nothing will ask the payer again.
//!
//! Left alone: a lookup whose outcome is tested (`if found.succeeded:`, `found.status ==
//! "settled"`) in the function or in the function of the file that records it, and a lookup
//! that asks for settled payments only (`status="settled"` among its arguments).
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY030",
    doc: include_str!("../../../rules/pay/PAY030.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// What an outcome is read by: `found.status`, `txn["state"]`, `result.succeeded`.
const OUTCOME: &[&str] = &[
    "status",
    "state",
    "succeeded",
    "success",
    "successful",
    "paid",
    "captured",
    "settled",
    "outcome",
    "approved",
    "declined",
    "failed",
    "is_",
    "ok",
];

/// Every finding is a lookup of a payment and a record of one.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(&["find", "search", "lookup", "retrieve", "fetch"])
        && s.mentions(&["record", "mark", "book"])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    for &assign in idx.all(kinds::ASSIGNMENT) {
        let (Some(left), Some(right)) = (assign.field("left"), assign.field("right")) else {
            continue;
        };
        let lookup = crate::rules::idem::strip_await(right);
        if left.kind() != kinds::IDENTIFIER
            || lookup.kind() != kinds::CALL
            || !looks_up_a_payment(lookup, src)
        {
            continue;
        }
        let Some(func) = idx.enclosing(assign, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let found = syntax::text(left, src);
        if tests_outcome(idx, func, found, src) || only_completed_captures(lookup, src) {
            continue;
        }
        let Some((record, position)) = idx.within(func, kinds::CALL).iter().find_map(|&c| {
            if c.start_byte() <= assign.end_byte() || !records_payment(idx.callee_name(c, src)) {
                return None;
            }
            let args = syntax::positional_args(c);
            let handed = args.iter().any(|a| {
                let text = syntax::text(*a, src);
                text == found
                    || text.starts_with(&format!("{found}."))
                    || text.starts_with(&format!("{found}["))
            });
            handed.then(|| (c, args.iter().position(|a| syntax::text(*a, src) == found)))
        }) else {
            continue;
        };
        // The function of the file that records it may read the outcome itself.
        let name = idx.callee_name(record, src);
        let recorder_tests = idx.all(kinds::FUNCTION_DEFINITION).iter().any(|&def| {
            syntax::function_name(def, src) == name && {
                let params: Vec<&str> = super::positional_parameters(def, src)
                    .into_iter()
                    .filter(|p| !matches!(*p, "self" | "cls"))
                    .collect();
                position
                    .and_then(|at| params.get(at))
                    .is_some_and(|p| tests_outcome(idx, def, p, src))
            }
        });
        if recorder_tests {
            continue;
        }
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, record)
            .arg("function", function.clone())
            .arg("found", found.to_string())
            .arg("lookup", super::first_line(lookup, src))
            .arg("lookup_line", syntax::lines(lookup).0.to_string())
            .arg("record", super::first_line(record, src));
        finding.function = function;
    }
}

/// A capture looked up on a Klarna order (`get_klarna().find_capture(order_id, reference)`):
/// Klarna's order holds only captures it made, as a capture it refuses is answered with an
/// error and leaves none, so one found was made.
fn only_completed_captures(lookup: Node<'_>, src: &str) -> bool {
    syntax::contains_lowercase(syntax::callee_name(lookup, src), "capture")
        && syntax::contains_lowercase(src, "klarna")
}

/// A lookup of a payment at the provider or in a search (`gateway.search_transactions(...)`,
/// `self._find_attempt(...)`, `stripe.PaymentIntent.retrieve(...)`), not one that asks for
/// settled payments only.
fn looks_up_a_payment(call: Node<'_>, src: &str) -> bool {
    let callee = syntax::callee(call, src);
    // Asked of every assignment of a call: the verbs first, without splitting the name.
    if !["find", "search", "lookup", "retrieve", "fetch"]
        .iter()
        .any(|v| syntax::contains_lowercase(callee, v))
    {
        return false;
    }
    let words = syntax::name_words(callee);
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    has(&["find", "search", "lookup", "retrieve", "fetch"])
        && has(&[
            "transaction",
            "transactions",
            "txn",
            "payment",
            "payments",
            "charge",
            "charges",
            "attempt",
            "intent",
            "sale",
            "capture",
        ])
        && !["status", "succeeded", "settled"]
            .iter()
            .any(|w| syntax::text(call, src).contains(w))
}

/// `_record_payment`, `mark_paid`, `book_payment`, `record_success`: a function that records a
/// payment as made.
fn records_payment(name: &str) -> bool {
    let words = syntax::name_words(name);
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    has(&["record", "mark", "book", "apply", "save", "store", "settle"])
        && has(&[
            "payment",
            "paid",
            "success",
            "succeeded",
            "captured",
            "capture",
            "charge",
            "completed",
            "complete",
            "settled",
        ])
}

/// Whether `func` tests the outcome of `name` in a condition: `if found.succeeded`,
/// `txn.status == "settled"`, `found["state"] in OK`.
fn tests_outcome(idx: &NodeIndex<'_>, func: Node<'_>, name: &str, src: &str) -> bool {
    let reads = |text: &str| {
        OUTCOME.iter().any(|w| {
            text.contains(&format!("{name}.{w}"))
                || text.contains(&format!("{name}[\"{w}"))
                || text.contains(&format!("{name}['{w}"))
                || text.contains(&format!("{name}.get(\"{w}"))
        })
    };
    let conditions = idx
        .within(func, kinds::IF_STATEMENT)
        .iter()
        .filter_map(|s| s.field("condition"))
        .chain(
            idx.within(func, kinds::CONDITIONAL_EXPRESSION)
                .iter()
                .copied(),
        )
        .chain(idx.within(func, kinds::COMPARISON_OPERATOR).iter().copied())
        .chain(idx.within(func, kinds::BOOLEAN_OPERATOR).iter().copied());
    conditions.into_iter().any(|c| reads(syntax::text(c, src)))
}
