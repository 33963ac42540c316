//! ERR002 retries-exhausted-return-none: a retry loop that, once every attempt has failed,
//! hands the caller `None` instead of raising.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::review::Severity;
use crate::rules::http::Lib;
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "ERR002",
    doc: include_str!("../../../rules/err/ERR002.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Where a function ends up after its retry loop ran out of attempts.
struct Exhausted<'t> {
    lines: (u32, u32),
    falls_off: bool,
    /// Stable across versions: the `return` (or the loop's last words when it falls off).
    key: String,
    /// The note that says how the `None` comes about, where the lines alone do not show it.
    how: Option<&'static str>,
    /// Where the retries are when they are another function's, whose give-up error this one
    /// catches: that function's loop, and the error.
    helper: Option<(Node<'t>, String)>,
}

impl Exhausted<'static> {
    fn at_return(first: Node<'_>, ret: Node<'_>, key: &str, src: &str) -> Exhausted<'static> {
        Exhausted {
            lines: (syntax::lines(first).0, syntax::lines(ret).1),
            falls_off: false,
            key: format!("{key} {}", syntax::normalized(ret, src)),
            // `return None, None` says how the `None` comes about; `return None` needs no note.
            how: (!syntax::returns_none(ret) && gives_none(ret)).then_some("tuple"),
            helper: None,
        }
    }
}

/// The rule needs the rest of the change only to weigh what it found: the gate is the whole
/// search.
fn gate(s: &Scan<'_>) -> bool {
    !exhausted_loops(s.index(), s.src()).is_empty()
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    for (lp, func, exhausted) in exhausted_loops(idx, src) {
        report(cx, lp, func, exhausted);
    }
}

/// The file's `for` and `while` loops that are in a function, with the function.
fn loops_in_functions<'a, 't>(
    idx: &'a NodeIndex<'t>,
) -> impl Iterator<Item = (Node<'t>, Node<'t>)> + 'a {
    idx.all(kinds::FOR_STATEMENT)
        .iter()
        .chain(idx.all(kinds::WHILE_STATEMENT))
        .filter_map(|&lp| Some((lp, idx.enclosing(lp, kinds::FUNCTION_DEFINITION)?)))
}

/// Each retry loop that lets its function return `None` once it runs out of attempts, with
/// that function and where it ends up.
fn exhausted_loops<'t>(idx: &NodeIndex<'t>, src: &str) -> Vec<(Node<'t>, Node<'t>, Exhausted<'t>)> {
    let mut out = Vec::new();
    for (lp, func) in loops_in_functions(idx) {
        if !super::is_retry_loop(lp, func, idx, src) || super::raises_when_exhausted(lp, idx, src) {
            continue;
        }
        // `if attempt >= MAX: return None` in the handler: the loop's own way out, whether or
        // not it could also end.
        let exhausted = match gives_up_with_none(lp, func, idx, src) {
            Some(ret) => Exhausted::at_return(ret, ret, "gives-up-with", src),
            None if runs_forever(lp, func, idx, src) => continue,
            None => match exhausted_exit(lp, func, idx, src) {
                Some(exhausted) => exhausted,
                None => continue,
            },
        };
        if is_generator(func, src) {
            // A generator's end is the end of its stream: its callers iterate and get no
            // `None`, however the loop stopped.
            continue;
        }
        out.push((lp, func, exhausted));
    }
    out.extend(caught_into_none(idx, src));
    for &decorator in idx.all(kinds::DECORATOR) {
        // Most decorators name neither argument: their calls are not read.
        let text = syntax::text(decorator, src).as_bytes();
        let told = |word: &[u8]| memchr::memmem::find(text, word).is_some();
        if !told(b"retry_error_callback") && !told(b"raise_on_giveup") {
            continue;
        }
        let func = decorator
            .parent()
            .and_then(|d| d.field("definition"))
            .filter(|f| f.kind() == kinds::FUNCTION_DEFINITION);
        if let (Some(func), Some(exhausted)) = (func, decorator_returns_none(decorator, idx, src)) {
            out.push((decorator, func, exhausted));
        }
    }
    out.extend(configured_to_return_none(idx, src));
    out
}

