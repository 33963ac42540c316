//! PAY005 webhook-signature-checked-if-present: a payment webhook view checks the signature
//! only when the request carries one (`if signature: verify(...)`) and goes on to apply the
//! event when it does not. Anyone who knows the URL can then post an unsigned "payment
//! succeeded" or "payout reversed" and the view acts on it.
//!
//! Left alone: a view that also rejects a request without the header (`if not signature:
//! return 400`, an `else` that answers with an error or raises).
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::err::failure_swallowed::{Inbound, inbound};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "PAY005",
    doc: include_str!("../../../rules/pay/PAY005.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is an `if` in code that names a signature.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(&[
            "signature",
            "Signature",
            "hmac",
            "construct_event",
            "construct_from",
        ])
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    for (stmt, condition, body) in super::branches(idx) {
        // With the test as the message shows it: the whole condition, or its presence part.
        let found = match presence_test(condition, src) {
            Some(carried) => verifies(idx, body, src).map(|check| (carried, check, condition)),
            None => present_and_wrong(idx, condition, body, src),
        };
        let Some((carried, check, shown)) = found else {
            continue;
        };
        // An `else` or `elif` decides what an unsigned request gets: unless it is an `else`
        // that reads the payload as it came (`event = json.loads(payload)`).
        let trusted_else = match stmt.field("alternative") {
            None => false,
            Some(alt) if parses_unchecked(idx, alt, src) => true,
            Some(_) => continue,
        };
        let Some(func) = idx.enclosing(stmt, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        if rejects_missing(idx, func, stmt, carried, src) {
            continue;
        }
        // A helper of a webhook module that rejects a wrong signature only when one is sent
        // (`process_batch(session, payload, hmac_key=...)` with `if signed and not
        // verify_hmac(...)`) checks for the view that calls it; so does one that verifies a
        // signed payload and parses an unsigned one.
        let rejects_when_sent = presence_test(condition, src).is_none() || trusted_else;
        if inbound(cx, idx, func) != Some(Inbound::Provider)
            && !(rejects_when_sent && (names_a_webhook(idx, func, src) || webhook_module(cx.path)))
        {
            continue;
        }
        let view = crate::rules::facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, stmt)
            .arg("view", view)
            .arg("condition", syntax::text(shown, src).to_string())
            .arg("check", check);
        if matches!(shown.kind(), kinds::IDENTIFIER | kinds::ATTRIBUTE) && names_a_secret(carried) {
            finding
                .arg("secret", carried.to_string())
                .note("secret_gated");
        }
    }
    unverified_views(cx, idx, src);
    bypassed_checks(cx, idx, src);
    bypassed_when_unsigned(cx, idx, src);
    applied_before_the_check(cx, idx, src);
    passes_without_a_secret(cx, idx, src);
}

/// A check of a signature that passes every delivery when the secret is not set: `if not
/// settings.SQUARE_WEBHOOK_SIGNATURE_KEY: logger.warning(...); return True` in
/// `_is_valid_signature`, or a bare `return` in a check that raises on a wrong signature. A
/// deploy that misses the setting (a new environment, a renamed variable) accepts forged events
/// with a log line for all trace.
fn passes_without_a_secret(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    for (stmt, condition, body) in super::branches(idx) {
        if stmt.field("alternative").is_some() {
            continue;
        }
        let Some(func) = idx.enclosing(stmt, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        // Or a local it was read into first: `key = settings.square_webhook_signature_key`,
        // then `if not key:`.
        let Some(secret) = secret_unset(condition, src).or_else(|| {
            let tested = unset_test(condition, src)?;
            let value = idx.assigned_before(Some(func), tested, stmt.start_byte(), src)?;
            names_a_secret(syntax::text(value, src)).then_some(tested)
        }) else {
            continue;
        };
        let name = func.field("name").map_or("", |n| syntax::text(n, src));
        let compares = idx.within(func, kinds::CALL).iter().any(|c| {
            matches!(
                idx.callee_name(*c, src),
                "compare_digest" | "constant_time_compare" | "verify" | "construct_event"
            )
        });
        if !(compares && (checks_signature(name) || webhook_module(cx.path))) {
            continue;
        }
        let Some(last) = crate::python::named_children(body).last().copied() else {
            continue;
        };
        if last.kind() != kinds::RETURN_STATEMENT {
            continue;
        }
        let returned = last.named_child(0).map(|v| syntax::text(v, src));
        // A bare `return` passes in a check that answers a wrong signature by raising.
        let raises_otherwise = || {
            idx.within(func, kinds::RAISE_STATEMENT)
                .iter()
                .any(|r| !syntax::contains(stmt, *r))
        };
        let passes = match returned {
            Some("True") => true,
            None | Some("None") => raises_otherwise(),
            _ => false,
        };
        if !passes {
            continue;
        }
        let function = crate::rules::facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, stmt)
            .arg("view", function.clone())
            .arg("secret", secret)
            .arg("passed", syntax::text(last, src).to_string())
            .note("unset");
        finding.function = function;
    }
}

