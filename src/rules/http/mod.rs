//! The http family: how payment code calls HTTP (httpx, requests, aiohttp, urllib) and how long
//! it lets a call hang. This module recognises the calls and client objects; rules live one per
//! file beside it.

pub(crate) mod http_call_without_timeout;
pub(crate) mod retrying_transport;
pub(crate) mod scalar_timeout;

use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Ctx, Local};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lib {
    Httpx,
    Requests,
    Aiohttp,
    Urllib,
    /// urllib3's pools (`PoolManager().request(...)`): no timeout unless the pool or the call
    /// sets one.
    Urllib3,
}

/// An HTTP call, or the construction of a client that holds a default timeout.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HttpCall<'t> {
    pub node: Node<'t>,
    pub lib: Lib,
    /// `httpx.Client(...)`, `aiohttp.ClientSession(...)`: settings, not a request.
    pub constructor: bool,
    /// The client it is made on was built with `timeout=` (session-level default).
    pub client_timeout: bool,
    /// Made on a client handed in (`self._session` of `__init__(self, session: ClientSession)`),
    /// whose defaults are set out of sight.
    pub handed_in: bool,
}

const VERBS: &[&str] = &[
    "get", "post", "put", "patch", "delete", "head", "options", "request", "stream", "send",
    // urllib3's pools: `pool.urlopen("POST", url, body=...)`.
    "urlopen",
];

/// Which library a dotted callee comes from, through the file's imports
/// (`import requests as rq`, `from httpx import post`).
fn lib_of<'a>(callee: &str, cx: &impl Local<'a>) -> Option<Lib> {
    lib_of_callee(callee, cx.facts())
}

/// `lib_of`, from the file's facts (its imports) alone.
pub(crate) fn lib_of_callee(
    callee: &str,
    file: Option<&crate::rules::facts::FileFacts>,
) -> Option<Lib> {
    let root = callee.split('.').next().unwrap_or(callee);
    let target = file.and_then(|f| f.import_target(root)).unwrap_or(root);
    let target_root = target.split('.').next().unwrap_or(target);
    match target_root {
        "httpx" => Some(Lib::Httpx),
        "requests" => Some(Lib::Requests),
        "aiohttp" | "aiohttp_retry" => Some(Lib::Aiohttp),
        "urllib" => Some(Lib::Urllib),
        "urllib3" => Some(Lib::Urllib3),
        _ => None,
    }
}

/// A client constructor and its library: `httpx.Client`, `httpx.AsyncClient`,
/// `requests.Session`, `aiohttp.ClientSession` (and aiohttp_retry's `RetryClient`).
fn constructor<'a>(call: Node<'_>, cx: &impl Local<'a>) -> Option<Lib> {
    let syntax::CallText { callee, name, .. } = cx.call_text(call);
    let lib = lib_of(callee, cx)?;
    lib.client_class(name).then_some(lib)
}

impl Lib {
    /// Whether `name` is a client class of the library.
    pub(crate) fn client_class(self, name: &str) -> bool {
        match self {
            Lib::Httpx => matches!(name, "Client" | "AsyncClient"),
            Lib::Requests => matches!(name, "Session" | "session"),
            // aiohttp_retry's client makes an aiohttp session from the same arguments.
            Lib::Aiohttp => matches!(name, "ClientSession" | "RetryClient"),
            Lib::Urllib => false,
            Lib::Urllib3 => urllib3_pool(name),
        }
    }
}

/// urllib3's classes that send requests and hold a default timeout.
fn urllib3_pool(name: &str) -> bool {
    matches!(
        name,
        "PoolManager" | "ProxyManager" | "HTTPConnectionPool" | "HTTPSConnectionPool"
    )
}

/// A client the file builds.
struct Client {
    /// The last name it is bound to (`self.session` → `session`, `async with
    /// httpx.AsyncClient() as client` → `client`).
    name: String,
    lib: Lib,
    /// Whether `timeout=` was given.
    timeout: bool,
    /// Where a plain local name is bound: the start of its function. `None` for attributes and
    /// module-level names, which any function may use.
    scope: Option<usize>,
}

