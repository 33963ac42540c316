//! ERR001 broad-except-returns-none: `except Exception` (or bare, or `BaseException`) whose
//! handler ends the function with `None` where a result is expected, or the same written as
//! `with contextlib.suppress(Exception):`.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::review::Severity;
use crate::rules::facts::{FileFacts, FunctionFacts};
use crate::rules::{Check, Ctx, Gate, Local, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "ERR001",
    doc: include_str!("../../../rules/err/ERR001.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding starts from a broad `except` (or `suppress`) in a function, that gives the
/// caller `None`.
fn gate(s: &Scan<'_>) -> bool {
    let (idx, src) = (s.index(), s.src());
    idx.all(kinds::EXCEPT_CLAUSE).iter().any(|&clause| {
        swallowing_except(clause, idx, src).is_some()
            || family_lookup_none(clause, idx, src).is_some()
            || lookup_set_to_none(clause, idx, src).is_some()
    }) || imports_contextlib(s.facts)
        && idx
            .all(kinds::WITH_STATEMENT)
            .iter()
            .any(|&with| suppresses_to_none(with, idx, src).is_some())
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let contextlib = cx.facts.is_some_and(imports_contextlib);
    for &clause in idx.all(kinds::EXCEPT_CLAUSE) {
        if let Some(found) = lookup_set_to_none(clause, idx, src) {
            let func = idx.enclosing(clause, kinds::FUNCTION_DEFINITION);
            let qualname = func
                .map(|f| crate::rules::facts::qualname(f, idx, src))
                .unwrap_or_default();
            let function = cx.facts.and_then(|f| f.function(&qualname)).cloned();
            let on_path = cx.on_payment_path(function.as_ref());
            let caught = super::caught(clause, src);
            let finding = cx
                .report(&RULE, clause)
                .arg("caught", caught)
                .arg("function", qualname)
                .arg("lookup", syntax::normalized(found.call, src))
                .arg("result", syntax::text(found.result, src).to_string())
                .arg("test_line", syntax::lines(found.test).0.to_string())
                .note("lookup_none");
            if !syntax::is_broad_except(clause, src) {
                finding.note("family");
            }
            if !on_path {
                finding.severity(Severity::Important);
            }
        }
    }
    // A client's whole family of failures caught around a lookup that gives `None` for "not
    // found": its timeouts and 5xx are in the family, and only a caller that reads `None` as
    // "there is none" on its way to a payment is told.
    for &clause in idx.all(kinds::EXCEPT_CLAUSE) {
        let Some(func) = family_lookup_none(clause, idx, src) else {
            continue;
        };
        let qualname = crate::rules::facts::qualname(func, idx, src);
        let Some(function) = cx.facts.and_then(|f| f.function(&qualname)).cloned() else {
            continue;
        };
        if let Some((checker, checker_at)) = read_as_not_found(cx, &function) {
            let caught = super::caught(clause, src);
            report_not_found(cx, clause, caught, qualname, checker, checker_at).note("family");
        }
    }
    for (clause, func, caught) in swallowers(idx, src, contextlib) {
        let qualname = crate::rules::facts::qualname(func, idx, src);
        let function = cx.facts.and_then(|f| f.function(&qualname)).cloned();
        if clause.kind() == kinds::EXCEPT_CLAUSE && handler_returns_false(clause, func, idx) {
            if let Some(function) = &function
                && !claim_read_as_taken(cx, clause, function, &caught)
            {
                false_dropped(cx, clause, function, caught, None);
            }
            continue;
        }
        if clause.kind() == kinds::EXCEPT_CLAUSE
            && let Some(label) = handler_returns_a_failure_label(clause, func, idx, src)
        {
            if let Some(function) = &function {
                false_dropped(cx, clause, function, caught, Some(label));
            }
            continue;
        }
        // A lookup whose `None` for "not found" a payment's caller tests: the failure passes
        // for an answer.
        let not_found = function
            .as_ref()
            .filter(|_| clause.kind() == kinds::EXCEPT_CLAUSE)
            .and_then(|f| read_as_not_found(cx, f));
        if let Some((checker, checker_at)) = not_found {
            report_not_found(cx, clause, caught, qualname, checker, checker_at);
            continue;
        }
        let annotation = syntax::return_annotation(func, src)
            .filter(|a| !syntax::annotation_allows_none(a))
            .map(str::to_string);
        let caller = super::dereferencing_caller(cx, syntax::function_name(func, src));
        // A caller in the file that hands the result on, unchecked, to a write that records
        // the step done (`mark_fulfilled(order.id, shipment_id)`): the failure is recorded
        // as a success.
        let recorder = if caller.is_none() && clause.kind() == kinds::EXCEPT_CLAUSE {
            function
                .as_ref()
                .filter(|f| f.returns_value)
                .and_then(|f| handing_caller(idx, &f.name, src, |callee, _| marks_done(callee)))
        } else {
            None
        };
        // Or to a payment as its amount (`amount_cents = parse_amount(body.get("amount"))`,
        // then `service.refund(order_id, amount_cents, ...)`): the payment goes with `None`
        // for what it moves.
        let spender =
            if caller.is_none() && recorder.is_none() && clause.kind() == kinds::EXCEPT_CLAUSE {
                function.as_ref().filter(|f| f.returns_value).and_then(|f| {
                    handing_caller(idx, &f.name, src, |callee, var| {
                        cx.vocab.is_payment_operation(callee)
                            && crate::rules::pay::price_from_client::money_slot(var)
                    })
                })
            } else {
                None
            };
        // A function that moves money and gives a result on success: `None` on every failure is
        // then its contract, and no caller can tell a decline from an outage, even with no
        // annotation or caller in sight to prove the result is used.
        let moves_money_with_a_result = function.as_ref().is_some_and(|f| {
            f.returns_value
                && (f.payment
                    || cx.vocab.is_payment_operation(&f.name)
                    || (f.http && cx.facts.is_some_and(|file| file.payment_module)))
        });
        // A payment's status read from the provider (`payment_status(payment_id)` over the
        // client's `get_payment`): `None` for an outage reads as "no status", and the caller
        // settles the payment as failed while it may have been captured.
        let reads_payment_state = function.as_ref().is_some_and(|f| {
            f.returns_value
                && f.name
                    .split('_')
                    .any(|w| w.eq_ignore_ascii_case("status") || w.eq_ignore_ascii_case("state"))
                && cx
                    .facts
                    .is_some_and(|file| file.payment_module && reaches_http_in_file(file, f, 2))
        });
        if annotation.is_none()
            && caller.is_none()
            && recorder.is_none()
            && spender.is_none()
            && !moves_money_with_a_result
            && !reads_payment_state
        {
            // Nothing says a result was expected: a `-> None` helper may well swallow.
            continue;
        }
        let raises_on = clause.kind() == kinds::EXCEPT_CLAUSE
            && !handler_returns_none(clause, func, idx, src, &mut |t| cx.never_returns(t));
        if raises_on {
            continue;
        }
        let only_by_purpose =
            annotation.is_none() && caller.is_none() && recorder.is_none() && spender.is_none();
        let on_path = cx.on_payment_path(function.as_ref());
        let before_is_clean = cx
            .other_facts
            .and_then(|f| f.function(&qualname))
            .is_some_and(|f| !f.may_return_none() && f.none_returns.is_empty());
        let unawaited = unawaited_raising_helper(cx, clause);
        let finding = cx
            .report(&RULE, clause)
            .arg("caught", caught)
            .arg("function", qualname);
        if before_is_clean {
            finding.note("contract");
        }
        if !on_path {
            // A step recorded done on a failure is worth fixing on any path.
            let severity = if recorder.is_some() || spender.is_some() {
                Severity::Important
            } else {
                Severity::Nit
            };
            finding.severity(severity);
        } else if only_by_purpose {
            // What the result is used for is not in sight: worth fixing, not yet proven to
            // break a caller.
            let why = if moves_money_with_a_result {
                "value_or_none"
            } else {
                "status_or_none"
            };
            finding.severity(Severity::Important).note(why);
        }
        if function.as_ref().is_some_and(|f| f.http) {
            finding.note("http");
        }
        if let Some(annotation) = annotation {
            finding.arg("annotation", annotation).note("annotation");
        }
        if let Some(helper) = unawaited {
            finding.arg("helper", helper).note("not_awaited");
        }
        if let Some(caller) = caller {
            caller.cite(finding);
        }
        if let Some(recorded) = recorder {
            finding
                .arg("recorder", recorded.function)
                .arg("recorded_at", recorded.line.to_string())
                .arg("record", recorded.record)
                .note("recorded");
        }
        if let Some(spent) = spender {
            finding
                .arg("spender", spent.function)
                .arg("spent_at", spent.line.to_string())
                .arg("payment", spent.record)
                .note("amount");
        }
    }
}

/// A caller that records a step done with what a swallowing function returned, or pays with it.
struct Recorded {
    function: String,
    line: u32,
    /// The recording call as written (`self.orders.mark_fulfilled`).
    record: String,
}

/// The first call of `name` in the file whose result is bound and then handed, with no test
/// of it in between, to a call `takes` accepts by its name and the bound name: one that marks
/// the step done (`mark_fulfilled(order.id, shipment_id)`, `record_shipped(...)`), where `None`
/// from the swallowed failure is written down as the step's result. A result stored as an
/// optional field (`order.receipt_url = url`) is not such a mark.
fn handing_caller(
    idx: &NodeIndex<'_>,
    name: &str,
    src: &str,
    takes: impl Fn(&str, &str) -> bool,
) -> Option<Recorded> {
    idx.all(kinds::CALL).iter().find_map(|&call| {
        if idx.callee_name(call, src) != name {
            return None;
        }
        let var = syntax::bound_name(call, src)?;
        let func = idx.enclosing(call, kinds::FUNCTION_DEFINITION)?;
        let after = call.end_byte();
        let record = idx.within(func, kinds::CALL).iter().copied().find(|c| {
            c.start_byte() > after
                && takes(idx.callee_name(*c, src), var)
                && c.field("arguments").is_some_and(|args| {
                    crate::python::named_children(args)
                        .into_iter()
                        .any(|a| a.kind() == kinds::IDENTIFIER && syntax::text(a, src) == var)
                })
                && super::owned_by(*c, func, idx)
        })?;
        let tested = idx.within(func, kinds::IF_STATEMENT).iter().any(|s| {
            s.start_byte() > after
                && s.start_byte() < record.start_byte()
                && s.field("condition").is_some_and(|c| {
                    syntax::descendants(c, &[kinds::IDENTIFIER])
                        .into_iter()
                        .any(|n| syntax::text(n, src) == var)
                })
        });
        (!tested).then(|| Recorded {
            function: crate::rules::facts::qualname(func, idx, src),
            line: syntax::lines(record).0,
            record: syntax::callee(record, src).to_string(),
        })
    })
}

/// A call's name that records a step as done: `mark_fulfilled`, `record_shipped`,
/// `set_delivered`, `complete_order`.
fn marks_done(name: &str) -> bool {
    let words = syntax::name_words(name);
    let done = |w: &str| {
        matches!(
            w,
            "fulfilled"
                | "shipped"
                | "delivered"
                | "paid"
                | "captured"
                | "settled"
                | "refunded"
                | "funded"
                | "completed"
                | "complete"
                | "done"
                | "succeeded"
                | "confirmed"
                | "dispatched"
                | "issued"
                | "sent"
        )
    };
    words.len() >= 2 && words.iter().any(|w| done(w))
        || words.first().is_some_and(|w| w == "complete")
}

/// The finding of a lookup whose failure gives what "not found" gives, tested by `checker`.
fn report_not_found<'c, 'a>(
    cx: &'c mut Ctx<'a>,
    clause: Node<'_>,
    caught: String,
    qualname: String,
    checker: String,
    checker_at: String,
) -> &'c mut crate::review::Finding {
    let webhook = syntax::names_a_notification(&checker);
    let finding = cx
        .report(&RULE, clause)
        .arg("caught", caught)
        .arg("function", qualname)
        .arg("checker", checker)
        .arg("checker_at", checker_at)
        .note("not_found");
    if webhook {
        finding.note("webhook");
    }
    finding
}

/// The function an `except` of a client's whole family of failures (`except StripeError`,
/// `except MollieError` beside `MollieClient`) gives `None` from, where its `try` reads money
/// already moved (`list_transfers`, `list_customer_payments`). A broad `except` is read by
/// `swallowing_except`.
fn family_lookup_none<'t>(clause: Node<'t>, idx: &NodeIndex<'t>, src: &str) -> Option<Node<'t>> {
    if syntax::is_broad_except(clause, src) {
        return None;
    }
    let func = idx.enclosing(clause, kinds::FUNCTION_DEFINITION)?;
    // The handler first: most give no `None`, and the calls of the `try` are not read.
    if !handler_returns_none(clause, func, idx, src, &mut |_| false) {
        return None;
    }
    let body = syntax::try_of(clause)?.field("body")?;
    // Or a function named for that read (`find_payout`) whose `try` asks the provider
    // (`self._http.get("/v1/payouts", ...)`).
    let named_for_it = super::lookup_failure_read_as_empty::names_a_read_of_money_moved(
        syntax::function_name(func, src),
    );
    idx.within(body, kinds::CALL)
        .iter()
        .any(|&call| {
            super::lookup_failure_read_as_empty::reads_money_moved(call, src)
                || named_for_it && syntax::receiver(call).is_some()
        })
        .then_some(())?;
    // Asked last: a family is told from the file's text, the dearest test here.
    catches_a_family(clause, src).then_some(func)
}

/// Whether the clause catches a client's whole family of failures, its timeouts with it.
fn catches_a_family(clause: Node<'_>, src: &str) -> bool {
    super::timeout_read_as_failure::catches_timeout(clause, src).is_some()
}

/// The caller that tests the result of a lookup of a payment or a payment's record
/// (`find_transfer`, `_find_gateway_refund`, by the vocabulary) on its way to a payment, where
/// the lookup returns values and `None` (nothing found): its qualified name and place. A lookup
/// of a customer or a rate is left to the reading of every `None`.
fn read_as_not_found(cx: &Ctx<'_>, function: &FunctionFacts) -> Option<(String, String)> {
    let name = &function.name;
    let lookup = |name: &str| {
        syntax::name_words(name).first().is_some_and(|w| {
            matches!(
                w.as_str(),
                "find" | "lookup" | "look" | "search" | "get" | "fetch" | "retrieve" | "locate"
            )
        })
    };
    let object = |name: &str| cx.vocab.is_payment_operation(name) || cx.vocab.is_entity(name);
    // Or a function that looks the payment up for its caller (`_conflicting_payment(exc)`
    // returning `self.get_payment(existing_id)`), whatever it is named.
    let looks_up = lookup(name) && object(name)
        || function
            .callees
            .iter()
            .any(|c| lookup(c) && object(c) && *c != *name);
    if !looks_up || !function.returns_value || function.none_returns.is_empty() {
        return None;
    }
    cx.change
        .calls_named(cx.side, &function.name)
        .find(|(file, call)| {
            call.checked
                && !file.is_test
                && file.function(&call.function).is_some_and(|caller| {
                    // A webhook's handler (`handle_webhook`): "not found" answers the provider
                    // that the notification was taken, and it is never sent again.
                    // Or makes one itself (`create_payment`, whose conflict it settles).
                    caller.payment
                        || cx.vocab.is_payment_operation(&caller.name)
                        || syntax::names_a_notification(&caller.name)
                        || cx
                            .change
                            .reach_surely(
                                cx.side,
                                &caller.name,
                                Some(std::slice::from_ref(&caller.qualname)),
                                2,
                                &crate::rules::reach::PAYMENT,
                            )
                            .is_some()
                })
        })
        .map(|(file, call)| {
            (
                call.function.to_string(),
                format!("{}:{}", file.path, call.line),
            )
        })
}

/// A broad `except` whose handler returns `False` from a provider call (a function that sends a
/// request, itself or through its file's helpers), and a caller in the change that drops what
/// it returns (`client.reverse_redemption(...)` as a statement, then `status = "reversed"`):
/// the failure is seen by no one. Where the result is kept, `False` is a contract the caller
/// can check, and nothing is said.
///
/// With `label`, the handler returns a word for the failure instead (`return "error"`), and
/// only a caller that keeps it to log it, the webhook's endpoint, is read: a caller that
/// drops a label drops a result it was never asked to read.
fn false_dropped(
    cx: &mut Ctx<'_>,
    clause: Node<'_>,
    function: &FunctionFacts,
    caught: String,
    label: Option<String>,
) {
    let Some(file) = cx.facts else {
        return;
    };
    // `send_receipt(...) -> bool`: what it tells of is no payment, unless it applies the
    // provider's notification for a webhook (read below).
    let beside = crate::rules::pay::beside_the_money(&function.name);
    // Or it hands the provider's client a request (`self.gateway.add_text_evidence(...)`), the
    // client living in another module.
    let calls_a_provider = file.calls.iter().any(|c| {
        *c.function == *function.qualname
            && c.receiver().is_some_and(|r| {
                let last = r.rsplit('.').next().unwrap_or(r).trim_start_matches('_');
                let last = last.to_ascii_lowercase();
                [
                    "gateway",
                    "client",
                    "provider",
                    "processor",
                    "psp",
                    "acquirer",
                ]
                .iter()
                .any(|w| last.contains(w))
            })
    });
    let sends_http = reaches_http_in_file(file, function, 2);
    let sends = sends_http || function.payment || calls_a_provider;
    // Or it applies a provider's notification, and the caller that drops its answer is the
    // webhook's endpoint: the provider is told the event was taken and never sends it again.
    let notified = syntax::names_a_notification;
    // An endpoint that keeps the answer only to log it (`changed = await handle(note)`, then
    // `log.info("applied=%s", changed)`) drops it as surely.
    let Some((dropper_file, dropper)) =
        cx.change
            .calls_named(cx.side, &function.name)
            .find(|(f, c)| {
                let logged_only = c.binding.is_some()
                    && !c.checked
                    && c.deref_line.is_none()
                    && notified(&c.function);
                (c.discarded && label.is_none() || logged_only)
                    && !f.is_test
                    && *c.function != *function.qualname
            })
    else {
        return;
    };
    // Read as before the provider's client counted: a handler of the notification may well ask
    // the client about it.
    let webhook = !sends_http && notified(&dropper.function) && {
        let owner = function.qualname.rsplit_once('.').map_or("", |(c, _)| c);
        notified(&function.name) || notified(owner) || notified(&file.module)
    };
    // A receipt's mailer in a webhooks module is beside the money; the handler the webhook
    // applies the notification with (`handle_notification`) is not.
    if !sends && !webhook || beside && !(webhook && notified(&function.name)) {
        return;
    }
    if label.is_some() && !webhook {
        return;
    }
    let payment = |name: &str| cx.vocab.is_payment_operation(name);
    let moves_money = function.payment
        || file.payment_module
        || dropper_file.payment_module
        || payment(&function.name)
        || payment(&dropper.function);
    let dropped_at = format!("{}:{}", dropper_file.path, dropper.line);
    let dropped_by = if dropper.function.is_empty() {
        "module code".to_string()
    } else {
        dropper.function.to_string()
    };
    let finding = cx
        .report(&RULE, clause)
        .arg("caught", caught)
        .arg("function", function.qualname.clone())
        .arg("dropped_by", dropped_by)
        .arg("dropped_at", dropped_at);
    match label {
        Some(label) => finding.arg("label", label).note("label_dropped"),
        None => finding.note("false_dropped"),
    };
    if webhook {
        finding.note("webhook");
    }
    if !moves_money && !webhook {
        finding.severity(Severity::Important);
    }
}

/// A claim (`return bool(self.redis.set(key, token, nx=True, ex=ttl))`, `cache.add(...)`, a
/// lock's `acquire`) whose broad `except` returns `False`: `False` is also what it returns when
/// another worker holds the claim, so an outage of the store reads as "taken", and every caller
/// skips its work quietly for as long as the store is down: nothing raises, retries or alerts,
/// and what was due (a collection, a payout) is never done. Reported with the first caller in
/// the change that acts on the answer.
fn claim_read_as_taken(
    cx: &mut Ctx<'_>,
    clause: Node<'_>,
    function: &FunctionFacts,
    caught: &str,
) -> bool {
    let Some(idx) = cx.index() else {
        return false;
    };
    let Some(body) = syntax::tried_body(clause) else {
        return false;
    };
    let claims = idx.within(body, kinds::RETURN_STATEMENT).iter().any(|r| {
        idx.within(*r, kinds::CALL).iter().any(|&call| {
            let method = cx.callee_name(call);
            if method == "acquire" {
                // A lock's (`self._lock.acquire(blocking=False)`), not a pool's or a
                // semaphore's, which wait rather than say "taken".
                return cx.call_text(call).receiver.is_some_and(|r| {
                    crate::rules::facts::last_name(r)
                        .to_ascii_lowercase()
                        .contains("lock")
                });
            }
            crate::rules::idem::cache_call(call, &*cx)
                .is_some_and(|c| c.op == crate::rules::idem::Op::AtomicWrite)
        })
    });
    if !claims || !idx.within(clause, kinds::RAISE_STATEMENT).is_empty() {
        return false;
    }
    let Some((caller_file, caller)) = cx
        .change
        .calls_named(cx.side, &function.name)
        .find(|(f, c)| !f.is_test && !c.discarded && *c.function != *function.qualname)
    else {
        return false;
    };
    // What the skipped work is worth: a payment's, where the claim or the code that takes it
    // (one caller up, for a context manager around the claim) moves money.
    let payment = |name: &str| cx.vocab.is_payment_operation(name);
    let caller_name = caller
        .function
        .rsplit('.')
        .next()
        .unwrap_or(&caller.function)
        .to_string();
    let moves_money = cx.facts.is_some_and(|f| f.payment_module)
        || caller_file.payment_module
        || payment(&caller.function)
        || !caller_name.is_empty()
            && cx
                .change
                .calls_named(cx.side, &caller_name)
                .any(|(f, c)| !f.is_test && (f.payment_module || payment(&c.function)));
    let caller_at = format!("{}:{}", caller_file.path, caller.line);
    let caller_fn = if caller.function.is_empty() {
        "module code".to_string()
    } else {
        caller.function.to_string()
    };
    let finding = cx
        .report(&RULE, clause)
        .arg("caught", caught.to_string())
        .arg("function", function.qualname.clone())
        .arg("taker", caller_fn)
        .arg("taker_at", caller_at)
        .note("claim_taken");
    if !moves_money {
        finding.severity(Severity::Important);
    }
    true
}

/// A lookup whose every failure is turned into "not found".
pub(super) struct LookupNone<'t> {
    /// `client.find_payout(settlement.reference)`.
    call: Node<'t>,
    /// `payout`, set to the lookup's answer in the `try` and to `None` in the handler.
    result: Node<'t>,
    /// The test of it after the `try` (`if payout is not None:`).
    test: Node<'t>,
}

