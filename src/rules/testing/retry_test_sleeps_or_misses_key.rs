//! TEST002 retry-test-sleeps-or-misses-key: a test of retry behaviour that waits through the
//! real backoff, or does not check that every attempt carried the same idempotency key.
use tree_sitter::Node;

use super::{FileMocks, Mocks, TestFn, callees_under_test, tests_of};
use crate::python::{Fields, kinds, syntax};
use crate::rules::reach::{SLEEPS, Trait};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "TEST002",
    doc: include_str!("../../../rules/test/TEST002.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

const DEPTH: usize = 3;

/// Sends or checks an idempotency key.
const KEYED: Trait = Trait {
    name: "keyed",
    holds: |f| f.mentions_idempotency || f.callees.iter().any(|c| mentions_key(c)),
};
const RETRY_WORDS: &[&str] = &[
    "retry",
    "retries",
    "retried",
    "timeout",
    "backoff",
    "backs_off",
    "back_off",
    "transient",
    // `test_poller_rides_out_a_provider_outage`: the attempts go on until it is over.
    "outage",
    // `test_no_answer_after_all_attempts_...`, `test_gives_up_after_max_attempts`.
    "attempts",
    "gives_up",
    // The same in the languages payment teams name their tests in: `test_delai_entre_
    // tentatives`, `test_drei_versuche`, `test_wordt_herhaald`, `test_reintentos`.
    "tentative",
    "tentativa",
    "intento",
    "reessai",
    "versuch",
    "wiederhol",
    "poging",
    "herhaal",
    // `test_reintenta_post_con_la_misma_clave`, `test_riprova`, `test_nytt_forsok`.
    "reintent",
    "riprov",
    "ritent",
    "forsok",
    "ponow",
];
/// Ways a test stops real waiting: a patched sleep, a fake clock. Not frozen or travelling
/// time (`freeze_time`, `time_machine`): they patch what time it is, and `time.sleep` under
/// them still waits.
const CLOCK_MOCKS: &[&str] = &["sleep", "fake_time", "clock"];

/// Only tests are checked.
fn gate(s: &Scan<'_>) -> bool {
    s.facts.is_test
}

fn check(cx: &mut Ctx<'_>) {
    if !cx.facts.is_some_and(|f| f.is_test) {
        return;
    }
    fake_sleep_that_sleeps(cx);
    let file_mocks = FileMocks::of(cx);
    let tests = tests_of(cx);
    // One retry test that pins the key across attempts covers the others that call the same
    // code: the test of running out of attempts need not repeat it. A test that looks at the
    // key of one request pins nothing about a retry.
    let key_pinned: Vec<String> = tests
        .iter()
        .filter(|t| looks_at_key(cx, t) && (is_retry_test(cx, t) || sent_again(t)))
        .flat_map(|t| {
            // Through the helpers of the test's class (`self.retry()`), as the tests it covers
            // are read.
            let mut callees = callees_under_test(cx, t);
            super::through_helpers(cx, t, &mut callees);
            // And a task it runs in its process (`submit_refund.apply(args=[...])`).
            callees.extend(super::tasks_run(cx, t));
            callees
        })
        .map(|c| c.name)
        .chain(pinned_in_other_files(cx))
        .collect();
    let clock_tokens: Vec<String> = CLOCK_MOCKS.iter().map(|s| s.to_string()).collect();
    // A fake clock the code is handed does not make the test's own `time.sleep(1.5)` free: only
    // a patched sleep does.
    let sleep_tokens: Vec<String> = CLOCK_MOCKS
        .iter()
        .filter(|s| **s != "clock")
        .map(|s| s.to_string())
        .collect();
    for test in tests {
        let retry = is_retry_test(cx, &test);
        if !retry && !counts_failed_attempts(cx, &test) {
            // A test of a time limit (a lease, a claim's expiry) that sleeps through it.
            if waits_out_a_limit(cx, &test)
                && let Some(call) = own_sleep(cx, &test)
                && !Mocks::of(cx, &test, &file_mocks).cover(&sleep_tokens)
            {
                let finding = cx
                    .report(&RULE, test.outer)
                    .arg("test", test.facts.name.clone())
                    .arg("own_sleep", call);
                finding.note("waits");
            } else if answers_retryably(syntax::text(test.outer, cx.src()))
                && !denies_a_retry(&test.facts.name.to_ascii_lowercase())
                && !Mocks::of(cx, &test, &file_mocks).cover(&sleep_tokens)
                && let Some((built, param, fixture)) = sleep_left_to_default(cx, &test)
                // A test of a method of the client that never waits (`obtener_pago`, a read
                // that fails once) does not get to the sleep.
                && !only_methods_that_never_wait(cx, &test, &built)
            {
                // A test of something else (`test_onbekende_uitkomst_wordt_nagezocht`) whose
                // provider answers with what the client retries (`httpx.Response(502)`), through
                // a client built without the fake sleep it takes: the retries run, and wait.
                let finding = cx
                    .report(&RULE, test.outer)
                    .arg("test", test.facts.name.clone());
                left_to_default(finding, (built, param, fixture));
            }
            continue;
        }
        let mut callees = callees_under_test(cx, &test);
        super::through_helpers(cx, &test, &mut callees);
        let mocks = Mocks::of(cx, &test, &file_mocks);
        let clock_mocked = mocks.cover(&clock_tokens);
        let library_sleep_only = clock_mocked && mocks.library_sleep_only(&clock_tokens);
        // A task the test runs in its process sleeps as its own code does; whether it sends a
        // key is asked only of what the test calls itself.
        let sleeps = callees
            .iter()
            .chain(super::tasks_run(cx, &test).iter())
            .find_map(|c| c.reach(cx, DEPTH, &SLEEPS))
            .filter(|_| !zeroes_the_delay(syntax::text(test.outer, cx.src())))
            .filter(|r| {
                (!clock_mocked || library_sleep_only && sleeps_with_a_captured_sleep(r))
                    && !r.path.iter().any(|step| mocks.replace_function(step))
                    && !mocks.spec_a_class_on(cx, &r.path)
                    && !mocks.configured_on(&r.path)
                    && !super::a_fixture_specs_its_class(cx, &test, r)
                    && !hands_a_sleep(cx, &test)
                    // `capture_shipment(session, klarna, ...)` with `klarna` a fixture's
                    // `FakeKlarna()`: the fake answers in place of the client that sleeps.
                    && !super::fixture_fake_on(cx, &test, &r.path)
                    // `configure(FakeModernTreasury(lookups=[...]))`: a double of the file
                    // answers in place of the client that sleeps.
                    && !super::a_double_of_the_file_answers_above(cx, &test, r)
            });
        let keyed = callees
            .iter()
            .find_map(|c| c.reach(cx, DEPTH, &KEYED))
            .filter(|r| {
                // `patch.object(tasks.services, "collect_invoice", side_effect=exc)`: a
                // function on the way replaced, and the keyed request never sent.
                !r.path.iter().any(|step| mocks.replace_function(step))
                    && !mocks.spec_a_class_on(cx, &r.path)
                    && !mocks.configured_on(&r.path)
                    && !super::fixture_fake_on(cx, &test, &r.path)
            })
            // A read retried (`get_payment`) sends no key, whatever its sender can carry.
            .filter(|r| {
                !r.path
                    .first()
                    .is_some_and(|f| syntax::named_for_a_read(f) || named_for_a_status(f))
            });
        // `assert len(set(_sent_keys(gateway))) == 1`: a helper of the file may read the keys.
        let checks_key = looks_at_key(cx, &test)
            || cx.facts.is_some_and(|f| {
                f.functions.iter().any(|h| {
                    !h.is_test
                        && h.mentions_idempotency
                        && test.facts.callees.binary_search(&h.name).is_ok()
                })
            });
        // A test of riding out an outage (polls that fail until it is over) retries reads,
        // not the keyed request: only its waiting is read.
        let outage_only = {
            let name = test.facts.name.to_ascii_lowercase();
            name.contains("outage")
                && !RETRY_WORDS
                    .iter()
                    .any(|w| *w != "outage" && name.contains(w))
        };
        // `test_reconcile_adopts_payment_created_before_timeout`: a test of the read that settles
        // an unknown outcome, whose timeouts only set the outcome up.
        // Or one named for what the reconciliation does (`..._is_funded_on_reconcile`).
        let of_a_reconciliation = {
            let words = syntax::name_words(&test.facts.name);
            words.iter().skip(1).any(|w| {
                matches!(
                    w.as_str(),
                    "reconcile" | "reconciles" | "reconciliation" | "reconciler" | "reconciling"
                )
            })
        };
        let misses_key = retry
            && keyed.is_some()
            && !checks_key
            && !outage_only
            && !of_a_reconciliation
            && !callees.iter().any(|c| key_pinned.contains(&c.name))
            // Pinned where the keyed request is retried (`test_retries_timeouts_with_the_same_key`
            // of the client's own file), below what this test calls.
            && !keyed
                .as_ref()
                .is_some_and(|r| pinned_below(cx, &r.path, &key_pinned))
            && !keyed
                .as_ref()
                .is_some_and(|r| retried_where_pinned(cx, &r.path, &key_pinned));
        let own_sleep = own_sleep(cx, &test).filter(|_| !clock_mocked);
        // Built without the fake sleep it takes: whatever else the test fakes, a clock
        // included, the real sleep runs.
        let default_sleep = sleeps
            .is_none()
            .then(|| sleep_left_to_default(cx, &test))
            .flatten();
        if sleeps.is_none() && !misses_key && own_sleep.is_none() && default_sleep.is_none() {
            continue;
        }
        let finding = cx
            .report(&RULE, test.outer)
            .arg("test", test.facts.name.clone());
        if let Some(r) = &sleeps {
            finding.arg("sleeper", r.function.name.clone());
            // The test patches `time.sleep`, which the code took as a default long before.
            finding.note(if clock_mocked {
                "captured_sleep"
            } else {
                "sleep"
            });
        }
        if let Some(call) = own_sleep {
            finding.arg("own_sleep", call).note("own_sleep");
        }
        if let Some(default) = default_sleep {
            left_to_default(finding, default);
        }
        if let Some(r) = keyed.as_ref().filter(|_| misses_key) {
            finding
                .arg("keyed", r.path.first().cloned().unwrap_or_default())
                .note("key");
        }
    }
}

/// Whether all the test calls of the change are methods of `class` (the client built without
/// its sleep) that neither wait nor call another method of the class: `obtener_pago`, a read,
/// beside `crear_pago`, which retries.
fn only_methods_that_never_wait(cx: &Ctx<'_>, test: &TestFn<'_>, class: &str) -> bool {
    let class = class.rsplit('.').next().unwrap_or(class);
    let prefix = format!("{class}.");
    let callees = callees_under_test(cx, test);
    !callees.is_empty()
        && callees.iter().all(|c| {
            let methods: Vec<_> = cx
                .change
                .functions_named(cx.side, &c.name)
                .filter(|(file, f)| !file.is_test && f.qualname.starts_with(&prefix))
                .collect();
            !methods.is_empty()
                && methods.iter().all(|(file, f)| {
                    !f.sleeps
                        && !f.callees.iter().any(|callee| {
                            syntax::names_sleep(callee)
                                || file
                                    .functions
                                    .iter()
                                    .any(|m| m.name == *callee && m.qualname.starts_with(&prefix))
                        })
                })
        })
}

/// Says of a finding that the code under test is built without the sleep it takes: what builds
/// it (`MollieClient`), the parameter (`slaap`), and the fixture that does, if not the test.
fn left_to_default(
    finding: &mut crate::review::Finding,
    (built, param, fixture): (String, String, Option<String>),
) {
    match fixture {
        Some(fixture) => finding.arg("fixture", fixture),
        None => finding.arg("direct", "yes"),
    };
    finding
        .arg("built", built)
        .arg("param", param)
        .note("default_sleep");
}

/// A stand-in for the sleep, in a test file, that also sleeps for real (`async def
/// recording_sleep(seconds): delays.append(seconds); await asyncio.sleep(seconds)`, a
/// `RecordingSleep.__call__` that awaits `asyncio.sleep(seconds)`): every test handed it waits
/// through the real backoff, while it reads as faked. A real sleep of a fixed span
/// (`asyncio.sleep(0)`, which lets the loop run) is left alone.
fn fake_sleep_that_sleeps(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let mut found = Vec::new();
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        let name = syntax::function_name(func, src);
        let class = idx
            .enclosing(func, kinds::CLASS_DEFINITION)
            .and_then(|c| c.field("name"))
            .map(|n| syntax::text(n, src).to_ascii_lowercase());
        let stands_in = if name.starts_with("test") {
            false
        } else if let Some(class) = &class {
            class.contains("sleep") && matches!(name, "__call__" | "sleep" | "__await__")
        } else {
            syntax::names_sleep(name)
        };
        if !stands_in {
            continue;
        }
        let params = crate::rules::pay::positional_parameters(func, src);
        let real = idx.within(func, kinds::CALL).iter().copied().find(|&call| {
            let callee = syntax::callee(call, src);
            matches!(
                callee,
                "asyncio.sleep" | "time.sleep" | "trio.sleep" | "anyio.sleep" | "gevent.sleep"
            ) && idx
                .enclosing(call, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| f.id() == func.id())
                && syntax::positional_args(call).first().is_some_and(|a| {
                    a.kind() == kinds::IDENTIFIER
                        && params.iter().any(|p| *p == syntax::text(*a, src))
                })
        });
        let Some(real) = real else {
            continue;
        };
        let (first, last) = syntax::lines(real);
        if cx.touches_added(first, last) {
            found.push((func, real));
        }
    }
    for (func, real) in found {
        let qualname = crate::rules::facts::qualname(func, idx, src);
        cx.report(&RULE, real)
            .arg("fake", qualname)
            .arg("real", syntax::normalized(real, src))
            .note("fake_sleeps");
    }
}

