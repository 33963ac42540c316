//! `DiffError`: why a diff could not be read, and which of its lines is to blame.
//!
//! Owns the error kinds, their stable codes (`payreview::diff::<kind>`) and the miette report
//! (the whole diff as source, the offending line labelled). The parser works with the cheap
//! [`DiffErrorKind`] and a line number; the source text is copied only when an error leaves
//! [`parse_patch`](super::parse_patch).

use miette::{NamedSource, SourceSpan};

/// A diff that cannot be read. `line()` is the 1-based diff line it points at, `kind()` says what
/// is wrong, and the miette report shows that line of the diff.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("diff line {line}: {kind}")]
#[diagnostic(forward(kind))]
pub struct DiffError {
    /// Boxed to keep `Result<Patch, DiffError>` small on the happy path.
    kind: Box<DiffErrorKind>,
    line: usize,
    #[source_code]
    src: NamedSource<String>,
    #[label("{label}")]
    at: SourceSpan,
    label: &'static str,
}

impl DiffError {
    /// Builds the report: decodes the input once (lossily, as the parser does line by line) and
    /// finds `line` in the decoded text, so the span is right even after U+FFFD replacements.
    pub(crate) fn new(input: &[u8], line: usize, kind: DiffErrorKind) -> Self {
        let text = String::from_utf8_lossy(input).into_owned();
        let at = line_span(&text, line);
        let label = kind.label();
        Self {
            kind: Box::new(kind),
            line,
            src: NamedSource::new("diff", text),
            at,
            label,
        }
    }

    /// The 1-based line of the diff the error points at (1 for an empty input).
    pub fn line(&self) -> usize {
        self.line
    }

    pub fn kind(&self) -> &DiffErrorKind {
        &self.kind
    }

    /// The kind's stable short code, e.g. `"hunk_too_short"`; the miette code is
    /// `payreview::diff::` followed by it.
    pub fn kind_code(&self) -> &'static str {
        self.kind.as_str()
    }

    /// The labelled byte range of the (lossily decoded) diff text.
    pub fn span(&self) -> SourceSpan {
        self.at
    }
}

