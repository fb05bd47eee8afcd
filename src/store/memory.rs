//! [`MemStorage`]: an index held in memory, with the state a power cut
//! would leave tracked beside the current one; and [`FaultStorage`], which
//! wraps it to fail, tear or crash at a chosen I/O operation or to run out
//! of space. Both serve the catalog through redb's `StorageBackend`, so a
//! crash stops the catalog and the segments at the same instant.
//!
//! The durability model is the one FORMAT.md §8 assumes of a POSIX file
//! system, taken at its weakest: a file's bytes survive a power cut only up
//! to its last fsync, and a name (creation, rename, removal) only up to the
//! last fsync of the directory.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::error::IndexError;
use super::mmap::SegmentBytes;
use super::storage::Storage;

#[derive(Debug, Default, Clone)]
struct Inode {
    data: Vec<u8>,
    synced: Vec<u8>,
}

#[derive(Debug, Default, Clone)]
struct Image {
    inodes: BTreeMap<u64, Inode>,
    names: BTreeMap<String, u64>,
    durable_names: BTreeMap<String, u64>,
    next_inode: u64,
    locked: bool,
}

impl Image {
    fn inode(&self, name: &str) -> io::Result<&Inode> {
        self.names.get(name).and_then(|id| self.inodes.get(id)).ok_or_else(|| not_found(name))
    }

    fn id_of(&self, name: &str) -> io::Result<u64> {
        self.names.get(name).copied().ok_or_else(|| not_found(name))
    }

    /// The inode `name` refers to, created empty (not yet durable) when
    /// there is none.
    fn id_or_create(&mut self, name: &str) -> u64 {
        if let Some(&id) = self.names.get(name) {
            return id;
        }
        let id = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(id, Inode::default());
        self.names.insert(name.to_owned(), id);
        id
    }

    fn total_len(&self) -> u64 {
        self.inodes.values().map(|i| i.data.len().max(i.synced.len()) as u64).sum()
    }

    /// Drops inodes no name (current or durable) refers to.
    fn collect(&mut self) {
        let live: Vec<u64> = self.names.values().chain(self.durable_names.values()).copied().collect();
        self.inodes.retain(|id, _| live.contains(id));
    }
}

fn not_found(name: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{name}: no such file"))
}

/// How a simulated crash leaves the storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrashMode {
    /// The process dies, the machine does not: everything written so far
    /// survives, synced or not.
    ProcessExit,
    /// Power is cut: only fsynced bytes and fsynced directory entries
    /// survive.
    PowerLoss,
    /// Power is cut during a write: as `PowerLoss`, and the interrupted
    /// write reached the disk in part (its first sectors).
    TornWrite,
}

impl CrashMode {
    /// Every mode.
    pub const ALL: [CrashMode; 3] = [CrashMode::ProcessExit, CrashMode::PowerLoss, CrashMode::TornWrite];
}

/// Files in memory. Cloning shares the files (as two handles on one
/// directory); [`MemStorage::crash_image`] and [`MemStorage::deep_copy`]
/// make independent copies.
#[derive(Debug, Clone)]
pub struct MemStorage {
    label: PathBuf,
    image: Arc<Mutex<Image>>,
}

impl Default for MemStorage {
    fn default() -> Self {
        Self::new()
    }
}

impl MemStorage {
    /// Empty storage.
    pub fn new() -> Self {
        MemStorage { label: PathBuf::from("<memory>"), image: Arc::default() }
    }

    fn image(&self) -> MutexGuard<'_, Image> {
        self.image.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn from_image(image: Image) -> Self {
        MemStorage { label: PathBuf::from("<memory>"), image: Arc::new(Mutex::new(image)) }
    }

    /// An independent copy of the current contents (unlocked).
    pub fn deep_copy(&self) -> MemStorage {
        let mut image = self.image().clone();
        image.locked = false;
        MemStorage::from_image(image)
    }

