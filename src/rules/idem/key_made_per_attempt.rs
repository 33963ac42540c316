//! IDEM004 key-made-per-attempt: the idempotency key a request carries is made anew on every
//! attempt of the retry around it (a fresh `uuid4()`, a timestamp), so the gateway takes each
//! retry for a new payment, and a retry after a lost response charges twice.
//!
//! Two kinds of retry are recognised: a retry loop of the function (`retry::loops`), and a
//! function that is run again as a whole (`@retry` of tenacity or retrying, `@backoff.on_*`, a
//! Celery task with `autoretry_for` or one that calls `self.retry`, a dramatiq actor, a job RQ
//! enqueues with `retry=`), and, in repository mode, a function that a retrying task of the
//! repository runs. A key made by a helper of the file that the attempt calls (a method of its
//! class, a function of its module) is followed one call deep. A key may go under a name that
//! does not say so: an argument that a function of the change sends as its idempotency key
//! (`request_ref=`, `sender_batch_id=`; `idem::key_params`).
use tree_sitter::Node;

use super::key_params;
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::facts::Slot;
use crate::rules::retry::attempts::{self, Attempt};
use crate::rules::{ChangeSet, Check, Ctx, Gate, Rule, Scan, facts};
use crate::source::Side;

pub(crate) static RULE: Rule = Rule {
    id: "IDEM004",
    doc: include_str!("../../../rules/idem/IDEM004.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Calls whose every call gives a new random value.
const RANDOM: &[&str] = &[
    "uuid1",
    "uuid4",
    "uuid6",
    "uuid7",
    "token_hex",
    "token_urlsafe",
    "token_bytes",
    "urandom",
    "getrandbits",
    "randint",
    "randrange",
];

/// Calls whose every call gives a new value: random identifiers (`RANDOM`) and the clock.
fn fresh(name: &str) -> bool {
    RANDOM.contains(&name) || matches!(name, "time_ns" | "now" | "utcnow")
}

/// A key the request carries, with a random one when it carries none
/// (`request.headers.get("idempotency-key", "").strip() or uuid.uuid4().hex`): the client's
/// retry after a timeout, sent without the header, is taken for a new request and paid again.
fn request_key_or_random(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    for &either in idx.all(kinds::BOOLEAN_OPERATOR) {
        let (Some(given), Some(made)) = (either.field("left"), either.field("right")) else {
            continue;
        };
        if syntax::text(either, src).contains(" and ") || !from_the_request(idx, either, given, src)
        {
            continue;
        }
        // Or the request's own id (`request.headers.get("X-Request-Id")`), which a proxy or the
        // framework stamps anew on every request: as new on the client's retry as a random one.
        let request_id = names_a_request_id(syntax::text(made, src));
        if !request_id && !makes_random_token(made, idx, src) {
            continue;
        }
        // Held in a name (`key = ...`) or handed on (`request_key=...`): the header names the
        // key, whatever the name.
        // Through what tidies it on the way (`(... or ...).strip()`).
        let mut held = either;
        while let Some(up) = held.parent().filter(|p| {
            matches!(
                p.kind(),
                kinds::PARENTHESIZED_EXPRESSION | kinds::ATTRIBUTE | kinds::CALL
            )
        }) {
            held = up;
        }
        let key = held
            .parent()
            .and_then(|p| match p.kind() {
                kinds::ASSIGNMENT => p.field("left"),
                kinds::KEYWORD_ARGUMENT => p.field("name"),
                _ => None,
            })
            .unwrap_or(given);
        let function = facts::enclosing_qualname(idx, either, src);
        let finding = cx
            .report(&RULE, either)
            .arg("key", syntax::normalized(key, src))
            .arg("given", syntax::normalized(given, src))
            .arg("made", syntax::normalized(made, src))
            .arg("function", function.clone())
            .note(if request_id { "request_id" } else { "request" });
        finding.function = function;
    }
}

/// Whether an expression names the id of one request (`X-Request-Id`, `HTTP_X_REQUEST_ID`,
/// `request.state.request_id`, a correlation or trace id) and no idempotency key.
fn names_a_request_id(text: &str) -> bool {
    let squeezed: String = text
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    !names_key(text)
        && ["requestid", "correlationid", "traceid", "traceparent"]
            .iter()
            .any(|w| squeezed.contains(w))
}

/// Whether `given` is the key a request carries: read from its headers
/// (`request.headers.get("Idempotency-Key")`), or a parameter the framework fills from a
/// header (`idempotency_key: Annotated[str | None, Header()] = None`).
fn from_the_request(idx: &NodeIndex<'_>, at: Node<'_>, given: Node<'_>, src: &str) -> bool {
    let text = syntax::text(given, src);
    if !syntax::code_names_idempotency(text) {
        return false;
    }
    if text.contains("headers") || text.contains("request") {
        return true;
    }
    given.kind() == kinds::IDENTIFIER
        && idx
            .enclosing(at, kinds::FUNCTION_DEFINITION)
            .and_then(|f| f.field("parameters"))
            .is_some_and(|params| {
                crate::python::named_children(params).iter().any(|p| {
                    syntax::parameter_name(*p, src) == text
                        && syntax::text(*p, src).contains("Header(")
                })
            })
}

/// Whether an expression makes a random token (`str(uuid.uuid4())`, `secrets.token_hex(16)`):
/// an identifier made on the spot, not a timestamp.
pub(crate) fn makes_random_token(node: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> bool {
    std::iter::once(node)
        .filter(|n| n.kind() == kinds::CALL)
        .chain(idx.within(node, kinds::CALL).iter().copied())
        .any(|c| RANDOM.contains(&syntax::callee_name(c, src)))
}

/// Every finding is about a key sent from inside a function, under a name that says so: the
/// function's text mentions idempotency (`FunctionFacts::mentions_idempotency`, read once by
/// the facts pass); or about a retry whose attempts call such a function of another file; or
/// about a payment whose key goes under another name.
fn gate(s: &Scan<'_>) -> bool {
    // A test's keys go to a stub: a loop of a fixture that makes rows numbered by attempt
    // (`Payment.create(idempotency_key=f"payment-{invoice.id}-{n}")`) moves no money.
    !s.facts.is_test && gate_code(s)
}

fn gate_code(s: &Scan<'_>) -> bool {
    s.facts.functions.iter().any(|f| {
        f.mentions_idempotency
            || f.decorators
                .iter()
                .any(|d| attempts::retried_by_decorator(d).is_some())
    }) || crate::rules::retry::has_retry_loop(s)
        // A payment made with a fresh value, perhaps as a key under another name, in a job a
        // queue runs again (`enqueue(..., retry=...)`, a retrying task of the repository).
        || (s.facts.payment_module || s.facts.functions.iter().any(|f| f.payment || f.http))
            && names_fresh(s.src())
}

/// `Idempotency-Key`, `idempotency_key=`, `IDEMPOTENCY_HEADER`: the same test as
/// `mentions_idempotency`'s.
pub(crate) fn names_key(text: &str) -> bool {
    syntax::IDEMPOTENCY_WORDS
        .iter()
        .any(|w| syntax::contains_lowercase(text, w))
}

fn check(cx: &mut Ctx<'_>) {
    // As the gate: a test's keys go to a stub.
    if cx.facts.is_some_and(|f| f.is_test) {
        return;
    }
    key_replaced_by_the_claim(cx);
    key_property_made_on_read(cx);
    request_key_or_random(cx);
    resent_from_a_handler(cx);
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let callees: Callees<'_> = Some((cx.change, cx.side));
    let mut reported: Vec<usize> = Vec::new();
    let attempts = attempts::attempts(idx, src);
    run_by_retried_tasks(cx, idx, &attempts, &mut reported);
    for attempt in attempts {
        for Site {
            at,
            name,
            value,
            via,
        } in key_sites(idx, attempt.body, src, callees)
        {
            let Some((made, fresh)) = made_in(idx, &attempt, at, value, src) else {
                if let Some((call, (helper, at, made))) =
                    made_elsewhere(cx, idx, &attempt, at, value, src)
                    && !reported.contains(&call.id())
                {
                    reported.push(call.id());
                    let elsewhere = MadeElsewhere {
                        key: name,
                        helper,
                        at,
                        made,
                        unless: None,
                    };
                    report_elsewhere(cx, &attempt, call, elsewhere);
                }
                continue;
            };
            if reported.contains(&made.id())
                || kept_with_a_record_found_first(idx, attempt.func, made, src)
            {
                continue;
            }
            reported.push(made.id());
            report(cx, &attempt, (made, fresh), (name, via), None);
        }
        for (helper, site, made, fresh) in helper_keys(idx, &attempt, src, callees) {
            if reported.contains(&made.id()) {
                continue;
            }
            reported.push(made.id());
            let helper = facts::qualname(helper, idx, src);
            report(
                cx,
                &attempt,
                (made, fresh),
                (site.name, site.via),
                Some(helper),
            );
        }
        for (call, (helper, at, fresh)) in helpers_elsewhere(cx, idx, &attempt, src) {
            if reported.contains(&call.id()) {
                continue;
            }
            reported.push(call.id());
            let facts::FreshKey {
                key, made, unless, ..
            } = fresh;
            let elsewhere = MadeElsewhere {
                key,
                helper,
                at,
                made,
                unless,
            };
            report_elsewhere(cx, &attempt, call, elsewhere);
        }
    }
}

/// A request sent under a key (`self._request("POST", ..., idempotency_key=idempotency_key)`)
/// and, when it fails, sent again from the handler under a new one (`except
/// IdempotentCreationConflict: return self.create_payment(..., idempotency_key=uuid4().hex)`):
/// the first request may have gone through (a conflict says one is in flight or done, a
/// timeout says nothing), and the provider takes the second for a new payment.
fn resent_from_a_handler(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let mut found = Vec::new();
    for &clause in idx.all(kinds::EXCEPT_CLAUSE) {
        let Some(func) = idx.enclosing(clause, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        // A key made on the spot in the handler, by its text first.
        let text = syntax::text(clause, src);
        if !(names_fresh(text) || text.contains("time")) {
            continue;
        }
        let (Some(handler), Some(body)) = (syntax::except_body(clause), syntax::tried_body(clause))
        else {
            continue;
        };
        let sent: Vec<&str> = idx
            .within(body, kinds::CALL)
            .iter()
            .filter(|c| key_argument(**c, src).is_some())
            .map(|c| syntax::callee_name(*c, src))
            .collect();
        // Or the function takes the key it sends (`async def send_refund(..., idempotency_key)`)
        // and calls itself again from the handler.
        let takes_a_key = crate::rules::pay::parameters(func, src)
            .iter()
            .any(|p| names_key(p));
        if sent.is_empty() && !takes_a_key {
            continue;
        }
        let own_name = syntax::function_name(func, src);
        for &call in idx.within(handler, kinds::CALL) {
            let name = syntax::callee_name(call, src);
            if !(sent.contains(&name) || name == own_name)
                || idx
                    .enclosing(call, kinds::FUNCTION_DEFINITION)
                    .is_none_or(|f| f.id() != func.id())
            {
                continue;
            }
            let Some((key, value)) = key_argument(call, src) else {
                continue;
            };
            let fresh = fresh_call(value, idx, src).filter(|c| c.kind() == kinds::CALL);
            let Some(fresh) = fresh else {
                continue;
            };
            let (first, last) = syntax::lines(value);
            if cx.touches_added(first, last) {
                found.push((clause, func, call, key.to_string(), value, fresh));
            }
        }
    }
    for (clause, func, call, key, value, fresh) in found {
        let caught = syntax::except_types(clause)
            .iter()
            .map(|t| syntax::text(*t, src))
            .collect::<Vec<_>>()
            .join(", ");
        let qualname = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, value)
            .arg("key", key)
            .arg("made", syntax::normalized(fresh, src))
            .arg("function", qualname.clone())
            .arg("resent", syntax::callee(call, src).to_string())
            .arg(
                "caught",
                if caught.is_empty() {
                    "everything".to_string()
                } else {
                    caught
                },
            )
            .note("resent");
        finding.function = qualname;
    }
}

/// The keyword argument a call hands its idempotency key by (`idempotency_key=...`), by its name.
fn key_argument<'t, 's>(call: Node<'t>, src: &'s str) -> Option<(&'s str, Node<'t>)> {
    syntax::keyword_args(call, src)
        .into_iter()
        .find(|(name, _)| names_key(name))
}

/// Keys made anew in a function that a task of the repository runs and runs again after a
/// failure (`collect_premium`, a dramatiq actor with `max_retries=6`, runs
/// `run_async(billing.collect_invoice, ...)`, which sends `request_ref=f"premium-{id}-{uuid4()}"`
/// to the processor): each run of the task sends another key. Asked of the functions that send
/// such a key, the fewest, and only in repository mode, where the tasks are known.
fn run_by_retried_tasks(
    cx: &mut Ctx<'_>,
    idx: &NodeIndex<'_>,
    attempts: &[Attempt<'_>],
    reported: &mut Vec<usize>,
) {
    let src = cx.src();
    if cx.project().is_none() {
        return;
    }
    let callees: Callees<'_> = Some((cx.change, cx.side));
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        if attempts.iter().any(|a| a.func.id() == func.id())
            || !names_fresh(syntax::text(func, src))
        {
            continue;
        }
        let Some(whole) = Attempt::whole(func, None) else {
            continue;
        };
        let own = |n: Node<'_>| {
            idx.enclosing(n, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| f.id() == func.id())
        };
        let fresh: Vec<_> = key_sites(idx, whole.body, src, callees)
            .into_iter()
            .filter(|site| own(site.at))
            .filter_map(|site| {
                let (made, call) = made_in(idx, &whole, site.at, site.value, src)?;
                (call.kind() == kinds::CALL
                    && fallback_choice(call, made).is_none()
                    && !kept_with_a_record_found_first(idx, func, made, src))
                .then_some((site, made, call))
            })
            .collect();
        if fresh.is_empty() {
            continue;
        }
        let qualname = facts::qualname(func, idx, src);
        let retried = cx
            .tasks_reaching(cx.path, &qualname)
            .into_iter()
            .find_map(|task| {
                let d = &task.decorator;
                let keywords: Vec<String> =
                    d.keywords.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let text = format!("@{}({})", d.callee, keywords.join(", "));
                attempts::retried_by_decorator(&text).map(|by| (task, by))
            });
        let Some((task, by)) = retried else {
            continue;
        };
        for (site, made, call) in fresh {
            if reported.contains(&made.id()) {
                continue;
            }
            reported.push(made.id());
            report(cx, &whole, (made, call), (site.name, site.via), None);
            let last = cx.findings.len() - 1;
            cx.findings[last]
                .arg("task", task.qualname.clone())
                .arg("task_at", format!("{}:{}", task.path, task.decorator.line))
                .arg("retried_by", by.clone())
                .note("task");
        }
    }
}

/// Where `func` itself sends an idempotency key that it makes anew on every call, whatever its
/// caller hands it: `headers["Idempotency-Key"] = uuid.uuid4().hex` in a client's
/// `submit_transfer`. A key made only when none is given (`idempotency_key or uuid4()`) is the
/// caller's to keep, and is not counted. For the facts pass (`FunctionFacts::fresh_key`), so
/// that a retry loop in another file can ask about the function it calls.
pub(crate) fn made_anew(func: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> Option<facts::FreshKey> {
    let whole = Attempt::whole(func, None)?;
    let params = crate::rules::pay::parameters(func, src);
    key_sites(idx, whole.body, src, None)
        .into_iter()
        .find_map(|site| {
            let (made, fresh) = made_in(idx, &whole, site.at, site.value, src)?;
            if fresh.kind() != kinds::CALL || fallback_choice(fresh, made).is_some() {
                return None;
            }
            // `if not idempotency_key: idempotency_key = new_key()`: made for a caller that gave
            // none, which a caller that retries may well give.
            // The assignment is the site itself when the key is sent under its own name.
            let assignment = [made, site.at]
                .into_iter()
                .find(|n| n.kind() == kinds::ASSIGNMENT);
            let made_for_a_parameter = assignment
                .and_then(|a| a.field("left"))
                .is_some_and(|l| params.iter().any(|p| p == syntax::text(l, src)));
            if made_for_a_parameter || kept_with_a_record_found_first(idx, func, made, src) {
                return None;
            }
            Some(facts::FreshKey {
                line: syntax::lines(made).0,
                key: site.name,
                made: syntax::normalized(fresh, src),
                unless: None,
            })
        })
}

/// A key made for a record the function stores, after it hands back the record a previous
/// call stored (`existing = ...; if existing is not None: return existing` ... `refund.
/// idempotency_key = f"refund-{uuid4()}"; session.add(refund)`): made once per record, and a
/// second call finds the record and its key.
fn kept_with_a_record_found_first(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    made: Node<'_>,
    src: &str,
) -> bool {
    let own = |n: Node<'_>| crate::rules::idem::owned_by(idx, n, Some(func));
    let found_first = idx.within(func, kinds::IF_STATEMENT).iter().any(|&stmt| {
        stmt.end_byte() <= made.start_byte()
            && own(stmt)
            && stmt.field("consequence").is_some_and(|body| {
                syntax::statements(body).last().is_some_and(|last| {
                    last.kind() == kinds::RETURN_STATEMENT
                        && syntax::return_value(*last).is_some_and(|v| {
                            // `return existing`, its id (`return unfinished.id`), or the
                            // record made over (`return dict(existing, **links)`).
                            let of = |v: Node<'_>| match v.kind() {
                                kinds::IDENTIFIER => Some(syntax::text(v, src)),
                                kinds::ATTRIBUTE => v
                                    .field("object")
                                    .filter(|o| o.kind() == kinds::IDENTIFIER)
                                    .map(|o| syntax::text(o, src)),
                                _ => None,
                            };
                            let root = match v.kind() {
                                kinds::CALL => {
                                    syntax::positional_args(v).first().and_then(|a| of(*a))
                                }
                                _ => of(v),
                            };
                            root.is_some_and(|root| {
                                stmt.field("condition").is_some_and(|c| {
                                    identifiers(syntax::text(c, src)).any(|w| w == root)
                                })
                            })
                        })
                })
            })
    });
    found_first
        && idx.within(func, kinds::CALL).iter().any(|&c| {
            // After the key is made, or the call it is made in (`Payment.create(key=...)`).
            (c.start_byte() > made.start_byte() || syntax::contains(c, made))
                && own(c)
                && match syntax::callee_name(c, src) {
                    "add" | "save" | "create" | "flush" | "insert" | "insert_one"
                    | "bulk_create" => true,
                    // SQLAlchemy Core: `conn.execute(insert(captures).values(key=...))`.
                    "values" | "execute" => {
                        syntax::contains_lowercase(syntax::text(c, src), "insert")
                    }
                    _ => false,
                }
        })
}

/// Where `func` sends a key that it makes anew only when its caller gives none: `key =
/// idempotency_key or uuid.uuid4().hex`, or `if idempotency_key is None: idempotency_key =
/// new_key()`, before sending it. A caller that retries and passes no key sends a new one on
/// every attempt (`FreshKey::unless`). For the facts pass, after `made_anew`.
pub(crate) fn made_unless_given(
    func: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &str,
) -> Option<facts::FreshKey> {
    let body = func.field("body")?;
    let params = crate::rules::pay::parameters(func, src);
    let own = |n: Node<'_>| {
        idx.enclosing(n, kinds::FUNCTION_DEFINITION)
            .is_some_and(|f| f.id() == func.id())
    };
    key_sites(idx, body, src, None)
        .into_iter()
        .filter(|site| own(site.at))
        .find_map(|site| {
            let named =
                (site.value.kind() == kinds::IDENTIFIER).then(|| syntax::text(site.value, src));
            let value = match named {
                Some(name) => idx.assigned_before(Some(func), name, site.at.start_byte(), src)?,
                None => site.value,
            };
            let fresh = fresh_call(value, idx, src).filter(|c| c.kind() == kinds::CALL)?;
            let from_choice = fallback_choice(fresh, value)
                .and_then(|choice| choice.named_child(0))
                .filter(|from| from.kind() == kinds::IDENTIFIER)
                .map(|from| syntax::text(from, src));
            // `if idempotency_key is None: idempotency_key = uuid4()`: the name is the
            // parameter, set only under a test of itself.
            let set_when_missing = || {
                let name = named?;
                let test = idx
                    .enclosing(value, kinds::IF_STATEMENT)
                    .filter(|s| own(*s))?
                    .field("condition")?;
                identifiers(syntax::text(test, src))
                    .any(|w| w == name)
                    .then_some(name)
            };
            let param = from_choice
                .or_else(set_when_missing)
                .filter(|p| params.iter().any(|q| q == p))?;
            Some(facts::FreshKey {
                line: syntax::lines(value).0,
                key: site.name,
                made: syntax::normalized(fresh, src),
                unless: Some(param.into()),
            })
        })
}

/// Functions of other files of the change that each attempt calls and that make the key they
/// send anew (`ferrox_api.submit_credit_transfer(...)`, whose `Idempotency-Key` is
/// `uuid.uuid4().hex`): with the function, as `qualname` and where it makes the key. Followed
/// where the call is sure of its function: a module's function by the file's import of it or
/// of its module; a method by a name every function of which in the change makes one.
fn helpers_elsewhere<'t>(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'t>,
    attempt: &Attempt<'t>,
    src: &str,
) -> Vec<(Node<'t>, (String, String, facts::FreshKey))> {
    let mut out = Vec::new();
    for &call in idx.within(attempt.body, kinds::CALL) {
        if idx
            .enclosing(call, kinds::FUNCTION_DEFINITION)
            .is_none_or(|f| f.id() != attempt.func.id())
        {
            continue;
        }
        let parts = idx.call_text(call, src);
        let made_for = |f: &facts::FunctionFacts| {
            f.fresh_key
                .as_deref()
                .filter(|k| {
                    k.unless
                        .as_deref()
                        .is_none_or(|p| !gives(idx, attempt.func, call, p, &f.params, src))
                })
                .map(|k| (k.line, k.clone()))
        };
        let found = called_elsewhere(cx, parts, made_for).or_else(|| {
            // A method of the file wrapped by a decorator that fills in the key: its body
            // makes none, so `helper_keys` does not see it.
            let file = cx.facts?;
            if !matches!(parts.receiver, None | Some("self" | "cls")) {
                return None;
            }
            let f = file.functions.iter().find(|f| {
                f.name == parts.name
                    && f.fresh_key.as_deref().is_some_and(|k| {
                        k.unless.is_some() && !(f.lines.0..=f.lines.1).contains(&k.line)
                    })
            })?;
            let (line, fresh) = made_for(f)?;
            Some((f.qualname.clone(), format!("{}:{line}", file.path), fresh))
        });
        if let Some((helper, at, fresh)) = found {
            out.push((call, (helper, at, fresh)));
        }
    }
    out
}

