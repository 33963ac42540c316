//! The benchmark floor: read every Python file of a base and a head tree and parse both with
//! tree-sitter-python, in parallel on the same thread pool payreview uses, and nothing else.
//! payreview's time is reported as a ratio to this, measured in the same run.
//!
//! `cargo run --release --example floor -- BASE_DIR HEAD_DIR`
mod common;

use rayon::prelude::*;

// The allocators of the payreview binary (tree-sitter on the system one), so that the ratio
// compares the work done, not the allocators.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    payreview::alloc::tune();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(base), Some(head)) = (args.first(), args.get(1)) else {
        eprintln!("usage: floor BASE_DIR HEAD_DIR");
        std::process::exit(2);
    };
    let mut files = Vec::new();
    common::python_files(std::path::Path::new(base), &mut files);
    common::python_files(std::path::Path::new(head), &mut files);
    let nodes: usize = files
        .par_iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            payreview::python::parse(&text).map_or(0, |t| t.root_node().descendant_count())
        })
        .sum();
    println!("{} files, {nodes} nodes", files.len());
}
