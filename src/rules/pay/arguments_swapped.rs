//! PAY003 payment-arguments-swapped: a call passes values named after the parameters of the
//! function it calls, two or more of them in each other's places (`build_headers(request_id,
//! idempotency_key)` for `def build_headers(idempotency_key, request_id)`), where one of the
//! names is a payment's idempotency key, amount or currency.
//!
//! The callee is the one function of that name in the change whose parameters name money
//! (`FunctionFacts::params`); a name defined twice with other parameters is left alone.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Local, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "PAY003",
    doc: include_str!("../../../rules/pay/PAY003.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is in code that pays or talks HTTP (`FunctionFacts::payment`, `http`), or in a
/// payments module: a swap elsewhere moves no money.
fn gate(s: &Scan<'_>) -> bool {
    s.facts.payment_module || s.facts.functions.iter().any(|f| f.payment || f.http)
}

/// The calls whose text holds a comma and a money word, with the names they pass: a call is
/// asked of tree-sitter only then.
fn worth_a_look<'a, 't: 'a>(
    idx: &'a NodeIndex<'t>,
    src: &'a str,
) -> impl Iterator<Item = (Node<'t>, Vec<Passed<'a>>)> + 'a {
    let (calls, spans) = idx.all_spans(kinds::CALL);
    calls
        .iter()
        .zip(spans)
        .filter(move |(_, (start, end))| {
            src.as_bytes()
                .get(*start..*end)
                .is_some_and(|t| memchr::memchr(b',', t).is_some() && mentions_money(t))
        })
        .filter_map(move |(call, _)| {
            let passed = argument_names(*call, src);
            worth_reading(&passed).then_some((*call, passed))
        })
}

/// A name a call passes, with the parameter it is passed for: `Ok(n)` for the n-th positional
/// argument, `Err(keyword)` otherwise.
type Passed<'s> = (Result<usize, &'s str>, &'s str);

/// Words of a payment's key, amount or currency. Parties (`source`, `destination`) are not
/// among them: a reversal passes them the other way round on purpose.
const MONEY_WORDS: [&str; 8] = [
    "idempot", "key", "amount", "currency", "cents", "price", "fee", "total",
];

/// Whether the text holds a money word, in any case, in one pass: dispatched on each byte, not
/// a loop over the words, because the facts pass asks it of every parameter list (a loop cost
/// 30 M more instructions on the medium sparse workload). The test below keeps it to the list.
fn mentions_money(text: &[u8]) -> bool {
    let at = |i: usize, word: &[u8]| {
        text.get(i..i + word.len())
            .is_some_and(|t| t.eq_ignore_ascii_case(word))
    };
    (0..text.len()).any(|i| match text[i] | 0x20 {
        b'i' => at(i, b"idempot"),
        b'k' => at(i, b"key"),
        b'a' => at(i, b"amount"),
        b'c' => at(i, b"currency") || at(i, b"cents"),
        b'p' => at(i, b"price"),
        b'f' => at(i, b"fee"),
        b't' => at(i, b"total"),
        _ => false,
    })
}

