//! PAY039 metadata-compared-with-id: a value read back from a provider's metadata
//! (`(item.get("metadata") or {}).get("refund_id")`, `intent.metadata["order_id"]`) is compared
//! with one of our ids as it is (`== refund.id`, `== order.pk`). Providers keep metadata as text
//! (Stripe, Mollie, Adyen, Braintree turn every value into a string), and a number or a UUID
//! never equals its text in Python: the lookup never finds its record. A search for an earlier
//! refund before sending one again finds nothing and sends a second one; a webhook never finds
//! the order it pays.
//!
//! Left alone: a side turned to text or back (`str(refund.id)`, `int(metadata["order_id"])`,
//! `UUID(...)`), and ids of other names (`order.reference`, `payment.external_id`), which are
//! often text themselves.
use tree_sitter::Node;

use crate::python::{Fields, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY039",
    doc: include_str!("../../../rules/pay/PAY039.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a comparison with a read of metadata.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && s.mentions(&["metadata"]) && s.mentions(&["=="])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    for &comparison in idx.all(kinds::COMPARISON_OPERATOR) {
        let text = syntax::text(comparison, src);
        if !text.contains("metadata") || comparison.named_child_count() != 2 {
            continue;
        }
        let operator = syntax::text(comparison, src);
        if !operator.contains(" == ") && !operator.contains(" != ") {
            continue;
        }
        let (Some(left), Some(right)) = (comparison.named_child(0), comparison.named_child(1))
        else {
            continue;
        };
        let (read, id) = if reads_metadata(left, src) {
            (left, right)
        } else if reads_metadata(right, src) {
            (right, left)
        } else {
            continue;
        };
        if !our_id(id, src) {
            continue;
        }
        let function = facts::enclosing_qualname(idx, comparison, src);
        let finding = cx
            .report(&RULE, comparison)
            .arg("read", syntax::text(read, src).to_string())
            .arg("id", syntax::text(id, src).to_string());
        finding.function = function;
    }
}

/// `(item.get("metadata") or {}).get("refund_id")`, `intent.metadata["order_id"]`,
/// `metadata.get("order_id")`: one key of a metadata mapping, as it came.
fn reads_metadata(node: Node<'_>, src: &str) -> bool {
    let receiver = match node.kind() {
        kinds::CALL if syntax::callee_name(node, src) == "get" => syntax::receiver(node),
        kinds::SUBSCRIPT => node.field("value"),
        _ => None,
    };
    receiver.is_some_and(|r| {
        let text = syntax::text(r, src);
        text.ends_with("metadata")
            || text.ends_with("metadata\")")
            || text.ends_with("metadata')")
            || text.ends_with("metadata\"]")
            || text.ends_with("metadata']")
            || (text.starts_with('(') && text.contains("metadata") && text.ends_with(')'))
    })
}

/// `refund.id`, `order.pk`, `self.payment.id`: a record's own id, as it is (an integer or a
/// UUID in Django, SQLAlchemy and most ORMs).
fn our_id(node: Node<'_>, src: &str) -> bool {
    node.kind() == kinds::ATTRIBUTE
        && node
            .field("attribute")
            .is_some_and(|a| matches!(syntax::text(a, src), "id" | "pk"))
}
