//! PAY029 settled-refunds-only: what has gone back (refunds, payouts, reversals) is added up
//! from the rows that reached the final success state alone (`Refund.status == "succeeded"`,
//! `status="refunded"`), and the sum is taken from, or weighed against, money: what is still
//! refundable, what the payout carries. A refund sent and not yet confirmed is money already on
//! its way back; left out of the sum, it counts as still here, and a second refund or the payout
//! goes out on top of it.
//!
//! A set of states kept by the sum (`status__in=BALANCE_HOLDING_STATUSES`, `.in_(...)`) is
//! read the same way when its members are of a class of states: a state of the class in which
//! the request is sent or about to be (`RefundStatus.REQUESTED`), left out of the set, is
//! money counted as still here (note `left_out`). Rows fetched and added up later (`held =
//! Refund.filter(...)`, then `total - sum(held)`) count as a sum.
//!
//! Left alone: a sum that also counts the rows in flight (`status != "failed"`, a set with
//! every state in flight of its class), and one only shown or returned (no arithmetic on it).
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY029",
    doc: include_str!("../../../rules/pay/PAY029.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// States in which money that went back has arrived.
const SETTLED: &[&str] = &[
    "succeeded",
    "success",
    "successful",
    "settled",
    "completed",
    "complete",
    "refunded",
    "paid",
    "done",
    "processed",
    "confirmed",
    "finished",
    // The same in the languages payment code is written in: `status = 'klar'`,
    // `e.status == "abgeschlossen"`.
    "klar",
    "abgeschlossen",
    "erfolgreich",
    "voltooid",
    "geslaagd",
    "completado",
    "completada",
    "exitoso",
    "concluido",
    "concluida",
    "completato",
    "termine",
    "effectue",
    "slutford",
    "genomford",
];

/// Every finding is a sum in code that names refunds or payouts.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(&["sum(", "Sum(", "SUM("])
        && (s.mentions(&["efund", "ayout", "ithdrawal", "eversal"])
            || s.facts.payment_module && s.mentions(FOREIGN_WENT_BACK))
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    returned_sums(cx, idx, src);
    for &assign in idx.all(kinds::ASSIGNMENT) {
        let (Some(left), Some(right)) = (assign.field("left"), assign.field("right")) else {
            continue;
        };
        if left.kind() != kinds::IDENTIFIER {
            continue;
        }
        let text = syntax::text(right, src);
        let name = syntax::text(left, src);
        let func = idx.enclosing(assign, kinds::FUNCTION_DEFINITION);
        // Rows fetched here and added up later: `held = Refund.filter(...).values_list(...)`,
        // then `total - sum(held)`.
        let summed = if adds_up_what_went_back(text) {
            Summed::Here
        } else if names_what_went_back(text) {
            Summed::Later
        } else {
            continue;
        };
        let (filter, state, note) = match settled_only(text) {
            Some((filter, state)) => (filter, state, None),
            None => match in_flight_left_out(cx, idx, right, src) {
                Some(left_out) => (left_out.filter, left_out.state, Some(left_out.kept)),
                None => continue,
            },
        };
        let Some(used) = weighed(idx, func, assign, name, summed, src)
            .or_else(|| weighed_by_callers(idx, func?, name, summed, src))
        else {
            continue;
        };
        let function = func
            .map(|f| facts::qualname(f, idx, src))
            .unwrap_or_default();
        let finding = cx
            .report(&RULE, assign)
            .arg("name", name.to_string())
            .arg("filter", filter)
            .arg("state", state)
            .arg("use", super::first_line(used, src))
            .arg("use_line", syntax::lines(used).0.to_string());
        if let Some(kept) = note {
            finding.arg("kept", kept).note("left_out");
        }
        finding.function = function;
    }
}

/// Where the rows are added up: in the assignment, or later, by `sum(name)`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Summed {
    Here,
    Later,
}

const WENT_BACK: &[&str] = &["refund", "payout", "withdrawal", "reversal"];

