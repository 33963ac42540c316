//! IDEM006 key-ttl-in-seconds-given-as-milliseconds: a Redis key's lifetime given to `px=`,
//! `psetex` or `pexpire` (milliseconds) as a number the code itself treats as seconds.
//!
//! The rule reports only where the code says the number is seconds: its name, the same value
//! passed to `ex=` or `expire` elsewhere in the file, the name it was set from, or a literal
//! written as minutes, hours or days. A bare `px=ttl` with nothing to go on is left alone.
use tree_sitter::Node;

use super::Op;
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::review::Severity;
use crate::rules::facts;
use crate::rules::retry::eval;
use crate::rules::{Check, Ctx, Gate, Local, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "IDEM006",
    doc: include_str!("../../../rules/idem/IDEM006.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a `px=`, a `psetex` or a `pexpire`.
fn gate(s: &Scan<'_>) -> bool {
    s.mentions(&["px", "psetex", "pexpire"])
}

/// Why a value is a number of seconds.
enum Why {
    Named,
    Elsewhere { line: u32, there: String },
    Bound { source: String, line: u32 },
    Written,
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    for &call in idx.all(kinds::CALL) {
        let Some((arg, value)) = milliseconds_arg(cx, call) else {
            continue;
        };
        // Django's cache takes seconds everywhere; the receiver is asked last, being the
        // costlier question.
        if super::cache_receiver(call, cx) != Some(false) {
            continue;
        }
        let func = idx.enclosing(call, kinds::FUNCTION_DEFINITION);
        // Of `ttl or self._ttl`, the side that is seconds.
        let Some((why, value)) = seconds(cx, idx, func, call, value, 0) else {
            continue;
        };
        let key = super::key_of(call, cx.callee_name(call), src).unwrap_or_default();
        let qualname = func
            .map(|f| facts::qualname(f, idx, src))
            .unwrap_or_default();
        let guards = guards_a_repeat(cx, call, &format!("{key} {qualname}"));
        let function = super::function_facts(cx, call);
        let on_path = super::on_money_path(cx, function);
        let amount = eval::Env::of(idx, src, func).eval(value);
        let about_money = about_money(cx, &key, &qualname);
        let finding = cx
            .report(&RULE, call)
            .arg("arg", arg)
            .arg("value", syntax::normalized(value, src))
            .arg("key", key);
        match why {
            Why::Named => finding.arg("why_named", "yes"),
            Why::Elsewhere { line, there } => finding
                .arg("why_line", line.to_string())
                .arg("there", there),
            Why::Bound { source, line } => finding
                .arg("why_source", source)
                .arg("source_line", line.to_string()),
            Why::Written => finding.arg("why_written", "yes"),
        };
        if let Some(meant) = amount.filter(|v| *v > 0.0) {
            finding
                .arg("meant", eval::human(meant))
                .arg("actual", eval::human(meant / 1000.0));
        }
        if guards {
            finding.note("guard");
            if !on_path && !about_money {
                finding.severity(Severity::Important);
            }
        } else {
            finding.note("cached").severity(if on_path {
                Severity::Important
            } else {
                Severity::Nit
            });
        }
    }
}

/// Whether a key is about money wherever the change calls it from: a claim on a refund or an
/// idempotency key is; a job's lock elsewhere still runs twice, but pays nothing twice.
pub(super) fn about_money(cx: &Ctx<'_>, key: &str, qualname: &str) -> bool {
    let text = format!("{key} {qualname} {}", cx.path);
    super::is_idempotency_text(&text)
        || syntax::name_words(&text)
            .iter()
            .any(|w| cx.vocab.is_payment_operation(w) || cx.vocab.is_entity(w))
}

/// Whether a lifetime given in milliseconds is written as seconds, by its name or its value
/// (`px=ttl_seconds`, `px=24 * 60 * 60`): IDEM006's case.
pub(super) fn says_seconds(idx: &NodeIndex<'_>, src: &str, value: Node<'_>) -> bool {
    let value = unwrap(value);
    let text = syntax::text(value, src);
    !converted(text)
        && (names_seconds(text)
            || written_in_seconds(
                idx,
                src,
                idx.enclosing(value, kinds::FUNCTION_DEFINITION),
                value,
            ))
}

/// The argument of a Redis call that takes milliseconds, with how to name it.
fn milliseconds_arg<'t>(cx: &Ctx<'_>, call: Node<'t>) -> Option<(String, Node<'t>)> {
    let src = cx.src();
    let method = cx.callee_name(call);
    let (label, node) = match method {
        "set" | "getex" => ("px=".to_string(), syntax::keyword_arg(call, "px", src)?),
        "psetex" => (
            "psetex(name, time_ms, value)".to_string(),
            syntax::positional_args(call)
                .get(1)
                .copied()
                .or_else(|| syntax::keyword_arg(call, "time_ms", src))?,
        ),
        "pexpire" => (
            "pexpire(name, time)".to_string(),
            syntax::positional_args(call)
                .get(1)
                .copied()
                .or_else(|| syntax::keyword_arg(call, "time", src))?,
        ),
        _ => return None,
    };
    Some((label, unwrap(node)))
}

fn unwrap(node: Node<'_>) -> Node<'_> {
    if node.kind() == kinds::PARENTHESIZED_EXPRESSION {
        node.named_child(0).map_or(node, unwrap)
    } else {
        node
    }
}

const MAX_HOPS: usize = 2;

/// Why `value` (at `at`, in `func`) is a number of seconds, if the code says so, with the part of
/// it that is (`self._ttl` of `ttl or self._ttl`).
fn seconds<'t, 'v>(
    cx: &Ctx<'t>,
    idx: &NodeIndex<'t>,
    func: Option<Node<'t>>,
    at: Node<'_>,
    value: Node<'v>,
    hops: usize,
) -> Option<(Why, Node<'v>)> {
    let src = cx.src();
    let text = syntax::text(value, src);
    if converted(text) {
        return None;
    }
    match value.kind() {
        // `ttl or self._ttl`, `ttl if ttl else DEFAULT`: either side is what Redis gets.
        kinds::BOOLEAN_OPERATOR => {
            return ["left", "right"].iter().find_map(|f| {
                let side = unwrap(value.field(f)?);
                seconds(cx, idx, func, at, side, hops)
            });
        }
        kinds::CONDITIONAL_EXPRESSION => {
            let mut parts = value.named_children(&mut value.walk()).collect::<Vec<_>>();
            // The condition (the middle part) is not a value.
            if parts.len() == 3 {
                parts.remove(1);
            }
            return parts
                .into_iter()
                .find_map(|p| seconds(cx, idx, func, at, unwrap(p), hops));
        }
        _ => {}
    }
    if names_seconds(text) {
        return Some((Why::Named, value));
    }
    if written_in_seconds(idx, src, func, value) {
        return Some((Why::Written, value));
    }
    if !matches!(value.kind(), kinds::IDENTIFIER | kinds::ATTRIBUTE) {
        return None;
    }
    if let Some((line, there)) = passed_as_seconds(cx, idx, text) {
        return Some((Why::Elsewhere { line, there }, value));
    }
    if hops >= MAX_HOPS {
        return None;
    }
    // What the name was set from: `self._ttl = ttl_seconds` in `__init__`, `ttl = cfg.ttl_s`.
    let scope = if text.starts_with("self.") || text.starts_with("cls.") {
        idx.enclosing(at, kinds::CLASS_DEFINITION)
    } else {
        func
    };
    let assignments = match scope {
        Some(s) => idx.within(s, kinds::ASSIGNMENT),
        None => idx.all(kinds::ASSIGNMENT),
    };
    let bound = |a: &Node<'t>| {
        let left = a.field("left")?;
        if syntax::text(left, src) != text {
            return None;
        }
        let right = unwrap(a.field("right")?);
        let inner = idx.enclosing(right, kinds::FUNCTION_DEFINITION);
        seconds(cx, idx, inner, right, right, hops + 1)?;
        Some((
            Why::Bound {
                source: syntax::normalized(right, src),
                line: syntax::lines(right).0,
            },
            value,
        ))
    };
    let binds = assignments.iter().any(|a| {
        a.field("left")
            .is_some_and(|l| syntax::text(l, src) == text)
    });
    if binds || scope.is_none() || value.kind() != kinds::IDENTIFIER {
        return assignments.iter().find_map(&bound);
    }
    // A name the function does not bind is the module's: `LOCK_TTL = settings.LOCK_SECONDS`.
    eval::module_assignments(idx).find_map(|a| bound(&a))
}

/// Whether the expression already speaks of milliseconds or converts to them (`* 1000`,
/// `ttl_ms`, a `timedelta`, which redis-py converts itself).
fn converted(text: &str) -> bool {
    text.contains("1000")
        || text.contains("1_000")
        || text.contains("1e3")
        || syntax::contains_lowercase(text, "timedelta")
        || words(text).any(|w| {
            matches!(
                w.as_str(),
                "ms" | "msec" | "msecs" | "millis" | "milliseconds" | "millisecond"
            )
        })
}

/// The lowercase parts of the names in `text`, split at `_` and every other non-alphanumeric.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_lowercase())
}

