//! The project index: small facts about the Python modules of the repository under review, so
//! rules can answer what a diff does not show (which task calls the changed function, how the
//! cache client is configured) instead of asking the author.
//!
//! Built at most once per review, only in repository mode and only when a rule asks. Only the
//! modules that can bear on the change are parsed (see `ProjectIndex::build`), each once with
//! the shared parser, and only owned facts are kept; the tree is dropped right away, so memory
//! grows with the number of definitions, not with the size of the code.

mod celery;
mod extract;
mod list;

pub use celery::{TaskRef, exception_covers, is_task_decorator};
pub(crate) use extract::decorators as read_decorators;
pub(crate) use extract::module_assignment;
pub(crate) use extract::pytestmarks;
pub use extract::{
    Assignment, Call, Decorator, Def, ModuleFacts, extract, extract_reusing, module_of,
};
pub use list::Listing;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::python::ParsedFile;
use crate::review::{ErrorKind, ReviewError};
use crate::source::Repo;

/// Most files the index reads: a monorepo beyond that is indexed in part (and says so).
pub const MAX_FILES: usize = 50_000;

/// How far names are followed through re-exports (`from .cache import client`).
const MAX_IMPORT_HOPS: usize = 4;

/// The project index of one review, built the first time a rule asks for it: most changes
/// never need it (no retry loop, no cached value, no changed contract), and then no file of the
/// repository is read beyond the change's own (its files are only listed, see `Listing`).
pub struct LazyIndex<'p> {
    repo: Option<&'p Repo>,
    /// The repository's files, listed while the review read the change: taken by the build.
    listing: Mutex<Option<Listing>>,
    changed: BTreeSet<String>,
    /// The facts of the new side of the touched files, by path, read by the review while it
    /// held their trees: taken by the one build.
    extracted: Mutex<BTreeMap<String, ModuleFacts>>,
    focus: BTreeSet<String>,
    cell: OnceLock<(ProjectIndex, Vec<ReviewError>)>,
}

impl<'p> LazyIndex<'p> {
    /// `repo` is `None` in diff-only mode: there is nothing to index. `listing`: its files,
    /// listed already or being listed (`Listing::start`); `focus`: the module-level functions
    /// the change touches.
    pub fn new(
        repo: Option<&'p Repo>,
        listing: Option<Listing>,
        changed: BTreeSet<String>,
        extracted: BTreeMap<String, ModuleFacts>,
        focus: BTreeSet<String>,
    ) -> Self {
        LazyIndex {
            repo,
            listing: Mutex::new(listing),
            changed,
            extracted: Mutex::new(extracted),
            focus,
            cell: OnceLock::new(),
        }
    }

    /// The index, built on first use (concurrent callers wait for the one build).
    pub fn get(&self) -> Option<&ProjectIndex> {
        let repo = self.repo?;
        Some(
            &self
                .cell
                .get_or_init(|| {
                    let extracted = std::mem::take(
                        &mut *self
                            .extracted
                            .lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner()),
                    );
                    let listing = self
                        .listing
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .take()
                        .unwrap_or_else(|| Listing::deferred(repo.root(), MAX_FILES));
                    ProjectIndex::build(repo, listing, &self.changed, extracted, &self.focus)
                })
                .0,
        )
    }

    /// What went wrong while indexing, if the index was built.
    pub fn errors(&self) -> &[ReviewError] {
        self.cell.get().map_or(&[], |(_, e)| e.as_slice())
    }
}

/// Fewest repository files worth another indexing thread: below that, spawning costs more than
/// it saves (most are read and scanned for a name, not parsed).
const FILES_PER_THREAD: usize = 64;

