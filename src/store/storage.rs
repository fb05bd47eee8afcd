//! The storage seam: every byte an index reads or writes, catalog and
//! segments alike, goes through one [`Storage`].
//!
//! - [`FsStorage`]: a directory on the real file system (segments are
//!   memory-mapped; the catalog is a redb file shared with read-only
//!   processes).
//! - [`MemStorage`](super::MemStorage): files in memory, with the state a
//!   power cut would leave (only what was fsynced, only renames whose
//!   directory was fsynced) kept beside the current one.
//! - [`FaultStorage`](super::FaultStorage): a `MemStorage` that fails,
//!   tears or crashes at a chosen operation, or runs out of space.
//!
//! Names are plain file names inside the index (no directories).

use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use super::error::IndexError;
use super::mmap::{self, SegmentBytes};
use super::LOCK_FILE;

/// Where an index keeps its files.
pub trait Storage: Debug + Send + Sync + 'static {
    /// A human-readable location (the directory, or a label for memory).
    fn location(&self) -> &Path;

    /// Creates the location if it does not exist.
    ///
    /// # Errors
    /// I/O errors.
    fn prepare(&self) -> io::Result<()>;

    /// Takes the single-writer lock; it is released when the guard drops.
    ///
    /// # Errors
    /// [`IndexError::Locked`] when another writer holds it; I/O errors.
    fn lock(&self) -> Result<Box<dyn Debug + Send + Sync>, IndexError>;

    /// Whether a file exists.
    ///
    /// # Errors
    /// I/O errors.
    fn exists(&self, name: &str) -> io::Result<bool>;

    /// The names of all files.
    ///
    /// # Errors
    /// I/O errors.
    fn list(&self) -> io::Result<Vec<String>>;

    /// A file's length in bytes.
    ///
    /// # Errors
    /// I/O errors (`NotFound` when it does not exist).
    fn len(&self, name: &str) -> io::Result<u64>;

    /// Creates (or truncates) a file and writes `bytes` into it. Nothing is
    /// durable until [`Storage::sync`] and, for its name,
    /// [`Storage::sync_dir`].
    ///
    /// # Errors
    /// I/O errors; a failed write may leave a prefix written.
    fn write_new(&self, name: &str, bytes: &[u8]) -> io::Result<()>;

    /// [`Storage::write_new`] of the concatenation of `parts`, which the
    /// default implementation builds; a storage that can write the parts
    /// one after another (a file) spares that copy.
    ///
    /// # Errors
    /// As [`Storage::write_new`].
    fn write_new_parts(&self, name: &str, parts: &[&[u8]]) -> io::Result<()> {
        self.write_new(name, &parts.concat())
    }

    /// Writes `bytes` at `offset` of the file `name`, which exists (made by
    /// [`Storage::write_new`] or [`Storage::write_new_parts`]), growing it
    /// when they end past its end: a segment's header, written last over
    /// the zeros its file began with. Nothing is durable until
    /// [`Storage::sync`].
    ///
    /// # Errors
    /// I/O errors; a failed write may leave part of `bytes` written.
    fn write_at(&self, name: &str, offset: u64, bytes: &[u8]) -> io::Result<()>;

    /// Appends the concatenation of `parts` to the file `name`, which
    /// exists: the rest of a segment whose first sections were written
    /// while its tables were built. The default implementation builds the
    /// concatenation and writes it at the file's end.
    ///
    /// # Errors
    /// As [`Storage::write_at`].
    fn append_parts(&self, name: &str, parts: &[&[u8]]) -> io::Result<()> {
        let end = self.len(name)?;
        self.write_at(name, end, &parts.concat())
    }

    /// Makes a file's contents durable.
    ///
    /// # Errors
    /// I/O errors.
    fn sync(&self, name: &str) -> io::Result<()>;

    /// Renames `from` to `to`, replacing `to`.
    ///
    /// # Errors
    /// I/O errors.
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;

    /// Makes creations, renames and removals durable.
    ///
    /// # Errors
    /// I/O errors.
    fn sync_dir(&self) -> io::Result<()>;

    /// Removes a file.
    ///
    /// # Errors
    /// I/O errors.
    fn remove(&self, name: &str) -> io::Result<()>;

    /// A whole file for reading (memory-mapped where the storage can).
    ///
    /// # Errors
    /// I/O errors.
    fn map(&self, name: &str) -> io::Result<SegmentBytes>;

    /// Opens (or, with `create`, creates) the catalog database.
    ///
    /// # Errors
    /// redb's errors, I/O among them.
    fn open_catalog(&self, name: &str, create: bool) -> Result<redb::Database, redb::DatabaseError>;

    /// Opens the catalog database read-only, beside a writer if there is one.
    ///
    /// # Errors
    /// redb's errors, I/O among them.
    fn open_catalog_read_only(&self, name: &str) -> Result<redb::ReadOnlyDatabase, redb::DatabaseError>;
}

/// An index directory on the real file system.
#[derive(Debug, Clone)]
pub struct FsStorage {
    dir: PathBuf,
}

