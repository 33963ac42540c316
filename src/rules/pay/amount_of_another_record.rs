//! PAY035 amount-of-another-record: a payment or refund is sent for a record (`refund.reference`,
//! `refund.idempotency_key`) with the amount of a record it hangs from
//! (`amount_minor=refund.credit_note.amount_minor`), while the record has an amount of its own
//! that the code reads elsewhere (`refund.amount_minor`). A credit note split over two payments,
//! an order refunded in parts, an invoice of several charges: each part is sent the whole.
//!
//! Left alone: a record with no amount of its own in the file, and an amount read from the
//! record itself or worked out.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY035",
    doc: include_str!("../../../rules/pay/PAY035.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is an amount argument in code that pays or refunds.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && (s.facts.payment_module || s.facts.functions.iter().any(|f| f.payment))
        && s.mentions(&["amount"])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    for &call in idx.all(kinds::CALL) {
        let arguments = syntax::keyword_args(call, src);
        if arguments.len() < 2 {
            continue;
        }
        for &(name, value) in &arguments {
            if !cx.vocab.is_money_argument(name)
                || !syntax::name_words(name).iter().any(|w| w == "amount")
            {
                continue;
            }
            let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
                continue;
            };
            let Some((record, parent)) =
                through_a_parent(value, src).or_else(|| through_a_local(idx, func, value, src))
            else {
                continue;
            };
            // The call is about the record itself: another of its arguments reads it directly.
            let about_record = arguments.iter().any(|&(other, v)| {
                other != name
                    && v.kind() == kinds::ATTRIBUTE
                    && v.field("object").is_some_and(|o| {
                        o.kind() == kinds::IDENTIFIER && syntax::text(o, src) == record
                    })
            });
            if !about_record {
                continue;
            }
            if !moves_money(cx, idx, func, call, src) {
                continue;
            }
            let Some((own, own_at)) = own_amount(idx, record, parent, value, src)
                .map(|a| {
                    (
                        syntax::text(a, src).to_string(),
                        format!("{}:{}", cx.path, syntax::lines(a).0),
                    )
                })
                .or_else(|| model_amount(cx, idx, func, record, parent, call, src))
            else {
                continue;
            };
            let function = facts::qualname(func, idx, src);
            let finding = cx
                .report(&RULE, value)
                .arg("function", function.clone())
                .arg("argument", format!("{name}={}", syntax::text(value, src)))
                .arg("record", record.to_string())
                .arg("parent", parent.to_string())
                .arg("own", own)
                .arg("own_at", own_at);
            finding.function = function;
        }
    }
    refundable_from_the_parent(cx, idx, src);
    captured_from_another_field(cx, idx, src);
}

/// An amount handed to a call as a field of a record (`amount_paise=booking.amount_paise`): the
/// call, the keyword and value, the record and the field.
struct Handed<'t> {
    call: Node<'t>,
    value: Node<'t>,
    keyword: String,
    record: String,
    field: String,
}

