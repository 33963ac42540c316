//! Validated settings of one run: what to review, how to report it, which rules run, and the
//! domain vocabulary the rules use to recognise payment code.

pub mod file;

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::review::{Lang, Severity};
use crate::source::Workspace;

/// Output format of `payreview review`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Json,
    Markdown,
    Sarif,
    Github,
    Gitlab,
    Text,
}

/// `--fail-on`: the least severe finding that makes the exit status 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailOn {
    Blocker,
    Important,
    Nit,
    Never,
}

impl FailOn {
    pub fn threshold(self) -> Option<Severity> {
        match self {
            FailOn::Blocker => Some(Severity::Blocker),
            FailOn::Important => Some(Severity::Important),
            FailOn::Nit => Some(Severity::Nit),
            FailOn::Never => None,
        }
    }
}

/// Names that mark code as moving money. Matching is on the last name of a callee
/// (`client.refund(...)` matches `refund`), exact or as a `_`-separated part
/// (`create_charge` matches `charge`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vocabulary {
    pub payment_operations: Words,
    pub money_arguments: Words,
    pub entities: Words,
    pub cache_clients: Words,
    /// Decorators that make a function a background task (Celery, Dramatiq, RQ…).
    pub task_decorators: Words,
}

/// A vocabulary list, in the order it was given, with its words also kept by length: a list is
/// asked of every `_`-separated part of every function and callee name, and comparing each part
/// with the whole list cost almost 1% of a review.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Words {
    list: Vec<String>,
    /// `by_length[n]`: the words of `n` bytes.
    by_length: Vec<Vec<String>>,
}

impl Words {
    /// Adds `word` unless the list holds it already.
    pub fn push(&mut self, word: String) {
        if self.list.contains(&word) {
            return;
        }
        if self.by_length.len() <= word.len() {
            self.by_length.resize(word.len() + 1, Vec::new());
        }
        self.by_length[word.len()].push(word.clone());
        self.list.push(word);
    }

    /// Whether `word` is one of the list's, in any case.
    pub fn has(&self, word: &str) -> bool {
        self.by_length
            .get(word.len())
            .is_some_and(|same| same.iter().any(|w| w.eq_ignore_ascii_case(word)))
    }
}

impl<S: Into<String>> FromIterator<S> for Words {
    fn from_iter<I: IntoIterator<Item = S>>(words: I) -> Self {
        let mut list = Words::default();
        for word in words {
            list.push(word.into());
        }
        list
    }
}

impl std::ops::Deref for Words {
    type Target = [String];

    fn deref(&self) -> &[String] {
        &self.list
    }
}

