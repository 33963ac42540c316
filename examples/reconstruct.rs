//! Prints each side of every Python file of a diff as payreview rebuilds it, and whether
//! tree-sitter found syntax errors in it: `cargo run --example reconstruct -- DIFF [REPO]`.
fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(diff), repo) = (args.next(), args.next()) else {
        eprintln!("usage: reconstruct DIFF [REPO]");
        std::process::exit(2);
    };
    let bytes = std::fs::read(&diff).unwrap_or_default();
    let Ok(patch) = payreview::diff::parse_patch(&bytes) else {
        eprintln!("the diff does not parse");
        std::process::exit(2);
    };
    let workspace = match repo {
        Some(dir) => match payreview::source::Repo::open(std::path::Path::new(&dir), 1 << 22) {
            Ok(repo) => payreview::source::Workspace::Repository {
                repo,
                base: None,
                staged: false,
                head: None,
            },
            Err(e) => {
                eprintln!("{dir}: {e}");
                std::process::exit(2);
            }
        },
        None => payreview::source::Workspace::DiffOnly,
    };
    for file in &patch.files {
        let versions = payreview::source::reconstruct(file, &workspace);
        for (side, version) in [("old", &versions.old), ("new", &versions.new)] {
            let Some(v) = version else { continue };
            let errors = payreview::python::parse(&v.text).map(|t| t.root_node().has_error());
            println!(
                "=== {} ({side}) syntax errors: {errors:?} synthetic: {:?}",
                file.path(),
                v.synthetic
            );
            for (n, line) in v.text.lines().enumerate() {
                println!("{:4} {line}", n + 1);
            }
        }
    }
}
