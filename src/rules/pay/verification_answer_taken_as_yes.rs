//! PAY011 verification-answer-taken-as-yes: a check of a webhook's signature or of a payment
//! (`verify_webhook_signature`, `verify_payment`) returns the provider's answer as it came (the
//! JSON of PayPal's `verify-webhook-signature`, Paystack's `transaction/verify`), and a caller
//! tests it for truth (`if not verified:`). A non-empty dict is true whatever it says:
//! `{"verification_status": "FAILURE"}` passes, and a forged webhook marks an order paid.
//!
//! The function is one of the change (`FunctionFacts::returns_answer`, read by the facts pass
//! from its own code); the test is the call's own condition, or that of the name bound to it.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "PAY011",
    doc: include_str!("../../../rules/pay/PAY011.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding calls a function named for a verification.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && (calls_a_verification(s) || s.facts.functions.iter().any(|f| verifies(&f.name)))
}

/// Whether a function of the file calls one named for a verification, or for an HMAC check
/// (`check_hmac`): asked once for this rule and PAY012.
pub(crate) fn calls_a_verification(s: &Scan<'_>) -> bool {
    *s.verification_call.get_or_init(|| {
        s.facts.functions.iter().any(|f| {
            f.callees
                .iter()
                .any(|c| verifies(c) || syntax::contains_lowercase(c, "hmac"))
        })
    })
}

/// Whether a function's name says it tells a genuine webhook or payment from a false one:
/// `verify_webhook_signature`, `verify_payment`, `validate_ipn`, `check_signature`,
/// `is_valid_notification`.
pub(crate) fn verifies(name: &str) -> bool {
    // Asked of every function's name and every callee's: the bytes first, the words only for
    // the few names that may ask.
    if !["verif", "valid", "check", "authenticat"]
        .iter()
        .any(|w| syntax::contains_lowercase(name, w))
    {
        return false;
    }
    let words = syntax::name_words(name);
    let asks = words.iter().any(|w| {
        matches!(
            w.as_str(),
            "verify" | "validate" | "check" | "valid" | "authenticate"
        )
    });
    let of = words.iter().any(|w| {
        matches!(
            w.as_str(),
            "signature"
                | "sig"
                | "hmac"
                | "webhook"
                | "notification"
                | "ipn"
                | "callback"
                | "payment"
                | "transaction"
                | "charge"
        )
    });
    asks && of
}

/// A verification that says yes when the request succeeds (`return status == 200`), with the
/// provider's answer in hand and unread (`status, body = await self._call(...)`): PayPal's
/// `verify-webhook-signature` answers 200 with `"verification_status": "FAILURE"`, and a
/// forged delivery passes.
fn said_by_the_status(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        if !verifies(syntax::function_name(func, src)) {
            continue;
        }
        let own = |n: &Node<'_>| {
            idx.enclosing(*n, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| f.id() == func.id())
        };
        let returns: Vec<Node<'_>> = idx
            .within(func, kinds::RETURN_STATEMENT)
            .iter()
            .copied()
            .filter(|r| own(r))
            .filter_map(syntax::return_value)
            .filter(|v| v.kind() != kinds::NONE && v.kind() != kinds::FALSE)
            .collect();
        let status_only = |v: &Node<'_>| {
            let text = syntax::text(*v, src);
            v.kind() == kinds::COMPARISON_OPERATOR
                && text.contains("status")
                && (text.contains("== 200") || text.contains("200 <=") || text.contains("in (200"))
        };
        if returns.is_empty() || !returns.iter().all(status_only) {
            continue;
        }
        // The answer's body, bound beside the status and read by no `return`.
        let body = idx
            .within(func, kinds::ASSIGNMENT)
            .iter()
            .filter(|a| own(a))
            // Bound from what was called (`status, body = await self._call(...)`), not the
            // request's own payload.
            .filter(|a| {
                a.field("right")
                    .is_some_and(|r| matches!(r.kind(), kinds::CALL | kinds::AWAIT))
            })
            .filter_map(|a| a.field("left"))
            .flat_map(|left| syntax::descendants(left, &[kinds::IDENTIFIER]))
            .map(|n| syntax::text(n, src))
            .find(|name| {
                syntax::name_words(name).iter().any(|w| {
                    matches!(
                        w.as_str(),
                        "body" | "data" | "payload" | "json" | "answer" | "result"
                    )
                })
            });
        let Some(body) = body else {
            continue;
        };
        if returns
            .iter()
            .any(|v| syntax::has_word(syntax::text(*v, src), body))
        {
            continue;
        }
        let Some(&ret) = returns.first() else {
            continue;
        };
        let at = format!("{}:{}", cx.path, syntax::lines(func).0);
        cx.report(&RULE, ret)
            .arg("test", syntax::normalized(ret, src))
            .arg("callee", syntax::function_name(func, src).to_string())
            .arg("at", at)
            .arg("body", body.to_string())
            .note("status");
    }
}

/// Calls whose result is a provider's answer as it came: the decoded body (`resp.json()`,
/// `json.loads(...)`), or what a request helper returns (`self._request("POST", ...)`,
/// `session.post(...)`: a dict, or a response object).
fn answers(name: &str) -> bool {
    matches!(
        name,
        "json" | "loads" | "post" | "_post" | "send" | "_send" | "fetch" | "urlopen" | "call_api"
    ) || syntax::name_words(name).iter().any(|w| w == "request")
}

