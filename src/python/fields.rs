//! Children by field name, with the name looked up once.
//!
//! `Node::child_by_field_name` finds the field's id by comparing the name with every field name
//! of the grammar, on every call; rules and the facts pass ask it hundreds of thousands of times
//! on a large change. The ids are read once here and the child is found by id.

use std::collections::HashMap;
use std::num::NonZeroU16;
use std::sync::OnceLock;

use tree_sitter::Node;

fn field_id(name: &str) -> Option<NonZeroU16> {
    static IDS: OnceLock<HashMap<String, NonZeroU16>> = OnceLock::new();
    IDS.get_or_init(|| {
        let language: tree_sitter::Language = tree_sitter_python::LANGUAGE.into();
        (1..=language.field_count() as u16)
            .filter_map(|id| {
                Some((
                    language.field_name_for_id(id)?.to_string(),
                    NonZeroU16::new(id)?,
                ))
            })
            .collect()
    })
    .get(name)
    .copied()
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
