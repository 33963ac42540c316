//! The registry, the catalogue files under rules/ and the examples in them agree.
mod common;

use std::collections::BTreeSet;

use common::*;
use payreview::config::Settings;
use payreview::review::Review;
use payreview::rules::{self, catalogue};

fn entry(id: &str) -> catalogue::Entry {
    let rule = rules::find(id).expect("registered");
    catalogue::parse_entry(id, rule.doc).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_rule_has_a_parsable_entry_with_its_id() {
    let mut ids = BTreeSet::new();
    for rule in rules::ALL {
        let entry = entry(rule.id);
        assert_eq!(entry.meta.id, rule.id);
        assert!(ids.insert(rule.id), "{} registered twice", rule.id);
        let name = &entry.meta.name;
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{}: name {name} is not kebab-case",
            rule.id
        );
        assert!(
            ["very-high", "high", "medium", "low"].contains(&entry.meta.precision.as_str()),
            "{}: precision",
            rule.id
        );
        for text in [&entry.meta.title, &entry.meta.message] {
            assert!(
                !text.en.trim().is_empty() && !text.ru.trim().is_empty(),
                "{}",
                rule.id
            );
            assert!(
                !text.en.ends_with('.'),
                "{}: one line, no trailing period",
                rule.id
            );
        }
        assert!(
            rules::entry(rule.id).is_some(),
            "{} entry loads at run time",
            rule.id
        );
    }
    let sorted: Vec<&str> = rules::ALL.iter().map(|r| r.id).collect();
    let mut expected = sorted.clone();
    expected.sort();
    assert_eq!(sorted, expected, "rules::ALL is sorted by id");
}

