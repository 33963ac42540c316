//! What a review is: findings, questions, a verdict, the files it read and what went wrong.
//! Emitters read this; rules produce `Finding`s; nothing here knows about trees or diffs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How much a finding matters, in the order reviewers weigh them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Nit,
    Important,
    Blocker,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Nit => "nit",
            Severity::Important => "important",
            Severity::Blocker => "blocker",
        }
    }
}

/// Output language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    #[default]
    En,
    Ru,
}

/// A `{placeholder}` value of a catalogue text.
pub type Arg = (&'static str, String);

/// One problem at one place, as a rule reported it. Texts are resolved per language when the
/// report is rendered, from the catalogue entry of `rule`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub rule: &'static str,
    pub severity: Severity,
    pub path: String,
    /// New-side lines, `None` for a finding about the whole file.
    pub lines: Option<(u32, u32)>,
    pub args: Vec<Arg>,
    /// Keys of the catalogue entry's `notes` that apply here, in order.
    pub notes: Vec<&'static str>,
    /// Qualified name of the enclosing function (`Client.charge`), empty at module level.
    pub function: String,
    /// What identifies this finding across versions of the file (normalised code, key names).
    pub key: String,
    /// Places elsewhere in the repository that the finding rests on (the client's
    /// construction, the task's decorator), sorted by path and line.
    pub evidence: Vec<Evidence>,
    /// The point this finding makes, when a reviewer makes it once per file (every test of a
    /// suite reaching one unmocked service): findings of one rule, file and point are folded
    /// into the first (`review::fold`).
    pub point: Option<&'static str>,
}

/// A place in the repository that a finding cites: the code that decides it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Evidence {
    pub path: String,
    pub line: u32,
    /// Key of the rule's catalogue `notes` that says what this place shows, in each language.
    pub what: &'static str,
    /// Its `{placeholders}`, on top of the finding's own arguments.
    pub args: Vec<Arg>,
}

/// A question to the author: something the verdict depends on that the change does not show.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Question {
    /// Id of the question in `rules/questions.toml`.
    pub id: &'static str,
    pub args: Vec<(&'static str, String)>,
}

/// A problem that did not stop the review (a file that could not be read, a path refused).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ReviewError {
    pub path: String,
    /// In English; a report words it in its own language from `kind` and `args`
    /// (`report::texts::error_text`).
    pub message: String,
    /// Its kind; `None` for a message of no kind.
    #[serde(skip)]
    pub kind: Option<ErrorKind>,
    #[serde(skip)]
    pub args: Vec<(&'static str, String)>,
}

impl ReviewError {
    /// A problem of `kind`, its text filled with `args`.
    pub fn new(
        path: impl Into<String>,
        kind: ErrorKind,
        args: Vec<(&'static str, String)>,
    ) -> Self {
        ReviewError {
            path: path.into(),
            message: kind.text(&args, Lang::En),
            kind: Some(kind),
            args,
        }
    }

    /// A problem told in words of its own, in English only.
    pub fn plain(path: impl Into<String>, message: impl Into<String>) -> Self {
        ReviewError {
            path: path.into(),
            message: message.into(),
            kind: None,
            args: Vec::new(),
        }
    }
}

/// What a review could not do, each kind a table of `rules/errors.toml` in both languages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ErrorKind {
    TooManyFiles,
    NotUtf8,
    Binary,
    OutsideRoot,
    ReadFailed,
    OldVersionFailed,
    FileNotUtf8,
    VersionOversized,
    VersionParseTimeout,
    SyntaxError,
    TooManyPythonFiles,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 11] = [
        ErrorKind::TooManyFiles,
        ErrorKind::NotUtf8,
        ErrorKind::Binary,
        ErrorKind::OutsideRoot,
        ErrorKind::ReadFailed,
        ErrorKind::OldVersionFailed,
        ErrorKind::FileNotUtf8,
        ErrorKind::VersionOversized,
        ErrorKind::VersionParseTimeout,
        ErrorKind::SyntaxError,
        ErrorKind::TooManyPythonFiles,
    ];

    /// Its table in `rules/errors.toml`.
    pub fn id(self) -> &'static str {
        match self {
            ErrorKind::TooManyFiles => "too-many-files",
            ErrorKind::NotUtf8 => "not-utf8",
            ErrorKind::Binary => "binary",
            ErrorKind::OutsideRoot => "outside-root",
            ErrorKind::ReadFailed => "read-failed",
            ErrorKind::OldVersionFailed => "old-version-failed",
            ErrorKind::FileNotUtf8 => "file-not-utf8",
            ErrorKind::VersionOversized => "version-oversized",
            ErrorKind::VersionParseTimeout => "version-parse-timeout",
            ErrorKind::SyntaxError => "syntax-error",
            ErrorKind::TooManyPythonFiles => "too-many-python-files",
        }
    }

    /// Its text in `lang`, filled with `args`; the id itself where the table is missing (the
    /// catalogue's tests see that none is).
    pub fn text(self, args: &[(&str, String)], lang: Lang) -> String {
        crate::rules::error_text(self.id(), args, lang).unwrap_or_else(|| self.id().to_string())
    }
}

/// A touched file, as the report lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileSummary {
    pub path: String,
    pub status: &'static str,
    pub added: usize,
    pub removed: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    Approve,
    Comment,
    RequestChanges,
}

impl Decision {
    /// `request-changes` on a blocker, `comment` on anything a reviewer would mention.
    pub fn from_findings(findings: &[Finding]) -> Self {
        match findings.iter().map(|f| f.severity).max() {
            Some(Severity::Blocker) => Decision::RequestChanges,
            Some(Severity::Important | Severity::Nit) => Decision::Comment,
            Some(Severity::Info) | None => Decision::Approve,
        }
    }
}

/// The new-side text of a reviewed file, for the emitters that show code (snippets, SARIF line
/// hashes): they never rebuild it from the diff themselves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceFile {
    /// The file version's own text, shared rather than copied.
    pub text: std::sync::Arc<String>,
    /// Built from the hunks alone: lines the diff does not show are blank. Line numbers are real,
    /// but a hash over neighbouring lines would not match the real file.
    pub partial: bool,
    /// New-side lines the change added, ascending.
    pub added: Vec<u32>,
}

impl SourceFile {
    /// The first added line in `first..=last`: where a result about that range is anchored, so
    /// that code scanning shows it on the pull request's diff.
    pub fn first_added_in(&self, first: u32, last: u32) -> Option<u32> {
        let at = self.added.partition_point(|&l| l < first);
        self.added.get(at).copied().filter(|&l| l <= last)
    }
}

/// The whole review, sorted and ready to render.
#[derive(Debug, Clone, Default)]
pub struct Review {
    pub findings: Vec<Finding>,
    pub questions: Vec<Question>,
    pub files: Vec<FileSummary>,
    pub errors: Vec<ReviewError>,
    /// Suppression comments found in the touched files, and whether each was used.
    pub suppressions: Vec<super::Suppression>,
    /// New-side text of every reviewed Python file, by path.
    pub sources: BTreeMap<String, SourceFile>,
    /// Qualified names of the functions each file's change touches (either side), by path.
    pub changed_functions: BTreeMap<String, Vec<String>>,
    /// The pull request's description (`--description`), to check the change against.
    pub description: Option<String>,
}

impl Review {
    pub fn decision(&self) -> Decision {
        Decision::from_findings(&self.findings)
    }

    /// The most severe finding, for `--fail-on`.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }
}
