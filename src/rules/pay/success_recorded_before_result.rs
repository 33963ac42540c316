//! PAY002 success-recorded-before-result: an entity is marked paid/charged (an attribute, or an
//! ORM `update(status=...)`) before the payment call, or after it but before anyone checked that
//! the call actually succeeded: one that may return `None`, or an HTTP request whose error
//! answers come back as responses.
use tree_sitter::Node;

use crate::config::Vocabulary;
use crate::python::{self, Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Local, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY002",
    doc: include_str!("../../../rules/pay/PAY002.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Status values that say the money moved.
pub(crate) const SUCCESS: &[&str] = &[
    "paid",
    "charged",
    "captured",
    "succeeded",
    "success",
    "successful",
    "completed",
    "complete",
    "settled",
    "refunded",
    "paid_out",
    // Escrow released to the seller, a payout disbursed: the money left.
    "released",
    "disbursed",
    "authorized",
    "authorised",
    "approved",
    // The same in the languages payment code is written in: `segna_ordine_pagato`,
    // `marcar_pedido_pagado`, `status = "betaald"`, `bezahlt`, `oplacone`.
    "pagato",
    "pagata",
    "pagado",
    "pagada",
    "betaald",
    "bezahlt",
    "oplacon",
    "rimborsato",
    "reembolsado",
    "erstattet",
    "terugbetaald",
];

/// Flags and timestamps that say the same (`is_paid = True`, `paid_at = now()`).
const SUCCESS_STEMS: &[&str] = &[
    "paid",
    "charged",
    "captured",
    "settled",
    "refunded",
    "completed",
];

/// Every finding starts from an assignment or an update that records success.
/// Not in tests: they set a mock's `paid` or `status` to arrange the case they test.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && !recorders(s).is_empty()
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    // One finding per payment call: `is_paid = True` and `paid_at = now()` are one mistake.
    let mut reported = Vec::new();
    for (assign, stmt) in recorders(cx) {
        let Some(block) = stmt.parent().filter(|b| b.kind() == kinds::BLOCK) else {
            continue;
        };
        let Some(func) = idx.enclosing(assign, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let found = payment_call_after(cx, stmt, block, func)
            .or_else(|| after_the_with(cx, block, func))
            .map(|call| (call, "early"))
            .or_else(|| unchecked_call_before(cx, stmt, block, src));
        let Some((call, why)) = found else {
            continue;
        };
        if reported.contains(&call.id()) {
            continue;
        }
        reported.push(call.id());
        report(cx, assign, stmt, block, call, why);
    }
}

/// What records success, each with the statement it is: assignments (`order.status = "paid"`)
/// and ORM updates (`Order.objects.filter(pk=pk).update(status="paid")`), in the file's order.
fn recorders<'t>(cx: &impl Local<'t>) -> Vec<(Node<'t>, Node<'t>)> {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return Vec::new();
    };
    let statement = |n: Node<'t>| {
        let outer = n.parent().filter(|p| p.kind() == kinds::AWAIT).unwrap_or(n);
        // `newly_paid = confirm_capture(...)`: a recording call whose answer is kept.
        let outer = outer
            .parent()
            .filter(|p| p.kind() == kinds::ASSIGNMENT && n.kind() == kinds::CALL)
            .unwrap_or(outer);
        outer
            .parent()
            .filter(|p| p.kind() == kinds::EXPRESSION_STATEMENT)
    };
    let mut out: Vec<(Node<'t>, Node<'t>)> = idx
        .all(kinds::ASSIGNMENT)
        .iter()
        .filter(|a| is_success_assignment(**a, src, cx.vocab()))
        .filter_map(|a| Some((*a, statement(*a)?)))
        .collect();
    // `mark_paid(order, ...)`, `order.mark_as_paid()`, `invoice.set_captured(...)`: a call whose
    // name says it records success on an entity.
    if names_a_success_call(src) {
        out.extend(
            idx.all(kinds::CALL)
                .iter()
                .filter(|c| is_success_call(**c, cx.call_text(**c), src, cx.vocab()))
                .filter_map(|c| Some((*c, statement(*c)?))),
        );
        out.sort_by_key(|(n, _)| n.start_byte());
    }
    // `cache.set(key, json.dumps({"status": "paid", ...}))`, `Payout.objects.create(...,
    // status="paid")`: a record that says paid, written to a store in one call.
    if names_a_success_status(src) {
        out.extend(
            idx.all(kinds::CALL)
                .iter()
                .filter(|c| stores(cx.callee_name(**c)) && stores_success(**c, idx, src))
                .filter_map(|c| Some((*c, statement(*c)?))),
        );
        out.sort_by_key(|(n, _)| n.start_byte());
    }
    // A helper of the file that records success on what it is handed, whatever it is handed
    // (`_record_response(invoice, result, now)` setting `invoice.status = PAID` when the answer
    // has a transaction): its calls record it.
    let helpers: Vec<&str> = out
        .iter()
        .filter(|(node, _)| node.kind() == kinds::ASSIGNMENT && !under_a_verdict(idx, *node, src))
        .filter_map(|(node, _)| {
            let func = idx.enclosing(*node, kinds::FUNCTION_DEFINITION)?;
            let target = node.field("left").map(|l| syntax::text(l, src))?;
            let root = target.split(['.', '[']).next().unwrap_or(target);
            super::parameters(func, src)
                .iter()
                .any(|p| p == root)
                .then(|| syntax::function_name(func, src))
        })
        .filter(|name| !name.is_empty())
        .collect();
    if !helpers.is_empty() {
        // Called as the file's function or the class's own method, not `provider.refund(...)`.
        let own = |c: Node<'_>| {
            syntax::receiver(c).is_none_or(|r| matches!(syntax::text(r, src), "self" | "cls"))
        };
        let mut calls: Vec<(Node<'t>, Node<'t>)> = idx
            .all(kinds::CALL)
            .iter()
            .filter(|c| own(**c) && helpers.contains(&cx.callee_name(**c)))
            .filter(|c| !out.iter().any(|(n, _)| n.id() == c.id()))
            .filter_map(|c| Some((*c, statement(*c)?)))
            .collect();
        out.append(&mut calls);
        out.sort_by_key(|(n, _)| n.start_byte());
    }
    if memchr::memmem::find(src.as_bytes(), b".update(").is_some() {
        out.extend(
            idx.all(kinds::CALL)
                .iter()
                // The name as the index read it first: `dict.update` is everywhere.
                .filter(|c| {
                    cx.callee_name(**c) == "update" && is_success_update(**c, src, cx.vocab())
                })
                .filter_map(|c| Some((*c, statement(*c)?))),
        );
        out.sort_by_key(|(n, _)| n.start_byte());
    }
    out
}

