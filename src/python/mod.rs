//! Python source as tree-sitter trees, and the one walk that every rule shares.
//!
//! The only module that names tree-sitter-python node kinds (`kinds`). It parses; it does not
//! judge. Trees are walked with a cursor, never recursively, so a file of 5,000 nested brackets
//! cannot overflow the stack.

mod fields;
mod incremental;
mod index;
pub mod kinds;
pub mod syntax;

pub use fields::Fields;
pub use incremental::{Block, edits};
pub(crate) use index::named_children;
pub use index::{LazyTree, NodeIndex, ParsedFile};

use std::cell::RefCell;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use tree_sitter::{InputEdit, ParseOptions, Parser, Tree};

/// How long one file version may take to parse before it is given up on. Generous: a
/// megabyte of Python parses in well under a second; only pathological input gets near it.
pub const PARSE_BUDGET: Duration = Duration::from_secs(10);

thread_local! {
    // One parser per worker thread: creating one per file costs more than parsing a small file.
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// Parses Python text. `None` when tree-sitter gives up (the time budget ran out); syntax errors
/// still give a tree with `ERROR` nodes.
pub fn parse(text: &str) -> Option<Tree> {
    parse_within(text, PARSE_BUDGET)
}

/// Parses Python text, reusing what is unchanged of `base`, the tree of another version of the
/// file, which `edits` (from `incremental::edits`) turn into this text.
pub fn parse_edited(text: &str, base: &Tree, edits: &[InputEdit]) -> Option<Tree> {
    let mut old = base.clone();
    for edit in edits {
        old.edit(edit);
    }
    parse_with(text, Some(&old), PARSE_BUDGET)
}

/// Parses Python text, giving up after `budget`.
pub fn parse_within(text: &str, budget: Duration) -> Option<Tree> {
    parse_with(text, None, budget)
}

fn parse_with(text: &str, old: Option<&Tree>, budget: Duration) -> Option<Tree> {
    PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let mut parser = Parser::new();
            // The grammar is compiled in; a version mismatch fails every test that parses.
            parser
                .set_language(&tree_sitter_python::LANGUAGE.into())
                .ok()?;
            *slot = Some(parser);
        }
        let parser = slot.as_mut()?;
        let deadline = Instant::now() + budget;
        let bytes = text.as_bytes();
        let mut read = |offset: usize, _| bytes.get(offset..).unwrap_or(&[]);
        let mut progress = |_: &tree_sitter::ParseState| {
            if Instant::now() > deadline {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        let options = ParseOptions::new().progress_callback(&mut progress);
        let tree = parser.parse_with_options(&mut read, old, Some(options));
        if tree.is_none() {
            // A cancelled parse leaves state behind; the next file starts clean.
            parser.reset();
        }
        tree
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_budget_gives_up_instead_of_hanging() {
        let big = "x = [1, 2, 3]\n".repeat(200_000);
        assert!(parse_within(&big, Duration::ZERO).is_none());
        // The parser is usable again afterwards.
        assert!(parse("y = 1\n").is_some_and(|t| !t.root_node().has_error()));
    }
}
