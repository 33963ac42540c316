//! TEST001 test-reaches-live-service: a test whose code under test, after this change, reaches
//! Redis/a cache or an HTTP service that the test does not mock.
use super::{
    FileMocks, Mocks, Runs, TestFn, callees_under_test, injected, live_setup, runs_by, tests_of,
};
use crate::config::Vocabulary;
use crate::python::{kinds, syntax};
use crate::rules::facts::{FileFacts, FunctionFacts};
use crate::rules::reach::{self, Reach, Trait};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};
use crate::source::Side;

pub(crate) static RULE: Rule = Rule {
    id: "TEST001",
    doc: include_str!("../../../rules/test/TEST001.md"),
    check: Check::Tree(check),
    gate: Gate::Split {
        reports,
        tree: reads_tree,
    },
};

/// How calls follow one another from a test to the client.
const DEPTH: usize = 3;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Service {
    Cache,
    Http,
    /// A payment provider's SDK called at module level (`stripe.PaymentIntent.capture`): it
    /// sends its own requests, to the provider's live or test-mode API.
    Provider,
}

/// Every service, in the order a test's reach is looked for: a function that both sends HTTP and
/// calls an SDK is cited for its HTTP.
const SERVICES: [Service; 3] = [Service::Cache, Service::Http, Service::Provider];

impl Service {
    /// The service's part of a finding's key, its note, and its point.
    fn kind(self) -> &'static str {
        match self {
            Service::Cache => "cache",
            Service::Http => "http",
            Service::Provider => "sdk",
        }
    }

    fn talks_to(self) -> &'static Trait {
        match self {
            Service::Cache => &reach::CACHE,
            Service::Http => &reach::HTTP,
            Service::Provider => &reach::SDK,
        }
    }

    /// What code calls on this service's client: a function whose every such call is on a
    /// mock the test handed over talks to the mock.
    fn verbs(self) -> &'static [&'static str] {
        match self {
            Service::Cache => &[
                "get",
                "set",
                "setex",
                "psetex",
                "add",
                "delete",
                "incr",
                "decr",
                "expire",
                "exists",
                "hget",
                "hset",
                "hdel",
                "eval",
                "evalsha",
                "pipeline",
                "lock",
                "get_many",
                "set_many",
                "get_or_set",
                "touch",
                "ping",
            ],
            Service::Http => &[
                "request", "get", "post", "put", "patch", "delete", "head", "options", "send",
                "stream", "urlopen", "fetch",
            ],
            // What the code calls is the SDK's module, never an object the test hands over.
            Service::Provider => &[],
        }
    }

    /// Words a mock of this service is recognised by (patch targets, fixture names).
    fn tokens(self, file: &FileFacts) -> Vec<String> {
        let base: &[&str] = match self {
            Service::Cache => &["redis", "cache"],
            Service::Http => &[
                "httpx",
                "requests",
                "urlopen",
                "aiohttp",
                "transport",
                "session",
                "http_client",
            ],
            // A patch of the SDK (`patch("app.gateway.stripe.Refund.create")`), a fake of the
            // network under it, or a local stand-in set as its base (`stripe.api_base` of
            // `stripe-mock`).
            Service::Provider => crate::rules::facts::PAYMENT_SDKS,
        };
        let mut out: Vec<String> = base
            .iter()
            .chain(if self == Service::Cache {
                &[][..]
            } else {
                NETWORK_FAKES
            })
            .map(|s| s.to_ascii_lowercase())
            .collect();
        if self == Service::Cache {
            out.extend(
                cache_clients(file)
                    .into_iter()
                    .map(|c| c.to_ascii_lowercase()),
            );
        }
        out
    }
}

/// Recorded answers played back (vcrpy, pytest-recording, betamax) and other fakes of the
/// network: whatever client or SDK sends the request, they answer it.
const NETWORK_FAKES: &[&str] = &[
    "respx",
    "responses",
    "vcr",
    "cassette",
    "betamax",
    "httpretty",
    "aioresponses",
    "mocket",
];

fn cache_clients(file: &FileFacts) -> Vec<String> {
    file.imports
        .iter()
        .filter(|i| {
            let t = i.target.to_ascii_lowercase();
            t.contains("redis") || t.contains("cache")
        })
        .map(|i| i.local.clone())
        .collect()
}

/// Tests are checked, and, elsewhere, the functions the change adds lines to.
fn reports(s: &Scan<'_>) -> bool {
    s.facts.is_test
        || s.facts
            .functions
            .iter()
            .any(|f| s.lines.touches_added(f.lines.0, f.lines.1))
}

/// Outside tests the rule reads facts and the project index only.
fn reads_tree(s: &Scan<'_>) -> bool {
    s.facts.is_test
}

