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

/// 0 before the first allocation, then [`MIMALLOC`] or [`SYSTEM`].
static CHOICE: AtomicU8 = AtomicU8::new(0);
const MIMALLOC: u8 = 1;
const SYSTEM: u8 = 2;

/// Whether this process allocates with the system's malloc. Read from
/// the environment at the first allocation, with `getenv` (which does not
/// allocate); threads that race there read the same variable.
fn system() -> bool {
    match CHOICE.load(Ordering::Relaxed) {
        MIMALLOC => false,
        SYSTEM => true,
        _ => {
            // SAFETY: a NUL-terminated name; the value, when there is one,
            // is a NUL-terminated string that nothing frees while it is
            // read (the harness never changes its environment).
            let value = unsafe { libc::getenv(c"COMPARE_ALLOCATOR".as_ptr()) };
            let system = !value.is_null() && unsafe { std::ffi::CStr::from_ptr(value) }.to_bytes() == b"system";
            CHOICE.store(if system { SYSTEM } else { MIMALLOC }, Ordering::Relaxed);
            system
        }
    }
}

/// The name of the allocator this process uses (for the results).
pub fn name() -> &'static str {
    if system() {
        "system"
    } else {
        "mimalloc"
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
