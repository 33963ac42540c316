//! PAY040 claim-split-into-read-and-write: the change takes apart a claim made in one
//! conditional update (`Invoice.objects.filter(pk=pk, status=OPEN).update(status=PAID)`,
//! `update(Ticket).where(Ticket.status == ISSUED).values(status=PENDING)`, `UPDATE payouts SET
//! status = ? WHERE id = ? AND status IN (...)`) into a read of the field, a test and a write
//! of its own. The update let one run of many win; the read lets every run that comes at once
//! pass, and each goes on to what only one should do (settle, refund, credit, charge again).
//!
//! Read only where the old version is known, for the function of the same qualified name:
//! whether a fresh read-test-write is safe depends on a lock or a caller elsewhere, but here
//! the old code shows that the update itself was what kept the runs apart. Left alone: a
//! function that still claims the field, that locks the rows (`select_for_update()`,
//! `with_for_update()`, `FOR UPDATE`, `BEGIN IMMEDIATE`), or that calls a helper of the file
//! that claims or locks.
use tree_sitter::Node;

use super::balance_reset_after_payout::holds_rows;
use crate::python::{NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY040",
    doc: include_str!("../../../rules/pay/PAY040.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a field written after a test of it: by an update, a save or a commit.
/// Whether the old version claimed it is asked in the check.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        // `with_for_update(` and `select_for_update(` say `update(` too.
        && s.mentions(&["update(", "UPDATE", "save(", "commit("])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    let old_updates = cx
        .versions
        .old
        .as_ref()
        .is_some_and(|old| updates(&old.text));
    // A file that claims or locks rows somewhere has its own way of keeping runs apart; one
    // that moves money, or names a claim, may make a claim of its own.
    let pays_here = cx
        .facts
        .is_some_and(|f| f.payment_module || f.functions.iter().any(|f| f.payment));
    if !old_updates && !updates(src) && !locks(src) && !pays_here && !src.contains("claim") {
        return;
    }
    let changed: Vec<Node<'_>> = idx
        .all(kinds::FUNCTION_DEFINITION)
        .iter()
        .copied()
        .filter(|f| {
            let (first, last) = syntax::lines(*f);
            cx.touches_added(first, last)
        })
        .collect();
    if changed.is_empty() {
        return;
    }
    // The old tree is parsed only for a function whose new text shows the shape.
    let mut old = None;
    let mut apart: Option<Vec<Apart>> = None;
    for func in changed {
        let Some(found) = found_in(cx, idx, src, func, old_updates, &mut old, &mut apart) else {
            continue;
        };
        let finding = cx.report(&RULE, found.at);
        for (key, value) in found.args {
            finding.arg(key, value);
        }
        if let Some(note) = found.note {
            finding.note(note);
        }
        if found.blocker {
            finding.severity(crate::review::Severity::Blocker);
        }
        finding.function = found.function;
    }
}

/// What a finding of PAY040 says, worked out before it is reported.
struct Found<'t> {
    at: Node<'t>,
    function: String,
    args: Vec<(&'static str, String)>,
    note: Option<&'static str>,
    blocker: bool,
}

/// Whether PAY040 tells of `func`, a function the change touches: PAY047 leaves it then.
pub(super) fn tells_of(cx: &Ctx<'_>, func: Node<'_>) -> bool {
    let Some((idx, src)) = cx.code() else {
        return false;
    };
    let old_updates = cx
        .versions
        .old
        .as_ref()
        .is_some_and(|old| updates(&old.text));
    found_in(cx, idx, src, func, old_updates, &mut None, &mut None).is_some()
}

/// PAY040's finding in one function of the change, if it has one; `old` and `apart` are worked
/// out on first use and kept for the next function.
fn found_in<'t, 'a>(
    cx: &Ctx<'a>,
    idx: &NodeIndex<'t>,
    src: &'t str,
    func: Node<'t>,
    old_updates: bool,
    old: &mut Option<Option<&'a crate::python::ParsedFile>>,
    apart: &mut Option<Vec<Apart>>,
) -> Option<Found<'t>> {
    let kept = claims(idx, func, src);
    // The new side first: a field tested and then written, and not claimed. Most
    // functions have none, and need neither the old tree nor the file's locks.
    let candidates = candidate_fields(idx, func, src, &kept);
    if candidates.is_empty() {
        return None;
    }
    let name = facts::qualname(func, idx, src);
    let lost = if old_updates && !locks(syntax::text(func, src)) {
        (*old.get_or_insert_with(|| cx.other.get()))
            .and_then(|old| lost_claim(idx, func, src, &candidates, old.index(), old.text(), &name))
    } else {
        None
    };
    let mut own = None;
    let (split, sibling) = match lost {
        Some(lost) => (lost, None),
        None => {
            let split = split_claim(idx, func, src, &kept).filter(|split| {
                !split.names().any(|r| locks_record(func, src, r))
                    && !read_under_a_lock(idx, func, split, src)
            })?;
            // The old version locked these rows here: PAY025 tells of the lock taken away.
            if cx
                .versions
                .old
                .as_ref()
                .is_some_and(|o| holds_rows(&o.text))
                && cx.other.get().is_some_and(|old| {
                    let (old_idx, old_src) = (old.index(), old.text());
                    old_idx.all(kinds::FUNCTION_DEFINITION).iter().any(|f| {
                        facts::qualname(*f, old_idx, old_src) == name
                            && split.names().any(|r| locks_record(*f, old_src, r))
                    })
                })
            {
                return None;
            }
            let apart = apart.get_or_insert_with(|| kept_apart(idx, src));
            // Callers in the file that lock the rows run this under their lock; when every
            // one does, the test holds.
            let (locked, unlocked): (Vec<Node<'_>>, Vec<Node<'_>>) = callers(idx, func, src)
                .into_iter()
                .partition(|c| locks(syntax::text(*c, src)));
            let other = match (locked.first(), unlocked.first()) {
                (Some(_), None) => return None,
                (Some(holder), Some(caller)) => {
                    let lock = apart
                        .iter()
                        .find(|a| a.func == holder.id() && a.lock && a.names_record(&split))?;
                    let mut other = lock.clone();
                    other.caller =
                        Some((facts::qualname(*caller, idx, src), syntax::lines(*caller).0));
                    Some(other)
                }
                _ => apart
                    .iter()
                    .find(|a| a.func != func.id() && a.covers(&split))
                    .cloned(),
            };
            // Nothing else in the file keeps these rows apart: the claim is this
            // function's own, read when it says it is one or money follows it.
            if other.is_none() {
                let claim = own_claim(cx, idx, func, &split, &unlocked)?;
                own = Some(claim);
            }
            (split, other)
        }
    };
    // Money moved between the test and the write is PAY022's to tell. A payment under a
    // key of its own (`idempotency_key=f"capture-{order.pk}"`) is made once by the provider
    // however many runs pass.
    // An own claim asked the key itself (`own_claim`): a key the record makes is made once.
    // So is a request under a key its record makes (`request_id=f"{order.id}:create"`):
    // two runs that both pass get the same answer back.
    if super::state_checked_then_set::speaks_of(cx, idx, func, split.test)
        || own.is_none()
            && idx.within(func, kinds::CALL).iter().any(|c| {
                c.start_byte() > split.test.end_byte()
                    && (super::pays(cx, *c, src) && super::state_checked_then_set::keyed(*c, src)
                        || c.end_byte() <= split.write.start_byte()
                            && keyed_by_the_record(*c, &split.record, src))
            })
    {
        return None;
    }
    // The claim moved into a helper of the file (`self._claim(invoice)`), or a lock did.
    if super::calls_a_helper_that(idx, func, src, |h| {
        locks(syntax::text(h, src)) || !claims(idx, h, src).is_empty()
    }) {
        return None;
    }
    let mut args: Vec<(&'static str, String)> = vec![
        ("function", name.clone()),
        ("field", split.field.clone()),
        ("write_line", syntax::lines(split.write).0.to_string()),
    ];
    let mut note = None;
    let mut blocker = false;
    match sibling {
        None => {
            if let Some(own) = own {
                args.push(("record", split.record.clone()));
                note = Some(own.note);
                if let Some(money) = own.money {
                    args.push(("money", money.shown));
                    args.push(("money_line", money.line.to_string()));
                    args.push(("payer", money.payer));
                    blocker = true;
                }
            } else if let Some((claim, claim_src)) = split.claim {
                args.push(("claim", shown(claim, claim_src)));
                args.push(("old_line", syntax::lines(claim).0.to_string()));
            }
        }
        Some(other) => {
            note = Some(match (&other.caller, other.lock) {
                (Some(_), _) => "unlocked_caller",
                (None, true) => "sibling_lock",
                (None, false) => "sibling_claim",
            });
            args.push(("record", split.record.clone()));
            args.push(("other", other.name));
            args.push(("apart", other.shown));
            args.push(("other_line", other.line.to_string()));
            if let Some((caller, line)) = other.caller {
                args.push(("caller", caller));
                args.push(("caller_line", line.to_string()));
            }
        }
    }
    Some(Found {
        at: split.test,
        function: name,
        args,
        note,
        blocker,
    })
}

