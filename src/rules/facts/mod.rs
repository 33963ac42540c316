//! Facts about a file version that rules share across files: its functions, what each one
//! reaches (HTTP, a cache, a payment operation), and how callers use what they call.
//!
//! Gathered once per file version from the shared `NodeIndex`; rules of any file can ask the
//! `ChangeSet` about any other file of the change without touching its tree.

mod derive;

pub use derive::derive_old;

use std::sync::Arc;

use tree_sitter::Node;

use crate::config::Vocabulary;
use crate::python::{Fields, NodeIndex, ParsedFile, kinds, syntax};

/// What a call talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    Http,
    Cache,
    Payment,
    Sleep,
    Other,
}

/// A function or method of a file version. The lists are shared, not copied, by the old
/// version's facts where they are the new version's moved (`derive`): most of a large change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FunctionFacts {
    pub name: String,
    /// `Class.method` or `outer.inner`; the name alone at module level.
    pub qualname: String,
    pub lines: (u32, u32),
    pub is_async: bool,
    pub annotation: Option<String>,
    /// Lines of `return`/`return None`.
    pub none_returns: Vec<u32>,
    /// The body's last statement can complete, so the function may end by returning `None`.
    pub falls_off_end: bool,
    /// Some `return` gives a value other than `None`.
    pub returns_value: bool,
    pub raises: bool,
    /// The function never returns if these calls never do: it has no `return`, and every path
    /// through its body raises or ends in one of them (none: it always raises, or is annotated
    /// `NoReturn`). `None` when it can return. `raise_api_error(...)` at the end of an
    /// `except` is then no way out of the function (`ChangeSet::never_returns`).
    pub ends_in: Option<Arc<[syntax::Tail]>>,
    /// Exception types its own `except` clauses catch, as written (`httpx.ReadTimeout`);
    /// `BaseException` for a bare `except:`.
    pub caught: Arc<[String]>,
    pub http: bool,
    pub cache: bool,
    pub payment: bool,
    /// It calls a payment provider's SDK at module level in a way that goes over the network
    /// (`stripe.PaymentIntent.create(...)`, `braintree.Transaction.sale(...)`), not to make an
    /// object or check a signature locally (`stripe.error.CardError(...)`,
    /// `stripe.Webhook.construct_event(...)`).
    pub sdk: bool,
    pub sleeps: bool,
    /// Last names of everything it calls, sorted, without duplicates.
    pub callees: Arc<[String]>,
    /// Those of `callees` it calls only as a method of a value that may be a dict, a list, a
    /// string or a queryset (`event.get("type")`, `products.filter(...)`), sorted: the change's
    /// `get` may be what runs, or may not, so no walk that must be sure goes through them.
    pub loose: Box<[String]>,
    pub decorators: Arc<[String]>,
    pub is_test: bool,
    /// [test family] The function's code names an idempotency key (an `Idempotency-Key` header,
    /// an `idempotency_key` argument or variable): a retry test of it should check that key.
    pub mentions_idempotency: bool,
    /// [test family] For a helper of a test file (a function not named `test…`): what it mocks,
    /// lowercased, one statement a line (`self.client.http_client.request = mock.MagicMock(...)`).
    /// A test that calls it mocks that too.
    pub mocks: Option<Arc<str>>,
    /// [test family] For a pytest fixture: its parameters, the fixtures it is built from. A
    /// test handed `service`, built from `idempotency`, built from `redis` (a `FakeRedis`),
    /// reaches the fake.
    pub fixture_params: Box<[String]>,
    /// Its parameters that can be passed by position, comma-separated, `self`/`cls` left out
    /// (`idempotency_key,request_id`): what a call's arguments are bound to.
    pub params: Box<str>,
    /// Its keyword-only parameters, comma-separated (`client` of `def submit(payout, *,
    /// client=None)`): a caller hands these on by name only.
    pub keyword_only: Box<str>,
    /// [test family] For an `__init__`: the attributes it sets from its own parameters, as
    /// `(attribute, parameter)` (`self.gateway = gateway`, `self._http = client or Client()`): a
    /// test that hands the constructor a mock there makes the methods' `self.gateway` that mock.
    pub stores: Box<[(Box<str>, Box<str>)]>,
    /// [idem family] An idempotency key it sends and makes anew on every call, whatever it is
    /// handed (`headers["Idempotency-Key"] = uuid.uuid4().hex`): a caller that retries it sends
    /// another key on every attempt. Read only for functions that name idempotency.
    pub fresh_key: Option<Box<FreshKey>>,
    /// [idem family] The line of a `return` that gives a new value on every call (`return
    /// f"refund:{return_id}:{uuid.uuid4().hex[:12]}"`): a key made by it in a retry is made
    /// anew on every attempt.
    pub returns_fresh: Option<u32>,
    /// [idem family] What it does with each parameter named like a key (`request_ref`,
    /// `sender_batch_id`): sends it as an idempotency key, or hands it on to a call
    /// (`idem::key_params`). Empty for most functions.
    pub forwards: Box<[Forward]>,
    /// [idem family] The fields it moves on by one, with the line (`submit_attempts =
    /// p.submit_attempts + 1` of a claim's SQL, `.values(attempts=T.attempts + 1)`): a caller
    /// that numbers a key by what it returns numbers a new key on every claim. Empty for most
    /// functions.
    pub steps: Steps,
    /// [pay family] For a function named for a verification (`verify_webhook_signature`,
    /// `verify_payment`): the line of its first `return` when every value it returns is the
    /// provider's answer as it came (`return self._request("POST", ...)`), not a yes or a no.
    pub returns_answer: Option<u32>,
    /// [pay family] The key of an outcome every value it returns carries, taken from what it
    /// was answered (`return FundingResult(status=data["status"], ...)`): a caller that drops
    /// the answer cannot know whether the operation succeeded.
    pub returns_outcome: Option<Box<str>>,
    /// [pay family] A parameter named for a currency with a fixed code as its default, as
    /// `currency=USD`: a caller that leaves it out pays in that currency.
    pub currency_default: Option<Box<str>>,
    /// [test family] A parameter with a default that is the sleep it waits with
    /// (`sleep: Sleep = asyncio.sleep`), and its place among the positional ones (`None`:
    /// keyword-only). A test that calls it without one waits for real.
    pub sleep_param: Option<Box<(Box<str>, Option<u32>)>>,
    /// [test family] That parameter defaults to the library's own sleep (`sleep=time.sleep`),
    /// taken when the module loaded: a test that patches `time.sleep` does not reach it.
    pub sleep_captured: bool,
    /// [pay family] A parameter that asks it to lock the rows it reads, with `False` as its
    /// default (`for_update=False` gating `with_for_update()`), and its place among the
    /// positional ones (`None`: keyword-only): a caller that leaves it out reads unlocked.
    pub lock_param: Option<Box<(Box<str>, Option<u32>)>>,
}

/// A parameter of a function sent as an idempotency key (`to: None`) or handed on to a call of
/// `to.0` at `to.1`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Forward {
    pub param: Box<str>,
    pub to: Option<(Box<str>, Slot)>,
}

/// Where a call puts an argument: by keyword, or at a position (`self` not counted).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Slot {
    Keyword(Box<str>),
    Position(u16),
}

/// Where a function makes the key it sends (`FunctionFacts::fresh_key`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FreshKey {
    pub line: u32,
    /// The key as the request names it (`"Idempotency-Key"`, `idempotency_key`).
    pub key: String,
    /// The call that gives a new value each time (`uuid.uuid4()`).
    pub made: String,
    /// The parameter whose absence makes it (`idempotency_key or uuid4().hex`): made anew only
    /// for a caller that gives none. `None`: made whatever the caller gives.
    pub unless: Option<Box<str>>,
}

impl FunctionFacts {
    /// Whether some path returns `None` while others return a value.
    pub fn may_return_none(&self) -> bool {
        self.returns_value && (!self.none_returns.is_empty() || self.falls_off_end)
    }
}

/// A call of a named function and what the caller does with the result. Its texts are shared
/// with the old version's copy of it (`derive`) and with the project index's (`index::extract`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSite {
    /// The callee as written (`client.create_charge`).
    pub callee: Arc<str>,
    /// Where its last name (`name`) starts in it: the name's node ends where the callee's does.
    /// An offset, not a second string: a large change holds tens of thousands of call sites.
    name_at: u32,
    /// Qualified name of the calling function; empty at module level. Shared by the calls of
    /// one function, and by the old version's copies of them (`derive`).
    pub function: Arc<str>,
    pub line: u32,
    /// `result` in `result = create_charge(...)`.
    pub binding: Option<Arc<str>>,
    /// First later line that reads an attribute of the binding (`result.id`) or subscripts it
    /// (`result["id"]`).
    pub deref_line: Option<u32>,
    /// That first use is a subscript: on `None` it raises `TypeError`, not `AttributeError`.
    pub deref_subscript: bool,
    /// The binding is tested (`if result`, `result is None`) before that line.
    pub checked: bool,
    /// The call is a statement of its own (`client.reverse(...)`, `await client.reverse(...)`):
    /// what it returns is dropped.
    pub discarded: bool,
}

impl CallSite {
    /// The callee's last name (`create_charge`).
    pub fn name(&self) -> &str {
        self.callee.get(self.name_at as usize..).unwrap_or_default()
    }

    /// What the callee is called on (`self.gateway` of `self.gateway.charge`); `None` for a
    /// bare name.
    pub fn receiver(&self) -> Option<&str> {
        let before = self.callee.get(..self.name_at as usize)?.trim_end();
        Some(before.strip_suffix('.')?.trim_end())
    }
}

/// What the first use of a `None` result raises, as Python prints it: `(name, message)`.
pub fn none_error(subscript: bool) -> (&'static str, &'static str) {
    if subscript {
        (
            "`TypeError`",
            "`TypeError: 'NoneType' object is not subscriptable`",
        )
    } else {
        (
            "`AttributeError`",
            "`AttributeError: 'NoneType' object has no attribute …`",
        )
    }
}

/// Where `name`, the last name of `callee` (`syntax::CallText`), starts in it. Both are read from
/// the call's function node, and the name's node ends where that node ends; a callee that is
/// neither a name nor an attribute (`handlers[kind](...)`) has no name, and gets the empty end.
fn name_at(callee: &str, name: &str) -> u32 {
    let at = if callee.ends_with(name) {
        callee.len() - name.len()
    } else {
        callee.len()
    };
    u32::try_from(at).unwrap_or(u32::MAX)
}

/// An `import`/`from … import` binding: `local` names `target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    pub local: String,
    pub target: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileFacts {
    pub path: String,
    /// Dotted module path (`app.payments.client`).
    pub module: String,
    pub is_test: bool,
    /// The path or the imports are about payments, billing or checkout.
    pub payment_module: bool,
    pub imports: Vec<Import>,
    /// Names the file binds to an in-process map although they say "cache" (`self._cache =
    /// {}`, `_rates_cache = TTLCache(...)`): their `get` and `set` talk to no server. One entry
    /// per binding, sorted.
    pub memory_caches: Vec<String>,
    /// Names the file binds to a cache client it makes, whatever they say (`r =
    /// redis.Redis(...)`). One entry per binding, sorted.
    pub cache_clients: Vec<String>,
    /// The file begins transactions by taking the database's write lock (`BEGIN IMMEDIATE`,
    /// `BEGIN EXCLUSIVE`): SQLite's way to serialise writers, under which a figure checked and
    /// then written in one transaction cannot be read by another writer between the two.
    pub serialises_writers: bool,
    pub functions: Vec<FunctionFacts>,
    pub calls: Vec<CallSite>,
    /// The file's classes that name bases, each with the last names of its bases
    /// (`("OutcomeUnknown", ["AuthorizeNetError"])`): for rules that ask whether one error
    /// is a kind of another across the change's files.
    pub class_bases: Vec<(String, Vec<String>)>,
    /// Errors the file raises only from a handler of a connection never made
    /// (`except requests.ConnectTimeout: raise GatewayUnavailable(...)`): whatever they are
    /// named, they say the request was not sent.
    pub raised_unsent: Vec<String>,
    /// Errors the file raises from a handler of a transport failure that may come after the
    /// request left (`except requests.ConnectionError: raise GoCardlessError(...)`): whatever
    /// they are named, they carry requests that got no answer.
    pub raised_unanswered: Vec<String>,
}

impl FileFacts {
    pub fn function(&self, qualname: &str) -> Option<&FunctionFacts> {
        self.functions.iter().find(|f| f.qualname == qualname)
    }

    /// `function` for many names: the first function of each qualified name, as `function`
    /// finds it, without a scan of the file's functions per name.
    pub fn functions_by_qualname(&self) -> rustc_hash::FxHashMap<&str, &FunctionFacts> {
        let mut by_qualname = rustc_hash::FxHashMap::default();
        for f in &self.functions {
            by_qualname.entry(f.qualname.as_str()).or_insert(f);
        }
        by_qualname
    }

    /// The facts of the function that spans `line`, innermost first.
    pub fn function_at(&self, line: u32) -> Option<&FunctionFacts> {
        self.functions
            .iter()
            .filter(|f| f.lines.0 <= line && line <= f.lines.1)
            .min_by_key(|f| f.lines.1 - f.lines.0)
    }

    /// What `local` was imported as, if it was.
    pub fn import_target(&self, local: &str) -> Option<&str> {
        self.imports
            .iter()
            .find(|i| i.local == local)
            .map(|i| i.target.as_str())
    }
}

