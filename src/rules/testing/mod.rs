//! The `test` family: tests that this change leaves reaching live services, and retry tests that
//! wait for real or do not check what the retry is for. Shared here: which test functions a file
//! has, what they mock, and what the code they call reaches.

mod injected;
mod live_setup;
pub mod patch_misses_the_import;
pub mod retry_test_sleeps_or_misses_key;
pub mod test_reaches_live_service;

use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::Ctx;
use crate::rules::facts::{FileFacts, FunctionFacts};
use crate::rules::reach::{Reach, Trait};
use crate::source::Side;

/// Calls that mock something when given its path or object.
const MOCKERS: &[&str] = &["patch", "object", "setattr", "setitem", "dict", "multiple"];

/// Libraries whose calls in a test stand in for the network.
const NETWORK_MOCKS: &[&str] = &[
    "aioresponses",
    "respx",
    "requests_mock",
    "responses",
    "httpretty",
    "mocket",
];

/// A test function of the file being reviewed.
pub struct TestFn<'t> {
    pub node: Node<'t>,
    /// The function with its decorators: what is reported.
    pub outer: Node<'t>,
    pub facts: FunctionFacts,
    /// The diff does not show the `def` line (it was re-created from a hunk header), so the
    /// decorators and the start of the body are unknown.
    pub partial: bool,
    /// Whether an ordinary test run runs it (never `Runs::Never`: such tests are left out).
    pub runs: Runs,
}

/// Whether an ordinary test run runs a test, by what its decorators, its classes' and a
/// `pytestmark` say.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Runs {
    Always,
    /// Only when asked for: a marker of live tests (`@pytest.mark.integration`), or a skip
    /// unless the environment holds credentials (`skipUnless(os.environ.get("STRIPE_KEY"))`).
    /// Such a test talks to a real service on purpose.
    OnRequest,
    /// `@pytest.mark.skip`, `@unittest.skip(...)`: whatever it would reach, it does not.
    Never,
}

/// Markers that set live tests apart, to be run on request (`pytest -m integration`).
const LIVE_MARKERS: &[&str] = &[
    "integration",
    "integration_test",
    "live",
    "e2e",
    "sandbox",
    "external",
    "network",
    "online",
];

/// Words of a skip's condition that say it waits for a live service's credentials or a switch
/// in the environment.
const OPT_IN_WORDS: &[&str] = &[
    "environ",
    "getenv",
    "env.",
    "env(",
    "env[",
    "live",
    "sandbox",
    "integration",
    "api_key",
    "apikey",
    "secret",
    "credential",
    "token",
];

/// What one decorator (or a `pytestmark` value) says of running the test; any case, `@` or not.
pub fn runs_by(decorator: &str) -> Runs {
    let text = decorator
        .trim()
        .trim_start_matches('@')
        .to_ascii_lowercase();
    let callee = text.split('(').next().unwrap_or("").trim();
    let last = callee.rsplit('.').next().unwrap_or(callee);
    match last {
        "skip" => Runs::Never,
        "skipif" | "skipunless" if OPT_IN_WORDS.iter().any(|w| text.contains(w)) => Runs::OnRequest,
        marker if callee.contains("mark.") && LIVE_MARKERS.contains(&marker) => Runs::OnRequest,
        _ => Runs::Always,
    }
}

/// What each `pytestmark` of a file says, with the class (or function) it sits in; `None` for
/// the module's. Read once per file, not once per test: a test module holds hundreds of tests.
fn pytestmarks<'t>(idx: &NodeIndex<'t>, src: &str) -> Vec<(Option<Node<'t>>, Runs)> {
    crate::index::pytestmarks(idx, src)
        .into_iter()
        .map(|(scope, marks)| {
            let runs = marks
                .iter()
                .map(|m| runs_by(syntax::text(*m, src)))
                .max()
                .unwrap_or(Runs::Always);
            (scope, runs)
        })
        .collect()
}

/// `runs_by` over a test's decorators, its classes' and the `pytestmark`s around it (of its
/// module and classes): the strictest wins.
fn declared_runs(
    func: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &str,
    marks: &[(Option<Node<'_>>, Runs)],
) -> Runs {
    let mut runs = Runs::Always;
    let mut outer = Some(func);
    while let Some(node) = outer {
        if let Some(parent) = idx.decorated(node) {
            for d in syntax::decorators(parent) {
                runs = runs.max(runs_by(syntax::text(d, src)));
            }
        }
        outer = idx.enclosing(node, kinds::CLASS_DEFINITION);
    }
    marks
        .iter()
        .filter(|(scope, _)| scope.is_none_or(|c| syntax::contains(c, func)))
        .fold(runs, |runs, (_, mark)| runs.max(*mark))
}

/// The test functions of this side of the file.
pub fn tests_of<'t>(cx: &Ctx<'t>) -> Vec<TestFn<'t>> {
    let (Some(idx), Some(facts)) = (cx.index(), cx.facts) else {
        return Vec::new();
    };
    let src = cx.src();
    let synthetic = match cx.side {
        Side::Old => cx.versions.old.as_ref(),
        Side::New => cx.versions.new.as_ref(),
    }
    .map(|v| v.synthetic.clone())
    .unwrap_or_default();
    let by_qualname = facts.functions_by_qualname();
    let marks = pytestmarks(idx, src);
    idx.all(kinds::FUNCTION_DEFINITION)
        .iter()
        .filter_map(|&node| {
            let qualname = crate::rules::facts::qualname(node, idx, src);
            let f = by_qualname
                .get(qualname.as_str())
                .copied()
                .filter(|f| f.is_test)?;
            let runs = declared_runs(node, idx, src, &marks);
            if runs == Runs::Never {
                return None;
            }
            let outer = idx.decorated(node).unwrap_or(node);
            Some(TestFn {
                node,
                outer,
                partial: synthetic.contains(&f.lines.0),
                facts: f.clone(),
                runs,
            })
        })
        .collect()
}

/// What may mock things for a test, lowercased: its decorators and its class's, its parameters,
/// the patch calls in it, `setUp`, and the autouse fixtures of the file and of a `conftest.py`
/// in the change.
pub struct Mocks<'m> {
    texts: Vec<String>,
    /// What mocks for every test of the file, and of its class (`FileMocks`), shared, not
    /// copied per test.
    shared: &'m [String],
    class: Option<std::rc::Rc<[String]>>,
    params: Vec<String>,
    /// Attributes the test or its `setUp` configures as mocks (`create_transfer` of
    /// `self.provider.create_transfer.side_effect = [...]`), lowercase.
    configured: Vec<String>,
    /// The `responses` answer the test registers though nothing activates `responses` for it
    /// (`responses.add(...)` in a test without the `@responses.activate` its siblings have):
    /// it mocks nothing.
    pub unactivated: Option<String>,
}

/// What mocks for every test of a file side, read once for all of them: the autouse fixtures of
/// the file and of a `conftest.py` in the change, and each class's decorators and `setUp`
/// methods. Read again for each test, a test module of a thousand tests cost a thousand scans
/// of itself and of every file of the change.
pub struct FileMocks {
    shared: Vec<String>,
    /// By the start byte of the class.
    classes: std::cell::RefCell<rustc_hash::FxHashMap<usize, std::rc::Rc<[String]>>>,
}

impl FileMocks {
    pub fn of(cx: &Ctx<'_>) -> FileMocks {
        let mut shared = match cx.index() {
            Some(idx) => autouse_fixtures(idx, cx.src()),
            None => Vec::new(),
        };
        shared.extend(conftest_fixtures(cx));
        shared.extend(repository_autouse(cx));
        FileMocks {
            shared,
            classes: Default::default(),
        }
    }

