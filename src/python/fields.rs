//! Children by field name, with the name looked up once.
//!
//! `Node::child_by_field_name` finds the field's id by comparing the name with every field name
//! of the grammar, on every call; rules and the facts pass ask it hundreds of thousands of times
//! on a large change. The ids are read once here and the child is found by id.

use std::num::NonZeroU16;
use std::sync::OnceLock;

use tree_sitter::Node;

/// The field names payreview asks for, most asked first. A name not listed still works, by
/// the grammar's own (slow) lookup.
const NAMES: [&str; 20] = [
    "left",
    "right",
    "value",
    "name",
    "condition",
    "body",
    "arguments",
    "parameters",
    "object",
    "function",
    "attribute",
    "alias",
    "operator",
    "consequence",
    "return_type",
    "module_name",
    "expression",
    "definition",
    "argument",
    "alternative",
];

fn language() -> tree_sitter::Language {
    tree_sitter_python::LANGUAGE.into()
}

fn field_id(name: &str) -> Option<NonZeroU16> {
    static IDS: OnceLock<[Option<NonZeroU16>; NAMES.len()]> = OnceLock::new();
    // A string comparison against a short list is cheaper than hashing the name.
    match NAMES.iter().position(|n| *n == name) {
        Some(slot) => IDS.get_or_init(|| {
            let language = language();
            NAMES.map(|n| language.field_id_for_name(n))
        })[slot],
        None => language().field_id_for_name(name),
    }
}

/// `child_by_field_name` for the Python grammar, by id.
pub trait Fields<'t> {
    fn field(&self, name: &str) -> Option<Node<'t>>;
}

impl<'t> Fields<'t> for Node<'t> {
    fn field(&self, name: &str) -> Option<Node<'t>> {
        self.child_by_field_id(field_id(name)?.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_by_id_is_the_child_by_name() {
        let src = "def f(a, b=1) -> int:\n    return g(a).h[b]\n";
        let tree = crate::python::parse(src).expect("parses");
        let mut cursor = tree.walk();
        let mut seen = 0;
        crate::python::index::walk_preorder(&mut cursor, |node| {
            for name in [
                "name",
                "parameters",
                "return_type",
                "body",
                "function",
                "arguments",
                "object",
                "attribute",
                "value",
                "subscript",
                "left",
                "right",
            ] {
                assert_eq!(
                    node.field(name).map(|n| n.id()),
                    node.child_by_field_name(name).map(|n| n.id()),
                    "{name} of {}",
                    node.kind()
                );
                seen += usize::from(node.field(name).is_some());
            }
        });
        assert!(seen > 8, "the fields were found ({seen})");
        assert_eq!(tree.root_node().field("no_such_field"), None);
    }
}
