//! PAY007 price-from-client: a request handler takes the price, the total or the fare of what
//! is bought from the request the client sent (`body["price"]`, `payload.get("total_cents")`,
//! `data.metered_fare` of a body model) and hands it on as the amount to charge or to record
//! (`create_gift(..., price=price)`, `purchase(..., total_cents=total_cents)`,
//! `order.total = ...`). Whoever sends the request chooses what they pay.
//!
//! Left alone: an amount the payer is meant to choose (`amount`, a tip, a top-up, a donation:
//! only price, total, fare, cost and subtotal are read), a value the handler checks against its
//! own (`if total != order.total_cents: return 409`), a value named as expected
//! (`expected_total`), and handlers that neither pay nor name a payment.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, facts};

pub(crate) static RULE: Rule = Rule {
    id: "PAY007",
    doc: include_str!("../../../rules/pay/PAY007.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding reads a priced field of a request in a handler that names a payment.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && s.mentions(&[
            "price",
            "total",
            "fare",
            "cost",
            "share_cents",
            "share_amount",
            "amount_due",
            "amount_owed",
        ])
        && s.mentions(&["request", "data", "body", "payload", "cleaned_data"])
}

/// Words of a request field that the server, not the client, should know: what the thing costs.
fn priced(key: &str) -> bool {
    let words = syntax::name_words(key);
    words.iter().any(|w| {
        matches!(
            w.as_str(),
            // A guest's share of a bill, what is due or owed: the server's sums too.
            "price" | "total" | "fare" | "cost" | "subtotal" | "share" | "due" | "owed"
        )
    }) && !words.iter().any(|w| {
        matches!(
            w.as_str(),
            "expected"
                | "count"
                | "pages"
                | "items"
                | "records"
                | "results"
                | "quantity"
                | "qty"
                | "weight"
                | "distance"
        )
    })
}

/// Words of an argument or attribute that holds the money to charge or to record; one named
/// as what the client expects (`expected_total_cents=`) is there to be compared.
pub(crate) fn money_slot(name: &str) -> bool {
    let words = syntax::name_words(name);
    words.iter().any(|w| {
        matches!(
            w.as_str(),
            "amount" | "price" | "total" | "fare" | "cost" | "cents" | "minor" | "subtotal" | "sum"
        )
    }) && !words
        .iter()
        .any(|w| matches!(w.as_str(), "expected" | "displayed" | "shown"))
}

/// Words of a handler's name, of the calls it makes and of the jobs it queues that put it on a
/// payment's path.
const PAYING: &[&str] = &[
    "charge", "charges", "checkout", "purchase", "capture", "settle", "payment", "payments", "pay",
    "invoice", "billing",
];

/// Calls that read or show a value rather than charge or record it: a query's filter, a
/// computation, a response.
fn reads_only(name: &str) -> bool {
    matches!(
        name,
        "filter"
            | "exclude"
            | "get"
            | "filter_by"
            | "where"
            | "order_by"
            | "annotate"
            | "aggregate"
            | "values"
            | "count"
            | "exists"
            | "first"
            | "dict"
            | "jsonify"
            | "json"
            | "json_response"
            | "render"
            | "Response"
            | "JsonResponse"
            | "HTTPException"
    ) || [
        "get_",
        "calculate",
        "compute",
        "validate",
        "check",
        "format",
        "log",
        "render_",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// Whether a handler pays or starts a payment: its own name, a call's, or the name of a job it
/// queues (`enqueue("settle_trip", ...)`) has a paying word.
fn on_payment_path(idx: &NodeIndex<'_>, func: Node<'_>, src: &str) -> bool {
    let paying = |name: &str| {
        syntax::name_words(name)
            .iter()
            .any(|w| PAYING.contains(&w.as_str()))
    };
    paying(syntax::function_name(func, src))
        || idx.within(func, kinds::CALL).iter().any(|c| {
            let name = syntax::callee_name(*c, src);
            let queues = [
                "enqueue",
                "send_task",
                "apply_async",
                "delay",
                "schedule",
                "defer",
            ]
            .iter()
            .any(|q| name.contains(q));
            paying(syntax::callee(*c, src))
                || queues
                    && syntax::positional_args(*c).first().is_some_and(|a| {
                        a.kind() == kinds::STRING
                            && paying(syntax::text(*a, src).trim_matches(|c| c == '"' || c == '\''))
                    })
        })
}

/// The request's parsed body as a handler reads it: `request.json`, `await request.json()`,
/// `request.get_json()`, `request.data`, `request.POST`, `json.loads(request.body)`, a form's
/// `cleaned_data`.
pub(super) fn reads_request(text: &str) -> bool {
    let text = text.trim_start_matches("await ").trim();
    ["request.", "req.", "self.request."].iter().any(|r| {
        text.match_indices(r).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.') {
                return false;
            }
            let rest = &text[at + r.len()..];
            let field: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            matches!(
                field.as_str(),
                "json"
                    | "get_json"
                    | "data"
                    | "POST"
                    | "form"
                    | "body"
                    | "media"
                    | "post"
                    | "args"
                    | "GET"
                    | "query_params"
                    | "values"
            )
        })
    }) || text.ends_with("cleaned_data")
}

