//! ERR006 timeout-read-as-failure: the `except` that catches a timeout of a payment call (first
//! of its `try` to catch one) records the payment as failed or declined, or hands the caller a
//! plain "no". A timeout says only that no answer came in time: the provider may have charged,
//! captured or paid out all the same. Marked failed, the order invites the payer to pay again,
//! and the money that did move belongs to no order.
//!
//! Left alone: a handler that raises (the caller, or the task queue, still learns that the
//! outcome is unknown) having written nothing, one that asks again or hands the payment to a check (`reconcile`,
//! `poll`, `retry`), one that records a state of its own for the unknown (`"pending"`,
//! `"timed_out"`), and broad handlers that only return (ERR001 reads those).
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::review::Severity;
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "ERR006",
    doc: include_str!("../../../rules/err/ERR006.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is an `except` of code, not of a test, that catches a timeout, or a state of
/// an unknown outcome given up on.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && (opens_all_readings(s.index(), s.src())
            // A clause of a client's own error class, which the change may have built its
            // error of an unknown outcome on (`except ErrorSquare`), and a failure marked: read
            // by `base_of_an_unknown` alone.
            || s.index()
                .all(kinds::EXCEPT_CLAUSE)
                .iter()
                .any(|&c| caught_names(c, s.src()).into_iter().any(own_error_class))
                && mentions(s.src(), FAILURE_STEMS))
    // A tuple of the errors of a request never sent, and a retryable status handed back on the
    // last attempt, are read in files that catch the transport's errors, by class or by a
    // tuple of the module (`except _NOT_DELIVERED`): the first test opens them.
}

/// Whether the file may hold any of the rule's readings: a clause that catches a timeout or a
/// tuple of the module, a state of an unknown outcome given up on, or a clause that may catch a
/// kind of the change's own unknown (`except (Refused, StripeConnectionError)` beside `except
/// StripeOutcomeUnknown`) with a failure marked.
fn opens_all_readings(idx: &NodeIndex<'_>, src: &str) -> bool {
    idx.all(kinds::EXCEPT_CLAUSE)
        .iter()
        .any(|&c| catches_timeout(c, src).is_some() || catches_a_constant(c, src))
        || mentions_an_unknown_given_up(src)
}

/// The text's part of `opens_all_readings`: words of a state of an unknown outcome given up on,
/// or of a clause that may catch a kind of the change's own unknown.
fn mentions_an_unknown_given_up(src: &str) -> bool {
    mentions(src, super::unknown_given_up::UNKNOWN_WORDS)
            // A count tested, and a failure marked.
            && mentions(src, &["ttempt", "tries", "retr"])
            && mentions(src, &["FAIL", "fail", "Fail"])
        || mentions(src, &["nknown", "navailable"])
            && mentions(src, &["FAIL", "fail", "Fail"])
            && mentions(src, &["except ("])
}

/// A class named for errors that is not Python's own (`ErrorSquare`, `AdyenError`; not
/// `ValueError`, `Exception`).
fn own_error_class(name: &str) -> bool {
    (name.contains("Error") || name.contains("Exception"))
        && !matches!(name, "Exception" | "BaseException")
        && !BUILTIN_PREFIXES.iter().any(|p| {
            name.strip_prefix(p)
                .is_some_and(|rest| matches!(rest, "Error" | "Exception"))
        })
}

fn mentions(src: &str, words: &[&str]) -> bool {
    words
        .iter()
        .any(|w| memchr::memmem::find(src.as_bytes(), w.as_bytes()).is_some())
}

/// Stems of the words that mark a payment failed or refused, for the gate: `mark_failed`,
/// `rechazar_reembolso`, `Status.DECLINED`.
const FAILURE_STEMS: &[&str] = &[
    "fail",
    "Fail",
    "FAIL",
    "reject",
    "Reject",
    "REJECT",
    "refus",
    "REFUS",
    "declin",
    "DECLIN",
    "rechaz",
    "RECHAZ",
    "odrzuc",
    "ODRZUC",
    "rifiut",
    "RIFIUT",
    "abgelehnt",
    "geweigerd",
    "mislukt",
    "echou",
    "fallid",
    "fallit",
];

/// `_NOT_DELIVERED = (httpx.ConnectError, httpx.TimeoutException, PayPalUnavailable)`, caught
/// by the file as the errors of a request that never left: a read timeout among them, raised
/// after the request was sent. What the code does for a request never delivered (mark it
/// failed, release what it held, send it again under a new key) it does for one the provider
/// may have carried out.
fn timeout_counted_unsent(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    // Most files name no such tuple: their text is asked before their statements.
    let bytes = src.as_bytes();
    if ![
        "SENT",
        "DELIVERED",
        "REACHED",
        "_sent",
        "_delivered",
        "_reached",
        "SEND",
        "_send",
        "ENVOI",
        "ENVOY",
        "SENDE",
        "VERZ",
        "ENVI",
        "INVI",
        "WYSL",
    ]
    .iter()
    .any(|w| memchr::memmem::find(bytes, w.as_bytes()).is_some())
    {
        return;
    }
    for assignment in crate::rules::retry::eval::module_assignments(idx) {
        let Some(name) = crate::rules::retry::eval::assigned_name(assignment, src) else {
            continue;
        };
        if !names_unsent(name) {
            continue;
        }
        let Some(members) = assignment
            .field("right")
            .filter(|r| matches!(r.kind(), kinds::TUPLE | kinds::LIST | kinds::SET))
        else {
            continue;
        };
        let caught = idx.all(kinds::EXCEPT_CLAUSE).iter().any(|&c| {
            syntax::except_types(c)
                .iter()
                .any(|t| syntax::text(*t, src) == name)
        });
        if !caught {
            continue;
        }
        let timeout = crate::python::named_children(members)
            .into_iter()
            .find(|m| read_timeout_class(facts::last_name(syntax::text(*m, src))));
        if let Some(timeout) = timeout {
            cx.report(&RULE, timeout)
                .arg("constant", name)
                .arg("timeout", syntax::text(timeout, src))
                .note("not_sent");
        }
    }
}

/// States a record is sent from: put back there, it goes out again with the next run.
const TO_SEND: &[&str] = &[
    "pending",
    "queued",
    "ready",
    "scheduled",
    "unsent",
    "to_send",
];

/// An unknown outcome put back to be sent again with no key: `except (PaddleTransientError,
/// PaddleOutcomeUnknown): await _transition(charge, SUBMITTING, RenewalChargeStatus.PENDING)` in
/// the run that picks `RenewalCharge.filter(status=RenewalChargeStatus.PENDING)` and sends
/// `paddle.create_one_time_charge(...)` with no idempotency key. If the first request went
/// through, the next run pays again.
fn resent_without_a_key(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    for &clause in idx.all(kinds::EXCEPT_CLAUSE) {
        if !caught_names(clause, src)
            .into_iter()
            .any(names_an_unknown_outcome)
        {
            continue;
        }
        let (Some(handler), Some(try_statement)) = (syntax::except_body(clause), clause.parent())
        else {
            continue;
        };
        // The state written back: a call handed it, or an assignment of it.
        let Some((mark, state)) = idx.within(handler, kinds::ATTRIBUTE).iter().find_map(|a| {
            let last = a.field("attribute").map(|n| syntax::text(n, src))?;
            let lower = last.to_ascii_lowercase();
            TO_SEND.contains(&lower.as_str()).then(|| {
                let shown = crate::rules::pay::statement_of(*a).unwrap_or(*a);
                (shown, syntax::text(*a, src))
            })
        }) else {
            continue;
        };
        let (Some(func), Some(body)) = (
            idx.enclosing(clause, kinds::FUNCTION_DEFINITION),
            try_statement.field("body"),
        ) else {
            continue;
        };
        // The run picks its records by that state, before it sends.
        let Some(picked) = idx.within(func, kinds::CALL).iter().copied().find(|c| {
            c.end_byte() <= try_statement.start_byte()
                && matches!(idx.callee_name(*c, src), "filter" | "where" | "filter_by")
                && c.field("arguments")
                    .is_some_and(|a| syntax::text(a, src).contains(state))
        }) else {
            continue;
        };
        // A request under a key is answered once, however often it is sent.
        let body_text = syntax::text(body, src);
        let keyed = syntax::code_names_idempotency(body_text)
            || idx.within(body, kinds::CALL).iter().any(|c| {
                cx.change
                    .functions_named(cx.side, idx.callee_name(*c, src))
                    .any(|(_, f)| f.mentions_idempotency)
            });
        if keyed {
            continue;
        }
        let Some((step, step_line)) = paying_step(cx, idx, func, body) else {
            continue;
        };
        cx.report(&RULE, clause)
            .arg("function", facts::qualname(func, idx, src))
            .arg("step", step)
            .arg("step_line", step_line.to_string())
            .arg("mark", syntax::normalized(mark, src))
            .arg("mark_line", syntax::lines(mark).0.to_string())
            .arg("state", state.to_string())
            .arg("picked", crate::rules::pay::first_line(picked, src))
            .arg("picked_line", syntax::lines(picked).0.to_string())
            .note("resent");
    }
}

/// `if response.status_code not in RETRYABLE_STATUS_CODES or attempt == attempts: return
/// response` in a retry loop of a function that raises its error of no answer
/// (`GoCardlessUnavailable`) when its transport errors run out: on the last attempt a 5xx, a 429
/// or a 409 is handed back as if it were the provider's final answer, and the caller takes it
/// for a refusal, while the payment may have been made.
fn last_answer_passed_on(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    // Most files test no set of retryable statuses: their text is asked before their `if`s.
    let bytes = src.as_bytes();
    if memchr::memmem::find(bytes, b"not in").is_none()
        || ![
            "etry", "ETRY", "etri", "ETRI", "ransient", "RANSIENT", "emporary", "EMPORARY",
        ]
        .iter()
        .any(|w| memchr::memmem::find(bytes, w.as_bytes()).is_some())
    {
        return;
    }
    for &branch in idx.all(kinds::IF_STATEMENT) {
        let Some(condition) = branch
            .field("condition")
            .filter(|c| c.kind() == kinds::BOOLEAN_OPERATOR)
        else {
            continue;
        };
        if condition.child(1).is_none_or(|o| o.kind() != "or") {
            continue;
        }
        let (Some(left), Some(right)) = (condition.field("left"), condition.field("right")) else {
            continue;
        };
        let (status, last) = if not_a_retryable_status(left, src) {
            (left, right)
        } else if not_a_retryable_status(right, src) {
            (right, left)
        } else {
            continue;
        };
        if !tests_the_last_attempt(last, src) {
            continue;
        }
        let hands_back = branch.field("consequence").is_some_and(|b| {
            syntax::statements(b)
                .last()
                .is_some_and(|s| s.kind() == kinds::RETURN_STATEMENT)
        });
        let in_a_loop = idx.enclosing(branch, kinds::FOR_STATEMENT).is_some()
            || idx.enclosing(branch, kinds::WHILE_STATEMENT).is_some();
        let Some(func) = idx.enclosing(branch, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        // The function's own error of no answer, raised when the attempts run out.
        let unknown = idx
            .within(func, kinds::RAISE_STATEMENT)
            .iter()
            .find_map(|r| {
                let class = raised_class(*r, src)?;
                no_answer_class(class).is_some().then_some(class)
            });
        let (true, true, Some(unknown)) = (hands_back, in_a_loop, unknown) else {
            continue;
        };
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, condition)
            .arg("function", function.clone())
            .arg("test", syntax::normalized(condition, src))
            .arg(
                "retryable",
                status
                    .named_child(1)
                    .map_or_else(String::new, |set| syntax::normalized(set, src)),
            )
            .arg("unknown", unknown.to_string())
            .note("last_answer");
        finding.function = function;
    }
}

/// `response.status_code not in RETRYABLE_STATUS_CODES`: a status tested against a set named
/// for those worth another attempt.
fn not_a_retryable_status(test: Node<'_>, src: &str) -> bool {
    if test.kind() != kinds::COMPARISON_OPERATOR
        || test.child(1).is_none_or(|o| o.kind() != "not in")
    {
        return false;
    }
    let (Some(status), Some(set)) = (test.named_child(0), test.named_child(1)) else {
        return false;
    };
    syntax::text(status, src).contains("status")
        && syntax::name_words(syntax::text(set, src)).iter().any(|w| {
            matches!(
                w.as_str(),
                "retryable" | "retriable" | "retry" | "transient" | "temporary"
            )
        })
}

/// `attempt == attempts`, `attempt >= self._max_attempts`: the last attempt.
fn tests_the_last_attempt(test: Node<'_>, src: &str) -> bool {
    if test.kind() != kinds::COMPARISON_OPERATOR
        || test
            .child(1)
            .is_none_or(|o| !matches!(o.kind(), "==" | ">=" | ">"))
    {
        return false;
    }
    let text = syntax::text(test, src).to_ascii_lowercase();
    text.contains("attempt") || text.contains("tries") || text.contains("retries")
}

/// A name for the errors of a request that never left: `_NOT_DELIVERED`, `NEVER_SENT`,
/// `UNSENT_ERRORS`, `NOT_REACHED`.
fn names_unsent(name: &str) -> bool {
    let words = syntax::name_words(name);
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    has(&["unsent", "undelivered"])
        || has(&["not", "never", "before", "pre"])
            && has(&["sent", "delivered", "reached", "send", "sending", "deliver"])
        // `ERREURS_AVANT_ENVOI`, `FEHLER_VOR_DEM_SENDEN`, `NIET_VERZONDEN`, `ANTES_DE_ENVIAR`.
        || has(&[
            "avant", "non", "vor", "nicht", "niet", "voor", "antes", "no", "nao", "prima", "przed",
            "nie",
        ]) && has(&[
            "envoi", "envoyer", "envoye", "envoyee", "senden", "versand", "gesendet", "verschickt",
            "verzonden", "verzenden", "verstuurd", "envio", "enviar", "enviado", "enviada", "invio",
            "inviare", "inviato", "inviata", "wyslaniem", "wyslania", "wyslane", "wyslany",
        ])
}

