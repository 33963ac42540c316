//! IDEM007 key-expires-before-the-retries-end: a key that stops a repeat (a claim, a dedup
//! marker, an idempotency key kept for the retries) set to expire before the background task that
//! runs the code has made its last retry. A retry after that finds no key and goes through again.
//!
//! The task's schedule is read from what the code spells (`retries=3, retry_delay=60`,
//! `autoretry_for` with `max_retries` and a delay or backoff, `self.retry(countdown=...)`); a key
//! the code deletes again (a lock held for one attempt) is meant to end before the retries.
use tree_sitter::Node;

use super::key_ttl_unit;
use crate::index::TaskRef;
use crate::python::{NodeIndex, kinds, syntax};
use crate::review::Severity;
use crate::rules::facts;
use crate::rules::retry::eval;
use crate::rules::retry::task_retries::{self, Schedule};
use crate::rules::{Check, Ctx, Gate, Local, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "IDEM007",
    doc: include_str!("../../../rules/idem/IDEM007.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a cache write that spells a lifetime. Whether the file calls a cache is
/// worked out once for the family's gates, and most files do not: asked first.
fn gate(s: &Scan<'_>) -> bool {
    super::has_cache_call(s) && s.mentions(&["ex=", "px=", "timeout", "expire", "setex"])
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    for &call in idx.all(kinds::CALL) {
        let method = cx.callee_name(call);
        let Some((lifetime, scale)) = lifetime_arg(call, method, src) else {
            continue;
        };
        // A number of seconds given as milliseconds is IDEM006's finding, not a short lifetime.
        if scale < 1.0 && key_ttl_unit::says_seconds(idx, src, lifetime) {
            continue;
        }
        let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let Some(ttl) = lifetime_seconds(cx, idx, func, lifetime).map(|v| v * scale) else {
            continue;
        };
        if super::cache_receiver(call, cx).is_none() {
            continue;
        }
        let Some(key) = super::key_of(call, method, src) else {
            continue;
        };
        let qualname = facts::qualname(func, idx, src);
        if !key_ttl_unit::guards_a_repeat(cx, call, &format!("{key} {qualname}"))
            || released(cx, idx, call, &key, true)
            || !before_the_work(cx, idx, func, call, method)
        {
            continue;
        }
        let function = super::function_facts(cx, call);
        // The provider's own idempotency then stops a second charge, whatever the cache holds.
        if function.is_some_and(|f| sends_a_steady_key(cx, f)) {
            continue;
        }
        let on_path = super::on_money_path(cx, function);
        if !on_path && !key_ttl_unit::about_money(cx, &key, &qualname) {
            continue;
        }
        let Some((task, schedule)) = retried_by(cx, idx, func, &qualname)
            .into_iter()
            .find(|(_, s)| s.total() > ttl)
        else {
            continue;
        };
        // What it holds is an idempotency key made on the spot: a retry after it expires makes
        // a new one.
        let minted = stored_value(call, method, src)
            .is_some_and(|v| super::key_made_per_attempt::makes_random_token(v, idx, src));
        // `key` says less than what it holds: `f"renewal:{subscription_id}"`.
        let shown = match super::resolve(cx, call, &key) {
            resolved if is_name(&key) && resolved.len() <= MAX_KEY_CHARS => resolved,
            _ => key,
        };
        let finding = cx
            .report(&RULE, call)
            .arg("key", shown)
            .arg("ttl", span(ttl))
            .arg("task", task.qualname.clone())
            .arg("task_at", format!("{}:{}", task.path, task.decorator.line))
            .arg("window", span(schedule.total()))
            .arg("formula", schedule.formula())
            .evidence(
                &task.path,
                task.decorator.line,
                "evidence_task",
                vec![("task", task.qualname.clone())],
            );
        if schedule.jitter {
            finding.arg("up_to", "yes");
        }
        if minted {
            finding.note("new_key");
            if on_path {
                finding.severity(Severity::Blocker);
            }
        } else {
            finding.note("claim");
        }
    }
}

/// Whether the function, or a caller of it in the change, sends the provider the same
/// idempotency key on every run.
fn sends_a_steady_key(cx: &Ctx<'_>, func: &facts::FunctionFacts) -> bool {
    super::key_is_deterministic(cx, func)
        || cx.facts.is_some_and(|file| {
            super::callers_of(cx, file, func, 2)
                .iter()
                .any(|(caller, _)| super::key_is_deterministic(cx, caller))
        })
}

/// `25 min`, `30 min 30 s`: a window is a sum of backoffs, seldom a round number.
pub(crate) fn span(seconds: f64) -> String {
    let whole = seconds.round() as i64;
    if (seconds - seconds.round()).abs() < 1e-9 && whole > 60 && whole < 3600 && whole % 60 != 0 {
        return format!("{} min {} s", whole / 60, whole % 60);
    }
    eval::human(seconds)
}

/// A key longer than this is shown as the name it is held in.
const MAX_KEY_CHARS: usize = 80;

fn is_name(text: &str) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
}

/// A lifetime's value in its own unit: folded in the file, or, with a repository, a constant
/// another module holds (`timeout=CLAIM_TTL` imported, `constants.CLAIM_TTL`).
pub(crate) fn lifetime_seconds(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    lifetime: Node<'_>,
) -> Option<f64> {
    let folded = eval::Env::of(idx, cx.src(), Some(func)).eval(lifetime);
    let value = folded.or_else(|| {
        if !matches!(lifetime.kind(), kinds::IDENTIFIER | kinds::ATTRIBUTE) {
            return None;
        }
        let project = cx.project()?;
        let text = syntax::text(lifetime, cx.src());
        let here = project.file(cx.path)?;
        project.number(here, text).or_else(|| {
            let (module, assignment) = project.resolve_expr(cx.path, text)?;
            project.number(module, &assignment.value)
        })
    })?;
    (value > 0.0).then_some(value)
}

/// Whether the write comes before the work it guards, so that a retry of that work finds it:
/// a claim whose answer is read (`if not cache.add(...)`), a helper that hands back what it
/// stored, or a write followed by more calls than logging. A marker written once the work is
/// done (`setex(f"done:{id}", ...)` last) is never met by the task's own retries, which follow a
/// failure before it.
fn before_the_work(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    call: Node<'_>,
    method: &str,
) -> bool {
    let src = cx.src();
    if !facts::stands_alone(call.start_byte(), call.end_byte(), src) {
        return true;
    }
    let stored = stored_value(call, method, src).map(|v| syntax::normalized(v, src));
    let owned =
        |n: &Node<'_>| super::owned_by(idx, *n, Some(func)) && n.start_byte() > call.end_byte();
    let hands_back = idx
        .within(func, kinds::RETURN_STATEMENT)
        .iter()
        .filter(|r| owned(r))
        .any(|r| {
            r.named_child(0)
                .is_some_and(|v| Some(syntax::normalized(v, src)) == stored)
        });
    hands_back
        || idx
            .within(func, kinds::CALL)
            .iter()
            .filter(|c| owned(c))
            .any(|c| !facts::only_records(syntax::callee(*c, src)))
}

/// The argument giving a cache write's lifetime, and what turns it into seconds: `ex=` and
/// `timeout=` are seconds, `px=` milliseconds; the third positional of `set` and `add` is
/// seconds for redis-py, Django's cache and pymemcache alike.
pub(crate) fn lifetime_arg<'t>(call: Node<'t>, method: &str, src: &str) -> Option<(Node<'t>, f64)> {
    let keyword = |name: &str| syntax::keyword_arg(call, name, src);
    let positional = |i: usize| syntax::positional_args(call).get(i).copied();
    let (node, scale) = match method {
        "set" | "add" | "getex" => keyword("ex")
            .map(|n| (n, 1.0))
            .or_else(|| keyword("px").map(|n| (n, 0.001)))
            .or_else(|| keyword("timeout").map(|n| (n, 1.0)))
            .or_else(|| keyword("expire").map(|n| (n, 1.0)))
            .or_else(|| positional(2).map(|n| (n, 1.0)))?,
        "setex" | "expire" => (positional(1).or_else(|| keyword("time"))?, 1.0),
        "psetex" => (positional(1).or_else(|| keyword("time_ms"))?, 0.001),
        "pexpire" => (positional(1).or_else(|| keyword("time"))?, 0.001),
        _ => return None,
    };
    Some((node, scale))
}

