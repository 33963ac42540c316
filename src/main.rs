use std::process::ExitCode;

fn main() -> ExitCode {
    payreview::review::exit_after_review();
    match payreview::run_cli(std::env::args_os(), &mut std::io::stdout().lock()) {
        Ok(outcome) => outcome.exit_code(),
        // `payreview … | head` closes the pipe early; that is a normal exit.
        Err(err) if err.is_broken_pipe() => ExitCode::SUCCESS,
        Err(err) => payreview::exit::report(err),
    }
}
