//! Small questions about Python syntax nodes, shared by the rules.
//!
//! Each helper reads one node and its near children; none walks a whole tree (that is
//! `NodeIndex`'s job). Names follow Python, not tree-sitter.

use tree_sitter::Node;

use super::{Fields, kinds};

/// The source text of `node`; empty when the range is not inside `src` (never panics).
pub fn text<'s>(node: Node<'_>, src: &'s str) -> &'s str {
    src.get(node.byte_range()).unwrap_or("")
}

/// 1-based first and last line of `node`.
pub fn lines(node: Node<'_>) -> (u32, u32) {
    let start = node.start_position().row;
    let mut end = node.end_position().row;
    // A block that ends at column 0 ends on the line before (its newline belongs to it).
    if node.end_position().column == 0 && end > start {
        end -= 1;
    }
    (to_line(start), to_line(end))
}

fn to_line(row: usize) -> u32 {
    u32::try_from(row).unwrap_or(u32::MAX - 1).saturating_add(1)
}

/// Text with runs of white space folded to one space and comments kept: a stable key for
/// comparing a construct across the old and new version of a file.
pub fn normalized(node: Node<'_>, src: &str) -> String {
    text(node, src)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn function_name<'s>(func: Node<'_>, src: &'s str) -> &'s str {
    func.field("name").map(|n| text(n, src)).unwrap_or("")
}

pub fn is_async(func: Node<'_>) -> bool {
    func.child(0).is_some_and(|c| c.kind() == "async")
}

/// The callee expression of a call: `httpx.post`, `self.cache.get`, `create_charge`.
pub fn callee<'s>(call: Node<'_>, src: &'s str) -> &'s str {
    call.field("function").map(|n| text(n, src)).unwrap_or("")
}

/// The last name of the callee: `post` for `httpx.post(...)`, `f` for `f(...)`.
///
/// Rules with the file's `NodeIndex` at hand ask it instead (`NodeIndex::callee_name`): it read
/// every call's callee once, and each reading costs a few tree lookups.
pub fn callee_name<'s>(call: Node<'_>, src: &'s str) -> &'s str {
    src.get(callee_parts(call).name).unwrap_or("")
}

/// The byte ranges of a call's parts, as one read of the tree finds them.
pub(crate) struct CalleeParts {
    /// `callee` (empty for "").
    pub callee: std::ops::Range<usize>,
    /// `callee_name` (empty for "").
    pub name: std::ops::Range<usize>,
    /// `receiver`, when the callee is an attribute.
    pub receiver: Option<std::ops::Range<usize>>,
}

impl CalleeParts {
    pub fn text<'s>(&self, src: &'s str) -> CallText<'s> {
        let at = |range: &std::ops::Range<usize>| src.get(range.clone()).unwrap_or("");
        CallText {
            callee: at(&self.callee),
            name: at(&self.name),
            receiver: self.receiver.as_ref().map(at),
        }
    }
}

/// Whether `inner` lies within `outer`'s bytes (itself included).
pub fn contains(outer: Node<'_>, inner: Node<'_>) -> bool {
    outer.start_byte() <= inner.start_byte() && inner.end_byte() <= outer.end_byte()
}

/// A call's `callee`, `callee_name` and `receiver`, as text.
#[derive(Clone, Copy)]
pub struct CallText<'s> {
    pub callee: &'s str,
    pub name: &'s str,
    pub receiver: Option<&'s str>,
}

/// A call's parts as text, in one read of the tree (`NodeIndex::call_text` reads none).
pub fn call_text<'s>(call: Node<'_>, src: &'s str) -> CallText<'s> {
    callee_parts(call).text(src)
}

pub(crate) fn callee_parts(call: Node<'_>) -> CalleeParts {
    let Some(function) = call.field("function") else {
        return CalleeParts {
            callee: 0..0,
            name: 0..0,
            receiver: None,
        };
    };
    let (name, receiver) = match function.kind() {
        kinds::ATTRIBUTE => (
            function.field("attribute").map(|n| n.byte_range()),
            function.field("object").map(|n| n.byte_range()),
        ),
        kinds::IDENTIFIER => (Some(function.byte_range()), None),
        _ => (None, None),
    };
    CalleeParts {
        callee: function.byte_range(),
        name: name.unwrap_or(0..0),
        receiver,
    }
}

/// Whether a callee's last name is a sleep: `sleep`, or a function a class keeps for it
/// (`self._sleep`, `self.backoff_sleep`: `asyncio.sleep` by default, a fake in tests), or a
/// library's async twin of it (`sleep_async`).
pub fn names_sleep(name: &str) -> bool {
    let name = name.trim_start_matches('_');
    name == "sleep"
        || name == "sleep_async"
        || name.ends_with("_sleep")
        // The same in the languages payment teams name their code in: `slaap`, `schlafen`,
        // `dormir`, `dormire`.
        // Asked of every callee: the last letter first.
        || matches!(name.as_bytes().last(), Some(b'p' | b'n' | b'r' | b'e'))
            && FOREIGN_SLEEPS
                .iter()
                .any(|w| name == *w || name.strip_suffix(w).is_some_and(|h| h.ends_with('_')))
}

const FOREIGN_SLEEPS: &[&str] = &["slaap", "slapen", "schlafen", "dormir", "dormire"];