/// `ttl_seconds`, `LOCK_TTL_SECS`, `timeout_s`, `ttlSeconds`, `delta.total_seconds()`; not
/// `second_attempt_ttl`, whose "second" is no unit.
fn names_seconds(text: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|name| {
            let parts: Vec<String> = name
                .split('_')
                .filter(|p| !p.is_empty())
                .map(|p| p.to_ascii_lowercase())
                .collect();
            let unit_last = parts.len() > 1
                && parts
                    .last()
                    .is_some_and(|p| matches!(p.as_str(), "second" | "sec" | "s"));
            unit_last || parts.iter().any(|p| p == "secs" || p.ends_with("seconds"))
        })
}

/// A number written the way seconds are (`24 * 60 * 60`, `86400`, `60 * 15`), as a literal, a
/// module constant or a parameter's default.
fn written_in_seconds<'t>(
    idx: &NodeIndex<'t>,
    src: &str,
    func: Option<Node<'t>>,
    value: Node<'_>,
) -> bool {
    let text = syntax::text(value, src);
    let written = match value.kind() {
        kinds::IDENTIFIER => func
            .and_then(|f| eval::parameter_default(f, text, src))
            .or_else(|| eval::module_constant(idx, text, src))
            .map(|n| syntax::text(n, src)),
        kinds::INTEGER | kinds::BINARY_OPERATOR => Some(text),
        _ => None,
    };
    let Some(written) = written.filter(|w| !converted(w)) else {
        return false;
    };
    let Some(amount) = eval::Env::of(idx, src, func).eval(value) else {
        return false;
    };
    let whole = amount.round() as i64;
    if (amount - amount.round()).abs() > 1e-9 || whole < 60 {
        return false;
    }
    let times_sixty =
        written.contains('*') && written.split(['*', ' ', '(', ')']).any(|t| t == "60");
    // An hour or a day in seconds is never a round number of milliseconds people pick.
    times_sixty || whole % 3600 == 0 && whole % 1000 != 0
}