/// `items` mapped in parallel, in order, on scoped threads of its own, each taking the next
/// item as it is done with one: which files cost much (a large tree, a file to read and parse)
/// is not known in advance, and fixed halves left one thread with most of them.
///
/// Not rayon: the index is built inside a `OnceLock` from a rule running on a rayon worker. A
/// rayon join there lets that worker steal another file's rule job while it waits, and that
/// job asking for the index would re-enter the `OnceLock` on the same thread and deadlock.
/// Plain threads are only joined, never stolen from.
fn parallel_filter_map<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> Option<R> + Sync,
) -> Vec<R> {
    let threads = rayon::current_num_threads()
        .min(items.len().div_ceil(FILES_PER_THREAD))
        .max(1);
    if threads == 1 {
        return items.iter().filter_map(&f).collect();
    }
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else {
                return done;
            };
            if let Some(r) = f(item) {
                done.push((i, r));
            }
        }
    };
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
        handles
            .into_iter()
            // A thread that panicked loses its part of the index, not the review.
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// Whether `text` holds one of `names` as a whole identifier: one pass over the text, no
/// parse.
fn mentions_any(text: &str, names: &BTreeSet<String>) -> bool {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|word| !word.is_empty() && names.contains(word))
}

/// The modules a build has indexed so far, in the order it found them, with every call by its
/// callee's name (module, call): a caller hop looks its new names up there instead of scanning
/// every call of every module once per hop, and the index keeps the table (`from_parts`).
#[derive(Default)]
struct Indexing {
    modules: Vec<ModuleFacts>,
    paths: HashSet<String>,
    calls: HashMap<String, Vec<(usize, usize)>>,
}

impl Indexing {
    fn add(&mut self, module: ModuleFacts) {
        if !self.paths.insert(module.path.clone()) {
            return;
        }
        let i = self.modules.len();
        for (j, call) in module.calls.iter().enumerate() {
            crate::rules::push_named(&mut self.calls, &call.name, (i, j));
        }
        self.modules.push(module);
    }
}

/// Facts about the Python modules of the repository a review needs, sorted by path.
#[derive(Debug, Default)]
pub struct ProjectIndex {
    modules: Vec<ModuleFacts>,
    by_module: HashMap<String, usize>,
    /// Every call by its callee's last name: (module index, call index).
    callers: HashMap<String, Vec<(usize, usize)>>,
}