/// Whether a name (a path, a function's, a class's) is of code that takes a provider's
/// notifications: `webhooks.py`, `handle_notification`, `AdyenNotificationView`, `paypal_ipn`.
pub fn names_a_notification(name: &str) -> bool {
    name_words(name).iter().any(|w| {
        matches!(
            w.as_str(),
            "webhook"
                | "webhooks"
                | "notification"
                | "notifications"
                | "notify"
                | "ipn"
                | "callback"
                | "callbacks"
        )
    })
}

/// The object a method is called on: `redis_client` in `redis_client.get(k)`.
pub fn receiver(call: Node<'_>) -> Option<Node<'_>> {
    let function = call.field("function")?;
    (function.kind() == kinds::ATTRIBUTE)
        .then(|| function.field("object"))
        .flatten()
}

/// Positional arguments, in order (splats included as they are).
pub fn positional_args(call: Node<'_>) -> Vec<Node<'_>> {
    let Some(args) = call.field("arguments") else {
        return Vec::new();
    };
    let mut children = super::named_children(args);
    children.retain(|n| n.kind() != kinds::KEYWORD_ARGUMENT && n.kind() != kinds::COMMENT);
    children
}

/// A plain string literal's text without its quotes (`"amount"` gives `amount`); `None` for
/// anything else.
pub fn string_value<'s>(node: Node<'_>, src: &'s str) -> Option<&'s str> {
    (node.kind() == kinds::STRING).then(|| text(node, src).trim_matches(|c| c == '"' || c == '\''))
}

/// The value of keyword argument `name=` of a call.
pub fn keyword_arg<'t>(call: Node<'t>, name: &str, src: &str) -> Option<Node<'t>> {
    keyword_args(call, src)
        .into_iter()
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// `(name, value)` of each keyword argument of a call.
pub fn keyword_args<'t, 's>(call: Node<'t>, src: &'s str) -> Vec<(&'s str, Node<'t>)> {
    let Some(args) = call.field("arguments") else {
        return Vec::new();
    };
    super::named_children(args)
        .into_iter()
        .filter(|n| n.kind() == kinds::KEYWORD_ARGUMENT)
        .filter_map(|kw| {
            let name = kw.field("name")?;
            let value = kw.field("value")?;
            Some((text(name, src), value))
        })
        .collect()
}

/// Whether the call passes `**kwargs`: any keyword may hide in it.
pub fn has_dict_splat(call: Node<'_>) -> bool {
    let Some(args) = call.field("arguments") else {
        return false;
    };
    super::named_children(args)
        .iter()
        .any(|n| n.kind() == kinds::DICTIONARY_SPLAT)
}

/// The exception types an `except` clause names (`except (A, B) as e` gives A and B); empty for
/// a bare `except:`.
pub fn except_types(clause: Node<'_>) -> Vec<Node<'_>> {
    let Some(mut value) = clause.field("value") else {
        return Vec::new();
    };
    if value.kind() == kinds::AS_PATTERN {
        match value.named_child(0) {
            Some(inner) => value = inner,
            None => return Vec::new(),
        }
    }
    if value.kind() == kinds::PARENTHESIZED_EXPRESSION
        && let Some(inner) = value.named_child(0)
    {
        value = inner;
    }
    if value.kind() == kinds::TUPLE {
        let mut children = super::named_children(value);
        children.retain(|n| n.kind() != kinds::COMMENT);
        return children;
    }
    vec![value]
}

/// The name bound by `except ... as name`.
pub fn except_alias<'s>(clause: Node<'_>, src: &'s str) -> Option<&'s str> {
    let value = clause.field("value")?;
    if value.kind() != kinds::AS_PATTERN {
        return None;
    }
    let target = value.field("alias")?;
    Some(text(target, src).trim())
}

/// The `try` statement an `except` clause belongs to.
pub fn try_of(clause: Node<'_>) -> Option<Node<'_>> {
    clause.parent().filter(|t| t.kind() == kinds::TRY_STATEMENT)
}

/// The body of the `try` an `except` clause belongs to: what the clause guards.
pub fn tried_body(clause: Node<'_>) -> Option<Node<'_>> {
    try_of(clause)?.field("body")
}

/// The body block of an `except` clause.
pub fn except_body(clause: Node<'_>) -> Option<Node<'_>> {
    super::named_children(clause)
        .into_iter()
        .find(|n| n.kind() == kinds::BLOCK)
}

/// Whether an `except` clause catches (nearly) everything: bare, `Exception`, `BaseException`.
pub fn is_broad_except(clause: Node<'_>, src: &str) -> bool {
    if clause.kind() != kinds::EXCEPT_CLAUSE {
        return false;
    }
    let types = except_types(clause);
    types.is_empty()
        || types.iter().any(|t| {
            let name = text(*t, src);
            let last = name.rsplit('.').next().unwrap_or(name);
            last == "Exception" || last == "BaseException"
        })
}

/// The decorators of a `decorated_definition` (none for any other node), in order.
pub fn decorators(decorated: Node<'_>) -> Vec<Node<'_>> {
    if decorated.kind() != kinds::DECORATED_DEFINITION {
        return Vec::new();
    }
    let mut children = super::named_children(decorated);
    children.retain(|n| n.kind() == kinds::DECORATOR);
    children
}

/// The named nodes of `kinds` under `node` (itself included), in document order: for what the
/// shared index does not keep (strings, keywords, subscripts, what an f-string interpolates),
/// asked of a node a rule has already chosen (a condition, a key's value, a function).
pub fn descendants<'t>(node: Node<'t>, kinds: &[&str]) -> Vec<Node<'t>> {
    let mut out = Vec::new();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if kinds.contains(&n.kind()) {
            out.push(n);
        }
        let mut children = super::named_children(n);
        children.reverse();
        stack.extend(children);
    }
    out
}

/// The `elif` clauses of an `if` statement, in order (they are its children, not nodes of
/// their own in the shared index).
pub fn elif_clauses(if_statement: Node<'_>) -> Vec<Node<'_>> {
    super::named_children(if_statement)
        .into_iter()
        .filter(|c| c.kind() == kinds::ELIF_CLAUSE)
        .collect()
}

/// The named statements of a block, comments left out.
pub fn statements(block: Node<'_>) -> Vec<Node<'_>> {
    let mut children = super::named_children(block);
    children.retain(|n| n.kind() != kinds::COMMENT);
    children
}

/// Whether control can leave `block` by its end: its last statement does not return, raise,
/// continue or break (or call `sys.exit`), nor is it an `if` whose every branch does, a `with`
/// whose body does (one that may swallow the error, `suppress(...)`, aside), or a `try` whose
/// body and handlers all do. Other compound statements are assumed to complete.
pub fn block_falls_through(block: Node<'_>, src: &str) -> bool {
    block_falls_through_unless(block, src, &mut |_| false)
}

/// Like `block_falls_through`, where a statement that is a call (`fail(...)`, `await
/// self.abort(...)`) ends its path when `ends` says the call never returns: a helper that
/// always raises, which only the caller's view of the change can tell.
pub fn block_falls_through_unless(
    block: Node<'_>,
    src: &str,
    ends: &mut dyn FnMut(TailCall<'_>) -> bool,
) -> bool {
    statements(block)
        .last()
        .is_none_or(|last| falls_through(*last, src, ends))
}

/// A statement that is only a call, as `block_falls_through_unless` asks about it.
#[derive(Clone, Copy)]
pub struct TailCall<'t> {
    pub call: Node<'t>,
    /// `await fail(...)`: an `async def` that raises only raises when awaited.
    pub awaited: bool,
}

/// The call a statement consists of, awaited or not.
pub fn tail_call(stmt: Node<'_>) -> Option<TailCall<'_>> {
    if stmt.kind() != kinds::EXPRESSION_STATEMENT || stmt.named_child_count() != 1 {
        return None;
    }
    let expr = stmt.named_child(0)?;
    match expr.kind() {
        kinds::CALL => Some(TailCall {
            call: expr,
            awaited: false,
        }),
        kinds::AWAIT => expr
            .named_child(0)
            .filter(|c| c.kind() == kinds::CALL)
            .map(|call| TailCall {
                call,
                awaited: true,
            }),
        _ => None,
    }
}

/// The process ends here: what any Python reader knows never returns.
fn exits(call: Node<'_>, src: &str) -> bool {
    matches!(
        callee(call, src),
        "sys.exit" | "os._exit" | "pytest.fail" | "pytest.skip" | "pytest.exit"
    )
}

/// The block of a clause (`else:`, `finally:`) falls through.
fn clause_falls_through(
    clause: Node<'_>,
    src: &str,
    ends: &mut dyn FnMut(TailCall<'_>) -> bool,
) -> bool {
    super::named_children(clause)
        .into_iter()
        .rfind(|c| c.kind() == kinds::BLOCK)
        .is_none_or(|b| block_falls_through_unless(b, src, ends))
}

fn falls_through(stmt: Node<'_>, src: &str, ends: &mut dyn FnMut(TailCall<'_>) -> bool) -> bool {
    let block = |node: Option<Node<'_>>, ends: &mut dyn FnMut(TailCall<'_>) -> bool| {
        node.is_none_or(|b| block_falls_through_unless(b, src, ends))
    };
    match stmt.kind() {
        kinds::RETURN_STATEMENT
        | kinds::RAISE_STATEMENT
        | kinds::CONTINUE_STATEMENT
        | kinds::BREAK_STATEMENT => false,
        kinds::EXPRESSION_STATEMENT => {
            tail_call(stmt).is_none_or(|tail| !(exits(tail.call, src) || ends(tail)))
        }
        kinds::IF_STATEMENT => {
            let mut cursor = stmt.walk();
            let branches: Vec<Node<'_>> = stmt
                .children_by_field_name("alternative", &mut cursor)
                .collect();
            let has_else = branches.iter().any(|b| b.kind() == kinds::ELSE_CLAUSE);
            if !has_else {
                return true;
            }
            // Every branch is asked, so that `ends` hears of every call that ends one.
            let mut any = block(stmt.child_by_field_name("consequence"), ends);
            for b in &branches {
                let body = match b.kind() {
                    kinds::ELSE_CLAUSE => b.child_by_field_name("body"),
                    _ => b.child_by_field_name("consequence"),
                };
                any |= block(body, ends);
            }
            any
        }
        kinds::WITH_STATEMENT => {
            let suppresses = super::named_children(stmt)
                .iter()
                .filter(|c| c.kind() != kinds::BLOCK)
                .any(|c| text(*c, src).contains("suppress"));
            suppresses || block(stmt.child_by_field_name("body"), ends)
        }
        kinds::TRY_STATEMENT => {
            let parts = super::named_children(stmt);
            let part = |kind: &str| parts.iter().find(|p| p.kind() == kind).copied();
            // A `finally:` ending in a call (`self._release(id)`) hands the path back to the
            // `try`'s own `return` or `raise`: only a `return`, a `raise` or an exit of its own
            // ends it there.
            if part(kinds::FINALLY_CLAUSE)
                .is_some_and(|f| !clause_falls_through(f, src, &mut |_| false))
            {
                return false;
            }
            let mut any = block(stmt.child_by_field_name("body"), ends)
                && part(kinds::ELSE_CLAUSE).is_none_or(|e| clause_falls_through(e, src, ends));
            for c in parts.iter().filter(|p| p.kind() == kinds::EXCEPT_CLAUSE) {
                any |= except_body(*c).is_none_or(|b| block_falls_through_unless(b, src, ends));
            }
            any
        }
        kinds::FOR_STATEMENT | kinds::WHILE_STATEMENT => loop_falls_through(stmt, src, ends),
        _ => true,
    }
}

/// A loop ends its path when nothing `break`s out of it and it cannot run out: a `while True:`,
/// a loop whose `else:` does not fall through, or a `for` over a `range(...)` that raises on
/// its last round (`if attempt == MAX_ATTEMPTS: raise`), the shape of a retry that gives up by
/// raising.
fn loop_falls_through(lp: Node<'_>, src: &str, ends: &mut dyn FnMut(TailCall<'_>) -> bool) -> bool {
    let Some(body) = lp.child_by_field_name("body") else {
        return true;
    };
    let mut breaks = false;
    let mut last_round_raises = false;
    let target = lp
        .child_by_field_name("left")
        .filter(|t| t.kind() == kinds::IDENTIFIER)
        .map(|t| text(t, src));
    let over_range = lp.kind() == kinds::FOR_STATEMENT
        && lp
            .child_by_field_name("right")
            .is_some_and(|r| text(r, src).starts_with("range("));
    let forever = lp.kind() == kinds::WHILE_STATEMENT
        && lp
            .child_by_field_name("condition")
            .is_some_and(|c| matches!(text(c, src), "True" | "1"));
    let alternative = lp.child_by_field_name("alternative");
    // Most loops can run out whatever their body does: their body is not read.
    if !(over_range || forever || alternative.is_some()) {
        return true;
    }
    // The loop's own statements, not those of loops or functions inside it.
    let mut pending = vec![body];
    while let Some(node) = pending.pop() {
        match node.kind() {
            kinds::BREAK_STATEMENT => breaks = true,
            kinds::FOR_STATEMENT
            | kinds::WHILE_STATEMENT
            | kinds::FUNCTION_DEFINITION
            | kinds::CLASS_DEFINITION
            | kinds::LAMBDA => continue,
            kinds::IF_STATEMENT if over_range && !last_round_raises => {
                let on_last_round = node.child_by_field_name("condition").is_some_and(|c| {
                    let cond = text(c, src);
                    (cond.contains("==") || cond.contains(">="))
                        && target.is_some_and(|t| {
                            cond.split(|c: char| !c.is_alphanumeric() && c != '_')
                                .any(|w| w == t)
                        })
                });
                last_round_raises = on_last_round
                    && node
                        .child_by_field_name("consequence")
                        .is_some_and(|b| !block_falls_through_unless(b, src, ends));
            }
            _ => {}
        }
        pending.extend(super::named_children(node));
    }
    if breaks {
        return true;
    }
    let else_ends = alternative.is_some_and(|e| !clause_falls_through(e, src, ends));
    !(forever || else_ends || last_round_raises)
}

/// A call that ends a path of a function's body (`tail_calls`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tail {
    /// The callee's last name (`fail` for `self.fail(...)`).
    pub name: String,
    pub awaited: bool,
}

/// The calls that end the paths of a function's body that do not raise, when every other
/// path raises: `Some([])` for a body that always raises, `Some([fail])` for one that ends by
/// calling `fail(...)` (it never returns if `fail` never does), `None` when a path can end
/// otherwise. The body's own `return`s are the caller's to rule out.
pub fn tail_calls(body: Node<'_>, src: &str) -> Option<Vec<Tail>> {
    let mut tails: Vec<Tail> = Vec::new();
    let falls = block_falls_through_unless(body, src, &mut |tail| {
        let name = callee_name(tail.call, src);
        if name.is_empty() {
            return false;
        }
        let tail = Tail {
            name: name.to_string(),
            awaited: tail.awaited,
        };
        if !tails.contains(&tail) {
            tails.push(tail);
        }
        true
    });
    (!falls).then_some(tails)
}

/// The value of a `return` statement; `None` for a bare `return`.
pub fn return_value(ret: Node<'_>) -> Option<Node<'_>> {
    ret.named_child(0).filter(|n| n.kind() != kinds::COMMENT)
}

/// Whether a `return` gives `None` (bare `return` or `return None`).
pub fn returns_none(ret: Node<'_>) -> bool {
    return_value(ret).is_none_or(|v| v.kind() == kinds::NONE)
}

/// The function's return annotation text, if any.
pub fn return_annotation<'s>(func: Node<'_>, src: &'s str) -> Option<&'s str> {
    func.field("return_type").map(|n| text(n, src))
}

/// Whether an annotation admits `None`: `None`, `Optional[...]`, `X | None`, `Any`, `object`.
pub fn annotation_allows_none(annotation: &str) -> bool {
    let compact: String = annotation.chars().filter(|c| !c.is_whitespace()).collect();
    compact == "None"
        || compact.contains("Optional[")
        || compact.contains("|None")
        || compact.contains("None|")
        || compact.contains("Union[") && compact.contains("None")
        || matches!(compact.as_str(), "Any" | "typing.Any" | "object")
}

/// The `def` or `class` line's nearest ancestor of a kind, walking parents (bounded by depth).
pub fn ancestor<'t>(node: Node<'t>, kind: &str) -> Option<Node<'t>> {
    let mut current = node.parent();
    while let Some(n) = current {
        if n.kind() == kind {
            return Some(n);
        }
        current = n.parent();
    }
    None
}

/// The parameter `name` of `func` that has a default (`timeout: float = 15.0`).
pub fn defaulted_parameter<'t>(func: Node<'t>, name: &str, src: &str) -> Option<Node<'t>> {
    let params = func.field("parameters")?;
    super::named_children(params).into_iter().find(|p| {
        matches!(
            p.kind(),
            kinds::DEFAULT_PARAMETER | kinds::TYPED_DEFAULT_PARAMETER
        ) && p.field("name").is_some_and(|n| text(n, src) == name)
    })
}

