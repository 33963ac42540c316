//! `--format text`: the terminal view. Each finding as a miette report with the new-side source
//! and the span it is about; a plain block when the review has no source for the file (not
//! Python, deleted). Questions, errors, then a one-line verdict last.

use std::fmt;
use std::io::Write;

use miette::{
    Diagnostic, GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceCode,
    SourceSpan,
};

use super::texts::{Resolved, question_text, resolve, severity_word, summary, verdict_words};
use crate::review::{Finding, Lang, Review, Severity, SourceFile};

/// Wide enough for a code line and its gutter; fixed, so the output does not depend on the
/// terminal it was rendered for.
const WIDTH: usize = 100;

pub fn render(
    review: &Review,
    lang: Lang,
    color: bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let theme = if color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_width(WIDTH)
        .with_links(false)
        .with_context_lines(1);
    for finding in &review.findings {
        let texts = resolve(finding, lang);
        match snippet(finding, review.sources.get(&finding.path), &texts, lang) {
            Some(report) => {
                let mut rendered = String::new();
                if handler.render_report(&mut rendered, &report).is_ok() {
                    writeln!(out, "{}", rendered.trim_end())?;
                    writeln!(out)?;
                    continue;
                }
                plain(finding, &texts, lang, out)?;
            }
            None => plain(finding, &texts, lang, out)?,
        }
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

/// The non-graphical block: place, severity, rule, title, message, suggestion.
fn plain(
    finding: &Finding,
    texts: &Resolved,
    lang: Lang,
    out: &mut dyn Write,
) -> std::io::Result<()> {
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
    for e in super::texts::resolve_evidence(finding, lang, crate::rules::catalogue::fill) {
        writeln!(out, "  = {}:{} {}", e.path, e.line, e.text)?;
    }
    if let Some(suggestion) = &texts.suggestion {
        for line in suggestion.lines() {
            writeln!(out, "  | {line}")?;
        }
    }
    writeln!(out)
}

/// A finding as a miette diagnostic over its file's new-side text.
struct Snippet {
    title: String,
    code: String,
    severity: miette::Severity,
    help: String,
    source: NamedSource<String>,
    span: SourceSpan,
    label: String,
}

fn snippet(
    finding: &Finding,
    source: Option<&SourceFile>,
    texts: &Resolved,
    lang: Lang,
) -> Option<Snippet> {
    let (start, end) = finding.lines?;
    let source = source?;
    let span = line_span(&source.text, start, end)?;
    let mut help = texts.message.clone();
    for e in super::texts::resolve_evidence(finding, lang, crate::rules::catalogue::fill) {
        help.push_str(&format!("\n= {}:{} {}", e.path, e.line, e.text));
    }
    if let Some(suggestion) = &texts.suggestion {
        help.push_str("\n\n");
        help.push_str(&strip_fences(suggestion));
    }
    Some(Snippet {
        title: texts.title.clone(),
        code: format!("{} {}", finding.rule, severity_word(finding.severity, lang)),
        severity: match finding.severity {
            Severity::Blocker => miette::Severity::Error,
            Severity::Important => miette::Severity::Warning,
            Severity::Nit | Severity::Info => miette::Severity::Advice,
        },
        help,
        source: NamedSource::new(finding.path.clone(), source.text.clone()),
        span,
        label: severity_word(finding.severity, lang).to_string(),
    })
}

/// Byte span of new-side lines `start..=end` (1-based), without the last newline.
fn line_span(text: &str, start: u32, end: u32) -> Option<SourceSpan> {
    let (start, end) = (usize::try_from(start).ok()?, usize::try_from(end).ok()?);
    let mut offset = 0;
    let mut from = None;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let number = n + 1;
        if number == start {
            from = Some(offset);
        }
        if number == end {
            let to = offset + line.trim_end_matches(['\n', '\r']).len();
            let from = from?;
            return Some(SourceSpan::new(from.into(), to.saturating_sub(from)));
        }
        offset += line.len();
    }
    None
}

/// Suggestions are Markdown; in a terminal the fences are noise, the code is indented instead.
fn strip_fences(markdown: &str) -> String {
    let mut in_code = false;
    let mut out = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        out.push(if in_code {
            format!("    {line}")
        } else {
            line.to_string()
        });
    }
    out.join("\n")
}

impl fmt::Debug for Snippet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.title)
    }
}

impl fmt::Display for Snippet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.title)
    }
}

impl std::error::Error for Snippet {}

impl Diagnostic for Snippet {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(&self.code))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(self.severity)
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(&self.help))
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(&self.source)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(std::iter::once(LabeledSpan::new_with_span(
            Some(self.label.clone()),
            self.span,
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_cover_whole_lines() {
        let text = "a\nbb\nccc\n";
        let span = line_span(text, 2, 3).expect("lines exist");
        assert_eq!((span.offset(), span.len()), (2, 6));
        assert!(line_span(text, 4, 4).is_none());
    }
}
