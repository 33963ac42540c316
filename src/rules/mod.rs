//! The rule engine: what a rule sees (`Ctx`), how it reports (`Ctx::report`), and the registry.
//!
//! A rule is detection only; the texts people read live in its catalogue entry under `rules/`.
//! Rules never walk a tree themselves: they ask the file's shared `NodeIndex` and the change
//! set's `FileFacts`.

pub mod catalogue;
pub mod facts;
pub mod gate;

mod diff_header;
mod err;
mod http;
pub(crate) mod idem;
mod pay;
pub mod reach;
pub(crate) mod retry;
mod scope;
mod sup;
mod testing;

use std::sync::OnceLock;

use rustc_hash::FxHashMap as HashMap;
use tree_sitter::Node;

use crate::config::Vocabulary;
use crate::diff::FilePatch;
use crate::index::{LazyIndex, ProjectIndex, TaskRef};
use crate::python::{LazyTree, NodeIndex, ParsedFile, kinds, syntax};
use crate::review::{Finding, Question, Severity};
use crate::source::{FileVersions, Side};
use catalogue::Entry;
use facts::{CallSite, FileFacts, FunctionFacts};
pub use gate::{Gate, Scan};
/// For the project index, which keeps it for functions the change does not touch.
pub(crate) use pay::lock_left_off::lock_param;

