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

/// `text` with line edits applied, each `(at, other, how)`: `how` 0 removes line `at`, 1 copies
/// line `other` before it, 2 breaks it with an open bracket, 3 puts a call line before it at its
/// indentation, 4 indents it further, 5 renames its first `self`. Line numbers wrap around.
pub fn edit_lines(text: &str, changes: &[(usize, usize, u8)]) -> String {
    let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_string).collect();
    for &(at, other, how) in changes {
        if lines.is_empty() {
            break;
        }
        let (at, other) = (at % lines.len(), other % lines.len());
        match how {
            0 => {
                lines.remove(at);
            }
            1 => {
                let copy = lines[other].clone();
                lines.insert(at, copy);
            }
            2 => lines[at] = lines[at].replacen(' ', "  x = (", 1),
            3 => {
                let indent = lines[at].len() - lines[at].trim_start().len();
                let line = format!("{}x = call_{other}(y)\n", &lines[at][..indent]);
                lines.insert(at, line);
            }
            4 => lines[at] = format!("    {}", lines[at]),
            _ => lines[at] = lines[at].replacen("self", "cls", 1),
        }
    }
    lines.concat()
}