/// Whether one word (of a path or a module) names payment code: `payments`, `billing`, a
/// provider (`fiat/paypal.py`). Asked for every word of every import of every file, so the word
/// is lowercased once and matched by length and bytes, not compared with each word in turn.
pub(crate) fn is_payment_word(word: &str) -> bool {
    // As long as the longest word, `terugbetalingen`.
    let mut lower = [0u8; 16];
    let Some(buf) = lower.get_mut(..word.len()) else {
        return false;
    };
    for (b, c) in buf.iter_mut().zip(word.bytes()) {
        *b = c.to_ascii_lowercase();
    }
    matches!(
        &*buf,
        b"payment"
            | b"payments"
            | b"billing"
            | b"checkout"
            | b"charge"
            | b"charges"
            | b"stripe"
            | b"invoice"
            | b"invoices"
            | b"wallet"
            | b"wallets"
            | b"ledger"
            | b"payout"
            | b"payouts"
            | b"refund"
            | b"refunds"
            | b"pay"
            | b"acquiring"
            | b"paypal"
            | b"adyen"
            | b"braintree"
            | b"mollie"
            | b"razorpay"
            | b"yookassa"
            | b"paystack"
            | b"gocardless"
            | b"chargebee"
            | b"recurly"
            | b"mercadopago"
            // Portuguese and Spanish: `pagamentos/`, `cobrancas.py`, `reembolsos/`.
            | b"pagamento"
            | b"pagamentos"
            | b"pago"
            | b"pagos"
            | b"cobranca"
            | b"cobrancas"
            | b"cobro"
            | b"cobros"
            | b"reembolso"
            | b"reembolsos"
            | b"estorno"
            | b"estornos"
            | b"fatura"
            | b"faturas"
            | b"factura"
            | b"facturas"
            | b"xendit"
            | b"authorizenet"
            | b"liqpay"
            | b"klarna"
            | b"worldpay"
            | b"revolut"
            | b"psp"
            | b"airwallex"
            | b"flutterwave"
            | b"dwolla"
            | b"mangopay"
            // German, French and Dutch: `zahlungen/`, `auszahlung.py`, `virements/`,
            // `paiements.py`, `terugbetalingen.py`.
            | b"zahlung"
            | b"zahlungen"
            | b"auszahlung"
            | b"auszahlungen"
            | b"zahllauf"
            | b"rechnung"
            | b"rechnungen"
            | b"paiement"
            | b"paiements"
            | b"virement"
            | b"virements"
            | b"remboursement"
            | b"facture"
            | b"factures"
            | b"betaling"
            | b"betalingen"
            | b"terugbetaling"
            | b"terugbetalingen"
            | b"incasso"
            // Accounts payable and the treasury that pays them: `payables/modern_treasury.py`.
            | b"payable"
            | b"payables"
            | b"treasury"
            | b"moderntreasury"
            | b"transferwise"
            | b"payu"
            // Italian and Polish: `pagamenti/`, `rimborsi.py`, `platnosci.py`, `zwroty.py`.
            | b"pagamenti"
            | b"rimborso"
            | b"rimborsi"
            | b"addebito"
            | b"addebiti"
            | b"fattura"
            | b"fatture"
            | b"platnosc"
            | b"platnosci"
            | b"zwrot"
            | b"zwroty"
            | b"wyplata"
            | b"wyplaty"
            // More providers, and Russian transliterated: `platezhi/`, `vozvrat.py`.
            | b"pagarme"
            | b"cko"
            | b"paddle"
            | b"dlocal"
            | b"ebanx"
            | b"iyzico"
            | b"midtrans"
            | b"cybersource"
            | b"nuvei"
            | b"bluesnap"
            | b"przelewy24"
            | b"tinkoff"
            | b"cloudpayments"
            | b"platezh"
            | b"platezhi"
            | b"oplata"
            | b"vozvrat"
            | b"vozvraty"
            | b"vyplata"
            | b"vyplaty"
    )
}

/// Payment SDKs, by their top-level package: their module-level calls go to the gateway
/// (`stripe.PaymentIntent.create`, `Payment.create` of `yookassa`).
pub(crate) const PAYMENT_SDKS: &[&str] = &[
    "stripe",
    "braintree",
    "adyen",
    "Adyen",
    "paypalrestsdk",
    "yookassa",
    "checkout_sdk",
    "square",
    "squareup",
    "mollie",
    "razorpay",
    "paddle",
    "paystack",
    "gocardless_pro",
    "chargebee",
    "recurly",
    "mercadopago",
    "xendit",
    "authorizenet",
    "liqpay",
];

impl FileFacts {
    /// Whether the file imports a payment provider's SDK (`import stripe`).
    pub(crate) fn imports_payment_sdk(&self) -> bool {
        self.imports.iter().any(|i| {
            let root = i.target.split('.').next().unwrap_or(&i.target);
            PAYMENT_SDKS.contains(&root)
        })
    }

    /// Whether a call of a payment SDK's module goes over the network: its last name is a lowercase
    /// method (`create`, `retrieve`, `sale`) and none of the SDK's local helpers; a class made
    /// (`stripe.error.CardError(...)`, `braintree.BraintreeGateway(...)`) sends nothing.
    pub(crate) fn sdk_request(&self, callee: &str, name: &str) -> bool {
        const LOCAL: &[&str] = &[
            "construct_from",
            "construct_event",
            "verify_header",
            "configure",
            "set_app_info",
            "convert_to_stripe_object",
            "to_dict",
            "to_dict_recursive",
            "parse",
            "parse_webhook_notification",
            "sample_notification",
            "verify",
            "is_valid_hmac",
            "generate_hmac",
        ];
        name.starts_with(|c: char| c.is_ascii_lowercase())
            && !LOCAL.contains(&name)
            && !callee.contains(".error.")
            && !callee.contains(".util.")
            && !callee.contains("Webhook")
            && self.calls_payment_sdk(callee)
    }

    /// Whether a dotted callee (`stripe.Refund.create`, `Payment.create`) is a payment SDK's,
    /// by the import of its first name.
    pub(crate) fn calls_payment_sdk(&self, callee: &str) -> bool {
        let Some((root, _)) = callee.split_once('.') else {
            return false;
        };
        let target = self.import_target(root).unwrap_or(root);
        PAYMENT_SDKS.contains(&target.split('.').next().unwrap_or(target))
    }
}

/// Whether a path is a test file (`tests/…`, `test_*.py`, `*_test.py`, `conftest.py`, and a
/// Django app's `tests.py`).
pub fn is_test_path(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    path.split('/')
        .any(|part| part == "tests" || part == "test")
        || name.starts_with("test_")
        || name.ends_with("_test.py")
        || matches!(name, "conftest.py" | "tests.py")
}

fn module_of(path: &str) -> String {
    let trimmed = path.strip_suffix(".py").unwrap_or(path);
    let trimmed = trimmed.strip_suffix("/__init__").unwrap_or(trimmed);
    trimmed.trim_start_matches("src/").replace('/', ".")
}

/// Whether `text` holds a payment word, as a whole word in any case (`PaymentIntent` does not,
/// `app/payments/` does).
fn has_payment_word(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .any(is_payment_word)
}

/// The part of an import whose words make the importing file payment code: the module of a
/// class (`app.models` of `app.models.Payment`: reports, admin pages and telemetry import the
/// `Payment` model too), the whole path otherwise (`app.payments`, `app.billing.charge`).
fn importing_module(target: &str) -> &str {
    match target.rsplit_once('.') {
        Some((module, last)) if last.starts_with(|c: char| c.is_ascii_uppercase()) => module,
        _ => target,
    }
}

/// Gathers the facts of one file version.
pub fn gather(path: &str, file: &ParsedFile, vocab: &Vocabulary) -> FileFacts {
    let src = file.text();
    let idx = file.index();
    let imports = imports(idx, src, DottedImport::Module);
    let is_test = is_test_path(path);
    let payment_module = has_payment_word(path)
        || imports.iter().any(|i| {
            let root = i.target.split('.').next().unwrap_or("");
            PAYMENT_SDKS.contains(&root) || has_payment_word(importing_module(&i.target))
        });
    let (memory_caches, cache_clients) = cache_bindings(idx, src, &imports);
    let (raised_unsent, raised_unanswered) = raised_by_handlers(src);
    let file_facts = FileFacts {
        path: path.to_string(),
        module: module_of(path),
        is_test,
        payment_module,
        imports,
        memory_caches,
        cache_clients,
        serialises_writers: serialises_writers(src),
        functions: Vec::new(),
        calls: Vec::new(),
        class_bases: class_bases(src),
        raised_unsent,
        raised_unanswered,
    };
    gather_code(file, file_facts, vocab)
}

/// `FileFacts::class_bases` of a file's text: each `class Name(Base, mod.Other):` line, with
/// the last names of its bases (keywords such as `metaclass=` and subscripted bases aside). Read
/// from the text, so that the old version's facts, derived from the new ones and the old text,
/// are the same as the whole old version's.
pub(crate) fn class_bases(src: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    // Found by the word, not line by line: most lines of a file define no class.
    for at in memchr::memmem::find_iter(src.as_bytes(), b"class ") {
        let line_start = src[..at].rfind('\n').map_or(0, |i| i + 1);
        if !src[line_start..at].bytes().all(|b| b == b' ' || b == b'\t') {
            continue;
        }
        let rest = &src[at + "class ".len()..];
        let rest = rest.split('\n').next().unwrap_or(rest);
        let Some((name, rest)) = rest.split_once('(') else {
            continue;
        };
        let name = name.trim();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            continue;
        }
        let Some((bases, _)) = rest.split_once(')') else {
            continue;
        };
        let bases: Vec<String> = bases
            .split(',')
            .map(str::trim)
            .filter(|b| {
                !b.is_empty()
                    && b.bytes()
                        .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
            })
            .map(|b| last_name(b).to_string())
            .collect();
        if !bases.is_empty() {
            out.push((name.to_string(), bases));
        }
    }
    out
}

/// `FileFacts::raised_unsent` of a file's text: each `raise Name(` under an `except` line (the
/// nearest line above it indented less) that names only errors of a connection never made.
/// Read from the text, as `class_bases` is, for the old version's facts.
/// And `FileFacts::raised_unanswered`: each `raise Name(` under an `except` line that names a
/// transport failure other than a connection never made. Both from one pass over the raises.
pub(crate) fn raised_by_handlers(src: &str) -> (Vec<String>, Vec<String>) {
    let mut unsent: Vec<String> = Vec::new();
    let mut unanswered: Vec<String> = Vec::new();
    let mut elsewhere: Vec<&str> = Vec::new();
    for (name, types, guarded) in raised_in_handlers(src) {
        if guarded || !types.is_empty() && types.iter().all(|t| unsent_error(t)) {
            if !unsent.iter().any(|u| u == name) {
                unsent.push(name.to_string());
            }
        } else {
            elsewhere.push(name);
        }
        if types
            .iter()
            .any(|t| !unsent_error(t) && transport_failure(t))
            && !unanswered.iter().any(|u| u == name)
        {
            unanswered.push(name.to_string());
        }
    }
    unsent.retain(|u| !elsewhere.contains(&u.as_str()));
    (unsent, unanswered)
}

/// A transport failure of requests, httpx or aiohttp, by its last name.
fn transport_failure(name: &str) -> bool {
    matches!(
        name,
        "ConnectionError"
            | "Timeout"
            | "ReadTimeout"
            | "RequestException"
            | "TransportError"
            | "TimeoutException"
            | "ReadError"
            | "RemoteProtocolError"
            | "NetworkError"
            | "ClientError"
            | "ServerDisconnectedError"
            | "ClientOSError"
            | "TimeoutError"
    )
}

/// Each `raise Name(` of the file with the error types of the `except` line it sits under
/// (the nearest line above it indented less), empty when it is under none; and whether the
/// handler it is in (through its `if`s) first raises everything else that it caught, by a test
/// named for a request never sent (`if not _never_sent(exc): raise OutcomeUnknown(...)`).
fn raised_in_handlers(src: &str) -> Vec<(&str, Vec<&str>, bool)> {
    let mut out = Vec::new();
    let indent = |line: &str| line.len() - line.trim_start().len();
    // The words of a guard of a request never sent, looked for once: most files have none.
    // (Three scans of the file for the stems the words share, not one per word.)
    let guards = [b"_sent".as_slice(), b"unsent", b"_SENT"]
        .iter()
        .any(|w| memchr::memmem::find(src.as_bytes(), w).is_some());
    for at in memchr::memmem::find_iter(src.as_bytes(), b"raise ") {
        let line_start = src[..at].rfind('\n').map_or(0, |i| i + 1);
        if !src[line_start..at].bytes().all(|b| b == b' ' || b == b'\t') {
            continue;
        }
        let rest = &src[at + "raise ".len()..];
        let name = rest
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .next()
            .unwrap_or("");
        if !rest[name.len()..].starts_with('(') || name.is_empty() {
            continue;
        }
        let name = last_name(name);
        let depth = at - line_start;
        // The nearest line above that is indented less: the block the `raise` is in.
        let opener = src[..line_start]
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#') && indent(l) < depth)
            .map(str::trim_start);
        let types: Vec<&str> = opener
            .and_then(|l| l.strip_prefix("except"))
            .map(|l| l.split(" as ").next().unwrap_or(l))
            .map(|types| {
                types
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                    .filter(|t| !t.is_empty())
                    .map(last_name)
                    .collect()
            })
            .unwrap_or_default();
        let guarded = guards
            && opener.is_some_and(|l| l.starts_with("if "))
            && after_an_unsent_guard(&src[..line_start], depth);
        out.push((name, types, guarded));
    }
    out
}

