//! `--format gitlab`: a GitLab Code Quality report (the `codequality` artifact), so findings show
//! in the merge request's widget and diff.

use std::collections::HashMap;
use std::io::Write;

use serde_json::{Value, json};

use super::sarif::own_fingerprint;
use super::texts::resolve;
use crate::review::{Lang, Review, Severity};

/// GitLab's severities: info, minor, major, critical, blocker.
fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Blocker => "blocker",
        Severity::Important => "major",
        Severity::Nit => "minor",
        Severity::Info => "info",
    }
}

pub fn render(review: &Review, lang: Lang, out: &mut dyn Write) -> std::io::Result<()> {
    // GitLab keys issues by fingerprint: equal ones (the same problem twice in a function) get
    // a counter so that none is dropped.
    let mut seen: HashMap<String, usize> = HashMap::new();
    let issues: Vec<Value> = review
        .findings
        .iter()
        .map(|f| {
            let texts = resolve(f, lang);
            let base = own_fingerprint(f, review.sources.get(&f.path));
            let n = seen.entry(base.clone()).or_default();
            *n += 1;
            let fingerprint = if *n == 1 { base } else { format!("{base}:{n}") };
            json!({
                "type": "issue",
                "check_name": f.rule,
                "description": format!("{}: {}", texts.title, texts.message),
                "categories": ["Bug Risk"],
                "severity": severity(f.severity),
                "fingerprint": fingerprint,
                "location": {
                    "path": f.path,
                    "lines": {"begin": f.lines.map_or(1, |(a, _)| a)},
                },
            })
        })
        .collect();
    serde_json::to_writer_pretty(&mut *out, &issues)?;
    out.write_all(b"\n")
}
