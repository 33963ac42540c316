//! PAY047 lock-left-off: a function of the change reads a row the code locks elsewhere for
//! its changes of state, here without the lock, then tests the row's state and writes it. Two
//! runs at once (a redelivered task, a double submit, the webhook beside the worker) both read
//! the old state, both pass the test, and both act: two refunds of the units one report
//! reserves, a capture's answer written over the webhook's, two keys for one payment.
//!
//! Three readings, each with the code's own word that the row wants a lock:
//! - `loader`: the loader called takes a lock when asked (`def order_by_public_id(db, id, *,
//!   for_update=False)`, gating `with_for_update()`), or another call of it in the file asks
//!   (`for_update=True`), and this call does not;
//! - `model`: another function of the file reads the same model under a lock
//!   (`DuesPayment.objects.select_for_update().get(...)`, `select(Payout)...with_for_update()`),
//!   and this one reads it with none (`.get(pk=...)`, `session.get(Payout, id)`);
//! - `named`: a function named for the lock (`lock_payout`, `get_order_for_update`) reads a
//!   model the file locks elsewhere and returns it without one, so every caller that changes
//!   state through it runs unlocked.
//!
//! Left alone: a function that takes a lock itself or through a helper of its file, claims its
//! rows by a conditional update (`filter(status=...).update(...)`), or only reads; a read whose
//! result is not tested and then written.
use tree_sitter::Node;

use super::balance_reset_after_payout::holds_rows;
use super::row_lock_removed::{calls_a_lock, claims_rows, models};
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::idem::strip_await;
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "PAY047",
    doc: include_str!("../../../rules/pay/PAY047.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Every finding is in code that moves money, and that names a lock of rows somewhere (the
/// loader's keyword, the lock of another function, or the function's own name).
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && (s.facts.payment_module || s.facts.functions.iter().any(|f| f.payment || f.http))
        && s.mentions(&[
            "update",
            "lock",
            "Lock",
            "atualizar",
            "actualizar",
            "bloque",
            "vergrendel",
            "sperr",
            "verrou",
        ])
}

fn check(cx: &mut Ctx<'_>) {
    let Some((idx, src)) = cx.code() else {
        return;
    };
    // Worked out on the first candidate: most files have none.
    let mut locked: Option<Vec<(String, Node<'_>)>> = None;
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        let (first, last) = syntax::lines(func);
        if !cx.touches_added(first, last) {
            continue;
        }
        let text = syntax::text(func, src);
        if named_for_a_lock(syntax::function_name(func, src)) {
            if !holds_rows(text) {
                let locked = locked.get_or_insert_with(|| locked_models(idx, src));
                if let Some((load, model, locker)) = returns_unlocked(idx, func, locked, src) {
                    let locker_line = syntax::lines(locker).0;
                    let locker_name = enclosing_name(idx, locker, src);
                    cx.report(&RULE, load)
                        .arg("function", crate::rules::facts::qualname(func, idx, src))
                        .arg("load", short(load, src))
                        .arg("model", model)
                        .arg("locker", locker_name)
                        .arg("locker_line", locker_line.to_string())
                        .note("named");
                }
            }
            continue;
        }
        if holds_rows(text) || claims_rows(text) || takes_a_lock(idx, func, src) {
            continue;
        }
        for &assign in idx.within(func, kinds::ASSIGNMENT) {
            if !crate::rules::idem::owned_by(idx, assign, Some(func)) {
                continue;
            }
            let (Some(left), Some(right)) = (assign.field("left"), assign.field("right")) else {
                continue;
            };
            if left.kind() != kinds::IDENTIFIER {
                continue;
            }
            let right = strip_await(right);
            if right.kind() != kinds::CALL {
                continue;
            }
            let name = syntax::text(left, src);
            let Some((test, write)) = tested_then_written(idx, func, assign, name, src) else {
                continue;
            };
            // The change made the read, its test or its write: a function that always read so
            // and still does the same is not this change's.
            let added = |n: Node<'_>| {
                let (first, last) = syntax::lines(n);
                cx.touches_added(first, last)
            };
            // Said where the change is: the read, or else the first of the test and the write
            // that it made.
            let Some(at) = [right, test, write].into_iter().find(|n| added(*n)) else {
                continue;
            };
            let Some(evidence) = lock_evidence(cx, idx, right, &mut locked, src) else {
                continue;
            };
            // A helper of the file it calls may take the lock (`_lock_order(session, id)`); the
            // loader read here takes it only when asked.
            let loader = idx.callee_name(right, src);
            if super::calls_a_helper_that(idx, func, src, |h| {
                syntax::function_name(h, src) != loader && holds_rows(syntax::text(h, src))
            }) {
                continue;
            }
            if every_caller_holds_a_lock(cx, syntax::function_name(func, src)) {
                break;
            }
            let function = crate::rules::facts::qualname(func, idx, src);
            // The same race told by another rule: the lock the old version took here (PAY025),
            // the claim taken apart or the lock a sibling takes (PAY040).
            if locked_before(cx, &function)
                || super::claim_split_into_read_and_write::tells_of(cx, func)
            {
                continue;
            }
            let load = short(right, src);
            let test_line = syntax::lines(test).0;
            let write_line = syntax::lines(write).0;
            let test = short(test, src);
            let write = short(write, src);
            let finding = cx.report(&RULE, at);
            finding
                .arg("function", function)
                .arg("load", load)
                .arg("test", test)
                .arg("test_line", test_line.to_string())
                .arg("write", write)
                .arg("write_line", write_line.to_string());
            match evidence {
                Evidence::Keyword(keyword) => {
                    finding.arg("keyword", keyword);
                }
                Evidence::Model {
                    model,
                    locker,
                    locker_line,
                } => {
                    finding
                        .arg("model", model)
                        .arg("locker", locker)
                        .arg("locker_line", locker_line.to_string())
                        .note("model");
                }
            }
            break;
        }
    }
}

