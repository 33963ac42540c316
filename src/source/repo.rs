//! Files of the repository under review, read only from inside its root.
//!
//! Every path comes from an untrusted diff. It is checked as text first (no absolute paths, no
//! `..`, no NUL), then resolved and checked again after symlinks are followed, and only regular
//! files are opened: a FIFO or a device would block or leak.

use std::collections::HashSet;
use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Why a file of the repository could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RepoError {
    #[error("refused path {path:?}: {why}")]
    Refused { path: String, why: &'static str },
    #[error("{path} is not in the repository")]
    Missing { path: String },
    #[error("{path} is larger than {limit} bytes; reviewed from the diff alone")]
    TooLarge { path: String, limit: u64 },
    #[error("could not read {path}: {message}")]
    Io { path: String, message: String },
}

/// The root of a checked-out repository.
#[derive(Debug, Clone)]
pub struct Repo {
    root: PathBuf,
    max_file_bytes: u64,
    /// Directories under the root found to be real directories, not symbolic links: the files
    /// of a large change share them, and asking again for each file (as resolving a path does,
    /// for every component from `/` down) cost two system calls per component.
    plain_dirs: Arc<Mutex<HashSet<PathBuf>>>,
}

/// A file's text, and whether bytes that were not UTF-8 had to be replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileText {
    pub text: String,
    pub lossy: bool,
}

