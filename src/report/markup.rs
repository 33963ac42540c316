//! Markdown that PR content cannot break: catalogue templates are trusted Markdown, while the
//! values filled into them (paths, identifiers, code, description text) come from the pull
//! request and are escaped for the place they land in.
//!
//! Never a table here: a `|` in a value would be the one thing escaping cannot make safe.

use crate::rules::catalogue::fill;

/// Longest a value from the PR may be in prose or a code span: a 10,000-character line of the
/// diff must not turn a review comment into a wall (GitHub also caps a comment at 65,536).
const MAX_VALUE_CHARS: usize = 160;

/// A value from the PR as an inline code span, whatever backticks or newlines it holds.
pub fn code(value: &str) -> String {
    let flat = truncate(&flatten(value));
    if flat.is_empty() {
        return String::new();
    }
    let fence = "`".repeat(longest_run(&flat, '`') + 1);
    // A span that starts or ends with a backtick needs a space, or it merges with the fence;
    // CommonMark strips exactly one space from each side.
    let pad = if flat.starts_with('`') || flat.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{flat}{pad}{fence}")
}

/// A fenced code block whose fence is longer than any backtick run inside.
pub fn fenced(info: &str, body: &str) -> String {
    let fence = "`".repeat((longest_run(body, '`') + 1).max(3));
    let body = body.trim_end_matches('\n');
    format!("{fence}{info}\n{body}\n{fence}")
}

/// Plain text from the PR (a description sentence, an error message) as inert Markdown prose.
pub fn prose(value: &str) -> String {
    let flat = truncate(&flatten(value));
    let mut out = String::with_capacity(flat.len());
    for (i, c) in flat.chars().enumerate() {
        let special = matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '#' | '|' | '<' | '>' | '~' | '&'
        );
        // `-` and `+` only start a list; mid-line they are plain text.
        if special || (i == 0 && matches!(c, '-' | '+')) {
            out.push('\\');
        }
        out.push(c);
        // `@name` would notify someone and `#12` would cross-link an issue: a zero-width space
        // keeps the text readable but not a mention or a reference.
        if c == '@' || c == '#' {
            out.push('\u{200B}');
        }
    }
    out
}

/// A catalogue value as a rule wrote it: prose that may hold `code spans` of its own. Code
/// spans keep their meaning (re-fenced safely), the rest is escaped.
pub fn inline(value: &str) -> String {
    let flat = flatten(value);
    split_code_spans(&flat)
        .into_iter()
        .map(|segment| match segment {
            Segment::Prose(text) => prose(text),
            Segment::Code(text) => code(text),
        })
        .collect()
}

/// Fills a one-line catalogue template for Markdown: a value inside one of the template's code
/// spans goes in raw and the span is re-fenced; a value in prose is escaped.
pub fn fill_line(template: &str, args: &[(&str, String)]) -> String {
    let raw: Vec<(&str, String)> = args.iter().map(|(k, v)| (*k, flatten(v))).collect();
    let escaped: Vec<(&str, String)> = args.iter().map(|(k, v)| (*k, inline(v))).collect();
    split_code_spans(template)
        .into_iter()
        .map(|segment| match segment {
            Segment::Prose(text) => fill(text, &escaped),
            Segment::Code(text) => code(&fill(text, &raw)),
        })
        .collect()
}

/// Fills a multi-line catalogue template (a suggestion, a test sketch): fenced blocks get the raw
/// values and a fence longer than anything inside; other lines are filled as `fill_line`.
pub fn fill_block(template: &str, args: &[(&str, String)]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut lines = template.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            let ticks = 3 + info.chars().take_while(|&c| c == '`').count();
            let info = info.trim_start_matches('`').trim();
            let mut body = Vec::new();
            for inner in lines.by_ref() {
                if inner.trim_start().starts_with(&"`".repeat(ticks)) {
                    break;
                }
                body.push(inner);
            }
            let code = fill(&body.join("\n"), args);
            out.push(fenced(info, &code));
        } else {
            out.push(fill_line(line, args));
        }
    }
    out.join("\n")
}