fn check(cx: &mut Ctx<'_>) {
    if !cx.facts.is_some_and(|f| f.is_test) {
        tests_outside_the_change(cx);
        return;
    }
    let file_mocks = FileMocks::of(cx);
    let tests = tests_of(cx);
    let mut reach_the_cache: Vec<&str> = Vec::new();
    // A live test on request (`@pytest.mark.integration`) reaches the service on purpose.
    for test in tests.iter().filter(|t| t.runs == Runs::Always) {
        let mocks = Mocks::of(cx, test, &file_mocks);
        let injected = injected::injected(cx, test);
        let callees = callees_under_test(cx, test);
        let found = SERVICES
            .into_iter()
            .find_map(|service| {
                callees.iter().find_map(|callee| {
                    // A test that expects the call to fail (`with pytest.raises(PaymentError):
                    // provider.refund(payment)` of a payment not yet confirmed) most often tests a
                    // guard that refuses before the SDK is called, and the SDK's own errors come
                    // from a mock.
                    if service == Service::Provider
                        && expected_to_raise(cx, test, &callee.name, false)
                    {
                        return None;
                    }
                    // `with pytest.raises(ValueError): client._request("POST", path)`: a
                    // request refused for its arguments, before anything is sent.
                    if service == Service::Http && expected_to_raise(cx, test, &callee.name, true) {
                        return None;
                    }
                    let r = callee.reach(cx, DEPTH, service.talks_to())?;
                    let replaced = replaced_names(service, &r, cx.vocab)
                        .any(|n| mocks.replace_function(n))
                        || mocks.spec_a_class_on(cx, &r.path)
                        || mocks.patch_a_class_on(cx, &r.path)
                        || mocks.configured_on(&r.path)
                        || super::fixture_fake_on(cx, test, &r.path)
                        || super::a_double_of_the_file_answers_a_step(cx, test, &r)
                        || injected::through_a_mock(cx, &injected, &r, service.verbs())
                        || service == Service::Http && client_factory_replaced(cx, &mocks, &r)
                        || service == Service::Http && serves_its_own(cx, test);
                    let tokens = service.tokens(r.file);
                    // `@mock.patch("requests.post")` over code that posts through a session it
                    // made: the patch is not where the request goes.
                    let beside = (service == Service::Http)
                        .then(|| mocks.module_verbs_only(&tokens))
                        .flatten()
                        .filter(|_| sends_through_a_session(&r));
                    (!replaced && (!mocks.cover(&tokens) || beside.is_some()))
                        .then_some((service, r, beside))
                })
            })
            .filter(|(service, r, _)| !repository_fixture_covers(cx, test, *service, Some(r)))
            .filter(|(_, r, _)| !a_parameter_stands_in(cx, test, r))
            .filter(|(service, r, _)| {
                !(*service == Service::Cache
                    && (django_cache_local_in_tests(cx, r)
                        || flask_cache_local_in_tests(cx, r)
                        || local_store_only(r)))
            });
        if let Some((service, r, beside)) = found {
            if service == Service::Cache {
                reach_the_cache.push(&test.facts.name);
            }
            report(cx, test, service, &r, mocks.unactivated.as_deref(), beside);
        } else if let Some(call) = calls_the_sdk(cx, test)
            && cx
                .facts
                .is_some_and(|f| !mocks.cover(&Service::Provider.tokens(f)))
            && !repository_fixture_covers(cx, test, Service::Provider, None)
        {
            report_direct(cx, test, call);
        } else if let Some(built) = builds_a_live_client(cx, test)
            && cx.facts.is_some_and(|f| {
                // The client is the test's own: a database session (`db_session`,
                // `session_factory`) beside it stands in for nothing on the network.
                let mut tokens = Service::Http.tokens(f);
                tokens.retain(|t| t != "session");
                !mocks.cover(&tokens)
            })
        {
            report_built(cx, test, &built);
        } else if let Some(registered) = mocks.unactivated.as_deref() {
            // The answers it registers say the test expects requests; the code they go through
            // is out of sight (a client handed in by a fixture).
            report_unactivated(cx, test, registered);
        }
    }
    live_setup::fixtures(cx, &tests, &reach_the_cache);
    live_setup::provider_settings(cx, &tests);
    live_setup::cache_settings(cx, &tests, &reach_the_cache);
}

/// Whether the cache reached is a store on the local disk (`diskcache.Cache(path)`, `shelve`,
/// `sqlitedict`) and the file has no client of a cache server: there is no server to reach,
/// and a test hands it a folder of its own (`tmp_path`).
fn local_store_only(r: &Reach<'_>) -> bool {
    let imports = &r.file.imports;
    imports.iter().any(|i| {
        ["diskcache", "shelve", "sqlitedict"]
            .iter()
            .any(|m| i.target.split('.').next() == Some(*m))
    }) && !imports.iter().any(|i| {
        let target = i.target.to_ascii_lowercase();
        [
            "redis",
            "memcache",
            "django.core.cache",
            "flask_caching",
            "aiocache",
        ]
        .iter()
        .any(|s| target.contains(s))
    })
}