fn worth_reading(passed: &[Passed<'_>]) -> bool {
    passed.len() >= 2 && passed.iter().any(|(_, n)| names_money(n))
}

/// The names a call passes (a bare name, or the last name of an attribute), each with the
/// parameter it is passed for.
fn argument_names<'s>(call: Node<'_>, src: &'s str) -> Vec<Passed<'s>> {
    let args = call
        .field("arguments")
        .filter(|a| a.kind() == kinds::ARGUMENT_LIST);
    let mut out = Vec::new();
    if let Some(args) = args {
        let mut position = 0;
        for arg in args.named_children(&mut args.walk()) {
            match arg.kind() {
                kinds::KEYWORD_ARGUMENT => {
                    let (Some(name), Some(value)) = (arg.field("name"), arg.field("value")) else {
                        continue;
                    };
                    if let Some(v) = last_name(value, src) {
                        out.push((Err(syntax::text(name, src)), v));
                    }
                }
                kinds::LIST_SPLAT | kinds::DICTIONARY_SPLAT => {
                    // Past a splat, positions say nothing.
                    position = usize::MAX / 2;
                }
                kinds::COMMENT => {}
                _ => {
                    if let Some(v) = last_name(arg, src) {
                        out.push((Ok(position), v));
                    }
                    position += 1;
                }
            }
        }
    }
    out
}

/// `key` of `key` or of `self.key`.
fn last_name<'s>(node: Node<'_>, src: &'s str) -> Option<&'s str> {
    match node.kind() {
        kinds::IDENTIFIER => Some(syntax::text(node, src)),
        kinds::ATTRIBUTE => node.field("attribute").map(|a| syntax::text(a, src)),
        _ => None,
    }
}

/// Whether a name is a payment's key, amount or currency (`idempotency_key`, `amount_cents`,
/// `fee`); a lone `key` is any mapping's.
pub(crate) fn names_money(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let parts: Vec<&str> = lower.split('_').filter(|p| !p.is_empty()).collect();
    if parts.len() == 1 && parts[0] == "key" {
        return false;
    }
    parts
        .iter()
        .any(|p| p.starts_with("idempot") || MONEY_WORDS.contains(p))
}

/// Whether a function's parameters (`FunctionFacts::params`) are worth reading for swaps: two
/// or more, one of them a payment's key, amount or currency. The byte search comes first: the
/// question is asked of every function of a name a call passes money names to.
fn pays_by_position(params: &str) -> bool {
    memchr::memchr(b',', params.as_bytes()).is_some()
        && mentions_money(params.as_bytes())
        && params.split(',').any(names_money)
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    for (call, passed) in worth_a_look(idx, src) {
        let name = cx.callee_name(call);
        let Some((path, def_line, params)) = callee_params(cx, name) else {
            continue;
        };
        let params: Vec<&str> = params.split(',').collect();
        // Which parameter each name is passed for.
        let given: Vec<(&str, &str)> = passed
            .iter()
            .filter_map(|(slot, value)| {
                let param = match slot {
                    Ok(i) => *params.get(*i)?,
                    Err(keyword) => *params.iter().find(|p| *p == keyword)?,
                };
                Some((param, *value))
            })
            .collect();
        let swapped = cycles(&given);
        if swapped.len() < 2
            || !swapped.iter().any(|(p, _)| names_money(p))
            || reversed_on_purpose(&swapped)
        {
            continue;
        }
        // A keyword written out (`f(fee=amount, amount=fee)`) says the order is meant.
        if swapped
            .iter()
            .all(|(param, _)| passed.iter().any(|(slot, _)| *slot == Err(*param)))
        {
            continue;
        }
        let pairs = swapped
            .iter()
            .map(|(param, value)| format!("`{value}` → `{param}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let about = if swapped.iter().any(|(p, _)| is_key(p)) {
            "key"
        } else {
            "money"
        };
        let call_text = syntax::normalized(call, src);
        let call_text = if call_text.len() > 80 {
            format!("{}(...)", syntax::callee(call, src))
        } else {
            call_text
        };
        cx.report(&RULE, call)
            .arg("call", call_text)
            .arg("callee", name.to_string())
            .arg("pairs", pairs)
            .arg("def_at", format!("{path}:{def_line}"))
            .arg("params", params.join(", "))
            .note(about)
            .evidence(path, def_line, "evidence_def", Vec::new());
    }
}

/// The parameters of the one function called `name` in the change (this side) that records
/// them, with where it is; several of that name must agree.
fn callee_params<'c>(cx: &Ctx<'c>, name: &str) -> Option<(&'c str, u32, &'c str)> {
    let mut found: Option<(&'c str, u32, &'c str)> = None;
    for (file, func) in cx.change.functions_named(cx.side, name) {
        let params = &*func.params;
        if !pays_by_position(params) {
            return None;
        }
        match found {
            Some((_, _, seen)) if seen != params => return None,
            Some(_) => {}
            None => found = Some((file.path.as_str(), func.lines.0, params)),
        }
    }
    found
}

/// The parameters whose values are named after other parameters of the same call, each such
/// name in turn (`idempotency_key` ← `request_id`, `request_id` ← `idempotency_key`): closed
/// cycles only, so a value that merely shares a name with another parameter is not one.
fn cycles<'a>(given: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let value_of = |param: &str| given.iter().find(|(p, _)| *p == param).map(|(_, v)| *v);
    let mut out: Vec<(&str, &str)> = Vec::new();
    for &(param, value) in given {
        if value == param || out.iter().any(|(p, _)| *p == param) {
            continue;
        }
        let mut cycle = vec![(param, value)];
        let mut next = value;
        while let Some(v) = value_of(next) {
            if next == param {
                break;
            }
            if v == next || cycle.len() > given.len() {
                cycle.clear();
                break;
            }
            cycle.push((next, v));
            next = v;
        }
        if next == param && cycle.len() >= 2 {
            out.extend(cycle);
        }
    }
    out
}

