//! ERR005 payment-failure-swallowed: a broad `except` around a step that moves money, or that
//! applies a payment event a provider or a broker delivered, whose handler only logs (or rolls
//! back) and lets the code go on as if the step had worked. Nothing records the failure and
//! nothing retries it; in a webhook view or a message consumer, returning normally also
//! acknowledges the event, and the sender never delivers it again.
//!
//! A handler that raises, answers with an error, nacks, records the failure (an assignment, a
//! call other than logging) or returns `None` or `False` (ERR001's case) is a decision, and is
//! left alone. So is a batch loop that logs one item's failure and goes on to the next: the item
//! keeps its state for the next run.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::review::Severity;
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "ERR005",
    doc: include_str!("../../../rules/err/ERR005.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a broad `except` in a function of code, not of a test, or one of the
/// database's failures in a handler of a delivery.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.index()
            .all(kinds::EXCEPT_CLAUSE)
            .iter()
            .any(|&c| broad(c, s.src()) || storage_failure(c, s.src()))
}

/// An `except` of the database's whole family of failures (`SQLAlchemyError`,
/// `DatabaseError`, `asyncpg.PostgresError`), not of a unique key turned away
/// (`IntegrityError`, a repeat already applied): in a handler of a delivery, the write that
/// applies it failed.
fn storage_failure(clause: Node<'_>, src: &str) -> bool {
    let types = syntax::except_types(clause);
    !types.is_empty()
        && types.iter().all(|t| {
            let text = syntax::text(*t, src);
            matches!(
                text.rsplit('.').next().unwrap_or(text),
                "SQLAlchemyError"
                    | "DBAPIError"
                    | "DatabaseError"
                    | "OperationalError"
                    | "InterfaceError"
                    | "PostgresError"
                    | "PyMongoError"
            )
        })
}

/// An `except` that catches everything, or a client's whole family of errors
/// (`GatewayError`, `requests.RequestException`): timeouts with them, after which the payment
/// may have gone through.
fn broad(clause: Node<'_>, src: &str) -> bool {
    syntax::is_broad_except(clause, src)
        || super::timeout_read_as_failure::catches_timeout(clause, src).is_some()
        || catches_a_refusal(clause, src)
}

/// An `except` of an error named for a payment the provider refused (`RefundRejected`,
/// `PaymentDeclined`, `PayoutFailed`): logged and passed over, the refusal is taken for a
/// payment made.
pub(super) fn catches_a_refusal(clause: Node<'_>, src: &str) -> bool {
    syntax::except_types(clause).iter().any(|t| {
        let name = syntax::text(*t, src);
        let words = syntax::name_words(name.rsplit('.').next().unwrap_or(name));
        let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
        has(&["rejected", "declined", "refused", "failed", "failure"])
            && has(&[
                "refund",
                "payment",
                "payout",
                "charge",
                "capture",
                "transfer",
                "withdrawal",
            ])
    })
}