/// Words of a test named for a request never sent (`_never_sent(exc)`, `was_unsent`).
const UNSENT_GUARDS: &[&str] = &["never_sent", "not_sent", "unsent"];

/// Whether the text before a `raise` at `depth`, up to its `except` line (through `if`
/// openers), holds `if not <a test named for a request never sent>` whose block raises: what
/// passes on to the `raise` is only what was never sent.
fn after_an_unsent_guard(before: &str, depth: usize) -> bool {
    let indent = |line: &str| line.len() - line.trim_start().len();
    let mut depth = depth;
    let mut handler: Vec<&str> = Vec::new();
    for line in before.lines().rev() {
        let code = line.trim_start();
        if code.is_empty() || code.starts_with('#') {
            continue;
        }
        if indent(line) < depth {
            if code.starts_with("except") {
                break;
            }
            if !(code.starts_with("if ") || code.starts_with("elif ") || code.starts_with("else")) {
                return false;
            }
            depth = indent(line);
        }
        handler.push(line);
    }
    // In reading order: a guard, then its block's first line.
    handler.reverse();
    handler.windows(2).any(|pair| {
        let guard = pair[0].trim_start().to_ascii_lowercase();
        guard.starts_with("if not ")
            && UNSENT_GUARDS.iter().any(|w| guard.contains(w))
            && indent(pair[1]) > indent(pair[0])
            && pair[1].trim_start().starts_with("raise ")
    })
}

/// An error raised before a byte of the request left: a connection refused or never made.
fn unsent_error(name: &str) -> bool {
    matches!(
        name,
        "ConnectTimeout"
            | "ConnectError"
            | "ConnectTimeoutError"
            | "NewConnectionError"
            | "ClientConnectorError"
            | "PoolTimeout"
    )
}

/// `FileFacts::serialises_writers` of a file's text.
pub(crate) fn serialises_writers(src: &str) -> bool {
    [
        "BEGIN IMMEDIATE",
        "BEGIN EXCLUSIVE",
        "begin immediate",
        "begin exclusive",
    ]
    .iter()
    .any(|w| memchr::memmem::find(src.as_bytes(), w.as_bytes()).is_some())
}

/// The functions and calls of `file`, into `facts`, whose file-level part (path, imports) is
/// already filled in: what classifies a call comes from there, not from the tree.
fn gather_code(file: &ParsedFile, mut facts: FileFacts, vocab: &Vocabulary) -> FileFacts {
    let src = file.text();
    let idx = file.index();
    // Sized once: grown push by push, the facts were copied at every doubling.
    facts
        .functions
        .reserve(idx.all(kinds::FUNCTION_DEFINITION).len());
    // Asked once for the file, not again for each of its functions.
    let sdk_file = facts.imports_payment_sdk();
    for &func in idx.all(kinds::FUNCTION_DEFINITION) {
        let function = function_facts(func, idx, src, &facts, vocab, sdk_file);
        facts.functions.push(function);
    }
    wrapped_fresh_keys(&mut facts.functions);
    wrapped_retries_sleep(idx, src, &mut facts.functions);
    steps_of_module_queries(file.tree().root_node(), idx, src, &mut facts.functions);
    // A call's function is one of those just read: its qualified name is not worked out again
    // for each of its calls, nor copied for each.
    let functions = idx.all(kinds::FUNCTION_DEFINITION);
    let qualnames: Vec<Arc<str>> = facts
        .functions
        .iter()
        .map(|f| Arc::from(f.qualname.as_str()))
        .collect();
    let qualname_of = |func: Node<'_>| {
        functions
            .binary_search_by_key(&func.start_byte(), |f| f.start_byte())
            .ok()
            .filter(|&i| functions[i].id() == func.id())
            .and_then(|i| qualnames.get(i))
            .map_or_else(|| Arc::from(qualname(func, idx, src)), Arc::clone)
    };
    let calls = idx
        .all(kinds::CALL)
        .iter()
        .map(|&call| {
            let mut site = call_site_with(call, idx, src, &qualname_of);
            site.discarded = stands_alone(call.start_byte(), call.end_byte(), src);
            site
        })
        .collect();
    facts.calls = calls;
    facts
}

/// A function wrapped by a decorator of the file whose wrapper fills in a fresh key when the
/// caller gives none (`@idempotent` over `create_recurring_payment`, whose `wrapper(self,
/// *args, idempotency_key=None, **kwargs)` sends `idempotency_key or uuid.uuid4().hex`): the
/// function makes a key anew for a caller that passes none, as if it did so itself.
fn wrapped_fresh_keys(functions: &mut [FunctionFacts]) {
    let wrappers: Vec<(String, FreshKey)> = functions
        .iter()
        .filter_map(|f| {
            let key = f.fresh_key.as_deref().filter(|k| k.unless.is_some())?;
            let (outer, _) = f.qualname.split_once('.')?;
            functions
                .iter()
                .any(|o| o.qualname == outer)
                .then(|| (outer.to_string(), key.clone()))
        })
        .collect();
    if wrappers.is_empty() {
        return;
    }
    for func in functions.iter_mut().filter(|f| f.fresh_key.is_none()) {
        let by = func.decorators.iter().find_map(|d| {
            let name = d.split('(').next().unwrap_or(d).trim();
            wrappers.iter().find(|(outer, _)| outer == name)
        });
        if let Some((_, key)) = by {
            func.fresh_key = Some(Box::new(key.clone()));
        }
    }
}

/// A function that calls what the file bound to a waiting retry wrapped around another
/// (`self._send_with_retries = backoff.on_exception(backoff.expo, ...)(self._send)`) waits
/// between its attempts as a decorated one does.
fn wrapped_retries_sleep(idx: &NodeIndex<'_>, src: &str, functions: &mut [FunctionFacts]) {
    // Only where a function builds a policy: the functions' callees are sorted names.
    let builds_a_policy = functions.iter().any(|f| {
        [
            "AsyncRetrying",
            "Retrying",
            "on_exception",
            "on_predicate",
            "retry",
        ]
        .iter()
        .any(|n| f.callees.binary_search_by(|c| c.as_str().cmp(n)).is_ok())
    });
    if !builds_a_policy {
        return;
    }
    let mut wrapped: Vec<&str> = idx
        .all(kinds::ASSIGNMENT)
        .iter()
        .filter_map(|a| {
            let value = a.field("right").filter(|v| v.kind() == kinds::CALL)?;
            let wrapper = value
                .field("function")
                .filter(|f| f.kind() == kinds::CALL)?;
            waits_between_attempts(syntax::text(wrapper, src)).then_some(())?;
            let left = syntax::text(a.field("left")?, src);
            Some(left.rsplit('.').next().unwrap_or(left))
        })
        .collect();
    if wrapped.is_empty() {
        return;
    }
    wrapped.sort_unstable();
    for func in functions.iter_mut().filter(|f| !f.sleeps) {
        func.sleeps = wrapped.iter().any(|w| {
            func.callees
                .binary_search_by(|c| c.as_str().cmp(*w))
                .is_ok()
        });
    }
}

/// Whether a call only records what happened: logging (`logger.info`, `log.warning`,
/// `logging.error`), metrics (`statsd.incr`), Sentry (`sentry_sdk.capture_exception`), `print`.
pub(crate) fn only_records(callee: &str) -> bool {
    let (receiver, name) = callee.rsplit_once('.').unwrap_or(("", callee));
    let receiver = receiver
        .rsplit('.')
        .next()
        .unwrap_or(receiver)
        .to_ascii_lowercase();
    matches!(name, "print" | "capture_exception" | "capture_message")
        || receiver.ends_with("log")
        || receiver.ends_with("logger")
        || receiver == "logging"
        || receiver.contains("metric")
        || receiver.contains("statsd")
        || receiver == "sentry_sdk"
        // A logger named in another language (`journal = logging.getLogger(__name__)`), by the
        // log levels it is called with: a `journal` of entries is no logger.
        || matches!(receiver.as_str(), "journal" | "registro" | "protokoll" | "dziennik")
            && matches!(
                name,
                "debug" | "info" | "warning" | "warn" | "error" | "exception" | "critical"
            )
}

/// Whether a function's code names an idempotency key: not its comments, nor its docstring
/// (`anything that identifies the operation, idempotency keys included, is the caller's`).
fn names_idempotency_in_code(func: Node<'_>, src: &str) -> bool {
    let text = syntax::text(func, src);
    if !syntax::IDEMPOTENCY_WORDS
        .iter()
        .any(|w| syntax::contains_lowercase(text, w))
    {
        return false;
    }
    let docstring = func
        .field("body")
        .and_then(|b| b.named_child(0))
        .filter(|s| s.kind() == kinds::EXPRESSION_STATEMENT)
        .filter(|s| s.named_child(0).is_some_and(|n| n.kind() == kinds::STRING));
    match docstring {
        Some(doc) => {
            let (before, after) = (
                src.get(func.start_byte()..doc.start_byte()).unwrap_or(""),
                src.get(doc.end_byte()..func.end_byte()).unwrap_or(""),
            );
            syntax::code_names_idempotency(before) || syntax::code_names_idempotency(after)
        }
        None => syntax::code_names_idempotency(text),
    }
}

/// Whether the call at `start..end` is a statement of its own, what it returns dropped
/// (`client.reverse(...)`, `await client.reverse(...)` on their own lines), read from the text:
/// asking the call for its parent walks the tree down from its root, for every call of a
/// change. Alone on its lines, after an indent and perhaps `await`, with nothing but a comment
/// after it, and after a line that does not leave an expression open (a bracket, a comma, an
/// operator, a backslash): not `x = (` then the call, nor `f(a,` then the call.
pub(crate) fn stands_alone(start: usize, end: usize, src: &str) -> bool {
    let (Some(head), Some(tail)) = (src.get(..start), src.get(end..)) else {
        return false;
    };
    // Most calls are not at the start of their line: the byte before them says so.
    let indent = |text: &str| text.len() - text.trim_end_matches([' ', '\t']).len();
    let mut line_start = start - indent(head);
    if let Some(awaited) = head[..line_start].strip_suffix("await") {
        line_start = awaited.len() - indent(awaited);
    }
    if line_start > 0 && head.as_bytes()[line_start - 1] != b'\n' {
        return false;
    }
    let line_end = memchr::memchr(b'\n', tail.as_bytes()).unwrap_or(tail.len());
    let rest = tail[..line_end].trim_start();
    if !(rest.is_empty() || rest.starts_with('#')) {
        return false;
    }
    let above = head[..line_start].trim_end();
    let previous = &above[memchr::memrchr(b'\n', above.as_bytes()).map_or(0, |i| i + 1)..];
    // A trailing comment is not code (a `#` in a string is rare enough at a line's end).
    let previous = previous.split('#').next().unwrap_or(previous).trim_end();
    !previous.ends_with([
        '(', '[', '{', ',', '=', '+', '-', '*', '/', '%', '<', '>', '&', '|', '^', '~', '\\',
    ])
}

/// What an unaliased `import a.b` is recorded as: it binds `a`, and a reader may want the
/// module it loads (`django.core.cache`, for what a file uses) or what the name `a` refers to
/// (the package `a`, for resolving `a.x` across modules).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum DottedImport {
    Module,
    Binding,
}

/// The file's imports, `from m import x [as y]` as `m.x`, in source order.
pub(crate) fn imports(idx: &NodeIndex<'_>, src: &str, dotted: DottedImport) -> Vec<Import> {
    let mut out = Vec::new();
    for &stmt in idx.all(kinds::IMPORT_FROM_STATEMENT) {
        let module = stmt
            .field("module_name")
            .map(|m| syntax::text(m, src))
            .unwrap_or("");
        let mut cursor = stmt.walk();
        for name in stmt.children_by_field_name("name", &mut cursor) {
            let (target, local) = syntax::aliased_import(name, src);
            out.push(Import {
                local: local.to_string(),
                target: format!("{module}.{target}"),
            });
        }
    }
    for &stmt in idx.all(kinds::IMPORT_STATEMENT) {
        let mut cursor = stmt.walk();
        for name in stmt.children_by_field_name("name", &mut cursor) {
            let (target, local) = syntax::aliased_import(name, src);
            let local = local.split('.').next().unwrap_or(local);
            let aliased = name.kind() == kinds::ALIASED_IMPORT;
            let target = if aliased || dotted == DottedImport::Module {
                target
            } else {
                local
            };
            out.push(Import {
                local: local.to_string(),
                target: target.to_string(),
            });
        }
    }
    out
}

/// The first function of a file whose `qualname` is `qualname`: the same function in the other
/// version of the file.
pub fn function_by_qualname<'t>(
    idx: &NodeIndex<'t>,
    src: &str,
    qualname: &str,
) -> Option<Node<'t>> {
    idx.all(kinds::FUNCTION_DEFINITION)
        .iter()
        .copied()
        .find(|f| self::qualname(*f, idx, src) == qualname)
}

