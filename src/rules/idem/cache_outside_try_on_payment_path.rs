//! IDEM003 cache-outside-try-on-payment-path: a function that makes the payment/HTTP call also
//! reaches the cache (directly or through a helper of the change) outside any `try`, so a cache
//! outage escapes from the payment call as a connection error nobody decided on.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::facts::{self, FileFacts, Target};
use crate::rules::{Check, Ctx, Gate, Rule, Scan, reach};

pub(crate) static RULE: Rule = Rule {
    id: "IDEM003",
    doc: include_str!("../../../rules/idem/IDEM003.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Outside tests, every finding is in a function that pays or calls HTTP.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && s.facts.functions.iter().any(|f| f.payment || f.http)
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), Some(file)) = (cx.index(), cx.facts) else {
        return;
    };
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        let Some(paying) = super::facts_of(cx, func) else {
            continue;
        };
        // An HTTP call counts only on the money path: a receipt fetch next to a cache is not a
        // payment.
        let pays = paying.payment || paying.http && super::on_money_path(cx, Some(paying));
        if !pays || file.is_test {
            continue;
        }
        let first = idx
            .within(func, kinds::CALL)
            .iter()
            .filter(|c| super::owned_by(idx, **c, Some(func)))
            .filter(|c| !inside_try(idx, **c, func))
            .find_map(|c| cache_access(cx, *c, &paying.name).map(|access| (*c, access)));
        let Some((call, access)) = first else {
            continue;
        };
        // Asked only of a function that would be reported: both read more than its facts.
        if !paying.payment && super::fetches_only(cx, func)
            || serves_requests(cx, file, paying)
            || lock_for_the_run(cx, idx, func, call)
        {
            continue;
        }
        let callee = syntax::callee(call, cx.src()).to_string();
        let function = paying.qualname.clone();
        // Django's cache raises what its backend raises: naming redis-py's error there would
        // send the reader to catch the wrong class.
        // Nor where the client is a memcached one (pymemcache's `mc`).
        // Or a client handed in, called as pymemcache's is (`add(key, "", expire=ttl,
        // noreply=False)`).
        let memcached = file.imports.iter().any(|i| i.target.contains("memcache"))
            || callee.rsplit('.').nth(1).is_some_and(|r| {
                matches!(r.trim_start_matches('_'), "mc") || r.contains("memcache")
            })
            || ["noreply", "expire"]
                .iter()
                .any(|k| syntax::keyword_arg(call, k, cx.src()).is_some());
        let error = if access.django || memcached {
            ""
        } else {
            " (`redis.ConnectionError`)"
        };
        let finding = cx
            .report(&RULE, call)
            .arg("call", callee)
            .arg("function", function)
            .arg("error", error);
        if let Some(helper) = access.via {
            finding.arg("helper", helper).note("via");
        }
        if access.django {
            finding.note("django");
        }
    }
}

/// Whether a function runs only to answer a web request: it is a route itself, or every
/// function of the change that calls one of its name is a route or called only by routes. There
/// a cache outage fails the request with a 5xx before its answer, and the client's retry is the
/// decision the rule asks for; a task or a library has no such caller to fall back on. Callers
/// are taken by name, which can only add callers that are not routes: the answer errs towards
/// reporting.
fn serves_requests(cx: &Ctx<'_>, file: &FileFacts, func: &facts::FunctionFacts) -> bool {
    if is_route(func) || handles_webhooks(cx, func) {
        return true;
    }
    let Some(callers) = callers_by_name(cx, file, func) else {
        return false;
    };
    // A caller that catches the outage (a batch that logs one payee's crash and goes on to
    // the next) has decided what it means.
    !callers.is_empty()
        && callers.iter().all(|(caller_file, caller)| {
            is_route(caller)
                || sweeps_records(caller)
                || caller.caught.iter().any(|t| catches_outage(t))
                || callers_by_name(cx, caller_file, caller)
                    .is_some_and(|up| !up.is_empty() && up.iter().all(|(_, f)| is_route(f)))
        })
}

