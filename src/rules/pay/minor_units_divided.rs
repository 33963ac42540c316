//! PAY010 minor-units-divided-by-a-hundred: an amount in minor units is turned back into the
//! currency's unit by dividing it by a hundred (`amount_minor / 100`, `f"{cents / 100:.2f}"`) in
//! code where the currency varies. A hundred is the exponent of EUR and USD only: a JPY amount
//! (no minor unit) is sent a hundred times too small, a KWD one (three places) ten times too
//! large, or the provider refuses the request.
//!
//! Left alone: code that handles the exponent (it speaks of zero-decimal currencies, exponents
//! or JPY), and code that never mentions a currency (one currency, by design).
use tree_sitter::Node;

use crate::python::{Fields, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "PAY010",
    doc: include_str!("../../../rules/pay/PAY010.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding divides by a hundred in a file that names a currency.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && s.mentions(&["100"]) && s.mentions(&["currency", "Currency", "CURRENCY"])
}

/// Words of a name that hold an amount in minor units.
fn in_minor_units(text: &str) -> bool {
    syntax::name_words(text).iter().any(|w| {
        matches!(
            w.as_str(),
            "cents" | "cent" | "minor" | "pence" | "paise" | "kopecks" | "centavos"
        )
    })
}

/// Words of code that knows currencies differ in their exponent.
const EXPONENT_AWARE: &[&str] = &[
    "zero_decimal",
    "exponent",
    "decimal_places",
    "minor_unit",
    "decimals",
    "jpy",
    "quantize",
];

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    if cx.facts.is_some_and(|f| f.is_test) {
        return;
    }
    for &division in idx.all(kinds::BINARY_OPERATOR) {
        if !matches!(
            division.field("operator").map(|o| o.kind()),
            Some("/" | "//")
        ) {
            continue;
        }
        let (Some(left), Some(right)) = (division.field("left"), division.field("right")) else {
            continue;
        };
        if !a_hundred(right, src) || !in_minor_units(syntax::text(left, src)) {
            continue;
        }
        let Some(func) = idx.enclosing(division, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let text = syntax::text(func, src).to_ascii_lowercase();
        if !text.contains("currency") || EXPONENT_AWARE.iter().any(|w| text.contains(w)) {
            continue;
        }
        cx.report(&RULE, division)
            .arg("expr", syntax::normalized(division, src))
            .arg(
                "amount",
                syntax::text(crate::rules::pay::unwrap_conversion(left, src), src).to_string(),
            );
    }
}

/// `100`, `100.0`, `Decimal(100)`, `Decimal("100")`.
fn a_hundred(node: Node<'_>, src: &str) -> bool {
    let text = syntax::text(node, src).replace(['"', '\''], "");
    matches!(text.as_str(), "100" | "100.0" | "Decimal(100)")
}
