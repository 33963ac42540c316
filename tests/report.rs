//! The reports: every format in both languages for a few fixtures (snapshots), SARIF against the
//! official schema and GitHub's expectations, Markdown that PR content cannot break, workflow
//! commands that a message cannot inject into.
mod common;

use common::*;
use payreview::config::{Format, Settings};
use payreview::report::{self, FINGERPRINT_KEY, Options};
use payreview::review::{Finding, Lang, Question, Review, ReviewError, Severity};
use serde_json::Value;

const FORMATS: [(Format, &str); 5] = [
    (Format::Markdown, "markdown"),
    (Format::Sarif, "sarif"),
    (Format::Github, "github"),
    (Format::Text, "text"),
    (Format::Json, "json"),
];
const LANGS: [(Lang, &str); 2] = [(Lang::En, "en"), (Lang::Ru, "ru")];

fn render(review: &Review, format: Format, lang: Lang) -> String {
    let mut out = Vec::new();
    report::render_with(review, format, lang, Options { color: false }, &mut out).expect("renders");
    String::from_utf8(out)
        .expect("utf-8")
        .replace(env!("CARGO_PKG_VERSION"), "[version]")
}

/// A fixture reviewed in one mode, with the description in `lang` when it has one.
struct Case {
    name: &'static str,
    diff: &'static str,
    repo: Option<&'static str>,
    description: Option<fn(Lang) -> &'static str>,
}

fn seed_description(lang: Lang) -> &'static str {
    match lang {
        Lang::En => "seed/description.en.md",
        Lang::Ru => "seed/description.ru.md",
    }
}

fn one_place_description(_: Lang) -> &'static str {
    "report/one_place.description.md"
}

const CASES: &[Case] = &[
    Case {
        name: "seed_diff_only",
        diff: "seed/pr.diff",
        repo: None,
        description: Some(seed_description),
    },
    Case {
        name: "seed_repository",
        diff: "seed/pr.diff",
        repo: Some("seed/head"),
        description: Some(seed_description),
    },
    Case {
        name: "clean",
        diff: "report/clean.diff",
        repo: None,
        description: None,
    },
    Case {
        name: "one_place_diff_only",
        diff: "report/one_place.diff",
        repo: None,
        description: None,
    },
    Case {
        name: "one_place_repository",
        diff: "report/one_place.diff",
        repo: Some("report/one_place.repo"),
        description: Some(one_place_description),
    },
];

fn review_case(case: &Case, lang: Lang) -> Review {
    let mut settings = match case.repo {
        Some(dir) => repo_settings(&fixture(dir)),
        None => Settings::diff_only(),
    };
    settings.description = case
        .description
        .map(|d| String::from_utf8(read(d(lang))).expect("description is UTF-8"));
    review(&read(case.diff), &settings)
}