impl Default for Vocabulary {
    fn default() -> Self {
        let words = |list: &[&str]| list.iter().copied().collect();
        Vocabulary {
            payment_operations: words(&[
                "charge",
                "capture",
                "refund",
                "payout",
                "transfer",
                "pay",
                "withdraw",
                "debit",
                "disburse",
                // A gift card's or a wallet's stored value spent; money held for a seller let go.
                "redeem",
                "escrow",
                "authorize",
                "authorise",
                "create_payment",
                "create_payment_intent",
                "confirm_payment_intent",
                "make_payment",
                "process_payment",
                "submit_payment",
                "send_payment",
                "execute_payment",
                "initiate_payment",
                "perform_payment",
                // The same operations in the languages payment code is written in:
                // `maak_terugbetaling`, `auszahlung_senden`, `initier_virement`, `reembolsar`.
                "terugbetaling",
                "uitbetaling",
                "betalen",
                "erstattung",
                "rueckerstattung",
                "auszahlung",
                "ueberweisung",
                "abbuchung",
                "zahlen",
                "remboursement",
                "rembourser",
                "virement",
                "transfert",
                "prelevement",
                "reembolso",
                "reembolsar",
                "estorno",
                "estornar",
                "cobrar",
                "pagar",
                "transferencia",
                "transferir",
                "rimborso",
                "rimborsare",
                "addebito",
                "addebitare",
                "zwrot",
                "wyplata",
                "obciazenie",
                // Their verbs, where code names the call by them: `capturer`, `rimborsa`,
                // `maak_incasso`.
                "capturer",
                "rimborsa",
                "incasso",
                // `bestellung_erfassen`, `capturar_pago`, `encaisser`: a capture, a debit or a
                // refund by its verb.
                "erfassen",
                "belasten",
                "abbuchen",
                "erstatten",
                "auszahlen",
                "capturar",
                "encaisser",
                "debiter",
                "incasseren",
                "terugbetalen",
                "uitbetalen",
                "cobro",
                "cobranca",
                "obciaz",
                "autoryzuj",
                "autoryzacja",
                "autorizza",
                "autorizzare",
                "autoriser",
                "autorizar",
                "autorisieren",
                "autoriseren",
                // Russian, transliterated: `sozdat_vozvrat`, `spisat_oplatu`, `vyplata`.
                "vozvrat",
                "oplatit",
                "spisat",
                "spisanie",
                "vyplata",
                "vyplatit",
            ]),
            money_arguments: words(&["amount", "currency", "total", "sum", "price", "value"]),
            entities: words(&[
                "order",
                "payment",
                "invoice",
                "subscription",
                "cart",
                "basket",
                "booking",
                "transaction",
                "purchase",
                "bill",
                "payout",
                "withdrawal",
                "deposit",
                "debit",
                "transfer",
                "refund",
                "charge",
                "installment",
                "instalment",
                // What a payment buys access to: its status says whether it was paid for.
                "enrollment",
                "enrolment",
                "membership",
                // The same in the languages payment code is written in.
                "ordine",
                "pedido",
                "commande",
                "bestellung",
                "bestelling",
                "zamowienie",
                "pagamento",
                "paiement",
                "zahlung",
                "betaling",
                "platnosc",
                "platezh",
                "fattura",
                "factura",
                "facture",
                "rechnung",
                "faktura",
            ]),
            cache_clients: words(&["redis", "cache", "rds", "r", "kv", "mc"]),
            task_decorators: words(&[
                "task",
                "shared_task",
                "periodic_task",
                "db_task",
                "actor",
                "job",
            ]),
        }
    }
}

impl Vocabulary {
    /// Whether `name` (a function or method name) is a payment operation; not where another of
    /// its words says what is captured or transferred is no money (Sentry's
    /// `capture_exception`, `capture_message`; `capture_output`).
    pub fn is_payment_operation(&self, name: &str) -> bool {
        names_one_of(name, &self.payment_operations)
            && !name
                .split('_')
                .any(|w| NOT_MONEY.iter().any(|n| w.eq_ignore_ascii_case(n)))
            && !works_out_an_amount(name)
            && !sets_up_a_party(name)
    }

    pub fn is_money_argument(&self, name: &str) -> bool {
        names_one_of(name, &self.money_arguments)
    }

    pub fn is_entity(&self, name: &str) -> bool {
        names_one_of(name, &self.entities)
    }
}

/// Words that, beside a payment operation's, name what is not money.
const NOT_MONEY: &[&str] = &[
    "exception",
    "exceptions",
    "message",
    "messages",
    "output",
    "stdout",
    "stderr",
    "logs",
    "warnings",
    "screenshot",
    "traceback",
    // `mark_capture_pending`, `mark_charged`: a record of a payment, written by our own code.
    "mark",
    // `_sync_refund_state(order)`: our own record brought in line with a payment's.
    "state",
    "sync",
    // `_payout_json(payout)`, `refund_to_dict(refund)`: a payment written out for an answer.
    "json",
    "dict",
    "serialize",
    "serialise",
    "serialized",
    "repr",
    // `queue_refund_jobs(refund)`, `schedule_payout`: the money moves in the job, not in the call.
    "queue",
    "enqueue",
    "schedule",
    "jobs",
];

/// `prorated_charge_cents`, `refund_amount`, `compute_capture_total`: a function that works out
/// how much, named for the amount it returns or for the working out, not one that moves it.
fn works_out_an_amount(name: &str) -> bool {
    let (first, last) = first_and_last_words(name);
    one_of(
        last,
        &[
            "cents", "pence", "paise", "minor", "amount", "amounts", "total", "totals", "sum",
            "fee", "fees", "price",
        ],
    ) || !last.is_empty()
        && one_of(
            first,
            &["calculate", "calc", "compute", "estimate", "preview"],
        )
}

/// The first and the last `_`-separated words of a name (`""` for the last of a one-word name).
fn first_and_last_words(name: &str) -> (&str, &str) {
    let mut words = name.split('_').filter(|w| !w.is_empty());
    let first = words.next().unwrap_or_default();
    (first, words.next_back().unwrap_or_default())
}

