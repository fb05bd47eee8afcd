//! The crate's only `unsafe` code: memory-mapping segment files.
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
