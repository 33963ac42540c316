//! The edits that turn one version of a file into the other, for tree-sitter's incremental
//! parse: the old version is parsed from the new version's tree, so that only what the change
//! touched is parsed twice.
//!
//! The edits come from the diff's hunks, but the hunks are untrusted: the text between them
//! must be byte-for-byte the same in both versions, or there are no edits and the caller parses
//! from scratch. Wrong edits would give a tree that does not match its text.

use tree_sitter::{InputEdit, Point};

/// A changed block as a hunk header gives it: `(start, count)` lines on each side, 1-based;
/// a count of 0 means an empty block just after line `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub from: (u32, u32),
    pub to: (u32, u32),
}

/// Byte offsets where the lines of `text` start, and the text's length at the end.
struct Lines<'a> {
    text: &'a [u8],
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Self {
        let text = text.as_bytes();
        let mut starts = vec![0];
        starts.extend(memchr::memchr_iter(b'\n', text).map(|i| i + 1));
        if starts.last() == Some(&text.len()) && !text.is_empty() {
            // A final newline ends the last line; it does not start another.
            starts.pop();
        }
        Lines { text, starts }
    }

    /// Offset of 0-based line `i`; the end of the text for the line just past the last.
    fn offset(&self, i: usize) -> Option<usize> {
        match self.starts.get(i) {
            Some(&o) => Some(o),
            None if i == self.starts.len() => Some(self.text.len()),
            None => None,
        }
    }

    /// Byte range of a block `(start, count)`.
    fn range(&self, (start, count): (u32, u32)) -> Option<(usize, usize)> {
        let first = if count == 0 {
            start as usize
        } else {
            (start as usize).checked_sub(1)?
        };
        Some((
            self.offset(first)?,
            self.offset(first.checked_add(count as usize)?)?,
        ))
    }

    fn point(&self, byte: usize) -> Point {
        let row = self
            .starts
            .partition_point(|&s| s <= byte)
            .saturating_sub(1);
        Point::new(row, byte - self.starts.get(row).copied().unwrap_or(0))
    }
}

