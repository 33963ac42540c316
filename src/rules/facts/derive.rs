//! The old version's facts from the new version's, without parsing the old version whole.
//!
//! A pull request usually changes a few functions of a file; the rest is the same text, some
//! lines up or down. A function's facts come from its own code and the file's imports, so where
//! the hunks leave the code alone the old facts are the new ones with their lines shifted. Only
//! the old text of what the hunks touch is parsed, inside a copy of the old version in which the
//! untouched code is blanked down to its newlines (so every line keeps its number), with the
//! headers of the classes whose methods changed kept for their names.
//!
//! The unit of "touched" is a module-level statement, or a statement of the body of a
//! module-level class (a method), with the blank lines and comments after it; text the old
//! version has at the boundary of two units belongs to the second. Any doubt about the old
//! version's structure gives `None`, and the caller parses the old version whole:
//! - the hunks do not describe the two texts, or the new version has syntax errors;
//! - the touched text holds different import statements in the two versions (imports may
//!   classify calls anywhere in the file);
//! - the old text of a touched run does not parse by itself, or does not stay inside the class
//!   or module it replaces (a removed `class` line moves the methods after it to another class);
//! - too much of the file is touched for this to be cheaper than an incremental parse.
//!
//! `tests` compares the result with the facts of the old version parsed whole, on random edits
//! of the fixtures' files.

use super::{CacheBinding, FileFacts, gather_code};
use crate::config::Vocabulary;
use crate::python::{Block, Fields, ParsedFile, kinds, syntax};

/// Share of the new version's bytes, in tenths, above which the old version is parsed whole
/// (incrementally, from the new tree) instead. Deriving parses the touched text again and walks
/// only it; the incremental parse costs a little per edit plus a walk of the whole old tree.
/// Since tree-sitter reuses what follows an edited statement (`vendor/README.md`), the
/// incremental parse wins from about a third of the file touched: instructions for a whole
/// review of the small dense workload, 1.601 G at 2, 1.600 G at 3, 1.605 G at 4, 1.709 G at 6,
/// 1.779 G at 8; medium dense 4.438 G at 2, 4.429 G at 3, 4.444 G at 4, 4.787 G at 8. Sparse
/// workloads, whose files are touched far less, do not move.
const MAX_TOUCHED_TENTHS: usize = 3;

/// Where a unit sits: at module level, the header of the `k`th module-level class (up to its
/// first statement), or a statement of that class's body.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Place {
    Module,
    Header(usize),
    Member(usize),
}

/// A unit of the new version: from `start` (a line start) to the next unit's start.
#[derive(Debug)]
struct Unit {
    start: usize,
    place: Place,
    touched: bool,
}

/// A run of touched units: its bytes in the new and old versions, where its old text went in
/// the blanked copy, and the class whose body it is part of (`None`: the module).
struct Run {
    new: (usize, usize),
    old: (usize, usize),
    copy: (usize, usize),
    class: Option<usize>,
}

