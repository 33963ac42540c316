//! PAY046 money-written-apart: a transaction that changes a payment's state (a payout failed,
//! a refund settled, a withdrawal released) commits, and the money that change moves (the held
//! funds given back, the balance credited, the ledger entry posted, the refunded amount added)
//! is written after it, in a transaction of its own or in none, on the strength of what the
//! first one found (`if released:`, `if changed and payout.status in RELEASES_FUNDS:`,
//! `row["amount"]`). A crash, a deploy, a lost connection or a failed write between the two
//! leaves the state changed and the money not moved, and nothing tries again: the record no
//! longer looks due. A rerun that does find it moves the money twice.
//!
//! Read in one function: a `with` that opens a transaction, a name it binds, and after the
//! block a write of money that reads that name, itself or through the `if` it sits under.
//! Left alone: the write inside the same transaction (or an outer one, or a function under
//! `@transaction.atomic`), a second transaction that writes the state itself beside the money,
//! a write that follows a call to the provider (its answer decides), and a job handed to
//! `on_commit`.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY046",
    doc: include_str!("../../../rules/pay/PAY046.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is in code, not a test, that opens a transaction and writes money by a word
/// of a ledger or a balance.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && !s.index().all(kinds::WITH_STATEMENT).is_empty()
        && s.mentions(&["atomic", ".begin(", ".transaction("])
        && s.mentions(&[
            "balance", "ledger", "journal", "refunded", "credit", "debit", "release", "funds",
        ])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    let mut reported: Vec<usize> = Vec::new();
    for &with in idx.all(kinds::WITH_STATEMENT) {
        let clause = syntax::with_clause(with, src);
        if !syntax::opens_a_transaction(clause) {
            continue;
        }
        let (Some(body), Some(func)) = (
            with.field("body"),
            idx.enclosing(with, kinds::FUNCTION_DEFINITION),
        ) else {
            continue;
        };
        if in_a_wider_transaction(idx, func, with, src) {
            continue;
        }
        // What the block found or changed: the names it binds, and the records whose state it
        // sets (`refund` of `refund.status = "settled"`).
        let bound: Vec<&str> = idx
            .within(body, kinds::ASSIGNMENT)
            .iter()
            .filter(|a| crate::rules::err::owned_by(**a, func, idx))
            .filter_map(|a| a.field("left"))
            .filter_map(|l| match l.kind() {
                kinds::IDENTIFIER => Some(l),
                kinds::ATTRIBUTE
                    if l.field("attribute")
                        .is_some_and(|f| matches!(syntax::text(f, src), "status" | "state")) =>
                {
                    l.field("object").filter(|o| o.kind() == kinds::IDENTIFIER)
                }
                _ => None,
            })
            .map(|l| syntax::text(l, src))
            .collect();
        if bound.is_empty() {
            continue;
        }
        let mut next = with.next_named_sibling();
        while let Some(after) = next {
            next = after.next_named_sibling();
            // The provider's answer decides what follows: another matter.
            if asks_the_provider(idx, after, src) {
                break;
            }
            let Some((write, tied)) = money_write_tied(idx, func, after, &bound, src) else {
                continue;
            };
            if reported.contains(&write.id()) {
                break;
            }
            reported.push(write.id());
            let function = facts::qualname(func, idx, src);
            // Whole when short; by its callee when it carries SQL or runs long.
            let shown = syntax::normalized(write, src);
            let shown = if shown.len() <= 80 {
                shown
            } else {
                format!("{}(...)", syntax::callee(write, src))
            };
            let finding = cx
                .report(&RULE, write)
                .arg("function", function.clone())
                .arg("write", shown)
                .arg(
                    "transaction",
                    clause.split_whitespace().collect::<Vec<_>>().join(" "),
                )
                .arg("line", syntax::lines(with).0.to_string())
                .arg("tied", tied.to_string());
            finding.function = function;
            break;
        }
    }
}

/// Whether the block runs inside another transaction of the function that also holds what
/// follows it (`with transaction.atomic():` around both), or the function is `@atomic`.
fn in_a_wider_transaction(idx: &NodeIndex<'_>, func: Node<'_>, with: Node<'_>, src: &str) -> bool {
    let decorated = idx.decorated(func).is_some_and(|d| {
        syntax::decorators(d)
            .into_iter()
            .any(|dec| syntax::opens_a_transaction(syntax::text(dec, src)))
    });
    decorated
        || idx
            .within(func, kinds::WITH_STATEMENT)
            .iter()
            .any(|&outer| {
                outer.id() != with.id()
                    && syntax::contains(outer, with)
                    && syntax::opens_a_transaction(syntax::with_clause(outer, src))
            })
}

