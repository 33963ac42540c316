//! Retry loops: `for attempt in range(...)`, `while attempt < N`, and `while True` with a counter
//! and an exit, and what their attempts are when the numbers can be worked out.
//!
//! A loop over data (`for item in items`, `range(len(xs))`) is not a retry loop; a counted loop is
//! one only when it sleeps, ignores its counter (`for _ in range(3)`), or is named like one.

use tree_sitter::Node;

use super::eval::Env;
use crate::python::{Fields, NodeIndex, kinds, syntax};

/// More attempts than this are not spelled out (nor summed term by term).
const MAX_ATTEMPTS: f64 = 100.0;

pub struct RetryLoop<'t> {
    pub node: Node<'t>,
    pub body: Node<'t>,
    pub func: Node<'t>,
    /// The counter's name; `None` for `_`.
    pub counter: Option<String>,
    /// The counter's value at the start of each attempt, when the numbers are known.
    pub attempts: Option<Vec<f64>>,
    /// The `range(...)` of a `for` loop.
    pub range: Option<Node<'t>>,
    /// What ends the loop, as its reader sees it: the `range(...)` of a `for` loop, the
    /// comparison of a `while` loop's counter with its limit (in an exiting `if` under `while
    /// True`).
    pub bound: Node<'t>,
    /// Names the attempt count is made of (`MAX_RETRIES`).
    pub limit_names: Vec<String>,
    /// `attempt += 1` in the body of a `while` loop (`retries_left -= 1` when it counts down).
    pub increment: Option<Node<'t>>,
    /// What `increment` adds to the counter: 1, or -1 for a loop that counts the attempts left.
    pub step: f64,
}

impl<'t> RetryLoop<'t> {
    /// The counter's value at `node` during attempt `start`: one more once the body has counted
    /// the attempt (`attempt += 1` before the sleep).
    pub fn counter_at(&self, node: Node<'_>, start: f64) -> f64 {
        match self.increment {
            Some(inc) if inc.end_byte() <= node.start_byte() => start + self.step,
            _ => start,
        }
    }

    /// Calls of `sleep` in the loop's own body.
    pub fn sleeps(&self, idx: &NodeIndex<'t>, src: &str) -> Vec<Node<'t>> {
        self.own_calls(idx)
            .filter(|c| syntax::names_sleep(syntax::callee_name(*c, src)))
            .collect()
    }

    /// Calls in the loop body that belong to the loop's function (not to nested functions).
    pub fn own_calls<'a>(&'a self, idx: &'a NodeIndex<'t>) -> impl Iterator<Item = Node<'t>> + 'a {
        idx.within(self.body, kinds::CALL)
            .iter()
            .copied()
            .filter(|c| {
                idx.enclosing(*c, kinds::FUNCTION_DEFINITION)
                    .is_some_and(|f| f.id() == self.func.id())
            })
    }
}

/// Every retry loop of a file, outermost first.
pub fn retry_loops<'t>(idx: &NodeIndex<'t>, src: &str) -> Vec<RetryLoop<'t>> {
    let mut out = Vec::new();
    for &node in idx.all(kinds::FOR_STATEMENT) {
        if let Some(l) = for_loop(idx, src, node) {
            out.push(l);
        }
    }
    for &node in idx.all(kinds::WHILE_STATEMENT) {
        if let Some(l) = while_loop(idx, src, node) {
            out.push(l);
        }
    }
    out.retain(|l| is_retry_like(idx, src, l));
    out.sort_by_key(|l| l.node.start_byte());
    out
}

/// The innermost retry loop that holds `node`.
pub fn loop_of<'a, 't>(loops: &'a [RetryLoop<'t>], node: Node<'_>) -> Option<&'a RetryLoop<'t>> {
    loops
        .iter()
        .filter(|l| syntax::contains(l.body, node))
        .max_by_key(|l| l.body.start_byte())
}

