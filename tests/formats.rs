//! Whole reviews of files in unusual encodings and of changes that are not ordinary edits: each
//! gives the exact review a reader should get, in diff-only and in repository mode.
mod common;

use common::*;
use payreview::config::Settings;
use payreview::review::Review;

/// A payment call whose 10 s scalar timeout is one finding (HTTP001 at line `line`); everything
/// else in it is quiet, so any other finding in these tests comes from the format, not the code.
const CHARGE: &str = r#"import requests


def charge(order):
    response = requests.post("https://pay.example/charge", json={"amount": order.amount}, timeout=10)
    return response.json()
"#;

/// A diff adding `path` with `bytes` as its content, lines ending in `eol`.
fn added(path: &str, bytes: &[u8], eol: &[u8]) -> Vec<u8> {
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let lines: Vec<&[u8]> = body.split(|&b| b == b'\n').collect();
    let mut out = format!(
        "diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{} @@\n",
        lines.len()
    )
    .into_bytes();
    for line in lines {
        out.push(b'+');
        out.extend_from_slice(line);
        out.extend_from_slice(eol);
    }
    out
}

fn errors(review: &Review) -> Vec<String> {
    review
        .errors
        .iter()
        .map(|e| format!("{}: {}", e.path, e.message))
        .collect()
}

fn files(review: &Review) -> Vec<String> {
    review
        .files
        .iter()
        .map(|f| format!("{} {} +{} -{}", f.path, f.status, f.added, f.removed))
        .collect()
}

fn diff_only(diff: &[u8]) -> Review {
    review(diff, &Settings::diff_only())
}

/// Reviews a diff that adds `path` with `content`, the file also written into a repository.
fn in_repository(path: &str, content: &[u8], diff: &[u8]) -> Review {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join(path);
    std::fs::create_dir_all(file.parent().expect("a folder")).expect("mkdir");
    std::fs::write(&file, content).expect("write");
    review(diff, &repo_settings(dir.path()))
}

#[test]
fn a_plain_file_gives_the_one_finding() {
    let r = diff_only(&added("pay/lf.py", CHARGE.as_bytes(), b"\n"));
    assert_eq!(places(&r), ["HTTP001 pay/lf.py:5-5 important"]);
    assert!(r.errors.is_empty(), "{:?}", errors(&r));
}

#[test]
fn crlf_files_review_like_lf_files() {
    let crlf = CHARGE.replace('\n', "\r\n");
    let diff = added("pay/crlf.py", CHARGE.as_bytes(), b"\r\n");
    for r in [
        diff_only(&diff),
        in_repository("pay/crlf.py", crlf.as_bytes(), &diff),
    ] {
        assert_eq!(places(&r), ["HTTP001 pay/crlf.py:5-5 important"]);
        assert!(r.errors.is_empty(), "{:?}", errors(&r));
        assert_eq!(files(&r), ["pay/crlf.py added +6 -0"]);
    }
}

#[test]
fn a_byte_order_mark_does_not_shift_lines() {
    let with_bom = [b"\xef\xbb\xbf".as_slice(), CHARGE.as_bytes()].concat();
    let diff = added("pay/bom.py", &with_bom, b"\n");
    for r in [
        diff_only(&diff),
        in_repository("pay/bom.py", &with_bom, &diff),
    ] {
        assert_eq!(places(&r), ["HTTP001 pay/bom.py:5-5 important"]);
        assert!(r.errors.is_empty(), "{:?}", errors(&r));
    }
}

#[test]
fn latin1_bytes_are_replaced_and_said_so() {
    let latin1 = [
        b"# -*- coding: latin-1 -*-\n# caf\xe9 au lait\n".as_slice(),
        CHARGE.as_bytes(),
    ]
    .concat();
    let diff = added("pay/latin1.py", &latin1, b"\n");
    let r = diff_only(&diff);
    assert_eq!(places(&r), ["HTTP001 pay/latin1.py:7-7 important"]);
    assert_eq!(
        errors(&r),
        ["pay/latin1.py: the diff holds bytes that are not UTF-8; they were replaced"]
    );
    // The file on disk is Latin-1 too: read lossily, reviewed the same.
    let r = in_repository("pay/latin1.py", &latin1, &diff);
    assert_eq!(places(&r), ["HTTP001 pay/latin1.py:7-7 important"]);
}

