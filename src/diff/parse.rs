//! The unified-diff reader: bytes in, [`Patch`] or a [`DiffError`] out.
//!
//! Owns the grammar of a diff: preamble, file headers (git's extended headers or a plain
//! `---`/`+++` pair), hunks and their counts, binary patches, signatures. Paths are left to
//! `path`, error reports to `error`. One pass over the input, line by line, with at most two
//! lines of look-ahead; nothing is allocated from numbers the diff claims.

use super::error::{DiffError, DiffErrorKind};
use super::path::{self, PathPair, RawPath};
use super::{FilePatch, FileStatus, Hunk, HunkLine, IndexLine, LineKind, Patch};

/// Parses a whole diff: `git diff`, `git format-patch` output (its email preamble and signature
/// are skipped) or `diff -u`/`diff -ru`. Bytes that are not UTF-8 are replaced and flag the
/// file as `lossy`. Any line that is not diff syntax where a diff is expected is an error, as
/// is an input without any file.
pub fn parse_patch(input: &[u8]) -> Result<Patch, DiffError> {
    Parser::new(input)
        .run()
        .map_err(|fail| DiffError::new(input, fail.line, fail.kind))
}

/// An error before its report is built: cheap to create and to pass up.
#[derive(Debug)]
struct Fail {
    line: usize,
    kind: DiffErrorKind,
}

type Step<T> = Result<T, Fail>;

#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    /// 1-based line number.
    no: usize,
    /// Without the `\n`; a `\r` is still there.
    raw: &'a [u8],
}

impl<'a> Line<'a> {
    /// The line as a header: header syntax never ends in `\r`, so a CRLF diff's is dropped.
    fn header(&self) -> &'a [u8] {
        self.raw.strip_suffix(b"\r").unwrap_or(self.raw)
    }

    fn fail(&self, kind: DiffErrorKind) -> Fail {
        Fail {
            line: self.no,
            kind,
        }
    }
}

/// Splits off the first line; `None` at the end of the input.
fn split_line(rest: &[u8]) -> Option<(&[u8], &[u8])> {
    if rest.is_empty() {
        return None;
    }
    match rest.iter().position(|&b| b == b'\n') {
        Some(at) => Some((rest.get(..at)?, rest.get(at + 1..)?)),
        None => Some((rest, &[])),
    }
}

/// How a file section starts.
enum FileStart {
    /// `diff --git`.
    Git,
    /// `---` then `+++`.
    Plain,
    /// `diff -ru old/x new/x` (any `diff ` command line) then `---` and `+++`.
    PlainWithCommand,
}

struct Parser<'a> {
    rest: &'a [u8],
    next_no: usize,
    /// Number of the last line taken, for errors at the end of the input.
    last_no: usize,
    /// A line taken since the current file started was not UTF-8.
    lossy: bool,
}

impl<'a> Parser<'a> {
    fn new(input: &'a [u8]) -> Self {
        Self {
            rest: input,
            next_no: 1,
            last_no: 0,
            lossy: false,
        }
    }