    /// The decorators of `class` and its `setUp` methods, lowercased; for a base class of
    /// another module, what its `setUp` makes to stand in.
    fn class(&self, cx: &Ctx<'_>, class: Node<'_>, idx: &NodeIndex<'_>) -> std::rc::Rc<[String]> {
        let src = cx.src();
        let lower = |n: Node<'_>| syntax::text(n, src).to_ascii_lowercase();
        self.classes
            .borrow_mut()
            .entry(class.start_byte())
            .or_insert_with(|| {
                let mut texts: Vec<String> = Vec::new();
                // The class and the base classes the file defines: a `setUp` is most often
                // inherited from the suite's own base class.
                for class in lineage(class, idx, src) {
                    texts.extend(
                        idx.decorated(class)
                            .map(|parent| syntax::decorators(parent).into_iter().map(lower))
                            .into_iter()
                            .flatten(),
                    );
                    texts.extend(
                        idx.within(class, kinds::FUNCTION_DEFINITION)
                            .iter()
                            .filter(|f| {
                                crate::rules::facts::sets_up(syntax::function_name(**f, src))
                            })
                            .map(|f| lower(*f)),
                    );
                    for base in imported_bases(class, idx, src) {
                        texts.extend(inherited_setup(cx, base));
                    }
                }
                texts.into()
            })
            .clone()
    }
}

/// The names of `class`'s base classes that the file does not define: imported
/// (`KassaTestCase` of `from tests.support import KassaTestCase`).
fn imported_bases<'s>(class: Node<'_>, idx: &NodeIndex<'_>, src: &'s str) -> Vec<&'s str> {
    let Some(bases) = class.field("superclasses") else {
        return Vec::new();
    };
    crate::python::named_children(bases)
        .into_iter()
        .filter(|b| b.kind() == kinds::IDENTIFIER)
        .map(|b| syntax::text(b, src))
        .filter(|name| {
            !idx.all(kinds::CLASS_DEFINITION).iter().any(|c| {
                c.field("name")
                    .is_some_and(|n| syntax::text(n, src) == *name)
            })
        })
        .collect()
}

/// What the `setUp` of a base class of another module makes to stand in for things: read from
/// a test file of the change that defines it, or, in repository mode, from the module the file
/// imports it from (`tests/support.py`, whose `asyncSetUp` starts `respx.mock(...)`).
fn inherited_setup(cx: &Ctx<'_>, base: &str) -> Vec<String> {
    let prefix = format!("{base}.");
    let of_base = |qualname: &str, name: &str| {
        qualname.starts_with(&prefix) && crate::rules::facts::sets_up(name)
    };
    let in_change: Vec<String> = cx
        .change
        .side(cx.side)
        .filter(|f| f.is_test)
        .flat_map(|f| f.functions.iter())
        .filter(|f| of_base(&f.qualname, &f.name))
        .filter_map(|f| f.mocks.as_deref().map(str::to_string))
        .collect();
    if !in_change.is_empty() {
        return in_change;
    }
    let Some(target) = cx.facts.and_then(|f| f.import_target(base)) else {
        return Vec::new();
    };
    let Some((module, _)) = target.rsplit_once('.') else {
        return Vec::new();
    };
    let Some(found) = cx.project().and_then(|p| p.module(module)) else {
        return Vec::new();
    };
    found
        .functions
        .iter()
        .filter(|d| of_base(&d.qualname, &d.name))
        .filter_map(|d| d.mocks.clone())
        .collect()
}

/// `class`, then the base classes of it that the file defines, nearest first (a few levels).
fn lineage<'t>(class: Node<'t>, idx: &NodeIndex<'t>, src: &str) -> Vec<Node<'t>> {
    let mut out = vec![class];
    let mut at = 0;
    while let Some(&current) = out.get(at).filter(|_| out.len() < 8) {
        at += 1;
        let Some(bases) = current.field("superclasses") else {
            continue;
        };
        for base in crate::python::named_children(bases) {
            let name = syntax::text(base, src);
            let defined = idx.all(kinds::CLASS_DEFINITION).iter().find(|c| {
                c.field("name")
                    .is_some_and(|n| syntax::text(n, src) == name)
                    && !out.iter().any(|o| o.id() == c.id())
            });
            if let Some(defined) = defined {
                out.push(*defined);
            }
        }
    }
    out
}

