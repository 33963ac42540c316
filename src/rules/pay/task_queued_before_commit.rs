//! PAY031 task-queued-before-commit: a job that moves money (a refund, a payout, a capture) is
//! queued while the transaction that writes its record is still open: inside
//! `transaction.atomic()`, `session.begin()`, `conn.transaction()`, a function decorated
//! `@transaction.atomic`, or between a session's writes and its `commit()`. The broker hands
//! the job to a worker at once; a fast worker reads the row before the commit and finds
//! nothing (or the state before the change), and a transaction rolled back after the send
//! leaves a job that pays for a record that never existed.
//!
//! Left alone: a job queued from `transaction.on_commit(...)` (a lambda, a `partial`, a function
//! handed to it), Celery's `delay_on_commit`, a job queued after the block or the commit, a
//! transaction that writes nothing, and jobs that only tell someone (an email, a receipt).
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY031",
    doc: include_str!("../../../rules/pay/PAY031.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a job queued in a file that opens or commits a transaction. The facts'
/// calls are asked first: most files queue nothing, and their text is not scanned.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.facts.calls.iter().any(|c| {
            matches!(
                c.name(),
                "delay"
                    | "apply_async"
                    | "kiq"
                    | "send"
                    | "send_with_options"
                    | "enqueue"
                    | "enqueue_call"
                    | "enqueue_job"
                    | "send_task"
                    | "async_task"
            )
        })
        && s.mentions(&[
            "atomic",
            "begin(",
            "begin_nested(",
            "transaction",
            "commit(",
        ])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    let actors = src.contains("dramatiq") || src.contains("@actor");
    for &call in idx.all(kinds::CALL) {
        let Some(job) = queued_job(call, src, actors) else {
            continue;
        };
        if !moves_money(cx, call, job, src) {
            continue;
        }
        let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        // A job queued from a lambda or a function of its own inside the block is handed to
        // `on_commit` (or run later by whoever holds it), not sent here.
        if idx
            .enclosing(call, kinds::LAMBDA)
            .is_some_and(|l| syntax::contains(func, l))
        {
            continue;
        }
        let Some(open) = open_transaction(idx, func, call, src) else {
            // The function hands another job to `transaction.on_commit` (`on_commit(lambda:
            // close_exhausted_invoice.delay(invoice.pk))`): it runs inside a transaction, and
            // this one is sent before it commits.
            if let Some(deferred) = deferred_beside(idx, func, call, src) {
                let function = facts::qualname(func, idx, src);
                let finding = cx
                    .report(&RULE, call)
                    .arg("function", function.clone())
                    .arg("job", job.to_string())
                    .arg("deferred", syntax::normalized(deferred, src))
                    .arg("line", syntax::lines(deferred).0.to_string())
                    .note("beside_on_commit");
                finding.function = function;
            }
            continue;
        };
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, call)
            .arg("function", function.clone())
            .arg("job", job.to_string())
            .arg("transaction", open.text)
            .arg("line", open.line.to_string())
            .arg("commit_line", open.commit.to_string());
        finding.function = function;
    }
}