/// The secret a condition finds unset: `not settings.SQUARE_WEBHOOK_SIGNATURE_KEY`, `secret
/// is None`, `not self.signing_key`. As written.
fn secret_unset<'s>(condition: Node<'_>, src: &'s str) -> Option<&'s str> {
    unset_test(condition, src).filter(|tested| names_a_secret(tested))
}

/// What a condition finds unset (`not X`, `X is None`, `X == ""`), when it is one name.
fn unset_test<'s>(condition: Node<'_>, src: &'s str) -> Option<&'s str> {
    let text = syntax::text(condition, src);
    let tested = text
        .strip_prefix("not ")
        .or_else(|| text.strip_suffix(" is None"))
        .or_else(|| text.strip_suffix(" == \"\""))?
        .trim();
    (!tested.contains(' ')).then_some(tested)
}

/// `settings.SQUARE_WEBHOOK_SIGNATURE_KEY`, `self.signing_key`, `webhook_secret`.
fn names_a_secret(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    // The key in other languages: `adyen_klucz_hmac`, `webhook_schluessel`, `clave_firma`.
    let key = [
        "key",
        "klucz",
        "schluessel",
        "sleutel",
        "clave",
        "chiave",
        "chave",
        "nyckel",
    ]
    .iter()
    .any(|w| lower.contains(w));
    lower.contains("secret")
        || lower.contains("signing")
        || key
            && ["signature", "webhook", "hmac", "notification"]
                .iter()
                .any(|w| lower.contains(w))
}

/// A view that rejects a wrong signature (`if not verify_notification(...): return 401`) but
/// applies some deliveries on a path that answers before it gets there (`if "refund" in
/// payload: await apply_refund_notification(...); return Response(200)`): those are applied
/// unverified.
fn applied_before_the_check(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    let module = webhook_module(cx.path);
    // Branches that leave (return, raise), each with its condition: the guard and the early
    // answers are both among them.
    let mut leaving: Option<Vec<(Node<'_>, Node<'_>)>> = None;
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        // A view of deliveries, by its module or its name, before its branches are read.
        if !(module || names_a_webhook(idx, func, src)) {
            continue;
        }
        let leaving = leaving.get_or_insert_with(|| super::leaving_ifs(idx, src).collect());
        let own = leaving
            .iter()
            .filter(|(stmt, _)| crate::rules::idem::owned_by(idx, *stmt, Some(func)));
        let Some(guard) = own.clone().find_map(|&(stmt, condition)| {
            let c = syntax::text(condition, src);
            (c.starts_with("not ") && checks_signature(c)).then_some(stmt)
        }) else {
            continue;
        };
        // A branch before the guard that applies what was delivered and then answers.
        let early = own
            .take_while(|(stmt, _)| stmt.end_byte() <= guard.start_byte())
            .find_map(|(stmt, _)| {
                let body = stmt.field("consequence")?;
                idx.within(body, kinds::CALL)
                    .iter()
                    .copied()
                    .find(|c| applies(idx.callee_name(*c, src)))
            });
        let Some(applied) = early else {
            continue;
        };
        let view = crate::rules::facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, applied)
            .arg("view", view.clone())
            .arg("applied", crate::rules::pay::first_line(applied, src))
            .arg("check_line", syntax::lines(guard).0.to_string())
            .note("before");
        finding.function = view;
    }
}