fn for_loop<'t>(idx: &NodeIndex<'t>, src: &str, node: Node<'t>) -> Option<RetryLoop<'t>> {
    let func = idx.enclosing(node, kinds::FUNCTION_DEFINITION)?;
    let left = node.field("left")?;
    let range = node.field("right")?;
    if range.kind() != kinds::CALL || syntax::callee(range, src) != "range" {
        return delay_loop(idx, src, node, func, left, range);
    }
    if left.kind() != kinds::IDENTIFIER {
        return None;
    }
    let args = syntax::positional_args(range);
    if args.iter().any(|a| syntax::text(*a, src).contains("len(")) {
        return None;
    }
    let env = Env::of(idx, src, Some(func));
    let values: Option<Vec<f64>> = args.iter().map(|a| env.eval(*a)).collect();
    let attempts = values.and_then(|v| match v.as_slice() {
        [end] => span(0.0, *end, 1.0),
        [start, end] => span(*start, *end, 1.0),
        [start, end, step] => span(*start, *end, *step),
        _ => None,
    });
    let counter = syntax::text(left, src);
    Some(RetryLoop {
        node,
        body: node.field("body")?,
        func,
        counter: (counter != "_").then(|| counter.to_string()),
        attempts,
        range: Some(range),
        bound: range,
        step: 1.0,
        limit_names: args
            .iter()
            .flat_map(|a| identifiers(syntax::text(*a, src)))
            .collect(),
        increment: None,
    })
}

/// `for delay in BACKOFF_DELAYS:` (or a literal tuple) that sleeps `delay` in its body: one
/// attempt per delay, the loop variable standing for the counter, with the delays as its
/// values. `for attempt, delay in enumerate(DELAYS, start=1):` counts with its first name. A
/// loop over anything else whose variable is no sleep's argument is a loop over data.
fn delay_loop<'t>(
    idx: &NodeIndex<'t>,
    src: &str,
    node: Node<'t>,
    func: Node<'t>,
    left: Node<'t>,
    right: Node<'t>,
) -> Option<RetryLoop<'t>> {
    let body = node.field("body")?;
    // Most loops over data never sleep: their calls are not named one by one.
    let body_text = src.get(body.start_byte()..body.end_byte())?;
    memchr::memmem::find(body_text.as_bytes(), b"sleep")?;
    let enumerated = right.kind() == kinds::CALL && syntax::callee(right, src) == "enumerate";
    let (sequence, counter, delay) = if enumerated {
        let names = crate::python::named_children(left);
        let [counter, delay] = names.as_slice() else {
            return None;
        };
        let sequence = *syntax::positional_args(right).first()?;
        (sequence, *counter, *delay)
    } else {
        (right, left, left)
    };
    if counter.kind() != kinds::IDENTIFIER || delay.kind() != kinds::IDENTIFIER {
        return None;
    }
    let delay_name = syntax::text(delay, src);
    let sleeps_delay = idx.within(body, kinds::CALL).iter().any(|c| {
        syntax::names_sleep(syntax::callee_name(*c, src))
            && c.field("arguments")
                .is_some_and(|a| identifiers(syntax::text(a, src)).any(|w| w == delay_name))
    });
    if !sleeps_delay {
        return None;
    }
    let env = Env::of(idx, src, Some(func));
    let literal = match sequence.kind() {
        kinds::IDENTIFIER => super::eval::module_constant(idx, syntax::text(sequence, src), src),
        _ => Some(sequence),
    }
    .filter(|s| matches!(s.kind(), kinds::TUPLE | kinds::LIST));
    let delays: Option<Vec<f64>> = literal.and_then(|l| {
        crate::python::named_children(l)
            .into_iter()
            .map(|d| env.eval(d))
            .collect()
    });
    let attempts = if enumerated {
        let start = syntax::positional_args(right)
            .get(1)
            .copied()
            .or_else(|| syntax::keyword_arg(right, "start", src))
            .map_or(Some(0.0), |s| env.eval(s));
        delays
            .zip(start)
            .and_then(|(d, s)| span(s, s + d.len() as f64, 1.0))
    } else {
        delays
    };
    Some(RetryLoop {
        node,
        body,
        func,
        counter: Some(syntax::text(counter, src).to_string()),
        attempts,
        range: None,
        bound: sequence,
        limit_names: identifiers(syntax::text(sequence, src)).collect(),
        increment: None,
        step: 1.0,
    })
}

fn while_loop<'t>(idx: &NodeIndex<'t>, src: &str, node: Node<'t>) -> Option<RetryLoop<'t>> {
    let func = idx.enclosing(node, kinds::FUNCTION_DEFINITION)?;
    let body = node.field("body")?;
    let condition = node.field("condition")?;
    let forever = condition.kind() == kinds::TRUE || syntax::text(condition, src) == "1";
    let counted = if forever {
        forever_counter(idx, src, body)
    } else {
        compared_counter(condition, src)
    };
    let Some((counter, limit, inclusive)) = counted else {
        return countdown_loop(idx, src, node, func, body, condition);
    };
    let increment = counter_update(idx, src, body, counter);
    // A `while` loop that never counts is a poll, not a bounded retry.
    increment?;
    let env = Env::of(idx, src, Some(func));
    let start = counter_start(idx, src, func, node, counter).and_then(|r| env.eval(r));
    let end = env.eval(limit);
    let attempts = start
        .zip(end)
        .and_then(|(s, e)| span(s, if inclusive { e + 1.0 } else { e }, 1.0));
    Some(RetryLoop {
        node,
        body,
        func,
        counter: Some(counter.to_string()),
        attempts,
        range: None,
        bound: limit.parent().unwrap_or(condition),
        limit_names: identifiers(syntax::text(limit, src)).collect(),
        increment,
        step: 1.0,
    })
}

