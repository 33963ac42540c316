//! RETRY003 blocking-sleep-in-async: `time.sleep` in an `async def`, or a sync function of the
//! change that sleeps (a retry loop) called straight from an `async def`: the event loop stops.
use tree_sitter::Node;

use crate::python::{NodeIndex, kinds, syntax};
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
        if !syntax::is_async(func) || offloaded(call, func, idx, src) {
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
        let awaited = idx.parent_of_kind(call, kinds::AWAIT).is_some();
        debug_assert_eq!(
            awaited,
            call.parent().is_some_and(|p| p.kind() == kinds::AWAIT)
        );
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

/// The call sits in a `lambda` or in the arguments of `asyncio.to_thread`/`run_in_executor`,
/// inside `func` (the innermost function around it). Asked of the index, not by climbing the
/// call's parents: tree-sitter finds each parent by walking down from the root.
fn offloaded(call: Node<'_>, func: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> bool {
    // A node around the call that starts in `func` is inside it: no lambda or call holds a
    // definition.
    let inside = |n: &Node<'_>| n.start_byte() >= func.start_byte();
    if idx
        .enclosing(call, kinds::LAMBDA)
        .is_some_and(|l| inside(&l))
    {
        return true;
    }
    let mut current = idx.enclosing(call, kinds::CALL);
    while let Some(outer) = current.filter(inside) {
        if OFFLOADERS.contains(&syntax::callee_name(outer, src)) {
            return true;
        }
        current = idx.enclosing(outer, kinds::CALL);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::ParsedFile;

    /// `offloaded` of each call named `blocking`, in source order.
    fn offloaded_calls(src: &str) -> Vec<bool> {
        let file = ParsedFile::parse(src.to_string()).expect("parses");
        let idx = file.index();
        idx.all(kinds::CALL)
            .iter()
            .filter(|c| syntax::callee_name(**c, src) == "blocking")
            .map(|&call| {
                let func = idx
                    .enclosing(call, kinds::FUNCTION_DEFINITION)
                    .expect("inside a function");
                offloaded(call, func, idx, src)
            })
            .collect()
    }

    #[test]
    fn a_call_in_a_lambda_or_an_offloaders_arguments_is_off_the_loop() {
        let src = "async def f(loop):\n    \
                   blocking()\n    \
                   loop.call_soon(lambda: blocking())\n    \
                   await asyncio.to_thread(partial(blocking(), 1))\n    \
                   await loop.run_in_executor(None, wrap(blocking()))\n    \
                   log(blocking())\n    \
                   def inner():\n        \
                   return blocking()\n    \
                   await asyncio.to_thread(inner)\n";
        assert_eq!(
            offloaded_calls(src),
            [false, true, true, true, false, false]
        );
    }

    #[test]
    fn an_offloader_outside_the_function_does_not_count() {
        // The lambda and `to_thread` hold the definition, not the call inside it.
        let src = "x = asyncio.to_thread(lambda: 1)\nasync def f():\n    blocking()\n";
        assert_eq!(offloaded_calls(src), [false]);
    }
}