/// A key value that calls a function of another file of the change that returns a new value
/// on every call (`idempotency_key=refund_idempotency_key(event.return_id)`, which appends
/// `uuid.uuid4().hex[:12]`), directly or through a name set in the stretch: the call, with the
/// function, where it returns, and what the key is made by.
fn made_elsewhere<'t>(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'t>,
    attempt: &Attempt<'t>,
    site: Node<'t>,
    value: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, (String, String, String))> {
    let inside = |n: Node<'_>| syntax::contains(attempt.body, n);
    let value = if value.kind() == kinds::IDENTIFIER {
        let name = syntax::text(value, src);
        idx.assigned_before(Some(attempt.func), name, site.start_byte(), src)
            .filter(|v| inside(*v))?
    } else {
        value
    };
    std::iter::once(value)
        .filter(|n| n.kind() == kinds::CALL)
        .chain(idx.within(value, kinds::CALL).iter().copied())
        .filter(|c| inside(*c))
        .find_map(|call| {
            let (helper, at, ()) = called_elsewhere(cx, idx.call_text(call, src), |f| {
                f.returns_fresh.map(|l| (l, ()))
            })?;
            Some((
                call,
                (helper, at, format!("{}()", syntax::callee(call, src))),
            ))
        })
}

/// The function of another file of the change that a call runs, when `holds` says something of
/// it: with its qualified name and `path:line` of what it says. Followed where the call is sure
/// of its function: a module's function by the file's import of it or of its module; a method
/// or an unimported name by a name every function of which in the change holds it.
fn called_elsewhere<T>(
    cx: &Ctx<'_>,
    parts: syntax::CallText<'_>,
    holds: impl Fn(&facts::FunctionFacts) -> Option<(u32, T)>,
) -> Option<(String, String, T)> {
    let file = cx.facts?;
    let last = |dotted: &str| dotted.rsplit('.').next().unwrap_or(dotted).to_string();
    if parts.name.is_empty() || matches!(parts.receiver, Some("self" | "cls")) {
        return None;
    }
    // The file's own functions are `helper_keys`'s and `made_in`'s; `withdrawals.submit_refund`
    // in a task of the same name is the other module's.
    if parts.receiver.is_none() && file.functions.iter().any(|f| f.name == parts.name) {
        return None;
    }
    let module = match parts.receiver {
        Some(receiver) => file.import_target(receiver).map(last),
        None => file
            .import_target(parts.name)
            .and_then(|t| t.rsplit_once('.'))
            .map(|(m, _)| last(m)),
    };
    // `from payouts.wise import client`: an object of that module, whose methods are its
    // classes' (`client.create_transfer` is `WiseClient.create_transfer`).
    let owner = parts
        .receiver
        .and_then(|r| file.import_target(r))
        .and_then(|t| t.rsplit_once('.'))
        .map(|(m, _)| last(m));
    // `client.post(...)`, `session.request(...)`: a client's verb, whichever client it is.
    let generic = matches!(
        parts.name,
        "get"
            | "post"
            | "put"
            | "patch"
            | "delete"
            | "head"
            | "options"
            | "request"
            | "send"
            | "call"
            | "execute"
            | "run"
            | "fetch"
            | "stream"
    );
    if module.is_none() && generic {
        return None;
    }
    let candidates: Vec<_> = cx
        .change
        .functions_named(cx.side, parts.name)
        .filter(|(other, _)| !other.is_test && other.path != file.path)
        .filter(|(other, f)| match &module {
            Some(m) => {
                last(&other.module) == *m && f.qualname == f.name
                    || owner.as_ref().is_some_and(|o| last(&other.module) == *o)
                        && f.qualname != f.name
            }
            None => true,
        })
        .collect();
    if candidates.is_empty() || !candidates.iter().all(|(_, f)| holds(f).is_some()) {
        return None;
    }
    let (first_file, first) = candidates.first()?;
    let (line, said) = holds(first)?;
    Some((
        first.qualname.clone(),
        format!("{}:{line}", first_file.path),
        said,
    ))
}

