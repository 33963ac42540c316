//! One walk per tree: the nodes rules look for, bucketed by kind in document order.
//!
//! Rules ask the index ("calls inside this function") instead of walking the tree again, so a
//! file costs one parse and one walk however many rules there are.

use std::collections::HashMap;
use std::sync::Arc;

use tree_sitter::{Node, Tree};

use super::{Fields, kinds, syntax};

/// Nodes of the `kinds::INDEXED` kinds, each bucket in document (pre-)order.
pub struct NodeIndex<'t> {
    buckets: Vec<Vec<Node<'t>>>,
    /// The byte range of each node of a bucket, in the same order: searches compare these,
    /// not the nodes, each of whose offsets is a call into tree-sitter.
    spans: Vec<Vec<(usize, usize)>>,
    /// For each node of a bucket, the innermost node of the same bucket that contains it
    /// (`NONE` at the top): "the function around this call" climbs these instead of asking
    /// tree-sitter for parents, which it finds by walking down from the root every time.
    containers: Vec<Vec<u32>>,
    /// For each call, in the order of its bucket: the byte ranges of its callee, of the
    /// callee's last name and of its receiver (`NO_RECEIVER` for none), from
    /// `syntax::callee_parts`. The facts pass, the project index and the gates each ask for
    /// every call's callee, several times.
    callees: Vec<[u32; 6]>,
}

/// Where each kind id of the grammar goes in an index.
struct Slots {
    slot_of: HashMap<u16, usize>,
    /// By kind id: one lookup per node of the tree, so no hashing.
    table: Vec<usize>,
    /// By kind id, whether the index files it: the walk calls back for these only.
    indexed: Vec<bool>,
}

static SLOTS: std::sync::OnceLock<Slots> = std::sync::OnceLock::new();

/// The slots of the grammar, worked out once: finding a kind's id scans the grammar's names.
fn slots(tree: &Tree) -> &'static Slots {
    SLOTS.get_or_init(|| {
        let language = tree.language();
        let mut slot_of = HashMap::new();
        for (slot, kind) in kinds::INDEXED.iter().enumerate() {
            let id = language.id_for_node_kind(kind, true);
            if id != 0 {
                slot_of.insert(id, slot);
            }
        }
        // ERROR is not a named kind of the grammar; it has its own id.
        slot_of.insert(u16::MAX, slot_index(kinds::ERROR));
        let mut table = vec![usize::MAX; usize::from(language.node_kind_count() as u16).max(1)];
        for (&id, &slot) in &slot_of {
            if let Some(entry) = table.get_mut(usize::from(id)) {
                *entry = slot;
            }
        }
        let indexed = table.iter().map(|&slot| slot != usize::MAX).collect();
        Slots {
            slot_of,
            table,
            indexed,
        }
    })
}

const NONE: u32 = u32::MAX;

/// A call without a receiver, in `NodeIndex::callees`.
const NO_RECEIVER: usize = u32::MAX as usize;

impl<'t> NodeIndex<'t> {
    pub fn build(tree: &'t Tree) -> Self {
        Self::from_walk(tree, walk_indexed)
    }