/// How a rule is run.
#[derive(Clone, Copy)]
pub enum Check {
    /// On the old and on the new version of each Python file; a finding is kept only if the old
    /// version did not have it already (same rule, function and key), so old problems in
    /// untouched code are never blamed on the change.
    Tree(fn(&mut Ctx<'_>)),
    /// Once per file, on the change itself (both versions, the diff header). Findings are kept
    /// as they are.
    Change(fn(&mut Ctx<'_>)),
    /// Reported by the review driver itself (suppression bookkeeping), not by a check.
    Driver,
}

/// A rule: its id, its catalogue text (compiled in), how to run it and on which files.
pub struct Rule {
    pub id: &'static str,
    pub doc: &'static str,
    pub check: Check,
    pub gate: Gate,
}

/// Every rule, sorted by id.
pub static ALL: &[&Rule] = &[
    &diff_header::identical_index_hashes::RULE,
    &diff_header::index_hash_mismatch::RULE,
    &diff_header::diff_does_not_apply::RULE,
    &err::broad_except_returns_none::RULE,
    &err::retries_exhausted_return_none::RULE,
    &err::error_contract_changed::RULE,
    &err::traceback_lost::RULE,
    &err::failure_swallowed::RULE,
    &err::timeout_read_as_failure::RULE,
    &err::ack_before_handling::RULE,
    &err::coroutine_tested_unawaited::RULE,
    &err::failure_no_longer_raised::RULE,
    &err::lookup_failure_read_as_empty::RULE,
    &http::scalar_timeout::RULE,
    &http::http_call_without_timeout::RULE,
    &idem::cache_check_then_set::RULE,
    &idem::decode_cached_value::RULE,
    &idem::cache_outside_try_on_payment_path::RULE,
    &idem::key_made_per_attempt::RULE,
    &idem::retried_without_key::RULE,
    &idem::key_ttl_unit::RULE,
    &idem::key_outlived_by_retries::RULE,
    &idem::webhook_marker_expires::RULE,
    &idem::memcache_add_without_reply::RULE,
    &idem::webhook_claimed_before_applied::RULE,
    &idem::key_numbered_by_count::RULE,
    &idem::event_dedup_skipped::RULE,
    &idem::key_parameter_ignored::RULE,
    &idem::unknown_outcome_new_key::RULE,
    &idem::resend_window_outlives_key::RULE,
    &idem::window_from_last_send::RULE,
    &idem::key_from_the_clock::RULE,
    &idem::key_header_unread::RULE,
    &pay::charge_amount_source_changed::RULE,
    &pay::success_recorded_before_result::RULE,
    &pay::arguments_swapped::RULE,
    &pay::minor_units_truncated::RULE,
    &pay::signature_checked_if_present::RULE,
    &pay::unsettled_status_taken_as_paid::RULE,
    &pay::price_from_client::RULE,
    &pay::balance_reset_after_payout::RULE,
    &pay::item_refund_sized_by_order::RULE,
    &pay::minor_units_divided::RULE,
    &pay::verification_answer_taken_as_yes::RULE,
    &pay::verified_subset_ignored::RULE,
    &pay::split_parts_miss_the_total::RULE,
    &pay::paid_sum_ignores_status::RULE,
    &pay::refund_cap_ignores_refunded::RULE,
    &pay::record_written_after_payment::RULE,
    &pay::time_units_mixed::RULE,
    &pay::amount_in_float::RULE,
    &pay::outcome_flag_ignored::RULE,
    &pay::refund_from_list_price::RULE,
    &pay::time_from_client::RULE,
    &pay::state_checked_then_set::RULE,
    &pay::pending_rows_paid_unclaimed::RULE,
    &pay::server_errors_only::RULE,
    &pay::row_lock_removed::RULE,
    &pay::destination_refund_keeps_transfer::RULE,
    &pay::payment_argument_dropped::RULE,
    &pay::balance_checked_unlocked::RULE,
    &pay::settled_refunds_only::RULE,
    &pay::found_taken_as_paid::RULE,
    &pay::task_queued_before_commit::RULE,
    &pay::server_error_taken_as_refusal::RULE,
    &pay::signature_error_passed_over::RULE,
    &pay::refundable_ignores_in_flight::RULE,
    &pay::amount_of_another_record::RULE,
    &pay::accepted_taken_as_succeeded::RULE,
    &pay::event_applied_in_any_state::RULE,
    &pay::requeued_from_any_state::RULE,
    &pay::metadata_compared_with_id::RULE,
    &pay::claim_split_into_read_and_write::RULE,
    &pay::caller_amount_over_stored::RULE,
    &pay::text_flag_read_with_bool::RULE,
    &pay::answer_dropped_then_done::RULE,
    &pay::currency_left_to_default::RULE,
    &pay::paid_inside_the_records_transaction::RULE,
    &pay::money_written_apart::RULE,
    &pay::lock_left_off::RULE,
    &retry::sleep_after_last_attempt::RULE,
    &retry::incomplete_retryable_set::RULE,
    &retry::blocking_sleep_in_async::RULE,
    &retry::misleading_retry_constants::RULE,
    &retry::budget_exceeds_task_limit::RULE,
    &retry::refusal_retried::RULE,
    &retry::retry_without_bound::RULE,
    &scope::UNDECLARED_CHANGE,
    &sup::SUPPRESSION_WITHOUT_REASON,
    &sup::UNUSED_SUPPRESSION,
    &testing::test_reaches_live_service::RULE,
    &testing::retry_test_sleeps_or_misses_key::RULE,
    &testing::patch_misses_the_import::RULE,
];

pub fn find(id: &str) -> Option<&'static Rule> {
    ALL.iter().copied().find(|r| r.id.eq_ignore_ascii_case(id))
}

/// The parsed catalogue entry of a rule.
pub fn entry(id: &str) -> Option<&'static Entry> {
    static ENTRIES: OnceLock<Vec<Entry>> = OnceLock::new();
    ENTRIES
        .get_or_init(|| {
            ALL.iter()
                .filter_map(|r| catalogue::parse_entry(r.id, r.doc).ok())
                .collect()
        })
        .iter()
        .find(|e| e.meta.id == id)
}

/// Default severity of a rule, from its catalogue entry.
pub fn default_severity(id: &str) -> Severity {
    entry(id).map_or(Severity::Important, |e| e.meta.severity)
}

/// Both versions of every file in the change, as facts.
#[derive(Debug, Default)]
pub struct ChangeSet {
    pub files: Vec<FileChange>,
    /// Functions and call sites by name, per side (old, new): rules of every file ask "who is
    /// called X", and a scan of the whole change per question is quadratic in a large change.
    names: [OnceLock<Names>; 2],
    reach: reach::ReachTables,
}

/// How many calls deep `never_returns` follows helpers that end by calling another
/// (`throw_api_error` → `throw_with_message` → `raise`).
pub const MAX_RAISE_HOPS: usize = 4;

#[derive(Debug, Default)]
struct Names {
    /// Each function name of the side, numbered: reachability tables are indexed by it.
    ids: HashMap<String, u32>,
    /// By name id: `(file, function)` indices, in file order then source order.
    functions: Vec<Vec<(usize, usize)>>,
    /// `(file, call)` indices, likewise.
    calls: HashMap<String, Vec<(usize, usize)>>,
    /// Each class the side defines, with the bases of its definitions: ERR006 asks of most
    /// `except` clauses whether a class is built on another, and a scan of every file per
    /// question is quadratic in a large change.
    classes: HashMap<String, Vec<String>>,
    /// The classes named for a request that got no answer (`GoCardlessTimeout`,
    /// `ProviderUnavailable`, `TransientError`), in the change's order, each with whether its
    /// name says timeout.
    no_answer: Vec<(String, bool)>,
}

impl Names {
    fn id(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }
}

#[derive(Debug, Default)]
pub struct FileChange {
    pub path: String,
    pub old: Option<FileFacts>,
    pub new: Option<FileFacts>,
}

impl FileChange {
    pub fn side(&self, side: Side) -> Option<&FileFacts> {
        match side {
            Side::Old => self.old.as_ref(),
            Side::New => self.new.as_ref(),
        }
    }
}

impl ChangeSet {
    pub fn new(files: Vec<FileChange>) -> Self {
        ChangeSet {
            files,
            names: Default::default(),
            reach: Default::default(),
        }
    }

    pub fn side(&self, side: Side) -> impl Iterator<Item = &FileFacts> {
        self.files.iter().filter_map(move |f| f.side(side))
    }

    fn names(&self, side: Side) -> &Names {
        let slot = match side {
            Side::Old => &self.names[0],
            Side::New => &self.names[1],
        };
        slot.get_or_init(|| {
            let mut names = Names::default();
            for (i, file) in self.files.iter().enumerate() {
                let Some(facts) = file.side(side) else {
                    continue;
                };
                for (j, func) in facts.functions.iter().enumerate() {
                    match names.id(&func.name) {
                        Some(id) => {
                            if let Some(list) = names.functions.get_mut(id as usize) {
                                list.push((i, j));
                            }
                        }
                        None => {
                            let id = names.functions.len() as u32;
                            names.ids.insert(func.name.clone(), id);
                            names.functions.push(vec![(i, j)]);
                        }
                    }
                }
                for (j, call) in facts.calls.iter().enumerate() {
                    push_named(&mut names.calls, call.name(), (i, j));
                }
                for (class, bases) in &facts.class_bases {
                    let entry = names.classes.entry(class.clone()).or_default();
                    if entry.is_empty() {
                        if let Some(timeout) = err::timeout_read_as_failure::no_answer_class(class)
                        {
                            names.no_answer.push((class.clone(), timeout));
                        }
                    }
                    entry.extend(bases.iter().cloned());
                }
            }
            names
        })
    }

    /// Whether a file of the change raises `class` only where the connection was never made
    /// (`FileFacts::raised_unsent`), and no class of no answer is built on it.
    pub fn raised_unsent(&self, side: Side, class: &str) -> bool {
        self.side(side)
            .any(|f| f.raised_unsent.iter().any(|c| c == class))
            && !self
                .no_answer_classes(side)
                .iter()
                .any(|(c, _)| c != class && self.subclass_of(side, c, class))
    }

    /// Whether a file of the change raises `class` from a handler of a transport failure that
    /// may come after the request left (`FileFacts::raised_unanswered`).
    pub fn raised_unanswered(&self, side: Side, class: &str) -> bool {
        self.side(side)
            .any(|f| f.raised_unanswered.iter().any(|c| c == class))
    }

    /// Whether the change's files on `side` define a class named `class`.
    pub fn defines_class(&self, side: Side, class: &str) -> bool {
        self.names(side).classes.contains_key(class)
    }

    /// The bases the change's files on `side` give `class`, as written in its definitions.
    pub fn class_bases_of(&self, side: Side, class: &str) -> &[String] {
        self.names(side)
            .classes
            .get(class)
            .map_or(&[], |bases| bases.as_slice())
    }

    /// The classes the change defines for a request that got no answer, each with whether its
    /// name says timeout (`err::timeout_read_as_failure::no_answer_class`).
    pub fn no_answer_classes(&self, side: Side) -> &[(String, bool)] {
        &self.names(side).no_answer
    }

    /// Functions called `name` anywhere in the change, on one side, with the file change that
    /// holds them (for its other side).
    pub fn definitions<'a>(
        &'a self,
        side: Side,
        name: &str,
    ) -> impl Iterator<Item = (&'a FileChange, &'a FileFacts, &'a FunctionFacts)> {
        let names = self.names(side);
        names
            .id(name)
            .and_then(|id| names.functions.get(id as usize))
            .into_iter()
            .flatten()
            .filter_map(move |&(i, j)| {
                let change = &self.files[i];
                let facts = change.side(side)?;
                Some((change, facts, facts.functions.get(j)?))
            })
    }

    /// Functions called `name` anywhere in the change, on one side.
    pub fn functions_named<'a>(
        &'a self,
        side: Side,
        name: &str,
    ) -> impl Iterator<Item = (&'a FileFacts, &'a FunctionFacts)> {
        self.definitions(side, name)
            .map(|(_, file, func)| (file, func))
    }