enum Evidence {
    /// The loader's keyword that takes the lock (`for_update`).
    Keyword(String),
    /// The model, and the function of the file that reads it under a lock, with its line.
    Model {
        model: String,
        locker: String,
        locker_line: u32,
    },
}

/// Why this read should have locked, if the code says so anywhere.
fn lock_evidence<'t>(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'t>,
    call: Node<'t>,
    locked: &mut Option<Vec<(String, Node<'t>)>>,
    src: &'t str,
) -> Option<Evidence> {
    let call_text = syntax::text(call, src);
    if holds_rows(call_text) {
        return None;
    }
    if let Some(model) = model_read(call, src) {
        let locked = locked.get_or_insert_with(|| locked_models(idx, src));
        if let Some((_, locker)) = locked.iter().find(|(m, _)| m == model) {
            return Some(Evidence::Model {
                model: model.to_string(),
                locker: enclosing_name(idx, *locker, src),
                locker_line: syntax::lines(*locker).0,
            });
        }
        return None;
    }
    let name = idx.callee_name(call, src);
    if name.is_empty()
        || !name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        || reads_a_mapping(call, src)
    {
        return None;
    }
    let positional = syntax::positional_args(call).len();
    let unasked = |keyword: &str, place: Option<u32>| {
        syntax::keyword_arg(call, keyword, src).is_none()
            && !syntax::has_dict_splat(call)
            && place.is_none_or(|p| positional <= p as usize)
    };
    // Another call of the same loader in the file asks for the lock.
    for &other in idx.all(kinds::CALL) {
        if other.id() == call.id() || idx.callee_name(other, src) != name {
            continue;
        }
        for (keyword, value) in syntax::keyword_args(other, src) {
            if lock_keyword(keyword) && syntax::text(value, src) == "True" && unasked(keyword, None)
            {
                return Some(Evidence::Keyword(keyword.to_string()));
            }
        }
    }
    // The loader's own definition, in the change or in the repository.
    let defined = cx
        .change
        .code_definitions_with(cx.side, name, |f| f.lock_param.as_deref().cloned())
        .and_then(|found| found.into_iter().next().map(|(_, _, p)| p))
        .or_else(|| {
            let project = cx.project()?;
            let callee = syntax::callee(call, src);
            project
                .callee_def(cx.path, callee)?
                .1
                .lock_param
                .as_deref()
                .cloned()
        })?;
    let (keyword, place) = defined;
    unasked(&keyword, place).then(|| Evidence::Keyword(keyword.to_string()))
}