/// A claim of the function's own, with no old update to compare with and nothing else in the
/// file keeping its rows apart.
struct Own {
    note: &'static str,
    money: Option<Money>,
}

/// Money moved after a claim under no key its record makes.
struct Money {
    shown: String,
    line: u32,
    /// The function it moves in: the claim's own, or a caller's.
    payer: String,
}

/// Whether the record of a split was read through a call named for a lock
/// (`lock_payment(session, id)`, `_locked_wallet(...)`, `get_for_update(...)`).
fn read_under_a_lock(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    split: &Split<'_, '_>,
    src: &str,
) -> bool {
    idx.assigned_before(Some(func), &split.record, split.test.start_byte(), src)
        .map(crate::rules::idem::strip_await)
        .filter(|v| v.kind() == kinds::CALL)
        .is_some_and(|load| {
            let name = syntax::callee_name(load, src);
            super::state_checked_then_set::takes_lock(load, src)
                || name.ends_with("for_update")
                || syntax::name_words(name)
                    .iter()
                    .any(|w| w == "locked" || w == "locking")
        })
}

/// What makes a test and a write the change wrote a claim of their own: money moved after the
/// write, in the function or in a caller of the file after its call (two runs that both pass
/// both pay), or a name that says so (`_claim_order`, `claim_due_retry`, `reserve_seat`). A
/// key made from the record (`idempotency_key=f"capture-{order.id}"`) has the provider pay once.
fn own_claim(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    split: &Split<'_, '_>,
    callers: &[Node<'_>],
) -> Option<Own> {
    let src = cx.src();
    let added = |n: Node<'_>| {
        let (first, last) = syntax::lines(n);
        cx.touches_added(first, last)
    };
    // A claim moves a state or takes an owner; a balance tested and written apart is PAY008's
    // and PAY028's.
    let claimed = syntax::name_words(&split.field).iter().any(|w| {
        matches!(
            w.as_str(),
            "status"
                | "state"
                | "stage"
                | "phase"
                | "step"
                | "claim"
                | "claimed"
                | "locked"
                | "lock"
                | "lease"
                | "leased"
                | "owner"
                | "worker"
                | "pending"
                | "processing"
        )
    });
    if !claimed || !added(split.test) && !added(split.write) {
        return None;
    }
    let name = syntax::function_name(func, src);
    let money = |within: Node<'_>, after: usize, record: &str| {
        money_after(cx, idx, within, after, record).map(|call| Money {
            shown: super::first_line(call, src),
            line: syntax::lines(call).0,
            payer: facts::qualname(within, idx, src),
        })
    };
    let paid = money(func, split.write.end_byte(), &split.record).or_else(|| {
        callers.iter().find_map(|caller| {
            let call = idx.within(*caller, kinds::CALL).iter().copied().find(|c| {
                idx.callee_name(*c, src) == name
                    && crate::rules::idem::owned_by(idx, *c, Some(*caller))
            })?;
            // The caller goes on with what the claim hands back (`order = self._claim_order(
            // ...)`); money it moves after a call it ignores is another matter's.
            let record = syntax::bound_name(call, src)?;
            money(*caller, call.end_byte(), record)
        })
    });
    if paid.is_some() {
        return Some(Own {
            note: "own_pays",
            money: paid,
        });
    }
    let named = |f: Node<'_>| {
        let words = syntax::name_words(syntax::function_name(f, src));
        let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
        has(&["claim", "claims", "reserve", "acquire", "lease", "lock"])
            && !has(&["unlock", "release", "is", "has", "locked"])
    };
    (named(func) || callers.iter().any(|c| named(*c))).then_some(Own {
        note: "own_claim",
        money: None,
    })
}

