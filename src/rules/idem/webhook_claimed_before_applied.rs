//! IDEM010 webhook-claimed-before-applied: a webhook view (or a message consumer) claims an
//! event in the cache (`if not cache.add(f"event:{id}", 1, timeout=WEEK): return 200`) and only
//! then applies it, and nothing takes the claim back when applying fails. The failure answers
//! the provider with an error, the provider delivers the event again, and the redelivery finds
//! the claim and is acknowledged unapplied: a payment confirmed by the provider that the service
//! never records, a refund it never books.
//!
//! Left alone: a claim deleted again (in an `except`, a `finally`), a claim of less than an hour
//! (a lock for one run, which a later delivery outlives), Django's `add` without a timeout (its
//! default is minutes), and a view whose only work is to hand the event to a queue.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::err::failure_swallowed::{Inbound, inbound};
use crate::rules::{Check, Ctx, Gate, Local, Rule, Scan, facts};

use super::key_outlived_by_retries::{lifetime_arg, lifetime_seconds, released, span};
use super::webhook_marker_expires::{delivery_key, redis_claim};

pub(crate) static RULE: Rule = Rule {
    id: "IDEM010",
    doc: include_str!("../../../rules/idem/IDEM010.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Providers' first redeliveries come within the hour: a claim that lasts less is let go before
/// the next delivery asks.
const HELD_LONG_SECONDS: f64 = 60.0 * 60.0;

/// Every finding is a claim (`add`, `set(..., nx=True)`, `setnx`) in a file of code that names
/// events: the calls' names first, read once by the facts pass.
fn gate(s: &Scan<'_>) -> bool {
    // The transaction first: most files have none, and the six words of a record are not
    // looked for.
    !s.facts.is_test
        && (s.facts.calls.iter().any(|c| {
            c.receiver().is_some() && matches!(c.name(), "add" | "setnx")
                || c.name() == "set" && c.receiver().is_some() && s.mentions(&["nx=True"])
                || c.receiver().is_some() && MARKS.contains(&c.name())
        }) || s.mentions(&["transaction(", "atomic(", ".begin("])
            && (s.mentions(RECORDS_ONCE) || s.mentions(ORM_TURNED_AWAY)))
        && s.mentions(&["event", "notification", "delivery", "webhook"])
}

/// What writes a row once and tells whether it was already there.
const RECORDS_ONCE: &[&str] = &[
    "on_conflict_do_nothing",
    "ON CONFLICT",
    "on conflict",
    "get_or_create",
    "INSERT OR IGNORE",
    "INSERT IGNORE",
];

/// What turns a repeat away when the delivery is recorded through an ORM: a unique row's
/// refusal (`except IntegrityError: return`) or a lookup first (`if
/// ProcessedEvent.objects.filter(event_id=...).exists(): continue`).
const ORM_TURNED_AWAY: &[&str] = &["IntegrityError", "UniqueViolation", ".exists()"];

/// Writes that mark a delivery as seen, on a cache or on a store of the file's own
/// (`self.keys.remember(dedup_key, ttl=...)`).
const MARKS: &[&str] = &[
    "set",
    "setex",
    "remember",
    "mark_seen",
    "mark_processed",
    "mark_handled",
    "mark_as_processed",
    "mark_as_seen",
];

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    recorded_outside_the_transaction(cx, idx, src);
    marked_before_applied(cx, idx, src);
    marked_in_finally(cx, idx, src);
    for &call in idx.all(kinds::CALL) {
        let method = cx.callee_name(call);
        if !matches!(method, "add" | "set" | "setnx") {
            continue;
        }
        // `setnx` then `expire`: the lifetime is set by a call of its own.
        if method == "setnx" && src.contains(".expire(") {
            continue;
        }
        // The key first: most `add` and `set` calls are not of an event.
        let Some(key) = delivery_key(cx, call, method) else {
            continue;
        };
        let cached = super::cache_call(call, cx);
        let claim = cached
            .as_ref()
            .is_some_and(|c| matches!(c.op, super::Op::AtomicWrite))
            || redis_claim(call, method, src);
        if !claim {
            continue;
        }
        let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let Some(guard) = guards_a_way_out(idx, call, func, src) else {
            continue;
        };
        let held = match lifetime_arg(call, method, src) {
            Some((lifetime, scale)) => match lifetime_seconds(cx, idx, func, lifetime) {
                Some(seconds) => Held::For(seconds * scale),
                // `ex=settings.webhook_dedup_ttl_s`: set elsewhere, and named for what it is.
                None if dedup_window(syntax::text(lifetime, src)) => {
                    Held::Window(syntax::text(lifetime, src).to_string())
                }
                None => continue,
            },
            // Django's cache keeps a key for its default timeout, minutes unless configured.
            None if cached.as_ref().is_some_and(|c| c.django) => continue,
            None => Held::Forever,
        };
        if matches!(held, Held::For(s) if s < HELD_LONG_SECONDS)
            || released(cx, idx, call, &key, true)
        {
            continue;
        }
        let Some(work) = work_after(idx, func, guard, src) else {
            continue;
        };
        let Some(from) = inbound(cx, idx, func) else {
            continue;
        };
        let finding = report_marked(cx, call, key, func, work);
        match held {
            Held::For(seconds) => finding.arg("ttl", span(seconds)).note("held"),
            Held::Window(name) => finding.arg("window", name).note("window"),
            Held::Forever => finding.note("forever"),
        };
        if from == Inbound::Broker {
            finding.note("consumer");
        }
    }
}

/// Reports the delivery marked as seen at `call` with `key` in `func`, ahead of `work`, the
/// first call that applies it; the caller adds how long the mark is held and who delivers.
fn report_marked<'c>(
    cx: &'c mut Ctx<'_>,
    call: Node<'_>,
    key: String,
    func: Node<'_>,
    work: Node<'_>,
) -> &'c mut crate::review::Finding {
    let src = cx.src();
    let view = cx
        .index()
        .map(|idx| facts::qualname(func, idx, src))
        .unwrap_or_default();
    let work_text = crate::rules::pay::first_line(work, src);
    let finding = cx
        .report(&RULE, call)
        .arg("key", key)
        .arg("view", view.clone())
        .arg("work", work_text)
        .arg("work_line", syntax::lines(work).0.to_string());
    finding.function = view;
    finding
}

