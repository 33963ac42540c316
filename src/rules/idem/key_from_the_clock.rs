//! IDEM017 key-from-the-clock: the idempotency key a payment's request carries is made, where
//! it is sent, from the clock and the payment's own reference: `f"{order_id}-{int(time.time())}"`,
//! `f"{row.reference}:{ctx.clock():%Y%m%d}"`. The key is then as new as the time of the send:
//! the job's retry a minute later, the nightly replay of what was left unknown, the client's
//! resend after a timeout each carry another key, and the provider takes each for a new payment.
//! A key of one payment must come from the payment alone.
//!
//! Left alone: a key of a period (`f"sweep-{account.id}-{date.today()}"`, a month's renewal
//! keyed by `%Y-%m`), where the time is the identity; a key stored with its record when the
//! record is made (`Payout.objects.create(idempotency_key=...)`), which every later send reads
//! back; and a key IDEM004 tells of already, made by `now()` in a retried body.
use tree_sitter::Node;

use super::key_made_per_attempt::{self as per_attempt, Site};
use crate::python::{Fields, kinds, syntax};
use crate::rules::retry::attempts;
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "IDEM017",
    doc: include_str!("../../../rules/idem/IDEM017.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a key made with a call of the clock, in code, not a test. The key may go
/// under a name that does not say so (`now=` of a function of the change that sends it as its
/// key), so the file's words of idempotency are not asked.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && s.mentions(CLOCK_CALLS)
}

/// The text of a call of the clock, as the gate and the check look for it.
const CLOCK_CALLS: &[&str] = &["now(", "today(", "time(", "time_ns(", "clock("];

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    // The file's retries are found only once a key from the clock is.
    let mut retried: Option<Vec<attempts::Attempt<'_>>> = None;
    let mut reported: Vec<usize> = Vec::new();
    let mut found = Vec::new();
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        let Some(body) = func.field("body") else {
            continue;
        };
        let (first, last) = syntax::lines(func);
        let text = syntax::text(func, src);
        if !cx.touches_added(first, last)
            || !CLOCK_CALLS
                .iter()
                .any(|w| memchr::memmem::find(text.as_bytes(), w.as_bytes()).is_some())
        {
            continue;
        }
        for Site {
            at, name, value, ..
        } in per_attempt::key_sites(idx, body, src, Some((cx.change, cx.side)))
        {
            if idx
                .enclosing(at, kinds::FUNCTION_DEFINITION)
                .is_none_or(|f| f.id() != func.id())
                || stored(at, src)
            {
                continue;
            }
            // What a key sent by name was given before it is sent (`key = f"..."`); a
            // parameter, or a name given nothing here, stays as it is.
            let made = (value.kind() == kinds::IDENTIFIER)
                .then(|| {
                    idx.assigned_before(Some(func), syntax::text(value, src), at.start_byte(), src)
                })
                .flatten()
                .unwrap_or(value);
            let Some(clock) = clock_call(made, src) else {
                continue;
            };
            let (first, last) = syntax::lines(made);
            let (at_first, at_last) = syntax::lines(value);
            if reported.contains(&clock.id())
                || !(cx.touches_added(first, last) || cx.touches_added(at_first, at_last))
            {
                continue;
            }
            // A key of the day and of what the payment is for (`membership.id`), sent with one
            // payment's own record (`amount=payment.amount_pence`): the record is what a second
            // send repeats, and the key does not name it.
            let (record, paid) = match identity(made, clock, src) {
                Some(record) => (record, false),
                None if by_the_day(made, src) => match paid_record(at, made, src) {
                    Some(paid) => (Some(paid), true),
                    None => continue,
                },
                None => continue,
            };
            if of_a_period(made, src) {
                continue;
            }
            // The clock read in a body that is retried: IDEM004 tells of it as a key made per
            // attempt.
            if retried
                .get_or_insert_with(|| attempts::attempts(idx, src))
                .iter()
                .any(|a| syntax::contains(a.body, clock))
            {
                continue;
            }
            reported.push(clock.id());
            found.push((func, value, name, made, clock, record, false, paid));
        }
        // A helper named for the key that returns it made from the clock
        // (`def settlement_key(payment_id, kind): return f"...-{payment_id}-{utcnow():%Y%m%d%H%M}"`),
        // called where the change sends: every call is a new key.
        let helper = syntax::function_name(func, src);
        if !(helper.ends_with("_key") || per_attempt::names_key(helper))
            || cx.change.calls_named(cx.side, helper).next().is_none()
        {
            continue;
        }
        for ret in idx.within(func, kinds::RETURN_STATEMENT) {
            let Some(made) = syntax::return_value(*ret) else {
                continue;
            };
            let (first, last) = syntax::lines(made);
            let Some(clock) = clock_call(made, src) else {
                continue;
            };
            if reported.contains(&clock.id())
                || !cx.touches_added(first, last)
                || idx
                    .enclosing(*ret, kinds::FUNCTION_DEFINITION)
                    .is_none_or(|f| f.id() != func.id())
                || of_a_period(made, src)
            {
                continue;
            }
            let Some(record) = identity(made, clock, src) else {
                continue;
            };
            reported.push(clock.id());
            found.push((
                func,
                made,
                format!("{helper}()"),
                made,
                clock,
                record,
                true,
                false,
            ));
        }
    }
    for (func, value, name, made, clock, record, helper, paid) in found {
        let function = facts::qualname(func, idx, src);
        let shown = syntax::normalized(made, src);
        let daily = by_the_day(made, src);
        let finding = cx
            .report(&RULE, value)
            .arg("key", name)
            .arg("made", shown)
            .arg("clock", syntax::normalized(clock, src))
            .arg("function", function.clone());
        match record {
            Some(record) if paid => {
                finding.arg("record", record).note("paid");
            }
            Some(record) => {
                finding.arg("record", record).note("record");
            }
            None => {
                finding.note("alone");
            }
        }
        if daily {
            finding.note("daily");
        }
        if helper {
            finding.note("helper");
        }
        finding.function = function;
    }
}

