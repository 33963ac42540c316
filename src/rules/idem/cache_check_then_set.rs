//! IDEM001 cache-check-then-set: a cache key is read, then written by a separate command
//! (`get` … `set` without `nx=True`, Django's `get_or_set`), so two concurrent attempts both see
//! nothing and both write.
use tree_sitter::Node;

use super::{CacheCall, Op};
use crate::python::{Fields, kinds, syntax};
use crate::review::Severity;
use crate::rules::facts::FunctionFacts;
use crate::rules::{Check, Ctx, Gate, Local, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "IDEM001",
    doc: include_str!("../../../rules/idem/IDEM001.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Values that can only be a freshly minted token: caching one per entity is key minting.
pub(crate) const FRESH_VALUES: &[&str] = &[
    "uuid4",
    "uuid1",
    "token_hex",
    "token_urlsafe",
    "token_bytes",
    "urandom",
];

/// Every finding is a race `races` finds; the cache calls are looked for first, once for the
/// whole family.
fn gate(s: &Scan<'_>) -> bool {
    super::has_cache_call(s) && !races(s).is_empty()
}

fn check(cx: &mut Ctx<'_>) {
    for race in races(cx) {
        report(cx, race.scope, &race.read, &race.write);
    }
}

/// The read and the write of a check-then-set, or a `get_or_set` as both.
struct Race<'t> {
    /// The function they are in; `None` at module level.
    scope: Option<Node<'t>>,
    read: CacheCall<'t>,
    write: CacheCall<'t>,
}

/// At most one race per function (or module).
fn races<'a>(cx: &impl Local<'a>) -> Vec<Race<'a>> {
    let Some(idx) = cx.index() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut scopes: Vec<Option<Node<'_>>> = vec![None];
    scopes.extend(idx.all(kinds::FUNCTION_DEFINITION).iter().map(|f| Some(*f)));
    for scope in scopes {
        let calls: Vec<CacheCall<'_>> = match scope {
            Some(func) => idx.within(func, kinds::CALL),
            None => idx.all(kinds::CALL),
        }
        .iter()
        .filter(|c| super::owned_by(idx, **c, scope))
        .filter_map(|c| super::cache_call_or_wrapper(*c, cx))
        .collect();
        if let Some((read, write)) = check_then_set(&calls) {
            out.push(Race { scope, read, write });
        } else if let Some(call) = calls.iter().find(|c| c.op == Op::GetOrSet) {
            out.push(Race {
                scope,
                read: call.clone(),
                write: call.clone(),
            });
        }
    }
    out
}

/// The first plain write preceded by a read of the same key, where no atomic claim of the key
/// comes before the read: after `set(key, ..., nx=True)` the read is of another worker's claim
/// and the write updates this one's own.
fn check_then_set<'t>(calls: &[CacheCall<'t>]) -> Option<(CacheCall<'t>, CacheCall<'t>)> {
    calls
        .iter()
        .filter(|c| c.op == Op::Write)
        .find_map(|write| {
            calls
                .iter()
                .filter(|c| c.op == Op::Read && c.node.end_byte() <= write.node.start_byte())
                .filter(|read| {
                    !calls.iter().any(|claim| {
                        claim.op == Op::AtomicWrite
                            && claim.node.end_byte() <= read.node.start_byte()
                            && claim.same_key(read)
                    })
                })
                .find(|read| read.same_key(write) && !locked_between(calls, read, write))
                .map(|read| (read.clone(), write.clone()))
        })
}

