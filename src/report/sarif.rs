//! `--format sarif`: SARIF 2.1.0 for GitHub code scanning (`upload-sarif`). One run for the whole
//! review; every catalogue rule in `tool.driver.rules`; results anchored on the first changed
//! line they are about, with GitHub's line hash and a fingerprint of our own (rule, function,
//! normalised code) that survives edits elsewhere in the file.

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::{Value, json};
use sha1::{Digest, Sha1};

use super::fingerprint::line_hashes;
use super::markup;
use super::texts::{resolve, summary, verdict_words};
use crate::review::{Finding, Lang, Review, Severity, SourceFile};
use crate::rules::{self, catalogue::Entry};

const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";
/// The key of our own fingerprint in `partialFingerprints`.
pub const FINGERPRINT_KEY: &str = "payreview/v1";

pub fn render(review: &Review, lang: Lang, out: &mut dyn Write) -> std::io::Result<()> {
    let ids: Vec<&str> = rules::ALL.iter().map(|r| r.id).collect();
    let rules: Vec<Value> = ids
        .iter()
        .filter_map(|id| rules::entry(id))
        .map(|e| rule(e, lang))
        .collect();
    let mut hashes: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let results: Vec<Value> = review
        .findings
        .iter()
        .map(|f| {
            let source = review.sources.get(&f.path);
            let line_hash = anchor(f, source).and_then(|line| {
                let source = source.filter(|s| !s.partial)?;
                let file = hashes
                    .entry(f.path.as_str())
                    .or_insert_with(|| line_hashes(&source.text));
                file.get(usize::try_from(line).ok()?.checked_sub(1)?)
                    .cloned()
            });
            let own = own_fingerprint(f, source);
            let n = seen.entry(own.clone()).or_insert(0);
            *n += 1;
            let index = ids.iter().position(|id| *id == f.rule);
            result(f, lang, index, line_hash, format!("{own}:{n}"), source)
        })
        .collect();
    let sarif = json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "payreview",
                "version": env!("CARGO_PKG_VERSION"),
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "informationUri": env!("CARGO_PKG_REPOSITORY"),
                "rules": rules,
            }},
            "results": results,
            "properties": {
                "verdict": verdict_words(review.decision(), lang),
                "summary": summary(review, lang),
            },
        }],
    });
    serde_json::to_writer_pretty(&mut *out, &sarif)?;
    out.write_all(b"\n")
}

fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Blocker => "error",
        Severity::Important => "warning",
        Severity::Nit | Severity::Info => "note",
    }
}

fn problem_severity(severity: Severity) -> &'static str {
    match severity {
        Severity::Blocker => "error",
        Severity::Important => "warning",
        Severity::Nit | Severity::Info => "recommendation",
    }
}

fn rule(entry: &Entry, lang: Lang) -> Value {
    let meta = &entry.meta;
    let mut tags = meta.tags.clone();
    let mut properties = json!({
        "precision": meta.precision,
        "problem.severity": problem_severity(meta.severity),
    });
    if meta.severity == Severity::Blocker {
        // A blocker can lose money: GitHub ranks it with the security alerts, as "high".
        // A rule may carry the tag already: SARIF wants tags unique.
        if !tags.iter().any(|t| t == "security") {
            tags.push("security".to_string());
        }
        properties["security-severity"] = json!("8.0");
    }
    properties["tags"] = json!(tags);
    let title = meta.title.get(lang);
    let rationale = entry.rationale.get(lang);
    let suggestion = meta.suggestion.as_ref().map(|s| s.get(lang));
    json!({
        "id": meta.id,
        "name": meta.name,
        "shortDescription": {"text": title},
        "fullDescription": {"text": rationale},
        "help": {
            "text": help_text(rationale, suggestion),
            "markdown": help_markdown(entry, lang),
        },
        "helpUri": crate::report::rule_page_uri(&meta.id),
        "defaultConfiguration": {"level": level(meta.severity)},
        "properties": properties,
    })
}

fn help_text(rationale: &str, suggestion: Option<&str>) -> String {
    match suggestion {
        Some(s) => format!("{rationale}\n\n{s}"),
        None => rationale.to_string(),
    }
}

