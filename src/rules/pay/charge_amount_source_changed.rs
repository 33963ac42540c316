//! PAY001 charge-amount-source-changed: a payment call's amount or currency used to come from
//! the stored order (invoice, payment…) and now comes from whoever calls the function.
use tree_sitter::Node;

use crate::config::Vocabulary;
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY001",
    doc: include_str!("../../../rules/pay/PAY001.md"),
    check: Check::Change(check),
    gate: Gate::When(gate),
};

/// Roots of values that arrive from outside: a request, a message, a task's payload.
const INBOUND: &[&str] = &[
    "request",
    "payload",
    "kwargs",
    "data",
    "body",
    "params",
    "event",
    "message",
    "msg",
    "task_kwargs",
    "form",
    "query",
];

/// One side of a file, for reading a call and its function.
#[derive(Clone, Copy)]
struct Side<'a> {
    idx: &'a NodeIndex<'a>,
    src: &'a str,
}

/// An argument whose source changed: old and new text, and the local it goes through when the
/// call passes a name (`amount = invoice.total`, then `charge(amount=amount)`).
struct Moved {
    old: String,
    new: String,
    via: Option<String>,
    line: u32,
}

/// Every finding is a call on an added line that is a payment call by its name or, in a
/// payment module, may be one through the function it calls (see `pay::pays`).
fn gate(s: &Scan<'_>) -> bool {
    let (idx, src) = (s.index(), s.src());
    let touched_call = idx.all(kinds::CALL).iter().any(|&call| {
        let (first, last) = syntax::lines(call);
        // Lines first: few calls are on added lines, and naming a call costs more.
        s.lines.touches_added(first, last)
            && (s.facts.payment_module
                || super::is_payment_call(call, src, s.vocab)
                || money_update(call, src, s.vocab).is_some()
                || builds_payment_record(call, src))
    });
    touched_call
        || idx.all(kinds::ASSIGNMENT).iter().any(|&a| {
            // Lines first: few assignments are on added lines, and naming one costs more.
            let (first, last) = syntax::lines(a);
            s.lines.touches_added(first, last)
                && (money_local(a, src, s.vocab).is_some()
                    || owed_taken_from_a_name(a, src).is_some())
        })
}

/// The name an assignment gives a money value: `amount = ...`, or a dict with money in it
/// (`payload = {"amount": {"value": ...}}`, passed on as `create(payload)` or `**payload`).
/// A key set on its own counts too: `params["amount"] = ...`, `params = dict(amount=...)`.
fn money_local<'s>(assignment: Node<'_>, src: &'s str, vocab: &Vocabulary) -> Option<&'s str> {
    let left = assignment.field("left")?;
    if left.kind() == kinds::SUBSCRIPT {
        let (root, path) = key_path(left, src)?;
        let right = assignment.field("right")?;
        let money = path.split('.').any(|k| vocab.is_money_argument(k));
        let holds_money = || !leaves_under(right, &path, money, src, vocab).is_empty();
        return (money || holds_money()).then_some(root);
    }
    if left.kind() != kinds::IDENTIFIER {
        return None;
    }
    let name = syntax::text(left, src);
    let holds_money = || {
        assignment
            .field("right")
            .is_some_and(|r| dict_leaves(r, src, vocab).is_some_and(|leaves| !leaves.is_empty()))
    };
    (vocab.is_money_argument(name) || holds_money()).then_some(name)
}

/// The dict a call `params.update(amount=..., ...)` or `params.update({"amount": ...})` puts
/// money in: `params`.
fn money_update<'s>(call: Node<'_>, src: &'s str, vocab: &Vocabulary) -> Option<&'s str> {
    let callee = call.field("function")?;
    if callee.kind() != kinds::ATTRIBUTE
        || callee.field("attribute").map(|a| syntax::text(a, src)) != Some("update")
    {
        return None;
    }
    let object = callee
        .field("object")
        .filter(|o| o.kind() == kinds::IDENTIFIER)?;
    let leaves = dict_leaves_of_call(call, src, vocab);
    (!leaves.is_empty()).then(|| syntax::text(object, src))
}

/// `params` and `.amount.value` for `params["amount"]["value"]`: a name subscripted by string
/// keys only.
fn key_path<'s>(subscript: Node<'_>, src: &'s str) -> Option<(&'s str, String)> {
    let mut keys = Vec::new();
    let mut node = subscript;
    while node.kind() == kinds::SUBSCRIPT {
        let key = node
            .field("subscript")
            .filter(|k| k.kind() == kinds::STRING)?;
        keys.push(syntax::text(key, src).trim_matches(['"', '\'']));
        node = node.field("value")?;
    }
    if node.kind() != kinds::IDENTIFIER {
        return None;
    }
    let path: String = keys.iter().rev().map(|k| format!(".{k}")).collect();
    Some((syntax::text(node, src), path))
}

