//! PAY009 item-refund-takes-the-order: a function that refunds one item of an order (a ticket, a
//! line, a seat, as its parameters say) builds the refund from the whole order: its amount is
//! what is left of the order (`order.total_cents - order.refunded_cents`), or its idempotency key
//! names only the order (`f"refund-{order.id}"`). The first pays back every item while the others
//! stay valid; the second makes the order's second item refund a replay of its first (or a
//! request the provider refuses as a reused key), and that money never goes back.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::review::Severity;
use crate::rules::testing::has_word as has_word_of;
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY009",
    doc: include_str!("../../../rules/pay/PAY009.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && s.mentions(&["refund", "Refund"])
}

/// Words of one part of an order.
const ITEM: &[&str] = &[
    "ticket",
    "item",
    "line",
    "seat",
    "position",
    "attendee",
    "passenger",
    "parcel",
    "shipment",
    "sku",
];

/// Words of the whole that is paid at once.
const WHOLE: &[&str] = &[
    "order",
    "cart",
    "basket",
    "invoice",
    "payment",
    "charge",
    "purchase",
    "transaction",
];

fn has_word(name: &str, words: &[&str]) -> bool {
    syntax::name_words(name)
        .iter()
        .any(|w| words.contains(&w.as_str()))
}

/// The root name of an expression: `order` of `order.id.hex`, of `self.order.total`.
fn root(text: &str) -> &str {
    let text = text.trim().strip_prefix("self.").unwrap_or(text.trim());
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        let params = crate::rules::pay::parameters(func, src);
        let Some(item) = params
            .iter()
            .find(|p| has_word(p, ITEM) && !has_word(p, WHOLE))
            .cloned()
        else {
            continue;
        };
        let refunds: Vec<Node<'_>> = idx
            .within(func, kinds::CALL)
            .iter()
            .copied()
            .filter(|c| has_word(syntax::callee(*c, src), &["refund"]))
            // `raise RefundNotAllowed(f"order {order_id} has nothing to refund")` says why
            // there is no refund.
            .filter(|c| {
                c.parent()
                    .is_none_or(|p| p.kind() != kinds::RAISE_STATEMENT)
                    && !syntax::callee_name(*c, src).ends_with("Error")
                    && !syntax::callee_name(*c, src).ends_with("Exception")
            })
            .filter(|c| {
                idx.enclosing(*c, kinds::FUNCTION_DEFINITION)
                    .map(|f| f.id())
                    == Some(func.id())
            })
            .collect();
        if refunds.is_empty() {
            continue;
        }
        let items = item_names(idx, func, &item, src);
        for call in refunds {
            if let Some(key) = order_key(idx, func, call, &items, src) {
                report(cx, idx, func, &item, key, "key");
            }
            if let Some(amount) = order_amount(idx, func, call, &items, src) {
                report(cx, idx, func, &item, amount, "amount");
            }
        }
    }
}

/// The item parameter and the names bound from it (`ticket = await store.claim(order.id,
/// ticket_id)`), in the function's order.
fn item_names(idx: &NodeIndex<'_>, func: Node<'_>, item: &str, src: &str) -> Vec<String> {
    let mut names = vec![item.to_string()];
    for assign in idx.within(func, kinds::ASSIGNMENT) {
        let (Some(left), Some(right)) = (assign.field("left"), assign.field("right")) else {
            continue;
        };
        if left.kind() != kinds::IDENTIFIER {
            continue;
        }
        let text = syntax::text(right, src);
        if names.iter().any(|n| has_word_of(text, n)) {
            names.push(syntax::text(left, src).to_string());
        }
    }
    names
}

/// A call's keyword arguments whose name `named` accepts, then its positional ones.
fn arguments<'t>(call: Node<'t>, src: &str, named: impl Fn(&str) -> bool) -> Vec<Node<'t>> {
    let mut out: Vec<Node<'t>> = syntax::keyword_args(call, src)
        .into_iter()
        .filter(|(k, _)| named(k))
        .map(|(_, v)| v)
        .collect();
    out.extend(syntax::positional_args(call));
    out
}

