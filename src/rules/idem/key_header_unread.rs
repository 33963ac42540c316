//! IDEM018 key-header-unread: the idempotency key goes out under a header the provider does
//! not read: `Idempotence-Key` to Adyen, `X-Idempotency-Key` to GoCardless, `Idempotency-Key`
//! to PayPal (which reads `PayPal-Request-Id`). Providers pass over headers they do not know, so
//! every request goes out with no key at all; the client's retries, the job run again and the
//! replay of what was left unknown are each taken for a new payment. Tests that read the
//! module's constant pass all the same.
//!
//! Said only where the file is the provider's client by its own words (its module, a class
//! named for the provider, or the provider's host), and sends to no other host; a header read
//! from a request (`request.headers.get("X-Idempotency-Key")`) is the service's own API, not the
//! provider's.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "IDEM018",
    doc: include_str!("../../../rules/idem/IDEM018.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is a literal header name of idempotency in code, not a test, beside a
/// function that speaks of idempotency (the one that sends the key), as the facts pass read it.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && s.facts.functions.iter().any(|f| f.mentions_idempotency)
}

/// How the header's name is spelt: `Idempotency-Key`, `X-IDEMPOTENCY-KEY`.
const STEMS: [&[u8]; 2] = [b"dempot", b"DEMPOT"];

/// A provider, the words that name it in a module or a class, its hosts, and the headers it
/// reads an idempotency key from (lowercase; headers are compared without case).
struct Provider {
    name: &'static str,
    words: &'static [&'static str],
    hosts: &'static [&'static str],
    headers: &'static [&'static str],
}

/// Only providers whose header is documented; one that takes its key in the body (Square,
/// Plaid, Airwallex) or none at all is left out.
const PROVIDERS: &[Provider] = &[
    Provider {
        name: "Stripe",
        words: &["stripe"],
        hosts: &["stripe.com"],
        headers: &["Idempotency-Key"],
    },
    Provider {
        name: "Adyen",
        words: &["adyen"],
        hosts: &["adyen.com"],
        headers: &["Idempotency-Key"],
    },
    Provider {
        name: "GoCardless",
        words: &["gocardless"],
        hosts: &["gocardless.com"],
        headers: &["Idempotency-Key"],
    },
    Provider {
        name: "Mollie",
        words: &["mollie"],
        hosts: &["mollie.com"],
        headers: &["Idempotency-Key"],
    },
    Provider {
        name: "Mangopay",
        words: &["mangopay"],
        hosts: &["mangopay.com"],
        headers: &["Idempotency-Key"],
    },
    Provider {
        name: "PayPal",
        words: &["paypal"],
        hosts: &["paypal.com"],
        headers: &["PayPal-Request-Id"],
    },
    Provider {
        name: "Checkout.com",
        words: &["cko"],
        hosts: &["checkout.com"],
        headers: &["Cko-Idempotency-Key"],
    },
    Provider {
        name: "Klarna",
        words: &["klarna"],
        hosts: &["klarna.com"],
        headers: &["Klarna-Idempotency-Key"],
    },
    Provider {
        name: "Mercado Pago",
        words: &["mercadopago"],
        hosts: &["mercadopago.com"],
        headers: &["X-Idempotency-Key"],
    },
    Provider {
        name: "Razorpay",
        words: &["razorpay"],
        hosts: &["razorpay.com"],
        headers: &["X-Refund-Idempotency", "X-Payout-Idempotency"],
    },
    Provider {
        name: "YooKassa",
        words: &["yookassa"],
        hosts: &["yookassa.ru"],
        headers: &["Idempotence-Key"],
    },
    Provider {
        name: "Chargebee",
        words: &["chargebee"],
        hosts: &["chargebee.com"],
        headers: &["chargebee-idempotency-key"],
    },
    Provider {
        name: "Xendit",
        words: &["xendit"],
        hosts: &["xendit.co"],
        // The disbursements API reads the older name.
        headers: &["Idempotency-Key", "X-Idempotency-Key"],
    },
];

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    let Some(file) = cx.file() else {
        return;
    };
    let literals = header_literals(file.root(), src);
    if !literals.iter().any(|l| {
        let (first, last) = syntax::lines(*l);
        cx.touches_added(first, last)
    }) {
        return;
    }
    let Some(providers) = providers_of(cx.path, idx, src) else {
        return;
    };
    let provider = providers
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(" / ");
    let expected: Vec<&str> = providers.iter().flat_map(|p| p.headers).copied().collect();
    // Borrowed from the versions, not from `cx`, which the reports below borrow.
    let versions = cx.versions;
    let old = versions.old.as_ref().map(|f| f.text.as_str());
    for literal in literals {
        let Some(header) = syntax::string_value(literal, src) else {
            continue;
        };
        if expected.iter().any(|e| e.eq_ignore_ascii_case(header)) {
            continue;
        }
        let (first, last) = syntax::lines(literal);
        if !cx.touches_added(first, last) || read_from_a_request(idx, literal, src) {
            continue;
        }
        let mut shown: Vec<String> = expected.iter().map(|e| format!("`{e}`")).collect();
        shown.dedup();
        // The old version sent the name the provider reads: the change renamed it.
        let was = old.and_then(|text| {
            expected.iter().find(|e| {
                memchr::memmem::find(text.as_bytes(), format!("\"{e}\"").as_bytes()).is_some()
            })
        });
        let function = idx
            .enclosing(literal, kinds::FUNCTION_DEFINITION)
            .map(|f| crate::rules::facts::qualname(f, idx, src))
            .unwrap_or_default();
        let finding = cx
            .report(&RULE, literal)
            .arg("header", header.to_string())
            .arg("provider", provider.clone())
            .arg("expected", shown.join(" or "));
        if let Some(was) = was {
            finding.arg("was", *was).note("renamed");
        }
        finding.function = function;
    }
}

