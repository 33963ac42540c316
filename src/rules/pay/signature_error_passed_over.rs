//! PAY033 signature-error-passed-over: the error a signature check raises when the signature is
//! wrong (`cryptography`'s `InvalidSignature`, Stripe's `SignatureVerificationError`,
//! `itsdangerous`' `BadSignature`, `nacl`'s `BadSignatureError`) is caught and passed over: the
//! handler does nothing but `pass` or log, and the code after the `try` goes on as if the check
//! had succeeded (`return True`, the event applied). A forged notification (a refund, a payout
//! marked failed and credited back, an order marked paid) is taken for the provider's.
//!
//! Left alone: a handler that leaves (`return False`, `raise`, `continue` to the next key of a
//! rotation), that records the failure (`valid = False`, `errors.append(...)`), and one under
//! which nothing follows the `try`.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY033",
    doc: include_str!("../../../rules/pay/PAY033.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is an `except` of a signature error, or a test of a check's answer.
fn gate(s: &Scan<'_>) -> bool {
    // `ignature`: `Signature` and `signature` in one search.
    !s.facts.is_test && s.mentions(&["ignature", "hmac", "digest"])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    for &clause in idx.all(kinds::EXCEPT_CLAUSE) {
        let Some(caught) = syntax::except_types(clause)
            .into_iter()
            .map(|t| syntax::text(t, src))
            .find(|t| names_signature_error(t))
        else {
            continue;
        };
        let Some(body) = syntax::except_body(clause) else {
            continue;
        };
        if !passes_over(idx, body, src) {
            continue;
        }
        let Some(try_statement) = syntax::try_of(clause) else {
            continue;
        };
        // An `else:` of the `try` holds what only a good signature reaches.
        if crate::python::named_children(try_statement)
            .iter()
            .any(|c| c.kind() == kinds::ELSE_CLAUSE)
        {
            continue;
        }
        let Some(next) = try_statement.next_named_sibling() else {
            continue;
        };
        if !accepts(next, src) {
            continue;
        }
        let function = idx
            .enclosing(clause, kinds::FUNCTION_DEFINITION)
            .map(|f| facts::qualname(f, idx, src))
            .unwrap_or_default();
        let finding = cx
            .report(&RULE, clause)
            .arg("function", function.clone())
            .arg("caught", caught.to_string())
            .arg("next", crate::rules::pay::first_line(next, src))
            .arg("next_line", syntax::lines(next).0.to_string());
        finding.function = function;
    }
    answer_passed_over(cx, idx, src);
}

/// `if not is_valid_notification(item, hmac_key): log.warning(...)`, and the item used after
/// it: a check whose "no" is only logged.
fn answer_passed_over(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    for &stmt in idx.all(kinds::IF_STATEMENT) {
        let Some(condition) = stmt
            .field("condition")
            .filter(|c| c.kind() == kinds::NOT_OPERATOR)
        else {
            continue;
        };
        if !condition
            .field("argument")
            .map(crate::rules::idem::strip_await)
            .is_some_and(|c| c.kind() == kinds::CALL && checks_a_signature(c, src))
        {
            continue;
        }
        let Some(body) = stmt.field("consequence") else {
            continue;
        };
        if stmt.field("alternative").is_some() || !passes_over(idx, body, src) {
            continue;
        }
        let mut next = stmt.next_named_sibling();
        while let Some(n) = next.filter(|n| n.kind() == kinds::COMMENT) {
            next = n.next_named_sibling();
        }
        let Some(next) = next.filter(|n| accepts(*n, src)) else {
            continue;
        };
        let function = facts::enclosing_qualname(idx, stmt, src);
        let finding = cx
            .report(&RULE, condition)
            .arg("function", function.clone())
            .arg("test", syntax::normalized(condition, src))
            .arg("next", crate::rules::pay::first_line(next, src))
            .arg("next_line", syntax::lines(next).0.to_string())
            .note("answer");
        finding.function = function;
    }
}

/// A call that checks a signature: `is_valid_notification(item, hmac_key)`,
/// `verify_signature(body, header)`, `hmac.compare_digest(expected, sent)`.
fn checks_a_signature(call: Node<'_>, src: &str) -> bool {
    let name = syntax::callee(call, src).to_ascii_lowercase();
    let text = syntax::text(call, src).to_ascii_lowercase();
    ["valid", "verif", "compare_digest", "authentic"]
        .iter()
        .any(|w| name.contains(w))
        && [
            "signature",
            "hmac",
            "sig",
            "notification",
            "webhook",
            "digest",
        ]
        .iter()
        .any(|w| text.contains(w))
}

/// `InvalidSignature`, `stripe.error.SignatureVerificationError`, `BadSignature`,
/// `nacl.exceptions.BadSignatureError`, `InvalidSignatureError`.
fn names_signature_error(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    let words = syntax::name_words(last);
    words.iter().any(|w| w == "signature")
        && words.iter().any(|w| {
            matches!(
                w.as_str(),
                "invalid" | "bad" | "verification" | "mismatch" | "error"
            )
        })
}

/// Whether a handler does nothing that a caller would see: `pass`, `...`, a log line.
fn passes_over(idx: &NodeIndex<'_>, body: Node<'_>, src: &str) -> bool {
    syntax::block_falls_through(body, src)
        && syntax::statements(body).iter().all(|s| {
            let text = syntax::text(*s, src).trim();
            text == "pass"
                || text == "..."
                || s.kind() == kinds::EXPRESSION_STATEMENT
                    && idx
                        .within(*s, kinds::CALL)
                        .first()
                        .is_some_and(|c| facts::only_records(syntax::callee(*c, src)))
        })
}

/// Whether the statement after the `try` goes on as if the signature checked out: `return
/// True`, a return of the payload or event, or work that is not a refusal (`raise`, `return
/// False`, `return None`, an error response).
fn accepts(next: Node<'_>, src: &str) -> bool {
    match next.kind() {
        kinds::RAISE_STATEMENT => false,
        kinds::RETURN_STATEMENT => syntax::return_value(next).is_some_and(|v| {
            let text = syntax::text(v, src);
            !(matches!(v.kind(), kinds::FALSE | kinds::NONE)
                || text.contains("Forbidden")
                || text.contains("BadRequest")
                || text.contains("401")
                || text.contains("403")
                || text.contains("400"))
        }),
        _ => true,
    }
}