impl Repo {
    /// `root` must exist; it is canonicalized once so every later check compares real paths.
    pub fn open(root: &Path, max_file_bytes: u64) -> std::io::Result<Self> {
        Ok(Repo {
            root: root.canonicalize()?,
            max_file_bytes,
            plain_dirs: Arc::default(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Reads `rel`, a path from the diff, if and only if it is a regular file inside the root.
    pub fn read(&self, rel: &str) -> Result<FileText, RepoError> {
        check_relative(rel)?;
        let (path, meta) = match self.resolve_plain(rel) {
            Some(found) => found,
            None => {
                let path = self.resolve_linked(rel)?;
                let meta = fs::metadata(&path).map_err(|e| io_error(rel, &e))?;
                (path, meta)
            }
        };
        if !meta.is_file() {
            return Err(refused(rel, "not a regular file"));
        }
        if meta.len() > self.max_file_bytes {
            return Err(RepoError::TooLarge {
                path: rel.to_string(),
                limit: self.max_file_bytes,
            });
        }
        // Sized from the `stat`: read in one go, not in doubling chunks.
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0) + 1);
        fs::File::open(&path)
            .and_then(|f| f.take(self.max_file_bytes + 1).read_to_end(&mut bytes))
            .map_err(|e| io_error(rel, &e))?;
        Ok(decode(bytes))
    }

    /// The real path of `rel` inside the root, or why it is refused.
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, RepoError> {
        check_relative(rel)?;
        match self.resolve_plain(rel) {
            Some((path, _)) => Ok(path),
            None => self.resolve_linked(rel),
        }
    }

    /// `resolve` for a path that may go through symbolic links, or not exist: followed, then
    /// checked to be still inside the root.
    fn resolve_linked(&self, rel: &str) -> Result<PathBuf, RepoError> {
        let joined = self.root.join(rel);
        let real = match joined.canonicalize() {
            Ok(real) => real,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A dangling symlink also lands here; do not follow it anywhere.
                return Err(if fs::symlink_metadata(&joined).is_ok() {
                    refused(rel, "a symlink that leads nowhere")
                } else {
                    RepoError::Missing {
                        path: rel.to_string(),
                    }
                });
            }
            Err(e) => return Err(io_error(rel, &e)),
        };
        if !real.starts_with(&self.root) {
            return Err(refused(rel, "it leads outside the repository"));
        }
        Ok(real)
    }

    /// `rel` (already checked as text) and what it is, when no component of it is a symbolic
    /// link and it exists: then it is its own real path under the (canonical) root. One `lstat`
    /// for the file, and one for each directory not seen before. `None` leaves the decision to
    /// `resolve_linked`, which follows the links and says why a path is refused.
    fn resolve_plain(&self, rel: &str) -> Option<(PathBuf, fs::Metadata)> {
        let mut parts = Path::new(rel).components().filter_map(|c| match c {
            Component::Normal(part) => Some(part),
            _ => None,
        });
        let file = parts.next_back()?;
        let mut path = self.root.clone();
        for dir in parts {
            path.push(dir);
            if self.plain_dirs().contains(&path) {
                continue;
            }
            // A link is not a directory to `symlink_metadata`: `resolve_linked` follows it.
            if !fs::symlink_metadata(&path).ok()?.is_dir() {
                return None;
            }
            self.plain_dirs().insert(path.clone());
        }
        path.push(file);
        let meta = fs::symlink_metadata(&path).ok()?;
        (!meta.file_type().is_symlink()).then_some((path, meta))
    }

    fn plain_dirs(&self) -> std::sync::MutexGuard<'_, HashSet<PathBuf>> {
        self.plain_dirs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Textual checks on a path from the diff, before the file system is asked anything.
pub fn check_relative(rel: &str) -> Result<(), RepoError> {
    if rel.is_empty() {
        return Err(refused(rel, "empty path"));
    }
    if rel.contains('\0') {
        return Err(refused(rel, "it holds a NUL byte"));
    }
    let path = Path::new(rel);
    for component in path.components() {
        match component {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => return Err(refused(rel, "it climbs out with `..`")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(refused(rel, "it is absolute"));
            }
        }
    }
    Ok(())
}

/// UTF-8 text, with invalid bytes replaced; a leading BOM is kept (it is part of the blob).
pub fn decode(bytes: Vec<u8>) -> FileText {
    match String::from_utf8(bytes) {
        Ok(text) => FileText { text, lossy: false },
        Err(e) => FileText {
            text: String::from_utf8_lossy(e.as_bytes()).into_owned(),
            lossy: true,
        },
    }
}

fn refused(path: &str, why: &'static str) -> RepoError {
    RepoError::Refused {
        path: path.escape_debug().to_string(),
        why,
    }
}

fn io_error(path: &str, e: &std::io::Error) -> RepoError {
    RepoError::Io {
        path: path.to_string(),
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn textual_checks_refuse_escapes() {
        for bad in ["../../etc/passwd", "/etc/passwd", "a/../../b", "a\0b", ""] {
            assert!(
                matches!(check_relative(bad), Err(RepoError::Refused { .. })),
                "{bad:?} must be refused"
            );
        }
        assert!(check_relative("app/./payments/client.py").is_ok());
    }

    fn repo_with(files: &[&str]) -> (tempfile::TempDir, Repo) {
        let dir = tempfile::tempdir().expect("temp dir");
        for file in files {
            let path = dir.path().join(file);
            fs::create_dir_all(path.parent().expect("a parent")).expect("dirs");
            fs::write(&path, format!("# {file}\n")).expect("write");
        }
        let repo = Repo::open(dir.path(), 1 << 20).expect("root");
        (dir, repo)
    }

    #[test]
    fn plain_paths_resolve_to_themselves_and_share_their_directories() {
        let (_dir, repo) = repo_with(&["app/payments/a.py", "app/payments/b.py"]);
        let a = repo.resolve("app/./payments/a.py").expect("plain path");
        assert_eq!(a, repo.root().join("app/payments/a.py"));
        assert_eq!(
            repo.read("app/payments/b.py").expect("read").text,
            "# app/payments/b.py\n"
        );
        // Both files were found through the same two directories, each checked once.
        assert_eq!(repo.plain_dirs().len(), 2);
        assert!(matches!(
            repo.read("app/payments/c.py"),
            Err(RepoError::Missing { .. })
        ));
        assert!(matches!(
            repo.read("app/payments"),
            Err(RepoError::Refused { .. })
        ));
    }

    #[test]
    fn a_linked_directory_is_followed_only_inside_the_root() {
        let (_outside, elsewhere) = repo_with(&["secret.py"]);
        let (_dir, repo) = repo_with(&["app/real/pay.py"]);
        let link = |target: &Path, at: &str| {
            std::os::unix::fs::symlink(target, repo.root().join(at)).expect("symlink")
        };
        link(elsewhere.root(), "app/out");
        link(&repo.root().join("app/real"), "app/alias");
        assert!(matches!(
            repo.read("app/out/secret.py"),
            Err(RepoError::Refused { .. })
        ));
        // A link that stays inside is resolved to where it leads, as before.
        assert_eq!(
            repo.resolve("app/alias/pay.py").expect("inside"),
            repo.root().join("app/real/pay.py")
        );
        // Neither link was taken for a plain directory.
        assert!(!repo.plain_dirs().contains(&repo.root().join("app/out")));
        assert!(!repo.plain_dirs().contains(&repo.root().join("app/alias")));
    }
}
