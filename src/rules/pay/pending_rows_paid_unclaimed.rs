//! PAY023 pending-rows-paid-unclaimed: a job picks the rows that are due by their state
//! (`Withdrawal.objects.filter(status=APPROVED)`, `WHERE state = 'queued'`,
//! `Subscription.renews_at <= now`), pays each one, and moves that state on only after the
//! payment, on rows it neither locked nor claimed. Two runs that overlap (a schedule that fires
//! while the last run still waits on the provider, a second worker, a task retried after a
//! worker was lost) pick the same rows, and both pay them.
//!
//! Left alone: rows locked for the batch (`select_for_update(skip_locked=True)`, `FOR UPDATE
//! SKIP LOCKED`, an advisory or cache lock), a row claimed before it is paid (a conditional
//! update whose count is checked, the state moved to "processing" first, `cache.add`), and a
//! payment sent with an idempotency key or a reference the provider deduplicates on.
use tree_sitter::Node;

use super::balance_reset_after_payout::holds_rows;
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY023",
    doc: include_str!("../../../rules/pay/PAY023.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a loop, over a query, in code that pays.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && (s.facts.payment_module || s.facts.functions.iter().any(|f| f.payment || f.http))
        && s.mentions(&["for "])
        && s.mentions(&[
            "filter", "where", "WHERE", "Where", "fetch", "scalars", "query", "find(",
        ])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    for &stmt in idx.all(kinds::FOR_STATEMENT) {
        let (Some(item), Some(rows), Some(body)) =
            (stmt.field("left"), stmt.field("right"), stmt.field("body"))
        else {
            continue;
        };
        if item.kind() != kinds::IDENTIFIER {
            continue;
        }
        let Some(func) = idx.enclosing(stmt, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let item = syntax::text(item, src);
        let Some(query) = picking_query(idx, func, rows, stmt.start_byte(), src) else {
            continue;
        };
        let query_text = with_constants(idx, query, src);
        if holds_rows(syntax::text(func, src)) || holds_rows(&query_text) {
            continue;
        }
        let fields = picked_fields(idx, query, &query_text, src);
        if fields.is_empty() {
            continue;
        }
        let owned = |n: &Node<'_>| crate::rules::idem::owned_by(idx, *n, Some(func));
        let Some(money) = idx
            .within(body, kinds::CALL)
            .iter()
            .copied()
            .filter(owned)
            .find(|c| {
                super::state_checked_then_set::moves_money(cx, *c, src)
                    || super::http_payment(cx, *c) && !super::state_checked_then_set::keyed(*c, src)
            })
        else {
            continue;
        };
        // A row claimed (or its state moved) before the payment is turned away from a second
        // run, or at least seen by it; a claim of the cache serialises as a lock would.
        if claimed_before(cx, idx, body, money, item, &fields, src) {
            continue;
        }
        let Some(write) = moved_on_after(idx, func, body, money, item, &fields, src) else {
            continue;
        };
        let field = fields
            .iter()
            .find(|f| writes_field(idx, write, item, f, src))
            .map_or_else(|| fields[0].clone(), Clone::clone);
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, stmt)
            .arg("function", function.clone())
            .arg("item", item.to_string())
            .arg("field", field)
            .arg("pick_line", syntax::lines(query).0.to_string())
            .arg("money", crate::rules::pay::first_line(money, src))
            .arg("money_line", syntax::lines(money).0.to_string())
            .arg("write_line", syntax::lines(write).0.to_string());
        finding.function = function;
    }
}

/// The query a loop's rows come from: the loop's iterable, or what the name it iterates was
/// assigned in the function; a query is a call (`filter(...)`, `conn.fetch(SQL)`).
fn picking_query<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    rows: Node<'t>,
    before: usize,
    src: &str,
) -> Option<Node<'t>> {
    let value = if rows.kind() == kinds::IDENTIFIER {
        idx.assigned_before(Some(func), syntax::text(rows, src), before, src)?
    } else {
        rows
    };
    let value = crate::rules::idem::strip_await(value);
    let has_call = value.kind() == kinds::CALL || !idx.within(value, kinds::CALL).is_empty();
    has_call.then_some(value)
}

