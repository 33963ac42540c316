//! PAY032 server-error-taken-as-refusal: a client reads the provider's HTTP status and sends
//! only some server errors to the error its callers treat as an unknown outcome (`if
//! response.status_code in (429, 503): raise WiseUnavailable(...)`), while the others (500, 502,
//! 504) fall through to the error of a refusal (`if response.is_error: raise WiseError(...)`,
//! `raise_for_status()`). A 500 or a 504 from a gateway says nothing of whether the transfer,
//! refund or charge was made; taken as refused, it is failed, credited back or sent again under
//! a new key, and the money may move twice.
//!
//! Left alone: a reading that takes the whole range (`>= 500`, `// 100 == 5`, `in range(500,
//! 600)`), a set that lists 500, 502, 503 and 504, and a branch that raises anything but an
//! error of an unknown outcome (`Unavailable`, `Unknown...Outcome`, `Indeterminate`, a
//! client's `...Timeout`).
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY032",
    doc: include_str!("../../../rules/pay/PAY032.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// The server errors a gateway answers with when it may or may not have acted.
const SERVER_ERRORS: [u16; 4] = [500, 502, 503, 504];

/// Every finding is a status compared with a server error, in a file that talks HTTP.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.facts.functions.iter().any(|f| f.http)
        && s.mentions(&[
            "500",
            "502",
            "503",
            "504",
            "Unknown",
            "Unavailable",
            "Indeterminate",
        ])
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    chosen_by_a_flag(cx, idx, src);
    refused_on_the_last_try(cx, idx, src);
    for (stmt, condition, body) in super::branches(idx) {
        // A branch to the unknown that reads no status at all (`if not body: raise
        // PayuOutcomeUnknown`) sends it none of the server errors.
        let (codes, no_status) = match status_codes(idx, condition, src) {
            Some(codes) => (codes, false),
            None if !syntax::text(condition, src).contains("status") => (Vec::new(), true),
            None => continue,
        };
        if !no_status && !codes.iter().any(|c| (500..600).contains(c)) {
            continue;
        }
        let missing: Vec<String> = SERVER_ERRORS
            .iter()
            .filter(|c| !codes.contains(c))
            .map(u16::to_string)
            .collect();
        if missing.is_empty() {
            continue;
        }
        let Some(unknown) = raised_unknown(idx, body, src) else {
            continue;
        };
        let Some(func) = idx.enclosing(stmt, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        if takes_the_range(syntax::text(func, src)) {
            continue;
        }
        // The refusal is what the other statuses reach: the branch's `else:` as much as what
        // follows the statement.
        let Some(refusal) = refusal_after(idx, func, body, src) else {
            continue;
        };
        // Then the refusal must take every other status (`if resp.status_code != 200: raise
        // PayuRejected`), and the sender the function calls must not sort them out first.
        if no_status {
            // About the answer, not a transport error's handler (`except RETRYABLE: ... raise
            // ChargeUnavailable`): that one has no status to read.
            if idx
                .enclosing(stmt, kinds::EXCEPT_CLAUSE)
                .is_some_and(|e| syntax::contains(func, e))
            {
                continue;
            }
            let sorted_by_the_sender = super::calls_a_helper_that(idx, func, src, |h| {
                takes_the_range(syntax::text(h, src))
            });
            if sorted_by_the_sender || !refused_whatever_the_status(idx, func, stmt, src) {
                continue;
            }
        }
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, condition)
            .arg("function", function.clone())
            .arg("check", syntax::text(condition, src).to_string())
            .arg("unknown", unknown.to_string())
            .arg("missing", missing.join(", "))
            .arg("refusal", refusal.0)
            .arg("refusal_line", refusal.1.to_string());
        finding.function = function;
    }
}