/// Whether the cache reached is Django's and the repository's settings give the tests an
/// in-process one (`CACHES = {"default": {"BACKEND": "...locmem.LocMemCache"}}` in a settings
/// module such as `settings_test.py`): Django's `cache` there is no server (repository mode).
fn django_cache_local_in_tests(cx: &Ctx<'_>, r: &Reach<'_>) -> bool {
    // Django's `cache`, and no client of a cache server of the file's own beside it.
    let django_only = r
        .file
        .imports
        .iter()
        .any(|i| i.target.starts_with("django.core.cache"))
        && !r.file.imports.iter().any(|i| {
            let target = i.target.to_ascii_lowercase();
            target.contains("redis") || target.contains("memcache")
        });
    let local = |a: &crate::index::Assignment| {
        let value = a.value.to_ascii_lowercase();
        a.name == "CACHES" && (value.contains("locmem") || value.contains("dummycache"))
    };
    django_only
        && cx.project().is_some_and(|p| {
            p.modules().iter().any(|m| {
                let settings = m
                    .module
                    .rsplit('.')
                    .next()
                    .is_some_and(|n| n.contains("settings"));
                let caches: Vec<&crate::index::Assignment> = m
                    .assignments
                    .iter()
                    .filter(|a| a.name == "CACHES")
                    .collect();
                // A settings module for the tests (`settings_test`, `testutils/settings.py`),
                // or one whose last word on `CACHES` puts a local cache over a server's (`if
                // "pytest" in sys.modules: CACHES = {...LocMemCache...}`).
                let for_tests = settings && m.module.contains("test");
                let overridden =
                    settings && caches.len() > 1 && caches.last().is_some_and(|a| local(a));
                for_tests && caches.iter().any(|a| local(a)) || overridden
            })
        })
}

/// Whether the cache reached is no client of a server the file makes itself, and a
/// configuration class of the repository for the tests sets Flask-Caching to a cache in the
/// process (`class TestConfig(Config): CACHE_TYPE = "SimpleCache"`, repository mode): the
/// app the tests build with it talks to no server.
fn flask_cache_local_in_tests(cx: &Ctx<'_>, r: &Reach<'_>) -> bool {
    let own_server = r.file.imports.iter().any(|i| {
        let target = i.target.to_ascii_lowercase();
        target.contains("redis") || target.contains("memcache")
    });
    !own_server
        && cx
            .project()
            .is_some_and(|p| p.modules().iter().any(|m| m.local_test_cache))
}

/// Whether a fixture the test takes from a `conftest.py` of the repository that the change does
/// not show mocks the service (repository mode): its code, or the code of the conftest
/// fixtures it is built from (`rzp(app)`, with `app` holding a `FakeRedis`), names a stand-in
/// for the service (a `respx` router, a `FakeAsyncRedis`) and connects to no live cache. The test's own
/// file's fixtures lead there too (`owed(restaurant)`, `restaurant(app)`). Asked only of a test
/// about to be reported: it reads the project index.
/// Whether the test configures or asserts on the function that reaches the service through
/// one of its parameters (`fake_gateway.reverse_transfer.assert_not_called()`,
/// `gateway.create_refund.return_value = ...`), or a fixture of the conftest it takes makes a
/// spec'd mock of that function's class: a fixture hands it a stand-in for the client, however
/// the fixture puts it in place.
fn a_parameter_stands_in(cx: &Ctx<'_>, test: &TestFn<'_>, r: &Reach<'_>) -> bool {
    let src = cx.src();
    let body = syntax::text(test.node, src);
    let name = &r.function.name;
    super::parameters(test.node, src).iter().any(|p| {
        let read = format!("{p}.{name}.");
        body.contains(&read)
    }) || super::a_fixture_specs_its_class(cx, test, r)
}

/// Whether a fixture of the repository's conftests that the test asks for, and its file does not
/// define, stands in for `service`; or, for the `walk` to it, gives back a double of a class
/// those conftests write (`return FakePayPal()`) with a method on the walk (`create_order` of
/// `start_checkout → create_order → _request`): the code calls the double there, not the client
/// under it.
fn repository_fixture_covers(
    cx: &Ctx<'_>,
    test: &TestFn<'_>,
    service: Service,
    walk: Option<&Reach<'_>>,
) -> bool {
    // Words of a stand-in for this service, not of the client: a fixture that builds a real
    // `httpx.AsyncClient` names `httpx` too, and a `FakeQueue` is no fake of the cache.
    let stands_in = |code: &str| match service {
        // `responses` as a word of its own: `decode_responses=True` is Redis's.
        Service::Http => stands_in_http(code),
        // `stripe-mock` and the like, set as the SDK's base (`stripe.api_base = "http://..."`).
        Service::Provider => {
            code.contains("api_base") || code.contains("stripe_mock") || stands_in_http(code)
        }
        Service::Cache => {
            super::IN_MEMORY_CACHES.iter().any(|t| code.contains(t))
                || ["fake", "mock", "stub", "dummy"]
                    .iter()
                    .any(|t| code.contains(t))
                    && ["redis", "cache", "kv"].iter().any(|t| code.contains(t))
        }
    };
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return false;
    };
    let mut queue: Vec<String> = super::parameters(test.node, src);
    let mut seen: Vec<String> = Vec::new();
    let mut unseen: Vec<String> = Vec::new();
    while let Some(name) = queue.pop() {
        if seen.contains(&name) || seen.len() > 32 {
            continue;
        }
        seen.push(name.clone());
        match super::fixture_named(idx, src, &name) {
            Some(fixture) => queue.extend(super::parameters(fixture, src)),
            None => unseen.push(name.to_ascii_lowercase()),
        }
    }
    if unseen.is_empty() {
        return false;
    }
    let conftests = super::repository_conftest_modules(cx);
    let steps: Vec<String> = walk.map_or_else(Vec::new, |r| {
        r.path
            .iter()
            .map(|s| crate::rules::facts::last_name(s))
            .chain(
                r.function
                    .callees
                    .iter()
                    .map(|c| crate::rules::facts::last_name(c)),
            )
            .filter(|s| !s.starts_with("__"))
            .map(str::to_ascii_lowercase)
            .collect()
    });
    // A method of a class the conftests write, named for a step of the walk.
    let on_the_walk = |class: &str| {
        conftests.iter().flat_map(|m| m.functions.iter()).any(|d| {
            d.qualname.rsplit_once('.').is_some_and(|(owner, method)| {
                owner.eq_ignore_ascii_case(class)
                    && steps.iter().any(|s| method.eq_ignore_ascii_case(s))
            })
        })
    };
    let mut queue = unseen;
    let mut seen: Vec<String> = Vec::new();
    // Fixtures another hands the client as its session (`"session": braintree_http`).
    let mut handed: Vec<String> = Vec::new();
    while let Some(name) = queue.pop() {
        if seen.contains(&name) || seen.len() > 32 {
            continue;
        }
        for code in conftests
            .iter()
            .filter_map(|c| super::fixture_code(&c.fixtures, &name))
        {
            if super::live_cache(code) {
                continue;
            }
            // A fixture named for the session it makes (`checkout_session`), handed on by
            // position, is a double of the transport when it makes one.
            let a_session = ["session", "http", "transport"]
                .iter()
                .any(|w| name.contains(w));
            if stands_in(code)
                || service != Service::Cache
                    && (handed.contains(&name) || a_session)
                    && makes_a_double(code)
                || !steps.is_empty() && doubles_made(code).any(on_the_walk)
            {
                return true;
            }
            let params = super::fixture_parameters(code, &name);
            if service != Service::Cache {
                handed.extend(
                    sessions_handed(code)
                        .into_iter()
                        .filter(|v| params.iter().any(|p| p == v))
                        .map(str::to_string),
                );
            }
            queue.extend(params);
        }
        seen.push(name);
    }
    false
}