/// The edits, last first (the order to apply them in, so that each one's positions are still
/// those of `from`), that turn `from` into `to`; `None` when the blocks do not describe the two
/// texts.
pub fn edits(from: &str, to: &str, blocks: &[Block]) -> Option<Vec<InputEdit>> {
    let (f, t) = (Lines::new(from), Lines::new(to));
    let mut edits = Vec::new();
    let (mut f_done, mut t_done) = (0, 0);
    for block in blocks {
        let (fa, fb) = f.range(block.from)?;
        let (ta, tb) = t.range(block.to)?;
        // In order, not overlapping, and the same text since the previous block.
        if fa < f_done || ta < t_done || f.text.get(f_done..fa)? != t.text.get(t_done..ta)? {
            return None;
        }
        (f_done, t_done) = (fb, tb);
        // Only the bytes that differ: context lines and a shared start or end of a line need
        // not be parsed again.
        let (fs, ts) = (&f.text[fa..fb], &t.text[ta..tb]);
        let mut prefix = fs.iter().zip(ts).take_while(|(a, b)| a == b).count();
        let rest = |s: &[u8], p: usize| s.len() - p;
        let mut suffix = fs[prefix..]
            .iter()
            .rev()
            .zip(ts[prefix..].iter().rev())
            .take_while(|(a, b)| a == b)
            .count()
            .min(rest(fs, prefix).min(rest(ts, prefix)));
        // Never split a character.
        while prefix > 0
            && !(from.is_char_boundary(fa + prefix) && to.is_char_boundary(ta + prefix))
        {
            prefix -= 1;
        }
        while suffix > 0
            && !(from.is_char_boundary(fb - suffix) && to.is_char_boundary(tb - suffix))
        {
            suffix -= 1;
        }
        let (start, old_end) = (fa + prefix, fb - suffix);
        let (t_start, t_end) = (ta + prefix, tb - suffix);
        if start == old_end && t_start == t_end {
            continue;
        }
        let start_position = f.point(start);
        let (t_from, t_to) = (t.point(t_start), t.point(t_end));
        edits.push(InputEdit {
            start_byte: start,
            old_end_byte: old_end,
            new_end_byte: start + (t_end - t_start),
            start_position,
            old_end_position: f.point(old_end),
            new_end_position: Point::new(start_position.row + (t_to.row - t_from.row), t_to.column),
        });
    }
    if f.text.get(f_done..)? != t.text.get(t_done..)? {
        return None;
    }
    edits.reverse();
    Some(edits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{blocks_between, edit_lines, fixture_sources};

    fn block(from: (u32, u32), to: (u32, u32)) -> Block {
        Block { from, to }
    }

    /// `from` with the edits applied in their order, each replacing its byte range with the
    /// bytes of `to` it stands for: `to` again when the edits are right.
    fn apply(from: &str, to: &str, edits: &[InputEdit]) -> String {
        let mut text = from.to_string();
        for e in edits {
            // In `to`, this edit starts later (or earlier) by what the edits before it in the
            // text, not yet applied, add.
            let shift: isize = edits
                .iter()
                .filter(|o| o.start_byte < e.start_byte)
                .map(|o| o.new_end_byte as isize - o.old_end_byte as isize)
                .sum();
            let t_start = (e.start_byte as isize + shift) as usize;
            let replacement = &to[t_start..t_start + (e.new_end_byte - e.start_byte)];
            text.replace_range(e.start_byte..e.old_end_byte, replacement);
        }
        text
    }

    /// The tree of `to` parsed from the edited tree of `from` is the tree of a fresh parse.
    fn assert_incremental_parse_matches(from: &str, to: &str, edits: &[InputEdit]) {
        let base = crate::python::parse(from).expect("parses");
        let again = crate::python::parse_edited(to, &base, edits).expect("parses");
        let fresh = crate::python::parse(to).expect("parses");
        assert_eq!(again.root_node().to_sexp(), fresh.root_node().to_sexp());
    }

    #[test]
    fn a_changed_line_is_one_edit_of_the_bytes_that_differ() {
        let from = "a = 1\nb = 2\nc = 3\n";
        let to = "a = 1\nb = 22\nc = 3\n";
        let e = edits(from, to, &[block((1, 3), (1, 3))]).expect("the texts match the block");
        assert_eq!(e.len(), 1);
        // "b = 2" → "b = 22": one byte inserted after the shared "b = 2".
        assert_eq!(
            (e[0].start_byte, e[0].old_end_byte, e[0].new_end_byte),
            (11, 11, 12)
        );
        assert_eq!(e[0].start_position, Point::new(1, 5));
        assert_eq!(e[0].new_end_position, Point::new(1, 6));
        assert_eq!(apply(from, to, &e), to);
    }

    #[test]
    fn insertions_and_deletions_in_several_blocks_rebuild_the_other_text() {
        let from = "one\ntwo\nthree\nfour\nfive\n";
        let to = "zero\none\nthree\nfour\nfour and a half\nfive\n";
        // Line 1 inserted before "one", "two" deleted, a line inserted after "four".
        let blocks = [
            block((0, 0), (1, 1)),
            block((2, 1), (2, 0)),
            block((4, 0), (5, 1)),
        ];
        let e = edits(from, to, &blocks).expect("the texts match the blocks");
        assert_eq!(e.len(), 3);
        assert!(
            e.windows(2).all(|w| w[0].start_byte > w[1].start_byte),
            "last first"
        );
        assert_eq!(apply(from, to, &e), to);
    }

    #[test]
    fn blocks_that_do_not_describe_the_texts_give_no_edits() {
        let from = "a\nb\nc\n";
        // The text outside the block differs: the hunks were made for other files.
        assert_eq!(edits(from, "a\nB\nX\n", &[block((2, 1), (2, 1))]), None);
        // Past the end of the text.
        assert_eq!(edits(from, from, &[block((3, 5), (3, 5))]), None);
        // Out of order.
        assert_eq!(
            edits(from, from, &[block((3, 1), (3, 1)), block((1, 1), (1, 1))]),
            None
        );
    }

    #[test]
    fn a_multibyte_character_is_never_split() {
        let from = "s = 'é'\n";
        let to = "s = 'è'\n";
        let e = edits(from, to, &[block((1, 1), (1, 1))]).expect("the texts match the block");
        for edit in &e {
            assert!(
                from.is_char_boundary(edit.start_byte) && from.is_char_boundary(edit.old_end_byte)
            );
        }
        assert_eq!(apply(from, to, &e), to);
    }

    #[test]
    fn a_last_line_without_a_newline_is_a_line() {
        let e = edits("a\nb", "a\nc", &[block((2, 1), (2, 1))]).expect("matches");
        assert_eq!(apply("a\nb", "a\nc", &e), "a\nc");
    }

    #[test]
    fn the_old_tree_parsed_from_the_new_one_is_the_tree_of_a_fresh_parse() {
        let new = "import time\n\n\ndef pay(order):\n    for attempt in range(3):\n        try:\n            return client.charge(order.amount, key=order.key)\n        except Timeout:\n            time.sleep(2 ** attempt)\n    return None\n\n\nclass Refunds:\n    def refund(self, charge):\n        return client.refund(charge)\n";
        let old = "import time\n\n\ndef pay(order):\n    return client.charge(order.amount)\n\n\nclass Refunds:\n    def refund(self, charge, reason):\n        return client.refund(charge, reason=reason)\n";
        let blocks = [block((5, 6), (5, 1)), block((14, 2), (9, 2))];
        let e = edits(new, old, &blocks).expect("the texts match the blocks");
        assert_eq!(apply(new, old, &e), old);
        assert_incremental_parse_matches(new, old, &e);
        // And the other way round, with the blocks mirrored.
        let mirrored: Vec<Block> = blocks.iter().map(|b| block(b.to, b.from)).collect();
        let back = edits(old, new, &mirrored).expect("the texts match the blocks");
        assert_eq!(apply(old, new, &back), new);
        assert_incremental_parse_matches(old, new, &back);
    }

    /// Tokens the parser lexes to parse `text`, from the edited tree `old` or from nothing.
    fn lexed_tokens(text: &str, old: Option<&tree_sitter::Tree>) -> usize {
        let lexed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = std::sync::Arc::clone(&lexed);
        let mut parser = tree_sitter::Parser::new();
        parser
            .set_language(&tree_sitter_python::LANGUAGE.into())
            .expect("the grammar loads");
        parser.set_logger(Some(Box::new(move |_, message: &str| {
            if message.starts_with("lexed_lookahead") {
                count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        })));
        parser.parse(text, old).expect("parses");
        lexed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The fix in `vendor/tree-sitter` (see `vendor/README.md`): after a statement put at the
    /// start of a method, the release parsed every method and function after it again, lexing
    /// nearly the whole file; with the fix, what follows the edited method is reused.
    #[test]
    fn an_edited_method_leaves_the_rest_of_the_file_reused() {
        let method =
            |i: usize| format!("    def m{i}(self, x):\n        y = x + {i}\n        return y\n\n");
        let function = |i: usize| format!("def f{i}(x):\n    return x * {i}\n\n\n");
        let head = format!("class C:\n{}", method(0));
        let rest: String = (1..60)
            .map(method)
            .chain(std::iter::once("\n".to_string()))
            .chain((0..60).map(function))
            .collect();
        let new = format!("{head}{rest}");
        // The old version lacks the first statement of `m0`.
        let old = new.replacen("        y = x + 0\n", "", 1);
        let e = edits(&new, &old, &blocks_between(&new, &old)).expect("the texts match the block");
        let mut base = crate::python::parse(&new).expect("parses");
        for edit in &e {
            base.edit(edit);
        }
        let fresh = lexed_tokens(&old, None);
        let again = lexed_tokens(&old, Some(&base));
        assert!(
            again * 8 < fresh,
            "the incremental parse lexed {again} tokens of the {fresh} of a fresh parse"
        );
        assert_incremental_parse_matches(&new, &old, &e);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]
        /// Lines deleted, copied elsewhere or changed in place in real files: the edits rebuild
        /// the other text, and the incremental parse gives the fresh parse's tree.
        #[test]
        fn random_line_edits_of_fixture_files_parse_as_from_scratch(
            pick in 0usize..1000,
            changes in proptest::collection::vec((0usize..1000, 0usize..1000, 0u8..3), 1..6),
        ) {
            let sources = fixture_sources();
            proptest::prop_assume!(!sources.is_empty());
            let from = &sources[pick % sources.len()];
            let to = edit_lines(from, &changes);
            let blocks = blocks_between(from, &to);
            let e = edits(from, &to, &blocks).expect("a line diff describes its texts");
            proptest::prop_assert_eq!(apply(from, &to, &e), to.clone());
            assert_incremental_parse_matches(from, &to, &e);
        }
    }
}