/// Whether `call`, in `func`, gives the callee's parameter `param` a value: by keyword (not
/// `None`), by position (`positional`: the callee's parameters that can be passed so), or in a
/// `**` dict that names it or cannot be read. A `*args` could hold it too.
pub(crate) fn gives(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    call: Node<'_>,
    param: &str,
    positional: &str,
    src: &str,
) -> bool {
    let Some(args) = call.field("arguments") else {
        return false;
    };
    let position = positional.split(',').position(|p| p == param);
    let mut at = 0;
    for arg in crate::python::named_children(args) {
        match arg.kind() {
            kinds::KEYWORD_ARGUMENT => {
                let named = arg
                    .field("name")
                    .is_some_and(|n| syntax::text(n, src) == param);
                if named {
                    return arg.field("value").is_none_or(|v| v.kind() != kinds::NONE);
                }
            }
            kinds::LIST_SPLAT => {
                if position.is_some() {
                    return true;
                }
            }
            kinds::DICTIONARY_SPLAT => {
                let Some(inner) = arg.named_child(0) else {
                    return true;
                };
                if splat_names(idx, func, inner, param, call.start_byte(), src) {
                    return true;
                }
            }
            kinds::COMMENT => {}
            _ => {
                if position == Some(at) {
                    return true;
                }
                at += 1;
            }
        }
    }
    false
}

