//! ERR004 traceback-lost: an `except ... as exc` handler logs the exception object at error
//! level without `exc_info`, so the log keeps the message and loses the stack.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "ERR004",
    doc: include_str!("../../../rules/err/ERR004.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Logging methods that record a failure; `exception` keeps the traceback by itself.
const LEVELS: &[&str] = &["error", "critical", "fatal", "warning", "warn", "log"];

/// The rule needs nothing beyond the file but the money path: the gate is the whole search.
fn gate(s: &Scan<'_>) -> bool {
    !lost(s.index(), s.src(), &loguru_loggers(s.facts)).is_empty()
}

/// The names loguru's logger is imported under (`from loguru import logger`). Its methods take
/// no `exc_info`: a keyword it is given only fills the message's `{}` fields, and the traceback
/// comes from `logger.exception(...)` or `logger.opt(exception=...)`.
fn loguru_loggers(facts: &crate::rules::facts::FileFacts) -> Vec<&str> {
    facts
        .imports
        .iter()
        .filter(|i| i.target == "loguru.logger")
        .map(|i| i.local.as_str())
        .collect()
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let loguru = cx.facts.map(loguru_loggers).unwrap_or_default();
    for (call, level, alias) in lost(idx, src, &loguru) {
        // A migration's or a thumbnailer's log line is not where a payment failure is traced.
        let function = crate::rules::idem::function_facts(cx, call);
        if !crate::rules::idem::on_money_path(cx, function) {
            continue;
        }
        // The code's own errors (`except RefundRejected as exc`) are raised on purpose, with a
        // message that says what went wrong; where they were raised is no news.
        if idx
            .enclosing(call, kinds::EXCEPT_CLAUSE)
            .is_some_and(|clause| {
                own_errors_only(cx, idx, clause)
                    || raised_by_its_try(clause, src)
                    || raised_on(idx, clause, alias, src)
                    || matches!(level, "warning" | "warn")
                        && (no_answer_only(clause, src) || answer_only(clause, src))
            })
        {
            continue;
        }
        let receiver = syntax::receiver(call)
            .map(|r| syntax::text(r, src))
            .unwrap_or("logger")
            .to_string();
        let finding = cx
            .report(&RULE, call)
            .arg("call", format!("{receiver}.{level}"))
            .arg("exc", alias.to_string());
        if loguru.contains(&receiver.as_str()) {
            finding.note("loguru");
        }
        finding.arg("receiver", receiver);
    }
}

/// Whether the handler sends the exception on (`raise`, `raise self.retry(exc=exc)`, `raise
/// PayoutFailed(...) from exc`): whoever catches it next has the traceback, and the log line is
/// only a note on the way.
fn raised_on(idx: &NodeIndex<'_>, clause: Node<'_>, alias: &str, src: &str) -> bool {
    idx.within(clause, kinds::RAISE_STATEMENT).iter().any(|r| {
        let text = syntax::text(*r, src);
        text.trim() == "raise" || syntax::has_word(text, alias)
    })
}

/// Whether every class caught is one of no answer (`stripe.APIConnectionError`,
/// `RateLimitError`, `httpx.TimeoutException`, `TRANSIENT_ERRORS`): logged as a warning, it is
/// an expected turn the handler deals with, and its traceback ends in the HTTP library.
fn no_answer_only(clause: Node<'_>, src: &str) -> bool {
    every_caught(clause, src, |last| {
        matches!(
            last,
            "APIConnectionError"
                | "RateLimitError"
                | "APIError"
                | "ConnectionError"
                | "ConnectError"
                | "TimeoutException"
                | "TooManyRequests"
                | "ServiceUnavailable"
        ) || super::timeout_read_as_failure::no_answer_class(last).is_some()
            || super::timeout_read_as_failure::transient_set(last)
    })
}

/// Whether the clause names classes, and every one's last name passes `test`.
fn every_caught(clause: Node<'_>, src: &str, test: impl Fn(&str) -> bool) -> bool {
    let types = syntax::except_types(clause);
    !types.is_empty()
        && types.iter().all(|t| {
            let text = syntax::text(*t, src);
            test(text.rsplit('.').next().unwrap_or(text))
        })
}

/// Whether every class caught is the provider's answer (`stripe.error.CardError`,
/// `InvalidRequestError`, `PaymentDeclined`): the message is the answer, and where the client
/// raised it is no news.
fn answer_only(clause: Node<'_>, src: &str) -> bool {
    every_caught(clause, src, |last| {
        matches!(
            last,
            "CardError" | "InvalidRequestError" | "HTTPStatusError"
        ) || super::timeout_read_as_failure::named_for_a_refusal(last)
    })
}

/// Whether the `try` raises every type its clause catches itself (`raise ValueError(f"capture
/// of {amount} outside ...")` in the body, `except ValueError as exc`): a check of the code's
/// own, whose message says what went wrong.
fn raised_by_its_try(clause: Node<'_>, src: &str) -> bool {
    let Some(body) = syntax::tried_body(clause) else {
        return false;
    };
    let body = syntax::text(body, src);
    let types = syntax::except_types(clause);
    !types.is_empty()
        && types.iter().all(|t| {
            let name = syntax::text(*t, src);
            !matches!(name, "Exception" | "BaseException")
                && body.contains(&format!("raise {name}("))
        })
}

/// Whether an `except` catches only exceptions the project defines: classes of the file, or
/// names imported from the project's own package (`from marketpay.refunds import RefundError`,
/// `from .errors import Declined`, `refunds.RefundError`).
fn own_errors_only(cx: &Ctx<'_>, idx: &NodeIndex<'_>, clause: Node<'_>) -> bool {
    let src = cx.src();
    // The file's top package: `app` of `app/billing/refunds.py` is one (`from app.billing...`),
    // `src/` and `lib/` are layout folders.
    let package = cx
        .path
        .split('/')
        .find(|p| !matches!(*p, "src" | "lib" | ""))
        .unwrap_or("");
    let project_module = |target: &str| {
        cx.project().is_some_and(|p| {
            target
                .rsplit_once('.')
                .is_some_and(|(module, _)| p.module(module).is_some())
        })
    };
    let types = syntax::except_types(clause);
    !types.is_empty()
        && types.iter().all(|t| {
            let text = syntax::text(*t, src);
            let root = text.split('.').next().unwrap_or(text);
            let last = text.rsplit('.').next().unwrap_or(text);
            let defined_here = idx.all(kinds::CLASS_DEFINITION).iter().any(|c| {
                c.field("name")
                    .is_some_and(|n| syntax::text(n, src) == last)
            });
            let imported_from_project =
                cx.facts
                    .and_then(|f| f.import_target(root))
                    .is_some_and(|target| {
                        target.starts_with('.')
                            || !package.is_empty() && target.split('.').next() == Some(package)
                            || project_module(target)
                    });
            !matches!(last, "Exception" | "BaseException")
                && (defined_here || imported_from_project)
        })
}

/// Each logging call that passes a caught exception without its traceback: the call, its
/// level and the exception's name. `loguru`: the names of loguru's logger, for which `exc_info`
/// keeps nothing.
fn lost<'t, 's>(
    idx: &NodeIndex<'t>,
    src: &'s str,
    loguru: &[&str],
) -> Vec<(Node<'t>, &'s str, &'s str)> {
    let mut out = Vec::new();
    for &clause in idx.all(kinds::EXCEPT_CLAUSE) {
        let Some(alias) = syntax::except_alias(clause, src) else {
            continue;
        };
        let Some(body) = syntax::except_body(clause) else {
            continue;
        };
        if reraises(body, idx) {
            // The exception travels on with its traceback; the log line is only a breadcrumb.
            continue;
        }
        if continues_a_loop(clause, body, idx) {
            // The attempt is retried: the stack of one transient failure is noise, and the
            // loop's final outcome is what needs it.
            continue;
        }
        for &call in idx.within(body, kinds::CALL) {
            let Some(level) = logged_level(call, src) else {
                continue;
            };
            let on_loguru =
                syntax::receiver(call).is_some_and(|r| loguru.contains(&syntax::text(r, src)));
            let keeps = !on_loguru && syntax::keyword_arg(call, "exc_info", src).is_some();
            if keeps || !passes(call, alias, src) {
                continue;
            }
            out.push((call, level, alias));
        }
    }
    out
}

/// `logger.error(...)`-like call on a logger-like receiver: its level.
fn logged_level<'s>(call: Node<'_>, src: &'s str) -> Option<&'s str> {
    let syntax::CallText {
        name: level,
        receiver,
        ..
    } = syntax::call_text(call, src);
    if !LEVELS.contains(&level) {
        return None;
    }
    let last = crate::rules::facts::last_name(receiver?);
    let last = last.trim_matches('_').to_ascii_lowercase();
    let loggerish = last == "log"
        || last == "logging"
        || last.ends_with("logger")
        || last.ends_with("_log")
        || last.starts_with("log_");
    if !loggerish {
        return None;
    }
    if level == "log" {
        // `logger.log(logging.INFO, ...)` is not a failure record.
        let first = syntax::positional_args(call)
            .first()
            .map(|a| syntax::text(*a, src).to_ascii_uppercase())?;
        if !["ERROR", "CRITICAL", "FATAL", "WARN"]
            .iter()
            .any(|l| first.contains(l))
        {
            return None;
        }
    }
    Some(level)
}

/// A `raise` anywhere in the handler: bare `raise` keeps the traceback, `raise X from exc`
/// chains it.
fn reraises(body: Node<'_>, idx: &NodeIndex<'_>) -> bool {
    !idx.within(body, kinds::RAISE_STATEMENT).is_empty()
}

/// The handler sits in a loop and does not leave it: the attempt will be retried.
fn continues_a_loop(clause: Node<'_>, body: Node<'_>, idx: &NodeIndex<'_>) -> bool {
    let in_loop = super::innermost_loop(clause, idx).is_some_and(|lp| {
        idx.enclosing(clause, kinds::FUNCTION_DEFINITION)
            .is_none_or(|f| f.start_byte() < lp.start_byte())
    });
    let leaves = syntax::statements(body).iter().any(|s| {
        matches!(
            s.kind(),
            kinds::RETURN_STATEMENT | kinds::BREAK_STATEMENT | kinds::RAISE_STATEMENT
        )
    });
    in_loop && !leaves
}

/// Whether the call hands the exception object to the logger: as an argument, through
/// `str()`/`repr()`, `%` or `.format()`, or inside an f-string.
fn passes(call: Node<'_>, alias: &str, src: &str) -> bool {
    let Some(args) = call.field("arguments") else {
        return false;
    };
    let mut cursor = args.walk();
    let values: Vec<Node<'_>> = args
        .named_children(&mut cursor)
        .map(|a| {
            if a.kind() == kinds::KEYWORD_ARGUMENT {
                a.field("value").unwrap_or(a)
            } else {
                a
            }
        })
        .collect();
    values.into_iter().any(|v| mentions(v, alias, src, 4))
}

fn mentions(node: Node<'_>, alias: &str, src: &str, depth: u8) -> bool {
    if depth == 0 {
        return false;
    }
    let children = || {
        let mut cursor = node.walk();
        node.named_children(&mut cursor).collect::<Vec<_>>()
    };
    match node.kind() {
        kinds::IDENTIFIER => syntax::text(node, src) == alias,
        kinds::STRING => children()
            .into_iter()
            .filter(|c| c.kind() == "interpolation")
            .filter_map(|c| c.field("expression"))
            .any(|e| mentions(e, alias, src, depth - 1)),
        kinds::CALL => {
            let name = syntax::callee_name(node, src);
            let converts = matches!(name, "str" | "repr" | "format");
            converts
                && node
                    .field("arguments")
                    .is_some_and(|a| mentions(a, alias, src, depth - 1))
        }
        kinds::ARGUMENT_LIST
        | kinds::BINARY_OPERATOR
        | kinds::TUPLE
        | kinds::PARENTHESIZED_EXPRESSION
        | kinds::KEYWORD_ARGUMENT => children()
            .into_iter()
            .any(|c| mentions(c, alias, src, depth - 1)),
        _ => false,
    }
}
