//! PAY036 accepted-taken-as-succeeded: a refund, payout or transfer is recorded as succeeded as
//! soon as the provider answers the request, its answer's status never read, while the record
//! has a state for a request the provider took but has not carried out (`RefundStatus.
//! SUBMITTED`, `PayoutState.IN_TRANSIT`, `AWAITING_OUTCOME`). The provider's answer says the
//! request was accepted; the outcome comes later, by webhook or by asking. A refund the bank
//! then declines stays "succeeded": the webhook that says so finds the record final and is
//! ignored, the customer never gets the money, and the books say they did.
//!
//! Left alone: an answer whose status is read (or handed whole to a function that may read it),
//! a success recorded in an `except` clause or before the request, and records with no such
//! state here or in the repository.
use tree_sitter::Node;

use super::success_recorded_before_result::{says_success, success_value};
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY036",
    doc: include_str!("../../../rules/pay/PAY036.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Words of a state between the request and its outcome.
const AWAITING: &[&str] = &["submitted", "accepted", "sent", "acknowledged", "transit"];

/// What a state `AWAITING_...` waits for when it waits for the outcome of a request, not for
/// something before it (`AWAITING_FUNDS`, `AWAITING_PAYMENT`).
const AWAITED: &[&str] = &[
    "outcome",
    "confirmation",
    "result",
    "settlement",
    "webhook",
    "callback",
    "notification",
    "response",
];

/// What an answer's outcome is read by: `resource["Status"]`, `result.state`, `resp.resultCode`.
const OUTCOME: &[&str] = &[
    "status",
    "state",
    "result",
    "outcome",
    "succeeded",
    "success",
    "approved",
    "declined",
    "failed",
    "ok",
];

/// Every finding is a success recorded in code that pays, with a state named for it.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && (s.facts.payment_module
            || s.facts.functions.iter().any(|f| f.payment || f.http)
            || s.mentions(&["idempotency_key", "idempotency"]))
        && s.mentions(&[
            "Status.",
            "State.",
            "mark_",
            "set_",
            "transition",
            "_status(",
            "_state(",
        ])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        // The success first: most functions record none, and need no request looked for.
        let Some(first_success) = success_after(idx, func, func.start_byte(), src) else {
            continue;
        };
        let requests: Vec<Node<'_>> = idx
            .within(func, kinds::CALL)
            .iter()
            .copied()
            .filter(|&c| crate::rules::idem::owned_by(idx, c, Some(func)))
            .filter(|&c| {
                idx.enclosing(c, kinds::EXCEPT_CLAUSE)
                    .is_none_or(|e| !syntax::contains(func, e))
            })
            // A read (`repo.get_refund_by_reference(...)`) asks the provider to do nothing.
            .filter(|&c| !syntax::named_for_a_read(idx.callee_name(c, src)))
            .filter(|&c| {
                // A function of the file is asked what it returns: `_reserve_refund(...)` that
                // writes a row is no request to the provider.
                if defined_here(cx, idx.callee_name(c, src)) {
                    returns_a_payments_answer(cx, idx, c, src)
                } else {
                    super::pays(cx, c, src)
                        || super::http_payment(cx, c)
                        || super::writes_to_a_provider(c, src)
                }
            })
            .collect();
        let Some(&first) = requests.first() else {
            failure_only(cx, idx, func, first_success, src);
            continue;
        };
        let Some((mark, record)) = success_after(idx, func, first.end_byte(), src) else {
            continue;
        };
        // The request the success follows: the last before it (`claim_refund(ctx, rid)` may
        // come first and take the name of one).
        let Some(&request) = requests
            .iter()
            .rev()
            .find(|r| r.end_byte() <= mark.start_byte())
        else {
            continue;
        };
        let answer = answer_of(request, src);
        if answer.is_some_and(|a| outcome_read(idx, func, request, a, src)) {
            continue;
        }
        let Some((state, state_at)) = awaiting_state(cx, idx, &record, src) else {
            continue;
        };
        report(
            cx,
            idx,
            func,
            mark,
            ("request", "request_line"),
            request,
            (state, state_at),
        );
    }
}

