//! Merging segments in place: the merged file is assembled from the
//! sources' sections without decoding their documents into vectors and
//! without rebuilding their tables from `(key, ordinal)` pairs.
//!
//! The documents keep their order by (length, id): a merge only
//! interleaves the sources, so each source's ordinals map to ascending
//! ordinals of the merged segment. The vector sections are copied document
//! by document in the new order. The posting and band tables are merged by
//! key: keys are hash values, spread evenly over `u64`, so the key space is
//! cut into batches of about a million ordinals. In a batch, the lists of
//! one source after another are remapped (the deleted documents' ordinals
//! dropped) into an arena, so that the random look-ups into the ordinal
//! maps go to one source's map at a time, which stays in cache. The batch
//! is then cut into ranges of about a hundred keys: each source contributes
//! the (sorted, contiguous) run of its keys in a range, a small sort per
//! range puts them in order, and each key's remapped lists are joined and
//! written. Band keys are read from the band tables, not recomputed from
//! the vectors.
//!
//! The result is, byte for byte, the file [`super::build_segment_file`]
//! writes for the same live documents (with the band keys the sources'
//! tables hold); a test checks it.

use super::{
    assemble, le_u64, Borrowed, EntryWidth, IndexError, Ordinals, Pieces, PostingList, SectionKind, Segment,
    SegmentFile, TableWriter, Tables, SECTIONS, SEGMENT_VERSION,
};

/// The merged ordinal of a document that is dropped (deleted).
const DROPPED: u32 = u32::MAX;

/// Keys a range of the key space holds on average.
const KEYS_PER_RANGE: usize = 128;

/// Ordinals a batch of ranges holds on average (an arena of 4 MiB).
const BATCH_ORDINALS: usize = 1 << 20;

/// A live document of a source, in the merged order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Placed {
    length: u64,
    id: u64,
    source: u32,
    ordinal: u32,
}

/// The oldest segment format version [`merge_segments`] reads in place:
/// versions 4 and 5 differ from 6 only in having no packed lists (4) and
/// all key bits stored (4 and 5), which the readers handle.
const MERGES_FROM: u32 = 4;

/// Whether [`merge_segments`] reads `segment` in place: it has the current
/// format version or one whose sections it copies the same way.
pub fn merges_in_place<B: AsRef<[u8]>>(segment: &Segment<B>) -> bool {
    (MERGES_FROM..=SEGMENT_VERSION).contains(&segment.version)
}

/// Builds the segment `segment_id` from the documents of `sources` for
/// which `deleted` is false; `None` when there are none. Every source's
/// checksums are verified first, and what the merge relies on (keys
/// ascending, vectors sorted, ordinals in range) is checked as it reads, so
/// a damaged source is an error, never a merged segment that carries the
/// damage under a valid checksum.
///
/// # Errors
/// [`IndexError::Corrupted`] for a damaged source or one of another band
/// count; [`IndexError::Incompatible`] for a source of an older format
/// version (see [`merges_in_place`]).
pub fn merge_segments<'a, B: AsRef<[u8]> + Sync>(
    segment_id: u64,
    bands: u32,
    sources: &[&'a Segment<B>],
    deleted: impl Fn(u64) -> bool,
) -> Result<Option<SegmentFile<'a>>, IndexError> {
    merge_in_batches(segment_id, bands, sources, deleted, BATCH_ORDINALS)
}