/// A key written into a record as it is made or saved (`Payout.objects.create(key=...)`,
/// `Charge(idempotency_key=...)`, `payout.idempotency_key = ...`): every later send reads the
/// stored key back, as it would a random one.
fn stored(at: Node<'_>, src: &str) -> bool {
    match at.kind() {
        kinds::CALL => {
            let name = syntax::callee_name(at, src);
            name.starts_with(|c: char| c.is_ascii_uppercase())
                || matches!(
                    name,
                    "create"
                        | "get_or_create"
                        | "update_or_create"
                        | "update"
                        | "insert"
                        | "values"
                        | "save"
                        | "add"
                        | "filter"
                        | "bulk_create"
                        | "execute"
                )
        }
        // `self.idempotency_key = ...`, `payout.idempotency_key = ...`: kept on the object.
        kinds::ASSIGNMENT => at
            .field("left")
            .is_some_and(|l| l.kind() == kinds::ATTRIBUTE),
        _ => false,
    }
}

/// A call in the key that reads the time of day: `time.time()`, `datetime.now(tz)`,
/// `date.today()`, `timezone.now()`, `ctx.clock()`, `self._utc_now()`.
fn clock_call<'t>(made: Node<'t>, src: &str) -> Option<Node<'t>> {
    let mut calls = syntax::descendants(made, &[kinds::CALL]);
    if made.kind() == kinds::CALL {
        calls.insert(0, made);
    }
    calls.into_iter().find(|c| {
        let name = syntax::callee_name(*c, src).trim_start_matches('_');
        let receiver = syntax::receiver(*c).map(|r| syntax::text(r, src));
        match name {
            "now" | "utcnow" | "today" | "clock" | "time_ns" | "utc_now" | "now_utc" => true,
            // `time.time()`, `loop.time()`, or `time()` imported bare; not `schedule.time(...)`.
            "time" => receiver.is_none_or(|r| r == "time" || r.ends_with("loop")),
            _ => name.ends_with("_now") || name.ends_with("_clock"),
        }
    })
}