/// `_ESTADOS_MP.get(pago["status"])`, `mapping.get(key)`: a lookup in a mapping (a constant's,
/// or `get` of one key that names no model), not a row's load, whatever another `get` of the
/// file asks for.
fn reads_a_mapping(call: Node<'_>, src: &str) -> bool {
    let Some(receiver) = call
        .field("function")
        .filter(|f| f.kind() == kinds::ATTRIBUTE)
        .and_then(|f| f.field("object"))
    else {
        return false;
    };
    let receiver = syntax::text(receiver, src);
    let constant = receiver
        .trim_start_matches('_')
        .chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    let args = syntax::positional_args(call);
    constant
        || syntax::callee_name(call, src) == "get"
            && args.len() == 1
            && !args[0].kind().eq(kinds::IDENTIFIER)
}

/// After `assign` binds `name` to the row: a test that reads a field of it, or of what is taken
/// from it (`regels = {r.id: r for r in bestelling.regels}`, `for regel in ...`), and after that
/// test a write of such a field.
fn tested_then_written<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    assign: Node<'t>,
    name: &'t str,
    src: &'t str,
) -> Option<(Node<'t>, Node<'t>)> {
    let after = assign.end_byte();
    let own =
        |n: &Node<'_>| n.start_byte() >= after && crate::rules::idem::owned_by(idx, *n, Some(func));
    let mut derived: Vec<&str> = vec![name];
    let mut binders: Vec<Node<'t>> = idx
        .within(func, kinds::ASSIGNMENT)
        .iter()
        .chain(idx.within(func, kinds::FOR_STATEMENT))
        .copied()
        .filter(own)
        .collect();
    binders.sort_by_key(Node::start_byte);
    for b in binders {
        let (Some(left), Some(right)) = (b.field("left"), b.field("right")) else {
            continue;
        };
        let value = syntax::text(right, src);
        if derived.iter().any(|d| syntax::has_word(value, d)) {
            for id in syntax::descendants(left, &[kinds::IDENTIFIER]) {
                let id = syntax::text(id, src);
                if !derived.contains(&id) {
                    derived.push(id);
                }
            }
        }
    }
    let reads_field = |node: Node<'_>| {
        idx.within(node, kinds::ATTRIBUTE).iter().any(|a| {
            a.field("object").is_some_and(|o| {
                o.kind() == kinds::IDENTIFIER && derived.contains(&syntax::text(o, src))
            })
        })
    };
    let test = idx
        .within(func, kinds::COMPARISON_OPERATOR)
        .iter()
        .copied()
        .filter(own)
        .find(|c| reads_field(*c))?;
    let written = idx
        .within(func, kinds::ASSIGNMENT)
        .iter()
        .chain(idx.within(func, kinds::AUGMENTED_ASSIGNMENT))
        .copied()
        .filter(|w| w.start_byte() > test.end_byte() && own(w))
        .filter(|w| {
            w.field("left").is_some_and(|l| {
                l.kind() == kinds::ATTRIBUTE
                    && l.field("object").is_some_and(|o| {
                        o.kind() == kinds::IDENTIFIER && derived.contains(&syntax::text(o, src))
                    })
            })
        })
        .min_by_key(Node::start_byte);
    // Or handed to a helper named for a change of state (`marcar_falha(sessao, repasse,
    // ...)`, `mark_paid(order)`), which writes it.
    let handed =
        idx.within(func, kinds::CALL)
            .iter()
            .copied()
            .filter(|c| c.start_byte() > test.end_byte() && own(c))
            .find(|c| {
                syntax::positional_args(*c).iter().any(|a| {
                    a.kind() == kinds::IDENTIFIER && derived.contains(&syntax::text(*a, src))
                }) && changes_state(idx.callee_name(*c, src))
            });
    let write = match (written, handed) {
        (Some(w), Some(h)) => std::cmp::min_by_key(w, h, Node::start_byte),
        (w, h) => w.or(h)?,
    };
    Some((test, write))
}

