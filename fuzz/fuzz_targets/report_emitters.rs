//! Each emitter fed arbitrary findings (any rule, path, lines and argument text): the output must
//! come out, and JSON must stay valid JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use payreview::config::Format;
use payreview::review::Lang;

fuzz_target!(|data: &[u8]| {
    let review = payreview::fuzzing::review_from_bytes(data);
    for format in payreview::fuzzing::FORMATS {
        for lang in [Lang::En, Lang::Ru] {
            let mut out = Vec::new();
            if payreview::report::render(&review, *format, lang, &mut out).is_ok()
                && *format == Format::Json
            {
                assert!(serde_json::from_slice::<serde_json::Value>(&out).is_ok());
            }
        }
    }
});