/// `if self.keys.seen(dedup_key): return` and then `self.keys.remember(dedup_key, ...)` ahead
/// of the work: a plain write marks the delivery as seen before it is applied, and nothing
/// takes the mark back when applying fails. The claim's own reading (`add`, `nx=True`) is the
/// loop in `check`; this one is of a read, a write and the work after.
fn marked_before_applied(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    for &call in idx.all(kinds::CALL) {
        let method = cx.callee_name(call);
        if !MARKS.contains(&method) || cx.call_text(call).receiver.is_none() {
            continue;
        }
        if redis_claim(call, method, src) {
            continue;
        }
        let Some(first) = syntax::positional_args(call).first().copied() else {
            continue;
        };
        let written = syntax::normalized(first, src);
        let key = super::resolve(cx, call, &written);
        if !super::webhook_marker_expires::names_a_delivery(&key) {
            continue;
        }
        let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        // The read of the same key before it that turns a repeat away.
        let guarded = idx.within(func, kinds::IF_STATEMENT).iter().any(|stmt| {
            stmt.end_byte() <= call.start_byte()
                && stmt.field("condition").is_some_and(|c| {
                    idx.within(c, kinds::CALL).iter().chain([&c]).any(|r| {
                        r.kind() == kinds::CALL
                            && syntax::positional_args(*r).first().is_some_and(|a| {
                                let text = syntax::normalized(*a, src);
                                text == written || super::resolve(cx, *r, &text) == key
                            })
                    })
                })
                && stmt
                    .field("consequence")
                    .is_some_and(|b| !syntax::block_falls_through(b, src))
        });
        if !guarded || released(cx, idx, call, &written, true) {
            continue;
        }
        // Held for less than a redelivery's wait: a lock for the run.
        if let Some((lifetime, scale)) = lifetime_arg(call, method, src)
            .or_else(|| syntax::keyword_arg(call, "ttl", src).map(|n| (n, 1.0)))
            && let Some(seconds) = lifetime_seconds(cx, idx, func, lifetime)
            && seconds * scale < HELD_LONG_SECONDS
        {
            continue;
        }
        let Some(work) = work_after(idx, func, call, src) else {
            continue;
        };
        let Some(from) = inbound(cx, idx, func) else {
            continue;
        };
        let finding = report_marked(cx, call, written, func, work).note("marked");
        if from == Inbound::Broker {
            finding.note("consumer");
        }
    }
}

