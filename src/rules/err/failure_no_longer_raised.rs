//! ERR009 failure-no-longer-raised: the change turns an `except` that raised the function's
//! own failure error (`raise SettlementFailed(...) from exc`) into one that logs or records
//! something and returns, while a caller still catches that error to handle the failure. The
//! caller's handler never runs again for this failure: the call returns normally, and the
//! caller goes on to what it does on success (marks the rental settled, the order paid).
//!
//! Read only where the old version is known and the change touched the handler: the old
//! function of the same qualified name caught the same types and raised a named error there;
//! the new handler raises nothing and gives `None` (a bare `return`, or by running on). A
//! handler that returns a value hands the caller something to check, and is left alone; so is
//! one that ends by calling a helper that always raises.
use tree_sitter::Node;

use crate::python::{NodeIndex, kinds, syntax};
use crate::review::Severity;
use crate::rules::facts::{self, FileFacts, FunctionFacts};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "ERR009",
    doc: include_str!("../../../rules/err/ERR009.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a handler of named types in a function of code near the money, one that
/// gives `None` where it raised.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && (s.facts.payment_module || s.facts.functions.iter().any(|f| f.payment || f.http))
        && s.facts
            .functions
            .iter()
            .any(|f| f.caught.iter().any(|t| !broad_name(t)))
}

fn broad_name(name: &str) -> bool {
    matches!(facts::last_name(name), "Exception" | "BaseException")
}

/// A handler of the new version the change touched that raises nothing and gives `None`.
struct Candidate<'t> {
    func: Node<'t>,
    clause: Node<'t>,
    caught: String,
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    let Some(here) = cx.facts else {
        return;
    };
    let candidates: Vec<Candidate<'_>> = idx
        .all(kinds::EXCEPT_CLAUSE)
        .iter()
        .copied()
        .filter(|c| !syntax::is_broad_except(*c, src))
        .filter(|c| {
            let (first, last) = syntax::lines(*c);
            cx.touches_added(first, last)
        })
        .filter(|c| idx.within(*c, kinds::RAISE_STATEMENT).is_empty())
        .filter(|c| gives_none(cx, idx, *c, src))
        .filter_map(|clause| {
            Some(Candidate {
                func: idx.enclosing(clause, kinds::FUNCTION_DEFINITION)?,
                clause,
                caught: super::caught_types(clause, src),
            })
        })
        .collect();
    if candidates.is_empty() {
        return;
    }
    // The callers first: they come from the facts, and most handlers have none that catch a
    // named error, so the old version is parsed only for the few that do.
    let mut found = Vec::new();
    for cand in &candidates {
        let qualname = facts::qualname(cand.func, idx, src);
        let Some(func) = here.function(&qualname) else {
            continue;
        };
        let callers = catching_callers(cx, here, func);
        if callers.is_empty() {
            continue;
        }
        found.push((cand, qualname, func, callers));
    }
    if found.is_empty() {
        return;
    }
    let mut regressions = Vec::new();
    for (cand, qualname, func, callers) in found {
        // A refusal handled apart from the function's other failures needs no old version:
        // the function says how it fails (`raise SettlementFailed(...)` on another path).
        let elsewhere = refusal(cand.clause, src)
            .then(|| raised_elsewhere(idx, cand, src, &callers))
            .flatten();
        if let Some((error, raise_line, caller, at)) = elsewhere {
            let finding = cx
                .report(&RULE, cand.clause)
                .arg("function", qualname.clone())
                .arg("caught", cand.caught.clone())
                .arg("error", error)
                .arg("raise_line", raise_line.to_string())
                .arg("caller", caller.qualname.clone())
                .arg("caller_at", at)
                .note("elsewhere");
            finding.function = qualname;
            continue;
        }
        regressions.push((cand, qualname, func, callers));
    }
    if regressions.is_empty() {
        return;
    }
    let Some(old) = cx.other.get() else {
        return;
    };
    let (old_idx, old_src) = (old.index(), old.text());
    for (cand, qualname, func, callers) in regressions {
        let Some((error, old_line)) = raised_before(old_idx, old_src, &qualname, &cand.caught)
        else {
            continue;
        };
        let Some((caller, at)) = catching(&callers, &error) else {
            continue;
        };
        let finding = cx
            .report(&RULE, cand.clause)
            .arg("function", qualname.clone())
            .arg("caught", cand.caught.clone())
            .arg("error", error)
            .arg("old_line", old_line.to_string())
            .arg("caller", caller.qualname.clone())
            .arg("caller_at", at);
        if !refusal(cand.clause, src) && !func.payment && !here.payment_module {
            finding.severity(Severity::Important);
        }
        finding.function = qualname;
    }
}

type Callers<'c> = Vec<(&'c FunctionFacts, String)>;

