//! The idem family: idempotency keys and other check-then-set state kept in a cache (redis-py,
//! `redis.asyncio`, Django's cache). This module recognises cache calls and says whether code is
//! on the money path; the rules live one per file beside it.

pub(crate) mod cache_check_then_set;
pub(crate) mod cache_outside_try_on_payment_path;
pub(crate) mod decode_cached_value;
pub(crate) mod event_dedup_skipped;
pub(crate) mod key_from_the_clock;
pub(crate) mod key_header_unread;
pub(crate) mod key_made_per_attempt;
pub(crate) mod key_numbered_by_count;
pub(crate) mod key_outlived_by_retries;
pub(crate) mod key_parameter_ignored;
pub(crate) mod key_params;
pub(crate) mod key_ttl_unit;
pub(crate) mod memcache_add_without_reply;
pub(crate) mod resend_window_outlives_key;
pub(crate) mod retried_without_key;
pub(crate) mod unknown_outcome_new_key;
pub(crate) mod webhook_claimed_before_applied;
pub(crate) mod webhook_marker_expires;
pub(crate) mod window_from_last_send;

use std::collections::BTreeSet;

use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::facts::{self, FileFacts, FunctionFacts};
use crate::rules::{Ctx, Local, reach};

/// What a cache call does to its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Read,
    /// A plain write: it overwrites whatever another worker stored in between.
    Write,
    /// `set(..., nx=True)`, `setnx`, `hsetnx`, Django's `add`: only one writer wins.
    AtomicWrite,
    /// Django's `get_or_set`: a read, a write and a read again.
    GetOrSet,
}

/// A call on a cache client.
#[derive(Debug, Clone)]
pub(crate) struct CacheCall<'t> {
    pub node: Node<'t>,
    pub method: String,
    pub op: Op,
    /// The key as written, whitespace-normalised (`f"idemp:{order_id}"`, `key`).
    pub key: String,
    /// The key with a local variable replaced by the expression assigned to it.
    pub resolved_key: String,
    /// The receiver is Django's cache (values are pickled objects, never raw bytes).
    pub django: bool,
}

impl CacheCall<'_> {
    /// Whether two calls name the same key (as written, or through the variable holding it).
    pub fn same_key(&self, other: &CacheCall<'_>) -> bool {
        !self.key.is_empty()
            && (self.key == other.key
                || self.resolved_key == other.resolved_key
                || self.key == other.resolved_key
                || self.resolved_key == other.key)
    }
}

const READS: &[&str] = &["get", "hget", "exists", "hexists", "getex", "sismember"];
const WRITES: &[&str] = &["set", "setex", "psetex", "hset", "getset", "sadd"];
const ATOMIC_WRITES: &[&str] = &["setnx", "hsetnx", "add"];
/// Methods whose key is a hash name plus a field, or a set's name plus a member.
const HASH_METHODS: &[&str] = &["hget", "hexists", "hset", "hsetnx", "sismember", "sadd"];

/// Whether the file holds a call on a cache client (see `cache_call`).
pub(crate) fn has_cache_call(s: &crate::rules::Scan<'_>) -> bool {
    *s.cache_call.get_or_init(|| {
        s.index().all(kinds::CALL).iter().any(|&call| {
            // The method first: it rules out nearly every call before the receiver is looked at.
            let method = s.callee_name(call);
            (READS.contains(&method)
                || WRITES.contains(&method)
                || ATOMIC_WRITES.contains(&method)
                || method == "get_or_set")
                && cache_receiver(call, s).is_some()
        })
    })
}

/// Recognises a call on a cache client and reads its key.
pub(crate) fn cache_call<'t, 'a>(call: Node<'t>, cx: &impl Local<'a>) -> Option<CacheCall<'t>> {
    let src = cx.src();
    let method = cx.callee_name(call);
    let op = if READS.contains(&method) {
        Op::Read
    } else if method == "set" && sets_nx(call, src)
        || ATOMIC_WRITES.contains(&method)
        // `if not r.sadd(...)`: how many members were new says who claimed it first.
        || method == "sadd" && result_read(call)
    {
        Op::AtomicWrite
    } else if WRITES.contains(&method) {
        Op::Write
    } else if method == "get_or_set" {
        Op::GetOrSet
    } else {
        return None;
    };
    let django = cache_receiver(call, cx)?;
    let key = key_of(call, method, src)?;
    let resolved_key = resolve(cx, call, &key);
    Some(CacheCall {
        node: call,
        method: method.to_string(),
        op,
        key,
        resolved_key,
        django,
    })
}

