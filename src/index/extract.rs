//! The small owned facts the project index keeps of one module; the tree is dropped as soon as
//! they are read.

use std::sync::Arc;

use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, ParsedFile, kinds, syntax};
use crate::rules::facts::{self, FileFacts, Import};

/// Calls that replace something for a test (`patch`, `patch.object`, `monkeypatch.setattr`).
const MOCKERS: &[&str] = &["patch", "object", "setattr", "setitem", "dict", "multiple"];

/// Most mock text kept for one test: patch targets and fixture bodies, not the whole file.
const MAX_MOCK_CHARS: usize = 4_000;

/// Longest source text kept for one value: enough for a constructor's arguments, bounded so a
/// generated file cannot blow the index up.
const MAX_VALUE_CHARS: usize = 400;

/// `name=value` of a call, the value as source text.
pub type Keyword = (String, String);

/// One module of the repository.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleFacts {
    pub path: String,
    /// `app.cache` for `app/cache.py`.
    pub module: String,
    pub imports: Vec<Import>,
    pub functions: Vec<Def>,
    /// Module-level `name = …`, in document order, then what classes build for themselves
    /// (`Class.attr`, from `self.attr = call(...)` or a class-body `attr = call(...)`, every
    /// member of a class of states: `RefundStatus.SUBMITTED`, and a class's constant sets:
    /// `Refund.ACTIVE_STATUSES`).
    pub assignments: Vec<Assignment>,
    /// Calls made inside functions, one per calling function and callee.
    pub calls: Vec<Call>,
    /// For a test module: its fixtures' code, lowercased and bounded (they can patch for any of
    /// its tests, autouse or by parameter). Kept once per module, not per test.
    pub fixtures: String,
    /// For a module that imports pymemcache: whether it asks its clients to wait for the
    /// server's replies (`default_noreply=False`). `None` for every other module.
    pub memcache_replies: Option<bool>,
    /// The tests' configuration puts the cache in the process: a class for the tests sets
    /// Flask-Caching's type (`class TestConfig(Config): CACHE_TYPE = "SimpleCache"`), or an
    /// autouse fixture sets Django's (`settings.CACHES = {...: "...locmem.LocMemCache"}`).
    pub local_test_cache: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Def {
    pub name: String,
    pub qualname: String,
    pub lines: (u32, u32),
    pub decorators: Vec<Decorator>,
    pub is_async: bool,
    /// `FunctionFacts::ends_in`: the calls it ends in when it never returns otherwise.
    pub ends_in: Option<Arc<[syntax::Tail]>>,
    /// For a test function of a test module: what may mock things for it, lowercased (its
    /// decorators, parameters and patch calls; the module's fixtures are in
    /// `ModuleFacts::fixtures`), bounded. For a class's `setUp`: the stand-ins it makes.
    pub mocks: Option<String>,
    /// `FunctionFacts::lock_param`: the parameter that asks it to lock the rows it reads.
    pub lock_param: Option<Box<(Box<str>, Option<u32>)>>,
}

/// `@celery_app.task(autoretry_for=(httpx.HTTPError,), soft_time_limit=30)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decorator {
    /// The decorator without its arguments: `celery_app.task`, `shared_task`.
    pub callee: String,
    pub line: u32,
    pub keywords: Vec<Keyword>,
    /// `**options`: any keyword may hide in it.
    pub splat: bool,
}

