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
    !s.facts.is_test
        && (s.mentions(&["refunded"]) || s.facts.payment_module && s.mentions(FOREIGN_REFUNDED))
}

/// "Refunded" in the languages payment code is written in (`pedido.monto_reembolsado`,
/// `betaling.terugbetaald_bedrag`), as their stems.
const FOREIGN_REFUNDED: &[&str] = &[
    "reembolsad",
    "estornad",
    "rimborsat",
    "rembourse",
    "erstattet",
    "terugbetaald",
    "aterbetalt",
    "zwrocon",
];

/// Whether a word says refunded, in English or one of `FOREIGN_REFUNDED`.
fn says_refunded(word: &str) -> bool {
    word == "refunded" || FOREIGN_REFUNDED.iter().any(|stem| word.starts_with(stem))
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
        if !syntax::name_words(counted).iter().any(|w| says_refunded(w)) {
            continue;
        }
        let record = syntax::text(object, src);
        let Some(func) = idx.enclosing(update, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let (cap, note) = match cap_without_refunded(idx, func, update, record, src) {
            Some(cap) => (cap, None),
            None => match from_the_total(idx, func, update, record, counted, src) {
                Some(made) => (made, Some("computed")),
                None => continue,
            },
        };
        let finding = cx
            .report(&RULE, cap)
            .arg("function", facts::qualname(func, idx, src))
            .arg("cap", syntax::normalized(cap, src))
            .arg("counted", format!("{record}.{counted}"))
            .arg("counted_line", syntax::lines(update).0.to_string());
        if let Some(note) = note {
            finding.note(note);
        }
    }
}

/// `amount = lease.deposit_kobo - deductions` before `lease.deposit_refunded_kobo += amount`:
/// the amount refunded is worked out from the record's whole total, and the function reads
/// what was refunded before nowhere but in the update. The assignment, when so.
fn from_the_total<'t>(
    idx: &crate::python::NodeIndex<'t>,
    func: Node<'t>,
    update: Node<'_>,
    record: &str,
    counted: &str,
    src: &str,
) -> Option<Node<'t>> {
    let value = update.field("right")?;
    if value.kind() != kinds::IDENTIFIER {
        return None;
    }
    let name = syntax::text(value, src);
    // The amount is what a refund is sent for (`client.refund(..., amount_kobo=amount)`): not
    // a callback that books one confirmed elsewhere.
    let refunded = idx.within(func, kinds::CALL).iter().any(|c| {
        c.start_byte() < update.start_byte()
            && syntax::name_words(idx.callee_name(*c, src))
                .iter()
                .any(|w| w == "refund")
            && c.field("arguments").is_some_and(|args| {
                crate::python::named_children(args).iter().any(|a| {
                    let handed = if a.kind() == kinds::KEYWORD_ARGUMENT {
                        a.field("value")
                    } else {
                        Some(*a)
                    };
                    handed.is_some_and(|v| syntax::text(v, src) == name)
                })
            })
    });
    if !refunded {
        return None;
    }
    let right = idx.assigned_before(Some(func), name, update.start_byte(), src)?;
    let assignment = right.parent().filter(|p| p.kind() == kinds::ASSIGNMENT)?;
    let reads_total = std::iter::once(right)
        .chain(idx.within(right, kinds::ATTRIBUTE).iter().copied())
        .any(|a| total_of(a, record, src));
    let counted_text = format!("{record}.{counted}");
    let read_elsewhere = idx
        .within(func, kinds::ATTRIBUTE)
        .iter()
        .any(|a| !syntax::contains(update, *a) && syntax::text(*a, src) == counted_text);
    // `if payment.status == "refunded": raise ...`: refunded once, whole, by its state.
    let state_guard = idx
        .within(func, kinds::COMPARISON_OPERATOR)
        .iter()
        .any(|c| {
            c.start_byte() < update.start_byte()
                && crate::python::named_children(*c).iter().any(|side| {
                    attribute_of(*side, record, src)
                        .is_some_and(|a| matches!(a, "status" | "state" | "ended_at" | "closed_at"))
                })
        });
    (reads_total && !read_elsewhere && !state_guard && !syntax::text(right, src).contains("refund"))
        .then_some(assignment)
}

/// `item.quantity`, `payment.amount_cents`, `lease.deposit_kobo`: an attribute of `record` that
/// names a whole amount or quantity.
fn total_of(attribute: Node<'_>, record: &str, src: &str) -> bool {
    attribute_of(attribute, record, src).is_some_and(|a| {
        syntax::name_words(a).iter().any(|w| {
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
                    | "kobo"
                    | "deposit"
                    // `ordine.importo_totale`, `zahlung.betrag`, `order.belopp_ore`.
                    | "totale"
                    | "importo"
                    | "monto"
                    | "montant"
                    | "betrag"
                    | "bedrag"
                    | "belopp"
                    | "kwota"
                    | "valor"
                    | "gesamt"
            )
        })
    })
}

/// The attribute's name when `node` reads one of `record` (`status` of `order.status`).
fn attribute_of<'s>(node: Node<'_>, record: &str, src: &'s str) -> Option<&'s str> {
    if node.kind() != kinds::ATTRIBUTE
        || node
            .field("object")
            .is_none_or(|o| syntax::text(o, src) != record)
    {
        return None;
    }
    node.field("attribute").map(|a| syntax::text(a, src))
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
            if text.contains("refund") || syntax::name_words(text).iter().any(|w| says_refunded(w))
            {
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
                        && crate::python::named_children(*c)
                            .iter()
                            .any(|side| total_of(*side, record, src))
                });
            let stops = stmt.field("consequence").is_some_and(|b| {
                !idx.within(b, kinds::RAISE_STATEMENT).is_empty()
                    || !idx.within(b, kinds::RETURN_STATEMENT).is_empty()
            });
            weighs && stops
        })
        .map(|(_, condition)| condition)
}
