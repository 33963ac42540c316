//! Background tasks (Celery and the like) that reach a function, found by walking callers up
//! through the index.

use std::collections::BTreeSet;

use super::{Decorator, Def, ModuleFacts, ProjectIndex};
use crate::config::Vocabulary;

/// How many calls up from the changed function a task is looked for: a task usually calls the
/// service that calls the client; deeper chains are too loosely tied by name alone.
pub const MAX_HOPS: usize = 3;

/// A task that calls a function, directly or through at most `MAX_HOPS` calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRef {
    pub path: String,
    pub module: String,
    pub qualname: String,
    pub decorator: Decorator,
    pub hops: usize,
}

impl TaskRef {
    pub fn keyword(&self, name: &str) -> Option<&str> {
        self.decorator.keyword(name)
    }

    /// The exception names of `autoretry_for=(A, b.B)`: `A`, `b.B`.
    pub fn autoretry_for(&self) -> Vec<String> {
        self.keyword("autoretry_for")
            .map(exception_names)
            .unwrap_or_default()
    }
}

/// `(A, b.B)` or `[A]` → `A`, `b.B`.
fn exception_names(value: &str) -> Vec<String> {
    value
        .trim_matches(|c| matches!(c, '(' | ')' | '[' | ']'))
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether a decorator makes a task: `@app.task`, `@celery_app.task(...)`, `@shared_task`, or a
/// name of the configured vocabulary (`dramatiq.actor`).
pub fn is_task_decorator(callee: &str, vocab: &Vocabulary) -> bool {
    let last = callee.rsplit('.').next().unwrap_or(callee);
    vocab
        .task_decorators
        .iter()
        .any(|d| d == callee || (!d.contains('.') && d == last))
}

impl ProjectIndex {
    /// The task's `autoretry_for`, with a module constant (`autoretry_for=RETRYABLE`) replaced
    /// by the tuple it names.
    pub fn autoretry_for(&self, task: &TaskRef) -> Vec<String> {
        let mut out = Vec::new();
        for name in task.autoretry_for() {
            let constant = self
                .global(&task.module, &name)
                .filter(|(_, a)| a.callee.is_none() && a.value.starts_with(['(', '[']));
            match constant {
                Some((_, a)) => out.extend(exception_names(&a.value)),
                None => out.push(name),
            }
        }
        out
    }

    /// Walks the callers of function `qualname` of module `module`, hop by hop up to
    /// `MAX_HOPS`: `visit(module, caller, hop)` sees each calling function once and says whether
    /// to go on to its own callers.
    fn walk_callers(
        &self,
        module: &str,
        qualname: &str,
        mut visit: impl FnMut(&ModuleFacts, &Def, usize) -> bool,
    ) {
        let last = |q: &str| q.rsplit('.').next().unwrap_or(q).to_string();
        let mut frontier = vec![(module.to_string(), last(qualname))];
        let mut seen: BTreeSet<(String, String)> = frontier.iter().cloned().collect();
        for hop in 1..=MAX_HOPS {
            let mut next = Vec::new();
            for (callee_module, name) in &frontier {
                for (m, call) in self.calls_of(name) {
                    let same = match &call.module {
                        Some(resolved) => resolved == callee_module,
                        None => &m.module == callee_module,
                    };
                    if !same {
                        continue;
                    }
                    let Some(def) = m.def(&call.function) else {
                        continue;
                    };
                    if !visit(m, def, hop) {
                        continue;
                    }
                    let key = (m.module.clone(), last(&def.qualname));
                    if seen.insert(key.clone()) {
                        next.push(key);
                    }
                }
            }
            frontier = next;
        }
    }

    /// An `async def` among the callers of function `qualname` of module `module` (up to the
    /// tasks that run it): `(path, line)` of the first, by path and line.
    pub fn async_caller(
        &self,
        module: &str,
        qualname: &str,
        vocab: &Vocabulary,
    ) -> Option<(String, u32)> {
        let mut found = Vec::new();
        self.walk_callers(module, qualname, |m, def, _| {
            if def.is_async {
                found.push((m.path.clone(), def.lines.0));
            }
            // A task is where the chain starts: whoever enqueues it does not wait for it.
            !def.decorators
                .iter()
                .any(|d| is_task_decorator(&d.callee, vocab))
        });
        found.into_iter().min()
    }

    /// The tasks that reach function `qualname` of module `module`, nearest first, then by
    /// path and line.
    pub fn tasks_calling(&self, module: &str, qualname: &str, vocab: &Vocabulary) -> Vec<TaskRef> {
        let mut found: Vec<TaskRef> = Vec::new();
        if let Some(m) = self.module(module)
            && let Some(def) = m.def(qualname)
            && let Some(d) = def
                .decorators
                .iter()
                .find(|d| is_task_decorator(&d.callee, vocab))
        {
            found.push(TaskRef {
                path: m.path.clone(),
                module: m.module.clone(),
                qualname: def.qualname.clone(),
                decorator: d.clone(),
                hops: 0,
            });
        }
        self.walk_callers(module, qualname, |m, def, hop| {
            let Some(d) = def
                .decorators
                .iter()
                .find(|d| is_task_decorator(&d.callee, vocab))
            else {
                return true;
            };
            found.push(TaskRef {
                path: m.path.clone(),
                module: m.module.clone(),
                qualname: def.qualname.clone(),
                decorator: d.clone(),
                hops: hop,
            });
            false
        });
        found.sort_by(|a, b| {
            (a.hops, &a.path, a.decorator.line).cmp(&(b.hops, &b.path, b.decorator.line))
        });
        found.dedup_by(|a, b| a.path == b.path && a.qualname == b.qualname);
        found
    }
}

/// Exception classes and the base classes that catch them, for the HTTP libraries payment code
/// uses most; anything else matches only by its own name.
const HIERARCHY: &[(&str, &[&str])] = &[
    // httpx
    ("HTTPError", &[]),
    ("RequestError", &["HTTPError"]),
    ("HTTPStatusError", &["HTTPError"]),
    ("TransportError", &["RequestError", "HTTPError"]),
    (
        "TimeoutException",
        &["TransportError", "RequestError", "HTTPError"],
    ),
    (
        "ConnectTimeout",
        &[
            "TimeoutException",
            "TransportError",
            "RequestError",
            "HTTPError",
            "Timeout",
            "ConnectionError",
            "RequestException",
        ],
    ),
    (
        "ReadTimeout",
        &[
            "TimeoutException",
            "TransportError",
            "RequestError",
            "HTTPError",
            "Timeout",
            "RequestException",
        ],
    ),
    (
        "WriteTimeout",
        &[
            "TimeoutException",
            "TransportError",
            "RequestError",
            "HTTPError",
        ],
    ),
    (
        "PoolTimeout",
        &[
            "TimeoutException",
            "TransportError",
            "RequestError",
            "HTTPError",
        ],
    ),
    (
        "NetworkError",
        &["TransportError", "RequestError", "HTTPError"],
    ),
    (
        "ConnectError",
        &[
            "NetworkError",
            "TransportError",
            "RequestError",
            "HTTPError",
        ],
    ),
    (
        "ReadError",
        &[
            "NetworkError",
            "TransportError",
            "RequestError",
            "HTTPError",
        ],
    ),
    (
        "WriteError",
        &[
            "NetworkError",
            "TransportError",
            "RequestError",
            "HTTPError",
        ],
    ),
    (
        "CloseError",
        &[
            "NetworkError",
            "TransportError",
            "RequestError",
            "HTTPError",
        ],
    ),
    (
        "RemoteProtocolError",
        &[
            "ProtocolError",
            "TransportError",
            "RequestError",
            "HTTPError",
        ],
    ),
    // requests
    ("RequestException", &["IOError", "OSError"]),
    (
        "ConnectionError",
        &["RequestException", "IOError", "OSError"],
    ),
    ("Timeout", &["RequestException", "IOError", "OSError"]),
    (
        "ConnectTimeout",
        &["ConnectionError", "Timeout", "RequestException"],
    ),
    ("ReadTimeout", &["Timeout", "RequestException"]),
];

/// Whether `except`/`autoretry_for` naming `catcher` covers an exception named `raised`,
/// by last name (`httpx.HTTPError` covers `httpx.ReadTimeout`). `Exception` covers everything.
pub fn exception_covers(catcher: &str, raised: &str) -> bool {
    let catcher = catcher.rsplit('.').next().unwrap_or(catcher);
    let raised = raised.rsplit('.').next().unwrap_or(raised);
    if catcher == raised || catcher == "Exception" || catcher == "BaseException" {
        return true;
    }
    HIERARCHY
        .iter()
        .filter(|(name, _)| *name == raised)
        .any(|(_, bases)| bases.contains(&catcher))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::ParsedFile;

    fn module(path: &str, src: &str) -> super::super::ModuleFacts {
        let file = ParsedFile::parse(src.to_string()).expect("parses");
        super::super::extract::extract(path, &file)
    }

    #[test]
    fn finds_the_task_two_calls_up() {
        let index = ProjectIndex::from_modules(vec![
            module("app/client.py", "def charge(o):\n    pass\n"),
            module(
                "app/service.py",
                "from app.client import charge\n\ndef pay(o):\n    charge(o)\n",
            ),
            module(
                "app/tasks.py",
                "from app import service\n\n@shared_task(soft_time_limit=30)\ndef pay_task(o):\n    service.pay(o)\n\ndef charge(o):\n    pass\n",
            ),
            module(
                "app/other.py",
                "@app.task\ndef unrelated():\n    charge(1)\n",
            ),
        ]);
        let tasks = index.tasks_calling("app.client", "charge", &Vocabulary::default());
        let found: Vec<(&str, usize, u32)> = tasks
            .iter()
            .map(|t| (t.qualname.as_str(), t.hops, t.decorator.line))
            .collect();
        assert_eq!(found, [("pay_task", 2, 3)]);
        assert_eq!(tasks[0].keyword("soft_time_limit"), Some("30"));
    }

    #[test]
    fn the_hierarchy_covers_subclasses_only() {
        assert!(exception_covers("httpx.HTTPError", "httpx.ReadTimeout"));
        assert!(exception_covers("HTTPError", "ConnectTimeout"));
        assert!(exception_covers(
            "requests.RequestException",
            "requests.ReadTimeout"
        ));
        assert!(!exception_covers("httpx.ReadTimeout", "httpx.HTTPError"));
        assert!(!exception_covers("ValueError", "httpx.ReadTimeout"));
    }
}