fn report(
    cx: &mut Ctx<'_>,
    assign: Node<'_>,
    stmt: Node<'_>,
    block: Node<'_>,
    call: Node<'_>,
    why: &'static str,
) {
    let src = cx.src();
    let first = syntax::lines(call).0.min(syntax::lines(assign).0);
    let last = save_after(stmt, block, src)
        .map_or(syntax::lines(stmt).1, |s| syntax::lines(s).1)
        .max(syntax::lines(call).1);
    // A payment handed to a thread is named by what it hands (`gateway.charge_saved_card`).
    let handed = syntax::handed_callee(call, src);
    let callee = handed
        .map(|h| h.rsplit('.').next().unwrap_or(h))
        .unwrap_or_else(|| syntax::callee_name(call, src))
        .to_string();
    let returns_none_at = cx
        .change
        .functions_named(cx.side, &callee)
        .find(|(_, f)| f.may_return_none())
        .map(|(file, f)| format!("{}:{}", file.path, none_lines(f)));
    let key = format!("{} {why} {}", syntax::normalized(assign, src), callee);
    let function = cx
        .index()
        .and_then(|idx| {
            idx.enclosing(assign, kinds::FUNCTION_DEFINITION)
                .map(|f| facts::qualname(f, idx, src))
        })
        .unwrap_or_default();
    let recording_call =
        assign.kind() == kinds::CALL && syntax::callee_name(assign, src) != "update";
    let stored = recording_call
        && stores(syntax::callee_name(assign, src))
        && !is_success_call(assign, syntax::call_text(assign, src), src, cx.vocab());
    // A long or commented call is named, not quoted (`Payment.objects.create(...)`).
    let written = syntax::normalized(assign, src);
    let written = if recording_call && (written.len() > 80 || written.contains('#')) {
        format!("{}(...)", syntax::callee(assign, src))
    } else {
        written
    };
    let finding = cx
        .report_lines(&RULE, (first, last), key)
        .arg("assignment", written)
        .arg(
            "callee",
            handed
                .unwrap_or_else(|| syntax::callee(call, src))
                .to_string(),
        )
        .arg(
            if recording_call {
                "recording_call"
            } else {
                "assigned"
            },
            "yes".to_string(),
        )
        .note(why);
    finding.function = function;
    // An ORM update is in the database before the next line runs: no rollback of the object
    // undoes it. So is a record written to a store.
    if assign.kind() == kinds::CALL && !recording_call {
        finding
            .severity(crate::review::Severity::Blocker)
            .note("persisted");
    } else if stored {
        finding
            .severity(crate::review::Severity::Blocker)
            .note("stored");
    } else if matches!(
        why,
        "status_unchecked" | "sdk_status_unchecked" | "checked_after"
    ) && let Some(save) = save_after(stmt, block, src)
        // Before the function's own verdict, where it has one: a save after it is the success
        // path's.
        && late_check(call, stmt, block, src).is_none_or(|c| save.start_byte() < c.start_byte())
    {
        // Saved before the answer is read: the row says paid whatever the gateway said.
        finding
            .severity(crate::review::Severity::Blocker)
            .arg("save", syntax::normalized(save, src))
            .arg("save_line", syntax::lines(save).0.to_string())
            .note("saved");
    }
    // Where the function checks for `None`, that the callee returns it is no news.
    if let Some(at) = returns_none_at.filter(|_| why != "status_later") {
        finding.arg("returns_none_at", at).note("returns_none");
    }
    if why == "status_later" {
        let names: Vec<&str> = syntax::bound_name(call, src).into_iter().collect();
        if let Some(line) = status_read_after(stmt, block, &names, src) {
            finding.arg("status_line", line.to_string());
        }
    }
    if why == "checked_after"
        && let Some(check) = late_check(call, stmt, block, src)
    {
        finding.arg("check_line", syntax::lines(check).0.to_string());
    }
}