/// Who delivered what a handler applies, and so who is told it was applied when it returns.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inbound {
    /// A webhook or notification view: the provider.
    Provider,
    /// A message consumer: the broker.
    Broker,
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    for &clause in idx.all(kinds::EXCEPT_CLAUSE) {
        let storage = !broad(clause, src) && storage_failure(clause, src);
        if !broad(clause, src) && !storage {
            continue;
        }
        let Some(func) = idx.enclosing(clause, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let Some(handler) = syntax::except_body(clause) else {
            continue;
        };
        if let Some(zeroed) = zeroed_charge(handler, src) {
            report_zeroed(cx, idx, clause, func, zeroed);
            continue;
        }
        let Some(locals) = only_logs(handler, src) else {
            continue;
        };
        // `return await self._defer(refund, exc.code)`: the failure is handed on to be kept.
        if hands_on_the_error(clause, handler, src) {
            continue;
        }
        // `except OutcomeUnknown: log; return refund`: the step may have worked, and the
        // record is left as it was for the notification or the reconciliation to decide; the
        // success recorded after the `try` is skipped. Not in a provider's webhook, where the
        // normal answer tells the provider the notification was taken, and nothing is left to
        // decide it: the provider never sends it again.
        let inbound = inbound(cx, idx, func);
        // Outside a delivery's handler a database failure logged is another matter: what is
        // written stays as it was for the next run.
        if storage && inbound.is_none() {
            continue;
        }
        if unknown_outcome_only(clause, src)
            && !syntax::block_falls_through(handler, src)
            && inbound != Some(Inbound::Provider)
        {
            continue;
        }
        // Asked only of the few handlers that swallow: tree-sitter finds a parent from the root.
        let Some(try_statement) = syntax::try_of(clause) else {
            continue;
        };
        // A family caught after its timeouts were (`except GatewayUnavailable: ...` first):
        // what is left of it are refusals.
        if !syntax::is_broad_except(clause, src)
            && super::timeout_read_as_failure::caught_earlier(try_statement, clause, src)
        {
            continue;
        }
        let Some(body) = try_statement.field("body") else {
            continue;
        };
        // A family caught by name with an `else:` for the work that needs the step: the code
        // does not go on as if it had worked (`except StripeError: log` then `else: create`).
        if !syntax::is_broad_except(clause, src)
            && crate::python::named_children(try_statement)
                .iter()
                .any(|c| c.kind() == kinds::ELSE_CLAUSE)
        {
            continue;
        }
        let after = src
            .get(try_statement.end_byte()..func.end_byte())
            .unwrap_or("");
        // `except PayPalUnavailable: log` and then, on both ways, `sub.settlement_requested_at =
        // utcnow()` answered `{"status": "processing"}`: what follows records the step as asked
        // for, not as done, which is what an unknown outcome is.
        if unknown_outcome_only(clause, src)
            && inbound != Some(Inbound::Provider)
            && left_pending(after)
        {
            continue;
        }
        if locals.iter().any(|l| {
            decided_on(after, l) && !only_logged_after(idx, func, try_statement.end_byte(), l, src)
        }) {
            continue;
        }
        if inbound == Some(Inbound::Broker) && skips_the_ack(idx, handler, try_statement, func, src)
        {
            continue;
        }
        // `capture_status = "failed"` answered to the caller of an API: the failure is kept. A
        // provider's callback is answered by its status code, which is what `decided_on` reads.
        if inbound.is_none() && keeps_a_failure(handler, src) {
            continue;
        }
        // A task run apart whose last word this is: nothing goes on after it as if the step had
        // worked, and the step keeps its own state for whoever runs it next.
        if inbound.is_none() && after.trim().is_empty() && detached(idx, func, src) {
            continue;
        }
        let Some((step, pays)) = step_of(cx, idx, func, body, inbound.is_some()) else {
            marker_moved_on(cx, idx, clause, try_statement, body);
            continue;
        };
        if inbound.is_none() {
            let name = syntax::function_name(func, src);
            // A batch loop leaves the failed item as it was for the next run; a notification
            // of its own is beside the money.
            if !pays || in_a_loop(idx, clause, func) || beside_the_money(name) {
                continue;
            }
        }
        let qualname = facts::qualname(func, idx, src);
        let payment_module = cx.facts.is_some_and(|f| f.payment_module);
        let refusal = !storage
            && !syntax::is_broad_except(clause, src)
            && super::timeout_read_as_failure::catches_timeout(clause, src).is_none();
        let finding = cx
            .report(&RULE, clause)
            .arg("function", qualname)
            .arg("step", step.0)
            .arg("step_line", step.1.to_string());
        let caught: Vec<&str> = syntax::except_types(clause)
            .into_iter()
            .map(|t| syntax::text(t, src))
            .collect();
        // `except MollieUnavailable`, `except httpx.ReadTimeout`: no family, no refusal, but
        // the provider's silence.
        let unanswered = !refusal
            && !syntax::is_broad_except(clause, src)
            && caught.iter().all(|t| {
                let last = t.rsplit('.').next().unwrap_or(t);
                super::timeout_read_as_failure::unavailable(last)
                    || super::timeout_read_as_failure::names_a_timeout(last)
            });
        if storage {
            finding.arg("caught", caught.join(", ")).note("storage");
        } else if refusal {
            finding.arg("caught", caught.join(", ")).note("refusal");
        } else if unanswered {
            finding.arg("caught", caught.join(", ")).note("unanswered");
        }
        match inbound {
            Some(Inbound::Provider) => finding.note("provider"),
            Some(Inbound::Broker) => finding.note("broker"),
            None => finding.note("step"),
        };
        if !pays && !payment_module {
            finding.severity(Severity::Important);
        }
    }
}