    fn from_walk(tree: &'t Tree, walk: fn(Node<'t>, &[bool], &mut dyn FnMut(Node<'t>))) -> Self {
        let Slots { table, indexed, .. } = slots(tree);
        let error_slot = slot_index(kinds::ERROR);
        let mut buckets: Vec<Vec<Node<'t>>> = vec![Vec::new(); kinds::INDEXED.len()];
        walk(tree.root_node(), indexed, &mut |node| {
            // tree-sitter gives ERROR nodes the kind id `u16::MAX`.
            let id = node.kind_id();
            let slot = if id == u16::MAX {
                error_slot
            } else {
                table.get(usize::from(id)).copied().unwrap_or(usize::MAX)
            };
            if let Some(bucket) = buckets.get_mut(slot) {
                bucket.push(node);
            }
        });
        let spans: Vec<Vec<(usize, usize)>> = buckets
            .iter()
            .map(|b| b.iter().map(|n| (n.start_byte(), n.end_byte())).collect())
            .collect();
        let containers = spans.iter().map(|s| containers(s)).collect();
        let callees = buckets
            .get(slot_index(kinds::CALL))
            .map(|calls| {
                calls
                    .iter()
                    .map(|&call| {
                        let parts = syntax::callee_parts(call);
                        let receiver = parts.receiver.unwrap_or(NO_RECEIVER..NO_RECEIVER);
                        [
                            parts.callee.start,
                            parts.callee.end,
                            parts.name.start,
                            parts.name.end,
                            receiver.start,
                            receiver.end,
                        ]
                        .map(|b| u32::try_from(b).unwrap_or(u32::MAX))
                    })
                    .collect()
            })
            .unwrap_or_default();
        NodeIndex {
            buckets,
            spans,
            containers,
            callees,
        }
    }

    /// `syntax::call_text` of a call of this index's tree, read once when the index was built.
    pub fn call_text<'s>(&self, call: Node<'_>, src: &'s str) -> syntax::CallText<'s> {
        let Some(
            [
                callee_start,
                callee_end,
                name_start,
                name_end,
                recv_start,
                recv_end,
            ],
        ) = self.callee_ranges(call)
        else {
            return syntax::call_text(call, src);
        };
        let range = |start: u32, end: u32| start as usize..end as usize;
        syntax::CalleeParts {
            callee: range(callee_start, callee_end),
            name: range(name_start, name_end),
            receiver: (recv_start as usize != NO_RECEIVER).then(|| range(recv_start, recv_end)),
        }
        .text(src)
    }

    /// `syntax::callee_name` of a call of this index's tree, likewise.
    pub fn callee_name<'s>(&self, call: Node<'_>, src: &'s str) -> &'s str {
        self.call_text(call, src).name
    }

    fn callee_ranges(&self, call: Node<'_>) -> Option<[u32; 6]> {
        let slot = slot_index(kinds::CALL);
        let (calls, spans) = (self.buckets.get(slot)?, self.spans.get(slot)?);
        let start = call.start_byte();
        // Calls that start together (`f()()`) are told apart by identity.
        let first = spans.partition_point(|&(s, _)| s < start);
        let at = spans
            .get(first..)?
            .iter()
            .zip(calls.get(first..)?)
            .take_while(|((s, _), _)| *s == start)
            .position(|(_, n)| n.id() == call.id())?;
        self.callees.get(first + at).copied()
    }

    /// Every indexed node of `kind` in the file, in document order.
    pub fn all(&self, kind: &str) -> &[Node<'t>] {
        self.buckets
            .get(slot_index(kind))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// `all`, with the byte range of each node.
    pub fn all_spans(&self, kind: &str) -> (&[Node<'t>], &[(usize, usize)]) {
        let slot = slot_index(kind);
        match (self.buckets.get(slot), self.spans.get(slot)) {
            (Some(all), Some(spans)) => (all, spans),
            _ => (&[], &[]),
        }
    }

    /// The indexed nodes of `kind` strictly inside `outer` (not `outer` itself).
    pub fn within(&self, outer: Node<'_>, kind: &str) -> &[Node<'t>] {
        self.within_spans(outer, kind).0
    }

    /// `within`, with the byte range of each node: a node's offsets are each a call into
    /// tree-sitter.
    pub fn within_spans(&self, outer: Node<'_>, kind: &str) -> (&[Node<'t>], &[(usize, usize)]) {
        let slot = slot_index(kind);
        let (Some(all), Some(spans)) = (self.buckets.get(slot), self.spans.get(slot)) else {
            return (&[], &[]);
        };
        let (start, end) = (outer.start_byte(), outer.end_byte());
        let mut lo = spans.partition_point(|&(s, _)| s < start);
        // Nodes that start where `outer` starts may be its ancestors or `outer` itself.
        while let (Some(&(s, e)), Some(n)) = (spans.get(lo), all.get(lo)) {
            if s == start && (e > end || n.id() == outer.id()) {
                lo += 1;
            } else {
                break;
            }
        }
        let len = spans
            .get(lo..)
            .unwrap_or(&[])
            .partition_point(|&(s, _)| s < end);
        (
            all.get(lo..lo + len).unwrap_or(&[]),
            spans.get(lo..lo + len).unwrap_or(&[]),
        )
    }

    /// The innermost indexed node of `kind` that contains `node` (not `node` itself).
    pub fn enclosing(&self, node: Node<'_>, kind: &str) -> Option<Node<'t>> {
        let slot = slot_index(kind);
        let (all, up) = (self.buckets.get(slot)?, self.containers.get(slot)?);
        let spans = self.spans.get(slot)?;
        let (start, end) = (node.start_byte(), node.end_byte());
        let upto = spans.partition_point(|&(s, _)| s <= start);
        // The last node that starts no later than `node` is the one that contains it, or lies
        // inside the one that does: climb from there.
        let mut at = upto.checked_sub(1)?;
        loop {
            let (n, &(_, e)) = (*all.get(at)?, spans.get(at)?);
            if e >= end && n.id() != node.id() {
                return Some(n);
            }
            at = *up.get(at).filter(|&&p| p != NONE)? as usize;
        }
    }

    /// `node`'s parent, when that is a node of `kind` (an indexed kind). tree-sitter finds a
    /// parent by walking down from the root, which cost more than the rest of a function's
    /// facts; the index has the candidate at hand: the innermost node of `kind` around `node`.
    pub fn parent_of_kind(&self, node: Node<'_>, kind: &str) -> Option<Node<'t>> {
        let candidate = self.enclosing(node, kind)?;
        candidate
            .child_with_descendant(node)
            .is_some_and(|child| child.id() == node.id())
            .then_some(candidate)
    }

    /// The `decorated_definition` whose definition `def` (a function or a class) is.
    pub fn decorated(&self, def: Node<'_>) -> Option<Node<'t>> {
        self.parent_of_kind(def, kinds::DECORATED_DEFINITION)
    }

    /// The value of the last `name = value` in `scope` (the whole file for `None`; a plain
    /// name on the left) that ends before byte `before`: what a name holds at a point, as far
    /// as its assignments say.
    pub fn assigned_before(
        &self,
        scope: Option<Node<'_>>,
        name: &str,
        before: usize,
        src: &str,
    ) -> Option<Node<'t>> {
        let assignments = match scope {
            Some(scope) => self.within(scope, kinds::ASSIGNMENT),
            None => self.all(kinds::ASSIGNMENT),
        };
        assignments
            .iter()
            .filter(|a| a.end_byte() <= before)
            .filter(|a| {
                a.field("left")
                    .is_some_and(|l| l.kind() == kinds::IDENTIFIER && syntax::text(l, src) == name)
            })
            .filter_map(|a| a.field("right"))
            .next_back()
    }

    /// The file's functions (and methods) named `name`: the helpers a call of that name may run.
    pub fn functions_named<'a>(
        &'a self,
        name: &'a str,
        src: &'a str,
    ) -> impl Iterator<Item = Node<'t>> + 'a {
        self.all(kinds::FUNCTION_DEFINITION)
            .iter()
            .copied()
            .filter(move |f| syntax::function_name(*f, src) == name)
    }

    /// The values the file's functions named `name` return (`return x`, each `x`): what a
    /// helper of the file hands back, for rules that read through it.
    pub fn returned_by(&self, name: &str, src: &str) -> Vec<Node<'t>> {
        self.functions_named(name, src)
            .flat_map(|f| self.within(f, kinds::RETURN_STATEMENT))
            .filter_map(|r| syntax::return_value(*r))
            .collect()
    }

    /// Whether the grammar knows `kind` (guards against typos in `kinds`).
    pub fn knows(&self, kind: &str) -> bool {
        // Set by `build`, which made this index.
        let known = SLOTS.get().map(|s| &s.slot_of);
        kind == kinds::ERROR || known.is_some_and(|k| k.values().any(|&s| s == slot_index(kind)))
    }
}

/// For nodes in document order, each one's innermost container among them: byte ranges of a
/// tree nest, so an open stack gives it in one pass.
fn containers(spans: &[(usize, usize)]) -> Vec<u32> {
    let mut out = Vec::with_capacity(spans.len());
    let mut open: Vec<(usize, usize)> = Vec::new();
    for (i, &(_, end)) in spans.iter().enumerate() {
        while open.last().is_some_and(|&(_, e)| e < end) {
            open.pop();
        }
        out.push(open.last().map_or(NONE, |&(j, _)| j as u32));
        open.push((i, end));
    }
    out
}

fn slot_index(kind: &str) -> usize {
    let slot = kinds::INDEXED.iter().position(|k| *k == kind);
    // Asked for a kind the index does not keep, it would answer "none" and a rule would
    // silently never fire (two rules once did, for `elif` clauses and subscripts).
    debug_assert!(slot.is_some(), "{kind} is not an indexed kind");
    slot.unwrap_or(usize::MAX)
}

/// Pre-order walk over the nodes that can be indexed: like `walk_preorder`, but it passes over
/// the grammar's tokens and does not step into a node whose children are all leaves. No indexed
/// kind is a leaf, so `f(a, b)`'s argument list or a string's parts are skipped whole. A node
/// with an error below it is always entered: an ERROR node can be a leaf.
fn walk_indexed<'t>(root: Node<'t>, indexed: &[bool], visit: &mut dyn FnMut(Node<'t>)) {
    visit(root);
    let children = root.child_count();
    // `descendant_count` counts the node itself and every visible node below it, so it is
    // `children + 1` exactly when every child is a leaf: `ts_payreview_walk` asks the same of
    // the nodes below.
    if children > 0 && (root.descendant_count() > children as usize + 1 || root.has_error()) {
        // No indexed kind is a token of the grammar: a test
        // (`skipping_leaf_only_children_indexes_the_same_nodes`) compares this index with one
        // from a cursor's walk, on every file of the fixtures.
        walk_below(root, Skip::Leaves(indexed), &mut |node| {
            visit(node);
            true
        });
    }
}

/// What `walk_below` passes over.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Skip<'k> {
    /// Nothing: every visible node is visited, and entered when `visit` says so.
    Nothing,
    /// The grammar's tokens (identifiers, keywords, punctuation), and the inside of a node
    /// whose children are all leaves, unless an error is below it; of the other nodes, `visit`
    /// sees those of the kinds marked true (by kind id; ERROR always), and the rest are
    /// entered. A walk for a few kinds of nonterminal then saves a call across the language
    /// boundary per token (two in five of the nodes the node index's walk met) and per node of
    /// another kind, and the calls back into tree-sitter that asked of each node whether to
    /// enter it.
    Leaves(&'k [bool]),
}

/// Pre-order walk of the visible nodes below `node`, into the children of those `visit`
/// returns true for: the order of a `TreeCursor`'s `goto_first_child` and `goto_next_sibling`.
/// A cursor costs 300–600 instructions a step here, most of it climbing back through Python's
/// hidden repeat nodes to find the next sibling; `ts_payreview_walk` (added to the vendored
/// tree-sitter, see `vendor/README.md`) keeps an iterator per level and enters each subtree
/// once.
fn walk_below<'t>(node: Node<'t>, skip: Skip<'_>, visit: &mut dyn FnMut(Node<'t>) -> bool) {
    type Visit<'v, 't> = &'v mut dyn FnMut(Node<'t>) -> bool;
    unsafe extern "C" {
        fn ts_payreview_walk(
            node: tree_sitter::ffi::TSNode,
            visit: unsafe extern "C" fn(*mut std::ffi::c_void, tree_sitter::ffi::TSNode) -> bool,
            payload: *mut std::ffi::c_void,
            tokens: bool,
            leaf_parents: bool,
            kinds: *const bool,
            kind_count: u32,
        );
    }
    unsafe extern "C" fn each(
        payload: *mut std::ffi::c_void,
        raw: tree_sitter::ffi::TSNode,
    ) -> bool {
        // SAFETY: `payload` is the `Visit` below, alive for the whole call of
        // `ts_payreview_walk`, and `raw` a node of the tree `node` belongs to.
        unsafe {
            let visit = &mut *payload.cast::<Visit<'_, '_>>();
            visit(Node::from_raw(raw))
        }
    }
    let mut visit: Visit<'_, 't> = visit;
    let (leaves, kinds) = match skip {
        Skip::Nothing => (true, None),
        Skip::Leaves(kinds) => (false, Some(kinds)),
    };
    // SAFETY: the walk reads the tree `node` borrows and calls `each` with nodes of it; the
    // payload outlives the call.
    unsafe {
        ts_payreview_walk(
            node.into_raw(),
            each,
            (&raw mut visit).cast::<std::ffi::c_void>(),
            leaves,
            leaves,
            kinds.map_or(std::ptr::null(), <[bool]>::as_ptr),
            // Never past the slice: the walk reads `kinds` below this count only.
            kinds.map_or(0, |k| k.len().min(u32::MAX as usize) as u32),
        );
    }
}

