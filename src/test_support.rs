//! Helpers shared by the unit tests of the incremental parse and of derived facts.

use crate::python::Block;

/// The blocks a line diff gives from `from` to `to`, as a hunk header would write them.
pub fn blocks_between(from: &str, to: &str) -> Vec<Block> {
    let header = |range: std::ops::Range<usize>| {
        let count = range.len() as u32;
        let start = range.start as u32;
        (if count == 0 { start } else { start + 1 }, count)
    };
    similar::TextDiff::from_lines(from, to)
        .ops()
        .iter()
        .filter(|op| op.tag() != similar::DiffTag::Equal)
        .map(|op| Block {
            from: header(op.old_range()),
            to: header(op.new_range()),
        })
        .collect()
}

/// The Python files of the fixtures: real code of the kind payreview reviews.
pub fn fixture_sources() -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures"
    ))];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "py")
                && let Ok(text) = std::fs::read_to_string(&path)
            {
                out.push(text);
            }
        }
    }
    out.sort();
    out
}