/// `if disbursement.get("status") == "FAILED": ... return` and then `_finish(payout,
/// PayoutStatus.COMPLETED)`: an answer read for its failure alone, every other status (the
/// provider's `PENDING`, `ACCEPTED`) recorded as success, where the record has a state for a
/// request taken.
fn failure_only<'t>(
    cx: &mut Ctx<'_>,
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    (mark, record): (Node<'t>, Record),
    src: &str,
) {
    let status_tests: Vec<Node<'_>> = idx
        .within(func, kinds::IF_STATEMENT)
        .iter()
        .copied()
        // Before the mark or around it (`if status == "COMPLETED": finish(...)`).
        .filter(|i| i.start_byte() < mark.start_byte())
        .filter(|i| {
            i.field("condition").is_some_and(|c| {
                let text = syntax::text(c, src).to_ascii_lowercase();
                text.contains("status") || text.contains("state")
            })
        })
        .collect();
    let [test] = status_tests.as_slice() else {
        return;
    };
    if syntax::contains(*test, mark) {
        return;
    }
    if test.field("alternative").is_some() {
        return;
    }
    let Some(condition) = test
        .field("condition")
        .filter(|c| c.kind() == kinds::COMPARISON_OPERATOR)
    else {
        return;
    };
    let literals: Vec<&str> = crate::python::named_children(condition)
        .into_iter()
        .flat_map(|side| match side.kind() {
            kinds::TUPLE | kinds::LIST | kinds::SET => crate::python::named_children(side),
            _ => vec![side],
        })
        .filter_map(|n| syntax::string_value(n, src))
        .collect();
    let failed = |w: &str| {
        matches!(
            w.to_ascii_lowercase().as_str(),
            "failed" | "failure" | "declined" | "rejected" | "error" | "cancelled" | "canceled"
        )
    };
    let ends = test.field("consequence").is_some_and(|b| {
        syntax::statements(b)
            .last()
            .is_some_and(|s| matches!(s.kind(), kinds::RETURN_STATEMENT | kinds::RAISE_STATEMENT))
    });
    if literals.is_empty() || !literals.iter().all(|w| failed(w)) || !ends {
        return;
    }
    let Some((state, state_at)) = awaiting_state(cx, idx, &record, src) else {
        return;
    };
    report(
        cx,
        idx,
        func,
        mark,
        ("test", "test_line"),
        condition,
        (state, state_at),
    )
    .note("failure_only");
}

/// The finding on `mark`, the success recorded in `func`, after `why` (the request answered, or
/// the test of a failure alone), given under the names `what` (its first line, its line).
fn report<'c>(
    cx: &'c mut Ctx<'_>,
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    mark: Node<'_>,
    what: (&'static str, &'static str),
    why: Node<'_>,
    (state, state_at): (String, String),
) -> &'c mut crate::review::Finding {
    let src = cx.src();
    let function = facts::qualname(func, idx, src);
    let finding = cx
        .report(&RULE, mark)
        .arg("function", function.clone())
        .arg(what.0, super::first_line(why, src))
        .arg(what.1, syntax::lines(why).0.to_string())
        .arg("mark", super::first_line(mark, src))
        .arg("state", state)
        .arg("state_at", state_at);
    finding.function = function;
    finding
}

fn defined_here(cx: &Ctx<'_>, name: &str) -> bool {
    cx.facts
        .is_some_and(|file| file.functions.iter().any(|f| f.name == name))
}

/// `resource = _submit(movement, client)` where `_submit` returns what the payment call
/// answered (`return client.refund_payin(...)`): its answer is the provider's. A helper that
/// reads the answer itself and returns something else is not.
fn returns_a_payments_answer(cx: &Ctx<'_>, idx: &NodeIndex<'_>, call: Node<'_>, src: &str) -> bool {
    super::calls_a_paying_helper(cx, call, src)
        && idx
            .returned_by(idx.callee_name(call, src), src)
            .into_iter()
            .map(crate::rules::idem::strip_await)
            .any(|r| r.kind() == kinds::CALL && super::pays(cx, r, src))
}

/// `resource` of `resource = _submit(...)`, `outcome = await acquirer.refund(...)`.
fn answer_of<'s>(request: Node<'_>, src: &'s str) -> Option<&'s str> {
    let mut node = request.parent()?;
    if node.kind() == kinds::AWAIT {
        node = node.parent()?;
    }
    if node.kind() != kinds::ASSIGNMENT {
        return None;
    }
    node.field("left")
        .filter(|l| l.kind() == kinds::IDENTIFIER)
        .map(|l| syntax::text(l, src))
}