/// The first call of `func` after byte `after` that moves money a second run would move again:
/// a payment sent without a key, a refund or payout row written, a payment (or a function of
/// the change that surely makes one) whose key or arguments do not come from `record`.
fn money_after<'t>(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    after: usize,
    record: &str,
) -> Option<Node<'t>> {
    let src = cx.src();
    idx.within(func, kinds::CALL).iter().copied().find(|&c| {
        if c.start_byte() < after || !crate::rules::idem::owned_by(idx, c, Some(func)) {
            return false;
        }
        let callee = idx.callee_name(c, src);
        let pays = super::pays(cx, c, src)
            || crate::rules::idem::named_once(cx, callee)
                && cx
                    .change
                    .reach_surely(cx.side, callee, None, 2, &crate::rules::reach::PAYMENT)
                    .is_some();
        if pays {
            return !made_once_by(c, record, src);
        }
        super::state_checked_then_set::moves_money(cx, c, src)
    })
}

/// Whether a payment's key or reference, or a helper's arguments when it shows neither, come
/// from the record alone (`idempotency_key=f"capture-{order.id}"`, `invoice_number=debit.
/// reference`, `charge(order)`): two runs send the same, and the provider takes the second for
/// a repeat. One numbered by an attempt or made fresh does not.
fn made_once_by(call: Node<'_>, record: &str, src: &str) -> bool {
    let keys = key_arguments(call, src);
    if !keys.is_empty() {
        return keys
            .iter()
            .any(|v| from_record(syntax::text(*v, src), record));
    }
    call.child_by_field_name("arguments")
        .is_some_and(|a| from_record(syntax::text(a, src), record))
}

/// Whether a request's idempotency key (`idempotency_key=`, PayPal's `request_id=`) comes from
/// the record alone: a reference or a label beside it (`client_reference_id=`) keys nothing.
fn keyed_by_the_record(call: Node<'_>, record: &str, src: &str) -> bool {
    syntax::keyword_args(call, src).into_iter().any(|(k, v)| {
        (syntax::contains_lowercase(k, "idempotency") || k == "request_id")
            && from_record(syntax::text(v, src), record)
    })
}

/// A key's text made from the record (`f"capture-{order.id}"`, `debit.reference`), not from an
/// attempt or something fresh.
fn from_record(text: &str, record: &str) -> bool {
    !record.is_empty()
        && (syntax::has_word(text, record) || text.contains(&format!("{record}_id")))
        && !["uuid", "attempt", "token", "now(", "time("]
            .iter()
            .any(|w| text.contains(w))
}

/// The values of a call's arguments that name a key or a reference: `idempotency_key=`,
/// `reference=`, `invoice_number=`.
fn key_arguments<'t>(call: Node<'t>, src: &str) -> Vec<Node<'t>> {
    syntax::keyword_args(call, src)
        .into_iter()
        .filter(|(k, _)| {
            let words = syntax::name_words(k);
            syntax::contains_lowercase(k, "idempotency")
                || crate::rules::idem::key_made_per_attempt::dedup_handle(k)
                || words.iter().any(|w| {
                    matches!(
                        w.as_str(),
                        "key" | "reference" | "ref" | "invoice" | "number" | "dedup"
                    )
                })
        })
        .map(|(_, v)| v)
        .collect()
}

/// Whether code updates rows: an ORM's `update(`, SQL's `UPDATE `.
fn updates(code: &str) -> bool {
    code.contains("update(") || code.contains("UPDATE ")
}

/// A claim taken apart: where the field is tested and written, of which record, and the claim
/// of the old version it replaces.
struct Split<'t, 'o> {
    test: Node<'t>,
    write: Node<'t>,
    field: String,
    record: String,
    /// The tables the record was selected from (`FROM rentals` for `row`).
    tables: Vec<String>,
    claim: Option<(Node<'o>, &'o str)>,
}

impl Split<'_, '_> {
    fn names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.record.as_str()).chain(self.tables.iter().map(String::as_str))
    }
}

/// The claim the old function of the same name made and the new one no longer does, when the
/// new one tests and writes its field apart.
fn lost_claim<'t, 'o>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    src: &str,
    candidates: &[String],
    old_idx: &NodeIndex<'o>,
    old_src: &'o str,
    name: &str,
) -> Option<Split<'t, 'o>> {
    let before = facts::function_by_qualname(old_idx, old_src, name)?;
    if !updates(syntax::text(before, old_src)) {
        return None;
    }
    claims(old_idx, before, old_src)
        .into_iter()
        .filter(|(_, field)| candidates.contains(field))
        .find_map(|(claim, field)| {
            let write = write_after(idx, func, src, &field, None, 0)?;
            let test = tested_before(idx, func, src, &field, write.start_byte())?;
            Some(Split {
                test,
                write,
                field,
                record: String::new(),
                tables: Vec::new(),
                claim: Some((claim, old_src)),
            })
        })
}