/// `Class.method` / `outer.inner` for a function node.
pub fn qualname(func: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> String {
    let mut parts = vec![syntax::function_name(func, src)];
    let mut current = func;
    loop {
        // The innermost of the function and the class around it.
        let outer = match (
            idx.enclosing(current, kinds::FUNCTION_DEFINITION),
            idx.enclosing(current, kinds::CLASS_DEFINITION),
        ) {
            (Some(f), Some(c)) if f.start_byte() >= c.start_byte() => f,
            (Some(f), None) => f,
            (_, Some(c)) => c,
            (None, None) => break,
        };
        parts.push(
            outer
                .field("name")
                .map(|n| syntax::text(n, src))
                .unwrap_or(""),
        );
        current = outer;
    }
    parts.reverse();
    parts.join(".")
}

/// Fields a function moves on by one, each with its line.
pub type Steps = Box<[(Box<str>, u32)]>;

/// A claim's SQL kept in a module constant (`_CLAIM = """UPDATE ... SET attempts = p.attempts
/// + 1 ..."""`) steps its fields for the functions that run it by name.
fn steps_of_module_queries(
    root: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &str,
    functions: &mut [FunctionFacts],
) {
    if memchr::memmem::find(src.as_bytes(), b"+ 1").is_none()
        && memchr::memmem::find(src.as_bytes(), b"+1").is_none()
    {
        return;
    }
    // The module's own statements, children of the root: a node's parent is found by a walk
    // from the root, too dear to ask of every assignment.
    let constants: Vec<(&str, Steps)> = crate::python::named_children(root)
        .into_iter()
        .filter(|s| s.kind() == kinds::EXPRESSION_STATEMENT)
        .filter_map(|s| s.named_child(0).filter(|a| a.kind() == kinds::ASSIGNMENT))
        .filter_map(|a| {
            let name = a.field("left").filter(|l| l.kind() == kinds::IDENTIFIER)?;
            let value = a.field("right")?;
            let steps = crate::rules::idem::key_numbered_by_count::stepped_fields(
                syntax::text(value, src),
                syntax::lines(value).0,
            );
            (!steps.is_empty()).then(|| (syntax::text(name, src), steps))
        })
        .collect();
    if constants.is_empty() {
        return;
    }
    for (func, facts) in idx
        .all(kinds::FUNCTION_DEFINITION)
        .iter()
        .zip(functions.iter_mut())
    {
        let text = syntax::text(*func, src);
        let mut steps = facts.steps.to_vec();
        for (name, stepped) in &constants {
            if syntax::has_word(text, name) {
                steps.extend(stepped.iter().cloned());
            }
        }
        if steps.len() > facts.steps.len() {
            facts.steps = steps.into();
        }
    }
}

/// `sleep_param`: the first parameter named for a sleep (`sleep`, `_sleep`, `backoff_sleep`)
/// that has a default, with its place among the positional parameters.
fn sleep_param(func: Node<'_>, src: &str) -> Option<Box<(Box<str>, Option<u32>)>> {
    let params = func.field("parameters")?;
    memchr::memmem::find(syntax::text(params, src).as_bytes(), b"sleep")?;
    let mut positional = Some(0u32);
    for param in crate::python::named_children(params) {
        match param.kind() {
            "default_parameter" | "typed_default_parameter" => {
                let name = param.field("name").map_or("", |n| syntax::text(n, src));
                // Named for it, or given a library's sleep whatever its name (`schlafen:
                // Callable[[float], Awaitable[None]] = asyncio.sleep`, `attendre=time.sleep`).
                if syntax::names_sleep(name) || library_sleep(param, src) {
                    return Some(Box::new((name.into(), positional)));
                }
            }
            "list_splat_pattern" | "dictionary_splat_pattern" | "keyword_separator" => {
                positional = None;
                continue;
            }
            _ => {}
        }
        positional = positional.map(|p| p + 1);
    }
    None
}

/// `sleep_captured`: a parameter named for a sleep whose default is a library's sleep.
fn sleep_captured(func: Node<'_>, src: &str) -> bool {
    func.field("parameters")
        .map(crate::python::named_children)
        .unwrap_or_default()
        .into_iter()
        .any(|param| library_sleep(param, src))
}

/// A parameter whose default is a library's sleep: `sleep=time.sleep`, `slaap=asyncio.sleep`.
fn library_sleep(param: Node<'_>, src: &str) -> bool {
    param.field("value").is_some_and(|v| {
        matches!(
            syntax::text(v, src),
            "time.sleep" | "asyncio.sleep" | "anyio.sleep" | "trio.sleep" | "sleep"
        )
    })
}

fn function_facts(
    func: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &str,
    file: &FileFacts,
    vocab: &Vocabulary,
    sdk_file: bool,
) -> FunctionFacts {
    let name = syntax::function_name(func, src).to_string();
    // Only what belongs to this function, not to functions nested in it.
    let own = |node: &Node<'_>| {
        idx.enclosing(*node, kinds::FUNCTION_DEFINITION)
            .is_some_and(|f| f.id() == func.id())
    };
    let mut facts = FunctionFacts {
        qualname: qualname(func, idx, src),
        lines: syntax::lines(func),
        is_async: syntax::is_async(func),
        annotation: syntax::return_annotation(func, src).map(str::to_string),
        is_test: file.is_test && name.starts_with("test"),
        mentions_idempotency: names_idempotency_in_code(func, src),
        params: crate::rules::pay::positional_parameters(func, src)
            .join(",")
            .into(),
        // Most functions take none: the parameters' text is searched for a `*` first.
        keyword_only: func
            .field("parameters")
            .filter(|p| syntax::text(*p, src).contains('*'))
            .map(|_| syntax::keyword_only_parameters(func, src).join(",").into())
            .unwrap_or_default(),
        name,
        ..FunctionFacts::default()
    };
    // `None`: no value returned yet; `Some(None)`: values without one key of an outcome.
    let mut outcome: Option<Option<&str>> = None;
    for ret in idx
        .within(func, kinds::RETURN_STATEMENT)
        .iter()
        .filter(|n| own(n))
    {
        if syntax::returns_none(*ret) {
            facts.none_returns.push(syntax::lines(*ret).0);
        } else {
            facts.returns_value = true;
            if !file.is_test && outcome != Some(None) {
                let key = syntax::return_value(*ret)
                    .and_then(|v| crate::rules::pay::answer_dropped_then_done::outcome_key(v, src));
                outcome = Some(match (outcome, key) {
                    (None, key) => key,
                    (Some(Some(known)), Some(key)) if known == key => Some(key),
                    _ => None,
                });
            }
            if facts.returns_fresh.is_none()
                && crate::rules::idem::key_made_per_attempt::gives_fresh(*ret, idx, src)
            {
                facts.returns_fresh = Some(syntax::lines(*ret).0);
            }
        }
    }
    facts.returns_outcome = outcome.flatten().map(Into::into);
    // The parameters' names are at hand: most functions take no currency.
    if !file.is_test
        && (facts.params.contains("currency") || facts.keyword_only.contains("currency"))
    {
        facts.currency_default =
            crate::rules::pay::currency_left_to_default::currency_default(func, src);
    }
    if !file.is_test
        && [&facts.params, &facts.keyword_only]
            .iter()
            .any(|p| p.contains("update") || p.contains("lock"))
    {
        facts.lock_param = crate::rules::pay::lock_left_off::lock_param(func, src);
    }
    facts.raises = idx.within(func, kinds::RAISE_STATEMENT).iter().any(own);
    let mut caught = Vec::new();
    for clause in idx
        .within(func, kinds::EXCEPT_CLAUSE)
        .iter()
        .filter(|n| own(n))
    {
        let types = syntax::except_types(*clause);
        if types.is_empty() {
            caught.push("BaseException".to_string());
        }
        caught.extend(types.iter().map(|t| syntax::text(*t, src).to_string()));
    }
    caught.sort();
    caught.dedup();
    facts.caught = caught.into();
    let tails = func.field("body").map(|b| syntax::tail_calls(b, src));
    // Calls are taken to return here, as everywhere a function's own facts are read.
    facts.falls_off_end = tails
        .as_ref()
        .is_some_and(|t| t.as_ref().is_none_or(|t| !t.is_empty()));
    facts.ends_in = ends_in(func, src, tails.flatten(), || {
        facts.returns_value || !facts.none_returns.is_empty()
    });
    let helper = file.is_test && !facts.name.starts_with("test");
    let mut mocks = String::new();
    let mut callees: Vec<&str> = Vec::new();
    // Names the function binds to HTTP clients it makes, read at its first call of a verb on
    // a name `classify` does not know.
    let mut made_clients: Option<Vec<&str>> = None;
    // Calls of names a builtin's method has, and whether each is on what may be a builtin.
    let mut builtin_named: Vec<(&str, bool)> = Vec::new();
    for call in idx.within(func, kinds::CALL).iter().filter(|n| own(n)) {
        let parts = idx.call_text(*call, src);
        if sdk_file && !facts.sdk && file.sdk_request(parts.callee, parts.name) {
            facts.sdk = true;
        }
        // `fakeredis.FakeRedis()`, `fake_aioredis.FakeRedis(server=...)`: an in-memory stand-in.
        if helper && makes_a_stand_in(parts.name) {
            mocks.push_str(&mock_statement(*call, src).to_ascii_lowercase());
            mocks.push('\n');
        }
        // `BillingClient(URL, KEY, session=fake_paystream)`: a fixture that hands the client a
        // stand-in for its transport, made by another fixture.
        if helper {
            for (slot, value) in syntax::keyword_args(*call, src) {
                let root = syntax::text(value, src)
                    .split(['.', '('])
                    .next()
                    .unwrap_or_default();
                let value = syntax::text(value, src).to_ascii_lowercase();
                // `transport=paylane.transport()`, `http=http`: what a fixture of the file that
                // makes a stand-in (`return FakePayLane()`) hands over.
                let faked = || {
                    STAND_IN_SLOTS.contains(&slot)
                        && idx.functions_named(root, src).any(|f| {
                            f.id() != func.id()
                                && idx
                                    .within(f, kinds::CALL)
                                    .iter()
                                    .any(|c| makes_a_stand_in(idx.callee_name(*c, src)))
                        })
                };
                if faked() {
                    mocks.push_str(&format!("{slot}=fake {value}\n"));
                    continue;
                }
                // `MollieClient(..., sleep=lambda seconds: None)`: a sleep of its own, which the
                // retry tests it serves do not wait through.
                // A name the helper made falling back to the real one (`sleep = sleeps.append
                // if sleeps is not None else time.sleep`) is the real sleep when none is given.
                let made = || {
                    syntax::keyword_arg(*call, slot, src)
                        .filter(|v| v.kind() == kinds::IDENTIFIER)
                        .and_then(|v| {
                            idx.assigned_before(
                                Some(func),
                                syntax::text(v, src),
                                call.start_byte(),
                                src,
                            )
                        })
                        .map(|v| syntax::text(v, src).to_ascii_lowercase())
                };
                const REAL: [&str; 4] =
                    ["time.sleep", "asyncio.sleep", "gevent.sleep", "trio.sleep"];
                let own_sleep = syntax::names_sleep(slot)
                    && !REAL.iter().any(|real| value.contains(real))
                    && !made().is_some_and(|m| REAL.iter().any(|real| m.contains(real)));
                // `transport=transport` of `mollie_transport(...)`, a helper of the tests:
                // httpx takes a transport only to stand in for the network, and a test helper
                // hands one over for no other reason.
                let a_transport = slot == "transport" && !value.contains("httptransport(");
                if STAND_IN_SLOTS.contains(&slot) && (names_a_stand_in(&value) || a_transport)
                    || own_sleep
                {
                    mocks.push_str(&format!("{slot}={value}\n"));
                }
            }
        }
        match classify_at(*call, &parts, src, file, vocab) {
            Target::Http if !a_sessions_key(*call, &parts, src) => facts.http = true,
            Target::Http => {}
            Target::Cache => facts.cache = true,
            Target::Payment => facts.payment = true,
            Target::Sleep => facts.sleeps = true,
            Target::Other => {
                if let Some(receiver) = parts.receiver
                    && !facts.http
                    && HTTP_VERBS.contains(&parts.name)
                {
                    let made =
                        made_clients.get_or_insert_with(|| clients_made_in(func, idx, src, file));
                    facts.http = made.contains(&receiver);
                }
            }
        }
        if calls_no_function_of_the_change(&parts) {
            continue;
        }
        callees.push(parts.name);
        if let Some(receiver) = parts.receiver
            && a_builtins_method(parts.name)
        {
            builtin_named.push((parts.name, may_be_a_builtin(receiver, file)));
        }
    }
    // Flask-Caching set up in the process (`"CACHE_TYPE": "SimpleCache"` in the app a fixture
    // makes): the code's `cache` is no server.
    if helper {
        let text = syntax::text(func, src);
        if memchr::memmem::find(text.as_bytes(), b"CACHE_TYPE").is_some()
            && [
                "SimpleCache",
                "NullCache",
                "\"simple\"",
                "'simple'",
                "\"null\"",
                "'null'",
            ]
            .iter()
            .any(|w| text.contains(w))
        {
            mocks.push_str("cache_type=simplecache\n");
        }
    }
    callees.sort_unstable();
    callees.dedup();
    if builtin_named.iter().any(|&(_, loose)| loose) {
        // A name is loose when no call of it is sure: `(name, false)` sorts first.
        builtin_named.sort_unstable();
        builtin_named.dedup_by_key(|&mut (name, _)| name);
        facts.loose = builtin_named
            .iter()
            .filter(|&&(_, loose)| loose)
            .map(|&(name, _)| name.to_string())
            .collect();
    }
    facts.callees = callees.into_iter().map(str::to_string).collect();
    if !mocks.is_empty() {
        facts.mocks = Some(mocks.into());
    }
    if facts.mentions_idempotency
        && crate::rules::idem::key_made_per_attempt::names_fresh(syntax::text(func, src))
    {
        facts.fresh_key = crate::rules::idem::key_made_per_attempt::made_anew(func, idx, src)
            .or_else(|| crate::rules::idem::key_made_per_attempt::made_unless_given(func, idx, src))
            .map(Box::new);
    }
    facts.forwards = crate::rules::idem::key_params::forwards(func, idx, src, own);
    facts.steps = crate::rules::idem::key_numbered_by_count::stepped_fields(
        syntax::text(func, src),
        facts.lines.0,
    );
    if !facts.steps.is_empty() {
        facts.steps = crate::rules::idem::key_numbered_by_count::unsettled_steps(
            func,
            idx,
            src,
            &facts.steps,
        );
    }
    facts.sleep_param = sleep_param(func, src);
    facts.sleep_captured = facts.sleep_param.is_some() && sleep_captured(func, src);
    if crate::rules::pay::verification_answer_taken_as_yes::verifies(&facts.name) {
        facts.returns_answer = crate::rules::pay::verification_answer_taken_as_yes::returns_answer(
            func, idx, src, own,
        );
    }
    if facts.name == "__init__" {
        // Keyword-only ones too (`*, session=None`): a test hands its stand-in by keyword.
        let keyword_only = func
            .field("parameters")
            .is_some_and(|p| memchr::memchr(b'*', syntax::text(p, src).as_bytes()).is_some());
        let all = if keyword_only {
            crate::rules::pay::parameters(func, src).join(",")
        } else {
            facts.params.to_string()
        };
        if !all.is_empty() {
            facts.stores = stored_parameters(func, idx, src, &all);
        }
    }
    if let Some(parent) = idx.decorated(func) {
        facts.decorators = syntax::decorators(parent)
            .into_iter()
            .map(|d| syntax::text(d, src).trim_start_matches('@').to_string())
            .collect();
        if helper && facts.decorators.iter().any(|d| d.contains("fixture")) {
            facts.fixture_params = crate::rules::pay::parameters(func, src).into();
        }
        // A retry decorator that waits between attempts sleeps as surely as `time.sleep` does:
        // a test that runs the function through a failure waits too, and async code that calls
        // it blocks its loop.
        facts.sleeps |= facts.decorators.iter().any(|d| waits_between_attempts(d));
    }
    facts
}

