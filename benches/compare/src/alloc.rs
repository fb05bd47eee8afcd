//! The harness's global allocator: mimalloc, or the system's malloc with
//! `COMPARE_ALLOCATOR=system`, chosen once per process (every tool runs in
//! a process of its own, so each can have the allocator it runs fastest
//! under; run.sh says which).
//!
//! The choice matters more than any one change to a tool: mimalloc backs
//! large allocations with transparent huge pages (this machine's kernel
//! gives them on request, `madvise`), and the prefix filter's in-memory
//! join and queries, which read tens of millions of entries at random,
//! take about half the time under it (HISTORY.md, "The allocator").

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

use mimalloc::MiMalloc;

/// Routes every allocation of the process to one allocator.
pub struct Chosen;

/// 0 before the first allocation, then [`MIMALLOC`], [`SYSTEM`], or
/// [`OTHER`] (a value that names neither: mimalloc, and [`name`] says the
/// value is wrong).
static CHOICE: AtomicU8 = AtomicU8::new(0);
const MIMALLOC: u8 = 1;
const SYSTEM: u8 = 2;
const OTHER: u8 = 3;

/// The process's choice, read from the environment at the first
/// allocation with `getenv` (which does not allocate); threads that race
/// there read the same variable.
fn choice() -> u8 {
    match CHOICE.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: a NUL-terminated name; the value, when there is one,
            // is a NUL-terminated string that nothing frees while it is
            // read (the harness never changes its environment).
            let value = unsafe { libc::getenv(c"COMPARE_ALLOCATOR".as_ptr()) };
            let choice = if value.is_null() {
                MIMALLOC
            } else {
                match unsafe { std::ffi::CStr::from_ptr(value) }.to_bytes() {
                    b"mimalloc" => MIMALLOC,
                    b"system" => SYSTEM,
                    _ => OTHER,
                }
            };
            CHOICE.store(choice, Ordering::Relaxed);
            choice
        }
        choice => choice,
    }
}

/// Whether this process allocates with the system's malloc.
fn system() -> bool {
    choice() == SYSTEM
}

/// The name of the allocator this process uses (for the results), or
/// `None` when `COMPARE_ALLOCATOR` names neither.
pub fn name() -> Option<&'static str> {
    match choice() {
        SYSTEM => Some("system"),
        MIMALLOC => Some("mimalloc"),
        _ => None,
    }
}

// SAFETY: every call is forwarded to one allocator, the same for the
// whole process (the choice is made before the first allocation returns
// and never changes), so memory is always freed by the allocator that
// gave it.
unsafe impl GlobalAlloc for Chosen {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if system() {
            unsafe { System.alloc(layout) }
        } else {
            unsafe { MiMalloc.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if system() {
            unsafe { System.alloc_zeroed(layout) }
        } else {
            unsafe { MiMalloc.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if system() {
            unsafe { System.dealloc(ptr, layout) }
        } else {
            unsafe { MiMalloc.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if system() {
            unsafe { System.realloc(ptr, layout, new_size) }
        } else {
            unsafe { MiMalloc.realloc(ptr, layout, new_size) }
        }
    }
}

#[global_allocator]
static GLOBAL: Chosen = Chosen;