/// The names of a function's keyword-only parameters (`*, attempt: int`, or after `*args`).
pub fn keyword_only_parameters<'s>(func: Node<'_>, src: &'s str) -> Vec<&'s str> {
    let Some(params) = func.field("parameters") else {
        return Vec::new();
    };
    crate::python::named_children(params)
        .into_iter()
        .skip_while(|p| {
            !matches!(
                p.kind(),
                kinds::KEYWORD_SEPARATOR | kinds::LIST_SPLAT_PATTERN
            )
        })
        .skip(1)
        .map(|p| parameter_name(p, src))
        .filter(|n| !n.is_empty())
        .collect()
}

/// A parameter's name: `kv` in `kv`, `kv: Redis`, `kv=None` or `kv: Redis = None`; `args` in
/// `*args`.
pub fn parameter_name<'s>(param: Node<'_>, src: &'s str) -> &'s str {
    let text = text(param, src);
    let name = text.split([':', '=']).next().unwrap_or("");
    name.trim().trim_start_matches('*').trim()
}

/// The annotated parameters of a `parameters` node, each with its annotation: `kv` and
/// `redis.Redis` for `kv: redis.Redis = None`.
pub fn annotated_parameters<'t, 's>(params: Node<'t>, src: &'s str) -> Vec<(&'s str, Node<'t>)> {
    super::named_children(params)
        .into_iter()
        .filter(|p| {
            matches!(
                p.kind(),
                kinds::TYPED_PARAMETER | kinds::TYPED_DEFAULT_PARAMETER
            )
        })
        .filter_map(|p| Some((parameter_name(p, src), p.field("type")?)))
        .collect()
}

