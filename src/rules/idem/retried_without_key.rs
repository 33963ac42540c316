//! IDEM005 retried-payment-without-key: a request that moves money is sent again by a retry
//! (a retry loop, or a function run again whole) after a failure that does not tell whether the
//! gateway acted (a timeout, a dropped connection, any exception, a 5xx answer), and it carries
//! no idempotency key. When the first attempt reached the gateway and only its answer was lost,
//! the retry is a second payment. The retry may be the client's own: a session whose mounted
//! urllib3 `Retry` may repeat a POST, or aiohttp_retry's `RetryClient` (`retrying_transport`).
//!
//! Only what the call shows is judged: a request whose headers come from a helper, a `**`
//! splat or a client set up elsewhere in a file that speaks of idempotency may carry a key, and
//! is left alone; so is a retry only of errors raised before anything is sent
//! (`httpx.ConnectError`, `ConnectTimeout`). A payment made through a function of our own
//! inside the retry is not followed into that function.
//!
//! A gateway client's dispatcher is the exception to "what the call shows": a request whose
//! method is a parameter (`getattr(self.session, method)(...)`, `client.request(method, ...)`)
//! that a caller in the file fills with `"post"` is a POST, and in payment code it moves money.
//! When it passes on the function's own `**options`, what they hold is up to the API's callers:
//! with nothing in the file speaking of idempotency it is reported, as important.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::http::{self, HttpCall};
use crate::rules::retry::attempts::{self, Attempt};
use crate::rules::{Check, Ctx, Gate, Local, Rule, Scan, facts, pay};

