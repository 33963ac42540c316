//! PAY016 record-written-after-payment: a function checks for a record of the payment
//! (`if await db.payouts.find_one({"_id": ref}): return`), sends the payment, and only then
//! writes the record (`insert_one({"_id": ref, ...})`). Two runs that overlap (a scheduler that
//! fires twice, a retry while the first run is still waiting on the provider) both find nothing
//! and both pay; a run that dies between the payment and the write leaves no record, and the next
//! one pays again.
//!
//! Left alone: a record claimed before the payment (an insert or upsert that a unique key makes
//! fail for the second run), a row locked for the check (`select_for_update`, `with_for_update`),
//! and a payment sent with an idempotency key, which the provider deduplicates.
use tree_sitter::Node;

use crate::python::{NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY016",
    doc: include_str!("../../../rules/pay/PAY016.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a lookup of a record beside a payment.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.facts.functions.iter().any(|f| f.payment)
        && s.mentions(&[
            "find_one(",
            "exists(",
            "scalar(",
            ".get(",
            "get_or_none(",
            "first(",
            "one_or_none(",
            "count_documents(",
        ])
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    // `if existing: return existing`: found, the payment is not made again.
    for (stmt, condition) in super::leaving_ifs(idx, src) {
        let Some(func) = idx.enclosing(stmt, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let Some(store) = looked_up(idx, condition, func, src) else {
            continue;
        };
        let after = |c: &Node<'_>, from: usize| {
            c.start_byte() > from && crate::rules::idem::owned_by(idx, *c, Some(func))
        };
        let calls = idx.within(func, kinds::CALL);
        // `Refund(id=..., amount_minor=...)` builds the record; it pays nothing.
        let Some(pay) = calls.iter().copied().find(|c| {
            after(c, stmt.end_byte())
                && !super::builds_a_class(syntax::callee(*c, src))
                && super::pays(cx, *c, src)
                && super::passes_money(*c, src, cx.vocab)
        }) else {
            continue;
        };
        if sends_a_key(pay, src) {
            continue;
        }
        let written = |c: &Node<'_>| writes(*c, src).is_some_and(|s| s == store);
        let claimed = calls
            .iter()
            .any(|c| after(c, stmt.end_byte()) && c.start_byte() < pay.start_byte() && written(c));
        if claimed {
            continue;
        }
        let Some(write) = calls
            .iter()
            .copied()
            .find(|c| after(c, pay.end_byte()) && written(c))
        else {
            continue;
        };
        if super::balance_reset_after_payout::holds_rows(syntax::text(func, src)) {
            continue;
        }
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, condition)
            .arg("function", function.clone())
            .arg("check", crate::rules::pay::first_line(condition, src))
            .arg("pay", syntax::callee(pay, src).to_string())
            .arg("pay_line", syntax::lines(pay).0.to_string())
            .arg("write", syntax::callee(write, src).to_string())
            .arg("write_line", syntax::lines(write).0.to_string());
        finding.function = function;
    }
}

/// The store a condition looks a record up in: a lookup call in it (`db.payouts.find_one(...)`,
/// `Payout.objects.filter(...).exists()`), or a name it tests that was bound to one before.
fn looked_up(
    idx: &NodeIndex<'_>,
    condition: Node<'_>,
    func: Node<'_>,
    src: &str,
) -> Option<String> {
    let direct = std::iter::once(condition)
        .chain(idx.within(condition, kinds::CALL).iter().copied())
        .filter(|c| c.kind() == kinds::CALL)
        .find_map(|c| reads(c, src));
    if direct.is_some() {
        return direct;
    }
    let name = syntax::text(condition, src)
        .trim_start_matches("not ")
        .trim_end_matches(" is None")
        .trim_end_matches(" is not None")
        .trim();
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let value = idx.assigned_before(Some(func), name, condition.start_byte(), src)?;
    let value = if value.kind() == kinds::AWAIT {
        value.named_child(0)?
    } else {
        value
    };
    (value.kind() == kinds::CALL)
        .then(|| reads(value, src))
        .flatten()
}

/// The store a call reads one record or a count from.
fn reads(call: Node<'_>, src: &str) -> Option<String> {
    let name = syntax::callee_name(call, src);
    // `session.get(Refund, refund_id)`: the model is handed first.
    if name == "get"
        && let Some(model) = syntax::positional_args(call).first()
        && model.kind() == kinds::IDENTIFIER
        && syntax::text(*model, src).starts_with(|c: char| c.is_ascii_uppercase())
    {
        return Some(normal(syntax::text(*model, src)));
    }
    let lookup = matches!(
        name,
        "find_one"
            | "exists"
            | "get_or_none"
            | "first"
            | "one_or_none"
            | "scalar_one_or_none"
            | "scalar"
            | "count_documents"
    );
    if !lookup {
        return None;
    }
    store_of(call, src)
}

/// The store a call writes a record to: `insert_one`, `create`, `session.add(Payout(...))`,
/// `payout.save()`, an upsert.
fn writes(call: Node<'_>, src: &str) -> Option<String> {
    let name = syntax::callee_name(call, src);
    match name {
        "insert_one" | "insert_many" | "insert" | "create" | "get_or_create" | "bulk_create"
        | "replace_one" | "save" => store_of(call, src),
        "update_one" | "find_one_and_update"
            if syntax::keyword_arg(call, "upsert", src)
                .is_some_and(|v| syntax::text(v, src) == "True") =>
        {
            store_of(call, src)
        }
        // `session.add(Refund(...))`, or `session.add(refund)` of a name after its model.
        "add" | "add_all" => {
            let arg = syntax::positional_args(call).into_iter().next()?;
            match arg.kind() {
                kinds::CALL => Some(normal(syntax::callee_name(arg, src))),
                kinds::IDENTIFIER => Some(normal(syntax::text(arg, src))),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `db.payouts` → `payout`, `Payout.objects.filter(...)` → `payout`, `session.scalar(select(
/// Payout)...)` → `payout`: the collection or model, singular and lowercase. `None` for a
/// receiver that names no store (`session`, `self`).
fn store_of(call: Node<'_>, src: &str) -> Option<String> {
    let callee = syntax::callee(call, src);
    if let Some((model, _)) = callee.split_once(".objects") {
        return Some(normal(model.rsplit('.').next().unwrap_or(model)));
    }
    let text = syntax::text(call, src);
    for opener in ["select(", "query("] {
        if let Some((_, rest)) = text.split_once(opener) {
            let model: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !model.is_empty() {
                return Some(normal(&model));
            }
        }
    }
    let (receiver, _) = callee.rsplit_once('.')?;
    let last = receiver.rsplit('.').next().unwrap_or(receiver);
    if last.contains(['(', ')', '[', ']']) {
        return None;
    }
    let store = normal(last);
    (!matches!(
        store.as_str(),
        "db" | "session"
            | "self"
            | "cls"
            | "client"
            | "conn"
            | "connection"
            | "cursor"
            | "cache"
            | "redis"
            | "database"
            | "tx"
            | "transaction"
    ))
    .then_some(store)
}

fn normal(name: &str) -> String {
    let lower = name.replace('_', "").to_ascii_lowercase();
    lower.strip_suffix('s').map(str::to_string).unwrap_or(lower)
}

/// Whether the payment call carries an idempotency key the provider deduplicates by.
fn sends_a_key(pay: Node<'_>, src: &str) -> bool {
    let text = syntax::text(pay, src);
    syntax::IDEMPOTENCY_WORDS
        .iter()
        .any(|w| syntax::contains_lowercase(text, w))
}
