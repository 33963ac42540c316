//! `--format github`: GitHub Actions workflow commands, one annotation per finding.
//!
//! GitHub shows at most 10 error and 10 warning annotations per step (and as many notices), so
//! blockers go first as errors, important findings as warnings, nits as notices, and a last
//! notice says what did not fit. Every value is escaped the way the runner unescapes it, so a
//! message from the PR cannot end the command and start another.

use std::io::Write;

use super::texts::{plural_ru, resolve, severity_word, verdict_words};
use crate::review::{Finding, Lang, Review, Severity};

/// Annotations GitHub shows per step and kind.
const PER_KIND: usize = 10;

pub fn render(review: &Review, lang: Lang, out: &mut dyn Write) -> std::io::Result<()> {
    let mut ordered: Vec<&Finding> = review.findings.iter().collect();
    ordered.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then_with(|| (&a.path, a.lines).cmp(&(&b.path, b.lines)))
    });
    let mut shown = [0usize; 3];
    let mut hidden = Vec::new();
    for finding in ordered {
        let (kind, slot) = command(finding.severity);
        // One notice is kept for the summary.
        let room = if slot == 2 { PER_KIND - 1 } else { PER_KIND };
        let Some(count) = shown.get_mut(slot) else {
            continue;
        };
        if *count >= room {
            hidden.push(finding);
            continue;
        }
        *count += 1;
        annotation(out, kind, finding, lang)?;
    }
    writeln!(out, "::notice::{}", data(&summary(review, &hidden, lang)))
}

/// The workflow command and its slot in the per-kind limits.
fn command(severity: Severity) -> (&'static str, usize) {
    match severity {
        Severity::Blocker => ("error", 0),
        Severity::Important => ("warning", 1),
        Severity::Nit | Severity::Info => ("notice", 2),
    }
}

fn annotation(out: &mut dyn Write, kind: &str, f: &Finding, lang: Lang) -> std::io::Result<()> {
    let texts = resolve(f, lang);
    let mut props = vec![format!("file={}", property(&f.path))];
    if let Some((start, end)) = f.lines {
        props.push(format!("line={start}"));
        props.push(format!("endLine={end}"));
    }
    props.push(format!(
        "title={}",
        property(&format!(
            "{} {}: {}",
            f.rule,
            severity_word(f.severity, lang),
            texts.title
        ))
    ));
    writeln!(
        out,
        "::{kind} {}::{}",
        props.join(","),
        data(&texts.message)
    )
}

/// The verdict, and the findings that did not fit, by place.
fn summary(review: &Review, hidden: &[&Finding], lang: Lang) -> String {
    let verdict = verdict_words(review.decision(), lang);
    if hidden.is_empty() {
        return format!("payreview: {verdict}.");
    }
    let places: Vec<String> = hidden
        .iter()
        .map(|f| {
            let at = f.lines.map(|(a, _)| format!(":{a}")).unwrap_or_default();
            format!("{} {}{at}", f.rule, f.path)
        })
        .collect();
    match lang {
        Lang::En => format!(
            "payreview: {verdict}. {} more findings did not fit in the annotations GitHub shows: {}. The Markdown or SARIF report has all of them.",
            hidden.len(),
            places.join(", ")
        ),
        Lang::Ru => format!(
            "payreview: {verdict}. В аннотации GitHub не поместилось ещё {} {}: {}. Все они есть в отчёте Markdown или SARIF.",
            hidden.len(),
            plural_ru(hidden.len(), ["замечание", "замечания", "замечаний"]),
            places.join(", ")
        ),
    }
}

/// A command's message: `%`, CR and LF escaped, as the runner's `escapeData` does.
pub fn data(value: &str) -> String {
    value
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A command's property: also `:` and `,`, which would end the value.
pub fn property(value: &str) -> String {
    data(value).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_the_runner() {
        assert_eq!(data("50%\r\n::x"), "50%25%0D%0A::x");
        assert_eq!(property("a:b,c%\n"), "a%3Ab%2Cc%25%0A");
    }
}
