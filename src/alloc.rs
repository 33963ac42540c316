//! How the system allocator is set up for a review process.
//!
//! tree-sitter allocates each tree node with `malloc`. On a worker thread glibc serves it from the
//! thread's arena: heaps of 64 MiB of address space, which it grows one page at a time, one
//! `mprotect` call each (some 30,000 calls on a large change), and whose pages the kernel then
//! hands out 4 KiB per fault (some 30,000 faults). Padding each growth makes a heap usable at
//! once, and asking for transparent huge pages on it makes a fault bring 2 MiB. Pages are still
//! only touched, and counted as memory, when used.
//!
//! The review's own data is on mimalloc (the binary's global allocator). By default mimalloc
//! returns the pages of what was freed to the system after 10 ms (a "purge"), and the next
//! allocations fault them in again: 234 MiB purged over a medium change, a quarter of its page
//! faults. A review process exits right after its review, so `tune` turns purging off.
//!
//! mimalloc asks for transparent huge pages on the memory it reserves (one arena of 1 GiB), and
//! spreads a thread's pages over it by size class: a 2 MiB page is then zeroed whole for a few
//! small blocks: on the large sparse benchmark, 49 MB of a 434 MB peak and a fifth of the system
//! time (BENCHMARKS.md, item 39). `tune` advises mimalloc's arenas back to small pages; the
//! parser's heaps keep their huge pages (above), where a tree's nodes fill them in order.
//!
//! Only a process that calls `tune` (the binary and the benchmark floor) is set up so; the
//! library alone leaves the allocator as it finds it.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set by `tune`: `advise_thread_heap` does nothing in a process that did not ask for it.
static TUNED: AtomicBool = AtomicBool::new(false);

/// `mi_option_purge_delay` in mimalloc v2's `mi_option_t` (`include/mimalloc.h`; the crate is
/// built with its `v2` feature), which `libmimalloc-sys` does not name: milliseconds before
/// freed pages go back to the system, -1 for never.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// The size and alignment of a glibc arena heap on 64-bit (`HEAP_MAX_SIZE`): what it adds to
/// each growth, and how a heap is found from a pointer into it.
#[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
const ARENA_HEAP: usize = 64 << 20;

/// Sets the system allocator up, and rayon's global pool so that each worker's heap is advised
/// as it starts; call first thing in `main`, before threads start.
pub fn tune() {
    TUNED.store(true, Ordering::Relaxed);
    // SAFETY: sets one of mimalloc's options, which it reads when it next purges.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1);
    }
    #[cfg(target_os = "linux")]
    small_pages_for_mimalloc();
    #[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
    // SAFETY: `mallopt` only sets a tunable of the allocator; it is called before any thread
    // of ours exists, and a value it refuses leaves the default in place.
    unsafe {
        libc::mallopt(libc::M_TOP_PAD, ARENA_HEAP as libc::c_int);
    }
    // Fails only if the pool exists already; it then keeps its own settings.
    let _ = rayon::ThreadPoolBuilder::new()
        .start_handler(|_| advise_thread_heap())
        .build_global();
}

/// The arenas of mimalloc, advised not to use huge pages (see the module's doc). Only those
/// reserved so far: the first holds 1 GiB, more than a review of the largest benchmark uses.
#[cfg(target_os = "linux")]
fn small_pages_for_mimalloc() {
    unsafe extern "C" {
        /// In mimalloc's API (`include/mimalloc.h`) but not in `libmimalloc-sys`'s: the start
        /// and size of an arena, by id (its index plus one); null past the last one.
        fn mi_arena_area(arena_id: libc::c_int, size: *mut usize) -> *mut libc::c_void;
    }
    // SAFETY: an allocation made and freed at once, so that mimalloc has reserved its arena.
    unsafe { libmimalloc_sys::mi_free(libmimalloc_sys::mi_malloc(64)) };
    for id in 1.. {
        let mut size = 0;
        // SAFETY: reads mimalloc's table of arenas; `size` is written.
        let start = unsafe { mi_arena_area(id, &mut size) };
        if start.is_null() {
            break;
        }
        // SAFETY: advice over memory mimalloc mapped as one region; it changes no contents,
        // and an error leaves the pages as they were.
        unsafe {
            libc::madvise(start, size, libc::MADV_NOHUGEPAGE);
        }
    }
}

