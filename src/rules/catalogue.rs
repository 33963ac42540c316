//! The rule catalogue: what people read about each rule, from `rules/<family>/<ID>.md`.
//!
//! Each file is TOML front matter between `+++` lines (id, name, severity, texts in English and
//! Russian) followed by Markdown sections: `## Rationale` (`- en:` / `- ru:` items), `## Bad`
//! and `## Good` (one `python` block each). The files are compiled in; `tests/catalogue.rs`
//! parses every one, so the `expect`s below cannot fire in a released binary.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::review::{Lang, Severity};

/// A text in both output languages.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Texts {
    pub en: String,
    pub ru: String,
}

impl Texts {
    pub fn get(&self, lang: Lang) -> &str {
        match lang {
            Lang::En => &self.en,
            Lang::Ru => &self.ru,
        }
    }
}

/// The front matter of a catalogue entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Meta {
    pub id: String,
    pub name: String,
    pub severity: Severity,
    pub title: Texts,
    pub message: Texts,
    /// The fix, as prose or code; may use the same `{placeholders}` as the message.
    pub suggestion: Option<Texts>,
    /// A short pytest sketch of the test that would have caught the problem (the Markdown
    /// report's "Tests worth adding").
    pub test: Option<Texts>,
    /// Extra sentences a rule appends to its message when they apply (`notes.annotation`).
    #[serde(default)]
    pub notes: BTreeMap<String, Texts>,
    /// A finding's title when it carries the note of that name (`titles.decoded`): what the
    /// rule learned changes what the comment is about, not only what it adds. Lists and docs
    /// show `title`.
    #[serde(default)]
    pub titles: BTreeMap<String, Texts>,
    /// A finding's message when it carries the note of that name (`messages.read_none`): where
    /// the rule's usual sentence would say something untrue of the case. Docs show `message`.
    #[serde(default)]
    pub messages: BTreeMap<String, Texts>,
    /// A finding's suggestion when it carries the note of that name (`suggestions.http`): the
    /// fix for an HTTP service is not the one for a cache. Docs show `suggestion`.
    #[serde(default)]
    pub suggestions: BTreeMap<String, Texts>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// `very-high`, `high`, `medium` or `low` (SARIF's `precision`).
    pub precision: String,
}

/// A parsed catalogue entry.
#[derive(Debug, Clone)]
pub struct Entry {
    pub meta: Meta,
    pub rationale: Texts,
    pub bad: Example,
    pub good: Example,
    /// The whole Markdown body, for `payreview rule ID` and SARIF help.
    pub body: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("catalogue entry {file}: {message}")]
pub struct CatalogueError {
    pub file: String,
    pub message: String,
}

/// Parses one catalogue file.
pub fn parse_entry(file: &str, source: &str) -> Result<Entry, CatalogueError> {
    let err = |message: String| CatalogueError {
        file: file.to_string(),
        message,
    };
    let rest = source
        .strip_prefix("+++\n")
        .ok_or_else(|| err("does not start with a `+++` line".into()))?;
    let (front, body) = rest
        .split_once("\n+++\n")
        .ok_or_else(|| err("front matter is not closed by `+++`".into()))?;
    let meta: Meta = toml::from_str(front).map_err(|e| err(e.to_string()))?;
    let rationale = Texts {
        en: item(section(body, "Rationale"), "en")
            .ok_or_else(|| err("no `- en:` rationale".into()))?,
        ru: item(section(body, "Rationale"), "ru")
            .ok_or_else(|| err("no `- ru:` rationale".into()))?,
    };
    let bad = example(section(body, "Bad")).ok_or_else(|| err("no example under ## Bad".into()))?;
    let good =
        example(section(body, "Good")).ok_or_else(|| err("no example under ## Good".into()))?;
    Ok(Entry {
        meta,
        rationale,
        bad,
        good,
        body: body.trim().to_string(),
    })
}

/// The text under `## heading`, up to the next `## `.
fn section<'a>(body: &'a str, heading: &str) -> &'a str {
    let marker = format!("## {heading}\n");
    let Some(start) = body.find(&marker) else {
        return "";
    };
    let rest = &body[start + marker.len()..];
    let end = rest.find("\n## ").map_or(rest.len(), |i| i + 1);
    &rest[..end]
}