/// `try: handler(item)` / `finally: cache.set(key, DONE, timeout=DEDUP_TTL)` behind a check of
/// the same key that turns a repeat away: the event is marked done whether applying it worked
/// or failed, and the redelivery that follows the failure is skipped as a repeat.
fn marked_in_finally(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    for &call in idx.all(kinds::CALL) {
        let method = cx.callee_name(call);
        if !MARKS.contains(&method) || cx.call_text(call).receiver.is_none() {
            continue;
        }
        let Some(finally) = syntax::ancestor(call, "finally_clause") else {
            continue;
        };
        let Some(first) = syntax::positional_args(call).first().copied() else {
            continue;
        };
        let written = syntax::normalized(first, src);
        let key = super::resolve(cx, call, &written);
        let (Some(func), Some(try_statement)) = (
            idx.enclosing(call, kinds::FUNCTION_DEFINITION),
            finally
                .parent()
                .filter(|t| t.kind() == kinds::TRY_STATEMENT),
        ) else {
            continue;
        };
        // The key, or the function that applies what it keys (`process_notification(item)`),
        // names a delivery.
        let applies_deliveries =
            super::webhook_marker_expires::names_a_delivery(syntax::function_name(func, src));
        if !(super::webhook_marker_expires::names_a_delivery(&key) || applies_deliveries) {
            continue;
        }
        // The same key read before the `try` to turn a repeat away.
        let guarded = idx.within(func, kinds::CALL).iter().any(|r| {
            r.end_byte() <= try_statement.start_byte()
                && syntax::positional_args(*r).first().is_some_and(|a| {
                    let text = syntax::normalized(*a, src);
                    text == written || super::resolve(cx, *r, &text) == key
                })
        });
        let Some(body) = try_statement.field("body") else {
            continue;
        };
        let work = idx.within(body, kinds::CALL).iter().copied().find(|c| {
            let callee = syntax::callee(*c, src);
            let name = callee.rsplit('.').next().unwrap_or(callee);
            !facts::only_records(callee) && !answers(name) && !reads_only(name)
        });
        let (true, Some(work)) = (guarded, work) else {
            continue;
        };
        if !applies_deliveries && inbound(cx, idx, func).is_none() {
            continue;
        }
        report_marked(cx, call, written, func, work).note("finally");
    }
}

