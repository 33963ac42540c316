//! Validated settings of one run: what to review, how to report it, and the domain vocabulary
//! the rules use to recognise payment code.

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
    Text,
}

/// `--fail-on`: the least severe finding that makes the exit status 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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
    pub payment_operations: Vec<String>,
    pub money_arguments: Vec<String>,
    pub entities: Vec<String>,
    pub cache_clients: Vec<String>,
}

impl Default for Vocabulary {
    fn default() -> Self {
        let words = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
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
                "authorize",
                "create_payment_intent",
                "confirm_payment_intent",
                "make_payment",
                "process_payment",
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
            ]),
            cache_clients: words(&["redis", "cache", "rds", "r", "kv"]),
        }
    }
}

impl Vocabulary {
    /// Whether `name` (a function or method name) is a payment operation.
    pub fn is_payment_operation(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        self.payment_operations
            .iter()
            .any(|op| lower == *op || lower.split('_').any(|part| part == op))
    }

    pub fn is_money_argument(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        self.money_arguments
            .iter()
            .any(|m| lower == *m || lower.split('_').any(|part| part == m))
    }

    pub fn is_entity(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        self.entities
            .iter()
            .any(|e| lower == *e || lower.split('_').any(|part| part == e))
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
        }
    }
}

pub const DEFAULT_MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
pub const DEFAULT_MAX_FILES: usize = 20_000;

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
        ] {
            assert!(!v.is_payment_operation(no), "{no}");
        }
    }
}
