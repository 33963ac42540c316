//! Retried code: the stretches of a function that run again after a failure, whether a retry
//! loop's body or a whole function run again by a decorator or by Celery. IDEM004 and IDEM005
//! ask the same question of both: what does each attempt send?
use tree_sitter::Node;

use super::loops;
use crate::python::{Fields, NodeIndex, kinds, syntax};

/// One retried stretch of code: a retry loop's body, or a retried function's body.
pub(crate) struct Attempt<'t> {
    pub body: Node<'t>,
    pub func: Node<'t>,
    /// The loop's first line; `None` for a function that is run again whole.
    pub loop_line: Option<u32>,
    /// What runs the function again, for a function retried whole (`@retry(...)`).
    pub retried_by: Option<String>,
    /// Retried whole because it reads its own attempt count (`ctx["job"].attempts`, in
    /// `retried_by`): its queue runs it again, configured where the code does not show.
    pub counted: bool,
}

impl<'t> Attempt<'t> {
    /// The whole body of `func`, run again by `retried_by` (`None`: by what the caller knows, a
    /// task elsewhere, or nothing yet).
    pub(crate) fn whole(func: Node<'t>, retried_by: Option<String>) -> Option<Attempt<'t>> {
        Some(Attempt {
            body: func.field("body")?,
            func,
            loop_line: None,
            retried_by,
            counted: false,
        })
    }
}

/// The retried stretches of the file: every retry loop, and the body of every function that
/// is run again whole.
pub(crate) fn attempts<'t>(idx: &NodeIndex<'t>, src: &str) -> Vec<Attempt<'t>> {
    let mut out: Vec<Attempt<'t>> = loops::retry_loops(idx, src)
        .into_iter()
        .map(|l| Attempt {
            body: l.body,
            func: l.func,
            loop_line: Some(syntax::lines(l.node).0),
            retried_by: None,
            counted: false,
        })
        .collect();
    // `for attempt in Retrying(...)`, `async for attempt in AsyncRetrying(...)` with `with
    // attempt:` inside: tenacity runs the body again, and stops on its own.
    let tenacity =
        |r: Node<'_>| r.kind() == kinds::CALL && syntax::callee_name(r, src).ends_with("Retrying");
    for &lp in idx.all(kinds::FOR_STATEMENT) {
        // Or a helper of the file that builds one (`async for attempt in self._retrying()`,
        // `def _retrying(self): return AsyncRetrying(...)`).
        let by_tenacity = lp.field("right").is_some_and(|r| {
            tenacity(r)
                || r.kind() == kinds::CALL
                    && idx
                        .returned_by(idx.callee_name(r, src), src)
                        .into_iter()
                        .any(tenacity)
        });
        if !by_tenacity {
            continue;
        }
        let (Some(body), Some(func)) = (
            lp.field("body"),
            idx.enclosing(lp, kinds::FUNCTION_DEFINITION),
        ) else {
            continue;
        };
        if out.iter().any(|a| a.body.id() == body.id()) {
            continue;
        }
        out.push(Attempt {
            body,
            func,
            loop_line: Some(syntax::lines(lp).0),
            retried_by: None,
            counted: false,
        });
    }
    let enqueued = enqueued_with_retry(idx, src);
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        let by_queue = || {
            let name = syntax::function_name(func, src);
            enqueued
                .iter()
                .find(|(job, _)| *job == name)
                .filter(|_| idx.enclosing(func, kinds::CLASS_DEFINITION).is_none())
                .map(|(_, shown)| shown.clone())
        };
        if let Some(by) = retried_by(idx, func, src).or_else(by_queue) {
            out.extend(Attempt::whole(func, Some(by)));
        } else if let Some(read) = job_attempt_counts(idx, func, src).first() {
            // A job that reads its own attempt count (saq's `ctx["job"].attempts`, a
            // message's `retries`) is run again by its queue, whatever configures that.
            out.extend(
                Attempt::whole(func, Some(read.to_string()))
                    .map(|a| Attempt { counted: true, ..a }),
            );
        }
    }
    out
}

/// Jobs of the file that a queue runs again after a failure, by their last name, with the call
/// that says so: RQ's `queue.enqueue(pay_creator, campaign_id, retry=Retry(max=3))`,
/// `enqueue_call(func=...)`, `enqueue_in(delay, job, ...)`.
fn enqueued_with_retry<'s>(idx: &NodeIndex<'_>, src: &'s str) -> Vec<(&'s str, String)> {
    if !(src.contains("enqueue") && src.contains("retry=")) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for &call in idx.all(kinds::CALL) {
        let name = idx.callee_name(call, src);
        if !name.starts_with("enqueue") {
            continue;
        }
        let keywords = syntax::keyword_args(call, src);
        let Some((_, retry)) = keywords.iter().find(|(k, _)| *k == "retry") else {
            continue;
        };
        if matches!(retry.kind(), kinds::NONE | kinds::FALSE) {
            continue;
        }
        let positional = syntax::positional_args(call);
        let job = match name {
            "enqueue_in" | "enqueue_at" => positional.get(1).copied(),
            _ => keywords
                .iter()
                .find(|(k, _)| *k == "func" || *k == "f")
                .map(|(_, v)| *v)
                .or_else(|| positional.first().copied()),
        };
        let Some(job) = job.filter(|j| matches!(j.kind(), kinds::IDENTIFIER | kinds::ATTRIBUTE))
        else {
            continue;
        };
        let job = syntax::text(job, src);
        let callee = syntax::normalized(call.field("function").unwrap_or(call), src);
        out.push((
            job.rsplit('.').next().unwrap_or(job),
            format!("{callee}(..., retry={})", syntax::normalized(*retry, src)),
        ));
    }
    out
}