/// A timeout raised after the request may have been sent: `httpx.TimeoutException` (its read
/// and write timeouts with it), `requests.Timeout`, `ReadTimeout`, `asyncio.TimeoutError`. Not
/// `ConnectTimeout` or `PoolTimeout`, raised before a byte left.
fn read_timeout_class(name: &str) -> bool {
    matches!(
        name,
        "TimeoutException"
            | "Timeout"
            | "ReadTimeout"
            | "WriteTimeout"
            | "TimeoutError"
            | "ReadTimeoutError"
            | "ServerTimeoutError"
    )
}

/// Whether a clause catches a tuple kept under a module constant (`except _NOT_DELIVERED`,
/// `except _TRANSPORT_ERRORS`): what it holds is read from the module.
fn catches_a_constant(clause: Node<'_>, src: &str) -> bool {
    syntax::except_types(clause).iter().any(|t| {
        let name = facts::last_name(syntax::text(*t, src));
        name.len() >= 3
            && name
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b == b'_' || b.is_ascii_digit())
    })
}

/// How a clause comes to catch a timeout.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caught {
    /// It names one: `requests.Timeout`, `httpx.TimeoutException`, `asyncio.TimeoutError`.
    Named,
    /// It catches a family of errors timeouts belong to: `requests.RequestException`,
    /// `httpx.HTTPError`, `aiohttp.ClientError`, a client's own base error (`GatewayError`).
    Family,
    /// It catches everything: `Exception`, bare. A `return None` there is ERR001's.
    Everything,
}

/// A class named for a request whose outcome is not known: a timeout of the answer (not of
/// the connect), or an unknown, uncertain, ambiguous or indeterminate outcome.
fn names_an_unknown_outcome(name: &str) -> bool {
    names_a_timeout(name) && !name.starts_with("Connect")
        || syntax::name_words(name).iter().any(|w| {
            matches!(
                w.as_str(),
                "unknown" | "uncertain" | "ambiguous" | "indeterminate"
            ) || FOREIGN_UNKNOWNS.contains(&w.as_str())
        })
}

/// A class named for a timeout: `ReadTimeout`, `GatewayTimeoutError`, `AcquirerTimedOut`.
pub(crate) fn names_a_timeout(name: &str) -> bool {
    syntax::contains_lowercase(name, "timeout") || syntax::contains_lowercase(name, "timedout")
}

/// Exception names a timeout is raised as, or is a subclass of: the transport's whole family.
const TRANSPORT_FAMILIES: &[&str] = &[
    "RequestException",
    "HTTPError",
    "RequestError",
    "TransportError",
    "ClientError",
    "OSError",
    "IOError",
    "APIConnectionError",
];

pub(crate) fn catches_timeout(clause: Node<'_>, src: &str) -> Option<Caught> {
    if clause.kind() != kinds::EXCEPT_CLAUSE {
        return None;
    }
    let types = syntax::except_types(clause);
    if types.is_empty() {
        return Some(Caught::Everything);
    }
    let mut caught = None;
    for t in types {
        let name = syntax::text(t, src);
        let last = name.rsplit('.').next().unwrap_or(name);
        // `ConnectTimeout` alone: the request never left, and nothing can have been charged;
        // nor had it when no connection of the pool came free (`httpx.PoolTimeout`).
        let named = names_a_timeout(last) && !last.starts_with("Connect") && last != "PoolTimeout";
        if named {
            return Some(Caught::Named);
        }
        // `requests.HTTPError` is a status the provider answered with; `httpx.HTTPError` is
        // the whole family, transport errors with it.
        let family = TRANSPORT_FAMILIES.contains(&last)
            && !(last == "HTTPError" && (name.starts_with("requests") || name == "HTTPError"));
        if matches!(last, "Exception" | "BaseException") {
            caught = Some(Caught::Everything);
        } else if (family
            || provider_family(last)
            || client_family(last, src)
            || unavailable(last)
            || transient_set(last)
            || transient_class(last))
            && caught.is_none()
        {
            caught = Some(Caught::Family);
        }
    }
    caught
}

/// The base error of a client the file uses, named for it: `PaywaveError` beside
/// `PaywaveClient`, `AcmePayException` beside `AcmePayGateway`. The client raises its timeouts
/// as one of its own errors.
fn client_family(name: &str, src: &str) -> bool {
    let brand = name
        .strip_suffix("Error")
        .or_else(|| name.strip_suffix("Exception"))
        .unwrap_or("");
    // Python's own errors name no client (`KeyError`, `ValueError`, `OSError`).
    if brand.len() < 3
        || !brand.starts_with(|c: char| c.is_ascii_uppercase())
        || BUILTIN_PREFIXES.contains(&brand)
    {
        return false;
    }
    if imported_from_its_client(name, brand, src) {
        return true;
    }
    let bytes = src.as_bytes();
    memchr::memmem::find_iter(bytes, brand.as_bytes()).any(|at| {
        let rest = &bytes[at + brand.len()..];
        ["Client", "Gateway", "API", "Api"].iter().any(|kind| {
            // `PaywaveClient`, not `PaywaveClientConfig`.
            rest.starts_with(kind.as_bytes())
                && !rest
                    .get(kind.len())
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        })
    })
}

/// `from rentals.ewallet import EWalletError, default_client`: the error comes from the module
/// of the client it is named for (`ewallet`, `paywave_client`), not from a module of errors or
/// of the domain.
fn imported_from_its_client(name: &str, brand: &str, src: &str) -> bool {
    let brand = brand.to_ascii_lowercase();
    // `from pretix.base.payment import PaymentException`: a module of the domain, whose error
    // its own code raises for refusals as much as for a provider that did not answer.
    if DOMAIN_NOUNS.contains(&brand.as_str()) {
        return false;
    }
    // The module named for the brand, as the last part of a `from` path: `.ewallet import`,
    // `from paywave_client import`. A lowercase brand is rare elsewhere in code.
    memchr::memmem::find_iter(src.as_bytes(), brand.as_bytes()).any(|at| {
        let before = &src[..at];
        if !(before.ends_with('.') || before.ends_with("from ")) {
            return false;
        }
        let rest = &src[at + brand.len()..];
        let suffix_len = [
            "_client", "client", "_api", "api", "_gateway", "gateway", "_sdk", "sdk",
        ]
        .iter()
        .find(|s| rest.starts_with(**s))
        .map_or(0, |s| s.len());
        let Some(names) = rest[suffix_len..].strip_prefix(" import ") else {
            return false;
        };
        let line_start = before.rfind('\n').map_or(0, |n| n + 1);
        if !src[line_start..].starts_with("from ") {
            return false;
        }
        // The names imported: up to the line's end, or to the closing parenthesis.
        let names = if names.trim_start().starts_with('(') {
            names.split_once(')').map_or(names, |(n, _)| n)
        } else {
            names.split_once('\n').map_or(names, |(n, _)| n)
        };
        syntax::has_word(names, name)
    })
}

/// Nouns of the payment domain, which name a module of the service rather than a client.
const DOMAIN_NOUNS: &[&str] = &[
    "payment",
    "payments",
    "billing",
    "checkout",
    "order",
    "orders",
    "refund",
    "refunds",
    "charge",
    "charges",
    "payout",
    "payouts",
    "transaction",
    "transactions",
    "invoice",
    "invoices",
    "subscription",
    "subscriptions",
    "wallet",
    "ledger",
];

/// What is left of Python's own errors without `Error`: none of them belongs to a client.
const BUILTIN_PREFIXES: &[&str] = &[
    "Key",
    "Value",
    "Type",
    "Attribute",
    "Index",
    "Runtime",
    "Import",
    "ModuleNotFound",
    "Lookup",
    "Assertion",
    "NotImplemented",
    "ZeroDivision",
    "Permission",
    "FileNotFound",
    "FileExists",
    "Connection",
    "Timeout",
    "Name",
    "Syntax",
    "Unicode",
    "UnicodeDecode",
    "UnicodeEncode",
    "Overflow",
    "Recursion",
    "Arithmetic",
    "Buffer",
    "EOF",
    "Memory",
    "Reference",
    "System",
    "Environment",
    "Interrupted",
    "BrokenPipe",
    "ChildProcess",
    "IsADirectory",
    "NotADirectory",
    "Process",
    "Validation",
    "Integrity",
    "Database",
    "Operational",
    "Programming",
    "Http",
    "HTTP",
    "Request",
    "JSONDecode",
    "Decode",
    "Parse",
    "Config",
    "Improperly",
];

/// An error class named for a failure worth trying again (`GoCardlessTransientError`,
/// `RetryableError`, `TemporaryFailure`): a client raises its timeouts as one.
fn transient_class(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_uppercase())
        && syntax::name_words(name).iter().any(|w| {
            matches!(
                w.as_str(),
                "transient" | "retryable" | "retriable" | "temporary"
            )
        })
}

/// Whether the change defines every class the clause names, and its errors of a request that
/// got no answer (`GoCardlessTimeout`, `ProviderUnavailable`, `TransientError`) that are built
/// on them or caught by another clause of the `try`, none of them one of those classes or built
/// on one: the clause catches no timeout.
fn lineage_leaves_out_timeouts(cx: &Ctx<'_>, clause: Node<'_>, src: &str) -> bool {
    let caught = caught_names(clause, src);
    let defined = |name: &str| cx.change.defines_class(cx.side, name);
    // `except requests.ConnectionError: raise GoCardlessError(...)` in the client: a reset
    // after the request left comes as the caught class, whatever the lineage says.
    if caught.is_empty()
        || !caught.iter().all(|c| defined(c))
        || caught
            .iter()
            .any(|c| cx.change.raised_unanswered(cx.side, c))
    {
        return false;
    }
    // The caught classes and what they are built on, as far as the change defines them: a
    // timeout of the same client is built on one of these (`GoCardlessError`); another
    // client's (`CaptureTimeout(Exception)`) says nothing of this clause.
    let mut family: Vec<&str> = caught.clone();
    let mut at = 0;
    while let Some(&class) = family.get(at).filter(|_| family.len() < 16) {
        at += 1;
        for b in cx.change.class_bases_of(cx.side, class) {
            let b = b.rsplit('.').next().unwrap_or(b);
            if defined(b) && !family.contains(&b) {
                family.push(b);
            }
        }
    }
    // `except KlarnaApiError: fail` beside `except KlarnaOutcomeUnknown: park`, the unknown
    // defined on a base of its own: the code sends its timeouts to the other clause.
    let beside: Vec<&str> = clause
        .parent()
        .map(crate::python::named_children)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.kind() == kinds::EXCEPT_CLAUSE && c.id() != clause.id())
        .flat_map(|c| caught_names(c, src))
        .collect();
    let mut timeouts = cx
        .change
        .no_answer_classes(cx.side)
        .iter()
        .map(|(c, _)| c.as_str())
        .filter(|c| {
            beside.contains(c)
                || caught.iter().any(|r| same_client(c, r))
                || family
                    .iter()
                    .any(|r| *c == *r || cx.change.subclass_of(cx.side, c, r))
        });
    let mut any = false;
    let none_caught = timeouts.all(|t| {
        any = true;
        caught
            .iter()
            .all(|c| *c != t && !cx.change.subclass_of(cx.side, t, c))
    });
    any && none_caught
}

/// Whether a class of no answer is the same client's as an error class: `GoCardlessUnavailable`
/// beside `GoCardlessError`, `AdyenTimeout` beside `AdyenApiError`. Defined on a base of its
/// own, it is where that client's timeouts go.
fn same_client(no_answer: &str, error: &str) -> bool {
    let brand = error
        .strip_suffix("Error")
        .or_else(|| error.strip_suffix("Exception"))
        .unwrap_or("");
    let first_word = brand
        .char_indices()
        .skip(1)
        .find(|(_, c)| c.is_ascii_uppercase())
        .map_or(brand, |(i, _)| &brand[..i]);
    let stem = if first_word.len() >= 5 {
        first_word
    } else {
        brand
    };
    stem.len() >= 3 && no_answer.starts_with(stem) && no_answer != error
}

/// The classes an `except` clause names, by their last names (`GoCardlessAPIError` of
/// `gocardless.GoCardlessAPIError`).
/// The last names of the types the clauses before `clause` in its `try` catch.
fn caught_before<'s>(try_statement: Node<'_>, clause: Node<'_>, src: &'s str) -> Vec<&'s str> {
    crate::python::named_children(try_statement)
        .into_iter()
        .take_while(|c| c.id() != clause.id())
        .filter(|c| c.kind() == kinds::EXCEPT_CLAUSE)
        .flat_map(|c| caught_names(c, src))
        .collect()
}

/// The classes the clauses of `try_statement` after `clause` catch, as written.
fn caught_after<'s>(try_statement: Node<'_>, clause: Node<'_>, src: &'s str) -> Vec<&'s str> {
    crate::python::named_children(try_statement)
        .into_iter()
        .skip_while(|c| c.id() != clause.id())
        .skip(1)
        .filter(|c| c.kind() == kinds::EXCEPT_CLAUSE)
        .flat_map(|c| caught_names(c, src))
        .collect()
}

fn caught_names<'s>(clause: Node<'_>, src: &'s str) -> Vec<&'s str> {
    syntax::except_types(clause)
        .into_iter()
        .map(|t| facts::last_name(syntax::text(t, src)))
        .collect()
}

/// Whether a class is named for a request that got no answer: `Some(true)` for a timeout
/// (`GoCardlessTimeout`, not `ConnectTimeout`), `Some(false)` for an unavailable service or a
/// failure worth trying again (`ProviderUnavailable`, `TransientError`).
pub(crate) fn no_answer_class(name: &str) -> Option<bool> {
    if names_a_timeout(name) && !name.starts_with("Connect") {
        Some(true)
    } else if unavailable(name) || transient_class(name) {
        Some(false)
    } else {
        None
    }
}