/// The calls to weigh: those on added lines, and those after an added `amount = ...` (or
/// `payload = {"amount": ...}`, `payload["amount"] = ...`, `payload.update(amount=...)`) in the
/// same function that pass that name on.
fn candidate_calls<'t>(cx: &Ctx<'_>, idx: &NodeIndex<'t>, src: &str) -> Vec<Node<'t>> {
    let mut out: Vec<Node<'t>> = idx
        .all(kinds::CALL)
        .iter()
        .copied()
        .filter(|c| {
            let (first, last) = syntax::lines(*c);
            cx.touches_added(first, last)
        })
        .collect();
    let touched = |n: &&Node<'t>| {
        let (first, last) = syntax::lines(**n);
        cx.touches_added(first, last)
    };
    let assignments = idx.all(kinds::ASSIGNMENT).iter().filter(touched);
    let sets = assignments.filter_map(|&a| Some((a, money_local(a, src, cx.vocab)?)));
    let updates = out
        .iter()
        .filter_map(|&c| Some((c, money_update(c, src, cx.vocab)?)))
        .collect::<Vec<_>>();
    for (assignment, name) in sets.chain(updates) {
        let Some(func) = idx.enclosing(assignment, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let passes = |call: &Node<'_>| {
            call.start_byte() > assignment.end_byte()
                && call.field("arguments").is_some_and(|args| {
                    crate::python::named_children(args).iter().any(|arg| {
                        let value = if arg.kind() == kinds::DICTIONARY_SPLAT {
                            arg.named_child(0).unwrap_or(*arg)
                        } else {
                            arg.field("value").unwrap_or(*arg)
                        };
                        value.kind() == kinds::IDENTIFIER && syntax::text(value, src) == name
                    })
                })
        };
        out.extend(idx.within(func, kinds::CALL).iter().copied().filter(passes));
    }
    out.sort_by_key(|c| c.start_byte());
    out.dedup_by_key(|c| c.id());
    out
}

fn check(cx: &mut Ctx<'_>) {
    let Some(new_file) = cx.file() else {
        return;
    };
    let new = Side {
        idx: new_file.index(),
        src: new_file.text(),
    };
    caller_figure_preferred(cx, new);
    for call in candidate_calls(cx, new.idx, new.src) {
        let pays = super::pays(cx, call, new.src) || super::hands_a_payment(cx, call, new.src);
        // A payment record built (`Payment(amount=...)`) is charged later for what it says:
        // asked only whether that is what is owed.
        let record = !pays && builds_payment_record(call, new.src);
        if !pays && !record {
            continue;
        }
        // Only now: most files have no touched payment call, and need no old tree.
        let old = cx.other.get().map(|old_file| Side {
            idx: old_file.index(),
            src: old_file.text(),
        });
        let before = old.and_then(|old| Some((counterpart(call, new, old)?, old)));
        let changed_here = before.is_none_or(|(before, old)| {
            syntax::normalized(before, old.src) != syntax::normalized(call, new.src)
        });
        if let Some(owed) = not_what_is_owed(call, new, cx.vocab)
            && changed_here
        {
            report_not_owed(cx, call, new, owed);
            continue;
        }
        if record {
            continue;
        }
        if let Some(overridden) = overridable(call, new, cx.vocab)
            // Charged the same way before: not this change's doing.
            && before.is_none_or(|(before, old)| {
                syntax::normalized(before, old.src) != syntax::normalized(call, new.src)
            })
        {
            report_overridable(cx, call, new, overridden);
            continue;
        }
        let Some((before, old)) = before else {
            continue;
        };
        let moved = moved_arguments(call, before, new, old, cx.vocab);
        if moved.is_empty() {
            continue;
        }
        report(cx, call, new, &moved);
    }
}

/// Whether `overridable` reads `call`: PAY041 leaves it to this rule.
pub(super) fn overridable_call(
    call: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &str,
    vocab: &Vocabulary,
) -> bool {
    overridable(call, Side { idx, src }, vocab).is_some()
}

/// A money argument the caller may set over the stored one: `amount_cents or
/// self.amount_cents`, `amount if amount is not None else order.total` (itself, or a local set
/// so before the call), where the first is a parameter of the function and the other is
/// stored. As `(what is charged, the stored value, the parameter)`.
fn overridable(
    call: Node<'_>,
    side: Side<'_>,
    vocab: &Vocabulary,
) -> Option<(String, String, String)> {
    // A refund, a capture or a release of part of a payment takes its amount from the caller
    // by design (`refund(amount=None)` refunds in full); a charge does not.
    let by_part = ["refund", "capture", "void", "release", "reverse", "cancel"];
    let names = [
        syntax::callee_name(call, side.src).to_ascii_lowercase(),
        side.idx
            .enclosing(call, kinds::FUNCTION_DEFINITION)
            .map(|f| syntax::function_name(f, side.src).to_ascii_lowercase())
            .unwrap_or_default(),
    ];
    if names.iter().any(|n| by_part.iter().any(|w| n.contains(w))) {
        return None;
    }
    let func = side.idx.enclosing(call, kinds::FUNCTION_DEFINITION)?;
    let params = super::parameters(func, side.src);
    let money = syntax::keyword_args(call, side.src)
        .into_iter()
        .filter(|(name, _)| vocab.is_money_argument(name))
        .map(|(_, value)| value)
        .chain(syntax::positional_args(call));
    money.into_iter().find_map(|value| {
        let value = super::unwrap_conversion(value, side.src);
        let value = if value.kind() == kinds::IDENTIFIER {
            local_value(value, call, side).unwrap_or(value)
        } else {
            value
        };
        // `amount_cents or self.amount_cents`, `amount if amount is not None else order.total`.
        let (given, stored) = super::fallback(value, side.src)?;
        let param = syntax::text(given, side.src);
        let is_param = given.kind() == kinds::IDENTIFIER && params.iter().any(|p| p == param);
        if weighed(func, param, side, |_| true) {
            return None;
        }
        (is_param
            && (is_stored(stored, call, side, vocab) || own_attribute(stored, func, side, vocab)))
        .then(|| {
            (
                syntax::normalized(value, side.src),
                syntax::normalized(stored, side.src),
                param.to_string(),
            )
        })
    })
}

