//! HTTP001 scalar-timeout: one number as the timeout of an httpx or requests call (or of an
//! `httpx.Client`), which bounds the TCP connect as long as the read.
use tree_sitter::Node;

use super::{HttpCall, Lib};
use crate::python::{Fields, kinds, syntax};
use crate::review::Severity;
use crate::rules::{Check, Ctx, Gate, Local, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "HTTP001",
    doc: include_str!("../../../rules/http/HTTP001.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Where the number comes from.
enum Source<'t> {
    /// `timeout=15.0` in the call.
    Literal(Node<'t>),
    /// `timeout=timeout`, a parameter whose default is the number.
    Parameter(Node<'t>),
    /// `timeout=TIMEOUT`, a module constant holding the number.
    Constant(Node<'t>, String),
}

/// Every finding is a scalar timeout longer than a short one, on a requests or httpx call.
fn gate(s: &Scan<'_>) -> bool {
    super::calls_for_gates(s).iter().any(|call| {
        !matches!(call.lib, Lib::Aiohttp | Lib::Urllib | Lib::Urllib3)
            && scalar_timeout(s, call).is_some_and(|(value, _)| {
                !seconds(&value).is_some_and(|s| s <= SHORT_ENOUGH_SECONDS)
            })
    })
}

fn check(cx: &mut Ctx<'_>) {
    let mut reported = Vec::new();
    for call in super::http_calls(cx) {
        if matches!(call.lib, Lib::Aiohttp | Lib::Urllib | Lib::Urllib3) {
            continue;
        }
        let Some((value, source)) = scalar_timeout(cx, &call) else {
            continue;
        };
        // A short scalar bounds connect tightly enough: with `timeout=5` a dead network costs
        // seconds, not the tens of seconds per attempt that make the split worth asking for.
        if seconds(&value).is_some_and(|s| s <= SHORT_ENOUGH_SECONDS) {
            continue;
        }
        let at = match &source {
            Source::Literal(n) | Source::Parameter(n) | Source::Constant(n, _) => *n,
        };
        if reported.contains(&at.id()) {
            continue;
        }
        reported.push(at.id());
        let on_path = super::on_money_path(cx, call.node);
        let fix = match call.lib {
            Lib::Httpx => format!("httpx.Timeout({value}, connect=3.0)"),
            _ => format!("timeout=(3.05, {value})"),
        };
        let lib = if call.lib == Lib::Httpx {
            "httpx"
        } else {
            "requests"
        };
        let call_line = syntax::keyword_arg(call.node, "timeout", cx.src())
            .map_or_else(|| syntax::lines(call.node), syntax::lines)
            .0
            .to_string();
        let finding = cx
            .report(&RULE, at)
            .arg("value", value)
            .arg("lib", lib)
            .arg("fix", fix)
            .arg("call_line", call_line);
        if call.constructor {
            finding.note("client");
        }
        match source {
            Source::Parameter(_) => {
                finding.note("parameter");
            }
            Source::Constant(_, name) => {
                finding.arg("constant", name).note("constant");
            }
            Source::Literal(_) => {}
        }
        if !on_path {
            finding.severity(Severity::Nit);
        }
    }
}

/// The number a call's `timeout=` comes down to, and where it is written.
fn scalar_timeout<'t>(cx: &impl Local<'t>, call: &HttpCall<'t>) -> Option<(String, Source<'t>)> {
    let src = cx.src();
    let value = syntax::keyword_arg(call.node, "timeout", src)?;
    if is_number(value, src) {
        return Some((
            syntax::normalized(value, src),
            Source::Literal(value.parent()?),
        ));
    }
    if value.kind() != kinds::IDENTIFIER {
        return None;
    }
    let name = syntax::text(value, src);
    if let Some((param, default)) = parameter_default(cx, call.node, name) {
        if is_number(default, src) {
            return Some((syntax::normalized(default, src), Source::Parameter(param)));
        }
        // `timeout: float = DEFAULT_TIMEOUT`: the constant decides.
        if default.kind() == kinds::IDENTIFIER {
            let constant = syntax::text(default, src);
            let number = module_constant(cx, constant)?;
            return Some((number, Source::Parameter(param)));
        }
        return None;
    }
    let number = module_constant(cx, name)?;
    Some((number, Source::Constant(value.parent()?, name.to_string())))
}

/// A literal number (or arithmetic of literals such as `2 * 7.5`).
/// A scalar timeout this short is not worth a comment.
const SHORT_ENOUGH_SECONDS: f64 = 5.0;

/// The number of seconds a timeout text evaluates to, for literals and simple arithmetic.
fn seconds(value: &str) -> Option<f64> {
    let mut product = 1.0;
    for factor in value.split('*') {
        product *= factor.trim().replace('_', "").parse::<f64>().ok()?;
    }
    Some(product)
}

fn is_number(node: Node<'_>, src: &str) -> bool {
    match node.kind() {
        kinds::FLOAT | kinds::INTEGER => true,
        kinds::BINARY_OPERATOR | kinds::UNARY_OPERATOR | kinds::PARENTHESIZED_EXPRESSION => {
            let text = syntax::text(node, src);
            text.chars().any(|c| c.is_ascii_digit())
                && text
                    .chars()
                    .all(|c| c.is_ascii_digit() || " \t.+-*/()_".contains(c))
        }
        _ => false,
    }
}

/// The parameter `name` of the function enclosing `at`, with its default value.
fn parameter_default<'t>(
    cx: &impl Local<'t>,
    at: Node<'_>,
    name: &str,
) -> Option<(Node<'t>, Node<'t>)> {
    let func = cx.index()?.enclosing(at, kinds::FUNCTION_DEFINITION)?;
    let found = syntax::defaulted_parameter(func, name, cx.src())?;
    Some((found, found.field("value")?))
}

/// The number a module-level `NAME = 15.0` assigns.
fn module_constant<'a>(cx: &impl Local<'a>, name: &str) -> Option<String> {
    let (idx, src) = (cx.index()?, cx.src());
    idx.all(kinds::ASSIGNMENT)
        .iter()
        .filter(|a| idx.enclosing(**a, kinds::FUNCTION_DEFINITION).is_none())
        .filter(|a| {
            a.field("left")
                .is_some_and(|l| syntax::text(l, src) == name)
        })
        .filter_map(|a| a.field("right"))
        .next_back()
        .filter(|r| is_number(*r, src))
        .map(|r| syntax::normalized(r, src))
}