/// The named children of `node`, in order: what `Node::named_children` gives, without a
/// cursor, which climbs back through the hidden repeat nodes that hold a block's statements or
/// a call's arguments at every step.
pub(crate) fn named_children(node: Node<'_>) -> Vec<Node<'_>> {
    let mut out = Vec::new();
    walk_below(node, Skip::Nothing, &mut |child| {
        if child.is_named() {
            out.push(child);
        }
        false
    });
    out
}

/// Pre-order walk with a cursor: no recursion, so nesting depth cannot overflow the stack.
#[cfg(test)]
pub fn walk_preorder<'t>(
    cursor: &mut tree_sitter::TreeCursor<'t>,
    mut visit: impl FnMut(Node<'t>),
) {
    loop {
        let node = cursor.node();
        visit(node);
        if cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return;
            }
        }
    }
}

self_cell::self_cell!(
    struct TreeWithIndex {
        owner: Tree,
        #[covariant]
        dependent: NodeIndex,
    }
);

/// A parsed file version: its text, its tree and the shared index over the tree.
pub struct ParsedFile {
    text: Arc<String>,
    inner: TreeWithIndex,
}

impl ParsedFile {
    /// `None` when tree-sitter gives up on the text.
    pub fn parse(text: String) -> Option<Self> {
        Self::parse_shared(Arc::new(text))
    }

