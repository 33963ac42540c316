//! Suppression comments: `# payreview: ignore[IDEM001] reason` (or `# noqa: IDEM001`) on a
//! finding's first line or the line above it. A suppression without a reason is itself a nit
//! (SUP001); one on a changed line that suppresses nothing is reported (SUP002), so they don't rot.

use super::{Finding, Severity};

/// One suppression comment.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Suppression {
    pub path: String,
    pub line: u32,
    /// Rule ids or prefixes it names.
    pub rules: Vec<String>,
    pub reason: Option<String>,
    /// Whether it suppressed a finding in this review.
    pub used: bool,
    #[serde(skip)]
    pub noqa: bool,
}

/// The suppressions written in `text` (a file's new version).
pub fn scan(path: &str, text: &str) -> Vec<Suppression> {
    let mut out = Vec::new();
    // Most files have neither marker: one search over the text instead of a look at each line.
    if !text.contains("payreview: ignore[") && !text.contains("noqa:") {
        return out;
    }
    for (index, line) in text.lines().enumerate() {
        let Some(hash) = line.find('#') else {
            continue;
        };
        let comment = &line[hash..];
        let line_no = u32::try_from(index + 1).unwrap_or(u32::MAX);
        if let Some(at) = comment.find("payreview: ignore[") {
            let rest = &comment[at + "payreview: ignore[".len()..];
            let Some(close) = rest.find(']') else {
                continue;
            };
            let reason = rest[close + 1..]
                .trim()
                .trim_start_matches(['-', ':', '—'])
                .trim();
            out.push(Suppression {
                path: path.to_string(),
                line: line_no,
                rules: ids(&rest[..close]),
                reason: (!reason.is_empty()).then(|| reason.to_string()),
                used: false,
                noqa: false,
            });
        } else if let Some(at) = comment.find("noqa:") {
            let rules = ids(&comment[at + "noqa:".len()..]);
            // `# noqa: E501` belongs to other linters; only our ids count.
            let ours: Vec<String> = rules
                .into_iter()
                .filter(|r| {
                    crate::rules::ALL
                        .iter()
                        .any(|rule| rule.id.starts_with(r.as_str()))
                })
                .collect();
            if !ours.is_empty() {
                out.push(Suppression {
                    path: path.to_string(),
                    line: line_no,
                    rules: ours,
                    reason: Some("noqa".to_string()),
                    used: false,
                    noqa: true,
                });
            }
        }
    }
    out
}

fn ids(list: &str) -> Vec<String> {
    list.split([',', ' '])
        .map(|s| s.trim().to_ascii_uppercase())
        .take_while(|s| s.is_empty() || s.chars().all(|c| c.is_ascii_alphanumeric()))
        .filter(|s| !s.is_empty())
        .collect()
}

/// Drops the findings a suppression covers and marks those suppressions used.
pub fn apply(findings: Vec<Finding>, suppressions: &mut [Suppression]) -> Vec<Finding> {
    findings
        .into_iter()
        .filter(|f| {
            let Some((first, _)) = f.lines else {
                return true;
            };
            let covering = suppressions.iter_mut().find(|s| {
                s.path == f.path
                    && (s.line == first || s.line + 1 == first)
                    && s.rules.iter().any(|r| f.rule.starts_with(r.as_str()))
            });
            match covering {
                Some(s) => {
                    s.used = true;
                    false
                }
                None => true,
            }
        })
        .collect()
}

/// SUP001/SUP002 findings for the suppressions on lines the change added.
pub fn findings(suppressions: &[Suppression], added: impl Fn(&str, u32) -> bool) -> Vec<Finding> {
    let mut out = Vec::new();
    for s in suppressions.iter().filter(|s| added(&s.path, s.line)) {
        let finding = |rule: &'static str| Finding {
            rule,
            severity: Severity::Nit,
            path: s.path.clone(),
            lines: Some((s.line, s.line)),
            args: vec![("rules", s.rules.join(", "))],
            notes: Vec::new(),
            function: String::new(),
            key: format!("{}:{}", s.line, s.rules.join(",")),
            evidence: Vec::new(),
            point: None,
        };
        if s.reason.is_none() {
            out.push(finding("SUP001"));
        }
        if !s.used {
            out.push(finding("SUP002"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_ids_and_reasons() {
        let text = "x = 1  # payreview: ignore[IDEM001, err] key is deterministic upstream\ny = 2  # payreview: ignore[RETRY004]\nz = 3  # noqa: E501, ERR001\nw = 4  # noqa: E501\n";
        let found = scan("a.py", text);
        assert_eq!(found.len(), 3);
        assert_eq!(found[0].rules, ["IDEM001", "ERR"]);
        assert_eq!(
            found[0].reason.as_deref(),
            Some("key is deterministic upstream")
        );
        assert_eq!(found[1].reason, None);
        assert_eq!(found[2].rules, ["ERR001"]);
        assert_eq!(found[2].line, 3);
    }
}