/// A tenacity retrier built in code with a `retry_error_callback` that gives `None`
/// (`self._retrying().copy(retry_error_callback=_gave_up)`, `AsyncRetrying(...,
/// retry_error_callback=...)`, `.retry_with(...)`), whose result the function returns: once
/// the attempts are spent, the function hands its caller `None`.
fn configured_to_return_none<'t>(
    idx: &NodeIndex<'t>,
    src: &str,
) -> Vec<(Node<'t>, Node<'t>, Exhausted<'t>)> {
    let mut out = Vec::new();
    if memchr::memmem::find(src.as_bytes(), b"retry_error_callback").is_none() {
        return out;
    }
    for &call in idx.all(kinds::CALL) {
        let name = idx.callee_name(call, src);
        if !(name.ends_with("Retrying") || matches!(name, "copy" | "retry_with")) {
            continue;
        }
        let Some(callback) = syntax::keyword_arg(call, "retry_error_callback", src) else {
            continue;
        };
        if !returns_only_none(callback, idx, src) {
            continue;
        }
        let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        // The retrier's result is what the function returns: `return await retrying(...)`,
        // or the retrier is bound to a name the function then calls in a `return`.
        let bound = syntax::bound_name(call, src);
        let returned = idx.within(func, kinds::RETURN_STATEMENT).iter().any(|r| {
            let text = syntax::text(*r, src);
            syntax::contains(*r, call)
                || bound.is_some_and(|b| crate::rules::testing::has_word(text, b))
        });
        if !returned {
            continue;
        }
        out.push((
            call,
            func,
            Exhausted {
                lines: syntax::lines(call),
                falls_off: false,
                key: "configured-returns-none callback".to_string(),
                how: Some("callback"),
                helper: None,
            },
        ));
    }
    out
}

/// A retry helper of the file that raises once its attempts are spent (`raise
/// BrightpayUnavailable(...)` after the loop of `_post`), and a function of the file that
/// catches that error from it and gives `None` (`create_payout`'s `except BrightpayUnavailable:
/// return None`): the retries end in `None` all the same, one call up. Each with the `try` that
/// calls the helper and the catching function.
fn caught_into_none<'t>(
    idx: &NodeIndex<'t>,
    src: &str,
) -> Vec<(Node<'t>, Node<'t>, Exhausted<'t>)> {
    let mut out = Vec::new();
    for (lp, helper) in loops_in_functions(idx) {
        let Some(error) = raised_when_spent(lp, idx, src) else {
            continue;
        };
        if !super::is_retry_loop(lp, helper, idx, src) {
            continue;
        }
        let name = syntax::function_name(helper, src);
        for &clause in idx.all(kinds::EXCEPT_CLAUSE) {
            let Some(func) = idx.enclosing(clause, kinds::FUNCTION_DEFINITION) else {
                continue;
            };
            let catches = syntax::except_types(clause).iter().any(|t| {
                let caught = syntax::text(*t, src);
                caught.rsplit('.').next() == Some(error)
            });
            let Some(attempt) = syntax::try_of(clause) else {
                continue;
            };
            let calls_helper = attempt.field("body").is_some_and(|body| {
                idx.within(body, kinds::CALL)
                    .iter()
                    .any(|c| idx.callee_name(*c, src) == name)
            });
            if func.id() == helper.id()
                || !catches
                || !calls_helper
                || !super::broad_except_returns_none::handler_returns_none(
                    clause,
                    func,
                    idx,
                    src,
                    &mut |_| false,
                )
            {
                continue;
            }
            let ret = idx
                .within(clause, kinds::RETURN_STATEMENT)
                .iter()
                .copied()
                .find(|r| super::owned_by(*r, func, idx) && gives_none(*r));
            let mut exhausted = match ret {
                Some(ret) => Exhausted::at_return(clause, ret, "caught-into-none", src),
                None => Exhausted {
                    lines: syntax::lines(clause),
                    falls_off: true,
                    key: format!("caught-into-none {error}"),
                    how: None,
                    helper: None,
                },
            };
            exhausted.helper = Some((lp, error.to_string()));
            out.push((attempt, func, exhausted));
        }
    }
    out
}