/// A helper named for moving a record's state: `mark_paid`, `marcar_falha`, `markeer_betaald`,
/// `apply_status`, `settle`, `record_outcome`.
fn changes_state(name: &str) -> bool {
    syntax::name_words(name).first().is_some_and(|w| {
        matches!(
            w.as_str(),
            "mark"
                | "marcar"
                | "marquer"
                | "markeer"
                | "markiere"
                | "segna"
                | "set"
                | "apply"
                | "settle"
                | "record"
                | "registrar"
                | "transition"
                | "fail"
                | "release"
        )
    })
}

/// The model a call reads one row of: `Payout.objects.get(pk=id)`,
/// `Payout.objects.select_related("seller").filter(...).first()`, `session.get(Payout, id)`,
/// `session.scalar(select(Payout).where(...))`, `db.query(Payout).filter(...).one()`,
/// `get_object_or_404(Payout, pk=id)`.
fn model_read<'s>(call: Node<'_>, src: &'s str) -> Option<&'s str> {
    let text = syntax::text(call, src);
    let name = syntax::callee_name(call, src);
    let capitalised = |m: &str| m.starts_with(|c: char| c.is_ascii_uppercase());
    if let Some(at) = text.find(".objects.") {
        let before = text.get(..at)?;
        let model = before
            .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .next()?;
        return (matches!(name, "get" | "first" | "last" | "earliest" | "latest")
            && capitalised(model))
        .then_some(model);
    }
    let first_arg = || {
        syntax::positional_args(call)
            .first()
            .filter(|a| a.kind() == kinds::IDENTIFIER)
            .map(|a| syntax::text(*a, src))
            .filter(|m| capitalised(m))
    };
    match name {
        "get_object_or_404" => first_arg(),
        "get" if syntax::positional_args(call).len() >= 2 => first_arg(),
        "scalar" | "scalars" | "execute" | "one" | "first" | "one_or_none" | "scalar_one"
        | "scalar_one_or_none" | "get" => {
            let at = text.find("select(").or_else(|| text.find("query("))?;
            let rest = text.get(at..)?;
            let open = rest.find('(')?;
            let model = rest
                .get(open + 1..)?
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .next()?;
            capitalised(model).then_some(model)
        }
        _ => None,
    }
}

/// The models the file reads under a lock, each with the lock's call: the model of the
/// statement that locks (`select(Payout).where(...).with_for_update()`), or, where the lock is
/// added to a statement built before (`stmt = stmt.with_for_update()`), the models its
/// function selects.
fn locked_models<'t>(idx: &NodeIndex<'t>, src: &str) -> Vec<(String, Node<'t>)> {
    let mut locked = Vec::new();
    for &call in idx.all(kinds::CALL) {
        let name = idx.callee_name(call, src);
        let asks = matches!(name, "select_for_update" | "with_for_update")
            || name == "get" && syntax::keyword_arg(call, "with_for_update", src).is_some();
        if !asks {
            continue;
        }
        let mut statement = call;
        while let Some(parent) = statement.parent() {
            if matches!(parent.kind(), "block" | kinds::MODULE) {
                break;
            }
            statement = parent;
        }
        let mut named = models(syntax::text(statement, src));
        if named.is_empty()
            && let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION)
        {
            // Only what the function selects: its other capitalised words are types and states.
            let text = syntax::text(func, src);
            named = models(text)
                .into_iter()
                .filter(|m| {
                    text.contains(&format!("select({m}")) || text.contains(&format!("query({m}"))
                })
                .collect();
        }
        for m in named {
            if !locked.iter().any(|(l, _)| *l == m) {
                locked.push((m, call));
            }
        }
    }
    locked
}