/// Whether the dict `**value` spreads into a call may hold `param`: a `dict(...)` or `{...}`
/// built in the function that names it, or one the function does not build (a parameter, a
/// dict filled elsewhere).
fn splat_names(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    value: Node<'_>,
    param: &str,
    before: usize,
    src: &str,
) -> bool {
    let built = match value.kind() {
        kinds::IDENTIFIER => {
            let name = syntax::text(value, src);
            let filled = idx.within(func, kinds::ASSIGNMENT).iter().any(|a| {
                a.field("left").is_some_and(|s| {
                    s.kind() == kinds::SUBSCRIPT
                        && s.field("value")
                            .is_some_and(|v| syntax::text(v, src) == name)
                }) && a.start_byte() < before
            }) || idx.within(func, kinds::CALL).iter().any(|c| {
                let parts = idx.call_text(*c, src);
                parts.receiver == Some(name) && matches!(parts.name, "update" | "setdefault")
            });
            if filled {
                return true;
            }
            match idx.assigned_before(Some(func), name, before, src) {
                Some(v) => v,
                None => return true,
            }
        }
        _ => value,
    };
    match built.kind() {
        kinds::DICTIONARY => crate::python::named_children(built).iter().any(|pair| {
            pair.kind() != kinds::PAIR
                || pair
                    .field("key")
                    .is_some_and(|k| syntax::string_value(k, src) == Some(param))
        }),
        kinds::CALL if syntax::callee(built, src) == "dict" => {
            syntax::keyword_args(built, src)
                .iter()
                .any(|(k, _)| *k == param)
                || !syntax::positional_args(built).is_empty()
        }
        _ => true,
    }
}

/// A key made in a function of another file of the change.
struct MadeElsewhere {
    /// The key as the request names it.
    key: String,
    /// The function's qualified name, and `path:line` where it makes the key.
    helper: String,
    at: String,
    /// The call that makes it (`uuid.uuid4()`, `refund_idempotency_key()`).
    made: String,
    /// The helper's parameter that the call leaves out, for which it makes the key.
    unless: Option<Box<str>>,
}

/// A key made anew by a function of another file that every attempt calls, reported at the
/// call: the attempt is where one key must be made and handed down.
fn report_elsewhere(
    cx: &mut Ctx<'_>,
    attempt: &Attempt<'_>,
    call: Node<'_>,
    elsewhere: MadeElsewhere,
) {
    let MadeElsewhere {
        key,
        helper,
        at,
        made,
        unless,
    } = elsewhere;
    let src = cx.src();
    let qualname = cx
        .index()
        .map(|idx| facts::qualname(attempt.func, idx, src))
        .unwrap_or_default();
    let callee = made.split('(').next().unwrap_or(&made);
    let clock = is_clock(callee.rsplit('.').next().unwrap_or(callee));
    let finding = cx
        .report_lines(
            &RULE,
            syntax::lines(call),
            format!("key-per-attempt-in {helper}"),
        )
        .arg("key", key)
        .arg("made", made)
        .arg("function", qualname.clone())
        .arg("helper", helper)
        .arg("helper_at", at);
    finding.function = qualname;
    // Said in the note of where the key is made, which names the retry.
    cite_retry(finding, attempt);
    match unless {
        Some(param) => finding.arg("param", param.to_string()).note("defaulted"),
        None => finding.note("elsewhere"),
    };
    if clock {
        finding.note("clock");
    }
}

/// Keys made by a helper of the file that each attempt calls (`headers =
/// self._build_headers(method, idempotency_key)`, which sets `idempotency_key or
/// new_idempotency_key()`): with the helper, where it makes the key and the fresh call. A
/// fallback of the helper's counts only when the attempt hands it what may be missing: `None`,
/// nothing, or a parameter of its own that it never set.
fn helper_keys<'t>(
    idx: &NodeIndex<'t>,
    attempt: &Attempt<'t>,
    src: &str,
    callees: Callees<'_>,
) -> Vec<(Node<'t>, Site<'t>, Node<'t>, Node<'t>)> {
    let mut out = Vec::new();
    let class_of = |f: Node<'t>| idx.enclosing(f, kinds::CLASS_DEFINITION).map(|c| c.id());
    for &call in idx.within(attempt.body, kinds::CALL) {
        if idx
            .enclosing(call, kinds::FUNCTION_DEFINITION)
            .is_none_or(|f| f.id() != attempt.func.id())
        {
            continue;
        }
        let parts = idx.call_text(call, src);
        let on_self = match parts.receiver {
            None => false,
            Some("self" | "cls") => true,
            Some(_) => continue,
        };
        let helper = idx
            .all(kinds::FUNCTION_DEFINITION)
            .iter()
            .copied()
            .find(|f| {
                f.id() != attempt.func.id()
                    && syntax::function_name(*f, src) == parts.name
                    && if on_self {
                        class_of(*f).is_some() && class_of(*f) == class_of(attempt.func)
                    } else {
                        class_of(*f).is_none()
                    }
            });
        let Some((helper, body)) = helper.and_then(|h| Some((h, h.field("body")?))) else {
            continue;
        };
        let inner = Attempt {
            body,
            func: helper,
            loop_line: attempt.loop_line,
            retried_by: attempt.retried_by.clone(),
            counted: attempt.counted,
        };
        for site in key_sites(idx, body, src, callees) {
            let Some((made, fresh)) = made_in(idx, &inner, site.at, site.value, src) else {
                continue;
            };
            // Made once for a record the helper stores, after it hands back the one a previous
            // attempt stored.
            if kept_with_a_record_found_first(idx, helper, made, src) {
                continue;
            }
            let from = fallback_choice(fresh, made)
                .and_then(|choice| choice.named_child(0))
                .filter(|f| f.kind() == kinds::IDENTIFIER)
                .map(|f| syntax::text(f, src));
            if let Some(param) = from
                && handed_a_kept_value(idx, attempt, call, helper, param, src)
            {
                continue;
            }
            out.push((helper, site, made, fresh));
        }
    }
    out
}