/// `apply_refund_notification`, `handle_event`, `process_payment`, `mark_paid`: a call that
/// acts on a delivery.
fn applies(name: &str) -> bool {
    syntax::name_words(name).iter().any(|w| {
        matches!(
            w.as_str(),
            "apply"
                | "handle"
                | "process"
                | "record"
                | "mark"
                | "settle"
                | "dispatch"
                | "fulfil"
                | "fulfill"
                | "credit"
                | "confirm"
                | "capture"
                | "refund"
                | "update"
        )
    })
}

/// A signature check joined by `or` to a test of what the sender sends
/// (`item.get("merchantAccountCode") == settings.merchant_account or is_valid_signature(item,
/// key)`): a forged delivery that names the merchant account passes without a signature. Left
/// alone: alternatives that are checks themselves (a rotated secret), and switches of the
/// service's own settings (`settings.DEBUG or verify(...)`).
fn bypassed_checks(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    for &either in idx.all(kinds::BOOLEAN_OPERATOR) {
        if either.field("operator").map(|o| o.kind()) != Some("or") {
            continue;
        }
        let (Some(left), Some(right)) = (either.field("left"), either.field("right")) else {
            continue;
        };
        let is_check = |n: Node<'_>| {
            let n = if n.kind() == kinds::NOT_OPERATOR {
                n.field("argument").unwrap_or(n)
            } else {
                n
            };
            n.kind() == kinds::CALL && checks_signature(syntax::callee(n, src))
        };
        let (check, other) = match (is_check(left), is_check(right)) {
            (true, false) => (left, right),
            (false, true) => (right, left),
            _ => continue,
        };
        let Some(func) = idx.enclosing(either, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        if checks_signature(syntax::text(other, src)) || !reads_what_was_sent(other, func, src) {
            continue;
        }
        report_bypass(cx, idx, func, either, check, other);
    }
}

/// A `bypass` finding at `at`, for a webhook's code: `check` passed by `other`.
fn report_bypass(
    cx: &mut Ctx<'_>,
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    at: Node<'_>,
    check: Node<'_>,
    other: Node<'_>,
) {
    let src = cx.src();
    if !(webhook_module(cx.path)
        || names_a_webhook(idx, func, src)
        || inbound(cx, idx, func) == Some(Inbound::Provider))
    {
        return;
    }
    let view = crate::rules::facts::qualname(func, idx, src);
    let finding = cx
        .report(&RULE, at)
        .arg("view", view.clone())
        .arg("check", crate::rules::pay::first_line(check, src))
        .arg("other", syntax::normalized(other, src))
        .note("bypass");
    finding.function = view;
}

