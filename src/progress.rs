//! The progress bar on standard error: only for reviews long enough to need one, only on a
//! terminal, never with `--quiet`. Reports never depend on it.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Below this many files a review ends before a bar would be worth drawing.
pub const MIN_FILES: usize = 50;

/// Whether a review of `files` files shows a bar.
pub fn wanted(files: usize, quiet: bool, stderr_is_terminal: bool) -> bool {
    !quiet && stderr_is_terminal && files >= MIN_FILES
}

/// A bar for `files` files; hidden (drawing nothing) when it is not wanted.
pub fn bar(files: usize, quiet: bool) -> ProgressBar {
    use std::io::IsTerminal;
    if !wanted(files, quiet, std::io::stderr().is_terminal()) {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(files as u64), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} files {msg}") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix("payreview");
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_needs_many_files_a_terminal_and_no_quiet() {
        assert!(wanted(MIN_FILES, false, true));
        assert!(!wanted(MIN_FILES - 1, false, true));
        assert!(!wanted(10_000, true, true));
        assert!(!wanted(10_000, false, false));
    }
}
