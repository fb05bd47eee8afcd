//! Flushes and merges: the maintenance that turns pending documents into
//! segments and keeps the segment count logarithmic.
//!
//! Every job builds its segment file from a snapshot, writes it by the flush
//! protocol (FORMAT.md §8) and then *installs* it: one catalog transaction,
//! under the writer lock, and a new published state. By default the commit
//! that reaches the flush threshold runs the job itself while its writer
//! holds the lock, so nothing changes between snapshot and install. With
//! [`IndexOptions::background_maintenance`](super::IndexOptions) two
//! threads run them, one the flushes and one the merges, and take the
//! writer lock only to install, so writers go on committing meanwhile; the
//! install reconciles what they changed:
//!
//! - a flush drops from the pending table only the documents it wrote; one
//!   deleted (or replaced) since its snapshot is in the new segment but no
//!   longer live, so it is recorded as deleted there;
//! - a merge removes the deletions it applied; a document deleted while it
//!   was building is in the new segment, so its deletion moves there.
//!
//! A flush and a merge may overlap (they never involve the same documents,
//! and take distinct segment ids from an in-memory counter); two flushes or
//! two merges never do. The flush thread holds the maintenance lock, the
//! merge thread the merge lock, and [`Index::flush`], [`Index::optimize`]
//! and [`Index::compact_catalog`] both, always in the order merge,
//! maintenance, writer; a commit running a job inline holds the writer
//! lock (there are no background threads then).

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use rayon::prelude::*;

use super::catalog::{DocRecord, SegmentRecord, DELETED, DOCS, MANIFEST, META, PENDING};
use super::delta::DeltaIndex;
use super::mmap::SegmentBytes;
use super::segment::{
    build_segment_file, build_segment_file_writing, merge_segments, merges_in_place, PairBuffers, Segment, SegmentDoc,
    SegmentDocRef, SegmentFile,
};
use super::{
    lock, open_written_segment, redb_err, segment_file_name, sync_dir, Index, IndexError, Inner, LoadedSegment, State,
    CATALOG_FILE, MERGE_FACTOR,
};
use crate::hash::Fingerprint;

/// Whether a job's caller already holds the writer lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WriterLock {
    /// The caller holds it (a commit, `flush`, `optimize`).
    Held,
    /// The job takes it to install (the background thread).
    Take,
}

impl Index {
    /// Writes every pending document to a new segment now (after a
    /// background job that is running, if any), then merges by the tiered
    /// policy.
    ///
    /// # Errors
    /// [`IndexError::ReadOnly`], I/O and catalog errors.
    pub fn flush(&self) -> Result<(), IndexError> {
        let _merges = lock(&self.inner.merge_lock);
        let _jobs = lock(&self.inner.maintenance_lock);
        let _writer = lock(&self.inner.writer_lock);
        self.inner.flush_and_merge(WriterLock::Held)
    }

    /// Merges every segment into one, dropping deleted documents (after
    /// flushing pending documents), then compacts the catalog file as
    /// [`Index::compact_catalog`] does, if no reader has a transaction open.
    /// Readers keep their snapshots; the writer waits.
    ///
    /// # Errors
    /// [`IndexError::ReadOnly`], I/O, catalog and corruption errors.
    pub fn optimize(&self) -> Result<(), IndexError> {
        let _merges = lock(&self.inner.merge_lock);
        let _jobs = lock(&self.inner.maintenance_lock);
        let _writer = lock(&self.inner.writer_lock);
        self.inner.flush_and_merge(WriterLock::Held)?;
        let state = self.inner.current();
        if state.segments.len() > 1 || !state.deleted.is_empty() {
            let ids: Vec<u64> = state.segments.keys().copied().collect();
            self.inner.merge(&ids, WriterLock::Held)?;
        }
        drop(state);
        self.inner.catalog.compact()?;
        Ok(())
    }

    /// Gives the catalog file's free space back (redb's compaction: live
    /// pages move to the front, the file is truncated) and says whether it
    /// could. Pending documents live in the catalog until a flush drops
    /// them, and redb never shrinks its file by itself: it keeps the size
    /// of the most pending documents it ever held, copied on write. During
    /// an ingest that space is reused, so this is for an index at rest
    /// (`optimize` runs it too). First it rewrites the table of keys into
    /// full pages if keys arrived out of order and left a quarter of its
    /// pages' bytes, and at least 64 KiB, free (a commit of its own). redb
    /// compacts only when no transaction of any process is open on the
    /// catalog: while a searcher (or a reader in another process) holds
    /// one, the file is left as it is, and it returns `Ok(false)` unless
    /// it repacked the keys (whose old pages a later call gives back).
    /// The writer and the maintenance thread wait meanwhile.
    ///
    /// # Errors
    /// [`IndexError::ReadOnly`], I/O and catalog errors.
    pub fn compact_catalog(&self) -> Result<bool, IndexError> {
        if self.inner.catalog.is_read_only() {
            return Err(IndexError::ReadOnly);
        }
        let _merges = lock(&self.inner.merge_lock);
        let _jobs = lock(&self.inner.maintenance_lock);
        let _writer = lock(&self.inner.writer_lock);
        self.inner.catalog.compact()
    }