/// A check that, for a delivery without a signature, answers with a test of what the sender
/// sends (`if signature is None: return request.headers.get("X-Test-Notification") == "true"`)
/// and verifies the rest: a forged event with that header and no signature passes.
fn bypassed_when_unsigned(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    for (stmt, condition, body) in super::branches(idx) {
        let Some(absent) = unset_test(condition, src) else {
            continue;
        };
        if !["sig", "hmac", "digest"]
            .iter()
            .any(|w| absent.to_ascii_lowercase().contains(w))
        {
            continue;
        }
        let Some(last) = crate::python::named_children(body).last().copied() else {
            continue;
        };
        let Some(other) = last
            .named_child(0)
            .filter(|_| last.kind() == kinds::RETURN_STATEMENT)
        else {
            continue;
        };
        let Some(func) = idx.enclosing(stmt, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        if checks_signature(syntax::text(other, src)) || !reads_what_was_sent(other, func, src) {
            continue;
        }
        // The other path returns the check's answer.
        let check = idx
            .within(func, kinds::RETURN_STATEMENT)
            .iter()
            .filter(|r| !syntax::contains(stmt, **r))
            .filter_map(|r| r.named_child(0))
            .find(|v| {
                v.kind() == kinds::CALL
                    && (verifies(idx, *v, src).is_some()
                        || checks_signature(syntax::callee(*v, src)))
            });
        if let Some(check) = check {
            report_bypass(cx, idx, func, stmt, check, other);
        }
    }
}

/// `item.get("merchantAccountCode") == settings.merchant_account`, `payload["account"] ==
/// ACCOUNT`: a comparison one side of which reads a parameter of the function or the request.
fn reads_what_was_sent(test: Node<'_>, func: Node<'_>, src: &str) -> bool {
    if test.kind() != kinds::COMPARISON_OPERATOR {
        return false;
    }
    let params = crate::rules::pay::parameters(func, src);
    crate::python::named_children(test).iter().any(|side| {
        let text = syntax::text(*side, src);
        let root = text.split(['.', '[', '(']).next().unwrap_or(text);
        let read = text.len() > root.len();
        read && (root == "request" || params.iter().any(|p| p == root && p != "settings"))
    })
}

/// Webhook views that apply what the request carries with no signature checked at all, where
/// a sibling view of the file checks its own (`stripe_connect_webhook` building the event with
/// `stripe.Event.construct_from(request.json, ...)` beside `stripe_webhook`, which verifies);
/// and any that builds a Stripe event from the request with `construct_from`, which verifies
/// nothing.
fn unverified_views(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    let views: Vec<Node<'_>> = idx
        .all(kinds::FUNCTION_DEFINITION)
        .iter()
        .copied()
        .filter(|f| names_a_webhook(idx, *f, src))
        .collect();
    let verified = |f: Node<'_>| {
        checks_signature(syntax::text(f, src))
            || super::calls_a_helper_that(idx, f, src, |h| checks_signature(syntax::text(h, src)))
    };
    let sibling = views.iter().copied().find(|v| verified(*v));
    for &view in &views {
        if sibling.is_some_and(|s| s.id() == view.id()) || verified(view) {
            continue;
        }
        let Some(read) = payload_read(idx, view, src) else {
            continue;
        };
        let forged = syntax::text(read, src).contains("construct_from");
        if sibling.is_none() && !forged {
            continue;
        }
        if inbound(cx, idx, view) != Some(Inbound::Provider) {
            continue;
        }
        let name = crate::rules::facts::qualname(view, idx, src);
        let finding = cx
            .report(&RULE, read)
            .arg("view", name.clone())
            .arg("read", crate::rules::pay::first_line(read, src))
            .note("unverified");
        if let Some(sibling) = sibling {
            finding.arg("sibling", syntax::function_name(sibling, src).to_string());
        }
        finding.function = name;
    }
}

/// A view named for deliveries (`stripe_webhook`, `ipn_view`, `payment_notification`), or
/// routed to a path that says so (`@bp.post("/webhooks/stripe")`).
fn names_a_webhook(idx: &NodeIndex<'_>, func: Node<'_>, src: &str) -> bool {
    let name = syntax::function_name(func, src);
    let named = ["webhook", "ipn", "notif"]
        .iter()
        .any(|w| syntax::contains_lowercase(name, w))
        && syntax::name_words(name).iter().any(|w| {
            matches!(
                w.as_str(),
                "webhook" | "webhooks" | "ipn" | "notification" | "notify"
            )
        });
    named
        || idx
            .decorated(func)
            .is_some_and(|d| syntax::contains_lowercase(syntax::text(d, src), "webhook"))
}

