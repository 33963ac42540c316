//! The check of a change against its pull request's description: which changed files and
//! functions the description does not mention, and which of its "did not touch X" statements
//! the change contradicts. Reads only the review (paths, changed function names, description).

use crate::review::{Finding, Review, Severity};
use crate::rules::facts::is_test_path;

/// SCOPE001's findings: each changed, non-test Python file the description does not mention
/// (test files ride with what they test). A blocker when the file also changes what is charged
/// (PAY001), the seed's case: an amount change inside a retry fix. Empty without a description.
pub fn undeclared_changes(review: &Review) -> Vec<Finding> {
    let Some(check) = check(review) else {
        return Vec::new();
    };
    let deleted = |path: &str| {
        review
            .files
            .iter()
            .any(|f| f.path == path && f.status == "deleted")
    };
    check
        .files
        .iter()
        .filter(|f| super::is_python(&f.path) && !is_test_path(&f.path) && !deleted(&f.path))
        .map(|file| {
            let mut finding = Finding {
                rule: "SCOPE001",
                severity: crate::rules::default_severity("SCOPE001"),
                path: file.path.clone(),
                lines: None,
                args: vec![("path", file.path.clone())],
                notes: Vec::new(),
                function: String::new(),
                key: file.path.clone(),
                evidence: Vec::new(),
                point: None,
            };
            let functions: Vec<String> = file.functions.iter().map(|f| format!("`{f}`")).collect();
            finding.args.push(("functions", functions.join(", ")));
            if !file.contradicts.is_empty() {
                let claims: Vec<String> = file
                    .contradicts
                    .iter()
                    .map(|c| format!("\"{c}\""))
                    .collect();
                finding.args.push(("contradicts", claims.join("; ")));
                finding.notes.push("contradicts");
            }
            let amount = review
                .findings
                .iter()
                .find(|f| f.rule == "PAY001" && f.path == file.path);
            if let Some(amount) = amount {
                let line = amount.lines.map_or(String::new(), |(a, _)| format!(":{a}"));
                finding
                    .args
                    .push(("amount_at", format!("{}{line}", amount.path)));
                finding.notes.push("amount");
                finding.severity = Severity::Blocker;
            }
            finding
        })
        .collect()
}

/// A changed file the description does not mention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmentioned {
    pub path: String,
    /// Its changed functions (none mentioned either).
    pub functions: Vec<String>,
    /// The description's statements this change contradicts, as written.
    pub contradicts: Vec<String>,
}

/// What the check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescriptionCheck {
    /// Changed files the description does not mention.
    pub files: Vec<Unmentioned>,
    /// Public changed functions of mentioned files that the description does not name.
    pub functions: Vec<(String, String)>,
}

/// Words that say "this was not changed", English and Russian (matched in lower case).
const DENIALS: &[&str] = &[
    "did not touch",
    "didn't touch",
    "does not touch",
    "doesn't touch",
    "not touched",
    "untouched",
    "without touching",
    "did not change",
    "didn't change",
    "no changes to",
    "no change to",
    "unchanged",
    "не трогал",
    "не трогали",
    "не трогает",
    "не трогаем",
    "не тронут",
    "не менял",
    "не меняли",
    "не меняется",
    "не изменял",
    "не изменялся",
    "не затрагивает",
    "не затронут",
    "без изменений",
];

/// Topics a denial can name in either language, and the path or function words that belong to
/// each: «не трогал обработку платежей» is about `payments/service.py`.
const TOPICS: &[(&[&str], &[&str])] = &[
    (
        &[
            "payment",
            "billing",
            "biller",
            "charg",
            "checkout",
            "invoic",
            "refund",
            "payout",
            "ledger",
            "плат",
            "оплат",
            "биллинг",
            "списан",
            "возврат",
            "счет",
            "счёт",
        ],
        &[
            "pay", "payment", "billing", "bill", "charg", "checkout", "invoic", "refund", "payout",
            "ledger",
        ],
    ),
    (&["test", "тест"], &["test"]),
    (&["migration", "миграц"], &["migration"]),
    (
        &["config", "setting", "конфиг", "настройк"],
        &["config", "setting"],
    ),
    (&["model", "schema", "модел", "схем"], &["model", "schema"]),
];

/// Checks the review's change against its description; `None` without a description.
pub fn check(review: &Review) -> Option<DescriptionCheck> {
    let description = review.description.as_deref()?;
    let text = description.to_lowercase();
    let words = words(&text);
    let denials = denials(description);
    let mut out = DescriptionCheck::default();
    for file in &review.files {
        let functions = review
            .changed_functions
            .get(&file.path)
            .cloned()
            .unwrap_or_default();
        if file_mentioned(&file.path, &functions, &text, &words) {
            // A test file is covered by the description's word on tests, not by test names.
            let listed = if is_test_path(&file.path) {
                &[][..]
            } else {
                &functions[..]
            };
            out.functions.extend(
                listed
                    .iter()
                    .filter(|f| is_public(f) && !name_mentioned(f, &words))
                    .map(|f| (file.path.clone(), f.clone())),
            );
            continue;
        }
        let terms = file_terms(&file.path, &functions);
        let contradicts = denials
            .iter()
            .filter(|claim| about(claim, &terms))
            .cloned()
            .collect();
        out.files.push(Unmentioned {
            path: file.path.clone(),
            functions,
            contradicts,
        });
    }
    Some(out)
}

