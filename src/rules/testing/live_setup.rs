//! TEST001's readings of a test file's own set-up: fixtures that connect to a live Redis, and
//! Django cache settings that point the tests at a live server. Whatever the code under test
//! reaches, the tests handed these talk to the server.
use super::test_reaches_live_service::RULE;
use super::{Runs, TestFn};
use crate::python::{Fields, kinds, syntax};
use crate::rules::Ctx;
use crate::rules::retry::eval;

/// Tests run with Django's cache pointed at a live server (`@override_settings(CACHES=
/// REDIS_CACHE)`, the dict written there or at module level, with a Redis or Memcached backend
/// or location): every cache call of the code under test goes to that server. On the test or
/// its class; said once, where the code the test calls is not already seen to reach a cache.
pub(super) fn cache_settings(cx: &mut Ctx<'_>, tests: &[TestFn<'_>], reported: &[&str]) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let live = |text: &str| {
        let lower = text.to_ascii_lowercase();
        ["rediscache", "redis://", "rediss://", "memcache"]
            .iter()
            .any(|w| lower.contains(w))
            && !["locmem", "dummycache", "fake"]
                .iter()
                .any(|w| lower.contains(w))
    };
    let mut found = Vec::new();
    for test in tests.iter().filter(|t| t.runs == Runs::Always) {
        if reported.contains(&test.facts.name.as_str()) {
            continue;
        }
        let class = idx
            .enclosing(test.node, kinds::CLASS_DEFINITION)
            .and_then(|c| idx.decorated(c));
        let decorators = syntax::decorators(test.outer)
            .into_iter()
            .chain(class.map(syntax::decorators).unwrap_or_default());
        let setting = decorators.map(|d| syntax::text(d, src)).find_map(|d| {
            let value = d
                .split_once("override_settings(")?
                .1
                .split_once("CACHES=")?
                .1;
            let value = value.split([',', ')']).next().unwrap_or(value).trim();
            let (text, shown) = if value.starts_with('{') {
                (d.to_string(), "{...}")
            } else {
                let constant = eval::module_constant(idx, value, src)?;
                (syntax::text(constant, src).to_string(), value)
            };
            live(&text).then(|| format!("override_settings(CACHES={shown})"))
        });
        if let Some(setting) = setting {
            found.push((test.outer, test.facts.name.clone(), setting));
        }
    }
    for (outer, name, setting) in found {
        let finding = cx.report_lines(
            &RULE,
            syntax::lines(outer),
            format!("settings:cache:{name}"),
        );
        finding.function = name.clone();
        let finding = finding
            .arg("test", name)
            .arg("setting", setting)
            .arg("client", "django.core.cache".to_string());
        finding.note("settings").note("cache");
        finding.point = Some("cache");
    }
}

/// Fixtures of a test file that connect to a live Redis (`redis.Redis.from_url(REDIS_URL)`):
/// every test handed one runs against the server, whatever the code under test reaches. Handed
/// by name to the tests that ask for it; asked for by none, it overrides a fixture of the same
/// name that others are built on (conftest's `kv` under the app's), and so reaches the file's
/// tests through them. One that skips when the server is not there (`pytest.skip` after a
/// failed `ping()`) is a live test on request. Said of the tests, when the code they call is
/// seen to reach the server (`reported`), not again of the fixture.
pub(super) fn fixtures(cx: &mut Ctx<'_>, tests: &[TestFn<'_>], reported: &[&str]) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let mut found = Vec::new();
    for (decorated, def) in super::fixtures(idx, src) {
        let text = syntax::text(decorated, src).to_ascii_lowercase();
        if !super::live_cache(&text) || text.contains("skip") {
            continue;
        }
        let name = syntax::function_name(def, src).to_string();
        let lower = name.to_ascii_lowercase();
        let askers: Vec<&TestFn<'_>> = tests
            .iter()
            .filter(|t| super::parameters(t.node, src).contains(&lower))
            .collect();
        let handed: Vec<&TestFn<'_>> = if askers.is_empty() {
            tests.iter().collect()
        } else {
            askers
        };
        // A `conftest.py` fixture is handed to the tests of other files of the change.
        let elsewhere = if handed.is_empty() && is_conftest(cx.path) {
            users_elsewhere(cx, &lower)
        } else {
            Vec::new()
        };
        let runs = handed.iter().any(|t| t.runs == Runs::Always) || !elsewhere.is_empty();
        let said = handed
            .iter()
            .any(|t| reported.contains(&t.facts.name.as_str()));
        if !runs || said {
            continue;
        }
        let connect = idx
            .within(def, kinds::CALL)
            .iter()
            .find(|c| super::live_cache(&syntax::text(**c, src).to_ascii_lowercase()))
            .map(|c| format!("{}(...)", syntax::callee(*c, src)))
            .unwrap_or_else(|| "redis.Redis(...)".to_string());
        let flushes = ["flushdb(", "flushall("].iter().any(|w| text.contains(w));
        found.push((decorated, name, connect, flushes, elsewhere));
    }
    for (decorated, name, connect, flushes, elsewhere) in found {
        let key = format!("fixture:cache:{name}");
        let finding = cx.report_lines(&RULE, syntax::lines(decorated), key);
        finding.function = name.clone();
        let finding = finding
            .arg("fixture", name)
            .arg("connect", connect)
            .arg("client", "redis".to_string());
        finding.note("fixture").note("cache");
        if flushes {
            finding.note("flush");
        }
        for (path, line, test) in elsewhere.into_iter().take(MAX_USERS_CITED) {
            finding.evidence(&path, line, "evidence_handed", vec![("test_name", test)]);
        }
        finding.point = Some("cache");
    }
}

