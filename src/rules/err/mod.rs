//! Error-contract rules: what a function does when something fails, and whether its callers
//! can still tell a failure from a result.

pub mod ack_before_handling;
pub mod broad_except_returns_none;
pub mod coroutine_tested_unawaited;
pub mod error_contract_changed;
pub mod failure_no_longer_raised;
pub mod failure_swallowed;
pub mod lookup_failure_read_as_empty;
mod made_up_answer;
pub mod retries_exhausted_return_none;
pub mod timeout_read_as_failure;
pub mod traceback_lost;
mod unknown_given_up;

use tree_sitter::Node;

use crate::index::{ProjectIndex, TaskRef, exception_covers};
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::review::Finding;
use crate::rules::Ctx;
use crate::rules::facts::FunctionFacts;

/// What an `except` clause catches, as a message says it: `` `except Exception` ``,
/// `` `except (KeyError, ValueError)` ``, or `` `except:` `` for a bare one.
fn caught(clause: Node<'_>, src: &str) -> String {
    match syntax::except_types(clause).len() {
        0 => "`except:`".to_string(),
        1 => format!("`except {}`", caught_types(clause, src)),
        _ => format!("`except ({})`", caught_types(clause, src)),
    }
}

/// The types an `except` names, as written and joined (`GatewayDeclined, CardError`).
pub(crate) fn caught_types(clause: Node<'_>, src: &str) -> String {
    syntax::except_types(clause)
        .into_iter()
        .map(|t| syntax::text(t, src))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `node` belongs to `func` itself, not to a function nested in it.
pub(crate) fn owned_by(node: Node<'_>, func: Node<'_>, idx: &NodeIndex<'_>) -> bool {
    idx.enclosing(node, kinds::FUNCTION_DEFINITION)
        .is_some_and(|f| f.id() == func.id())
}

/// A call of `name` elsewhere in the change whose result is read without a check.
pub(crate) struct Dereference {
    /// Where it is read: `path:line`.
    pub at: String,
    /// What that read raises on `None` (`facts::none_error`).
    pub error: (&'static str, &'static str),
}

impl Dereference {
    /// Names the place (`caller`) and what it raises (`error`, `error_name`) in `finding`'s
    /// `caller` note.
    pub fn cite(self, finding: &mut crate::review::Finding) {
        finding
            .arg("caller", self.at)
            .arg("error_name", self.error.0)
            .arg("error", self.error.1)
            .note("caller");
    }
}

/// The first call of `name` elsewhere in the change whose result is read without a check.
pub(crate) fn dereferencing_caller(cx: &Ctx<'_>, name: &str) -> Option<Dereference> {
    cx.change
        .calls_named(cx.side, name)
        .find(|(_, c)| c.deref_line.is_some() && !c.checked)
        .and_then(|(f, c)| {
            Some(Dereference {
                at: format!("{}:{}", f.path, c.deref_line?),
                error: crate::rules::facts::none_error(c.deref_subscript),
            })
        })
}

/// The first task (of `tasks`, nearest first) whose `autoretry_for` covers something the
/// changed function now catches and turns into `None`, with those exception names: the retry
/// the task was written with no longer happens. `autoretry_for=(Exception,)` still fires (on
/// the `AttributeError` that follows), so it is not counted.
/// Names the task whose autoretry the change stops, with its decorator as evidence.
pub(crate) fn cite_lost_autoretry(finding: &mut Finding, task: &TaskRef, lost: &[String]) {
    finding
        .arg("task", task.qualname.clone())
        .arg("task_at", format!("{}:{}", task.path, task.decorator.line))
        .arg("autoretry", lost.join(", "))
        .note("autoretry")
        .evidence(&task.path, task.decorator.line, "evidence_task", Vec::new());
}

pub(crate) fn lost_autoretry(
    project: &ProjectIndex,
    tasks: &[TaskRef],
    newly_caught: &[String],
) -> Option<(TaskRef, Vec<String>)> {
    tasks.iter().find_map(|task| {
        let lost: Vec<String> = project
            .autoretry_for(task)
            .into_iter()
            .filter(|retried| {
                let last = retried.rsplit('.').next().unwrap_or(retried);
                !matches!(last, "Exception" | "BaseException")
            })
            .filter(|retried| {
                newly_caught.iter().any(|caught| {
                    exception_covers(caught, retried) || exception_covers(retried, caught)
                })
            })
            .collect();
        (!lost.is_empty()).then(|| (task.clone(), lost))
    })
}

/// Exception types `new` catches that `old` (its previous version, if any) let through.
pub(crate) fn newly_caught(new: &FunctionFacts, old: Option<&FunctionFacts>) -> Vec<String> {
    new.caught
        .iter()
        .filter(|t| !old.is_some_and(|o| o.caught.iter().any(|c| exception_covers(c, t))))
        .cloned()
        .collect()
}

/// Words that name an attempt counter or a retry budget; not a kind of error or answer that may
/// be retried (`RETRYABLE_STATUSES`), which says nothing of how many times it was.
fn names_attempts(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    lower
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .filter(|w| !(w.contains("retryable") || w.contains("retriable")))
        .any(|w| {
            ["attempt", "retr", "tries", "backoff"]
                .iter()
                .any(|a| w.contains(a))
        })
}

/// Words that name a backoff delay (`for delay in DELAYS:`).
fn names_delay(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    ["delay", "wait", "pause", "sleep", "interval"]
        .iter()
        .any(|w| lower.contains(w))
}

/// Words that name a clock or a time budget (`while time.monotonic() < deadline`).
fn names_clock(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    ["time", "deadline", "expire", "elapsed", "budget"]
        .iter()
        .any(|w| lower.contains(w))
}

/// Whether a `for`/`while` loop retries: a `for` over a `range(...)` or an attempts counter, or
/// any `while`, whose body wraps a call in `try` and goes round again when it fails.
pub(crate) fn is_retry_loop(lp: Node<'_>, func: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> bool {
    if lp.kind() == kinds::FOR_STATEMENT {
        let iterable = lp
            .field("right")
            .map(|r| syntax::text(r, src))
            .unwrap_or("");
        let target = lp.field("left").map(|l| syntax::text(l, src)).unwrap_or("");
        if !(iterable.starts_with("range(")
            || names_attempts(iterable)
            || names_attempts(target)
            || names_delay(target))
        {
            return false;
        }
        // A retry stops when an attempt works: a `return` or `break` of this loop outside its
        // handlers. A `for i in range(n)` whose `try` skips bad items goes on regardless.
        let leaves = |kind: &str| {
            idx.within(lp, kind).iter().any(|exit| {
                innermost_loop(*exit, idx).is_some_and(|l| l.id() == lp.id())
                    && idx
                        .enclosing(*exit, kinds::EXCEPT_CLAUSE)
                        .is_none_or(|clause| !syntax::contains(lp, clause))
            })
        };
        if !leaves(kinds::RETURN_STATEMENT) && !leaves(kinds::BREAK_STATEMENT) {
            return false;
        }
    }
    if lp.kind() == kinds::WHILE_STATEMENT && steps_along_a_chain(lp, idx, src) {
        return false;
    }
    idx.within(lp, kinds::TRY_STATEMENT)
        .iter()
        .filter(|t| owned_by(**t, func, idx))
        .filter(|t| innermost_loop(**t, idx).is_some_and(|l| l.id() == lp.id()))
        .any(|t| wraps_call(*t, idx) && some_handler_goes_round(*t, idx, src))
}

/// A `while` that walks a chain rather than trying again: a name its condition reads is moved
/// on from itself (`while category: ... category = category.parent`, `node = node["next"]`).
/// Each round looks at something else; running out is the end of the chain, not of attempts.
/// A loop that sends a request each round is a failover (`endpoint = endpoint["fallback"]`):
/// each round sends the payment again, somewhere else, and running out is running out of
/// attempts.
fn steps_along_a_chain(lp: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> bool {
    let Some(condition) = lp.field("condition") else {
        return false;
    };
    let read = syntax::text(condition, src);
    let words: Vec<&str> = read
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .collect();
    let steps = idx.within(lp, kinds::ASSIGNMENT).iter().any(|a| {
        let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
            return false;
        };
        let name = syntax::text(left, src);
        left.kind() == kinds::IDENTIFIER
            && words.contains(&name)
            && matches!(right.kind(), kinds::ATTRIBUTE | kinds::SUBSCRIPT)
            && syntax::text(right, src)
                .strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(['.', '[']))
    });
    // Few loops step along anything: their calls are read only then.
    steps
        && !idx
            .within(lp, kinds::CALL)
            .iter()
            .any(|&call| crate::rules::facts::sends_by_name(&idx.call_text(call, src)))
}