/// The client a call is made on, by the receiver's last name: the one bound in the call's own
/// function first (two functions may both call theirs `client`), then any other.
fn client_of<'c>(
    clients: &'c [Client],
    name: &str,
    scope: impl FnOnce() -> Option<usize>,
) -> Option<&'c Client> {
    let mut named = clients.iter().filter(|c| c.name == name);
    let first = named.clone().next()?;
    // Most names have one binding: the call's function is looked up only when there are more.
    if named.clone().nth(1).is_none() {
        return Some(first);
    }
    let scope = scope();
    named
        .clone()
        .find(|c| c.scope.is_some() && c.scope == scope)
        .or_else(|| named.find(|c| c.scope.is_none()))
        .or(Some(first))
}

/// Clients the file builds.
fn clients<'a>(cx: &impl Local<'a>) -> Vec<Client> {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    // `self._session = session if session is not None else _make_session()`: attributes bound
    // to what a function of the file makes, resolved once the file's clients are known.
    let mut made_by_helpers: Vec<(String, Vec<&str>)> = Vec::new();
    let mut bind = |target: Node<'_>, value: Node<'_>| {
        let value = crate::rules::idem::strip_await(value);
        // A client injected or made here (`session or requests.Session()`, `x if x else
        // httpx.Client()`) is, where it is made here, that library's.
        let alternatives = match value.kind() {
            kinds::BOOLEAN_OPERATOR | kinds::CONDITIONAL_EXPRESSION => {
                let mut cursor = value.walk();
                value.named_children(&mut cursor).collect()
            }
            _ => vec![value],
        };
        let made = alternatives.iter().copied().find_map(|v| {
            let v = crate::rules::idem::strip_await(v);
            (v.kind() == kinds::CALL)
                .then(|| constructor(v, cx).map(|lib| (v, lib)))
                .flatten()
        });
        if made.is_none() && target.kind() == kinds::ATTRIBUTE {
            let helpers: Vec<&str> = alternatives
                .iter()
                .map(|v| crate::rules::idem::strip_await(*v))
                .filter(|v| v.kind() == kinds::CALL && syntax::positional_args(*v).is_empty())
                .map(|v| syntax::callee_name(v, src))
                .filter(|name| !name.is_empty())
                .collect();
            if !helpers.is_empty() {
                let text = syntax::text(target, src);
                let name = text.rsplit('.').next().unwrap_or(text).trim();
                made_by_helpers.push((name.to_string(), helpers));
            }
        }
        if let Some((call, lib)) = made {
            let text = syntax::text(target, src);
            let name = text.rsplit('.').next().unwrap_or(text).trim();
            // A `RetryClient` around a session of ours has that session's timeout.
            let timeout = syntax::keyword_arg(call, "timeout", src).is_some()
                || syntax::keyword_arg(call, "client_session", src).is_some();
            let scope = (!text.contains('.'))
                .then(|| idx.enclosing(call, kinds::FUNCTION_DEFINITION))
                .flatten()
                .map(|f| f.start_byte());
            out.push(Client {
                name: name.to_string(),
                lib,
                timeout,
                scope,
            });
        }
    };
    for &a in idx.all(kinds::ASSIGNMENT) {
        if let (Some(l), Some(r)) = (a.field("left"), a.field("right")) {
            bind(l, r);
        }
    }
    for &with in idx.all(kinds::WITH_STATEMENT) {
        for (value, alias) in with_items(with) {
            bind(alias, value);
        }
    }
    // A helper that makes the client (`sessao = requests.Session()`, mounts its adapters,
    // `return sessao`): the attribute holds that client. Asked only of files that make one.
    if !out.is_empty() {
        for (name, helpers) in made_by_helpers {
            let made = helpers.iter().find_map(|helper| {
                idx.functions_named(helper, src).find_map(|f| {
                    let returned = idx
                        .within(f, kinds::RETURN_STATEMENT)
                        .iter()
                        .find_map(|r| syntax::return_value(*r))?;
                    (returned.kind() == kinds::IDENTIFIER)
                        .then(|| {
                            out.iter().find(|c| {
                                c.scope == Some(f.start_byte())
                                    && c.name == syntax::text(returned, src)
                            })
                        })
                        .flatten()
                        .map(|c| (c.lib, c.timeout))
                })
            });
            if let Some((lib, timeout)) = made {
                out.push(Client {
                    name,
                    lib,
                    timeout,
                    scope: None,
                });
            }
        }
    }
    out
}