/// Whether a decorator retries the function and waits before each new attempt: tenacity with a
/// `wait=` other than `wait_none()`, `backoff.on_exception`/`on_predicate` (which always wait),
/// `retrying` with a wait in milliseconds. Celery's `autoretry_for` waits in the broker, not here.
fn waits_between_attempts(decorator: &str) -> bool {
    if crate::rules::retry::attempts::retried_by_decorator(decorator).is_none()
        || decorator.contains("autoretry_for")
    {
        return false;
    }
    let head = decorator.split('(').next().unwrap_or(decorator);
    if head.starts_with("backoff.") {
        return true;
    }
    let compact: String = decorator.split_whitespace().collect();
    let waits = compact.contains("wait=")
        || compact.contains("wait_fixed=")
        || compact.contains("wait_exponential_multiplier=")
        || compact.contains("wait_random_min=");
    waits && !compact.contains("wait=wait_none()") && !compact.contains("wait=tenacity.wait_none()")
}

/// Calls that make or install a mock.
const MOCK_MAKERS: &[&str] = &[
    // httpx's own stand-in for the network: a client built on it sends nothing.
    "MockTransport",
    // `respx.mock(base_url=...)`, `responses.RequestsMock()`, `requests_mock.Mocker()`,
    // `aioresponses()`: routers that answer the requests of what runs inside them.
    "mock",
    "RequestsMock",
    "Mocker",
    "aioresponses",
    "MagicMock",
    "Mock",
    "AsyncMock",
    "NonCallableMock",
    "create_autospec",
    "patch",
    "object",
    "setattr",
];

/// Whether a method prepares each test: `setUp`, `asyncSetUp`, `setup_method`.
pub(crate) fn sets_up(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.starts_with("setup") || name.starts_with("asyncsetup")
}

/// Keyword arguments a client takes its transport or its cache by.
const STAND_IN_SLOTS: &[&str] = &[
    "session",
    "http",
    "http_client",
    "transport",
    "requester",
    "redis",
    "cache",
    // The address of a fake server the tests run (`base_url=fake_paypal.url`).
    "base_url",
    "url",
    "api_base",
    "endpoint",
];

/// Whether a value handed to a client, lowercased, is a stand-in by its name (`fake_paystream`,
/// `stub_transport`, `mock_session`).
pub(crate) fn names_a_stand_in(value: &str) -> bool {
    ["fake", "stub", "mock", "dummy"]
        .iter()
        .any(|w| value.starts_with(w))
}

/// `fakeredis.FakeRedis()`, `respx.mock(...)`, `patch(...)`: a call that makes a stand-in.
fn makes_a_stand_in(name: &str) -> bool {
    MOCK_MAKERS.contains(&name)
        || name.starts_with("Fake")
        // `GatewayFalso()`, `AtrapaHttp()`: a class of the tests named for a fake in its words.
        || name.starts_with(|c: char| c.is_ascii_uppercase())
            && crate::rules::testing::named_foreign_double(name)
}

/// What a helper of a test file (a `setUp`) makes to stand in for something, lowercased, one
/// statement a line, as `FunctionFacts::mocks` holds it: for the project index, which keeps it
/// for the `setUp` of a test base class that the change's tests inherit.
pub(crate) fn stand_ins(func: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> String {
    let mut out = String::new();
    for &call in idx.within(func, kinds::CALL) {
        if makes_a_stand_in(idx.callee_name(call, src)) {
            out.push_str(&mock_statement(call, src).to_ascii_lowercase());
            out.push('\n');
        }
    }
    out
}

/// What a mock is made for: the assignment it is stored by (`client.request = MagicMock()`
/// names what it replaces), or the call itself (`patch("app.client.requests.post")`).
fn mock_statement<'s>(call: Node<'_>, src: &'s str) -> &'s str {
    let assignment = call
        .parent()
        .filter(|p| p.kind() == kinds::ASSIGNMENT)
        .filter(|p| p.field("right").is_some_and(|r| r.id() == call.id()));
    syntax::text(assignment.unwrap_or(call), src)
}

const HTTP_VERBS: &[&str] = &[
    "get", "post", "put", "patch", "delete", "request", "head", "options", "send", "stream",
];
const HTTP_MODULES: &[&str] = &["httpx", "requests", "aiohttp", "urllib3", "session", "http"];
const CACHE_METHODS: &[&str] = &[
    "get",
    "set",
    "setex",
    "psetex",
    "setnx",
    "add",
    "delete",
    "incr",
    "decr",
    "expire",
    "getset",
    "get_or_set",
    "hget",
    "hset",
    "hsetnx",
    "mget",
    "exists",
    "getdel",
    "getex",
    "hexists",
    "sismember",
    "sadd",
    "srem",
];

/// `cache` for `self.cache`: what a receiver is named by.
/// `FunctionFacts::ends_in` of `func`, from the calls that end its body's paths
/// (`syntax::tail_calls`); `returns`: whether it has a `return` of its own.
pub(crate) fn ends_in(
    func: Node<'_>,
    src: &str,
    tails: Option<Vec<syntax::Tail>>,
    returns: impl FnOnce() -> bool,
) -> Option<Arc<[syntax::Tail]>> {
    if returns() {
        return None;
    }
    let no_return = syntax::return_annotation(func, src)
        .is_some_and(|a| matches!(last_name(a.trim()), "NoReturn" | "Never"));
    if no_return {
        return Some(Arc::from([]));
    }
    tails.map(Arc::from)
}

pub(crate) fn last_name(receiver: &str) -> &str {
    receiver.rsplit('.').next().unwrap_or(receiver)
}

/// Whether `name` (a receiver) is a cache client: by its name, by the configured names, or by
/// what it was imported from (`from app.cache import client`).
pub fn is_cache_name(name: &str, file: &FileFacts, vocab: &Vocabulary) -> bool {
    if file.memory_caches.iter().any(|m| m == name) {
        return false;
    }
    // `self._kv` is the `kv` of the vocabulary.
    let bare = name.trim_start_matches('_');
    file.cache_clients.iter().any(|c| c == name)
        || syntax::contains_lowercase(name, "redis")
        || syntax::contains_lowercase(name, "cache")
        || vocab
            .cache_clients
            .iter()
            .any(|c| syntax::eq_lowercase(bare, c))
        || file.import_target(name).is_some_and(|t| {
            syntax::contains_lowercase(t, "redis") || syntax::contains_lowercase(t, "cache")
        })
}

/// Constructors of in-process maps: a name bound to one of these is no cache server. Not a bare
/// `Cache(...)`: Flask-Caching's is often Redis behind the scenes.
const MEMORY_MAPS: &[&str] = &[
    "dict",
    "OrderedDict",
    "defaultdict",
    "WeakValueDictionary",
    "WeakKeyDictionary",
    "TTLCache",
    "LRUCache",
    "LFUCache",
    "TLRUCache",
    "FIFOCache",
    "RRCache",
    // aiocache's in-process backend.
    "SimpleMemoryCache",
];

/// What an assignment binds that `is_cache_name` must know of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CacheBinding {
    /// An in-process map under a name that says "cache" or "redis" (`self._cache = {}`).
    Memory,
    /// A cache client made here under any name (`r = redis.Redis(...)`, `c = caches["x"]`).
    Client,
}

/// `memory_caches` and `cache_clients`: the last names of what the file binds, anywhere.
pub(crate) fn cache_bindings(
    idx: &NodeIndex<'_>,
    src: &str,
    imports: &[Import],
) -> (Vec<String>, Vec<String>) {
    let (assignments, spans) = idx.all_spans(kinds::ASSIGNMENT);
    let (mut memory, mut clients) = (Vec::new(), Vec::new());
    let names = cache_import_names(imports);
    for (a, &(start, end)) in assignments.iter().zip(spans) {
        if !src
            .get(start..end)
            .is_some_and(|text| may_bind_cache(text, &names))
        {
            continue;
        }
        match cache_binding(*a, idx, src, &names) {
            Some((name, CacheBinding::Memory)) => memory.push(name.to_string()),
            Some((name, CacheBinding::Client)) => clients.push(name.to_string()),
            None => {}
        }
    }
    if imports_a_cache(imports) {
        clients.extend(injected_cache_clients(idx, src, (0, src.len())));
    }
    // One entry per binding, not per name: `derive` takes the bindings of the text a change
    // touches out of the new version's lists and puts the old version's in.
    memory.sort_unstable();
    clients.sort_unstable();
    (memory, clients)
}

/// Whether the file imports something named for a cache (`redis`, `django.core.cache`,
/// `app.cache`): a parameter can be annotated with a cache type only then, so
/// `injected_cache_clients` need not look at any other file's functions.
pub(crate) fn imports_a_cache(imports: &[Import]) -> bool {
    imports.iter().any(|i| {
        syntax::contains_lowercase(&i.target, "redis")
            || syntax::contains_lowercase(&i.target, "cache")
    })
}

/// Cache clients handed in: a parameter annotated with a cache type (`kv: redis.Redis`,
/// `cache: BaseCache`), and the names a function of `span` stores it under (`self._kv = kv`).
/// By the functions that start in `span`, so that `derive` can swap a touched method's.
pub(crate) fn injected_cache_clients(
    idx: &NodeIndex<'_>,
    src: &str,
    (a, b): (usize, usize),
) -> Vec<String> {
    let functions = idx.all(kinds::FUNCTION_DEFINITION);
    let first = functions.partition_point(|f| f.start_byte() < a);
    let mut out = Vec::new();
    for &func in functions
        .get(first..)
        .unwrap_or(&[])
        .iter()
        .take_while(|f| f.start_byte() < b)
    {
        let Some(params) = func.field("parameters") else {
            continue;
        };
        let says = |t: &str| {
            syntax::contains_lowercase(t, "redis") || syntax::contains_lowercase(t, "cache")
        };
        if !says(syntax::text(params, src)) {
            continue;
        }
        for (name, annotation) in syntax::annotated_parameters(params, src) {
            let annotation = syntax::text(annotation, src);
            // `TTLCache[str, int]` is a map in the process.
            let cache_type = says(annotation)
                && !MEMORY_MAPS.iter().any(|m| annotation.contains(m))
                && !annotation.contains("dict");
            if !cache_type || name.is_empty() {
                continue;
            }
            out.push(name.to_string());
            for &assignment in idx.within(func, kinds::ASSIGNMENT) {
                let stored = assignment
                    .field("right")
                    .is_some_and(|r| r.kind() == kinds::IDENTIFIER && syntax::text(r, src) == name);
                let target = assignment.field("left").map(|l| syntax::text(l, src));
                if let Some(target) = target.filter(|_| stored) {
                    out.push(last_name(target).to_string());
                }
            }
        }
    }
    out
}

/// Names the file imports from a cache library (`Client` from `pymemcache.client.base`): a
/// client made from one says neither word (`mc = Client(("localhost", 11211))`).
pub(crate) fn cache_import_names(imports: &[Import]) -> Vec<&str> {
    imports
        .iter()
        .filter(|i| {
            syntax::contains_lowercase(&i.target, "redis")
                || syntax::contains_lowercase(&i.target, "cache")
        })
        .map(|i| i.local.as_str())
        .collect()
}

/// Whether a constructor's callee is a class of a cache library the file imports (`Client`,
/// `base.Client`); not a call on Django's `cache` object (`cache.get`).
pub(crate) fn made_by_cache_import(made_by: &str, names: &[&str]) -> bool {
    let root = made_by.split('.').next().unwrap_or(made_by);
    names.contains(&root)
        && last_name(made_by)
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_uppercase())
}

/// The cheap first question about an assignment: can it bind a cache at all?
fn may_bind_cache(assignment: &str, names: &[&str]) -> bool {
    says_cache(assignment) || names.iter().any(|n| assignment.contains(n))
}

