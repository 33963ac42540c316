//! PAY045 paid-inside-the-records-transaction: a payment sent to the provider from inside the
//! database transaction that creates the record it is made for (`with transaction.atomic():
//! refund = Refund.objects.create(...)` then `submit_refund(refund.pk)`, which sends the
//! record's idempotency key). If anything after the provider's answer fails, or the commit
//! itself does, the transaction rolls back: the record and the key it holds are gone, while the
//! provider has moved the money. The next attempt creates a new record with a new key, and the
//! money moves twice.
//!
//! Read in one function: a block that opens a transaction (`transaction.atomic()`,
//! `session.begin()`, `conn.transaction()`, or a function under `@transaction.atomic`), a
//! record created in it and bound to a name, and after it in the same block a call that pays
//! and is handed that record (by name or through its attributes): a payment by its name, a
//! call that carries an idempotency key, or a function of the change that pays under one.
//! Left alone: a record committed before the call, and a call handed nothing of the new record.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY045",
    doc: include_str!("../../../rules/pay/PAY045.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is in code, not a test, that opens a transaction.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && s.mentions(&["atomic", ".begin(", "transaction("])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    let mut blocks: Vec<(Node<'_>, String)> = Vec::new();
    for &with in idx.all(kinds::WITH_STATEMENT) {
        let clause = syntax::with_clause(with, src);
        if syntax::opens_a_transaction(clause)
            && let Some(body) = with.field("body")
        {
            blocks.push((
                body,
                clause.split_whitespace().collect::<Vec<_>>().join(" "),
            ));
        }
    }
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        let atomic = idx.decorated(func).is_some_and(|d| {
            syntax::decorators(d)
                .into_iter()
                .any(|dec| syntax::opens_a_transaction(syntax::text(dec, src)))
        });
        if atomic && let Some(body) = func.field("body") {
            blocks.push((body, "@transaction.atomic".to_string()));
        }
    }
    for (block, transaction) in blocks {
        let Some(func) = idx.enclosing(block, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let found = idx
            .within(block, kinds::ASSIGNMENT)
            .iter()
            .find_map(|&made| {
                let record = created_record(idx, block, made, src)?;
                let step = idx.within(block, kinds::CALL).iter().copied().find(|&c| {
                    c.start_byte() > made.end_byte()
                        && crate::rules::err::owned_by(c, func, idx)
                        && c.field("arguments")
                            .is_some_and(|a| syntax::has_word(syntax::text(a, src), record))
                        && pays_under_a_key(cx, c, src)
                })?;
                Some((made, record, step))
            });
        let Some((made, record, step)) = found else {
            continue;
        };
        cx.report(&RULE, step)
            .arg("function", facts::qualname(func, idx, src))
            .arg("step", syntax::callee(step, src).to_string())
            .arg("record", record.to_string())
            .arg("made_line", syntax::lines(made).0.to_string())
            .arg("transaction", transaction);
    }
}

/// The name a record created by `made` is bound to: `refund = Refund.objects.create(...)`, or
/// `payout = Payout(...)` added to the session later in the block (`session.add(payout)`).
fn created_record<'s>(
    idx: &NodeIndex<'_>,
    block: Node<'_>,
    made: Node<'_>,
    src: &'s str,
) -> Option<&'s str> {
    let left = made
        .field("left")
        .filter(|l| l.kind() == kinds::IDENTIFIER)?;
    let right = crate::rules::idem::strip_await(made.field("right")?);
    if right.kind() != kinds::CALL {
        return None;
    }
    let name = syntax::text(left, src);
    let callee = syntax::callee(right, src);
    let last = callee.rsplit('.').next().unwrap_or(callee);
    let created = callee.ends_with("objects.create")
        || last.starts_with(|c: char| c.is_ascii_uppercase())
            && last.contains(|c: char| c.is_ascii_lowercase())
            && idx.within(block, kinds::CALL).iter().any(|c| {
                c.start_byte() > made.end_byte()
                    && syntax::callee_name(*c, src) == "add"
                    && syntax::positional_args(*c)
                        .first()
                        .is_some_and(|a| syntax::text(*a, src) == name)
            });
    created.then_some(name)
}

/// A call to the provider that pays under a key: one that carries an idempotency key, or a
/// function of the change that names one and sends a request, itself or a few calls down
/// (`submit_refund(refund.pk)`, which sends `refund.provider_key`). A write to the service's
/// own ledger (`wallet.debit(...)`) rolls back with the record, and is left alone.
fn pays_under_a_key(cx: &Ctx<'_>, call: Node<'_>, src: &str) -> bool {
    if syntax::keyword_args(call, src)
        .iter()
        .any(|(name, _)| syntax::code_names_idempotency(name))
    {
        return true;
    }
    let name = syntax::callee_name(call, src);
    let sends = |t: &crate::rules::reach::Trait| cx.change.reach(cx.side, name, 3, t).is_some();
    !name.is_empty()
        && cx
            .change
            .functions_named(cx.side, name)
            .any(|(file, f)| !file.is_test && f.mentions_idempotency)
        && (sends(&crate::rules::reach::HTTP) || sends(&crate::rules::reach::SDK))
}
