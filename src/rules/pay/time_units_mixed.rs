//! PAY017 time-units-mixed: a duration in one unit is weighed against, added to or subtracted
//! from a duration in another (`connected_seconds >= booked_minutes * 0.9`), with no conversion
//! between them. Where the time is billed (a call, a ride, a rental, a parking session) the
//! comparison decides what is charged: a call of thirty seconds passes for a full half hour.
//!
//! Left alone: a side that converts (`* 60`, `/ 3600`, `timedelta(minutes=...)`,
//! `.total_seconds()`), names whose unit is unclear, and code that has nothing to do with money.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY017",
    doc: include_str!("../../../rules/pay/PAY017.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding names two time units in code about money: a payment module, or one whose
/// functions pay or talk over HTTP (the facts say so without reading the text), whose text holds
/// two of them.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && (s.facts.payment_module || s.facts.functions.iter().any(|f| f.payment || f.http))
        && (units_named(s.src()) >= 2 || s.mentions(&[".seconds"]))
}

/// How many of the units a text names, by their stems (`second`, `minute`, `hour`,
/// milliseconds), stopping at two. With finders built once: the gate asks it of every file.
fn units_named(text: &str) -> usize {
    static STEMS: std::sync::LazyLock<[[memchr::memmem::Finder<'static>; 2]; 4]> =
        std::sync::LazyLock::new(|| {
            [
                ["second", "_secs"],
                ["minute", "_mins"],
                ["hour", "_hrs"],
                ["_ms", "milli"],
            ]
            .map(|pair| pair.map(memchr::memmem::Finder::new))
        });
    let mut found = 0;
    for stem in STEMS.iter() {
        if stem.iter().any(|w| w.find(text.as_bytes()).is_some()) {
            found += 1;
            if found == 2 {
                break;
            }
        }
    }
    found
}

/// A unit, in seconds.
pub(crate) fn unit_of(name: &str) -> Option<(f64, &'static str)> {
    let words = syntax::name_words(name);
    let last = words.last()?;
    Some(match last.as_str() {
        // Not `min` or `sec` alone: `price_min` is a minimum.
        "seconds" | "second" | "secs" => (1.0, "seconds"),
        "minutes" | "minute" | "mins" => (60.0, "minutes"),
        "hours" | "hour" | "hrs" => (3600.0, "hours"),
        "ms" | "millis" | "milliseconds" => (0.001, "milliseconds"),
        _ => return None,
    })
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    for &cmp in idx.all(kinds::COMPARISON_OPERATOR) {
        let is_order = cmp
            .child(1)
            .is_some_and(|o| matches!(o.kind(), ">" | ">=" | "<" | "<=" | "==" | "!="));
        if !is_order || cmp.named_child_count() != 2 {
            continue;
        }
        let (Some(left), Some(right)) = (cmp.named_child(0), cmp.named_child(1)) else {
            continue;
        };
        if units_named(syntax::text(cmp, src)) < 2 {
            continue;
        }
        if let Some(((a, ua), (b, ub))) = side_unit(left, src).zip(side_unit(right, src))
            && ua.0 != ub.0
        {
            report(cx, idx, cmp, (a, ua.1), (b, ub.1), src);
        }
    }
    for &op in idx.all(kinds::BINARY_OPERATOR) {
        if !op.child(1).is_some_and(|o| matches!(o.kind(), "+" | "-")) {
            continue;
        }
        let (Some(left), Some(right)) = (op.field("left"), op.field("right")) else {
            continue;
        };
        if units_named(syntax::text(op, src)) < 2 {
            continue;
        }
        if let Some(((a, ua), (b, ub))) = side_unit(left, src).zip(side_unit(right, src))
            && ua.0 != ub.0
        {
            report(cx, idx, op, (a, ua.1), (b, ub.1), src);
        }
    }
    for &attribute in idx.all(kinds::ATTRIBUTE) {
        if let Some(delta) = seconds_part(idx, attribute, src) {
            let function = idx
                .enclosing(attribute, kinds::FUNCTION_DEFINITION)
                .map(|f| facts::qualname(f, idx, src))
                .unwrap_or_default();
            let finding = cx
                .report(&RULE, attribute)
                .arg("expr", syntax::text(attribute, src).to_string())
                .arg("delta", delta)
                .note("component");
            finding.function = function;
        }
    }
}

/// `(lesson.starts_at - now).seconds`, or `.seconds` of a name set to such a difference: the
/// seconds part of a `timedelta` (0 to 86,399), its days left out, read as the whole duration.
/// Left alone where the function reads the same difference's `.days` too. As the difference.
fn seconds_part(idx: &NodeIndex<'_>, attribute: Node<'_>, src: &str) -> Option<String> {
    let field = attribute.field("attribute")?;
    if syntax::text(field, src) != "seconds" {
        return None;
    }
    let object = attribute.field("object")?;
    let func = idx.enclosing(attribute, kinds::FUNCTION_DEFINITION)?;
    let difference = |n: Node<'_>| {
        let n = if n.kind() == kinds::PARENTHESIZED_EXPRESSION {
            n.named_child(0).unwrap_or(n)
        } else {
            n
        };
        n.kind() == kinds::BINARY_OPERATOR && n.child(1).is_some_and(|o| o.kind() == "-")
    };
    let delta = match object.kind() {
        kinds::PARENTHESIZED_EXPRESSION if difference(object) => object,
        kinds::IDENTIFIER => {
            let set = idx.assigned_before(
                Some(func),
                syntax::text(object, src),
                attribute.start_byte(),
                src,
            )?;
            if !difference(set) {
                return None;
            }
            object
        }
        _ => return None,
    };
    let text = syntax::text(delta, src);
    let days = format!("{text}.days");
    (!syntax::text(func, src).contains(&days)).then(|| text.to_string())
}

fn report(
    cx: &mut Ctx<'_>,
    idx: &NodeIndex<'_>,
    at: Node<'_>,
    (a, ua): (&str, &str),
    (b, ub): (&str, &str),
    src: &str,
) {
    let function = idx
        .enclosing(at, kinds::FUNCTION_DEFINITION)
        .map(|f| facts::qualname(f, idx, src))
        .unwrap_or_default();
    let finding = cx
        .report(&RULE, at)
        .arg("expr", crate::rules::pay::first_line(at, src))
        .arg("a", a.to_string())
        .arg("a_unit", ua.to_string())
        .arg("b", b.to_string())
        .arg("b_unit", ub.to_string());
    finding.function = function;
}

/// The one time-named name a side of an expression reads, with its unit, when nothing on that
/// side converts it (`* 60`, `/ 1000`, `timedelta(...)`, `.total_seconds()`, a `_per_` rate).
fn side_unit<'s>(side: Node<'_>, src: &'s str) -> Option<(&'s str, (f64, &'static str))> {
    let text = syntax::text(side, src);
    if converts(text) {
        return None;
    }
    let mut found: Option<(&'s str, (f64, &'static str))> = None;
    for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.')) {
        let last = word.rsplit('.').next().unwrap_or(word);
        if last.is_empty() || last.contains("per_") {
            continue;
        }
        if let Some(unit) = unit_of(last) {
            match found {
                Some((_, u)) if u.0 != unit.0 => return None,
                Some(_) => {}
                None => found = Some((word, unit)),
            }
        }
    }
    found
}

/// Text that turns one unit into another.
fn converts(text: &str) -> bool {
    let numbers = text
        .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .map(|n| n.trim_matches('.').replace('_', ""));
    let factor = numbers.into_iter().any(|n| {
        matches!(
            n.as_str(),
            "60" | "60.0"
                | "3600"
                | "3600.0"
                | "1000"
                | "1000.0"
                | "1e3"
                | "60000"
                | "3600000"
                | "86400"
                | "86400000"
                | "1440"
        )
    });
    factor
        || [
            "timedelta",
            "total_seconds",
            "SECONDS_PER",
            "MINUTE",
            "HOUR",
            "to_seconds",
            "to_minutes",
        ]
        .iter()
        .any(|w| text.contains(w))
}