/// The fields `func` tests (in an `if` that leaves, or in a read that picks rows by them) and
/// writes, that it does not claim.
fn candidate_fields(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    src: &str,
    kept: &[(Node<'_>, String)],
) -> Vec<String> {
    let mut tested: Vec<String> = leaving_tests(idx, func, src)
        .into_iter()
        .flat_map(|(_, condition)| fields_named(idx, condition, src))
        .chain(reads(idx, func, src).into_iter().map(|(_, field)| field))
        .chain(sql_picked(func, src))
        .filter(|f| !matches!(f.as_str(), "id" | "pk") && !kept.iter().any(|(_, k)| k == f))
        .collect();
    tested.sort();
    tested.dedup();
    tested.retain(|f| write_after(idx, func, src, f, None, 0).is_some());
    tested
}

/// The words of the conditions of `func`'s SQL selects (`... WHERE status = 'past_due'`): the
/// fields they pick rows by, among other words.
fn sql_picked(func: Node<'_>, src: &str) -> Vec<String> {
    sql_strings(func, src)
        .into_iter()
        .map(|s| syntax::text(s, src))
        .filter(|text| sql_update(text).is_none())
        .filter_map(|text| {
            let at = text.to_ascii_uppercase().find("WHERE")?;
            Some(sql_words(&text[at..]))
        })
        .flatten()
        .collect()
}

/// A read of a record in the function, a test of one of its fields that turns the run away,
/// and a write of the same field after it: `instalment = Instalment.get_by_id(id)`, `if
/// instalment.status not in (...): return None`, `Instalment.update(status=...).where(id)`.
/// Or rows picked by the field (`select(Ticket).where(Ticket.status == ISSUED)`) and the field
/// set on them after.
fn split_claim<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    src: &str,
    kept: &[(Node<'t>, String)],
) -> Option<Split<'t, 'static>> {
    let free = |field: &str| !matches!(field, "id" | "pk") && !kept.iter().any(|(_, f)| f == field);
    for (stmt, condition) in leaving_tests(idx, func, src) {
        for (record, field) in fields_of_records(idx, condition, src) {
            if !free(&field) || !fresh(idx, func, record, stmt.start_byte(), src) {
                continue;
            }
            let mut tables = selected_from(func, src, stmt.start_byte());
            tables.extend(read_from(idx, func, record, stmt.start_byte(), src));
            if let Some(write) = write_after(
                idx,
                func,
                src,
                &field,
                Some((record, &tables)),
                stmt.end_byte(),
            ) {
                return Some(Split {
                    test: condition,
                    write,
                    field,
                    record: record.to_string(),
                    tables,
                    claim: None,
                });
            }
        }
    }
    // Rows picked by the field in SQL (`SELECT id FROM invoices WHERE status = 'past_due'`)
    // and set by an update of the same table whose own condition leaves it out (`UPDATE
    // invoices SET status = 'collecting' WHERE id = %(id)s`).
    let strings = sql_strings(func, src);
    for (i, select) in strings.iter().enumerate() {
        let text = syntax::text(*select, src);
        let upper = text.to_ascii_uppercase();
        if sql_update(text).is_some() || !upper.contains("SELECT ") || holds_rows(text) {
            continue;
        }
        let Some(at) = upper.find("WHERE") else {
            continue;
        };
        let picked = sql_words(&text[at..]);
        let tables = records_named(text);
        let Some(table) = tables.first() else {
            continue;
        };
        for update in &strings[i + 1..] {
            let written = syntax::text(*update, src);
            let Some((set, tested)) = sql_update(written) else {
                continue;
            };
            if !records_named(written).iter().any(|r| tables.contains(r)) {
                continue;
            }
            if let Some(field) = set
                .iter()
                .find(|f| free(f) && picked.contains(f) && !tested.contains(f))
            {
                return Some(Split {
                    test: *select,
                    write: *update,
                    field: field.clone(),
                    record: table.clone(),
                    tables: tables.clone(),
                    claim: None,
                });
            }
        }
    }
    for (read, field) in reads(idx, func, src) {
        if !free(&field) {
            continue;
        }
        let Some(model) = super::row_lock_removed::models(syntax::text(read, src))
            .into_iter()
            .next()
        else {
            continue;
        };
        let record = super::snake(&model);
        if let Some(write) = write_after(
            idx,
            func,
            src,
            &field,
            Some((&record, &[])),
            read.end_byte(),
        ) {
            return Some(Split {
                test: read,
                write,
                field,
                record,
                tables: Vec::new(),
                claim: None,
            });
        }
    }
    None
}

/// The `if`s and `elif`s of `func` whose branch leaves, with their conditions.
fn leaving_tests<'t>(idx: &NodeIndex<'t>, func: Node<'t>, src: &str) -> Vec<(Node<'t>, Node<'t>)> {
    let ifs = idx.within(func, kinds::IF_STATEMENT);
    let mut out: Vec<(Node<'t>, Node<'t>)> = ifs
        .iter()
        .copied()
        .chain(ifs.iter().flat_map(|s| syntax::elif_clauses(*s)))
        .filter(|s| {
            s.child_by_field_name("consequence")
                .is_some_and(|body| !syntax::block_falls_through(body, src))
        })
        .filter_map(|s| Some((s, s.child_by_field_name("condition")?)))
        .collect();
    out.sort_by_key(|(s, _)| s.start_byte());
    out
}

/// The record and field pairs a condition reads: `invoice.status`, `payout["status"]`,
/// `row.get("status")`, for a record held in a plain name.
fn fields_of_records<'t, 's>(
    idx: &NodeIndex<'t>,
    condition: Node<'t>,
    src: &'s str,
) -> Vec<(&'s str, String)> {
    let mut out = Vec::new();
    let mut held = |object: Option<Node<'_>>, field: String| {
        if let Some(object) = object.filter(|o| o.kind() == kinds::IDENTIFIER)
            && !field.is_empty()
        {
            out.push((syntax::text(object, src), field));
        }
    };
    // `row.get(...)` is a call of a method, read below: the callees are found from the calls,
    // not from each attribute's parent (a walk from the root).
    let callees: Vec<usize> = idx
        .within(condition, kinds::CALL)
        .iter()
        .filter_map(|c| c.child_by_field_name("function"))
        .map(|f| f.id())
        .collect();
    for attribute in idx.within(condition, kinds::ATTRIBUTE) {
        if callees.contains(&attribute.id()) {
            continue;
        }
        held(
            attribute.child_by_field_name("object"),
            field_of(*attribute, src),
        );
    }
    for subscript in syntax::descendants(condition, &[kinds::SUBSCRIPT]) {
        held(
            subscript.child_by_field_name("value"),
            field_of(subscript, src),
        );
    }
    for call in idx.within(condition, kinds::CALL) {
        if syntax::callee_name(*call, src) == "get"
            && let Some(first) = syntax::positional_args(*call).first()
        {
            held(syntax::receiver(*call), field_of(*first, src));
        }
    }
    out
}

/// Whether `record` is read in `func` before byte `before`: assigned from a call (`await
/// cur.fetchone()`, `Instalment.get_by_id(...)`) or read again (`invoice.refresh_from_db()`,
/// `await session.refresh(order)`). A record handed in may be locked by the caller.
fn fresh(idx: &NodeIndex<'_>, func: Node<'_>, record: &str, before: usize, src: &str) -> bool {
    idx.assigned_before(Some(func), record, before, src)
        .is_some_and(|v| crate::rules::idem::strip_await(v).kind() == kinds::CALL)
        || idx.within(func, kinds::CALL).iter().any(|c| {
            let name = syntax::callee_name(*c, src);
            c.end_byte() <= before
                && (name.contains("refresh") || name.contains("reload"))
                && syntax::has_word(syntax::text(*c, src), record)
        })
}

/// Calls that pick rows by a field (`select(Ticket).where(Ticket.status == ISSUED)`,
/// `Invoice.objects.filter(status=OPEN)`), not an update's, with the field.
fn reads<'t>(idx: &NodeIndex<'t>, func: Node<'t>, src: &str) -> Vec<(Node<'t>, String)> {
    let mut out = Vec::new();
    let calls = idx.within(func, kinds::CALL);
    // The chains of updates, found from their few `update` calls: a node's parent is found by
    // a walk from the root, too dear to ask of every `filter`.
    let updates: Vec<Node<'t>> = calls
        .iter()
        .filter(|c| idx.callee_name(**c, src) == "update")
        .map(|c| chain_top(*c))
        .collect();
    for &call in calls {
        if !matches!(idx.callee_name(call, src), "filter" | "where" | "filter_by")
            || updates.iter().any(|u| syntax::contains(*u, call))
        {
            continue;
        }
        let Some(args) = call.child_by_field_name("arguments") else {
            continue;
        };
        for field in fields_named(idx, args, src) {
            out.push((call, field));
        }
    }
    out
}

