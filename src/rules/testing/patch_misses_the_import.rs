//! TEST003 patch-misses-the-import: a test patches a client where it is defined
//! (`mocker.patch("fares.flutterwave.FlutterwaveClient")`), while the module under test took its
//! own reference with `from .flutterwave import FlutterwaveClient`. `mock.patch` replaces one
//! name in one module: the module under test keeps the real class, and the test sends real
//! transfers, charges or refunds (or fails in CI) while it reads as mocked.
//!
//! Read where the module that imports the name is part of the change, the test file imports
//! it, and the name is a client of a service (its module talks HTTP, pays, or calls a payment
//! SDK; or its name says client, gateway, API). Left alone: a test that also patches the name
//! where it is used, and a module that reaches the name through its module
//! (`flutterwave.FlutterwaveClient`), which the patch does replace.
use tree_sitter::Node;

use crate::python::{kinds, syntax};
use crate::rules::facts::FileFacts;
use crate::rules::{Check, Ctx, Gate, Rule, Scan};
use crate::source::Side;

pub(crate) static RULE: Rule = Rule {
    id: "TEST003",
    doc: include_str!("../../../rules/test/TEST003.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a `patch("...")` of a test file.
fn gate(s: &Scan<'_>) -> bool {
    s.facts.is_test && s.mentions(&["patch("])
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src, Some(file)) = (cx.index(), cx.src(), cx.facts) else {
        return;
    };
    if !file.is_test || cx.side != Side::New {
        return;
    }
    let targets: Vec<(Node<'_>, &str)> = idx
        .all(kinds::CALL)
        .iter()
        .filter(|c| syntax::callee_name(**c, src) == "patch")
        .filter_map(|&c| {
            let target = syntax::positional_args(c)
                .first()
                .and_then(|a| syntax::string_value(*a, src))?;
            Some((c, target))
        })
        .collect();
    let mut found = Vec::new();
    for &(call, target) in &targets {
        let Some((module, name)) = target.rsplit_once('.') else {
            continue;
        };
        for user in cx.change.side(Side::New) {
            if user.is_test || user.module == module || !imports_the_name(user, module, name) {
                continue;
            }
            if !tested_by(file, &user.module) && !runs_the_command(src, &user.module) {
                continue;
            }
            // Patched where it is used as well.
            let used_here = format!("{}.{name}", user.module);
            if targets
                .iter()
                .any(|&(c, t)| t == used_here && covers(idx, c, call, src))
            {
                continue;
            }
            if !a_client(cx, module, name) {
                continue;
            }
            found.push((call, target.to_string(), user.module.clone(), used_here));
            break;
        }
    }
    let others: Vec<_> = targets
        .iter()
        .filter_map(|&(call, target)| {
            let covering: Vec<(Node<'_>, &str)> = targets
                .iter()
                .copied()
                .filter(|&(c, _)| covers(idx, c, call, src))
                .collect();
            another_importer(cx, file, &covering, target).map(|o| (call, target.to_string(), o))
        })
        .collect();
    // Both readings in one list: the second also names where the client is defined and which
    // test runs the other importer.
    let found =
        found
            .into_iter()
            .map(|(call, target, user, used_here)| (call, target, user, used_here, None))
            .chain(others.into_iter().map(
                |(call, target, (other, used_there, defined, tester))| {
                    (call, target, other, used_there, Some((defined, tester)))
                },
            ));
    for (call, target, user, used_here, other_importer) in found {
        let function = patching_function(idx, call, src);
        let finding = cx
            .report(&RULE, call)
            .arg("target", target)
            .arg("user", user)
            .arg("used_here", used_here)
            .arg("test", function.clone());
        if let Some((defined, tester)) = other_importer {
            finding
                .arg("defined", defined)
                .arg("tester", tester)
                .note("other_importer");
        }
        finding.function = function;
    }
}

/// The test or fixture a patch belongs to; a decorator's patch is its function's.
fn patching_function(idx: &crate::python::NodeIndex<'_>, call: Node<'_>, src: &str) -> String {
    patching_node(idx, call)
        .map(|f| syntax::function_name(f, src).to_string())
        .unwrap_or_default()
}

fn patching_node<'t>(idx: &crate::python::NodeIndex<'t>, call: Node<'_>) -> Option<Node<'t>> {
    idx.enclosing(call, kinds::FUNCTION_DEFINITION).or_else(|| {
        idx.enclosing(call, kinds::DECORATED_DEFINITION)
            .and_then(|d| d.child_by_field_name("definition"))
    })
}

/// A patch where the name is used (`payments.services.get_client`), while another module of
/// the change imports the same name from the same module (`payments.tasks` does `from
/// payments.square_client import get_client`), a test of the change exercises that module, and
/// nothing patches the name there: the tests of that module run the real client. For a
/// conftest, the test is any test file of the change beside or below it.
fn another_importer(
    cx: &Ctx<'_>,
    file: &FileFacts,
    targets: &[(Node<'_>, &str)],
    target: &str,
) -> Option<(String, String, String, String)> {
    let (module, name) = target.rsplit_once('.')?;
    let patched = cx
        .change
        .side(Side::New)
        .find(|f| !f.is_test && f.module == module)?;
    // Where the patched module took the name from.
    let defined = patched.imports.iter().find_map(|i| {
        (i.local == name)
            .then(|| i.target.strip_suffix(name)?.strip_suffix('.'))
            .flatten()
            .map(|from| resolve(&patched.module, from))
    })?;
    if !a_client(cx, &defined, name) {
        return None;
    }
    let conftest = file.path.ends_with("conftest.py");
    let package = file.module.rsplit_once('.').map_or("", |(p, _)| p);
    for other in cx.change.side(Side::New) {
        if other.is_test || other.module == module || !imports_the_name(other, &defined, name) {
            continue;
        }
        // Imported for an annotation (`client: GatewayClient`) or an `isinstance`, and handed
        // the client by its callers: it makes none of its own.
        let calls_it = other.calls.iter().any(|c| {
            c.callee
                .strip_prefix(name)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        });
        if !calls_it {
            continue;
        }
        let used_there = format!("{}.{name}", other.module);
        if targets
            .iter()
            .any(|(_, t)| *t == used_there || *t == format!("{defined}.{name}"))
        {
            continue;
        }
        let tester = if tested_by(file, &other.module) || runs_the_command(cx.src(), &other.module)
        {
            Some(file)
        } else if conftest {
            cx.change.side(Side::New).find(|t| {
                t.is_test
                    && (package.is_empty() || t.module.starts_with(&format!("{package}.")))
                    && tested_by(t, &other.module)
            })
        } else {
            None
        };
        if let Some(tester) = tester {
            return Some((
                other.module.clone(),
                used_there,
                defined,
                tester.path.clone(),
            ));
        }
    }
    None
}

/// Whether `user` imports `name` itself from `module` (`from .flutterwave import
/// FlutterwaveClient` in `fares.payouts`, `from fares.flutterwave import FlutterwaveClient`).
fn imports_the_name(user: &FileFacts, module: &str, name: &str) -> bool {
    user.imports.iter().any(|i| {
        i.local == name
            && i.target
                .strip_suffix(name)
                .and_then(|m| m.strip_suffix('.'))
                .is_some_and(|from| resolve(&user.module, from) == module)
    })
}

/// A module named in a `from` import, relative ones resolved against the importing module's
/// package (`.flutterwave` in `fares.payouts` is `fares.flutterwave`).
fn resolve(importer: &str, from: &str) -> String {
    let dots = from.len() - from.trim_start_matches('.').len();
    if dots == 0 {
        return from.to_string();
    }
    let mut package: Vec<&str> = importer.split('.').collect();
    for _ in 0..dots {
        package.pop();
    }
    let rest = &from[dots..];
    if rest.is_empty() {
        package.join(".")
    } else if package.is_empty() {
        rest.to_string()
    } else {
        format!("{}.{rest}", package.join("."))
    }
}

/// Whether the patch `other` is in force where `patch` is: made by the same test, or by a
/// fixture, a helper or the module, which may serve every test (a patch in another test does
/// not).
fn covers(idx: &crate::python::NodeIndex<'_>, other: Node<'_>, patch: Node<'_>, src: &str) -> bool {
    let (Some(by), Some(test)) = (patching_node(idx, other), patching_node(idx, patch)) else {
        // At the module's or a class's level: in force for every test.
        return true;
    };
    if by.id() == test.id() {
        return true;
    }
    let name = syntax::function_name(by, src);
    let fixture = idx.decorated(by).is_some_and(|d| {
        syntax::decorators(d)
            .iter()
            .any(|dec| syntax::text(*dec, src).contains("fixture"))
    });
    // A fixture or `setUp` serves the tests that ask for it; a helper, those that call it.
    fixture
        || matches!(name, "setUp" | "setup_method" | "asyncSetUp")
        || syntax::text(test, src).contains(&format!("{name}("))
}

/// Whether the test runs `module` as a Django management command
/// (`call_command("renew_subscriptions")` of `billing.management.commands.renew_subscriptions`).
fn runs_the_command(src: &str, module: &str) -> bool {
    let Some((package, command)) = module.rsplit_once('.') else {
        return false;
    };
    package.ends_with(".management.commands")
        && (src.contains(&format!("call_command(\"{command}\""))
            || src.contains(&format!("call_command('{command}'")))
}

/// Whether the test file imports `module` (or something in it, or it from its package).
fn tested_by(test: &FileFacts, module: &str) -> bool {
    test.imports.iter().any(|i| {
        let target = resolve(&test.module, &i.target);
        target == module
            || target.starts_with(&format!("{module}."))
            || module.starts_with(&format!("{target}."))
                && module.rsplit('.').next() == Some(i.local.as_str())
    })
}

/// Whether `module.name` is a client of a service: its module in the change talks HTTP, pays or
/// calls a payment SDK, or the name says so.
fn a_client(cx: &Ctx<'_>, module: &str, name: &str) -> bool {
    let talks = cx.change.side(Side::New).any(|f| {
        f.module == module
            && (f.payment_module || f.functions.iter().any(|g| g.http || g.payment || g.sdk))
    });
    talks
        || syntax::name_words(name).iter().any(|w| {
            matches!(
                w.as_str(),
                "client" | "gateway" | "api" | "processor" | "provider" | "session"
            )
        })
}