#[test]
fn tabs_in_one_function_and_spaces_in_another_are_valid_python() {
    let mixed = format!(
        "{}\n\ndef refund(order):\n\tresponse = requests.post(\"https://pay.example/refund\", json={{\"id\": order.id}})\n\treturn response.json()\n",
        CHARGE.trim_end()
    );
    let r = diff_only(&added("pay/tabs.py", mixed.as_bytes(), b"\n"));
    // The tab-indented refund is parsed like any other: its call without a timeout is found.
    assert_eq!(
        places(&r),
        [
            "HTTP001 pay/tabs.py:5-5 important",
            "HTTP002 pay/tabs.py:9-9 important"
        ]
    );
    assert!(r.errors.is_empty(), "{:?}", errors(&r));
}

#[test]
fn inconsistent_tabs_are_reported_as_a_syntax_error() {
    // `\ttry:` then a four-space `except`: Python itself refuses this (TabError).
    let broken = "def charge(client, order):\n\ttry:\n\t\treturn client.charge(order.amount)\n    except Exception:\n        return None\n";
    let r = diff_only(&added("pay/tabs.py", broken.as_bytes(), b"\n"));
    assert_eq!(
        errors(&r),
        [
            "pay/tabs.py: the new version does not parse as Python 3 (first error at line 4); \
             rules saw only the code the parser could make sense of"
        ]
    );
}

#[test]
fn python_2_syntax_is_reviewed_not_refused() {
    // tree-sitter-python reads `print "…"` and `except E, e:`: the file is reviewed as usual.
    let py2 = "import requests\n\n\ndef charge(order):\n    try:\n        response = requests.post(\"https://pay.example/charge\", data={\"amount\": order.amount})\n        print \"charged\", order.id\n        return response.json()\n    except requests.RequestException, e:\n        raise\n";
    let r = diff_only(&added("pay/py2.py", py2.as_bytes(), b"\n"));
    assert_eq!(places(&r), ["HTTP002 pay/py2.py:6-6 important"]);
    assert!(r.errors.is_empty(), "{:?}", errors(&r));
}

#[test]
fn a_file_that_does_not_parse_is_named_in_the_errors() {
    let garbage = "}}}} ))) ((( def def class :::\n@@@ !!! ???\n";
    let diff = added("pay/garbage.py", garbage.as_bytes(), b"\n");
    for r in [
        diff_only(&diff),
        in_repository("pay/garbage.py", garbage.as_bytes(), &diff),
    ] {
        assert!(r.findings.is_empty(), "{:?}", places(&r));
        assert_eq!(
            errors(&r),
            [
                "pay/garbage.py: the new version does not parse as Python 3 (first error at \
                 line 1); rules saw only the code the parser could make sense of"
            ]
        );
    }
}

#[test]
fn hunks_with_gaps_are_not_blamed_for_syntax_errors() {
    // A hunk from the middle of a class: rebuilt from the diff alone it has gaps, which are
    // payreview's, not the author's.
    let diff = b"diff --git a/pay/c.py b/pay/c.py\n--- a/pay/c.py\n+++ b/pay/c.py\n@@ -40,3 +40,3 @@ class Client:\n         if x:\n-            return 1\n+            return 2\n         else:\n";
    let r = diff_only(diff);
    assert!(r.errors.is_empty(), "{:?}", errors(&r));
}

#[test]
fn an_empty_new_file_is_listed_and_quiet() {
    let diff = b"diff --git a/pay/__init__.py b/pay/__init__.py\nnew file mode 100644\nindex 0000000..e69de29\n";
    let r = diff_only(diff);
    assert!(r.findings.is_empty() && r.errors.is_empty());
    assert_eq!(files(&r), ["pay/__init__.py added +0 -0"]);
}

#[test]
fn a_pure_rename_is_not_reviewed_as_new_code() {
    let diff = b"diff --git a/pay/old.py b/pay/new.py\nsimilarity index 100%\nrename from pay/old.py\nrename to pay/new.py\n";
    // The renamed file carries a finding-worthy call, but renaming it changes nothing.
    let r = in_repository("pay/new.py", CHARGE.as_bytes(), diff);
    assert!(r.findings.is_empty(), "{:?}", places(&r));
    assert!(r.errors.is_empty(), "{:?}", errors(&r));
    assert_eq!(files(&r), ["pay/new.py renamed +0 -0"]);
}