/// `unknown = status in (408, 409, 429)` and then `raise (CheckoutOutcomeUnknown if unknown
/// else CheckoutRequestRejected)(...)`: the error of an unknown outcome is picked by a set of
/// statuses that holds no server error, so every 5xx is raised as the refusal.
fn chosen_by_a_flag(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    for &assignment in idx.all(kinds::ASSIGNMENT) {
        let (Some(left), Some(right)) = (assignment.field("left"), assignment.field("right"))
        else {
            continue;
        };
        if left.kind() != kinds::IDENTIFIER
            || right.kind() != kinds::COMPARISON_OPERATOR
            || !syntax::text(right, src).contains(" in ")
        {
            continue;
        }
        let Some(codes) = status_codes(idx, right, src) else {
            continue;
        };
        // Some server errors (`in (429, 503)`) or none (`in (408, 409, 429)`): the others are
        // raised as the refusal.
        let missing: Vec<String> = SERVER_ERRORS
            .iter()
            .filter(|c| !codes.contains(c))
            .map(u16::to_string)
            .collect();
        if codes.is_empty() || missing.is_empty() {
            continue;
        }
        let Some(func) = idx.enclosing(assignment, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        // A request that may be sent again under its key: a quote or a lookup read as refused
        // moves no money. A client's sender called with a key (`self._request("POST", ...,
        // headers={"Idempotency-Key": key})` elsewhere in the file) counts too.
        if takes_the_range(syntax::text(func, src))
            || !(syntax::code_names_idempotency(syntax::text(func, src))
                || sent_with_a_key(idx, func, src))
        {
            continue;
        }
        let flag = syntax::text(left, src);
        let choice = idx
            .within(func, kinds::CONDITIONAL_EXPRESSION)
            .iter()
            .copied()
            .find_map(|c| {
                let parts = crate::python::named_children(c);
                let [chosen, test, other] = parts.as_slice() else {
                    return None;
                };
                if c.start_byte() < assignment.end_byte() || syntax::text(*test, src) != flag {
                    return None;
                }
                let name = |n: Node<'_>| {
                    let text = syntax::text(n, src);
                    text.rsplit('.').next().unwrap_or(text)
                };
                let (unknown, refusal) = (name(*chosen), name(*other));
                (names_the_unknown(unknown) && !names_the_unknown(refusal))
                    .then_some((unknown, refusal, c))
            });
        let Some((unknown, refusal, at)) = choice else {
            continue;
        };
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, right)
            .arg("function", function.clone())
            .arg("check", syntax::text(right, src).to_string())
            .arg("unknown", unknown.to_string())
            .arg("missing", missing.join(", "))
            .arg("refusal", refusal.to_string())
            .arg("refusal_line", syntax::lines(at).0.to_string());
        finding.function = function;
    }
}

/// A retry loop that retries the server errors and raises the error of an unknown outcome
/// for a transport failure, but on its last try raises the server error as something else: `if
/// status not in RETRYABLE_STATUSES or final_try: raise _error_from(...)`, or `last_error =
/// _error_from(response, RevolutRejected)` kept by the loop and raised once it ends. The last
/// 500 or 504 is the one the caller acts on, and it reads as refused.
fn refused_on_the_last_try(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    for &looped in idx
        .all(kinds::FOR_STATEMENT)
        .iter()
        .chain(idx.all(kinds::WHILE_STATEMENT))
    {
        let Some(func) = idx.enclosing(looped, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let owned = |n: Node<'_>| crate::rules::idem::owned_by(idx, n, Some(func));
        // The error the function raises for a request that may have gone through, or keeps
        // for the loop to raise (`last_error = SquareOutcomeUnknown(...)`).
        let kept = || {
            idx.within(func, kinds::ASSIGNMENT).iter().find_map(|a| {
                let value = a.field("right").filter(|v| v.kind() == kinds::CALL)?;
                let callee = syntax::callee(value, src);
                Some(callee.rsplit('.').next().unwrap_or(callee))
                    .filter(|name| names_the_unknown(name))
            })
        };
        let Some(unknown) = idx
            .within(func, kinds::RAISE_STATEMENT)
            .iter()
            .filter(|r| owned(**r))
            .find_map(|r| raised_name(*r, src).filter(|n| names_the_unknown(n)))
            .or_else(kept)
        else {
            continue;
        };
        let found = joined_to_the_last_try(idx, looped, src)
            .or_else(|| kept_and_raised(idx, func, looped, src))
            .or_else(|| refused_by_its_kind(idx, func, looped, src))
            .and_then(|(at, value)| {
                (!sorts_by_status(idx, value, src)).then(|| {
                    let text: String = syntax::normalized(value, src).chars().take(80).collect();
                    (at, text, syntax::lines(value).0)
                })
            })
            .or_else(|| passed_on_the_last_try(idx, func, looped, src));
        let Some((at, refusal, refusal_line)) = found else {
            continue;
        };
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, at)
            .arg("function", function.clone())
            .arg("unknown", unknown.to_string())
            .arg("refusal", refusal)
            .arg("refusal_line", refusal_line.to_string())
            .note("last_try");
        finding.function = function;
    }
}