/// A function of the file that makes one cache call whose key comes from one of its parameters
/// (`recall(name)` returning `self._mc.get(self._key(name))`): its calls are that cache call,
/// on the key they pass.
#[derive(Debug, Clone)]
pub(crate) struct Wrapper {
    name: String,
    op: Op,
    param: String,
    django: bool,
}

/// `cache_call`, or a call of a cache wrapper of the file (`self.recall(name)`,
/// `self.remember(name, value)`) taken for the cache call it makes, on the key it passes.
pub(crate) fn cache_call_or_wrapper<'t, 'a>(
    call: Node<'t>,
    cx: &impl Local<'a>,
) -> Option<CacheCall<'t>> {
    if let Some(direct) = cache_call(call, cx) {
        return Some(direct);
    }
    // A method of the class on `self`, or a function of the module.
    let receiver = cx.call_text(call).receiver;
    if receiver.is_some_and(|r| r != "self" && r != "cls") {
        return None;
    }
    let (idx, src) = (cx.index()?, cx.src());
    let method = cx.callee_name(call);
    let wrappers = cx.memo().cache_wrappers.get_or_init(|| wrappers(cx));
    let wrapper = wrappers.iter().find(|w| w.name == method)?;
    let def = idx
        .all(kinds::FUNCTION_DEFINITION)
        .iter()
        .copied()
        .find(|f| syntax::function_name(*f, src) == method)?;
    let arg = crate::rules::pay::argument_for(call, def, &wrapper.param, true, src)?;
    let key = syntax::normalized(arg, src);
    let resolved_key = resolve(cx, call, &key);
    Some(CacheCall {
        node: call,
        method: method.to_string(),
        op: wrapper.op,
        key,
        resolved_key,
        django: wrapper.django,
    })
}

/// The file's cache wrappers: small functions (three statements at most) with one cache call of
/// their own, whose key names one of their parameters.
fn wrappers<'a>(cx: &impl Local<'a>) -> Vec<Wrapper> {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        let small = func
            .field("body")
            .is_some_and(|b| syntax::statements(b).len() <= 3);
        if !small {
            continue;
        }
        let mut calls = idx
            .within(func, kinds::CALL)
            .iter()
            .filter(|c| owned_by(idx, **c, Some(func)))
            .filter_map(|c| cache_call(*c, cx));
        let (Some(only), None) = (calls.next(), calls.next()) else {
            continue;
        };
        if only.op == Op::GetOrSet {
            continue;
        }
        let params = crate::rules::pay::positional_parameters(func, src);
        let words: Vec<&str> = only
            .key
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .collect();
        let Some(param) = params.iter().find(|p| words.contains(p)) else {
            continue;
        };
        out.push(Wrapper {
            name: syntax::function_name(func, src).to_string(),
            op: only.op,
            param: param.to_string(),
            django: only.django,
        });
    }
    out
}

/// Whether what the call returns is used (not a statement of its own, awaited or not).
fn result_read(call: Node<'_>) -> bool {
    let outer = call
        .parent()
        .filter(|p| p.kind() == kinds::AWAIT)
        .unwrap_or(call);
    outer
        .parent()
        .is_some_and(|p| p.kind() != "expression_statement")
}

/// `nx=True`, or `True` in `set`'s fifth position (`name, value, ex, px, nx`).
fn sets_nx(call: Node<'_>, src: &str) -> bool {
    let truthy = |n: Node<'_>| n.kind() == kinds::TRUE;
    syntax::keyword_arg(call, "nx", src).is_some_and(truthy)
        || syntax::positional_args(call)
            .get(4)
            .copied()
            .is_some_and(truthy)
}