/// `try: payout = client.find_payout(ref)` / `except Exception: payout = None`, and the code
/// after it tests `payout` for `None`: an outage, a bug, a 5xx all read as "no such payout",
/// and whatever the code does for a payment never made (send it again, mark it failed) it does
/// for one that may have been made.
pub(super) fn lookup_set_to_none<'t>(
    clause: Node<'t>,
    idx: &NodeIndex<'t>,
    src: &str,
) -> Option<LookupNone<'t>> {
    let broad = syntax::is_broad_except(clause, src);
    let body = syntax::except_body(clause)?;
    let statements = syntax::statements(body);
    // The handler only logs and sets the name to `None`.
    let set = statements.iter().find_map(|s| {
        let assignment = crate::python::named_children(*s)
            .into_iter()
            .next()
            .filter(|a| a.kind() == kinds::ASSIGNMENT)?;
        (assignment.field("right")?.kind() == kinds::NONE).then_some(assignment)
    })?;
    let result = set
        .field("left")
        .filter(|l| l.kind() == kinds::IDENTIFIER)?;
    let name = syntax::text(result, src);
    let others_only_log = statements.iter().all(|s| {
        syntax::contains(*s, set)
            || syntax::tail_call(*s).is_some_and(|t| {
                let callee = syntax::callee(t.call, src);
                callee.starts_with("log")
                    || callee.starts_with("self.log")
                    || callee.contains("logger")
            })
    });
    if !others_only_log {
        return None;
    }
    let try_statement = syntax::try_of(clause)?;
    let call = try_statement.field("body").and_then(|b| {
        idx.within(b, kinds::ASSIGNMENT).iter().find_map(|a| {
            let left = a.field("left")?;
            let value = crate::rules::idem::strip_await(a.field("right")?);
            (syntax::text(left, src) == name && value.kind() == kinds::CALL).then_some(value)
        })
    })?;
    // A read of something that may or may not exist: a payment, a payout, a refund.
    let callee = syntax::callee_name(call, src);
    let words = syntax::name_words(callee);
    let looks_up = [
        "find", "get", "fetch", "retrieve", "lookup", "search", "query",
    ]
    .iter()
    .any(|w| words.first().is_some_and(|f| f == w));
    if !looks_up || syntax::receiver(call).is_none() {
        return None;
    }
    // A family caught (`except BankApiError`) is read only around a read of money moved: a
    // client's lookup of a customer may well give "none" for its outage.
    let family_of_money = || {
        super::lookup_failure_read_as_empty::reads_money_moved(call, src)
            && catches_a_family(clause, src)
    };
    if !broad && !family_of_money() {
        return None;
    }
    let func = idx.enclosing(clause, kinds::FUNCTION_DEFINITION)?;
    let test = idx
        .within(func, kinds::IF_STATEMENT)
        .iter()
        .filter(|i| i.start_byte() >= try_statement.end_byte())
        .find_map(|i| {
            let condition = i.field("condition")?;
            let text = syntax::text(condition, src);
            let tests_it = text == name
                || text == format!("not {name}")
                || text == format!("{name} is None")
                || text == format!("{name} is not None");
            tests_it.then_some(condition)
        })?;
    if none_branch_keeps_it(test, name, src) {
        return None;
    }
    Some(LookupNone { call, result, test })
}

