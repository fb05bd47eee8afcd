//! The persistent index: a directory with a redb catalog, immutable
//! memory-mapped segment files and a lock file (FORMAT.md §6–§8).
//!
//! - [`Index::create`] / [`Index::open`] / [`Index::open_read_only`].
//! - [`Index::writer`] returns the single [`Writer`]; its inserts and deletes
//!   go into one redb write transaction and are acknowledged by
//!   [`Writer::commit`], the only commit point.
//! - Committed documents not yet flushed live in the catalog's `pending`
//!   table and in an in-memory delta rebuilt from it at open. When the delta
//!   reaches [`IndexOptions::flush_threshold`] documents it is written to a
//!   new segment (temporary name, fsync, rename, directory fsync, then one
//!   redb transaction that records the segment and drops the pending copies).
//! - [`Index::bulk_writer`] returns a [`Writer`] for loads of many documents
//!   at once: its commit writes them straight to a segment of their own,
//!   listed in the commit's own transaction, and never to `pending`.
//!   [`Writer::commit_and_continue`] commits a batch and returns the next
//!   writer, which keeps the bulk writer's segment-build buffers.
//! - [`Index::searcher`] returns a [`Searcher`]: a snapshot (a redb read
//!   transaction plus `Arc`s of the segment list, delta and deletions) that
//!   later commits and flushes do not change.
//!
//! A crawler's loop: keep a page unless a stored one is at least τ
//! similar, commit, and ask again after a reopen.
//!
//! ```
//! use neardex::store::{Document, Index, InsertIfNew, Metadata};
//! use neardex::{SignatureConfig, Threshold};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("crawl.ndx");
//! let tau = Threshold::new(0.8)?;
//! let story = "The senator said on Monday that the bill would be signed, and the governor has promised \
//!     to veto it if the vote is close. The debate in the house is expected to last until the end of the week.";
//! let other = "A small company in the north has built a battery that can be charged in a few minutes, and \
//!     it is said to last for the whole life of the car. It will be tested by a taxi firm in the spring.";
//! let copy = format!("Breaking news. {story}");
//!
//! let index = Index::create(&path, SignatureConfig::default())?;
//! let mut writer = index.writer()?;
//! let mut kept = Vec::new();
//! for (url, page) in [("https://a.example/1", story), ("https://b.example/2", other), ("https://c.example/3", &copy)] {
//!     let metadata = Metadata { url: Some(url.to_owned()), ..Metadata::default() };
//!     match writer.insert_if_new(url, Document::Text(page), metadata, tau)? {
//!         InsertIfNew::Inserted(_) => kept.push(url),
//!         InsertIfNew::Matches(matches) => {
//!             // Staged documents are named by the writer that staged them.
//!             let first = writer.describe(matches[0].id)?.expect("a match is stored or staged");
//!             assert_eq!((url, first.key.as_str()), ("https://c.example/3", "https://a.example/1"));
//!         }
//!     }
//! }
//! writer.commit()?; // durable from here on
//! assert_eq!(kept, ["https://a.example/1", "https://b.example/2"]);
//! drop(index);
//!
//! let index = Index::open(&path)?;
//! let searcher = index.searcher()?;
//! let matches = searcher.query_document(Document::Text(&copy), tau)?;
//! let keys: Vec<String> = matches.iter().map(|m| searcher.describe(m.id).map(|d| d.unwrap().key)).collect::<Result<_, _>>()?;
//! assert_eq!(keys, ["https://a.example/1"]);
//! assert!(matches[0].overlap.meets(tau));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod budget;
pub(crate) mod catalog;
mod delta;
mod error;
mod maintenance;
mod memory;
mod mmap;
mod query;
mod roaring_view;
pub mod segment;
mod storage;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use redb::{ReadableDatabase, ReadableMultimapTable, ReadableTable, ReadableTableMetadata};

pub use budget::available_memory;
pub use catalog::{segment_file_name, Metadata, CATALOG_FILE, CATALOG_VERSION, CATALOG_VERSION_MIN};
pub use error::IndexError;
pub use memory::{CrashMode, Fault, FaultStorage, MemStorage};
pub use mmap::SegmentBytes;
pub use query::{explain_vectors, Cluster, Explanation, LshRecall, Pruning, QueryStats, WarmUp};
pub use segment::{SEGMENT_MAGIC, SEGMENT_VERSION};
pub use storage::{FsStorage, Storage};

use catalog::{DocRecord, PendingRecord, SegmentRecord, DELETED, DOCS, FINGERPRINTS, KEYS, MANIFEST, META, PENDING};
use delta::{DeltaFingerprints, DeltaIndex};
use segment::{PairBuffers, Segment};

use crate::config::SignatureConfig;
use crate::hash::Fingerprint;
use crate::oracle::{self, Match};
use crate::signer::{DocumentSignature, Signer};
use crate::similarity::Threshold;
use crate::vector::SignatureVector;

/// Segments per tier that trigger a merge (see [`Index::optimize`] and the
/// tiered policy run after every flush, bounded by
/// [`IndexOptions::max_merge_bytes`]).
pub const MERGE_FACTOR: usize = 8;

/// Name of the lock file a writer holds.
pub const LOCK_FILE: &str = "LOCK";

/// Tuning of an open index (not stored; each opener chooses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexOptions {
    /// Pending documents that trigger a flush to a new segment at commit.
    pub flush_threshold: usize,
    /// Where flushes and merges run. `false` (the default): inside the
    /// commit that reaches the flush threshold, which returns when they are
    /// done. `true`: on a thread of the index, while writers go on
    /// committing (a commit then only asks for them, unless twice the
    /// threshold is pending: then it waits for the job, so that pending
    /// documents stay bounded); see [`Index::wait_for_maintenance`].
    pub background_maintenance: bool,
    /// The largest merge the tiered policy starts, in bytes: the summed
    /// live bytes of the segments it would merge (each file's size scaled
    /// by its share of documents not deleted), which estimate the merged
    /// segment's. A merge maps its sources and builds the new segment's
    /// posting and band tables in memory, so this also bounds the memory a
    /// merge takes. A tier whose [`MERGE_FACTOR`] smallest segments exceed it
    /// is left as it is: past that size segments accumulate instead of
    /// growing (until deletions bring them back within it).
    /// [`Index::optimize`], asked for explicitly, merges whatever the size.
    pub max_merge_bytes: u64,
    /// The share of deleted documents, in percent, past which the merge
    /// policy rewrites a segment on its own to drop them (when its live
    /// bytes are within `max_merge_bytes`): a segment the tiers do not merge soon,
    /// one past the bound above all, would otherwise keep its deleted
    /// documents, their bytes and their posting entries until
    /// [`Index::optimize`]. Checked after flushes and after every commit
    /// that deletes (or replaces) a stored document. A segment whose
    /// documents are all deleted is dropped whatever this says (no file is
    /// written); 100 or more turns the rest off.
    pub max_deleted_percent: u8,
}

/// The default of [`IndexOptions::max_merge_bytes`]: 4 GiB.
pub const DEFAULT_MAX_MERGE_BYTES: u64 = 4 << 30;

/// The default of [`IndexOptions::max_deleted_percent`]: a segment is
/// rewritten once more than a quarter of its documents are deleted, so a
/// deleted document costs at most three rewrites of live ones on average.
pub const DEFAULT_MAX_DELETED_PERCENT: u8 = 25;

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions {
            flush_threshold: 50_000,
            background_maintenance: false,
            max_merge_bytes: DEFAULT_MAX_MERGE_BYTES,
            max_deleted_percent: DEFAULT_MAX_DELETED_PERCENT,
        }
    }
}

/// What a writer is given to store.
#[derive(Debug, Clone, Copy)]
pub enum Document<'a> {
    /// Plain text.
    Text(&'a str),
    /// An HTML page (bytes; the charset is sniffed).
    Html(&'a [u8]),
    /// Signatures computed elsewhere with the index's configuration.
    Signatures(&'a DocumentSignature),
}

/// What became of an insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InsertOutcome {
    /// The new document's id.
    pub id: u64,
    /// The smallest id of the live documents (committed, or staged by this
    /// writer) with the same exact-content fingerprint, if there is one.
    pub exact_duplicate_of: Option<u64>,
}

/// What [`Writer::insert_if_new`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InsertIfNew {
    /// Nothing was similar enough: the document was inserted.
    Inserted(InsertOutcome),
    /// These stored or staged documents are at least τ similar; nothing was
    /// inserted.
    Matches(Vec<Match>),
}

/// What the catalog holds about a stored document, without its vector
/// ([`Searcher::describe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentInfo {
    /// Document id.
    pub id: u64,
    /// External key.
    pub key: String,
    /// Exact-content fingerprint.
    pub fingerprint: Fingerprint,
    /// Descriptive metadata.
    pub metadata: Metadata,
}

/// A stored document as a searcher sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDocument {
    /// Document id.
    pub id: u64,
    /// External key.
    pub key: String,
    /// Exact-content fingerprint.
    pub fingerprint: Fingerprint,
    /// Descriptive metadata.
    pub metadata: Metadata,
    /// The signature vector.
    pub vector: SignatureVector,
}

/// Counts describing an index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IndexStats {
    /// Live documents.
    pub documents: u64,
    /// Deleted documents still held by segments (dropped by merging).
    pub deleted: u64,
    /// Committed documents not yet flushed to a segment.
    pub pending: u64,
    /// Live segments.
    pub segments: u64,
    /// Bytes of the catalog and all live segment files.
    pub bytes_on_disk: u64,
    /// Signature occurrences (Σ frequencies) over live documents.
    pub signatures: u64,
    /// Live documents with no signatures: they match nothing (under
    /// SpotSigs, pages without its antecedents; see
    /// [`SignatureConfig::fallback`](crate::SignatureConfig::fallback)).
    pub without_signatures: u64,
}

#[derive(Debug)]
struct DeltaDoc {
    vector: SignatureVector,
    band_keys: Vec<u64>,
    fingerprint: Fingerprint,
}

#[derive(Debug)]
struct LoadedSegment {
    segment: Segment<SegmentBytes>,
}

/// A set of deleted documents' ids: [`State`]'s segment documents, a
/// writer's own deletions until its commit, and the pending documents
/// removed from runs another snapshot shares (`delta::PendingDocs`).
type DeletedIds = roaring::RoaringTreemap;

