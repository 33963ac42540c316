//! RETRY005 retry-budget-exceeds-task-limit: the worst case of a retry loop (every attempt
//! timing out, every backoff sleep) is longer than the time limit of the background task that
//! reaches it, as the repository shows the task. The task is then killed mid-attempt and, with
//! `acks_late` or a broker redelivery, run again from the start.
use super::loops;
use super::sleep_after_last_attempt::worst_case;
use crate::index::{ProjectIndex, TaskRef};
use crate::python::syntax;
use crate::review::Severity;
use crate::rules::facts;
use crate::rules::{Check, Ctx, Gate, Rule, idem};

pub(crate) static RULE: Rule = Rule {
    id: "RETRY005",
    doc: include_str!("../../../rules/retry/RETRY005.md"),
    check: Check::Tree(check),
    gate: Gate::When(super::has_retry_loop),
};

fn check(cx: &mut Ctx<'_>) {
    let Some(idx) = cx.index() else {
        return;
    };
    let src = cx.src();
    let all = loops::retry_loops(idx, src);
    let mut reported = std::collections::BTreeSet::new();
    for l in &all {
        // Async code counts too: a task that reaches it (`asyncio.run(...)`) waits for it
        // within the same limits.
        if !reported.insert(l.func.id()) {
            continue;
        }
        let Some(budget) = worst_case(cx, l) else {
            continue;
        };
        // Only now: the index is built on first use, and most files have no retry budget.
        let Some(project) = cx.project() else {
            return;
        };
        let qualname = facts::qualname(l.func, idx, src);
        let tasks = cx.tasks_reaching(cx.path, &qualname);
        let Some((task, limit_name, limit)) = tasks
            .iter()
            .filter_map(|t| tightest_limit(project, t).map(|(n, v)| (t, n, v)))
            .find(|(_, _, limit)| budget.total > *limit)
        else {
            continue;
        };
        let function = cx.facts.and_then(|f| f.function(&qualname)).cloned();
        let on_path = cx.on_payment_path(function.as_ref());
        let deterministic = function
            .as_ref()
            .is_some_and(|f| idem::key_is_deterministic(cx, f))
            && !idem::key_made_per_attempt::key_varies_in(idx, l.func, src);
        let line = syntax::lines(l.node).0;
        let limit_text = super::eval::seconds(limit);
        let key = format!(
            "{qualname} {} {} {limit_text}",
            task.qualname, budget.formula
        );
        let finding = cx
            .report_lines(&RULE, (line, line), key)
            .arg("function", qualname.clone())
            .arg("worst", budget.formula.clone())
            .arg("task", task.qualname.clone())
            .arg("task_at", format!("{}:{}", task.path, task.decorator.line))
            .arg("limit_name", limit_name)
            .arg("limit", limit_text)
            .evidence(&task.path, task.decorator.line, "evidence_task", Vec::new());
        finding.function = qualname;
        if !budget.with_timeout {
            finding.note("sleeps_only");
        }
        if !on_path {
            finding.severity(Severity::Nit);
        } else if deterministic {
            finding.note("same_key");
        } else {
            finding.severity(Severity::Blocker).note("new_key");
        }
    }
}

/// The smaller of the task's `soft_time_limit` and `time_limit`, in seconds, when the
/// decorator spells it (a literal or a module constant).
fn tightest_limit(project: &ProjectIndex, task: &TaskRef) -> Option<(&'static str, f64)> {
    let module = project.module(&task.module)?;
    ["soft_time_limit", "time_limit"]
        .into_iter()
        .filter_map(|name| {
            let value = project.number(module, task.keyword(name)?)?;
            (value > 0.0).then_some((name, value))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
}