/// What is wrong with the diff. The `Display` text is the message; each kind has a stable
/// `code(payreview::diff::…)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum DiffErrorKind {
    #[error("the input holds no diff")]
    #[diagnostic(
        code(payreview::diff::no_diff),
        help("pass the output of `git diff`, `git format-patch` or `diff -u`")
    )]
    NoDiff,

    #[error("combined diffs (`diff --cc`, `@@@` hunks of merge commits) are not supported")]
    #[diagnostic(
        code(payreview::diff::combined_diff),
        help("diff the merge against one parent, e.g. `git diff HEAD^1 HEAD`")
    )]
    CombinedDiff,

    #[error("malformed hunk header: {reason}")]
    #[diagnostic(
        code(payreview::diff::bad_hunk_header),
        help("a hunk header reads `@@ -start[,count] +start[,count] @@[ section]`")
    )]
    BadHunkHeader { reason: &'static str },

    #[error("number in hunk header does not fit in 32 bits")]
    #[diagnostic(code(payreview::diff::number_too_large))]
    NumberTooLarge,

    #[error(
        "hunk of line {hunk_line} ends early: it has {old_seen} of {old_count} old lines and \
         {new_seen} of {new_count} new lines"
    )]
    #[diagnostic(
        code(payreview::diff::hunk_too_short),
        help("the diff may be truncated, or the hunk header's counts are too high")
    )]
    HunkTooShort {
        hunk_line: usize,
        old_seen: u64,
        old_count: u32,
        new_seen: u64,
        new_count: u32,
    },

    #[error(
        "hunk of line {hunk_line} has more lines than its header counts ({old_count} old, \
         {new_count} new)"
    )]
    #[diagnostic(
        code(payreview::diff::hunk_too_long),
        help("the hunk header's counts are too low, or the diff was edited by hand")
    )]
    HunkTooLong {
        hunk_line: usize,
        old_count: u32,
        new_count: u32,
    },

    #[error("hunk overlaps or goes back before the previous hunk of line {previous_line}")]
    #[diagnostic(code(payreview::diff::hunk_out_of_order))]
    HunkOutOfOrder { previous_line: usize },

    #[error("hunk header before any file header")]
    #[diagnostic(
        code(payreview::diff::hunk_without_file),
        help("a hunk must follow `diff --git` and `---`/`+++` lines")
    )]
    HunkWithoutFile,

    #[error("hunk header before the file's `---`/`+++` lines")]
    #[diagnostic(code(payreview::diff::hunk_without_paths))]
    HunkWithoutPaths,

    #[error("`+++` line without a `---` line before it")]
    #[diagnostic(code(payreview::diff::plus_without_minus))]
    PlusWithoutMinus,

    #[error("`---` line without a `+++` line after it")]
    #[diagnostic(code(payreview::diff::minus_without_plus))]
    MinusWithoutPlus,

    #[error("line is not part of a diff")]
    #[diagnostic(
        code(payreview::diff::unexpected_line),
        help("text between or after files must be a file header, a hunk or a blank line")
    )]
    UnexpectedLine,

    #[error("unknown line in a file header")]
    #[diagnostic(
        code(payreview::diff::unknown_header),
        help(
            "known git headers: index, old/new mode, new/deleted file mode, rename/copy from/to, (dis)similarity index, Binary files, GIT binary patch"
        )
    )]
    UnknownHeader,

    #[error("malformed `{header}` header")]
    #[diagnostic(code(payreview::diff::bad_header))]
    BadHeader { header: &'static str },

    #[error("malformed path: {reason}")]
    #[diagnostic(code(payreview::diff::bad_path))]
    BadPath { reason: &'static str },

    #[error("cannot tell the file's paths from its header")]
    #[diagnostic(
        code(payreview::diff::unknown_paths),
        help("an unquoted `diff --git` line with spaces needs `---`/`+++` or rename lines")
    )]
    UnknownPaths,

    #[error("malformed `GIT binary patch`: {reason}")]
    #[diagnostic(code(payreview::diff::bad_binary_patch))]
    BadBinaryPatch { reason: &'static str },
}

impl DiffErrorKind {
    /// Stable short code (`kind_code`); `Diagnostic::code` is `payreview::diff::` + this (checked by a test).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::NoDiff => "no_diff",
            Self::CombinedDiff => "combined_diff",
            Self::BadHunkHeader { .. } => "bad_hunk_header",
            Self::NumberTooLarge => "number_too_large",
            Self::HunkTooShort { .. } => "hunk_too_short",
            Self::HunkTooLong { .. } => "hunk_too_long",
            Self::HunkOutOfOrder { .. } => "hunk_out_of_order",
            Self::HunkWithoutFile => "hunk_without_file",
            Self::HunkWithoutPaths => "hunk_without_paths",
            Self::PlusWithoutMinus => "plus_without_minus",
            Self::MinusWithoutPlus => "minus_without_plus",
            Self::UnexpectedLine => "unexpected_line",
            Self::UnknownHeader => "unknown_header",
            Self::BadHeader { .. } => "bad_header",
            Self::BadPath { .. } => "bad_path",
            Self::UnknownPaths => "unknown_paths",
            Self::BadBinaryPatch { .. } => "bad_binary_patch",
        }
    }

    /// Short text under the highlighted line of the report.
    fn label(&self) -> &'static str {
        match self {
            Self::NoDiff => "no file header found",
            Self::CombinedDiff => "combined diff",
            Self::BadHunkHeader { .. } | Self::NumberTooLarge => "this hunk header",
            Self::HunkTooShort { .. } => "the hunk ends here",
            Self::HunkTooLong { .. } => "this line is past the hunk's counts",
            Self::HunkOutOfOrder { .. } => "this hunk",
            Self::HunkWithoutFile | Self::HunkWithoutPaths => "this hunk header",
            Self::PlusWithoutMinus => "this `+++` line",
            Self::MinusWithoutPlus => "this `---` line",
            Self::UnexpectedLine => "this line",
            Self::UnknownHeader | Self::BadHeader { .. } => "this header",
            Self::BadPath { .. } => "this path",
            Self::UnknownPaths => "this file header",
            Self::BadBinaryPatch { .. } => "this line",
        }
    }
}

