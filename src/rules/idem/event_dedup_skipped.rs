//! IDEM012 event-dedup-skipped: the handlers a registry dispatches events to (`HANDLERS = {
//! "authorization.expired": _on_expired, "refund.refused": _on_refund_refused}`) are handed the
//! same deliveries, and one of them turns a repeat away (`if not await _first_delivery(conn,
//! event): return`) while another applies the event with no such check. The provider delivers
//! at least once: a redelivered event is applied again by the handler that skips the check, a
//! refused refund is given back to the balance twice.
//!
//! The evidence is the registry's own: a sibling handler that checks the same parameter. A
//! handler whose change is guarded otherwise (a conditional update whose count decides, a
//! unique insert it catches) is left alone.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "IDEM012",
    doc: include_str!("../../../rules/idem/IDEM012.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Words of a call that asks whether a delivery was seen before.
const DEDUP_WORDS: &[&str] = &[
    "first",
    "seen",
    "duplicate",
    "processed",
    "dedup",
    "deduplicate",
    "already",
    "once",
    "claim",
    "new",
];

/// Every finding is a handler of a registry in a file whose code asks whether a delivery is new.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        // The words' text first, one pass each: most files name none of them.
        && s.mentions(&[
            "first", "seen", "duplicate", "processed", "dedup", "already", "once", "claim",
            "_new", "new_",
        ])
        && s.facts
            .functions
            .iter()
            .any(|f| f.callees.iter().any(|c| asks_if_new(c)))
}

/// `_first_delivery`, `already_processed`, `seen_before`, `claim_event`: a call named for
/// telling a repeat.
fn asks_if_new(name: &str) -> bool {
    // A substring first: most names hold none of the words, and are not split.
    DEDUP_WORDS
        .iter()
        .any(|w| syntax::contains_lowercase(name, w))
        && syntax::name_words(name)
            .iter()
            .any(|w| DEDUP_WORDS.contains(&w.as_str()))
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    // Registries are bound to names (`HANDLERS = {...}`): dictionaries are not indexed, the
    // assignments that hold them are.
    let registries = idx
        .all(kinds::ASSIGNMENT)
        .iter()
        .filter_map(|a| a.field("right"))
        .filter(|r| r.kind() == kinds::DICTIONARY);
    for dict in registries {
        let handlers: Vec<Node<'_>> = crate::python::named_children(dict)
            .into_iter()
            .filter(|p| p.kind() == kinds::PAIR)
            .filter_map(|p| p.field("value"))
            .filter(|v| v.kind() == kinds::IDENTIFIER)
            .filter_map(|v| function_named(idx, syntax::text(v, src), src))
            .collect();
        if handlers.len() < 2 {
            continue;
        }
        // The handlers that check a delivery, with the parameter and the check.
        let checking: Vec<(Node<'_>, String, Node<'_>)> = handlers
            .iter()
            .filter_map(|&h| {
                crate::rules::pay::parameters(h, src)
                    .into_iter()
                    .filter(|p| crate::rules::pay::outcome_flag_ignored::names_an_outcome(p))
                    .find_map(|p| dedup_check(idx, h, &p, src).map(|c| (h, p, c)))
            })
            .collect();
        let Some((sibling, param, asked)) = checking.first() else {
            continue;
        };
        for &handler in &handlers {
            if checking.iter().any(|(h, _, _)| h.id() == handler.id())
                || !crate::rules::pay::parameters(handler, src).contains(param)
                || guarded_otherwise(idx, handler, src)
            {
                continue;
            }
            let Some(applies) = first_change(idx, handler, src) else {
                continue;
            };
            let name = facts::qualname(handler, idx, src);
            let finding = cx
                .report(&RULE, applies)
                .arg("handler", name.clone())
                .arg("event", param.clone())
                .arg("sibling", facts::qualname(*sibling, idx, src))
                .arg("check", crate::rules::pay::first_line(*asked, src))
                .arg("applies", crate::rules::pay::first_line(applies, src));
            finding.function = name;
        }
    }
}

/// The file's function called `name` (at module level or a method: the registry names it).
pub(crate) fn function_named<'t>(idx: &NodeIndex<'t>, name: &str, src: &str) -> Option<Node<'t>> {
    idx.functions_named(name, src).next()
}

/// The call in `func` that asks whether `param` was delivered before, when an `if` leaves on its
/// answer: `if not await _first_delivery(conn, event): return`.
fn dedup_check<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    param: &str,
    src: &str,
) -> Option<Node<'t>> {
    idx.within(func, kinds::IF_STATEMENT)
        .iter()
        .find_map(|stmt| {
            let condition = stmt.field("condition")?;
            let leaves = stmt
                .field("consequence")
                .is_some_and(|b| !syntax::block_falls_through(b, src));
            if !leaves {
                return None;
            }
            std::iter::once(condition)
                .chain(idx.within(condition, kinds::CALL).iter().copied())
                .filter(|c| c.kind() == kinds::CALL)
                .find(|c| {
                    asks_if_new(syntax::callee_name(*c, src))
                        && crate::rules::testing::has_word(syntax::text(*c, src), param)
                })
        })
}

/// Whether the handler's change is guarded by the store: an `UPDATE ... WHERE ... status` or a
/// conditional update whose count it reads, an `ON CONFLICT`, a unique violation it catches.
fn guarded_otherwise(idx: &NodeIndex<'_>, func: Node<'_>, src: &str) -> bool {
    crate::rules::idem::applies_by_state(idx, func, src)
        || super::webhook_marker_expires::recorded_durably(syntax::text(func, src))
}

/// The first call of the handler after its reads that changes something: not a read of the
/// store (`fetchval`, `get`), not logging.
fn first_change<'t>(idx: &NodeIndex<'t>, func: Node<'t>, src: &str) -> Option<Node<'t>> {
    idx.within(func, kinds::CALL).iter().copied().find(|&call| {
        if !crate::rules::idem::owned_by(idx, call, Some(func)) {
            return false;
        }
        let callee = syntax::callee(call, src);
        let name = syntax::callee_name(call, src);
        let reads = name.starts_with("fetch")
            || name.starts_with("get")
            || name.starts_with("find")
            || name.starts_with("select")
            || matches!(
                name,
                "scalar" | "scalars" | "first" | "one" | "exists" | "count"
            );
        let text = syntax::text(call, src);
        let raises_answer = name.starts_with("HTTP") || name.ends_with("Error");
        !reads
            && !raises_answer
            && !facts::only_records(callee)
            && (text.contains("UPDATE")
                || text.contains("INSERT")
                || text.contains("DELETE")
                || syntax::name_words(name).iter().any(|w| {
                    matches!(
                        w.as_str(),
                        "release"
                            | "credit"
                            | "debit"
                            | "refund"
                            | "apply"
                            | "book"
                            | "reverse"
                            | "update"
                            | "save"
                            | "create"
                            | "insert"
                            | "mark"
                            | "settle"
                    )
                }))
    })
}
