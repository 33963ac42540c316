//! DIFF002 index-hash-mismatch: the `index` line's blob ids are not those of the files.
use sha1::{Digest, Sha1};

use crate::rules::{Check, Ctx, Gate, Rule};
use crate::source::{Origin, Version};

pub(crate) static RULE: Rule = Rule {
    id: "DIFF002",
    doc: include_str!("../../../rules/diff/DIFF002.md"),
    check: Check::Change(check),
    gate: Gate::Always,
};

/// git's blob id: SHA-1 of `blob <len>\0<content>`.
pub fn blob_id(content: &[u8]) -> String {
    let mut hasher = Sha1::new();
    hasher.update(format!("blob {}\0", content.len()).as_bytes());
    hasher.update(content);
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn check(cx: &mut Ctx<'_>) {
    // Only complete versions read from the repository can be hashed; hunks show fragments.
    let versions = cx.versions;
    if versions.origin != Origin::Repository || versions.mismatch.is_some() {
        return;
    }
    let Some(index) = &cx.patch.index else {
        return;
    };
    let sides = [
        ("old", &index.old, &versions.old),
        ("new", &index.new, &versions.new),
    ];
    let mut wrong = Vec::new();
    for (side, claimed, version) in sides {
        let Some(Version {
            text,
            partial: false,
            ..
        }) = version
        else {
            continue;
        };
        let actual = blob_id(text.as_bytes());
        let claimed = claimed.to_ascii_lowercase();
        if claimed.len() < 4 || !actual.starts_with(&claimed) {
            // Language-neutral, so the catalogue text can frame it in either language.
            wrong.push(format!(
                "{side}: `{claimed}` → `{}`",
                actual.get(..claimed.len().clamp(7, 40)).unwrap_or(&actual)
            ));
        }
    }
    if wrong.is_empty() {
        return;
    }
    cx.report_file(&RULE)
        .arg("sides", wrong.join(", "))
        .arg("diff_line", index.diff_line.to_string());
}

#[cfg(test)]
mod tests {
    #[test]
    fn blob_id_matches_git() {
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(
            super::blob_id(b"hello\n"),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        assert_eq!(
            super::blob_id(b""),
            "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
        );
    }
}