    /// The definitions of `name` in the change's code (tests aside: their fakes answer as they
    /// are told), each with what `fact` reads of it: `None` when there is none, or one of them
    /// lacks the fact, so that a call of the name is not known to run a function that has it.
    pub fn code_definitions_with<'a, T>(
        &'a self,
        side: Side,
        name: &str,
        fact: impl Fn(&'a FunctionFacts) -> Option<T>,
    ) -> Option<Vec<(&'a FileFacts, &'a FunctionFacts, T)>> {
        let mut found = Vec::new();
        for (file, func) in self.functions_named(side, name) {
            if file.is_test {
                continue;
            }
            found.push((file, func, fact(func)?));
        }
        (!found.is_empty()).then_some(found)
    }

    /// Whether the change's files on `side` define `class` as a kind of `base`, through a few
    /// levels of bases (`OutcomeUnknown(AuthorizeNetError)`), by last names.
    pub fn subclass_of(&self, side: Side, class: &str, base: &str) -> bool {
        let classes = &self.names(side).classes;
        let mut kinds = vec![class];
        let mut at = 0;
        while let Some(&current) = kinds.get(at).filter(|_| kinds.len() < 16) {
            at += 1;
            let Some(bases) = classes.get(current) else {
                continue;
            };
            if bases.iter().any(|b| b == base) {
                return true;
            }
            for b in bases {
                if !kinds.contains(&b.as_str()) {
                    kinds.push(b);
                }
            }
        }
        false
    }