fn key_of(call: Node<'_>, method: &str, src: &str) -> Option<String> {
    let args = syntax::positional_args(call);
    let first = args
        .first()
        .copied()
        .or_else(|| syntax::keyword_arg(call, "name", src))
        .or_else(|| syntax::keyword_arg(call, "key", src))?;
    let mut key = syntax::normalized(first, src);
    if HASH_METHODS.contains(&method)
        && let Some(field) = args.get(1)
    {
        key = format!("{key}, {}", syntax::normalized(*field, src));
    }
    Some(key)
}

/// Whether the call's receiver is a cache client; `Some(true)` for Django's cache.
fn cache_receiver<'a>(call: Node<'_>, cx: &impl Local<'a>) -> Option<bool> {
    let facts = cx.facts()?;
    // The receiver as the index read it with the callee: the tree is not asked again.
    let full = cx.call_text(call).receiver?;
    // A call's result is named by what was called: `get_providers(cached=True).get(...)`.
    let last = facts::last_name(full.split('(').next().unwrap_or(full));
    if full.starts_with("caches[") || full.starts_with("caches.") {
        return Some(true);
    }
    let django_import = || {
        facts
            .imports
            .iter()
            .any(|i| i.target.starts_with("django.core.cache"))
    };
    let client = if facts::is_cache_name(last, facts, cx.vocab()) {
        let django = facts
            .import_target(last)
            .is_some_and(|t| t.starts_with("django"))
            || last == "cache" && django_import();
        Some(django)
    } else {
        cx.memo()
            .cache_clients
            .get_or_init(|| client_aliases(cx))
            .iter()
            .find(|(name, _)| name == last)
            .map(|(_, django)| *django)
    };
    // Asked last: it reads the function's assignments, and most receivers (`dict.get`) are no
    // client by name anyway.
    client.filter(|_| {
        // `r` of `for r in rows: r.get("status")`: an item of what the loop walks.
        !(is_value_name(cx, call, last)
            || full == last && facts::bound_by_a_loop(call, last, cx.src()))
    })
}

/// A name bound from a cache read (`cached = r.get(k)`) is a value, not a client, though its
/// name says "cache".
fn is_value_name<'a>(cx: &impl Local<'a>, call: Node<'_>, name: &str) -> bool {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return false;
    };
    let scope = idx.enclosing(call, kinds::FUNCTION_DEFINITION);
    assignments_in(idx, scope).iter().any(|a| {
        a.field("left")
            .is_some_and(|l| syntax::text(l, src) == name)
            && a.field("right")
                .map(strip_await)
                .is_some_and(|r| r.kind() == kinds::CALL && syntax::callee_name(r, src) == "get")
    })
}

/// Names given to a cache client the code obtained itself: `r = redis.Redis(...)`,
/// `conn = get_redis_connection()`, `store = caches["default"]`; `true` for Django's.
fn client_aliases<'a>(cx: &impl Local<'a>) -> Vec<(String, bool)> {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let names = cx
        .facts()
        .map(|f| facts::cache_import_names(&f.imports))
        .unwrap_or_default();
    for &a in idx.all(kinds::ASSIGNMENT) {
        // What makes the client is part of the assignment's text: most assignments name
        // neither word (nor a cache library's class), and are passed over before tree-sitter
        // is asked for their fields.
        let whole = syntax::text(a, src);
        if !syntax::contains_lowercase(whole, "redis")
            && !syntax::contains_lowercase(whole, "cache")
            && !names.iter().any(|n| whole.contains(n))
        {
            continue;
        }
        let (Some(left), Some(right)) = (a.field("left"), a.field("right").map(strip_await)) else {
            continue;
        };
        let made_by = match right.kind() {
            kinds::CALL => syntax::callee(right, src),
            kinds::SUBSCRIPT => syntax::text(right, src),
            // `applied = request.memcache`, `store = self.redis`: a client the code was handed,
            // under a shorter name.
            kinds::ATTRIBUTE => {
                let attribute = facts::last_name(syntax::text(right, src));
                if !cx
                    .facts()
                    .is_some_and(|f| facts::is_cache_name(attribute, f, cx.vocab()))
                {
                    continue;
                }
                attribute
            }
            _ => continue,
        };
        if syntax::contains_lowercase(made_by, "redis")
            || syntax::contains_lowercase(made_by, "cache")
            || right.kind() == kinds::CALL && facts::made_by_cache_import(made_by, &names)
        {
            let text = syntax::text(left, src);
            let name = text.rsplit('.').next().unwrap_or(text);
            // `TTLCache(...)` and the like keep their values in the process.
            if cx
                .facts()
                .is_some_and(|f| f.memory_caches.iter().any(|m| m == name))
            {
                continue;
            }
            let django = made_by
                .as_bytes()
                .get(..6)
                .is_some_and(|start| start.eq_ignore_ascii_case(b"caches"));
            out.push((name.to_string(), django));
        }
    }
    out
}

