//! ERR006's readings of giving up: a payment call whose timeouts are kept as unknown and sent
//! again, until the attempts run out, and then the record is marked failed (and whatever it
//! held released) all the same. The last attempts' outcomes are as unknown as the first's: the
//! provider may have paid, and the record marked failed invites the money to be sent again.
//!
//! Two shapes, each read in one function:
//! - a retry loop whose timeout handler goes on to the next round, which leaves only by a
//!   `return` on success, and after which the record is marked failed (`exhausted`);
//! - a test of a count the function moves on before it sends (`attempts = c.attempts + 1` in
//!   the claim), ahead of the call, that marks the record failed when the count is past its
//!   maximum (`given_up`).
//!
//! A record parked for a person or a later check (`needs_review`, left `submitting`) is the
//! decision these readings look for, and is left alone.
use tree_sitter::Node;

use super::timeout_read_as_failure::{assigns_failure, calls_failure};
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::facts::FunctionFacts;

/// How a record comes to be marked failed once the attempts are spent.
pub(super) struct GivenUp<'t> {
    /// The statement that marks it failed.
    pub mark: Node<'t>,
    /// The loop that ran out (`exhausted`), or the test of the count (`given_up`).
    pub because: Node<'t>,
    pub note: &'static str,
}

/// Either reading for `clause`, a timeout handler of `try_statement` in `func` that keeps the
/// outcome unknown (it marks no failure).
pub(super) fn given_up<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    facts: Option<&FunctionFacts>,
    try_statement: Node<'t>,
    clause: Node<'t>,
    src: &str,
) -> Option<GivenUp<'t>> {
    exhausted(idx, func, clause, src)
        .or_else(|| count_passed(idx, func, facts, try_statement, src))
        .or_else(|| retries_spent(idx, func, clause, src))
        .or_else(|| spent_in_a_helper(idx, func, clause, src))
}

/// A handler that hands the record to a helper of the file to be tried again
/// (`await self._defer_refund(job, str(exc))`), and that helper marks it failed once the rounds
/// are counted out (`if job.attempts >= max_attempts: await repo.mark_refund_failed(...)`).
fn spent_in_a_helper<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    clause: Node<'t>,
    src: &str,
) -> Option<GivenUp<'t>> {
    let handler = syntax::except_body(clause)?;
    idx.within(handler, kinds::CALL).iter().find_map(|&call| {
        if syntax::receiver(call).is_some_and(|r| syntax::text(r, src) != "self") {
            return None;
        }
        let name = syntax::callee_name(call, src);
        let helper = crate::rules::idem::event_dedup_skipped::function_named(idx, name, src)
            .filter(|h| h.id() != func.id())?;
        counted_out(idx, helper, helper, src)
            .or_else(|| left_below(idx, helper, helper.field("body")?, src))
    })
}

/// `if attempt < task.max_retries: raise task.retry(...)` and, below it, the record marked
/// failed (`_finish(order, Status.DECLINED, ...)`): what runs once the count is spent.
fn left_below<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    body: Node<'t>,
    src: &str,
) -> Option<GivenUp<'t>> {
    crate::python::named_children(body)
        .into_iter()
        .filter(|s| s.kind() == kinds::IF_STATEMENT && s.field("alternative").is_none())
        .find_map(|test| {
            let condition = test.field("condition")?;
            let text = syntax::text(condition, src);
            if !(text.contains('<') && counts(condition, src, true)) {
                return None;
            }
            let leaves = test
                .field("consequence")
                .and_then(|c| crate::python::named_children(c).last().copied())
                .is_some_and(|last| {
                    matches!(
                        last.kind(),
                        kinds::RAISE_STATEMENT | kinds::RETURN_STATEMENT
                    )
                });
            if !leaves {
                return None;
            }
            let rest: Vec<Node<'t>> = crate::python::named_children(body)
                .into_iter()
                .filter(|s| s.start_byte() > test.end_byte())
                .collect();
            let mark = rest
                .iter()
                .find_map(|s| first_failure(idx, func, *s, src))?;
            Some(GivenUp {
                mark,
                because: condition,
                note: "exhausted",
            })
        })
}