/// A module named for deliveries: `webhooks.py`, `payments/notifications.py`, `ipn.py`.
pub(crate) fn webhook_module(path: &str) -> bool {
    path.rsplit('/')
        .take(2)
        .flat_map(syntax::name_words)
        .any(|w| {
            matches!(
                w.as_str(),
                "webhook" | "webhooks" | "ipn" | "notifications" | "notify" | "hooks"
            ) || w.starts_with("webhook")
        })
}

/// Code that checks a signature: by name (`verify`, `construct_event`, `compare_digest`), or a
/// helper named for a verified event (`_queue_verified_event`).
fn checks_signature(code: &str) -> bool {
    [
        "signature",
        "verify",
        "verified",
        "hmac",
        "construct_event",
        "compare_digest",
    ]
    .iter()
    .any(|w| syntax::code_contains_lowercase(code, w))
}

/// Where a view reads what the request carries: `request.json`, `await request.body()`,
/// `request.get_json()`, `stripe.Event.construct_from(...)`.
fn payload_read<'t>(idx: &NodeIndex<'t>, func: Node<'t>, src: &str) -> Option<Node<'t>> {
    let calls = idx.within(func, kinds::CALL).iter().copied();
    let attributes = idx.within(func, kinds::ATTRIBUTE).iter().copied();
    let mut reads: Vec<Node<'t>> = calls
        .filter(|c| syntax::callee(*c, src).ends_with("construct_from"))
        .chain(attributes.filter(|a| {
            a.field("object")
                .is_some_and(|o| syntax::text(o, src) == "request")
                && a.field("attribute").is_some_and(|f| {
                    matches!(
                        syntax::text(f, src),
                        "json" | "body" | "data" | "POST" | "form" | "get_json" | "get_data"
                    )
                })
        }))
        .collect();
    reads.sort_by_key(|n| n.start_byte());
    // The event built from the request, where there is one: what the view then trusts.
    reads
        .iter()
        .copied()
        .find(|n| syntax::text(*n, src).contains("construct_from"))
        .or_else(|| reads.first().copied())
}

/// What an `if` tests for presence: `signature`, `request.headers.get("Stripe-Signature")`,
/// `"X-Signature" in request.headers`, `sig is not None`; the name or text that carries the
/// signature.
fn presence_test<'s>(condition: Node<'_>, src: &'s str) -> Option<&'s str> {
    let text = syntax::text(condition, src);
    let subject = text.strip_suffix(" is not None").unwrap_or(text).trim();
    let names_signature = {
        let lower = subject.to_ascii_lowercase();
        ["signature", "sig", "hmac", "digest"]
            .iter()
            .any(|w| lower.contains(w))
    };
    let plain = condition.kind() == kinds::IDENTIFIER
        || condition.kind() == kinds::CALL
        || condition.kind() == kinds::COMPARISON_OPERATOR
            && (text.ends_with(" is not None") || text.contains(" in "));
    (plain && names_signature && !subject.contains(" and ") && !subject.contains(" or "))
        .then_some(subject)
}

