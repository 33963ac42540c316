use std::process::ExitCode;

// The review's own data (facts, texts, indexes) lives apart from tree-sitter's trees, which stay
// on the system allocator (`payreview::alloc`) as in the benchmark floor: on a large change this
// kept the review's allocations out of the parser's heap (BENCHMARKS.md, item 32).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    payreview::alloc::tune();
    payreview::review::exit_after_review();
    match payreview::run_cli(std::env::args_os(), &mut std::io::stdout().lock()) {
        Ok(outcome) => outcome.exit_code(),
        // `payreview … | head` closes the pipe early; that is a normal exit.
        Err(err) if err.is_broken_pipe() => ExitCode::SUCCESS,
        Err(err) => payreview::exit::report(err),
    }
}