/// A delivery recorded as seen in a row of its own (`INSERT ... ON CONFLICT DO NOTHING
/// RETURNING id`, `on_conflict_do_nothing()`, `get_or_create(event_id=...)`, here or in a
/// helper of the file), its answer tested to turn a repeat away, ahead of the transaction that
/// then applies the event (`async with conn.transaction(): await handler(conn, item)`): the row
/// commits on its own, and when applying fails and rolls back, the redelivery finds the row and
/// is skipped. The same through an ORM (`orm_record`): `ProcessedEvent.objects.create(...)`
/// after a lookup that turns repeats away, `session.add(SeenNotification(...))` committed with
/// `except IntegrityError: return`.
fn recorded_outside_the_transaction(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str) {
    let transaction = |with: Node<'_>| {
        let clause = syntax::with_clause(with, src);
        clause.contains("transaction(") || clause.contains("atomic(") || clause.contains(".begin(")
    };
    if !idx
        .all(kinds::WITH_STATEMENT)
        .iter()
        .any(|w| transaction(*w))
        || !(RECORDS_ONCE.iter().any(|w| src.contains(w))
            || ORM_TURNED_AWAY.iter().any(|w| src.contains(w)))
    {
        return;
    }
    for &with in idx.all(kinds::WITH_STATEMENT) {
        if !transaction(with) {
            continue;
        }
        let Some(func) = idx.enclosing(with, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        // `@transaction.atomic` around the whole function: the row is in it too.
        if idx.decorated(func).is_some_and(|d| {
            syntax::decorators(d)
                .iter()
                .any(|dec| syntax::text(*dec, src).contains("atomic"))
        }) {
            continue;
        }
        let own = |n: Node<'_>| {
            idx.enclosing(n, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| f.id() == func.id())
        };
        // The record's answer turns a repeat away: `if not await _record(conn, item):
        // continue`, or `recorded = ...` then `if recorded is None: return False`.
        let turned_away = |record: Node<'_>| {
            // `recorded = ...`, or `_, created = ProcessedEvent.objects.get_or_create(...)`.
            let mut bound: Vec<&str> = syntax::bound_name(record, src).into_iter().collect();
            if let Some(left) = record
                .parent()
                .filter(|p| p.kind() == kinds::ASSIGNMENT)
                .and_then(|a| a.field("left"))
                .filter(|l| matches!(l.kind(), kinds::PATTERN_LIST | kinds::TUPLE_PATTERN))
            {
                bound.extend(
                    crate::python::named_children(left)
                        .into_iter()
                        .filter(|n| n.kind() == kinds::IDENTIFIER)
                        .map(|n| syntax::text(n, src))
                        .filter(|n| *n != "_"),
                );
            }
            idx.within(func, kinds::IF_STATEMENT).iter().any(|i| {
                i.end_byte() <= with.start_byte()
                    && own(*i)
                    && i.field("condition").is_some_and(|c| {
                        syntax::contains(c, record)
                            || c.start_byte() >= record.end_byte()
                                && bound
                                    .iter()
                                    .any(|b| syntax::has_word(syntax::text(c, src), b))
                    })
                    && i.field("consequence")
                        .is_some_and(|b| !syntax::block_falls_through(b, src))
            })
        };
        let Some(record) = idx.within(func, kinds::CALL).iter().copied().find(|&c| {
            c.end_byte() <= with.start_byte()
                && own(c)
                // In no transaction, or in one of its own that commits before the one that
                // applies (`with db.atomic(): WebhookEvent.create(...)`, then `with
                // db.atomic(): handler(event)`).
                && !idx
                    .within(func, kinds::WITH_STATEMENT)
                    .iter()
                    .any(|w| transaction(*w) && syntax::contains(*w, c) && syntax::contains(*w, with))
                && (records_a_delivery(idx, c, src) && turned_away(c)
                    || orm_record(c, func, src).is_some_and(|model| {
                        let row = OrmRow {
                            func,
                            record: c,
                            with,
                            model,
                        };
                        row.kept(idx, src) && row.turned_away(idx, src)
                    }))
        }) else {
            continue;
        };
        // What the transaction applies: the first call of its body, not of its `with` line.
        let Some(work) = with.field("body").and_then(|body| {
            idx.within(body, kinds::CALL)
                .iter()
                .copied()
                .find(|&c| own(c) && !facts::only_records(syntax::callee(c, src)))
        }) else {
            continue;
        };
        let name = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, record)
            .arg("view", name.clone())
            .arg("record", crate::rules::pay::first_line(record, src))
            .arg("record_line", syntax::lines(record).0.to_string())
            .arg("transaction", syntax::with_clause(with, src).to_string())
            .arg("work", crate::rules::pay::first_line(work, src))
            .arg("work_line", syntax::lines(work).0.to_string())
            .note("outside");
        finding.function = name;
    }
}

/// A call that writes a row once (`RECORDS_ONCE`), itself or through a helper of the file
/// (`_record(conn, item)`), about a delivery: its text, or the helper's, names an event or a
/// notification.
fn records_a_delivery(idx: &NodeIndex<'_>, call: Node<'_>, src: &str) -> bool {
    let about = |text: &str| {
        RECORDS_ONCE.iter().any(|w| text.contains(w))
            && ["event", "notification", "delivery", "webhook", "message"]
                .iter()
                .any(|w| syntax::contains_lowercase(text, w))
    };
    if about(syntax::text(call, src)) {
        return true;
    }
    idx.functions_named(idx.callee_name(call, src), src)
        .any(|f| about(syntax::text(f, src)))
}

/// A delivery's row written through an ORM ahead of the transaction that applies the event: the
/// function, the call that writes it, the transaction's `with` and the row's model.
#[derive(Clone, Copy)]
struct OrmRow<'t, 's> {
    func: Node<'t>,
    record: Node<'t>,
    with: Node<'t>,
    model: &'s str,
}

