//! The in-memory inverted index over pending (not yet flushed) documents.
//!
//! Queries must not scan the delta: with the default flush threshold it
//! holds up to 50,000 documents, and a scan costs milliseconds. A
//! [`DeltaIndex`] maps each signature hash and each (band, band key) to the
//! ids of the pending documents that have it, and each listed document to
//! its lengths (what a query's window and bounds weigh).
//!
//! One index is shared, behind a lock, by every [`State`](super::State)
//! between two flushes. A commit only queues its new documents (an `Arc`
//! each: ingest pays no hashing); the first query that needs the postings
//! indexes the queue. The index may therefore list documents that a given
//! snapshot does not hold (committed after it, deleted, replaced); every
//! candidate a query verifies is looked up in the snapshot's own delta map,
//! which stays the truth, so each snapshot sees exactly its documents. Every committed
//! document passes through the queue, so the index holds a superset of
//! every snapshot's delta once the queue is drained. A flush starts a fresh
//! index for the documents it leaves pending; older snapshots keep the old
//! one alive through their `Arc`.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use super::DeltaDoc;

/// A multiplicative hasher (FxHash's step) for keys that are already hash
/// values or small integers: SipHash would dominate the cost of appending
/// hundreds of postings per document.
#[derive(Default, Clone, Copy)]
pub(super) struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7C_C1_B7_27_22_0A_95);
    }
}

pub(super) type MixMap<K, V> = HashMap<K, V, BuildHasherDefault<MixHasher>>;
pub(super) type MixSet<K> = std::collections::HashSet<K, BuildHasherDefault<MixHasher>>;

/// The ids listed under one key: most signatures of a pending document are
/// its alone, and a vector of one id would cost an allocation (and a free)
/// for each of them.
#[derive(Debug)]
enum Ids {
    One(u64),
    Many(Vec<u64>),
}

impl Ids {
    fn push(&mut self, id: u64) {
        match self {
            Ids::One(first) => *self = Ids::Many(vec![*first, id]),
            Ids::Many(ids) => ids.push(id),
        }
    }

    fn as_slice(&self) -> &[u64] {
        match self {
            Ids::One(id) => std::slice::from_ref(id),
            Ids::Many(ids) => ids,
        }
    }
}

fn list<K: std::hash::Hash + Eq>(map: &mut MixMap<K, Ids>, key: K, id: u64) {
    match map.entry(key) {
        std::collections::hash_map::Entry::Occupied(mut ids) => ids.get_mut().push(id),
        std::collections::hash_map::Entry::Vacant(slot) => {
            slot.insert(Ids::One(id));
        }
    }
}

/// Signature hash → ids, and (band, band key) → ids, of pending documents,
/// plus the committed documents not yet listed.
#[derive(Debug, Default)]
pub(super) struct DeltaIndex {
    postings: MixMap<u64, Ids>,
    bands: MixMap<(u32, u64), Ids>,
    /// No band buckets (a writer's own index, which only exact queries
    /// read).
    without_bands: bool,
    /// Each listed document's multiset and set lengths: what a query's
    /// window and bounds weigh, without looking the document up in a
    /// snapshot's delta (a B-tree) or summing its frequencies.
    lengths: MixMap<u64, (u64, u64)>,
    queue: Vec<(u64, Arc<DeltaDoc>)>,
}

impl DeltaIndex {
    /// A shared index over `docs` (queued).
    pub(super) fn shared<'a>(docs: impl IntoIterator<Item = (&'a u64, &'a Arc<DeltaDoc>)>) -> Arc<RwLock<DeltaIndex>> {
        let mut index = DeltaIndex::default();
        index.queue(docs);
        Arc::new(RwLock::new(index))
    }

    /// An index without band buckets, for exact queries only.
    pub(super) fn without_bands() -> DeltaIndex {
        DeltaIndex { without_bands: true, ..DeltaIndex::default() }
    }

    /// Queues `docs` for listing.
    pub(super) fn queue<'a>(&mut self, docs: impl IntoIterator<Item = (&'a u64, &'a Arc<DeltaDoc>)>) {
        self.queue.extend(docs.into_iter().map(|(&id, doc)| (id, Arc::clone(doc))));
    }

    fn drain(&mut self) {
        for (id, doc) in std::mem::take(&mut self.queue) {
            self.lengths.insert(id, (doc.vector.total(), doc.vector.distinct()));
            for &hash in doc.vector.hashes() {
                list(&mut self.postings, hash, id);
            }
            if !self.without_bands {
                for (band, &key) in doc.band_keys.iter().enumerate() {
                    list(&mut self.bands, (band as u32, key), id);
                }
            }
        }
    }

    /// The index with its queue listed (a writer's own, which no lock
    /// shares).
    pub(super) fn listed(&mut self) -> &DeltaIndex {
        self.drain();
        self
    }

    /// Ids listed under a signature hash.
    pub(super) fn posting(&self, hash: u64) -> Option<&[u64]> {
        self.postings.get(&hash).map(Ids::as_slice)
    }

    /// The multiset and set lengths of a listed document.
    pub(super) fn lengths(&self, id: u64) -> Option<(u64, u64)> {
        self.lengths.get(&id).copied()
    }

    /// Ids listed under a band key.
    pub(super) fn bucket(&self, band: u32, key: u64) -> Option<&[u64]> {
        self.bands.get(&(band, key)).map(Ids::as_slice)
    }
}

/// The shared index for reading, with its queue listed first. A writer
/// that panicked while listing leaves a superset of some snapshot's
/// documents plus a queue, which is still correct to read and drain.
pub(super) fn read(index: &RwLock<DeltaIndex>) -> RwLockReadGuard<'_, DeltaIndex> {
    loop {
        let guard = index.read().unwrap_or_else(|p| p.into_inner());
        if guard.queue.is_empty() {
            return guard;
        }
        drop(guard);
        index.write().unwrap_or_else(|p| p.into_inner()).drain();
    }
}

/// Fingerprint → ids of pending (or staged) documents: the writer's
/// exact-duplicate check over the documents that are in no segment yet.
/// Like [`DeltaIndex`] it may list more than the current delta (documents
/// since deleted, replaced or flushed): every id it yields is checked
/// against the delta, and a flush starts a fresh map.
#[derive(Debug, Default)]
pub(super) struct DeltaFingerprints(MixMap<u128, Vec<u64>>);

impl DeltaFingerprints {
    /// The map of `docs`.
    pub(super) fn of<'a>(docs: impl IntoIterator<Item = (&'a u64, &'a Arc<DeltaDoc>)>) -> Self {
        let mut map = DeltaFingerprints::default();
        for (&id, doc) in docs {
            map.add(id, doc.fingerprint);
        }
        map
    }

    /// Lists `id` under `fingerprint`.
    pub(super) fn add(&mut self, id: u64, fingerprint: crate::hash::Fingerprint) {
        self.0.entry(fingerprint.0).or_default().push(id);
    }

    /// The ids listed under `fingerprint`.
    pub(super) fn ids(&self, fingerprint: crate::hash::Fingerprint) -> &[u64] {
        self.0.get(&fingerprint.0).map_or(&[], Vec::as_slice)
    }
}