/// The error a retry loop's function raises once the attempts are spent: the `raise` right
/// after the loop, or in its `else`. Its last name (`BrightpayUnavailable`); not a bare
/// `raise`.
fn raised_when_spent<'s>(lp: Node<'_>, idx: &NodeIndex<'_>, src: &'s str) -> Option<&'s str> {
    // The text after the loop, past blank lines and comments, is read before the tree: asking
    // tree-sitter for a node's next sibling walks its parent's children, for every loop of
    // every file.
    let mut after = src.get(lp.end_byte()..).unwrap_or_default();
    loop {
        after = after.trim_start();
        match after.strip_prefix('#') {
            Some(comment) => after = comment.split_once('\n').map_or("", |(_, rest)| rest),
            None => break,
        }
    }
    let next = after.starts_with("raise").then(|| {
        let at = src.len() - after.len();
        let raises = idx.all(kinds::RAISE_STATEMENT);
        let i = raises.partition_point(|r| r.start_byte() < at);
        raises.get(i).copied().filter(|r| r.start_byte() == at)
    });
    let raise = next.flatten().or_else(|| {
        let alternative = lp.field("alternative")?;
        idx.within(alternative, kinds::RAISE_STATEMENT)
            .first()
            .copied()
    })?;
    let raised = raise.named_child(0)?;
    let raised = if raised.kind() == kinds::CALL {
        raised.field("function")?
    } else {
        raised
    };
    if !matches!(raised.kind(), kinds::IDENTIFIER | kinds::ATTRIBUTE) {
        return None;
    }
    let text = syntax::text(raised, src);
    text.rsplit('.').next().filter(|n| !n.is_empty())
}

/// A retry decorator told to return `None` once it stops: tenacity's `retry_error_callback`
/// returning `None`, or backoff's `raise_on_giveup=False`.
fn decorator_returns_none(
    decorator: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &str,
) -> Option<Exhausted<'static>> {
    let mut cursor = decorator.walk();
    let call = decorator
        .named_children(&mut cursor)
        .find(|c| c.kind() == kinds::CALL)?;
    let how = if let Some(callback) = syntax::keyword_arg(call, "retry_error_callback", src) {
        returns_only_none(callback, idx, src).then_some("callback")?
    } else {
        let giveup = syntax::keyword_arg(call, "raise_on_giveup", src)?;
        (syntax::text(giveup, src) == "False").then_some("giveup")?
    };
    Some(Exhausted {
        lines: syntax::lines(decorator),
        falls_off: false,
        key: format!("decorator-returns-none {how}"),
        how: Some(how),
        helper: None,
    })
}

/// A callback that gives `None`: `lambda state: None`, or a function of this file whose every
/// way out is `return None` or its end.
fn returns_only_none(callback: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> bool {
    if callback.kind() == kinds::LAMBDA {
        return callback
            .field("body")
            .is_some_and(|b| b.kind() == kinds::NONE);
    }
    if callback.kind() != kinds::IDENTIFIER {
        return false;
    }
    let name = syntax::text(callback, src);
    idx.all(kinds::FUNCTION_DEFINITION)
        .iter()
        .filter(|f| syntax::function_name(**f, src) == name)
        .any(|f| {
            let own = |n: &Node<'_>| super::owned_by(*n, *f, idx);
            let raises = idx.within(*f, kinds::RAISE_STATEMENT).iter().any(own);
            let returns_value = idx
                .within(*f, kinds::RETURN_STATEMENT)
                .iter()
                .any(|r| own(r) && !syntax::returns_none(*r));
            !raises && !returns_value
        })
}

/// Whether the attempts make a payment call (`capture(...)`, `transaction.sale(...)`), not a
/// read of one (`get_refund`, `fetch_payment`): a lost answer may hide money that moved.
fn moves_money(cx: &Ctx<'_>, attempt: Node<'_>) -> bool {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return false;
    };
    idx.within(attempt, kinds::CALL).iter().any(|&call| {
        let name = syntax::callee_name(call, src).to_ascii_lowercase();
        let reads = [
            "get", "fetch", "retrieve", "list", "find", "load", "lookup", "check", "poll", "read",
            "query", "search", "status",
        ]
        .iter()
        .any(|w| name.split('_').any(|part| part == *w));
        !reads && crate::rules::pay::is_payment_call(call, src, cx.vocab)
    })
}

