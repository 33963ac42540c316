//! Diff-only reconstruction: each side of a file as far as its hunks show it.
//!
//! Lines keep their real numbers: what the diff does not show becomes blank lines, and the lines
//! just above a hunk get the `def`/`class` line from the hunk's `@@ … @@ section` (plus neutral
//! `if True:` openers where the indentation needs them) so that an indented fragment still parses
//! inside its function.

use crate::diff::{Hunk, LineKind};

use super::linemap::first_line;
use super::{Side, Version};

/// Rebuilds one side of a file from its hunks.
pub fn rebuild(hunks: &[Hunk], side: Side) -> Version {
    let mut lines: Vec<String> = Vec::new();
    let mut shown: Vec<bool> = Vec::new();
    let mut synthetic = Vec::new();
    let mut ends_without_newline = false;
    for hunk in hunks {
        let (start, count) = match side {
            Side::Old => (hunk.old_start, hunk.old_count),
            Side::New => (hunk.new_start, hunk.new_count),
        };
        let first = first_line(start, count) as usize;
        let body: Vec<&str> = hunk
            .lines
            .iter()
            .filter(|l| on_side(l.kind, side))
            .map(|l| l.text.as_str())
            .collect();
        // Blank filler up to the hunk; the filler is where synthetic openers may go.
        let gap_start = lines.len();
        while lines.len() + 1 < first {
            lines.push(String::new());
            shown.push(false);
        }
        let gap = gap_start..lines.len();
        let openers = openers_for(&hunk.section, &body);
        let room = gap.len().min(openers.len());
        let skip = openers.len() - room;
        for (offset, opener) in openers.iter().skip(skip).enumerate() {
            let at = gap.end - room + offset;
            if let Some(slot) = lines.get_mut(at) {
                *slot = opener.clone();
                synthetic.push(line_number(at));
            }
        }
        for line in hunk.lines.iter().filter(|l| on_side(l.kind, side)) {
            lines.push(line.text.clone());
            shown.push(true);
            ends_without_newline = line.no_newline;
        }
    }
    let text = super::join_lines(&lines, !ends_without_newline);
    Version {
        text: std::sync::Arc::new(text),
        partial: shown.iter().any(|s| !s),
        synthetic,
    }
}

fn on_side(kind: LineKind, side: Side) -> bool {
    matches!(
        (kind, side),
        (LineKind::Context, _) | (LineKind::Added, Side::New) | (LineKind::Removed, Side::Old)
    )
}

fn line_number(index: usize) -> u32 {
    u32::try_from(index + 1).unwrap_or(u32::MAX)
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches([' ', '\t']).len()
}

/// The lines to put above a hunk so that its statements nest as they do in the real file:
/// outermost first, each opening the block of the next indentation level.
fn openers_for(section: &str, body: &[&str]) -> Vec<String> {
    let Some((first_indent, levels)) = block_levels(body) else {
        return Vec::new();
    };
    // The section names the def/class the hunk starts in; it encloses the first line only if
    // it sits shallower.
    let header = header_line(section).filter(|(indent, _)| *indent < first_indent);
    let mut all = vec![0];
    all.extend(header.as_ref().map(|(indent, _)| *indent));
    all.extend(levels);
    all.sort_unstable();
    all.dedup();
    chain(&all, header.as_ref())
}

/// One opener per step between consecutive levels, placed at the lower level.
fn chain(levels: &[usize], header: Option<&(usize, String)>) -> Vec<String> {
    levels
        .windows(2)
        .filter_map(|pair| {
            let [outer, _inner] = pair else { return None };
            Some(match header {
                Some((indent, text)) if indent == outer => text.clone(),
                _ => format!("{}if True:", " ".repeat(*outer)),
            })
        })
        .collect()
}

/// The indentation levels a fragment's statements sit at, when the fragment starts deeper than
/// some of its later lines: `[4, 8]` for a hunk that starts at 8 spaces and dedents to 4.
/// Lines inside brackets, blank lines and comments do not count.
fn block_levels(body: &[&str]) -> Option<(usize, Vec<usize>)> {
    let mut stack: Vec<usize> = Vec::new();
    let mut needed: Vec<usize> = Vec::new();
    let mut depth: i64 = 0;
    for line in body {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if depth == 0 {
            let indent = indent_of(line);
            match stack.last() {
                None => {
                    stack.push(indent);
                    needed.push(indent);
                }
                Some(&top) if indent > top => stack.push(indent),
                Some(_) => {
                    while stack.last().is_some_and(|&top| top > indent) {
                        stack.pop();
                    }
                    if stack.last() != Some(&indent) {
                        stack.push(indent);
                        needed.push(indent);
                    }
                }
            }
        }
        depth += bracket_balance(trimmed);
        depth = depth.max(0);
    }
    let first = *needed.first()?;
    needed.sort_unstable();
    needed.dedup();
    Some((first, needed))
}

