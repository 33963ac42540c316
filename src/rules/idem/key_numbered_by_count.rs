//! IDEM011 key-numbered-by-count: the idempotency key a payment carries is numbered by a count
//! of the records that payment adds to (`f"refund:{order.id}:{len(refunds) + 1}"`,
//! `Payout.objects.filter(...).count()`). The count moves as soon as the first payment is
//! recorded, so a redelivered event, a rerun job or a retried request counts one more and sends
//! a key the provider has never seen: a second refund, a second payout.
//!
//! Left alone: a count of anything that is not money moved (lines, items, attempts of a retry
//! loop: IDEM004's), a key taken from an event's or a record's own id, and a count kept on a
//! record (`refund.sequence`) rather than worked out at the call.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::review::Severity;
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

use super::key_made_per_attempt::key_sites;
use crate::rules::err::timeout_read_as_failure::catches_timeout;

pub(crate) static RULE: Rule = Rule {
    id: "IDEM011",
    doc: include_str!("../../../rules/idem/IDEM011.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// How many assignments back a key is followed to its count (`key = f"...{n}"`, `n =
/// len(done) + 1`).
const DEPTH: usize = 2;

/// Words of a count or a counter: `len(`, `.count(`, `attempts`, `submissions`, `updated_at`.
const COUNT_WORDS: &[&str] = &[
    "len(",
    "count",
    "attempt",
    "retr",
    "tries",
    "updated",
    "modified",
    "submissions",
    "sends",
];

/// Every finding is a count (`len(`, `.count(`, `count_documents`, a field counting attempts)
/// in the key of a payment, in code that names an idempotency key or pays.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(COUNT_WORDS)
        // A key site names an idempotency key, or is a reference handed to a payment.
        && (s.facts.functions.iter().any(|f| f.mentions_idempotency)
            || (s.facts.payment_module || s.facts.functions.iter().any(|f| f.payment))
                && s.mentions(&["reference=", "ref=", "_key=", "_id="]))
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let mut reported: Vec<usize> = Vec::new();
    // The counts a key site was found numbered by: a helper that makes the key of the same
    // count is not told of again.
    let mut counts: Vec<String> = Vec::new();
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        // A count or a counter in the function's text before its key sites are read.
        let text = syntax::text(func, src);
        if !COUNT_WORDS
            .iter()
            .any(|w| memchr::memmem::find(text.as_bytes(), w.as_bytes()).is_some())
        {
            continue;
        }
        for site in key_sites(idx, func, src, Some((cx.change, cx.side))) {
            // A nested function's sites are its own.
            if idx
                .enclosing(site.at, kinds::FUNCTION_DEFINITION)
                .is_none_or(|f| f.id() != func.id())
            {
                continue;
            }
            let Some((count, counted)) = counted_in(idx, func, site.value, src, DEPTH) else {
                // A key numbered by an attempt count: moved on by every run, or by a handler of
                // a failure that may have gone through. A second charge for one debt, as a key
                // made per attempt is.
                let advanced = advanced_each_run(idx, func, site.value, src)
                    .map(|(counter, step, field)| (counter, step, field, "each_run"))
                    .or_else(|| {
                        numbered_in_helper(idx, site.value, src)
                            .or_else(|| counted_from_handed_record(idx, func, site.value, src))
                            .map(|(counter, (step, stamped), field)| {
                                // A step of the function's own (`payment.submissions += 1`).
                                let how = if stamped {
                                    "stamped"
                                } else if step.kind() == kinds::AUGMENTED_ASSIGNMENT {
                                    "each_run"
                                } else {
                                    "helper"
                                };
                                (counter, step, field, how)
                            })
                    })
                    .or_else(|| {
                        advanced_on_doubt(idx, func, site.value, src)
                            .map(|(counter, clause, field)| (counter, clause, field, "advanced"))
                    })
                    .or_else(|| {
                        advanced_elsewhere(idx, func, site.value, src)
                            .map(|(counter, step, field)| (counter, step, field, "helper"))
                    })
                    .or_else(|| {
                        saved_stamp(idx, func, site.value, src)
                            .map(|(counter, write, field)| (counter, write, field, "saved"))
                    })
                    .or_else(|| {
                        claimed_in_another_module(cx, idx, func, site.value, src).map(
                            |(counter, claim, field)| (counter, claim, field, "claimed_elsewhere"),
                        )
                    })
                    .or_else(|| {
                        stored_key_numbered(site.value, src)
                            .filter(|(_, _, field)| stepped_but_on_a_refusal(cx, field))
                            .map(|(counter, key, field)| (counter, key, field, "stored"))
                    });
                if let Some((counter, at, field, how)) = advanced
                    && !reported.contains(&at.id())
                {
                    reported.push(at.id());
                    counts.push(field.clone());
                    let function = facts::qualname(func, idx, src);
                    let place = (how == "claimed_elsewhere")
                        .then(|| stepped_at(cx, claim_name(at, src), &field))
                        .flatten()
                        .unwrap_or_default();
                    let finding = cx
                        .report(&RULE, site.value)
                        .arg("key", site.name.clone())
                        .arg("count", crate::rules::pay::first_line(counter, src))
                        .arg("field", field)
                        .note(how)
                        .severity(Severity::Blocker);
                    if how == "stored" {
                        finding.arg("stored", syntax::normalized(at, src));
                    } else if how == "claimed_elsewhere" {
                        let claim = if at.kind() == kinds::CALL {
                            syntax::callee(at, src)
                        } else {
                            syntax::text(at, src)
                        };
                        finding.arg("claim", claim.to_string()).arg("place", place);
                    } else if matches!(how, "each_run" | "helper" | "stamped" | "saved") {
                        finding.arg("step_line", syntax::lines(at).0.to_string());
                    } else {
                        let caught = syntax::except_types(at).first().map_or_else(
                            || "everything".to_string(),
                            |t| syntax::normalized(*t, src),
                        );
                        finding
                            .arg("caught", caught)
                            .arg("handler_line", syntax::lines(at).0.to_string());
                    }
                    finding.function = function;
                }
                continue;
            };
            if reported.contains(&count.id()) {
                continue;
            }
            reported.push(count.id());
            let function = facts::qualname(func, idx, src);
            let finding = cx
                .report(&RULE, site.value)
                .arg("key", site.name.clone())
                .arg("count", crate::rules::pay::first_line(count, src))
                .arg("counted", counted);
            finding.function = function;
        }
    }
    numbered_by_the_record(cx, idx, src, &counts);
}

/// The count that numbers `value`: a `len(...)` or `.count()` of records of money moved, in
/// `value` or in what a name it reads was last set to (up to `depth` assignments back); with
/// the word that says what is counted.
fn counted_in<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    value: Node<'t>,
    src: &str,
    depth: usize,
) -> Option<(Node<'t>, &'static str)> {
    let calls = std::iter::once(value)
        .filter(|n| n.kind() == kinds::CALL)
        .chain(idx.within(value, kinds::CALL).iter().copied());
    for call in calls {
        if let Some(counted) = count_of_money(idx, func, call, value, src) {
            // `len(earlier)` is shown as it is; a query's `.count()` with the query it ends.
            let shown = if idx.callee_name(call, src) == "len" {
                call
            } else {
                value
            };
            return Some((shown, counted));
        }
    }
    if depth == 0 {
        return None;
    }
    let mut seen: Vec<&str> = Vec::new();
    for name in names_read(syntax::text(value, src)) {
        if seen.contains(&name) {
            continue;
        }
        seen.push(name);
        let Some(set) = idx.assigned_before(Some(func), name, value.start_byte(), src) else {
            continue;
        };
        if let Some(found) = counted_in(idx, func, set, src, depth - 1) {
            return Some(found);
        }
    }
    None
}

