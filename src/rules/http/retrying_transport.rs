//! Clients that send a request again by themselves, below the code that makes it: a `requests`
//! session with urllib3's `Retry` mounted on it and allowed to repeat a POST, or aiohttp_retry's
//! `RetryClient`, whose default options repeat every method, POST included, on a 5xx answer.
//! The code sees one call and one answer; the gateway may have seen two payments.
//!
//! Recognised in the file that sets the client up; a session built in another module is not
//! followed. urllib3's own default leaves POST out, and so does httpx's `retries=` (connect
//! errors only, raised before anything is sent): neither is a retrying transport here.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::Local;

/// A client set up to repeat POST requests after they may have reached the server, and the
/// names it is reached by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RetryingTransport {
    /// What sets it up, as a reader will find it: `Retry(allowed_methods=...)`, `RetryClient(...)`.
    pub what: String,
    pub line: u32,
    /// Last names the client is bound to (`self.session` → `session`).
    clients: Vec<String>,
    /// Functions of the file that return it (`_session()`).
    factories: Vec<String>,
}

impl RetryingTransport {
    /// Whether `call` is made on this client: `session.post(...)`, `self._http.post(...)`,
    /// `_session().post(...)`.
    pub(crate) fn sends(&self, call: Node<'_>, src: &str) -> bool {
        let Some(receiver) = syntax::receiver(call) else {
            return false;
        };
        if receiver.kind() == kinds::CALL {
            return self
                .factories
                .iter()
                .any(|f| f == syntax::callee_name(receiver, src));
        }
        let name = crate::rules::facts::last_name(syntax::text(receiver, src));
        self.clients.iter().any(|c| c == name)
    }
}

/// Whether the text can hold a retrying transport at all: cheap, for the gates.
pub(crate) fn mentioned(src: &str) -> bool {
    ["allowed_methods", "method_whitelist", "RetryClient"]
        .iter()
        .any(|w| memchr::memmem::find(src.as_bytes(), w.as_bytes()).is_some())
}

/// The retrying transports the file sets up and reaches by some name.
pub(crate) fn posts_retried<'a>(cx: &impl Local<'a>) -> Vec<RetryingTransport> {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return Vec::new();
    };
    if !mentioned(src) {
        return Vec::new();
    }
    idx.all(kinds::CALL)
        .iter()
        .filter_map(|&call| {
            let syntax::CallText { callee, name, .. } = cx.call_text(call);
            let (what, made) = match (name, from_module(callee, cx)) {
                ("Retry", Some("urllib3" | "requests")) => {
                    let what = urllib3_retry(idx, call, src)?;
                    (what, sessions_mounting(idx, call, src))
                }
                ("RetryClient", Some("aiohttp_retry")) => {
                    (retry_client(idx, call, src)?, vec![call])
                }
                _ => return None,
            };
            let mut transport = RetryingTransport {
                what,
                line: syntax::lines(call).0,
                clients: Vec::new(),
                factories: Vec::new(),
            };
            for client in made {
                bind(idx, client, src, &mut transport);
            }
            // Bound to a factory's result: `self.session = _session()`, or the factory's as the
            // default of a client handed in (`session or build_session()`).
            for &a in idx.all(kinds::ASSIGNMENT) {
                if let (Some(left), Some(right)) = (a.field("left"), a.field("right"))
                    && made_by(right)
                        .into_iter()
                        .filter(|c| c.kind() == kinds::CALL)
                        .any(|c| {
                            transport
                                .factories
                                .iter()
                                .any(|f| f == syntax::callee_name(c, src))
                        })
                {
                    let name = crate::rules::facts::last_name(syntax::text(left, src));
                    transport.clients.push(name.to_string());
                }
            }
            (!transport.clients.is_empty() || !transport.factories.is_empty()).then_some(transport)
        })
        .collect()
}

