//! Which lines a diff added or removed, and how old line numbers map to new ones.

use crate::diff::{Hunk, LineKind};

/// One hunk's spans on both sides, with the line-by-line pairing of its context lines.
#[derive(Debug, Clone)]
struct Span {
    old_first: u32,
    old_len: u32,
    new_first: u32,
    new_len: u32,
    /// For each new-side line of the hunk: the old line it continues, if it is context.
    new_to_old: Vec<Option<u32>>,
    old_to_new: Vec<Option<u32>>,
}

/// Line bookkeeping of one file's change. Built once from the hunks; queries are a binary search.
#[derive(Debug, Clone, Default)]
pub struct LineMap {
    spans: Vec<Span>,
    added: Vec<u32>,
    removed: Vec<u32>,
}

/// Line number of the first line covered by a hunk side (`-5,0` inserts after line 5).
pub(crate) fn first_line(start: u32, count: u32) -> u32 {
    if count == 0 {
        start.saturating_add(1)
    } else {
        start.max(1)
    }
}

impl LineMap {
    pub fn new(hunks: &[Hunk]) -> Self {
        let mut map = LineMap::default();
        for hunk in hunks {
            let old_first = first_line(hunk.old_start, hunk.old_count);
            let new_first = first_line(hunk.new_start, hunk.new_count);
            let (mut old, mut new) = (old_first, new_first);
            let mut new_to_old = Vec::new();
            let mut old_to_new = Vec::new();
            for line in &hunk.lines {
                match line.kind {
                    LineKind::Context => {
                        new_to_old.push(Some(old));
                        old_to_new.push(Some(new));
                        old = old.saturating_add(1);
                        new = new.saturating_add(1);
                    }
                    LineKind::Added => {
                        map.added.push(new);
                        new_to_old.push(None);
                        new = new.saturating_add(1);
                    }
                    LineKind::Removed => {
                        map.removed.push(old);
                        old_to_new.push(None);
                        old = old.saturating_add(1);
                    }
                }
            }
            map.spans.push(Span {
                old_first,
                old_len: old - old_first,
                new_first,
                new_len: new - new_first,
                new_to_old,
                old_to_new,
            });
        }
        map.added.sort_unstable();
        map.removed.sort_unstable();
        map
    }

    /// New-side lines the diff added, ascending.
    pub fn added(&self) -> &[u32] {
        &self.added
    }

    /// Old-side lines the diff removed, ascending.
    pub fn removed(&self) -> &[u32] {
        &self.removed
    }

    pub fn is_added(&self, new_line: u32) -> bool {
        self.added.binary_search(&new_line).is_ok()
    }

    /// Whether any line in `first..=last` (new side) was added.
    pub fn touches_added(&self, first: u32, last: u32) -> bool {
        let at = self.added.partition_point(|&l| l < first);
        self.added.get(at).is_some_and(|&l| l <= last)
    }

    /// Whether any line in `first..=last` (old side) was removed.
    pub fn touches_removed(&self, first: u32, last: u32) -> bool {
        let at = self.removed.partition_point(|&l| l < first);
        self.removed.get(at).is_some_and(|&l| l <= last)
    }

    /// The old line a new line continues; `None` for an added line.
    pub fn new_to_old(&self, new_line: u32) -> Option<u32> {
        let at = self.spans.partition_point(|s| s.new_first <= new_line);
        let Some(span) = at.checked_sub(1).and_then(|i| self.spans.get(i)) else {
            return Some(new_line);
        };
        let offset = new_line - span.new_first;
        if offset < span.new_len {
            return span.new_to_old.get(offset as usize).copied().flatten();
        }
        let old_end = span.old_first + span.old_len;
        Some(old_end + (new_line - (span.new_first + span.new_len)))
    }

    /// The new line an old line became; `None` for a removed line.
    pub fn old_to_new(&self, old_line: u32) -> Option<u32> {
        let at = self.spans.partition_point(|s| s.old_first <= old_line);
        let Some(span) = at.checked_sub(1).and_then(|i| self.spans.get(i)) else {
            return Some(old_line);
        };
        let offset = old_line - span.old_first;
        if offset < span.old_len {
            return span.old_to_new.get(offset as usize).copied().flatten();
        }
        let new_end = span.new_first + span.new_len;
        Some(new_end + (old_line - (span.old_first + span.old_len)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::HunkLine;

    fn hunk(old: (u32, u32), new: (u32, u32), body: &str) -> Hunk {
        let lines = body
            .chars()
            .map(|c| HunkLine {
                kind: match c {
                    '+' => LineKind::Added,
                    '-' => LineKind::Removed,
                    _ => LineKind::Context,
                },
                text: String::new(),
                no_newline: false,
                diff_line: 0,
            })
            .collect();
        Hunk {
            old_start: old.0,
            old_count: old.1,
            new_start: new.0,
            new_count: new.1,
            section: String::new(),
            lines,
            diff_line: 0,
        }
    }

    #[test]
    fn maps_lines_around_and_inside_hunks() {
        // Lines 1-9 unchanged; at 10 one line replaced by two; then unchanged.
        let map = LineMap::new(&[hunk((9, 3), (9, 4), " -++ ")]);
        assert_eq!(map.added(), [10, 11]);
        assert_eq!(map.removed(), [10]);
        assert_eq!(map.new_to_old(5), Some(5));
        assert_eq!(map.new_to_old(9), Some(9));
        assert_eq!(map.new_to_old(10), None);
        assert_eq!(map.new_to_old(12), Some(11));
        assert_eq!(map.new_to_old(20), Some(19));
        assert_eq!(map.old_to_new(10), None);
        assert_eq!(map.old_to_new(11), Some(12));
        assert_eq!(map.old_to_new(30), Some(31));
        assert!(map.touches_added(11, 15));
        assert!(!map.touches_added(12, 15));
    }

    #[test]
    fn pure_insertion_and_deletion_hunks() {
        let map = LineMap::new(&[hunk((3, 0), (4, 2), "++"), hunk((10, 2), (11, 0), "--")]);
        assert_eq!(map.added(), [4, 5]);
        assert_eq!(map.removed(), [10, 11]);
        assert_eq!(map.new_to_old(6), Some(4));
        // Old 10-11 are gone, so old 12 is new 12 again (two lines in, two out).
        assert_eq!(map.new_to_old(12), Some(12));
        assert_eq!(map.old_to_new(9), Some(11));
        assert_eq!(map.old_to_new(12), Some(12));
        assert_eq!(map.old_to_new(10), None);
    }
}