/// The old version's facts, when they can be had from `new_facts` and a parse of what the
/// hunks touched; `blocks` go from the new version to the old one, as `ParsedFile::parse_from`
/// takes them.
pub fn derive_old(
    new: &ParsedFile,
    new_facts: &FileFacts,
    old: &str,
    blocks: &[Block],
    vocab: &Vocabulary,
) -> Option<FileFacts> {
    let text = new.text();
    if new.root().has_error() {
        return None;
    }
    let mut edits = crate::python::edits(text, old, blocks)?;
    if edits.is_empty() {
        return Some(new_facts.clone());
    }
    edits.reverse();
    let mut units = units(new);
    let end = |units: &[Unit], i: usize| unit_end(units, i, text.len());
    for e in &edits {
        let (s, t) = (e.start_byte, e.old_end_byte);
        let first = units.partition_point(|u| u.start <= s).saturating_sub(1);
        for i in first..units.len() {
            let (a, b) = (units[i].start, end(&units, i));
            if a > t || (a == t && s < t) {
                break;
            }
            // Text put in at a boundary belongs to the unit after it; whether it really starts
            // there in the old version is checked (`same_indent`).
            let touches = if s < t {
                a < t && s < b
            } else {
                (a <= s && s < b) || (s == text.len() && i + 1 == units.len())
            };
            units[i].touched |= touches;
        }
    }
    close_classes(&mut units);
    let touched: usize = (0..units.len())
        .filter(|&i| units[i].touched)
        .map(|i| end(&units, i) - units[i].start)
        .sum();
    if touched * 10 > text.len() * MAX_TOUCHED_TENTHS {
        return None;
    }
    // Old offset of a new offset that no edit spans: an edit that ends there is before it,
    // text put in there is after it (it belongs to the unit that starts there).
    let shifts: Vec<(usize, usize, isize)> = edits
        .iter()
        .scan(0isize, |acc, e| {
            *acc += e.new_end_byte as isize - e.old_end_byte as isize;
            Some((e.start_byte, e.old_end_byte, *acc))
        })
        .collect();
    let old_at = |x: usize| -> usize {
        if x == text.len() {
            return old.len();
        }
        let before = shifts.partition_point(|&(s, t, _)| t < x || (t == x && s < x));
        let shift = before.checked_sub(1).map_or(0, |i| shifts[i].2);
        (x as isize + shift) as usize
    };
    let needed: Vec<bool> = {
        let mut needed = vec![false; class_count(&units)];
        for u in units.iter().filter(|u| u.touched) {
            if let Place::Member(k) = u.place {
                needed[k] = true;
            }
        }
        needed
    };

    // The blanked copy of the old version, and the runs in it.
    let mut copy = String::new();
    let mut runs = Vec::new();
    let mut headers = vec![None; needed.len()];
    for segment in segments(&units) {
        let span = match segment {
            Segment::Untouched(i) => {
                let slice = &text[units[i].start..end(&units, i)];
                match units[i].place {
                    Place::Header(k) if needed[k] => {
                        headers[k] = Some(copy.len());
                        copy.push_str(slice);
                    }
                    _ => copy.extend(std::iter::repeat_n(
                        '\n',
                        memchr::memchr_iter(b'\n', slice.as_bytes()).count(),
                    )),
                }
                continue;
            }
            Segment::Touched(span) => span,
        };
        let (a, b) = (units[span.start].start, end(&units, span.end - 1));
        let (oa, ob) = (old_at(a), old_at(b));
        let old_text = old.get(oa..ob)?;
        // The run's old text must end where a line ends: otherwise its last bytes (an indent)
        // start the untouched unit after it, which may then belong elsewhere in the old version.
        let ends_line = ob == old.len() || old_text.is_empty() || old_text.ends_with('\n');
        if !same_indent(&text[a..], old_text) || !ends_line {
            return None;
        }
        let class = match units[span.start].place {
            Place::Member(k) => Some(k),
            Place::Module | Place::Header(_) => None,
        };
        let at = copy.len();
        copy.push_str(old_text);
        runs.push(Run {
            new: (a, b),
            old: (oa, ob),
            copy: (at, copy.len()),
            class,
        });
    }
    let parsed = ParsedFile::parse(copy)?;
    if parsed.root().has_error()
        || !runs_stay_in_place(&parsed, &runs, &headers)
        || !same_imports(new, &parsed, &runs)
    {
        return None;
    }
    // The file-level facts stay the new version's, since the runs hold the same imports; the
    // cache bindings are the new version's with the runs' own swapped for the old text's.
    let (memory_caches, cache_clients, rebound) =
        old_cache_bindings(new, new_facts, &parsed, &runs)?;
    let (raised_unsent, raised_unanswered) = super::raised_by_handlers(old);
    let skeleton = FileFacts {
        path: new_facts.path.clone(),
        module: new_facts.module.clone(),
        is_test: new_facts.is_test,
        payment_module: new_facts.payment_module,
        imports: new_facts.imports.clone(),
        memory_caches,
        cache_clients,
        serialises_writers: super::serialises_writers(parsed.text()),
        functions: Vec::new(),
        calls: Vec::new(),
        class_bases: super::class_bases(old),
        raised_unsent,
        raised_unanswered,
    };
    // The untouched code's facts are copied: a name the change makes a cache client (or a
    // map) in one version and not in the other would classify its calls differently there.
    if rebound.iter().any(|n| {
        super::is_cache_name(n, new_facts, vocab) != super::is_cache_name(n, &skeleton, vocab)
    }) {
        return None;
    }
    let parts = gather_code(&parsed, skeleton.clone(), vocab);
    Some(merge(
        (text, new_facts),
        (old, &parts),
        &units,
        &runs,
        &old_at,
        skeleton,
    ))
}

