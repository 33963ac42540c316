//! HTTP002 http-call-without-timeout: a payment HTTP call made with a library whose default is
//! to wait (requests, `urllib.request.urlopen`, aiohttp's five minutes) and no `timeout`.
use tree_sitter::Node;

use super::{HttpCall, Lib};
use crate::python::{Fields, kinds, syntax};
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
        && (super::calls_for_gates(s).iter().any(|call| {
            !call.constructor && (waits_forever(s, call) || untimed_handed_in(s, call))
        }) || may_leave_reads_unbounded(s.src()))
}

/// A call on a client handed in (`self._session.get(url)`), with no timeout of its own: taken to
/// be bounded by the session's, unless the change took away the one it passed (`dropped`).
fn untimed_handed_in<'a>(cx: &impl Local<'a>, call: &HttpCall<'_>) -> bool {
    call.handed_in
        && call.client_timeout
        && matches!(call.lib, Lib::Aiohttp | Lib::Requests)
        && syntax::keyword_arg(call.node, "timeout", cx.src()).is_none()
        && (!syntax::has_dict_splat(call.node)
            || kwargs_carry_no_timeout(cx, call.node)
            || splats_a_local_without_timeout(cx, call.node))
}

/// `**payload` where the function built `payload = {"params": form} if ... else {"data":
/// form}` before the call, with no timeout in it.
fn splats_a_local_without_timeout<'a>(cx: &impl Local<'a>, call: Node<'_>) -> bool {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return false;
    };
    let func = idx.enclosing(call, kinds::FUNCTION_DEFINITION);
    call.field("arguments")
        .map(crate::python::named_children)
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a.kind() == kinds::DICTIONARY_SPLAT)
        .all(|a| {
            a.named_child(0)
                .filter(|n| n.kind() == kinds::IDENTIFIER)
                .and_then(|n| {
                    idx.assigned_before(func, syntax::text(n, src), call.start_byte(), src)
                })
                .is_some_and(|v| !syntax::text(v, src).contains("timeout"))
        })
}

/// The line of the old version where the same call (`self._session.request(`) passed a
/// `timeout=`, when the new one passes none: the change dropped it, and the session handed in
/// is not known to bound the call, since the code counted on no default of it before.
fn timeout_dropped(cx: &Ctx<'_>, call: &HttpCall<'_>) -> Option<u32> {
    if !untimed_handed_in(cx, call) {
        return None;
    }
    let callee = syntax::callee(call.node, cx.src());
    // The old text first: the old tree is parsed only where it may hold the call.
    if !cx.versions.old.as_ref()?.text.contains(callee) {
        return None;
    }
    let old = cx.other.get()?;
    let (idx, src) = (old.index(), old.text());
    idx.all(kinds::CALL)
        .iter()
        .find(|c| {
            syntax::callee(**c, src) == callee && syntax::keyword_arg(**c, "timeout", src).is_some()
        })
        .map(|c| syntax::lines(*c).0)
}

/// Whether the text may build a timeout that bounds the connect only (`unbounded_reads`).
fn may_leave_reads_unbounded(src: &str) -> bool {
    src.contains("Timeout(None") || src.contains("read=None") || src.contains("ClientTimeout(")
}

fn check(cx: &mut Ctx<'_>) {
    if cx.facts.is_some_and(|f| f.is_test) {
        return;
    }
    for call in super::http_calls(cx) {
        if call.constructor {
            continue;
        }
        let dropped = (!waits_forever(cx, &call))
            .then(|| timeout_dropped(cx, &call))
            .flatten();
        if !waits_forever(cx, &call) && dropped.is_none() || !super::on_money_path(cx, call.node) {
            continue;
        }
        let src = cx.src();
        let callee = syntax::callee(call.node, src).to_string();
        let lines = syntax::lines(call.node);
        let given = syntax::keyword_arg(call.node, "timeout", src);
        let switched_off = given.is_some();
        // `timeout=timeout` of a parameter that defaults to `None`, and the call of the
        // function that leaves it there.
        let left =
            given.and_then(|t| Some((syntax::text(t, src), none_by_default(cx, call.node, t)?)));
        // A timeout built for the requests and handed to none (a refactor that lost it).
        let unused = (!switched_off)
            .then(|| super::kept_timeout(cx).cloned())
            .flatten();
        let note = match call.lib {
            _ if dropped.is_some() => "dropped",
            _ if left.is_some() => "none_param",
            _ if switched_off => "none",
            _ if unused.is_some() => "kept_unused",
            Lib::Aiohttp => "aiohttp",
            Lib::Urllib => "urllib",
            Lib::Urllib3 => "urllib3",
            _ => "requests",
        };
        let finding = cx
            .report_lines(&RULE, lines, callee.clone())
            .arg("call", callee)
            .note(note);
        if let Some((kept, line)) = unused {
            finding
                .arg("kept", kept.to_string())
                .arg("kept_line", line.to_string());
        }
        if let Some(line) = dropped {
            finding.arg("old_line", line.to_string());
        }
        if let Some((param, line)) = left {
            finding
                .arg("param", param.to_string())
                .arg("caller_line", line.to_string());
        }
        // A client module whose every endpoint lacks the timeout is one point, said once per
        // file: the fix is one helper or session setting, not a comment per call.
        finding.point = Some(note);
    }
    unbounded_reads(cx);
}

