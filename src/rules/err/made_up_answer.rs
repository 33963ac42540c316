//! ERR006's reading of a made-up answer: a handler of a timeout or of the provider's
//! unavailability that puts a definite answer of its own in place of the one that never came
//! (`except ProviderUnavailable: existing = {"status": "expired"}`), which the code after it
//! then acts on as the provider's. The provider may hold the object in any state (a checkout
//! session still open or already paid, a payment captured): the code goes on to what the
//! made-up state calls for, a new session, a second charge, a release.
//!
//! Left alone: a state that says the outcome is unknown (`pending`, `unknown`), and an answer
//! the code never reads again.
use tree_sitter::Node;

use super::timeout_read_as_failure::says_unknown;
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::facts;

/// The keys a provider's answer gives its state by.
const STATE_KEYS: &[&str] = &["status", "state", "outcome", "result"];

pub(super) struct MadeUp<'t> {
    /// The assignment of the made-up answer in the handler.
    pub mark: Node<'t>,
    /// The call of the `try` whose answer it stands for, as written.
    pub step: String,
    pub step_line: u32,
    /// The state made up, as written (`"expired"`).
    pub state: String,
    /// The first line after the `try` that reads the answer's state.
    pub read_line: u32,
}

/// The made-up answer `handler` (of `clause`) gives in place of a call of its `try`, if the code
/// after the `try` reads its state.
pub(super) fn made_up<'t>(
    idx: &NodeIndex<'t>,
    clause: Node<'t>,
    handler: Node<'t>,
    src: &str,
) -> Option<MadeUp<'t>> {
    // The cheap tests first: a handler's own assignment of a literal state, which the code
    // after the `try` goes on with.
    if !syntax::block_falls_through(handler, src) {
        return None;
    }
    let (mark, var, state, whole) =
        idx.within(handler, kinds::ASSIGNMENT)
            .iter()
            .find_map(|&a| {
                let left = a.field("left").filter(|l| l.kind() == kinds::IDENTIFIER)?;
                let right = a.field("right")?;
                match literal_state(right, src) {
                    Some(state) => Some((a, syntax::text(left, src), state, false)),
                    None => Some((a, syntax::text(left, src), member_state(right, src)?, true)),
                }
            })?;
    let func = idx.enclosing(clause, kinds::FUNCTION_DEFINITION)?;
    if !super::owned_by(mark, func, idx) {
        return None;
    }
    let try_statement = syntax::try_of(clause)?;
    let body = try_statement.field("body")?;
    let bound = idx.within(body, kinds::ASSIGNMENT).iter().any(|&a| {
        a.field("left")
            .is_some_and(|l| l.kind() == kinds::IDENTIFIER && syntax::text(l, src) == var)
            && a.field("right")
                .map(crate::rules::idem::strip_await)
                .is_some_and(|r| r.kind() == kinds::CALL)
    });
    if !bound {
        return None;
    }
    // The request whose answer never came: the first call of the `try` that is not a log line
    // (`self._braintree.get_subscription(...)` before `verdict = _verdict(remote, ...)`).
    let step = idx.within(body, kinds::CALL).iter().find_map(|&c| {
        let callee = syntax::callee(c, src);
        (!callee.is_empty() && !facts::only_records(callee))
            .then(|| (callee.to_string(), syntax::lines(c).0))
    })?;
    let after = try_statement.end_byte();
    let read_line = if whole {
        compared_after(idx, func, after, var, src)?
    } else {
        read_after(func, after, var, src)?
    };
    Some(MadeUp {
        mark,
        step: step.0,
        step_line: step.1,
        state: state.to_string(),
        read_line,
    })
}

/// A state set to a string that says something definite: the value of a state key of a dict
/// (`{"status": "expired"}`) or a keyword of a call (`Session(status="expired")`).
fn literal_state<'s>(value: Node<'_>, src: &'s str) -> Option<&'s str> {
    let pairs: Vec<(&str, Node<'_>)> = match value.kind() {
        kinds::DICTIONARY => crate::python::named_children(value)
            .into_iter()
            .filter(|p| p.kind() == kinds::PAIR)
            .filter_map(|p| {
                Some((
                    syntax::string_value(p.field("key")?, src)?,
                    p.field("value")?,
                ))
            })
            .collect(),
        kinds::CALL => syntax::keyword_args(value, src),
        _ => return None,
    };
    pairs.into_iter().find_map(|(key, v)| {
        if !STATE_KEYS.contains(&key) || v.kind() != kinds::STRING {
            return None;
        }
        let state = syntax::string_value(v, src)?;
        let lower = state.to_ascii_lowercase();
        (!state.is_empty() && !says_unknown(&lower)).then(|| syntax::text(v, src))
    })
}

/// A member of a class of states that says something definite (`Verdict.NOT_APPLIED`,
/// `SessionStatus.EXPIRED`), as written.
fn member_state<'s>(value: Node<'_>, src: &'s str) -> Option<&'s str> {
    if value.kind() != kinds::ATTRIBUTE {
        return None;
    }
    let class = syntax::text(value.field("object")?, src);
    let class = class
        .rsplit('.')
        .next()
        .unwrap_or(class)
        .to_ascii_lowercase();
    let member = syntax::text(value.field("attribute")?, src).to_ascii_lowercase();
    (["status", "state", "verdict", "outcome", "result"]
        .iter()
        .any(|k| class.ends_with(k))
        && !says_unknown(&member)
        && !member.contains("review"))
    .then(|| syntax::text(value, src))
}

/// The line of the first test of `var` in `func` after byte `after` (`if verdict is
/// Verdict.APPLIED:`, `elif verdict == ...`).
fn compared_after(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    after: usize,
    var: &str,
    src: &str,
) -> Option<u32> {
    idx.within(func, kinds::COMPARISON_OPERATOR)
        .iter()
        .filter(|c| c.start_byte() >= after)
        .find(|c| {
            c.named_child(0)
                .is_some_and(|l| l.kind() == kinds::IDENTIFIER && syntax::text(l, src) == var)
        })
        .map(|c| syntax::lines(*c).0)
}

/// The line of the first read of `var`'s state in `func` after byte `after`: `var["status"]`,
/// `var.get("state")`, `var.status`.
fn read_after(func: Node<'_>, after: usize, var: &str, src: &str) -> Option<u32> {
    let text = src.get(after..func.end_byte())?;
    let at = STATE_KEYS
        .iter()
        .flat_map(|key| {
            [
                format!("{var}[\"{key}\"]"),
                format!("{var}['{key}']"),
                format!("{var}.get(\"{key}\""),
                format!("{var}.get('{key}'"),
                format!("{var}.{key}"),
            ]
        })
        .filter_map(|needle| {
            text.match_indices(&needle).find_map(|(i, _)| {
                // A whole name, not the end of a longer one.
                let before = text[..i].chars().next_back();
                before
                    .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                    .then_some(i)
            })
        })
        .min()?;
    let line = src.get(..after + at)?.matches('\n').count() as u32 + 1;
    Some(line)
}