    /// Whether a call of `name` never returns: the change defines functions of that name, and
    /// each raises on every path or ends in calls that never return, followed a few calls
    /// deep (a cycle, or a chain longer than that, is taken to return). `awaited`: an `async
    /// def` only raises when its call is awaited.
    pub fn never_returns(&self, side: Side, name: &str, awaited: bool) -> bool {
        self.never_returns_within(side, name, awaited, MAX_RAISE_HOPS)
    }

    fn never_returns_within(&self, side: Side, name: &str, awaited: bool, hops: usize) -> bool {
        let mut defs = self.functions_named(side, name).peekable();
        defs.peek().is_some()
            && defs.all(|(_, f)| {
                (awaited || !f.is_async)
                    && f.ends_in.as_ref().is_some_and(|tails| {
                        tails.iter().all(|t| {
                            hops > 0
                                && self.never_returns_within(side, &t.name, t.awaited, hops - 1)
                        })
                    })
            })
    }

    /// Calls of `name` anywhere in the change, on one side.
    pub fn calls_named<'a>(
        &'a self,
        side: Side,
        name: &str,
    ) -> impl Iterator<Item = (&'a FileFacts, &'a CallSite)> {
        self.names(side)
            .calls
            .get(name)
            .into_iter()
            .flatten()
            .filter_map(move |&(i, j)| {
                let facts = self.files[i].side(side)?;
                Some((facts, facts.calls.get(j)?))
            })
    }
}