/// The first `if` of `func` in `block` that tests a count and marks the record failed under
/// it.
fn counted_out<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    block: Node<'t>,
    src: &str,
) -> Option<GivenUp<'t>> {
    idx.within(block, kinds::IF_STATEMENT)
        .iter()
        .filter(|i| super::owned_by(**i, func, idx))
        .find_map(|&test| {
            let condition = test.field("condition")?;
            if !tests_a_count(condition, src) {
                return None;
            }
            let mark = first_failure(idx, func, test.field("consequence")?, src)?;
            Some(GivenUp {
                mark,
                because: condition,
                note: "given_up",
            })
        })
}

/// A timeout handler that asks for another run until the task's retries are spent, and then
/// marks the record failed (`if self.request.retries >= self.max_retries: fail_debit(...)`,
/// before `raise self.retry(exc=exc)`), or below an `if` that asks for it while they last (`if
/// job_try < MAX_TRIES: raise Retry(...)`, then `mark_failed(...)`).
fn retries_spent<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    clause: Node<'t>,
    src: &str,
) -> Option<GivenUp<'t>> {
    let handler = syntax::except_body(clause)?;
    counted_out(idx, func, handler, src).or_else(|| left_below(idx, func, handler, src))
}

/// Whether a handler that returns or raises for some errors sends the retryable ones round the
/// loop again (`if exc.retryable: last_error = exc; continue`, `if isinstance(exc,
/// GatewayTimeout): continue`): for those, the loop runs out as it would with no `return`.
fn goes_round_when_retryable(idx: &NodeIndex<'_>, handler: Node<'_>, src: &str) -> bool {
    idx.within(handler, kinds::IF_STATEMENT).iter().any(|test| {
        let (Some(condition), Some(body)) = (test.field("condition"), test.field("consequence"))
        else {
            return false;
        };
        let condition = syntax::text(condition, src).to_ascii_lowercase();
        ["retr", "timeout", "unavailable", "transient", "unknown"]
            .iter()
            .any(|w| condition.contains(w))
            && syntax::statements(body)
                .last()
                .is_some_and(|s| s.kind() == kinds::CONTINUE_STATEMENT)
    })
}

/// A retry loop whose timeout handler lets the loop go round again, with no `break`, left on
/// success by a `return`: the statements after it run only when every attempt timed out. The
/// first of them that marks the record failed.
fn exhausted<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    clause: Node<'t>,
    src: &str,
) -> Option<GivenUp<'t>> {
    let handler = syntax::except_body(clause)?;
    if (!idx.within(handler, kinds::RETURN_STATEMENT).is_empty()
        || !idx.within(handler, kinds::RAISE_STATEMENT).is_empty())
        && !goes_round_when_retryable(idx, handler, src)
    {
        return None;
    }
    let innermost = |node: Node<'_>| {
        [kinds::FOR_STATEMENT, kinds::WHILE_STATEMENT]
            .iter()
            .filter_map(|k| idx.enclosing(node, k))
            .max_by_key(|l| l.start_byte())
    };
    let lp = innermost(clause).filter(|l| syntax::contains(func, *l))?;
    if idx
        .within(lp, kinds::BREAK_STATEMENT)
        .iter()
        .any(|b| innermost(*b).is_some_and(|l| l.id() == lp.id()))
        || !idx
            .within(lp, kinds::RETURN_STATEMENT)
            .iter()
            .any(|r| super::owned_by(*r, func, idx))
        || lp.field("alternative").is_some()
    {
        return None;
    }
    let mut next = lp.next_named_sibling();
    while let Some(statement) = next {
        if let Some(mark) = first_failure(idx, func, statement, src) {
            return Some(GivenUp {
                mark,
                because: lp,
                note: "exhausted",
            });
        }
        if matches!(
            statement.kind(),
            kinds::RETURN_STATEMENT | kinds::RAISE_STATEMENT
        ) {
            return None;
        }
        next = statement.next_named_sibling();
    }
    None
}