/// A parameter a framework fills from the body: `data: EndTripRequest` (Litestar), `body:
/// CheckoutIn`, `payload: Order` (FastAPI), in a handler with a route decorator.
pub(super) fn body_parameters<'s>(func: Node<'_>, src: &'s str) -> Vec<&'s str> {
    let Some(params) = func.field("parameters") else {
        return Vec::new();
    };
    let named: Vec<&str> = syntax::annotated_parameters(params, src)
        .into_iter()
        .filter(|(name, annotation)| {
            matches!(
                *name,
                "data" | "body" | "payload" | "request_body" | "json_body" | "form_data"
            ) && syntax::text(*annotation, src).starts_with(|c: char| c.is_ascii_uppercase())
        })
        .map(|(name, _)| name)
        .collect();
    // Asked only of a function with such a parameter: a parent is found from the root.
    let routed = !named.is_empty()
        && func
            .parent()
            .filter(|p| p.kind() == kinds::DECORATED_DEFINITION)
            .is_some_and(|d| {
                syntax::decorators(d).iter().any(|dec| {
                    let text = syntax::text(*dec, src).to_ascii_lowercase();
                    ["post", "put", "patch", "route", "api_view"]
                        .iter()
                        .any(|w| text.contains(w))
                })
            });
    // A service the handler hands the body model to (`pay_share(..., body: SharePaymentIn)`)
    // reads the request as much as the handler does.
    let model = || {
        syntax::annotated_parameters(params, src)
            .into_iter()
            .filter(|(name, _)| named.contains(name))
            .all(|(_, annotation)| request_model(syntax::text(annotation, src)))
    };
    if routed || (!named.is_empty() && model()) {
        named
    } else {
        Vec::new()
    }
}

/// Whether a class name is one of a request's body (`SharePaymentIn`, `CheckoutRequest`,
/// `RefundPayload`).
fn request_model(annotation: &str) -> bool {
    let name = annotation.rsplit('.').next().unwrap_or(annotation);
    ["Request", "Body", "Payload", "Input"]
        .iter()
        .any(|s| name.ends_with(s))
        || name
            .strip_suffix("In")
            .is_some_and(|rest| rest.ends_with(|c: char| c.is_ascii_lowercase()))
}

/// One read of a priced field of the request, and the names it reached.
struct Read<'t> {
    node: Node<'t>,
    key: String,
}