/// Appends `value` to the list of `name`, allocating the name only the first time: names
/// repeat (every call of `get`), and a copy per occurrence was most of the cost of building
/// these tables on a large change.
pub(crate) fn push_named<V>(map: &mut HashMap<String, Vec<V>>, name: &str, value: V) {
    match map.get_mut(name) {
        Some(list) => list.push(value),
        None => {
            map.insert(name.to_string(), vec![value]);
        }
    }
}

/// Per file side, computed on first use.
#[derive(Default)]
pub struct Memo {
    /// Names bound to a cache client the code made itself (`idem::client_aliases`).
    pub(crate) cache_clients: std::cell::OnceCell<Vec<(String, bool)>>,
    /// Whether some parameter is annotated as an HTTP client (`http::http_calls`).
    pub(crate) client_parameters: std::cell::OnceCell<bool>,
    /// The file's functions that make one cache call with a key from a parameter
    /// (`idem::wrapped_cache_call`).
    pub(crate) cache_wrappers: std::cell::OnceCell<Vec<idem::Wrapper>>,
    /// The names of the file's pytest fixtures (`testing::injected`): asked of each test's
    /// parameters, read once for a test module of thousands of tests.
    pub(crate) fixture_names: std::cell::OnceCell<Vec<String>>,
    /// A timeout the file keeps on its object and hands to no request (`http::kept_timeout`).
    pub(crate) kept_timeout: std::cell::OnceCell<Option<(String, u32)>>,
}

/// What a check that needs nothing beyond one file side reads of it. Both a rule's `Ctx` and a
/// gate's `Scan` (before the rest of the change is known) give it, so the two share such
/// checks instead of restating them.
pub(crate) trait Local<'a> {
    fn src(&self) -> &'a str;
    fn index(&self) -> Option<&'a NodeIndex<'a>>;
    fn facts(&self) -> Option<&'a FileFacts>;
    fn vocab(&self) -> &'a Vocabulary;
    fn memo(&self) -> &Memo;

    /// `syntax::call_text` of a call of this file, read from the index when there is one.
    fn call_text(&self, call: Node<'_>) -> syntax::CallText<'a> {
        match self.index() {
            Some(idx) => idx.call_text(call, self.src()),
            None => syntax::call_text(call, self.src()),
        }
    }

    /// `syntax::callee_name` of a call of this file, likewise.
    fn callee_name(&self, call: Node<'_>) -> &'a str {
        self.call_text(call).name
    }
}

impl<'a> Local<'a> for Ctx<'a> {
    fn src(&self) -> &'a str {
        Ctx::src(self)
    }

    fn index(&self) -> Option<&'a NodeIndex<'a>> {
        Ctx::index(self)
    }

    fn facts(&self) -> Option<&'a FileFacts> {
        self.facts
    }

    fn vocab(&self) -> &'a Vocabulary {
        self.vocab
    }

    fn memo(&self) -> &Memo {
        &self.memo
    }
}

/// What a rule sees of one file, on one side.
pub struct Ctx<'a> {
    pub side: Side,
    pub path: &'a str,
    pub patch: &'a FilePatch,
    pub versions: &'a FileVersions,
    /// This side's tree, parsed again on first use when the review had dropped it.
    pub tree: &'a LazyTree<'a>,
    /// The other side's parse, made on first use when the review had dropped it.
    pub other: &'a LazyTree<'a>,
    pub facts: Option<&'a FileFacts>,
    pub other_facts: Option<&'a FileFacts>,
    /// What rules work out once per file side and ask about for every call.
    pub memo: Memo,
    pub change: &'a ChangeSet,
    /// The whole repository's facts (repository mode only), built on first use: what the
    /// diff does not show.
    pub project: &'a LazyIndex<'a>,
    pub vocab: &'a Vocabulary,
    pub(crate) findings: Vec<Finding>,
    pub(crate) questions: Vec<Question>,
}

