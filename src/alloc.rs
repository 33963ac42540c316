//! How the system allocator is set up for a review process.
//!
//! tree-sitter allocates each tree node with `malloc`. On a worker thread glibc serves it from the
//! thread's arena, which it grows one page at a time, one `mprotect` call each: some 30,000 calls
//! on a large change. Padding each growth makes an arena's first heap usable at once; the pages
//! are still only touched (and counted as memory) when used.

/// What glibc adds to each growth of a heap: the largest arena heap (64 MiB on 64-bit).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TOP_PAD: libc::c_int = 64 << 20;

/// Sets the system allocator up; call first thing in `main`, before threads start.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets a tunable of the allocator; it is called before any thread
    // of ours exists, and a value it refuses leaves the default in place.
    unsafe {
        libc::mallopt(libc::M_TOP_PAD, TOP_PAD);
    }
}