    /// Waits until the background threads have no job running or
    /// requested (returns at once without background maintenance). Their
    /// outcome is in [`Index::maintenance_error`].
    pub fn wait_for_maintenance(&self) {
        if let Some(worker) = &self.worker {
            worker.wait_idle();
        }
    }
}

/// Records a job's outcome for [`Index::maintenance_error`]: cleared by a
/// success; a [`IndexError::ReopenRequired`] (the catalog unusable after an
/// earlier failure) keeps the earlier error it follows, the cause.
pub(super) fn record_outcome(slot: &Mutex<Option<IndexError>>, outcome: Result<(), IndexError>) {
    let mut slot = lock(slot);
    match outcome {
        Err(IndexError::ReopenRequired { .. }) if slot.is_some() => {}
        outcome => *slot = outcome.err(),
    }
}

impl Inner {
    /// A flush, then merges by the policy.
    pub(super) fn flush_and_merge(&self, writer: WriterLock) -> Result<(), IndexError> {
        self.flush_pending(writer)?;
        self.merge_by_policy(writer)
    }

    /// The background flush thread's job: flushes while the pending
    /// documents reach the threshold (more arrive during a flush). Merges
    /// are the other thread's: a long merge does not hold flushes up, so a
    /// writer stalls on twice the threshold pending only when flushing
    /// itself falls behind.
    fn background_flushes(&self) -> Result<(), IndexError> {
        let _jobs = lock(&self.maintenance_lock);
        while self.current().delta.len() >= self.options.flush_threshold.max(1) {
            self.flush_pending(WriterLock::Take)?;
        }
        Ok(())
    }

    /// The background merge thread's job: merges by the policy.
    fn background_merges(&self) -> Result<(), IndexError> {
        let _merges = lock(&self.merge_lock);
        self.merge_by_policy(WriterLock::Take)
    }

    /// The flush protocol: the pending documents of the current snapshot
    /// go to a new segment.
    fn flush_pending(&self, writer: WriterLock) -> Result<(), IndexError> {
        let snapshot = self.current();
        if snapshot.delta.is_empty() {
            return Ok(());
        }
        // The segment file is written before the catalog transaction
        // begins, so that a failure writing it (a full disk) leaves the
        // catalog untouched.
        let segment_id = self.take_segment_id()?;
        // The documents are shared, not copied: the build reads them through
        // their `Arc`s.
        let docs: Vec<(u64, Arc<super::DeltaDoc>)> =
            snapshot.delta.iter().map(|(&id, d)| (id, Arc::clone(d))).collect();
        // The ids written, ascending. The snapshot goes now: while it is
        // held, every commit works on a copy of the state (the delta's
        // runs shared, its last run's merges copied).
        let written: Vec<u64> = snapshot.delta.keys().copied().collect();
        drop(snapshot);
        // Its pair buffers are freed with it (a bulk load's writers keep
        // theirs from one commit to the next).
        let fresh = &mut PairBuffers::default();
        let (record, unlisted) = self.write_docs(segment_id, docs.iter().map(|(id, d)| (*id, &**d)), fresh)?;
        drop(docs);
        let _writer = (writer == WriterLock::Take).then(|| lock(&self.writer_lock));
        let current = self.current();
        // Written documents no longer pending: deleted or replaced since the
        // snapshot (only with background maintenance).
        let gone: Vec<u64> = written.iter().copied().filter(|id| !current.delta.contains_key(id)).collect();
        let everything = gone.is_empty() && current.delta.len() == written.len();
        let txn = self.catalog.begin_write()?;
        {
            list_segment(&txn, segment_id, &record)?;
            if everything {
                // Every pending document was written: the whole table goes.
                txn.delete_table(PENDING).map_err(redb_err("clearing pending"))?;
                txn.open_table(PENDING).map_err(redb_err("recreating pending"))?;
            } else {
                // Documents committed after the snapshot have larger ids
                // than every written one (ids ascend with commits), so the
                // written rows still pending are those up to the largest
                // written id: one range removal, its count checked.
                let mut pending = txn.open_table(PENDING).map_err(redb_err("opening pending"))?;
                let last = written.last().copied().unwrap_or(0);
                let mut removed = 0usize;
                pending
                    .retain_in(..=last, |_, _| {
                        removed += 1;
                        false
                    })
                    .map_err(redb_err("writing pending"))?;
                if removed != written.len() - gone.len() {
                    return Err(IndexError::corrupted(
                        CATALOG_FILE,
                        "pending",
                        last,
                        "pending table disagrees with the delta",
                    ));
                }
                let mut deleted = txn.open_table(DELETED).map_err(redb_err("opening deleted"))?;
                for &id in &gone {
                    deleted.insert(id, segment_id).map_err(redb_err("writing deleted"))?;
                }
            }
        }
        let loaded = Arc::new(open_written_segment(&*self.storage, segment_id)?);
        let mut guard = self.state.write().unwrap_or_else(|p| p.into_inner());
        unlisted.committing();
        txn.commit().map_err(redb_err("committing the flush"))?;
        let mut segments = guard.segments.clone();
        segments.insert(segment_id, loaded);
        // The masks stay, with the new segment named for every key.
        let segment_masks = guard.segment_masks.appended(&segments, segment_id);
        let delta: super::delta::PendingDocs = guard
            .delta
            .iter()
            .filter(|(id, _)| written.binary_search(id).is_err())
            .map(|(k, v)| (*k, Arc::clone(v)))
            .collect();
        let (deleted, deleted_per_segment) = if gone.is_empty() {
            (Arc::clone(&guard.deleted), Arc::clone(&guard.deleted_per_segment))
        } else {
            let mut per_segment = (*guard.deleted_per_segment).clone();
            per_segment.insert(segment_id, gone.len() as u32);
            let mut deleted = (*guard.deleted).clone();
            deleted.extend(gone);
            (Arc::new(deleted), Arc::new(per_segment))
        };
        // The writer's map of pending fingerprints starts afresh with them.
        *lock(&self.delta_fingerprints) = None;
        let delta_index = DeltaIndex::after_flush(&guard.delta_index, delta.iter());
        *guard = Arc::new(State {
            segments,
            delta_index,
            delta: Arc::new(delta),
            deleted,
            deleted_per_segment,
            ranks: Arc::default(),
            segment_masks,
            pinned: None,
        });
        Ok(())
    }