/// What `call` counts when it counts records of money moved: `len(refunds)` (or `len(x)` of a
/// name last set from something that says so), `Refund.objects.filter(...).count()`,
/// `db.payouts.count_documents(...)`, `select(func.count()).select_from(Refund)` in `whole`.
fn count_of_money(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    call: Node<'_>,
    whole: Node<'_>,
    src: &str,
) -> Option<&'static str> {
    let name = idx.callee_name(call, src);
    if name == "len" {
        let arg = *syntax::positional_args(call).first()?;
        // `refunds: list[Refund] = []` filled by this run's loop: a position in what this run
        // builds, the same on a rerun, not a count of what was made before.
        if arg.kind() == kinds::IDENTIFIER
            && idx
                .assigned_before(Some(func), syntax::text(arg, src), call.start_byte(), src)
                .is_some_and(|set| matches!(syntax::text(set, src), "[]" | "list()"))
        {
            return None;
        }
        if let Some(counted) = money_records(syntax::text(arg, src)) {
            return Some(counted);
        }
        if arg.kind() != kinds::IDENTIFIER {
            return None;
        }
        let set =
            idx.assigned_before(Some(func), syntax::text(arg, src), call.start_byte(), src)?;
        return money_records(syntax::text(set, src));
    }
    if matches!(
        name,
        "count" | "count_documents" | "estimated_document_count"
    ) {
        // The query the count ends: from the outermost expression around it in the key.
        return money_records(syntax::text(whole, src));
    }
    None
}

/// The records of money moved a text names (`previous_refunds`, `Payout.objects`,
/// `db.transfers`, `_refunds_for(...)`): moves that are made again and again for one parent
/// (refunds and payouts of an order, captures of a hold), where a count looks like a sequence
/// number.
fn money_records(text: &str) -> Option<&'static str> {
    syntax::name_words(text)
        .iter()
        .find_map(|w| match w.trim_end_matches('s') {
            "refund" => Some("refunds"),
            "payout" => Some("payouts"),
            "transfer" => Some("transfers"),
            "capture" => Some("captures"),
            "disbursement" => Some("disbursements"),
            "withdrawal" => Some("withdrawals"),
            "reversal" => Some("reversals"),
            _ => None,
        })
}

/// `attempt = collection.retry_count + 1` numbering the key, and a handler of a failure that may
/// have gone through (a timeout, the client's whole family of errors) that stores the advanced
/// count (`update(retry_count=attempt)`, `collection.retry_count += 1`): the next run numbers a
/// new key for a payment the provider may have made. The counter read, the handler and the
/// counter's field.
fn advanced_on_doubt<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    value: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, Node<'t>, String)> {
    let mut values = vec![value];
    for name in names_read(syntax::text(value, src)) {
        if let Some(set) = idx.assigned_before(Some(func), name, value.start_byte(), src) {
            values.push(set);
        }
    }
    let handlers: Vec<Node<'t>> = idx
        .within(func, kinds::EXCEPT_CLAUSE)
        .iter()
        .copied()
        .filter(|c| catches_timeout(*c, src).is_some())
        .collect();
    if handlers.is_empty() {
        return None;
    }
    for v in values {
        let reads = std::iter::once(v)
            .filter(|n| n.kind() == kinds::ATTRIBUTE)
            .chain(idx.within(v, kinds::ATTRIBUTE).iter().copied());
        for read in reads {
            let Some(field) = read.field("attribute").map(|a| syntax::text(a, src)) else {
                continue;
            };
            if !counts_attempts(field) {
                continue;
            }
            let stores = |clause: &Node<'t>| {
                syntax::except_body(*clause).is_some_and(|b| {
                    let body = syntax::text(b, src);
                    syntax::writes_field(body, field)
                })
            };
            if let Some(clause) = handlers.iter().copied().find(stores) {
                return Some((read, clause, field.to_string()));
            }
        }
    }
    None
}

/// `refund.attempts` numbering the key, moved on by the function itself before it sends, on
/// every run (`refund.attempts += 1`, not under a test of how the last try ended): a run after
/// a timeout numbers a new key for a payment the provider may have made. The counter read, the
/// step and the counter's field.
fn advanced_each_run<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    value: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, Node<'t>, String)> {
    let reads = std::iter::once(value)
        .filter(|n| n.kind() == kinds::ATTRIBUTE)
        .chain(idx.within(value, kinds::ATTRIBUTE).iter().copied());
    for read in reads {
        let Some(field) = read.field("attribute").map(|a| syntax::text(a, src)) else {
            continue;
        };
        if !counts_attempts(field)
            || read
                .field("object")
                .is_none_or(|o| o.kind() != kinds::IDENTIFIER)
        {
            continue;
        }
        let counter = syntax::text(read, src);
        let step = idx
            .within(func, kinds::AUGMENTED_ASSIGNMENT)
            .iter()
            .copied()
            .find(|a| {
                a.end_byte() <= value.start_byte()
                    && a.field("left")
                        .is_some_and(|l| syntax::text(l, src) == counter)
                    && syntax::text(*a, src).contains("+=")
                    && !moved_for_a_reason(idx, func, *a, src)
            });
        if let Some(step) = step {
            return Some((read, step, field.to_string()));
        }
    }
    claimed_with_a_count(idx, func, value, src)
        .or_else(|| stored_through_a_local(idx, func, value, src))
}

/// `f"{refund.idempotency_key}-{attempt}"` after `attempt = refund.attempts + 1`, where the
/// function stores that count before it sends (`self._set(refund.id, attempts=attempt)`,
/// `refund.attempts = attempt`), not under a test: every run numbers a new key. The count's
/// read, the store and the field.
fn stored_through_a_local<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    value: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, Node<'t>, String)> {
    names_read(syntax::text(value, src))
        .into_iter()
        .find_map(|local| {
            let set = idx.assigned_before(Some(func), local, value.start_byte(), src)?;
            let text = syntax::text(set, src);
            if !(text.contains("+ 1") || text.contains("+1")) {
                return None;
            }
            let read = std::iter::once(set)
                .chain(idx.within(set, kinds::ATTRIBUTE).iter().copied())
                .filter(|n| n.kind() == kinds::ATTRIBUTE)
                .find(|r| {
                    r.field("attribute")
                        .is_some_and(|a| counts_attempts(syntax::text(a, src)))
                })?;
            let field = syntax::text(read.field("attribute")?, src);
            let keyword = format!("{field}={local}");
            let assigned = format!(
                "{}.{field} = {local}",
                syntax::text(read.field("object")?, src)
            );
            let store = idx
                .within(func, kinds::CALL)
                .iter()
                .chain(idx.within(func, kinds::ASSIGNMENT))
                .copied()
                .filter(|n| n.start_byte() > set.end_byte() && n.end_byte() <= value.start_byte())
                .find(|n| {
                    let text = syntax::text(*n, src);
                    let compact: String = text.split_whitespace().collect();
                    // Or stepped in the store itself (`.update(submit_attempts=F("submit_attempts")
                    // + 1)`), to the same count.
                    (n.kind() == kinds::CALL
                        && (compact.contains(&keyword)
                            || syntax::keyword_arg(*n, field, src).is_some()
                                && increments(text, field))
                        || n.kind() == kinds::ASSIGNMENT && text == assigned)
                        && !moved_for_a_reason(idx, func, *n, src)
                })?;
            Some((read, store, field.to_string()))
        })
}

