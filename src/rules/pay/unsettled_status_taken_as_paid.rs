//! PAY006 unsettled-status-taken-as-paid: a provider's status that does not say the money
//! arrived (`pending`, `processing`, `received`, a 3-D Secure step) leads to the payment being
//! recorded as paid. Five shapes:
//!
//! - a test that puts such a status beside a settled one (`intent.status in ("succeeded",
//!   "processing")`) and records the payment as paid under it;
//! - a status map that sends it to paid (`{"pending": Status.PAID, "paid": Status.PAID}`);
//! - a test that tells only a failure apart (`if result.status == "Declined": ... else:
//!   activate(gift)`, or a failure branch that returns before the paid path), or only one
//!   unfinished status (`if intent.status == "requires_capture": ...; return` after a capture):
//!   every other status, pending ones included, is paid;
//! - a test against a constant set of statuses, here or in a module the file imports from,
//!   that puts an unfinished one beside a settled one (`AUTHORISED = frozenset({"Authorised",
//!   "Received"})`);
//! - a lookup of the provider's status that defaults to success (`STATUS.get(status,
//!   Status.SUCCEEDED)`): every status it does not list is taken for paid.
//!
//! The provider may still decline, expire or reverse such a payment; by then the order has
//! shipped, the subscription is active, the balance credited.
use tree_sitter::Node;

use super::success_recorded_before_result::{
    completes, credits, records_success, says_success, success_value,
};
use crate::python::{self, Fields, NodeIndex, kinds, syntax};
use crate::review::Severity;
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "PAY006",
    doc: include_str!("../../../rules/pay/PAY006.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding reads a provider's answer: in a module about payments, one that talks to a
/// payment API or over HTTP (the facts say so without reading the text), or a model of a payment
/// (`Installment.apply_provider_status(remote)`), with a status word that is not final or is a
/// failure.
fn gate(s: &Scan<'_>) -> bool {
    if s.facts.is_test {
        return false;
    }
    // A module of the provider's deliveries reads its answers too.
    let talks = s.facts.payment_module
        || s.facts.functions.iter().any(|f| f.payment || f.http)
        || super::signature_checked_if_present::webhook_module(&s.facts.path);
    (talks || payment_model(s))
        && s.mentions(&[
            "pending",
            "PENDING",
            "Pending",
            "processing",
            "PROCESSING",
            "Processing",
            "received",
            "RECEIVED",
            "Received",
            "requires_",
            "REQUIRES_",
            "ecline",
            "ECLINE",
            "ailed",
            "AILED",
            "efused",
            "EFUSED",
            "ejected",
            "EJECTED",
            "\"open\"",
            "'open'",
            "OPEN",
            "\"created\"",
            "'created'",
            "CREATED",
            "ubmitted",
            "UBMITTED",
            "nitiated",
            "NITIATED",
            "progress",
            "PROGRESS",
            // An authorisation, in code that captures it later.
            "uthoriz",
            "UTHORIZ",
            "uthoris",
            "UTHORIS",
            "anceled",
            "ANCELED",
            "ancelled",
            "ANCELLED",
            "waiting_",
            "WAITING_",
        ])
}

/// Whether the file has a method of a payment's model (`Installment.apply_provider_status`):
/// each class is asked once, not once per method.
fn payment_model(s: &Scan<'_>) -> bool {
    let mut last: Option<&str> = None;
    s.facts.functions.iter().any(|f| {
        let Some((class, _)) = f.qualname.split_once('.') else {
            return false;
        };
        if last == Some(class) {
            return false;
        }
        last = Some(class);
        s.vocab.is_entity(&super::snake(class))
    })
}

/// What a provider's status word says of the money.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    /// It arrived: `succeeded`, `paid`, `captured`.
    Settled,
    /// Not yet, and it may never: `pending`, `processing`, `requires_action`.
    InFlight,
    /// It did not: `declined`, `failed`.
    Failed,
}

fn class(word: &str) -> Option<Class> {
    match word {
        // An authorisation is the answer a payment API gives when the card was accepted.
        // A refund's or a payout's own word for done: `refunded`, `transferred`, `paid_out`.
        "paid" | "succeeded" | "success" | "successful" | "captured" | "settled" | "completed"
        | "complete" | "charged" | "confirmed" | "authorised" | "authorized" | "approved"
        | "refunded" | "transferred" | "paid_out" | "disbursed" => {
            Some(Class::Settled)
        }
        "pending"
        | "processing"
        | "received"
        | "submitted"
        | "initiated"
        | "in_progress"
        | "inprogress"
        | "requires_action"
        // A hold not yet captured: after a capture call, the money did not move.
        | "requires_capture"
        | "requires_confirmation"
        | "requires_payment_method"
        | "requires_source"
        | "requires_source_action"
        | "open"
        | "created"
        | "unconfirmed"
        | "in_flight" => Some(Class::InFlight),
        // `abandoned`: a checkout the payer left (Paystack); `reversed`: money taken back.
        "declined" | "failed" | "failure" | "refused" | "rejected" | "canceled" | "cancelled"
        | "error" | "errored" | "voided" | "void" | "expired" | "denied" | "abandoned"
        | "reversed" | "revoked" => Some(Class::Failed),
        w if w.starts_with("awaiting_") || w.starts_with("waiting_") => Some(Class::InFlight),
        // A word run together from camel case, lower case now: Authorize.net's
        // `capturedPendingSettlement`, `authorizedPendingCapture`, `FDSPendingReview`.
        w if w.contains("pending") || w.contains("processing") => Some(Class::InFlight),
        // `settledSuccessfully`.
        w if w.starts_with("settled") || w.starts_with("succeeded") => Some(Class::Settled),
        // `soft_declined`, `hard_declined`, `authorization_failed`.
        w if ["_declined", "_failed", "_rejected", "_refused"]
            .iter()
            .any(|s| w.ends_with(s)) =>
        {
            Some(Class::Failed)
        }
        _ => None,
    }
}

