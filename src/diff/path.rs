//! File paths as diff headers write them.
//!
//! Owns the path syntax of `diff --git`, `---`/`+++`, `rename`/`copy` lines: git's C quoting,
//! `/dev/null`, the TAB-and-timestamp suffix of `diff -u`, and prefix stripping (`a/`/`b/`, or
//! `patch -p1` for plain diffs). Paths are bytes until the end, then decoded lossily, because
//! git's octal escapes may spell bytes that are not UTF-8.

/// Why a path could not be read; the parser turns it into `DiffErrorKind::BadPath`.
pub(crate) type PathError = &'static str;

/// A path as bytes, or `None` for `/dev/null`.
pub(crate) type RawPath = Option<Vec<u8>>;

/// The old and new path of a `diff --git` line, prefixes kept.
pub(crate) type PathPair = (Vec<u8>, Vec<u8>);

const DEV_NULL: &[u8] = b"/dev/null";

/// Decodes a C-quoted path; `input` starts at the opening `"`. Returns the bytes and the rest of
/// the input after the closing `"`.
pub(crate) fn unquote(input: &[u8]) -> Result<(Vec<u8>, &[u8]), PathError> {
    let Some((b'"', mut rest)) = input.split_first() else {
        return Err("expected a quoted path");
    };
    let mut out = Vec::with_capacity(rest.len().min(256));
    loop {
        let Some((&byte, after)) = rest.split_first() else {
            return Err("quoted path has no closing quote");
        };
        rest = after;
        match byte {
            b'"' => return Ok((out, rest)),
            b'\\' => {
                let (decoded, after) = unescape(rest)?;
                out.push(decoded);
                rest = after;
            }
            _ => out.push(byte),
        }
    }
}

/// Decodes one escape; `input` starts just after the backslash.
fn unescape(input: &[u8]) -> Result<(u8, &[u8]), PathError> {
    let Some((&first, rest)) = input.split_first() else {
        return Err("quoted path ends inside an escape");
    };
    let simple = match first {
        b'a' => Some(0x07),
        b'b' => Some(0x08),
        b'f' => Some(0x0c),
        b'n' => Some(b'\n'),
        b'r' => Some(b'\r'),
        b't' => Some(b'\t'),
        b'v' => Some(0x0b),
        b'"' => Some(b'"'),
        b'\\' => Some(b'\\'),
        _ => None,
    };
    if let Some(byte) = simple {
        return Ok((byte, rest));
    }
    // git always writes three octal digits (`\303`), the first at most 3 so it fits a byte.
    let Some(digits) = input.get(..3) else {
        return Err("unknown escape in quoted path");
    };
    let mut value: u32 = 0;
    for &digit in digits {
        if !(b'0'..=b'7').contains(&digit) {
            return Err("unknown escape in quoted path");
        }
        value = value * 8 + u32::from(digit - b'0');
    }
    let byte = u8::try_from(value).map_err(|_| "octal escape above \\377 in quoted path")?;
    Ok((byte, input.get(3..).unwrap_or_default()))
}

/// Quotes a path the way git does when it must (test helper and debugging aid).
#[cfg(test)]
pub(crate) fn quote(path: &[u8]) -> String {
    let mut out = String::from("\"");
    for &byte in path {
        match byte {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            0x20..=0x7e => out.push(char::from(byte)),
            _ => out.push_str(&format!("\\{byte:03o}")),
        }
    }
    out.push('"');
    out
}

/// The path of a `---`/`+++` line (the text after `--- `). An unquoted path ends at the first
/// TAB: `diff -u` puts the timestamp there, and git a lone TAB after paths with spaces.
pub(crate) fn parse_header_path(rest: &[u8]) -> Result<RawPath, PathError> {
    let path = if rest.first() == Some(&b'"') {
        let (path, after) = unquote(rest)?;
        if !after.is_empty() && after.first() != Some(&b'\t') {
            return Err("text after the closing quote");
        }
        path
    } else {
        let end = rest.iter().position(|&b| b == b'\t').unwrap_or(rest.len());
        rest.get(..end).unwrap_or_default().to_vec()
    };
    non_empty(path)
}