/// A timeout class of the change (`GoCardlessTimeout`) built on a class `clause` names
/// (`GoCardlessAPIError`) and on none an earlier clause of the `try` names: the timeout and
/// the class it is caught as.
fn timeout_built_on(
    cx: &Ctx<'_>,
    try_statement: Node<'_>,
    clause: Node<'_>,
    src: &str,
) -> Option<(String, String)> {
    let caught = caught_names(clause, src);
    let earlier = caught_before(try_statement, clause, src);
    let is_a = |t: &str, c: &str| t == c || cx.change.subclass_of(cx.side, t, c);
    cx.change
        .no_answer_classes(cx.side)
        .iter()
        .filter(|(_, timeout)| *timeout)
        .find_map(|(t, _)| {
            let base = caught.iter().find(|c| **c != t && is_a(t, c))?;
            (!earlier.iter().any(|e| is_a(t, e))).then(|| (t.clone(), base.to_string()))
        })
}

/// A tuple of errors kept under a name that says they are the ones to retry
/// (`stripe_client.RETRYABLE_ERRORS`, `TRANSIENT_ERRORS`): timeouts are among them.
pub(crate) fn transient_set(name: &str) -> bool {
    name.bytes()
        .all(|b| b.is_ascii_uppercase() || b == b'_' || b.is_ascii_digit())
        && syntax::name_words(name).iter().any(|w| {
            matches!(
                w.as_str(),
                "retryable" | "retriable" | "transient" | "network" | "timeout" | "timeouts"
            )
        })
}

/// An error named for a service that did not answer (`PaywaveUnavailable`,
/// `ProviderUnreachable`): what clients raise for a timeout, a dropped connection or a 5xx.
pub(crate) fn unavailable(name: &str) -> bool {
    let lower = |w: &str| syntax::contains_lowercase(name, w);
    if !(lower("unavailable")
        || lower("unreachable")
        || lower("unknown")
        || lower("indeterminate")
        || lower("ambiguous")
        || lower("uncertain")
        || FOREIGN_UNKNOWNS.iter().any(|w| lower(w)))
    {
        return false;
    }
    let words = syntax::name_words(name);
    let has = |w: &str| words.iter().any(|x| x == w);
    if words.iter().any(|w| FOREIGN_UNKNOWNS.contains(&w.as_str())) {
        return true;
    }
    // Or one named for the unknown itself: `PayPalUnknownOutcome`, `OutcomeUnknown`,
    // `IndeterminateResult`.
    has("unavailable")
        || has("unreachable")
        || has("indeterminate")
        || has("ambiguous")
        || has("uncertain")
        || has("unknown") && (has("outcome") || has("result") || has("state") || has("status"))
        // `CkoUnknown`, `AdyenUnknown`: a client's error named for the unknown alone.
        || words.len() > 1 && words.last().is_some_and(|w| w == "unknown")
}