/// `if signature and not signature_matches(raw, signature, secret): raise Unauthorized`: the
/// rejection runs only for a request that carries a signature, and a request without one goes
/// on. The name that carries it and the check, when the branch rejects.
fn present_and_wrong<'t, 's>(
    idx: &NodeIndex<'_>,
    condition: Node<'t>,
    body: Node<'_>,
    src: &'s str,
) -> Option<(&'s str, String, Node<'t>)> {
    if condition.kind() != kinds::BOOLEAN_OPERATOR
        || condition.child(1).map(|o| o.kind()) != Some("and")
    {
        return None;
    }
    let (left, right) = (condition.field("left")?, condition.field("right")?);
    // `supplied and not compare_digest(supplied, expected)`: a name the check is handed is the
    // signature, whatever it is called.
    let handed = |check: Node<'_>| {
        left.kind() == kinds::IDENTIFIER
            && idx.within(check, kinds::CALL).iter().any(|c| {
                syntax::positional_args(*c)
                    .iter()
                    .any(|a| syntax::text(*a, src) == syntax::text(left, src))
            })
    };
    // `ust.adyen_klucz_hmac and not podpis_poprawny(...)`: the secret's presence, not the
    // signature's, gates the check.
    let secret = || {
        matches!(left.kind(), kinds::IDENTIFIER | kinds::ATTRIBUTE)
            && names_a_secret(syntax::text(left, src))
    };
    let carried = presence_test(left, src)
        .filter(|_| !secret())
        .or_else(|| (handed(right) || secret()).then(|| syntax::text(left, src)))?;
    let check = match right.kind() {
        kinds::NOT_OPERATOR => verifies(idx, right, src)?,
        // `sig != expected`: a digest compared by hand.
        kinds::COMPARISON_OPERATOR
            if right.child(1).map(|o| o.kind()) == Some("!=")
                && syntax::text(right, src).contains(carried) =>
        {
            syntax::text(right, src).to_string()
        }
        _ => return None,
    };
    let rejects = !idx.within(body, kinds::RAISE_STATEMENT).is_empty()
        || !idx.within(body, kinds::RETURN_STATEMENT).is_empty()
        || idx
            .within(body, kinds::CALL)
            .iter()
            .any(|c| syntax::callee_name(*c, src) == "abort");
    rejects.then_some((carried, check, left))
}

/// An `else` that builds the event from the payload without a check (`json.loads(payload)`,
/// `stripe.Event.construct_from(...)`) and neither raises nor returns.
fn parses_unchecked(idx: &NodeIndex<'_>, alt: Node<'_>, src: &str) -> bool {
    alt.kind() == kinds::ELSE_CLAUSE
        && idx.within(alt, kinds::RAISE_STATEMENT).is_empty()
        && idx.within(alt, kinds::RETURN_STATEMENT).is_empty()
        && verifies(idx, alt, src).is_none()
        && idx.within(alt, kinds::CALL).iter().any(|c| {
            matches!(
                syntax::callee_name(*c, src),
                "loads" | "construct_from" | "parse_raw" | "model_validate_json" | "parse_obj"
            )
        })
}

/// The call in the `if` body that checks the signature, as written.
fn verifies(idx: &NodeIndex<'_>, body: Node<'_>, src: &str) -> Option<String> {
    idx.within(body, kinds::CALL).iter().find_map(|&c| {
        let callee = syntax::callee(c, src);
        let name = callee
            .rsplit('.')
            .next()
            .unwrap_or(callee)
            .to_ascii_lowercase();
        // And in the languages webhook code is written in: `podpis_poprawny`,
        // `verificar_firma`, `signatur_pruefen`, `verifica_firma`, `verifier_signature`.
        let checks = name.contains("verify")
            || name.contains("signature")
            || [
                "podpis",
                "signatur",
                "firma",
                "assinatura",
                "handtekening",
                "verific",
                "weryfik",
            ]
            .iter()
            .any(|w| name.contains(w))
            || name.trim_start_matches('_') == "construct_event"
            || name == "compare_digest"
            || name.contains("validate") && callee.to_ascii_lowercase().contains("sign");
        checks.then(|| callee.to_string())
    })
}

/// Whether the view answers a request without the signature with an error before or after
/// the check: `if not signature: abort(400)`, `if signature is None: raise ...`.
fn rejects_missing(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    checked: Node<'_>,
    carried: &str,
    src: &str,
) -> bool {
    idx.within(func, kinds::IF_STATEMENT).iter().any(|&other| {
        if other.id() == checked.id() {
            return false;
        }
        let Some(condition) = other.field("condition") else {
            return false;
        };
        let text = syntax::text(condition, src);
        let absent = text == format!("not {carried}") || text == format!("{carried} is None");
        absent
            && other.field("consequence").is_some_and(|b| {
                !idx.within(b, kinds::RETURN_STATEMENT).is_empty()
                    || !idx.within(b, kinds::RAISE_STATEMENT).is_empty()
                    || idx
                        .within(b, kinds::CALL)
                        .iter()
                        .any(|c| syntax::callee_name(*c, src) == "abort")
            })
    })
}