/// The status word a literal names, lower case: `"processing"`, `"payment_intent.processing"`
/// (an event type), `PaymentStatus.PENDING`, `PENDING`. An f-string names none.
fn literal_word(node: Node<'_>, src: &str) -> Option<String> {
    let text = syntax::text(node, src);
    let word = match node.kind() {
        kinds::STRING => {
            let body = text.trim_start_matches(|c: char| c.is_ascii_alphabetic());
            let prefix = &text[..text.len() - body.len()];
            if prefix.contains(['f', 'F']) {
                return None;
            }
            let body = body.trim_matches(|c| c == '"' || c == '\'');
            body.rsplit(['.', ':', '/']).next().unwrap_or(body)
        }
        kinds::ATTRIBUTE => text.rsplit('.').next().unwrap_or(text),
        kinds::IDENTIFIER => text,
        _ => return None,
    };
    Some(word.trim().replace([' ', '-'], "_").to_ascii_lowercase())
}

/// Whether the tested value reads like a status: `intent.status`, `result["state"]`,
/// `event.type`, `outcome`, `result_code`.
fn names_status(subject: &str) -> bool {
    // `code`: Adyen's `resultCode`, a decline's `code`.
    [
        "status", "state", "outcome", "result", "type", "event", "code",
    ]
    .iter()
    .any(|w| syntax::contains_lowercase(subject, w))
}

/// One test of a status against literals: `s in ("a", "b")`, `s == "a" or s == "b"`,
/// `s != "a" and s != "b"`.
struct Test<'t> {
    subject: Node<'t>,
    literals: Vec<(Node<'t>, Class)>,
    /// `!=` or `not in`: the branch runs for every other status.
    negated: bool,
}

impl Test<'_> {
    fn has(&self, class: Class) -> bool {
        self.literals.iter().any(|(_, c)| *c == class)
    }

    fn first(&self, class: Class) -> Option<Node<'_>> {
        self.literals
            .iter()
            .find(|(_, c)| *c == class)
            .map(|(n, _)| *n)
    }

    /// Only failures or unfinished statuses, and at least one: what the test sets apart is
    /// not a settled payment, and what it leaves is taken for one.
    fn only_unsettled(&self) -> bool {
        !self.literals.is_empty() && !self.has(Class::Settled)
    }

    /// In a file that captures what was authorised (`capture_payment(...)`), an authorisation
    /// is a hold on the card, not money: `status in ("captured", "authorized")` mixes the two.
    fn held_until_captured(mut self, src: &str) -> Self {
        for (node, class) in &mut self.literals {
            if *class == Class::Settled
                && literal_word(*node, src).is_some_and(|w| {
                    matches!(
                        w.to_ascii_lowercase().as_str(),
                        "authorized" | "authorised" | "approved"
                    )
                })
            {
                *class = Class::InFlight;
            }
        }
        self
    }

    /// A settled status and a failure, and nothing in flight, in one positive test: `status
    /// in ("completed", "rejected")`.
    fn failed_too(&self) -> bool {
        !self.negated
            && self.has(Class::Settled)
            && self.has(Class::Failed)
            && !self.has(Class::InFlight)
    }

    /// A settled and an in-flight status in one positive test.
    fn mixed(&self) -> bool {
        !self.negated && self.has(Class::Settled) && self.has(Class::InFlight)
    }
}

fn unparenthesize(mut node: Node<'_>) -> Node<'_> {
    while node.kind() == "parenthesized_expression" {
        match node.named_child(0) {
            Some(inner) => node = inner,
            None => break,
        }
    }
    node
}

/// A comparison of a status with literals, every literal a status word of a known class.
fn comparison<'t>(node: Node<'t>, src: &str) -> Option<Test<'t>> {
    let node = unparenthesize(node);
    if node.kind() != kinds::COMPARISON_OPERATOR || node.named_child_count() != 2 {
        return None;
    }
    let (subject, other) = (node.named_child(0)?, node.named_child(1)?);
    let operator = src
        .get(subject.end_byte()..other.start_byte())?
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let (negated, set) = match operator.as_str() {
        "==" => (false, false),
        "!=" => (true, false),
        "in" => (false, true),
        "not in" => (true, true),
        _ => return None,
    };
    if !names_status(syntax::text(subject, src)) {
        return None;
    }
    let other = unparenthesize(other);
    let elements = if set {
        if !matches!(other.kind(), kinds::TUPLE | kinds::LIST | "set") {
            return None;
        }
        python::named_children(other)
    } else {
        vec![other]
    };
    let literals = elements
        .into_iter()
        .map(|e| Some((e, class(&literal_word(e, src)?)?)))
        .collect::<Option<Vec<_>>>()?;
    (!literals.is_empty()).then_some(Test {
        subject,
        literals,
        negated,
    })
}

/// The terms of an `and` chain that compare two things (`a in b`, `a != b`), unparenthesised.
fn compared_terms(condition: Node<'_>) -> Vec<Node<'_>> {
    let mut terms = Vec::new();
    chain(condition, "and", &mut terms);
    terms
        .into_iter()
        .map(unparenthesize)
        .filter(|t| t.kind() == kinds::COMPARISON_OPERATOR && t.named_child_count() == 2)
        .collect()
}

/// The operands of a chain of one boolean operator: `a or b or c`.
fn chain<'t>(node: Node<'t>, operator: &str, out: &mut Vec<Node<'t>>) {
    out.extend(
        syntax::operands(node, operator)
            .into_iter()
            .map(unparenthesize),
    );
}

/// The status tests a condition makes: a single comparison, an `or` of positive ones on one
/// status, an `and` of negated ones on one status, or each positive test among the terms of an
/// `and` (`intent.status in (...) and intent.amount == amount`).
fn tests<'t>(condition: Node<'t>, src: &str) -> Vec<Test<'t>> {
    let condition = unparenthesize(condition);
    if let Some(test) = comparison(condition, src) {
        return vec![test];
    }
    if condition.kind() != kinds::BOOLEAN_OPERATOR {
        return Vec::new();
    }
    let merged = |operator: &str, negated: bool| {
        let mut terms = Vec::new();
        chain(condition, operator, &mut terms);
        let parts: Option<Vec<Test<'t>>> = terms.iter().map(|t| comparison(*t, src)).collect();
        let parts = parts?;
        let subject = syntax::text(parts.first()?.subject, src);
        if parts
            .iter()
            .any(|p| p.negated != negated || syntax::text(p.subject, src) != subject)
        {
            return None;
        }
        let first = parts.first()?.subject;
        Some(Test {
            subject: first,
            literals: parts.into_iter().flat_map(|p| p.literals).collect(),
            negated,
        })
    };
    if let Some(test) = merged("or", false).or_else(|| merged("and", true)) {
        return vec![test];
    }
    let mut terms = Vec::new();
    chain(condition, "and", &mut terms);
    if terms.len() < 2 {
        return Vec::new();
    }
    // `result.transaction is not None and result.transaction.status != "processor_declined"`:
    // beside tests that only ask whether there is an answer, a negated test still lets every
    // other status through.
    let presence = |t: &Node<'t>| {
        let t = unparenthesize(*t);
        t.kind() == kinds::COMPARISON_OPERATOR && syntax::text(t, src).ends_with(" is not None")
    };
    let only_presence_besides =
        |i: usize| terms.iter().enumerate().all(|(j, t)| j == i || presence(t));
    let kept: Vec<Test<'t>> = terms
        .iter()
        .enumerate()
        .flat_map(|(i, t)| {
            tests(*t, src)
                .into_iter()
                .filter(move |test| !test.negated || only_presence_besides(i))
        })
        .collect();
    kept
}

