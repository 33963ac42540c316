//! PAY014 paid-sum-ignores-status: what was collected is added up from every payment of an
//! order, a tab or an invoice, whatever its status (`sum(p.amount_cents for p in tab.payments)`,
//! `select(func.sum(Payment.amount_cents)).where(Payment.tab_id == tab.id)`,
//! `payments.aggregate(Sum("amount"))`), in code that knows payments have statuses, and the sum is
//! then weighed against what is owed. A pending, failed or declined payment counts as money
//! received: a bill nobody paid is closed as settled.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY014",
    doc: include_str!("../../../rules/pay/PAY014.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding adds up payments (`sum(`, `func.sum(`, `Sum(`) and reads a status.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(&["sum(", "Sum("])
        && s.mentions(&["ayment", "harge", "ransaction"])
        && s.mentions(&["status", "state"])
}

/// Words of what holds payments: a collection or a model of them.
fn names_payments(text: &str) -> bool {
    syntax::name_words(text).iter().any(|w| {
        matches!(
            w.as_str(),
            "payment" | "payments" | "charge" | "charges" | "transaction" | "transactions"
        )
    })
}

/// Words of a payment's amount.
fn names_an_amount(text: &str) -> bool {
    syntax::name_words(text).iter().any(|w| {
        matches!(
            w.as_str(),
            "amount" | "cents" | "minor" | "value" | "total" | "sum" | "paid" | "captured"
        )
    })
}

/// Words that tell the payments apart by how they ended: a filter on them leaves only money
/// that arrived.
fn tells_status(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    [
        "status",
        "state",
        "paid",
        "succeeded",
        "success",
        "completed",
        "captured",
        "settled",
        "confirmed",
        "approved",
        "authorised",
        "authorized",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    for &call in idx.all(kinds::CALL) {
        if !matches!(idx.callee_name(call, src), "sum" | "Sum") {
            continue;
        }
        let Some(sum) = payments_summed(call, src) else {
            continue;
        };
        let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        // Payments have statuses here: the function reads one (`p.status == "processing"`,
        // `tab.status = ...`) outside the sum.
        let outside = |n: &Node<'_>| !syntax::contains(sum.statement, *n);
        let statuses = idx
            .within(func, kinds::ATTRIBUTE)
            .iter()
            .filter(|a| outside(a))
            .any(|a| {
                a.field("attribute")
                    .is_some_and(|n| matches!(syntax::text(n, src), "status" | "state"))
            });
        if !statuses {
            continue;
        }
        let Some(binding) = sum
            .statement
            .named_child(0)
            .filter(|a| a.kind() == kinds::ASSIGNMENT)
            .and_then(|a| a.field("left"))
            .filter(|l| l.kind() == kinds::IDENTIFIER)
            .map(|l| syntax::text(l, src))
        else {
            continue;
        };
        let Some(weighed) = weighed_against_owed(idx, func, sum.statement, binding, src) else {
            continue;
        };
        cx.report(&RULE, call)
            .arg("function", facts::qualname(func, idx, src))
            .arg("sum", syntax::normalized(call, src))
            .arg("binding", binding.to_string())
            .arg("use", syntax::normalized(weighed, src))
            .arg("use_line", syntax::lines(weighed).0.to_string());
    }
}

/// A sum of payments' amounts with no word of a status in it, and the statement it is in.
struct Summed<'t> {
    statement: Node<'t>,
}

/// `sum(p.amount_cents for p in tab.payments)` without an `if` on the status;
/// `func.sum(Payment.amount_cents)` or `Sum("amount")` in a statement (the whole query) that
/// names payments and no status.
fn payments_summed<'t>(call: Node<'t>, src: &str) -> Option<Summed<'t>> {
    let text = syntax::call_text(call, src);
    let statement = super::statement_of(call)?;
    match (text.name, text.receiver) {
        ("sum", None) => {
            let args = syntax::positional_args(call);
            let generator = call
                .field("arguments")
                .filter(|a| a.kind() == "generator_expression")
                .or_else(|| args.first().copied())
                .filter(|g| g.kind() == "generator_expression")?;
            let body = generator.field("body")?;
            let clauses = crate::python::named_children(generator);
            let source = clauses
                .iter()
                .find(|c| c.kind() == "for_in_clause")
                .and_then(|c| c.field("right"))?;
            let filtered = clauses
                .iter()
                .any(|c| c.kind() == "if_clause" && tells_status(syntax::text(*c, src)));
            (body.kind() == kinds::ATTRIBUTE
                && names_an_amount(syntax::text(body, src).rsplit('.').next().unwrap_or(""))
                && names_payments(syntax::text(source, src))
                && !filtered)
                .then_some(Summed { statement })
        }
        ("sum", Some(receiver)) if receiver.ends_with("func") => query_sum(call, statement, src),
        ("Sum", _) => query_sum(call, statement, src),
        _ => None,
    }
}

/// A sum in a query: the query (what the statement binds or returns) names payments and no
/// status, and what is summed is an amount.
fn query_sum<'t>(call: Node<'t>, statement: Node<'t>, src: &str) -> Option<Summed<'t>> {
    let query = statement
        .named_child(0)
        .map(|n| {
            if n.kind() == kinds::ASSIGNMENT {
                n.field("right").unwrap_or(n)
            } else {
                n
            }
        })
        .map_or("", |n| syntax::text(n, src));
    let argument = syntax::text(call.field("arguments")?, src);
    (names_payments(query) && names_an_amount(argument) && !tells_status(query))
        .then_some(Summed { statement })
}

/// The first comparison after the sum of the name it was bound to with what is owed (`collected
/// >= tab.total_cents`, `paid < invoice.amount_due`).
fn weighed_against_owed<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    statement: Node<'_>,
    binding: &str,
    src: &str,
) -> Option<Node<'t>> {
    idx.within(func, kinds::COMPARISON_OPERATOR)
        .iter()
        .copied()
        .filter(|c| c.start_byte() >= statement.end_byte())
        .find(|c| {
            let (Some(left), Some(right)) = (c.named_child(0), c.named_child(1)) else {
                return false;
            };
            let (l, r) = (syntax::text(left, src), syntax::text(right, src));
            let owed = |t: &str| {
                syntax::name_words(t).iter().any(|w| {
                    matches!(
                        w.as_str(),
                        "total" | "due" | "owed" | "amount" | "price" | "balance" | "bill"
                    )
                })
            };
            (l == binding && owed(r)) || (r == binding && owed(l))
        })
}