/// Whether the branch the code takes for `None` only leaves the record as it is (`if not
/// transfer: keep_pending(claim); return`): that is the handling the finding asks for, and
/// an outage then costs a later look, not a payment.
fn none_branch_keeps_it(test: Node<'_>, name: &str, src: &str) -> bool {
    let text = syntax::text(test, src);
    if text != format!("not {name}") && text != format!("{name} is None") {
        return false;
    }
    let Some(block) = test.parent().and_then(|i| i.field("consequence")) else {
        return false;
    };
    // A bare `return` gives the caller nothing to read; `return False` would be read.
    let ends = syntax::statements(block)
        .last()
        .is_some_and(|s| match s.kind() {
            kinds::RETURN_STATEMENT => syntax::returns_none(*s),
            kinds::RAISE_STATEMENT | kinds::CONTINUE_STATEMENT => true,
            _ => false,
        });
    ends && syntax::descendants(block, &[kinds::CALL])
        .iter()
        .all(|call| leaves_it_as_it_is(*call, src))
}

/// A call of a branch that changes nothing of the payment: logging, a metric, keeping the
/// record pending, asking again later, the error it raises.
fn leaves_it_as_it_is(call: Node<'_>, src: &str) -> bool {
    let callee = syntax::callee(call, src);
    if callee.starts_with("log") || callee.contains("logger") || callee.contains(".log") {
        return true;
    }
    let name = syntax::callee_name(call, src);
    // The error a `raise` builds.
    if name.starts_with(|c: char| c.is_ascii_uppercase()) {
        return true;
    }
    syntax::name_words(name).iter().any(|w| {
        matches!(
            w.as_str(),
            "keep"
                | "pending"
                | "defer"
                | "later"
                | "postpone"
                | "reschedule"
                | "requeue"
                | "snooze"
                | "incr"
                | "increment"
                | "metric"
                | "metrics"
                | "gauge"
                | "warn"
                | "warning"
        )
    }) || name == "retry"
}

