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
            failure_acked(cx, idx, (scope, func, ack), &messages, src);
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

/// A message handled in a `try` whose broad `except` now only logs, and acknowledged after it
/// whatever happened (`except Exception: logger.exception(...)`, then
/// `self._consumer.commit(message=msg)`), where the old version of the function gave the
/// failure back to the broker (`seek` to the offset, `nack`, `raise`, `return` before the
/// commit). A capture that hit a provider's blip is then never tried again.
fn failure_acked(
    cx: &mut Ctx<'_>,
    idx: &NodeIndex<'_>,
    (scope, func, ack): (Node<'_>, Node<'_>, Node<'_>),
    messages: &[String],
    src: &str,
) {
    let Some((clause, work)) = idx
        .within(scope, kinds::EXCEPT_CLAUSE)
        .iter()
        .find_map(|&c| {
            let tried = syntax::try_of(c)?;
            if tried.end_byte() > ack.start_byte()
                || !syntax::is_broad_except(c, src)
                || !super::owned_by(c, func, idx)
                || gives_it_back(idx, c, src)
            {
                return None;
            }
            let (first, last) = syntax::lines(c);
            if !cx.touches_added(first, last) {
                return None;
            }
            let body = tried.field("body")?;
            let work = idx.within(body, kinds::CALL).iter().copied().find(|w| {
                syntax::positional_args(*w)
                    .into_iter()
                    .any(|a| messages.iter().any(|m| syntax::text(a, src) == m))
            })?;
            Some((c, work))
        })
    else {
        return;
    };
    let name = syntax::function_name(func, src);
    let Some(old) = cx.other.get() else {
        return;
    };
    let (old_idx, old_src) = (old.index(), old.text());
    let gave_back = old_idx.all(kinds::EXCEPT_CLAUSE).iter().any(|c| {
        syntax::is_broad_except(*c, old_src)
            && old_idx
                .enclosing(*c, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| syntax::function_name(f, old_src) == name)
            && gives_it_back(old_idx, *c, old_src)
    });
    if !gave_back {
        return;
    }
    let function = facts::qualname(func, idx, src);
    let finding = cx
        .report(&RULE, clause)
        .arg("ack", crate::rules::pay::first_line(ack, src))
        .arg("ack_line", syntax::lines(ack).0.to_string())
        .arg("work", syntax::callee(work, src).to_string())
        .arg("work_line", syntax::lines(work).0.to_string())
        .arg("caught", super::caught_types(clause, src))
        .arg("function", function.clone())
        .note("failed");
    finding.function = function;
}

/// Whether an `except` hands a failed message back to the broker: raises, returns or stops the
/// loop before the acknowledgement, or rewinds or refuses it (`seek`, `nack`, `reject`,
/// `requeue`).
fn gives_it_back(idx: &NodeIndex<'_>, clause: Node<'_>, src: &str) -> bool {
    !idx.within(clause, kinds::RAISE_STATEMENT).is_empty()
        || !idx.within(clause, kinds::RETURN_STATEMENT).is_empty()
        || !idx.within(clause, kinds::BREAK_STATEMENT).is_empty()
        || !syntax::descendants(clause, &[kinds::CONTINUE_STATEMENT]).is_empty()
        || idx.within(clause, kinds::CALL).iter().any(|c| {
            let name = syntax::callee_name(*c, src);
            matches!(
                name,
                "seek" | "nack" | "basic_nack" | "reject" | "basic_reject" | "requeue" | "retry"
            ) || name.contains("dead_letter")
        })
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