/// The published, immutable state a searcher snapshots.
#[derive(Debug, Default)]
struct State {
    segments: BTreeMap<u64, Arc<LoadedSegment>>,
    delta: Arc<delta::PendingDocs>,
    /// Postings and band buckets of the delta: of these documents and
    /// maybe of others, so every id found is looked up in `delta`
    /// (`delta.rs`).
    delta_index: Arc<RwLock<DeltaIndex>>,
    /// Ids of segment documents deleted (the `deleted` table's keys). A
    /// compressed bitmap rather than a `BTreeSet`: a commit that deletes
    /// while a searcher holds the state copies it, and ids are dense, so
    /// the copy is a few kilobytes of containers, not a node per id
    /// (ARCHITECTURE.md, the paragraph on `State`).
    deleted: Arc<DeletedIds>,
    /// How many of `deleted` each segment holds, by segment id (the
    /// `deleted` table's rows counted by segment): what the merge policy
    /// weighs. Segments without deleted documents are absent.
    deleted_per_segment: Arc<BTreeMap<u64, u32>>,
    /// The segments' frequent-list estimates, summed (`query.rs`): built by
    /// the first query that needs them, shared until the segments change.
    ranks: Arc<std::sync::OnceLock<query::Ranks>>,
    /// Which segments may hold each posting key (`query.rs`): built by
    /// `Searcher::warm_up`, or on the pool once queries without them have
    /// spent what they cost; shared until the segments change (a segment
    /// appended keeps them, named for every key: `LazyMasks::appended`).
    segment_masks: Arc<query::LazyMasks>,
    /// For a read-only index: the catalog snapshot this state was loaded
    /// from. Another process's writer may commit at any time, so searchers
    /// share this one rather than beginning a newer one that would not
    /// match the state.
    pinned: Option<Arc<redb::ReadTransaction>>,
}

enum Catalog {
    /// Behind a lock only so that a compaction can have the database to
    /// itself (`redb::Database::compact` takes `&mut`); transactions take
    /// the shared side just to begin.
    Writable(RwLock<redb::Database>),
    ReadOnly(redb::ReadOnlyDatabase),
}

impl Catalog {
    fn writable(db: redb::Database) -> Catalog {
        Catalog::Writable(RwLock::new(db))
    }

    fn begin_read(&self) -> Result<redb::ReadTransaction, IndexError> {
        let txn = match self {
            Catalog::Writable(db) => db.read().unwrap_or_else(|p| p.into_inner()).begin_read(),
            Catalog::ReadOnly(db) => db.begin_read(),
        };
        txn.map_err(|e| IndexError::catalog("beginning a read")(e.into()))
    }

    fn begin_write(&self) -> Result<redb::WriteTransaction, IndexError> {
        match self {
            Catalog::Writable(db) => db
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .begin_write()
                .map_err(|e| IndexError::catalog("beginning a write")(e.into())),
            Catalog::ReadOnly(_) => Err(IndexError::ReadOnly),
        }
    }

    fn is_read_only(&self) -> bool {
        matches!(self, Catalog::ReadOnly(_))
    }

    /// The keys table repacked, then redb's compaction: says whether it
    /// changed anything. The `keys` table is rewritten into full pages
    /// if a quarter of its pages' bytes, and at least 64 KiB, are free
    /// ([`catalog::repack_keys`], a commit of its own); then redb moves
    /// the live pages to the front of the file and gives the rest back,
    /// only when no transaction of this or another process is open
    /// (otherwise the file is left as it is: a repack made meanwhile
    /// gives its old pages back at the next call). Repacking first lets
    /// one compaction do what two had done (before and after the repack):
    /// after a 1M-page load, 0.34–0.47 s against 0.57–0.60 s, the same
    /// file. Nothing to repack and nothing to move: `Ok(false)`, as for a
    /// read-only catalog. The caller holds the writer lock.
    fn compact(&self) -> Result<bool, IndexError> {
        if self.is_read_only() {
            return Ok(false);
        }
        let txn = self.begin_write()?;
        let repacked = catalog::repack_keys(&txn)?;
        if repacked {
            txn.commit().map_err(redb_err("committing the repacked keys"))?;
        } else {
            txn.abort().map_err(redb_err("ending a read of the keys table"))?;
        }
        Ok(matches!(self.compact_file()?, Compaction::Done) || repacked)
    }

    /// [`Catalog::compact`] of the file alone.
    fn compact_file(&self) -> Result<Compaction, IndexError> {
        let Catalog::Writable(db) = self else { return Ok(Compaction::Blocked) };
        let mut db = db.write().unwrap_or_else(|p| p.into_inner());
        match db.compact() {
            Ok(true) => Ok(Compaction::Done),
            Ok(false) => Ok(Compaction::NothingToDo),
            Err(
                redb::CompactionError::TransactionInProgress
                | redb::CompactionError::PersistentSavepointExists
                | redb::CompactionError::EphemeralSavepointExists,
            ) => Ok(Compaction::Blocked),
            Err(e) => Err(IndexError::catalog("compacting")(e.into())),
        }
    }
}

/// What one redb compaction did.
enum Compaction {
    /// It moved pages and gave space back.
    Done,
    /// The file had nothing to give back.
    NothingToDo,
    /// A transaction or savepoint was open (or the catalog is read-only).
    Blocked,
}

/// An open index.
pub struct Index {
    inner: Arc<Inner>,
    /// The background maintenance threads (one flushes, one merges), when
    /// the options ask for them: they hold their own `Arc` of `inner` and
    /// are joined when the index drops.
    worker: Option<maintenance::Workers>,
}

/// What an open index holds, shared with its maintenance thread.
struct Inner {
    storage: Arc<dyn Storage>,
    catalog: Catalog,
    signer: Arc<Signer>,
    options: IndexOptions,
    state: RwLock<Arc<State>>,
    writer_lock: Mutex<()>,
    /// Held by every flush but those a commit runs inline
    /// (`maintenance.rs`); taken before `writer_lock`, never after.
    maintenance_lock: Mutex<()>,
    /// Held by every merge but those a commit runs inline; taken before
    /// `maintenance_lock`, never after: a background merge runs while
    /// flushes go on.
    merge_lock: Mutex<()>,
    /// The outcome of the last background flush, and of the last
    /// background merge.
    maintenance_error: Mutex<Option<IndexError>>,
    merge_error: Mutex<Option<IndexError>>,
    /// The id the next segment gets, read from the catalog at the first
    /// flush or merge: jobs that overlap take distinct ids.
    next_segment: Mutex<Option<u64>>,
    /// The fingerprints of the pending documents, for the writer's
    /// exact-duplicate check: built at the first insert after an open or a
    /// flush, extended by commits (`delta.rs`).
    delta_fingerprints: Mutex<Option<DeltaFingerprints>>,
    _lock: Option<Box<dyn std::fmt::Debug + Send + Sync>>,
}

impl Inner {
    /// An index's shared state as opened or created: `state` its latest
    /// snapshot, every lock free, no error, no segment id or pending
    /// fingerprints read yet.
    fn new(
        storage: Arc<dyn Storage>,
        catalog: Catalog,
        signer: Signer,
        options: IndexOptions,
        state: State,
        lock: Option<Box<dyn std::fmt::Debug + Send + Sync>>,
    ) -> Inner {
        Inner {
            storage,
            catalog,
            signer: Arc::new(signer),
            options,
            state: RwLock::new(Arc::new(state)),
            writer_lock: Mutex::new(()),
            maintenance_lock: Mutex::new(()),
            merge_lock: Mutex::new(()),
            maintenance_error: Mutex::new(None),
            merge_error: Mutex::new(None),
            next_segment: Mutex::new(None),
            delta_fingerprints: Mutex::new(None),
            _lock: lock,
        }
    }
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("storage", &self.inner.storage)
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

fn redb_err<E: Into<redb::Error>>(context: &'static str) -> impl FnOnce(E) -> IndexError {
    move |e| IndexError::catalog(context)(e.into())
}

/// Elements a vector that a thread keeps from one query to the next may
/// hold ([`kept_for_reuse`]): one very long query's are freed.
const REUSED_LIMIT: usize = 1 << 14;

/// `v` emptied, for the thread's next query to fill, or a new vector when
/// it has room for more than [`REUSED_LIMIT`] elements.
fn kept_for_reuse<T>(mut v: Vec<T>) -> Vec<T> {
    v.clear();
    if v.capacity() > REUSED_LIMIT {
        Vec::new()
    } else {
        v
    }
}

/// A mutex's guard, also after a panic elsewhere poisoned it (what the
/// mutexes of the index guard stays consistent: they only serialise).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn sync_dir(storage: &dyn Storage) -> Result<(), IndexError> {
    storage.sync_dir().map_err(IndexError::io(format!("syncing directory {}", storage.location().display())))
}

/// Document `id`'s row of the catalog's `docs` table, decoded.
fn document_info(docs: &impl ReadableTable<u64, &'static [u8]>, id: u64) -> Result<Option<DocumentInfo>, IndexError> {
    let Some(raw) = docs.get(id).map_err(redb_err("reading docs"))? else { return Ok(None) };
    let record = DocRecord::decode(raw.value(), id)?;
    Ok(Some(DocumentInfo { id, key: record.key, fingerprint: record.fingerprint, metadata: record.metadata }))
}

fn meta_u64(table: &impl ReadableTable<&'static str, &'static [u8]>, name: &str) -> Result<u64, IndexError> {
    let value = table.get(name).map_err(redb_err("reading meta"))?;
    let bytes = value.as_ref().map(|v| v.value().to_vec()).unwrap_or_default();
    bytes
        .as_slice()
        .try_into()
        .map(u64::from_le_bytes)
        .map_err(|_| IndexError::corrupted(CATALOG_FILE, "meta", 0, &format!("{name} missing or malformed")))
}

impl Index {
    /// Creates a new index in `dir` (created if missing) and opens it for
    /// writing.
    ///
    /// # Errors
    /// [`IndexError::Config`] for an invalid configuration,
    /// [`IndexError::AlreadyExists`] when `dir` holds an index,
    /// [`IndexError::Locked`], [`IndexError::Io`], [`IndexError::Catalog`].
    pub fn create(dir: impl AsRef<Path>, config: SignatureConfig) -> Result<Index, IndexError> {
        Self::create_with(dir, config, IndexOptions::default())
    }

    /// [`Index::create`] with options.
    ///
    /// # Errors
    /// As [`Index::create`].
    pub fn create_with(
        dir: impl AsRef<Path>,
        config: SignatureConfig,
        options: IndexOptions,
    ) -> Result<Index, IndexError> {
        Self::create_in(Arc::new(FsStorage::new(dir.as_ref())), config, options)
    }