    /// The live documents of `segments` (checksums verified), decoded for
    /// a merge that writes them anew: the path of segments older than the
    /// current format.
    fn decoded_docs(
        &self,
        segments: &[Arc<LoadedSegment>],
        deleted: &super::DeletedIds,
    ) -> Result<Vec<SegmentDoc>, IndexError> {
        let mut docs = Vec::new();
        for loaded in segments {
            let segment = &loaded.segment;
            segment.verify_checksums()?;
            let fingerprints = match segment.fingerprints()? {
                Some(by_ordinal) => by_ordinal,
                None => self.catalog_fingerprints(segment)?,
            };
            for ordinal in 0..segment.doc_count() {
                let entry = segment.entry(ordinal)?;
                if !deleted.contains(entry.id) {
                    let vector = segment.vector(ordinal)?;
                    let fingerprint = fingerprints[ordinal as usize];
                    docs.push(SegmentDoc { id: entry.id, vector, band_keys: Vec::new(), fingerprint });
                }
            }
        }
        // Segments do not store band keys (since format version 3): they
        // are a function of the vector, recomputed on all cores.
        docs.par_iter_mut().for_each(|doc| doc.band_keys = self.signer.band_keys(&doc.vector));
        Ok(docs)
    }

    /// The fingerprints, by ordinal, of a segment older than format 4
    /// (which does not store them), from the documents' catalog records. A
    /// document deleted since the merge's snapshot has no record any more;
    /// it gets fingerprint 0 (it is deleted in the merged segment too, so
    /// no look-up returns it, and the next merge drops it).
    fn catalog_fingerprints(&self, segment: &Segment<SegmentBytes>) -> Result<Vec<Fingerprint>, IndexError> {
        let txn = self.catalog.begin_read()?;
        let docs = txn.open_table(DOCS).map_err(redb_err("opening docs"))?;
        let mut fingerprints = Vec::with_capacity(segment.doc_count() as usize);
        for ordinal in 0..segment.doc_count() {
            let id = segment.entry(ordinal)?.id;
            let raw = docs.get(id).map_err(redb_err("reading docs"))?.map(|v| v.value().to_vec());
            let record = raw.map(|raw| DocRecord::decode(&raw, id)).transpose()?;
            fingerprints.push(record.map_or(Fingerprint(0), |r| r.fingerprint));
        }
        Ok(fingerprints)
    }

    /// Steps 1–3 of the flush protocol for `docs` (ids ascending): the
    /// segment `segment_id` built (its posting table gathered in
    /// `buffers`) and written, not yet listed.
    fn write_docs<'d>(
        &self,
        segment_id: u64,
        docs: impl ExactSizeIterator<Item = (u64, &'d super::DeltaDoc)>,
        buffers: &mut PairBuffers,
    ) -> Result<(SegmentRecord, Unlisted<'_>), IndexError> {
        let bands = self.signer.config().minhash.bands;
        let doc_count = docs.len() as u32;
        let refs = docs
            .map(|(id, d)| SegmentDocRef { id, vector: &d.vector, band_keys: &d.band_keys, fingerprint: d.fingerprint })
            .collect();
        // The file's vector sections are written while its tables are
        // built, and synced on the same thread, so that the publish's
        // fsync has only the tables left to write out; the rest after,
        // then the header over the zeros it began with.
        let guard = Unlisted { storage: &*self.storage, id: segment_id, armed: true };
        let tmp = temporary_name(segment_id);
        let storage = &*self.storage;
        let write_early = |parts: &[&[u8]]| {
            storage.write_new_parts(&tmp, parts)?;
            storage.sync(&tmp)
        };
        let (file, written, early_len) = build_segment_file_writing(segment_id, bands, refs, &write_early, buffers);
        let writing = || IndexError::io(format!("writing {tmp}"));
        written.map_err(IndexError::io(format!("writing and syncing the vectors of {tmp}")))?;
        storage.append_parts(&tmp, &file.parts_after(early_len)).map_err(writing())?;
        storage.write_at(&tmp, 0, file.head()).map_err(writing())?;
        let record = SegmentRecord { doc_count, byte_len: file.len() as u64, file_crc: file.crc() };
        // Written: its sections' buffers serve the next flush.
        buffers.keep_sections(file);
        self.publish_segment_file(segment_id)?;
        Ok((record, guard))
    }