/// Refunds and payouts in the languages payment code is written in (`erstattungen`,
/// `aterbetalningar`, `reembolsos`), as stems any case holds.
const FOREIGN_WENT_BACK: &[&str] = &[
    "rstattung",
    "terbetal",
    "eembols",
    "embours",
    "imbors",
    "storno",
    "zwrot",
    "uszahlung",
    "itbetal",
];

/// A sum (`func.sum(`, `Sum(`, SQL `SUM(`, Python's `sum(`) of refunds, payouts, withdrawals
/// or reversals.
fn adds_up_what_went_back(text: &str) -> bool {
    ["sum(", "Sum(", "SUM("].iter().any(|s| text.contains(s)) && names_what_went_back(text)
}

fn names_what_went_back(text: &str) -> bool {
    WENT_BACK
        .iter()
        .chain(FOREIGN_WENT_BACK)
        .any(|w| syntax::contains_lowercase(text, w))
}

/// States of a refund or payout sent and not yet answered: its money is on its way.
const IN_FLIGHT: &[&str] = &[
    "requested",
    "requesting",
    "pending",
    "submitted",
    "submitting",
    "sending",
    "initiating",
    "retrying",
    // Sent with no answer that says how it ended: it may have gone through.
    "unknown",
    "unconfirmed",
    "processing",
    "initiated",
    "created",
    "sent",
    "queued",
    "scheduled",
    "accepted",
    "transit",
    "progress",
    "flight",
    "inflight",
    "awaiting",
];

/// A set of states a sum keeps that leaves out one in flight.
struct LeftOut {
    /// The test as written: `status__in=BALANCE_HOLDING_STATUSES`.
    filter: String,
    /// The state left out: `RefundStatus.REQUESTED`.
    state: String,
    /// For a constant: what it holds and where, as ` (`NAME = (...)`, path:line)`.
    kept: String,
}

/// The set of states a sum keeps (`status__in=HOLDING`, `Refund.status.in_([...])`, `r.status
/// in (...)`), when its members are of a class of states (`RefundStatus.PENDING`) that has a
/// state in flight the set leaves out (`RefundStatus.REQUESTED`). The class's members are read
/// in the file, or in the repository's module that defines the set or the class.
fn in_flight_left_out(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    value: Node<'_>,
    src: &str,
) -> Option<LeftOut> {
    kept_sets(idx, value, src)
        .into_iter()
        .find_map(|(test, set)| {
            let written = syntax::text(set, src);
            let (members, at) = if set.kind() == kinds::IDENTIFIER || set.kind() == kinds::ATTRIBUTE
            {
                let (value, at) = super::constant_collection(cx, idx, written, src)?;
                (value, Some(at))
            } else {
                (written.to_string(), None)
            };
            // `[*Refund.OPEN_STATUSES, Refund.Status.SUCCEEDED]`: the states unpacked into it
            // are not read, so what it leaves out is not known.
            if members.contains('*') {
                return None;
            }
            // The class as the set names it, with the model it belongs to (`Refund.Status`).
            let kept: Vec<(String, String)> = super::state_members(&members)
                .map(|(token, class, member)| {
                    let qualified = token.rsplit_once('.').map_or(class, |(q, _)| q);
                    let mut parts = qualified.rsplit('.');
                    let class = match (parts.next(), parts.next()) {
                        (Some(class), Some(owner))
                            if owner.starts_with(|c: char| c.is_ascii_uppercase()) =>
                        {
                            format!("{owner}.{class}")
                        }
                        _ => class.to_string(),
                    };
                    (class, member.to_string())
                })
                .collect();
            let class = kept.first()?.0.clone();
            if kept.iter().any(|(c, _)| *c != class) {
                return None;
            }
            let defined_in = at
                .as_deref()
                .and_then(|a| a.rsplit_once(':'))
                .map(|(p, _)| p);
            let state = super::members_of(cx, idx, &class, &kept, defined_in, src)
                .into_iter()
                .find(|m| {
                    !kept.iter().any(|(_, k)| k == m)
                        && syntax::name_words(m)
                            .iter()
                            .any(|w| IN_FLIGHT.contains(&w.as_str()))
                })?;
            Some(LeftOut {
                filter: super::first_line(test, src),
                state: format!("{class}.{state}"),
                kept: at
                    .map(|at| format!(" (`{written} = {members}`, {at})"))
                    .unwrap_or_default(),
            })
        })
}

