//! The old and new text of every touched file: from the repository when there is one, from the
//! hunks when there is not.
//!
//! Reads files only through `repo::Repo` (inside the root) or `git`; knows nothing of Python
//! syntax beyond the indentation that diff-only reconstruction needs.

pub mod git;
mod hunks;
mod linemap;
pub mod repo;

pub use linemap::LineMap;
pub use repo::{Repo, RepoError};

use std::sync::Arc;

use crate::diff::{FilePatch, FileStatus, Hunk, LineKind};
use crate::review::ErrorKind;
use linemap::first_line;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    Old,
    New,
}

/// One side of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// Shared with the version's parsed file (`ParsedFile::parse_shared`) rather than copied:
    /// every new version is parsed, and a large change's texts are tens of MB.
    pub text: Arc<String>,
    /// Some lines were not shown by the diff and are blank filler.
    pub partial: bool,
    /// Lines payreview wrote itself (re-created `def` lines), 1-based.
    pub synthetic: Vec<u32>,
}

impl Version {
    fn complete(text: String) -> Self {
        Version {
            text: Arc::new(text),
            partial: false,
            synthetic: Vec::new(),
        }
    }
}

/// Where the versions came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Repository,
    Hunks,
}

/// The diff disagrees with the repository (DIFF003): the first new-side line that differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub line: u32,
    pub in_diff: String,
    pub on_disk: Option<String>,
}

/// A kind of review error (`rules/errors.toml`) and its arguments.
pub type Note = (ErrorKind, Vec<(&'static str, String)>);

/// Old and new text of one touched file and the bookkeeping between them.
#[derive(Debug, Clone)]
pub struct FileVersions {
    pub old: Option<Version>,
    pub new: Option<Version>,
    pub origin: Origin,
    pub lines: LineMap,
    pub mismatch: Option<Mismatch>,
    /// Problems that did not stop the review of this file (they go to the review's `errors`),
    /// each as its kind in `rules/errors.toml` and what fills its text.
    pub notes: Vec<Note>,
}

impl FileVersions {
    pub fn side(&self, side: Side) -> Option<&Version> {
        match side {
            Side::Old => self.old.as_ref(),
            Side::New => self.new.as_ref(),
        }
    }
}

/// Where to read files from.
#[derive(Debug, Clone)]
pub enum Workspace {
    DiffOnly,
    Repository {
        repo: Repo,
        /// Read old versions from git at this revision instead of reverse-applying the hunks.
        base: Option<String>,
        /// New versions are the staged ones (git's index), not the work tree's.
        staged: bool,
        /// New versions are read from git at this revision, not from the work tree.
        head: Option<String>,
    },
}

/// Builds both versions of one file of the diff.
pub fn reconstruct(file: &FilePatch, workspace: &Workspace) -> FileVersions {
    let lines = LineMap::new(&file.hunks);
    match workspace {
        Workspace::DiffOnly => from_hunks(file, lines, Vec::new()),
        Workspace::Repository {
            repo,
            base,
            staged,
            head,
        } => {
            let new_from = match (head, staged) {
                (Some(rev), _) => NewFrom::Revision(rev),
                (None, true) => NewFrom::Index,
                (None, false) => NewFrom::WorkTree,
            };
            from_repository(file, repo, base.as_deref(), new_from, lines)
        }
    }
}

/// Line bookkeeping only, for files payreview does not read (not Python, binary, submodule).
pub fn reconstruct_nothing(file: &FilePatch) -> FileVersions {
    FileVersions {
        old: None,
        new: None,
        origin: Origin::Hunks,
        lines: LineMap::new(&file.hunks),
        mismatch: None,
        notes: Vec::new(),
    }
}

fn from_hunks(file: &FilePatch, lines: LineMap, notes: Vec<Note>) -> FileVersions {
    let old = (file.status != FileStatus::Added).then(|| hunks::rebuild(&file.hunks, Side::Old));
    let new = (file.status != FileStatus::Deleted).then(|| hunks::rebuild(&file.hunks, Side::New));
    FileVersions {
        old,
        new,
        origin: Origin::Hunks,
        lines,
        mismatch: None,
        notes,
    }
}

/// Where repository mode reads the new version of a file.
#[derive(Clone, Copy)]
enum NewFrom<'a> {
    WorkTree,
    /// git's index (`--staged`).
    Index,
    Revision(&'a str),
}

fn from_repository(
    file: &FilePatch,
    repo: &Repo,
    base: Option<&str>,
    new_from: NewFrom<'_>,
    lines: LineMap,
) -> FileVersions {
    let Some(new_path) = file.new_path.as_deref() else {
        // A deletion: the diff shows the whole old file; git can confirm it when asked.
        let old = base
            .zip(file.old_path.as_deref())
            .and_then(|(rev, path)| git::show(repo.root(), rev, path).ok())
            .map(|bytes| Version::complete(repo::decode(bytes).text))
            .unwrap_or_else(|| hunks::rebuild(&file.hunks, Side::Old));
        return FileVersions {
            old: Some(old),
            new: None,
            origin: Origin::Repository,
            lines,
            mismatch: None,
            notes: Vec::new(),
        };
    };
    let from_git = |rev: &str| {
        git::show(repo.root(), rev, new_path)
            .map(repo::decode)
            .map_err(|e| e.to_string())
    };
    let head = match new_from {
        NewFrom::WorkTree => repo.read(new_path).map_err(|e| e.to_string()),
        NewFrom::Index => from_git(""),
        NewFrom::Revision(rev) => from_git(rev),
    };
    let on_disk = match head {
        Ok(found) => found,
        Err(e) => {
            return from_hunks(
                file,
                lines,
                vec![(ErrorKind::ReadFailed, vec![("reason", e.to_string())])],
            );
        }
    };
    let mut notes = Vec::new();
    if on_disk.lossy {
        notes.push((ErrorKind::FileNotUtf8, vec![("path", new_path.to_string())]));
    }
    let new_lines = split_lines(&on_disk.text);
    if let Some(mismatch) = find_mismatch(&file.hunks, &new_lines) {
        let mut fallback = from_hunks(file, lines, notes);
        fallback.mismatch = Some(mismatch);
        return fallback;
    }
    let old = if file.status == FileStatus::Added {
        None
    } else if let Some(rev) = base.or(matches!(new_from, NewFrom::Index).then_some("HEAD")) {
        let path = file.old_path.as_deref().unwrap_or(new_path);
        match git::show(repo.root(), rev, path) {
            Ok(bytes) => Some(Version::complete(repo::decode(bytes).text)),
            Err(e) => {
                notes.push((ErrorKind::OldVersionFailed, vec![("reason", e.to_string())]));
                Some(Version::complete(reverse_apply(&file.hunks, &new_lines)))
            }
        }
    } else {
        Some(Version::complete(reverse_apply(&file.hunks, &new_lines)))
    };
    FileVersions {
        old,
        new: Some(Version::complete(on_disk.text)),
        origin: Origin::Repository,
        lines,
        mismatch: None,
        notes,
    }
}

/// A file's lines without their `\n`, and whether the last one had it.
struct Lines<'a> {
    lines: Vec<&'a str>,
    final_newline: bool,
}

fn split_lines(text: &str) -> Lines<'_> {
    let final_newline = text.ends_with('\n');
    let body = text.strip_suffix('\n').unwrap_or(text);
    let lines = if text.is_empty() {
        Vec::new()
    } else {
        body.split('\n').collect()
    };
    Lines {
        lines,
        final_newline,
    }
}