/// A `- lang: text` item, continuation lines (indented) joined with spaces.
fn item(section: &str, lang: &str) -> Option<String> {
    let prefix = format!("- {lang}:");
    let mut lines = section.lines();
    let first = lines.find(|l| l.starts_with(&prefix))?;
    let mut text = first[prefix.len()..].trim().to_string();
    for line in lines {
        if !line.starts_with("  ") {
            break;
        }
        text.push(' ');
        text.push_str(line.trim());
    }
    Some(text)
}

/// A Bad or Good example: Python code reviewed as a newly added file, or a diff reviewed as it
/// is (in a repository holding `repo` files when there are any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    /// `python` or `diff`.
    pub lang: String,
    pub code: String,
    /// ```` ```python repo=app/x.py ```` blocks: files of the repository the diff applies to.
    pub repo: Vec<(String, String)>,
    /// A ```` ```text description ```` block: the pull request's description.
    pub description: Option<String>,
}

impl Example {
    /// What a reader is shown of the example, as `(language, text)` blocks: the pull request's
    /// description first when it has one (it is what tells Bad from Good for some rules).
    pub fn shown(&self) -> Vec<(&str, &str)> {
        self.description
            .iter()
            .map(|d| ("text", d.as_str()))
            .chain(std::iter::once((self.lang.as_str(), self.code.as_str())))
            .collect()
    }
}

/// The fenced code blocks of a section: `(info string, code)`.
fn code_blocks(section: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = section;
    while let Some(start) = rest.find("```") {
        let after_fence = &rest[start + 3..];
        let Some(info_end) = after_fence.find('\n') else {
            break;
        };
        let info = after_fence[..info_end].trim().to_string();
        let code = &after_fence[info_end + 1..];
        let Some(end) = code.find("\n```") else {
            break;
        };
        out.push((info, code[..=end].to_string()));
        rest = &code[end + 4..];
    }
    out
}

fn example(section: &str) -> Option<Example> {
    let blocks = code_blocks(section);
    let (lang, code) = blocks
        .iter()
        .find(|(info, _)| info == "python" || info == "diff")?
        .clone();
    let repo = blocks
        .iter()
        .filter_map(|(info, code)| {
            let path = info.strip_prefix("python repo=")?;
            Some((path.to_string(), code.clone()))
        })
        .collect();
    let description = blocks
        .iter()
        .find(|(info, _)| info == "text description")
        .map(|(_, text)| text.clone());
    Some(Example {
        lang,
        code,
        repo,
        description,
    })
}

/// Keeps a `[[name|text]]` segment's text when `args` gives `name` a non-empty value, and drops
/// it otherwise: one question or message can then cover what several rules know.
pub fn optional_segments(template: &str, args: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("[[") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let (Some(bar), Some(close)) = (after.find('|'), after.find("]]")) else {
            out.push_str("[[");
            rest = after;
            continue;
        };
        if bar > close {
            out.push_str("[[");
            rest = after;
            continue;
        }
        let name = &after[..bar];
        if args.iter().any(|(k, v)| *k == name && !v.is_empty()) {
            out.push_str(&after[bar + 1..close]);
        }
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    out
}

/// Replaces `{name}` placeholders with `args`; unknown ones stay visible so tests catch them.
pub fn fill(template: &str, args: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close)
                if after[..close]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                let name = &after[..close];
                match args.iter().find(|(k, _)| *k == name) {
                    Some((_, value)) => out.push_str(value),
                    None => out.push_str(&rest[open..open + close + 2]),
                }
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_segments_follow_the_arguments() {
        let t = "Q?[[a| A {a}.]][[b| B.]]";
        assert_eq!(optional_segments(t, &[("a", "1".to_string())]), "Q? A {a}.");
        assert_eq!(
            optional_segments(t, &[("b", "x".to_string()), ("a", String::new())]),
            "Q? B."
        );
        assert_eq!(optional_segments("[[x]] [[", &[]), "[[x]] [[");
    }

    #[test]
    fn fill_replaces_known_placeholders_and_keeps_code_braces() {
        let args = [("key", "idemp:1".to_string())];
        assert_eq!(fill("`{key}` set", &args), "`idemp:1` set");
        assert_eq!(
            fill("f\"{order_id}\" {missing}", &args),
            "f\"{order_id}\" {missing}"
        );
        assert_eq!(fill("{\"a\": 1}", &args), "{\"a\": 1}");
    }
}