#[test]
fn every_catalogue_file_is_registered() {
    let mut on_disk = BTreeSet::new();
    for family in std::fs::read_dir(root().join("rules")).expect("rules/") {
        let family = family.expect("entry").path();
        if !family.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&family).expect("family dir") {
            let path = file.expect("entry").path();
            if path.extension().is_some_and(|e| e == "md") {
                on_disk.insert(
                    path.file_stem()
                        .expect("stem")
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    let registered: BTreeSet<String> = rules::ALL.iter().map(|r| r.id.to_string()).collect();
    assert_eq!(on_disk, registered);
}

fn review_example(example: &catalogue::Example) -> Review {
    let diff = match example.lang.as_str() {
        "python" => added_file_diff("app/payments/example.py", &example.code),
        _ => example.code.clone(),
    };
    if example.repo.is_empty() {
        let mut settings = Settings::diff_only();
        settings.description = example.description.clone();
        return review(diff.as_bytes(), &settings);
    }
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, text) in &example.repo {
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(file, text).expect("write repo file");
    }
    let mut settings = repo_settings(dir.path());
    settings.description = example.description.clone();
    review(diff.as_bytes(), &settings)
}

#[test]
fn bad_examples_trigger_their_rule_and_good_ones_do_not() {
    for rule in rules::ALL {
        let entry = entry(rule.id);
        let bad = review_example(&entry.bad);
        assert!(
            bad.findings.iter().any(|f| f.rule == rule.id),
            "{}: the Bad example does not trigger it: {:#?}",
            rule.id,
            places(&bad)
        );
        let good = review_example(&entry.good);
        assert!(
            !good.findings.iter().any(|f| f.rule == rule.id),
            "{}: the Good example triggers it: {:#?}",
            rule.id,
            places(&good)
        );
    }
}

#[test]
fn rendered_texts_have_no_unfilled_placeholders() {
    for rule in rules::ALL {
        let entry = entry(rule.id);
        let bad = review_example(&entry.bad);
        for finding in bad.findings.iter().filter(|f| f.rule == rule.id) {
            for lang in [payreview::review::Lang::En, payreview::review::Lang::Ru] {
                let texts = payreview::report::resolve(finding, lang);
                for text in [&texts.title, &texts.message] {
                    let open = text.find('{');
                    let unfilled = open.and_then(|i| {
                        let rest = &text[i + 1..];
                        let name: String = rest
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect();
                        (!name.is_empty() && rest[name.len()..].starts_with('}')).then_some(name)
                    });
                    assert!(
                        unfilled.is_none(),
                        "{}: unfilled {{{}}} in {text}",
                        rule.id,
                        unfilled.unwrap_or_default()
                    );
                }
            }
        }
    }
}

/// Every kind of review error has its table in `rules/errors.toml`, in both languages with
/// the same placeholders, and the file has no table of no kind.
#[test]
fn every_review_error_kind_is_written_in_both_languages() {
    use payreview::review::ErrorKind;
    let tables: std::collections::BTreeMap<String, toml::Table> =
        toml::from_str(rules::ERRORS_TOML).expect("errors.toml parses");
    let placeholders = |text: &str| -> std::collections::BTreeSet<String> {
        text.split(['{', '['])
            .skip(1)
            .filter_map(|rest| {
                let name: String = rest
                    .trim_start_matches('[')
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                (!name.is_empty()).then_some(name)
            })
            .collect()
    };
    for kind in ErrorKind::ALL {
        let table = tables
            .get(kind.id())
            .unwrap_or_else(|| panic!("rules/errors.toml has no [{}]", kind.id()));
        let text = |lang: &str| {
            table
                .get(lang)
                .and_then(|t| t.as_str())
                .filter(|t| !t.trim().is_empty())
                .unwrap_or_else(|| panic!("[{}] has no {lang} text", kind.id()))
                .to_string()
        };
        assert_eq!(
            placeholders(&text("en")),
            placeholders(&text("ru")),
            "[{}]: the languages fill different placeholders",
            kind.id()
        );
    }
    let known: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.id()).collect();
    for id in tables.keys() {
        assert!(
            known.contains(&id.as_str()),
            "rules/errors.toml: [{id}] is no kind of error"
        );
    }
}

#[test]
fn questions_file_parses() {
    let parsed: Result<toml::Table, _> = toml::from_str(rules::QUESTIONS_TOML);
    assert!(parsed.is_ok(), "{parsed:?}");
}

/// The digest in rules/catalogue.toml is the one of the entries compiled in: changing a rule's
/// entry or a question fails here until the catalogue's release is looked at (and its version
/// bumped). `UPDATE_CATALOGUE=1` rewrites the digest; the version stays for a person to set.
#[test]
fn the_catalogue_release_matches_its_entries() {
    let release = rules::catalogue_release();
    let digest = rules::catalogue_digest();
    if release.digest != digest && std::env::var_os("UPDATE_CATALOGUE").is_some() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("rules/catalogue.toml");
        let text = std::fs::read_to_string(&path).expect("catalogue.toml");
        let updated = text.replace(
            &format!("digest = \"{}\"", release.digest),
            &format!("digest = \"{digest}\""),
        );
        std::fs::write(&path, updated).expect("write catalogue.toml");
        return;
    }
    assert_eq!(
        release.digest, digest,
        "the rule catalogue changed since release {}: bump `version` in rules/catalogue.toml and \
         rerun with UPDATE_CATALOGUE=1 to record the new digest",
        release.version
    );
    let parts: Vec<&str> = release.version.split('.').collect();
    assert!(
        parts.len() == 3 && parts.iter().all(|p| p.parse::<u32>().is_ok()),
        "version {} is not YEAR.MONTH.N",
        release.version
    );
}

/// A title, message or suggestion chosen by a note (`titles.X`, `messages.X`, `suggestions.X`)
/// needs the note `X`: it is the note that selects it.
#[test]
fn alternative_titles_and_suggestions_belong_to_notes() {
    for rule in rules::ALL {
        let entry = entry(rule.id);
        let chosen = entry.meta.titles.keys().map(|k| ("titles", k));
        let chosen = chosen.chain(entry.meta.messages.keys().map(|k| ("messages", k)));
        let chosen = chosen.chain(entry.meta.suggestions.keys().map(|k| ("suggestions", k)));
        for (table, key) in chosen {
            assert!(
                entry.meta.notes.contains_key(key),
                "{}: {table}.{key} has no notes.{key}",
                rule.id
            );
        }
    }
}