/// `order.status = "charged"`, `payment.state = PaymentState.CAPTURED`, `invoice.is_paid = True`,
/// `order.paid_at = timezone.now()` on an entity.
fn is_success_assignment(assign: Node<'_>, src: &str, vocab: &Vocabulary) -> bool {
    // The left side first: most assignments bind a plain name, and have no entity.
    let Some(left) = assign.field("left") else {
        return false;
    };
    let Some(object) = super::entity_object(left, src) else {
        return false;
    };
    let Some(right) = assign.field("right") else {
        return false;
    };
    if !vocab.is_entity(object) {
        return false;
    }
    let attr = left
        .field("attribute")
        .map(|a| syntax::text(a, src).to_ascii_lowercase())
        .unwrap_or_default();
    records_success(&attr, right, src)
}

/// The verbs a call that marks an entity is named with (`mark_paid`), in the languages payment
/// code is written in: `segna_ordine_pagato`, `marcar_pedido_pagado`, `oznacz_zamowienie_oplacone`.
const MARK_VERBS: [&str; 4] = ["mark", "segna", "marca", "oznacz"];

/// Whether the text has a call named like a recording one (`mark_paid(`, `set_captured(`): the
/// calls themselves are read only in such a file, a few in a large change.
fn names_a_success_call(src: &str) -> bool {
    const OTHERS: [&str; 5] = ["set_", "complete_", "settle_", "confirm_", "credit"];
    let bytes = src.as_bytes();
    let word = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
    // Asked of every file: one pass over its calls' opening parentheses, each name read back
    // from there, rather than one pass per prefix.
    memchr::memchr_iter(b'(', bytes).any(|open| {
        let head = &bytes[..open];
        let len = head.iter().rev().take_while(|b| word(b)).count();
        let name = &head[open - len..];
        (0..name.len()).any(|at| {
            let rest = &name[at..];
            matches!(rest[0], b'm' | b's' | b'o' | b'c')
                && MARK_VERBS
                    .iter()
                    .chain(&OTHERS)
                    .any(|p| rest.starts_with(p.as_bytes()))
                && {
                    let lower = rest.to_ascii_lowercase();
                    std::str::from_utf8(&lower)
                        .is_ok_and(|n| says_success(n) || completes(n).is_some() || credits(n))
                }
        })
    })
}

/// What a call named for completing one payment object names (`complete_refund` → `refund`,
/// `settle_payout` → `payout`, `confirm_capture` → `capture`): a store's way of writing that
/// the money moved.
pub(crate) fn completes(lower: &str) -> Option<&str> {
    lower
        .strip_prefix("complete_")
        .or_else(|| lower.strip_prefix("settle_"))
        .or_else(|| lower.strip_prefix("confirm_"))
        .filter(|noun| !noun.is_empty())
}

/// `credit`, `credit_wallet`, `credit_topup`: a balance credited with what a payment brought.
pub(crate) fn credits(lower: &str) -> bool {
    lower == "credit"
        || lower.strip_prefix("credit_").is_some_and(|noun| {
            matches!(
                noun,
                "wallet" | "balance" | "account" | "topup" | "top_up" | "funds" | "customer"
            )
        })
}

/// Whether a lower-case name holds a status word that says the money moved (`mark_as_paid`).
pub(crate) fn says_success(lower: &str) -> bool {
    SUCCESS.iter().any(|w| lower.contains(w))
}