    /// Steps 1–3 of the flush protocol for the documents a bulk writer
    /// staged (see [`Index::bulk_writer`]): their segment, built, written
    /// and opened, for the writer's own transaction to list. The posting
    /// table is gathered in the writer's `buffers`, which its chain keeps
    /// for the next commit ([`super::Writer::commit_and_continue`]).
    pub(super) fn write_staged(
        &self,
        staged: &BTreeMap<u64, Arc<super::DeltaDoc>>,
        buffers: &mut PairBuffers,
    ) -> Result<StagedSegment<'_>, IndexError> {
        let id = self.take_segment_id()?;
        let (record, unlisted) = self.write_docs(id, staged.iter().map(|(&id, d)| (id, &**d)), buffers)?;
        let loaded = Arc::new(open_written_segment(&*self.storage, id)?);
        Ok(StagedSegment { id, record, loaded, unlisted })
    }

    /// Takes the id of a new segment. The counter starts from the catalog's
    /// `next_segment_id` at the first job and is advanced in memory, so a
    /// flush and a merge that overlap take distinct ids (an id whose job
    /// failed is skipped).
    fn take_segment_id(&self) -> Result<u64, IndexError> {
        let mut next = lock(&self.next_segment);
        let id = match *next {
            Some(id) => id,
            None => {
                let txn = self.catalog.begin_read()?;
                let meta = txn.open_table(META).map_err(redb_err("opening meta"))?;
                super::meta_u64(&meta, "next_segment_id")?
            }
        };
        *next = Some(id + 1);
        Ok(id)
    }

    /// Steps 2 and 3 of the flush protocol (FORMAT.md §8): temporary name,
    /// fsync, rename, directory fsync. The file stays unlisted until the
    /// job's catalog commit; the returned guard removes it if the job fails
    /// before that (a later job takes another id, so failed attempts must
    /// not pile up on a full disk).
    fn write_segment_file(&self, segment_id: u64, file: &SegmentFile) -> Result<Unlisted<'_>, IndexError> {
        let guard = Unlisted { storage: &*self.storage, id: segment_id, armed: true };
        let tmp = temporary_name(segment_id);
        self.storage.write_new_parts(&tmp, &file.parts()).map_err(IndexError::io(format!("writing {tmp}")))?;
        self.publish_segment_file(segment_id)?;
        Ok(guard)
    }

    /// The end of step 2 and step 3 for a segment file written under its
    /// temporary name: fsync, rename, directory fsync.
    fn publish_segment_file(&self, segment_id: u64) -> Result<(), IndexError> {
        let (name, tmp) = (segment_file_name(segment_id), temporary_name(segment_id));
        let storage = &*self.storage;
        storage.sync(&tmp).map_err(IndexError::io(format!("syncing {tmp}")))?;
        storage.rename(&tmp, &name).map_err(IndexError::io(format!("renaming {tmp} into place")))?;
        sync_dir(storage)
    }

    /// The tiered merge policy: a segment's tier is ⌊log_F(live documents)⌋
    /// with F = [`MERGE_FACTOR`]; whenever a tier holds F segments, its F
    /// smallest are merged into one (of a higher tier), unless their live
    /// bytes (what the merge writes) add up to more than
    /// [`IndexOptions::max_merge_bytes`]. Below that
    /// size fewer than F segments remain per tier, and there are
    /// ⌈log_F(documents)⌉ tiers: the segment count is logarithmic in the
    /// number of documents; past it, segments of the largest size the bound
    /// lets merges make (between `max_merge_bytes / F` and
    /// `max_merge_bytes`) accumulate. Deletions are dropped by merges; a
    /// segment with every document deleted goes at once, and one with more
    /// than [`IndexOptions::max_deleted_percent`] deleted is rewritten on
    /// its own when no tier merge is due (within the bound).
    pub(super) fn merge_by_policy(&self, writer: WriterLock) -> Result<(), IndexError> {
        loop {
            let state = self.current();
            let segments = state.segments.iter().map(|(&id, loaded)| Sized {
                id,
                docs: loaded.segment.doc_count(),
                bytes: loaded.segment.byte_len() as u64,
                deleted: state.deleted_per_segment.get(&id).copied().unwrap_or(0),
            });
            let Some(ids) = policy_merge(segments, self.options.max_merge_bytes, self.options.max_deleted_percent)
            else {
                return Ok(());
            };
            self.merge(&ids, writer)?;
        }
    }

    /// Replaces the segments `ids` by one holding their live documents,
    /// with the protocol of a flush; their deleted documents are gone
    /// afterwards.
    fn merge(&self, ids: &[u64], writer: WriterLock) -> Result<(), IndexError> {
        // Only what the merge reads is kept of the snapshot (see
        // `flush_pending`).
        let (segments, deleted_before) = {
            let snapshot = self.current();
            let mut segments = Vec::new();
            for id in ids {
                let missing = || IndexError::corrupted(CATALOG_FILE, "manifest", *id, "segment to merge is not loaded");
                segments.push(Arc::clone(snapshot.segments.get(id).ok_or_else(missing)?));
            }
            (segments, Arc::clone(&snapshot.deleted))
        };
        let (mut moved, mut dropped) = (Vec::new(), Vec::new());
        for loaded in &segments {
            for ordinal in 0..loaded.segment.doc_count() {
                let id = loaded.segment.entry(ordinal)?.id;
                if deleted_before.contains(id) {
                    dropped.push(id);
                } else {
                    moved.push(id);
                }
            }
        }
        moved.sort_unstable();
        let new_id = self.take_segment_id()?;
        let bands = self.signer.config().minhash.bands;
        // Segments of the current format are merged in place; older ones
        // are decoded and written anew.
        let file = if moved.is_empty() {
            // Every document is deleted: the segments just go.
            None
        } else if segments.iter().all(|l| merges_in_place(&l.segment)) {
            let sources: Vec<&Segment<SegmentBytes>> = segments.iter().map(|l| &l.segment).collect();
            merge_segments(new_id, bands, &sources, |id| deleted_before.contains(id))?
        } else {
            // Not empty: they are the `moved` documents.
            Some(build_segment_file(new_id, bands, self.decoded_docs(&segments, &deleted_before)?))
        };
        // As in a flush, the file is complete before the transaction begins.
        let written = match file {
            None => None,
            Some(file) => {
                let unlisted = self.write_segment_file(new_id, &file)?;
                let record =
                    SegmentRecord { doc_count: moved.len() as u32, byte_len: file.len() as u64, file_crc: file.crc() };
                drop(file);
                Some((record, Arc::new(open_written_segment(&*self.storage, new_id)?), unlisted))
            }
        };
        let _writer = (writer == WriterLock::Take).then(|| lock(&self.writer_lock));
        let current = self.current();
        // Documents deleted while the merge was building (only with
        // background maintenance) are in the new segment.
        let late: Vec<u64> =
            (&*current.deleted - &*deleted_before).into_iter().filter(|id| moved.binary_search(id).is_ok()).collect();
        let txn = self.catalog.begin_write()?;
        let (loaded, unlisted) = match written {
            Some((record, loaded, unlisted)) => {
                list_segment(&txn, new_id, &record)?;
                (Some(loaded), Some(unlisted))
            }
            // Nothing was live: the id is taken all the same.
            None => {
                advance_next_segment_id(&txn, new_id)?;
                (None, None)
            }
        };
        {
            let mut manifest = txn.open_table(MANIFEST).map_err(redb_err("opening manifest"))?;
            for id in ids {
                manifest.remove(*id).map_err(redb_err("writing manifest"))?;
            }
            let mut deleted = txn.open_table(DELETED).map_err(redb_err("opening deleted"))?;
            for &id in &dropped {
                deleted.remove(id).map_err(redb_err("writing deleted"))?;
            }
            for &id in &late {
                deleted.insert(id, new_id).map_err(redb_err("writing deleted"))?;
            }
        }
        {
            let mut guard = self.state.write().unwrap_or_else(|p| p.into_inner());
            if let Some(unlisted) = unlisted {
                unlisted.committing();
            }
            txn.commit().map_err(redb_err("committing the merge"))?;
            let mut segments = guard.segments.clone();
            for id in ids {
                segments.remove(id);
            }
            if let Some(loaded) = loaded {
                segments.insert(new_id, loaded);
            }
            let mut deleted = (*guard.deleted).clone();
            for &id in &dropped {
                deleted.remove(id);
            }
            let mut per_segment = (*guard.deleted_per_segment).clone();
            for id in ids {
                per_segment.remove(id);
            }
            if !late.is_empty() {
                per_segment.insert(new_id, late.len() as u32);
            }
            *guard = Arc::new(State {
                segments,
                delta: Arc::clone(&guard.delta),
                delta_index: Arc::clone(&guard.delta_index),
                deleted: Arc::new(deleted),
                deleted_per_segment: Arc::new(per_segment),
                ranks: Arc::default(),
                segment_masks: Arc::default(),
                pinned: None,
            });
        }
        // Snapshots that still map the old files keep them readable (an
        // unlinked file lives on through its map); a removal that fails
        // leaves an unlisted file, removed at the next writable open.
        for id in ids {
            let _ = self.storage.remove(&segment_file_name(*id));
        }
        Ok(())
    }
}