    /// `parse` of a text the caller keeps too (a file version's), without copying it.
    pub fn parse_shared(text: Arc<String>) -> Option<Self> {
        let tree = super::parse(&text)?;
        let inner = TreeWithIndex::new(tree, |tree| NodeIndex::build(tree));
        Some(ParsedFile { text, inner })
    }

    /// Parses `text`, another version of `base`'s file, reusing `base`'s tree where the
    /// blocks (from the diff's hunks, `base`'s side first) leave it unchanged: the cost of a
    /// local change is little more than the lines it touches. Parses from scratch when the
    /// blocks do not describe the two texts.
    pub fn parse_from(
        text: Arc<String>,
        base: &ParsedFile,
        blocks: &[super::Block],
    ) -> Option<Self> {
        let Some(edits) = super::edits(base.text(), &text, blocks) else {
            return Self::parse_shared(text);
        };
        let tree = super::parse_edited(&text, base.tree(), &edits)?;
        let inner = TreeWithIndex::new(tree, |tree| NodeIndex::build(tree));
        Some(ParsedFile { text, inner })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn tree(&self) -> &Tree {
        self.inner.borrow_owner()
    }

    pub fn index(&self) -> &NodeIndex<'_> {
        self.inner.borrow_dependent()
    }

    pub fn root(&self) -> Node<'_> {
        self.tree().root_node()
    }

    /// Line (1-based) of the first syntax error, if the file does not parse cleanly: an `ERROR`
    /// node or a token tree-sitter had to invent (`MISSING`). Follows only the branch that holds
    /// the error, so a clean file costs nothing and a broken one one path down the tree.
    pub fn first_syntax_error(&self) -> Option<u32> {
        let mut node = self.root();
        if !node.has_error() {
            return None;
        }
        loop {
            if node.is_error() || node.is_missing() {
                break;
            }
            let mut cursor = node.walk();
            let Some(child) = node.children(&mut cursor).find(|c| c.has_error()) else {
                break;
            };
            node = child;
        }
        Some(u32::try_from(node.start_position().row).map_or(u32::MAX, |r| r.saturating_add(1)))
    }
}