impl<'m> Mocks<'m> {
    pub fn of(cx: &Ctx<'_>, test: &TestFn<'_>, file: &'m FileMocks) -> Mocks<'m> {
        let (Some(idx), src) = (cx.index(), cx.src()) else {
            return Mocks {
                texts: Vec::new(),
                shared: &[],
                class: None,
                params: Vec::new(),
                configured: Vec::new(),
                unactivated: None,
            };
        };
        let unactivated = unactivated_responses(idx, test, src);
        let lower = |n: Node<'_>| syntax::text(n, src).to_ascii_lowercase();
        let mut texts: Vec<String> = syntax::decorators(test.outer)
            .into_iter()
            .map(lower)
            .collect();
        let class = idx
            .enclosing(test.node, kinds::CLASS_DEFINITION)
            .map(|class| file.class(cx, class, idx));
        texts.extend(
            idx.within(test.node, kinds::CALL)
                .iter()
                .filter(|c| {
                    let name = syntax::callee_name(**c, src);
                    if unactivated.is_some() && syntax::callee(**c, src).starts_with("responses.") {
                        return false;
                    }
                    MOCKERS.contains(&name)
                        // A router the test runs the code inside (`with aioresponses() as
                        // mocked:`, `with respx.mock(...)`, `responses.RequestsMock()`): what
                        // is sent inside it is answered by the test.
                        || NETWORK_MOCKS
                            .iter()
                            .any(|m| syntax::callee(**c, src).to_ascii_lowercase().contains(m))
                        // A stand-in for a class the test hands the code
                        // (`transport=mock.Mock(spec=HttpTransport)`).
                        || matches!(name, "Mock" | "MagicMock" | "AsyncMock" | "create_autospec")
                            && syntax::text(**c, src).contains("spec")
                        // httpx's transport that answers in the test: a client the test builds
                        // on it sends nothing.
                        || name == "MockTransport"
                })
                .map(|c| lower(*c)),
        );
        // A stand-in the test makes and hands the code by name (`session = mock.Mock()`, then
        // `Gateway(session, ...)`): the name says what it replaces.
        texts.extend(
            idx.within(test.node, kinds::CALL)
                .iter()
                .filter(|c| {
                    matches!(
                        syntax::callee_name(**c, src),
                        "Mock" | "MagicMock" | "AsyncMock" | "NonCallableMock"
                    )
                })
                .filter_map(|c| syntax::bound_name(*c, src))
                .map(str::to_ascii_lowercase),
        );
        // Helpers of test files the test calls, with what they mock
        // (`self.client = helper.client_from_file(...)`, which mocks its HTTP client).
        texts.extend(
            test.facts
                .callees
                .iter()
                .flat_map(|name| cx.change.functions_named(cx.side, name))
                .filter(|(file, _)| file.is_test)
                .filter_map(|(_, f)| f.mocks.as_deref())
                .map(str::to_string),
        );
        let mut params = parameters(test.node, src);
        texts.extend(fixture_mocks(cx, &params));
        let fixtures = fixtures_named(idx, src, &params);
        // A fixture that hands the test a client of a real Redis is what the test reaches, not
        // a mock of it, whatever it is named.
        params.retain(|p| {
            !fixtures
                .iter()
                .any(|(name, text)| name == p && live_cache(text))
        });
        texts.extend(
            fixtures
                .into_iter()
                .filter(|(_, text)| !live_cache(text))
                .map(|(_, text)| text),
        );
        let mut configured = configured_mocks(syntax::text(test.node, src));
        for text in class.as_deref().unwrap_or_default() {
            configured.extend(configured_mocks(text));
        }
        Mocks {
            texts,
            shared: &file.shared,
            class,
            params,
            configured,
            unactivated,
        }
    }

    fn texts(&self) -> impl Iterator<Item = &String> {
        let class = self.class.as_deref().unwrap_or_default();
        self.texts.iter().chain(class).chain(self.shared)
    }

    /// Whether every mock that mentions one of `tokens` is a patch of a module's function of
    /// requests or httpx (`@mock.patch("requests.post")`, `mocker.patch("httpx.get")`), and no
    /// parameter is named like one: the patch replaces `requests.post`, not what a `Session`
    /// the code made sends. As the patch's target.
    pub fn module_verbs_only(&self, tokens: &[String]) -> Option<String> {
        let mentions = |t: &String| tokens.iter().any(|tok| !tok.is_empty() && t.contains(tok));
        if self.params.iter().any(mentions) {
            return None;
        }
        let mut target = None;
        for text in self.texts().filter(|t| mentions(t)) {
            target = Some(module_verb_patched(text)?);
        }
        target
    }

    /// Whether every mock that mentions one of `tokens` patches the library's own sleep
    /// (`monkeypatch.setattr("app.client.time.sleep", ...)`, `mock.patch("asyncio.sleep")`,
    /// `monkeypatch.setattr(time, "sleep", ...)`), and no parameter is named like one: code that
    /// took the sleep as a default when it loaded still has the real one.
    pub fn library_sleep_only(&self, tokens: &[String]) -> bool {
        let mentions = |t: &String| tokens.iter().any(|tok| !tok.is_empty() && t.contains(tok));
        if self.params.iter().any(mentions) {
            return false;
        }
        let mut any = false;
        let all = self.texts().filter(|t| mentions(t)).all(|t| {
            any = true;
            t.contains("time.sleep")
                || t.contains("asyncio.sleep")
                || t.contains("time, \"sleep\"")
                || t.contains("time, 'sleep'")
        });
        any && all
    }

    /// Whether something mentions one of `tokens` (lowercase), or a parameter is named like one.
    pub fn cover(&self, tokens: &[String]) -> bool {
        self.texts().chain(self.params.iter()).any(|t| {
            tokens
                .iter()
                .any(|tok| !tok.is_empty() && t.contains(tok.as_str()))
        })
    }
}

/// `requests.post` of a mock's text (lower case) that patches only a module's functions of
/// requests or httpx, and mentions neither library otherwise.
fn module_verb_patched(text: &str) -> Option<String> {
    const VERBS: &[&str] = &["get", "post", "put", "patch", "delete", "request", "head"];
    let mut found = None;
    for lib in ["requests", "httpx"] {
        for (at, _) in text.match_indices(lib) {
            let rest = &text[at + lib.len()..];
            let before = text[..at].chars().next_back();
            // `"requests.post"` as a patch target, quoted.
            let verb = rest.strip_prefix('.').and_then(|r| {
                VERBS
                    .iter()
                    .find(|v| r.starts_with(**v) && r[v.len()..].starts_with(['"', '\'']))
            });
            match (before, verb) {
                (Some('"' | '\''), Some(verb)) => found = Some(format!("{lib}.{verb}")),
                _ => return None,
            }
        }
    }
    found
}

impl Mocks<'_> {
    /// Whether a function on the path to the service belongs to a class the test stands a mock
    /// in for: `mock.Mock(spec=AcmePayClient)` in `setUp`, `create_autospec(HttpTransport)`.
    /// The object the code is handed is the mock, whatever the real class would reach.
    pub fn spec_a_class_on(&self, cx: &Ctx<'_>, path: &[String]) -> bool {
        let specs: Vec<&str> = self.texts().flat_map(|t| spec_classes(t)).collect();
        !specs.is_empty()
            && path.iter().any(|name| {
                cx.change.functions_named(cx.side, name).any(|(_, f)| {
                    f.qualname
                        .rsplit_once('.')
                        .map(|(class, _)| class.rsplit('.').next().unwrap_or(class))
                        .is_some_and(|class| specs.iter().any(|s| class.eq_ignore_ascii_case(s)))
                })
            })
    }

    /// Whether the test patches the class a function on the path is a method of
    /// (`mocker.patch("fares.payouts.FlutterwaveClient")`): what the code builds of it is a mock.
    /// Where the patch misses the module under test, TEST003 says so.
    pub fn patch_a_class_on(&self, cx: &Ctx<'_>, path: &[String]) -> bool {
        path.iter().any(|name| {
            cx.change.functions_named(cx.side, name).any(|(_, f)| {
                f.qualname
                    .rsplit_once('.')
                    .map(|(class, _)| class.rsplit('.').next().unwrap_or(class))
                    .filter(|class| class.starts_with(|c: char| c.is_ascii_uppercase()))
                    .is_some_and(|class| {
                        let class = class.to_ascii_lowercase();
                        self.texts().any(|t| {
                            t.contains(&format!(".{class}\"")) || t.contains(&format!(".{class}'"))
                        })
                    })
            })
        })
    }

    /// Whether a function on the path to the service is an attribute the test configures as a
    /// mock (`self.provider.create_transfer.side_effect = [...]`): what the code calls there is
    /// the mock, whatever the real method would reach.
    pub fn configured_on(&self, path: &[String]) -> bool {
        !self.configured.is_empty()
            && path.iter().any(|name| {
                let last = name.rsplit('.').next().unwrap_or(name);
                self.configured.iter().any(|c| c.eq_ignore_ascii_case(last))
            })
    }

    /// Whether a patch target ends with `name` (`"app.payments.service.create_charge"`,
    /// `patch.object(client, "create_charge")`): the function itself is replaced.
    pub fn replace_function(&self, name: &str) -> bool {
        self.texts().any(|t| replaces(t, name))
    }
}