/// The names a fixture's code (lowercase) hands a client as its HTTP session: `session=x`,
/// `"session": x` in the options it builds the client from.
fn sessions_handed(code: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for slot in ["session", "http", "transport", "requester"] {
        for (at, _) in code.match_indices(slot) {
            let before = code[..at].chars().next_back();
            let quoted = matches!(before, Some('"' | '\''));
            if !quoted && before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            let mut rest = &code[at + slot.len()..];
            if quoted {
                match rest.strip_prefix(['"', '\'']) {
                    Some(r) => rest = r,
                    None => continue,
                }
            }
            let rest = rest.trim_start();
            let value = if quoted {
                rest.strip_prefix(':')
            } else {
                rest.strip_prefix('=').filter(|r| !r.starts_with('='))
            };
            let Some(value) = value.map(str::trim_start) else {
                continue;
            };
            let end = value
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(value.len());
            if end > 0 {
                out.push(&value[..end]);
            }
        }
    }
    out
}

/// The classes a fixture's code (lowercase) gives back a double of (`fakepaypal` of `return
/// fakepaypal()`).
fn doubles_made(code: &str) -> impl Iterator<Item = &str> {
    ["return ", "yield "].into_iter().flat_map(move |verb| {
        code.match_indices(verb).filter_map(move |(at, _)| {
            let value = &code[at + verb.len()..];
            let class = &value[..value.find('(')?];
            (STAND_IN_PREFIXES.iter().any(|w| class.starts_with(w))
                && class
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_'))
            .then_some(class)
        })
    })
}

/// How the names of the tests' own doubles begin.
const STAND_IN_PREFIXES: &[&str] = &[
    "fake",
    "stub",
    "mock",
    "dummy",
    "scripted",
    "recording",
    "canned",
];

/// Whether a fixture's code (lowercase) gives back a double of a class the tests wrote:
/// `return scriptedbraintree()`, `yield fakesession()`.
fn makes_a_double(code: &str) -> bool {
    ["return ", "yield "].iter().any(|verb| {
        code.match_indices(verb).any(|(at, _)| {
            let value = &code[at + verb.len()..];
            STAND_IN_PREFIXES.iter().any(|w| value.starts_with(w))
                // `return gatewayfalso()`: the word for a fake after the noun, lowercased.
                || value
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .next()
                    .is_some_and(super::named_foreign_double)
        })
    })
}

/// Whether the test starts a server of its own for the client to talk to (`TestServer(app)`,
/// `aiohttp_server(app)`, pytest-httpserver's `httpserver`): the requests stay in the process.
/// Or points the client at the loopback address (`api_url=f"http://127.0.0.1:{unused_tcp_port}
/// /api"`, a refused connection on purpose): they stay on the machine.
fn serves_its_own(cx: &Ctx<'_>, test: &TestFn<'_>) -> bool {
    let text = syntax::text(test.node, cx.src());
    [
        "TestServer(",
        "aiohttp_server",
        "aiohttp_raw_server",
        "httpserver",
        "unused_tcp_port",
        "://127.0.0.1",
        "://localhost",
        "://[::1]",
    ]
    .iter()
    .any(|w| memchr::memmem::find(text.as_bytes(), w.as_bytes()).is_some())
}

/// Whether the test replaces what a function on the path gets its client from
/// (`monkeypatch.setattr(jobs, "get_client", lambda: fake_paygate)`): every request of that
/// client goes to the stand-in.
fn client_factory_replaced(cx: &Ctx<'_>, mocks: &Mocks<'_>, r: &Reach<'_>) -> bool {
    r.path.iter().any(|step| {
        cx.change
            .functions_named(cx.side, step)
            .filter(|(file, _)| !file.is_test)
            .any(|(_, f)| {
                f.callees.iter().any(|c| {
                    let words = syntax::name_words(c);
                    words.iter().any(|w| {
                        matches!(
                            w.as_str(),
                            "client" | "gateway" | "session" | "provider" | "api" | "http"
                        )
                    }) && mocks.replace_function(c)
                })
            })
    })
}

/// Whether a fixture's code (lowercase) names a stand-in for the network.
fn stands_in_http(code: &str) -> bool {
    // `responses` as a word of its own: `decode_responses=True` is Redis's.
    super::has_word(code, "responses")
        || [
            "respx",
            "requests_mock",
            "aioresponses",
            "httpretty",
            "mocktransport",
            "vcr",
            "cassette",
            "betamax",
            "mocket",
            // A server of the test's own that fakes the provider (`aiohttp_server(app)`,
            // pytest-httpserver's `httpserver`), whose address the client is handed.
            "aiohttp_server",
            "aiohttp_raw_server",
            "httpserver",
            "testserver(",
        ]
        .iter()
        .any(|t| code.contains(t))
        || hands_a_fake_session(code)
}

/// Whether a fixture hands the client a stand-in for its HTTP session
/// (`BillingClient(API_URL, KEY, session=fake_paystream)`, `transport=stub_transport`).
fn hands_a_fake_session(code: &str) -> bool {
    sessions_handed(code)
        .into_iter()
        .any(crate::rules::facts::names_a_stand_in)
}

/// Names whose patching takes the service out of the way: the functions on the path to it, and
/// for a cache the names the client's file binds to it (`mock.patch("app.client.kv")`).
fn replaced_names<'r>(
    service: Service,
    r: &'r Reach<'_>,
    vocab: &'r Vocabulary,
) -> impl Iterator<Item = &'r str> {
    let (clients, named): (&[String], &[String]) = match service {
        Service::Cache => (&r.file.cache_clients[..], &vocab.cache_clients[..]),
        Service::Http | Service::Provider => (&[], &[]),
    };
    // The vocabulary's client names (`kv`, patched as `patch.object(settlement, "kv")`), not the
    // one-letter `r`, which a test's text has for other reasons (`open(path, "r")`).
    r.path
        .iter()
        .chain(clients)
        .chain(named.iter().filter(|n| n.len() > 1))
        .map(String::as_str)
}

