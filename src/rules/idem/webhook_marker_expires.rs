//! IDEM008 webhook-marker-expires-before-redelivery: a webhook view that stops a second
//! delivery of an event with a marker in the cache (`set(f"event:{id}", 1, nx=True, ex=600)`)
//! lets the marker expire within the day. Providers deliver an event again for days when an
//! answer is slow or lost (Stripe for three days, Adyen, PayPal and Razorpay for a day or more,
//! with growing pauses), and a delivery after the marker is gone is applied again: a payout
//! reversed twice, a balance credited twice.
//!
//! Left alone: a marker of a day or more, one the view deletes again (a lock for one run), a
//! view that also records the event durably (`get_or_create(event_id=...)`, a unique row), and
//! one that applies it only on a state transition one writer wins (`if await
//! Collection.filter(id=..., status=SUBMITTED).update(...)`), which a late redelivery finds done.
use crate::python::{NodeIndex, kinds, syntax};
use crate::rules::err::failure_swallowed::{Inbound, inbound};
use crate::rules::{Check, Ctx, Gate, Local, Rule, Scan};

use super::key_outlived_by_retries::{lifetime_arg, lifetime_seconds, released, span};

pub(crate) static RULE: Rule = Rule {
    id: "IDEM008",
    doc: include_str!("../../../rules/idem/IDEM008.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// The shortest redelivery window of the providers we know of: a marker that outlives it
/// covers every retried delivery of most of them.
const REDELIVERY_SECONDS: f64 = 24.0 * 60.0 * 60.0;

/// Every finding is a cache write that spells a lifetime, in a file of code that names events.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && (super::has_cache_call(s) || s.mentions(&["nx=True"]))
        && s.mentions(&["ex=", "px=", "timeout", "expire", "setex"])
        && s.mentions(&["event", "notification", "delivery", "webhook"])
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    for &call in idx.all(kinds::CALL) {
        let method = cx.callee_name(call);
        let Some((lifetime, scale)) = lifetime_arg(call, method, src) else {
            continue;
        };
        let Some(key) = delivery_key(cx, call, method) else {
            continue;
        };
        if super::cache_receiver(call, cx).is_none() && !redis_claim(call, method, src) {
            continue;
        }
        let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let Some(ttl) = lifetime_seconds(cx, idx, func, lifetime).map(|v| v * scale) else {
            continue;
        };
        if ttl >= REDELIVERY_SECONDS
            || written_again_with_a_lifetime(cx, idx, func, call, &key)
            || !marks_once(cx, idx, call, func)
            || released(cx, idx, call, &key, false)
            || recorded_durably(syntax::text(func, src))
            || super::applies_by_state(idx, func, src)
        {
            continue;
        }
        if inbound(cx, idx, func) != Some(Inbound::Provider) {
            continue;
        }
        let view = crate::rules::facts::qualname(func, idx, src);
        cx.report(&RULE, call)
            .arg("key", key)
            .arg("ttl", span(ttl))
            .arg("view", view);
    }
}

/// Whether the view writes the same key again after the claim, with a lifetime of its own
/// (`cache.add(key, IN_FLIGHT, timeout=300)` while the event is applied, then `cache.set(key,
/// DONE, timeout=WEBHOOK_SEEN_TTL)`): the first lifetime is the claim's while in flight, and the
/// marker's is the later write's, read on its own.
fn written_again_with_a_lifetime(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    func: tree_sitter::Node<'_>,
    claim: tree_sitter::Node<'_>,
    key: &str,
) -> bool {
    idx.within(func, kinds::CALL).iter().any(|&c| {
        let method = cx.callee_name(c);
        c.start_byte() > claim.end_byte()
            && lifetime_arg(c, method, cx.src()).is_some()
            && delivery_key(cx, c, method).is_some_and(|k| k == key)
    })
}

/// The key a cache write's `method` call writes, when it names a delivered event: resolved
/// through the name it is held in (`marker` says less than what it holds:
/// `f"adyen:notification:{psp_reference}"`).
pub(super) fn delivery_key(
    cx: &Ctx<'_>,
    call: tree_sitter::Node<'_>,
    method: &str,
) -> Option<String> {
    let key = super::key_of(call, method, cx.src())?;
    let key = super::resolve(cx, call, &key);
    names_a_delivery(&key).then_some(key)
}

/// A key that names a delivered event: `f"stripe:event:{event.id}"`, `notification_id`.
pub(super) fn names_a_delivery(key: &str) -> bool {
    syntax::name_words(key).iter().any(|w| {
        matches!(
            w.as_str(),
            "event" | "events" | "evt" | "notification" | "notifications" | "delivery" | "webhook"
        )
    })
}

/// Whether the write marks the event as seen, to be asked before it is applied: a claim
/// (`nx=True`, `add`, `setnx`) or a write the view reads again first (`if cache.get(key)`).
fn marks_once(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    call: tree_sitter::Node<'_>,
    func: tree_sitter::Node<'_>,
) -> bool {
    use super::Op;
    if super::cache_call(call, cx).is_some_and(|c| matches!(c.op, Op::AtomicWrite))
        || redis_claim(call, cx.callee_name(call), cx.src())
    {
        return true;
    }
    idx.within(func, kinds::CALL).iter().any(|&c| {
        c.start_byte() < call.start_byte()
            && super::cache_call(c, cx).is_some_and(|c| matches!(c.op, Op::Read))
    })
}

/// Whether the view also keeps the event where it does not expire: a unique row, an
/// upsert, a conflict it catches.
pub(super) fn recorded_durably(text: &str) -> bool {
    [
        "get_or_create",
        "IntegrityError",
        "UniqueViolation",
        "on_conflict",
        "ON CONFLICT",
        "unique",
    ]
    .iter()
    .any(|w| text.contains(w))
}

/// `set(key, value, nx=True, ex=...)`: redis-py's claim, whatever the client is called
/// (`ctx.locks`, `app.kv_store`).
pub(super) fn redis_claim(call: tree_sitter::Node<'_>, method: &str, src: &str) -> bool {
    method == "set"
        && syntax::keyword_arg(call, "nx", src).is_some_and(|v| syntax::text(v, src) == "True")
}
