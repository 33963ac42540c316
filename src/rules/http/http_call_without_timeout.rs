//! HTTP002 http-call-without-timeout: a payment HTTP call made with a library whose default is
//! to wait (requests, `urllib.request.urlopen`, aiohttp's five minutes) and no `timeout`.
use super::{HttpCall, Lib};
use crate::python::{kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Local, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "HTTP002",
    doc: include_str!("../../../rules/http/HTTP002.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Outside tests, every finding is an HTTP call that waits forever; which of them are on the
/// money path is for the rule, with the rest of the change, to say.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && super::calls_for_gates(s)
            .iter()
            .any(|call| !call.constructor && waits_forever(s, call))
}

fn check(cx: &mut Ctx<'_>) {
    if cx.facts.is_some_and(|f| f.is_test) {
        return;
    }
    for call in super::http_calls(cx) {
        if call.constructor || !waits_forever(cx, &call) || !super::on_money_path(cx, call.node) {
            continue;
        }
        let src = cx.src();
        let callee = syntax::callee(call.node, src).to_string();
        let lines = syntax::lines(call.node);
        let switched_off = syntax::keyword_arg(call.node, "timeout", src).is_some();
        let note = match call.lib {
            _ if switched_off => "none",
            Lib::Aiohttp => "aiohttp",
            Lib::Urllib => "urllib",
            Lib::Urllib3 => "urllib3",
            _ => "requests",
        };
        let finding = cx
            .report_lines(&RULE, lines, callee.clone())
            .arg("call", callee)
            .note(note);
        // A client module whose every endpoint lacks the timeout is one point, said once per
        // file: the fix is one helper or session setting, not a comment per call.
        finding.point = Some(note);
    }
}

/// Whether the call has no timeout of its own and its library's default does not bound it.
fn waits_forever<'a>(cx: &impl Local<'a>, call: &HttpCall<'_>) -> bool {
    let src = cx.src();
    match syntax::keyword_arg(call.node, "timeout", src) {
        // `timeout=None` switches the timeout off, the client's default included.
        Some(t) => return t.kind() == kinds::NONE,
        None if syntax::has_dict_splat(call.node) => return false,
        None => {}
    }
    match call.lib {
        // httpx defaults to 5 seconds.
        Lib::Httpx => false,
        Lib::Requests => true,
        // `urlopen(url, data, timeout)`.
        Lib::Urllib => syntax::positional_args(call.node).len() < 3,
        Lib::Aiohttp | Lib::Urllib3 => !call.client_timeout,
    }
}