    /// [`Index::create`] in any [`Storage`]: a [`MemStorage`] for an index
    /// held in memory, a [`FaultStorage`] to test failures.
    ///
    /// # Errors
    /// As [`Index::create`].
    pub fn create_in(
        storage: Arc<dyn Storage>,
        config: SignatureConfig,
        options: IndexOptions,
    ) -> Result<Index, IndexError> {
        let location = storage.location().to_owned();
        let signer = Signer::new(config)?;
        storage.prepare().map_err(IndexError::io(format!("creating {}", location.display())))?;
        let lock = storage.lock()?;
        let exists =
            storage.exists(CATALOG_FILE).map_err(IndexError::io(format!("examining {}", location.display())))?;
        if exists {
            return Err(IndexError::AlreadyExists { path: location });
        }
        // The catalog is built under a temporary name and renamed into
        // place once its first commit is durable: a crash during creation
        // leaves no `catalog.redb`, so creating again works (FORMAT.md §8).
        let tmp = format!("{CATALOG_FILE}.tmp");
        if storage.exists(&tmp).map_err(IndexError::io(format!("examining {tmp}")))? {
            storage.remove(&tmp).map_err(IndexError::io(format!("removing {tmp}")))?;
        }
        let db = storage.open_catalog(&tmp, true).map_err(redb_err("creating the catalog"))?;
        let txn = db.begin_write().map_err(redb_err("beginning a write"))?;
        {
            let mut meta = txn.open_table(META).map_err(redb_err("creating tables"))?;
            let put = |meta: &mut redb::Table<&str, &[u8]>, k: &str, v: &[u8]| {
                meta.insert(k, v).map(|_| ()).map_err(redb_err("writing meta"))
            };
            put(&mut meta, "format", &CATALOG_VERSION.to_le_bytes())?;
            put(&mut meta, "config", &signer.config().encode())?;
            put(&mut meta, "next_doc_id", &1u64.to_le_bytes())?;
            put(&mut meta, "next_segment_id", &1u64.to_le_bytes())?;
            txn.open_table(KEYS).map_err(redb_err("creating tables"))?;
            txn.open_table(DOCS).map_err(redb_err("creating tables"))?;
            txn.open_table(PENDING).map_err(redb_err("creating tables"))?;
            txn.open_table(DELETED).map_err(redb_err("creating tables"))?;
            txn.open_table(MANIFEST).map_err(redb_err("creating tables"))?;
            txn.open_multimap_table(FINGERPRINTS).map_err(redb_err("creating tables"))?;
        }
        txn.commit().map_err(redb_err("committing the new catalog"))?;
        storage.rename(&tmp, CATALOG_FILE).map_err(IndexError::io(format!("renaming {tmp} into place")))?;
        sync_dir(&*storage)?;
        Index::start(Inner::new(storage, Catalog::writable(db), signer, options, State::default(), Some(lock)))
    }

    /// Wraps an opened index, with a maintenance thread when it is
    /// writable and the options ask for one.
    fn start(inner: Inner) -> Result<Index, IndexError> {
        let background = inner.options.background_maintenance && matches!(inner.catalog, Catalog::Writable(_));
        let inner = Arc::new(inner);
        let worker = if background { Some(maintenance::Workers::start(&inner)?) } else { None };
        Ok(Index { inner, worker })
    }

    /// Opens an existing index for writing. Files that no manifest lists
    /// (an interrupted flush's leftovers) are removed.
    ///
    /// # Errors
    /// [`IndexError::NotAnIndex`], [`IndexError::Locked`] when another
    /// writer holds it (or held it at the instant its process spawned a
    /// child that has not yet exec'd: the lock is an `flock`, shared
    /// through the copied descriptor), [`IndexError::Incompatible`],
    /// [`IndexError::ConfigDecode`], [`IndexError::Corrupted`], ...
    pub fn open(dir: impl AsRef<Path>) -> Result<Index, IndexError> {
        Self::open_with(dir, IndexOptions::default())
    }

    /// [`Index::open`] with options.
    ///
    /// # Errors
    /// As [`Index::open`].
    pub fn open_with(dir: impl AsRef<Path>, options: IndexOptions) -> Result<Index, IndexError> {
        Self::open_in(Arc::new(FsStorage::new(dir.as_ref())), options)
    }

    /// [`Index::open`] in any [`Storage`].
    ///
    /// # Errors
    /// As [`Index::open`].
    pub fn open_in(storage: Arc<dyn Storage>, options: IndexOptions) -> Result<Index, IndexError> {
        Self::check_is_index(&*storage)?;
        let lock = storage.lock()?;
        let db = storage.open_catalog(CATALOG_FILE, false).map_err(|e| Self::open_error(&*storage, e))?;
        let inner = Self::finish_open(storage, Catalog::writable(db), options, Some(lock))?;
        inner.remove_unlisted_files()?;
        Index::start(inner)
    }

    /// Opens an existing index read-only, alongside a writer in another
    /// process if there is one; [`Index::reload`] picks up its later commits.
    ///
    /// # Errors
    /// As [`Index::open`], except that it is never [`IndexError::Locked`].
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Index, IndexError> {
        Self::open_read_only_in(Arc::new(FsStorage::new(dir.as_ref())))
    }

    /// [`Index::open_read_only`] in any [`Storage`].
    ///
    /// # Errors
    /// As [`Index::open_read_only`].
    pub fn open_read_only_in(storage: Arc<dyn Storage>) -> Result<Index, IndexError> {
        Self::check_is_index(&*storage)?;
        let db = storage.open_catalog_read_only(CATALOG_FILE).map_err(|e| Self::open_error(&*storage, e))?;
        Index::start(Self::finish_open(storage, Catalog::ReadOnly(db), IndexOptions::default(), None)?)
    }

    fn check_is_index(storage: &dyn Storage) -> Result<(), IndexError> {
        let location = storage.location();
        match storage.exists(CATALOG_FILE) {
            Ok(true) => Ok(()),
            Ok(false) => Err(IndexError::NotAnIndex { path: location.to_owned() }),
            Err(e) => Err(IndexError::io(format!("examining {}", location.display()))(e)),
        }
    }

    /// Opens an index for writing and checks that it was created with
    /// `expected`.
    ///
    /// # Errors
    /// [`IndexError::ConfigMismatch`] when it was not; otherwise as
    /// [`Index::open`].
    pub fn open_expecting(dir: impl AsRef<Path>, expected: &SignatureConfig) -> Result<Index, IndexError> {
        let index = Self::open(dir)?;
        if index.config() != expected {
            return Err(IndexError::ConfigMismatch);
        }
        Ok(index)
    }

    fn open_error(storage: &dyn Storage, e: redb::DatabaseError) -> IndexError {
        match e {
            redb::DatabaseError::DatabaseAlreadyOpen => IndexError::Locked { path: storage.location().to_owned() },
            other => IndexError::catalog("opening the catalog")(other.into()),
        }
    }

    fn finish_open(
        storage: Arc<dyn Storage>,
        catalog: Catalog,
        options: IndexOptions,
        lock: Option<Box<dyn std::fmt::Debug + Send + Sync>>,
    ) -> Result<Inner, IndexError> {
        let txn = catalog.begin_read()?;
        let meta = txn.open_table(META).map_err(redb_err("opening meta"))?;
        let format = meta.get("format").map_err(redb_err("reading meta"))?.map(|v| v.value().to_vec());
        let format = format
            .and_then(|b| b.as_slice().try_into().ok().map(u32::from_le_bytes))
            .ok_or_else(|| IndexError::corrupted(CATALOG_FILE, "meta", 0, "format version missing"))?;
        if !(CATALOG_VERSION_MIN..=CATALOG_VERSION).contains(&format) {
            return Err(IndexError::Incompatible {
                what: "catalog",
                found: format,
                supported: CATALOG_VERSION_MIN..=CATALOG_VERSION,
            });
        }
        let config_bytes = meta.get("config").map_err(redb_err("reading meta"))?.map(|v| v.value().to_vec());
        let config_bytes =
            config_bytes.ok_or_else(|| IndexError::corrupted(CATALOG_FILE, "meta", 0, "configuration missing"))?;
        let config = SignatureConfig::decode(&config_bytes).map_err(IndexError::ConfigDecode)?;
        let signer = Signer::new(config)?;
        drop((meta, txn));
        if format < CATALOG_VERSION {
            if let Catalog::Writable(db) = &catalog {
                upgrade_catalog(&db.read().unwrap_or_else(|p| p.into_inner()))?;
            }
        }
        let state = load_latest(&catalog, &*storage, &State::default())?;
        Ok(Inner::new(storage, catalog, signer, options, state, lock))
    }
}

impl Inner {
    /// Removes segment files the manifest does not list and temporary files.
    fn remove_unlisted_files(&self) -> Result<(), IndexError> {
        let listed: BTreeSet<u64> = self.current().segments.keys().copied().collect();
        let location = self.storage.location();
        let names = self.storage.list().map_err(IndexError::io(format!("listing {}", location.display())))?;
        for name in names {
            let stale = name.ends_with(".tmp") || catalog::segment_id_of(&name).is_some_and(|id| !listed.contains(&id));
            if stale {
                self.storage.remove(&name).map_err(IndexError::io(format!("removing {name}")))?;
            }
        }
        Ok(())
    }

    fn current(&self) -> Arc<State> {
        match self.state.read() {
            Ok(guard) => Arc::clone(&guard),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }
}

impl Index {
    /// The index directory (for an index in memory, a label).
    pub fn dir(&self) -> &Path {
        self.inner.storage.location()
    }

    /// The signature configuration the index was created with.
    pub fn config(&self) -> &SignatureConfig {
        self.inner.signer.config()
    }

    /// The signer of this index's configuration.
    pub fn signer(&self) -> &Signer {
        &self.inner.signer
    }

    /// The writer. Only one exists at a time per open index; a second call
    /// waits for the first writer to commit or be dropped.
    ///
    /// # Errors
    /// [`IndexError::ReadOnly`] for a read-only index; catalog errors.
    pub fn writer(&self) -> Result<Writer<'_>, IndexError> {
        self.writer_of(false)
    }