/// `if resp.status_code in RETRYABLE_STATUS and attempt < self.max_attempts: continue`, then
/// `if resp.status_code >= 400: raise SquareRequestRejected(...)`: on the last try the server
/// error skips the branch that tries again and reaches the refusal. The condition, and the
/// refusal as `refusal_after` names it.
fn passed_on_the_last_try<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    looped: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, String, u32)> {
    idx.within(looped, kinds::IF_STATEMENT)
        .iter()
        .find_map(|stmt| {
            let condition = stmt
                .field("condition")
                .filter(|c| c.kind() == kinds::BOOLEAN_OPERATOR)?;
            let body = stmt.field("consequence")?;
            let text = syntax::text(condition, src);
            if text.contains(" or ") || !text.contains(" and ") {
                return None;
            }
            let terms = crate::python::named_children(condition);
            let reads_status = terms
                .iter()
                .any(|t| syntax::text(*t, src).contains("status"));
            let more_to_come = terms.iter().any(|t| {
                let term = syntax::text(*t, src);
                (t.kind() == kinds::COMPARISON_OPERATOR && term.contains('<')
                    || term.starts_with("not "))
                    && names_the_last_try(*t, src)
            });
            // The branch tries again: it goes on to the next turn, or falls through to the sleep.
            let tries_again = syntax::statements(body)
                .iter()
                .any(|s| s.kind() == "continue_statement")
                || syntax::block_falls_through(body, src)
                    && idx.within(body, kinds::RAISE_STATEMENT).is_empty()
                    && idx.within(body, kinds::RETURN_STATEMENT).is_empty();
            if !reads_status || !more_to_come || !tries_again {
                return None;
            }
            let (refusal, line) = refusal_after(idx, func, *stmt, src)?;
            // What comes between may still send the server errors to the unknown (`if
            // resp.status_code >= 500: raise SquareOutcomeUnknown(...)`).
            let sorted_between = idx
                .within(looped, kinds::RAISE_STATEMENT)
                .iter()
                .chain(idx.within(looped, kinds::ASSIGNMENT))
                .any(|n| {
                    n.start_byte() > stmt.end_byte()
                        && syntax::lines(*n).0 < line
                        && names_an_unknown_in(*n, src)
                });
            let refusal = refusal
                .strip_prefix("raise ")
                .map_or(refusal.clone(), str::to_string);
            (line <= syntax::lines(looped).1 && !sorted_between)
                .then_some((condition, refusal, line))
        })
}