/// A capture of a payment with another field of the record than the one the payment was
/// created with (`create_order(amount_paise=booking.amount_paise)`, then
/// `capture_payment(..., amount_paise=booking.ticket_total_paise)`): the fee, the tax or the
/// shipping of the total are left uncaptured, or the provider refuses a capture above what was
/// authorised.
fn captured_from_another_field(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    // One pass over the calls: each is a capture, a creation of a payment, or neither.
    let mut captures: Vec<Handed<'_>> = Vec::new();
    let mut created: Vec<Handed<'_>> = Vec::new();
    for &call in idx.all(kinds::CALL) {
        let words = syntax::name_words(syntax::callee(call, src));
        let has = |x: &str| words.iter().any(|y| y == x);
        let into = if has("capture") {
            &mut captures
        } else if !has("refund")
            && (has("create") || has("authorize") || has("authorise"))
            && [
                "order",
                "payment",
                "intent",
                "charge",
                "authorization",
                "authorisation",
            ]
            .iter()
            .any(|x| has(x))
        {
            &mut created
        } else {
            continue;
        };
        into.extend(
            syntax::keyword_args(call, src)
                .into_iter()
                .filter_map(|(name, value)| {
                    if !syntax::name_words(name).iter().any(|w| w == "amount") {
                        return None;
                    }
                    let record = value.field("object").filter(|o| {
                        value.kind() == kinds::ATTRIBUTE && o.kind() == kinds::IDENTIFIER
                    })?;
                    let field = syntax::text(value.field("attribute")?, src);
                    names_an_amount(field).then(|| Handed {
                        call,
                        value,
                        keyword: name.to_string(),
                        record: syntax::text(record, src).to_string(),
                        field: field.to_string(),
                    })
                }),
        );
    }
    for capture in &captures {
        let Some(create) = created
            .iter()
            .find(|c| c.record == capture.record && c.field != capture.field)
        else {
            continue;
        };
        let func = idx.enclosing(capture.call, kinds::FUNCTION_DEFINITION);
        let function = func
            .map(|f| facts::qualname(f, idx, src))
            .unwrap_or_default();
        let finding = cx
            .report(&RULE, capture.value)
            .arg("function", function.clone())
            .arg(
                "argument",
                format!("{}={}", capture.keyword, syntax::text(capture.value, src)),
            )
            .arg("record", capture.record.clone())
            .arg("parent", String::new())
            .arg("own", format!("{}.{}", create.record, create.field))
            .arg("own_at", format!("line {}", syntax::lines(create.value).0))
            .note("capture");
        finding.function = function;
    }
}

/// What may still be refunded of a record worked out from the amount of the record it hangs
/// from (`refundable_cents(payment)` returning `payment.order.total_cents - committed`), while
/// the record has an amount of its own (`payment.amount_cents`, what was captured): a refund
/// above what this payment took passes the cap.
fn refundable_from_the_parent(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        let words = syntax::name_words(syntax::function_name(func, src));
        let has = |w: &str| words.iter().any(|x| x == w);
        if !(has("refundable")
            || has("refund") && (has("remaining") || has("left") || has("available")))
        {
            continue;
        }
        for &op in idx.within(func, kinds::BINARY_OPERATOR) {
            if op.child(1).is_none_or(|o| o.kind() != "-") {
                continue;
            }
            let Some(left) = op.field("left") else {
                continue;
            };
            let Some((record, parent)) = through_a_parent(left, src) else {
                continue;
            };
            let Some(own) = own_amount(idx, record, parent, left, src) else {
                continue;
            };
            let function = facts::qualname(func, idx, src);
            let own_at = format!("{}:{}", cx.path, syntax::lines(own).0);
            let finding = cx
                .report(&RULE, left)
                .arg("function", function.clone())
                .arg("argument", syntax::text(left, src).to_string())
                .arg("record", record.to_string())
                .arg("parent", parent.to_string())
                .arg("own", syntax::text(own, src).to_string())
                .arg("own_at", own_at)
                .note("cap");
            finding.function = function;
        }
    }
}

/// `refund.credit_note.amount_minor`: the record (`refund`) and the record it hangs from
/// (`credit_note`) whose amount is read.
fn through_a_parent<'s>(value: Node<'_>, src: &'s str) -> Option<(&'s str, &'s str)> {
    if value.kind() != kinds::ATTRIBUTE {
        return None;
    }
    let parts: Vec<&str> = syntax::text(value, src).split('.').collect();
    let [record, parent, amount] = parts[..] else {
        return None;
    };
    let is_name = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_');
    (is_name(record) && is_name(parent) && names_an_amount(amount)).then_some((record, parent))
}

