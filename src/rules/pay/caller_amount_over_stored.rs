//! PAY041 caller-amount-over-stored: a function that charges an order works out what is owed
//! from what it stores (`amount_due = order.amount_due_cents()`, `quote.amount_cents`,
//! `to_minor_units(order["total"], ...)`) and then charges, or records to charge, an amount its
//! caller hands in instead: `amount_cents or amount_due`, `quote.amount_cents if quoted is None
//! else quoted`, or the caller's `expected_amount_minor` where the stored one was only compared
//! and logged. The caller's amount comes from the payer's request: whoever sends it chooses
//! what they pay, down to a cent.
//!
//! Left alone: a caller's amount that must equal the stored one (`if expected != amount_due:
//! raise AmountChanged(...)`) before anything is sent, refunds, captures, payouts and other
//! moves whose amount is the caller's to choose (a partial refund, a tip, a top-up), and the
//! stored amount charged whatever the caller says.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY041",
    doc: include_str!("../../../rules/pay/PAY041.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a charging function of code, not of a test, with a parameter named for an
/// amount.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(&["_minor", "_cents", "amount"])
        && s.mentions(&[
            "charge", "capture", "authori", "checkout", "pay", "Pay", "order", "plan", "debit",
        ])
}

/// A name for money to charge: `amount_cents`, `quoted_amount_cents`, `expected_total`.
fn money(name: &str) -> bool {
    let words = syntax::name_words(name);
    words.iter().any(|w| {
        matches!(
            w.as_str(),
            "amount" | "total" | "cents" | "minor" | "price" | "sum" | "due"
        )
    }) && !words.iter().any(|w| {
        matches!(
            w.as_str(),
            "fee"
                | "fees"
                | "tax"
                | "discount"
                | "tip"
                | "min"
                | "max"
                | "limit"
                | "threshold"
                | "refund"
                | "refunded"
                | "count"
                | "currency"
        )
    })
}

/// Words of a function whose amount is the caller's to choose, or no charge at all.
fn callers_to_choose(name: &str) -> bool {
    syntax::name_words(name).iter().any(|w| {
        matches!(
            w.as_str(),
            "refund"
                | "refunds"
                | "payout"
                | "payouts"
                | "transfer"
                | "capture"
                | "withdraw"
                | "withdrawal"
                | "topup"
                | "top"
                | "deposit"
                | "credit"
                | "tip"
                | "donate"
                | "donation"
                | "partial"
                | "installment"
                | "instalment"
                | "split"
                | "adjust"
                | "adjustment"
                | "quote"
                | "preview"
                | "estimate"
                | "format"
                | "render"
        )
    })
}

/// A charge, a payment or an order's checkout.
fn charges(name: &str) -> bool {
    syntax::name_words(name).iter().any(|w| {
        matches!(
            w.as_str(),
            "pay"
                | "payment"
                | "charge"
                | "checkout"
                | "purchase"
                | "order"
                | "plan"
                | "upgrade"
                | "subscribe"
                | "subscription"
                | "authorize"
                | "authorise"
                | "bill"
                | "invoice"
                | "change"
                | "renew"
                | "debit"
        )
    })
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        let Some(found) = charged_in(cx, idx, func, src) else {
            continue;
        };
        // Where a local holding the stored amount was worked out (`amount_due = ...`).
        let stored_at = (found.stored.kind() == kinds::IDENTIFIER)
            .then(|| {
                idx.assigned_before(
                    Some(func),
                    syntax::text(found.stored, src),
                    found.stored.start_byte(),
                    src,
                )
            })
            .flatten()
            .unwrap_or(found.stored);
        let finding = cx
            .report(&RULE, found.sink)
            .arg("function", facts::qualname(func, idx, src))
            .arg("param", found.param)
            .arg("stored", syntax::normalized(found.stored, src))
            .arg("stored_line", syntax::lines(stored_at).0.to_string())
            .arg("sink", format!("{}(...)", syntax::callee(found.sink, src)));
        finding.note(found.note);
    }
}

/// Whether this rule reports `func` for an amount kept where it differs from the caller's
/// (`kept`): PAY001's reading of a caller's figure put over the one worked out leaves that to
/// this rule.
pub(super) fn reports_kept(cx: &Ctx<'_>, idx: &NodeIndex<'_>, func: Node<'_>, src: &str) -> bool {
    charged_in(cx, idx, func, src).is_some_and(|f| f.note == "kept")
}

