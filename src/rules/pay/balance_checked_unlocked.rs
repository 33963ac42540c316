//! PAY028 balance-checked-unlocked: a function works out what is left (a balance, what is
//! still refundable or available), turns away an amount above it, and then writes the refund,
//! payout or withdrawal, with no lock on the rows the figure is read from. Two requests at once
//! (two support agents, a double tap, two returns of one order) both read the same figure,
//! both pass, and together take more than there was.
//!
//! Left alone: an exclusive lock anywhere in the function or a helper of the file it calls
//! (`with_for_update()`, `select_for_update()`, `FOR UPDATE`, an advisory or cache lock), a
//! caller of the file that locks, a conditional update that does the test in the database
//! (`filter(balance__gte=amount).update(...)`), a serializable transaction, and a figure
//! handed in by the caller. Where the old version locked, PAY025 speaks instead.
use tree_sitter::Node;

use super::balance_reset_after_payout::holds_rows;
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY028",
    doc: include_str!("../../../rules/pay/PAY028.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Words of a name that holds what is left to pay out or refund.
const LEFT: &[&str] = &[
    "balance",
    "refundable",
    "available",
    "remaining",
    "outstanding",
    "capturable",
    "withdrawable",
    "unrefunded",
    "headroom",
];

/// Every finding is a test against what is left, in code that moves money.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && (s.facts.payment_module || s.facts.functions.iter().any(|f| f.payment))
        && s.mentions(LEFT)
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    let mut found: Vec<(Node<'_>, Node<'_>, String, Node<'_>)> = Vec::new();
    for (stmt, condition) in super::leaving_ifs(idx, src) {
        let Some(func) = idx.enclosing(stmt, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        if found.iter().any(|(f, ..)| f.id() == func.id()) {
            continue;
        }
        let Some(left) = what_is_left(idx, func, stmt, condition, src) else {
            continue;
        };
        let func_text = syntax::text(func, src);
        if locks_exclusively(func_text)
            || settled_by_the_database(func_text)
            || super::calls_a_helper_that(idx, func, src, |h| {
                locks_exclusively(syntax::text(h, src))
            })
            || locked_by_a_caller(idx, func, src, locks_exclusively)
            || cx.change.side(cx.side).any(|f| f.serialises_writers)
                && (in_a_transaction(func_text)
                    || locked_by_a_caller(idx, func, src, in_a_transaction))
        {
            continue;
        }
        let Some(money) =
            super::row_lock_removed::money_after_read(cx, idx, func, stmt.end_byte(), src)
        else {
            continue;
        };
        found.push((func, stmt, left, money));
    }
    if found.is_empty() {
        return;
    }
    // The old version's lock, if it had one, is PAY025's to report.
    let old = cx.other.get();
    for (func, stmt, left, money) in found {
        let function = facts::qualname(func, idx, src);
        let locked_before = old.is_some_and(|old| {
            old.index().all(kinds::FUNCTION_DEFINITION).iter().any(|f| {
                facts::qualname(*f, old.index(), old.text()) == function
                    && holds_rows(syntax::text(*f, old.text()))
            })
        });
        if locked_before {
            continue;
        }
        let finding = cx
            .report(&RULE, stmt)
            .arg("function", function.clone())
            .arg("left", left)
            .arg("money", super::first_line(money, src))
            .arg("money_line", syntax::lines(money).0.to_string());
        finding.function = function;
    }
}

/// The figure of what is left that a rejecting `if` compares an amount with (`amount_minor >
/// balance`, `wallet.balance_cents < amount_cents`), when the function read it itself: a name
/// set in it from a call or a sum, or a field of a record it loaded.
fn what_is_left(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    stmt: Node<'_>,
    condition: Node<'_>,
    src: &str,
) -> Option<String> {
    let mut comparisons = idx.within(condition, kinds::COMPARISON_OPERATOR).to_vec();
    if condition.kind() == kinds::COMPARISON_OPERATOR {
        comparisons.push(condition);
    }
    comparisons.into_iter().find_map(|cmp| {
        let op = cmp.child(1).map(|o| o.kind())?;
        if !matches!(op, ">" | "<" | ">=" | "<=") {
            return None;
        }
        let sides = [cmp.named_child(0)?, cmp.named_child(1)?];
        let left = sides
            .iter()
            .copied()
            .find(|s| names_what_is_left(syntax::text(*s, src)))?;
        let amount = sides.iter().copied().find(|s| s.id() != left.id())?;
        if names_what_is_left(syntax::text(amount, src))
            || !names_an_amount(syntax::text(amount, src))
        {
            return None;
        }
        // The record or name the figure is read from, set in the function.
        let root = root_name(left, src)?;
        let value = idx.assigned_before(Some(func), root, stmt.start_byte(), src)?;
        let value = crate::rules::idem::strip_await(value);
        let read_here = matches!(
            value.kind(),
            kinds::CALL | kinds::BINARY_OPERATOR | kinds::SUBSCRIPT | kinds::ATTRIBUTE
        );
        // Worked out of a record handed in (`payment.amount_cents - payment.refunded_cents` of
        // a `payment` parameter): the caller may hold its lock.
        let params = super::parameters(func, src);
        let handed_in = records_read(idx, value, src)
            .iter()
            .any(|r| params.iter().any(|p| p == r));
        (read_here && !handed_in).then(|| syntax::text(left, src).to_string())
    })
}

/// The records a value reads: the objects of its attributes (`payment` of `payment.amount`)
/// and the names handed to its calls (`order` of `refundable_balance(session, order)`), less
/// classes, sessions and ids.
fn records_read<'s>(idx: &NodeIndex<'_>, value: Node<'_>, src: &'s str) -> Vec<&'s str> {
    let objects = idx
        .within(value, kinds::ATTRIBUTE)
        .iter()
        .filter_map(|a| a.field("object"));
    let handed = idx.within(value, kinds::CALL).iter().flat_map(|c| {
        syntax::positional_args(*c)
            .into_iter()
            .chain(syntax::keyword_args(*c, src).into_iter().map(|(_, v)| v))
    });
    let mut out: Vec<&str> = objects
        .chain(handed)
        .filter(|n| n.kind() == kinds::IDENTIFIER)
        .map(|n| syntax::text(n, src))
        .filter(|name| {
            !name.starts_with(|c: char| c.is_ascii_uppercase())
                && !matches!(
                    *name,
                    "self"
                        | "cls"
                        | "session"
                        | "db"
                        | "conn"
                        | "connection"
                        | "cursor"
                        | "tx"
                        | "txn"
                        | "sa"
                        | "func"
                        | "models"
                )
                && !name.ends_with("id")
                && !name.ends_with("pk")
        })
        .collect();
    if value.kind() == kinds::IDENTIFIER {
        out.push(syntax::text(value, src));
    }
    out
}