/// The assignments of one function (or of the whole module when `scope` is `None`).
fn assignments_in<'t>(idx: &'t NodeIndex<'t>, scope: Option<Node<'_>>) -> &'t [Node<'t>] {
    match scope {
        Some(func) => idx.within(func, kinds::ASSIGNMENT),
        None => idx.all(kinds::ASSIGNMENT),
    }
}

/// `x` of `await x`, or the node itself.
pub(crate) fn strip_await(node: Node<'_>) -> Node<'_> {
    if node.kind() == kinds::AWAIT {
        node.named_child(0).unwrap_or(node)
    } else {
        node
    }
}

/// The key text with a local variable replaced by the last expression assigned to it before
/// `at` in the same function.
pub(crate) fn resolve<'a>(cx: &impl Local<'a>, at: Node<'_>, text: &str) -> String {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return text.to_string();
    };
    let Some(func) = idx.enclosing(at, kinds::FUNCTION_DEFINITION) else {
        return text.to_string();
    };
    idx.assigned_before(Some(func), text, at.start_byte(), src)
        .map_or_else(|| text.to_string(), |r| syntax::normalized(r, src))
}

/// Whether `node` belongs to `func` itself, not to a function nested in it.
pub(crate) fn owned_by(idx: &NodeIndex<'_>, node: Node<'_>, func: Option<Node<'_>>) -> bool {
    idx.enclosing(node, kinds::FUNCTION_DEFINITION)
        .map(|f| f.id())
        == func.map(|f| f.id())
}

/// Functions of the change (this side) that call `func` of `file`, and the functions calling
/// those, up to `depth` levels; with the binding each call site gives the result. A call counts
/// where it shows that it calls this function (`calls_it`), not merely one of its name.
pub(crate) fn callers_of<'c>(
    cx: &Ctx<'c>,
    file: &'c FileFacts,
    func: &'c FunctionFacts,
    depth: usize,
) -> Vec<(&'c FunctionFacts, Option<&'c str>)> {
    let mut out = Vec::new();
    let mut frontier = vec![(file, func)];
    let mut seen = BTreeSet::new();
    for _ in 0..depth {
        let mut next = Vec::new();
        for (file, func) in frontier.drain(..) {
            if !seen.insert((file.path.as_str(), func.qualname.as_str())) {
                continue;
            }
            for (caller_file, site) in cx.change.calls_named(cx.side, &func.name) {
                if !calls_it(cx, (caller_file, site), (file, func)) {
                    continue;
                }
                if let Some(caller) = caller_file.function(&site.function) {
                    next.push((caller_file, caller));
                    out.push((caller, site.binding.as_deref()));
                }
            }
        }
        frontier = next;
    }
    out
}