/// What the retry tests of the change's other test files pin the key of, by their names and
/// their facts: a test named for a retry and for the key (`test_retry_after_lost_answer_
/// reuses_key_and_pays_once`), or one named for a retry that names an idempotency key. The
/// worker's test of which transfers are due need not check again the key the service's test
/// pins.
fn pinned_in_other_files(cx: &Ctx<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for file in cx.change.side(cx.side) {
        if !file.is_test || file.path == cx.path {
            continue;
        }
        for f in &file.functions {
            let words = syntax::name_words(&f.name);
            let retry = words.first().is_some_and(|w| w == "test")
                && RETRY_WORDS.iter().any(|r| f.name.contains(r));
            let keyed = words.iter().any(|w| w == "key" || w == "keys") || f.mentions_idempotency;
            if retry && keyed {
                out.extend(f.callees.iter().cloned());
                // And what the file's helpers it calls call (`create(adyen)` calling
                // `adyen.create_transfer(...)`).
                for helper in file
                    .functions
                    .iter()
                    .filter(|h| !h.is_test && f.callees.binary_search(&h.name).is_ok())
                {
                    out.extend(helper.callees.iter().cloned());
                }
            }
        }
    }
    out
}

/// Whether the keyed request is retried (waited for between attempts) by a function that a
/// test pinning the key across attempts also goes through, a couple of calls below what it
/// calls: `bestellung_erfassen` and the pinned `erfassung_erstatten` both retry through
/// `_post_mit_wiederholung`, which carries whatever key it is handed to every attempt.
fn retried_where_pinned(cx: &Ctx<'_>, path: &[String], pinned: &[String]) -> bool {
    // The retrier is on the way, or under the keyed function (`crear_pago`, named for its key,
    // hands it to `_enviar`, which retries).
    let mut retriers: Vec<String> = path.iter().skip(1).cloned().collect();
    if let Some(last) = path.last() {
        retriers.extend(called_within(cx, std::slice::from_ref(last), 2));
    }
    retriers.retain(|s| waits(cx, s));
    !retriers.is_empty()
        && called_within(cx, pinned, 3)
            .iter()
            .chain(pinned)
            .any(|name| retriers.contains(name))
}