    /// What a crash now would leave, as new independent storage in which
    /// everything counts as durable. For [`CrashMode::TornWrite`], `torn`
    /// is the interrupted write: (file, offset, bytes); its first half,
    /// rounded down to 512-byte sectors, lands on the durable bytes.
    pub fn crash_image(&self, mode: CrashMode, torn: Option<(&str, u64, &[u8])>) -> MemStorage {
        let mut image = self.image().clone();
        image.locked = false;
        match mode {
            CrashMode::ProcessExit => {
                for inode in image.inodes.values_mut() {
                    inode.synced = inode.data.clone();
                }
                image.durable_names = image.names.clone();
            }
            CrashMode::PowerLoss | CrashMode::TornWrite => {
                if let (CrashMode::TornWrite, Some((name, offset, bytes))) = (mode, torn) {
                    let id = image.names.get(name).copied();
                    if let Some(inode) = id.and_then(|id| image.inodes.get_mut(&id)) {
                        let keep = (bytes.len() / 2) & !511;
                        apply_write(&mut inode.synced, offset, &bytes[..keep]);
                    }
                }
                for inode in image.inodes.values_mut() {
                    inode.data = inode.synced.clone();
                }
                image.names = image.durable_names.clone();
            }
        }
        image.collect();
        MemStorage::from_image(image)
    }

    /// The current bytes of a file.
    ///
    /// # Errors
    /// `NotFound`.
    pub fn read_file(&self, name: &str) -> io::Result<Vec<u8>> {
        Ok(self.image().inode(name)?.data.clone())
    }

    /// Replaces a file's bytes (current and durable): for damaging a file
    /// on purpose.
    ///
    /// # Errors
    /// `NotFound`.
    pub fn overwrite_file(&self, name: &str, bytes: Vec<u8>) -> io::Result<()> {
        let mut image = self.image();
        let id = image.id_of(name)?;
        let inode = image.inodes.entry(id).or_default();
        inode.synced.clone_from(&bytes);
        inode.data = bytes;
        Ok(())
    }

    /// Loads the files of a directory on disk (an index to examine).
    ///
    /// # Errors
    /// I/O errors.
    pub fn load_dir(dir: impl AsRef<Path>) -> io::Result<MemStorage> {
        let storage = MemStorage::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                let name = entry.file_name().to_string_lossy().into_owned();
                storage.write_new(&name, &std::fs::read(entry.path())?)?;
                storage.sync(&name)?;
            }
        }
        storage.sync_dir()?;
        Ok(storage)
    }

    /// Total bytes held.
    pub fn total_len(&self) -> u64 {
        self.image().total_len()
    }

    fn backend(&self, name: &str, create: bool) -> io::Result<MemBackend> {
        let mut image = self.image();
        let id = if create { image.id_or_create(name) } else { image.id_of(name)? };
        Ok(MemBackend { image: Arc::clone(&self.image), inode: id })
    }

    fn builder() -> redb::Builder {
        let mut builder = redb::Builder::new();
        builder.set_concurrency_mode(redb::ConcurrencyMode::ExclusiveWriter);
        builder.set_check_integrity_on_open(true);
        builder
    }
}

fn apply_write(data: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let start = offset as usize;
    let end = start + bytes.len();
    if data.len() < end {
        data.resize(end, 0);
    }
    data[start..end].copy_from_slice(bytes);
}

#[derive(Debug)]
struct MemLock(Arc<Mutex<Image>>);

impl Drop for MemLock {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).locked = false;
    }
}

impl Storage for MemStorage {
    fn location(&self) -> &Path {
        &self.label
    }

    fn prepare(&self) -> io::Result<()> {
        Ok(())
    }

    fn lock(&self) -> Result<Box<dyn Debug + Send + Sync>, IndexError> {
        let mut image = self.image();
        if image.locked {
            return Err(IndexError::Locked { path: self.label.clone() });
        }
        image.locked = true;
        Ok(Box::new(MemLock(Arc::clone(&self.image))))
    }

