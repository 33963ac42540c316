//! A review run: every touched file reconstructed, parsed and checked in parallel, findings
//! kept only where the change is responsible for them, then sorted into a `Review`.
//!
//! Output is byte-for-byte the same whatever the thread count: files are processed with an
//! order-preserving parallel map and everything is sorted before it leaves.

pub mod description;
mod fold;
mod model;
pub mod suppress;

pub use model::*;
pub use suppress::Suppression;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rayon::prelude::*;

use crate::config::Settings;
use crate::diff::{FilePatch, Patch};
use crate::index::{self, LazyIndex, ModuleFacts};
use crate::python::{Block, LazyTree, ParsedFile};
use crate::rules::facts;
use crate::rules::gate::{self, Bits, Open};
use crate::rules::{self, ChangeSet, Check, Ctx, FileChange, Gate, Scan};
use crate::source::{self, FileVersions, Side};

/// A file after reconstruction and parsing, before rules.
struct Prepared<'p> {
    patch: &'p FilePatch,
    versions: FileVersions,
    /// The old version was parsed or its facts derived: it has a tree to parse (again) when a
    /// rule needs it. Old trees are never kept.
    old: bool,
    new: Parse,
    /// The index's facts of the new version, read while its tree was at hand (repository mode);
    /// taken by the project index.
    new_module: Option<ModuleFacts>,
    /// The gated rules that can report on the new version (`rules::gate`).
    open: Bits,
    errors: Vec<ReviewError>,
}

impl Prepared<'_> {
    fn new_tree(&self) -> LazyTree<'_> {
        match &self.new {
            Parse::None => LazyTree::new(None, None),
            Parse::Kept(f) => LazyTree::new(Some(f), None),
            Parse::Dropped => LazyTree::new(None, self.versions.new.as_ref().map(|v| &v.text)),
        }
    }

    /// The old tree, parsed again from the new one (`new`, that tree) when needed.
    fn old_tree<'a>(&'a self, new: &'a LazyTree<'a>) -> LazyTree<'a> {
        if !self.old {
            return LazyTree::new(None, None);
        }
        let text = self.versions.old.as_ref().map(|v| &v.text);
        LazyTree::from_base(text, new, new_to_old(self.patch))
    }
}

/// The hunks as blocks from the new version to the old one, for `ParsedFile::parse_from`.
fn new_to_old(patch: &FilePatch) -> Vec<Block> {
    patch
        .hunks
        .iter()
        .map(|h| Block {
            from: (h.new_start, h.new_count),
            to: (h.old_start, h.old_count),
        })
        .collect()
}

/// The new version's tree between the facts pass and the rules pass.
enum Parse {
    /// Not Python, absent, over the size cap, or past the parse budget.
    None,
    /// A version that rules will read, within `Settings::kept_source_bytes`.
    Kept(ParsedFile),
    /// Parsed and its facts gathered, then dropped; parsed again when a rule needs it.
    Dropped,
}

impl Parse {
    fn exists(&self) -> bool {
        !matches!(self, Parse::None)
    }
}

/// Set by the binary, which exits as soon as its one review is written.
static EXIT_AFTER_REVIEW: AtomicBool = AtomicBool::new(false);

/// Tells the reviews of this process that the process ends right after them: what a review
/// built (trees, facts) is then left to the operating system, which reclaims it at once,
/// instead of being freed piece by piece (some 6% of the time of a review whose trees were all
/// kept). Only for a process that exits after reviewing, or its memory grows with each review.
pub fn exit_after_review() {
    EXIT_AFTER_REVIEW.store(true, Ordering::Relaxed);
}

/// Whether payreview reads a file as Python.
pub fn is_python(path: &str) -> bool {
    path.ends_with(".py") || path.ends_with(".pyi")
}

/// Reviews a parsed diff.
pub fn review(patch: &Patch, settings: &Settings) -> Review {
    review_observed(patch, settings, &|| {})
}