/// The priced reads of `func`: `body["price"]`, `payload.get("total_cents")`, `data.fare`,
/// `request.json["total"]`, where `body`/`payload`/`data` hold the request's body.
fn priced_reads<'t>(func: Node<'t>, sources: &[&str], src: &str) -> Vec<Read<'t>> {
    let is_source = |node: Node<'_>| {
        let text = syntax::text(node, src);
        let text = text.trim_start_matches("await ").trim();
        sources.contains(&text) || reads_request(text)
    };
    // A key built at run time (`f"{field}_price"`) names no one field.
    let key_of = |node: Node<'_>| -> Option<String> {
        (node.kind() == kinds::STRING && !syntax::text(node, src).starts_with(['f', 'F'])).then(
            || {
                syntax::text(node, src)
                    .trim_matches(|c| c == '"' || c == '\'')
                    .to_string()
            },
        )
    };
    let mut out = Vec::new();
    let mut cursor = func.walk();
    let mut stack = vec![func];
    while let Some(node) = stack.pop() {
        let read = match node.kind() {
            kinds::SUBSCRIPT => node
                .field("value")
                .filter(|v| is_source(*v))
                .and(node.field("subscript"))
                .and_then(key_of),
            kinds::CALL => syntax::receiver(node)
                .filter(|r| is_source(*r) && syntax::callee_name(node, src) == "get")
                .and_then(|_| syntax::positional_args(node).first().copied())
                .and_then(key_of),
            kinds::ATTRIBUTE => node
                .field("object")
                .filter(|o| {
                    o.kind() == kinds::IDENTIFIER && sources.contains(&syntax::text(*o, src))
                })
                .and(node.field("attribute"))
                .map(|a| syntax::text(a, src).to_string()),
            _ => None,
        };
        match read {
            Some(key) if priced(&key) => out.push(Read { node, key }),
            _ => {
                cursor.reset(node);
                if cursor.goto_first_child() {
                    loop {
                        let child = cursor.node();
                        // A nested function is a handler of its own.
                        if child.kind() != kinds::FUNCTION_DEFINITION {
                            stack.push(child);
                        }
                        if !cursor.goto_next_sibling() {
                            break;
                        }
                    }
                }
            }
        }
    }
    out.sort_by_key(|r| r.node.start_byte());
    out
}

/// What a value holds of the client's priced reads: the first read it contains, directly or
/// through a name bound to one.
fn origin(
    value: Node<'_>,
    reads: &[Read<'_>],
    names: &[(String, usize)],
    src: &str,
) -> Option<usize> {
    let span = value.byte_range();
    if let Some(i) = reads.iter().position(|r| {
        span.start <= r.node.start_byte()
            && r.node.end_byte() <= span.end
            && !set_aside(r.node, value, src)
    }) {
        return Some(i);
    }
    let text = syntax::text(value, src);
    names.iter().find_map(|(name, i)| {
        text.match_indices(name.as_str())
            .any(|(at, _)| {
                let word = |c: char| c.is_alphanumeric() || c == '_';
                !text[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| word(c) || c == '.')
                    && !text[at + name.len()..].chars().next().is_some_and(word)
            })
            .then_some(*i)
    })
}

/// Whether a read inside `value` sits under a key or a keyword that is not money
/// (`{"metadata": {"amount_shown": body["total"]}}`, `describe(note=body["total"])`): it goes
/// along, not as the amount.
fn set_aside(read: Node<'_>, value: Node<'_>, src: &str) -> bool {
    let mut node = read;
    while node.id() != value.id() {
        let Some(parent) = node.parent() else {
            return false;
        };
        let label = match parent.kind() {
            kinds::PAIR => parent.field("key"),
            kinds::KEYWORD_ARGUMENT => parent.field("name"),
            _ => None,
        };
        if let Some(label) = label
            && label.id() != node.id()
            && !money_slot(syntax::text(label, src).trim_matches(|c| c == '"' || c == '\''))
        {
            return true;
        }
        node = parent;
    }
    false
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        // What the function reads of a request first: most functions read none.
        let reads =
            || reads_request(syntax::text(func, src)) || !body_parameters(func, src).is_empty();
        if reads() && on_payment_path(idx, func, src) {
            handler(cx, idx, func, src);
        }
    }
}