/// Words that say which way something goes: names that differ only by them (`from_currency`,
/// `to_currency`) are swapped to go the other way (a rate inverted, a transfer reversed).
const DIRECTIONS: &[&str] = &[
    "from",
    "to",
    "source",
    "src",
    "target",
    "dest",
    "destination",
    "dst",
    "in",
    "out",
    "old",
    "new",
    "base",
    "quote",
    "buy",
    "sell",
    "debit",
    "credit",
    "sender",
    "receiver",
    "payer",
    "payee",
    "left",
    "right",
    "first",
    "second",
    "a",
    "b",
    "1",
    "2",
];

fn reversed_on_purpose(swapped: &[(&str, &str)]) -> bool {
    let rest = |name: &str| {
        let lower = name.to_ascii_lowercase();
        let kept: Vec<&str> = lower
            .split('_')
            .filter(|p| !p.is_empty() && !DIRECTIONS.contains(p))
            .collect();
        (
            kept.join("_"),
            kept.len() < lower.split('_').filter(|p| !p.is_empty()).count(),
        )
    };
    let Some(((first, _), others)) = swapped.split_first() else {
        return false;
    };
    let (base, directed) = rest(first);
    directed && others.iter().all(|(p, _)| rest(p) == (base.clone(), true))
}

fn is_key(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.contains("idempot") || lower.ends_with("_key")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_swap_is_a_closed_cycle_of_parameter_names() {
        let given = [
            ("idempotency_key", "request_id"),
            ("request_id", "idempotency_key"),
            ("amount", "amount"),
        ];
        assert_eq!(
            cycles(&given),
            [
                ("idempotency_key", "request_id"),
                ("request_id", "idempotency_key")
            ]
        );
        // A value named after a parameter it is not passed to, with no way back: no swap.
        let open = [("amount", "total"), ("total", "fee")];
        assert!(cycles(&open).is_empty());
        let three = [("a_key", "b_key"), ("b_key", "c_key"), ("c_key", "a_key")];
        assert_eq!(cycles(&three).len(), 3);
    }

    #[test]
    fn names_that_differ_by_direction_are_reversed_on_purpose() {
        assert!(reversed_on_purpose(&[
            ("from_currency", "to_currency"),
            ("to_currency", "from_currency")
        ]));
        assert!(reversed_on_purpose(&[
            ("source_amount", "target_amount"),
            ("target_amount", "source_amount")
        ]));
        assert!(!reversed_on_purpose(&[
            ("amount_cents", "fee_cents"),
            ("fee_cents", "amount_cents")
        ]));
        assert!(!reversed_on_purpose(&[
            ("idempotency_key", "request_id"),
            ("request_id", "idempotency_key")
        ]));
    }

    #[test]
    fn money_words_are_found_in_any_case() {
        for word in MONEY_WORDS {
            assert!(mentions_money(word.as_bytes()), "{word}");
            assert!(
                mentions_money(word.to_ascii_uppercase().as_bytes()),
                "{word}"
            );
        }
        assert!(mentions_money(b"charge(AMOUNT, x)"));
        assert!(mentions_money(b"f(a, idempotencyKey)"));
        assert!(!mentions_money(b"render(template, context)"));
    }

    #[test]
    fn money_names_leave_a_lone_key_alone() {
        assert!(names_money("idempotency_key"));
        assert!(names_money("amount_cents"));
        assert!(!names_money("destination_account"));
        assert!(!names_money("key"));
        assert!(!names_money("request_id"));
    }
}