/// Whether the file only ever hands `func` to a spawner of a background task
/// (`app.add_task(_capture_now(...))`, `asyncio.create_task(...)`, FastAPI's
/// `background_tasks.add_task(send_receipt, ...)`) and never calls it to go on with what it did.
fn detached(idx: &NodeIndex<'_>, func: Node<'_>, src: &str) -> bool {
    let name = syntax::function_name(func, src);
    let spawner = |call: Node<'_>| {
        matches!(
            syntax::callee_name(call, src),
            "add_task"
                | "create_task"
                | "ensure_future"
                | "spawn"
                | "start_soon"
                | "run_coroutine_threadsafe"
        )
    };
    let mut spawned = false;
    for &call in idx.all(kinds::CALL) {
        if spawner(call) {
            spawned |= syntax::positional_args(call).iter().any(|a| {
                (a.kind() == kinds::IDENTIFIER && syntax::text(*a, src) == name)
                    || (a.kind() == kinds::CALL && syntax::callee_name(*a, src) == name)
            });
        } else if syntax::callee_name(call, src) == name
            && !call
                .parent()
                .and_then(|list| list.parent())
                .is_some_and(spawner)
        {
            return false;
        }
    }
    spawned
}

/// Whether a consumer's handler `continue`s past the acknowledgement that follows its `try`
/// (`sqs.delete_message(...)` after it): the message is left to come back, not swallowed.
/// `if charged_back != payment.amount_charged_back_cents:` around `try: sync(...) except
/// Exception: log` and then `payment.amount_charged_back_cents = charged_back`: the failure is
/// passed over and the mark the `if` reads to decide whether the step is due is moved on all the
/// same, so the step is never tried again (a chargeback never applied, a refund never synced).
fn marker_moved_on(
    cx: &mut Ctx<'_>,
    idx: &NodeIndex<'_>,
    clause: Node<'_>,
    try_statement: Node<'_>,
    body: Node<'_>,
) {
    let src = cx.src();
    let Some(block) = try_statement.parent() else {
        return;
    };
    let Some(guard) = block
        .parent()
        .filter(|p| p.kind() == kinds::IF_STATEMENT)
        .filter(|p| p.field("consequence").is_some_and(|c| c.id() == block.id()))
    else {
        return;
    };
    let Some(condition) = guard.field("condition") else {
        return;
    };
    let Some(step) = idx.within(body, kinds::CALL).first().copied() else {
        return;
    };
    let read: Vec<&str> = std::iter::once(condition)
        .chain(idx.within(condition, kinds::ATTRIBUTE).iter().copied())
        .filter(|n| n.kind() == kinds::ATTRIBUTE)
        .map(|n| syntax::text(n, src))
        .collect();
    let mut next = try_statement.next_named_sibling();
    while let Some(stmt) = next {
        let assignment = stmt.named_child(0).filter(|a| {
            stmt.kind() == kinds::EXPRESSION_STATEMENT && a.kind() == kinds::ASSIGNMENT
        });
        if let Some(mark) = assignment.and_then(|a| a.field("left"))
            && mark.kind() == kinds::ATTRIBUTE
            && read.contains(&syntax::text(mark, src))
        {
            let function = facts::enclosing_qualname(idx, clause, src);
            let finding = cx
                .report(&RULE, clause)
                .arg("function", function.clone())
                .arg("step", syntax::callee(step, src).to_string())
                .arg("step_line", syntax::lines(step).0.to_string())
                .arg("mark", syntax::text(mark, src).to_string())
                .arg("mark_line", syntax::lines(stmt).0.to_string())
                .arg("guard_line", syntax::lines(guard).0.to_string())
                .note("marker")
                .severity(Severity::Important);
            finding.function = function;
            return;
        }
        next = stmt.next_named_sibling();
    }
}