/// `x` in `x = call(...)` or `x = await call(...)`.
pub fn bound_name<'s>(call: Node<'_>, src: &'s str) -> Option<&'s str> {
    let mut value = call;
    if let Some(parent) = value.parent()
        && parent.kind() == kinds::AWAIT
    {
        value = parent;
    }
    let assignment = value.parent().filter(|p| p.kind() == kinds::ASSIGNMENT)?;
    if assignment.field("right")?.id() != value.id() {
        return None;
    }
    let left = assignment.field("left")?;
    (left.kind() == kinds::IDENTIFIER).then(|| text(left, src))
}

/// The imported name and the local name it is bound to: `(x.y, z)` for `x.y as z`, the name
/// twice without an alias.
pub fn aliased_import<'s>(name: Node<'_>, src: &'s str) -> (&'s str, &'s str) {
    if name.kind() == kinds::ALIASED_IMPORT {
        let target = name.field("name").map(|n| text(n, src)).unwrap_or("");
        let local = name.field("alias").map(|n| text(n, src)).unwrap_or(target);
        (target, local)
    } else {
        let text = text(name, src);
        (text, text)
    }
}

/// Whether `hay`, lowercased (ASCII), contains `needle`, itself lowercase: what
/// `hay.to_ascii_lowercase().contains(needle)` says, without the copy (which facts made for
/// every function and many calls of a file).
pub fn contains_lowercase(hay: &str, needle: &str) -> bool {
    let (hay, needle) = (hay.as_bytes(), needle.as_bytes());
    debug_assert!(!needle.iter().any(u8::is_ascii_uppercase));
    let Some((&first, rest)) = needle.split_first() else {
        return true;
    };
    memchr::memchr2_iter(first, first.to_ascii_uppercase(), hay).any(|at| {
        hay.get(at + 1..at + needle.len()).is_some_and(|w| {
            w.iter()
                .zip(rest)
                .all(|(h, n)| h.to_ascii_lowercase() == *n)
        })
    })
}