/// The name an assignment binds to an in-process map or to a cache client, and which.
/// `names`: `cache_import_names` of the file.
pub(crate) fn cache_binding<'s>(
    assignment: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &'s str,
    names: &[&str],
) -> Option<(&'s str, CacheBinding)> {
    if !may_bind_cache(syntax::text(assignment, src), names) {
        return None;
    }
    let right = assignment.field("right")?;
    let left = syntax::text(assignment.field("left")?, src);
    let name = left.rsplit('.').next().unwrap_or(left).trim();
    if is_memory_map(right, idx, src) {
        // `_closed = SimpleMemoryCache(...)`: a map whose class says "cache" is one whatever
        // it is bound to, and would otherwise be taken for a client by its constructor's name.
        let constructor = syntax::text(right, src)
            .split('(')
            .next()
            .unwrap_or_default();
        let named = syntax::contains_lowercase(name, "cache")
            || syntax::contains_lowercase(name, "redis")
            || syntax::contains_lowercase(constructor, "cache");
        return named.then_some((name, CacheBinding::Memory));
    }
    let made_by = match right.kind() {
        kinds::CALL => idx.call_text(right, src).callee,
        kinds::SUBSCRIPT => syntax::text(right, src),
        _ => return None,
    };
    let client = syntax::contains_lowercase(made_by, "redis")
        || made_by.starts_with("caches[")
        || made_by.ends_with("get_redis_connection")
        || right.kind() == kinds::CALL && made_by_cache_import(made_by, names);
    (client && !name.is_empty()).then_some((name, CacheBinding::Client))
}

/// Whether an assignment's target, or the start of its value (where a constructor's name is),
/// says "cache" or "redis": most assignments are ruled out there, before tree-sitter is asked
/// for fields, and a long value is not read to its end.
fn says_cache(assignment: &str) -> bool {
    let says = |text: &str| {
        syntax::contains_lowercase(text, "cache") || syntax::contains_lowercase(text, "redis")
    };
    let Some(at) = memchr::memchr(b'=', assignment.as_bytes()) else {
        return says(assignment);
    };
    let mut end = (at + 1 + VALUE_HEAD).min(assignment.len());
    while !assignment.is_char_boundary(end) {
        end -= 1;
    }
    says(assignment.get(..end).unwrap_or(assignment))
}

/// How much of an assignment's value `says_cache` reads: enough for
/// `redis.asyncio.Redis.from_url(` or `django_redis.get_redis_connection(`.
const VALUE_HEAD: usize = 64;

/// `{}`, `{k: v for ...}`, `dict()`, `collections.OrderedDict()`, `cachetools.TTLCache(...)`.
fn is_memory_map(value: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> bool {
    match value.kind() {
        kinds::DICTIONARY | "dictionary_comprehension" => true,
        kinds::CALL => MEMORY_MAPS.contains(&idx.callee_name(value, src)),
        _ => false,
    }
}

/// What a call talks to, from its callee and receiver names.
/// A call that can reach none of the change's functions, whatever they are named: a method of
/// Python's mapping protocol on what can only be a mapping (a request's or a response's headers,
/// query or form, `request.headers.get`; the environment; `**kwargs`; a decoded JSON body,
/// `response.json().get`), or any method of a literal (`", ".join(...)`, `"{}".format(...)`).
/// `request.headers.get(...)` in a webhook verifier does not call the API client's `get`, and
/// counting it as a callee made every test of the verifier "reach" the API.
/// `(attribute, parameter)` of each `self.attribute = parameter` in a constructor, where the
/// value is the parameter, or the parameter unless it is missing (`client or Client()`,
/// `Client() if client is None else client`).
fn stored_parameters(
    func: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &str,
    params: &str,
) -> Box<[(Box<str>, Box<str>)]> {
    let param = |n: Node<'_>| {
        let name = syntax::text(n, src);
        (n.kind() == kinds::IDENTIFIER && params.split(',').any(|p| p == name)).then_some(name)
    };
    let given = |value: Node<'_>| match value.kind() {
        kinds::IDENTIFIER => param(value),
        "boolean_operator" => value.field("left").and_then(param),
        "conditional_expression" => {
            let parts = crate::python::named_children(value);
            let (then, test, otherwise) = (*parts.first()?, *parts.get(1)?, *parts.get(2)?);
            let tested = syntax::text(test, src);
            [then, otherwise]
                .into_iter()
                .filter_map(param)
                .find(|p| tested.split_whitespace().next() == Some(*p))
        }
        _ => None,
    };
    idx.within(func, kinds::ASSIGNMENT)
        .iter()
        .filter_map(|a| {
            let left = a.field("left")?;
            let object = left.field("object")?;
            if left.kind() != kinds::ATTRIBUTE || syntax::text(object, src) != "self" {
                return None;
            }
            let attribute = syntax::text(left.field("attribute")?, src);
            let p = given(a.field("right")?)?;
            Some((attribute.into(), p.into()))
        })
        .collect()
}

fn calls_no_function_of_the_change(parts: &syntax::CallText<'_>) -> bool {
    let literal = |r: &str| {
        let r = r.trim_start_matches(|c: char| "rRbBfFuU".contains(c));
        r.starts_with(['"', '\'', '[', '{'])
    };
    if parts.receiver.is_some_and(literal) {
        return true;
    }
    const METHODS: &[&str] = &[
        "get",
        "getlist",
        "pop",
        "setdefault",
        "items",
        "keys",
        "values",
        "update",
    ];
    const MAPPINGS: &[&str] = &[
        "headers",
        "cookies",
        "params",
        "query_params",
        "GET",
        "POST",
        "META",
        "FILES",
        "COOKIES",
        "args",
        "form",
        "environ",
        "kwargs",
        "extra",
        "metadata",
    ];
    // Django's ORM (`User.objects.filter(...)`, `Order.objects.filter(...).first()`): the
    // change's own `filter` or `get` is not what runs. Asked of every call, so the receiver's
    // text is looked at first: few calls have a manager in it.
    let on_manager = |r: &str| {
        (r.contains("objects") || r.contains("_default_manager"))
            && r.split('.')
                .any(|s| s == "objects" || s == "_default_manager" || s.starts_with("objects("))
    };
    if parts.receiver.is_some_and(on_manager) && QUERYSET.contains(&parts.name) {
        return true;
    }
    // A database's pool of connections (`self._pool.acquire()`, asyncpg's and psycopg's): not
    // the `acquire` of the change's lock or store of seat holds.
    let on_pool = |r: &str| last_name(r).to_ascii_lowercase().ends_with("pool");
    if parts.receiver.is_some_and(on_pool)
        && matches!(
            parts.name,
            "acquire" | "release" | "connection" | "getconn" | "putconn" | "close"
        )
    {
        return true;
    }
    let Some(receiver) = parts.receiver.filter(|_| METHODS.contains(&parts.name)) else {
        return false;
    };
    receiver.ends_with(".json()") || MAPPINGS.contains(&last_name(receiver))
}

/// Names a function binds to an HTTP client it makes itself: `async with httpx.AsyncClient(...)
/// as client`, `session = requests.Session()`. `client.get(...)` is a request on those, though
/// by its name alone it may as well be a cache's read.
fn clients_made_in<'s>(
    func: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &'s str,
    file: &FileFacts,
) -> Vec<&'s str> {
    let makes = |value: Node<'_>| {
        let value = crate::rules::idem::strip_await(value);
        value.kind() == kinds::CALL && {
            let parts = syntax::call_text(value, src);
            crate::rules::http::lib_of_callee(parts.callee, Some(file))
                .is_some_and(|lib| lib.client_class(parts.name))
        }
    };
    let mut out = Vec::new();
    // A client is made through an import of its library: most files have none to look for.
    let imports_a_client = file.imports.iter().any(|i| {
        let root = i.target.split('.').next().unwrap_or_default();
        crate::rules::http::lib_of_callee(root, None).is_some()
    });
    if !imports_a_client {
        return out;
    }
    for &with in idx.within(func, kinds::WITH_STATEMENT) {
        for (value, alias) in crate::rules::http::with_items(with) {
            // The alias is a pattern target: a name, or a tuple or attribute we leave alone.
            let name = syntax::text(alias, src);
            if name.bytes().all(|b| b == b'_' || b.is_ascii_alphanumeric()) && makes(value) {
                out.push(name);
            }
        }
    }
    for &assignment in idx.within(func, kinds::ASSIGNMENT) {
        if let (Some(left), Some(right)) = (assignment.field("left"), assignment.field("right"))
            && left.kind() == kinds::IDENTIFIER
            && makes(right)
        {
            out.push(syntax::text(left, src));
        }
    }
    out
}

/// Whether a method of this name is one a dict, a list, a string or a queryset has. Asked of
/// every call: a `match`, which most names fail at once.
fn a_builtins_method(name: &str) -> bool {
    matches!(
        name,
        // dict
        "get" | "pop" | "popitem" | "setdefault" | "items" | "keys" | "values" | "update" | "copy"
        // list and set
        | "append" | "extend" | "insert" | "index" | "sort" | "reverse" | "add" | "discard"
        | "union" | "intersection" | "difference"
        // str and bytes
        | "format" | "join" | "split" | "rsplit" | "strip" | "lstrip" | "rstrip" | "replace"
        | "encode" | "decode" | "lower" | "upper" | "startswith" | "endswith" | "splitlines"
        | "partition"
        // Django's QuerySet, on a queryset in a variable (on a manager: `QUERYSET`)
        | "filter" | "exclude" | "all" | "first" | "last" | "exists" | "order_by"
        | "values_list" | "select_related" | "prefetch_related" | "annotate" | "aggregate"
        | "distinct"
    )
}

/// Whether `receiver.name(...)` may be a method of a dict, a list, a string or a queryset
/// rather than a function of the change (`entity.get("error_code")`).
pub(crate) fn may_be_a_builtins_call(name: &str, receiver: &str, file: &FileFacts) -> bool {
    a_builtins_method(name) && may_be_a_builtin(receiver, file)
}

/// Whether a receiver may be a dict, a list, a string or a queryset rather than an object of
/// the change: it is none of `self`, a class, a module the file imports, or an object named for
/// a client (`self.api`, `ApiClient(key)`, `self.providers[name]`). In django-payments,
/// `form.cleaned_data.get(...)`, `session.get("id")` and `event.get("type")` were each taken for
/// PayPal's `get`, which sends a request, and every test of the dummy provider, of Stripe's and
/// of a form field "reached" PayPal's API.
fn may_be_a_builtin(receiver: &str, file: &FileFacts) -> bool {
    if matches!(receiver, "self" | "cls" | "super()") {
        return false;
    }
    // A call's or a subscript's result is judged by what was called or subscripted:
    // `ApiClient(key).get(...)`, `self.providers[name].get(...)`, but `payload["data"].get(...)`.
    let mut base = receiver;
    while let Some(inner) = without_trailing_group(base) {
        base = inner;
    }
    let last = last_name(base);
    if last.is_empty() {
        return true;
    }
    if last.starts_with(|c: char| c.is_ascii_uppercase()) || named_for_a_client(last) {
        return false;
    }
    let module = base == receiver && !base.contains('.') && file.import_target(base).is_some();
    !module
}

/// Whether a name says it holds an object of the change that sends requests or keeps state
/// (`api`, `gateway_client`, `self.payment_service`, `redis`, `repo`), in one pass over it.
fn named_for_a_client(name: &str) -> bool {
    let bytes = name.as_bytes();
    (0..bytes.len()).any(|i| {
        let rest = bytes.get(i..).unwrap_or_default();
        let starts = |w: &str| {
            rest.get(..w.len())
                .is_some_and(|r| r.eq_ignore_ascii_case(w.as_bytes()))
        };
        match rest.first().map(u8::to_ascii_lowercase) {
            Some(b'a') => starts("api") || starts("adapter"),
            Some(b'b') => starts("backend"),
            Some(b'c') => starts("client") || starts("conn") || starts("cache"),
            Some(b'g') => starts("gateway"),
            Some(b'h') => starts("http"),
            Some(b'm') => starts("manager"),
            Some(b'p') => starts("provider") || starts("processor"),
            Some(b'r') => starts("repo") || starts("redis"),
            Some(b's') => {
                starts("service") || starts("store") || starts("storage") || starts("sdk")
            }
            Some(b't') => starts("transport"),
            _ => false,
        }
    })
}

/// `text` without its last bracketed group (`f(a)` → `f`, `x[k]` → `x`), if it ends in one.
fn without_trailing_group(text: &str) -> Option<&str> {
    let close = text.bytes().last().filter(|b| matches!(b, b')' | b']'))?;
    let open = if close == b')' { b'(' } else { b'[' };
    let mut depth = 0usize;
    for (i, b) in text.bytes().enumerate().rev() {
        if b == close {
            depth += 1;
        } else if b == open {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                return text.get(..i);
            }
        }
    }
    None
}

/// Django's `QuerySet` methods, which a custom manager inherits rather than redefines.
const QUERYSET: &[&str] = &[
    "all",
    "filter",
    "exclude",
    "get",
    "create",
    "get_or_create",
    "update_or_create",
    "first",
    "last",
    "count",
    "exists",
    "select_related",
    "prefetch_related",
    "select_for_update",
    "order_by",
    "values",
    "values_list",
    "annotate",
    "aggregate",
    "bulk_create",
    "bulk_update",
    "update",
    "delete",
    "only",
    "defer",
    "none",
    "in_bulk",
    "iterator",
    "distinct",
    "using",
    "latest",
    "earliest",
];

pub fn classify_call(call: Node<'_>, src: &str, file: &FileFacts, vocab: &Vocabulary) -> Target {
    classify_at(call, &syntax::call_text(call, src), src, file, vocab)
}