/// Calls on the money path handed a timeout that bounds the connect only:
/// `timeout=httpx.Timeout(None, connect=3.0)`, written there or as a module constant
/// (`GIFT_CARD_TIMEOUT = httpx.Timeout(None, connect=3.0)`). Read, write and pool then wait
/// for ever, whatever the call is (a wrapper of the client passes it on).
fn unbounded_reads(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    if !may_leave_reads_unbounded(src) {
        return;
    }
    let unbounded = |call: Node<'_>, value: Node<'_>| -> Option<String> {
        let made = match value.kind() {
            kinds::CALL => value,
            kinds::IDENTIFIER => {
                // A module constant, or a parameter's default (`timeout: httpx.Timeout =
                // FLUTTERWAVE_TIMEOUT` of the `__init__` that builds the client).
                let name = idx
                    .enclosing(call, kinds::FUNCTION_DEFINITION)
                    .and_then(|f| syntax::defaulted_parameter(f, syntax::text(value, src), src))
                    .and_then(|p| p.field("value"))
                    .filter(|v| v.kind() == kinds::IDENTIFIER)
                    .map_or_else(|| syntax::text(value, src), |v| syntax::text(v, src));
                crate::rules::retry::eval::module_constant(idx, name, src)
                    .filter(|v| v.kind() == kinds::CALL)?
            }
            // `self._charge_timeout`, set once in `__init__`.
            kinds::ATTRIBUTE => {
                let name = syntax::text(value, src);
                idx.all(kinds::ASSIGNMENT).iter().find_map(|a| {
                    let left = a.field("left")?;
                    (syntax::text(left, src) == name)
                        .then(|| a.field("right"))
                        .flatten()
                        .filter(|r| r.kind() == kinds::CALL)
                })?
            }
            _ => return None,
        };
        let callee = syntax::callee(made, src);
        // aiohttp's `ClientTimeout(connect=5)` handed to a request: it replaces the session's,
        // and with no `total` and no `sock_read` nothing bounds the wait for the answer.
        if super::lib_of_callee(callee, cx.facts) == Some(Lib::Aiohttp)
            && syntax::callee_name(made, src) == "ClientTimeout"
        {
            let bounded = |k: &str| {
                syntax::keyword_arg(made, k, src).is_some_and(|v| v.kind() != kinds::NONE)
            };
            return (syntax::positional_args(made).is_empty()
                && !bounded("total")
                && !bounded("sock_read"))
            .then(|| syntax::normalized(made, src));
        }
        if super::lib_of_callee(callee, cx.facts) != Some(Lib::Httpx)
            || syntax::callee_name(made, src) != "Timeout"
        {
            return None;
        }
        let read = syntax::keyword_arg(made, "read", src)
            .or_else(|| syntax::keyword_arg(made, "timeout", src))
            .or_else(|| syntax::positional_args(made).first().copied());
        read.is_some_and(|r| r.kind() == kinds::NONE)
            .then(|| syntax::normalized(made, src))
    };
    let found: Vec<(Node<'_>, String, String)> = idx
        .all(kinds::CALL)
        .iter()
        .filter_map(|&call| {
            // A client or a stream built to wait for events (`AsyncClient(timeout=
            // httpx.Timeout(5.0, read=None))` for a server's event stream) waits on purpose;
            // a client of a file that streams nothing sends its requests with it.
            match syntax::callee_name(call, src) {
                "stream" => return None,
                "Client" | "AsyncClient" if streams(src) => return None,
                _ => {}
            }
            let value = syntax::keyword_arg(call, "timeout", src)?;
            let made = unbounded(call, value)?;
            Some((call, syntax::normalized(value, src), made))
        })
        // A client is made once for every request of a payment module.
        .filter(|(call, _, _)| {
            super::on_money_path(cx, *call)
                || matches!(syntax::callee_name(*call, src), "Client" | "AsyncClient")
                    && cx.facts.is_some_and(|f| f.payment_module)
        })
        .collect();
    for (call, given, made) in found {
        let callee = syntax::callee(call, src).to_string();
        let finding = cx
            .report_lines(&RULE, syntax::lines(call), format!("{callee} {given}"))
            .arg("call", callee)
            .arg("timeout", given)
            .arg("made", made)
            .note("read_none");
        finding.point = Some("read_none");
    }
}

/// Whether the file reads a stream of events, for which a client waits without end on purpose.
fn streams(src: &str) -> bool {
    [
        ".stream(",
        "iter_lines",
        "iter_bytes",
        "httpx_sse",
        "connect_sse",
        "EventSource",
        "websocket",
    ]
    .iter()
    .any(|w| src.contains(w))
}

/// Whether a request's `**kwargs` are the function's own and never hold a timeout: the function
/// sets none in them, and every call of it in the file (one at least) passes none
/// (`self._request("POST", "/payouts", json=payload)` to `_request(self, method, path,
/// **kwargs)` sending `self.session.request(method, url, headers=headers, **kwargs)`).
fn kwargs_carry_no_timeout<'a>(cx: &impl Local<'a>, call: Node<'_>) -> bool {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return false;
    };
    let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
        return false;
    };
    let splats: Vec<&str> = call
        .field("arguments")
        .map(crate::python::named_children)
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a.kind() == kinds::DICTIONARY_SPLAT)
        .filter_map(|a| a.named_child(0))
        .map(|n| syntax::text(n, src))
        .collect();
    let [splat] = splats.as_slice() else {
        return false;
    };
    let own = func.field("parameters").is_some_and(|params| {
        crate::python::named_children(params).iter().any(|p| {
            p.kind() == kinds::DICTIONARY_SPLAT_PATTERN
                && p.named_child(0)
                    .is_some_and(|n| syntax::text(n, src) == *splat)
        })
    });
    let body = syntax::text(func, src);
    if !own
        || ["\"timeout\"", "'timeout'", "timeout="]
            .iter()
            .any(|w| body.contains(w))
    {
        return false;
    }
    let name = syntax::function_name(func, src);
    let mut calls = idx
        .all(kinds::CALL)
        .iter()
        .filter(|c| syntax::callee_name(**c, src) == name && !syntax::contains(func, **c))
        .peekable();
    calls.peek().is_some()
        && calls.all(|c| {
            syntax::keyword_arg(*c, "timeout", src).is_none() && !syntax::has_dict_splat(*c)
        })
}

