//! PAY024 refusal-taken-as-success: a function that sends a payment (a capture, a refund, a
//! charge) raises on the answer only for a server error (`if resp.status >= 500: raise ...`)
//! and hands back what any other answer carries. A refusal (a 4xx: the refund above what was
//! captured, an invalid amount, an expired authorization) comes back as a refund made, and the
//! caller records it so.
//!
//! Left alone: a function that checks the answer for success (`!= 201`, `raise_for_status()`,
//! `resp.ok`, `is_error`) or for a client error too (`>= 400`).
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY024",
    doc: include_str!("../../../rules/pay/PAY024.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a test for a 5xx, or of the statuses a loop tries again.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.facts
            .functions
            .iter()
            .any(|f| f.http || f.payment || s.vocab.is_payment_operation(&f.name))
        && (s.mentions(&["500", "499", "INTERNAL_SERVER_ERROR", " not in "])
            // A client class whose methods check their answers, one of which may not.
            || s.mentions(&["raise_for_status", "status_code", ".ok", "is_success", "is_error"])
                && s.facts.functions.iter().filter(|f| f.http).count() >= 2)
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    unchecked_beside_checked(cx, idx, src);
    all_but_retryable_returned(cx, idx, src);
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
        let posts = idx
            .within(func, kinds::CALL)
            .iter()
            .any(|&c| crate::rules::pay::http_payment(cx, c) || handed_post(c, src));
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

/// `if response.status_code not in RETRYABLE_STATUSES: return _json(response)` in the loop of
/// a payment's POST: every answer the loop does not try again is handed back as the answer, a
/// refusal (a 4xx) with the rest, read by something that never asks its status. The caller
/// records a capture refused as accepted.
fn all_but_retryable_returned(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    if !cx.facts.is_some_and(|f| f.payment_module)
        || memchr::memmem::find(src.as_bytes(), b" not in ").is_none()
    {
        return;
    }
    for &stmt in idx.all(kinds::IF_STATEMENT) {
        let Some(condition) = stmt.field("condition") else {
            continue;
        };
        let test = syntax::text(condition, src);
        let Some((answer, set)) = test.split_once(" not in ") else {
            continue;
        };
        let answer = answer.trim();
        if !crate::rules::retry::refusal_retried::names_retries(set.trim())
            || !(answer.ends_with("status") || answer.ends_with("status_code"))
        {
            continue;
        }
        let response = answer.split('.').next().unwrap_or(answer);
        let Some(ret) = stmt
            .field("consequence")
            .map(syntax::statements)
            .unwrap_or_default()
            .into_iter()
            .find(|s| s.kind() == kinds::RETURN_STATEMENT)
        else {
            continue;
        };
        let Some(value) = syntax::return_value(ret) else {
            continue;
        };
        let consequence = stmt.field("consequence");
        // `settled = resp.json()` then `return settled`: the value is what the name was given.
        let value = consequence
            .filter(|_| value.kind() == kinds::IDENTIFIER)
            .and_then(|block| {
                idx.assigned_before(Some(block), syntax::text(value, src), ret.start_byte(), src)
            })
            .unwrap_or(value);
        // `resp.raise_for_status()` (or `if not resp.ok: raise ...`) before the `return`.
        if consequence.is_some_and(|block| {
            let before = &src[block.start_byte()..ret.start_byte()];
            checks_success(before) || before.contains("raise ")
        }) {
            continue;
        }
        let value = crate::rules::idem::strip_await(value);
        if value.kind() != kinds::CALL
            || !crate::rules::testing::has_word(syntax::text(value, src), response)
        {
            continue;
        }
        // Read by a helper of the file that asks the status (`_parse`, which raises on a 4xx),
        // or by the client's own check: the refusal does not pass.
        let reader = idx.callee_name(value, src);
        let checked = reader == "raise_for_status"
            || idx
                .functions_named(reader, src)
                .any(|f| checks_success(syntax::text(f, src)));
        let reads_json = reader == "json" || idx.functions_named(reader, src).next().is_some();
        if checked || !reads_json {
            continue;
        }
        let Some(func) = idx.enclosing(stmt, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        // The POST of a payment: one that carries a key, in the loop around this test.
        let posts = idx
            .within(func, kinds::CALL)
            .iter()
            .any(|&c| idx.callee_name(c, src) == "post" || handed_post(c, src));
        if !posts {
            continue;
        }
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, condition)
            .arg("function", function.clone())
            .arg("test", test.to_string())
            .arg("returned", crate::rules::pay::first_line(value, src))
            .note("all_but_retryable");
        finding.function = function;
    }
}

/// A call that hands a helper the method `"POST"` first: `self._request("POST", path, ...)`.
fn handed_post(call: Node<'_>, src: &str) -> bool {
    syntax::positional_args(call).first().is_some_and(|m| {
        syntax::string_value(*m, src).is_some_and(|m| m.eq_ignore_ascii_case("post"))
    })
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

/// A method of a client class that sends a write (`post`, `put`, `patch`, `delete`) and reads
/// the answer (`response.headers.get("Capture-Id", "")`, `response.json()`) without asking its
/// status, while two or more methods of the class check theirs (`_raise_for_status(response)`,
/// `response.raise_for_status()`, `response.status_code`): a refusal (an expired authorisation,
/// a capture above what is left) passes for an operation made.
fn unchecked_beside_checked(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    const WRITES: &[&str] = &["post", "put", "patch", "delete"];
    for &class in idx.all(kinds::CLASS_DEFINITION) {
        let methods = facts::own_methods(idx, class);
        // The class's own senders (`self._send("POST", url, ...)`): methods that make a request
        // and that the class's other methods call.
        let class_text = syntax::text(class, src);
        let senders: Vec<&str> = methods
            .iter()
            .filter(|m| {
                idx.within(**m, kinds::CALL)
                    .iter()
                    .any(|c| facts::http_by_name(&syntax::call_text(*c, src)))
            })
            .map(|m| syntax::function_name(*m, src))
            .filter(|name| class_text.contains(&format!("self.{name}(")))
            .collect();
        let requests = |call: Node<'_>| {
            facts::http_by_name(&syntax::call_text(call, src))
                || syntax::callee(call, src)
                    .strip_prefix("self.")
                    .is_some_and(|name| senders.contains(&name))
        };
        // (method, answer's name, request) for each method that sends and binds the answer.
        let mut sends: Vec<(Node<'_>, &str, Node<'_>)> = Vec::new();
        for &method in &methods {
            for &assignment in idx.within(method, kinds::ASSIGNMENT) {
                let (Some(left), Some(right)) =
                    (assignment.field("left"), assignment.field("right"))
                else {
                    continue;
                };
                let call = crate::rules::idem::strip_await(right);
                if left.kind() != kinds::IDENTIFIER || call.kind() != kinds::CALL || !requests(call)
                {
                    continue;
                }
                sends.push((method, syntax::text(left, src), call));
                break;
            }
        }
        let checks = |method: Node<'_>, answer: &str| {
            let body = syntax::text(method, src);
            [
                format!("({answer})"),
                format!("({answer},"),
                format!("{answer}.raise_for_status("),
                format!("{answer}.status"),
                format!("{answer}.is_success"),
                format!("{answer}.is_error"),
                format!("{answer}.ok"),
            ]
            .iter()
            .any(|form| {
                body.match_indices(form.as_str()).any(|(at, _)| {
                    // `_raise_for_status(response)`, `self._check(response)`: handed to a check.
                    !form.starts_with('(')
                        || body[..at]
                            .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
                            .next()
                            .is_some_and(|name| {
                                let lower = name.to_ascii_lowercase();
                                lower.contains("raise")
                                    || lower.contains("check")
                                    || lower.contains("status")
                                    || lower.contains("error")
                            })
                })
            })
        };
        let checked: Vec<&str> = sends
            .iter()
            .filter(|(m, answer, _)| {
                checks(*m, answer) && !senders.contains(&syntax::function_name(*m, src))
            })
            .map(|(m, _, _)| syntax::function_name(*m, src))
            .collect();
        if checked.len() < 2 {
            continue;
        }
        for &(method, answer, request) in &sends {
            // The verb, or the method handed to the class's sender (`self._send("POST", ...)`).
            let verb = syntax::callee_name(request, src).to_ascii_lowercase();
            let handed = syntax::positional_args(request)
                .first()
                .and_then(|a| syntax::string_value(*a, src))
                .map(str::to_ascii_lowercase)
                .unwrap_or_default();
            if !(WRITES.contains(&verb.as_str()) || WRITES.contains(&handed.as_str()))
                || checks(method, answer)
                || senders.contains(&syntax::function_name(method, src))
            {
                continue;
            }
            // The answer is read: what it carries is handed on as the operation's result.
            let body = syntax::text(method, src);
            if !body.contains(&format!("{answer}.")) && !body.contains(&format!("return {answer}"))
            {
                continue;
            }
            let function = facts::qualname(method, idx, src);
            let finding = cx
                .report(&RULE, request)
                .arg("function", function.clone())
                .arg(
                    "request",
                    format!(
                        "{}(...)",
                        syntax::normalized(request.field("function").unwrap_or(request), src)
                    ),
                )
                .arg("answer", answer.to_string())
                .arg("checked", checked.join("`, `"))
                .note("unchecked");
            finding.function = function;
        }
    }
}
