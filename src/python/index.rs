//! One walk per tree: the nodes rules look for, bucketed by kind in document order.
//!
//! Rules ask the index ("calls inside this function") instead of walking the tree again, so a
//! file costs one parse and one walk however many rules there are.

use std::collections::HashMap;

use tree_sitter::{Node, Tree, TreeCursor};

use super::kinds;

/// Nodes of the `kinds::INDEXED` kinds, each bucket in document (pre-)order.
pub struct NodeIndex<'t> {
    buckets: Vec<Vec<Node<'t>>>,
    slot_of: HashMap<u16, usize>,
}

impl<'t> NodeIndex<'t> {
    pub fn build(tree: &'t Tree) -> Self {
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
        let mut buckets = vec![Vec::new(); kinds::INDEXED.len()];
        let mut cursor = tree.walk();
        walk_preorder(&mut cursor, |node| {
            let slot = if node.is_error() {
                slot_of.get(&u16::MAX)
            } else {
                slot_of.get(&node.kind_id())
            };
            if let Some(&slot) = slot
                && let Some(bucket) = buckets.get_mut(slot)
            {
                bucket.push(node);
            }
        });
        NodeIndex { buckets, slot_of }
    }

    /// Every indexed node of `kind` in the file, in document order.
    pub fn all(&self, kind: &str) -> &[Node<'t>] {
        self.buckets
            .get(slot_index(kind))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The indexed nodes of `kind` strictly inside `outer` (not `outer` itself).
    pub fn within(&self, outer: Node<'_>, kind: &str) -> &[Node<'t>] {
        let all = self.all(kind);
        let (start, end) = (outer.start_byte(), outer.end_byte());
        let first = all.partition_point(|n| n.start_byte() < start);
        let mut lo = first;
        // Nodes that start where `outer` starts may be its ancestors or `outer` itself.
        while let Some(n) = all.get(lo) {
            if n.start_byte() == start && (n.end_byte() > end || n.id() == outer.id()) {
                lo += 1;
            } else {
                break;
            }
        }
        let len = all
            .get(lo..)
            .unwrap_or(&[])
            .partition_point(|n| n.start_byte() < end);
        all.get(lo..lo + len).unwrap_or(&[])
    }

    /// The innermost indexed node of `kind` that contains `node` (not `node` itself).
    pub fn enclosing(&self, node: Node<'_>, kind: &str) -> Option<Node<'t>> {
        let all = self.all(kind);
        let upto = all.partition_point(|n| n.start_byte() <= node.start_byte());
        all.get(..upto)?
            .iter()
            .rev()
            .find(|n| {
                n.id() != node.id()
                    && n.start_byte() <= node.start_byte()
                    && n.end_byte() >= node.end_byte()
            })
            .copied()
    }

    /// Whether the grammar knows `kind` (guards against typos in `kinds`).
    pub fn knows(&self, kind: &str) -> bool {
        kind == kinds::ERROR || self.slot_of.values().any(|&s| s == slot_index(kind))
    }
}

fn slot_index(kind: &str) -> usize {
    kinds::INDEXED
        .iter()
        .position(|k| *k == kind)
        .unwrap_or(usize::MAX)
}

/// Pre-order walk with a cursor: no recursion, so nesting depth cannot overflow the stack.
pub fn walk_preorder<'t>(cursor: &mut TreeCursor<'t>, mut visit: impl FnMut(Node<'t>)) {
    loop {
        visit(cursor.node());
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
    text: String,
    inner: TreeWithIndex,
}

impl ParsedFile {
    /// `None` when tree-sitter gives up on the text.
    pub fn parse(text: String) -> Option<Self> {
        let tree = super::parse(&text)?;
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
}
