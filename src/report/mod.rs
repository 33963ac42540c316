//! Rendering a `Review`: one emitter per format, all reading the same resolved texts.
//!
//! Emitters never look at diffs or trees; they turn findings into words through the catalogue
//! (`rules/`) in the requested language, and show code only from the review's `sources`.

mod catalogue;
mod fingerprint;
mod github;
mod gitlab;
mod json;
mod markdown;
mod markup;
mod sarif;
mod text;
mod texts;

pub use crate::review::description::{DescriptionCheck, Unmentioned, check as check_description};
pub use catalogue::{rule_doc, rule_page, rule_page_uri, rules_json, rules_table};
pub use fingerprint::line_hashes;
pub use github::{data as github_data, property as github_property};
pub use sarif::FINGERPRINT_KEY;
pub use texts::{
    Resolved, ResolvedEvidence, question_text, resolve, resolve_evidence, resolve_with,
    severity_word, summary, verdict_words,
};

use std::io::Write;

use crate::config::Format;
use crate::review::{Lang, Review};

/// How to render, beyond format and language.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Colour in the text format (only for a terminal, and never with `NO_COLOR`).
    pub color: bool,
}

/// Writes `review` in `format`, without colour.
pub fn render(
    review: &Review,
    format: Format,
    lang: Lang,
    out: &mut dyn Write,
) -> Result<(), RenderError> {
    render_with(review, format, lang, Options::default(), out)
}

/// Writes `review` in `format` with `options`.
pub fn render_with(
    review: &Review,
    format: Format,
    lang: Lang,
    options: Options,
    out: &mut dyn Write,
) -> Result<(), RenderError> {
    match format {
        Format::Json => json::render(review, lang, out)?,
        Format::Text => text::render(review, lang, options.color, out)?,
        Format::Markdown => markdown::render(review, lang, out)?,
        Format::Sarif => sarif::render(review, lang, out)?,
        Format::Github => github::render(review, lang, out)?,
        Format::Gitlab => gitlab::render(review, lang, out)?,
    }
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