/// Whether the attempt's `call` of `helper` passes, for the helper's parameter `param`, a
/// value that is there on every attempt. Not kept: `None`, an argument left out (the default),
/// or a parameter of the attempt's function that it never sets; `if not key: key = new_key()`
/// before the loop keeps it.
fn handed_a_kept_value(
    idx: &NodeIndex<'_>,
    attempt: &Attempt<'_>,
    call: Node<'_>,
    helper: Node<'_>,
    param: &str,
    src: &str,
) -> bool {
    if !crate::rules::pay::parameters(helper, src)
        .iter()
        .any(|p| p == param)
    {
        // Not the helper's parameter: a name it reads from elsewhere.
        return true;
    }
    let Some(arg) = crate::rules::pay::argument_for(call, helper, param, true, src) else {
        return false;
    };
    match arg.kind() {
        kinds::NONE => false,
        kinds::IDENTIFIER => {
            let name = syntax::text(arg, src);
            let own_parameter = crate::rules::pay::parameters(attempt.func, src)
                .iter()
                .any(|p| p == name);
            let set = idx
                .assigned_before(Some(attempt.func), name, call.start_byte(), src)
                .is_some();
            !own_parameter || set
        }
        _ => true,
    }
}

/// Whether some retried stretch of `func` sends a key made anew on each attempt: what IDEM004
/// reports there, for the rules that ask whether every attempt sends one key.
pub(crate) fn key_varies_in(idx: &NodeIndex<'_>, func: Node<'_>, src: &str) -> bool {
    attempts::attempts(idx, src)
        .iter()
        .filter(|a| a.func.id() == func.id())
        .any(|attempt| {
            key_sites(idx, attempt.body, src, None)
                .into_iter()
                .any(|site| made_in(idx, attempt, site.at, site.value, src).is_some())
                || !helper_keys(idx, attempt, src, None).is_empty()
        })
}

/// `made`: where the key is made (its value, or the assignment of the name it is read from);
/// `fresh`: the call in it that gives a new value each time.
fn report(
    cx: &mut Ctx<'_>,
    attempt: &Attempt<'_>,
    (made, fresh): (Node<'_>, Node<'_>),
    (key, via): (String, Option<String>),
    helper: Option<String>,
) {
    let src = cx.src();
    let clock = is_clock(syntax::callee_name(fresh, src));
    let counted = fresh.kind() != kinds::CALL;
    // `idempotency_key or uuid4()`: made anew only when the caller gave none.
    let fallback_from = fallback_choice(fresh, made)
        .and_then(|choice| choice.named_child(0))
        .map(|from| syntax::normalized(from, src));
    let counter = counted.then(|| syntax::normalized(fresh, src));
    // A key built from the counter is shown whole (`f"{key}-{attempt}"`), the counter named
    // in its note.
    let fresh = if counted {
        let value = if made.kind() == kinds::ASSIGNMENT {
            made.field("right").unwrap_or(made)
        } else {
            made
        };
        syntax::normalized(value, src)
    } else {
        syntax::normalized(fresh, src)
    };
    let qualname = cx
        .index()
        .map(|idx| facts::qualname(attempt.func, idx, src))
        .unwrap_or_default();
    // Sent as itself, not made into a header further down (`via`).
    let handle = via.is_none() && dedup_handle(key.trim_end_matches('='));
    let finding = cx
        .report_lines(
            &RULE,
            syntax::lines(made),
            format!("key-per-attempt {}", syntax::normalized(made, src)),
        )
        .arg("key", key)
        .arg("made", fresh)
        .arg("function", qualname.clone());
    finding.function = qualname;
    if let Some(note) = cite_retry(finding, attempt) {
        finding.note(note);
    }
    if let Some(helper) = helper {
        finding.arg("helper", helper).note("helper");
    }
    if let Some(via) = via {
        finding.arg("via", via).note("via");
    }
    if let Some(from) = fallback_from {
        finding.arg("fallback_from", from).note("fallback");
    }
    if handle {
        finding.note("handle");
    }
    if clock {
        finding.note("clock");
    }
    if let Some(counter) = counter {
        finding.arg("counter", counter).note("counter");
    }
}

/// The clock, not randomness: `time.time()`, `time_ns()`, `datetime.now()`.
fn is_clock(name: &str) -> bool {
    matches!(name, "time" | "time_ns" | "now" | "utcnow")
}

/// Names what runs the attempts again (`loop_line`, or `retried_by`), with the note that says
/// it in its own words, for a finding that does not say it otherwise.
fn cite_retry(finding: &mut crate::review::Finding, attempt: &Attempt<'_>) -> Option<&'static str> {
    match (attempt.loop_line, &attempt.retried_by) {
        (Some(line), _) => {
            finding.arg("loop_line", line.to_string());
            Some("loop")
        }
        // The counter note names what the job reads.
        (None, Some(_)) if attempt.counted => None,
        (None, Some(by)) => {
            finding.arg("retried_by", by.clone());
            Some("retried")
        }
        (None, None) => None,
    }
}

/// A place that sends an idempotency key.
pub(crate) struct Site<'t> {
    pub at: Node<'t>,
    /// The key's name as written there: `"Idempotency-Key"`, `idempotency_key=`.
    pub name: String,
    pub value: Node<'t>,
    /// The callee that sends it as its key, when its name does not say so (`processor.sale`
    /// for `request_ref=`).
    pub via: Option<String>,
}

/// The change's functions, where a key may go under a name that does not say so: an argument
/// that a function of the change sends as its idempotency key (`request_ref=` of
/// `processor.sale`). `None` for the facts pass, which sees one file.
pub(crate) type Callees<'c> = Option<(&'c ChangeSet, Side)>;

/// Where the stretch `body` sends a key, for each `Idempotency-Key: value` of a
/// dict (passed, assigned or returned), `idempotency_key=value` of a call,
/// `headers["Idempotency-Key"] = value` and `idempotency_key = value`.
pub(crate) fn key_sites<'t>(
    idx: &NodeIndex<'t>,
    body: Node<'t>,
    src: &str,
    callees: Callees<'_>,
) -> Vec<Site<'t>> {
    let mut out = Vec::new();
    let site = |at, name: String, value| Site {
        at,
        name,
        value,
        via: None,
    };
    let pairs = |dict: Node<'t>, out: &mut Vec<Site<'t>>| {
        // `headers = {"Idempotency-Key": ...} if idempotency_key else None`: the dict built
        // when there is a key.
        let dict = match dict.kind() {
            kinds::CONDITIONAL_EXPRESSION => match dict.named_child(0) {
                Some(first) => first,
                None => return,
            },
            _ => dict,
        };
        if dict.kind() != kinds::DICTIONARY {
            return;
        }
        for pair in crate::python::named_children(dict) {
            if pair.kind() != kinds::PAIR {
                continue;
            }
            if let (Some(k), Some(v)) = (pair.field("key"), pair.field("value"))
                && names_key(syntax::text(k, src))
            {
                out.push(site(pair, syntax::normalized(k, src), v));
            }
        }
    };
    for &call in idx.within(body, kinds::CALL) {
        for (name, value) in syntax::keyword_args(call, src) {
            // `idem=f"rf-{r['id']}"`: the key by its short name.
            if names_key(name) || matches!(name, "idem" | "idem_key" | "idemkey" | "ikey") {
                out.push(site(call, format!("{name}="), value));
            } else if let Some((change, side)) = callees
                && key_params::part_like(name)
                && let Some(callee) = run_callee(idx, call, src)
                && change.sends_as_key(side, callee.1, &Slot::Keyword(name.into()))
            {
                out.push(Site {
                    via: Some(syntax::normalized(callee.0, src)),
                    ..site(call, format!("{name}="), value)
                });
            } else if dedup_handle(name) && pays_by_name(idx.callee_name(call, src)) {
                // `charge_authorization(..., reference=invoice.reference)`: the handle a
                // provider such as Paystack tells a repeated payment by.
                out.push(site(call, format!("{name}="), value));
            } else {
                pairs(value, &mut out);
            }
        }
        for arg in syntax::positional_args(call) {
            pairs(arg, &mut out);
        }
        // `self._headers(f"{idempotency_key}:{attempt}")`, where `_headers` sends its first
        // parameter as the key: handed by position.
        if let Some((change, side)) = callees
            && syntax::handed_function(call, src).is_none()
        {
            let callee = idx.callee_name(call, src);
            for (i, arg) in syntax::positional_args(call).into_iter().enumerate() {
                let slot = Slot::Position(u16::try_from(i).unwrap_or(u16::MAX));
                if arg.kind() == kinds::DICTIONARY || !change.sends_as_key(side, callee, &slot) {
                    continue;
                }
                let param = change
                    .functions_named(side, callee)
                    .find_map(|(_, f)| f.params.split(',').nth(i).map(str::to_string))
                    .unwrap_or_default();
                out.push(Site {
                    via: call.field("function").map(|f| syntax::normalized(f, src)),
                    ..site(call, param, arg)
                });
            }
        }
    }
    for &assignment in idx.within(body, kinds::ASSIGNMENT) {
        let (Some(left), Some(right)) = (assignment.field("left"), assignment.field("right"))
        else {
            continue;
        };
        if names_key(syntax::text(left, src)) {
            out.push(site(assignment, syntax::normalized(left, src), right));
        } else if left.kind() == kinds::SUBSCRIPT
            && left
                .field("subscript")
                .and_then(|k| syntax::string_value(k, src))
                .is_some_and(dedup_handle)
            && super::retried_without_key::provider_dedups_on_reference(src)
        {
            // `payload["reference"] = ...` for a provider that tells a payment sent again by it.
            out.push(site(assignment, syntax::normalized(left, src), right));
        } else {
            pairs(right, &mut out);
        }
    }
    // `return {"Idempotency-Key": ...}` in a helper that builds the headers.
    // Or one of what it returns (`return psp_reference, {"idempotency_key": ...}`).
    for &ret in idx.within(body, kinds::RETURN_STATEMENT) {
        if let Some(value) = syntax::return_value(ret) {
            if matches!(value.kind(), kinds::EXPRESSION_LIST | kinds::TUPLE) {
                for part in crate::python::named_children(value) {
                    pairs(part, &mut out);
                }
            } else {
                pairs(value, &mut out);
            }
        }
    }
    out.sort_by_key(|s| s.at.start_byte());
    out
}