/// Whether each run holds the same import statements, word for word, in the new version and in
/// the old one (parsed in `copy`). The file's imports are then the same in both, and so are
/// the facts read from them: the payment flag, and what each call talks to.
fn same_imports(new: &ParsedFile, copy: &ParsedFile, runs: &[Run]) -> bool {
    [kinds::IMPORT_STATEMENT, kinds::IMPORT_FROM_STATEMENT]
        .iter()
        .all(|kind| {
            runs.iter().all(|run| {
                statements_within(new, kind, run.new).eq(statements_within(copy, kind, run.copy))
            })
        })
}

/// The old version's cache bindings (`FileFacts::memory_caches`, `FileFacts::cache_clients`):
/// the new version's, less those made in the runs' new text, plus those made in their old text
/// (in `copy`), and the names those bindings are of. `None` when a binding of the runs is
/// missing from the new version's lists.
fn old_cache_bindings(
    new: &ParsedFile,
    new_facts: &FileFacts,
    copy: &ParsedFile,
    runs: &[Run],
) -> Option<(Vec<String>, Vec<String>, Vec<String>)> {
    // The imports are the same in both versions (`same_imports`).
    let names = super::cache_import_names(&new_facts.imports);
    let bound = |file: &ParsedFile, (a, b): (usize, usize)| -> Vec<(String, CacheBinding)> {
        let all = file.index().all(kinds::ASSIGNMENT);
        let first = all.partition_point(|n| n.start_byte() < a);
        all.get(first..)
            .unwrap_or(&[])
            .iter()
            .take_while(|n| n.start_byte() < b)
            .filter_map(|n| super::cache_binding(*n, file.index(), file.text(), &names))
            .map(|(name, kind)| (name.to_string(), kind))
            .collect()
    };
    let mut memory = new_facts.memory_caches.clone();
    let mut clients = new_facts.cache_clients.clone();
    let mut names = Vec::new();
    // The imports are the same in both versions (`same_imports`).
    let injected = super::imports_a_cache(&new_facts.imports);
    for run in runs.iter().filter(|_| injected) {
        for name in super::injected_cache_clients(new.index(), new.text(), run.new) {
            let at = clients.iter().position(|n| *n == name)?;
            clients.remove(at);
            names.push(name);
        }
        for name in super::injected_cache_clients(copy.index(), copy.text(), run.copy) {
            clients.push(name.clone());
            names.push(name);
        }
    }
    for run in runs {
        for (name, kind) in bound(new, run.new) {
            let list = match kind {
                CacheBinding::Memory => &mut memory,
                CacheBinding::Client => &mut clients,
            };
            let at = list.iter().position(|n| *n == name)?;
            list.remove(at);
            names.push(name);
        }
        for (name, kind) in bound(copy, run.copy) {
            match kind {
                CacheBinding::Memory => memory.push(name.clone()),
                CacheBinding::Client => clients.push(name.clone()),
            }
            names.push(name);
        }
    }
    memory.sort_unstable();
    clients.sort_unstable();
    Some((memory, clients, names))
}

/// The text of each statement of `kind` that starts in `a..b`, in order.
fn statements_within<'a>(
    file: &'a ParsedFile,
    kind: &str,
    (a, b): (usize, usize),
) -> impl Iterator<Item = &'a str> {
    let all = file.index().all(kind);
    let first = all.partition_point(|n| n.start_byte() < a);
    all.get(first..)
        .unwrap_or(&[])
        .iter()
        .take_while(move |n| n.start_byte() < b)
        .map(|n| syntax::text(*n, file.text()))
}

