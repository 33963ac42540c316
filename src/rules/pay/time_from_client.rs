//! PAY021 time-from-client: a request handler takes the time that prices or refunds something
//! from the request, with the server's clock only as the fallback (`ended_at =
//! data.get("locked_at") or timezone.now()`, `effective_on = date.fromisoformat(body["on"]) if
//! body.get("on") else today()`). The fallback shows the server's clock is the authority; the
//! client who sends an earlier time pays for fewer minutes, or backdates a cancellation and is
//! refunded most of the month.
//!
//! Left alone: a time the handler checks against its own clock before it uses it (`if locked_at
//! < trip.started_at`), and handlers that neither bill nor refund.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

use super::price_from_client::{body_parameters, reads_request};
use crate::rules::testing::has_word;

pub(crate) static RULE: Rule = Rule {
    id: "PAY021",
    doc: include_str!("../../../rules/pay/PAY021.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a clock read beside a request's field, in a file that speaks of money.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(&["now()", "today()", "utcnow()"])
        && s.mentions(&["request", "body", "data", "payload"])
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let choices = idx
        .all(kinds::BOOLEAN_OPERATOR)
        .iter()
        .chain(idx.all(kinds::CONDITIONAL_EXPRESSION).iter())
        .copied();
    let mut reported: Vec<usize> = Vec::new();
    for choice in choices {
        // Read first: most choices call no clock.
        let text = syntax::text(choice, src);
        if !["now(", "today(", "utcnow(", "localdate(", "localtime("]
            .iter()
            .any(|c| text.contains(c))
        {
            continue;
        }
        let Some(func) = idx.enclosing(choice, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        if reported.contains(&func.id()) {
            continue;
        }
        let Some((client, clock)) = client_or_clock(idx, func, choice, src) else {
            continue;
        };
        // The time is bound to a name the handler goes on to use.
        let Some(name) = bound_to(choice, src) else {
            continue;
        };
        if checked(idx, func, choice, name, src) || !bills(cx, idx, func, choice, name, src) {
            continue;
        }
        reported.push(func.id());
        let handler = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, choice)
            .arg("handler", handler.clone())
            .arg("client", crate::rules::pay::first_line(client, src))
            .arg("clock", syntax::text(clock, src).to_string())
            .arg("name", name.to_string());
        finding.function = handler;
    }
}

/// The side of `choice` that reads the request and the clock call of the other side:
/// `data.get("locked_at") or timezone.now()`, `parse(body["on"]) if body.get("on") else today()`.
fn client_or_clock<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    choice: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, Node<'t>)> {
    let (a, b) = match choice.kind() {
        kinds::BOOLEAN_OPERATOR => {
            if choice.child(1).map(|o| o.kind()) != Some("or") {
                return None;
            }
            (choice.field("left")?, choice.field("right")?)
        }
        // `x if cond else y`: the first and the last of its three parts.
        _ => {
            let parts = crate::python::named_children(choice);
            (*parts.first()?, *parts.get(2)?)
        }
    };
    let clock = |n: Node<'t>| -> Option<Node<'t>> {
        std::iter::once(n)
            .chain(idx.within(n, kinds::CALL).iter().copied())
            .find(|c| {
                c.kind() == kinds::CALL
                    && matches!(
                        syntax::callee_name(*c, src),
                        "now" | "today" | "utcnow" | "localdate" | "localtime"
                    )
            })
    };
    let sources = client_sources(idx, func, src);
    let from_client = |n: Node<'_>| {
        let text = syntax::text(n, src);
        reads_request(text)
            || sources
                .iter()
                .any(|s| text.contains(&format!("{s}[")) || text.contains(&format!("{s}.get(")))
    };
    if from_client(a) && !from_client(b) {
        return clock(b).map(|c| (a, c));
    }
    if from_client(b) && !from_client(a) {
        return clock(a).map(|c| (b, c));
    }
    None
}

/// The names that hold what the client sent in `func`: the body's parameters, and names bound
/// to the request's body (`data = serializer.validated_data`, `body = self.json_body()`).
fn client_sources<'s>(idx: &NodeIndex<'_>, func: Node<'_>, src: &'s str) -> Vec<&'s str> {
    let mut out = body_parameters(func, src);
    for &a in idx.within(func, kinds::ASSIGNMENT) {
        let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
            continue;
        };
        if left.kind() != kinds::IDENTIFIER {
            continue;
        }
        let text = syntax::text(right, src);
        let body_helper = right.kind() == kinds::CALL
            && syntax::name_words(syntax::callee_name(right, src))
                .iter()
                .any(|w| w == "body" || w == "payload");
        if reads_request(text) || text.ends_with("validated_data") || body_helper {
            out.push(syntax::text(left, src));
        }
    }
    out
}

/// The name the choice is assigned to: `ended_at = min(... or now(), now())`.
fn bound_to<'s>(choice: Node<'_>, src: &'s str) -> Option<&'s str> {
    let mut node = choice;
    for _ in 0..4 {
        let parent = node.parent()?;
        if parent.kind() == kinds::ASSIGNMENT {
            let left = parent.field("left")?;
            return (left.kind() == kinds::IDENTIFIER).then(|| syntax::text(left, src));
        }
        node = parent;
    }
    None
}

/// Whether the handler compares the time with one of its own before it uses it (`if locked_at <
/// trip.started_at: raise`): a bound on what the client may say. `min(..., now())` bounds only
/// the future.
fn checked(idx: &NodeIndex<'_>, func: Node<'_>, choice: Node<'_>, name: &str, src: &str) -> bool {
    idx.within(func, kinds::IF_STATEMENT).iter().any(|stmt| {
        stmt.start_byte() > choice.end_byte()
            && stmt.field("condition").is_some_and(|c| {
                let text = syntax::text(c, src);
                has_word(text, name) && ["<", ">"].iter().any(|op| text.contains(op))
            })
    })
}

/// Whether the name goes on to a call that prices or refunds: a call with the name among its
/// arguments in a handler that speaks of money, or one that reaches a payment.
fn bills(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    choice: Node<'_>,
    name: &str,
    src: &str,
) -> bool {
    let money = syntax::name_words(syntax::text(func, src)).iter().any(|w| {
        matches!(
            w.as_str(),
            "fare"
                | "price"
                | "amount"
                | "refund"
                | "charge"
                | "bill"
                | "billable"
                | "invoice"
                | "cost"
                | "fee"
                | "cents"
                | "minor"
                | "pence"
                | "prorate"
                | "prorated"
        )
    });
    idx.within(func, kinds::CALL).iter().any(|&call| {
        if call.start_byte() < choice.end_byte() {
            return false;
        }
        let handed = syntax::positional_args(call)
            .iter()
            .chain(syntax::keyword_args(call, src).iter().map(|(_, v)| v))
            .any(|a| has_word(syntax::text(*a, src), name));
        handed
            && (money
                || cx.change.reaches(
                    cx.side,
                    idx.callee_name(call, src),
                    crate::rules::reach::MAX_DEPTH,
                    &crate::rules::reach::HTTP_OR_PAYMENT,
                ))
    })
}