/// The innermost loop around `node`.
pub(crate) fn innermost_loop<'t>(node: Node<'_>, idx: &NodeIndex<'t>) -> Option<Node<'t>> {
    let a = idx.enclosing(node, kinds::FOR_STATEMENT);
    let b = idx.enclosing(node, kinds::WHILE_STATEMENT);
    match (a, b) {
        (Some(a), Some(b)) => Some(if a.start_byte() > b.start_byte() {
            a
        } else {
            b
        }),
        (a, b) => a.or(b),
    }
}

fn wraps_call(try_stmt: Node<'_>, idx: &NodeIndex<'_>) -> bool {
    try_stmt
        .field("body")
        .is_some_and(|body| !idx.within(body, kinds::CALL).is_empty())
}

/// Some `except` of the `try` lets the loop run again.
fn some_handler_goes_round(try_stmt: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> bool {
    let mut cursor = try_stmt.walk();
    try_stmt
        .named_children(&mut cursor)
        .filter(|c| c.kind() == kinds::EXCEPT_CLAUSE)
        .filter_map(syntax::except_body)
        .any(|body| handler_goes_round(body, idx, src))
}

/// The body of an `except` lets its loop run again: it `continue`s, sleeps, or ends without
/// leaving the loop.
pub(crate) fn handler_goes_round(body: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> bool {
    let stmts = syntax::statements(body);
    let continues = stmts.iter().any(|s| s.kind() == kinds::CONTINUE_STATEMENT);
    let sleeps = idx
        .within(body, kinds::CALL)
        .iter()
        .any(|c| syntax::callee_name(*c, src) == "sleep");
    continues || sleeps || syntax::block_falls_through(body, src)
}

/// Whether an `if`'s condition inside loop `lp` is about the attempts: it names a counter or a
/// retry budget, the loop's variable, or a name the loop counts up (`n += 1`).
pub(crate) fn about_attempts(lp: Node<'_>, cond: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> bool {
    let text = syntax::text(cond, src);
    if names_attempts(text) {
        return true;
    }
    let loop_var = lp.field("left").map(|l| syntax::text(l, src));
    let counted = |w: &str| {
        idx.within(lp, kinds::AUGMENTED_ASSIGNMENT)
            .iter()
            .any(|a| a.field("left").is_some_and(|l| syntax::text(l, src) == w))
    };
    let of_the_loop = |t: &str| {
        names_attempts(t)
            || t.split(|c: char| !c.is_alphanumeric() && c != '_')
                .any(|w| !w.is_empty() && (loop_var == Some(w) || counted(w)))
    };
    // `final_try = try_number == self.max_tries` in the loop, then `if final_try:`: a flag
    // set from the attempts.
    let flagged = |w: &str| {
        idx.within(lp, kinds::ASSIGNMENT).iter().any(|a| {
            a.field("left").is_some_and(|l| syntax::text(l, src) == w)
                && a.field("right")
                    .is_some_and(|r| of_the_loop(syntax::text(r, src)))
        })
    };
    text.split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .any(|w| loop_var == Some(w) || counted(w) || flagged(w))
}

/// The loop gives up by raising on its own: a `raise` under an `if` about the attempts (or the
/// loop variable), or in the loop's `else:`.
pub(crate) fn raises_when_exhausted(lp: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> bool {
    let in_else = lp
        .field("alternative")
        .is_some_and(|e| !idx.within(e, kinds::RAISE_STATEMENT).is_empty());
    in_else
        || idx.within(lp, kinds::RAISE_STATEMENT).iter().any(|r| {
            idx.enclosing(*r, kinds::IF_STATEMENT)
                .filter(|i| i.start_byte() > lp.start_byte())
                .and_then(|i| i.field("condition"))
                .is_some_and(|c| about_attempts(lp, c, idx, src) && !asks_of_the_error(c, src))
        })
}

/// `not retry_if(exc)`, `not is_retryable(err)`: a test of the error caught, whatever its name
/// says of retries; it raises the errors not worth another try, not the last one.
fn asks_of_the_error(condition: Node<'_>, src: &str) -> bool {
    let mut test = condition;
    while test.kind() == kinds::NOT_OPERATOR || test.kind() == kinds::PARENTHESIZED_EXPRESSION {
        match test.field("argument").or_else(|| test.named_child(0)) {
            Some(inner) => test = inner,
            None => return false,
        }
    }
    if test.kind() != kinds::CALL {
        return false;
    }
    let Some(clause) = syntax::ancestor(test, kinds::EXCEPT_CLAUSE) else {
        return false;
    };
    let alias = syntax::except_alias(clause, src);
    matches!(syntax::positional_args(test).as_slice(), [only] if Some(syntax::text(*only, src)) == alias)
}
