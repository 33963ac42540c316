//! `--format text`: the terminal view. Each finding as a miette report with the new-side source
//! and the span it is about; a plain block when the review has no source for the file (not
//! Python, deleted). Questions, errors, then a one-line verdict last.

use std::fmt;
use std::io::Write;

use std::collections::HashMap;

use miette::{
    Diagnostic, GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteError,
    MietteSpanContents, SourceCode, SourceSpan, SpanContents,
};

use super::texts::{
    Resolved, error_text, question_text, resolve, severity_word, summary, verdict_words,
};
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
    // Line starts of each file, found once: a finding then costs its own lines, not its file.
    let mut starts: HashMap<&str, Vec<usize>> = HashMap::new();
    for finding in &review.findings {
        let texts = resolve(finding, lang);
        let source = review.sources.get(&finding.path).map(|source| {
            let starts = starts
                .entry(finding.path.as_str())
                .or_insert_with(|| line_starts(&source.text));
            (source, starts.as_slice())
        });
        match snippet(finding, source, &texts, lang) {
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
        writeln!(out, "! {}: {}", error.path, error_text(error, lang))?;
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
    source: Excerpt,
    span: SourceSpan,
    label: String,
}

fn snippet(
    finding: &Finding,
    source: Option<(&SourceFile, &[usize])>,
    texts: &Resolved,
    lang: Lang,
) -> Option<Snippet> {
    let (start, end) = finding.lines?;
    let (source, starts) = source?;
    let span = line_span(&source.text, starts, start, end)?;
    let excerpt = Excerpt::around(finding.path.clone(), &source.text, starts, start, end)?;
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
        source: excerpt,
        span,
        label: severity_word(finding.severity, lang).to_string(),
    })
}

/// Byte offset of the start of each line.
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .filter(|&i| i < text.len())
        .collect()
}

/// Byte range of line `n` (1-based) without its line break.
fn line_range(text: &str, starts: &[usize], n: u32) -> Option<std::ops::Range<usize>> {
    let i = usize::try_from(n).ok()?.checked_sub(1)?;
    let from = *starts.get(i)?;
    let to = starts.get(i + 1).copied().unwrap_or(text.len());
    let line = text.get(from..to)?;
    Some(from..from + line.trim_end_matches(['\n', '\r']).len())
}

/// Byte span of new-side lines `start..=end` (1-based), without the last newline.
fn line_span(text: &str, starts: &[usize], start: u32, end: u32) -> Option<SourceSpan> {
    let from = line_range(text, starts, start)?.start;
    let to = line_range(text, starts, end)?.end;
    Some(SourceSpan::new(from.into(), to.saturating_sub(from)))
}

/// Lines shown around a span: more than the handler's one line of context, so it never asks for
/// a line the excerpt lacks.
const EXCERPT_CONTEXT: u32 = 3;

/// The lines of a file around a finding, standing in for the whole file: miette is handed only
/// these, with their place in the file, so line numbers and spans come out as in the file
/// while a file with thousands of findings is not copied once per finding.
struct Excerpt {
    name: String,
    text: String,
    /// Byte offset of `text` in the file.
    offset: usize,
    /// Zero-based line number of `text`'s first line in the file.
    first_line: usize,
}

impl Excerpt {
    fn around(name: String, text: &str, starts: &[usize], start: u32, end: u32) -> Option<Self> {
        let first = start.saturating_sub(EXCERPT_CONTEXT).max(1);
        let last = u32::try_from(starts.len())
            .unwrap_or(u32::MAX)
            .min(end.saturating_add(EXCERPT_CONTEXT));
        let from = line_range(text, starts, first)?.start;
        let last_start = *starts.get(usize::try_from(last).ok()?.checked_sub(1)?)?;
        let to = starts
            .get(usize::try_from(last).ok()?)
            .copied()
            .unwrap_or(text.len())
            .max(last_start);
        Some(Excerpt {
            name,
            text: text.get(from..to)?.to_string(),
            offset: from,
            first_line: usize::try_from(first).ok()? - 1,
        })
    }
}

impl SourceCode for Excerpt {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let local = span
            .offset()
            .checked_sub(self.offset)
            .ok_or(MietteError::OutOfBounds)?;
        let inner = self.text.read_span(
            &SourceSpan::new(local.into(), span.len()),
            context_lines_before,
            context_lines_after,
        )?;
        let shown = SourceSpan::new(
            (inner.span().offset() + self.offset).into(),
            inner.span().len(),
        );
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            inner.data(),
            shown,
            inner.line() + self.first_line,
            inner.column(),
            // miette counts lines from the start of the source, like `line`.
            inner.line_count() + self.first_line,
        )))
    }
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
        let text = "a\nbb\r\nccc\n";
        let starts = line_starts(text);
        assert_eq!(starts, [0, 2, 6]);
        let span = line_span(text, &starts, 2, 3).expect("lines exist");
        assert_eq!((span.offset(), span.len()), (2, 7));
        assert!(line_span(text, &starts, 4, 4).is_none());
        assert!(line_span(text, &starts, 0, 1).is_none());
    }

    #[test]
    fn an_excerpt_reads_like_the_whole_file() {
        let text: String = (1..=40).map(|n| format!("line {n}\n")).collect();
        let starts = line_starts(&text);
        let span = line_span(&text, &starts, 20, 21).expect("lines exist");
        let excerpt = Excerpt::around("f.py".into(), &text, &starts, 20, 21).expect("excerpt");
        let whole = text.read_span(&span, 1, 1).expect("whole file");
        let part = excerpt.read_span(&span, 1, 1).expect("excerpt");
        assert_eq!(part.data(), whole.data());
        assert_eq!(part.line(), whole.line());
        assert_eq!(part.column(), whole.column());
        assert_eq!(part.span(), whole.span());
        assert_eq!(part.line_count(), whole.line_count());
        assert_eq!(part.name(), Some("f.py"));
        // At the edges of the file too.
        for (a, b) in [(1, 1), (40, 40)] {
            let span = line_span(&text, &starts, a, b).expect("lines exist");
            let excerpt = Excerpt::around("f.py".into(), &text, &starts, a, b).expect("excerpt");
            let whole = text.read_span(&span, 1, 1).expect("whole file");
            let part = excerpt.read_span(&span, 1, 1).expect("excerpt");
            assert_eq!((part.data(), part.line()), (whole.data(), whole.line()));
        }
    }
}