/// The units of the new version, in order; the first starts at 0. A statement that does not
/// start its line (`a = 1; b = 2`, `class A: pass`) stays in the unit before it.
fn units(file: &ParsedFile) -> Vec<Unit> {
    let text = file.text();
    let mut units = vec![Unit {
        start: 0,
        place: Place::Module,
        touched: false,
    }];
    let push = |units: &mut Vec<Unit>, start: usize, place: Place| {
        if units.last().is_some_and(|u| u.start == start) {
            units.pop();
        }
        units.push(Unit {
            start,
            place,
            touched: false,
        });
    };
    let mut classes = 0;
    let root = file.root();
    for stmt in crate::python::named_children(root) {
        if stmt.kind() == kinds::COMMENT {
            continue;
        }
        let Some(start) = line_start_before(text, stmt.start_byte()) else {
            continue;
        };
        let class = match stmt.kind() {
            kinds::CLASS_DEFINITION => Some(stmt),
            kinds::DECORATED_DEFINITION => stmt
                .field("definition")
                .filter(|d| d.kind() == kinds::CLASS_DEFINITION),
            _ => None,
        };
        let members: Vec<usize> = class
            .and_then(|c| c.field("body"))
            .map(|body| {
                crate::python::named_children(body)
                    .into_iter()
                    .filter(|m| m.kind() != kinds::COMMENT)
                    .filter_map(|m| line_start_before(text, m.start_byte()))
                    .filter(|&m| m > start)
                    .collect()
            })
            .unwrap_or_default();
        if members.is_empty() {
            push(&mut units, start, Place::Module);
            continue;
        }
        push(&mut units, start, Place::Header(classes));
        for m in members {
            if units.last().is_some_and(|u| u.start >= m) {
                continue;
            }
            push(&mut units, m, Place::Member(classes));
        }
        classes += 1;
    }
    units
}

/// The start of the line holding `at`, when only indentation comes before it on that line.
fn line_start_before(text: &str, at: usize) -> Option<usize> {
    let before = text.as_bytes().get(..at)?;
    let start = memchr::memrchr(b'\n', before).map_or(0, |i| i + 1);
    before[start..]
        .iter()
        .all(|&b| b == b' ' || b == b'\t')
        .then_some(start)
}

/// How many module-level classes the units were cut from.
fn class_count(units: &[Unit]) -> usize {
    units
        .iter()
        .filter_map(|u| match u.place {
            Place::Header(k) | Place::Member(k) => Some(k + 1),
            Place::Module => None,
        })
        .max()
        .unwrap_or(0)
}

/// Where unit `i` ends: where the next one starts, or at the end of the text.
fn unit_end(units: &[Unit], i: usize, len: usize) -> usize {
    units.get(i + 1).map_or(len, |u| u.start)
}

/// The units in order: untouched ones one by one, touched ones in runs as long as they go.
enum Segment {
    Untouched(usize),
    Touched(std::ops::Range<usize>),
}

fn segments(units: &[Unit]) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < units.len() {
        if !units[i].touched {
            out.push(Segment::Untouched(i));
            i += 1;
            continue;
        }
        let start = i;
        while i < units.len() && units[i].touched {
            i += 1;
        }
        out.push(Segment::Touched(start..i));
    }
    out
}

/// A class whose header is touched is touched whole (its methods' qualified names change with
/// it), and so is a class of which a run holds both methods and module-level code (the run's
/// old text then cannot be placed in one body).
fn close_classes(units: &mut [Unit]) {
    let classes = class_count(units);
    loop {
        let mut whole = vec![false; classes];
        for segment in segments(units) {
            let Segment::Touched(span) = segment else {
                continue;
            };
            let (mut module, mut members) = (false, Vec::new());
            for unit in &units[span] {
                match unit.place {
                    Place::Header(k) => {
                        module = true;
                        whole[k] = true;
                    }
                    Place::Module => module = true,
                    Place::Member(k) => members.push(k),
                }
            }
            if module {
                for k in members {
                    whole[k] = true;
                }
            }
        }
        let mut changed = false;
        for u in units.iter_mut() {
            if let Place::Header(k) | Place::Member(k) = u.place
                && !u.touched
                && whole[k]
            {
                u.touched = true;
                changed = true;
            }
        }
        if !changed {
            return;
        }
    }
}

