//! PAY043 answer-dropped-then-done: a call to the provider whose answer says whether the
//! operation succeeded (`FundingResult(status=data["status"])`, `FinalizeResult(success=...)`),
//! with that answer dropped, or read only to be logged, and the operation then recorded as done
//! by its own name (`fund_transfer(...)` then `_mark_funded(payout)`, `finalize_dispute(...)`
//! then `dispute.finalized_at = now`). Providers answer many operations with a 200 that says
//! they failed (a funding rejected for a low balance, a finalize refused for missing evidence):
//! the record says the money moved, and it never did.
//!
//! The callee is a function of the change that builds its answer from the provider's
//! (`FunctionFacts::returns_outcome`) and raises nothing itself: a client that raises on a
//! refusal leaves the caller nothing to read. Left alone: an answer whose outcome is tested
//! anywhere (`if funding.status != "COMPLETED":`), handed on or returned whole, and a record
//! written under a name that is not the operation's.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::facts;
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "PAY043",
    doc: include_str!("../../../rules/pay/PAY043.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// The keys an answer's outcome goes by, as a keyword of the result built or a key of a dict.
const OUTCOME_KEYS: &[&str] = &[
    "status",
    "success",
    "succeeded",
    "ok",
    "approved",
    "state",
    "outcome",
    "result_code",
    "resultCode",
];

/// Every finding is a call in code, not in a test, that pays or talks to a provider's client.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && (s.facts.payment_module
            || s.facts.functions.iter().any(|f| f.payment || f.http)
            || s.mentions(&["client", "gateway", "provider"]))
}

/// The outcome key a returned value carries, taken from something other than a literal:
/// `FundingResult(status=data["status"], ...)`, `{"status": body["state"]}`. A function whose
/// every value `return` carries the same one builds its answer from the provider's
/// (`FunctionFacts::returns_outcome`).
pub(crate) fn outcome_key<'s>(value: Node<'_>, src: &'s str) -> Option<&'s str> {
    let value = if value.kind() == kinds::AWAIT {
        value.named_child(0)?
    } else {
        value
    };
    match value.kind() {
        // Read in place: asked of every `return` of a call in the change.
        kinds::CALL => {
            let args = value.field("arguments")?;
            (0..args.named_child_count() as u32).find_map(|i| {
                let arg = args.named_child(i)?;
                if arg.kind() != kinds::KEYWORD_ARGUMENT {
                    return None;
                }
                let k = syntax::text(arg.field("name")?, src);
                (OUTCOME_KEYS.contains(&k) && !literal(arg.field("value")?)).then_some(k)
            })
        }
        kinds::DICTIONARY => crate::python::named_children(value)
            .into_iter()
            .filter(|p| p.kind() == kinds::PAIR)
            .find_map(|p| {
                let k = syntax::string_value(p.field("key")?, src)?;
                let v = p.field("value")?;
                (OUTCOME_KEYS.contains(&k) && !literal(v)).then_some(k)
            }),
        _ => None,
    }
}

fn literal(value: Node<'_>) -> bool {
    matches!(
        value.kind(),
        kinds::TRUE | kinds::FALSE | kinds::NONE | kinds::STRING | kinds::INTEGER
    )
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    for &call in idx.all(kinds::CALL) {
        let name = idx.callee_name(call, src);
        if name.is_empty() {
            continue;
        }
        // Fakes of the client in tests answer as they are told: the code's own define it.
        let Some(defined) = cx.change.code_definitions_with(cx.side, name, |f| {
            f.returns_outcome.as_deref().filter(|_| !f.raises)
        }) else {
            continue;
        };
        let Some(&(file, func, key)) = defined.first() else {
            continue;
        };
        if defined.iter().any(|(_, _, k)| *k != key) {
            continue;
        }
        let (path, line) = (file.path.clone(), func.lines.0);
        // The call is a statement of its own, or the whole value of a name: asked after the
        // names, since tree-sitter finds a node's parent from the root.
        let mut top = call;
        if let Some(p) = top.parent().filter(|p| p.kind() == kinds::AWAIT) {
            top = p;
        }
        let Some(parent) = top.parent() else {
            continue;
        };
        let bound = match parent.kind() {
            kinds::EXPRESSION_STATEMENT => None,
            kinds::ASSIGNMENT => match parent.field("left") {
                Some(left)
                    if left.kind() == kinds::IDENTIFIER
                        && parent.field("right").is_some_and(|r| r.id() == top.id()) =>
                {
                    Some(syntax::text(left, src))
                }
                _ => continue,
            },
            _ => continue,
        };
        // Asked only of the few calls of a function that answers with an outcome.
        let verbs = past_forms(name);
        if verbs.is_empty() {
            continue;
        }
        let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let read = match bound {
            None => Read::Dropped,
            Some(var) => match outcome_read(idx, func, parent, var, key, src) {
                Some(read) => read,
                None => continue,
            },
        };
        let Some(done) = done_mark(idx, func, parent, &verbs, src) else {
            continue;
        };
        let finding = cx
            .report(&RULE, parent)
            .arg("function", facts::qualname(func, idx, src))
            .arg("callee", syntax::callee(call, src).to_string())
            .arg("key", key.to_string())
            .arg("defined", format!("{path}:{line}"))
            .arg("done", syntax::normalized(done, src))
            .arg("done_line", syntax::lines(done).0.to_string());
        match read {
            Read::Dropped => {}
            Read::Unread => {
                finding.note("unread");
            }
            Read::Logged(at) => {
                finding.arg("read_line", at.to_string()).note("logged");
            }
        }
    }
}