/// A file version's tree for the rules: the one the review kept, or, when the review dropped it
/// to bound memory, parsed again from its text the first time a rule needs it (most files never
/// need their old tree: see `review::run_rules`).
pub struct LazyTree<'a> {
    kept: Option<&'a ParsedFile>,
    text: Option<&'a Arc<String>>,
    /// The other version's tree (itself parsed on demand) and the blocks from it to this text,
    /// to parse incrementally.
    base: Option<(&'a LazyTree<'a>, Vec<super::Block>)>,
    again: std::cell::OnceCell<Option<ParsedFile>>,
}

impl<'a> LazyTree<'a> {
    /// `kept`: the tree, if the review still holds it; `text`: what to parse otherwise (`None`
    /// when there is no tree to have: not Python, absent on this side, over a cap).
    pub fn new(kept: Option<&'a ParsedFile>, text: Option<&'a Arc<String>>) -> Self {
        LazyTree {
            kept,
            text,
            base: None,
            again: std::cell::OnceCell::new(),
        }
    }

    /// A dropped tree to be parsed again from `base`, the other version's tree (see
    /// `ParsedFile::parse_from`), or from nothing when that has none.
    pub fn from_base(
        text: Option<&'a Arc<String>>,
        base: &'a LazyTree<'a>,
        blocks: Vec<super::Block>,
    ) -> Self {
        LazyTree {
            base: Some((base, blocks)),
            ..LazyTree::new(None, text)
        }
    }

    /// Whether there is a tree to have (it may still fail to parse, past the parse budget).
    pub fn exists(&self) -> bool {
        self.kept.is_some() || self.text.is_some()
    }