/// `if response.status_code not in RETRYABLE_STATUSES or final_try: raise
/// _error_from(response.status_code, payload)` in the loop, outside any `except`: the
/// condition and what it raises, when that is no error of an unknown outcome.
fn joined_to_the_last_try<'t>(
    idx: &NodeIndex<'t>,
    looped: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, Node<'t>)> {
    idx.within(looped, kinds::IF_STATEMENT)
        .iter()
        .find_map(|stmt| {
            let condition = stmt.field("condition")?;
            let body = stmt.field("consequence")?;
            if idx
                .enclosing(*stmt, kinds::EXCEPT_CLAUSE)
                .is_some_and(|e| syntax::contains(looped, e))
            {
                return None;
            }
            let mut terms = Vec::new();
            or_terms(condition, &mut terms);
            let reads_status = terms
                .iter()
                .any(|t| syntax::text(*t, src).contains("status"));
            let last_try = terms.iter().any(|t| names_the_last_try(*t, src));
            if terms.len() < 2 || !reads_status || !last_try {
                return None;
            }
            let raise = syntax::statements(body)
                .into_iter()
                .find(|s| s.kind() == kinds::RAISE_STATEMENT)?;
            let value = raise.named_child(0)?;
            (!names_an_unknown_in(value, src)).then_some((condition, value))
        })
}

/// After the loop, `raise last_error` of an error the loop kept from an answer
/// (`last_error = _error_from(response, RevolutRejected)`, outside any `except`), where no
/// answer the loop keeps is an error of an unknown outcome.
fn kept_and_raised<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    looped: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, Node<'t>)> {
    let raised = idx
        .within(func, kinds::RAISE_STATEMENT)
        .iter()
        .find_map(|r| {
            let value = r.named_child(0).filter(|v| v.kind() == kinds::IDENTIFIER)?;
            (r.start_byte() > looped.end_byte() && r.named_child(1).is_none())
                .then(|| (*r, syntax::text(value, src)))
        })?;
    let (raise, name) = raised;
    let kept: Vec<Node<'t>> = idx
        .within(looped, kinds::ASSIGNMENT)
        .iter()
        .filter(|a| {
            a.field("left")
                .is_some_and(|l| syntax::text(l, src) == name)
                && idx
                    .enclosing(**a, kinds::EXCEPT_CLAUSE)
                    .is_none_or(|e| !syntax::contains(looped, e))
        })
        .filter_map(|a| a.field("right"))
        .collect();
    let from_an_answer = kept
        .iter()
        .copied()
        .find(|v| v.kind() == kinds::CALL && syntax::text(*v, src).contains("resp"))?;
    if kept.iter().any(|v| names_an_unknown_in(*v, src)) {
        return None;
    }
    Some((raise, from_an_answer))
}

/// After the loop, `if isinstance(last_error, DwollaError): raise DwollaRejected(...)`: a
/// refusal raised for the last error the loop kept from an answer (`error =
/// DwollaError.from_response(response)`, `last_error = error`), which on the last try is the
/// server error the loop went round on. The `raise`, and the refusal made.
fn refused_by_its_kind<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    looped: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, Node<'t>)> {
    // Names the loop keeps from an answer, outside its `except`s, one alias deep.
    let outside_handlers = |a: &Node<'_>| {
        idx.enclosing(*a, kinds::EXCEPT_CLAUSE)
            .is_none_or(|e| !syntax::contains(looped, e))
    };
    let assigned: Vec<(&str, Node<'t>)> = idx
        .within(looped, kinds::ASSIGNMENT)
        .iter()
        .filter(|a| outside_handlers(a))
        .filter_map(|a| {
            let left = a.field("left").filter(|l| l.kind() == kinds::IDENTIFIER)?;
            Some((syntax::text(left, src), a.field("right")?))
        })
        .collect();
    // `DwollaError.from_response(response)`, `AirwallexFehler.aus_antwort(antwort)`.
    let from_an_answer = |v: Node<'_>| {
        v.kind() == kinds::CALL
            && ["resp", "answer", "reply", "antwort", "reponse", "antwoord"]
                .iter()
                .any(|w| syntax::contains_lowercase(syntax::text(v, src), w))
    };
    let kept: Vec<&str> = assigned
        .iter()
        .filter(|(_, v)| {
            from_an_answer(*v)
                || v.kind() == kinds::IDENTIFIER
                    && assigned
                        .iter()
                        .any(|(n, w)| *n == syntax::text(*v, src) && from_an_answer(*w))
        })
        .map(|(n, _)| *n)
        .collect();
    if kept.is_empty() {
        return None;
    }
    idx.within(func, kinds::IF_STATEMENT)
        .iter()
        .find_map(|stmt| {
            if stmt.start_byte() < looped.end_byte() {
                return None;
            }
            let condition = stmt.field("condition")?;
            if !kept
                .iter()
                .any(|k| syntax::has_word(syntax::text(condition, src), k))
            {
                return None;
            }
            let raise = syntax::statements(stmt.field("consequence")?)
                .into_iter()
                .find(|s| s.kind() == kinds::RAISE_STATEMENT)?;
            let value = raise.named_child(0).filter(|v| v.kind() == kinds::CALL)?;
            let made = syntax::callee(value, src);
            let made = made.rsplit('.').next().unwrap_or(made);
            (crate::rules::err::timeout_read_as_failure::named_for_a_refusal(made)
                && !names_an_unknown_in(value, src))
            .then_some((raise, value))
        })
}

