//! PAY019 outcome-flag-ignored: a provider's notification carries its outcome as a flag of its
//! own (Adyen's `"success": "true"` beside the `eventCode`), a handler of one kind of event reads
//! it, and a handler of another kind, handed the same event, records the operation as done
//! without reading it. A failed capture (an expired authorisation) is booked as captured and
//! credited, a refund the bank refused is shown as refunded.
//!
//! The evidence is the file's own: a sibling handler that reads the flag of a parameter of the
//! same name. A handler that hands the event to a function that reads the flag is left alone.
use tree_sitter::Node;

use super::success_recorded_before_result::records_success;
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY019",
    doc: include_str!("../../../rules/pay/PAY019.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// The keys a notification's outcome flag goes by.
const FLAGS: &[&str] = &["success", "succeeded", "successful", "is_success"];

/// Every finding is a handler in a file where another one reads an outcome flag.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && s.mentions(&["success"])
}

fn check(cx: &mut Ctx<'_>) {
    told_by_no_error(cx);
    string_flag_taken_for_truth(cx);
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let functions = idx.all(kinds::FUNCTION_DEFINITION);
    // (function, parameter) for each function that reads the flag of one of its parameters.
    let mut readers: Vec<(Node<'_>, String)> = Vec::new();
    for &func in functions {
        // Only a function whose text names the flag can read it.
        if !syntax::text(func, src).contains("success") {
            continue;
        }
        for param in crate::rules::pay::parameters(func, src) {
            if names_an_outcome(&param) && reads_flag(func, &param, src).is_some() {
                readers.push((func, param));
            }
        }
    }
    if readers.is_empty() {
        return;
    }
    for &func in functions {
        if readers.iter().any(|(f, _)| f.id() == func.id()) {
            continue;
        }
        let params = crate::rules::pay::parameters(func, src);
        // The flag read by the caller and handed in (`_on_refund(session, item, success, ...)`
        // that tests `if not success`): the outcome is read, under its own name.
        if params
            .iter()
            .any(|p| (FLAGS.contains(&p.as_str()) || p == "ok") && tests_flag(idx, func, p, src))
        {
            continue;
        }
        for param in params {
            let Some((sibling, _)) = readers.iter().find(|(_, p)| *p == param) else {
                continue;
            };
            let Some(flag) = reads_flag(*sibling, &param, src) else {
                continue;
            };
            // It reads the event as a notification: some other key of it.
            if !reads_a_key(func, &param, src)
                || hands_to_a_reader(idx, func, &param, &readers, src)
            {
                continue;
            }
            let Some(done) = records_done(idx, func, src) else {
                continue;
            };
            let handler = facts::qualname(func, idx, src);
            let finding = cx
                .report(&RULE, done)
                .arg("handler", handler.clone())
                .arg("event", param.clone())
                .arg("flag", flag.to_string())
                .arg("sibling", facts::qualname(*sibling, idx, src))
                .arg("done", crate::rules::pay::first_line(done, src));
            finding.function = handler;
            break;
        }
    }
}

/// Names a result's outcome goes by, as a keyword, a field or a local.
const OUTCOMES: &[&str] = &[
    "ok",
    "success",
    "succeeded",
    "successful",
    "is_success",
    "approved",
    "paid",
    "captured",
    "refunded",
];

/// The outcome of an answer told by the absence of an error (`ok=not body.get("errors")`, `if
/// "error" not in data: refund.status = "succeeded"`), in a file where another function reads
/// the provider's own flag of success (`body.get("success")`). The provider says so when an
/// operation fails without an error list: a processor's decline comes back as `success: false`
/// with the declined transaction, and passes for a success here.
fn told_by_no_error(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    if !src.contains("error") {
        return;
    }
    let functions = idx.all(kinds::FUNCTION_DEFINITION);
    let flag_readers: Vec<(Node<'_>, &'static str)> = functions
        .iter()
        .filter_map(|&f| reads_any_flag(f, src).map(|flag| (f, flag)))
        .collect();
    if flag_readers.is_empty() {
        return;
    }
    let mut found: Vec<Node<'_>> = Vec::new();
    for &call in idx.all(kinds::CALL) {
        for (key, value) in syntax::keyword_args(call, src) {
            if OUTCOMES.contains(&key.to_ascii_lowercase().as_str()) && no_error_test(value, src) {
                found.push(value);
            }
        }
    }
    for &assignment in idx.all(kinds::ASSIGNMENT) {
        let (Some(left), Some(right)) = (assignment.field("left"), assignment.field("right"))
        else {
            continue;
        };
        if matches!(left.kind(), kinds::IDENTIFIER | kinds::ATTRIBUTE)
            && OUTCOMES.contains(&attribute(left, src).to_ascii_lowercase().as_str())
            && no_error_test(right, src)
        {
            found.push(right);
        }
    }
    for &stmt in idx.all(kinds::IF_STATEMENT) {
        if let (Some(condition), Some(body)) = (stmt.field("condition"), stmt.field("consequence"))
            && no_error_test(condition, src)
            && records_done(idx, body, src).is_some()
        {
            found.push(condition);
        }
    }
    found.sort_by_key(|test| test.start_byte());
    found.dedup_by_key(|test| test.id());
    for test in found {
        let Some(func) = idx.enclosing(test, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let Some(&(sibling, flag)) = flag_readers.iter().find(|(f, _)| f.id() != func.id()) else {
            continue;
        };
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, test)
            .arg("function", function.clone())
            .arg("test", syntax::text(test, src).to_string())
            .arg("sibling", facts::qualname(sibling, idx, src))
            .arg("flag", flag.to_string())
            .note("no_error");
        finding.function = function;
    }
}

/// A flag of an answer tested for truth (`if not item.get("success"):`) while the file compares
/// the same key with a string elsewhere (`item.get("success") == "true"`): the provider sends
/// it as text (Adyen's notifications do), and `"false"` is a non-empty string, so a failed
/// capture or refund passes as a success.
fn string_flag_taken_for_truth(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    if !src.contains("\"true\"") && !src.contains("\"false\"") && !src.contains("'true'") {
        return;
    }
    for &stmt in idx.all(kinds::IF_STATEMENT) {
        let mut conditions: Vec<Node<'_>> = stmt.field("condition").into_iter().collect();
        let mut cursor = stmt.walk();
        conditions.extend(
            stmt.named_children(&mut cursor)
                .filter(|c| c.kind() == kinds::ELIF_CLAUSE)
                .filter_map(|c| c.field("condition")),
        );
        for condition in conditions {
            let mut operands = vec![condition];
            while let Some(node) = operands.pop() {
                match node.kind() {
                    kinds::NOT_OPERATOR => operands.extend(node.field("argument")),
                    kinds::PARENTHESIZED_EXPRESSION => operands.extend(node.named_child(0)),
                    kinds::BOOLEAN_OPERATOR => {
                        operands.extend(node.field("left"));
                        operands.extend(node.field("right"));
                    }
                    kinds::CALL | kinds::SUBSCRIPT => {
                        let Some(key) = flag_key(node, src) else {
                            continue;
                        };
                        let Some((compared, line)) = compared_with_text(src, key) else {
                            continue;
                        };
                        let function = facts::enclosing_qualname(idx, stmt, src);
                        let finding = cx
                            .report(&RULE, node)
                            .arg("test", syntax::text(node, src).to_string())
                            .arg("key", key.to_string())
                            .arg("compared", compared)
                            .arg("compared_line", line.to_string())
                            .note("string_flag");
                        finding.function = function;
                    }
                    _ => {}
                }
            }
        }
    }
}

/// The key of a flag read, `item.get("success")` or `item["success"]`, when it is one of the
/// outcome's flags.
fn flag_key<'s>(node: Node<'_>, src: &'s str) -> Option<&'s str> {
    let key = match node.kind() {
        kinds::CALL => {
            if syntax::callee_name(node, src) != "get" {
                return None;
            }
            syntax::string_value(*syntax::positional_args(node).first()?, src)?
        }
        _ => syntax::string_value(node.field("subscript")?, src)?,
    };
    FLAGS.contains(&key).then_some(key)
}

/// Where the file compares key `key`'s value with `"true"` or `"false"`: the comparison as
/// written and its line.
fn compared_with_text(src: &str, key: &str) -> Option<(String, usize)> {
    for quote in ['"', '\''] {
        let quoted = format!("{quote}{key}{quote}");
        for (at, _) in src.match_indices(&quoted) {
            let rest = &src[at + quoted.len()..];
            let Some(rest) = rest.strip_prefix(')').or_else(|| rest.strip_prefix(']')) else {
                continue;
            };
            let rest = rest.trim_start();
            let Some(rest) = rest.strip_prefix("==").or_else(|| rest.strip_prefix("!=")) else {
                continue;
            };
            let value = rest.trim_start();
            let lower = value.get(..7).unwrap_or(value).to_ascii_lowercase();
            if lower.starts_with("\"true\"")
                || lower.starts_with("'true'")
                || lower.starts_with("\"false\"")
                || lower.starts_with("'false'")
            {
                let start = src[..at].rfind('\n').map_or(0, |n| n + 1);
                let line = src[..at].matches('\n').count() + 1;
                let text = src[start..].lines().next().unwrap_or("").trim();
                let text = text
                    .strip_prefix("if ")
                    .or_else(|| text.strip_prefix("elif "))
                    .unwrap_or(text)
                    .trim_end_matches(':')
                    .to_string();
                return Some((text, line));
            }
        }
    }
    None
}

/// Whether `value` says yes when an answer carries no error, and reads nothing that says it
/// succeeded: `not body.get("errors")`, `"error" not in data`, `resp.error is None`, also as
/// an operand of `and` beside a test of the HTTP status.
fn no_error_test(value: Node<'_>, src: &str) -> bool {
    let text = syntax::text(value, src);
    if !text.contains("error") || text.contains("succe") || reads_a_status(text) {
        return false;
    }
    let mut operands = vec![value];
    let mut found = false;
    while let Some(node) = operands.pop() {
        match node.kind() {
            kinds::PARENTHESIZED_EXPRESSION => operands.extend(node.named_child(0)),
            kinds::BOOLEAN_OPERATOR if syntax::text(node, src).contains(" and ") => {
                operands.extend(node.field("left"));
                operands.extend(node.field("right"));
            }
            kinds::NOT_OPERATOR => {
                found |= node
                    .field("argument")
                    .is_some_and(|a| reads_an_error(syntax::text(a, src)));
            }
            kinds::COMPARISON_OPERATOR => {
                let text = syntax::text(node, src);
                found |= (text.contains(" not in ")
                    && node
                        .named_child(0)
                        .and_then(|k| syntax::string_value(k, src))
                        .is_some_and(names_an_error))
                    || (text.ends_with(" is None")
                        && node
                            .named_child(0)
                            .is_some_and(|a| reads_an_error(syntax::text(a, src))));
            }
            _ => {}
        }
    }
    found
}

/// `body.get("errors")`, `data["error"]`, `result.errors`: a read of an answer's errors.
fn reads_an_error(text: &str) -> bool {
    let key = if let Some(rest) = text.strip_suffix(')') {
        rest.split_once(".get(").map(|(_, args)| {
            args.split(',')
                .next()
                .unwrap_or("")
                .trim()
                .trim_matches(|c| c == '"' || c == '\'')
        })
    } else if let Some(rest) = text.strip_suffix(']') {
        rest.rsplit_once('[')
            .map(|(_, key)| key.trim_matches(|c| c == '"' || c == '\''))
    } else {
        text.rsplit_once('.').map(|(_, attr)| attr)
    };
    key.is_some_and(names_an_error)
}

fn names_an_error(key: &str) -> bool {
    matches!(
        key,
        "error" | "errors" | "err" | "error_code" | "error_message"
    )
}

/// A read of the answer's status (not the HTTP status code), which may say it succeeded.
fn reads_a_status(text: &str) -> bool {
    text.replace("status_code", "").contains("status")
}

/// The flag of success some function reads of an answer, whatever the answer is called:
/// `body.get("success")`, `result["succeeded"]`, `result.is_success`.
fn reads_any_flag(func: Node<'_>, src: &str) -> Option<&'static str> {
    let body = syntax::text(func.field("body")?, src);
    if !body.contains("succe") {
        return None;
    }
    FLAGS.iter().copied().find(|flag| {
        [
            format!(".get(\"{flag}\""),
            format!(".get('{flag}'"),
            format!("[\"{flag}\"]"),
            format!("['{flag}']"),
        ]
        .iter()
        .any(|form| body.contains(form.as_str()))
            || body.match_indices(&format!(".{flag}")).any(|(at, _)| {
                // `result.is_success`, not `payment.success` (our own record) nor
                // `result.successful_at`.
                let next = body[at + flag.len() + 1..].chars().next();
                let receiver = body[..at]
                    .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or("");
                !next.is_some_and(|c| c.is_alphanumeric() || c == '_') && names_an_outcome(receiver)
            })
    })
}

/// A parameter named for what a provider sent back (`event`, `item`, `notification`,
/// `result`), not for a record of ours (`payment.success` is our own payment's state).
pub(crate) fn names_an_outcome(param: &str) -> bool {
    syntax::name_words(param).iter().any(|w| {
        matches!(
            w.as_str(),
            "event"
                | "evt"
                | "item"
                | "notification"
                | "notif"
                | "result"
                | "response"
                | "resp"
                | "reply"
                | "outcome"
                | "payload"
                | "message"
                | "msg"
                | "callback"
                | "webhook"
                | "answer"
        )
    })
}

/// The flag `func` reads of its parameter `param`: `param.get("success")`, `param["success"]`,
/// `param.success`.
fn reads_flag(func: Node<'_>, param: &str, src: &str) -> Option<&'static str> {
    let body = syntax::text(func.field("body")?, src);
    FLAGS.iter().copied().find(|flag| {
        body.contains(flag)
            && [
                format!("{param}.get(\"{flag}\""),
                format!("{param}.get('{flag}'"),
                format!("{param}[\"{flag}\"]"),
                format!("{param}['{flag}']"),
                format!("{param}.{flag}"),
            ]
            .iter()
            .any(|form| {
                body.match_indices(form.as_str()).any(|(at, _)| {
                    // `param.success` must not be the start of `param.successful_at`.
                    let next = body[at + form.len()..].chars().next();
                    !form.ends_with(flag) || !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
                })
            })
    })
}

/// Whether `func` reads some key or attribute of `param` (`event["pspReference"]`,
/// `event.get("reference")`, `result.transaction.id`) or hands it on: what a handler of a
/// notification or a result does with it.
fn reads_a_key(func: Node<'_>, param: &str, src: &str) -> bool {
    func.field("body").is_some_and(|b| {
        let body = syntax::text(b, src);
        body.contains(&format!("{param}[")) || body.contains(&format!("{param}.")) || {
            // Handed to a helper that reads it: `_by_reference(session, LegCapture, event)`.
            body.contains(&format!(", {param})")) || body.contains(&format!("({param})"))
        }
    })
}

/// Whether `func` tests its parameter `flag` in an `if` (`if not success or ...:`).
fn tests_flag(idx: &NodeIndex<'_>, func: Node<'_>, flag: &str, src: &str) -> bool {
    idx.within(func, kinds::IF_STATEMENT).iter().any(|stmt| {
        stmt.field("condition").is_some_and(|c| {
            syntax::name_words(syntax::text(c, src))
                .iter()
                .any(|w| w == flag)
        })
    })
}

/// Whether `func` hands `param` to a function of the file that reads the flag.
fn hands_to_a_reader(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    param: &str,
    readers: &[(Node<'_>, String)],
    src: &str,
) -> bool {
    idx.within(func, kinds::CALL).iter().any(|&call| {
        let name = syntax::callee_name(call, src);
        syntax::positional_args(call)
            .iter()
            .chain(syntax::keyword_args(call, src).iter().map(|(_, v)| v))
            .any(|a| syntax::text(*a, src) == param)
            && readers
                .iter()
                .any(|(f, _)| syntax::function_name(*f, src) == name)
    })
}

/// The first write in `func` that records a payment operation as done: `capture.status =
/// "captured"`, `refund.state = RefundState.REFUNDED`, `update(status="paid")`.
fn records_done<'t>(idx: &NodeIndex<'t>, func: Node<'t>, src: &str) -> Option<Node<'t>> {
    let assignment = idx
        .within(func, kinds::ASSIGNMENT)
        .iter()
        .copied()
        .find(|a| {
            let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
                return false;
            };
            left.kind() == kinds::ATTRIBUTE
                && records_success(&attribute(left, src).to_ascii_lowercase(), right, src)
        });
    let keyword = idx.within(func, kinds::CALL).iter().copied().find(|&c| {
        syntax::keyword_args(c, src)
            .into_iter()
            .any(|(k, v)| records_success(&k.to_ascii_lowercase(), v, src))
    });
    match (assignment, keyword) {
        (Some(a), Some(k)) => Some(if a.start_byte() <= k.start_byte() {
            a
        } else {
            k
        }),
        (a, k) => a.or(k),
    }
}

fn attribute<'s>(left: Node<'_>, src: &'s str) -> &'s str {
    let text = syntax::text(left, src);
    text.rsplit('.').next().unwrap_or(text)
}