#[test]
fn a_mode_only_change_is_listed_and_quiet() {
    let diff = b"diff --git a/pay/run.py b/pay/run.py\nold mode 100644\nnew mode 100755\n";
    let r = in_repository("pay/run.py", CHARGE.as_bytes(), diff);
    assert!(r.findings.is_empty(), "{:?}", places(&r));
    assert!(r.errors.is_empty(), "{:?}", errors(&r));
    assert_eq!(files(&r), ["pay/run.py modified +0 -0"]);
}

#[test]
fn a_binary_python_file_is_named_as_not_reviewed() {
    let diff = b"diff --git a/pay/blob.py b/pay/blob.py\nindex 1111111..2222222 100644\nBinary files a/pay/blob.py and b/pay/blob.py differ\n";
    let r = diff_only(diff);
    assert!(r.findings.is_empty());
    assert_eq!(errors(&r), ["pay/blob.py: binary change: not reviewed"]);
}

#[test]
fn a_submodule_bump_is_listed_and_not_read() {
    let diff = b"diff --git a/vendor/sdk b/vendor/sdk\nindex 1111111..2222222 160000\n--- a/vendor/sdk\n+++ b/vendor/sdk\n@@ -1 +1 @@\n-Subproject commit 1111111111111111111111111111111111111111\n+Subproject commit 2222222222222222222222222222222222222222\n";
    let r = diff_only(diff);
    assert!(r.findings.is_empty() && r.errors.is_empty());
    assert_eq!(files(&r), ["vendor/sdk modified +1 -1"]);
}

#[test]
fn deleting_a_file_is_not_blamed_for_its_old_code() {
    let lines: Vec<&str> = CHARGE.lines().collect();
    let mut diff = format!(
        "diff --git a/pay/gone.py b/pay/gone.py\ndeleted file mode 100644\n--- a/pay/gone.py\n+++ /dev/null\n@@ -1,{} +0,0 @@\n",
        lines.len()
    );
    for line in &lines {
        diff.push_str(&format!("-{line}\n"));
    }
    let r = diff_only(diff.as_bytes());
    assert!(r.findings.is_empty(), "{:?}", places(&r));
    assert!(r.errors.is_empty(), "{:?}", errors(&r));
    assert_eq!(files(&r), ["pay/gone.py deleted +0 -6"]);
}

#[test]
fn a_single_50_mb_line_is_skipped_by_the_file_cap_and_named() {
    let line = format!("TOKEN = \"{}\"", "a".repeat(50_000_000));
    let text = format!("{line}\ny = 1\n");
    let r = diff_only(&added("pay/big.py", text.as_bytes(), b"\n"));
    assert!(r.findings.is_empty());
    assert_eq!(
        errors(&r),
        [format!(
            "pay/big.py: the new version is {} bytes, over the 4194304-byte cap \
             (--max-file-bytes); its rules did not run",
            text.len()
        )]
    );
    assert_eq!(files(&r), ["pay/big.py added +2 -0"]);
}

#[test]
fn a_hunk_claiming_2_to_the_60_lines_is_an_input_error() {
    let diff = b"diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,1152921504606846976 +1,1152921504606846976 @@\n-a\n+b\n";
    let error = payreview::review_diff(diff, &Settings::diff_only()).expect_err("refused");
    assert_eq!(
        error.to_string(),
        "diff line 4: number in hunk header does not fit in 32 bits"
    );
}

#[test]
fn past_max_files_the_review_is_partial_and_says_so() {
    let diff: Vec<u8> = (0..30)
        .flat_map(|i| added(&format!("pay/m{i:02}.py"), CHARGE.as_bytes(), b"\n"))
        .collect();
    let mut settings = Settings::diff_only();
    settings.max_files = 25;
    let r = review(&diff, &settings);
    assert_eq!(
        errors(&r),
        [": the diff touches 30 files; only the first 25 were reviewed"]
    );
    assert_eq!(r.files.len(), 25);
    assert_eq!(r.findings.len(), 25, "{:?}", places(&r));
}