/// Whether a word is one of `list`, in any case.
fn one_of(word: &str, list: &[&str]) -> bool {
    list.iter().any(|n| word.eq_ignore_ascii_case(n))
}

/// `create_transfer_recipient`, `ensure_payout_beneficiary`, `get_refund_payee`: a function that
/// sets up or reads the party a payment goes to, which moves no money itself.
fn sets_up_a_party(name: &str) -> bool {
    let (first, last) = first_and_last_words(name);
    one_of(
        last,
        &[
            "recipient",
            "recipients",
            "beneficiary",
            "beneficiaries",
            "payee",
            "payees",
            "counterparty",
        ],
    ) && one_of(
        first,
        &[
            "create", "ensure", "get", "add", "register", "upsert", "fetch", "find", "lookup",
            "new", "make", "build", "setup", "update", "delete", "verify", "resolve", "validate",
        ],
    )
}

/// Whether `name`, or one of its `_`-separated words, is one of `words` (case-insensitive):
/// `capture_payment` names `capture`. Asked for every function and call: the name is split once.
fn names_one_of(name: &str, words: &Words) -> bool {
    words.has(name) || name.split('_').any(|part| words.has(part))
}

/// Which rules run and how severe their findings are, from the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleFilter {
    /// Ids or prefixes to run; empty means all.
    pub select: Vec<String>,
    pub ignore: Vec<String>,
    /// Severity per id or prefix; the longest matching key wins.
    pub severity: BTreeMap<String, Severity>,
}

impl RuleFilter {
    pub fn enabled(&self, id: &str) -> bool {
        let matches = |p: &String| id.starts_with(&p.to_ascii_uppercase());
        (self.select.is_empty() || self.select.iter().any(matches))
            && !self.ignore.iter().any(matches)
    }

    /// The configured severity of `id`, if any.
    pub fn severity_of(&self, id: &str) -> Option<Severity> {
        self.severity
            .iter()
            .filter(|(p, _)| id.starts_with(&p.to_ascii_uppercase()))
            .max_by_key(|(p, _)| p.len())
            .map(|(_, s)| *s)
    }
}

/// Paths not to review, from the configuration's `exclude` globs.
#[derive(Debug, Clone, Default)]
pub struct Exclude {
    pub patterns: Vec<String>,
    set: Option<globset::GlobSet>,
}

impl Exclude {
    pub fn new(patterns: Vec<String>) -> Self {
        let mut builder = globset::GlobSetBuilder::new();
        for p in &patterns {
            // Validated when the configuration was loaded; a bad glob here is simply skipped.
            if let Ok(glob) = globset::Glob::new(p) {
                builder.add(glob);
            }
        }
        Exclude {
            set: builder.build().ok(),
            patterns,
        }
    }

    pub fn matches(&self, path: &str) -> bool {
        self.set.as_ref().is_some_and(|s| s.is_match(path))
    }
}

/// Everything a review run needs to know, validated.
#[derive(Debug, Clone)]
pub struct Settings {
    pub workspace: Workspace,
    pub lang: Lang,
    pub format: Format,
    pub fail_on: FailOn,
    pub output: Option<PathBuf>,
    pub description: Option<String>,
    pub vocabulary: Vocabulary,
    pub max_file_bytes: u64,
    pub max_files: usize,
    /// A diff larger than this is refused before it is parsed.
    pub max_diff_bytes: u64,
    /// Source bytes whose trees a review keeps from the facts pass to the rules pass (a tree
    /// and its index take some twenty times their source). Only new versions that some rule
    /// will read (`rules::gate`) are kept; an old version is parsed whole only when its facts
    /// cannot be derived from the new one's (`facts::derive_old`), and dropped at once. Past the
    /// budget, a new tree is dropped as soon as its facts are gathered and parsed again for its
    /// rules, one file per thread at a time; an old one is parsed again, from the new tree, only
    /// if the new one has findings. A second parse for a very large change, in exchange for
    /// memory that stops growing with it.
    pub kept_source_bytes: u64,
    /// Skip the rules whose gate (`rules::gate`) a file does not pass. Off only to check that
    /// gates hide nothing: the review must be the same either way.
    pub gates: bool,
    pub rules: RuleFilter,
    pub exclude: Exclude,
    /// The configuration file in force, if any.
    pub config_source: Option<PathBuf>,
}

