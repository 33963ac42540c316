//! The whole review of a diff in --diff-only mode, rendered in every format and language.
#![no_main]

use libfuzzer_sys::fuzz_target;
use payreview::config::{Format, Settings};
use payreview::review::Lang;

fuzz_target!(|data: &[u8]| {
    let settings = Settings::diff_only();
    let Ok(review) = payreview::review_diff(data, &settings) else {
        return;
    };
    for format in payreview::fuzzing::FORMATS {
        for lang in [Lang::En, Lang::Ru] {
            let mut out = Vec::new();
            let _ = payreview::report::render(&review, *format, lang, &mut out);
        }
    }
    let _ = Format::Json;
});
