//! PAY042 text-flag-read-with-bool: an outcome flag of a provider's notification or answer read
//! with `bool()` (`success=bool(raw.get("success"))`). Providers send such flags as text in
//! form-encoded notifications and in many JSON ones (Adyen's `"success": "false"`, PayPal's IPN),
//! and `bool("false")` is `True`: a refused payment, a failed capture or a declined refund is
//! read as done, and the order is marked paid.
//!
//! Left alone: a comparison with the text (`raw.get("success") == "true"`), a parse of it
//! (`strtobool`, `.lower() in ("true", "1")`), and `bool()` of anything not named for an outcome
//! (`bool(data.get("items"))`, an emptiness test).
use tree_sitter::Node;

use crate::python::{Fields, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "PAY042",
    doc: include_str!("../../../rules/pay/PAY042.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a `bool(` in code that handles payments or their notifications.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(&["bool("])
        && (s.facts.payment_module
            || s.facts.functions.iter().any(|f| f.payment || f.http)
            || s.mentions(&["webhook", "notification", "Notification", "ipn", "callback"]))
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let mut found = Vec::new();
    for &call in idx.all(kinds::CALL) {
        if syntax::callee(call, src) != "bool" {
            continue;
        }
        let args = syntax::positional_args(call);
        let [value] = args.as_slice() else {
            continue;
        };
        let Some(key) = flag_read(*value, src) else {
            continue;
        };
        // A notification's flag, or a form's: a client's JSON answer (`bool(body.get("success"))`
        // of a gateway's reply) carries a real boolean far more often.
        let form = form_value(*value, src);
        let notified = || {
            let func = idx.enclosing(call, kinds::FUNCTION_DEFINITION);
            let class = idx.enclosing(call, kinds::CLASS_DEFINITION);
            let names = [
                Some(cx.path),
                func.map(|f| syntax::function_name(f, src)),
                class
                    .and_then(|c| c.field("name"))
                    .map(|n| syntax::text(n, src)),
            ];
            names
                .into_iter()
                .flatten()
                .any(syntax::names_a_notification)
        };
        if !form && !notified() {
            continue;
        }
        let (first, last) = syntax::lines(call);
        if cx.touches_added(first, last) {
            found.push((call, key.to_string()));
        }
    }
    for (call, key) in found {
        cx.report(&RULE, call)
            .arg("read", syntax::normalized(call, src))
            .arg("flag", key);
    }
}

/// The key of an outcome flag a value reads from a mapping: `raw.get("success")`,
/// `notification["success"]`, `item.get("live", False)`.
fn flag_read<'s>(value: Node<'_>, src: &'s str) -> Option<&'s str> {
    let key = match value.kind() {
        kinds::SUBSCRIPT => syntax::string_value(value.field("subscript")?, src)?,
        kinds::CALL if syntax::callee_name(value, src) == "get" => {
            let first = *syntax::positional_args(value).first()?;
            syntax::string_value(first, src)?
        }
        _ => return None,
    };
    names_an_outcome(key).then_some(key)
}

/// Whether the value is read from a request's form or query (`request.POST["paid"]`,
/// `request.form.get("success")`): always text.
fn form_value(value: Node<'_>, src: &str) -> bool {
    let mapping = match value.kind() {
        kinds::SUBSCRIPT => value.field("value"),
        _ => value.field("function").and_then(|f| f.field("object")),
    };
    mapping.is_some_and(|m| {
        let text = syntax::text(m, src);
        let last = text.rsplit('.').next().unwrap_or(text);
        text.contains("request")
            && matches!(
                last,
                "POST" | "GET" | "form" | "values" | "args" | "query_params" | "query"
            )
    })
}

/// A key that names whether the operation happened: `success`, `isSuccess`, `paid`,
/// `captured`, `authorised`, `live`.
fn names_an_outcome(key: &str) -> bool {
    syntax::name_words(key).iter().any(|w| {
        matches!(
            w.as_str(),
            "success"
                | "succeeded"
                | "successful"
                | "paid"
                | "captured"
                | "authorised"
                | "authorized"
                | "approved"
                | "refunded"
                | "settled"
                | "live"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::names_an_outcome;

    #[test]
    fn outcome_flags_are_told_from_other_keys() {
        for flag in [
            "success",
            "isSuccess",
            "paid",
            "captured",
            "authorised",
            "live",
        ] {
            assert!(names_an_outcome(flag), "{flag}");
        }
        for other in ["items", "amount", "reference", "metadata", "signature"] {
            assert!(!names_an_outcome(other), "{other}");
        }
    }
}