enum Read {
    Dropped,
    Unread,
    /// Read only in the test of an `if` that logs: the line of the test.
    Logged(u32),
}

/// What the function does with `var`, the answer bound at `binding`, after it: `None` when its
/// outcome is tested, or the answer is handed on, returned or read in any other way than by
/// its attributes. What a log line makes of it is left aside.
fn outcome_read(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    binding: Node<'_>,
    var: &str,
    key: &str,
    src: &str,
) -> Option<Read> {
    let after = binding.end_byte();
    let logged_whole = |node: Node<'_>| {
        let mut at = idx.enclosing(node, kinds::CALL);
        while let Some(call) = at.filter(|c| syntax::contains(func, *c)) {
            if facts::only_records(syntax::callee(call, src)) {
                return true;
            }
            at = idx.enclosing(call, kinds::CALL);
        }
        false
    };
    let mut logged = None;
    for name in syntax::descendants(func, &[kinds::IDENTIFIER]) {
        if name.start_byte() < after || syntax::text(name, src) != var || logged_whole(name) {
            continue;
        }
        let attr = name.parent().filter(|p| {
            p.kind() == kinds::ATTRIBUTE && p.field("object").is_some_and(|o| o.id() == name.id())
        })?;
        let attribute = attr.field("attribute").map_or("", |a| syntax::text(a, src));
        let reads_key = attribute == key
            || attribute == "get"
                && attr
                    .parent()
                    .and_then(|c| syntax::positional_args(c).first().copied())
                    .and_then(|a| syntax::string_value(a, src))
                    .is_some_and(|k| k == key);
        if reads_key {
            logged = Some(only_logged(idx, attr, src)?);
        }
    }
    Some(logged.map_or(Read::Unread, Read::Logged))
}

/// The line of the test of the `if` whose body only logs, when `read` is in that test; `None`
/// when it is read anywhere else.
fn only_logged(idx: &NodeIndex<'_>, read: Node<'_>, src: &str) -> Option<u32> {
    let branch = idx.enclosing(read, kinds::IF_STATEMENT)?;
    let condition = branch.field("condition")?;
    if !syntax::contains(condition, read) || branch.field("alternative").is_some() {
        return None;
    }
    let body = branch.field("consequence")?;
    let logs = syntax::statements(body).into_iter().all(|stmt| {
        stmt.kind() == kinds::EXPRESSION_STATEMENT
            && stmt
                .named_child(0)
                .filter(|c| c.kind() == kinds::CALL)
                .is_some_and(|c| facts::only_records(syntax::callee(c, src)))
    });
    logs.then(|| syntax::lines(condition).0)
}

