//! PAY037 event-applied-in-any-state: a handler of the provider's events sets a record's final
//! success by the event's type (`if event["type"] == "payout.paid": payout.status =
//! PayoutStatus.PAID`), and a final failure by another type, without reading the state the
//! record is in. Providers promise neither the order of their events nor a single delivery: a
//! `payout.paid` delivered late, or again, after `payout.failed` turns a payout the bank
//! returned into a paid one. The money never arrived, the failure leaves the queue of what
//! someone must look at, and nobody sends it again.
//!
//! Left alone: a handler that reads the record's state anywhere (`if payout.status in (...)`),
//! updates it only from given states (`.filter(status=...)`, `WHERE status = ...`), or sets no
//! failure by another type (one kind of event only).
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY037",
    doc: include_str!("../../../rules/pay/PAY037.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Final states in which the money arrived.
const SUCCEEDED: &[&str] = &[
    "paid",
    "succeeded",
    "success",
    "completed",
    "captured",
    "settled",
    "refunded",
];

/// Final states in which it did not.
const FAILED: &[&str] = &[
    "failed",
    "failure",
    "declined",
    "canceled",
    "cancelled",
    "reversed",
    "returned",
    "refused",
    "rejected",
    "expired",
    "voided",
];

/// Every finding is a state written by an event's type, in code that names events.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(&[".status = ", ".state = "])
        && s.mentions(&["type", "event", "kind", "action", "topic"])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    // A success written to a status at all, before any `if` is read: most files write none.
    let writes_a_success = idx.all(kinds::ASSIGNMENT).iter().any(|a| {
        a.field("left")
            .filter(|l| l.kind() == kinds::ATTRIBUTE)
            .and_then(|l| l.field("attribute"))
            .is_some_and(|f| matches!(syntax::text(f, src), "status" | "state"))
            && a.field("right")
                .is_some_and(|r| final_state(syntax::text(r, src)) == Some(true))
    });
    if !writes_a_success {
        return;
    }
    for &stmt in idx.all(kinds::IF_STATEMENT) {
        // The first arm's test first: most `if`s test no event's type.
        if stmt
            .field("condition")
            .is_none_or(|c| event_type(c, src).is_none())
        {
            continue;
        }
        let arms = arms(stmt);
        if arms.len() < 2 {
            continue;
        }
        // Each arm's event type (none for an `else`) and the final states it writes.
        let mut written: Vec<(Option<String>, Write<'_>)> = Vec::new();
        for (condition, body) in &arms {
            let event = match condition {
                Some(c) => match event_type(*c, src) {
                    Some(e) => Some(e),
                    None => {
                        written.clear();
                        break;
                    }
                },
                None => None,
            };
            written.extend(
                writes(idx, *body, src)
                    .into_iter()
                    .map(|w| (event.clone(), w)),
            );
        }
        let Some(func) = idx.enclosing(stmt, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        for (event, success) in written.iter().filter(|(_, w)| w.succeeded) {
            let Some(event) = event else {
                continue;
            };
            let Some((other_event, failure)) = written.iter().find(|(e, w)| {
                !w.succeeded
                    && w.record == success.record
                    && w.field == success.field
                    && e.as_ref() != Some(event)
            }) else {
                continue;
            };
            if reads_the_state(idx, func, success, src) {
                continue;
            }
            let function = facts::qualname(func, idx, src);
            let finding = cx
                .report(&RULE, success.node)
                .arg("function", function.clone())
                .arg("write", super::first_line(success.node, src))
                .arg("event", event.clone())
                .arg("failure", super::first_line(failure.node, src))
                .arg("failure_line", syntax::lines(failure.node).0.to_string())
                .arg(
                    "other_event",
                    other_event
                        .clone()
                        .unwrap_or_else(|| "another event".to_string()),
                )
                .arg("state", format!("{}.{}", success.record, success.field));
            finding.function = function;
        }
    }
}

/// The arms of a top `if` with its `elif`s and `else`: (condition, body), no condition for
/// the `else`.
fn arms(stmt: Node<'_>) -> Vec<(Option<Node<'_>>, Node<'_>)> {
    if stmt
        .parent()
        .is_some_and(|p| matches!(p.kind(), kinds::ELIF_CLAUSE | kinds::ELSE_CLAUSE))
    {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let (Some(c), Some(b)) = (stmt.field("condition"), stmt.field("consequence")) {
        out.push((Some(c), b));
    }
    for child in crate::python::named_children(stmt) {
        match child.kind() {
            kinds::ELIF_CLAUSE => {
                if let (Some(c), Some(b)) = (child.field("condition"), child.field("consequence")) {
                    out.push((Some(c), b));
                }
            }
            kinds::ELSE_CLAUSE => {
                if let Some(b) = child.field("body") {
                    out.push((None, b));
                }
            }
            _ => {}
        }
    }
    out
}

/// The event's type a condition tests, as written: `event["type"] == "payout.paid"`,
/// `kind in ("charge.succeeded", ...)`, `event.type == EventType.PAYOUT_PAID`.
fn event_type(condition: Node<'_>, src: &str) -> Option<String> {
    let mut node = condition;
    while node.kind() == kinds::PARENTHESIZED_EXPRESSION {
        node = node.named_child(0)?;
    }
    if node.kind() != kinds::COMPARISON_OPERATOR || node.named_child_count() != 2 {
        return None;
    }
    let (subject, value) = (node.named_child(0)?, node.named_child(1)?);
    let operator = src.get(subject.end_byte()..value.start_byte())?.trim();
    if !matches!(operator, "==" | "in") {
        return None;
    }
    let tested = syntax::text(subject, src).to_ascii_lowercase();
    let last = tested
        .rsplit(['.', '['])
        .next()
        .unwrap_or(&tested)
        .trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_');
    let of_an_event = ["type", "kind", "event", "action", "topic"]
        .iter()
        .any(|w| last.ends_with(w));
    // The record's own state is no event: `payout.status == ...` is a read of it.
    (of_an_event && !last.contains("status") && !last.contains("state"))
        .then(|| syntax::text(value, src).to_string())
}

/// A final state written to a record: `payout.status = PayoutStatus.PAID`.
struct Write<'t> {
    node: Node<'t>,
    record: String,
    field: String,
    succeeded: bool,
}

/// The final states a block writes to a record's status (not through a helper).
fn writes<'t>(idx: &NodeIndex<'t>, body: Node<'t>, src: &str) -> Vec<Write<'t>> {
    idx.within(body, kinds::ASSIGNMENT)
        .iter()
        .filter_map(|&a| {
            let left = a.field("left").filter(|l| l.kind() == kinds::ATTRIBUTE)?;
            let record = left
                .field("object")
                .filter(|o| o.kind() == kinds::IDENTIFIER)?;
            let field = syntax::text(left.field("attribute")?, src);
            if !matches!(field, "status" | "state") {
                return None;
            }
            let succeeded = final_state(syntax::text(a.field("right")?, src))?;
            Some(Write {
                node: a,
                record: syntax::text(record, src).to_string(),
                field: field.to_string(),
                succeeded,
            })
        })
        .collect()
}

/// Whether a written value is a final success (`PayoutStatus.PAID`), a final failure
/// (`"payout_failed"`), or neither (`None`).
fn final_state(value: &str) -> Option<bool> {
    let word = value
        .rsplit('.')
        .next()
        .unwrap_or(value)
        .trim_matches(|c| c == '"' || c == '\'')
        .to_ascii_lowercase();
    let words = syntax::name_words(&word);
    let is = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    let failed = is(FAILED);
    if is(SUCCEEDED) && !failed {
        Some(true)
    } else {
        failed.then_some(false)
    }
}

/// Whether the function reads the record's state before it writes it (`if payout.status in
/// (...)`, `payout.status == ...`), or loads or updates it from given states
/// (`.filter(status=...)`, `WHERE status = ...`, `.where(Payout.status == ...)`).
fn reads_the_state(idx: &NodeIndex<'_>, func: Node<'_>, write: &Write<'_>, src: &str) -> bool {
    let read = format!("{}.{}", write.record, write.field);
    let as_read = idx.within(func, kinds::ATTRIBUTE).iter().any(|a| {
        syntax::text(*a, src) == read
            && a.parent().is_none_or(|p| {
                !(p.kind() == kinds::ASSIGNMENT
                    && p.field("left").is_some_and(|l| l.id() == a.id()))
            })
    });
    let field = write.field.as_str();
    let loaded_by_state = idx.within(func, kinds::CALL).iter().any(|c| {
        let args = c.field("arguments").map_or("", |a| syntax::text(a, src));
        let lower = args.to_ascii_lowercase();
        [
            format!("{field}="),
            format!("{field}__in="),
            format!(".{field} =="),
            format!(".{field}.in_("),
            format!("{field} = '"),
            format!("{field} in ("),
            format!("\"{field}\":"),
        ]
        .iter()
        .any(|p| {
            // `HttpResponse(status=200)`, `{"status": 400}`: an answer's code, not a state.
            lower.match_indices(p.as_str()).any(|(at, _)| {
                !lower[at + p.len()..]
                    .trim_start()
                    .starts_with(|c: char| c.is_ascii_digit())
            })
        })
    });
    as_read || loaded_by_state
}
