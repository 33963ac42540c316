//! The words of a review in one language: finding texts from the catalogue with their
//! arguments filled in, verdict words and summary.

use crate::review::{Decision, Finding, Lang, Question, Review, ReviewError, Severity};
use crate::rules::{self, catalogue::fill};

/// A finding's texts in one language.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub name: String,
    pub title: String,
    pub message: String,
    pub suggestion: Option<String>,
    /// The catalogue's test sketch: the test that would have caught it.
    pub test: Option<String>,
}

/// Fills a catalogue template with a finding's arguments.
pub type Filler = fn(&str, &[(&str, String)]) -> String;

/// Units the rules write into arguments (`≈ 59 s`, `24 h`), in the report's language: they are
/// computed once, in English, whatever the report.
pub fn localized<'a>(
    args: &'a [(&'static str, String)],
    lang: Lang,
) -> std::borrow::Cow<'a, [(&'static str, String)]> {
    match lang {
        Lang::En => std::borrow::Cow::Borrowed(args),
        Lang::Ru => args
            .iter()
            .map(|(k, v)| {
                (
                    *k,
                    units(v, &[("s", "с"), ("min", "мин"), ("h", "ч"), ("d", "дн")]),
                )
            })
            .collect(),
    }
}

/// Replaces each unit of `table` that follows a number and a space and ends a word.
fn units(text: &str, table: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'scan: while let Some(c) = rest.chars().next() {
        if c == ' ' && out.ends_with(|d: char| d.is_ascii_digit()) {
            for (unit, local) in table {
                let after = &rest[1..];
                if let Some(tail) = after.strip_prefix(unit)
                    && !tail.starts_with(|t: char| t.is_alphanumeric() || t == '_')
                {
                    out.push(' ');
                    out.push_str(local);
                    rest = tail;
                    continue 'scan;
                }
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The title, message (with its notes) and suggestion of a finding.
pub fn resolve(finding: &Finding, lang: Lang) -> Resolved {
    resolve_with(finding, lang, fill, fill)
}

/// `resolve` with the filling of one-line texts (title, message) and of multi-line texts
/// (suggestion, test) chosen by the emitter: Markdown escapes what comes from the PR.
pub fn resolve_with(finding: &Finding, lang: Lang, line: Filler, block: Filler) -> Resolved {
    let Some(entry) = rules::entry(finding.rule) else {
        return Resolved {
            name: finding.rule.to_string(),
            title: finding.rule.to_string(),
            message: String::new(),
            suggestion: None,
            test: None,
        };
    };
    let meta = &entry.meta;
    // `[[arg|text]]` keeps `text` only when the rule gave `arg`, in every text of the entry.
    let line = |template: &str, args: &[(&str, String)]| {
        line(&rules::catalogue::optional_segments(template, args), args)
    };
    let block = |template: &str, args: &[(&str, String)]| {
        block(&rules::catalogue::optional_segments(template, args), args)
    };
    let args = localized(&finding.args, lang);
    let chosen = finding
        .notes
        .iter()
        .find_map(|n| meta.messages.get(*n))
        .unwrap_or(&meta.message);
    let mut message = line(chosen.get(lang), &args);
    if !message.ends_with(['.', '!', '?']) {
        message.push('.');
    }
    for note in &finding.notes {
        if let Some(text) = meta.notes.get(*note) {
            message.push(' ');
            message.push_str(&line(text.get(lang), &args));
        }
    }
    Resolved {
        name: meta.name.clone(),
        title: line(
            finding
                .notes
                .iter()
                .find_map(|n| meta.titles.get(*n))
                .unwrap_or(&meta.title)
                .get(lang),
            &args,
        ),
        message,
        suggestion: finding
            .notes
            .iter()
            .find_map(|n| meta.suggestions.get(*n))
            .or(meta.suggestion.as_ref())
            .map(|s| block(s.get(lang), &args)),
        test: meta.test.as_ref().map(|t| block(t.get(lang), &args)),
    }
}

/// A cited place with its text in one language.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedEvidence {
    pub path: String,
    pub line: u32,
    pub text: String,
}

/// The evidence of a finding, each with what it shows (the rule's note `what`, filled with the
/// evidence's arguments over the finding's).
pub fn resolve_evidence(finding: &Finding, lang: Lang, line: Filler) -> Vec<ResolvedEvidence> {
    let notes = rules::entry(finding.rule).map(|e| &e.meta.notes);
    finding
        .evidence
        .iter()
        .map(|e| {
            let mut args = e.args.clone();
            args.extend(finding.args.iter().cloned());
            let args = localized(&args, lang);
            let text = notes
                .and_then(|n| n.get(e.what))
                .map(|t| line(t.get(lang), &args))
                .unwrap_or_default();
            ResolvedEvidence {
                path: e.path.clone(),
                line: e.line,
                text,
            }
        })
        .collect()
}

/// The text of a question.
pub fn question_text(question: &Question, lang: Lang) -> String {
    question_text_with(question, lang, fill)
}

/// `question_text` with the emitter's filling.
pub fn question_text_with(question: &Question, lang: Lang, line: Filler) -> String {
    rules::question(question.id)
        .map(|q| {
            let args = localized(&question.args, lang);
            let text = rules::catalogue::optional_segments(q.get(lang), &args);
            line(&text, &args)
        })
        .unwrap_or_else(|| question.id.to_string())
}

/// What a review could not do, in `lang`: the kind's text in `rules/errors.toml`, or the
/// error's own English words when it has no kind.
pub fn error_text(error: &ReviewError, lang: Lang) -> String {
    match error.kind {
        Some(kind) => kind.text(&error.args, lang),
        None => error.message.clone(),
    }
}

/// The short form of a question, for the verdict's list of unknowns: the question's `short`
/// text in `rules/questions.toml` when it has one, otherwise its first sentence.
pub fn question_short_with(question: &Question, lang: Lang, line: Filler) -> String {
    #[derive(serde::Deserialize)]
    struct Short {
        short: Option<rules::catalogue::Texts>,
    }
    static SHORTS: std::sync::OnceLock<std::collections::BTreeMap<String, Short>> =
        std::sync::OnceLock::new();
    let shorts = SHORTS.get_or_init(|| toml::from_str(rules::QUESTIONS_TOML).unwrap_or_default());
    if let Some(short) = shorts.get(question.id).and_then(|s| s.short.as_ref()) {
        let args = localized(&question.args, lang);
        let text = rules::catalogue::optional_segments(short.get(lang), &args);
        return line(&text, &args);
    }
    first_sentence(&question_text_with(question, lang, line))
}

/// Up to the first `?` or `. ` (a question's own sentence, without its sub-points).
fn first_sentence(text: &str) -> String {
    let end = text
        .char_indices()
        .find(|&(i, c)| {
            c == '?' || (c == '.' && text.get(i + 1..).is_some_and(|r| r.starts_with(' ')))
        })
        .map_or(text.len(), |(i, c)| i + c.len_utf8());
    text.get(..end).unwrap_or(text).trim().to_string()
}

pub fn severity_word(severity: Severity, lang: Lang) -> &'static str {
    match (severity, lang) {
        (Severity::Blocker, Lang::En) => "blocker",
        (Severity::Important, Lang::En) => "important",
        (Severity::Nit, Lang::En) => "nit",
        (Severity::Info, Lang::En) => "info",
        (Severity::Blocker, Lang::Ru) => "блокер",
        (Severity::Important, Lang::Ru) => "важно",
        (Severity::Nit, Lang::Ru) => "мелочь",
        (Severity::Info, Lang::Ru) => "к сведению",
    }
}

/// The decision in words, as a reviewer says it.
pub fn verdict_words(decision: Decision, lang: Lang) -> &'static str {
    match (decision, lang) {
        (Decision::RequestChanges, Lang::En) => "Merge after fixes",
        (Decision::Comment, Lang::En) => "Approve, with comments",
        (Decision::Approve, Lang::En) => "Approve",
        (Decision::RequestChanges, Lang::Ru) => "Мержить после правок",
        (Decision::Comment, Lang::Ru) => "Можно мержить, есть замечания",
        (Decision::Approve, Lang::Ru) => "Можно мержить",
    }
}