/// What `charged_in` found: the call handed the caller's amount, the caller's name for it,
/// what the function has of its own, and the note.
struct Found<'t> {
    sink: Node<'t>,
    param: String,
    stored: Node<'t>,
    note: &'static str,
}

/// The caller's amount `func` charges where it has its own, if any.
fn charged_in<'t>(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    src: &str,
) -> Option<Found<'t>> {
    let name = syntax::function_name(func, src);
    if callers_to_choose(name) {
        return None;
    }
    // Read first as text, which most functions fail: a parameter named for money, or a
    // fallback (`x or y`, `a if c else b`) for a field of one.
    let (list, body) = (func.field("parameters")?, func.field("body")?);
    let named_money = ["amount", "_cents", "_minor", "total", "price"]
        .iter()
        .any(|w| memchr::memmem::find(syntax::text(list, src).as_bytes(), w.as_bytes()).is_some());
    let body_text = syntax::text(body, src).as_bytes();
    let falls_back = memchr::memmem::find(body_text, b" or ").is_some()
        || memchr::memmem::find(body_text, b" else ").is_some();
    if !named_money && !falls_back {
        return None;
    }
    let all = crate::rules::pay::parameters(func, src);
    let mut params: Vec<String> = all
        .iter()
        .filter(|p| money(p) && !callers_to_choose(p))
        .cloned()
        .collect();
    // A field of what the caller hands in (`notice.declared_value_minor` of a shipment's
    // message), where the function falls back on its own amount.
    if falls_back {
        params.extend(fields_of_parameters(idx, func, &all, src));
    }
    if params.is_empty() {
        return None;
    }
    let read_by_pay001 = |call: Node<'_>| {
        (super::pays(cx, call, src) || super::hands_a_payment(cx, call, src))
            && super::charge_amount_source_changed::overridable_call(call, idx, src, cx.vocab)
    };
    let found = charged_from_the_caller(idx, func, &params, charges(name), &read_by_pay001, src)?;
    Some(Found {
        sink: found.sink,
        param: found.param.to_string(),
        stored: found.stored,
        note: found.note,
    })
}

struct Charged<'t, 'p> {
    /// The call that charges or records the amount.
    sink: Node<'t>,
    /// The caller's parameter.
    param: &'p str,
    /// What the function stores or works out as owed.
    stored: Node<'t>,
    note: &'static str,
}

/// The first call of `func` handed a caller's amount where the function has its own.
fn charged_from_the_caller<'t, 'p>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    params: &'p [String],
    named_for_a_charge: bool,
    read_by_pay001: &dyn Fn(Node<'_>) -> bool,
    src: &str,
) -> Option<Charged<'t, 'p>> {
    let own = |n: &Node<'_>| crate::rules::err::owned_by(*n, func, idx);
    // A function named for a charge, or a call named for one (`create_capture(...)` in
    // `on_shipped`).
    let sink = |c: &Node<'_>| {
        named_for_a_charge
            || syntax::name_words(syntax::callee_name(*c, src))
                .iter()
                .any(|w| {
                    matches!(
                        w.as_str(),
                        "charge" | "capture" | "payment" | "authorize" | "authorise"
                    )
                })
    };
    for &call in idx
        .within(func, kinds::CALL)
        .iter()
        .filter(|c| own(c) && sink(c))
    {
        for value in amount_arguments(idx, func, call, src) {
            if let Some(found) = kept_when_different(idx, func, value, params, src) {
                return Some(Charged {
                    sink: call,
                    param: found.0,
                    stored: found.1,
                    note: "kept",
                });
            }
            // Through a local: `amount_due = ... if quoted is None else quoted`, then
            // `amount_cents=amount_due`.
            let value = match value.kind() {
                kinds::IDENTIFIER if !params.iter().any(|p| p == syntax::text(value, src)) => idx
                    .assigned_before(
                        Some(func),
                        syntax::text(value, src),
                        value.start_byte(),
                        src,
                    )
                    .unwrap_or(value),
                _ => value,
            };
            for param in params {
                let Some((stored, note)) = overridden(idx, func, value, param, call, src) else {
                    continue;
                };
                // PAY001 reads a payment call's `amount or order.total` on its own.
                if note == "fallback" && read_by_pay001(call) {
                    continue;
                }
                if guarded(idx, func, param, stored, call, src) {
                    continue;
                }
                return Some(Charged {
                    sink: call,
                    param,
                    stored,
                    note,
                });
            }
        }
    }
    None
}

