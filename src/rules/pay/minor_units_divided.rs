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
use crate::review::Severity;
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "PAY010",
    doc: include_str!("../../../rules/pay/PAY010.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding divides or multiplies by a hundred (`scaleb(2)`) in a file that names a
/// currency.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(&["100", "scaleb(2)"])
        && s.mentions(&["currency", "Currency", "CURRENCY"])
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
    let Some((idx, src)) = cx.code() else {
        return;
    };
    multiplied(cx);
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
        // `authorised_minor * TIP_TOLERANCE_PERCENT // 100`: a percentage of an amount in minor
        // units, still in minor units.
        if left.kind() == kinds::BINARY_OPERATOR
            && left.field("operator").is_some_and(|o| o.kind() == "*")
        {
            continue;
        }
        let Some(func) = idx.enclosing(division, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let text = syntax::text(func, src).to_ascii_lowercase();
        if !text.contains("currency") || EXPONENT_AWARE.iter().any(|w| text.contains(w)) {
            continue;
        }
        let finding = cx
            .report(&RULE, division)
            .arg("expr", syntax::normalized(division, src))
            .arg(
                "amount",
                syntax::text(crate::rules::pay::unwrap_conversion(left, src), src).to_string(),
            );
        // `f"{cents / 100:.2f} {currency}"` in `_format_amount`: the customer reads the wrong
        // figure, and nothing is charged from it.
        if shown_only(division, func, src) {
            finding.severity(Severity::Nit);
            finding.note("shown");
        }
    }
}

/// Whether the division only makes text to show: an f-string that says more than the figure
/// (`f"{cents / 100:.2f} {currency}"`, `f"Paid {amount_minor / 100}"`; a provider's field takes
/// the figure alone, `"value": f"{amount_minor / 100:.2f}"`), or a function named for showing
/// (`display_price`, `render_total`).
fn shown_only(division: Node<'_>, func: Node<'_>, src: &str) -> bool {
    let mut node = division;
    while let Some(parent) = node.parent() {
        if parent.kind() == "interpolation" {
            let Some(string) = parent.parent().filter(|s| s.kind() == kinds::STRING) else {
                return false;
            };
            let text = syntax::text(string, src);
            let figure = syntax::text(parent, src);
            let rest = text
                .replacen(figure, "", 1)
                .trim_start_matches(|c: char| c.is_ascii_alphabetic())
                .trim_matches(|c| c == '"' || c == '\'')
                .trim()
                .to_string();
            return !rest.is_empty();
        }
        if parent.id() == func.id() {
            break;
        }
        node = parent;
    }
    syntax::name_words(syntax::function_name(func, src))
        .iter()
        .any(|w| matches!(w.as_str(), "display" | "render" | "humanize" | "pretty"))
}

/// Amounts in the currency's unit turned into minor units by a hundred: `int(total * 100)`,
/// `round(price * Decimal(100))`, `total.scaleb(2)`, bound to a name of minor units
/// (`trip.fare_minor = ...`, `amount_cents=...`), where the currency varies (the function reads
/// one: `order.currency`, a `currency` parameter) or where the file converts elsewhere with a
/// helper that takes the currency (`to_minor_units(vehicle.deposit, vehicle.currency)`) and this
/// place goes around it.
fn multiplied(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let helper = currency_helper(idx, src);
    let mut found: Vec<(Node<'_>, String, &'static str)> = Vec::new();
    let scaled = idx.all(kinds::CALL).iter().filter(|c| {
        syntax::callee_name(**c, src) == "scaleb"
            && syntax::positional_args(**c)
                .first()
                .is_some_and(|a| syntax::text(*a, src) == "2")
    });
    let times = idx.all(kinds::BINARY_OPERATOR).iter().filter(|b| {
        b.field("operator").map(|o| o.kind()) == Some("*")
            && (b.field("right").is_some_and(|r| a_hundred(r, src))
                || b.field("left").is_some_and(|l| a_hundred(l, src)))
    });
    for &conversion in scaled.chain(times) {
        let Some(destination) = minor_destination(conversion, src) else {
            continue;
        };
        // `int(amount * 100)` is PAY004's, which says the currency varies there too.
        let truncated = conversion.kind() == kinds::BINARY_OPERATOR
            && conversion
                .parent()
                .and_then(|a| a.parent())
                .is_some_and(|c| c.kind() == kinds::CALL && syntax::callee_name(c, src) == "int");
        if truncated {
            continue;
        }
        let Some(func) = idx.enclosing(conversion, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let text = syntax::text(func, src).to_ascii_lowercase();
        if EXPONENT_AWARE.iter().any(|w| text.contains(w)) {
            continue;
        }
        let note = if helper.is_some() {
            "helper"
        } else if text.contains(".currency")
            || text.contains("currency:")
            || text.contains("currency,")
        {
            "varies"
        } else {
            continue;
        };
        found.push((conversion, destination, note));
    }
    for (conversion, destination, note) in found {
        let finding = cx
            .report(&RULE, conversion)
            .arg("expr", syntax::normalized(conversion, src))
            .arg("amount", destination)
            .note("multiplied")
            .note(note);
        if let Some((name, line)) = &helper {
            finding
                .arg("helper", name.clone())
                .arg("helper_line", line.to_string());
        }
    }
}

/// The name of minor units a conversion's result is bound to or handed as, through `int(...)`,
/// `round(...)` and the like: `fare_minor` of `trip.fare_minor = int(total.scaleb(2))`.
fn minor_destination(conversion: Node<'_>, src: &str) -> Option<String> {
    let mut at = conversion;
    loop {
        let parent = at.parent()?;
        match parent.kind() {
            kinds::ARGUMENT_LIST | kinds::PARENTHESIZED_EXPRESSION | kinds::CALL => at = parent,
            kinds::KEYWORD_ARGUMENT => {
                let name = syntax::text(parent.field("name")?, src);
                return in_minor_units(name).then(|| name.to_string());
            }
            kinds::ASSIGNMENT => {
                let left = parent.field("left")?;
                let text = syntax::text(left, src);
                let last = text.rsplit('.').next().unwrap_or(text);
                return in_minor_units(last).then(|| last.to_string());
            }
            _ => return None,
        }
    }
}

/// A helper the file calls to turn an amount into minor units with its currency
/// (`to_minor_units(vehicle.deposit, vehicle.currency)`), and the line of its first call.
fn currency_helper(idx: &crate::python::NodeIndex<'_>, src: &str) -> Option<(String, u32)> {
    idx.all(kinds::CALL).iter().find_map(|c| {
        let name = syntax::callee_name(*c, src);
        let words = syntax::name_words(name);
        let converts = words
            .iter()
            .any(|w| matches!(w.as_str(), "minor" | "cents" | "subunits"))
            && words
                .iter()
                .any(|w| matches!(w.as_str(), "to" | "as" | "units" | "amount"));
        let with_currency = syntax::positional_args(*c)
            .iter()
            .chain(syntax::keyword_args(*c, src).iter().map(|(_, v)| v))
            .any(|a| syntax::contains_lowercase(syntax::text(*a, src), "currency"));
        (converts && with_currency).then(|| (name.to_string(), syntax::lines(*c).0))
    })
}

/// `100`, `100.0`, `Decimal(100)`, `Decimal("100")`.
fn a_hundred(node: Node<'_>, src: &str) -> bool {
    let text = syntax::text(node, src).replace(['"', '\''], "");
    matches!(text.as_str(), "100" | "100.0" | "Decimal(100)")
}