/// Whether a call site calls `func` of `file`, as far as its receiver tells: `post(...)` in
/// the module or imported from it, `gateway.post(...)` through the module's import,
/// `self.refund(...)` in the method's class. A method called on anything else
/// (`client.refund(...)`) is taken for it only where the change has one function of that name:
/// in a payment library each provider has its `refund`, and a view its `post`.
pub(crate) fn calls_it(
    cx: &Ctx<'_>,
    (caller_file, site): (&FileFacts, &facts::CallSite),
    (file, func): (&FileFacts, &FunctionFacts),
) -> bool {
    let class = func
        .qualname
        .strip_suffix(func.name.as_str())
        .and_then(|q| q.strip_suffix('.'));
    let receiver = site
        .callee
        .strip_suffix(func.name.as_str())
        .and_then(|r| r.strip_suffix('.'));
    let same_file = caller_file.path == file.path;
    let of_module = |target: &str| {
        let target = target.trim_start_matches('.');
        !target.is_empty()
            && (file.module == target || file.module.ends_with(&format!(".{target}")))
    };
    let elsewhere_by_name =
        |r: &str| named_once(cx, &func.name) && caller_file.import_target(r).is_none();
    match (class, receiver) {
        (None, None) => {
            same_file
                || caller_file
                    .import_target(&func.name)
                    .and_then(|t| t.rsplit_once('.'))
                    .is_some_and(|(module, _)| of_module(module))
        }
        (None, Some(r)) => {
            caller_file.import_target(r).is_some_and(of_module) || elsewhere_by_name(r)
        }
        (Some(class), Some("self" | "cls")) => {
            same_file
                && site
                    .function
                    .strip_prefix(class)
                    .is_some_and(|rest| rest.starts_with('.'))
        }
        (Some(_), Some(r)) => elsewhere_by_name(r),
        (Some(_), None) => false,
    }
}

/// Whether a function moves money: the module is about payments, its name is a payment
/// operation, it calls one (directly or two calls deep), or a caller in the change does.
/// Narrower than `Ctx::on_payment_path`, which counts any cache or HTTP call: a tariff cache
/// that talks to Redis is not a payment.
pub(crate) fn on_money_path(cx: &Ctx<'_>, func: Option<&FunctionFacts>) -> bool {
    if cx.facts.is_some_and(|f| f.payment_module) {
        return true;
    }
    let Some(func) = func else {
        return false;
    };
    let pays = |f: &FunctionFacts| f.payment || cx.vocab.is_payment_operation(&f.name);
    pays(func)
        || reaches_surely(cx, func, &reach::PAYMENT)
        || cx
            .facts
            .is_some_and(|file| callers_of(cx, file, func, 2).iter().any(|(f, _)| pays(f)))
}

/// Whether every HTTP request `func` makes itself only reads (`get`, `head`, `options`, or a
/// `request("GET", ...)`): a rate or a profile fetched and cached moves no money, on a payment
/// module's path or not.
pub(crate) fn fetches_only(cx: &Ctx<'_>, func: Node<'_>) -> bool {
    let (Some(idx), Some(file), src) = (cx.index(), cx.facts, cx.src()) else {
        return false;
    };
    // The calls the facts took for HTTP (`FunctionFacts::http`), read again for this function
    // only: the file's whole list of requests is not needed.
    let mut requests = idx
        .within(func, kinds::CALL)
        .iter()
        .copied()
        .filter(|c| owned_by(idx, *c, Some(func)))
        .filter(|c| facts::classify_call(*c, src, file, cx.vocab) == facts::Target::Http)
        .peekable();
    requests.peek().is_some()
        && requests.all(|r| {
            let verb = match crate::rules::http::method_arg(r, src) {
                Some(method) => crate::rules::http::method_of(method, src),
                None => Some(syntax::callee_name(r, src)),
            };
            matches!(verb, Some("get" | "head" | "options"))
        })
}

/// Whether the function, what it calls or what calls it (in the change) talks HTTP.
pub(crate) fn reaches_http(cx: &Ctx<'_>, func: &FunctionFacts) -> bool {
    func.http
        || reaches_surely(cx, func, &reach::HTTP)
        || cx
            .facts
            .is_some_and(|file| callers_of(cx, file, func, 2).iter().any(|(f, _)| f.http))
}

