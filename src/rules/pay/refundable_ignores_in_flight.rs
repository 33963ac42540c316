//! PAY034 refundable-ignores-in-flight: what is left to refund is worked out from a refunded
//! total that the refund being created does not move (`order.captured_minor -
//! order.refunded_minor`, the total a webhook raises once the provider confirms a refund). The
//! function writes the refund as a record still in flight and leaves that total as it was, so
//! until the confirmation arrives the money is still counted as refundable: a second request, a
//! cancellation after a pending partial refund, refunds it again, past what was captured.
//!
//! Read where the subtraction is in the function that writes the refund record, or in a helper
//! of the file it calls (`refundable_balance(session, order)`). Left alone: a function that
//! moves the total itself (`order.refunded_minor += amount`, `update(...).values(refunded_minor=
//! ...)`, `SET refunded_minor = refunded_minor + ...`), and figures summed from the refund
//! records (in flight ones included).
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY034",
    doc: include_str!("../../../rules/pay/PAY034.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a subtraction of a refunded total in a file that writes refunds.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(&[".refunded", "_refunded"])
        && s.mentions(&["Refund", "refunds"])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    let mut reported: Vec<usize> = Vec::new();
    for &op in idx.all(kinds::BINARY_OPERATOR) {
        let Some(total) = refunded_total(op, src) else {
            continue;
        };
        let Some(helper) = idx.enclosing(op, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        // `charge.amount - charge.refunded_amount - in_flight`: the refunds still open are
        // taken away too, here or from the name the difference is bound to.
        if takes_away_more(op, helper, src) {
            continue;
        }
        let field = total.rsplit('.').next().unwrap_or(total);
        // A property that works the total out (`def refunded_amount(self): return
        // self.refunds.filter(state__in=(...)).aggregate(...)`) may count refunds in flight.
        if computed(cx, field) {
            continue;
        }
        // The function that writes the refund: the one with the subtraction, or one of the
        // file that calls it.
        let writers: Vec<Node<'_>> = std::iter::once(helper)
            .chain(callers_in_file(idx, helper, src))
            .collect();
        for func in writers {
            if reported.contains(&func.id()) {
                continue;
            }
            let Some(written) = writes_a_refund(idx, func, src) else {
                continue;
            };
            if syntax::writes_field(syntax::text(func, src), field)
                || syntax::writes_field(syntax::text(helper, src), field)
                || claimed_first(idx, func, written, src)
            {
                continue;
            }
            reported.push(func.id());
            let function = facts::qualname(func, idx, src);
            let finding = cx
                .report(&RULE, op)
                .arg("function", function.clone())
                .arg("left", syntax::text(op, src).to_string())
                .arg("total", total.to_string())
                .arg("refund", crate::rules::pay::first_line(written, src))
                .arg("refund_line", syntax::lines(written).0.to_string());
            finding.function = function;
        }
    }
}

/// The refunded total a subtraction takes away: `order.refunded_minor` of `order.captured_minor
/// - order.refunded_minor`, `payment.amount_refunded`.
fn refunded_total<'s>(op: Node<'_>, src: &'s str) -> Option<&'s str> {
    let (left, right) = (op.field("left")?, op.field("right")?);
    let operator = src.get(left.end_byte()..right.start_byte())?.trim();
    if operator != "-" || right.kind() != kinds::ATTRIBUTE {
        return None;
    }
    let text = syntax::text(right, src);
    let field = text.rsplit('.').next()?;
    syntax::name_words(field)
        .iter()
        .any(|w| w == "refunded")
        .then_some(text)
}

/// Whether more is taken away from the difference: the subtraction is the left side of another
/// (`... - charge.refunded_amount - (in_flight or ZERO)`), or the name it is bound to is
/// reduced later in the function (`left -= pending`, `left - pending`).
fn takes_away_more(op: Node<'_>, func: Node<'_>, src: &str) -> bool {
    if let Some(parent) = op.parent().filter(|p| p.kind() == kinds::BINARY_OPERATOR)
        && parent.field("left").is_some_and(|l| l.id() == op.id())
        && let Some(right) = parent.field("right")
        && src
            .get(op.end_byte()..right.start_byte())
            .is_some_and(|between| between.trim() == "-")
    {
        return true;
    }
    let Some(name) = syntax::bound_name(op, src) else {
        return false;
    };
    let after = src.get(op.end_byte()..func.end_byte()).unwrap_or_default();
    after.contains(&format!("{name} -= ")) || after.contains(&format!("{name} - "))
}

/// The functions of the file that call `helper` by its name (`refundable_balance(session,
/// order)`, `self._refundable(order)`).
fn callers_in_file<'t>(
    idx: &NodeIndex<'t>,
    helper: Node<'t>,
    src: &str,
) -> impl Iterator<Item = Node<'t>> {
    let name = syntax::function_name(helper, src).to_string();
    idx.all(kinds::CALL).iter().filter_map(move |&c| {
        (!name.is_empty() && syntax::callee_name(c, src) == name)
            .then(|| idx.enclosing(c, kinds::FUNCTION_DEFINITION))
            .flatten()
            .filter(|f| f.id() != helper.id())
    })
}

