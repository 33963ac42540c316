//! Mocks a test hands to the code under test: `Billing(gateway=mock.Mock())`, then
//! `billing.bill(...)` calls `self.gateway.charge(...)`, which is the mock, whatever function of
//! the change is named `charge`. A walk that reaches a service through such a call reaches the
//! mock.
use tree_sitter::Node;

use super::{TestFn, receiver_classes};
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::facts::{FileFacts, FunctionFacts};
use crate::rules::reach::Reach;
use crate::rules::{Ctx, Local};

/// Where a mock the test hands over is seen in the code under test: by `receiver` (a parameter
/// `client`, or `self.gateway`) in the function `within` names (a qualified name), or in every
/// method of a class (`Billing.`).
#[derive(Debug, PartialEq, Eq)]
pub struct Injected {
    within: String,
    receiver: String,
}

/// Classes whose instances stand in for what the code would call: `unittest.mock`'s, and test
/// doubles by their names.
fn is_double(class: &str) -> bool {
    matches!(
        class,
        "MagicMock" | "AsyncMock" | "NonCallableMock" | "NonCallableMagicMock" | "create_autospec"
    ) || [
        "Fake",
        "Stub",
        "Dummy",
        "Mock",
        "Scripted",
        "Recording",
        "Canned",
    ]
    .iter()
    .any(|p| class.starts_with(p))
        // Or a helper of the tests that makes one (`fake_klarna(...)`, `stub_gateway()`).
        || class.split_once('_').is_some_and(|(first, _)| {
            matches!(
                first,
                "fake" | "stub" | "dummy" | "mock" | "scripted" | "recording" | "canned"
            )
        })
        || super::named_foreign_double(class)
}