/// The segment of a bulk writer's commit ([`Inner::write_staged`]):
/// written, not yet listed in the manifest.
pub(super) struct StagedSegment<'a> {
    id: u64,
    record: SegmentRecord,
    loaded: Arc<LoadedSegment>,
    unlisted: Unlisted<'a>,
}

impl StagedSegment<'_> {
    /// Step 4 of the flush protocol, in the writer's transaction: the
    /// manifest record and the next segment id.
    pub(super) fn list(&self, txn: &redb::WriteTransaction) -> Result<(), IndexError> {
        list_segment(txn, self.id, &self.record)
    }

    /// The transaction that lists it is about to commit: the file stays
    /// whatever happens (see [`Unlisted`]). Its id and the opened segment.
    pub(super) fn committing(self) -> (u64, Arc<LoadedSegment>) {
        self.unlisted.committing();
        (self.id, self.loaded)
    }
}

/// The name a segment file is written under before its rename (FORMAT.md
/// §8, step 2).
fn temporary_name(segment_id: u64) -> String {
    format!("{}.tmp", segment_file_name(segment_id))
}

/// A segment file not yet listed in the manifest: removed (best effort)
/// when dropped armed, that is when its job fails before the catalog
/// commit. Once the commit is attempted it stays: a commit that fails may
/// still have reached the disk, and the next open removes the file if the
/// manifest does not list it.
struct Unlisted<'a> {
    storage: &'a dyn super::storage::Storage,
    id: u64,
    armed: bool,
}