impl ProjectIndex {
    /// Indexes what the review can ask about. `changed` names the files the change touches,
    /// which are not read from the disk: `extracted` holds the facts of their new side (a file
    /// the change deletes has none); `focus` names the module-level functions the change
    /// touches.
    ///
    /// Not every module is parsed: a cheap identifier scan picks the files that mention a
    /// focused function (its callers), then the callers' callers, up to the task search's
    /// depth, and then the modules those import (clients, constants, re-exports). A module
    /// that mentions none of them cannot change an answer.
    pub fn build(
        repo: &Repo,
        listing: Listing,
        changed: &BTreeSet<String>,
        extracted: BTreeMap<String, ModuleFacts>,
        focus: &BTreeSet<String>,
    ) -> (ProjectIndex, Vec<ReviewError>) {
        let (listed, truncated) = listing.files();
        let mut errors = Vec::new();
        if truncated {
            errors.push(ReviewError::new(
                "",
                ErrorKind::TooManyPythonFiles,
                vec![("max", MAX_FILES.to_string())],
            ));
        }
        let on_disk: Vec<String> = listed
            .into_iter()
            .filter(|p| !changed.contains(p))
            .collect();
        let mut path_of: HashMap<String, String> = HashMap::default();
        for path in on_disk.iter().chain(extracted.keys()) {
            path_of
                .entry(module_of(path))
                .or_insert_with(|| path.clone());
        }
        let mut ix = Indexing::default();
        // Keyed by the path each was extracted under (`extract_reusing`), which it holds.
        for m in extracted.into_values() {
            ix.add(m);
        }
        let read = |path: &String| -> Option<(String, String)> {
            // A tracked symlink is the file it points to, indexed under its own path.
            let link = std::fs::symlink_metadata(repo.root().join(path)).ok()?;
            if link.file_type().is_symlink() {
                return None;
            }
            // Unreadable or too large: the index does without it.
            Some((path.clone(), repo.read(path).ok()?.text))
        };
        let parse = |path: &str, text: String| -> Option<ModuleFacts> {
            ParsedFile::parse(text).map(|parsed| extract::extract(path, &parsed))
        };
        // A method is called through an object, which no import resolves: only its own module
        // can be seen calling it, and that module is parsed already.
        let caller =
            |call: &Call| (!call.function.contains('.')).then(|| call.function.to_string());
        // Callers, hop by hop: the files that mention a name, then the names of their functions
        // that call it.
        let mut names: BTreeSet<String> = focus.clone();
        let mut searched: BTreeSet<String> = BTreeSet::new();
        for _ in 0..celery::MAX_HOPS {
            let fresh: BTreeSet<String> = names.difference(&searched).cloned().collect();
            if fresh.is_empty() {
                break;
            }
            searched.extend(fresh.iter().cloned());
            let candidates: Vec<&String> =
                on_disk.iter().filter(|p| !ix.paths.contains(*p)).collect();
            let found: Vec<ModuleFacts> = parallel_filter_map(&candidates, |path| {
                let (path, text) = read(path)?;
                if !mentions_any(&text, &fresh) {
                    return None;
                }
                parse(&path, text)
            });
            // The modules indexed before this hop were searched for the earlier names already;
            // the ones it found are searched for every name so far.
            let before = ix.modules.len();
            for m in found {
                ix.add(m);
            }
            for name in &fresh {
                let sites = ix.calls.get(name.as_str()).into_iter().flatten();
                for &(i, j) in sites.filter(|(i, _)| *i < before) {
                    let call = ix.modules.get(i).and_then(|m| m.calls.get(j));
                    names.extend(call.and_then(caller));
                }
            }
            let wanted: HashSet<&str> = searched.iter().map(String::as_str).collect();
            for m in ix.modules.get(before..).unwrap_or_default() {
                for call in m.calls.iter().filter(|c| wanted.contains(c.name.as_str())) {
                    names.extend(caller(call));
                }
            }
        }
        // What the parsed modules import, and what that imports (re-exports), by module path.
        for _ in 0..=MAX_IMPORT_HOPS {
            let wanted: BTreeSet<&String> = ix
                .modules
                .iter()
                .flat_map(|m| m.imports.iter())
                .flat_map(|i| {
                    let parent = i.target.rsplit_once('.').map(|(m, _)| m);
                    std::iter::once(i.target.as_str()).chain(parent)
                })
                .filter_map(|module| path_of.get(module))
                .filter(|p| !ix.paths.contains(*p))
                .collect();
            if wanted.is_empty() {
                break;
            }
            let wanted: Vec<String> = wanted.into_iter().cloned().collect();
            let found: Vec<ModuleFacts> = parallel_filter_map(&wanted, |path| {
                let (path, text) = read(path)?;
                parse(&path, text)
            });
            for m in found {
                ix.add(m);
            }
        }
        // The `conftest.py` files above each changed test file: their fixtures are what the
        // tests take without defining (a `respx` router, a fake Redis).
        let on_disk_set: HashSet<&str> = on_disk.iter().map(String::as_str).collect();
        let mut conftests: BTreeSet<String> = BTreeSet::new();
        for path in changed
            .iter()
            .filter(|p| crate::rules::facts::is_test_path(p))
        {
            let mut dir = path.as_str();
            while let Some((parent, _)) = dir.rsplit_once('/') {
                conftests.insert(format!("{parent}/conftest.py"));
                dir = parent;
            }
            conftests.insert("conftest.py".to_string());
        }
        // With them, a Django project's settings modules (`settings_test.py`,
        // `settings/test.py`): what the tests' `cache` is (`CACHES` with `LocMemCache`).
        let tests_changed = changed.iter().any(|p| crate::rules::facts::is_test_path(p));
        let settings = on_disk.iter().filter(|p| {
            tests_changed
                && p.rsplit('/')
                    .take(2)
                    .any(|part| part.trim_end_matches(".py").contains("settings"))
        });
        let conftests: Vec<String> = conftests
            .into_iter()
            .chain(settings.cloned())
            .filter(|p| on_disk_set.contains(p.as_str()) && !ix.paths.contains(p))
            .collect();
        for m in parallel_filter_map(&conftests, |path| {
            let (path, text) = read(path)?;
            parse(&path, text)
        }) {
            ix.add(m);
        }
        (ProjectIndex::from_parts(ix), errors)
    }

