//! IDEM014 unknown-outcome-new-key: a function sends an earlier attempt again under its own key
//! only when its status is one it names (`if latest.status == LessonRefund.PENDING:
//! return self._submit(latest)`), and every other attempt falls through to a new one with a new
//! key (`uuid4()`). The code's own class of states has a state for a request whose outcome is
//! not known (`UNKNOWN`, `TIMED_OUT`) that the test leaves out. That request may well have gone
//! through at the provider (a read timeout, a 5xx after the work was done), and the new key makes
//! the provider take the next one for a new payment or refund: the money moves twice.
//!
//! Left alone: a test that names the unknown state, a function that handles it before (`if
//! latest.status == UNKNOWN: return self._reconcile(latest)`), and a function that makes no new
//! key after the test.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "IDEM014",
    doc: include_str!("../../../rules/idem/IDEM014.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Words of a state that says a request's outcome is not known.
const UNKNOWN: &[&str] = &[
    "unknown",
    "timeout",
    "timed",
    "indeterminate",
    "ambiguous",
    "uncertain",
    "undetermined",
    "doubt",
    // The same state in the languages payment code is written in.
    "incertain",
    "incerto",
    "incierto",
    "onbekend",
    "onzeker",
    "unbekannt",
    "unklar",
    "desconocido",
    "sconosciuto",
    "incerta",
    "niepewny",
];

/// Calls that make a fresh key.
const FRESH: &[&str] = &[
    "uuid4(",
    "uuid1(",
    "uuid7(",
    "token_hex(",
    "token_urlsafe(",
    "ulid(",
    "ULID(",
    "new_ulid(",
];

/// Every finding is a test of a state beside a state of an unknown outcome and a fresh key.
fn gate(s: &Scan<'_>) -> bool {
    // The rarest words first: most files make no fresh key.
    !s.facts.is_test
        && s.mentions(&["uuid", "token_hex", "token_urlsafe", "ulid", "ULID"])
        && s.mentions(&[
            "UNKNOWN",
            "unknown",
            "TIMED_OUT",
            "timed_out",
            "TIMEOUT",
            "INDETERMINATE",
            "INCERT",
            "incert",
            "INCIERTO",
            "ONBEKEND",
            "onbekend",
            "UNBEKANNT",
            "UNKLAR",
            "unklar",
            "DESCONOCIDO",
            "SCONOSCIUTO",
            "NIEPEWNY",
        ])
        // `status`, `state`, `statut`, `stato`.
        && s.mentions(&["stat", "estado", "zustand", "toestand"])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    for &stmt in idx.all(kinds::IF_STATEMENT) {
        let (Some(condition), Some(consequence)) =
            (stmt.field("condition"), stmt.field("consequence"))
        else {
            continue;
        };
        let Some((test, record, tested)) = state_test(condition, src) else {
            continue;
        };
        // `if attempt.status == UNKNOWN: attempt.idempotency_key = str(uuid4())`: the attempt
        // itself is given a new key.
        if tested.iter().any(|t| {
            let t = t.trim_matches(['"', '\'']);
            names_unknown(t.rsplit('.').next().unwrap_or(t))
        }) && let Some(assignment) = rekeyed(idx, consequence, record, src)
            && let Some(func) = idx.enclosing(stmt, kinds::FUNCTION_DEFINITION)
        {
            let function = facts::qualname(func, idx, src);
            let finding = cx
                .report(&RULE, assignment)
                .arg("function", function.clone())
                .arg("record", record.to_string())
                .arg("test", syntax::text(test, src).to_string())
                .arg("assignment", syntax::normalized(assignment, src))
                .note("rekeyed");
            finding.function = function;
            continue;
        }
        if !sends_again(idx, consequence, record, src) {
            continue;
        }
        let Some(func) = idx.enclosing(stmt, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let Some(fresh) = fresh_key_after(idx, func, stmt.end_byte(), src) else {
            continue;
        };
        let Some(unknown) = unknown_state(&tested, src) else {
            continue;
        };
        // Handled before the test (`if latest.status == UNKNOWN: return ...`).
        let before = &src[func.start_byte()..stmt.start_byte()];
        if before.contains(unknown.as_str()) {
            continue;
        }
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, test)
            .arg("function", function.clone())
            .arg("record", record.to_string())
            .arg("test", syntax::text(test, src).to_string())
            .arg("unknown", unknown)
            .arg("fresh", fresh);
        finding.function = function;
    }
}

/// `latest.status == LessonRefund.PENDING`, `attempt.state in (PENDING, QUEUED)`: the test, the
/// record tested and the states it is tested for, as written.
fn state_test<'t, 's>(
    condition: Node<'t>,
    src: &'s str,
) -> Option<(Node<'t>, &'s str, Vec<&'s str>)> {
    // `row is not None and row.state in (...)`.
    if condition.kind() == kinds::BOOLEAN_OPERATOR && syntax::text(condition, src).contains(" and ")
    {
        return [condition.field("left"), condition.field("right")]
            .into_iter()
            .flatten()
            .find_map(|operand| state_test(operand, src));
    }
    if condition.kind() != kinds::COMPARISON_OPERATOR {
        return None;
    }
    let text = syntax::text(condition, src);
    let (left, right) = text
        .split_once(" == ")
        .or_else(|| text.split_once(" in "))
        .filter(|(left, _)| !left.ends_with(" not"))?;
    let left = left.trim();
    // `attempt.status`, `attempt["status"]`.
    let (record, field) = left
        .strip_suffix(']')
        .and_then(|l| l.rsplit_once('['))
        .map(|(r, f)| (r, f.trim_matches(['"', '\''])))
        .or_else(|| left.rsplit_once('.'))?;
    if !matches!(
        field,
        "status" | "state" | "statut" | "estado" | "stato" | "etat" | "zustand" | "toestand"
    ) || !record
        .chars()
        .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
    {
        return None;
    }
    let tested: Vec<&str> = right
        .trim()
        .trim_start_matches(['(', '[', '{'])
        .trim_end_matches([')', ']', '}'])
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    (!tested.is_empty()).then_some((condition, record, tested))
}

/// An assignment in `block` of a fresh key to `record`'s key (`attempt.idempotency_key =
/// str(uuid.uuid4())`).
fn rekeyed<'t>(idx: &NodeIndex<'t>, block: Node<'t>, record: &str, src: &str) -> Option<Node<'t>> {
    idx.within(block, kinds::ASSIGNMENT)
        .iter()
        .copied()
        .find(|a| {
            let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
                return false;
            };
            let Some((object, field)) = syntax::text(left, src).rsplit_once('.') else {
                return false;
            };
            object == record
                && (field.contains("idempot")
                    || syntax::name_words(field).iter().any(|w| {
                        matches!(
                            w.as_str(),
                            "key" | "cle" | "clef" | "clave" | "chave" | "sleutel" | "chiave"
                        )
                    }))
                && FRESH.iter().any(|f| syntax::text(right, src).contains(f))
        })
}