    /// A writer for loading many documents at once (an archive, a
    /// crawl's batch): its commit writes the documents it inserted straight
    /// to a new segment of their own, by the flush protocol, instead of to
    /// the catalog's pending table. They are never pending, so they are
    /// written once instead of twice (catalog, then segment), and the
    /// commit builds no in-memory index of them. It is otherwise a
    /// [`Writer`]: the same checks, the same outcomes, deletes and
    /// replacements in the same transaction, and the same guarantee (`Ok`
    /// from [`Writer::commit`] means durable).
    ///
    /// The commit costs a segment build and an `fsync` more, so a bulk
    /// writer pays for batches of many documents (say ten thousand and
    /// more): small ones make small segments, which the tiered merge policy
    /// then merges. Merges follow its commit as they follow a flush.
    ///
    /// # Errors
    /// As [`Index::writer`].
    pub fn bulk_writer(&self) -> Result<Writer<'_>, IndexError> {
        self.writer_of(true)
    }

    fn writer_of(&self, bulk: bool) -> Result<Writer<'_>, IndexError> {
        let guard = lock(&self.inner.writer_lock);
        let txn = self.inner.catalog.begin_write()?;
        let next_doc_id = {
            let meta = txn.open_table(META).map_err(redb_err("opening meta"))?;
            meta_u64(&meta, "next_doc_id")?
        };
        Ok(Writer {
            index: self,
            txn: Some(txn),
            guard: Some(guard),
            next_doc_id,
            added: BTreeMap::new(),
            added_fingerprints: DeltaFingerprints::default(),
            added_index: None,
            removed_pending: DeletedIds::new(),
            newly_deleted: DeletedIds::new(),
            newly_deleted_per_segment: BTreeMap::new(),
            bulk,
            buffers: PairBuffers::default(),
        })
    }

    /// A snapshot for reading. It stays valid and unchanged while the
    /// writer inserts, commits and flushes.
    ///
    /// # Errors
    /// Catalog errors.
    pub fn searcher(&self) -> Result<Searcher, IndexError> {
        // Holding the state lock while beginning the read transaction pairs
        // them: commits publish both under the write lock. A read-only
        // index uses the transaction its state was loaded from.
        let guard = self.inner.state.read().unwrap_or_else(|p| p.into_inner());
        let txn = match &guard.pinned {
            Some(txn) => Arc::clone(txn),
            None => Arc::new(self.inner.catalog.begin_read()?),
        };
        Ok(Searcher { state: Arc::clone(&guard), txn, signer: Arc::clone(&self.inner.signer) })
    }

    /// Re-reads the catalog: a read-only index sees the writer's commits
    /// made since it was opened or last reloaded.
    ///
    /// # Errors
    /// Catalog errors, [`IndexError::Corrupted`] for damaged segments.
    pub fn reload(&self) -> Result<(), IndexError> {
        let mut guard = self.inner.state.write().unwrap_or_else(|p| p.into_inner());
        let fresh = load_latest(&self.inner.catalog, &*self.inner.storage, &guard)?;
        *guard = Arc::new(fresh);
        *lock(&self.inner.delta_fingerprints) = None;
        Ok(())
    }

    /// The error of the last flush or merge a commit ran, if it failed
    /// (`None` once one succeeds; a later "reopen required" keeps the error
    /// that caused it). With background maintenance, flushes and merges
    /// run on threads of their own and keep an outcome each: the flush
    /// thread's error comes first, unless it is a "reopen required" that
    /// the merge thread's error caused (a merge that hit a full disk leaves
    /// the catalog unusable, and the next flush says so). The commit itself
    /// stood; its documents stay pending until a flush succeeds.
    pub fn maintenance_error(&self) -> Option<String> {
        let flush = lock(&self.inner.maintenance_error);
        let merge = lock(&self.inner.merge_error);
        let cause = match (flush.as_ref(), merge.as_ref()) {
            (Some(IndexError::ReopenRequired { .. }), Some(merge)) => Some(merge),
            (flush, merge) => flush.or(merge),
        };
        cause.map(ToString::to_string)
    }

    /// Counts describing the index now, from the segments' document
    /// entries, not their vectors (0.08 s from a cold page cache for the
    /// 1M word-3-shingle index of README's comparison, whose vectors are
    /// 4.8 GB).
    ///
    /// # Errors
    /// Catalog and I/O errors; [`IndexError::Corrupted`] for a damaged
    /// document entry.
    pub fn stats(&self) -> Result<IndexStats, IndexError> {
        self.searcher()?.stats(&*self.inner.storage)
    }

    /// Checks every checksum and cross-checks the manifest, the catalog and
    /// the segments.
    ///
    /// # Errors
    /// The first problem found: [`IndexError::Corrupted`] naming the file,
    /// section and offset, or an I/O or catalog error.
    pub fn verify(&self) -> Result<(), IndexError> {
        let searcher = self.searcher()?;
        let txn = &searcher.txn;
        let manifest = txn.open_table(MANIFEST).map_err(redb_err("opening manifest"))?;
        let mut per_segment: BTreeMap<u64, u64> = BTreeMap::new();
        // Each segment's fingerprints by ordinal (`None` before format 4).
        let mut segment_fingerprints: BTreeMap<u64, Option<Vec<Fingerprint>>> = BTreeMap::new();
        for row in manifest.iter().map_err(redb_err("reading manifest"))? {
            let (id, raw) = row.map_err(redb_err("reading manifest"))?;
            let (id, record) = (id.value(), SegmentRecord::decode(raw.value(), id.value())?);
            let name = segment_file_name(id);
            // The snapshot's own map of the file: a merge that ends after the
            // snapshot was taken unlinks the files it replaced, which the
            // snapshot's maps keep readable (and its manifest still lists).
            let mapped;
            let bytes = match searcher.state.segments.get(&id) {
                Some(loaded) => loaded.segment.file_bytes(),
                None => {
                    mapped = self.inner.storage.map(&name).map_err(IndexError::io(format!("reading {name}")))?;
                    mapped.as_ref()
                }
            };
            if bytes.len() as u64 != record.byte_len || crc32fast::hash(bytes) != record.file_crc {
                return Err(IndexError::corrupted(&name, "file", 0, "size or checksum differs from the manifest"));
            }
            let segment = Segment::parse(bytes, &name)?;
            segment.verify()?;
            if segment.id() != id || segment.doc_count() != record.doc_count {
                return Err(IndexError::corrupted(
                    &name,
                    "header",
                    16,
                    "id or document count differs from the manifest",
                ));
            }
            per_segment.insert(id, 0);
            segment_fingerprints.insert(id, segment.fingerprints()?);
        }
        let keys = txn.open_table(KEYS).map_err(redb_err("opening keys"))?;
        let docs = txn.open_table(DOCS).map_err(redb_err("opening docs"))?;
        let pending = txn.open_table(PENDING).map_err(redb_err("opening pending"))?;
        let deleted = txn.open_table(DELETED).map_err(redb_err("opening deleted"))?;
        let fingerprints = txn.open_multimap_table(FINGERPRINTS).map_err(redb_err("opening fingerprints"))?;
        let bad = |table: &'static str, id: u64, reason: &str| IndexError::corrupted(CATALOG_FILE, table, id, reason);
        let mut pending_docs = 0u64;
        for row in docs.iter().map_err(redb_err("reading docs"))? {
            let (id, raw) = row.map_err(redb_err("reading docs"))?;
            let id = id.value();
            let record = DocRecord::decode(raw.value(), id)?;
            if keys.get(record.key.as_str()).map_err(redb_err("reading keys"))?.map(|v| v.value()) != Some(id) {
                return Err(bad("keys", id, "document's key does not map back to it"));
            }
            let listed = || -> Result<bool, IndexError> {
                let mut found = false;
                for entry in fingerprints.get(record.fingerprint.0).map_err(redb_err("reading fingerprints"))? {
                    found |= entry.map_err(redb_err("reading fingerprints"))?.value() == id;
                }
                Ok(found)
            };
            let holders = searcher.segments_holding(id)?;
            match pending.get(id).map_err(redb_err("reading pending"))? {
                Some(raw) => {
                    let pending_record = PendingRecord::decode(raw.value(), id)?;
                    pending_docs += 1;
                    if !holders.is_empty() {
                        return Err(bad("pending", id, "document is both pending and in a segment"));
                    }
                    if pending_record.fingerprint.is_some_and(|f| f != record.fingerprint) {
                        return Err(bad("pending", id, "fingerprint differs from the document's"));
                    }
                }
                None => match holders.as_slice() {
                    [segment] => {
                        *per_segment.entry(*segment).or_default() += 1;
                        // A segment's fingerprint must be the document's; a
                        // segment without them needs the catalog table to
                        // list the document.
                        let stored = match segment_fingerprints.get(segment) {
                            Some(Some(by_ordinal)) => {
                                let loaded = &searcher.state.segments[segment];
                                let ordinal = loaded.segment.ordinal_of(id)?;
                                Some(ordinal.and_then(|o| by_ordinal.get(o as usize).copied()))
                            }
                            _ => None,
                        };
                        match stored {
                            Some(stored) if stored != Some(record.fingerprint) => {
                                return Err(bad("docs", id, "fingerprint differs from its segment's"));
                            }
                            None if !listed()? => {
                                return Err(bad("fingerprints", id, "document missing from the fingerprint table"));
                            }
                            _ => {}
                        }
                    }
                    [] => return Err(bad("docs", id, "document is neither pending nor in a segment")),
                    _ => return Err(bad("docs", id, "document is in more than one segment")),
                },
            }
        }
        // The fingerprint table lists live documents under their own
        // fingerprints only.
        for row in fingerprints.iter().map_err(redb_err("reading fingerprints"))? {
            let (fingerprint, ids) = row.map_err(redb_err("reading fingerprints"))?;
            for id in ids {
                let id = id.map_err(redb_err("reading fingerprints"))?.value();
                let raw = docs.get(id).map_err(redb_err("reading docs"))?.map(|v| v.value().to_vec());
                let record = raw.map(|raw| DocRecord::decode(&raw, id)).transpose()?;
                if record.is_none_or(|r| r.fingerprint.0 != fingerprint.value()) {
                    return Err(bad("fingerprints", id, "lists a document that is not live with that fingerprint"));
                }
            }
        }
        if pending.len().map_err(redb_err("reading pending"))? != pending_docs {
            return Err(bad("pending", 0, "vectors of documents that do not exist"));
        }
        if keys.len().map_err(redb_err("reading keys"))? != docs.len().map_err(redb_err("reading docs"))? {
            return Err(bad("keys", 0, "keys and documents differ in number"));
        }
        let mut deleted_per_segment: BTreeMap<u64, u32> = BTreeMap::new();
        for row in deleted.iter().map_err(redb_err("reading deleted"))? {
            let (id, segment_id) = row.map_err(redb_err("reading deleted"))?;
            let count = per_segment
                .get_mut(&segment_id.value())
                .ok_or_else(|| bad("deleted", id.value(), "unlisted segment"))?;
            *count += 1;
            *deleted_per_segment.entry(segment_id.value()).or_default() += 1;
        }
        // What the merge policy weighs, kept in memory since the open.
        if deleted_per_segment != *searcher.state.deleted_per_segment {
            return Err(bad("deleted", 0, "deleted documents per segment differ from the open index's counts"));
        }
        for (id, count) in per_segment {
            let expected = searcher.state.segments.get(&id).map_or(0, |s| u64::from(s.segment.doc_count()));
            if count != expected {
                return Err(bad("manifest", id, "segment's documents are not all accounted for"));
            }
        }
        Ok(())
    }
}

/// Upgrades a catalog of an older format version to this build's
/// (FORMAT.md §5, §6.1) in one commit. Versions 2 and 3 only relax what
/// the versions before require of their data (version 2: the
/// `fingerprints` table need not list every live document, a pending
/// record may end with its fingerprint; version 3: a document record may
/// be of record version 2), so an older catalog is a valid one of today's
/// version: the upgrade writes the new version number, which keeps older
/// builds from trusting a table this build no longer keeps complete or
/// from meeting records they cannot read.
fn upgrade_catalog(db: &redb::Database) -> Result<(), IndexError> {
    let txn = db.begin_write().map_err(redb_err("beginning a write"))?;
    {
        let mut meta = txn.open_table(META).map_err(redb_err("opening meta"))?;
        meta.insert("format", CATALOG_VERSION.to_le_bytes().as_slice()).map_err(redb_err("writing meta"))?;
    }
    txn.commit().map_err(redb_err("committing the catalog upgrade"))
}