/// Whether the clause catches only errors of an unknown outcome (`OutcomeUnknown`,
/// `GatewayUnavailable`, a timeout).
fn unknown_outcome_only(clause: Node<'_>, src: &str) -> bool {
    let types = syntax::except_types(clause);
    !types.is_empty()
        && types.iter().all(|t| {
            let name = syntax::text(*t, src);
            let last = name.rsplit('.').next().unwrap_or(name);
            super::timeout_read_as_failure::unavailable(last)
                || super::timeout_read_as_failure::names_a_timeout(last)
        })
}

/// Whether the code after a `try` records its step as under way and never as done: it speaks of
/// a request made or a state pending (`settlement_requested_at`, `"processing"`), and of no
/// payment made (`paid`, `captured`, `succeeded`).
fn left_pending(after: &str) -> bool {
    // Comments say what another path does (`# the notification settled it`): the code only.
    let lower: String = after
        .split('\n')
        .map(|line| line.split('#').next().unwrap_or(line))
        .collect::<Vec<_>>()
        .join("\n")
        .to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let has = |list: &[&str]| words.iter().any(|w| list.contains(w));
    has(&[
        "processing",
        "pending",
        "requested",
        "submitted",
        "awaiting",
        "unknown",
        "unconfirmed",
    ]) && !has(crate::rules::pay::success_recorded_before_result::SUCCESS)
}

fn skips_the_ack(
    idx: &NodeIndex<'_>,
    handler: Node<'_>,
    try_statement: Node<'_>,
    func: Node<'_>,
    src: &str,
) -> bool {
    let continues = syntax::statements(handler)
        .iter()
        .any(|s| s.kind() == kinds::CONTINUE_STATEMENT);
    continues
        && idx.within(func, kinds::CALL).iter().any(|&c| {
            let parts = idx.call_text(c, src);
            c.start_byte() > try_statement.end_byte()
                && super::ack_before_handling::acknowledges(parts.name, parts.receiver)
        })
}

/// `fare = 0`, `amount = Decimal("0")` in a handler that otherwise only logs: what is owed,
/// made nothing.
fn zeroed_charge<'t>(handler: Node<'t>, src: &str) -> Option<Node<'t>> {
    let statements = syntax::statements(handler);
    let logged = |s: &Node<'_>| {
        s.kind() == kinds::EXPRESSION_STATEMENT
            && s.named_child(0)
                .filter(|c| c.kind() == kinds::CALL)
                .is_some_and(|c| logs(syntax::callee(c, src)))
    };
    let zeroed: Vec<Node<'t>> = statements
        .iter()
        .filter_map(|s| {
            let a = s.named_child(0).filter(|a| {
                s.kind() == kinds::EXPRESSION_STATEMENT && a.kind() == kinds::ASSIGNMENT
            })?;
            let left = a.field("left").filter(|l| l.kind() == kinds::IDENTIFIER)?;
            let right = a.field("right")?;
            let zero = match right.kind() {
                kinds::INTEGER | kinds::FLOAT => syntax::text(right, src)
                    .bytes()
                    .all(|b| matches!(b, b'0' | b'.' | b'_')),
                kinds::CALL => {
                    syntax::callee_name(right, src) == "Decimal"
                        && syntax::positional_args(right).first().is_some_and(|v| {
                            let t = syntax::text(*v, src).trim_matches(['"', '\'']);
                            !t.is_empty() && t.bytes().all(|b| matches!(b, b'0' | b'.'))
                        })
                }
                _ => false,
            };
            let owed = crate::rules::pay::price_from_client::money_slot(syntax::text(left, src));
            (zero && owed).then_some(a)
        })
        .collect();
    let others_log =
        statements.len() == zeroed.len() + statements.iter().filter(|s| logged(s)).count();
    zeroed.first().copied().filter(|_| others_log)
}