/// The tests of a status against a set inside `value`, with the set: `status__in=X`,
/// `.status.in_(X)`, `.status in X`.
fn kept_sets<'t>(idx: &NodeIndex<'t>, value: Node<'t>, src: &str) -> Vec<(Node<'t>, Node<'t>)> {
    let of_status = |t: &str| {
        let t = t.trim_end_matches('_').to_ascii_lowercase();
        t.ends_with("status") || t.ends_with("state")
    };
    let keyword = idx
        .within(value, kinds::CALL)
        .iter()
        .filter_map(|c| c.field("arguments"))
        .flat_map(crate::python::named_children)
        .filter(|k| k.kind() == kinds::KEYWORD_ARGUMENT)
        .filter_map(|k| {
            let name = syntax::text(k.field("name")?, src);
            let field = name.strip_suffix("__in")?;
            of_status(field).then_some((k, k.field("value")?))
        });
    let in_call = idx.within(value, kinds::CALL).iter().filter_map(|&c| {
        let function = c
            .field("function")
            .filter(|f| f.kind() == kinds::ATTRIBUTE)?;
        let attribute = syntax::text(function.field("attribute")?, src);
        let object = syntax::text(function.field("object")?, src);
        (attribute == "in_" && of_status(object))
            .then(|| c.field("arguments")?.named_child(0))
            .flatten()
            .map(|set| (c, set))
    });
    let compared = idx
        .within(value, kinds::COMPARISON_OPERATOR)
        .iter()
        .filter_map(|&c| {
            let op = c.child(1)?;
            let left = c.named_child(0)?;
            (op.kind() == "in" && of_status(syntax::text(left, src)))
                .then(|| c.named_child(1).map(|set| (c, set)))
                .flatten()
        });
    let mut found: Vec<_> = keyword.chain(in_call).chain(compared).collect();
    found.sort_by_key(|(t, _)| t.start_byte());
    found
}

/// The one status the sum keeps, when it keeps only a settled one: `Refund.status ==
/// "succeeded"`, `status="refunded"`, `.status == RefundStatus.SUCCEEDED`. As the test written
/// and the state. `None` where a test of a status keeps others too (`!=`, `.in_(`, `__in`).
fn settled_only(text: &str) -> Option<(String, String)> {
    let mut found = None;
    for field in ["status", "state"] {
        for (at, _) in text.match_indices(field) {
            let rest = &text[at + field.len()..];
            let rest = rest.trim_start_matches(['"', '\'']);
            let trimmed = rest.trim_start();
            // A test that keeps more than one state, or all but one: the rows in flight count.
            if [
                "!=", ".in_(", ".notin_(", "__in", " IN ", " in ", " not in ",
            ]
            .iter()
            .any(|t| trimmed.starts_with(t.trim_start()) || rest.starts_with(t))
            {
                return None;
            }
            let Some(value) = trimmed
                .strip_prefix("==")
                .or_else(|| trimmed.strip_prefix('=').filter(|v| !v.starts_with('=')))
            else {
                continue;
            };
            let value = value.trim_start();
            let end = value
                .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '"' | '\'')))
                .unwrap_or(value.len());
            let token = &value[..end];
            let state = token
                .trim_matches(|c| c == '"' || c == '\'')
                .rsplit('.')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            if !SETTLED.contains(&state.as_str()) {
                return None;
            }
            let op = if trimmed.starts_with("==") {
                " == "
            } else {
                "="
            };
            let written = format!("{field}{op}{token}");
            found = Some((written, state));
        }
    }
    found
}