/// Most tests outside the change cited for one function: enough to act on.
const MAX_CITED_TESTS: usize = 5;

/// Tests the change does not show, found through the project index, that call a function the
/// change makes reach a live service, and mock neither the service nor the function. Reported
/// on the function (the tests are not in the diff), with the tests as evidence.
fn tests_outside_the_change(cx: &mut Ctx<'_>) {
    let Some(facts) = cx.facts.filter(|_| cx.side == Side::New) else {
        return;
    };
    let touched: Vec<&FunctionFacts> = facts
        .functions
        .iter()
        .filter(|f| cx.touches_added(f.lines.0, f.lines.1))
        .collect();
    for func in touched {
        let found = SERVICES.into_iter().find_map(|service| {
            let own = std::slice::from_ref(&func.qualname);
            let r = cx.change.reach_surely(
                cx.side,
                &func.name,
                Some(own),
                DEPTH,
                service.talks_to(),
            )?;
            // Reached before the change too: the tests' problem is not this change's.
            let before = cx
                .change
                .reaches(Side::Old, &func.name, DEPTH, service.talks_to());
            (!before).then_some((service, r))
        });
        let Some((service, r)) = found else {
            continue;
        };
        // Only now: the index is built on first use.
        let Some(project) = cx.project() else {
            return;
        };
        let module = project
            .file(cx.path)
            .map_or_else(|| crate::index::module_of(cx.path), |m| m.module.clone());
        let client = client_of(service, &r);
        let tokens = service.tokens(r.file);
        let mut tests: Vec<(&str, u32, &str)> = project
            .calls_of(&func.name)
            .filter(|(m, call)| {
                call.module.as_deref().unwrap_or(&m.module) == module
                    && !cx.change.files.iter().any(|f| f.path == m.path)
            })
            .filter_map(|(m, call)| {
                let def = m.def(&call.function)?;
                let own = def
                    .mocks
                    .as_deref()
                    .filter(|_| def.name.starts_with("test"))?;
                // Its decorators are lines of what may mock it (one line each, when short).
                if own
                    .lines()
                    .any(|l| l.starts_with('@') && runs_by(l) != Runs::Always)
                {
                    return None;
                }
                let mocks = format!("{own}\n{}", m.fixtures);
                let replaced =
                    replaced_names(service, &r, cx.vocab).any(|n| super::replaces(&mocks, n));
                let covered = tokens
                    .iter()
                    .any(|t| !t.is_empty() && mocks.contains(t.as_str()));
                (!replaced && !covered).then_some((m.path.as_str(), def.lines.0, def.name.as_str()))
            })
            .collect();
        tests.sort();
        tests.dedup();
        let Some(&(first_path, first_line, first_name)) = tests.first() else {
            continue;
        };
        let kind = service.kind();
        let key = format!("outside:{kind}:{}", func.qualname);
        let (line, qualname) = (func.lines.0, func.qualname.clone());
        let others = tests.len() - 1;
        let cited: Vec<(String, u32, String)> = tests
            .iter()
            .take(MAX_CITED_TESTS)
            .map(|(p, l, n)| (p.to_string(), *l, n.to_string()))
            .collect();
        let finding = cx
            .report_lines(&RULE, (line, line), key)
            .arg("test", first_name.to_string())
            .arg("test_at", format!("{first_path}:{first_line}"))
            .arg("callee", func.name.clone())
            .arg("client", client)
            .arg("path", r.path.join(" → "))
            .arg("function", r.function.name.clone())
            .arg("others", others.to_string());
        finding.function = qualname;
        finding.note(kind).note("outside");
        if others > 0 {
            finding.note("others");
        }
        for (path, line, name) in cited {
            finding.evidence(&path, line, "evidence_test", vec![("test_name", name)]);
        }
    }
}