/// `mark_paid(order, ref)`, `order.mark_as_paid()`, `invoice.set_captured(amount)`: a call
/// named `mark...`/`set...` after a success word, on an entity (its receiver or an argument).
fn is_success_call(
    call: Node<'_>,
    text: syntax::CallText<'_>,
    src: &str,
    vocab: &Vocabulary,
) -> bool {
    let syntax::CallText { name, receiver, .. } = text;
    let lower = name.trim_start_matches('_').to_ascii_lowercase();
    // `wallet.credit(amount)`, `self.credit(...)` in the wallet's own method, `credit_topup(
    // topup)`: the balance now holds money the payment was to bring.
    if credits(&lower) {
        return true;
    }
    // `complete_refund(refund.id, result.id)`: the name says what is done, on which object.
    if let Some(noun) = completes(&lower) {
        return vocab.is_entity(noun) || matches!(noun, "refund" | "charge" | "capture");
    }
    let Some(rest) = MARK_VERBS
        .iter()
        .chain(&["set"])
        .find_map(|verb| lower.strip_prefix(verb))
    else {
        return false;
    };
    if !says_success(rest) {
        return false;
    }
    // `segna_ordine_pagato(conn, ordine_id)`: the entity is in the name.
    if rest.split('_').any(|w| vocab.is_entity(w)) {
        return true;
    }
    fn root(text: &str) -> Option<&str> {
        text.split(['.', '[', '('])
            .find(|w| !w.is_empty() && *w != "self")
    }
    receiver.and_then(root).is_some_and(|r| vocab.is_entity(r))
        || syntax::positional_args(call)
            .iter()
            .filter_map(|a| root(syntax::text(*a, src)))
            .any(|a| vocab.is_entity(a))
}

/// Whether the text sets a status to a success word anywhere (`"status": "paid"`,
/// `state=PaymentState.CAPTURED`): stored records are looked for only then.
fn names_a_success_status(src: &str) -> bool {
    let bytes = src.as_bytes();
    let word = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
    [&b"status"[..], &b"state"[..]].into_iter().any(|key| {
        memchr::memmem::find_iter(bytes, key).any(|at| {
            let rest = bytes.get(at + key.len()..).unwrap_or(&[]);
            let rest = rest
                .strip_prefix(b"\"")
                .or(rest.strip_prefix(b"'"))
                .unwrap_or(rest);
            let rest = rest.trim_ascii_start();
            let Some(rest) = rest.strip_prefix(b":").or(rest.strip_prefix(b"=")) else {
                return false;
            };
            let value = rest.trim_ascii_start();
            let len = value.iter().take_while(|b| word(b) || **b == b'.').count();
            let value = value
                .get(..len)
                .filter(|v| !v.is_empty())
                .or_else(|| {
                    let quoted = value.get(1..)?;
                    let len = quoted.iter().take_while(|b| word(b)).count();
                    quoted.get(..len)
                })
                .unwrap_or(&[]);
            let last = value.rsplit(|b| *b == b'.').next().unwrap_or(value);
            std::str::from_utf8(&last.to_ascii_lowercase()).is_ok_and(|w| SUCCESS.contains(&w))
        })
    })
}

