//! Unified diffs (`git diff`, `diff -u`) as data: which files changed and how.
//!
//! Owns parsing only: it knows nothing about Python, repositories or rules. The parser is our own
//! because the crates in the field panic on hostile numbers and drop the `index` line that
//! DIFF001/DIFF002 need; every malformed input is a `DiffError` pointing at the offending line.

mod error;
mod parse;
mod path;

pub use error::{DiffError, DiffErrorKind};
pub use parse::parse_patch;

/// A parsed diff: the files it touches, in input order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Patch {
    pub files: Vec<FilePatch>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FileStatus {
    Added,
    Deleted,
    Modified,
    Renamed,
    Copied,
}

impl FileStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            FileStatus::Added => "added",
            FileStatus::Deleted => "deleted",
            FileStatus::Modified => "modified",
            FileStatus::Renamed => "renamed",
            FileStatus::Copied => "copied",
        }
    }
}

/// `index <old>..<new> [mode]`: abbreviated blob ids as written in the diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexLine {
    pub old: String,
    pub new: String,
    pub mode: Option<String>,
    /// 1-based line of the diff that holds it.
    pub diff_line: usize,
}

/// One file's part of the diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePatch {
    /// Path before the change, prefix (`a/`) stripped; `None` for `/dev/null` (an added file).
    pub old_path: Option<String>,
    /// Path after the change, prefix (`b/`) stripped; `None` for `/dev/null` (a deleted file).
    pub new_path: Option<String>,
    pub status: FileStatus,
    pub index: Option<IndexLine>,
    pub old_mode: Option<String>,
    pub new_mode: Option<String>,
    /// `similarity index N%` of a rename or copy.
    pub similarity: Option<u8>,
    /// `Binary files … differ` or a `GIT binary patch`: no hunks to read.
    pub binary: bool,
    /// A submodule change (`Subproject commit …` lines): no Python to read.
    pub submodule: bool,
    /// Some bytes of this file's section were not UTF-8 and were replaced (U+FFFD).
    pub lossy: bool,
    pub hunks: Vec<Hunk>,
    /// 1-based line of the diff where this file's header starts.
    pub diff_line: usize,
}

impl FilePatch {
    /// The path a reviewer knows the file by: the new one, or the old one for a deletion.
    pub fn path(&self) -> &str {
        self.new_path
            .as_deref()
            .or(self.old_path.as_deref())
            .unwrap_or("")
    }

    pub fn added_lines(&self) -> usize {
        self.hunks
            .iter()
            .flat_map(|h| &h.lines)
            .filter(|l| l.kind == LineKind::Added)
            .count()
    }

    pub fn removed_lines(&self) -> usize {
        self.hunks
            .iter()
            .flat_map(|h| &h.lines)
            .filter(|l| l.kind == LineKind::Removed)
            .count()
    }
}

/// `@@ -old_start,old_count +new_start,new_count @@ section`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    pub old_start: u32,
    pub old_count: u32,
    pub new_start: u32,
    pub new_count: u32,
    /// Text after the closing `@@` (git's function context, e.g. `def create_charge(`), without
    /// the single separating space; empty when absent.
    pub section: String,
    pub lines: Vec<HunkLine>,
    /// 1-based line of the diff that holds the `@@` header.
    pub diff_line: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LineKind {
    Context,
    Added,
    Removed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HunkLine {
    pub kind: LineKind,
    /// The line without its one-character prefix and without the `\n`; a `\r` of a CRLF file is
    /// kept, so that rebuilt files hash to git's blob ids.
    pub text: String,
    /// Followed by `\ No newline at end of file`.
    pub no_newline: bool,
    /// 1-based line of the diff.
    pub diff_line: usize,
}
