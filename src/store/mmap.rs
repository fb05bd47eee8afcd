//! The crate's only `unsafe` code: memory-mapping segment files, dropping
//! the process's mapping of pages of them ([`SegmentBytes::release`]), and
//! a hint to the processor to bring a cache line in ([`prefetch_line`]).
//!
//! # Safety contract
//!
//! A memory map is sound only while no one modifies or truncates the file.
//! neardex upholds that for its own files: a segment is written once under a
//! temporary name, fsynced, renamed into place, and never opened for writing
//! again; it is deleted only after no snapshot references it (the map keeps
//! the inode alive after unlinking, so deletion is harmless). The documented
//! hazard is another program truncating or rewriting a segment file while an
//! index is open: that can crash the process with SIGBUS, as it would with
//! any memory-mapped database.
#![allow(unsafe_code)]

use std::fs::File;

use memmap2::Mmap;

/// The bytes of a segment: a read-only map, or an owned buffer for files
/// too small to map (an empty file cannot be mapped).
#[derive(Debug)]
pub enum SegmentBytes {
    /// A read-only memory map of the whole file.
    Mapped(Mmap),
    /// The file's bytes, read into memory.
    Owned(Vec<u8>),
}

impl AsRef<[u8]> for SegmentBytes {
    fn as_ref(&self) -> &[u8] {
        match self {
            SegmentBytes::Mapped(map) => map,
            SegmentBytes::Owned(bytes) => bytes,
        }
    }
}

impl SegmentBytes {
    /// Asks the kernel to map the pages of `offset..offset + len` now
    /// (`MADV_POPULATE_READ`, Linux 5.14 on), so that first reads do not
    /// fault them in one at a time. Best effort: on other systems, older
    /// kernels or an owned buffer nothing happens.
    pub fn populate(&self, offset: usize, len: usize) {
        #[cfg(target_os = "linux")]
        if let SegmentBytes::Mapped(map) = self {
            if len > 0 {
                let _ = map.advise_range(memmap2::Advice::PopulateRead, offset, len);
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (offset, len);
    }
}

impl SegmentBytes {
    /// Drops this process's mapping of the pages of `offset..offset + len`
    /// (`MADV_DONTNEED`), so that they no longer count in its resident
    /// memory; the file's pages stay in the page cache, which the kernel
    /// may reclaim. A later read maps them again, from the cache or the
    /// file, with the same bytes. Best effort: on other systems or an
    /// owned buffer nothing happens.
    pub fn release(&self, offset: usize, len: usize) {
        #[cfg(target_os = "linux")]
        if let SegmentBytes::Mapped(map) = self {
            let len = len.min(map.len().saturating_sub(offset));
            if len > 0 {
                // SAFETY: the map is a read-only shared map of a file that
                // no one modifies or truncates (the module's contract), so
                // the pages read again after the advice hold the bytes
                // they held before it: any slice borrowed from the map
                // reads the same values throughout.
                let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len) };
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (offset, len);
    }
}

/// Maps a segment file read-only.
pub fn map_segment(file: &File) -> std::io::Result<SegmentBytes> {
    if file.metadata()?.len() == 0 {
        return Ok(SegmentBytes::Owned(Vec::new()));
    }
    // SAFETY: segment files are immutable after their rename into place and
    // are never truncated by neardex (module documentation); the map is
    // read-only.
    let map = unsafe { Mmap::map(file)? };
    Ok(SegmentBytes::Mapped(map))
}

/// Asks the processor for the cache line holding `slice[at]` (nothing when
/// `at` is past the end, or on a processor other than x86-64).
///
/// The look-ups of a query or a self-join probe read many independent
/// places of large arrays at random. Read with plain loads, one after
/// another in a loop of their own, their cache misses overlap only as far
/// as the reorder buffer reaches: each load waits there until its line
/// arrives. A prefetch instruction retires at once, so a loop of them puts
/// a stage's misses in flight up to what the memory system holds, and the
/// loads that follow find their lines arriving or arrived.
#[inline(always)]
pub(crate) fn prefetch_line<T>(slice: &[T], at: usize) {
    if let Some(item) = slice.get(at) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults and never changes memory, whatever
        // the address (this one is inside `slice`); the intrinsic is unsafe
        // only as part of a target feature, SSE, which every x86-64
        // processor has.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(std::ptr::from_ref(item).cast());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = item;
    }
}