/// Reviews a parsed diff, calling `file_done` once for each file read and parsed (from any
/// thread), so a caller can show progress.
pub fn review_observed(
    patch: &Patch,
    settings: &Settings,
    file_done: &(dyn Fn() + Sync),
) -> Review {
    let mut errors = Vec::new();
    let files: Vec<&FilePatch> = patch.files.iter().take(settings.max_files).collect();
    if patch.files.len() > settings.max_files {
        errors.push(ReviewError::new(
            "",
            ErrorKind::TooManyFiles,
            vec![
                ("files", patch.files.len().to_string()),
                ("max", settings.max_files.to_string()),
            ],
        ));
    }
    let listing = match &settings.workspace {
        source::Workspace::Repository { repo, .. } => {
            Some(index::Listing::start(repo.root(), index::MAX_FILES))
        }
        source::Workspace::DiffOnly => None,
    };
    // Which files keep their trees depends on thread timing; the review does not: a dropped tree
    // is parsed again from the same text.
    let kept_bytes = AtomicU64::new(0);
    let (mut prepared, facts): (Vec<Prepared<'_>>, Vec<FileChange>) = largest_first(
        &files,
        |file| expected_size(file, &settings.workspace),
        |file| {
            let prepared = prepare(file, settings, &kept_bytes);
            file_done();
            prepared
        },
    )
    .into_iter()
    .unzip();
    let change = ChangeSet::new(facts);
    change.prepare_reach();
    let touched = changed_functions(&prepared, &change);
    // Moved into the index, which is their only reader.
    let extracted: Vec<Option<ModuleFacts>> =
        prepared.iter_mut().map(|p| p.new_module.take()).collect();
    let project = project_index(&prepared, listing, extracted, settings, &touched);
    let pairs: Vec<(&Prepared<'_>, &FileChange)> = prepared.iter().zip(&change.files).collect();
    let mut results: Vec<(Vec<Finding>, Vec<Question>)> = largest_first(
        &pairs,
        // A file no rule can report on costs next to nothing; the others may parse a tree.
        |(p, _)| {
            let text = p.versions.new.as_ref().map_or(0, |v| v.text.len());
            if p.open.is_empty() { 0 } else { text as u64 }
        },
        |(p, facts)| {
            let new = p.new_tree();
            let old = p.old_tree(&new);
            run_rules(p, (&old, &new), facts, &change, &project, settings)
        },
    );
    drop_moved(&mut results, &prepared, &change, &project, settings);
    errors.extend(project.errors().iter().cloned());
    let mut findings = Vec::new();
    let mut questions = Vec::new();
    for (f, q) in results {
        findings.extend(f);
        questions.extend(q);
    }
    for p in &prepared {
        errors.extend(p.errors.iter().cloned());
    }
    let mut suppressions: Vec<Suppression> = prepared
        .par_iter()
        .filter(|p| p.new.exists())
        .filter_map(|p| {
            Some(suppress::scan(
                p.patch.path(),
                &p.versions.new.as_ref()?.text,
            ))
        })
        .flatten()
        .collect();
    let mut findings = suppress::apply(findings, &mut suppressions);
    let added = |path: &str, line: u32| {
        prepared
            .iter()
            .find(|p| p.patch.path() == path)
            .is_some_and(|p| p.versions.lines.is_added(line))
    };
    findings.extend(
        suppress::findings(&suppressions, added)
            .into_iter()
            .filter(|f| settings.rules.enabled(f.rule)),
    );
    for f in &mut findings {
        if let Some(severity) = settings.rules.severity_of(f.rule) {
            f.severity = severity;
        }
    }
    let findings = fold::once_per_file(findings);
    let mut review = finish(findings, questions, errors, &files);
    review.suppressions = suppressions;
    review.sources = sources(&prepared, &review.findings);
    review.changed_functions = touched;
    review.description = settings.description.clone();
    if EXIT_AFTER_REVIEW.load(Ordering::Relaxed) {
        std::mem::forget(project);
        std::mem::forget(change);
        std::mem::forget(prepared);
    }
    if settings.rules.enabled("SCOPE001") {
        let mut undeclared = description::undeclared_changes(&review);
        for f in &mut undeclared {
            if let Some(severity) = settings.rules.severity_of(f.rule) {
                f.severity = severity;
            }
        }
        review.findings.extend(undeclared);
        sort_findings(&mut review.findings);
    }
    review
}

/// The repository's index, in repository mode: built at most once, when a rule first needs
/// it, from the files on disk and the new side of the touched files (already parsed, not read
/// again; a file the change deletes or renames away is left out). `extracted` holds, per file,
/// the index's facts of its new side, read while the review held its tree.
fn project_index<'p>(
    prepared: &'p [Prepared<'_>],
    listing: Option<index::Listing>,
    extracted: Vec<Option<ModuleFacts>>,
    settings: &'p Settings,
    touched: &BTreeMap<String, Vec<String>>,
) -> LazyIndex<'p> {
    let repo = match &settings.workspace {
        source::Workspace::Repository { repo, .. } => Some(repo),
        source::Workspace::DiffOnly => None,
    };
    let mut changed = BTreeSet::new();
    let mut moved = BTreeMap::new();
    for (p, module) in prepared.iter().zip(extracted) {
        changed.extend(p.patch.old_path.iter().cloned());
        if let Some(new) = p.patch.new_path.as_deref() {
            changed.insert(new.to_string());
            if let Some(module) = module {
                moved.insert(new.to_string(), module);
            }
        }
    }
    // Methods are left out: other modules call them through objects, which the index cannot
    // tie to a class, so their callers elsewhere would never be matched anyway.
    let focus = touched
        .values()
        .flatten()
        .filter(|q| !q.contains('.'))
        .cloned()
        .collect();
    LazyIndex::new(repo, listing, changed, moved, focus)
}