impl<'a> Ctx<'a> {
    /// This side's parse; `None` when the file does not exist on this side or is not Python.
    pub fn file(&self) -> Option<&'a ParsedFile> {
        self.tree.get()
    }

    pub fn src(&self) -> &'a str {
        self.file().map_or("", |f| f.text())
    }

    pub fn index(&self) -> Option<&'a NodeIndex<'a>> {
        self.file().map(|f| f.index())
    }

    /// The tree and text of a file of code, not of tests: what the rules that read only the
    /// code under review ask first. `None` for a test file, or when the tree is not kept.
    pub fn code(&self) -> Option<(&'a NodeIndex<'a>, &'a str)> {
        if self.facts.is_some_and(|f| f.is_test) {
            return None;
        }
        Some((self.index()?, self.src()))
    }

    /// Reports `rule` at `node` with its default severity; chain to add arguments.
    pub fn report(&mut self, rule: &Rule, node: Node<'_>) -> &mut Finding {
        let lines = syntax::lines(node);
        let key = syntax::normalized(node, self.src());
        let function = self
            .index()
            .and_then(|idx| {
                idx.enclosing(node, kinds::FUNCTION_DEFINITION)
                    .map(|f| facts::qualname(f, idx, self.src()))
            })
            .unwrap_or_default();
        self.push(rule, Some(lines), function, key)
    }

    /// Reports `rule` about the whole file.
    pub fn report_file(&mut self, rule: &Rule) -> &mut Finding {
        self.push(rule, None, String::new(), String::new())
    }

    /// Reports `rule` at explicit new-side lines.
    pub fn report_lines(&mut self, rule: &Rule, lines: (u32, u32), key: String) -> &mut Finding {
        let function = self
            .facts
            .and_then(|f| f.function_at(lines.0))
            .map(|f| f.qualname.clone())
            .unwrap_or_default();
        self.push(rule, Some(lines), function, key)
    }

    /// Reports `rule` about another file, as a whole: a place outside the diff that the change
    /// breaks (a caller of a changed function), which the report lists apart from line
    /// comments on the change.
    pub fn report_outside(&mut self, rule: &Rule, path: &str, key: String) -> &mut Finding {
        let finding = self.push(rule, None, String::new(), key);
        finding.path = path.to_string();
        finding
    }

    fn push(
        &mut self,
        rule: &Rule,
        lines: Option<(u32, u32)>,
        function: String,
        key: String,
    ) -> &mut Finding {
        self.findings.push(Finding {
            rule: rule.id,
            severity: default_severity(rule.id),
            path: self.path.to_string(),
            lines,
            args: Vec::new(),
            notes: Vec::new(),
            function,
            key,
            evidence: Vec::new(),
            point: None,
        });
        let last = self.findings.len() - 1;
        &mut self.findings[last]
    }

    /// Records something the verdict depends on that the change does not show.
    pub fn ask(&mut self, id: &'static str, args: Vec<(&'static str, String)>) {
        self.questions.push(Question { id, args });
    }

    /// The project index, in repository mode.
    pub fn project(&self) -> Option<&'a ProjectIndex> {
        self.project.get()
    }

    /// Background tasks (Celery and the like) that reach function `qualname` of file `path`,
    /// nearest first; empty without a repository.
    pub fn tasks_reaching(&self, path: &str, qualname: &str) -> Vec<TaskRef> {
        let Some(project) = self.project() else {
            return Vec::new();
        };
        let module = project
            .file(path)
            .map_or_else(|| crate::index::module_of(path), |m| m.module.clone());
        project.tasks_calling(&module, qualname, self.vocab)
    }

    /// Whether the repository answers the `task-config` question about function `qualname` of
    /// file `path`: a task reaches it and its decorator spells its options (no `**options`).
    pub fn task_config_known(&self, path: &str, qualname: &str) -> bool {
        self.tasks_reaching(path, qualname)
            .iter()
            .any(|t| !t.decorator.splat)
    }

    /// Whether the repository shows function `qualname` of file `path` run by background tasks
    /// and by no `async def` on the way up to them: the "is it called from async code?"
    /// question is then answered.
    pub fn runs_only_in_tasks(&self, path: &str, qualname: &str) -> bool {
        let Some(project) = self.project() else {
            return false;
        };
        let module = project
            .file(path)
            .map_or_else(|| crate::index::module_of(path), |m| m.module.clone());
        !self.tasks_reaching(path, qualname).is_empty()
            && project
                .async_caller(&module, qualname, self.vocab)
                .is_none()
    }

    /// Whether `tail`, a statement that is only a call, never returns: a helper of the change
    /// that always raises, or, when the change defines none of that name, the function the
    /// file's imports name in the repository.
    pub fn never_returns(&self, tail: syntax::TailCall<'_>) -> bool {
        let text = syntax::call_text(tail.call, self.src());
        if self
            .change
            .functions_named(self.side, text.name)
            .next()
            .is_some()
        {
            return self
                .change
                .never_returns(self.side, text.name, tail.awaited);
        }
        self.project()
            .is_some_and(|p| p.never_returns(self.path, text.callee, tail.awaited))
    }

    /// Whether new-side lines `first..=last` hold an added line.
    pub fn touches_added(&self, first: u32, last: u32) -> bool {
        self.versions.lines.touches_added(first, last)
    }

    /// Whether a function is on the payment path: it talks to a payment operation, an HTTP
    /// client or a cache, or lives in a payments module.
    pub fn on_payment_path(&self, function: Option<&FunctionFacts>) -> bool {
        self.facts.is_some_and(|f| f.payment_module)
            || function.is_some_and(|f| f.payment || f.http || f.cache)
    }
}