/// A payment's own reference, which providers that dedup on it (Paystack's `reference`,
/// Flutterwave's `tx_ref`, Authorize.net's `invoiceNumber`) take for the same payment when it
/// comes again.
pub(crate) fn dedup_handle(name: &str) -> bool {
    matches!(
        name,
        "reference"
            | "tx_ref"
            | "txref"
            | "merchant_reference"
            | "payment_reference"
            | "external_id"
            | "external_reference"
            | "client_reference_id"
            // Authorize.net's duplicate check within its `duplicateWindow`.
            | "invoice_number"
    )
        // PayU's `extRefundId`, `extOrderId`: the merchant's own id of the operation.
        || name
            .strip_prefix("ext_")
            .is_some_and(|rest| rest.ends_with("_id"))
}

/// A call named for moving money: `charge_authorization`, `initiate_transfer`, `create_payout`.
fn pays_by_name(name: &str) -> bool {
    syntax::name_words(name).iter().any(|w| {
        matches!(
            w.as_str(),
            "charge" | "pay" | "payment" | "transfer" | "payout" | "refund" | "capture" | "debit"
        )
    })
}

/// The function a call runs, as written and by its last name: its callee, or the function it
/// hands a runner (`run_in_threadpool(processor.sale, ...)` runs `processor.sale`).
fn run_callee<'t, 's>(
    idx: &NodeIndex<'t>,
    call: Node<'t>,
    src: &'s str,
) -> Option<(Node<'t>, &'s str)> {
    match syntax::handed_function(call, src) {
        Some(f) => {
            let text = syntax::text(f, src);
            Some((f, text.rsplit('.').next().unwrap_or(text)))
        }
        None => Some((call.field("function")?, idx.callee_name(call, src))),
    }
}

/// Where, inside the retried stretch, the key sent at `site` is made fresh: `value` itself, or
/// the last assignment before `site` of a name `value` reads; with the call that makes it
/// fresh. `None` when it is made once,
/// outside the stretch, from something stable, or only when there is no key yet (`if key is
/// None: key = ...`).
fn made_in<'t>(
    idx: &NodeIndex<'t>,
    attempt: &Attempt<'t>,
    site: Node<'t>,
    value: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, Node<'t>)> {
    let inside = |n: Node<'_>| syntax::contains(attempt.body, n);
    let counters = counters(idx, attempt, src);
    if let Some(counter) = counter_read(value, &counters, src).filter(|_| inside(value)) {
        return Some((value, counter));
    }
    if let Some(call) = fresh_call(value, idx, src) {
        let kept = stable_fallback(idx, attempt, call, value, key_name(site, src), src);
        // `if payout.customer_transaction_id is None: payout.customer_transaction_id =
        // str(uuid4())`, the key made where it is kept: made on the first attempt only.
        let once = site.kind() == kinds::ASSIGNMENT
            && site.field("left").is_some_and(|l| {
                only_when_none_is_kept(idx, site, attempt.body, syntax::text(l, src), src)
            });
        return (inside(value) && !kept && !once).then_some((value, call));
    }
    let assignments = idx.within(attempt.func, kinds::ASSIGNMENT);
    for name in identifiers(syntax::text(value, src)) {
        let last = assignments
            .iter()
            .filter(|a| a.end_byte() <= site.start_byte())
            .filter(|a| {
                idx.enclosing(**a, kinds::FUNCTION_DEFINITION)
                    .is_some_and(|f| f.id() == attempt.func.id())
            })
            .rfind(|a| {
                a.field("left")
                    .is_some_and(|l| syntax::text(l, src) == name)
            });
        let Some(assignment) = last else {
            continue;
        };
        let Some(right) = assignment.field("right") else {
            continue;
        };
        if let Some(counter) = counter_read(right, &counters, src).filter(|_| inside(*assignment)) {
            return Some((*assignment, counter));
        }
        let Some(call) = fresh_call(right, idx, src) else {
            continue;
        };
        if inside(*assignment)
            && !stable_fallback(idx, attempt, call, right, Some(name), src)
            && !only_when_none_is_kept(idx, *assignment, attempt.body, name, src)
        {
            return Some((*assignment, call));
        }
    }
    // `reference=payment.reference` of `payment = Payment.create(reference=new_reference(order),
    // ...)` made in the attempt: the record, and the key it was given, are new every time.
    for name in identifiers(syntax::text(value, src)) {
        let Some((object, field)) = name.split_once('.') else {
            continue;
        };
        let made = assignments
            .iter()
            .filter(|a| a.end_byte() <= site.start_byte() && inside(**a))
            .rfind(|a| {
                a.field("left")
                    .is_some_and(|l| syntax::text(l, src) == object)
            });
        let Some(right) = made.and_then(|a| a.field("right")) else {
            continue;
        };
        let given = (right.kind() == kinds::CALL)
            .then(|| syntax::keyword_arg(right, field, src))
            .flatten();
        if let (Some(made), Some(call)) = (made, given.and_then(|g| fresh_call(g, idx, src))) {
            return Some((*made, call));
        }
        // `pagamento = Pagamento.objects.create(pedido=pedido, ...)` without the key: the row's
        // key is its model's default, new for every row the attempts create.
        if let Some(made) = made
            && given.is_none()
            && right.kind() == kinds::CALL
            && syntax::callee_name(right, src) == "create"
            && names_key(field)
        {
            return Some((*made, right));
        }
    }
    // Set again later in the loop's body, for the next attempt (`key =
    // f"{idempotency_key}-r{attempt}"` in the handler of a 409): the attempts after the first
    // send that.
    attempt.loop_line?;
    for name in identifiers(syntax::text(value, src)) {
        let later = assignments.iter().filter(|a| {
            a.start_byte() >= site.end_byte()
                && inside(**a)
                && idx
                    .enclosing(**a, kinds::FUNCTION_DEFINITION)
                    .is_some_and(|f| f.id() == attempt.func.id())
                && a.field("left")
                    .is_some_and(|l| syntax::text(l, src) == name)
        });
        for assignment in later {
            let Some(right) = assignment.field("right") else {
                continue;
            };
            if let Some(counter) = counter_read(right, &counters, src) {
                return Some((*assignment, counter));
            }
            if let Some(call) = fresh_call(right, idx, src)
                && !stable_fallback(idx, attempt, call, right, Some(name), src)
            {
                return Some((*assignment, call));
            }
        }
    }
    None
}