    fn peek(&self) -> Option<Line<'a>> {
        self.peek_nth(0)
    }

    /// The line `n` lines after the next one, without consuming anything.
    fn peek_nth(&self, n: usize) -> Option<Line<'a>> {
        let mut rest = self.rest;
        for _ in 0..n {
            rest = split_line(rest)?.1;
        }
        let (raw, _) = split_line(rest)?;
        Some(Line {
            no: self.next_no + n,
            raw,
        })
    }

    /// Consumes the next line; every consumed line passes here so `lossy` sees them all.
    fn take(&mut self) -> Option<Line<'a>> {
        let (raw, after) = split_line(self.rest)?;
        let line = Line {
            no: self.next_no,
            raw,
        };
        self.rest = after;
        self.last_no = self.next_no;
        self.next_no += 1;
        if std::str::from_utf8(raw).is_err() {
            self.lossy = true;
        }
        Some(line)
    }

    fn run(mut self) -> Step<Patch> {
        let mut files = Vec::new();
        // Before the first file (and after a format-patch signature) free text is allowed.
        let mut in_preamble = true;
        while let Some(line) = self.peek() {
            if let Some(start) = self.file_start(line) {
                files.push(self.file(start)?);
                in_preamble = false;
                continue;
            }
            if in_preamble {
                self.preamble_line(line)?;
            } else {
                in_preamble = self.between_files_line(line)?;
            }
        }
        if files.is_empty() {
            return Err(Fail {
                line: 1,
                kind: DiffErrorKind::NoDiff,
            });
        }
        Ok(Patch { files })
    }

    fn file_start(&self, line: Line<'a>) -> Option<FileStart> {
        let text = line.header();
        let header_at = |n| self.peek_nth(n).map(|l: Line<'a>| l.header());
        let is_pair_at = |n: usize| {
            header_at(n).is_some_and(|t| t.starts_with(b"--- "))
                && header_at(n + 1).is_some_and(|t| t.starts_with(b"+++ "))
        };
        if text.starts_with(b"diff --git ") {
            Some(FileStart::Git)
        } else if is_combined_start(text) {
            None
        } else if text.starts_with(b"--- ") && is_pair_at(0) {
            Some(FileStart::Plain)
        } else if text.starts_with(b"diff ") && is_pair_at(1) {
            Some(FileStart::PlainWithCommand)
        } else {
            None
        }
    }

    fn file(&mut self, start: FileStart) -> Step<FilePatch> {
        self.lossy = false;
        match start {
            FileStart::Git => self.git_file(),
            FileStart::Plain => self.plain_file(None),
            FileStart::PlainWithCommand => {
                let command = self.take().map(|l| l.no);
                self.plain_file(command)
            }
        }
    }

    /// A line before any file: commit message or email headers, skipped unless it is diff
    /// syntax that cannot start a file.
    fn preamble_line(&mut self, line: Line<'a>) -> Step<()> {
        let text = line.header();
        if is_combined_start(text) || text.starts_with(b"@@@") {
            return Err(line.fail(DiffErrorKind::CombinedDiff));
        }
        if text.starts_with(b"@@") {
            return Err(line.fail(DiffErrorKind::HunkWithoutFile));
        }
        if text.starts_with(b"+++ ") {
            return Err(line.fail(DiffErrorKind::PlusWithoutMinus));
        }
        self.take();
        Ok(())
    }

    /// A line after a file that does not start another one. Returns whether a format-patch
    /// signature was read, after which free text (the next email) is allowed again.
    fn between_files_line(&mut self, line: Line<'a>) -> Step<bool> {
        let text = line.header();
        if text.is_empty() || text.starts_with(b"Only in ") {
            // `Only in` is `diff -r` reporting a file on one side; it has no hunks to read.
            self.take();
            return Ok(false);
        }
        if text == b"-- " {
            self.take();
            self.take();
            return Ok(true);
        }
        let kind = if is_combined_start(text) || text.starts_with(b"@@@") {
            DiffErrorKind::CombinedDiff
        } else if text.starts_with(b"@@") {
            DiffErrorKind::HunkWithoutFile
        } else if text.starts_with(b"+++ ") {
            DiffErrorKind::PlusWithoutMinus
        } else if text.starts_with(b"--- ") {
            DiffErrorKind::MinusWithoutPlus
        } else {
            DiffErrorKind::UnexpectedLine
        };
        Err(line.fail(kind))
    }

    /// A `diff -u` file: `---`, `+++`, hunks. `command` is the line of a preceding `diff -ru`.
    fn plain_file(&mut self, command: Option<usize>) -> Step<FilePatch> {
        let (minus, plus) = self.minus_plus()?;
        let (old, new) = path::strip_plain_prefixes(minus.0, plus.0);
        if old.is_none() && new.is_none() {
            return Err(Fail {
                line: minus.1,
                kind: DiffErrorKind::BadPath {
                    reason: "both sides are /dev/null",
                },
            });
        }
        let hunks = self.hunks()?;
        let status = match (&old, &new) {
            (None, _) => FileStatus::Added,
            (_, None) => FileStatus::Deleted,
            _ => FileStatus::Modified,
        };
        let mut file = empty_file(command.unwrap_or(minus.1), status);
        file.old_path = decode_path(old, &mut file.lossy);
        file.new_path = decode_path(new, &mut file.lossy);
        file.lossy |= self.lossy;
        file.submodule = has_submodule_lines(&hunks);
        file.hunks = hunks;
        Ok(file)
    }

    /// Reads a `---` line and the `+++` line that must follow it, returning both paths (prefix
    /// kept) with their line numbers.
    fn minus_plus(&mut self) -> Step<((RawPath, usize), (RawPath, usize))> {
        let Some(minus) = self.take() else {
            return Err(Fail {
                line: self.last_no,
                kind: DiffErrorKind::MinusWithoutPlus,
            });
        };
        let plus = match self.peek() {
            Some(plus) if plus.header().starts_with(b"+++ ") => plus,
            _ => return Err(minus.fail(DiffErrorKind::MinusWithoutPlus)),
        };
        self.take();
        Ok((header_path(minus)?, header_path(plus)?))
    }

    /// A `diff --git` file: extended headers, then optionally `---`/`+++` and hunks.
    fn git_file(&mut self) -> Step<FilePatch> {
        let Some(first) = self.take() else {
            return Err(Fail {
                line: self.last_no,
                kind: DiffErrorKind::NoDiff,
            });
        };
        let rest = first
            .header()
            .get(b"diff --git ".len()..)
            .unwrap_or_default();
        let line_paths = path::parse_git_line(rest)
            .map_err(|reason| first.fail(DiffErrorKind::BadPath { reason }))?;
        let prefixed = match &line_paths {
            Some((old, new)) => path::has_git_prefixes(old, new),
            None => path::git_line_has_prefixes(rest),
        };
        let mut head = GitHeader {
            line_paths,
            prefixed,
            ..GitHeader::default()
        };
        let mut hunks = Vec::new();
        while let Some(line) = self.peek() {
            let text = line.header();
            // Checked before `file_start`, for which a `---`/`+++` pair would open a plain file.
            if text.starts_with(b"--- ") {
                let (minus, plus) = self.minus_plus()?;
                head.minus = Some(minus.0);
                head.plus = Some(plus.0);
                hunks = self.hunks()?;
                break;
            }
            let ends_header = text.is_empty() || text == b"-- " || is_combined_start(text);
            if ends_header || self.file_start(line).is_some() {
                break;
            }
            self.take();
            self.extended_header(line, &mut head)?;
        }
        let mut file = head.finish(first.no)?;
        file.lossy |= self.lossy;
        file.submodule = has_submodule_lines(&hunks);
        file.hunks = hunks;
        Ok(file)
    }

    /// One line of git's extended header (already taken).
    fn extended_header(&mut self, line: Line<'a>, head: &mut GitHeader) -> Step<()> {
        let text = line.header();
        let bad = |header| line.fail(DiffErrorKind::BadHeader { header });
        let path_of = |value: &[u8]| {
            path::parse_plain_path(value)
                .map(|p| (p, line.no))
                .map_err(|reason| line.fail(DiffErrorKind::BadPath { reason }))
        };
        if let Some(value) = text.strip_prefix(b"index ") {
            head.index = Some(parse_index(value, line.no).ok_or_else(|| bad("index"))?);
        } else if let Some(value) = text.strip_prefix(b"old mode ") {
            head.old_mode = Some(parse_mode(value).ok_or_else(|| bad("old mode"))?);
        } else if let Some(value) = text.strip_prefix(b"new mode ") {
            head.new_mode = Some(parse_mode(value).ok_or_else(|| bad("new mode"))?);
        } else if let Some(value) = text.strip_prefix(b"deleted file mode ") {
            head.old_mode = Some(parse_mode(value).ok_or_else(|| bad("deleted file mode"))?);
            head.deleted = true;
        } else if let Some(value) = text.strip_prefix(b"new file mode ") {
            head.new_mode = Some(parse_mode(value).ok_or_else(|| bad("new file mode"))?);
            head.new_file = true;
        } else if let Some(value) = text.strip_prefix(b"similarity index ") {
            head.similarity = Some(parse_percent(value).ok_or_else(|| bad("similarity index"))?);
        } else if let Some(value) = text.strip_prefix(b"dissimilarity index ") {
            // Valid but of no use to a review; checked so a mangled header is still noticed.
            parse_percent(value).ok_or_else(|| bad("dissimilarity index"))?;
        } else if let Some(value) = strip_any(text, &[b"rename from ", b"rename old "]) {
            head.rename_from = Some(path_of(value)?);
        } else if let Some(value) = strip_any(text, &[b"rename to ", b"rename new "]) {
            head.rename_to = Some(path_of(value)?);
        } else if let Some(value) = text.strip_prefix(b"copy from ") {
            head.copy_from = Some(path_of(value)?);
        } else if let Some(value) = text.strip_prefix(b"copy to ") {
            head.copy_to = Some(path_of(value)?);
        } else if text.starts_with(b"Binary files ") && text.ends_with(b" differ") {
            head.binary = true;
        } else if text == b"GIT binary patch" {
            head.binary = true;
            self.skip_binary_patch(line)?;
        } else {
            return Err(line.fail(misplaced_or_unknown(text)));
        }
        Ok(())
    }

    /// Skips the `literal`/`delta` blocks of a `GIT binary patch` (usually two: forward and
    /// reverse), each base85 lines ended by a blank line. The end of the input may stand in for
    /// the last blank line, since diffs pasted around often lose it.
    fn skip_binary_patch(&mut self, header: Line<'a>) -> Step<()> {
        let mut blocks = 0;
        while let Some(line) = self.peek() {
            let text = line.header();
            let Some(size) = strip_any(text, &[b"literal ", b"delta "]) else {
                break;
            };
            if parse_u64(size).is_none() {
                return Err(line.fail(DiffErrorKind::BadBinaryPatch {
                    reason: "block size is not a number",
                }));
            }
            self.take();
            self.skip_base85_block()?;
            blocks += 1;
        }
        if blocks == 0 {
            let at = self.peek().unwrap_or(header);
            return Err(at.fail(DiffErrorKind::BadBinaryPatch {
                reason: "expected a `literal` or `delta` block",
            }));
        }
        Ok(())
    }

    fn skip_base85_block(&mut self) -> Step<()> {
        while let Some(line) = self.take() {
            let text = line.header();
            if text.is_empty() {
                return Ok(());
            }
            if !is_base85_line(text) {
                return Err(line.fail(DiffErrorKind::BadBinaryPatch {
                    reason: "not a base85 data line",
                }));
            }
        }
        Ok(())
    }

    /// The hunks of one file, up to whatever starts the next file (left unconsumed).
    fn hunks(&mut self) -> Step<Vec<Hunk>> {
        let mut hunks: Vec<Hunk> = Vec::new();
        while let Some(line) = self.peek() {
            let text = line.header();
            if text.starts_with(b"@@@") {
                return Err(line.fail(DiffErrorKind::CombinedDiff));
            }
            if text.starts_with(b"@@") {
                self.take();
                let hunk = self.hunk(line, hunks.last())?;
                hunks.push(hunk);
                continue;
            }
            if line.raw.first() == Some(&b'\\') {
                self.take();
                let last = hunks.last_mut().and_then(|h| h.lines.last_mut());
                mark_no_newline(last, line)?;
                continue;
            }
            if text.is_empty() {
                self.take();
                continue;
            }
            if text == b"-- " || self.file_start(line).is_some() {
                break;
            }
            match line.raw.first() {
                Some(b'+') if text.starts_with(b"+++ ") => {
                    return Err(line.fail(DiffErrorKind::PlusWithoutMinus));
                }
                Some(b'-') if text.starts_with(b"--- ") => {
                    return Err(line.fail(DiffErrorKind::MinusWithoutPlus));
                }
                Some(b' ' | b'+' | b'-') => {
                    return Err(line.fail(match hunks.last() {
                        Some(last) => too_long(last),
                        None => DiffErrorKind::UnexpectedLine,
                    }));
                }
                _ => break,
            }
        }
        Ok(hunks)
    }

    /// One hunk; `header` is its (taken) `@@` line, `previous` the file's hunk before it.
    fn hunk(&mut self, header: Line<'a>, previous: Option<&Hunk>) -> Step<Hunk> {
        let range = parse_hunk_header(header.header()).map_err(|kind| header.fail(kind))?;
        let mut hunk = Hunk {
            old_start: range.old_start,
            old_count: range.old_count,
            new_start: range.new_start,
            new_count: range.new_count,
            section: String::from_utf8_lossy(range.section).into_owned(),
            lines: Vec::new(),
            diff_line: header.no,
        };
        if let Some(previous) = previous {
            if !in_order(previous, &hunk) {
                return Err(header.fail(DiffErrorKind::HunkOutOfOrder {
                    previous_line: previous.diff_line,
                }));
            }
        }
        self.hunk_body(&mut hunk)?;
        Ok(hunk)
    }

    /// Reads lines until the header's counts are met, exactly.
    fn hunk_body(&mut self, hunk: &mut Hunk) -> Step<()> {
        let (mut old_seen, mut new_seen) = (0_u64, 0_u64);
        let (old_count, new_count) = (u64::from(hunk.old_count), u64::from(hunk.new_count));
        while old_seen < old_count || new_seen < new_count {
            let wants = (old_seen < old_count, new_seen < new_count);
            let short = |line| Fail {
                line,
                kind: DiffErrorKind::HunkTooShort {
                    hunk_line: hunk.diff_line,
                    old_seen,
                    old_count: hunk.old_count,
                    new_seen,
                    new_count: hunk.new_count,
                },
            };
            let Some(line) = self.peek() else {
                return Err(short(self.last_no));
            };
            let kind = match body_line(line.raw.first().copied(), wants) {
                BodyLine::Line(kind) => kind,
                BodyLine::NoNewline => {
                    self.take();
                    mark_no_newline(hunk.lines.last_mut(), line)?;
                    continue;
                }
                BodyLine::TooMany => return Err(line.fail(too_long(hunk))),
                BodyLine::End => return Err(short(line.no)),
            };
            self.take();
            old_seen += u64::from(kind != LineKind::Added);
            new_seen += u64::from(kind != LineKind::Removed);
            hunk.lines.push(HunkLine {
                kind,
                text: String::from_utf8_lossy(line.raw.get(1..).unwrap_or_default()).into_owned(),
                no_newline: false,
                diff_line: line.no,
            });
        }
        Ok(())
    }
}

