//! Exit statuses, one documented constant each.

use std::process::ExitCode;

/// Nothing at or above `--fail-on` was found.
pub const CLEAN: u8 = 0;
/// A finding at or above `--fail-on` was found.
pub const FINDINGS: u8 = 1;
/// Usage or input error: nothing was reviewed.
pub const ERROR: u8 = 2;

/// Prints an error as a miette diagnostic on standard error and gives exit status 2.
pub fn report(err: crate::Error) -> ExitCode {
    eprintln!("{:?}", miette::Report::new(err));
    ExitCode::from(ERROR)
}