/// Whether `word` stands in `text` as a word of its own (`responses`, not `decode_responses`;
/// `refund` in `str(refund.id)`).
pub fn has_word(text: &str, word: &str) -> bool {
    !word.is_empty()
        && text
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| w == word)
}

/// Whether code writes `field`: `retry_count=attempt` as a keyword, `x.retry_count = ...`,
/// `x.refunded_minor += amount`, `SET refunded_minor = refunded_minor + %s`.
pub fn writes_field(code: &str, field: &str) -> bool {
    code.match_indices(field).any(|(at, _)| {
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        let rest = &code[at + field.len()..];
        let after = rest.trim_start();
        !word(code[..at].chars().next_back())
            && !word(rest.chars().next())
            && (after.starts_with("+=")
                || after.starts_with("-=")
                || after.starts_with('=') && !after.starts_with("=="))
    })
}

/// The words of names, `RefundClaims`, `PaygateNotificationView` and `refund_claims` alike,
/// lowercase.
pub fn name_words(text: &str) -> Vec<String> {
    let mut spaced = String::with_capacity(text.len() + 8);
    let mut previous_lower = false;
    let mut previous_upper = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        // `PayUUnavailable`, `HTTPError`: an acronym ends where a capitalised word starts.
        let next_lower = chars.peek().is_some_and(char::is_ascii_lowercase);
        if c.is_ascii_uppercase() && (previous_lower || previous_upper && next_lower) {
            spaced.push(' ');
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        previous_upper = c.is_ascii_uppercase();
        spaced.push(c);
    }
    spaced
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// A function named for reading (`get_payment`, `MollieClient.fetch_status`, `list_refunds`).
/// In the languages payment code is written in too: `obtener_pago`, `haal_betaling_op`,
/// `hamta_order`, and German's verb last, `bestellung_abfragen`.
pub fn named_for_a_read(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    let words = name_words(last);
    matches!(
        words.first().map(String::as_str),
        Some(
            "get"
                | "fetch"
                | "retrieve"
                | "list"
                | "find"
                | "lookup"
                | "load"
                | "read"
                | "search"
                | "poll"
                | "query"
                | "obtener"
                | "obter"
                | "consultar"
                | "buscar"
                | "listar"
                | "recuperar"
                | "haal"
                | "ophalen"
                | "hamta"
                | "recuperer"
                | "lister"
                | "chercher"
                | "ottieni"
                | "leggi"
                | "recupera"
                | "pobierz"
        )
    ) || words.len() > 1
        && matches!(
            words.last().map(String::as_str),
            Some("abfragen" | "abrufen" | "holen" | "laden" | "lesen" | "suchen")
        )
}

/// The operands of a chain of one boolean operator (`a or b or c` for `"or"`), parentheses
/// dropped; the node itself when it is no such chain.
pub fn operands<'t>(node: Node<'t>, operator: &str) -> Vec<Node<'t>> {
    let mut node = node;
    while node.kind() == kinds::PARENTHESIZED_EXPRESSION {
        match node.named_child(0) {
            Some(inner) => node = inner,
            None => break,
        }
    }
    let op = node.field("operator").map(|o| o.kind());
    match (node.field("left"), node.field("right")) {
        (Some(l), Some(r)) if node.kind() == kinds::BOOLEAN_OPERATOR && op == Some(operator) => {
            let mut out = operands(l, operator);
            out.extend(operands(r, operator));
            out
        }
        _ => vec![node],
    }
}