/// `settlement.attempts` in the key, where another function of the file moves that field on
/// for every try (`settlement.attempts += 1` in the `_resume` that reopens it), not only in a
/// branch: every try sends a new key. The counter read, the step and the field.
fn advanced_elsewhere<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    value: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, Node<'t>, String)> {
    syntax::descendants(value, &[kinds::ATTRIBUTE])
        .into_iter()
        .find_map(|read| {
            let field = syntax::text(read.field("attribute")?, src);
            if !counts_attempts(field)
                || read
                    .field("object")
                    .is_none_or(|o| o.kind() != kinds::IDENTIFIER)
            {
                return None;
            }
            let steps = |a: &Node<'_>| {
                a.field("left").is_some_and(|left| {
                    left.kind() == kinds::ATTRIBUTE
                        && left
                            .field("attribute")
                            .is_some_and(|f| syntax::text(f, src) == field)
                }) && syntax::text(*a, src).contains("+=")
            };
            // The function moves it on itself, in a branch (after a refusal): that is its rule.
            if idx
                .within(func, kinds::AUGMENTED_ASSIGNMENT)
                .iter()
                .any(steps)
            {
                return None;
            }
            let step = idx
                .all(kinds::AUGMENTED_ASSIGNMENT)
                .iter()
                .copied()
                .find(|a| {
                    let Some(left) = a.field("left") else {
                        return false;
                    };
                    let Some(mover) = idx.enclosing(*a, kinds::FUNCTION_DEFINITION) else {
                        return false;
                    };
                    // `_record_decline`: moved on for a refusal.
                    let for_a_refusal = syntax::name_words(syntax::function_name(mover, src))
                        .iter()
                        .any(|w| {
                            ["declin", "refus", "reject", "fail", "error"]
                                .iter()
                                .any(|r| w.starts_with(r))
                        });
                    mover.id() != func.id()
                        && !for_a_refusal
                        && left.kind() == kinds::ATTRIBUTE
                        && left
                            .field("attribute")
                            .is_some_and(|f| syntax::text(f, src) == field)
                        && syntax::text(*a, src).contains("+=")
                        && !moved_for_a_reason(idx, mover, *a, src)
                })?;
            Some((read, step, field.to_string()))
        })
}

/// `attempt.updated_at` in the key, where the function writes that record before the key is
/// made (`attempt.save(update_fields=["status", "updated_at"])`, `attempt.updated_at = now`):
/// the field is the time of the record's last write, and every run, the one after a timeout
/// among them, moves it. The stamp read, the write and the field.
fn saved_stamp<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    value: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, Node<'t>, String)> {
    syntax::descendants(value, &[kinds::ATTRIBUTE])
        .into_iter()
        .find_map(|read| {
            let field = syntax::text(read.field("attribute")?, src);
            let record = read
                .field("object")
                .filter(|o| o.kind() == kinds::IDENTIFIER)?;
            let record = syntax::text(record, src);
            if !last_written(field) {
                return None;
            }
            let before = |n: &Node<'_>| n.end_byte() <= value.start_byte();
            let saved = idx
                .within(func, kinds::CALL)
                .iter()
                .copied()
                .filter(before)
                .find(|c| {
                    syntax::callee_name(*c, src) == "save"
                        && syntax::receiver(*c).is_some_and(|r| syntax::text(r, src) == record)
                });
            let stamped = || {
                idx.within(func, kinds::ASSIGNMENT)
                    .iter()
                    .copied()
                    .filter(before)
                    .find(|a| {
                        a.field("left")
                            .is_some_and(|l| syntax::text(l, src) == format!("{record}.{field}"))
                    })
            };
            let write = saved.or_else(stamped)?;
            Some((read, write, field.to_string()))
        })
}

/// The fields a function's text moves on by one, each with its line (`first` is the text's):
/// `submit_attempts = p.submit_attempts + 1`, `attempts=Movement.attempts + 1`,
/// `attempts=F("attempts") + 1`, `dispute.accept_attempts += 1`. A field set to itself plus one,
/// counted or not.
pub(crate) fn stepped_fields(text: &str, first: u32) -> crate::rules::facts::Steps {
    // Asked of every function by the facts pass: most have no `+`, and the finders are built
    // once.
    static STEPS: std::sync::LazyLock<[memchr::memmem::Finder<'static>; 3]> =
        std::sync::LazyLock::new(|| ["+ 1", "+1", "+= 1"].map(memchr::memmem::Finder::new));
    let mut out: Vec<(Box<str>, u32)> = Vec::new();
    if memchr::memchr(b'+', text.as_bytes()).is_none() {
        return out.into();
    }
    for at in STEPS
        .iter()
        .flat_map(|finder| finder.find_iter(text.as_bytes()))
    {
        let before = text[..at].trim_end().trim_end_matches([')', '"', '\'']);
        let field: String = before
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if field.is_empty() || field.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        // Set to itself: `field = ...field + 1` or `field=...` earlier on the line.
        let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let line = &text[line_start..at];
        // `dispute.accept_attempts += 1`.
        let augmented = text[at..].starts_with("+=");
        let assigned = augmented
            || [format!("{field} ="), format!("{field}=")].iter().any(|a| {
                line.find(a.as_str())
                    .is_some_and(|i| i + field.len() < line.len() - field.len())
            });
        // Every place, not only the first: a step taken after a refusal (`unsettled_steps`)
        // may stand beside one taken on every send.
        let number = first + text[..at].matches('\n').count() as u32;
        if assigned && !out.iter().any(|(f, l)| **f == *field && *l == number) {
            out.push((field.into(), number));
        }
    }
    out.into()
}

/// The steps of `func` but those that number a new record made only once the last one is
/// settled (`Attempt.objects.create(attempt_number=last.attempt_number + 1, ...)` after `if
/// last.state == Attempt.State.IN_FLIGHT: return last`): a claim's caller resends the record in
/// flight under its own number.
pub(crate) fn unsettled_steps(
    func: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &str,
    steps: &crate::rules::facts::Steps,
) -> crate::rules::facts::Steps {
    let settled = |(field, line): &(Box<str>, u32)| {
        idx.within(func, kinds::CALL).iter().any(|&call| {
            let (first, last) = syntax::lines(call);
            (first..=last).contains(line)
                && syntax::keyword_arg(call, field, src).is_some()
                && made_once_the_last_is_settled(idx, call, src)
        })
    };
    let kept: Vec<(Box<str>, u32)> = steps
        .iter()
        .filter(|s| !settled(s) && !after_a_refusal(func, idx, s.1, src))
        .cloned()
        .collect();
    kept.into()
}

/// Whether `line` sits in a branch taken only once the provider said no (`elif result.outcome
/// is ChargeOutcome.DECLINED:`, `if status == "failed":`): the count numbers the next payment,
/// which is a new one, not the resend of this one.
fn after_a_refusal(func: Node<'_>, idx: &NodeIndex<'_>, line: u32, src: &str) -> bool {
    let refusal = |condition: Node<'_>| {
        let text = syntax::text(condition, src);
        !text.contains("not ")
            && !text.contains("!=")
            && syntax::name_words(text).iter().any(|w| {
                matches!(
                    w.as_str(),
                    "declined" | "decline" | "refused" | "rejected" | "failed" | "failure"
                )
            })
    };
    let holds = |block: Option<Node<'_>>| {
        block.is_some_and(|b| {
            let (first, last) = syntax::lines(b);
            (first..=last).contains(&line)
        })
    };
    idx.within(func, kinds::IF_STATEMENT).iter().any(|&branch| {
        branch
            .field("condition")
            .is_some_and(|c| refusal(c) && holds(branch.field("consequence")))
            || syntax::elif_clauses(branch).into_iter().any(|e| {
                e.field("condition")
                    .is_some_and(|c| refusal(c) && holds(e.field("consequence")))
            })
    })
}

/// The name of a claim: the function a call calls, or the one handed to a runner
/// (`claim_batch` of `db.claim_batch`).
fn claim_name<'s>(claim: Node<'_>, src: &'s str) -> &'s str {
    if claim.kind() == kinds::CALL {
        syntax::callee_name(claim, src)
    } else {
        let text = syntax::text(claim, src);
        text.rsplit('.').next().unwrap_or(text)
    }
}