/// What a line inside a hunk that still wants lines is.
enum BodyLine {
    Line(LineKind),
    NoNewline,
    /// A line of a side whose count is already met.
    TooMany,
    /// Not a hunk line: the hunk ends before its counts are met.
    End,
}

/// Classifies a hunk body line by its first byte; `wants` is (old side, new side) still short.
fn body_line(first: Option<u8>, (wants_old, wants_new): (bool, bool)) -> BodyLine {
    let (kind, fits) = match first {
        Some(b' ') => (LineKind::Context, wants_old && wants_new),
        Some(b'-') => (LineKind::Removed, wants_old),
        Some(b'+') => (LineKind::Added, wants_new),
        Some(b'\\') => return BodyLine::NoNewline,
        // Some tools strip the lone space of an empty context line; it can only be one while
        // both sides still expect lines.
        None if wants_old && wants_new => (LineKind::Context, true),
        _ => return BodyLine::End,
    };
    if fits {
        BodyLine::Line(kind)
    } else {
        BodyLine::TooMany
    }
}

/// What git's extended header collected, before paths and status are settled.
#[derive(Default)]
struct GitHeader {
    /// The `diff --git` paths, prefixes kept; `None` when they could not be split.
    line_paths: Option<PathPair>,
    /// The paths carry `a/` and `b/` (not `--no-prefix`).
    prefixed: bool,
    minus: Option<RawPath>,
    plus: Option<RawPath>,
    rename_from: Option<(Vec<u8>, usize)>,
    rename_to: Option<(Vec<u8>, usize)>,
    copy_from: Option<(Vec<u8>, usize)>,
    copy_to: Option<(Vec<u8>, usize)>,
    new_file: bool,
    deleted: bool,
    old_mode: Option<String>,
    new_mode: Option<String>,
    index: Option<IndexLine>,
    similarity: Option<u8>,
    binary: bool,
}

