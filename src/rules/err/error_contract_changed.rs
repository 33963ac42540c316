//! ERR003 error-contract-changed: a function of the change that used to raise on failure now
//! may return `None`, and a caller reads its result without a check.
use crate::index::{ProjectIndex, TaskRef};
use crate::review::{Finding, Severity};
use crate::rules::facts::{self, CallSite, FileFacts, FunctionFacts};
use crate::rules::{Check, Ctx, Gate, Rule};
use crate::source::Side;

pub(crate) static RULE: Rule = Rule {
    id: "ERR003",
    doc: include_str!("../../../rules/err/ERR003.md"),
    check: Check::Change(check),
    gate: Gate::Always,
};

/// A function whose new version may return `None` where its old one could not.
struct Changed {
    path: String,
    /// Exception types the new version catches that the old one let through.
    newly_caught: Vec<String>,
    name: String,
    qualname: String,
    /// `path:line` of the first place that now gives `None`.
    returns_none_at: String,
    on_path: bool,
}

fn check(cx: &mut Ctx<'_>) {
    let Some(here) = cx.facts.filter(|f| !f.is_test) else {
        // A test that reads the result unchecked is asserting on it; ERR003 is about production
        // callers.
        return;
    };
    // Only the names this file calls can matter: ask the change about those, not about every
    // function it holds.
    let mut names: Vec<&str> = here
        .calls
        .iter()
        .filter(|c| !c.checked && c.deref_line.is_some())
        .map(|c| c.name())
        .collect();
    names.sort_unstable();
    names.dedup();
    let changed: Vec<Changed> = names
        .into_iter()
        .flat_map(|name| changed_functions(cx, name))
        .collect();
    outside_callers(cx, here);
    for callee in &changed {
        let sites: Vec<&CallSite> = here
            .calls
            .iter()
            .filter(|c| c.name() == callee.name && !c.checked)
            .filter(|c| *c.function != *callee.qualname)
            .collect();
        // The index is built on first use: only when a caller is there to warn.
        let (project, tasks) = if sites.is_empty() {
            (None, Vec::new())
        } else {
            (
                cx.project(),
                cx.tasks_reaching(&callee.path, &callee.qualname),
            )
        };
        for site in sites {
            let Some(deref) = site.deref_line else {
                continue;
            };
            let caller = here.function(&site.function);
            let on_path = callee.on_path || cx.on_payment_path(caller);
            let finding = cx
                .report_lines(
                    &RULE,
                    (site.line, deref),
                    format!("{} {}", site.callee, callee.returns_none_at),
                )
                .arg("callee", callee.qualname.clone())
                .arg("returns_none_at", callee.returns_none_at.clone())
                .arg("binding", site.binding.as_deref().unwrap_or_default())
                .arg("deref_line", deref.to_string())
                .arg("error_name", facts::none_error(site.deref_subscript).0)
                .arg("error", facts::none_error(site.deref_subscript).1);
            if !on_path {
                finding.severity(Severity::Nit);
            }
            autoretry_lost(finding, project, &tasks, callee);
        }
    }
}

/// Says so when a task that reaches the callee retries on exactly what the callee now turns
/// into `None`.
fn autoretry_lost(
    finding: &mut Finding,
    project: Option<&ProjectIndex>,
    tasks: &[TaskRef],
    callee: &Changed,
) {
    let Some((task, lost)) =
        project.and_then(|p| super::lost_autoretry(p, tasks, &callee.newly_caught))
    else {
        return;
    };
    super::cite_lost_autoretry(finding, &task, &lost);
}

/// Callers in the repository but outside the change that use the result of a function of this
/// file without a check, where the function now may return `None`: code the diff does not show
/// that the change breaks. Found through the project index (repository mode only), reported
/// against the caller's file as a whole.
fn outside_callers(cx: &mut Ctx<'_>, here: &FileFacts) {
    let changed: Vec<Changed> = here
        .functions
        .iter()
        .filter(|f| f.may_return_none())
        .flat_map(|f| changed_functions(cx, &f.name))
        .filter(|c| c.path == here.path)
        .collect();
    if changed.is_empty() {
        return;
    }
    let Some(project) = cx.project() else {
        return;
    };
    let module = project
        .file(&here.path)
        .map_or_else(|| crate::index::module_of(&here.path), |m| m.module.clone());
    for callee in &changed {
        let mut broken: Vec<(String, u32, u32, String, bool)> = project
            .calls_of(&callee.name)
            .filter(|(m, c)| {
                c.module.as_deref() == Some(module.as_str())
                    && !cx.change.files.iter().any(|f| f.path == m.path)
            })
            .filter_map(|(m, c)| {
                Some((
                    m.path.clone(),
                    c.line,
                    c.unchecked_use?,
                    c.binding.as_deref().unwrap_or_default().to_string(),
                    c.unchecked_subscript,
                ))
            })
            .collect();
        broken.sort();
        for (path, line, used, binding, subscript) in broken {
            let on_path = callee.on_path;
            let finding = cx
                .report_outside(&RULE, &path, format!("{} {}", callee.qualname, line))
                .arg("callee", callee.qualname.clone())
                .arg("returns_none_at", callee.returns_none_at.clone())
                .arg("binding", binding)
                .arg("deref_line", used.to_string())
                .arg("error_name", facts::none_error(subscript).0)
                .arg("error", facts::none_error(subscript).1)
                .arg("call_line", line.to_string())
                .note("outside")
                .evidence(&path, line, "evidence_call", Vec::new());
            if !on_path {
                finding.severity(Severity::Nit);
            }
        }
    }
}

/// Functions called `name` whose new version may return `None` where the old one could not.
fn changed_functions(cx: &Ctx<'_>, name: &str) -> Vec<Changed> {
    let mut out = Vec::new();
    for (file, new, func) in cx.change.definitions(Side::New, name) {
        if !func.may_return_none() {
            continue;
        }
        let Some(before) = file
            .old
            .as_ref()
            .and_then(|old| old.function(&func.qualname))
        else {
            continue;
        };
        if before.may_return_none() || !before.none_returns.is_empty() {
            continue;
        }
        out.push(Changed {
            path: new.path.clone(),
            newly_caught: super::newly_caught(func, Some(before)),
            name: func.name.clone(),
            qualname: func.qualname.clone(),
            returns_none_at: format!("{}:{}", new.path, none_lines(func)),
            on_path: on_path(new, func),
        });
    }
    out
}

/// The lines of its `return None`s (`43,46`), or its last line when it falls off the end.
fn none_lines(func: &FunctionFacts) -> String {
    if func.none_returns.is_empty() {
        return func.lines.1.to_string();
    }
    func.none_returns
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn on_path(file: &FileFacts, func: &FunctionFacts) -> bool {
    file.payment_module || func.payment || func.http || func.cache
}