/// Whether code names a lock of the application's own by its words (`locks.hold(...)`,
/// `self._order_lock(order_id)`, `payment_mutex`): what a `with` takes to keep runs apart.
pub fn names_a_lock(text: &str) -> bool {
    name_words(text)
        .iter()
        .any(|w| matches!(w.as_str(), "lock" | "locks" | "locked" | "mutex" | "hold"))
}

/// Whether a `with` clause or a decorator opens a database transaction: Django's
/// `transaction.atomic`, SQLAlchemy's `session.begin()` and `begin_nested()`, asyncpg's and
/// the code's own `conn.transaction()`.
pub fn opens_a_transaction(text: &str) -> bool {
    text.contains("atomic")
        || text.contains(".begin(")
        || text.contains("begin_nested(")
        || text.contains(".transaction(")
}

/// What a `with` statement opens, as written (`pytest.raises(PaymentError)`,
/// `transaction.atomic()`); empty when the tree holds no clause.
pub fn with_clause<'s>(with: Node<'_>, src: &'s str) -> &'s str {
    crate::python::named_children(with)
        .into_iter()
        .find(|c| c.kind() == "with_clause")
        .map_or("", |c| text(c, src))
}

/// The function a call hands to a thread or an executor to run (`apply_event` of
/// `run_in_threadpool(apply_event, ...)`, `asyncio.to_thread(f, ...)`, `loop.run_in_executor(None,
/// f, ...)`, `sync_to_async(f)`), as written: what the code really calls there.
pub fn handed_callee<'s>(call: Node<'_>, src: &'s str) -> Option<&'s str> {
    handed_function(call, src).map(|f| text(f, src))
}

/// `handed_callee`'s node: the name or attribute handed to a runner (`runs_argument`).
pub fn handed_function<'t>(call: Node<'t>, src: &str) -> Option<Node<'t>> {
    let at = runs_argument(callee_name(call, src))?;
    let arg = *positional_args(call).get(at)?;
    matches!(arg.kind(), kinds::IDENTIFIER | kinds::ATTRIBUTE).then_some(arg)
}