/// A client's own base error (`GatewayError`, `StripeError`, `ProviderAPIException`): SDKs and
/// in-house clients alike raise their timeouts as one of these, so catching it catches them.
/// Not an error that names a refusal (`CardDeclinedError`, `PaymentRejected`).
fn provider_family(name: &str) -> bool {
    if !(name.ends_with("Error") || name.ends_with("Exception")) {
        return false;
    }
    let words = syntax::name_words(name);
    // `SquareClientError`: a brand's "client error" is HTTP's, a 4xx, beside its own base
    // (`SquareError`); `ClientError` alone is aiohttp's transport family, read above.
    if words.len() >= 3 && words[words.len() - 2] == "client" {
        return false;
    }
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    has(&[
        "gateway",
        "provider",
        "psp",
        "api",
        "client",
        "sdk",
        "upstream",
        "remote",
        "acquirer",
        "processor",
        "stripe",
        "adyen",
        "braintree",
        "mollie",
        "razorpay",
        "square",
        "paypal",
    ]) && !has(&[
        "card",
        "declined",
        "decline",
        "rejected",
        "reject",
        "refused",
        "invalid",
        "validation",
        "auth",
        "authentication",
        "permission",
        "insufficient",
        "fraud",
        "signature",
        "config",
        "configuration",
        // `aiohttp.ClientResponseError`, `HTTPStatusError`: a status the provider answered with.
        "response",
        "status",
        // `GatewayRequestError`, Stripe's `InvalidRequestError`: a request turned away (a 4xx).
        // httpx's transport family, `RequestError` alone, is read as such above.
        "request",
        "bad",
    ])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    // A file the gate opened only for a client's own error class is read for the change's
    // unknown built on it, and only where the change has one.
    // Each clause's timeout, read once for the gate's test and for the clause below.
    let clauses = idx.all(kinds::EXCEPT_CLAUSE);
    let timeouts: Vec<Option<Caught>> = clauses.iter().map(|&c| catches_timeout(c, src)).collect();
    let only_bases = !(timeouts.iter().any(Option::is_some)
        || clauses.iter().any(|&c| catches_a_constant(c, src))
        || mentions_an_unknown_given_up(src));
    if only_bases && cx.change.no_answer_classes(cx.side).is_empty() {
        // The change may have dropped the file's only handler of an unknown outcome.
        unknown_handler_dropped(cx, idx, clauses, &[]);
        return;
    }
    if !only_bases {
        left_out_of_the_wrapper(cx, idx, src);
        timeout_counted_unsent(cx, idx, src);
        resent_without_a_key(cx, idx, src);
        last_answer_passed_on(cx, idx, src);
    }
    let mut given_up = Vec::new();
    let mut marked = Vec::new();
    // Asked only where the change defines classes on bases: most files define none.
    let classes = cx.change.side(cx.side).any(|f| !f.class_bases.is_empty());
    for (&clause, &timeout) in clauses.iter().zip(&timeouts) {
        if only_bases && (!classes || base_of_an_unknown(cx, clause, src).is_none()) {
            continue;
        }
        let shadowed = (classes && timeout != Some(Caught::Named))
            .then(|| shadows_an_unknown(cx, clause, src))
            .flatten();
        // `except PayoutRefused`, named for a refusal, where the change builds
        // `PayoutReadTimeout(PayoutRefused)`: it catches the timeout all the same.
        let lineage = (classes && timeout.is_none() && shadowed.is_none())
            .then(|| {
                let try_statement = clause.parent()?;
                timeout_built_on(cx, try_statement, clause, src)
            })
            .flatten();
        // `except (StripeRequestRefused, StripeConnectionError)` where the change builds
        // `StripeConnectionError(StripeOutcomeUnknown)`: a kind of its own unknown outcome.
        let kind_of = (classes
            && timeout != Some(Caught::Named)
            && timeout != Some(Caught::Everything)
            && shadowed.is_none()
            && lineage.is_none())
        .then(|| kind_of_an_unknown(cx, clause, src))
        .flatten();
        // `except ErrorSquare` where the change builds `ResultadoDesconocido(ErrorSquare)` and
        // no clause before takes it: the unknown outcome comes here.
        let base_of = (classes
            && timeout != Some(Caught::Named)
            && timeout != Some(Caught::Everything)
            && shadowed.is_none()
            && lineage.is_none()
            && kind_of.is_none())
        .then(|| base_of_an_unknown(cx, clause, src))
        .flatten();
        let kind_of = kind_of.or(base_of.clone());
        let Some(caught) = timeout.or((shadowed.is_some()
            || lineage.is_some()
            || kind_of.is_some())
        .then_some(Caught::Family)) else {
            continue;
        };
        let Some(handler) = syntax::except_body(clause) else {
            continue;
        };
        // The mark is for the errors of the clause that came with a status (a 5xx), under a
        // class named for no answer.
        let mut server_error = false;
        let (mark, test) = match failure_mark(idx, handler, src, caught) {
            // `if exc.status is None: ...; return` ahead of the mark: the errors with no status,
            // a timeout's, leave before it. Under a class named for no answer the rest are 5xx,
            // as undecided; under a family they may be refusals, and nothing is said.
            Some(mark) => match statusless_leave_before(idx, clause, handler, mark.line, src) {
                Some(condition) if no_answer_caught(clause, src) => {
                    server_error = true;
                    (mark, Some(condition))
                }
                Some(_) => continue,
                // `if exc.status_code is not None: mark failed` under a class named for no
                // answer: the branch is for its 5xx, as undecided as its timeouts.
                None => match no_answer_caught(clause, src)
                    .then(|| status_branch(idx, clause, handler, src))
                    .flatten()
                {
                    Some((mark, test, true)) => {
                        server_error = true;
                        (mark, Some(test))
                    }
                    _ => (mark, None),
                },
            },
            None if caught == Caught::Family => match status_branch(idx, clause, handler, src) {
                Some((mark, test, answered)) => {
                    server_error = answered;
                    (mark, Some(test))
                }
                None => {
                    raised_as_definite(cx, idx, clause, handler);
                    gave_up(cx, idx, clause, &mut given_up);
                    made_up_answer(cx, idx, clause, handler);
                    continue;
                }
            },
            None => {
                if caught == Caught::Named {
                    raised_as_definite(cx, idx, clause, handler);
                    gave_up(cx, idx, clause, &mut given_up);
                }
                made_up_answer(cx, idx, clause, handler);
                continue;
            }
        };
        if test.is_none() && marked_only_for_an_answer(idx, clause, handler, mark.line, src) {
            continue;
        }
        let Some(func) = idx.enclosing(clause, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        // Asked only of the few handlers that mark a failure: a parent is found from the root.
        let Some(try_statement) = syntax::try_of(clause) else {
            continue;
        };
        // `class GoCardlessTimeout(GoCardlessAPIError)`: whatever an earlier clause is named
        // for, the timeout is one of this clause's errors and none of the earlier ones'.
        let mut built_on = lineage;
        if built_on.is_none()
            && caught_earlier(try_statement, clause, src)
            && !unknown_first_caught_here(try_statement, clause, src)
        {
            built_on = (classes && caught == Caught::Family && shadowed.is_none())
                .then(|| timeout_built_on(cx, try_statement, clause, src))
                .flatten();
            if built_on.is_none() {
                continue;
            }
        }
        // `except GatewayUnavailable`, which the client raises only from `except
        // requests.ConnectTimeout`: the request never left. Beside it, a refusal the client
        // raises from no transport failure (`except (GatewayUnavailable, RequestRejected)`).
        let names = caught_names(clause, src);
        if caught == Caught::Family
            && shadowed.is_none()
            && built_on.is_none()
            && kind_of.is_none()
            && names.iter().any(|c| cx.change.raised_unsent(cx.side, c))
            && names.iter().all(|c| {
                cx.change.raised_unsent(cx.side, c)
                    || named_for_a_refusal(c)
                        && cx.change.defines_class(cx.side, c)
                        && !cx.change.raised_unanswered(cx.side, c)
                        && !cx
                            .change
                            .no_answer_classes(cx.side)
                            .iter()
                            .any(|(n, _)| cx.change.subclass_of(cx.side, n, c))
            })
        {
            continue;
        }
        // `except GoCardlessAPIError`, where the change builds its timeouts on another branch
        // of the client's errors: they pass this clause by.
        if caught == Caught::Family
            && shadowed.is_none()
            && built_on.is_none()
            && kind_of.is_none()
            && classes
            && lineage_leaves_out_timeouts(cx, clause, src)
        {
            continue;
        }
        let Some(body) = try_statement.field("body") else {
            continue;
        };
        let Some((step, step_line)) = paying_step(cx, idx, func, body)
            .or_else(|| step_of_a_named_unknown(idx, clause, func, body, src))
        else {
            // A read whose failure is given a state (`status="canceled"`): no payment is
            // marked, but the code after may act on the state as the provider's.
            made_up_answer(cx, idx, clause, handler);
            continue;
        };
        if mark.raises && rolled_back(idx, func, clause, handler, src) {
            continue;
        }
        // `return "refund_failed"` to a run that only counts it (`summary[_refund(...)] += 1`):
        // no caller acts on the word, and the record is left for the next run.
        if !mark.persistent && !mark.raises && only_counted(idx, func, src) {
            continue;
        }
        let persistent = mark.persistent;
        let raises = mark.raised_after;
        marked.push(clause.id());
        let finding = cx
            .report(&RULE, clause)
            .arg("function", facts::qualname(func, idx, src))
            .arg("step", step)
            .arg("step_line", step_line.to_string())
            .arg("mark", mark.text)
            .arg("mark_line", mark.line.to_string());
        if let Some((timeout, base)) = built_on {
            finding
                .arg("caught", base)
                .arg("timeout", timeout)
                .note("built_on");
        } else if let Some((base, unknown)) = base_of {
            finding
                .arg("caught", base)
                .arg("unknown", unknown)
                .note("base_of_unknown");
        } else if let Some((kind, unknown)) = kind_of {
            finding
                .arg("caught", kind)
                .arg("unknown", unknown)
                .note("kind_of_unknown");
        } else if let Some((unknown, line, base)) = shadowed {
            finding
                .arg("caught", base)
                .arg("shadowed", unknown)
                .arg("shadowed_line", line.to_string())
                .note("shadowed");
        } else if caught != Caught::Named {
            let types = super::caught_types(clause, src);
            let caught = if types.is_empty() {
                "except:".to_string()
            } else {
                types
            };
            finding.arg("caught", caught);
            // A class named for no answer is no family a timeout hides in: its message says so.
            if !server_error {
                finding.note("family");
            }
        }
        if let Some(test) = test {
            let note = if server_error {
                "server_error"
            } else if test.starts_with("isinstance(") || test.contains(" isinstance(") {
                "class_test"
            } else {
                "status_test"
            };
            finding.arg("test", test).note(note);
        }
        if persistent {
            finding.note("recorded");
            if raises {
                finding.note("raised");
            }
        } else {
            finding.note("returned").severity(Severity::Important);
        }
    }
    unknown_given_up(cx, idx, src, &given_up);
    unknown_handler_dropped(cx, idx, clauses, &marked);
}

/// `except MollieOnbereikbaar: status = ONBEKEND` ahead of `except MollieFout: status =
/// MISLUKT`, and the change drops the first: the client's error for an answer that never came
/// now falls to the handler of its refusals. Read only of handlers the change touched that mark
/// a failure around a paying step, where the old version of the function kept the outcome
/// unknown for an error the new one names nowhere.
fn unknown_handler_dropped(
    cx: &mut Ctx<'_>,
    idx: &NodeIndex<'_>,
    clauses: &[Node<'_>],
    marked: &[usize],
) {
    let src = cx.src();
    let candidates: Vec<(Node<'_>, Node<'_>, Mark)> = clauses
        .iter()
        .copied()
        .filter(|c| !marked.contains(&c.id()))
        .filter(|c| {
            let (first, last) = syntax::lines(*c);
            cx.touches_added(first, last)
        })
        .filter_map(|clause| {
            let handler = syntax::except_body(clause)?;
            let mark = failure_mark(idx, handler, src, Caught::Family)?;
            (!marked_only_for_an_answer(idx, clause, handler, mark.line, src))
                .then_some((clause, handler, mark))
        })
        .collect();
    if candidates.is_empty() {
        return;
    }
    let Some(old) = cx.other.get() else {
        return;
    };
    let (old_idx, old_src) = (old.index(), old.text());
    let imports = cx.facts.map(|f| f.imports.as_slice()).unwrap_or_default();
    let module_of = |name: &str| {
        imports
            .iter()
            .find(|i| i.local == name)
            .and_then(|i| i.target.rsplit_once('.'))
            .map(|(module, _)| module.to_string())
    };
    for (clause, _, mark) in candidates {
        let Some(func) = idx.enclosing(clause, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let Some(try_statement) = syntax::try_of(clause) else {
            continue;
        };
        let Some(body) = try_statement.field("body") else {
            continue;
        };
        let Some((step, step_line)) = paying_step(cx, idx, func, body) else {
            continue;
        };
        let qualname = facts::qualname(func, idx, src);
        let Some(before) = facts::function_by_qualname(old_idx, old_src, &qualname) else {
            continue;
        };
        // Every class the new `try` still catches, by last name.
        let named_now: Vec<&str> = crate::python::named_children(try_statement)
            .into_iter()
            .filter(|c| c.kind() == kinds::EXCEPT_CLAUSE)
            .flat_map(|c| caught_names(c, src))
            .map(facts::last_name)
            .collect();
        let caught: Vec<&str> = caught_names(clause, src);
        let broad = syntax::is_broad_except(clause, src);
        let found = old_idx
            .within(before, kinds::EXCEPT_CLAUSE)
            .iter()
            .copied()
            .filter(|o| {
                syntax::try_of(*o)
                    .and_then(|t| t.field("body"))
                    .is_some_and(|b| syntax::text(b, old_src).contains(step.as_str()))
            })
            .find_map(|kept| {
                let handler = syntax::except_body(kept)?;
                let unknown = caught_names(kept, old_src).into_iter().find(|a| {
                    let last = facts::last_name(a);
                    !named_now.contains(&last)
                        && (no_answer_class(last).is_some()
                            || says_unknown(&syntax::text(handler, old_src).to_ascii_lowercase()))
                })?;
                if failure_mark(old_idx, handler, old_src, Caught::Family).is_some() {
                    return None;
                }
                let last = facts::last_name(unknown);
                // That the dropped error is one of those the clause catches: the change's
                // classes say so, or the old `try` caught it ahead of the same class, or the
                // file imports both from one module, the client's.
                let later: Vec<&str> = caught_after(kept.parent()?, kept, old_src)
                    .into_iter()
                    .map(facts::last_name)
                    .collect();
                let taken = broad
                    || caught.iter().any(|b| {
                        let b = facts::last_name(b);
                        cx.change.subclass_of(cx.side, last, b)
                            || later.contains(&b)
                            || !cx.change.defines_class(cx.side, last)
                                && module_of(last).is_some()
                                && module_of(last) == module_of(b)
                                && provider_error_word(b)
                    });
                taken.then(|| (unknown.to_string(), syntax::lines(kept).0))
            });
        let Some((unknown, unknown_line)) = found else {
            continue;
        };
        let persistent = mark.persistent;
        let types = super::caught_types(clause, src);
        let finding = cx
            .report(&RULE, clause)
            .arg("function", qualname)
            .arg("step", step)
            .arg("step_line", step_line.to_string())
            .arg("mark", mark.text)
            .arg("mark_line", mark.line.to_string())
            .arg(
                "caught",
                if types.is_empty() {
                    "except:".to_string()
                } else {
                    types
                },
            )
            .arg("unknown", unknown)
            .arg("unknown_line", unknown_line.to_string())
            .note("dropped");
        if !persistent {
            finding.severity(Severity::Important);
        }
    }
}

/// A class named for a client's errors in general (`ErrorMercadoPago`, `MollieFout`,
/// `AdyenFehler`): the family its timeouts are raised in.
fn provider_error_word(name: &str) -> bool {
    syntax::name_words(name).iter().any(|w| {
        matches!(
            w.as_str(),
            "error"
                | "exception"
                | "fout"
                | "fehler"
                | "erreur"
                | "errore"
                | "blad"
                | "fel"
                | "erro"
        )
    })
}

/// A class the clause names that the change builds on one of its classes of an unknown outcome
/// (`StripeConnectionError(StripeOutcomeUnknown)`, `GatewayTimeoutError(ProviderUnavailable)`):
/// the class caught and the unknown it is a kind of.
fn kind_of_an_unknown(cx: &Ctx<'_>, clause: Node<'_>, src: &str) -> Option<(String, String)> {
    let caught = caught_names(clause, src);
    cx.change
        .no_answer_classes(cx.side)
        .iter()
        .find_map(|(unknown, _)| {
            let kind = caught
                .iter()
                .find(|c| **c != unknown && cx.change.subclass_of(cx.side, c, unknown))?;
            Some((kind.to_string(), unknown.clone()))
        })
}

/// `except ErrorSquare` where the change defines its error of an unknown outcome on it
/// (`class ResultadoDesconocido(ErrorSquare)`) and no clause before this one names that error
/// or a base of it between: the clause takes the unknown outcome. The class caught, as
/// written, and the unknown.
fn base_of_an_unknown(cx: &Ctx<'_>, clause: Node<'_>, src: &str) -> Option<(String, String)> {
    // Only a class the change defines can be a base of its unknown: a library's is not asked.
    let caught: Vec<&str> = caught_names(clause, src)
        .into_iter()
        .filter(|c| cx.change.defines_class(cx.side, c))
        .collect();
    if caught.is_empty() {
        return None;
    }
    let try_statement = clause.parent()?;
    let earlier = caught_before(try_statement, clause, src);
    cx.change
        .no_answer_classes(cx.side)
        .iter()
        .find_map(|(unknown, _)| {
            let base = caught.iter().find(|c| {
                facts::last_name(c) != unknown
                    && cx.change.subclass_of(cx.side, unknown, facts::last_name(c))
            })?;
            let taken_before = earlier.iter().any(|e| {
                let e = facts::last_name(e);
                e == unknown || cx.change.subclass_of(cx.side, unknown, e)
            });
            (!taken_before).then(|| (base.to_string(), unknown.clone()))
        })
}

/// `except AuthorizeNetError: mark failed` ahead of `except OutcomeUnknown: mark unknown`, where
/// the change defines `OutcomeUnknown(AuthorizeNetError)`: the earlier clause takes every
/// unknown outcome, and the later one never runs. The later type and its line, and the type of
/// `clause` it is a kind of, as written.
fn shadows_an_unknown(cx: &Ctx<'_>, clause: Node<'_>, src: &str) -> Option<(String, u32, String)> {
    let caught: Vec<&str> = syntax::except_types(clause)
        .into_iter()
        .map(|t| syntax::text(t, src))
        .collect();
    if caught.is_empty() {
        return None;
    }
    let mut later = clause.next_named_sibling();
    while let Some(next) = later {
        later = next.next_named_sibling();
        if next.kind() != kinds::EXCEPT_CLAUSE {
            continue;
        }
        for t in syntax::except_types(next) {
            let name = syntax::text(t, src);
            let last = facts::last_name(name);
            let of_an_unknown = unavailable(last) || names_an_unknown_outcome(last);
            if caught.iter().any(|c| facts::last_name(c) == last) || !of_an_unknown {
                continue;
            }
            if let Some(base) = caught
                .iter()
                .find(|base| cx.change.subclass_of(cx.side, last, facts::last_name(base)))
            {
                return Some((name.to_string(), syntax::lines(next).0, base.to_string()));
            }
        }
    }
    None
}

/// `except (LiqPayError, LiqPayOutcomeUnknown)`: a clause that names the client's error of an
/// unknown outcome says the call in its `try` can end in one, whatever the call is named
/// (`self._liqpay.hold(...)`). That call, the first of the body that is not a log line nor a
/// read.
fn step_of_a_named_unknown(
    idx: &NodeIndex<'_>,
    clause: Node<'_>,
    func: Node<'_>,
    body: Node<'_>,
    src: &str,
) -> Option<(String, u32)> {
    let names_unknown = syntax::except_types(clause).into_iter().any(|t| {
        let words = syntax::name_words(facts::last_name(syntax::text(t, src)));
        words
            .iter()
            .any(|w| w == "unknown" || w == "uncertain" || w == "indeterminate")
            && words.iter().any(|w| w == "outcome" || w == "result")
    });
    if !names_unknown {
        return None;
    }
    idx.within(body, kinds::CALL)
        .iter()
        .copied()
        .filter(|c| super::owned_by(*c, func, idx))
        .map(|c| (syntax::callee(c, src), syntax::lines(c).0))
        .find(|(callee, _)| {
            !callee.is_empty() && !facts::only_records(callee) && !syntax::named_for_a_read(callee)
        })
        .map(|(callee, line)| (callee.to_string(), line))
}

/// Whether every call of `func` in the file is the key of a count (`summary[_settle(...)] +=
/// 1`), and there is one at least.
fn only_counted(idx: &NodeIndex<'_>, func: Node<'_>, src: &str) -> bool {
    let name = syntax::function_name(func, src);
    let mut calls = idx
        .all(kinds::CALL)
        .iter()
        .filter(|c| idx.callee_name(**c, src) == name)
        .peekable();
    calls.peek().is_some()
        && calls.all(|c| {
            c.parent()
                .filter(|p| p.kind() == kinds::SUBSCRIPT)
                .and_then(|p| p.parent())
                .is_some_and(|a| {
                    a.kind() == kinds::AUGMENTED_ASSIGNMENT
                        && a.field("left").is_some_and(|l| syntax::contains(l, *c))
                })
        })
}

/// A handler that puts a made-up definite answer in place of the one that never came, which
/// the code after the `try` acts on (`made_up_answer`).
fn made_up_answer(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, clause: Node<'_>, handler: Node<'_>) {
    let src = cx.src();
    let Some(found) = super::made_up_answer::made_up(idx, clause, handler, src) else {
        return;
    };
    let Some(func) = idx.enclosing(clause, kinds::FUNCTION_DEFINITION) else {
        return;
    };
    let qualname = facts::qualname(func, idx, src);
    let function = cx.facts.and_then(|f| f.function(&qualname)).cloned();
    let on_path = cx.on_payment_path(function.as_ref());
    let finding = cx
        .report(&RULE, clause)
        .arg("function", qualname)
        .arg("step", found.step)
        .arg("step_line", found.step_line.to_string())
        .arg("state", found.state)
        .arg("mark", syntax::normalized(found.mark, src))
        .arg("mark_line", syntax::lines(found.mark).0.to_string())
        .arg("read_line", found.read_line.to_string())
        .note("made_up");
    if !on_path {
        finding.severity(Severity::Important);
    }
}

/// Records of an unknown outcome marked failed once their count of attempts is past its
/// maximum, in a function that keeps no timeout handler of its own (a job over the records).
fn unknown_given_up(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str, reported: &[usize]) {
    // The functions that name an unknown outcome, found from the words' places in the file:
    // one pass over the text, not one per function.
    let mut funcs: Vec<Node<'_>> = Vec::new();
    for word in super::unknown_given_up::UNKNOWN_WORDS {
        for at in memchr::memmem::find_iter(src.as_bytes(), word.as_bytes()) {
            let Some(func) = idx
                .all(kinds::FUNCTION_DEFINITION)
                .iter()
                .copied()
                .filter(|f| f.start_byte() <= at && at < f.end_byte())
                .max_by_key(|f| f.start_byte())
            else {
                continue;
            };
            if !funcs.iter().any(|f| f.id() == func.id()) {
                funcs.push(func);
            }
        }
    }
    funcs.sort_by_key(|f| f.start_byte());
    for func in funcs {
        // A function that keeps its own timeouts as unknown is read by `gave_up`, where the
        // count it tests may be one of refusals (a dunning run's declines).
        if idx
            .within(func, kinds::EXCEPT_CLAUSE)
            .iter()
            .any(|c| catches_timeout(*c, src).is_some_and(|k| k != Caught::Everything))
        {
            continue;
        }
        let Some(found) = super::unknown_given_up::unknown_marked_failed(idx, func, src) else {
            continue;
        };
        if reported.contains(&found.mark.id()) {
            continue;
        }
        let because = syntax::text(found.because, src)
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        // `RefundStatus.UNKNOWN` rather than its last name alone.
        let unknown = found
            .unknown
            .parent()
            .filter(|a| a.kind() == kinds::ATTRIBUTE)
            .unwrap_or(found.unknown);
        cx.report(&RULE, found.mark)
            .arg("function", facts::qualname(func, idx, src))
            .arg("mark", syntax::normalized(found.mark, src))
            .arg("because", because)
            .arg("because_line", syntax::lines(found.because).0.to_string())
            .arg("unknown", syntax::normalized(unknown, src))
            .arg("unknown_line", syntax::lines(found.unknown).0.to_string())
            .note("unknown_given_up");
    }
}

/// A timeout handler that keeps the outcome unknown, in a function that marks the record failed
/// all the same once its attempts are spent (`unknown_given_up`). `reported`: the marks already
/// reported, as one loop or test may follow several handlers.
fn gave_up(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, clause: Node<'_>, reported: &mut Vec<usize>) {
    let src = cx.src();
    let (Some(func), Some(try_statement)) = (
        idx.enclosing(clause, kinds::FUNCTION_DEFINITION),
        idx.enclosing(clause, kinds::TRY_STATEMENT),
    ) else {
        return;
    };
    let qualname = facts::qualname(func, idx, src);
    let facts = cx.facts.and_then(|f| f.function(&qualname));
    let Some(found) =
        super::unknown_given_up::given_up(idx, func, facts, try_statement, clause, src)
    else {
        return;
    };
    if reported.contains(&found.mark.id()) {
        return;
    }
    let Some((step, step_line)) = try_statement
        .field("body")
        .and_then(|body| paying_step(cx, idx, func, body))
    else {
        return;
    };
    reported.push(found.mark.id());
    let because = syntax::text(found.because, src)
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .trim_end_matches(':')
        .to_string();
    let finding = cx
        .report(&RULE, found.mark)
        .arg("function", qualname)
        .arg("step", step)
        .arg("step_line", step_line.to_string())
        .arg("mark", syntax::normalized(found.mark, src))
        .arg("because", because)
        .arg("because_line", syntax::lines(found.because).0.to_string())
        .arg("clause_line", syntax::lines(clause).0.to_string());
    finding.note(found.note);
}

/// A method of a client class that calls the provider outside the context the class's other
/// methods wrap their calls in (`with _unknown_on_transport_error("refund.create"):`), a
/// context manager of the file that turns transport errors into the error of an unknown
/// outcome: this call's timeouts and 5xx escape as the SDK's own errors, which its callers take
/// for a refusal.
fn left_out_of_the_wrapper(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    if !src.contains("contextmanager") {
        return;
    }
    // The file's context managers that raise an error of an unknown outcome.
    let wrappers: Vec<&str> = idx
        .all(kinds::FUNCTION_DEFINITION)
        .iter()
        .filter(|f| {
            idx.decorated(**f).is_some_and(|d| {
                syntax::decorators(d)
                    .iter()
                    .any(|dec| syntax::text(*dec, src).contains("contextmanager"))
            }) && idx
                .within(**f, kinds::RAISE_STATEMENT)
                .iter()
                .any(|r| raised_class(*r, src).is_some_and(unavailable))
        })
        .map(|f| syntax::function_name(*f, src))
        .collect();
    if wrappers.is_empty() {
        return;
    }
    // A request to the provider: an HTTP verb on a client, or a call of an SDK the file imports
    // (`stripe.Refund.create`), not a read of the answer (`resp.json()`).
    let modules: Vec<String> = cx
        .facts
        .map(|f| {
            f.imports
                .iter()
                .filter(|i| i.local == i.target)
                .map(|i| i.local.clone())
                .collect()
        })
        .unwrap_or_default();
    let sends = |call: Node<'_>| {
        let callee = syntax::callee(call, src);
        facts::http_by_name(&syntax::call_text(call, src))
            || callee.matches('.').count() >= 2
                && callee
                    .split('.')
                    .next()
                    .is_some_and(|root| modules.iter().any(|m| m == root))
    };
    let wrapped_by = |with: Node<'_>| {
        let clause = syntax::with_clause(with, src);
        wrappers
            .iter()
            .find(|w| clause.contains(&format!("{w}(")))
            .copied()
    };
    for &class in idx.all(kinds::CLASS_DEFINITION) {
        let methods = facts::own_methods(idx, class);
        // (root, name) of the calls the wrapped methods make inside the wrapper, and which.
        let mut kinds_of_calls: Vec<(&str, &str)> = Vec::new();
        let mut wrapper = None;
        let mut wrapped = 0;
        for &m in &methods {
            let mut inside = false;
            for &with in idx.within(m, kinds::WITH_STATEMENT) {
                let Some(w) = wrapped_by(with) else {
                    continue;
                };
                inside = true;
                wrapper = Some(w);
                for &call in idx.within(with, kinds::CALL).iter().filter(|c| sends(**c)) {
                    // `self.http.post`: the client the method holds, by its attribute.
                    let callee = syntax::callee(call, src);
                    let callee = callee.strip_prefix("self.").unwrap_or(callee);
                    if let (Some(root), Some(name)) =
                        (callee.split('.').next(), callee.rsplit('.').next())
                        && callee.contains('.')
                    {
                        kinds_of_calls.push((root, name));
                    }
                }
            }
            wrapped += usize::from(inside);
        }
        let Some(wrapper) = wrapper.filter(|_| wrapped >= 2) else {
            continue;
        };
        for &m in &methods {
            for &call in idx.within(m, kinds::CALL).iter().filter(|c| sends(**c)) {
                let written = syntax::callee(call, src);
                let callee = written.strip_prefix("self.").unwrap_or(written);
                let (Some(root), Some(name)) =
                    (callee.split('.').next(), callee.rsplit('.').next())
                else {
                    continue;
                };
                if !callee.contains('.')
                    || !kinds_of_calls.contains(&(root, name))
                    || idx
                        .within(m, kinds::WITH_STATEMENT)
                        .iter()
                        .any(|w| wrapped_by(*w).is_some() && syntax::contains(*w, call))
                {
                    continue;
                }
                let function = facts::qualname(m, idx, src);
                let finding = cx
                    .report(&RULE, call)
                    .arg("function", function.clone())
                    .arg("step", written.to_string())
                    .arg("wrapper", wrapper.to_string())
                    .arg("wrapped", wrapped.to_string())
                    .note("unwrapped")
                    .severity(Severity::Important);
                finding.function = function;
                break;
            }
        }
    }
}

/// Errors of a connection alone: the request never reached the provider, or its connection
/// broke; a read timeout is none of them (`requests.ReadTimeout`, `httpx.ReadTimeout`).
const CONNECTION_ONLY: &[&str] = &[
    "ConnectionError",
    "ConnectError",
    "NetworkError",
    "ClientConnectionError",
    "ClientConnectorError",
    "ConnectTimeout",
    "ConnectionRefusedError",
];

/// Whether an `except` clause names connection errors and nothing else (`except
/// httpx.ConnectError:`).
fn catches_connection_only(clause: Node<'_>, src: &str) -> bool {
    let types = syntax::except_types(clause);
    !types.is_empty()
        && types.iter().all(|t| {
            let name = syntax::text(*t, src);
            CONNECTION_ONLY.contains(&name.rsplit('.').next().unwrap_or(name))
        })
}

/// A client that raises its error of an unknown outcome for connection errors alone (`except
/// requests.ConnectionError: raise PaystackUnknownOutcome(...)`) and, in a later clause of the
/// family (`except requests.RequestException: raise PaystackError(...)`), its error of a
/// definite failure: a read timeout, which is no connection error, is raised as a refusal,
/// though the provider may have done what was asked.
fn raised_as_definite(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, clause: Node<'_>, handler: Node<'_>) {
    let src = cx.src();
    let Some(raised) = raised_error(handler, src) else {
        return;
    };
    // `_Transient`, `RetryableGatewayError`: an error the caller sends the request again on, as
    // it was, is no refusal.
    let transient = syntax::name_words(raised).iter().any(|w| {
        matches!(
            w.as_str(),
            "transient" | "retryable" | "retriable" | "again"
        )
    });
    // `raise TransferConnectionError(...)` where the change builds it on its
    // `TransferOutcomeUnknown`: the unknown, by a narrower name.
    let a_kind_of_the_unknown = subclass_of_the_unknown(idx, raised, src)
        || cx
            .change
            .no_answer_classes(cx.side)
            .iter()
            .any(|(unknown, _)| cx.change.subclass_of(cx.side, raised, unknown));
    if unavailable(raised) || names_a_timeout(raised) || transient || a_kind_of_the_unknown {
        return;
    }
    let Some(try_statement) = syntax::try_of(clause) else {
        return;
    };
    // `except asyncio.TimeoutError: raise CheckoutRequestError(504, ...)`: a timeout named and
    // raised as the error the module raises for a provider's refusal elsewhere
    // (`raise CheckoutRequestError(resp.status, ...)`). Not one named for a payment still
    // under way (`RefundPending`), nor a subclass of the unknown.
    let named = catches_timeout(clause, src) == Some(Caught::Named);
    // `except requests.ReadTimeout: raise StripeError(...)` beside `except
    // requests.RequestException: error = APIConnectionError(...)`, a subclass of it the module
    // makes for a request whose outcome is unknown: the timeout goes out as the plain base,
    // which callers that catch the unknown do not catch.
    let beside = named
        .then(|| unknown_subclass_beside(idx, try_statement, clause, raised, src))
        .flatten();
    // `raise RefusAdyen(...)`: named for a refusal, it needs no raise elsewhere to say so.
    if named
        && beside.is_none()
        && (syntax::name_words(raised).iter().any(|w| {
            matches!(
                w.as_str(),
                "pending" | "processing" | "progress" | "flight" | "unconfirmed" | "unsettled"
            )
        }) || !(named_for_a_refusal(raised) || made_elsewhere(idx, clause, raised, src))
            || subclass_of_the_unknown(idx, raised, src))
    {
        return;
    }
    let earlier = crate::python::named_children(try_statement)
        .into_iter()
        .take_while(|c| c.id() != clause.id())
        .filter(|c| c.kind() == kinds::EXCEPT_CLAUSE)
        .find_map(|c| {
            let unknown = raised_error(syntax::except_body(c)?, src)
                .filter(|u| unavailable(u) || names_a_timeout(u))?;
            catches_connection_only(c, src).then(|| {
                let names: Vec<&str> = syntax::except_types(c)
                    .iter()
                    .map(|t| syntax::text(*t, src))
                    .collect();
                (names.join(", "), unknown)
            })
        });
    // Or no clause before it at all, while the function raises its error of an unknown
    // outcome for other answers (`if resp.status_code >= 500: raise OutcomeUnknown(...)`): the
    // whole family, timeouts with it, goes to the refusal.
    // Or only clauses of connection errors before it, which try again (`except
    // httpx.ConnectError: last_problem = ...`) while the function raises its unknown once the
    // attempts run out: the rest of the family, read timeouts with it, goes to the refusal.
    let connection_before = crate::python::named_children(try_statement)
        .into_iter()
        .take_while(|c| c.id() != clause.id())
        .filter(|c| c.kind() == kinds::EXCEPT_CLAUSE)
        .all(|c| catches_connection_only(c, src));
    let earlier = earlier.filter(|_| !named).or(beside).or_else(|| {
        if !connection_before && !named {
            return None;
        }
        let func = idx.enclosing(clause, kinds::FUNCTION_DEFINITION)?;
        // Or made to be raised later (`failure = KlarnaUnavailable(...)`, then `raise failure`).
        let unknown = idx
            .within(func, kinds::RAISE_STATEMENT)
            .iter()
            .filter(|r| !syntax::contains(clause, **r))
            .find_map(|r| raised_class(*r, src).filter(|name| unavailable(name)))
            .or_else(|| {
                named.then_some(())?;
                idx.within(func, kinds::CALL)
                    .iter()
                    .filter(|c| !syntax::contains(clause, **c))
                    .map(|c| idx.callee_name(*c, src))
                    .find(|name| unavailable(name))
            })?;
        Some((String::new(), unknown))
    });
    let Some((connection, unknown)) = earlier else {
        return;
    };
    let note = if connection.is_empty() {
        "definite_family"
    } else {
        "definite"
    };
    let Some(body) = try_statement.field("body") else {
        return;
    };
    let Some(func) = idx.enclosing(clause, kinds::FUNCTION_DEFINITION) else {
        return;
    };
    let request = idx
        .within(body, kinds::CALL)
        .iter()
        .find(|c| facts::http_by_name(&syntax::call_text(**c, src)))
        .map(|request| {
            (
                syntax::callee(*request, src).to_string(),
                syntax::lines(*request).0,
            )
        });
    // A read (`self._session.get(verify_url)`) changes nothing at the provider: a timeout of it
    // carried nothing out.
    if request
        .as_ref()
        .is_some_and(|(callee, _)| matches!(callee.rsplit('.').next(), Some("get" | "head")))
    {
        return;
    }
    // A named timeout also of the client's own sender (`await self._post_refund(...)`).
    let Some((step, step_line)) =
        request.or_else(|| named.then(|| paying_step(cx, idx, func, body)).flatten())
    else {
        return;
    };
    let caught: Vec<&str> = syntax::except_types(clause)
        .into_iter()
        .map(|t| syntax::text(t, src))
        .collect();
    let function = facts::qualname(func, idx, src);
    let finding = cx
        .report(&RULE, clause)
        .arg("function", function.clone())
        .arg("step", step)
        .arg("step_line", step_line.to_string())
        .arg("connection", connection)
        .arg("unknown", unknown.to_string())
        .arg("caught", caught.join(", "))
        .arg("raised", raised.to_string())
        .note(note)
        .severity(Severity::Important);
    finding.function = function;
}

/// Whether the module raises `class` outside `clause` (`raise CheckoutRequestError(resp.status,
/// ...)`), or makes one there for its raise (`return PaddleRequestError(code, detail)` of an
/// `_error_from_response` the sender raises): the error of the provider's answers.
fn made_elsewhere(idx: &NodeIndex<'_>, clause: Node<'_>, class: &str, src: &str) -> bool {
    idx.all(kinds::RAISE_STATEMENT)
        .iter()
        .any(|r| !syntax::contains(clause, *r) && raised_class(*r, src) == Some(class))
        || idx.all(kinds::CALL).iter().any(|c| {
            // `PaddleRequestError(...)`, or a constructor of its own (`KlarnaError.from_response`).
            let callee = syntax::callee(*c, src);
            !syntax::contains(clause, *c) && callee.split('.').any(|part| part == class)
        })
        // `error = MercadoPagoUnavailable if uncertain else MercadoPagoRequestError`, then
        // `raise error(...)`: chosen for a raise.
        || idx.all(kinds::ASSIGNMENT).iter().any(|a| {
            !syntax::contains(clause, *a)
                && a.field("right").is_some_and(|r| {
                    r.kind() == kinds::CONDITIONAL_EXPRESSION
                        && syntax::has_word(syntax::text(r, src), class)
                })
        })
}

/// The error another clause of the same `try` makes (`error = APIConnectionError(...)`,
/// `raise APIConnectionError(...)`), where the module defines it on `base`, the error the
/// timeout is raised as, and names it for a request that may have gone through (a connection,
/// the network, an unknown outcome).
fn unknown_subclass_beside<'s>(
    idx: &NodeIndex<'_>,
    try_statement: Node<'_>,
    clause: Node<'_>,
    base: &str,
    src: &'s str,
) -> Option<(String, &'s str)> {
    crate::python::named_children(try_statement)
        .into_iter()
        .filter(|c| c.kind() == kinds::EXCEPT_CLAUSE && c.id() != clause.id())
        .find_map(|c| {
            idx.within(c, kinds::CALL).iter().find_map(|&call| {
                let made = idx.callee_name(call, src);
                let unknown = syntax::name_words(made).iter().any(|w| {
                    matches!(
                        w.as_str(),
                        "connection" | "network" | "unavailable" | "unknown" | "unreachable"
                    )
                });
                (unknown && made != base && defined_on(idx, made, base, src))
                    .then(|| (String::new(), made))
            })
        })
}