impl Decorator {
    /// The text of keyword argument `name`, as written (`retries=3` gives `3`).
    pub fn keyword(&self, name: &str) -> Option<&str> {
        self.keywords
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `redis_client = redis.Redis.from_url(URL, decode_responses=True)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    pub name: String,
    pub line: u32,
    /// The callee when the value is a call (`redis.Redis.from_url`).
    pub callee: Option<String>,
    pub keywords: Vec<Keyword>,
    pub splat: bool,
    /// The whole value as source text (bounded).
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Call {
    /// Last name of the callee (`create_charge`).
    pub name: String,
    /// The module the callee comes from when an import (or a local definition) tells.
    pub module: Option<String>,
    /// Qualified name of the calling function, shared with the review's call site.
    pub function: std::sync::Arc<str>,
    pub line: u32,
    /// The variable the result is bound to, when it is.
    pub binding: Option<std::sync::Arc<str>>,
    /// Line where that variable is used (`result.id`) with no check for `None` before: the
    /// caller trusts the callee to raise on failure.
    pub unchecked_use: Option<u32>,
    /// That use is a subscript (`result["id"]`), not an attribute.
    pub unchecked_subscript: bool,
}

impl ModuleFacts {
    pub fn def(&self, qualname: &str) -> Option<&Def> {
        self.functions.iter().find(|d| d.qualname == qualname)
    }

    /// The last module-level assignment of `name`.
    pub fn assignment(&self, name: &str) -> Option<&Assignment> {
        self.assignments.iter().rev().find(|a| a.name == name)
    }

    pub fn import_target(&self, local: &str) -> Option<&str> {
        self.imports
            .iter()
            .rev()
            .find(|i| i.local == local)
            .map(|i| i.target.as_str())
    }
}

/// `app/cache.py` → `app.cache`; `pkg/__init__.py` → `pkg`; a leading `src/` is a layout folder.
pub fn module_of(path: &str) -> String {
    let trimmed = path.strip_suffix(".py").unwrap_or(path);
    let trimmed = trimmed.strip_suffix("/__init__").unwrap_or(trimmed);
    trimmed.trim_start_matches("src/").replace('/', ".")
}

fn bounded(text: &str) -> String {
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match folded.char_indices().nth(MAX_VALUE_CHARS) {
        Some((at, _)) => folded.get(..at).unwrap_or("").to_string(),
        None => folded,
    }
}

fn keywords(call: Node<'_>, src: &str) -> Vec<Keyword> {
    syntax::keyword_args(call, src)
        .into_iter()
        .map(|(k, v)| (k.to_string(), bounded(syntax::text(v, src))))
        .collect()
}

/// Reads the facts of one parsed module.
pub fn extract(path: &str, file: &ParsedFile) -> ModuleFacts {
    extract_reusing(path, file, None)
}

/// `extract`, taking what the review already read of the same tree from `known` (`FileFacts`
/// hold one function per definition and one site per call, in document order): each function's
/// names, lines and whether it is async, and each call's site.
pub fn extract_reusing(path: &str, file: &ParsedFile, known: Option<&FileFacts>) -> ModuleFacts {
    let (idx, src) = (file.index(), file.text());
    let module = module_of(path);
    let mut imports = facts::imports(idx, src, facts::DottedImport::Binding);
    for import in &mut imports {
        if let Some(absolute) = absolute_import(path, &module, &import.target) {
            import.target = absolute;
        }
    }
    let is_test = facts::is_test_path(path);
    // Fixtures anywhere in a test module can patch for its tests (autouse or by parameter).
    let fixtures = if is_test {
        fixtures_text(idx, src)
    } else {
        String::new()
    };
    let module_marks = if is_test {
        pytestmarks(idx, src)
    } else {
        Vec::new()
    };
    let defs = idx.all(kinds::FUNCTION_DEFINITION);
    let known_functions = known
        .map(|k| &k.functions[..])
        .filter(|k| k.len() == defs.len());
    let functions: Vec<Def> = defs
        .iter()
        .enumerate()
        .map(|(i, &f)| {
            let known = known_functions.and_then(|k| k.get(i));
            let (name, qualname, lines, is_async, ends_in, lock_param) = match known {
                Some(k) => (
                    k.name.clone(),
                    k.qualname.clone(),
                    k.lines,
                    k.is_async,
                    k.ends_in.clone(),
                    k.lock_param.clone(),
                ),
                None => (
                    syntax::function_name(f, src).to_string(),
                    facts::qualname(f, idx, src),
                    syntax::lines(f),
                    syntax::is_async(f),
                    ends_in(f, idx, src),
                    (!is_test)
                        .then(|| crate::rules::lock_param(f, src))
                        .flatten(),
                ),
            };
            debug_assert_eq!(qualname, facts::qualname(f, idx, src));
            let mocks = if is_test && name.starts_with("test") {
                Some(mock_text(idx, f, src, &module_marks))
            } else if is_test && facts::sets_up(&name) && qualname.contains('.') {
                // A base class's `setUp`: what the tests of other modules that inherit it mock.
                Some(facts::stand_ins(f, idx, src))
            } else {
                None
            };
            Def {
                name,
                qualname,
                lines,
                decorators: decorators(f, idx, src),
                is_async,
                ends_in,
                mocks,
                lock_param,
            }
        })
        .collect();
    let assignments = idx
        .all(kinds::ASSIGNMENT)
        .iter()
        .filter(|a| {
            idx.enclosing(**a, kinds::FUNCTION_DEFINITION).is_none()
                && idx.enclosing(**a, kinds::CLASS_DEFINITION).is_none()
        })
        .filter_map(|&a| {
            let left = a.field("left")?;
            (left.kind() == kinds::IDENTIFIER)
                .then(|| assignment(a, syntax::text(left, src), src))
                .flatten()
        })
        .chain(attribute_assignments(idx, src))
        .collect();
    let local_test_cache =
        local_test_cache(idx, src) || is_test && app_built_with_a_local_cache(file, src);
    let memcache_replies = imports
        .iter()
        .any(|i| crate::rules::idem::memcache_add_without_reply::is_pymemcache(&i.target))
        .then(|| crate::rules::idem::memcache_add_without_reply::waits_for_replies(src));
    let mut out = ModuleFacts {
        path: path.to_string(),
        module,
        imports,
        functions,
        assignments,
        calls: Vec::new(),
        fixtures,
        memcache_replies,
        local_test_cache,
    };
    let all_calls = idx.all(kinds::CALL);
    let sites = known
        .map(|k| &k.calls[..])
        .filter(|s| s.len() == all_calls.len());
    // Sized for every call at once rather than grown by copies; trimmed below to what the
    // index keeps for the rest of the review.
    let mut calls: Vec<Call> = Vec::with_capacity(all_calls.len());
    let mut runners = Vec::new();
    calls.extend(all_calls.iter().enumerate().filter_map(|(i, &call)| {
        let func = idx.enclosing(call, kinds::FUNCTION_DEFINITION)?;
        let syntax::CallText { callee, name, .. } = idx.call_text(call, src);
        if name.is_empty() {
            return None;
        }
        // `from app.service import pay as run`: `run()` calls `pay`.
        let imported = (!callee.contains('.'))
            .then(|| out.import_target(name))
            .flatten()
            .and_then(|t| t.rsplit_once('.'))
            .map(|(_, real)| real);
        // Borrowed when the review read it already: only two of its texts are kept.
        let computed;
        let site = match sites.and_then(|s| s.get(i)) {
            Some(site) => site,
            None => {
                computed = facts::call_site(call, idx, src);
                &computed
            }
        };
        // The site's function is the qualified name of `func`, the function around the call.
        debug_assert_eq!(*site.function, *facts::qualname(func, idx, src));
        if let Some(at) = syntax::runs_argument(name) {
            runners.push((call, at, site.function.clone()));
        }
        Some(Call {
            name: imported.unwrap_or(name).to_string(),
            module: callee_module(&out, callee, name),
            function: site.function.clone(),
            line: site.line,
            unchecked_use: site.deref_line.filter(|_| !site.checked),
            unchecked_subscript: site.deref_subscript,
            binding: site.binding.clone(),
        })
    }));
    // `run_async(billing.collect_invoice, processor, invoice_id)`: the function handed to a
    // runner is called as surely as if the caller had called it.
    for (call, at, function) in runners {
        let Some(&arg) = syntax::positional_args(call).get(at) else {
            continue;
        };
        if !matches!(arg.kind(), kinds::IDENTIFIER | kinds::ATTRIBUTE) {
            continue;
        }
        let callee = syntax::text(arg, src);
        let name = callee.rsplit('.').next().unwrap_or(callee);
        calls.push(Call {
            name: name.to_string(),
            module: callee_module(&out, callee, name),
            function,
            line: syntax::lines(call).0,
            unchecked_use: None,
            unchecked_subscript: false,
            binding: None,
        });
    }
    calls.sort_by(|a, b| (&a.function, &a.name, &a.module).cmp(&(&b.function, &b.name, &b.module)));
    // One call per function and callee; one that uses the result unchecked speaks for them all.
    calls.dedup_by(|later, kept| {
        let same = later.function == kept.function
            && later.name == kept.name
            && later.module == kept.module;
        if same && kept.unchecked_use.is_none() && later.unchecked_use.is_some() {
            std::mem::swap(later, kept);
        }
        same
    });
    calls.shrink_to_fit();
    out.calls = calls;
    out
}

/// A relative import's target made absolute, as the index looks modules up: in
/// `app/psp/__init__.py` or `app/psp/client.py`, `from .errors import E` (`.errors.E`) is
/// `app.psp.errors.E`, and `from . import errors` (`..errors`) is `app.psp.errors`. `None` for
/// an absolute import, or one that climbs above the repository's top.
fn absolute_import(path: &str, module: &str, target: &str) -> Option<String> {
    let rest = target.trim_start_matches('.');
    let dots = target.len() - rest.len();
    if dots == 0 {
        return None;
    }
    // `facts::imports` writes `from M import x` as `M.x`: a module of dots alone gains one.
    let levels = if rest.contains('.') { dots } else { dots - 1 };
    let package_levels = if path.ends_with("__init__.py") {
        levels - 1
    } else {
        levels
    };
    let mut base: Vec<&str> = module.split('.').filter(|p| !p.is_empty()).collect();
    let kept = base.len().checked_sub(package_levels)?;
    base.truncate(kept);
    base.push(rest);
    Some(base.join("."))
}

/// `Def::ends_in` of a function the review has no facts of.
fn ends_in(func: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> Option<Arc<[syntax::Tail]>> {
    let tails = syntax::tail_calls(func.field("body")?, src);
    facts::ends_in(func, src, tails, || {
        idx.within(func, kinds::RETURN_STATEMENT).iter().any(|r| {
            idx.enclosing(*r, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| f.id() == func.id())
        })
    })
}

/// The module a callee comes from: `svc.pay` with `from app import svc` → `app.svc`;
/// `pay` with `from app.svc import pay` → `app.svc`; `pay` defined here → this module.
fn callee_module(module: &ModuleFacts, callee: &str, name: &str) -> Option<String> {
    match callee.rsplit_once('.') {
        Some((receiver, _)) => {
            let (first, rest) = receiver
                .split_once('.')
                .map_or((receiver, ""), |(a, b)| (a, b));
            let target = module.import_target(first)?;
            Some(if rest.is_empty() {
                target.to_string()
            } else {
                format!("{target}.{rest}")
            })
        }
        None => match module.import_target(name) {
            Some(target) => Some(
                target
                    .rsplit_once('.')
                    .map_or(target, |(m, _)| m)
                    .to_string(),
            ),
            None => module
                .functions
                .iter()
                .any(|d| d.name == name && !d.qualname.contains('.'))
                .then(|| module.module.clone()),
        },
    }
}

fn fixtures_text(idx: &NodeIndex<'_>, src: &str) -> String {
    let mut out = String::new();
    for d in idx.all(kinds::DECORATOR) {
        if syntax::text(*d, src).contains("fixture")
            && let Some(def) = d.parent()
        {
            out.push_str(&syntax::text(def, src).to_ascii_lowercase());
            out.push('\n');
        }
        if out.len() > MAX_MOCK_CHARS {
            break;
        }
    }
    out
}

/// Each `pytestmark` of a file, as the class (or function) it is set in (`None`: the module's)
/// and its marks: `pytestmark = [pytest.mark.integration, pytest.mark.django_db]`.
pub(crate) fn pytestmarks<'t>(
    idx: &NodeIndex<'t>,
    src: &str,
) -> Vec<(Option<Node<'t>>, Vec<Node<'t>>)> {
    let mut out = Vec::new();
    for &assignment in idx.all(kinds::ASSIGNMENT) {
        let (Some(left), Some(value)) = (assignment.field("left"), assignment.field("right"))
        else {
            continue;
        };
        if syntax::text(left, src) != "pytestmark" {
            continue;
        }
        let scope = idx
            .enclosing(assignment, kinds::FUNCTION_DEFINITION)
            .or_else(|| idx.enclosing(assignment, kinds::CLASS_DEFINITION));
        let marks = if value.kind() == kinds::LIST || value.kind() == kinds::TUPLE {
            crate::python::named_children(value)
        } else {
            vec![value]
        };
        out.push((scope, marks));
    }
    out
}

/// A test's decorators (its class's too, and the `pytestmark`s of its module and classes, as
/// decorators), parameters and patch calls: where a mock of what it reaches would be written,
/// besides the module's fixtures, and how it runs (`@pytest.mark.integration`).
fn mock_text(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    src: &str,
    marks: &[(Option<Node<'_>>, Vec<Node<'_>>)],
) -> String {
    let mut out = String::new();
    let mut outer = Some(func);
    let mark = |scope: Option<Node<'_>>, out: &mut String| {
        let here = marks
            .iter()
            .filter(|(s, _)| s.map(|s| s.id()) == scope.map(|s| s.id()));
        for m in here.flat_map(|(_, m)| m) {
            out.push('@');
            out.push_str(syntax::text(*m, src));
            out.push('\n');
        }
    };
    while let Some(node) = outer {
        if let Some(parent) = idx.decorated(node) {
            for d in syntax::decorators(parent) {
                out.push_str(syntax::text(d, src));
                out.push('\n');
            }
        }
        outer = idx.enclosing(node, kinds::CLASS_DEFINITION);
        if let Some(class) = outer {
            mark(Some(class), &mut out);
        }
    }
    mark(None, &mut out);
    if let Some(params) = func.field("parameters") {
        out.push_str(syntax::text(params, src));
        out.push('\n');
    }
    for call in idx.within(func, kinds::CALL) {
        if MOCKERS.contains(&idx.callee_name(*call, src)) {
            out.push_str(syntax::text(*call, src));
            out.push('\n');
        }
    }
    let mut out = out.to_ascii_lowercase();
    if let Some((at, _)) = out.char_indices().nth(MAX_MOCK_CHARS) {
        out.truncate(at);
    }
    out
}

pub(crate) fn decorators(func: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> Vec<Decorator> {
    let Some(parent) = idx.decorated(func) else {
        return Vec::new();
    };
    syntax::decorators(parent)
        .into_iter()
        .filter_map(|d| {
            let expr = d.named_child(0)?;
            let line = syntax::lines(d).0;
            Some(if expr.kind() == kinds::CALL {
                Decorator {
                    callee: syntax::callee(expr, src).to_string(),
                    line,
                    keywords: keywords(expr, src),
                    splat: syntax::has_dict_splat(expr),
                }
            } else {
                Decorator {
                    callee: syntax::text(expr, src).to_string(),
                    line,
                    keywords: Vec::new(),
                    splat: false,
                }
            })
        })
        .collect()
}

/// Clients a class builds for itself: `self.redis = redis.Redis(...)` in a method, or
/// `redis = redis.Redis(...)` in the class body, recorded as `Class.redis` (calls only, but for
/// the members of a class of states: `RefundStatus.SUBMITTED`).
fn attribute_assignments<'a>(
    idx: &'a NodeIndex<'_>,
    src: &'a str,
) -> impl Iterator<Item = Assignment> + 'a {
    idx.all(kinds::ASSIGNMENT).iter().filter_map(move |&a| {
        let class = idx.enclosing(a, kinds::CLASS_DEFINITION)?;
        let class_name = syntax::text(class.field("name")?, src);
        let left = a.field("left")?;
        let in_method = idx
            .enclosing(a, kinds::FUNCTION_DEFINITION)
            .is_some_and(|f| f.start_byte() > class.start_byte());
        let attr = match left.kind() {
            kinds::IDENTIFIER if !in_method => syntax::text(left, src),
            kinds::ATTRIBUTE if in_method => {
                let object = syntax::text(left.field("object")?, src);
                if object != "self" && object != "cls" {
                    return None;
                }
                syntax::text(left.field("attribute")?, src)
            }
            _ => return None,
        };
        let found = assignment(a, &format!("{class_name}.{attr}"), src)?;
        let kept = found.callee.is_some()
            || !in_method && (states(class, class_name, src) || constant_set(attr, &found.value));
        kept.then_some(found)
    })
}

/// A set a class keeps for the code that reads its records (`ACTIVE_STATUSES = (Status.QUEUED,
/// ...)` of a Django model): read as `Refund.ACTIVE_STATUSES` in other modules.
fn constant_set(name: &str, value: &str) -> bool {
    name.bytes()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        && value.starts_with(['(', '[', '{'])
}

/// A class of states (`class RefundStatus(str, Enum)`, `class State(models.TextChoices)`):
/// its members are kept whatever their values, for rules that ask what states a record has.
fn states(class: Node<'_>, name: &str, src: &str) -> bool {
    let bases = class
        .field("superclasses")
        .map_or("", |b| syntax::text(b, src));
    name.ends_with("Status")
        || name.ends_with("State")
        || bases.contains("Enum")
        || bases.contains("Choices")
}

/// The last `name = value` at the module level of a file, as the index keeps it: what a
/// module-level name holds when the file is read alone (no repository).
pub(crate) fn module_assignment(idx: &NodeIndex<'_>, name: &str, src: &str) -> Option<Assignment> {
    let found = idx.all(kinds::ASSIGNMENT).iter().rfind(|a| {
        idx.enclosing(**a, kinds::FUNCTION_DEFINITION).is_none()
            && idx.enclosing(**a, kinds::CLASS_DEFINITION).is_none()
            && a.field("left")
                .is_some_and(|l| l.kind() == kinds::IDENTIFIER && syntax::text(l, src) == name)
    })?;
    assignment(*found, name, src)
}

/// What `name = value` (`a`) binds, as the index keeps it.
pub(crate) fn assignment(a: Node<'_>, name: &str, src: &str) -> Option<Assignment> {
    let right = crate::rules::idem::strip_await(a.field("right")?);
    let is_call = right.kind() == kinds::CALL;
    Some(Assignment {
        name: name.to_string(),
        line: syntax::lines(a).0,
        callee: is_call.then(|| syntax::callee(right, src).to_string()),
        keywords: if is_call {
            keywords(right, src)
        } else {
            Vec::new()
        },
        splat: is_call && syntax::has_dict_splat(right),
        value: bounded(syntax::text(right, src)),
    })
}

/// Whether a class of the module named for the tests (`TestConfig`, `TestingConfig`) sets
/// Flask-Caching's `CACHE_TYPE` to a cache in the process (`SimpleCache`, `NullCache`).
fn local_test_cache(idx: &NodeIndex<'_>, src: &str) -> bool {
    if memchr::memmem::find(src.as_bytes(), b".CACHES").is_some() && autouse_local_caches(idx, src)
    {
        return true;
    }
    if memchr::memmem::find(src.as_bytes(), b"CACHE_TYPE").is_none() {
        return false;
    }
    idx.all(kinds::CLASS_DEFINITION).iter().any(|class| {
        let named_for_tests = class
            .field("name")
            .is_some_and(|n| syntax::contains_lowercase(syntax::text(n, src), "test"));
        named_for_tests
            && idx.within(*class, kinds::ASSIGNMENT).iter().any(|a| {
                a.field("left")
                    .is_some_and(|l| syntax::text(l, src) == "CACHE_TYPE")
                    && a.field("right").is_some_and(|v| {
                        matches!(
                            syntax::string_value(v, src),
                            Some("SimpleCache" | "NullCache" | "simple" | "null")
                        )
                    })
            })
    })
}

/// Whether a test module (a `conftest.py`) builds the app with Flask-Caching set to a cache in the
/// process: `create_app({"CACHE_TYPE": "SimpleCache", ...})`, `app.config["CACHE_TYPE"] =
/// "SimpleCache"`, `app.config.update(CACHE_TYPE="NullCache")`.
fn app_built_with_a_local_cache(file: &ParsedFile, src: &str) -> bool {
    let root = file.root();
    memchr::memmem::find_iter(src.as_bytes(), b"CACHE_TYPE").any(|at| {
        let Some(name) = root.descendant_for_byte_range(at, at + "CACHE_TYPE".len()) else {
            return false;
        };
        // The string's content, or the name itself: up to the node that holds the value.
        let holder = std::iter::successors(Some(name), |n| n.parent())
            .take(4)
            .find(|n| {
                matches!(
                    n.kind(),
                    kinds::PAIR | kinds::KEYWORD_ARGUMENT | kinds::ASSIGNMENT
                )
            });
        let value = holder.and_then(|h| match h.kind() {
            kinds::PAIR | kinds::KEYWORD_ARGUMENT => h.field("value"),
            _ => h.field("right"),
        });
        value.is_some_and(|v| {
            matches!(
                syntax::string_value(v, src),
                Some("SimpleCache" | "NullCache" | "simple" | "null")
            )
        })
    })
}

/// pytest-django's `settings` fixture set, in an autouse fixture, to a cache in the process:
/// `settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}`.
fn autouse_local_caches(idx: &NodeIndex<'_>, src: &str) -> bool {
    idx.all(kinds::ASSIGNMENT).iter().any(|a| {
        let local = a.field("left").is_some_and(|l| {
            l.kind() == kinds::ATTRIBUTE && syntax::text(l, src).ends_with(".CACHES")
        }) && a.field("right").is_some_and(|v| {
            let value = syntax::text(v, src).to_ascii_lowercase();
            value.contains("locmem") || value.contains("dummycache")
        });
        local
            && idx
                .enclosing(*a, kinds::DECORATED_DEFINITION)
                .is_some_and(|d| {
                    syntax::decorators(d).iter().any(|dec| {
                        let text = syntax::text(*dec, src);
                        text.contains("fixture") && text.contains("autouse=True")
                    })
                })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(path: &str, src: &str) -> ModuleFacts {
        let file = ParsedFile::parse(src.to_string()).expect("parses");
        extract(path, &file)
    }

    #[test]
    fn relative_imports_are_read_from_the_importing_module() {
        let text = "from .errors import PspErrors\nfrom . import client\nfrom ..core.cache import redis as r\nfrom .. import settings\nimport json\n";
        let package = facts("app/psp/__init__.py", text);
        assert_eq!(
            package.import_target("PspErrors"),
            Some("app.psp.errors.PspErrors")
        );
        assert_eq!(package.import_target("client"), Some("app.psp.client"));
        assert_eq!(package.import_target("r"), Some("app.core.cache.redis"));
        assert_eq!(package.import_target("settings"), Some("app.settings"));
        assert_eq!(package.import_target("json"), Some("json"));
        let module = facts("app/psp/gateway.py", text);
        assert_eq!(
            module.import_target("PspErrors"),
            Some("app.psp.errors.PspErrors")
        );
        assert_eq!(module.import_target("r"), Some("app.core.cache.redis"));
        // Above the repository's top: left as written.
        let top = facts("gateway.py", "from ..x import y\n");
        assert_eq!(top.import_target("y"), Some("..x.y"));
    }

    #[test]
    fn reads_clients_tasks_imports_and_calls() {
        let m = facts(
            "app/tasks.py",
            "import app.cache as c\nfrom app.payments import service as svc\nfrom app.x import run\nimport redis\n\nclient = redis.Redis.from_url(URL, decode_responses=True)\nLIMIT = 30\n\n@celery_app.task(bind=True, soft_time_limit=LIMIT)\ndef pay(self, order_id):\n    svc.process(order_id)\n    run()\n",
        );
        assert_eq!(m.module, "app.tasks");
        assert_eq!(m.import_target("c"), Some("app.cache"));
        assert_eq!(m.import_target("svc"), Some("app.payments.service"));
        let client = m.assignment("client").expect("client");
        assert_eq!(client.line, 6);
        assert_eq!(client.callee.as_deref(), Some("redis.Redis.from_url"));
        assert_eq!(
            client.keywords,
            vec![("decode_responses".to_string(), "True".to_string())]
        );
        assert_eq!(m.assignment("LIMIT").map(|a| a.value.as_str()), Some("30"));
        let pay = m.def("pay").expect("pay");
        assert_eq!(pay.decorators[0].callee, "celery_app.task");
        assert_eq!(pay.decorators[0].line, 9);
        let modules: Vec<(&str, Option<&str>)> = m
            .calls
            .iter()
            .map(|c| (c.name.as_str(), c.module.as_deref()))
            .collect();
        assert_eq!(
            modules,
            [
                ("process", Some("app.payments.service")),
                ("run", Some("app.x"))
            ]
        );
    }
}