/// Objects of the catalogue, whose price is today's, not the one a customer was billed.
const CATALOGUE: &[&str] = &[
    "plan",
    "product",
    "tariff",
    "sku",
    "variant",
    "listing",
    "catalog",
    "catalogue",
    "offer",
];

/// What is being paid when a function holds it: its total is what the customer owes.
const OWED: &[&str] = &["invoice", "order", "cart", "basket", "booking", "bill"];

/// What a charge takes instead of what is owed.
struct NotOwed {
    charged: String,
    /// `subtotal` or `catalogue`.
    kind: &'static str,
    /// The invoice or order the function holds (`invoice`), for a catalogue price.
    entity: Option<String>,
}

/// A charge of a subtotal (`invoice.subtotal_cents`: before tax, shipping and discounts), or of
/// the catalogue's current price (`subscription.plan.price_cents`) in a function that holds the
/// invoice or order being paid. Not for refunds, captures and other operations on part of a
/// payment, which take their amount by design.
fn not_what_is_owed(call: Node<'_>, side: Side<'_>, vocab: &Vocabulary) -> Option<NotOwed> {
    let by_part = ["refund", "capture", "void", "release", "reverse", "cancel"];
    let func = side.idx.enclosing(call, kinds::FUNCTION_DEFINITION)?;
    let names = [
        syntax::callee_name(call, side.src).to_ascii_lowercase(),
        syntax::function_name(func, side.src).to_ascii_lowercase(),
    ];
    if names.iter().any(|n| by_part.iter().any(|w| n.contains(w))) {
        return None;
    }
    syntax::keyword_args(call, side.src)
        .into_iter()
        .filter(|(name, _)| vocab.is_money_argument(name) && !name.contains("currency"))
        .find_map(|(_, value)| {
            let value = super::unwrap_conversion(value, side.src);
            let value = if value.kind() == kinds::IDENTIFIER {
                local_value(value, call, side).unwrap_or(value)
            } else {
                value
            };
            if value.kind() != kinds::ATTRIBUTE {
                return None;
            }
            let text = syntax::normalized(value, side.src);
            let parts: Vec<String> = text.split('.').map(str::to_ascii_lowercase).collect();
            let (last, objects) = parts.split_last()?;
            if last.contains("subtotal") || last.contains("sub_total") {
                return Some(NotOwed {
                    charged: text,
                    kind: "subtotal",
                    entity: None,
                });
            }
            if !last.contains("price") {
                return None;
            }
            // A price of the catalogue, or any price where the function reads what the order
            // owes (`order.amount_due` after a credit): that is the amount to take.
            let entity = if objects.iter().any(|o| CATALOGUE.contains(&o.as_str())) {
                owed_in(func, side)?
            } else {
                due_read(func, side)?
            };
            Some(NotOwed {
                charged: text,
                kind: "catalogue",
                entity: Some(entity),
            })
        })
}

/// The invoice or order whose amount due the function reads (`order.amount_due`,
/// `invoice.amount_remaining`), as its name.
fn due_read(func: Node<'_>, side: Side<'_>) -> Option<String> {
    side.idx
        .within(func, kinds::ATTRIBUTE)
        .iter()
        .find_map(|a| {
            let (object, field) = (a.field("object")?, a.field("attribute")?);
            let due = syntax::name_words(syntax::text(field, side.src))
                .iter()
                .any(|w| {
                    matches!(
                        w.as_str(),
                        "due" | "owed" | "outstanding" | "remaining" | "payable"
                    )
                });
            let object = syntax::text(object, side.src);
            let owed = syntax::name_words(object.rsplit('.').next().unwrap_or(object))
                .iter()
                .any(|w| OWED.contains(&w.as_str()));
            (due && owed).then(|| object.to_string())
        })
}

/// A payment record built: `Payment(...)`, `Charge.objects.create(...)`, `PaymentAttempt(...)`;
/// not a refund's.
fn builds_payment_record(call: Node<'_>, src: &str) -> bool {
    let callee = syntax::callee(call, src);
    let words = syntax::name_words(callee);
    let built = super::builds_a_class(callee) || words.iter().any(|w| w == "create");
    built
        && words
            .iter()
            .any(|w| matches!(w.as_str(), "payment" | "charge" | "debit"))
        && !words.iter().any(|w| w == "refund")
}

