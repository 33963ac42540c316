//! Gates: what a rule needs to find in a new version before it can report anything there.
//!
//! Checked once per file while the new tree is still in hand (`review::prepare`), so that a
//! file no rule can report on is never walked by the rules, and its tree, when the review drops
//! it to bound memory, is never parsed again. Most files of a large change hold no retry loop,
//! broad `except` or cache call, and this is where their second parse goes away.
//!
//! A gate must be implied by every finding and every question of its rule: it restates the
//! rule's first filter with the same helpers, or asks for a word that the filter cannot pass
//! without. It may let through files where the rule then finds nothing, never the other way
//! round (`tests/gates.rs` reviews every fixture with and without gates and compares).

use std::cell::OnceCell;

use crate::config::Vocabulary;
use crate::python::{NodeIndex, ParsedFile};
use crate::rules::facts::FileFacts;
use crate::rules::{Local, Memo};
use crate::source::LineMap;

/// When a rule can have something to say about a file.
#[derive(Clone, Copy)]
pub enum Gate {
    /// On every file. For a `Check::Tree` rule this means the tree is always needed; a
    /// `Check::Change` rule with this gate reads only facts and the diff.
    Always,
    /// Only where the new version passes the test.
    When(fn(&Scan<'_>) -> bool),
    /// Only where `reports` holds, and reading the tree only where `tree` holds as well: the
    /// rest of the rule works on facts.
    Split {
        reports: fn(&Scan<'_>) -> bool,
        tree: fn(&Scan<'_>) -> bool,
    },
}

/// The new version of a file, as gates see it.
pub struct Scan<'a> {
    pub file: &'a ParsedFile,
    pub facts: &'a FileFacts,
    pub lines: &'a LineMap,
    pub vocab: &'a Vocabulary,
    /// Shared by the retry rules: whether any loop of the file is a retry loop.
    pub(crate) retry_loop: OnceCell<bool>,
    /// Shared by the idem rules: whether any call is on a cache client.
    pub(crate) cache_call: OnceCell<bool>,
    /// Shared by the pay rules on verifications: whether any function calls one.
    pub(crate) verification_call: OnceCell<bool>,
    /// Shared by the http rules: the file's HTTP calls.
    pub(crate) http_calls: OnceCell<Vec<crate::rules::http::HttpCall<'a>>>,
    memo: Memo,
}

impl<'a> Local<'a> for Scan<'a> {
    fn src(&self) -> &'a str {
        self.file.text()
    }

    fn index(&self) -> Option<&'a NodeIndex<'a>> {
        Some(self.file.index())
    }

    fn facts(&self) -> Option<&'a FileFacts> {
        Some(self.facts)
    }

    fn vocab(&self) -> &'a Vocabulary {
        self.vocab
    }

    fn memo(&self) -> &Memo {
        &self.memo
    }
}

impl<'a> Scan<'a> {
    pub fn new(
        file: &'a ParsedFile,
        facts: &'a FileFacts,
        lines: &'a LineMap,
        vocab: &'a Vocabulary,
    ) -> Self {
        Scan {
            file,
            facts,
            lines,
            vocab,
            retry_loop: OnceCell::new(),
            cache_call: OnceCell::new(),
            verification_call: OnceCell::new(),
            http_calls: OnceCell::new(),
            memo: Memo::default(),
        }
    }

    pub fn index(&self) -> &'a NodeIndex<'a> {
        self.file.index()
    }

    pub fn src(&self) -> &'a str {
        self.file.text()
    }

    /// Whether the text holds any of `words`, as written.
    pub fn mentions(&self, words: &[&str]) -> bool {
        let src = self.src();
        words
            .iter()
            .any(|w| memchr::memmem::find(src.as_bytes(), w.as_bytes()).is_some())
    }
}

/// What the rules need of one new version.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Open {
    /// The gated rules that can report on it.
    pub rules: Bits,
    /// Whether any rule will read its tree.
    pub tree: bool,
}

/// What the rules of `crate::rules::ALL` need of the new version `scan`; `enabled` says which
/// rules run at all.
pub fn open(scan: &Scan<'_>, enabled: impl Fn(&crate::rules::Rule) -> bool) -> Open {
    let mut open = Open::default();
    for (i, rule) in crate::rules::ALL.iter().enumerate() {
        if !enabled(rule) {
            continue;
        }
        let (reports, tree) = match rule.gate {
            // A change rule without a gate reads facts and the diff only.
            Gate::Always => (true, matches!(rule.check, crate::rules::Check::Tree(_))),
            Gate::When(test) => {
                let yes = test(scan);
                (yes, yes)
            }
            Gate::Split { reports, tree } => {
                let yes = reports(scan);
                (yes, yes && tree(scan))
            }
        };
        if reports && !matches!(rule.gate, Gate::Always) {
            open.rules.0 |= 1u128.checked_shl(i as u32).unwrap_or(0);
        }
        open.tree |= tree;
    }
    open
}

/// One bit per rule of `crate::rules::ALL` (a test keeps the catalogue within 128 rules).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bits(u128);

impl Bits {
    /// Every gate open: for a review that does not use gates.
    pub const ALL: Bits = Bits(u128::MAX);