/// The names the code's functions of `names` call, down to `depth` calls.
fn called_within(cx: &Ctx<'_>, names: &[String], depth: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut frontier: Vec<String> = names.to_vec();
    for _ in 0..depth {
        let mut next = Vec::new();
        for name in frontier.drain(..) {
            for (_, f) in cx
                .change
                .functions_named(cx.side, &name)
                .filter(|(file, _)| !file.is_test)
            {
                next.extend(f.callees.iter().filter(|c| !out.contains(c)).cloned());
            }
        }
        next.sort_unstable();
        next.dedup();
        out.extend(next.iter().cloned());
        frontier = next;
    }
    out
}

/// Whether a function of the code waits between attempts: sleeps, or calls the sleep it was
/// handed (`self._schlafen(pause)`, from `schlafen=time.sleep`).
fn waits(cx: &Ctx<'_>, name: &str) -> bool {
    cx.change
        .functions_named(cx.side, name)
        .filter(|(file, _)| !file.is_test)
        .any(|(file, f)| {
            f.sleeps
                || f.sleep_param.is_some()
                || f.callees.iter().any(|c| syntax::names_sleep(c))
                || captured_sleep(file, f)
        })
}

/// Whether a step on the way to the keyed request (`request_payout` → `submit`), or a keyed
/// function the last one calls (`create_transfer`, which the client's retry test pins), is
/// pinned by a retry test that checks the key.
fn pinned_below(cx: &Ctx<'_>, path: &[String], pinned: &[String]) -> bool {
    // Only where the steps above the pinned function neither retry (sleep between attempts)
    // nor make the key: a key numbered by the service's own attempts
    // (`f"{refund.idempotency_key}-{attempt}"`) is none the client's test can pin.
    let above = |step: &String| {
        cx.change
            .functions_named(cx.side, step)
            .filter(|(file, _)| !file.is_test)
            .any(|(_, f)| f.sleeps || f.fresh_key.is_some() || f.returns_fresh.is_some())
    };
    let Some(last) = path.last() else {
        return false;
    };
    if path.iter().any(above) {
        return false;
    }
    if path.iter().skip(1).any(|step| pinned.contains(step)) {
        return true;
    }
    // A keyed request that retries itself (sleeps between its attempts): the retry the test
    // sets up happens there, under the key the client's test pins.
    let keyed = |name: &String| {
        cx.change.functions_named(cx.side, name).any(|(file, f)| {
            !file.is_test
                    && (f.mentions_idempotency || f.http)
                    // `self._sleep(delay)`, the sleep it was handed.
                    && (f.sleeps || f.callees.iter().any(|c| syntax::names_sleep(c)))
        })
    };
    // A few calls down: the step that stores the key on the record (`request_payout`) hands
    // the request to another (`submit`) that calls the client.
    let mut frontier = vec![last.clone()];
    let mut seen: Vec<String> = Vec::new();
    for _ in 0..3 {
        let mut next = Vec::new();
        for name in frontier.drain(..) {
            if seen.contains(&name) {
                continue;
            }
            seen.push(name.clone());
            for (_, f) in cx
                .change
                .functions_named(cx.side, &name)
                .filter(|(file, _)| !file.is_test)
            {
                if f.callees.iter().any(|c| pinned.contains(c) && keyed(c)) {
                    return true;
                }
                next.extend(f.callees.iter().filter(|c| !above(c)).cloned());
            }
        }
        frontier = next;
    }
    false
}

/// Whether the test hands the code a sleep of its own (`submit_batch(..., sleep=fake_sleep)`).
fn hands_a_sleep(cx: &Ctx<'_>, test: &TestFn<'_>) -> bool {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return false;
    };
    // `via`: the test's call of the helper `scope` is, which may leave its fake out.
    let hands = |scope: Node<'_>, via: Option<Node<'_>>| {
        idx.within(scope, kinds::CALL).iter().any(|&call| {
            syntax::keyword_args(call, src).iter().any(|(name, value)| {
                syntax::names_sleep(name)
                    && !via.is_some_and(|via| {
                        real_sleep_unless_given(idx, scope, *value, src)
                            .is_some_and(|param| !gives(via, scope, &param, src))
                    })
            })
        })
    };
    // Or a helper of the file that builds the client with one (`make_client(session)` setting
    // `kwargs.setdefault("sleep", lambda seconds: None)`).
    hands(test.node, None)
        || idx.within(test.node, kinds::CALL).iter().any(|&call| {
            syntax::receiver(call).is_none()
                && super::function_of_file(idx, src, idx.callee_name(call, src))
                    .filter(|helper| helper.id() != test.node.id())
                    .is_some_and(|helper| {
                        hands(helper, Some(call))
                            || ["sleep", "sleeper", "sleep_fn"]
                                .iter()
                                .any(|p| sets_the_keyword(syntax::text(helper, src), p))
                    })
        })
}

/// Whether `call` of `func` gives it `param`: by name, or by its place.
fn gives(call: Node<'_>, func: Node<'_>, param: &str, src: &str) -> bool {
    if syntax::keyword_args(call, src)
        .iter()
        .any(|(name, _)| *name == param)
    {
        return true;
    }
    crate::rules::pay::positional_parameters(func, src)
        .iter()
        .position(|p| *p == param)
        .is_some_and(|at| syntax::positional_args(call).len() > at)
}

/// The parameter of a helper whose fake the sleep it hands is, falling back to the real one
/// when none is given: `sleep=sleep or asyncio.sleep`, `sleep = sleeps.append if sleeps is not
/// None else time.sleep`.
fn real_sleep_unless_given(
    idx: &crate::python::NodeIndex<'_>,
    helper: Node<'_>,
    value: Node<'_>,
    src: &str,
) -> Option<String> {
    let value = if value.kind() == kinds::IDENTIFIER {
        idx.assigned_before(
            Some(helper),
            syntax::text(value, src),
            value.start_byte(),
            src,
        )?
    } else {
        value
    };
    let real = |n: Node<'_>| {
        matches!(
            syntax::text(n, src),
            "time.sleep" | "asyncio.sleep" | "sleep" | "trio.sleep" | "anyio.sleep"
        )
    };
    let tested = match value.kind() {
        kinds::BOOLEAN_OPERATOR => {
            let (left, right) = (value.field("left")?, value.field("right")?);
            real(right).then_some(left)?
        }
        kinds::CONDITIONAL_EXPRESSION => {
            let parts = crate::python::named_children(value);
            let [_, condition, otherwise] = parts[..] else {
                return None;
            };
            real(otherwise).then_some(condition)?
        }
        _ => return None,
    };
    let params = crate::rules::pay::parameters(helper, src);
    params
        .into_iter()
        .find(|p| syntax::has_word(syntax::text(tested, src), p))
}