pub(crate) static RULE: Rule = Rule {
    id: "IDEM005",
    doc: include_str!("../../../rules/idem/IDEM005.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Errors raised before a request leaves the client: retrying them cannot pay twice.
const BEFORE_SENDING: &[&str] = &[
    "ConnectError",
    "ConnectTimeout",
    "ConnectTimeoutError",
    "ConnectionRefusedError",
    "NewConnectionError",
    "ClientConnectorError",
    "PoolTimeout",
];

/// Every finding is a payment request, over HTTP or through a payment SDK the file imports, in
/// a function that neither is a test nor names an idempotency key.
fn gate(s: &Scan<'_>) -> bool {
    let sdk = || {
        s.facts
            .imports
            .iter()
            .any(|i| facts::PAYMENT_SDKS.contains(&i.target.split('.').next().unwrap_or_default()))
    };
    // Retried whole: a retrying decorator, or Celery's `self.retry`.
    let retried = || {
        s.facts.functions.iter().any(|f| {
            f.decorators
                .iter()
                .any(|d| attempts::retried_by_decorator(d).is_some())
                || f.callees.iter().any(|c| c == "retry")
        })
    };
    !s.facts.is_test
        && s.facts.functions.iter().any(|f| !f.mentions_idempotency)
        && (s.facts.functions.iter().any(|f| f.http || f.payment)
            || sdk()
            // Requests the facts do not classify (`getattr(session, method)(...)`).
            || http::calls_for_gates(s).iter().any(|c| !c.constructor)
            // A payment method handed, uncalled, to a retrying helper
            // (`self._with_retries(self._sdk.payments.capture, ...)`).
            || crate::rules::retry::has_retry_loop(s)
                && s.mentions(&["refund", "capture", "charge", "payout", "transfer", "sale"]))
        && (crate::rules::retry::has_retry_loop(s)
            || retried()
            || http::retrying_transport::mentioned(s.src()))
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    // As the gate: a test file's helpers retry a fake, not a gateway.
    if cx.facts.is_some_and(|f| f.is_test) {
        return;
    }
    let requests = http::http_calls(cx);
    let mut reported: Vec<usize> = Vec::new();
    // A job counted as retried for its attempt count is IDEM004's: what this rule says of
    // it names a retry the code does not show.
    let all_attempts = attempts::attempts(idx, src);
    for attempt in all_attempts.iter().filter(|a| !a.counted) {
        let Some(function) = crate::rules::idem::facts_of(cx, attempt.func) else {
            continue;
        };
        if function.mentions_idempotency || function.is_test {
            continue;
        }
        let own = idx.within(attempt.body, kinds::CALL).iter().filter(|c| {
            idx.enclosing(**c, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| f.id() == attempt.func.id())
        });
        for &call in own {
            if reported.contains(&call.id()) {
                continue;
            }
            let Some(post) = moves_money(cx, idx, &requests, call) else {
                if let Some(through) = unkeyed_helper_post(cx, idx, &requests, call)
                    && let Some(after) = retried_after(idx, attempt, call, src)
                {
                    reported.push(call.id());
                    report(cx, attempt, call, after, &Post::Literal, None)
                        .arg("helper", through.helper)
                        .arg("verb", through.verb)
                        .arg("key_param", through.key_param)
                        .note("through_helper");
                }
                continue;
            };
            let forwarded = match &post {
                Post::Literal => None,
                Post::FromCaller { param, .. } => {
                    if tells_methods_apart(idx, attempt.func, param, src) {
                        continue;
                    }
                    forwarded_options(call, attempt.func, src)
                }
            };
            if forwarded.is_some() && syntax::contains_lowercase(src, "idempot") {
                continue;
            }
            if carries_key(cx, idx, call, attempt.func, forwarded) != Some(false) {
                continue;
            }
            let Some(after) = retried_after(idx, attempt, call, src) else {
                continue;
            };
            reported.push(call.id());
            report(cx, attempt, call, after, &post, forwarded);
        }
    }
    keys_left_out(cx, idx, &all_attempts, &mut reported);
    handed_to_a_retrying_helper(cx, idx, &all_attempts, &mut reported);
    posts_through_a_retrying_dispatcher(cx, idx, &all_attempts, &mut reported);
    let transports = http::retrying_transport::posts_retried(cx);
    if transports.is_empty() {
        return;
    }
    for &call in idx.all(kinds::CALL) {
        if reported.contains(&call.id()) {
            continue;
        }
        let Some(transport) = transports.iter().find(|t| t.sends(call, src)) else {
            continue;
        };
        if unkeyed_payment(cx, idx, call) {
            report_transport(cx, transport, call, None);
            continue;
        }
        if let Some(payment) = unkeyed_dispatch(cx, idx, call) {
            report_transport(cx, transport, call, Some(payment));
            continue;
        }
        for caller in unkeyed_posts_through(cx, idx, call) {
            if !reported.contains(&caller.id()) {
                reported.push(caller.id());
                report_transport(cx, transport, caller, None);
            }
        }
    }
}

/// A retrying dispatcher of the file (`_request_with_retries(self, method, path, *, json)`)
/// whose loop hands its method on to the file's sender (`self._request(method, path, json=
/// json)`), and a payment of the file that calls it with `"POST"` and no key
/// (`fund_transfer` → `self._request_with_retries("POST", f".../transfers/{id}/payments",
/// ...)`): the payment is sent again after a failure that may have come after it was taken.
fn posts_through_a_retrying_dispatcher(
    cx: &mut Ctx<'_>,
    idx: &NodeIndex<'_>,
    all_attempts: &[Attempt<'_>],
    reported: &mut Vec<usize>,
) {
    let src = cx.src();
    for attempt in all_attempts.iter().filter(|a| a.loop_line.is_some()) {
        // A dispatcher that takes a key sends it for the callers that give one: those that do
        // not are `keys_left_out`'s.
        if crate::rules::idem::facts_of(cx, attempt.func).is_none_or(|f| f.mentions_idempotency) {
            continue;
        }
        let params = pay::parameters(attempt.func, src);
        let sends_on = idx.within(attempt.body, kinds::CALL).iter().find_map(|&c| {
            let first = syntax::positional_args(c).first().copied();
            let method = first
                .filter(|a| a.kind() == kinds::IDENTIFIER)
                .or(syntax::keyword_arg(c, "method", src))
                .map(|a| syntax::text(a, src))
                .filter(|m| params.iter().any(|p| p == m))?;
            let sender = idx.callee_name(c, src);
            let senders: Vec<Node<'_>> = idx
                .functions_named(sender, src)
                .filter(|f| crate::rules::idem::facts_of(cx, *f).is_some_and(|f| f.http))
                .collect();
            // `replay_safe = method in _REPLAY_SAFE_METHODS`: the sender or the loop tells the
            // methods apart, and what it raises for a POST is for it to say.
            let tells_methods = senders
                .iter()
                .chain([&attempt.func])
                .any(|f| tells_methods_apart(idx, *f, method, src));
            (!senders.is_empty() && !tells_methods && !reported.contains(&c.id()))
                .then(|| (c, method.to_string()))
        });
        let Some((call, param)) = sends_on else {
            continue;
        };
        let name = syntax::function_name(attempt.func, src);
        let bound = takes_self(attempt.func, src);
        let payment = idx.all(kinds::CALL).iter().copied().find(|&c| {
            if idx.callee_name(c, src) != name || syntax::receiver(c).is_some() != bound {
                return false;
            }
            let verb = syntax::positional_args(c)
                .first()
                .copied()
                .or(syntax::keyword_arg(c, "method", src));
            let Some(caller) = idx.enclosing(c, kinds::FUNCTION_DEFINITION) else {
                return false;
            };
            let facts = crate::rules::idem::facts_of(cx, caller);
            verb.and_then(|v| http::method_of(v, src)) == Some("post")
                && facts.is_some_and(|f| !f.is_test && !f.mentions_idempotency)
                && !names_a_dedup_handle(syntax::text(caller, src))
                && !c
                    .field("arguments")
                    .is_some_and(|a| crate::rules::idem::is_idempotency_text(syntax::text(a, src)))
                && (facts.is_some_and(|f| cx.vocab.is_payment_operation(&f.name))
                    || http::url_names_payment(cx, c))
        });
        let Some(caller) = payment else {
            continue;
        };
        let Some(after) = retried_after(idx, attempt, call, src) else {
            continue;
        };
        let verb = syntax::positional_args(caller)
            .first()
            .map(|v| syntax::text(*v, src).to_string())
            .unwrap_or_default();
        reported.push(call.id());
        let post = Post::FromCaller {
            caller,
            param,
            verb,
        };
        report(cx, attempt, call, after, &post, None);
    }
}

/// Whether `func` compares its method parameter (`method in _REPLAY_SAFE_METHODS`, `if
/// method.upper() != "GET": raise`): it tells the methods apart, and whether it sends a POST
/// again is for that test to say.
fn tells_methods_apart(idx: &NodeIndex<'_>, func: Node<'_>, method: &str, src: &str) -> bool {
    idx.within(func, kinds::COMPARISON_OPERATOR)
        .iter()
        .any(|cmp| {
            cmp.named_child(0).is_some_and(|l| {
                let left = syntax::text(l, src);
                left == method || left.starts_with(&format!("{method}."))
            })
        })
}

/// Whether code puts a reference the provider dedups on in what it sends, as a quoted key in
/// any case (`"extRefundId": ext_refund_id`): PayU refuses a second refund of the same
/// `extRefundId`. A parameter of that name proves nothing sent.
fn names_a_dedup_handle(code: &str) -> bool {
    code.split(['"', '\''])
        .skip(1)
        .step_by(2)
        .filter(|w| w.len() > 4 && w.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .any(|w| {
            crate::rules::idem::key_made_per_attempt::dedup_handle(&syntax::name_words(w).join("_"))
        })
}

/// A provider's payment method handed, uncalled, to a helper of the file whose retry loop
/// calls what it is handed (`self._read("transaction.refund", self._gateway.transaction.refund,
/// transaction_id, options)`, where `_read` runs `self._call(operation, method, *args)` again
/// after `GatewayUnavailable`): the payment is made again after a failure that may have come
/// after the gateway took it, with no key.
fn handed_to_a_retrying_helper(
    cx: &mut Ctx<'_>,
    idx: &NodeIndex<'_>,
    all_attempts: &[Attempt<'_>],
    reported: &mut Vec<usize>,
) {
    let src = cx.src();
    for attempt in all_attempts.iter().filter(|a| a.loop_line.is_some()) {
        let params = pay::parameters(attempt.func, src);
        // The call of the loop that runs the parameter: itself (`method(*args)`) or handed on
        // (`self._call(operation, method, *args)`), and the parameter's place.
        let runs: Vec<(Node<'_>, usize)> = idx
            .within(attempt.body, kinds::CALL)
            .iter()
            .flat_map(|&c| {
                let callee = syntax::callee(c, src);
                let args = syntax::positional_args(c);
                params
                    .iter()
                    .enumerate()
                    .filter(move |(_, p)| {
                        **p == callee
                            || args.iter().any(|a| {
                                a.kind() == kinds::IDENTIFIER && syntax::text(*a, src) == p.as_str()
                            })
                    })
                    .map(move |(place, _)| (c, place))
            })
            .collect();
        if runs.is_empty() {
            continue;
        }
        let helper = syntax::function_name(attempt.func, src);
        let loop_line = attempt.loop_line.unwrap_or_default();
        for &call in idx.all(kinds::CALL) {
            if idx.callee_name(call, src) != helper
                || reported.contains(&call.id())
                || syntax::code_names_idempotency(syntax::text(call, src))
            {
                continue;
            }
            let args = syntax::positional_args(call);
            let Some((handed, inner)) = runs.iter().find_map(|&(inner, at)| {
                let handed = *args.get(at)?;
                let last = facts::last_name(syntax::text(handed, src));
                // `payout.wise_transfer_id` handed to `client.fund_transfer(transfer_id)` is
                // the payment's data, not an operation to run.
                let data = syntax::name_words(last).last().is_some_and(|w| {
                    matches!(
                        w.as_str(),
                        "id" | "ids" | "key" | "ref" | "reference" | "uuid" | "token" | "amount"
                    )
                });
                (handed.kind() == kinds::ATTRIBUTE
                    && !data
                    && (cx.vocab.is_payment_operation(last) || last == "sale"))
                    .then_some((handed, inner))
            }) else {
                continue;
            };
            let Some(after) = retried_after(idx, attempt, inner, src) else {
                continue;
            };
            let Some(caller) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
                continue;
            };
            reported.push(call.id());
            let caught = match &after {
                After::Caught(ty) => ty.clone(),
                After::Any => "any exception".to_string(),
                After::Result => "a failed answer".to_string(),
            };
            let function = facts::qualname(caller, idx, src);
            let shown = format!("{}(...)", syntax::normalized(handed, src));
            cx.report(&RULE, call)
                .arg("call", shown)
                .arg("function", function)
                .arg("helper", helper.to_string())
                .arg("loop_line", loop_line.to_string())
                .arg("caught", caught)
                .note("handed");
        }
    }
}

/// Calls of a retrying helper of this file that sends a key only when given one (its key
/// parameter defaults to `None`), made by a payment that gives none: `refund()` calling
/// `self._send_with_retry(path, payload)` where `_send_with_retry(self, path, payload,
/// request_ref=None)` loops on timeouts. Every attempt of that refund goes without a key.
fn keys_left_out(
    cx: &mut Ctx<'_>,
    idx: &NodeIndex<'_>,
    all_attempts: &[Attempt<'_>],
    reported: &mut Vec<usize>,
) {
    let src = cx.src();
    for attempt in all_attempts {
        let (Some(loop_line), helper) = (attempt.loop_line, attempt.func) else {
            continue;
        };
        let Some((key_param, inner)) = optional_key(idx, attempt, src) else {
            continue;
        };
        if retries_only_keyed(idx, helper, key_param, src) {
            continue;
        }
        let Some(After::Caught(caught)) = retried_after(idx, attempt, inner, src) else {
            continue;
        };
        let name = syntax::function_name(helper, src);
        let bound = takes_self(helper, src);
        for &call in idx.all(kinds::CALL) {
            if reported.contains(&call.id())
                || idx.callee_name(call, src) != name
                || syntax::receiver(call).is_some() != bound
                || syntax::contains(helper, call)
                || syntax::has_dict_splat(call)
            {
                continue;
            }
            let given = pay::argument_for(call, helper, key_param, true, src)
                .is_some_and(|v| v.kind() != kinds::NONE);
            // `self._request("GET", ...)`: a read sent again moves no money.
            let read = syntax::positional_args(call)
                .into_iter()
                .chain(syntax::keyword_args(call, src).into_iter().map(|(_, v)| v))
                .filter_map(|a| syntax::string_value(a, src))
                .any(|v| matches!(v, "GET" | "get" | "HEAD" | "head" | "OPTIONS" | "options"));
            // `self._call("refund.list", stripe.Refund.list, charge=charge_id)`: the SDK's read
            // handed to the helper, in a function named for one.
            let sdk_read = syntax::positional_args(call).into_iter().any(|a| {
                a.kind() == kinds::ATTRIBUTE
                    && syntax::named_for_a_read(facts::last_name(syntax::text(a, src)))
            });
            let Some(caller) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
                continue;
            };
            if read
                || sdk_read && syntax::named_for_a_read(syntax::function_name(caller, src))
                || prepares_only(syntax::function_name(caller, src))
            {
                continue;
            }
            let paying = cx
                .vocab
                .is_payment_operation(syntax::function_name(caller, src))
                || money_in_sight(cx, call);
            if given || !paying {
                continue;
            }
            reported.push(call.id());
            let callee = syntax::callee(call, src);
            cx.report(&RULE, call)
                .arg("call", format!("{callee}(...)"))
                .arg("function", facts::qualname(caller, idx, src))
                .arg("helper", name.to_string())
                .arg("key_param", key_param.to_string())
                .arg("loop_line", loop_line.to_string())
                .arg("caught", caught.clone())
                .note("key_left_out");
        }
    }
}

/// A function named for making what a payment is later made against, not for moving money
/// (`create_order`, `create_payment_link`, `create_quote`): made twice, nothing is paid twice.
fn prepares_only(name: &str) -> bool {
    let words = syntax::name_words(name);
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    has(&["order", "link", "quote", "session", "intent", "mandate"])
        && !has(&[
            "charge", "capture", "refund", "payout", "transfer", "debit", "pay", "collect",
        ])
}

/// The helper's key parameter that defaults to `None` and that its body uses, with the call its
/// loop sends again: named as a key, or as a reference in a helper that speaks of idempotency.
fn optional_key<'s, 't>(
    idx: &NodeIndex<'t>,
    attempt: &Attempt<'t>,
    src: &'s str,
) -> Option<(&'s str, Node<'t>)> {
    let helper = attempt.func;
    let speaks = || syntax::code_names_idempotency(syntax::text(helper, src));
    let params = helper.field("parameters")?;
    crate::python::named_children(params)
        .into_iter()
        .map(|p| syntax::parameter_name(p, src))
        .filter(|p| {
            syntax::defaulted_parameter(helper, p, src)
                .and_then(|d| d.field("value"))
                .is_some_and(|v| v.kind() == kinds::NONE)
        })
        .filter(|p| {
            let words = syntax::name_words(p);
            crate::rules::idem::is_idempotency_text(p)
                || words.iter().any(|w| w == "key")
                || words.iter().any(|w| w == "ref" || w == "reference") && speaks()
        })
        // `request_ref = request_ref or uuid4().hex` before the loop: one key for all attempts.
        .filter(|p| {
            !idx.within(helper, kinds::ASSIGNMENT)
                .iter()
                .any(|a| a.field("left").is_some_and(|l| syntax::text(l, src) == *p))
        })
        .find(|p| {
            helper.field("body").is_some_and(|b| {
                syntax::text(b, src)
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .any(|w| w == *p)
            })
        })
        .and_then(|p| {
            // The request the loop sends again: the first call a going-round `except` covers.
            let inner = idx
                .within(attempt.body, kinds::CALL)
                .iter()
                .copied()
                .find(|c| matches!(retried_after(idx, attempt, *c, src), Some(After::Caught(_))))?;
            // A read sent again moves no money.
            let read = matches!(syntax::callee_name(inner, src), "get" | "head" | "options");
            (!read).then_some((p, inner))
        })
}

/// The calls in this file of a dispatcher (a function whose request takes its method from a
/// parameter) that pass it `"POST"` with money in sight and no key: a gateway client's
/// `self._request("POST", "/refunds", json=...)` beside `self._request("POST", "/payments",
/// idempotency_key=key)`. A dispatcher that sends a key of its own on every request (it speaks of
/// idempotency other than under a test of its key parameter) leaves no caller unkeyed.
fn unkeyed_posts_through<'t>(
    cx: &Ctx<'t>,
    idx: &NodeIndex<'t>,
    request: Node<'t>,
) -> Vec<Node<'t>> {
    let src = cx.src();
    let verb = match http::getattr_verb(request, src) {
        Some((_, verb)) => Some(verb),
        None => http::method_arg(request, src),
    };
    let (Some(verb), Some(func)) = (verb, idx.enclosing(request, kinds::FUNCTION_DEFINITION))
    else {
        return Vec::new();
    };
    let params = pay::parameters(func, src);
    let method = syntax::text(verb, src);
    if verb.kind() != kinds::IDENTIFIER || !params.iter().any(|p| p == method) {
        return Vec::new();
    }
    let key_param = params
        .iter()
        .find(|p| crate::rules::idem::is_idempotency_text(p));
    let mentions = crate::rules::idem::facts_of(cx, func).is_some_and(|f| f.mentions_idempotency);
    if mentions && !key_param.is_some_and(|p| keyed_only_when_given(idx, func, p, src)) {
        return Vec::new();
    }
    let name = syntax::function_name(func, src);
    // `parameters` leaves `self` out, as the method's callers do.
    let bound = takes_self(func, src);
    let passed = |c: Node<'t>, p: &str| pay::argument_for(c, func, p, true, src);
    let payment_module = cx.facts.is_some_and(|f| f.payment_module);
    idx.all(kinds::CALL)
        .iter()
        .copied()
        .filter(|c| c.id() != request.id() && idx.callee_name(*c, src) == name)
        .filter(|c| syntax::receiver(*c).is_some() == bound)
        .filter(|c| passed(*c, method).and_then(|a| http::method_of(a, src)) == Some("post"))
        .filter(|c| {
            let given = key_param
                .and_then(|p| passed(*c, p))
                .is_some_and(|v| v.kind() != kinds::NONE);
            let Some(caller) = idx.enclosing(*c, kinds::FUNCTION_DEFINITION) else {
                return false;
            };
            // The dispatcher is the client here: what it sends beyond the caller's arguments
            // is read above, so only the call's own arguments can still carry a key.
            let sends_key = syntax::has_dict_splat(*c)
                || syntax::keyword_args(*c, src).iter().any(|(name, value)| {
                    *name == "headers" && carries_key(cx, idx, *c, caller, None) != Some(false)
                        || crate::rules::idem::is_idempotency_text(name)
                        || crate::rules::idem::is_idempotency_text(syntax::text(*value, src))
                });
            !given && !sends_key && (payment_module || money_in_sight(cx, *c))
        })
        .collect()
}

/// Whether a dispatcher puts its key parameter in the request only under a test of it (`if
/// idempotency_key: headers["Idempotency-Key"] = idempotency_key`): a caller that passes none
/// sends none.
fn keyed_only_when_given(idx: &NodeIndex<'_>, func: Node<'_>, param: &str, src: &str) -> bool {
    let words = |n: Node<'_>| {
        syntax::text(n, src)
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .any(|w| w == param)
    };
    let count = |n: Node<'_>| {
        syntax::text(n, src)
            .to_ascii_lowercase()
            .matches("idempot")
            .count()
    };
    let tested: Vec<Node<'_>> = idx
        .within(func, kinds::IF_STATEMENT)
        .iter()
        .copied()
        .filter(|stmt| {
            stmt.field("condition").is_some_and(words)
                && stmt.field("consequence").is_some_and(|b| count(b) > 0)
        })
        .collect();
    // Outside that `if`, the body does not speak of idempotency: the key is only passed on.
    !tested.is_empty()
        && func
            .field("body")
            .is_some_and(|body| count(body) == tested.iter().map(|t| count(*t)).sum::<usize>())
}

/// A payment POST in a function that neither is a test nor speaks of idempotency, with no key.
fn unkeyed_payment(cx: &Ctx<'_>, idx: &NodeIndex<'_>, call: Node<'_>) -> bool {
    let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
        return false;
    };
    is_post(call, cx.src())
        && crate::rules::idem::facts_of(cx, func)
            .is_some_and(|f| !f.is_test && !f.mentions_idempotency)
        && money_in_sight(cx, call)
        && carries_key(cx, idx, call, func, None) == Some(false)
}