/// Whether the file deletes the key again (`delete(key)` in a `finally`, a lock's `__exit__`):
/// then it is held for one run, and its lifetime is only a net for a crash. With `in_handlers`
/// false, a delete in an `except` does not count: dropped on a failure, the key lets the next
/// attempt through, and is kept after every success.
pub(crate) fn released(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    write: Node<'_>,
    key: &str,
    in_handlers: bool,
) -> bool {
    let src = cx.src();
    let resolved = super::resolve(cx, write, key);
    idx.all(kinds::CALL).iter().any(|&c| {
        matches!(
            cx.callee_name(c),
            "delete" | "unlink" | "delete_many" | "hdel" | "srem"
        ) && (in_handlers || idx.enclosing(c, kinds::EXCEPT_CLAUSE).is_none())
            && syntax::positional_args(c).first().is_some_and(|a| {
                let text = syntax::normalized(*a, src);
                text == key || text == resolved || super::resolve(cx, c, &text) == resolved
            })
    })
}

/// The value a cache write stores: `setex(name, time, value)`'s third, every other's second.
fn stored_value<'t>(call: Node<'t>, method: &str, src: &str) -> Option<Node<'t>> {
    match method {
        "setex" | "psetex" => syntax::positional_args(call).get(2).copied(),
        _ => syntax::positional_args(call)
            .get(1)
            .copied()
            .or_else(|| syntax::keyword_arg(call, "value", src)),
    }
}