/// Whether the old text of a run starts its first line as the new text does: same
/// indentation, then code. Otherwise it may continue the statement before it in the old
/// version.
fn same_indent(new: &str, old: &str) -> bool {
    if old.is_empty() {
        return true;
    }
    let indent = new.len() - new.trim_start_matches([' ', '\t']).len();
    old.get(..indent) == new.get(..indent)
        && old[indent..]
            .chars()
            .next()
            .is_some_and(|c| !c.is_whitespace())
}

/// Whether every statement of each run's old text, in the blanked copy, is a statement of the
/// module or class body the run stands in, and ends inside the run.
fn runs_stay_in_place(copy: &ParsedFile, runs: &[Run], headers: &[Option<usize>]) -> bool {
    let top = syntax::statements(copy.root());
    // The class of the runs before, with its statement and its body's statements: a class's
    // runs come one after another.
    let mut class: Option<(usize, usize, Vec<tree_sitter::Node<'_>>)> = None;
    for run in runs {
        let inside =
            |n: &tree_sitter::Node<'_>| n.start_byte() >= run.copy.0 && n.end_byte() <= run.copy.1;
        // tree-sitter takes an indented line where no block opens for a statement of its own,
        // and what follows it may then parse otherwise in the whole old version: a statement
        // must start where its module or class body starts its statements.
        let Some(k) = run.class else {
            let here = overlapping(&top, run.copy);
            if !here
                .iter()
                .all(|n| inside(n) && n.start_position().column == 0)
            {
                return false;
            }
            continue;
        };
        if class.as_ref().is_none_or(|(seen, _, _)| *seen != k) {
            let Some(at) = headers.get(k).copied().flatten() else {
                return false;
            };
            let Some(stmt) = top.iter().find(|n| n.start_byte() == at) else {
                return false;
            };
            let definition = match stmt.kind() {
                kinds::DECORATED_DEFINITION => stmt.field("definition"),
                _ => Some(*stmt),
            };
            let Some(body) = definition.and_then(|c| c.field("body")) else {
                return false;
            };
            class = Some((k, stmt.id(), syntax::statements(body)));
        }
        let Some((_, id, members)) = &class else {
            return false;
        };
        let column = members.first().map(|m| m.start_position().column);
        if overlapping(&top, run.copy).iter().any(|n| n.id() != *id)
            || !overlapping(members, run.copy)
                .iter()
                .all(|m| inside(m) && Some(m.start_position().column) == column)
        {
            return false;
        }
    }
    true
}

/// The nodes of `nodes` (siblings, in order) that overlap bytes `a..b`.
fn overlapping<'n, 't>(
    nodes: &'n [tree_sitter::Node<'t>],
    (a, b): (usize, usize),
) -> &'n [tree_sitter::Node<'t>] {
    let first = nodes.partition_point(|n| n.end_byte() <= a);
    let rest = nodes.get(first..).unwrap_or(&[]);
    &rest[..rest.partition_point(|n| n.start_byte() < b)]
}