/// The file's plain string literals that name a header of an idempotency key:
/// `"Idempotency-Key"`, `"X-Refund-Idempotency"`, `"Idempotence-Key"`; not a body field
/// (`"idempotency_key"`) nor an answer's header (`"Idempotent-Replayed"`).
fn header_literals<'t>(root: Node<'t>, src: &str) -> Vec<Node<'t>> {
    let mut found: Vec<Node<'t>> = Vec::new();
    let places = STEMS
        .iter()
        .flat_map(|stem| memchr::memmem::find_iter(src.as_bytes(), stem));
    for at in places {
        let Some(mut node) = root.descendant_for_byte_range(at, at) else {
            continue;
        };
        while node.kind() != kinds::STRING {
            match node.parent() {
                Some(parent) if node.kind() != kinds::BLOCK => node = parent,
                _ => break,
            }
        }
        if node.kind() != kinds::STRING
            || found.iter().any(|f| f.id() == node.id())
            || !header_name(syntax::string_value(node, src).unwrap_or_default())
        {
            continue;
        }
        found.push(node);
    }
    found
}

/// `Idempotency-Key`, `X-Refund-Idempotency`: words joined by hyphens, one of them of
/// idempotency, the last a key, an id or the idempotency itself.
fn header_name(text: &str) -> bool {
    if !text.contains('-') || !text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return false;
    }
    let lower = text.to_ascii_lowercase();
    let last = lower.rsplit('-').next().unwrap_or_default();
    lower.contains("idempot")
        && matches!(
            last,
            "key" | "id" | "uuid" | "token" | "idempotency" | "idempotence"
        )
}

/// The providers the file is a client of, by the words of its path and of its classes and by
/// the hosts it sends to; `None` when it names none, or sends to a host of no provider (a
/// proxy of the service's own, which may read any header it likes).
fn providers_of(path: &str, idx: &NodeIndex<'_>, src: &str) -> Option<Vec<&'static Provider>> {
    let mut names: Vec<String> = path
        .rsplit('/')
        .next()
        .map(|f| f.trim_end_matches(".py"))
        .into_iter()
        .chain(path.split('/'))
        .map(|p| p.to_ascii_lowercase().replace(['_', '-'], ""))
        .collect();
    for class in idx.all(kinds::CLASS_DEFINITION) {
        if let Some(name) = class.field("name") {
            names.push(syntax::text(name, src).to_ascii_lowercase());
        }
    }
    let words: Vec<String> = names
        .iter()
        .flat_map(|n| syntax::name_words(n))
        .chain(names.iter().cloned())
        .collect();
    let hosts = hosts(src);
    if hosts.iter().any(|h| {
        !PROVIDERS
            .iter()
            .any(|p| p.hosts.iter().any(|s| on_host(h, s)))
    }) {
        return None;
    }
    let found: Vec<&Provider> = PROVIDERS
        .iter()
        .filter(|p| {
            hosts.iter().any(|h| p.hosts.iter().any(|s| on_host(h, s)))
                || p.words.iter().any(|w| {
                    names.iter().any(|n| *w != "cko" && n.contains(w))
                        || words.iter().any(|x| x == w)
                })
        })
        .collect();
    (!found.is_empty()).then_some(found)
}

/// Whether `host` is `site` or one of its subdomains (`checkout-test.adyen.com`).
fn on_host(host: &str, site: &str) -> bool {
    host == site || host.ends_with(&format!(".{site}"))
}

/// The hosts of the file's `http://` and `https://` addresses, lowercase; not a local one.
fn hosts(src: &str) -> Vec<String> {
    let mut hosts = Vec::new();
    for at in memchr::memmem::find_iter(src.as_bytes(), b"://") {
        let scheme = src[..at].rsplit(|c: char| !c.is_ascii_alphabetic()).next();
        if !matches!(scheme, Some("http" | "https")) {
            continue;
        }
        let host: String = src[at + 3..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
            .collect::<String>()
            .to_ascii_lowercase();
        if host.is_empty()
            || matches!(host.as_str(), "localhost" | "127.0.0.1" | "0.0.0.0")
            || host.ends_with(".local")
            || !host.contains('.')
        {
            continue;
        }
        hosts.push(host);
    }
    hosts
}

/// Whether the literal is read from what came in: `request.headers.get("X-Idempotency-Key")`,
/// `request.headers["Idempotency-Key"]` outside an assignment to it, `"Idempotency-Key" in
/// headers`.
fn read_from_a_request(idx: &NodeIndex<'_>, literal: Node<'_>, src: &str) -> bool {
    let Some(parent) = literal.parent() else {
        return false;
    };
    match parent.kind() {
        kinds::COMPARISON_OPERATOR => true,
        kinds::SUBSCRIPT => !parent
            .parent()
            .is_some_and(|p| p.kind() == kinds::ASSIGNMENT && p.field("left") == Some(parent)),
        kinds::ARGUMENT_LIST => parent.parent().is_some_and(|call| {
            call.kind() == kinds::CALL
                && matches!(
                    idx.callee_name(call, src),
                    "get" | "pop" | "getlist" | "getheader" | "get_header"
                )
        }),
        _ => false,
    }
}