/// The mocks `test` hands to functions and constructors of the change, and the names they
/// take in there.
pub fn injected(cx: &Ctx<'_>, test: &TestFn<'_>) -> Vec<Injected> {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return Vec::new();
    };
    // A fixture the test asks for that neither its file nor the change defines (the
    // repository's `conftest.py`): what it hands the code is the test's to control, a fake far
    // more often than a live client, and nothing in sight says otherwise.
    // Asked only of the values a test hands the code, against the file's fixtures read once.
    let params = super::parameters(test.node, src);
    let unseen = |name: &str| {
        params.iter().any(|p| p == name)
            && !cx
                .memo()
                .fixture_names
                .get_or_init(|| super::fixture_names(idx, src))
                .iter()
                .any(|f| f == name)
            && !cx
                .change
                .functions_named(cx.side, name)
                .any(|(file, _)| file.is_test)
    };
    // In repository mode a `conftest.py` above the file may show the fixture: a double only
    // where its code (or what it is built from) names a stand-in.
    let conftests = std::cell::OnceCell::new();
    let stands_in = |name: &str| {
        let conftests: &Vec<&str> = conftests.get_or_init(|| super::repository_conftests(cx));
        let lower = name.to_ascii_lowercase();
        let codes: Vec<&str> = conftests
            .iter()
            .filter_map(|c| super::fixture_code(c, &lower))
            .collect();
        codes.is_empty()
            || codes
                .iter()
                .any(|code| names_a_stand_in(code, conftests, 3))
    };
    // A fixture of another test file of the change (a `conftest.py`) that makes a stand-in
    // (`return FakeMarketplace()`), or hands one to the client it builds.
    let change_fixture_double = |name: &str| {
        params.iter().any(|p| p == name) && super::fixture_of_the_change_stands_in(cx, name)
    };
    let double = |value: Node<'_>| {
        double_value(idx, test, value, src)
            || super::inherited_stand_in(cx, idx, test, value, src)
            || value.kind() == kinds::IDENTIFIER && {
                let name = syntax::text(value, src);
                unseen(name) && stands_in(name) || change_fixture_double(name)
            }
    };
    let mut out = Vec::new();
    // What the class's `setUp` builds from its doubles (`self.service = PaymentService(...,
    // provider=self.provider)` after `self.provider = FakeProvider()`) is the test's too.
    let classes = idx
        .enclosing(test.node, kinds::CLASS_DEFINITION)
        .map(|class| super::lineage(class, idx, src))
        .unwrap_or_default();
    for &class in &classes {
        for setup in idx
            .within(class, kinds::FUNCTION_DEFINITION)
            .iter()
            .filter(|f| {
                matches!(
                    syntax::function_name(**f, src),
                    "setUp" | "asyncSetUp" | "setup_method"
                )
            })
        {
            for &call in idx.within(*setup, kinds::CALL) {
                handed(cx, idx, call, *setup, &double, &mut out);
            }
        }
    }
    for &call in idx.within(test.node, kinds::CALL) {
        handed(cx, idx, call, test.node, &double, &mut out);
        // A helper of the test file that builds the object (`_client(http, sleep)` returning
        // `QuetzalClient(http=http, sleep=sleep)`): its parameters are this call's arguments.
        // Or a method of the test's class (`self.client(...)` building `XenditClient(...,
        // http_client=self.http)` after `self.http = StubHTTPClient(...)`).
        let callee = idx.callee_name(call, src);
        let helper = match syntax::receiver(call).map(|r| syntax::text(r, src)) {
            None => super::function_of_file(idx, src, callee),
            Some("self") => classes.iter().find_map(|class| {
                idx.within(*class, kinds::FUNCTION_DEFINITION)
                    .iter()
                    .copied()
                    .find(|f| {
                        syntax::function_name(*f, src) == callee
                            && idx
                                .enclosing(*f, kinds::CLASS_DEFINITION)
                                .is_some_and(|c| c.id() == class.id())
                    })
            }),
            Some(_) => None,
        }
        .filter(|h| h.id() != test.node.id());
        if let Some(helper) = helper {
            let params = crate::rules::pay::positional_parameters(helper, src);
            let passed = |v: Node<'_>| {
                let name = syntax::text(v, src);
                // `self.http` the helper sets itself.
                let own_attribute = v.kind() == kinds::ATTRIBUTE && name.starts_with("self.");
                (v.kind() == kinds::IDENTIFIER || own_attribute)
                    && (params.contains(&name)
                        && crate::rules::pay::argument_for(call, helper, name, true, src)
                            .is_some_and(&double)
                        // Or a double the helper makes itself (`session = StubSession(...)`).
                        || super::made_in(idx, helper, src, |left| {
                            left.kind() == v.kind() && syntax::text(left, src) == name
                        })
                        .is_some_and(|classes| {
                            !classes.is_empty()
                                && classes
                                    .iter()
                                    .all(|c| is_double(c) || own_class(idx, c, src))
                        }))
            };
            for r in idx.within(helper, kinds::RETURN_STATEMENT) {
                let Some(value) = syntax::return_value(*r) else {
                    continue;
                };
                // `return MarketplaceClient(..., session=session), session`: the client first.
                let made = if matches!(value.kind(), kinds::TUPLE | kinds::EXPRESSION_LIST) {
                    crate::python::named_children(value)
                } else {
                    vec![value]
                };
                // `client = PayPalClient(..., http=http)` then `return client, http`: the
                // call the name was bound to.
                for v in made {
                    let built = match v.kind() {
                        kinds::CALL => Some(v),
                        kinds::IDENTIFIER => idx
                            .assigned_before(
                                Some(helper),
                                syntax::text(v, src),
                                r.start_byte(),
                                src,
                            )
                            .filter(|a| a.kind() == kinds::CALL),
                        _ => None,
                    };
                    if let Some(made) = built {
                        handed(cx, idx, made, helper, &passed, &mut out);
                    }
                }
            }
        }
    }
    // The fixtures the test takes that build the object under test from mocks
    // (`BankTransferService(invoices, bank, redis, receipts)`).
    for param in crate::rules::pay::parameters(test.node, src) {
        let Some(fixture) = super::fixture_named(idx, src, &param) else {
            continue;
        };
        for r in idx.within(fixture, kinds::RETURN_STATEMENT) {
            if let Some(made) = syntax::return_value(*r).filter(|v| v.kind() == kinds::CALL) {
                handed(cx, idx, made, fixture, &double, &mut out);
            }
        }
    }
    out
}