/// Success words that a failure's name holds too, each with such a name.
const SUCCESS_INSIDE_A_FAILURE: &[(&str, &str)] = &[
    ("success", "unsuccessful"),
    ("paid", "unpaid"),
    ("approved", "disapproved"),
    ("captured", "uncaptured"),
    ("settled", "unsettled"),
    ("authorized", "unauthorized"),
    ("authorised", "unauthorised"),
    ("confirmed", "unconfirmed"),
    ("verified", "unverified"),
    ("valid", "invalid"),
    ("complete", "incomplete"),
];

/// A success told by a substring of a status or an event's kind (`"successfully" in kind`,
/// `"paid" in order_state`): the test and a failure's name that passes it
/// (`subscription_charged_unsuccessfully`). A set's membership (`"paid" in PAID_STATES`,
/// `"captured" in statuses`) is left alone.
fn substring_test<'t>(condition: Node<'t>, src: &str) -> Option<(Node<'t>, &'static str)> {
    compared_terms(condition).into_iter().find_map(|term| {
        let (literal, subject) = (term.named_child(0)?, unparenthesize(term.named_child(1)?));
        let operator = src.get(literal.end_byte()..subject.start_byte())?.trim();
        if operator != "in" || literal.kind() != kinds::STRING {
            return None;
        }
        let word = syntax::string_value(literal, src)?.to_ascii_lowercase();
        // `payload["order_state"].upper()`: the value, cased.
        let mut subject = subject;
        while subject.kind() == kinds::CALL
            && let Some(function) = subject.field("function")
            && function.kind() == kinds::ATTRIBUTE
            && function.field("attribute").is_some_and(|a| {
                matches!(
                    syntax::text(a, src),
                    "upper" | "lower" | "casefold" | "strip"
                )
            })
            && let Some(object) = function.field("object")
        {
            subject = object;
        }
        // What it is tested in: a status or a kind by its name, one value, not a collection.
        let name = syntax::text(subject, src);
        let last = name
            .rsplit(['.', '['])
            .next()
            .unwrap_or(name)
            .trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .to_ascii_lowercase();
        let one_value = matches!(
            subject.kind(),
            kinds::IDENTIFIER | kinds::ATTRIBUTE | kinds::SUBSCRIPT
        ) && ["status", "state", "kind", "type", "outcome", "result"]
            .iter()
            .any(|w| last.ends_with(w))
            && !last.ends_with("states")
            && !last.ends_with("types")
            && !last.ends_with("kinds");
        if !one_value {
            return None;
        }
        SUCCESS_INSIDE_A_FAILURE
            .iter()
            .find(|(success, failure)| word.contains(success) && !word.contains(failure))
            .map(|(_, failure)| (term, *failure))
    })
}

/// Whether the file captures payments it authorised: a call named for a capture
/// (`capture_payment`, `self._razorpay.capture(...)`).
fn captures_later(idx: &NodeIndex<'_>, src: &str) -> bool {
    idx.all(kinds::CALL).iter().any(|c| {
        syntax::name_words(idx.callee_name(*c, src))
            .iter()
            .any(|w| w == "capture")
    })
}

