//! `payreview rules` and `payreview rule ID`: the catalogue in the terminal.

use std::io::Write;

use crate::review::Lang;
use crate::rules::{self, Rule};

/// One line per rule: id, name, default severity, title.
pub fn rules_table(out: &mut dyn Write) -> std::io::Result<()> {
    for rule in rules::ALL {
        let Some(entry) = rules::entry(rule.id) else {
            continue;
        };
        let meta = &entry.meta;
        writeln!(
            out,
            "{:<9} {:<32} {:<10} {}",
            meta.id,
            meta.name,
            meta.severity.as_str(),
            strip_placeholders(&meta.title.en)
        )?;
    }
    Ok(())
}

/// The rule's documentation: title, rationale, bad and good example, in `lang`.
pub fn rule_doc(rule: &Rule, lang: Lang, out: &mut dyn Write) -> std::io::Result<()> {
    let Some(entry) = rules::entry(rule.id) else {
        return Ok(());
    };
    let meta = &entry.meta;
    let (why, bad, good, severity) = match lang {
        Lang::En => ("Why it matters", "Bad", "Good", "default severity"),
        Lang::Ru => (
            "Почему это важно",
            "Плохо",
            "Хорошо",
            "серьёзность по умолчанию",
        ),
    };
    writeln!(
        out,
        "{} {}: {}",
        meta.id,
        meta.name,
        strip_placeholders(meta.title.get(lang))
    )?;
    writeln!(out, "{severity}: {}\n", meta.severity.as_str())?;
    writeln!(out, "{why}:\n{}\n", entry.rationale.get(lang))?;
    writeln!(out, "{bad}:\n{}", entry.bad.code)?;
    writeln!(out, "{good}:\n{}", entry.good.code)?;
    if let Some(suggestion) = &meta.suggestion {
        writeln!(out, "{}", strip_placeholders(suggestion.get(lang)))?;
    }
    Ok(())
}

/// Catalogue texts may hold `{placeholders}` filled per finding; out of context they stay as
/// written, which reads as "the flagged code goes here".
fn strip_placeholders(text: &str) -> String {
    text.to_string()
}