/// A function or class of the change the test calls that takes the sleep it waits with between
/// attempts (`submit_batch(..., *, sleep: Sleep = asyncio.sleep)`, `LagomClient(..., sleep=...)`)
/// and sleeps with it, called with none: the callee (as the test writes it) and the parameter.
fn sleep_left_to_default(
    cx: &Ctx<'_>,
    test: &TestFn<'_>,
) -> Option<(String, String, Option<String>)> {
    let (idx, src) = (cx.index()?, cx.src());
    // The test itself, the helpers of its file it calls (`make_client(http)`, with the call
    // that reaches them) and the fixtures of its file it takes (`service(repo, http, clock)`).
    let mut scopes: Vec<(Node<'_>, Option<Node<'_>>)> = vec![(test.node, None)];
    for &call in idx.within(test.node, kinds::CALL) {
        if syntax::receiver(call).is_none()
            && let Some(helper) = super::function_of_file(idx, src, idx.callee_name(call, src))
            && helper.id() != test.node.id()
            && !scopes.iter().any(|(s, _)| s.id() == helper.id())
        {
            scopes.push((helper, Some(call)));
        }
    }
    for param in super::parameters(test.node, src) {
        if let Some(fixture) = super::fixture_named(idx, src, &param)
            && !scopes.iter().any(|(s, _)| s.id() == fixture.id())
        {
            scopes.push((fixture, None));
        }
    }
    scopes
        .into_iter()
        .find_map(|(scope, via)| left_to_default_in(cx, idx, scope, via, src))
        .map(|(built, param)| (built, param, None))
        .or_else(|| {
            left_to_default_in_fixtures(cx, test)
                .map(|(built, param, fixture)| (built, param, Some(fixture)))
        })
}

/// `sleep_left_to_default` through the fixtures of the change's other test files (a
/// `conftest.py`) the test takes, and those they are built from: one that builds what takes a
/// sleep (`MollieClient("key", http=http)`) and hands it none. Read from their facts: what
/// they call, and the sleep they hand over (`sleep=...` in `FunctionFacts::mocks`); positional
/// arguments are not in the facts, so only a keyword-only sleep is surely left out. The callee,
/// the parameter and the fixture.
fn left_to_default_in_fixtures(
    cx: &Ctx<'_>,
    test: &TestFn<'_>,
) -> Option<(String, String, String)> {
    let (idx, src) = (cx.index()?, cx.src());
    // The test file's own fixtures are read from their code by `left_to_default_in`.
    let params: Vec<String> = super::parameters(test.node, src)
        .into_iter()
        .filter(|p| super::fixture_named(idx, src, p).is_none())
        .collect();
    let in_the_change = super::change_fixtures(cx, &params, 3)
        .into_iter()
        .filter(|(file, _)| file.path != cx.path)
        .find_map(|(file, fixture)| {
            let hands = |f: &crate::rules::facts::FunctionFacts| {
                f.mocks.as_deref().is_some_and(|m| {
                    m.lines().any(|l| {
                        l.split_once('=')
                            .is_some_and(|(k, _)| syntax::names_sleep(k))
                    })
                })
            };
            if hands(fixture) {
                return None;
            }
            // Or the factory it gives back (`def maak(handler): return MollieClient(http)`).
            let nested = format!("{}.", fixture.qualname);
            let factories: Vec<_> = file
                .functions
                .iter()
                .filter(|f| f.qualname.starts_with(&nested))
                .collect();
            if factories.iter().any(|f| hands(f)) {
                return None;
            }
            std::iter::once(fixture)
                .chain(factories)
                .flat_map(|f| f.callees.iter())
                .find_map(|callee| {
                    let (_, param, place) = takes_a_sleep(cx, callee)?;
                    place
                        .is_none()
                        .then(|| (callee.clone(), param.to_string(), fixture.name.clone()))
                })
        });
    in_the_change.or_else(|| left_to_default_in_repository_fixtures(cx, &params))
}

/// The classes of the change, outside tests, whose constructor takes the sleep by keyword only
/// (`MollieClient(http, *, slaap=asyncio.sleep)`).
fn keyword_sleep_classes<'c>(cx: &Ctx<'c>) -> Vec<&'c str> {
    cx.change
        .functions_named(cx.side, "__init__")
        .filter(|(file, f)| {
            !file.is_test && f.sleep_param.as_deref().is_some_and(|p| p.1.is_none())
        })
        .filter_map(|(_, f)| f.qualname.strip_suffix(".__init__"))
        .collect()
}

/// `left_to_default_in_fixtures` through the repository's conftests the change leaves as they
/// are (their fixtures' code, lowercased): a class of the change that takes its sleep by
/// keyword (`MollieClient(http, *, slaap=asyncio.sleep)`), built there with none
/// (`return mollieclient(http)`).
fn left_to_default_in_repository_fixtures(
    cx: &Ctx<'_>,
    params: &[String],
) -> Option<(String, String, String)> {
    let conftests = super::repository_conftests(cx);
    if conftests.is_empty() {
        return None;
    }
    let classes = keyword_sleep_classes(cx);
    if classes.is_empty() {
        return None;
    }
    params.iter().find_map(|name| {
        let name = name.to_ascii_lowercase();
        let code = conftests
            .iter()
            .find_map(|c| super::fixture_code(c, &name))?;
        classes.iter().find_map(|class| {
            let (_, param, _) = takes_a_sleep(cx, class)?;
            let lower = format!("{}(", class.to_ascii_lowercase());
            let built_bare = code.match_indices(&lower).any(|(at, _)| {
                let args = &code[at + lower.len()..];
                let args = &args[..args.find(')').unwrap_or(args.len())];
                !args.contains(&format!("{}=", param.to_ascii_lowercase())) && !args.contains("**")
            });
            built_bare.then(|| (class.to_string(), param.to_string(), name.clone()))
        })
    })
}

/// The function or class of the change called `name` (`submit_batch`, `LagomClient`, for its
/// `__init__`) that takes the sleep it waits with between attempts and sleeps with it: its
/// facts, the parameter and its place.
fn takes_a_sleep<'c>(
    cx: &Ctx<'c>,
    name: &str,
) -> Option<(&'c crate::rules::facts::FunctionFacts, &'c str, Option<u32>)> {
    // `submit_batch`, `Client.submit_batch`, `LagomClient.__init__`: what the call names.
    let named = |qualname: &str, tail: &str| {
        qualname
            .strip_suffix(tail)
            .is_some_and(|head| head.is_empty() || head.ends_with('.'))
    };
    let constructor = format!("{name}.__init__");
    let (file, def) = cx
        .change
        .functions_named(cx.side, name)
        .chain(cx.change.functions_named(cx.side, "__init__"))
        .find(|(file, f)| {
            !file.is_test
                && f.sleep_param.is_some()
                && (named(&f.qualname, name) || named(&f.qualname, &constructor))
        })?;
    let (param, place) = def.sleep_param.as_deref()?;
    // The constructor stores the sleep; a method of its class waits with it
    // (`await self._sleep(delay)`).
    // Or hands it to tenacity, which waits with it (`Retrying(..., sleep=self._sleep)`).
    // A sleep of another name is called as it was kept (`await self._schlafen(delay)`).
    let waits = |f: &crate::rules::facts::FunctionFacts| {
        f.sleeps
            || f.callees.iter().any(|c| {
                syntax::names_sleep(c)
                    || c == "Retrying"
                    || c == "AsyncRetrying"
                    || c.trim_start_matches('_') == &**param
            })
    };
    let sleeps = if def.name == "__init__" {
        let class = def.qualname.strip_suffix("__init__")?;
        file.functions
            .iter()
            .any(|m| waits(m) && m.qualname.starts_with(class))
    } else {
        waits(def)
    };
    sleeps.then_some((def, &**param, *place))
}