/// The invoice or order a function holds: a parameter or a local named for one (`invoice`,
/// `order`, `renewal_invoice`).
fn owed_in(func: Node<'_>, side: Side<'_>) -> Option<String> {
    let owed = |name: &str| {
        name.to_ascii_lowercase()
            .split('_')
            .any(|w| OWED.contains(&w))
    };
    super::parameters(func, side.src)
        .into_iter()
        .find(|p| owed(p))
        .or_else(|| {
            side.idx
                .within(func, kinds::ASSIGNMENT)
                .iter()
                .filter_map(|a| a.field("left"))
                .filter(|l| l.kind() == kinds::IDENTIFIER)
                .map(|l| syntax::text(l, side.src).to_string())
                .find(|n| owed(n))
        })
}

/// A finding on a payment call, with the call and its function named.
fn report_call<'c>(
    cx: &'c mut Ctx<'_>,
    call: Node<'_>,
    new: Side<'_>,
) -> &'c mut crate::review::Finding {
    let function = enclosing_qualname(call, new);
    // A payment handed to a thread is named by what it hands.
    let callee = syntax::handed_callee(call, new.src)
        .unwrap_or_else(|| syntax::callee(call, new.src))
        .to_string();
    cx.report_lines(
        &RULE,
        syntax::lines(call),
        syntax::normalized(call, new.src),
    )
    .arg("callee", callee)
    .arg("function", function)
}

fn report_not_owed(cx: &mut Ctx<'_>, call: Node<'_>, new: Side<'_>, owed: NotOwed) {
    let finding = report_call(cx, call, new)
        .arg("charged", owed.charged)
        .arg(owed.kind, "yes");
    if let Some(entity) = owed.entity {
        finding.arg("entity", entity);
    }
    finding
        .note("not_owed")
        .severity(crate::review::Severity::Important);
}

/// `self.amount_cents` in a method of an entity's class (`Order.pay_one_click`).
fn own_attribute(value: Node<'_>, func: Node<'_>, side: Side<'_>, vocab: &Vocabulary) -> bool {
    super::entity_object(value, side.src) == Some("self")
        && side
            .idx
            .enclosing(func, kinds::CLASS_DEFINITION)
            .and_then(|c| c.field("name"))
            .is_some_and(|n| vocab.is_entity(syntax::text(n, side.src)))
}

/// `fare = tariff.fare(...)`, then `if shown_fare is not None and shown_fare != fare: fare =
/// shown_fare`: the amount the function works out gives way to a parameter whenever the two
/// differ, so the caller (an app's body, a task's payload) decides what is charged. Only in
/// lines the change adds, for a money name the function then hands on or pays with.
fn caller_figure_preferred(cx: &mut Ctx<'_>, new: Side<'_>) {
    let (idx, src) = (new.idx, new.src);
    for &branch in idx.all(kinds::IF_STATEMENT) {
        let (first, last) = syntax::lines(branch);
        if !cx.touches_added(first, last) {
            continue;
        }
        let (Some(condition), Some(body)) =
            (branch.field("condition"), branch.field("consequence"))
        else {
            continue;
        };
        let Some((name, param)) = syntax::statements(body)
            .iter()
            .filter_map(|s| s.named_child(0))
            .find_map(|a| owed_taken_from_a_name(a, src))
        else {
            continue;
        };
        let cond = syntax::text(condition, src);
        if !cond.contains("!=") || !syntax::has_word(cond, name) || !syntax::has_word(cond, param) {
            continue;
        }
        let Some(func) = idx.enclosing(branch, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        if !super::parameters(func, src).iter().any(|p| p == param) {
            continue;
        }
        // Worked out before, from something other than the parameter.
        let Some(priced) = idx
            .within(func, kinds::ASSIGNMENT)
            .iter()
            .copied()
            .find(|a| {
                a.end_byte() <= branch.start_byte()
                    && a.field("left")
                        .is_some_and(|l| syntax::text(l, src) == name)
                    && a.field("right")
                        .is_some_and(|r| !syntax::has_word(syntax::text(r, src), param))
            })
        else {
            continue;
        };
        // Then handed on: to a write or a later step (`fare=fare`, `min(fare, ride.deposit)`).
        // A payment made with it in the function is PAY041's and `overridable`'s to read.
        let after = src.get(branch.end_byte()..func.end_byte()).unwrap_or("");
        let paid_here = idx
            .within(func, kinds::CALL)
            .iter()
            .any(|c| c.start_byte() > branch.end_byte() && super::pays(cx, *c, src));
        if !syntax::has_word(after, name)
            || paid_here
            || super::caller_amount_over_stored::reports_kept(cx, idx, func, src)
        {
            continue;
        }
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, branch)
            .arg("function", function.clone())
            .arg("name", name.to_string())
            .arg("param", param.to_string())
            .arg("priced", syntax::normalized(priced, src))
            .arg("priced_line", syntax::lines(priced).0.to_string())
            .note("preferred");
        finding.function = function;
    }
}

/// `fare = shown_fare`: a name of what is owed set from another name, as `(owed, other)`.
fn owed_taken_from_a_name<'s>(assignment: Node<'_>, src: &'s str) -> Option<(&'s str, &'s str)> {
    if assignment.kind() != kinds::ASSIGNMENT {
        return None;
    }
    let left = assignment
        .field("left")
        .filter(|l| l.kind() == kinds::IDENTIFIER)?;
    let right = assignment
        .field("right")
        .filter(|r| r.kind() == kinds::IDENTIFIER)?;
    let name = syntax::text(left, src);
    super::price_from_client::money_slot(name).then(|| (name, syntax::text(right, src)))
}

