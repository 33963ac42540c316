//! Parameters that become an idempotency key further down: `sale(..., request_ref)` hands
//! `request_ref` to `_send_with_retry`, which hands it to `_request`, whose headers carry it as
//! `Idempotency-Key`. A caller's `request_ref=f"premium-{id}-{uuid4()}"` is then a key made
//! anew on every call, under a name that does not say so.
//!
//! The facts pass records, per function, what it does with each parameter named like a key
//! (`Forward`); `ChangeSet::sends_as_key` follows those records across the change's functions.
//! Only the function's own code is read, so the old version's facts can still be derived from
//! the new one's.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::ChangeSet;
use crate::rules::facts::{Forward, Slot};
use crate::source::Side;

/// How many functions deep a key is followed: the client's public method, its sender, its
/// request builder, its headers helper.
const MAX_HOPS: usize = 4;

/// Words of a parameter that may carry a key, or a part of one: `idempotency_key`,
/// `request_ref`, `request_id`, `sender_batch_id`, `dedup_token`, `reference`, `attempt`.
/// `api_key` and `ref` qualify too, and are dropped where no path sends them as a key.
pub(crate) fn key_like(name: &str) -> bool {
    // Asked of every function's parameter list: one pass over its bytes for all the words.
    static WORDS: std::sync::LazyLock<aho_corasick::AhoCorasick> = std::sync::LazyLock::new(|| {
        aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build([
                "key",
                "ref",
                "request_id",
                "idempot",
                "batch_id",
                "dedup",
                // An attempt counter a key may be built from (`_request_key("refund", ref,
                // attempt)`).
                "attempt",
                "retries",
                "retry",
                "tries",
                // The same in the languages payment code is written in: `anfrage_id` (a
                // request's id), `sleutel`, `nyckel`, `schluessel`, `clave`, `chiave`, `chave`,
                // `klucz` (a key), `versuch`, `poging`, `forsok`, `intento`, `tentativa`,
                // `essai` (an attempt).
                "anfrage_id",
                "sleutel",
                "nyckel",
                "schluessel",
                "schlussel",
                "clave",
                "chiave",
                "chave",
                "klucz",
                "versuch",
                "poging",
                "forsok",
                "intento",
                "tentativ",
                "essai",
            ])
            .expect("fixed word list")
    });
    WORDS.is_match(name)
}

/// A parameter that hands a function the time, which a key may be built from
/// (`charge_attempt(..., *, now)` sending `f"{stored_key}-{int(now.timestamp())}"`): a caller
/// that passes the clock's reading makes a new key on every run.
pub(crate) fn time_like(name: &str) -> bool {
    matches!(name, "now" | "today" | "ts" | "timestamp" | "when")
        || name.ends_with("_now")
        || name.ends_with("_ts")
}

/// Whether a parameter may carry a key or a part of one: `key_like` or `time_like`.
pub(crate) fn part_like(name: &str) -> bool {
    key_like(name) || time_like(name)
}

