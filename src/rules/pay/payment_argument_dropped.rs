//! PAY027 payment-argument-dropped: the change takes an argument that decides the money out of
//! a payment call that stays: the amount of a refund or a capture (the provider's default is
//! the whole payment), `reverse_transfer` or an application fee of a marketplace payment, a
//! manual capture, the currency, the idempotency key. The call still succeeds, and does
//! something else than it did.
//!
//! Read only where the old version is known, on a call of the same callee in the function of
//! the same qualified name, and on the arguments as written: keywords and the keys of the
//! dictionaries handed in (`json={...}`, `params=payload` where `payload = {...}` in the
//! function). A renamed key of the same kind (`amount` to `amount_minor`) is kept; a slot that
//! is now built elsewhere (`json=build_refund(...)`, `**params`) is not read.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};
use crate::source::Side;

pub(crate) static RULE: Rule = Rule {
    id: "PAY027",
    doc: include_str!("../../../rules/pay/PAY027.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// The kinds of argument read, each as the normalised names (lower case, no `_` or `-`) that
/// spell it, and whether any name containing `amount` counts.
struct Kind {
    note: &'static str,
    names: &'static [&'static str],
}

const KINDS: &[Kind] = &[
    Kind {
        note: "amount",
        names: &[],
    },
    Kind {
        note: "split",
        names: &[
            "reversetransfer",
            "refundapplicationfee",
            "applicationfeeamount",
            "applicationfee",
            "transferdata",
            "onbehalfof",
        ],
    },
    Kind {
        note: "capture",
        names: &[
            "capturemethod",
            "capture",
            "autocapture",
            "capturedelayhours",
            "submitforsettlement",
        ],
    },
    Kind {
        note: "currency",
        names: &["currency", "currencycode"],
    },
    Kind {
        note: "key",
        names: &["idempotencykey"],
    },
];

/// Words of a removed line that may name one of the arguments read.
const WORDS: &[&str] = &[
    "amount",
    "mount\"",
    "transfer",
    "application_fee",
    "behalf",
    "capture",
    "Capture",
    "settlement",
    "currency",
    "Currency",
    "dempotency",
    // A keyword a sender of the change turns into the key (`request_id=`, `dedup_key=`).
    "request_id",
    "key=",
    "_ref",
];

/// Every finding is an argument of a line the change removed.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && !s.lines.removed().is_empty()
        && (s.facts.payment_module || s.facts.functions.iter().any(|f| f.payment || f.http))
}

fn check(cx: &mut Ctx<'_>) {
    if cx.side != Side::New || cx.facts.is_some_and(|f| f.is_test) {
        return;
    }
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let Some(old_text) = cx.versions.old.as_ref().map(|v| v.text.as_str()) else {
        return;
    };
    if !removes_a_word(old_text, cx.versions.lines.removed()) {
        return;
    }
    let Some(old) = cx.other.get() else {
        return;
    };
    let (old_idx, old_src) = (old.index(), old.text());
    let lines = &cx.versions.lines;
    let mut found = Vec::new();
    for &before in old_idx.all(kinds::FUNCTION_DEFINITION) {
        let (first, last) = syntax::lines(before);
        if !lines.touches_removed(first, last) {
            continue;
        }
        let name = facts::qualname(before, old_idx, old_src);
        let Some(after) = facts::function_by_qualname(idx, src, &name) else {
            continue;
        };
        for (old_call, new_call) in paired_calls(cx, (old_idx, before, old_src), (idx, after, src))
        {
            let (a, b) = syntax::lines(old_call);
            if !lines.touches_removed(a, b) {
                continue;
            }
            if let Some(drop) = dropped(
                (old_idx, before, old_src),
                old_call,
                (idx, after, src),
                new_call,
            )
            .or_else(|| dropped_forwarded_key(cx, (old_call, old_src), (new_call, src)))
            {
                found.push((new_call, name.clone(), drop));
            }
        }
    }
    for (call, function, (kind, names)) in found {
        let finding = cx
            .report(&RULE, call)
            .arg("call", crate::rules::pay::first_line(call, src))
            .arg("dropped", names.join("`, `"))
            .note(kind);
        finding.function = function;
    }
}