/// `classify` of a call in its place: a receiver that the loop around it binds (`r` of
/// `next(r for r in refunds if r.get("id") == ref)`) is an item of what it walks, not a client.
fn classify_at(
    call: Node<'_>,
    parts: &syntax::CallText<'_>,
    src: &str,
    file: &FileFacts,
    vocab: &Vocabulary,
) -> Target {
    let target = classify(parts, file, vocab);
    if target == Target::Cache
        && let Some(receiver) = parts.receiver
        && receiver
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && bound_by_a_loop(call, receiver, src)
    {
        return Target::Other;
    }
    target
}

/// Whether a `for` statement or clause around `node` binds `name`.
pub(crate) fn bound_by_a_loop(node: Node<'_>, name: &str, src: &str) -> bool {
    let mut at = node.parent();
    while let Some(n) = at {
        match n.kind() {
            kinds::FUNCTION_DEFINITION | kinds::CLASS_DEFINITION => return false,
            kinds::FOR_STATEMENT if n.field("left").is_some_and(|l| binds(l, name, src)) => {
                return true;
            }
            "list_comprehension"
            | "generator_expression"
            | "set_comprehension"
            | "dictionary_comprehension"
                if crate::python::named_children(n).iter().any(|c| {
                    c.kind() == "for_in_clause"
                        && c.field("left").is_some_and(|l| binds(l, name, src))
                }) =>
            {
                return true;
            }
            _ => {}
        }
        at = n.parent();
    }
    false
}

/// Whether a loop's target binds `name` (`r`, `(i, r)`).
fn binds(target: Node<'_>, name: &str, src: &str) -> bool {
    syntax::text(target, src) == name
        || crate::python::named_children(target)
            .iter()
            .any(|t| binds(*t, name, src))
}

/// `classify_call`, with the call's parts already read.
fn classify(parts: &syntax::CallText<'_>, file: &FileFacts, vocab: &Vocabulary) -> Target {
    let syntax::CallText { callee, name, .. } = *parts;
    if name == "sleep" {
        return Target::Sleep;
    }
    if let Some(full_recv) = parts.receiver {
        // The result of a call is named by what was called, not by its arguments:
        // `event.get_payment_providers(cached=True).get(...)` is no cache.
        let recv = last_name(full_recv.split('(').next().unwrap_or(full_recv));
        if CACHE_METHODS.contains(&name)
            && (is_cache_name(recv, file, vocab) || full_recv.starts_with("caches["))
        {
            return Target::Cache;
        }
        if http_by_name(parts) && !web_or_db_session(full_recv, file) {
            return Target::Http;
        }
    }
    if is_urlopen(callee) {
        return Target::Http;
    }
    // `stripe.Charge.create(...)` as well as `charge(...)`.
    if crate::rules::pay::names_payment(parts, vocab) {
        return Target::Payment;
    }
    Target::Other
}

/// Whether a call sends a request by its names alone (`http_by_name`, `urlopen`), with no look
/// at the file: what a rule without the file's facts can tell.
pub(crate) fn sends_by_name(parts: &syntax::CallText<'_>) -> bool {
    http_by_name(parts) || is_urlopen(parts.callee)
}

fn is_urlopen(callee: &str) -> bool {
    callee == "urlopen" || callee.ends_with(".urlopen")
}

/// Whether a call on a receiver is a request by its names alone: a verb of an HTTP library
/// (`requests.post`, `httpx.get`) or of a client named for one (`self.http.post`,
/// `session.get`, `gateway_client.post`). `client.get` may be a cache's read, and a Flask or
/// SQLAlchemy `session` no HTTP at all (`classify` asks the file).
/// The qualified name of the function `node` is in (`Client.refund`); empty at module level.
pub(crate) fn enclosing_qualname(
    idx: &crate::python::NodeIndex<'_>,
    node: tree_sitter::Node<'_>,
    src: &str,
) -> String {
    idx.enclosing(node, crate::python::kinds::FUNCTION_DEFINITION)
        .map(|f| qualname(f, idx, src))
        .unwrap_or_default()
}

/// The methods a class defines itself, in document order: not those of a class nested in it.
pub(crate) fn own_methods<'t>(
    idx: &crate::python::NodeIndex<'t>,
    class: tree_sitter::Node<'t>,
) -> Vec<tree_sitter::Node<'t>> {
    idx.within(class, crate::python::kinds::FUNCTION_DEFINITION)
        .iter()
        .copied()
        .filter(|m| {
            idx.enclosing(*m, crate::python::kinds::CLASS_DEFINITION)
                .is_some_and(|c| c.id() == class.id())
        })
        .collect()
}

pub(crate) fn http_by_name(parts: &syntax::CallText<'_>) -> bool {
    let Some(full_recv) = parts.receiver else {
        return false;
    };
    let name = parts.name;
    if !HTTP_VERBS.contains(&name) && name != "fetch" {
        return false;
    }
    let recv = last_name(full_recv.split('(').next().unwrap_or(full_recv));
    let has = |word| syntax::contains_lowercase(recv, word);
    // Tornado's `AsyncHTTPClient().fetch(request)`, `self._client.fetch(...)`; asyncpg's
    // `conn.fetch(sql)` is a query.
    if name == "fetch" {
        return has("http") || has("client") && !has("db") && !has("sql");
    }
    let ends_api = recv
        .as_bytes()
        .get(recv.len().saturating_sub(3)..)
        .is_some_and(|end| end.len() == 3 && end.eq_ignore_ascii_case(b"api"));
    let root = parts.callee.split('.').next().unwrap_or("");
    HTTP_MODULES.contains(&root)
        || has("http")
        || has("session")
        || has("client") && name != "get"
        || ends_api && name != "get"
}

/// A web framework's session (`request.session.get("cart")`, Flask's `session`) or a database
/// one (`db.session.get(Order, pk)`, `session.delete(order)` in SQLAlchemy code): named like an
/// HTTP session, but a dictionary or a unit of work. Any other `session` is taken for one of
/// these only in a file that imports such a framework and no HTTP client library.
fn web_or_db_session(receiver: &str, file: &FileFacts) -> bool {
    if receiver.ends_with("request.session") || receiver == "db.session" {
        return true;
    }
    let imports = |roots: &[&str]| {
        file.imports.iter().any(|i| {
            let root = i.target.split('.').next().unwrap_or_default();
            roots.contains(&root)
        })
    };
    last_name(receiver) == "session"
        && imports(&[
            "sqlalchemy",
            "sqlmodel",
            "flask",
            "flask_sqlalchemy",
            "django",
            "quart",
        ])
        && !imports(&["requests", "httpx", "aiohttp", "urllib3", "aiohttp_retry"])
}

/// `session.get("client_reference_id")`: a key read of a session that is a dictionary (a
/// Stripe Checkout Session, a web session), not a request: an HTTP session's `get` takes a
/// URL, which no bare name is.
fn a_sessions_key(call: Node<'_>, parts: &syntax::CallText<'_>, src: &str) -> bool {
    parts.name == "get"
        && parts
            .receiver
            .is_some_and(|r| last_name(r).to_ascii_lowercase().contains("session"))
        && call
            .field("arguments")
            .and_then(|a| a.named_child(0))
            .and_then(|first| syntax::string_value(first, src))
            .is_some_and(|key| {
                !key.is_empty()
                    && key
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            })
}

/// `r` for `r = call(...)` or `r = await call(...)`: `syntax::bound_name`, found through the
/// index rather than the tree's parents (each of which tree-sitter finds from the root).
fn bound_name<'s>(call: Node<'_>, idx: &NodeIndex<'_>, src: &'s str) -> Option<&'s str> {
    let assignment = idx.enclosing(call, kinds::ASSIGNMENT)?;
    let right = assignment.field("right")?;
    let value = match right.kind() {
        kinds::AWAIT => right.named_child(0)?,
        _ => right,
    };
    if value.id() != call.id() {
        return None;
    }
    let left = assignment.field("left")?;
    (left.kind() == kinds::IDENTIFIER).then(|| syntax::text(left, src))
}

pub(crate) fn call_site(call: Node<'_>, idx: &NodeIndex<'_>, src: &str) -> CallSite {
    call_site_with(call, idx, src, &|func| qualname(func, idx, src).into())
}

