//! payreview: reviews pull-request diffs of Python services for payment-safety bugs.
//!
//! The pipeline runs one way: `diff` (parse the unified diff) → `source` (old and new text of
//! each file) → `python` (trees and the shared index) → `rules` → `review` (findings, verdict)
//! → `report` (JSON, text, …), with `cli` on top. `review()` is the library entry point;
//! `run_cli()` is the binary's, taking argv so tests run it in-process.

pub mod alloc;
pub mod cli;
pub mod config;
pub mod diff;
pub mod error;
pub mod exit;
#[doc(hidden)]
pub mod fuzzing;
pub mod index;
mod progress;
pub mod python;
pub mod report;
pub mod review;
pub mod rules;
pub mod source;
#[cfg(test)]
mod test_support;

pub use error::Error;

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::Path;

use clap::{CommandFactory, FromArgMatches};

use cli::{Cli, Command, DebugCommand, Input};
use config::Settings;
use review::Review;

/// Parses `diff` and reviews it.
pub fn review_diff(diff: &[u8], settings: &Settings) -> Result<Review, Error> {
    let patch = diff::parse_patch(diff)?;
    Ok(review::review(&patch, settings))
}

/// How a run ended, for the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome(pub u8);

impl Outcome {
    pub fn exit_code(self) -> std::process::ExitCode {
        std::process::ExitCode::from(self.0)
    }
}

/// Runs the command line `args` (argv, program name first), writing reports to `out`.
pub fn run_cli<I, T>(args: I, out: &mut dyn Write) -> Result<Outcome, Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let parsed = Cli::command()
        .version(cli::version())
        .try_get_matches_from(args)
        .and_then(|matches| Cli::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::ERROR
            } else {
                exit::CLEAN
            };
            if e.use_stderr() {
                let _ = e.print();
            } else {
                write!(out, "{}", e.render()).map_err(Error::Write)?;
            }
            return Ok(Outcome(code));
        }
    };
    let quiet = cli.quiet;
    match cli.command {
        Command::Review(args) => {
            let (settings, input) = args.settings()?;
            if !args.diff_only && matches!(settings.workspace, source::Workspace::DiffOnly) {
                note(
                    quiet,
                    "not inside a git work tree, so the files cannot be read; reviewing from the \
                     diff alone (pass --repo DIR to read them, or --diff-only to say so)",
                );
            }
            run_review(&settings, &input, quiet, out)
        }
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "payreview", out);
            Ok(Outcome(exit::CLEAN))
        }
        Command::Config { repo, config } => {
            let root = repo
                .or_else(|| {
                    std::env::current_dir()
                        .ok()
                        .and_then(|d| source::git::toplevel(&d))
                })
                .or_else(|| std::env::current_dir().ok())
                .unwrap_or_default();
            let mut settings = Settings::diff_only();
            if let Some(loaded) = config.load(&root)? {
                settings.apply_file(&loaded);
            }
            let text = toml::to_string(&settings.effective()).unwrap_or_default();
            out.write_all(text.as_bytes()).map_err(Error::Write)?;
            Ok(Outcome(exit::CLEAN))
        }
        Command::Rules { format } => {
            match format {
                cli::RulesFormat::Text => report::rules_table(out),
                cli::RulesFormat::Json => report::rules_json(out),
            }
            .map_err(Error::Write)?;
            Ok(Outcome(exit::CLEAN))
        }
        Command::Rule { id, lang } => {
            let rule = rules::find(&id).ok_or(Error::UnknownRule { id })?;
            report::rule_doc(rule, lang.into(), out).map_err(Error::Write)?;
            Ok(Outcome(exit::CLEAN))
        }
        Command::Debug(command) => debug(command, out),
    }
}

/// A remark on standard error for the person at the terminal; `--quiet` silences it.
fn note(quiet: bool, text: &str) {
    if !quiet {
        eprintln!("payreview: {text}");
    }
}

fn run_review(
    settings: &Settings,
    input: &Input,
    quiet: bool,
    out: &mut dyn Write,
) -> Result<Outcome, Error> {
    let bytes = read_input(settings, input)?;
    let patch = diff::parse_patch(&bytes)?;
    let files = patch.files.len().min(settings.max_files);
    let bar = progress::bar(files, quiet);
    let review = review::review_observed(&patch, settings, &|| bar.inc(1));
    bar.finish_and_clear();
    if !review.files.iter().any(|f| review::is_python(&f.path)) {
        note(quiet, "the diff touches no Python files; nothing to review");
    }
    let mut rendered = Vec::new();
    let options = report::Options {
        color: settings.output.is_none() && color_wanted(),
    };
    report::render_with(
        &review,
        settings.format,
        settings.lang,
        options,
        &mut rendered,
    )
    .map_err(|report::RenderError::Io(e)| Error::Write(e))?;
    match &settings.output {
        Some(path) => write_atomically(path, &rendered)?,
        None => out.write_all(&rendered).map_err(Error::Write)?,
    }
    let failed = settings
        .fail_on
        .threshold()
        .zip(review.worst())
        .is_some_and(|(threshold, worst)| worst >= threshold);
    Ok(Outcome(if failed { exit::FINDINGS } else { exit::CLEAN }))
}