/// [`merge_segments`] with batches of about `batch_ordinals` ordinals (the
/// tests cut small ones).
fn merge_in_batches<'a, B: AsRef<[u8]> + Sync>(
    segment_id: u64,
    bands: u32,
    sources: &[&'a Segment<B>],
    deleted: impl Fn(u64) -> bool,
    batch_ordinals: usize,
) -> Result<Option<SegmentFile<'a>>, IndexError> {
    for source in sources {
        if !merges_in_place(source) {
            let supported = MERGES_FROM..=SEGMENT_VERSION;
            return Err(IndexError::Incompatible { what: "segment", found: source.version, supported });
        }
        if source.bands != bands {
            let reason = "band count disagrees with the merge's";
            return Err(IndexError::corrupted(&source.name, "header", 28, reason));
        }
        source.verify_checksums()?;
    }
    let mut placed = Vec::new();
    for (s, source) in sources.iter().enumerate() {
        for ordinal in 0..source.doc_count {
            let entry = source.entry(ordinal)?;
            if !deleted(entry.id) {
                placed.push(Placed { length: entry.length, id: entry.id, source: s as u32, ordinal });
            }
        }
    }
    if placed.is_empty() {
        return Ok(None);
    }
    placed.sort_unstable();
    let mut maps: Vec<Vec<u32>> = sources.iter().map(|s| vec![DROPPED; s.doc_count as usize]).collect();
    for (new, p) in placed.iter().enumerate() {
        maps[p.source as usize][p.ordinal as usize] = new as u32;
    }
    let mut sections: Vec<Vec<u8>> = vec![Vec::new(); SECTIONS.len()];
    let (ordinals, borrowed) = copy_vectors(sources, &placed, &mut sections)?;
    let doc_count = placed.len() as u32;
    drop(placed);
    let (postings, band_table) = rayon::join(
        || {
            let kinds = (SectionKind::PostingKeys, SectionKind::PostingOffsets, SectionKind::PostingData);
            // A document's distinct hashes are its postings.
            let postings: usize = sources.iter().map(|s| s.section(SectionKind::Hashes).len() / 8).sum();
            merge_table(sources, &maps, doc_count, postings / batch_ordinals.max(1), kinds)
        },
        || {
            let kinds = (SectionKind::BandKeys, SectionKind::BandOffsets, SectionKind::BandData);
            // A document has a key in every band.
            let postings: usize = sources.iter().map(|s| s.doc_count as usize * bands as usize).sum();
            merge_table(sources, &maps, doc_count, postings / batch_ordinals.max(1), kinds)
        },
    );
    let tables = Tables::place(&mut sections, postings?, band_table?);
    Ok(Some(assemble(segment_id, bands, sections, borrowed, tables, ordinals, EntryWidth::Narrowest)))
}