/// What in a block records the payment as paid: a status set to a settled value, an ORM update
/// that does so, a call named for it (`mark_paid`, `settle_overage`, `fulfil_order`,
/// `credit_wallet`), a settled status returned, or a call of a function of this file that does
/// one of these (one call deep).
fn records_paid<'t>(
    idx: &NodeIndex<'t>,
    block: Node<'_>,
    src: &str,
    follow: bool,
) -> Option<Node<'t>> {
    let assignment = idx.within(block, kinds::ASSIGNMENT).iter().find(|a| {
        let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
            return false;
        };
        let attr = match left.kind() {
            kinds::ATTRIBUTE => left.field("attribute"),
            kinds::SUBSCRIPT => left.field("subscript"),
            _ => None,
        };
        attr.is_some_and(|attr| {
            let name = syntax::text(attr, src)
                .trim_matches(|c| c == '"' || c == '\'')
                .to_ascii_lowercase();
            records_success(&name, right, src)
        })
    });
    let call = idx.within(block, kinds::CALL).iter().find(|c| {
        let name = syntax::callee_name(**c, src);
        let lower = name.trim_start_matches('_').to_ascii_lowercase();
        // `self._plan_changes.complete(change_id, txn)`: a record of the payment completed.
        let named = credits(&lower)
            || completes(&lower).is_some() && !asks_the_provider(idx, **c, src)
            || matches!(lower.as_str(), "complete" | "succeed")
                && syntax::receiver(**c).is_some_and(|r| syntax::text(r, src) != "self")
            || ["fulfil", "fulfill", "settle"]
                .iter()
                .any(|p| lower.starts_with(p))
            || lower
                .strip_prefix("mark")
                .or_else(|| lower.strip_prefix("set"))
                .or_else(|| lower.strip_prefix("record"))
                .is_some_and(says_success);
        // `Payout.objects.filter(...).update(status=PAID)`, and a helper of the project handed
        // the settled status to write (`_move(payout.pk, OPEN, status=Status.PAID, ...)`).
        let updated = !crate::rules::pay::builds_a_class(syntax::callee(**c, src))
            && syntax::keyword_args(**c, src).into_iter().any(|(k, v)| {
                let k = k.to_ascii_lowercase();
                (name == "update" || k == "status" || k == "state") && records_success(&k, v, src)
            });
        // `update_one({"_id": ...}, {"$set": {"payment_status": "succeeded"}})`,
        // `.values(status="paid")`: a store's update handed the settled status.
        let stored = matches!(
            name,
            "update_one" | "update_many" | "find_one_and_update" | "values" | "hset" | "hmset"
        ) && (syntax::keyword_args(**c, src)
            .into_iter()
            .any(|(k, v)| records_success(&k.to_ascii_lowercase(), v, src))
            || c.field("arguments").is_some_and(|a| settled_pair(a, src)));
        // `credit_bill(conn, bill_id, amount)`: what is owed is paid down.
        let credited = lower
            .strip_prefix("credit_")
            .is_some_and(|noun| matches!(noun, "bill" | "invoice" | "order" | "booking"));
        // `mark_payment(conn, payment_id, "authorised", ref)`, `_transition(session, debit,
        // ("submitted",), "settled")`, `_set_order_status(session, id, ..., "paid")`: a settled
        // status handed to a call that records it or moves the record to it.
        let marked = (lower.starts_with("mark")
            || lower.starts_with("record")
            || lower.starts_with("move")
            || lower.contains("transition")
            || lower.ends_with("_status")
            || lower.ends_with("_state"))
            && syntax::positional_args(**c)
                .into_iter()
                .any(|a| success_value(a, src) && a.kind() == kinds::STRING);
        // `conn.execute("UPDATE invoices SET status = 'paid', ... WHERE id = %s", ...)`.
        let written = matches!(name, "execute" | "executemany" | "fetchrow" | "fetchval")
            && syntax::positional_args(**c)
                .first()
                .is_some_and(|sql| sql_sets_settled(syntax::text(*sql, src)));
        named || updated || stored || credited || marked || written
    });
    let returned = idx.within(block, kinds::RETURN_STATEMENT).iter().find(|r| {
        syntax::return_value(**r)
            .is_some_and(|v| success_value(v, src) && literal_word(v, src).is_some())
    });
    let direct = [assignment, call, returned]
        .into_iter()
        .flatten()
        .min_by_key(|n| n.start_byte())
        .copied();
    if direct.is_some() || !follow {
        return direct;
    }
    // `_activate(gift)`: a helper of this file that records the payment, and does not test
    // the status itself (`sync_order`, which reads the order back and pays only a completed
    // one).
    idx.within(block, kinds::CALL).iter().copied().find(|c| {
        let name = syntax::callee_name(*c, src);
        !name.is_empty()
            && idx.all(kinds::FUNCTION_DEFINITION).iter().any(|f| {
                syntax::function_name(*f, src) == name
                    && !syntax::contains(*f, *c)
                    && f.field("body")
                        .is_some_and(|b| records_paid(idx, b, src, false).is_some())
                    && !idx.within(*f, kinds::IF_STATEMENT).iter().any(|stmt| {
                        stmt.field("condition").is_some_and(|cond| {
                            !tests(cond, src).is_empty()
                                || idx
                                    .within(cond, kinds::COMPARISON_OPERATOR)
                                    .iter()
                                    .chain(
                                        (cond.kind() == kinds::COMPARISON_OPERATOR)
                                            .then_some(&cond),
                                    )
                                    .any(|c| {
                                        c.named_child(0).is_some_and(|subject| {
                                            names_status(syntax::text(subject, src))
                                        })
                                    })
                        })
                    })
            })
    })
}

/// Whether `call` goes to the object its function reads the provider's state from
/// (`self._wise.complete_batch_group(...)` beside `self._wise.get_batch_group(...)`): a request
/// to the provider to complete or confirm, which records nothing.
fn asks_the_provider(idx: &NodeIndex<'_>, call: Node<'_>, src: &str) -> bool {
    let Some(receiver) = syntax::receiver(call).map(|r| syntax::text(r, src)) else {
        return false;
    };
    if receiver == "self" {
        return false;
    }
    idx.enclosing(call, kinds::FUNCTION_DEFINITION)
        .is_some_and(|func| {
            idx.within(func, kinds::CALL).iter().any(|other| {
                syntax::receiver(*other).is_some_and(|r| syntax::text(r, src) == receiver)
                    && ["get_", "fetch_", "retrieve_", "lookup_"]
                        .iter()
                        .any(|p| syntax::callee_name(*other, src).starts_with(p))
            })
        })
}

/// Whether an SQL statement sets a status to a settled value (`SET status = 'paid'`,
/// `state='succeeded'`).
fn sql_sets_settled(sql: &str) -> bool {
    let lower = sql.to_ascii_lowercase();
    if !lower.contains("set ") {
        return false;
    }
    ["status", "state"].iter().any(|column| {
        lower.match_indices(column).any(|(at, _)| {
            let rest = lower[at + column.len()..].trim_start();
            let Some(rest) = rest.strip_prefix('=') else {
                return false;
            };
            let rest = rest.trim_start();
            let Some(rest) = rest.strip_prefix('\'') else {
                return false;
            };
            rest.split('\'')
                .next()
                .is_some_and(|word| class(word) == Some(Class::Settled))
        })
    })
}

/// Whether the dicts among `node`'s children, nested ones too (`{"$set": {...}}`), hold a
/// settled status under a status key (`"payment_status": "succeeded"`).
fn settled_pair(node: Node<'_>, src: &str) -> bool {
    python::named_children(node)
        .into_iter()
        .any(|child| match child.kind() {
            kinds::DICTIONARY => settled_pair(child, src),
            kinds::PAIR => {
                let (Some(k), Some(v)) = (child.field("key"), child.field("value")) else {
                    return false;
                };
                v.kind() == kinds::DICTIONARY && settled_pair(v, src)
                    || syntax::string_value(k, src)
                        .is_some_and(|k| records_success(&k.to_ascii_lowercase(), v, src))
            }
            _ => false,
        })
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    branches(cx, idx, src);
    expressions(cx, idx, src);
    maps(cx, idx, src);
    defaulted(cx, idx, src);
}

