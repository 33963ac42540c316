//! RETRY007 retry-without-bound: a `while True:` loop that sends a request again after a
//! failure, leaves on success, and has no exit that counts its attempts or watches a deadline,
//! or has one that only holds beside another condition (`if attempt >= max_attempts and
//! failure.status_code != 429: raise`): for the failures that condition lets by, the loop
//! never ends. The worker is held for as long as the provider keeps answering so (a rate limit
//! that lasts, an outage), every attempt sends the payment again, and nothing reports it.
//!
//! Read in one function: the loop sleeps between attempts, an `except` or a status test goes
//! round, and a `return` or `break` leaves on success (a worker's main loop, which never leaves,
//! is not a retry). Left alone: an exit on a counter or a deadline that is enough on its own
//! (`if attempt >= N: raise`, `... or time.monotonic() > deadline`).
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "RETRY007",
    doc: include_str!("../../../rules/retry/RETRY007.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a `while True:` loop of code that sleeps.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && (s.mentions(&["while True", "while 1"]) && s.mentions(&["sleep"])
            || s.facts.functions.iter().any(|f| f.http || f.payment)
                && s.mentions(&["tenacity", "backoff.on_"]))
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    policies_without_a_stop(cx);
    for &lp in idx.all(kinds::WHILE_STATEMENT) {
        let forever = lp
            .field("condition")
            .is_some_and(|c| matches!(syntax::text(c, src), "True" | "1"));
        let (Some(body), Some(func)) = (
            lp.field("body"),
            idx.enclosing(lp, kinds::FUNCTION_DEFINITION),
        ) else {
            continue;
        };
        if !forever || !retries_one_request(idx, lp, body, src) {
            continue;
        }
        let counters = counted(idx, body, src);
        let exits: Vec<Node<'_>> = idx
            .within(body, kinds::IF_STATEMENT)
            .iter()
            .copied()
            .filter(|s| own(idx, *s, lp) && crate::rules::retry::loops::exits(idx, *s))
            .filter_map(|s| s.field("condition"))
            .collect();
        let bounds = |n: Node<'_>| bounds(n, &counters, src);
        // An exit that counts or watches the clock on its own side of an `or`: bounded, unless
        // a branch goes round before it is reached.
        let bounded: Vec<Node<'_>> = exits
            .iter()
            .copied()
            .filter(|c| syntax::operands(*c, "or").into_iter().any(&bounds))
            .collect();
        if let Some(bound) = bounded.first() {
            if let Some((branch, branch_line)) = skips_the_bound(idx, lp, &bounded, &bounds, src) {
                let function = crate::rules::facts::qualname(func, idx, src);
                cx.report(&RULE, lp)
                    .arg("function", function)
                    .arg("loop_line", syntax::lines(lp).0.to_string())
                    .arg("branch", branch)
                    .arg("branch_line", branch_line.to_string())
                    .arg("condition", syntax::normalized(*bound, src))
                    .note("skipped");
            }
            continue;
        }
        // Bounded only beside another condition: `attempt >= max and status != 429`.
        let beside = exits.iter().find_map(|c| {
            syntax::operands(*c, "or").into_iter().find_map(|operand| {
                let parts = syntax::operands(operand, "and");
                let count = parts.iter().copied().find(|p| bounds(*p))?;
                let other = parts.iter().copied().find(|p| p.id() != count.id())?;
                Some((operand, other))
            })
        });
        let function = crate::rules::facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, lp)
            .arg("function", function)
            .arg("loop_line", syntax::lines(lp).0.to_string());
        match beside {
            Some((condition, other)) => {
                finding
                    .arg("condition", syntax::normalized(condition, src))
                    .arg("other", syntax::normalized(other, src))
                    .note("beside");
            }
            None if counters.is_empty() => {
                finding.note("uncounted");
            }
            None => {
                finding
                    .arg("counter", counters.join(", "))
                    .note("counted_unread");
            }
        }
    }
}

