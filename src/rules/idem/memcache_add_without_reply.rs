//! IDEM009 memcache-add-without-reply: a lock or a "seen" marker taken with pymemcache's `add`
//! and decided on its answer (`if not client.add(key, b"1", expire=ttl): return`). pymemcache's
//! clients send `add` with `noreply=True` unless told otherwise (`noreply=False` on the call,
//! `default_noreply=False` on the client): the call does not wait for the server and returns
//! `True` whatever the key held, so every worker takes the lock.
use tree_sitter::Node;

use crate::python::{kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "IDEM009",
    doc: include_str!("../../../rules/idem/IDEM009.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is an `add` call whose answer is read.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && s.mentions(&[".add("])
}

/// Text that gives a pymemcache client its replies back.
pub(crate) fn waits_for_replies(src: &str) -> bool {
    src.contains("default_noreply=False") || src.contains("default_noreply = False")
}

fn imports_pymemcache(imports: &[crate::rules::facts::Import]) -> bool {
    imports.iter().any(|i| is_pymemcache(&i.target))
}

/// Whether an import's target is pymemcache's (`pymemcache.client.base`).
pub(crate) fn is_pymemcache(target: &str) -> bool {
    target == "pymemcache" || target.starts_with("pymemcache.")
}

/// Where the file's memcached client comes from, when it is pymemcache's and is left to skip
/// replies: the file itself imports it (and makes no client that waits for them), or, in
/// repository mode, a module of the repository does (`academy/cache.py` building
/// `Client((host, port), serde=...)`), and none of them asks for replies.
fn pymemcache_without_replies(cx: &Ctx<'_>) -> Option<String> {
    let facts = cx.facts?;
    if imports_pymemcache(&facts.imports) {
        return (!waits_for_replies(cx.src())).then(|| cx.path.to_string());
    }
    let project = cx.project()?;
    let mut found = None;
    for module in project.modules() {
        match module.memcache_replies {
            Some(true) => return None,
            Some(false) if found.is_none() => found = Some(module.path.clone()),
            _ => {}
        }
    }
    found
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    let calls: Vec<Node<'_>> = idx
        .all(kinds::CALL)
        .iter()
        .copied()
        .filter(|c| idx.callee_name(*c, src) == "add" && answer_read(*c, src))
        .collect();
    if calls.is_empty() {
        return;
    }
    // Only now: in repository mode the index is built on first use.
    let Some(client_at) = pymemcache_without_replies(cx) else {
        return;
    };
    for call in calls {
        let function = idx
            .enclosing(call, kinds::FUNCTION_DEFINITION)
            .map(|f| crate::rules::facts::qualname(f, idx, src))
            .unwrap_or_default();
        let finding = cx
            .report(&RULE, call)
            .arg("call", syntax::normalized(call, src))
            .arg("client_at", client_at.clone());
        finding.function = function;
    }
}

/// `client.add(key, value, ...)` with a key and a value, not awaited (pymemcache is
/// synchronous; `aiomcache` answers), with no `noreply=False`, whose answer the code reads: in
/// a condition, bound to a name, returned. `session.add(obj)` and `seen.add(x)` take one
/// argument; Django's `cache.add` answers.
fn answer_read(call: Node<'_>, src: &str) -> bool {
    let text = syntax::call_text(call, src);
    if text.name != "add" {
        return false;
    }
    let Some(receiver) = text.receiver else {
        return false;
    };
    let last = receiver.rsplit('.').next().unwrap_or(receiver);
    if last == "cache" || receiver.starts_with("caches[") {
        return false;
    }
    if syntax::positional_args(call).len() < 2 {
        return false;
    }
    if syntax::keyword_args(call, src)
        .iter()
        .any(|(k, v)| *k == "noreply" && syntax::text(*v, src) == "False")
    {
        return false;
    }
    let Some(parent) = call.parent() else {
        return false;
    };
    if parent.kind() == kinds::AWAIT || parent.kind() == kinds::EXPRESSION_STATEMENT {
        return false;
    }
    true
}