    pub fn is_open(self, rule: usize) -> bool {
        rule < 128 && self.0 & 1 << rule != 0
    }

    /// No gated rule can report.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::config::Settings;
    use crate::rules::facts::gather;
    use crate::test_support::{edit_lines, fixture_sources};

    /// The ids of the gated rules open on `src` as file `path` (no line added), and whether a
    /// rule will read its tree.
    fn opened(path: &str, src: &str) -> (Vec<&'static str>, bool) {
        let file = ParsedFile::parse(src.to_string()).expect("the python grammar loads");
        let vocab = Vocabulary::default();
        let facts = gather(path, &file, &vocab);
        let lines = LineMap::default();
        let open = open(&Scan::new(&file, &facts, &lines, &vocab), |_| true);
        let ids = crate::rules::ALL
            .iter()
            .enumerate()
            .filter(|(i, _)| open.rules.is_open(*i))
            .map(|(_, r)| r.id)
            .collect();
        (ids, open.tree)
    }

    #[test]
    fn every_rule_has_a_bit() {
        assert!(crate::rules::ALL.len() <= 128, "`Bits` holds 128 rules");
    }

    #[test]
    fn ordinary_code_opens_no_gate_and_needs_no_tree() {
        let src = "import json\n\n\ndef load(d, key):\n    for k in d:\n        if k == key:\n            return d.get(k)\n    try:\n        return json.loads(key)\n    except ValueError as e:\n        raise KeyError(key) from e\n\n\nasync_mode = False\n";
        assert_eq!(opened("app/util.py", src), (Vec::new(), false));
    }

    #[test]
    fn each_family_opens_on_what_its_rules_start_from() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "app/pay.py",
                "def charge(c):\n    try:\n        return c.post()\n    except Exception:\n        return None\n",
                "ERR001",
            ),
            (
                "app/pay.py",
                "import logging\nlog = logging.getLogger()\n\n\ndef f():\n    try:\n        g()\n    except OSError as e:\n        log.error(e)\n",
                "ERR004",
            ),
            (
                "app/pay.py",
                "import redis\nr = redis.Redis()\n\n\ndef pay(key):\n    if r.get(key):\n        return\n    r.set(key, 1)\n",
                "IDEM001",
            ),
            (
                "app/pay.py",
                "import requests\n\n\ndef pay():\n    return requests.post(URL)\n",
                "HTTP002",
            ),
            (
                "app/pay.py",
                "import requests\n\n\ndef pay():\n    return requests.post(URL, timeout=30)\n",
                "HTTP001",
            ),
            (
                "app/pay.py",
                "import time\n\n\ndef pay():\n    for attempt in range(3):\n        try:\n            return send()\n        except OSError:\n            time.sleep(1)\n",
                "RETRY001",
            ),
            (
                "app/pay.py",
                "async def pay():\n    time.sleep(1)\n",
                "RETRY003",
            ),
        ];
        for (path, src, id) in cases {
            let (ids, tree) = opened(path, src);
            assert!(
                ids.contains(id),
                "{id} not open on:\n{src}\n(open: {ids:?})"
            );
            assert!(tree, "{id} open without its tree on:\n{src}");
        }
    }

    #[test]
    fn a_rule_that_reads_the_tree_only_in_tests_asks_for_it_there() {
        let src = "def test_total():\n    assert total() == 0\n";
        let (ids, tree) = opened("tests/test_report.py", src);
        assert!(ids.contains(&"TEST002"), "{ids:?}");
        assert!(tree);
        // Outside tests, nothing here needs a tree.
        assert_eq!(opened("app/report.py", src), (Vec::new(), false));
    }

    /// A diff from `old` to `new` of file `path`, as git writes it.
    fn diff(path: &str, old: &str, new: &str) -> String {
        let body = similar::TextDiff::from_lines(old, new)
            .unified_diff()
            .header(&format!("a/{path}"), &format!("b/{path}"))
            .to_string();
        format!("diff --git a/{path} b/{path}\n{body}")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Edited fixture code, as a payment module and as a test, reviews the same with gates
        /// and without.
        #[test]
        fn gates_hide_nothing_on_edited_code(
            pick in any::<prop::sample::Index>(),
            edits in prop::collection::vec((any::<usize>(), any::<usize>(), 0u8..6), 1..8),
            test in any::<bool>(),
        ) {
            let sources = fixture_sources();
            let old = pick.get(&sources);
            let new = edit_lines(old, &edits);
            let path = if test { "tests/test_payments.py" } else { "app/payments/client.py" };
            let diff = diff(path, old, &new);
            let gated = Settings::diff_only();
            let mut open = gated.clone();
            open.gates = false;
            let with = crate::review_diff(diff.as_bytes(), &gated);
            let without = crate::review_diff(diff.as_bytes(), &open);
            match (with, without) {
                (Ok(with), Ok(without)) => {
                    prop_assert_eq!(&with.findings, &without.findings);
                    prop_assert_eq!(&with.questions, &without.questions);
                    prop_assert_eq!(&with.errors, &without.errors);
                }
                (with, without) => prop_assert_eq!(with.is_ok(), without.is_ok()),
            }
        }
    }
}
