//! HTTP002 http-call-without-timeout: a payment HTTP call made with a library whose default is
//! to wait (requests, `urllib.request.urlopen`, aiohttp's five minutes) and no `timeout`.
use tree_sitter::Node;

use super::{HttpCall, Lib};
use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Local, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "HTTP002",
    doc: include_str!("../../../rules/http/HTTP002.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Outside tests, every finding is an HTTP call that waits forever; which of them are on the
/// money path is for the rule, with the rest of the change, to say.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test
        && (super::calls_for_gates(s).iter().any(|call| {
            !call.constructor && (waits_forever(s, call) || untimed_handed_in(s, call))
        }) || bounds_only_the_connect(s.src())
            || off_by_a_setting(s.src())
            // A read timeout left to a parameter's `None`: only in a payment module (client
            // code names timeouts beside `None` everywhere).
            || s.facts.payment_module && off_by_a_parameter(s.src())
            || sets_a_timeout_on_an_added_line(s))
}

/// Whether an added line sets a timeout to something other than a number (`klarna_timeout_s:
/// Optional[float] = None`, `MOLLIE_TIMEOUT = env_float("MOLLIE_TIMEOUT")`, `"READ_TIMEOUT":
/// env_float(...)`): the lines `made_unbounded` reads. Not a keyword handing a timeout on
/// (`timeout=timeout,`), nor a parameter's default.
fn sets_a_timeout_on_an_added_line(s: &Scan<'_>) -> bool {
    let src = s.src();
    let added = s.lines.added();
    if added.is_empty() {
        return false;
    }
    let mut line = 1u32;
    let mut counted = 0usize;
    let mut hits: Vec<usize> = ["timeout", "TIMEOUT", "Timeout"]
        .iter()
        .flat_map(|w| memchr::memmem::find_iter(src.as_bytes(), w.as_bytes()))
        .collect();
    hits.sort_unstable();
    hits.into_iter().any(|at| {
        line += u32::try_from(memchr::memchr_iter(b'\n', &src.as_bytes()[counted..at]).count())
            .unwrap_or(u32::MAX);
        counted = at;
        if added.binary_search(&line).is_err() {
            return false;
        }
        let start = src[..at].rfind('\n').map_or(0, |n| n + 1);
        let end = src[at..].find('\n').map_or(src.len(), |n| at + n);
        settable_line(&src[start..end])
    })
}

/// `name[: type] = value` or `"NAME": value` alone on a line, with a name of a timeout and a
/// value that is no number: `None`, or a call.
fn settable_line(line: &str) -> bool {
    let line = line.trim();
    if line.starts_with("def ") || line.starts_with("async ") || line.starts_with('#') {
        return false;
    }
    let Some((name, value)) = line.split_once(['=', ':']) else {
        return false;
    };
    let name = name.trim().trim_matches(|c| c == '"' || c == '\'');
    if !name.to_ascii_lowercase().contains("timeout")
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        return false;
    }
    // The annotation's part, if any: `Optional[float] = None`.
    let value = value
        .rsplit('=')
        .next()
        .unwrap_or(value)
        .trim()
        .trim_end_matches(',');
    value == "None" || value.contains('(') && !value.starts_with(|c: char| c.is_ascii_digit())
}

/// A call on a client handed in (`self._session.get(url)`), with no timeout of its own: taken to
/// be bounded by the session's, unless the change took away the one it passed (`dropped`).
fn untimed_handed_in<'a>(cx: &impl Local<'a>, call: &HttpCall<'_>) -> bool {
    call.handed_in
        && call.client_timeout
        && matches!(call.lib, Lib::Aiohttp | Lib::Requests)
        && syntax::keyword_arg(call.node, "timeout", cx.src()).is_none()
        && (!syntax::has_dict_splat(call.node)
            || kwargs_carry_no_timeout(cx, call.node)
            || splats_a_local_without_timeout(cx, call.node))
}

/// `**payload` where the function built `payload = {"params": form} if ... else {"data":
/// form}` before the call, with no timeout in it.
fn splats_a_local_without_timeout<'a>(cx: &impl Local<'a>, call: Node<'_>) -> bool {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return false;
    };
    let func = idx.enclosing(call, kinds::FUNCTION_DEFINITION);
    call.field("arguments")
        .map(crate::python::named_children)
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a.kind() == kinds::DICTIONARY_SPLAT)
        .all(|a| {
            a.named_child(0)
                .filter(|n| n.kind() == kinds::IDENTIFIER)
                .and_then(|n| {
                    idx.assigned_before(func, syntax::text(n, src), call.start_byte(), src)
                })
                .is_some_and(|v| !syntax::text(v, src).contains("timeout"))
        })
}