/// `_FINAL_STATUS.get(obj.get("status"), RefundStatus.SUCCEEDED)`, `event.get("status",
/// "paid")`: a status the map does not list, or none at all (pending, processing, one the
/// provider adds later), is taken for the success it defaults to.
fn defaulted(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    for &call in idx.all(kinds::CALL) {
        if idx.callee_name(call, src) != "get" {
            continue;
        }
        let args = syntax::positional_args(call);
        let [key, default] = args.as_slice() else {
            continue;
        };
        // `Refund.Status.PROCESSED`: Razorpay's and others' word for a refund done.
        let processed = syntax::text(*default, src)
            .rsplit('.')
            .next()
            .is_some_and(|w| {
                w.trim_matches(['"', '\''])
                    .eq_ignore_ascii_case("processed")
            });
        if !(success_value(*default, src) || processed)
            || !names_status(syntax::text(*key, src))
            || !kept_as_a_status(idx, call, src)
        {
            continue;
        }
        let map = syntax::receiver(call).map_or("", |r| syntax::text(r, src));
        cx.report(&RULE, call)
            .arg("effect", syntax::normalized(call, src))
            .arg("effect_line", syntax::lines(call).0.to_string())
            .arg("map", map.to_string())
            .arg("settled", syntax::text(*default, src).to_string())
            .note("defaulted");
    }
}

/// `if`/`elif` branches that record the payment as paid under a mixed test, or in the `else` of
/// a test that tells only a failure apart.
fn branches<'t>(cx: &mut Ctx<'_>, idx: &NodeIndex<'t>, src: &str) {
    let mut captures: Option<bool> = None;
    for &stmt in idx.all(kinds::IF_STATEMENT) {
        let mut arms: Vec<Node<'t>> = vec![stmt];
        let mut otherwise = None;
        let mut cursor = stmt.walk();
        for child in stmt.named_children(&mut cursor) {
            match child.kind() {
                kinds::ELIF_CLAUSE => arms.push(child),
                kinds::ELSE_CLAUSE => otherwise = child.field("body"),
                _ => {}
            }
        }
        let single = arms.len() == 1;
        for arm in arms {
            let (Some(condition), Some(body)) = (arm.field("condition"), arm.field("consequence"))
            else {
                continue;
            };
            // What records the payment as paid for the statuses a test that tells only
            // failures apart leaves: its own branch when negated, else the `else` of a lone
            // `if`, or, after `if failed: ...; return`, the statements that follow the `if`.
            let rest = |negated: bool| {
                if negated {
                    records_paid(idx, body, src, true)
                } else if !single {
                    None
                } else if let Some(otherwise) = otherwise {
                    records_paid(idx, otherwise, src, true)
                } else if !syntax::block_falls_through(body, src) {
                    after(idx, stmt, src)
                } else {
                    None
                }
            };
            if let Some(set) = constant_set(cx, idx, condition, src) {
                if (set.mixed().is_some() || set.failed_too().is_some())
                    && !set.negated
                    && let Some(effect) = records_paid(idx, body, src, true)
                {
                    report_set(cx, src, &set, condition, effect);
                } else if !set.unsettled.is_empty() {
                    // `if remote["status"] in PAYMENT_FAILED: ...; return` and then the paid
                    // path: as with the literals below, only the failures are told apart.
                    if let Some(effect) = rest(set.negated)
                        && !tells_apart_elsewhere(idx, arm, set.subject, src)
                    {
                        report_set(cx, src, &set, condition, effect);
                    }
                }
            }
            if let Some((test, negative)) = substring_test(condition, src)
                && let Some(effect) = records_paid(idx, body, src, true)
                && !own_state(syntax::text(test, src), effect, src)
            {
                let finding = cx
                    .report(&RULE, condition)
                    .arg("which", format!("`{}`", syntax::text(test, src)))
                    .arg("effect", super::first_line(effect, src))
                    .arg("effect_line", syntax::lines(effect).0.to_string())
                    .arg("negative", negative.to_string())
                    .note("substring");
                finding.function = idx
                    .enclosing(stmt, kinds::FUNCTION_DEFINITION)
                    .map(|f| crate::rules::facts::qualname(f, idx, src))
                    .unwrap_or_default();
            }
            for test in tests(condition, src) {
                let authorised = test.has(Class::Settled)
                    && !test.negated
                    && *captures.get_or_insert_with(|| captures_later(idx, src));
                let test = if authorised {
                    test.held_until_captured(src)
                } else {
                    test
                };
                if test.failed_too() {
                    if let Some(effect) = records_paid(idx, body, src, true) {
                        report(cx, src, &test, condition, effect, "failed_too");
                    }
                } else if test.mixed() {
                    // The unsettled status is an authorisation the file goes on to capture.
                    let held = authorised
                        && test.first(Class::InFlight).is_some_and(|n| {
                            literal_word(n, src).is_some_and(|w| class(&w) == Some(Class::Settled))
                        });
                    if let Some(effect) = records_paid(idx, body, src, true) {
                        report(
                            cx,
                            src,
                            &test,
                            condition,
                            effect,
                            if held { "held" } else { "mixed" },
                        );
                    }
                } else if test.only_unsettled() {
                    // Only the failure is told apart: the other branch takes every other
                    // status, the unfinished ones too.
                    if let Some(effect) = rest(test.negated)
                        && !tells_apart_elsewhere(idx, arm, test.subject, src)
                        && !under_a_settled_test(effect, arm, src)
                    {
                        // A failure told apart, or an unfinished status (`requires_capture`
                        // after a capture) told apart: the note names which.
                        let note = if test.has(Class::InFlight) {
                            "unfinished_only"
                        } else {
                            "otherwise"
                        };
                        report(cx, src, &test, condition, effect, note);
                    }
                }
            }
        }
    }
}

/// What records the payment as paid in the statements that follow `stmt` in its block.
fn after<'t>(idx: &NodeIndex<'t>, stmt: Node<'_>, src: &str) -> Option<Node<'t>> {
    let mut next = stmt.next_named_sibling();
    while let Some(node) = next {
        if let Some(effect) = records_paid(idx, node, src, true) {
            return Some(effect);
        }
        next = node.next_named_sibling();
    }
    None
}

/// Whether `effect` sits in the branch of a later test that the status is settled (`if
/// intent.status == "succeeded": order.status = "paid"`), outside `arm`: what it records is
/// no status the failure test let through.
fn under_a_settled_test(effect: Node<'_>, arm: Node<'_>, src: &str) -> bool {
    let mut at = effect.parent();
    while let Some(node) = at {
        if node.kind() == kinds::FUNCTION_DEFINITION || syntax::contains(node, arm) {
            return false;
        }
        if matches!(node.kind(), kinds::IF_STATEMENT | kinds::ELIF_CLAUSE)
            && node
                .field("consequence")
                .is_some_and(|body| syntax::contains(body, effect))
            && node.field("condition").is_some_and(|cond| {
                tests(cond, src)
                    .iter()
                    .any(|t| t.has(Class::Settled) && !t.negated && !t.mixed() && !t.failed_too())
                    || says_it_succeeded(cond, src)
            })
        {
            return true;
        }
        at = node.parent();
    }
    false
}