/// The word for a failure the handler's own `return` gives (`return "error"`, `return
/// "failed"`), as written.
fn handler_returns_a_failure_label(
    clause: Node<'_>,
    func: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &str,
) -> Option<String> {
    idx.within(clause, kinds::RETURN_STATEMENT)
        .iter()
        .filter(|r| {
            idx.enclosing(**r, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| f.id() == func.id())
        })
        .filter_map(|r| r.named_child(0).filter(|v| v.kind() == kinds::STRING))
        .find(|v| {
            let text = syntax::text(*v, src);
            syntax::name_words(text.trim_matches(|c| c == '"' || c == '\''))
                .iter()
                .any(|w| matches!(w.as_str(), "error" | "failed" | "failure" | "fail"))
        })
        .map(|v| syntax::text(v, src).to_string())
}

/// Whether the handler's own `return` gives `False`.
fn handler_returns_false(clause: Node<'_>, func: Node<'_>, idx: &NodeIndex<'_>) -> bool {
    idx.within(clause, kinds::RETURN_STATEMENT)
        .iter()
        .filter(|r| {
            idx.enclosing(**r, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| f.id() == func.id())
        })
        .any(|r| r.named_child(0).is_some_and(|v| v.kind() == kinds::FALSE))
}

/// Whether `f` sends a request, itself or through functions of its file it calls, up to
/// `depth` calls down.
fn reaches_http_in_file(file: &FileFacts, f: &FunctionFacts, depth: usize) -> bool {
    f.http
        || depth > 0
            && file.functions.iter().any(|g| {
                g.qualname != f.qualname
                    && f.callees.binary_search(&g.name).is_ok()
                    && reaches_http_in_file(file, g, depth - 1)
            })
}