/// The query's text with the module constants it names put in (`conn.fetch(PICK_QUEUED)`).
fn with_constants(idx: &NodeIndex<'_>, query: Node<'_>, src: &str) -> String {
    let mut text = syntax::text(query, src).to_string();
    let itself = (query.kind() == kinds::CALL).then_some(query);
    for call in idx.within(query, kinds::CALL).iter().copied().chain(itself) {
        for arg in syntax::positional_args(call) {
            if arg.kind() == kinds::IDENTIFIER
                && let Some(value) =
                    idx.assigned_before(None, syntax::text(arg, src), query.start_byte(), src)
                && value.kind() == kinds::STRING
            {
                text.push('\n');
                text.push_str(syntax::text(value, src));
            }
        }
    }
    text
}

/// The fields a query picks its rows by: Django's and Tortoise's lookups (`status=`,
/// `renews_at__lte=`), SQLAlchemy's comparisons (`Subscription.status == "active"`), and the
/// columns of an SQL `WHERE`.
fn picked_fields(idx: &NodeIndex<'_>, query: Node<'_>, query_text: &str, src: &str) -> Vec<String> {
    let mut fields: Vec<String> = Vec::new();
    let mut add = |f: &str| {
        if !f.is_empty() && !fields.iter().any(|x| x == f) {
            fields.push(f.to_string());
        }
    };
    let calls = idx.within(query, kinds::CALL);
    for call in calls
        .iter()
        .copied()
        .chain((query.kind() == kinds::CALL).then_some(query))
    {
        if !filters(syntax::callee_name(call, src)) {
            continue;
        }
        for (key, _) in syntax::keyword_args(call, src) {
            add(key.split("__").next().unwrap_or(key));
        }
        for arg in syntax::positional_args(call) {
            if arg.kind() == kinds::COMPARISON_OPERATOR
                && let Some(left) = arg.named_child(0)
                && left.kind() == kinds::ATTRIBUTE
                && let Some(field) = left.field("attribute")
            {
                add(syntax::text(field, src));
            }
        }
    }
    for comparison in idx.within(query, kinds::COMPARISON_OPERATOR) {
        if let Some(left) = comparison.named_child(0)
            && left.kind() == kinds::ATTRIBUTE
            && let Some(field) = left.field("attribute")
        {
            add(syntax::text(field, src));
        }
    }
    if let Some(at) = find_lowercase(query_text, "where ") {
        for word in sql_words(&query_text[at + 6..]) {
            add(word);
        }
    }
    fields
}

/// Calls that pick rows by their arguments.
fn filters(name: &str) -> bool {
    matches!(
        name,
        "filter" | "filter_by" | "where" | "exclude" | "find" | "select"
    )
}

/// The lower-case identifiers of an SQL text that a comparison follows: `state = 'queued'`,
/// `due_at <= now()`, `paid_at IS NULL`.
fn sql_words(sql: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = sql;
    while let Some(start) = rest.find(|c: char| c.is_ascii_lowercase() || c == '_') {
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let (word, after) = tail.split_at(end);
        let after = after.trim_start();
        let compared = [
            "=", "<", ">", "!=", "IS ", "is ", "IN ", "in ", "IN(", "in(",
        ]
        .iter()
        .any(|op| after.starts_with(op));
        let quoted = start > 0 && matches!(rest.as_bytes()[start - 1], b'\'' | b'"');
        if compared && !quoted {
            out.push(word);
        }
        rest = after;
        if rest.len() == tail.len() {
            break;
        }
    }
    out
}

fn find_lowercase(hay: &str, needle: &str) -> Option<usize> {
    hay.to_ascii_lowercase().find(needle)
}