/// Where the file passes the same expression to Redis or Django's cache as seconds.
fn passed_as_seconds(cx: &Ctx<'_>, idx: &NodeIndex<'_>, text: &str) -> Option<(u32, String)> {
    let src = cx.src();
    idx.all(kinds::CALL).iter().find_map(|&call| {
        let method = cx.callee_name(call);
        let (node, there) = match method {
            "set" | "getex" => (syntax::keyword_arg(call, "ex", src)?, format!("ex={text}")),
            "add" | "set_many" if syntax::keyword_arg(call, "timeout", src).is_some() => (
                syntax::keyword_arg(call, "timeout", src)?,
                format!("timeout={text}"),
            ),
            "setex" => (
                syntax::positional_args(call).get(1).copied()?,
                format!("setex(name, {text}, value)"),
            ),
            "expire" => (
                syntax::positional_args(call).get(1).copied()?,
                format!("expire(name, {text})"),
            ),
            _ => return None,
        };
        if syntax::text(unwrap(node), src) != text || super::cache_receiver(call, cx).is_none() {
            return None;
        }
        Some((syntax::lines(call).0, there))
    })
}

/// Whether the key is one that stops a repeat: a claim (`nx=True`), an idempotency, dedup or
/// lock key, or one whose names (`text`: the key and the function's qualified name) say it
/// marks something seen, claimed or in flight.
pub(super) fn guards_a_repeat(cx: &Ctx<'_>, call: Node<'_>, text: &str) -> bool {
    if super::cache_call(call, cx).is_some_and(|c| matches!(c.op, Op::AtomicWrite)) {
        return true;
    }
    super::is_idempotency_text(text)
        || words(text).any(|w| {
            matches!(
                w.as_str(),
                "seen"
                    | "processed"
                    | "handled"
                    | "claim"
                    | "claims"
                    | "claimed"
                    | "lease"
                    | "reserve"
                    | "reserved"
                    | "reservation"
                    | "inflight"
                    | "flight"
                    | "duplicate"
                    | "once"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_read_from_names_not_from_ordinals() {
        for yes in [
            "ttl_seconds",
            "LOCK_TTL_SECS",
            "timeout_s",
            "self._ttlSeconds",
            "delta.total_seconds()",
            "settings.IDEMPOTENCY_TTL_SECONDS",
            "getattr(settings, \"REFUND_LOCK_SECONDS\", 120)",
        ] {
            assert!(names_seconds(yes), "{yes}");
        }
        for no in ["SECOND_ATTEMPT_TTL", "self._ttl", "s", "lease_ms", "ttl"] {
            assert!(!names_seconds(no), "{no}");
        }
    }

    #[test]
    fn conversions_and_millisecond_names_are_no_seconds() {
        for yes in [
            "ttl_seconds * 1000",
            "LOCK_TTL_MS",
            "self._lease_ms",
            "int(ttl.total_seconds() * 1_000)",
            "timedelta(hours=24)",
            "ttl_millis",
        ] {
            assert!(converted(yes), "{yes}");
        }
        for no in ["ttl_seconds", "86400", "self._ttl", "msg_ttl_seconds"] {
            assert!(!converted(no), "{no}");
        }
    }

    #[test]
    fn camel_case_names_split_into_words() {
        let words = syntax::name_words("RefundClaims.reserve charge_key");
        assert_eq!(words, ["refund", "claims", "reserve", "charge", "key"]);
    }
}