/// Whether `func` itself reaches `t` within two calls, through names every function of which
/// does (`ChangeSet::reach_surely`): in a large change `get` or `save` is many functions, and one
/// of them paying says nothing of this one.
fn reaches_surely(cx: &Ctx<'_>, func: &FunctionFacts, t: &reach::Trait) -> bool {
    let own = std::slice::from_ref(&func.qualname);
    cx.change
        .reach_surely(cx.side, &func.name, Some(own), 2, t)
        .is_some()
}

/// Whether the change defines one function called `name`: only then are the calls of `name`
/// calls of it (a view's `get` is one of dozens).
pub(crate) fn named_once(cx: &Ctx<'_>, name: &str) -> bool {
    cx.change.functions_named(cx.side, name).nth(1).is_none()
}

/// Whether a name or text speaks of an idempotency, dedup or lock key.
pub(crate) fn is_idempotency_text(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    [
        "idem",
        "dedup",
        "nonce",
        "request_id",
        "requestid",
        "request-id",
    ]
    .iter()
    .any(|w| lower.contains(w))
        || lower
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| matches!(w, "lock" | "locks" | "locked" | "mutex"))
}

/// The facts of the function enclosing `node`.
pub(crate) fn function_facts<'c>(cx: &Ctx<'c>, node: Node<'_>) -> Option<&'c FunctionFacts> {
    let idx = cx.index()?;
    let func = idx.enclosing(node, kinds::FUNCTION_DEFINITION)?;
    cx.facts?.function(&facts::qualname(func, idx, cx.src()))
}

/// The facts of a function node.
pub(crate) fn facts_of<'c>(cx: &Ctx<'c>, func: Node<'_>) -> Option<&'c FunctionFacts> {
    cx.facts?
        .function(&facts::qualname(func, cx.index()?, cx.src()))
}

/// Where the cache client a call goes through is built, as the project index shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientSite {
    pub path: String,
    pub line: u32,
    /// The module-level name it is bound to (`redis_client`).
    pub name: String,
    /// `decode_responses`: `Some(true)`/`Some(false)` when the construction says (redis-py's
    /// default is `False`), `None` when it hides in `**options`, a pool or a variable.
    pub decodes: Option<bool>,
}

/// Constructors of a redis-py client (sync and `redis.asyncio`).
fn is_redis_constructor(callee: &str) -> bool {
    let last = callee.rsplit('.').next().unwrap_or(callee);
    matches!(last, "Redis" | "StrictRedis" | "RedisCluster")
        || last == "from_url" && callee.to_ascii_lowercase().contains("redis")
}

/// Whether every Redis client the file builds is built to return `bytes` (no
/// `decode_responses`, no pool or `**options` that could set it), and it builds at least one:
/// `connect()` returning `aioredis.from_url(url)` in the module whose helpers take the client
/// as a parameter. What such helpers are handed is, most likely, what the module builds.
pub(crate) fn file_builds_bytes_clients(cx: &Ctx<'_>) -> bool {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return false;
    };
    let mut built = false;
    for &call in idx.all(kinds::CALL) {
        if !is_redis_constructor(syntax::callee(call, src)) {
            continue;
        }
        let text = syntax::text(call, src);
        if text.contains("decode_responses")
            || text.contains("connection_pool")
            || text.contains("**")
        {
            return false;
        }
        built = true;
    }
    built
}