/// Where the sum is taken from or weighed against money after it is set: `gross - refunded`,
/// `captured - refunded_minor >= amount`, `row.done + row.units > row.captured` of a labelled
/// subquery.
fn weighed<'t>(
    idx: &NodeIndex<'t>,
    func: Option<Node<'t>>,
    assign: Node<'t>,
    name: &str,
    summed: Summed,
    src: &str,
) -> Option<Node<'t>> {
    let scope: Vec<Node<'t>> = match func {
        Some(f) => [kinds::BINARY_OPERATOR, kinds::COMPARISON_OPERATOR]
            .iter()
            .flat_map(|k| idx.within(f, k).iter().copied())
            .collect(),
        None => Vec::new(),
    };
    let labelled = format!(".{name}");
    let in_file = [kinds::BINARY_OPERATOR, kinds::COMPARISON_OPERATOR]
        .iter()
        .flat_map(|k| idx.all(k).iter().copied());
    let own = scope.into_iter().filter(|op| {
        op.start_byte() > assign.end_byte()
            && uses_in_money(*op, name, summed, src)
            && !picks_a_state(*op, src)
    });
    let mut found: Vec<Node<'t>> = own.collect();
    // A subquery labelled with its name (`done.label("done")`) is read back as `row.done`.
    let scope_text = syntax::text(func.unwrap_or(assign), src);
    if summed == Summed::Here && scope_text.contains(&format!("label(\"{name}\")")) {
        found
            .extend(in_file.filter(|op| syntax::text(*op, src).contains(&labelled) && weighs(*op)));
    }
    found.into_iter().min_by_key(|n| n.start_byte())
}

/// Whether a comparison only chooses the state a record is labelled with: `order.status =
/// REFUNDED if settled >= paid else PARTIALLY_REFUNDED`, or an `if` whose branches only set a
/// status. "Fully refunded" is right to wait for the money to arrive; nothing is paid on it.
fn picks_a_state(op: Node<'_>, src: &str) -> bool {
    let sets_a_state = |left: Node<'_>| {
        let text = syntax::text(left, src);
        text.ends_with("status") || text.ends_with("state")
    };
    let Some(mut parent) = op.parent() else {
        return false;
    };
    // `elif paid_out > 0:` is read as the whole `if` it belongs to.
    if parent.kind() == kinds::ELIF_CLAUSE {
        let Some(whole) = parent.parent() else {
            return false;
        };
        parent = whole;
    }
    match parent.kind() {
        "conditional_expression" => parent
            .parent()
            .filter(|a| a.kind() == kinds::ASSIGNMENT)
            .and_then(|a| a.field("left"))
            .is_some_and(sets_a_state),
        kinds::IF_STATEMENT => {
            let blocks = std::iter::once(parent.field("consequence"))
                .chain(
                    crate::python::named_children(parent)
                        .into_iter()
                        .filter(|c| {
                            c.kind() == kinds::ELSE_CLAUSE || c.kind() == kinds::ELIF_CLAUSE
                        })
                        .map(|c| {
                            c.field(if c.kind() == kinds::ELIF_CLAUSE {
                                "consequence"
                            } else {
                                "body"
                            })
                        }),
                )
                .collect::<Option<Vec<_>>>();
            blocks.is_some_and(|blocks| {
                blocks.iter().all(|b| {
                    syntax::statements(*b).iter().all(|st| {
                        st.named_child(0)
                            .filter(|a| a.kind() == kinds::ASSIGNMENT)
                            .and_then(|a| a.field("left"))
                            .is_some_and(sets_a_state)
                    })
                })
            })
        }
        _ => false,
    }
}