/// A POST of a file's own dispatcher (`_post(root, body)`, which names no money) that the
/// file's payment operations send through, one or two calls up (`charge_customer_profile` →
/// `_transaction` → `_post`), where none of them names a key: the payment it reaches.
fn unkeyed_dispatch(cx: &Ctx<'_>, idx: &NodeIndex<'_>, call: Node<'_>) -> Option<String> {
    let func = idx.enclosing(call, kinds::FUNCTION_DEFINITION)?;
    let facts = crate::rules::idem::facts_of(cx, func)?;
    if !is_post(call, cx.src())
        || facts.is_test
        || facts.mentions_idempotency
        || carries_key(cx, idx, call, func, None) != Some(false)
    {
        return None;
    }
    let callers = crate::rules::idem::callers_of(cx, cx.facts?, facts, 2);
    if callers.iter().any(|(c, _)| c.mentions_idempotency) {
        return None;
    }
    callers
        .iter()
        .find(|(c, _)| !c.is_test && (c.payment || cx.vocab.is_payment_operation(&c.name)))
        .map(|(c, _)| c.name.clone())
}

fn report_transport(
    cx: &mut Ctx<'_>,
    transport: &http::retrying_transport::RetryingTransport,
    call: Node<'_>,
    payment: Option<String>,
) {
    let src = cx.src();
    let callee = syntax::callee(call, src).to_string();
    let qualname = crate::rules::idem::function_facts(cx, call)
        .map(|f| f.qualname.clone())
        .unwrap_or_default();
    let reference = dedup_reference(call, src);
    let finding = cx
        .report(&RULE, call)
        .arg("call", format!("{callee}(...)"))
        .arg("function", qualname)
        .arg("retried_by", transport.what.clone())
        .arg("retry_line", transport.line.to_string())
        .note("transport");
    if let Some(payment) = payment {
        finding.arg("payment", payment).note("dispatched");
    }
    if let Some(reference) = reference {
        finding.arg("reference", reference).note("reference");
    }
}