/// Whether the call is made under `pytest.raises` (or `assertRaises`): built to be refused
/// (`MollieClient(http, max_attempts=0)`), it never gets to wait.
fn expected_to_raise(
    idx: &crate::python::NodeIndex<'_>,
    scope: Node<'_>,
    call: Node<'_>,
    src: &str,
) -> bool {
    idx.within(scope, kinds::WITH_STATEMENT)
        .iter()
        .any(|&with| {
            let clause = syntax::with_clause(with, src);
            (clause.contains("raises(") || clause.contains("assertRaises"))
                && with
                    .field("body")
                    .is_some_and(|b| syntax::contains(b, call))
        })
}

/// `sleep_left_to_default` for the calls of one scope; `via`: the test's call of it, when it is
/// a helper (what the test passes it counts as passed).
fn left_to_default_in(
    cx: &Ctx<'_>,
    idx: &crate::python::NodeIndex<'_>,
    scope: Node<'_>,
    via: Option<Node<'_>>,
    src: &str,
) -> Option<(String, String)> {
    idx.within(scope, kinds::CALL).iter().find_map(|&call| {
        // `Client(**kwargs)` after `kwargs = dict(base_url=..., http_client=http)`: the
        // keywords of that dict; any other spread may pass anything.
        let spread = if syntax::has_dict_splat(call) {
            match spread_keywords(idx, scope, call, src) {
                Some(spread) => Some(spread),
                // `make_client(session, **kwargs)` handing on its own `**kwargs`: what the test
                // passes the helper is all that is passed.
                None if via.is_some() && splats_its_own_keywords(idx, call, src) => {
                    Some((Vec::new(), true))
                }
                None => return None,
            }
        } else {
            None
        };
        let name = idx.callee_name(call, src);
        if name.is_empty() || expected_to_raise(idx, scope, call, src) {
            return None;
        }
        let Some((def, param, place)) = takes_a_sleep(cx, name) else {
            return forwarded_by_a_factory(cx, scope, call, name, src);
        };
        let positional = syntax::positional_args(call).len() as u32;
        // `self` takes the first place of a method's parameters.
        let offset = u32::from(def.qualname.contains('.'));
        // A fake that falls back to the real sleep when the test gives none (`sleep=sleep or
        // asyncio.sleep`) is the real sleep for a test that gives none.
        let falls_back = |value: Node<'_>| {
            via.is_some_and(|via| {
                real_sleep_unless_given(idx, scope, value, src)
                    .is_some_and(|p| !gives(via, scope, &p, src))
            })
        };
        let passed = syntax::keyword_arg(call, param, src).is_some_and(|v| !falls_back(v))
            || place.is_some_and(|p| p < positional + offset)
            || spread.as_ref().is_some_and(|(keys, updated)| {
                keys.iter().any(|k| **k == *param)
                    || *updated && via.is_some_and(|v| syntax::keyword_arg(v, param, src).is_some())
            })
            // `kwargs.setdefault("sleep", lambda seconds: None)` in the helper before the spread.
            || spread.is_some() && sets_the_keyword(syntax::text(scope, src), param)
            // Built for one attempt (`max_attempts=1`, `max_pogingen=1`): it never waits.
            || single_attempt(call, src)
            || via.is_some_and(|v| single_attempt(v, src))
            // A helper the test hands a sleep of its own (`make_client(http, sleep=sleep)`).
            || via.is_some_and(|v| {
                syntax::keyword_args(v, src)
                    .iter()
                    .any(|(k, _)| syntax::names_sleep(k))
            });
        (!passed).then(|| (syntax::callee(call, src).to_string(), param.to_string()))
    })
}

/// `make_plaid(backoff_base=0.01)` in a fixture that takes `make_plaid`, a factory fixture of
/// the repository's conftest that hands its keywords on to a class of the change that takes its
/// sleep by keyword (`PlaidTransferClient(..., **options)`): the keywords of this call are all
/// the class gets, and the sleep is not among them. The class and the parameter.
fn forwarded_by_a_factory(
    cx: &Ctx<'_>,
    scope: Node<'_>,
    call: Node<'_>,
    name: &str,
    src: &str,
) -> Option<(String, String)> {
    if syntax::receiver(call).is_some()
        || !super::parameters(scope, src)
            .iter()
            .any(|p| p.eq_ignore_ascii_case(name))
        || single_attempt(call, src)
        || syntax::has_dict_splat(call)
        || syntax::keyword_args(call, src)
            .iter()
            .any(|(k, _)| syntax::names_sleep(k))
    {
        return None;
    }
    let lower = name.to_ascii_lowercase();
    let code = super::repository_conftests(cx)
        .into_iter()
        .find_map(|c| super::fixture_code(c, &lower))?;
    keyword_sleep_classes(cx).into_iter().find_map(|class| {
        let (_, param, _) = takes_a_sleep(cx, class)?;
        let built = format!("{}(", class.to_ascii_lowercase());
        let forwards = code.match_indices(&built).any(|(at, _)| {
            // Read to the end of the fixture's code: the call spans lines, and its arguments
            // make calls of their own (`transport=httpx.MockTransport(fake_bank)`).
            let args = &code[at + built.len()..];
            args.contains("**") && !args.contains(&format!("{}=", param.to_ascii_lowercase()))
        });
        (forwards && syntax::keyword_arg(call, param, src).is_none())
            .then(|| (name.to_string(), param.to_string()))
    })
}

/// Whether a call builds its client for a single attempt: `max_attempts=1`, `retries=0`,
/// `max_pogingen=1`, `max_versuche=1`.
fn single_attempt(call: Node<'_>, src: &str) -> bool {
    syntax::keyword_args(call, src).iter().any(|(k, v)| {
        let v = syntax::text(*v, src);
        let k = k.to_ascii_lowercase();
        let counts = [
            "attempt", "tries", "poging", "versuch", "tentativ", "intento",
        ]
        .iter()
        .any(|w| k.contains(w));
        counts && v == "1" || k.contains("retries") && v == "0"
    })
}

/// Whether code sets a keyword into the dict it spreads: `kwargs.setdefault("sleep", ...)`,
/// `kwargs["sleep"] = ...`.
fn sets_the_keyword(code: &str, param: &str) -> bool {
    ['"', '\''].iter().any(|q| {
        code.contains(&format!(".setdefault({q}{param}{q}"))
            || code.contains(&format!("[{q}{param}{q}] ="))
    })
}

/// Whether `call` spreads the `**kwargs` its own function takes (`WiseClient(..., **kwargs)` in
/// `def make_client(session, **kwargs)`, or in the factory a fixture returns).
fn splats_its_own_keywords(idx: &crate::python::NodeIndex<'_>, call: Node<'_>, src: &str) -> bool {
    let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
        return false;
    };
    // The name under the first child of `kind` in `list`: `kwargs` of `**kwargs`.
    let splatted = |list: Option<Node<'_>>, kind: &str| {
        crate::python::named_children(list?)
            .into_iter()
            .find(|n| n.kind() == kind)
            .and_then(|n| n.named_child(0))
            .map(|name| syntax::text(name, src))
    };
    let own = splatted(func.field("parameters"), kinds::DICTIONARY_SPLAT_PATTERN);
    let spread = splatted(call.field("arguments"), kinds::DICTIONARY_SPLAT);
    own.is_some() && own == spread
}

/// The keywords a `**name` spread of `call` passes, where `scope` binds `name` to `dict(...)`
/// before it, and whether the scope adds to it (`kwargs.update(overrides)`): `None` for any
/// other spread.
fn spread_keywords(
    idx: &crate::python::NodeIndex<'_>,
    scope: Node<'_>,
    call: Node<'_>,
    src: &str,
) -> Option<(Vec<String>, bool)> {
    let made = super::spread_dict(idx, scope, call, src)?;
    // The name the dict is bound to (`kwargs`), for its `.update(...)`.
    let name = made
        .parent()
        .and_then(|a| a.field("left"))
        .map_or("", |l| syntax::text(l, src));
    let keys = syntax::keyword_args(made, src)
        .into_iter()
        .map(|(k, _)| k.to_string())
        .collect();
    let updated = syntax::text(scope, src).contains(&format!("{name}.update("));
    Some((keys, updated))
}