fn names_what_is_left(text: &str) -> bool {
    syntax::name_words(text)
        .iter()
        .any(|w| LEFT.contains(&w.as_str()))
}

fn names_an_amount(text: &str) -> bool {
    syntax::name_words(text).iter().any(|w| {
        matches!(
            w.as_str(),
            "amount"
                | "cents"
                | "minor"
                | "pence"
                | "paise"
                | "kopecks"
                | "total"
                | "sum"
                | "value"
                | "requested"
        )
    })
}

/// The first name of an expression: `wallet` of `wallet.balance_cents`, `balance` of itself.
fn root_name<'s>(node: Node<'_>, src: &'s str) -> Option<&'s str> {
    let text = syntax::text(node, src);
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    let root = &text[..end];
    (!root.is_empty() && !root.starts_with(|c: char| c.is_ascii_digit())).then_some(root)
}

/// An exclusive lock in code: `holds_rows` read line by line, with comments and shared locks
/// (`with_for_update={"read": True}`, `FOR SHARE`) left out: two readers both pass a shared one.
pub(super) fn locks_exclusively(text: &str) -> bool {
    text.lines().any(|line| {
        let line = line.trim_start();
        !line.starts_with('#')
            && holds_rows(line.split(" #").next().unwrap_or(line))
            && ![
                "\"read\": True",
                "'read': True",
                "read=True",
                "FOR SHARE",
                "for_share",
                "key_share",
            ]
            .iter()
            .any(|s| line.contains(s))
    })
}

/// A test the database makes itself: a conditional update on the figure
/// (`filter(balance__gte=amount).update(...)`, `UPDATE ... WHERE balance >= %s`), or a
/// serializable transaction.
fn settled_by_the_database(text: &str) -> bool {
    text.contains("__gte") && text.contains(".update(")
        || text.contains("WHERE") && text.contains(">=")
        || text.contains("where(") && text.contains(">=") && text.contains("update(")
        || syntax::contains_lowercase(text, "serializable")
}

/// `with self.repo.transaction():`, `with db.transaction() as conn:`: a transaction of the
/// code's own, which takes the write lock where the change begins them so
/// (`FileFacts::serialises_writers`).
fn in_a_transaction(text: &str) -> bool {
    text.lines().any(|line| {
        let line = line.trim_start();
        line.starts_with("with ") && line.contains("transaction(")
    })
}

/// Whether a function of the file that calls `func` takes a lock, as `locks` reads its text.
fn locked_by_a_caller(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    src: &str,
    locks: fn(&str) -> bool,
) -> bool {
    let name = syntax::function_name(func, src);
    idx.all(kinds::FUNCTION_DEFINITION).iter().any(|&caller| {
        caller.id() != func.id()
            && idx
                .within(caller, kinds::CALL)
                .iter()
                .any(|c| idx.callee_name(*c, src) == name)
            && locks(syntax::text(caller, src))
    })
}
