//! PAY038 requeued-from-any-state: rows are moved back into a state a worker pays from
//! (`status=CollectionStatus.RETRY_SCHEDULED`, `PENDING`, `QUEUED`) by an update guarded only by
//! what they are not (`Collection.status != CollectionStatus.CONFIRMED`, `.exclude(status=PAID)`).
//! Every other state passes: a row in flight (submitted, being sent) or already paid out is
//! queued again, and the worker that takes it sends the money a second time, under a new attempt
//! and a new key. A double click on a stale screen is enough.
//!
//! Read where the record's class of states, in the file or the repository, has a state in flight
//! or settled besides the one excluded. Left alone: an update that names the states it moves from
//! (`status == RETRY_SCHEDULED`, `.in_(...)`, `status__in=`).
use tree_sitter::Node;

use crate::python::{kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY038",
    doc: include_str!("../../../rules/pay/PAY038.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// States a worker takes rows from to pay them.
const QUEUED: &[&str] = &[
    "scheduled",
    "pending",
    "queued",
    "due",
    "retry",
    "ready",
    "requeued",
];

/// States of a row whose money is on its way or arrived.
const MOVING_OR_MOVED: &[&str] = &[
    "submitted",
    "submitting",
    "sent",
    "sending",
    "processing",
    "transit",
    "flight",
    "inflight",
    "claimed",
    "charging",
    "paid",
    "succeeded",
    "settled",
    "collected",
    "captured",
    "confirmed",
    "completed",
    "unknown",
];

/// Every finding is an update of a status guarded by a negated test of one.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(&[".values(", ".update("])
        && s.mentions(&["status=", "state="])
        && s.mentions(&["!=", "exclude(", "~Q("])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    for &call in idx.all(kinds::CALL) {
        if !matches!(idx.callee_name(call, src), "values" | "update") {
            continue;
        }
        let Some((target, field)) = queued_state(call, src) else {
            continue;
        };
        // The whole query the update is part of: `update(X).where(...).values(...)`,
        // `X.objects.exclude(...).update(...)`.
        let query = outermost_chain(call);
        let text = syntax::text(query, src);
        let Some((guard, excluded)) = negated_guard(text, field) else {
            continue;
        };
        let Some(class) = excluded
            .rsplit_once('.')
            .map(|(c, _)| c.rsplit('.').next().unwrap_or(c))
        else {
            continue;
        };
        let excluded_member = excluded.rsplit('.').next().unwrap_or(&excluded).to_string();
        let target_member = target.rsplit('.').next().unwrap_or(&target).to_string();
        let others: Vec<String> = super::members_of(cx, idx, class, &[], None, src)
            .into_iter()
            .filter(|m| *m != excluded_member && *m != target_member)
            .filter(|m| {
                syntax::name_words(m)
                    .iter()
                    .any(|w| MOVING_OR_MOVED.contains(&w.as_str()))
            })
            .collect();
        if others.is_empty() {
            continue;
        }
        let func = idx.enclosing(call, kinds::FUNCTION_DEFINITION);
        let function = func
            .map(|f| facts::qualname(f, idx, src))
            .unwrap_or_default();
        let others = others
            .iter()
            .map(|m| format!("`{class}.{m}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let finding = cx
            .report(&RULE, call)
            .arg("function", function.clone())
            .arg("target", target)
            .arg("guard", guard)
            .arg("others", others);
        finding.function = function;
    }
}

/// The state an update moves rows to when a worker pays from it, and the field:
/// `.values(status=CollectionStatus.RETRY_SCHEDULED, ...)`.
fn queued_state<'s>(call: Node<'_>, src: &'s str) -> Option<(String, &'s str)> {
    syntax::keyword_args(call, src)
        .into_iter()
        .find_map(|(name, value)| {
            if !matches!(name, "status" | "state") {
                return None;
            }
            let written = syntax::text(value, src);
            let last = written
                .rsplit('.')
                .next()
                .unwrap_or(written)
                .trim_matches(|c| c == '"' || c == '\'');
            let words = syntax::name_words(last);
            words
                .iter()
                .any(|w| QUEUED.contains(&w.as_str()))
                .then(|| (written.to_string(), name))
        })
}

/// The outermost call of a chain a call is part of.
fn outermost_chain(call: Node<'_>) -> Node<'_> {
    let mut node = call;
    while let Some(parent) = node.parent() {
        match parent.kind() {
            kinds::ATTRIBUTE | kinds::CALL | kinds::ARGUMENT_LIST | kinds::AWAIT => node = parent,
            _ => break,
        }
    }
    node
}

/// A guard on what the rows are not, with the state it excludes, when the query names no state
/// they must be in: `Collection.status != CollectionStatus.CONFIRMED`, `.exclude(status=PAID)`,
/// `~Q(status=PAID)`.
fn negated_guard(text: &str, field: &str) -> Option<(String, String)> {
    let positive = [
        format!(".{field} =="),
        format!(".{field}.in_("),
        format!("{field}__in="),
        format!("filter({field}="),
        format!(", {field}="),
        format!("filter_by({field}="),
    ];
    if positive.iter().any(|p| text.contains(p.as_str())) {
        return None;
    }
    let state_after = |rest: &str| {
        let rest = rest.trim_start();
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(rest.len());
        let state = &rest[..end];
        state.contains('.').then(|| state.to_string())
    };
    let negated = format!(".{field} !=");
    if let Some(at) = text.find(&negated) {
        let start = text[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .map_or(0, |i| i + 1);
        let state = state_after(&text[at + negated.len()..])?;
        return Some((format!("{}{negated} {state}", &text[start..at]), state));
    }
    for opener in ["exclude(", "~Q("] {
        let pattern = format!("{opener}{field}=");
        if let Some(at) = text.find(&pattern) {
            let state = state_after(&text[at + pattern.len()..])?;
            return Some((format!("{opener}{field}={state})"), state));
        }
    }
    None
}