/// Whether a test is about time running out: its name or body (its code's names among it)
/// speaks of a lease, an expiry, a TTL or a stale claim.
fn waits_out_a_limit(cx: &Ctx<'_>, test: &TestFn<'_>) -> bool {
    const LIMITS: &[&str] = &[
        "lease", "expire", "expires", "expired", "expiry", "ttl", "stale", "lapse", "lapses",
    ];
    let words = syntax::name_words(&test.facts.name);
    let text = syntax::text(test.node, cx.src());
    // Words of names too: `monkeypatch.setattr(tasks, "CAPTURE_STALE_AFTER", ...)`.
    words.iter().any(|w| LIMITS.contains(&w.as_str()))
        || text
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| LIMITS.iter().any(|l| w.eq_ignore_ascii_case(l)))
        // A span of the code's shrunk for the test (`monkeypatch.setattr("app.refunds.
        // KEY_TRUSTED_FOR", timedelta(seconds=2))`), whatever its name: what follows waits it
        // out.
        || text.lines().any(|line| {
            (line.contains("setattr(") || line.contains("patch(")) && line.contains("timedelta(")
        })
}

/// A sleep the test itself takes to wait out a backoff (`time.sleep(6)  # first retry_backoff
/// step is 5s`, `await asyncio.sleep(RETRY_DELAY)`): half a second or more, or a delay by name.
/// A shorter one lets a thread or the loop run.
fn own_sleep(cx: &Ctx<'_>, test: &TestFn<'_>) -> Option<String> {
    let (idx, src) = (cx.index()?, cx.src());
    idx.within(test.node, kinds::CALL).iter().find_map(|call| {
        let callee = syntax::callee(*call, src);
        // A bare `sleep` only as the library's (`from time import sleep`), not a fake handed in.
        let library = match callee {
            "time.sleep" | "asyncio.sleep" | "gevent.sleep" => true,
            "sleep" => cx
                .facts
                .and_then(|f| f.import_target("sleep"))
                .is_some_and(|t| matches!(t, "time.sleep" | "asyncio.sleep" | "gevent.sleep")),
            _ => false,
        };
        if !library {
            return None;
        }
        let arg = *syntax::positional_args(*call).first()?;
        let text = syntax::text(arg, src);
        let long = match arg.kind() {
            kinds::INTEGER | kinds::FLOAT => {
                text.replace('_', "").parse::<f64>().is_ok_and(|s| s >= 0.5)
            }
            _ => {
                let lower = text.to_ascii_lowercase();
                ["backoff", "delay", "retry", "interval", "wait", "cooldown"]
                    .iter()
                    .any(|w| lower.contains(w))
            }
        };
        long.then(|| syntax::normalized(*call, src))
    })
}

/// Whether the test looks at the key its code sends: it names idempotency or dedup, or
/// asserts on keys (`assert keys == {f"order-{order_id}:rk1:card"}`, `assert len(set(sent_keys))
/// == 1`), which in a retry test are what the attempts sent, or asserts that every attempt was
/// handed the same thing (`self.assertEqual([c.args[1] for c in submit.call_args_list],
/// [payout] * 3)`), which carries the key.
fn looks_at_key(cx: &Ctx<'_>, test: &TestFn<'_>) -> bool {
    let text = syntax::text(test.node, cx.src());
    let asserts = |line: &&str| {
        let line = line.trim_start();
        line.starts_with("assert ") || line.starts_with("self.assert")
    };
    mentions_key(text)
        || text
            .lines()
            .filter(asserts)
            .any(|line| names_keys(line) || same_for_every_attempt(line))
        || attempts_compared(text)
}

/// `first, second = gateway.sale.await_args_list` then `assert first.kwargs == second.kwargs`
/// (or `calls[0] == calls[1]`, `self.assertEqual(first, second)`): two attempts handed the same arguments, the key among them.
/// Also two requests the HTTP mock recorded (`first, second = responses.calls`, `assert
/// first.request.body == second.request.body`): the same request sent again.
fn attempts_compared(text: &str) -> bool {
    let recorded = |l: &str| {
        l.contains("args_list")
            || l.contains("mock_calls")
            || l.trim_end().ends_with(".calls")
            || l.trim_end().ends_with(".calls)")
    };
    let unpacked: Vec<&str> = text
        .lines()
        .filter(|l| recorded(l))
        .filter_map(|l| l.split_once(" = ").map(|(names, _)| names))
        .flat_map(|names| names.split(','))
        .map(|n| n.trim().trim_start_matches('*'))
        .filter(|n| !n.is_empty())
        .collect();
    let attempt = |side: &str| {
        let side = side.trim();
        let side = [
            ".kwargs",
            ".args",
            ".request.body",
            ".request.content",
            ".request.headers",
            ".request",
        ]
        .iter()
        .find_map(|suffix| side.strip_suffix(suffix))
        .unwrap_or(side);
        unpacked.contains(&side) || side.contains("args_list[") || side.contains(".calls[")
    };
    // `first.kwargs["reference"] == second.kwargs["reference"]`: the argument the key is made
    // from, the same on both.
    let keyed_argument = |side: &str| {
        let side = side.trim();
        let Some((call, argument)) = side
            .split_once(".kwargs[")
            .map(|(c, a)| (c, a.trim_end_matches(']').trim_matches(['"', '\''])))
        else {
            return false;
        };
        (unpacked.contains(&call) || call.contains("args_list["))
            && (names_keys(argument) || argument.contains("reference") || argument == "ref")
    };
    text.lines().any(|line| {
        let line = line.trim_start();
        // `self.assertEqual(first, second)`: unittest's form of the same comparison.
        let sides: Vec<&str> = if let Some(assertion) = line.strip_prefix("assert ") {
            assertion.split(" == ").collect()
        } else if let Some(args) = line
            .strip_prefix("self.assertEqual(")
            .and_then(|a| a.trim_end().strip_suffix(')'))
        {
            args.split(", ").collect()
        } else {
            return false;
        };
        sides.len() >= 2
            && (sides.iter().all(|s| attempt(s)) || sides.iter().take(2).all(|s| keyed_argument(s)))
    })
}

/// `[c.args[1] for c in submit.call_args_list] == [payout] * 3`, `len({...call_args_list})
/// == 1`: one argument on every call.
fn same_for_every_attempt(line: &str) -> bool {
    // `assert wise.create_calls == [str(payout.public_id)] * 2`: what a fake recorded of each
    // attempt, one value for all.
    let recorded = line.contains("call_args_list")
        || line
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| {
                w.ends_with("calls")
                    || w.ends_with("_sent")
                    || w.ends_with("requests")
                    // `stub.request_ids == ["batch-1"] * 2`: the ids each attempt carried.
                    || w.ends_with("_ids")
            });
    recorded && (line.contains("] *") || line.contains("len(set(") || line.contains("len({"))
}

/// `keys`, `gift_keys`, `key`, `sent_key`, `keys_sent` as a word of the text.
fn names_keys(text: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map(str::to_ascii_lowercase)
        .any(|w| w.split('_').any(|part| part == "key" || part == "keys"))
}

fn mentions_key(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    syntax::IDEMPOTENCY_WORDS.iter().any(|w| lower.contains(w)) || lower.contains("dedup")
}

