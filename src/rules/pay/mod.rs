//! Payment-operation rules: what is charged, and when the code starts believing it was.

pub mod accepted_taken_as_succeeded;
pub mod amount_in_float;
pub mod amount_of_another_record;
pub mod answer_dropped_then_done;
pub mod arguments_swapped;
pub mod balance_checked_unlocked;
pub mod balance_reset_after_payout;
pub mod caller_amount_over_stored;
pub mod charge_amount_source_changed;
pub mod claim_split_into_read_and_write;
pub mod currency_left_to_default;
pub mod destination_refund_keeps_transfer;
pub mod event_applied_in_any_state;
pub mod found_taken_as_paid;
pub mod item_refund_sized_by_order;
pub mod lock_left_off;
pub mod metadata_compared_with_id;
pub mod minor_units_divided;
pub mod minor_units_truncated;
pub mod money_written_apart;
pub mod outcome_flag_ignored;
pub mod paid_inside_the_records_transaction;
pub mod paid_sum_ignores_status;
pub mod payment_argument_dropped;
pub mod pending_rows_paid_unclaimed;
pub mod price_from_client;
pub mod record_written_after_payment;
pub mod refund_cap_ignores_refunded;
pub mod refund_from_list_price;
pub mod refundable_ignores_in_flight;
pub mod requeued_from_any_state;
pub mod row_lock_removed;
pub mod server_error_taken_as_refusal;
pub mod server_errors_only;
pub mod settled_refunds_only;
pub mod signature_checked_if_present;
pub mod signature_error_passed_over;
pub mod split_parts_miss_the_total;
pub mod state_checked_then_set;
pub mod success_recorded_before_result;
pub mod task_queued_before_commit;
pub mod text_flag_read_with_bool;
pub mod time_from_client;
pub mod time_units_mixed;
pub mod unsettled_status_taken_as_paid;
pub mod verification_answer_taken_as_yes;
pub mod verified_subset_ignored;

use tree_sitter::Node;

use crate::config::Vocabulary;
use crate::python::{Fields, kinds, syntax};
use crate::rules::{Ctx, facts};
use crate::source::Side;

/// Whether a call moves money: its name is a payment operation (`create_charge`, `refund`,
/// `capture`), or it creates/confirms/captures on a payment object (`stripe.PaymentIntent.create`,
/// `stripe.Refund.create`).
pub(crate) fn is_payment_call(call: Node<'_>, src: &str, vocab: &Vocabulary) -> bool {
    names_payment(&syntax::call_text(call, src), vocab)
}

/// `is_payment_call` on a call's parts already read (the facts pass reads every call's).
pub(crate) fn names_payment(parts: &syntax::CallText<'_>, vocab: &Vocabulary) -> bool {
    let syntax::CallText { name, receiver, .. } = *parts;
    // `Auszahlung(**row)`, `Refund(id=...)`: a record made, a noun, not an operation asked for.
    if vocab.is_payment_operation(name) && !name.starts_with(|c: char| c.is_ascii_uppercase()) {
        return true;
    }
    let Some(receiver) = receiver else {
        return false;
    };
    let last = snake(crate::rules::facts::last_name(receiver));
    // Braintree's `gateway.transaction.sale(...)`, `braintree.Transaction.sale(...)`, and a
    // gateway of the project's own that sells the same way (`self.gateway.sale(...)`).
    if name == "sale" {
        return [
            "transaction",
            "gateway",
            "braintree",
            "processor",
            "payment",
        ]
        .iter()
        .any(|w| last.contains(w));
    }
    if !matches!(name, "create" | "confirm" | "capture" | "execute") {
        return false;
    }
    last.contains("payment") || vocab.is_payment_operation(&last)
}

/// Whether a call moves money: by its name (`is_payment_call`), or, in a payment module, a call
/// with money among its arguments of a function of the change that pays, or talks to a gateway
/// over HTTP from a payment module of its own (`send_transaction(ref, order.amount, ...)`).
pub(crate) fn pays(cx: &Ctx<'_>, call: Node<'_>, src: &str) -> bool {
    if is_payment_call(call, src, cx.vocab) || operation_named(call, src, cx.vocab) {
        return true;
    }
    // `await self._in_thread(self._cliente.autorizza, ...)`, `asyncio.to_thread(gateway.charge,
    // ...)`: the function handed to a runner is the call made.
    if let Some(handed) = syntax::handed_callee(call, src) {
        let name = crate::rules::facts::last_name(handed);
        if cx.vocab.is_payment_operation(name) && !beside_the_money(name) {
            return true;
        }
    }
    if !cx.facts.is_some_and(|f| f.payment_module) || !passes_money(call, src, cx.vocab) {
        return false;
    }
    let name = syntax::callee_name(call, src);
    if beside_the_money(name) {
        return false;
    }
    let mut found = false;
    for (file, function) in cx.change.functions_named(Side::New, name) {
        if file.is_test || !(function.payment || function.http && file.payment_module) {
            return false;
        }
        found = true;
    }
    found
}