fn open_segment(storage: &dyn Storage, id: u64) -> Result<LoadedSegment, IndexError> {
    let name = segment_file_name(id);
    let bytes = storage.map(&name).map_err(IndexError::io(format!("opening {name}")))?;
    Ok(LoadedSegment { segment: Segment::parse(bytes, &name)? })
}

/// [`open_segment`] for a segment this writer just wrote: its key directory
/// is built now, while the file's pages are in the page cache, so that no
/// query after a flush or merge pays for it (an index opened from disk
/// builds each directory at its segment's first look-up instead, keeping
/// the open fast and small).
fn open_written_segment(storage: &dyn Storage, id: u64) -> Result<LoadedSegment, IndexError> {
    let loaded = open_segment(storage, id)?;
    loaded.segment.prepare_lookups();
    loaded.segment.prepare_fingerprint_lookups();
    Ok(loaded)
}

/// The state of the latest commit, reusing `old`'s mapped segments. A
/// read-only index pins the read transaction it used. A writer in another
/// process may merge segments away and unlink them between our read
/// transaction's start and our opening their files; it commits the new
/// manifest before unlinking, so a newer read transaction no longer lists
/// them: a missing segment file is retried with one (a few times) before it
/// counts as an error.
fn load_latest(catalog: &Catalog, storage: &dyn Storage, old: &State) -> Result<State, IndexError> {
    let mut retries = 0;
    loop {
        let txn = catalog.begin_read()?;
        match load_state_reusing(storage, &txn, old) {
            Err(IndexError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound
                    && matches!(catalog, Catalog::ReadOnly(_))
                    && retries < 8 =>
            {
                retries += 1;
            }
            Err(e) => return Err(e),
            Ok(mut state) => {
                if matches!(catalog, Catalog::ReadOnly(_)) {
                    state.pinned = Some(Arc::new(txn));
                }
                return Ok(state);
            }
        }
    }
}

/// Reads the published state from the catalog, keeping already-mapped
/// segments that are still listed.
fn load_state_reusing(storage: &dyn Storage, txn: &redb::ReadTransaction, old: &State) -> Result<State, IndexError> {
    let manifest = txn.open_table(MANIFEST).map_err(redb_err("opening manifest"))?;
    let mut segments = BTreeMap::new();
    for row in manifest.iter().map_err(redb_err("reading manifest"))? {
        let (id, _) = row.map_err(redb_err("reading manifest"))?;
        let id = id.value();
        let loaded = match old.segments.get(&id) {
            Some(s) => Arc::clone(s),
            None => Arc::new(open_segment(storage, id)?),
        };
        segments.insert(id, loaded);
    }
    let pending = txn.open_table(PENDING).map_err(redb_err("opening pending"))?;
    let docs = txn.open_table(DOCS).map_err(redb_err("opening docs"))?;
    let mut delta = BTreeMap::new();
    for row in pending.iter().map_err(redb_err("reading pending"))? {
        let (id, raw) = row.map_err(redb_err("reading pending"))?;
        let id = id.value();
        let record = PendingRecord::decode(raw.value(), id)?;
        // A record of catalog format 1 has no fingerprint: its document's has.
        let fingerprint = match record.fingerprint {
            Some(fingerprint) => fingerprint,
            None => {
                let raw = docs.get(id).map_err(redb_err("reading docs"))?.map(|v| v.value().to_vec());
                let raw = raw.ok_or_else(|| IndexError::corrupted(CATALOG_FILE, "pending", id, "no such document"))?;
                DocRecord::decode(&raw, id)?.fingerprint
            }
        };
        let doc = DeltaDoc { vector: record.vector, band_keys: record.band_keys, fingerprint };
        delta.insert(id, Arc::new(doc));
    }
    let deleted_table = txn.open_table(DELETED).map_err(redb_err("opening deleted"))?;
    let mut deleted = DeletedIds::new();
    let mut deleted_per_segment = BTreeMap::new();
    for row in deleted_table.iter().map_err(redb_err("reading deleted"))? {
        let (id, segment) = row.map_err(redb_err("reading deleted"))?;
        deleted.insert(id.value());
        *deleted_per_segment.entry(segment.value()).or_insert(0u32) += 1;
    }
    Ok(State {
        segments,
        delta_index: DeltaIndex::shared(&delta),
        delta: Arc::new(delta::PendingDocs::from(delta)),
        deleted: Arc::new(deleted),
        deleted_per_segment: Arc::new(deleted_per_segment),
        ranks: Arc::default(),
        segment_masks: Arc::default(),
        pinned: None,
    })
}

/// The signature of a document to store: computed for text and HTML,
/// borrowed when the caller computed it.
fn sign_document<'d>(signer: &Signer, document: Document<'d>) -> std::borrow::Cow<'d, DocumentSignature> {
    match document {
        Document::Text(text) => std::borrow::Cow::Owned(signer.sign_text(text)),
        Document::Html(html) => std::borrow::Cow::Owned(signer.sign_html(html)),
        Document::Signatures(s) => std::borrow::Cow::Borrowed(s),
    }
}

/// The single writer of an index. Inserts and deletes are staged in one
/// catalog transaction; [`Writer::commit`] makes them durable and visible
/// together. Dropping a writer without committing discards its changes.
pub struct Writer<'a> {
    index: &'a Index,
    txn: Option<redb::WriteTransaction>,
    /// The writer lock, held until the writer commits or drops.
    guard: Option<MutexGuard<'a, ()>>,
    next_doc_id: u64,
    added: BTreeMap<u64, Arc<DeltaDoc>>,
    /// The fingerprints of `added` (and of staged documents deleted since).
    added_fingerprints: DeltaFingerprints,
    /// The postings of `added`, for [`Writer::insert_if_new`]'s pruned
    /// query of the staged documents: built at its first call, then every
    /// insert queues its document (ids unstaged since are looked up in
    /// `added` and skipped).
    added_index: Option<DeltaIndex>,
    /// Pending documents this writer deleted, and segment documents: sets,
    /// since every staged document's exact-duplicate check asks whether
    /// its matches are among them (a list made a bulk replacement of
    /// unchanged pages quadratic).
    removed_pending: DeletedIds,
    newly_deleted: DeletedIds,
    /// How many of `newly_deleted` each segment holds, by segment id.
    newly_deleted_per_segment: BTreeMap<u64, u32>,
    /// A bulk writer ([`Index::bulk_writer`]): `added` goes to a segment at
    /// the commit, never to the pending table.
    bulk: bool,
    /// A bulk writer's buffers for its segment's posting table, handed on
    /// to the next writer by [`Writer::commit_and_continue`] (empty until
    /// a bulk commit fills them).
    buffers: PairBuffers,
}

impl std::fmt::Debug for Writer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("staged_inserts", &self.added.len()).finish_non_exhaustive()
    }
}

impl<'a> Writer<'a> {
    fn txn(&self) -> Result<&redb::WriteTransaction, IndexError> {
        self.txn.as_ref().ok_or(IndexError::ReadOnly)
    }

    /// Stores a new document under `key`.
    ///
    /// # Errors
    /// [`IndexError::DuplicateKey`] when `key` is taken; catalog errors.
    pub fn insert(
        &mut self,
        key: &str,
        document: Document<'_>,
        metadata: Metadata,
    ) -> Result<InsertOutcome, IndexError> {
        self.insert_staged(key, document, metadata, true)
    }

    /// Stores a document under `key`, replacing the one stored there if any.
    ///
    /// # Errors
    /// Catalog errors.
    pub fn replace(
        &mut self,
        key: &str,
        document: Document<'_>,
        metadata: Metadata,
    ) -> Result<InsertOutcome, IndexError> {
        self.delete(key)?;
        self.insert_staged(key, document, metadata, false)
    }

    /// What the catalog holds about document `id` as this writer sees it:
    /// committed documents and those it staged, less those it deleted (the
    /// ids [`Writer::insert_if_new`] and [`InsertOutcome`] name).
    ///
    /// # Errors
    /// Catalog errors, [`IndexError::Corrupted`].
    pub fn describe(&self, id: u64) -> Result<Option<DocumentInfo>, IndexError> {
        document_info(&self.txn()?.open_table(DOCS).map_err(redb_err("opening docs"))?, id)
    }

    fn lookup(&self, key: &str) -> Result<Option<u64>, IndexError> {
        let keys = self.txn()?.open_table(KEYS).map_err(redb_err("opening keys"))?;
        let id = keys.get(key).map_err(redb_err("reading keys"))?.map(|v| v.value());
        Ok(id)
    }

    /// One insert; `key_must_be_free` unless the caller freed it.
    fn insert_staged(
        &mut self,
        key: &str,
        document: Document<'_>,
        metadata: Metadata,
        key_must_be_free: bool,
    ) -> Result<InsertOutcome, IndexError> {
        let signature = sign_document(&self.index.inner.signer, document);
        self.stage_one(key, signature, metadata, key_must_be_free)
    }

    /// [`Writer::stage`] of one signed document.
    fn stage_one(
        &mut self,
        key: &str,
        signature: std::borrow::Cow<'_, DocumentSignature>,
        metadata: Metadata,
        key_must_be_free: bool,
    ) -> Result<InsertOutcome, IndexError> {
        let mut outcomes = self.stage([(key, signature, metadata)], key_must_be_free)?;
        Ok(outcomes.remove(0))
    }

    /// [`Writer::insert`] of signatures the writer takes: they are moved
    /// into the staged document instead of copied, for a pipeline that
    /// signs elsewhere ([`Signer`], with the index's configuration) and has
    /// no further use for them.
    ///
    /// # Errors
    /// As [`Writer::insert`].
    pub fn insert_signed(
        &mut self,
        key: &str,
        signature: DocumentSignature,
        metadata: Metadata,
    ) -> Result<InsertOutcome, IndexError> {
        self.stage_one(key, std::borrow::Cow::Owned(signature), metadata, true)
    }

    /// [`Writer::insert_batch`] of signatures the writer takes, as
    /// [`Writer::insert_signed`].
    ///
    /// # Errors
    /// As [`Writer::insert`].
    pub fn insert_batch_signed<K: AsRef<str>>(
        &mut self,
        documents: impl IntoIterator<Item = (K, DocumentSignature, Metadata)>,
    ) -> Result<Vec<InsertOutcome>, IndexError> {
        self.stage(documents.into_iter().map(|(k, s, m)| (k, std::borrow::Cow::Owned(s), m)), true)
    }