    fn exists(&self, name: &str) -> io::Result<bool> {
        Ok(self.image().names.contains_key(name))
    }

    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.image().names.keys().cloned().collect())
    }

    fn len(&self, name: &str) -> io::Result<u64> {
        Ok(self.image().inode(name)?.data.len() as u64)
    }

    fn write_new(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let mut image = self.image();
        let id = image.id_or_create(name);
        image.inodes.entry(id).or_default().data = bytes.to_vec();
        Ok(())
    }

    fn write_at(&self, name: &str, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let mut image = self.image();
        let id = image.id_of(name)?;
        apply_write(&mut image.inodes.entry(id).or_default().data, offset, bytes);
        Ok(())
    }

    fn sync(&self, name: &str) -> io::Result<()> {
        let mut image = self.image();
        let id = image.id_of(name)?;
        let inode = image.inodes.entry(id).or_default();
        inode.synced.clone_from(&inode.data);
        Ok(())
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut image = self.image();
        let id = image.names.remove(from).ok_or_else(|| not_found(from))?;
        image.names.insert(to.to_owned(), id);
        image.collect();
        Ok(())
    }

    fn sync_dir(&self) -> io::Result<()> {
        let mut image = self.image();
        image.durable_names = image.names.clone();
        image.collect();
        Ok(())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let mut image = self.image();
        image.names.remove(name).ok_or_else(|| not_found(name))?;
        image.collect();
        Ok(())
    }

    fn map(&self, name: &str) -> io::Result<SegmentBytes> {
        Ok(SegmentBytes::Owned(self.read_file(name)?))
    }

    fn open_catalog(&self, name: &str, create: bool) -> Result<redb::Database, redb::DatabaseError> {
        Self::builder().create_with_backend(self.backend(name, create)?)
    }

    fn open_catalog_read_only(&self, name: &str) -> Result<redb::ReadOnlyDatabase, redb::DatabaseError> {
        Self::builder().open_read_only_with_backend(self.backend(name, false)?)
    }
}

/// The catalog file of a [`MemStorage`], as redb sees it. Like an open
/// file handle it refers to the inode, not the name.
#[derive(Debug)]
struct MemBackend {
    image: Arc<Mutex<Image>>,
    inode: u64,
}

impl MemBackend {
    fn with<T>(&self, f: impl FnOnce(&mut Inode) -> io::Result<T>) -> io::Result<T> {
        let mut image = self.image.lock().unwrap_or_else(|p| p.into_inner());
        let inode = image.inodes.get_mut(&self.inode).ok_or_else(|| not_found("catalog"))?;
        f(inode)
    }
}

impl redb::StorageBackend for MemBackend {
    fn len(&self) -> io::Result<u64> {
        self.with(|i| Ok(i.data.len() as u64))
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.with(|i| {
            let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
            let bytes = i.data.get(start..start + out.len()).ok_or(io::ErrorKind::UnexpectedEof)?;
            out.copy_from_slice(bytes);
            Ok(())
        })
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.with(|i| {
            i.data.resize(len as usize, 0);
            Ok(())
        })
    }

    fn sync_data(&self) -> io::Result<()> {
        self.with(|i| {
            i.synced.clone_from(&i.data);
            Ok(())
        })
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.with(|i| {
            apply_write(&mut i.data, offset, data);
            Ok(())
        })
    }
}

/// What a [`FaultStorage`] does, counted in its operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Nothing: count operations only.
    None,
    /// Operation `n` (any kind, reads included) fails with an I/O error
    /// and does nothing; later ones work.
    Fail(u64),
    /// If operation `n` is a write, half of it lands and then it fails.
    ShortWrite(u64),
    /// Crash before mutating operation `n` (writes, syncs, renames,
    /// removals, resizes): its [`MemStorage::crash_image`] is kept, and
    /// operation `n` and every later one fail.
    Crash(u64, CrashMode),
    /// Writes that would grow the stored bytes past this many fail with
    /// `StorageFull`, as on a full disk.
    Capacity(u64),
}

#[derive(Debug)]
struct FaultState {
    fault: Fault,
    ops: u64,
    mutations: u64,
    crashed: Option<MemStorage>,
    triggered: bool,
    /// (file, offset, length) of every successful read.
    reads: Vec<(String, u64, u64)>,
}

/// A [`MemStorage`] with a [`Fault`] injected at one operation. Every
/// operation, on segments and on the catalog's redb backend alike, goes
/// through one counter, so a crash stops both at the same instant.
#[derive(Debug, Clone)]
pub struct FaultStorage {
    inner: MemStorage,
    state: Arc<Mutex<FaultState>>,
}

/// One storage operation, as a [`FaultStorage`] sees it.
#[derive(Debug, Clone, Copy)]
enum Op<'a> {
    Read,
    Write { name: &'a str, offset: u64, bytes: &'a [u8], grows_by: u64 },
    Resize { grows_by: u64 },
    Sync,
    Name,
}

