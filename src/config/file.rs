//! The configuration file: `[tool.payreview]` in `pyproject.toml`, or `payreview.toml` /
//! `.payreview.toml` at the repository root (first found wins; `--config FILE` overrides,
//! `--isolated` ignores them all). Unknown keys and wrong types are errors that point into the
//! file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use miette::{NamedSource, SourceSpan};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::FailOn;
use crate::review::{Lang, Severity};

/// The `[tool.payreview]` table / the whole `payreview.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FileConfig {
    /// Rule ids or prefixes (`RETRY`) to run; all when absent.
    pub select: Option<Vec<Spanned<String>>>,
    /// Rule ids or prefixes not to run.
    pub ignore: Option<Vec<Spanned<String>>>,
    /// Severity per rule id or prefix.
    pub severity: Option<BTreeMap<String, Spanned<Severity>>>,
    /// Globs of paths (relative to the repository root) not to review.
    pub exclude: Option<Vec<Spanned<String>>>,
    pub fail_on: Option<FailOn>,
    pub lang: Option<Lang>,
    /// Added to the built-in vocabulary (never replacing it).
    pub payment_operations: Option<Vec<String>>,
    pub money_arguments: Option<Vec<String>>,
    pub entities: Option<Vec<String>>,
    pub cache_clients: Option<Vec<String>>,
    pub task_decorators: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
struct Pyproject {
    #[serde(default)]
    tool: Option<Tools>,
}

#[derive(Debug, Default, Deserialize)]
struct Tools {
    payreview: Option<FileConfig>,
}

/// A configuration file that could not be used.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
#[diagnostic(code(payreview::config))]
pub struct ConfigError {
    message: String,
    #[source_code]
    src: NamedSource<String>,
    #[label("here")]
    at: Option<SourceSpan>,
}

impl ConfigError {
    fn new(path: &Path, text: &str, message: String, span: Option<std::ops::Range<usize>>) -> Self {
        ConfigError {
            message: format!("{}: {message}", path.display()),
            src: NamedSource::new(path.display().to_string(), text.to_string()),
            at: span.map(|r| SourceSpan::from(r.start..r.end)),
        }
    }
}

/// A configuration and where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    pub config: FileConfig,
}

/// The files looked for at the root, in order.
pub const CANDIDATES: &[&str] = &["pyproject.toml", "payreview.toml", ".payreview.toml"];

/// The first configuration found at `root`: a `pyproject.toml` counts only if it has a
/// `[tool.payreview]` table.
pub fn discover(root: &Path) -> Result<Option<Loaded>, ConfigError> {
    for name in CANDIDATES {
        let path = root.join(name);
        if !path.is_file() {
            continue;
        }
        if let Some(loaded) = load_optional(&path)? {
            return Ok(Some(loaded));
        }
    }
    Ok(None)
}

/// Loads `path` (`--config`): a pyproject without `[tool.payreview]` is an empty configuration.
pub fn load(path: &Path) -> Result<Loaded, ConfigError> {
    Ok(load_optional(path)?.unwrap_or_else(|| Loaded {
        path: path.to_path_buf(),
        config: FileConfig::default(),
    }))
}

fn load_optional(path: &Path) -> Result<Option<Loaded>, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(path, "", format!("cannot be read: {e}"), None))?;
    let parse_error =
        |e: toml::de::Error| ConfigError::new(path, &text, e.message().to_string(), e.span());
    let is_pyproject = path.file_name().is_some_and(|n| n == "pyproject.toml");
    let config = if is_pyproject {
        let project: Pyproject = toml::from_str(&text).map_err(parse_error)?;
        match project.tool.and_then(|t| t.payreview) {
            Some(config) => config,
            None => return Ok(None),
        }
    } else {
        toml::from_str(&text).map_err(parse_error)?
    };
    validate(path, &text, &config)?;
    Ok(Some(Loaded {
        path: path.to_path_buf(),
        config,
    }))
}

/// Rule ids and prefixes must name some rule; globs must compile.
fn validate(path: &Path, text: &str, config: &FileConfig) -> Result<(), ConfigError> {
    let known = |pattern: &str| {
        crate::rules::ALL
            .iter()
            .any(|r| r.id.starts_with(&pattern.to_ascii_uppercase()))
    };
    for (key, list) in [("select", &config.select), ("ignore", &config.ignore)] {
        for item in list.iter().flatten() {
            if !known(item.get_ref()) {
                return Err(ConfigError::new(
                    path,
                    text,
                    format!("`{key}`: no rule id starts with `{}`", item.get_ref()),
                    Some(item.span()),
                ));
            }
        }
    }
    for (rule, severity) in config.severity.iter().flatten() {
        if !known(rule) {
            return Err(ConfigError::new(
                path,
                text,
                format!("`severity`: no rule id starts with `{rule}`"),
                Some(severity.span()),
            ));
        }
    }
    for glob in config.exclude.iter().flatten() {
        if let Err(e) = globset::Glob::new(glob.get_ref()) {
            return Err(ConfigError::new(
                path,
                text,
                format!("`exclude`: {e}"),
                Some(glob.span()),
            ));
        }
    }
    Ok(())
}

/// The effective configuration, as `payreview config` prints it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Effective {
    pub source: String,
    pub select: Vec<String>,
    pub ignore: Vec<String>,
    pub severity: BTreeMap<String, Severity>,
    pub exclude: Vec<String>,
    pub fail_on: String,
    pub lang: Lang,
    pub payment_operations: Vec<String>,
    pub money_arguments: Vec<String>,
    pub entities: Vec<String>,
    pub cache_clients: Vec<String>,
    pub task_decorators: Vec<String>,
}