/// The job a call queues, by the name it is known by: `refund_order.delay(...)`,
/// `process_payout.apply_async(...)`, `queue.enqueue(send_refund, ...)`,
/// `app.send_task("billing.refund", ...)`, `await redis.enqueue_job("capture_booking", ...)`,
/// a dramatiq actor's `.send(...)` (in a file that uses dramatiq), taskiq's `.kiq(...)`.
fn queued_job<'s>(call: Node<'_>, src: &'s str, actors: bool) -> Option<&'s str> {
    let callee = syntax::callee(call, src);
    let (receiver, name) = callee.rsplit_once('.').unwrap_or(("", callee));
    match name {
        "delay" | "apply_async" | "kiq" => (!receiver.is_empty()).then_some(receiver),
        // A Django signal's `send(sender=...)` is no job.
        "send" | "send_with_options" => {
            (actors && !receiver.is_empty() && syntax::keyword_arg(call, "sender", src).is_none())
                .then_some(receiver)
        }
        "enqueue" | "enqueue_call" | "enqueue_job" | "send_task" | "async_task" => {
            let first = syntax::keyword_arg(call, "func", src)
                .or_else(|| syntax::positional_args(call).first().copied())?;
            match first.kind() {
                kinds::STRING => syntax::string_value(first, src),
                kinds::IDENTIFIER | kinds::ATTRIBUTE => Some(syntax::text(first, src)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Words of a job's name that say it only tells someone or files something away: queued early,
/// it loses a message, not money.
const TELLS: &[&str] = &[
    "email",
    "emails",
    "mail",
    "notify",
    "notification",
    "notifications",
    "receipt",
    "receipts",
    "sms",
    "push",
    "slack",
    "analytics",
    "audit",
    "log",
    "metric",
    "metrics",
    "report",
    "pdf",
    "export",
    "index",
    "search",
    "thumbnail",
    "track",
    "tracking",
    "welcome",
    "reminder",
];

/// Words of a job's name, or of a record it is handed, that put money on its path.
const MONEY: &[&str] = &[
    // `release_paid_order`: what follows a payment, which a worker that reads the order
    // before the commit finds unpaid and drops.
    "paid",
    "payment",
    "payments",
    "refund",
    "refunds",
    "payout",
    "payouts",
    "withdrawal",
    "withdrawals",
    "settle",
    "settlement",
    "disbursement",
    "remittance",
    "dunning",
    "transfer",
    "transfers",
    "charge",
    "charges",
    "capture",
    "captures",
    "wire",
    "earnings",
    "funds",
    "reimburse",
    "reimbursement",
    "fee",
    "fees",
    "invoice",
    "invoices",
];

/// Whether the job moves money: its name is a payment operation or names one
/// (`submit_membership_refund`, `process_payout`), or it is handed a payment record
/// (`process.delay(refund.pk)`, `run.delay(payout_id=p.id)`); never a job that only tells.
fn moves_money(cx: &Ctx<'_>, call: Node<'_>, job: &str, src: &str) -> bool {
    let name = job.rsplit(['.', ':']).next().unwrap_or(job);
    let words = syntax::name_words(name);
    if words.iter().any(|w| TELLS.contains(&w.as_str())) {
        return false;
    }
    if cx.vocab.is_payment_operation(&words.join("_"))
        || words.iter().any(|w| MONEY.contains(&w.as_str()))
    {
        return true;
    }
    let args = call
        .child_by_field_name("arguments")
        .map_or("", |a| syntax::text(a, src));
    syntax::name_words(args)
        .iter()
        .any(|w| MONEY.contains(&w.as_str()))
}

/// The transaction still open where a job is queued.
struct Open {
    /// How it was opened, as written (`transaction.atomic()`, `@transaction.atomic`,
    /// `session.commit()`).
    text: String,
    line: u32,
    /// The line it commits at: the block's or the function's last, or the `commit()`'s.
    commit: u32,
}

/// The transaction that `call` (owned by `func`) is queued inside, when it writes something:
/// a `with` that opens one, the function's own `@atomic`, or a session written to before the
/// call and committed only after it.
fn open_transaction(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    call: Node<'_>,
    src: &str,
) -> Option<Open> {
    let owned = |n: Node<'_>| crate::rules::idem::owned_by(idx, n, Some(func));
    if !owned(call) {
        return None;
    }
    // A write before the job, or after it on the job's own path: a branch that queues and
    // returns (`if earlier is not None: queue.enqueue(run, earlier.id); return ...`) commits
    // nothing of its own, whatever the other branches write later.
    let path_ends = returns_after(call, func);
    let writes_in = |scope: Node<'_>| {
        idx.within(scope, kinds::CALL).iter().any(|&c| {
            owned(c)
                && c.id() != call.id()
                && (c.end_byte() <= call.start_byte()
                    || path_ends.is_none_or(|end| c.start_byte() < end))
                && writes(idx, func, c, src)
        })
    };
    for &with in idx.within(func, kinds::WITH_STATEMENT) {
        let Some(body) = with.child_by_field_name("body") else {
            continue;
        };
        if !syntax::contains(body, call) || !opens_transaction(syntax::with_clause(with, src)) {
            continue;
        }
        if writes_in(body) || handed_from(idx, func, body, call, src) {
            return Some(Open {
                text: syntax::with_clause(with, src).trim().to_string(),
                line: syntax::lines(with).0,
                commit: syntax::lines(with).1,
            });
        }
    }
    if let Some(decorated) = idx.decorated(func) {
        for decorator in syntax::decorators(decorated) {
            let text = syntax::text(decorator, src);
            let bare = text.trim_start_matches('@');
            let name = bare.split('(').next().unwrap_or(bare);
            let last = name.rsplit('.').next().unwrap_or(name);
            if matches!(last, "atomic" | "transactional" | "transaction") && writes_in(func) {
                return Some(Open {
                    text: text.trim().to_string(),
                    line: syntax::lines(decorator).0,
                    commit: syntax::lines(func).1,
                });
            }
        }
    }
    committed_after(idx, func, call, src, owned)
}

/// A call of `func` itself that hands work to `transaction.on_commit(...)`, other than the one
/// `call` is in: the function expects to run inside a transaction.
fn deferred_beside<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    call: Node<'t>,
    src: &str,
) -> Option<Node<'t>> {
    idx.within(func, kinds::CALL).iter().copied().find(|&c| {
        syntax::callee_name(c, src) == "on_commit"
            && !syntax::contains(c, call)
            && crate::rules::idem::owned_by(idx, c, Some(func))
            // Not one inside a block that has closed by the time the job is queued (`with
            // transaction.atomic(): ... on_commit(...)`, then `process_payout.delay(...)`
            // after it): the job goes after that commit.
            && !idx
                .within(func, kinds::WITH_STATEMENT)
                .iter()
                .any(|w| syntax::contains(*w, c) && !syntax::contains(*w, call))
    })
}

/// Whether the job is handed something the block got (`refund = await
/// refunds.request_refund(session, ...)` ... `enqueue_job("submit_refund", str(refund.id))`):
/// a record a helper wrote in this transaction, as far as the block shows.
fn handed_from(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    body: Node<'_>,
    call: Node<'_>,
    src: &str,
) -> bool {
    let Some(args) = call.child_by_field_name("arguments") else {
        return false;
    };
    let args = syntax::text(args, src);
    idx.within(body, kinds::ASSIGNMENT).iter().any(|&a| {
        crate::rules::idem::owned_by(idx, a, Some(func))
            && a.end_byte() <= call.start_byte()
            && a.field("right").is_some_and(|r| {
                let r = crate::rules::idem::strip_await(r);
                r.kind() == kinds::CALL && !reads(syntax::callee_name(r, src))
            })
            && a.field("left").is_some_and(|l| {
                l.kind() == kinds::IDENTIFIER && syntax::has_word(args, syntax::text(l, src))
            })
    })
}

/// A query that only reads (`Payout.objects.select_for_update().get(...)`,
/// `session.scalar(...)`): what it returns was there before the transaction.
fn reads(name: &str) -> bool {
    matches!(
        name,
        "get"
            | "first"
            | "one"
            | "one_or_none"
            | "scalar"
            | "scalars"
            | "scalar_one"
            | "scalar_one_or_none"
            | "first_or_none"
            | "get_or_none"
            | "find"
            | "find_one"
            | "fetch"
            | "fetchrow"
            | "fetchone"
            | "fetchval"
            | "all"
            | "filter"
            | "select_for_update"
            | "load"
            | "refresh"
    ) || name.starts_with("get_")
        || name.starts_with("_get")
        || name.starts_with("load_")
        || name.starts_with("find_")
        || name.starts_with("fetch_")
}

/// `session.add(refund); enqueue(...); session.commit()`: the session is written to before the
/// call, not committed between the write and the call, and committed after it.
fn committed_after(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    call: Node<'_>,
    src: &str,
    owned: impl Fn(Node<'_>) -> bool,
) -> Option<Open> {
    let calls = idx.within(func, kinds::CALL);
    let commits = |c: Node<'_>| {
        let callee = syntax::callee(c, src);
        callee.rsplit_once('.').is_some_and(|(receiver, name)| {
            name == "commit"
                && !["consumer", "git", "repo", "offset", "kafka"]
                    .iter()
                    .any(|w| syntax::contains_lowercase(receiver, w))
        })
    };
    let commit = calls
        .iter()
        .copied()
        .find(|&c| owned(c) && c.start_byte() > call.end_byte() && commits(c))?;
    // The first write since the last commit opened what the commit closes.
    let mut first_write = None;
    for &c in calls {
        if c.start_byte() >= call.start_byte() {
            break;
        }
        if !owned(c) {
            continue;
        }
        if commits(c) {
            first_write = None;
        } else if first_write.is_none()
            && writes(idx, func, c, src)
            && syntax::receiver(c).is_some()
        {
            first_write = Some(c);
        }
    }
    first_write.map(|write| Open {
        text: crate::rules::pay::first_line(write, src),
        line: syntax::lines(write).0,
        commit: syntax::lines(commit).0,
    })
}

/// Whether a `with` clause opens a transaction: Django's `transaction.atomic()`, SQLAlchemy's
/// `session.begin()`/`engine.begin()`/`begin_nested()`, asyncpg's and psycopg's
/// `conn.transaction()`, peewee's `db.atomic()`, Tortoise's `in_transaction()`, a project's
/// `session_scope()`.
fn opens_transaction(clause: &str) -> bool {
    syntax::name_words(clause).iter().any(|w| {
        matches!(
            w.as_str(),
            "atomic" | "begin" | "transaction" | "scope" | "transactional"
        )
    }) && !clause.contains("on_commit")
}

/// Where the path through `call` leaves the function: the start of the first `return` or
/// `raise` after it in a block that holds it.
fn returns_after(call: Node<'_>, func: Node<'_>) -> Option<usize> {
    let mut node = call;
    while let Some(parent) = node.parent() {
        if parent.id() == func.id() {
            break;
        }
        if parent.kind() == "block" {
            let mut next = node.next_named_sibling();
            while let Some(stmt) = next {
                if matches!(
                    stmt.kind(),
                    kinds::RETURN_STATEMENT | kinds::RAISE_STATEMENT
                ) {
                    return Some(stmt.start_byte());
                }
                next = stmt.next_named_sibling();
            }
        }
        node = parent;
    }
    None
}

/// Whether a call writes to the database: an ORM's save, create, update or delete, a session's
/// `add`/`flush`/`merge`, a statement executed (`execute` of an INSERT, UPDATE or a built
/// `insert()`/`update()`, also through a name the function or the module bound it to).
fn writes(idx: &NodeIndex<'_>, func: Node<'_>, call: Node<'_>, src: &str) -> bool {
    let name = syntax::callee_name(call, src);
    match name {
        "save"
        | "create"
        | "bulk_create"
        | "bulk_update"
        | "update"
        | "delete"
        | "get_or_create"
        | "update_or_create"
        | "add"
        | "add_all"
        | "flush"
        | "merge"
        | "insert"
        | "bulk_save_objects"
        | "bulk_insert_mappings" => {
            // A set's or a dict's `add`/`update`, a cache's `delete`, is no write.
            !matches!(name, "add" | "update" | "delete") || {
                let receiver = syntax::receiver(call).map_or("", |r| syntax::text(r, src));
                let last = crate::rules::facts::last_name(receiver);
                ["session", "db", "objects", "query", "sess", "uow"]
                    .iter()
                    .any(|w| syntax::contains_lowercase(last, w))
                    || receiver.ends_with(')')
            }
        }
        "execute" | "executemany" | "fetchrow" | "fetchval" | "fetch" => {
            // A lock (`with_for_update()`, `FOR UPDATE`) reads.
            let says_write = |text: &str| {
                ["INSERT", "DELETE", "insert(", "delete("]
                    .iter()
                    .any(|w| text.contains(w))
                    || text
                        .match_indices("update(")
                        .any(|(at, _)| !text[..at].ends_with("for_"))
                    || text
                        .match_indices("UPDATE")
                        .any(|(at, _)| !text[..at].ends_with("FOR "))
            };
            says_write(syntax::text(call, src))
                || syntax::positional_args(call).first().is_some_and(|a| {
                    a.kind() == kinds::IDENTIFIER && {
                        let name = syntax::text(*a, src);
                        idx.assigned_before(Some(func), name, call.start_byte(), src)
                            .or_else(|| idx.assigned_before(None, name, call.start_byte(), src))
                            .is_some_and(|v| says_write(syntax::text(v, src)))
                    }
                })
        }
        _ => false,
    }
}