/// A handler that makes what is owed nothing, where the function reads the name after the
/// `try`: the code charges (or captures, or invoices) nothing, as if that were the price.
fn report_zeroed(
    cx: &mut Ctx<'_>,
    idx: &NodeIndex<'_>,
    clause: Node<'_>,
    func: Node<'_>,
    zeroed: Node<'_>,
) {
    let src = cx.src();
    let Some(try_statement) = syntax::try_of(clause) else {
        return;
    };
    let Some(name) = zeroed.field("left").map(|l| syntax::text(l, src)) else {
        return;
    };
    let after = src
        .get(try_statement.end_byte()..func.end_byte())
        .unwrap_or("");
    if !syntax::has_word(after, name) {
        return;
    }
    let Some(step) = try_statement.field("body").and_then(|b| {
        idx.within(b, kinds::CALL)
            .iter()
            .copied()
            .find(|c| super::owned_by(*c, func, idx) && !logs(syntax::callee(*c, src)))
    }) else {
        return;
    };
    let qualname = facts::qualname(func, idx, src);
    // Where the function itself pays, or the file is about payments, the zero is charged.
    let pays = cx
        .facts
        .is_some_and(|f| f.payment_module || f.function(&qualname).is_some_and(|g| g.payment));
    let finding = cx
        .report(&RULE, clause)
        .arg("function", qualname)
        .arg("step", syntax::callee(step, src).to_string())
        .arg("step_line", syntax::lines(step).0.to_string())
        .arg("zeroed", syntax::normalized(zeroed, src))
        .arg("zeroed_line", syntax::lines(zeroed).0.to_string())
        .note("zeroed");
    if !pays {
        finding.severity(Severity::Important);
    }
}

/// Whether every statement of a handler only records that something failed: logging, a
/// rollback, `pass`, `continue`, a `return` of something that is no error (`return order`), or
/// a value given to a local name (`outcome = "error"`); with those names, which the code after
/// may still decide on.
fn only_logs<'s>(handler: Node<'_>, src: &'s str) -> Option<Vec<&'s str>> {
    let statements = syntax::statements(handler);
    let mut locals = Vec::new();
    let all = !statements.is_empty()
        && statements.iter().all(|s| match s.kind() {
            kinds::PASS_STATEMENT | kinds::CONTINUE_STATEMENT => true,
            kinds::EXPRESSION_STATEMENT => {
                let Some(e) = s.named_child(0).map(crate::rules::idem::strip_await) else {
                    return false;
                };
                match e.kind() {
                    // `failed.append(event["id"])`: kept in a local list, for the code after to
                    // decide on, or only to log.
                    kinds::CALL => {
                        let callee = syntax::callee(e, src);
                        match callee.split_once('.') {
                            Some((list, "append" | "add" | "extend"))
                                if !list.is_empty()
                                    && list
                                        .bytes()
                                        .all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
                            {
                                locals.push(list);
                                true
                            }
                            _ => logs(callee),
                        }
                    }
                    kinds::ASSIGNMENT => {
                        let local = e
                            .field("left")
                            .filter(|l| l.kind() == kinds::IDENTIFIER)
                            .zip(e.field("right"))
                            .filter(|(_, r)| r.kind() != kinds::CALL);
                        if let Some((left, _)) = local {
                            locals.push(syntax::text(left, src));
                        }
                        local.is_some()
                    }
                    _ => false,
                }
            }
            kinds::RETURN_STATEMENT => s.named_child(0).is_some_and(|v| no_error(v, src)),
            _ => false,
        });
    all.then_some(locals)
}

/// Whether a handler returns what a call makes of the error it caught
/// (`return await self._defer(refund, exc.code)`, `return self._park(payment, str(error))`): the
/// failure is recorded where the call goes, not dropped.
fn hands_on_the_error(clause: Node<'_>, handler: Node<'_>, src: &str) -> bool {
    let Some(alias) = syntax::except_alias(clause, src) else {
        return false;
    };
    syntax::statements(handler).iter().any(|s| {
        s.kind() == kinds::RETURN_STATEMENT
            && s.named_child(0)
                .map(crate::rules::idem::strip_await)
                .filter(|v| v.kind() == kinds::CALL)
                .is_some_and(|v| {
                    let callee = syntax::callee(v, src);
                    let lower = callee.to_ascii_lowercase();
                    !logs(callee)
                        // An answer to whoever called is not where a failure is kept.
                        && !["response", "json", "render"].iter().any(|w| lower.contains(w))
                        && v.field("arguments")
                            .is_some_and(|a| syntax::has_word(syntax::text(a, src), alias))
                })
    })
}

/// Whether a handler keeps the failure in a local (`capture_status = "failed"`).
fn keeps_a_failure(handler: Node<'_>, src: &str) -> bool {
    syntax::statements(handler).iter().any(|s| {
        s.named_child(0)
            .filter(|e| e.kind() == kinds::ASSIGNMENT)
            .and_then(|e| e.field("right"))
            .is_some_and(|r| r.kind() != kinds::CALL && !no_error(r, src))
    })
}