/// The line of the old version where the same call (`self._session.request(`) passed a
/// `timeout=`, when the new one passes none: the change dropped it, and the session handed in
/// is not known to bound the call, since the code counted on no default of it before.
fn timeout_dropped(cx: &Ctx<'_>, call: &HttpCall<'_>) -> Option<u32> {
    if !untimed_handed_in(cx, call) {
        return None;
    }
    let callee = syntax::callee(call.node, cx.src());
    // The old text first: the old tree is parsed only where it may hold the call.
    if !cx.versions.old.as_ref()?.text.contains(callee) {
        return None;
    }
    let old = cx.other.get()?;
    let (idx, src) = (old.index(), old.text());
    idx.all(kinds::CALL)
        .iter()
        .find(|c| {
            syntax::callee(**c, src) == callee && syntax::keyword_arg(**c, "timeout", src).is_some()
        })
        .map(|c| syntax::lines(*c).0)
}

/// Whether the text may build a timeout that bounds the connect only (`unbounded_reads`).
fn may_leave_reads_unbounded(src: &str) -> bool {
    bounds_only_the_connect(src) || may_turn_a_timeout_off(src)
}

/// `Timeout(None, connect=3.0)`, `read=None`, aiohttp's `ClientTimeout(connect=5)`.
fn bounds_only_the_connect(src: &str) -> bool {
    let has = |w: &str| memchr::memmem::find(src.as_bytes(), w.as_bytes()).is_some();
    has("Timeout(None") || has("read=None") || has("ClientTimeout(")
}

/// Whether the text may switch a timeout off by a parameter's default or a setting.
fn may_turn_a_timeout_off(src: &str) -> bool {
    off_by_a_parameter(src) || off_by_a_setting(src)
}

/// A read timeout built from a parameter (`left_to_parameters`): `Timeout(10.0,
/// read=read_timeout)`, `self.timeout = (connect_timeout, read_timeout)`.
fn off_by_a_parameter(src: &str) -> bool {
    let has = |w: &str| memchr::memmem::find(src.as_bytes(), w.as_bytes()).is_some();
    (has("read=") || has("timeout = (")) && defaults_a_timeout_to_none(src)
}

/// A setting that is `None` unless configured (`off_unless_configured`).
fn off_by_a_setting(src: &str) -> bool {
    let has = |w: &str| memchr::memmem::find(src.as_bytes(), w.as_bytes()).is_some();
    has(" or None") && (has("environ") || has("getenv"))
        || has("TIMEOUT\", None)")
        || has("TIMEOUT', None)")
}

/// Whether a `timeout` of the text has `None` a few characters on (`read_timeout: float | None
/// = None`, `timeout=None`).
fn defaults_a_timeout_to_none(src: &str) -> bool {
    memchr::memmem::find_iter(src.as_bytes(), b"timeout").any(|at| {
        let window = &src.as_bytes()[at..src.len().min(at + 40)];
        memchr::memmem::find(window, b"None").is_some()
    })
}

fn check(cx: &mut Ctx<'_>) {
    if cx.facts.is_some_and(|f| f.is_test) {
        return;
    }
    // As the gate's calls: every call the family knows is tied to a library the text names, and
    // a file opened by a setting alone (`off_unless_configured`) names none.
    let names_a_library = ["httpx", "requests", "aiohttp", "urllib"]
        .iter()
        .any(|w| memchr::memmem::find(cx.src().as_bytes(), w.as_bytes()).is_some());
    let calls = if names_a_library {
        super::http_calls(cx)
    } else {
        Vec::new()
    };
    for call in calls {
        if call.constructor {
            continue;
        }
        let dropped = (!waits_forever(cx, &call))
            .then(|| timeout_dropped(cx, &call))
            .flatten();
        if !waits_forever(cx, &call) && dropped.is_none() || !super::on_money_path(cx, call.node) {
            continue;
        }
        let src = cx.src();
        let callee = syntax::callee(call.node, src).to_string();
        let lines = syntax::lines(call.node);
        let given = syntax::keyword_arg(call.node, "timeout", src);
        let switched_off = given.is_some();
        // `timeout=timeout` of a parameter that defaults to `None`, and the call of the
        // function that leaves it there.
        let left =
            given.and_then(|t| Some((syntax::text(t, src), none_by_default(cx, call.node, t)?)));
        // A timeout built for the requests and handed to none (a refactor that lost it).
        let unused = (!switched_off)
            .then(|| super::kept_timeout(cx).cloned())
            .flatten();
        let note = match call.lib {
            _ if dropped.is_some() => "dropped",
            _ if left.is_some() => "none_param",
            _ if switched_off => "none",
            _ if unused.is_some() => "kept_unused",
            Lib::Aiohttp => "aiohttp",
            Lib::Urllib => "urllib",
            Lib::Urllib3 => "urllib3",
            _ => "requests",
        };
        let finding = cx
            .report_lines(&RULE, lines, callee.clone())
            .arg("call", callee)
            .note(note);
        if let Some((kept, line)) = unused {
            finding
                .arg("kept", kept.to_string())
                .arg("kept_line", line.to_string());
        }
        if let Some(line) = dropped {
            finding.arg("old_line", line.to_string());
        }
        if let Some((param, line)) = left {
            finding
                .arg("param", param.to_string())
                .arg("caller_line", line.to_string());
        }
        // A client module whose every endpoint lacks the timeout is one point, said once per
        // file: the fix is one helper or session setting, not a comment per call.
        finding.point = Some(note);
    }
    unbounded_reads(cx);
    off_unless_configured(cx);
    made_unbounded(cx);
}