/// The call that writes a refund record in `func`: `Refund(...)` built (and added),
/// `MembershipRefund.objects.create(...)`, an `INSERT INTO refunds` executed.
fn writes_a_refund<'t>(idx: &NodeIndex<'t>, func: Node<'t>, src: &str) -> Option<Node<'t>> {
    idx.within(func, kinds::CALL).iter().copied().find(|&c| {
        if !crate::rules::idem::owned_by(idx, c, Some(func))
            || idx.enclosing(c, kinds::RAISE_STATEMENT).is_some()
        {
            return false;
        }
        let callee = syntax::callee(c, src);
        let words = syntax::name_words(callee);
        let refund = words.iter().any(|w| w == "refund" || w == "refunds");
        let creates = crate::rules::pay::builds_a_class(callee)
            || words
                .iter()
                .any(|w| matches!(w.as_str(), "create" | "insert"));
        let inserted = matches!(
            syntax::callee_name(c, src),
            "execute" | "fetchrow" | "fetchval" | "fetchone"
        ) && syntax::positional_args(c).first().is_some_and(|sql| {
            let lower = syntax::text(*sql, src).to_ascii_lowercase();
            lower.contains("insert into refund")
        });
        refund && creates || inserted
    })
}

/// Whether a function of the change, or of the repository, is named for the total: a property
/// or method that works it out rather than a column a confirmation raises.
fn computed(cx: &Ctx<'_>, field: &str) -> bool {
    cx.change.functions_named(cx.side, field).next().is_some()
        || cx.project().is_some_and(|p| {
            p.modules()
                .iter()
                .any(|m| m.functions.iter().any(|f| f.name == field))
        })
}

/// Whether the function claims the parent before it writes the refund, with a conditional
/// update whose count it checks (`claimed = Lesson.update(status=CANCELLED).where(... ==
/// BOOKED).execute()`, then `if not claimed: raise ...`): the refund is written once per
/// claim, and no second request reaches it.
fn claimed_first(idx: &NodeIndex<'_>, func: Node<'_>, before: Node<'_>, src: &str) -> bool {
    crate::rules::pay::leaving_ifs(idx, src).any(|(stmt, condition)| {
        if stmt.end_byte() > before.start_byte()
            || !crate::rules::idem::owned_by(idx, stmt, Some(func))
        {
            return false;
        }
        let text = syntax::text(condition, src);
        let Some(name) = text.strip_prefix("not ").map(str::trim) else {
            return false;
        };
        idx.assigned_before(Some(func), name, stmt.start_byte(), src)
            .is_some_and(|v| {
                let v = syntax::text(v, src);
                v.contains(".update(") || v.contains("UPDATE ") || v.contains("rowcount")
            })
    })
}