/// A keyword the callee, a function of the change, sends on as the idempotency key
/// (`self._call("POST", ..., request_id=request_id)` where `_call` sets `PayPal-Request-Id` from
/// it), passed by the old call and not by the new one: the callee now makes a key of its own, or
/// sends none.
fn dropped_forwarded_key(
    cx: &Ctx<'_>,
    (old_call, old_src): (Node<'_>, &str),
    (new_call, src): (Node<'_>, &str),
) -> Option<(&'static str, Vec<String>)> {
    if syntax::has_dict_splat(new_call) {
        return None;
    }
    let name = syntax::callee_name(new_call, src);
    let kept: Vec<&str> = syntax::keyword_args(new_call, src)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let lost: Vec<String> = syntax::keyword_args(old_call, old_src)
        .into_iter()
        .map(|(k, _)| k)
        .filter(|k| {
            !kept.contains(k)
                && crate::rules::idem::key_params::key_like(k)
                && cx
                    .change
                    .sends_as_key(Side::New, name, &facts::Slot::Keyword((*k).into()))
        })
        .map(str::to_string)
        .collect();
    (!lost.is_empty()).then_some(("key", lost))
}

/// Whether a line the change removed names one of the arguments read.
fn removes_a_word(old: &str, removed: &[u32]) -> bool {
    let mut at = 0;
    old.lines().enumerate().any(|(i, line)| {
        let n = i as u32 + 1;
        while removed.get(at).is_some_and(|&r| r < n) {
            at += 1;
        }
        removed.get(at) == Some(&n) && WORDS.iter().any(|w| line.contains(w))
    })
}

/// One version's index, function and text.
type Side3<'a, 't> = (&'a NodeIndex<'t>, Node<'t>, &'t str);

/// The old function's payment calls, each with the call of the same callee at the same place
/// among them in the new function; a callee called a different number of times is left.
fn paired_calls<'t, 'u>(
    cx: &Ctx<'_>,
    (old_idx, before, old_src): Side3<'_, 't>,
    (idx, after, src): Side3<'_, 'u>,
) -> Vec<(Node<'t>, Node<'u>)> {
    let calls = |idx: &NodeIndex<'t>, func: Node<'t>| -> Vec<Node<'t>> {
        idx.within(func, kinds::CALL)
            .iter()
            .copied()
            .filter(|c| crate::rules::idem::owned_by(idx, *c, Some(func)))
            .collect()
    };
    let old_calls = calls(old_idx, before);
    let new_calls: Vec<Node<'u>> = idx
        .within(after, kinds::CALL)
        .iter()
        .copied()
        .filter(|c| crate::rules::idem::owned_by(idx, *c, Some(after)))
        .collect();
    let mut pairs = Vec::new();
    for &call in &old_calls {
        if !moves_money(cx, call, old_src) {
            continue;
        }
        let callee = syntax::callee(call, old_src);
        let same_old: Vec<Node<'t>> = old_calls
            .iter()
            .copied()
            .filter(|c| syntax::callee(*c, old_src) == callee)
            .collect();
        let same_new: Vec<Node<'u>> = new_calls
            .iter()
            .copied()
            .filter(|c| syntax::callee(*c, src) == callee)
            .collect();
        if same_old.len() != same_new.len() {
            continue;
        }
        if let Some(at) = same_old.iter().position(|c| c.id() == call.id()) {
            pairs.push((call, same_new[at]));
        }
    }
    pairs
}

/// A payment call by its name (`stripe.Refund.create`, `gateway.capture`), or a POST whose
/// text speaks of a payment (`session.post(f"{API}/refunds", json={...})`), also through a
/// client's own sender of the change (`self._call("POST", f"/captures/{id}/refund", ...)`).
fn moves_money(cx: &Ctx<'_>, call: Node<'_>, src: &str) -> bool {
    if crate::rules::pay::is_payment_call(call, src, cx.vocab) {
        return true;
    }
    let name = syntax::callee_name(call, src);
    (matches!(name, "post" | "put" | "request" | "fetch")
        || cx
            .change
            .functions_named(Side::New, name)
            .any(|(file, f)| f.http && !file.is_test))
        && [
            "refund", "captur", "charge", "payment", "payout", "transfer",
        ]
        .iter()
        .any(|w| syntax::code_contains_lowercase(syntax::text(call, src), w))
}

/// The kind and names of the arguments the old call had and the new one lacks, the first kind
/// that lost any.
fn dropped<'t, 'u>(
    (old_idx, before, old_src): Side3<'_, 't>,
    old_call: Node<'t>,
    (idx, after, src): Side3<'_, 'u>,
    new_call: Node<'u>,
) -> Option<(&'static str, Vec<String>)> {
    if syntax::has_dict_splat(new_call) {
        return None;
    }
    let was = Arguments::of(old_call, before, old_idx, old_src);
    let now = Arguments::of(new_call, after, idx, src);
    let refund_or_capture = ["refund", "captur"].iter().any(|w| {
        syntax::code_contains_lowercase(syntax::callee(old_call, old_src), w)
            || syntax::positional_args(old_call)
                .first()
                .is_some_and(|a| syntax::code_contains_lowercase(syntax::text(*a, old_src), w))
    });
    KINDS.iter().find_map(|kind| {
        let of_kind = |name: &str| {
            if kind.names.is_empty() {
                refund_or_capture && name.contains("amount")
            } else {
                kind.names.contains(&name)
            }
        };
        if now.names.iter().any(|n| of_kind(&n.norm)) {
            return None;
        }
        let mut lost: Vec<String> = was
            .names
            .iter()
            .filter(|n| {
                of_kind(&n.norm)
                    && !now.opaque.contains(&n.slot)
                    && !says_the_default(&n.norm, &n.value)
            })
            .map(|n| n.written.clone())
            .collect();
        lost.dedup();
        (!lost.is_empty()).then_some((kind.note, lost))
    })
}

/// The argument names of a call as written: keywords, and the keys of the dictionaries handed
/// in, each with the slot (keyword or position) it came through.
#[derive(Default)]
struct Arguments {
    names: Vec<Named>,
    /// Slots whose value is built elsewhere (a call, a parameter): their keys are unknown.
    opaque: Vec<String>,
}

impl Arguments {
    fn of<'t>(call: Node<'t>, func: Node<'t>, idx: &NodeIndex<'t>, src: &'t str) -> Arguments {
        let mut out = Arguments::default();
        let Some(args) = call.field("arguments") else {
            return out;
        };
        for (i, arg) in crate::python::named_children(args).into_iter().enumerate() {
            if arg.kind() == kinds::KEYWORD_ARGUMENT {
                let (Some(name), Some(value)) = (arg.field("name"), arg.field("value")) else {
                    continue;
                };
                let name = syntax::text(name, src);
                if is_metadata(name) {
                    continue;
                }
                out.names
                    .push(Named::new("", name, syntax::text(value, src)));
                out.read(name.to_string(), value, func, idx, src);
            } else {
                out.read(i.to_string(), arg, func, idx, src);
            }
        }
        out
    }

    fn read<'t>(
        &mut self,
        slot: String,
        value: Node<'t>,
        func: Node<'t>,
        idx: &NodeIndex<'t>,
        src: &'t str,
    ) {
        match value.kind() {
            kinds::DICTIONARY => self.keys(&slot, value, src, 0),
            kinds::IDENTIFIER => {
                let name = syntax::text(value, src);
                match dict_assigned(idx, func, name, src) {
                    Some((dict, later)) => {
                        for key in later {
                            self.names.push(Named::new(&slot, key, ""));
                        }
                        self.keys(&slot, dict, src, 0);
                    }
                    None => self.opaque.push(slot),
                }
            }
            kinds::CALL => self.opaque.push(slot),
            _ => {}
        }
    }

    /// The keys of a dictionary, and of the dictionaries nested in it (`{"amount": {"value":
    /// ..., "currency": ...}}`), a few levels down.
    fn keys(&mut self, slot: &str, dict: Node<'_>, src: &str, depth: u8) {
        for pair in crate::python::named_children(dict) {
            if pair.kind() != kinds::PAIR {
                continue;
            }
            if let Some(key) = pair.field("key").and_then(|k| syntax::string_value(k, src)) {
                if is_metadata(key) {
                    continue;
                }
                let value = pair.field("value").map_or("", |v| syntax::text(v, src));
                self.names.push(Named::new(slot, key, value));
            }
            if let Some(value) = pair.field("value")
                && value.kind() == kinds::DICTIONARY
                && depth < 3
            {
                self.keys(slot, value, src, depth + 1);
            }
        }
    }
}