/// Where a function swallows every exception and gives `None`: a broad `except` whose handler
/// returns `None` or runs off the end, or `with contextlib.suppress(Exception):` as the
/// function's last statement. Each with its function and what it catches, as the message says
/// it, in the file's order.
fn swallowers<'t>(
    idx: &NodeIndex<'t>,
    src: &str,
    contextlib: bool,
) -> Vec<(Node<'t>, Node<'t>, String)> {
    let mut out = Vec::new();
    for &clause in idx.all(kinds::EXCEPT_CLAUSE) {
        if let Some(func) = swallowing_except(clause, idx, src) {
            let caught = super::caught(clause, src);
            out.push((clause, func, caught));
        }
    }
    if contextlib {
        for &with in idx.all(kinds::WITH_STATEMENT) {
            if let Some((func, caught)) = suppresses_to_none(with, idx, src) {
                out.push((with, func, caught));
            }
        }
        out.sort_by_key(|(node, _, _)| node.start_byte());
    }
    out
}

/// The function a broad `except` gives `None` from, if it does.
fn swallowing_except<'t>(clause: Node<'t>, idx: &NodeIndex<'t>, src: &str) -> Option<Node<'t>> {
    if !syntax::is_broad_except(clause, src) {
        return None;
    }
    idx.enclosing(clause, kinds::FUNCTION_DEFINITION)
        .filter(|func| {
            handler_returns_none(clause, *func, idx, src, &mut |_| false)
                || handler_returns_false(clause, *func, idx)
                || handler_returns_a_failure_label(clause, *func, idx, src).is_some()
        })
}