/// `payout["submit_attempts"]` in the key, where `payout` is what a claim of another module
/// returned (`await self._repo.claim_next_submission(...)`) and that claim moves the field on by
/// one (`submit_attempts = p.submit_attempts + 1` in its SQL): every claim, the one after a
/// timeout among them, numbers a new key. The counter read, the claim's call, and the field
/// with the claim's file and line.
fn claimed_in_another_module<'t>(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    value: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, Node<'t>, String)> {
    syntax::descendants(value, &[kinds::ATTRIBUTE, kinds::SUBSCRIPT])
        .into_iter()
        .find_map(|read| {
            let (record, field) = object_and_field(read, src)?;
            if record.kind() != kinds::IDENTIFIER || !counts_attempts(field) {
                return None;
            }
            let record = syntax::text(record, src);
            let bound = |scope: Node<'t>, name: &str, before: usize| {
                idx.assigned_before(Some(scope), name, before, src)
                    .or_else(|| walrus_value(idx, scope, name, src))
                    .map(crate::rules::idem::strip_await)
            };
            // Or a loop's variable over what the claim returned (`claimed = await
            // repo.claim_due(...)`, `for capture in claimed: await self._send(capture)`).
            let claimed_by = |scope: Node<'t>, name: &str, before: usize| {
                bound(scope, name, before)
                    .or_else(|| {
                        let iterated = looped_over(idx, scope, name, before, src)?;
                        match iterated.kind() {
                            kinds::IDENTIFIER => {
                                bound(scope, syntax::text(iterated, src), iterated.start_byte())
                            }
                            _ => Some(crate::rules::idem::strip_await(iterated)),
                        }
                    })
                    .filter(|v| v.kind() == kinds::CALL)
            };
            // Claimed here, or by the caller that hands the row in (`payout = await
            // repo.claim_next(...)`, then `await self._submit(payout, report)`), or claimed by
            // its id before the send (`queries.claim_for_submission(conn, inv.id, now)`, which
            // moves `attempts` on): the count read is one behind the row's, and moves with it.
            let claim = claimed_by(func, record, read.start_byte())
                .or_else(|| {
                    idx.within(func, kinds::CALL).iter().copied().find(|call| {
                        call.end_byte() <= read.start_byte()
                            && syntax::positional_args(*call).iter().any(|a| {
                                let a = syntax::text(*a, src);
                                a == format!("{record}.id") || a == format!("{record}_id")
                            })
                            && stepped_at(cx, syntax::callee_name(*call, src), field).is_some()
                    })
                })
                .or_else(|| {
                    crate::rules::pay::parameters(func, src)
                        .iter()
                        .any(|p| p == record)
                        .then(|| {
                            let name = syntax::function_name(func, src);
                            idx.all(kinds::CALL).iter().find_map(|call| {
                                if syntax::callee_name(*call, src) != name {
                                    return None;
                                }
                                let caller = idx.enclosing(*call, kinds::FUNCTION_DEFINITION)?;
                                syntax::positional_args(*call)
                                    .into_iter()
                                    .filter(|a| a.kind() == kinds::IDENTIFIER)
                                    .find_map(|a| {
                                        claimed_by(caller, syntax::text(a, src), call.start_byte())
                                    })
                            })
                        })
                        .flatten()
                })?;
            // Or a claim handed to a runner of the project (`await self._db(db.claim_batch,
            // batch_id, now)`): the function handed is the claim.
            let claim = if stepped_at(cx, syntax::callee_name(claim, src), field).is_some() {
                claim
            } else {
                let handed = syntax::positional_args(claim)
                    .into_iter()
                    .next()
                    .filter(|a| matches!(a.kind(), kinds::IDENTIFIER | kinds::ATTRIBUTE))?;
                stepped_at(cx, claim_name(handed, src), field)?;
                handed
            };
            Some((read, claim, field.to_string()))
        })
}

/// The record's stored key numbered by the record's own count of attempts
/// (`f"{refund.idempotency_key}-{refund.attempts}"`, `f"{dispute.accept_request_id}-{dispute.
/// accept_attempts}"`): a key is stored so that every attempt sends it unchanged, and the count
/// it is numbered by is the one thing that differs between two attempts. The count read, the
/// stored key read, and the count's field.
fn stored_key_numbered<'t>(value: Node<'t>, src: &str) -> Option<(Node<'t>, Node<'t>, String)> {
    let reads = syntax::descendants(value, &[kinds::ATTRIBUTE, kinds::SUBSCRIPT]);
    let field_of = |read: Node<'t>| {
        let (record, field) = object_and_field(read, src)?;
        (record.kind() == kinds::IDENTIFIER).then(|| (syntax::text(record, src), field))
    };
    reads.iter().find_map(|&count| {
        let (record, field) = field_of(count)?;
        if !counts_attempts(field) {
            return None;
        }
        let stored = reads.iter().copied().find(|&key| {
            field_of(key).is_some_and(|(r, f)| {
                r == record && f != field && {
                    let words = syntax::name_words(f);
                    super::key_made_per_attempt::names_key(f)
                        || words.iter().any(|w| w == "key")
                        || words.ends_with(&["request".to_string(), "id".to_string()])
                }
            })
        })?;
        Some((count, stored, field.to_string()))
    })
}

/// The key a function named for it makes of its record's count of attempts (`def
/// idempotency_key(self): return f"payout-{self.id}-{self.submit_attempts}"`, a model's
/// property), where a function of the change moves that count on by one for every send.
fn numbered_by_the_record(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, src: &str, told: &[String]) {
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        let name = syntax::function_name(func, src);
        // `idempotency_key(self)`, or a helper named for the key it makes (`capture_key(order,
        // shipment)`) of a record it is handed.
        if !(super::key_made_per_attempt::names_key(name)
            || syntax::name_words(name).last().is_some_and(|w| w == "key"))
        {
            continue;
        }
        let params = crate::rules::pay::parameters(func, src);
        let record_of =
            |record: &str| record == "self" || params.iter().any(|p| p == record && p != "self");
        let found = idx
            .within(func, kinds::RETURN_STATEMENT)
            .iter()
            .filter_map(|r| r.named_child(0))
            .find_map(|value| {
                // What it returns, and what the names it returns were given on the way
                // (`operation = f"capture/{shipment.reference}/{shipment.capture_attempts}"`).
                let given = syntax::descendants(value, &[kinds::IDENTIFIER])
                    .into_iter()
                    .chain((value.kind() == kinds::IDENTIFIER).then_some(value))
                    .filter_map(|n| {
                        idx.assigned_before(
                            Some(func),
                            syntax::text(n, src),
                            value.start_byte(),
                            src,
                        )
                    });
                std::iter::once(value).chain(given).find_map(|made| {
                    syntax::descendants(made, &[kinds::ATTRIBUTE])
                        .into_iter()
                        .find_map(|read| {
                            let (record, field) = object_and_field(read, src)?;
                            (record_of(syntax::text(record, src)) && counts_attempts(field))
                                .then(|| (value, read, field.to_string()))
                        })
                })
            });
        let Some((value, count, field)) = found else {
            continue;
        };
        // A record handed in (not the model's own property) is read where the file may take
        // an attempt in flight back without a step (`_reclaim_stale`, `_resume_unresolved`):
        // then the count numbers new attempts by design.
        let handed = syntax::text(count, src).split('.').next() != Some("self");
        if told.contains(&field) || handed && takes_back_in_flight(idx, src) {
            continue;
        }
        let Some(place) = stepped_on_a_send(cx, &field) else {
            continue;
        };
        let function = facts::qualname(func, idx, src);
        let finding = cx
            .report(&RULE, value)
            .arg("key", name.to_string())
            .arg("count", crate::rules::pay::first_line(count, src))
            .arg("field", field)
            .arg("place", place)
            .note("record_count")
            .severity(Severity::Blocker);
        finding.function = function;
    }
}

/// Whether a function of the file is named for taking back what is in flight or sending a
/// payment anew on purpose: `_reclaim_stale`, `_reclaim_unresolved_attempt`, `resume_pending`,
/// `reissue`.
fn takes_back_in_flight(idx: &NodeIndex<'_>, src: &str) -> bool {
    idx.all(kinds::FUNCTION_DEFINITION).iter().any(|f| {
        syntax::name_words(syntax::function_name(*f, src))
            .iter()
            .any(|w| {
                matches!(
                    w.as_str(),
                    "reclaim" | "resume" | "resend" | "unresolved" | "stale" | "reissue"
                )
            })
    })
}