/// A `return None` in an `except` of the loop, under an `if` about the attempts: the loop gives
/// up by handing back `None`.
fn gives_up_with_none<'t>(
    lp: Node<'t>,
    func: Node<'t>,
    idx: &NodeIndex<'t>,
    src: &str,
) -> Option<Node<'t>> {
    idx.within(lp, kinds::RETURN_STATEMENT)
        .iter()
        .copied()
        .filter(|r| syntax::returns_none(*r) && super::owned_by(*r, func, idx))
        .filter(|r| super::innermost_loop(*r, idx).is_some_and(|l| l.id() == lp.id()))
        .find(|r| {
            let handled = idx
                .enclosing(*r, kinds::EXCEPT_CLAUSE)
                .is_some_and(|e| e.start_byte() > lp.start_byte());
            let guard = idx
                .enclosing(*r, kinds::IF_STATEMENT)
                .filter(|i| i.start_byte() > lp.start_byte())
                .and_then(|i| i.field("condition"));
            handled && guard.is_some_and(|c| super::about_attempts(lp, c, idx, src))
        })
}

fn report(cx: &mut Ctx<'_>, lp: Node<'_>, func: Node<'_>, exhausted: Exhausted<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let qualname = facts::qualname(func, idx, src);
    let name = syntax::function_name(func, src).to_string();
    let declared = syntax::return_annotation(func, src);
    let annotation = declared
        .filter(|a| !syntax::annotation_allows_none(a))
        .map(str::to_string);
    let caller = super::dereferencing_caller(cx, &name);
    // A caller that drops the result of a payment (`await psp.capture(...)`, then the trip is
    // marked paid) cannot tell the spent attempts from a success.
    let dropper = caller
        .is_none()
        .then(|| {
            cx.change
                .calls_named(cx.side, &name)
                .find(|(f, c)| c.discarded && !f.is_test)
                .map(|(f, c)| format!("`{}` ({}:{})", c.function, f.path, c.line))
        })
        .flatten();
    // A decorator's attempts are the whole function.
    let attempt = if lp.kind() == kinds::DECORATOR {
        func
    } else {
        lp
    };
    // A value returned from the loop, or after it (`break` on success, then `return
    // response.json()`): the attempts were meant to produce it.
    let returns_in_loop = idx
        .within(func, kinds::RETURN_STATEMENT)
        .iter()
        .filter(|r| r.start_byte() >= attempt.start_byte())
        .any(|r| super::owned_by(*r, func, idx) && !gives_none(*r));
    // `-> Optional[...]` declares the `None`; only a caller that ignores it makes it a bug.
    let declares_none = declared.is_some() && annotation.is_none();
    let expects_result = annotation.is_some() || (returns_in_loop && !declares_none);
    let function = cx.facts.and_then(|f| f.function(&qualname)).cloned();
    // Retries of a helper that talks to the provider put the function that catches their
    // error on the path too.
    let helper = exhausted.helper.as_ref().and_then(|(helper_loop, error)| {
        let helper = idx.enclosing(*helper_loop, kinds::FUNCTION_DEFINITION)?;
        Some((*helper_loop, helper, error))
    });
    let helper_on_path = helper.is_some_and(|(_, helper, _)| {
        let facts = cx
            .facts
            .and_then(|f| f.function(&facts::qualname(helper, idx, src)));
        cx.on_payment_path(facts)
    });
    // `capture` over the client's own `_post`: its name says what it retries.
    // A retrier configured in the function retries what it is handed: the function's amount
    // parameter (`settle(..., amount_minor, currency)`) says it moves money.
    let configured_with_money = exhausted.key.starts_with("configured")
        && crate::rules::pay::parameters(func, src)
            .iter()
            .any(|p| cx.vocab.is_money_argument(p));
    let names_payment = configured_with_money
        || cx.vocab.is_payment_operation(&name) && !crate::rules::pay::beside_the_money(&name);
    // A retry helper the change's payments are handed to (`retry_async(lambda: stripe.
    // create_transfer(...))` in `_submit`, through `_call_stripe`): what it retries is theirs.
    let handed_payments = || {
        let (Some(file), Some(function)) = (cx.facts, function.as_ref()) else {
            return false;
        };
        crate::rules::idem::callers_of(cx, file, function, 2)
            .iter()
            .any(|(caller, _)| !caller.is_test && caller.payment)
    };
    let on_path = cx.on_payment_path(function.as_ref())
        || helper_on_path
        || names_payment
        || handed_payments();
    let raised_before = cx
        .other_facts
        .and_then(|f| f.function(&qualname))
        .is_some_and(|f| !f.may_return_none() && f.none_returns.is_empty());
    // `-> Payment | None` added with the retries: the `None` is declared, but on a payment
    // path it now stands for "the outcome is unknown" where the function used to raise.
    // So it does where what is retried moves money, in a function new or old: the attempt whose
    // answer was lost may have paid, and a caller can only read `None` as "not paid".
    // Retries of a helper, caught here: what the helper sends is this function's purpose
    // (`create_payout` over `_post`).
    let retries_money = on_path
        && (moves_money(cx, attempt)
            || exhausted.helper.is_some() && cx.vocab.is_payment_operation(&name));
    let reported = expects_result || caller.is_some() || raised_before && on_path || retries_money;
    if !reported {
        return;
    }
    // Reported for the money alone, with callers that test the `None`: no `AttributeError` to
    // warn of, and no task's retries that it changes.
    let tested_none = retries_money && !raised_before && !expects_result && caller.is_none();
    // The loop, and the library, are the helper's where the retries are another function's.
    let (retried, requests_in) = match helper {
        Some((helper_loop, _, _)) => (helper_loop, helper_loop),
        None => (lp, attempt),
    };
    let loop_line = syntax::lines(retried).0;
    let (autoretry_error, transport_error) = transport_errors(cx, requests_in);
    let finding = cx
        .report_lines(&RULE, exhausted.lines, exhausted.key)
        .arg("function", qualname.clone())
        .arg("loop_line", loop_line.to_string())
        .arg("autoretry_error", autoretry_error.to_string())
        .arg("transport_error", transport_error.to_string());
    finding.function = qualname.clone();
    if exhausted.falls_off {
        finding.note("falls_off");
    }
    if let Some(how) = exhausted.how {
        finding.note(how);
    }
    if let Some((_, helper, error)) = helper {
        finding
            .arg("helper", syntax::function_name(helper, src).to_string())
            .arg("error", error.clone())
            .note("caught");
    }
    if raised_before {
        finding.note("contract");
    } else if retries_money {
        finding.note("unknown");
    }
    if let Some(annotation) = annotation {
        finding.arg("annotation", annotation).note("annotation");
    }
    match caller {
        Some(caller) => caller.cite(finding),
        // What the "task" note says a typical caller fails with.
        None => {
            finding.arg("error_name", facts::none_error(false).0);
            if let Some(dropper) = dropper {
                finding.arg("dropper", dropper).note("dropped");
            }
        }
    }
    if on_path && !tested_none {
        finding.note("task");
    } else if !on_path {
        finding.severity(Severity::Nit);
    }
    if on_path
        && !tested_none
        && let Some(new) = function.as_ref()
    {
        let old = cx.other_facts.and_then(|f| f.function(&qualname));
        let caught = super::newly_caught(new, old);
        // The task is in the repository: say which one stops retrying, not what might happen.
        let lost = cx.project().and_then(|project| {
            let tasks = cx.tasks_reaching(cx.path, &qualname);
            super::lost_autoretry(project, &tasks, &caught)
        });
        if let Some((task, lost)) = lost
            && let Some(finding) = cx.findings.last_mut()
        {
            finding.notes.retain(|n| *n != "task");
            super::cite_lost_autoretry(finding, &task, &lost);
        }
    }
    // A task found in the repository answers the question (ERR003 and RETRY005 say what).
    if on_path
        && !tested_none
        && cx.touches_added(exhausted.lines.0, exhausted.lines.1)
        && !cx.task_config_known(cx.path, &qualname)
    {
        cx.ask(
            "task-config",
            vec![("function", name), ("returns_none", "yes".to_string())],
        );
    }
}

