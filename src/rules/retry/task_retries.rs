//! How long a background task goes on retrying, as its decorator spells it (Celery, huey,
//! dramatiq) and, where the file holds the task, as its own `self.retry(countdown=...)` says.
//!
//! Only what the code spells is read: a task that retries by defaults alone, or whose delays hide
//! in `**options`, has no schedule here, and the rules asking say nothing.

use tree_sitter::Node;

use super::eval;
use crate::index::Decorator;
use crate::python::{NodeIndex, kinds, syntax};

/// Reads are bounded: a task retried a thousand times is retried "long enough" for any rule.
const MAX_RETRIES: usize = 64;

/// Celery's defaults (`Task.max_retries`, `default_retry_delay`, `retry_backoff_max`).
const CELERY_RETRIES: f64 = 3.0;
const CELERY_DELAY: f64 = 180.0;
const CELERY_BACKOFF_MAX: f64 = 600.0;
/// dramatiq's `min_backoff` and `max_backoff`, in milliseconds.
const DRAMATIQ_MIN_BACKOFF_MS: f64 = 15_000.0;
const DRAMATIQ_MAX_BACKOFF_MS: f64 = 7.0 * 86_400_000.0;

/// The waits between a task's first run and its last retry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Schedule {
    /// The wait before each retry, in seconds.
    pub delays: Vec<f64>,
    /// Each wait is drawn at random up to its value (Celery's `retry_jitter`, dramatiq's
    /// backoff): the last retry comes at most this late.
    pub jitter: bool,
}

impl Schedule {
    /// Seconds from the first run to the start of the last retry, every wait at its longest.
    pub fn total(&self) -> f64 {
        self.delays.iter().sum()
    }

    /// `3 × 1 min`, or `1 + 2 + 4 + 8 s` for a backoff.
    pub fn formula(&self) -> String {
        let Some(&first) = self.delays.first() else {
            return String::new();
        };
        if self.delays.iter().all(|d| (d - first).abs() < 1e-9) {
            return format!("{} × {}", self.delays.len(), eval::human(first));
        }
        let parts: Vec<String> = self.delays.iter().map(|d| eval::seconds(*d)).collect();
        format!("{} s", parts.join(" + "))
    }
}

/// The schedule a task decorator spells; `number` reads a keyword's value (a literal, a
/// constant). `own_retry` is the task's `self.retry(...)` call when the file shows it.
pub(crate) fn of_task(
    decorator: &Decorator,
    number: &dyn Fn(&str) -> Option<f64>,
    own_retry: Option<&dyn Fn(usize) -> Option<Vec<f64>>>,
) -> Option<Schedule> {
    if decorator.splat {
        return None;
    }
    let keyword = |name: &str| decorator.keyword(name);
    let count =
        |value: f64| -> Option<usize> { (value >= 1.0).then(|| (value as usize).min(MAX_RETRIES)) };
    // huey: `@huey.task(retries=3, retry_delay=60)`.
    if let Some(retries) = keyword("retries") {
        let n = count(number(retries)?)?;
        let delay = number(keyword("retry_delay")?)?;
        return (delay > 0.0).then(|| Schedule {
            delays: vec![delay; n],
            jitter: false,
        });
    }
    // dramatiq: `@dramatiq.actor(max_retries=5, min_backoff=1000)`, backoff in milliseconds,
    // doubled from the first retry.
    if keyword("min_backoff").is_some() || keyword("max_backoff").is_some() {
        let n = count(number(keyword("max_retries")?)?)?;
        let min = keyword("min_backoff").map_or(Some(DRAMATIQ_MIN_BACKOFF_MS), number)?;
        let max = keyword("max_backoff").map_or(Some(DRAMATIQ_MAX_BACKOFF_MS), number)?;
        let delays = (1..=n)
            .map(|i| (min * 2f64.powi(i as i32)).min(max) / 1000.0)
            .collect();
        return Some(Schedule {
            delays,
            jitter: true,
        });
    }
    // Celery: it retries by itself with `autoretry_for`, or where the task calls `self.retry`.
    let kwargs = keyword("retry_kwargs").unwrap_or("");
    let from_kwargs = |name: &str| dict_value(kwargs, name).and_then(number);
    let n = match keyword("max_retries") {
        Some(v) => count(number(v)?)?,
        None => match from_kwargs("max_retries") {
            Some(v) => count(v)?,
            None => CELERY_RETRIES as usize,
        },
    };
    if keyword("autoretry_for").is_none() {
        let delays = own_retry?(n)?;
        return (!delays.is_empty()).then_some(Schedule {
            delays,
            jitter: false,
        });
    }
    match keyword("retry_backoff") {
        Some("False" | "0") | None => {
            let delay = match from_kwargs("countdown") {
                Some(v) => v,
                None => keyword("default_retry_delay").map_or(Some(CELERY_DELAY), number)?,
            };
            (delay > 0.0).then(|| Schedule {
                delays: vec![delay; n],
                jitter: false,
            })
        }
        Some(backoff) => {
            let factor = if backoff == "True" {
                1.0
            } else {
                number(backoff)?
            };
            let max = keyword("retry_backoff_max").map_or(Some(CELERY_BACKOFF_MAX), number)?;
            let delays = (0..n)
                .map(|i| (factor * 2f64.powi(i as i32)).min(max))
                .collect();
            Some(Schedule {
                delays,
                jitter: keyword("retry_jitter") != Some("False"),
            })
        }
    }
}