/// `(value, alias)` of each `with value as alias` item.
pub(crate) fn with_items(with: Node<'_>) -> Vec<(Node<'_>, Node<'_>)> {
    let mut out = Vec::new();
    let mut cursor = with.walk();
    for clause in with.named_children(&mut cursor) {
        if clause.kind() != "with_clause" {
            continue;
        }
        let mut inner = clause.walk();
        for item in clause.named_children(&mut inner) {
            let Some(pattern) = item
                .field("value")
                .filter(|v| v.kind() == kinds::AS_PATTERN)
            else {
                continue;
            };
            if let (Some(value), Some(alias)) = (pattern.named_child(0), pattern.field("alias")) {
                out.push((value, alias));
            }
        }
    }
    out
}

/// The file's HTTP calls, for the family's gates: found once for all of them, and only where the
/// text names a library the family knows (every call it recognises is tied to one through an
/// import, a constructor or a dotted callee, all spelled in the file: see `lib_of`).
pub(crate) fn calls_for_gates<'s, 'a>(s: &'s crate::rules::Scan<'a>) -> &'s [HttpCall<'a>] {
    s.http_calls.get_or_init(|| {
        if s.mentions(&["httpx", "requests", "aiohttp", "urllib"]) {
            http_calls(s)
        } else {
            Vec::new()
        }
    })
}

/// Every HTTP call and client construction of the file.
pub(crate) fn http_calls<'t>(cx: &impl Local<'t>) -> Vec<HttpCall<'t>> {
    let Some(idx) = cx.index() else {
        return Vec::new();
    };
    let clients = clients(cx);
    // Clients handed in are looked for only where some parameter is annotated as one.
    let injected = *cx.memo().client_parameters.get_or_init(|| {
        idx.all(kinds::FUNCTION_DEFINITION).iter().any(|f| {
            f.field("parameters").is_some_and(|params| {
                syntax::annotated_parameters(params, cx.src())
                    .iter()
                    .any(|(_, a)| names_client_type(syntax::text(*a, cx.src())))
            })
        })
    });
    let mut out = Vec::new();
    // Calls on a client handed in, by receiver: whether some of them pass their own timeout.
    let mut handed_in: Vec<(usize, &str, bool)> = Vec::new();
    for &call in idx.all(kinds::CALL) {
        let syntax::CallText {
            callee,
            name,
            receiver,
        } = cx.call_text(call);
        // `getattr(self.session, method)(...)`: a request on the object `getattr` reads, whose
        // method is chosen at run time.
        let dynamic =
            getattr_verb(call, cx.src()).map(|(target, _)| syntax::text(target, cx.src()));
        let recognised = if let Some(lib) = constructor(call, cx) {
            Some((lib, true, false))
        } else if name == "urlopen" && lib_of(callee, cx) == Some(Lib::Urllib) {
            Some((Lib::Urllib, false, false))
        } else if dynamic.is_none() && !VERBS.contains(&name) {
            None
        } else if let Some(recv) = dynamic.or(receiver).map(crate::rules::facts::last_name)
            && let Some(client) = client_of(&clients, recv, || {
                idx.enclosing(call, kinds::FUNCTION_DEFINITION)
                    .map(|f| f.start_byte())
            })
        {
            Some((client.lib, false, client.timeout))
        } else if let Some(lib) = injected.then(|| injected_client(cx, call)).flatten() {
            // Handed in: its defaults are set out of sight, and taken to bound the call
            // (`requests.Session` has none to set)...
            let timed = syntax::keyword_arg(call, "timeout", cx.src()).is_some();
            handed_in.push((out.len(), receiver.unwrap_or_default(), timed));
            Some((lib, false, true))
        } else {
            lib_of(dynamic.unwrap_or(callee), cx)
                .filter(|l| matches!(l, Lib::Httpx | Lib::Requests | Lib::Urllib3))
                .map(|l| (l, false, false))
        };
        if let Some((lib, constructor, client_timeout)) = recognised {
            out.push(HttpCall {
                node: call,
                lib,
                constructor,
                client_timeout,
                handed_in: handed_in.last().is_some_and(|&(at, _, _)| at == out.len()),
            });
        }
    }
    // ...unless the file's other calls on it pass their own (`timeout=self._timeout` on every
    // other request of the client): then the code does not count on a default, and a call
    // without one waits as long as the library lets it.
    // So it does not where it builds a timeout for its requests that none of them is given
    // (`self._timeout = aiohttp.ClientTimeout(total=10)`, read nowhere).
    let unused_timeout =
        handed_in.iter().any(|&(_, _, timed)| !timed) && kept_timeout(cx).is_some();
    for &(at, receiver, timed) in &handed_in {
        let siblings_timed = handed_in
            .iter()
            .any(|&(other, r, t)| other != at && r == receiver && t);
        if !timed
            && (siblings_timed || unused_timeout)
            && let Some(call) = out.get_mut(at)
        {
            call.client_timeout = false;
        }
    }
    out
}