/// The construction of the client `call` is made on (`redis_client.get(...)`), followed through
/// imports in the project index, or to what the enclosing class builds for itself
/// (`self.redis = redis.Redis(...)`); from the diff alone, to a module-level construction in
/// the same file. `None` when the client is not a redis-py construction in sight (a factory,
/// an injected client).
pub(crate) fn client_site(cx: &Ctx<'_>, call: Node<'_>) -> Option<ClientSite> {
    let receiver = syntax::receiver(call)?;
    let receiver = strip_await(receiver);
    if !matches!(receiver.kind(), kinds::IDENTIFIER | kinds::ATTRIBUTE) {
        return None;
    }
    let expr = syntax::text(receiver, cx.src());
    let (path, assignment) = match cx.project() {
        Some(project) => {
            let own_attribute = expr
                .strip_prefix("self.")
                .or_else(|| expr.strip_prefix("cls."))
                .filter(|attr| !attr.contains('.'));
            let (module, assignment) = match own_attribute {
                // What the enclosing class built for itself, in this file.
                Some(attr) => {
                    let class = cx.index()?.enclosing(call, kinds::CLASS_DEFINITION)?;
                    let name = syntax::text(class.field("name")?, cx.src());
                    let module = project.file(cx.path)?;
                    (module, module.assignment(&format!("{name}.{attr}"))?)
                }
                None => project.resolve_expr(cx.path, expr)?,
            };
            (module.path.clone(), assignment.clone())
        }
        // Reviewed from the diff alone: a client this file builds at module level.
        None => (cx.path.to_string(), module_assignment(cx, expr)?),
    };
    let callee = assignment.callee.as_deref()?;
    if !is_redis_constructor(callee) {
        return None;
    }
    let keyword = |name: &str| {
        assignment
            .keywords
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let decodes = match keyword("decode_responses") {
        Some("True") => Some(true),
        Some("False") => Some(false),
        Some(_) => None,
        None if assignment.splat || keyword("connection_pool").is_some() => None,
        None => Some(false),
    };
    Some(ClientSite {
        path,
        line: assignment.line,
        name: assignment.name.clone(),
        decodes,
    })
}

/// `name = value` at the module level of this file, the last one.
fn module_assignment(cx: &Ctx<'_>, name: &str) -> Option<crate::index::Assignment> {
    crate::index::module_assignment(cx.index()?, name, cx.src())
}

/// Asks about the cache's configuration: all of it when the client's construction is unknown,
/// only what code cannot show (eviction, persistence) when the index found it.
pub(crate) fn ask_cache_config(cx: &mut Ctx<'_>, call: Node<'_>) {
    match client_site(cx, call) {
        Some(site) if site.decodes.is_some() => cx.ask("idem-cache-durability", Vec::new()),
        _ => cx.ask("idem-cache-config", Vec::new()),
    }
}

/// Whether every run of `func` sends the same idempotency key: it names one, and neither it
/// nor what it calls (two calls deep, in the change) mints a fresh token for it. A re-run of
/// a killed task is safe only then.
pub(crate) fn key_is_deterministic(cx: &Ctx<'_>, func: &FunctionFacts) -> bool {
    const MINTS: reach::Trait = reach::Trait {
        name: "mints-a-token",
        holds: |f| {
            f.callees
                .iter()
                .any(|c| cache_check_then_set::FRESH_VALUES.contains(&c.as_str()))
        },
    };
    func.mentions_idempotency
        && !(MINTS.holds)(func)
        && !cx.change.reaches(cx.side, &func.name, 2, &MINTS)
}

/// Whether the function applies its change only on a state transition that one writer wins:
/// `if await Collection.filter(id=..., status=SUBMITTED).update(status=CONFIRMED):`, `if
/// result.modified_count:`, `if cursor.rowcount == 1:`, `if store.transition(...)`. A
/// redelivered event (or a second racer) then finds the state moved on and changes nothing, so
/// a cache marker in front of it is only a shortcut.
pub(crate) fn applies_by_state(idx: &NodeIndex<'_>, func: Node<'_>, src: &str) -> bool {
    const WON: &[&str] = &[
        ".update(",
        "update_one(",
        "update_many(",
        "rowcount",
        "modified_count",
        "matched_count",
        "transition(",
        "compare_and_set(",
    ];
    idx.within(func, kinds::IF_STATEMENT).iter().any(|stmt| {
        stmt.field("condition").is_some_and(|c| {
            let text = syntax::text(c, src);
            if WON.iter().any(|w| text.contains(w)) {
                return true;
            }
            // `updated = ...filter(...).update(...)` then `if updated:`.
            c.kind() == kinds::IDENTIFIER
                && idx
                    .assigned_before(Some(func), text, c.start_byte(), src)
                    .is_some_and(|v| WON.iter().any(|w| syntax::text(v, src).contains(w)))
        })
    })
}