    /// Stores new documents, as [`Writer::insert`] for each in turn, but
    /// opening the catalog tables once for all of them: the call for a
    /// batch. The first error stops it; the documents before it stay
    /// staged, as after that many `insert` calls.
    ///
    /// # Errors
    /// As [`Writer::insert`].
    pub fn insert_batch<'d, K: AsRef<str>>(
        &mut self,
        documents: impl IntoIterator<Item = (K, Document<'d>, Metadata)>,
    ) -> Result<Vec<InsertOutcome>, IndexError> {
        let index = self.index;
        self.stage(documents.into_iter().map(|(k, d, m)| (k, sign_document(&index.inner.signer, d), m)), true)
    }

    /// Stages signed documents (signed here, handed in, or taken) with the
    /// catalog tables opened once: an outcome each, or the first error.
    fn stage<'d, K: AsRef<str>>(
        &mut self,
        documents: impl IntoIterator<Item = (K, std::borrow::Cow<'d, DocumentSignature>, Metadata)>,
        key_must_be_free: bool,
    ) -> Result<Vec<InsertOutcome>, IndexError> {
        let txn = self.txn.as_ref().ok_or(IndexError::ReadOnly)?;
        let mut tables = InsertTables::open(txn)?;
        let committed = CommittedDuplicates::of(self.index, &self.removed_pending, &self.newly_deleted);
        let mut outcomes = Vec::new();
        for (key, signature, metadata) in documents {
            let staging = Staging {
                bulk: self.bulk,
                next_doc_id: &mut self.next_doc_id,
                added: &mut self.added,
                added_fingerprints: &mut self.added_fingerprints,
                added_index: &mut self.added_index,
                committed: &committed,
            };
            outcomes.push(staging.insert(&mut tables, key.as_ref(), signature, metadata, key_must_be_free)?);
        }
        Ok(outcomes)
    }

    /// The crawler's call: inserts the document unless a stored or staged
    /// document is at least `tau` similar to it, atomically with respect to
    /// other inserts (this writer is the only one). Returns the new
    /// document's outcome, or the matches that prevented the insert.
    ///
    /// # Errors
    /// [`IndexError::DuplicateKey`] when `key` is taken; catalog and
    /// corruption errors.
    pub fn insert_if_new(
        &mut self,
        key: &str,
        document: Document<'_>,
        metadata: Metadata,
        tau: Threshold,
    ) -> Result<InsertIfNew, IndexError> {
        let signature = sign_document(&self.index.inner.signer, document);
        let stored = self.index.searcher()?.query(&signature.vector, tau)?;
        self.insert_unless_matched(key, &signature, metadata, tau, stored)
    }

    /// [`Writer::insert_if_new`] for many documents, in order: each is
    /// inserted unless a stored or staged document, or one inserted before
    /// it in this batch, is at least `tau` similar. The results are those
    /// of one `insert_if_new` call per document, in order (a key already
    /// taken is its document's [`IndexError::DuplicateKey`], and the batch
    /// goes on); another error is its document's result and ends the
    /// batch, leaving later documents untried (and out of the results).
    /// The documents are signed, and queried against the committed index,
    /// on every core; what was staged, in this batch or before it, is
    /// checked one document after another.
    pub fn insert_batch_if_new<'d, K: AsRef<str> + Sync>(
        &mut self,
        documents: impl IntoIterator<Item = (K, Document<'d>, Metadata)>,
        tau: Threshold,
    ) -> Vec<Result<InsertIfNew, IndexError>> {
        use rayon::prelude::*;
        let documents: Vec<(K, Document<'d>, Metadata)> = documents.into_iter().collect();
        if documents.is_empty() {
            return Vec::new();
        }
        let signer = &self.index.inner.signer;
        let searcher = match self.index.searcher() {
            Ok(searcher) => searcher,
            Err(e) => return vec![Err(e)],
        };
        // What the committed index holds does not change while this
        // writer stages: every document's stored matches at once.
        let queried: Vec<_> = documents
            .par_iter()
            .map(|(_, document, _)| {
                let signature = sign_document(signer, *document);
                let stored = searcher.query(&signature.vector, tau);
                (signature, stored)
            })
            .collect();
        // Room for the batch in the staged postings, which would otherwise
        // grow (moving every key) as its documents are inserted.
        let keys = queried.iter().map(|(signature, _)| signature.vector.hashes().len()).sum();
        Self::staged_index(&mut self.added_index, &self.added).reserve(documents.len(), keys);
        let mut results = Vec::with_capacity(documents.len());
        for ((key, _, metadata), (signature, stored)) in documents.into_iter().zip(queried) {
            let result =
                stored.and_then(|stored| self.insert_unless_matched(key.as_ref(), &signature, metadata, tau, stored));
            let ends = matches!(&result, Err(e) if !matches!(e, IndexError::DuplicateKey { .. }));
            results.push(result);
            if ends {
                break;
            }
        }
        results
    }

    /// The rest of [`Writer::insert_if_new`], given the committed index's
    /// matches: those this writer deleted are dropped, the staged documents
    /// are queried, and the document is inserted when nothing matched.
    fn insert_unless_matched(
        &mut self,
        key: &str,
        signature: &DocumentSignature,
        metadata: Metadata,
        tau: Threshold,
        stored: Vec<Match>,
    ) -> Result<InsertIfNew, IndexError> {
        // Committed documents, less those this writer deleted, plus those it
        // staged.
        let mut matches: Vec<Match> = stored
            .into_iter()
            .filter(|m| !self.newly_deleted.contains(m.id) && !self.removed_pending.contains(m.id))
            .collect();
        let measure = self.index.config().similarity;
        let staged = Self::staged_index(&mut self.added_index, &self.added);
        matches.extend(query::query_staged(&self.added, staged.listed(), &signature.vector, measure, tau));
        if !matches.is_empty() {
            matches.sort_unstable_by_key(|m| m.id);
            return Ok(InsertIfNew::Matches(matches));
        }
        Ok(InsertIfNew::Inserted(self.insert(key, Document::Signatures(signature), metadata)?))
    }

    /// The postings of the staged documents `added` (built at the first
    /// call into `index`).
    fn staged_index<'i>(index: &'i mut Option<DeltaIndex>, added: &BTreeMap<u64, Arc<DeltaDoc>>) -> &'i mut DeltaIndex {
        index.get_or_insert_with(|| {
            let mut index = DeltaIndex::without_bands();
            index.queue(added);
            index
        })
    }

    /// Deletes the document stored under `key`; returns whether there was
    /// one.
    ///
    /// # Errors
    /// Catalog errors, [`IndexError::Corrupted`] for a damaged record.
    pub fn delete(&mut self, key: &str) -> Result<bool, IndexError> {
        let Some(id) = self.lookup(key)? else { return Ok(false) };
        let txn = self.txn.as_ref().ok_or(IndexError::ReadOnly)?;
        txn.open_table(KEYS).map_err(redb_err("opening keys"))?.remove(key).map_err(redb_err("writing keys"))?;
        let mut docs = txn.open_table(DOCS).map_err(redb_err("opening docs"))?;
        let raw = docs.remove(id).map_err(redb_err("writing docs"))?.map(|v| v.value().to_vec());
        let raw = raw.ok_or_else(|| IndexError::corrupted(CATALOG_FILE, "keys", id, "key names a missing document"))?;
        let record = DocRecord::decode(&raw, id)?;
        let mut fingerprints = txn.open_multimap_table(FINGERPRINTS).map_err(redb_err("opening fingerprints"))?;
        fingerprints.remove(record.fingerprint.0, id).map_err(redb_err("writing fingerprints"))?;
        let was_pending = {
            let mut pending = txn.open_table(PENDING).map_err(redb_err("opening pending"))?;
            let removed = pending.remove(id).map_err(redb_err("writing pending"))?;
            removed.is_some()
        };
        // A document this writer staged (a bulk writer's has no pending
        // record) is simply unstaged.
        if self.added.remove(&id).is_some() {
            return Ok(true);
        }
        if was_pending {
            self.removed_pending.insert(id);
            return Ok(true);
        }
        // Flushes and merges need the writer lock, which this writer holds:
        // the published segment list is the one the catalog describes.
        let state = self.index.inner.current();
        let mut holder = None;
        for (&segment_id, loaded) in &state.segments {
            if loaded.segment.ordinal_of(id)?.is_some() {
                holder = Some(segment_id);
            }
        }
        let holder = holder.ok_or_else(|| {
            IndexError::corrupted(CATALOG_FILE, "docs", id, "document is neither pending nor in a segment")
        })?;
        txn.open_table(DELETED)
            .map_err(redb_err("opening deleted"))?
            .insert(id, holder)
            .map_err(redb_err("writing deleted"))?;
        self.newly_deleted.insert(id);
        *self.newly_deleted_per_segment.entry(holder).or_insert(0) += 1;
        Ok(true)
    }

    /// Makes every staged change durable (one redb commit) and visible to
    /// new searchers; flushes the delta to a segment when it has reached the
    /// index's flush threshold (or, with background maintenance, asks the
    /// index's thread to). Returns the number of pending documents after the
    /// commit (and an inline flush).
    ///
    /// `Ok` means acknowledged: the changes are durable. The flush (and
    /// merge) that may follow is maintenance: if it fails (a full disk, say)
    /// the commit still stands, the documents stay pending, the next commit
    /// tries again, and [`Index::maintenance_error`] tells what went wrong.
    ///
    /// # Errors
    /// Catalog and I/O errors ([`IndexError::DiskFull`] among them) of the
    /// commit itself: nothing staged was acknowledged. As after a crash
    /// during a commit, the changes may still have landed (redb frees pages
    /// after its commit point, and an I/O error there fails the call): after
    /// reopening, a key looked up tells which.
    pub fn commit(self) -> Result<usize, IndexError> {
        self.commit_keeping_buffers().map(|(pending, _)| pending)
    }

    /// [`Writer::commit`], then the next writer of the same kind (a bulk
    /// writer after a bulk writer), for a load that commits batch after
    /// batch. The writer lock is let go between the two, as when a new
    /// writer is asked for. A bulk writer hands on the buffers its segment's
    /// posting table was gathered in (up to 384 MiB for a batch of 200,000
    /// word-3-shingle pages) and those of its file's largest sections
    /// (about 700 MB more), so each batch after the first reuses them
    /// instead of faulting in fresh memory; they are freed when the last
    /// writer of the chain commits or is dropped.
    ///
    /// # Errors
    /// As [`Writer::commit`], then as [`Index::writer`]: an error from
    /// either means no next writer (a commit that succeeded stays
    /// committed; [`Index::writer`] or [`Index::bulk_writer`] goes on).
    pub fn commit_and_continue(self) -> Result<(usize, Writer<'a>), IndexError> {
        let (index, bulk) = (self.index, self.bulk);
        let (pending, buffers) = self.commit_keeping_buffers()?;
        let mut next = index.writer_of(bulk)?;
        next.buffers = buffers;
        Ok((pending, next))
    }

    /// [`Writer::commit`], returning the pair buffers as well.
    fn commit_keeping_buffers(mut self) -> Result<(usize, PairBuffers), IndexError> {
        let pending = self.commit_in_place()?;
        Ok((pending, std::mem::take(&mut self.buffers)))
    }

    /// The body of [`Writer::commit`]; the writer lock is let go when the
    /// writer is dropped.
    fn commit_in_place(&mut self) -> Result<usize, IndexError> {
        let txn = self.txn.take().ok_or(IndexError::ReadOnly)?;
        {
            let mut meta = txn.open_table(META).map_err(redb_err("opening meta"))?;
            meta.insert("next_doc_id", self.next_doc_id.to_le_bytes().as_slice()).map_err(redb_err("writing meta"))?;
        }
        let index = self.index;
        // A bulk writer's documents: their segment is written and listed
        // in this transaction before it commits (the flush protocol).
        let staged = if self.bulk && !self.added.is_empty() {
            let segment = index.inner.write_staged(&self.added, &mut self.buffers)?;
            segment.list(&txn)?;
            Some(segment)
        } else {
            None
        };
        let bulk_segment = staged.is_some();
        let (pending, relisted) = {
            let mut guard = index.inner.state.write().unwrap_or_else(|p| p.into_inner());
            let staged = staged.map(maintenance::StagedSegment::committing);
            txn.commit().map_err(redb_err("committing"))?;
            // The published state is usually held by nobody else (no
            // searcher of it lives): then its maps are taken and extended in
            // place, and a commit costs its own documents, not the whole
            // delta. A searcher that holds it keeps it; the maps are copied
            // (the delta's runs shared: `PendingDocs`).
            let State {
                mut segments,
                delta,
                delta_index,
                deleted,
                deleted_per_segment,
                mut ranks,
                mut segment_masks,
                ..
            } = match Arc::try_unwrap(std::mem::take(&mut *guard)) {
                Ok(state) => state,
                Err(shared) => State {
                    segments: shared.segments.clone(),
                    delta: Arc::clone(&shared.delta),
                    delta_index: Arc::clone(&shared.delta_index),
                    deleted: Arc::clone(&shared.deleted),
                    deleted_per_segment: Arc::clone(&shared.deleted_per_segment),
                    ranks: Arc::clone(&shared.ranks),
                    segment_masks: Arc::clone(&shared.segment_masks),
                    pinned: None,
                },
            };
            let mut delta = Arc::unwrap_or_clone(delta);
            for id in &self.removed_pending {
                delta.remove(&id);
            }
            if let Some((id, loaded)) = staged {
                // The estimates of the old segment list go; its masks stay,
                // with the new segment named for every key.
                segments.insert(id, loaded);
                ranks = Arc::default();
                segment_masks = segment_masks.appended(&segments, id);
            } else {
                // (A bulk writer's documents are freed with it, after the
                // lock: the segment holds them now.)
                let added = std::mem::take(&mut self.added);
                delta_index.write().unwrap_or_else(|p| p.into_inner()).queue(&added);
                if let Some(fingerprints) = lock(&index.inner.delta_fingerprints).as_mut() {
                    for (&id, doc) in &added {
                        fingerprints.add(id, doc.fingerprint);
                    }
                }
                delta.extend(added);
            }
            // Documents removed while pending stay listed in the shared
            // index (an older snapshot may still hold them) until a flush
            // starts another; with no flush coming (a crawler replacing
            // pending pages, their number steady) it would grow without
            // bound, so past twice the pending documents the new state gets
            // an index of its own documents, listed below, after the lock.
            let (delta_index, relisted) = if DeltaIndex::outgrown(&delta_index, delta.len()) {
                *lock(&index.inner.delta_fingerprints) = None;
                let fresh = DeltaIndex::shared(delta.iter());
                (Arc::clone(&fresh), Some(fresh))
            } else {
                (delta_index, None)
            };
            let (deleted, deleted_per_segment) = if self.newly_deleted.is_empty() {
                (deleted, deleted_per_segment)
            } else {
                let mut deleted = Arc::unwrap_or_clone(deleted);
                deleted |= std::mem::take(&mut self.newly_deleted);
                let mut per_segment = Arc::unwrap_or_clone(deleted_per_segment);
                for (&segment, &count) in &self.newly_deleted_per_segment {
                    *per_segment.entry(segment).or_insert(0) += count;
                }
                (Arc::new(deleted), Arc::new(per_segment))
            };
            let pending = delta.len();
            *guard = Arc::new(State {
                segments,
                delta: Arc::new(delta),
                delta_index,
                deleted,
                deleted_per_segment,
                ranks,
                segment_masks,
                pinned: None,
            });
            (pending, relisted)
        };
        // The commit lists a fresh index's documents (the first query
        // would otherwise).
        if let Some(fresh) = relisted {
            drop(delta::read(&fresh));
        }
        // A new segment may fill a tier, and deletions may leave a segment
        // to rewrite: merges, as after a flush.
        let deleted_stored = !self.newly_deleted_per_segment.is_empty();
        if (bulk_segment || deleted_stored) && pending < index.inner.options.flush_threshold {
            match &index.worker {
                Some(worker) => worker.request(),
                None => {
                    let merged = index.inner.merge_by_policy(maintenance::WriterLock::Held);
                    maintenance::record_outcome(&index.inner.maintenance_error, merged);
                }
            }
            return Ok(pending);
        }
        if pending >= index.inner.options.flush_threshold {
            if let Some(worker) = &index.worker {
                worker.request();
                // A write stall: pending documents (memory, the catalog)
                // stay bounded when maintenance cannot keep up. The lock
                // goes first: the job needs it to install.
                if pending >= index.inner.options.flush_threshold.saturating_mul(2) {
                    drop(self.guard.take());
                    worker.wait_flushed();
                }
                return Ok(pending);
            }
            // This writer holds the writer lock: the job runs inline.
            let flushed = index.inner.flush_and_merge(maintenance::WriterLock::Held);
            let pending = index.inner.current().delta.len();
            maintenance::record_outcome(&index.inner.maintenance_error, flushed);
            return Ok(pending);
        }
        Ok(pending)
    }
}

