//! Rendering a `Review`: one emitter per format, all reading the same resolved texts.
//!
//! Emitters never look at diffs or trees; they turn findings into words through the catalogue
//! (`rules/`) in the requested language.

mod catalogue;
mod json;
mod text;
mod texts;

pub use catalogue::{rule_doc, rules_table};
pub use texts::{Resolved, question_text, resolve, severity_word, summary, verdict_words};

use std::io::Write;

use crate::config::Format;
use crate::review::{Lang, Review};

/// Writes `review` in `format`. `Err(None)` when the format is not available yet.
pub fn render(
    review: &Review,
    format: Format,
    lang: Lang,
    out: &mut dyn Write,
) -> Result<(), RenderError> {
    match format {
        Format::Json => json::render(review, lang, out)?,
        Format::Text => text::render(review, lang, out)?,
        Format::Markdown | Format::Sarif | Format::Github => {
            return Err(RenderError::NotYet(format));
        }
    }
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("--format {0:?} is not available yet")]
    NotYet(Format),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