/// A call that asks a payment provider to do something, not to tell: one that carries an
/// idempotency key (`create_route(..., idempotency_key=payout.idempotency_key)`), or a write
/// on a client named for a provider (`self._braintree.update_subscription(...)`,
/// `self._mollie.create_route(...)`). Its timeout leaves what it did unknown.
pub(crate) fn writes_to_a_provider(call: Node<'_>, src: &str) -> bool {
    if syntax::keyword_args(call, src)
        .iter()
        .any(|(name, _)| syntax::code_names_idempotency(name))
    {
        return true;
    }
    let Some(receiver) = syntax::receiver(call) else {
        return false;
    };
    let receiver = syntax::text(receiver, src);
    let last = receiver.rsplit('.').next().unwrap_or(receiver);
    let provider = syntax::name_words(last).iter().any(|w| {
        matches!(
            w.as_str(),
            "stripe"
                | "adyen"
                | "braintree"
                | "mollie"
                | "razorpay"
                | "paypal"
                | "paystack"
                | "gocardless"
                | "klarna"
                | "paddle"
                | "gateway"
                | "psp"
                | "acquirer"
        )
    });
    let name = syntax::callee_name(call, src);
    provider
        && syntax::name_words(name).first().is_some_and(|verb| {
            matches!(
                verb.as_str(),
                "create"
                    | "update"
                    | "capture"
                    | "refund"
                    | "charge"
                    | "pay"
                    | "transfer"
                    | "submit"
                    | "confirm"
                    | "authorize"
                    | "authorise"
                    | "void"
                    | "cancel"
                    | "execute"
                    | "finalize"
                    | "route"
                    | "fund"
                    | "payout"
                    | "sale"
                    | "settle"
            )
        })
}

/// A call told what to do by an argument that names a payment operation: Paddle's
/// `create_adjustment(..., action="refund")`, `gateway.execute(operation="capture", ...)`.
fn operation_named(call: Node<'_>, src: &str, vocab: &Vocabulary) -> bool {
    syntax::keyword_args(call, src).iter().any(|(k, v)| {
        matches!(
            *k,
            "action" | "operation" | "op" | "type" | "kind" | "intent"
        ) && syntax::string_value(*v, src).is_some_and(|op| vocab.is_payment_operation(op))
    })
}

/// The statement a node is part of (`payout.state = PayoutState.PAID`, `return
/// _transition(...)`), within its block.
pub(crate) fn statement_of(call: Node<'_>) -> Option<Node<'_>> {
    let mut at = call.parent();
    while let Some(node) = at {
        if matches!(
            node.kind(),
            kinds::EXPRESSION_STATEMENT | kinds::RETURN_STATEMENT
        ) {
            return Some(node);
        }
        if node.kind() == kinds::BLOCK || node.kind() == kinds::FUNCTION_DEFINITION {
            return None;
        }
        at = node.parent();
    }
    None
}

/// The file's `if` statements, each with its condition and its body.
pub(crate) fn branches<'t>(
    idx: &crate::python::NodeIndex<'t>,
) -> impl Iterator<Item = (Node<'t>, Node<'t>, Node<'t>)> {
    idx.all(kinds::IF_STATEMENT)
        .iter()
        .filter_map(|&stmt| Some((stmt, stmt.field("condition")?, stmt.field("consequence")?)))
}

/// The file's `if` statements whose body leaves (returns, raises, continues): a guard that
/// turns something away. Each with its condition.
pub(crate) fn leaving_ifs<'t>(
    idx: &crate::python::NodeIndex<'t>,
    src: &str,
) -> impl Iterator<Item = (Node<'t>, Node<'t>)> {
    branches(idx).filter_map(move |(stmt, condition, body)| {
        (!syntax::block_falls_through(body, src)).then_some((stmt, condition))
    })
}