/// `while True:`, or a loop until told to stop, with no `break`: the code after it runs only
/// through an exception or at shutdown, never because the attempts ran out.
fn runs_forever(lp: Node<'_>, func: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> bool {
    if lp.kind() != kinds::WHILE_STATEMENT {
        return false;
    }
    let Some(cond) = lp.field("condition") else {
        return false;
    };
    let endless = matches!(syntax::text(cond, src), "True" | "1");
    (endless || until_told_to_stop(lp, cond, idx, src)) && !has_own_break(lp, func, idx)
}

/// A loop on a flag it does not set itself (`while self.running:`, `while not
/// stop.is_set():`), counting no attempts and watching no clock: a service's loop that
/// reconnects until shutdown, not a retry that can run out.
fn until_told_to_stop(lp: Node<'_>, cond: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> bool {
    let mut flag = cond;
    while flag.kind() == kinds::NOT_OPERATOR {
        let Some(inner) = flag.field("argument") else {
            return false;
        };
        flag = inner;
    }
    if !matches!(
        flag.kind(),
        kinds::IDENTIFIER | kinds::ATTRIBUTE | kinds::CALL
    ) {
        return false;
    }
    let text = syntax::text(flag, src);
    let sets_it = || {
        idx.within(lp, kinds::ASSIGNMENT)
            .iter()
            .chain(idx.within(lp, kinds::AUGMENTED_ASSIGNMENT))
            .any(|a| {
                a.field("left")
                    .is_some_and(|l| syntax::text(l, src) == text)
            })
    };
    !super::names_clock(text) && !super::about_attempts(lp, flag, idx, src) && !sets_it()
}

