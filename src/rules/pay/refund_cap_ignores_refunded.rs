//! PAY015 refund-cap-ignores-refunded: a refund is capped at what was ordered or paid
//! (`if body.quantity > item.quantity: raise Conflict(...)`), while the same function counts
//! what was refunded before on the same record (`item.refunded_quantity += body.quantity`) and
//! leaves it out of the cap. Each refund passes the check alone: the same line is refunded again
//! and again.
use tree_sitter::Node;

use crate::python::{Fields, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY015",
    doc: include_str!("../../../rules/pay/PAY015.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding counts a refunded total up on a record.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && s.mentions(&["refunded"])
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    for &update in idx.all(kinds::AUGMENTED_ASSIGNMENT) {
        // `item.refunded_quantity += body.quantity`: the record and what it counts.
        let Some(left) = update
            .field("left")
            .filter(|l| l.kind() == kinds::ATTRIBUTE)
        else {
            continue;
        };
        if update.field("operator").map(|o| o.kind()) != Some("+=") {
            continue;
        }
        let (Some(object), Some(attribute)) = (left.field("object"), left.field("attribute"))
        else {
            continue;
        };
        let counted = syntax::text(attribute, src);
        if !syntax::name_words(counted).iter().any(|w| w == "refunded") {
            continue;
        }
        let record = syntax::text(object, src);
        let Some(func) = idx.enclosing(update, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let Some(cap) = cap_without_refunded(idx, func, update, record, src) else {
            continue;
        };
        cx.report(&RULE, cap)
            .arg("function", facts::qualname(func, idx, src))
            .arg("cap", syntax::normalized(cap, src))
            .arg("counted", format!("{record}.{counted}"))
            .arg("counted_line", syntax::lines(update).0.to_string());
    }
}

/// The first guard before `update` that weighs a request against the record's own total
/// (`body.quantity > item.quantity`, `amount > payment.amount_cents`) and stops (raises or
/// returns), without a word of what was refunded already.
fn cap_without_refunded<'t>(
    idx: &crate::python::NodeIndex<'t>,
    func: Node<'t>,
    update: Node<'_>,
    record: &str,
    src: &str,
) -> Option<Node<'t>> {
    idx.within(func, kinds::IF_STATEMENT)
        .iter()
        .filter(|s| s.start_byte() < update.start_byte())
        .filter_map(|s| Some((*s, s.field("condition")?)))
        .find(|(stmt, condition)| {
            let text = syntax::text(*condition, src);
            if text.contains("refund") {
                return false;
            }
            let weighs = idx
                .within(*condition, kinds::COMPARISON_OPERATOR)
                .iter()
                .chain(
                    std::iter::once(condition).filter(|c| c.kind() == kinds::COMPARISON_OPERATOR),
                )
                .any(|c| {
                    // The operator's own node, as `retry::loops` reads a counter's bound.
                    c.child(1)
                        .is_some_and(|o| matches!(o.kind(), ">" | ">=" | "<" | "<="))
                        && crate::python::named_children(*c).iter().any(|side| {
                            side.kind() == kinds::ATTRIBUTE
                                && side
                                    .field("object")
                                    .is_some_and(|o| syntax::text(o, src) == record)
                                && side.field("attribute").is_some_and(|a| {
                                    syntax::name_words(syntax::text(a, src)).iter().any(|w| {
                                        matches!(
                                            w.as_str(),
                                            "quantity"
                                                | "qty"
                                                | "amount"
                                                | "cents"
                                                | "total"
                                                | "captured"
                                                | "paid"
                                                | "minor"
                                        )
                                    })
                                })
                        })
                });
            let stops = stmt.field("consequence").is_some_and(|b| {
                !idx.within(b, kinds::RAISE_STATEMENT).is_empty()
                    || !idx.within(b, kinds::RETURN_STATEMENT).is_empty()
            });
            weighs && stops
        })
        .map(|(_, condition)| condition)
}