/// A run over the records left in a state (`retry_unknown_captures`, `resend_stuck_payouts`,
/// `reconcile_pending`): it queries them and takes each again. A cache outage stops the run
/// before the request, and the next run takes the same records: the rerun is the decision.
fn sweeps_records(func: &facts::FunctionFacts) -> bool {
    let words = syntax::name_words(&func.name);
    let sweeps = words.iter().any(|w| {
        matches!(
            w.as_str(),
            "retry"
                | "resume"
                | "reconcile"
                | "sweep"
                | "requeue"
                | "redrive"
                | "resend"
                | "stale"
                | "stuck"
                | "stalled"
                | "unknown"
                | "pending"
        )
    });
    let queries = func.callees.iter().any(|c| {
        matches!(
            c.as_str(),
            "select" | "filter" | "where" | "find" | "fetch" | "fetchall" | "query" | "scalars"
        )
    });
    sweeps && queries
}

/// A method of a class of webhook handling (`WebhookProcessor._capture_outcome`), or a function
/// of webhook handling, that records what the provider reported and sends it nothing, itself or
/// a few calls down: a cache outage fails the delivery, and the provider's redelivery is the
/// retry. A handler that moves money
/// itself (a capture on `payment_intent.succeeded`) still has to decide.
fn handles_webhooks(cx: &Ctx<'_>, func: &facts::FunctionFacts) -> bool {
    let class = func
        .qualname
        .rsplit_once('.')
        .map_or("", |(class, _)| class);
    let reaches = |t: &reach::Trait| {
        cx.change
            .reach_surely(
                cx.side,
                &func.name,
                Some(std::slice::from_ref(&func.qualname)),
                2,
                t,
            )
            .is_some()
    };
    // Or a function of its own named for one (`handle_transfer_notification`), or of a module
    // of them (`payouts/webhooks.py`).
    let webhook = syntax::names_a_notification(class)
        || class.is_empty()
            && (syntax::names_a_notification(&func.name)
                || cx
                    .facts
                    .is_some_and(|f| syntax::names_a_notification(&f.module)));
    webhook && !func.http && !func.sdk && !reaches(&reach::HTTP) && !reaches(&reach::SDK)
}

/// The functions of the change (this side, tests aside) that call a function of `func`'s name,
/// other than `func` itself; `None` when one such call is at module level, which runs on
/// import, not for a request.
fn callers_by_name<'c>(
    cx: &Ctx<'c>,
    file: &FileFacts,
    func: &facts::FunctionFacts,
) -> Option<Vec<(&'c FileFacts, &'c facts::FunctionFacts)>> {
    let mut out: Vec<(&FileFacts, &facts::FunctionFacts)> = Vec::new();
    // Tests call everything; they are not who runs the code in production.
    let calls = cx.change.calls_named(cx.side, &func.name);
    for (caller_file, site) in calls.filter(|(f, _)| !f.is_test) {
        let caller = caller_file.function(&site.function)?;
        let same = |f: &FileFacts, c: &facts::FunctionFacts| {
            f.path == caller_file.path && c.qualname == caller.qualname
        };
        if !same(file, func) && !out.iter().any(|(f, c)| same(f, c)) {
            out.push((caller_file, caller));
        }
    }
    Some(out)
}

/// A function a web framework calls for a request: `@app.post("/...")`, `@bp.route(...)`,
/// `@router.get(...)`, DRF's `@api_view([...])` and `@action(...)`, Django's `@require_POST`.
fn is_route(func: &facts::FunctionFacts) -> bool {
    // A class-based view's handler: Falcon's `on_post(self, req, resp)`, a Django or DRF view's
    // `post(self, request)`, Starlette's `HTTPEndpoint`.
    let class = func
        .qualname
        .rsplit_once('.')
        .map_or("", |(class, _)| class.rsplit('.').next().unwrap_or(class));
    let takes_request = func
        .params
        .split(',')
        .next()
        .is_some_and(|p| matches!(p, "request" | "req"));
    let handler = match func.name.as_str() {
        "on_get" | "on_post" | "on_put" | "on_patch" | "on_delete" => true,
        "get" | "post" | "put" | "patch" | "delete" => {
            ["View", "ViewSet", "Resource", "Endpoint", "Handler"]
                .iter()
                .any(|s| class.ends_with(s))
        }
        _ => false,
    };
    if handler && takes_request {
        return true;
    }
    func.decorators.iter().any(|d| {
        let (callee, args) = d.split_once('(').unwrap_or((d, ""));
        let callee = callee.trim();
        let (receiver, last) = callee.rsplit_once('.').unwrap_or(("", callee));
        let path_first = args.trim_start().starts_with(['"', '\'', '/']) || args.contains("path=");
        match last {
            "api_view" | "action" | "require_POST" | "require_http_methods" | "view_config" => true,
            // `mock.patch(...)` is not a route: a route names its path first, on an app, a
            // router or a blueprint.
            "route" | "get" | "post" | "put" | "patch" | "delete" | "api_route" => {
                !receiver.is_empty() && !receiver.contains("mock") && path_first
            }
            _ => false,
        }
    })
}