    pub fn get(&self) -> Option<&ParsedFile> {
        self.kept.or_else(|| {
            self.again
                .get_or_init(|| {
                    let text = Arc::clone(self.text?);
                    match self
                        .base
                        .as_ref()
                        .and_then(|(b, blocks)| Some((b.get()?, blocks)))
                    {
                        Some((base, blocks)) => ParsedFile::parse_from(text, base, blocks),
                        None => ParsedFile::parse_shared(text),
                    }
                })
                .as_ref()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(src: &str) -> ParsedFile {
        ParsedFile::parse(src.to_string()).expect("the python grammar loads (every parse test)")
    }

    #[test]
    fn first_syntax_error_names_the_line() {
        assert_eq!(
            parsed("def f():\n    return 1\n").first_syntax_error(),
            None
        );
        assert_eq!(
            parsed("x = 1\n\ny = = 2\nz = 3\n").first_syntax_error(),
            Some(3)
        );
        // A missing colon.
        assert_eq!(
            parsed("x = 1\nif x\n    y = 2\n").first_syntax_error(),
            Some(2)
        );
        // A token the parser had to invent: the closing bracket.
        assert_eq!(parsed("a = 1\nb = f(1, 2\n").first_syntax_error(), Some(2));
    }

    #[test]
    fn within_finds_calls_of_one_function_only() {
        let file = parsed("def a():\n    f()\n    g(h())\n\ndef b():\n    k()\n");
        let idx = file.index();
        let funcs = idx.all(kinds::FUNCTION_DEFINITION);
        assert_eq!(funcs.len(), 2);
        let names: Vec<&str> = idx
            .within(funcs[0], kinds::CALL)
            .iter()
            .map(|c| &file.text()[c.byte_range()])
            .collect();
        assert_eq!(names, ["f()", "g(h())", "h()"]);
        assert_eq!(idx.within(funcs[1], kinds::CALL).len(), 1);
    }

    #[test]
    fn enclosing_returns_innermost_function() {
        let file = parsed("def outer():\n    def inner():\n        x()\n    y()\n");
        let idx = file.index();
        let calls = idx.all(kinds::CALL);
        let name = |n: Node<'_>| {
            n.child_by_field_name("name")
                .map(|id| file.text()[id.byte_range()].to_string())
        };
        let x = idx
            .enclosing(calls[0], kinds::FUNCTION_DEFINITION)
            .and_then(name);
        let y = idx
            .enclosing(calls[1], kinds::FUNCTION_DEFINITION)
            .and_then(name);
        assert_eq!(x.as_deref(), Some("inner"));
        assert_eq!(y.as_deref(), Some("outer"));
    }

    #[test]
    fn deep_nesting_does_not_overflow_the_stack() {
        let src = format!("x = {}1{}\n", "(".repeat(5000), ")".repeat(5000));
        let file = parsed(&src);
        assert!(file.index().all(kinds::CALL).is_empty());
    }

    #[test]
    fn every_indexed_kind_exists_in_the_grammar() {
        let file = parsed("pass\n");
        for kind in kinds::INDEXED {
            assert!(
                file.index().knows(kind),
                "{kind} is not a tree-sitter-python kind"
            );
        }
    }

    /// The innermost container by the definition: the last node of the kind, in document
    /// order, that starts no later and ends no earlier.
    fn enclosing_by_scan<'t>(idx: &NodeIndex<'t>, node: Node<'_>, kind: &str) -> Option<Node<'t>> {
        idx.all(kind)
            .iter()
            .rev()
            .find(|n| {
                n.id() != node.id()
                    && n.start_byte() <= node.start_byte()
                    && n.end_byte() >= node.end_byte()
            })
            .copied()
    }

    #[test]
    fn enclosing_climbs_to_what_a_scan_finds_for_every_indexed_node() {
        let nested = "class A:\n    def f(self):\n        def g():\n            return h(i(j()))(k)\n        x = [lambda: m() for _ in n()]\n        return g\n\n    class B:\n        def f(self):\n            while a(b):\n                try:\n                    c()\n                except E:\n                    d()\n\n\ndef top():\n    return A().f()\n";
        let mut sources = vec![nested.to_string()];
        for dir in ["fixtures/seed/head", "fixtures/seed-context/head"] {
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
            let mut stack = vec![root];
            while let Some(d) = stack.pop() {
                for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                    let path = entry.path();
                    if path.is_dir() {
                        stack.push(path);
                    } else if path.extension().is_some_and(|e| e == "py") {
                        sources.extend(std::fs::read_to_string(&path));
                    }
                }
            }
        }
        assert!(sources.len() > 5, "the fixtures were found");
        for src in &sources {
            let file = parsed(src);
            let idx = file.index();
            for kind in kinds::INDEXED {
                for &node in idx.all(kind) {
                    for outer in [
                        kinds::FUNCTION_DEFINITION,
                        kinds::CLASS_DEFINITION,
                        kinds::CALL,
                        kinds::ASSIGNMENT,
                        kinds::TRY_STATEMENT,
                        kinds::AWAIT,
                    ] {
                        assert_eq!(
                            idx.enclosing(node, outer).map(|n| n.id()),
                            enclosing_by_scan(idx, node, outer).map(|n| n.id()),
                            "{outer} around a {kind} at byte {}",
                            node.start_byte()
                        );
                    }
                }
            }
        }
    }

    /// `cases`, then the source of every Python file of the fixtures.
    fn with_fixtures(cases: &[&str]) -> Vec<String> {
        let mut sources: Vec<String> = cases.iter().map(|c| c.to_string()).collect();
        sources.extend(crate::test_support::fixture_sources());
        sources
    }

    /// `walk_below` is the cursor's walk without its climbing: the same nodes in the same order,
    /// skipping what the cursor would skip, on real files, broken code and aliased nodes.
    #[test]
    fn the_native_walk_visits_what_a_cursor_visits() {
        let sources = with_fixtures(&[
            "def f(:\n    g(1, 2\n",
            "x = (1 +\ny = $ 2\n",
            // Python 2 statements and `match` patterns hold aliased nodes.
            "print >> f, 'a'\nexec 'b' in ns\nmatch x:\n    case [1, *rest]: pass\n",
            "@d\nclass A:\n    # note\n    def m(self): return f\"{a(b)}\"\n",
            "",
        ]);
        let (mut leafy_seen, mut calls_seen) = (0, 0);
        for src in sources {
            let tree = crate::python::parse(&src).expect("the python grammar loads");
            let root = tree.root_node();
            let mut by_cursor = Vec::new();
            walk_preorder(&mut root.walk(), |n| by_cursor.push(n));
            let mut native = vec![root];
            walk_below(root, Skip::Nothing, &mut |n| {
                native.push(n);
                true
            });
            // Nodes compare by id alone; an alias shows in the kind.
            let seen = |nodes: &[Node<'_>]| -> Vec<(usize, u16, usize)> {
                nodes
                    .iter()
                    .map(|n| (n.id(), n.kind_id(), n.start_byte()))
                    .collect()
            };
            assert_eq!(seen(&native), seen(&by_cursor), "{src:.60}");
            // Without leaves: the same walk, in the same order, less some leaves that no
            // index looks for. Not every leaf is a token: an ERROR leaf (a character no token
            // starts with) and an empty nonterminal (the block of `def f(:`) are visited, unless
            // they are the children of a node built of leaves alone, which is not entered.
            let every_kind = vec![true; tree.language().node_kind_count()];
            let mut nonterminals = vec![root];
            walk_below(root, Skip::Leaves(&every_kind), &mut |n| {
                nonterminals.push(n);
                true
            });
            // With kinds to look for: those of the same nodes, and ERRORs, whose kind id is
            // past the grammar's kinds.
            let call = tree.language().id_for_node_kind(kinds::CALL, true);
            let mut only_calls = vec![false; every_kind.len()];
            only_calls[usize::from(call)] = true;
            let mut calls = Vec::new();
            walk_below(root, Skip::Leaves(&only_calls), &mut |n| {
                calls.push(n);
                true
            });
            let expected_calls: Vec<Node<'_>> = nonterminals
                .iter()
                .skip(1)
                .filter(|n| n.kind_id() == call || n.is_error())
                .copied()
                .collect();
            assert_eq!(seen(&calls), seen(&expected_calls), "{src:.60}");
            calls_seen += calls.iter().filter(|n| n.kind_id() == call).count();
            let kept: std::collections::HashSet<usize> =
                nonterminals.iter().map(|n| n.id()).collect();
            let (visited, skipped): (Vec<Node<'_>>, Vec<Node<'_>>) =
                native.iter().partition(|n| kept.contains(&n.id()));
            assert_eq!(seen(&nonterminals), seen(&visited), "{src:.60}");
            for n in &skipped {
                assert!(
                    n.child_count() == 0 && !n.is_error(),
                    "{} in {src:.60}",
                    n.kind()
                );
                // By named kind, as the index files them: the keyword `await` is a leaf of
                // the same name as the `await` expression.
                assert!(
                    !(n.is_named() && kinds::INDEXED.contains(&n.kind())),
                    "{} in {src:.60}",
                    n.kind()
                );
            }
            assert!(
                skipped.iter().any(|n| n.kind() == "identifier") || src.trim().is_empty(),
                "{src:.60}"
            );
            // A node built of leaves alone, with no error below it, is visited, not entered.
            for n in &nonterminals {
                let leafy = n.child_count() > 0
                    && n.descendant_count() == n.child_count() as usize + 1
                    && !n.has_error();
                let entered = (0..n.child_count())
                    .filter_map(|i| n.child(i))
                    .any(|c| kept.contains(&c.id()));
                if leafy {
                    assert!(!entered, "{} in {src:.60}", n.kind());
                    leafy_seen += 1;
                } else if n.descendant_count() > n.child_count() as usize + 1 {
                    assert!(entered, "{} in {src:.60}", n.kind());
                }
            }
            // Not entering a node skips all of it, and only it.
            let expected: Vec<_> = by_cursor
                .iter()
                .filter(|n| {
                    let mut up = n.parent();
                    while let Some(p) = up {
                        if p.kind() == kinds::CALL {
                            return false;
                        }
                        up = p.parent();
                    }
                    true
                })
                .copied()
                .collect();
            let mut pruned = vec![root];
            walk_below(root, Skip::Nothing, &mut |n| {
                pruned.push(n);
                n.kind() != kinds::CALL
            });
            assert_eq!(seen(&pruned), seen(&expected), "{src:.60}");
        }
        assert!(leafy_seen > 1_000, "{leafy_seen} nodes built of leaves");
        assert!(calls_seen > 200, "{calls_seen} calls");
    }

    /// `named_children` lists what the cursor's `named_children` does, for every node: hidden
    /// repeat nodes (a module's statements, a call's arguments), extras and aliases.
    #[test]
    fn named_children_are_the_cursors_named_children() {
        let sources = with_fixtures(&[
            "def f(:\n    g(1, 2\n",
            "print >> f, 'a'\nmatch x:\n    case [1, *rest]: pass\n",
            "f(a, # note\n  b=1, *c, **d)\n@d\n# c\n@e\ndef g(): pass\n",
        ]);
        let mut compared = 0;
        for src in sources {
            let tree = crate::python::parse(&src).expect("the python grammar loads");
            let mut nodes = Vec::new();
            walk_preorder(&mut tree.walk(), |n| nodes.push(n));
            for node in nodes {
                let mut cursor = node.walk();
                let expected: Vec<(usize, u16)> = node
                    .named_children(&mut cursor)
                    .map(|n| (n.id(), n.kind_id()))
                    .collect();
                let native: Vec<(usize, u16)> = named_children(node)
                    .iter()
                    .map(|n| (n.id(), n.kind_id()))
                    .collect();
                assert_eq!(native, expected, "{} in {src:.60}", node.kind());
                compared += expected.len();
            }
        }
        assert!(compared > 2_000, "{compared} children compared");
    }

    #[test]
    fn the_native_walk_does_not_recurse_on_deep_nesting() {
        let src = format!("x = {}1{}\n", "(".repeat(20_000), ")".repeat(20_000));
        let tree = crate::python::parse(&src).expect("parses");
        let mut seen = 0;
        walk_below(tree.root_node(), Skip::Nothing, &mut |_| {
            seen += 1;
            true
        });
        assert!(seen > 40_000, "{seen} nodes");
    }

    #[test]
    fn skipping_leaf_only_children_indexes_the_same_nodes() {
        let sources = with_fixtures(&[
            // A call inside an f-string, a string's only non-leaf part.
            "x = f\"{charge(amount)}\"\n",
            // Leaf-only argument lists, subscripts, attributes.
            "a.b(c, d)[e]\nreturn_value = obj.attr\n",
            // Errors, with a token the parser invented and one it could not place.
            "def f(:\n    g(1, 2\n",
            "x = (1 +\ny = $ 2\n",
            // A character no token starts with: an ERROR leaf, alone in its ERROR node.
            "f($)\nx = [1, ?]\n",
            "class A:\n    def m(self): return call(1)\n    @dec\n    def n(self): pass\n",
        ]);
        for src in sources {
            let tree = crate::python::parse(&src).expect("the python grammar loads");
            let skipping = NodeIndex::build(&tree);
            let full = NodeIndex::from_walk(&tree, |root, _, visit| {
                walk_preorder(&mut root.walk(), visit)
            });
            for kind in kinds::INDEXED {
                let ids = |index: &NodeIndex<'_>| -> Vec<usize> {
                    index.all(kind).iter().map(|n| n.id()).collect()
                };
                assert_eq!(ids(&skipping), ids(&full), "{kind} in {src:.60}");
            }
            assert_eq!(skipping.containers, full.containers);
        }
    }