/// The catalog tables an insert writes, opened once for a batch.
struct InsertTables<'t> {
    keys: redb::Table<'t, &'static str, u64>,
    docs: redb::Table<'t, u64, &'static [u8]>,
    pending: redb::Table<'t, u64, &'static [u8]>,
    /// The catalog's `fingerprints` table, when it lists any document (an
    /// index that had segments before format 4).
    legacy_fingerprints: Option<redb::MultimapTable<'t, u128, u64>>,
}

impl<'t> InsertTables<'t> {
    fn open(txn: &'t redb::WriteTransaction) -> Result<Self, IndexError> {
        Ok(InsertTables {
            keys: txn.open_table(KEYS).map_err(redb_err("opening keys"))?,
            docs: txn.open_table(DOCS).map_err(redb_err("opening docs"))?,
            pending: txn.open_table(PENDING).map_err(redb_err("opening pending"))?,
            legacy_fingerprints: {
                let table = txn.open_multimap_table(FINGERPRINTS).map_err(redb_err("opening fingerprints"))?;
                let empty = table.is_empty().map_err(redb_err("reading fingerprints"))?;
                (!empty).then_some(table)
            },
        })
    }
}

/// What an insert changes in its writer besides the catalog (the fields
/// are borrowed apart from the transaction the tables borrow).
struct Staging<'w> {
    /// Whether the writer is a bulk writer (no pending record).
    bulk: bool,
    next_doc_id: &'w mut u64,
    added: &'w mut BTreeMap<u64, Arc<DeltaDoc>>,
    added_fingerprints: &'w mut DeltaFingerprints,
    added_index: &'w mut Option<DeltaIndex>,
    committed: &'w CommittedDuplicates<'w>,
}

/// The writer's view of the committed documents for the exact-duplicate
/// check: the published state (stable while the writer lives: flushes and
/// merges install under the writer lock), less what the writer deleted.
struct CommittedDuplicates<'w> {
    state: Arc<State>,
    delta_fingerprints: &'w Mutex<Option<DeltaFingerprints>>,
    removed_pending: &'w DeletedIds,
    newly_deleted: &'w DeletedIds,
}

impl<'w> CommittedDuplicates<'w> {
    fn of(index: &'w Index, removed_pending: &'w DeletedIds, newly_deleted: &'w DeletedIds) -> Self {
        CommittedDuplicates {
            state: index.inner.current(),
            delta_fingerprints: &index.inner.delta_fingerprints,
            removed_pending,
            newly_deleted,
        }
    }

    /// The smallest id of a live committed document with `fingerprint`:
    /// from the pending documents' map, each segment's fingerprint section
    /// (a few probes of a mapped section), and the catalog table that lists
    /// the documents of older segments (`legacy`, when it lists any).
    fn smallest(
        &self,
        fingerprint: Fingerprint,
        legacy: Option<&redb::MultimapTable<'_, u128, u64>>,
    ) -> Result<Option<u64>, IndexError> {
        let state = &self.state;
        let mut best: Option<u64> = None;
        let mut consider = |id: u64| best = Some(best.map_or(id, |b| b.min(id)));
        {
            let mut map = lock(self.delta_fingerprints);
            let map = map.get_or_insert_with(|| DeltaFingerprints::of(state.delta.iter()));
            for &id in map.ids(fingerprint) {
                if state.delta.contains_key(&id) && !self.removed_pending.contains(id) {
                    consider(id);
                }
            }
        }
        for loaded in state.segments.values() {
            let segment = &loaded.segment;
            for ordinal in segment.fingerprint_ordinals(fingerprint) {
                let id = segment.entry(ordinal)?.id;
                if !state.deleted.contains(id) && !self.newly_deleted.contains(id) {
                    consider(id);
                }
            }
        }
        // The table lists live documents only (a delete removes its row in
        // the writer's own transaction), ascending.
        if let Some(table) = legacy {
            if let Some(entry) = table.get(fingerprint.0).map_err(redb_err("reading fingerprints"))?.next() {
                consider(entry.map_err(redb_err("reading fingerprints"))?.value());
            }
        }
        Ok(best)
    }
}