/// The attributes a text configures as mocks: `create_transfer` of
/// `provider.create_transfer.side_effect = ...` or `.return_value = ...` (not `return_value ==`).
fn configured_mocks(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for marker in [".side_effect", ".return_value"] {
        for (at, _) in text.match_indices(marker) {
            let after = text[at + marker.len()..].trim_start();
            if !after.starts_with('=') || after.starts_with("==") {
                continue;
            }
            let head = &text[..at];
            // Past the whole character that ends the name: it may be more than one byte.
            let start = head
                .char_indices()
                .rfind(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
                .map_or(0, |(i, c)| i + c.len_utf8());
            let name = &head[start..];
            // `patcher.start().return_value`: a call's result names nothing.
            if name.is_empty() || !head[..start].ends_with('.') {
                continue;
            }
            let name = name.to_ascii_lowercase();
            if !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

/// The classes a mock's text (lowercase) makes stand-ins for: `spec=X`, `spec_set=X`,
/// `create_autospec(X)`, the last name of each.
fn spec_classes(text: &str) -> impl Iterator<Item = &str> {
    ["spec=", "spec_set=", "create_autospec("]
        .into_iter()
        .flat_map(move |marker| text.match_indices(marker).map(move |(at, m)| at + m.len()))
        .filter_map(move |start| {
            let rest = text.get(start..)?.trim_start();
            let len = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                .unwrap_or(rest.len());
            let name = rest.get(..len)?;
            let last = name.rsplit('.').next().unwrap_or(name);
            (!last.is_empty() && last != "none" && last != "true").then_some(last)
        })
}

/// Whether a mock's text (lowercase) names `name` as its whole patch target or its last part.
pub fn replaces(mocks: &str, name: &str) -> bool {
    [
        format!(".{name}\""),
        format!(".{name}'"),
        format!("\"{name}\""),
        format!("'{name}'"),
    ]
    .iter()
    .any(|e| mocks.contains(&e.to_ascii_lowercase()))
}

fn parameters(func: Node<'_>, src: &str) -> Vec<String> {
    let Some(params) = func.field("parameters") else {
        return Vec::new();
    };
    let mut cursor = params.walk();
    params
        .named_children(&mut cursor)
        .filter_map(|p| {
            let name = if p.kind() == kinds::IDENTIFIER {
                Some(p)
            } else {
                p.field("name").or_else(|| p.named_child(0))
            }?;
            Some(syntax::text(name, src).to_ascii_lowercase())
        })
        .collect()
}

fn autouse_fixtures(idx: &NodeIndex<'_>, src: &str) -> Vec<String> {
    idx.all(kinds::DECORATOR)
        .iter()
        .filter(|d| syntax::text(**d, src).contains("autouse"))
        .filter_map(|d| d.parent())
        .map(|def| syntax::text(def, src).to_ascii_lowercase())
        .collect()
}

/// Autouse fixtures of a `conftest.py` of the repository above the file that the change does
/// not show (repository mode), where they stand something in (`fakeredis.FakeRedis()` set in
/// place by `monkeypatch.setattr`): they mock for every test below them. One that connects to
/// a live cache mocks nothing.
fn repository_autouse(cx: &Ctx<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for code in repository_conftests(cx) {
        for chunk in code.split("\n@") {
            let (decorator, _) = chunk.split_once('\n').unwrap_or((chunk, ""));
            if decorator.contains("autouse")
                && ["fake", "mock", "stub", "setattr", "patch"]
                    .iter()
                    .any(|w| chunk.contains(w))
                && !live_cache(chunk)
            {
                out.push(chunk.to_string());
            }
        }
    }
    out
}

/// The fixtures of this file that the test asks for by parameter (`flaky_post` patching
/// `requests.post`): what they patch, the test gets.
fn fixtures_named(idx: &NodeIndex<'_>, src: &str, params: &[String]) -> Vec<(String, String)> {
    fixtures(idx, src)
        .filter_map(|(decorated, def)| {
            let name = syntax::function_name(def, src).to_ascii_lowercase();
            params
                .contains(&name)
                .then(|| (name, syntax::text(decorated, src).to_ascii_lowercase()))
        })
        .collect()
}

/// The fixtures of the file: each decorated definition with its function.
fn fixtures<'t>(idx: &NodeIndex<'t>, src: &str) -> impl Iterator<Item = (Node<'t>, Node<'t>)> {
    idx.all(kinds::DECORATOR)
        .iter()
        .filter(move |d| syntax::text(**d, src).contains("fixture"))
        .filter_map(|d| {
            let decorated = d.parent()?;
            Some((decorated, decorated.field("definition")?))
        })
        .filter(|(_, def)| def.kind() == kinds::FUNCTION_DEFINITION)
}

/// Words (lowercase) of a cache kept in the test's own memory: Django's `LocMemCache`,
/// aiocache's `Cache(Cache.MEMORY)` and `SimpleMemoryCache`, an `InMemory...` store.
pub(super) const IN_MEMORY_CACHES: &[&str] = &[
    "locmem",
    "inmemory",
    "in_memory",
    "cache.memory",
    "simplememorycache",
];

/// Whether a fixture's text (lowercase) connects to a Redis server and replaces nothing:
/// `redis.Redis(host="localhost")`, `redis.from_url(...)`, with no fake, mock or patch.
fn live_cache(fixture: &str) -> bool {
    // What the code says, not its comments: `# the real SET NX semantics instead of a fake`.
    let code: String = fixture
        .lines()
        .map(|l| l.split('#').next().unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let fixture = code.as_str();
    let connects = [
        "redis.redis(",
        "strictredis(",
        "redis.from_url(",
        "redis.asyncio.from_url(",
        "redis(host",
        "redis(port",
        "redis(url",
        "redis()",
    ]
    .iter()
    .any(|w| {
        // `InMemoryRedis()` is a fake by another name; `aioredis.from_url(...)` is the client.
        fixture.match_indices(w).any(|(at, _)| {
            let head = &fixture[..at];
            let word = head.len()
                - head
                    .trim_end_matches(|c: char| c.is_ascii_alphanumeric() || c == '_')
                    .len();
            matches!(&head[at - word..], "" | "aio")
        })
    });
    connects
        && !["fake", "mock", "patch", "setattr"]
            .iter()
            .any(|w| fixture.contains(w))
}

/// What the fixtures a test is handed mock, through the fixtures they are built from: `service`
/// from `idempotency` from `redis`, which makes a `FakeRedis` (fixtures of the change's test
/// files, a `conftest.py` or the test's own; a few levels).
fn fixture_mocks(cx: &Ctx<'_>, params: &[String]) -> Vec<String> {
    let fixtures = change_fixtures(cx, params, 4);
    // With the functions a fixture defines and hands out (`make_wise_client` yielding `_make`,
    // which builds the client on `httpx.MockTransport`).
    let own = fixtures.iter().flat_map(|(file, fixture)| {
        let inner = format!("{}.", fixture.qualname);
        file.functions
            .iter()
            .filter(move |f| f.qualname == fixture.qualname || f.qualname.starts_with(&inner))
            .filter_map(|f| f.mocks.as_deref().map(str::to_string))
    });
    // What the fixtures build through helpers of the tests (`client = paystack.client()`, a
    // method of the stub that builds the client on `httpx.MockTransport`).
    let helpers = fixtures
        .iter()
        .flat_map(|(_, fixture)| fixture.callees.iter())
        .flat_map(|name| cx.change.functions_named(cx.side, name))
        .filter(|(file, f)| file.is_test && !f.decorators.iter().any(|d| d.contains("fixture")))
        .filter_map(|(_, f)| f.mocks.as_deref().map(str::to_string));
    own.chain(helpers).collect()
}

/// Whether the test makes an instance of a class its file writes (`FakeModernTreasury(lookups=
/// [...])`, handed to a `configure` fixture) that answers a call on the way to the service: it
/// defines a function of the walk (`list_payment_orders_by_metadata`). Tests write doubles of
/// the clients they mean not to reach, and hand them over in many ways. The walk ends where the
/// code calls its client (`deps.client.list_payment_orders_by_metadata(...)`): what it calls
/// there is a step too.
pub(super) fn a_double_of_the_file_answers_a_step(
    cx: &Ctx<'_>,
    test: &TestFn<'_>,
    r: &Reach<'_>,
) -> bool {
    a_double_of_the_file_defines(cx, test, |method| {
        r.path.iter().any(|step| step == method)
            || r.function.name == method
            || r.function
                .callees
                .iter()
                .any(|c| crate::rules::facts::last_name(c) == method)
    })
}

/// `a_double_of_the_file_answers_a_step` above the function the walk ends in (the one that
/// sleeps): the double answers before the waiting starts (`list_payment_orders_by_metadata`
/// on the way to `_request`), not under it, where the attempts still wait between them.
pub(super) fn a_double_of_the_file_answers_above(
    cx: &Ctx<'_>,
    test: &TestFn<'_>,
    r: &Reach<'_>,
) -> bool {
    a_double_of_the_file_defines(cx, test, |method| {
        r.path
            .iter()
            .any(|step| step == method && *step != r.function.name)
    })
}

/// Whether the test makes an instance of a class its file writes that defines a method
/// `answers` accepts.
fn a_double_of_the_file_defines(
    cx: &Ctx<'_>,
    test: &TestFn<'_>,
    answers: impl Fn(&str) -> bool,
) -> bool {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return false;
    };
    idx.within(test.node, kinds::CALL).iter().any(|&call| {
        let made = syntax::callee_name(call, src);
        idx.all(kinds::CLASS_DEFINITION)
            .iter()
            .filter(|c| {
                c.field("name")
                    .is_some_and(|n| syntax::text(n, src) == made)
            })
            .any(|&class| {
                idx.within(class, kinds::FUNCTION_DEFINITION)
                    .iter()
                    .any(|&m| {
                        let method = syntax::function_name(m, src);
                        !method.starts_with("__") && answers(method)
                    })
            })
    })
}

/// Whether a fixture the test is handed, or one it is built from, makes a fake of the tests' own
/// (`return FakeSquare()`) that defines a function on `path` (`refund_payment` of `refund →
/// submit → refund_payment → _call`): the code the fixtures build calls the fake there, not the
/// client under it (`service(db, square, clock)` handing `square` on by position).
pub fn fixture_fake_on(cx: &Ctx<'_>, test: &TestFn<'_>, path: &[String]) -> bool {
    let params = parameters(test.node, cx.src());
    let fakes: Vec<&str> = change_fixtures(cx, &params, 4)
        .into_iter()
        .filter_map(|(_, fixture)| fixture.mocks.as_deref())
        .flat_map(|m| m.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .filter(|w| {
            ["fake", "stub", "dummy"].iter().any(|p| w.starts_with(p)) || named_foreign_double(w)
        })
        .collect();
    !fakes.is_empty()
        && path.iter().any(|name| {
            let last = name.rsplit('.').next().unwrap_or(name);
            cx.change.functions_named(cx.side, last).any(|(file, f)| {
                file.is_test
                    && f.qualname
                        .rsplit_once('.')
                        .map(|(class, _)| class.rsplit('.').next().unwrap_or(class))
                        .is_some_and(|class| fakes.iter().any(|w| class.eq_ignore_ascii_case(w)))
            })
        })
}

/// The fixtures of the change's test files (a `conftest.py`, the test's own) named by
/// `params`, and those they are built from, `levels` deep, nearest first, with their files.
pub(super) fn change_fixtures<'c>(
    cx: &Ctx<'c>,
    params: &[String],
    levels: usize,
) -> Vec<(&'c FileFacts, &'c FunctionFacts)> {
    let mut out = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let mut frontier: Vec<&str> = params.iter().map(String::as_str).collect();
    for _ in 0..levels {
        let mut next = Vec::new();
        for name in frontier.drain(..) {
            if seen.contains(&name) {
                continue;
            }
            seen.push(name);
            let fixtures: Vec<_> = cx
                .change
                .functions_named(cx.side, name)
                .filter(|(file, f)| {
                    file.is_test
                        && f.decorators.iter().any(|d| d.contains("fixture"))
                        && sees_fixtures_of(cx.path, &file.path)
                })
                .collect();
            // The test's own module first: pytest takes its fixture over a conftest's.
            let own = fixtures.iter().any(|(file, _)| file.path == cx.path);
            for (file, fixture) in fixtures {
                if own && file.path != cx.path {
                    continue;
                }
                next.extend(fixture.fixture_params.iter().map(String::as_str));
                out.push((file, fixture));
            }
        }
        frontier = next;
    }
    out
}

/// Whether a test module at `test` can use the fixtures of the module at `file`: its own, or
/// a `conftest.py` of its folder or one above. Another test module's fixtures are not its.
fn sees_fixtures_of(test: &str, file: &str) -> bool {
    if test == file {
        return true;
    }
    let Some(dir) = file.strip_suffix("conftest.py") else {
        return false;
    };
    dir.is_empty() || dir.ends_with('/') && test.starts_with(dir)
}

/// Autouse fixtures of a `conftest.py` in the change, as their name and what they call.
fn conftest_fixtures(cx: &Ctx<'_>) -> Vec<String> {
    cx.change
        .side(cx.side)
        .filter(|f| f.path.ends_with("conftest.py"))
        .flat_map(|f| f.functions.iter())
        .filter(|f| f.decorators.iter().any(|d| d.contains("autouse")))
        .map(|f| format!("{} {}", f.name, f.callees.join(" ")).to_ascii_lowercase())
        .collect()
}

/// A function a test calls, as far as the test shows which one it is.
pub struct Callee {
    pub name: String,
    /// The qualified names of the methods the test calls by `name`, where it calls it only on
    /// objects whose class it shows (`methods_called`; empty: only a library's); `None`: any
    /// function of that name.
    pub methods: Option<Vec<String>>,
}

impl Callee {
    /// How calling it surely reaches a function with `t`, a few calls deep, through code
    /// outside tests (`ChangeSet::reach_surely`).
    pub fn reach<'c>(&self, cx: &Ctx<'c>, depth: usize, t: &Trait) -> Option<Reach<'c>> {
        cx.change
            .reach_surely(cx.side, &self.name, self.methods.as_deref(), depth, t)
    }
}

/// What the test surely calls (not `event.get(...)`: `FunctionFacts::loose`) that the change
/// defines outside tests; when the diff hides the test's body, the function it is named after
/// (`test_create_charge_success` → `create_charge`).
/// The tasks a test runs in its own process (`tasks.refund_leg.call_local(refund_id)`,
/// `charge_invoice.apply(args=...)`): functions of the change under test that
/// `callees_under_test` does not see, the call being the runner's method.
pub fn tasks_run(cx: &Ctx<'_>, test: &TestFn<'_>) -> Vec<Callee> {
    let mut out: Vec<Callee> = Vec::new();
    let Some(file) = cx.facts else {
        return out;
    };
    for site in file.calls.iter() {
        if *site.function != *test.facts.qualname || !RUNS_A_TASK.contains(&site.name()) {
            continue;
        }
        let Some(task) = site.receiver().map(crate::rules::facts::last_name) else {
            continue;
        };
        let defined = cx
            .change
            .functions_named(cx.side, task)
            .any(|(file, _)| !file.is_test);
        if defined && !out.iter().any(|c| c.name == task) {
            out.push(Callee {
                methods: None,
                name: task.to_string(),
            });
        }
    }
    out
}

/// How a test runs a task's function in its own process: Huey's `call_local`, Celery's `apply`
/// (and `delay` under eager mode), RQ's and dramatiq's `fn`, `run`.
const RUNS_A_TASK: &[&str] = &["call_local", "apply", "delay", "apply_async", "run", "fn"];

pub fn callees_under_test(cx: &Ctx<'_>, test: &TestFn<'_>) -> Vec<Callee> {
    let defined = |name: &str| {
        cx.change
            .functions_named(cx.side, name)
            .any(|(file, _)| !file.is_test)
    };
    // `self.start()` where the test's class defines `start`: its own helper, whatever else
    // of the change shares the name (`through_helpers` reads what it calls).
    let own_helper = |name: &str| {
        let (Some(file), Some((class, _))) = (cx.facts, test.facts.qualname.rsplit_once('.'))
        else {
            return false;
        };
        file.function(&format!("{class}.{name}")).is_some()
            && file
                .calls
                .iter()
                .filter(|c| *c.function == *test.facts.qualname && c.name() == name)
                .all(|c| c.receiver() == Some("self"))
    };
    let mut out: Vec<Callee> = test
        .facts
        .callees
        .iter()
        .filter(|c| test.facts.loose.binary_search(c).is_err())
        .filter(|c| !MOCKERS.contains(&c.as_str()) && defined(c) && !own_helper(c))
        .map(|name| Callee {
            methods: methods_called(cx, test, name),
            name: name.clone(),
        })
        .collect();
    if test.partial {
        let rest = test.facts.name.trim_start_matches("test_");
        let named_after = cx
            .change
            .side(cx.side)
            .filter(|f| !f.is_test)
            .flat_map(|f| f.functions.iter())
            .map(|f| f.name.as_str())
            .filter(|n| n.len() >= 4 && (rest == *n || rest.starts_with(&format!("{n}_"))))
            .max_by_key(|n| n.len());
        if let Some(name) = named_after
            && !out.iter().any(|c| c.name == name)
        {
            out.push(Callee {
                name: name.to_string(),
                methods: None,
            });
        }
    }
    out
}

/// What the test's own helpers in its file call (`_collect(...)` → `collect_invoice`), one
/// level down, for the callees `callees_under_test` leaves out: a helper of a test file is
/// no code under test, but what it runs is the test's.
pub fn through_helpers(cx: &Ctx<'_>, test: &TestFn<'_>, out: &mut Vec<Callee>) {
    let Some(file) = cx.facts else {
        return;
    };
    let defined = |name: &str| {
        cx.change
            .functions_named(cx.side, name)
            .any(|(file, _)| !file.is_test)
    };
    let helpers = file.functions.iter().filter(|h| {
        !h.is_test
            && !h.name.starts_with("test")
            && test.facts.callees.binary_search(&h.name).is_ok()
    });
    for helper in helpers {
        for name in helper.callees.iter() {
            if helper.loose.binary_search(name).is_err()
                && !MOCKERS.contains(&name.as_str())
                && !out.iter().any(|c| &c.name == name)
                && defined(name)
            {
                out.push(Callee {
                    name: name.clone(),
                    methods: None,
                });
            }
        }
    }
}

/// The methods a test calls by `name`, where every call of it in the test is on an object
/// whose class the test shows: `provider = StripeProvider(...)` then `provider.get_form(...)`
/// calls `StripeProvider.get_form`, not every `get_form` of the change (a payment library has
/// one per provider), and `rf.post(...)` on a `RequestFactory` calls none of them, nor does
/// `load(f)` after `from json import load`. The object may be made in the test or right where
/// it is called, at module level, in the class's `setUp` (`self.provider = ...`), by a fixture
/// of the file that returns it, or named by the parameter's annotation. `None` where one call is on anything else: a plain function, an
/// object the test does not show the class of, a class of the project the change does not
/// show with that method (it may inherit it).
fn methods_called(cx: &Ctx<'_>, test: &TestFn<'_>, name: &str) -> Option<Vec<String>> {
    let idx = cx.index()?;
    let src = cx.src();
    let mut methods: Vec<String> = Vec::new();
    let mut calls = 0;
    for &call in idx.within(test.node, kinds::CALL) {
        if idx.callee_name(call, src) != name {
            continue;
        }
        calls += 1;
        let Some(receiver) = syntax::receiver(call) else {
            // `load(f)` after `from json import load`: the library's, not the change's `load`.
            if imported_from_a_library(cx, name) {
                continue;
            }
            return None;
        };
        let library_module = receiver.kind() == kinds::IDENTIFIER
            && imported_from_a_library(cx, syntax::text(receiver, src));
        if library_module
            || framework_test_client(idx, test, receiver, src)
            || inherited_stand_in(cx, idx, test, receiver, src)
            || receiver.kind() == kinds::IDENTIFIER
                && is_parameter(test.node, syntax::text(receiver, src), src)
                && fixture_of_the_change_stands_in(cx, syntax::text(receiver, src))
        {
            continue;
        }
        for class in receiver_classes(idx, test, receiver, src)? {
            let method = format!("{class}.{name}");
            let defined = cx
                .change
                .functions_named(cx.side, name)
                .any(|(file, f)| !file.is_test && f.qualname == method);
            // A fake of the tests' own that defines the method (`FakeGateway.get_payment`)
            // answers it itself; one that only inherits it may run the real one.
            let faked = || {
                cx.change
                    .functions_named(cx.side, name)
                    .any(|(file, f)| file.is_test && f.qualname == method)
            };
            if defined {
                methods.push(method);
            } else if !imported_from_a_library(cx, class) && !faked() {
                return None;
            }
        }
    }
    methods.sort();
    methods.dedup();
    (calls > 0).then_some(methods)
}

/// `self.mp`, where the `setUp` of a base class of another module makes it a stand-in
/// (`self.mp = FakeMercadoPago()` in `tests/fakes.py`'s `AppTestCase`).
fn inherited_stand_in(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    test: &TestFn<'_>,
    receiver: Node<'_>,
    src: &str,
) -> bool {
    let Some(attribute) = receiver
        .field("object")
        .filter(|o| receiver.kind() == kinds::ATTRIBUTE && syntax::text(*o, src) == "self")
        .and_then(|_| receiver.field("attribute"))
    else {
        return false;
    };
    let Some(class) = idx.enclosing(test.node, kinds::CLASS_DEFINITION) else {
        return false;
    };
    let assigned = format!(
        "self.{} = ",
        syntax::text(attribute, src).to_ascii_lowercase()
    );
    lineage(class, idx, src)
        .into_iter()
        .flat_map(|c| imported_bases(c, idx, src))
        .flat_map(|base| inherited_setup(cx, base))
        .any(|mocks| mocks.lines().any(|l| l.starts_with(&assigned)))
}

/// Whether a fixture named `name` in a test file of the change (a `conftest.py`) makes a
/// stand-in (`return FakeMarketplace()`) or hands one to what it builds (`session=fake_api`).
pub(crate) fn fixture_of_the_change_stands_in(cx: &Ctx<'_>, name: &str) -> bool {
    cx.change.functions_named(cx.side, name).any(|(file, f)| {
        file.is_test
            && f.mocks.as_deref().is_some_and(|m| {
                // A sleep of its own (`sleep=fake_sleep`) stands in for no service.
                m.lines().any(|l| {
                    !l.split_once('=')
                        .is_some_and(|(k, _)| syntax::names_sleep(k))
                })
            })
            && f.decorators.iter().any(|d| d.contains("fixture"))
    })
}

/// The names test frameworks give their clients: pytest-django's fixtures, Django's
/// `TestCase.client`. What they `post` goes through the application's routes, not to a
/// function of the change named `post`.
const TEST_CLIENTS: &[&str] = &["client", "async_client", "admin_client", "rf", "async_rf"];

/// Whether `receiver` is a test framework's client: one of `TEST_CLIENTS` that the test takes as
/// an unannotated parameter its file has no fixture for, or that its class uses as
/// `self.client` without setting it (Django's `TestCase` does).
fn framework_test_client(
    idx: &NodeIndex<'_>,
    test: &TestFn<'_>,
    receiver: Node<'_>,
    src: &str,
) -> bool {
    match receiver.kind() {
        kinds::IDENTIFIER => {
            let name = syntax::text(receiver, src);
            let annotated = test.node.field("parameters").is_some_and(|p| {
                syntax::annotated_parameters(p, src)
                    .iter()
                    .any(|(n, _)| *n == name)
            });
            TEST_CLIENTS.contains(&name)
                && is_parameter(test.node, name, src)
                && !annotated
                && fixture_named(idx, src, name).is_none()
        }
        kinds::ATTRIBUTE => {
            let (Some(object), Some(attribute)) =
                (receiver.field("object"), receiver.field("attribute"))
            else {
                return false;
            };
            let attribute = syntax::text(attribute, src);
            syntax::text(object, src) == "self"
                && TEST_CLIENTS.contains(&attribute)
                && idx
                    .enclosing(test.node, kinds::CLASS_DEFINITION)
                    .is_some_and(|class| {
                        !idx.within(class, kinds::ASSIGNMENT).iter().any(|a| {
                            a.field("left").is_some_and(|l| {
                                syntax::text(l, src) == format!("self.{attribute}")
                            })
                        })
                    })
        }
        _ => false,
    }
}

/// Whether the file imports `local` from a package none of the change's files is in
/// (`from django.test import RequestFactory`, `import requests`): what it calls there is not
/// the change's.
fn imported_from_a_library(cx: &Ctx<'_>, local: &str) -> bool {
    let Some(import) = cx
        .facts
        .and_then(|f| f.imports.iter().find(|i| i.local == local))
    else {
        return false;
    };
    // Any part of a module's path, not only its first: a service of a monorepo
    // (`services/billing/app/client.py`) imports itself as `app`.
    let root = import.target.split('.').next().unwrap_or_default();
    !root.is_empty()
        && !cx
            .change
            .side(cx.side)
            .any(|f| f.module.split('.').any(|part| part == root))
}

/// The classes `receiver` (`provider`, `self.provider`) is made of, as the test's file shows
/// them; `None` where it shows none, or something other than a class's constructor.
fn receiver_classes<'s>(
    idx: &NodeIndex<'_>,
    test: &TestFn<'_>,
    receiver: Node<'_>,
    src: &'s str,
) -> Option<Vec<&'s str>> {
    let mut classes = Vec::new();
    match receiver.kind() {
        kinds::IDENTIFIER => {
            let name = syntax::text(receiver, src);
            let params = test.node.field("parameters");
            let annotated = params
                .map(|p| syntax::annotated_parameters(p, src))
                .unwrap_or_default();
            if let Some((_, annotation)) = annotated.iter().find(|(p, _)| *p == name) {
                classes.push(class_named(syntax::text(*annotation, src))?);
            }
            let mut made = made_in(idx, test.node, src, |left| {
                left.kind() == kinds::IDENTIFIER && syntax::text(left, src) == name
            })?;
            if made.is_empty() && classes.is_empty() {
                made = made_at_module_level(idx, src, name)?;
            }
            if made.is_empty() && classes.is_empty() && is_parameter(test.node, name, src) {
                made = made_by_fixture(idx, src, name)?;
            }
            classes.extend(made);
        }
        // `DummyProvider().get_form(...)`
        kinds::CALL => classes.push(constructed(receiver, src)?),
        kinds::ATTRIBUTE => {
            let object = receiver.field("object")?;
            let attribute = syntax::text(receiver.field("attribute")?, src);
            if !matches!(syntax::text(object, src), "self" | "cls") {
                return None;
            }
            let class = idx.enclosing(test.node, kinds::CLASS_DEFINITION)?;
            // The class and the base classes the file defines: a `setUp` is most often
            // inherited from the suite's own base class.
            for class in lineage(class, idx, src) {
                classes.extend(made_in(idx, class, src, |left| {
                    left.kind() == kinds::ATTRIBUTE
                        && left.field("attribute").map(|a| syntax::text(a, src)) == Some(attribute)
                        && left
                            .field("object")
                            .is_some_and(|o| matches!(syntax::text(o, src), "self" | "cls"))
                })?);
            }
        }
        _ => return None,
    }
    (!classes.is_empty()).then_some(classes)
}