/// The path of a `rename from`/`copy to`… line: the rest of the line, quoted or not, no prefix.
pub(crate) fn parse_plain_path(rest: &[u8]) -> Result<Vec<u8>, PathError> {
    let path = if rest.first() == Some(&b'"') {
        let (path, after) = unquote(rest)?;
        if !after.is_empty() {
            return Err("text after the closing quote");
        }
        path
    } else {
        rest.to_vec()
    };
    match non_empty(path)? {
        Some(path) => Ok(path),
        None => Err("/dev/null is not a path here"),
    }
}

fn non_empty(path: Vec<u8>) -> Result<RawPath, PathError> {
    if path.is_empty() {
        Err("empty path")
    } else if path == DEV_NULL {
        Ok(None)
    } else {
        Ok(Some(path))
    }
}

/// The two paths of `diff --git <old> <new>` (the text after `diff --git `), prefixes kept.
/// `Ok(None)` when unquoted paths with spaces cannot be split (a rename): the caller then relies
/// on the `---`/`+++` or `rename` lines.
pub(crate) fn parse_git_line(rest: &[u8]) -> Result<Option<PathPair>, PathError> {
    if rest.first() == Some(&b'"') {
        let (old, after) = unquote(rest)?;
        let Some(new_part) = after.strip_prefix(b" ") else {
            return Err("expected a space between the two paths");
        };
        let new = parse_git_second(new_part)?;
        return Ok(Some((old, new)));
    }
    // git quotes any path holding a `"`, so in an unquoted first path the first `"` can only
    // open the second path.
    if let Some(quote_at) = rest.iter().position(|&b| b == b'"') {
        let old = rest.get(..quote_at).and_then(|s| s.strip_suffix(b" "));
        let Some(old) = old.filter(|s| !s.is_empty()) else {
            return Err("expected a space between the two paths");
        };
        let new = parse_git_second(rest.get(quote_at..).unwrap_or_default())?;
        return Ok(Some((old.to_vec(), new)));
    }
    Ok(split_unquoted(rest).map(|(old, new)| (old.to_vec(), new.to_vec())))
}

fn parse_git_second(input: &[u8]) -> Result<Vec<u8>, PathError> {
    if input.first() == Some(&b'"') {
        let (path, after) = unquote(input)?;
        if !after.is_empty() {
            return Err("text after the closing quote");
        }
        Ok(path)
    } else if input.is_empty() {
        Err("missing second path")
    } else {
        Ok(input.to_vec())
    }
}

/// Splits `old new` with no quoting. With one space it is that space; with more, the paths of a
/// non-rename are equal past their prefix, so the split is in the middle.
fn split_unquoted(rest: &[u8]) -> Option<(&[u8], &[u8])> {
    let spaces = rest.iter().filter(|&&b| b == b' ').count();
    if spaces == 1 {
        let at = rest.iter().position(|&b| b == b' ')?;
        let (old, new) = (rest.get(..at)?, rest.get(at + 1..)?);
        return (!old.is_empty() && !new.is_empty()).then_some((old, new));
    }
    if rest.len() % 2 == 0 {
        return None;
    }
    let mid = rest.len() / 2;
    if rest.get(mid) != Some(&b' ') {
        return None;
    }
    let (old, new) = (rest.get(..mid)?, rest.get(mid + 1..)?);
    let same = old == new || (has_git_prefixes(old, new) && old.get(2..) == new.get(2..));
    same.then_some((old, new))
}

/// Whether `diff --git` paths carry git's default `a/` and `b/` prefixes (not `--no-prefix`).
pub(crate) fn has_git_prefixes(old: &[u8], new: &[u8]) -> bool {
    old.starts_with(b"a/") && new.starts_with(b"b/")
}

