//! RETRY006 refusal-retried: a set of answers to retry (`RETRYABLE_STATUSES`, urllib3's
//! `status_forcelist`) lists a status that says the provider read the request and turned it
//! away: a 400, 402, 422. The same request gets the same refusal on every attempt; the retries
//! only delay it, and where the loop reports the last failure as "no answer" (its error of an
//! unknown outcome, a state to settle later), a definite refusal ends as an unknown one that
//! nobody acts on. A declined card (`402`) tried again and again is also what card schemes
//! count against the merchant.
//!
//! Read from the set itself: its name says retries (or it is the keyword a retrying
//! transport takes), and it holds a 429 or a 5xx beside the refusal, so that it is a set of
//! HTTP statuses. Left alone: 401 and 403 (retried after a token is renewed, or a rate limit
//! of some APIs), 404 (a read of what was just made), 408, 425, 429, and 409 but where the
//! file reads it as an answer (GoCardless's `idempotent_creation_conflict` naming the payment
//! the first attempt made).
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "RETRY006",
    doc: include_str!("../../../rules/retry/RETRY006.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Answers that say the request itself was turned away: sent again unchanged, it is turned
/// away again.
const REFUSALS: &[u16] = &[400, 402, 405, 410, 413, 415, 422];

/// Every finding is a number of `REFUSALS` in a file's code.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && writes_a_refusal(s.src().as_bytes())
}