/// How a paying function reaches the cache.
struct Access {
    /// The helper of the change it goes through; `None` for a cache call of its own.
    via: Option<String>,
    /// Whether the cache is Django's (`django.core.cache`) rather than a Redis client.
    django: bool,
}

/// A direct cache call, or a call of a function of the change that reaches a cache without
/// paying itself.
fn cache_access(cx: &Ctx<'_>, call: Node<'_>, caller: &str) -> Option<Access> {
    let src = cx.src();
    let file = cx.facts?;
    if let Some(direct) = super::cache_call(call, cx) {
        return Some(Access {
            via: None,
            django: direct.django,
        });
    }
    if facts::classify_call(call, src, file, cx.vocab) == Target::Cache {
        return Some(Access {
            via: None,
            django: django_cache_only(file),
        });
    }
    let name = syntax::callee_name(call, src);
    if name.is_empty() || name == caller {
        return None;
    }
    let side = cx.side;
    if cx.change.reaches(side, name, 2, &reach::HTTP_OR_PAYMENT) {
        return None;
    }
    // Every function of that name must reach the cache: a view's `form_invalid` is not the
    // one of another class that reads a cache.
    let reach = cx.change.reach_surely(side, name, None, 2, &reach::CACHE)?;
    // A helper that catches the cache's errors has decided what an outage means (a domain
    // error, a fallback): the payment call does not see a connection error.
    let decided = reach.path.iter().any(|helper| {
        cx.change
            .functions_named(side, helper)
            .any(|(_, f)| f.caught.iter().any(|t| catches_outage(t)))
    });
    // Redis as the service's own store (`TripStore.update_tip`, `WalletRepository.save`): its
    // outage is the database's, which no one wraps at every write, not a cache's beside the
    // payment.
    // Not a store of keys, claims or locks (`IdempotencyRepository.reserve`): that is the
    // cache beside the payment this rule is about.
    let store = cx.change.functions_named(side, name).all(|(_, f)| {
        let guards = syntax::name_words(&f.qualname).iter().any(|w| {
            w.starts_with("idempot")
                || w.starts_with("dedup")
                || matches!(
                    w.as_str(),
                    "lock" | "locks" | "claim" | "claims" | "reserve" | "acquire" | "seen"
                )
        });
        !guards
            && f.qualname.rsplit_once('.').is_some_and(|(class, _)| {
                let class = class.rsplit('.').next().unwrap_or(class);
                ["Store", "Repository", "Repo", "Dao", "DAO", "Ledger"]
                    .iter()
                    .any(|s| class.ends_with(s))
            })
    });
    // A helper that only drops a cached view (`cache.delete(summary_key)` after booking)
    // guards nothing the payment depends on.
    let only_invalidates = {
        let mut cache_calls = reach
            .file
            .calls
            .iter()
            .filter(|c| *c.function == *reach.function.qualname)
            .filter(|c| {
                c.receiver().is_some_and(|r| {
                    facts::is_cache_name(facts::last_name(r), reach.file, cx.vocab)
                })
            })
            .peekable();
        cache_calls.peek().is_some()
            && cache_calls.all(|c| {
                matches!(
                    c.name(),
                    "delete" | "delete_many" | "unlink" | "delete_pattern" | "clear"
                )
            })
    };
    if decided || store || only_invalidates {
        return None;
    }
    Some(Access {
        via: Some(name.to_string()),
        django: django_cache_only(reach.file),
    })
}