/// Text for an HTML context GitHub keeps (`<summary>`): no tags, no entities.
pub fn html(value: &str) -> String {
    flatten(value)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('`', "")
}

enum Segment<'a> {
    Prose(&'a str),
    Code(&'a str),
}

/// Splits text into prose and CommonMark code spans (a run of n backticks closed by a run of
/// exactly n). An unclosed run is prose, as CommonMark reads it.
fn split_code_spans(text: &str) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    let mut prose_start = 0;
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < bytes.len() {
        if bytes.get(i) != Some(&b'`') {
            i += 1;
            continue;
        }
        let open = run_len(bytes, i);
        let content_start = i + open;
        match find_closing(bytes, content_start, open) {
            Some(close) => {
                if prose_start < i {
                    out.push(Segment::Prose(text.get(prose_start..i).unwrap_or("")));
                }
                out.push(Segment::Code(text.get(content_start..close).unwrap_or("")));
                i = close + open;
                prose_start = i;
            }
            None => i = content_start,
        }
    }
    if prose_start < text.len() {
        out.push(Segment::Prose(text.get(prose_start..).unwrap_or("")));
    }
    out
}

fn run_len(bytes: &[u8], at: usize) -> usize {
    bytes
        .get(at..)
        .map_or(0, |rest| rest.iter().take_while(|&&b| b == b'`').count())
}

fn find_closing(bytes: &[u8], from: usize, len: usize) -> Option<usize> {
    let mut j = from;
    while j < bytes.len() {
        if bytes.get(j) == Some(&b'`') {
            let run = run_len(bytes, j);
            if run == len {
                return Some(j);
            }
            j += run;
        } else {
            j += 1;
        }
    }
    None
}

fn longest_run(text: &str, c: char) -> usize {
    let (mut best, mut run) = (0, 0);
    for ch in text.chars() {
        run = if ch == c { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

/// One line: a value never starts a new Markdown block.
fn flatten(value: &str) -> String {
    value
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn truncate(value: &str) -> String {
    match value.char_indices().nth(MAX_VALUE_CHARS) {
        Some((at, _)) => format!("{}…", value.get(..at).unwrap_or(value)),
        None => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_span_outgrows_backticks_inside() {
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("`x`"), "`` `x` ``");
        assert_eq!(code("a\nb"), "`a b`");
    }

    #[test]
    fn fence_outgrows_backtick_runs() {
        assert_eq!(
            fenced("python", "x = '````'"),
            "`````python\nx = '````'\n`````"
        );
    }

    #[test]
    fn prose_neutralises_mentions_tags_and_links() {
        let out = prose("@octocat <details> [x](http://e) #12");
        assert!(out.contains("@\u{200B}octocat"), "{out}");
        assert!(out.contains("\\<details\\>"), "{out}");
        assert!(out.contains("\\[x\\](http"), "{out}");
        assert!(out.contains("#\u{200B}12"), "{out}");
    }

    #[test]
    fn template_code_spans_are_refenced_with_the_raw_value() {
        let args = [("key", "a`b".to_string()), ("who", "@me".to_string())];
        assert_eq!(
            fill_line("`{key}` by {who}", &args),
            "``a`b`` by @\u{200B}me"
        );
    }

    #[test]
    fn values_holding_their_own_code_spans_keep_them() {
        assert_eq!(inline("`except Exception`"), "`except Exception`");
        assert_eq!(inline("side `abc` x"), "side `abc` x");
    }

    #[test]
    fn long_values_are_cut_on_a_char_boundary() {
        let long = "я".repeat(500);
        let out = code(&long);
        assert!(out.chars().count() < 200);
        assert!(out.ends_with("…`"));
    }
}
