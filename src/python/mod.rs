//! Python source as tree-sitter trees, and the one walk that every rule shares.
//!
//! The only module that names tree-sitter-python node kinds (`kinds`). It parses; it does not
//! judge. Trees are walked with a cursor, never recursively, so a file of 5,000 nested brackets
//! cannot overflow the stack.

mod index;
pub mod kinds;
pub mod syntax;

pub use index::{NodeIndex, ParsedFile};

use tree_sitter::{Parser, Tree};

/// Parses Python text. `None` only when tree-sitter gives up (cancelled or out of budget);
/// syntax errors still give a tree with `ERROR` nodes.
pub fn parse(text: &str) -> Option<Tree> {
    let mut parser = Parser::new();
    // The grammar is compiled in; a version mismatch is caught by every test that parses.
    parser
        .set_language(&tree_sitter_python::LANGUAGE.into())
        .ok()?;
    parser.parse(text, None)
}