/// Whether an atomic claim of a key made from the read's (`lock_key = f"{replay_key}:lock"`,
/// `cache.add(lock_key, 1, ...)`) comes between the read and the write: a replay cache whose
/// work runs under a lock. Two racers past the read meet at the claim, and one is turned away.
fn locked_between(calls: &[CacheCall<'_>], read: &CacheCall<'_>, write: &CacheCall<'_>) -> bool {
    let derived = |key: &str| {
        key != read.key
            && (key.contains(&format!("{{{}}}", read.key))
                || key.contains(read.resolved_key.trim_end_matches(['"', '\'']))
                    && read.resolved_key.len() > 3)
    };
    calls.iter().any(|claim| {
        claim.op == Op::AtomicWrite
            && claim.node.start_byte() >= read.node.end_byte()
            && claim.node.end_byte() <= write.node.start_byte()
            && (derived(&claim.key) || derived(&claim.resolved_key))
    })
}

fn report(cx: &mut Ctx<'_>, scope: Option<Node<'_>>, read: &CacheCall<'_>, write: &CacheCall<'_>) {
    let src = cx.src();
    let lines = match scope {
        Some(func) => syntax::lines(func),
        None => (syntax::lines(read.node).0, syntax::lines(write.node).1),
    };
    let function = scope.and_then(|f| super::facts_of(cx, f));
    // A mark that an event or request was already seen, which turns the repeat away, is a
    // dedup whatever its name (`kestrel:event:{id}` bound to `seen_key`).
    let seen_marker = marks_seen(cx, read) || marks_delivery_seen(cx, scope, read);
    // The event is applied on a state transition one writer wins: two racers past the marker
    // change nothing twice.
    if seen_marker
        && let (Some(idx), Some(func)) = (cx.index(), scope)
        && (super::applies_by_state(idx, func, src)
            || says_a_repeat_is_harmless(syntax::text(func, src)))
    {
        return;
    }
    let idempotency =
        speaks_of_idempotency(cx, read, write, function) || seen_marker && guards(cx, scope, read);
    let money = super::on_money_path(cx, function);
    let http = function.is_some_and(|f| super::reaches_http(cx, f));
    let fresh = FRESH_VALUES
        .iter()
        .any(|w| written_value(cx, write).contains(w));
    // An HTTP call counts as the payment a guard protects on the money path, or where it sends
    // an amount (`json={"id": ..., "amount": amount}` to a bank): a geocoding view that caches
    // its answer guards nothing.
    let pays_here = function.is_some_and(|f| {
        f.payment
            || f.http
                && !scope.is_some_and(|func| super::fetches_only(cx, func))
                && (money || scope.is_some_and(|func| sends_money(cx, func)))
            // `return self._submit(refund)` after the claim, `_submit` making the refund:
            // the payment one call down, by a function of the change named for one.
            || money
                && f.callees.iter().any(|c| {
                    cx.change
                        .functions_named(cx.side, c)
                        .any(|(file, g)| !file.is_test && g.payment && g.qualname != f.qualname)
                })
    });
    let guard = pays_here && guards(cx, scope, read);
    // A claim helper whose caller pays only when it says yes: the read decides there.
    let claimed_for = (!guard)
        .then(|| claim_for_payment(cx, scope, read, function))
        .flatten();
    let guard = guard || claimed_for.is_some();
    // What is written when it is neither a key nor a guard: a marker (`"done"`, `1`, `True`)
    // on the money path may be a dedup nobody named; data (a rate, an access token fetched
    // again) is a read-through cache, where two racers both write what is equally right.
    let marker = written_value_node(cx, write).is_some_and(|v| {
        matches!(
            v.kind(),
            kinds::STRING | kinds::INTEGER | kinds::TRUE | kinds::FALSE
        )
    });
    if marker && !fresh && !guard && scope.is_some_and(|f| guards_only_cache_work(cx, f, read)) {
        // A lock that spares the cache duplicate writes (and gives its caller nothing to act
        // on): when two racers both pass it, the cache is written twice, and nothing is paid.
        return;
    }
    let severity = if (idempotency || fresh) && (money || http) || guard {
        Severity::Blocker
    } else if money && marker || idempotency {
        Severity::Important
    } else {
        // A read-through cache of data (a slug, a rate, an access token fetched again): two
        // racers write what is equally right, and a payment reviewer has nothing to say.
        return;
    };
    let header = src.to_ascii_lowercase().contains("idempotency-key");
    let key = format!("{} {} {}", read.resolved_key, read.method, write.method);
    let finding = cx
        .report_lines(&RULE, lines, key)
        .arg("key", read.key.clone())
        .arg("read", syntax::callee(read.node, src).to_string())
        .arg("write", syntax::callee(write.node, src).to_string())
        .arg("read_line", syntax::lines(read.node).0.to_string())
        .arg("write_line", syntax::lines(write.node).0.to_string())
        .severity(severity);
    let kind = if read.op == Op::GetOrSet {
        "get_or_set"
    } else if claimed_for.is_some() {
        "claim"
    } else if guard {
        "guard"
    } else if severity == Severity::Blocker {
        "mint"
    } else {
        "overwrite"
    };
    if let Some(caller) = claimed_for {
        finding.arg("claimed_for", caller);
    }
    finding.note(kind);
    if severity == Severity::Blocker {
        // A guard stores a marker, not a key the gateway is sent.
        finding.note(if matches!(kind, "guard" | "claim") {
            "eviction_marker"
        } else {
            "eviction"
        });
    }
    // Ask only when the change wrote the read or the write: an old race is not this PR's.
    let new_code = [read.node, write.node].iter().any(|n| {
        let (a, b) = syntax::lines(*n);
        cx.touches_added(a, b)
    });
    if !new_code || cx.side != crate::source::Side::New || severity != Severity::Blocker {
        return;
    }
    if header {
        cx.ask("idem-gateway-contract", Vec::new());
    }
    super::ask_cache_config(cx, read.node);
    cx.ask("idem-repeat-charges", Vec::new());
}

/// Calls that compute or shape data, and do nothing outside the process.
const PURE_CALLS: &[&str] = &[
    "str",
    "int",
    "float",
    "bool",
    "len",
    "repr",
    "format",
    "join",
    "split",
    "strip",
    "lower",
    "upper",
    "items",
    "keys",
    "values",
    "append",
    "extend",
    "add",
    "update",
    "sorted",
    "list",
    "dict",
    "set",
    "tuple",
    "defaultdict",
    "range",
    "enumerate",
    "zip",
    "min",
    "max",
    "sum",
    "isinstance",
    "time",
    "monotonic",
    "now",
    "dumps",
    "encode",
    "decode",
];

/// Whether all a function does once the read has decided is the write, more work on the same
/// cache (`rc.hset`, `rc.expire`) and pure computation, and it returns no value on any path:
/// the check-then-set only decides whether the cache is written now. A call between the read
/// and the write counts too (`if r.get(k): return; notify(...); r.set(k, "1")`): it is what
/// two racers would both do.
fn guards_only_cache_work(cx: &Ctx<'_>, func: Node<'_>, read: &CacheCall<'_>) -> bool {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return false;
    };
    let client = |call: Node<'_>| syntax::receiver(call).map(|r| syntax::text(r, src));
    let cache = client(read.node);
    let returns_nothing = idx
        .within(func, kinds::RETURN_STATEMENT)
        .iter()
        .filter(|r| super::owned_by(idx, **r, Some(func)))
        .all(|r| syntax::returns_none(*r));
    returns_nothing
        && cache.is_some()
        && idx
            .within(func, kinds::CALL)
            .iter()
            .filter(|c| super::owned_by(idx, **c, Some(func)))
            .filter(|c| c.start_byte() >= read.node.end_byte())
            .all(|&call| {
                client(call) == cache
                    || super::cache_call(call, cx).is_some()
                    || PURE_CALLS.contains(&syntax::callee_name(call, src))
            })
}

