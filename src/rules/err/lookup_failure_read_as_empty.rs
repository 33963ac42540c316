//! ERR010 lookup-failure-read-as-empty: a broad `except` around a read of money already moved
//! (the chargebacks of a payment, the amount captured, the usage a provider recorded) whose
//! handler only logs and gives an empty answer: `return []`, `return 0`, `landed = 0`. An
//! outage, a 5xx or a bad body then reads as "nothing there", and the code goes on to do what it
//! does when nothing was there: capture again, refund what the bank already took back, send the
//! usage a second time.
//!
//! ERR001 reads the same swallowing when it gives `None` or `False`. A lookup whose empty answer
//! decides nothing (a handler that returns early, an answer never read) is left alone, and so is
//! a read of something that is not money moved (a customer's saved cards, a list of plans).
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "ERR010",
    doc: include_str!("../../../rules/err/ERR010.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is an `except` whose handler gives an empty value, in code, not a test.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && (s
            .index()
            .all(kinds::EXCEPT_CLAUSE)
            .iter()
            .any(|&c| empty_answer(c, s.src()).is_some())
            // `every_4xx_read_as_not_found`, in a file that sends requests.
            || s.facts.functions.iter().any(|f| f.http)
                && (s.mentions(&["400"]) && s.mentions(&["500", "499"])
                    || s.mentions(&["// 100", "//100"])))
}