/// A timeout the file keeps on its object (`self._timeout = aiohttp.ClientTimeout(...)`,
/// `self.timeout = (3.05, 20)`, `self._timeout = timeout` of the constructor's parameter) that
/// nothing reads, and the line that keeps it.
pub(crate) fn kept_timeout<'a, 'm>(cx: &'m impl Local<'a>) -> Option<&'m (String, u32)> {
    // Asked of every untimed call, by the listing of calls and by HTTP002: read once a file.
    cx.memo()
        .kept_timeout
        .get_or_init(|| {
            let idx = cx.index()?;
            timeout_built_and_unused(idx, cx.src()).map(|(name, line)| (name.to_string(), line))
        })
        .as_ref()
}

fn timeout_built_and_unused<'s>(idx: &NodeIndex<'_>, src: &'s str) -> Option<(&'s str, u32)> {
    let kept: Vec<(&str, u32)> = idx
        .all(kinds::ASSIGNMENT)
        .iter()
        .filter_map(|a| Some((a.field("left")?, a.field("right")?)))
        .filter(|(left, right)| {
            left.kind() == kinds::ATTRIBUTE
                && syntax::text(*left, src).starts_with("self.")
                && syntax::text(*left, src)
                    .to_ascii_lowercase()
                    .contains("timeout")
                && (matches!(
                    right.kind(),
                    kinds::TUPLE | kinds::FLOAT | kinds::INTEGER | kinds::IDENTIFIER
                ) || right.kind() == kinds::CALL
                    && syntax::callee_name(*right, src).ends_with("Timeout"))
        })
        .map(|(left, _)| (syntax::text(left, src), syntax::lines(left).0))
        .collect();
    kept.into_iter().find(|(name, _)| {
        idx.all(kinds::ATTRIBUTE)
            .iter()
            .filter(|a| syntax::text(**a, src) == *name)
            .all(|a| {
                a.parent()
                    .filter(|p| p.kind() == kinds::ASSIGNMENT)
                    .and_then(|p| p.field("left"))
                    .is_some_and(|l| l.id() == a.id())
            })
    })
}

/// `getattr(target, verb)` as the callee of a call: the object and the expression that names
/// the method.
pub(crate) fn getattr_verb<'t>(call: Node<'t>, src: &str) -> Option<(Node<'t>, Node<'t>)> {
    let function = call.field("function")?;
    if function.kind() != kinds::CALL
        || function
            .field("function")
            .is_none_or(|f| f.kind() != kinds::IDENTIFIER || syntax::text(f, src) != "getattr")
    {
        return None;
    }
    match syntax::positional_args(function).as_slice() {
        [target, verb] | [target, verb, _] => Some((*target, *verb)),
        _ => None,
    }
}

/// Whether the call is on the money path: its function is (see `idem::on_money_path`), or its
/// URL names a payment resource (`/v1/charges`, `/refunds`).
pub(crate) fn on_money_path(cx: &Ctx<'_>, call: Node<'_>) -> bool {
    let function = crate::rules::idem::function_facts(cx, call);
    crate::rules::idem::on_money_path(cx, function) || url_names_payment(cx, call)
}

/// Whether the call's URL names a payment resource (`/v1/charges`, `/refunds`): its first
/// argument, or the second after a method (`request("POST", url)`), or `url=`.
pub(crate) fn url_names_payment(cx: &Ctx<'_>, call: Node<'_>) -> bool {
    let src = cx.src();
    let url = syntax::positional_args(call)
        .into_iter()
        .find(|a| method_of(*a, src).is_none())
        .or(syntax::keyword_arg(call, "url", src))
        .map(|u| syntax::text(u, src).to_ascii_lowercase())
        .unwrap_or_default();
    let words = || url.split(|c: char| !c.is_ascii_alphanumeric() && c != '_');
    // `/v1/charges/search`: a read of payments, whatever its method.
    if words().any(|w| matches!(w, "search" | "query" | "lookup")) {
        return false;
    }
    let resource = |w: &str| matches!(w, "payment" | "billing" | "checkout" | "invoice");
    words().map(|w| w.strip_suffix('s').unwrap_or(w)).any(|w| {
        cx.vocab.is_payment_operation(w)
            || resource(w)
            // `/api/payment_orders`, `/v1/payment_intents`; not `/payment_links`, `/payment_methods`.
            || w.split_once('_').is_some_and(|(first, rest)| {
                resource(first) && matches!(rest, "order" | "orders" | "intent" | "intents")
            })
    })
}