/// The model an ORM call writes a delivery's row of: `ProcessedEvent` in
/// `ProcessedEvent.objects.create(event_id=...)`, `await WebhookEvent.create(...)` (peewee,
/// Tortoise) and `session.add(SeenNotification(...))` (or of a name bound to one earlier in the
/// function), when the model or the call names an event, a notification, a delivery or a
/// webhook.
fn orm_record<'s>(call: Node<'_>, func: Node<'_>, src: &'s str) -> Option<&'s str> {
    let callee = syntax::callee(call, src);
    let model = if let Some(model) = callee.strip_suffix(".objects.create") {
        model.rsplit('.').next().unwrap_or(model)
    } else if let Some(model) = callee.strip_suffix(".create") {
        model
    } else if callee.ends_with(".add") {
        let arg = call.field("arguments")?.named_child(0)?;
        let built = match arg.kind() {
            kinds::CALL => syntax::callee(arg, src),
            // `seen = SeenNotification(...)` then `session.add(seen)`.
            kinds::IDENTIFIER => {
                let before = src.get(func.start_byte()..call.start_byte())?;
                let name = syntax::text(arg, src);
                let at = before.rfind(&format!("{name} = "))? + name.len() + 3;
                let rest = &before[at..];
                let end =
                    rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))?;
                rest[end..].starts_with('(').then(|| &rest[..end])?
            }
            _ => return None,
        };
        built.rsplit('.').next().unwrap_or(built)
    } else {
        return None;
    };
    let about = |text: &str| {
        ["event", "notification", "delivery", "webhook"]
            .iter()
            .any(|w| syntax::contains_lowercase(text, w))
    };
    (model.starts_with(|c: char| c.is_ascii_uppercase())
        && model.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && (about(model) || about(syntax::text(call, src))))
    .then_some(model)
}

impl OrmRow<'_, '_> {
    /// Whether the row an ORM call writes stays written when applying the event fails: it is
    /// committed before the transaction (`session.add(...)` needs its `commit()`; Django's and
    /// peewee's `create` commit on their own), nothing deletes it again, and nothing writes it after
    /// the transaction (a row marked processed once the work is done is a receipt, and the lookup
    /// that turns repeats away reads that mark).
    fn kept(self, idx: &NodeIndex<'_>, src: &str) -> bool {
        let OrmRow {
            func,
            record,
            with,
            model,
        } = self;
        let between = src
            .get(record.end_byte()..with.start_byte())
            .unwrap_or_default();
        if syntax::callee(record, src).ends_with(".add") && !between.contains("commit(") {
            return false;
        }
        // `seen = ProcessedEvent.objects.create(...)`, or `session.add(seen)`: the row's own name.
        let bound = syntax::bound_name(record, src).or_else(|| {
            record
                .field("arguments")
                .and_then(|a| a.named_child(0))
                .filter(|a| a.kind() == kinds::IDENTIFIER)
                .map(|a| syntax::text(a, src))
        });
        let names_row = |text: &str| {
            syntax::has_word(text, model) || bound.is_some_and(|b| syntax::has_word(text, b))
        };
        !idx.within(func, kinds::CALL).iter().any(|&c| {
            c.start_byte() > record.end_byte() && {
                let callee = syntax::callee(c, src);
                let name = callee.rsplit('.').next().unwrap_or(callee);
                let taken_back = name == "delete" && names_row(syntax::text(c, src));
                let written_after = c.start_byte() >= with.end_byte()
                    && matches!(name, "save" | "update")
                    && names_row(callee);
                taken_back || written_after
            }
        }) && !bound.is_some_and(|b| {
            src.get(with.end_byte()..func.end_byte())
                .is_some_and(|after| syntax::has_word(after, b))
        })
    }

    /// Whether a repeat of the delivery is turned away on the ORM row: a lookup of the model before
    /// the write whose branch leaves (`if ProcessedEvent.objects.filter(...).exists(): continue`),
    /// or a unique row's refusal around the write or its commit (`except IntegrityError: return`).
    /// A lookup that reads a state (`status="processed"`) lets a failed event in again.
    fn turned_away(self, idx: &NodeIndex<'_>, src: &str) -> bool {
        let OrmRow {
            func,
            record,
            with,
            model,
        } = self;
        let own = |n: Node<'_>| {
            idx.enclosing(n, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| f.id() == func.id())
        };
        let looked_up = idx.within(func, kinds::IF_STATEMENT).iter().any(|i| {
            i.end_byte() <= record.start_byte()
                && own(*i)
                && i.field("condition").is_some_and(|c| {
                    let text = syntax::text(c, src);
                    syntax::has_word(text, model)
                        && !["status", "state", "processed_at", "handled_at"]
                            .iter()
                            .any(|w| text.contains(w))
                })
                && i.field("consequence")
                    .is_some_and(|b| !syntax::block_falls_through(b, src))
        });
        looked_up
            || idx
                .within(func, kinds::EXCEPT_CLAUSE)
                .iter()
                .any(|&clause| {
                    own(clause)
                        && syntax::try_of(clause).is_some_and(|t| {
                            t.end_byte() <= with.start_byte() && t.end_byte() > record.start_byte()
                        })
                        && syntax::except_types(clause).iter().any(|t| {
                            matches!(
                                facts::last_name(syntax::text(*t, src)),
                                "IntegrityError" | "UniqueViolation" | "UniqueViolationError"
                            )
                        })
                        && syntax::except_body(clause)
                            .is_some_and(|b| !syntax::block_falls_through(b, src))
                })
    }
}