/// Fixtures of a test file that point the service's settings at a provider's real host
/// (`settings.GOCARDLESS = {"BASE_URL": "https://api-sandbox.gocardless.com", ...}`), asked for
/// by tests that always run, in a file where nothing stands in for the network: every request
/// the code under test makes goes to the provider, with whatever credentials the environment
/// holds. A sandbox is a real host: CI without its token fails, and with one each run makes
/// real objects there.
pub(super) fn provider_settings(cx: &mut Ctx<'_>, tests: &[TestFn<'_>]) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let lower_file = src.to_ascii_lowercase();
    if !lower_file.contains("settings")
        || [
            "respx",
            "responses",
            "httpretty",
            "vcr",
            "cassette",
            "betamax",
            "requests_mock",
            "httpx_mock",
            "httpserver",
            "mocktransport",
        ]
        .iter()
        .any(|w| lower_file.contains(w))
    {
        return;
    }
    let mut found = Vec::new();
    for (decorated, def) in super::fixtures(idx, src) {
        let Some((setting, host)) = idx.within(def, kinds::ASSIGNMENT).iter().find_map(|a| {
            let left = a.field("left")?;
            let target = syntax::text(left, src);
            if !target.starts_with("settings.") {
                return None;
            }
            let right = a.field("right")?;
            let host = syntax::descendants(right, &[kinds::STRING])
                .into_iter()
                .chain(std::iter::once(right))
                .find_map(|s| {
                    syntax::string_value(s, src)
                        .and_then(super::test_reaches_live_service::live_host)
                })?;
            Some((target.to_string(), host.to_string()))
        }) else {
            continue;
        };
        let name = syntax::function_name(def, src).to_string();
        let lower = name.to_ascii_lowercase();
        let askers: Vec<String> = tests
            .iter()
            .filter(|t| t.runs == Runs::Always && super::parameters(t.node, src).contains(&lower))
            .map(|t| t.facts.name.clone())
            .collect();
        if askers.is_empty() {
            continue;
        }
        found.push((decorated, name, setting, host, askers));
    }
    for (decorated, name, setting, host, askers) in found {
        let key = format!("fixture:provider:{name}");
        let finding = cx.report_lines(&RULE, syntax::lines(decorated), key);
        finding.function = name.clone();
        finding
            .arg("fixture", name)
            .arg("setting", setting)
            .arg("host", host)
            .arg("tests", askers.join("`, `"))
            .note("provider_fixture")
            .note("from_settings");
    }
}

/// How many of the tests a `conftest.py` fixture is handed to are cited.
const MAX_USERS_CITED: usize = 3;

fn is_conftest(path: &str) -> bool {
    path.rsplit('/').next() == Some("conftest.py")
}

/// The tests of the change's other test files handed a fixture of `conftest.py`: asking for it
/// by name, or for a fixture of their file built on it (`api(engine, kv)`), and not marked to
/// run on request; as (path, line, name).
fn users_elsewhere(cx: &Ctx<'_>, fixture: &str) -> Vec<(String, u32, String)> {
    let mut out = Vec::new();
    for file in cx.change.side(cx.side) {
        if !file.is_test || file.path == cx.path {
            continue;
        }
        let mut names = vec![fixture];
        names.extend(
            file.functions
                .iter()
                .filter(|f| !f.is_test && f.fixture_params.iter().any(|p| p == fixture))
                .map(|f| f.name.as_str()),
        );
        for f in file.functions.iter().filter(|f| f.is_test) {
            let asks = f.params.split(',').any(|p| names.contains(&p));
            let always = f
                .decorators
                .iter()
                .all(|d| super::runs_by(d) == Runs::Always);
            if asks && always {
                out.push((file.path.clone(), f.lines.0, f.name.clone()));
            }
        }
    }
    out
}