/// A file is mentioned by its path, file name, module name or a changed function's name; a test
/// file is covered by any mention of tests.
fn file_mentioned(path: &str, functions: &[String], text: &str, words: &[String]) -> bool {
    let lower = path.to_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    let stem = name.split('.').next().unwrap_or(name);
    let module = lower
        .trim_end_matches(".py")
        .trim_end_matches(".pyi")
        .replace('/', ".");
    text.contains(&lower)
        || text.contains(name)
        || text.contains(&module)
        || (stem.len() > 2 && !stem.starts_with("__") && words.iter().any(|w| w == stem))
        || functions.iter().any(|f| name_mentioned(f, words))
        || (is_test_path(path)
            && words
                .iter()
                .any(|w| w.starts_with("test") || w.starts_with("тест")))
}

fn name_mentioned(qualname: &str, words: &[String]) -> bool {
    qualname
        .rsplit('.')
        .next()
        .is_some_and(|name| words.iter().any(|w| *w == name.to_lowercase()))
}

fn is_public(qualname: &str) -> bool {
    qualname
        .rsplit('.')
        .next()
        .is_some_and(|name| !name.starts_with('_'))
}

/// Identifier-like words of the description (`create_charge` stays one word).
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// The description's clauses that deny touching something: split into sentences, then into the
/// comma-separated part holding the denial ("…, only the client changes" is not part of it).
fn denials(description: &str) -> Vec<String> {
    description
        .split(['.', ';', '!', '?', '\n'])
        .flat_map(|sentence| sentence.split(','))
        .map(str::trim)
        .filter(|clause| {
            let lower = clause.to_lowercase();
            DENIALS.iter().any(|d| lower.contains(d))
        })
        .map(str::to_string)
        .collect()
}

/// Lower-case words of a path and its changed functions: `app/payments/service.py` with
/// `process_order_payment` gives app, payments, service, process, order, payment.
fn file_terms(path: &str, functions: &[String]) -> Vec<String> {
    let mut terms: Vec<String> = path
        .split(['/', '.', '_', '-'])
        .chain(functions.iter().flat_map(|f| f.split(['.', '_'])))
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect();
    terms.sort();
    terms.dedup();
    terms
}

/// Whether a denial is about a file: a shared topic, or a word of the claim that is a path or
/// function word itself ("did not touch the ledger" and `ledger.py`).
fn about(claim: &str, terms: &[String]) -> bool {
    let claim_words = words(&claim.to_lowercase());
    let topic = TOPICS.iter().any(|(claim_stems, term_stems)| {
        claim_words
            .iter()
            .any(|w| claim_stems.iter().any(|s| w.starts_with(s)))
            && terms
                .iter()
                .any(|t| term_stems.iter().any(|s| t.starts_with(s)))
    });
    topic
        || claim_words
            .iter()
            .any(|w| terms.iter().any(|t| same_word(w, t)))
}

/// Equal, or sharing a stem of five letters or more: "reporting" and `reports`.
fn same_word(a: &str, b: &str) -> bool {
    const STEM: usize = 5;
    if a == b {
        return a.chars().count() >= 4;
    }
    let shared = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    shared >= STEM
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::FileSummary;

    fn review(description: &str, files: &[(&str, &[&str])]) -> Review {
        Review {
            files: files
                .iter()
                .map(|(path, _)| FileSummary {
                    path: path.to_string(),
                    status: "modified",
                    added: 1,
                    removed: 1,
                })
                .collect(),
            changed_functions: files
                .iter()
                .map(|(path, funcs)| {
                    (
                        path.to_string(),
                        funcs.iter().map(|f| f.to_string()).collect(),
                    )
                })
                .collect(),
            description: Some(description.to_string()),
            ..Review::default()
        }
    }

    const FILES: &[(&str, &[&str])] = &[
        ("app/payments/client.py", &["create_charge", "_key"]),
        ("app/payments/service.py", &["process_order_payment"]),
        ("tests/test_payments.py", &["test_retry"]),
    ];

    #[test]
    fn english_denial_of_billing_is_contradicted_by_the_service_change() {
        let r = review(
            "create_charge retries. A test for the retry.\nDid not touch payment processing in billing; only the gateway client changes.",
            FILES,
        );
        let check = check(&r).expect("description given");
        assert_eq!(check.files.len(), 1, "{check:?}");
        let file = &check.files[0];
        assert_eq!(file.path, "app/payments/service.py");
        assert_eq!(
            file.contradicts,
            ["Did not touch payment processing in billing"]
        );
        assert!(check.functions.is_empty());
    }

    #[test]
    fn russian_denial_with_the_object_first() {
        let r = review(
            "create_charge передаёт ключ. Тест на ретрай.\nОбработку платежей в биллинге не трогал, меняется только клиент gateway.",
            FILES,
        );
        let check = check(&r).expect("description given");
        assert_eq!(
            check.files[0].contradicts,
            ["Обработку платежей в биллинге не трогал"]
        );
    }

    #[test]
    fn unrelated_denial_is_not_a_contradiction() {
        let r = review("create_charge retries. Did not touch the frontend.", FILES);
        let check = check(&r).expect("description given");
        assert!(check.files.iter().all(|f| f.contradicts.is_empty()));
        // tests are not mentioned here
        assert_eq!(check.files.len(), 2);
    }
}