/// Whether the key, the names around it or the function's callers say idempotency/dedup/lock.
fn speaks_of_idempotency(
    cx: &Ctx<'_>,
    read: &CacheCall<'_>,
    write: &CacheCall<'_>,
    function: Option<&FunctionFacts>,
) -> bool {
    let src = cx.src();
    let mut texts = vec![
        read.key.clone(),
        read.resolved_key.clone(),
        write.key.clone(),
    ];
    texts.extend(syntax::bound_name(read.node, src).map(str::to_string));
    if let Some(func) = function {
        // Its class's name too: `IdempotencyRepository.reserve`.
        texts.push(func.qualname.clone());
        // What its callers bind the result to (`idempotency_key = _key(order)`).
        if let Some(file) = cx.facts {
            texts.extend(
                super::callers_of(cx, file, func, 1)
                    .into_iter()
                    .filter_map(|(_, binding)| binding.map(str::to_string)),
            );
        }
    }
    // A lock's class written in camel case (`RedisLock.acquire`) names it too.
    texts.iter().any(|t| super::is_idempotency_text(t))
        || function.is_some_and(|f| {
            syntax::name_words(&f.qualname)
                .iter()
                .any(|w| matches!(w.as_str(), "lock" | "mutex" | "semaphore"))
        })
}

/// A comment of the function that says the marker only saves work, the event being applied
/// safely twice (`# Only an optimisation: applying the same state twice is already a no-op.`):
/// the author has weighed the race.
fn says_a_repeat_is_harmless(text: &str) -> bool {
    text.lines().any(|l| {
        l.split_once('#').is_some_and(|(_, comment)| {
            let c = comment.to_ascii_lowercase();
            [
                "no-op",
                "noop",
                "idempotent",
                "optimisation",
                "optimization",
                "harmless",
            ]
            .iter()
            .any(|w| c.contains(w))
        })
    })
}

/// Whether the read's key, or the name it is bound to, says it marks something already seen:
/// `seen`, `processed`, `handled`, `delivered`, `duplicate`.
fn marks_seen(cx: &Ctx<'_>, read: &CacheCall<'_>) -> bool {
    let src = cx.src();
    let binding = syntax::bound_name(read.node, src).unwrap_or("");
    [read.key.as_str(), read.resolved_key.as_str(), binding]
        .iter()
        .flat_map(|t| t.split(|c: char| !c.is_ascii_alphanumeric()))
        .any(|w| {
            matches!(
                w.to_ascii_lowercase().as_str(),
                "seen"
                    | "processed"
                    | "handled"
                    | "applied"
                    | "delivered"
                    | "duplicate"
                    | "dup"
                    | "dupe"
            )
        })
}

