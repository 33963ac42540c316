//! PAY012 verified-subset-ignored: a batch of webhook items (or events, or notifications) is
//! filtered down to the ones whose signature checks out (`signed = [i for i in items if
//! is_valid_notification(i, key)]`), and then the whole batch is processed (`for item in
//! items:`). The check only counts: one genuine item lets forged ones through with it.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "PAY012",
    doc: include_str!("../../../rules/pay/PAY012.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding filters a list with a call named for a verification.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && super::verification_answer_taken_as_yes::calls_a_verification(s)
}

/// A call that tells a genuine item from a forged one: `is_valid_notification`,
/// `verify_signature`, `check_hmac`; `valid_signature` too.
fn verifies(name: &str) -> bool {
    super::verification_answer_taken_as_yes::verifies(name)
        || syntax::contains_lowercase(name, "hmac")
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    refused_only_if_none_pass(cx, idx, src);
    for &assignment in idx.all(kinds::ASSIGNMENT) {
        let (Some(left), Some(right)) = (assignment.field("left"), assignment.field("right"))
        else {
            continue;
        };
        if left.kind() != kinds::IDENTIFIER || right.kind() != "list_comprehension" {
            continue;
        }
        let Some((source, check)) = filtered_by_a_check(idx, right, src) else {
            continue;
        };
        let Some(func) = idx.enclosing(assignment, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let kept = syntax::text(left, src);
        let Some(lp) = whole_batch_loop(idx, func, assignment, source, src) else {
            continue;
        };
        if refuses_a_partial_batch(cx, idx, func, (kept, source)) {
            continue;
        }
        cx.report(&RULE, lp.field("right").unwrap_or(lp))
            .arg("source", source.to_string())
            .arg("kept", kept.to_string())
            .arg("check", check)
            .arg("check_line", syntax::lines(assignment).0.to_string());
    }
}

/// `if not any(is_valid_hmac(item, key) for item in items): raise HTTPUnauthorized()` and then
/// `for item in items:`: the batch is turned away only when no item passes, so one genuine item
/// lets forged ones through with it.
fn refused_only_if_none_pass(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    for &stmt in idx.all(kinds::IF_STATEMENT) {
        let (Some(condition), Some(body)) = (stmt.field("condition"), stmt.field("consequence"))
        else {
            continue;
        };
        let Some(any) = condition
            .field("argument")
            .filter(|_| condition.kind() == kinds::NOT_OPERATOR)
            .filter(|a| a.kind() == kinds::CALL && syntax::callee(*a, src) == "any")
        else {
            continue;
        };
        let Some(generator) = any
            .field("arguments")
            .filter(|a| a.kind() == "generator_expression")
            .or_else(|| {
                syntax::positional_args(any)
                    .first()
                    .copied()
                    .filter(|a| a.kind() == "generator_expression")
            })
        else {
            continue;
        };
        let Some((source, check)) = generated_by_a_check(idx, generator, src) else {
            continue;
        };
        let Some(func) = idx.enclosing(stmt, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        if syntax::block_falls_through(body, src) {
            continue;
        }
        let Some(lp) = whole_batch_loop(idx, func, stmt, source, src) else {
            continue;
        };
        // Each item checked again in the loop.
        if lp.field("body").is_some_and(|b| {
            idx.within(b, kinds::CALL)
                .iter()
                .any(|c| verifies(idx.callee_name(*c, src)))
        }) {
            continue;
        }
        cx.report(&RULE, any)
            .arg("source", source.to_string())
            .arg("check", check)
            .arg("check_line", syntax::lines(stmt).0.to_string())
            .arg("loop_line", syntax::lines(lp).0.to_string())
            .note("any");
    }
}

/// `verify(x, key) for x in items`: the list a generator goes over (a plain name) and the
/// check's callee, when the check is all its value is.
fn generated_by_a_check<'s>(
    idx: &NodeIndex<'_>,
    generator: Node<'_>,
    src: &'s str,
) -> Option<(&'s str, String)> {
    let source = iterated_name(generator)?;
    let value = generator.field("body")?;
    if value.kind() != kinds::CALL || !verifies(idx.callee_name(value, src)) {
        return None;
    }
    Some((
        syntax::text(source, src),
        syntax::normalized(value.field("function").unwrap_or(value), src),
    ))
}

/// The plain name a comprehension or a generator goes over: `items` of `... for x in items`.
fn iterated_name(node: Node<'_>) -> Option<Node<'_>> {
    crate::python::named_children(node)
        .into_iter()
        .find(|c| c.kind() == "for_in_clause")?
        .field("right")
        .filter(|s| s.kind() == kinds::IDENTIFIER)
}

/// `[x for x in items if verify(x, key)]`: the list filtered (a plain name) and the check's
/// callee.
fn filtered_by_a_check<'s>(
    idx: &NodeIndex<'_>,
    comprehension: Node<'_>,
    src: &'s str,
) -> Option<(&'s str, String)> {
    let source = iterated_name(comprehension)?;
    let condition = crate::python::named_children(comprehension)
        .into_iter()
        .find(|c| c.kind() == "if_clause")?;
    let check = idx
        .within(condition, kinds::CALL)
        .iter()
        .find(|c| verifies(idx.callee_name(**c, src)))?;
    // `if not verify(...)`: the forged ones are kept, and processing all of them is another
    // matter.
    if syntax::text(condition, src)
        .trim_start_matches("if")
        .trim_start()
        .starts_with("not ")
    {
        return None;
    }
    Some((
        syntax::text(source, src),
        syntax::normalized(check.field("function").unwrap_or(*check), src),
    ))
}

/// A later `for` over the whole list (`for item in items:`) whose body does something with
/// each item (a call), while the filtered list is read only to count or to compare.
fn whole_batch_loop<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    assignment: Node<'t>,
    source: &str,
    src: &str,
) -> Option<Node<'t>> {
    idx.within(func, kinds::FOR_STATEMENT)
        .iter()
        .copied()
        .find(|lp| {
            lp.start_byte() > assignment.end_byte()
            && lp
                .field("right")
                .is_some_and(|r| r.kind() == kinds::IDENTIFIER && syntax::text(r, src) == source)
            && lp
                .field("body")
                .is_some_and(|b| !idx.within(b, kinds::CALL).is_empty())
            // `items = signed` in between makes the loop the filtered one.
            && !idx.within(func, kinds::ASSIGNMENT).iter().any(|a| {
                a.start_byte() > assignment.end_byte()
                    && a.end_byte() < lp.start_byte()
                    && a.field("left")
                        .is_some_and(|l| syntax::text(l, src) == source)
            })
        })
}

/// Whether the function leaves (raises, returns, `abort(401)`) when the filtered list is
/// shorter than the batch: `if len(signed) != len(items): raise HTTPUnauthorized()`. Then every
/// item looped over passed the check. A branch that only logs does not count.
fn refuses_a_partial_batch(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    (kept, source): (&str, &str),
) -> bool {
    let src = cx.src();
    let (kept, source) = (format!("len({kept})"), format!("len({source})"));
    idx.within(func, kinds::IF_STATEMENT).iter().any(|stmt| {
        stmt.field("condition").is_some_and(|c| {
            let text = syntax::text(c, src).replace(' ', "");
            text.contains(&kept) && text.contains(&source)
        }) && stmt.field("consequence").is_some_and(|body| {
            // Flask's and Werkzeug's `abort(...)` raise.
            !syntax::block_falls_through_unless(body, src, &mut |tail| {
                syntax::callee_name(tail.call, src) == "abort" || cx.never_returns(tail)
            })
        })
    })
}
