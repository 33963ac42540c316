//! IDEM002 decode-cached-value: `.decode()` on what a Redis read returned, which is `bytes` or
//! `str` depending on the client's `decode_responses`, with no `isinstance` guard.
use tree_sitter::Node;

use super::Op;
use crate::python::{Fields, kinds, syntax};
use crate::review::Severity;
use crate::rules::{Check, Ctx, Gate, Local, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "IDEM002",
    doc: include_str!("../../../rules/idem/IDEM002.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a `.decode(…)` of what a cache call read.
fn gate(s: &Scan<'_>) -> bool {
    // The cache calls first: the other idem gates ask the same, and it is asked once per file.
    super::has_cache_call(s)
        && s.index()
            .all(kinds::CALL)
            .iter()
            .any(|c| s.callee_name(*c) == "decode")
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    // Memcached clients (pymemcache, aiomcache) hand back bytes unless given a serializer, and
    // have no `decode_responses`: `.decode()` on what they return is what they ask for.
    let imports = |word: &str| {
        cx.facts.is_some_and(|f| {
            f.imports
                .iter()
                .any(|i| syntax::contains_lowercase(&i.target, word))
        })
    };
    if imports("mcache") && !imports("redis") {
        return;
    }
    for &call in idx.all(kinds::CALL) {
        if syntax::callee_name(call, src) != "decode" {
            continue;
        }
        let Some(recv) = syntax::receiver(call).map(unwrap_parens) else {
            continue;
        };
        let read = match recv.kind() {
            kinds::IDENTIFIER => read_into(cx, call, syntax::text(recv, src)),
            _ => raw_read(cx, super::strip_await(recv)),
        };
        let Some(read) = read else {
            continue;
        };
        // The repository may show how the client is built: `bytes` by default (the decode is
        // right), `str` with `decode_responses=True` (it always fails).
        let client = super::client_site(cx, read);
        if client.as_ref().is_some_and(|c| c.decodes == Some(false))
            || client.is_none() && super::file_builds_bytes_clients(cx)
        {
            continue;
        }
        let decodes = client.filter(|c| c.decodes == Some(true));
        let expr = call
            .field("function")
            .map_or_else(String::new, |f| syntax::normalized(f, src));
        let function = super::function_facts(cx, call);
        let on_path = super::on_money_path(cx, function)
            || function.is_some_and(|f| super::reaches_http(cx, f));
        let read_line = syntax::lines(read).0.to_string();
        let finding = cx
            .report(&RULE, call)
            .arg("expr", expr)
            .arg("read_line", read_line);
        if let Some(site) = &decodes {
            finding
                .arg("client", site.name.clone())
                .arg("client_at", format!("{}:{}", site.path, site.line))
                .note("decoded")
                .evidence(&site.path, site.line, "evidence_client", Vec::new());
        }
        if on_path {
            finding.note("retry");
            if decodes.is_some() {
                finding.severity(Severity::Blocker);
            }
        } else if decodes.is_none() {
            // A certain `AttributeError` is worth a comment even off the money path.
            finding.severity(Severity::Nit);
        }
        let (first, last) = syntax::lines(call);
        if on_path && cx.side == crate::source::Side::New && cx.touches_added(first, last) {
            super::ask_cache_config(cx, read);
        }
    }
}

fn unwrap_parens(node: Node<'_>) -> Node<'_> {
    if node.kind() == kinds::PARENTHESIZED_EXPRESSION {
        node.named_child(0).unwrap_or(node)
    } else {
        node
    }
}

/// A read of a raw (non-Django) cache: its result's type follows the client's configuration.
fn raw_read<'t>(cx: &Ctx<'_>, node: Node<'t>) -> Option<Node<'t>> {
    if node.kind() != kinds::CALL {
        return None;
    }
    let call = super::cache_call(node, cx)?;
    (matches!(call.op, Op::Read) && !call.django && call.method.contains("get")).then_some(node)
}

/// The cache read last assigned to `name` before `at` in the same function, unless the
/// function checks the value's type (`isinstance(name, bytes)`).
fn read_into<'t>(cx: &Ctx<'t>, at: Node<'_>, name: &str) -> Option<Node<'t>> {
    let (idx, src) = (cx.index()?, cx.src());
    let func = idx.enclosing(at, kinds::FUNCTION_DEFINITION);
    let scope_calls = match func {
        Some(f) => idx.within(f, kinds::CALL),
        None => idx.all(kinds::CALL),
    };
    let guarded = scope_calls.iter().any(|c| {
        syntax::callee(*c, src) == "isinstance"
            && syntax::positional_args(*c)
                .first()
                .is_some_and(|a| syntax::text(*a, src) == name)
    });
    if guarded {
        return None;
    }
    let right = idx.assigned_before(func, name, at.start_byte(), src)?;
    raw_read(cx, super::strip_await(right))
}
