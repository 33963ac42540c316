//! The `test` family: tests that this change leaves reaching live services, and retry tests that
//! wait for real or do not check what the retry is for. Shared here: which test functions a file
//! has, what they mock, and what the code they call reaches.

pub mod retry_test_sleeps_or_misses_key;
pub mod test_reaches_live_service;

use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::Ctx;
use crate::rules::facts::FunctionFacts;
use crate::source::Side;

/// Calls that mock something when given its path or object.
const MOCKERS: &[&str] = &["patch", "object", "setattr", "setitem", "dict", "multiple"];

/// A test function of the file being reviewed.
pub struct TestFn<'t> {
    pub node: Node<'t>,
    /// The function with its decorators: what is reported.
    pub outer: Node<'t>,
    pub facts: FunctionFacts,
    /// The diff does not show the `def` line (it was re-created from a hunk header), so the
    /// decorators and the start of the body are unknown.
    pub partial: bool,
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
    idx.all(kinds::FUNCTION_DEFINITION)
        .iter()
        .filter_map(|&node| {
            let qualname = crate::rules::facts::qualname(node, idx, src);
            let f = by_qualname
                .get(qualname.as_str())
                .copied()
                .filter(|f| f.is_test)?;
            let outer = idx.decorated(node).unwrap_or(node);
            Some(TestFn {
                node,
                outer,
                partial: synthetic.contains(&f.lines.0),
                facts: f.clone(),
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
        FileMocks {
            shared,
            classes: Default::default(),
        }
    }

    /// The decorators of `class` and its `setUp` methods, lowercased.
    fn class(&self, class: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> std::rc::Rc<[String]> {
        let lower = |n: Node<'_>| syntax::text(n, src).to_ascii_lowercase();
        self.classes
            .borrow_mut()
            .entry(class.start_byte())
            .or_insert_with(|| {
                let mut texts: Vec<String> = idx
                    .decorated(class)
                    .map(|parent| syntax::decorators(parent).into_iter().map(lower).collect())
                    .unwrap_or_default();
                texts.extend(
                    idx.within(class, kinds::FUNCTION_DEFINITION)
                        .iter()
                        .filter(|f| {
                            let name = syntax::function_name(**f, src).to_ascii_lowercase();
                            name.starts_with("setup") || name.starts_with("asyncsetup")
                        })
                        .map(|f| lower(*f)),
                );
                texts.into()
            })
            .clone()
    }
}

impl<'m> Mocks<'m> {
    pub fn of(cx: &Ctx<'_>, test: &TestFn<'_>, file: &'m FileMocks) -> Mocks<'m> {
        let (Some(idx), src) = (cx.index(), cx.src()) else {
            return Mocks {
                texts: Vec::new(),
                shared: &[],
                class: None,
                params: Vec::new(),
            };
        };
        let lower = |n: Node<'_>| syntax::text(n, src).to_ascii_lowercase();
        let mut texts: Vec<String> = syntax::decorators(test.outer)
            .into_iter()
            .map(lower)
            .collect();
        let class = idx
            .enclosing(test.node, kinds::CLASS_DEFINITION)
            .map(|class| file.class(class, idx, src));
        texts.extend(
            idx.within(test.node, kinds::CALL)
                .iter()
                .filter(|c| MOCKERS.contains(&syntax::callee_name(**c, src)))
                .map(|c| lower(*c)),
        );
        let mut params = parameters(test.node, src);
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
        Mocks {
            texts,
            shared: &file.shared,
            class,
            params,
        }
    }

    fn texts(&self) -> impl Iterator<Item = &String> {
        let class = self.class.as_deref().unwrap_or_default();
        self.texts.iter().chain(class).chain(self.shared)
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

impl Mocks<'_> {
    /// Whether a patch target ends with `name` (`"app.payments.service.create_charge"`,
    /// `patch.object(client, "create_charge")`): the function itself is replaced.
    pub fn replace_function(&self, name: &str) -> bool {
        self.texts().any(|t| replaces(t, name))
    }
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

/// The fixtures of this file that the test asks for by parameter (`flaky_post` patching
/// `requests.post`): what they patch, the test gets.
fn fixtures_named(idx: &NodeIndex<'_>, src: &str, params: &[String]) -> Vec<(String, String)> {
    idx.all(kinds::DECORATOR)
        .iter()
        .filter(|d| syntax::text(**d, src).contains("fixture"))
        .filter_map(|d| d.parent())
        .filter_map(|def| {
            let name = syntax::function_name(def.field("definition")?, src).to_ascii_lowercase();
            params
                .contains(&name)
                .then(|| (name, syntax::text(def, src).to_ascii_lowercase()))
        })
        .collect()
}

/// Whether a fixture's text (lowercase) connects to a Redis server and replaces nothing:
/// `redis.Redis(host="localhost")`, `redis.from_url(...)`, with no fake, mock or patch.
fn live_cache(fixture: &str) -> bool {
    let connects = [
        "redis.redis(",
        "strictredis(",
        "redis.from_url(",
        "redis(host",
    ]
    .iter()
    .any(|w| fixture.contains(w));
    connects
        && !["fake", "mock", "patch", "setattr"]
            .iter()
            .any(|w| fixture.contains(w))
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

/// What the test calls that the change defines outside tests; when the diff hides the test's
/// body, the function it is named after (`test_create_charge_success` → `create_charge`).
pub fn callees_under_test(cx: &Ctx<'_>, test: &TestFn<'_>) -> Vec<String> {
    let defined = |name: &str| {
        cx.change
            .functions_named(cx.side, name)
            .any(|(file, _)| !file.is_test)
    };
    let mut out: Vec<String> = test
        .facts
        .callees
        .iter()
        .filter(|c| !MOCKERS.contains(&c.as_str()) && defined(c))
        .cloned()
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
            && !out.iter().any(|c| c == name)
        {
            out.push(name.to_string());
        }
    }
    out
}