fn report_overridable(
    cx: &mut Ctx<'_>,
    call: Node<'_>,
    new: Side<'_>,
    (charged, stored, param): (String, String, String),
) {
    report_call(cx, call, new)
        .arg("charged", charged)
        .arg("stored", stored)
        .arg("param", param)
        .note("overridable");
}

fn report(cx: &mut Ctx<'_>, call: Node<'_>, new: Side<'_>, moved: &[Moved]) {
    // From the `amount = ...` the change made, when that comes first.
    let first = moved
        .iter()
        .map(|m| m.line)
        .min()
        .unwrap_or(u32::MAX)
        .min(syntax::lines(call).0);
    let last = moved
        .iter()
        .map(|m| m.line)
        .max()
        .unwrap_or(first)
        .max(first);
    let join = |old: bool| {
        moved
            .iter()
            .map(|m| {
                let value = if old { &m.old } else { &m.new };
                match &m.via {
                    Some(via) => format!("`{value}` (as `{via}`)"),
                    None => format!("`{value}`"),
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let function = enclosing_qualname(call, new);
    let callee = syntax::callee(call, new.src).to_string();
    let (old, new_values) = (join(true), join(false));
    cx.report_lines(&RULE, (first, last), syntax::normalized(call, new.src))
        .arg("callee", callee.clone())
        .arg("old", old.clone())
        .arg("new", new_values.clone())
        .arg("function", function.clone());
    cx.ask(
        "pay-amount-source",
        vec![
            ("function", function),
            ("callee", callee),
            ("old", old),
            ("new", new_values),
        ],
    );
}

fn enclosing_qualname(node: Node<'_>, side: Side<'_>) -> String {
    side.idx
        .enclosing(node, kinds::FUNCTION_DEFINITION)
        .map(|f| facts::qualname(f, side.idx, side.src))
        .unwrap_or_default()
}

/// The same call in the old version: same callee name in the function of the same qualified
/// name, matched by its rank among such calls.
fn counterpart<'o>(call: Node<'_>, new: Side<'_>, old: Side<'o>) -> Option<Node<'o>> {
    let name = syntax::callee_name(call, new.src);
    let function = enclosing_qualname(call, new);
    let rank = new
        .idx
        .all(kinds::CALL)
        .iter()
        .filter(|c| c.start_byte() < call.start_byte())
        .filter(|c| syntax::callee_name(**c, new.src) == name)
        .filter(|c| enclosing_qualname(**c, new) == function)
        .count();
    old.idx
        .all(kinds::CALL)
        .iter()
        .filter(|c| syntax::callee_name(**c, old.src) == name)
        .filter(|c| enclosing_qualname(**c, old) == function)
        .nth(rank)
        .copied()
}

/// Money arguments (by keyword, or by position when the old value was an amount-like attribute)
/// that went from a stored entity to a value the caller supplies.
fn moved_arguments(
    call: Node<'_>,
    before: Node<'_>,
    new: Side<'_>,
    old: Side<'_>,
    vocab: &Vocabulary,
) -> Vec<Moved> {
    // The old value, the new one, and the local dict the new one goes through.
    let mut pairs: Vec<(Node<'_>, Node<'_>, Option<String>)> = Vec::new();
    for (name, value) in syntax::keyword_args(call, new.src) {
        if !vocab.is_money_argument(name) {
            continue;
        }
        if let Some(was) = syntax::keyword_arg(before, name, old.src) {
            pairs.push((was, value, None));
        }
    }
    let old_positional = syntax::positional_args(before);
    for (was, value) in old_positional.iter().zip(syntax::positional_args(call)) {
        let was_money = super::unwrap_conversion(*was, old.src)
            .field("attribute")
            .is_some_and(|a| vocab.is_money_argument(syntax::text(a, old.src)));
        if was_money {
            pairs.push((*was, value, None));
        }
    }
    // Money inside a dict argument, matched by its keys: `Payment.create({"amount": {"value":
    // str(order.total), ...}})`, `mollie.payments.create({"amount": {"value": f"{total:.2f}"}})`.
    let old_dicts = dict_args(before, old, vocab);
    for DictArg { at, leaves, local } in dict_args(call, new, vocab) {
        let Some(was_leaves) = old_dicts.iter().find(|d| d.at == at).map(|d| &d.leaves) else {
            continue;
        };
        for (path, value) in leaves {
            if let Some(&(_, was)) = was_leaves.iter().find(|(p, _)| *p == path) {
                // `payload["amount"]["value"]`: where in what the call passes it sits.
                let via = local.map(|local| {
                    let keys: String = path
                        .split('.')
                        .skip(1)
                        .map(|k| format!("[\"{k}\"]"))
                        .collect();
                    format!("{local}{keys}")
                });
                pairs.push((was, value, via));
            }
        }
    }
    let mut out = Vec::new();
    for (was, value, in_local) in pairs {
        let (was_text, value_text) = (
            syntax::normalized(was, old.src),
            syntax::normalized(value, new.src),
        );
        if was_text != value_text {
            if is_stored(was, before, old, vocab) && is_supplied(value, call, new, vocab) {
                out.push(Moved {
                    old: was_text,
                    new: value_text,
                    via: in_local,
                    line: syntax::lines(value).1,
                });
            }
            continue;
        }
        // `amount=amount` in both, with `amount = invoice.total` become `amount =
        // payload["amount"]` above it.
        let (Some(was_set), Some(value_set)) =
            (local_value(was, before, old), local_value(value, call, new))
        else {
            continue;
        };
        if syntax::normalized(was_set, old.src) != syntax::normalized(value_set, new.src)
            && is_stored(was_set, before, old, vocab)
            && is_supplied(value_set, call, new, vocab)
        {
            out.push(Moved {
                old: syntax::normalized(was_set, old.src),
                new: syntax::normalized(value_set, new.src),
                via: Some(value_text),
                line: syntax::lines(value_set).0,
            });
        } else if let Some(guard) = overridden_by_parameter(value, value_set, call, new)
            && !is_parameter_of(before, &value_text, old)
            && is_stored(was_set, before, old, vocab)
        {
            // `amount = order.total` kept, but only `if amount is None`: a parameter of that
            // name, new with the change, now wins when the caller passes it.
            out.push(Moved {
                old: syntax::normalized(was_set, old.src),
                new: value_text,
                via: None,
                line: syntax::lines(guard).0,
            });
        }
    }
    out
}

/// The dicts a call passes, each with where: its position (`#0`), keyword or `**`. A dict
/// literal, or a name the function last set to one before the call (`payload = {...}`, then
/// `Payment.create(payload)`, `requests.post(url, json=payload)`, `create(**params)`).
fn dict_args<'t>(call: Node<'t>, side: Side<'t>, vocab: &Vocabulary) -> Vec<DictArg<'t>> {
    let dict = |at: String, arg: Node<'t>| {
        if arg.kind() != kinds::IDENTIFIER {
            return dict_leaves(arg, side.src, vocab).map(|leaves| DictArg {
                at,
                leaves,
                local: None,
            });
        }
        let set = local_value(arg, call, side)?;
        let mut leaves = dict_leaves(set, side.src, vocab)?;
        let local = syntax::text(arg, side.src);
        keys_set_after(&mut leaves, local, set.end_byte(), call, side, vocab);
        Some(DictArg {
            at,
            leaves,
            local: Some(local),
        })
    };
    let mut out = Vec::new();
    for (i, arg) in syntax::positional_args(call).into_iter().enumerate() {
        let found = if arg.kind() == kinds::DICTIONARY_SPLAT {
            arg.named_child(0).and_then(|a| dict("**".to_string(), a))
        } else {
            dict(format!("#{i}"), arg)
        };
        out.extend(found);
    }
    for (k, v) in syntax::keyword_args(call, side.src) {
        out.extend(dict(k.to_string(), v));
    }
    out
}

/// Money values of a dict, each with its path of keys (`.amount.value`).
type Leaves<'t> = Vec<(String, Node<'t>)>;

