//! The few git questions payreview asks, by running `git` (no libgit2): a file at a revision,
//! the diff of the work tree against a base, the merge-base.

use std::path::Path;
use std::process::Command;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("git {args} failed: {message}")]
pub struct GitError {
    pub args: String,
    pub message: String,
}

fn git(root: &Path, args: &[&str]) -> Result<Vec<u8>, GitError> {
    let failed = |message: String| GitError {
        args: args.join(" "),
        message,
    };
    let output = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .map_err(|e| failed(e.to_string()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(failed(stderr.trim().to_string()));
    }
    Ok(output.stdout)
}

/// The top of the work tree holding `dir`, if it is inside one.
pub fn toplevel(dir: &Path) -> Option<std::path::PathBuf> {
    let out = git(dir, &["rev-parse", "--show-toplevel"]).ok()?;
    let text = String::from_utf8(out).ok()?;
    let path = text.trim_end_matches(['\n', '\r']);
    (!path.is_empty()).then(|| path.into())
}

/// The blob of `path` at `rev` (a path checked by `repo::check_relative` first).
pub fn show(root: &Path, rev: &str, path: &str) -> Result<Vec<u8>, GitError> {
    super::repo::check_relative(path).map_err(|e| GitError {
        args: format!("show {rev}:{path}"),
        message: e.to_string(),
    })?;
    git(root, &["show", &format!("{rev}:{path}")])
}

/// `git merge-base head rev`: what a pull request of `head` against `rev` is compared with.
pub fn merge_base(root: &Path, head: &str, rev: &str) -> Result<String, GitError> {
    let out = git(root, &["merge-base", head, rev])?;
    Ok(String::from_utf8_lossy(&out).trim().to_string())
}

/// The diff between two revisions, in the same form as `diff`.
pub fn diff_revisions(root: &Path, from: &str, to: &str) -> Result<Vec<u8>, GitError> {
    git(
        root,
        &[
            "-c",
            "core.quotepath=on",
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--full-index",
            from,
            to,
            "--",
        ],
    )
}

/// The diff of the work tree against `rev` (or, `staged`, of the index against it), in the form
/// payreview parses: full blob ids, C-quoted paths, no colour or external tools.
pub fn diff(root: &Path, rev: &str, staged: bool) -> Result<Vec<u8>, GitError> {
    let mut args = vec!["-c", "core.quotepath=on", "diff"];
    if staged {
        args.push("--cached");
    }
    args.extend(["--no-color", "--no-ext-diff", "--full-index", rev, "--"]);
    git(root, &args)
}

/// The Python files of the work tree under `root`, tracked or untracked but not ignored, as
/// paths relative to `root` (`-z`: names with newlines or quotes survive).
pub fn ls_python_files(root: &Path) -> Result<Vec<String>, GitError> {
    let out = git(
        root,
        &[
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
            "--",
            "*.py",
        ],
    )?;
    let mut files: Vec<String> = out
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .filter_map(|p| String::from_utf8(p.to_vec()).ok())
        .collect();
    files.sort();
    files.dedup();
    Ok(files)
}
