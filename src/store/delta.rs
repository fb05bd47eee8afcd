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

use std::collections::{BTreeMap, HashMap};
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

/// The top bit of a listed value: set, the value's other bits are the
/// index of its key's ids in [`DeltaIndex::many`]; clear, the value is the
/// key's one id. Most signatures of a pending document are its alone: a
/// vector of one id would cost an allocation (and a free) for each of
/// them, and a bucket of the map holds 16 bytes instead of 32.
const MANY: u64 = 1 << 63;

/// Lists `id` under `key`: in the value itself while it is the key's only
/// id (and below [`MANY`]), else in a list of `many`.
fn list<K: std::hash::Hash + Eq>(map: &mut MixMap<K, u64>, many: &mut Vec<Vec<u64>>, key: K, id: u64) {
    // `ids` as a new list of `many`: the value that stands for it.
    let spill = |many: &mut Vec<Vec<u64>>, ids: Vec<u64>| {
        many.push(ids);
        MANY | (many.len() - 1) as u64
    };
    match map.entry(key) {
        std::collections::hash_map::Entry::Occupied(mut slot) => {
            let value = *slot.get();
            if value & MANY != 0 {
                many[(value & !MANY) as usize].push(id);
            } else {
                slot.insert(spill(many, vec![value, id]));
            }
        }
        std::collections::hash_map::Entry::Vacant(slot) if id & MANY == 0 => {
            slot.insert(id);
        }
        std::collections::hash_map::Entry::Vacant(slot) => {
            slot.insert(spill(many, vec![id]));
        }
    }
}

/// The ids a listed `value` stands for.
fn ids<'a>(value: &'a u64, many: &'a [Vec<u64>]) -> &'a [u64] {
    if value & MANY == 0 {
        std::slice::from_ref(value)
    } else {
        &many[(value & !MANY) as usize]
    }
}

/// How many documents no longer pending a shared index may list beyond as
/// many as are pending before a commit replaces it ([`DeltaIndex::outgrown`]):
/// a new index costs listing every pending document, so it is made once
/// at least as many have been listed since the last.
pub(super) const OUTGROWN_SLACK: usize = 1_024;