/// How long a claim is held.
enum Held {
    For(f64),
    /// A lifetime set elsewhere whose name says it is a deduplication window.
    Window(String),
    Forever,
}

/// Whether a lifetime's name says it keeps repeats out (`webhook_dedup_ttl_s`,
/// `SEEN_EVENTS_TTL`), which outlives a redelivery by design; not a lock's.
fn dedup_window(name: &str) -> bool {
    let words = syntax::name_words(name);
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    has(&[
        "dedup",
        "dedupe",
        "deduplication",
        "seen",
        "processed",
        "replay",
        "idempotency",
    ]) && !has(&["lock", "lease", "claim"])
}

/// The statement that turns back a delivery the claim did not win: `if not cache.add(...):
/// return ...` (or `continue` in a consumer's loop), or the same test of the name the answer is
/// bound to. `None` when nothing is decided on the answer.
fn guards_a_way_out<'t>(
    idx: &NodeIndex<'t>,
    call: Node<'t>,
    func: Node<'t>,
    src: &str,
) -> Option<Node<'t>> {
    // `if not claimed: return` (or `continue` in a consumer's loop): the branch leaves.
    let leaves = |stmt: Node<'_>| {
        stmt.field("consequence")
            .is_some_and(|body| !syntax::block_falls_through(body, src))
    };
    let tested = |stmt: Node<'t>| {
        stmt.field("condition")
            .is_some_and(|c| syntax::contains(c, call))
    };
    if let Some(stmt) = idx.enclosing(call, kinds::IF_STATEMENT)
        && tested(stmt)
    {
        return leaves(stmt).then_some(stmt);
    }
    let name = syntax::bound_name(call, src)?;
    idx.within(func, kinds::IF_STATEMENT)
        .iter()
        .copied()
        .filter(|s| s.start_byte() > call.end_byte())
        .find(|s| {
            s.field("condition").is_some_and(|c| {
                syntax::name_words(syntax::text(c, src))
                    .iter()
                    .any(|w| w == name)
            }) && leaves(*s)
        })
}

/// The first call after `guard` that applies the event: not logging, not the answer to the
/// provider (`HttpResponse(status=200)`, `jsonify`), not the cache again. `None` when the view
/// does nothing after the claim but hand the event to a queue (`process_event.delay(...)`),
/// which runs it again itself.
fn work_after<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    guard: Node<'t>,
    src: &str,
) -> Option<Node<'t>> {
    let mut first = None;
    for &call in idx.within(func, kinds::CALL) {
        if call.start_byte() < guard.end_byte() || !super::owned_by(idx, call, Some(func)) {
            continue;
        }
        let callee = syntax::callee(call, src);
        let name = callee.rsplit('.').next().unwrap_or(callee);
        if facts::only_records(callee) || answers(name) || reads_only(name) {
            continue;
        }
        if matches!(
            name,
            "delay" | "apply_async" | "enqueue" | "send_task" | "kiq" | "enqueue_job" | "send"
        ) {
            return None;
        }
        first.get_or_insert(call);
    }
    first
}

/// An answer to the caller: `HttpResponse(status=200)`, `JSONResponse(...)`, `jsonify(...)`,
/// `self.set_status(200)`.
fn answers(name: &str) -> bool {
    // Tornado's handler answers through its own methods (`self.set_status(200)`).
    name.ends_with("Response")
        || matches!(
            name,
            "jsonify" | "make_response" | "abort" | "set_status" | "finish" | "send_error"
        )
}

/// Calls that only read what is at hand: a dict's `get`, a conversion, a length.
fn reads_only(name: &str) -> bool {
    matches!(
        name,
        "get"
            | "str"
            | "int"
            | "len"
            | "dict"
            | "list"
            | "isinstance"
            | "loads"
            | "json"
            | "format"
    )
}