/// The caller that catches `error`, and where it calls.
fn catching<'c>(callers: &Callers<'c>, error: &str) -> Option<(&'c FunctionFacts, String)> {
    callers
        .iter()
        .find(|(c, _)| c.caught.iter().any(|t| facts::last_name(t) == error))
        .map(|(c, at)| (*c, at.clone()))
}

/// Whether an `except` catches a refusal by the provider: ERR005's payment refusals, and a
/// gateway's or a card's (`GatewayDeclined`, `CardError`, `TransactionRefused`).
fn refusal(clause: Node<'_>, src: &str) -> bool {
    super::failure_swallowed::catches_a_refusal(clause, src)
        || syntax::except_types(clause).iter().any(|t| {
            let name = facts::last_name(syntax::text(*t, src));
            name == "CardError"
                || syntax::name_words(name)
                    .iter()
                    .any(|w| matches!(w.as_str(), "declined" | "decline" | "refused" | "rejected"))
        })
}

/// A named error the function raises outside this handler, on a path of its own, that one of
/// its callers catches: the error, the line of the `raise`, the caller and where it calls.
fn raised_elsewhere<'c>(
    idx: &NodeIndex<'_>,
    cand: &Candidate<'_>,
    src: &str,
    callers: &Callers<'c>,
) -> Option<(String, u32, &'c FunctionFacts, String)> {
    idx.within(cand.func, kinds::RAISE_STATEMENT)
        .iter()
        .filter(|r| !syntax::contains(cand.clause, **r) && super::owned_by(**r, cand.func, idx))
        .find_map(|r| {
            // Named for a failure (`SettlementFailed`, `PaymentDeclined`): not a check of the
            // input (`InvalidOrder`), which a caller handles apart from the payment's outcome.
            let error = raised_name(*r, src).filter(|e| names_a_failure(e))?;
            let (caller, at) = catching(callers, error)?;
            Some((error.to_string(), syntax::lines(*r).0, caller, at))
        })
}

/// Whether an error's name says the work failed or was refused.
fn names_a_failure(name: &str) -> bool {
    syntax::name_words(name).iter().any(|w| {
        matches!(
            w.as_str(),
            "fail" | "failed" | "failure" | "declined" | "rejected" | "refused" | "unpaid"
        )
    })
}

/// The error a `raise` names (`SettlementFailed` of `raise SettlementFailed(...) from exc`,
/// ERR006's reading); `None` for a bare `raise`, or one of a broad type.
fn raised_name<'s>(raise: Node<'_>, src: &'s str) -> Option<&'s str> {
    super::timeout_read_as_failure::raised_class(raise, src).filter(|name| !broad_name(name))
}

/// Whether the handler gives the caller `None`: it ends in a bare `return` (or `return
/// None`), or runs on past the `try`, and does not end by calling a helper that always raises.
fn gives_none(cx: &Ctx<'_>, idx: &NodeIndex<'_>, clause: Node<'_>, src: &str) -> bool {
    let Some(last) =
        syntax::except_body(clause).and_then(|b| syntax::statements(b).last().copied())
    else {
        return false;
    };
    if last.kind() == kinds::RETURN_STATEMENT {
        return syntax::returns_none(last);
    }
    if idx
        .within(clause, kinds::RETURN_STATEMENT)
        .iter()
        .any(|r| !syntax::returns_none(*r))
    {
        return false;
    }
    syntax::except_body(clause)
        .is_some_and(|b| syntax::block_falls_through_unless(b, src, &mut |t| cx.never_returns(t)))
}

/// The callers of `func` in the change that catch a named error somewhere, with where they
/// call it (`path:line`).
fn catching_callers<'c>(cx: &Ctx<'c>, here: &'c FileFacts, func: &'c FunctionFacts) -> Callers<'c> {
    let mut out = Vec::new();
    for (file, site) in cx.change.calls_named(cx.side, &func.name) {
        if file.is_test || *site.function == *func.qualname {
            continue;
        }
        if !crate::rules::idem::calls_it(cx, (file, site), (here, func)) {
            continue;
        }
        let Some(caller) = file.function(&site.function) else {
            continue;
        };
        if caller.caught.iter().any(|t| !broad_name(t)) {
            out.push((caller, format!("{}:{}", file.path, site.line)));
        }
    }
    out
}

/// The error the old function of this name raised in its handler of the same types, and the
/// line of that `raise`.
fn raised_before(
    idx: &NodeIndex<'_>,
    src: &str,
    qualname: &str,
    types: &str,
) -> Option<(String, u32)> {
    let before = facts::function_by_qualname(idx, src, qualname)?;
    idx.within(before, kinds::EXCEPT_CLAUSE)
        .iter()
        .filter(|c| super::caught_types(**c, src) == types)
        .flat_map(|c| idx.within(*c, kinds::RAISE_STATEMENT).iter())
        .find_map(|r| Some((raised_name(*r, src)?.to_string(), syntax::lines(*r).0)))
}