/// What counts the attempts of a retry loop: its `for` variable (`for attempt in
/// range(...)`) and the names its body counts up (`attempt += 1`); for a Celery task run again
/// whole, `self.request.retries`.
fn counters<'s>(idx: &NodeIndex<'_>, attempt: &Attempt<'_>, src: &'s str) -> Vec<&'s str> {
    let mut out = Vec::new();
    if attempt.loop_line.is_none() {
        if attempt.retried_by.is_some() {
            // Celery's count of retries and arq's of tries, and the names the function gives
            // them (`job_try: int = ctx["job_try"]`).
            out.extend(["self.request.retries", "ctx[\"job_try\"]", "ctx['job_try']"]);
            out.extend(crate::rules::retry::attempts::job_attempt_counts(
                idx,
                attempt.func,
                src,
            ));
            // The count handed in by the job that runs it again (`charge_gift(..., attempt=
            // ctx["job_try"])`).
            out.extend(
                crate::rules::pay::positional_parameters(attempt.func, src)
                    .into_iter()
                    .chain(syntax::keyword_only_parameters(attempt.func, src))
                    .filter(|p| {
                        matches!(
                            *p,
                            "attempt"
                                | "attempts"
                                | "attempt_number"
                                | "job_try"
                                | "tries"
                                | "try_number"
                        )
                    }),
            );
            for a in idx.within(attempt.func, kinds::ASSIGNMENT) {
                let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
                    continue;
                };
                let value = syntax::text(right, src);
                if left.kind() == kinds::IDENTIFIER
                    && (value.contains("job_try") || value.ends_with("request.retries"))
                {
                    out.push(syntax::text(left, src));
                }
            }
        }
        return out;
    }
    // A helper the loop calls is read as a stretch of its own: its counters are not the loop's.
    let Some(lp) = attempt
        .body
        .parent()
        .filter(|p| matches!(p.kind(), kinds::FOR_STATEMENT | kinds::WHILE_STATEMENT))
    else {
        return out;
    };
    if let Some(target) = lp
        .field("left")
        .filter(|l| lp.kind() == kinds::FOR_STATEMENT && l.kind() == kinds::IDENTIFIER)
    {
        out.push(syntax::text(target, src));
    }
    for a in idx.within(attempt.body, kinds::AUGMENTED_ASSIGNMENT) {
        if let Some(left) = a.field("left").filter(|l| l.kind() == kinds::IDENTIFIER) {
            out.push(syntax::text(left, src));
        }
    }
    out
}

/// A name of `counters` that `node` reads (`f"{key}-{attempt}"`): a key built from the attempt
/// number is another key on every attempt.
fn counter_read<'t>(node: Node<'t>, counters: &[&str], src: &str) -> Option<Node<'t>> {
    if counters.is_empty() {
        return None;
    }
    let mut pending = vec![node];
    while let Some(n) = pending.pop() {
        match n.kind() {
            kinds::IDENTIFIER | kinds::ATTRIBUTE | kinds::SUBSCRIPT
                if counters.contains(&syntax::text(n, src)) =>
            {
                return Some(n);
            }
            // `len(attempts)`, `lambda attempt: ...`: not the counter's value.
            kinds::LAMBDA => {}
            _ => pending.extend(crate::python::named_children(n)),
        }
    }
    None
}

/// A call, `node` or one inside it, whose every call gives a new value (`uuid.uuid4()`,
/// `time.time()`, `datetime.now()`).
fn fresh_call<'t>(node: Node<'t>, idx: &NodeIndex<'t>, src: &str) -> Option<Node<'t>> {
    let fresh = |c: &Node<'_>| {
        let name = syntax::callee_name(*c, src);
        fresh(name) || syntax::callee(*c, src) == "time.time" || returns_fresh(idx, name, src)
    };
    // `within` leaves `node` itself out: `key = uuid.uuid4()` is the call.
    std::iter::once(node)
        .filter(|n| n.kind() == kinds::CALL)
        .chain(idx.within(node, kinds::CALL).iter().copied())
        .find(fresh)
}