impl GitHeader {
    /// Settles paths and status. `first_line` is the `diff --git` line.
    fn finish(mut self, first_line: usize) -> Step<FilePatch> {
        let moved = self.take_move(first_line)?;
        let (line_old, line_new) = self.line_paths.take().unzip();
        let (moved_from, moved_to) = moved.as_ref().map(|m| m.1.clone()).unzip();
        let (old_prefix, new_prefix) = if self.prefixed {
            (Some(&b"a/"[..]), Some(&b"b/"[..]))
        } else {
            (None, None)
        };
        let old = settle_side(
            self.new_file,
            moved_from,
            self.minus.take(),
            line_old,
            old_prefix,
        );
        let new = settle_side(
            self.deleted,
            moved_to,
            self.plus.take(),
            line_new,
            new_prefix,
        );
        let unknown = Fail {
            line: first_line,
            kind: DiffErrorKind::UnknownPaths,
        };
        let (Some(old), Some(new)) = (old, new) else {
            return Err(unknown);
        };
        let status = match (&moved, &old, &new) {
            (_, None, None) => return Err(unknown),
            (Some((status, _)), _, _) => *status,
            (None, None, _) => FileStatus::Added,
            (None, _, None) => FileStatus::Deleted,
            (None, Some(_), Some(_)) => FileStatus::Modified,
        };
        let mut file = empty_file(first_line, status);
        file.old_path = decode_path(old, &mut file.lossy);
        file.new_path = decode_path(new, &mut file.lossy);
        file.index = self.index;
        file.old_mode = self.old_mode;
        file.new_mode = self.new_mode;
        file.similarity = self.similarity;
        file.binary = self.binary;
        Ok(file)
    }