/// Whether a conftest fixture's code, or that of the fixtures it is built from (`depth` levels),
/// makes a stand-in: a mock, a fake, a stub, a recorded or routed transport.
fn names_a_stand_in(code: &str, conftests: &[&str], depth: usize) -> bool {
    const STAND_INS: &[&str] = &[
        "mock",
        "fake",
        "stub",
        "dummy",
        "respx",
        "aioresponses",
        "httpretty",
        "vcr",
        "cassette",
        "betamax",
    ];
    // `responses` as a word of its own: `decode_responses=True` is Redis's.
    if (super::has_word(code, "responses")
        || STAND_INS.iter().any(|w| code.contains(w))
        || super::IN_MEMORY_CACHES.iter().any(|w| code.contains(w))
        // `return RedisFalso()`: a double named in the code's language.
        || code
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .any(|word| word.len() > 4 && super::named_foreign_double(word)))
        && !super::live_cache(code)
    {
        return true;
    }
    let Some(name) = code
        .split("def ")
        .nth(1)
        .and_then(|rest| rest.split('(').next())
    else {
        return false;
    };
    depth > 0
        && super::fixture_parameters(code, name.trim())
            .iter()
            .flat_map(|p| {
                conftests
                    .iter()
                    .filter_map(move |c| super::fixture_code(c, p))
            })
            .any(|c| names_a_stand_in(c, conftests, depth - 1))
}

/// What `call` hands to a function or constructor of the change: the mocks among its
/// arguments (as `double` tells them), and the containers of mocks (`make_services(store,
/// brightpay)`, made there or bound in `scope` before), each under the name it takes there.
fn handed<'t>(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'t>,
    call: Node<'t>,
    scope: Node<'t>,
    double: &dyn Fn(Node<'_>) -> bool,
    out: &mut Vec<Injected>,
) {
    let src = cx.src();
    let Some(args) = call.field("arguments") else {
        return;
    };
    // Which of the callee's parameters get a mock: by keyword, or by place.
    let mut by_keyword: Vec<&str> = Vec::new();
    let mut by_place: Vec<usize> = Vec::new();
    let mut place = 0;
    // A container of mocks (`make_services(store, brightpay)`) handed over: the callee
    // reaches them as its attributes (`services.brightpay`).
    let mut holders: Vec<(Result<usize, &str>, Vec<&str>)> = Vec::new();
    let mut arguments = crate::python::named_children(args);
    // `CardProviderClient(**kwargs)` after `kwargs = dict(http_client=http, ...)`: the
    // keywords of the dict it was bound to, in the scope that makes the call.
    if let Some(splat) = arguments
        .iter()
        .position(|a| a.kind() == kinds::DICTIONARY_SPLAT)
    {
        let spread = super::spread_dict(idx, scope, call, src)
            .and_then(|v| v.field("arguments"))
            .map(crate::python::named_children)
            .unwrap_or_default();
        arguments.splice(splat..=splat, spread);
    }
    for arg in arguments {
        let (slot, value) = match arg.kind() {
            kinds::KEYWORD_ARGUMENT => {
                let (Some(name), Some(value)) = (arg.field("name"), arg.field("value")) else {
                    continue;
                };
                (Err(syntax::text(name, src)), value)
            }
            kinds::LIST_SPLAT | kinds::DICTIONARY_SPLAT => break,
            kinds::COMMENT => continue,
            _ => {
                place += 1;
                (Ok(place - 1), arg)
            }
        };
        if double(value) {
            match slot {
                Ok(at) => by_place.push(at),
                Err(name) => by_keyword.push(name),
            }
        } else {
            // The container made where it is passed, or bound in the test before
            // (`services = make_services(store, brightpay)`).
            let made = match value.kind() {
                kinds::CALL => Some(value),
                kinds::IDENTIFIER => {
                    let local = syntax::text(value, src);
                    idx.within(scope, kinds::ASSIGNMENT)
                        .iter()
                        .filter(|a| {
                            a.field("left").is_some_and(|l| {
                                l.kind() == kinds::IDENTIFIER && syntax::text(l, src) == local
                            })
                        })
                        .find_map(|a| a.field("right").filter(|r| r.kind() == kinds::CALL))
                }
                _ => None,
            };
            let held = made
                .map(|c| mocks_held(c, &double, src))
                .unwrap_or_default();
            if !held.is_empty() {
                holders.push((slot, held));
            }
        }
    }
    if by_keyword.is_empty() && by_place.is_empty() && holders.is_empty() {
        return;
    }
    let name = idx.callee_name(call, src);
    let constructor = format!("{name}.__init__");
    let defined = cx
        .change
        .functions_named(cx.side, name)
        .chain(cx.change.functions_named(cx.side, "__init__"))
        .filter(|(file, f)| {
            !file.is_test && (f.name == name || f.qualname.ends_with(&constructor))
        });
    for (_, f) in defined {
        let params: Vec<&str> = f.params.split(',').collect();
        let mocked = |p: &str| {
            by_keyword.contains(&p)
                || params
                    .iter()
                    .position(|q| *q == p)
                    .is_some_and(|i| by_place.contains(&i))
        };
        if f.name == "__init__" {
            let class = f.qualname.trim_end_matches("__init__");
            for (attribute, param) in f.stores.iter() {
                if mocked(param) {
                    out.push(Injected {
                        within: class.to_string(),
                        receiver: format!("self.{attribute}"),
                    });
                }
            }
        } else {
            // A keyword names its parameter, keyword-only ones too (`*, client=None`), which
            // the facts' positional list leaves out.
            let mut receivers: Vec<&str> = params.iter().copied().filter(|p| mocked(p)).collect();
            for k in &by_keyword {
                if !receivers.contains(k) {
                    receivers.push(k);
                }
            }
            for p in receivers {
                out.push(Injected {
                    within: f.qualname.clone(),
                    receiver: p.to_string(),
                });
            }
            for (slot, held) in &holders {
                let param = match slot {
                    Ok(at) => params.get(*at).copied(),
                    Err(name) => params.iter().copied().find(|p| p == name),
                };
                for (p, attribute) in param
                    .into_iter()
                    .flat_map(|p| held.iter().map(move |h| (p, h)))
                {
                    out.push(Injected {
                        within: f.qualname.clone(),
                        receiver: format!("{p}.{attribute}"),
                    });
                }
            }
        }
    }
}