/// A `continue` of the loop that no bounded exit comes before, under an `if` whose test is no
/// bound itself or in an `except`: `if status_code == 429: sleep(delay); retry_count += 1;
/// continue` above `if not should_retry(status_code, retry_count): raise`. The branch as
/// shown (its test, or `except RateLimited`), and its line.
/// tenacity's `Retrying(...)`, `AsyncRetrying(...)`, `@retry(...)` with no `stop=` (its
/// default is never to stop), and backoff's `on_exception`/`on_predicate` with neither
/// `max_tries` nor `max_time` (nor does it): in a file that sends requests, the policy retries
/// them for as long as the failure lasts.
fn policies_without_a_stop(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let tenacity = src.contains("tenacity");
    let backoff = src.contains("backoff.on_");
    if !tenacity && !backoff
        || !cx
            .facts
            .is_some_and(|f| f.functions.iter().any(|f| f.http || f.payment))
    {
        return;
    }
    let mut found: Vec<(Node<'_>, &'static str)> = Vec::new();
    for &call in idx.all(kinds::CALL) {
        let callee = syntax::callee(call, src);
        let name = syntax::callee_name(call, src);
        let receiver = callee.strip_suffix(name).unwrap_or("");
        let library = if tenacity
            && (matches!(name, "Retrying" | "AsyncRetrying")
                || name == "retry" && matches!(receiver, "" | "tenacity."))
        {
            "tenacity"
        } else if backoff && matches!(callee, "backoff.on_exception" | "backoff.on_predicate") {
            "backoff"
        } else {
            continue;
        };
        let keywords = syntax::keyword_args(call, src);
        let bounded = syntax::has_dict_splat(call)
            || keywords.iter().any(|(k, _)| match library {
                "tenacity" => *k == "stop",
                _ => matches!(*k, "max_tries" | "max_time"),
            });
        // `retry(...)` of tenacity with nothing a policy takes is not tenacity's.
        let a_policy = library != "tenacity"
            || name != "retry"
            || keywords
                .iter()
                .any(|(k, _)| matches!(*k, "wait" | "retry" | "reraise" | "before_sleep"));
        if !bounded && a_policy {
            found.push((call, library));
        }
    }
    for (call, library) in found {
        let function = idx
            .enclosing(call, kinds::FUNCTION_DEFINITION)
            .or_else(|| {
                // `@retry(...)` over the function it retries.
                call.parent()
                    .filter(|p| p.kind() == kinds::DECORATOR)
                    .and_then(|d| d.parent())
                    .and_then(|d| d.field("definition"))
            })
            .map(|f| crate::rules::facts::qualname(f, idx, src))
            .unwrap_or_default();
        let name = syntax::callee(call, src);
        cx.report(&RULE, call)
            .arg("function", function)
            .arg("call", format!("{name}(...)"))
            .note(library);
    }
}

