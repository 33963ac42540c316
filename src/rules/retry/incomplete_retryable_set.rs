//! RETRY002 incomplete-retryable-set: an `except` in a retry loop that retries some transport
//! errors of httpx or requests but lets others, just as safe to retry, fail the call.
use super::loops;
use crate::python::{Fields, kinds, syntax};
use crate::review::Severity;
use crate::rules::facts::{self, FileFacts};
use crate::rules::{Check, Ctx, Gate, Rule};

pub(crate) static RULE: Rule = Rule {
    id: "RETRY002",
    doc: include_str!("../../../rules/retry/RETRY002.md"),
    check: Check::Tree(check),
    gate: Gate::When(super::has_retry_loop),
};

/// An exception class of a client library and the classes it derives from.
struct Class {
    name: &'static str,
    bases: &'static [&'static str],
}

struct Library {
    module: &'static str,
    classes: &'static [Class],
    /// Transport errors a retry with an idempotency key handles safely.
    retryable: &'static [&'static str],
    /// The error raised for a bad status (`raise_for_status`).
    status_error: &'static str,
}

const HTTPX: Library = Library {
    module: "httpx",
    classes: &[
        Class {
            name: "ConnectTimeout",
            bases: &["TimeoutException"],
        },
        Class {
            name: "ReadTimeout",
            bases: &["TimeoutException"],
        },
        Class {
            name: "WriteTimeout",
            bases: &["TimeoutException"],
        },
        Class {
            name: "PoolTimeout",
            bases: &["TimeoutException"],
        },
        Class {
            name: "TimeoutException",
            bases: &["TransportError"],
        },
        Class {
            name: "ConnectError",
            bases: &["NetworkError"],
        },
        Class {
            name: "ReadError",
            bases: &["NetworkError"],
        },
        Class {
            name: "WriteError",
            bases: &["NetworkError"],
        },
        Class {
            name: "CloseError",
            bases: &["NetworkError"],
        },
        Class {
            name: "NetworkError",
            bases: &["TransportError"],
        },
        Class {
            name: "RemoteProtocolError",
            bases: &["ProtocolError"],
        },
        Class {
            name: "LocalProtocolError",
            bases: &["ProtocolError"],
        },
        Class {
            name: "ProtocolError",
            bases: &["TransportError"],
        },
        Class {
            name: "ProxyError",
            bases: &["TransportError"],
        },
        Class {
            name: "TransportError",
            bases: &["RequestError"],
        },
        Class {
            name: "RequestError",
            bases: &["HTTPError"],
        },
        Class {
            name: "HTTPError",
            bases: &[],
        },
    ],
    retryable: &[
        "ConnectTimeout",
        "ReadTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "ConnectError",
        "ReadError",
        "RemoteProtocolError",
    ],
    status_error: "HTTPStatusError",
};