/// What else the key is made of: `Some(Some(reference))` when it names one payment's own
/// record (`row.reference`, `order_id`, `payout.id`), `Some(None)` when it is the clock alone
/// (`str(int(time.time() * 1000))`), `None` when it names something else (an account, a
/// merchant, a batch), which may well be a key of a period.
fn identity(made: Node<'_>, clock: Node<'_>, src: &str) -> Option<Option<String>> {
    let mut names: Vec<Node<'_>> =
        syntax::descendants(made, &[kinds::IDENTIFIER, kinds::ATTRIBUTE])
            .into_iter()
            .filter(|n| !syntax::contains(clock, *n))
            .filter(|n| {
                n.kind() == kinds::ATTRIBUTE
                    || n.parent().is_none_or(|p| p.kind() != kinds::ATTRIBUTE)
            })
            .filter(|n| {
                // Not the function called (`str`, `int`, `format`), nor a keyword's name.
                n.parent().is_none_or(|p| {
                    !(p.kind() == kinds::CALL
                        && p.field("function").is_some_and(|f| f.id() == n.id())
                        || p.kind() == kinds::KEYWORD_ARGUMENT
                            && p.field("name").is_some_and(|f| f.id() == n.id()))
                })
            })
            .collect();
    if made.kind() == kinds::IDENTIFIER {
        names.push(made);
    }
    if names.is_empty() {
        return Some(None);
    }
    names
        .into_iter()
        .find(|n| names_one_payment(syntax::text(*n, src)))
        .map(|n| Some(syntax::normalized(n, src)))
}

/// Whether a name is the reference of one payment: `row.reference`, `order_id`, `payout.id`,
/// `txn_ref`; not an account, a merchant or a batch, whose keys may be of a period.
fn names_one_payment(name: &str) -> bool {
    let words = syntax::name_words(name);
    if words.iter().any(|w| {
        matches!(
            w.as_str(),
            "account" | "merchant" | "customer" | "subscription" | "batch" | "period" | "cycle"
        )
    }) {
        return false;
    }
    words.iter().any(|w| {
        matches!(
            w.as_str(),
            "payout"
                | "transfer"
                | "refund"
                | "charge"
                | "payment"
                | "order"
                | "invoice"
                | "capture"
                | "reference"
                | "ref"
                | "txn"
                | "transaction"
                | "withdrawal"
                | "disbursement"
                | "booking"
                | "installment"
                | "instalment"
                | "intent"
                | "remittance"
        )
    })
}

/// The record of one payment whose fields the request sends (`amount=payment.amount_pence`,
/// `{"payment_id": str(payment.id)}`), where the key does not name it: `payment`.
fn paid_record(at: Node<'_>, made: Node<'_>, src: &str) -> Option<String> {
    let key = syntax::text(made, src);
    // A key in a `headers={...}` dict: the request's other arguments are the call's
    // (`json={"amount": charge.amount_cents}`).
    let sent = match at.kind() {
        kinds::PAIR => std::iter::successors(at.parent(), |n| n.parent())
            .take(4)
            .find(|n| n.kind() == kinds::CALL)
            .unwrap_or(at),
        _ => at,
    };
    syntax::descendants(sent, &[kinds::ATTRIBUTE])
        .into_iter()
        .filter_map(|a| a.field("object"))
        .filter(|o| o.kind() == kinds::IDENTIFIER)
        .map(|o| syntax::text(o, src))
        .find(|o| names_one_payment(o) && !syntax::has_word(key, o))
        .map(str::to_string)
}

/// A key of a month or a year (`%Y-%m`, `today.month`): one payment per period, which is
/// what a renewal or a statement means to key.
fn of_a_period(made: Node<'_>, src: &str) -> bool {
    let text = syntax::text(made, src);
    let month = [
        "%Y%m",
        "%Y-%m",
        "%m%Y",
        ".month",
        ".year",
        "%Y}",
        "%Y\"",
        "isocalendar",
    ]
    .iter()
    .any(|w| text.contains(w));
    month && !(text.contains("%d") || text.contains(".day") || text.contains("%H"))
}

/// A key that holds the date only (`%Y%m%d`, `date.today()`): the same day's sends share it.
fn by_the_day(made: Node<'_>, src: &str) -> bool {
    let text = syntax::text(made, src);
    (text.contains("%d") && !text.contains("%H"))
        || text.contains("today()") && !text.contains("time")
}