/// Why the call is sent again.
enum After {
    /// An `except` that goes round catches this type (as written; `Exception` for a bare one).
    Caught(String),
    /// The retrying decorator names no type: it retries every exception.
    Any,
    /// No `try` around the call in the loop: the loop goes round on what the call returned.
    Result,
}

fn report<'c>(
    cx: &'c mut Ctx<'_>,
    attempt: &Attempt<'_>,
    call: Node<'_>,
    after: After,
    post: &Post<'_>,
    forwarded: Option<&str>,
) -> &'c mut crate::review::Finding {
    let src = cx.src();
    let callee = syntax::callee(call, src).to_string();
    let qualname = cx
        .index()
        .map(|idx| facts::qualname(attempt.func, idx, src))
        .unwrap_or_default();
    let reference = dedup_reference(call, src);
    let finding = cx
        .report(&RULE, call)
        .arg("call", format!("{callee}(...)"))
        .arg("function", qualname);
    match (attempt.loop_line, &attempt.retried_by, after) {
        (Some(line), _, After::Caught(ty)) => {
            finding
                .arg("loop_line", line.to_string())
                .arg("caught", ty)
                .note("loop_caught");
        }
        (Some(line), _, _) => {
            finding
                .arg("loop_line", line.to_string())
                .note("loop_result");
        }
        (None, Some(by), After::Caught(ty)) => {
            finding
                .arg("retried_by", by.clone())
                .arg("caught", ty)
                .note("retried_on");
        }
        (None, Some(by), _) => {
            finding.arg("retried_by", by.clone()).note("retried_any");
        }
        (None, None, _) => {}
    }
    if let Post::FromCaller {
        caller,
        param,
        verb,
    } = post
    {
        finding
            .arg("param", param.clone())
            .arg("verb", verb.clone())
            .arg("caller", syntax::callee(*caller, src).to_string())
            .arg("caller_line", (caller.start_position().row + 1).to_string())
            .note("method_from_caller");
    }
    if let Some(splat) = forwarded {
        // A key could still come from every caller of the API: the file shows none.
        finding
            .arg("splat", splat.to_string())
            .note("forwarded")
            .severity(crate::review::Severity::Important);
    }
    if let Some(reference) = reference {
        finding.arg("reference", reference).note("reference");
    }
    finding
}