    /// An index of already extracted modules (sorted here).
    pub fn from_modules(modules: Vec<ModuleFacts>) -> ProjectIndex {
        let mut ix = Indexing::default();
        for m in modules {
            ix.add(m);
        }
        ProjectIndex::from_parts(ix)
    }

    /// The indexed modules sorted by path, with their calls by name renumbered to match.
    fn from_parts(ix: Indexing) -> ProjectIndex {
        let Indexing {
            modules,
            calls: mut callers,
            ..
        } = ix;
        let mut sorted: Vec<(usize, ModuleFacts)> = modules.into_iter().enumerate().collect();
        sorted.sort_by(|a, b| a.1.path.cmp(&b.1.path));
        let mut rank = vec![0; sorted.len()];
        for (r, (i, _)) in sorted.iter().enumerate() {
            rank[*i] = r;
        }
        for sites in callers.values_mut() {
            for site in sites.iter_mut() {
                site.0 = rank[site.0];
            }
            // Module by module, in path order, then in the module's order.
            sites.sort_unstable();
        }
        let modules: Vec<ModuleFacts> = sorted.into_iter().map(|(_, m)| m).collect();
        let mut by_module = HashMap::default();
        for (i, m) in modules.iter().enumerate() {
            // Two files for one module (`src/app/x.py` and `app/x.py`): the first path wins.
            by_module.entry(m.module.clone()).or_insert(i);
        }
        ProjectIndex {
            modules,
            by_module,
            callers,
        }
    }

    pub fn modules(&self) -> &[ModuleFacts] {
        &self.modules
    }

    pub fn module(&self, name: &str) -> Option<&ModuleFacts> {
        self.by_module.get(name).and_then(|&i| self.modules.get(i))
    }

    pub fn file(&self, path: &str) -> Option<&ModuleFacts> {
        self.module(&module_of(path))
            .filter(|m| m.path == path)
            .or_else(|| self.modules.iter().find(|m| m.path == path))
    }

    /// The module-level assignment a name of `module` stands for, following imports
    /// (`from app.cache import redis_client as rc`) and re-exports.
    pub fn global(&self, module: &str, name: &str) -> Option<(&ModuleFacts, &Assignment)> {
        let (mut module, mut name) = (module.to_string(), name.to_string());
        for _ in 0..=MAX_IMPORT_HOPS {
            let m = self.module(&module)?;
            if let Some(a) = m.assignment(&name) {
                return Some((m, a));
            }
            let target = m.import_target(&name)?;
            let (next_module, next_name) = target.rsplit_once('.')?;
            (module, name) = (next_module.to_string(), next_name.to_string());
        }
        None
    }

    /// What an expression of `path` names, as a module-level assignment: `client`,
    /// `cache.client` (a module imported as `cache`), `app.cache.client`.
    pub fn resolve_expr(&self, path: &str, expr: &str) -> Option<(&ModuleFacts, &Assignment)> {
        let here = self.file(path)?;
        match expr.rsplit_once('.') {
            None => self.global(&here.module, expr),
            Some((receiver, name)) => {
                let (first, rest) = receiver.split_once('.').unwrap_or((receiver, ""));
                let base = here.import_target(first)?;
                let module = if rest.is_empty() {
                    base.to_string()
                } else {
                    format!("{base}.{rest}")
                };
                self.global(&module, name)
            }
        }
    }

    /// Whether a call of `callee` in file `path` never returns: the function the file's
    /// imports name (`fail`, `Errors.throw`, `errors.throw`, through re-exports) raises on
    /// every path, or ends in calls of its own module's functions that never return.
    pub fn never_returns(&self, path: &str, callee: &str, awaited: bool) -> bool {
        self.callee_def(path, callee).is_some_and(|(module, def)| {
            self.def_never_returns(module, def, awaited, crate::rules::MAX_RAISE_HOPS)
        })
    }