/// Whether code decides on a local name: an `if` or a `while` on it, a `raise` or an HTTP
/// status set from it (`resp.status = ...`, `status_code=`).
fn decided_on(code: &str, local: &str) -> bool {
    let names = |line: &str| {
        line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| w == local)
    };
    code.lines().any(|line| {
        let line = line.trim_start();
        names(line)
            && (line.starts_with("if ")
                || line.starts_with("elif ")
                || line.starts_with("while ")
                || line.starts_with("raise")
                || line.contains(".status =")
                || line.contains("status_code"))
    })
}

/// Whether the only decision taken on `local` after byte `after` of `func` is an `if` whose
/// body only logs (`if failed: logger.error("%d events were not applied", len(failed))`): no
/// `return`, `raise` or other test reads it, and the sender is answered as for a success.
fn only_logged_after(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    after: usize,
    local: &str,
    src: &str,
) -> bool {
    let names = |n: Node<'_>| syntax::has_word(syntax::text(n, src), local);
    let mut logged = false;
    for &branch in idx.within(func, kinds::IF_STATEMENT) {
        if branch.start_byte() < after || !branch.field("condition").is_some_and(names) {
            continue;
        }
        let only_logs = branch.field("alternative").is_none()
            && branch.field("consequence").is_some_and(|body| {
                syntax::statements(body).iter().all(|stmt| {
                    stmt.kind() == kinds::EXPRESSION_STATEMENT
                        && stmt
                            .named_child(0)
                            .filter(|c| c.kind() == kinds::CALL)
                            .is_some_and(|c| logs(syntax::callee(c, src)))
                })
            });
        if !only_logs {
            return false;
        }
        logged = true;
    }
    // Handed back (`return jsonify(events=failed), 500`, `raise BatchFailed(failed)`), or
    // tested by a loop.
    let later = |kind: &str| {
        idx.within(func, kind)
            .iter()
            .copied()
            .filter(move |n| n.start_byte() >= after)
    };
    let handed = later(kinds::RETURN_STATEMENT)
        .chain(later(kinds::RAISE_STATEMENT))
        .any(names)
        || later(kinds::WHILE_STATEMENT).any(|w| w.field("condition").is_some_and(names));
    logged && !handed
}

/// A call that records or undoes, not decides: logging, metrics, Sentry, a rollback.
fn logs(callee: &str) -> bool {
    facts::only_records(callee) || callee.rsplit('.').next() == Some("rollback")
}

/// A value a handler returns that says nothing failed: not `None` or `False` (ERR001's), nor an
/// error answer (`Response(status=503)`, `{"status": "error"}`, `web.HTTPServiceUnavailable()`).
fn no_error(value: Node<'_>, src: &str) -> bool {
    if matches!(value.kind(), kinds::NONE | kinds::FALSE) {
        return false;
    }
    // `return 200, {"status": "error"}` (Django Ninja's, Flask's status and body): the status
    // is what the sender reads, and a 2xx says the delivery was taken, whatever the body says.
    if matches!(value.kind(), kinds::TUPLE | kinds::EXPRESSION_LIST) {
        let parts = crate::python::named_children(value);
        let status =
            |n: &Node<'_>| n.kind() == kinds::INTEGER && syntax::text(*n, src).starts_with('2');
        if parts.first().is_some_and(status) || parts.last().is_some_and(status) {
            return true;
        }
    }
    // `Response({"status": "error"})` of DRF, `JsonResponse(...)`, `web.json_response(...)`
    // with no status given: a 200, whatever the body says.
    if value.kind() == kinds::CALL && answers_200(value, src) {
        return true;
    }
    let text = syntax::text(value, src).to_ascii_lowercase();
    let error_code = text
        .as_bytes()
        .windows(3)
        .any(|w| matches!(w[0], b'4' | b'5') && w[1].is_ascii_digit() && w[2].is_ascii_digit());
    // `return CaptureStatus.CAPTURING.value`: a state handed back, one the money is in while it
    // is not known to have moved.
    let a_state = |part: &str| part.ends_with("status") || part.ends_with("state");
    let state_handed_back = text.split('.').count() > 1
        && text.split('.').next().is_some_and(a_state)
        && !text.contains("succe")
        && !text.contains("paid")
        && !text.contains("complete");
    !error_code
        && !state_handed_back
        && ![
            "error",
            "fail",
            "retry",
            "nack",
            "reject",
            "unavailable",
            "invalid",
            // The outcome is left open for a later check: `self._pending_payment_response(...)`.
            "pending",
            "unknown",
            "timeout",
            "timed_out",
            "unconfirmed",
        ]
        .iter()
        .chain(super::timeout_read_as_failure::FOREIGN_UNKNOWN_STATES)
        .chain(super::timeout_read_as_failure::FOREIGN_FAILURES)
        .any(|w| text.contains(w))
}