fn skips_the_bound(
    idx: &NodeIndex<'_>,
    lp: Node<'_>,
    bounded: &[Node<'_>],
    bounds: &impl Fn(Node<'_>) -> bool,
    src: &str,
) -> Option<(String, u32)> {
    // `continue` is not among the kinds the index keeps: the loop's subtree is walked.
    syntax::descendants(lp, &[kinds::CONTINUE_STATEMENT])
        .into_iter()
        .filter(|c| own(idx, *c, lp))
        .find_map(|c| {
            // A bounded exit met on the way: its `if` ends before the `continue`, in a block
            // that holds it.
            let passed = bounded.iter().any(|condition| {
                condition.parent().is_some_and(|stmt| {
                    stmt.end_byte() <= c.start_byte()
                        && stmt
                            .parent()
                            .is_some_and(|block| syntax::contains(block, c))
                })
            });
            if passed {
                return None;
            }
            let inside = |n: &Node<'_>| syntax::contains(lp, *n) && n.id() != lp.id();
            let branch = idx.enclosing(c, kinds::IF_STATEMENT).filter(inside);
            let handler = idx.enclosing(c, kinds::EXCEPT_CLAUSE).filter(inside);
            match (branch, handler) {
                (Some(b), h) if h.is_none_or(|h| h.start_byte() < b.start_byte()) => {
                    let condition = b.field("condition")?;
                    let guarded = syntax::operands(condition, "and").into_iter().any(bounds);
                    (!guarded).then(|| (syntax::normalized(condition, src), syntax::lines(b).0))
                }
                (_, Some(h)) => {
                    let types = crate::rules::err::caught_types(h, src);
                    let shown = if types.is_empty() {
                        "except:".to_string()
                    } else {
                        format!("except {types}")
                    };
                    Some((shown, syntax::lines(h).0))
                }
                _ => None,
            }
        })
}

/// Whether the loop retries one request: it sleeps, a `try` or a test goes round after a
/// failure, and a `return` or `break` of its own leaves once the request worked.
fn retries_one_request(idx: &NodeIndex<'_>, lp: Node<'_>, body: Node<'_>, src: &str) -> bool {
    let sleeps = idx
        .within(body, kinds::CALL)
        .iter()
        .any(|c| own(idx, *c, lp) && syntax::names_sleep(syntax::callee_name(*c, src)));
    let tries: Vec<Node<'_>> = idx
        .within(body, kinds::TRY_STATEMENT)
        .iter()
        .copied()
        .filter(|t| own(idx, *t, lp))
        .collect();
    // Success leaves from the `try` (its body or its `else`): `return response.json()`.
    let leaves = tries.iter().any(|t| {
        crate::python::named_children(*t)
            .into_iter()
            .filter(|c| c.kind() != kinds::EXCEPT_CLAUSE && c.kind() != kinds::FINALLY_CLAUSE)
            .any(|part| {
                [kinds::RETURN_STATEMENT, kinds::BREAK_STATEMENT]
                    .iter()
                    .any(|k| idx.within(part, k).iter().any(|n| own(idx, *n, lp)))
            })
    });
    sleeps && leaves
}

/// Whether `node` belongs to loop `lp` itself: not to a function or a loop nested in it.
fn own(idx: &NodeIndex<'_>, node: Node<'_>, lp: Node<'_>) -> bool {
    let func = idx.enclosing(node, kinds::FUNCTION_DEFINITION);
    let outer = idx.enclosing(lp, kinds::FUNCTION_DEFINITION);
    func.map(|f| f.id()) == outer.map(|f| f.id())
        && [kinds::WHILE_STATEMENT, kinds::FOR_STATEMENT]
            .iter()
            .filter_map(|k| idx.enclosing(node, k))
            .all(|l| l.id() == lp.id() || syntax::contains(l, lp))
}

/// The names the loop's body counts (`attempt += 1`, `retries -= 1`).
fn counted<'s>(idx: &NodeIndex<'_>, body: Node<'_>, src: &'s str) -> Vec<&'s str> {
    let mut out: Vec<&str> = idx
        .within(body, kinds::AUGMENTED_ASSIGNMENT)
        .iter()
        .filter_map(|a| a.field("left"))
        .map(|l| syntax::text(l, src))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether a condition ends the loop by a count or the clock: a test that reads a counter of
/// the loop, a deadline, the time elapsed, or the attempts left.
fn bounds(condition: Node<'_>, counters: &[&str], src: &str) -> bool {
    let mut node = condition;
    while node.kind() == kinds::PARENTHESIZED_EXPRESSION {
        match node.named_child(0) {
            Some(inner) => node = inner,
            None => return false,
        }
    }
    if node.kind() == kinds::NOT_OPERATOR {
        // `if not retries_left:`, `if not should_retry(status, retry_count):`.
        return node
            .field("argument")
            .is_some_and(|a| bounds(a, counters, src));
    }
    // `a and b` is read part by part by the caller; any other test reads its words
    // (`attempt >= N`, `self._gives_up(attempt)`).
    if node.kind() == kinds::BOOLEAN_OPERATOR {
        return false;
    }
    let text = syntax::text(node, src);
    let words: Vec<&str> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    words.iter().any(|w| counters.contains(w))
        || words.iter().any(|w| {
            let lower = w.to_ascii_lowercase();
            [
                "deadline",
                "monotonic",
                "elapsed",
                "attempt",
                "retries",
                "tries",
                "expires",
            ]
            .iter()
            .any(|k| lower.contains(k))
        })
}