    /// The function a call of `callee` in file `path` runs, as the file's imports name it
    /// (`fail`, `Errors.throw`, `errors.throw`, through re-exports), or the file's own.
    pub fn callee_def(&self, path: &str, callee: &str) -> Option<(&ModuleFacts, &Def)> {
        let here = self.file(path)?;
        let full = match callee.split_once('.') {
            None => match here.import_target(callee) {
                Some(target) => target.to_string(),
                None => format!("{}.{callee}", here.module),
            },
            Some((first, rest)) => format!("{}.{rest}", here.import_target(first)?),
        };
        self.definition(&full)
    }

    /// The function a dotted name stands for (`app.errors.Errors.throw`): the longest prefix
    /// that is an indexed module, and the rest a function of it, or of what it imports.
    fn definition(&self, full: &str) -> Option<(&ModuleFacts, &Def)> {
        let mut full = full.to_string();
        for _ in 0..=MAX_IMPORT_HOPS {
            let (module, qualname) = full
                .match_indices('.')
                .rev()
                .find_map(|(at, _)| Some((self.module(full.get(..at)?)?, full.get(at + 1..)?)))?;
            if let Some(def) = module.def(qualname) {
                return Some((module, def));
            }
            // A re-export: `from .providers import Errors` in the package's `__init__`.
            let (first, rest) = qualname.split_once('.').unwrap_or((qualname, ""));
            let target = module.import_target(first)?;
            full = if rest.is_empty() {
                target.to_string()
            } else {
                format!("{target}.{rest}")
            };
        }
        None
    }

    fn def_never_returns(
        &self,
        module: &ModuleFacts,
        def: &Def,
        awaited: bool,
        hops: usize,
    ) -> bool {
        (awaited || !def.is_async)
            && def.ends_in.as_ref().is_some_and(|tails| {
                tails.iter().all(|t| {
                    // A helper it ends in is looked for in its own module, by name.
                    let mut named = module
                        .functions
                        .iter()
                        .filter(|d| d.name == t.name)
                        .peekable();
                    hops > 0
                        && named.peek().is_some()
                        && named.all(|d| self.def_never_returns(module, d, t.awaited, hops - 1))
                })
            })
    }

    /// A number a module spells as a literal or as a module constant (`30`, `LIMIT`,
    /// `5 * 60`).
    pub fn number(&self, module: &ModuleFacts, text: &str) -> Option<f64> {
        self.number_at(module, text, 0)
    }

    fn number_at(&self, module: &ModuleFacts, text: &str, depth: usize) -> Option<f64> {
        if depth > MAX_IMPORT_HOPS {
            return None;
        }
        let text = text.trim();
        if let Some((a, b)) = text.split_once('*').filter(|_| !text.contains("**")) {
            let value =
                self.number_at(module, a, depth + 1)? * self.number_at(module, b, depth + 1)?;
            return value.is_finite().then_some(value);
        }
        if let Ok(n) = text.replace('_', "").parse::<f64>() {
            return n.is_finite().then_some(n);
        }
        let (m, a) = self.global(&module.module, text)?;
        self.number_at(m, &a.value, depth + 1)
    }