/// The words that name an idempotency key in code: every provider's `Idempotency-Key`
/// (`Cko-Idempotency-Key`, `idempotency_key=`), and PayPal's `PayPal-Request-Id`.
pub const IDEMPOTENCY_WORDS: [&str; 5] = [
    "idempot",
    "paypal-request-id",
    "paypal_request_id",
    // Wise's transfers are deduplicated on it.
    "customertransactionid",
    "customer_transaction_id",
];

/// Where a call that runs a function handed to it takes that function: `run_in_threadpool(
/// processor.sale, token, amount)`, `asyncio.to_thread(f, ...)` and a project's own
/// `run_async(f, ...)` at 0, `loop.run_in_executor(None, f, ...)` at 1. Its arguments after it
/// are the function's.
pub fn runs_argument(name: &str) -> Option<usize> {
    match name {
        "run_async" | "run_sync" | "run_in_threadpool" | "to_thread" | "sync_to_async"
        | "async_to_sync" | "run_blocking" | "run_in_worker" | "run_in_thread" => Some(0),
        "run_in_executor" => Some(1),
        // A project's own runner named for the thread it runs in: `self._in_thread(f, ...)`,
        // `_to_threadpool(f, ...)`.
        _ => {
            let name = name.trim_start_matches('_');
            (name.starts_with("in_thread") || name.starts_with("to_thread")).then_some(0)
        }
    }
}

/// Whether code (not its comments) names an idempotency key (`IDEMPOTENCY_WORDS`).
pub fn code_names_idempotency(code: &str) -> bool {
    IDEMPOTENCY_WORDS.iter().any(|w| {
        code_contains_lowercase(code, w) && (*w != "idempot" || names_more_than_a_property(code))
    }) || names_a_brand_request_id(code)
}

/// Whether `idempot...` in code names more than the property of a request: not only
/// `idempotent=False` handed to a sender, `is_idempotent(method)`, `IDEMPOTENT_METHODS`, which
/// say whether a request may be sent again and carry no key. `idempotent_key` is a key.
fn names_more_than_a_property(code: &str) -> bool {
    let lower = code.to_ascii_lowercase();
    lower.match_indices("idempot").any(|(at, _)| {
        let rest = &lower[at + "idempot".len()..];
        let Some(after) = rest.strip_prefix("ent") else {
            return true;
        };
        // The noun in other languages: `idempotentiesleutel`, `Idempotenzschluessel`,
        // `clave_idempotencia`, `chiave_idempotenza`.
        // And Russian, transliterated: `klyuch_idempotentnosti`.
        if ["ie", "z", "cia", "za", "nost"]
            .iter()
            .any(|n| after.starts_with(n))
        {
            return true;
        }
        let after = after.trim_start_matches(['_', '-']);
        ["key", "id", "token"].iter().any(|k| after.starts_with(k)) || after.starts_with("ly")
    })
}