/// A term that says the attempts are spent: `final_try`, `is_last`, `attempt ==
/// self.max_attempts`, `tries_left == 0`.
fn names_the_last_try(term: Node<'_>, src: &str) -> bool {
    let text = syntax::text(term, src).to_ascii_lowercase();
    [
        "final",
        "last",
        "exhaust",
        "tries_left",
        "attempts_left",
        "remaining",
    ]
    .iter()
    .any(|w| text.contains(w))
        || term.kind() == kinds::COMPARISON_OPERATOR
            && !text.contains("status")
            && ["attempt", "tries", "try_", "retr"]
                .iter()
                .any(|w| text.contains(w))
}

/// Whether an expression names an error of an unknown outcome anywhere in it
/// (`_error_from(response, RevolutOutcomeUnknown)`).
fn names_an_unknown_in(value: Node<'_>, src: &str) -> bool {
    names_an_unknown_class(syntax::text(value, src))
}

/// Whether code names a class of an unknown outcome: a capitalised name `names_the_unknown`
/// takes (`RevolutOutcomeUnknown`), not a `timeout=` argument.
fn names_an_unknown_class(code: &str) -> bool {
    code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| w.starts_with(|c: char| c.is_ascii_uppercase()) && names_the_unknown(w))
}

/// Whether the error is built by a function of the file that picks an error of an unknown
/// outcome for some answers (`if status >= 500: return ProviderUnavailable(...)`).
fn sorts_by_status(idx: &NodeIndex<'_>, refusal: Node<'_>, src: &str) -> bool {
    if refusal.kind() != kinds::CALL {
        return false;
    }
    let name = syntax::callee_name(refusal, src);
    idx.all(kinds::FUNCTION_DEFINITION)
        .iter()
        .filter(|f| syntax::function_name(**f, src) == name)
        .any(|f| {
            let text = syntax::text(*f, src);
            takes_the_range(text) || names_an_unknown_class(text)
        })
}

/// Whether a call of `func` in the file hands it an idempotency key.
fn sent_with_a_key(idx: &NodeIndex<'_>, func: Node<'_>, src: &str) -> bool {
    let name = syntax::function_name(func, src);
    idx.all(kinds::CALL).iter().any(|c| {
        idx.callee_name(*c, src) == name && syntax::code_names_idempotency(syntax::text(*c, src))
    })
}

/// Whether, after `stmt`, the function raises a refusal under a test any server error passes:
/// `status_code != 200`, `>= 400`, `is_error`, `not resp.is_success`, `not resp.ok`.
fn refused_whatever_the_status(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    stmt: Node<'_>,
    src: &str,
) -> bool {
    idx.within(func, kinds::IF_STATEMENT).iter().any(|&branch| {
        let (Some(condition), Some(body)) =
            (branch.field("condition"), branch.field("consequence"))
        else {
            return false;
        };
        let compact: String = syntax::text(condition, src).split_whitespace().collect();
        let every_error = ["!=200", ">=400", ">399", ">=300", ">299", "is_error"]
            .iter()
            .any(|w| compact.contains(w))
            || compact.starts_with("not")
                && (compact.contains(".is_success") || compact.ends_with(".ok"));
        branch.start_byte() > stmt.end_byte()
            && every_error
            && idx
                .within(body, kinds::RAISE_STATEMENT)
                .iter()
                .filter_map(|r| raised_name(*r, src))
                .any(|n| !crate::rules::err::timeout_read_as_failure::unavailable(n))
    })
}