/// Prefix test for a `diff --git` line whose paths could not be split.
pub(crate) fn git_line_has_prefixes(rest: &[u8]) -> bool {
    let rest = rest.strip_prefix(b"\"").unwrap_or(rest);
    rest.starts_with(b"a/") && (contains(rest, b" b/") || contains(rest, b" \"b/"))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Removes `prefix` (`a/` or `b/`) when present.
pub(crate) fn strip_prefix(path: Vec<u8>, prefix: &[u8]) -> Vec<u8> {
    match path.strip_prefix(prefix) {
        Some(rest) if !rest.is_empty() => rest.to_vec(),
        _ => path,
    }
}

/// `patch -p1` for plain diffs: when both paths have a first component, those differ and the
/// rest is equal (`old/app/x.py`, `new/app/x.py`), drop the first component. With `/dev/null` on
/// one side only git's `a/`/`b/` can be recognised.
pub(crate) fn strip_plain_prefixes(old: RawPath, new: RawPath) -> (RawPath, RawPath) {
    match (old, new) {
        (Some(old), Some(new)) => {
            match (split_first_component(&old), split_first_component(&new)) {
                (Some((old_head, old_tail)), Some((new_head, new_tail)))
                    if old_head != new_head && old_tail == new_tail =>
                {
                    (Some(old_tail.to_vec()), Some(new_tail.to_vec()))
                }
                _ => (Some(old), Some(new)),
            }
        }
        (Some(old), None) => (Some(strip_prefix(old, b"a/")), None),
        (None, Some(new)) => (None, Some(strip_prefix(new, b"b/"))),
        (None, None) => (None, None),
    }
}

fn split_first_component(path: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = path.iter().position(|&b| b == b'/')?;
    let (head, tail) = (path.get(..at)?, path.get(at + 1..)?);
    (!head.is_empty() && !tail.is_empty()).then_some((head, tail))
}

/// Decodes path bytes, reporting whether any were not UTF-8.
pub(crate) fn decode(path: Vec<u8>) -> (String, bool) {
    match String::from_utf8(path) {
        Ok(text) => (text, false),
        Err(error) => (String::from_utf8_lossy(error.as_bytes()).into_owned(), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unq(input: &str) -> Result<Vec<u8>, PathError> {
        unquote(input.as_bytes()).map(|(path, _)| path)
    }

    #[test]
    fn unquotes_octal_utf8() {
        assert_eq!(
            unq(r#""a/caf\303\251.py""#),
            Ok("a/café.py".as_bytes().to_vec())
        );
    }

    #[test]
    fn unquotes_simple_escapes() {
        assert_eq!(
            unq(r#""a\tb\nc\"d\\e\a\b\f\r\v""#),
            Ok(b"a\tb\nc\"d\\e\x07\x08\x0c\r\x0b".to_vec())
        );
    }

    #[test]
    fn octal_escape_may_produce_invalid_utf8() {
        let path = unq(r#""x\377y""#).unwrap_or_default();
        assert_eq!(path, b"x\xffy");
        assert_eq!(decode(path), ("x\u{fffd}y".to_string(), true));
    }

    #[test]
    fn rejects_bad_quoting() {
        assert!(unq(r#""abc"#).is_err());
        assert!(unq(r#""abc\"#).is_err());
        assert!(unq(r#""a\q""#).is_err());
        assert!(unq(r#""a\47""#).is_err());
        assert!(unq(r#""a\400""#).is_err());
        assert!(unq("abc").is_err());
    }

    #[test]
    fn quote_round_trips() {
        let raw = b"dir/ca\xc3\xa9 \"x\"\t\\\n\xff".to_vec();
        let quoted = quote(&raw);
        assert_eq!(unq(&quoted), Ok(raw));
    }

    #[test]
    fn header_path_drops_timestamp_and_knows_dev_null() {
        let p = parse_header_path(b"old/app/x.py\t2024-01-01 10:00:00.000000000 +0000");
        assert_eq!(p, Ok(Some(b"old/app/x.py".to_vec())));
        assert_eq!(parse_header_path(b"/dev/null"), Ok(None));
        assert_eq!(
            parse_header_path(b"/dev/null\t1970-01-01 00:00:00 +0000"),
            Ok(None)
        );
        assert_eq!(
            parse_header_path(b"a/my file.py\t"),
            Ok(Some(b"a/my file.py".to_vec()))
        );
        assert_eq!(
            parse_header_path(br#""b/tab\there""#),
            Ok(Some(b"b/tab\there".to_vec()))
        );
        assert!(parse_header_path(b"").is_err());
        assert!(parse_header_path(br#""a/x" junk"#).is_err());
    }

    #[test]
    fn git_line_simple_and_quoted() {
        let pair = |o: &str, n: &str| Ok(Some((o.as_bytes().to_vec(), n.as_bytes().to_vec())));
        assert_eq!(parse_git_line(b"a/x.py b/y.py"), pair("a/x.py", "b/y.py"));
        assert_eq!(
            parse_git_line(br#""a/caf\303\251.py" "b/caf\303\251.py""#),
            pair("a/café.py", "b/café.py")
        );
        assert_eq!(
            parse_git_line(br#"a/plain "b/tab\t""#),
            pair("a/plain", "b/tab\t")
        );
        assert_eq!(
            parse_git_line(br#""a/tab\t" b/plain"#),
            pair("a/tab\t", "b/plain")
        );
        assert!(parse_git_line(br#""a/x""b/y""#).is_err());
    }

    #[test]
    fn git_line_with_spaces_splits_in_the_middle() {
        assert_eq!(
            parse_git_line(b"a/my file.py b/my file.py"),
            Ok(Some((b"a/my file.py".to_vec(), b"b/my file.py".to_vec())))
        );
        assert_eq!(
            parse_git_line(b"my file.py my file.py"),
            Ok(Some((b"my file.py".to_vec(), b"my file.py".to_vec())))
        );
        // A rename with spaces is ambiguous: left to the rename lines.
        assert_eq!(parse_git_line(b"a/my file.py b/your file.py"), Ok(None));
        assert!(git_line_has_prefixes(b"a/my file.py b/your file.py"));
        assert!(!git_line_has_prefixes(b"my file.py your file.py"));
    }

    #[test]
    fn plain_prefixes_follow_patch_p1() {
        let s = |v: &str| Some(v.as_bytes().to_vec());
        assert_eq!(
            strip_plain_prefixes(s("old/app/x.py"), s("new/app/x.py")),
            (s("app/x.py"), s("app/x.py"))
        );
        assert_eq!(
            strip_plain_prefixes(s("app/x.py"), s("app/x.py")),
            (s("app/x.py"), s("app/x.py"))
        );
        assert_eq!(
            strip_plain_prefixes(s("x.py.orig"), s("x.py")),
            (s("x.py.orig"), s("x.py"))
        );
        assert_eq!(strip_plain_prefixes(None, s("b/x.py")), (None, s("x.py")));
        assert_eq!(strip_plain_prefixes(s("a/x.py"), None), (s("x.py"), None));
    }

    #[test]
    fn strip_prefix_keeps_bare_prefix() {
        assert_eq!(strip_prefix(b"a/x".to_vec(), b"a/"), b"x");
        assert_eq!(strip_prefix(b"x".to_vec(), b"a/"), b"x");
        assert_eq!(strip_prefix(b"a/".to_vec(), b"a/"), b"a/");
    }

    #[test]
    fn plain_path_rejects_empty_and_trailing_text() {
        assert_eq!(
            parse_plain_path(b"app/my file.py"),
            Ok(b"app/my file.py".to_vec())
        );
        assert!(parse_plain_path(b"").is_err());
        assert!(parse_plain_path(br#""x" y"#).is_err());
    }
}