/// Whether `block` hands `record` to a call: the attempt sent again as it is.
fn sends_again(idx: &NodeIndex<'_>, block: Node<'_>, record: &str, src: &str) -> bool {
    idx.within(block, kinds::CALL).iter().any(|&call| {
        syntax::positional_args(call)
            .iter()
            .chain(syntax::keyword_args(call, src).iter().map(|(_, v)| v))
            .any(|a| syntax::text(*a, src) == record)
    })
}

/// The fresh key `func` makes after `from`: in its own code, or in a function of the file it
/// calls (`self._open_attempt(...)` that sets `idempotency_key=f"lr_{uuid4().hex}"`).
fn fresh_key_after(idx: &NodeIndex<'_>, func: Node<'_>, from: usize, src: &str) -> Option<String> {
    let makes = |text: &str| FRESH.iter().find(|f| text.contains(*f)).copied();
    for &call in idx.within(func, kinds::CALL) {
        if call.start_byte() < from {
            continue;
        }
        if let Some(f) = makes(syntax::text(call, src)) {
            return Some(format!("`{f})`"));
        }
        let name = syntax::callee_name(call, src);
        if name.is_empty() {
            continue;
        }
        let callee = idx
            .all(kinds::FUNCTION_DEFINITION)
            .iter()
            .find(|f| f.id() != func.id() && syntax::function_name(**f, src) == name);
        if let Some(callee) = callee
            && let Some(f) = makes(syntax::text(*callee, src))
        {
            return Some(format!("`{f})` in `{name}`"));
        }
    }
    None
}

/// A state of an unknown outcome the file names beside those tested, of the same class
/// (`LessonRefund.UNKNOWN` beside `LessonRefund.PENDING`) or, for literal states, a literal the
/// file writes to a status (`refund.status = "unknown"`).
fn unknown_state(tested: &[&str], src: &str) -> Option<String> {
    let member = |t: &&str| {
        let t = t.trim_matches(['"', '\'']);
        t.rsplit('.').next().unwrap_or(t).to_string()
    };
    if tested.iter().any(|t| names_unknown(&member(t))) {
        return None;
    }
    let class = tested
        .iter()
        .find_map(|t| t.rsplit_once('.').map(|(class, _)| class));
    if let Some(class) = class {
        let prefix = format!("{class}.");
        return src.match_indices(&prefix).find_map(|(at, _)| {
            // `LessonRefund.UNKNOWN`, not `OtherLessonRefund.UNKNOWN`.
            if src[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
            {
                return None;
            }
            let member = src[at + prefix.len()..]
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or("");
            names_unknown(member).then(|| format!("{prefix}{member}"))
        });
    }
    let quote = tested.first()?.chars().next()?;
    if !matches!(quote, '"' | '\'') {
        return None;
    }
    src.split(quote)
        .skip(1)
        .step_by(2)
        .filter(|literal| literal.len() < 40 && names_unknown(literal))
        .find(|literal| {
            let written = format!("{quote}{literal}{quote}");
            [
                "status = ",
                "status=",
                "state = ",
                "state=",
                "\"status\": ",
                "'status': ",
            ]
            .iter()
            .any(|field| src.contains(&format!("{field}{written}")))
        })
        .map(|literal| format!("{quote}{literal}{quote}"))
}

/// Whether a state's name says its outcome is not known (`UNKNOWN`, `TIMED_OUT`,
/// `OUTCOME_UNKNOWN`), and nothing else (`RECHECK_UNKNOWN_AFTER_MINUTES` is a delay).
fn names_unknown(member: &str) -> bool {
    const ALSO: &[&str] = &[
        "timed", "out", "in", "outcome", "result", "response", "state", "status",
    ];
    let words = syntax::name_words(member);
    !words.is_empty()
        && words.iter().any(|w| UNKNOWN.contains(&w.as_str()))
        && words
            .iter()
            .all(|w| UNKNOWN.contains(&w.as_str()) || ALSO.contains(&w.as_str()))
}