impl Settings {
    /// Settings for reviewing a diff on its own, as tests and the library API use them.
    pub fn diff_only() -> Self {
        Settings {
            workspace: Workspace::DiffOnly,
            lang: Lang::En,
            format: Format::Json,
            fail_on: FailOn::Blocker,
            output: None,
            description: None,
            vocabulary: Vocabulary::default(),
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_files: DEFAULT_MAX_FILES,
            max_diff_bytes: DEFAULT_MAX_DIFF_BYTES,
            kept_source_bytes: 8 * 1024 * 1024,
            gates: true,
            rules: RuleFilter::default(),
            exclude: Exclude::default(),
            config_source: None,
        }
    }
}

impl Settings {
    /// The repository root in repository mode.
    pub fn root(&self) -> Option<PathBuf> {
        match &self.workspace {
            Workspace::Repository { repo, .. } => Some(repo.root().to_path_buf()),
            Workspace::DiffOnly => None,
        }
    }

    /// Applies a configuration file; command-line flags are applied after it, so they win.
    pub fn apply_file(&mut self, loaded: &file::Loaded) {
        let config = &loaded.config;
        let strings = |list: &Option<Vec<toml::Spanned<String>>>| -> Vec<String> {
            list.iter().flatten().map(|s| s.get_ref().clone()).collect()
        };
        self.rules = RuleFilter {
            select: strings(&config.select),
            ignore: strings(&config.ignore),
            severity: config
                .severity
                .iter()
                .flatten()
                .map(|(k, v)| (k.to_ascii_uppercase(), *v.get_ref()))
                .collect(),
        };
        self.exclude = Exclude::new(strings(&config.exclude));
        if let Some(fail_on) = config.fail_on {
            self.fail_on = fail_on;
        }
        if let Some(lang) = config.lang {
            self.lang = lang;
        }
        let vocab = &mut self.vocabulary;
        for (target, extra) in [
            (&mut vocab.payment_operations, &config.payment_operations),
            (&mut vocab.money_arguments, &config.money_arguments),
            (&mut vocab.entities, &config.entities),
            (&mut vocab.cache_clients, &config.cache_clients),
            (&mut vocab.task_decorators, &config.task_decorators),
        ] {
            for word in extra.iter().flatten() {
                target.push(word.to_ascii_lowercase());
            }
        }
        self.config_source = Some(loaded.path.clone());
    }

    /// The configuration in force, for `payreview config`.
    pub fn effective(&self) -> file::Effective {
        file::Effective {
            source: self
                .config_source
                .as_ref()
                .map_or("(built-in defaults)".to_string(), |p| {
                    p.display().to_string()
                }),
            select: self.rules.select.clone(),
            ignore: self.rules.ignore.clone(),
            severity: self.rules.severity.clone(),
            exclude: self.exclude.patterns.clone(),
            fail_on: format!("{:?}", self.fail_on).to_lowercase(),
            lang: self.lang,
            payment_operations: self.vocabulary.payment_operations.to_vec(),
            money_arguments: self.vocabulary.money_arguments.to_vec(),
            entities: self.vocabulary.entities.to_vec(),
            cache_clients: self.vocabulary.cache_clients.to_vec(),
            task_decorators: self.vocabulary.task_decorators.to_vec(),
        }
    }
}

pub const DEFAULT_MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
pub const DEFAULT_MAX_FILES: usize = 20_000;
/// Peak memory grows with the diff (about 14 times its size for a diff of new code, see
/// BENCHMARKS.md): 64 MiB keeps a review under about 1 GB, room for any pull request a person
/// reads, while a runaway `git diff` fails fast with a clear error.
pub const DEFAULT_MAX_DIFF_BYTES: u64 = 64 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payment_operations_match_by_name_part() {
        let v = Vocabulary::default();
        for yes in [
            "charge",
            "create_charge",
            "refund_payment",
            "capture",
            "payout_to_wallet",
        ] {
            assert!(v.is_payment_operation(yes), "{yes}");
        }
        for no in [
            "discharge",
            "get_order",
            "display",
            "prepayment_notice_text",
            "repay_ui",
            "capture_exception",
            "capture_message",
            "capture_output",
        ] {
            assert!(!v.is_payment_operation(no), "{no}");
        }
    }
}