/// A call that writes what it is given to a store at once: a cache's or a key-value store's
/// write, a document store's insert, an ORM's create.
fn stores(name: &str) -> bool {
    matches!(
        name,
        "set"
            | "setex"
            | "hset"
            | "hmset"
            | "mset"
            | "create"
            | "bulk_create"
            | "get_or_create"
            | "update_or_create"
            | "insert"
            | "insert_one"
            | "insert_many"
            | "update_one"
            | "replace_one"
            | "upsert"
            | "put"
            | "put_item"
    ) || ["save_", "store_", "persist_", "insert_"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// Whether a storing call is given a record that says the money moved: `status="paid"` among
/// its keywords, or a dict with such a pair among its arguments, written out (`{...}`,
/// `dict(...)`), wrapped (`json.dumps(record)`), or bound to a name earlier in the function.
fn stores_success(call: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> bool {
    let Some(args) = call.field("arguments") else {
        return false;
    };
    let func = idx.enclosing(call, kinds::FUNCTION_DEFINITION);
    let mut pending = python::named_children(args);
    // A few levels are enough for `set(k, json.dumps({"record": {...}}))`.
    let mut budget = 64;
    while let Some(node) = pending.pop() {
        budget -= 1;
        if budget == 0 {
            break;
        }
        match node.kind() {
            kinds::KEYWORD_ARGUMENT | kinds::PAIR => {
                let (key, value) = if node.kind() == kinds::PAIR {
                    (node.field("key"), node.field("value"))
                } else {
                    (node.field("name"), node.field("value"))
                };
                let (Some(key), Some(value)) = (key, value) else {
                    continue;
                };
                let key = syntax::text(key, src)
                    .trim_matches(|c| c == '"' || c == '\'')
                    .to_ascii_lowercase();
                if records_success(&key, value, src) {
                    return true;
                }
                pending.push(value);
            }
            kinds::DICTIONARY => pending.extend(python::named_children(node)),
            kinds::CALL => {
                if let Some(inner) = node.field("arguments") {
                    pending.extend(python::named_children(inner));
                }
            }
            kinds::IDENTIFIER => {
                let bound = func.and_then(|f| {
                    idx.assigned_before(Some(f), syntax::text(node, src), call.start_byte(), src)
                });
                if let Some(value) =
                    bound.filter(|v| matches!(v.kind(), kinds::DICTIONARY | kinds::CALL))
                {
                    pending.push(value);
                }
            }
            _ => {}
        }
    }
    false
}

/// `Order.objects.filter(pk=pk).update(status="paid")`, `payments.update(is_paid=True)` on an
/// entity's manager or query: written to the database at once.
fn is_success_update(call: Node<'_>, src: &str, vocab: &Vocabulary) -> bool {
    let syntax::CallText { name, receiver, .. } = syntax::call_text(call, src);
    let Some(receiver) = receiver.filter(|_| name == "update") else {
        return false;
    };
    let root = receiver.split(['.', '(']).next().unwrap_or(receiver);
    vocab.is_entity(root)
        && syntax::keyword_args(call, src)
            .into_iter()
            .any(|(k, v)| records_success(&k.to_ascii_lowercase(), v, src))
}

/// Whether setting `attr` (lower case) to `value` says the money moved.
pub(crate) fn records_success(attr: &str, value: Node<'_>, src: &str) -> bool {
    if attr.contains("status") || attr.contains("state") {
        return success_value(value, src);
    }
    let stem = attr.trim_start_matches("is_");
    if SUCCESS_STEMS.contains(&stem) {
        return value.kind() == kinds::TRUE;
    }
    let stamped = attr
        .strip_suffix("_at")
        .is_some_and(|s| SUCCESS_STEMS.contains(&s));
    stamped && value.kind() == kinds::CALL
}

pub(crate) fn success_value(value: Node<'_>, src: &str) -> bool {
    let text = syntax::text(value, src);
    let word = match value.kind() {
        kinds::STRING => text.trim_matches(|c| c == '"' || c == '\''),
        kinds::ATTRIBUTE | kinds::IDENTIFIER => text.rsplit('.').next().unwrap_or(text),
        _ => return false,
    };
    SUCCESS.contains(&word.to_ascii_lowercase().as_str())
}

/// A payment call that runs after the assignment in the same sequence of statements.
fn payment_call_after<'t>(
    cx: &Ctx<'t>,
    stmt: Node<'_>,
    block: Node<'_>,
    func: Node<'_>,
) -> Option<Node<'t>> {
    let (idx, src) = (cx.index()?, cx.src());
    idx.within(block, kinds::CALL)
        .iter()
        .filter(|c| c.start_byte() > stmt.end_byte())
        .filter(|c| {
            idx.enclosing(**c, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| f.id() == func.id())
        })
        .find(|c| super::pays(cx, **c, src))
        .copied()
}

/// `with engine.begin() as conn: mark_order_paid(conn, id)`, then the payment call after the
/// `with`: the transaction commits the mark before the call is made.
fn after_the_with<'t>(cx: &Ctx<'t>, block: Node<'_>, func: Node<'_>) -> Option<Node<'t>> {
    let with = block
        .parent()
        .filter(|w| w.kind() == kinds::WITH_STATEMENT)?;
    let outer = with.parent().filter(|b| b.kind() == kinds::BLOCK)?;
    // Not when a payment was made before the `with`: the mark then follows its result.
    let (idx, src) = (cx.index()?, cx.src());
    let paid_before = idx
        .within(func, kinds::CALL)
        .iter()
        .take_while(|c| c.start_byte() < with.start_byte())
        .any(|c| super::pays(cx, *c, src));
    if paid_before {
        return None;
    }
    payment_call_after(cx, with, outer, func)
}