    /// `rename from`/`rename to` or `copy from`/`copy to`: both halves or neither, and not both
    /// kinds at once.
    fn take_move(&mut self, first_line: usize) -> Step<Option<(FileStatus, PathPair)>> {
        let renamed = pair_up(self.rename_from.take(), self.rename_to.take(), "rename")?;
        let copied = pair_up(self.copy_from.take(), self.copy_to.take(), "copy")?;
        match (renamed, copied) {
            (Some(_), Some(_)) => Err(Fail {
                line: first_line,
                kind: DiffErrorKind::BadHeader {
                    header: "rename and copy",
                },
            }),
            (Some(paths), None) => Ok(Some((FileStatus::Renamed, paths))),
            (None, Some(paths)) => Ok(Some((FileStatus::Copied, paths))),
            (None, None) => Ok(None),
        }
    }
}

/// One side's path from the most explicit line that gives it: none for the missing side of an
/// added or deleted file, then `rename`/`copy` lines (which carry no prefix), then `---`/`+++`,
/// then `diff --git`. `None` when no line tells.
fn settle_side(
    gone: bool,
    moved: Option<Vec<u8>>,
    header: Option<RawPath>,
    git_line: Option<Vec<u8>>,
    prefix: Option<&[u8]>,
) -> Option<RawPath> {
    let strip = |p: Vec<u8>| match prefix {
        Some(prefix) => path::strip_prefix(p, prefix),
        None => p,
    };
    if gone {
        Some(None)
    } else if let Some(moved) = moved {
        Some(Some(moved))
    } else if let Some(header) = header {
        Some(header.map(strip))
    } else {
        git_line.map(|p| Some(strip(p)))
    }
}

fn pair_up(
    from: Option<(Vec<u8>, usize)>,
    to: Option<(Vec<u8>, usize)>,
    header: &'static str,
) -> Step<Option<PathPair>> {
    match (from, to) {
        (Some((from, _)), Some((to, _))) => Ok(Some((from, to))),
        (None, None) => Ok(None),
        (Some((_, line)), None) | (None, Some((_, line))) => Err(Fail {
            line,
            kind: DiffErrorKind::BadHeader { header },
        }),
    }
}

fn empty_file(diff_line: usize, status: FileStatus) -> FilePatch {
    FilePatch {
        old_path: None,
        new_path: None,
        status,
        index: None,
        old_mode: None,
        new_mode: None,
        similarity: None,
        binary: false,
        submodule: false,
        lossy: false,
        hunks: Vec::new(),
        diff_line,
    }
}

fn decode_path(path: RawPath, lossy: &mut bool) -> Option<String> {
    let (text, replaced) = path::decode(path?);
    *lossy |= replaced;
    Some(text)
}

