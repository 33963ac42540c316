//! ERR007 ack-before-handling: a consumer acknowledges a message (commits its offset, acks it,
//! deletes it from the queue) before it handles it. If handling then fails, or the worker dies
//! half way, the broker has already let the message go and never delivers it again: a capture,
//! a refund, a payout event is lost without a trace.
//!
//! Left alone: an acknowledgement after the handling (at the end of the loop, in a `finally`),
//! a database session's `commit`, and handling that only hands the message to another queue.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "ERR007",
    doc: include_str!("../../../rules/err/ERR007.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is an acknowledgement of a broker's message: asked of the file's calls, read
/// once by the facts pass, not of its text.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.facts
            .calls
            .iter()
            .any(|c| acknowledges(c.name(), c.receiver()))
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    for &ack in idx.all(kinds::CALL) {
        let parts = idx.call_text(ack, src);
        if !acknowledges(parts.name, parts.receiver) {
            continue;
        }
        let Some(func) = idx.enclosing(ack, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        // Where the message is handled: the loop the acknowledgement is in, or the function
        // handed the message.
        let scope = super::innermost_loop(ack, idx)
            .filter(|l| syntax::contains(func, *l))
            .unwrap_or(func);
        let messages = message_names(idx, scope, func, src);
        if messages.is_empty() {
            continue;
        }
        let Some(work) = handled_after(idx, scope, func, ack, &messages, src) else {
            continue;
        };
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, ack)
            .arg("ack", crate::rules::pay::first_line(ack, src))
            .arg("work", syntax::callee(work, src).to_string())
            .arg("work_line", syntax::lines(work).0.to_string())
            .arg("function", function.clone());
        finding.function = function;
    }
}

/// `consumer.commit(...)`, `self._consumer.commit(...)`, `message.ack()`, `channel.basic_ack(...)`,
/// `sqs.delete_message(...)`: what tells a broker a message is done with. A database session's
/// `commit` is not one.
pub(crate) fn acknowledges(name: &str, receiver: Option<&str>) -> bool {
    // The name first: asked of every call of a file by the gate.
    let Some(receiver) = receiver.filter(|_| {
        matches!(
            name,
            "commit" | "ack" | "acknowledge" | "basic_ack" | "delete_message"
        )
    }) else {
        return false;
    };
    let last = receiver.rsplit('.').next().unwrap_or(receiver);
    let words = syntax::name_words(last);
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    match name {
        "commit" => has(&["consumer", "kafka"]),
        "ack" | "acknowledge" => has(&[
            "message", "msg", "m", "record", "delivery", "envelope", "job",
        ]),
        "basic_ack" => true,
        "delete_message" => has(&["sqs", "queue", "client"]),
        _ => false,
    }
}

/// Names that hold the messages handled in `scope`: the variables of the `for` loops in it
/// (itself included) and, for the function itself, its parameters named for a message.
fn message_names(idx: &NodeIndex<'_>, scope: Node<'_>, func: Node<'_>, src: &str) -> Vec<String> {
    let mut out: Vec<String> = std::iter::once(scope)
        .filter(|s| s.kind() == kinds::FOR_STATEMENT)
        .chain(idx.within(scope, kinds::FOR_STATEMENT).iter().copied())
        .filter_map(|l| l.field("left"))
        .flat_map(|left| {
            if left.kind() == kinds::IDENTIFIER {
                vec![left]
            } else {
                crate::python::named_children(left)
            }
        })
        .filter(|n| n.kind() == kinds::IDENTIFIER)
        .map(|n| syntax::text(n, src).to_string())
        .collect();
    if scope.id() == func.id() {
        out.extend(
            crate::rules::pay::parameters(func, src)
                .into_iter()
                .filter(|p| {
                    syntax::name_words(p).iter().any(|w| {
                        matches!(
                            w.as_str(),
                            "message" | "msg" | "record" | "delivery" | "body" | "payload"
                        )
                    })
                }),
        );
    }
    out
}

/// The first call after `ack` in `scope`, of the function's own code, that hands it a message:
/// not logging, not a reading of it (`json.loads`), not another acknowledgement.
fn handled_after<'t>(
    idx: &NodeIndex<'t>,
    scope: Node<'t>,
    func: Node<'t>,
    ack: Node<'_>,
    messages: &[String],
    src: &str,
) -> Option<Node<'t>> {
    idx.within(scope, kinds::CALL).iter().copied().find(|&c| {
        if c.start_byte() <= ack.end_byte() || !super::owned_by(c, func, idx) {
            return false;
        }
        let parts = idx.call_text(c, src);
        if facts::only_records(parts.callee)
            || acknowledges(parts.name, parts.receiver)
            || matches!(
                parts.name,
                "loads" | "decode" | "get" | "len" | "str" | "int" | "items" | "getmany" | "getone"
            )
        {
            return false;
        }
        syntax::positional_args(c)
            .into_iter()
            .chain(syntax::keyword_args(c, src).into_iter().map(|(_, v)| v))
            .any(|a| {
                syntax::text(a, src)
                    .split(|ch: char| !(ch.is_alphanumeric() || ch == '_'))
                    .any(|w| messages.iter().any(|m| m == w))
            })
    })
}
