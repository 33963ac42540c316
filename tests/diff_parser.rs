//! `payreview::diff::parse_patch` against real `git diff`, `git format-patch` and `diff -u`
//! output (fixtures/diff/*.diff) and against malformed diffs, whose errors must name their kind
//! and the diff line they point at. A proptest feeds random bytes and mangled fixtures.

use std::path::PathBuf;
use std::sync::LazyLock;

use payreview::diff::{
    DiffError, DiffErrorKind, FilePatch, FileStatus, Hunk, IndexLine, LineKind, Patch, parse_patch,
};
use proptest::prelude::*;

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/diff")
}

fn fixture(name: &str) -> Vec<u8> {
    let path = fixture_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn parse_ok(name: &str) -> Patch {
    parse_patch(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

fn parse_err_bytes(input: &[u8]) -> DiffError {
    match parse_patch(input) {
        Ok(patch) => panic!("expected an error, got {patch:#?}"),
        Err(error) => error,
    }
}

fn parse_err(name: &str) -> DiffError {
    parse_err_bytes(&fixture(name))
}

fn only_file(patch: &Patch) -> &FilePatch {
    assert_eq!(patch.files.len(), 1, "{patch:#?}");
    &patch.files[0]
}

fn lines(hunk: &Hunk) -> Vec<(LineKind, &str)> {
    hunk.lines
        .iter()
        .map(|l| (l.kind, l.text.as_str()))
        .collect()
}

fn ranges(file: &FilePatch) -> Vec<(u32, u32, u32, u32, &str, usize)> {
    file.hunks
        .iter()
        .map(|h| {
            let section = h.section.as_str();
            (
                h.old_start,
                h.old_count,
                h.new_start,
                h.new_count,
                section,
                h.diff_line,
            )
        })
        .collect()
}

fn index(old: &str, new: &str, mode: Option<&str>, diff_line: usize) -> Option<IndexLine> {
    Some(IndexLine {
        old: old.into(),
        new: new.into(),
        mode: mode.map(Into::into),
        diff_line,
    })
}

fn paths(file: &FilePatch) -> (Option<&str>, Option<&str>) {
    (file.old_path.as_deref(), file.new_path.as_deref())
}

fn assert_error(error: &DiffError, code: &str, line: usize) {
    assert_eq!((error.kind_code(), error.line()), (code, line), "{error:?}");
}

use LineKind::{Added, Context, Removed};

// ---------------------------------------------------------------------------------------------
// Header forms
// ---------------------------------------------------------------------------------------------

#[test]
fn modified_files_with_several_hunks() {
    let patch = parse_ok("modified.diff");
    assert_eq!(patch.files.len(), 2);

    let models = &patch.files[0];
    assert_eq!(
        paths(models),
        (Some("app/models.py"), Some("app/models.py"))
    );
    assert_eq!(models.status, FileStatus::Modified);
    assert_eq!(models.index, index("7cd5845", "c2176ee", Some("100644"), 2));
    assert_eq!(
        (models.old_mode.as_deref(), models.new_mode.as_deref()),
        (None, None)
    );
    assert_eq!(models.similarity, None);
    assert!(!models.binary && !models.submodule && !models.lossy);
    assert_eq!(models.diff_line, 1);
    assert_eq!(ranges(models), vec![(2, 4, 2, 4, "class Account:", 5)]);
    assert_eq!(
        lines(&models.hunks[0]),
        vec![
            (Context, "    balance = 0"),
            (Context, ""),
            (Context, "    def deposit(self, amount):"),
            (Removed, "        self.balance += amount"),
            (Added, "        self.balance = self.balance + amount"),
        ]
    );
    let line_numbers: Vec<usize> = models.hunks[0].lines.iter().map(|l| l.diff_line).collect();
    assert_eq!(line_numbers, vec![6, 7, 8, 9, 10]);
    assert!(models.hunks[0].lines.iter().all(|l| !l.no_newline));

    let payments = &patch.files[1];
    assert_eq!(payments.path(), "app/payments.py");
    assert_eq!(payments.diff_line, 11);
    assert_eq!(
        payments.index,
        index("e1987d9", "5b9f5ae", Some("100644"), 12)
    );
    assert_eq!(
        ranges(payments),
        vec![
            (1, 6, 1, 8, "", 15),
            (24, 4, 26, 5, "def refund(charge_id, amount=None):", 24)
        ]
    );
    assert_eq!(
        lines(&payments.hunks[0]),
        vec![
            (Context, r#""""Charges for the payment service.""""#),
            (Context, "from decimal import Decimal"),
            (Context, ""),
            (Added, "import logging"),
            (Added, ""),
            (Context, "import stripe"),
            (Context, ""),
            (Context, ""),
        ]
    );
    assert_eq!(
        payments.hunks[1].lines[3].text,
        r#"    logging.info("refund %s", charge_id)"#
    );
    assert_eq!((payments.added_lines(), payments.removed_lines()), (3, 0));
}

#[test]
fn new_file() {
    let patch = parse_ok("added.diff");
    let file = only_file(&patch);
    assert_eq!(file.status, FileStatus::Added);
    assert_eq!(paths(file), (None, Some("app/audit.py")));
    assert_eq!(file.new_mode.as_deref(), Some("100644"));
    assert_eq!(file.old_mode, None);
    assert_eq!(file.index, index("0000000", "8731606", None, 3));
    assert_eq!(ranges(file), vec![(0, 0, 1, 2, "", 6)]);
    assert_eq!(
        lines(&file.hunks[0]),
        vec![(Added, "def audit(event):"), (Added, "    print(event)")]
    );
}

#[test]
fn deleted_file() {
    let patch = parse_ok("deleted.diff");
    let file = only_file(&patch);
    assert_eq!(file.status, FileStatus::Deleted);
    assert_eq!(paths(file), (Some("app/legacy.py"), None));
    assert_eq!(file.path(), "app/legacy.py");
    assert_eq!(file.old_mode.as_deref(), Some("100644"));
    assert_eq!(file.index, index("68cb515", "0000000", None, 3));
    assert_eq!(ranges(file), vec![(1, 5, 0, 0, "", 6)]);
    assert_eq!(file.removed_lines(), 5);
    assert_eq!(file.hunks[0].lines[4].text, r#"    return "/v1""#);
}

#[test]
fn rename_without_hunks() {
    let patch = parse_ok("rename_no_hunks.diff");
    let file = only_file(&patch);
    assert_eq!(file.status, FileStatus::Renamed);
    assert_eq!(
        paths(file),
        (Some("app/old_utils.py"), Some("app/utils.py"))
    );
    assert_eq!(file.similarity, Some(100));
    assert_eq!(file.index, None);
    assert!(file.hunks.is_empty());
}

#[test]
fn rename_with_changes() {
    let patch = parse_ok("rename_with_changes.diff");
    let file = only_file(&patch);
    assert_eq!(file.status, FileStatus::Renamed);
    assert_eq!(
        paths(file),
        (Some("app/old_utils.py"), Some("app/helpers.py"))
    );
    assert_eq!(file.similarity, Some(94));
    assert_eq!(file.index, index("94de192", "dcb5b94", Some("100644"), 5));
    assert_eq!(ranges(file), vec![(8, 7, 8, 7, "def helper_2():", 8)]);
    assert_eq!(
        lines(&file.hunks[0])[3..5],
        [(Removed, "    return 3"), (Added, "    return 33")]
    );
}

#[test]
fn copied_file() {
    let patch = parse_ok("copy.diff");
    let file = only_file(&patch);
    assert_eq!(file.status, FileStatus::Copied);
    assert_eq!(
        paths(file),
        (Some("app/old_utils.py"), Some("app/more_utils.py"))
    );
    assert_eq!(file.similarity, Some(94));
    assert_eq!(ranges(file), vec![(14, 7, 14, 7, "def helper_4():", 8)]);
}

#[test]
fn mode_only_change() {
    let patch = parse_ok("mode_only.diff");
    let file = only_file(&patch);
    assert_eq!(file.status, FileStatus::Modified);
    assert_eq!(paths(file), (Some("app/script.py"), Some("app/script.py")));
    assert_eq!(file.old_mode.as_deref(), Some("100644"));
    assert_eq!(file.new_mode.as_deref(), Some("100755"));
    assert_eq!(file.index, None);
    assert!(file.hunks.is_empty());
}

#[test]
fn git_binary_patch_is_skipped() {
    let patch = parse_ok("binary_patch.diff");
    assert_eq!(patch.files.len(), 2);
    let icon = &patch.files[0];
    assert_eq!(icon.status, FileStatus::Added);
    assert_eq!(paths(icon), (None, Some("app/icon.bin")));
    assert!(icon.binary);
    assert!(icon.hunks.is_empty());
    assert_eq!(
        icon.index,
        index(
            "0000000000000000000000000000000000000000",
            "9314c0c9adb03f9e6566461a22fe63674060cc57",
            None,
            3
        )
    );
    let logo = &patch.files[1];
    assert_eq!(logo.diff_line, 11);
    assert_eq!(logo.status, FileStatus::Modified);
    assert_eq!(logo.path(), "app/logo.bin");
    assert!(logo.binary && logo.hunks.is_empty());
    assert_eq!(
        logo.index.as_ref().and_then(|i| i.mode.as_deref()),
        Some("100644")
    );
}

#[test]
fn binary_files_differ() {
    let patch = parse_ok("binary_differ.diff");
    assert_eq!(patch.files.len(), 2);
    assert_eq!(patch.files[0].status, FileStatus::Added);
    assert_eq!(patch.files[0].index, index("0000000", "9314c0c", None, 3));
    assert_eq!(patch.files[1].status, FileStatus::Modified);
    assert_eq!(patch.files[1].diff_line, 5);
    assert!(patch.files.iter().all(|f| f.binary && f.hunks.is_empty()));
}

#[test]
fn binary_patch_with_bad_data_line() {
    let input = b"diff --git a/x.bin b/x.bin\nindex 1..2 100644\nGIT binary patch\nliteral 5\nnot base85 at all\n\n";
    let error = parse_err_bytes(input);
    assert_error(&error, "bad_binary_patch", 5);
}

#[test]
fn quoted_paths_with_octal_escapes_and_tabs() {
    let patch = parse_ok("quoted_path.diff");
    assert_eq!(patch.files.len(), 2);
    assert_eq!(
        paths(&patch.files[0]),
        (Some("app/café.py"), Some("app/café.py"))
    );
    assert_eq!(
        paths(&patch.files[1]),
        (Some("app/tab\tname.py"), Some("app/tab\tname.py"))
    );
    assert!(patch.files.iter().all(|f| !f.lossy));
    assert_eq!(patch.files[1].diff_line, 8);
    assert_eq!(
        lines(&patch.files[1].hunks[0]),
        vec![(Removed, "X = 1"), (Added, "X = 2")]
    );
}

#[test]
fn quoted_path_with_bytes_that_are_not_utf8() {
    let input = b"diff --git \"a/x\\377.py\" \"b/x\\377.py\"\nold mode 100644\nnew mode 100755\n";
    let patch = parse_patch(input).expect("valid diff");
    let file = only_file(&patch);
    assert_eq!(paths(file), (Some("x\u{fffd}.py"), Some("x\u{fffd}.py")));
    assert!(file.lossy);
}

#[test]
fn rename_with_quoted_paths() {
    let input = b"diff --git \"a/caf\\303\\251.py\" b/cafe.py\nsimilarity index 100%\nrename from \"caf\\303\\251.py\"\nrename to cafe.py\n";
    let patch = parse_patch(input).expect("valid diff");
    let file = only_file(&patch);
    assert_eq!(file.status, FileStatus::Renamed);
    assert_eq!(paths(file), (Some("café.py"), Some("cafe.py")));
}

#[test]
fn unquoted_paths_with_spaces() {
    let patch = parse_ok("spaces_path.diff");
    let file = only_file(&patch);
    assert_eq!(
        paths(file),
        (Some("app/my file.py"), Some("app/my file.py"))
    );
    assert_eq!(
        lines(&file.hunks[0]),
        vec![(Removed, "SPACE = 1"), (Added, "SPACE = 2")]
    );
}

#[test]
fn rename_with_spaces_relies_on_rename_lines() {
    let input = b"diff --git a/my old.py b/my new.py\nsimilarity index 100%\nrename from my old.py\nrename to my new.py\n";
    let patch = parse_patch(input).expect("valid diff");
    let file = only_file(&patch);
    assert_eq!(paths(file), (Some("my old.py"), Some("my new.py")));
    // Without rename or ---/+++ lines nothing tells where the paths split.
    let error =
        parse_err_bytes(b"diff --git a/my old.py b/my new.py\nold mode 100644\nnew mode 100755\n");
    assert_error(&error, "unknown_paths", 1);
}

#[test]
fn no_prefix_paths_are_kept() {
    let patch = parse_ok("no_prefix.diff");
    let file = only_file(&patch);
    assert_eq!(
        paths(file),
        (Some("app/my file.py"), Some("app/my file.py"))
    );
    let input = b"diff --git app/x.py app/x.py\nindex 1..2 100644\n--- app/x.py\n+++ app/x.py\n@@ -1 +1 @@\n-a\n+b\n";
    let patch = parse_patch(input).expect("valid diff");
    assert_eq!(
        paths(only_file(&patch)),
        (Some("app/x.py"), Some("app/x.py"))
    );
}

#[test]
fn no_newline_at_end_of_file() {
    let patch = parse_ok("no_newline.diff");
    let hunk = &only_file(&patch).hunks[0];
    let flags: Vec<(LineKind, &str, bool)> = hunk
        .lines
        .iter()
        .map(|l| (l.kind, l.text.as_str(), l.no_newline))
        .collect();
    assert_eq!(
        flags,
        vec![
            (Context, "DEBUG = False", false),
            (Removed, "TIMEOUT = 30", true),
            (Added, "TIMEOUT = 60", true),
        ]
    );
}

#[test]
fn no_newline_marker_in_another_language() {
    let input = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n\\ Kein Zeilenumbruch am Dateiende.\n+b\n";
    let patch = parse_patch(input.as_bytes()).expect("valid diff");
    let hunk = &only_file(&patch).hunks[0];
    assert_eq!(
        hunk.lines.iter().map(|l| l.no_newline).collect::<Vec<_>>(),
        vec![true, false]
    );
}

#[test]
fn crlf_file_keeps_carriage_returns_in_text() {
    let patch = parse_ok("crlf.diff");
    let file = only_file(&patch);
    assert_eq!(
        lines(&file.hunks[0]),
        vec![
            (Context, "def total(items):\r"),
            (Removed, "    return sum(items)\r"),
            (Added, "    return sum(items, 0)\r"),
        ]
    );
}

#[test]
fn crlf_diff_trims_headers_and_keeps_line_text() {
    let patch = parse_ok("crlf_whole.diff");
    assert_eq!(patch.files.len(), 2);
    let models = &patch.files[0];
    assert_eq!(
        paths(models),
        (Some("app/models.py"), Some("app/models.py"))
    );
    assert_eq!(models.index, index("7cd5845", "c2176ee", Some("100644"), 2));
    assert_eq!(ranges(models), vec![(2, 4, 2, 4, "class Account:", 5)]);
    assert_eq!(
        lines(&models.hunks[0])[..2],
        [(Context, "    balance = 0\r"), (Context, "\r")]
    );
    assert_eq!(patch.files[1].hunks.len(), 2);
}

#[test]
fn bytes_that_are_not_utf8_mark_only_their_file() {
    let mut input = fixture("modified.diff");
    input.extend(fixture("lossy.diff"));
    let patch = parse_patch(&input).expect("valid diff");
    assert_eq!(patch.files.len(), 3);
    assert_eq!(
        patch.files.iter().map(|f| f.lossy).collect::<Vec<_>>(),
        vec![false, false, true]
    );
    let latin = &patch.files[2];
    assert_eq!(latin.path(), "app/latin.py");
    assert_eq!(
        lines(&latin.hunks[0]),
        vec![
            (Context, "# auteur: Jos\u{fffd}"),
            (Removed, "NAME = \"caf\u{fffd}\""),
            (Added, "NAME = \"th\u{fffd}\""),
        ]
    );
}

#[test]
fn empty_context_lines_from_stripped_whitespace() {
    let stripped = parse_ok("empty_context_line.diff");
    assert_eq!(stripped, parse_ok("modified.diff"));
}

#[test]
fn blank_line_after_a_complete_hunk_is_not_context() {
    let input = b"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-c\n+d\n";
    let patch = parse_patch(input).expect("valid diff");
    assert_eq!(patch.files.len(), 2);
    assert_eq!(patch.files[0].hunks[0].lines.len(), 2);
    assert_eq!(patch.files[1].diff_line, 7);
}

#[test]
fn diff_u_with_timestamps_strips_first_component() {
    let patch = parse_ok("diff_u_timestamps.diff");
    let file = only_file(&patch);
    assert_eq!(
        paths(file),
        (Some("app/billing.py"), Some("app/billing.py"))
    );
    assert_eq!(file.status, FileStatus::Modified);
    assert_eq!((file.diff_line, file.index.clone()), (1, None));
    assert_eq!(ranges(file), vec![(1, 4, 1, 4, "", 3)]);
    assert_eq!(
        lines(&file.hunks[0]),
        vec![
            (Removed, "RATE = 1"),
            (Added, "RATE = 2"),
            (Context, ""),
            (Context, "def fee(x):"),
            (Context, "    return x * RATE"),
        ]
    );
}

#[test]
fn diff_u_with_same_paths_keeps_them() {
    let input = b"--- app/x.py\t2024-01-01 10:00:00.000000000 +0000\n+++ app/x.py\t2024-01-02 10:00:00.000000000 +0000\n@@ -1 +1 @@\n-a\n+b\n";
    let patch = parse_patch(input).expect("valid diff");
    assert_eq!(
        paths(only_file(&patch)),
        (Some("app/x.py"), Some("app/x.py"))
    );
}

#[test]
fn diff_ru_with_command_lines_and_only_in() {
    let patch = parse_ok("diff_ru.diff");
    assert_eq!(patch.files.len(), 2);
    assert_eq!(patch.files[0].path(), "app/billing.py");
    assert_eq!(patch.files[0].diff_line, 1);
    assert_eq!(patch.files[1].path(), "app/const.py");
    assert_eq!(patch.files[1].diff_line, 10);
    assert_eq!(ranges(&patch.files[1]), vec![(1, 2, 1, 2, "", 13)]);
}

#[test]
fn format_patch_preamble_and_signature_are_ignored() {
    let patch = parse_ok("format_patch.diff");
    assert_eq!(patch.files.len(), 2);
    let config = &patch.files[0];
    assert_eq!(config.path(), "app/config.py");
    assert_eq!(config.diff_line, 14);
    assert_eq!(
        config.index,
        index("b8a1de5", "20c89d2", Some("100644"), 15)
    );
    let models = &patch.files[1];
    assert_eq!(models.diff_line, 24);
    assert_eq!(ranges(models), vec![(1, 5, 1, 5, "", 28)]);
    assert_eq!(
        lines(&models.hunks[0]),
        vec![
            (Context, "class Account:"),
            (Removed, "    balance = 0"),
            (Added, "    balance = Decimal(0)"),
            (Context, ""),
            (Context, "    def deposit(self, amount):"),
            (Context, "        self.balance += amount"),
        ]
    );
}

#[test]
fn format_patch_series_in_one_mailbox() {
    let mut input = fixture("format_patch.diff");
    input.extend(fixture("format_patch.diff"));
    let patch = parse_patch(&input).expect("valid diff");
    assert_eq!(patch.files.len(), 4);
    assert_eq!(patch.files[2].diff_line, 37 + 14);
}

#[test]
fn submodule_change() {
    let patch = parse_ok("submodule.diff");
    let file = only_file(&patch);
    assert!(file.submodule);
    assert_eq!(file.path(), "vendor/sub");
    assert_eq!(file.status, FileStatus::Modified);
    assert_eq!(file.index, index("de0740c", "a48a497", Some("160000"), 2));
    assert_eq!(
        lines(&file.hunks[0]),
        vec![
            (
                Removed,
                "Subproject commit de0740ca1119b7a99e17ea27d871cb313ddbcd2e"
            ),
            (
                Added,
                "Subproject commit a48a497a99e9d008584bf7ae0a4e95dd6819b0eb"
            ),
        ]
    );
    assert!(!parse_ok("modified.diff").files.iter().any(|f| f.submodule));
}

#[test]
fn several_fixtures_concatenated() {
    let names = [
        "modified.diff",
        "added.diff",
        "rename_no_hunks.diff",
        "mode_only.diff",
    ];
    let input: Vec<u8> = names.iter().flat_map(|n| fixture(n)).collect();
    let patch = parse_patch(&input).expect("valid diff");
    let statuses: Vec<FileStatus> = patch.files.iter().map(|f| f.status).collect();
    use FileStatus::{Added as A, Modified as M, Renamed as R};
    assert_eq!(statuses, vec![M, M, A, R, M]);
    assert_eq!(
        patch.files.iter().map(|f| f.diff_line).collect::<Vec<_>>(),
        vec![1, 11, 30, 38, 42]
    );
}

// ---------------------------------------------------------------------------------------------
// Malformed diffs
// ---------------------------------------------------------------------------------------------

#[test]
fn truncated_hunk_points_at_the_last_line() {
    let error = parse_err("err_truncated_hunk.diff");
    assert_error(&error, "hunk_too_short", 27);
    assert_eq!(
        error.kind(),
        &DiffErrorKind::HunkTooShort {
            hunk_line: 24,
            old_seen: 3,
            old_count: 4,
            new_seen: 3,
            new_count: 5,
        }
    );
}

#[test]
fn hunk_count_too_high_ends_at_next_file() {
    let error = parse_err("err_hunk_count_too_high.diff");
    assert_error(&error, "hunk_too_short", 11);
    assert!(matches!(
        error.kind(),
        DiffErrorKind::HunkTooShort {
            hunk_line: 5,
            old_count: 5,
            ..
        }
    ));
}

#[test]
fn hunk_count_too_low_points_at_the_extra_line() {
    let error = parse_err("err_hunk_count_too_low.diff");
    assert_error(&error, "hunk_too_long", 23);
    assert!(matches!(
        error.kind(),
        DiffErrorKind::HunkTooLong { hunk_line: 15, .. }
    ));
}

#[test]
fn extra_line_inside_a_hunk_with_one_side_done() {
    // The old side is complete after `-a`; ` b` is context and would be a second old line.
    let error = parse_err_bytes(b"--- a/x\n+++ b/x\n@@ -1 +1,2 @@\n-a\n b\n+c\n");
    assert_error(&error, "hunk_too_long", 5);
}

#[test]
fn garbage_between_files() {
    let error = parse_err("err_garbage_between_files.diff");
    assert_error(&error, "unexpected_line", 11);
}

#[test]
fn garbage_after_the_last_file() {
    let mut input = fixture("mode_only.diff");
    input.extend(b"\nthanks!\n");
    assert_error(&parse_err_bytes(&input), "unexpected_line", 5);
}

#[test]
fn empty_input() {
    for input in [&b""[..], b"\n", b"\n\n\n", b"   \r\n"] {
        let error = parse_err_bytes(input);
        assert_error(&error, "no_diff", 1);
        assert_eq!(error.kind(), &DiffErrorKind::NoDiff);
        assert_eq!(error.to_string(), "diff line 1: the input holds no diff");
    }
}

#[test]
fn text_without_any_file() {
    assert_error(&parse_err("err_no_diff.diff"), "no_diff", 1);
}

#[test]
fn plus_without_minus_in_a_header() {
    assert_error(
        &parse_err("err_plus_without_minus.diff"),
        "plus_without_minus",
        13,
    );
}

#[test]
fn plus_without_minus_between_files() {
    let mut input = fixture("added.diff");
    input.extend(b"+++ b/app/other.py\n@@ -1 +1 @@\n-a\n+b\n");
    assert_error(&parse_err_bytes(&input), "plus_without_minus", 9);
    assert_error(&parse_err_bytes(b"+++ b/x\n"), "plus_without_minus", 1);
}

#[test]
fn minus_without_plus() {
    assert_error(
        &parse_err("err_minus_without_plus.diff"),
        "minus_without_plus",
        13,
    );
    let mut input = fixture("mode_only.diff");
    input.extend(b"--- a/app/x.py\n\n");
    assert_error(&parse_err_bytes(&input), "minus_without_plus", 4);
}

#[test]
fn hunk_header_before_any_file() {
    assert_error(
        &parse_err("err_hunk_before_file.diff"),
        "hunk_without_file",
        4,
    );
}

#[test]
fn hunk_header_before_minus_plus_lines() {
    let error = parse_err_bytes(b"diff --git a/x b/x\nindex 1..2 100644\n@@ -1 +1 @@\n-a\n+b\n");
    assert_error(&error, "hunk_without_paths", 3);
}

#[test]
fn overflowing_numbers() {
    let error = parse_err("err_overflow.diff");
    assert_error(&error, "number_too_large", 5);
    assert_eq!(error.kind(), &DiffErrorKind::NumberTooLarge);
    let similarity = b"diff --git a/x b/y\nsimilarity index 99999999999999999999%\n";
    assert_error(&parse_err_bytes(similarity), "bad_header", 2);
}

#[test]
fn malformed_hunk_header() {
    let error = parse_err_bytes(b"--- a/x\n+++ b/x\n@@ -1 +1\n-a\n+b\n");
    assert_error(&error, "bad_hunk_header", 3);
}

#[test]
fn combined_diff_is_refused() {
    let error = parse_err("err_combined.diff");
    assert_error(&error, "combined_diff", 1);
    assert!(error.to_string().contains("not supported"), "{error}");
    let at_hunk = b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@@ -1 -1 +1 @@@\n";
    assert_error(&parse_err_bytes(at_hunk), "combined_diff", 4);
}

#[test]
fn overlapping_hunks() {
    let error = parse_err("err_overlapping_hunks.diff");
    assert_error(&error, "hunk_out_of_order", 24);
    assert_eq!(
        error.kind(),
        &DiffErrorKind::HunkOutOfOrder { previous_line: 15 }
    );
}

#[test]
fn unknown_extended_header() {
    assert_error(&parse_err("err_unknown_header.diff"), "unknown_header", 2);
}

#[test]
fn bad_quoted_path() {
    let error = parse_err_bytes(b"diff --git \"a/x\\q\" \"b/x\"\n");
    assert_error(&error, "bad_path", 1);
}

#[test]
fn report_shows_the_offending_line() {
    let error = parse_err("err_garbage_between_files.diff");
    let mut out = String::new();
    let handler =
        miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor());
    handler.render_report(&mut out, &error).expect("renders");
    assert!(out.contains("payreview::diff::unexpected_line"), "{out}");
    assert!(out.contains("this is not part of a diff"), "{out}");
}

// ---------------------------------------------------------------------------------------------
// Robustness
// ---------------------------------------------------------------------------------------------

static FIXTURES: LazyLock<Vec<Vec<Vec<u8>>>> = LazyLock::new(|| {
    let mut names: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .expect("fixtures/diff exists")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "diff"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|path| {
            let bytes = std::fs::read(path).expect("fixture readable");
            bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
        })
        .collect()
});

/// Lines that steer the parser into its less common paths when spliced in.
const TRICKY_LINES: &[&[u8]] = &[
    b"@@ -1 +1 @@",
    b"@@ -0,0 +0,0 @@",
    b"@@@ -1 -1 +1 @@@",
    b"\\ No newline at end of file",
    b"diff --git a/x b/x",
    b"diff --git \"a/\\303 b/x",
    b"diff --cc x",
    b"diff -ru a b",
    b"GIT binary patch",
    b"literal 5",
    b"HcmV?d00001",
    b"-- ",
    b"--- a/x",
    b"+++ b/x",
    b"rename from x",
    b"similarity index 100%",
    b"",
    b"\r",
    b" ",
    b"\xff\xfe",
];

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "4294967295",
    "4294967296",
    "99999999999999999999999",
    "1152921504606846976",
];

#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize),
    Duplicate(usize),
    Alter(usize, usize, u8),
    Insert(usize, usize),
    Digits(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Delete),
        any::<usize>().prop_map(Mutation::Duplicate),
        (any::<usize>(), any::<usize>(), any::<u8>())
            .prop_map(|(l, c, b)| Mutation::Alter(l, c, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(l, t)| Mutation::Insert(l, t)),
        (any::<usize>(), any::<usize>()).prop_map(|(l, n)| Mutation::Digits(l, n)),
    ]
}

fn apply(lines: &mut Vec<Vec<u8>>, mutation: &Mutation) {
    let len = lines.len().max(1);
    match *mutation {
        Mutation::Delete(at) if !lines.is_empty() => {
            lines.remove(at % len);
        }
        Mutation::Duplicate(at) if !lines.is_empty() => {
            let copy = lines[at % len].clone();
            lines.insert(at % len, copy);
        }
        Mutation::Alter(at, column, byte) if !lines.is_empty() => {
            let line = &mut lines[at % len];
            if line.is_empty() {
                line.push(byte);
            } else {
                let column = column % line.len();
                line[column] = byte;
            }
        }
        Mutation::Insert(at, which) => {
            let tricky = TRICKY_LINES[which % TRICKY_LINES.len()].to_vec();
            lines.insert(at % (lines.len() + 1), tricky);
        }
        Mutation::Digits(at, which) if !lines.is_empty() => {
            let line = &mut lines[at % len];
            if let Some(start) = line.iter().position(u8::is_ascii_digit) {
                let end = line[start..]
                    .iter()
                    .position(|b| !b.is_ascii_digit())
                    .map_or(line.len(), |n| start + n);
                let number = NUMBERS[which % NUMBERS.len()].as_bytes();
                line.splice(start..end, number.iter().copied());
            }
        }
        _ => {}
    }
}

/// What any `Ok` must satisfy: counts honoured, diff lines in order.
fn check_patch(patch: &Patch, line_count: usize) {
    let mut last = 0;
    for file in &patch.files {
        assert!(file.diff_line > last && file.diff_line <= line_count);
        last = file.diff_line;
        for hunk in &file.hunks {
            let old = hunk.lines.iter().filter(|l| l.kind != Added).count();
            let new = hunk.lines.iter().filter(|l| l.kind != Removed).count();
            assert_eq!(
                (old, new),
                (hunk.old_count as usize, hunk.new_count as usize)
            );
            assert!(hunk.diff_line > last);
            last = hunk.diff_line;
            for line in &hunk.lines {
                assert!(line.diff_line > last && line.diff_line <= line_count);
                last = line.diff_line;
            }
        }
    }
}

fn check(input: &[u8]) {
    let line_count = input.split(|&b| b == b'\n').count();
    match parse_patch(input) {
        Ok(patch) => check_patch(&patch, line_count),
        Err(error) => {
            assert!(
                error.line() >= 1 && error.line() <= line_count.max(1),
                "{error:?}"
            );
            let mut out = String::new();
            let handler = miette::GraphicalReportHandler::new_themed(
                miette::GraphicalTheme::unicode_nocolor(),
            );
            assert!(handler.render_report(&mut out, &error).is_ok());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(input in proptest::collection::vec(any::<u8>(), 0..600)) {
        check(&input);
    }

    #[test]
    fn mangled_fixtures_never_panic(
        which in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 1..5),
    ) {
        let fixtures = &*FIXTURES;
        let mut lines = fixtures[which % fixtures.len()].clone();
        for mutation in &mutations {
            apply(&mut lines, mutation);
        }
        check(&lines.join(&b'\n'));
    }
}

#[test]
fn every_fixture_parses_or_fails_as_named() {
    for entry in std::fs::read_dir(fixture_dir()).expect("fixtures/diff exists") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        let result = parse_patch(&std::fs::read(&path).expect("readable"));
        assert_eq!(
            result.is_err(),
            name.starts_with("err_"),
            "{name}: {result:?}"
        );
    }
}

#[test]
fn huge_inputs_parse_to_the_right_error() {
    // 200k hunks in one file and a 4 MiB line. How fast is the benchmark's business
    // (BENCHMARKS.md); a quadratic step would still show here as a test that never ends.
    let mut input = b"--- a/x\n+++ b/x\n".to_vec();
    for i in 0..200_000u32 {
        input.extend(format!("@@ -{} +{} @@\n-a\n+b\n", i * 2 + 1, i * 2 + 1).bytes());
    }
    input.extend(b"diff --git a/");
    input.extend(std::iter::repeat_n(b'x', 4 << 20));
    input.extend(b" \"b/y\n");
    let error = parse_err_bytes(&input);
    assert_eq!(error.kind_code(), "bad_path");
}
