//! An experiment for a lazy review (BENCHMARKS.md, "Twenty-first session"): parse only the
//! parts of each new version that a review of a local change starts from (its module-level
//! statements, class headers and class-level statements, and the functions the change touches)
//! with tree-sitter's included ranges, and check that those parts come out as the whole file's
//! parse has them. Prints what share of the bytes that is, what the partial parses cost against
//! whole ones, and every part whose tree differs.
//!
//! `cargo run --release --example partial_parse -- BASE_DIR HEAD_DIR [--methods] [--lexical]
//! [--touch-every N]`
//!
//! Without `--methods` a touched class is a part whole; with it, only its touched methods are,
//! next to its header and its statements that are not functions. The parts are found in the
//! whole file's tree; they are also found from the text's logical lines alone (no parse: what a
//! lazy review would have to do), and the two are compared; `--lexical` parses the parts found
//! so. `--touch-every N` takes every Nth line of each head file as touched and needs no base:
//! for any folder of Python sources.
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use tree_sitter::{Node, Parser, Point, Range, Tree};

/// The rows (0-based) of `new` that the line diff from `old` inserts or replaces, and, for a
/// deletion, the row after it.
fn touched_rows(old: &str, new: &str) -> Vec<bool> {
    let rows = new.lines().count() + 1;
    let mut touched = vec![false; rows];
    let diff = similar::TextDiff::from_lines(old, new);
    for op in diff.ops() {
        let (tag, _, range) = op.as_tag_tuple();
        match tag {
            similar::DiffTag::Equal => {}
            similar::DiffTag::Delete => touched[range.start.min(rows - 1)] = true,
            _ => range.for_each(|r| touched[r.min(rows - 1)] = true),
        }
    }
    touched
}

fn is_function(node: Node<'_>) -> bool {
    match node.kind() {
        "function_definition" => true,
        "decorated_definition" => node
            .child_by_field_name("definition")
            .is_some_and(|d| d.kind() == "function_definition"),
        _ => false,
    }
}

fn class_of(node: Node<'_>) -> Option<Node<'_>> {
    match node.kind() {
        "class_definition" => Some(node),
        "decorated_definition" => node
            .child_by_field_name("definition")
            .filter(|d| d.kind() == "class_definition"),
        _ => None,
    }
}

fn touches(node: Node<'_>, touched: &[bool]) -> bool {
    let (a, b) = (node.start_position().row, node.end_position().row);
    touched
        .get(a..=b.min(touched.len().saturating_sub(1)))
        .is_some_and(|rows| rows.iter().any(|t| *t))
}

/// A node's first and last rows.
fn rows(node: Node<'_>) -> (usize, usize) {
    let (start, end) = (node.start_position(), node.end_position());
    // A node that ends at the start of a line does not take that line.
    let last = if end.column == 0 && end.row > start.row {
        end.row - 1
    } else {
        end.row
    };
    (start.row, last)
}

/// The parts to parse, as rows of `node` (first and last), and the nodes they stand for.
fn parts<'t>(
    node: Node<'t>,
    touched: &[bool],
    methods: bool,
    parts_rows: &mut Vec<(usize, usize)>,
    units: &mut Vec<Node<'t>>,
) {
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        if child.kind() == "comment" {
            continue;
        }
        if is_function(child) {
            if touches(child, touched) {
                parts_rows.push(rows(child));
                units.push(child);
            }
        } else if let (true, Some(class)) = (methods, class_of(child)) {
            let Some(body) = class.child_by_field_name("body") else {
                continue;
            };
            let (mut inner, mut inner_units) = (Vec::new(), Vec::new());
            parts(body, touched, methods, &mut inner, &mut inner_units);
            // A header with no body is not Python: a class of untouched methods only is left
            // out whole.
            if !inner.is_empty() {
                // The header: decorators, `class X(...):` and its comments, up to the line of
                // the body's first statement.
                let header_end = body.start_position().row.saturating_sub(1);
                parts_rows.push((child.start_position().row, header_end));
                parts_rows.extend(inner);
                units.extend(inner_units);
            }
        } else {
            parts_rows.push(rows(child));
            units.push(child);
        }
    }
}