/// What an argument is: itself, or the value a name was bound to before the call.
fn resolved<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'_>,
    arg: Node<'t>,
    at: usize,
    src: &str,
) -> Node<'t> {
    if arg.kind() == kinds::IDENTIFIER {
        idx.assigned_before(Some(func), syntax::text(arg, src), at, src)
            .unwrap_or(arg)
    } else {
        arg
    }
}

/// A key argument of the refund that names the order only: an f-string whose every
/// interpolation starts from the order (or its payment), none from the item.
fn order_key<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'_>,
    call: Node<'t>,
    items: &[String],
    src: &str,
) -> Option<Node<'t>> {
    let keyish = |k: &str| {
        let lower = k.to_ascii_lowercase();
        lower.contains("key") || lower.contains("idempot") || lower.contains("request_id")
    };
    let candidates: Vec<Node<'t>> = arguments(call, src, keyish)
        .into_iter()
        .map(|a| resolved(idx, func, a, call.start_byte(), src))
        .filter(|a| a.kind() == kinds::STRING)
        .collect();
    candidates.into_iter().find(|s| {
        let text = syntax::text(*s, src);
        if !text.starts_with(['f', 'F']) || !text.to_ascii_lowercase().contains("refund") {
            return false;
        }
        let parts: Vec<&str> = crate::python::named_children(*s)
            .into_iter()
            .filter(|c| c.kind() == "interpolation")
            .map(|c| syntax::text(c, src).trim_matches(|c| c == '{' || c == '}'))
            .collect();
        !parts.is_empty()
            && parts.iter().all(|p| has_word(root(p), WHOLE))
            && !parts
                .iter()
                .any(|p| items.iter().any(|i| has_word_of(p, i)))
    })
}

/// An amount argument of the refund that is the order's: `order.total_cents`, or what is left
/// of it (`order.total_cents - order.refunded_cents`), with nothing of the item.
fn order_amount<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'_>,
    call: Node<'t>,
    items: &[String],
    src: &str,
) -> Option<Node<'t>> {
    let money = |name: &str| {
        syntax::name_words(name).iter().any(|w| {
            matches!(
                w.as_str(),
                "amount" | "total" | "cents" | "minor" | "remaining"
            )
        })
    };
    arguments(call, src, money).into_iter().find_map(|arg| {
        let value = resolved(idx, func, arg, call.start_byte(), src);
        let text = syntax::text(value, src);
        if items.iter().any(|i| has_word_of(text, i)) {
            return None;
        }
        let whole = |n: Node<'_>| {
            n.kind() == kinds::ATTRIBUTE
                && has_word(root(syntax::text(n, src)), WHOLE)
                && n.field("attribute").is_some_and(|a| {
                    let words = syntax::name_words(syntax::text(a, src));
                    words.iter().any(|w| {
                        matches!(w.as_str(), "total" | "remaining" | "balance" | "captured")
                    })
                })
        };
        let of_order = whole(value)
            || value.kind() == kinds::BINARY_OPERATOR
                && value.field("operator").map(|o| o.kind()) == Some("-")
                && value.field("left").is_some_and(whole);
        of_order.then(|| {
            // Reported where the amount is worked out: the binding, when there is one.
            if value.id() == arg.id() {
                arg
            } else {
                value
                    .parent()
                    .filter(|p| p.kind() == kinds::ASSIGNMENT)
                    .unwrap_or(value)
            }
        })
    })
}

fn report(
    cx: &mut Ctx<'_>,
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    item: &str,
    at: Node<'_>,
    note: &'static str,
) {
    let src = cx.src();
    let finding = cx
        .report(&RULE, at)
        .arg("function", facts::qualname(func, idx, src))
        .arg("item", item.to_string())
        .arg("taken", crate::rules::pay::first_line(at, src))
        .note(note);
    if note == "key" {
        finding.severity(Severity::Important);
    }
}