/// An `except` type that a cache outage raises into: redis-py's and pymemcache's errors, the
/// builtin `ConnectionError`/`TimeoutError`/`OSError` they derive from, or everything.
fn catches_outage(caught: &str) -> bool {
    matches!(
        facts::last_name(caught),
        "RedisError"
            | "ConnectionError"
            | "TimeoutError"
            | "OSError"
            | "MemcacheError"
            | "Exception"
            | "BaseException"
    )
}

/// Whether a file's cache can only be Django's: it imports `django.core.cache` and nothing of
/// redis-py's.
fn django_cache_only(file: &FileFacts) -> bool {
    let imports = |prefix: &str| file.imports.iter().any(|i| i.target.starts_with(prefix));
    imports("django.core.cache") && !imports("redis")
}

/// Whether `node` sits in the body of a `try` (inside `func`) that has an `except` clause.
/// Whether the call takes a lock for the run, before anything is done (`if not
/// cache.add(lock, ...)`, released in a `finally`): a cache outage there stops the run before
/// any money moves, and the run fails loudly, which is a decision.
fn lock_for_the_run(cx: &Ctx<'_>, idx: &NodeIndex<'_>, func: Node<'_>, call: Node<'_>) -> bool {
    let src = cx.src();
    // `with self.locks.hold(f"payout:seller:{id}", ttl_ms=...):` around the work: a lock the
    // context manager takes before anything is done and gives back on the way out.
    let held_by_a_with = idx.within(func, kinds::WITH_STATEMENT).iter().any(|w| {
        syntax::contains(*w, call)
            && w.field("body").is_none_or(|b| !syntax::contains(b, call))
            && syntax::names_a_lock(syntax::callee(call, src))
    });
    if held_by_a_with {
        return true;
    }
    // `_acquire_order_lock(order_id)`, then `try: ... finally: _release_order_lock(order_id)`:
    // the same, through helpers named for the lock.
    let first_argument = |c: Node<'_>| {
        syntax::positional_args(c)
            .first()
            .map(|a| syntax::normalized(*a, src))
    };
    if syntax::names_a_lock(syntax::callee(call, src))
        && released_in_a_finally(idx, func, call, |d| {
            syntax::names_a_lock(syntax::callee(d, src))
                && first_argument(d) == first_argument(call)
        })
    {
        return true;
    }
    let Some(claim) =
        super::cache_call(call, cx).filter(|c| matches!(c.op, super::Op::AtomicWrite))
    else {
        return false;
    };
    released_in_a_finally(idx, func, call, |d| {
        matches!(
            syntax::callee_name(d, src),
            "delete" | "unlink" | "delete_many"
        ) && first_argument(d).is_some_and(|key| key == claim.key || key == claim.resolved_key)
    })
}

/// Whether a `try` of `func` after `call` has a `finally` that makes a call `releases` accepts.
/// (`finally` is no kind the index keeps: read from the `try` statements themselves.)
fn released_in_a_finally(
    idx: &NodeIndex<'_>,
    func: Node<'_>,
    call: Node<'_>,
    releases: impl Fn(Node<'_>) -> bool,
) -> bool {
    idx.within(func, kinds::TRY_STATEMENT)
        .iter()
        .filter(|t| t.start_byte() > call.end_byte())
        .flat_map(|&t| crate::python::named_children(t))
        .filter(|c| c.kind() == kinds::FINALLY_CLAUSE)
        .any(|f| idx.within(f, kinds::CALL).iter().any(|&d| releases(d)))
}

fn inside_try(idx: &NodeIndex<'_>, node: Node<'_>, func: Node<'_>) -> bool {
    let mut current = idx.enclosing(node, kinds::TRY_STATEMENT);
    while let Some(stmt) = current {
        if stmt.start_byte() < func.start_byte() {
            return false;
        }
        let in_body = stmt
            .field("body")
            .is_some_and(|b| syntax::contains(b, node));
        let mut cursor = stmt.walk();
        let handles = stmt
            .named_children(&mut cursor)
            .any(|c| c.kind() == kinds::EXCEPT_CLAUSE || c.kind() == kinds::EXCEPT_GROUP_CLAUSE);
        if in_body && handles {
            return true;
        }
        current = idx.enclosing(stmt, kinds::TRY_STATEMENT);
    }
    false
}