/// What the handler makes of the failure.
enum Answer<'t> {
    /// `return []`: the function's answer.
    Returned(Node<'t>),
    /// `landed = 0`: a local the function goes on with.
    Assigned { name: &'t str, value: Node<'t> },
    /// `continue`: the item is skipped in a search that answers "none" when nothing matched.
    Skipped,
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    every_4xx_read_as_not_found(cx);
    for &clause in idx.all(kinds::EXCEPT_CLAUSE) {
        let Some(answer) = empty_answer(clause, src) else {
            continue;
        };
        let (first, last) = syntax::lines(clause);
        if !cx.touches_added(first, last)
            || !(catches_failures(clause, src) || catches_kept_failures(idx, clause, src))
        {
            continue;
        }
        let Some(func) = idx.enclosing(clause, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let Some(try_statement) = syntax::try_of(clause) else {
            continue;
        };
        let Some(body) = try_statement.field("body") else {
            continue;
        };
        let name = syntax::function_name(func, src);
        let Some((lookup, named)) =
            lookup_in(idx, body, src).or_else(|| own_get(idx, func, body, src))
        else {
            continue;
        };
        // The empty value, the local it is kept in (none when returned), and whether the code
        // goes on with it.
        let (value, answered, read) = match answer {
            Answer::Returned(value) => (
                syntax::text(value, src),
                "",
                returns_otherwise(idx, func, clause, src),
            ),
            Answer::Assigned { name, value } => (
                syntax::text(value, src),
                name,
                read_after(try_statement, func, name, src)
                    // `transfer = None`, then `if transfer is None: keep it pending; return`:
                    // the failure is told from the answer after all.
                    && !(value.kind() == kinds::NONE
                        && (none_handled(idx, func, try_statement, name, src)
                            // ERR001 tells of a lookup's answer set to `None` and tested.
                            || super::broad_except_returns_none::lookup_set_to_none(
                                clause, idx, src,
                            )
                            .is_some())),
            ),
            Answer::Skipped => match search_ends_empty(idx, func, try_statement, src) {
                Some(none) => (none, "", true),
                None => continue,
            },
        };
        if !read {
            continue;
        }
        // The read names money moved (`list_chargebacks`, `stripe.Refund.list`), or the
        // function or the local does (`_already_captured` over `fetch_payment`) on the payment
        // path.
        let qualname = facts::qualname(func, idx, src);
        let function = cx.facts.and_then(|f| f.function(&qualname));
        if !(names_money_moved(named)
            || [name, answered].iter().any(|n| names_money_moved(n))
                && cx.on_payment_path(function)
            || provider_order(idx, func, named, src))
        {
            continue;
        }
        let caught = super::caught(clause, src);
        let finding = cx
            .report(&RULE, clause)
            .arg("caught", caught)
            .arg("function", qualname)
            .arg("lookup", shown(lookup, named, src))
            .arg("empty", value.to_string());
        if matches!(answer, Answer::Skipped) {
            finding.note("skipped");
        } else if answered.is_empty() {
            finding.note("returned");
        } else {
            finding.arg("local", answered).note("assigned");
        }
    }
}

/// The call as the message shows it: whole when short, by its callee when its arguments run
/// long (`session.get(...)`), by the SDK's read when a helper is handed it (`stripe.Refund.list`).
fn shown(call: Node<'_>, named: &str, src: &str) -> String {
    if named != syntax::callee_name(call, src) {
        return named.to_string();
    }
    let whole = syntax::normalized(call, src);
    if whole.len() <= 60 {
        whole
    } else {
        format!("{}(...)", syntax::callee(call, src))
    }
}

/// Everything, or a client's whole family of errors with its timeouts.
/// `if 400 <= status < 500: raise TransactionNotFound(...)` in a client that talks to a
/// provider: a 401 of a rotated key, a 403, a 429 of a rate limit are read as "there is no such
/// payment", and what the code does for one that does not exist (mark it failed, send it again)
/// it does for one that may.
fn every_4xx_read_as_not_found(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    if !cx.facts.is_some_and(|f| f.functions.iter().any(|f| f.http)) {
        return;
    }
    let mut found = Vec::new();
    for &test in idx.all(kinds::IF_STATEMENT) {
        let (Some(condition), Some(body)) = (test.field("condition"), test.field("consequence"))
        else {
            continue;
        };
        let (first, last) = syntax::lines(test);
        if !cx.touches_added(first, last) || !covers_every_4xx(syntax::text(condition, src)) {
            continue;
        }
        let Some(raised) = syntax::statements(body).into_iter().find_map(|s| {
            (s.kind() == kinds::RAISE_STATEMENT)
                .then(|| crate::python::named_children(s).into_iter().next())
                .flatten()
        }) else {
            continue;
        };
        let class = match raised.kind() {
            kinds::CALL => syntax::callee_name(raised, src),
            _ => syntax::text(raised, src),
        };
        let words = syntax::name_words(class);
        let not_found = words.windows(2).any(|w| w[0] == "not" && w[1] == "found")
            || words
                .iter()
                .any(|w| matches!(w.as_str(), "notfound" | "missing" | "nonexistent"));
        if !not_found {
            continue;
        }
        let function = idx
            .enclosing(test, kinds::FUNCTION_DEFINITION)
            .map(|f| facts::qualname(f, idx, src))
            .unwrap_or_default();
        found.push((condition, function, class.to_string()));
    }
    for (condition, function, raised) in found {
        cx.report(&RULE, condition)
            .arg("function", function)
            .arg("condition", syntax::normalized(condition, src))
            .arg("raised", raised)
            .note("every_4xx");
    }
}

/// Whether a test holds for every 4xx: `400 <= status < 500`, `status >= 400 and status <
/// 500`, `status // 100 == 4`.
fn covers_every_4xx(condition: &str) -> bool {
    let compact: String = condition.split_whitespace().collect();
    let from = compact.contains("400<=") || compact.contains(">=400");
    let to = compact.contains("<500") || compact.contains("<=499") || compact.contains("500>");
    from && to && !compact.contains("!=") && !compact.contains("==4")
        || compact.contains("//100==4")
}

fn catches_failures(clause: Node<'_>, src: &str) -> bool {
    syntax::is_broad_except(clause, src)
        || super::timeout_read_as_failure::catches_timeout(clause, src).is_some()
}

/// `except ERRORI_ESITO_INCERTO`, a tuple the module keeps of transport errors and timeouts
/// (`(timeout_error.ReadTimeoutError, connection_error.ConnectionError, ServerError)`).
fn catches_kept_failures(idx: &NodeIndex<'_>, clause: Node<'_>, src: &str) -> bool {
    syntax::except_types(clause).iter().any(|t| {
        t.kind() == kinds::IDENTIFIER
            && crate::rules::retry::eval::module_constant(idx, syntax::text(*t, src), src)
                .filter(|v| matches!(v.kind(), kinds::TUPLE | kinds::LIST))
                .is_some_and(|members| {
                    crate::python::named_children(members).iter().any(|m| {
                        let name = facts::last_name(syntax::text(*m, src));
                        [
                            "Timeout",
                            "Connection",
                            "Transport",
                            "Unavailable",
                            "ServerError",
                        ]
                        .iter()
                        .any(|w| name.contains(w))
                    })
                })
    })
}

/// The handler's empty answer, when the rest of it only logs.
fn empty_answer<'t>(clause: Node<'t>, src: &'t str) -> Option<Answer<'t>> {
    // The handler ends in the empty value, as written: the text is asked before the tree.
    let text = syntax::text(clause, src).trim_end();
    if ![
        "[]", "{}", "()", "0", "0.0", "(0)", "\"0\")", "'0')", "continue", "None",
    ]
    .iter()
    .any(|e| text.ends_with(e))
    {
        return None;
    }
    let body = syntax::except_body(clause)?;
    let statements = syntax::statements(body);
    let (last, before) = statements.split_last()?;
    let logs = before.iter().all(|s| {
        s.kind() == kinds::PASS_STATEMENT
            || syntax::tail_call(*s)
                .is_some_and(|t| facts::only_records(syntax::callee(t.call, src)))
    });
    if !logs {
        return None;
    }
    match last.kind() {
        kinds::CONTINUE_STATEMENT => Some(Answer::Skipped),
        kinds::RETURN_STATEMENT => syntax::return_value(*last)
            .filter(|v| empty(*v, src))
            .map(Answer::Returned),
        kinds::EXPRESSION_STATEMENT => {
            let assignment = last
                .named_child(0)
                .filter(|a| a.kind() == kinds::ASSIGNMENT)?;
            let left = assignment
                .field("left")
                .filter(|l| l.kind() == kinds::IDENTIFIER)?;
            // `transfer = None`: a local the code goes on with (a `return None` is ERR001's).
            let value = assignment
                .field("right")
                .filter(|v| empty(*v, src) || v.kind() == kinds::NONE)?;
            Some(Answer::Assigned {
                name: syntax::text(left, src),
                value,
            })
        }
        _ => None,
    }
}

/// `[]`, `{}`, `()`, `set()`, `list()`, `0`, `0.0`, `Decimal(0)`, `Decimal("0")`.
fn empty(value: Node<'_>, src: &str) -> bool {
    let text: String = syntax::text(value, src)
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    matches!(
        text.as_str(),
        "[]" | "{}"
            | "()"
            | "set()"
            | "list()"
            | "dict()"
            | "tuple()"
            | "0"
            | "0.0"
            | "Decimal(0)"
            | "Decimal(\"0\")"
            | "Decimal('0')"
    )
}

/// The read the `try` guards, and the name that tells what it reads: a method called on a
/// client, a repository or a provider whose name says it reads (`list_chargebacks`,
/// `fetch_payment`, `usage_total`), or an SDK's read of a resource handed to a helper that
/// calls it (`self._call("refund.list", stripe.Refund.list, charge=charge_id)`).
fn lookup_in<'t>(idx: &NodeIndex<'t>, body: Node<'t>, src: &'t str) -> Option<(Node<'t>, &'t str)> {
    idx.within(body, kinds::CALL).iter().find_map(|&call| {
        if reads(call, src) {
            return Some((call, syntax::callee_name(call, src)));
        }
        let handed = call
            .field("arguments")
            .into_iter()
            .flat_map(crate::python::named_children)
            .find(|a| resource_read(*a, src))?;
        Some((call, syntax::text(handed, src)))
    })
}

