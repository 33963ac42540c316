//! No input makes the pipeline panic: random bytes and mutated real diffs, reviewed from the
//! diff alone and against the seed repository, rendered in every available format.
mod common;

use common::*;
use payreview::config::{Format, Settings};
use payreview::review::Lang;
use proptest::prelude::*;

fn corpus() -> Vec<Vec<u8>> {
    let mut out = vec![read("seed/pr.diff")];
    if let Ok(dir) = std::fs::read_dir(fixture("diff")) {
        let mut paths: Vec<_> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        out.extend(paths.iter().filter_map(|p| std::fs::read(p).ok()));
    }
    out
}

#[derive(Debug, Clone)]
enum Mutation {
    DeleteLine(usize),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    ReplaceByte(usize, u8),
    InsertBytes(usize, Vec<u8>),
    Digits(usize, String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::DeleteLine),
        any::<usize>().prop_map(Mutation::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Mutation::ReplaceByte(a, b)),
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 0..16)
        )
            .prop_map(|(a, b)| Mutation::InsertBytes(a, b)),
        (any::<usize>(), "[0-9]{1,25}").prop_map(|(a, b)| Mutation::Digits(a, b)),
    ]
}

fn apply(diff: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = diff.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    for m in mutations {
        let n = lines.len().max(1);
        match m {
            Mutation::DeleteLine(i) if !lines.is_empty() => {
                lines.remove(i % n);
            }
            Mutation::DuplicateLine(i) if !lines.is_empty() => {
                let line = lines[i % n].clone();
                lines.insert(i % n, line);
            }
            Mutation::SwapLines(a, b) if !lines.is_empty() => lines.swap(a % n, b % n),
            Mutation::ReplaceByte(i, b) if !lines.is_empty() => {
                let line = &mut lines[i % n];
                if !line.is_empty() {
                    let at = i % line.len();
                    line[at] = *b;
                }
            }
            Mutation::InsertBytes(i, bytes) => {
                lines.insert(i % (lines.len() + 1), bytes.clone());
            }
            Mutation::Digits(i, digits) if !lines.is_empty() => {
                // Rewrite the numbers of a hunk header or an index line.
                let line = &mut lines[i % n];
                let text = String::from_utf8_lossy(line).into_owned();
                let replaced: String = text
                    .split_inclusive(|c: char| !c.is_ascii_digit())
                    .enumerate()
                    .map(|(k, part)| {
                        if k == i % 4 && part.starts_with(|c: char| c.is_ascii_digit()) {
                            format!(
                                "{digits}{}",
                                part.trim_start_matches(|c: char| c.is_ascii_digit())
                            )
                        } else {
                            part.to_string()
                        }
                    })
                    .collect();
                *line = replaced.into_bytes();
            }
            _ => {}
        }
    }
    lines.join(&b'\n')
}

fn review_everywhere(input: &[u8]) {
    let diff_only = Settings::diff_only();
    let repo = repo_settings(&fixture("seed/head"));
    for settings in [&diff_only, &repo] {
        if let Ok(review) = payreview::review_diff(input, settings) {
            for format in [Format::Json, Format::Text] {
                for lang in [Lang::En, Lang::Ru] {
                    let mut out = Vec::new();
                    payreview::report::render(&review, format, lang, &mut out).expect("renders");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        review_everywhere(&bytes);
    }

    #[test]
    fn mutated_real_diffs_never_panic(
        pick in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 1..6),
    ) {
        let corpus = corpus();
        let diff = &corpus[pick % corpus.len()];
        review_everywhere(&apply(diff, &mutations));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Every emitter takes any finding (any rule, hostile path and argument text) and JSON stays
    /// valid JSON.
    #[test]
    fn emitters_never_panic_on_arbitrary_findings(bytes in proptest::collection::vec(any::<u8>(), 0..1024)) {
        let review = payreview::fuzzing::review_from_bytes(&bytes);
        for format in payreview::fuzzing::FORMATS {
            for lang in [Lang::En, Lang::Ru] {
                let mut out = Vec::new();
                if payreview::report::render(&review, *format, lang, &mut out).is_ok() && *format == Format::Json {
                    prop_assert!(serde_json::from_slice::<serde_json::Value>(&out).is_ok());
                }
            }
        }
    }
}