/// Whether `op` subtracts `name` (or, for rows added up later, `sum(name)`), or compares with
/// it, or adds it to be compared.
fn uses_in_money(op: Node<'_>, name: &str, summed: Summed, src: &str) -> bool {
    let summed_later = format!("sum({name})");
    weighs(op)
        && crate::python::named_children(op).iter().any(|&c| {
            let c = defaulted(c);
            match summed {
                Summed::Here => c.kind() == kinds::IDENTIFIER && syntax::text(c, src) == name,
                Summed::Later => c.kind() == kinds::CALL && syntax::text(c, src) == summed_later,
            }
        })
}

/// The value of an operand that gives a sum of no rows a default: `(refunded or 0)`.
fn defaulted(operand: Node<'_>) -> Node<'_> {
    let mut node = operand;
    while node.kind() == kinds::PARENTHESIZED_EXPRESSION
        && let Some(inner) = node.named_child(0)
    {
        node = inner;
    }
    if node.kind() == kinds::BOOLEAN_OPERATOR
        && node.child(1).is_some_and(|o| o.kind() == "or")
        && let Some(left) = node.named_child(0)
    {
        return left;
    }
    node
}

/// An operator that takes from, adds to, or weighs against: `-`, `+`, `>`, `<`, `>=`, `<=`.
/// A function that returns the sum itself (`return sum(e.betrag_cent for e in
/// zahlung.erstattungen if e.status == "abgeschlossen")`), weighed by a caller of the file.
fn returned_sums(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    for &ret in idx.all(kinds::RETURN_STATEMENT) {
        let Some(value) = syntax::return_value(ret) else {
            continue;
        };
        let text = syntax::text(value, src);
        if !adds_up_what_went_back(text) {
            continue;
        }
        let Some((filter, state)) = settled_only(text) else {
            continue;
        };
        let Some(func) = idx.enclosing(ret, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let Some(used) = call_weighed(idx, func, src) else {
            continue;
        };
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, ret)
            .arg("name", syntax::function_name(func, src).to_string())
            .arg("filter", filter)
            .arg("state", state)
            .arg("use", super::first_line(used, src))
            .arg("use_line", syntax::lines(used).0.to_string());
        finding.function = function;
    }
}

/// Where the function returns the sum (`return int(total or 0)`) and a function of the file
/// weighs its call against money: `payment.amount_paise - await refunded_total(session,
/// payment)`.
fn weighed_by_callers<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    name: &str,
    summed: Summed,
    src: &str,
) -> Option<Node<'t>> {
    let returned = idx.within(func, kinds::RETURN_STATEMENT).iter().any(|r| {
        syntax::return_value(*r).is_some_and(|v| {
            let text = syntax::text(v, src);
            match summed {
                Summed::Here => syntax::has_word(text, name),
                Summed::Later => text.contains(&format!("sum({name})")),
            }
        })
    });
    if !returned {
        return None;
    }
    call_weighed(idx, func, src)
}

/// The first subtraction, addition or comparison of the file, outside `func`, with a call of
/// `func` on one side.
fn call_weighed<'t>(idx: &NodeIndex<'t>, func: Node<'t>, src: &str) -> Option<Node<'t>> {
    let called = format!("{}(", syntax::function_name(func, src));
    [kinds::BINARY_OPERATOR, kinds::COMPARISON_OPERATOR]
        .iter()
        .flat_map(|k| idx.all(k).iter().copied())
        .filter(|op| !syntax::contains(func, *op) && weighs(*op) && !picks_a_state(*op, src))
        .filter(|op| {
            crate::python::named_children(*op).iter().any(|&c| {
                let c = defaulted(c);
                let c = if c.kind() == kinds::AWAIT {
                    c.named_child(0).unwrap_or(c)
                } else {
                    c
                };
                c.kind() == kinds::CALL
                    && syntax::callee(c, src).ends_with(called.trim_end_matches('('))
                    && syntax::text(c, src).contains(&called)
            })
        })
        .min_by_key(|n| n.start_byte())
}

fn weighs(op: Node<'_>) -> bool {
    op.child(1)
        .is_some_and(|o| matches!(o.kind(), "-" | "+" | ">" | "<" | ">=" | "<="))
}