/// `f"lodestar-event:{event['eventId']}"` read in a webhook view or a consumer: a delivered
/// event's own key, read to turn the repeat away, is a mark that it was seen. Elsewhere an
/// event is as likely a concert's (`eventlist:{event.slug}`).
fn marks_delivery_seen(cx: &Ctx<'_>, scope: Option<Node<'_>>, read: &CacheCall<'_>) -> bool {
    let (Some(idx), Some(func)) = (cx.index(), scope) else {
        return false;
    };
    super::webhook_marker_expires::names_a_delivery(&read.resolved_key)
        && crate::rules::err::failure_swallowed::inbound(cx, idx, func).is_some()
}

/// Whether an HTTP call of `func` passes an amount.
fn sends_money(cx: &Ctx<'_>, func: Node<'_>) -> bool {
    let (Some(idx), Some(file), src) = (cx.index(), cx.facts, cx.src()) else {
        return false;
    };
    idx.within(func, kinds::CALL).iter().any(|&call| {
        crate::rules::facts::classify_call(call, src, file, cx.vocab)
            == crate::rules::facts::Target::Http
            && crate::rules::pay::passes_money(call, src, cx.vocab)
    })
}

/// The value a write stores, with a local variable resolved (`key` → `str(uuid.uuid4())`), also
/// one the value is made from (`key.encode()`, `json.dumps({"key": key})`).
fn written_value(cx: &Ctx<'_>, write: &CacheCall<'_>) -> String {
    let Some(text) = written_value_text(cx, write) else {
        return String::new();
    };
    let mut out = super::resolve(cx, write.node, &text);
    if out == text {
        for word in text
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with(|c: char| c.is_alphabetic() || c == '_'))
        {
            let resolved = super::resolve(cx, write.node, word);
            if resolved != word {
                out.push(' ');
                out.push_str(&resolved);
            }
        }
    }
    out
}

/// The value a write stores, as written.
fn written_value_text(cx: &Ctx<'_>, write: &CacheCall<'_>) -> Option<String> {
    written_value_node(cx, write).map(|v| syntax::normalized(v, cx.src()))
}

/// The value argument of a write.
fn written_value_node<'t>(cx: &Ctx<'_>, write: &CacheCall<'t>) -> Option<Node<'t>> {
    let position = match write.method.as_str() {
        "setex" | "psetex" | "hset" => 2,
        _ => 1,
    };
    syntax::positional_args(write.node)
        .get(position)
        .copied()
        .or_else(|| syntax::keyword_arg(write.node, "value", cx.src()))
}

/// Whether the read decides, with an `if` that returns or raises, that the rest of the
/// function (its payment) is skipped: a dedup guard in front of the payment call.
/// A helper named for taking a claim or a lock (`_claim(instalment_id)`, `acquire_lock(...)`)
/// that says no from the read (`if await self.redis.get(key) is not None: return False`), and a
/// caller of it in the change that goes on to pay (`if not await self._claim(inst.id):
/// continue` before `self._capture_one(inst)`): the caller that trusts it, by its qualified name.
fn claim_for_payment(
    cx: &Ctx<'_>,
    scope: Option<Node<'_>>,
    read: &CacheCall<'_>,
    function: Option<&FunctionFacts>,
) -> Option<String> {
    let func = function.filter(|f| f.returns_value)?;
    let lower = func.name.to_ascii_lowercase();
    let claims = lower.split('_').any(|w| {
        matches!(
            w,
            "claim" | "lock" | "acquire" | "reserve" | "lease" | "take" | "begin"
        )
    });
    if !claims || !guards(cx, scope, read) {
        return None;
    }
    let pays = |f: &FunctionFacts| {
        f.payment
            || cx.vocab.is_payment_operation(&f.name)
            || f.callees.iter().any(|c| cx.vocab.is_payment_operation(c))
            || super::reaches_http(cx, f)
    };
    cx.change
        .calls_named(cx.side, &func.name)
        .filter(|(file, _)| !file.is_test)
        .find_map(|(file, call)| {
            let caller = file.function(&call.function)?;
            (caller.qualname != func.qualname && pays(caller)).then(|| caller.qualname.clone())
        })
}

fn guards(cx: &Ctx<'_>, scope: Option<Node<'_>>, read: &CacheCall<'_>) -> bool {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return false;
    };
    let Some(func) = scope else {
        return false;
    };
    let binding = syntax::bound_name(read.node, src);
    idx.within(func, kinds::IF_STATEMENT).iter().any(|stmt| {
        let Some(condition) = stmt.field("condition") else {
            return false;
        };
        let tests_read = syntax::contains(condition, read.node)
            || binding.is_some_and(|b| {
                condition.start_byte() > read.node.end_byte()
                    && syntax::text(condition, src)
                        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                        .any(|w| w == b)
            });
        // The branch leaves: `return`, `raise`, or `continue` to the next event of a batch.
        tests_read
            && stmt
                .field("consequence")
                .is_some_and(|b| !syntax::block_falls_through(b, src))
    })
}
