//! RETRY004 misleading-retry-constants: a retry count that really counts attempts, a backoff
//! constant with no unit in its name, and bare time arithmetic (`ex=60 * 60 * 24`) in a call.
use tree_sitter::Node;

use super::eval::{self, Env};
use super::loops;
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "RETRY004",
    doc: include_str!("../../../rules/retry/RETRY004.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

const DELAY_WORDS: &[&str] = &[
    "BACKOFF", "DELAY", "WAIT", "SLEEP", "INTERVAL", "COOLDOWN", "PAUSE",
];
const UNIT_WORDS: &[&str] = &[
    "SECONDS",
    "SECS",
    "SEC",
    "S",
    "MS",
    "MILLIS",
    "MILLISECONDS",
    "MINUTES",
    "MINS",
    "MIN",
    "HOURS",
    // The units in the languages payment code is written in: `PAUSE_MAX_SECONDES`,
    // `WARTEZEIT_SEKUNDEN`, `ESPERA_SEGUNDOS`, `PAUSA_SECONDI`, `OPOZNIENIE_SEKUND`.
    "SECONDES",
    "MILLISECONDES",
    "SEKUNDEN",
    "MILLISEKUNDEN",
    "SEGUNDOS",
    "MILISEGUNDOS",
    "SECONDI",
    "MILLISECONDI",
    "SEKUND",
    "SEKUNDY",
    "SEKUNDER",
    "SECONDEN",
    "MINUTEN",
    "MINUTOS",
    "MINUTI",
    "SEKUNDA",
    "SEKUNDAH",
];
/// Keyword arguments that take a duration.
const TIME_KEYWORDS: &[&str] = &[
    "ex",
    "px",
    "ttl",
    "expire",
    "expires",
    "expiry",
    "max_age",
    "cache_timeout",
    "timeout",
    "read_timeout",
    "connect_timeout",
    "countdown",
    "soft_time_limit",
    "time_limit",
    "visibility_timeout",
];

/// The three checks start from a retry loop, a `sleep(…)` call, and a time keyword given a
/// product of literals.
fn gate(s: &Scan<'_>) -> bool {
    let (idx, src) = (s.index(), s.src());
    let calls = idx.all(kinds::CALL);
    super::has_retry_loop(s)
        || calls
            .iter()
            .any(|&call| idx.callee_name(call, src) == "sleep")
        // Reading every call's keywords is the gate's cost; a product of literals is rare, and
        // the keyword's value must be one.
        || (idx.all(kinds::BINARY_OPERATOR).iter().any(|&b| literal_product(b))
            && calls.iter().any(|&call| {
                syntax::keyword_args(call, src)
                    .iter()
                    .any(|(k, v)| TIME_KEYWORDS.contains(k) && literal_product(*v))
            }))
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    retries_that_count_attempts(cx, idx, src);
    delays_without_unit(cx, idx, src);
    // A test that asserts `expire=4 * 60 * 60` pins the code's value; a name would hide it.
    if !cx.facts.is_some_and(|f| f.is_test) {
        bare_time_arithmetic(cx, idx, src);
    }
}

/// `MAX_RETRIES = 3` with `range(1, MAX_RETRIES + 1)`: three attempts, two retries.
fn retries_that_count_attempts(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    let env = Env::of(idx, src, None);
    let mut reported = Vec::new();
    for l in loops::retry_loops(idx, src) {
        let Some(attempts) = l.attempts.as_ref() else {
            continue;
        };
        for name in &l.limit_names {
            if !name.to_ascii_uppercase().contains("RETR") || reported.contains(name) {
                continue;
            }
            let Some(assignment) = module_assignment(idx, name, src) else {
                continue;
            };
            let value = assignment.field("right").and_then(|r| env.eval(r));
            if value != Some(attempts.len() as f64) {
                continue;
            }
            let bound = syntax::normalized(l.bound, src);
            reported.push(name.clone());
            let subject = format!("`{}`", syntax::normalized(assignment, src));
            cx.report(&RULE, assignment)
                .arg("subject", subject)
                .arg("constant", name.clone())
                .arg("bound", bound)
                .arg("attempts", attempts.len().to_string())
                .arg("retries", attempts.len().saturating_sub(1).to_string())
                .note("attempts");
        }
    }
}

/// `BACKOFF_BASE = 2` fed to a sleep: seconds? milliseconds? a multiplier?
fn delays_without_unit(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    let sleep_args: Vec<String> = idx
        .all(kinds::CALL)
        .iter()
        .filter(|c| syntax::callee_name(**c, src) == "sleep")
        .filter_map(|c| c.field("arguments"))
        .map(|a| syntax::text(a, src).to_string())
        .collect();
    // `delay = BACKOFF ** attempt; sleep(delay)`: the constant reaches the sleep through a local.
    let feeding: Vec<String> = idx
        .all(kinds::ASSIGNMENT)
        .iter()
        .filter(|a| {
            a.field("left")
                .is_some_and(|l| sleep_args.iter().any(|s| has_word(s, syntax::text(l, src))))
        })
        .filter_map(|a| a.field("right"))
        .map(|r| syntax::text(r, src).to_string())
        .collect();
    for assignment in eval::module_assignments(idx) {
        let (Some(left), Some(right)) = (assignment.field("left"), assignment.field("right"))
        else {
            continue;
        };
        let name = syntax::text(left, src);
        let upper = name.to_ascii_uppercase();
        let is_delay = DELAY_WORDS.iter().any(|w| upper.contains(w));
        let has_unit = upper.split('_').any(|part| UNIT_WORDS.contains(&part));
        let numeric = matches!(right.kind(), kinds::INTEGER | kinds::FLOAT);
        let slept = sleep_args
            .iter()
            .chain(feeding.iter())
            .any(|s| has_word(s, name));
        if !is_delay || has_unit || !numeric || !slept {
            continue;
        }
        let subject = format!("`{}`", syntax::normalized(assignment, src));
        cx.report(&RULE, assignment)
            .arg("subject", subject)
            .arg("constant", name.to_string())
            .arg("suggested", format!("{name}_SECONDS"))
            .note("unit");
    }
}

/// `ex=60 * 60 * 24` in a call: a duration the reader has to multiply out and cannot find.
fn bare_time_arithmetic(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    for &call in idx.all(kinds::CALL) {
        for (keyword, value) in syntax::keyword_args(call, src) {
            if !TIME_KEYWORDS.contains(&keyword) || !literal_product(value) {
                continue;
            }
            let env = Env::of(idx, src, None);
            let Some(seconds) = env.eval(value) else {
                continue;
            };
            // A page cache's `timeout=3600 * 6` is no payment's business; an idempotency key's
            // TTL, a lock's or a payment module's are.
            let function = crate::rules::idem::function_facts(cx, call);
            if !crate::rules::idem::on_money_path(cx, function) {
                continue;
            }
            let call_text = syntax::text(call, src).to_ascii_lowercase();
            let expr = syntax::text(value, src).to_string();
            let cache_call = facts_cache_call(&call_text);
            let suggested = suggested_name(keyword, &call_text, cache_call);
            let duration = if keyword == "px" {
                eval::human(seconds / 1000.0)
            } else {
                eval::human(seconds)
            };
            cx.report(&RULE, value)
                .arg("constant", suggested)
                .arg("subject", format!("`{keyword}={expr}`"))
                .arg("value", expr)
                .arg("duration", duration)
                .note("arithmetic");
        }
    }
}

/// `60 * 60 * 24`: integers multiplied, nothing named.
fn literal_product(node: Node<'_>) -> bool {
    if node.kind() != kinds::BINARY_OPERATOR
        || node.field("operator").map(|o| o.kind()) != Some("*")
    {
        return false;
    }
    let factor =
        |n: Option<Node<'_>>| n.is_some_and(|n| n.kind() == kinds::INTEGER || literal_product(n));
    factor(node.field("left")) && factor(node.field("right"))
}

/// `cache.set(..., timeout=...)` (Django) is a lifetime, not a request timeout.
fn facts_cache_call(call: &str) -> bool {
    let head = call.split('(').next().unwrap_or(call);
    head.contains("cache") || head.contains("redis")
}

fn suggested_name(keyword: &str, call: &str, cache_call: bool) -> String {
    let keyword = if cache_call && keyword == "timeout" {
        "ttl"
    } else {
        keyword
    };
    match keyword {
        "ex" | "px" | "ttl" | "expire" | "expires" | "expiry" | "max_age" | "cache_timeout" => {
            let unit = if keyword == "px" { "_MS" } else { "" };
            if call.contains("idemp") {
                format!("IDEMPOTENCY_KEY_TTL{unit}")
            } else if call.contains("lock") {
                format!(
                    "LOCK_TTL{}",
                    if unit.is_empty() { "_SECONDS" } else { unit }
                )
            } else {
                format!(
                    "CACHE_TTL{}",
                    if unit.is_empty() { "_SECONDS" } else { unit }
                )
            }
        }
        "countdown" => "RETRY_COUNTDOWN_SECONDS".to_string(),
        "soft_time_limit" | "time_limit" | "visibility_timeout" => {
            format!("{}_SECONDS", keyword.to_ascii_uppercase())
        }
        _ => "REQUEST_TIMEOUT_SECONDS".to_string(),
    }
}

fn module_assignment<'t>(idx: &NodeIndex<'t>, name: &str, src: &str) -> Option<Node<'t>> {
    eval::module_assignments(idx)
        .filter(|a| {
            a.field("left")
                .is_some_and(|l| syntax::text(l, src) == name)
        })
        .last()
}

use crate::python::syntax::has_word;
