//! PAY020 refund-from-list-price: a pro-rata refund worked out from what the plan costs now
//! (`member.monthly_fee_pence * unused_days // month_days`, `policy.monthly_premium_cents * ...`)
//! rather than from what the customer paid for the period. A discount, a first-month proration,
//! a price changed since the period was billed: the refund gives back more (or less) than was
//! paid for the days left.
//!
//! Read: the amount a refund record or a refund call is handed, a few assignments back and
//! through a helper of the file that returns it, when it multiplies and divides (a share of a
//! period) an attribute named for a price (`price`, `fee`, `premium`, `rate`) of something that
//! is not a payment record. Left alone: a share of an invoice's, a payment's or a line's amount.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY020",
    doc: include_str!("../../../rules/pay/PAY020.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// How many assignments back an amount is followed.
const DEPTH: usize = 3;

/// Every finding is an amount handed to a refund, in code that prorates.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(&["refund", "Refund"])
        && s.mentions(&[
            "//", " / ", "paid_", "_paid", "face_", "list_", "msrp", "catalog",
        ])
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    summed_from_list_prices(cx, idx, src);
    let mut reported: Vec<usize> = Vec::new();
    for &call in idx.all(kinds::CALL) {
        // The indexed call text first: most calls name no refund, and are passed over without
        // splitting words.
        if !syntax::contains_lowercase(idx.call_text(call, src).callee, "refund") {
            continue;
        }
        let callee = syntax::callee(call, src);
        if !syntax::name_words(callee)
            .iter()
            .any(|w| w == "refund" || w == "refunds")
        {
            continue;
        }
        let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        for (name, value) in syntax::keyword_args(call, src) {
            // `quote_refund(paid_paise=booking.price_paise, ...)`: a price handed in as what
            // was paid.
            if says_paid(name)
                && let Some(price) = price_of_unpaid(value, src)
                && !reported.contains(&value.id())
            {
                reported.push(value.id());
                let function = facts::qualname(func, idx, src);
                let finding = cx
                    .report(&RULE, value)
                    .arg("price", syntax::text(price, src).to_string())
                    .arg("param", name.to_string())
                    .arg("refund", callee.to_string())
                    .arg("function", function.clone())
                    .note("paid");
                finding.function = function;
                continue;
            }
            if !cx.vocab.is_money_argument(name) {
                continue;
            }
            let Some((price, share)) = list_price_share(idx, func, value, DEPTH, src) else {
                continue;
            };
            if reported.contains(&share.id()) {
                continue;
            }
            reported.push(share.id());
            let function = facts::qualname(func, idx, src);
            // Where the share is taken, perhaps in a helper: where the fix goes.
            let finding = cx
                .report(&RULE, share)
                .arg("price", syntax::text(price, src).to_string())
                .arg("share", crate::rules::pay::first_line(share, src))
                .arg("refund", callee.to_string())
                .arg("function", function.clone());
            finding.function = function;
        }
    }
}

/// Words of a field that holds what an item is listed at, not what was paid for it.
const LISTED: &[&str] = &[
    "face",
    "list",
    "listed",
    "msrp",
    "catalog",
    "catalogue",
    "sticker",
    "original",
];

/// A refund's amount added up from what its items are listed at (`refund.amount_cents =
/// sum(row.face_value_cents for row in claimed)`) while their class keeps what was paid for
/// each (`Ticket.paid_cents`): a discount or a promotion on the order, and the refund gives back
/// more than was paid.
fn summed_from_list_prices(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    for &assignment in idx.all(kinds::ASSIGNMENT) {
        let (Some(left), Some(right)) = (assignment.field("left"), assignment.field("right"))
        else {
            continue;
        };
        let Some((object, field)) = (left.kind() == kinds::ATTRIBUTE)
            .then(|| left.field("object").zip(left.field("attribute")))
            .flatten()
        else {
            continue;
        };
        if !syntax::contains_lowercase(syntax::text(object, src), "refund")
            || !syntax::name_words(syntax::text(field, src))
                .iter()
                .any(|w| matches!(w.as_str(), "amount" | "total" | "cents" | "minor" | "pence"))
        {
            continue;
        }
        // The index leaves out what a generator reads: its nodes are walked here.
        let mut stack = vec![right];
        let mut listed = None;
        while let Some(n) = stack.pop() {
            if n.kind() == kinds::ATTRIBUTE
                && let Some(attr) = n.field("attribute")
            {
                let words = syntax::name_words(syntax::text(attr, src));
                if words.iter().any(|w| LISTED.contains(&w.as_str()))
                    && !words
                        .iter()
                        .any(|w| matches!(w.as_str(), "paid" | "charged" | "net"))
                {
                    listed = Some(syntax::text(attr, src));
                    break;
                }
            }
            stack.extend(crate::python::named_children(n));
        }
        let Some(listed) = listed else {
            continue;
        };
        let Some((class, paid)) = paid_beside(cx, idx, listed, src) else {
            continue;
        };
        let function = facts::enclosing_qualname(idx, assignment, src);
        let finding = cx
            .report(&RULE, right)
            .arg("refund", syntax::text(left, src).to_string())
            .arg("price", listed.to_string())
            .arg("paid", format!("{class}.{paid}"))
            .arg("function", function.clone())
            .note("listed");
        finding.function = function;
    }
}