/// A client's method named for a read (`bestellung_abfragen`) whose `try` sends a `GET` of its
/// own (`self._anfrage("GET", f"/v2/checkout/orders/{order_id}")`): the lookup is the method's,
/// named by it.
fn own_get<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    body: Node<'t>,
    src: &'t str,
) -> Option<(Node<'t>, &'t str)> {
    let name = syntax::function_name(func, src);
    if !syntax::named_for_a_read(name) {
        return None;
    }
    idx.within(body, kinds::CALL)
        .iter()
        .find(|c| {
            syntax::positional_args(**c)
                .first()
                .is_some_and(|a| matches!(syntax::text(*a, src), "\"GET\"" | "'GET'"))
        })
        .map(|c| (*c, name))
}

/// An order at a payment provider (`PayPalClient.bestellung_abfragen`, `klarna.hamta_order`):
/// its captures are the money moved. Told by the order in the read's name and the provider in
/// the class around it or the receiver of the read.
fn provider_order(idx: &NodeIndex<'_>, func: Node<'_>, named: &str, src: &str) -> bool {
    let order = syntax::name_words(named).iter().any(|w| {
        matches!(
            w.as_str(),
            "order" | "orders" | "bestellung" | "ordine" | "pedido" | "commande" | "ordre"
        )
    });
    let provider = |text: &str| {
        syntax::name_words(text)
            .iter()
            .any(|w| facts::is_payment_word(w))
    };
    order
        && (idx
            .enclosing(func, kinds::CLASS_DEFINITION)
            .and_then(|c| c.field("name"))
            .is_some_and(|n| provider(syntax::text(n, src)))
            || idx.within(func, kinds::CALL).iter().any(|c| {
                syntax::callee_name(*c, src) == named
                    && syntax::receiver(*c).is_some_and(|r| provider(syntax::text(r, src)))
            }))
}

