//! Builders for the fuzz targets in `fuzz/` (and the property tests): a `Review` made from
//! arbitrary bytes, so that emitters meet every rule with hostile paths and arguments.

use crate::config::Format;
use crate::review::{Finding, Review, ReviewError, Severity};

/// Every output format.
pub const FORMATS: &[Format] = &[
    Format::Json,
    Format::Text,
    Format::Markdown,
    Format::Sarif,
    Format::Github,
    Format::Gitlab,
];

const SEVERITIES: [Severity; 4] = [
    Severity::Info,
    Severity::Nit,
    Severity::Important,
    Severity::Blocker,
];

/// Argument names any catalogue text may use; unknown ones are simply not used.
const ARG_NAMES: &[&str] = &[
    "key",
    "caught",
    "function",
    "annotation",
    "caller",
    "hash",
    "diff_line",
    "sides",
    "line",
    "in_diff",
    "on_disk",
    "rules",
];

/// A review whose findings come from `data`: records separated by 0xFF; in each, byte 0 picks
/// the rule, byte 1 the severity, bytes 2-5 the lines, and the rest, split at NUL bytes, the path
/// and argument values.
pub fn review_from_bytes(data: &[u8]) -> Review {
    let mut findings = Vec::new();
    let mut errors = Vec::new();
    for record in data.split(|b| *b == 0xFF).take(64) {
        let byte = |i: usize| record.get(i).copied().unwrap_or(0);
        let rules = crate::rules::ALL;
        let Some(rule) = rules.get(usize::from(byte(0)) % rules.len().max(1)) else {
            continue;
        };
        let start = u32::from(u16::from_le_bytes([byte(2), byte(3)]));
        let len = u32::from(byte(4));
        let mut parts = record.get(5..).unwrap_or(&[]).split(|b| *b == 0);
        let path = String::from_utf8_lossy(parts.next().unwrap_or(&[])).into_owned();
        let args = ARG_NAMES
            .iter()
            .zip(parts.by_ref())
            .map(|(name, value)| (*name, String::from_utf8_lossy(value).into_owned()))
            .collect();
        if byte(1) & 0x80 != 0 {
            errors.push(ReviewError::plain(
                path.clone(),
                String::from_utf8_lossy(record),
            ));
        }
        findings.push(Finding {
            rule: rule.id,
            severity: SEVERITIES[usize::from(byte(1)) % SEVERITIES.len()],
            path,
            lines: (byte(1) & 0x40 == 0).then_some((start, start.saturating_add(len))),
            args,
            notes: Vec::new(),
            function: String::new(),
            key: String::new(),
            evidence: Vec::new(),
            point: None,
        });
    }
    Review {
        findings,
        errors,
        ..Review::default()
    }
}