/// Net brackets opened by a line, ignoring brackets inside simple string literals and comments.
fn bracket_balance(line: &str) -> i64 {
    let mut balance = 0;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in line.chars() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '#' => break,
            '\'' | '"' => quote = Some(c),
            '(' | '[' | '{' => balance += 1,
            ')' | ']' | '}' => balance -= 1,
            _ => {}
        }
    }
    balance
}

/// A `def`/`class` line to re-create from a hunk's section header, with its indentation. A
/// header that git cut short (`def create_charge(`) becomes `def create_charge(*args, **kwargs):`.
fn header_line(section: &str) -> Option<(usize, String)> {
    let indent = indent_of(section);
    let body = section.trim();
    let rest = body
        .strip_prefix("async def ")
        .or_else(|| body.strip_prefix("def "))
        .map(|r| ("def", r))
        .or_else(|| body.strip_prefix("class ").map(|r| ("class", r)))?;
    let (keyword, rest) = rest;
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if name.is_empty() {
        return None;
    }
    let pad = " ".repeat(indent);
    let complete = body.ends_with(':') && bracket_balance(body) == 0;
    let line = if complete {
        format!("{pad}{body}")
    } else if keyword == "class" {
        format!("{pad}class {name}:")
    } else {
        let prefix = if body.starts_with("async ") {
            "async "
        } else {
            ""
        };
        format!("{pad}{prefix}def {name}(*args, **kwargs):")
    };
    Some((indent, line))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::HunkLine;

    fn hunk(new_start: u32, section: &str, body: &[&str]) -> Hunk {
        let lines: Vec<HunkLine> = body
            .iter()
            .map(|t| HunkLine {
                kind: LineKind::Context,
                text: (*t).to_string(),
                no_newline: false,
                diff_line: 0,
            })
            .collect();
        let count = u32::try_from(lines.len()).unwrap_or(0);
        Hunk {
            old_start: new_start,
            old_count: count,
            new_start,
            new_count: count,
            section: section.to_string(),
            lines,
            diff_line: 0,
        }
    }

    #[test]
    fn keeps_real_line_numbers_and_recreates_the_def() {
        let h = hunk(
            10,
            "def pay(order) -> Result:",
            &["    x = 1", "    return charge(x)"],
        );
        let v = rebuild(&[h], Side::New);
        let lines: Vec<&str> = v.text.lines().collect();
        assert_eq!(lines.len(), 11);
        assert_eq!(lines[8], "def pay(order) -> Result:");
        assert_eq!(lines[9], "    x = 1");
        assert_eq!(v.synthetic, [9]);
        assert!(v.partial);
    }

    #[test]
    fn opens_intermediate_blocks_for_a_fragment_that_dedents() {
        let h = hunk(
            20,
            "def process(order_id):",
            &[
                "        log()",
                "        return",
                "",
                "    result = charge(order_id)",
            ],
        );
        let v = rebuild(&[h], Side::New);
        let lines: Vec<&str> = v.text.lines().collect();
        assert_eq!(lines[17], "def process(order_id):");
        assert_eq!(lines[18], "    if True:");
        assert!(crate::python::parse(&v.text).is_some_and(|t| !t.root_node().has_error()));
    }

    #[test]
    fn cut_short_headers_become_parseable() {
        assert_eq!(
            header_line("    async def create_charge(").map(|h| h.1),
            Some("    async def create_charge(*args, **kwargs):".to_string())
        );
        assert_eq!(header_line("SOME_CONSTANT = 1"), None);
    }

    #[test]
    fn method_fragments_get_a_class_level_opener() {
        let h = hunk(
            30,
            "    def charge(self):",
            &["        return self.client.post()"],
        );
        let v = rebuild(&[h], Side::New);
        let lines: Vec<&str> = v.text.lines().collect();
        assert_eq!(lines[27], "if True:");
        assert_eq!(lines[28], "    def charge(self):");
        assert!(crate::python::parse(&v.text).is_some_and(|t| !t.root_node().has_error()));
    }
}
