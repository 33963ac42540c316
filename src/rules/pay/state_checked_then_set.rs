//! PAY022 state-checked-then-set: a function reads a record's state, turns a repeat away on it
//! (`if member.status is CANCELLED: raise AlreadyCancelled`), moves money (a refund written, a
//! payment sent without a key, a balance changed), and writes the new state only later, on a
//! row it never locked. Two requests at once (a double tap, a client's retry after a timeout)
//! both read the old state, both pass, and both refund.
//!
//! Left alone: a row locked for the check (`select_for_update`, `with_for_update`) or a claim
//! taken after it (`cache.add`, `SET NX`), a state moved by a conditional update whose count is
//! checked, and a payment sent with an idempotency key or a reference the provider
//! deduplicates on.
use tree_sitter::Node;

use super::balance_reset_after_payout::holds_rows;
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY022",
    doc: include_str!("../../../rules/pay/PAY022.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a test of a state in code that refunds or pays.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(&[".status", ".state"])
        && (s.mentions(&["refund", "Refund", "payout", "Payout", "credit", "balance"])
            || s.facts.payment_module
            || s.facts.functions.iter().any(|f| f.payment))
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    // As the gate: a test's state checks guard nothing.
    if cx.facts.is_some_and(|f| f.is_test) {
        return;
    }
    let mut reported: Vec<usize> = Vec::new();
    for (stmt, condition) in crate::rules::pay::leaving_ifs(idx, src) {
        let Some((record, field)) = state_tested(condition, src) else {
            continue;
        };
        let Some(func) = idx.enclosing(stmt, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        if reported.contains(&func.id()) {
            continue;
        }
        // Loaded in the function: a record handed in may be locked by the caller.
        let Some(load) = idx
            .assigned_before(Some(func), record, stmt.start_byte(), src)
            .filter(|v| crate::rules::idem::strip_await(*v).kind() == kinds::CALL)
        else {
            continue;
        };
        // Under a lock the check holds, unless the record was read before the lock was taken
        // and not again after it: the check then sees the state from before the lock.
        // `with locks.hold(reference, ttl_ms=...):` around the read and the check: a lock of
        // the application's own, by a name that says so, serialises them as a row lock would.
        let under_a_lock = idx.within(func, kinds::WITH_STATEMENT).iter().any(|w| {
            syntax::contains(*w, load)
                && syntax::contains(*w, stmt)
                && syntax::names_a_lock(syntax::with_clause(*w, src))
        });
        if under_a_lock {
            continue;
        }
        let stale = if holds_rows(syntax::text(func, src)) {
            match stale_read(idx, func, load, stmt, src) {
                Some(lock) => Some(lock),
                None => continue,
            }
        } else {
            None
        };
        let owned = |n: &Node<'_>| crate::rules::idem::owned_by(idx, *n, Some(func));
        let Some(write) = idx
            .within(func, kinds::ASSIGNMENT)
            .iter()
            .copied()
            .filter(owned)
            .find(|a| {
                a.start_byte() > stmt.end_byte()
                    && a.field("left")
                        .is_some_and(|l| syntax::text(l, src) == format!("{record}.{field}"))
            })
        else {
            continue;
        };
        // A claim one racer wins (`cache.add(...)`, `set(..., nx=True)`) after the check
        // serialises what follows as a row lock would.
        let claimed = idx.within(func, kinds::CALL).iter().any(|&c| {
            c.start_byte() > stmt.end_byte()
                && crate::rules::idem::cache_call(c, cx)
                    .is_some_and(|c| c.op == crate::rules::idem::Op::AtomicWrite)
        });
        if claimed {
            continue;
        }
        let money = idx
            .within(func, kinds::CALL)
            .iter()
            .copied()
            .filter(owned)
            .find(|c| c.start_byte() > stmt.end_byte() && moves_money(cx, *c, src));
        // Or the money moves later, under a key this claim makes (`uuid.uuid4()` for a new
        // settlement): two claims that both pass make two keys, and both are paid.
        let fresh = || {
            idx.within(func, kinds::CALL)
                .iter()
                .copied()
                .filter(owned)
                .find(|c| c.start_byte() > write.end_byte() && makes_a_key(*c, src))
        };
        let (money, shown, note) = match money {
            Some(m) => (m, crate::rules::pay::first_line(m, src), None),
            None => match fresh() {
                Some(f) => (f, syntax::normalized(f, src), Some("fresh_key")),
                None => continue,
            },
        };
        reported.push(func.id());
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, stmt)
            .arg("function", function.clone())
            .arg("state", format!("{record}.{field}"))
            .arg("write_line", syntax::lines(write).0.to_string())
            .arg("money", shown)
            .arg("money_line", syntax::lines(money).0.to_string());
        if let Some(note) = note {
            finding.note(note);
        }
        if let Some(lock) = stale {
            finding
                .arg("record", record.to_string())
                .arg("load_line", syntax::lines(load).0.to_string())
                .arg("lock_line", syntax::lines(lock).0.to_string())
                .note("stale");
        }
        finding.function = function;
    }
}