/// An `if` ahead of the `try` that tests a count the function moved on before it (`attempts`
/// of `attempts = c.attempts + 1`), and marks the record failed in its body.
fn count_passed<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    facts: Option<&FunctionFacts>,
    try_statement: Node<'t>,
    src: &str,
) -> Option<GivenUp<'t>> {
    let sent_at = syntax::lines(try_statement).0;
    let counted: Vec<&str> = facts?
        .steps
        .iter()
        .filter(|(_, line)| *line < sent_at)
        .map(|(field, _)| &**field)
        .collect();
    if counted.is_empty() {
        return None;
    }
    idx.within(func, kinds::IF_STATEMENT)
        .iter()
        .filter(|i| i.end_byte() <= try_statement.start_byte() && super::owned_by(**i, func, idx))
        .find_map(|&test| {
            let condition = test.field("condition")?;
            let text = syntax::text(condition, src);
            if !(text.contains('>') || text.contains("=="))
                || !counted.iter().any(|f| syntax::has_word(text, f))
            {
                return None;
            }
            let body = test.field("consequence")?;
            let mark = first_failure(idx, func, body, src)?;
            Some(GivenUp {
                mark,
                because: condition,
                note: "given_up",
            })
        })
}

/// The first statement in `node` (of `func` itself) that writes a failed state or calls what
/// records one (`batch.status = FAILED`, `_fail_and_release(...)`, `.values(status=FAILED)`).
fn first_failure<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    node: Node<'t>,
    src: &str,
) -> Option<Node<'t>> {
    let own = |n: &Node<'_>| super::owned_by(*n, func, idx);
    let assigned = idx
        .within(node, kinds::ASSIGNMENT)
        .iter()
        .chain(std::iter::once(&node).filter(|n| n.kind() == kinds::ASSIGNMENT))
        .filter(|a| own(a))
        .filter(|a| assigns_failure(**a, src).is_some())
        .copied();
    // An error raised once the attempts are spent (`raise RefundFailed(...)`) tells the caller
    // it did not work out, and records nothing.
    let called = idx
        .within(node, kinds::CALL)
        .iter()
        .filter(|c| own(c) && idx.enclosing(**c, kinds::RAISE_STATEMENT).is_none())
        .filter(|c| calls_failure(**c, src).is_some())
        .copied();
    assigned.chain(called).min_by_key(|n| n.start_byte())
}

/// Words a status of an unknown outcome is written with, rarest spelling first.
pub(super) const UNKNOWN_WORDS: &[&str] = &[
    "N_FLIGHT", "n_flight", "NCERTAIN", "ncertain", "NKNOWN", "nknown",
];

/// A record of an unknown outcome given up on where the attempts are counted, away from the
/// handler that kept the timeout unknown (a job over `status=UNKNOWN` refunds that resends
/// them): `because` tests the count, `mark` marks the record failed, `unknown` names the state.
pub(super) struct UnknownGivenUp<'t> {
    pub mark: Node<'t>,
    pub because: Node<'t>,
    pub unknown: Node<'t>,
}