/// The status codes a condition compares the answer's status with: `status_code in (429,
/// 503)`, `resp.status == 503`, an `or` of such. `None` for anything else (a range, a call).
fn status_codes(idx: &NodeIndex<'_>, condition: Node<'_>, src: &str) -> Option<Vec<u16>> {
    let mut terms = Vec::new();
    or_terms(condition, &mut terms);
    let mut codes = Vec::new();
    for term in terms {
        if term.kind() != kinds::COMPARISON_OPERATOR || term.named_child_count() != 2 {
            return None;
        }
        let (subject, other) = (term.named_child(0)?, term.named_child(1)?);
        let subject_text = syntax::text(subject, src);
        if !(subject_text.ends_with("status_code") || subject_text.ends_with("status")) {
            return None;
        }
        let operator = src.get(subject.end_byte()..other.start_byte())?.trim();
        // `in RETRYABLE_STATUS`, a set the module keeps: `frozenset({409, 429, 503})`.
        let other = if operator == "in" && other.kind() == kinds::IDENTIFIER {
            let kept =
                idx.assigned_before(None, syntax::text(other, src), other.start_byte(), src)?;
            if kept.kind() == kinds::CALL {
                syntax::positional_args(kept).first().copied()?
            } else {
                kept
            }
        } else {
            other
        };
        let elements = match operator {
            "==" => vec![other],
            "in" if matches!(other.kind(), kinds::TUPLE | kinds::LIST | kinds::SET) => {
                crate::python::named_children(other)
            }
            _ => return None,
        };
        for e in elements {
            if e.kind() != kinds::INTEGER {
                return None;
            }
            codes.push(syntax::text(e, src).parse().ok()?);
        }
    }
    (!codes.is_empty()).then_some(codes)
}

/// The operands of an `or` chain (parentheses dropped).
fn or_terms<'t>(node: Node<'t>, out: &mut Vec<Node<'t>>) {
    let node = if node.kind() == kinds::PARENTHESIZED_EXPRESSION {
        node.named_child(0).unwrap_or(node)
    } else {
        node
    };
    if node.kind() == kinds::BOOLEAN_OPERATOR
        && node.field("operator").is_some_and(|o| o.kind() == "or")
        && let (Some(l), Some(r)) = (node.field("left"), node.field("right"))
    {
        or_terms(l, out);
        or_terms(r, out);
    } else {
        out.push(node);
    }
}

/// The error of an unknown outcome the branch raises (`WiseUnavailable`), by name, or builds
/// and returns for its caller to raise (`return ProviderUnavailable(message, ...)`), or keeps
/// for the retry loop to raise once its attempts run out (`error = OutcomeUnknown(...)`).
fn raised_unknown<'s>(idx: &NodeIndex<'_>, body: Node<'_>, src: &'s str) -> Option<&'s str> {
    let kept = || {
        idx.within(body, kinds::ASSIGNMENT).iter().find_map(|a| {
            let value = a.field("right").filter(|v| v.kind() == kinds::CALL)?;
            let callee = syntax::callee(value, src);
            Some(callee.rsplit('.').next().unwrap_or(callee)).filter(|name| names_the_unknown(name))
        })
    };
    idx.within(body, kinds::RAISE_STATEMENT)
        .iter()
        .chain(idx.within(body, kinds::RETURN_STATEMENT))
        .find_map(|r| raised_name(*r, src))
        .filter(|name| names_the_unknown(name))
        .or_else(kept)
}

