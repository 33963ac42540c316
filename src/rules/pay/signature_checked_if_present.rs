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
    !s.facts.is_test && s.mentions(&["signature", "hmac", "construct_event"])
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    for &stmt in idx.all(kinds::IF_STATEMENT) {
        let (Some(condition), Some(body)) = (stmt.field("condition"), stmt.field("consequence"))
        else {
            continue;
        };
        // With the test as the message shows it: the whole condition, or its presence part.
        let found = match presence_test(condition, src) {
            Some(carried) => verifies(idx, body, src).map(|check| (carried, check, condition)),
            None => present_and_wrong(idx, condition, body, src),
        };
        let Some((carried, check, shown)) = found else {
            continue;
        };
        // An `else` or `elif` decides what an unsigned request gets.
        if stmt.field("alternative").is_some() {
            continue;
        }
        let Some(func) = idx.enclosing(stmt, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        if rejects_missing(idx, func, stmt, carried, src) {
            continue;
        }
        if inbound(cx, idx, func) != Some(Inbound::Provider) {
            continue;
        }
        let view = crate::rules::facts::qualname(func, idx, src);
        cx.report(&RULE, stmt)
            .arg("view", view)
            .arg("condition", syntax::text(shown, src).to_string())
            .arg("check", check);
    }
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
    let carried =
        presence_test(left, src).or_else(|| handed(right).then(|| syntax::text(left, src)))?;
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

/// The call in the `if` body that checks the signature, as written.
fn verifies(idx: &NodeIndex<'_>, body: Node<'_>, src: &str) -> Option<String> {
    idx.within(body, kinds::CALL).iter().find_map(|&c| {
        let callee = syntax::callee(c, src);
        let name = callee
            .rsplit('.')
            .next()
            .unwrap_or(callee)
            .to_ascii_lowercase();
        let checks = name.contains("verify")
            || name.contains("signature")
            || name == "construct_event"
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