impl Staging<'_> {
    /// Stages one signed document; a key that is taken is an error when
    /// `key_must_be_free` (a replace has freed it already).
    fn insert(
        self,
        tables: &mut InsertTables<'_>,
        key: &str,
        signature: std::borrow::Cow<'_, DocumentSignature>,
        metadata: Metadata,
        key_must_be_free: bool,
    ) -> Result<InsertOutcome, IndexError> {
        // A signature made here or taken is moved into the records; one
        // handed in by reference is copied.
        let (vector, band_keys, fingerprint) = match signature {
            std::borrow::Cow::Owned(s) => (s.vector, s.band_keys, s.fingerprint),
            std::borrow::Cow::Borrowed(s) => (s.vector.clone(), s.band_keys.clone(), s.fingerprint),
        };
        let id = *self.next_doc_id;
        // Committed documents have smaller ids than staged ones.
        let mut exact_duplicate_of = self.committed.smallest(fingerprint, tables.legacy_fingerprints.as_ref())?;
        if exact_duplicate_of.is_none() {
            let added = &*self.added;
            exact_duplicate_of =
                self.added_fingerprints.ids(fingerprint).iter().copied().find(|id| added.contains_key(id));
        }
        // Nothing has changed yet. The key is looked up and written in one
        // descent of its table: a key found taken (when it must be free)
        // gets its id back, and the error leaves everything as it was.
        let taken = tables.keys.insert(key, id).map_err(redb_err("writing keys"))?.map(|old| old.value());
        if let (Some(old), true) = (taken, key_must_be_free) {
            tables.keys.insert(key, old).map_err(redb_err("writing keys"))?;
            return Err(IndexError::DuplicateKey { key: key.to_owned() });
        }
        *self.next_doc_id += 1;
        self.added_fingerprints.add(id, fingerprint);
        let record = DocRecord { key: key.to_owned(), fingerprint, metadata };
        tables.docs.insert(id, record.encode().as_slice()).map_err(redb_err("writing docs"))?;
        let pending = PendingRecord { vector, band_keys, fingerprint: Some(fingerprint) };
        if !self.bulk {
            tables.pending.insert(id, pending.encode().as_slice()).map_err(redb_err("writing pending"))?;
        }
        let doc = DeltaDoc { vector: pending.vector, band_keys: pending.band_keys, fingerprint };
        let doc = Arc::new(doc);
        if let Some(index) = self.added_index.as_mut() {
            index.queue([(&id, &doc)]);
        }
        self.added.insert(id, doc);
        Ok(InsertOutcome { id, exact_duplicate_of })
    }
}

/// A read snapshot of an index.
pub struct Searcher {
    state: Arc<State>,
    txn: Arc<redb::ReadTransaction>,
    signer: Arc<Signer>,
}

impl std::fmt::Debug for Searcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Searcher").field("segments", &self.state.segments.len()).finish_non_exhaustive()
    }
}

impl Searcher {
    /// The signer of the index's configuration (to sign query documents).
    pub fn signer(&self) -> &Signer {
        &self.signer
    }

    /// The document stored under `key`.
    ///
    /// # Errors
    /// Catalog errors, [`IndexError::Corrupted`].
    pub fn get(&self, key: &str) -> Result<Option<StoredDocument>, IndexError> {
        let keys = self.txn.open_table(KEYS).map_err(redb_err("opening keys"))?;
        let id = keys.get(key).map_err(redb_err("reading keys"))?.map(|v| v.value());
        match id {
            Some(id) => self.get_by_id(id),
            None => Ok(None),
        }
    }

    /// The document with id `id`.
    ///
    /// # Errors
    /// Catalog errors, [`IndexError::Corrupted`].
    pub fn get_by_id(&self, id: u64) -> Result<Option<StoredDocument>, IndexError> {
        let Some(DocumentInfo { id, key, fingerprint, metadata }) = self.describe(id)? else { return Ok(None) };
        let vector = self.vector(id)?;
        Ok(Some(StoredDocument { id, key, fingerprint, metadata, vector }))
    }

    /// The key, fingerprint and metadata of the document with id `id`, read
    /// from the catalog alone: what naming a match or a pair needs, without
    /// decoding the document's vector as [`Self::get_by_id`] does.
    ///
    /// # Errors
    /// Catalog errors, [`IndexError::Corrupted`].
    pub fn describe(&self, id: u64) -> Result<Option<DocumentInfo>, IndexError> {
        document_info(&self.txn.open_table(DOCS).map_err(redb_err("opening docs"))?, id)
    }

    /// The documents stored with this URL ([`Metadata::url`]), in the
    /// order they were added: a page crawled more than once is several.
    /// There is no URL index: this reads every document's catalog record,
    /// for an occasional look-up (the command line's `query --key URL`),
    /// not one per query.
    ///
    /// # Errors
    /// Catalog errors, [`IndexError::Corrupted`] for a damaged record.
    pub fn find_by_url(&self, url: &str) -> Result<Vec<DocumentInfo>, IndexError> {
        let docs = self.txn.open_table(DOCS).map_err(redb_err("opening docs"))?;
        let mut found = Vec::new();
        for entry in docs.iter().map_err(redb_err("reading docs"))? {
            let (id, raw) = entry.map_err(redb_err("reading docs"))?;
            let id = id.value();
            let record = DocRecord::decode(raw.value(), id)?;
            if record.metadata.url.as_deref() == Some(url) {
                let DocRecord { key, fingerprint, metadata } = record;
                found.push(DocumentInfo { id, key, fingerprint, metadata });
            }
        }
        Ok(found)
    }

    /// [`Self::describe`] of every id in `ids`, answered in their order:
    /// what naming every pair or cluster of a self-join needs. The ids are
    /// looked up in ascending order, in chunks on all cores, each chunk
    /// opening the catalog's table once.
    ///
    /// # Errors
    /// As [`Self::describe`].
    pub fn describe_many(&self, ids: &[u64]) -> Result<Vec<Option<DocumentInfo>>, IndexError> {
        use rayon::prelude::*;
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_unstable_by_key(|&i| ids[i]);
        let chunks: Vec<Vec<Option<DocumentInfo>>> = order
            .par_chunks(4096)
            .map(|chunk| {
                let docs = self.txn.open_table(DOCS).map_err(redb_err("opening docs"))?;
                chunk.iter().map(|&i| document_info(&docs, ids[i])).collect()
            })
            .collect::<Result<_, IndexError>>()?;
        let mut out = vec![None; ids.len()];
        for (&i, info) in order.iter().zip(chunks.into_iter().flatten()) {
            out[i] = info;
        }
        Ok(out)
    }

    /// The signature vector of live document `id`.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] when no segment or pending record holds it.
    pub fn vector_of(&self, id: u64) -> Result<SignatureVector, IndexError> {
        self.vector(id)
    }

    fn vector(&self, id: u64) -> Result<SignatureVector, IndexError> {
        if let Some(doc) = self.state.delta.get(&id) {
            return Ok(doc.vector.clone());
        }
        for loaded in self.state.segments.values() {
            if let Some(ordinal) = loaded.segment.ordinal_of(id)? {
                return loaded.segment.vector(ordinal);
            }
        }
        Err(IndexError::corrupted(CATALOG_FILE, "docs", id, "document is neither pending nor in a segment"))
    }

    /// Ids of the live segments whose id index lists `id`.
    fn segments_holding(&self, id: u64) -> Result<Vec<u64>, IndexError> {
        let mut out = Vec::new();
        for (&segment_id, loaded) in &self.state.segments {
            if loaded.segment.ordinal_of(id)?.is_some() {
                out.push(segment_id);
            }
        }
        Ok(out)
    }

    /// Calls `f(id, vector)` for every live document: segments in id order
    /// of segment, then the delta.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] for damaged segments.
    pub fn for_each_live(&self, mut f: impl FnMut(u64, &SignatureVector)) -> Result<(), IndexError> {
        self.for_each_live_entry(|_, ordinal, segment, entry| {
            f(entry.id, &segment.vector(ordinal)?);
            Ok(())
        })?;
        for (&id, doc) in self.state.delta.iter() {
            f(id, &doc.vector);
        }
        Ok(())
    }

    /// Calls `f(position, ordinal, segment, entry)` for every live document
    /// of the snapshot's segments (not the delta), in segment order, then
    /// by ordinal, with its segment's position among them: from the
    /// entries, without reading a vector. `f`'s error ends the walk.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] for a damaged entry; `f`'s.
    fn for_each_live_entry(
        &self,
        mut f: impl FnMut(usize, u32, &Segment<SegmentBytes>, segment::SegmentEntry) -> Result<(), IndexError>,
    ) -> Result<(), IndexError> {
        for (position, loaded) in self.state.segments.values().enumerate() {
            let segment = &loaded.segment;
            for ordinal in 0..segment.doc_count() {
                let entry = segment.entry(ordinal)?;
                if !self.state.deleted.contains(entry.id) {
                    f(position, ordinal, segment, entry)?;
                }
            }
        }
        Ok(())
    }

    /// Every live document with `sim(query, d) ≥ τ` under the index's
    /// similarity, in ascending id order, by comparing the query with every
    /// live document: the audit path, linear in the index size. Use
    /// [`Searcher::query`] for speed; both give the same answer.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] for damaged segments.
    pub fn query_exhaustive(&self, query: &SignatureVector, tau: Threshold) -> Result<Vec<Match>, IndexError> {
        let measure = self.signer.config().similarity;
        let mut out = Vec::new();
        self.for_each_live(|id, d| out.extend(oracle::query([(id, d)], query, measure, tau)))?;
        out.sort_unstable_by_key(|m| m.id);
        Ok(out)
    }

    /// Number of live documents.
    pub fn len(&self) -> u64 {
        let in_segments: u64 = self.state.segments.values().map(|s| u64::from(s.segment.doc_count())).sum();
        in_segments - self.state.deleted.len() + self.state.delta.len() as u64
    }

    /// True when no document is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of the snapshot's segment files: about what a
    /// [`Searcher::self_join`] over them maps into the process. Read from
    /// the maps' lengths.
    pub fn segment_bytes(&self) -> u64 {
        self.state.segments.values().map(|s| s.segment.byte_len() as u64).sum()
    }

    /// The counts from each segment's docs section (an entry holds a
    /// document's |d|, its frequencies' sum, and its distinct count) and the
    /// delta's vectors, without reading a stored vector: 24 bytes a
    /// segment document rather than its hashes and frequencies.
    fn stats(&self, storage: &dyn Storage) -> Result<IndexStats, IndexError> {
        let (mut signatures, mut without_signatures) = (0, 0);
        self.for_each_live_entry(|_, _, _, entry| {
            signatures += entry.length;
            without_signatures += u64::from(entry.distinct() == 0);
            Ok(())
        })?;
        for doc in self.state.delta.values() {
            signatures += doc.vector.total();
            without_signatures += u64::from(doc.vector.is_empty());
        }
        let catalog_bytes = storage.len(CATALOG_FILE).unwrap_or(0);
        let segment_bytes = self.segment_bytes();
        Ok(IndexStats {
            documents: self.len(),
            deleted: self.state.deleted.len(),
            pending: self.state.delta.len() as u64,
            segments: self.state.segments.len() as u64,
            bytes_on_disk: catalog_bytes + segment_bytes,
            signatures,
            without_signatures,
        })
    }
}