/// Where a function of the change moves `field` on by one for a send (a claim's SQL, a job
/// that sends again), not one named for what follows a failure (`handle_payment_failed`,
/// `_schedule_retry`, `reopen_after_decline`): a round numbered after the provider said no is a
/// new payment, not a second send of the same one. `path:line`.
fn stepped_on_a_send(cx: &Ctx<'_>, field: &str) -> Option<String> {
    let after_a_failure = |name: &str| {
        crate::rules::err::timeout_read_as_failure::named_for_a_refusal(name)
            || syntax::name_words(name).iter().any(|w| {
                matches!(
                    w.as_str(),
                    "fail" | "failed" | "failure" | "schedule" | "scheduled" | "error" | "bounce"
                    // `_claim_new_attempt`: a new payment by design, which the run after a
                    // timeout does not take (it resends the attempt in flight).
                    | "new"
                )
            })
    };
    cx.change.side(cx.side).find_map(|file| {
        file.functions
            .iter()
            .filter(|f| !file.is_test && !after_a_failure(&f.name))
            .find_map(|f| step_line(f, field))
            .map(|line| format!("{}:{line}", file.path))
    })
}

/// The line where `f` moves `field` on by one (`FunctionFacts::steps`).
fn step_line(f: &facts::FunctionFacts, field: &str) -> Option<u32> {
    f.steps
        .iter()
        .find(|(stepped, _)| **stepped == *field)
        .map(|(_, line)| *line)
}

/// Whether a function of the change moves `field` on by one (a claim's SQL, `dispute.
/// accept_attempts += 1` in a job that sends again), other than one named for a refusal
/// (`reopen_after_decline`): a count moved only once the provider said no numbers a new payment,
/// not a second send of the same one.
fn stepped_but_on_a_refusal(cx: &Ctx<'_>, field: &str) -> bool {
    cx.change.side(cx.side).any(|file| {
        file.functions.iter().any(|f| {
            step_line(f, field).is_some()
                && !crate::rules::err::timeout_read_as_failure::named_for_a_refusal(&f.name)
        })
    })
}

/// Where a function of the change named `name` moves `field` on by one: `path:line`.
fn stepped_at(cx: &Ctx<'_>, name: &str, field: &str) -> Option<String> {
    cx.change
        .functions_named(cx.side, name)
        .find_map(|(file, f)| step_line(f, field).map(|line| format!("{}:{line}", file.path)))
}

/// What the `for` loop of `scope` whose variable is `name`, and that holds `before`, runs over.
fn looped_over<'t>(
    idx: &NodeIndex<'t>,
    scope: Node<'t>,
    name: &str,
    before: usize,
    src: &str,
) -> Option<Node<'t>> {
    idx.within(scope, kinds::FOR_STATEMENT)
        .iter()
        .filter(|l| l.start_byte() < before && before < l.end_byte())
        .filter(|l| {
            l.field("left")
                .is_some_and(|v| syntax::text(v, src) == name)
        })
        .max_by_key(|l| l.start_byte())
        .and_then(|l| l.field("right"))
}

/// What `name` is bound to by `:=` in a loop's or an `if`'s test of `scope` (`while (payout
/// := await repo.claim_next()) is not None:`).
fn walrus_value<'t>(
    idx: &NodeIndex<'t>,
    scope: Node<'t>,
    name: &str,
    src: &str,
) -> Option<Node<'t>> {
    idx.within(scope, kinds::WHILE_STATEMENT)
        .iter()
        .chain(idx.within(scope, kinds::IF_STATEMENT))
        .filter_map(|s| s.field("condition"))
        .find_map(|condition| {
            syntax::descendants(condition, &[kinds::NAMED_EXPRESSION])
                .into_iter()
                .find(|n| {
                    n.field("name")
                        .is_some_and(|b| syntax::text(b, src) == name)
                })
                .and_then(|n| n.field("value"))
        })
}

/// The record and the field a read names: `refund` and `attempts` of `refund.attempts` or of
/// `refund["attempts"]`.
fn object_and_field<'t, 's>(read: Node<'t>, src: &'s str) -> Option<(Node<'t>, &'s str)> {
    match read.kind() {
        kinds::ATTRIBUTE => Some((
            read.field("object")?,
            syntax::text(read.field("attribute")?, src),
        )),
        kinds::SUBSCRIPT => Some((
            read.field("value")?,
            syntax::string_value(read.field("subscript")?, src)?,
        )),
        _ => None,
    }
}

/// A field that holds when its record was last written: `updated_at`, `modified`,
/// `last_modified`.
pub(crate) fn last_written(field: &str) -> bool {
    matches!(
        field,
        "updated_at"
            | "updated_on"
            | "updated"
            | "modified_at"
            | "modified_on"
            | "modified"
            | "last_modified"
            | "last_modified_at"
            | "last_updated"
            | "last_updated_at"
            | "date_modified"
            | "changed_at"
    )
}

/// `refund["attempts"]` (or `.attempts`) of a row the function claimed with a query that moves
/// the count on (`UPDATE ... SET attempts = r.attempts + 1 ... RETURNING r.attempts`,
/// `.values(attempts=table.c.attempts + 1)`): every claim, the retry after a timeout among
/// them, numbers a new key. The counter read, the claim and the field.
fn claimed_with_a_count<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    value: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, Node<'t>, String)> {
    let fields = syntax::descendants(value, &[kinds::ATTRIBUTE, kinds::SUBSCRIPT])
        .into_iter()
        .filter_map(|read| {
            let (object, field) = object_and_field(read, src)?;
            (object.kind() == kinds::IDENTIFIER && counts_attempts(field))
                .then(|| (read, syntax::text(object, src), field))
        });
    for (read, record, field) in fields {
        if let Some(set) = idx.assigned_before(Some(func), record, value.start_byte(), src) {
            let claim = crate::rules::idem::strip_await(set);
            if claim.kind() == kinds::CALL
                && increments(syntax::text(claim, src), field)
                && !claim_from_a_fresh_state(idx, claim, src)
            {
                return Some((read, claim, field.to_string()));
            }
        }
        // Or moved on by an update of the row before the key is made, on every run
        // (`Refund.objects.filter(pk=refund.pk).update(attempts=F("attempts") + 1)`).
        let step = idx.within(func, kinds::CALL).iter().copied().find(|c| {
            c.end_byte() <= value.start_byte()
                && matches!(syntax::callee_name(*c, src), "update" | "values")
                && increments(syntax::text(*c, src), field)
                && !claim_from_a_fresh_state(idx, *c, src)
                && !moved_for_a_reason(idx, func, *c, src)
        });
        if let Some(step) = step {
            return Some((read, step, field.to_string()));
        }
    }
    None
}

/// States a row is claimed from before any request was sent for this attempt: a claim only
/// from these moves the count once per attempt, and a lost answer leaves the row in another
/// state that no such claim takes again (`update(Invoice).where(Invoice.status == "open")`).
const FRESH_STATES: &[&str] = &[
    "open",
    "new",
    "due",
    "scheduled",
    "created",
    "draft",
    "unpaid",
    "awaiting_payment",
    // After a definite refusal: the next attempt is a new payment, under a key of its own.
    "failed",
    "declined",
    "refused",
    "rejected",
    "uncollectible",
    "past_due",
    // Stripe's: the attempt ended waiting for the customer, nothing charged.
    "requires_action",
    "requires_payment_method",
];