/// The path of a `---`/`+++` line with its line number.
fn header_path(line: Line<'_>) -> Step<(RawPath, usize)> {
    let rest = line.header().get(4..).unwrap_or_default();
    path::parse_header_path(rest)
        .map(|p| (p, line.no))
        .map_err(|reason| line.fail(DiffErrorKind::BadPath { reason }))
}

fn has_submodule_lines(hunks: &[Hunk]) -> bool {
    hunks
        .iter()
        .flat_map(|h| &h.lines)
        .any(|l| l.text.starts_with("Subproject commit "))
}

fn is_combined_start(text: &[u8]) -> bool {
    text.starts_with(b"diff --cc ") || text.starts_with(b"diff --combined ")
}

/// The error for a line in a git header that is no extended header.
fn misplaced_or_unknown(text: &[u8]) -> DiffErrorKind {
    if text.starts_with(b"+++ ") {
        DiffErrorKind::PlusWithoutMinus
    } else if text.starts_with(b"@@@") {
        DiffErrorKind::CombinedDiff
    } else if text.starts_with(b"@@") {
        DiffErrorKind::HunkWithoutPaths
    } else {
        DiffErrorKind::UnknownHeader
    }
}

fn strip_any<'t>(text: &'t [u8], prefixes: &[&[u8]]) -> Option<&'t [u8]> {
    prefixes.iter().find_map(|p| text.strip_prefix(*p))
}

/// `\ No newline at end of file` (in any language) applies to the line before it.
fn mark_no_newline(previous: Option<&mut HunkLine>, line: Line<'_>) -> Step<()> {
    match previous {
        Some(previous) => {
            previous.no_newline = true;
            Ok(())
        }
        None => Err(line.fail(DiffErrorKind::UnexpectedLine)),
    }
}

fn too_long(hunk: &Hunk) -> DiffErrorKind {
    DiffErrorKind::HunkTooLong {
        hunk_line: hunk.diff_line,
        old_count: hunk.old_count,
        new_count: hunk.new_count,
    }
}

/// Whether `next` starts at or after the end of `previous` on both sides. A side with count 0
/// sits between line `start` and `start + 1`, so it begins at `start + 1`.
fn in_order(previous: &Hunk, next: &Hunk) -> bool {
    let first = |start: u32, count: u32| u64::from(start) + u64::from(count == 0);
    let end = |start: u32, count: u32| first(start, count) + u64::from(count);
    first(next.old_start, next.old_count) >= end(previous.old_start, previous.old_count)
        && first(next.new_start, next.new_count) >= end(previous.new_start, previous.new_count)
}

/// The numbers and section of a `@@` line.
#[derive(Debug, PartialEq, Eq)]
struct HunkRange<'a> {
    old_start: u32,
    old_count: u32,
    new_start: u32,
    new_count: u32,
    section: &'a [u8],
}

fn parse_hunk_header(text: &[u8]) -> Result<HunkRange<'_>, DiffErrorKind> {
    let bad = |reason| DiffErrorKind::BadHunkHeader { reason };
    let rest = text
        .strip_prefix(b"@@ -")
        .ok_or_else(|| bad("expected `@@ -` at the start"))?;
    let (old_start, old_count, rest) = parse_range(rest)?;
    let rest = rest
        .strip_prefix(b" +")
        .ok_or_else(|| bad("expected ` +` before the new range"))?;
    let (new_start, new_count, rest) = parse_range(rest)?;
    let rest = rest
        .strip_prefix(b" @@")
        .ok_or_else(|| bad("expected ` @@` after the new range"))?;
    let section = rest.strip_prefix(b" ").unwrap_or(rest);
    if (old_start == 0 && old_count != 0) || (new_start == 0 && new_count != 0) {
        return Err(bad("line 0 with a non-zero count"));
    }
    if old_count == 0 && new_count == 0 {
        return Err(bad("a hunk without lines"));
    }
    Ok(HunkRange {
        old_start,
        old_count,
        new_start,
        new_count,
        section,
    })
}

/// `start[,count]` with the count defaulting to 1.
fn parse_range(text: &[u8]) -> Result<(u32, u32, &[u8]), DiffErrorKind> {
    let (start, rest) = parse_number(text)?;
    match rest.strip_prefix(b",") {
        Some(after) => {
            let (count, rest) = parse_number(after)?;
            Ok((start, count, rest))
        }
        None => Ok((start, 1, rest)),
    }
}

/// Leading decimal digits as a `u32`, with the rest of the text.
fn parse_number(text: &[u8]) -> Result<(u32, &[u8]), DiffErrorKind> {
    let digits = text.iter().take_while(|b| b.is_ascii_digit()).count();
    let (number, rest) = text.split_at_checked(digits).unwrap_or((text, &[]));
    if number.is_empty() {
        return Err(DiffErrorKind::BadHunkHeader {
            reason: "expected a line number",
        });
    }
    let value = number.iter().try_fold(0_u32, |acc, &digit| {
        acc.checked_mul(10)?.checked_add(u32::from(digit - b'0'))
    });
    value
        .map(|v| (v, rest))
        .ok_or(DiffErrorKind::NumberTooLarge)
}