/// Colour only on a terminal, and never when `NO_COLOR` is set to anything (no-color.org).
fn color_wanted() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
}

fn read_input(settings: &Settings, input: &Input) -> Result<Vec<u8>, Error> {
    let limit = settings.max_diff_bytes;
    let too_large = |path: &Path| Error::DiffTooLarge {
        path: path.to_path_buf(),
        limit,
    };
    let capped = |path: &Path, reader: &mut dyn Read| {
        let mut buf = Vec::new();
        reader
            .take(limit.saturating_add(1))
            .read_to_end(&mut buf)
            .map_err(|source| Error::ReadInput {
                path: path.to_path_buf(),
                source,
            })?;
        if buf.len() as u64 > limit {
            return Err(too_large(path));
        }
        Ok(buf)
    };
    let from_git = |bytes: Vec<u8>, what: &str| {
        if bytes.len() as u64 > limit {
            return Err(too_large(Path::new(what)));
        }
        Ok(bytes)
    };
    match input {
        Input::File(path) => {
            let mut file = std::fs::File::open(path).map_err(|source| Error::ReadInput {
                path: path.clone(),
                source,
            })?;
            capped(path, &mut file)
        }
        Input::Stdin => capped(Path::new("-"), &mut std::io::stdin().lock()),
        Input::Git => {
            let source::Workspace::Repository {
                repo,
                base: Some(base),
                head,
                ..
            } = &settings.workspace
            else {
                return Err(Error::NoInput);
            };
            match head {
                Some(head) => from_git(
                    source::git::diff_revisions(repo.root(), base, head)?,
                    &format!("git diff {base} {head}"),
                ),
                None => from_git(
                    source::git::diff(repo.root(), base, false)?,
                    &format!("git diff {base}"),
                ),
            }
        }
        Input::Staged => {
            let source::Workspace::Repository { repo, .. } = &settings.workspace else {
                return Err(Error::BaseWithoutRepo {
                    rev: "--staged".to_string(),
                });
            };
            from_git(
                source::git::diff(repo.root(), "HEAD", true)?,
                "git diff --cached",
            )
        }
    }
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over `path`, so a reader
/// never sees half a report. Only a regular file is replaced that way: a rename would put a
/// plain file in the place of `/dev/null`, a pipe or a symbolic link (and, run as root, break
/// `/dev/null` for every process on the machine), so those are written to where they are.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let failed = |source| Error::WriteOutput {
        path: path.to_path_buf(),
        source,
    };
    let in_place = std::fs::symlink_metadata(path).is_ok_and(|m| !m.file_type().is_file());
    if in_place {
        return std::fs::write(path, bytes).map_err(failed);
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(failed)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        failed(e)
    })
}

fn debug(command: DebugCommand, out: &mut dyn Write) -> Result<Outcome, Error> {
    match command {
        DebugCommand::Patch { diff } => {
            let bytes =
                std::fs::read(&diff).map_err(|source| Error::ReadInput { path: diff, source })?;
            let patch = diff::parse_patch(&bytes)?;
            writeln!(out, "{patch:#?}").map_err(Error::Write)?;
        }
        DebugCommand::Tree { file } => {
            let bytes =
                std::fs::read(&file).map_err(|source| Error::ReadInput { path: file, source })?;
            let text = String::from_utf8_lossy(&bytes).into_owned();
            if let Some(tree) = python::parse(&text) {
                writeln!(out, "{}", tree.root_node().to_sexp()).map_err(Error::Write)?;
            }
        }
    }
    Ok(Outcome(exit::CLEAN))
}

#[cfg(test)]
mod tests {
    use super::write_atomically;

    #[test]
    fn a_regular_file_is_replaced_whole() {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("review.json");
        std::fs::write(&out, "an older, longer report").expect("writes");
        write_atomically(&out, b"{}").expect("writes the report");
        assert_eq!(std::fs::read_to_string(&out).expect("reads"), "{}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("lists").collect();
        assert_eq!(left.len(), 1, "no temporary file is left behind");
    }

    /// `--output /dev/null` must not replace the device; a link stands for the same kind of
    /// target, and can be checked without touching the machine's devices.
    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_is_written_through_not_replaced() {
        let dir = tempfile::tempdir().expect("temp dir");
        let target = dir.path().join("target.json");
        let link = dir.path().join("review.json");
        std::fs::write(&target, "old").expect("writes");
        std::os::unix::fs::symlink(&target, &link).expect("links");
        write_atomically(&link, b"{}").expect("writes the report");
        let kind = std::fs::symlink_metadata(&link).expect("stat").file_type();
        assert!(kind.is_symlink(), "the link is still a link");
        assert_eq!(std::fs::read_to_string(&target).expect("reads"), "{}");
    }

    #[cfg(unix)]
    #[test]
    fn a_pipe_is_written_to_not_replaced() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("review.fifo");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("no NUL");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).expect("reads the pipe"))
        };
        write_atomically(&fifo, b"{}").expect("writes the report");
        // Before joining: a reader left waiting on a replaced pipe would never return.
        let kind = std::fs::symlink_metadata(&fifo).expect("stat").file_type();
        assert!(kind.is_fifo(), "the pipe is still a pipe");
        assert_eq!(reader.join().expect("reader"), b"{}");
    }
}
