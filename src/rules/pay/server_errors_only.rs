//! PAY024 refusal-taken-as-success: a function that sends a payment (a capture, a refund, a
//! charge) raises on the answer only for a server error (`if resp.status >= 500: raise ...`)
//! and hands back what any other answer carries. A refusal (a 4xx: the refund above what was
//! captured, an invalid amount, an expired authorization) comes back as a refund made, and the
//! caller records it so.
//!
//! Left alone: a function that checks the answer for success (`!= 201`, `raise_for_status()`,
//! `resp.ok`, `is_error`) or for a client error too (`>= 400`).
use tree_sitter::Node;

use crate::python::{NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY024",
    doc: include_str!("../../../rules/pay/PAY024.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a test for a 5xx.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.facts
            .functions
            .iter()
            .any(|f| f.http || f.payment || s.vocab.is_payment_operation(&f.name))
        && s.mentions(&["500", "499", "INTERNAL_SERVER_ERROR"])
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        let name = syntax::function_name(func, src);
        if !cx.vocab.is_payment_operation(name) || crate::rules::pay::beside_the_money(name) {
            continue;
        }
        let text = syntax::text(func, src);
        if checks_success(text) {
            continue;
        }
        let statuses: Vec<Node<'_>> = status_tests(idx, func, src);
        let Some(&server) = statuses.first() else {
            continue;
        };
        if !statuses
            .iter()
            .all(|t| server_errors_only(syntax::text(*t, src)))
        {
            continue;
        }
        // The POST of the operation: by HTTP, or through a helper handed the method.
        let posts = idx.within(func, kinds::CALL).iter().any(|&c| {
            crate::rules::pay::http_payment(cx, c)
                || syntax::positional_args(c).first().is_some_and(|m| {
                    syntax::string_value(*m, src).is_some_and(|m| m.eq_ignore_ascii_case("post"))
                })
        });
        if !posts {
            continue;
        }
        let Some(handed) = returned_after(idx, func, server, src).and_then(syntax::return_value)
        else {
            continue;
        };
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, server)
            .arg("function", function.clone())
            .arg("test", syntax::text(server, src).to_string())
            .arg("returned", crate::rules::pay::first_line(handed, src));
        finding.function = function;
    }
}

/// Code that looks at whether the answer succeeded, or at client errors too.
fn checks_success(code: &str) -> bool {
    [
        "raise_for_status",
        ".ok",
        "is_error",
        "is_success",
        "is_client_error",
        "ensure_success",
        ">= 400",
        "> 399",
        "< 400",
        "< 300",
        "// 100",
    ]
    .iter()
    .any(|w| code.contains(w))
}

/// The comparisons of an answer's status in `func`: `resp.status >= 500`, `status_code == 201`.
fn status_tests<'t>(idx: &NodeIndex<'t>, func: Node<'t>, src: &str) -> Vec<Node<'t>> {
    idx.within(func, kinds::COMPARISON_OPERATOR)
        .iter()
        .copied()
        .filter(|c| {
            c.named_child(0).is_some_and(|l| {
                let l = syntax::text(l, src);
                l.ends_with("status") || l.ends_with("status_code")
            })
        })
        .collect()
}

/// `resp.status >= 500`, `status_code > 499`, `resp.status >= HTTPStatus.INTERNAL_SERVER_ERROR`.
fn server_errors_only(test: &str) -> bool {
    let test = test.split_whitespace().collect::<Vec<_>>().join(" ");
    [">= 500", "> 499", ">= HTTPStatus.INTERNAL_SERVER_ERROR"]
        .iter()
        .any(|w| test.contains(w))
}

/// A `return` after the test that hands back something of the answer.
fn returned_after<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    test: Node<'_>,
    src: &str,
) -> Option<Node<'t>> {
    let answer = test
        .named_child(0)
        .map(|l| syntax::text(l, src))
        .and_then(|l| l.split('.').next())?;
    idx.within(func, kinds::RETURN_STATEMENT)
        .iter()
        .copied()
        .find(|r| {
            r.start_byte() > test.end_byte()
                && syntax::return_value(*r)
                    .is_some_and(|v| crate::rules::testing::has_word(syntax::text(v, src), answer))
        })
}