impl Unlisted<'_> {
    /// The catalog commit that lists the file is about to run.
    fn committing(mut self) {
        self.armed = false;
    }
}

impl Drop for Unlisted<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.storage.remove(&temporary_name(self.id));
            let _ = self.storage.remove(&segment_file_name(self.id));
        }
    }
}

/// A segment as the merge policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sized {
    id: u64,
    /// Documents, deleted ones included.
    docs: u32,
    /// File bytes.
    bytes: u64,
    /// Deleted documents.
    deleted: u32,
}

impl Sized {
    /// Documents not deleted.
    fn live(&self) -> u32 {
        self.docs.saturating_sub(self.deleted)
    }

    /// What a merge would write of this segment: its file's bytes scaled
    /// by its share of live documents (a merge drops the deleted ones with
    /// their vectors and posting entries).
    fn live_bytes(&self) -> u64 {
        if self.docs == 0 {
            return self.bytes;
        }
        (u128::from(self.bytes) * u128::from(self.live()) / u128::from(self.docs)) as u64
    }
}

/// The merge the policy starts next, if any, first of:
///
/// - a segment whose every document is deleted (nothing is written, so
///   the bound does not apply), the smallest id first;
/// - the [`MERGE_FACTOR`] smallest segments (by live documents, then id) of
///   the lowest tier that holds that many and whose live bytes (what the
///   merge writes: [`Sized::live_bytes`]) add up to at most `max_bytes`;
/// - the segment with the largest share of deleted documents (then the
///   smallest id) among those with more than `max_deleted_percent` percent
///   deleted and live bytes of at most `max_bytes`, on its own.
///
/// A segment's tier is ⌊log_F(live documents)⌋: deleted documents count
/// neither in its tier nor in the bound, so a segment made past the bound
/// (by [`super::Index::optimize`]) is merged again once enough of it is
/// deleted.
fn policy_merge(segments: impl Iterator<Item = Sized>, max_bytes: u64, max_deleted_percent: u8) -> Option<Vec<u64>> {
    let segments: Vec<Sized> = segments.collect();
    if let Some(gone) = segments.iter().filter(|s| s.deleted >= s.docs).map(|s| s.id).min() {
        return Some(vec![gone]);
    }
    let mut tiers: BTreeMap<u32, Vec<(u32, u64, u64)>> = BTreeMap::new();
    for s in &segments {
        let live = s.live().max(1);
        tiers.entry(live.ilog(MERGE_FACTOR as u32)).or_default().push((live, s.id, s.live_bytes()));
    }
    let tiered = tiers.into_values().filter(|tier| tier.len() >= MERGE_FACTOR).find_map(|mut tier| {
        tier.sort_unstable();
        let smallest = &tier[..MERGE_FACTOR];
        let bytes = smallest.iter().fold(0u64, |sum, &(.., b)| sum.saturating_add(b));
        (bytes <= max_bytes).then(|| smallest.iter().map(|&(_, id, _)| id).collect())
    });
    if tiered.is_some() {
        return tiered;
    }
    // Shares compared exactly: a/b > c/d as a·d > c·b.
    let over = |s: &&Sized| u64::from(s.deleted) * 100 > u64::from(s.docs) * u64::from(max_deleted_percent);
    segments
        .iter()
        .filter(|s| s.live_bytes() <= max_bytes)
        .filter(over)
        .max_by(|a, b| {
            let share = (u64::from(a.deleted) * u64::from(b.docs)).cmp(&(u64::from(b.deleted) * u64::from(a.docs)));
            share.then(b.id.cmp(&a.id))
        })
        .map(|s| vec![s.id])
}

/// Lists segment `id` in `txn` (step 4 of the flush protocol, shared by
/// flushes, merges and bulk commits): its manifest record, and
/// `next_segment_id` advanced past it.
fn list_segment(txn: &redb::WriteTransaction, id: u64, record: &SegmentRecord) -> Result<(), IndexError> {
    let mut manifest = txn.open_table(MANIFEST).map_err(redb_err("opening manifest"))?;
    manifest.insert(id, record.encode().as_slice()).map_err(redb_err("writing manifest"))?;
    drop(manifest);
    advance_next_segment_id(txn, id)
}