/// Whether the module defines `class` with `base` among its bases.
fn defined_on(idx: &NodeIndex<'_>, class: &str, base: &str, src: &str) -> bool {
    idx.all(kinds::CLASS_DEFINITION).iter().any(|c| {
        c.field("name")
            .is_some_and(|n| syntax::text(n, src) == class)
            && c.field("superclasses").is_some_and(|bases| {
                crate::python::named_children(bases).into_iter().any(|b| {
                    let name = syntax::text(b, src);
                    name.rsplit('.').next().unwrap_or(name) == base
                })
            })
    })
}

/// A class of the module built on an error of an unknown outcome: `class
/// CheckoutTimedOut(CheckoutUnavailable)`. Callers that catch the unknown catch it too.
fn subclass_of_the_unknown(idx: &NodeIndex<'_>, class: &str, src: &str) -> bool {
    idx.all(kinds::CLASS_DEFINITION).iter().any(|c| {
        c.field("name")
            .is_some_and(|n| syntax::text(n, src) == class)
            && c.field("superclasses").is_some_and(|bases| {
                crate::python::named_children(bases).into_iter().any(|b| {
                    let base = syntax::text(b, src);
                    unavailable(base.rsplit('.').next().unwrap_or(base))
                })
            })
    })
}

/// The error a handler raises, by its class's last name: `raise PaystackError(...) from exc`.
fn raised_error<'s>(handler: Node<'_>, src: &'s str) -> Option<&'s str> {
    syntax::statements(handler)
        .into_iter()
        .filter(|stmt| stmt.kind() == kinds::RAISE_STATEMENT)
        .find_map(|stmt| raised_class(stmt, src))
}