/// Whether a claim takes rows only from fresh states: by its condition
/// (`claimed_from_a_fresh_state`), or, for a helper of the project, by the states it is handed
/// to move from (`_transition(dispute, (DisputeStatus.OPEN,), DisputeStatus.CONTESTING,
/// contest_attempts=Dispute.contest_attempts + 1)`, `from_statuses=("open",)`).
/// `Payment(invoice=invoice, attempt_number=previous.attempt_number + 1, ...)` in a function
/// that first turns away a previous record still in flight (`if previous.status not in
/// UNSUCCESSFUL: raise CollectionConflict(...)`): the count numbers a new record, made only once
/// the last one is settled, and each record keeps its number, and so its key, for every resend.
fn made_once_the_last_is_settled(idx: &NodeIndex<'_>, step: Node<'_>, src: &str) -> bool {
    let class = syntax::callee_name(step, src);
    let new_record = class.starts_with(|c: char| c.is_ascii_uppercase())
        || class == "create" && syntax::callee(step, src).contains(".objects.");
    if !new_record {
        return false;
    }
    let Some(func) = idx.enclosing(step, kinds::FUNCTION_DEFINITION) else {
        return false;
    };
    idx.within(func, kinds::IF_STATEMENT).iter().any(|&branch| {
        branch.end_byte() <= step.start_byte()
            && branch.field("condition").is_some_and(|c| {
                let text = syntax::text(c, src);
                (text.contains("status") || text.contains("state"))
                    && (text.contains(" in ") || text.contains("=="))
            })
            && branch
                .field("consequence")
                .is_some_and(|b| !syntax::block_falls_through(b, src))
    })
}

fn claim_from_a_fresh_state(idx: &NodeIndex<'_>, claim: Node<'_>, src: &str) -> bool {
    if claimed_from_a_fresh_state(syntax::text(claim, src)) || fresh_by_parameter(idx, claim, src) {
        return true;
    }
    // `Invoice.status.in_(NEW_ATTEMPT_FROM)` with `NEW_ATTEMPT_FROM = (Invoice.OPEN,
    // Invoice.FAILED)` at module level: the states the constant lists.
    let by_constant = idx.within(claim, kinds::CALL).iter().any(|c| {
        syntax::callee_name(*c, src) == "in_"
            && syntax::receiver(*c).is_some_and(|r| {
                let r = syntax::text(r, src);
                r.ends_with("status") || r.ends_with("state")
            })
            && matches!(syntax::positional_args(*c)[..], [arg] if arg.kind() == kinds::IDENTIFIER
            && crate::rules::retry::eval::module_constant(idx, syntax::text(arg, src), src)
                .filter(|t| matches!(t.kind(), kinds::TUPLE | kinds::LIST | kinds::SET))
                .is_some_and(|t| {
                    let states = crate::python::named_children(t);
                    !states.is_empty()
                        && states.iter().all(|s| {
                            constant_state(*s, src)
                                .is_some_and(|st| fresh_state(&st.to_ascii_lowercase()))
                        })
                }))
    });
    if by_constant {
        return true;
    }
    if claim.kind() != kinds::CALL {
        return false;
    }
    let from_keyword = syntax::keyword_args(claim, src)
        .into_iter()
        .find(|(name, _)| {
            let words = syntax::name_words(name);
            words
                .first()
                .is_some_and(|w| w == "from" || w == "expected")
                || words
                    .last()
                    .is_some_and(|w| w == "statuses" || w == "states")
        })
        .map(|(_, value)| value);
    let from = from_keyword.or_else(|| {
        syntax::positional_args(claim).into_iter().find(|a| {
            matches!(a.kind(), kinds::TUPLE | kinds::LIST | kinds::SET)
                && crate::python::named_children(*a)
                    .first()
                    .is_some_and(|s| state_named(*s, src).is_some())
        })
    });
    let Some(from) = from.filter(|f| matches!(f.kind(), kinds::TUPLE | kinds::LIST | kinds::SET))
    else {
        return false;
    };
    let states = crate::python::named_children(from);
    !states.is_empty()
        && states.iter().all(|s| {
            state_named(*s, src).is_some_and(|state| fresh_state(&state.to_ascii_lowercase()))
        })
}

/// A claim in a function that tests the state against one of its parameters
/// (`Invoice.status.in_(from_statuses)`), where the parameter's default and every value the
/// file's calls of the function hand it by name name fresh states only
/// (`from_statuses=("open", "uncollectible")`). Calls in other files are not seen.
fn fresh_by_parameter(idx: &NodeIndex<'_>, claim: Node<'_>, src: &str) -> bool {
    let Some(func) = idx.enclosing(claim, kinds::FUNCTION_DEFINITION) else {
        return false;
    };
    let (Some(params), Some(body)) = (func.field("parameters"), func.field("body")) else {
        return false;
    };
    let body = syntax::text(body, src);
    let name = syntax::function_name(func, src);
    crate::python::named_children(params)
        .into_iter()
        .any(|param| {
            let pname = syntax::parameter_name(param, src);
            if pname.is_empty() || matches!(pname, "self" | "cls") {
                return false;
            }
            // Tested against a state: `status.in_(from_statuses)`, `status == from_status`.
            let tested = body.match_indices(pname).any(|(at, _)| {
                let before = body.get(at.saturating_sub(24)..at).unwrap_or("");
                let whole = body[..at]
                    .chars()
                    .next_back()
                    .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'))
                    && body[at + pname.len()..]
                        .chars()
                        .next()
                        .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'));
                whole && (before.contains("status") || before.contains("state"))
            });
            if !tested {
                return false;
            }
            let mut values: Vec<Node<'_>> = param.field("value").into_iter().collect();
            for &call in idx.all(kinds::CALL) {
                if idx.callee_name(call, src) == name
                    && let Some(value) = syntax::keyword_arg(call, pname, src)
                {
                    values.push(value);
                }
            }
            !values.is_empty() && values.iter().all(|v| names_fresh_states(idx, *v, src))
        })
}

/// A tuple, list or set of fresh states, or a name the module binds to one.
fn names_fresh_states(idx: &NodeIndex<'_>, value: Node<'_>, src: &str) -> bool {
    let value = match value.kind() {
        kinds::IDENTIFIER => {
            match idx.assigned_before(None, syntax::text(value, src), value.start_byte(), src) {
                Some(bound) => bound,
                None => return false,
            }
        }
        _ => value,
    };
    let states = match value.kind() {
        kinds::TUPLE | kinds::LIST | kinds::SET => crate::python::named_children(value),
        kinds::STRING => vec![value],
        _ => return false,
    };
    !states.is_empty()
        && states.iter().all(|s| {
            state_named(*s, src).is_some_and(|state| fresh_state(&state.to_ascii_lowercase()))
        })
}

/// A state a row is claimed from before this attempt's request: one of `FRESH_STATES`, or a
/// retry scheduled after a definite failure (`retry_scheduled`).
fn fresh_state(state: &str) -> bool {
    FRESH_STATES.contains(&state) || state.ends_with("_scheduled")
}

/// The state a member of a constant of states names: `"open"`, the last part of
/// `DisputeStatus.OPEN` or of `RenewalInvoice.OPEN` (a model's class attribute).
fn constant_state<'s>(value: Node<'_>, src: &'s str) -> Option<&'s str> {
    state_named(value, src).or_else(|| {
        (value.kind() == kinds::ATTRIBUTE)
            .then(|| value.field("attribute").map(|a| syntax::text(a, src)))
            .flatten()
            .filter(|a| a.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
    })
}

/// The state a value names: `"open"`, or the last part of `DisputeStatus.OPEN`.
fn state_named<'s>(value: Node<'_>, src: &'s str) -> Option<&'s str> {
    match value.kind() {
        kinds::STRING => syntax::string_value(value, src),
        kinds::ATTRIBUTE => {
            let class = value.field("object").map(|o| syntax::text(o, src))?;
            let class = class
                .rsplit('.')
                .next()
                .unwrap_or(class)
                .to_ascii_lowercase();
            (class.ends_with("status") || class.ends_with("state"))
                .then(|| value.field("attribute").map(|a| syntax::text(a, src)))
                .flatten()
        }
        _ => None,
    }
}

/// Whether a claim's condition tests a state, and every state it takes rows from is fresh
/// (`FRESH_STATES`). A claim that also takes `'unknown'` or `'in_flight'` rows numbers a new
/// key for a payment the provider may have made.
fn claimed_from_a_fresh_state(claim: &str) -> bool {
    let lower = claim.to_ascii_lowercase();
    let condition = ["where", "filter", "find_one_and_update("]
        .iter()
        .filter_map(|w| lower.find(w))
        .min()
        .map(|at| {
            let rest = &lower[at..];
            let end = ["returning", ".values(", ".update(", " set "]
                .iter()
                .filter_map(|w| rest.find(w))
                .min()
                .unwrap_or(rest.len());
            &rest[..end]
        });
    let Some(condition) = condition.filter(|c| c.contains("status") || c.contains("state")) else {
        return false;
    };
    // The states named: quoted words and the last part of `Status.OPEN`.
    let mut named: Vec<&str> = Vec::new();
    for (i, part) in condition.split(['"', '\'']).enumerate() {
        if i % 2 == 1 && !part.is_empty() {
            named.push(part);
        }
    }
    for word in condition.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')) {
        if let Some((class, state)) = word.rsplit_once('.')
            && (class.ends_with("status") || class.ends_with("state"))
        {
            named.push(state);
        }
    }
    let states: Vec<&str> = named
        .into_iter()
        .filter(|w| !matches!(*w, "status" | "state" | "$inc" | "$set" | "id" | "_id"))
        .collect();
    !states.is_empty() && states.iter().all(|s| fresh_state(s))
}

