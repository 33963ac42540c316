//! The words of a review in one language: finding texts from the catalogue with their
//! arguments filled in, verdict words and summary.

use crate::review::{Decision, Finding, Lang, Question, Review, Severity};
use crate::rules::{self, catalogue::fill};

/// A finding's texts in one language.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub name: String,
    pub title: String,
    pub message: String,
    pub suggestion: Option<String>,
}

/// The title, message (with its notes) and suggestion of a finding.
pub fn resolve(finding: &Finding, lang: Lang) -> Resolved {
    let Some(entry) = rules::entry(finding.rule) else {
        return Resolved {
            name: finding.rule.to_string(),
            title: finding.rule.to_string(),
            message: String::new(),
            suggestion: None,
        };
    };
    let meta = &entry.meta;
    let mut message = fill(meta.message.get(lang), &finding.args);
    if !message.ends_with(['.', '!', '?']) {
        message.push('.');
    }
    for note in &finding.notes {
        if let Some(text) = meta.notes.get(*note) {
            message.push(' ');
            message.push_str(&fill(text.get(lang), &finding.args));
        }
    }
    Resolved {
        name: meta.name.clone(),
        title: fill(meta.title.get(lang), &finding.args),
        message,
        suggestion: meta
            .suggestion
            .as_ref()
            .map(|s| fill(s.get(lang), &finding.args)),
    }
}

/// The text of a question.
pub fn question_text(question: &Question, lang: Lang) -> String {
    rules::question(question.id)
        .map(|q| {
            let text = rules::catalogue::optional_segments(q.get(lang), &question.args);
            fill(&text, &question.args)
        })
        .unwrap_or_else(|| question.id.to_string())
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