/// The dictionary literal `name` is set to in `func` (`payload = {...}`) and the keys set on it
/// later (`payload["currency"] = ...`); `None` when it is set to anything else or not at all (a
/// parameter).
fn dict_assigned<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    name: &str,
    src: &'t str,
) -> Option<(Node<'t>, Vec<&'t str>)> {
    let mut found = None;
    let mut later = Vec::new();
    for &assign in idx.within(func, kinds::ASSIGNMENT) {
        let Some(left) = assign.field("left") else {
            continue;
        };
        if left.kind() == kinds::IDENTIFIER && syntax::text(left, src) == name {
            match assign.field("right") {
                Some(r) if r.kind() == kinds::DICTIONARY => found = Some(r),
                _ => return None,
            }
        } else if left.kind() == kinds::SUBSCRIPT
            && left
                .field("value")
                .is_some_and(|v| syntax::text(v, src) == name)
            && let Some(key) = left
                .field("subscript")
                .and_then(|k| syntax::string_value(k, src))
        {
            later.push(key);
        }
    }
    found.map(|dict| (dict, later))
}

/// One argument name as written, normalised, with the slot it came through and its value.
struct Named {
    slot: String,
    norm: String,
    written: String,
    value: String,
}

impl Named {
    fn new(slot: &str, written: &str, value: &str) -> Named {
        Named {
            slot: slot.to_string(),
            norm: normalise(written),
            written: written.to_string(),
            value: value.to_string(),
        }
    }
}

/// Free-form data riding along (`metadata={"amount_cents": ...}`): its keys decide nothing.
fn is_metadata(name: &str) -> bool {
    matches!(
        normalise(name).as_str(),
        "metadata" | "meta" | "extra" | "notes" | "tags" | "labels" | "description"
    )
}

/// An argument that only said what the provider does anyway: `capture_method="automatic"`,
/// `capture=True` (a Stripe charge captures unless told not to).
fn says_the_default(name: &str, value: &str) -> bool {
    let value = value.trim_matches(|c| c == '"' || c == '\'');
    match name {
        "capturemethod" => value.starts_with("automatic"),
        "capture" | "autocapture" => value == "True" || value == "true",
        _ => false,
    }
}

/// `Idempotency-Key`, `idempotencyKey` and `idempotency_key` alike.
fn normalise(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-'))
        .flat_map(char::to_lowercase)
        .collect()
}