fn parse_u64(text: &[u8]) -> Option<u64> {
    if text.is_empty() {
        return None;
    }
    text.iter().try_fold(0_u64, |acc, &digit| {
        let digit = char::from(digit).to_digit(10)?;
        acc.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// `index <old>..<new>[ <mode>]`.
fn parse_index(value: &[u8], diff_line: usize) -> Option<IndexLine> {
    let (ids, mode) = match value.iter().position(|&b| b == b' ') {
        Some(at) => (value.get(..at)?, Some(parse_mode(value.get(at + 1..)?)?)),
        None => (value, None),
    };
    let dots = ids.windows(2).position(|w| w == b"..")?;
    let old = hex_id(ids.get(..dots)?)?;
    let new = hex_id(ids.get(dots + 2..)?)?;
    Some(IndexLine {
        old,
        new,
        mode,
        diff_line,
    })
}

fn hex_id(text: &[u8]) -> Option<String> {
    let valid = !text.is_empty() && text.len() <= 64 && text.iter().all(u8::is_ascii_hexdigit);
    valid.then(|| String::from_utf8_lossy(text).into_owned())
}

/// A file mode: octal digits, as git writes them (`100644`).
fn parse_mode(text: &[u8]) -> Option<String> {
    let valid = (1..=7).contains(&text.len()) && text.iter().all(|b| (b'0'..=b'7').contains(b));
    valid.then(|| String::from_utf8_lossy(text).into_owned())
}

/// `N%` with N at most 100.
fn parse_percent(text: &[u8]) -> Option<u8> {
    let digits = text.strip_suffix(b"%")?;
    let value = parse_u64(digits)?;
    u8::try_from(value).ok().filter(|v| *v <= 100)
}

/// One data line of a git binary patch: a length character (`A`–`Z` for 1–26 bytes, `a`–`z`
/// for 27–52) and five base85 characters per four bytes.
fn is_base85_line(text: &[u8]) -> bool {
    let Some((&len_char, data)) = text.split_first() else {
        return false;
    };
    let bytes = match len_char {
        b'A'..=b'Z' => usize::from(len_char - b'A') + 1,
        b'a'..=b'z' => usize::from(len_char - b'a') + 27,
        _ => return false,
    };
    data.len() == bytes.div_ceil(4) * 5 && data.iter().all(|&b| is_base85_char(b))
}

fn is_base85_char(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&()*+-;<=>?@^_`{|}~".contains(&byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(text: &str) -> Result<HunkRange<'_>, DiffErrorKind> {
        parse_hunk_header(text.as_bytes())
    }

    fn hunk(old_start: u32, old_count: u32, new_start: u32, new_count: u32) -> Hunk {
        Hunk {
            old_start,
            old_count,
            new_start,
            new_count,
            section: String::new(),
            lines: Vec::new(),
            diff_line: 1,
        }
    }

    #[test]
    fn hunk_header_with_counts_and_section() {
        let range = header("@@ -10,7 +12,8 @@ def create_charge(amount):");
        assert_eq!(
            range,
            Ok(HunkRange {
                old_start: 10,
                old_count: 7,
                new_start: 12,
                new_count: 8,
                section: b"def create_charge(amount):",
            })
        );
    }

    #[test]
    fn hunk_header_counts_default_to_one() {
        let range = header("@@ -3 +4 @@");
        assert_eq!(
            range.map(|r| (
                r.old_start,
                r.old_count,
                r.new_start,
                r.new_count,
                r.section
            )),
            Ok((3, 1, 4, 1, &b""[..]))
        );
        assert!(header("@@ -0,0 +1,2 @@").is_ok());
    }

    #[test]
    fn hunk_header_rejects_bad_syntax() {
        for text in [
            "@@ -1 +1",
            "@@ -1 +1 @",
            "@@ -a +1 @@",
            "@@ -1, +1 @@",
            "@@ 1 +1 @@",
            "@@ -1 -1 @@",
            "@@ -0,1 +1 @@",
            "@@ -0,0 +0,0 @@",
        ] {
            assert!(
                matches!(header(text), Err(DiffErrorKind::BadHunkHeader { .. })),
                "{text}"
            );
        }
    }

    #[test]
    fn hunk_header_numbers_overflow_into_an_error() {
        assert_eq!(
            header("@@ -99999999999999999999999 +1 @@"),
            Err(DiffErrorKind::NumberTooLarge)
        );
        assert_eq!(
            header("@@ -1,4294967296 +1 @@"),
            Err(DiffErrorKind::NumberTooLarge)
        );
        assert!(header("@@ -1,4294967295 +1 @@").is_ok());
    }

    #[test]
    fn hunks_must_move_forward_on_both_sides() {
        assert!(in_order(&hunk(1, 3, 1, 3), &hunk(4, 1, 4, 1)));
        assert!(!in_order(&hunk(1, 3, 1, 3), &hunk(3, 1, 4, 1)));
        assert!(!in_order(&hunk(1, 3, 1, 3), &hunk(4, 1, 3, 1)));
        // An insertion after line 5, then a change of line 6.
        assert!(in_order(&hunk(5, 0, 6, 1), &hunk(6, 1, 8, 1)));
        // An insertion after line 5, then a change covering line 5.
        assert!(!in_order(&hunk(5, 0, 6, 1), &hunk(5, 2, 8, 1)));
    }

    #[test]
    fn index_line_forms() {
        let index = parse_index(b"83db48f..bf269f4 100644", 7);
        assert_eq!(
            index,
            Some(IndexLine {
                old: "83db48f".into(),
                new: "bf269f4".into(),
                mode: Some("100644".into()),
                diff_line: 7,
            })
        );
        assert_eq!(
            parse_index(b"0000000..e69de29", 1).and_then(|i| i.mode),
            None
        );
        assert!(parse_index(b"abc,def..012", 1).is_none());
        assert!(parse_index(b"abc..", 1).is_none());
        assert!(parse_index(b"abc..def 10064x", 1).is_none());
    }

    #[test]
    fn percent_and_mode() {
        assert_eq!(parse_percent(b"100%"), Some(100));
        assert_eq!(parse_percent(b"87%"), Some(87));
        assert_eq!(parse_percent(b"101%"), None);
        assert_eq!(parse_percent(b"87"), None);
        assert_eq!(parse_percent(b"99999999999999999999999%"), None);
        assert_eq!(parse_mode(b"100755"), Some("100755".into()));
        assert_eq!(parse_mode(b"100855"), None);
        assert_eq!(parse_mode(b""), None);
    }

    #[test]
    fn base85_lines() {
        assert!(is_base85_line(b"HcmV?d00001"));
        let full = format!("z{}", "0".repeat(65));
        assert!(is_base85_line(full.as_bytes()));
        assert!(!is_base85_line(
            full.get(..65).unwrap_or_default().as_bytes()
        ));
        assert!(!is_base85_line(b"diff --git a/x b/x"));
        assert!(!is_base85_line(b"Hcm"));
        assert!(!is_base85_line(b"0cmV?d"));
    }

    #[test]
    fn split_line_keeps_carriage_return() {
        assert_eq!(split_line(b"a\r\nb"), Some((&b"a\r"[..], &b"b"[..])));
        assert_eq!(split_line(b"b"), Some((&b"b"[..], &b""[..])));
        assert_eq!(split_line(b""), None);
    }

    fn parse(text: &str) -> Result<Patch, DiffError> {
        parse_patch(text.as_bytes())
    }

    #[test]
    fn minimal_plain_diff() {
        let patch = parse("--- x.py\n+++ x.py\n@@ -1 +1 @@\n-a\n+b\n");
        let files = patch.map(|p| p.files).unwrap_or_default();
        assert_eq!(files.len(), 1);
        assert_eq!(files.first().map(|f| f.path()), Some("x.py"));
        assert_eq!(files.first().map(|f| f.status), Some(FileStatus::Modified));
    }

    #[test]
    fn empty_line_is_context_only_while_both_sides_want_lines() {
        let patch = parse("--- x\n+++ x\n@@ -1,2 +1,2 @@\n\n-a\n+b\n");
        let kinds: Vec<_> = patch
            .iter()
            .flat_map(|p| &p.files)
            .flat_map(|f| &f.hunks)
            .flat_map(|h| &h.lines)
            .map(|l| (l.kind, l.text.clone()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (LineKind::Context, String::new()),
                (LineKind::Removed, "a".into()),
                (LineKind::Added, "b".into())
            ]
        );
        // Only the new side still wants a line: the blank line ends the hunk too early.
        let error = parse("--- x\n+++ x\n@@ -1 +1,2 @@\n-a\n\n+b\n").err();
        assert_eq!(
            error.as_ref().map(DiffError::kind_code),
            Some("hunk_too_short")
        );
        assert_eq!(error.as_ref().map(DiffError::line), Some(5));
    }

    #[test]
    fn no_newline_marker_needs_a_line() {
        let error =
            parse("--- x\n+++ x\n@@ -1 +1 @@\n\\ No newline at end of file\n-a\n+b\n").err();
        assert_eq!(
            error.as_ref().map(DiffError::kind_code),
            Some("unexpected_line")
        );
        assert_eq!(error.as_ref().map(DiffError::line), Some(4));
    }

    #[test]
    fn huge_claimed_counts_do_not_allocate() {
        let error = parse("--- x\n+++ x\n@@ -1,4294967295 +1,4294967295 @@\n a\n").err();
        assert_eq!(
            error.as_ref().map(DiffError::kind_code),
            Some("hunk_too_short")
        );
        assert_eq!(error.as_ref().map(DiffError::line), Some(4));
    }

    #[test]
    fn rename_from_without_rename_to() {
        let error = parse("diff --git a/x b/y\nrename from x\n").err();
        assert_eq!(error.as_ref().map(DiffError::kind_code), Some("bad_header"));
        assert_eq!(error.as_ref().map(DiffError::line), Some(2));
    }
}