/// A key made by a helper of the file (`idempotency_key=_funding_key(payout)`, which returns
/// `uuid5(payout.idempotency_key, f"balance-funding-{payout.submit_attempts}")`) from a count
/// that a claim of the file moves on on every run (`.update(submit_attempts=F("submit_attempts") +
/// 1)`, not under a test), or sets to the time (`.values(retry_claimed_at=now)`): the count read
/// in the helper, the step (and whether it stamps), and the field.
fn numbered_in_helper<'t>(
    idx: &NodeIndex<'t>,
    value: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, (Node<'t>, bool), String)> {
    // `key = attempt_idempotency_key(collection)` then `idempotency_key=key`.
    let made = (value.kind() == kinds::IDENTIFIER)
        .then(|| {
            let func = idx.enclosing(value, kinds::FUNCTION_DEFINITION)?;
            idx.assigned_before(
                Some(func),
                syntax::text(value, src),
                value.start_byte(),
                src,
            )
        })
        .flatten()
        .unwrap_or(value);
    let call = crate::rules::idem::strip_await(made);
    if call.kind() != kinds::CALL
        || syntax::receiver(call).is_some_and(|r| syntax::text(r, src) != "self")
    {
        return None;
    }
    let name = syntax::callee_name(call, src);
    let helper = super::event_dedup_skipped::function_named(idx, name, src)?;
    let mut reads = Vec::new();
    for &ret in idx.within(helper, kinds::RETURN_STATEMENT) {
        let Some(returned) = syntax::return_value(ret) else {
            continue;
        };
        let mut stack = vec![returned];
        while let Some(n) = stack.pop() {
            if n.kind() == kinds::ATTRIBUTE
                && let (Some(object), Some(field)) = (n.field("object"), n.field("attribute"))
                && object.kind() == kinds::IDENTIFIER
                && (counts_attempts(syntax::text(field, src))
                    || stamps_time(syntax::text(field, src)))
            {
                reads.push((n, syntax::text(field, src)));
            }
            stack.extend(crate::python::named_children(n));
        }
    }
    reads.into_iter().find_map(|(read, field)| {
        let caller = idx
            .enclosing(value, kinds::FUNCTION_DEFINITION)
            .unwrap_or(helper);
        // `payment.submissions += 1` in the caller, ahead of the key: every run steps it.
        let stepped_here = idx
            .within(caller, kinds::AUGMENTED_ASSIGNMENT)
            .iter()
            .copied()
            .find(|a| {
                a.end_byte() <= value.start_byte()
                    && a.field("left").is_some_and(|l| {
                        l.kind() == kinds::ATTRIBUTE
                            && l.field("attribute")
                                .is_some_and(|f| syntax::text(f, src) == field)
                    })
                    && syntax::text(*a, src).contains("+=")
                    && !moved_for_a_reason(idx, caller, *a, src)
            })
            .map(|a| (a, false));
        Some((
            read,
            stepped_here.or_else(|| moved_by_a_claim(idx, caller, field, src))?,
            field.to_string(),
        ))
    })
}

/// An update of the file that moves `field` on by one on every run
/// (`Movement.update(attempts=Movement.attempts + 1)`, not under a test, a handler or a loop),
/// or sets a time field to the time (`.values(retry_claimed_at=now)`): the update, and whether
/// it stamps.
fn moved_by_a_claim<'t>(
    idx: &NodeIndex<'t>,
    within: Node<'_>,
    field: &str,
    src: &str,
) -> Option<(Node<'t>, bool)> {
    // The function's own claim first: another function's may move the same field of another
    // record.
    let own = idx.within(within, kinds::CALL).iter().copied();
    let mut stamped = false;
    let step = own.chain(idx.all(kinds::CALL).iter().copied()).find(|c| {
        // `.update(attempts=F("attempts") + 1)`, or a helper of the project handed the step
        // (`_move(payout_id, [PENDING], status=SENDING, attempts=F("attempts") + 1)`).
        let stepped = (matches!(syntax::callee_name(*c, src), "update" | "values")
            && increments(syntax::text(*c, src), field)
            || syntax::keyword_arg(*c, field, src).is_some_and(|v| {
                let v = syntax::text(v, src);
                v.contains(field) && (v.contains("+ 1") || v.contains("+1"))
            }))
            && !claim_from_a_fresh_state(idx, *c, src)
            && !made_once_the_last_is_settled(idx, *c, src);
        // `retry_claimed_at=now`: a new time on every claim.
        let stamps = stamps_time(field)
            && syntax::keyword_arg(*c, field, src).is_some_and(|v| the_time(syntax::text(v, src)));
        // A claim tested as it is made (`if not _move(...): return`) runs on every run.
        let tested = idx
            .enclosing(*c, kinds::IF_STATEMENT)
            .and_then(|stmt| stmt.field("condition"))
            .is_some_and(|cond| syntax::contains(cond, *c));
        let stepped = stepped && !resumed_without_a_step(idx, *c, field, src);
        let found = (stepped || stamps)
            && idx
                .enclosing(*c, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| tested || !moved_for_a_reason(idx, f, *c, src));
        stamped = found && stamps && !stepped;
        found
    })?;
    Some((step, stamped))
}

/// Whether the file resumes what the step's claim leaves in flight without moving the count on:
/// `_claim_due` sets `status=RETRY_SUBMITTING, attempt_count=... + 1` from `RETRY_SCHEDULED`,
/// and `_reclaim_stale` takes `RETRY_SUBMITTING` rows back with the count left alone. The count
/// then numbers new attempts by design, and a run after a timeout resends the same one.
fn resumed_without_a_step(idx: &NodeIndex<'_>, step: Node<'_>, field: &str, src: &str) -> bool {
    let Some(state) = syntax::keyword_arg(step, "status", src).map(|v| syntax::text(v, src)) else {
        return false;
    };
    if !state.contains('.') {
        return false;
    }
    let member = state.rsplit('.').next().unwrap_or(state);
    // A claim that takes its own state back (`Q(status=SUBMITTING, lease_expires_at__lte=now)`)
    // steps the count on every reclaim.
    let named = syntax::text(step, src)
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| *w == member)
        .count();
    if named > 1 {
        return false;
    }
    // A reclaim: an update that finds rows in that state and leaves their state as it is, or
    // a call of the step's own helper that takes them back into it (`_update_invoice_if(
    // invoice, charge_attempts == invoice.charge_attempts, status == CHARGING, ...,
    // status=CHARGING)`), the count left alone.
    let helper = syntax::callee_name(step, src);
    idx.all(kinds::CALL).iter().any(|&c| {
        let name = syntax::callee_name(c, src);
        let status = syntax::keyword_arg(c, "status", src).map(|v| syntax::text(v, src));
        let text = syntax::text(c, src);
        let leaves_count = syntax::keyword_arg(c, field, src).is_none()
            && !text.contains(&format!("{field}="))
            && !text.contains(&format!("{field} = "))
            && !increments(text, field);
        c.id() != step.id()
            && leaves_count
            && syntax::has_word(text, member)
            && if matches!(name, "update" | "values") {
                status.is_none()
                    && text.contains("update(")
                    && (text.contains(".where(") || text.contains(".filter("))
            } else {
                name == helper && status == Some(state)
            }
    })
}