/// Asks for huge pages on the heap the calling thread's `malloc` now serves from, if that is a
/// heap of a thread arena not advised yet. Call when a worker thread starts and after it parsed
/// a file (an arena whose heap is full opens another). Only a hint: the kernel may refuse it.
pub fn advise_thread_heap() {
    if !TUNED.load(Ordering::Relaxed) {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
    {
        use std::cell::RefCell;
        thread_local! {
            static ADVISED: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
        }
        // SAFETY: a block is allocated and freed at once, only its address is kept; `sbrk(0)`
        // only reads the program break.
        let (probe, brk) = unsafe {
            let block = libc::malloc(64);
            let brk = libc::sbrk(0) as usize;
            libc::free(block);
            (block as usize, brk)
        };
        // The main arena lives below the program break, in no 64 MiB heap.
        if probe == 0 || probe < brk {
            return;
        }
        let heap = probe & !(ARENA_HEAP - 1);
        let fresh = ADVISED.with_borrow_mut(|advised| {
            let fresh = !advised.contains(&heap);
            if fresh {
                advised.push(heap);
            }
            fresh
        });
        if fresh {
            // SAFETY: glibc maps each arena heap as a whole `ARENA_HEAP`-aligned region of that
            // size; advice on it changes no contents, and an error only leaves pages small.
            unsafe {
                libc::madvise(heap as *mut libc::c_void, ARENA_HEAP, libc::MADV_HUGEPAGE);
            }
        }
    }
}

#[cfg(all(
    test,
    target_os = "linux",
    target_env = "gnu",
    target_pointer_width = "64"
))]
mod tests {
    use super::*;

    /// The `VmFlags` of the mapping holding `addr`, from `/proc/self/smaps`.
    fn flags_at(addr: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((start, end)) = range.split_once('-')
                && let (Ok(start), Ok(end)) = (
                    usize::from_str_radix(start, 16),
                    usize::from_str_radix(end, 16),
                )
            {
                inside = start <= addr && addr < end;
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return Some(flags.to_string());
            }
        }
        None
    }

    /// Whether the mapping holding `addr` is advised for huge pages.
    fn advised(addr: usize) -> bool {
        let flags = flags_at(addr).expect("the address is mapped");
        flags.split_whitespace().any(|f| f == "hg")
    }

    /// Tests that call `tune`, one at a time: whether it was called before is then known.
    static TUNING: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn tuning_turns_mimallocs_purging_off() {
        let _one = TUNING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // SAFETY: reads an option.
        let before = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        if !TUNED.load(Ordering::Relaxed) {
            // Only the purge delay defaults to 10: the index names the right option.
            assert_eq!(before, 10);
        }
        tune();
        // SAFETY: reads an option.
        assert_eq!(
            unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) },
            -1
        );
    }

    #[test]
    fn tuning_keeps_mimallocs_pages_small() {
        let _one = TUNING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tune();
        // SAFETY: allocated, looked up by address, freed.
        let block = unsafe { libmimalloc_sys::mi_malloc(64) };
        let flags = flags_at(block as usize).expect("mimalloc's block is mapped");
        // SAFETY: the block allocated above, freed once.
        unsafe { libmimalloc_sys::mi_free(block) };
        assert!(
            flags.split_whitespace().any(|f| f == "nh"),
            "VmFlags: {flags}"
        );
    }

    #[test]
    fn a_thread_arenas_heap_is_advised_and_the_main_heap_left_alone() {
        let _one = TUNING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tune();
        // Which arena a new thread gets is glibc's choice (a test runner's threads may share
        // the main one): each case is checked, on several threads alive at once.
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    advise_thread_heap();
                    // SAFETY: allocated, looked up by address, freed; `sbrk(0)` only reads.
                    let (block, brk) = unsafe { (libc::malloc(64), libc::sbrk(0) as usize) };
                    let seen = (block as usize >= brk, advised(block as usize));
                    unsafe { libc::free(block) };
                    seen
                })
            })
            .collect();
        for thread in threads {
            let (in_thread_arena, advised) = thread.join().expect("the thread runs");
            assert_eq!(advised, in_thread_arena);
        }
    }
}