/// A `yield` of the function itself, not of a function nested in it. Read from the tree only
/// where the word is in the function's text: few functions are generators.
fn is_generator(func: Node<'_>, src: &str) -> bool {
    fn yields(node: Node<'_>) -> bool {
        let mut cursor = node.walk();
        node.named_children(&mut cursor)
            .any(|child| match child.kind() {
                YIELD => true,
                kinds::FUNCTION_DEFINITION | kinds::CLASS_DEFINITION | kinds::LAMBDA => false,
                _ => yields(child),
            })
    }
    const YIELD: &str = "yield";
    memchr::memmem::find(syntax::text(func, src).as_bytes(), YIELD.as_bytes()).is_some()
        && func.field("body").is_some_and(yields)
}

/// A `break` of this loop, not of a loop nested in it.
fn has_own_break(lp: Node<'_>, func: Node<'_>, idx: &NodeIndex<'_>) -> bool {
    idx.within(lp, kinds::BREAK_STATEMENT).iter().any(|b| {
        super::owned_by(*b, func, idx)
            && super::innermost_loop(*b, idx).is_some_and(|l| l.id() == lp.id())
    })
}

/// The statements that run once the loop has given up, and what they give the caller. A loop
/// that ends a `with` block (`async with httpx.AsyncClient() as client:`) goes on with what
/// follows the block.
fn exhausted_exit(
    lp: Node<'_>,
    func: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &str,
) -> Option<Exhausted<'static>> {
    // `for ...: ... break` then `else: return None`: the `else` runs only when no attempt
    // broke out.
    let otherwise = lp.field("alternative").and_then(|e| e.field("body"));
    let statements = otherwise.map(syntax::statements).unwrap_or_default();
    if let Some(ret) = statements
        .iter()
        .find(|s| s.kind() == kinds::RETURN_STATEMENT)
    {
        if !gives_none(*ret) {
            return None;
        }
        let first = statements.first().copied().unwrap_or(*ret);
        return Some(Exhausted::at_return(
            first,
            *ret,
            "return-after-retries",
            src,
        ));
    }
    let mut stmt = lp;
    let mut block = lp.parent().filter(|p| p.kind() == kinds::BLOCK)?;
    let mut after: Vec<Node<'_>> = Vec::new();
    loop {
        let here: Vec<Node<'_>> = syntax::statements(block)
            .into_iter()
            .skip_while(|s| s.id() != stmt.id())
            .skip(1)
            .collect();
        for next in &here {
            match next.kind() {
                kinds::RAISE_STATEMENT => return None,
                kinds::RETURN_STATEMENT
                    if gives_none(*next) || still_none(*next, lp, func, idx, src) =>
                {
                    let first = after.first().or(here.first()).copied().unwrap_or(*next);
                    let mut exhausted =
                        Exhausted::at_return(first, *next, "return-after-retries", src);
                    if !gives_none(*next) {
                        exhausted.how = Some("still_none");
                    }
                    return Some(exhausted);
                }
                // `if response is None: return None, None`: where the attempts ran out.
                kinds::IF_STATEMENT => {
                    if let Some(ret) = none_when_unset(*next, lp, func, idx, src) {
                        return Some(Exhausted::at_return(
                            *next,
                            ret,
                            "return-after-retries",
                            src,
                        ));
                    }
                    if !idx.within(*next, kinds::RAISE_STATEMENT).is_empty() {
                        return None;
                    }
                }
                kinds::RETURN_STATEMENT => return None,
                // `if last_exc: raise ...`: whether the `return None` is reachable is not ours
                // to guess.
                kinds::WITH_STATEMENT | kinds::TRY_STATEMENT
                    if !idx.within(*next, kinds::RAISE_STATEMENT).is_empty() =>
                {
                    return None;
                }
                _ => {}
            }
        }
        after.extend(here);
        let Some(with) = block.parent().filter(|p| p.kind() == kinds::WITH_STATEMENT) else {
            break;
        };
        let Some(outer) = with.parent().filter(|p| p.kind() == kinds::BLOCK) else {
            break;
        };
        stmt = with;
        block = outer;
    }
    // Falls off the end only if the loop sits in the function's own body.
    let body = func.field("body")?;
    if body.id() != block.id() {
        return None;
    }
    let lines = match (after.first(), after.last()) {
        (Some(first), Some(last)) => (syntax::lines(*first).0, syntax::lines(*last).1),
        _ => {
            let first = syntax::lines(lp).0;
            (first, first)
        }
    };
    Some(Exhausted {
        lines,
        falls_off: true,
        key: "falls-off-after-retries".to_string(),
        how: None,
        helper: None,
    })
}