    /// Calls of functions named `name`, as (calling module, call).
    pub fn calls_of(&self, name: &str) -> impl Iterator<Item = (&ModuleFacts, &Call)> {
        self.callers
            .get(name)
            .into_iter()
            .flatten()
            .filter_map(|&(i, j)| {
                let m = self.modules.get(i)?;
                Some((m, m.calls.get(j)?))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(path: &str, src: &str) -> ModuleFacts {
        let file = ParsedFile::parse(src.to_string()).expect("parses");
        extract::extract(path, &file)
    }

    #[test]
    fn names_resolve_through_imports_and_re_exports() {
        let index = ProjectIndex::from_modules(vec![
            module(
                "app/cache.py",
                "import redis\nclient = redis.Redis(host='h', decode_responses=True)\nTTL = 60 * 60\n",
            ),
            module(
                "app/__init__.py",
                "from app.cache import client as shared\n",
            ),
            module(
                "app/pay.py",
                "import app.cache as c\nfrom app import shared as rc\nfrom app.cache import TTL\n",
            ),
        ]);
        let line =
            |r: Option<(&ModuleFacts, &Assignment)>| r.map(|(m, a)| (m.path.clone(), a.line));
        let expected = Some(("app/cache.py".to_string(), 2));
        assert_eq!(line(index.resolve_expr("app/pay.py", "rc")), expected);
        assert_eq!(line(index.resolve_expr("app/pay.py", "c.client")), expected);
        assert_eq!(line(index.resolve_expr("app/pay.py", "nothing")), None);
        let pay = index.file("app/pay.py").expect("indexed");
        assert_eq!(index.number(pay, "TTL"), Some(3600.0));
        assert_eq!(index.number(pay, "1_000"), Some(1000.0));
    }

    #[test]
    fn a_changed_module_calling_a_later_hops_name_leads_the_next_hop_on() {
        // `charge` ← `pay` (on disk, hop 1) ← `pay_task` (the change's own file, known before
        // the first hop) ← `run` (on disk): found only if hop 2 looks `pay` up in the modules
        // indexed before it.
        let dir = tempfile::tempdir().expect("tempdir");
        for (rel, text) in [
            ("app/service.py", "def pay(o):\n    charge(o)\n"),
            ("app/runner.py", "def run(o):\n    pay_task(o)\n"),
            ("app/other.py", "def other():\n    return 1\n"),
        ] {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }
        let tasks =
            ParsedFile::parse("def pay_task(o):\n    pay(o)\n".to_string()).expect("parses");
        let changed: BTreeSet<String> = ["app/tasks.py".to_string()].into();
        let extracted: BTreeMap<String, ModuleFacts> =
            [("app/tasks.py".to_string(), extract("app/tasks.py", &tasks))].into();
        let repo = Repo::open(dir.path(), 1 << 20).expect("repo");
        let focus: BTreeSet<String> = ["charge".to_string()].into();
        let listing = Listing::deferred(dir.path(), MAX_FILES);
        let (index, errors) = ProjectIndex::build(&repo, listing, &changed, extracted, &focus);
        assert!(errors.is_empty());
        let paths: Vec<&str> = index.modules().iter().map(|m| m.path.as_str()).collect();
        assert_eq!(paths, ["app/runner.py", "app/service.py", "app/tasks.py"]);
    }

    #[test]
    fn build_parses_callers_hop_by_hop_and_their_imports_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (rel, text) in [
            ("app/client.py", "def charge(o):\n    pass\n"),
            (
                "app/service.py",
                "from app.client import charge\n\ndef pay(o):\n    charge(o)\n",
            ),
            (
                "app/tasks.py",
                "from app.limits import LIMIT\nfrom app.service import pay\n\n@shared_task(time_limit=LIMIT)\ndef pay_task(o):\n    pay(o)\n",
            ),
            ("app/limits.py", "LIMIT = 20\n"),
            ("app/unrelated.py", "def other():\n    return 1\n"),
        ] {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }
        let repo = Repo::open(dir.path(), 1 << 20).expect("repo");
        let focus: BTreeSet<String> = ["charge".to_string()].into();
        let listing = Listing::start(dir.path(), MAX_FILES);
        let (index, errors) =
            ProjectIndex::build(&repo, listing, &BTreeSet::new(), BTreeMap::new(), &focus);
        assert!(errors.is_empty());
        let paths: Vec<&str> = index.modules().iter().map(|m| m.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "app/client.py",
                "app/limits.py",
                "app/service.py",
                "app/tasks.py"
            ]
        );
        let tasks = index.tasks_calling(
            "app.client",
            "charge",
            &crate::config::Vocabulary::default(),
        );
        assert_eq!(tasks.len(), 1);
        let module = index.module("app.tasks").expect("tasks");
        assert_eq!(index.number(module, "LIMIT"), Some(20.0));
    }
}