/// Records in `txn` that segment `id` is taken: `next_segment_id` becomes
/// `id + 1` unless a job that overlapped this one took a larger id and
/// committed first.
fn advance_next_segment_id(txn: &redb::WriteTransaction, id: u64) -> Result<(), IndexError> {
    let mut meta = txn.open_table(META).map_err(redb_err("opening meta"))?;
    let stored = super::meta_u64(&meta, "next_segment_id")?;
    let next = stored.max(id + 1).to_le_bytes();
    meta.insert("next_segment_id", next.as_slice()).map_err(redb_err("writing meta"))?;
    Ok(())
}

/// The background maintenance threads of a writable index: one flushes,
/// and asks the other to merge.
pub(super) struct Workers {
    // Dropped in this order: the flush thread, which asks for merges, is
    // joined first.
    flusher: Worker,
    merger: Worker,
}

impl Workers {
    /// Starts both threads.
    pub(super) fn start(inner: &Arc<Inner>) -> Result<Workers, IndexError> {
        let merges = Arc::clone(inner);
        let merger = Worker::start("neardex-merges", move || {
            let outcome = Worker::guarded(|| merges.background_merges());
            record_outcome(&merges.merge_error, outcome);
        })?;
        let asks = Arc::clone(&merger.shared);
        let flushes = Arc::clone(inner);
        let flusher = Worker::start("neardex-maintenance", move || {
            let outcome = Worker::guarded(|| flushes.background_flushes());
            record_outcome(&flushes.maintenance_error, outcome);
            // A flush may fill a tier; merging after a failed flush is
            // harmless.
            Shared::request(&asks);
        })?;
        Ok(Workers { flusher, merger })
    }

    /// Asks for flushes (and the merges they call for).
    pub(super) fn request(&self) {
        self.flusher.request();
    }

    /// Waits until no flush is running or requested.
    pub(super) fn wait_flushed(&self) {
        self.flusher.wait_idle();
    }

    /// Waits until no flush or merge is running or requested.
    pub(super) fn wait_idle(&self) {
        self.flusher.wait_idle();
        self.merger.wait_idle();
    }
}

/// A background thread of a writable index.
struct Worker {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Shared {
    jobs: Mutex<Jobs>,
    changed: Condvar,
}

#[derive(Default)]
struct Jobs {
    requested: bool,
    running: bool,
    stop: bool,
}

impl Shared {
    /// Asks for a job (one pending request covers any number of asks).
    fn request(shared: &Shared) {
        lock(&shared.jobs).requested = true;
        shared.changed.notify_all();
    }
}

impl Worker {
    /// Starts the thread `name`; it runs `job` whenever one is requested.
    fn start(name: &str, job: impl Fn() + Send + 'static) -> Result<Worker, IndexError> {
        let shared = Arc::new(Shared::default());
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || loop {
                {
                    let mut jobs = lock(&theirs.jobs);
                    while !jobs.requested && !jobs.stop {
                        jobs = theirs.changed.wait(jobs).unwrap_or_else(|p| p.into_inner());
                    }
                    if jobs.stop {
                        return;
                    }
                    jobs.requested = false;
                    jobs.running = true;
                }
                job();
                lock(&theirs.jobs).running = false;
                theirs.changed.notify_all();
            })
            .map_err(IndexError::io(format!("starting the {name} thread")))?;
        Ok(Worker { shared, thread: Some(thread) })
    }