/// What a [`FaultStorage`] lets an operation do.
enum Verdict {
    Proceed,
    ShortWrite,
}

impl FaultStorage {
    /// Wraps `inner` with `fault`.
    pub fn new(inner: MemStorage, fault: Fault) -> Self {
        let state = FaultState { fault, ops: 0, mutations: 0, crashed: None, triggered: false, reads: Vec::new() };
        FaultStorage { inner, state: Arc::new(Mutex::new(state)) }
    }

    fn state(&self) -> MutexGuard<'_, FaultState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Operations so far, and mutating operations so far.
    pub fn counts(&self) -> (u64, u64) {
        let state = self.state();
        (state.ops, state.mutations)
    }

    /// Whether the fault has happened.
    pub fn triggered(&self) -> bool {
        self.state().triggered
    }

    /// The byte ranges of `name` read so far, merged and sorted: a flip of
    /// a byte outside them cannot change what the reader did.
    pub fn read_ranges(&self, name: &str) -> Vec<std::ops::Range<u64>> {
        let mut ranges: Vec<std::ops::Range<u64>> = self
            .state()
            .reads
            .iter()
            .filter(|(n, _, len)| n == name && *len > 0)
            .map(|(_, offset, len)| *offset..offset + len)
            .collect();
        ranges.sort_unstable_by_key(|r| r.start);
        let mut merged: Vec<std::ops::Range<u64>> = Vec::new();
        for r in ranges {
            match merged.last_mut() {
                Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                _ => merged.push(r),
            }
        }
        merged
    }

    fn record_read(&self, name: &str, offset: u64, len: u64) {
        self.state().reads.push((name.to_owned(), offset, len));
    }

    /// The storage a [`Fault::Crash`] left, once it happened.
    pub fn crash_image(&self) -> Option<MemStorage> {
        self.state().crashed.clone()
    }

    /// The storage underneath (for [`Fault::Capacity`]: to go on once
    /// space returns).
    pub fn inner(&self) -> &MemStorage {
        &self.inner
    }

    /// Changes the fault from now on (for example, space returns).
    pub fn set_fault(&self, fault: Fault) {
        self.state().fault = fault;
    }

    fn check(&self, op: Op<'_>) -> io::Result<Verdict> {
        let mut state = self.state();
        if state.crashed.is_some() {
            return Err(io::Error::other("storage crashed (simulated)"));
        }
        let n = state.ops;
        state.ops += 1;
        let mutating = !matches!(op, Op::Read);
        let m = state.mutations;
        if mutating {
            state.mutations += 1;
        }
        match state.fault {
            Fault::Fail(at) if at == n => {
                state.triggered = true;
                Err(io::Error::other(format!("injected I/O error at operation {n}")))
            }
            Fault::ShortWrite(at) if at == n && matches!(op, Op::Write { .. }) => {
                state.triggered = true;
                Ok(Verdict::ShortWrite)
            }
            Fault::Crash(at, mode) if mutating && at == m => {
                let torn = match op {
                    Op::Write { name, offset, bytes, .. } => Some((name, offset, bytes)),
                    _ => None,
                };
                state.crashed = Some(self.inner.crash_image(mode, torn));
                state.triggered = true;
                Err(io::Error::other(format!("crashed (simulated) before mutating operation {m}")))
            }
            Fault::Capacity(cap) => {
                let grows_by = match op {
                    Op::Write { grows_by, .. } | Op::Resize { grows_by } => grows_by,
                    _ => 0,
                };
                if grows_by > 0 && self.inner.total_len() + grows_by > cap {
                    state.triggered = true;
                    return Err(io::Error::new(io::ErrorKind::StorageFull, "no space left on device (simulated)"));
                }
                Ok(Verdict::Proceed)
            }
            _ => Ok(Verdict::Proceed),
        }
    }

    /// The catalog file `name` as redb sees it, every operation checked.
    fn backend(&self, name: &str, create: bool) -> io::Result<FaultBackend> {
        Ok(FaultBackend { storage: self.clone(), name: name.to_owned(), inner: self.inner.backend(name, create)? })
    }