/// The first place where the hunks' new side disagrees with the file on disk.
fn find_mismatch(hunks: &[Hunk], file: &Lines<'_>) -> Option<Mismatch> {
    for hunk in hunks {
        let mut line = first_line(hunk.new_start, hunk.new_count);
        for hl in hunk.lines.iter().filter(|l| l.kind != LineKind::Removed) {
            let on_disk = line
                .checked_sub(1)
                .and_then(|i| file.lines.get(i as usize))
                .copied();
            // `\ No newline at end of file` on a line that is not the file's unterminated end.
            let newline_differs =
                hl.no_newline && (file.final_newline || line as usize != file.lines.len());
            if on_disk != Some(hl.text.as_str()) || newline_differs {
                return Some(Mismatch {
                    line,
                    in_diff: hl.text.clone(),
                    on_disk: on_disk.map(str::to_string),
                });
            }
            line = line.saturating_add(1);
        }
    }
    None
}

/// The old file: the new one with every hunk's new side swapped back for its old side.
fn reverse_apply(hunks: &[Hunk], new: &Lines<'_>) -> String {
    let mut out: Vec<&str> = Vec::with_capacity(new.lines.len());
    let mut cursor = 0usize;
    let mut final_newline = new.final_newline;
    for hunk in hunks {
        let before = first_line(hunk.new_start, hunk.new_count) as usize - 1;
        if let Some(unchanged) = new.lines.get(cursor..before) {
            out.extend(unchanged);
        }
        let old_side: Vec<_> = hunk
            .lines
            .iter()
            .filter(|l| l.kind != LineKind::Added)
            .collect();
        out.extend(old_side.iter().map(|l| l.text.as_str()));
        cursor = before + hunk.new_count as usize;
        if cursor >= new.lines.len()
            && let Some(last) = old_side.last()
        {
            final_newline = !last.no_newline;
        }
    }
    if let Some(rest) = new.lines.get(cursor..) {
        out.extend(rest);
    }
    join_lines(&out, final_newline)
}

/// `lines` joined by newlines, with a final one if `final_newline` (and any line). Sized once:
/// `join` allocates exactly, and a final newline pushed after it doubled the allocation of every
/// rebuilt version a review holds.
pub(crate) fn join_lines<S: AsRef<str>>(lines: &[S], final_newline: bool) -> String {
    let mut text = String::with_capacity(lines.iter().map(|l| l.as_ref().len() + 1).sum());
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        text.push_str(line.as_ref());
    }
    if final_newline && !lines.is_empty() {
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::HunkLine;

    fn line(kind: LineKind, text: &str) -> HunkLine {
        HunkLine {
            kind,
            text: text.to_string(),
            no_newline: false,
            diff_line: 0,
        }
    }

    #[test]
    fn reverse_apply_restores_the_old_file() {
        let hunk = Hunk {
            old_start: 2,
            old_count: 2,
            new_start: 2,
            new_count: 3,
            section: String::new(),
            lines: vec![
                line(LineKind::Context, "b"),
                line(LineKind::Removed, "c"),
                line(LineKind::Added, "C"),
                line(LineKind::Added, "C2"),
            ],
            diff_line: 0,
        };
        let new = "a\nb\nC\nC2\nd\n";
        assert!(find_mismatch(std::slice::from_ref(&hunk), &split_lines(new)).is_none());
        assert_eq!(
            reverse_apply(std::slice::from_ref(&hunk), &split_lines(new)),
            "a\nb\nc\nd\n"
        );
        let wrong = "a\nb\nX\nC2\nd\n";
        let mismatch = find_mismatch(&[hunk], &split_lines(wrong));
        assert_eq!(
            mismatch.map(|m| (m.line, m.on_disk)),
            Some((3, Some("X".into())))
        );
    }
}