/// A payment timeout the change turned from a number into one that is `None` when it is not
/// configured: `klarna_timeout_s: Optional[float] = None` where it was `float = 10.0`,
/// `MOLLIE_TIMEOUT = env_float("MOLLIE_TIMEOUT")` (a helper of the file that gives `None` for a
/// variable not set) where it was `float(os.environ.get(..., "15"))`. Unset is the usual case in
/// a new environment, and a `None` timeout is none at all.
fn made_unbounded(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let Some(old) = cx.versions.old.as_ref().map(|o| o.text.as_str()) else {
        return;
    };
    let mut found: Vec<(Node<'_>, String, String, Option<String>)> = Vec::new();
    // Keywords and dict entries are not indexed: found from the calls they are given.
    let holders = idx.all(kinds::ASSIGNMENT).iter().copied().chain(
        idx.all(kinds::CALL)
            .iter()
            .filter_map(|c| c.parent())
            .filter(|p| matches!(p.kind(), kinds::KEYWORD_ARGUMENT | kinds::PAIR)),
    );
    for holder in holders {
        let line = syntax::lines(holder).0;
        if !cx.touches_added(line, line) {
            continue;
        }
        let (name, value) = match holder.kind() {
            kinds::ASSIGNMENT => (holder.field("left"), holder.field("right")),
            kinds::KEYWORD_ARGUMENT => (holder.field("name"), holder.field("value")),
            _ => (holder.field("key"), holder.field("value")),
        };
        let (Some(name), Some(value)) = (name, value) else {
            continue;
        };
        let name = syntax::text(name, src).trim_matches(|c| c == '"' || c == '\'');
        let name = name.rsplit('.').next().unwrap_or(name);
        if !name.split('_').any(|w| w.eq_ignore_ascii_case("timeout")) {
            continue;
        }
        let annotated_none = value.kind() == kinds::NONE
            && holder.field("type").is_some_and(|t| {
                let t = syntax::text(t, src);
                t.contains("None") || t.contains("Optional")
            });
        if !annotated_none && !helper_gives_none(idx, value, src) {
            continue;
        }
        if !money_timeout(cx, idx, holder, name, src) {
            continue;
        }
        // A setting the change brings in, `None` unless set, where the call says so itself.
        let before = bounded_in_the_old(old, src, name);
        if before.is_none() && (syntax::has_word(old, name) || !hands_none(value)) {
            continue;
        }
        found.push((
            holder,
            name.to_string(),
            syntax::normalized(holder, src),
            before,
        ));
    }
    // One finding for the file: its fields and the environment reads that fill them are one
    // change of mind about defaults, mended together.
    let Some(((holder, name, value, before), rest)) = found.split_first() else {
        return;
    };
    let finding = cx
        .report_lines(&RULE, syntax::lines(*holder), name.clone())
        .arg("setting", name.clone())
        .arg("value", value.clone())
        .note("unset_none");
    if let Some(before) = before {
        finding.arg("old", before.clone()).note("was_bounded");
    }
    if !rest.is_empty() {
        let lines: Vec<String> = rest
            .iter()
            .map(|(h, n, ..)| format!("`{n}` (line {})", syntax::lines(*h).0))
            .collect();
        finding.arg("more", lines.join(", ")).note("more_settings");
    }
}

/// `env_float("MOLLIE_TIMEOUT")`, `_valfritt_tal(miljo.get("KLARNA_TIMEOUT_S"))`: a call of a
/// function of the file that gives `None` for what it is handed: `return None`, `... else
/// None`, or a parameter defaulting to `None` that the call leaves out (`standaard=None`).
fn helper_gives_none(idx: &NodeIndex<'_>, value: Node<'_>, src: &str) -> bool {
    if value.kind() != kinds::CALL {
        return false;
    }
    let name = syntax::callee(value, src);
    if name.contains('.') {
        return false;
    }
    let given = syntax::positional_args(value).len();
    let Some(def) = idx
        .all(kinds::FUNCTION_DEFINITION)
        .iter()
        .find(|f| syntax::function_name(**f, src) == name)
    else {
        return false;
    };
    let params = crate::rules::pay::parameters(*def, src);
    idx.within(*def, kinds::RETURN_STATEMENT).iter().any(|ret| {
        let Some(v) = ret.named_child(0) else {
            return false;
        };
        match v.kind() {
            kinds::NONE => true,
            kinds::CONDITIONAL_EXPRESSION => {
                crate::python::named_children(v)
                    .iter()
                    .skip(1)
                    .any(|branch| {
                        branch.kind() == kinds::NONE
                            || branch.kind() == kinds::IDENTIFIER
                                && left_out_as_none(
                                    *def,
                                    value,
                                    &params,
                                    syntax::text(*branch, src),
                                    given,
                                    src,
                                )
                    })
            }
            kinds::IDENTIFIER => {
                left_out_as_none(*def, value, &params, syntax::text(v, src), given, src)
            }
            _ => false,
        }
    })
}

/// Whether `call` gives `param` of `def` no value but `None`: it passes `None` itself
/// (`_env_float("PAYOUT_HTTP_TIMEOUT", None)`), or leaves out a parameter defaulting to it.
fn left_out_as_none(
    def: Node<'_>,
    call: Node<'_>,
    params: &[String],
    param: &str,
    given: usize,
    src: &str,
) -> bool {
    let Some(at) = params.iter().position(|p| p == param) else {
        return false;
    };
    if let Some(value) = syntax::keyword_arg(call, param, src) {
        return value.kind() == kinds::NONE;
    }
    if at < given {
        return syntax::positional_args(call)
            .get(at)
            .is_some_and(|v| v.kind() == kinds::NONE);
    }
    syntax::defaulted_parameter(def, param, src)
        .and_then(|p| p.field("value"))
        .is_some_and(|v| v.kind() == kinds::NONE)
}

/// Whether a call hands `None` in so many words: the author chose no value for the unset case.
fn hands_none(value: Node<'_>) -> bool {
    value.kind() == kinds::CALL
        && value
            .field("arguments")
            .into_iter()
            .flat_map(crate::python::named_children)
            .any(|a| {
                a.kind() == kinds::NONE
                    || a.kind() == kinds::KEYWORD_ARGUMENT
                        && a.field("value").is_some_and(|v| v.kind() == kinds::NONE)
            })
}

/// Whether a timeout setting is a payment's: a word of its name, of the class or dict it is set
/// in (`GOCARDLESS = {"READ_TIMEOUT": ...}`), or of the environment variable it reads names
/// money or a provider, or the file is a payment module.
fn money_timeout(
    cx: &Ctx<'_>,
    idx: &NodeIndex<'_>,
    holder: Node<'_>,
    name: &str,
    src: &str,
) -> bool {
    let word = |w: &str| {
        crate::rules::facts::is_payment_word(w)
            || w.eq_ignore_ascii_case("square")
            || w.eq_ignore_ascii_case("mp")
    };
    // `KLARNA_TIMEOUT_S`, `klarna_timeout_s`, and `AdyenSettings` by its capitals.
    let money = |text: &str| syntax::name_words(text).iter().any(|w| word(w));
    if money(name) || cx.facts.is_some_and(|f| f.payment_module) {
        return true;
    }
    let env = syntax::descendants(holder, &[kinds::STRING])
        .into_iter()
        .any(|s| money(syntax::text(s, src).trim_matches(|c| c == '"' || c == '\'')));
    env || [kinds::CLASS_DEFINITION, kinds::ASSIGNMENT]
        .iter()
        .filter_map(|k| idx.enclosing(holder, k))
        .filter(|c| c.id() != holder.id())
        .any(|c| {
            let named = if c.kind() == kinds::ASSIGNMENT {
                c.field("left")
            } else {
                c.field("name")
            };
            named.is_some_and(|n| money(syntax::text(n, src)))
        })
}

/// The line of the old version that gave `name` a number (`klarna_timeout_s: float = 10.0`), or,
/// where the old version has no such name, a timeout of it given a number that the change took
/// away (`stripe_timeout_seconds: float = 20.0` for the new `stripe_read_timeout_seconds`).
fn bounded_in_the_old(old: &str, new: &str, name: &str) -> Option<String> {
    let numbered = |line: &str| {
        line.split(['=', ':', '(', ',', ' ', '"', '\''])
            .any(|part| !part.is_empty() && part.trim_end_matches(')').parse::<f64>().is_ok())
    };
    let lines: Vec<&str> = old.lines().collect();
    let mut named = false;
    for (at, line) in lines.iter().enumerate() {
        if !syntax::has_word(line, name) {
            continue;
        }
        named = true;
        // With the lines that go on its statement: `MOLLIE_TIMEOUT = (` and the tuple below.
        let depth = line.matches(['(', '[', '{']).count();
        let closed = line.matches([')', ']', '}']).count();
        let more = if depth > closed { 6 } else { 0 };
        if let Some(l) = lines[at..lines.len().min(at + 1 + more)]
            .iter()
            .find(|l| numbered(l))
        {
            return Some(if more > 0 && l != line {
                format!("{} {}", line.trim(), l.trim())
            } else {
                l.trim().to_string()
            });
        }
    }
    if named {
        return None;
    }
    old.lines()
        .find(|l| {
            let lower = l.to_ascii_lowercase();
            lower.contains("timeout")
                && numbered(l)
                && !lower.trim_start().starts_with("def ")
                && !new.contains(l.trim())
        })
        .map(|l| l.trim().to_string())
}

/// A payment timeout read from the environment that is `None` unless it is set:
/// `pago_timeout_s=float(os.environ.get("PAGO_TIMEOUT_S", "0")) or None`. Unset is the usual
/// case, and a `None` timeout is none at all, whatever the client's default.
fn off_unless_configured(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    let found: Vec<(Node<'_>, String)> = idx
        .all(kinds::BOOLEAN_OPERATOR)
        .iter()
        .filter_map(|&op| {
            let (left, right) = (op.field("left")?, op.field("right")?);
            if right.kind() != kinds::NONE || syntax::text(op, src).contains(" and ") {
                return None;
            }
            payment_timeout_setting(cx, op, src).filter(|_| reads_env_defaulting_to_zero(left, src))
        })
        .chain(idx.all(kinds::CALL).iter().filter_map(|&call| {
            // `read_timeout=getattr(settings, "STRIPE_READ_TIMEOUT", None)`.
            let args = syntax::positional_args(call);
            if syntax::callee(call, src) != "getattr"
                || args.len() != 3
                || args[2].kind() != kinds::NONE
            {
                return None;
            }
            payment_timeout_setting(cx, call, src)
        }))
        .collect();
    for (holder, name) in found {
        let finding = cx
            .report_lines(&RULE, syntax::lines(holder), name.clone())
            .arg("setting", name)
            .arg("value", syntax::normalized(holder, src))
            .note("unset_none");
        finding.point = Some("unset_none");
    }
}

/// The keyword or assignment `value` is given to, when its name is a timeout's and says money
/// or the file is a payment module (`psp_timeout_s=`, `PAYOUT_TIMEOUT =`): the holder and the
/// name.
fn payment_timeout_setting<'t>(
    cx: &Ctx<'_>,
    value: Node<'t>,
    src: &str,
) -> Option<(Node<'t>, String)> {
    let holder = value.parent()?;
    let name = match holder.kind() {
        kinds::KEYWORD_ARGUMENT => holder.field("name")?,
        kinds::ASSIGNMENT => holder.field("left")?,
        _ => return None,
    };
    let name = syntax::text(name, src);
    let name = name.rsplit('.').next().unwrap_or(name);
    let words = || name.split('_').filter(|w| !w.is_empty());
    let timeout = words().any(|w| w.eq_ignore_ascii_case("timeout"));
    let money = words().any(crate::rules::facts::is_payment_word)
        || cx.facts.is_some_and(|f| f.payment_module);
    (timeout && money).then(|| (holder, name.to_string()))
}

/// Whether the value reads the environment with a zero or empty default, the one that `or None`
/// then turns into no timeout: `float(os.environ.get("X", "0"))`, `int(os.getenv("X", 0))`.
fn reads_env_defaulting_to_zero(value: Node<'_>, src: &str) -> bool {
    let text = syntax::text(value, src);
    ["environ", "getenv", "env("]
        .iter()
        .any(|w| text.contains(w))
        && syntax::descendants(value, &[kinds::CALL])
            .into_iter()
            .filter(|c| matches!(syntax::callee_name(*c, src), "get" | "getenv" | "env"))
            .filter_map(|c| syntax::positional_args(c).get(1).copied())
            .any(|d| {
                let d = syntax::text(d, src).trim_matches(|c| c == '"' || c == '\'');
                matches!(d, "" | "0" | "0.0")
            })
}

/// Calls on the money path handed a timeout that bounds the connect only:
/// `timeout=httpx.Timeout(None, connect=3.0)`, written there or as a module constant
/// (`GIFT_CARD_TIMEOUT = httpx.Timeout(None, connect=3.0)`). Read, write and pool then wait
/// for ever, whatever the call is (a wrapper of the client passes it on).
fn unbounded_reads(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    if !may_leave_reads_unbounded(src) {
        return;
    }
    let unbounded = |call: Node<'_>, value: Node<'_>| -> Option<String> {
        let made = match value.kind() {
            kinds::CALL => value,
            kinds::IDENTIFIER => {
                // A module constant, or a parameter's default (`timeout: httpx.Timeout =
                // FLUTTERWAVE_TIMEOUT` of the `__init__` that builds the client).
                let name = idx
                    .enclosing(call, kinds::FUNCTION_DEFINITION)
                    .and_then(|f| syntax::defaulted_parameter(f, syntax::text(value, src), src))
                    .and_then(|p| p.field("value"))
                    .filter(|v| v.kind() == kinds::IDENTIFIER)
                    .map_or_else(|| syntax::text(value, src), |v| syntax::text(v, src));
                crate::rules::retry::eval::module_constant(idx, name, src)
                    .filter(|v| v.kind() == kinds::CALL)?
            }
            // `self._charge_timeout`, set once in `__init__`.
            kinds::ATTRIBUTE => attribute_value(idx, syntax::text(value, src), src)
                .filter(|r| r.kind() == kinds::CALL)?,
            _ => return None,
        };
        let callee = syntax::callee(made, src);
        // aiohttp's `ClientTimeout(connect=5)` handed to a request: it replaces the session's,
        // and with no `total` and no `sock_read` nothing bounds the wait for the answer.
        if super::lib_of_callee(callee, cx.facts) == Some(Lib::Aiohttp)
            && syntax::callee_name(made, src) == "ClientTimeout"
        {
            let bounded = |k: &str| {
                syntax::keyword_arg(made, k, src).is_some_and(|v| v.kind() != kinds::NONE)
            };
            return (syntax::positional_args(made).is_empty()
                && !bounded("total")
                && !bounded("sock_read"))
            .then(|| syntax::normalized(made, src));
        }
        if super::lib_of_callee(callee, cx.facts) != Some(Lib::Httpx)
            || syntax::callee_name(made, src) != "Timeout"
        {
            return None;
        }
        let read = syntax::keyword_arg(made, "read", src)
            .or_else(|| syntax::keyword_arg(made, "timeout", src))
            .or_else(|| syntax::positional_args(made).first().copied());
        read.is_some_and(|r| r.kind() == kinds::NONE)
            .then(|| syntax::normalized(made, src))
    };
    let found: Vec<(Node<'_>, String, String)> = idx
        .all(kinds::CALL)
        .iter()
        .filter_map(|&call| {
            // A client or a stream built to wait for events (`AsyncClient(timeout=
            // httpx.Timeout(5.0, read=None))` for a server's event stream) waits on purpose;
            // a client of a file that streams nothing sends its requests with it.
            match syntax::callee_name(call, src) {
                "stream" => return None,
                "Client" | "AsyncClient" if streams(src) => return None,
                _ => {}
            }
            let value = syntax::keyword_arg(call, "timeout", src)?;
            let made = unbounded(call, value)?;
            Some((call, syntax::normalized(value, src), made))
        })
        // A client is made once for every request of a payment module.
        .filter(|(call, _, _)| {
            super::on_money_path(cx, *call)
                || matches!(syntax::callee_name(*call, src), "Client" | "AsyncClient")
                    && cx.facts.is_some_and(|f| f.payment_module)
        })
        .collect();
    for (call, param, made, caller_line) in left_to_parameters(cx) {
        let callee = syntax::callee(call, src).to_string();
        let given = syntax::keyword_arg(call, "timeout", src)
            .map_or_else(String::new, |t| syntax::normalized(t, src));
        let name = param
            .field("name")
            .map_or("", |n| syntax::text(n, src))
            .to_string();
        // The default is the bug when the change wrote it; otherwise the call that hands it on.
        let (first, _) = syntax::lines(param);
        let lines = if cx.touches_added(first, first) {
            (first, first)
        } else {
            syntax::lines(call)
        };
        let finding = cx
            .report_lines(&RULE, lines, format!("{callee} {given} {name}"))
            .arg("call", callee)
            .arg("timeout", given)
            .arg("made", made)
            .arg("param", name)
            .note("read_param");
        if caller_line > 0 {
            finding.arg("caller_line", caller_line.to_string());
        }
        finding.point = Some("read_param");
    }
    for (call, given, made) in found {
        let callee = syntax::callee(call, src).to_string();
        let finding = cx
            .report_lines(&RULE, syntax::lines(call), format!("{callee} {given}"))
            .arg("call", callee)
            .arg("timeout", given)
            .arg("made", made)
            .note("read_none");
        finding.point = Some("read_none");
    }
}

/// Calls whose read timeout is a parameter that defaults to `None`, built into the timeout of
/// the requests elsewhere (`self.timeout = (connect_timeout, read_timeout)` of an `__init__`
/// taking `read_timeout: float | None = None`, or `httpx.Timeout(10.0, read=read_timeout)`),
/// where a call of that function in the file leaves it out (`cls(settings.URL, settings.TOKEN)`):
/// the call, the parameter, the timeout as built and the line of the call that leaves it.
fn left_to_parameters<'t>(cx: &Ctx<'t>) -> Vec<(Node<'t>, Node<'t>, String, u32)> {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return Vec::new();
    };
    let built = |value: Node<'t>| -> Option<Node<'t>> {
        match value.kind() {
            kinds::TUPLE | kinds::CALL => Some(value),
            // `self.timeout`, set once in `__init__`.
            kinds::ATTRIBUTE => attribute_value(idx, syntax::text(value, src), src),
            _ => None,
        }
    };
    let read_of = |made: Node<'t>| -> Option<Node<'t>> {
        match made.kind() {
            // requests' `(connect, read)`.
            kinds::TUPLE => {
                let parts = crate::python::named_children(made);
                (parts.len() == 2).then(|| parts[1])
            }
            kinds::CALL if syntax::callee_name(made, src) == "Timeout" => {
                syntax::keyword_arg(made, "read", src)
            }
            _ => None,
        }
    };
    let mut found = Vec::new();
    // The requests, and the calls of the file's own sender that hand it the timeout
    // (`self._request("POST", path, timeout=self._refund_timeout)`).
    for &node in idx.all(kinds::CALL) {
        let Some(made) = syntax::keyword_arg(node, "timeout", src).and_then(built) else {
            continue;
        };
        let Some(read) = read_of(made).filter(|r| r.kind() == kinds::IDENTIFIER) else {
            continue;
        };
        let name = syntax::text(read, src);
        let Some(func) = idx.enclosing(made, kinds::FUNCTION_DEFINITION) else {
            continue;
        };
        let Some(param) = syntax::defaulted_parameter(func, name, src)
            .filter(|p| p.field("value").is_some_and(|v| v.kind() == kinds::NONE))
        else {
            continue;
        };
        if idx
            .assigned_before(Some(func), name, made.start_byte(), src)
            .is_some()
            || !(super::on_money_path(cx, node) || cx.facts.is_some_and(|f| f.payment_module))
        {
            continue;
        }
        if let Some(line) = caller_leaving_out(idx, func, name, src)
            .or_else(|| bounded_before(cx, func, name).map(|_| 0))
        {
            found.push((node, param, syntax::normalized(made, src), line));
        }
    }
    found
}