/// The new-side text of each parsed file with findings, for snippets and line hashes in the
/// reports (only those: a large change would otherwise carry all its text to the end).
fn sources(prepared: &[Prepared<'_>], findings: &[Finding]) -> BTreeMap<String, SourceFile> {
    let with_findings: BTreeSet<&str> = findings.iter().map(|f| f.path.as_str()).collect();
    prepared
        .iter()
        .filter(|p| p.new.exists() && with_findings.contains(p.patch.path()))
        .filter_map(|p| {
            let version = p.versions.new.as_ref()?;
            Some((
                p.patch.path().to_string(),
                SourceFile {
                    text: Arc::clone(&version.text),
                    partial: version.partial,
                    added: p.versions.lines.added().to_vec(),
                },
            ))
        })
        .collect()
}

/// Functions whose lines the change adds to (new side) or removes from (old side).
fn changed_functions(
    prepared: &[Prepared<'_>],
    change: &ChangeSet,
) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for (p, facts) in prepared.iter().zip(&change.files) {
        let lines = &p.versions.lines;
        let new = facts
            .new
            .iter()
            .flat_map(|f| &f.functions)
            .filter(|f| lines.touches_added(f.lines.0, f.lines.1));
        let old = facts
            .old
            .iter()
            .flat_map(|f| &f.functions)
            .filter(|f| lines.touches_removed(f.lines.0, f.lines.1));
        let mut names: Vec<String> = new.chain(old).map(|f| f.qualname.clone()).collect();
        names.sort();
        names.dedup();
        if !names.is_empty() {
            out.insert(p.patch.path().to_string(), names);
        }
    }
    out
}

fn prepare<'p>(
    patch: &'p FilePatch,
    settings: &Settings,
    kept_bytes: &AtomicU64,
) -> (Prepared<'p>, FileChange) {
    let path = patch.path();
    let mut errors = Vec::new();
    if patch.lossy {
        errors.push(ReviewError::new(path, ErrorKind::NotUtf8, Vec::new()));
    }
    let python =
        is_python(path) && !patch.binary && !patch.submodule && !settings.exclude.matches(path);
    if is_python(path) && patch.binary {
        errors.push(ReviewError::new(path, ErrorKind::Binary, Vec::new()));
    }
    if let source::Workspace::Repository { .. } = settings.workspace
        && !python
    {
        // Never read, but a path that would leave the root is worth telling the reader about.
        for p in [patch.old_path.as_deref(), patch.new_path.as_deref()]
            .into_iter()
            .flatten()
        {
            if let Err(e) = source::repo::check_relative(p) {
                errors.push(ReviewError::new(
                    path,
                    ErrorKind::OutsideRoot,
                    vec![("reason", e.to_string())],
                ));
            }
        }
    }
    let versions = if python {
        source::reconstruct(patch, &settings.workspace)
    } else {
        source::reconstruct_nothing(patch)
    };
    errors.extend(
        versions
            .notes
            .iter()
            .map(|(kind, args)| ReviewError::new(path, *kind, args.clone())),
    );
    // The cap on file size holds for text rebuilt from the diff too (a 50 MB line), so that no
    // single file decides how much memory a review takes.
    let oversized = |version: &Option<source::Version>| {
        version
            .as_ref()
            .filter(|v| v.text.len() as u64 > settings.max_file_bytes)
            .map(|v| v.text.len())
    };
    let text = |version: &Option<source::Version>| {
        if !python || oversized(version).is_some() {
            return None;
        }
        Some(Arc::clone(&version.as_ref()?.text))
    };
    let new = text(&versions.new).and_then(ParsedFile::parse_shared);
    // The parse may have opened a new heap for this thread (see `crate::alloc`).
    crate::alloc::advise_thread_heap();
    let gather = |parsed: &Option<ParsedFile>| {
        parsed
            .as_ref()
            .map(|f| facts::gather(path, f, &settings.vocabulary))
    };
    let new_facts = gather(&new);
    // Decided while the new tree is in hand: a file no rule can report on is not kept for the
    // rules, nor parsed again for them.
    let open = match (&new, &new_facts) {
        _ if !settings.gates => Open {
            rules: Bits::ALL,
            tree: true,
        },
        (Some(parsed), Some(facts)) => gate::open(
            &Scan::new(parsed, facts, &versions.lines, &settings.vocabulary),
            |rule| settings.rules.enabled(rule.id),
        ),
        _ => Open::default(),
    };
    let blocks = new_to_old(patch);
    // The old version's facts from the new one's where the change is local: its tree is then
    // parsed only if a rule needs it (see `run_rules`).
    let derived = match (&new, &new_facts, &versions.old) {
        (Some(parsed), Some(new_facts), Some(old))
            if python && oversized(&versions.old).is_none() =>
        {
            facts::derive_old(parsed, new_facts, &old.text, &blocks, &settings.vocabulary)
        }
        _ => None,
    };
    let old_derived = derived.is_some();
    let (old, old_facts) = match derived {
        Some(facts) => (None, Some(facts)),
        None => {
            // The old version from the new one's tree: what the hunks leave alone is not
            // parsed again.
            let old = text(&versions.old).and_then(|old| match &new {
                Some(base) => ParsedFile::parse_from(old, base, &blocks),
                None => ParsedFile::parse_shared(old),
            });
            let facts = gather(&old);
            (old, facts)
        }
    };
    // A derived old version was not parsed, and did not fail to be.
    let sides = [
        ("old", &versions.old, &old, old_derived),
        ("new", &versions.new, &new, false),
    ];
    for (side, version, parsed, derived) in sides {
        if let Some(len) = oversized(version).filter(|_| python) {
            errors.push(ReviewError::new(
                path,
                ErrorKind::VersionOversized,
                vec![
                    (side, side.to_string()),
                    ("len", len.to_string()),
                    ("cap", settings.max_file_bytes.to_string()),
                ],
            ));
        } else if python && version.is_some() && parsed.is_none() && !derived {
            errors.push(ReviewError::new(
                path,
                ErrorKind::VersionParseTimeout,
                vec![
                    (side, side.to_string()),
                    ("secs", crate::python::PARSE_BUDGET.as_secs().to_string()),
                ],
            ));
        }
    }
    // Only a complete new version: one rebuilt from hunks has gaps that are not the author's.
    let complete_new = versions.new.as_ref().is_some_and(|v| !v.partial);
    if let Some(line) = new
        .as_ref()
        .filter(|_| complete_new)
        .and_then(ParsedFile::first_syntax_error)
    {
        errors.push(ReviewError::new(
            path,
            ErrorKind::SyntaxError,
            vec![("line", line.to_string())],
        ));
    }
    let facts = FileChange {
        path: path.to_string(),
        old: old_facts,
        new: new_facts,
    };
    // Only new trees are kept, and only those a rule will read: the old one is walked only where
    // the new one has findings (a few files of a large change), and is then parsed again
    // cheaply from the new tree.
    let keep_new = open.tree && {
        let size = new.as_ref().map_or(0, |p| p.text().len() as u64);
        let fits =
            kept_bytes.fetch_add(size, Ordering::Relaxed) + size <= settings.kept_source_bytes;
        if !fits {
            kept_bytes.fetch_sub(size, Ordering::Relaxed);
        }
        fits
    };
    // Read now, while the tree is at hand (and in the processor's caches), rather than when a
    // rule first asks for the index: a dropped tree cannot be parsed again cheaply then, and
    // the rules' threads all wait for that one build (on the medium sparse benchmark, 18 ms of
    // a 32 ms build went to reading the kept trees, cold by then).
    let new_module = match settings.workspace {
        source::Workspace::Repository { .. } => new
            .as_ref()
            .map(|parsed| index::extract_reusing(path, parsed, facts.new.as_ref())),
        _ => None,
    };
    let prepared = Prepared {
        patch,
        versions,
        old: old_derived || old.is_some(),
        new: match new {
            None => Parse::None,
            Some(f) if keep_new => Parse::Kept(f),
            Some(_) => Parse::Dropped,
        },
        new_module,
        open: open.rules,
        errors,
    };
    (prepared, facts)
}