/// The names under which a call's arguments hand it mocks: `brightpay` of
/// `make_services(store, brightpay)` or of `Services(brightpay=AsyncMock())`.
fn mocks_held<'s>(call: Node<'_>, double: &dyn Fn(Node<'_>) -> bool, src: &'s str) -> Vec<&'s str> {
    let Some(args) = call.field("arguments") else {
        return Vec::new();
    };
    crate::python::named_children(args)
        .into_iter()
        .filter_map(|arg| match arg.kind() {
            kinds::KEYWORD_ARGUMENT => {
                let (name, value) = (arg.field("name")?, arg.field("value")?);
                double(value).then(|| syntax::text(name, src))
            }
            kinds::IDENTIFIER => double(arg).then(|| syntax::text(arg, src)),
            _ => None,
        })
        .collect()
}

/// Whether `value` in the test is a test double: made by a mock's or a fake's constructor
/// where it stands, or bound to one in the test, at module level, in `setUp`, or by a fixture
/// of the file that returns one (`bp = AsyncMock(); ...; return bp`).
/// A class the test file defines itself (`class ScriptedPayGate:`) is a hand-written double:
/// tests do not define the clients they mean to reach.
fn own_class(idx: &NodeIndex<'_>, class: &str, src: &str) -> bool {
    idx.all(kinds::CLASS_DEFINITION).iter().any(|c| {
        c.field("name")
            .is_some_and(|n| syntax::text(n, src) == class)
    })
}

fn double_value(idx: &NodeIndex<'_>, test: &TestFn<'_>, value: Node<'_>, src: &str) -> bool {
    let made = |node: Node<'_>| {
        receiver_classes(idx, test, node, src).is_some_and(|classes| {
            classes
                .iter()
                .all(|c| is_double(c) || own_class(idx, c, src))
        })
    };
    if made(value) {
        return true;
    }
    if value.kind() != kinds::IDENTIFIER {
        return false;
    }
    let name = syntax::text(value, src);
    let Some(fixture) = super::fixture_named(idx, src, name) else {
        return false;
    };
    let returns = idx.within(fixture, kinds::RETURN_STATEMENT);
    !returns.is_empty()
        && returns.iter().all(|r| {
            let Some(returned) = syntax::return_value(*r) else {
                return false;
            };
            if returned.kind() == kinds::CALL {
                return super::constructed(returned, src).is_some_and(is_double);
            }
            let local = syntax::text(returned, src);
            let bound: Vec<Node<'_>> = idx
                .within(fixture, kinds::ASSIGNMENT)
                .iter()
                .filter(|a| {
                    a.field("left")
                        .is_some_and(|l| syntax::text(l, src) == local)
                })
                .filter_map(|a| a.field("right"))
                .collect();
            returned.kind() == kinds::IDENTIFIER
                && !bound.is_empty()
                && bound
                    .iter()
                    .all(|v| super::constructed(*v, src).is_some_and(is_double))
        })
}