/// Writes the docs, lengths and escapes sections of the documents
/// `placed`, in that order, from their sources, and lists their hashes and
/// frequencies where the sources hold them (stored as they are: a byte
/// each, 0 for an escaped one); returns their ids, fingerprints and vector
/// entry count, and those two borrowed sections.
fn copy_vectors<'a, B: AsRef<[u8]>>(
    sources: &[&'a Segment<B>],
    placed: &[Placed],
    sections: &mut [Vec<u8>],
) -> Result<(Ordinals, Borrowed<'a>), IndexError> {
    let mut fingerprints_of = Vec::with_capacity(sources.len());
    for source in sources {
        // A current-version segment has them (checked by the caller).
        fingerprints_of.push(source.fingerprints()?.unwrap_or_default());
    }
    sections[0].reserve_exact(placed.len() * super::DOC_ENTRY_LEN);
    let (mut hashes_of, mut freqs_of) = (Pieces::default(), Pieces::default());
    let mut ids = Vec::with_capacity(placed.len());
    let mut fingerprints = Vec::with_capacity(placed.len());
    let mut entries = 0u64;
    let mut last_length = None;
    for (new, p) in placed.iter().enumerate() {
        let source: &'a Segment<B> = sources[p.source as usize];
        let entry = source.entry(p.ordinal)?;
        let (first, distinct) = (entry.first as usize, entry.distinct as usize);
        // In range: `entry` checks it.
        let hashes = &source.section(SectionKind::Hashes)[first * 8..(first + distinct) * 8];
        let mut previous = None;
        for (j, hash) in hashes.chunks_exact(8).enumerate() {
            let hash = le_u64(hash, 0);
            if previous.is_some_and(|p| p >= hash) {
                return Err(source.corrupted(SectionKind::Hashes, (first + j) * 8, "vector not strictly sorted"));
            }
            previous = Some(hash);
        }
        // Sources of version 4 on: a byte a frequency.
        let freqs = source.freqs_of(first, distinct);
        let mut length = 0u64;
        if freqs.len() == distinct && !freqs.contains(&0) {
            length = freqs.iter().map(|&f| u64::from(f)).sum();
        } else {
            for j in 0..distinct {
                let freq = source.freq_in(freqs, first, j).ok_or_else(|| source.zero_frequency(first + j))?;
                length += u64::from(freq);
                if freqs[j] == 0 {
                    // Escaped: stored as 0 here too, with its new index.
                    if freq <= super::FREQ_BYTE_MAX {
                        return Err(source.corrupted(SectionKind::Freqs, first + j, "escaped frequency fits a byte"));
                    }
                    super::push_escape(sections, entries + j as u64, freq);
                }
            }
        }
        if length != entry.length {
            let at = p.ordinal as usize * super::DOC_ENTRY_LEN;
            return Err(source.corrupted(SectionKind::Docs, at, "length disagrees"));
        }
        hashes_of.push(hashes);
        freqs_of.push(freqs);
        let docs = &mut sections[0];
        docs.extend_from_slice(&entry.id.to_le_bytes());
        docs.extend_from_slice(&length.to_le_bytes());
        docs.extend_from_slice(&(entries as u32).to_le_bytes());
        docs.extend_from_slice(&(distinct as u32).to_le_bytes());
        if last_length != Some(length) {
            sections[1].extend_from_slice(&length.to_le_bytes());
            sections[1].extend_from_slice(&(new as u64).to_le_bytes());
            last_length = Some(length);
        }
        entries += distinct as u64;
        ids.push(entry.id);
        let fingerprint = fingerprints_of[p.source as usize].get(p.ordinal as usize);
        let fingerprint = fingerprint.ok_or_else(|| source.corrupted(SectionKind::Fingerprints, 0, "missing"))?;
        fingerprints.push(fingerprint.0);
    }
    let borrowed = Borrowed { hashes: Some(hashes_of), freqs: Some(freqs_of) };
    Ok((Ordinals { ids, fingerprints, entries }, borrowed))
}

