//! IDEM015 resend-window-outlives-key: payments are sent again under their stored key for
//! longer than the key is kept, by the provider (`IDEMPOTENCY_KEY_TTL = timedelta(hours=24)`,
//! what the client says the provider remembers) or by the service's own store. A request sent
//! again after its key is forgotten is a new request: the charge or refund the first attempt
//! made, when its answer was lost, is made a second time.
//!
//! Read on constants only, where both spans are written as durations: a window of retries the
//! change writes (`RETRY_WINDOW = timedelta(days=3)`), and a key's lifetime of the same file or
//! of a module it imports. A window worked out from an imported lifetime
//! (`IDEMPOTENCY_KEY_TTL - timedelta(hours=1)`) cannot be longer, and is not evaluated.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, ParsedFile, kinds, syntax};
use crate::rules::retry::eval;
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "IDEM015",
    doc: include_str!("../../../rules/idem/IDEM015.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a constant named for a window of retries, in code that sends payments
/// again under stored keys. The facts are asked before the text is searched.
fn gate(s: &Scan<'_>) -> bool {
    pays_under_keys(s)
        && s.mentions(&[
            "WINDOW", "_AGE", "DEADLINE", "HORIZON", "GIVE_UP", "DELAYS", "SCHEDULE", "BACKOFFS",
        ])
}

/// Code, not a test, that pays or names an idempotency key: where payments are sent again under
/// stored keys.
pub(crate) fn pays_under_keys(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && (s.facts.payment_module
            || s.facts
                .functions
                .iter()
                .any(|f| f.payment || f.mentions_idempotency))
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    for assignment in eval::module_assignments(idx) {
        let (Some(left), Some(right)) = (assignment.field("left"), assignment.field("right"))
        else {
            continue;
        };
        let name = syntax::text(left, src);
        let schedule = names_a_schedule(name);
        if left.kind() != kinds::IDENTIFIER || !(names_a_window(name) || schedule) {
            continue;
        }
        let (first, last) = syntax::lines(assignment);
        if !cx.touches_added(first, last) {
            continue;
        }
        let window = if schedule {
            summed(idx, src, name, right)
        } else {
            span(idx, src, name, right)
        };
        let Some(window) = window else {
            continue;
        };
        let Some(kept) = key_lifetime(cx, idx, src).filter(|k| k.seconds < window) else {
            continue;
        };
        let finding = cx
            .report(&RULE, assignment)
            .arg("window", name.to_string())
            .arg("window_span", eval::human(window))
            .arg("key", kept.name)
            .arg("key_span", eval::human(kept.seconds))
            .arg("key_line", kept.line.to_string());
        match kept.path {
            Some(path) => finding.arg("key_path", path).note("imported"),
            None => finding.note("here"),
        };
        if schedule {
            finding.note("schedule");
        }
        // One window per file is the whole story.
        return;
    }
}

/// A name for how long payments are sent again: `RETRY_WINDOW`, `SUBMIT_WINDOW`,
/// `MAX_RESEND_AGE`. Not a delay between attempts (`RETRY_BACKOFF`), nor a window of something
/// else (`REFUND_WINDOW`, how long after a sale a refund may be asked for).
pub(crate) fn names_a_window(name: &str) -> bool {
    let words = syntax::name_words(name);
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    has(&[
        "retry",
        "retries",
        "resend",
        "resends",
        "resubmit",
        "submit",
        "send",
        "reattempt",
        "attempt",
        "attempts",
        "replay",
    ]) && has(&["window", "age", "deadline", "horizon", "give"])
        && !has(&[
            "backoff", "delay", "interval", "timeout", "sleep", "wait", "jitter",
        ])
}

/// A name for the delays between the sends of a payment whose answer was lost, under its key:
/// `TIMEOUT_RETRY_DELAYS`, `RESEND_SCHEDULE`, `UNKNOWN_OUTCOME_BACKOFFS`. The last attempt goes
/// out their sum after the first. Not a dunning schedule (`RETRY_SCHEDULE` of days between
/// charges after a decline), where each attempt is a new payment under a new key.
fn names_a_schedule(name: &str) -> bool {
    let words = syntax::name_words(name);
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    has(&[
        "timeout",
        "timeouts",
        "resend",
        "resends",
        "resubmit",
        "unknown",
        "unanswered",
        "unconfirmed",
    ]) && has(&["delays", "schedule", "backoffs", "countdowns", "intervals"])
}

/// The sum of a literal list or tuple of delays, each in the unit the name gives (seconds when
/// it gives none) or a `timedelta(...)`.
fn summed(idx: &NodeIndex<'_>, src: &str, name: &str, value: Node<'_>) -> Option<f64> {
    if !matches!(value.kind(), kinds::TUPLE | kinds::LIST) {
        return None;
    }
    let delays: Vec<Node<'_>> = crate::python::named_children(value)
        .into_iter()
        .filter(|n| n.kind() != kinds::COMMENT)
        .collect();
    if delays.len() < 2 {
        return None;
    }
    delays
        .into_iter()
        .map(|d| span(idx, src, name, d))
        .sum::<Option<f64>>()
}

/// A name for how long a key is kept: `IDEMPOTENCY_KEY_TTL`, `KEY_RETENTION_HOURS`,
/// `IDEMPOTENCY_EXPIRY`. Not a lock's, which is meant to be short.
pub(crate) fn names_a_key_lifetime(name: &str) -> bool {
    let words = syntax::name_words(name);
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    has(&["idempotency", "idempotent", "key", "keys", "dedup"])
        && has(&[
            "ttl",
            // `IDEMPOTENCY_WINDOW`, `settings.idempotency_window_hours`.
            "window",
            "retention",
            "retained",
            "lifetime",
            "expiry",
            "expires",
            "expire",
            "kept",
            "memory",
            "remembered",
        ])
        // A queue's or a notice's dedup (`ENQUEUE_DEDUP_TTL`) is not the provider's key.
        && !has(&[
            "lock",
            "mutex",
            "enqueue",
            "queue",
            "queued",
            "task",
            "email",
            "notice",
            "notification",
        ])
}

/// A key's lifetime found for the file: its line, and the path of the module it is in when not
/// this one.
struct Kept {
    name: String,
    seconds: f64,
    line: u32,
    path: Option<String>,
}

/// The shortest key lifetime of the file, or else of the modules it imports from (the client
/// that says what the provider remembers).
fn key_lifetime(cx: &Ctx<'_>, idx: &NodeIndex<'_>, src: &str) -> Option<Kept> {
    let shortest = |found: Vec<Kept>| {
        found
            .into_iter()
            .filter(|k| k.seconds > 0.0)
            .min_by(|a, b| a.seconds.total_cmp(&b.seconds))
    };
    let here = eval::module_assignments(idx)
        .filter_map(|a| {
            let (left, right) = (a.field("left")?, a.field("right")?);
            let name = syntax::text(left, src);
            if left.kind() != kinds::IDENTIFIER || !names_a_key_lifetime(name) {
                return None;
            }
            Some(Kept {
                name: name.to_string(),
                seconds: span(idx, src, name, right)?,
                line: syntax::lines(a).0,
                path: None,
            })
        })
        .collect();
    if let Some(kept) = shortest(here) {
        return Some(kept);
    }
    let project = cx.project()?;
    let file = project.file(cx.path)?;
    let mut found = Vec::new();
    for import in &file.imports {
        // `from .billing_client import BillingClient` names the module through its member.
        let module = project.module(&import.target).or_else(|| {
            let (parent, _) = import.target.rsplit_once('.')?;
            project.module(parent)
        });
        let Some(module) = module.filter(|m| m.path != file.path) else {
            continue;
        };
        for assignment in &module.assignments {
            if assignment.name.contains('.') || !names_a_key_lifetime(&assignment.name) {
                continue;
            }
            if found
                .iter()
                .any(|k: &Kept| k.name == assignment.name && k.line == assignment.line)
            {
                continue;
            }
            if let Some(seconds) = span_of_text(&assignment.name, &assignment.value) {
                found.push(Kept {
                    name: assignment.name.clone(),
                    seconds,
                    line: assignment.line,
                    path: Some(module.path.clone()),
                });
            }
        }
    }
    shortest(found)
}

/// A duration in seconds: a `timedelta(...)`, or a number in the unit its name gives
/// (`KEY_TTL_HOURS = 24`), seconds when it gives none.
fn span(idx: &NodeIndex<'_>, src: &str, name: &str, value: Node<'_>) -> Option<f64> {
    let number = eval::Env::of(idx, src, None).eval(value)?;
    if syntax::text(value, src).contains("timedelta") {
        Some(number)
    } else {
        Some(number * unit(name)?)
    }
}

/// `span` of a value the project index holds as text.
fn span_of_text(name: &str, value: &str) -> Option<f64> {
    let parsed = ParsedFile::parse(format!("_ = {value}\n"))?;
    let idx = parsed.index();
    let text = parsed.text();
    let assignment = idx.all(kinds::ASSIGNMENT).first().copied()?;
    span(idx, text, name, assignment.field("right")?)
}

/// Seconds per unit of a constant by its name's last words (PAY017's units, and days and the
/// short forms a lifetime is written with); `None` for a count, not a time.
fn unit(name: &str) -> Option<f64> {
    if let Some((seconds, _)) = crate::rules::pay::time_units_mixed::unit_of(name) {
        return Some(seconds);
    }
    let words = syntax::name_words(name);
    let last = words.last().map(String::as_str).unwrap_or_default();
    Some(match last {
        "min" => 60.0,
        "h" => 3600.0,
        "days" | "day" | "d" => 86400.0,
        "count" | "attempts" | "retries" | "times" | "max" => return None,
        _ => 1.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_and_lifetimes_are_told_by_their_names() {
        assert!(names_a_window("RETRY_WINDOW"));
        assert!(names_a_window("SUBMIT_WINDOW"));
        assert!(names_a_window("MAX_RESEND_AGE"));
        assert!(!names_a_window("REFUND_WINDOW"));
        assert!(!names_a_window("RETRY_BACKOFF_WINDOW"));
        assert!(names_a_key_lifetime("IDEMPOTENCY_KEY_TTL"));
        assert!(names_a_key_lifetime("KEY_RETENTION_HOURS"));
        assert!(!names_a_key_lifetime("LOCK_KEY_TTL"));
        assert!(!names_a_key_lifetime("SESSION_TTL"));
    }

    #[test]
    fn spans_are_read_in_the_unit_the_name_gives() {
        assert_eq!(
            span_of_text("KEY_TTL", "timedelta(hours=24)"),
            Some(86400.0)
        );
        assert_eq!(span_of_text("KEY_TTL_HOURS", "24"), Some(86400.0));
        assert_eq!(span_of_text("KEY_TTL", "24 * 60 * 60"), Some(86400.0));
        assert_eq!(span_of_text("RETRY_ATTEMPTS", "5"), None);
        assert_eq!(span_of_text("KEY_TTL", "settings.KEY_TTL"), None);
    }
}