const REQUESTS: Library = Library {
    module: "requests",
    classes: &[
        Class {
            name: "ConnectTimeout",
            bases: &["ConnectionError", "Timeout"],
        },
        Class {
            name: "ReadTimeout",
            bases: &["Timeout"],
        },
        Class {
            name: "Timeout",
            bases: &["RequestException"],
        },
        Class {
            name: "ConnectionError",
            bases: &["RequestException"],
        },
        Class {
            name: "ChunkedEncodingError",
            bases: &["RequestException"],
        },
        Class {
            name: "RequestException",
            bases: &[],
        },
    ],
    retryable: &["ConnectTimeout", "ReadTimeout", "ConnectionError"],
    status_error: "HTTPError",
};

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src, Some(file)) = (cx.index(), cx.src(), cx.facts) else {
        return;
    };
    let all = loops::retry_loops(idx, src);
    for &clause in idx.all(kinds::EXCEPT_CLAUSE) {
        let Some(l) = loops::loop_of(&all, clause) else {
            continue;
        };
        // A handler that raises or returns does not retry what it catches.
        let retries = syntax::except_body(clause)
            .is_some_and(|b| syntax::block_falls_through(b, src))
            || syntax::except_body(clause)
                .and_then(|b| syntax::statements(b).last().copied())
                .is_some_and(|s| s.kind() == kinds::CONTINUE_STATEMENT);
        if !retries {
            continue;
        }
        let types: Vec<&str> = syntax::except_types(clause)
            .iter()
            .map(|t| syntax::text(*t, src))
            .collect();
        for lib in [&HTTPX, &REQUESTS] {
            let caught: Vec<&str> = types
                .iter()
                .filter_map(|t| class_of(lib, t, file))
                .collect();
            if !caught
                .iter()
                .any(|c| lib.classes.iter().any(|k| k.name == *c))
            {
                continue;
            }
            // Without an idempotency key only what fails before the request is sent is safe to
            // repeat, and a loop that repeats only that is right as it is: widening it is
            // IDEM005's double charge.
            let keyed = syntax::text(l.func, src)
                .to_ascii_lowercase()
                .contains("idempot");
            if !keyed {
                continue;
            }
            let required = lib.retryable;
            let siblings = sibling_types(clause, src);
            let considered: Vec<&str> = siblings
                .iter()
                .filter_map(|t| class_of(lib, t, file))
                .collect();
            let missing: Vec<String> = required
                .iter()
                .filter(|r| !considered.iter().any(|c| covers(lib, c, r)))
                // `requests.ConnectionError` already says `requests.ConnectTimeout`.
                .filter(|r| {
                    !required.iter().any(|m| {
                        m != *r
                            && covers(lib, m, r)
                            && !considered.iter().any(|c| covers(lib, c, m))
                    })
                })
                .map(|r| format!("`{}.{r}`", lib.module))
                .collect();
            if missing.is_empty() {
                continue;
            }
            // `raise_for_status()` alone only turns a 503 into an error nobody retries.
            let loop_text = syntax::text(l.body, src).replace("raise_for_status", "");
            let statuses_handled = loop_text.to_ascii_lowercase().contains("status");
            let Some(value) = clause.field("value") else {
                continue;
            };
            let shown = value
                .named_child(0)
                .filter(|_| value.kind() == kinds::AS_PATTERN)
                .unwrap_or(value);
            let qualname = facts::qualname(l.func, idx, src);
            let function = cx.facts.and_then(|f| f.function(&qualname)).cloned();
            let on_path = cx.on_payment_path(function.as_ref());
            let finding = cx
                .report(&RULE, shown)
                .arg("caught", syntax::text(shown, src).to_string())
                .arg("missing", missing.join(", "));
            if !statuses_handled {
                finding.note("statuses");
            }
            if on_path {
                finding.note("payment");
            } else {
                finding.severity(Severity::Nit);
            }
            if lib.module == "requests" {
                finding.note("requests");
            }
        }
    }
}

/// Exception types named by every `except` of the `try` that holds `clause`.
fn sibling_types<'s>(clause: tree_sitter::Node<'_>, src: &'s str) -> Vec<&'s str> {
    let Some(stmt) = clause.parent() else {
        return Vec::new();
    };
    let mut cursor = stmt.walk();
    stmt.named_children(&mut cursor)
        .filter(|c| c.kind() == kinds::EXCEPT_CLAUSE)
        .flat_map(syntax::except_types)
        .map(|t| syntax::text(t, src))
        .collect()
}

/// The class name an exception expression names in `lib`: `httpx.ReadTimeout`,
/// `requests.exceptions.ReadTimeout`, or a name imported from the library.
fn class_of<'s>(lib: &Library, text: &'s str, file: &FileFacts) -> Option<&'s str> {
    let last = text.rsplit('.').next().unwrap_or(text);
    let from_lib = if text.contains('.') {
        let root = text.split('.').next().unwrap_or("");
        root == lib.module
            || file
                .import_target(root)
                .is_some_and(|t| t.split('.').next() == Some(lib.module))
    } else {
        file.import_target(text)
            .is_some_and(|t| t.split('.').next() == Some(lib.module))
    };
    (from_lib && (lib.classes.iter().any(|c| c.name == last) || last == lib.status_error))
        .then_some(last)
}

/// Whether catching `caught` also catches `wanted` (it is the class or one of its bases).
fn covers(lib: &Library, caught: &str, wanted: &str) -> bool {
    let mut frontier = vec![wanted];
    let mut steps = 0;
    while let Some(name) = frontier.pop() {
        if name == caught {
            return true;
        }
        steps += 1;
        if steps > 32 {
            return false;
        }
        if let Some(class) = lib.classes.iter().find(|c| c.name == name) {
            frontier.extend(class.bases.iter().copied());
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bases_cover_their_subclasses() {
        assert!(covers(&HTTPX, "TimeoutException", "PoolTimeout"));
        assert!(covers(&HTTPX, "TransportError", "RemoteProtocolError"));
        assert!(!covers(&HTTPX, "TimeoutException", "ReadError"));
        assert!(covers(&REQUESTS, "ConnectionError", "ConnectTimeout"));
        assert!(covers(&REQUESTS, "Timeout", "ConnectTimeout"));
        assert!(!covers(&REQUESTS, "Timeout", "ConnectionError"));
    }
}