/// The first write after `from` in `func`, not in an `except` of its own, that records the
/// operation done by its own name: `_mark_funded(payout)`, `dispute.finalized_at = now`,
/// `refund.status = RefundStatus.REFUNDED`, `_set_status(d, DisputeStatus.CAPTURED)`.
fn done_mark<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    from: Node<'_>,
    verbs: &[String],
    src: &str,
) -> Option<Node<'t>> {
    let names = |text: &str| {
        text.split(|c: char| !c.is_ascii_alphanumeric())
            .flat_map(|part| part.split('_'))
            .any(|w| verbs.iter().any(|v| w.eq_ignore_ascii_case(v)))
    };
    let in_handler = |node: Node<'_>| {
        idx.enclosing(node, kinds::EXCEPT_CLAUSE)
            .is_some_and(|c| syntax::contains(func, c) && !syntax::contains(c, from))
    };
    let owned = |node: Node<'_>| {
        idx.enclosing(node, kinds::FUNCTION_DEFINITION)
            .is_some_and(|f| f.id() == func.id())
    };
    let assigned = idx
        .within(func, kinds::ASSIGNMENT)
        .iter()
        .copied()
        .find(|a| {
            a.start_byte() >= from.end_byte()
                && a.field("right").is_some_and(|r| !literal_unset(r))
                && a.field("left").is_some_and(|l| {
                    let left = syntax::text(l, src);
                    names(left)
                        || (left.ends_with("status") || left.ends_with("state"))
                            && a.field("right")
                                .is_some_and(|r| names(syntax::text(r, src)))
                })
                && owned(*a)
                && !in_handler(*a)
        });
    let called = idx.within(func, kinds::CALL).iter().copied().find(|c| {
        c.start_byte() >= from.end_byte()
            && {
                let callee = syntax::callee(*c, src);
                let last = callee.rsplit('.').next().unwrap_or(callee);
                names(last) && !facts::only_records(callee)
                    || (last.contains("status") || last.contains("state"))
                        && c.field("arguments")
                            .is_some_and(|a| names(syntax::text(a, src)))
                    // `self._move(payout.id, {FUNDING}, PayoutStatus.FUNDED, funded_at=now)`:
                    // a state of the operation's name handed to a writer of states.
                    || !facts::only_records(callee)
                        && syntax::positional_args(*c).into_iter().any(|a| {
                            a.kind() == kinds::ATTRIBUTE
                                && a.field("object").is_some_and(|o| {
                                    let object = syntax::text(o, src);
                                    syntax::contains_lowercase(object, "status")
                                        || syntax::contains_lowercase(object, "state")
                                })
                                && a.field("attribute")
                                    .is_some_and(|at| names(syntax::text(at, src)))
                        })
            }
            && owned(*c)
            && !in_handler(*c)
    });
    match (assigned, called) {
        (Some(a), Some(c)) => Some(if a.start_byte() <= c.start_byte() {
            a
        } else {
            c
        }),
        (a, c) => a.or(c),
    }
}

/// `None`, `False`: a mark taken away, not made.
fn literal_unset(value: Node<'_>) -> bool {
    matches!(value.kind(), kinds::NONE | kinds::FALSE)
}

/// The words that say an operation named `name` was done: `funded` and `transferred` of
/// `fund_transfer`, `finalized` of `finalize_dispute`, `paid` of `pay_invoice`. Words of asking,
/// making or reading (`get`, `create`, `submit`) say nothing of the outcome.
fn past_forms(name: &str) -> Vec<String> {
    let mut forms = Vec::new();
    for word in syntax::name_words(name) {
        let w = word.as_str();
        if w.len() < 3
            || matches!(
                w,
                "get"
                    | "fetch"
                    | "list"
                    | "retrieve"
                    | "load"
                    | "find"
                    | "lookup"
                    | "check"
                    | "verify"
                    | "validate"
                    | "build"
                    | "make"
                    | "create"
                    | "update"
                    | "post"
                    | "put"
                    | "patch"
                    | "request"
                    | "call"
                    | "run"
                    | "process"
                    | "handle"
                    | "log"
                    | "notify"
                    | "queue"
                    | "enqueue"
                    | "schedule"
                    | "submit"
                    | "send"
                    | "start"
                    | "init"
                    | "open"
                    | "new"
                    | "add"
                    | "set"
                    | "save"
                    | "sync"
                    | "poll"
                    | "status"
                    | "state"
                    | "result"
                    | "api"
                    | "for"
                    | "and"
                    | "the"
            )
        {
            continue;
        }
        if w == "pay" {
            forms.push("paid".to_string());
            continue;
        }
        if let Some(stem) = w.strip_suffix('e') {
            forms.push(format!("{stem}ed"));
        } else if let Some(stem) = w
            .strip_suffix('y')
            .filter(|s| s.as_bytes().last().is_some_and(|b| !b"aeiou".contains(b)))
        {
            forms.push(format!("{stem}ied"));
        } else {
            forms.push(format!("{w}ed"));
            if let Some(&last) = w.as_bytes().last().filter(|b| !b"aeiouwxy".contains(b)) {
                forms.push(format!("{w}{}ed", last as char));
            }
        }
    }
    forms
}

#[cfg(test)]
mod tests {
    use super::past_forms;

    #[test]
    fn past_forms_name_the_operation_done() {
        assert_eq!(
            past_forms("fund_transfer"),
            ["funded", "fundded", "transfered", "transferred"]
        );
        assert_eq!(past_forms("finalize_dispute"), ["finalized", "disputed"]);
        assert_eq!(past_forms("pay_invoice"), ["paid", "invoiced"]);
        assert_eq!(
            past_forms("capturePayment"),
            ["captured", "paymented", "paymentted"]
        );
        assert!(
            past_forms("get_transfer_status")
                .iter()
                .all(|f| f.starts_with("transfer"))
        );
    }
}