/// `amount = self._proration(...)`, then `if quoted_amount != amount: ... amount =
/// quoted_amount`, and `amount` charged: where the caller's amount is not the one worked out,
/// the caller's is kept. The parameter and the local's first value.
fn kept_when_different<'t, 'p>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    value: Node<'t>,
    params: &'p [String],
    src: &str,
) -> Option<(&'p str, Node<'t>)> {
    if value.kind() != kinds::IDENTIFIER {
        return None;
    }
    let local = syntax::text(value, src);
    if params.iter().any(|p| p == local) {
        return None;
    }
    let given = idx.assigned_before(Some(func), local, value.start_byte(), src)?;
    let param = params
        .iter()
        .find(|p| given.kind() == kinds::IDENTIFIER && syntax::text(given, src) == p.as_str())?;
    let assignment = given.parent().filter(|a| a.kind() == kinds::ASSIGNMENT)?;
    let branch = idx.enclosing(assignment, kinds::IF_STATEMENT)?;
    let condition = branch.field("condition")?;
    let test = syntax::text(condition, src);
    let compared =
        test.contains("!=") && syntax::has_word(test, param) && syntax::has_word(test, local);
    let in_its_body = branch
        .field("consequence")
        .is_some_and(|body| syntax::contains(body, assignment));
    if !(compared && in_its_body) {
        return None;
    }
    // The amount worked out before the test, not the caller's.
    let worked_out = idx.assigned_before(Some(func), local, branch.start_byte(), src)?;
    (matches!(
        worked_out.kind(),
        kinds::CALL | kinds::ATTRIBUTE | kinds::SUBSCRIPT | kinds::BINARY_OPERATOR
    ) && !syntax::has_word(syntax::text(worked_out, src), param))
    .then_some((param.as_str(), worked_out))
}

/// The values `call` takes for money: keyword arguments named for it (`amount_cents=...`), and
/// positional ones a function of the file takes under such a name
/// (`self._start_attempt(order, card, expected_amount_minor)`).
fn amount_arguments<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    call: Node<'t>,
    src: &str,
) -> Vec<Node<'t>> {
    let mut out: Vec<Node<'t>> = syntax::keyword_args(call, src)
        .into_iter()
        .filter(|(k, _)| money(k))
        .map(|(_, v)| v)
        .collect();
    let positional = syntax::positional_args(call);
    if positional.is_empty() {
        return out;
    }
    let name = syntax::callee_name(call, src);
    let callee = idx
        .functions_named(name, src)
        .into_iter()
        .find(|f| f.id() != func.id());
    if let Some(callee) = callee {
        let names = crate::rules::pay::positional_parameters(callee, src);
        for (arg, param) in positional.into_iter().zip(names) {
            if money(param) {
                out.push(arg);
            }
        }
    }
    out
}

/// The money fields of `func`'s parameters it reads (`notice.declared_value_minor`), as
/// written.
fn fields_of_parameters(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    all: &[String],
    src: &str,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for read in idx.within(func, kinds::ATTRIBUTE) {
        let (Some(object), Some(field)) = (read.field("object"), read.field("attribute")) else {
            continue;
        };
        let field = syntax::text(field, src);
        if object.kind() == kinds::IDENTIFIER
            && all.iter().any(|p| p == syntax::text(object, src))
            && money(field)
            && !callers_to_choose(field)
        {
            let text = syntax::text(*read, src).to_string();
            if !out.contains(&text) {
                out.push(text);
            }
        }
    }
    out
}

/// Whether `value` charges `param` over an amount the function has of its own: `param or
/// stored`, `stored if param is None else param`, or `param` itself where the function works
/// out an amount it hands to nothing (`amount_minor = to_minor_units(order["total"], ...)`,
/// then only compared). The stored amount and the shape's note.
fn overridden<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    value: Node<'t>,
    param: &str,
    sink: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, &'static str)> {
    let is_param = |n: Node<'_>| {
        matches!(n.kind(), kinds::IDENTIFIER | kinds::ATTRIBUTE) && syntax::text(n, src) == param
    };
    match value.kind() {
        kinds::BOOLEAN_OPERATOR | kinds::CONDITIONAL_EXPRESSION => {
            let (given, stored) = super::fallback(value, src)?;
            (is_param(given) && stored_amount(stored, param, src)).then_some((stored, "fallback"))
        }
        kinds::IDENTIFIER if is_param(value) => {
            // An amount of the function's own, worked out before the charge and handed to
            // nothing that charges or records it.
            let unused = idx
                .within(func, kinds::ASSIGNMENT)
                .iter()
                .copied()
                .filter(|a| {
                    a.end_byte() <= sink.start_byte() && crate::rules::err::owned_by(*a, func, idx)
                })
                .find(|a| {
                    let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
                        return false;
                    };
                    let local = syntax::text(left, src);
                    left.kind() == kinds::IDENTIFIER
                        && local != param
                        && money(local)
                        && stored_amount(right, param, src)
                        && !idx.within(func, kinds::CALL).iter().any(|c| {
                            syntax::keyword_args(*c, src)
                                .iter()
                                .any(|(_, v)| syntax::text(*v, src) == local)
                                || syntax::positional_args(*c).iter().any(|v| {
                                    syntax::text(*v, src) == local
                                        && syntax::callee_name(*c, src) != "log"
                                        && !syntax::callee(*c, src).contains("log")
                                })
                        })
                });
            match unused {
                Some(stored) => Some((stored.field("left")?, "unused")),
                None => unchecked_field(idx, func, param, sink, src).map(|f| (f, "unchecked")),
            }
        }
        _ => None,
    }
}