/// `if outcome.succeeded:`, `if result.is_success:`: a flag of the answer that says the payment
/// went through, read as it is.
fn says_it_succeeded(cond: Node<'_>, src: &str) -> bool {
    let cond = unparenthesize(cond);
    let flag = crate::rules::facts::last_name(syntax::text(cond, src));
    matches!(cond.kind(), kinds::ATTRIBUTE | kinds::IDENTIFIER)
        && crate::rules::err::timeout_read_as_failure::SUCCESS_FLAGS
            .contains(&flag.strip_prefix("is_").unwrap_or(flag))
}

/// Whether the function tests the same status elsewhere: an earlier `if status == "pending":
/// return` leaves the failure test only what is final.
fn tells_apart_elsewhere(idx: &NodeIndex<'_>, arm: Node<'_>, subject: Node<'_>, src: &str) -> bool {
    let Some(func) = idx.enclosing(arm, kinds::FUNCTION_DEFINITION) else {
        return false;
    };
    let subject = syntax::text(subject, src);
    let last = subject.rsplit(['.', '[']).next().unwrap_or(subject);
    let bare = |text: &str| !text.contains(['.', '[']);
    // A lone `if` whose branch goes on to what follows (`if status == "waiting_for_capture":
    // capture(...)`) leaves every status to the code after it: it tells nothing apart.
    let goes_on = |c: Node<'_>| {
        let mut at = c.parent();
        while let Some(node) = at {
            if matches!(node.kind(), kinds::IF_STATEMENT | kinds::ELIF_CLAUSE) {
                let tested = node
                    .field("condition")
                    .is_some_and(|cond| syntax::contains(cond, c));
                return tested
                    && node.kind() == kinds::IF_STATEMENT
                    && node.field("alternative").is_none()
                    && node
                        .field("consequence")
                        .is_some_and(|body| syntax::block_falls_through(body, src));
            }
            if node.kind() == kinds::BLOCK {
                return false;
            }
            at = node.parent();
        }
        false
    };
    idx.within(func, kinds::COMPARISON_OPERATOR)
        .iter()
        .any(|c| {
            !syntax::contains(arm, *c)
                && !goes_on(*c)
                && c.named_child(0).is_some_and(|s| {
                    let text = syntax::text(s, src);
                    // The same status, or the name it was read into (`status` and
                    // `intent.status`); not another object's (`overage_intent.status`).
                    text == subject
                        || (bare(text) || bare(subject))
                            && text.rsplit(['.', '[']).next() == Some(last)
                })
        })
        || idx.within(func, kinds::CALL).iter().any(|c| {
            // A status handed to a map or a `match` helper is read in full there.
            matches!(syntax::callee_name(*c, src), "get")
                && syntax::positional_args(*c)
                    .first()
                    .is_some_and(|a| syntax::text(*a, src) == subject)
        })
}

/// `status = PAID if result.status in ("succeeded", "pending") else FAILED`; `return
/// self.status in ("paid", "pending")` in `is_paid`; `paid = intent.status in (...)`.
fn expressions<'t>(cx: &mut Ctx<'_>, idx: &NodeIndex<'t>, src: &str) {
    for &expr in idx.all(kinds::CONDITIONAL_EXPRESSION) {
        let (Some(value), Some(condition)) = (expr.named_child(0), expr.named_child(1)) else {
            continue;
        };
        if !(success_value(value, src) && literal_word(value, src).is_some()) {
            continue;
        }
        for test in tests(condition, src) {
            if test.mixed() {
                report(cx, src, &test, condition, value, "mixed");
            }
        }
    }
    let paid_name = |name: &str| {
        let lower = name.to_ascii_lowercase();
        lower
            .split('_')
            .any(|w| matches!(w, "paid" | "settled" | "succeeded" | "captured" | "charged"))
    };
    for &ret in idx.all(kinds::RETURN_STATEMENT) {
        let Some(value) = syntax::return_value(ret).filter(|v| {
            matches!(
                v.kind(),
                kinds::COMPARISON_OPERATOR | kinds::BOOLEAN_OPERATOR
            )
        }) else {
            continue;
        };
        let Some(func) = idx.enclosing(ret, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        if !paid_name(syntax::function_name(func, src)) {
            continue;
        }
        for test in tests(value, src) {
            if test.mixed() {
                report(cx, src, &test, value, ret, "named");
            }
        }
    }
    for &assign in idx.all(kinds::ASSIGNMENT) {
        let Some(right) = assign
            .field("right")
            .filter(|r| r.kind() == kinds::COMPARISON_OPERATOR)
        else {
            continue;
        };
        let Some(left) = assign.field("left") else {
            continue;
        };
        let name = syntax::text(left, src);
        let name = name.rsplit('.').next().unwrap_or(name);
        if !paid_name(name) {
            continue;
        }
        for test in tests(right, src) {
            if test.mixed() {
                report(cx, src, &test, right, assign, "named");
            }
        }
    }
}