/// `retries_left = MAX_RETRIES` then `while retries_left > 0:` (or `>= 1`, or `while
/// retries_left:`) with `retries_left -= 1` in the body: a loop that counts the attempts left.
/// Each attempt starts with the counter at the number of attempts still to make, down to 1.
fn countdown_loop<'t>(
    idx: &NodeIndex<'t>,
    src: &str,
    node: Node<'t>,
    func: Node<'t>,
    body: Node<'t>,
    condition: Node<'t>,
) -> Option<RetryLoop<'t>> {
    let counter = match condition.kind() {
        kinds::IDENTIFIER => syntax::text(condition, src),
        kinds::COMPARISON_OPERATOR if condition.named_child_count() == 2 => {
            let (a, b) = (condition.named_child(0)?, condition.named_child(1)?);
            let op = condition.child(1)?.kind();
            let bound = syntax::text(b, src);
            let above_zero = a.kind() == kinds::IDENTIFIER
                && matches!((op, bound), (">", "0") | (">=", "1") | ("!=", "0"));
            if !above_zero {
                return None;
            }
            syntax::text(a, src)
        }
        _ => return None,
    };
    let decrement = counter_update(idx, src, body, counter).filter(|a| {
        a.child(1).is_some_and(|op| op.kind() == "-=")
            && a.field("right")
                .is_some_and(|r| syntax::text(r, src) == "1")
    })?;
    let start = counter_start(idx, src, func, node, counter);
    let env = Env::of(idx, src, Some(func));
    let attempts = start.and_then(|r| env.eval(r)).and_then(|s| {
        let down = span(1.0, s + 1.0, 1.0)?;
        Some(down.into_iter().rev().collect())
    });
    Some(RetryLoop {
        node,
        body,
        func,
        counter: Some(counter.to_string()),
        attempts,
        range: None,
        bound: condition,
        limit_names: start
            .map(|r| identifiers(syntax::text(r, src)).collect())
            .unwrap_or_default(),
        increment: Some(decrement),
        step: -1.0,
    })
}

/// The first `counter += ...` (or `-=`, `*=`...) in the loop's `body`.
fn counter_update<'t>(
    idx: &NodeIndex<'t>,
    src: &str,
    body: Node<'t>,
    counter: &str,
) -> Option<Node<'t>> {
    idx.within(body, kinds::AUGMENTED_ASSIGNMENT)
        .iter()
        .copied()
        .find(|a| {
            a.field("left")
                .is_some_and(|l| syntax::text(l, src) == counter)
        })
}

/// The value last assigned to `counter` in `func` before the loop `node`.
fn counter_start<'t>(
    idx: &NodeIndex<'t>,
    src: &str,
    func: Node<'t>,
    node: Node<'_>,
    counter: &str,
) -> Option<Node<'t>> {
    idx.assigned_before(Some(func), counter, node.start_byte(), src)
}

/// `attempt < N` (or `N > attempt`): the counter, the limit and whether the limit is included.
fn compared_counter<'t, 's>(
    condition: Node<'t>,
    src: &'s str,
) -> Option<(&'s str, Node<'t>, bool)> {
    if condition.kind() != kinds::COMPARISON_OPERATOR || condition.named_child_count() != 2 {
        return None;
    }
    let (a, b) = (condition.named_child(0)?, condition.named_child(1)?);
    let op = condition.child(1)?.kind();
    match op {
        "<" | "<=" if a.kind() == kinds::IDENTIFIER => Some((syntax::text(a, src), b, op == "<=")),
        ">" | ">=" if b.kind() == kinds::IDENTIFIER => Some((syntax::text(b, src), a, op == ">=")),
        _ => None,
    }
}