/// A dict a call passes (see `dict_args`).
struct DictArg<'t> {
    /// Its position (`#0`), keyword or `**`.
    at: String,
    /// Its money values (`money_leaves`).
    leaves: Leaves<'t>,
    /// The local it was set to, when the call passes a name.
    local: Option<&'t str>,
}

/// The money values of a dict literal or a `dict(...)` call; `None` for anything else.
fn dict_leaves<'t>(node: Node<'t>, src: &str, vocab: &Vocabulary) -> Option<Leaves<'t>> {
    match node.kind() {
        kinds::DICTIONARY => Some(money_leaves(node, src, vocab)),
        kinds::CALL if syntax::callee(node, src) == "dict" => {
            Some(dict_leaves_of_call(node, src, vocab))
        }
        _ => None,
    }
}

/// The money values `dict(...)` or `x.update(...)` is given: its keywords, and the keys of a
/// dict literal it is passed.
fn dict_leaves_of_call<'t>(call: Node<'t>, src: &str, vocab: &Vocabulary) -> Leaves<'t> {
    let mut out: Leaves<'t> = Vec::new();
    for arg in syntax::positional_args(call) {
        if arg.kind() == kinds::DICTIONARY {
            out.extend(leaves_under(arg, "", false, src, vocab));
        }
    }
    for (key, value) in syntax::keyword_args(call, src) {
        let path = format!(".{key}");
        let money = vocab.is_money_argument(key);
        out.extend(leaves_under(value, &path, money, src, vocab));
    }
    out
}

/// The money values of `value` put at `path`: itself when the path names money, else what a
/// dict literal in it holds under money keys.
fn leaves_under<'t>(
    value: Node<'t>,
    path: &str,
    money: bool,
    src: &str,
    vocab: &Vocabulary,
) -> Leaves<'t> {
    if value.kind() == kinds::DICTIONARY {
        return money_leaves_at(value, path, money, src, vocab);
    }
    if money {
        return vec![(path.to_string(), value)];
    }
    Vec::new()
}