/// A payment call earlier in the same block whose result nobody tested before the assignment,
/// when it can fail without raising: its callee (in this change) may return `None`, or it is an
/// HTTP request, whose 4xx and 5xx answers come back as responses.
fn unchecked_call_before<'t>(
    cx: &Ctx<'t>,
    stmt: Node<'_>,
    block: Node<'_>,
    src: &str,
) -> Option<(Node<'t>, &'static str)> {
    let idx = cx.index()?;
    let earlier: Vec<Node<'_>> = syntax::statements(block)
        .into_iter()
        .take_while(|s| s.id() != stmt.id())
        .collect();
    let (position, call, http) = earlier.iter().enumerate().rev().find_map(|(i, s)| {
        idx.within(*s, kinds::CALL).iter().find_map(|c| {
            if super::pays(cx, *c, src)
                || wraps_payment(cx, syntax::callee_name(*c, src))
                || super::hands_a_payment(cx, *c, src)
            {
                Some((i, *c, false))
            } else {
                super::http_payment(cx, *c).then_some((i, *c, true))
            }
        })
    })?;
    let callee = syntax::handed_callee(call, src)
        .map(|h| h.rsplit('.').next().unwrap_or(h))
        .unwrap_or_else(|| syntax::callee_name(call, src));
    let binding = syntax::bound_name(call, src);
    // The function itself decides on the answer, only too late: `if result.status == "failed":
    // raise` after `complete_refund(...)`, whatever it looked at before.
    if late_check(call, stmt, block, src).is_some() {
        return Some((call, "checked_after"));
    }
    let why = if http {
        binding?;
        "status_unchecked"
    } else if cx
        .change
        .functions_named(cx.side, callee)
        .any(|(_, f)| f.may_return_none())
    {
        "unchecked"
    } else if binding.is_some()
        && cx.facts.is_some_and(|f| {
            f.calls_payment_sdk(syntax::callee(call, src)) || wraps_payment_sdk(cx, f, callee)
        })
    {
        // The SDK's object for a payment it made, which says whether the money moved.
        "sdk_status_unchecked"
    } else if binding.is_some() && payment_wrapper_elsewhere(cx, callee) {
        "sdk_status_unchecked"
    } else {
        return None;
    };
    // A refund the provider accepted waits for no one (no redirect, no 3-D Secure): recording
    // it when the call returns is the usual order, and one that fails later is the provider's
    // notification to report.
    // So is a transfer between Stripe balances, which has no status: it is made or it raised.
    if why == "sdk_status_unchecked"
        && (callee.to_ascii_lowercase().contains("refund")
            || syntax::callee(call, src).ends_with("Transfer.create"))
    {
        return None;
    }
    // What the result was read into counts as the result (`data = resp.json()`).
    let mut names: Vec<&str> = binding.into_iter().collect();
    let mentions = |text: &str, names: &[&str]| {
        text.split(|c: char| !c.is_alphanumeric() && c != '_')
            .any(|w| names.contains(&w))
    };
    // Checked within the statement that holds the call: `resp.raise_for_status()` after it in
    // the same `try`, or an `if` on the answer there.
    let statement = earlier.get(position)?;
    let tail = src.get(call.end_byte()..statement.end_byte()).unwrap_or("");
    let mut none_only = false;
    let mut checked = mentions(tail, &names)
        && (tail.contains("raise_for_status") || tail.contains("ensure_success"))
        || tail.lines().any(|line| {
            let line = line.trim_start();
            (line.starts_with("if ") || line.starts_with("assert ")) && mentions(line, &names)
        });
    for s in earlier.iter().skip(position + 1) {
        if checked {
            break;
        }
        let text = syntax::text(*s, src);
        if !mentions(text, &names) {
            continue;
        }
        let raises = text.contains("raise_for_status") || text.contains("ensure_success");
        // `handle_response(resp)` may well raise on a failed answer: not ours to doubt.
        let handed_on = names.iter().any(|n| passed_as_argument(text, n));
        // `if intent is None: raise` lets a pending or declined payment through, and the
        // function reads its status only after the record (`intent.status == "succeeded"`).
        if s.kind() == kinds::IF_STATEMENT
            && tests_only_none(*s, &names, src)
            && status_read_after(stmt, block, &names, src).is_some()
        {
            none_only = true;
            continue;
        }
        if matches!(s.kind(), kinds::IF_STATEMENT | "assert_statement") || raises || handed_on {
            checked = true;
            break;
        }
        if let Some(left) = s
            .named_child(0)
            .filter(|a| a.kind() == kinds::ASSIGNMENT)
            .and_then(|a| a.field("left"))
            .filter(|l| l.kind() == kinds::IDENTIFIER)
        {
            names.push(syntax::text(left, src));
        }
    }
    // The record is made of the answer: `settle_payout(ref, payout_status_for(transfer.status))`
    // writes what the provider said, whatever it was.
    if !checked {
        checked = reads_status(syntax::text(stmt, src), &names);
    }
    (!checked).then_some((call, if none_only { "status_later" } else { why }))
}