/// Where the file keeps runs apart: a function's row lock, or its claim of a field, with the
/// records it names.
#[derive(Clone)]
struct Apart {
    func: usize,
    name: String,
    line: u32,
    shown: String,
    records: Vec<String>,
    /// The fields kept apart: the one claimed, or those the lock's function tests and writes
    /// under it.
    fields: Vec<String>,
    lock: bool,
    /// A caller in the file that runs the function without the lock `func` takes around it.
    caller: Option<(String, u32)>,
}

impl Apart {
    fn covers(&self, split: &Split<'_, '_>) -> bool {
        self.fields.contains(&split.field) && self.names_record(split)
    }

    fn names_record(&self, split: &Split<'_, '_>) -> bool {
        self.records
            .iter()
            .any(|r| split.names().any(|n| same_record(r, n)))
    }
}

/// `Invoice` and `invoice`, the table `payouts` and `payout`.
fn same_record(word: &str, record: &str) -> bool {
    let word = word.to_ascii_lowercase();
    // `vendor_payout` (of `VendorPayout`) for a `payout` read from it.
    let last_word =
        |w: &str| w == record || w.rsplit_once('_').is_some_and(|(_, last)| last == record);
    !record.is_empty()
        && (last_word(&word)
            || word.strip_suffix('s').is_some_and(last_word)
            || word.strip_suffix("es").is_some_and(last_word))
}

/// The records a piece of code names: models (`Invoice`, `select(Ticket)`, snake-cased) and
/// the tables of its SQL (`UPDATE payouts`, `FROM payouts`).
fn records_named(code: &str) -> Vec<String> {
    let mut out: Vec<String> = super::row_lock_removed::models(code)
        .iter()
        .map(|m| super::snake(m))
        .collect();
    let upper = code.to_ascii_uppercase();
    for keyword in ["UPDATE ", "FROM "] {
        let mut at = 0;
        while let Some(found) = upper[at..].find(keyword) {
            let start = at + found + keyword.len();
            let word: String = code[start..]
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !word.is_empty() {
                out.push(word.to_ascii_lowercase());
            }
            at = start;
        }
    }
    out
}