/// Whether a `return` gives a new value each time (`return uuid.uuid4().hex`). For the facts
/// pass (`FunctionFacts::returns_fresh`): the text is looked at first, as most returns give
/// no such thing.
pub(crate) fn gives_fresh(ret: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> bool {
    names_fresh(syntax::text(ret, src))
        && idx
            .within(ret, kinds::CALL)
            .iter()
            .any(|c| fresh(syntax::callee_name(*c, src)))
}

/// Whether a text may call one of the `fresh` calls: it holds `uuid`, `rand` (`randint`, `urandom`,
/// `getrandbits`), `token_`, `time_ns` or `now(`. With finders built once, as it is asked of
/// every `return` of a change.
pub(crate) fn names_fresh(text: &str) -> bool {
    static WORDS: std::sync::LazyLock<[memchr::memmem::Finder<'static>; 5]> =
        std::sync::LazyLock::new(|| {
            ["uuid", "rand", "now(", "token_", "time_ns"].map(memchr::memmem::Finder::new)
        });
    WORDS.iter().any(|w| w.find(text.as_bytes()).is_some())
}

/// Whether a function of the file named `name` returns a new value each call: `return
/// uuid.uuid4().hex` in `def new_idempotency_key()`.
fn returns_fresh(idx: &NodeIndex<'_>, name: &str, src: &str) -> bool {
    !name.is_empty()
        && idx.returned_by(name, src).into_iter().any(|v| {
            std::iter::once(v)
                .filter(|v| v.kind() == kinds::CALL)
                .chain(idx.within(v, kinds::CALL).iter().copied())
                .any(|c| fresh(syntax::callee_name(c, src)))
        })
}

/// A property named for the key that makes it on every read (`@property def idempotency_key(
/// self): return f"payout-{self.payout_id}-{uuid4().hex[:12]}"`), read by the file: each
/// attempt, each run and each reader of the same record gets another key. A `cached_property`
/// makes it once; a name that asks for a new one (`new_key`) says what it does.
fn key_property_made_on_read(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    let mut found = Vec::new();
    for &decorated in idx.all(kinds::DECORATED_DEFINITION) {
        let Some(func) = decorated
            .field("definition")
            .filter(|d| d.kind() == kinds::FUNCTION_DEFINITION)
        else {
            continue;
        };
        let name = syntax::function_name(func, src);
        let property = idx
            .within(decorated, kinds::DECORATOR)
            .iter()
            .any(|d| syntax::text(*d, src).trim() == "@property");
        if !property
            || !names_key(name)
            || syntax::name_words(name)
                .iter()
                .any(|w| matches!(w.as_str(), "new" | "fresh" | "generate" | "random"))
        {
            continue;
        }
        let Some(made) = idx
            .within(func, kinds::RETURN_STATEMENT)
            .iter()
            .filter_map(|r| syntax::return_value(*r))
            .find(|v| names_fresh(syntax::text(*v, src)) && fresh_call(*v, idx, src).is_some())
        else {
            continue;
        };
        let (first, last) = syntax::lines(made);
        if !cx.touches_added(first, last) {
            continue;
        }
        // Read elsewhere in the file as what a call sends (`idempotency_key=claim.
        // idempotency_key`, `{"Idempotency-Key": req.idempotency_key}`), and never stored on a
        // record (`withdrawal.idempotency_key = req.idempotency_key`, `Refund.objects.create(
        // idempotency_key=req.idempotency_key)`), which would make it once.
        let reads: Vec<Node<'_>> = idx
            .all(kinds::ATTRIBUTE)
            .iter()
            .copied()
            .filter(|a| {
                !syntax::contains(func, *a)
                    && a.field("attribute")
                        .is_some_and(|n| syntax::text(n, src) == name)
            })
            .collect();
        let stored_once = reads.iter().any(|a| {
            let parent = a.parent();
            parent.is_some_and(|p| {
                p.kind() == kinds::ASSIGNMENT
                    && p.field("right").is_some_and(|r| r.id() == a.id())
                    && p.field("left")
                        .is_some_and(|l| matches!(l.kind(), kinds::ATTRIBUTE | kinds::SUBSCRIPT))
                    || p.kind() == kinds::KEYWORD_ARGUMENT
                        && p.parent()
                            .and_then(|args| args.parent())
                            .is_some_and(|call| {
                                call.kind() == kinds::CALL && {
                                    let callee = syntax::callee_name(call, src);
                                    callee.starts_with(|c: char| c.is_ascii_uppercase())
                                        || matches!(callee, "create" | "save" | "update" | "insert")
                                }
                            })
            })
        });
        let sent = reads.iter().find(|a| {
            a.parent()
                .is_some_and(|p| matches!(p.kind(), kinds::KEYWORD_ARGUMENT | kinds::PAIR))
        });
        let Some(read) = sent.filter(|_| !stored_once) else {
            continue;
        };
        let Some(fresh) = fresh_call(made, idx, src) else {
            continue;
        };
        found.push((func, made, fresh, syntax::lines(*read).0));
    }
    for (func, made, fresh, read_line) in found {
        let qualname = facts::qualname(func, idx, src);
        let finding = cx
            .report_lines(
                &RULE,
                syntax::lines(made),
                format!("key-property {}", syntax::normalized(made, src)),
            )
            .arg("key", qualname.clone())
            .arg("made", syntax::normalized(fresh, src))
            .arg("read_line", read_line.to_string())
            .note("property");
        finding.function = qualname;
    }
}

/// The name an assignment site gives the key (`idempotency_key = ...`), which a fallback to a
/// fresh value may keep for the next attempt.
fn key_name<'s>(site: Node<'_>, src: &'s str) -> Option<&'s str> {
    (site.kind() == kinds::ASSIGNMENT)
        .then(|| site.field("left"))
        .flatten()
        .filter(|l| l.kind() == kinds::IDENTIFIER)
        .map(|l| syntax::text(l, src))
}

/// `stored or str(uuid4())`, `key if key else uuid4()`: a new value only where there is none
/// yet. It stays the same over the attempts when what it falls back from is kept: assigned
/// back (`key = key or uuid4()`), or read anew in each attempt (`cached or uuid4()`, which is
/// the stored key's business: IDEM001 looks at how it is stored). A parameter or a name set
/// before the loop and never kept (`headers["Idempotency-Key"] = idempotency_key or
/// str(uuid4())`) is still missing on the next attempt, which then sends another key.
fn stable_fallback(
    idx: &NodeIndex<'_>,
    attempt: &Attempt<'_>,
    call: Node<'_>,
    top: Node<'_>,
    assigned_to: Option<&str>,
    src: &str,
) -> bool {
    let Some(choice) = fallback_choice(call, top) else {
        return false;
    };
    // What the choice falls back from: the left of `or`, the value of `x if x else ...`.
    let Some(from) = choice.named_child(0) else {
        return true;
    };
    if from.kind() != kinds::IDENTIFIER {
        return true;
    }
    let name = syntax::text(from, src);
    assigned_to == Some(name)
        || idx.within(attempt.body, kinds::ASSIGNMENT).iter().any(|a| {
            a.field("left")
                .is_some_and(|l| syntax::text(l, src) == name)
        })
}

/// The `or` or conditional expression between `call` and `top` that makes it a fallback.
fn fallback_choice<'t>(call: Node<'t>, top: Node<'t>) -> Option<Node<'t>> {
    let mut at = Some(call);
    while let Some(node) = at.filter(|n| n.id() != top.id()) {
        at = node.parent();
        if let Some(p) = at.filter(|p| {
            matches!(
                p.kind(),
                kinds::BOOLEAN_OPERATOR | kinds::CONDITIONAL_EXPRESSION
            )
        }) {
            return Some(p);
        }
    }
    None
}

/// Whether the key is made only when none is kept, by an `if` inside the retried stretch:
/// one that tests the key itself (`if key is None: key = uuid4()`, `if not key:`), made on the
/// first attempt only; or one whose other branch takes the key kept from an earlier attempt
/// (`if attempt is not None: reference, amount = attempt["reference"], ...` / `else: reference
/// = f"AP-{bill_id}-{uuid4().hex}"`, stored before it is sent), which a retry finds and sends
/// again.
fn only_when_none_is_kept(
    idx: &NodeIndex<'_>,
    assignment: Node<'_>,
    body: Node<'_>,
    name: &str,
    src: &str,
) -> bool {
    let sets_name = |a: Node<'_>| {
        a.field("left").is_some_and(|l| match l.kind() {
            kinds::IDENTIFIER => syntax::text(l, src) == name,
            "pattern_list" | "tuple_pattern" | kinds::TUPLE => crate::python::named_children(l)
                .iter()
                .any(|n| n.kind() == kinds::IDENTIFIER && syntax::text(*n, src) == name),
            _ => false,
        })
    };
    let mut at = idx.enclosing(assignment, kinds::IF_STATEMENT);
    while let Some(stmt) = at.filter(|s| s.start_byte() >= body.start_byte()) {
        let condition = stmt.field("condition");
        if condition.is_some_and(|c| identifiers(syntax::text(c, src)).any(|w| w == name)) {
            return true;
        }
        let own = crate::python::named_children(stmt)
            .into_iter()
            .filter(|b| Some(b.id()) != condition.map(|c| c.id()))
            .find(|b| syntax::contains(*b, assignment));
        let kept = idx.within(stmt, kinds::ASSIGNMENT).iter().any(|&other| {
            !own.is_some_and(|b| syntax::contains(b, other))
                && sets_name(other)
                && other
                    .field("right")
                    .is_some_and(|r| fresh_call(r, idx, src).is_none())
        });
        if kept {
            return true;
        }
        // `if invoice.status == OPEN: invoice.reference = ...; invoice.status = PROCESSING`:
        // made on the record's move out of the state it tests, which a retry no longer finds.
        if let Some((object, _)) = name.rsplit_once('.')
            && condition.is_some_and(|c| {
                identifiers(syntax::text(c, src)).any(|w| {
                    w != name
                        && w.strip_prefix(object)
                            .is_some_and(|rest| rest.starts_with('.'))
                })
            })
            && idx.within(stmt, kinds::ASSIGNMENT).iter().any(|a| {
                a.field("left").is_some_and(|l| {
                    let text = syntax::text(l, src);
                    text.strip_prefix(object)
                        .and_then(|rest| rest.strip_prefix('.'))
                        .is_some_and(|attr| matches!(attr, "status" | "state"))
                })
            })
        {
            return true;
        }
        at = idx.enclosing(stmt, kinds::IF_STATEMENT);
    }
    false
}

/// The plain names a text reads, in order (`str(key)` gives `str`, `key`).
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .filter(|w| {
            w.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        })
}

/// A claim in SQL that moves a row's count of attempts on and writes it a new key at once
/// (`UPDATE payouts SET attempts = attempts + 1, idempotency_key = ? ... RETURNING *` with
/// `uuid.uuid4()` among the parameters): every claim, the one after a timeout among them,
/// sends under a key the provider has never seen. `COALESCE(idempotency_key, ?)` keeps the
/// first one, and is left alone.
fn key_replaced_by_the_claim(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    if !src.contains("UPDATE") && !src.contains("update ") {
        return;
    }
    for &call in idx.all(kinds::CALL) {
        if !matches!(
            syntax::callee_name(call, src),
            "execute" | "fetch" | "fetchrow" | "fetchval" | "fetch_one" | "fetch_all"
        ) {
            continue;
        }
        let args = syntax::positional_args(call);
        let Some(&sql) = args.first() else {
            continue;
        };
        if sql.kind() != kinds::STRING && sql.kind() != "concatenated_string" {
            continue;
        }
        let text = syntax::text(sql, src);
        let Some(column) = key_set_anew(text) else {
            continue;
        };
        let Some(fresh) = args[1..]
            .iter()
            .chain(syntax::keyword_args(call, src).iter().map(|(_, v)| v))
            .find_map(|a| {
                let t = syntax::text(*a, src);
                RANDOM.iter().find(|r| t.contains(&format!("{r}(")))
            })
        else {
            continue;
        };
        let function = facts::enclosing_qualname(idx, call, src);
        let finding = cx
            .report(&RULE, call)
            .arg("function", function.clone())
            .arg("column", column)
            .arg("fresh", format!("{fresh}()"))
            .note("claim");
        finding.function = function;
    }
}

/// The key column an SQL update sets to a new value beside moving a count of attempts on:
/// `SET attempts = attempts + 1, idempotency_key = ?`.
fn key_set_anew(sql: &str) -> Option<String> {
    let lower = sql.to_ascii_lowercase();
    let set = lower
        .find("update ")
        .and_then(|u| lower[u..].find(" set ").map(|s| u + s + 5))?;
    let rest = &lower[set..];
    let end = rest.find(" where ").unwrap_or(rest.len());
    let assignments = &rest[..end];
    let counts = assignments.split(',').any(|a| {
        let Some((col, value)) = a.split_once('=') else {
            return false;
        };
        let col = col.trim();
        [
            "attempts",
            "attempt",
            "tries",
            "retry_count",
            "retries",
            "attempt_count",
        ]
        .contains(&col)
            && value.replace(' ', "").starts_with(&format!("{col}+"))
    });
    if !counts {
        return None;
    }
    assignments.split(',').find_map(|a| {
        let (col, value) = a.split_once('=')?;
        let col = col.trim();
        let value = value.trim();
        let placeholder =
            value == "?" || value == "%s" || value.starts_with(':') || value.starts_with('$');
        ((col.contains("idempot") || col.ends_with("_key") || col == "key") && placeholder)
            .then(|| col.to_string())
    })
}