/// The classes assigned, inside `scope`, to a target `is_target` accepts: `Some(empty)` where
/// none is, `None` where one is assigned something other than a constructor call.
fn made_in<'s>(
    idx: &NodeIndex<'_>,
    scope: Node<'_>,
    src: &'s str,
    is_target: impl Fn(Node<'_>) -> bool,
) -> Option<Vec<&'s str>> {
    let mut out = Vec::new();
    for a in idx.within(scope, kinds::ASSIGNMENT) {
        let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
            continue;
        };
        if is_target(left) {
            out.push(constructed(right, src)?);
            continue;
        }
        // `session, sleeps = Mock(), []`: each name bound to its own value.
        if matches!(left.kind(), kinds::PATTERN_LIST | kinds::TUPLE_PATTERN)
            && matches!(right.kind(), kinds::EXPRESSION_LIST | kinds::TUPLE)
        {
            let (names, values) = (
                crate::python::named_children(left),
                crate::python::named_children(right),
            );
            if names.len() == values.len() {
                for (name, value) in names.into_iter().zip(values) {
                    if is_target(name) {
                        out.push(constructed(value, src)?);
                    }
                }
            }
        }
    }
    Some(out)
}

/// Module-level `name = Class(...)`.
fn made_at_module_level<'s>(idx: &NodeIndex<'_>, src: &'s str, name: &str) -> Option<Vec<&'s str>> {
    idx.all(kinds::ASSIGNMENT)
        .iter()
        .filter(|a| {
            a.field("left")
                .is_some_and(|l| l.kind() == kinds::IDENTIFIER && syntax::text(l, src) == name)
                && idx.enclosing(**a, kinds::FUNCTION_DEFINITION).is_none()
                && idx.enclosing(**a, kinds::CLASS_DEFINITION).is_none()
        })
        .map(|a| constructed(a.field("right")?, src))
        .collect()
}