/// Whether the file can call `suppress` at all: it imports `contextlib` or from it.
fn imports_contextlib(facts: &crate::rules::facts::FileFacts) -> bool {
    facts
        .imports
        .iter()
        .any(|i| i.target.starts_with("contextlib"))
}

/// `with suppress(Exception):` (or `BaseException`) that is its function's last statement: an
/// exception inside skips the rest of the block, and the function then runs off its end.
fn suppresses_to_none<'t>(
    with: Node<'t>,
    idx: &NodeIndex<'t>,
    src: &str,
) -> Option<(Node<'t>, String)> {
    let call = crate::python::named_children(with)
        .into_iter()
        .filter(|c| c.kind() == "with_clause")
        .flat_map(crate::python::named_children)
        .filter_map(|item| item.field("value"))
        .find(|v| {
            v.kind() == kinds::CALL
                && syntax::callee_name(*v, src) == "suppress"
                && syntax::positional_args(*v).iter().any(|a| {
                    matches!(
                        crate::rules::facts::last_name(syntax::text(*a, src)),
                        "Exception" | "BaseException"
                    )
                })
        })?;
    let func = idx.enclosing(with, kinds::FUNCTION_DEFINITION)?;
    let last = func
        .field("body")
        .and_then(|b| syntax::statements(b).last().copied())?;
    (last.id() == with.id()).then(|| (func, format!("`with {}`", syntax::normalized(call, src))))
}