/// A status map (`{"open": PENDING, "pending": PAID, "paid": PAID}`) bound to a name or
/// returned, that sends an unfinished status to a settled one beside a settled status of its
/// own.
fn maps<'t>(cx: &mut Ctx<'_>, idx: &NodeIndex<'t>, src: &str) {
    let bound = idx.all(kinds::ASSIGNMENT).iter().filter_map(|a| {
        let right = a.field("right").filter(|r| r.kind() == kinds::DICTIONARY)?;
        let left = a.field("left").map(|l| syntax::text(l, src));
        Some((right, left))
    });
    let returned = idx.all(kinds::RETURN_STATEMENT).iter().filter_map(|r| {
        let value = syntax::return_value(*r).filter(|v| v.kind() == kinds::DICTIONARY)?;
        Some((value, None))
    });
    let dicts: Vec<(Node<'t>, Option<&str>)> = bound.chain(returned).collect();
    for (dict, name) in dicts {
        let pairs: Vec<(Node<'t>, Class, Node<'t>)> = python::named_children(dict)
            .into_iter()
            .filter(|p| p.kind() == kinds::PAIR)
            .filter_map(|p| {
                let key = p.field("key")?;
                let value = p.field("value")?;
                let class = class(&literal_word(key, src)?)?;
                (key.kind() == kinds::STRING).then_some((p, class, value))
            })
            .collect();
        let settled_to_paid = pairs
            .iter()
            .find(|(_, c, v)| *c == Class::Settled && success_value(*v, src));
        let Some(&(settled, _, _)) = settled_to_paid else {
            continue;
        };
        for &(pair, class, value) in &pairs {
            if class != Class::InFlight || !success_value(value, src) {
                continue;
            }
            let (Some(key), Some(settled_key)) = (pair.field("key"), settled.field("key")) else {
                continue;
            };
            let effect = syntax::text(pair, src).to_string();
            let finding = cx
                .report(&RULE, pair)
                .arg("which", format!("`{}`", syntax::text(key, src)))
                .arg("effect", effect)
                .arg("effect_line", syntax::lines(pair).0.to_string())
                .arg("status", syntax::text(key, src).to_string())
                .arg("settled", syntax::text(settled_key, src).to_string());
            if let Some(name) = name {
                finding.arg("map", name.to_string());
            }
            finding.note("map");
            // `"processing": "refunded"`: a refund's map.
            if syntax::contains_lowercase(syntax::text(value, src), "refund") {
                finding.note("refund");
            }
        }
    }
}

/// Whether what `call` gives is kept as a status: assigned to one (`refund.status = ...`,
/// `status = ...`), or returned by a function named for one. Not a label shown to a person
/// (`labels.get(status, "Paid")`).
fn kept_as_a_status(idx: &NodeIndex<'_>, call: Node<'_>, src: &str) -> bool {
    let states = |text: &str| {
        let lower = text.to_ascii_lowercase();
        lower.contains("status") || lower.contains("state")
    };
    match call.parent() {
        Some(a) if a.kind() == kinds::ASSIGNMENT => a
            .field("left")
            .is_some_and(|l| states(syntax::text(l, src))),
        Some(r) if r.kind() == kinds::RETURN_STATEMENT => idx
            .enclosing(call, kinds::FUNCTION_DEFINITION)
            .is_some_and(|f| states(syntax::function_name(f, src))),
        _ => false,
    }
}

fn report(
    cx: &mut Ctx<'_>,
    src: &str,
    test: &Test<'_>,
    at: Node<'_>,
    effect: Node<'_>,
    note: &'static str,
) {
    let subject = syntax::text(test.subject, src);
    // A refund whose pending state is written into the test that books it as done
    // (`status in ("succeeded", "pending")`) is no habit of bookkeeping but a choice to read.
    let refund = about_a_refund(cx, at, effect, src);
    if own_state(subject, effect, src)
        || own_enum(subject, test, src)
        || refund && !matches!(note, "failed_too" | "mixed")
    {
        return;
    }
    // Written as code, the same in every language: the test the recording branch runs under.
    let which = match note {
        "otherwise" | "unfinished_only" => {
            let failures: Vec<&str> = test
                .literals
                .iter()
                .map(|(n, _)| syntax::text(*n, src))
                .collect();
            match failures.as_slice() {
                [one] => format!("`{subject} != {one}`"),
                many => format!("`{subject} not in ({})`", many.join(", ")),
            }
        }
        "failed_too" => match test.first(Class::Failed) {
            Some(status) => format!("`{subject} == {}`", syntax::text(status, src)),
            None => return,
        },
        _ => match test.first(Class::InFlight) {
            Some(status) => format!("`{subject} == {}`", syntax::text(status, src)),
            None => return,
        },
    };
    let status = match test.first(if note == "failed_too" {
        Class::Failed
    } else {
        Class::InFlight
    }) {
        Some(status) => syntax::text(status, src).to_string(),
        None => test
            .literals
            .iter()
            .map(|(n, _)| syntax::text(*n, src))
            .collect::<Vec<_>>()
            .join(", "),
    };
    let settled = test
        .first(Class::Settled)
        .map(|n| syntax::text(n, src).to_string())
        .unwrap_or_default();
    let effect_text = super::first_line(effect, src);
    let finding = cx
        .report(&RULE, at)
        .arg("which", which)
        .arg("effect", effect_text)
        .arg("effect_line", syntax::lines(effect).0.to_string())
        .arg("status", status)
        .arg("settled", settled)
        .note(note);
    if matches!(note, "otherwise" | "unfinished_only") {
        finding.severity(Severity::Important);
    }
    if refund && note == "mixed" {
        finding.note("refund");
    }
}

/// `status in AUTHORISED`, where the constant is a set of status words defined at module level,
/// in this file or (in repository mode) in a module it imports from, and puts an unfinished
/// status beside a settled one (`AUTHORISED = frozenset({"Authorised", "Received"})`).
struct ConstantSet<'t> {
    subject: Node<'t>,
    name: String,
    /// `path:line` of its definition.
    at: String,
    /// Its first unfinished status and its first settled one, as written.
    in_flight: Option<String>,
    settled: Option<String>,
    /// Its first failure, as written.
    failed: Option<String>,
    /// Its statuses as written, when every one is a failure or unfinished.
    unsettled: Vec<String>,
    /// `not in`: the branch runs for every status outside it.
    negated: bool,
}

impl ConstantSet<'_> {
    /// An unfinished status beside a settled one.
    fn mixed(&self) -> Option<(&str, &str)> {
        Some((self.in_flight.as_deref()?, self.settled.as_deref()?))
    }

    /// A failure beside a settled status (`TERMINAL_STATUSES = (Status.COMPLETED,
    /// Status.REJECTED, Status.FAILED)`): what ended, not what was paid.
    fn failed_too(&self) -> Option<(&str, &str)> {
        Some((self.failed.as_deref()?, self.settled.as_deref()?))
    }
}