/// `'countdown': 60` of `{'max_retries': 5, 'countdown': 60}` (either quote).
fn dict_value<'a>(dict: &'a str, name: &str) -> Option<&'a str> {
    ["'", "\""].iter().find_map(|q| {
        let at = dict.find(&format!("{q}{name}{q}"))? + name.len() + 2;
        let rest = dict.get(at..)?.trim_start().strip_prefix(':')?.trim_start();
        let end = rest.find([',', '}']).unwrap_or(rest.len());
        Some(rest[..end].trim())
    })
}

/// The waits a task's own `self.retry(countdown=...)` asks for, retry by retry, `retries` of
/// them at most (fewer when the call spells its own `max_retries`); `default` when it gives no
/// countdown. `None` when the task calls no retry the file shows, or its countdown is unknown.
pub(crate) fn own_retry_delays(
    idx: &NodeIndex<'_>,
    src: &str,
    task: Node<'_>,
    retries: usize,
    default: Option<f64>,
) -> Option<Vec<f64>> {
    let call = idx.within(task, kinds::CALL).iter().copied().find(|c| {
        syntax::callee_name(*c, src) == "retry"
            && syntax::receiver(*c).is_some_and(|r| {
                let r = syntax::text(r, src);
                r == "self" || r.ends_with("task") || r == syntax::function_name(task, src)
            })
    })?;
    let n = match syntax::keyword_arg(call, "max_retries", src) {
        Some(v) => {
            let value = eval::Env::of(idx, src, Some(task)).eval(v)?;
            (value >= 1.0).then(|| (value as usize).min(MAX_RETRIES))?
        }
        None => retries,
    };
    let countdown = syntax::keyword_arg(call, "countdown", src);
    (0..n)
        .map(|i| match countdown {
            Some(c) => {
                let receiver = syntax::receiver(call).map_or("self", |r| syntax::text(r, src));
                let counter = format!("{receiver}.request.retries");
                let env = eval::Env {
                    idx,
                    src,
                    func: Some(task),
                    counter: Some((counter.as_str(), i as f64)),
                };
                env.eval(c)
            }
            None => default,
        })
        .collect::<Option<Vec<f64>>>()
        .filter(|d| d.iter().all(|v| *v >= 0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decorator(keywords: &[(&str, &str)]) -> Decorator {
        Decorator {
            callee: "app.task".into(),
            line: 1,
            keywords: keywords
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            splat: false,
        }
    }

    fn literal(text: &str) -> Option<f64> {
        text.parse().ok()
    }

    #[test]
    fn huey_celery_and_dramatiq_schedules_are_read_from_their_keywords() {
        let huey = of_task(
            &decorator(&[("retries", "3"), ("retry_delay", "60")]),
            &literal,
            None,
        );
        assert_eq!(huey.as_ref().map(Schedule::total), Some(180.0));
        assert_eq!(huey.map(|s| s.formula()).as_deref(), Some("3 × 1 min"));

        let celery = of_task(
            &decorator(&[
                ("autoretry_for", "(Timeout,)"),
                ("retry_backoff", "2"),
                ("max_retries", "4"),
            ]),
            &literal,
            None,
        )
        .expect("a backoff");
        assert_eq!(celery.delays, [2.0, 4.0, 8.0, 16.0]);
        assert!(celery.jitter);

        let defaults = of_task(
            &decorator(&[("autoretry_for", "(Timeout,)")]),
            &literal,
            None,
        );
        assert_eq!(defaults.map(|s| s.total()), Some(540.0));

        let kwargs = of_task(
            &decorator(&[
                ("autoretry_for", "(Timeout,)"),
                ("retry_kwargs", "{'max_retries': 2, 'countdown': 30}"),
            ]),
            &literal,
            None,
        );
        assert_eq!(kwargs.map(|s| s.delays), Some(vec![30.0, 30.0]));

        let dramatiq = of_task(
            &decorator(&[("max_retries", "3"), ("min_backoff", "1000")]),
            &literal,
            None,
        );
        assert_eq!(dramatiq.map(|s| s.delays), Some(vec![2.0, 4.0, 8.0]));
    }

    #[test]
    fn a_task_that_spells_no_retry_has_no_schedule() {
        // Celery without autoretry_for retries only where the task calls `self.retry`.
        assert_eq!(
            of_task(&decorator(&[("max_retries", "5")]), &literal, None),
            None
        );
        let mut splat = decorator(&[("retries", "3"), ("retry_delay", "60")]);
        splat.splat = true;
        assert_eq!(of_task(&splat, &literal, None), None);
        assert_eq!(
            of_task(&decorator(&[("retries", "3")]), &literal, None),
            None,
            "huey retries at once without a retry_delay"
        );
    }

    #[test]
    fn a_countdown_is_read_retry_by_retry() {
        let src = "@app.task(bind=True, max_retries=4)\ndef capture(self, order_id):\n    try:\n        go(order_id)\n    except Timeout as exc:\n        raise self.retry(exc=exc, countdown=5 * 2 ** self.request.retries)\n";
        let file = crate::python::ParsedFile::parse(src.to_string()).expect("grammar loads");
        let idx = file.index();
        let task = idx.all(kinds::FUNCTION_DEFINITION)[0];
        assert_eq!(
            own_retry_delays(idx, src, task, 4, Some(180.0)),
            Some(vec![5.0, 10.0, 20.0, 40.0])
        );
    }
}