    fn growth(&self, name: &str, end: u64) -> u64 {
        end.saturating_sub(self.inner.len(name).unwrap_or(0))
    }
}

fn short_write_error() -> io::Error {
    io::Error::other("short write (simulated)")
}

/// A write that [`FaultStorage::check`] let through: all of `bytes` by
/// `write`, or, for a short write, the first half and an error.
fn checked_write(verdict: Verdict, bytes: &[u8], write: impl FnOnce(&[u8]) -> io::Result<()>) -> io::Result<()> {
    match verdict {
        Verdict::Proceed => write(bytes),
        Verdict::ShortWrite => {
            write(&bytes[..bytes.len() / 2])?;
            Err(short_write_error())
        }
    }
}

impl Storage for FaultStorage {
    fn location(&self) -> &Path {
        self.inner.location()
    }

    fn prepare(&self) -> io::Result<()> {
        self.inner.prepare()
    }

    fn lock(&self) -> Result<Box<dyn Debug + Send + Sync>, IndexError> {
        self.inner.lock()
    }

    fn exists(&self, name: &str) -> io::Result<bool> {
        self.check(Op::Read)?;
        self.inner.exists(name)
    }

    fn list(&self) -> io::Result<Vec<String>> {
        self.check(Op::Read)?;
        self.inner.list()
    }

    fn len(&self, name: &str) -> io::Result<u64> {
        self.check(Op::Read)?;
        self.inner.len(name)
    }

    fn write_new(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        // A new file grows the storage by all of it (an existing one is
        // truncated first).
        let op = Op::Write { name, offset: 0, bytes, grows_by: bytes.len() as u64 };
        checked_write(self.check(op)?, bytes, |bytes| self.inner.write_new(name, bytes))
    }

    fn write_at(&self, name: &str, offset: u64, bytes: &[u8]) -> io::Result<()> {
        // The file exists: a missing one fails before any fault is counted.
        self.inner.len(name)?;
        let grows_by = self.growth(name, offset + bytes.len() as u64);
        let verdict = self.check(Op::Write { name, offset, bytes, grows_by })?;
        checked_write(verdict, bytes, |bytes| self.inner.write_at(name, offset, bytes))
    }

    fn sync(&self, name: &str) -> io::Result<()> {
        self.check(Op::Sync)?;
        self.inner.sync(name)
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.check(Op::Name)?;
        self.inner.rename(from, to)
    }

    fn sync_dir(&self) -> io::Result<()> {
        self.check(Op::Sync)?;
        self.inner.sync_dir()
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        self.check(Op::Name)?;
        self.inner.remove(name)
    }

    fn map(&self, name: &str) -> io::Result<SegmentBytes> {
        self.check(Op::Read)?;
        let bytes = self.inner.map(name)?;
        self.record_read(name, 0, bytes.as_ref().len() as u64);
        Ok(bytes)
    }

    fn open_catalog(&self, name: &str, create: bool) -> Result<redb::Database, redb::DatabaseError> {
        if !self.inner.exists(name)? {
            self.check(Op::Name)?;
        }
        MemStorage::builder().create_with_backend(self.backend(name, create)?)
    }

    fn open_catalog_read_only(&self, name: &str) -> Result<redb::ReadOnlyDatabase, redb::DatabaseError> {
        MemStorage::builder().open_read_only_with_backend(self.backend(name, false)?)
    }
}

/// The catalog backend of a [`FaultStorage`].
#[derive(Debug)]
struct FaultBackend {
    storage: FaultStorage,
    name: String,
    inner: MemBackend,
}

impl redb::StorageBackend for FaultBackend {
    fn len(&self) -> io::Result<u64> {
        self.storage.check(Op::Read)?;
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.storage.check(Op::Read)?;
        self.inner.read(offset, out)?;
        self.storage.record_read(&self.name, offset, out.len() as u64);
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let grows_by = self.storage.growth(&self.name, len);
        self.storage.check(Op::Resize { grows_by })?;
        self.inner.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.storage.check(Op::Sync)?;
        self.inner.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let grows_by = self.storage.growth(&self.name, offset + data.len() as u64);
        let verdict = self.storage.check(Op::Write { name: &self.name, offset, bytes: data, grows_by })?;
        checked_write(verdict, data, |bytes| self.inner.write(offset, bytes))
    }
}