/// The class a `raise` statement raises, by its last name: `raise mod.Error(...) from exc`.
pub(super) fn raised_class<'s>(raise: Node<'_>, src: &'s str) -> Option<&'s str> {
    let raised = raise.named_child(0)?;
    let class = if raised.kind() == kinds::CALL {
        raised.field("function")?
    } else {
        raised
    };
    let name = syntax::text(class, src);
    Some(name.rsplit('.').next().unwrap_or(name))
}

/// The failure a handler of the client's family records on a branch its status test sends an
/// error without a status to: `if exc.status_code != 409: mark failed`, `if exc.status_code in
/// (409, 503): raise` then `else:` or after it a failure. The client raises its timeouts with no
/// status code, and `None != 409`; whatever the handler says of the unknown elsewhere, a timeout
/// takes the failure branch.
fn status_branch(
    idx: &NodeIndex<'_>,
    clause: Node<'_>,
    handler: Node<'_>,
    src: &str,
) -> Option<(Mark, String, bool)> {
    let alias = syntax::except_alias(clause, src)?;
    let no_answer = no_answer_caught(clause, src);
    for &branch in idx.within(handler, kinds::IF_STATEMENT) {
        let Some(condition) = branch.field("condition") else {
            continue;
        };
        let Some(statusless_passes) = statusless_passes(condition, alias, src) else {
            continue;
        };
        // `if exc.status is None:` keeps the timeouts as unknown; the rest are marked.
        let answered = no_answer && tests_for_no_status(condition, alias, src);
        let into_branch = statusless_passes != answered;
        let taken: Vec<Node<'_>> = if into_branch {
            branch.field("consequence").into_iter().collect()
        } else {
            let mut cursor = branch.walk();
            let otherwise: Vec<Node<'_>> = branch
                .children_by_field_name("alternative", &mut cursor)
                .filter(|b| b.kind() == kinds::ELSE_CLAUSE)
                .filter_map(|b| b.field("body"))
                .collect();
            let exits = branch
                .field("consequence")
                .is_some_and(|b| !syntax::block_falls_through(b, src));
            if otherwise.is_empty() && exits {
                // What follows the branch in the handler is where the rest go.
                let mut after = Vec::new();
                let mut next = branch.next_named_sibling();
                while let Some(n) = next {
                    after.push(n);
                    next = n.next_named_sibling();
                }
                after
            } else {
                otherwise
            }
        };
        let mark = taken
            .into_iter()
            .find_map(|n| failure_mark(idx, n, src, Caught::Family));
        if let Some(mark) = mark {
            return Some((mark, syntax::normalized(condition, src), answered));
        }
    }
    None
}

/// `except MollieUnavailable as exc:`, a class named for an answer that never came: what it
/// carries with a status is a 5xx, which decides the payment no more than a timeout does.
fn no_answer_caught(clause: Node<'_>, src: &str) -> bool {
    caught_names(clause, src).iter().any(|c| unavailable(c))
}

/// The test, as written, of an `if exc.status is None:` of the handler that leaves it before
/// the failure marked at `line`: the errors with no status never reach the mark.
fn statusless_leave_before(
    idx: &NodeIndex<'_>,
    clause: Node<'_>,
    handler: Node<'_>,
    line: u32,
    src: &str,
) -> Option<String> {
    let alias = syntax::except_alias(clause, src)?;
    idx.within(handler, kinds::IF_STATEMENT)
        .iter()
        .find_map(|&branch| {
            let condition = branch.field("condition")?;
            let leaves = syntax::lines(branch).1 < line
                && tests_for_no_status(condition, alias, src)
                && statusless_passes(condition, alias, src) == Some(true)
                && syntax::elif_clauses(branch).is_empty()
                && branch.field("alternative").is_none()
                && branch
                    .field("consequence")
                    .is_some_and(|b| !syntax::block_falls_through(b, src));
            leaves.then(|| syntax::normalized(condition, src))
        })
}

/// `exc.status is None`, `exc.status_code is not None`, `exc.response is None`: a test of
/// whether the error came with an answer at all, not of which answer.
fn tests_for_no_status(condition: Node<'_>, alias: &str, src: &str) -> bool {
    match condition.kind() {
        kinds::PARENTHESIZED_EXPRESSION | kinds::NOT_OPERATOR => condition
            .named_child(0)
            .is_some_and(|c| tests_for_no_status(c, alias, src)),
        // `exc.http_status is None or exc.http_status in RETRYABLE`: a side of it.
        kinds::BOOLEAN_OPERATOR => [condition.field("left"), condition.field("right")]
            .into_iter()
            .flatten()
            .any(|side| tests_for_no_status(side, alias, src)),
        kinds::COMPARISON_OPERATOR => {
            condition
                .named_child(1)
                .is_some_and(|n| n.kind() == kinds::NONE)
                && condition.named_child(0).is_some_and(|n| {
                    n.kind() == kinds::ATTRIBUTE
                        && n.field("object")
                            .is_some_and(|o| syntax::text(o, src) == alias)
                })
        }
        _ => false,
    }
}

/// Whether the failure marked at `line` is under a test of the provider's answer the caught
/// error carries (`if exc.is_client_error and not previously_sent:`, `if err.status_code ==
/// 402:`), which an error without an answer, a timeout, does not pass.
fn marked_only_for_an_answer(
    idx: &NodeIndex<'_>,
    clause: Node<'_>,
    handler: Node<'_>,
    line: u32,
    src: &str,
) -> bool {
    let Some(alias) = syntax::except_alias(clause, src) else {
        return false;
    };
    idx.within(handler, kinds::IF_STATEMENT)
        .iter()
        .any(|&branch| {
            let (Some(condition), Some(body)) =
                (branch.field("condition"), branch.field("consequence"))
            else {
                return false;
            };
            let (first, last) = syntax::lines(body);
            // `if isinstance(exc, RazorpayAPIError) and exc.is_rejection:` under `except
            // (RazorpayAPIError, RazorpayUnavailable)`: the branch is for the class that answered.
            if (first..=last).contains(&line)
                && narrowed_to_an_answer(condition, clause, alias, src)
            {
                return true;
            }
            let text = syntax::text(condition, src);
            let reads_the_answer = [
                "is_client_error",
                "status_code",
                "http_status",
                "status",
                "code",
                "response",
            ]
            .iter()
            .any(|field| {
                text.match_indices(&format!("{alias}.{field}"))
                    .any(|(at, _)| {
                        at == 0
                            || !text[..at].ends_with(|c: char| {
                                c.is_ascii_alphanumeric() || c == '_' || c == '.'
                            })
                    })
            });
            (first..=last).contains(&line)
                && reads_the_answer
                && statusless_passes(condition, alias, src) != Some(true)
        })
}

/// Whether a test keeps the errors of no answer out: `isinstance(exc, GatewayDeclined)`, alone
/// or under an `and`, where the clause also catches a class of no answer
/// (`GatewayUnavailable`) that the test does not name.
fn narrowed_to_an_answer(condition: Node<'_>, clause: Node<'_>, alias: &str, src: &str) -> bool {
    match condition.kind() {
        kinds::PARENTHESIZED_EXPRESSION => condition
            .named_child(0)
            .is_some_and(|c| narrowed_to_an_answer(c, clause, alias, src)),
        kinds::BOOLEAN_OPERATOR if condition.child(1).is_some_and(|o| o.kind() == "and") => {
            [condition.field("left"), condition.field("right")]
                .into_iter()
                .flatten()
                .any(|side| narrowed_to_an_answer(side, clause, alias, src))
        }
        kinds::CALL => isinstance_of(condition, alias, src).is_some_and(|named| {
            named.iter().all(|n| no_answer_class(n).is_none())
                && caught_names(clause, src)
                    .iter()
                    .any(|c| no_answer_class(c).is_some() && !named.contains(c))
        }),
        _ => false,
    }
}

/// The classes, by their last names, of `isinstance(exc, A)` or `isinstance(exc, (A, B))`
/// asked of the caught error `alias`.
fn isinstance_of<'s>(call: Node<'_>, alias: &str, src: &'s str) -> Option<Vec<&'s str>> {
    if syntax::callee(call, src) != "isinstance" {
        return None;
    }
    let args = syntax::positional_args(call);
    let [error, classes] = args[..] else {
        return None;
    };
    if syntax::text(error, src) != alias {
        return None;
    }
    let named = match classes.kind() {
        kinds::TUPLE => crate::python::named_children(classes)
            .into_iter()
            .map(|c| facts::last_name(syntax::text(c, src)))
            .collect(),
        _ => vec![facts::last_name(syntax::text(classes, src))],
    };
    Some(named)
}