/// `call_site`, with the qualified name of the function around the call from `qualname_of`.
fn call_site_with(
    call: Node<'_>,
    idx: &NodeIndex<'_>,
    src: &str,
    qualname_of: &dyn Fn(Node<'_>) -> Arc<str>,
) -> CallSite {
    let func = idx.enclosing(call, kinds::FUNCTION_DEFINITION);
    let line = syntax::lines(call).0;
    let text = idx.call_text(call, src);
    let binding: Option<Arc<str>> = bound_name(call, idx, src).map(Arc::from);
    let (mut deref_line, mut deref_subscript, mut checked) = (None, false, false);
    if let (Some(func), Some(name)) = (func, binding.as_deref()) {
        let after = call.end_byte();
        // The nodes that start after the call, found by their starts (in order).
        let later = |kind: &str| {
            let (nodes, spans) = idx.within_spans(func, kind);
            let first = spans.partition_point(|&(start, _)| start <= after);
            let nodes = nodes.get(first..).unwrap_or(&[]);
            nodes.iter().zip(spans.get(first..).unwrap_or(&[]))
        };
        let attribute = later(kinds::ATTRIBUTE).find(|&(a, &(start, _))| {
            // An attribute's object is its first child: the attribute's text starts with it,
            // which rules most attributes out before tree-sitter is asked for fields.
            src.get(start..).is_some_and(|t| t.starts_with(name))
                && a.field("object")
                    .is_some_and(|o| syntax::text(o, src) == name)
        });
        deref_line = attribute.map(|(a, _)| syntax::lines(*a).0);
        let mut deref_at = attribute.map(|(_, &(start, _))| start);
        if let Some((at, line)) = first_subscript(src, call, func, name)
            && attribute.is_none_or(|(_, &(start, _))| at < start)
        {
            deref_line = Some(line);
            deref_at = Some(at);
            deref_subscript = true;
        }
        let until = deref_line.unwrap_or(u32::MAX);
        checked = later(kinds::IF_STATEMENT)
            .map(|(s, _)| s)
            .filter(|s| syntax::lines(**s).0 <= until)
            .filter_map(|s| s.field("condition"))
            .any(|c| tests_name(syntax::text(c, src), name))
            || deref_at.is_some_and(|at| {
                later(kinds::CONDITIONAL_EXPRESSION)
                    .chain(later(kinds::BOOLEAN_OPERATOR))
                    .filter(|&(_, &(start, end))| start <= at && at < end)
                    .any(|(g, _)| guards(*g, at, name, src))
            });
    }
    CallSite {
        // Set by `gather_code`, which sees the statements.
        discarded: false,
        name_at: name_at(text.callee, text.name),
        callee: Arc::from(text.callee),
        function: func.map(qualname_of).unwrap_or_default(),
        line,
        binding,
        deref_line,
        deref_subscript,
        checked,
    }
}

/// Whether expression `g` reads `name` at byte `at` only on the branch where a test of `name`
/// let it through: `name.x if name else d`, `d if name is None else name.x`, `name and name.x`,
/// `name is None or name.x`. A reviewer reads these as the caller's check, as an `if` is.
fn guards(g: Node<'_>, at: usize, name: &str, src: &str) -> bool {
    let inside = |n: Node<'_>| n.start_byte() <= at && at < n.end_byte();
    match g.kind() {
        // `body if condition else alternative`: the grammar names none of the three.
        kinds::CONDITIONAL_EXPRESSION => crate::python::named_children(g)
            .into_iter()
            .filter(|c| c.kind() != kinds::COMMENT)
            .nth(1)
            .is_some_and(|c| !inside(c) && tests_name(syntax::text(c, src), name)),
        _ => g
            .field("left")
            .zip(g.field("right"))
            .is_some_and(|(l, r)| inside(r) && tests_name(syntax::text(l, src), name)),
    }
}

/// Whether a condition tests `name` itself (`if not result`, `if result is None`, `if result
/// and ...`), word by word and in any case (`if not Result` checks `result`). A use of what
/// it holds (`if result["state"] == "paid"`, `if result.ok`) is no test: it fails on `None`.
fn tests_name(condition: &str, name: &str) -> bool {
    let bytes = condition.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut at = 0;
    while let Some(found) = bytes.get(at..).and_then(|rest| {
        rest.windows(name.len().max(1))
            .position(|w| w.eq_ignore_ascii_case(name.as_bytes()))
    }) {
        let start = at + found;
        let end = start + name.len();
        at = start + 1;
        let before = start.checked_sub(1).and_then(|i| bytes.get(i)).copied();
        let after = bytes.get(end).copied();
        if before.is_some_and(word) || after.is_some_and(word) || before == Some(b'.') {
            continue;
        }
        let next = bytes
            .get(end..)
            .and_then(|rest| rest.iter().find(|b| **b != b' '));
        if !matches!(next, Some(b'[' | b'.')) {
            return true;
        }
    }
    false
}

/// The byte offset and line of the first `name[...]` after `call` in `func`: a subscript of the
/// call's result fails on `None` as an attribute does. Found in the text, since subscripts are
/// not indexed; a `name[` in a comment or a string counts too, which is rare enough next to a
/// call that binds the name.
fn first_subscript(src: &str, call: Node<'_>, func: Node<'_>, name: &str) -> Option<(usize, u32)> {
    let (from, to) = (call.end_byte(), func.end_byte());
    let rest = src.get(from..to)?.as_bytes();
    let bound = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'.';
    let mut needle = Vec::with_capacity(name.len() + 1);
    needle.extend_from_slice(name.as_bytes());
    needle.push(b'[');
    let at = memchr::memmem::find_iter(rest, &needle)
        .find(|&i| i == 0 || !rest.get(i - 1).copied().is_some_and(bound))?;
    let newlines = memchr::memchr_iter(b'\n', &rest[..at]).count();
    Some((from + at, syntax::lines(call).1 + newlines as u32))
}

#[cfg(test)]
mod waits_tests {
    use super::waits_between_attempts;

    #[test]
    fn retry_decorators_that_wait_are_told_from_those_that_do_not() {
        assert!(waits_between_attempts(
            "retry(stop=stop_after_attempt(4), wait=wait_exponential(min=2))"
        ));
        assert!(waits_between_attempts(
            "backoff.on_exception(backoff.expo, Exception, max_tries=4)"
        ));
        assert!(waits_between_attempts("retry(wait_fixed=2000)"));
        assert!(!waits_between_attempts("retry(stop=stop_after_attempt(3))"));
        assert!(!waits_between_attempts(
            "retry(wait=wait_none(), stop=stop_after_attempt(3))"
        ));
        assert!(!waits_between_attempts(
            "app.task(autoretry_for=(Timeout,), retry_backoff=True)"
        ));
        assert!(!waits_between_attempts("lru_cache(maxsize=None)"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(path: &str, src: &str) -> FileFacts {
        let file = ParsedFile::parse(src.to_string()).expect("grammar loads (every parse test)");
        gather(path, &file, &Vocabulary::default())
    }

    #[test]
    fn a_condition_tests_the_name_not_what_it_holds() {
        assert!(tests_name("not result", "result"));
        assert!(tests_name("result is None", "result"));
        assert!(tests_name("Result and result[\"ok\"]", "result"));
        assert!(tests_name("isinstance(result, dict)", "result"));
        assert!(!tests_name("result[\"state\"] == \"paid\"", "result"));
        assert!(!tests_name("result.status == \"paid\"", "result"));
        assert!(!tests_name("self.result", "result"));
        assert!(!tests_name("results", "result"));
    }

    #[test]
    fn a_payment_sdk_is_called_over_the_network_only_by_its_methods() {
        let f = facts(
            "app/billing/holds.py",
            "import stripe\nfrom braintree import Transaction\n\n\
             def capture(i):\n    return stripe.PaymentIntent.capture(i)\n\n\
             def sale(p):\n    return Transaction.sale(p)\n\n\
             def local(payload, sig):\n    e = stripe.Webhook.construct_event(payload, sig, 's')\n    \
             o = stripe.PaymentIntent.construct_from({}, 'k')\n    raise stripe.error.CardError('m', None, 'c')\n\n\
             def made():\n    return stripe.StripeClient('k')\n",
        );
        let sdk = |name: &str| f.functions.iter().find(|g| g.name == name).unwrap().sdk;
        assert!(sdk("capture"));
        assert!(sdk("sale"));
        assert!(!sdk("local"));
        assert!(!sdk("made"));
    }

    #[test]
    fn functions_know_what_they_reach_and_return() {
        let f = facts(
            "app/payments/client.py",
            "import httpx\nfrom app.cache import redis_client as rc\n\n\
             def charge(order):\n    rc.get('k')\n    try:\n        return httpx.post('u').json()\n    except Exception:\n        return None\n",
        );
        assert!(f.payment_module);
        assert_eq!(f.import_target("rc"), Some("app.cache.redis_client"));
        let charge = &f.functions[0];
        assert!(charge.http && charge.cache);
        assert_eq!(charge.none_returns, [9]);
        assert!(charge.may_return_none());
    }

    #[test]
    fn payment_words_are_whole_words_in_any_case() {
        assert!(is_payment_word("Payments"));
        assert!(is_payment_word("PayPal"));
        assert!(is_payment_word("AuthorizeNet"));
        assert!(!is_payment_word("PaymentIntent"));
        assert!(!is_payment_word("authorizenets"));
        assert!(!is_payment_word("pa"));
        assert!(!is_payment_word(""));
    }

    #[test]
    fn a_payment_model_class_does_not_make_its_importer_payment_code() {
        let payment = |source: &str| facts("app/reports/telemetry.py", source).payment_module;
        assert!(!payment("from app.models import Order, Payment\n"));
        assert!(payment("from app.payments import client\n"));
        assert!(payment("from app.billing.client import create_charge\n"));
        assert!(payment("from app.payments.models import Refund\n"));
        assert!(payment("import stripe\n"));
    }

    #[test]
    fn a_verb_on_a_client_the_function_makes_is_a_request() {
        let http = |body: &str| {
            let src = format!("import httpx\nimport requests as rq\n\nasync def f(key):\n{body}");
            facts("app/f.py", &src)
                .function("f")
                .expect("f has facts")
                .http
        };
        assert!(http(
            "    async with httpx.AsyncClient(timeout=5) as client:\n        return await client.get(key)\n"
        ));
        assert!(http("    c = rq.Session()\n    return c.get(key)\n"));
        // By its name alone `client.get` may be a cache's read; `session.get` already is HTTP.
        assert!(!http("    return client.get(key)\n"));
        assert!(!http(
            "    async with lock_for(key) as client:\n        return await client.get(key)\n"
        ));
        assert!(!http("    c = rq.Session()\n    return d.get(key)\n"));
    }

    #[test]
    fn methods_a_dict_or_a_string_has_are_loose_on_values_that_may_be_one() {
        let source = "import billing\n\nclass Provider:\n    def process(self, request, event, form):\n        a = event.get(\"type\")\n        b = form.cleaned_data.get(\"amount\")\n        c = payload[\"data\"].get(\"id\")\n        d = self.client.preference().get(pid)\n        e = \", \".join(parts)\n        f = products.filter(active=True)\n        ids.append(a)\n        g = self.get(pid)\n        h = self.api.get(pid)\n        i = ApiClient(key).get(pid)\n        j = self.providers[name].get(pid)\n        k = billing.get(pid)\n        m = Transaction.get(pid)\n        n = self.make_client().update(pid)\n        order.refresh(a, b)\n";
        let f = facts("app/provider.py", source);
        let process = f.function("Provider.process").expect("process has facts");
        // `join` on a literal calls nothing of the change at all.
        assert!(!process.callees.iter().any(|c| c == "join"));
        for name in ["append", "filter"] {
            assert!(process.loose.iter().any(|c| c == name), "{name} is loose");
        }
        // `get` is also called on `self`, a client, a class and a module: surely a call of it.
        for name in ["get", "update", "refresh"] {
            assert!(
                process.callees.iter().any(|c| c == name),
                "{name} is called"
            );
            assert!(!process.loose.iter().any(|c| c == name), "{name} is sure");
        }
        let one = |line: &str| {
            let src = format!("import billing\n\ndef f(self, event, payload, key):\n    {line}\n");
            let f = facts("app/f.py", &src);
            let func = f.function("f").expect("f has facts");
            (func.callees.to_vec(), func.loose.to_vec())
        };
        // Whether the line's last call, the method it names, is loose.
        let loose = |line: &str| {
            let (callees, loose) = one(line);
            let name = line.rsplit_once('(').and_then(|(l, _)| l.rsplit_once('.'));
            let name = name.map(|(_, n)| n.to_string()).expect("a method call");
            assert!(callees.contains(&name), "{line}: {callees:?}");
            loose.contains(&name)
        };
        for line in [
            "event.get(\"type\")",
            "payload[\"data\"].get(\"id\")",
            "self.client.preference().get(key)",
            "self.attrs.get(key)",
            "products.filter(active=True)",
        ] {
            assert!(loose(line), "{line} may be a dict's or a queryset's");
        }
        for line in [
            "self.get(key)",
            "super().get(key)",
            "self.api.get(key)",
            "self.gateway.update(key)",
            "ApiClient(key).get(\"/charges\")",
            "self.providers[key].get(key)",
            "self.make_client().update(key)",
            "billing.get(key)",
            "Transaction.filter(key)",
            "event.refresh(key)",
        ] {
            assert!(
                !loose(line),
                "{line} is surely a call of the change's function"
            );
        }
    }

    #[test]
    fn functions_by_qualname_finds_what_function_finds() {
        let f = facts(
            "svc.py",
            "def pay(o):\n    return 1\n\nclass A:\n    def pay(self):\n        pass\n\ndef pay(o):\n    return 2\n",
        );
        let map = f.functions_by_qualname();
        assert_eq!(map.len(), 2);
        for name in ["pay", "A.pay"] {
            let found = map.get(name).copied().map(|f| f.lines);
            assert_eq!(found, f.function(name).map(|f| f.lines), "{name}");
        }
        assert_eq!(map.get("pay").map(|f| f.lines.0), Some(1));
    }

    #[test]
    fn call_sites_record_dereference_and_checks() {
        let f = facts(
            "svc.py",
            "def a(o):\n    r = create_charge(o)\n    o.id = r.id\n\ndef b(o):\n    r = create_charge(o)\n    if r is None:\n        raise X\n    o.id = r.id\n",
        );
        let sites: Vec<_> = f
            .calls
            .iter()
            .filter(|c| c.name() == "create_charge")
            .collect();
        assert_eq!(sites[0].binding.as_deref(), Some("r"));
        assert_eq!(sites[0].deref_line, Some(3));
        assert!(!sites[0].checked);
        assert!(sites[1].checked);
    }

    #[test]
    fn call_sites_know_when_what_they_return_is_dropped() {
        let src = "async def a(c, o):\n    c.reverse(o)  # best effort\n    await c.refund(o)\n    r = c.charge(o)\n    c.void(o).json()\n    f(\n        c.capture(o),\n    )\n    x = (\n        c.cancel(o)\n    )\n    if r:\n        c.release(o)\n    return c.payout(o)\n";
        let f = facts("svc.py", src);
        let dropped = |name: &str| {
            f.calls
                .iter()
                .find(|c| c.name() == name)
                .map(|c| c.discarded)
        };
        assert_eq!(dropped("reverse"), Some(true));
        assert_eq!(dropped("refund"), Some(true));
        assert_eq!(dropped("charge"), Some(false));
        assert_eq!(dropped("void"), Some(false));
        assert_eq!(dropped("json"), Some(true));
        assert_eq!(dropped("capture"), Some(false));
        assert_eq!(dropped("cancel"), Some(false));
        assert_eq!(dropped("release"), Some(true));
        assert_eq!(dropped("payout"), Some(false));
    }

    #[test]
    fn a_call_sites_name_is_the_last_name_of_its_callee() {
        let f = facts(
            "svc.py",
            "def a(o):\n    self.client . charges.create(o)\n    create_charge(o)\n    handlers[o](o)\n    make()(o)\n",
        );
        let names: Vec<(&str, &str, &str)> = f
            .calls
            .iter()
            .map(|c| (&*c.callee, c.name(), &*c.function))
            .collect();
        assert_eq!(
            names,
            [
                ("self.client . charges.create", "create", "a"),
                ("create_charge", "create_charge", "a"),
                // Neither a name nor an attribute: no name to find callers by.
                ("handlers[o]", "", "a"),
                ("make()", "", "a"),
                ("make", "make", "a"),
            ]
        );
    }

    #[test]
    fn calls_on_mappings_and_literals_reach_no_function_of_the_change() {
        let f = facts(
            "hooks.py",
            "def verify(request, response, **kwargs):\n    sig = request.headers.get('Sig')\n    note = ', '.join(kwargs) + f'{sig}'.format() + rb'x'.decode()\n    body = response.json().get('data')\n    mode = kwargs.pop('mode', None)\n    return request.GET.get('x'), os.environ.get('KEY')\n\ndef fetch(self, url):\n    return self.client.get(url), cache.get(url), headers(url)\n",
        );
        let callees = |name: &str| f.function(name).map(|f| f.callees.to_vec());
        let verify = callees("verify").expect("verify has facts");
        // `response.json()` itself is a call like any other.
        assert_eq!(verify, vec!["json"]);
        let fetch = callees("fetch").expect("fetch has facts");
        assert_eq!(fetch, vec!["get", "headers"]);
    }

    #[test]
    fn a_conditional_read_of_the_result_is_a_check() {
        let guarded = [
            "    return r.id if r else ''\n",
            "    return '' if r is None else r.id\n",
            "    return r and r.id\n",
            "    return r is None or r['id']\n",
            "    x = (\n        r.id  # the id\n        if r\n        else None\n    )\n",
        ];
        let unguarded = [
            "    return r.id if o else ''\n",
            "    return r.id if r.ok else ''\n",
            "    return o and r.id\n",
            "    return r.id and r\n",
        ];
        for (body, checked) in guarded
            .iter()
            .map(|b| (b, true))
            .chain(unguarded.iter().map(|b| (b, false)))
        {
            let f = facts("svc.py", &format!("def a(o):\n    r = charge(o)\n{body}"));
            let site = f.calls.iter().find(|c| c.name() == "charge");
            let site = site.expect("the call is recorded");
            assert!(site.deref_line.is_some(), "{body}");
            assert_eq!(site.checked, checked, "{body}");
        }
    }

    #[test]
    fn test_paths() {
        assert!(is_test_path("tests/test_payments.py"));
        assert!(is_test_path("app/payments/client_test.py"));
        assert!(is_test_path("shop/cart/tests.py"));
        assert!(is_test_path("conftest.py"));
        assert!(!is_test_path("app/payments/testing_utils.py"));
        assert!(!is_test_path("app/payments/contests.py"));
    }
}