/// In `func`, code that names a state of an unknown outcome (`RefundStatus.UNKNOWN`,
/// `"in_flight"`) and tests a count of attempts (`refund.attempts >= MAX_ATTEMPTS`) to mark
/// the record failed, asking the provider nothing first.
pub(super) fn unknown_marked_failed<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    src: &str,
) -> Option<UnknownGivenUp<'t>> {
    let text = syntax::text(func, src);
    let lower = text.to_ascii_lowercase();
    if ![
        "refund", "payout", "charge", "payment", "capture", "transfer", "withdraw",
    ]
    .iter()
    .any(|w| lower.contains(w))
    {
        return None;
    }
    let unknown = unknown_state(func, src)
        .or_else(|| marks_unknown(idx, func, src))
        .or_else(|| named_for_the_unknown(func, src))?;
    let ifs = idx.within(func, kinds::IF_STATEMENT);
    // An `elif` of a chain over the answer (`elif refund.attempts >= MAX: _mark_failed(...)`
    // before `else: _mark_unknown(...)`) as much as an `if`.
    ifs.iter()
        .copied()
        .chain(ifs.iter().flat_map(|s| syntax::elif_clauses(*s)))
        .filter(|i| super::owned_by(*i, func, idx))
        .find_map(|test| {
            let condition = test.field("condition")?;
            let body = test.field("consequence")?;
            if syntax::contains(body, unknown) || !tests_a_count(condition, src) {
                return None;
            }
            let mark = first_failure(idx, func, body, src)?;
            let asked = idx.within(body, kinds::CALL).iter().any(|c| {
                c.end_byte() <= mark.start_byte() && asks_the_provider(syntax::callee(*c, src))
            }) || asked_before(idx, func, test, src);
            (!asked).then_some(UnknownGivenUp {
                mark,
                because: condition,
                unknown,
            })
        })
}

/// The first name or string of `func`'s code (not a comment or docstring) that names an
/// unknown outcome: `UNKNOWN`, `OUTCOME_UNKNOWN`, `"in_flight"`, `Status.UNCERTAIN`.
fn unknown_state<'t>(func: Node<'t>, src: &str) -> Option<Node<'t>> {
    let start = func.start_byte();
    let text = syntax::text(func, src);
    UNKNOWN_WORDS
        .iter()
        .flat_map(|w| {
            memchr::memmem::find_iter(text.as_bytes(), w.as_bytes()).map(|at| (at, w.len()))
        })
        .filter_map(|(at, len)| {
            let node = func.descendant_for_byte_range(start + at, start + at + len)?;
            let named = match node.kind() {
                // A constant or a member (`UNKNOWN`, `Status.in_flight`), not a function's or
                // a variable's name (`retry_unknown_refunds`), nor an error (`UnknownCurrency`).
                kinds::IDENTIFIER
                    if syntax::text(node, src)
                        .bytes()
                        .all(|b| !b.is_ascii_lowercase())
                        || node.parent().is_some_and(|p| {
                            p.kind() == kinds::ATTRIBUTE
                                && p.field("attribute").is_some_and(|a| a.id() == node.id())
                                && !syntax::text(node, src).contains("Error")
                        }) =>
                {
                    Some(node)
                }
                "string_content" => node
                    .parent()
                    .filter(|s| {
                        s.parent()
                            .is_some_and(|p| p.kind() != kinds::EXPRESSION_STATEMENT)
                    })
                    .filter(|s| syntax::text(*s, src).len() <= 40),
                _ => None,
            }?;
            Some(named)
        })
        .min_by_key(|n| n.start_byte())
}

/// The name of a function that handles an unknown outcome (`_transfer_unknown(transfer, exc)`,
/// `on_refund_outcome_uncertain`): what it is handed is an attempt whose answer did not come.
/// Not one of something else unknown (`drop_unknown_currency_payouts`).
fn named_for_the_unknown<'t>(func: Node<'t>, src: &str) -> Option<Node<'t>> {
    let name = func.field("name")?;
    let words = syntax::name_words(syntax::text(name, src));
    let unknown = |w: &str| matches!(w, "unknown" | "uncertain" | "indeterminate" | "unanswered");
    let last = words.last().is_some_and(|w| unknown(w));
    let of_the_outcome = words.iter().any(|w| unknown(w))
        && words
            .iter()
            .any(|w| matches!(w.as_str(), "outcome" | "result" | "answer"));
    (last || of_the_outcome).then_some(name)
}

