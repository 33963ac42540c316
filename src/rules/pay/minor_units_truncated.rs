//! PAY004 minor-units-truncated: an amount turned into minor units as `int(amount * 100)`.
//! `int` truncates: a float amount (`19.99 * 100` is `1998.9999999999998`) comes out a cent
//! short, and a `Decimal` with more places than the currency keeps (a fee at a rate, a share) is
//! cut down instead of rounded. The hundred is also the currency's exponent written in, wrong
//! for JPY (none) and KWD (three).
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "PAY004",
    doc: include_str!("../../../rules/pay/PAY004.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is an `int(...)` of a product with a hundred (or `10 ** exponent`).
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && s.mentions(&["100", "10**", "10 **"]) && s.mentions(&["int("])
}

/// Words of an amount beside the vocabulary's money arguments: what is split, kept or paid out.
const AMOUNT_WORDS: &[&str] = &[
    "net", "gross", "fee", "fees", "subtotal", "balance", "cost", "share", "refund", "payout",
    "tip", "tax", "discount", "charge",
];

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    for &call in idx.all(kinds::CALL) {
        if syntax::callee(call, src) != "int" {
            continue;
        }
        let args = syntax::positional_args(call);
        let [arg] = args.as_slice() else {
            continue;
        };
        let Some(amount) = hundredfold(unwrap(*arg), src) else {
            continue;
        };
        let amount_text = syntax::text(amount, src);
        // A product (`hours * hourly_rate`) is money whatever its factors are called: a rate
        // there is a price, not the percentage `int(fee_rate * 100)` turns into basis points.
        let product = amount.kind() == kinds::BINARY_OPERATOR
            && amount.field("operator").map(|o| o.kind()) == Some("*");
        let money = names_an_amount(cx, amount_text)
            || product && words(amount_text).any(|w| matches!(w.as_str(), "rate" | "price"));
        if !money || in_minor_units(amount_text, product) {
            continue;
        }
        let func = idx.enclosing(call, kinds::FUNCTION_DEFINITION);
        let kind = number_kind(idx, src, func, amount);
        let currency_in_sight =
            func.is_some_and(|f| syntax::contains_lowercase(syntax::text(f, src), "currency"));
        // A `Decimal` of two places times a hundred is exact: only the currency's exponent is
        // then at stake, and only where the currency varies.
        if kind == Kind::Decimal && !currency_in_sight {
            continue;
        }
        let finding = cx
            .report(&RULE, call)
            .arg("expr", syntax::normalized(call, src))
            .arg("amount", syntax::normalized(amount, src));
        match kind {
            Kind::Float => finding.note("float"),
            Kind::Decimal => finding.note("decimal"),
            Kind::Unknown => finding.note("either"),
        };
        if currency_in_sight {
            finding.note("exponent");
        }
    }
}

fn unwrap(node: Node<'_>) -> Node<'_> {
    if node.kind() == kinds::PARENTHESIZED_EXPRESSION {
        node.named_child(0).map_or(node, unwrap)
    } else {
        node
    }
}

/// `x` of `x * 100` or `100 * x`.
fn hundredfold<'t>(product: Node<'t>, src: &str) -> Option<Node<'t>> {
    if product.kind() != kinds::BINARY_OPERATOR
        || product.field("operator").map(|o| o.kind()) != Some("*")
    {
        return None;
    }
    let (left, right) = (product.field("left")?, product.field("right")?);
    // `100`, or the currency's scale `10 ** exponent`.
    let hundred = |n: Node<'_>| {
        matches!(n.kind(), kinds::INTEGER | kinds::FLOAT)
            && matches!(syntax::text(n, src), "100" | "100.0")
            || n.kind() == kinds::BINARY_OPERATOR
                && n.field("operator").map(|o| o.kind()) == Some("**")
                && n.field("left")
                    .is_some_and(|l| syntax::text(l, src) == "10")
    };
    if hundred(right) {
        Some(unwrap(left))
    } else if hundred(left) {
        Some(unwrap(right))
    } else {
        None
    }
}

/// Whether the text names money: `amount`, `order.total`, `net`, `item.unit_price`.
fn names_an_amount(cx: &Ctx<'_>, text: &str) -> bool {
    words(text).any(|w| cx.vocab.is_money_argument(&w) || AMOUNT_WORDS.contains(&w.as_str()))
}

/// Already minor units, or a percentage: `amount_cents`, `total_minor`, `rate`, `ratio` (not
/// in a `product`, where a rate is a price per unit).
fn in_minor_units(text: &str, product: bool) -> bool {
    words(text).any(|w| {
        matches!(w.as_str(), "cents" | "cent" | "minor" | "pence" | "kopecks")
            || !product && matches!(w.as_str(), "rate" | "ratio" | "percent" | "pct")
    })
}

fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Float,
    Decimal,
    Unknown,
}

