//! RETRY001 sleep-after-last-attempt: a backoff sleep in a retry loop that also runs after the
//! final attempt, so the caller waits for nothing before the failure; the message adds up the
//! loop's worst case when its numbers are in the file.
use tree_sitter::Node;

use super::eval::{self, Env};
use super::loops::{self, RetryLoop};
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::review::Severity;
use crate::rules::facts::{self, Target};
use crate::rules::{Check, Ctx, Gate, Rule};

pub(crate) static RULE: Rule = Rule {
    id: "RETRY001",
    doc: include_str!("../../../rules/retry/RETRY001.md"),
    check: Check::Tree(check),
    gate: Gate::When(super::has_retry_loop),
};

/// Words in a condition that say it is about the last attempt, in English and in the other
/// languages payment teams name their code in (`laatste`, `letzte`, `dernier`, `ultimo`).
const GUARD_WORDS: &[&str] = &[
    "last",
    "final",
    "remaining",
    "left",
    "laatste",
    "letzte",
    "verbleibend",
    "dernier",
    "derniere",
    "ultimo",
    "ultima",
    "ostatni",
];

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let all = loops::retry_loops(idx, src);
    for l in &all {
        let helpers = l
            .own_calls(idx)
            .filter_map(|c| Some((c, sleeping_helper(c, idx, src)?)));
        let sleeps = l.sleeps(idx, src).into_iter().map(|s| (s, None));
        let sleeps: Vec<_> = sleeps.chain(helpers.map(|(c, h)| (c, Some(h)))).collect();
        for (sleep, helper) in sleeps {
            let innermost = loops::loop_of(&all, sleep).is_some_and(|i| i.node.id() == l.node.id());
            if !innermost || !after_an_attempt(l, sleep, idx, src) || guarded(l, sleep, idx, src) {
                continue;
            }
            report(cx, l, sleep, helper);
        }
    }
}

/// A function of this file that `call` calls and that sleeps whatever it is given
/// (`_backoff(attempt)`, whose body is `time.sleep(2 ** attempt)`): the sleep it makes.
fn sleeping_helper<'t>(call: Node<'_>, idx: &NodeIndex<'t>, src: &str) -> Option<Node<'t>> {
    let callee = syntax::callee(call, src);
    let name = callee.strip_prefix("self.").unwrap_or(callee);
    if name.contains('.') || name == "sleep" {
        return None;
    }
    let helper = idx
        .all(kinds::FUNCTION_DEFINITION)
        .iter()
        .find(|f| syntax::function_name(**f, src) == name)?;
    let body = helper.field("body")?;
    // Only a sleep straight in its body: one under an `if` may be the helper's own guard.
    syntax::statements(body).into_iter().find_map(|stmt| {
        let expr = (stmt.kind() == kinds::EXPRESSION_STATEMENT)
            .then(|| stmt.named_child(0))
            .flatten()?;
        let call = if expr.kind() == kinds::AWAIT {
            expr.named_child(0)?
        } else {
            expr
        };
        (call.kind() == kinds::CALL && syntax::callee_name(call, src) == "sleep").then_some(call)
    })
}

/// The sleep follows an attempt (in its `except`, or after a call), rather than preceding the
/// first one: a sleep before the attempt never runs after the last.
fn after_an_attempt(l: &RetryLoop<'_>, sleep: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> bool {
    let in_handler = idx
        .enclosing(sleep, kinds::EXCEPT_CLAUSE)
        .is_some_and(|c| c.start_byte() >= l.body.start_byte());
    in_handler
        || l.own_calls(idx)
            .any(|c| c.end_byte() <= sleep.start_byte() && syntax::callee_name(c, src) != "sleep")
}

/// The sleep sits under an `if` about the attempt count, or such an `if` leaves the loop before it.
fn guarded(l: &RetryLoop<'_>, sleep: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> bool {
    idx.within(l.body, kinds::IF_STATEMENT).iter().any(|stmt| {
        // `if status in REFRESH: ... elif attempt + 1 < tries: sleep(...)`.
        let under_an_elif = syntax::elif_clauses(*stmt).into_iter().any(|e| {
            syntax::contains(e, sleep)
                && e.field("condition")
                    .is_some_and(|c| mentions_attempts(l, syntax::text(c, src)))
        });
        let about_attempts = stmt
            .field("condition")
            .is_some_and(|c| mentions_attempts(l, syntax::text(c, src)));
        if under_an_elif {
            return true;
        }
        if !about_attempts {
            return false;
        }
        let holds = syntax::contains(*stmt, sleep);
        holds || (stmt.end_byte() <= sleep.start_byte() && loops::exits(idx, *stmt))
    })
}