/// Signature hash → ids, and (band, band key) → ids, of pending documents,
/// plus the committed documents not yet listed.
#[derive(Debug, Default)]
pub(super) struct DeltaIndex {
    postings: MixMap<u64, u64>,
    bands: MixMap<(u32, u64), u64>,
    /// The ids of the keys listed under more than one (see [`MANY`]).
    many: Vec<Vec<u64>>,
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
        DeltaIndex::default().sharing(docs)
    }

    /// This index, shared, with `docs` queued.
    fn sharing<'a>(mut self, docs: impl IntoIterator<Item = (&'a u64, &'a Arc<DeltaDoc>)>) -> Arc<RwLock<DeltaIndex>> {
        self.queue(docs);
        Arc::new(RwLock::new(self))
    }

    /// The index a flush starts, over the `docs` it leaves pending, in
    /// tables reserved at the sizes of `old` (the index of the flushed
    /// documents), which the documents up to the next flush about fill:
    /// grown from empty, each doubling would move every key listed into
    /// memory faulted in afresh. (Memory is reserved, not touched: the
    /// tables are resident as keys fill them.)
    pub(super) fn after_flush<'a>(
        old: &RwLock<DeltaIndex>,
        docs: impl IntoIterator<Item = (&'a u64, &'a Arc<DeltaDoc>)>,
    ) -> Arc<RwLock<DeltaIndex>> {
        let old = old.read().unwrap_or_else(|p| p.into_inner());
        let index = DeltaIndex {
            postings: MixMap::with_capacity_and_hasher(old.postings.len(), Default::default()),
            bands: MixMap::with_capacity_and_hasher(old.bands.len(), Default::default()),
            many: Vec::with_capacity(old.many.len()),
            lengths: MixMap::with_capacity_and_hasher(old.lengths.len(), Default::default()),
            ..DeltaIndex::default()
        };
        index.sharing(docs)
    }

    /// Whether the shared `index` lists more than twice `pending`
    /// documents and [`OUTGROWN_SLACK`] more (listed or queued): documents
    /// removed from the delta since it began, which it lists until a new
    /// index replaces it.
    pub(super) fn outgrown(index: &RwLock<DeltaIndex>, pending: usize) -> bool {
        let index = index.read().unwrap_or_else(|p| p.into_inner());
        index.lengths.len() + index.queue.len() > 2 * pending + OUTGROWN_SLACK
    }

    /// An index without band buckets, for exact queries only.
    pub(super) fn without_bands() -> DeltaIndex {
        DeltaIndex { without_bands: true, ..DeltaIndex::default() }
    }

    /// Queues `docs` for listing.
    pub(super) fn queue<'a>(&mut self, docs: impl IntoIterator<Item = (&'a u64, &'a Arc<DeltaDoc>)>) {
        self.queue.extend(docs.into_iter().map(|(&id, doc)| (id, Arc::clone(doc))));
    }

    /// Room for `docs` more documents holding `keys` signatures in all, so
    /// that listing them moves no key already listed (a writer's own
    /// index, which lists no band keys).
    pub(super) fn reserve(&mut self, docs: usize, keys: usize) {
        self.postings.reserve(keys);
        self.lengths.reserve(docs);
    }

    fn drain(&mut self) {
        for (id, doc) in std::mem::take(&mut self.queue) {
            self.lengths.insert(id, (doc.vector.total(), doc.vector.distinct()));
            for &hash in doc.vector.hashes() {
                list(&mut self.postings, &mut self.many, hash, id);
            }
            if !self.without_bands {
                for (band, &key) in doc.band_keys.iter().enumerate() {
                    list(&mut self.bands, &mut self.many, (band as u32, key), id);
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
        self.postings.get(&hash).map(|value| ids(value, &self.many))
    }

    /// The multiset and set lengths of a listed document.
    pub(super) fn lengths(&self, id: u64) -> Option<(u64, u64)> {
        self.lengths.get(&id).copied()
    }

    /// Ids listed under a band key.
    pub(super) fn bucket(&self, band: u32, key: u64) -> Option<&[u64]> {
        self.bands.get(&(band, key)).map(|value| ids(value, &self.many))
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

/// The pending documents of a snapshot, by id: the delta's truth (the
/// [`DeltaIndex`] may list more). Held as runs of documents, each an
/// immutable map behind an `Arc`, every id of a run below every id of the
/// next (a commit's documents have ids above all before them), so that a
/// snapshot's copy shares every run: a commit while a searcher holds the
/// state before copies no document. With one map (until 2026-12-07) such a
/// commit copied the whole delta, and the searcher's drop freed the old
/// copy: at 15,000 pending pages, committed one at a time with a searcher
/// held across each commit, half of the process's time went to the map's
/// `clone` and `drop` (ARCHITECTURE.md, the paragraph on `State`).
///
/// A commit's documents go in a run of their own, which is merged into the
/// one before while that one is at most twice as long (as a binary
/// counter carries), so a document is copied a logarithmic number of times
/// over its life in the delta, and there are a logarithmic number of runs
/// to look an id up in.
///
/// A document removed from a run that another snapshot shares is not
/// copied out of it: its id goes in `removed` (a bitmap, cheap to copy),
/// and the run's documents are looked up and listed past it; merging runs
/// drops the removed ones for good. Copying the run instead made a commit
/// that replaces a pending document while a searcher holds the state cost
/// the whole run (ARCHITECTURE.md, the paragraph on `State`).
#[derive(Debug, Default, Clone)]
pub(super) struct PendingDocs {
    runs: Vec<Arc<BTreeMap<u64, Arc<DeltaDoc>>>>,
    /// Each run's last id, for the search of an id's run.
    lasts: Vec<u64>,
    /// Ids still in a run but no longer pending.
    removed: super::DeletedIds,
    len: usize,
}

impl PendingDocs {
    /// How many documents are pending.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The run that would hold `id`: the first whose last id is not below it.
    fn run_of(&self, id: u64) -> usize {
        self.lasts.partition_point(|&last| last < id)
    }

    /// The pending document `id`.
    pub(super) fn get(&self, id: &u64) -> Option<&Arc<DeltaDoc>> {
        let doc = self.runs.get(self.run_of(*id))?.get(id)?;
        (self.removed.is_empty() || !self.removed.contains(*id)).then_some(doc)
    }

    pub(super) fn contains_key(&self, id: &u64) -> bool {
        self.get(id).is_some()
    }

    /// Every pending document, ascending by id.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&u64, &Arc<DeltaDoc>)> {
        let removed = (!self.removed.is_empty()).then_some(&self.removed);
        self.runs.iter().flat_map(|run| run.iter()).filter(move |(&id, _)| removed.is_none_or(|r| !r.contains(id)))
    }

    /// Every pending id, ascending.
    pub(super) fn keys(&self) -> impl Iterator<Item = &u64> {
        self.iter().map(|(id, _)| id)
    }

    /// Every pending document, ascending by id.
    pub(super) fn values(&self) -> impl Iterator<Item = &Arc<DeltaDoc>> {
        self.iter().map(|(_, doc)| doc)
    }

    /// Takes `id` out: out of its run if no other snapshot shares it, else
    /// into `removed`.
    pub(super) fn remove(&mut self, id: &u64) -> Option<Arc<DeltaDoc>> {
        let at = self.run_of(*id);
        let run = self.runs.get_mut(at)?;
        if !run.contains_key(id) || self.removed.contains(*id) {
            return None;
        }
        let Some(run) = Arc::get_mut(run) else {
            self.removed.insert(*id);
            self.len -= 1;
            return run.get(id).cloned();
        };
        let removed = run.remove(id);
        match run.last_key_value() {
            Some((&last, _)) => self.lasts[at] = last,
            None => {
                self.runs.remove(at);
                self.lasts.remove(at);
            }
        }
        self.len -= 1;
        removed
    }

    /// Adds a commit's documents: a run of their own, merged into the runs
    /// before while each is at most twice as long. Documents whose ids do
    /// not all come after the last pending one (never from a writer,
    /// whose ids ascend) go into one run with every other.
    pub(super) fn extend(&mut self, added: BTreeMap<u64, Arc<DeltaDoc>>) {
        let (Some((&first, _)), Some((&last, _))) = (added.first_key_value(), added.last_key_value()) else {
            return;
        };
        if self.lasts.last().is_some_and(|&before| before >= first) {
            let mut all: BTreeMap<u64, Arc<DeltaDoc>> = self.iter().map(|(&id, doc)| (id, Arc::clone(doc))).collect();
            all.extend(added);
            *self = PendingDocs::from(all);
            return;
        }
        self.len += added.len();
        self.runs.push(Arc::new(added));
        self.lasts.push(last);
        while let [.., before, newest] = self.runs.as_slice() {
            if before.len() > 2 * newest.len() {
                break;
            }
            // The two runs' documents into one map (moved where no other
            // snapshot shares a run, else copied: an `Arc` each).
            let (newest, before) = (self.runs.pop().unwrap_or_default(), self.runs.pop().unwrap_or_default());
            let mut merged = Arc::unwrap_or_clone(before);
            merged.append(&mut Arc::unwrap_or_clone(newest));
            // The removed documents the two runs held go for good.
            if !self.removed.is_empty() {
                merged.retain(|&id, _| !self.removed.remove(id));
            }
            self.lasts.truncate(self.lasts.len() - 2);
            if let Some((&last, _)) = merged.last_key_value() {
                self.runs.push(Arc::new(merged));
                self.lasts.push(last);
            }
        }
    }

    /// How many documents the runs hold, removed ones included (for tests).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.runs.iter().map(|run| run.len()).sum()
    }

    /// How many runs hold the documents (for tests).
    #[cfg(test)]
    fn runs(&self) -> usize {
        self.runs.len()
    }
}

/// Pending documents by id, as a query of them reads them: a snapshot's
/// ([`PendingDocs`]) or a writer's staged ones (one map).
pub(super) trait DocsById {
    /// The document `id`.
    fn doc(&self, id: u64) -> Option<&Arc<DeltaDoc>>;
    /// Every document, ascending by id.
    fn docs(&self) -> impl Iterator<Item = (&u64, &Arc<DeltaDoc>)>;
    /// Whether there is none.
    fn none(&self) -> bool;
}

/// Both kinds answer with their own `get`, `iter` and `is_empty`.
macro_rules! docs_by_id {
    ($($kind:ty),*) => {$(
        impl DocsById for $kind {
            fn doc(&self, id: u64) -> Option<&Arc<DeltaDoc>> {
                self.get(&id)
            }
            fn docs(&self) -> impl Iterator<Item = (&u64, &Arc<DeltaDoc>)> {
                self.iter()
            }
            fn none(&self) -> bool {
                self.is_empty()
            }
        }
    )*};
}

docs_by_id!(PendingDocs, BTreeMap<u64, Arc<DeltaDoc>>);

impl From<BTreeMap<u64, Arc<DeltaDoc>>> for PendingDocs {
    fn from(docs: BTreeMap<u64, Arc<DeltaDoc>>) -> PendingDocs {
        match docs.last_key_value() {
            Some((&last, _)) => PendingDocs {
                len: docs.len(),
                runs: vec![Arc::new(docs)],
                lasts: vec![last],
                removed: super::DeletedIds::new(),
            },
            None => PendingDocs::default(),
        }
    }
}

impl FromIterator<(u64, Arc<DeltaDoc>)> for PendingDocs {
    fn from_iter<I: IntoIterator<Item = (u64, Arc<DeltaDoc>)>>(docs: I) -> PendingDocs {
        PendingDocs::from(docs.into_iter().collect::<BTreeMap<_, _>>())
    }
}

#[cfg(test)]
mod tests {
    use super::{DeltaDoc, DeltaIndex, PendingDocs, MANY, OUTGROWN_SLACK};
    use crate::hash::Fingerprint;
    use crate::vector::SignatureVector;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::sync::{Arc, RwLock};

    fn doc(hashes: &[u64], bands: &[u64]) -> Arc<DeltaDoc> {
        Arc::new(DeltaDoc {
            vector: SignatureVector::from_hashes(hashes.to_vec()),
            band_keys: bands.to_vec(),
            fingerprint: Fingerprint(0),
        })
    }

    /// A shared index is outgrown once it lists (or queues) more than
    /// twice the pending documents and the slack: not while it lists only
    /// them, whatever their number.
    #[test]
    fn an_index_is_outgrown_past_twice_the_pending_documents_and_the_slack() {
        let docs: BTreeMap<u64, Arc<DeltaDoc>> = (0..3_000u64).map(|id| (id, doc(&[id % 7, id], &[id]))).collect();
        let index = DeltaIndex::shared(docs.iter());
        assert!(!DeltaIndex::outgrown(&index, docs.len()), "lists only the pending documents");
        let listed = docs.len();
        let at = (listed - OUTGROWN_SLACK) / 2;
        assert!(!DeltaIndex::outgrown(&index, at), "{listed} listed, {at} pending");
        assert!(DeltaIndex::outgrown(&index, at - 1), "{listed} listed, {} pending", at - 1);
        // Listed or queued, the same count.
        drop(super::read(&index));
        assert!(!DeltaIndex::outgrown(&index, at));
        assert!(DeltaIndex::outgrown(&index, at - 1));
    }

    proptest! {
        /// The runs of pending documents answer as one map would, through
        /// commits (ascending ids, as a writer's), removals, and a commit
        /// out of order, while an older copy (a searcher's snapshot) keeps
        /// answering as it did (the same documents, not copies of them);
        /// the runs stay no more than the count's bits plus two.
        #[test]
        fn pending_docs_are_one_map(
            steps in prop::collection::vec((0usize..40, prop::collection::vec(0u64..400, 0..6), 0u8..20), 1..80),
        ) {
            let mut pending = PendingDocs::default();
            let mut model: BTreeMap<u64, Arc<DeltaDoc>> = BTreeMap::new();
            let mut next = 0u64;
            let mut copies: Vec<(PendingDocs, BTreeMap<u64, Arc<DeltaDoc>>)> = Vec::new();
            for (added, removed, odd) in steps {
                // A commit's documents, above all before unless `odd` is 0.
                let first = if odd == 0 { next / 2 } else { next };
                let commit: BTreeMap<u64, Arc<DeltaDoc>> =
                    (first..first + added as u64).map(|id| (id, doc(&[id], &[]))).collect();
                next = next.max(first + added as u64);
                model.extend(commit.iter().map(|(&id, d)| (id, Arc::clone(d))));
                pending.extend(commit);
                for id in removed {
                    prop_assert_eq!(pending.remove(&id).is_some(), model.remove(&id).is_some());
                }
                if odd % 3 == 0 {
                    copies.push((pending.clone(), model.clone()));
                }
                prop_assert_eq!(pending.len(), model.len());
                prop_assert_eq!(pending.is_empty(), model.is_empty());
                prop_assert!(pending.iter().map(|(&id, d)| (id, Arc::as_ptr(d))).eq(model.iter().map(|(&id, d)| (id, Arc::as_ptr(d)))));
                for id in 0..next + 2 {
                    prop_assert_eq!(pending.get(&id).map(Arc::as_ptr), model.get(&id).map(Arc::as_ptr));
                    prop_assert_eq!(pending.contains_key(&id), model.contains_key(&id));
                }
                let held = pending.held();
                prop_assert!(pending.runs() <= (usize::BITS - held.leading_zeros()) as usize + 2, "{} runs for {}", pending.runs(), held);
            }
            for (copy, then) in copies {
                prop_assert!(copy.iter().map(|(&id, d)| (id, Arc::as_ptr(d))).eq(then.iter().map(|(&id, d)| (id, Arc::as_ptr(d)))));
                prop_assert_eq!(copy.len(), then.len());
            }
        }

        /// Every key lists exactly the documents that hold it, in the
        /// order they were queued (ids above 2^63 included), with their
        /// lengths; after a flush, the next index lists only the
        /// documents left pending.
        #[test]
        fn keys_list_their_documents(
            docs in prop::collection::vec((prop::bool::ANY, prop::collection::btree_set(0u64..40, 1..12), 0u64..6), 1..60),
            keep in prop::collection::vec(prop::bool::ANY, 60),
        ) {
            let docs: Vec<(u64, Arc<DeltaDoc>)> = docs
                .iter()
                .enumerate()
                .map(|(n, (high, hashes, band))| {
                    let id = if *high { MANY + n as u64 } else { n as u64 };
                    let hashes: Vec<u64> = hashes.iter().copied().collect();
                    (id, doc(&hashes, &[*band, band + 1]))
                })
                .collect();
            let expect = |docs: &[(u64, Arc<DeltaDoc>)]| {
                let mut postings: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
                let mut bands: BTreeMap<(u32, u64), Vec<u64>> = BTreeMap::new();
                for (id, doc) in docs {
                    for &hash in doc.vector.hashes() {
                        postings.entry(hash).or_default().push(*id);
                    }
                    for (band, &key) in doc.band_keys.iter().enumerate() {
                        bands.entry((band as u32, key)).or_default().push(*id);
                    }
                }
                (postings, bands)
            };
            let all = docs.clone();
            let check = |lock: &RwLock<DeltaIndex>, docs: &[(u64, Arc<DeltaDoc>)]| {
                let index = super::read(lock);
                let (postings, bands) = expect(docs);
                for hash in 0..40 {
                    prop_assert_eq!(index.posting(hash), postings.get(&hash).map(Vec::as_slice));
                }
                for band in 0..2 {
                    for key in 0..8 {
                        prop_assert_eq!(index.bucket(band, key), bands.get(&(band, key)).map(Vec::as_slice));
                    }
                }
                for (id, doc) in &all {
                    let listed = docs.iter().any(|(listed, _)| listed == id);
                    let lengths = listed.then(|| (doc.vector.total(), doc.vector.distinct()));
                    prop_assert_eq!(index.lengths(*id), lengths);
                }
                Ok(())
            };
            // Queued in two commits, as a writer does.
            let (first, second) = docs.split_at(docs.len() / 2);
            let shared = DeltaIndex::shared(first.iter().map(|(id, d)| (id, d)));
            drop(super::read(&shared)); // The first commit listed.
            shared.write().unwrap().queue(second.iter().map(|(id, d)| (id, d)));
            check(&shared, &docs)?;
            // A flush that leaves some documents pending: a new index of
            // those, reserved at the old one's sizes; the old one, which
            // older snapshots still read, unchanged.
            let pending: Vec<(u64, Arc<DeltaDoc>)> =
                docs.iter().zip(&keep).filter(|(_, &k)| k).map(|(d, _)| d.clone()).collect();
            let next = DeltaIndex::after_flush(&shared, pending.iter().map(|(id, d)| (id, d)));
            check(&next, &pending)?;
            check(&shared, &docs)?;
            let (old, next) = (super::read(&shared), super::read(&next));
            prop_assert!(next.postings.capacity() >= old.postings.len());
            prop_assert!(next.bands.capacity() >= old.bands.len());
        }
    }
}