/// The old version's facts: the new facts of each untouched unit with lines shifted, and the
/// copy's facts inside each run, in source order.
fn merge(
    (text, new_facts): (&str, &FileFacts),
    (old, parts): (&str, &FileFacts),
    units: &[Unit],
    runs: &[Run],
    old_at: &dyn Fn(usize) -> usize,
    mut out: FileFacts,
) -> FileFacts {
    let new_lines = LineStarts::new(text);
    let old_lines = LineStarts::new(old);
    // Sized once, for at most all of both: grown push by push, the facts were copied into fresh
    // memory (page faults) at every doubling.
    out.functions
        .reserve(new_facts.functions.len() + parts.functions.len());
    out.calls.reserve(new_facts.calls.len() + parts.calls.len());
    let (mut f, mut c) = (0, 0);
    let (mut pf, mut pc) = (0, 0);
    let mut run = runs.iter();
    for segment in segments(units) {
        let i = match segment {
            Segment::Untouched(i) => i,
            Segment::Touched(span) => {
                let b = unit_end(units, span.end - 1, text.len());
                // The new facts of the run are replaced by the copy's.
                while f < new_facts.functions.len()
                    && new_lines.at(new_facts.functions[f].lines.0) < b
                {
                    f += 1;
                }
                while c < new_facts.calls.len() && new_lines.at(new_facts.calls[c].line) < b {
                    c += 1;
                }
                let Some(run) = run.next() else {
                    continue;
                };
                let (oa, ob) = run.old;
                let in_run = |line: u32| (oa..ob).contains(&old_lines.at(line));
                while pf < parts.functions.len() && old_lines.at(parts.functions[pf].lines.0) < ob {
                    if in_run(parts.functions[pf].lines.0) {
                        out.functions.push(parts.functions[pf].clone());
                    }
                    pf += 1;
                }
                while pc < parts.calls.len() && old_lines.at(parts.calls[pc].line) < ob {
                    if in_run(parts.calls[pc].line) {
                        out.calls.push(parts.calls[pc].clone());
                    }
                    pc += 1;
                }
                continue;
            }
        };
        let (a, b) = (units[i].start, unit_end(units, i, text.len()));
        let shift = old_lines.row(old_at(a)) as i64 - new_lines.row(a) as i64;
        let moved = |line: u32| (i64::from(line) + shift).clamp(0, i64::from(u32::MAX)) as u32;
        while f < new_facts.functions.len() && new_lines.at(new_facts.functions[f].lines.0) < b {
            let mut func = new_facts.functions[f].clone();
            // A step of the function's own code moves with it; one of a module constant it
            // reads keeps the constant's line.
            let (first, last) = func.lines;
            for (_, line) in func.steps.iter_mut() {
                if (first..=last).contains(line) {
                    *line = moved(*line);
                }
            }
            func.lines = (moved(func.lines.0), moved(func.lines.1));
            for line in &mut func.none_returns {
                *line = moved(*line);
            }
            if let Some(fresh) = func.fresh_key.as_deref_mut() {
                fresh.line = moved(fresh.line);
            }
            func.returns_fresh = func.returns_fresh.map(moved);
            func.returns_answer = func.returns_answer.map(moved);
            out.functions.push(func);
            f += 1;
        }
        while c < new_facts.calls.len() && new_lines.at(new_facts.calls[c].line) < b {
            let mut call = new_facts.calls[c].clone();
            call.line = moved(call.line);
            call.deref_line = call.deref_line.map(moved);
            out.calls.push(call);
            c += 1;
        }
    }
    out
}

/// Byte offsets of a text's line starts.
struct LineStarts(Vec<usize>);

