//! PAY018 amount-in-float: the amount handed to a payment call is worked out in binary floating
//! point: amounts read with `float(...)` and added up, or multiplied by a fractional rate kept
//! as a float (`round(gross * (1 - 0.15), 2)`). Binary floats hold most decimal fractions only
//! approximately; a sum of many amounts, a fee or a share comes out a cent off, and `round`
//! rounds the approximation, half-even at that.
//!
//! Left alone: a float turned into minor units by a hundred (PAY004 reads those), a float only
//! converted and handed on (no arithmetic), and values made `Decimal` before the arithmetic.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY018",
    doc: include_str!("../../../rules/pay/PAY018.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// How many assignments back an amount is followed.
const DEPTH: usize = 4;

/// Every finding is a payment call whose amount reads a float.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && (s.facts.functions.iter().any(|f| f.payment) && s.mentions(&["float(", "0."])
            // A POST of money to a payment URL: an amount read with `float(...)`.
            || s.facts.functions.iter().any(|f| f.http) && s.mentions(&["float("]))
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let mut reported: Vec<usize> = Vec::new();
    for &call in idx.all(kinds::CALL) {
        // A payment call, or a POST of money to a payment URL (`session.post(f"{API}/payouts",
        // json={"amount": ...})`).
        let paid = super::pays(cx, call, src) && super::passes_money(call, src, cx.vocab)
            || super::http_payment(cx, call);
        if !paid {
            continue;
        }
        let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        // `amount=...`, or `json={"amount": ...}` of a request.
        let mut amounts: Vec<Node<'_>> = Vec::new();
        for (k, v) in syntax::keyword_args(call, src) {
            if cx.vocab.is_money_argument(k) {
                amounts.push(v);
            } else if v.kind() == kinds::DICTIONARY {
                amounts.extend(
                    crate::python::named_children(v)
                        .into_iter()
                        .filter_map(|pair| {
                            let key = syntax::string_value(pair.field("key")?, src)?;
                            cx.vocab
                                .is_money_argument(key)
                                .then(|| pair.field("value"))?
                        }),
                );
            }
        }
        let mut chain = Chain::default();
        for amount in amounts {
            chain.follow(idx, func, amount, false, DEPTH, src);
        }
        let Some(at) = chain.float_arithmetic.filter(|_| !chain.minor_units) else {
            continue;
        };
        if reported.contains(&at.id()) {
            continue;
        }
        reported.push(at.id());
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, at)
            .arg("expr", crate::rules::pay::first_line(at, src))
            .arg("pay", syntax::callee(call, src).to_string())
            .arg("pay_line", syntax::lines(call).0.to_string())
            .arg("function", function.clone());
        finding.function = function;
    }
}

/// What the values an amount is made of show.
#[derive(Default)]
struct Chain<'t> {
    /// The first value met that does arithmetic on a float, or reads one that a later value
    /// does arithmetic on.
    float_arithmetic: Option<Node<'t>>,
    /// Some value multiplies by a hundred: minor units, PAY004's.
    minor_units: bool,
}

impl<'t> Chain<'t> {
    /// Reads `value`, then the values of the names it reads that the function set before it.
    /// `arithmetic_after`: a value nearer the payment does arithmetic on this one.
    fn follow(
        &mut self,
        idx: &NodeIndex<'t>,
        func: Node<'t>,
        value: Node<'t>,
        arithmetic_after: bool,
        depth: usize,
        src: &str,
    ) {
        let text = syntax::text(value, src);
        if text.contains("* 100") || text.contains("*100") {
            self.minor_units = true;
        }
        let arithmetic = does_arithmetic(idx, value, src);
        // Made a `Decimal` here: what comes in is read exactly from its text.
        let decimal = text.contains("Decimal(") && !text.contains("Decimal(str(");
        if !decimal
            && self.float_arithmetic.is_none()
            && (arithmetic || arithmetic_after)
            && reads_a_float(idx, value, src)
        {
            self.float_arithmetic = Some(value);
        }
        if depth == 0 {
            return;
        }
        for name in identifiers(text) {
            if let Some(earlier) = idx.assigned_before(Some(func), name, value.start_byte(), src)
                && earlier.id() != value.id()
            {
                self.follow(
                    idx,
                    func,
                    earlier,
                    arithmetic || arithmetic_after,
                    depth - 1,
                    src,
                );
            }
        }
    }
}

/// The plain names a text reads (`gross` and `PLATFORM_FEE` in `round(gross * (1 -
/// PLATFORM_FEE), 2)`), attribute chains left out.
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| {
            w.chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
        })
        .filter(move |w| {
            // Not the attribute of something (`entry.amount`): the name before the dot is read.
            let at = w.as_ptr() as usize - text.as_ptr() as usize;
            at == 0 || bytes[at - 1] != b'.'
        })
}

/// `+`, `-`, `*`, `/` or `sum(...)` in a value.
fn does_arithmetic(idx: &NodeIndex<'_>, value: Node<'_>, src: &str) -> bool {
    std::iter::once(value)
        .chain(idx.within(value, kinds::BINARY_OPERATOR).iter().copied())
        .any(|n| {
            n.kind() == kinds::BINARY_OPERATOR
                && n.child(1)
                    .is_some_and(|o| matches!(o.kind(), "+" | "-" | "*" | "/"))
        })
        || std::iter::once(value)
            .chain(idx.within(value, kinds::CALL).iter().copied())
            .any(|c| c.kind() == kinds::CALL && syntax::callee(c, src) == "sum")
}

/// A `float(...)` in a value, or a fractional literal (`0.15`), or a module constant that is one.
fn reads_a_float(idx: &NodeIndex<'_>, value: Node<'_>, src: &str) -> bool {
    let calls = std::iter::once(value)
        .chain(idx.within(value, kinds::CALL).iter().copied())
        .any(|c| c.kind() == kinds::CALL && syntax::callee(c, src) == "float");
    calls
        || fractional(value, src)
        || identifiers(syntax::text(value, src)).any(|name| {
            name.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                && idx
                    .assigned_before(None, name, value.start_byte(), src)
                    .is_some_and(|v| {
                        idx.enclosing(v, kinds::FUNCTION_DEFINITION).is_none() && fractional(v, src)
                    })
        })
}

/// Whether a value holds a float literal with a fraction (`0.15`, `1.5`; not `100.0`).
fn fractional(value: Node<'_>, src: &str) -> bool {
    let mut stack = vec![value];
    while let Some(node) = stack.pop() {
        if node.kind() == kinds::FLOAT {
            let text = syntax::text(node, src);
            if let Some((_, fraction)) = text.split_once('.')
                && fraction
                    .trim_end_matches('0')
                    .chars()
                    .any(|c| c.is_ascii_digit())
            {
                return true;
            }
            continue;
        }
        stack.extend(crate::python::named_children(node));
    }
    false
}