impl Finding {
    pub fn arg(&mut self, name: &'static str, value: impl Into<String>) -> &mut Self {
        self.args.push((name, value.into()));
        self
    }

    pub fn note(&mut self, key: &'static str) -> &mut Self {
        self.notes.push(key);
        self
    }

    pub fn severity(&mut self, severity: Severity) -> &mut Self {
        self.severity = severity;
        self
    }

    /// Cites a place elsewhere in the repository; `what` is a key of the rule's `notes`.
    pub fn evidence(
        &mut self,
        path: &str,
        line: u32,
        what: &'static str,
        args: Vec<(&'static str, String)>,
    ) -> &mut Self {
        self.evidence.push(crate::review::Evidence {
            path: path.to_string(),
            line,
            what,
            args,
        });
        self.evidence.sort();
        self.evidence.dedup();
        self
    }

    pub fn lines(&mut self, first: u32, last: u32) -> &mut Self {
        self.lines = Some((first, last));
        self
    }
}

/// The text of a question to the author, from `rules/questions.toml`.
pub fn question(id: &str) -> Option<&'static catalogue::Texts> {
    static QUESTIONS: OnceLock<std::collections::BTreeMap<String, catalogue::Texts>> =
        OnceLock::new();
    QUESTIONS
        .get_or_init(|| toml::from_str(QUESTIONS_TOML).unwrap_or_default())
        .get(id)
}

/// The text of a kind of review error (`rules/errors.toml`) in `lang`, filled with `args`.
pub fn error_text(id: &str, args: &[(&str, String)], lang: crate::review::Lang) -> Option<String> {
    static ERRORS: OnceLock<std::collections::BTreeMap<String, catalogue::Texts>> = OnceLock::new();
    let texts = ERRORS
        .get_or_init(|| toml::from_str(ERRORS_TOML).unwrap_or_default())
        .get(id)?;
    let text = catalogue::optional_segments(texts.get(lang), args);
    Some(catalogue::fill(&text, args))
}

/// Kinds of review errors, by id; `tests/catalogue.rs` parses it and checks every id used.
pub const ERRORS_TOML: &str = include_str!("../../rules/errors.toml");