/// Every function of the file that locks rows or claims a field, with what it locks or
/// claims and the names it calls.
fn kept_apart(idx: &NodeIndex<'_>, src: &str) -> Vec<Apart> {
    let mut out = Vec::new();
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        let text = syntax::text(func, src);
        let (locked, claimed) = (locks(text), updates(text));
        if !locked && !claimed {
            continue;
        }
        let name = facts::qualname(func, idx, src);
        let first = syntax::lines(func).0;
        if locked {
            // A lock keeps apart what its function tests and then writes under it; a lock
            // taken for something else (to create an invoice) says nothing of this field.
            let fields = guarded_writes(idx, func, src);
            for (i, shown, records) in row_locks(text) {
                out.push(Apart {
                    func: func.id(),
                    name: name.clone(),
                    line: first + i,
                    shown,
                    records,
                    fields: fields.clone(),
                    lock: true,
                    caller: None,
                });
            }
        }
        if claimed {
            for (claim, field) in claims(idx, func, src) {
                out.push(Apart {
                    func: func.id(),
                    name: name.clone(),
                    line: syntax::lines(claim).0,
                    shown: shown(claim, src),
                    records: records_named(syntax::text(claim, src)),
                    fields: vec![field],
                    lock: false,
                    caller: None,
                });
            }
        }
    }
    out
}

/// The row locks of a function's text: the line (from the function's first), its text, and
/// the records it names.
fn row_locks(text: &str) -> Vec<(u32, String, Vec<String>)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if !holds_rows(line) {
            continue;
        }
        // `.with_for_update()` on a line of its own locks what the lines above select.
        let from = if line.trim_start().starts_with(['.', ')']) {
            i.saturating_sub(2)
        } else {
            i
        };
        out.push((
            i as u32,
            line.trim().to_string(),
            records_named(&lines[from..=i].join("\n")),
        ));
    }
    out
}

/// Whether `func` locks `record`'s rows itself, or takes a lock that names no record.
fn locks_record(func: Node<'_>, src: &str, record: &str) -> bool {
    let text = syntax::text(func, src);
    SERIAL.iter().any(|w| text.contains(w))
        || row_locks(text).iter().any(|(_, _, records)| {
            records.is_empty() || records.iter().any(|r| same_record(r, record))
        })
}

/// What `record` was read from before byte `before`: the models of the call that gave it
/// (`current = await RenewalCharge.get(id=charge.id)`), or the tables a method of the file
/// that gave it selects from (`current = await self.get(payout_id)`).
fn read_from(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    record: &str,
    before: usize,
    src: &str,
) -> Vec<String> {
    let Some(value) = idx.assigned_before(Some(func), record, before, src) else {
        return Vec::new();
    };
    let value = crate::rules::idem::strip_await(value);
    if value.kind() != kinds::CALL {
        return Vec::new();
    }
    let mut out = records_named(syntax::text(value, src));
    let name = idx.callee_name(value, src);
    if !name.is_empty() {
        for helper in idx.functions_named(name, src) {
            if helper.id() != func.id() {
                out.extend(selected_from(helper, src, helper.end_byte()));
            }
        }
    }
    out
}

/// The tables `func` selects from in SQL before byte `before`: what a fetched row is of.
fn selected_from(func: Node<'_>, src: &str, before: usize) -> Vec<String> {
    sql_strings(func, src)
        .into_iter()
        .filter(|s| s.end_byte() <= before)
        .map(|s| syntax::text(s, src))
        .filter(|text| text.to_ascii_uppercase().contains("SELECT "))
        .flat_map(records_named)
        .collect()
}

/// The functions of the file that call `func` by its name.
fn callers<'t>(idx: &NodeIndex<'t>, func: Node<'t>, src: &str) -> Vec<Node<'t>> {
    let name = syntax::function_name(func, src);
    idx.all(kinds::FUNCTION_DEFINITION)
        .iter()
        .copied()
        .filter(|g| {
            g.id() != func.id()
                && idx.within(*g, kinds::CALL).iter().any(|c| {
                    idx.callee_name(*c, src) == name
                        && crate::rules::idem::owned_by(idx, *c, Some(*g))
                })
        })
        .collect()
}

/// The fields `func` tests in a test that leaves and writes after it, on the same record.
fn guarded_writes(idx: &NodeIndex<'_>, func: Node<'_>, src: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (stmt, condition) in leaving_tests(idx, func, src) {
        for (record, field) in fields_of_records(idx, condition, src) {
            if !out.contains(&field)
                && write_after(idx, func, src, &field, Some((record, &[])), stmt.end_byte())
                    .is_some()
            {
                out.push(field);
            }
        }
    }
    out
}

/// A claim as the message shows it: an ORM chain's first line, an SQL update on one line.
fn shown(claim: Node<'_>, src: &str) -> String {
    let text = syntax::text(claim, src);
    let upper = text.to_ascii_uppercase();
    let Some(at) = upper.find("UPDATE ") else {
        return super::first_line(claim, src);
    };
    let end = upper[at..].find("RETURNING").map_or(text.len(), |e| at + e);
    let sql = text[at..end]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let sql = sql.trim_end_matches(['"', '\'']).trim_end();
    if sql.chars().count() > 120 {
        format!("{} ...", sql.chars().take(117).collect::<String>())
    } else {
        sql.to_string()
    }
}

/// A lock on the rows, or a transaction that keeps writers apart from its start.
fn locks(code: &str) -> bool {
    holds_rows(code) || SERIAL.iter().any(|w| code.contains(w))
}

/// A transaction that keeps writers apart from its start (`BEGIN IMMEDIATE`, `SERIALIZABLE`).
const SERIAL: [&str; 4] = ["IMMEDIATE", "EXCLUSIVE", "SERIALIZABLE", "serializable"];