/// What the file first sets an attribute to (`self._charge_timeout = httpx.Timeout(...)` in
/// `__init__`), by the attribute as written.
fn attribute_value<'t>(idx: &NodeIndex<'t>, name: &str, src: &str) -> Option<Node<'t>> {
    idx.all(kinds::ASSIGNMENT).iter().find_map(|a| {
        (syntax::text(a.field("left")?, src) == name)
            .then(|| a.field("right"))
            .flatten()
    })
}

/// The old version's default of the parameter `name` of the function of the same name, when it
/// was a bound (`refund_read_timeout: float = 45.0`): the change switched the timeout off.
fn bounded_before(cx: &Ctx<'_>, func: Node<'_>, name: &str) -> Option<String> {
    let src = cx.src();
    let function = syntax::function_name(func, src);
    if !cx.versions.old.as_ref()?.text.contains(name) {
        return None;
    }
    let old = cx.other.get()?;
    let (idx, text) = (old.index(), old.text());
    idx.functions_named(function, text).find_map(|f| {
        let value = syntax::defaulted_parameter(f, name, text)?.field("value")?;
        (value.kind() != kinds::NONE).then(|| syntax::normalized(value, text))
    })
}

/// The line of a call of `func` in the file that leaves its parameter `name` out: by the
/// function's name, or, for an `__init__`, by its class's name or `cls(...)`.
fn caller_leaving_out(idx: &NodeIndex<'_>, func: Node<'_>, name: &str, src: &str) -> Option<u32> {
    let function = syntax::function_name(func, src);
    let class = (function == "__init__")
        .then(|| idx.enclosing(func, kinds::CLASS_DEFINITION))
        .flatten()
        .and_then(|c| c.field("name"))
        .map(|n| syntax::text(n, src));
    let params = crate::rules::pay::positional_parameters(func, src);
    let bound = params.first().is_some_and(|p| matches!(*p, "self" | "cls"));
    let at = params
        .iter()
        .position(|p| *p == name)
        .map(|at| at - usize::from(bound));
    idx.all(kinds::CALL)
        .iter()
        .find(|c| {
            let callee = syntax::callee_name(**c, src);
            let named = match class {
                Some(class) => callee == class || syntax::callee(**c, src) == "cls",
                None => callee == function,
            };
            named
                && !syntax::contains(func, **c)
                && syntax::keyword_arg(**c, name, src).is_none()
                && !syntax::has_dict_splat(**c)
                && at.is_none_or(|at| syntax::positional_args(**c).len() <= at)
        })
        .map(|c| syntax::lines(*c).0)
}