/// Whether the function reads the answer's outcome after the request (`resource["Status"]`,
/// `result.state`), or hands the answer whole to a call that may (`_apply_resource(movement,
/// resource)`).
fn outcome_read(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    request: Node<'_>,
    answer: &str,
    src: &str,
) -> bool {
    let after = src
        .get(request.end_byte()..func.end_byte())
        .unwrap_or("")
        .to_ascii_lowercase();
    let answer_lower = answer.to_ascii_lowercase();
    let read = OUTCOME.iter().any(|w| {
        [".", "[\"", "['", ".get(\"", ".get('"]
            .iter()
            .any(|op| after.contains(&format!("{answer_lower}{op}{w}")))
    });
    read || idx.within(func, kinds::CALL).iter().any(|&c| {
        c.start_byte() > request.end_byte()
            && !facts::only_records(syntax::callee(c, src))
            && syntax::positional_args(c)
                .iter()
                .chain(syntax::keyword_args(c, src).iter().map(|(_, v)| v))
                .any(|a| syntax::text(*a, src) == answer)
    })
}

/// The first success the function records after the request, outside `except` clauses and
/// comparisons, with what names the record's states: `MovementStatus.SUCCEEDED` gives
/// `MovementStatus`, `mark_refund_succeeded(...)` gives `refund`.
fn success_after<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'_>,
    after: usize,
    src: &str,
) -> Option<(Node<'t>, Record)> {
    let later = |n: &Node<'_>| {
        n.start_byte() > after
            && idx
                .enclosing(*n, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| f.id() == func.id())
            && idx
                .enclosing(*n, kinds::EXCEPT_CLAUSE)
                .is_none_or(|e| !syntax::contains(func, e))
    };
    let written = idx
        .within(func, kinds::ATTRIBUTE)
        .iter()
        .copied()
        .filter(later)
        .filter_map(|a| {
            let class = a
                .field("object")
                .filter(|o| o.kind() == kinds::IDENTIFIER)?;
            let class = syntax::text(class, src);
            (states_class(class) && success_value(a, src) && !compared(a)).then(|| {
                (
                    super::statement_of(a).unwrap_or(a),
                    Record::States(class.to_string()),
                )
            })
        });
    let called = idx
        .within(func, kinds::CALL)
        .iter()
        .copied()
        .filter(later)
        .filter_map(|c| {
            let name = idx
                .callee_name(c, src)
                .trim_start_matches('_')
                .to_ascii_lowercase();
            let rest = ["mark_", "set_", "record_", "book_"]
                .iter()
                .find_map(|p| name.strip_prefix(p))?;
            if !says_success(rest) {
                return None;
            }
            let nouns: Vec<String> = syntax::name_words(rest)
                .into_iter()
                .filter(|w| !says_success(w) && w != "as")
                .collect();
            (!nouns.is_empty()).then_some((c, Record::Named(nouns)))
        });
    // `db.transition(w.id, "success", from_statuses=("otp",))`: a state written as text by
    // the function that moves the record between states.
    let moved = idx
        .within(func, kinds::CALL)
        .iter()
        .copied()
        .filter(later)
        .filter_map(|c| {
            let name = idx.callee_name(c, src);
            if !moves_states(name) {
                return None;
            }
            state_texts(c, src)
                .into_iter()
                .any(|v| success_value(v, src))
                .then(|| {
                    (
                        super::statement_of(c).unwrap_or(c),
                        Record::Moved(name.to_string()),
                    )
                })
        });
    written
        .chain(called)
        .chain(moved)
        .min_by_key(|(n, _)| n.start_byte())
}

/// `transition`, `set_status`, `update_state`: a function that moves a record to the state it
/// is handed.
fn moves_states(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    ["transition", "status", "state"]
        .iter()
        .any(|w| lower.contains(w))
}

