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
            meta.title.en
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
    writeln!(out, "{} {}: {}", meta.id, meta.name, meta.title.get(lang))?;
    writeln!(out, "{severity}: {}\n", meta.severity.as_str())?;
    writeln!(out, "{why}:\n{}\n", entry.rationale.get(lang))?;
    for (label, example) in [(bad, &entry.bad), (good, &entry.good)] {
        writeln!(out, "{label}:")?;
        for (_, code) in example.shown() {
            writeln!(out, "{code}")?;
        }
    }
    if let Some(suggestion) = &meta.suggestion {
        writeln!(out, "{}", as_template(suggestion.get(lang)))?;
    }
    Ok(())
}

/// A suggestion as a rule's page shows it, with no finding to fill it in: `{fix}` in its prose
/// becomes `<fix>`, which reads as a placeholder. Code blocks keep their braces (f-strings).
fn as_template(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        if in_code {
            out.push_str(line);
            continue;
        }
        let mut rest = line;
        while let Some(open) = rest.find('{') {
            let (before, after) = rest.split_at(open);
            out.push_str(before);
            let name_end = after
                .get(1..)
                .and_then(|a| a.find('}'))
                .map(|e| e + 1)
                .filter(|&e| {
                    let name = after.get(1..e).unwrap_or("");
                    !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                });
            match name_end {
                Some(e) => {
                    out.push('<');
                    out.push_str(after.get(1..e).unwrap_or(""));
                    out.push('>');
                    rest = after.get(e + 1..).unwrap_or("");
                }
                None => {
                    out.push('{');
                    rest = after.get(1..).unwrap_or("");
                }
            }
        }
        out.push_str(rest);
    }
    out
}

/// Where a rule's rendered page lives (`docs/rules/ID.md`, generated from `rules/`).
pub fn rule_page_uri(id: &str) -> String {
    format!(
        "{}/blob/main/docs/rules/{id}.md",
        env!("CARGO_PKG_REPOSITORY")
    )
}

/// A rule's page for `docs/rules/ID.md`: the catalogue entry in both languages, as Markdown.
/// `tests/docs.rs` keeps the committed pages equal to this.
pub fn rule_page(rule: &Rule) -> String {
    let Some(entry) = rules::entry(rule.id) else {
        return String::new();
    };
    let meta = &entry.meta;
    let mut page = format!(
        "<!-- Generated from rules/ by `UPDATE_DOCS=1 cargo test --test docs`; do not edit. -->\n# {} {}\n\n",
        meta.id, meta.name
    );
    page.push_str(&format!(
        "Default severity: **{}** · precision: {} · tags: {}\n\n",
        meta.severity.as_str(),
        meta.precision,
        meta.tags.join(", ")
    ));
    for (lang, heading, why, bad, good) in [
        (Lang::En, "English", "Why it matters", "Bad", "Good"),
        (Lang::Ru, "Русский", "Почему это важно", "Плохо", "Хорошо"),
    ] {
        page.push_str(&format!("## {heading}\n\n**{}**\n\n", meta.title.get(lang)));
        page.push_str(&format!("### {why}\n\n{}\n\n", entry.rationale.get(lang)));
        if let Some(suggestion) = &meta.suggestion {
            page.push_str(&format!("{}\n\n", as_template(suggestion.get(lang))));
        }
        for (label, example) in [(bad, &entry.bad), (good, &entry.good)] {
            page.push_str(&format!("### {label}\n\n"));
            for (lang, code) in example.shown() {
                page.push_str(&format!("```{lang}\n{code}```\n\n"));
            }
        }
    }
    page.trim_end().to_string() + "\n"
}

/// `payreview rules --format json`: id, name, severity and title of every rule.
pub fn rules_json(out: &mut dyn Write) -> std::io::Result<()> {
    let rows: Vec<serde_json::Value> = rules::ALL
        .iter()
        .filter_map(|r| rules::entry(r.id))
        .map(|e| {
            serde_json::json!({
                "id": e.meta.id,
                "name": e.meta.name,
                "severity": e.meta.severity.as_str(),
                "title": e.meta.title.en,
            })
        })
        .collect();
    serde_json::to_writer_pretty(&mut *out, &rows)?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::as_template;

    #[test]
    fn placeholders_in_prose_read_as_placeholders_and_code_keeps_its_braces() {
        let text = "Bound the read: `{fix}`, not {fix_b}.\n\n```python\nurl = f\"/p/{payment_id}\"\n```\nA {} set, {Upper} and {a-b} stay.";
        assert_eq!(
            as_template(text),
            "Bound the read: `<fix>`, not <fix_b>.\n\n```python\nurl = f\"/p/{payment_id}\"\n```\nA {} set, {Upper} and {a-b} stay."
        );
    }
}