/// Where a test of the caught error's status (`exc.status_code != 409`) sends an error that has
/// none: `Some(true)` to its branch, `Some(false)` past it (`exc.status_code in (409, 503)`).
/// `None` when the test is not only of the status, or rules the statusless out
/// (`exc.is_client_error and ...`, `exc.status_code >= 500`).
fn statusless_passes(condition: Node<'_>, alias: &str, src: &str) -> Option<bool> {
    match condition.kind() {
        // `isinstance(exc, RazorpayUnavailable)`: the errors of no answer, a timeout's, pass.
        kinds::CALL => isinstance_of(condition, alias, src)?
            .iter()
            .any(|c| no_answer_class(c).is_some())
            .then_some(true),
        // `isinstance(exc, Unavailable) or exc.is_rejection`: either side lets them in.
        kinds::BOOLEAN_OPERATOR if condition.child(1).is_some_and(|o| o.kind() == "or") => {
            let (left, right) = (condition.field("left")?, condition.field("right")?);
            [left, right]
                .iter()
                .any(|side| statusless_passes(*side, alias, src) == Some(true))
                .then_some(true)
        }
        kinds::PARENTHESIZED_EXPRESSION => statusless_passes(condition.named_child(0)?, alias, src),
        kinds::NOT_OPERATOR => {
            statusless_passes(condition.field("argument")?, alias, src).map(|p| !p)
        }
        kinds::COMPARISON_OPERATOR if condition.named_child_count() == 2 => {
            let (status, codes) = (condition.named_child(0)?, condition.named_child(1)?);
            let of_the_error = status.kind() == kinds::ATTRIBUTE
                && status
                    .field("object")
                    .is_some_and(|o| syntax::text(o, src) == alias)
                && status.field("attribute").is_some_and(|a| {
                    matches!(
                        syntax::text(a, src),
                        "status_code" | "status" | "http_status" | "code" | "http_code"
                    )
                });
            // `exc.status is None`: the errors with no status, a timeout's, pass.
            if of_the_error && codes.kind() == kinds::NONE {
                return match condition.child(1)?.kind() {
                    "is" => Some(true),
                    "is not" => Some(false),
                    _ => None,
                };
            }
            let integers = |n: Node<'_>| match n.kind() {
                kinds::INTEGER => true,
                kinds::TUPLE | kinds::LIST | kinds::SET => {
                    let items = crate::python::named_children(n);
                    !items.is_empty() && items.iter().all(|i| i.kind() == kinds::INTEGER)
                }
                _ => false,
            };
            if !of_the_error || !integers(codes) {
                return None;
            }
            match condition.child(1)?.kind() {
                "!=" | "not in" => Some(true),
                "==" | "in" => Some(false),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Whether the exception a handler raises undoes what it wrote: the handler runs inside a
/// transaction (`@transaction.atomic`, `with transaction.atomic():`, `with session.begin():`)
/// that the exception leaves, and commits nothing itself.
fn rolled_back(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    clause: Node<'_>,
    handler: Node<'_>,
    src: &str,
) -> bool {
    if syntax::text(handler, src).contains("commit(") {
        return false;
    }
    let decorated = func
        .parent()
        .filter(|p| p.kind() == kinds::DECORATED_DEFINITION)
        .is_some_and(|d| {
            syntax::decorators(d)
                .iter()
                .any(|dec| syntax::opens_a_transaction(syntax::text(*dec, src)))
        });
    decorated
        || idx
            .within(func, kinds::WITH_STATEMENT)
            .iter()
            .filter(|w| syntax::contains(**w, clause))
            .any(|w| syntax::opens_a_transaction(syntax::with_clause(*w, src)))
}

/// What in a handler says the payment failed.
struct Mark {
    text: String,
    line: u32,
    /// A status written or a failure recorded (`order.status = "failed"`, `mark_declined(o)`),
    /// not only a value handed back.
    persistent: bool,
    /// The handler raises (so only a written mark is one).
    raises: bool,
    /// It raises after the mark, on the mark's own path.
    raised_after: bool,
}

/// The first statement of a handler that records or returns a failure, unless the handler
/// raises, asks again, or records the unknown as such.
fn failure_mark(idx: &NodeIndex<'_>, handler: Node<'_>, src: &str, caught: Caught) -> Option<Mark> {
    // What a log line says of the timeout is no state: `log.warning("timeout")`, then `failed`.
    // Nor is a state compared (`if refund.status == "pending":` before `= "failed"`).
    let mut unsaid: Vec<(usize, usize)> = idx
        .within(handler, kinds::CALL)
        .iter()
        .filter(|c| facts::only_records(syntax::callee(**c, src)))
        .chain(idx.within(handler, kinds::COMPARISON_OPERATOR))
        .map(|n| (n.start_byte(), n.end_byte()))
        .collect();
    // Nor the states a write may move from (`update_refund_status(id, "failed",
    // only_from=("pending",))`): a guard of the transition, not what the timeout is taken for.
    for &call in idx.within(handler, kinds::CALL) {
        for (key, value) in syntax::keyword_args(call, src) {
            if key.contains("from") || key.starts_with("expected") {
                unsaid.push((value.start_byte(), value.end_byte()));
            }
        }
        // Nor the rows a query picks (`Refund.objects.filter(status=PENDING).update(status=
        // FAILED)`): the state moved from, not the one the timeout is taken for.
        if matches!(
            syntax::callee_name(call, src),
            "filter" | "filter_by" | "where" | "exclude"
        ) && let Some(args) = call.field("arguments")
        {
            unsaid.push((args.start_byte(), args.end_byte()));
        }
        // Nor the reason a failure is written down with (`_fail(payout, f"funding outcome
        // unknown: {exc}")`): the state written is the failure, whatever its note says.
        if calls_failure(call, src).is_some() {
            // Nor the name of what writes it, when a failed state handed to it says what it
            // writes (`_settle_pending(state, id, status=FAILED)`): the name tells the state it
            // moves from. A name that says the failure (`note_lookup_failure`) says what it is.
            if let Some(function) = call.field("function")
                && !failure_word(syntax::callee_name(call, src))
            {
                unsaid.push((function.start_byte(), function.end_byte()));
            }
            let reasons = call
                .field("arguments")
                .into_iter()
                .flat_map(crate::python::named_children)
                .map(|a| match a.kind() {
                    kinds::KEYWORD_ARGUMENT => a.field("value").unwrap_or(a),
                    _ => a,
                })
                .filter(|a| a.kind() == kinds::STRING);
            unsaid.extend(reasons.map(|a| (a.start_byte(), a.end_byte())));
        }
    }
    unsaid.sort_unstable();
    let mut said = String::new();
    let mut at = handler.start_byte();
    for (start, end) in unsaid {
        if start >= at {
            said.push_str(src.get(at..start).unwrap_or(""));
            at = end;
        }
    }
    said.push_str(src.get(at..handler.end_byte()).unwrap_or(""));
    let lower = said.to_ascii_lowercase();
    // A handler that raises tells the caller the outcome is unknown; what it wrote before the
    // `raise` stays written all the same (`self._mark_failed(share, exc.code); raise` under an
    // `except` of the client's whole family). Under `except Exception` that is too common a
    // clean-up to read as a decision about timeouts.
    let raises = !idx.within(handler, kinds::RAISE_STATEMENT).is_empty();
    // A refusal recorded (`billing.record_rejected(...)`) is a decision, whatever comes after
    // it: the "retry" that follows is a new attempt at a payment now taken for refused.
    // So is a refusal raised (`raise CheckoutRequestRejected(f"{path} timed out")`), whatever
    // its message says of the timeout.
    let records_refusal = idx
        .within(handler, kinds::CALL)
        .iter()
        .any(|&c| names_refusal(c, src));
    if says_unknown(&lower) && !records_refusal || raises && caught == Caught::Everything {
        return None;
    }
    // `log.warning("outcome of %s unknown, will resend", key)` then `return False`: the
    // handler knows the outcome is unknown, and its "no" says only that nothing is done now.
    // Or in the language of the code (`log.warning("Auszahlung %s unklar")`).
    let logged_unknown = idx.within(handler, kinds::CALL).iter().any(|&c| {
        facts::only_records(syntax::callee(c, src)) && {
            let line = syntax::text(c, src).to_ascii_lowercase();
            line.contains("unknown") || FOREIGN_UNKNOWN_STATES.iter().any(|w| line.contains(w))
        }
    });
    let assigned = idx
        .within(handler, kinds::ASSIGNMENT)
        .iter()
        .filter_map(|&a| {
            let failure =
                assigns_failure(a, src).or_else(|| local_failure_recorded(idx, a, src))?;
            Some((a, failure, a.parent()?))
        });
    // An error named for a refusal raised for the timeout (`raise PaymentDeclined(...)`) is a
    // "no" handed to the caller, not a record. One named for a failure (`raise
    // ChargeFailed(...)` once the retries are spent) says only that it did not work out.
    let called = idx.within(handler, kinds::CALL).iter().filter_map(|&c| {
        let handed = idx.enclosing(c, kinds::RAISE_STATEMENT).is_some();
        if handed && !names_refusal(c, src) {
            return None;
        }
        // Shown as its statement, or as itself when it is handed to another call.
        let parent = c.parent()?;
        let shown = if parent.kind() == kinds::ARGUMENT_LIST {
            c
        } else {
            parent
        };
        Some((c, calls_failure(c, src)? && !handed, shown))
    });
    let returned = idx
        .within(handler, kinds::RETURN_STATEMENT)
        .iter()
        .filter(|_| caught != Caught::Everything && !raises && !logged_unknown)
        .filter_map(|&r| Some((r, returns_failure(r, src, caught)?, r)));
    assigned
        .chain(called)
        .chain(returned)
        .min_by_key(|(node, ..)| node.start_byte())
        .map(|(node, persistent, statement)| Mark {
            text: syntax::normalized(statement, src),
            line: syntax::lines(node).0,
            persistent,
            raises,
            // On the mark's own path: not a `raise` of another branch (`if exc.code in
            // RETRYABLE: raise`, then `mark_failed(...); return`).
            raised_after: idx.within(handler, kinds::RAISE_STATEMENT).iter().any(|r| {
                r.start_byte() > node.end_byte()
                    && r.parent()
                        .is_some_and(|block| syntax::contains(block, node))
            }),
        })
}

/// A call named for a refusal (`PaymentDeclined(...)`, `record_rejected`), or one that hands
/// such a function to a runner (`run_in_worker(billing.record_rejected, ...)`).
fn names_refusal(call: Node<'_>, src: &str) -> bool {
    let callee = syntax::handed_callee(call, src).unwrap_or_else(|| syntax::callee(call, src));
    named_for_a_refusal(callee.rsplit('.').next().unwrap_or(callee))
}

/// A name that says the provider refused: `PaymentDeclined`, `record_rejected`,
/// `reopen_after_decline`.
pub(crate) fn named_for_a_refusal(name: &str) -> bool {
    syntax::name_words(name).iter().any(|w| {
        matches!(
            w.as_str(),
            "decline" | "declined" | "reject" | "rejected" | "refused" | "refusal"
        ) || FOREIGN_REFUSALS.contains(&w.as_str())
    })
}

/// Refusals in the languages payment code is written in: `AirwallexAbgelehnt`,
/// `TransfertRefuse`, `TerugbetalingGeweigerd`, `PagamentoRecusado`, `PagoRechazado`.
const FOREIGN_REFUSALS: &[&str] = &[
    // The nouns (`RefusAdyen`, `RecusaPix`, `RifiutoNexi`, `OdmowaPayU`).
    "refus",
    "recusa",
    "rifiuto",
    "odmowa",
    "abgelehnt",
    "ablehnung",
    "refuse",
    "refusee",
    "rejete",
    "rejetee",
    "geweigerd",
    "weigering",
    "recusado",
    "recusada",
    "rechazado",
    "rechazada",
    "rechazar",
    "rechazo",
    "rifiutato",
    "rifiutata",
    "respinto",
    "respinta",
    "odrzucony",
    "odrzucona",
    "odrzuc",
    "odmowa",
];

/// Unknown outcomes and unavailable services in those languages: `AirwallexUnklar`,
/// `IssueIncertaine`, `AdyenIssueInconnue`, `FlutterwaveIndisponible`, `UitkomstOnbekend`, `ResultadoDesconhecido`.
const FOREIGN_UNKNOWNS: &[&str] = &[
    "unklar",
    "unbekannt",
    "inconnu",
    "inconnue",
    "desconhecida",
    "desconocida",
    "incierta",
    "incerta",
    "sconosciuta",
    "niepewna",
    "nieznana",
    "ungewiss",
    "incertain",
    "incertaine",
    "indisponible",
    "onbekend",
    "onzeker",
    "desconhecido",
    "desconocido",
    "incierto",
    "indisponivel",
    "incerto",
    "sconosciuto",
    "indisponibile",
    "niepewny",
    "nieznany",
    "niedostepny",
    // `PayPalNichtErreichbar`, `AnbieterUnerreichbar`.
    "erreichbar",
    "unerreichbar",
    "onbereikbaar",
    // Russian, transliterated: `YooKassaNeizvestno`, `ProviderNedostupen`.
    "neizvestno",
    "neizvesten",
    "neizvestnyi",
    "neizvestnyy",
    "nedostupen",
    "nedostupno",
    "injoignable",
    "irraggiungibile",
    "inalcanzable",
    "inacessivel",
    "nieosiagalny",
];

/// Words in a handler that say the outcome is kept as unknown, or found out: a pending state,
/// a check with the provider, another attempt.
pub(super) const UNKNOWN_OUTCOME: &[&str] = &[
    "pending",
    "unknown",
    "uncertain",
    "ambiguous",
    "timed_out",
    "timedout",
    "timeout",
    "reconcil",
    "requeue",
    "retry",
    "poll",
    "verify",
    "lookup",
    "look_up",
    "fetch",
    "retrieve",
    "processing",
    "in_progress",
];

/// The states of `UNKNOWN_OUTCOME` in the languages payment code is written in:
/// `status="onbekend"`, `"unklar"`, `"NIEPEWNY"`.
pub(super) const FOREIGN_UNKNOWN_STATES: &[&str] = &[
    "onbekend",
    "unklar",
    "unbekannt",
    "ausstehend",
    "inconnu",
    "incertain",
    "en_attente",
    "desconhecido",
    "desconocido",
    "pendente",
    "pendiente",
    "incerto",
    "sconosciuto",
    "niepewn",
    "nieznan",
];

/// Whether a handler's text (lowercase) says the outcome is kept as unknown or found out.
pub(super) fn says_unknown(lower: &str) -> bool {
    UNKNOWN_OUTCOME
        .iter()
        .chain(FOREIGN_UNKNOWN_STATES)
        .any(|w| lower.contains(w))
}

/// Words of a status that say the payment did not happen.
fn failure_word(text: &str) -> bool {
    syntax::name_words(text).iter().any(|w| {
        matches!(
            w.as_str(),
            "fail"
                | "failed"
                | "failure"
                | "declined"
                | "decline"
                | "rejected"
                | "refused"
                | "error"
                | "errored"
                // A payment or refund called off: taken as never made.
                | "canceled"
                | "cancelled"
        ) || FOREIGN_FAILURES.contains(&w.as_str())
            // `EstadoReembolso.RECHAZADO`, `"abgelehnt"`: refused, as `rejected` is.
            || FOREIGN_REFUSALS.contains(&w.as_str())
    })
}

/// Failed states in the languages payment code is written in: `"mislukt"`,
/// `"fehlgeschlagen"`, `"echoue"`, `"falhou"`, `"fallido"`.
pub(super) const FOREIGN_FAILURES: &[&str] = &[
    "fallito",
    "fallita",
    "nieudan",
    "mislukt",
    "fehlgeschlagen",
    "gescheitert",
    "echoue",
    "echec",
    "falhou",
    "falhada",
    "falhado",
    "fallido",
    "fallida",
    // The nouns: `registrar_falha(...)`, `registrar_fallo(...)`, `zapisz_niepowodzenie(...)`.
    "falha",
    "fallo",
    "fallimento",
    "niepowodzenie",
    "mislukking",
    "misslyckad",
    "misslyckades",
    "fehlschlag",
];

/// A value that names a failed state: `"failed"`, `PaymentStatus.DECLINED`, `Status.ERROR`.
fn failure_value(value: Node<'_>, src: &str) -> bool {
    match value.kind() {
        kinds::STRING => {
            let text = syntax::text(value, src);
            text.len() <= 40 && failure_word(text.trim_matches(|c| c == '"' || c == '\''))
        }
        kinds::ATTRIBUTE | kinds::IDENTIFIER => {
            let text = syntax::text(value, src);
            failure_word(text.rsplit('.').next().unwrap_or(text))
        }
        _ => false,
    }
}

/// Whether a target is a state (`order.status`, `payment["state"]`), not a local.
fn names_state(target: Node<'_>, src: &str) -> bool {
    if !matches!(target.kind(), kinds::ATTRIBUTE | kinds::SUBSCRIPT) {
        return false;
    }
    let text = syntax::text(target, src).to_ascii_lowercase();
    // And in the languages payment code is written in: `reembolso.estado`, `remboursement.
    // statut`, `betaling.toestand`, `rimborso.stato`.
    [
        "status", "state", "outcome", "result", "estado", "statut", "stato", "etat", "zustand",
        "toestand", "esito", "uitkomst", "ergebnis",
    ]
    .iter()
    .any(|w| text.contains(w))
}

/// `order.status = "failed"`: a written state.
pub(super) fn assigns_failure(assignment: Node<'_>, src: &str) -> Option<bool> {
    targets_and_values(assignment)
        .into_iter()
        .any(|(left, right)| names_state(left, src) && failure_value(right, src))
        .then_some(true)
}

/// Each target of an assignment with its value: `status, transfer_id = "refused", None` pairs
/// `status` with `"refused"`.
fn targets_and_values(assignment: Node<'_>) -> Vec<(Node<'_>, Node<'_>)> {
    let (Some(left), Some(right)) = (assignment.field("left"), assignment.field("right")) else {
        return Vec::new();
    };
    let many = |n: Node<'_>| {
        matches!(
            n.kind(),
            kinds::PATTERN_LIST | kinds::TUPLE_PATTERN | kinds::EXPRESSION_LIST | kinds::TUPLE
        )
    };
    if many(left) && many(right) {
        crate::python::named_children(left)
            .into_iter()
            .zip(crate::python::named_children(right))
            .collect()
    } else {
        vec![(left, right)]
    }
}

/// A local status set to a failure (`status, reason = "refused", exc.describe()`) that the
/// function then writes down (`repo.record_transfer_result(row.id, status=status)`).
fn local_failure_recorded(idx: &NodeIndex<'_>, assignment: Node<'_>, src: &str) -> Option<bool> {
    let (target, _) = targets_and_values(assignment)
        .into_iter()
        .find(|(left, right)| {
            left.kind() == kinds::IDENTIFIER
                && syntax::name_words(syntax::text(*left, src))
                    .iter()
                    .any(|w| matches!(w.as_str(), "status" | "state" | "outcome"))
                && failure_value(*right, src)
        })?;
    let name = syntax::text(target, src);
    let func = idx.enclosing(assignment, kinds::FUNCTION_DEFINITION)?;
    idx.within(func, kinds::CALL)
        .iter()
        .filter(|c| c.start_byte() > assignment.end_byte())
        .filter(|c| !facts::only_records(syntax::callee(**c, src)))
        .any(|&c| {
            let keyword = syntax::keyword_args(c, src)
                .into_iter()
                .any(|(_, v)| v.kind() == kinds::IDENTIFIER && syntax::text(v, src) == name);
            keyword
                || syntax::positional_args(c)
                    .into_iter()
                    .any(|v| v.kind() == kinds::IDENTIFIER && syntax::text(v, src) == name)
        })
        .then_some(true)
}

/// `mark_failed(order)`, `payment.decline()`, `repo.set_status(id, "failed")`,
/// `Payment.objects.filter(...).update(status=Status.FAILED)`.
pub(super) fn calls_failure(call: Node<'_>, src: &str) -> Option<bool> {
    let callee = syntax::handed_callee(call, src).unwrap_or_else(|| syntax::callee(call, src));
    let name = callee.rsplit('.').next().unwrap_or(callee);
    if facts::only_records(callee) {
        return None;
    }
    let words = syntax::name_words(name);
    let says_failed = words.iter().any(|w| {
        matches!(
            w.as_str(),
            "fail" | "failed" | "failure" | "decline" | "declined" | "reject" | "rejected"
        )
    })
        // `mark_refund_refused(...)`, a record written; an error raised (`TopUpRefused`) is
        // read as an answer handed back, by `raised_as_definite`.
        || !name.starts_with(|c: char| c.is_ascii_uppercase())
            && words.iter().any(|w| {
                w == "refuse"
                    || w == "refused"
                    // `rechazar_reembolso(...)`, `oznacz_odrzucony(...)`, `segna_fallito(...)`.
                    || FOREIGN_REFUSALS.contains(&w.as_str())
                    || FOREIGN_FAILURES.contains(&w.as_str())
            });
    // `_record_error(invoice, attempt, exc, now)`: an error written down as the attempt's end.
    let records_an_error = words
        .first()
        .is_some_and(|w| matches!(w.as_str(), "record" | "mark" | "set" | "save"))
        && words.iter().any(|w| w == "error" || w == "errored");
    // What was held for the payment let go (`release_refund`, `release_hold`): the payment is
    // taken for one that did not happen. A lock or a lease let go is not.
    let releases_the_money = words.first().is_some_and(|w| w == "release")
        && words.len() >= 2
        && !words.iter().any(|w| {
            matches!(
                w.as_str(),
                "lock"
                    | "locks"
                    | "lease"
                    | "mutex"
                    | "semaphore"
                    | "slot"
                    | "conn"
                    | "connection"
                    | "claim"
                    | "key"
                    | "token"
                    | "worker"
            )
        });
    // A notice of the failure to the payer (`send_payment_failed_email`) is beside the state.
    if (says_failed || records_an_error || releases_the_money)
        && !crate::rules::pay::beside_the_money(name)
    {
        return Some(true);
    }
    let status_keyword = syntax::keyword_args(call, src)
        .into_iter()
        .any(|(k, v)| matches!(k, "status" | "state" | "outcome") && failure_value(v, src));
    let status_positional = words.iter().any(|w| w == "status" || w == "state")
        && syntax::positional_args(call)
            .iter()
            .any(|a| failure_value(*a, src));
    // `settle_payout(payout.reference, "failed")`: a failed status, as a word of its own,
    // handed to whatever records it.
    let status_handed = syntax::positional_args(call).iter().any(|a| {
        // Or an enum's member (`_close_refund(refund, MembershipRefund.Status.FAILED, ...)`).
        let member = (a.kind() == kinds::ATTRIBUTE)
            .then(|| syntax::text(*a, src).rsplit('.').next().unwrap_or(""));
        member
            .or_else(|| syntax::string_value(*a, src))
            .is_some_and(|w| {
                let lower = w.to_ascii_lowercase();
                matches!(
                    lower.as_str(),
                    "failed" | "failure" | "declined" | "rejected" | "refused"
                )
                // `Bestellung.Status.ABGELEHNT`, `"rechazado"`.
                || FOREIGN_REFUSALS.contains(&lower.as_str())
                || FOREIGN_FAILURES.contains(&lower.as_str())
                // `PaymentStatus.FUNDING_FAILED`, `"hold_failed"`: a failed state of one step.
                || (member.is_some()
                    || w.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
                    && syntax::name_words(w).last().is_some_and(|last| {
                        matches!(last.as_str(), "failed" | "declined" | "rejected" | "refused")
                    })
            })
    });
    // `_settle_refund(refund_id, {"status": "failed", ...})`: a failed answer made up for it.
    let status_dict = syntax::positional_args(call).iter().any(|a| {
        a.kind() == kinds::DICTIONARY
            && crate::python::named_children(*a).iter().any(|pair| {
                pair.kind() == kinds::PAIR
                    && pair.field("key").is_some_and(|k| {
                        matches!(syntax::string_value(k, src), Some("status" | "state"))
                    })
                    && pair.field("value").is_some_and(|v| failure_value(v, src))
            })
    });
    (status_keyword || status_positional || status_handed || status_dict).then_some(true)
}

/// `return False`, `return None` (of a timeout named), `return {"status": "failed"}`,
/// `return Result(ok=False)`: a "no" handed to the caller.
fn returns_failure(ret: Node<'_>, src: &str, caught: Caught) -> Option<bool> {
    // `None` from a family of errors is ERR001's and ERR003's: a function that stopped raising.
    let Some(value) = syntax::return_value(ret) else {
        return (caught == Caught::Named).then_some(false);
    };
    let says_no = match value.kind() {
        kinds::NONE => caught == Caught::Named,
        kinds::FALSE => true,
        kinds::STRING | kinds::ATTRIBUTE => failure_value(value, src),
        kinds::DICTIONARY => crate::python::named_children(value).iter().any(|pair| {
            pair.field("key")
                .zip(pair.field("value"))
                .is_some_and(|(k, v)| {
                    let key = syntax::text(k, src).trim_matches(|c| c == '"' || c == '\'');
                    (matches!(key, "status" | "state" | "outcome") && failure_value(v, src))
                        || (SUCCESS_FLAGS.contains(&key) && v.kind() == kinds::FALSE)
                })
        }),
        kinds::CALL => syntax::keyword_args(value, src).into_iter().any(|(k, v)| {
            (matches!(k, "status" | "state" | "outcome") && failure_value(v, src))
                || (SUCCESS_FLAGS.contains(&k) && v.kind() == kinds::FALSE)
        }),
        _ => false,
    };
    says_no.then_some(false)
}

/// Names of a flag that says a payment went through.
pub(crate) const SUCCESS_FLAGS: &[&str] = &[
    "ok",
    "success",
    "succeeded",
    "successful",
    "paid",
    "approved",
    "captured",
    "charged",
];

/// Whether an earlier clause of the same `try` already catches the timeout.
pub(crate) fn caught_earlier(try_statement: Node<'_>, clause: Node<'_>, src: &str) -> bool {
    crate::python::named_children(try_statement)
        .into_iter()
        .take_while(|c| c.id() != clause.id())
        .any(|c| catches_timeout(c, src).is_some())
}

/// Whether the clause names an error of an unknown outcome (`AcquirerUnavailable`) that no
/// clause before it catches: `except AcquirerTimeout: retry` and then `except (AcquirerDeclined,
/// AcquirerUnavailable): mark failed` sends a 5xx to the failure, whatever became of timeouts.
fn unknown_first_caught_here(try_statement: Node<'_>, clause: Node<'_>, src: &str) -> bool {
    let earlier: Vec<&str> = crate::python::named_children(try_statement)
        .into_iter()
        .take_while(|c| c.id() != clause.id())
        .filter(|c| c.kind() == kinds::EXCEPT_CLAUSE)
        .flat_map(syntax::except_types)
        .map(|t| syntax::text(t, src))
        .collect();
    // `except _OutcomeUnknown: park` and then `except (CheckoutRequestError, CheckoutTimeout):
    // mark failed`: the error of an unknown outcome the code raises itself (after its own
    // retries) is not the client's timeout, which the later clause names and takes.
    let only_unknowns_before = earlier.iter().all(|name| {
        let last = name.rsplit('.').next().unwrap_or(name);
        syntax::name_words(last)
            .iter()
            .any(|w| matches!(w.as_str(), "unknown" | "ambiguous" | "uncertain"))
    });
    syntax::except_types(clause).into_iter().any(|t| {
        let name = syntax::text(t, src);
        let last = name.rsplit('.').next().unwrap_or(name);
        !earlier.contains(&name)
            && (unavailable(last)
                || only_unknowns_before && names_a_timeout(last) && !last.starts_with("Connect"))
    })
}

/// The first call of the `try` body that moves money, as written and with its line: by its
/// name (`pays`), handed to a thread, or an HTTP request of a function that is itself a payment
/// operation (`def capture(...)` posting to the provider).
fn paying_step(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    body: Node<'_>,
) -> Option<(String, u32)> {
    let src = cx.src();
    // A client's sender that takes an idempotency key (`_request(self, method, path, *,
    // idempotency_key=None)`) sends the payments its callers make.
    let function_pays = {
        let name = syntax::function_name(func, src);
        cx.vocab.is_payment_operation(name) && !crate::rules::pay::beside_the_money(name)
            || func
                .field("parameters")
                .is_some_and(|p| syntax::code_names_idempotency(syntax::text(p, src)))
    };
    for &call in idx.within(body, kinds::CALL) {
        if !super::owned_by(call, func, idx) {
            continue;
        }
        let callee = syntax::handed_callee(call, src).unwrap_or_else(|| syntax::callee(call, src));
        if callee.is_empty() || facts::only_records(callee) {
            continue;
        }
        // Itself, or through the file's sender (`await self._verzoek(methode, pad, ...)`).
        let sends = function_pays
            && (facts::http_by_name(&syntax::call_text(call, src)) || {
                let name = idx.callee_name(call, src);
                cx.facts.is_some_and(|file| {
                    file.functions
                        .iter()
                        .any(|f| f.name == name && f.http && !f.is_test)
                })
            });
        // `self._create_remote(attempt)`, a helper of the file that sends the attempt's
        // idempotency key: what it sends is a payment made once.
        let keyed_helper = || {
            let name = idx.callee_name(call, src);
            cx.facts.is_some_and(|file| {
                file.functions
                    .iter()
                    .any(|f| f.name == name && f.mentions_idempotency && !f.is_test)
            })
        };
        if crate::rules::pay::pays(cx, call, src)
            || crate::rules::pay::hands_a_payment(cx, call, src)
            || sends
            || crate::rules::pay::calls_a_paying_helper(cx, call, src)
            || keyed_helper()
            || crate::rules::pay::writes_to_a_provider(call, src)
        {
            // `client.create_batch(..., request_id=payout_request_id(batch))`: the helper only
            // makes an argument of the request that is sent. (A call handed in whole, as
            // `asyncio.wait_for(http.post(...), 30)` takes it, is the request.)
            let handed = call
                .parent()
                .is_some_and(|p| p.kind() == kinds::KEYWORD_ARGUMENT);
            let sent = idx
                .within(body, kinds::CALL)
                .iter()
                .filter(|o| {
                    handed
                        && o.id() != call.id()
                        && syntax::contains(**o, call)
                        && !facts::only_records(syntax::callee(**o, src))
                })
                .max_by_key(|o| o.start_byte());
            let call = sent.copied().unwrap_or(call);
            let callee =
                syntax::handed_callee(call, src).unwrap_or_else(|| syntax::callee(call, src));
            return Some((callee.to_string(), syntax::lines(call).0));
        }
    }
    None
}