/// `return None`, a bare `return`, or `return None, None`: nothing a caller can use.
fn gives_none(ret: Node<'_>) -> bool {
    syntax::returns_none(ret)
        || syntax::return_value(ret).is_some_and(|v| {
            matches!(v.kind(), kinds::EXPRESSION_LIST | kinds::TUPLE)
                && crate::python::named_children(v)
                    .iter()
                    .all(|e| e.kind() == kinds::NONE)
        })
}

/// `if result is None:` (or `if not result:`) right after the loop, on a name that is still
/// `None` once every attempt failed, whose body gives the caller nothing: that return.
fn none_when_unset<'t>(
    stmt: Node<'t>,
    lp: Node<'_>,
    func: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &str,
) -> Option<Node<'t>> {
    let cond = stmt.field("condition")?;
    let tested = match cond.kind() {
        kinds::NOT_OPERATOR => cond.field("argument")?,
        kinds::COMPARISON_OPERATOR => {
            let parts = crate::python::named_children(cond);
            let none = parts.get(1).is_some_and(|n| n.kind() == kinds::NONE);
            let is = syntax::text(cond, src).split_whitespace().nth(1) == Some("is");
            (parts.len() == 2 && none && is).then(|| parts.first().copied())??
        }
        _ => return None,
    };
    if tested.kind() != kinds::IDENTIFIER {
        return None;
    }
    let ret = stmt
        .field("consequence")
        .and_then(|b| syntax::statements(b).last().copied())
        .filter(|r| r.kind() == kinds::RETURN_STATEMENT && gives_none(*r))?;
    unset_when_exhausted(syntax::text(tested, src), lp, func, idx, src).then_some(ret)
}