/// The receivers that hold a mock in function `f`.
fn held_in<'i>(injected: &'i [Injected], f: &FunctionFacts) -> Vec<&'i str> {
    injected
        .iter()
        .filter(|i| {
            i.within == f.qualname || (i.within.ends_with('.') && f.qualname.starts_with(&i.within))
        })
        .map(|i| i.receiver.as_str())
        .collect()
}

/// Whether the walk `r` from a test to a service goes through a mock the test handed over:
/// a step of its path whose every function of that name (outside tests) calls the next only on
/// a receiver that holds the mock, or a last function whose every call of the service's
/// `verbs` is on one (`self._http.request(...)` with `self._http` the test's mock). A mock held
/// as a parameter (`client`) is carried on to the next function of the path when that one
/// takes a parameter of the same name (`_collect(invoice_id, client or get_client())`): code
/// hands a client on under its name far more often than it swaps it.
pub fn through_a_mock(cx: &Ctx<'_>, injected: &[Injected], r: &Reach<'_>, verbs: &[&str]) -> bool {
    if injected.is_empty() {
        return false;
    }
    let all_on_held = |file: &FileFacts,
                       f: &FunctionFacts,
                       carried: &[&str],
                       called: &dyn Fn(&str) -> bool| {
        let mut held = held_in(injected, f);
        held.extend(carried.iter().copied());
        // `body.get("title")`, `resp.headers.get("Retry-After")` of a local the module does
        // not import: a dict's read, not a request.
        let a_dicts_get = |c: &crate::rules::facts::CallSite| {
            c.name() == "get"
                && c.receiver().is_some_and(|r| {
                    let root = r.split('.').next().unwrap_or(r);
                    !matches!(root, "self" | "cls")
                        && !held.contains(&r)
                        && file.import_target(root).is_none()
                })
        };
        let mut calls = file
            .calls
            .iter()
            .filter(|c| *c.function == *f.qualname && called(c.name()) && !a_dicts_get(c))
            .peekable();
        // `self.http`, the property over `self._http` the constructor stored the mock in
        // (made lazily when none was handed in): Python's usual way to a client.
        let holds = |r: &str| {
            held.contains(&r)
                || r.strip_prefix("self.")
                    .is_some_and(|name| held.iter().any(|h| h.strip_prefix("self._") == Some(name)))
        };
        !held.is_empty() && calls.peek().is_some() && calls.all(|c| c.receiver().is_some_and(holds))
    };
    let mut carried: Vec<&str> = Vec::new();
    for step in r.path.windows(2) {
        let (from, to) = (&step[0], &step[1]);
        // Only the functions of that name that make the next call are on the path: a service's
        // `create_refund` beside the client's, which calls `_request`, is not.
        let callers: Vec<_> = cx
            .change
            .functions_named(cx.side, from)
            .filter(|(file, f)| {
                !file.is_test
                    && file
                        .calls
                        .iter()
                        .any(|c| *c.function == *f.qualname && c.name() == to.as_str())
            })
            .collect();
        if callers.is_empty() {
            carried.clear();
            continue;
        }
        if callers
            .iter()
            .all(|(file, f)| all_on_held(file, f, &carried, &|n| n == to))
        {
            return true;
        }
        let mut next: Vec<&str> = Vec::new();
        for (_, f) in &callers {
            for name in held_in(injected, f)
                .into_iter()
                .chain(carried.iter().copied())
            {
                if !name.contains('.') && !next.contains(&name) {
                    next.push(name);
                }
            }
        }
        let callees: Vec<_> = cx
            .change
            .functions_named(cx.side, to)
            .filter(|(file, _)| !file.is_test)
            .collect();
        let takes = |f: &FunctionFacts, name: &str| {
            f.params
                .split(',')
                .chain(f.keyword_only.split(','))
                .any(|p| p == name)
        };
        if callees.is_empty() {
            carried.clear();
            continue;
        }
        next.retain(|name| callees.iter().all(|(_, f)| takes(f, name)));
        carried = next;
    }
    all_on_held(r.file, r.function, &carried, &|name| verbs.contains(&name))
}