/// A logical line: its first and last rows, its indentation, and what it starts with.
#[derive(Debug)]
struct Logical {
    first: usize,
    last: usize,
    indent: usize,
    starts: Starts,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Starts {
    Def,
    Class,
    Decorator,
    /// `else`, `elif`, `except`, `finally`: a clause of the statement before.
    Clause,
    /// A line of a comment only: tree-sitter keeps one indented deeper than the statement
    /// before it in that statement.
    Comment,
    Other,
}

/// Scans Python text for its logical lines, the way the tokenizer delimits them: brackets,
/// strings (f-strings with nested ones), comments and backslash continuations. No parse.
fn logical_lines(text: &str) -> Vec<Logical> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut row) = (0usize, 0usize);
    while i < b.len() {
        // At the start of a physical line that begins a logical one.
        let mut indent = 0;
        while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\x0c') {
            indent = if b[i] == b'\t' {
                (indent / 8 + 1) * 8
            } else {
                indent + 1
            };
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        if b[i] == b'\n' || b[i] == b'\r' || b[i] == b'#' {
            if b[i] == b'#' {
                out.push(Logical {
                    first: row,
                    last: row,
                    indent,
                    starts: Starts::Comment,
                });
            }
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            i += 1;
            row += 1;
            continue;
        }
        let starts = starts_with(&b[i..]);
        let first = row;
        let mut depth = 0usize;
        loop {
            if i >= b.len() {
                break;
            }
            match b[i] {
                b'\n' => {
                    row += 1;
                    i += 1;
                    if depth == 0 {
                        break;
                    }
                }
                b'\\' => {
                    // A continuation, or a stray backslash: the next byte is taken as it is.
                    if b.get(i + 1) == Some(&b'\n') {
                        row += 1;
                    }
                    i += 2;
                }
                b'#' => {
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                }
                b'(' | b'[' | b'{' => {
                    depth += 1;
                    i += 1;
                }
                b')' | b']' | b'}' => {
                    depth = depth.saturating_sub(1);
                    i += 1;
                }
                b'\'' | b'"' => i = skip_string(b, i, &mut row),
                _ => i += 1,
            }
        }
        let last = if i > 0 && b.get(i - 1) == Some(&b'\n') {
            row - 1
        } else {
            row
        };
        out.push(Logical {
            first,
            last,
            indent,
            starts,
        });
    }
    out
}