fn help_markdown(entry: &Entry, lang: Lang) -> String {
    let (bad, good) = match lang {
        Lang::En => ("Bad", "Good"),
        Lang::Ru => ("Плохо", "Хорошо"),
    };
    let meta = &entry.meta;
    let fenced = |example: &crate::rules::catalogue::Example| {
        example
            .shown()
            .into_iter()
            .map(|(lang, code)| markup::fenced(lang, code))
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    let mut text = format!(
        "**{}**\n\n{}\n\n#### {bad}\n\n{}\n\n#### {good}\n\n{}",
        meta.title.get(lang),
        entry.rationale.get(lang),
        fenced(&entry.bad),
        fenced(&entry.good),
    );
    if let Some(s) = &meta.suggestion {
        text.push_str("\n\n");
        text.push_str(s.get(lang));
    }
    text
}

/// The line a result is shown at: the first added line of its range (code scanning shows
/// alerts on the pull request's changed lines), else where the range starts.
fn anchor(f: &Finding, source: Option<&SourceFile>) -> Option<u32> {
    let (start, end) = f.lines?;
    Some(
        source
            .and_then(|s| s.first_added_in(start, end))
            .unwrap_or(start),
    )
}

fn result(
    f: &Finding,
    lang: Lang,
    index: Option<usize>,
    line_hash: Option<String>,
    own: String,
    source: Option<&SourceFile>,
) -> Value {
    let texts = resolve(f, lang);
    let mut location = json!({
        "artifactLocation": {"uri": uri(&f.path), "uriBaseId": "%SRCROOT%"},
    });
    if let (Some(start), Some((_, end))) = (anchor(f, source), f.lines) {
        location["region"] = json!({"startLine": start, "endLine": end.max(start)});
    }
    let mut fingerprints = json!({ FINGERPRINT_KEY: own });
    if let Some(hash) = line_hash {
        fingerprints["primaryLocationLineHash"] = json!(hash);
    }
    let mut value = json!({
        "ruleId": f.rule,
        "level": level(f.severity),
        "message": {"text": format!("{}: {}", texts.title, texts.message)},
        "locations": [{"physicalLocation": location}],
        "partialFingerprints": fingerprints,
        "properties": {"severity": f.severity.as_str()},
    });
    if let Some(index) = index {
        value["ruleIndex"] = json!(index);
    }
    let related: Vec<Value> =
        super::texts::resolve_evidence(f, lang, crate::rules::catalogue::fill)
            .into_iter()
            .enumerate()
            .map(|(id, e)| {
                json!({
                    "id": id,
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri(&e.path), "uriBaseId": "%SRCROOT%"},
                        "region": {"startLine": e.line},
                    },
                    "message": {"text": e.text},
                })
            })
            .collect();
    if !related.is_empty() {
        value["relatedLocations"] = json!(related);
    }
    value
}

/// Rule, file, enclosing function and normalised code: what the finding is about, not where it
/// is, so a line added above it does not make it a new alert. Without a key (a rule that
/// reports lines, not a node) the whitespace-free text of its first line stands in.
pub(super) fn own_fingerprint(f: &Finding, source: Option<&SourceFile>) -> String {
    let key = if f.key.is_empty() {
        f.lines
            .and_then(|(start, _)| {
                let text = source?
                    .text
                    .lines()
                    .nth(usize::try_from(start).ok()?.checked_sub(1)?)?;
                Some(text.split_whitespace().collect::<String>())
            })
            .unwrap_or_default()
    } else {
        f.key.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let mut hasher = Sha1::new();
    for part in [f.rule, f.path.as_str(), f.function.as_str(), key.as_str()] {
        hasher.update(part.as_bytes());
        hasher.update([0u8]);
    }
    hasher
        .finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A repository-relative path as a URI reference: unreserved characters and `/` as they are,
/// everything else percent-encoded (a space, `#`, `%` or non-ASCII in a file name).
fn uri(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for byte in path.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_percent_encoded() {
        assert_eq!(uri("app/my file#1.py"), "app/my%20file%231.py");
        assert!(uri("app/платёж.py").starts_with("app/%D0%BF"));
    }
}