impl LineStarts {
    fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
        LineStarts(starts)
    }

    /// Where 1-based `line` starts.
    fn at(&self, line: u32) -> usize {
        let row = (line as usize).saturating_sub(1);
        self.0.get(row).copied().unwrap_or(usize::MAX)
    }

    /// The 0-based row of offset `at`.
    fn row(&self, at: usize) -> usize {
        self.0.partition_point(|&s| s <= at).saturating_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::facts::gather;
    use crate::test_support::{blocks_between, edit_lines, fixture_sources};

    fn parsed(src: &str) -> ParsedFile {
        ParsedFile::parse(src.to_string()).expect("the python grammar loads (every parse test)")
    }

    /// The derived facts of `old`, checked against the facts of `old` parsed whole.
    fn derived(path: &str, new: &str, old: &str) -> Option<FileFacts> {
        let vocab = Vocabulary::default();
        let file = parsed(new);
        let new_facts = gather(path, &file, &vocab);
        let got = derive_old(&file, &new_facts, old, &blocks_between(new, old), &vocab);
        let got = got?;
        assert_eq!(got, gather(path, &parsed(old), &vocab), "old:\n{old}");
        Some(got)
    }

    const NEW: &str = "import time\nfrom app.cache import redis_client as rc\n\n\ndef pay(order):\n    for attempt in range(3):\n        try:\n            return client.charge(order.amount, key=order.key)\n        except Timeout:\n            time.sleep(2 ** attempt)\n    return None\n\n\nclass Refunds:\n    \"\"\"Refunds.\"\"\"\n\n    def refund(self, charge):\n        r = client.refund(charge)\n        return r.id\n\n    # The ledger.\n    def ledger(self):\n        rc.get('ledger')\n        return None\n\n\ndef tail():\n    return pay(None)\n\n\ndef one():\n    return httpx.get(URL, timeout=5)\n\n\ndef two():\n    return rc.set('k', 1)\n\n\ndef three():\n    r = one()\n    if r is None:\n        return None\n    return r.json()\n\n\ndef four():\n    time.sleep(1)\n    return two()\n";

    #[test]
    fn a_changed_method_is_parsed_alone_and_the_rest_moved() {
        let old = NEW.replace(
            "    def refund(self, charge):\n        r = client.refund(charge)\n",
            "    def refund(self, charge, reason):\n        # Why.\n        r = client.refund(charge, reason=reason)\n        audit(r)\n",
        );
        let got = derived("app/payments.py", NEW, &old).expect("a local change is derived");
        let refund = got.function("Refunds.refund").expect("the method");
        assert_eq!(refund.lines, (17, 21));
        assert_eq!(got.function("tail").map(|f| f.lines), Some((29, 30)));
    }

    #[test]
    fn a_changed_function_and_removed_lines_at_the_end() {
        let old = NEW.replace(
            "    return None\n\n\nclass",
            "    log(order)\n    return None\n\n\nclass",
        );
        derived("svc.py", NEW, &old).expect("derived");
        let old = format!("{NEW}\n\ndef extra():\n    return 1\n");
        derived("svc.py", NEW, &old).expect("derived");
    }

    #[test]
    fn an_unchanged_text_is_the_new_facts() {
        assert!(derived("svc.py", NEW, NEW).is_some());
    }

    #[test]
    fn changed_imports_are_parsed_whole() {
        let old = NEW.replace("import time\n", "import time\nimport httpx\n");
        assert_eq!(derived("svc.py", NEW, &old), None);
        // An import inside a changed function counts as much as one at the top.
        let new = NEW.replace("def four():\n", "def four():\n    import requests\n");
        let old = new.replace("import requests", "import httpx");
        assert_eq!(derived("svc.py", &new, &old), None);
    }

    #[test]
    fn a_stray_indented_line_is_parsed_whole() {
        // Where no block opens, tree-sitter takes the indented line for a statement of its own
        // in the copy, while in the whole old version it changes how the next statement parses.
        let old = NEW.replace(
            "from app.cache import redis_client as rc\n",
            "from app.cache import redis_client as rc\n            attempt, order,\n",
        );
        assert_eq!(derived("svc.py", NEW, &old), None);
    }

    #[test]
    fn a_changed_function_with_the_same_local_import_is_derived() {
        let new = NEW.replace("def four():\n", "def four():\n    import requests\n");
        let old = new.replace(
            "    time.sleep(1)\n",
            "    time.sleep(2)\n    log('four')\n",
        );
        let got = derived("svc.py", &new, &old).expect("the imports are the same");
        assert!(got.function("four").is_some_and(|f| f.sleeps));
    }

    #[test]
    fn a_renamed_class_is_touched_whole() {
        let old = NEW.replace("class Refunds:", "class Returns:");
        let got = derived("svc.py", NEW, &old).expect("derived");
        assert!(got.function("Returns.ledger").is_some());
    }

    #[test]
    fn a_removed_class_line_that_moves_methods_is_parsed_whole() {
        // In the old version, `ledger` belonged to a second class.
        let old = NEW.replace("    # The ledger.\n", "class Ledger:\n");
        assert_eq!(derived("svc.py", NEW, &old), None);
    }

    #[test]
    fn a_line_removed_at_the_end_of_a_method_touches_the_method() {
        // The old `refund` had one more line, more indented than the statement after it.
        let old = NEW.replace(
            "        return r.id\n\n",
            "        return r.id\n        log(r)\n\n",
        );
        derived("svc.py", NEW, &old).expect("touching the end of a method touches the method");
    }

    #[test]
    fn an_old_indent_that_nests_the_next_function_is_parsed_whole() {
        // One edit from a blank line of `get` to the start of `save`: the old version indents
        // `save` under `get`, so `save` cannot be moved from the new version as it is.
        let new = "def get(k):\n    return D[k]\n\n\ndef save(o):\n    D[o.id] = o\n";
        let old = "def get(k):\n    return D[k]\n    \n\n    def save(o):\n    D[o.id] = o\n";
        assert_eq!(derived("svc.py", new, old), None);
    }

    #[test]
    fn edits_across_many_classes_close_each_class_once() {
        // A run from the last method of one class into the next class's header makes both
        // classes touched whole; the closing goes on class by class.
        let class = |i: usize| {
            format!(
                "class C{i}:\n    def a(self):\n        return call_{i}(self)\n\n    def b(self):\n        return None\n\n\n"
            )
        };
        let new: String = (0..300).map(class).collect();
        let mut old = new.clone();
        for i in (0..300).step_by(7) {
            old = old.replace(
                &format!("        return None\n\n\nclass C{}:", i + 1),
                &format!(
                    "        log({i})\n        return None\n\n\nclass D{}:",
                    i + 1
                ),
            );
        }
        let got = derived("svc.py", &new, &old).expect("derived");
        assert!(got.function("D8.b").is_some() && got.function("C9.b").is_some());
    }

    #[test]
    fn a_new_version_with_syntax_errors_is_parsed_whole() {
        let new = NEW.replace("def tail():", "def tail(:");
        let vocab = Vocabulary::default();
        let file = parsed(&new);
        let facts = gather("svc.py", &file, &vocab);
        assert_eq!(
            derive_old(&file, &facts, NEW, &blocks_between(&new, NEW), &vocab),
            None
        );
    }

    #[test]
    fn a_client_the_change_makes_is_derived_only_where_it_classifies_alike() {
        let derive = |new: &str, old: &str, uses: &str| {
            let rest = format!("\n\ndef load(k):\n    return {uses}.get(k)\n").repeat(8);
            derived(
                "app/payments/svc.py",
                &format!("import redis\n\n{new}\n{rest}"),
                &format!("import redis\n\n{old}\n{rest}"),
            )
        };
        // `store` becomes a Redis client: the untouched `load`s now read a cache, which their
        // copied facts would not say; the old version is then parsed whole.
        assert_eq!(derive("store = redis.Redis()", "store = {}", "store"), None);
        // `redis_client` says what it is by its name: derived, with the old binding in place.
        let facts = derive(
            "redis_client = redis.Redis()",
            "redis_client = redis.StrictRedis(db=1)",
            "redis_client",
        )
        .expect("derived");
        assert_eq!(facts.cache_clients, ["redis_client"]);
        // Only the binding changes: derived.
        assert!(
            derive(
                "store = redis.Redis()",
                "store = redis.Redis(db=2)",
                "store"
            )
            .is_some()
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]
        /// Lines of real files changed, copied, removed or indented: whenever facts are derived,
        /// they are the facts of the old version parsed whole (`derived` asserts it).
        #[test]
        fn derived_facts_are_the_facts_of_the_whole_old_version(
            pick in 0usize..1000,
            changes in proptest::collection::vec((0usize..1000, 0usize..1000, 0u8..5), 1..4),
        ) {
            let sources = fixture_sources();
            proptest::prop_assume!(!sources.is_empty());
            let new = &sources[pick % sources.len()];
            // Every kind of edit but the open bracket, which seldom leaves Python to derive.
            let changes: Vec<(usize, usize, u8)> = changes
                .into_iter()
                .map(|(at, other, how)| (at, other, [0, 1, 3, 4, 5][usize::from(how)]))
                .collect();
            let old = edit_lines(new, &changes);
            derived("app/payments/svc.py", new, &old);
        }
    }
}