/// `timeout=timeout` where `timeout` is a parameter of the function that defaults to `None`,
/// never set in it before the call, and a call of the function in the file leaves it out
/// (`self._post(path, body, key)` of `_post(..., *, timeout=None)`): the line of that call.
fn none_by_default<'a>(cx: &impl Local<'a>, call: Node<'_>, given: Node<'_>) -> Option<u32> {
    let (idx, src) = (cx.index()?, cx.src());
    if given.kind() != kinds::IDENTIFIER {
        return None;
    }
    let name = syntax::text(given, src);
    let func = idx.enclosing(call, kinds::FUNCTION_DEFINITION)?;
    let defaults_to_none = func.field("parameters").is_some_and(|params| {
        crate::python::named_children(params).iter().any(|p| {
            matches!(
                p.kind(),
                kinds::DEFAULT_PARAMETER | kinds::TYPED_DEFAULT_PARAMETER
            ) && syntax::parameter_name(*p, src) == name
                && p.field("value").is_some_and(|v| v.kind() == kinds::NONE)
        })
    });
    if !defaults_to_none
        || idx
            .assigned_before(Some(func), name, call.start_byte(), src)
            .is_some()
    {
        return None;
    }
    let at = crate::rules::pay::positional_parameters(func, src)
        .iter()
        .position(|p| *p == name);
    let function = syntax::function_name(func, src);
    idx.all(kinds::CALL)
        .iter()
        .find(|c| {
            syntax::callee_name(**c, src) == function
                && !syntax::contains(func, **c)
                && syntax::keyword_arg(**c, name, src).is_none()
                && !syntax::has_dict_splat(**c)
                && at.is_none_or(|at| syntax::positional_args(**c).len() <= at)
        })
        .map(|c| syntax::lines(*c).0)
}

/// Whether the call has no timeout of its own and its library's default does not bound it.
fn waits_forever<'a>(cx: &impl Local<'a>, call: &HttpCall<'_>) -> bool {
    let src = cx.src();
    match syntax::keyword_arg(call.node, "timeout", src) {
        // `timeout=None` switches the timeout off, the client's default included; so does a
        // parameter left to its `None` by a caller.
        Some(t) => return t.kind() == kinds::NONE || none_by_default(cx, call.node, t).is_some(),
        // Options passed on may carry one, unless the object keeps a timeout that nothing
        // reads, the options among them.
        None if syntax::has_dict_splat(call.node)
            && !kwargs_carry_no_timeout(cx, call.node)
            && super::kept_timeout(cx).is_none() =>
        {
            return false;
        }
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