/// Whether the file reads a stream of events, for which a client waits without end on purpose.
fn streams(src: &str) -> bool {
    [
        ".stream(",
        "iter_lines",
        "iter_bytes",
        "httpx_sse",
        "connect_sse",
        "EventSource",
        "websocket",
    ]
    .iter()
    .any(|w| src.contains(w))
}

/// Whether a request's `**kwargs` are the function's own and never hold a timeout: the function
/// sets none in them, and every call of it in the file (one at least) passes none
/// (`self._request("POST", "/payouts", json=payload)` to `_request(self, method, path,
/// **kwargs)` sending `self.session.request(method, url, headers=headers, **kwargs)`).
fn kwargs_carry_no_timeout<'a>(cx: &impl Local<'a>, call: Node<'_>) -> bool {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return false;
    };
    let Some(func) = idx.enclosing(call, kinds::FUNCTION_DEFINITION) else {
        return false;
    };
    let splats: Vec<&str> = call
        .field("arguments")
        .map(crate::python::named_children)
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a.kind() == kinds::DICTIONARY_SPLAT)
        .filter_map(|a| a.named_child(0))
        .map(|n| syntax::text(n, src))
        .collect();
    let [splat] = splats.as_slice() else {
        return false;
    };
    let own = func.field("parameters").is_some_and(|params| {
        crate::python::named_children(params).iter().any(|p| {
            p.kind() == kinds::DICTIONARY_SPLAT_PATTERN
                && p.named_child(0)
                    .is_some_and(|n| syntax::text(n, src) == *splat)
        })
    });
    let body = syntax::text(func, src);
    if !own
        || ["\"timeout\"", "'timeout'", "timeout="]
            .iter()
            .any(|w| body.contains(w))
    {
        return false;
    }
    let name = syntax::function_name(func, src);
    let mut calls = idx
        .all(kinds::CALL)
        .iter()
        .filter(|c| syntax::callee_name(**c, src) == name && !syntax::contains(func, **c))
        .peekable();
    calls.peek().is_some()
        && calls.all(|c| {
            syntax::keyword_arg(*c, "timeout", src).is_none() && !syntax::has_dict_splat(*c)
        })
}