fn starts_with(line: &[u8]) -> Starts {
    let word = |w: &[u8], at: &[u8]| {
        at.starts_with(w)
            && at
                .get(w.len())
                .is_some_and(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
    };
    if line.first() == Some(&b'@') {
        Starts::Decorator
    } else if word(b"def", line) {
        Starts::Def
    } else if word(b"class", line) {
        Starts::Class
    } else if [&b"else"[..], b"elif", b"except", b"finally"]
        .iter()
        .any(|w| word(w, line))
    {
        Starts::Clause
    } else if word(b"async", line) {
        let rest = line[5..]
            .iter()
            .position(|c| !matches!(c, b' ' | b'\t'))
            .map_or(&[][..], |p| &line[5 + p..]);
        if word(b"def", rest) {
            Starts::Def
        } else {
            Starts::Other
        }
    } else {
        Starts::Other
    }
}

/// From a quote at `i`, past the string it opens; `row` counts the newlines inside.
fn skip_string(b: &[u8], i: usize, row: &mut usize) -> usize {
    let quote = b[i];
    // The prefix letters right before the quote (`rb`, `f`, `Rf`, ...).
    let mut p = i;
    while p > 0 && b[p - 1].is_ascii_alphabetic() && i - p < 3 {
        p -= 1;
    }
    let prefix = &b[p..i];
    let f = (p == 0 || !(b[p - 1].is_ascii_alphanumeric() || b[p - 1] == b'_'))
        && prefix
            .iter()
            .any(|c| matches!(c, b'f' | b'F' | b't' | b'T'));
    let triple = b.get(i + 1) == Some(&quote) && b.get(i + 2) == Some(&quote);
    let mut j = if triple { i + 3 } else { i + 1 };
    while j < b.len() {
        match b[j] {
            b'\\' => {
                if b.get(j + 1) == Some(&b'\n') {
                    *row += 1;
                }
                j += 2;
            }
            b'\n' => {
                *row += 1;
                j += 1;
                if !triple {
                    // Unterminated: the tokenizer ends it here.
                    return j - 1;
                }
            }
            b'{' if f => {
                if b.get(j + 1) == Some(&b'{') {
                    j += 2;
                } else {
                    j = skip_replacement(b, j + 1, row);
                }
            }
            c if c == quote => {
                if !triple {
                    return j + 1;
                }
                if b.get(j + 1) == Some(&quote) && b.get(j + 2) == Some(&quote) {
                    return j + 3;
                }
                j += 1;
            }
            _ => j += 1,
        }
    }
    b.len()
}

/// From inside an f-string's `{`, past its matching `}`.
fn skip_replacement(b: &[u8], mut j: usize, row: &mut usize) -> usize {
    let mut depth = 0usize;
    while j < b.len() {
        match b[j] {
            b'\n' => {
                *row += 1;
                j += 1;
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                j += 1;
            }
            b')' | b']' => {
                depth = depth.saturating_sub(1);
                j += 1;
            }
            b'}' => {
                if depth == 0 {
                    return j + 1;
                }
                depth -= 1;
                j += 1;
            }
            b'\'' | b'"' => j = skip_string(b, j, row),
            _ => j += 1,
        }
    }
    b.len()
}

/// The parts to parse, as row ranges, from the logical lines alone: what `parts` finds in a
/// tree.
fn lexical_parts(
    lines: &[Logical],
    touched: &[bool],
    methods: bool,
    rows: &mut Vec<(usize, usize)>,
) {
    let is_touched = |a: usize, z: usize| {
        touched
            .get(a..=z.min(touched.len().saturating_sub(1)))
            .is_some_and(|r| r.iter().any(|t| *t))
    };
    let mut k = 0;
    while k < lines.len() {
        if lines[k].starts == Starts::Comment {
            k += 1;
            continue;
        }
        let level = lines[k].indent;
        let first = lines[k].first;
        // Decorators go with what they decorate.
        let mut head = k;
        while head < lines.len()
            && ((lines[head].starts == Starts::Decorator && lines[head].indent == level)
                || (head > k && lines[head].starts == Starts::Comment))
        {
            head += 1;
        }
        let kind = lines.get(head).map_or(Starts::Other, |l| l.starts);
        // The statement: its head line and every deeper line after it.
        // A comment line does not end it, whatever its indentation; one after its end is in it
        // if the statement has a body and the comment is indented as deep as the body at least,
        // with no shallower comment before it (tree-sitter's blocks keep such comments; a
        // shallower one comes after a dedent, and its simple statements keep none).
        let (mut j, mut end, mut body, mut dedented) = (head + 1, head + 1, None, false);
        while j < lines.len() {
            let line = &lines[j];
            let inside =
                line.indent > level || (line.indent == level && line.starts == Starts::Clause);
            if line.starts != Starts::Comment && !inside {
                break;
            }
            if line.starts != Starts::Comment {
                end = j + 1;
                dedented = false;
                if line.indent > level {
                    body.get_or_insert(line.indent);
                }
            } else if body.is_some_and(|b| line.indent >= b) && !dedented {
                end = j + 1;
            } else {
                dedented = true;
            }
            j += 1;
        }
        let end = end.min(lines.len());
        let last = lines[end - 1].last;
        // The body of a class: its first line that is not a comment.
        let body = (head + 1..end).find(|&l| lines[l].starts != Starts::Comment);
        match kind {
            Starts::Def => {
                if is_touched(first, last) {
                    rows.push((first, last));
                }
            }
            Starts::Class if methods && body.is_some() => {
                let body = body.unwrap_or(end);
                let mut inner = Vec::new();
                lexical_parts(&lines[body..end], touched, methods, &mut inner);
                if !inner.is_empty() {
                    rows.push((first, lines[body].first - 1));
                    rows.extend(inner);
                }
            }
            _ => rows.push((first, last)),
        }
        k = end;
    }
}

/// Row ranges as tree-sitter ranges over whole lines, merged where they meet.
fn row_ranges(text: &str, rows: &[(usize, usize)]) -> Vec<Range> {
    let starts: Vec<usize> = std::iter::once(0)
        .chain(
            text.bytes()
                .enumerate()
                .filter(|(_, c)| *c == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect();
    let at = |row: usize| {
        starts
            .get(row)
            .copied()
            .unwrap_or(text.len())
            .min(text.len())
    };
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for &(a, z) in rows {
        match merged.last_mut() {
            Some(last) if a <= last.1 + 1 => last.1 = last.1.max(z),
            _ => merged.push((a, z)),
        }
    }
    let point = |row: usize| {
        let byte = at(row);
        match starts.get(row) {
            Some(_) => Point::new(row, 0),
            // Past the last newline: the end of a last line without one.
            None => Point::new(starts.len() - 1, byte - starts[starts.len() - 1]),
        }
    };
    merged
        .into_iter()
        .map(|(a, z)| Range {
            start_byte: at(a),
            end_byte: at(z + 1),
            start_point: point(a),
            end_point: point(z + 1),
        })
        .collect()
}

fn parse(parser: &mut Parser, text: &str, ranges: &[Range]) -> (Option<Tree>, Duration) {
    parser
        .set_included_ranges(ranges)
        .expect("sorted, disjoint ranges");
    let start = Instant::now();
    let tree = parser.parse(text, None);
    (tree, start.elapsed())
}

/// The node of `tree` with `unit`'s kind and bytes, if the partial parse made one.
fn same_node<'t>(tree: &'t Tree, unit: Node<'_>) -> Option<Node<'t>> {
    let mut node = tree
        .root_node()
        .descendant_for_byte_range(unit.start_byte(), unit.end_byte())?;
    loop {
        if node.kind() == unit.kind() && node.byte_range() == unit.byte_range() {
            return Some(node);
        }
        node = node.parent()?;
        if node.start_byte() < unit.start_byte() || node.end_byte() > unit.end_byte() {
            return None;
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(base), Some(head)) = (args.first(), args.get(1)) else {
        eprintln!(
            "usage: partial_parse BASE_DIR HEAD_DIR [--methods] [--lexical] [--touch-every N]"
        );
        std::process::exit(2);
    };
    let methods = args.iter().any(|a| a == "--methods");
    let lexical = args.iter().any(|a| a == "--lexical");
    let every: Option<usize> = args
        .iter()
        .position(|a| a == "--touch-every")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .filter(|n| *n > 0);
    let mut files = Vec::new();
    common::python_files(Path::new(head), &mut files);
    files.sort();
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_python::LANGUAGE.into())
        .expect("the grammar is compiled in");
    let (mut total, mut included) = (0usize, 0usize);
    let (mut whole_time, mut part_time, mut scan_time) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let (mut files_read, mut same_ranges) = (0usize, 0usize);
    let (mut units_total, mut differ, mut files_with_errors) = (0usize, 0usize, 0usize);
    for path in &files {
        let rel = path.strip_prefix(head).unwrap_or(path);
        let Ok(new) = std::fs::read_to_string(path) else {
            continue;
        };
        let old = std::fs::read_to_string(Path::new(base).join(rel)).unwrap_or_default();
        if old == new && every.is_none() {
            continue;
        }
        let touched = match every {
            // Every nth row as if touched: for sources without a change.
            Some(n) => (0..=new.lines().count()).map(|r| r % n == n / 2).collect(),
            None => touched_rows(&old, &new),
        };
        let (Some(whole), t_whole) = parse(&mut parser, &new, &[]) else {
            continue;
        };
        let mut tree_rows = Vec::new();
        let mut units = Vec::new();
        parts(
            whole.root_node(),
            &touched,
            methods,
            &mut tree_rows,
            &mut units,
        );
        let from_tree = row_ranges(&new, &tree_rows);
        let start = Instant::now();
        let lines = logical_lines(&new);
        let mut rows = Vec::new();
        lexical_parts(&lines, &touched, methods, &mut rows);
        let from_lines = row_ranges(&new, &rows);
        scan_time += start.elapsed();
        files_read += 1;
        let bytes = |r: &[Range]| {
            r.iter()
                .map(|r| (r.start_byte, r.end_byte))
                .collect::<Vec<_>>()
        };
        if bytes(&from_tree) == bytes(&from_lines) {
            same_ranges += 1;
        } else if files_read - same_ranges <= 10 {
            // Rows, 1-based, first to last.
            println!(
                "ranges differ: {}\n  tree  {:?}\n  lines {:?}",
                rel.display(),
                from_tree
                    .iter()
                    .map(|r| (r.start_point.row + 1, r.end_point.row))
                    .collect::<Vec<_>>(),
                from_lines
                    .iter()
                    .map(|r| (r.start_point.row + 1, r.end_point.row))
                    .collect::<Vec<_>>()
            );
        }
        let ranges = if lexical { from_lines } else { from_tree };
        if ranges.is_empty() {
            continue;
        }
        let (Some(partial), t_part) = parse(&mut parser, &new, &ranges) else {
            continue;
        };
        total += new.len();
        included += ranges
            .iter()
            .map(|r| r.end_byte - r.start_byte)
            .sum::<usize>();
        whole_time += t_whole;
        part_time += t_part;
        if partial.root_node().has_error() && !whole.root_node().has_error() {
            files_with_errors += 1;
        }
        for unit in units {
            units_total += 1;
            let same = same_node(&partial, unit).is_some_and(|n| n.to_sexp() == unit.to_sexp());
            if !same {
                differ += 1;
                if differ <= 10 {
                    println!(
                        "differs: {}:{} {}",
                        rel.display(),
                        unit.start_position().row + 1,
                        unit.kind()
                    );
                }
            }
        }
    }
    let share = |a: f64, b: f64| if b > 0.0 { 100.0 * a / b } else { 0.0 };
    println!(
        "{} bytes of new text, {} parsed ({:.1}%); parse {:.3} s whole, {:.3} s partial ({:.1}%)",
        total,
        included,
        share(included as f64, total as f64),
        whole_time.as_secs_f64(),
        part_time.as_secs_f64(),
        share(part_time.as_secs_f64(), whole_time.as_secs_f64()),
    );
    println!(
        "{units_total} parts, {differ} parsed differently; {files_with_errors} files with errors only when parsed in part"
    );
    println!(
        "parts found from the lines alone: the same ranges in {same_ranges} of {files_read} files; the scan took {:.3} s ({:.1}% of the whole parse)",
        scan_time.as_secs_f64(),
        share(scan_time.as_secs_f64(), whole_time.as_secs_f64()),
    );
}