/// A condition about the attempt count: it names the limit, says "last"/"remaining", or compares
/// the counter with something other than 0 or 1 (`if attempt:` only skips the first attempt).
fn mentions_attempts(l: &RetryLoop<'_>, condition: &str) -> bool {
    let lower = condition.to_ascii_lowercase();
    let words: Vec<&str> = condition
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .filter(|w| !w.is_empty())
        .collect();
    let names_limit = words.iter().any(|w| l.limit_names.iter().any(|n| n == w));
    let counter = l.counter.as_deref();
    // Counting down, the counter is what is left: any test of it (`if retries_left:`,
    // `> 0`) tells the last attempt from the others.
    let countdown = l.step < 0.0;
    let compares_counter = counter.is_some_and(|c| words.contains(&c))
        && (countdown
            || words.iter().any(|w| {
                Some(*w) != counter
                    && !matches!(
                        *w,
                        "and" | "or" | "not" | "is" | "in" | "None" | "True" | "False"
                    )
                    && w.parse::<f64>().map_or(
                        w.chars()
                            .next()
                            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_'),
                        |n| n > 1.0,
                    )
            }));
    names_limit || compares_counter || GUARD_WORDS.iter().any(|w| lower.contains(w))
}

/// The worst case of one call of the loop, when its numbers are known.
pub(super) struct Budget {
    /// `3 × 15 s + 2 + 4 + 8 ≈ 59 s`.
    pub formula: String,
    pub total: f64,
    last_sleep: f64,
    pub with_timeout: bool,
}

/// The worst case of one call of `l`: every attempt runs into its timeout and every backoff
/// sleep that can run does (none after the last attempt when a guard skips it). RETRY005
/// compares it with the task's limits.
pub(super) fn worst_case(cx: &Ctx<'_>, l: &RetryLoop<'_>) -> Option<Budget> {
    let (idx, src) = (cx.index()?, cx.src());
    let sleep = l
        .sleeps(idx, src)
        .into_iter()
        .find(|s| after_an_attempt(l, *s, idx, src))?;
    budget(cx, l, sleep, guarded(l, sleep, idx, src))
}

/// `skip_last`: the sleep does not run after the final attempt.
fn budget(cx: &Ctx<'_>, l: &RetryLoop<'_>, sleep: Node<'_>, skip_last: bool) -> Option<Budget> {
    let (idx, src) = (cx.index()?, cx.src());
    let arg = sleep_seconds_arg(sleep, src)?;
    let attempts = l.attempts.as_ref()?;
    let sleeps: Option<Vec<f64>> = attempts
        .iter()
        .map(|v| {
            let env = Env {
                idx,
                src,
                func: Some(l.func),
                counter: l.counter.as_deref().map(|c| (c, l.counter_at(sleep, *v))),
            };
            env.eval(arg)
        })
        .collect();
    let mut sleeps = sleeps?;
    let attempts_count = sleeps.len();
    if skip_last {
        sleeps.pop();
    }
    let last_sleep = sleeps.last().copied().unwrap_or(0.0);
    let slept: f64 = sleeps.iter().sum();
    let terms = sleep_terms(&sleeps);
    let timeout = attempt_timeout(cx, l);
    let (formula, total) = match timeout {
        Some(t) => {
            let total = t * attempts_count as f64 + slept;
            (
                format!(
                    "{} × {} s + {terms} ≈ {} s",
                    attempts_count,
                    eval::seconds(t),
                    eval::seconds(total)
                ),
                total,
            )
        }
        None => (format!("{terms} ≈ {} s", eval::seconds(slept)), slept),
    };
    Some(Budget {
        formula,
        total,
        last_sleep,
        with_timeout: timeout.is_some(),
    })
}

fn sleep_seconds_arg<'t>(sleep: Node<'t>, src: &str) -> Option<Node<'t>> {
    syntax::positional_args(sleep).first().copied().or_else(|| {
        ["seconds", "delay", "secs"]
            .iter()
            .find_map(|k| syntax::keyword_arg(sleep, k, src))
    })
}

/// `2 + 4 + 8`; long runs keep their ends: `1 + 2 + … + 512`.
fn sleep_terms(sleeps: &[f64]) -> String {
    if sleeps.is_empty() {
        return "0".to_string();
    }
    let text: Vec<String> = sleeps.iter().map(|s| eval::seconds(*s)).collect();
    if text.len() <= 6 {
        return text.join(" + ");
    }
    let head = text.get(..2).unwrap_or(&[]).join(" + ");
    let last = text.last().cloned().unwrap_or_default();
    format!("{head} + … + {last}")
}

/// The `timeout=` of the HTTP call the loop retries, as a number of seconds.
fn attempt_timeout(cx: &Ctx<'_>, l: &RetryLoop<'_>) -> Option<f64> {
    let (idx, src, file) = (cx.index()?, cx.src(), cx.facts?);
    let env = Env::of(idx, src, Some(l.func));
    l.own_calls(idx)
        .filter(|c| facts::classify_call(*c, src, file, cx.vocab) == Target::Http)
        .find_map(|c| syntax::keyword_arg(c, "timeout", src).and_then(|t| timeout_seconds(&env, t)))
}