/// An error named for an answer that did not come: `Unavailable`, `OutcomeUnknown`, a
/// client's own timeout (`GatewayTimeout`), which it raises for a 5xx too, or the signal its
/// retry goes round on (`_Transient`, `RetryableError`), which ends as the unknown.
fn names_the_unknown(name: &str) -> bool {
    crate::rules::err::timeout_read_as_failure::unavailable(name)
        || syntax::name_words(name).iter().any(|w| {
            matches!(
                w.as_str(),
                "timeout" | "timedout" | "transient" | "retryable" | "retriable"
            )
        })
}

/// The name of the error a `raise` raises: `raise X(...)`, `raise X`, `raise mod.X(...) from e`;
/// or a `return` returns, built (`return ProviderRejected(...)`).
fn raised_name<'s>(raise: Node<'_>, src: &'s str) -> Option<&'s str> {
    let value = raise.named_child(0)?;
    if raise.kind() == kinds::RETURN_STATEMENT && value.kind() != kinds::CALL {
        return None;
    }
    let callee = if value.kind() == kinds::CALL {
        syntax::callee(value, src)
    } else {
        syntax::text(value, src)
    };
    // `KlarnaRejected.from_response(response)`: the class a constructor of its own makes.
    let mut parts = callee.rsplit('.');
    let last = parts.next().unwrap_or(callee);
    match parts.next() {
        Some(class)
            if last.starts_with(|c: char| c.is_ascii_lowercase())
                && class.starts_with(|c: char| c.is_ascii_uppercase()) =>
        {
            Some(class)
        }
        _ => Some(last),
    }
}

/// Whether the function reads the whole range of server errors somewhere: `>= 500`, `> 499`,
/// `// 100 == 5`, `range(500, 600)`, `is_server_error`.
fn takes_the_range(text: &str) -> bool {
    let compact: String = text.split_whitespace().collect();
    [
        ">=500",
        ">499",
        "500<=",
        "499<",
        "//100==5",
        "range(500",
        "is_server_error",
    ]
    .iter()
    .any(|w| compact.contains(w))
}

/// What answers the other errors after the branch (its `else:`, or what follows the `if`): a
/// raise of an error that is not of an unknown outcome (`raise WiseError(...)`), or
/// `raise_for_status()`.
fn refusal_after(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    stmt: Node<'_>,
    src: &str,
) -> Option<(String, u32)> {
    let owned = |n: Node<'_>| crate::rules::idem::owned_by(idx, n, Some(func));
    let error = |n: &&str| {
        ["Error", "Exception", "Rejected", "Refused", "Declined"]
            .iter()
            .any(|s| n.ends_with(s))
    };
    let raised = idx
        .within(func, kinds::RAISE_STATEMENT)
        .iter()
        .copied()
        .filter(|r| r.start_byte() > stmt.end_byte() && owned(*r))
        .chain(
            idx.within(func, kinds::RETURN_STATEMENT)
                .iter()
                .copied()
                .filter(|r| r.start_byte() > stmt.end_byte() && owned(*r))
                .filter(|r| raised_name(*r, src).is_some_and(|n| error(&n))),
        )
        .find_map(|r| {
            raised_name(r, src)
                .filter(|n| !crate::rules::err::timeout_read_as_failure::unavailable(n))
                .map(|n| {
                    let how = if r.kind() == kinds::RETURN_STATEMENT {
                        "return"
                    } else {
                        "raise"
                    };
                    (r.start_byte(), format!("{how} {n}"), syntax::lines(r).0)
                })
        });
    let checked = idx
        .within(func, kinds::CALL)
        .iter()
        .copied()
        .filter(|c| c.start_byte() > stmt.end_byte() && owned(*c))
        .find(|c| syntax::callee_name(*c, src) == "raise_for_status")
        .map(|c| {
            (
                c.start_byte(),
                crate::rules::pay::first_line(c, src),
                syntax::lines(c).0,
            )
        });
    [raised, checked]
        .into_iter()
        .flatten()
        .min_by_key(|(at, _, _)| *at)
        .map(|(_, text, line)| (text, line))
}