/// The handler's last statement calls an `async def` helper that would raise, without `await`:
/// the call only makes a coroutine, and the handler falls through to `None`.
fn unawaited_raising_helper(cx: &Ctx<'_>, clause: Node<'_>) -> Option<String> {
    let last = syntax::except_body(clause).and_then(|b| syntax::statements(b).last().copied())?;
    let tail = syntax::tail_call(last).filter(|t| !t.awaited)?;
    cx.never_returns(syntax::TailCall {
        awaited: true,
        ..tail
    })
    .then(|| syntax::callee(tail.call, cx.src()).to_string())
}

/// Whether the handler gives the caller `None`: an explicit `return`/`return None` in it, or a
/// handler that runs off the end of the function. A handler that ends by calling a helper
/// `ends` says never returns (`ErrorProvider.throw_api_error(str(e))`) does not: the gate, which
/// sees one file, says none does, and the check asks the change and the repository.
pub(super) fn handler_returns_none(
    clause: Node<'_>,
    func: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &str,
    ends: &mut dyn FnMut(syntax::TailCall<'_>) -> bool,
) -> bool {
    let own_returns = idx
        .within(clause, kinds::RETURN_STATEMENT)
        .iter()
        .filter(|r| {
            idx.enclosing(**r, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| f.id() == func.id())
        });
    if own_returns.clone().any(|r| syntax::returns_none(*r)) {
        return true;
    }
    if own_returns.count() > 0 {
        return false;
    }
    let Some(body) = syntax::except_body(clause) else {
        return false;
    };
    // Falling through only returns `None` if the `try` is the function's last statement, or
    // is followed only by `return None`.
    let try_stmt = clause.parent();
    let func_body = func.field("body");
    let statements = func_body.map(syntax::statements).unwrap_or_default();
    let ends_the_function = |t: Node<'_>| match statements.as_slice() {
        [.., last] if last.id() == t.id() => true,
        [.., before, last] => {
            before.id() == t.id()
                && last.kind() == kinds::RETURN_STATEMENT
                && syntax::returns_none(*last)
        }
        _ => false,
    };
    try_stmt.is_some_and(ends_the_function) && syntax::block_falls_through_unless(body, src, ends)
}