/// The fields `func` claims: set by an update whose condition tests them too, in an ORM chain
/// (Django's, SQLAlchemy's, peewee's) or in SQL. Each with the update it is claimed by.
fn claims<'t>(idx: &NodeIndex<'t>, func: Node<'t>, src: &str) -> Vec<(Node<'t>, String)> {
    let mut out: Vec<(Node<'t>, String)> = Vec::new();
    let mut push = |node: Node<'t>, set: Vec<String>, tested: Vec<String>| {
        for field in set {
            if !matches!(field.as_str(), "id" | "pk")
                && tested.contains(&field)
                && !out.iter().any(|(_, f)| *f == field)
            {
                out.push((node, field));
            }
        }
    };
    for &call in idx.within(func, kinds::CALL) {
        if idx.callee_name(call, src) == "update" {
            let top = chain_top(call);
            let (set, tested) = chain_fields(idx, top, src);
            push(top, set, tested);
        }
    }
    for sql in sql_strings(func, src) {
        if let Some((set, tested)) = sql_update(syntax::text(sql, src)) {
            push(sql, set, tested);
        }
    }
    out
}

/// The outermost call of a method chain `call` is part of: `.returning(...)` of
/// `update(T).where(...).values(...).returning(...)`.
fn chain_top(call: Node<'_>) -> Node<'_> {
    let mut top = call;
    while let Some(attribute) = top.parent().filter(|p| p.kind() == kinds::ATTRIBUTE)
        && let Some(outer) = attribute.parent().filter(|p| p.kind() == kinds::CALL)
        && outer.child_by_field_name("function") == Some(attribute)
    {
        top = outer;
    }
    top
}

/// The calls of a chain, from its outermost down to its first.
fn chain_calls(top: Node<'_>) -> Vec<Node<'_>> {
    let mut calls = vec![top];
    let mut current = top;
    while let Some(object) = current
        .child_by_field_name("function")
        .filter(|f| f.kind() == kinds::ATTRIBUTE)
        .and_then(|f| f.child_by_field_name("object"))
        .filter(|o| o.kind() == kinds::CALL)
    {
        calls.push(object);
        current = object;
    }
    calls
}

/// What an ORM chain sets (the keywords and dict keys of `update(...)` and `values(...)`) and
/// what it tests (the fields named in `filter(...)`, `where(...)`, `exclude(...)`).
fn chain_fields(idx: &NodeIndex<'_>, top: Node<'_>, src: &str) -> (Vec<String>, Vec<String>) {
    let (mut set, mut tested) = (Vec::new(), Vec::new());
    let mut calls = chain_calls(top);
    // `claimable = Refund.objects.filter(status__in=...)`, then `claimable.update(...)`: one
    // chain split over a name.
    if let Some(name) = calls
        .last()
        .and_then(|first| syntax::receiver(*first))
        .filter(|r| r.kind() == kinds::IDENTIFIER)
        && let Some(value) = idx
            .assigned_before(
                idx.enclosing(top, kinds::FUNCTION_DEFINITION),
                syntax::text(name, src),
                top.start_byte(),
                src,
            )
            .map(crate::rules::idem::strip_await)
            .filter(|v| v.kind() == kinds::CALL)
    {
        calls.extend(chain_calls(value));
    }
    for call in calls {
        let Some(args) = call.child_by_field_name("arguments") else {
            continue;
        };
        match syntax::callee_name(call, src) {
            "update" | "values" => {
                for (name, _) in syntax::keyword_args(call, src) {
                    set.push(name.to_string());
                }
                for pair in syntax::descendants(args, &[kinds::PAIR]) {
                    if let Some(key) = pair.child_by_field_name("key") {
                        set.push(field_of(key, src));
                    }
                }
            }
            "filter" | "where" | "exclude" | "filter_by" => {
                tested.extend(fields_named(idx, args, src));
                // `where(*pending)`, with `pending = (Ticket.refund_id == refund.id, Ticket.status
                // == REFUND_PENDING)` above.
                for splat in syntax::descendants(args, &[kinds::LIST_SPLAT]) {
                    if let Some(name) = splat
                        .named_child(0)
                        .filter(|n| n.kind() == kinds::IDENTIFIER)
                        && let Some(value) = idx.assigned_before(
                            idx.enclosing(call, kinds::FUNCTION_DEFINITION),
                            syntax::text(name, src),
                            call.start_byte(),
                            src,
                        )
                    {
                        tested.extend(fields_named(idx, value, src));
                    }
                }
            }
            _ => {}
        }
    }
    (set, tested)
}

/// The field a key or a left side names: `status` of `Ticket.status`, `"status"`, `row["status"]`.
fn field_of(node: Node<'_>, src: &str) -> String {
    match node.kind() {
        kinds::ATTRIBUTE => node
            .child_by_field_name("attribute")
            .map_or_else(String::new, |a| syntax::text(a, src).to_string()),
        kinds::STRING => syntax::string_value(node, src)
            .unwrap_or_default()
            .to_string(),
        kinds::SUBSCRIPT => node
            .child_by_field_name("subscript")
            .filter(|s| s.kind() == kinds::STRING)
            .and_then(|s| syntax::string_value(s, src))
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    }
}

/// The fields a condition or a filter names: attributes (`Ticket.status`), keywords
/// (`status__in=...` is `status`), subscripts (`row["status"]`) and `.get("status")`.
fn fields_named(idx: &NodeIndex<'_>, node: Node<'_>, src: &str) -> Vec<String> {
    let mut out: Vec<String> = idx
        .within(node, kinds::ATTRIBUTE)
        .iter()
        .map(|a| field_of(*a, src))
        .collect();
    out.extend(
        syntax::descendants(node, &[kinds::SUBSCRIPT])
            .iter()
            .map(|s| field_of(*s, src)),
    );
    for keyword in syntax::descendants(node, &[kinds::KEYWORD_ARGUMENT]) {
        if let Some(name) = keyword.child_by_field_name("name") {
            let name = syntax::text(name, src);
            out.push(name.split("__").next().unwrap_or(name).to_string());
        }
    }
    for call in idx.within(node, kinds::CALL) {
        if syntax::callee_name(*call, src) == "get"
            && let Some(first) = syntax::positional_args(*call).first()
        {
            out.push(field_of(*first, src));
        }
    }
    out.retain(|f| !f.is_empty());
    out
}

/// The strings of `func` that hold SQL, each once: a string made of parts is read whole.
fn sql_strings<'t>(func: Node<'t>, src: &str) -> Vec<Node<'t>> {
    let mut out: Vec<Node<'t>> = Vec::new();
    // Most functions hold no SQL: their subtree is not walked. The finders are built once.
    static SQL: std::sync::LazyLock<[memchr::memmem::Finder<'static>; 4]> =
        std::sync::LazyLock::new(|| {
            ["UPDATE", "SELECT", "update ", "select "].map(memchr::memmem::Finder::new)
        });
    let text = syntax::text(func, src).as_bytes();
    if !SQL.iter().any(|w| w.find(text).is_some()) {
        return out;
    }
    for string in syntax::descendants(func, &[kinds::STRING]) {
        let whole = string
            .parent()
            .filter(|p| p.kind() == "concatenated_string")
            .unwrap_or(string);
        let text = syntax::text(whole, src);
        if (syntax::code_contains_lowercase(text, "update ")
            || syntax::code_contains_lowercase(text, "select "))
            && !out.iter().any(|n| n.id() == whole.id())
        {
            out.push(whole);
        }
    }
    out
}

/// What an SQL `UPDATE` sets and what its `WHERE` names.
fn sql_update(text: &str) -> Option<(Vec<String>, Vec<String>)> {
    let upper = text.to_ascii_uppercase();
    let at = upper.find("UPDATE ")?;
    let set = at + upper[at..].find(" SET ")? + " SET ".len();
    let condition = set + upper[set..].find("WHERE")?;
    let end = upper[condition..]
        .find("RETURNING")
        .map_or(text.len(), |e| condition + e);
    let mut assigned = Vec::new();
    let mut depth = 0i32;
    let mut part = String::new();
    for c in text[set..condition].chars().chain(std::iter::once(',')) {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                if let Some((name, _)) = part.split_once('=') {
                    let name = name.trim().trim_matches('"');
                    let name = name.rsplit('.').next().unwrap_or(name);
                    assigned.push(name.to_ascii_lowercase());
                }
                part.clear();
                continue;
            }
            _ => {}
        }
        part.push(c);
    }
    Some((assigned, sql_words(&text[condition..end])))
}