/// A call of `func` named for recording an unknown outcome (`_mark_unknown(refund, ...)`,
/// `mark_outcome_uncertain(...)`): the state it names.
fn marks_unknown<'t>(idx: &NodeIndex<'t>, func: Node<'t>, src: &str) -> Option<Node<'t>> {
    idx.within(func, kinds::CALL).iter().copied().find(|c| {
        let name = syntax::callee_name(*c, src);
        let words = syntax::name_words(name);
        words
            .iter()
            .any(|w| w == "mark" || w == "record" || w == "set")
            && words
                .iter()
                .any(|w| matches!(w.as_str(), "unknown" | "uncertain" | "indeterminate"))
    })
}

/// `refund.attempts >= MAX_ATTEMPTS`, `payout.retry_count > 5`, `tries == limit`.
fn tests_a_count(condition: Node<'_>, src: &str) -> bool {
    counts(condition, src, false)
}

/// `tests_a_count`, or a test that the count is still below its end (`versuch <
/// task.max_retries`), with `below`.
fn counts(condition: Node<'_>, src: &str, below: bool) -> bool {
    let text = syntax::text(condition, src);
    let words = syntax::name_words(text);
    // `attempt.status == DunningAttempt.Status.FAILED`: `attempt` is the record, its state
    // tested.
    let of_a_state = words.iter().any(|w| w == "status" || w == "state");
    (text.contains('>') || text.contains("==") || below && text.contains('<'))
        && words.iter().any(|w| {
            w.starts_with("attempts")
                || w.starts_with("attempt") && !of_a_state
                || w.starts_with("retr")
                || w.starts_with("tries")
                || w.starts_with("resen")
                || w.starts_with("resubmi")
                // `versuch`, `tentativa`, `intento`, `poging`.
                || w.starts_with("versuch")
                || w.starts_with("tentativ")
                || w.starts_with("intento")
                || w.starts_with("poging")
        })
}

/// Whether `func` asks the provider for the payment ahead of `test` (`capture =
/// get_klarna().find_capture(order.klarna_order_id, reference)`, then `if capture is not None:
/// ...; return`): the count is tested only once the provider has said there is none.
fn asked_before(idx: &NodeIndex<'_>, func: Node<'_>, test: Node<'_>, src: &str) -> bool {
    idx.within(func, kinds::CALL).iter().any(|&c| {
        if c.end_byte() > test.start_byte() || !super::owned_by(c, func, idx) {
            return false;
        }
        let callee = syntax::callee(c, src);
        let name = syntax::callee_name(c, src);
        let receiver = syntax::receiver(c).map_or("", |r| syntax::text(r, src));
        // `find_capture`, `client.get_refund`: not `Shipment.get_by_id`, the record's own read.
        let of_the_payment = syntax::name_words(name).iter().any(|w| {
            matches!(
                w.as_str(),
                "capture" | "refund" | "payment" | "payout" | "charge" | "transfer" | "transaction"
            )
        }) || syntax::name_words(receiver).iter().any(|w| {
            matches!(
                w.as_str(),
                "client" | "gateway" | "provider" | "api" | "psp"
            )
        });
        asks_the_provider(callee) && of_the_payment
    })
}

/// A read of the payment's state from the provider before giving up on it
/// (`gateway.retrieve_refund(...)`, `client.get_payout_status(...)`, `reconcile(refund)`).
fn asks_the_provider(callee: &str) -> bool {
    let name = callee.rsplit('.').next().unwrap_or(callee);
    syntax::name_words(name).iter().any(|w| {
        matches!(
            w.as_str(),
            "retrieve"
                | "fetch"
                | "lookup"
                | "poll"
                | "query"
                | "reconcile"
                | "inquire"
                | "sync"
                | "refresh"
                | "status"
                | "check"
                | "verify"
                | "get"
                | "find"
                | "resolve"
        )
    })
}