/// The client the reached function talks through: for HTTP, the library its own calls name
/// (`requests.post`, `httpx.AsyncClient(...)`), else the first the file imports.
fn client_of(service: Service, r: &Reach<'_>) -> String {
    const LIBRARIES: &[&str] = &["httpx", "requests", "aiohttp"];
    let file = r.file;
    match service {
        Service::Cache => cache_clients(file)
            .into_iter()
            .next()
            .unwrap_or_else(|| "cache".to_string()),
        Service::Provider => file
            .calls
            .iter()
            .filter(|c| *c.function == *r.function.qualname)
            .find_map(|c| sdk_of(file, &c.callee))
            .unwrap_or("sdk")
            .to_string(),
        Service::Http => {
            let library = |local: &str| {
                file.import_target(local)
                    .map(|t| t.split('.').next().unwrap_or(t))
                    .filter(|t| LIBRARIES.contains(t))
            };
            let own = file
                .calls
                .iter()
                .filter(|c| *c.function == *r.function.qualname)
                .find_map(|c| library(c.callee.split('.').next().unwrap_or_default()));
            own.or_else(|| {
                file.imports
                    .iter()
                    .map(|i| i.target.as_str())
                    .find(|t| LIBRARIES.contains(t))
            })
            .unwrap_or("http")
            .to_string()
        }
    }
}

fn report(
    cx: &mut Ctx<'_>,
    test: &TestFn<'_>,
    service: Service,
    r: &Reach<'_>,
    unactivated: Option<&str>,
    beside: Option<String>,
) {
    let client = client_of(service, r);
    let callee = r.path.first().cloned().unwrap_or_default();
    // The service is part of the key: a test that already reached unmocked HTTP before the
    // change is still news when it now reaches Redis too. The test's name, not its text: one
    // the change edits (a line added to its assertions) but that reached the service before
    // it, unmocked, is not this change's doing. Its name, not its qualified name, here and as
    // the function the finding is in: a `unittest` class's test rewritten as a pytest function
    // (django-payments 4.0) is the same test.
    let kind = service.kind();
    let key = format!("{kind}:{}", test.facts.name);
    let finding = cx.report_lines(&RULE, syntax::lines(test.outer), key);
    finding.function = test.facts.name.clone();
    let finding = finding
        .arg("test", test.facts.name.clone())
        .arg("callee", callee)
        .arg("client", client)
        .arg("path", r.path.join(" → "))
        .arg("function", r.function.name.clone());
    finding.note(kind);
    if let Some(registered) = unactivated {
        finding
            .arg("registered", registered.to_string())
            .note("unactivated");
    }
    if let Some(patched) = beside {
        finding.arg("patched", patched).note("session");
    }
    // Every test of an integration suite reaching the gateway is one point: said once per file.
    finding.point = Some(kind);
    if test.partial {
        finding.note("partial");
    }
}

/// Whether the function that sends calls an HTTP verb on an object (`self.session.post(...)`,
/// `self._http.get(...)`) and never the library's module function (`requests.post(...)`).
fn sends_through_a_session(r: &Reach<'_>) -> bool {
    let mut verbs = r
        .file
        .calls
        .iter()
        .filter(|c| *c.function == *r.function.qualname)
        .filter(|c| {
            matches!(
                c.name(),
                "get" | "post" | "put" | "patch" | "delete" | "request" | "head"
            )
        })
        .peekable();
    verbs.peek().is_some()
        && verbs.all(|c| {
            c.receiver()
                .is_some_and(|recv| !matches!(recv, "requests" | "httpx"))
        })
}

/// The SDK a call of it goes to, by its package (`stripe` of `PaymentIntent.create` after
/// `from stripe import PaymentIntent`).
fn sdk_of<'f>(file: &'f FileFacts, callee: &str) -> Option<&'f str> {
    let (root, _) = callee.split_once('.')?;
    let target = file.import_target(root)?;
    let package = target.split('.').next().unwrap_or(target);
    file.calls_payment_sdk(callee).then_some(package)
}

