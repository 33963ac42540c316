//! Command-line flags (clap) and their translation into validated `Settings`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::{self, FailOn, Format, Settings};
use crate::error::Error;
use crate::review::Lang;
use crate::source::{Repo, Workspace, git};

/// `--version`: the program's version and the release of the rule catalogue it carries, which
/// says more about what a review will find than the program's own.
pub fn version() -> &'static str {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION.get_or_init(|| {
        format!(
            "{} (rule catalogue {}, {} rules)",
            env!("CARGO_PKG_VERSION"),
            crate::rules::catalogue_release().version,
            crate::rules::ALL.len()
        )
    })
}

#[derive(Debug, Parser)]
#[command(
    name = "payreview",
    version,
    about = "Reviews pull-request diffs of Python services for payment-safety bugs",
    long_about = "Reviews pull-request diffs of Python services for payment-safety bugs: \
                  double charges, wrong amounts, orders marked paid that were never paid.\n\n\
                  Exit status: 0 when nothing at or above --fail-on was found, 1 when something \
                  was, 2 on a usage or input error."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Print only the report: no remarks and no progress bar on standard error (errors still
    /// are).
    #[arg(long, short, global = true)]
    pub quiet: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Review a diff (a file, `-` for standard input, or the work tree against --base).
    Review(ReviewArgs),
    /// List the rules.
    Rules {
        /// `text` (a table) or `json` (id, name, severity, title of each rule).
        #[arg(long, value_enum, default_value = "text")]
        format: RulesFormat,
    },
    /// Print the configuration in force (file, rules, vocabulary) as TOML.
    Config {
        /// The repository whose configuration to read (default: the git work tree around the
        /// current directory, or the current directory).
        #[arg(long, value_name = "DIR")]
        repo: Option<PathBuf>,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Show one rule's documentation.
    Rule {
        /// Rule id, such as IDEM001.
        id: String,
        #[arg(long, value_enum, env = "PAYREVIEW_LANG", default_value = "en")]
        lang: LangArg,
    },
    /// Print a shell completion script: `payreview completions bash > /etc/bash_completion.d/payreview`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Show what the parsers saw (for rule authors).
    #[command(hide = true, subcommand)]
    Debug(DebugCommand),
}

#[derive(Debug, Subcommand)]
pub enum DebugCommand {
    /// The parsed diff.
    Patch { diff: PathBuf },
    /// The tree-sitter tree of a Python file.
    Tree { file: PathBuf },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RulesFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LangArg {
    En,
    Ru,
}

impl From<LangArg> for Lang {
    fn from(lang: LangArg) -> Self {
        match lang {
            LangArg::En => Lang::En,
            LangArg::Ru => Lang::Ru,
        }
    }
}

/// Where the configuration comes from.
#[derive(Debug, Clone, Default, Args)]
pub struct ConfigArgs {
    /// Read the configuration from FILE instead of looking for pyproject.toml
    /// ([tool.payreview]), payreview.toml or .payreview.toml at the repository root.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Ignore every configuration file.
    #[arg(long, conflicts_with = "config")]
    pub isolated: bool,
}

impl ConfigArgs {
    /// The configuration for a run rooted at `root`, if any.
    pub fn load(&self, root: &std::path::Path) -> Result<Option<config::file::Loaded>, Error> {
        if self.isolated {
            return Ok(None);
        }
        let loaded = match &self.config {
            Some(path) => Some(config::file::load(path)?),
            None => config::file::discover(root)?,
        };
        Ok(loaded)
    }
}

#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// The diff to review: a file, or `-` for standard input. Omit it with --base.
    pub diff: Option<PathBuf>,
    /// The repository the diff applies to (default: the git work tree around the current
    /// directory, if any).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// Review from the diff alone, without reading any repository.
    #[arg(long, conflicts_with_all = ["repo", "base"])]
    pub diff_only: bool,
    /// Compare with this revision: old versions are read from git; without a DIFF, the diff is
    /// the work tree against the merge-base of HEAD and REV (what a pull request against REV
    /// shows).
    #[arg(long, value_name = "REV")]
    pub base: Option<String>,
    /// With --base: the revision whose files are reviewed (a branch, a commit) instead of the
    /// work tree; without a DIFF, the diff is HEAD-REV against the merge-base of it and --base.
    #[arg(long, value_name = "REV", requires = "base", conflicts_with = "staged")]
    pub head: Option<String>,
    /// Review the staged change (the index against HEAD), as a pre-commit hook does.
    #[arg(long, conflicts_with_all = ["diff", "base", "diff_only"])]
    pub staged: bool,
    /// The pull request's description, to check the change against (`-` for standard input).
    #[arg(long, value_name = "FILE")]
    pub description: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Output language [default: en, or the configuration's `lang`].
    #[arg(long, value_enum, env = "PAYREVIEW_LANG")]
    pub lang: Option<LangArg>,
    /// Write the report to FILE (atomically) instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Exit with status 1 when a finding at or above this severity is found [default: blocker,
    /// or the configuration's `fail-on`].
    #[arg(long, value_enum)]
    pub fail_on: Option<FailOn>,
    /// Files larger than this are reviewed from the diff alone.
    #[arg(long, value_name = "BYTES", default_value_t = config::DEFAULT_MAX_FILE_BYTES)]
    pub max_file_bytes: u64,
    /// Review at most this many files of the diff.
    #[arg(long, value_name = "N", default_value_t = config::DEFAULT_MAX_FILES)]
    pub max_files: usize,
    /// Refuse a diff larger than this (exit status 2) instead of reading it all into memory.
    #[arg(long, value_name = "BYTES", default_value_t = config::DEFAULT_MAX_DIFF_BYTES)]
    pub max_diff_bytes: u64,
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// Where the diff comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    File(PathBuf),
    Stdin,
    /// From git: the work tree (or --head) against the merge-base with --base, which the
    /// workspace then holds.
    Git,
    /// The index against HEAD.
    Staged,
}

impl ReviewArgs {
    /// Validates the flags: which workspace, which input.
    pub fn settings(&self) -> Result<(Settings, Input), Error> {
        let input = match (&self.diff, &self.base) {
            _ if self.staged => Input::Staged,
            (Some(p), _) if p.as_os_str() == "-" => Input::Stdin,
            (Some(p), _) => Input::File(p.clone()),
            (None, Some(_)) => Input::Git,
            (None, None) => return Err(Error::NoInput),
        };
        let workspace = if self.diff_only {
            Workspace::DiffOnly
        } else {
            let root = match &self.repo {
                Some(dir) => Some(dir.clone()),
                None => std::env::current_dir().ok().and_then(|d| git::toplevel(&d)),
            };
            match root {
                Some(root) => Workspace::Repository {
                    repo: Repo::open(&root, self.max_file_bytes).map_err(|source| Error::Repo {
                        path: root.clone(),
                        source,
                    })?,
                    base: self.base.clone(),
                    staged: self.staged,
                    head: self.head.clone(),
                },
                None if self.base.is_some() || self.staged => {
                    return Err(Error::BaseWithoutRepo {
                        rev: self.base.clone().unwrap_or_else(|| "--staged".to_string()),
                    });
                }
                None => Workspace::DiffOnly,
            }
        };
        let description = match &self.description {
            None => None,
            Some(p) => Some(read_text(p).map_err(|source| Error::ReadDescription {
                path: p.clone(),
                source,
            })?),
        };
        let workspace = match (workspace, &input) {
            // Without a diff file, the change is what a pull request of the head against --base
            // shows: from their merge-base. Old versions are read at that commit too, not at
            // --base itself, which may have moved on since the branch left it.
            (
                Workspace::Repository {
                    repo,
                    base: Some(rev),
                    staged,
                    head,
                },
                Input::Git,
            ) => {
                let merge_base =
                    git::merge_base(repo.root(), head.as_deref().unwrap_or("HEAD"), &rev)?;
                Workspace::Repository {
                    repo,
                    base: Some(merge_base),
                    staged,
                    head,
                }
            }
            (workspace, _) => workspace,
        };
        let mut settings = Settings {
            workspace,
            format: self.format,
            output: self.output.clone(),
            description,
            max_file_bytes: self.max_file_bytes,
            max_files: self.max_files.max(1),
            max_diff_bytes: self.max_diff_bytes,
            ..Settings::diff_only()
        };
        let root = settings.root().or_else(|| std::env::current_dir().ok());
        if let Some(loaded) = root.map(|r| self.config.load(&r)).transpose()?.flatten() {
            settings.apply_file(&loaded);
        }
        if let Some(lang) = self.lang {
            settings.lang = lang.into();
        }
        if let Some(fail_on) = self.fail_on {
            settings.fail_on = fail_on;
        }
        Ok((settings, input))
    }
}

fn read_text(path: &std::path::Path) -> std::io::Result<String> {
    let bytes = if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut buf)?;
        buf
    } else {
        std::fs::read(path)?
    };
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