/// The line of the first `return` of `func` that hands back the provider's answer, when every
/// `return` of a value does (`return self._request("POST", ...)`, or `data = resp.json()` then
/// `return data`). A comparison, a boolean or anything else among them: `None`.
pub(crate) fn returns_answer(
    func: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &str,
    own: impl Fn(&Node<'_>) -> bool,
) -> Option<u32> {
    let mut first = None;
    for &ret in idx
        .within(func, kinds::RETURN_STATEMENT)
        .iter()
        .filter(|n| own(n))
    {
        let Some(value) = syntax::return_value(ret) else {
            continue;
        };
        let value = unparenthesized(value);
        let value = if value.kind() == kinds::AWAIT {
            value.named_child(0)?
        } else {
            value
        };
        let call = match value.kind() {
            kinds::CALL => value,
            kinds::IDENTIFIER => {
                let name = syntax::text(value, src);
                let right = unparenthesized(idx.assigned_before(
                    Some(func),
                    name,
                    ret.start_byte(),
                    src,
                )?);
                let right = if right.kind() == kinds::AWAIT {
                    right.named_child(0)?
                } else {
                    right
                };
                (right.kind() == kinds::CALL).then_some(right)?
            }
            kinds::NONE => continue,
            _ => return None,
        };
        if !answers(idx.callee_name(call, src)) {
            return None;
        }
        first.get_or_insert(syntax::lines(ret).0);
    }
    first
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    said_by_the_status(cx, idx, src);
    let mut reported: Vec<usize> = Vec::new();
    for &call in idx.all(kinds::CALL) {
        let name = idx.callee_name(call, src);
        if !verifies(name) {
            continue;
        }
        let mut returned = None;
        let mut all = true;
        for (file, func) in cx.change.functions_named(cx.side, name) {
            match func.returns_answer {
                Some(line) if !file.is_test => {
                    returned.get_or_insert((file.path.clone(), line));
                }
                _ => all = false,
            }
        }
        let (Some((path, line)), true) = (returned, all) else {
            continue;
        };
        let Some(test) = tested(idx, call, src) else {
            continue;
        };
        if reported.contains(&test.id()) {
            continue;
        }
        reported.push(test.id());
        cx.report(&RULE, test)
            .arg("test", syntax::normalized(test, src))
            .arg(
                "callee",
                syntax::normalized(call.field("function").unwrap_or(call), src),
            )
            .arg("at", format!("{path}:{line}"));
    }
}

/// The condition that takes `call`'s result for a yes or no: the call's own (`if not
/// client.verify_webhook_signature(...)`), or that of the name it is bound to (`verified =
/// ...` then `if not verified:`), later in the same function.
fn tested<'t>(idx: &NodeIndex<'t>, call: Node<'t>, src: &str) -> Option<Node<'t>> {
    let mut node = call;
    while let Some(parent) = node.parent() {
        match parent.kind() {
            kinds::AWAIT
            | kinds::NOT_OPERATOR
            | kinds::PARENTHESIZED_EXPRESSION
            | kinds::BOOLEAN_OPERATOR => node = parent,
            kinds::IF_STATEMENT | kinds::ELIF_CLAUSE | kinds::WHILE_STATEMENT => {
                return parent.field("condition").filter(|c| c.id() == node.id());
            }
            "assert_statement" => return Some(node),
            kinds::ASSIGNMENT if node.id() == call.id() || node.kind() == kinds::AWAIT => {
                let left = parent.field("left")?;
                if left.kind() != kinds::IDENTIFIER {
                    return None;
                }
                return bound_test(idx, parent, syntax::text(left, src), src);
            }
            _ => return None,
        }
    }
    None
}

/// The first `if`/`elif` after `assignment`, in its function, whose condition is the
/// name, `not` the name, or a `and`/`or` of them.
fn bound_test<'t>(
    idx: &NodeIndex<'t>,
    assignment: Node<'t>,
    name: &str,
    src: &str,
) -> Option<Node<'t>> {
    let func = idx.enclosing(assignment, kinds::FUNCTION_DEFINITION)?;
    let ifs = idx.within(func, kinds::IF_STATEMENT);
    let conditions = ifs
        .iter()
        .copied()
        .chain(ifs.iter().flat_map(|s| syntax::elif_clauses(*s)))
        .filter_map(|s| s.field("condition"))
        .filter(|c| c.start_byte() > assignment.end_byte())
        .filter(|c| bare_truth(*c, name, src));
    conditions.min_by_key(|c| c.start_byte())
}

/// `name`, `not name`, or `and`/`or` with one of those as an operand.
fn bare_truth(condition: Node<'_>, name: &str, src: &str) -> bool {
    let condition = unparenthesized(condition);
    match condition.kind() {
        kinds::IDENTIFIER => syntax::text(condition, src) == name,
        kinds::NOT_OPERATOR => condition
            .field("argument")
            .is_some_and(|a| bare_truth(a, name, src)),
        kinds::BOOLEAN_OPERATOR => [condition.field("left"), condition.field("right")]
            .into_iter()
            .flatten()
            .any(|o| bare_truth(o, name, src)),
        _ => false,
    }
}

fn unparenthesized(mut node: Node<'_>) -> Node<'_> {
    while node.kind() == kinds::PARENTHESIZED_EXPRESSION {
        match node.named_child(0) {
            Some(inner) => node = inner,
            None => break,
        }
    }
    node
}