impl FsStorage {
    /// Storage in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        FsStorage { dir: dir.into() }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn builder() -> redb::Builder {
        let mut builder = redb::Builder::new();
        builder.set_concurrency_mode(redb::ConcurrencyMode::SingleWriter);
        builder.set_check_integrity_on_open(true);
        builder
    }
}

/// Writes `parts` one after another to `file`. Parts may be many and small
/// (a flush's or a merged segment's hashes, one piece a document): handed
/// to the kernel in vectored writes, up to its limit of pieces a call,
/// with no copy of their own (a 1 MiB buffer they were gathered into had
/// copied every hash once more: 1.2% of a 1M load's CPU).
fn write_parts(mut file: File, parts: &[&[u8]]) -> io::Result<()> {
    let mut slices: Vec<io::IoSlice<'_>> =
        parts.iter().filter(|part| !part.is_empty()).map(|part| io::IoSlice::new(part)).collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        match io::Write::write_vectored(&mut file, rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(written) => io::IoSlice::advance_slices(&mut rest, written),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Storage for FsStorage {
    fn location(&self) -> &Path {
        &self.dir
    }

    fn prepare(&self) -> io::Result<()> {
        fs::create_dir_all(&self.dir)
    }

    fn lock(&self) -> Result<Box<dyn Debug + Send + Sync>, IndexError> {
        let path = self.path(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(IndexError::io(format!("opening {}", path.display())))?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(file)),
            Err(fs::TryLockError::WouldBlock) => Err(IndexError::Locked { path: self.dir.clone() }),
            Err(fs::TryLockError::Error(e)) => Err(IndexError::io(format!("locking {}", path.display()))(e)),
        }
    }

    fn exists(&self, name: &str) -> io::Result<bool> {
        self.path(name).try_exists()
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn len(&self, name: &str) -> io::Result<u64> {
        Ok(fs::metadata(self.path(name))?.len())
    }

    fn write_new(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        io::Write::write_all(&mut File::create(self.path(name))?, bytes)
    }

    fn write_new_parts(&self, name: &str, parts: &[&[u8]]) -> io::Result<()> {
        write_parts(File::create(self.path(name))?, parts)
    }

    fn write_at(&self, name: &str, offset: u64, bytes: &[u8]) -> io::Result<()> {
        use io::{Seek, Write};
        let mut file = fs::OpenOptions::new().write(true).open(self.path(name))?;
        file.seek(io::SeekFrom::Start(offset))?;
        file.write_all(bytes)
    }

    fn append_parts(&self, name: &str, parts: &[&[u8]]) -> io::Result<()> {
        write_parts(fs::OpenOptions::new().append(true).open(self.path(name))?, parts)
    }

    fn sync(&self, name: &str) -> io::Result<()> {
        // fsync flushes the inode, whichever descriptor asks.
        File::open(self.path(name))?.sync_all()
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        fs::rename(self.path(from), self.path(to))
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.dir)?.sync_all()
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        fs::remove_file(self.path(name))
    }

    fn map(&self, name: &str) -> io::Result<SegmentBytes> {
        mmap::map_segment(&File::open(self.path(name))?)
    }

    fn open_catalog(&self, name: &str, create: bool) -> Result<redb::Database, redb::DatabaseError> {
        if create {
            Self::builder().create(self.path(name))
        } else {
            Self::builder().open(self.path(name))
        }
    }

    fn open_catalog_read_only(&self, name: &str) -> Result<redb::ReadOnlyDatabase, redb::DatabaseError> {
        Self::builder().open_read_only(self.path(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parts of every size (empty, a few bytes, over 1 MiB), more of them
    /// than one vectored write takes (1,024 on Linux), written new and
    /// then appended: the file holds their concatenation.
    #[test]
    fn parts_are_written_one_after_another() {
        let dir = tempfile::tempdir().unwrap();
        let storage = FsStorage::new(dir.path());
        let mut next = crate::store::roaring_view::xorshift(0x9e37_79b9_7f4a_7c15_u64);
        let owned: Vec<Vec<u8>> = (0..3_000)
            .map(|i| {
                let len = match next() % 4 {
                    0 => 0,
                    1 => (next() % 64) as usize,
                    2 => (next() % 8_192) as usize,
                    _ if i % 100 == 0 => (1 << 20) + (next() % 1_000) as usize,
                    _ => 8,
                };
                (0..len).map(|_| next() as u8).collect()
            })
            .collect();
        let parts: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
        let (first, second) = parts.split_at(parts.len() / 2);
        storage.write_new_parts("f", first).unwrap();
        assert_eq!(fs::read(dir.path().join("f")).unwrap(), first.concat());
        storage.append_parts("f", second).unwrap();
        assert_eq!(fs::read(dir.path().join("f")).unwrap(), parts.concat());
        storage.write_new_parts("empty", &[&[], &[]]).unwrap();
        assert!(fs::read(dir.path().join("empty")).unwrap().is_empty());
    }
}