/// Whether a callee builds an object of a class (`Refund(...)`, `models.Payment(...)`) rather
/// than querying one (`Refund.objects.filter(...).update`): its last name is capitalised.
pub(crate) fn builds_a_class(callee: &str) -> bool {
    callee
        .rsplit('.')
        .next()
        .is_some_and(|last| last.starts_with(|c: char| c.is_ascii_uppercase()))
}

/// The two sides of a value that falls back on another when the first is not given: `given or
/// fallback`, `given if given is not None else fallback` (or `given if given else fallback`),
/// `fallback if given is None else given`. As `(given, fallback)`.
pub(crate) fn fallback<'t>(value: Node<'t>, src: &str) -> Option<(Node<'t>, Node<'t>)> {
    match value.kind() {
        kinds::BOOLEAN_OPERATOR
            if value
                .child_by_field_name("operator")
                .is_some_and(|o| syntax::text(o, src) == "or") =>
        {
            Some((value.field("left")?, value.field("right")?))
        }
        kinds::CONDITIONAL_EXPRESSION => {
            let parts = crate::python::named_children(value);
            let (then, condition, otherwise) = (*parts.first()?, *parts.get(1)?, *parts.get(2)?);
            let tested = syntax::text(condition, src);
            let (then_text, other_text) = (syntax::text(then, src), syntax::text(otherwise, src));
            if tested == then_text || tested == format!("{then_text} is not None") {
                Some((then, otherwise))
            } else if tested == format!("{other_text} is None") {
                Some((otherwise, then))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Whether `func` calls a function of the file (by its name, another than itself) of which
/// `holds` is true: `self._open_refund(...)` whose body takes the lock.
pub(crate) fn calls_a_helper_that(
    idx: &crate::python::NodeIndex<'_>,
    func: Node<'_>,
    src: &str,
    holds: impl Fn(Node<'_>) -> bool,
) -> bool {
    idx.within(func, kinds::CALL).iter().any(|&c| {
        idx.functions_named(idx.callee_name(c, src), src)
            .any(|h| h.id() != func.id() && holds(h))
    })
}

/// A POST over HTTP that carries money or goes to a payment URL: `requests.post(...)`,
/// `await client.post(...)`, `await bank.post(...)` on a `bank: httpx.AsyncClient` handed in.
pub(crate) fn http_payment(cx: &Ctx<'_>, call: Node<'_>) -> bool {
    let src = cx.src();
    matches!(syntax::callee_name(call, src), "post" | "request")
        && (cx.facts.is_some_and(|file| {
            facts::classify_call(call, src, file, cx.vocab) == facts::Target::Http
        }) || crate::rules::http::injected_client(cx, call).is_some())
        && (passes_money(call, src, cx.vocab) || crate::rules::http::url_names_payment(cx, call))
}

/// Whether the call hands a payment operation to a thread (`await asyncio.to_thread(
/// gateway.charge_saved_card, ...)`, `run_in_threadpool(processor.sale, ...)`): what it returns
/// is that payment's result.
pub(crate) fn hands_a_payment(cx: &Ctx<'_>, call: Node<'_>, src: &str) -> bool {
    syntax::handed_callee(call, src).is_some_and(|h| {
        let name = h.rsplit('.').next().unwrap_or(h);
        if beside_the_money(name) {
            return false;
        }
        // `run_in_threadpool(processor.sale, token, charge_cents, ...)`: in a payment module,
        // money handed to a function of the change that talks to a gateway, as `pays` reads a
        // direct call of it.
        cx.vocab.is_payment_operation(name)
            || cx.facts.is_some_and(|f| f.payment_module)
                && (passes_money(call, src, cx.vocab)
                    || passes_minor_units(call, src)
                    || takes_money(cx, name))
                && cx.change.reaches(
                    cx.side,
                    name,
                    crate::rules::reach::MAX_DEPTH,
                    &crate::rules::reach::HTTP_OR_PAYMENT,
                )
    })
}

/// `resource = _submit(movement, client)`: a call of a function of the file, or of the one
/// function of the change by that name, that makes a payment call itself (the facts say so).
pub(crate) fn calls_a_paying_helper(cx: &Ctx<'_>, call: Node<'_>, src: &str) -> bool {
    let Some(idx) = cx.index() else {
        return false;
    };
    let name = idx.callee_name(call, src);
    cx.facts
        .is_some_and(|file| file.functions.iter().any(|f| f.payment && f.name == name))
        // `ach.submit_debit(...)`: the one function of the change by that name, in another
        // module, that pays.
        || crate::rules::idem::named_once(cx, name)
            && cx
                .change
                .functions_named(cx.side, name)
                .any(|(file, f)| !file.is_test && f.payment)
}

/// Whether every function of the change called `name` takes an amount by position
/// (`debit_account(self, account, fare_minor, *, request_ref)`), and there is one.
fn takes_money(cx: &Ctx<'_>, name: &str) -> bool {
    let mut found = false;
    for (_, function) in cx.change.functions_named(cx.side, name) {
        let money = function.params.split(',').any(|p| {
            cx.vocab.is_money_argument(p)
                || syntax::name_words(p)
                    .iter()
                    .any(|w| matches!(w.as_str(), "cents" | "minor" | "pence"))
        });
        if !money {
            return false;
        }
        found = true;
    }
    found
}

/// Whether an argument is named for an amount in minor units (`charge_cents`, `fare_minor`).
fn passes_minor_units(call: Node<'_>, src: &str) -> bool {
    syntax::positional_args(call)
        .into_iter()
        .chain(syntax::keyword_args(call, src).into_iter().map(|(_, v)| v))
        .any(|arg| {
            syntax::name_words(syntax::text(arg, src))
                .iter()
                .any(|w| matches!(w.as_str(), "cents" | "minor" | "pence"))
        })
}

/// Whether a word of a function's name says it tells of a payment rather than makes one
/// (`BESIDE_THE_MONEY`: `send_receipt`, `notify_refund`).
pub(crate) fn beside_the_money(name: &str) -> bool {
    name.split('_')
        .any(|w| BESIDE_THE_MONEY.iter().any(|b| w.eq_ignore_ascii_case(b)))
}

/// Words of a function's name that say it tells of a payment rather than makes one, though it
/// may pass the amount over HTTP from a payment module (`send_receipt(email, total)`).
pub(crate) const BESIDE_THE_MONEY: &[&str] = &[
    "notify",
    "notification",
    "email",
    "mail",
    "receipt",
    "sms",
    "log",
    "audit",
    "track",
    "metric",
    "metrics",
    "analytics",
    "report",
    "alert",
    "event",
    "webhook",
];

/// Whether an argument of the call is money by its keyword or by a word of its text
/// (`amount=`, `order.amount_minor`, `total`).
pub(crate) fn passes_money(call: Node<'_>, src: &str, vocab: &Vocabulary) -> bool {
    let words = |text: &str| {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| !w.is_empty() && vocab.is_money_argument(w))
    };
    syntax::keyword_args(call, src)
        .iter()
        // `timeout=aiohttp.ClientTimeout(total=10)`: a duration's total, not money.
        .filter(|(name, _)| !name.contains("timeout"))
        .any(|(name, value)| vocab.is_money_argument(name) || words(syntax::text(*value, src)))
        || syntax::positional_args(call)
            .iter()
            .any(|a| words(syntax::text(*a, src)))
}

/// `PaymentIntent` → `payment_intent`.
pub(super) fn snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// The names a function's parameters bind, `self`/`cls` left out; `*args`/`**kwargs` by name.
pub(crate) fn parameters(func: Node<'_>, src: &str) -> Vec<String> {
    let Some(params) = func.field("parameters") else {
        return Vec::new();
    };
    let mut cursor = params.walk();
    params
        .named_children(&mut cursor)
        .filter(|p| p.kind() != kinds::COMMENT)
        .map(|p| syntax::parameter_name(p, src).to_string())
        .filter(|n| !n.is_empty() && n != "self" && n != "cls")
        .collect()
}

/// The parameters of `func` a call can pass by position, in order: up to a `*` or `*args`,
/// `self`/`cls` left out (a method's callers pass what follows them). Read from the parameter
/// list's text: the facts pass asks it of every function, and walking the nodes cost five
/// times as much.
pub(crate) fn positional_parameters<'s>(func: Node<'_>, src: &'s str) -> Vec<&'s str> {
    func.field("parameters")
        .map(|params| positional_names(syntax::text(params, src)))
        .unwrap_or_default()
}

/// `positional_parameters` of a parameter list's text, `(self, amount: int, currency="EUR",
/// *rest, key=None)`: split at the commas outside brackets, strings and comments.
fn positional_names(list: &str) -> Vec<&str> {
    let inner = list
        .strip_prefix('(')
        .and_then(|l| l.strip_suffix(')'))
        .unwrap_or(list);
    let mut names = Vec::new();
    let mut defaults = false;
    for piece in top_level_pieces(inner) {
        let piece = piece.trim();
        if piece.is_empty() || piece == "/" {
            continue;
        }
        if piece.starts_with('*') {
            break;
        }
        let len = piece
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(piece.len());
        let name = &piece[..len];
        let rest = piece[len..].trim_start();
        // After a default every positional parameter has one; a piece without one is the
        // split of something else (`key=lambda a, b: a`).
        let has_default = rest.starts_with('=') || rest.starts_with(':') && rest.contains('=');
        if name.is_empty() || defaults && !has_default {
            break;
        }
        defaults |= has_default;
        if name != "self" && name != "cls" {
            names.push(name);
        }
    }
    names
}

/// The comma-separated pieces of `text` at bracket depth zero, outside strings and comments.
fn top_level_pieces(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let (mut pieces, mut depth, mut start, mut i) = (Vec::new(), 0usize, 0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b'#' => {
                // Up to the end of the line: a comment's commas split nothing.
                let end = memchr::memchr(b'\n', &bytes[i..]).map_or(bytes.len(), |n| i + n);
                pieces.push(&text[start..i]);
                start = end;
                i = end;
                continue;
            }
            quote @ (b'"' | b'\'') => {
                let triple = bytes.get(i..i + 3) == Some(&[quote; 3][..]);
                let close: &[u8] = if triple { &[quote; 3] } else { &[quote] };
                let mut j = i + close.len();
                while j < bytes.len() && !bytes[j..].starts_with(close) {
                    j += if bytes[j] == b'\\' { 2 } else { 1 };
                }
                i = j + close.len();
                continue;
            }
            b',' if depth == 0 => {
                pieces.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    pieces.push(text.get(start..).unwrap_or_default());
    pieces
}

/// What `call` passes for `func`'s parameter `param`: the keyword argument of that name, or,
/// where `by_position`, the positional argument in the parameter's place. Nothing when the
/// call leaves the parameter to its default, or a splat (`*args`) comes before its place.
pub(crate) fn argument_for<'t>(
    call: Node<'t>,
    func: Node<'_>,
    param: &str,
    by_position: bool,
    src: &str,
) -> Option<Node<'t>> {
    if let Some(value) = syntax::keyword_arg(call, param, src) {
        return Some(value);
    }
    if !by_position {
        return None;
    }
    let place = positional_parameters(func, src)
        .iter()
        .position(|p| *p == param)?;
    let args = syntax::positional_args(call);
    let before = args.get(..=place)?;
    (!before.iter().any(|a| a.kind() == kinds::LIST_SPLAT)).then(|| args[place])
}

/// The object an entity attribute is read from or written to, as a bare name: `order` for
/// `order.amount`, `invoice` for `self.invoice.total`.
pub(crate) fn entity_object<'s>(attribute: Node<'_>, src: &'s str) -> Option<&'s str> {
    if attribute.kind() != kinds::ATTRIBUTE {
        return None;
    }
    let object = syntax::text(attribute.field("object")?, src);
    Some(object.rsplit('.').next().unwrap_or(object))
}

/// `int(x)`, `Decimal(x)`, `str(x)`, `f"{x:.2f}"`: the value they convert.
pub(crate) fn unwrap_conversion<'t>(node: Node<'t>, src: &str) -> Node<'t> {
    let mut node = node;
    for _ in 0..3 {
        // `f"{order.total:.2f}"`: one value, formatted.
        if node.kind() == kinds::STRING {
            let parts = crate::python::named_children(node);
            let mut values = parts.iter().filter(|p| p.kind() == "interpolation");
            let text = parts.iter().any(|p| p.kind() == "string_content");
            match (values.next(), values.next(), text) {
                (Some(value), None, false) => match value.field("expression") {
                    Some(inner) => node = inner,
                    None => break,
                },
                _ => break,
            }
            continue;
        }
        if node.kind() != kinds::CALL {
            break;
        }
        let name = syntax::callee_name(node, src);
        if !matches!(name, "int" | "float" | "str" | "Decimal" | "round" | "abs") {
            break;
        }
        match syntax::positional_args(node).first() {
            Some(inner) => node = *inner,
            None => break,
        }
    }
    node
}

/// A node's first line, for a message: a call spread over lines is shown as its opening
/// (`create_gift(session, ...`), cut where the line breaks.
pub(crate) fn first_line(node: Node<'_>, src: &str) -> String {
    let text = syntax::text(node, src);
    let line = text.lines().next().unwrap_or(text).trim_end();
    if line.len() < text.trim_end().len() {
        format!("{} ...", line.trim_end_matches(['(', '{', '[', ',']))
    } else {
        line.to_string()
    }
}

/// The source of a module-level constant a file reads, with `path:line`: its own, or, in
/// repository mode, one it imports (`from billpay.adyen import AUTHORISED`, `adyen.AUTHORISED`).
/// Only collections: a set, a tuple, a list, or a `frozenset(...)` of one.
pub(crate) fn constant_collection(
    cx: &Ctx<'_>,
    idx: &crate::python::NodeIndex<'_>,
    name: &str,
    src: &str,
) -> Option<(String, String)> {
    let collection = |v: &str| {
        let v = v.trim_start();
        v.starts_with(['{', '(', '['])
            || v.starts_with("frozenset(")
            || v.starts_with("set(")
            || v.starts_with("tuple(")
    };
    if !name.contains('.')
        && let Some(here) = crate::index::module_assignment(idx, name, src)
    {
        return collection(&here.value).then(|| (here.value, format!("{}:{}", cx.path, here.line)));
    }
    let project = cx.project()?;
    // `Refund.ACTIVE_STATUSES`: a set a class of another module keeps, under its class's name.
    let of_a_class = || {
        let (class, _) = name.split_once('.')?;
        if let Some(here) = project.file(cx.path)
            && let Some(a) = here.assignment(name)
        {
            return Some((here, a));
        }
        let target = project.file(cx.path)?.import_target(class)?;
        let (module, _) = target.rsplit_once('.')?;
        let module = project.module(module)?;
        module.assignment(name).map(|a| (module, a))
    };
    let (module, assignment) = project.resolve_expr(cx.path, name).or_else(of_a_class)?;
    collection(&assignment.value).then(|| {
        (
            assignment.value.clone(),
            format!("{}:{}", module.path, assignment.line),
        )
    })
}

/// The members of classes of states a text names (`RefundStatus.PENDING`,
/// `Refund.Status.QUEUED`), each as written, with its class and member.
pub(crate) fn state_members(text: &str) -> impl Iterator<Item = (&str, &str, &str)> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .filter_map(|token| {
            let (class, member) = token.rsplit_once('.')?;
            let class = class.rsplit('.').next()?;
            (class.starts_with(|c: char| c.is_ascii_uppercase())
                && (class.ends_with("Status") || class.ends_with("State"))
                && !member.is_empty())
            .then_some((token, class, member))
        })
}

/// The members of a class of states (those of a set when `kept` names some): from its
/// definitions in the file, or from the repository's modules (the index keeps their members), the module that
/// defines the set first. `Status` is a common name for a model's own class (`Payment.Status`,
/// `Refund.Status`, side by side): of the classes of that name, the one that has every member
/// the set keeps.
pub(crate) fn members_of(
    cx: &Ctx<'_>,
    idx: &crate::python::NodeIndex<'_>,
    class: &str,
    kept: &[(String, String)],
    defined_in: Option<&str>,
    src: &str,
) -> Vec<String> {
    let holds_the_set =
        |members: &Vec<String>| kept.iter().all(|(_, k)| members.iter().any(|m| m == k));
    // `Refund.Status`: the class nested in the model the set names, where the file has it.
    let (owner, class) = match class.rsplit_once('.') {
        Some((owner, class)) => (Some(owner.rsplit('.').next().unwrap_or(owner)), class),
        None => (None, class),
    };
    let named = |c: Node<'_>, name: &str| {
        c.field("name")
            .is_some_and(|n| syntax::text(n, src) == name)
    };
    let in_owner = |c: Node<'_>| {
        owner.is_none_or(|owner| {
            idx.enclosing(c, kinds::CLASS_DEFINITION)
                .is_some_and(|o| named(o, owner))
        })
    };
    let classes: Vec<Node<'_>> = idx
        .all(kinds::CLASS_DEFINITION)
        .iter()
        .copied()
        .filter(|c| named(*c, class))
        .collect();
    // The owner's own class when the file has it; any of the name when it has none.
    let owned = classes.iter().any(|c| in_owner(*c));
    let in_file = classes
        .into_iter()
        .filter(|c| !owned || in_owner(*c))
        .filter_map(|c| c.field("body"))
        .map(|body| {
            crate::python::named_children(body)
                .into_iter()
                .filter_map(|stmt| {
                    let assign = stmt.named_child(0)?;
                    let left = assign.field("left")?;
                    (assign.kind() == kinds::ASSIGNMENT && left.kind() == kinds::IDENTIFIER)
                        .then(|| syntax::text(left, src).to_string())
                })
                .collect::<Vec<_>>()
        })
        .find(holds_the_set);
    if in_file.is_some() {
        return in_file.unwrap_or_default();
    }
    let Some(project) = cx.project() else {
        return Vec::new();
    };
    let prefix = format!("{class}.");
    // The index keeps class members in document order: a class's members are one run of
    // entries of its name, broken by anything else or by a member named twice.
    let classes = |m: &crate::index::ModuleFacts| {
        let mut runs: Vec<Vec<String>> = Vec::new();
        let mut open = false;
        for a in &m.assignments {
            let member = a
                .name
                .strip_prefix(&prefix)
                .filter(|_| !a.value.starts_with(['(', '[', '{']));
            match member {
                Some(member) => match runs.last_mut() {
                    Some(run) if open && !run.iter().any(|r| r == member) => {
                        run.push(member.to_string())
                    }
                    _ => {
                        runs.push(vec![member.to_string()]);
                        open = true;
                    }
                },
                None => open = false,
            }
        }
        runs.into_iter().find(holds_the_set)
    };
    defined_in
        .and_then(|path| project.file(path))
        .and_then(classes)
        .or_else(|| project.modules().iter().find_map(classes))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all<'t>(node: Node<'t>, kind: &str, out: &mut Vec<Node<'t>>) {
        if node.kind() == kind {
            out.push(node);
        }
        for child in crate::python::named_children(node) {
            all(child, kind, out);
        }
    }

    #[test]
    fn an_argument_is_found_by_its_keyword_or_its_place_before_any_star() {
        let src = "class C:\n    def pay(self, amount, currency='EUR', *extra, key=None):\n        pass\n\n\
                   c.pay(10, 'USD')\nc.pay(currency='GBP', amount=5)\nc.pay(1, 'X', 'Y', 'Z')\n\
                   c.pay(*args)\n";
        let tree = crate::python::parse(src).expect("parses");
        let (mut defs, mut calls) = (Vec::new(), Vec::new());
        all(tree.root_node(), kinds::FUNCTION_DEFINITION, &mut defs);
        all(tree.root_node(), kinds::CALL, &mut calls);
        let pay = defs[0];
        assert_eq!(positional_parameters(pay, src), ["amount", "currency"]);
        for (list, names) in [
            ("()", &[][..]),
            ("(self)", &[]),
            ("(cls, a, /, b, *, c)", &["a", "b"]),
            (
                "(a: Dict[str, int], b: str = \"x, y\", c=(1, 2))",
                &["a", "b", "c"],
            ),
            (
                "(\n    a,  # the amount, in cents\n    b='#',\n)",
                &["a", "b"],
            ),
            ("(a, key=lambda x, y: x, z=1)", &["a", "key"]),
            ("(a, *args: int, b=2)", &["a"]),
            ("(a, **kw)", &["a"]),
            ("(a='''it's, fine''', b=1)", &["a", "b"]),
            ("(a=\"\\\", b\", c=1)", &["a", "c"]),
        ] {
            assert_eq!(positional_names(list), names, "{list}");
        }
        let passed = |call: usize, param: &str, by_position: bool| {
            argument_for(calls[call], pay, param, by_position, src).map(|a| syntax::text(a, src))
        };
        assert_eq!(passed(0, "amount", true), Some("10"));
        assert_eq!(passed(0, "currency", true), Some("'USD'"));
        assert_eq!(passed(0, "key", true), None);
        assert_eq!(passed(0, "amount", false), None);
        assert_eq!(passed(1, "amount", true), Some("5"));
        // `key` comes after `*extra`: the fourth argument goes to `extra`.
        assert_eq!(passed(2, "key", true), None);
        assert_eq!(passed(3, "amount", true), None);
    }
}