/// Whether a statement calls the provider (`gateway.refund(...)`, `self._client.post(...)`).
fn asks_the_provider(idx: &NodeIndex<'_>, statement: Node<'_>, src: &str) -> bool {
    std::iter::once(statement)
        .chain(idx.within(statement, kinds::CALL).iter().copied())
        .filter(|n| n.kind() == kinds::CALL)
        .any(|call| {
            syntax::receiver(call).is_some_and(|r| {
                let text = syntax::text(r, src);
                let last = text.rsplit('.').next().unwrap_or(text);
                syntax::name_words(last).iter().any(|w| {
                    matches!(
                        w.as_str(),
                        "client"
                            | "gateway"
                            | "provider"
                            | "psp"
                            | "api"
                            | "http"
                            | "stripe"
                            | "adyen"
                            | "paypal"
                            | "bank"
                    )
                })
            })
        })
}

/// The first write of money in `statement` that reads a name `bound` holds (itself, or
/// through the `if` it sits under), with that name; not one inside a lambda (`on_commit`), nor
/// one in a transaction of its own that writes the state beside it.
fn money_write_tied<'t, 'b>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    statement: Node<'t>,
    bound: &[&'b str],
    src: &str,
) -> Option<(Node<'t>, &'b str)> {
    std::iter::once(statement)
        .chain(idx.within(statement, kinds::CALL).iter().copied())
        .filter(|n| n.kind() == kinds::CALL)
        .find_map(|call| {
            if !crate::rules::err::owned_by(call, func, idx)
                || idx
                    .enclosing(call, kinds::LAMBDA)
                    .is_some_and(|l| syntax::contains(statement, l))
                || !writes_money(call, src)
            {
                return None;
            }
            // Its own transaction that writes the state beside it (not in the write itself, as
            // an order's status worked out from its refunded amount is): the two commit
            // together.
            let own = idx.within(func, kinds::WITH_STATEMENT).iter().any(|&w| {
                syntax::contains(w, call)
                    && syntax::contains(statement, w)
                    && syntax::opens_a_transaction(syntax::with_clause(w, src))
                    && writes_a_state(&syntax::text(w, src).replace(syntax::text(call, src), ""))
            });
            if own {
                return None;
            }
            // Read by the write, or by the tests it sits under within the statement.
            let mut reads = syntax::text(call, src).to_string();
            let mut up = call.parent();
            while let Some(n) = up {
                if n.kind() == kinds::IF_STATEMENT
                    && let Some(condition) = n.field("condition")
                {
                    reads.push(' ');
                    reads.push_str(syntax::text(condition, src));
                }
                if n.id() == statement.id() {
                    break;
                }
                up = n.parent();
            }
            let tied = bound.iter().find(|b| syntax::has_word(&reads, b))?;
            Some((call, *tied))
        })
}

/// Whether a call writes money: SQL that updates or inserts a balance, a ledger or an amount
/// (`UPDATE orders SET refunded_amount = ...`, `INSERT INTO ledger_entries ...`), an ORM update
/// of a balance (`.update(balance_kobo=F("balance_kobo") + ...)`), or a call named for moving
/// held or owed money (`_release_funds(payout)`, `tx.ledger.post(...)`, `wallet.credit(...)`).
fn writes_money(call: Node<'_>, src: &str) -> bool {
    let money = |w: &str| {
        [
            "balance", "ledger", "journal", "refunded", "credit", "debit", "amount", "funds",
            "earnings", "wallet",
        ]
        .iter()
        .any(|m| w.starts_with(m))
    };
    let args = call.field("arguments");
    let sql = args
        .into_iter()
        .flat_map(crate::python::named_children)
        .any(|a| {
            a.kind() == kinds::STRING && {
                let text = syntax::text(a, src).to_ascii_lowercase();
                (text.contains("update ") || text.contains("insert into"))
                    && syntax::name_words(&text).iter().any(|w| money(w))
            }
        });
    if sql {
        return true;
    }
    let name = syntax::callee_name(call, src);
    if name == "update"
        && syntax::keyword_args(call, src).iter().any(|(k, _)| {
            syntax::name_words(k)
                .iter()
                .any(|w| money(w) && w != "amount")
        })
    {
        return true;
    }
    let words = syntax::name_words(name);
    let moves = words.first().is_some_and(|w| {
        matches!(
            w.as_str(),
            "release" | "credit" | "debit" | "refund" | "reverse" | "post" | "return"
        )
    });
    let of_money = words.iter().skip(1).any(|w| money(w) || w == "hold")
        || syntax::receiver(call).is_some_and(|r| {
            let text = syntax::text(r, src);
            let last = text.rsplit('.').next().unwrap_or(text);
            syntax::name_words(last).iter().any(|w| money(w))
        });
    moves && of_money
}

/// Whether code writes a record's state: `refund.status = ...`, `status=...`, `SET status`.
fn writes_a_state(code: &str) -> bool {
    let lower = code.to_ascii_lowercase();
    [
        "status =",
        "status=",
        "state =",
        "state=",
        "set status",
        "set state",
        "mark_",
    ]
    .iter()
    .any(|w| lower.contains(w))
}