/// Questions to the author, by id; `tests/catalogue.rs` parses it and checks every id used.
pub const QUESTIONS_TOML: &str = include_str!("../../rules/questions.toml");

/// `rules/catalogue.toml`: the catalogue's version, as `payreview --version` prints it.
pub const CATALOGUE_TOML: &str = include_str!("../../rules/catalogue.toml");

/// The catalogue's release: its version and the digest of the entries it was released with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogueRelease {
    pub version: String,
    pub digest: String,
}

/// The release recorded in `rules/catalogue.toml`; `tests/catalogue.rs` keeps its digest equal to
/// `catalogue_digest()`, so an entry cannot change without the version being looked at.
pub fn catalogue_release() -> &'static CatalogueRelease {
    static RELEASE: OnceLock<CatalogueRelease> = OnceLock::new();
    RELEASE.get_or_init(|| {
        toml::from_str(CATALOGUE_TOML).unwrap_or_else(|_| CatalogueRelease {
            version: "unknown".to_string(),
            digest: String::new(),
        })
    })
}

/// SHA-1 over every rule's entry (in id order) and the questions: what the catalogue says now.
pub fn catalogue_digest() -> String {
    use sha1::{Digest, Sha1};
    let mut hasher = Sha1::new();
    for rule in ALL {
        hasher.update(rule.id.as_bytes());
        hasher.update([0]);
        hasher.update(rule.doc.as_bytes());
        hasher.update([0]);
    }
    hasher.update(QUESTIONS_TOML.as_bytes());
    hasher.update([0]);
    hasher.update(ERRORS_TOML.as_bytes());
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A change of one file whose functions are `(name, async, ends_in)`, `ends_in` as the
    /// names of the calls the function ends in (`await f` for an awaited one), `None` for a
    /// function that can return.
    fn change(functions: &[(&str, bool, Option<&[&str]>)]) -> ChangeSet {
        let function = |&(name, is_async, ends_in): &(&str, bool, Option<&[&str]>)| FunctionFacts {
            name: name.to_string(),
            qualname: name.to_string(),
            is_async,
            ends_in: ends_in.map(|tails| {
                tails
                    .iter()
                    .map(|t| syntax::Tail {
                        name: t.trim_start_matches("await ").to_string(),
                        awaited: t.starts_with("await "),
                    })
                    .collect::<Arc<[_]>>()
            }),
            ..FunctionFacts::default()
        };
        ChangeSet::new(vec![FileChange {
            path: "app/errors.py".into(),
            old: None,
            new: Some(FileFacts {
                functions: functions.iter().map(function).collect(),
                ..FileFacts::default()
            }),
        }])
    }

    #[test]
    fn a_call_never_returns_when_every_function_of_its_name_raises_on_every_path() {
        let change = change(&[
            ("throw", false, Some(&[])),
            ("throw_mapped", false, Some(&["log", "throw"])),
            ("log", false, None),
            ("throw_logged", false, Some(&["throw"])),
            ("fail", true, Some(&[])),
            ("fail_later", false, Some(&["fail"])),
            ("fail_awaited", true, Some(&["await fail"])),
            ("ping", false, Some(&["pong"])),
            ("pong", false, Some(&["ping"])),
            ("get", false, Some(&[])),
            ("get", false, None),
        ]);
        let never = |name: &str, awaited: bool| change.never_returns(Side::New, name, awaited);
        assert!(never("throw", false));
        assert!(never("throw_logged", false));
        // One of its endings is a call that returns.
        assert!(!never("throw_mapped", false));
        // An `async def` raises only when awaited.
        assert!(!never("fail", false));
        assert!(never("fail", true));
        assert!(!never("fail_later", false));
        assert!(never("fail_awaited", true));
        // A cycle never proves anything, and one `get` of two returns.
        assert!(!never("ping", false));
        assert!(!never("get", false));
        // Nothing of that name in the change.
        assert!(!never("absent", false));
        assert!(!change.never_returns(Side::Old, "throw", false));
    }
}