/// For a function named for the lock: the read it returns (`return session.get(Payout, id)`,
/// or a name bound to one), of a model another function of the file locks.
fn returns_unlocked<'t>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    locked: &[(String, Node<'t>)],
    src: &'t str,
) -> Option<(Node<'t>, &'t str, Node<'t>)> {
    for &ret in idx.within(func, kinds::RETURN_STATEMENT) {
        if !crate::rules::idem::owned_by(idx, ret, Some(func)) {
            continue;
        }
        let Some(value) = syntax::return_value(ret).map(strip_await) else {
            continue;
        };
        let load = match value.kind() {
            kinds::CALL => value,
            kinds::IDENTIFIER => {
                let bound = syntax::text(value, src);
                let assign = idx.within(func, kinds::ASSIGNMENT).iter().rev().find(|a| {
                    a.end_byte() <= ret.start_byte()
                        && a.field("left")
                            .is_some_and(|l| syntax::text(l, src) == bound)
                })?;
                strip_await(assign.field("right")?)
            }
            _ => continue,
        };
        if load.kind() != kinds::CALL {
            continue;
        }
        let Some(model) = model_read(load, src) else {
            continue;
        };
        if let Some((_, locker)) = locked
            .iter()
            .find(|(m, l)| m == model && !syntax::contains(func, *l))
        {
            return Some((load, model, *locker));
        }
    }
    None
}

/// Whether `func` takes a lock of its own by a call (`with redis_lock(...)`, `with
/// trava(f"devolucao:{id}")`, `with self._candado(...)`): the runs it keeps apart do not race.
fn takes_a_lock(idx: &NodeIndex<'_>, func: Node<'_>, src: &str) -> bool {
    calls_a_lock(idx, func, src)
        || idx.within(func, kinds::CALL).iter().any(|c| {
            syntax::name_words(idx.callee_name(*c, src))
                .iter()
                .any(|w| {
                    matches!(
                        w.as_str(),
                        "mutex"
                            | "trava"
                            | "candado"
                            | "cerrojo"
                            | "slot"
                            | "sperre"
                            | "verrou"
                            | "lucchetto"
                            | "blocco"
                    )
                })
                || names_a_row_lock(&syntax::name_words(idx.callee_name(*c, src)))
        })
}

/// Whether the function is called in the change, and every function that calls it takes an
/// exclusive lock of its own first (`if not cache.add(f"refund:{id}:send", ...)`, `with
/// redis.lock(...)`): the runs that would race are kept apart before the read.
fn every_caller_holds_a_lock(cx: &Ctx<'_>, name: &str) -> bool {
    let mut callers = cx.change.calls_named(cx.side, name).peekable();
    callers.peek().is_some()
        && callers.all(|(facts, call)| {
            !call.function.is_empty()
                && facts.calls.iter().any(|other| {
                    other.function == call.function
                        && other.line <= call.line
                        && takes_exclusive_lock(other)
                })
        })
}

/// A call that takes a lock: one named for it (`lock`, `acquire_lock`, `redis.lock`), or a
/// cache's `add`, which sets only where no one holds the key (`cache.add(key, owner, timeout=...)`).
fn takes_exclusive_lock(call: &crate::rules::facts::CallSite) -> bool {
    let name = call.name();
    let receiver_words = || call.receiver().map(syntax::name_words).unwrap_or_default();
    names_a_row_lock(&syntax::name_words(name))
        || name == "acquire" && names_a_row_lock(&receiver_words())
        || name == "add"
            && call
                .receiver()
                .is_some_and(|r| syntax::name_words(r).iter().any(|w| w.contains("cache")))
}

/// `lock_payout`, `locked_order`, `get_order_for_update`, `vergrendel_bestelling`.
fn named_for_a_lock(name: &str) -> bool {
    names_a_row_lock(&syntax::name_words(name))
}

/// A keyword of a loader that asks it for the lock: `for_update`, `voor_update`,
/// `para_atualizar`, `lock`, `with_lock`.
fn lock_keyword(name: &str) -> bool {
    let words = syntax::name_words(name);
    !words.iter().any(|w| w == "skip" || w == "nowait") && names_a_row_lock(&words)
}

