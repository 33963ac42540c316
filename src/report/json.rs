//! `--format json`: the stable machine-readable contract. Later issues add fields; none is
//! renamed or removed.

use std::io::Write;

use serde::Serialize;

use super::texts::{error_text, question_text, resolve, resolve_evidence, summary};
use crate::review::{FileSummary, Lang, Review};
use crate::rules::catalogue::fill;

#[derive(Serialize)]
struct Report<'a> {
    tool: Tool,
    verdict: Verdict,
    findings: Vec<Finding<'a>>,
    questions: Vec<Question>,
    files: &'a [FileSummary],
    errors: Vec<Error<'a>>,
    suppressions: &'a [crate::review::Suppression],
}

#[derive(Serialize)]
struct Tool {
    name: &'static str,
    version: &'static str,
}

#[derive(Serialize)]
struct Verdict {
    decision: crate::review::Decision,
    summary: String,
}

#[derive(Serialize)]
struct Finding<'a> {
    rule: &'a str,
    name: String,
    severity: crate::review::Severity,
    path: &'a str,
    line: Option<u32>,
    end_line: Option<u32>,
    title: String,
    message: String,
    suggestion: Option<String>,
    evidence: Vec<Evidence>,
}

#[derive(Serialize)]
struct Evidence {
    path: String,
    line: u32,
    text: String,
}

#[derive(Serialize)]
struct Error<'a> {
    path: &'a str,
    message: String,
}

#[derive(Serialize)]
struct Question {
    text: String,
}

pub fn render(review: &Review, lang: Lang, out: &mut dyn Write) -> std::io::Result<()> {
    let report = Report {
        tool: Tool {
            name: "payreview",
            version: env!("CARGO_PKG_VERSION"),
        },
        verdict: Verdict {
            decision: review.decision(),
            summary: summary(review, lang),
        },
        findings: review
            .findings
            .iter()
            .map(|f| {
                let texts = resolve(f, lang);
                Finding {
                    rule: f.rule,
                    name: texts.name,
                    severity: f.severity,
                    path: &f.path,
                    line: f.lines.map(|l| l.0),
                    end_line: f.lines.map(|l| l.1),
                    title: texts.title,
                    message: texts.message,
                    suggestion: texts.suggestion,
                    evidence: resolve_evidence(f, lang, fill)
                        .into_iter()
                        .map(|e| Evidence {
                            path: e.path,
                            line: e.line,
                            text: e.text,
                        })
                        .collect(),
                }
            })
            .collect(),
        questions: review
            .questions
            .iter()
            .map(|q| Question {
                text: question_text(q, lang),
            })
            .collect(),
        files: &review.files,
        errors: review
            .errors
            .iter()
            .map(|e| Error {
                path: &e.path,
                message: error_text(e, lang),
            })
            .collect(),
        suppressions: &review.suppressions,
    };
    serde_json::to_writer_pretty(&mut *out, &report)?;
    out.write_all(b"\n")
}
