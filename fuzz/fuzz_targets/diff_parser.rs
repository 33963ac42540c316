//! The unified-diff parser on arbitrary bytes: Ok or a DiffError, never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = payreview::diff::parse_patch(data) {
        // The diagnostic must be renderable too: its span must lie inside its source.
        let _ = format!("{:?}", miette::Report::new(e));
    }
});