/// What `func` does with its parameters named like a key: sends one as an idempotency key
/// (`headers["Idempotency-Key"] = request_ref`, `{"PayPal-Request-Id": request_id}`,
/// `idempotency_key=key`), or hands it on to a call by keyword or position. Read only where the
/// parameter list names one; `own` tells the function's own nodes from nested functions'.
pub(crate) fn forwards(
    func: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &str,
    own: impl Fn(&Node<'_>) -> bool,
) -> Box<[Forward]> {
    let Some(list) = func.field("parameters") else {
        return Box::default();
    };
    let list = syntax::text(list, src);
    if !key_like(list)
        && !["now", "today", "ts", "timestamp", "when"]
            .iter()
            .any(|w| list.contains(w))
    {
        return Box::default();
    }
    let params: Vec<String> = crate::rules::pay::parameters(func, src)
        .into_iter()
        .filter(|p| part_like(p))
        .collect();
    if params.is_empty() {
        return Box::default();
    }
    // The index in `params` of the parameter a value is.
    let param = |value: Node<'_>| {
        let value = unwrap_str(value, src);
        let name = (value.kind() == kinds::IDENTIFIER).then(|| syntax::text(value, src))?;
        params.iter().position(|p| p == name)
    };
    // Parameters sent as a key here, and handed on to calls.
    let mut sent: Vec<usize> = Vec::new();
    let mut handed: Vec<(usize, &str, Slot)> = Vec::new();
    // The parameters a key's value is made of: itself (`request_ref`), or a part of it
    // (`f"{kind}:{ref}:r{attempt}"`, `_request_key("refund", reference, attempt)`).
    // A local the key is built from is read through its last assignment before the key
    // (`key = f"{att['idempotency_key']}-{int(now.timestamp())}"`, then `f"{key}-order"`).
    let parts_of = |value: Node<'_>, sent: &mut Vec<usize>| match param(value) {
        Some(p) => sent.push(p),
        None => {
            let text = syntax::text(value, src);
            for w in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                // `claim.idempotency_key` with `claim = _claim(session, id, now)`: a field of
                // what a call gave back, kept on a record, not made of the call's arguments.
                let end = w.as_ptr() as usize - text.as_ptr() as usize + w.len();
                let a_field_of_it = text.get(end..).is_some_and(|r| r.starts_with('.'));
                if let Some(p) = params.iter().position(|p| p == w) {
                    sent.push(p);
                } else if !w.is_empty()
                    && !a_field_of_it
                    && !w.starts_with(|c: char| c.is_ascii_digit())
                    && let Some(set) = idx.assigned_before(Some(func), w, value.start_byte(), src)
                    && own(&set)
                {
                    sent.extend(
                        syntax::text(set, src)
                            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                            .filter_map(|w| params.iter().position(|p| p == w)),
                    );
                }
            }
        }
    };
    let sent_in = |dict: Node<'_>, sent: &mut Vec<usize>| {
        // `{"Idempotency-Key": key} if key else {}`: either branch.
        let dicts = if dict.kind() == kinds::CONDITIONAL_EXPRESSION {
            crate::python::named_children(dict)
        } else {
            vec![dict]
        };
        for pair in dicts
            .into_iter()
            .filter(|d| d.kind() == kinds::DICTIONARY)
            .flat_map(crate::python::named_children)
        {
            if let (Some(k), Some(v)) = (pair.field("key"), pair.field("value"))
                && syntax::code_names_idempotency(syntax::text(k, src))
            {
                parts_of(v, sent);
            }
        }
    };
    // A call whose arguments name no such parameter and no idempotency key is read no
    // further: most calls of a function.
    let names_one = |text: &str| {
        params
            .iter()
            .any(|p| memchr::memmem::find(text.as_bytes(), p.as_bytes()).is_some())
            || syntax::code_names_idempotency(text)
    };
    for &call in idx.within(func, kinds::CALL).iter().filter(|n| own(n)) {
        if !call
            .field("arguments")
            .is_some_and(|args| names_one(syntax::text(args, src)))
        {
            continue;
        }
        let name = idx.callee_name(call, src);
        for (keyword, value) in syntax::keyword_args(call, src) {
            if syntax::code_names_idempotency(keyword) {
                parts_of(value, &mut sent);
                continue;
            }
            match param(value) {
                Some(p) if !name.is_empty() => {
                    handed.push((p, name, Slot::Keyword(keyword.into())))
                }
                Some(_) => {}
                None => sent_in(value, &mut sent),
            }
        }
        for (i, arg) in syntax::positional_args(call).into_iter().enumerate() {
            match param(arg) {
                Some(p) if !name.is_empty() => handed.push((p, name, Slot::Position(i as u16))),
                Some(_) => {}
                None => sent_in(arg, &mut sent),
            }
        }
    }
    for &assignment in idx
        .within(func, kinds::ASSIGNMENT)
        .iter()
        .filter(|n| own(n))
    {
        let (Some(left), Some(right)) = (assignment.field("left"), assignment.field("right"))
        else {
            continue;
        };
        if left.kind() == kinds::SUBSCRIPT
            && syntax::code_names_idempotency(syntax::text(left, src))
        {
            parts_of(right, &mut sent);
        } else {
            sent_in(right, &mut sent);
        }
    }
    for &ret in idx
        .within(func, kinds::RETURN_STATEMENT)
        .iter()
        .filter(|n| own(n))
    {
        if let Some(value) = syntax::return_value(ret) {
            sent_in(value, &mut sent);
        }
    }
    let mut out: Vec<Forward> = sent
        .into_iter()
        .map(|p| Forward {
            param: params[p].as_str().into(),
            to: None,
        })
        .chain(handed.into_iter().map(|(p, name, slot)| Forward {
            param: params[p].as_str().into(),
            to: Some((name.into(), slot)),
        }))
        .collect();
    out.sort();
    out.dedup();
    out.into_boxed_slice()
}

/// `str(key)` is `key`.
fn unwrap_str<'t>(value: Node<'t>, src: &str) -> Node<'t> {
    if value.kind() == kinds::CALL
        && syntax::callee(value, src) == "str"
        && let [arg] = syntax::positional_args(value)[..]
    {
        return arg;
    }
    value
}

impl ChangeSet {
    /// Whether a call of `name` that passes a value at `slot` sends that value as an
    /// idempotency key: some function of that name in the change does, directly or through the
    /// functions it hands the value to, and none of that name takes the slot's parameter
    /// without sending it.
    pub fn sends_as_key(&self, side: Side, name: &str, slot: &Slot) -> bool {
        self.sends_as_key_within(side, name, slot, MAX_HOPS)
    }

    fn sends_as_key_within(&self, side: Side, name: &str, slot: &Slot, hops: usize) -> bool {
        if let Slot::Keyword(k) = slot
            && !part_like(k)
        {
            return false;
        }
        let mut sends = false;
        for (file, func) in self.functions_named(side, name) {
            // A test's fake of the client (`def create_batch_payout(self, body, *,
            // request_id): self.calls.append(request_id)`) sends nothing, and says nothing of
            // what the code's client does.
            if file.is_test {
                continue;
            }
            let param = match slot {
                Slot::Keyword(k) => Some(&**k),
                Slot::Position(i) => func.params.split(',').nth(usize::from(*i)),
            };
            let Some(param) = param.filter(|p| !p.is_empty()) else {
                continue;
            };
            let mut through = func
                .forwards
                .iter()
                .filter(|f| &*f.param == param)
                .peekable();
            // A function of the name that does not take the parameter is another function.
            if through.peek().is_none() && !func.params.split(',').any(|p| p == param) {
                continue;
            }
            let sent = through.any(|f| match &f.to {
                None => true,
                Some((next, next_slot)) => {
                    hops > 0 && self.sends_as_key_within(side, next, next_slot, hops - 1)
                }
            });
            if !sent {
                return false;
            }
            sends = true;
        }
        sends
    }
}