/// `booking.deposit_cents` after `booking = movement.booking`: the same read through a local
/// the function took from the record.
fn through_a_local<'s>(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    value: Node<'_>,
    src: &'s str,
) -> Option<(&'s str, &'s str)> {
    if value.kind() != kinds::ATTRIBUTE {
        return None;
    }
    let local = value
        .field("object")
        .filter(|o| o.kind() == kinds::IDENTIFIER)?;
    let amount = value.field("attribute")?;
    if !names_an_amount(syntax::text(amount, src)) {
        return None;
    }
    let local = syntax::text(local, src);
    let loaded = idx.assigned_before(Some(func), local, value.start_byte(), src)?;
    if loaded.kind() != kinds::ATTRIBUTE {
        return None;
    }
    let record = loaded
        .field("object")
        .filter(|o| o.kind() == kinds::IDENTIFIER)?;
    let parent = syntax::text(loaded.field("attribute")?, src);
    // The local is the parent under its own name: `booking = movement.booking`, not
    // `total = movement.amount_cents`.
    (parent == local).then_some((syntax::text(record, src), parent))
}

/// An amount the record has itself, read elsewhere in the file: `refund.amount_minor`.
fn own_amount<'t>(
    idx: &NodeIndex<'t>,
    record: &str,
    parent: &str,
    value: Node<'_>,
    src: &str,
) -> Option<Node<'t>> {
    idx.all(kinds::ATTRIBUTE).iter().copied().find(|a| {
        a.id() != value.id()
            && a.field("object")
                .is_some_and(|o| o.kind() == kinds::IDENTIFIER && syntax::text(o, src) == record)
            && a.field("attribute").is_some_and(|n| {
                let n = syntax::text(n, src);
                n != parent && names_an_amount(n)
            })
    })
}

/// An amount the record's model declares (`amount_minor = mapped_column(...)` of
/// `PaymentRefund`, the class `refund = db.get(PaymentRefund, refund_id)` loads), as
/// `Class.attr` with where it is (repository mode).
fn model_amount(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    record: &str,
    parent: &str,
    before: Node<'_>,
    src: &str,
) -> Option<(String, String)> {
    let load = idx.assigned_before(Some(func), record, before.start_byte(), src)?;
    let load = crate::rules::idem::strip_await(load);
    if load.kind() != kinds::CALL {
        return None;
    }
    let capitalised = |t: &str| t.starts_with(|c: char| c.is_ascii_uppercase());
    let callee = syntax::callee(load, src);
    let root = callee.split('.').next().unwrap_or(callee);
    let classes: Vec<&str> = syntax::positional_args(load)
        .into_iter()
        .filter(|a| a.kind() == kinds::IDENTIFIER)
        .map(|a| syntax::text(a, src))
        .chain((root != callee).then_some(root))
        .filter(|c| capitalised(c))
        .collect();
    if classes.is_empty() {
        return None;
    }
    let project = cx.project()?;
    project.modules().iter().find_map(|m| {
        m.assignments.iter().find_map(|a| {
            let (class, attr) = a.name.split_once('.')?;
            (classes.contains(&class) && attr != parent && names_an_amount(attr))
                .then(|| (a.name.clone(), format!("{}:{}", m.path, a.line)))
        })
    })
}

/// Whether the call sends money, or builds what is sent (`call = dict(payment_id=...,
/// amount_minor=...)` then `refund_payment(**call)`) in a function that pays or refunds.
fn moves_money(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    call: Node<'_>,
    src: &str,
) -> bool {
    if crate::rules::pay::pays(cx, call, src) {
        return true;
    }
    let name = syntax::function_name(func, src);
    let paying_function = cx.vocab.is_payment_operation(name)
        || idx.within(func, kinds::CALL).iter().any(|&c| {
            crate::rules::idem::owned_by(idx, c, Some(func)) && crate::rules::pay::pays(cx, c, src)
        });
    paying_function && syntax::callee_name(call, src) == "dict"
}

/// `amount_minor`, `total_cents`, `price`: a name of an amount of money.
fn names_an_amount(name: &str) -> bool {
    syntax::name_words(name)
        .iter()
        .any(|w| matches!(w.as_str(), "amount" | "total" | "price" | "cents" | "pence"))
}