/// A plain answer built with no status (`Response(body)`, `JsonResponse(body)`, `jsonify(body)`,
/// `web.json_response(body)`): the framework sends it as a 200.
fn answers_200(call: Node<'_>, src: &str) -> bool {
    let name = syntax::callee_name(call, src);
    let plain = matches!(
        name,
        "Response"
            | "JsonResponse"
            | "HttpResponse"
            | "JSONResponse"
            | "ORJSONResponse"
            | "PlainTextResponse"
            | "jsonify"
            | "json_response"
    );
    let status_given = syntax::keyword_args(call, src)
        .iter()
        .any(|(k, _)| k.contains("status"))
        || syntax::positional_args(call)
            .iter()
            .skip(1)
            .any(|a| a.kind() == kinds::INTEGER || syntax::text(*a, src).contains("HTTP_"));
    plain && !status_given && !syntax::has_dict_splat(call)
}

/// Whether the function answers a provider or a broker: a view of a webhook or a notification
/// (by its name, its class's or its file's, taking a request), or a consumer of messages.
pub(crate) fn inbound(cx: &Ctx<'_>, idx: &NodeIndex<'_>, func: Node<'_>) -> Option<Inbound> {
    let src = cx.src();
    let class_node = idx.enclosing(func, kinds::CLASS_DEFINITION);
    let class = class_node
        .and_then(|c| c.field("name"))
        .map_or("", |n| syntax::text(n, src));
    let names = format!("{} {class} {}", syntax::function_name(func, src), cx.path);
    let words = syntax::name_words(&names);
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    let text = syntax::text(func, src);
    // A view: it takes the request, or a route decorator makes it one (Flask's global
    // `request`).
    let takes_request = crate::rules::pay::parameters(func, src)
        .iter()
        .any(|p| matches!(p.as_str(), "request" | "req"))
        // A method of a class-based view that reads its request from `self` (Tornado's
        // `RequestHandler.post`, a Django `View`'s), or a helper method of that view.
        || class_node.is_some_and(|c| syntax::text(c, src).contains("self.request"))
        || idx.decorated(func).is_some_and(|d| {
            syntax::decorators(d).into_iter().any(|d| {
                let text = syntax::text(d, src);
                // Litestar's and Starlite's bare `@post("/payu/notify")`.
                text.starts_with("post(")
                    || [
                        ".post(",
                        ".route(",
                        "api_view",
                        "csrf_exempt",
                        "require_post",
                    ]
                    .iter()
                    .any(|m| text.contains(m))
            })
        });
    // Or it is handed what the view parsed (`NotificationProcessor.handle(self, notification)`
    // in `webhooks.py`): its return is the view's answer.
    let handed_the_delivery = || {
        let handles = syntax::name_words(&format!("{} {class}", syntax::function_name(func, src)))
            .iter()
            .any(|w| {
                matches!(
                    w.as_str(),
                    "handle"
                        | "handler"
                        | "process"
                        | "processor"
                        | "apply"
                        | "dispatch"
                        | "receive"
                )
            });
        handles
            && crate::rules::pay::parameters(func, src).iter().any(|p| {
                syntax::name_words(p).iter().any(|w| {
                    matches!(
                        w.as_str(),
                        "notification" | "notif" | "event" | "evt" | "webhook" | "delivery"
                    )
                })
            })
    };
    if has(&[
        "webhook",
        "webhooks",
        "notification",
        "notifications",
        "notify",
        "callback",
        "ipn",
    ]) && (takes_request || handed_the_delivery())
    {
        return Some(Inbound::Provider);
    }
    // Named for consuming, and handed what was delivered: not a sweeper of the same module
    // that runs on a timer (`while True: ...; await asyncio.sleep(interval)`).
    let handed_a_message = || {
        crate::rules::pay::parameters(func, src).iter().any(|p| {
            syntax::name_words(p).iter().any(|w| {
                matches!(
                    w.as_str(),
                    "message"
                        | "msg"
                        | "delivery"
                        | "envelope"
                        | "body"
                        | "record"
                        | "event"
                        | "payload"
                        | "incoming"
                        | "data"
                        // Or what it pulls them from itself (`for message in consumer:`).
                        | "consumer"
                        | "queue"
                        | "channel"
                        | "subscription"
                        | "stream"
                        | "topic"
                )
            })
        })
    };
    let consumes = has(&["consumer", "consumers", "consume", "listener", "subscriber"])
        && handed_a_message()
        || text.contains("message.process(")
        || text.contains(".ack(")
        || text.contains("basic_ack(");
    consumes.then_some(Inbound::Broker)
}