/// The lock taken after `load` read the record and before `check` tests it, when nothing reads
/// the record again in between (`await wait_lock(session, ORDER, order.id)` with no
/// `session.refresh(order)` after it).
fn stale_read<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    load: Node<'_>,
    check: Node<'_>,
    src: &str,
) -> Option<Node<'t>> {
    // A read that locks (`select_for_update().get(...)`) is fresh under its own lock.
    if holds_rows(syntax::text(load, src)) {
        return None;
    }
    let calls = idx.within(func, kinds::CALL);
    let between =
        |c: &Node<'_>, from: usize| c.start_byte() >= from && c.end_byte() <= check.start_byte();
    let lock = calls
        .iter()
        .copied()
        .find(|c| between(c, load.end_byte()) && takes_lock(*c, src))?;
    let refreshed = calls.iter().any(|c| {
        let name = syntax::callee_name(*c, src);
        between(c, lock.end_byte()) && (name.contains("refresh") || name.contains("reload"))
    });
    (!refreshed).then_some(lock)
}

/// A call that takes a lock: `wait_lock(...)`, `pg_advisory_xact_lock(...)`, `redis.lock(...)`.
pub(super) fn takes_lock(call: Node<'_>, src: &str) -> bool {
    let name = syntax::callee_name(call, src);
    let words = syntax::name_words(name);
    words.iter().any(|w| w == "lock" || w == "advisory")
        && !words.iter().any(|w| w == "unlock" || w == "release")
}

/// Whether this rule speaks of `condition` in `func`, as near as a caller can tell: a state
/// test followed by money moved or a key made. PAY040 leaves such tests to it.
pub(super) fn speaks_of(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    condition: Node<'_>,
) -> bool {
    let src = cx.src();
    state_tested(condition, src).is_some()
        && idx.within(func, kinds::CALL).iter().any(|c| {
            c.start_byte() > condition.end_byte()
                && crate::rules::idem::owned_by(idx, *c, Some(func))
                && (moves_money(cx, *c, src) || makes_a_key(*c, src))
        })
}

/// The record and the field a condition tests a state of: `member.status is
/// MemberStatus.CANCELLED`, `order.state in ("refunded", "cancelled")`.
fn state_tested<'s>(condition: Node<'_>, src: &'s str) -> Option<(&'s str, &'s str)> {
    if condition.kind() != kinds::COMPARISON_OPERATOR {
        return None;
    }
    let left = condition.named_child(0)?;
    if left.kind() != kinds::ATTRIBUTE {
        return None;
    }
    let (object, field) = (left.field("object")?, left.field("attribute")?);
    let field = syntax::text(field, src);
    (object.kind() == kinds::IDENTIFIER && matches!(field, "status" | "state"))
        .then(|| (syntax::text(object, src), field))
}

/// A call that moves money: a payment sent without an idempotency key, a refund, payout or
/// credit written (`Refund.create(...)`, `session.add(Payout(...))`), a balance changed by an
/// expression (`update(balance_pence=F("balance_pence") - amount)`).
/// A call that makes a new random key: `uuid.uuid4()`, `secrets.token_hex(16)`.
fn makes_a_key(call: Node<'_>, src: &str) -> bool {
    matches!(
        syntax::callee_name(call, src),
        "uuid4" | "uuid1" | "uuid7" | "token_hex" | "token_urlsafe" | "ulid" | "new_ulid"
    )
}

pub(super) fn moves_money(cx: &Ctx<'_>, call: Node<'_>, src: &str) -> bool {
    // `raise RefundTooLarge(...)`: an error named for the money, not a record of it.
    if call
        .parent()
        .is_some_and(|p| p.kind() == kinds::RAISE_STATEMENT)
    {
        return false;
    }
    if crate::rules::pay::pays(cx, call, src)
        && crate::rules::pay::passes_money(call, src, cx.vocab)
    {
        return !keyed(call, src);
    }
    let callee = syntax::callee(call, src);
    let words = syntax::name_words(callee);
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    let built = crate::rules::pay::builds_a_class(callee);
    let record = has(&[
        "refund",
        "refunds",
        "payout",
        "payouts",
        "credit",
        "credits",
        "withdrawal",
        "withdrawals",
        "transfer",
        "transfers",
    ]) && (has(&["create", "insert", "add"]) || built);
    // An entry of the books with an amount (`LedgerEntry.objects.create(amount_minor=-debit.
    // amount_minor, kind=PAYOUT_REVERSAL)`): a balance credited or debited.
    let booked = has(&["ledger", "journal", "posting", "postings"])
        && (has(&["create", "insert", "add"]) || built)
        && crate::rules::pay::passes_money(call, src, cx.vocab);
    let balance = callee.ends_with("update")
        && syntax::keyword_args(call, src).iter().any(|(k, v)| {
            syntax::name_words(k).iter().any(|w| w == "balance")
                && syntax::text(*v, src).starts_with("F(")
        });
    record || booked || balance
}

/// A payment the provider tells apart by a key or its own reference (`reference=` of Paystack):
/// deduplicated there, whoever sends it twice.
pub(super) fn keyed(call: Node<'_>, src: &str) -> bool {
    syntax::contains_lowercase(syntax::text(call, src), "idempotency")
        || syntax::keyword_args(call, src)
            .iter()
            .any(|(k, _)| crate::rules::idem::key_made_per_attempt::dedup_handle(k))
}