/// Keys the function sets on `local` between its assignment (ending at `from`) and the call,
/// over what the assignment put there: `params["amount"] = ...`, `params.update(amount=...)`.
fn keys_set_after<'t>(
    leaves: &mut Leaves<'t>,
    local: &str,
    from: usize,
    call: Node<'_>,
    side: Side<'t>,
    vocab: &Vocabulary,
) {
    let Some(func) = side.idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
        return;
    };
    let between = |n: &Node<'_>| n.start_byte() >= from && n.end_byte() <= call.start_byte();
    // Each write: where it is, the paths it sets, the money it puts there.
    let mut writes: Vec<(usize, Vec<String>, Leaves<'t>)> = Vec::new();
    for &assignment in side
        .idx
        .within(func, kinds::ASSIGNMENT)
        .iter()
        .filter(|a| between(a))
    {
        let (Some(left), Some(right)) = (assignment.field("left"), assignment.field("right"))
        else {
            continue;
        };
        if left.kind() != kinds::SUBSCRIPT {
            continue;
        }
        let Some((root, path)) = key_path(left, side.src) else {
            continue;
        };
        if root != local {
            continue;
        }
        let money = path.split('.').any(|k| vocab.is_money_argument(k));
        let set = leaves_under(right, &path, money, side.src, vocab);
        writes.push((assignment.start_byte(), vec![path], set));
    }
    for &update in side
        .idx
        .within(func, kinds::CALL)
        .iter()
        .filter(|c| between(c))
    {
        if money_update(update, side.src, vocab) != Some(local) {
            continue;
        }
        let set = dict_leaves_of_call(update, side.src, vocab);
        // `update` replaces whole keys: `update(amount={"value": ...})` drops the old
        // `amount`'s currency too.
        let mut paths: Vec<String> = set.iter().map(|(p, _)| top_key(p).to_string()).collect();
        paths.dedup();
        writes.push((update.start_byte(), paths, set));
    }
    writes.sort_by_key(|w| w.0);
    for (_, paths, set) in writes {
        // A key set again replaces what was under it.
        leaves.retain(|(p, _)| {
            !paths.iter().any(|w| {
                p == w
                    || p.strip_prefix(w.as_str())
                        .is_some_and(|r| r.starts_with('.'))
            })
        });
        leaves.extend(set);
    }
}

/// `.amount` of `.amount.value`.
fn top_key(path: &str) -> &str {
    let end = path
        .get(1..)
        .and_then(|rest| rest.find('.'))
        .map_or(path.len(), |i| i + 1);
    path.get(..end).unwrap_or(path)
}

/// How deep `money_leaves` looks into nested dicts.
const MAX_DICT_DEPTH: usize = 4;

/// The values of a dict literal under a money key, or under a dict that is one
/// (`{"amount": {"value": ..., "currency": ...}}`), each with its path of keys.
fn money_leaves<'t>(dict: Node<'t>, src: &str, vocab: &Vocabulary) -> Leaves<'t> {
    money_leaves_at(dict, "", false, src, vocab)
}

/// `money_leaves` of a dict put at `path`, under money already when `money`.
fn money_leaves_at<'t>(
    dict: Node<'t>,
    path: &str,
    money: bool,
    src: &str,
    vocab: &Vocabulary,
) -> Leaves<'t> {
    let mut out = Vec::new();
    let mut pending = vec![(dict, path.to_string(), money, 0)];
    while let Some((node, path, money, depth)) = pending.pop() {
        for pair in crate::python::named_children(node) {
            let (Some(k), Some(v)) = (pair.field("key"), pair.field("value")) else {
                continue;
            };
            if pair.kind() != kinds::PAIR || k.kind() != kinds::STRING {
                continue;
            }
            let key = syntax::text(k, src).trim_matches(['"', '\'']);
            let path = format!("{path}.{key}");
            let money = money || vocab.is_money_argument(key);
            if v.kind() == kinds::DICTIONARY && depth < MAX_DICT_DEPTH {
                pending.push((v, path, money, depth + 1));
            } else if money {
                out.push((path, v));
            }
        }
    }
    out
}

/// What a name passed to `call` was last set to in its function before the call.
fn local_value<'t>(value: Node<'_>, call: Node<'_>, side: Side<'t>) -> Option<Node<'t>> {
    if value.kind() != kinds::IDENTIFIER {
        return None;
    }
    let func = side.idx.enclosing(call, kinds::FUNCTION_DEFINITION)?;
    let name = syntax::text(value, side.src);
    side.idx
        .assigned_before(Some(func), name, call.start_byte(), side.src)
}

/// The `if` that keeps the stored value for a name only when a parameter of that name is
/// missing: `if amount_cents is None: amount_cents = order.total`, `if not amount: ...`.
fn overridden_by_parameter<'t>(
    value: Node<'_>,
    value_set: Node<'_>,
    call: Node<'_>,
    side: Side<'t>,
) -> Option<Node<'t>> {
    let name = syntax::text(value, side.src);
    let func = side.idx.enclosing(call, kinds::FUNCTION_DEFINITION)?;
    if !super::parameters(func, side.src).iter().any(|p| p == name) {
        return None;
    }
    let guard = side.idx.enclosing(value_set, kinds::IF_STATEMENT)?;
    if guard.start_byte() < func.start_byte() {
        return None;
    }
    let condition = syntax::text(guard.field("condition")?, side.src);
    let reads = condition
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == name);
    if !reads
        || !(condition.contains("None") || condition.trim_start().starts_with("not "))
        || guard.field("alternative").is_some()
    {
        return None;
    }
    // The guard's own `amount is None` is no weighing.
    let checked = weighed(func, name, side, |c| {
        !syntax::contains(guard, c) || c.start_byte() > value_set.end_byte()
    });
    (!checked).then_some(guard)
}