/// What a fixture of the file named `name` returns, where every `return` of it is a
/// constructor call.
fn made_by_fixture<'s>(idx: &NodeIndex<'_>, src: &'s str, name: &str) -> Option<Vec<&'s str>> {
    let fixture = fixture_named(idx, src, name)?;
    idx.within(fixture, kinds::RETURN_STATEMENT)
        .iter()
        .map(|r| constructed(syntax::return_value(*r)?, src))
        .collect()
}

/// The `dict(...)` call a `**name` argument of `call` spreads, where `scope` binds `name` to
/// one before the call (`kwargs = dict(base_url=..., http_client=http)`, then
/// `Client(**kwargs)`); `None` for any other spread.
fn spread_dict<'t>(
    idx: &NodeIndex<'t>,
    scope: Node<'_>,
    call: Node<'_>,
    src: &str,
) -> Option<Node<'t>> {
    let args = call.field("arguments")?;
    let splat = crate::python::named_children(args)
        .into_iter()
        .find(|a| a.kind() == kinds::DICTIONARY_SPLAT)?;
    let name = crate::python::named_children(splat)
        .into_iter()
        .next()
        .filter(|n| n.kind() == kinds::IDENTIFIER)?;
    let made = idx.assigned_before(Some(scope), syntax::text(name, src), call.start_byte(), src)?;
    (made.kind() == kinds::CALL && syntax::callee(made, src) == "dict").then_some(made)
}

