//! IDEM013 key-parameter-ignored: a function that sends a payment takes an idempotency key as
//! a parameter (by its name, or a `request_id` the file sends as `PayPal-Request-Id`) and never
//! uses it. Its callers build a stable key and pass it in, and the
//! request goes out without one: a retry after a timeout (the queue's, the client's) is a
//! second refund or charge, while every caller looks right.
//!
//! Left alone: a stub (`...`, `pass`, `raise NotImplementedError`), a body that says why the
//! key is not sent (a comment naming idempotency), and a function that hands its locals on
//! (`locals()`).
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "IDEM013",
    doc: include_str!("../../../rules/idem/IDEM013.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a parameter whose name speaks of idempotency, or a `request_id` the file
/// sends as a key: some function of the file names one (the facts pass has read it).
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && s.facts.functions.iter().any(|f| f.mentions_idempotency)
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    if cx.facts.is_some_and(|f| f.is_test) {
        return;
    }
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        let Some(params) = func.field("parameters") else {
            continue;
        };
        let list = syntax::text(params, src);
        if !list.contains("idem") && !list.contains("request_id") {
            continue;
        }
        let Some(body) = func.field("body") else {
            continue;
        };
        let Some(param) = crate::python::named_children(params).into_iter().find(|p| {
            let name = syntax::parameter_name(*p, src);
            (names_a_key(name) || name == "request_id" && sent_as_key_header(src, name))
                && !reads(body, name, src)
        }) else {
            continue;
        };
        let name = syntax::parameter_name(param, src);
        let text = syntax::text(body, src);
        if stub(body, src)
            || text.contains("locals()")
            // A comment before the first statement lies outside the body's node.
            || said_why(syntax::text(func, src))
            || !sends_a_payment(cx, idx, func, src)
        {
            continue;
        }
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, param)
            .arg("function", function.clone())
            .arg("key", name.to_string());
        finding.function = function;
    }
}

/// `idempotency_key`, `idempotencyKey`, `idem_key`.
fn names_a_key(name: &str) -> bool {
    let words = syntax::name_words(name);
    words
        .iter()
        .any(|w| w.starts_with("idempot") || w == "idem")
        && (words.iter().any(|w| w == "key") || words.len() == 1)
}

/// Whether the file sends `name` as an idempotency header somewhere (`headers["PayPal-Request-Id"]
/// = request_id`): the parameter of that name is the key, whatever it is called.
fn sent_as_key_header(src: &str, name: &str) -> bool {
    src.lines().any(|line| {
        (line.contains("Request-Id") || syntax::contains_lowercase(line, "idempotency"))
            && line.contains(name)
            && !line.trim_start().starts_with("def ")
    })
}

/// Whether `name` occurs in the body as a word of its own.
fn reads(body: Node<'_>, name: &str, src: &str) -> bool {
    let text = syntax::text(body, src);
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !word(before) && !word(after)
    })
}

/// A body that does nothing of its own: `...`, `pass`, a docstring, `raise NotImplementedError`.
fn stub(body: Node<'_>, src: &str) -> bool {
    syntax::statements(body).iter().all(|s| {
        let text = syntax::text(*s, src).trim();
        text == "..."
            || text == "pass"
            || s.kind() == kinds::EXPRESSION_STATEMENT && text.starts_with(['"', '\''])
            || s.kind() == kinds::RAISE_STATEMENT && text.contains("NotImplemented")
    })
}

/// A comment that says why the key is not sent (`# Mollie keys by the payment id`).
fn said_why(text: &str) -> bool {
    text.lines().any(|l| {
        l.split_once('#')
            .is_some_and(|(_, comment)| syntax::contains_lowercase(comment, "idempot"))
    })
}

/// Whether the function sends money: it is named for a payment operation, or calls one, or
/// POSTs money.
fn sends_a_payment(cx: &Ctx<'_>, idx: &NodeIndex<'_>, func: Node<'_>, src: &str) -> bool {
    let name = syntax::function_name(func, src);
    (cx.vocab.is_payment_operation(name) && !crate::rules::pay::beside_the_money(name))
        || idx.within(func, kinds::CALL).iter().any(|&c| {
            crate::rules::idem::owned_by(idx, c, Some(func))
                && (crate::rules::pay::pays(cx, c, src) || crate::rules::pay::http_payment(cx, c))
        })
}