/// Whether an `if`'s condition only asks whether one of `names` is there: `x is None`, `not
/// x`, `x is not None`, `x`.
fn tests_only_none(stmt: Node<'_>, names: &[&str], src: &str) -> bool {
    let Some(condition) = stmt.field("condition") else {
        return false;
    };
    let text = syntax::normalized(condition, src);
    names.iter().any(|n| {
        [
            format!("{n} is None"),
            format!("not {n}"),
            format!("{n} is not None"),
            n.to_string(),
        ]
        .contains(&text)
    })
}

/// The first statement after `stmt` in its block that reads the status of one of `names`
/// (`intent.status`, `result["status"]`, `payment.get("status")`): its line.
fn status_read_after(stmt: Node<'_>, block: Node<'_>, names: &[&str], src: &str) -> Option<u32> {
    syntax::statements(block)
        .into_iter()
        .skip_while(|s| s.id() != stmt.id())
        .skip(1)
        .find(|s| reads_status(syntax::text(*s, src), names))
        .map(|s| syntax::lines(s).0)
}

/// Whether code reads the status of one of `names`: `intent.status`, `result["status"]`,
/// `payment.get("status")`.
fn reads_status(text: &str, names: &[&str]) -> bool {
    names.iter().any(|n| {
        [
            format!("{n}.status"),
            format!("{n}[\"status\"]"),
            format!("{n}.get(\"status\""),
        ]
        .iter()
        .any(|read| text.contains(read.as_str()))
    })
}

/// Whether a record of success sits under an `if` (within its function) that weighs a verdict:
/// `if result.is_success:`, `if status == "succeeded":`. A helper that records only then has
/// looked at the answer itself.
fn under_a_verdict(idx: &NodeIndex<'_>, node: Node<'_>, src: &str) -> bool {
    let func = idx.enclosing(node, kinds::FUNCTION_DEFINITION);
    let mut current = idx.enclosing(node, kinds::IF_STATEMENT);
    while let Some(stmt) = current {
        if func.is_some_and(|f| stmt.start_byte() < f.start_byte()) {
            return false;
        }
        let weighs = stmt.field("condition").is_some_and(|c| {
            let text = syntax::text(c, src).to_ascii_lowercase();
            [
                "success",
                "status",
                "state",
                "paid",
                "approved",
                "succeeded",
                "ok",
                "error",
            ]
            .iter()
            .any(|w| text.contains(w))
        });
        if weighs {
            return true;
        }
        current = idx.enclosing(stmt, kinds::IF_STATEMENT);
    }
    false
}

/// The first `if` after `stmt` in its block that tests the answer of `call` (bound to a name,
/// or read into one between them: `status = payment.get("status")`) and leaves the function
/// (`if status != "succeeded": raise CaptureFailed(...)`): the function's own verdict on the
/// payment, come after `stmt`.
fn late_check<'t>(call: Node<'_>, stmt: Node<'_>, block: Node<'t>, src: &str) -> Option<Node<'t>> {
    fn words(text: &str) -> impl Iterator<Item = &str> {
        text.split(|ch: char| !ch.is_alphanumeric() && ch != '_')
    }
    let mut names: Vec<&str> = syntax::bound_name(call, src).into_iter().collect();
    if names.is_empty() {
        return None;
    }
    let statements = syntax::statements(block);
    let mut after = statements
        .iter()
        .copied()
        .skip_while(|s| s.end_byte() < call.end_byte());
    for s in after.by_ref().skip(1) {
        if s.id() == stmt.id() {
            break;
        }
        if let Some(left) = s
            .named_child(0)
            .filter(|a| a.kind() == kinds::ASSIGNMENT)
            .filter(|a| {
                a.field("right")
                    .is_some_and(|r| words(syntax::text(r, src)).any(|w| names.contains(&w)))
            })
            .and_then(|a| a.field("left"))
            .filter(|l| l.kind() == kinds::IDENTIFIER)
        {
            names.push(syntax::text(left, src));
        }
    }
    after.filter(|s| s.kind() == kinds::IF_STATEMENT).find(|s| {
        s.field("condition")
            .is_some_and(|c| words(syntax::text(c, src)).any(|w| names.contains(&w)))
            && s.field("consequence")
                .and_then(|b| syntax::statements(b).last().copied())
                .is_some_and(|last| {
                    matches!(
                        last.kind(),
                        kinds::RAISE_STATEMENT | kinds::RETURN_STATEMENT
                    )
                })
    })
}

/// Whether a function of the file named `name` hands back what a payment SDK made: `return
/// stripe.PaymentIntent.create(...)` in a helper that a decorator retries.
fn wraps_payment_sdk(cx: &Ctx<'_>, file: &facts::FileFacts, name: &str) -> bool {
    returns_a_call(cx, name, |v, src| {
        file.calls_payment_sdk(syntax::callee(v, src))
    })
}