/// A POST sent through a request helper of the file that takes an idempotency key the call
/// leaves out.
struct ThroughHelper {
    helper: String,
    /// The method as the call writes it (`"POST"`).
    verb: String,
    /// The helper's parameter for the key (`idempotency_key`).
    key_param: String,
}

/// `self._request("POST", "/v1/transfers", json={...})` where `_request(self, method, path, *,
/// json=None, idempotency_key=None)` of the file sends `method` over HTTP and sets the key only
/// when it is given: a POST of money that carries no key. Only where the call shows it all: the
/// helper's request takes its method from a parameter the call fills with `"POST"`, and the call
/// passes neither the key nor a `**` splat. Money by what the call passes, its URL, or the
/// function that calls it.
fn unkeyed_helper_post(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    requests: &[HttpCall<'_>],
    call: Node<'_>,
) -> Option<ThroughHelper> {
    let src = cx.src();
    let parts = cx.call_text(call);
    let on_self = match parts.receiver {
        None => false,
        Some("self" | "cls") => true,
        Some(_) => return None,
    };
    if syntax::has_dict_splat(call) {
        return None;
    }
    let class_of = |n: Node<'_>| idx.enclosing(n, kinds::CLASS_DEFINITION).map(|c| c.id());
    let helper = idx
        .all(kinds::FUNCTION_DEFINITION)
        .iter()
        .copied()
        .find(|f| {
            syntax::function_name(*f, src) == parts.name
                && if on_self {
                    class_of(*f).is_some() && class_of(*f) == class_of(call)
                } else {
                    class_of(*f).is_none()
                }
        })?;
    let request = requests
        .iter()
        .find(|r| !r.constructor && syntax::contains(helper, r.node))?;
    let method_param = http::method_arg(request.node, src)
        .filter(|m| m.kind() == kinds::IDENTIFIER)
        .map(|m| syntax::text(m, src))?;
    let positional = pay::positional_parameters(helper, src);
    let args = syntax::positional_args(call);
    let passed = |name: &str| {
        syntax::keyword_arg(call, name, src).or_else(|| {
            let at = positional.iter().position(|p| *p == name)?;
            args.get(at).copied()
        })
    };
    let verb = passed(method_param)?;
    if http::method_of(verb, src) != Some("post") {
        return None;
    }
    let key_param = pay::parameters(helper, src)
        .into_iter()
        .find(|p| crate::rules::idem::is_idempotency_text(p) && !p.contains("lock"))?;
    if passed(&key_param).is_some() || retries_only_keyed(idx, helper, &key_param, src) {
        return None;
    }
    let money = pay::passes_money(call, src, cx.vocab)
        || crate::rules::idem::function_facts(cx, call)
            .is_some_and(|f| f.payment || cx.vocab.is_payment_operation(&f.name))
        || cx.facts.is_some_and(|f| f.payment_module);
    money.then(|| ThroughHelper {
        helper: facts::qualname(helper, idx, src),
        verb: syntax::text(verb, src).to_string(),
        key_param,
    })
}

/// `attempts = self.max_attempts if idempotency_key else 1`: the helper sends a request with
/// no key once, and retries only the keyed ones.
fn retries_only_keyed(idx: &NodeIndex<'_>, helper: Node<'_>, key_param: &str, src: &str) -> bool {
    idx.within(helper, kinds::CONDITIONAL_EXPRESSION)
        .iter()
        .any(|c| {
            let parts = crate::python::named_children(*c);
            let [yes, test, no] = parts.as_slice() else {
                return false;
            };
            let has_key = |text: &str| {
                text.split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
                    .any(|w| w == key_param)
            };
            // `retry_safe = method == "GET" or request_id is not None`, then `attempts =
            // self.max_attempts if retry_safe else 1`: the test read through its name.
            let names_key = has_key(syntax::text(*test, src))
                || test.kind() == kinds::IDENTIFIER
                    && idx
                        .assigned_before(
                            Some(helper),
                            syntax::text(*test, src),
                            c.start_byte(),
                            src,
                        )
                        .is_some_and(|v| has_key(syntax::text(v, src)));
            let once = |n: Node<'_>| syntax::text(n, src) == "1";
            names_key && (once(*no) || once(*yes))
        })
}

/// How a request is known to be a POST.
enum Post<'t> {
    /// The call says so.
    Literal,
    /// Its method is the parameter `param` of its function, and `caller`, a call of that
    /// function in this file, passes `"post"` for it (`getattr(self.session, method)(...)` in
    /// `request`, and `self.request("post", path)` in `post`).
    FromCaller {
        caller: Node<'t>,
        param: String,
        /// The method as the caller writes it (`"POST"`).
        verb: String,
    },
}

