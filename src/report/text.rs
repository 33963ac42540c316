//! `--format text`: the terminal view, one block per finding and the verdict last.

use std::io::Write;

use super::texts::{question_text, resolve, severity_word, summary, verdict_words};
use crate::review::{Lang, Review};

pub fn render(review: &Review, lang: Lang, out: &mut dyn Write) -> std::io::Result<()> {
    for finding in &review.findings {
        let texts = resolve(finding, lang);
        let place = match finding.lines {
            Some((a, b)) if a == b => format!("{}:{a}", finding.path),
            Some((a, b)) => format!("{}:{a}-{b}", finding.path),
            None => finding.path.clone(),
        };
        writeln!(
            out,
            "{place} {} [{}] {}",
            severity_word(finding.severity, lang),
            finding.rule,
            texts.title
        )?;
        writeln!(out, "  {}", texts.message)?;
        if let Some(suggestion) = texts.suggestion {
            for line in suggestion.lines() {
                writeln!(out, "  | {line}")?;
            }
        }
        writeln!(out)?;
    }
    for (n, question) in review.questions.iter().enumerate() {
        writeln!(out, "? {}. {}", n + 1, question_text(question, lang))?;
    }
    for error in &review.errors {
        writeln!(out, "! {}: {}", error.path, error.message)?;
    }
    writeln!(
        out,
        "{}. {}",
        verdict_words(review.decision(), lang),
        summary(review, lang)
    )
}
