//! Errors that stop a run (exit status 2). Problems confined to one file are not errors: they go
//! to the review's `errors` and the review goes on.

use std::path::PathBuf;

use crate::diff::DiffError;

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum Error {
    #[error(transparent)]
    #[diagnostic(transparent)]
    Diff(#[from] Box<DiffError>),

    #[error(transparent)]
    #[diagnostic(transparent)]
    Config(#[from] Box<crate::config::file::ConfigError>),

    #[error("could not read the diff from {path}")]
    #[diagnostic(
        code(payreview::input),
        help("pass a diff file, `-` for standard input, or --base REV")
    )]
    ReadInput {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("the diff from {path} is larger than {limit} bytes (--max-diff-bytes)")]
    #[diagnostic(
        code(payreview::input),
        help("review a narrower range of commits, or raise the cap with --max-diff-bytes")
    )]
    DiffTooLarge { path: PathBuf, limit: u64 },

    #[error("no diff to review")]
    #[diagnostic(
        code(payreview::usage),
        help(
            "pass a diff file, `-` for standard input, or --base REV to diff the work tree against a revision"
        )
    )]
    NoInput,

    #[error("could not use {path} as the repository: {source}")]
    #[diagnostic(code(payreview::repo))]
    Repo {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("--base {rev} needs a git repository; run inside one or pass --repo DIR")]
    #[diagnostic(code(payreview::usage))]
    BaseWithoutRepo { rev: String },

    #[error("{0}")]
    #[diagnostic(code(payreview::git))]
    Git(#[from] crate::source::git::GitError),

    #[error("could not read the description from {path}")]
    #[diagnostic(code(payreview::input))]
    ReadDescription {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("there is no rule {id}")]
    #[diagnostic(code(payreview::usage), help("`payreview rules` lists them"))]
    UnknownRule { id: String },

    #[error("{message}")]
    #[diagnostic(code(payreview::usage))]
    Usage { message: String },

    #[error("could not write {path}")]
    #[diagnostic(code(payreview::output))]
    WriteOutput {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("could not write the report")]
    #[diagnostic(code(payreview::output))]
    Write(#[source] std::io::Error),
}

impl From<DiffError> for Error {
    fn from(e: DiffError) -> Self {
        Error::Diff(Box::new(e))
    }
}

impl From<crate::config::file::ConfigError> for Error {
    fn from(e: crate::config::file::ConfigError) -> Self {
        Error::Config(Box::new(e))
    }
}

impl Error {
    /// `payreview … | head` closes the pipe early; that is not a failure.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Write(e) if e.kind() == std::io::ErrorKind::BrokenPipe)
    }
}