/// Whether the request is a POST: written at the call, or passed in by a caller in this file
/// (not by another request: `requests.request("POST", url)` calls no function of ours).
fn sends_post<'t>(
    idx: &NodeIndex<'t>,
    is_request: &dyn Fn(Node<'_>) -> bool,
    call: Node<'t>,
    src: &str,
) -> Option<Post<'t>> {
    if is_post(call, src) {
        return Some(Post::Literal);
    }
    let verb = match http::getattr_verb(call, src) {
        Some((_, verb)) if http::method_of(verb, src) == Some("post") => {
            return Some(Post::Literal);
        }
        Some((_, verb)) => verb,
        None => http::method_arg(call, src)?,
    };
    if verb.kind() != kinds::IDENTIFIER {
        return None;
    }
    let param = syntax::text(verb, src);
    let func = idx.enclosing(call, kinds::FUNCTION_DEFINITION)?;
    if !pay::parameters(func, src).iter().any(|p| p == param) {
        return None;
    }
    let name = syntax::function_name(func, src);
    let bound = takes_self(func, src);
    // A method's callers reach it through a receiver (`self.request("post", ...)`), and pass
    // what follows `self`; a function's call it by name. Any other call passes it by keyword.
    let passed = |c: Node<'t>| {
        let by_position = syntax::receiver(c).is_some() == bound;
        pay::argument_for(c, func, param, by_position, src)
    };
    idx.all(kinds::CALL)
        .iter()
        .copied()
        .filter(|c| {
            idx.callee_name(*c, src) == name && !is_request(*c) && sent_again_unkeyed(idx, *c, src)
        })
        .find(|c| passed(*c).and_then(|a| http::method_of(a, src)) == Some("post"))
        .and_then(|caller| {
            Some(Post::FromCaller {
                caller,
                param: param.to_string(),
                verb: syntax::text(passed(caller)?, src).to_string(),
            })
        })
}

/// The provider's own key of a request, carried in its body, as letters alone: Wise's
/// `customerTransactionId`, PayPal's `sender_batch_id`, Revolut's `request_id`.
const BODY_KEYS: &[&str] = &[
    "customertransactionid",
    "clienttransactionid",
    "senderbatchid",
    "uniquereference",
    "requestid",
];

/// Whether a caller's POST through the request helper is one its retry sends again with
/// nothing to tell the attempts apart: not one that turns the retry off (`retry=False`,
/// `max_attempts=1`), nor one whose body carries the provider's own key of the request
/// (Wise's `customerTransactionId`, PayPal's `sender_batch_id`), nor a quote, which moves
/// nothing.
fn sent_again_unkeyed(idx: &NodeIndex<'_>, caller: Node<'_>, src: &str) -> bool {
    let retry_off = syntax::keyword_args(caller, src).into_iter().any(|(k, v)| {
        let v = syntax::text(v, src);
        k.contains("retr") && matches!(v, "False" | "0" | "None")
            || k.contains("attempts") && v == "1"
    });
    let args = caller
        .field("arguments")
        .map(|a| syntax::text(a, src))
        .unwrap_or_default();
    let flat: String = args
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let keyed =
        crate::rules::idem::is_idempotency_text(args) || BODY_KEYS.iter().any(|k| flat.contains(k));
    let quote = idx
        .enclosing(caller, kinds::FUNCTION_DEFINITION)
        .is_some_and(|f| {
            syntax::name_words(syntax::function_name(f, src))
                .iter()
                .any(|w| matches!(w.as_str(), "quote" | "quotes" | "estimate" | "preview"))
        });
    !(retry_off || keyed || quote)
}

/// The name of the function's own `**options` when the request passes it on (`**options` and
/// nothing else unpacked): what the request carries beyond its own arguments is then what the
/// function's callers give it.
fn forwarded_options<'s>(call: Node<'_>, func: Node<'_>, src: &'s str) -> Option<&'s str> {
    let own = crate::python::named_children(func.field("parameters")?)
        .into_iter()
        .find(|p| p.kind() == kinds::DICTIONARY_SPLAT_PATTERN)
        .map(|p| syntax::parameter_name(p, src))?;
    let splats: Vec<Node<'_>> = crate::python::named_children(call.field("arguments")?)
        .into_iter()
        .filter(|a| a.kind() == kinds::DICTIONARY_SPLAT)
        .collect();
    let passes_own = |s: &Node<'_>| {
        s.named_child(0)
            .is_some_and(|n| n.kind() == kinds::IDENTIFIER && syntax::text(n, src) == own)
    };
    (!splats.is_empty() && splats.iter().all(passes_own)).then_some(own)
}