/// `timeout=timeout` where `timeout` is a parameter of the function that defaults to `None`,
/// never set in it before the call, and a call of the function in the file leaves it out
/// (`self._post(path, body, key)` of `_post(..., *, timeout=None)`): the line of that call.
fn none_by_default<'a>(cx: &impl Local<'a>, call: Node<'_>, given: Node<'_>) -> Option<u32> {
    let (idx, src) = (cx.index()?, cx.src());
    if given.kind() != kinds::IDENTIFIER {
        return None;
    }
    let name = syntax::text(given, src);
    let func = idx.enclosing(call, kinds::FUNCTION_DEFINITION)?;
    let defaults_to_none = syntax::defaulted_parameter(func, name, src)
        .and_then(|p| p.field("value"))
        .is_some_and(|v| v.kind() == kinds::NONE);
    if !defaults_to_none
        || idx
            .assigned_before(Some(func), name, call.start_byte(), src)
            .is_some()
    {
        return None;
    }
    caller_leaving_out(idx, func, name, src)
}

/// Whether the call has no timeout of its own and its library's default does not bound it.
fn waits_forever<'a>(cx: &impl Local<'a>, call: &HttpCall<'_>) -> bool {
    let src = cx.src();
    match syntax::keyword_arg(call.node, "timeout", src) {
        // `timeout=None` switches the timeout off, the client's default included; so does a
        // parameter left to its `None` by a caller.
        Some(t) => return t.kind() == kinds::NONE || none_by_default(cx, call.node, t).is_some(),
        // Options passed on may carry one, unless the object keeps a timeout that nothing
        // reads, the options among them.
        None if syntax::has_dict_splat(call.node)
            && !kwargs_carry_no_timeout(cx, call.node)
            && super::kept_timeout(cx).is_none() =>
        {
            return false;
        }
        None => {}
    }
    match call.lib {
        // httpx defaults to 5 seconds.
        Lib::Httpx => false,
        Lib::Requests => true,
        // `urlopen(url, data, timeout)`.
        Lib::Urllib => syntax::positional_args(call.node).len() < 3,
        Lib::Aiohttp | Lib::Urllib3 => !call.client_timeout,
    }
}