/// What a value may be made by: itself, or either side of `a or b` and `a if c else b`.
fn made_by(value: Node<'_>) -> Vec<Node<'_>> {
    match value.kind() {
        kinds::BOOLEAN_OPERATOR => value
            .field("left")
            .into_iter()
            .chain(value.field("right"))
            .collect(),
        kinds::CONDITIONAL_EXPRESSION => crate::python::named_children(value),
        _ => vec![value],
    }
}

/// The names a client node is reached by: what it is assigned to or opened as (`with ... as`),
/// what it is itself (`session` in `session.mount(...)`), and the function returning it.
fn bind(idx: &NodeIndex<'_>, client: Node<'_>, src: &str, out: &mut RetryingTransport) {
    let mut names = Vec::new();
    if client.kind() == kinds::CALL {
        let parent = client.parent();
        match parent.map(|p| p.kind()) {
            Some(kinds::ASSIGNMENT) => names.extend(parent.and_then(|a| a.field("left"))),
            Some(kinds::AS_PATTERN) => names.extend(parent.and_then(|p| p.field("alias"))),
            Some(kinds::RETURN_STATEMENT) => {
                if let Some(f) = idx.enclosing(client, kinds::FUNCTION_DEFINITION) {
                    out.factories
                        .push(syntax::function_name(f, src).to_string());
                }
            }
            _ => {}
        }
    } else {
        names.push(client);
    }
    for name in names {
        let text = syntax::text(name, src);
        out.clients
            .push(crate::rules::facts::last_name(text).trim().to_string());
        // `return session` in the function that mounted it.
        if let Some(f) = idx.enclosing(name, kinds::FUNCTION_DEFINITION)
            && idx
                .within(f, kinds::RETURN_STATEMENT)
                .iter()
                .any(|r| syntax::return_value(*r).is_some_and(|v| syntax::text(v, src) == text))
        {
            out.factories
                .push(syntax::function_name(f, src).to_string());
        }
    }
}

/// The top-level module a dotted callee comes from, through the file's imports.
fn from_module<'a>(callee: &str, cx: &impl Local<'a>) -> Option<&'a str> {
    let root = callee.split('.').next().unwrap_or(callee);
    let target = cx.facts()?.import_target(root)?;
    target.split('.').next()
}

/// urllib3's `Retry(...)` that may repeat a POST after it was sent: `Retry(allowed_methods=None)`
/// (every method), or a set naming `"POST"`, with read errors or statuses to retry.
fn urllib3_retry(idx: &NodeIndex<'_>, call: Node<'_>, src: &str) -> Option<String> {
    let (keyword, methods) = ["allowed_methods", "method_whitelist"]
        .into_iter()
        .find_map(|k| Some((k, syntax::keyword_arg(call, k, src)?)))?;
    let methods = value_of(idx, methods, src);
    if !(matches!(methods.kind(), kinds::NONE | kinds::FALSE) || names_post(methods, src)) {
        return None;
    }
    let off =
        |n: Option<Node<'_>>| n.is_some_and(|n| matches!(syntax::text(n, src), "0" | "False"));
    let total =
        syntax::keyword_arg(call, "total", src).or(syntax::positional_args(call).first().copied());
    // Without read retries, and with no statuses to retry but those a server sends for what it
    // did not act on (429, 503), a POST is repeated only when it never reached the server.
    let read_off = off(syntax::keyword_arg(call, "read", src))
        && syntax::keyword_arg(call, "status_forcelist", src)
            .is_none_or(|s| refusals_only(value_of(idx, s, src), src));
    (!off(total) && !read_off).then(|| format!("Retry({keyword}=...)"))
}

/// `status_forcelist=(503,)`, `{429, 503}`: statuses only of a request the server turned away
/// before acting on it (a 502 or a 504 may come from a proxy after the server took it).
fn refusals_only(statuses: Node<'_>, src: &str) -> bool {
    let statuses = if statuses.kind() == kinds::CALL {
        // `frozenset({429, 503})`
        syntax::positional_args(statuses)
            .first()
            .copied()
            .unwrap_or(statuses)
    } else {
        statuses
    };
    matches!(statuses.kind(), kinds::TUPLE | kinds::LIST | kinds::SET)
        && crate::python::named_children(statuses)
            .iter()
            .all(|s| matches!(syntax::text(*s, src), "429" | "503"))
}

