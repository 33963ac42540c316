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
    // `efund` first: it rules out most files in one pass.
    !s.facts.is_test
        && s.mentions(&["efund"])
        && s.mentions(&["transfer_data", "refund_application_fee"])
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let destination = destination_charge(cx, idx, src);
    for &call in idx.all(kinds::CALL) {
        if syntax::has_dict_splat(call) {
            continue;
        }
        let callee = syntax::callee(call, src);
        let refund = match destination {
            Some(_) => refunds_on_stripe(callee),
            // With no destination charge in sight, a refund that gives back the platform's
            // application fee (`refund_application_fee=True`): only a charge made for a
            // connected account has one.
            None => fee_refunded(call, callee, src),
        };
        if !refund {
            continue;
        }
        // A refund on the connected account is a direct charge's: nothing was transferred.
        if syntax::text(call, src).contains("stripe_account") || on_an_account(call, src) {
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
            .arg("refund", crate::rules::pay::first_line(call, src));
        match destination {
            Some(charge) => finding
                .arg("charge", crate::rules::pay::first_line(charge, src))
                .arg("line", syntax::lines(charge).0.to_string()),
            None => finding.note("fee"),
        };
        finding.function = function
            .map(|f| facts::qualname(f, idx, src))
            .unwrap_or_default();
    }
}

/// A refund call (`create_refund(...)`, `Refund.create(...)`) that says
/// `refund_application_fee=`.
fn fee_refunded(call: Node<'_>, callee: &str, src: &str) -> bool {
    let name = callee.rsplit('.').next().unwrap_or(callee);
    (refunds_on_stripe(callee) || syntax::name_words(name).iter().any(|w| w == "refund"))
        && syntax::keyword_arg(call, "refund_application_fee", src).is_some()
}

/// A keyword that names the connected account the call is made on (`connected_account=`,
/// `account_id=`): a direct charge's refund.
fn on_an_account(call: Node<'_>, src: &str) -> bool {
    syntax::keyword_args(call, src)
        .iter()
        .any(|(k, _)| k.contains("account"))
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