/// Whether `node` writes `field` of the row: `row.status = ...`, a call that sets it by keyword
/// (`.update(status=...)`, `.values(state=...)`), or an SQL `SET state = ...`.
fn writes_field(idx: &NodeIndex<'_>, node: Node<'_>, item: &str, field: &str, src: &str) -> bool {
    match node.kind() {
        kinds::ASSIGNMENT | kinds::AUGMENTED_ASSIGNMENT => node
            .field("left")
            .is_some_and(|l| syntax::text(l, src) == format!("{item}.{field}")),
        kinds::CALL => {
            syntax::keyword_args(node, src)
                .iter()
                .any(|(k, _)| *k == field)
                || sql_sets(&with_constants(idx, node, src), field)
        }
        _ => false,
    }
}

/// Whether an SQL text sets `field`: `UPDATE payouts SET state = 'sent'`.
fn sql_sets(sql: &str, field: &str) -> bool {
    let lower = sql.to_ascii_lowercase();
    let Some(at) = lower.find(" set ") else {
        return false;
    };
    let assigned = &lower[at + 5..];
    let assigned = assigned.split(" where ").next().unwrap_or(assigned);
    assigned.split(',').any(|part| {
        part.split('=')
            .next()
            .is_some_and(|column| column.trim() == field)
    })
}

/// The first write of a picked field after the payment: on the row in the loop, or by a call
/// anywhere after it in the function (`filter(id__in=paid).update(status=PAID)`).
fn moved_on_after<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    body: Node<'t>,
    money: Node<'t>,
    item: &str,
    fields: &[String],
    src: &str,
) -> Option<Node<'t>> {
    let after = |n: &Node<'_>| n.start_byte() >= money.end_byte();
    let owned = |n: &Node<'_>| crate::rules::idem::owned_by(idx, *n, Some(func));
    let assigned = [kinds::ASSIGNMENT, kinds::AUGMENTED_ASSIGNMENT]
        .iter()
        .flat_map(|k| idx.within(body, k).iter().copied())
        .filter(|n| after(n) && owned(n))
        .filter(|n| fields.iter().any(|f| writes_field(idx, *n, item, f, src)));
    let called = idx
        .within(func, kinds::CALL)
        .iter()
        .copied()
        .filter(|n| after(n) && owned(n))
        .filter(|n| fields.iter().any(|f| writes_field(idx, *n, item, f, src)));
    assigned.chain(called).min_by_key(|n| n.start_byte())
}

/// Whether the loop claims the row before it pays: writes a picked field first, turns the row
/// away on what a call answered (`if not claimed: continue`), or takes a claim of the cache.
fn claimed_before(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    body: Node<'_>,
    money: Node<'_>,
    item: &str,
    fields: &[String],
    src: &str,
) -> bool {
    let before = |n: &Node<'_>| n.end_byte() <= money.start_byte();
    let wrote = [kinds::ASSIGNMENT, kinds::AUGMENTED_ASSIGNMENT, kinds::CALL]
        .iter()
        .flat_map(|k| idx.within(body, k).iter().copied())
        .filter(before)
        .any(|n| fields.iter().any(|f| writes_field(idx, n, item, f, src)));
    let cached = idx
        .within(body, kinds::CALL)
        .iter()
        .filter(|c| before(c))
        .any(|&c| {
            crate::rules::idem::cache_call(c, cx)
                .is_some_and(|c| c.op == crate::rules::idem::Op::AtomicWrite)
        });
    let turned_away = idx
        .within(body, kinds::IF_STATEMENT)
        .iter()
        .filter(|s| before(s))
        .any(|s| {
            let (Some(condition), Some(then)) = (s.field("condition"), s.field("consequence"))
            else {
                return false;
            };
            if syntax::block_falls_through(then, src) {
                return false;
            }
            !idx.within(condition, kinds::CALL).is_empty()
                || condition.kind() == kinds::CALL
                || syntax::text(condition, src)
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty())
                    .any(|name| {
                        idx.assigned_before(Some(body), name, s.start_byte(), src)
                            .is_some_and(|v| {
                                crate::rules::idem::strip_await(v).kind() == kinds::CALL
                            })
                    })
        });
    wrote || cached || turned_away
}