/// One or two sentences naming the blockers, or saying there are none.
pub fn summary(review: &Review, lang: Lang) -> String {
    let blockers: Vec<&Finding> = review
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Blocker)
        .collect();
    let others = review.findings.len() - blockers.len();
    if blockers.is_empty() {
        return match (others, lang) {
            (0, Lang::En) => "No payment-safety problems found in this change.".to_string(),
            (0, Lang::Ru) => "Проблем с безопасностью платежей в изменении не найдено.".to_string(),
            (n, Lang::En) => format!("No blockers; {n} {} worth a look.", plural_en(n, "comment")),
            (n, Lang::Ru) => format!(
                "Блокеров нет; {n} {} стоит посмотреть.",
                plural_ru(n, ["замечание", "замечания", "замечаний"])
            ),
        };
    }
    let titles: Vec<String> = blockers
        .iter()
        .map(|f| {
            let title = resolve(f, lang).title;
            format!(
                "{title} ({}{})",
                f.path,
                f.lines.map(|(a, _)| format!(":{a}")).unwrap_or_default()
            )
        })
        .collect();
    let n = blockers.len();
    match lang {
        Lang::En => format!(
            "{n} {}: {}. Each has to be fixed before this change can move money safely.",
            plural_en(n, "blocker"),
            titles.join("; ")
        ),
        Lang::Ru => format!(
            "{n} {}: {}. Каждый нужно исправить, прежде чем это изменение сможет безопасно проводить платежи.",
            plural_ru(n, ["блокер", "блокера", "блокеров"]),
            titles.join("; ")
        ),
    }
}