fn run_rules(
    p: &Prepared<'_>,
    (old_tree, new_tree): (&LazyTree<'_>, &LazyTree<'_>),
    facts: &FileChange,
    change: &ChangeSet,
    project: &LazyIndex<'_>,
    settings: &Settings,
) -> (Vec<Finding>, Vec<Question>) {
    let ctx = |side: Side| {
        context(
            p,
            side,
            (old_tree, new_tree),
            facts,
            (change, project),
            settings,
        )
    };
    let mut new = ctx(Side::New);
    let mut kept = Vec::new();
    let rules = rules::ALL
        .iter()
        .enumerate()
        .filter(|(_, r)| settings.rules.enabled(r.id));
    for (i, rule) in rules {
        if !matches!(rule.gate, Gate::Always) && !p.open.is_open(i) {
            continue;
        }
        match rule.check {
            Check::Driver => {}
            Check::Change(check) => {
                check(&mut new);
                kept.append(&mut new.findings);
            }
            Check::Tree(check) => {
                // Whether the file is there, not its tree: a rule that reads the tree only in
                // some files (`Gate::Split`) has not asked for it yet.
                if !new.tree.exists() {
                    continue;
                }
                check(&mut new);
                let found = std::mem::take(&mut new.findings);
                // The old version only matters for what the new one found: most files find
                // nothing, and then their old tree is never walked (nor parsed again when the
                // review dropped it).
                if found.is_empty() {
                    continue;
                }
                let mut old = ctx(Side::Old);
                if old.tree.exists() && found.iter().any(|f| may_have_been(f, facts.old.as_ref())) {
                    check(&mut old);
                }
                kept.extend(only_new(found, old.findings, &p.versions));
            }
        }
    }
    // Questions only from the new side: the old code's unknowns are not this change's.
    (kept, new.questions)
}