/// The tasks that run `func` and how long each goes on retrying, nearest first: from the
/// repository's index when there is one, else the function's own task decorator and the tasks of
/// the file that call it.
fn retried_by<'t>(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    qualname: &str,
) -> Vec<(TaskRef, Schedule)> {
    let src = cx.src();
    let tasks = match cx.project() {
        Some(_) => cx.tasks_reaching(cx.path, qualname),
        None => tasks_in_file(cx, idx, func),
    };
    let local = |text: &str| local_number(idx, src, text);
    tasks
        .into_iter()
        .filter_map(|task| {
            let module = cx.project().and_then(|p| p.module(&task.module));
            let number = |text: &str| match (cx.project(), module) {
                (Some(p), Some(m)) => p.number(m, text),
                _ => local(text),
            };
            // The task's own `self.retry(...)`, where this file holds it.
            let def = (task.path == cx.path)
                .then(|| facts::function_by_qualname(idx, src, &task.qualname))
                .flatten();
            let default = task
                .keyword("default_retry_delay")
                .map_or(Some(180.0), &number);
            let own = |n: usize| task_retries::own_retry_delays(idx, src, def?, n, default);
            let schedule = task_retries::of_task(&task.decorator, &number, Some(&own))?;
            Some((task, schedule))
        })
        .collect()
}

/// From the diff alone: `func` itself if it is a task, and the tasks of the file that call it.
fn tasks_in_file<'t>(cx: &Ctx<'_>, idx: &NodeIndex<'t>, func: Node<'t>) -> Vec<TaskRef> {
    let src = cx.src();
    let name = syntax::function_name(func, src);
    let module = crate::index::module_of(cx.path);
    let mut out = Vec::new();
    for &def in idx.all(kinds::FUNCTION_DEFINITION) {
        let is_it = def.id() == func.id();
        let calls_it = || {
            cx.facts
                .and_then(|f| f.function(&facts::qualname(def, idx, src)))
                .is_some_and(|f| f.callees.iter().any(|c| c == name))
        };
        if !is_it && !calls_it() {
            continue;
        }
        let decorators = crate::index::read_decorators(def, idx, src);
        let Some(decorator) = decorators
            .into_iter()
            .find(|d| crate::index::is_task_decorator(&d.callee, cx.vocab))
        else {
            continue;
        };
        out.push(TaskRef {
            path: cx.path.to_string(),
            module: module.clone(),
            qualname: facts::qualname(def, idx, src),
            decorator,
            hops: usize::from(!is_it),
        });
    }
    out.sort_by_key(|t| t.hops);
    out
}

/// A keyword's value from the diff alone: a literal, a module constant, or a product of them
/// (`60 * 60`).
fn local_number(idx: &NodeIndex<'_>, src: &str, text: &str) -> Option<f64> {
    let text = text.trim();
    if !text.contains("**") && text.contains('*') {
        return text
            .split('*')
            .map(|part| local_number(idx, src, part))
            .product::<Option<f64>>();
    }
    if let Ok(n) = text.replace('_', "").parse::<f64>() {
        return n.is_finite().then_some(n);
    }
    let constant = eval::module_constant(idx, text, src)?;
    eval::Env::of(idx, src, None).eval(constant)
}