/// The fixture of the file named `name`.
/// The names of the file's fixtures.
fn fixture_names(idx: &NodeIndex<'_>, src: &str) -> Vec<String> {
    fixtures(idx, src)
        .map(|(_, def)| syntax::function_name(def, src).to_string())
        .collect()
}

fn fixture_named<'t>(idx: &NodeIndex<'t>, src: &str, name: &str) -> Option<Node<'t>> {
    fixtures(idx, src)
        .map(|(_, def)| def)
        .find(|def| syntax::function_name(*def, src) == name)
}

/// The function of the file named `name` outside any class (a test file's helper).
fn function_of_file<'t>(idx: &NodeIndex<'t>, src: &str, name: &str) -> Option<Node<'t>> {
    idx.all(kinds::FUNCTION_DEFINITION)
        .iter()
        .copied()
        .find(|f| {
            syntax::function_name(*f, src) == name
                && idx.enclosing(*f, kinds::CLASS_DEFINITION).is_none()
        })
}

fn is_parameter(func: Node<'_>, name: &str, src: &str) -> bool {
    parameters(func, src)
        .iter()
        .any(|p| p == &name.to_ascii_lowercase())
}

/// `Class` in `Class(...)` or `module.Class(...)`.
fn constructed<'s>(value: Node<'_>, src: &'s str) -> Option<&'s str> {
    let value = if value.kind() == "parenthesized_expression" {
        crate::python::named_children(value).into_iter().next()?
    } else {
        value
    };
    if value.kind() != kinds::CALL {
        return None;
    }
    let function = value.field("function")?;
    // A builder's chain (`FakeHTTPClient().timeout().respond(201, {...})`): what its first
    // call makes.
    if let Some(object) = function
        .field("object")
        .filter(|o| function.kind() == kinds::ATTRIBUTE && o.kind() == kinds::CALL)
    {
        return constructed(object, src);
    }
    if !matches!(function.kind(), kinds::IDENTIFIER | kinds::ATTRIBUTE) {
        return None;
    }
    class_named(syntax::text(function, src))
}