/// The record's own field of the caller's amount's name (`order.amount_minor` beside the
/// parameter `amount_minor`), where the function loads the record itself before the charge
/// (`order = session.get(Order, order_id)`), not from the caller's amount, and never compares
/// the two: the caller's amount is charged with the order's in hand, unasked. A comparison of
/// any kind (`amount > order.amount` of a partial payment) leaves it alone.
fn unchecked_field<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    param: &str,
    sink: Node<'t>,
    src: &str,
) -> Option<Node<'t>> {
    let params = crate::rules::pay::parameters(func, src);
    let field = idx
        .within(func, kinds::ATTRIBUTE)
        .iter()
        .copied()
        .find(|a| {
            let (Some(object), Some(attr)) = (a.field("object"), a.field("attribute")) else {
                return false;
            };
            let record = syntax::text(object, src);
            object.kind() == kinds::IDENTIFIER
                && syntax::text(attr, src) == param
                && !params.iter().any(|p| p == record)
                && idx
                    .assigned_before(Some(func), record, a.start_byte(), src)
                    .is_some_and(|load| {
                        load.end_byte() <= sink.start_byte()
                            && !syntax::has_word(syntax::text(load, src), param)
                    })
        })?;
    let field_text = syntax::text(field, src);
    let compared = idx
        .within(func, kinds::COMPARISON_OPERATOR)
        .iter()
        .any(|c| {
            let text = syntax::text(*c, src);
            text.contains(field_text) && syntax::has_word(&text.replace(field_text, ""), param)
        });
    (!compared).then_some(field)
}

/// Whether `node` reads an amount the function holds, not the caller's: an amount field of a
/// record (`quote.amount_cents`, `order["total"]`), a call that works one out
/// (`order.amount_due_cents()`, `to_minor_units(order["total"], ...)`), or a local named for one.
fn stored_amount(node: Node<'_>, param: &str, src: &str) -> bool {
    let text = syntax::text(node, src);
    // The record read, not the key it is read by (`invoice["amount_minor"]` beside a parameter
    // `amount_minor`).
    let reads = match node.kind() {
        kinds::SUBSCRIPT => node.field("value"),
        kinds::ATTRIBUTE => node.field("object"),
        _ => Some(node),
    }
    .map_or(text, |n| syntax::text(n, src));
    if syntax::has_word(reads, param) {
        return false;
    }
    match node.kind() {
        kinds::ATTRIBUTE | kinds::SUBSCRIPT | kinds::CALL => {
            money(text)
                || syntax::name_words(text)
                    .iter()
                    .any(|w| w == "total" || w == "due")
        }
        kinds::IDENTIFIER => money(text),
        _ => false,
    }
}

/// Whether the function turns the caller's amount away when it is not the stored one before
/// the charge: `if param != stored: raise ...` (or `return`).
fn guarded(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    param: &str,
    stored: Node<'_>,
    sink: Node<'_>,
    src: &str,
) -> bool {
    let stored = syntax::text(stored, src);
    let stored_name = stored.rsplit(['.', '[']).next().unwrap_or(stored);
    idx.within(func, kinds::IF_STATEMENT).iter().any(|i| {
        i.end_byte() <= sink.start_byte()
            && i.field("condition").is_some_and(|c| {
                let text = syntax::text(c, src);
                text.contains("!=") && syntax::has_word(text, param) && text.contains(stored_name)
            })
            && i.field("consequence").is_some_and(|body| {
                !idx.within(body, kinds::RAISE_STATEMENT).is_empty()
                    || !idx.within(body, kinds::RETURN_STATEMENT).is_empty()
            })
    })
}