/// Whether the text holds one of `REFUSALS` as a number of its own, found from its `4`s.
fn writes_a_refusal(text: &[u8]) -> bool {
    memchr::memchr_iter(b'4', text).any(|at| {
        let digit = |i: usize| text.get(i).is_some_and(u8::is_ascii_digit);
        let number = text
            .get(at..at + 3)
            .and_then(|n| std::str::from_utf8(n).ok());
        (at == 0 || !digit(at - 1))
            && !digit(at + 3)
            && number
                .and_then(|n| n.parse::<u16>().ok())
                .is_some_and(|n| n == 409 || REFUSALS.contains(&n))
    })
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    all_but_a_few(cx);
    let mut sets: Vec<(String, Node<'_>)> = Vec::new();
    for &assignment in idx.all(kinds::ASSIGNMENT) {
        if let (Some(left), Some(right)) = (assignment.field("left"), assignment.field("right"))
            && names_retries(syntax::text(left, src))
        {
            sets.push((syntax::normalized(left, src), right));
        }
    }
    let keywords = ["status_forcelist", "statuses"]
        .iter()
        .any(|k| memchr::memmem::find(src.as_bytes(), k.as_bytes()).is_some());
    for &call in idx.all(kinds::CALL).iter().filter(|_| keywords) {
        for (keyword, value) in syntax::keyword_args(call, src) {
            // urllib3's `Retry(status_forcelist=...)`, aiohttp_retry's `ExponentialRetry(
            // statuses=...)`.
            let retrying = keyword == "status_forcelist"
                || keyword == "statuses" && idx.callee_name(call, src).contains("Retry");
            if retrying {
                sets.push((format!("{keyword}="), value));
            }
        }
    }
    for (name, value) in sets {
        let Some(numbers) = statuses(idx, value, src) else {
            continue;
        };
        let again = numbers
            .iter()
            .any(|(n, _)| *n == 429 || (500..600).contains(n));
        let refused: Vec<&(u16, Node<'_>)> = numbers
            .iter()
            .filter(|(n, _)| REFUSALS.contains(n))
            .collect();
        if !again {
            continue;
        }
        let Some(&&(first, at)) = refused.first() else {
            // A conflict is worth another try where the key is still in flight; not where the
            // file reads it as the answer that names what the first request made.
            if let Some(&(_, at)) = numbers.iter().find(|(n, _)| *n == 409)
                && let Some(answered) = read_as_an_answer(idx, value, src)
            {
                cx.report(&RULE, at)
                    .arg("set", name)
                    .arg("status", "409")
                    .arg("answered_line", answered.to_string())
                    .note("answered");
            }
            continue;
        };
        let others: Vec<String> = refused[1..].iter().map(|(n, _)| format!("`{n}`")).collect();
        let finding = cx
            .report(&RULE, at)
            .arg("set", name)
            .arg("status", first.to_string());
        if !others.is_empty() {
            finding.arg("others", others.join(", ")).note("others");
        }
    }
}

/// A test named for retries that takes every status but a few refusals (`def
/// _is_retryable(status): return status not in (400, 401, 403, 404)`): the refusals it does not
/// list (a `402` of a declined card, a `422`) are sent again and again.
fn all_but_a_few(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let mut found = Vec::new();
    for &ret in idx.all(kinds::RETURN_STATEMENT) {
        let Some(func) = idx.enclosing(ret, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let name = syntax::function_name(func, src);
        let Some(test) =
            syntax::return_value(ret).filter(|v| v.kind() == kinds::COMPARISON_OPERATOR)
        else {
            continue;
        };
        let (Some(left), Some(right)) = (test.named_child(0), test.named_child(1)) else {
            continue;
        };
        let operator = src.get(left.end_byte()..right.start_byte()).map(str::trim);
        if !names_retries(name)
            || operator.map(|o| o.split_whitespace().collect::<Vec<_>>()) != Some(vec!["not", "in"])
        {
            continue;
        }
        let Some(listed) = statuses(idx, right, src) else {
            continue;
        };
        if listed.is_empty() || listed.iter().any(|(n, _)| !(400..500).contains(n)) {
            continue;
        }
        let left_out: Vec<u16> = [402, 422]
            .into_iter()
            .filter(|r| !listed.iter().any(|(n, _)| n == r))
            .collect();
        if let Some(&first) = left_out.first() {
            found.push((
                test,
                name.to_string(),
                first,
                syntax::normalized(right, src),
            ));
        }
    }
    for (test, function, status, listed) in found {
        cx.report(&RULE, test)
            .arg("set", function)
            .arg("status", status.to_string())
            .arg("listed", listed)
            .note("all_but");
    }
}

/// The line of a test of the file for a 409 (`self.status_code != 409`, `if exc.status == 409`)
/// outside the set itself: code that takes the conflict as an answer.
fn read_as_an_answer(idx: &NodeIndex<'_>, set: Node<'_>, src: &str) -> Option<u32> {
    idx.all(kinds::COMPARISON_OPERATOR)
        .iter()
        .filter(|c| !syntax::contains(set, **c))
        .find(|c| {
            let operator = c
                .named_child(0)
                .zip(c.named_child(1))
                .and_then(|(l, r)| src.get(l.end_byte()..r.start_byte()))
                .map(str::trim);
            matches!(operator, Some("==" | "!="))
                && crate::python::named_children(**c)
                    .iter()
                    .any(|n| n.kind() == kinds::INTEGER && syntax::text(*n, src) == "409")
        })
        .map(|c| syntax::lines(*c).0)
}

/// Whether a name says its set is what to retry: `RETRYABLE_STATUSES`, `RETRY_ON`,
/// `self._transient_codes`.
pub(crate) fn names_retries(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    syntax::name_words(last).iter().any(|w| {
        matches!(
            w.as_str(),
            "retry" | "retries" | "retryable" | "retriable" | "transient" | "temporary"
        )
    })
}

/// The whole numbers of a literal set, list or tuple, or of one handed to `frozenset(...)`,
/// `set(...)` or `tuple(...)`, each with its node; `None` for anything else.
fn statuses<'t>(idx: &NodeIndex<'t>, value: Node<'t>, src: &str) -> Option<Vec<(u16, Node<'t>)>> {
    let collection = match value.kind() {
        kinds::SET | kinds::LIST | kinds::TUPLE => value,
        kinds::CALL if matches!(idx.callee_name(value, src), "frozenset" | "set" | "tuple") => {
            let first = *syntax::positional_args(value).first()?;
            matches!(first.kind(), kinds::SET | kinds::LIST | kinds::TUPLE).then_some(first)?
        }
        _ => return None,
    };
    Some(
        crate::python::named_children(collection)
            .into_iter()
            .filter(|n| n.kind() == kinds::INTEGER)
            .filter_map(|n| Some((syntax::text(n, src).parse::<u16>().ok()?, n)))
            .collect(),
    )
}