    /// Runs a job. A panic (a bug) must not leave `running` set forever, or
    /// every wait for the thread would hang: it becomes the job's error,
    /// and reopening the index is the way on.
    fn guarded(job: impl FnOnce() -> Result<(), IndexError>) -> Result<(), IndexError> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))
            .unwrap_or(Err(IndexError::ReopenRequired { context: "a background flush or merge panicked" }))
    }

    /// Asks for a job.
    fn request(&self) {
        Shared::request(&self.shared);
    }

    /// Waits until no job is running or requested.
    fn wait_idle(&self) {
        let mut jobs = lock(&self.shared.jobs);
        while jobs.requested || jobs.running {
            jobs = self.shared.changed.wait(jobs).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Drop for Worker {
    /// Lets a running job finish (a requested one is left: its documents
    /// stay pending, durable, until a later flush), then joins the thread.
    fn drop(&mut self) {
        lock(&self.shared.jobs).stop = true;
        self.shared.changed.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{policy_merge, Sized, MERGE_FACTOR};

    /// `n` segments from id `first`, none deleted.
    fn segments(first: u64, n: u64, docs: u32, bytes: u64) -> Vec<Sized> {
        (first..first + n).map(|id| Sized { id, docs, bytes, deleted: 0 }).collect()
    }

    fn policy(all: &[Sized], max_bytes: u64) -> Option<Vec<u64>> {
        policy_merge(all.iter().copied(), max_bytes, 100)
    }

    #[test]
    fn the_policy_merges_the_smallest_of_the_lowest_full_tier_within_the_bound() {
        assert_eq!(MERGE_FACTOR, 8);
        // Fewer than eight in every tier: nothing.
        let mut all = segments(1, 7, 1, 100);
        all.extend(segments(20, 7, 10, 1_000));
        assert_eq!(policy(&all, u64::MAX), None);
        // Nine in tier 0: the eight smallest by documents, then id (one of
        // 5 documents, which is still tier 0, is left).
        let mut all = segments(1, 8, 1, 100);
        all[0].docs = 5;
        all.push(Sized { id: 9, docs: 2, bytes: 150, deleted: 0 });
        assert_eq!(policy(&all, u64::MAX), Some(vec![2, 3, 4, 5, 6, 7, 8, 9]));
        // Tiers 0 and 1 full: the lower one first, while it fits the bound.
        let mut all = segments(1, 8, 1, 100);
        all.extend(segments(20, 8, 10, 1_000));
        assert_eq!(policy(&all, 800), Some((1..=8).collect()));
        // One byte short for tier 0: tier 1 does not fit either.
        assert_eq!(policy(&all, 799), None);
        // Tier 0 not full, tier 1 within the bound.
        let mut all = segments(1, 7, 1, 100);
        all.extend(segments(20, 9, 10, 1_000));
        assert_eq!(policy(&all, 8_000), Some((20..28).collect()));
        assert_eq!(policy(&all, 7_999), None);
        // Sizes that would overflow a sum saturate instead.
        let huge = segments(1, 8, 1, u64::MAX / 4);
        assert_eq!(policy(&huge, u64::MAX - 1), None);
    }

    #[test]
    fn the_policy_weighs_segments_by_their_live_documents() {
        // Seven of one document, and one of ten with nine deleted: with one
        // live document it is in tier 0, which is now full.
        let mut all = segments(1, 7, 1, 100);
        all.push(Sized { id: 8, docs: 10, bytes: 1_000, deleted: 9 });
        assert_eq!(policy(&all, u64::MAX), Some((1..=8).collect()));
        // With eight live documents it is in tier 1 again.
        all[7].deleted = 2;
        assert_eq!(policy(&all, u64::MAX), None);
        // The bound weighs what the merge writes: eight of 1,000 bytes with
        // half their documents deleted write about 4,000.
        let mut all = segments(1, 8, 10, 1_000);
        for s in &mut all {
            s.deleted = 5;
        }
        assert_eq!(policy(&all, 4_000), Some((1..=8).collect()));
        assert_eq!(policy(&all, 3_999), None);
        // A segment past the bound (as `optimize` makes them) is rewritten
        // once enough of it is deleted for its live bytes to fit.
        let mut big = [Sized { id: 1, docs: 1_000, bytes: 10_000, deleted: 500 }];
        assert_eq!(policy_merge(big.iter().copied(), 4_000, 25), None);
        big[0].deleted = 600;
        assert_eq!(policy_merge(big.iter().copied(), 4_000, 25), Some(vec![1]));
    }

    #[test]
    fn the_policy_drops_deleted_segments_and_rewrites_those_past_the_share() {
        // Four segments of 100 documents: 25 deleted is not more than 25%.
        let mut all = segments(1, 4, 100, 1_000);
        all[1].deleted = 25;
        assert_eq!(policy_merge(all.iter().copied(), u64::MAX, 25), None);
        // Past 24% it is, and 26 is past 25%.
        assert_eq!(policy_merge(all.iter().copied(), u64::MAX, 24), Some(vec![2]));
        all[1].deleted = 26;
        assert_eq!(policy_merge(all.iter().copied(), u64::MAX, 25), Some(vec![2]));
        // The largest share first (30 of 100 against 26 of 100), ties by id.
        all[3].deleted = 30;
        assert_eq!(policy_merge(all.iter().copied(), u64::MAX, 25), Some(vec![4]));
        all[2].deleted = 30;
        assert_eq!(policy_merge(all.iter().copied(), u64::MAX, 25), Some(vec![3]));
        // Shares, not counts: 20 of 50 is more than 30 of 100.
        all[0] = Sized { id: 1, docs: 50, bytes: 500, deleted: 20 };
        assert_eq!(policy_merge(all.iter().copied(), u64::MAX, 25), Some(vec![1]));
        // A segment whose live bytes (what its rewrite writes: 30 of 50
        // documents live, 300 of its 500 bytes) are past the bound is not
        // rewritten; 100% turns the rule off.
        assert_eq!(policy_merge(all.iter().copied(), 300, 25), Some(vec![1]));
        assert_eq!(policy_merge(all.iter().copied(), 299, 25), None);
        assert_eq!(policy_merge(all.iter().copied(), u64::MAX, 100), None);
        assert_eq!(policy_merge(all.iter().copied(), u64::MAX, 255), None);
        // A due tier merge comes first.
        let mut tiered = all.clone();
        tiered.extend(segments(20, 8, 1, 10));
        assert_eq!(policy_merge(tiered.iter().copied(), u64::MAX, 25), Some((20..28).collect()));
        // A segment with every document deleted goes before anything,
        // whatever the bound and the share allowed.
        tiered.push(Sized { id: 40, docs: 7, bytes: 5_000, deleted: 7 });
        tiered.push(Sized { id: 41, docs: 3, bytes: 5_000, deleted: 3 });
        assert_eq!(policy_merge(tiered.iter().copied(), 0, 100), Some(vec![40]));
    }
}