/// A call whose name says it reads, on a receiver: `client.list_chargebacks(...)`.
fn reads(call: Node<'_>, src: &str) -> bool {
    let name = syntax::callee_name(call, src);
    reads_by_name(name)
        && syntax::receiver(call).is_some()
        && !facts::only_records(syntax::callee(call, src))
}

fn reads_by_name(name: &str) -> bool {
    // Its verbs, in English and the languages payment code is written in (`hamta_order`,
    // `bestellung_abfragen`), are `syntax::named_for_a_read`'s.
    if syntax::named_for_a_read(name) {
        return true;
    }
    let words = syntax::name_words(name);
    words
        .iter()
        .any(|w| matches!(w.as_str(), "total" | "totals" | "summary" | "sum"))
        // `verify_transaction`, `verify_payment`: Paystack's and Flutterwave's read of where a
        // payment stands.
        || words.first().is_some_and(|w| w == "verify") && names_money_moved(name)
}

/// `stripe.Refund.list`: a read of an SDK's resource class, named by the class.
fn resource_read(node: Node<'_>, src: &str) -> bool {
    if node.kind() != kinds::ATTRIBUTE {
        return false;
    }
    let text = syntax::text(node, src);
    let mut parts = text.rsplit('.');
    let (Some(method), Some(class)) = (parts.next(), parts.next()) else {
        return false;
    };
    class.starts_with(|c: char| c.is_ascii_uppercase()) && reads_by_name(method)
}

/// Whether a name says it reads money already moved: `find_payout`, `list_transfers`.
pub(super) fn names_a_read_of_money_moved(name: &str) -> bool {
    reads_by_name(name) && names_money_moved(name)
}

/// Whether `call` reads money already moved: `stripe.list_transfers(...)`,
/// `mollie.list_customer_payments(...)`, `bank.find_payment(...)`.
pub(super) fn reads_money_moved(call: Node<'_>, src: &str) -> bool {
    reads(call, src) && names_a_read_of_money_moved(syntax::callee_name(call, src))
}

/// Whether the function gives another answer where the lookup worked: a `return` with a value,
/// outside the handler.
fn returns_otherwise(idx: &NodeIndex<'_>, func: Node<'_>, clause: Node<'_>, src: &str) -> bool {
    idx.within(func, kinds::RETURN_STATEMENT).iter().any(|r| {
        !syntax::contains(clause, *r)
            && idx
                .enclosing(*r, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| f.id() == func.id())
            && syntax::return_value(*r).is_some_and(|v| !empty(v, src) && v.kind() != kinds::NONE)
    })
}

