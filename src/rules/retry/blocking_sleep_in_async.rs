//! RETRY003 blocking-sleep-in-async: `time.sleep` in an `async def`, or a sync function of the
//! change that sleeps (a retry loop) called straight from an `async def`: the event loop stops.
use tree_sitter::Node;

use crate::python::{kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "RETRY003",
    doc: include_str!("../../../rules/retry/RETRY003.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Calls that run their argument off the event loop.
const OFFLOADERS: &[&str] = &[
    "to_thread",
    "run_in_executor",
    "run_in_threadpool",
    "run_sync",
    "sync_to_async",
];

/// Every finding is a call inside an `async def`.
fn gate(s: &Scan<'_>) -> bool {
    s.index()
        .all(kinds::FUNCTION_DEFINITION)
        .iter()
        .any(|f| syntax::is_async(*f))
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    for &call in idx.all(kinds::CALL) {
        let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        if !syntax::is_async(func) || offloaded(call, func, src) {
            continue;
        }
        if is_time_sleep(cx, call, src) {
            let text = syntax::text(call, src).to_string();
            cx.report(&RULE, call)
                .arg("call", text)
                .arg("function", syntax::function_name(func, src).to_string())
                .note("sleep");
            continue;
        }
        let awaited = call.parent().is_some_and(|p| p.kind() == kinds::AWAIT);
        let name = syntax::callee_name(call, src);
        if awaited || name.is_empty() || name == "sleep" {
            continue;
        }
        let Some(http) = blocking_callee(cx, name) else {
            continue;
        };
        let text = syntax::text(call, src).to_string();
        let finding = cx
            .report(&RULE, call)
            .arg("call", text)
            .arg("callee", name.to_string())
            .arg("function", syntax::function_name(func, src).to_string())
            .note("callee");
        if http {
            finding.note("http");
        }
    }
}

/// `time.sleep(...)`, or `sleep(...)` imported from `time`.
fn is_time_sleep(cx: &Ctx<'_>, call: Node<'_>, src: &str) -> bool {
    match syntax::callee(call, src) {
        "time.sleep" => true,
        "sleep" => cx
            .facts
            .and_then(|f| f.import_target("sleep"))
            .is_some_and(|t| t == "time.sleep"),
        _ => false,
    }
}

/// A sync function of the change, called `name`, that sleeps: `Some(does HTTP too)`.
fn blocking_callee(cx: &Ctx<'_>, name: &str) -> Option<bool> {
    let mut found = cx.change.functions_named(cx.side, name).peekable();
    found.peek()?;
    let mut http = false;
    for (_, f) in found {
        if f.is_async {
            return None;
        }
        if !f.sleeps {
            return None;
        }
        http |= f.http;
    }
    Some(http)
}

/// The call sits in a `lambda` or in the arguments of `asyncio.to_thread`/`run_in_executor`.
fn offloaded(call: Node<'_>, func: Node<'_>, src: &str) -> bool {
    let mut current = call.parent();
    while let Some(node) = current {
        if node.id() == func.id() {
            return false;
        }
        if node.kind() == "lambda" {
            return true;
        }
        if node.kind() == kinds::CALL && OFFLOADERS.contains(&syntax::callee_name(node, src)) {
            return true;
        }
        current = node.parent();
    }
    false
}