/// Byte range of 1-based `line` in `text`, without its line ending; empty at the end of the text
/// when the line does not exist (an empty input).
fn line_span(text: &str, line: usize) -> SourceSpan {
    let mut start = 0;
    for (index, segment) in text.split('\n').enumerate() {
        if index + 1 == line {
            let len = segment.strip_suffix('\r').unwrap_or(segment).len();
            return SourceSpan::new(start.into(), len);
        }
        start += segment.len() + 1;
    }
    SourceSpan::new(text.len().into(), 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use miette::Diagnostic;

    fn all_kinds() -> Vec<DiffErrorKind> {
        vec![
            DiffErrorKind::NoDiff,
            DiffErrorKind::CombinedDiff,
            DiffErrorKind::BadHunkHeader { reason: "x" },
            DiffErrorKind::NumberTooLarge,
            DiffErrorKind::HunkTooShort {
                hunk_line: 1,
                old_seen: 0,
                old_count: 1,
                new_seen: 0,
                new_count: 1,
            },
            DiffErrorKind::HunkTooLong {
                hunk_line: 1,
                old_count: 1,
                new_count: 1,
            },
            DiffErrorKind::HunkOutOfOrder { previous_line: 1 },
            DiffErrorKind::HunkWithoutFile,
            DiffErrorKind::HunkWithoutPaths,
            DiffErrorKind::PlusWithoutMinus,
            DiffErrorKind::MinusWithoutPlus,
            DiffErrorKind::UnexpectedLine,
            DiffErrorKind::UnknownHeader,
            DiffErrorKind::BadHeader { header: "index" },
            DiffErrorKind::BadPath { reason: "x" },
            DiffErrorKind::UnknownPaths,
            DiffErrorKind::BadBinaryPatch { reason: "x" },
        ]
    }

    #[test]
    fn miette_codes_match_kind_codes() {
        for kind in all_kinds() {
            let short = kind.as_str();
            let error = DiffError::new(b"x\n", 1, kind);
            let code = error.code().map(|c| c.to_string());
            assert_eq!(code, Some(format!("payreview::diff::{short}")));
        }
    }

    #[test]
    fn span_covers_the_line_without_its_ending() {
        let error = DiffError::new(b"one\r\ntwo\nthree", 2, DiffErrorKind::UnexpectedLine);
        assert_eq!(error.span(), SourceSpan::new(5.into(), 3));
        assert_eq!(error.line(), 2);
    }

    #[test]
    fn span_counts_replacement_characters() {
        // The invalid byte becomes a 3-byte U+FFFD in the source miette shows.
        let error = DiffError::new(b"\xff\nbad\n", 2, DiffErrorKind::UnexpectedLine);
        assert_eq!(error.span(), SourceSpan::new(4.into(), 3));
    }

    #[test]
    fn empty_input_gets_an_empty_span() {
        let error = DiffError::new(b"", 1, DiffErrorKind::NoDiff);
        assert_eq!(error.span(), SourceSpan::new(0.into(), 0));
    }

    #[test]
    fn report_names_the_line_and_renders() {
        let error = DiffError::new(b"a\nb\n", 2, DiffErrorKind::UnexpectedLine);
        assert_eq!(error.to_string(), "diff line 2: line is not part of a diff");
        let mut out = String::new();
        let handler =
            miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor());
        assert!(handler.render_report(&mut out, &error).is_ok());
        assert!(out.contains("payreview::diff::unexpected_line"), "{out}");
        assert!(out.contains("this line"), "{out}");
    }
}