/// What runs `func` again when it fails: a retrying decorator, or Celery (`autoretry_for=` on
/// the task, or `self.retry(...)` in its body).
pub(crate) fn retried_by(idx: &NodeIndex<'_>, func: Node<'_>, src: &str) -> Option<String> {
    let decorated = idx.decorated(func);
    let by_decorator = decorated
        .map(syntax::decorators)
        .unwrap_or_default()
        .into_iter()
        .map(|d| syntax::normalized(d, src))
        .find_map(|d| retried_by_decorator(&d));
    if by_decorator.is_some() {
        return by_decorator;
    }
    let calls_retry = idx.within(func, kinds::CALL).iter().any(|c| {
        idx.enclosing(*c, kinds::FUNCTION_DEFINITION)
            .is_some_and(|f| f.id() == func.id())
            && syntax::callee(*c, src) == "self.retry"
    });
    if calls_retry {
        return Some("self.retry(...)".to_string());
    }
    // Or hands itself to a helper of the file that calls it
    // (`_retry_or_give_up(self, order, exc)` raising `task.retry(exc=exc, countdown=...)`).
    let hands_itself =
        memchr::memmem::find(syntax::text(func, src).as_bytes(), b"self.request.retries").is_some()
            && idx.within(func, kinds::CALL).iter().any(|c| {
                syntax::receiver(*c).is_none()
                    && syntax::positional_args(*c)
                        .first()
                        .is_some_and(|a| syntax::text(*a, src) == "self")
                    && idx
                        .functions_named(idx.callee_name(*c, src), src)
                        .any(|helper| {
                            let param = crate::rules::pay::positional_parameters(helper, src)
                                .first()
                                .map(|p| format!("{p}.retry("));
                            param.is_some_and(|p| syntax::text(helper, src).contains(&p))
                        })
            });
    if hands_itself {
        return Some("self.retry(...)".to_string());
    }
    // arq runs a job again when it raises `Retry(defer=...)`.
    let raises_retry = idx.within(func, kinds::CALL).iter().any(|c| {
        matches!(
            syntax::callee(*c, src),
            "Retry" | "arq.Retry" | "arq.worker.Retry"
        ) && src
            .get(..c.start_byte())
            .is_some_and(|head| head.trim_end().ends_with("raise"))
            && idx
                .enclosing(*c, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| f.id() == func.id())
    });
    raises_retry.then(|| "raise Retry(...)".to_string())
}

/// Where a job reads the count of its own attempts: `ctx["job"].attempts`, `job.attempts`,
/// `message.retries` (not `self.request.retries`, which `self.retry` comes with, nor a loop's
/// own counter). The text is asked first: few functions read one.
pub(crate) fn job_attempt_counts<'s>(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    src: &'s str,
) -> Vec<&'s str> {
    let text = syntax::text(func, src);
    if !(text.contains(".attempts") || text.contains(".retries")) {
        return Vec::new();
    }
    idx.within(func, kinds::ATTRIBUTE)
        .iter()
        .filter(|a| {
            let attribute = a.field("attribute").map(|n| syntax::text(n, src));
            let object = a.field("object").map_or("", |o| syntax::text(o, src));
            let job = syntax::name_words(object)
                .iter()
                .any(|w| matches!(w.as_str(), "job" | "ctx" | "message" | "msg" | "task"));
            matches!(attribute, Some("attempts" | "retries"))
                && job
                && !object.ends_with("request")
                && idx
                    .enclosing(**a, kinds::FUNCTION_DEFINITION)
                    .is_some_and(|f| f.id() == func.id())
        })
        .map(|a| syntax::text(*a, src))
        .collect()
}

/// What a decorator (its text, `@retry(...)`) shows of itself when it runs the function again
/// after a failure: a retry decorator of tenacity, retrying or backoff, or a Celery task with
/// `autoretry_for`.
pub(crate) fn retried_by_decorator(d: &str) -> Option<String> {
    let d = d.trim_start_matches('@');
    let head = d.split('(').next().unwrap_or(d).trim();
    let last = head.rsplit('.').next().unwrap_or(head);
    // A project's own retrying decorator says so in its name: `retry_async`, `with_retries`.
    let named = last
        .split('_')
        .any(|w| matches!(w, "retry" | "retries" | "retrying" | "retried"))
        && !last
            .split('_')
            .any(|w| matches!(w, "no" | "without" | "skip"));
    // huey's `@huey.task(retries=3)` and dramatiq's `@dramatiq.actor(max_retries=5)` run the
    // task again after any exception; Celery's `max_retries` alone does not.
    let spelled = |keyword: &str| {
        d.split(keyword).nth(1).is_some_and(|rest| {
            let value = rest.trim_start();
            !value.starts_with('0') && !value.starts_with("None")
        })
    };
    let task_retries = d.contains("(")
        && (spelled("(retries=") || spelled(" retries=") || spelled(",retries="))
        || last == "actor" && spelled("max_retries=")
        // dramatiq's Retries middleware runs an actor again up to 20 times unless told otherwise.
        || head == "dramatiq.actor" && !d.contains("max_retries=");
    let retries = named
        || task_retries
        || head.starts_with("backoff.on_")
        || head.starts_with("retrying.")
        || head.starts_with("tenacity.")
        || d.contains("autoretry_for");
    let shown = if d.contains('(') {
        format!("@{head}(...)")
    } else {
        format!("@{head}")
    };
    retries.then_some(shown)
}