/// Words that name a row lock, in the languages code is written in: `lock`, `bloquear`,
/// `vergrendel`, `sperren`; or `update` after `for` (`for_update`, `voor_update`,
/// `para_atualizar`, `pour_maj`).
fn names_a_row_lock(words: &[String]) -> bool {
    words.iter().any(|w| {
        matches!(
            w.as_str(),
            "lock"
                | "locked"
                | "locking"
                | "bloquear"
                | "bloqueo"
                | "bloqueado"
                | "travar"
                | "travado"
                | "verrou"
                | "verrouiller"
                | "verrouille"
                | "vergrendel"
                | "vergrendeld"
                | "vergrendelen"
                | "sperren"
                | "gesperrt"
                | "bloccare"
                | "bloccato"
        )
    }) || words.windows(2).any(|p| {
        matches!(
            p[0].as_str(),
            "for" | "voor" | "para" | "pour" | "fuer" | "per"
        ) && matches!(
            p[1].as_str(),
            "update" | "atualizar" | "actualizar" | "maj" | "aktualisierung" | "aggiornamento"
        )
    })
}

/// A parameter of a loader that asks it for the lock, with `False` as its default and a lock in
/// its body (`def order_by_public_id(db, public_id, *, for_update=False)` whose body adds
/// `with_for_update()` when asked), and its place among the positional ones (`None`:
/// keyword-only). What `FunctionFacts::lock_param` and the project index keep.
pub(crate) fn lock_param(func: Node<'_>, src: &str) -> Option<Box<(Box<str>, Option<u32>)>> {
    let params = func.field("parameters")?;
    let text = syntax::text(params, src);
    if !text.contains("update") && !text.contains("lock") {
        return None;
    }
    let body = func.field("body")?;
    if !holds_rows(syntax::text(body, src)) {
        return None;
    }
    let mut positional = Some(0u32);
    for param in crate::python::named_children(params) {
        match param.kind() {
            kinds::DEFAULT_PARAMETER | kinds::TYPED_DEFAULT_PARAMETER => {
                let name = syntax::parameter_name(param, src);
                let default = param.field("value").map(|v| syntax::text(v, src));
                if name != "self" && lock_keyword(name) && default == Some("False") {
                    return Some(Box::new((name.into(), positional)));
                }
            }
            kinds::LIST_SPLAT_PATTERN
            | kinds::DICTIONARY_SPLAT_PATTERN
            | kinds::KEYWORD_SEPARATOR => {
                positional = None;
                continue;
            }
            _ => {
                if syntax::parameter_name(param, src) == "self"
                    || syntax::parameter_name(param, src) == "cls"
                {
                    continue;
                }
            }
        }
        positional = positional.map(|p| p + 1);
    }
    None
}

/// Whether the old version's function of the same qualified name locked rows.
fn locked_before(cx: &Ctx<'_>, qualname: &str) -> bool {
    let (Some(old), Some(facts)) = (cx.versions.old.as_ref(), cx.other_facts) else {
        return false;
    };
    facts
        .functions
        .iter()
        .filter(|f| f.qualname == qualname)
        .any(|f| {
            let (first, last) = f.lines;
            old.text
                .lines()
                .skip(first.saturating_sub(1) as usize)
                .take((last + 1).saturating_sub(first) as usize)
                .any(holds_rows)
        })
}

fn enclosing_name(idx: &NodeIndex<'_>, node: Node<'_>, src: &str) -> String {
    idx.enclosing(node, kinds::FUNCTION_DEFINITION)
        .map(|f| crate::rules::facts::qualname(f, idx, src))
        .unwrap_or_default()
}

/// Code as the message quotes it: on one line, bounded.
fn short(node: Node<'_>, src: &str) -> String {
    let one = syntax::normalized(node, src)
        .replace("( ", "(")
        .replace(" )", ")");
    if one.chars().count() > 80 {
        format!("{}...", one.chars().take(77).collect::<String>())
    } else {
        one
    }
}