/// Whether every call of `name` in the test is made inside a block that expects an exception
/// (`with pytest.raises(...)`, `with self.assertRaises(...)`); `arguments`: one Python raises
/// for a wrong argument (`ValueError`, `TypeError`), which a client raises before it sends.
fn expected_to_raise(cx: &Ctx<'_>, test: &TestFn<'_>, name: &str, arguments: bool) -> bool {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return false;
    };
    let mut calls = idx
        .within(test.node, kinds::CALL)
        .iter()
        .filter(|c| idx.callee_name(**c, src) == name)
        .peekable();
    calls.peek().is_some()
        && calls.all(|call| {
            // Up the call's own statements only: a handful of parents.
            let mut at = call.parent();
            while let Some(node) = at.filter(|n| n.id() != test.node.id()) {
                if node.kind() == kinds::WITH_STATEMENT {
                    let items = syntax::with_clause(node, src);
                    let argument_error = || {
                        ["ValueError", "TypeError"].iter().any(|e| {
                            ["raises(", "Raises("]
                                .iter()
                                .any(|r| items.contains(&format!("{r}{e}")))
                        })
                    };
                    if (items.contains("raises") || items.contains("Raises"))
                        && (!arguments || argument_error())
                    {
                        return true;
                    }
                }
                at = node.parent();
            }
            false
        })
}

/// The test's own first call of a payment SDK that goes over the network
/// (`stripe.PaymentIntent.create(...)` to set up a hold), as written.
fn calls_the_sdk<'c>(cx: &Ctx<'c>, test: &TestFn<'_>) -> Option<&'c str> {
    if !test.facts.sdk {
        return None;
    }
    let file = cx.facts?;
    file.calls
        .iter()
        .filter(|c| *c.function == *test.facts.qualname)
        .find(|c| file.sdk_request(&c.callee, c.name()))
        .map(|c| &*c.callee)
}

/// A test that calls the provider's SDK itself, to set up or to check, with nothing in the way:
/// it creates real objects at the provider.
fn report_direct(cx: &mut Ctx<'_>, test: &TestFn<'_>, call: &str) {
    let client = cx
        .facts
        .and_then(|f| sdk_of(f, call))
        .unwrap_or("sdk")
        .to_string();
    let key = format!("sdk:{}", test.facts.name);
    let finding = cx.report_lines(&RULE, syntax::lines(test.outer), key);
    finding.function = test.facts.name.clone();
    let finding = finding
        .arg("test", test.facts.name.clone())
        .arg("callee", call.to_string())
        .arg("client", client)
        .arg("path", call.to_string())
        .arg("function", test.facts.name.clone());
    finding.note("direct").note("sdk");
    finding.point = Some("sdk");
    if test.partial {
        finding.note("partial");
    }
}

/// A test that registers answers with `responses` and is not under `@responses.activate`,
/// while the file's other tests are: the requests it expects go to the real host.
fn report_unactivated(cx: &mut Ctx<'_>, test: &TestFn<'_>, registered: &str) {
    let key = format!("http:{}", test.facts.name);
    let finding = cx.report_lines(&RULE, syntax::lines(test.outer), key);
    finding.function = test.facts.name.clone();
    let finding = finding
        .arg("test", test.facts.name.clone())
        .arg("registered", registered.to_string())
        .note("unactivated_only");
    finding.point = Some("http");
    if test.partial {
        finding.note("partial");
    }
}

/// A client the test builds itself for a real host (`RevolutClient("https://sandbox-merchant.
/// revolut.com", os.environ["REVOLUT_SECRET_KEY"], ...)`) and hands to the code or calls: as
/// written, with the host. A sandbox is a real host: it answers slowly, needs credentials, and
/// keeps what each run creates.
fn builds_a_live_client(cx: &Ctx<'_>, test: &TestFn<'_>) -> Option<(String, String, bool)> {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return None;
    };
    idx.within(test.node, kinds::CALL).iter().find_map(|&call| {
        let callee = syntax::callee(call, src);
        let class = callee.rsplit('.').next().unwrap_or(callee);
        if !class.starts_with(|c: char| c.is_ascii_uppercase())
            || ["Mock", "Fake", "Stub", "Dummy", "Test"]
                .iter()
                .any(|p| class.contains(p))
        {
            return None;
        }
        let arguments: Vec<tree_sitter::Node<'_>> = syntax::positional_args(call)
            .into_iter()
            .chain(syntax::keyword_args(call, src).into_iter().map(|(_, v)| v))
            .collect();
        let host = arguments
            .iter()
            .find_map(|a| {
                syntax::string_value(*a, src)
                    .and_then(live_host)
                    .or_else(|| live_host_through_a_local(idx, test, *a, src))
            })
            .map(|h| (h, false))
            .or_else(|| {
                let test_text = syntax::text(test.node, src);
                arguments
                    .iter()
                    .map(|a| syntax::text(*a, src))
                    .find(|a| address_from_settings(a) && !settings_replaced(test_text))
                    .map(|a| (a, true))
            });
        let (host, from_settings) = host?;
        // `GatewayClient(settings, http_client=http)` with `http = mock.Mock()`: the requests
        // go to the stand-in whatever the address says.
        if arguments.iter().any(|a| stands_in(idx, test, *a, src)) {
            return None;
        }
        let used = syntax::bound_name(call, src)
            .or_else(|| with_alias(call, src))
            .is_some_and(|name| {
                // Handed to code as it is (`PelicanClient(http)`), or asked to send (`http.post(
                // ...)`); `str(http.base_url)` only reads it.
                idx.within(test.node, kinds::CALL).iter().any(|c| {
                    c.start_byte() > call.end_byte()
                        && syntax::positional_args(*c)
                            .into_iter()
                            .chain(syntax::keyword_args(*c, src).into_iter().map(|(_, v)| v))
                            .any(|a| syntax::text(a, src) == name)
                        || syntax::callee(*c, src)
                            .strip_prefix(name)
                            .is_some_and(|rest| rest.starts_with('.'))
                })
            });
        used.then(|| (format!("{callee}(...)"), host.to_string(), from_settings))
    })
}