/// A request that moves money: a POST over HTTP with money in it, to a payment URL, or from a
/// function that pays; or a payment call of a gateway's SDK. A request whose method its callers
/// choose moves money when a caller that sends it as a POST shows money, or the file is payment
/// code (a gateway's client dispatching every call of its API).
fn moves_money<'t>(
    cx: &Ctx<'t>,
    idx: &NodeIndex<'t>,
    requests: &[HttpCall<'_>],
    call: Node<'t>,
) -> Option<Post<'t>> {
    let src = cx.src();
    let request = requests.iter().find(|r| r.node.id() == call.id());
    if request.is_some_and(|r| r.constructor) {
        return None;
    }
    if request.is_some() || http::injected_client(cx, call).is_some() {
        let is_request = |c: Node<'_>| {
            requests.iter().any(|r| r.node.id() == c.id()) || http::injected_client(cx, c).is_some()
        };
        return match sends_post(idx, &is_request, call, src)? {
            Post::Literal => money_in_sight(cx, call).then_some(Post::Literal),
            post @ Post::FromCaller { caller, .. } => (money_in_sight(cx, call)
                || money_in_sight(cx, caller)
                || cx.facts.is_some_and(|f| f.payment_module))
            .then_some(post),
        };
    }
    (pay::is_payment_call(call, src, cx.vocab) && from_sdk(cx, call)).then_some(Post::Literal)
}

/// Money in the request, a payment URL, or a calling function that pays.
fn money_in_sight(cx: &Ctx<'_>, call: Node<'_>) -> bool {
    let src = cx.src();
    pay::passes_money(call, src, cx.vocab)
        || http::url_names_payment(cx, call)
        || crate::rules::idem::function_facts(cx, call)
            .is_some_and(|f| f.payment || cx.vocab.is_payment_operation(&f.name))
}

/// `client.post(...)`, `session.request("POST", ...)`, `request(method="POST", ...)`.
fn is_post(call: Node<'_>, src: &str) -> bool {
    syntax::callee_name(call, src) == "post"
        || http::method_arg(call, src).and_then(|m| http::method_of(m, src)) == Some("post")
}

/// Whether a function's first parameter is `self` or `cls`: its callers reach it through a
/// receiver and pass what follows.
fn takes_self(func: Node<'_>, src: &str) -> bool {
    func.field("parameters")
        .map(crate::python::named_children)
        .and_then(|ps| ps.into_iter().find(|p| p.kind() != kinds::COMMENT))
        .is_some_and(|p| matches!(syntax::parameter_name(p, src), "self" | "cls"))
}

fn from_sdk(cx: &Ctx<'_>, call: Node<'_>) -> bool {
    let callee = syntax::callee(call, cx.src());
    cx.facts.is_some_and(|f| f.calls_payment_sdk(callee))
}

/// Whether the request carries an idempotency key: `Some(false)` only when everything it sends
/// is in sight and none of it names one; `forwarded`, the function's own `**options` passed on
/// (`forwarded_options`), counts as in sight.
fn carries_key(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    call: Node<'_>,
    func: Node<'_>,
    forwarded: Option<&str>,
) -> Option<bool> {
    let src = cx.src();
    let names_key = |n: Node<'_>| crate::rules::idem::is_idempotency_text(syntax::text(n, src));
    // Its arguments, not the comments between them: `# TODO: idempotency key` sends nothing.
    let keyword_args = syntax::keyword_args(call, src);
    if keyword_args
        .iter()
        .any(|(name, value)| crate::rules::idem::is_idempotency_text(name) || names_key(*value))
        || syntax::positional_args(call).into_iter().any(names_key)
    {
        return Some(true);
    }
    if forwarded.is_none() && syntax::has_dict_splat(call) {
        return None;
    }
    // `json=body` after `body = {"request_id": request_id, ...}`: the key is in the body.
    let bodies: Vec<Node<'_>> = keyword_args
        .iter()
        .filter(|(name, _)| matches!(*name, "json" | "data"))
        .map(|&(_, body)| body)
        .collect();
    let dedups_on_reference = provider_dedups_on_reference(src);
    let keys_the_body = |key: &str| {
        let flat: String = key
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .map(|c| c.to_ascii_lowercase())
            .collect();
        crate::rules::idem::is_idempotency_text(key)
            || BODY_KEYS.contains(&flat.as_str())
            || dedups_on_reference && super::key_made_per_attempt::dedup_handle(key)
    };
    let body_keyed = bodies
        .iter()
        .filter_map(|&body| match body.kind() {
            kinds::IDENTIFIER => {
                idx.assigned_before(Some(func), syntax::text(body, src), call.start_byte(), src)
            }
            _ => Some(body),
        })
        .filter(|b| b.kind() == kinds::DICTIONARY)
        // PayPal's `{"sender_batch_header": {"sender_batch_id": ...}}`: a key one level down.
        .flat_map(|b| syntax::descendants(b, &[kinds::PAIR]))
        .filter_map(|p| p.field("key").and_then(|k| syntax::string_value(k, src)))
        .any(keys_the_body)
        // A body handed in whole (`def _post_transfer(self, payload)`) whose reference the
        // function reads (`reference = payload["reference"]`): it is sent with the body.
        || bodies.iter().any(|&body| {
            body.kind() == kinds::IDENTIFIER
                && syntax::descendants(func, &[kinds::SUBSCRIPT])
                    .iter()
                    .filter(|s| {
                        s.field("value")
                            .is_some_and(|v| syntax::text(v, src) == syntax::text(body, src))
                    })
                    .filter_map(|s| s.field("subscript"))
                    .filter_map(|k| syntax::string_value(k, src))
                    .any(keys_the_body)
        });
    if body_keyed {
        return Some(true);
    }
    if let Some(&(_, headers)) = keyword_args.iter().find(|(name, _)| *name == "headers") {
        let value = match headers.kind() {
            kinds::IDENTIFIER => idx.assigned_before(
                Some(func),
                syntax::text(headers, src),
                call.start_byte(),
                src,
            )?,
            _ => headers,
        };
        let literal = value.kind() == kinds::DICTIONARY
            && !crate::python::named_children(value)
                .iter()
                .any(|c| c.kind() == kinds::DICTIONARY_SPLAT);
        if !literal {
            return None;
        }
        if names_key(value) || names_request_identity(value, src) {
            return Some(true);
        }
    }
    // A client made elsewhere may send a key with every request (`session.headers.update`).
    let on_client = syntax::receiver(call).is_some_and(|r| {
        let root = syntax::text(r, src).split('.').next().unwrap_or_default();
        !matches!(root, "requests" | "httpx")
            && cx.facts.is_none_or(|f| f.import_target(root).is_none())
    });
    if on_client && syntax::contains_lowercase(src, "idempot") {
        return None;
    }
    Some(false)
}

