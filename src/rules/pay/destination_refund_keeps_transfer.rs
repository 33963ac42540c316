//! PAY026 destination-refund-keeps-transfer: a Stripe refund of a payment made as a
//! destination charge (`transfer_data={"destination": ...}`: the connected account was sent its
//! share when the charge succeeded) without a word on `reverse_transfer`. Stripe's default takes
//! the whole refund out of the platform's balance and leaves the connected account the money it
//! was sent for a sale that was given back.
//!
//! Read where the file makes the destination charge and refunds too (the module that wraps
//! Stripe). Left alone: a refund that says `reverse_transfer` either way (`False` is a choice
//! too), hands its parameters in with `**`, or refunds on the connected account
//! (`stripe_account=`, a direct charge).
use tree_sitter::Node;

use crate::python::{NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY026",
    doc: include_str!("../../../rules/pay/PAY026.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a refund in a file that makes a destination charge.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && s.mentions(&["transfer_data"]) && s.mentions(&["efund"])
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let Some(destination) = destination_charge(cx, idx, src) else {
        return;
    };
    let line = syntax::lines(destination).0.to_string();
    let charge = crate::rules::pay::first_line(destination, src);
    for &call in idx.all(kinds::CALL) {
        if !refunds_on_stripe(syntax::callee(call, src)) || syntax::has_dict_splat(call) {
            continue;
        }
        // A refund on the connected account is a direct charge's: nothing was transferred.
        if syntax::text(call, src).contains("stripe_account") {
            continue;
        }
        let function = idx.enclosing(call, kinds::FUNCTION_DEFINITION);
        // `reverse_transfer` said anywhere in the function (a keyword, a key of the params
        // handed in, a flag passed down): the author decided.
        let scope = function.unwrap_or(call);
        if syntax::text(scope, src).contains("reverse_transfer") {
            continue;
        }
        let finding = cx
            .report(&RULE, call)
            .arg("refund", crate::rules::pay::first_line(call, src))
            .arg("charge", charge.clone())
            .arg("line", line.clone());
        finding.function = function
            .map(|f| facts::qualname(f, idx, src))
            .unwrap_or_default();
    }
}

/// The first payment of the file made with `transfer_data`: `stripe.PaymentIntent.create(...,
/// transfer_data={...})`, `client.payment_intents.create(params={"transfer_data": ...})`, a
/// Checkout session's `payment_intent_data={"transfer_data": ...}`.
fn destination_charge<'t>(cx: &Ctx<'_>, idx: &NodeIndex<'t>, src: &str) -> Option<Node<'t>> {
    idx.all(kinds::CALL).iter().copied().find(|&c| {
        let callee = syntax::callee(c, src);
        let sync = callee.strip_suffix("_async").unwrap_or(callee);
        (crate::rules::pay::is_payment_call(c, src, cx.vocab)
            || sync.ends_with("PaymentIntent.create")
            || sync.ends_with("payment_intents.create")
            || sync.ends_with("Session.create")
            || sync.ends_with("sessions.create"))
            && !refunds_on_stripe(callee)
            && syntax::text(c, src).contains("transfer_data")
    })
}

/// `stripe.Refund.create(...)`, `await stripe.Refund.create_async(...)`,
/// `client.refunds.create(...)` (the `StripeClient` of stripe-python 8 and later).
fn refunds_on_stripe(callee: &str) -> bool {
    [
        "Refund.create",
        "Refund.create_async",
        "refunds.create",
        "refunds.create_async",
    ]
    .iter()
    .any(|tail| {
        callee
            .strip_suffix(tail)
            .is_some_and(|head| head.is_empty() || head.ends_with('.'))
    })
}