/// The first call of the `try` body that moves money or applies a payment's event, as written
/// and with its line, and whether it pays (a payment operation by name): `payouts.create_payouts`,
/// `self._refunds.handle`, `services.process_notification` in a view of notifications. A call
/// handed to a thread (`run_in_threadpool(apply_event, ...)`) is the function it hands.
fn step_of(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    body: Node<'_>,
    inbound: bool,
) -> Option<((String, u32), bool)> {
    let src = cx.src();
    let mut applies: Option<(String, u32)> = None;
    for &call in idx.within(body, kinds::CALL) {
        if !super::owned_by(call, func, idx) {
            continue;
        }
        let callee = syntax::handed_callee(call, src).unwrap_or_else(|| syntax::callee(call, src));
        if logs(callee) || callee.is_empty() {
            continue;
        }
        let words = syntax::name_words(callee);
        if words.iter().any(|w| beside_the_money(w)) {
            continue;
        }
        // A read of the provider's state (`paystack.verify_transfer(reference)`): failed, it
        // moved nothing, and the record stays as it was for the next look. Not in a webhook,
        // whose normal answer tells the provider the notification was taken.
        if !inbound
            && (syntax::named_for_a_read(callee)
                || syntax::name_words(callee.rsplit('.').next().unwrap_or(callee))
                    .first()
                    .is_some_and(|w| w == "verify" || w == "check"))
        {
            continue;
        }
        // By its name (`gateway.create_refund`), or a POST of money or to a payment URL
        // (`session.post(f"{api}/payments/{ref}/captures", json=...)`).
        let pays = words
            .iter()
            .any(|w| cx.vocab.is_payment_operation(w.trim_end_matches('s')))
            || crate::rules::pay::http_payment(cx, call);
        let line = syntax::lines(call).0;
        if pays {
            return Some(((callee.to_string(), line), true));
        }
        // In a webhook or a consumer, the `try` is the processing of what was delivered,
        // whatever its steps are called (`handler(self, event["data"]["object"])`); not a write
        // to a cache beside it.
        let beside_a_cache = words
            .iter()
            .any(|w| w.contains("cache") || w.contains("redis"));
        if inbound && !beside_a_cache && applies.is_none() {
            applies = Some((callee.to_string(), line));
        }
    }
    applies.map(|a| (a, false))
}

fn beside_the_money(word: &str) -> bool {
    word.split('_').any(|w| {
        crate::rules::pay::BESIDE_THE_MONEY
            .iter()
            .filter(|b| !matches!(**b, "event" | "webhook" | "notification"))
            .any(|b| w.eq_ignore_ascii_case(b))
    })
}

/// Whether the `except` is inside a loop of the function.
fn in_a_loop(idx: &NodeIndex<'_>, clause: Node<'_>, func: Node<'_>) -> bool {
    [kinds::FOR_STATEMENT, kinds::WHILE_STATEMENT]
        .iter()
        .any(|k| {
            idx.enclosing(clause, k)
                .is_some_and(|l| super::owned_by(l, func, idx))
        })
}
