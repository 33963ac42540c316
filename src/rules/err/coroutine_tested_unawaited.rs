//! ERR008 coroutine-tested-unawaited: an `async def` is called without `await` where its answer
//! is tested (`if not paypal.verify_webhook_signature(...)`, `assert is_paid(...)`, `ok =
//! check(...) and ...`). What is tested is the coroutine object, which is always true: the
//! verification passes whatever the provider says, the guard never turns anything away, and
//! the check itself never runs.
//!
//! Read where the change defines the function (or, for a name that says it checks, the
//! repository does) and every definition of that name is `async`.
use tree_sitter::Node;

use crate::python::{kinds, syntax};
use crate::review::Severity;
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};
use crate::source::Side;

pub(crate) static RULE: Rule = Rule {
    id: "ERR008",
    doc: include_str!("../../../rules/err/ERR008.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is in a file that awaits something: the code is asynchronous.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && s.mentions(&["await "])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    let mut found: Vec<(Node<'_>, Node<'_>)> = Vec::new();
    for &call in idx.all(kinds::CALL) {
        let Some(tested) = tested_as(call) else {
            continue;
        };
        let name = idx.callee_name(call, src);
        if name.is_empty() || builtin_method(cx, call, name, src) || !only_async(cx, name) {
            continue;
        }
        found.push((call, tested));
    }
    for (call, tested) in found {
        let name = idx.callee_name(call, src).to_string();
        let function = idx
            .enclosing(call, kinds::FUNCTION_DEFINITION)
            .map(|f| facts::qualname(f, idx, src))
            .unwrap_or_default();
        let checks = checks_something(&name);
        let finding = cx
            .report(&RULE, call)
            .arg("call", crate::rules::pay::first_line(call, src))
            .arg("test", crate::rules::pay::first_line(tested, src));
        if checks {
            finding.severity(Severity::Blocker).note("check");
        }
        finding.function = function;
    }
}

/// The test a call's value goes straight into, unawaited: an `if`/`while`/`elif` condition, a
/// `not`, an `and`/`or`, an `assert`, a conditional expression's test. As the test.
fn tested_as(call: Node<'_>) -> Option<Node<'_>> {
    let mut node = call;
    loop {
        let parent = node.parent()?;
        match parent.kind() {
            kinds::AWAIT => return None,
            "not_operator" | kinds::BOOLEAN_OPERATOR | "parenthesized_expression" => node = parent,
            kinds::IF_STATEMENT | kinds::WHILE_STATEMENT | "elif_clause" => {
                return parent
                    .child_by_field_name("condition")
                    .filter(|c| c.id() == node.id())
                    .map(|_| parent);
            }
            "assert_statement" => return Some(parent),
            kinds::CONDITIONAL_EXPRESSION => {
                // `a if test else b`: the test is the middle child.
                let test = parent.named_child(1)?;
                return (test.id() == node.id()).then_some(parent);
            }
            _ => return (node.id() != call.id()).then_some(node),
        }
    }
}

/// `entity.get("error_code")`: a method a dict, a list or a string has, on what may be one, is
/// not the `async def get` of the file's service.
fn builtin_method(cx: &Ctx<'_>, call: Node<'_>, name: &str, src: &str) -> bool {
    let Some(file) = cx.facts else {
        return false;
    };
    call.child_by_field_name("function")
        .filter(|f| f.kind() == kinds::ATTRIBUTE)
        .and_then(|f| f.child_by_field_name("object"))
        .is_some_and(|o| facts::may_be_a_builtins_call(name, syntax::text(o, src), file))
}

/// Whether every function of that name the change defines is `async`, or, for a name that says
/// it checks, every one the repository defines.
fn only_async(cx: &Ctx<'_>, name: &str) -> bool {
    let mut defs = cx.change.functions_named(Side::New, name).peekable();
    if defs.peek().is_some() {
        return defs.all(|(file, f)| !file.is_test && f.is_async);
    }
    if !checks_something(name) {
        return false;
    }
    let Some(project) = cx.project() else {
        return false;
    };
    let mut any = false;
    for module in project.modules() {
        for def in module.functions.iter().filter(|d| d.name == name) {
            if !def.is_async {
                return false;
            }
            any = true;
        }
    }
    any
}

/// `verify_webhook_signature`, `is_paid`, `check_balance`, `has_capacity`: a name that says its
/// answer decides.
fn checks_something(name: &str) -> bool {
    let words = syntax::name_words(name);
    words.first().is_some_and(|w| {
        matches!(
            w.as_str(),
            "verify"
                | "validate"
                | "check"
                | "is"
                | "has"
                | "can"
                | "should"
                | "allowed"
                | "authorize"
                | "authorise"
                | "confirm"
        )
    }) || words
        .iter()
        .any(|w| matches!(w.as_str(), "signature" | "valid" | "verified"))
}