/// Whether the file calls a provider that takes a payment sent again under the same reference
/// for the same payment (Flutterwave's `reference` and `tx_ref`, Paystack's `reference`): there
/// the reference in the body is the key. Other providers (Adyen's `reference`) keep it only as
/// a label, and pay twice.
pub(crate) fn provider_dedups_on_reference(src: &str) -> bool {
    ["flutterwave", "paystack"]
        .iter()
        .any(|p| syntax::contains_lowercase(src, p))
}

/// A header whose name says it identifies the request (`X-Request-Token`, `X-Unique-Id`,
/// `Request-Key`): a gateway's own name for an idempotency key, as far as can be told here.
/// Credentials (`Authorization`, `X-Api-Key`, `X-Auth-Token`) are not.
fn names_request_identity(headers: Node<'_>, src: &str) -> bool {
    crate::python::named_children(headers)
        .into_iter()
        .filter(|p| p.kind() == kinds::PAIR)
        .filter_map(|p| p.field("key"))
        .map(|k| syntax::text(k, src).to_ascii_lowercase())
        .any(|name| {
            let credential = name.contains("auth") || name.contains("api");
            !credential
                && ["request", "unique", "token", "key", "nonce"]
                    .iter()
                    .any(|w| name.contains(w))
        })
}

/// What the retry sends the call again after, when that may come after the gateway acted:
/// `None` when it goes round only on errors raised before sending, or not at all.
fn retried_after(
    idx: &NodeIndex<'_>,
    attempt: &Attempt<'_>,
    call: Node<'_>,
    src: &str,
) -> Option<After> {
    if attempt.loop_line.is_none() {
        return decorator_retries(idx, attempt.func, call, src);
    }
    let trys: Vec<Node<'_>> = idx
        .within(attempt.body, kinds::TRY_STATEMENT)
        .iter()
        .copied()
        .filter(|t| t.field("body").is_some_and(|b| syntax::contains(b, call)))
        .collect();
    if trys.is_empty() {
        // `return client.post(...)` with nothing around it: a failure leaves the loop.
        let returned = call.parent().is_some_and(|p| {
            p.kind() == kinds::RETURN_STATEMENT
                || p.kind() == kinds::AWAIT
                    && p.parent()
                        .is_some_and(|g| g.kind() == kinds::RETURN_STATEMENT)
        });
        return (!returned).then_some(After::Result);
    }
    trys.iter()
        .flat_map(|t| crate::python::named_children(*t))
        .filter(|c| {
            c.kind() == kinds::EXCEPT_CLAUSE
                && syntax::except_body(*c)
                    .is_some_and(|body| crate::rules::err::handler_goes_round(body, idx, src))
        })
        .find_map(|clause| after_sending(clause, src))
        .map(After::Caught)
}

/// The first type an `except` clause catches that may come after the request was sent
/// (`Exception` for a bare `except:`).
fn after_sending(clause: Node<'_>, src: &str) -> Option<String> {
    let types = syntax::except_types(clause);
    if types.is_empty() {
        return Some("Exception".to_string());
    }
    let after: Vec<&str> = types
        .into_iter()
        .map(|t| syntax::text(t, src))
        .filter(|t| !BEFORE_SENDING.contains(&facts::last_name(t)))
        .collect();
    // A refusal for the rate is the one answer that says the request was not taken: name the
    // error that may have followed a payment made, when the clause catches one.
    after
        .iter()
        .find(|t| !rate_limited(facts::last_name(t)))
        .or_else(|| after.first())
        .map(|t| t.to_string())
}

fn rate_limited(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    ["ratelimit", "throttl", "toomanyrequests"]
        .iter()
        .any(|w| lower.contains(w))
}

/// A function run again whole: by a decorator that names the errors it retries (all of them
/// when it names none), or by `self.retry` in an `except` around the call.
fn decorator_retries(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    call: Node<'_>,
    src: &str,
) -> Option<After> {
    let decorators: Vec<String> = idx
        .decorated(func)
        .map(syntax::decorators)
        .unwrap_or_default()
        .into_iter()
        .map(|d| syntax::normalized(d, src))
        .collect();
    if let Some(d) = decorators
        .iter()
        .find(|d| attempts::retried_by_decorator(d).is_some())
    {
        let named: Vec<&str> = d
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .filter(|w| {
                let last = facts::last_name(w);
                last.ends_with("Error") || last.ends_with("Exception") || last.ends_with("Timeout")
            })
            .collect();
        return match named
            .iter()
            .find(|w| !BEFORE_SENDING.contains(&facts::last_name(w)))
        {
            Some(w) => Some(After::Caught(w.to_string())),
            None if named.is_empty() => Some(After::Any),
            None => None,
        };
    }
    // `except SomeError as exc: raise self.retry(exc=exc)` around the call.
    idx.within(func, kinds::TRY_STATEMENT)
        .iter()
        .filter(|t| t.field("body").is_some_and(|b| syntax::contains(b, call)))
        .flat_map(|t| crate::python::named_children(*t))
        .filter(|c| {
            c.kind() == kinds::EXCEPT_CLAUSE
                && idx
                    .within(*c, kinds::CALL)
                    .iter()
                    .any(|r| syntax::callee(*r, src) == "self.retry")
        })
        .find_map(|clause| after_sending(clause, src))
        .map(After::Caught)
}

/// A merchant reference in the request that some gateways refuse to pay twice
/// (`order_id=`, `"merchantReference": ...`): worth asking about, not a key.
fn dedup_reference(call: Node<'_>, src: &str) -> Option<String> {
    const REFERENCES: &[&str] = &[
        "order_id",
        "orderid",
        "invoice_id",
        "invoiceid",
        "merchant_reference",
        "merchantreference",
        "reference",
    ];
    let text = syntax::text(call, src);
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|w| REFERENCES.contains(&w.to_ascii_lowercase().as_str()))
        .map(str::to_string)
}