/// In `while True:`, a counter compared in an `if` that leaves the loop (`if attempt >= N:
/// raise`): the counter, the limit, and whether the limit is itself an attempt.
fn forever_counter<'t, 's>(
    idx: &NodeIndex<'t>,
    src: &'s str,
    body: Node<'t>,
) -> Option<(&'s str, Node<'t>, bool)> {
    idx.within(body, kinds::IF_STATEMENT)
        .iter()
        .find_map(|stmt| {
            if !exits(idx, *stmt) {
                return None;
            }
            // `if not retryable or attempt >= self._max_attempts: raise error`: either side of
            // an `or` leaves, so the comparison bounds the loop.
            let cond = syntax::operands(stmt.field("condition")?, "or")
                .into_iter()
                .find(|c| c.kind() == kinds::COMPARISON_OPERATOR && c.named_child_count() == 2)?;
            let (a, b) = (cond.named_child(0)?, cond.named_child(1)?);
            let op = cond.child(1)?.kind();
            match op {
                ">=" | "==" if a.kind() == kinds::IDENTIFIER => {
                    Some((syntax::text(a, src), b, false))
                }
                ">" if a.kind() == kinds::IDENTIFIER => Some((syntax::text(a, src), b, true)),
                _ => None,
            }
        })
}

/// Whether an `if` statement's own block leaves the loop or the function.
pub fn exits(idx: &NodeIndex<'_>, stmt: Node<'_>) -> bool {
    let Some(block) = stmt.field("consequence") else {
        return false;
    };
    syntax::statements(block).iter().any(|s| {
        matches!(
            s.kind(),
            kinds::RAISE_STATEMENT | kinds::RETURN_STATEMENT | kinds::BREAK_STATEMENT
        )
    }) || !idx.within(block, kinds::RAISE_STATEMENT).is_empty()
}

fn span(start: f64, end: f64, step: f64) -> Option<Vec<f64>> {
    if step <= 0.0 || end <= start || (end - start) / step > MAX_ATTEMPTS {
        return None;
    }
    let mut out = Vec::new();
    let mut v = start;
    while v < end {
        out.push(v);
        v += step;
    }
    Some(out)
}

fn identifiers(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| {
            w.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        })
        .map(str::to_string)
}

const RETRY_WORDS: &[&str] = &["attempt", "retr", "tries", "try"];

fn is_retry_like(idx: &NodeIndex<'_>, src: &str, l: &RetryLoop<'_>) -> bool {
    let named = l.counter.iter().chain(l.limit_names.iter()).any(|n| {
        let lower = n.to_ascii_lowercase();
        RETRY_WORDS.iter().any(|w| lower.contains(w))
    });
    let tries = idx.within(l.body, kinds::TRY_STATEMENT);
    // `for tentativa in range(1, n + 1): try: ... else: return resposta.json()`: an attempt
    // that leaves the loop once it works, whatever the counter is called.
    let leaves_on_success = || {
        tries.iter().any(|t| {
            !idx.within(*t, kinds::RETURN_STATEMENT).is_empty()
                || !idx.within(*t, kinds::BREAK_STATEMENT).is_empty()
        })
    };
    named
        || !l.sleeps(idx, src).is_empty()
        || (!tries.is_empty() && (l.counter.is_none() || l.range.is_none() || leaves_on_success()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::ParsedFile;

    fn attempts(src: &str) -> Vec<Option<Vec<f64>>> {
        let file = ParsedFile::parse(src.to_string()).expect("grammar loads (every parse test)");
        retry_loops(file.index(), src)
            .into_iter()
            .map(|l| l.attempts)
            .collect()
    }

    #[test]
    fn counts_for_while_and_forever_loops() {
        let src = "N = 3\n\ndef a():\n    for attempt in range(1, N + 1):\n        sleep(1)\n\ndef b():\n    tries = 0\n    while tries < N:\n        tries += 1\n\ndef c():\n    n = 0\n    while True:\n        try:\n            return f()\n        except E:\n            n += 1\n            if n >= 4:\n                raise\n            sleep(n)\n\ndef d(items):\n    for i in range(len(items)):\n        g(i)\n";
        assert_eq!(
            attempts(src),
            [
                Some(vec![1.0, 2.0, 3.0]),
                Some(vec![0.0, 1.0, 2.0]),
                Some(vec![0.0, 1.0, 2.0, 3.0]),
            ]
        );
    }

    #[test]
    fn counts_down_the_attempts_left() {
        let src = "N = 3\n\ndef a():\n    left = N\n    while left > 0:\n        left -= 1\n        try:\n            return f()\n        except E:\n            sleep(1)\n\ndef b():\n    tries = 2\n    while tries:\n        tries -= 1\n        g()\n\ndef c():\n    n = 5\n    while n > 0:\n        n -= 2\n";
        assert_eq!(
            attempts(src),
            [Some(vec![3.0, 2.0, 1.0]), Some(vec![2.0, 1.0])]
        );
    }
}
