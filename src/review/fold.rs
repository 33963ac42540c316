//! Points a reviewer makes once per file. Some rules find the same problem in every test of a
//! file (an integration suite whose tests all reach the gateway unmocked) or every call of a
//! client module (no endpoint passes a timeout): one comment at the first, naming the others,
//! says it; twenty identical comments bury the rest of the review.
//! A rule asks for it by giving the finding its `point`.
//!
//! Done after the old version's findings are taken out and suppressions applied, so that what is
//! folded is what the change caused and the author did not silence.

use std::collections::BTreeMap;

use super::Finding;

/// Most folded places cited as evidence: enough to find them, the count says the rest.
const MAX_CITED: usize = 5;

/// Folds the line findings that make one `point` in one file (same rule, path and point) into
/// the first of them, which then cites the others (`evidence_same_file`, with the other test's
/// name, its function or its call as `test_name`) and says how many there are (`same_file`).
/// Findings with no point, or about a whole file, are left as they are.
pub fn once_per_file(findings: Vec<Finding>) -> Vec<Finding> {
    let mut groups: BTreeMap<(&'static str, String, &'static str), Vec<Finding>> = BTreeMap::new();
    let mut out = Vec::with_capacity(findings.len());
    for f in findings {
        match f.point.filter(|_| f.lines.is_some()) {
            Some(point) => groups
                .entry((f.rule, f.path.clone(), point))
                .or_default()
                .push(f),
            None => out.push(f),
        }
    }
    for (_, mut same) in groups {
        same.sort_by(|a, b| (a.lines, &a.key).cmp(&(b.lines, &b.key)));
        let mut same = same.into_iter();
        let Some(mut first) = same.next() else {
            continue;
        };
        let others = same.len();
        if others > 0 {
            first.arg("same_file", others.to_string());
            first.note("same_file");
            for other in same.take(MAX_CITED) {
                // The test, else the function, else (at module level) the call itself.
                let arg = |name: &str| {
                    other
                        .args
                        .iter()
                        .find(|(k, _)| *k == name)
                        .map(|(_, v)| v.clone())
                };
                let name = arg("test")
                    .or_else(|| (!other.function.is_empty()).then(|| other.function.clone()))
                    .or_else(|| arg("call"))
                    .unwrap_or_default();
                let line = other.lines.map_or(0, |(start, _)| start);
                first.evidence(
                    &other.path,
                    line,
                    "evidence_same_file",
                    vec![("test_name", name)],
                );
            }
        }
        out.push(first);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::Severity;

    fn finding(
        rule: &'static str,
        path: &str,
        line: u32,
        test: &str,
        point: &'static str,
    ) -> Finding {
        Finding {
            rule,
            severity: Severity::Important,
            path: path.to_string(),
            lines: Some((line, line + 3)),
            args: vec![("test", test.to_string())],
            notes: vec!["http"],
            function: test.to_string(),
            key: format!("http:{test}"),
            evidence: Vec::new(),
            point: (rule == "TEST001").then_some(point),
        }
    }

    #[test]
    fn tests_of_one_file_reaching_one_service_are_one_finding_citing_the_others() {
        let found = vec![
            finding("TEST001", "tests/test_pay.py", 30, "test_refund", "http"),
            finding("TEST001", "tests/test_pay.py", 10, "test_charge", "http"),
            finding("TEST001", "tests/test_pay.py", 50, "test_void", "http"),
        ];
        let folded = once_per_file(found);
        assert_eq!(folded.len(), 1);
        let kept = &folded[0];
        assert_eq!(
            kept.lines,
            Some((10, 13)),
            "the first test in the file speaks"
        );
        assert!(kept.notes.contains(&"same_file"));
        assert!(kept.args.contains(&("same_file", "2".to_string())));
        let cited: Vec<(u32, &str)> = kept
            .evidence
            .iter()
            .map(|e| (e.line, e.args[0].1.as_str()))
            .collect();
        assert_eq!(cited, vec![(30, "test_refund"), (50, "test_void")]);
    }

    #[test]
    fn other_files_services_and_rules_stay_apart() {
        let found = vec![
            finding("TEST001", "tests/test_pay.py", 10, "test_charge", "http"),
            finding("TEST001", "tests/test_pay.py", 20, "test_lock", "cache"),
            finding("TEST001", "tests/test_refund.py", 10, "test_refund", "http"),
            finding("ERR001", "tests/test_pay.py", 30, "helper", "http"),
            finding("ERR001", "tests/test_pay.py", 40, "other", "http"),
        ];
        let folded = once_per_file(found);
        assert_eq!(folded.len(), 5);
        assert!(
            folded
                .iter()
                .all(|f| f.evidence.is_empty() && !f.notes.contains(&"same_file"))
        );
    }

    #[test]
    fn a_long_suite_cites_a_few_and_counts_all() {
        let found: Vec<Finding> = (0..20)
            .map(|i| {
                finding(
                    "TEST001",
                    "tests/test_api.py",
                    10 * (i + 1),
                    &format!("test_{i:02}"),
                    "http",
                )
            })
            .collect();
        let folded = once_per_file(found);
        assert_eq!(folded.len(), 1);
        assert!(folded[0].args.contains(&("same_file", "19".to_string())));
        assert_eq!(folded[0].evidence.len(), MAX_CITED);
    }
}
