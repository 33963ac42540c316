//! Files of the repository under review, read only from inside its root.
//!
//! Every path comes from an untrusted diff. It is checked as text first (no absolute paths, no
//! `..`, no NUL), then resolved and checked again after symlinks are followed, and only regular
//! files are opened: a FIFO or a device would block or leak.

use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

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
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Reads `rel`, a path from the diff, if and only if it is a regular file inside the root.
    pub fn read(&self, rel: &str) -> Result<FileText, RepoError> {
        let path = self.resolve(rel)?;
        let meta = fs::metadata(&path).map_err(|e| io_error(rel, &e))?;
        if !meta.is_file() {
            return Err(refused(rel, "not a regular file"));
        }
        if meta.len() > self.max_file_bytes {
            return Err(RepoError::TooLarge {
                path: rel.to_string(),
                limit: self.max_file_bytes,
            });
        }
        let mut bytes = Vec::new();
        fs::File::open(&path)
            .and_then(|f| f.take(self.max_file_bytes + 1).read_to_end(&mut bytes))
            .map_err(|e| io_error(rel, &e))?;
        Ok(decode(bytes))
    }

    /// The real path of `rel` inside the root, or why it is refused.
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, RepoError> {
        check_relative(rel)?;
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
}
