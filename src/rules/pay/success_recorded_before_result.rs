//! PAY002 success-recorded-before-result: an entity is marked paid/charged before the payment
//! call, or after it but before anyone checked that the call actually succeeded.
use tree_sitter::Node;

use crate::config::Vocabulary;
use crate::python::{Fields, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY002",
    doc: include_str!("../../../rules/pay/PAY002.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Status values that say the money moved.
const SUCCESS: &[&str] = &[
    "paid",
    "charged",
    "captured",
    "succeeded",
    "success",
    "successful",
    "completed",
    "complete",
    "settled",
    "refunded",
    "paid_out",
    "authorized",
    "authorised",
    "approved",
];

/// Flags and timestamps that say the same (`is_paid = True`, `paid_at = now()`).
const SUCCESS_STEMS: &[&str] = &[
    "paid",
    "charged",
    "captured",
    "settled",
    "refunded",
    "completed",
];

/// Every finding starts from an assignment that records success.
fn gate(s: &Scan<'_>) -> bool {
    s.index()
        .all(kinds::ASSIGNMENT)
        .iter()
        .any(|a| is_success_assignment(*a, s.src(), s.vocab))
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    // One finding per payment call: `is_paid = True` and `paid_at = now()` are one mistake.
    let mut reported = Vec::new();
    for &assign in idx.all(kinds::ASSIGNMENT) {
        if !is_success_assignment(assign, src, cx.vocab) {
            continue;
        }
        let Some(stmt) = assign
            .parent()
            .filter(|p| p.kind() == kinds::EXPRESSION_STATEMENT)
        else {
            continue;
        };
        let Some(block) = stmt.parent().filter(|b| b.kind() == kinds::BLOCK) else {
            continue;
        };
        let Some(func) = idx.enclosing(assign, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let found = payment_call_after(cx, stmt, block, func)
            .map(|call| (call, "early"))
            .or_else(|| {
                unchecked_call_before(cx, stmt, block, src).map(|call| (call, "unchecked"))
            });
        let Some((call, why)) = found else {
            continue;
        };
        if reported.contains(&call.id()) {
            continue;
        }
        reported.push(call.id());
        report(cx, assign, stmt, block, call, why);
    }
}

fn report(
    cx: &mut Ctx<'_>,
    assign: Node<'_>,
    stmt: Node<'_>,
    block: Node<'_>,
    call: Node<'_>,
    why: &'static str,
) {
    let src = cx.src();
    let first = syntax::lines(call).0.min(syntax::lines(assign).0);
    let last = save_after(stmt, block, src)
        .map_or(syntax::lines(stmt).1, |s| syntax::lines(s).1)
        .max(syntax::lines(call).1);
    let callee = syntax::callee_name(call, src).to_string();
    let returns_none_at = cx
        .change
        .functions_named(cx.side, &callee)
        .find(|(_, f)| f.may_return_none())
        .map(|(file, f)| format!("{}:{}", file.path, none_lines(f)));
    let key = format!("{} {why} {}", syntax::normalized(assign, src), callee);
    let function = cx
        .index()
        .and_then(|idx| {
            idx.enclosing(assign, kinds::FUNCTION_DEFINITION)
                .map(|f| facts::qualname(f, idx, src))
        })
        .unwrap_or_default();
    let finding = cx
        .report_lines(&RULE, (first, last), key)
        .arg("assignment", syntax::normalized(assign, src))
        .arg("callee", syntax::callee(call, src).to_string())
        .note(why);
    finding.function = function;
    if let Some(at) = returns_none_at {
        finding.arg("returns_none_at", at).note("returns_none");
    }
}

/// `order.status = "charged"`, `payment.state = PaymentState.CAPTURED`, `invoice.is_paid = True`,
/// `order.paid_at = timezone.now()` on an entity.
fn is_success_assignment(assign: Node<'_>, src: &str, vocab: &Vocabulary) -> bool {
    // The left side first: most assignments bind a plain name, and have no entity.
    let Some(left) = assign.field("left") else {
        return false;
    };
    let Some(object) = super::entity_object(left, src) else {
        return false;
    };
    let Some(right) = assign.field("right") else {
        return false;
    };
    if !vocab.is_entity(object) {
        return false;
    }
    let attr = left
        .field("attribute")
        .map(|a| syntax::text(a, src).to_ascii_lowercase())
        .unwrap_or_default();
    if attr.contains("status") || attr.contains("state") {
        return success_value(right, src);
    }
    let stem = attr.trim_start_matches("is_");
    if SUCCESS_STEMS.contains(&stem) {
        return right.kind() == kinds::TRUE;
    }
    let stamped = attr
        .strip_suffix("_at")
        .is_some_and(|s| SUCCESS_STEMS.contains(&s));
    stamped && right.kind() == kinds::CALL
}

fn success_value(value: Node<'_>, src: &str) -> bool {
    let text = syntax::text(value, src);
    let word = match value.kind() {
        kinds::STRING => text.trim_matches(|c| c == '"' || c == '\''),
        kinds::ATTRIBUTE | kinds::IDENTIFIER => text.rsplit('.').next().unwrap_or(text),
        _ => return false,
    };
    SUCCESS.contains(&word.to_ascii_lowercase().as_str())
}

/// A payment call that runs after the assignment in the same sequence of statements.
fn payment_call_after<'t>(
    cx: &Ctx<'t>,
    stmt: Node<'_>,
    block: Node<'_>,
    func: Node<'_>,
) -> Option<Node<'t>> {
    let (idx, src) = (cx.index()?, cx.src());
    idx.within(block, kinds::CALL)
        .iter()
        .filter(|c| c.start_byte() > stmt.end_byte())
        .filter(|c| {
            idx.enclosing(**c, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| f.id() == func.id())
        })
        .find(|c| super::pays(cx, **c, src))
        .copied()
}

/// A payment call earlier in the same block whose callee (in this change) may return `None`
/// without raising, and whose result nobody tested before the assignment.
fn unchecked_call_before<'t>(
    cx: &Ctx<'t>,
    stmt: Node<'_>,
    block: Node<'_>,
    src: &str,
) -> Option<Node<'t>> {
    let idx = cx.index()?;
    let earlier: Vec<Node<'_>> = syntax::statements(block)
        .into_iter()
        .take_while(|s| s.id() != stmt.id())
        .collect();
    let (position, call) = earlier.iter().enumerate().rev().find_map(|(i, s)| {
        idx.within(*s, kinds::CALL)
            .iter()
            .find(|c| super::pays(cx, **c, src))
            .map(|c| (i, *c))
    })?;
    let callee = syntax::callee_name(call, src);
    let may_fail_quietly = cx
        .change
        .functions_named(cx.side, callee)
        .any(|(_, f)| f.may_return_none());
    if !may_fail_quietly {
        return None;
    }
    let binding = syntax::bound_name(call, src);
    let checked = earlier.iter().skip(position + 1).any(|s| {
        let text = syntax::text(*s, src);
        let tests = matches!(s.kind(), kinds::IF_STATEMENT | "assert_statement");
        tests
            && binding.is_some_and(|b| {
                text.split(|c: char| !c.is_alphanumeric() && c != '_')
                    .any(|w| w == b)
            })
    });
    (!checked).then_some(call)
}

/// The statement after `stmt` in its block that persists the entity: `save_order(order)`,
/// `order.save()`, `session.commit()`.
fn save_after<'t>(stmt: Node<'_>, block: Node<'t>, src: &str) -> Option<Node<'t>> {
    syntax::statements(block)
        .into_iter()
        .skip_while(|s| s.id() != stmt.id())
        .skip(1)
        .find(|s| {
            let Some(call) = s
                .named_child(0)
                .filter(|c| c.kind() == kinds::CALL)
                .or_else(|| {
                    s.named_child(0)
                        .filter(|a| a.kind() == kinds::AWAIT)
                        .and_then(|a| a.named_child(0))
                })
            else {
                return false;
            };
            let name = syntax::callee_name(call, src);
            name == "save"
                || name.starts_with("save_")
                || name.starts_with("update_")
                || matches!(
                    name,
                    "commit" | "flush" | "persist" | "put" | "add" | "merge"
                )
        })
}

/// The lines of a function's `return None`s (`43,46`), or its last line when it falls off the end.
fn none_lines(func: &facts::FunctionFacts) -> String {
    if func.none_returns.is_empty() {
        return func.lines.1.to_string();
    }
    func.none_returns
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
