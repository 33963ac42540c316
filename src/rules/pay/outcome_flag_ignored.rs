//! PAY019 outcome-flag-ignored: a provider's notification carries its outcome as a flag of its
//! own (Adyen's `"success": "true"` beside the `eventCode`), a handler of one kind of event reads
//! it, and a handler of another kind, handed the same event, records the operation as done
//! without reading it. A failed capture (an expired authorisation) is booked as captured and
//! credited, a refund the bank refused is shown as refunded.
//!
//! The evidence is the file's own: a sibling handler that reads the flag of a parameter of the
//! same name. A handler that hands the event to a function that reads the flag is left alone.
use tree_sitter::Node;

use super::success_recorded_before_result::records_success;
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY019",
    doc: include_str!("../../../rules/pay/PAY019.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// The keys a notification's outcome flag goes by.
const FLAGS: &[&str] = &["success", "succeeded", "successful", "is_success"];

/// Every finding is a handler in a file where another one reads an outcome flag.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && s.mentions(&["success"])
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let functions = idx.all(kinds::FUNCTION_DEFINITION);
    // (function, parameter) for each function that reads the flag of one of its parameters.
    let mut readers: Vec<(Node<'_>, String)> = Vec::new();
    for &func in functions {
        // Only a function whose text names the flag can read it.
        if !syntax::text(func, src).contains("success") {
            continue;
        }
        for param in crate::rules::pay::parameters(func, src) {
            if names_an_outcome(&param) && reads_flag(func, &param, src).is_some() {
                readers.push((func, param));
            }
        }
    }
    if readers.is_empty() {
        return;
    }
    for &func in functions {
        if readers.iter().any(|(f, _)| f.id() == func.id()) {
            continue;
        }
        let params = crate::rules::pay::parameters(func, src);
        // The flag read by the caller and handed in (`_on_refund(session, item, success, ...)`
        // that tests `if not success`): the outcome is read, under its own name.
        if params
            .iter()
            .any(|p| (FLAGS.contains(&p.as_str()) || p == "ok") && tests_flag(idx, func, p, src))
        {
            continue;
        }
        for param in params {
            let Some((sibling, _)) = readers.iter().find(|(_, p)| *p == param) else {
                continue;
            };
            let Some(flag) = reads_flag(*sibling, &param, src) else {
                continue;
            };
            // It reads the event as a notification: some other key of it.
            if !reads_a_key(func, &param, src)
                || hands_to_a_reader(idx, func, &param, &readers, src)
            {
                continue;
            }
            let Some(done) = records_done(idx, func, src) else {
                continue;
            };
            let handler = facts::qualname(func, idx, src);
            let finding = cx
                .report(&RULE, done)
                .arg("handler", handler.clone())
                .arg("event", param.clone())
                .arg("flag", flag.to_string())
                .arg("sibling", facts::qualname(*sibling, idx, src))
                .arg("done", crate::rules::pay::first_line(done, src));
            finding.function = handler;
            break;
        }
    }
}

/// A parameter named for what a provider sent back (`event`, `item`, `notification`,
/// `result`), not for a record of ours (`payment.success` is our own payment's state).
pub(crate) fn names_an_outcome(param: &str) -> bool {
    syntax::name_words(param).iter().any(|w| {
        matches!(
            w.as_str(),
            "event"
                | "evt"
                | "item"
                | "notification"
                | "notif"
                | "result"
                | "response"
                | "resp"
                | "reply"
                | "outcome"
                | "payload"
                | "message"
                | "msg"
                | "callback"
                | "webhook"
                | "answer"
        )
    })
}

/// The flag `func` reads of its parameter `param`: `param.get("success")`, `param["success"]`,
/// `param.success`.
fn reads_flag(func: Node<'_>, param: &str, src: &str) -> Option<&'static str> {
    let body = syntax::text(func.field("body")?, src);
    FLAGS.iter().copied().find(|flag| {
        body.contains(flag)
            && [
                format!("{param}.get(\"{flag}\""),
                format!("{param}.get('{flag}'"),
                format!("{param}[\"{flag}\"]"),
                format!("{param}['{flag}']"),
                format!("{param}.{flag}"),
            ]
            .iter()
            .any(|form| {
                body.match_indices(form.as_str()).any(|(at, _)| {
                    // `param.success` must not be the start of `param.successful_at`.
                    let next = body[at + form.len()..].chars().next();
                    !form.ends_with(flag) || !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
                })
            })
    })
}

/// Whether `func` reads some key or attribute of `param` (`event["pspReference"]`,
/// `event.get("reference")`, `result.transaction.id`) or hands it on: what a handler of a
/// notification or a result does with it.
fn reads_a_key(func: Node<'_>, param: &str, src: &str) -> bool {
    func.field("body").is_some_and(|b| {
        let body = syntax::text(b, src);
        body.contains(&format!("{param}[")) || body.contains(&format!("{param}.")) || {
            // Handed to a helper that reads it: `_by_reference(session, LegCapture, event)`.
            body.contains(&format!(", {param})")) || body.contains(&format!("({param})"))
        }
    })
}

/// Whether `func` tests its parameter `flag` in an `if` (`if not success or ...:`).
fn tests_flag(idx: &NodeIndex<'_>, func: Node<'_>, flag: &str, src: &str) -> bool {
    idx.within(func, kinds::IF_STATEMENT).iter().any(|stmt| {
        stmt.field("condition").is_some_and(|c| {
            syntax::name_words(syntax::text(c, src))
                .iter()
                .any(|w| w == flag)
        })
    })
}

/// Whether `func` hands `param` to a function of the file that reads the flag.
fn hands_to_a_reader(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    param: &str,
    readers: &[(Node<'_>, String)],
    src: &str,
) -> bool {
    idx.within(func, kinds::CALL).iter().any(|&call| {
        let name = syntax::callee_name(call, src);
        syntax::positional_args(call)
            .iter()
            .chain(syntax::keyword_args(call, src).iter().map(|(_, v)| v))
            .any(|a| syntax::text(*a, src) == param)
            && readers
                .iter()
                .any(|(f, _)| syntax::function_name(*f, src) == name)
    })
}

/// The first write in `func` that records a payment operation as done: `capture.status =
/// "captured"`, `refund.state = RefundState.REFUNDED`, `update(status="paid")`.
fn records_done<'t>(idx: &NodeIndex<'t>, func: Node<'t>, src: &str) -> Option<Node<'t>> {
    let assignment = idx
        .within(func, kinds::ASSIGNMENT)
        .iter()
        .copied()
        .find(|a| {
            let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
                return false;
            };
            left.kind() == kinds::ATTRIBUTE
                && records_success(&attribute(left, src).to_ascii_lowercase(), right, src)
        });
    let keyword = idx.within(func, kinds::CALL).iter().copied().find(|&c| {
        syntax::keyword_args(c, src)
            .into_iter()
            .any(|(k, v)| records_success(&k.to_ascii_lowercase(), v, src))
    });
    match (assignment, keyword) {
        (Some(a), Some(k)) => Some(if a.start_byte() <= k.start_byte() {
            a
        } else {
            k
        }),
        (a, k) => a.or(k),
    }
}

fn attribute<'s>(left: Node<'_>, src: &'s str) -> &'s str {
    let text = syntax::text(left, src);
    text.rsplit('.').next().unwrap_or(text)
}