/// What the amount is, as far as the function shows: `float(...)` or a `float` annotation,
/// `Decimal(...)` or a `Decimal` annotation, on the expression, the name's assignment or its
/// parameter.
fn number_kind(idx: &NodeIndex<'_>, src: &str, func: Option<Node<'_>>, amount: Node<'_>) -> Kind {
    let of_text = |text: &str| {
        if text.contains("float") {
            Some(Kind::Float)
        } else if text.contains("Decimal") {
            Some(Kind::Decimal)
        } else {
            None
        }
    };
    let own = syntax::text(amount, src);
    if let Some(kind) = of_text(own) {
        return kind;
    }
    // `attrs.pop("amount")` in a serializer's `validate`: what its `DecimalField` made.
    if reads_a_decimal_field(own, src) {
        return Kind::Decimal;
    }
    // `body.amount` of a model of the file that declares `amount: Decimal = Field(...)`
    // (pydantic, a dataclass).
    if amount.kind() == kinds::ATTRIBUTE
        && let Some(field) = amount.field("attribute")
        && annotated_decimal(src, syntax::text(field, src))
    {
        return Kind::Decimal;
    }
    let (Some(func), kinds::IDENTIFIER) = (func, amount.kind()) else {
        return Kind::Unknown;
    };
    // Every assignment before, not the last only: `value = Decimal(raw)` in a `try` and
    // `value = None` in its handler still make a `Decimal` when there is one.
    let assigned: Vec<Kind> = idx
        .within(func, kinds::ASSIGNMENT)
        .iter()
        .filter(|a| a.end_byte() <= amount.start_byte())
        .filter(|a| a.field("left").is_some_and(|l| syntax::text(l, src) == own))
        .filter_map(|a| of_text(syntax::text(*a, src)))
        .collect();
    if assigned.contains(&Kind::Float) {
        return Kind::Float;
    }
    // `amount = body.validated_data.get("amount")` of a serializer or form of the file that
    // declares `amount = serializers.DecimalField(...)`: a `Decimal`.
    let from_a_decimal_field = idx
        .within(func, kinds::ASSIGNMENT)
        .iter()
        .filter(|a| a.end_byte() <= amount.start_byte())
        .filter(|a| a.field("left").is_some_and(|l| syntax::text(l, src) == own))
        .filter_map(|a| a.field("right"))
        .any(|value| reads_a_decimal_field(syntax::text(value, src), src));
    if from_a_decimal_field {
        return Kind::Decimal;
    }
    // `.quantize(...)` is a method of `Decimal` alone.
    if !assigned.is_empty() || syntax::text(func, src).contains(&format!("{own}.quantize(")) {
        return Kind::Decimal;
    }
    let parameter = func
        .field("parameters")
        .map(crate::python::named_children)
        .unwrap_or_default()
        .into_iter()
        .find(|p| syntax::parameter_name(*p, src) == own)
        .map(|p| syntax::text(p, src));
    parameter.and_then(of_text).unwrap_or(Kind::Unknown)
}

/// `body.validated_data.get("amount")`, `form.cleaned_data["amount"]`, `attrs.pop("amount")` (a
/// serializer's `validate`) of a field the file declares as a `DecimalField`.
fn reads_a_decimal_field(text: &str, src: &str) -> bool {
    (text.contains("validated_data")
        || text.contains("cleaned_data")
        || text.starts_with("attrs.")
        || text.starts_with("attrs["))
        && text
            .split(['"', '\''])
            .nth(1)
            .is_some_and(|field| declared_decimal(src, field))
}

/// Whether a class of the file annotates `field` as a `Decimal` (`amount: Decimal = Field(gt=0,
/// decimal_places=2)`, `amount: condecimal(decimal_places=2)`).
fn annotated_decimal(src: &str, field: &str) -> bool {
    !field.is_empty()
        && src.match_indices(field).any(|(at, _)| {
            let line_start = src[..at]
                .rsplit('\n')
                .next()
                .is_some_and(|head| !head.is_empty() && head.trim().is_empty());
            let rest = &src[at + field.len()..];
            let line = rest.split('\n').next().unwrap_or(rest);
            line_start
                && line.trim_start().starts_with(':')
                && (line.contains("Decimal") || line.contains("condecimal("))
        })
}

/// Whether the file declares `field` as a decimal field of a serializer, a form or a model
/// (`amount = serializers.DecimalField(max_digits=10, decimal_places=2)`).
fn declared_decimal(src: &str, field: &str) -> bool {
    !field.is_empty()
        && src.match_indices(field).any(|(at, _)| {
            let before = src[..at].chars().next_back();
            let line_start = before.is_none_or(|c| c == ' ' || c == '\n');
            let rest = &src[at + field.len()..];
            let line = rest.split('\n').next().unwrap_or(rest);
            line_start && line.trim_start().starts_with('=') && line.contains("DecimalField(")
        })
}