/// The states a call hands as text: its string arguments, and those of the keywords a target
/// state goes by (`status="success"`, `to="submitted"`); not the states it moves from
/// (`from_statuses=("otp",)`).
fn state_texts<'t>(call: Node<'t>, src: &str) -> Vec<Node<'t>> {
    let positional = syntax::positional_args(call)
        .into_iter()
        .filter(|a| a.kind() == kinds::STRING);
    let named = syntax::keyword_args(call, src)
        .into_iter()
        .filter(|(k, v)| {
            v.kind() == kinds::STRING
                && matches!(
                    *k,
                    "status"
                        | "state"
                        | "to"
                        | "to_status"
                        | "to_state"
                        | "new_status"
                        | "new_state"
                )
        })
        .map(|(_, v)| v);
    positional.chain(named).collect()
}

/// What names the states of the record a success is written for.
enum Record {
    /// The class of states written (`MovementStatus`).
    States(String),
    /// Nouns of the function that records it (`refund` of `mark_refund_succeeded`).
    Named(Vec<String>),
    /// The function that moves the record between states named as text (`transition`).
    Moved(String),
}

impl Record {
    fn holds(&self, class: &str) -> bool {
        match self {
            Record::States(name) => name == class,
            Record::Named(nouns) => {
                let words = syntax::name_words(class);
                nouns.iter().all(|n| words.contains(n))
            }
            Record::Moved(_) => false,
        }
    }
}

/// `RefundStatus`, `PayoutState`: a class of states, by its name.
fn states_class(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_uppercase())
        && (name.ends_with("Status") || name.ends_with("State"))
}

/// Whether the value is compared rather than written (`if refund.status == RefundStatus.
/// SUCCEEDED:`, `status in (RefundStatus.SUCCEEDED, ...)`), or looked up by (`{RefundStatus.
/// COMPLETED: 201}.get(refund.status, 202)`, a table keyed by states), or is a state moved from
/// (`from_statuses=SENT | {PayoutStatus.PAID}`: a set of states is a condition, not a write).
fn compared(value: Node<'_>) -> bool {
    let mut node = value;
    while let Some(parent) = node.parent() {
        match parent.kind() {
            kinds::COMPARISON_OPERATOR | kinds::SET => return true,
            kinds::PAIR => return parent.field("key").is_some_and(|k| k.id() == node.id()),
            kinds::TUPLE | kinds::LIST | kinds::PARENTHESIZED_EXPRESSION => node = parent,
            _ => return false,
        }
    }
    false
}

/// A state of the record for a request taken but not carried out (`RefundStatus.SUBMITTED`):
/// read in the file, or a member of the class in the repository; with where it is.
fn awaiting_state(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    record: &Record,
    src: &str,
) -> Option<(String, String)> {
    let awaiting = |member: &str| {
        let words = syntax::name_words(member);
        let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
        has(AWAITING) || has(&["awaiting"]) && has(AWAITED)
    };
    // States as text are the record's when the same function moves it to them
    // (`db.transition(w.id, "submitted", ...)`).
    if let Record::Moved(mover) = record {
        return idx.all(kinds::CALL).iter().find_map(|&c| {
            if idx.callee_name(c, src) != mover {
                return None;
            }
            let state = state_texts(c, src)
                .into_iter()
                .find(|v| syntax::string_value(*v, src).is_some_and(&awaiting))?;
            Some((
                syntax::text(state, src).to_string(),
                format!("{}:{}", cx.path, syntax::lines(state).0),
            ))
        });
    }
    // A class of the file or one it imports: another package's `OrderStatus` is not this
    // record's.
    let known = |class: &str| syntax::has_word(src, class);
    let in_file = idx.all(kinds::ATTRIBUTE).iter().find_map(|&a| {
        let class = a
            .field("object")
            .filter(|o| o.kind() == kinds::IDENTIFIER)?;
        let class = syntax::text(class, src);
        let member = syntax::text(a.field("attribute")?, src);
        (states_class(class) && record.holds(class) && awaiting(member)).then(|| {
            (
                syntax::text(a, src).to_string(),
                format!("{}:{}", cx.path, syntax::lines(a).0),
            )
        })
    });
    in_file.or_else(|| {
        cx.project()?.modules().iter().find_map(|m| {
            m.assignments.iter().find_map(|a| {
                let (class, member) = a.name.split_once('.')?;
                (states_class(class) && record.holds(class) && awaiting(member) && known(class))
                    .then(|| (a.name.clone(), format!("{}:{}", m.path, a.line)))
            })
        })
    })
}