/// Named for retries or timeouts, or makes the first calls fail (`side_effect = [Timeout(), ...]`).
/// A test that makes one call fail once and expects it to raise (`mock(side_effect=
/// httpx.ReadTimeout(...))` then `with pytest.raises(UnknownOutcome):`): what a timeout is
/// reported as, with no second attempt to carry a key.
fn one_failure_raised(text: &str) -> bool {
    // `session.script(PAYOUTS, asyncio.TimeoutError(), ..., aiohttp.ServerDisconnectedError())`:
    // a fake scripted with failures one after another.
    let failures_made = [
        "Error()",
        "Error(\"",
        "Timeout()",
        "Timeout(\"",
        "Exception(",
    ]
    .iter()
    .map(|w| text.matches(w).count())
    .sum::<usize>();
    (text.contains("raises(") || text.contains("assertRaises"))
        && failures_made < 2
        && !text.contains("side_effect=[")
        && !text.contains("side_effect = [")
        && !text.contains("side_effect=(")
        && !text.contains("for _ in range")
        && text.matches("side_effect").count() <= 1
}

/// Whether the test expects the retry itself to be raised (`pytest.raises(Retry)`,
/// `assertRaises(celery.exceptions.Retry)`): a job that asks its queue to run it again.
fn raises_a_retry(text: &str) -> bool {
    ["raises(", "assertRaises("].iter().any(|opener| {
        text.match_indices(opener).any(|(at, _)| {
            let rest = &text[at + opener.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                .unwrap_or(rest.len());
            let name = &rest[..end];
            name.rsplit('.')
                .next()
                .is_some_and(|last| last.ends_with("Retry"))
        })
    })
}

/// A test that asserts a single attempt was made (`assert payout.attempts == 1`,
/// `assert route.call_count == 1`, `send.assert_called_once()`): what one timeout leaves
/// behind, with no second attempt to carry a key.
fn one_attempt_asserted(text: &str) -> bool {
    text.lines().map(str::trim_start).any(|line| {
        let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
        (line.starts_with("assert")
            && [
                "attempts==1",
                "call_count==1",
                "attempt_count==1",
                "await_count==1",
            ]
            .iter()
            .any(|w| compact.contains(w)))
            || compact.contains(".assert_called_once(")
            || compact.contains(".assert_awaited_once(")
    })
}

/// A test that asserts more than one attempt was made (`assert len(attempts) == 4`,
/// `self.assertEqual(len(self.api.requests), 4)`, `assert route.call_count == 3`).
fn many_attempts_asserted(text: &str) -> bool {
    text.lines().map(str::trim_start).any(|line| {
        let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
        let counted = ["attempt", "request", "call", "sent", "post", "hit"]
            .iter()
            .any(|w| compact.contains(w));
        let asserted = line.starts_with("assert") || compact.starts_with("self.assertEqual(");
        let count = compact
            .rsplit_once("==")
            .map(|(_, n)| n)
            .or_else(|| {
                compact
                    .strip_prefix("self.assertEqual(")
                    .and_then(|rest| rest.strip_suffix(')'))
                    .and_then(|args| args.rsplit_once(','))
                    .map(|(_, n)| n)
            })
            .and_then(|n| n.parse::<u32>().ok());
        asserted
            && counted
            && (compact.contains("len(") || compact.contains("_count"))
            && count.is_some_and(|n| n >= 2)
    })
}

/// `self.assertEqual(len(self.api.requests), 4)` after failures set up, in a test not named
/// for a retry: the attempts it counts are a retry all the same, and wait as one does. Whether
/// it pins the key is left to the tests named for it: such a test often proves it at a fake
/// that keeps what it is sent by key.
fn counts_failed_attempts(cx: &Ctx<'_>, test: &TestFn<'_>) -> bool {
    let text = syntax::text(test.outer, cx.src());
    !denies_a_retry(&test.facts.name.to_ascii_lowercase())
        && many_attempts_asserted(text)
        && sets_up_a_failure(text)
}

/// `test_client_errors_are_not_retried`: a lower-case test name for the case where no retry
/// happens.
fn denies_a_retry(name: &str) -> bool {
    [
        "not_retr",
        "no_retr",
        "never_retr",
        "without_retr",
        "dont_retr",
        "doesnt_retr",
        "wont_retr",
        "isnt_retr",
        "not_repeat",
        "never_repeat",
        "not_resen",
        "never_resen",
    ]
    .iter()
    .any(|w| name.contains(w))
        // `test_timeout_asks_customer_to_retry`: the retry is someone else's to make.
        || name.contains("_retr")
            && ["asks_", "tells_", "prompts_", "invites_", "lets_"]
                .iter()
                .any(|w| name.contains(w))
}

fn is_retry_test(cx: &Ctx<'_>, test: &TestFn<'_>) -> bool {
    let name = test.facts.name.to_ascii_lowercase();
    let denied = denies_a_retry(&name);
    // `test_timeout_is_always_sent`: a test of the timeout a request carries, not of what
    // happens when it runs out.
    let words: Vec<&str> = name.split('_').collect();
    let carried = [
        "sent",
        "sends",
        "carries",
        "passed",
        "set",
        "configured",
        "default",
        "forwarded",
        // The same in the languages tests are named in: `test_maak_betaling_stuurt_..._timeout`.
        "stuurt",
        "verstuurt",
        "sendet",
        "envia",
        "envoie",
        "invia",
        "skickar",
        "sender",
        "wysyla",
    ]
    .iter()
    .any(|w| words.contains(w));
    let named = RETRY_WORDS
        .iter()
        .any(|w| name.contains(w) && !(carried && matches!(*w, "timeout" | "transient")));
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return false;
    };
    // Named for the timeout alone (no retry, attempt or backoff in the name), and expecting it
    // to raise after one failure set up: no second attempt to look at.
    // `..._leaves_the_refund_unknown_and_retryable`: what a failure leaves behind for a retry
    // to come, not the retry.
    let said = name.replace("retryable", "").replace("retriable", "");
    let timeout_only = ![
        "retr",
        "attempt",
        "exhaust",
        "again",
        "backoff",
        "backs_off",
        "back_off",
        "repeat",
        "gives_up",
        "give_up",
    ]
    .iter()
    .any(|w| said.contains(w));
    let text = syntax::text(test.outer, src);
    let many = many_attempts_asserted(text);
    // `with pytest.raises(Retry): worker.submit_payout(...)` after one failure set up: the
    // job hands its retry to the queue, and the test sees no second attempt.
    if declines_only(text)
        || (timeout_only || raises_a_retry(text))
            && !many
            && (one_failure_raised(text) || one_attempt_asserted(text))
    {
        return false;
    }

    // A name is not enough where nothing in the test fails: `test_refund_claim_outlives_the_
    // retry_window` checks a TTL, `test_sale_sends_timeout_and_parses_result` one answer.
    if !denied
        && named
        && (sets_up_a_failure(syntax::text(test.outer, src))
            || failure_by_constant(idx, syntax::text(test.outer, src), src))
    {
        return true;
    }
    // `paddle_api.post(CHARGE_URL, status=504, repeat=True)`: every attempt fails, so the code
    // retries until its attempts run out, whatever the test is named for.
    if !denied && repeats_a_failure(text) {
        return true;
    }
    let assigned = idx
        .within(test.node, kinds::ASSIGNMENT)
        .iter()
        .filter(|a| {
            a.field("left")
                .is_some_and(|l| syntax::text(l, src).ends_with("side_effect"))
        })
        .filter_map(|a| a.field("right"));
    let passed = idx
        .within(test.outer, kinds::CALL)
        .iter()
        .filter_map(|c| syntax::keyword_arg(*c, "side_effect", src));
    assigned
        .chain(passed)
        .any(|value| starts_with_exception(value, src))
}