/// Whether `func` compares `name` with a record's value (`elif amount > order.refundable:`, `if
/// amount != invoice.total: raise`, `0 < deposit <= self.amount_cents`), in the comparisons
/// `counted` keeps: the caller's amount is checked against the record, which is the point of
/// taking one.
fn weighed(func: Node<'_>, name: &str, side: Side<'_>, counted: impl Fn(Node<'_>) -> bool) -> bool {
    side.idx
        .within(func, kinds::COMPARISON_OPERATOR)
        .iter()
        .filter(|c| counted(**c))
        .any(|c| {
            let text = syntax::text(*c, side.src);
            text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|w| w == name)
                && (text.contains('.') || text.contains('['))
        })
}

/// Whether `name` is a parameter of the function around `call`.
fn is_parameter_of(call: Node<'_>, name: &str, side: Side<'_>) -> bool {
    side.idx
        .enclosing(call, kinds::FUNCTION_DEFINITION)
        .is_some_and(|f| super::parameters(f, side.src).iter().any(|p| p == name))
}

/// `order.amount`, `self.invoice.total`, or an attribute or a key of something the function
/// loaded (`p = Payment.objects.get(...)`, `p = repo.get_payment(...)`, `order = await
/// self._orders.load(order_id)`, then `order["total"]`).
fn is_stored(value: Node<'_>, call: Node<'_>, side: Side<'_>, vocab: &Vocabulary) -> bool {
    let value = super::unwrap_conversion(value, side.src);
    // `order["amount_cents"]` of an order loaded as a dict (a Redis hash, a JSON document).
    let keyed = || key_path(value, side.src).map(|(root, _)| root);
    let Some(object) = super::entity_object(value, side.src).or_else(keyed) else {
        return false;
    };
    vocab.is_entity(object) || loaded_in_function(object, call, side)
}

/// `name = get_x(...)`, `name = X.objects.get(...)`, `name = await repo.load(...)` before the
/// call, in the same function.
fn loaded_in_function(name: &str, call: Node<'_>, side: Side<'_>) -> bool {
    let Some(func) = side.idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
        return false;
    };
    side.idx
        .within(func, kinds::ASSIGNMENT)
        .iter()
        .filter(|a| a.start_byte() < call.start_byte())
        .filter(|a| {
            a.field("left")
                .is_some_and(|l| syntax::text(l, side.src) == name)
        })
        .filter_map(|a| a.field("right"))
        .any(|right| {
            let right = if right.kind() == kinds::AWAIT {
                right.named_child(0).unwrap_or(right)
            } else {
                right
            };
            right.kind() == kinds::CALL && is_loader(right, side.src)
        })
}

fn is_loader(call: Node<'_>, src: &str) -> bool {
    let name = syntax::callee_name(call, src);
    let callee = syntax::callee(call, src);
    ["get", "load", "fetch", "find", "retrieve", "select"]
        .iter()
        .any(|p| name.starts_with(p))
        || callee.contains(".objects.")
}

/// A parameter of the function, request or task data, or a local taken from them; never an
/// entity's own attribute.
fn is_supplied(value: Node<'_>, call: Node<'_>, side: Side<'_>, vocab: &Vocabulary) -> bool {
    let value = super::unwrap_conversion(value, side.src);
    let Some(func) = side.idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
        return false;
    };
    let params = super::parameters(func, side.src);
    let supplied_root = |node: Node<'_>| {
        let root = root_name(syntax::text(node, side.src));
        !vocab.is_entity(root)
            && (params.iter().any(|p| p == root) || INBOUND.contains(&root))
            && !(node.kind() == kinds::ATTRIBUTE && vocab.is_entity(last_object(node, side.src)))
    };
    if supplied_root(value) {
        return true;
    }
    // `amount = request.json["amount"]` a few lines up.
    if value.kind() != kinds::IDENTIFIER {
        return false;
    }
    let name = syntax::text(value, side.src);
    side.idx
        .within(func, kinds::ASSIGNMENT)
        .iter()
        .filter(|a| a.start_byte() < call.start_byte())
        .filter(|a| {
            a.field("left")
                .is_some_and(|l| syntax::text(l, side.src) == name)
        })
        .filter_map(|a| a.field("right"))
        .any(|right| {
            let right = super::unwrap_conversion(right, side.src);
            right.kind() != kinds::IDENTIFIER && supplied_root(right)
        })
}

/// `request` in `request.json["amount"]`, `amount` in `amount`.
fn root_name(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    text.get(..end).unwrap_or("")
}

fn last_object<'s>(attribute: Node<'_>, src: &'s str) -> &'s str {
    super::entity_object(attribute, src).unwrap_or("")
}