/// What a rule sees of one side of one file.
fn context<'a>(
    p: &'a Prepared<'_>,
    side: Side,
    (old_tree, new_tree): (&'a LazyTree<'a>, &'a LazyTree<'a>),
    facts: &'a FileChange,
    (change, project): (&'a ChangeSet, &'a LazyIndex<'a>),
    settings: &'a Settings,
) -> Ctx<'a> {
    let (file, other, facts_here, facts_other) = match side {
        Side::Old => (old_tree, new_tree, facts.old.as_ref(), facts.new.as_ref()),
        Side::New => (new_tree, old_tree, facts.new.as_ref(), facts.old.as_ref()),
    };
    Ctx {
        side,
        path: p.patch.path(),
        patch: p.patch,
        versions: &p.versions,
        tree: file,
        other,
        facts: facts_here,
        other_facts: facts_other,
        memo: Default::default(),
        change,
        project,
        vocab: &settings.vocabulary,
        findings: Vec::new(),
        questions: Vec::new(),
    }
}

/// Drops the findings in functions the change moved here from another file of the change when
/// the rule finds the same (same key) in the old version of a function the change took out of
/// or cut there, of the same name or, failing that, renamed: code moved is not code written,
/// and a refactor that splits a module would otherwise be reviewed as if all of it were new.
/// Run after every file's rules, in file order, so the result does not depend on threads.
fn drop_moved(
    results: &mut [(Vec<Finding>, Vec<Question>)],
    prepared: &[Prepared<'_>],
    change: &ChangeSet,
    project: &LazyIndex<'_>,
    settings: &Settings,
) {
    let tree_rule = |id: &str| rules::find(id).filter(|r| matches!(r.check, Check::Tree(_)));
    // A function this file did not have before, under its full name.
    let arrived = |file: usize, f: &Finding| {
        !f.function.is_empty()
            && tree_rule(f.rule).is_some()
            && change.files.get(file).is_some_and(|c| {
                c.old
                    .as_ref()
                    .is_none_or(|o| o.function(&f.function).is_none())
            })
    };
    let candidates = results
        .iter()
        .enumerate()
        .any(|(i, (found, _))| found.iter().any(|f| arrived(i, f)));
    if !candidates {
        return;
    }
    // Functions each file's old version had and the change took out or cut (a facade that now
    // delegates keeps its name), by short name.
    let mut left: BTreeMap<&str, Vec<(usize, &str)>> = BTreeMap::new();
    for (i, (file, p)) in change.files.iter().zip(prepared).enumerate() {
        let Some(old) = &file.old else {
            continue;
        };
        for func in &old.functions {
            let stays = file
                .new
                .as_ref()
                .is_some_and(|n| n.function(&func.qualname).is_some());
            if !stays || p.versions.lines.touches_removed(func.lines.0, func.lines.1) {
                left.entry(func.name.as_str())
                    .or_default()
                    .push((i, func.qualname.as_str()));
            }
        }
    }
    let donors = left
        .values()
        .flatten()
        .map(|(i, _)| *i)
        .collect::<BTreeSet<_>>()
        .len();
    let mut before: BTreeMap<(usize, &'static str), Vec<Finding>> = BTreeMap::new();
    // A method renamed as it moved (`refund` → `_refund`) is found by its code alone, once every
    // finding had its chance under its own name, and where few files lost code: each of them
    // is checked again.
    let passes: &[bool] = if donors <= MAX_DONOR_FILES {
        &[true, false]
    } else {
        &[true]
    };
    for &by_name in passes {
        for (j, (found, _)) in results.iter_mut().enumerate() {
            if !found.iter().any(|f| arrived(j, f)) {
                continue;
            }
            let mut kept = Vec::with_capacity(found.len());
            for f in std::mem::take(found) {
                let short = f.function.rsplit('.').next().unwrap_or(&f.function);
                let named = left.get(short);
                // A function whose name the change took out elsewhere is that one, or a new
                // variant of it (`AsyncCheckoutService.checkout`), not a renamed other.
                let mut sources: Box<dyn Iterator<Item = &(usize, &str)>> = match (by_name, named) {
                    (true, _) => Box::new(named.into_iter().flatten()),
                    (false, None) => Box::new(left.values().flatten()),
                    (false, Some(_)) => Box::new(std::iter::empty()),
                };
                let rule = tree_rule(f.rule).filter(|_| arrived(j, &f));
                let moved = rule.is_some_and(|rule| {
                    sources.any(|&(i, qualname)| {
                        let old = before.entry((i, rule.id)).or_insert_with(|| {
                            old_findings(rule, i, prepared, change, project, settings)
                        });
                        let same = old
                            .iter()
                            .position(|o| o.function == qualname && o.key == f.key);
                        // Each old finding accounts for one new one.
                        same.map(|k| old.remove(k)).is_some()
                    })
                });
                if !moved {
                    kept.push(f);
                }
            }
            *found = kept;
        }
    }
}

/// How many files that lost code `drop_moved` checks again for code moved under another name.
const MAX_DONOR_FILES: usize = 16;

/// What `rule` finds in the old version of file `i`.
fn old_findings(
    rule: &rules::Rule,
    i: usize,
    prepared: &[Prepared<'_>],
    change: &ChangeSet,
    project: &LazyIndex<'_>,
    settings: &Settings,
) -> Vec<Finding> {
    let (Some(p), Some(facts), Check::Tree(check)) =
        (prepared.get(i), change.files.get(i), rule.check)
    else {
        return Vec::new();
    };
    let new = p.new_tree();
    let old = p.old_tree(&new);
    if !old.exists() {
        return Vec::new();
    }
    let mut cx = context(
        p,
        Side::Old,
        (&old, &new),
        facts,
        (change, project),
        settings,
    );
    check(&mut cx);
    cx.findings
}

/// `f` of every item, in the items' order, computed in parallel largest first and one item at a
/// time: a large file taken last keeps one thread busy while the others wait, which cost small
/// changes (50 files on two threads) a seventh of their wall time.
fn largest_first<T: Sync, R: Send>(
    items: &[T],
    size: impl Fn(&T) -> u64,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    // Each size once: a sort asks for keys O(n log n) times, and a size can be a `stat`.
    let sizes: Vec<u64> = items.iter().map(&size).collect();
    // Stable: files of one size keep the diff's order.
    order.sort_by_key(|&i| std::cmp::Reverse(sizes.get(i).copied().unwrap_or(0)));
    // `order` holds indexes of `items` only, so a `map` can take every one; rayon knows its
    // length and collects into one vector of it, instead of growing one per item and joining.
    let mut done: Vec<(usize, R)> = order
        .par_iter()
        .with_max_len(1)
        .map(|&i| (i, f(&items[i])))
        .collect();
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// What reading a file will cost, before it is read: its size in the work tree (a stat, no
/// read, and never through a symbolic link), or else the lines its hunks add, at about 40 bytes
/// a line.
fn expected_size(patch: &FilePatch, workspace: &source::Workspace) -> u64 {
    let added = || {
        patch
            .hunks
            .iter()
            .map(|h| u64::from(h.new_count))
            .sum::<u64>()
            * 40
    };
    match (workspace, patch.new_path.as_deref()) {
        (source::Workspace::Repository { repo, .. }, Some(path))
            if source::repo::check_relative(path).is_ok() =>
        {
            std::fs::symlink_metadata(repo.root().join(path)).map_or_else(|_| added(), |m| m.len())
        }
        _ => added(),
    }
}

/// Whether the old version can have had `finding`: an old finding takes a new one back only in
/// the same function, and a function the old version does not have (one the change added) can
/// hold none. Most findings of a large change are in such code, and then the old tree is not
/// needed at all. A finding placed by a function's bare name (TEST001's, on a test that may
/// have moved out of a class) may have been in any function of that name.
fn may_have_been(finding: &Finding, old: Option<&facts::FileFacts>) -> bool {
    let named = |o: &facts::FileFacts| {
        o.function(&finding.function).is_some()
            || o.functions.iter().any(|f| f.name == finding.function)
    };
    finding.function.is_empty() || old.is_some_and(named)
}

/// The findings of the new version that the old one did not have: compared by rule, enclosing
/// function and key (normalised code), as a multiset. Where a key repeats, the occurrences on
/// added lines are the ones kept.
fn only_new(new: Vec<Finding>, old: Vec<Finding>, versions: &FileVersions) -> Vec<Finding> {
    let mut before: HashMap<(&str, String, String), usize> = HashMap::new();
    for f in &old {
        *before
            .entry((f.rule, f.function.clone(), f.key.clone()))
            .or_default() += 1;
    }
    let touches = |f: &Finding| {
        f.lines
            .is_some_and(|(a, b)| versions.lines.touches_added(a, b))
    };
    let mut ordered: Vec<Finding> = new;
    // Untouched occurrences first, so they are the ones the old version accounts for.
    ordered.sort_by_key(|f| touches(f));
    let mut kept = Vec::new();
    for f in ordered {
        let slot = before
            .get_mut(&(f.rule, f.function.clone(), f.key.clone()))
            .filter(|n| **n > 0);
        match slot {
            Some(n) => *n -= 1,
            None => kept.push(f),
        }
    }
    kept
}

/// By place, then rule; one finding per rule and place.
fn sort_findings(findings: &mut Vec<Finding>) {
    findings.sort_by(|a, b| {
        (&a.path, a.lines, a.rule, &a.key).cmp(&(&b.path, b.lines, b.rule, &b.key))
    });
    findings.dedup_by(|a, b| a.rule == b.rule && a.path == b.path && a.lines == b.lines);
}

fn finish(
    mut findings: Vec<Finding>,
    mut questions: Vec<Question>,
    mut errors: Vec<ReviewError>,
    files: &[&FilePatch],
) -> Review {
    sort_findings(&mut findings);
    questions.sort();
    questions.dedup();
    let questions = merge_questions(questions);
    errors.sort();
    errors.dedup();
    let files = files
        .iter()
        .map(|f| FileSummary {
            path: f.path().to_string(),
            status: f.status.as_str(),
            added: f.added_lines(),
            removed: f.removed_lines(),
        })
        .collect();
    Review {
        findings,
        questions,
        files,
        errors,
        ..Review::default()
    }
}

/// One question per id and function: several rules asking about the same task each add what
/// they know (`worst`, `returns_none`) to one question instead of repeating it.
fn merge_questions(questions: Vec<Question>) -> Vec<Question> {
    let function = |q: &Question| {
        q.args
            .iter()
            .find(|(k, _)| *k == "function")
            .map(|(_, v)| v.clone())
    };
    let mut merged: Vec<Question> = Vec::new();
    for q in questions {
        let same = merged
            .iter_mut()
            .find(|m| m.id == q.id && function(m) == function(&q));
        match same {
            Some(m) => {
                for (k, v) in q.args {
                    match m.args.iter_mut().find(|(mk, _)| *mk == k) {
                        Some((_, mv)) if mv.is_empty() => *mv = v,
                        Some(_) => {}
                        None => m.args.push((k, v)),
                    }
                }
            }
            None => merged.push(q),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::facts::{FileFacts, FunctionFacts};

    fn finding(function: &str) -> Finding {
        Finding {
            rule: "ERR001",
            severity: Severity::Important,
            path: "app/pay.py".to_string(),
            lines: Some((3, 4)),
            args: Vec::new(),
            notes: Vec::new(),
            function: function.to_string(),
            key: "except Exception: return None".to_string(),
            evidence: Vec::new(),
            point: None,
        }
    }

    #[test]
    fn only_a_function_the_old_version_has_can_have_had_a_finding() {
        let old = FileFacts {
            functions: vec![FunctionFacts {
                name: "refund".to_string(),
                qualname: "Client.refund".to_string(),
                ..FunctionFacts::default()
            }],
            ..FileFacts::default()
        };
        assert!(may_have_been(&finding("Client.refund"), Some(&old)));
        // Added by the change: nothing in the old version can take its findings back.
        assert!(!may_have_been(&finding("Client.charge"), Some(&old)));
        assert!(!may_have_been(&finding("charge"), None));
        // Module-level code has no function to tell the versions apart by.
        assert!(may_have_been(&finding(""), Some(&old)));
    }
}