    #[test]
    fn a_definition_is_decorated_by_its_parent_only() {
        let sources = with_fixtures(&[
            // Decorated definitions nested in decorated ones, a comment between decorators, a
            // class whose last method ends where it does, and an unfinished decorator.
            "@a\n# note\n@b(1)\ndef f():\n    @c\n    def g():\n        def h(): pass\n",
            "@d\nclass A:\n    def m(self): pass\n    @e\n    def n(self): pass\n",
            "@broken(\ndef f(): pass\n",
        ]);
        let mut decorated = 0;
        for src in sources {
            let file = parsed(&src);
            let idx = file.index();
            let defs = idx.all(kinds::FUNCTION_DEFINITION);
            for &def in defs.iter().chain(idx.all(kinds::CLASS_DEFINITION)) {
                let parent = def
                    .parent()
                    .filter(|p| p.kind() == kinds::DECORATED_DEFINITION);
                assert_eq!(
                    idx.decorated(def).map(|n| n.id()),
                    parent.map(|n| n.id()),
                    "{src:.60}"
                );
                decorated += usize::from(parent.is_some());
            }
        }
        assert!(
            decorated >= 10,
            "decorated definitions are covered: {decorated}"
        );
    }

    #[test]
    fn callees_read_at_build_are_each_calls_own() {
        let sources = with_fixtures(&[
            // Calls that start at the same byte, nested in each other.
            "f(a)(b)(c)\nx.y(1).z(2)\nclient.get(key).decode()\n",
            // Callees that are neither names nor attributes, and an error.
            "(lambda: 1)()\nitems[0](1)\ng(1, 2\n",
        ]);
        let mut nested = 0;
        for src in sources {
            let file = parsed(&src);
            let idx = file.index();
            let calls = idx.all(kinds::CALL);
            for &call in calls {
                assert_eq!(
                    idx.call_text(call, &src).callee,
                    syntax::callee(call, &src),
                    "{src:.60}"
                );
                assert_eq!(
                    idx.callee_name(call, &src),
                    syntax::callee_name(call, &src),
                    "{src:.60}"
                );
                assert_eq!(
                    idx.call_text(call, &src).receiver,
                    syntax::receiver(call).map(|r| syntax::text(r, &src)),
                    "{src:.60}"
                );
            }
            nested += calls
                .windows(2)
                .filter(|w| w[0].start_byte() == w[1].start_byte())
                .count();
        }
        assert!(
            nested >= 4,
            "calls that start together are covered: {nested}"
        );
    }
}