/// `return result` after the loop, where `result = None` before it and only a successful
/// attempt sets it: once every attempt failed, it is still `None`.
fn still_none(ret: Node<'_>, lp: Node<'_>, func: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> bool {
    let Some(value) = syntax::return_value(ret).filter(|v| v.kind() == kinds::IDENTIFIER) else {
        return false;
    };
    unset_when_exhausted(syntax::text(value, src), lp, func, idx, src)
}

/// `name` is `None` before the loop and set only by an attempt that succeeded.
fn unset_when_exhausted(
    name: &str,
    lp: Node<'_>,
    func: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &str,
) -> bool {
    let before = idx.assigned_before(Some(func), name, lp.start_byte(), src);
    if before.is_none_or(|b| b.kind() != kinds::NONE) {
        return false;
    }
    // Every assignment in the loop sits in a `try`'s body, after what may fail: none in a
    // handler, a `finally` or straight in the loop, where a failed attempt would set it too.
    let sets = idx
        .within(lp, kinds::ASSIGNMENT)
        .iter()
        .copied()
        .filter(|a| {
            a.field("left")
                .is_some_and(|l| l.kind() == kinds::IDENTIFIER && syntax::text(l, src) == name)
        });
    let mut any = false;
    for set in sets {
        any = true;
        let in_try_body = idx
            .enclosing(set, kinds::TRY_STATEMENT)
            .filter(|t| t.start_byte() > lp.start_byte())
            .and_then(|t| t.field("body"))
            .is_some_and(|b| syntax::contains(b, set));
        if !in_try_body {
            return false;
        }
    }
    any
}

/// The base error of the HTTP library the retried request uses (`http::http_calls`, the family's
/// own reading of calls and clients), as a task's `autoretry_for` names it, and the transport
/// error a domain exception may subclass to keep that retry: the message and the fix speak the
/// library the code uses (httpx's names when no request in `attempt` says which).
fn transport_errors<'t>(cx: &Ctx<'t>, attempt: Node<'_>) -> (&'static str, &'static str) {
    let lib = crate::rules::http::http_calls(cx)
        .into_iter()
        .find(|c| !c.constructor && syntax::contains(attempt, c.node))
        .map(|c| c.lib);
    match lib {
        Some(Lib::Requests) => ("requests.RequestException", "requests.ConnectionError"),
        Some(Lib::Aiohttp) => ("aiohttp.ClientError", "aiohttp.ClientConnectionError"),
        Some(Lib::Urllib3) => (
            "urllib3.exceptions.HTTPError",
            "urllib3.exceptions.ProtocolError",
        ),
        _ => ("httpx.HTTPError", "httpx.TransportError"),
    }
}