/// A field that holds a time: `claimed_at`, `retry_claimed_at`, `lease_time`.
pub(crate) fn stamps_time(field: &str) -> bool {
    let words = syntax::name_words(field);
    words.last().is_some_and(|w| w == "at")
        || words
            .iter()
            .any(|w| matches!(w.as_str(), "time" | "timestamp" | "ts"))
}

/// `now`, `utcnow()`, `datetime.now(UTC)`, `func.now()`, `timezone.now()`, `time.time()`.
pub(crate) fn the_time(value: &str) -> bool {
    value == "now"
        || value.ends_with("_now")
        || value.contains("now(")
        || value.contains("time.time(")
        || value.contains("time.monotonic(")
}

/// A key made from the count of a record handed in or loaded (`_submit(movement, client)`
/// sending `key = f"{movement.idempotency_key}-{movement.attempts}"`), that a claim of the file
/// moves on on every run: the count read, the step, and the field.
fn counted_from_handed_record<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    value: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, (Node<'t>, bool), String)> {
    let value = if value.kind() == kinds::IDENTIFIER {
        idx.assigned_before(
            Some(func),
            syntax::text(value, src),
            value.start_byte(),
            src,
        )?
    } else {
        value
    };
    let params = crate::rules::pay::parameters(func, src);
    let mut stack = vec![value];
    while let Some(n) = stack.pop() {
        if n.kind() == kinds::ATTRIBUTE
            && let (Some(object), Some(field)) = (n.field("object"), n.field("attribute"))
            && object.kind() == kinds::IDENTIFIER
            && (params.iter().any(|p| p == syntax::text(object, src))
                || idx
                    .assigned_before(Some(func), syntax::text(object, src), n.start_byte(), src)
                    .is_some())
            && counts_attempts(syntax::text(field, src))
            && let Some(step) = moved_by_a_claim(idx, func, syntax::text(field, src), src)
        {
            return Some((n, step, syntax::text(field, src).to_string()));
        }
        stack.extend(crate::python::named_children(n));
    }
    None
}

/// Whether a query moves `field` on by one: `attempts = r.attempts + 1`, `attempts=t.c.attempts
/// + 1`.
fn increments(code: &str, field: &str) -> bool {
    // MongoDB's `{"$inc": {"attempts": 1}}` (`find_one_and_update`, `update_one`).
    let inc = code
        .find("\"$inc\"")
        .or_else(|| code.find("'$inc'"))
        .is_some_and(|at| {
            let rest = &code[at..];
            ['"', '\''].iter().any(|q| {
                rest.match_indices(&format!("{q}{field}{q}")).any(|(i, m)| {
                    rest[i + m.len()..]
                        .trim_start()
                        .strip_prefix(':')
                        .is_some_and(|v| {
                            v.trim_start()
                                .starts_with(|c: char| c.is_ascii_digit() && c != '0')
                        })
                })
            })
        });
    inc || code.match_indices(field).any(|(at, _)| {
        let after = code[at + field.len()..].trim_start();
        let Some(rhs) = after.strip_prefix('=').filter(|r| !r.starts_with('=')) else {
            return false;
        };
        let rhs = rhs.split([',', '\n']).next().unwrap_or("");
        rhs.contains(field) && (rhs.contains("+ 1") || rhs.contains("+1"))
    })
}

/// Whether `step` runs under a test, in a handler or in a loop of `func`: a count moved on
/// for a reason, or IDEM004's attempt, not on every run.
fn moved_for_a_reason(idx: &NodeIndex<'_>, func: Node<'_>, step: Node<'_>, src: &str) -> bool {
    [
        kinds::IF_STATEMENT,
        kinds::EXCEPT_CLAUSE,
        kinds::FOR_STATEMENT,
        kinds::WHILE_STATEMENT,
    ]
    .iter()
    .any(|k| {
        idx.enclosing(step, k).is_some_and(|e| {
            e.start_byte() > func.start_byte()
                && !only_found(e, step, src)
                && !resends_the_unsettled(e, src)
        })
    })
}

/// Whether `block` is an `if` that asks whether the record is still unsettled (`if
/// existing.status is CaptureStatus.PENDING:`, "no answer last time: send it again"): the step
/// it guards is taken exactly on the resend that must carry the first key.
fn resends_the_unsettled(block: Node<'_>, src: &str) -> bool {
    block.kind() == kinds::IF_STATEMENT
        && syntax::elif_clauses(block).is_empty()
        && block.field("condition").is_some_and(|c| {
            let condition = syntax::text(c, src);
            (condition.contains("status") || condition.contains("state"))
                && !condition.contains("not ")
                && !condition.contains("!=")
                && syntax::name_words(condition).iter().any(|w| {
                    matches!(
                        w.as_str(),
                        "pending" | "unknown" | "submitting" | "processing" | "uncertain"
                    )
                })
        })
}

/// Whether `block` is an `if` that only asks whether the record the step moves was found
/// (`if refund is not None:`, `if refund:` after a claim that may find none): every claim
/// that finds it moves the count.
fn only_found(block: Node<'_>, step: Node<'_>, src: &str) -> bool {
    let Some(record) = step
        .field("left")
        .and_then(|l| l.field("object"))
        .map(|o| syntax::text(o, src))
    else {
        return false;
    };
    block.kind() == kinds::IF_STATEMENT
        && block.field("condition").is_some_and(|c| {
            let condition = syntax::text(c, src);
            condition == record || condition == format!("{record} is not None")
        })
        && syntax::elif_clauses(block).is_empty()
}

/// A field that counts the tries of one payment: `retry_count`, `attempts`, `tries`.
fn counts_attempts(field: &str) -> bool {
    syntax::name_words(field).iter().any(|w| {
        matches!(
            w.as_str(),
            "count"
                | "attempt"
                | "attempts"
                | "retry"
                | "retries"
                | "tries"
                | "try"
                | "submissions"
                | "sends"
                | "resends"
        )
    })
}

/// The plain names a text reads, each by its first part (`appointment` of `appointment.id`).
pub(crate) fn names_read(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .filter_map(|w| w.split('.').next())
        .filter(|w| {
            w.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        })
}

#[cfg(test)]
mod tests {
    use super::claimed_from_a_fresh_state;

    #[test]
    fn a_claim_only_from_states_before_any_request_is_fresh() {
        assert!(claimed_from_a_fresh_state(
            r#"update(Invoice).where(Invoice.id == invoice_id, Invoice.status == "open").values(status="charging", attempt_count=Invoice.attempt_count + 1)"#
        ));
        assert!(claimed_from_a_fresh_state(
            "Invoice.objects.filter(pk=pk, status=InvoiceStatus.DUE).update(attempts=F(\"attempts\") + 1)"
        ));
        // Rows whose last answer was lost are claimed again: each claim numbers a new key.
        assert!(!claimed_from_a_fresh_state(
            r#"sa.update(captures).where(captures.c.id == capture_id, captures.c.status.in_(("pending", "unknown"))).values(status="in_flight", attempts=captures.c.attempts + 1)"#
        ));
        assert!(!claimed_from_a_fresh_state(
            "UPDATE seat_refunds r SET status = 'submitting', attempts = r.attempts + 1 WHERE r.id = $1 AND r.status IN ('pending', 'unknown')"
        ));
        // No state in the condition: every run moves the count.
        assert!(!claimed_from_a_fresh_state(
            "Refund.objects.filter(pk=refund.pk).update(attempts=F(\"attempts\") + 1)"
        ));
    }
}