/// The class an annotation or constructor names (`StripeProvider`, `providers.StripeProvider`);
/// `None` for anything more (`Optional[...]`, a string).
fn class_named(text: &str) -> Option<&str> {
    let last = text.rsplit('.').next()?;
    (!last.is_empty() && last.chars().all(|c| c.is_alphanumeric() || c == '_')).then_some(last)
}

/// The first answer a test registers with `responses` (`responses.add(responses.POST, url,
/// ...)`) when nothing activates it: the file activates it test by test (another test has
/// `@responses.activate`), this one has no such decorator, and neither it nor the file starts
/// a mock of its own (`responses.start()`, `RequestsMock()`).
fn unactivated_responses(idx: &NodeIndex<'_>, test: &TestFn<'_>, src: &str) -> Option<String> {
    if !src.contains("@responses.activate")
        || src.contains("responses.start(")
        || src.contains("RequestsMock(")
        || src.contains("responses.mock")
    {
        return None;
    }
    if syntax::decorators(test.outer)
        .iter()
        .any(|d| syntax::text(*d, src).contains("responses"))
    {
        return None;
    }
    idx.within(test.node, kinds::CALL).iter().find_map(|&c| {
        let callee = syntax::callee(c, src);
        let registers = callee.strip_prefix("responses.").is_some_and(|verb| {
            matches!(
                verb,
                "add"
                    | "get"
                    | "post"
                    | "put"
                    | "patch"
                    | "delete"
                    | "head"
                    | "upsert"
                    | "replace"
                    | "add_callback"
            )
        });
        registers.then(|| crate::rules::pay::first_line(c, src))
    })
}

pub(crate) use crate::python::syntax::has_word;

/// Whether a fixture of the repository's conftest that the test takes stands a spec'd mock in
/// for the class whose method sleeps (`gw = mock.create_autospec(WorldpayClient,
/// instance=True)` for `WorldpayClient._get_with_retries`): the test never runs that method.
pub(crate) fn a_fixture_specs_its_class(
    cx: &Ctx<'_>,
    test: &TestFn<'_>,
    r: &crate::rules::reach::Reach<'_>,
) -> bool {
    let Some((class, _)) = r.function.qualname.rsplit_once('.') else {
        return false;
    };
    let class = class
        .rsplit('.')
        .next()
        .unwrap_or(class)
        .to_ascii_lowercase();
    let specs = [
        format!("autospec({class}"),
        format!("spec={class}"),
        format!("spec_set={class}"),
    ];
    let conftests = repository_conftests(cx);
    parameters(test.node, cx.src()).iter().any(|p| {
        let name = p.to_ascii_lowercase();
        conftests
            .iter()
            .filter_map(|c| fixture_code(c, &name))
            .any(|code| specs.iter().any(|s| code.contains(s.as_str())))
    })
}

/// The fixtures' code of each `conftest.py` of the repository above the file that the change
/// does not show (repository mode; `ModuleFacts::fixtures`).
pub(crate) fn repository_conftests<'c>(cx: &Ctx<'c>) -> Vec<&'c str> {
    repository_conftest_modules(cx)
        .into_iter()
        .map(|m| m.fixtures.as_str())
        .collect()
}

/// The repository's `conftest.py` modules above the file, outside the change.
pub(crate) fn repository_conftest_modules<'c>(cx: &Ctx<'c>) -> Vec<&'c crate::index::ModuleFacts> {
    let Some(project) = cx.project() else {
        return Vec::new();
    };
    project
        .modules()
        .iter()
        .filter(|m| {
            m.path != cx.path
                && sees_fixtures_of(cx.path, &m.path)
                && !cx.change.files.iter().any(|f| f.path == m.path)
        })
        .collect()
}

/// The parameters of fixture `name` in its code (`def rzp(app):` gives `app`).
pub(crate) fn fixture_parameters(code: &str, name: &str) -> Vec<String> {
    let Some(at) = code.find(&format!("def {name}(")) else {
        return Vec::new();
    };
    let rest = &code[at + name.len() + 5..];
    let list = rest.split(')').next().unwrap_or("");
    list.split(',')
        .map(|p| p.split([':', '=']).next().unwrap_or("").trim().to_string())
        .filter(|p| !p.is_empty() && !p.starts_with('*') && p != "self" && p != "request")
        .collect()
}

/// The code of fixture `name` in a module's fixtures (`ModuleFacts::fixtures`: each decorated
/// definition, lowercased, one after another).
pub(crate) fn fixture_code<'f>(fixtures: &'f str, name: &str) -> Option<&'f str> {
    let at = [format!("def {name}("), format!("def {name} (")]
        .iter()
        .find_map(|d| fixtures.find(d.as_str()))?;
    let start = fixtures[..at].rfind("\n@").map_or(0, |s| s + 1);
    let end = fixtures[at..]
        .find("\n@")
        .map_or(fixtures.len(), |e| at + e);
    fixtures.get(start..end)
}

/// Words a test double is named by in the languages tests are written in, where the word for
/// "fake" often follows the noun: `GatewayFalso`, `ClienteFinto`, `PasserelleFausse`,
/// `AtrapaHttp`, `ZahlungAttrappe`.
pub(crate) const FOREIGN_DOUBLES: &[&str] = &[
    "falso", "falsa", "falsos", "falsas", "finto", "finta", "faux", "fausse", "atrapa", "attrappe",
    "simulado", "simulada", "falsk", "fejk", "nep",
];

/// Whether a name (a class, a fixture, a helper), as written or lowercased in a fixture's code
/// (`gatewayfalso`), names a test double by one of `FOREIGN_DOUBLES` at its start or end.
pub(crate) fn named_foreign_double(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    FOREIGN_DOUBLES
        .iter()
        .any(|w| lower.starts_with(w) || lower.ends_with(w))
}

#[cfg(test)]
mod tests {
    use super::{Runs, configured_mocks, runs_by};

    #[test]
    fn configured_mocks_reads_names_after_characters_of_several_bytes() {
        assert_eq!(
            configured_mocks("mock_é.return_value = 1"),
            Vec::<String>::new()
        );
        assert_eq!(
            configured_mocks("clientÿ.charge.return_value = {}"),
            vec!["charge".to_string()]
        );
    }

    #[test]
    fn skips_and_live_markers_say_how_a_test_runs() {
        let cases = [
            ("@pytest.mark.skip", Runs::Never),
            (
                "@pytest.mark.skip(reason=\"needs a sandbox order\")",
                Runs::Never,
            ),
            ("@unittest.skip(\"flaky\")", Runs::Never),
            ("@skip(\"later\")", Runs::Never),
            ("@pytest.mark.integration", Runs::OnRequest),
            ("pytest.mark.live", Runs::OnRequest),
            (
                "@pytest.mark.skipif(not os.environ.get(\"STRIPE_KEY\"), reason=\"no key\")",
                Runs::OnRequest,
            ),
            (
                "@unittest.skipUnless(os.getenv(\"RUN_LIVE\"), \"live only\")",
                Runs::OnRequest,
            ),
            (
                "@unittest.skipIf(settings.PAYPAL_SECRET is None, \"no secret\")",
                Runs::OnRequest,
            ),
            (
                "@pytest.mark.skipif(sys.platform == \"win32\", reason=\"no fork\")",
                Runs::Always,
            ),
            ("@pytest.mark.asyncio", Runs::Always),
            ("@pytest.mark.django_db", Runs::Always),
            ("@patch(\"shop.gateway.requests.post\")", Runs::Always),
            ("@integration_helper", Runs::Always),
            (
                "@pytest.mark.parametrize(\"live\", [True, False])",
                Runs::Always,
            ),
        ];
        for (decorator, runs) in cases {
            assert_eq!(runs_by(decorator), runs, "{decorator}");
        }
    }
}