/// The class the file reads `field` of (`Ticket.face_value_cents`), and the field of it that
/// keeps what was paid (`paid_cents`), from its definition in the file or the repository.
fn paid_beside(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    field: &str,
    src: &str,
) -> Option<(String, String)> {
    let suffix = format!(".{field}");
    // `Ticket.face_value_cents` read in the file, a class of the file that defines the field,
    // or one of the repository's.
    let named = src.match_indices(&suffix).find_map(|(at, _)| {
        let class = src[..at]
            .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
            .next()?;
        class
            .starts_with(|c: char| c.is_ascii_uppercase())
            .then(|| class.to_string())
    });
    let defined_here = || {
        idx.all(kinds::CLASS_DEFINITION).iter().find_map(|c| {
            let body = c.field("body")?;
            let defines = crate::python::named_children(body).into_iter().any(|stmt| {
                stmt.named_child(0)
                    .filter(|a| a.kind() == kinds::ASSIGNMENT)
                    .and_then(|a| a.field("left"))
                    .is_some_and(|l| syntax::text(l, src) == field)
            });
            c.field("name")
                .filter(|_| defines)
                .map(|n| syntax::text(n, src).to_string())
        })
    };
    let in_the_repository = || {
        cx.project()?.modules().iter().find_map(|m| {
            m.assignments
                .iter()
                .find_map(|a| a.name.strip_suffix(&suffix).map(str::to_string))
        })
    };
    let class = named.or_else(defined_here).or_else(in_the_repository)?;
    let members = super::members_of(cx, idx, &class, &[], None, src);
    let paid = members.into_iter().find(|m| {
        let words = syntax::name_words(m);
        words.iter().any(|w| w == "paid" || w == "charged")
            && words.iter().any(|w| {
                matches!(
                    w.as_str(),
                    "cents" | "amount" | "minor" | "pence" | "price" | "total" | "paise"
                )
            })
    })?;
    Some((class, paid))
}

/// The price attribute and the expression that takes a share of it, in `value` or in what the
/// names it reads were last set to (up to `depth` assignments back), or in what a function of
/// the file it calls returns.
fn list_price_share<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    value: Node<'t>,
    depth: usize,
    src: &str,
) -> Option<(Node<'t>, Node<'t>)> {
    if let Some(found) = share_of_price(idx, value, src) {
        return Some(found);
    }
    if depth == 0 {
        return None;
    }
    // `refund_due(member, cancelled_on)`: what the helper returns.
    let inner = crate::rules::idem::strip_await(value);
    if inner.kind() == kinds::CALL {
        let name = idx.callee_name(inner, src);
        for returned in idx.returned_by(name, src) {
            if let Some(found) = share_of_price(idx, returned, src) {
                return Some(found);
            }
        }
    }
    // `amount_cents=round(amount)`: the names the value reads, as they were last set.
    for name in crate::rules::idem::key_numbered_by_count::names_read(syntax::text(value, src)) {
        if let Some(set) = idx.assigned_before(Some(func), name, value.start_byte(), src)
            && let Some(found) = list_price_share(idx, func, set, depth - 1, src)
        {
            return Some(found);
        }
    }
    None
}

/// `member.monthly_fee_pence * unused_days // month_days` in `expr`: a product with a price
/// attribute, divided.
fn share_of_price<'t>(
    idx: &NodeIndex<'t>,
    expr: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, Node<'t>)> {
    let text = syntax::text(expr, src);
    if !(text.contains('*') && text.contains('/')) {
        return None;
    }
    let attributes: Vec<Node<'t>> = std::iter::once(expr)
        .filter(|n| n.kind() == kinds::ATTRIBUTE)
        .chain(idx.within(expr, kinds::ATTRIBUTE).iter().copied())
        .collect();
    // `payment.amount_cents * policy.refund_rate / 100`: a share of what was paid.
    let of_paid = attributes.iter().any(|a| {
        a.field("object")
            .is_some_and(|o| paid_record(syntax::text(o, src)))
    });
    if of_paid {
        return None;
    }
    for attribute in attributes {
        let (Some(object), Some(field)) = (attribute.field("object"), attribute.field("attribute"))
        else {
            continue;
        };
        if names_a_price(syntax::text(field, src)) && !paid_record(syntax::text(object, src)) {
            return Some((attribute, expr));
        }
    }
    None
}

/// A parameter named for what was paid: `paid_paise`, `amount_paid`, `captured_cents`.
fn says_paid(name: &str) -> bool {
    syntax::name_words(name)
        .iter()
        .any(|w| matches!(w.as_str(), "paid" | "charged" | "captured" | "collected"))
}

/// `booking.price_paise`: a price attribute of something that is not a record of a payment.
fn price_of_unpaid<'t>(value: Node<'t>, src: &str) -> Option<Node<'t>> {
    let (object, field) = (value.field("object")?, value.field("attribute")?);
    (value.kind() == kinds::ATTRIBUTE
        && names_a_price(syntax::text(field, src))
        && !paid_record(syntax::text(object, src)))
    .then_some(value)
}

/// A field that holds what something costs: `monthly_fee_pence`, `price_cents`, `premium`.
fn names_a_price(field: &str) -> bool {
    let words = syntax::name_words(field);
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    has(&["price", "fee", "premium", "rate", "tariff", "cost"])
        // `refund_rate`, `tax_rate`, `fee_percent`: a fraction, not a price.
        && !has(&["percent", "pct", "ratio", "share", "refund", "discount", "tax", "vat"])
}

/// An object that records a payment (`invoice`, `collection`, `charge`, `line`): a share of
/// its amount is a share of what was paid.
fn paid_record(object: &str) -> bool {
    syntax::name_words(object).iter().any(|w| {
        matches!(
            w.as_str(),
            "invoice"
                | "payment"
                | "charge"
                | "collection"
                | "transaction"
                | "txn"
                | "order"
                | "line"
                | "item"
                | "capture"
                | "receipt"
                | "paid"
                | "instalment"
                | "installment"
                | "bill"
                | "period"
        )
    })
}