/// A provider's own request-id header, which it deduplicates requests on, as PayPal does
/// (`"PayFlow-Request-Id"`, `'Pelican-Request-Id'`): one word, a brand's, before `-Request-Id`,
/// at the start of a string. Not a tracing header (`X-Request-Id`, `X-Client-Request-Id`).
fn names_a_brand_request_id(code: &str) -> bool {
    static HEADERS: std::sync::LazyLock<[memchr::memmem::Finder<'static>; 3]> =
        std::sync::LazyLock::new(|| {
            ["-Request-Id", "-request-id", "-REQUEST-ID"].map(memchr::memmem::Finder::new)
        });
    let bytes = code.as_bytes();
    HEADERS.iter().any(|finder| {
        finder.find_iter(bytes).any(|at| {
            let start = bytes[..at]
                .iter()
                .rposition(|b| !b.is_ascii_alphanumeric())
                .map_or(0, |p| p + 1);
            let brand = &bytes[start..at];
            brand.len() >= 2
                && !brand.eq_ignore_ascii_case(b"x")
                && start > 0
                && matches!(bytes[start - 1], b'"' | b'\'')
        })
    })
}

/// `contains_lowercase` on code, not on its comments: a line's text from a `#` that no quote
/// before it opens is left out (`# writes are retried by callers that own an idempotency key`
/// says nothing of what the function sends).
pub fn code_contains_lowercase(code: &str, needle: &str) -> bool {
    contains_lowercase(code, needle)
        && code.lines().any(|line| {
            let mut quote: Option<char> = None;
            let mut end = line.len();
            for (i, c) in line.char_indices() {
                match (quote, c) {
                    (Some(q), c) if c == q => quote = None,
                    (None, '"' | '\'') => quote = Some(c),
                    (None, '#') => {
                        end = i;
                        break;
                    }
                    _ => {}
                }
            }
            contains_lowercase(&line[..end], needle)
        })
}

/// Whether `text.to_ascii_lowercase() == lower`, without the copy.
pub fn eq_lowercase(text: &str, lower: &str) -> bool {
    text.len() == lower.len()
        && text
            .bytes()
            .zip(lower.bytes())
            .all(|(t, l)| t.to_ascii_lowercase() == l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::ParsedFile;

    fn with_file<R>(src: &str, f: impl FnOnce(&ParsedFile) -> R) -> R {
        let file = ParsedFile::parse(src.to_string()).expect("grammar loads (every parse test)");
        f(&file)
    }

    /// `tail_calls` of each function of `src`, in order, the awaited ones written `await f`.
    fn tails_of(src: &str) -> Vec<Option<Vec<String>>> {
        with_file(src, |file| {
            file.index()
                .all(kinds::FUNCTION_DEFINITION)
                .iter()
                .map(|f| {
                    let tails = f.field("body").and_then(|b| tail_calls(b, src))?;
                    Some(
                        tails
                            .iter()
                            .map(|t| match t.awaited {
                                true => format!("await {}", t.name),
                                false => t.name.clone(),
                            })
                            .collect(),
                    )
                })
                .collect()
        })
    }

    #[test]
    fn tail_calls_are_the_calls_that_end_a_body_that_otherwise_raises() {
        let src = "\
def always():
    raise E()

def through(msg):
    log(msg)
    Errors.throw(msg)

async def branches(exc):
    if exc.code == 404:
        gone()
    elif exc.code == 409:
        raise Conflict()
    else:
        await self.fail(exc)

def may_return(exc):
    if exc:
        fail(exc)

def assigns(x):
    fail(x)
    y = x

def exits():
    sys.exit(2)

def guarded():
    try:
        send()
    except OSError:
        fail()
";
        let some = |names: &[&str]| Some(names.iter().map(|n| n.to_string()).collect::<Vec<_>>());
        assert_eq!(
            tails_of(src),
            [
                some(&[]),
                some(&["throw"]),
                some(&["gone", "await fail"]),
                None,
                None,
                some(&[]),
                some(&["send", "fail"]),
            ]
        );
    }

    #[test]
    fn except_types_reads_tuples_aliases_and_bare() {
        let src = "try:\n    pass\nexcept (A, b.C) as exc:\n    pass\nexcept D:\n    pass\nexcept:\n    pass\n";
        with_file(src, |file| {
            let clauses = file.index().all(kinds::EXCEPT_CLAUSE);
            let names = |c: Node<'_>| -> Vec<String> {
                except_types(c)
                    .iter()
                    .map(|t| text(*t, src).to_string())
                    .collect()
            };
            assert_eq!(names(clauses[0]), ["A", "b.C"]);
            assert_eq!(except_alias(clauses[0], src), Some("exc"));
            assert_eq!(names(clauses[1]), ["D"]);
            assert_eq!(except_alias(clauses[1], src), None);
            assert!(names(clauses[2]).is_empty());
            assert!(!is_broad_except(clauses[0], src));
            assert!(is_broad_except(clauses[2], src));
        });
    }

    #[test]
    fn calls_expose_callee_receiver_and_keywords() {
        let src = "r = cache.set(key, v, ex=60, nx=True)\n";
        with_file(src, |file| {
            let call = file.index().all(kinds::CALL)[0];
            assert_eq!(callee(call, src), "cache.set");
            assert_eq!(callee_name(call, src), "set");
            assert_eq!(receiver(call).map(|r| text(r, src)), Some("cache"));
            assert_eq!(
                keyword_arg(call, "nx", src).map(|v| text(v, src)),
                Some("True")
            );
            assert_eq!(positional_args(call).len(), 2);
        });
    }

    #[test]
    fn annotations_that_admit_none() {
        assert!(annotation_allows_none("Optional[ChargeResult]"));
        assert!(annotation_allows_none("ChargeResult | None"));
        assert!(annotation_allows_none("None"));
        assert!(!annotation_allows_none("ChargeResult"));
        assert!(!annotation_allows_none("NoneType_ish"));
    }

    #[test]
    fn lowercase_matches_agree_with_lowercasing_first() {
        let hays = [
            "",
            "Redis",
            "myREDISClient",
            "IdEmPoTency_key",
            "ré-dis",
            "rEDi",
            "xx rediS",
            "ÅPI",
            "SessionApi",
            "http_client",
            "CACHES",
            "idempo",
        ];
        let needles = ["", "redis", "idempot", "api", "session", "caches", "é"];
        for hay in hays {
            for needle in needles {
                assert_eq!(
                    contains_lowercase(hay, needle),
                    hay.to_ascii_lowercase().contains(needle),
                    "{hay:?} contains {needle:?}"
                );
                assert_eq!(
                    eq_lowercase(hay, needle),
                    hay.to_ascii_lowercase() == needle,
                    "{hay:?} is {needle:?}"
                );
            }
        }
    }

    #[test]
    fn a_brand_request_id_header_names_idempotency_and_a_tracing_one_does_not() {
        for code in [
            r#"headers={"PayFlow-Request-Id": request_id}"#,
            r#"headers = {'pelican-request-id': key}"#,
            r#"{"PayPal-Request-Id": rid}"#,
        ] {
            assert!(code_names_idempotency(code), "{code}");
        }
        for code in [
            r#"headers={"X-Request-Id": request_id}"#,
            r#"headers={"X-Client-Request-Id": rid}"#,
            r#"headers={"Request-Id": rid}"#,
            "log.info(\"sent %s-Request-Id\", rid)",
        ] {
            assert!(!code_names_idempotency(code), "{code}");
        }
    }

    #[test]
    fn lines_of_a_block_exclude_the_trailing_newline() {
        let src = "def f():\n    return 1\n\nx = 2\n";
        with_file(src, |file| {
            let func = file.index().all(kinds::FUNCTION_DEFINITION)[0];
            assert_eq!(lines(func), (1, 2));
        });
    }
}