/// The sessions an adapter retrying with `retry` is mounted on (`session.mount("https://",
/// HTTPAdapter(max_retries=retry))`, directly or through names): each `mount` receiver.
fn sessions_mounting<'t>(idx: &NodeIndex<'t>, retry: Node<'t>, src: &str) -> Vec<Node<'t>> {
    let assigned_name = |n: Node<'_>| {
        n.parent()
            .filter(|p| p.kind() == kinds::ASSIGNMENT)
            .and_then(|a| a.field("left"))
            .filter(|l| l.kind() == kinds::IDENTIFIER)
            .map(|l| syntax::text(l, src))
    };
    let retry_name = assigned_name(retry);
    let adapters: Vec<Node<'t>> = idx
        .all(kinds::CALL)
        .iter()
        .copied()
        .filter(|&c| syntax::callee_name(c, src) == "HTTPAdapter")
        .filter(|&c| {
            syntax::contains(c, retry)
                || syntax::keyword_arg(c, "max_retries", src)
                    .or(syntax::positional_args(c).get(2).copied())
                    .is_some_and(|v| Some(syntax::text(v, src)) == retry_name)
        })
        .collect();
    let adapter_names: Vec<&str> = adapters.iter().filter_map(|a| assigned_name(*a)).collect();
    idx.all(kinds::CALL)
        .iter()
        .filter(|&&m| syntax::callee_name(m, src) == "mount")
        .filter(|&&m| {
            syntax::positional_args(m)
                .into_iter()
                .chain(syntax::keyword_arg(m, "adapter", src))
                .any(|arg| {
                    adapters.iter().any(|a| a.id() == arg.id())
                        || adapter_names.contains(&syntax::text(arg, src))
                })
        })
        .filter_map(|&m| syntax::receiver(m))
        .collect()
}

/// aiohttp_retry's `RetryClient(...)`: its options, given or by default (`ExponentialRetry`
/// with three attempts, every method, every 5xx), repeat a POST on an answer that came after the
/// server took it.
fn retry_client(idx: &NodeIndex<'_>, call: Node<'_>, src: &str) -> Option<String> {
    let repeats = match syntax::keyword_arg(call, "retry_options", src) {
        None => true,
        Some(options) => {
            let options = value_of(idx, options, src);
            // Options we cannot see may say anything.
            options.kind() == kinds::CALL && options_repeat_post(idx, options, src)
        }
    };
    repeats.then(|| "RetryClient(...)".to_string())
}

fn options_repeat_post(idx: &NodeIndex<'_>, options: Node<'_>, src: &str) -> bool {
    let arg = |k: &str| syntax::keyword_arg(options, k, src);
    let attempts = arg("attempts").or(syntax::positional_args(options).first().copied());
    if attempts.is_some_and(|a| matches!(syntax::text(a, src), "0" | "1")) {
        return false;
    }
    if arg("methods").is_some_and(|m| !names_post(value_of(idx, m, src), src)) {
        return false;
    }
    // Statuses, exceptions or every 5xx: something to go round on.
    let all_5xx = arg("retry_all_server_errors").is_none_or(|v| syntax::text(v, src) != "False");
    all_5xx || arg("statuses").is_some() || arg("exceptions").is_some()
}

/// A string `"POST"` in the value (`{"GET", "POST"}`, `Retry.DEFAULT_ALLOWED_METHODS | {"POST"}`).
/// Strings are not in the node index; a method set is a few nodes, walked here.
fn names_post(value: Node<'_>, src: &str) -> bool {
    if value.kind() == kinds::STRING {
        return syntax::text(value, src)
            .trim_matches(|c: char| c == '"' || c == '\'')
            .eq_ignore_ascii_case("post");
    }
    let mut cursor = value.walk();
    let children: Vec<Node<'_>> = value.named_children(&mut cursor).collect();
    children.into_iter().any(|c| names_post(c, src))
}

/// What a plain name holds where it is used, as far as the file's assignments say; the node
/// itself otherwise.
fn value_of<'t>(idx: &NodeIndex<'t>, node: Node<'t>, src: &str) -> Node<'t> {
    if node.kind() != kinds::IDENTIFIER {
        return node;
    }
    let name = syntax::text(node, src);
    let scope = idx.enclosing(node, kinds::FUNCTION_DEFINITION);
    scope
        .and_then(|s| idx.assigned_before(Some(s), name, node.start_byte(), src))
        .or_else(|| idx.assigned_before(None, name, node.start_byte(), src))
        .unwrap_or(node)
}