fn plural_en(n: usize, word: &str) -> String {
    if n == 1 {
        word.to_string()
    } else {
        format!("{word}s")
    }
}

/// Russian plural: 1 блокер, 2–4 блокера, 5–20 блокеров, 21 блокер…
pub fn plural_ru(n: usize, forms: [&'static str; 3]) -> &'static str {
    let (tens, ones) = (n % 100, n % 10);
    if (11..=14).contains(&tens) {
        forms[2]
    } else if ones == 1 {
        forms[0]
    } else if (2..=4).contains(&ones) {
        forms[1]
    } else {
        forms[2]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_with_a_suggestion_of_its_own_chooses_it() {
        let finding = |note: &'static str| Finding {
            rule: "TEST001",
            severity: crate::review::Severity::Important,
            path: "tests/test_pay.py".to_string(),
            lines: Some((3, 5)),
            args: vec![("client", "requests".to_string())],
            notes: vec![note],
            function: "test_pay".to_string(),
            key: String::new(),
            evidence: Vec::new(),
            point: None,
        };
        let meta = &rules::entry("TEST001").expect("TEST001 is catalogued").meta;
        let http = meta
            .suggestions
            .get("http")
            .expect("TEST001 has an HTTP fix");
        let default = meta.suggestion.as_ref().expect("TEST001 has a fix");
        for lang in [Lang::En, Lang::Ru] {
            let for_http = resolve(&finding("http"), lang).suggestion;
            let for_cache = resolve(&finding("cache"), lang).suggestion;
            assert_eq!(
                for_http.as_deref(),
                Some(fill(http.get(lang), &[]).as_str())
            );
            assert_eq!(
                for_cache.as_deref(),
                Some(fill(default.get(lang), &[]).as_str())
            );
        }
    }

    #[test]
    fn units_after_numbers_are_russian_and_nothing_else_changes() {
        let args = vec![
            ("worst", "3 × 15 s + 2 + 4 + 8 ≈ 59 s".to_string()),
            ("ttl", "24 h, 5 min, 2 d, 0.5 s.".to_string()),
            (
                "code",
                "time.sleep(2 ** attempt) # 2 secs, 3 hours, ids 5 s_".to_string(),
            ),
        ];
        let ru = localized(&args, Lang::Ru);
        assert_eq!(ru[0].1, "3 × 15 с + 2 + 4 + 8 ≈ 59 с");
        assert_eq!(ru[1].1, "24 ч, 5 мин, 2 дн, 0.5 с.");
        assert_eq!(ru[2].1, args[2].1);
        assert_eq!(localized(&args, Lang::En)[0].1, args[0].1);
    }

    #[test]
    fn russian_plurals() {
        let forms = ["блокер", "блокера", "блокеров"];
        let got: Vec<&str> = [1, 2, 5, 11, 21, 22, 25]
            .iter()
            .map(|&n| plural_ru(n, forms))
            .collect();
        assert_eq!(
            got,
            [
                "блокер",
                "блокера",
                "блокеров",
                "блокеров",
                "блокер",
                "блокера",
                "блокеров"
            ]
        );
    }
}