/// The lower-cased words of an SQL clause.
fn sql_words(clause: &str) -> Vec<String> {
    clause
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// The first write of `field` in `func` after byte `after`, to `record` when one is given:
/// an assignment to it (`invoice.status = PAID`, `wallet.balance -= amount`, `row["status"] =
/// ...`), or an update that sets it (`Instalment.update(status=...)`, `UPDATE payouts SET
/// status = ?`).
fn write_after<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    src: &str,
    field: &str,
    record: Option<(&str, &[String])>,
    after: usize,
) -> Option<Node<'t>> {
    let of_record = |code: &str| {
        record.is_none_or(|(name, tables)| {
            records_named(code)
                .iter()
                .any(|w| same_record(w, name) || tables.iter().any(|t| same_record(w, t)))
        })
    };
    let assigned = [kinds::ASSIGNMENT, kinds::AUGMENTED_ASSIGNMENT]
        .iter()
        .flat_map(|kind| idx.within(func, kind).iter().copied())
        .filter(|a| {
            a.child_by_field_name("left").is_some_and(|left| {
                left.kind() != kinds::IDENTIFIER
                    && field_of(left, src) == field
                    && record.is_none_or(|(r, _)| {
                        left.child_by_field_name("object")
                            .or_else(|| left.child_by_field_name("value"))
                            .is_some_and(|o| syntax::text(o, src) == r)
                    })
            })
        });
    let updated = idx
        .within(func, kinds::CALL)
        .iter()
        .copied()
        .filter(|c| idx.callee_name(*c, src) == "update")
        .map(chain_top)
        .filter(|top| {
            chain_fields(idx, *top, src).0.iter().any(|f| f == field)
                && of_record(syntax::text(*top, src))
        });
    let sql = sql_strings(func, src).into_iter().filter(|s| {
        let text = syntax::text(*s, src);
        sql_update(text).is_some_and(|(set, _)| set.iter().any(|f| f == field)) && of_record(text)
    });
    assigned
        .chain(updated)
        .chain(sql)
        .filter(|n| n.start_byte() >= after)
        .min_by_key(|n| n.start_byte())
}

/// The first test of `field` in `func` before byte `before`: an `if` on it that leaves
/// (`if invoice.status != OPEN: return False`), or a read that picks rows by it
/// (`select(Ticket).where(Ticket.status == ISSUED)`, `SELECT ... WHERE status = 'open'`).
fn tested_before<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    src: &str,
    field: &str,
    before: usize,
) -> Option<Node<'t>> {
    let guards = leaving_tests(idx, func, src)
        .into_iter()
        .map(|(_, condition)| condition)
        .filter(|c| fields_named(idx, *c, src).iter().any(|f| f == field));
    let reads = idx.within(func, kinds::CALL).iter().copied().filter(|c| {
        matches!(
            idx.callee_name(*c, src),
            "filter" | "where" | "filter_by" | "get"
        ) && !chain_calls(chain_top(*c))
            .iter()
            .any(|link| syntax::callee_name(*link, src) == "update")
            && c.child_by_field_name("arguments")
                .is_some_and(|args| fields_named(idx, args, src).iter().any(|f| f == field))
    });
    let selects = sql_strings(func, src).into_iter().filter(|s| {
        let text = syntax::text(*s, src);
        let upper = text.to_ascii_uppercase();
        sql_update(text).is_none()
            && upper.contains("SELECT ")
            && upper
                .find("WHERE")
                .is_some_and(|w| sql_words(&text[w..]).iter().any(|f| f == field))
    });
    guards
        .chain(reads)
        .chain(selects)
        .filter(|n| n.start_byte() < before)
        .min_by_key(|n| n.start_byte())
}
