//! PAY044 currency-left-to-default: a call to a function of the change that takes a currency
//! with a fixed default (`currency: str = "USD"`) leaves it out, in a function that has the
//! record's own currency at hand (`charge.currency` a few lines up). The call charges the amount
//! in the default currency: a EUR order of 49.00 is charged 49.00 USD, and an amount in yen's
//! minor units is taken for cents.
//!
//! The default is read from the callee's own parameters (`FunctionFacts::currency_default`),
//! the currency at hand from the calling function's code. Left alone: a call that passes the
//! currency by keyword, by position or in a `**` dict that may hold it, and a caller that never speaks of a
//! currency (a single-currency shop).
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY044",
    doc: include_str!("../../../rules/pay/PAY044.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a call in code, not in a test, in a file that speaks of a currency.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && s.mentions(&["currency"])
}

/// `currency="USD"` of a parameter named for a currency with a literal code as its default, as
/// `(parameter, code)`: what `FunctionFacts::currency_default` keeps.
pub(crate) fn currency_default(func: Node<'_>, src: &str) -> Option<Box<str>> {
    let params = func.field("parameters")?;
    memchr::memmem::find(syntax::text(params, src).as_bytes(), b"currency")?;
    crate::python::named_children(params)
        .into_iter()
        .find_map(|p| {
            if !matches!(
                p.kind(),
                kinds::DEFAULT_PARAMETER | kinds::TYPED_DEFAULT_PARAMETER
            ) {
                return None;
            }
            let name = syntax::parameter_name(p, src);
            let value = p.field("value")?;
            let code = syntax::string_value(value, src)?;
            let is_code = code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase());
            (syntax::name_words(name).iter().any(|w| w == "currency") && is_code)
                .then(|| format!("{name}={code}").into())
        })
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    for &call in idx.all(kinds::CALL) {
        let name = idx.callee_name(call, src);
        if name.is_empty() {
            continue;
        }
        let Some(defined) = cx
            .change
            .code_definitions_with(cx.side, name, |f| f.currency_default.as_deref())
        else {
            continue;
        };
        let Some(&(file, f, default)) = defined.first() else {
            continue;
        };
        let (params, path, line) = (f.params.clone(), file.path.clone(), f.lines.0);
        let Some((param, code)) = default.split_once('=') else {
            continue;
        };
        let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        if crate::rules::idem::key_made_per_attempt::gives(idx, func, call, param, &params, src) {
            continue;
        }
        let Some(at_hand) = currency_at_hand(idx, func, call, src) else {
            continue;
        };
        let finding = cx
            .report(&RULE, call)
            .arg("function", facts::qualname(func, idx, src))
            .arg("callee", syntax::callee(call, src).to_string())
            .arg("param", param.to_string())
            .arg("code", code.to_string())
            .arg("defined", format!("{path}:{line}"))
            .arg("at_hand", syntax::normalized(at_hand, src))
            .arg("at_hand_line", syntax::lines(at_hand).0.to_string());
        finding.note("default");
    }
}

/// A read of a currency in `func` other than in `call`: `charge.currency`, `order["currency"]`,
/// `sub.currency_code`, the record's own.
fn currency_at_hand<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    call: Node<'_>,
    src: &str,
) -> Option<Node<'t>> {
    let names_currency = |a: &Node<'_>| {
        a.field("attribute").is_some_and(|n| {
            syntax::name_words(syntax::text(n, src))
                .iter()
                .any(|w| w == "currency")
        })
    };
    let in_function = idx
        .within(func, kinds::ATTRIBUTE)
        .iter()
        .copied()
        .find(|a| !syntax::contains(call, *a) && names_currency(a));
    // Or the currency of the record whose amount the call takes (`amount=charge.amount`), as
    // the file reads it elsewhere (`charge.currency`).
    in_function.or_else(|| {
        let record = syntax::keyword_args(call, src)
            .into_iter()
            .filter(|(k, _)| syntax::name_words(k).iter().any(|w| w == "amount"))
            .find_map(|(_, v)| {
                (v.kind() == kinds::ATTRIBUTE)
                    .then(|| v.field("object"))
                    .flatten()
                    .filter(|o| o.kind() == kinds::IDENTIFIER)
            })
            .map(|o| syntax::text(o, src))?;
        idx.all(kinds::ATTRIBUTE).iter().copied().find(|a| {
            names_currency(a)
                && a.field("object")
                    .is_some_and(|o| syntax::text(o, src) == record)
        })
    })
}