/// A function named for the status it asks about (`stato_pagamento`, `payment_status`,
/// `estado_del_pago`): a read, which sends no key.
fn named_for_a_status(name: &str) -> bool {
    let words = syntax::name_words(name);
    let status = |w: &String| {
        matches!(
            w.as_str(),
            "status" | "stato" | "estado" | "statut" | "stan"
        )
    };
    words.first().is_some_and(status) || words.len() == 2 && words.last().is_some_and(status)
}

/// Whether the test sets the code's delay to nothing (`monkeypatch.setattr(settings,
/// "SAVED_CARD_RETRY_DELAY_SECONDS", 0)`, `settings.RETRY_BACKOFF = 0`): the sleeps take no time.
fn zeroes_the_delay(text: &str) -> bool {
    text.lines().any(|line| {
        let lower = line.trim().to_ascii_lowercase();
        let value = lower
            .trim_end_matches(')')
            .rsplit([',', '='])
            .next()
            .unwrap_or("")
            .trim();
        matches!(value, "0" | "0.0" | "0.")
            && ["delay", "backoff", "sleep", "wait", "interval", "pause"]
                .iter()
                .any(|w| lower.contains(w))
    })
}

/// A mock told to answer a failure on every call (aioresponses' `status=503, repeat=True`).
fn repeats_a_failure(text: &str) -> bool {
    text.lines().any(|line| {
        let line = line.to_ascii_lowercase();
        line.contains("repeat=true")
            && ["status=5", "status=429", "exception="]
                .iter()
                .any(|w| line.contains(w))
    })
}

/// Whether the sleeping function waits with a sleep its class or itself took as a default when
/// the module loaded (`def __init__(self, ..., sleep=time.sleep)`, then `self.sleep(delay)`).
fn sleeps_with_a_captured_sleep(r: &crate::rules::reach::Reach<'_>) -> bool {
    captured_sleep(r.file, r.function)
}

/// Whether a function, or the `__init__` of its class, took a library's sleep as a default.
fn captured_sleep(
    file: &crate::rules::facts::FileFacts,
    f: &crate::rules::facts::FunctionFacts,
) -> bool {
    f.sleep_captured
        || f.qualname.rsplit_once('.').is_some_and(|(class, _)| {
            file.functions.iter().any(|init| {
                init.sleep_captured
                    && init.name == "__init__"
                    && init.qualname.strip_suffix(".__init__") == Some(class)
            })
        })
}

/// `test_unknown_outcome_is_resent_under_the_same_key`: named for a request sent again.
fn sent_again(test: &TestFn<'_>) -> bool {
    let name = test.facts.name.to_ascii_lowercase();
    ["resen", "same_key", "replay", "again"]
        .iter()
        .any(|w| name.contains(w))
}

/// Whether the only failure a test arranges is a decline (`side_effect = card_error()`): the
/// provider's final answer, after which a dunning schedule tries a new payment another day; no
/// request is sent again, and no key has to be the same.
fn declines_only(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    // A direct debit returned unpaid (`insufficient_funds`, `refer_to_payer`) is as final.
    [
        "carderror",
        "card_error",
        "declin",
        "insufficient_funds",
        "refer_to_payer",
    ]
    .iter()
    .any(|w| lower.contains(w))
        && ![
            "timeout",
            "connection",
            "unavailable",
            "transient",
            "ratelimit",
            "rate_limit",
            "status=5",
            "status_code=5",
        ]
        .iter()
        .any(|w| lower.contains(w))
}

/// Whether a test's text arranges something to fail: an exception or an error answer handed to
/// a fake, a raise, a flaky fixture, a 5xx or 429 status (`status=503`, `Response(503, ...)`;
/// a bare `500` is as often an amount), a patched sleep (which only a test of waiting needs).
/// A module constant the test reads that sets up a failure (`psp.queue(*TIMEOUTS)` after
/// `TIMEOUTS = (httpx.ReadTimeout("1"), httpx.ReadTimeout("2"))`).
fn failure_by_constant(idx: &crate::python::NodeIndex<'_>, text: &str, src: &str) -> bool {
    let constants: Vec<&str> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| {
            w.len() > 2
                && w.starts_with(|c: char| c.is_ascii_uppercase())
                && w.bytes().all(|b| !b.is_ascii_lowercase())
        })
        .collect();
    !constants.is_empty()
        && idx.all(kinds::ASSIGNMENT).iter().any(|a| {
            idx.enclosing(*a, kinds::FUNCTION_DEFINITION).is_none()
                && a.field("left")
                    .is_some_and(|l| constants.contains(&syntax::text(l, src)))
                && a.field("right")
                    .is_some_and(|r| sets_up_a_failure(syntax::text(r, src)))
        })
}

/// Whether a test's fake answers with what a client retries: a 5xx or a 429
/// (`httpx.Response(502)`, `status_code=503`), or a timeout or dropped connection raised
/// (`raise httpx.ReadTimeout(...)`).
fn answers_retryably(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    // `MollieClient(..., max_attempts=1)`: one attempt, no wait.
    let compact: String = lower.split_whitespace().collect();
    if [
        "attempts=1,",
        "attempts=1)",
        "retries=0",
        "tries=1,",
        "tries=1)",
    ]
    .iter()
    .any(|w| compact.contains(w))
    {
        return false;
    }
    [
        "response(5",
        "response(429",
        "status=5",
        "status_code=5",
        "status=429",
        "status_code=429",
        "readtimeout(",
        "connecttimeout(",
        "connecterror(",
        "timeoutexception(",
        "servertimeouterror(",
        "clientconnectionerror(",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

fn sets_up_a_failure(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    [
        "side_effect",
        "raise",
        "error",
        "exception",
        "timeout(",
        "timedout",
        "unavailable",
        "fail",
        "flaky",
        "sleep",
        "status=5",
        "status_code=5",
        "status=429",
        "status_code=429",
        "response(5",
        "response(429",
        // Failures a fake is scripted with by name (`script = ["timeout_before", "conflict"]`).
        "timeout_before",
        "timeout_after",
        "conflict",
        "server_error",
        "connect_error",
        "connection_error",
    ]
    .iter()
    .any(|w| lower.contains(w))
        || scripts_a_failed_status(&lower)
}

/// A fake scripted with the provider's answers by status (`fake.capture_script = [503, 503,
/// "timeout", 429]`, `PayoutsStub(503, 500, 201)`): a 429 or a gateway's 502–504 in a list or
/// first among a call's arguments. A bare `500` is as often an amount.
fn scripts_a_failed_status(lower: &str) -> bool {
    ["429", "502", "503", "504"].iter().any(|code| {
        ["[", "(", ", ", ","].iter().any(|before| {
            lower
                .match_indices(&format!("{before}{code}"))
                .any(|(at, m)| {
                    let rest = &lower[at + m.len()..];
                    rest.starts_with([',', ']'])
                })
        })
    })
}

fn starts_with_exception(value: Node<'_>, src: &str) -> bool {
    if value.kind() != kinds::LIST && value.kind() != kinds::TUPLE {
        return false;
    }
    value.named_child(0).is_some_and(|first| {
        let text = syntax::text(first, src);
        let head = text.split('(').next().unwrap_or(text);
        let last = head.rsplit('.').next().unwrap_or(head);
        // Or an answer of a server that failed (`httpx.Response(503, ...)`), as respx scripts it.
        let failed_answer = last.ends_with("Response")
            && first.kind() == kinds::CALL
            && syntax::positional_args(first)
                .first()
                .is_some_and(|status| {
                    let status = syntax::text(*status, src);
                    status == "429" || status.len() == 3 && status.starts_with('5')
                });
        failed_answer
            || ["Error", "Timeout", "Exception", "Unavailable"]
                .iter()
                .any(|s| last.ends_with(s))
    })
}