/// What names the method of `request(...)` or `stream(...)`: its first argument, or `method=`.
pub(crate) fn method_arg<'t>(call: Node<'t>, src: &str) -> Option<Node<'t>> {
    if !matches!(syntax::callee_name(call, src), "request" | "stream") {
        return None;
    }
    syntax::positional_args(call)
        .first()
        .copied()
        .or(syntax::keyword_arg(call, "method", src))
}

/// The HTTP method a string literal names (`"POST"` gives `post`), if it is one.
pub(crate) fn method_of(arg: Node<'_>, src: &str) -> Option<&'static str> {
    if arg.kind() != kinds::STRING {
        return None;
    }
    let text = syntax::text(arg, src).trim_matches(|c| c == '"' || c == '\'');
    const METHODS: &[&str] = &["get", "post", "put", "patch", "delete", "head", "options"];
    METHODS
        .iter()
        .find(|v| text.eq_ignore_ascii_case(v))
        .copied()
}

/// The library of a client the call is made on when that client is a parameter of the calling
/// function with a client type (`client: httpx.AsyncClient`, `session: Optional[Session]`), or
/// an attribute of `self` set from such a parameter (`self.client = client` in `__init__`):
/// injected, so where its defaults are set is out of sight, but what it sends is not.
pub(crate) fn injected_client<'a>(cx: &impl Local<'a>, call: Node<'_>) -> Option<Lib> {
    let (idx, src) = (cx.index()?, cx.src());
    let receiver = syntax::receiver(call)?;
    match receiver.kind() {
        kinds::IDENTIFIER => {
            let func = idx.enclosing(call, kinds::FUNCTION_DEFINITION)?;
            parameter_client(cx, func, syntax::text(receiver, src))
        }
        kinds::ATTRIBUTE => {
            let attribute = syntax::text(receiver, src);
            if !attribute.starts_with("self.") {
                return None;
            }
            let class = idx.enclosing(call, kinds::CLASS_DEFINITION)?;
            idx.within(class, kinds::ASSIGNMENT).iter().find_map(|a| {
                let (left, right) = (a.field("left")?, a.field("right")?);
                if syntax::text(left, src) != attribute {
                    return None;
                }
                // `self.client = client`, `self.client = client or httpx.AsyncClient()`.
                let param = match right.kind() {
                    kinds::IDENTIFIER => right,
                    kinds::BOOLEAN_OPERATOR => right.field("left")?,
                    _ => return None,
                };
                let func = idx.enclosing(*a, kinds::FUNCTION_DEFINITION)?;
                parameter_client(cx, func, syntax::text(param, src))
            })
        }
        _ => None,
    }
}

/// Whether an annotation's text may name a client type (`Session`, `httpx.AsyncClient`,
/// `Optional[ClientSession]`): the cheap test before `parameter_client` reads it.
fn names_client_type(annotation: &str) -> bool {
    annotation.contains("Session") || annotation.contains("Client") || annotation.contains("Pool")
}

/// The library of `func`'s parameter `name` when its annotation names a client type.
fn parameter_client<'a>(cx: &impl Local<'a>, func: Node<'_>, name: &str) -> Option<Lib> {
    let src = cx.src();
    let params = func.field("parameters")?;
    syntax::annotated_parameters(params, src)
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, annotation)| annotation)
        .and_then(|annotation| {
            syntax::text(annotation, src)
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                .find_map(|word| {
                    let last = word.rsplit('.').next().unwrap_or(word);
                    let lib = lib_of(word, cx)?;
                    let client = match lib {
                        Lib::Httpx => matches!(last, "Client" | "AsyncClient"),
                        Lib::Requests => last == "Session",
                        Lib::Aiohttp => last == "ClientSession",
                        Lib::Urllib => false,
                        Lib::Urllib3 => urllib3_pool(last),
                    };
                    client.then_some(lib)
                })
        })
}