fn constant_set<'t>(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'t>,
    condition: Node<'t>,
    src: &str,
) -> Option<ConstantSet<'t>> {
    compared_terms(condition).into_iter().find_map(|term| {
        let (subject, set) = (term.named_child(0)?, term.named_child(1)?);
        let operator = src.get(subject.end_byte()..set.start_byte())?.trim();
        let negated = operator.split_whitespace().eq(["not", "in"]);
        if !(operator == "in" || negated)
            || !matches!(set.kind(), kinds::IDENTIFIER | kinds::ATTRIBUTE)
            || !names_status(syntax::text(subject, src))
        {
            return None;
        }
        let name = syntax::text(set, src);
        let (value, at) = super::constant_collection(cx, idx, name, src)?;
        let words = status_words(&value);
        let find = |class_of: Class| {
            words
                .iter()
                .find(|(w, _)| class(w) == Some(class_of))
                .map(|(_, raw)| raw.clone())
        };
        let classes: Vec<Option<Class>> = words.iter().map(|(w, _)| class(w)).collect();
        let unsettled = if !classes.is_empty()
            && classes
                .iter()
                .all(|c| matches!(c, Some(Class::Failed | Class::InFlight)))
        {
            words.iter().map(|(_, raw)| raw.clone()).collect()
        } else {
            Vec::new()
        };
        Some(ConstantSet {
            subject,
            name: name.to_string(),
            at,
            in_flight: find(Class::InFlight),
            settled: find(Class::Settled),
            failed: find(Class::Failed),
            unsettled,
            negated,
        })
    })
}

/// The status words of a set's text: its quoted strings, then the members of a class of
/// states it names (`Status.COMPLETED`), each lower case with what is written.
fn status_words(text: &str) -> Vec<(String, String)> {
    let mut words = quoted_words(text);
    words.extend(
        super::state_members(text)
            .map(|(written, _, member)| (member.to_ascii_lowercase(), written.to_string())),
    );
    words
}

/// The quoted strings of a text, as status words (lower case) with the literal as written.
fn quoted_words(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(['"', '\'']) {
        let quote = rest.as_bytes()[start] as char;
        let after = &rest[start + 1..];
        let Some(end) = after.find(quote) else {
            break;
        };
        let body = &after[..end];
        let word = body.trim().replace([' ', '-'], "_").to_ascii_lowercase();
        out.push((word, format!("{quote}{body}{quote}")));
        rest = &after[end + 1..];
    }
    out
}

fn report_set(cx: &mut Ctx<'_>, src: &str, set: &ConstantSet<'_>, at: Node<'_>, effect: Node<'_>) {
    let subject = syntax::text(set.subject, src);
    // A refund refused and booked as done is the payer's money never sent: unlike a pending
    // one, it is no habit of bookkeeping.
    let failed_too = set.mixed().is_none() && set.failed_too().is_some();
    if own_state(subject, effect, src) || !failed_too && about_a_refund(cx, at, effect, src) {
        return;
    }
    let effect_text = super::first_line(effect, src);
    let finding = cx
        .report(&RULE, at)
        .arg("effect", effect_text)
        .arg("effect_line", syntax::lines(effect).0.to_string())
        .arg("map", set.name.clone())
        .arg("map_at", set.at.clone());
    match (set.mixed(), set.failed_too()) {
        (Some((in_flight, settled)), _) => {
            finding
                .arg("which", format!("`{subject} == {in_flight}`"))
                .arg("status", in_flight.to_string())
                .arg("settled", settled.to_string())
                .note("set");
        }
        (None, Some((failed, settled))) if !set.negated => {
            finding
                .arg("which", format!("`{subject} == {failed}`"))
                .arg("status", failed.to_string())
                .arg("settled", settled.to_string())
                .note("failed_too");
        }
        _ => {
            finding
                .arg("which", format!("`{subject} not in {}`", set.name))
                .arg("status", set.unsettled.join(", "))
                .arg("settled", String::new())
                .note("set_otherwise")
                .severity(Severity::Important);
        }
    }
}

/// Whether the literals are members of our own model's status enum, named for the object
/// tested (`policy.status != PolicyStatus.CANCELLED`, `order.state == OrderState.PENDING`,
/// `subscription.status == Subscription.Status.CANCELED`): the record's own lifecycle, not what
/// the provider answered.
fn own_enum(subject: &str, test: &Test<'_>, src: &str) -> bool {
    let Some((object, _)) = subject.rsplit_once(['.', '[']) else {
        return false;
    };
    let object = object
        .rsplit('.')
        .next()
        .unwrap_or(object)
        .replace('_', "")
        .to_ascii_lowercase();
    !object.is_empty()
        && test.literals.iter().all(|(n, _)| {
            if n.kind() != kinds::ATTRIBUTE {
                return false;
            }
            let mut names = syntax::text(*n, src).rsplit('.').skip(1);
            let Some(enum_name) = names.next().map(str::to_ascii_lowercase) else {
                return false;
            };
            // `SubscriptionStatus.CANCELED`, or a model's own choices, Django's way:
            // `Subscription.Status.CANCELED`.
            let owner = if matches!(enum_name.as_str(), "status" | "state") {
                names
                    .next()
                    .map(str::to_ascii_lowercase)
                    .unwrap_or_default()
            } else {
                enum_name.clone()
            };
            owner.starts_with(&object)
                && (enum_name.ends_with("status") || enum_name.ends_with("state"))
        })
}

/// Whether the status tested is our own record's, not the provider's answer: `self.status`, or
/// the object the branch then marks paid (`if order.status in ("pending", "paid"):
/// order.mark_paid()`, a webhook moving an order along its own states).
fn own_state(subject: &str, effect: Node<'_>, src: &str) -> bool {
    let object = subject
        .rsplit_once(['.', '['])
        .map_or(subject, |(object, _)| object);
    if object == "self" || object.starts_with("self.") && object.matches('.').count() == 1 {
        return true;
    }
    let marked = match effect.kind() {
        kinds::ASSIGNMENT => effect
            .field("left")
            .and_then(|l| l.field("object").or_else(|| l.field("value"))),
        kinds::CALL => {
            syntax::receiver(effect).or_else(|| syntax::positional_args(effect).first().copied())
        }
        _ => None,
    };
    marked.is_some_and(|m| syntax::text(m, src) == object)
}

/// Whether the money goes out rather than in: a refund's pending state is commonly booked as
/// done (providers rarely fail one), and money owed to the payer is not given away unpaid.
fn about_a_refund(cx: &Ctx<'_>, at: Node<'_>, effect: Node<'_>, src: &str) -> bool {
    let refund = |text: &str| syntax::contains_lowercase(text, "refund");
    refund(syntax::text(effect, src))
        || cx
            .index()
            .and_then(|idx| idx.enclosing(at, kinds::FUNCTION_DEFINITION))
            .is_some_and(|f| refund(syntax::function_name(f, src)))
}
