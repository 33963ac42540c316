//! TEST001 test-reaches-live-service: a test whose code under test, after this change, reaches
//! Redis/a cache or an HTTP service that the test does not mock.
use super::{Mocks, Reach, TestFn, callees_under_test, reach, tests_of};
use crate::python::syntax;
use crate::rules::facts::{FileFacts, FunctionFacts};
use crate::rules::{Check, Ctx, Rule};

pub(crate) static RULE: Rule = Rule {
    id: "TEST001",
    doc: include_str!("../../../rules/test/TEST001.md"),
    check: Check::Tree(check),
};

/// How calls follow one another from a test to the client.
const DEPTH: usize = 3;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Service {
    Cache,
    Http,
}

impl Service {
    fn matches(self, f: &FunctionFacts) -> bool {
        match self {
            Service::Cache => f.cache,
            Service::Http => f.http,
        }
    }

    /// Words a mock of this service is recognised by (patch targets, fixture names).
    fn tokens(self, file: &FileFacts) -> Vec<String> {
        let base: &[&str] = match self {
            Service::Cache => &["redis", "cache"],
            Service::Http => &[
                "httpx",
                "requests",
                "respx",
                "responses",
                "urlopen",
                "aiohttp",
                "transport",
                "session",
                "http_client",
            ],
        };
        let mut out: Vec<String> = base.iter().map(|s| s.to_string()).collect();
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

fn check(cx: &mut Ctx<'_>) {
    if !cx.facts.is_some_and(|f| f.is_test) {
        return;
    }
    for test in tests_of(cx) {
        let mocks = Mocks::of(cx, &test);
        let callees = callees_under_test(cx, &test);
        let found = [Service::Cache, Service::Http]
            .into_iter()
            .find_map(|service| {
                callees.iter().find_map(|callee| {
                    let r = reach(cx, callee, DEPTH, &|f| service.matches(f))?;
                    let replaced = r.path.iter().any(|n| mocks.replace_function(n));
                    (!replaced && !mocks.cover(&service.tokens(r.file))).then_some((service, r))
                })
            });
        if let Some((service, r)) = found {
            report(cx, &test, service, &r);
        }
    }
}

fn report(cx: &mut Ctx<'_>, test: &TestFn<'_>, service: Service, r: &Reach<'_>) {
    let client = match service {
        Service::Cache => cache_clients(r.file)
            .into_iter()
            .next()
            .unwrap_or_else(|| "cache".to_string()),
        Service::Http => r
            .file
            .imports
            .iter()
            .map(|i| i.target.as_str())
            .find(|t| ["httpx", "requests", "aiohttp"].contains(t))
            .unwrap_or("http")
            .to_string(),
    };
    let callee = r.path.first().cloned().unwrap_or_default();
    // The service is part of the key: a test that already reached unmocked HTTP before the
    // change is still news when it now reaches Redis too.
    let (kind, note) = match service {
        Service::Cache => ("cache", "cache"),
        Service::Http => ("http", "http"),
    };
    let key = format!("{kind}:{}", syntax::normalized(test.outer, cx.src()));
    let finding = cx
        .report_lines(&RULE, syntax::lines(test.outer), key)
        .arg("test", test.facts.name.clone())
        .arg("callee", callee)
        .arg("client", client)
        .arg("path", r.path.join(" → "))
        .arg("function", r.function.name.clone());
    finding.note(note);
    if test.partial {
        finding.note("partial");
    }
}