#[test]
fn every_format_in_both_languages() {
    for case in CASES {
        for (lang, lang_name) in LANGS {
            let review = review_case(case, lang);
            for (format, format_name) in FORMATS {
                let out = render(&review, format, lang);
                insta::assert_snapshot!(format!("{}_{format_name}_{lang_name}", case.name), out);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// SARIF

fn sarif_schema() -> Value {
    let shared = root().join("../shared/sarif-schema-2.1.0.json");
    let path = if shared.exists() {
        shared
    } else {
        root().join("tests/data/sarif-schema-2.1.0.json")
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("the schema is JSON")
}

fn check_sarif(text: &str, review: &Review) {
    let sarif: Value = serde_json::from_str(text).expect("SARIF is JSON");
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&sarif_schema())
        .expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&sarif)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");

    assert_eq!(sarif["version"], "2.1.0");
    let runs = sarif["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "one run for the whole review");
    let driver = &runs[0]["tool"]["driver"];
    assert_eq!(driver["name"], "payreview");
    assert!(driver["version"].is_string());
    assert!(
        driver["informationUri"]
            .as_str()
            .is_some_and(|u| u.starts_with("https://"))
    );
    let rules = driver["rules"].as_array().expect("rules");
    for rule in rules {
        for field in ["id", "name"] {
            assert!(rule[field].is_string(), "{field} in {rule}");
        }
        assert!(rule["shortDescription"]["text"].is_string());
        assert!(rule["fullDescription"]["text"].is_string());
        assert!(rule["help"]["text"].is_string());
        assert!(rule["help"]["markdown"].is_string());
        let level = rule["defaultConfiguration"]["level"]
            .as_str()
            .expect("level");
        let props = &rule["properties"];
        assert!(props["tags"].is_array());
        assert!(props["precision"].is_string());
        assert!(props["problem.severity"].is_string());
        if level == "error" {
            let score: f64 = props["security-severity"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .expect("blockers carry a security-severity");
            assert!((0.0..=10.0).contains(&score));
        }
    }
    let results = runs[0]["results"].as_array().expect("results");
    assert_eq!(results.len(), review.findings.len());
    for (result, finding) in results.iter().zip(&review.findings) {
        assert_eq!(result["ruleId"], finding.rule);
        let index = result["ruleIndex"].as_u64().expect("ruleIndex") as usize;
        assert_eq!(rules[index]["id"], finding.rule);
        let level = match finding.severity {
            Severity::Blocker => "error",
            Severity::Important => "warning",
            Severity::Nit | Severity::Info => "note",
        };
        assert_eq!(result["level"], level);
        assert!(
            result["message"]["text"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
        );
        let location = &result["locations"][0]["physicalLocation"];
        let uri = location["artifactLocation"]["uri"].as_str().expect("uri");
        assert!(!uri.starts_with('/') && !uri.contains("://"), "{uri}");
        assert_eq!(location["artifactLocation"]["uriBaseId"], "%SRCROOT%");
        let fingerprints = &result["partialFingerprints"];
        assert!(fingerprints[FINGERPRINT_KEY].is_string());
        match finding.lines {
            None => assert!(location.get("region").is_none()),
            Some((start, end)) => {
                let region = &location["region"];
                let anchored = region["startLine"].as_u64().expect("startLine") as u32;
                assert!((start..=end).contains(&anchored));
                assert_eq!(region["endLine"].as_u64(), Some(u64::from(end)));
                let full = review
                    .sources
                    .get(&finding.path)
                    .is_some_and(|s| !s.partial);
                assert_eq!(
                    fingerprints["primaryLocationLineHash"].is_string(),
                    full,
                    "line hash exactly when the whole file is known"
                );
            }
        }
    }
}

#[test]
fn every_sarif_report_validates_and_has_what_github_needs() {
    for case in CASES {
        for (lang, _) in LANGS {
            let review = review_case(case, lang);
            check_sarif(&render(&review, Format::Sarif, lang), &review);
        }
    }
}

fn fingerprints(diff: &str) -> Vec<(String, String)> {
    let review = review(diff.as_bytes(), &Settings::diff_only());
    let sarif: Value =
        serde_json::from_str(&render(&review, Format::Sarif, Lang::En)).expect("JSON");
    sarif["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["partialFingerprints"][FINGERPRINT_KEY]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                r["partialFingerprints"]["primaryLocationLineHash"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect()
}

const REFUND: &str = "import httpx\n\n\ndef create_refund(payment_id: str) -> dict:\n    try:\n        return httpx.post(\"https://psp.example/refunds\", json={\"id\": payment_id}).json()\n    except Exception:\n        return None\n";

#[test]
fn fingerprints_survive_lines_added_above() {
    let before = fingerprints(&added_file_diff("app/payments/refunds.py", REFUND));
    let shifted = format!("\"\"\"Refunds.\"\"\"\nTIMEOUT = 5\n\n{REFUND}");
    let after = fingerprints(&added_file_diff("app/payments/refunds.py", &shifted));
    assert_eq!(before.len(), 1);
    assert_eq!(before, after);
    assert!(!before[0].1.is_empty(), "an added file is known whole");
}

// ---------------------------------------------------------------------------------------------
// Markdown that PR content cannot break

/// Headings, fences and `<details>` of a Markdown document, by simple scanning, failing on an
/// unclosed fence.
fn structure(doc: &str) -> (usize, usize, usize) {
    let (mut headings, mut fences, mut details) = (0, 0, 0);
    let mut open: Option<usize> = None;
    for line in doc.lines() {
        let ticks = line.trim_start().chars().take_while(|&c| c == '`').count();
        match open {
            Some(n) if ticks >= n && line.trim().chars().all(|c| c == '`') => open = None,
            Some(_) => {}
            None if ticks >= 3 => {
                open = Some(ticks);
                fences += 1;
            }
            None => {
                if line.starts_with('#') {
                    headings += 1;
                }
                if line == "<details>" {
                    details += 1;
                }
            }
        }
    }
    assert!(open.is_none(), "unclosed fence in:\n{doc}");
    (headings, fences, details)
}

/// The text GitHub reads as Markdown: code spans (where nothing is live) removed, as
/// CommonMark finds them (a backslash-escaped backtick opens nothing).
fn outside_code_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let run_at = |i: usize| chars[i..].iter().take_while(|&&c| c == '`').count();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                out.extend(chars.get(i..i + 2).unwrap_or(&chars[i..]));
                i += 2;
            }
            '`' => {
                let run = run_at(i);
                let mut j = i + run;
                let mut closed = None;
                while j < chars.len() {
                    if chars[j] == '`' {
                        let r = run_at(j);
                        if r == run {
                            closed = Some(j + r);
                            break;
                        }
                        j += r;
                    } else {
                        j += 1;
                    }
                }
                match closed {
                    Some(end) => i = end,
                    None => {
                        out.extend(&chars[i..i + run]);
                        i += run;
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

fn assert_inert(doc: &str) {
    for line in doc.lines() {
        assert!(
            line.chars().count() < 1_000,
            "a line of {} chars",
            line.len()
        );
    }
    let doc = &doc
        .lines()
        .map(outside_code_spans)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!doc.contains("@octocat"), "a live mention:\n{doc}");
    assert!(
        !doc.replace("\\]", "").contains("](http"),
        "a live link:\n{doc}"
    );
    assert!(!doc.contains("<b>"), "raw HTML:\n{doc}");
    let opened = doc.matches("<details>").count();
    assert_eq!(opened, doc.matches("</details>").count());
    assert!(
        doc.lines()
            .filter(|l| l.contains("<details>") || l.contains("</details>"))
            .all(|l| l == "<details>" || l == "</details>"),
        "a <details> that is not ours:\n{doc}"
    );
}

fn hostile_review() -> Review {
    let long = "x".repeat(10_000);
    let hostile =
        format!("a`b ``` | <details> <b>x</b> @octocat [link](https://evil.example) #1 {long}");
    let finding = |rule: &'static str, severity, lines| Finding {
        rule,
        severity,
        path: "app/`pay` <b>|ments</b>.py".to_string(),
        lines,
        args: vec![
            ("caught", format!("`except {hostile}`")),
            ("function", hostile.clone()),
            ("annotation", "Charge`Result".to_string()),
            ("caller", hostile.clone()),
            ("hash", hostile.clone()),
            ("diff_line", "\n# Injected heading\n```".to_string()),
            ("line", "7".to_string()),
            ("in_diff", hostile.clone()),
            ("on_disk", hostile.clone()),
        ],
        notes: vec!["annotation", "caller"],
        function: hostile.clone(),
        key: String::new(),
        evidence: Vec::new(),
        point: None,
    };
    let findings = vec![
        finding("ERR001", Severity::Blocker, Some((3, 5))),
        finding("DIFF003", Severity::Blocker, Some((4, 4))),
        finding("DIFF001", Severity::Important, None),
        finding("ERR001", Severity::Nit, Some((20, 21))),
    ];
    Review {
        findings,
        questions: vec![Question {
            id: "no-such-question",
            args: vec![],
        }],
        errors: vec![ReviewError::plain(
            hostile.clone(),
            format!("\n## Injected\n<details>{hostile}"),
        )],
        description: Some(format!(
            "# Title {hostile}\n\nDid not touch the `payments` <details> @octocat {hostile}."
        )),
        changed_functions: [(
            "app/`pay` <b>|ments</b>.py".to_string(),
            vec![format!("charge_{}", "y".repeat(50))],
        )]
        .into_iter()
        .collect(),
        files: vec![payreview::review::FileSummary {
            path: "app/`pay` <b>|ments</b>.py".to_string(),
            status: "modified",
            added: 1,
            removed: 1,
        }],
        ..Review::default()
    }
}

#[test]
fn hostile_pr_content_cannot_break_the_markdown() {
    let review = hostile_review();
    for (lang, _) in LANGS {
        let doc = render(&review, Format::Markdown, lang);
        let (headings, fences, details) = structure(&doc);
        let heads: Vec<&str> = doc.lines().filter(|l| l.starts_with('#')).collect();
        // Title, verdict, line comments, questions, and one heading per place: 3-5 (joined),
        // the file-level one, 20-21 (a nit, collapsed).
        assert_eq!(headings, 4 + 3, "{heads:#?}");
        // Two ERR001 suggestions; DIFF003 and DIFF001 have none.
        assert_eq!(
            fences,
            2,
            "{}",
            doc.lines()
                .filter(|l| l.starts_with("```"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert_eq!(details, 1, "{doc}");
        assert_inert(&doc);
    }
}

#[test]
fn hostile_line_from_a_real_review_cannot_break_the_markdown() {
    // The diff's new line and the repository's disagree: DIFF003 quotes both.
    let long = "y".repeat(10_000);
    let line = format!("X = \"a`b ``` | <details> @octocat [l](https://e) {long}\"");
    let diff = added_file_diff("app/payments/x.py", &format!("{line}\n"));
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("app/payments")).expect("mkdir");
    std::fs::write(
        dir.path().join("app/payments/x.py"),
        format!("{line} + '|'\n"),
    )
    .expect("write");
    let review = review(diff.as_bytes(), &repo_settings(dir.path()));
    assert!(
        review.findings.iter().any(|f| f.rule == "DIFF003"),
        "{:?}",
        places(&review)
    );
    for (lang, _) in LANGS {
        let doc = render(&review, Format::Markdown, lang);
        let (headings, _, _) = structure(&doc);
        assert_eq!(headings, 4 + review.findings.len(), "{doc}");
        assert_inert(&doc);
    }
}

// ---------------------------------------------------------------------------------------------
// GitHub workflow commands

#[test]
fn a_message_cannot_inject_a_workflow_command() {
    let mut review = hostile_review();
    for f in &mut review.findings {
        f.path = "x.py,line=1,title=owned::".to_string();
        f.args = vec![
            ("caught", "%0A::error::pwned".to_string()),
            (
                "function",
                "f\n::error file=evil.py::pwned\r::warning::x".to_string(),
            ),
            ("hash", "h\n::error::h".to_string()),
            ("diff_line", "1".to_string()),
            ("line", "1".to_string()),
            ("in_diff", "\r\n::error::in".to_string()),
            ("on_disk", "d".to_string()),
        ];
    }
    let out = render(&review, Format::Github, Lang::En);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), review.findings.len() + 1, "{out}");
    for line in &lines {
        assert!(line.starts_with("::"), "{line}");
        assert!(!line.contains('\r'));
    }
    assert!(!out.contains("\n::error file=evil.py"), "{out}");
    // `%0A` in the message must stay text, not become a newline.
    assert!(out.contains("%250A"), "{out}");
    assert!(
        lines[0]
            .starts_with("::error file=x.py%2Cline=1%2Ctitle=owned%3A%3A,line=3,endLine=5,title=")
    );
}

#[test]
fn annotations_stay_within_githubs_limits() {
    let mut findings = Vec::new();
    for (severity, n) in [
        (Severity::Blocker, 12),
        (Severity::Important, 11),
        (Severity::Nit, 10),
    ] {
        for i in 0..n {
            findings.push(Finding {
                rule: "ERR001",
                severity,
                path: format!("app/{}.py", severity.as_str()),
                lines: Some((i + 1, i + 1)),
                args: vec![],
                notes: vec![],
                function: String::new(),
                key: String::new(),
                evidence: Vec::new(),
                point: None,
            });
        }
    }
    let review = Review {
        findings,
        ..Review::default()
    };
    let out = render(&review, Format::Github, Lang::En);
    let count = |p: &str| out.lines().filter(|l| l.starts_with(p)).count();
    assert_eq!(count("::error "), 10);
    assert_eq!(count("::warning "), 10);
    assert_eq!(count("::notice "), 9);
    assert_eq!(count("::notice::"), 1);
    let last = out.lines().last().unwrap_or("");
    assert!(last.contains("4 more findings"), "{last}");
}

// ---------------------------------------------------------------------------------------------
// Text

#[test]
fn text_without_colour_has_no_escape_codes() {
    let review = review_case(&CASES[0], Lang::En);
    let out = render(&review, Format::Text, Lang::En);
    assert!(!out.contains('\u{1b}'));
    assert!(out.contains("41 │"), "{out}");
    assert!(
        out.trim_end()
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("Merge after fixes."))
    );
}

/// GitLab Code Quality: every finding with the fields GitLab reads, unique fingerprints.
#[test]
fn gitlab_code_quality_report_has_the_required_fields() {
    let review = common::review(
        &common::read("seed/pr.diff"),
        &payreview::config::Settings::diff_only(),
    );
    let out = render(&review, Format::Gitlab, Lang::En);
    let issues: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    let issues = issues.as_array().expect("an array of issues");
    assert_eq!(issues.len(), review.findings.len());
    let mut fingerprints = std::collections::BTreeSet::new();
    for (issue, finding) in issues.iter().zip(&review.findings) {
        assert_eq!(issue["check_name"], finding.rule);
        assert!(issue["description"].as_str().is_some_and(|d| !d.is_empty()));
        let severity = issue["severity"].as_str().expect("severity");
        assert!(["info", "minor", "major", "critical", "blocker"].contains(&severity));
        assert_eq!(issue["location"]["path"], finding.path.as_str());
        let begin = issue["location"]["lines"]["begin"]
            .as_u64()
            .expect("begin line");
        assert_eq!(begin, u64::from(finding.lines.map_or(1, |l| l.0)));
        assert!(
            fingerprints.insert(
                issue["fingerprint"]
                    .as_str()
                    .expect("fingerprint")
                    .to_string()
            )
        );
    }
    let err001 = issues
        .iter()
        .find(|i| i["check_name"] == "ERR001")
        .expect("ERR001");
    assert_eq!(err001["severity"], "blocker");
    assert_eq!(err001["location"]["lines"]["begin"], 41);
}

/// What a review could not do is told in the report's language, wherever the format lists it;
/// a system's own reason inside it stays as the system wrote it.
#[test]
fn review_errors_are_written_in_the_reports_language() {
    use payreview::review::ErrorKind;
    let review = Review {
        errors: vec![
            ReviewError::new(
                "app/pay.py",
                ErrorKind::SyntaxError,
                vec![("line", "7".into())],
            ),
            ReviewError::new(
                "app/big.py",
                ErrorKind::VersionOversized,
                vec![
                    ("old", "old".into()),
                    ("len", "9000000".into()),
                    ("cap", "8388608".into()),
                ],
            ),
            ReviewError::new(
                "app/gone.py",
                ErrorKind::ReadFailed,
                vec![("reason", "app/gone.py: No such file or directory".into())],
            ),
        ],
        ..Review::default()
    };
    let expected = [
        (
            Lang::En,
            [
                "the new version does not parse as Python 3 (first error at line 7)",
                "the old version is 9000000 bytes, over the 8388608-byte cap",
                "app/gone.py: No such file or directory; reviewed from the diff alone",
            ],
        ),
        (
            Lang::Ru,
            [
                "новая версия не разбирается как Python 3 (первая ошибка в строке 7)",
                "старая версия занимает 9000000 байт, больше предела в 8388608 байт",
                "app/gone.py: No such file or directory; проверено только по диффу",
            ],
        ),
    ];
    for (lang, texts) in expected {
        for format in [Format::Text, Format::Markdown, Format::Json] {
            let out = render(&review, format, lang);
            for text in texts {
                assert!(
                    out.contains(text),
                    "{format:?} {lang:?} lacks {text:?}:\n{out}"
                );
            }
        }
    }
    // The English words stay the error's message, whatever the report's language.
    assert!(
        review.errors[0]
            .message
            .starts_with("the new version does not parse")
    );
}