/// Whether an argument is a stand-in: a mock, fake or stub written there, or a local of the
/// test bound to one.
fn stands_in(
    idx: &crate::python::NodeIndex<'_>,
    test: &TestFn<'_>,
    argument: tree_sitter::Node<'_>,
    src: &str,
) -> bool {
    let a_stand_in = |text: &str| {
        ["mock", "fake", "stub"]
            .iter()
            .any(|w| syntax::contains_lowercase(text, w))
    };
    if a_stand_in(syntax::text(argument, src)) {
        return true;
    }
    argument.kind() == kinds::IDENTIFIER
        && idx
            .assigned_before(
                Some(test.node),
                syntax::text(argument, src),
                argument.start_byte(),
                src,
            )
            .is_some_and(|value| a_stand_in(syntax::text(value, src)))
}

/// The live host of the settings a test builds in a local and hands to the client: `settings
/// = replace(TEST_SETTINGS, gateway_url="https://sandbox.gateway.fittrack.io")`, then
/// `GatewayClient(settings)`.
fn live_host_through_a_local<'s>(
    idx: &crate::python::NodeIndex<'_>,
    test: &TestFn<'_>,
    argument: tree_sitter::Node<'_>,
    src: &'s str,
) -> Option<&'s str> {
    if argument.kind() != kinds::IDENTIFIER {
        return None;
    }
    let value = idx.assigned_before(
        Some(test.node),
        syntax::text(argument, src),
        argument.start_byte(),
        src,
    )?;
    if value.kind() != kinds::CALL {
        return None;
    }
    syntax::keyword_args(value, src)
        .into_iter()
        .map(|(_, v)| v)
        .chain(syntax::positional_args(value))
        .find_map(|v| syntax::string_value(v, src).and_then(live_host))
}

/// `settings.DD_API_BASE_URL`, `get_settings().connectpay_base_url`, `config.PROVIDER_HOST`:
/// the provider's address as the service's settings give it.
/// `http` of `async with httpx.AsyncClient(...) as http:`.
fn with_alias<'s>(call: tree_sitter::Node<'_>, src: &'s str) -> Option<&'s str> {
    let pattern = call.parent().filter(|p| p.kind() == kinds::AS_PATTERN)?;
    if pattern.named_child(0)?.id() != call.id() {
        return None;
    }
    let alias = pattern.child_by_field_name("alias")?;
    let text = syntax::text(alias, src);
    text.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
        .then_some(text)
}

fn address_from_settings(argument: &str) -> bool {
    let root = argument.split(['.', '(', '[']).next().unwrap_or(argument);
    let last = argument
        .rsplit('.')
        .next()
        .unwrap_or(argument)
        .to_ascii_lowercase();
    // `Config.PELICAN_BASE_URL` of a settings class reads the same address.
    matches!(
        root.to_ascii_lowercase().as_str(),
        "settings" | "get_settings" | "config" | "conf" | "app_settings" | "cfg"
    ) && argument.contains('.')
        && ["url", "host", "endpoint"].iter().any(|w| last.contains(w))
}

/// Whether the test points the settings elsewhere itself (`monkeypatch.setattr(settings, ...)`,
/// `override_settings`, `settings.X = ...`).
fn settings_replaced(test: &str) -> bool {
    [
        "monkeypatch",
        "override_settings",
        "patch.object(settings",
        "patch.dict(",
    ]
    .iter()
    .any(|w| test.contains(w))
        || test.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with("settings.") && l.contains(" = ")
        })
}

/// The host of an `https://` address that is not a local or reserved test one.
pub(super) fn live_host(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("https://")?;
    let host = rest.split(['/', ':', '?']).next()?;
    let local = host == "localhost"
        || host.starts_with("127.")
        || host.starts_with("0.0.0.0")
        || [
            "test",
            "example",
            "invalid",
            "local",
            "localhost",
            "internal",
        ]
        .iter()
        .any(|tld| host.rsplit('.').next() == Some(*tld))
        || ["example.com", "example.org", "example.net", "testserver"]
            .iter()
            .any(|h| host.ends_with(h))
        || ["mock", "fake", "stub"].iter().any(|w| host.contains(w));
    (!host.is_empty() && host.contains('.') && !local).then_some(host)
}

/// A test that builds a client of a real host and runs the code with it.
fn report_built(
    cx: &mut Ctx<'_>,
    test: &TestFn<'_>,
    (built, host, from_settings): &(String, String, bool),
) {
    let key = format!("built:{}", test.facts.name);
    let finding = cx.report_lines(&RULE, syntax::lines(test.outer), key);
    finding.function = test.facts.name.clone();
    let finding = finding
        .arg("test", test.facts.name.clone())
        .arg("built", built.clone())
        .arg("host", host.clone());
    finding
        .note(if *from_settings {
            "from_settings"
        } else {
            "built"
        })
        .note("http");
    if test.partial {
        finding.note("partial");
    }
}