fn handler(cx: &mut Ctx<'_>, idx: &NodeIndex<'_>, func: Node<'_>, src: &str) {
    // The function's own assignments, read once for both questions below.
    let assignments: Vec<(Node<'_>, Node<'_>)> = idx
        .within(func, kinds::ASSIGNMENT)
        .iter()
        .filter(|a| {
            idx.enclosing(**a, kinds::FUNCTION_DEFINITION)
                .is_some_and(|f| f.id() == func.id())
        })
        .filter_map(|a| Some((a.field("left")?, a.field("right")?)))
        .collect();
    // Names bound to the request's body, and the body model's parameters.
    let mut sources: Vec<&str> = body_parameters(func, src);
    sources.extend(
        assignments
            .iter()
            .filter(|(l, r)| l.kind() == kinds::IDENTIFIER && reads_request(syntax::text(*r, src)))
            .map(|(l, _)| syntax::text(*l, src)),
    );
    let reads = priced_reads(func, &sources, src);
    if reads.is_empty() {
        return;
    }
    // Names that carry a read on, in the order they are bound.
    let mut names: Vec<(String, usize)> = Vec::new();
    for &(left, right) in &assignments {
        let pairs: Vec<(Node<'_>, Node<'_>)> = match (left.kind(), right.kind()) {
            (kinds::IDENTIFIER, _) => vec![(left, right)],
            ("pattern_list" | kinds::TUPLE, "expression_list" | kinds::TUPLE) => {
                crate::python::named_children(left)
                    .into_iter()
                    .zip(crate::python::named_children(right))
                    .collect()
            }
            _ => Vec::new(),
        };
        for (target, value) in pairs {
            if target.kind() != kinds::IDENTIFIER {
                continue;
            }
            if let Some(i) = origin(value, &reads, &names, src) {
                let name = syntax::text(target, src).to_string();
                if !names.iter().any(|(n, _)| *n == name) {
                    names.push((name, i));
                }
            }
        }
    }
    if checked_against_ours(idx, func, &reads, &names, src) {
        return;
    }
    let Some((read, sink)) = sink(cx, idx, func, &reads, &names, src) else {
        return;
    };
    let read = &reads[read];
    cx.report(&RULE, read.node)
        .arg("handler", facts::qualname(func, idx, src))
        .arg("read", syntax::text(read.node, src).to_string())
        .arg("field", read.key.clone())
        .arg("sink", super::first_line(sink, src))
        .arg("sink_line", syntax::lines(sink).0.to_string());
}

/// Where a read reaches money: a keyword argument named for an amount (`price=price`,
/// `total_cents=total_cents`), an amount attribute set from it (`order.total = total`), or an
/// argument of a paying call.
fn sink<'t>(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'t>,
    func: Node<'_>,
    reads: &[Read<'_>],
    names: &[(String, usize)],
    src: &str,
) -> Option<(usize, Node<'t>)> {
    let calls = idx.within(func, kinds::CALL).iter().filter_map(|&call| {
        if reads_only(syntax::callee_name(call, src)) {
            return None;
        }
        let keyword = syntax::keyword_args(call, src)
            .into_iter()
            .filter(|(k, _)| money_slot(k))
            .find_map(|(_, v)| origin(v, reads, names, src));
        let paid = || {
            crate::rules::pay::pays(cx, call, src)
                .then(|| {
                    syntax::positional_args(call)
                        .into_iter()
                        .find_map(|a| origin(a, reads, names, src))
                })
                .flatten()
        };
        keyword.or_else(paid).map(|i| (i, call))
    });
    let assignments = idx
        .within(func, kinds::ASSIGNMENT)
        .iter()
        .filter_map(|&assign| {
            let left = assign.field("left")?;
            let attribute = left
                .field("attribute")
                .filter(|_| left.kind() == kinds::ATTRIBUTE)?;
            if !money_slot(syntax::text(attribute, src)) {
                return None;
            }
            origin(assign.field("right")?, reads, names, src).map(|i| (i, assign))
        });
    calls.chain(assignments).min_by_key(|(_, n)| n.start_byte())
}

/// Whether the handler compares what the client sent with a value of its own (`if total !=
/// order.total_cents:`), the way a client's expected total is checked before a charge.
fn checked_against_ours(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    reads: &[Read<'_>],
    names: &[(String, usize)],
    src: &str,
) -> bool {
    idx.within(func, kinds::COMPARISON_OPERATOR)
        .iter()
        .any(|c| {
            let (Some(a), Some(b)) = (c.named_child(0), c.named_child(1)) else {
                return false;
            };
            let operator = src.get(a.end_byte()..b.start_byte()).unwrap_or("").trim();
            if !matches!(operator, "==" | "!=") {
                return false;
            }
            let carries = |n: Node<'_>| {
                let text = syntax::text(n, src);
                reads.iter().any(|r| syntax::text(r.node, src) == text)
                    || names.iter().any(|(name, _)| name == text)
            };
            let ours = |n: Node<'_>| {
                matches!(
                    n.kind(),
                    kinds::ATTRIBUTE | kinds::CALL | kinds::IDENTIFIER | kinds::SUBSCRIPT
                ) && origin(n, reads, names, src).is_none()
            };
            carries(a) && ours(b) || carries(b) && ours(a)
        })
}