/// Whether every function of the change named `name` hands back the payment a provider made:
/// what a payment SDK returns (`return stripe.PaymentIntent.create(...)` in the gateway
/// module), or, for a payment operation by name (`create_transfer`), the answer of the request
/// it sends itself or through a helper of its file (`return self._request("POST", ...)`). Its
/// caller holds the payment, whose status says whether the money moved.
fn payment_wrapper_elsewhere(cx: &Ctx<'_>, name: &str) -> bool {
    let operation = cx.vocab.is_payment_operation(name) && !super::beside_the_money(name);
    let mut found = false;
    for (file, f) in cx.change.functions_named(cx.side, name) {
        let sdk = f.payment && file.imports_payment_sdk();
        let http = operation
            && (f.http
                || file
                    .functions
                    .iter()
                    .any(|g| g.http && f.callees.binary_search(&g.name).is_ok()));
        if file.is_test || !f.returns_value || !(sdk || http) || returns_an_id(f) {
            return false;
        }
        found = true;
    }
    found
}

/// Whether a function says it returns a plain value (`-> str | None`, `-> Optional[UUID]`):
/// the id of what it made (`response.headers.get("Capture-Id")`), with no status to read. It
/// raised if the provider refused.
fn returns_an_id(f: &facts::FunctionFacts) -> bool {
    f.annotation.as_deref().is_some_and(|a| {
        let a = a.trim();
        let a = a
            .strip_prefix("Optional[")
            .and_then(|a| a.strip_suffix(']'))
            .unwrap_or(a);
        a.split('|')
            .map(str::trim)
            .filter(|t| *t != "None")
            .all(|t| matches!(facts::last_name(t), "str" | "int" | "UUID" | "bytes"))
    })
}

/// Whether a function of the file named `name` hands back what a payment call made: `return
/// gateway.transaction.sale(params, ...)` in a helper that tenacity retries.
fn wraps_payment(cx: &Ctx<'_>, name: &str) -> bool {
    !name.is_empty()
        && returns_a_call(cx, name, |v, src| {
            super::is_payment_call(v, src, cx.vocab)
                || cx
                    .facts
                    .is_some_and(|f| f.calls_payment_sdk(syntax::callee(v, src)))
        })
}

/// Whether a function of the file named `name` returns a call that `made` holds for.
fn returns_a_call(cx: &Ctx<'_>, name: &str, made: impl Fn(Node<'_>, &str) -> bool) -> bool {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return false;
    };
    idx.returned_by(name, src).into_iter().any(|v| {
        let v = if v.kind() == kinds::AWAIT {
            v.named_child(0).unwrap_or(v)
        } else {
            v
        };
        v.kind() == kinds::CALL && made(v, src)
    })
}

/// Whether `name` is an argument of a call in `text`: `f(resp)`, `f(x, resp)`, `f(resp=resp)`.
fn passed_as_argument(text: &str, name: &str) -> bool {
    let bytes = text.as_bytes();
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].trim_end().as_bytes().last().copied();
        let after = bytes
            .get(at + name.len()..)
            .and_then(|rest| rest.iter().copied().find(|c| !c.is_ascii_whitespace()));
        matches!(before, Some(b'(' | b',' | b'=')) && matches!(after, Some(b')' | b','))
    })
}

/// The statement after `stmt` in its block that persists the entity: `save_order(order)`,
/// `order.save()`, `session.commit()`.
fn save_after<'t>(stmt: Node<'_>, block: Node<'t>, src: &str) -> Option<Node<'t>> {
    syntax::statements(block)
        .into_iter()
        .skip_while(|s| s.id() != stmt.id())
        .skip(1)
        .find(|s| {
            let Some(call) = s
                .named_child(0)
                .filter(|c| c.kind() == kinds::CALL)
                .or_else(|| {
                    s.named_child(0)
                        .filter(|a| a.kind() == kinds::AWAIT)
                        .and_then(|a| a.named_child(0))
                })
            else {
                return false;
            };
            let name = syntax::callee_name(call, src);
            name == "save"
                || name.starts_with("save_")
                || name.starts_with("update_")
                || matches!(
                    name,
                    "commit" | "flush" | "persist" | "put" | "add" | "merge"
                )
        })
}

/// The lines of a function's `return None`s (`43,46`), or its last line when it falls off the end.
fn none_lines(func: &facts::FunctionFacts) -> String {
    if func.none_returns.is_empty() {
        return func.lines.1.to_string();
    }
    func.none_returns
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