/// The answer of a search whose `try` skips a failed item: the `for` loop right around the
/// `try` returns what matched, and the function answers none (`return None`, `return []`, or
/// falls off its end) once the loop ends. A loop that goes on to something else after a
/// failure (a batch that sends the rest) is no search.
fn search_ends_empty<'s>(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    try_statement: Node<'_>,
    src: &'s str,
) -> Option<&'s str> {
    let block = try_statement.parent()?;
    let lp = block
        .parent()
        .filter(|l| l.kind() == kinds::FOR_STATEMENT)?;
    let found = idx.within(block, kinds::RETURN_STATEMENT).iter().any(|r| {
        idx.enclosing(*r, kinds::FUNCTION_DEFINITION)
            .is_some_and(|f| f.id() == func.id())
            && syntax::return_value(*r).is_some_and(|v| !empty(v, src) && v.kind() != kinds::NONE)
    });
    if !found {
        return None;
    }
    let mut next = lp.next_named_sibling();
    while next.is_some_and(|n| n.kind() == kinds::COMMENT) {
        next = next.and_then(|n| n.next_named_sibling());
    }
    match next {
        Some(ret) if ret.kind() == kinds::RETURN_STATEMENT => match syntax::return_value(ret) {
            None => Some("None"),
            Some(v) if v.kind() == kinds::NONE || empty(v, src) => Some(syntax::text(v, src)),
            Some(_) => None,
        },
        None if lp
            .parent()
            .and_then(|b| b.parent())
            .is_some_and(|f| f.id() == func.id()) =>
        {
            Some("None")
        }
        _ => None,
    }
}

/// Whether the local is read after the `try`, where the code decides on it.
/// Whether, after the `try`, the function tests the local for `None` first (`if transfer is
/// None:`, `if not state:`): what it does then is its decision for a failed lookup.
fn none_handled(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    try_statement: Node<'_>,
    name: &str,
    src: &str,
) -> bool {
    idx.within(func, kinds::IF_STATEMENT).iter().any(|i| {
        i.start_byte() > try_statement.end_byte()
            && i.field("condition").is_some_and(|c| {
                let text: String = syntax::text(c, src)
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                text == format!("{name} is None") || text == format!("not {name}")
            })
    })
}

fn read_after(try_statement: Node<'_>, func: Node<'_>, name: &str, src: &str) -> bool {
    src.get(try_statement.end_byte()..func.end_byte())
        .is_some_and(|after| syntax::has_word(after, name))
}

/// A name for money already moved, or for a record of it: `list_chargebacks`,
/// `_already_captured`, `usage_total`, `landed`, `refunds`.
fn names_money_moved(name: &str) -> bool {
    let words = syntax::name_words(name);
    // `list_payment_methods`: the means to pay, not a payment.
    if words.iter().any(|w| {
        matches!(
            w.as_str(),
            "method" | "methods" | "card" | "cards" | "plan" | "plans"
        )
    }) {
        return false;
    }
    words.iter().any(|w| {
        let w = w.as_str();
        [
            "charge",
            "capture",
            "refund",
            "payment",
            "payout",
            "transfer",
            "dispute",
            "settle",
            // `rimborsi_della_transazione`, `pobierz_zwroty`, `reembolsos_del_pago`.
            "rimbors",
            "reembols",
            "rembours",
            "erstattung",
            "zwrot",
            "terugbetal",
            // `stam_av_debitering`, `hamta_aterbetalningar`, `erfassung_abfragen`.
            "debiter",
            "aterbetal",
            "utbetal",
            "erfassung",
            "auszahl",
            // `chercher_vente`, `buscar_venda`, `cerca_vendita`, `buscar_cobro`, `pobierz_platnosc`.
            "vente",
            "venda",
            "vendita",
            "venta",
            "cobro",
            "cobranc",
            "pagamento",
            "paiement",
            "platnosc",
            "platezh",
            "zahlung",
            "betaling",
            "addebit",
            "incass",
        ]
        .iter()
        .any(|stem| w.starts_with(stem))
            || matches!(
                w,
                "captured"
                    | "paid"
                    | "landed"
                    | "usage"
                    | "balance"
                    | "transactions"
                    | "transaction"
                    | "debits"
                    | "sale"
                    | "sales"
            )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_money_moved_are_told_from_other_reads() {
        for moved in [
            "list_chargebacks",
            "_already_captured",
            "usage_total",
            "landed",
            "refunds",
            "find_sales",
            "Refund.list",
            "chercher_vente",
        ] {
            assert!(names_money_moved(moved), "{moved}");
        }
        for other in [
            "list_plans",
            "get_customer",
            "saved_cards",
            "fetch_rates",
            "list_payment_methods",
        ] {
            assert!(!names_money_moved(other), "{other}");
        }
    }
}