/// Merges one bitmap table (`kinds`: its keys, offsets and data sections)
/// of `sources`, whose ordinals `maps` translates (into a segment of
/// `doc_count` documents), into the returned writer, in about `batches`
/// batches.
///
/// The key space is cut twice. A batch is remapped source after source
/// into an arena: the random look-ups then go to one source's map at a
/// time, which stays in cache, where remapping
/// key by key went to every source's map in turn (together larger than a
/// core's cache; that was most of a merge's time). Within a batch, ranges
/// of about [`KEYS_PER_RANGE`] keys put the remapped lists in key order
/// with a small sort each, and each key's lists are joined and written.
fn merge_table<B: AsRef<[u8]>>(
    sources: &[&Segment<B>],
    maps: &[Vec<u32>],
    doc_count: u32,
    batches: usize,
    kinds: (SectionKind, SectionKind, SectionKind),
) -> Result<TableWriter, IndexError> {
    let (key_kind, offsets, data) = kinds;
    let total: usize = sources.iter().map(|s| s.keys(key_kind).len()).sum();
    // Bounds: the merged keys are at most the sources' together; lists
    // only lose ordinals or join, and a joined list is rarely larger than
    // its parts (more is reallocated).
    let data_bytes: usize = sources.iter().map(|s| s.section(data).len()).sum();
    let bits = (total / KEYS_PER_RANGE).max(1).ilog2().min(32);
    // Batches are whole ranges: both are cut by the keys' top bits.
    let batch_bits = batches.max(1).ilog2().min(bits);
    // Per source, the index of its next key and the last key read (its
    // keys are walked a bucket at a time, each read once).
    let mut next_key = vec![0usize; sources.len()];
    let mut previous: Vec<Option<u64>> = vec![None; sources.len()];
    // Per source, (key, start and end in `arena`) of its lists in a batch,
    // and how many of them the ranges have taken.
    let mut lists: Vec<Vec<(u64, u32, u32)>> = vec![Vec::new(); sources.len()];
    let mut taken = vec![0usize; sources.len()];
    // The remapped lists of one batch, one after another.
    let mut arena: Vec<u32> = Vec::new();
    // (key, source, start, end) of the lists in one range.
    let mut run: Vec<(u64, u32, u32, u32)> = Vec::new();
    let mut ordinals: Vec<u32> = Vec::new();
    let mut table = TableWriter::new(doc_count, total, data_bytes);
    // The key that ends the `i`th of `2^b` parts of the key space; the last
    // part runs to the end of every source (u64::MAX included).
    let end_of = |i: u64, b: u32| (i + 1 < 1u64 << b).then(|| (i + 1) << (64 - b));
    for batch in 0..1u64 << batch_bits {
        let batch_end = end_of(batch, batch_bits);
        arena.clear();
        for (s, source) in sources.iter().enumerate() {
            let (keys, map) = (source.keys(key_kind), &maps[s]);
            let (own_lists, last, next) = (&mut lists[s], &mut previous[s], &mut next_key[s]);
            own_lists.clear();
            taken[s] = 0;
            keys.try_walk_from(*next, |at, key| {
                if batch_end.is_some_and(|end| key >= end) {
                    return Ok(false);
                }
                if last.is_some_and(|p| p >= key) {
                    return Err(source.corrupted(key_kind, keys.offset_of(at), "keys not strictly ascending"));
                }
                *last = Some(key);
                let start = arena.len();
                let iter = match source.list_in_place(offsets, data, at)? {
                    PostingList::Single(ordinal) => super::PostingIter::Single(Some(ordinal)),
                    PostingList::Bitmap(view) => super::PostingIter::Bitmap(view.iter_in(0..u32::MAX)),
                    PostingList::Packed(list) => super::PostingIter::Packed(list.iter()),
                };
                for ordinal in iter {
                    let new = *map
                        .get(ordinal as usize)
                        .ok_or_else(|| source.corrupted(data, at, "list names an ordinal past the last document"))?;
                    if new != DROPPED {
                        arena.push(new);
                    }
                }
                // Arena offsets are u32: a batch is refused if it holds
                // 2^32 ordinals (a table of billions of postings per
                // batch, which no segment of u32 ordinals comes near).
                let (Ok(start), Ok(end)) = (u32::try_from(start), u32::try_from(arena.len())) else {
                    return Err(source.corrupted(data, at, "more ordinals in a merge batch than it can hold"));
                };
                own_lists.push((key, start, end));
                *next = at + 1;
                Ok(true)
            })?;
        }
        let first_range = batch << (bits - batch_bits);
        for range in first_range..first_range + (1u64 << (bits - batch_bits)) {
            let end = end_of(range, bits);
            run.clear();
            for (s, lists) in lists.iter().enumerate() {
                let from = taken[s];
                let count = lists[from..].iter().take_while(|l| end.is_none_or(|end| l.0 < end)).count();
                run.extend(lists[from..from + count].iter().map(|&(key, start, end)| (key, s as u32, start, end)));
                taken[s] += count;
            }
            run.sort_unstable();
            let mut i = 0;
            while i < run.len() {
                let key = run[i].0;
                let group = run[i..].iter().take_while(|r| r.0 == key).count();
                let (_, _, start, end) = run[i];
                let single = &arena[start as usize..end as usize];
                // Each source's list ascends, and so does its mapping (a
                // damaged list that does not is sorted, as lists of
                // several sources, which interleave, are).
                let list = if group == 1 && single.windows(2).all(|w| w[0] < w[1]) {
                    single
                } else {
                    ordinals.clear();
                    for &(_, _, start, end) in &run[i..i + group] {
                        ordinals.extend_from_slice(&arena[start as usize..end as usize]);
                    }
                    ordinals.sort_unstable();
                    ordinals.dedup();
                    &ordinals[..]
                };
                if !list.is_empty() {
                    table.push(key, list);
                }
                i += group;
            }
        }
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::{build_segment_file, build_segment_file_of, SegmentDoc};
    use super::*;
    use crate::hash::Fingerprint;
    use crate::vector::SignatureVector;

    /// Spreads small numbers over `u64` (and keeps 0 and `u64::MAX`
    /// reachable: the first and last key ranges).
    fn spread(x: u64) -> u64 {
        match x {
            0 => 0,
            1 => u64::MAX,
            _ => x.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        }
    }

    /// A document from generated numbers: hashes and band keys drawn from
    /// small universes so that sources share keys.
    fn doc(id: u64, hashes: &[(u64, u32)], bands: &[u64]) -> SegmentDoc {
        let vector = SignatureVector::from_pairs(
            hashes.iter().map(|&(h, f)| (spread(h), f)).collect::<std::collections::BTreeMap<_, _>>(),
        );
        let band_keys = if vector.is_empty() { Vec::new() } else { bands.iter().map(|&b| spread(b)).collect() };
        let fingerprint = Fingerprint(u128::from(id % 7).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835));
        SegmentDoc { id, vector, band_keys, fingerprint }
    }

    /// Merging `groups` (each built into a segment) without the documents
    /// `deleted` gives the bytes the writer gives for the live documents.
    fn check(groups: Vec<Vec<SegmentDoc>>, deleted: &std::collections::BTreeSet<u64>) {
        let files: Vec<Vec<u8>> =
            groups.iter().enumerate().map(|(i, g)| build_segment_file(i as u64, 2, g.clone()).to_bytes()).collect();
        let segments: Vec<Segment<&[u8]>> =
            files.iter().map(|f| Segment::parse(f.as_slice(), "src").unwrap()).collect();
        let sources: Vec<&Segment<&[u8]>> = segments.iter().collect();
        let live: Vec<SegmentDoc> = groups.into_iter().flatten().filter(|d| !deleted.contains(&d.id)).collect();
        // The file that borrows its documents' hashes and the one that
        // holds them have the same bytes, length and checksum.
        let built = build_segment_file_of(99, 2, live.iter().map(SegmentDoc::as_ref).collect());
        let expected = (!live.is_empty()).then(|| built.to_bytes());
        if let Some(bytes) = &expected {
            assert_eq!((built.len(), built.crc()), (bytes.len(), crc32fast::hash(bytes)));
            assert_eq!(bytes, &build_segment_file(99, 2, live.clone()).to_bytes());
        }
        // One batch, and batches down to a few keys each.
        for batch_ordinals in [BATCH_ORDINALS, 64, 1] {
            let merged = merge_in_batches(99, 2, &sources, |id| deleted.contains(&id), batch_ordinals).unwrap();
            let bytes = merged.as_ref().map(|file| file.to_bytes());
            assert_eq!(bytes, expected, "batches of {batch_ordinals} ordinals");
            if let (Some(file), Some(bytes)) = (merged, bytes) {
                assert_eq!((file.len(), file.crc()), (bytes.len(), crc32fast::hash(&bytes)));
                Segment::parse(bytes.as_slice(), "merged").unwrap().verify().unwrap();
            }
        }
    }

    fn arb_doc() -> impl Strategy<Value = (Vec<(u64, u32)>, Vec<u64>)> {
        let freq = prop_oneof![8 => 1u32..4, 1 => 250u32..300, 1 => Just(u32::MAX)];
        (prop::collection::vec((0u64..400, freq), 0..24), prop::collection::vec(0u64..40, 2))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn merge_equals_building_from_the_live_documents(
            docs in prop::collection::vec(arb_doc(), 1..80),
            sources in 1usize..6,
            deletions in prop::collection::vec(any::<bool>(), 80),
        ) {
            let mut groups = vec![Vec::new(); sources];
            let mut deleted = std::collections::BTreeSet::new();
            for (i, (hashes, bands)) in docs.iter().enumerate() {
                let id = (i as u64) * 3 + 1;
                groups[(id as usize * 7) % sources].push(doc(id, hashes, bands));
                if deletions[i] && i % 3 == 0 {
                    deleted.insert(id);
                }
            }
            check(groups, &deleted);
        }
    }

    #[test]
    fn merge_of_thousands_crosses_many_key_ranges() {
        let mut state = 0x1234_5678_u64;
        let mut next = move |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        let mut groups = vec![Vec::new(); 8];
        let mut deleted = std::collections::BTreeSet::new();
        for id in 0..3_000u64 {
            let hashes: Vec<(u64, u32)> = (0..next(40)).map(|_| (next(50_000), 1 + next(3) as u32)).collect();
            let bands = [next(3_000), next(3_000)];
            groups[next(8) as usize].push(doc(id, &hashes, &bands));
            if next(10) == 0 {
                deleted.insert(id);
            }
        }
        check(groups.clone(), &deleted);
        // Everything deleted: nothing to write.
        let all: std::collections::BTreeSet<u64> = (0..3_000).collect();
        check(groups, &all);
    }

    #[test]
    fn a_damaged_source_is_an_error() {
        let docs: Vec<SegmentDoc> = (0..50).map(|id| doc(id, &[(id, 1), (id + 1, 2)], &[id, 3])).collect();
        let good = build_segment_file(1, 2, docs.clone()).to_bytes();
        let mut bad =
            build_segment_file(2, 2, docs.iter().map(|d| SegmentDoc { id: d.id + 100, ..d.clone() }).collect())
                .to_bytes();
        let last = bad.len() - 30;
        bad[last] ^= 0x40;
        let good = Segment::parse(good.as_slice(), "good").unwrap();
        let bad = Segment::parse(bad.as_slice(), "bad").unwrap();
        let error = merge_segments(3, 2, &[&good, &bad], |_| false).unwrap_err();
        assert!(matches!(error, IndexError::Corrupted { .. }), "{error}");
        // Another band count is refused too.
        assert!(merge_segments(3, 4, &[&good], |_| false).is_err());
    }

    #[test]
    fn a_source_whose_keys_repeat_is_an_error() {
        let docs: Vec<SegmentDoc> = (0..50).map(|id| doc(id, &[(id, 1), (id + 1, 2)], &[id, 3])).collect();
        let good = build_segment_file(1, 2, docs.clone()).to_bytes();
        let source = Segment::parse(good.as_slice(), "good").unwrap();
        // 51 keys: none dropped, eight bytes each; the second made the
        // first's, with the lists left as they are.
        let (offset, length, _) = source.sections[SectionKind::PostingKeys as usize - 1];
        assert_eq!((source.keys(SectionKind::PostingKeys).dropped(), length), (0, 51 * 8));
        let mut repeated = good.clone();
        repeated.copy_within(offset..offset + 8, offset + 8);
        // The section's checksum made to match: only the walk can tell.
        super::super::match_checksum(&mut repeated, SectionKind::PostingKeys);
        let repeated = Segment::parse(repeated.as_slice(), "repeated").unwrap();
        let error = merge_segments(2, 2, &[&repeated], |_| false).unwrap_err();
        assert!(error.to_string().contains("keys not strictly ascending"), "{error}");
        assert!(merge_segments(2, 2, &[&source], |_| false).is_ok());
    }
}
