//! Which files of the repository the project index reads.

use std::fs;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use crate::source::git;

/// Directories that hold someone else's code or build output, never the project's own.
const SKIPPED_DIRS: &[&str] = &[
    "venv",
    "env",
    "site-packages",
    "node_modules",
    "vendor",
    "third_party",
    "build",
    "dist",
    "__pycache__",
];

/// The Python files under `root`, relative, sorted, at most `cap` of them (the bool says some
/// were left out). A git work tree answers with `git ls-files`, which honours `.gitignore`.
pub fn python_files(root: &Path, cap: usize) -> (Vec<String>, bool) {
    let from_git = (root.join(".git").exists() || git::toplevel(root).is_some())
        .then(|| git::ls_python_files(root).ok())
        .flatten()
        // Nothing from git under a root that is itself ignored (a checkout inside another
        // repository's build folder): the files are still what is under review.
        .filter(|files| !files.is_empty());
    let mut files = from_git.unwrap_or_else(|| walk(root));
    files.retain(|p| !p.split('/').any(skipped_dir));
    files.sort();
    let truncated = files.len() > cap;
    files.truncate(cap);
    (files, truncated)
}

/// `python_files`, started on a thread of its own when a review starts: listing runs `git`
/// (2–6 ms on the benchmarks), which the rules, all waiting for the index's one build, would
/// otherwise wait out too.
pub struct Listing {
    root: PathBuf,
    cap: usize,
    pending: Option<JoinHandle<(Vec<String>, bool)>>,
}

impl Listing {
    pub fn start(root: &Path, cap: usize) -> Listing {
        let owned = root.to_path_buf();
        // A thread the system refuses leaves the listing to `files`.
        let pending = std::thread::Builder::new()
            .name("payreview-list".to_string())
            .spawn(move || python_files(&owned, cap))
            .ok();
        Listing {
            root: root.to_path_buf(),
            cap,
            pending,
        }
    }

    /// A listing made only when `files` asks.
    pub fn deferred(root: &Path, cap: usize) -> Listing {
        Listing {
            root: root.to_path_buf(),
            cap,
            pending: None,
        }
    }

    /// What `python_files` gives, waiting for the thread if it has not finished.
    pub fn files(self) -> (Vec<String>, bool) {
        match self.pending.map(JoinHandle::join) {
            Some(Ok(listed)) => listed,
            _ => python_files(&self.root, self.cap),
        }
    }
}

fn skipped_dir(part: &str) -> bool {
    SKIPPED_DIRS.contains(&part) || (part.starts_with('.') && part != "." && part.len() > 1)
}

/// A walk that never follows a symlink and skips hidden and vendored directories.
fn walk(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        let dir = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(&rel)
        };
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let child = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if kind.is_dir() {
                if !skipped_dir(&name) {
                    stack.push(child);
                }
            } else if kind.is_file() && name.ends_with(".py") {
                out.push(child);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_skips_vendored_and_hidden_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        for rel in [
            "app/a.py",
            "app/b.txt",
            ".venv/lib/x.py",
            "venv/y.py",
            "node_modules/z.py",
            ".hidden/h.py",
            "pkg/sub/c.py",
        ] {
            let path = dir.path().join(rel);
            fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            fs::write(path, "x = 1\n").expect("write");
        }
        let (files, truncated) = python_files(dir.path(), 10);
        assert_eq!(files, ["app/a.py", "pkg/sub/c.py"]);
        assert!(!truncated);
        let (files, truncated) = python_files(dir.path(), 1);
        assert_eq!(files, ["app/a.py"]);
        assert!(truncated);
    }

    #[test]
    fn a_listing_started_ahead_gives_the_files_and_the_cap_of_one_made_when_asked() {
        let dir = tempfile::tempdir().expect("tempdir");
        for rel in ["app/a.py", "app/b.py", "pkg/c.py", "notes.txt"] {
            let path = dir.path().join(rel);
            fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            fs::write(path, "x = 1\n").expect("write");
        }
        let started = Listing::start(dir.path(), 2);
        let deferred = Listing::deferred(dir.path(), 2);
        let expected = (vec!["app/a.py".to_string(), "app/b.py".to_string()], true);
        assert_eq!(started.files(), expected);
        assert_eq!(deferred.files(), expected);
    }

    #[cfg(unix)]
    #[test]
    fn the_walk_does_not_follow_symlinks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        fs::write(outside.path().join("secret.py"), "x = 1\n").expect("write");
        fs::create_dir_all(dir.path().join("app")).expect("mkdir");
        fs::write(dir.path().join("app/a.py"), "x = 1\n").expect("write");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("app/linked")).expect("link");
        std::os::unix::fs::symlink(
            outside.path().join("secret.py"),
            dir.path().join("app/b.py"),
        )
        .expect("link");
        let (files, _) = python_files(dir.path(), 10);
        assert_eq!(files, ["app/a.py"]);
    }

    #[test]
    fn a_git_work_tree_lists_what_git_does_not_ignore() {
        let dir = tempfile::tempdir().expect("tempdir");
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args(args)
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if !git(&["init", "-q"]) {
            return; // no git on this machine: the walk is tested above
        }
        for (rel, text) in [
            (".gitignore", "generated/\n"),
            ("app/a.py", "x = 1\n"),
            ("app/new.py", "y = 2\n"),
            ("generated/g.py", "z = 3\n"),
        ] {
            let path = dir.path().join(rel);
            fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            fs::write(path, text).expect("write");
        }
        assert!(git(&["add", "app/a.py"]));
        let (files, _) = python_files(dir.path(), 10);
        assert_eq!(files, ["app/a.py", "app/new.py"]);
    }
}
