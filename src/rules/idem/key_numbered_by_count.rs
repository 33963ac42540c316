//! IDEM011 key-numbered-by-count: the idempotency key a payment carries is numbered by a count
//! of the records that payment adds to (`f"refund:{order.id}:{len(refunds) + 1}"`,
//! `Payout.objects.filter(...).count()`). The count moves as soon as the first payment is
//! recorded, so a redelivered event, a rerun job or a retried request counts one more and sends
//! a key the provider has never seen: a second refund, a second payout.
//!
//! Left alone: a count of anything that is not money moved (lines, items, attempts of a retry
//! loop: IDEM004's), a key taken from an event's or a record's own id, and a count kept on a
//! record (`refund.sequence`) rather than worked out at the call.
use tree_sitter::Node;

use crate::python::{NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

use super::key_made_per_attempt::key_sites;

pub(crate) static RULE: Rule = Rule {
    id: "IDEM011",
    doc: include_str!("../../../rules/idem/IDEM011.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// How many assignments back a key is followed to its count (`key = f"...{n}"`, `n =
/// len(done) + 1`).
const DEPTH: usize = 2;

/// Every finding is a count (`len(`, `.count(`, `count_documents`) in the key of a payment, in
/// code that names an idempotency key or pays.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(&["len(", "count"])
        && (s.facts.payment_module
            || s.facts
                .functions
                .iter()
                .any(|f| f.mentions_idempotency || f.payment))
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let mut reported: Vec<usize> = Vec::new();
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        for site in key_sites(idx, func, src, Some((cx.change, cx.side))) {
            // A nested function's sites are its own.
            if idx
                .enclosing(site.at, kinds::FUNCTION_DEFINITION)
                .is_none_or(|f| f.id() != func.id())
            {
                continue;
            }
            let Some((count, counted)) = counted_in(idx, func, site.value, src, DEPTH) else {
                continue;
            };
            if reported.contains(&count.id()) {
                continue;
            }
            reported.push(count.id());
            let function = facts::qualname(func, idx, src);
            let finding = cx
                .report(&RULE, site.value)
                .arg("key", site.name.clone())
                .arg("count", crate::rules::pay::first_line(count, src))
                .arg("counted", counted);
            finding.function = function;
        }
    }
}

/// The count that numbers `value`: a `len(...)` or `.count()` of records of money moved, in
/// `value` or in what a name it reads was last set to (up to `depth` assignments back); with
/// the word that says what is counted.
fn counted_in<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    value: Node<'t>,
    src: &str,
    depth: usize,
) -> Option<(Node<'t>, &'static str)> {
    let calls = std::iter::once(value)
        .filter(|n| n.kind() == kinds::CALL)
        .chain(idx.within(value, kinds::CALL).iter().copied());
    for call in calls {
        if let Some(counted) = count_of_money(idx, func, call, value, src) {
            return Some((call, counted));
        }
    }
    if depth == 0 {
        return None;
    }
    let mut seen: Vec<&str> = Vec::new();
    for name in names_read(syntax::text(value, src)) {
        if seen.contains(&name) {
            continue;
        }
        seen.push(name);
        let Some(set) = idx.assigned_before(Some(func), name, value.start_byte(), src) else {
            continue;
        };
        if let Some(found) = counted_in(idx, func, set, src, depth - 1) {
            return Some(found);
        }
    }
    None
}

/// What `call` counts when it counts records of money moved: `len(refunds)` (or `len(x)` of a
/// name last set from something that says so), `Refund.objects.filter(...).count()`,
/// `db.payouts.count_documents(...)`, `select(func.count()).select_from(Refund)` in `whole`.
fn count_of_money(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    call: Node<'_>,
    whole: Node<'_>,
    src: &str,
) -> Option<&'static str> {
    let name = idx.callee_name(call, src);
    if name == "len" {
        let arg = *syntax::positional_args(call).first()?;
        if let Some(counted) = money_records(syntax::text(arg, src)) {
            return Some(counted);
        }
        if arg.kind() != kinds::IDENTIFIER {
            return None;
        }
        let set =
            idx.assigned_before(Some(func), syntax::text(arg, src), call.start_byte(), src)?;
        return money_records(syntax::text(set, src));
    }
    if matches!(
        name,
        "count" | "count_documents" | "estimated_document_count"
    ) {
        // The query the count ends: from the outermost expression around it in the key.
        return money_records(syntax::text(whole, src));
    }
    None
}

/// The records of money moved a text names (`previous_refunds`, `Payout.objects`,
/// `db.transfers`, `_refunds_for(...)`): moves that are made again and again for one parent
/// (refunds and payouts of an order, captures of a hold), where a count looks like a sequence
/// number.
fn money_records(text: &str) -> Option<&'static str> {
    syntax::name_words(text)
        .iter()
        .find_map(|w| match w.trim_end_matches('s') {
            "refund" => Some("refunds"),
            "payout" => Some("payouts"),
            "transfer" => Some("transfers"),
            "capture" => Some("captures"),
            "disbursement" => Some("disbursements"),
            "withdrawal" => Some("withdrawals"),
            "reversal" => Some("reversals"),
            _ => None,
        })
}

/// The plain names a text reads, each by its first part (`appointment` of `appointment.id`).
fn names_read(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .filter_map(|w| w.split('.').next())
        .filter(|w| {
            w.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        })
}