/// The longest one request can wait under a `timeout=` value: the number itself, the connect
/// and the read bound of a `(connect, read)` pair added up, and likewise for
/// `httpx.Timeout(read, connect=...)`.
fn timeout_seconds(env: &Env<'_, '_>, value: Node<'_>) -> Option<f64> {
    match value.kind() {
        kinds::TUPLE | kinds::PARENTHESIZED_EXPRESSION => {
            let parts = crate::python::named_children(value);
            match parts.as_slice() {
                [connect, read] => Some(env.eval(*connect)? + env.eval(*read)?),
                [single] => env.eval(*single),
                _ => None,
            }
        }
        kinds::CALL if syntax::callee_name(value, env.src) == "Timeout" => {
            let read = syntax::positional_args(value)
                .first()
                .copied()
                .or_else(|| syntax::keyword_arg(value, "timeout", env.src))
                .or_else(|| syntax::keyword_arg(value, "read", env.src))
                .and_then(|r| env.eval(r))?;
            let connect = match syntax::keyword_arg(value, "connect", env.src) {
                Some(c) => env.eval(c)?,
                None => 0.0,
            };
            Some(read + connect)
        }
        // `timeout=DEFAULT_TIMEOUT` with `DEFAULT_TIMEOUT = (3.05, 15)` at module level.
        kinds::IDENTIFIER => env.eval(value).or_else(|| {
            let constant = eval::module_constant(env.idx, syntax::text(value, env.src), env.src)?;
            matches!(
                constant.kind(),
                kinds::TUPLE | kinds::PARENTHESIZED_EXPRESSION | kinds::CALL
            )
            .then(|| timeout_seconds(env, constant))?
        }),
        _ => env.eval(value),
    }
}

/// `helper`: the sleep a called function makes, when `sleep` is that call.
fn report(cx: &mut Ctx<'_>, l: &RetryLoop<'_>, sleep: Node<'_>, helper: Option<Node<'_>>) {
    let src = cx.src();
    let qualname = cx
        .index()
        .map(|idx| facts::qualname(l.func, idx, src))
        .unwrap_or_default();
    let function = cx.facts.and_then(|f| f.function(&qualname)).cloned();
    let on_path = cx.on_payment_path(function.as_ref());
    // The helper's own argument is not the loop's: its numbers are not worked out.
    let budget = match helper {
        Some(_) => None,
        None => budget(cx, l, sleep, false),
    };
    let call = syntax::text(sleep, src).to_string();
    let fresh = cx.touches_added(syntax::lines(l.node).0, syntax::lines(l.node).1);
    // A task found in the repository answers the question (RETRY005 compares the numbers).
    let task_known = on_path && cx.task_config_known(cx.path, &qualname);
    let finding = cx.report(&RULE, sleep).arg("sleep", call);
    if let Some(inner) = helper {
        let name = syntax::callee(sleep, src);
        finding
            .arg(
                "helper",
                name.strip_prefix("self.").unwrap_or(name).to_string(),
            )
            .arg("helper_sleep", syntax::text(inner, src).to_string())
            .arg("helper_line", syntax::lines(inner).0.to_string())
            .note("helper");
    }
    // An awaited sleep holds no worker; the Celery time limits are about sync code.
    let is_async = syntax::is_async(l.func);
    if let Some(b) = &budget {
        let budget_note = match (b.with_timeout, is_async) {
            (false, _) => "sleeps",
            (true, false) => "budget",
            (true, true) => "budget_async",
        };
        finding
            .arg("last", eval::seconds(b.last_sleep))
            .arg("worst", b.formula.clone())
            .note("last")
            .note(budget_note);
    }
    if on_path && !is_async && !task_known {
        finding.note("limits");
    }
    if !on_path {
        finding.severity(Severity::Nit);
    }
    if !on_path || is_async || !fresh || cx.side != crate::source::Side::New {
        return;
    }
    let worst = budget
        .as_ref()
        .map(|b| b.formula.clone())
        .unwrap_or_default();
    let name = syntax::function_name(l.func, src).to_string();
    if !task_known {
        cx.ask(
            "task-config",
            vec![("function", name.clone()), ("worst", worst)],
        );
    }
    if function.as_ref().is_some_and(|f| f.http && !f.is_async)
        && !cx.runs_only_in_tasks(cx.path, &qualname)
    {
        let short = budget
            .as_ref()
            .map(|b| format!(" (≈ {} s)", eval::seconds(b.total)))
            .unwrap_or_default();
        cx.ask(
            "retry-async-callers",
            vec![("function", name), ("worst", short)],
        );
    }
}
