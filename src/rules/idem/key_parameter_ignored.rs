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
    let Some((idx, src)) = cx.code() else {
        return;
    };
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
        // The key parameter unread, or read (into a description, a log) but left out of the
        // call of the sender that would send it.
        let Some((param, unsent)) =
            crate::python::named_children(params)
                .into_iter()
                .find_map(|p| {
                    let name = syntax::parameter_name(p, src);
                    if !(names_a_key(name)
                        || (name == "request_id" || name.ends_with("_request_id"))
                            && sent_as_key_header(src, name))
                    {
                        return None;
                    }
                    if !reads(body, name, src) {
                        return Some((p, None));
                    }
                    left_out(cx, idx, func, name, src)
                        .map(|call| (p, Some(Unsent::Left(call))))
                        .or_else(|| {
                            only_checked(idx, func, name, src)
                                .map(|call| (p, Some(Unsent::Checked(call))))
                        })
                })
        else {
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
        let finding = match unsent {
            None => cx.report(&RULE, param),
            Some(Unsent::Left(call)) => cx
                .report(&RULE, call)
                .arg("call", crate::rules::pay::first_line(call, src))
                .note("unsent"),
            Some(Unsent::Checked(call)) => cx
                .report(&RULE, param)
                .arg("call", crate::rules::pay::first_line(call, src))
                .note("checked"),
        };
        let finding = finding
            .arg("function", function.clone())
            .arg("key", name.to_string());
        finding.function = function;
    }
}

/// How a key that is read still stays out of the request.
enum Unsent<'t> {
    /// Left out of the call of a sender that would send it.
    Left(Node<'t>),
    /// Read only by a check of it (`_check_idempotency_key(idempotency_key)`) or a log line.
    Checked(Node<'t>),
}

/// The first call that reads `name` when every read of it in `func` is an argument of a check
/// (`_check_idempotency_key(key)`, `validate_key(key)`, `assert ...`) or of a log line: the key
/// is looked at and never sent.
fn only_checked<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    name: &str,
    src: &str,
) -> Option<Node<'t>> {
    let body = func.field("body")?;
    let uses: Vec<Node<'t>> = syntax::descendants(body, &[kinds::IDENTIFIER])
        .into_iter()
        .filter(|i| syntax::text(*i, src) == name)
        .collect();
    let mut first = None;
    for read in &uses {
        let call = read
            .parent()
            .filter(|p| p.kind() == kinds::ARGUMENT_LIST)
            .and_then(|p| p.parent())
            .filter(|c| {
                c.kind() == kinds::CALL && crate::rules::idem::owned_by(idx, *c, Some(func))
            })?;
        let callee = syntax::callee(call, src);
        let checks = syntax::name_words(syntax::callee_name(call, src))
            .first()
            .is_some_and(|w| {
                matches!(
                    w.as_str(),
                    "check" | "validate" | "assert" | "ensure" | "require" | "verify"
                )
            });
        let logs = ["log.", "logger.", "logging.", "_log."]
            .iter()
            .any(|l| callee.starts_with(l) || callee.contains(&format!(".{l}")));
        if !checks && !logs {
            return None;
        }
        first.get_or_insert(call);
    }
    first
}

/// `idempotency_key`, `idempotencyKey`, `idem_key`.
fn names_a_key(name: &str) -> bool {
    let words = syntax::name_words(name);
    words
        .iter()
        .any(|w| w.starts_with("idempot") || w == "idem")
        && (words.iter().any(|w| w == "key") || words.len() == 1)
        // A provider's key by its own name: `paypal_request_id`, `customer_transaction_id`.
        || syntax::IDEMPOTENCY_WORDS
            .iter()
            .filter(|w| !w.starts_with("idempot"))
            .any(|w| syntax::contains_lowercase(name, w))
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
    syntax::has_word(syntax::text(body, src), name)
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
                && (crate::rules::pay::pays(cx, c, src)
                    || crate::rules::pay::http_payment(cx, c)
                    // A dispatcher of the client told to POST to a payment resource
                    // (`self._request("POST", "/api/payment_orders", json=payload)`).
                    || syntax::positional_args(c)
                        .first()
                        .and_then(|m| crate::rules::http::method_of(*m, src))
                        == Some("post")
                        && crate::rules::http::url_names_payment(cx, c))
        })
}

/// A call of a sender of the change that sends the slot `name` as the idempotency key
/// (`self._call("POST", ..., request_id=request_id)`: `_call` sets `PayPal-Request-Id` from it)
/// made without it, while nothing else of the function sends `name` as a key: the sender makes
/// a key of its own, or sends none.
fn left_out<'t>(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    name: &str,
    src: &str,
) -> Option<Node<'t>> {
    let slot = facts::Slot::Keyword(name.into());
    let own = facts::qualname(func, idx, src);
    // The function sends the key some way of its own, or hands it to a call that does.
    if cx.facts.and_then(|f| f.function(&own)).is_some_and(|f| {
        f.forwards.iter().any(|fw| {
            &*fw.param == name
                && fw.to.as_ref().is_none_or(|(next, next_slot)| {
                    cx.change.sends_as_key(cx.side, next, next_slot)
                })
        })
    }) {
        return None;
    }
    idx.within(func, kinds::CALL).iter().copied().find(|&c| {
        crate::rules::idem::owned_by(idx, c, Some(func))
            && !syntax::has_dict_splat(c)
            // A key handed in any slot (`build_headers(request_id, idempotency_key)`, swapped)
            // is another rule's.
            && !c
                .field("arguments")
                .is_some_and(|args| reads(args, name, src))
            && !reads_only(c, src)
            && cx
                .change
                .sends_as_key(cx.side, idx.callee_name(c, src), &slot)
    })
}

/// A request that only reads: `self._call("GET", ...)`, `client.get(...)`.
fn reads_only(call: Node<'_>, src: &str) -> bool {
    let method = syntax::positional_args(call)
        .first()
        .and_then(|a| syntax::string_value(*a, src))
        .or_else(|| {
            syntax::keyword_arg(call, "method", src).and_then(|m| syntax::string_value(m, src))
        });
    method.is_some_and(|m| m.eq_ignore_ascii_case("get") || m.eq_ignore_ascii_case("head"))
        || matches!(
            syntax::callee_name(call, src),
            "get" | "head" | "_get" | "fetch"
        )
}
