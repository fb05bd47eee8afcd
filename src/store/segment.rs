//! Segment files (FORMAT.md §7): the writer that builds one from flushed
//! documents and the reader that parses one from bytes (a memory map in the
//! index, a `Vec` in tests and fuzzing). The reader checks the header and the
//! section table when it opens and every section's CRC32 in [`Segment::verify`];
//! every access is bounds-checked, so corrupt bytes give
//! [`IndexError::Corrupted`], never a panic.

use roaring::RoaringBitmap;

use super::error::IndexError;
use super::roaring_view::RoaringView;
use crate::hash::{le_u64, Fingerprint};
use crate::similarity::{Overlap, Similarity, Threshold};
use crate::vector::SignatureVector;

mod keys;
mod merge;
use keys::Keys;
pub use merge::{merge_segments, merges_in_place};

/// First eight bytes of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"NDXSEGMT";
/// The segment format version this build writes and reads.
pub const SEGMENT_VERSION: u32 = 6;
/// The oldest segment format version this build reads.
pub const SEGMENT_VERSION_MIN: u32 = 1;
const HEADER_LEN: usize = 64;
const TABLE_ENTRY_LEN: usize = 24;
const DOC_ENTRY_LEN: usize = 24;

/// Section kinds, in the order they are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum SectionKind {
    /// Per ordinal: document id, length, first vector entry, distinct count.
    Docs = 1,
    /// Distinct lengths with the first ordinal of each: the length directory.
    Lengths = 2,
    /// Signature hashes of every vector, end to end.
    Hashes = 3,
    /// Frequencies parallel to `Hashes`: a byte each since format version 3
    /// (0: see `FreqEscapes`), a `u32` before.
    Freqs = 4,
    /// Distinct signature hashes, ascending: the posting-list keys.
    PostingKeys = 5,
    /// Per posting key, an entry of the header's width: the list's one
    /// ordinal, or the offset of its bitmap in `PostingData`.
    PostingOffsets = 6,
    /// Serialized roaring bitmaps of ordinals.
    PostingData = 7,
    /// Per ordinal, the document's band keys (before format version 3;
    /// empty since: merges recompute band keys from the vectors).
    DocBands = 8,
    /// Distinct band keys, ascending.
    BandKeys = 9,
    /// Per band key, an entry as in `PostingOffsets`, into `BandData`.
    BandOffsets = 10,
    /// Serialized roaring bitmaps of ordinals.
    BandData = 11,
    /// `(document id, ordinal)` pairs sorted by id: look-up by id.
    IdIndex = 12,
    /// `(hash, list length)` of the longest posting lists, sorted by hash:
    /// the query's rarity order (format version 2).
    Frequent = 13,
    /// `(entry index, frequency)` of the frequencies too large for a byte
    /// of `Freqs` (format version 3).
    FreqEscapes = 14,
    /// `(fingerprint, ordinal)` of every document, ascending: the exact
    /// duplicates of an insert (format version 4).
    Fingerprints = 15,
}

/// A posting list enters the frequent section when it holds at least this
/// many ordinals...
pub const FREQUENT_MIN: u64 = 8;
/// ...and is among the longest `max(FREQUENT_FLOOR, K / 16)` lists of the
/// segment's `K` keys (the section stays under 1/16 of the key and entry
/// sections).
pub const FREQUENT_FLOOR: usize = 1024;

const SECTIONS: [SectionKind; 15] = [
    SectionKind::Docs,
    SectionKind::Lengths,
    SectionKind::Hashes,
    SectionKind::Freqs,
    SectionKind::PostingKeys,
    SectionKind::PostingOffsets,
    SectionKind::PostingData,
    SectionKind::DocBands,
    SectionKind::BandKeys,
    SectionKind::BandOffsets,
    SectionKind::BandData,
    SectionKind::IdIndex,
    SectionKind::Frequent,
    SectionKind::FreqEscapes,
    SectionKind::Fingerprints,
];
const FINGERPRINT_ENTRY_LEN: usize = 20;

/// Sections in a segment of format `version`.
fn section_count(version: u32) -> usize {
    match version {
        1 => 12,
        2 => 13,
        3 => 14,
        _ => SECTIONS.len(),
    }
}

/// In format version 3, frequencies up to this are stored in their byte
/// of the freqs section; larger ones (byte 0) in the escapes section.
const FREQ_BYTE_MAX: u32 = u8::MAX as u32;

/// One document handed to the segment writer.
#[derive(Debug, Clone)]
pub struct SegmentDoc {
    /// Global document id.
    pub id: u64,
    /// Its signature vector.
    pub vector: SignatureVector,
    /// Its LSH band keys (exactly `bands` of them, or none when it has no
    /// signatures).
    pub band_keys: Vec<u64>,
    /// Its exact-content fingerprint.
    pub fingerprint: Fingerprint,
}

impl SegmentDoc {
    /// The document as [`build_segment_file_of`] takes it.
    pub fn as_ref(&self) -> SegmentDocRef<'_> {
        SegmentDocRef { id: self.id, vector: &self.vector, band_keys: &self.band_keys, fingerprint: self.fingerprint }
    }
}

/// A [`SegmentDoc`] whose vector and band keys live elsewhere (a flush
/// writes the pending documents without copying them).
#[derive(Debug, Clone, Copy)]
pub struct SegmentDocRef<'a> {
    /// Global document id.
    pub id: u64,
    /// Its signature vector.
    pub vector: &'a SignatureVector,
    /// Its LSH band keys.
    pub band_keys: &'a [u64],
    /// Its exact-content fingerprint.
    pub fingerprint: Fingerprint,
}

/// A segment file as the writer produces it: the header and the section
/// table, then each section 8-aligned. It is kept in parts so that the
/// file is written without first copying every section into one buffer,
/// and its vector sections may be borrowed where the vectors already are
/// (a merge's sources, a flush's pending documents) rather than copied.
#[derive(Debug)]
pub struct SegmentFile<'a> {
    head: Vec<u8>,
    sections: Vec<SectionBytes<'a>>,
}

/// A section of a [`SegmentFile`], with its CRC32.
#[derive(Debug)]
enum SectionBytes<'a> {
    /// Built in memory.
    Owned(Vec<u8>, u32),
    /// Borrowed pieces, one after another.
    Pieces(Pieces<'a>),
}

impl SectionBytes<'_> {
    fn len(&self) -> usize {
        match self {
            SectionBytes::Owned(bytes, _) => bytes.len(),
            SectionBytes::Pieces(pieces) => pieces.len,
        }
    }

    fn crc(&self) -> u32 {
        match self {
            SectionBytes::Owned(_, crc) => *crc,
            SectionBytes::Pieces(pieces) => pieces.crc.clone().finalize(),
        }
    }
}

/// The bytes of a section as borrowed pieces, their length and CRC32
/// taken as they are added.
#[derive(Debug, Default)]
pub(super) struct Pieces<'a> {
    pieces: Vec<&'a [u8]>,
    len: usize,
    crc: crc32fast::Hasher,
}

impl<'a> Pieces<'a> {
    /// The pieces `pieces`, whose CRC32, taken beforehand, is `crc`.
    fn with_crc(pieces: impl IntoIterator<Item = &'a [u8]>, crc: crc32fast::Hasher) -> Pieces<'a> {
        let pieces: Vec<&[u8]> = pieces.into_iter().filter(|piece| !piece.is_empty()).collect();
        Pieces { len: pieces.iter().map(|piece| piece.len()).sum(), pieces, crc }
    }

    /// Appends `piece`.
    pub(super) fn push(&mut self, piece: &'a [u8]) {
        if !piece.is_empty() {
            self.crc.update(piece);
            self.len += piece.len();
            self.pieces.push(piece);
        }
    }
}

/// Zeros for the alignment padding between sections.
const PADDING: [u8; 8] = [0; 8];

/// Appends to a file's `parts`, which are `len` bytes so far, the padding
/// that 8-aligns a section, then the section's pieces.
fn push_aligned<'s>(parts: &mut Vec<&'s [u8]>, len: &mut usize, pieces: impl IntoIterator<Item = &'s [u8]>) {
    if align8(*len) > *len {
        parts.push(&PADDING[..align8(*len) - *len]);
        *len = align8(*len);
    }
    for piece in pieces {
        parts.push(piece);
        *len += piece.len();
    }
}

impl<'a> SegmentFile<'a> {
    /// The file's bytes in order, padding included.
    pub fn parts(&self) -> Vec<&[u8]> {
        let mut parts = vec![self.head.as_slice()];
        let mut len = self.head.len();
        for section in &self.sections {
            match section {
                SectionBytes::Owned(bytes, _) => push_aligned(&mut parts, &mut len, [bytes.as_slice()]),
                SectionBytes::Pieces(pieces) => push_aligned(&mut parts, &mut len, pieces.pieces.iter().copied()),
            }
        }
        parts
    }

    /// The file's length in bytes.
    pub fn len(&self) -> usize {
        self.sections.iter().fold(self.head.len(), |len, section| align8(len) + section.len())
    }

    /// Whether the file is empty (never: the header is always there).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The CRC32 of the whole file, from the sections' own (no pass over
    /// their bytes).
    pub fn crc(&self) -> u32 {
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&self.head);
        let mut len = self.head.len();
        for section in &self.sections {
            hasher.update(&PADDING[..align8(len) - len]);
            hasher.combine(&crc32fast::Hasher::new_with_initial_len(section.crc(), section.len() as u64));
            len = align8(len) + section.len();
        }
        hasher.finalize()
    }

    /// The header and section table: the file's first bytes.
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// [`SegmentFile::parts`] from byte `start` on, where `start` is the
    /// end of a part (the end of the bytes a [`build_segment_file_writing`]
    /// wrote early).
    pub fn parts_after(&self, start: usize) -> Vec<&[u8]> {
        let mut at = 0;
        let before_start = |part: &&[u8]| {
            let before = at < start;
            at += part.len();
            before
        };
        self.parts().into_iter().skip_while(before_start).collect()
    }

    /// The file's bytes in one buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.parts().concat()
    }

    /// The same file with every section in memory, borrowing nothing.
    pub fn into_owned(self) -> SegmentFile<'static> {
        let sections = self
            .sections
            .into_iter()
            .map(|section| match section {
                SectionBytes::Owned(bytes, crc) => SectionBytes::Owned(bytes, crc),
                SectionBytes::Pieces(pieces) => {
                    let crc = pieces.crc.finalize();
                    SectionBytes::Owned(pieces.pieces.concat(), crc)
                }
            })
            .collect();
        SegmentFile { head: self.head, sections }
    }
}

/// Builds the bytes of a segment file (see [`build_segment_file`]).
pub fn build_segment(segment_id: u64, bands: u32, docs: Vec<SegmentDoc>) -> Vec<u8> {
    build_segment_file(segment_id, bands, docs).to_bytes()
}

/// Builds a segment file. Documents are ordered by (length, id), so that
/// ordinal ranges are length ranges. The posting and band tables are built
/// side by side, each sorted on all cores (rayon).
pub fn build_segment_file(segment_id: u64, bands: u32, docs: Vec<SegmentDoc>) -> SegmentFile<'static> {
    build_segment_file_of(segment_id, bands, docs.iter().map(SegmentDoc::as_ref).collect()).into_owned()
}

/// [`build_segment_file`] of borrowed documents; the file borrows their
/// vectors' hashes (on a little-endian machine, where they are the
/// section's bytes as they are).
pub fn build_segment_file_of<'a>(segment_id: u64, bands: u32, docs: Vec<SegmentDocRef<'a>>) -> SegmentFile<'a> {
    build(segment_id, bands, docs, EntryWidth::Narrowest, None, &mut PairBuffers::default()).0
}

/// The two buffers of `(hash, ordinal)` pairs a flush's posting table is
/// gathered in (`write_posting_table`: up to 192 MiB each), kept from
/// one flush for the next by whoever holds them (a bulk writer's chain,
/// [`crate::store::Writer::commit_and_continue`]). This project's VM
/// fills fresh memory at a fraction of the speed it refills memory a
/// process already has (README, "What limits ingest on this machine"):
/// a word-3-shingle flush of 200,000 pages gathered in fresh buffers
/// faulted in 384 MiB of them each time.
///
/// With them, the byte buffers of the last flush's largest sections (the
/// posting table's keys, entries and lists, the freqs), handed back by
/// [`PairBuffers::keep_sections`] once its file is written: the next
/// flush builds its sections in them rather than in fresh memory (about
/// 700 MB of a 200,000-page word-3-shingle flush).
#[derive(Debug, Default)]
pub struct PairBuffers {
    pairs: [Pairs; 2],
    /// Empty byte buffers, kept for their capacity.
    bytes: Vec<Vec<u8>>,
}

/// A buffer of `(hash, ordinal)` pairs.
type Pairs = Vec<Pair>;

/// A `(key, ordinal)` pair of a table being built, ordered as the tuple
/// is (by key, then ordinal). Packed into 12 bytes, where the tuple takes
/// 16 (padded to the key's alignment): a flush moves each of its pairs
/// through memory four times (placed in its bucket, read and placed in
/// its group, copied back, read for its list), a quarter fewer bytes each
/// time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
#[repr(C, packed(4))]
struct Pair {
    key: u64,
    ordinal: u32,
}

#[cfg(test)]
impl From<(u64, u32)> for Pair {
    fn from((key, ordinal): (u64, u32)) -> Pair {
        Pair { key, ordinal }
    }
}

impl PairBuffers {
    /// The two buffers, the first with room for `most` pairs, the second
    /// too when `both` (a table of more than one pass). A buffer too small
    /// is replaced rather than grown: its pairs are not copied.
    fn take(&mut self, most: usize, both: bool) -> (Pairs, Pairs) {
        let [first, second] = std::mem::take(&mut self.pairs);
        let with_room = |buffer: Pairs| if buffer.capacity() < most { Vec::with_capacity(most) } else { buffer };
        (with_room(first), if both { with_room(second) } else { second })
    }

    /// An empty byte buffer for a section of about `wanted` bytes: the
    /// smallest kept one with room for at least `at_least` of them (a
    /// kept buffer a little short of an estimate's margin still serves;
    /// should it fill, it grows as any `Vec` does), else a new one of
    /// `wanted`.
    fn take_bytes(&mut self, at_least: usize, wanted: usize) -> Vec<u8> {
        if wanted < KEPT_SECTION_MIN {
            return Vec::with_capacity(wanted);
        }
        let fits = self.bytes.iter().enumerate().filter(|(_, b)| b.capacity() >= at_least);
        match fits.min_by_key(|(_, b)| b.capacity()).map(|(at, _)| at) {
            Some(at) => self.bytes.swap_remove(at),
            None => Vec::with_capacity(wanted),
        }
    }

    /// Keeps the buffers of `file`'s sections built in memory (emptied)
    /// for the next flush, in place of those kept before: a buffer the
    /// flush did not take is let go, so what is kept is what one flush
    /// used. Call once the file is written.
    pub fn keep_sections(&mut self, file: SegmentFile<'_>) {
        self.bytes = file
            .sections
            .into_iter()
            .filter_map(|section| match section {
                SectionBytes::Owned(mut bytes, _) if bytes.capacity() >= KEPT_SECTION_MIN => {
                    bytes.clear();
                    Some(bytes)
                }
                _ => None,
            })
            .collect();
    }

    /// The bytes the buffers hold.
    #[cfg(test)]
    fn capacity_bytes(&self) -> usize {
        let bytes: usize = self.bytes.iter().map(Vec::capacity).sum();
        bytes + self.pairs.iter().map(|p| p.capacity() * std::mem::size_of::<Pair>()).sum::<usize>()
    }
}

/// The smallest section buffer [`PairBuffers::keep_sections`] keeps: the
/// small ones cost nothing to make again.
const KEPT_SECTION_MIN: usize = 1 << 20;

/// What writes a segment file's first bytes while its tables are built
/// ([`build_segment_file_writing`]).
pub type EarlyWrite<'e> = &'e (dyn Fn(&[&[u8]]) -> std::io::Result<()> + Sync);

/// [`build_segment_file_of`] that hands `early` the file's first bytes as
/// soon as they are known, on a thread of its own while the posting and
/// band tables are built: zeros where the header and section table go,
/// then the docs, lengths, hashes and freqs sections, each 8-aligned, in
/// file order (the writer writes the rest, [`SegmentFile::parts_after`],
/// then the header, [`SegmentFile::head`], over the zeros). A flush's
/// tables take seconds on every core; its file's copy into the page cache
/// then overlaps them instead of following them. Returns the file,
/// `early`'s result and the length of the bytes it was given.
pub fn build_segment_file_writing<'a>(
    segment_id: u64,
    bands: u32,
    docs: Vec<SegmentDocRef<'a>>,
    early: EarlyWrite<'_>,
    buffers: &mut PairBuffers,
) -> (SegmentFile<'a>, std::io::Result<()>, usize) {
    let (file, early) = build(segment_id, bands, docs, EntryWidth::Narrowest, Some(early), buffers);
    let (written, len) = early.unwrap_or((Ok(()), 0));
    (file, written, len)
}

/// How wide the writer makes the entries of the posting and band tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntryWidth {
    /// Four bytes when every offset and ordinal fits in 31 bits, else eight.
    Narrowest,
    /// Eight bytes (tests of the wide form).
    #[cfg(test)]
    Wide,
}

/// The file's first bytes as [`build_segment_file_writing`] hands them
/// over: zeros for the header and section table (and the padding after
/// them), then sections 0 to 3 (docs, lengths, hashes, freqs), the hashes
/// `hashes` when they are borrowed, each after its padding.
fn early_parts<'s>(sections: &'s [Vec<u8>], hashes: Option<&'s Pieces<'_>>, zeros: &'s [u8]) -> Vec<&'s [u8]> {
    let mut parts = vec![zeros];
    let mut len = zeros.len();
    for (at, section) in sections.iter().enumerate().take(4) {
        match hashes.filter(|_| at == 2) {
            Some(pieces) => push_aligned(&mut parts, &mut len, pieces.pieces.iter().copied()),
            None => push_aligned(&mut parts, &mut len, [section.as_slice()]),
        }
    }
    parts
}

fn build<'a>(
    segment_id: u64,
    bands: u32,
    docs: Vec<SegmentDocRef<'a>>,
    width: EntryWidth,
    early: Option<EarlyWrite<'_>>,
    buffers: &mut PairBuffers,
) -> (SegmentFile<'a>, Option<(std::io::Result<()>, usize)>) {
    use rayon::prelude::*;
    // Each document's length read once (its frequencies summed: a pass over
    // memory no cache holds at 200,000 pages), for the order and its entry.
    let mut keyed: Vec<(u64, SegmentDocRef<'a>)> = docs.into_par_iter().map(|d| (d.vector.total(), d)).collect();
    keyed.sort_by_key(|(length, d)| (*length, d.id));
    let (lengths, docs): (Vec<u64>, Vec<SegmentDocRef<'a>>) = keyed.into_iter().unzip();
    let mut sections: Vec<Vec<u8>> = vec![Vec::new(); SECTIONS.len()];
    // Where each document's entries start, then their number.
    let firsts: Vec<u64> = std::iter::once(0)
        .chain(docs.iter().scan(0u64, |entries, d| {
            *entries += d.vector.distinct();
            Some(*entries)
        }))
        .collect();
    let total_entries = firsts[docs.len()] as usize;
    // The hashes as they are in memory when that is their stored form.
    let borrow_hashes = cfg!(target_endian = "little");
    if !borrow_hashes {
        sections[2].reserve_exact(total_entries * 8);
        for doc in &docs {
            doc.vector.hashes().iter().for_each(|hash| sections[2].extend_from_slice(&hash.to_le_bytes()));
        }
    }
    // The freqs, a byte an entry (escapes apart); a new buffer gets a
    // sixteenth more, for the next flush's (its pages untouched until then).
    sections[3] = buffers.take_bytes(total_entries, total_entries + total_entries / 16);
    sections[3].resize(total_entries, 0);
    sections[0].resize(docs.len() * DOC_ENTRY_LEN, 0);
    // The docs section's entries, the freqs and the borrowed hashes' CRC32,
    // on all cores, a run of documents at a time: with a flush's tables
    // on every core, this part had been a tenth of a 200,000-page
    // word-3-shingle flush on one.
    let runs: Vec<(crc32fast::Hasher, Vec<u8>, Vec<usize>)> = {
        let (docs_section, rest) = sections.split_at_mut(1);
        let mut freqs_left = rest[2].as_mut_slice();
        let mut parts = Vec::with_capacity(docs.len().div_ceil(PROLOGUE_RUN));
        for (r, (run, docs_part)) in
            docs.chunks(PROLOGUE_RUN).zip(docs_section[0].chunks_mut(PROLOGUE_RUN * DOC_ENTRY_LEN)).enumerate()
        {
            let start = r * PROLOGUE_RUN;
            let run_entries = (firsts[start + run.len()] - firsts[start]) as usize;
            let (freqs_part, rest) = freqs_left.split_at_mut(run_entries);
            freqs_left = rest;
            parts.push((run, docs_part, freqs_part));
        }
        parts
            .into_par_iter()
            .enumerate()
            .map(|(r, (run, docs_part, freqs_part))| {
                let mut crc = crc32fast::Hasher::new();
                let mut escapes = Vec::new();
                // The posting pairs of each flush bucket, counted while
                // the vector is in the cache for its CRC (a pass of its
                // own over every vector had been about 2% of a 1M
                // word-3-shingle load, on one core at each flush's start).
                let mut counts = vec![0usize; 1 << FLUSH_BUCKET_BITS];
                let run_first = firsts[r * PROLOGUE_RUN];
                for (i, doc) in run.iter().enumerate() {
                    let ordinal = r * PROLOGUE_RUN + i;
                    let entry = &mut docs_part[i * DOC_ENTRY_LEN..(i + 1) * DOC_ENTRY_LEN];
                    entry[..8].copy_from_slice(&doc.id.to_le_bytes());
                    entry[8..16].copy_from_slice(&lengths[ordinal].to_le_bytes());
                    entry[16..20].copy_from_slice(&(firsts[ordinal] as u32).to_le_bytes());
                    entry[20..].copy_from_slice(&(doc.vector.distinct() as u32).to_le_bytes());
                    if borrow_hashes {
                        crc.update(bytemuck::cast_slice(doc.vector.hashes()));
                    }
                    for &hash in doc.vector.hashes() {
                        counts[flush_bucket(hash)] += 1;
                    }
                    let at = (firsts[ordinal] - run_first) as usize..(firsts[ordinal + 1] - run_first) as usize;
                    write_freqs(&mut freqs_part[at], firsts[ordinal], doc.vector.freqs(), &mut escapes);
                }
                (crc, escapes, counts)
            })
            .collect()
    };
    let mut last_length = None;
    for (ordinal, &length) in lengths.iter().enumerate() {
        if last_length != Some(length) {
            sections[1].extend_from_slice(&length.to_le_bytes());
            sections[1].extend_from_slice(&(ordinal as u64).to_le_bytes());
            last_length = Some(length);
        }
    }
    let mut counts = vec![0usize; 1 << FLUSH_BUCKET_BITS];
    for (_, escapes, run_counts) in &runs {
        sections[13].extend_from_slice(escapes);
        counts.iter_mut().zip(run_counts).for_each(|(count, &n)| *count += n);
    }
    let hashes = borrow_hashes.then(|| {
        let crc = combined(runs.iter().map(|(crc, ..)| crc));
        Pieces::with_crc(docs.iter().map(|d| bytemuck::cast_slice(d.vector.hashes())), crc)
    });
    let mut band_buckets: Vec<Pair> = Vec::with_capacity(docs.len() * bands as usize);
    for (ordinal, doc) in docs.iter().enumerate() {
        let ordinal = ordinal as u32;
        band_buckets.extend(doc.band_keys.iter().take(bands as usize).map(|&key| Pair { key, ordinal }));
    }
    let doc_count = docs.len() as u32;
    let vectors: Vec<&[u64]> = docs.iter().map(|d| d.vector.hashes()).collect();
    let tables = || {
        rayon::join(
            || write_posting_table(&vectors, counts, doc_count, PASS_PAIRS, buffers),
            || write_bitmap_table(band_buckets, doc_count),
        )
    };
    let ((posting_table, band_table), early) = match early {
        None => (tables(), None),
        Some(write) => {
            let zeros = vec![0u8; HEADER_LEN + SECTIONS.len() * TABLE_ENTRY_LEN];
            let parts = early_parts(&sections, hashes.as_ref(), &zeros);
            let len = parts.iter().map(|p| p.len()).sum();
            std::thread::scope(|scope| {
                let thread = std::thread::Builder::new().name("neardex-segment-write".into());
                match thread.spawn_scoped(scope, || write(&parts)) {
                    Ok(writing) => {
                        let tables = tables();
                        let written = writing.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                        (tables, Some((written, len)))
                    }
                    // No thread to be had: the first bytes, then the tables.
                    Err(_) => {
                        let written = write(&parts);
                        (tables(), Some((written, len)))
                    }
                }
            })
        }
    };
    let tables = Tables::place(&mut sections, posting_table, band_table);
    let fingerprints = docs.iter().map(|d| d.fingerprint.0).collect();
    let ids = docs.iter().map(|d| d.id).collect();
    let borrowed = Borrowed { hashes, freqs: None };
    let file = assemble(
        segment_id,
        bands,
        sections,
        borrowed,
        tables,
        Ordinals { ids, fingerprints, entries: total_entries as u64 },
        width,
    );
    (file, early)
}

/// The vector sections a file borrows instead of holding (their slots in
/// the owned sections stay empty).
#[derive(Default)]
struct Borrowed<'a> {
    hashes: Option<Pieces<'a>>,
    freqs: Option<Pieces<'a>>,
}

/// Documents a task of [`build`]'s first part takes at a time.
const PROLOGUE_RUN: usize = 1024;

/// Writes the frequencies of a vector whose first entry is entry `first`
/// into `out` (of their number) as the freqs section holds them: each a
/// byte, or 0 and an escape (format version 3 on), appended to
/// `escapes` in its stored form. One pass that the compiler vectorizes,
/// and a second for escapes only when a frequency is past a byte (a page
/// that repeats a signature 256 times): a 1M word-3-shingle load pushed
/// 550 million bytes one at a time before.
fn write_freqs(out: &mut [u8], first: u64, freqs: &[u32], escapes: &mut Vec<u8>) {
    for (byte, &freq) in out.iter_mut().zip(freqs) {
        *byte = if freq <= FREQ_BYTE_MAX { freq as u8 } else { 0 };
    }
    if freqs.iter().any(|&freq| freq > FREQ_BYTE_MAX) {
        for (i, &freq) in freqs.iter().enumerate().filter(|&(_, &freq)| freq > FREQ_BYTE_MAX) {
            escapes.extend_from_slice(&escape(first + i as u64, freq));
        }
    }
}

/// Appends the escape of vector entry `entry`, whose frequency is past a
/// byte, to the escapes section.
fn push_escape(sections: &mut [Vec<u8>], entry: u64, freq: u32) {
    sections[13].extend_from_slice(&escape(entry, freq));
}

/// The stored escape of vector entry `entry`: its index, then its
/// frequency.
fn escape(entry: u64, freq: u32) -> [u8; 16] {
    let mut bytes = [0; 16];
    bytes[..8].copy_from_slice(&entry.to_le_bytes());
    bytes[8..].copy_from_slice(&u64::from(freq).to_le_bytes());
    bytes
}

/// What the writer and the merge know of the ordinals when the tables are
/// built.
struct Ordinals {
    /// Document id by ordinal.
    ids: Vec<u64>,
    /// Fingerprint by ordinal.
    fingerprints: Vec<u128>,
    /// Vector entries in all (the hashes section's length / 8).
    entries: u64,
}

/// The two bitmap tables, their entries in the eight-byte form (the
/// four-byte one, when the file takes it, is made in place).
struct Tables {
    /// The keys, eight little-endian bytes each (stored layout made in
    /// place, [`keys::encode_in_place`]).
    posting_keys: Vec<u8>,
    /// The entries as the writer made them ([`TableEntries`]).
    posting_entries: TableEntries,
    band_keys: Vec<u8>,
    band_entries: TableEntries,
    /// The posting keys whose lists hold at least [`FREQUENT_MIN`]
    /// ordinals, with their lengths, ascending by key.
    frequent: Vec<(u64, u64)>,
}

impl Tables {
    /// Moves the data of the posting and band tables into their sections
    /// and keeps the rest for [`assemble`].
    fn place(sections: &mut [Vec<u8>], postings: TableWriter, bands: TableWriter) -> Tables {
        sections[6] = postings.data;
        sections[10] = bands.data;
        Tables {
            posting_keys: postings.keys,
            posting_entries: TableEntries { bytes: postings.entries, narrow: postings.narrow },
            band_keys: bands.keys,
            band_entries: TableEntries { bytes: bands.entries, narrow: bands.narrow },
            frequent: postings.lengths,
        }
    }
}

/// Completes a segment file whose vector sections (docs, lengths, hashes,
/// freqs, escapes) and the keys and data of its bitmap tables are written:
/// encodes the entries in the narrowest width that holds them, writes the
/// frequent, fingerprint and id sections, then the header and section
/// table.
fn assemble<'a>(
    segment_id: u64,
    bands: u32,
    mut sections: Vec<Vec<u8>>,
    borrowed: Borrowed<'a>,
    tables: Tables,
    ordinals: Ordinals,
    width: EntryWidth,
) -> SegmentFile<'a> {
    let Tables { posting_keys, posting_entries, band_keys, band_entries, mut frequent } = tables;
    let Ordinals { ids, fingerprints, entries } = ordinals;
    let doc_count = ids.len();
    // Narrow entries hold an ordinal in 31 bits, or an offset in 30
    // (flagged packed or not).
    let fits = |data: &[u8]| data.len() <= NARROW_PACKED as usize;
    let narrow = width == EntryWidth::Narrowest
        && doc_count <= NARROW_INLINE as usize
        && fits(&sections[6])
        && fits(&sections[10]);
    sections[5] = posting_entries.in_width(narrow);
    sections[9] = band_entries.in_width(narrow);
    // The candidates hold at least FREQUENT_MIN ordinals (TableWriter).
    let keys = posting_keys.len() / 8;
    let cap = FREQUENT_FLOOR.max(keys / 16);
    if frequent.len() > cap {
        frequent.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        frequent.truncate(cap);
        frequent.sort_unstable();
    }
    for (hash, len) in frequent {
        sections[12].extend_from_slice(&hash.to_le_bytes());
        sections[12].extend_from_slice(&len.to_le_bytes());
    }
    // The key sections in their stored layout, and the fingerprint and id
    // sections, side by side: with nothing else to run, a 200,000-page
    // flush's posting keys took as long as the rest.
    let in_layout = |mut full: Vec<u8>| {
        let t = keys::dropped_bits(full.len() / 8);
        keys::encode_in_place(&mut full, t);
        (full, t as u8)
    };
    let ((posting_keys, posting_dropped), ((band_keys, band_dropped), (by_fingerprint, by_id))) = rayon::join(
        || in_layout(posting_keys),
        || rayon::join(|| in_layout(band_keys), || (fingerprint_section(fingerprints), id_section(ids))),
    );
    let dropped = [posting_dropped, band_dropped];
    sections[4] = posting_keys;
    sections[8] = band_keys;
    sections[14] = by_fingerprint;
    sections[11] = by_id;

    let table_len = SECTIONS.len() * TABLE_ENTRY_LEN;
    let mut out = Vec::with_capacity(HEADER_LEN + table_len);
    out.extend_from_slice(&SEGMENT_MAGIC);
    out.extend_from_slice(&SEGMENT_VERSION.to_le_bytes());
    out.extend_from_slice(&(SECTIONS.len() as u32).to_le_bytes());
    out.extend_from_slice(&segment_id.to_le_bytes());
    out.extend_from_slice(&(doc_count as u32).to_le_bytes());
    out.extend_from_slice(&bands.to_le_bytes());
    out.extend_from_slice(&entries.to_le_bytes());
    out.extend_from_slice(&(if narrow { 4u32 } else { 8 }).to_le_bytes());
    out.extend_from_slice(&dropped);
    out.resize(60, 0);
    let header_crc = crc32fast::hash(&out);
    out.extend_from_slice(&header_crc.to_le_bytes());
    let mut sections: Vec<SectionBytes<'a>> = {
        use rayon::prelude::*;
        sections
            .into_par_iter()
            .map(|bytes| {
                let crc = crc_on_all_cores(&bytes);
                SectionBytes::Owned(bytes, crc)
            })
            .collect()
    };
    for (at, pieces) in [(2, borrowed.hashes), (3, borrowed.freqs)] {
        if let Some(pieces) = pieces {
            debug_assert_eq!(sections[at].len(), 0, "a borrowed section is not also built");
            sections[at] = SectionBytes::Pieces(pieces);
        }
    }
    let mut offset = align8(HEADER_LEN + table_len);
    for (kind, section) in SECTIONS.iter().zip(&sections) {
        out.extend_from_slice(&(*kind as u32).to_le_bytes());
        out.extend_from_slice(&section.crc().to_le_bytes());
        out.extend_from_slice(&(offset as u64).to_le_bytes());
        out.extend_from_slice(&(section.len() as u64).to_le_bytes());
        offset = align8(offset + section.len());
    }
    SegmentFile { head: out, sections }
}

/// The fingerprint section of documents whose fingerprints, by ordinal,
/// are `fingerprints`: (fingerprint, ordinal) ascending.
fn fingerprint_section(fingerprints: Vec<u128>) -> Vec<u8> {
    let mut by_fingerprint: Vec<(u128, u32)> =
        fingerprints.into_iter().enumerate().map(|(o, f)| (f, o as u32)).collect();
    by_fingerprint.sort_unstable();
    let mut section = Vec::with_capacity(by_fingerprint.len() * FINGERPRINT_ENTRY_LEN);
    for (fingerprint, ordinal) in by_fingerprint {
        section.extend_from_slice(&fingerprint.to_le_bytes());
        section.extend_from_slice(&ordinal.to_le_bytes());
    }
    section
}

/// The id section of documents whose ids, by ordinal, are `ids`: (id,
/// ordinal) ascending.
fn id_section(ids: Vec<u64>) -> Vec<u8> {
    let mut by_id: Vec<(u64, u64)> = ids.into_iter().enumerate().map(|(o, id)| (id, o as u64)).collect();
    by_id.sort_unstable();
    let mut section = Vec::with_capacity(by_id.len() * 16);
    for (id, ordinal) in by_id {
        section.extend_from_slice(&id.to_le_bytes());
        section.extend_from_slice(&ordinal.to_le_bytes());
    }
    section
}

/// The CRC32 of `bytes`, in parts of [`CRC_PART`] on all cores, their
/// CRCs combined in order.
fn crc_on_all_cores(bytes: &[u8]) -> u32 {
    use rayon::prelude::*;
    if bytes.len() <= CRC_PART {
        return crc32fast::hash(bytes);
    }
    let parts: Vec<crc32fast::Hasher> = bytes
        .par_chunks(CRC_PART)
        .map(|part| {
            let mut crc = crc32fast::Hasher::new();
            crc.update(part);
            crc
        })
        .collect();
    combined(&parts).finalize()
}

/// The CRC32 state of consecutive parts' bytes, from each part's own.
fn combined<'h>(parts: impl IntoIterator<Item = &'h crc32fast::Hasher>) -> crc32fast::Hasher {
    let mut crc = crc32fast::Hasher::new();
    for part in parts {
        crc.combine(part);
    }
    crc
}

/// The bytes [`crc_on_all_cores`] leaves to one task.
const CRC_PART: usize = 4 << 20;

/// Rewrites an entries section of eight-byte entries in the four-byte
/// form (the caller has checked that every value fits), in place: no
/// second section of a merge's tens of millions of entries at once. Entry
/// `i` is written at `4i`, where its own bytes or ones already read were.
fn narrow_in_place(entries: &mut Vec<u8>) {
    let n = entries.len() / 8;
    for i in 0..n {
        let entry = Entry(le_u64(entries, i * 8));
        entries[i * 4..i * 4 + 4].copy_from_slice(&entry.narrow().to_le_bytes());
    }
    entries.truncate(n * 4);
}

/// Rewrites an entries section of four-byte entries in the eight-byte
/// form, in place: the section grows to twice its length and entry `i`
/// is written at `8i` from the last entry back, so that no entry is
/// overwritten before it is read.
fn widen_in_place(entries: &mut Vec<u8>) {
    let n = entries.len() / 4;
    entries.resize(n * 8, 0);
    for i in (0..n).rev() {
        let entry = Entry::widened(le_u32(entries, i * 4));
        entries[i * 8..i * 8 + 8].copy_from_slice(&entry.0.to_le_bytes());
    }
}

/// A table's entries section as a [`TableWriter`] made it: four-byte
/// entries while the table's ordinals and offsets fit them (the form of
/// nearly every file), else eight-byte ones.
struct TableEntries {
    bytes: Vec<u8>,
    narrow: bool,
}

impl TableEntries {
    /// The section in the file's width: as made, or rewritten in place
    /// (a file is narrow only when both of its tables fit, so the other
    /// table's width can make a narrow table's entries wide).
    fn in_width(self, narrow: bool) -> Vec<u8> {
        let mut bytes = self.bytes;
        match (self.narrow, narrow) {
            (true, false) => widen_in_place(&mut bytes),
            (false, true) => narrow_in_place(&mut bytes),
            _ => {}
        }
        bytes
    }
}

fn align8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// Marks an eight-byte entry of an offsets section that holds a list's
/// only ordinal in its low 32 bits instead of an offset into the data
/// section.
const INLINE: u64 = 1 << 63;
/// The same mark in a four-byte entry (format version 3), whose low 31
/// bits hold the ordinal or the offset.
const NARROW_INLINE: u32 = 1 << 31;
/// Marks an eight-byte entry (format version 5) whose offset is that of a
/// packed list rather than a bitmap.
const PACKED: u64 = 1 << 62;
/// The same mark in a four-byte entry (format version 5), whose low 30
/// bits hold the offset.
const NARROW_PACKED: u32 = 1 << 30;
/// The most ordinals a packed list holds (its count is a byte).
const PACKED_MAX: usize = u8::MAX as usize;

/// The bytes of each ordinal of a packed list in a segment of
/// `doc_count` documents: the fewest that hold its largest ordinal.
fn packed_width(doc_count: u32) -> usize {
    let largest = doc_count.saturating_sub(1);
    (((32 - largest.leading_zeros()) as usize).div_ceil(8)).max(1)
}

/// One entry of an offsets section, before it is encoded.
///
/// Held in its eight-byte stored form (8 bytes where an enum took 16: a
/// merge of a million documents holds tens of millions of them): a list's
/// only ordinal under [`INLINE`], the offset of a packed list under
/// [`PACKED`], or the offset of its bitmap in the data section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry(u64);

impl Entry {
    fn inline(ordinal: u32) -> Entry {
        Entry(INLINE | u64::from(ordinal))
    }

    fn bitmap(offset: u64) -> Entry {
        Entry(offset)
    }

    fn packed(offset: u64) -> Entry {
        Entry(PACKED | offset)
    }

    /// The entry of a four-byte form ([`Entry::narrow`]'s inverse).
    fn widened(narrow: u32) -> Entry {
        if narrow & NARROW_INLINE != 0 {
            Entry::inline(narrow & !NARROW_INLINE)
        } else if narrow & NARROW_PACKED != 0 {
            Entry::packed(u64::from(narrow & !NARROW_PACKED))
        } else {
            Entry::bitmap(u64::from(narrow))
        }
    }

    /// The four-byte form; the caller has checked that the ordinals and
    /// offsets fit it.
    fn narrow(self) -> u32 {
        if self.0 & INLINE != 0 {
            NARROW_INLINE | self.0 as u32
        } else if self.0 & PACKED != 0 {
            NARROW_PACKED | (self.0 & !PACKED) as u32
        } else {
            self.0 as u32
        }
    }
}

/// The most `(hash, ordinal)` pairs one pass of [`write_posting_table`]
/// holds (192 MiB of them, 12 bytes a [`Pair`]), unless one bucket has
/// more; two passes are held at once.
const PASS_PAIRS: usize = 1 << 24;
/// How many documents ahead [`write_posting_table`] asks for a vector's
/// lines.
const AHEAD: usize = 16;
/// The hashes in a 64-byte cache line.
const LINE_HASHES: usize = 64 / std::mem::size_of::<u64>();
/// How many pairs past a bucket's next one [`gather_pass`] asks for the
/// line that will hold it (16 pairs: three lines on; 8 to 64 measured
/// the same).
const WRITE_AHEAD: usize = 16;

/// The posting table of a flush: `vectors[o]` holds the sorted, distinct
/// hashes of ordinal `o`, `counts[b]` how many of them all lie in flush
/// bucket `b` ([`flush_bucket`]; counted by [`build`]'s first part). Its
/// pairs are gathered a few [`top_byte`]
/// buckets at a time, up to `pass_pairs` a pass: each pass takes from
/// every vector, from where the pass before stopped, the hashes below its
/// last bucket's end (the vectors are sorted), places each pair at its
/// bucket's next position, sorts the buckets ([`sort_buckets`]) and
/// writes their lists, while the next pass is gathered and sorted (two
/// buffers). The buffers serve every pass, so a flush of 10^8
/// pairs (a 200,000-page word-3-shingle one) fills 384 MiB of pairs
/// instead of 1.3 GB of fresh memory, which this project's VM fills at
/// about 0.3 GB/s (README, "What limits ingest on this machine"), and its
/// peak memory is that much lower. They are taken from `buffers`, with
/// room for the largest pass, and left there for the next flush
/// ([`PairBuffers`]). Each pass visits every vector: the
/// lines it will read a few documents on are asked for ahead ([`AHEAD`]),
/// since each visit is otherwise a cache miss and a page walk (passes of
/// 2^22 pairs took 2.7–3.9 s a 200,000-page commit without, 1.4–3.0 s
/// with its first line asked for; passes of 2^24 1.1–1.3 s), and so is
/// each bucket's line a few pairs before it is written ([`WRITE_AHEAD`]).
/// The table is the one
/// [`write_bitmap_table`] makes of the same pairs.
fn write_posting_table(
    vectors: &[&[u64]],
    counts: Vec<usize>,
    doc_count: u32,
    pass_pairs: usize,
    buffers: &mut PairBuffers,
) -> TableWriter {
    let total: usize = counts.iter().sum();
    debug_assert_eq!(counts, flush_counts(vectors));
    // As few passes as `pass_pairs` allows, of about the same size (the
    // buffers hold the largest: 20 million pairs take two of 10 million,
    // not one of 2^24 and one of the rest). Their buckets: at least one
    // each, and more while they fit.
    let even = total.div_ceil(total.div_ceil(pass_pairs.max(1)).max(1));
    let mut passes = Vec::new();
    let (mut pass, mut held) = (0..1, counts[0]);
    for (bucket, &count) in counts.iter().enumerate().skip(1) {
        if held + count <= even {
            pass.end = bucket + 1;
            held += count;
        } else {
            passes.push(std::mem::replace(&mut pass, bucket..bucket + 1));
            held = count;
        }
    }
    passes.push(pass);
    let mut cursors = vec![0usize; vectors.len()];
    let most = passes.iter().map(|pass| counts[pass.clone()].iter().sum::<usize>()).max().unwrap_or(0);
    let (mut pairs, mut next_pairs) = buffers.take(most, passes.len() > 1);
    gather_pass(vectors, &counts, passes[0].clone(), &mut cursors, &mut pairs);
    // The first pass's lists tell how many keys and bytes the rest will
    // take (hashes are uniform in their top bits, and a list's bytes do
    // not depend on its key): room for them is reserved once, with a
    // margin, so that the sections are neither copied nor faulted in twice
    // as they grow. A wrong guess only costs a copy.
    let (keys, data) = table_bounds(&pairs, doc_count);
    let scale = |n: usize| (n as f64 * total as f64 / pairs.len().max(1) as f64 * 1.05) as usize + 1024;
    let mut table = TableWriter::in_buffers(doc_count, scale(keys), scale(data), buffers);
    for i in 0..passes.len() {
        // The next pass is gathered and sorted while this one's lists are
        // written.
        match passes.get(i + 1) {
            Some(pass) => {
                rayon::join(
                    || write_lists(&mut table, &pairs),
                    || gather_pass(vectors, &counts, pass.clone(), &mut cursors, &mut next_pairs),
                );
            }
            None => write_lists(&mut table, &pairs),
        }
        std::mem::swap(&mut pairs, &mut next_pairs);
    }
    buffers.pairs = [pairs, next_pairs];
    table
}

/// One pass of [`write_posting_table`]: the pairs of the buckets `pass`
/// (of sizes `counts[pass]`), each vector's taken from `cursors[o]` on,
/// placed into `pairs` bucket by bucket and sorted.
fn gather_pass(
    vectors: &[&[u64]],
    counts: &[usize],
    pass: std::ops::Range<usize>,
    cursors: &mut [usize],
    pairs: &mut Vec<Pair>,
) {
    let own = &counts[pass.clone()];
    let held: usize = own.iter().sum();
    let mut next = starts_of(own);
    // Every slot is written below (each hash of the pass once): the
    // buffer is only zeroed where it grows (within its capacity, reserved
    // for the largest pass).
    if pairs.len() < held {
        pairs.resize(held, Pair::default());
    }
    pairs.truncate(held);
    for (ordinal, hashes) in vectors.iter().enumerate() {
        // The vector a few documents on, every line this pass will read of
        // it (its share of the pass's buckets, the hashes being uniform):
        // each visit is otherwise a miss (and a page walk) for its first
        // line and more for the lines after it.
        if let Some(ahead) = vectors.get(ordinal + AHEAD) {
            let from = cursors[ordinal + AHEAD];
            let share = (ahead.len() * pass.len()) >> FLUSH_BUCKET_BITS;
            for at in (from..=from + share).step_by(LINE_HASHES) {
                crate::store::mmap::prefetch_line(ahead, at);
            }
        }
        let cursor = &mut cursors[ordinal];
        let taken = hashes[*cursor..].iter().take_while(|&&h| flush_bucket(h) < pass.end);
        let mut n = 0;
        for &hash in taken {
            let at = &mut next[flush_bucket(hash) - pass.start];
            pairs[*at] = Pair { key: hash, ordinal: ordinal as u32 };
            // The bucket's line a few pairs on, before it is written: a
            // pass writes hundreds of buckets at once, too many streams for
            // the hardware's prefetcher, and each line's first write
            // otherwise waits for its read.
            crate::store::mmap::prefetch_line(pairs, *at + WRITE_AHEAD);
            *at += 1;
            n += 1;
        }
        *cursor += n;
    }
    sort_buckets(pairs, own, FLUSH_BUCKET_BITS);
}

/// Writes the lists of `pairs` (sorted, distinct) into `table`.
fn write_lists(table: &mut TableWriter, pairs: &[Pair]) {
    let mut ordinals = Vec::new();
    for run in pairs.chunk_by(|a, b| a.key == b.key) {
        ordinals.clear();
        ordinals.extend(run.iter().map(|p| p.ordinal));
        table.push(run[0].key, &ordinals);
    }
}

/// Writes the keys of a bitmap table into `keys` and its lists into the
/// returned writer (see [`TableWriter`]), from `(key, ordinal)` pairs in
/// any order.
fn write_bitmap_table(mut pairs: Vec<Pair>, doc_count: u32) -> TableWriter {
    let (counts, shared) = partition_by_top_byte(&mut pairs);
    sort_buckets(&mut pairs, &counts, shared);
    // A document whose bands share a key would repeat a pair.
    pairs.dedup();
    let (keys, data) = table_bounds(&pairs, doc_count);
    let mut table = TableWriter::new(doc_count, keys, data);
    write_lists(&mut table, &pairs);
    table
}

/// The keys of a table of sorted, distinct `(key, ordinal)` pairs, and a
/// bound on the bytes of its data section ([`TableWriter::push`]): a list
/// of one ordinal takes none, a packed list its count byte and ordinals
/// (a list of at most [`PACKED_MAX`] is stored as a bitmap only when that
/// is smaller), a longer one a roaring bitmap without run containers,
/// eight bytes of header, eight per container and at most two an ordinal
/// (a container past 4,096 ordinals is a bitmap of 8,192 bytes). Reserved
/// up front, a flush's buffers are neither copied nor faulted in twice as
/// they grow (fresh pages cost more than their copy on this project's
/// VM: README, "What limits ingest on this machine").
fn table_bounds(pairs: &[Pair], doc_count: u32) -> (usize, usize) {
    let width = packed_width(doc_count);
    let containers = (doc_count.saturating_sub(1) >> 16) as usize + 1;
    let (mut keys, mut data) = (0, 0);
    for run in pairs.chunk_by(|a, b| a.key == b.key) {
        keys += 1;
        data += match run.len() {
            1 => 0,
            n if n <= PACKED_MAX => packed_len(n, width),
            n => 8 + 8 * containers + 2 * n,
        };
    }
    (keys, data)
}

/// The lists of a bitmap table as they are written, in ascending key
/// order (the writer's and the merge's).
struct TableWriter {
    /// The keys, ascending, eight little-endian bytes each.
    keys: Vec<u8>,
    /// The data section: packed lists and serialized bitmaps.
    data: Vec<u8>,
    /// The bytes of a packed list's ordinals ([`packed_width`]).
    width: usize,
    /// The entries, each in its four-byte stored form while `narrow`,
    /// else in its eight-byte one.
    entries: Vec<u8>,
    /// Whether `entries` are four-byte ones: from the start when every
    /// ordinal fits them, until an offset does not (a data section past
    /// 2^30 bytes), when those written are widened. A file of narrow
    /// entries then needs no pass to narrow them, and the writer fills
    /// half the bytes (`assemble` narrowed eight-byte ones, 0.15-0.18 s
    /// of each 200,000-page word-3-shingle flush, with nothing beside it).
    narrow: bool,
    /// The first offset a four-byte entry cannot hold ([`NARROW_PACKED`];
    /// less in a test of the widening).
    narrow_offsets: u64,
    /// The keys whose lists hold at least [`FREQUENT_MIN`] ordinals, with
    /// their lengths: the candidates for the frequent section.
    lengths: Vec<(u64, u64)>,
}

impl TableWriter {
    /// A writer for the tables of a segment of `doc_count` documents,
    /// with room for `keys` keys and `data` bytes of lists (a flush's
    /// [`table_bounds`], a merge's sources: reserved, its buffers are
    /// neither copied nor faulted in twice as they grow).
    fn new(doc_count: u32, keys: usize, data: usize) -> TableWriter {
        // No buffers kept: each one new, of the room asked for.
        Self::in_buffers(doc_count, keys, data, &mut PairBuffers::default())
    }

    /// [`TableWriter::new`] in buffers kept from the last flush
    /// ([`PairBuffers::take_bytes`]): one a sixteenth short of an
    /// estimate's room still serves.
    fn in_buffers(doc_count: u32, keys: usize, data: usize, buffers: &mut PairBuffers) -> TableWriter {
        let mut take = |wanted: usize| buffers.take_bytes(wanted - wanted / 16, wanted);
        let narrow = doc_count <= NARROW_INLINE;
        TableWriter {
            keys: take(keys * 8),
            data: take(data),
            width: packed_width(doc_count),
            entries: take(keys * if narrow { 4 } else { 8 }),
            narrow,
            narrow_offsets: u64::from(NARROW_PACKED),
            lengths: Vec::new(),
        }
    }

    /// Appends `entry` in the writer's width.
    fn push_entry(&mut self, entry: Entry) {
        if self.narrow {
            self.entries.extend_from_slice(&entry.narrow().to_le_bytes());
        } else {
            self.entries.extend_from_slice(&entry.0.to_le_bytes());
        }
    }

    /// Appends `key` and its list of `ordinals` (ascending, not
    /// empty): in its entry when it has one ordinal (most signatures occur
    /// in one document of a segment), else in the data section, the entry
    /// holding its offset: packed (a count byte, then each ordinal in
    /// `width` bytes) when that is smaller than the roaring bitmap, as most
    /// lists of a few documents are, else as the bitmap.
    fn push(&mut self, key: u64, ordinals: &[u32]) {
        if ordinals.len() as u64 >= FREQUENT_MIN {
            self.lengths.push((key, ordinals.len() as u64));
        }
        self.keys.extend_from_slice(&key.to_le_bytes());
        if let [ordinal] = ordinals {
            self.push_entry(Entry::inline(*ordinal));
            return;
        }
        let offset = self.data.len() as u64;
        if self.narrow && offset >= self.narrow_offsets {
            widen_in_place(&mut self.entries);
            self.narrow = false;
        }
        if ordinals.len() <= PACKED_MAX && packed_len(ordinals.len(), self.width) < small_bitmap_size(ordinals) {
            self.push_entry(Entry::packed(offset));
            self.data.push(ordinals.len() as u8);
            for ordinal in ordinals {
                self.data.extend_from_slice(&ordinal.to_le_bytes()[..self.width]);
            }
        } else {
            self.push_entry(Entry::bitmap(offset));
            super::roaring_view::serialize_sorted_into(ordinals, &mut self.data);
        }
    }
}

/// The bytes of a packed list of `count` ordinals, each in `width` bytes:
/// its count byte, then the ordinals.
fn packed_len(count: usize, width: usize) -> usize {
    1 + count * width
}

/// The serialized size of the roaring bitmap of `ordinals` (ascending, at
/// most 4,096 of them, so every container is an array; the writer adds no
/// run containers): cookie and container count, a key, cardinality and
/// offset per container, two bytes a value. Computed, so that a list
/// stored packed builds no bitmap.
fn small_bitmap_size(ordinals: &[u32]) -> usize {
    let containers = 1 + ordinals.windows(2).filter(|w| w[0] >> 16 != w[1] >> 16).count();
    8 + 8 * containers + 2 * ordinals.len()
}

/// The bucket of a pair whose key is a hash: its key's top byte
/// ([`partition_by_top_byte`]).
fn top_byte(key: u64) -> usize {
    (key >> 56) as usize
}

/// The top bits of a hash that pick a flush's bucket ([`flush_bucket`]):
/// 4,096 buckets, so that a 200,000-page word-3-shingle flush's bucket
/// (about 26,000 pairs, 312 KB) is sorted within a core's second-level
/// cache ([`sort_bucket`]). A pass of [`PASS_PAIRS`] fills about 600 of
/// them at once, a line of each in the first-level cache.
const FLUSH_BUCKET_BITS: u32 = 12;

/// The bucket of a flush's pair ([`write_posting_table`]): its hash's top
/// [`FLUSH_BUCKET_BITS`] bits.
fn flush_bucket(hash: u64) -> usize {
    (hash >> (64 - FLUSH_BUCKET_BITS)) as usize
}

/// How many of the hashes of `vectors` lie in each flush bucket (what
/// [`build`] counts run by run, for checks and tests).
fn flush_counts(vectors: &[&[u64]]) -> Vec<usize> {
    let mut counts = vec![0usize; 1 << FLUSH_BUCKET_BITS];
    for &hash in vectors.iter().flat_map(|v| v.iter()) {
        counts[flush_bucket(hash)] += 1;
    }
    counts
}

/// Sorts `(key, ordinal)` pairs whose keys are hashes (uniform in the top
/// bits): an in-place radix pass on the top 8 bits of the key puts each
/// pair in its bucket (American flag sort, no second buffer: the pairs of a
/// large merge run to gigabytes; 256 buckets keep its writes few enough
/// for the caches), then the buckets are sorted on all cores
/// ([`sort_buckets`]). Any key distribution gives the right order; a
/// skewed one only makes some buckets larger. A flush does not need the
/// pass: its posting table places its pairs in their buckets as it
/// gathers them ([`write_posting_table`]).
#[cfg(test)]
fn sort_pairs(pairs: &mut [Pair]) {
    let (counts, shared) = partition_by_top_byte(pairs);
    sort_buckets(pairs, &counts, shared);
}

/// Where each bucket of sizes `counts` starts when they lie one after
/// another.
fn starts_of(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .scan(0, |sum, &c| {
            let start = *sum;
            *sum += c;
            Some(start)
        })
        .collect()
}

/// Puts each pair of `pairs` in its [`top_byte`] bucket, in place, and
/// returns the buckets' sizes and how many top bits the keys of each
/// share, 8 (a single bucket, unmoved, below 2^16 pairs, which one sort
/// handles as fast: none shared).
fn partition_by_top_byte(pairs: &mut [Pair]) -> (Vec<usize>, u32) {
    if pairs.len() < 1 << 16 {
        return (vec![pairs.len()], 0);
    }
    let bucket = |p: &Pair| top_byte(p.key);
    let mut counts = vec![0usize; 256];
    for p in pairs.iter() {
        counts[bucket(p)] += 1;
    }
    let starts = starts_of(&counts);
    // next[b]: the first position of bucket b not yet holding one of its
    // pairs; each swap puts one pair where it belongs. (Each swap waits
    // for the load before it: about 40 ns a pair at 10^8 pairs here, where
    // a flush's placing writes cost a few.)
    let mut next = starts.clone();
    for b in 0..counts.len() {
        let end = starts[b] + counts[b];
        while next[b] < end {
            let mut item = pairs[next[b]];
            loop {
                let home = bucket(&item);
                if home == b {
                    break;
                }
                std::mem::swap(&mut item, &mut pairs[next[home]]);
                next[home] += 1;
            }
            pairs[next[b]] = item;
            next[b] += 1;
        }
    }
    (counts, 8)
}

/// Sorts each bucket of `pairs` (consecutive runs of `counts[b]` pairs,
/// bucket `b` holding only keys that sort before bucket `b + 1`'s) on all
/// cores (rayon), each by [`sort_bucket`]: the whole slice is then sorted.
/// `shared`: how many top bits the keys of each bucket share (8 for a
/// [`top_byte`] bucket, [`FLUSH_BUCKET_BITS`] for a flush's; 0 when the
/// buckets are any runs, as the one unsorted run that
/// [`partition_by_top_byte`] leaves whole).
fn sort_buckets(pairs: &mut [Pair], counts: &[usize], shared: u32) {
    use rayon::prelude::*;
    let mut buckets = Vec::with_capacity(counts.len());
    let mut rest = pairs;
    for &c in counts {
        let (head, tail) = rest.split_at_mut(c);
        buckets.push(head);
        rest = tail;
    }
    buckets.into_par_iter().for_each_init(BucketScratch::default, |scratch, b| sort_bucket(b, shared, scratch));
}

/// A thread's buffers for [`sort_bucket`], kept from one bucket to the
/// next.
#[derive(Default)]
struct BucketScratch {
    pairs: Vec<Pair>,
    /// Each group's start, then its end.
    groups: Vec<u32>,
    /// Each part's start, then its end (a split bucket's).
    parts: Vec<u32>,
}

/// Sorts one bucket of [`sort_buckets`], whose keys share their top
/// `shared` bits (none: any run, which goes to the library's sort, as
/// small buckets do). A bucket of fewer than [`SPLIT_MIN`] pairs (a
/// flush's, of [`FLUSH_BUCKET_BITS`]) is sorted by groups of its keys'
/// next bits into `scratch.pairs` and copied back ([`sort_by_groups`]);
/// a larger one (a [`top_byte`] bucket of a band table past about 8
/// million pairs, a 1M-page bulk commit's) is first split on the next
/// 8 bits into `scratch.pairs`, 256 parts written as 256 runs, then each
/// part sorted by groups back into its place in the bucket, so that each
/// scatter stays within a few hundred kilobytes.
/// Comparison sorting a bucket of 420,000 pairs compares each pair about
/// 19 times; this places each pair once or twice and sorts groups of one
/// or two pairs. Any key distribution gives the right order (a skewed one
/// only makes some groups larger, and each is sorted by the library's
/// sort).
fn sort_bucket(bucket: &mut [Pair], shared: u32, scratch: &mut BucketScratch) {
    let n = bucket.len();
    if shared == 0 || shared > 48 || n < 1 << 10 || n > u32::MAX as usize {
        bucket.sort_unstable();
        return;
    }
    let BucketScratch { pairs, groups, parts } = scratch;
    // Zeroed whole, though the scatter writes every slot: the zeroing's
    // one pass brings the scratch into the cache, so that the scatter's
    // scattered writes find their lines there (growing it only where it
    // grows made the 1M word-3-shingle load 1.045× the time, slower in 3
    // of 3 alternated pairs).
    pairs.clear();
    pairs.resize(n, Pair::default());
    if n < SPLIT_MIN {
        sort_by_groups(bucket, pairs, shared, groups);
        bucket.copy_from_slice(pairs);
        return;
    }
    // The parts: the 8 bits below the shared ones.
    let shift = 56 - shared;
    scatter_by(bucket, pairs, 256, |key| (key >> shift) as u8 as usize, parts);
    let mut start = 0;
    for &end in parts.iter() {
        let range = start..end as usize;
        sort_by_groups(&pairs[range.clone()], &mut bucket[range], shared + 8, groups);
        start = end as usize;
    }
}

/// Buckets of at least this many pairs are split on 8 more bits before
/// their groups are sorted ([`sort_bucket`]): below it, a bucket's scatter
/// stays within a core's second-level cache.
const SPLIT_MIN: usize = 1 << 15;

/// Places the pairs of `src` into `dst` (of the same length) run by run of
/// `digit(key)` (each below `digits`), each run in the order of `src`:
/// counted into `ends`, each count turned into its run's start, then
/// each pair placed at its run's next position, which leaves `ends[d]`
/// the end of run `d`. `src` holds at most `u32::MAX` pairs.
fn scatter_by(src: &[Pair], dst: &mut [Pair], digits: usize, digit: impl Fn(u64) -> usize, ends: &mut Vec<u32>) {
    ends.clear();
    ends.resize(digits, 0);
    for pair in src {
        ends[digit(pair.key)] += 1;
    }
    let mut sum = 0u32;
    for start in ends.iter_mut() {
        (*start, sum) = (sum, sum + *start);
    }
    for &pair in src {
        let next = &mut ends[digit(pair.key)];
        dst[*next as usize] = pair;
        *next += 1;
    }
}

/// Sorts `src` into `dst` (of the same length), all of whose keys share
/// their top `shared` bits (at most 56): a counting pass on the next `b`
/// bits (at most 16; about four groups a pair, so that most groups hold
/// one pair), a scatter group by group ([`scatter_by`]), then one
/// insertion pass over `dst`, which moves a pair only within its group
/// (groups are in order; a key's pairs, which a flush gathers in the order
/// of their ordinals, keep it). Short runs take the library's sort, and so
/// does `dst` when the insertion pass has moved pairs more than
/// [`INSERTION_MOVES`] times their number (keys that are not spread: a
/// caller's own values, or one key listed by many ordinals out of order),
/// so that no input costs more than that and a sort.
///
/// Four groups a pair rather than four pairs a group: each group's sort
/// had been a branch mispredicted every pair or so (benches/compare/
/// HISTORY.md, "A flush's buckets of 12 bits"). One insertion pass rather
/// than a walk of every group's end for the groups of several pairs: a
/// flush's bucket of 26,000 pairs has 65,536 groups, and the walk had
/// taken a third of this function's time.
fn sort_by_groups(src: &[Pair], dst: &mut [Pair], shared: u32, groups: &mut Vec<u32>) {
    let n = src.len();
    if n < 16 || n > u32::MAX as usize {
        dst.copy_from_slice(src);
        dst.sort_unstable();
        return;
    }
    let bits = (n.ilog2() + 2).min(16).min(64 - shared);
    let shift = 64 - shared - bits;
    let mask = (1u64 << bits) - 1;
    scatter_by(src, dst, 1 << bits, |key| ((key >> shift) & mask) as usize, groups);
    if crate::vector::insertion_pass(dst, n * INSERTION_MOVES).is_none() {
        dst.sort_unstable();
    }
}

/// How many moves a pair [`sort_by_groups`]'s insertion pass may make, on
/// the average, before it sorts by comparison instead.
const INSERTION_MOVES: usize = 4;

/// The buffers of [`Segment::lists_in_stages`], kept by each thread from
/// one call to the next (a query makes one call per segment), empty
/// between calls.
#[derive(Default)]
struct StageBuffers {
    /// Each hash with its bucket's key range.
    ranges: Vec<(u64, Option<std::ops::Range<usize>>)>,
    /// Each hash's position among the keys, if it has one.
    positions: Vec<Option<usize>>,
    /// Each found hash's place among the hashes, its position among the
    /// keys and its entry, decoded.
    entries: Vec<(usize, usize, TableEntry)>,
}

impl StageBuffers {
    /// The buffers to keep, each emptied ([`super::kept_for_reuse`]).
    fn kept(self) -> Self {
        use super::kept_for_reuse as kept;
        StageBuffers { ranges: kept(self.ranges), positions: kept(self.positions), entries: kept(self.entries) }
    }
}

thread_local! {
    static STAGE_BUFFERS: std::cell::Cell<StageBuffers> = std::cell::Cell::new(StageBuffers::default());
}

/// An entry of an offsets section, decoded ([`Segment::entry_at`]).
#[derive(Clone, Copy)]
enum TableEntry {
    /// A one-ordinal list: the entry's payload.
    Inline(u64),
    /// A list in the data section, from `offset`, packed or a bitmap.
    List { offset: u64, packed: bool },
}

/// What an entry of an offsets section names.
enum ListBytes<'a> {
    /// A one-ordinal list, stored in the entry.
    Inline(u32),
    /// The data section from the list's serialization on, which starts at
    /// offset `at`.
    Serialized { at: usize, bytes: &'a [u8] },
    /// The data section from a packed list on, which starts at offset `at`.
    Packed { at: usize, bytes: &'a [u8] },
}

/// A posting list: one ordinal, or several, packed or in a bitmap, read in
/// place.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PostingList<'a> {
    /// A signature that occurs in one document of the segment.
    Single(u32),
    /// Ordinals in ascending order.
    Bitmap(RoaringView<'a>),
    /// A few ordinals in ascending order (format version 5).
    Packed(PackedList<'a>),
}

/// A packed list (FORMAT.md §7, format version 5) read in place: a count
/// byte, then that many ascending ordinals of `width` bytes each,
/// little-endian. Most lists of two or more ordinals are a handful of
/// near-duplicates, which a roaring bitmap stores in 20 to 30 bytes and a
/// packed list in 7 to 13. Contents out of order (damage `verify` finds)
/// can only make the answers wrong, never panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackedList<'a> {
    /// The ordinals' bytes, `width` each.
    bytes: &'a [u8],
    width: usize,
    /// The count byte: `bytes.len() / width`, kept rather than divided
    /// out at each step of an iteration.
    len: usize,
}

impl<'a> PackedList<'a> {
    /// Reads the count at the start of `bytes` (which may continue past the
    /// list) and checks that its ordinals lie inside them.
    fn parse(bytes: &'a [u8], width: usize) -> Result<Self, &'static str> {
        let (&count, rest) = bytes.split_first().ok_or("packed list without its count")?;
        let len = usize::from(count);
        let bytes = rest.get(..len * width).ok_or("packed list runs past its section")?;
        Ok(PackedList { bytes, width, len })
    }

    /// Number of ordinals.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a list without ordinals (a writer never stores one).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Ordinal `i`; `i` must be below [`PackedList::len`]. A load of the
    /// width's fixed size (1 to 4 bytes, [`packed_width`]): a copy of a
    /// variable length was a `memcpy` call an ordinal.
    #[inline]
    fn get(&self, i: usize) -> u32 {
        match self.bytes[i * self.width..(i + 1) * self.width] {
            [a] => u32::from(a),
            [a, b] => u32::from_le_bytes([a, b, 0, 0]),
            [a, b, c] => u32::from_le_bytes([a, b, c, 0]),
            [a, b, c, d] => u32::from_le_bytes([a, b, c, d]),
            // Not reached: `packed_width` is 1 to 4.
            _ => 0,
        }
    }

    /// The index of the first ordinal at or above `ordinal`.
    fn position(&self, ordinal: u32) -> usize {
        first_not_below(0, self.len(), |i| self.get(i) < ordinal)
    }

    /// The ordinals, ascending.
    fn iter(&self) -> PackedIter<'a> {
        PackedIter { list: *self, next: 0, end: u64::from(u32::MAX) + 1 }
    }
}

/// The ordinals of a [`PackedList`] below an end.
#[derive(Debug, Clone)]
pub struct PackedIter<'a> {
    list: PackedList<'a>,
    next: usize,
    end: u64,
}

impl Iterator for PackedIter<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.next >= self.list.len() {
            return None;
        }
        let ordinal = self.list.get(self.next);
        if u64::from(ordinal) >= self.end {
            self.next = self.list.len();
            return None;
        }
        self.next += 1;
        Some(ordinal)
    }
}

/// The ordinals of a [`PostingList`] in a range.
#[derive(Debug, Clone)]
pub enum PostingIter<'a> {
    /// At most the one ordinal.
    Single(Option<u32>),
    /// A bitmap's ordinals.
    Bitmap(super::roaring_view::Iter<'a>),
    /// A packed list's ordinals.
    Packed(PackedIter<'a>),
}

impl Iterator for PostingIter<'_> {
    type Item = u32;

    #[inline]
    fn next(&mut self) -> Option<u32> {
        match self {
            PostingIter::Single(o) => o.take(),
            PostingIter::Bitmap(i) => i.next(),
            PostingIter::Packed(i) => i.next(),
        }
    }
}

impl<'a> PostingList<'a> {
    /// Number of ordinals.
    pub fn len(&self) -> u64 {
        match self {
            PostingList::Single(_) => 1,
            PostingList::Bitmap(b) => b.len(),
            PostingList::Packed(p) => p.len() as u64,
        }
    }

    /// True for an empty list (a stored bitmap may be empty).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The largest ordinal, if any.
    pub fn max(&self) -> Option<u32> {
        match self {
            PostingList::Single(o) => Some(*o),
            PostingList::Bitmap(b) => b.max(),
            PostingList::Packed(p) => p.len().checked_sub(1).map(|i| p.get(i)),
        }
    }

    /// Whether the list holds `ordinal`.
    pub fn contains(&self, ordinal: u32) -> bool {
        match self {
            PostingList::Single(o) => *o == ordinal,
            PostingList::Bitmap(b) => b.contains(ordinal),
            PostingList::Packed(p) => {
                let i = p.position(ordinal);
                i < p.len() && p.get(i) == ordinal
            }
        }
    }

    /// Number of ordinals in `range`.
    #[inline]
    pub fn count_in(&self, range: std::ops::Range<u32>) -> u64 {
        match self {
            PostingList::Single(o) => u64::from(range.contains(o)),
            PostingList::Bitmap(b) => b.count_in(range),
            PostingList::Packed(p) => p.position(range.end).saturating_sub(p.position(range.start)) as u64,
        }
    }

    /// The ordinals in `range`, ascending.
    #[inline]
    pub fn iter_in(&self, range: std::ops::Range<u32>) -> PostingIter<'a> {
        match self {
            PostingList::Single(o) => PostingIter::Single(range.contains(o).then_some(*o)),
            PostingList::Bitmap(b) => PostingIter::Bitmap(b.iter_in(range)),
            PostingList::Packed(p) => {
                PostingIter::Packed(PackedIter { list: *p, next: p.position(range.start), end: u64::from(range.end) })
            }
        }
    }
}

/// A parsed segment over its bytes.
#[derive(Debug)]
pub struct Segment<B: AsRef<[u8]>> {
    bytes: B,
    name: String,
    id: u64,
    doc_count: u32,
    bands: u32,
    version: u32,
    /// Four-byte entries in the offsets sections (else eight).
    narrow: bool,
    /// The top bits left out of each posting key and each band key
    /// (format version 6; 0 before).
    dropped_bits: [u32; 2],
    /// The number of posting keys and of band keys.
    key_counts: [usize; 2],
    sections: [(usize, usize, u32); 15],
    /// Built by the first posting-key look-up.
    directory: std::sync::OnceLock<KeyDirectory>,
    /// Built by the first band-key look-up (the LSH query's).
    band_directory: std::sync::OnceLock<KeyDirectory>,
    /// Built by the first fingerprint look-up (a writer's insert).
    fingerprint_filter: std::sync::OnceLock<FingerprintFilter>,
    /// Each document's distinct count, two bytes a document, built by
    /// [`Segment::prepare_distinct_counts`] or the first
    /// [`Segment::distinct_of`] (set Jaccard's posting walks); `None` when
    /// an entry is damaged.
    distinct_counts: std::sync::OnceLock<Option<DistinctCounts>>,
}

/// The distinct count of every document of a segment by ordinal, as
/// `u16`, with `u16::MAX` for 65,535 or more (read from the entry then):
/// set Jaccard's window and bounds need a posting's document's distinct
/// count, which the ordinal order does not follow, and reading it from the
/// docs section is a cache miss a posting (24 bytes a document) where this
/// array of 2 is a twelfth the size.
struct DistinctCounts(Box<[u16]>);

impl std::fmt::Debug for DistinctCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DistinctCounts({} documents)", self.0.len())
    }
}

/// A one-hash bit filter over a segment's fingerprints: a bit for each
/// value of the fingerprint's top bits, eight bits a document, so that
/// about seven in eight look-ups of a fingerprint the segment does not hold
/// (an insert's usual case: most documents are new) cost one cache line
/// instead of the four or five probes of the section's search, each a
/// likely cache (and TLB) miss. Built in one pass over the section; one
/// byte a document.
struct FingerprintFilter {
    /// Top bits of a fingerprint that choose its bit.
    bits: u32,
    words: Vec<u64>,
}

impl std::fmt::Debug for FingerprintFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FingerprintFilter({} bits)", self.bits)
    }
}

impl FingerprintFilter {
    fn build(section: &[u8]) -> FingerprintFilter {
        let n = section.len() / FINGERPRINT_ENTRY_LEN;
        let bits = (n.max(8) * 8).next_power_of_two().ilog2();
        let mut words = vec![0u64; (1usize << bits).div_ceil(64)];
        for i in 0..n {
            let slot = Self::slot(bits, fingerprint_at(section, i));
            words[slot / 64] |= 1 << (slot % 64);
        }
        FingerprintFilter { bits, words }
    }

    fn slot(bits: u32, fingerprint: u128) -> usize {
        (fingerprint >> (128 - bits)) as usize
    }

    /// False only when no fingerprint of the section is `fingerprint`.
    fn may_hold(&self, fingerprint: u128) -> bool {
        let slot = Self::slot(self.bits, fingerprint);
        self.words.get(slot / 64).is_some_and(|w| w & (1 << (slot % 64)) != 0)
    }
}

/// An in-memory radix directory over a key section (the posting keys; the
/// band keys have one too, for the LSH query): for each value of a
/// hash's top bits, the index of the first key having them. Keys are hash
/// values spread evenly over `u64`, so with about eight keys a bucket a
/// look-up reads one directory entry and one or two cache lines of keys,
/// where a search in a mapped section of millions of keys misses the cache
/// and the TLB at each of its three or four probes. Each bucket also has a
/// 32-bit mask of the next five bits of its keys: most query signatures are
/// absent from most segments, and about four in five of those are answered
/// by the mask without reading a key. One byte a key, built in one pass
/// over the section (in parts on all cores, each part over its own
/// buckets, from two million keys). Over a damaged (unsorted) section it
/// finds nothing wrong and may miss keys; `verify` finds the damage.
struct KeyDirectory {
    /// Bits of the hash that choose a bucket (0: one bucket).
    bits: u32,
    /// `2^bits + 1` entries: the bucket's first key index, and its mask
    /// (bit `s` set when one of its keys has sub-bucket `s`), side by side
    /// so one cache line serves a look-up; empty when the section has more
    /// keys than a `u32` counts (then look-ups search the section).
    entries: Vec<[u32; 2]>,
}

impl std::fmt::Debug for KeyDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyDirectory({} bits)", self.bits)
    }
}

impl KeyDirectory {
    /// Sections of fewer keys are walked on the calling thread; larger
    /// ones in parts on all cores (a segment of a million pages has tens
    /// of millions, and the first query after an open waits for them).
    const PARALLEL_FROM: usize = 1 << 21;

    /// The directory of `keys`: at least as many bucket bits as the keys
    /// leave out, so that a bucket's keys share their stored top bits.
    fn build(keys: Keys<'_>) -> KeyDirectory {
        let n = keys.len();
        if u32::try_from(n).is_err() {
            return KeyDirectory { bits: 0, entries: Vec::new() };
        }
        let bits = (n / 8).max(1).ilog2().max(keys.dropped());
        let parts = if n < Self::PARALLEL_FROM { 1 } else { rayon::current_num_threads().max(1) * 4 };
        let (mut entries, counted) = Self::counted(keys, bits, parts);
        if counted != n {
            // Only over a damaged (unsorted) section, whose parts' walks
            // may overlap or stop early: one walk counts every key once.
            (entries, _) = Self::counted(keys, bits, 1);
        }
        KeyDirectory { bits, entries }
    }

    /// The entries of `keys` with `bits` bucket bits, and how many keys
    /// they count: each bucket's keys counted and its mask set by one of
    /// `parts` walks (each over its own buckets: from the first key of its
    /// first one, found by a search, to the first key past its last), then
    /// the counts turned into the buckets' first indices.
    fn counted(keys: Keys<'_>, bits: u32, parts: usize) -> (Vec<[u32; 2]>, usize) {
        use rayon::prelude::*;
        let buckets = 1usize << bits;
        let mut entries = vec![[0u32; 2]; buckets + 1];
        let per_part = buckets.div_ceil(parts.clamp(1, buckets));
        let walk = |part: usize, own: &mut [[u32; 2]]| {
            let first = part * per_part;
            // The first part walks from the first key whatever the stored
            // directory says (one walk counts every key even when damaged).
            let from = match part {
                0 => 0,
                _ => (first as u64).checked_shl(64 - bits).map_or(0, |lo| keys.lower_bound(lo)),
            };
            let walk = keys.try_walk_from::<std::convert::Infallible>(from, |_, key| {
                match Self::bucket(bits, key).checked_sub(first).and_then(|i| own.get_mut(i)) {
                    Some(entry) => {
                        entry[0] += 1;
                        entry[1] |= Self::sub_bit(bits, key);
                        Ok(true)
                    }
                    // Past this part's buckets (or, damaged, before them).
                    None => Ok(false),
                }
            });
            let Ok(()) = walk;
        };
        let own = &mut entries[..buckets];
        if per_part >= buckets {
            walk(0, own);
        } else {
            own.par_chunks_mut(per_part).enumerate().for_each(|(part, own)| walk(part, own));
        }
        let mut start = 0u32;
        for entry in &mut entries {
            let count = entry[0];
            entry[0] = start;
            start = start.saturating_add(count);
        }
        (entries, start as usize)
    }

    fn bucket(bits: u32, key: u64) -> usize {
        key.checked_shr(64 - bits).unwrap_or(0) as usize
    }

    /// The mask bit of the five hash bits after the bucket's (`bits` is at
    /// most 32).
    fn sub_bit(bits: u32, key: u64) -> u32 {
        1 << ((key >> (59 - bits)) & 31)
    }

    /// Asks for the cache lines of `key`'s bucket entry and of the next
    /// one, whose start ends the bucket's range ([`KeyDirectory::range`]):
    /// in the next line one time in eight, and the range's read had waited
    /// for it then.
    fn prefetch(&self, key: u64) {
        let b = Self::bucket(self.bits, key);
        crate::store::mmap::prefetch_line(&self.entries, b);
        crate::store::mmap::prefetch_line(&self.entries, b + 1);
    }

    /// The index range of keys of `key`'s bucket that may equal it (empty
    /// when the mask rules the key out); `None` when the directory was
    /// not built. The bucket's keys ascend, so its sub-buckets' keys come
    /// one sub-bucket after another, and each sub-bucket the mask names
    /// holds one key at least: the range leaves out one key for each
    /// before `key`'s and one for each after it (at 1M pages a bucket
    /// holds 8 to 16 keys, and a scan for a key that is there read half
    /// of them).
    fn range(&self, key: u64) -> Option<std::ops::Range<usize>> {
        let b = Self::bucket(self.bits, key);
        let [start, mask] = *self.entries.get(b)?;
        let bit = Self::sub_bit(self.bits, key);
        if mask & bit == 0 {
            return Some(start as usize..start as usize);
        }
        let end = self.entries.get(b + 1)?[0] as usize;
        let below = (mask & (bit - 1)).count_ones() as usize;
        let above = (mask & !(bit | (bit - 1))).count_ones() as usize;
        // (Clamped, whatever a damaged section counted.)
        let from = (start as usize + below).min(end);
        Some(from..end.saturating_sub(above).max(from))
    }
}

impl Segment<super::mmap::SegmentBytes> {
    /// Asks the kernel to map in the pages of these sections now (see
    /// [`super::mmap::SegmentBytes::populate`]).
    pub fn populate(&self, kinds: &[SectionKind]) {
        for &kind in kinds {
            let (offset, length, _) = self.sections[kind as usize - 1];
            self.bytes.populate(offset, length);
        }
    }

    /// Drops this process's mapping of the whole segment (see
    /// [`super::mmap::SegmentBytes::release`]): what it read stops counting
    /// in its resident memory, and is read again when needed.
    pub fn release(&self) {
        self.bytes.release(0, self.bytes.as_ref().len());
    }

    /// [`Segment::release`] of the bytes `range` of the hashes section
    /// (clamped to it), such as [`SegmentEntry::hash_bytes`] ranges.
    pub fn release_hashes(&self, range: std::ops::Range<usize>) {
        let (offset, length, _) = self.sections[SectionKind::Hashes as usize - 1];
        let (start, end) = (range.start.min(length), range.end.min(length));
        if start < end {
            self.bytes.release(offset + start, end - start);
        }
    }
}

/// One document of a segment, by ordinal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentEntry {
    /// Global document id.
    pub id: u64,
    /// |d|: the sum of frequencies.
    pub length: u64,
    first: u32,
    distinct: u32,
}

impl SegmentEntry {
    /// Where the document's hashes are in its segment's hashes section, in
    /// bytes ([`Segment::entry`] checked that they lie inside it).
    pub fn hash_bytes(&self) -> std::ops::Range<usize> {
        let first = self.first as usize * 8;
        first..first + self.distinct as usize * 8
    }

    /// The number of distinct signatures (the length under set Jaccard).
    pub fn distinct(&self) -> u32 {
        self.distinct
    }
}

impl<B: AsRef<[u8]>> Segment<B> {
    /// Where section `kind` starts in the segment's bytes (tests that
    /// damage one).
    #[cfg(test)]
    pub(crate) fn section_offset(&self, kind: SectionKind) -> usize {
        self.sections[kind as usize - 1].0
    }

    /// Parses the header and section table. `name` is used in errors.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] for anything malformed,
    /// [`IndexError::Incompatible`] for another format version.
    pub fn parse(bytes: B, name: &str) -> Result<Self, IndexError> {
        let data = bytes.as_ref();
        let corrupt = |offset: usize, reason: &str| IndexError::corrupted(name, "header", offset as u64, reason);
        if data.len() < HEADER_LEN {
            return Err(corrupt(0, "file shorter than the header"));
        }
        if data[..8] != SEGMENT_MAGIC {
            return Err(corrupt(0, "bad magic"));
        }
        if crc32fast::hash(&data[..60]) != le_u32(data, 60) {
            return Err(corrupt(60, "header checksum mismatch"));
        }
        let version = le_u32(data, 8);
        if !(SEGMENT_VERSION_MIN..=SEGMENT_VERSION).contains(&version) {
            return Err(IndexError::Incompatible {
                what: "segment",
                found: version,
                supported: SEGMENT_VERSION_MIN..=SEGMENT_VERSION,
            });
        }
        let count = le_u32(data, 12) as usize;
        if count != section_count(version) {
            return Err(corrupt(12, "unexpected section count"));
        }
        let id = le_u64(data, 16);
        let doc_count = le_u32(data, 24);
        let bands = le_u32(data, 28);
        // Entry width: a header field since version 3, eight bytes before.
        let narrow = match (version, le_u32(data, 40)) {
            (1 | 2, _) => false,
            (_, 4) => true,
            (_, 8) => false,
            _ => return Err(corrupt(40, "entry width is neither 4 nor 8")),
        };
        // The top bits left out of the posting and band keys: header bytes
        // 44 and 45 since version 6 (reserved before).
        let mut dropped_bits = [0u32; 2];
        if version >= 6 {
            for (i, at) in [44, 45].into_iter().enumerate() {
                dropped_bits[i] = u32::from(data[at]);
                if !keys::valid_dropped_bits(dropped_bits[i]) {
                    return Err(corrupt(at, "dropped key bits are neither 0, 8 nor 16"));
                }
            }
        }
        let table_end = HEADER_LEN + count * TABLE_ENTRY_LEN;
        if data.len() < table_end {
            return Err(corrupt(HEADER_LEN, "section table truncated"));
        }
        // Sections a version lacks (frequent lists before 2, frequency
        // escapes before 3, fingerprints before 4) read as empty.
        let mut sections = [(0usize, 0usize, 0u32); 15];
        let mut next = table_end;
        for (i, kind) in SECTIONS.iter().take(count).enumerate() {
            let at = HEADER_LEN + i * TABLE_ENTRY_LEN;
            if le_u32(data, at) != *kind as u32 {
                return Err(corrupt(at, "unexpected section kind"));
            }
            let offset = le_u64(data, at + 8);
            let length = le_u64(data, at + 16);
            let end = offset.checked_add(length).filter(|&e| e <= data.len() as u64);
            let Some(end) = end.filter(|_| offset.is_multiple_of(8) && offset >= table_end as u64) else {
                return Err(corrupt(at, "section outside the file"));
            };
            // Sections follow each other at the next 8-aligned offset.
            if offset != align8(next) as u64 {
                return Err(corrupt(at, "section not where the previous one ends"));
            }
            next = end as usize;
            sections[i] = (offset as usize, length as usize, le_u32(data, at + 4));
        }
        // The key sections must be their directory and whole keys.
        let mut key_counts = [0usize; 2];
        for (i, kind) in [SectionKind::PostingKeys, SectionKind::BandKeys].into_iter().enumerate() {
            let (offset, length, _) = sections[kind as usize - 1];
            let Some(keys) = Keys::new(&data[offset..offset + length], dropped_bits[i]) else {
                let at = HEADER_LEN + (kind as usize - 1) * TABLE_ENTRY_LEN;
                return Err(corrupt(at, "key section is not its directory and whole keys"));
            };
            key_counts[i] = keys.len();
        }
        let segment = Segment {
            bytes,
            name: name.to_owned(),
            id,
            doc_count,
            bands,
            version,
            narrow,
            dropped_bits,
            key_counts,
            sections,
            directory: std::sync::OnceLock::new(),
            band_directory: std::sync::OnceLock::new(),
            fingerprint_filter: std::sync::OnceLock::new(),
            distinct_counts: std::sync::OnceLock::new(),
        };
        segment.check_shapes()?;
        Ok(segment)
    }

    /// Section sizes must agree with the header and with each other.
    fn check_shapes(&self) -> Result<(), IndexError> {
        let docs = self.doc_count as usize;
        let entries = le_u64(self.bytes.as_ref(), 32);
        let expect = |kind: SectionKind, len: u128| -> Result<(), IndexError> {
            if self.section(kind).len() as u128 != len {
                return Err(self.corrupted(kind, 0, "section size disagrees with the header"));
            }
            Ok(())
        };
        expect(SectionKind::Docs, (docs * DOC_ENTRY_LEN) as u128)?;
        expect(SectionKind::Hashes, u128::from(entries) * 8)?;
        expect(SectionKind::Freqs, u128::from(entries) * self.freq_width() as u128)?;
        // Since version 3 the band keys are recomputed from the vectors.
        let doc_bands = if self.version < 3 { docs as u128 * u128::from(self.bands) * 8 } else { 0 };
        expect(SectionKind::DocBands, doc_bands)?;
        for (keys, offsets) in
            [(SectionKind::PostingKeys, SectionKind::PostingOffsets), (SectionKind::BandKeys, SectionKind::BandOffsets)]
        {
            expect(offsets, (self.keys(keys).len() * self.entry_width()) as u128)?;
        }
        expect(SectionKind::IdIndex, docs as u128 * 16)?;
        let fingerprints = if self.version < 4 { 0 } else { docs * FINGERPRINT_ENTRY_LEN };
        expect(SectionKind::Fingerprints, fingerprints as u128)?;
        if !self.section(SectionKind::Frequent).len().is_multiple_of(16) {
            return Err(self.corrupted(SectionKind::Frequent, 0, "frequent section is not whole entries"));
        }
        if !self.section(SectionKind::FreqEscapes).len().is_multiple_of(16) {
            return Err(self.corrupted(SectionKind::FreqEscapes, 0, "escape section is not whole entries"));
        }
        if !self.section(SectionKind::Lengths).len().is_multiple_of(16) {
            return Err(self.corrupted(SectionKind::Lengths, 0, "length directory is not whole entries"));
        }
        // Queries take each document's length, and the window, from the
        // length directory without reading the documents' entries
        // (`length_at`, `length_range`): its checksum is checked here, at
        // open (one entry a distinct length: a few kilobytes), rather than
        // only by `verify`, so that a damaged one cannot prune a match.
        self.verify_checksum(SectionKind::Lengths)
    }

    /// Bytes an entry of an offsets section takes.
    fn entry_width(&self) -> usize {
        if self.narrow {
            4
        } else {
            8
        }
    }

    /// Bytes a frequency takes in the freqs section.
    fn freq_width(&self) -> usize {
        if self.version < 3 {
            4
        } else {
            1
        }
    }

    /// The frequencies of vector entries `first..first + n`, as stored
    /// (read with [`Segment::freq_in`]).
    fn freqs_of(&self, first: usize, n: usize) -> &[u8] {
        let width = self.freq_width();
        self.section(SectionKind::Freqs).get(first * width..(first + n) * width).unwrap_or_default()
    }

    /// The frequency of entry `j` of `freqs` (from [`Segment::freqs_of`]
    /// with `first`), or `None` when it is stored as zero or its escape is
    /// missing.
    #[inline]
    fn freq_in(&self, freqs: &[u8], first: usize, j: usize) -> Option<u32> {
        let freq = if self.version < 3 {
            le_u32(freqs, j * 4)
        } else {
            match *freqs.get(j)? {
                0 => self.escaped_freq(first + j)?,
                byte => u32::from(byte),
            }
        };
        (freq > 0).then_some(freq)
    }

    /// The escaped frequency of vector entry `i`: binary search of the
    /// escapes, which ascend by entry index.
    fn escaped_freq(&self, i: usize) -> Option<u32> {
        let (_, freq) = find_pair(self.section(SectionKind::FreqEscapes), i as u64)?;
        u32::try_from(freq).ok()
    }

    fn section(&self, kind: SectionKind) -> &[u8] {
        let (offset, length, _) = self.sections[kind as usize - 1];
        &self.bytes.as_ref()[offset..offset + length]
    }

    /// Calls `f` with each posting key `k`, `lo <= k <= hi`, ascending:
    /// [`Segment::posting_keys_between`] without reading the entries.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] when the keys do not ascend.
    pub fn for_each_posting_key_between(&self, lo: u64, hi: u64, mut f: impl FnMut(u64)) -> Result<(), IndexError> {
        self.walk_posting_keys_between(lo, hi, |_, key| {
            f(key);
            Ok(())
        })
    }

    /// Calls `f(i, k)` with each posting key `k`, `lo <= k <= hi`, and its
    /// index `i`, ascending: the keys checked to ascend as
    /// [`PostingKeys`] checks them, walked a bucket at a time
    /// ([`Keys::try_walk_from`]).
    #[inline]
    fn walk_posting_keys_between(
        &self,
        lo: u64,
        hi: u64,
        mut f: impl FnMut(usize, u64) -> Result<(), IndexError>,
    ) -> Result<(), IndexError> {
        let keys = self.keys(SectionKind::PostingKeys);
        let mut last: Option<u64> = None;
        keys.try_walk_from(keys.lower_bound(lo), |i, key| {
            if key > hi {
                return Ok(false);
            }
            self.ascending_posting_key(&mut last, i, key)?;
            f(i, key)?;
            Ok(true)
        })
    }

    /// Checks that posting key `i`, `key`, comes after `last` (the key
    /// before it in a walk, if any), which it then becomes: the check of
    /// both walks, [`PostingKeys`] and [`Segment::walk_posting_keys_between`].
    #[inline]
    fn ascending_posting_key(&self, last: &mut Option<u64>, i: usize, key: u64) -> Result<(), IndexError> {
        if last.is_some_and(|last| key <= last) {
            let offset = self.keys(SectionKind::PostingKeys).offset_of(i);
            return Err(self.corrupted(SectionKind::PostingKeys, offset, "posting keys not ascending"));
        }
        *last = Some(key);
        Ok(())
    }

    /// Calls `f` with each posting key `k`, `lo <= k <= hi`, ascending,
    /// its inline list's only ordinal and its index in the key section:
    /// [`Segment::posting_keys_between`] as a walk, with no item to hand
    /// back for each key (the iterator's, a `Result`, went through memory
    /// in a build's hot loop).
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] when the keys do not ascend; an error of
    /// `f`, which ends the walk.
    #[inline]
    pub fn for_each_posting_entry_between(
        &self,
        lo: u64,
        hi: u64,
        mut f: impl FnMut(u64, Option<u32>, usize) -> Result<(), IndexError>,
    ) -> Result<(), IndexError> {
        let offsets = self.section(SectionKind::PostingOffsets);
        self.walk_posting_keys_between(lo, hi, |i, key| f(key, self.inline_only(offsets, i), i))
    }

    /// The only ordinal of posting key `i`'s list when it is an inline
    /// one-document entry (`offsets`: the posting entries section). A wide
    /// inline entry holding more than an ordinal is damaged: it counts as
    /// a list (of several), which only costs look-ups, and its look-up
    /// reports the damage.
    #[inline]
    fn inline_only(&self, offsets: &[u8], i: usize) -> Option<u32> {
        if self.narrow {
            let entry = le_u32(offsets, i * 4);
            (entry & NARROW_INLINE != 0).then_some(entry & !NARROW_INLINE)
        } else {
            let entry = le_u64(offsets, i * 8);
            (entry & INLINE != 0).then(|| u32::try_from(entry & !INLINE).ok()).flatten()
        }
    }

    /// How many posting keys have a list of several documents (an entry
    /// that is not an inline one-document list): one pass over the
    /// posting entries, which sizes a filter of them
    /// (`SegmentMasks::of_segments`).
    pub fn several_count(&self) -> usize {
        let offsets = self.section(SectionKind::PostingOffsets);
        (0..self.posting_key_count()).filter(|&i| self.inline_only(offsets, i).is_none()).count()
    }

    /// How many posting keys (distinct signatures) the segment lists.
    pub fn posting_key_count(&self) -> usize {
        self.keys(SectionKind::PostingKeys).len()
    }

    /// A key section (posting or band keys) read through its layout,
    /// whose size parsing checked.
    fn keys(&self, kind: SectionKind) -> Keys<'_> {
        let i = usize::from(kind == SectionKind::BandKeys);
        Keys::of(self.section(kind), self.dropped_bits[i], self.key_counts[i])
    }

    fn corrupted(&self, kind: SectionKind, offset: usize, reason: &str) -> IndexError {
        IndexError::corrupted(&self.name, section_name(kind), offset as u64, reason)
    }

    /// Checks every section's CRC32 and what the readers rely on: keys
    /// ascending, lists decoding to existing ordinals, vectors sorted,
    /// documents in length order, the directories agreeing with them.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] naming the first section that fails.
    pub fn verify(&self) -> Result<(), IndexError> {
        self.verify_checksums()?;
        // Every list must decode and point at existing ordinals.
        for (keys, offsets, data) in [
            (SectionKind::PostingKeys, SectionKind::PostingOffsets, SectionKind::PostingData),
            (SectionKind::BandKeys, SectionKind::BandOffsets, SectionKind::BandData),
        ] {
            let section = self.keys(keys);
            if !section.directory_is_sound() {
                return Err(self.corrupted(keys, 0, "key directory does not ascend from 0 to the key count"));
            }
            let mut previous = None;
            for (i, key) in section.iter_from(0).enumerate() {
                if previous.is_some_and(|p| p >= key) {
                    return Err(self.corrupted(keys, section.offset_of(i), "keys not strictly ascending"));
                }
                previous = Some(key);
                let bitmap = self.bitmap_at(offsets, data, i)?;
                if bitmap.max().is_some_and(|m| m >= self.doc_count) {
                    return Err(self.corrupted(data, i, "bitmap names an ordinal past the last document"));
                }
                // Queries and merges read lists in place, through the
                // container offsets that a full decode does not use: they
                // must read the same ordinals.
                let list = self.list_in_place(offsets, data, i)?;
                if !list.iter_in(0..u32::MAX).eq(bitmap.iter()) {
                    return Err(self.corrupted(data, i, "list read in place disagrees with its decoded bitmap"));
                }
            }
        }
        // Escapes ascend by entry index, each for a zero byte of the freqs
        // and a frequency a byte cannot hold; every zero byte has one
        // (checked below, when the vectors are read).
        let escapes = self.section(SectionKind::FreqEscapes);
        let mut previous = None;
        for (i, escape) in escapes.chunks_exact(16).enumerate() {
            let (index, freq) = (le_u64(escape, 0), le_u64(escape, 8));
            let byte = usize::try_from(index).ok().and_then(|x| self.section(SectionKind::Freqs).get(x));
            let canonical = byte == Some(&0) && (u64::from(FREQ_BYTE_MAX) + 1..=u64::from(u32::MAX)).contains(&freq);
            if previous.is_some_and(|p| p >= index) || !canonical {
                return Err(self.corrupted(
                    SectionKind::FreqEscapes,
                    i * 16,
                    "frequency escape disagrees with the freqs",
                ));
            }
            previous = Some(index);
        }
        let mut previous = None;
        for (i, (hash, len)) in self.frequent().enumerate() {
            let actual = self.posting_list(hash)?.map_or(0, |l| l.len());
            if previous.is_some_and(|p| p >= hash) || actual != len || len < FREQUENT_MIN {
                return Err(self.corrupted(SectionKind::Frequent, i * 16, "frequent list disagrees with the postings"));
            }
            previous = Some(hash);
        }
        // Documents ascend in length, and the length directory holds each
        // distinct length once with its first ordinal (queries binary-search it).
        let (mut directory, mut last_length) = (Vec::new(), None);
        for ordinal in 0..self.doc_count {
            let entry = self.entry(ordinal)?;
            if self.ordinal_of(entry.id)? != Some(ordinal) {
                return Err(self.corrupted(SectionKind::IdIndex, 0, "id index disagrees with the documents"));
            }
            let vector = self.vector(ordinal)?;
            let at = ordinal as usize * DOC_ENTRY_LEN;
            if vector.total() != entry.length {
                return Err(self.corrupted(SectionKind::Docs, at, "length disagrees"));
            }
            match last_length {
                Some(last) if last > entry.length => {
                    return Err(self.corrupted(SectionKind::Docs, at, "documents out of length order"));
                }
                Some(last) if last == entry.length => {}
                _ => {
                    directory.extend_from_slice(&entry.length.to_le_bytes());
                    directory.extend_from_slice(&u64::from(ordinal).to_le_bytes());
                    last_length = Some(entry.length);
                }
            }
        }
        if directory != self.section(SectionKind::Lengths) {
            return Err(self.corrupted(SectionKind::Lengths, 0, "length directory disagrees with the documents"));
        }
        // Fingerprint entries strictly ascend by (fingerprint, ordinal) and
        // name each ordinal once.
        self.fingerprints()?;
        let section = self.section(SectionKind::Fingerprints);
        let key = |i: usize| (fingerprint_at(section, i), le_u32(section, i * FINGERPRINT_ENTRY_LEN + 16));
        for i in 1..section.len() / FINGERPRINT_ENTRY_LEN {
            if key(i - 1) >= key(i) {
                return Err(self.corrupted(
                    SectionKind::Fingerprints,
                    i * FINGERPRINT_ENTRY_LEN,
                    "fingerprints not strictly ascending",
                ));
            }
        }
        Ok(())
    }

    /// Checks every section's CRC32 (the first part of
    /// [`Segment::verify`]: one pass over the file).
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] naming the first section that fails.
    pub fn verify_checksums(&self) -> Result<(), IndexError> {
        for kind in SECTIONS.into_iter().take(section_count(self.version)) {
            self.verify_checksum(kind)?;
        }
        Ok(())
    }

    /// Checks one section's CRC32 against the table's.
    fn verify_checksum(&self, kind: SectionKind) -> Result<(), IndexError> {
        if crc32fast::hash(self.section(kind)) != self.sections[kind as usize - 1].2 {
            return Err(self.corrupted(kind, 0, "section checksum mismatch"));
        }
        Ok(())
    }

    /// `(hash, list length)` of the segment's longest posting lists (those
    /// of at least [`FREQUENT_MIN`] ordinals, at most the longest
    /// `max(FREQUENT_FLOOR, K / 16)`), ascending by hash; nothing for a
    /// version 1 segment. Unverified: only the query order depends on it.
    pub fn frequent(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.section(SectionKind::Frequent).chunks_exact(16).map(|e| (le_u64(e, 0), le_u64(e, 8)))
    }

    /// The segment id from the header.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The whole file, as read or mapped.
    pub fn file_bytes(&self) -> &[u8] {
        self.bytes.as_ref()
    }

    /// The number of LSH bands the segment's band table was built with.
    pub fn bands(&self) -> u32 {
        self.bands
    }

    /// Number of documents (live or deleted) in the segment.
    pub fn doc_count(&self) -> u32 {
        self.doc_count
    }

    /// Size of the segment in bytes.
    pub fn byte_len(&self) -> usize {
        self.bytes.as_ref().len()
    }

    /// The document at `ordinal`.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] when its entry points outside the vectors.
    pub fn entry(&self, ordinal: u32) -> Result<SegmentEntry, IndexError> {
        let docs = self.section(SectionKind::Docs);
        let at = ordinal as usize * DOC_ENTRY_LEN;
        if ordinal >= self.doc_count {
            return Err(self.corrupted(SectionKind::Docs, at, "ordinal past the last document"));
        }
        let entry = SegmentEntry {
            id: le_u64(docs, at),
            length: le_u64(docs, at + 8),
            first: le_u32(docs, at + 16),
            distinct: le_u32(docs, at + 20),
        };
        let end = u64::from(entry.first) + u64::from(entry.distinct);
        if end * 8 > self.section(SectionKind::Hashes).len() as u64 {
            return Err(self.corrupted(SectionKind::Docs, at, "vector range outside the hashes"));
        }
        Ok(entry)
    }

    /// Builds the `DistinctCounts` now rather than at the first
    /// [`Segment::distinct_of`]: one pass over the docs section, each entry
    /// checked as [`Segment::entry`] checks it (a damaged one leaves no
    /// array, and `distinct_of` its typed error).
    pub fn prepare_distinct_counts(&self) {
        self.distinct_counts();
    }

    /// The segment's [`DistinctCounts`], built now if they are not yet;
    /// `None` when an entry is damaged.
    fn distinct_counts(&self) -> Option<&DistinctCounts> {
        self.distinct_counts
            .get_or_init(|| {
                let counts: Result<Box<[u16]>, IndexError> = (0..self.doc_count)
                    .map(|ordinal| Ok(u16::try_from(self.entry(ordinal)?.distinct()).unwrap_or(u16::MAX)))
                    .collect();
                counts.ok().map(DistinctCounts)
            })
            .as_ref()
    }

    /// The length in bytes of the hashes section, every vector's hashes.
    pub fn hashes_len(&self) -> usize {
        self.section(SectionKind::Hashes).len()
    }

    /// The number of distinct signatures of the document at `ordinal`:
    /// from the segment's `DistinctCounts`, else from its entry.
    ///
    /// # Errors
    /// As [`Segment::entry`].
    pub fn distinct_of(&self, ordinal: u32) -> Result<u32, IndexError> {
        match self.distinct_counts().and_then(|c| c.0.get(ordinal as usize)) {
            Some(&count) if count < u16::MAX => Ok(u32::from(count)),
            // A count past the array's, a damaged entry (its error), or an
            // ordinal past the last.
            _ => Ok(self.entry(ordinal)?.distinct()),
        }
    }

    /// The signature vector of the document at `ordinal`.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] when the stored vector is malformed.
    pub fn vector(&self, ordinal: u32) -> Result<SignatureVector, IndexError> {
        let entry = self.entry(ordinal)?;
        let (first, distinct) = (entry.first as usize, entry.distinct as usize);
        let freqs = self.freqs_of(first, distinct);
        // One-byte frequencies with no escape among them (most vectors)
        // are widened in one loop; otherwise entry by entry, each escape
        // looked up and a zero an error.
        let out_freqs = if self.version >= 3 && freqs.len() == distinct && !freqs.contains(&0) {
            freqs.iter().map(|&freq| u32::from(freq)).collect()
        } else {
            let mut out_freqs = Vec::with_capacity(distinct);
            for j in 0..distinct {
                out_freqs.push(self.freq_in(freqs, first, j).ok_or_else(|| self.zero_frequency(first + j))?);
            }
            out_freqs
        };
        SignatureVector::from_sorted(self.hashes_of(first, distinct), out_freqs)
            .ok_or_else(|| self.corrupted(SectionKind::Hashes, entry.first as usize * 8, "vector not strictly sorted"))
    }

    /// The hashes of vector entries `first..first + distinct`, decoded in
    /// one loop over their bytes (a range [`Segment::entry`] checked; past
    /// the section, fewer, which no vector accepts).
    fn hashes_of(&self, first: usize, distinct: usize) -> Vec<u64> {
        let bytes = self.section(SectionKind::Hashes).get(first * 8..(first + distinct) * 8).unwrap_or_default();
        bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default())).collect()
    }

    /// The vector of the document at `ordinal` as `measure` sees it: under
    /// set Jaccard its hashes, each with frequency 1, read without the
    /// freqs section (the self-join's probes: a word-shingle index's
    /// frequencies are an eighth of its vectors' bytes, pages the measure
    /// never needs); under the others [`Segment::vector`].
    ///
    /// # Errors
    /// As [`Segment::vector`] (the frequencies unchecked under set Jaccard).
    pub fn vector_for(&self, ordinal: u32, measure: Similarity) -> Result<SignatureVector, IndexError> {
        if measure != Similarity::SetJaccard {
            return self.vector(ordinal);
        }
        let entry = self.entry(ordinal)?;
        let (first, distinct) = (entry.first as usize, entry.distinct as usize);
        SignatureVector::from_sorted(self.hashes_of(first, distinct), vec![1; distinct])
            .ok_or_else(|| self.corrupted(SectionKind::Hashes, first * 8, "vector not strictly sorted"))
    }

    /// The similarity of `query` to the document at `ordinal` under
    /// `measure`, intersected in place (no vector is built): the query's
    /// verification step. Under set Jaccard, which counts shared hashes,
    /// the frequencies are not read.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] when the stored vector, as far as the
    /// intersection reads it, is not strictly ascending, or (under the
    /// measures that weigh them) has a zero frequency.
    pub fn overlap(&self, ordinal: u32, query: &SignatureVector, measure: Similarity) -> Result<Overlap, IndexError> {
        self.overlap_of(self.entry(ordinal)?, query, measure)
    }

    /// [`Segment::overlap`] of the document whose docs entry is `entry`
    /// (from [`Segment::entry`], which checked its vector's range).
    ///
    /// # Errors
    /// As [`Segment::overlap`].
    pub fn overlap_of(
        &self,
        entry: SegmentEntry,
        query: &SignatureVector,
        measure: Similarity,
    ) -> Result<Overlap, IndexError> {
        // With no threshold the merge has no budget to run out of, so it
        // always has the overlap; the zero overlap is for the type's sake.
        let overlap = self.intersect(entry, query, measure, None)?;
        Ok(overlap.unwrap_or(Overlap { num: 0, den: 0 }))
    }

    /// [`Segment::overlap_of`] when it meets `tau`; `None` when it does
    /// not, found as soon as the merge has passed over too much of either
    /// vector: the intersection can no longer reach the least that meets
    /// `tau` (`Similarity::least_intersection`). A verification that
    /// fails (most of a word-3-shingle self-join's) ends part of the way.
    ///
    /// # Errors
    /// As [`Segment::overlap`], as far as the merge reads the vector.
    pub fn overlap_reaching(
        &self,
        entry: SegmentEntry,
        query: &SignatureVector,
        measure: Similarity,
        tau: Threshold,
    ) -> Result<Option<Overlap>, IndexError> {
        Ok(self.intersect(entry, query, measure, Some(tau))?.filter(|overlap| overlap.meets(tau)))
    }

    /// The merge of [`Segment::overlap_of`] and
    /// [`Segment::overlap_reaching`] (`tau`: stop, with `None`, once the
    /// intersection cannot meet it).
    ///
    /// It reads the stored hashes as 8-byte arrays and the query's slices
    /// cut to one length, so that its steps carry no bounds checks and no
    /// order check: whether the stored hashes it passed ascend is checked
    /// after it, in one pass over them. With `tau`, what the merge may
    /// still pass over unshared is a budget on each side: the query's
    /// weight of the signatures the stored vector lacks, and under set
    /// Jaccard the stored signatures the query lacks; once either runs
    /// out, the intersection is below the least that meets `tau`. (The
    /// part of a shared signature's query frequency above the stored one
    /// is lost too, but is not counted, so that a shared signature's step
    /// has no check: counting less only stops later.)
    fn intersect(
        &self,
        entry: SegmentEntry,
        query: &SignatureVector,
        measure: Similarity,
        tau: Option<Threshold>,
    ) -> Result<Option<Overlap>, IndexError> {
        let (qh, qf) = (query.hashes(), query.freqs());
        let n = qh.len().min(qf.len());
        let a = (query.total(), query.distinct());
        Ok(self.merge(entry, &qh[..n], &qf[..n], a, measure, tau)?.0)
    }

    /// [`Segment::intersect`] of a query whose hashes are `qh` (of
    /// [`MergeHashes`]) and frequencies `qf` (read only under the
    /// weighing measures), of (|x|, distinct count) `a`; also how many of
    /// `qh` it compared (those it passed, and the one it stopped at), for
    /// a caller to check the order of stored ones. Inlined into its two
    /// callers, which cut `qh` and `qf` to one length (or pass no `qf`
    /// under set Jaccard), so that its steps carry no bounds checks.
    #[inline(always)]
    fn merge<Q: MergeHashes + ?Sized>(
        &self,
        entry: SegmentEntry,
        qh: &Q,
        qf: &[u32],
        a: (u64, u64),
        measure: Similarity,
        tau: Option<Threshold>,
    ) -> Result<(Option<Overlap>, usize), IndexError> {
        let (first, distinct) = (entry.first as usize, entry.distinct as usize);
        let stored = self.stored_hashes(first, distinct)?;
        let b = (entry.length, distinct as u64);
        let weighed = measure != Similarity::SetJaccard;
        // The budgets: each side's length under the measure less the least
        // intersection (none: no limit). Under the weighing measures the
        // stored side's is not kept (it would read the frequencies of
        // stored signatures the query lacks).
        let (mut spare_q, mut spare_d) = match tau {
            None => (u64::MAX, u64::MAX),
            Some(tau) => match measure.least_intersection(tau, a, b) {
                None => return Ok((None, 0)),
                Some(least) if weighed => (a.0 - least, u64::MAX),
                Some(least) => (a.1 - least, b.1 - least),
            },
        };
        let n = qh.len();
        // Under the weighing measures, one byte a frequency (format 3 on):
        // zero is an escape, read (or refused) off the merge's path.
        let bytes = if weighed && self.version >= 3 { self.freqs_of(first, distinct) } else { &[] };
        let bytes = bytes.get(..distinct).unwrap_or_default();
        let (mut i, mut j) = (0, 0);
        let (mut min_sum, mut shared) = (0u64, 0u64);
        let mut short = false;
        while i < n && j < stored.len() {
            let (h, g) = (qh.hash(i), u64::from_le_bytes(stored[j]));
            if h < g {
                let lost = if weighed { u64::from(qf[i]) } else { 1 };
                let Some(left) = spare_q.checked_sub(lost) else {
                    short = true;
                    break;
                };
                spare_q = left;
                i += 1;
            } else if h > g {
                let Some(left) = spare_d.checked_sub(u64::from(!weighed)) else {
                    short = true;
                    break;
                };
                spare_d = left;
                j += 1;
            } else {
                if weighed {
                    let freq = match bytes.get(j) {
                        Some(&byte) if byte != 0 => u32::from(byte),
                        _ => {
                            let freqs = self.freqs_of(first, distinct);
                            self.freq_in(freqs, first, j).ok_or_else(|| self.zero_frequency(first + j))?
                        }
                    };
                    min_sum += u64::from(qf[i].min(freq));
                }
                shared += 1;
                i += 1;
                j += 1;
            }
        }
        // The hashes the merge compared: those it passed, and the one it
        // stopped at.
        self.check_ascending(first, &stored[..(j + 1).min(stored.len())])?;
        Ok(((!short).then(|| measure.of_intersection(min_sum, shared, a, b)), (i + 1).min(n)))
    }

    /// Whether `read`, stored hashes from vector entry `first` on, ascend
    /// (one pass with no branch on each pair); the first that does not is
    /// the error.
    fn check_ascending(&self, first: usize, read: &[[u8; 8]]) -> Result<(), IndexError> {
        let ascending = read.windows(2).fold(true, |ok, w| ok & (u64::from_le_bytes(w[0]) < u64::from_le_bytes(w[1])));
        if !ascending {
            let at = read.windows(2).position(|w| u64::from_le_bytes(w[0]) >= u64::from_le_bytes(w[1])).unwrap_or(0);
            return Err(self.corrupted(SectionKind::Hashes, (first + at + 1) * 8, "vector not strictly sorted"));
        }
        Ok(())
    }

    /// [`Segment::overlap_reaching`] under set Jaccard of the document at
    /// `probe_entry` of `probe` (a segment, this one or another), its
    /// hashes merged where they are stored: no vector is built (a bounded
    /// self-join's deferred verifications had built each probe's again,
    /// a fifth of their time).
    ///
    /// # Errors
    /// As [`Segment::overlap`], for either vector as far as the merge
    /// reads it.
    pub fn overlap_reaching_stored(
        &self,
        entry: SegmentEntry,
        probe: &Segment<B>,
        probe_entry: SegmentEntry,
        tau: Threshold,
    ) -> Result<Option<Overlap>, IndexError> {
        let (first, distinct) = (probe_entry.first as usize, probe_entry.distinct as usize);
        let hashes = probe.stored_hashes(first, distinct)?;
        let a = (distinct as u64, distinct as u64);
        let (overlap, read) = self.merge(entry, hashes, &[], a, Similarity::SetJaccard, Some(tau))?;
        probe.check_ascending(first, &hashes[..read])?;
        Ok(overlap.filter(|overlap| overlap.meets(tau)))
    }

    /// Asks for each document's docs entry, then for every cache line of
    /// its vector's hashes and (unless `measure` is set Jaccard, which
    /// [`Segment::overlap`] reads none of) frequencies, each stage in a
    /// loop of its own (`super::mmap::prefetch_line`), so that the cache
    /// misses of several verifications, and of each vector's lines, are in
    /// flight together (as `Segment::lists_in_stages` does for
    /// look-ups). Past `Segment::TOUCHED_BYTES` of vectors only each
    /// one's first line is asked for: lines brought in long before their
    /// verification would leave the cache first. Nothing is checked here:
    /// [`Segment::overlap`] reads them again, checked.
    pub fn touch_vectors(&self, ordinals: impl Iterator<Item = u32> + Clone, measure: Similarity) {
        const LINE: usize = 64;
        let docs = self.section(SectionKind::Docs);
        for ordinal in ordinals.clone() {
            super::mmap::prefetch_line(docs, ordinal as usize * DOC_ENTRY_LEN);
        }
        let (hashes, freqs, width) =
            (self.section(SectionKind::Hashes), self.section(SectionKind::Freqs), self.freq_width());
        let width = if measure == Similarity::SetJaccard { 0 } else { width };
        let mut budget = Self::TOUCHED_BYTES;
        // Every line of `range` (`all`), or its first only.
        let lines = |section: &[u8], range: std::ops::Range<usize>, all: bool| {
            if range.is_empty() {
                return;
            }
            if all {
                let last = range.end - 1;
                range.step_by(LINE).chain([last]).for_each(|at| super::mmap::prefetch_line(section, at));
            } else {
                super::mmap::prefetch_line(section, range.start);
            }
        };
        for entry in ordinals.filter_map(|ordinal| self.entry(ordinal).ok()) {
            let (first, distinct) = (entry.first as usize, entry.distinct as usize);
            let bytes = distinct * (8 + width);
            let all = bytes <= budget;
            budget -= if all { bytes } else { 0 };
            lines(hashes, first * 8..(first + distinct) * 8, all);
            lines(freqs, first * width..(first + distinct) * width, all);
        }
    }

    /// The stored hashes of vector entries `first..first + distinct`, as
    /// 8-byte arrays read in place.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] when the range lies outside the hashes.
    fn stored_hashes(&self, first: usize, distinct: usize) -> Result<&[[u8; 8]], IndexError> {
        self.section(SectionKind::Hashes)
            .get(first * 8..(first + distinct) * 8)
            .map(bytemuck::cast_slice)
            .ok_or_else(|| self.corrupted(SectionKind::Hashes, first * 8, "vector range outside the hashes"))
    }

    /// Calls `found(tag)` for each `(hash, tag)` of `wanted` (ascending by
    /// hash) that the vector of the document whose docs entry is `entry`
    /// holds: one merge, reading the stored hashes only as far as the last
    /// one wanted.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] when the stored hashes it reads do not
    /// ascend (a hash found in a damaged vector could be one it does not
    /// hold).
    pub fn holds_each(
        &self,
        entry: SegmentEntry,
        wanted: &[(u64, usize)],
        mut found: impl FnMut(usize),
    ) -> Result<(), IndexError> {
        let (first, distinct) = (entry.first as usize, entry.distinct as usize);
        let stored = self.stored_hashes(first, distinct)?;
        let (mut i, mut j) = (0, 0);
        let mut last: Option<u64> = None;
        while i < wanted.len() && j < stored.len() {
            let (h, g) = (wanted[i].0, u64::from_le_bytes(stored[j]));
            if last.is_some_and(|last| g <= last) {
                return Err(self.corrupted(SectionKind::Hashes, (first + j) * 8, "vector not strictly sorted"));
            }
            if h < g {
                i += 1;
            } else {
                if h == g {
                    found(wanted[i].1);
                    i += 1;
                }
                last = Some(g);
                j += 1;
            }
        }
        Ok(())
    }

    /// How many bytes of vectors [`Segment::touch_vectors`] asks for whole
    /// before it asks only for each vector's first line: half a core's
    /// second-level cache here.
    const TOUCHED_BYTES: usize = 512 << 10;

    /// The error for vector entry `i` whose frequency is zero (or, since
    /// version 3, whose escape is missing).
    fn zero_frequency(&self, i: usize) -> IndexError {
        self.corrupted(SectionKind::Freqs, i * self.freq_width(), "zero frequency")
    }

    /// The posting list of a signature hash: ordinals in length order.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] when the stored bitmap does not decode.
    pub fn postings(&self, hash: u64) -> Result<Option<RoaringBitmap>, IndexError> {
        match self.find_posting_key(hash) {
            Some(i) => self.bitmap_at(SectionKind::PostingOffsets, SectionKind::PostingData, i).map(Some),
            None => Ok(None),
        }
    }

    /// [`Segment::postings`] without building a bitmap: a one-document
    /// list (most lists) from its entry, longer ones read in place. A
    /// query looks its signatures up with [`Segment::posting_lists`].
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] when the stored bitmap's headers are
    /// malformed.
    pub fn posting_list(&self, hash: u64) -> Result<Option<PostingList<'_>>, IndexError> {
        let Some(i) = self.find_posting_key(hash) else { return Ok(None) };
        self.list_in_place(SectionKind::PostingOffsets, SectionKind::PostingData, i).map(Some)
    }

    /// [`Segment::posting_list`] of each hash of `hashes` (`None` for a
    /// `None`: a hash the caller knows this segment lacks), in stages so
    /// that the look-ups' cache misses overlap: every directory entry
    /// first, then the first key line of every bucket, then the searches,
    /// then every list entry, then the lists. No load of a stage depends
    /// on another of the same stage; looked up one at a time, each
    /// look-up's three or four dependent misses wait in turn.
    ///
    /// # Errors
    /// As [`Segment::posting_list`].
    pub fn posting_lists(
        &self,
        hashes: impl IntoIterator<Item = Option<u64>>,
    ) -> Result<Vec<Option<PostingList<'_>>>, IndexError> {
        let kinds = (SectionKind::PostingKeys, SectionKind::PostingOffsets, SectionKind::PostingData);
        self.lists_collected(&self.directory, kinds, &hashes.into_iter().collect::<Vec<_>>())
    }

    /// [`Segment::posting_lists`] of `hashes` (each looked up; a caller
    /// that knows this segment lacks one leaves it out) handed to `each`
    /// with their positions in `hashes`, found lists only, in order, rather
    /// than collected: the query's path, which keeps them in a vector of
    /// its own.
    ///
    /// # Errors
    /// As [`Segment::posting_list`]; `each` has then seen the lists before
    /// the damaged one.
    pub fn posting_lists_each<'s>(
        &'s self,
        hashes: impl IntoIterator<Item = u64>,
        each: impl FnMut(usize, PostingList<'s>),
    ) -> Result<(), IndexError> {
        let kinds = (SectionKind::PostingKeys, SectionKind::PostingOffsets, SectionKind::PostingData);
        self.lists_in_stages(&self.directory, kinds, hashes, each)
    }

    /// [`Segment::band_list`] of each of `keys`, in the stages of
    /// [`Segment::posting_lists`]: the LSH query's look-ups, whose misses
    /// then overlap.
    ///
    /// # Errors
    /// As [`Segment::band_list`].
    pub fn band_lists(&self, keys: &[u64]) -> Result<Vec<Option<PostingList<'_>>>, IndexError> {
        let kinds = (SectionKind::BandKeys, SectionKind::BandOffsets, SectionKind::BandData);
        self.lists_collected(&self.band_directory, kinds, &keys.iter().copied().map(Some).collect::<Vec<_>>())
    }

    /// [`Segment::lists_in_stages`] collected: the list of each of
    /// `hashes`, or `None` (always for a `None`, which is not looked up).
    fn lists_collected<'s>(
        &'s self,
        directory: &'s std::sync::OnceLock<KeyDirectory>,
        kinds: (SectionKind, SectionKind, SectionKind),
        hashes: &[Option<u64>],
    ) -> Result<Vec<Option<PostingList<'s>>>, IndexError> {
        let mut lists: Vec<Option<PostingList<'s>>> = hashes.iter().map(|_| None).collect();
        let held: Vec<usize> = (0..hashes.len()).filter(|&i| hashes[i].is_some()).collect();
        self.lists_in_stages(directory, kinds, hashes.iter().flatten().copied(), |at, list| {
            if let Some(slot) = held.get(at).and_then(|&i| lists.get_mut(i)) {
                *slot = Some(list);
            }
        })?;
        Ok(lists)
    }

    /// The lists of `hashes` in a table (`kinds`: its keys, offsets and
    /// data), found through `directory`, in stages (see
    /// [`Segment::posting_lists`]): each list found handed to `each` with
    /// its hash's position, in order.
    fn lists_in_stages<'s>(
        &'s self,
        directory: &'s std::sync::OnceLock<KeyDirectory>,
        (key_kind, offsets_kind, data_kind): (SectionKind, SectionKind, SectionKind),
        hashes: impl IntoIterator<Item = u64>,
        mut each: impl FnMut(usize, PostingList<'s>),
    ) -> Result<(), IndexError> {
        let (keys, directory) = self.keys_and_directory(directory, key_kind);
        // The thread's buffers from its previous look-ups (a query's
        // segments each make one set).
        let StageBuffers { mut ranges, mut positions, mut entries } = STAGE_BUFFERS.with(std::cell::Cell::take);
        // Each hash's directory entry asked for, then each hash with its
        // bucket's key range (`None`: no directory), read by a second loop.
        ranges.clear();
        ranges.extend(hashes.into_iter().map(|hash| {
            directory.prefetch(hash);
            (hash, None)
        }));
        for (hash, range) in &mut ranges {
            *range = directory.range(*hash);
        }
        // A bucket's keys and their offsets entries are both contiguous
        // (a few entries: mostly one cache line), so the entries are
        // asked for with the keys, before the scan says which one.
        let (offsets, width) = (self.section(offsets_kind), self.entry_width());
        for (_, range) in &ranges {
            if let Some(range) = range.as_ref().filter(|r| !r.is_empty()) {
                // A bucket of 8 to 16 keys of 5 to 8 bytes spans two
                // lines as often as one: its last key's line too (the
                // scan had waited for that one alone).
                keys.prefetch(range.start);
                keys.prefetch(range.end - 1);
                super::mmap::prefetch_line(offsets, range.start * width);
            }
        }
        // An empty range (a hash its bucket's sub-bits rule out: most of
        // a query's in most segments, when no segment masks are read) has
        // no position.
        positions.clear();
        positions.extend(ranges.drain(..).map(|(hash, range)| match range {
            Some(range) if range.is_empty() => None,
            range => self.position_through(keys, range, key_kind, hash),
        }));
        self.touch_entries(offsets_kind, positions.iter().flatten().copied());
        // The entries decoded, once, and the lists' first bytes (a packed
        // list's count, a bitmap's header) read, likewise: their misses
        // overlap too.
        entries.clear();
        entries.extend(
            positions.iter().enumerate().filter_map(|(at, &i)| i.map(|i| (at, i, self.entry_at(offsets_kind, i)))),
        );
        self.touch_list_starts(data_kind, entries.iter().map(|&(.., entry)| entry));
        for &(at, i, entry) in &entries {
            each(at, self.list_of_entry(offsets_kind, data_kind, i, entry)?);
        }
        // (A damaged list returns above without them: the next call
        // starts with new ones.)
        STAGE_BUFFERS.with(|b| b.set(StageBuffers { ranges, positions, entries }.kept()));
        Ok(())
    }

    /// List `i` of a bitmap table, read in place.
    fn list_in_place(&self, offsets: SectionKind, data: SectionKind, i: usize) -> Result<PostingList<'_>, IndexError> {
        self.list_of_entry(offsets, data, i, self.entry_at(offsets, i))
    }

    /// [`Segment::list_in_place`] of list `i`, whose entry is `entry`.
    fn list_of_entry(
        &self,
        offsets: SectionKind,
        data: SectionKind,
        i: usize,
        entry: TableEntry,
    ) -> Result<PostingList<'_>, IndexError> {
        match self.list_at(offsets, data, i, entry)? {
            ListBytes::Inline(ordinal) => Ok(PostingList::Single(ordinal)),
            ListBytes::Serialized { at, bytes } => {
                let view = RoaringView::parse(bytes).map_err(|reason| self.corrupted(data, at, reason))?;
                Ok(PostingList::Bitmap(view))
            }
            ListBytes::Packed { at, bytes } => {
                let list =
                    PackedList::parse(bytes, self.packed_width()).map_err(|reason| self.corrupted(data, at, reason))?;
                Ok(PostingList::Packed(list))
            }
        }
    }

    /// Asks for the offsets entry of each posting list of `indices`
    /// (indices in the key section), then for each list's first bytes in
    /// the data section, each stage in a loop of its own, so that
    /// the cache misses of the reads of those lists that follow overlap
    /// (as the last stages of `Segment::lists_in_stages`). Nothing is
    /// checked here: [`Segment::posting_list_at`] reads them again,
    /// checked.
    pub fn touch_posting_lists(&self, indices: &[usize]) {
        let offsets = SectionKind::PostingOffsets;
        self.touch_entries(offsets, indices.iter().copied());
        self.touch_list_starts(SectionKind::PostingData, indices.iter().map(|&i| self.entry_at(offsets, i)));
    }

    /// Asks for the cache line of each entry `indices` of the offsets
    /// section `offsets`, in a loop that does nothing else (a stage of
    /// [`Segment::lists_in_stages`]).
    fn touch_entries(&self, offsets: SectionKind, indices: impl Iterator<Item = usize>) {
        let (offsets, width) = (self.section(offsets), self.entry_width());
        indices.for_each(|i| super::mmap::prefetch_line(offsets, i * width));
    }

    /// Asks for the first bytes of each list of `entries` that has bytes
    /// in the data section `data`, in a loop that does nothing else.
    fn touch_list_starts(&self, data: SectionKind, entries: impl Iterator<Item = TableEntry>) {
        let data = self.section(data);
        for entry in entries {
            if let TableEntry::List { offset, .. } = entry {
                // And the line 32 bytes on: a packed list of a few
                // ordinals crosses into it as often as not, and a bitmap's
                // header runs on into it.
                let at = usize::try_from(offset).unwrap_or(usize::MAX);
                super::mmap::prefetch_line(data, at);
                super::mmap::prefetch_line(data, at.saturating_add(32));
            }
        }
    }

    /// The posting list of key `i` (its index in the key section, as
    /// [`PostingKeys`] yields it), read in place.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] for a damaged entry or list.
    pub fn posting_list_at(&self, i: usize) -> Result<PostingList<'_>, IndexError> {
        self.list_in_place(SectionKind::PostingOffsets, SectionKind::PostingData, i)
    }

    /// Builds the posting-key directory now rather than at the first
    /// look-up (one pass over the key section; about a byte a key of
    /// memory).
    pub fn prepare_lookups(&self) {
        self.directory.get_or_init(|| KeyDirectory::build(self.keys(SectionKind::PostingKeys)));
    }

    /// Builds the band-key directory now rather than at the first LSH
    /// look-up.
    pub fn prepare_band_lookups(&self) {
        self.band_directory.get_or_init(|| KeyDirectory::build(self.keys(SectionKind::BandKeys)));
    }

    /// Builds the fingerprint filter now rather than at the first
    /// fingerprint look-up (a flush or merge does, for the segment it
    /// wrote, so that the writer's next insert does not).
    pub fn prepare_fingerprint_lookups(&self) {
        self.fingerprint_filter.get_or_init(|| FingerprintFilter::build(self.section(SectionKind::Fingerprints)));
    }

    /// Whether the posting-key directory is built.
    pub fn lookups_prepared(&self) -> bool {
        self.directory.get().is_some()
    }

    /// The position of `hash` among the posting keys, through the
    /// directory.
    fn find_posting_key(&self, hash: u64) -> Option<usize> {
        self.find_through(&self.directory, SectionKind::PostingKeys, hash)
    }

    /// The position of `key` in a key section, through its directory
    /// (built now if it is not yet).
    fn find_through(
        &self,
        directory: &std::sync::OnceLock<KeyDirectory>,
        kind: SectionKind,
        key: u64,
    ) -> Option<usize> {
        let (keys, directory) = self.keys_and_directory(directory, kind);
        self.position_through(keys, directory.range(key), kind, key)
    }

    /// A key section and its directory (built now if it is not yet).
    fn keys_and_directory<'s>(
        &'s self,
        directory: &'s std::sync::OnceLock<KeyDirectory>,
        kind: SectionKind,
    ) -> (Keys<'s>, &'s KeyDirectory) {
        let keys = self.keys(kind);
        (keys, directory.get_or_init(|| KeyDirectory::build(keys)))
    }

    /// The position of `key` in `keys` (section `kind`) given its
    /// directory range: a scan of the bucket, or a search of the section
    /// when there is no directory (`None`).
    fn position_through(
        &self,
        keys: Keys<'_>,
        range: Option<std::ops::Range<usize>>,
        kind: SectionKind,
        key: u64,
    ) -> Option<usize> {
        match range {
            // The directory's buckets split the keys' own (`build`).
            Some(range) => keys.position_in(range, key),
            None => self.find_key(kind, key),
        }
    }

    /// The position of `key` in a sorted key section. Keys are hash values,
    /// spread evenly over `u64`, so a few interpolation steps first narrow
    /// the range to a handful of keys (a lookup in a section of millions
    /// touches two or three pages instead of twenty); binary search
    /// finishes, and bounds the work whatever the keys are.
    fn find_key(&self, keys: SectionKind, key: u64) -> Option<usize> {
        let keys = self.keys(keys);
        // The keys of `key`'s bucket (all of them when none are dropped).
        let std::ops::Range { start: mut lo, end: mut hi } = keys.bucket(key);
        let at = |i: usize| keys.in_bucket_of(key, i);
        for _ in 0..4 {
            if hi - lo < 16 {
                break;
            }
            let (first, last) = (at(lo), at(hi - 1));
            if key < first || key > last {
                return None;
            }
            let span = u128::from(last - first).max(1);
            let guess = lo + (u128::from(key - first) * (hi - 1 - lo) as u128 / span) as usize;
            match at(guess).cmp(&key) {
                std::cmp::Ordering::Less => lo = guess + 1,
                std::cmp::Ordering::Greater => hi = guess,
                std::cmp::Ordering::Equal => return Some(guess),
            }
        }
        while lo < hi {
            let mid = (lo + hi) / 2;
            match at(mid).cmp(&key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// The ordinals whose band key `key` (any band) matches.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] when the stored bitmap does not decode.
    pub fn band_bucket(&self, key: u64) -> Result<Option<RoaringBitmap>, IndexError> {
        self.lookup(SectionKind::BandKeys, SectionKind::BandOffsets, SectionKind::BandData, key)
    }

    /// [`Segment::band_bucket`] read in place and found through a key
    /// directory of its own (built at the first call), as
    /// [`Segment::posting_list`] reads a posting list: the LSH query's path.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] when the stored bitmap's headers are
    /// malformed.
    pub fn band_list(&self, key: u64) -> Result<Option<PostingList<'_>>, IndexError> {
        let Some(i) = self.find_through(&self.band_directory, SectionKind::BandKeys, key) else { return Ok(None) };
        self.list_in_place(SectionKind::BandOffsets, SectionKind::BandData, i).map(Some)
    }

    /// The posting keys `k` with `lo <= k <= hi`, ascending, each with the
    /// ordinal of its only document when its list is an inline
    /// one-document entry (`None`: the list may hold several): what the
    /// self-join reads to learn which signatures only one document holds,
    /// and how many each document holds alone (`query.rs`). Read as they
    /// are walked; an item is [`IndexError::Corrupted`] (and the last)
    /// when the keys do not ascend.
    pub fn posting_keys_between(&self, lo: u64, hi: u64) -> PostingKeys<'_, B> {
        let keys = self.keys(SectionKind::PostingKeys);
        PostingKeys { segment: self, iter: keys.iter_from(keys.lower_bound(lo)), hi, last: None, failed: false }
    }

    fn lookup(
        &self,
        keys: SectionKind,
        offsets: SectionKind,
        data: SectionKind,
        key: u64,
    ) -> Result<Option<RoaringBitmap>, IndexError> {
        match self.find_key(keys, key) {
            Some(i) => self.bitmap_at(offsets, data, i).map(Some),
            None => Ok(None),
        }
    }

    fn bitmap_at(&self, offsets: SectionKind, data: SectionKind, i: usize) -> Result<RoaringBitmap, IndexError> {
        match self.list_at(offsets, data, i, self.entry_at(offsets, i))? {
            ListBytes::Inline(ordinal) => Ok(RoaringBitmap::from_iter([ordinal])),
            // The serialization carries its own length; reading stops there.
            ListBytes::Serialized { at, bytes } => {
                RoaringBitmap::deserialize_from(bytes).map_err(|e| self.corrupted(data, at, &e.to_string()))
            }
            ListBytes::Packed { at, bytes } => {
                let list =
                    PackedList::parse(bytes, self.packed_width()).map_err(|reason| self.corrupted(data, at, reason))?;
                RoaringBitmap::from_sorted_iter(list.iter())
                    .map_err(|_| self.corrupted(data, at, "packed list not strictly ascending"))
            }
        }
    }

    /// The bytes of each ordinal of a packed list in this segment.
    fn packed_width(&self) -> usize {
        packed_width(self.doc_count)
    }

    /// Entry `i` of an offsets section, decoded: an inline list's
    /// payload (its only ordinal, unless damaged), or where the list
    /// starts in the data section and whether it is packed.
    #[inline]
    fn entry_at(&self, offsets: SectionKind, i: usize) -> TableEntry {
        // Packed lists are flagged since version 5; before, the flag's bit
        // belongs to the offset.
        let packs = self.version >= 5;
        if self.narrow {
            let entry = le_u32(self.section(offsets), i * 4);
            if entry & NARROW_INLINE != 0 {
                return TableEntry::Inline(u64::from(entry & !NARROW_INLINE));
            }
            let packed = packs && entry & NARROW_PACKED != 0;
            TableEntry::List { offset: u64::from(if packed { entry & !NARROW_PACKED } else { entry }), packed }
        } else {
            let entry = le_u64(self.section(offsets), i * 8);
            if entry & INLINE != 0 {
                return TableEntry::Inline(entry & !INLINE);
            }
            let packed = packs && entry & PACKED != 0;
            TableEntry::List { offset: if packed { entry & !PACKED } else { entry }, packed }
        }
    }

    /// List `i` of a bitmap table (`offsets`: its entries, `data`: its
    /// lists), whose entry is `entry` ([`Segment::entry_at`]), checked
    /// against the data section's bounds.
    fn list_at(
        &self,
        offsets: SectionKind,
        data: SectionKind,
        i: usize,
        entry: TableEntry,
    ) -> Result<ListBytes<'_>, IndexError> {
        let width = self.entry_width();
        let (offset, packed) = match entry {
            TableEntry::Inline(ordinal) => {
                // A wide entry's payload may exceed an ordinal (damage).
                let ordinal = u32::try_from(ordinal)
                    .map_err(|_| self.corrupted(offsets, i * 8, "inline entry holds more than an ordinal"))?;
                return Ok(ListBytes::Inline(ordinal));
            }
            TableEntry::List { offset, packed } => (offset, packed),
        };
        let bytes = self.section(data);
        let slice = bytes.get(offset as usize..).filter(|_| offset < bytes.len() as u64);
        let slice = slice.ok_or_else(|| self.corrupted(offsets, i * width, "list offset out of range"))?;
        let at = offset as usize;
        Ok(if packed { ListBytes::Packed { at, bytes: slice } } else { ListBytes::Serialized { at, bytes: slice } })
    }

    /// The ordinal of document `id`, if this segment holds it.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] when the id index points past the documents.
    pub fn ordinal_of(&self, id: u64) -> Result<Option<u32>, IndexError> {
        let Some((at, ordinal)) = find_pair(self.section(SectionKind::IdIndex), id) else { return Ok(None) };
        if ordinal >= u64::from(self.doc_count) {
            return Err(self.corrupted(SectionKind::IdIndex, at * 16, "ordinal past the last document"));
        }
        Ok(Some(ordinal as u32))
    }

    /// Whether the segment stores its documents' fingerprints (format
    /// version 4 on); before, the catalog's `fingerprints` table lists them.
    pub fn has_fingerprints(&self) -> bool {
        self.version >= 4
    }

    /// The ordinals of the documents whose fingerprint is `fingerprint`,
    /// ascending; none in a segment without fingerprints. Fingerprints are
    /// hash values, spread evenly, so a few interpolation steps on their
    /// top 64 bits narrow the range before a binary search finds the first
    /// entry: a look-up in a section of a million entries touches two or
    /// three pages. Over a damaged (unsorted) section it may miss entries;
    /// `verify` finds the damage.
    pub fn fingerprint_ordinals(&self, fingerprint: Fingerprint) -> impl Iterator<Item = u32> + '_ {
        let section = self.section(SectionKind::Fingerprints);
        let n = section.len() / FINGERPRINT_ENTRY_LEN;
        let at = |i: usize| fingerprint_at(section, i);
        let target = fingerprint.0;
        let (mut lo, mut hi) = (0, n);
        let filter = self.fingerprint_filter.get_or_init(|| FingerprintFilter::build(section));
        if !filter.may_hold(target) {
            // Nothing to search: the range below is empty.
            (lo, hi) = (n, n);
        }
        for _ in 0..4 {
            if hi - lo < 16 {
                break;
            }
            let (first, last) = (at(lo) >> 64, at(hi - 1) >> 64);
            let top = target >> 64;
            if top < first || top > last {
                break;
            }
            let span = (last - first).max(1);
            let guess = lo + ((top - first) * (hi - 1 - lo) as u128 / span) as usize;
            if at(guess) < target {
                lo = guess + 1;
            } else {
                hi = guess;
                // `guess` may be the first match: keep it in range.
                if at(guess) == target {
                    hi = guess + 1;
                    break;
                }
            }
        }
        let lo = first_not_below(lo, hi, |i| at(i) < target);
        (lo..n).map_while(move |i| (at(i) == target).then(|| le_u32(section, i * FINGERPRINT_ENTRY_LEN + 16)))
    }

    /// Every document's fingerprint, by ordinal (a merge's input); `None`
    /// for a segment without fingerprints.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] when an ordinal is missing or repeated.
    pub fn fingerprints(&self) -> Result<Option<Vec<Fingerprint>>, IndexError> {
        if !self.has_fingerprints() {
            return Ok(None);
        }
        let section = self.section(SectionKind::Fingerprints);
        let mut by_ordinal = vec![None; self.doc_count as usize];
        for (i, entry) in section.chunks_exact(FINGERPRINT_ENTRY_LEN).enumerate() {
            let ordinal = le_u32(entry, 16) as usize;
            match by_ordinal.get_mut(ordinal) {
                Some(slot @ None) => *slot = Some(Fingerprint(fingerprint_at(entry, 0))),
                _ => {
                    return Err(self.corrupted(
                        SectionKind::Fingerprints,
                        i * FINGERPRINT_ENTRY_LEN,
                        "ordinal out of range or repeated",
                    ))
                }
            }
        }
        // As many entries as documents (checked at parse), none repeated:
        // every slot is filled.
        Ok(Some(by_ordinal.into_iter().flatten().collect()))
    }

    /// The length `|d|` of the document at `ordinal` (below the document
    /// count), from the length directory rather than its docs entry: the
    /// directory (a few kilobytes: one entry a distinct length) stays in a
    /// core's cache, where a query's walk found each posting's entry with a
    /// cache miss. `None` when no entry of the directory starts at or
    /// before `ordinal` (a damaged directory).
    pub fn length_at(&self, ordinal: u32) -> Option<u64> {
        let dir = self.section(SectionKind::Lengths);
        // The entries starting at or before the ordinal: a prefix, as
        // the directory ascends in first ordinal too.
        let past = first_not_below(0, dir.len() / 16, |i| length_entry(dir, i).1 <= u64::from(ordinal));
        past.checked_sub(1).map(|i| length_entry(dir, i).0)
    }

    /// The ordinal range `[first, end)` of documents with length in
    /// `[min, max]`, from the length directory.
    pub fn length_range(&self, min: u64, max: u64) -> std::ops::Range<u32> {
        let dir = self.section(SectionKind::Lengths);
        let n = dir.len() / 16;
        // The directory ascends in length (the writer's order, which
        // `verify` checks): binary search.
        let first_at_least = |bound: u64| {
            let lo = first_not_below(0, n, |i| length_entry(dir, i).0 < bound);
            if lo == n {
                self.doc_count
            } else {
                (length_entry(dir, lo).1 as u32).min(self.doc_count)
            }
        };
        let first = first_at_least(min);
        let end = max.checked_add(1).map_or(self.doc_count, first_at_least);
        first..end.max(first)
    }
}

/// Entry `i` of a length directory (section 2): a length and the first
/// ordinal with it.
fn length_entry(dir: &[u8], i: usize) -> (u64, u64) {
    (le_u64(dir, i * 16), le_u64(dir, i * 16 + 8))
}

/// `bytes` with every section checksum of its table recomputed, when they
/// parse as a segment: fuzzing reaches past the checksums with it.
pub(crate) fn with_fresh_checksums(bytes: &[u8]) -> Option<Vec<u8>> {
    let segment = Segment::parse(bytes, "fuzz").ok()?;
    let mut out = bytes.to_vec();
    for (i, &(offset, length, _)) in segment.sections.iter().take(section_count(segment.version)).enumerate() {
        let crc = crc32fast::hash(bytes.get(offset..offset + length)?);
        let at = HEADER_LEN + i * TABLE_ENTRY_LEN + 4;
        out.get_mut(at..at + 4)?.copy_from_slice(&crc.to_le_bytes());
    }
    Some(out)
}

/// A query's hashes as [`Segment::merge`] reads them: a vector's, or a
/// stored vector's in place (little-endian bytes).
trait MergeHashes {
    /// How many hashes there are.
    fn len(&self) -> usize;
    /// Hash `i`, below [`MergeHashes::len`].
    fn hash(&self, i: usize) -> u64;
}

impl MergeHashes for [u64] {
    fn len(&self) -> usize {
        <[u64]>::len(self)
    }

    #[inline]
    fn hash(&self, i: usize) -> u64 {
        self[i]
    }
}

impl MergeHashes for [[u8; 8]] {
    fn len(&self) -> usize {
        <[[u8; 8]]>::len(self)
    }

    #[inline]
    fn hash(&self, i: usize) -> u64 {
        u64::from_le_bytes(self[i])
    }
}

/// Binary search: the first index in `[lo, hi)` that is not `below`, or
/// `hi` (`below` must hold on a prefix of the range).
fn first_not_below(mut lo: usize, mut hi: usize, below: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if below(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

fn section_name(kind: SectionKind) -> &'static str {
    match kind {
        SectionKind::Docs => "docs",
        SectionKind::Lengths => "lengths",
        SectionKind::Hashes => "hashes",
        SectionKind::Freqs => "freqs",
        SectionKind::PostingKeys => "posting keys",
        SectionKind::PostingOffsets => "posting offsets",
        SectionKind::PostingData => "posting data",
        SectionKind::DocBands => "document band keys",
        SectionKind::BandKeys => "band keys",
        SectionKind::BandOffsets => "band offsets",
        SectionKind::BandData => "band data",
        SectionKind::IdIndex => "id index",
        SectionKind::Frequent => "frequent lists",
        SectionKind::FreqEscapes => "frequency escapes",
        SectionKind::Fingerprints => "fingerprints",
    }
}

/// Binary search of a section of `(key u64, value u64)` pairs ascending by
/// key (the id index, the frequency escapes): the pair's position and value.
fn find_pair(section: &[u8], key: u64) -> Option<(usize, u64)> {
    let (mut lo, mut hi) = (0, section.len() / 16);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match le_u64(section, mid * 16).cmp(&key) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Some((mid, le_u64(section, mid * 16 + 8))),
        }
    }
    None
}

/// The fingerprint of the fingerprints-section entry at index `i`.
fn fingerprint_at(section: &[u8], i: usize) -> u128 {
    let at = i * FINGERPRINT_ENTRY_LEN;
    section.get(at..at + 16).and_then(|b| b.try_into().ok()).map_or(0, u128::from_le_bytes)
}

/// Little-endian `u32` at `at`, or 0 past the end (callers check sizes
/// first; this only keeps a wrong size from panicking).
fn le_u32(bytes: &[u8], at: usize) -> u32 {
    bytes.get(at..at + 4).and_then(|b| b.try_into().ok()).map_or(0, u32::from_le_bytes)
}

/// The posting keys of a key range of a segment, each with the ordinal of
/// its only document when its list is an inline one-document entry
/// ([`Segment::posting_keys_between`]).
pub struct PostingKeys<'a, B: AsRef<[u8]>> {
    segment: &'a Segment<B>,
    iter: keys::Iter<'a>,
    hi: u64,
    last: Option<u64>,
    failed: bool,
}

impl<B: AsRef<[u8]>> PostingKeys<'_, B> {
    /// The next key with its index, checked to ascend; an error is the
    /// last item.
    #[inline]
    fn next_key(&mut self) -> Option<Result<(usize, u64), IndexError>> {
        if self.failed {
            return None;
        }
        // One read of the key: `next` moves on past it.
        let i = self.iter.index();
        let key = self.iter.next()?;
        if key > self.hi {
            return None;
        }
        if let Err(e) = self.segment.ascending_posting_key(&mut self.last, i, key) {
            self.failed = true;
            return Some(Err(e));
        }
        Some(Ok((i, key)))
    }
}

impl<B: AsRef<[u8]>> Iterator for PostingKeys<'_, B> {
    /// The key, its inline list's only ordinal, and its index in the key
    /// section (for [`Segment::posting_list_at`]).
    type Item = Result<(u64, Option<u32>, usize), IndexError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (i, key) = match self.next_key()? {
            Ok(next) => next,
            Err(e) => return Some(Err(e)),
        };
        let offsets = self.segment.section(SectionKind::PostingOffsets);
        Some(Ok((key, self.segment.inline_only(offsets, i), i)))
    }
}

/// Gives section `kind` of the segment file `bytes` the checksum of the
/// bytes it now holds (its place read from its table entry), so that only
/// the checks past the checksums can tell a change made to it (tests of
/// damage the checksums would otherwise catch first).
#[cfg(test)]
fn match_checksum(bytes: &mut [u8], kind: SectionKind) {
    let entry = HEADER_LEN + (kind as usize - 1) * TABLE_ENTRY_LEN;
    let (offset, length) = (le_u64(bytes, entry + 8) as usize, le_u64(bytes, entry + 16) as usize);
    let crc = crc32fast::hash(&bytes[offset..offset + length]);
    bytes[entry + 4..entry + 8].copy_from_slice(&crc.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{prop_assert, prop_assert_eq, TestCaseError};

    /// A fingerprint for document `id` (distinct ids, distinct values).
    fn fp(id: u64) -> Fingerprint {
        Fingerprint(u128::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835))
    }

    fn docs() -> Vec<SegmentDoc> {
        vec![
            SegmentDoc {
                id: 10,
                vector: SignatureVector::from_pairs([(5, 2), (9, 1)]),
                band_keys: vec![1, 2],
                fingerprint: fp(10),
            },
            SegmentDoc {
                id: 3,
                vector: SignatureVector::from_pairs([(5, 1)]),
                band_keys: vec![1, 7],
                fingerprint: fp(3),
            },
            SegmentDoc { id: 4, vector: SignatureVector::new(), band_keys: vec![], fingerprint: fp(4) },
            SegmentDoc {
                id: 7,
                vector: SignatureVector::from_pairs([(1, 1), (9, 1), (12, 1)]),
                band_keys: vec![3, 2],
                fingerprint: fp(7),
            },
        ]
    }

    /// Each ordinal's length from the length directory is its docs
    /// entry's, over many documents of repeated and skipped lengths.
    #[test]
    fn the_length_directory_gives_each_ordinals_length() {
        let docs: Vec<SegmentDoc> = (0..300u64)
            .map(|id| {
                // Lengths 0..40 (some repeated many times, some absent),
                // with a frequency above one now and then.
                let distinct = (id * 7919 % 41) / 2;
                let vector =
                    SignatureVector::from_pairs((0..distinct).map(|k| (k * 31 + id, 1 + u32::from(k % 5 == 0))));
                SegmentDoc { id, vector, band_keys: vec![id], fingerprint: fp(id) }
            })
            .collect();
        let seg = Segment::parse(build_segment(1, 1, docs), "seg").unwrap();
        for ordinal in 0..seg.doc_count() {
            assert_eq!(seg.length_at(ordinal), Some(seg.entry(ordinal).unwrap().length), "ordinal {ordinal}");
        }
    }

    /// Each document's distinct count from the two-byte array is its
    /// entry's: past `u16::MAX` too (read from the entry), and an entry
    /// damaged in a segment whose checksums were made to agree is still
    /// the typed error, not a count.
    #[test]
    fn distinct_counts_are_the_entries() {
        let mut docs = docs();
        docs.push(SegmentDoc {
            id: 30,
            vector: SignatureVector::from_pairs((0..70_000u64).map(|k| (k * 3 + 1, 1 + u32::from(k % 9 == 0)))),
            band_keys: vec![],
            fingerprint: fp(30),
        });
        let bytes = build_segment(5, 1, docs);
        let seg = Segment::parse(bytes.as_slice(), "seg").unwrap();
        let counts: Vec<u32> = (0..seg.doc_count()).map(|o| seg.distinct_of(o).unwrap()).collect();
        let expected: Vec<u32> = (0..seg.doc_count()).map(|o| seg.entry(o).unwrap().distinct()).collect();
        assert_eq!(counts, expected);
        assert!(counts.contains(&70_000), "{counts:?}");
        assert!(seg.distinct_of(seg.doc_count()).is_err());
        // The last document's vector range made to run past the hashes.
        let (docs_at, _, _) = seg.sections[SectionKind::Docs as usize - 1];
        let last = docs_at + (seg.doc_count() as usize - 1) * DOC_ENTRY_LEN;
        let mut damaged = bytes.clone();
        damaged[last + 20..last + 24].copy_from_slice(&u32::MAX.to_le_bytes());
        let damaged = with_fresh_checksums(&damaged).unwrap();
        let seg = Segment::parse(damaged.as_slice(), "seg").unwrap();
        let err = seg.distinct_of(seg.doc_count() - 1).unwrap_err();
        assert!(err.to_string().contains("vector range outside the hashes"), "{err}");
        assert_eq!(seg.distinct_of(0).unwrap(), expected[0]);
    }

    #[test]
    fn round_trip() {
        let bytes = build_segment(42, 2, docs());
        let seg = Segment::parse(bytes, "seg").unwrap();
        seg.verify().unwrap();
        assert_eq!((seg.id(), seg.doc_count()), (42, 4));
        // Ordered by (length, id): 4 (0), 3 (1), 10 (3), 7 (3).
        let ids: Vec<u64> = (0..4).map(|o| seg.entry(o).unwrap().id).collect();
        assert_eq!(ids, [4, 3, 7, 10]);
        assert_eq!(seg.vector(3).unwrap(), SignatureVector::from_pairs([(5, 2), (9, 1)]));
        assert_eq!(seg.postings(9).unwrap().unwrap().iter().collect::<Vec<_>>(), [2, 3]);
        assert_eq!(seg.postings(6).unwrap(), None);
        assert_eq!(seg.band_bucket(2).unwrap().unwrap().iter().collect::<Vec<_>>(), [2, 3]);
        assert_eq!(seg.band_bucket(7).unwrap().unwrap().iter().collect::<Vec<_>>(), [1]);
        assert_eq!(seg.band_list(2).unwrap().unwrap().iter_in(0..4).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(seg.band_list(7).unwrap(), Some(PostingList::Single(1)));
        assert_eq!(seg.band_list(8).unwrap(), None);
        assert_eq!(seg.length_range(1, 3), 1..4);
        assert_eq!(seg.length_range(2, 2), 2..2);
        assert_eq!(seg.length_range(3, 100), 2..4);
        assert_eq!(seg.length_range(4, 100), 4..4);
        assert_eq!(seg.length_range(0, u64::MAX), 0..4);
        assert_eq!(seg.length_range(0, 0), 0..1);
        let lengths: Vec<Option<u64>> = (0..4).map(|o| seg.length_at(o)).collect();
        assert_eq!(lengths, [Some(0), Some(1), Some(3), Some(3)]);
        assert_eq!(seg.ordinal_of(10).unwrap(), Some(3));
        assert_eq!(seg.ordinal_of(4).unwrap(), Some(0));
        assert_eq!(seg.ordinal_of(5).unwrap(), None);
        // The key walk names the only document of each inline list.
        let mut walked = 0;
        for item in seg.posting_keys_between(0, u64::MAX) {
            let (key, only, i) = item.unwrap();
            assert_eq!(seg.posting_list_at(i).unwrap(), seg.posting_list(key).unwrap().unwrap());
            match seg.posting_list(key).unwrap() {
                Some(PostingList::Single(ordinal)) => assert_eq!(only, Some(ordinal), "{key}"),
                list => assert_eq!(only, None, "{key}: {list:?}"),
            }
            walked += 1;
        }
        assert_eq!(walked, seg.posting_key_count());
    }

    #[test]
    fn set_jaccard_reads_no_frequencies() {
        let bytes = build_segment(42, 2, docs());
        let seg = Segment::parse(bytes.as_slice(), "seg").unwrap();
        let stored = seg.vector(3).unwrap();
        assert_eq!(seg.vector_for(3, Similarity::MultisetJaccard).unwrap(), stored);
        let set = seg.vector_for(3, Similarity::SetJaccard).unwrap();
        assert_eq!(set, SignatureVector::from_pairs([(5, 1), (9, 1)]));
        let query = SignatureVector::from_pairs([(5, 3), (6, 1), (9, 1)]);
        for measure in [Similarity::MultisetJaccard, Similarity::SetJaccard, Similarity::Containment] {
            assert_eq!(seg.overlap(3, &query, measure).unwrap(), measure.overlap(&query, &stored), "{measure:?}");
        }
        // A frequency byte zeroed without its escape: an error under the
        // measures that weigh frequencies, the same answer under set
        // Jaccard, which never reads it.
        let mut damaged = bytes.clone();
        let first = seg.entry(3).unwrap().first as usize;
        damaged[seg.section_offset(SectionKind::Freqs) + first] = 0;
        let damaged = Segment::parse(damaged.as_slice(), "seg").unwrap();
        assert!(damaged.vector_for(3, Similarity::MultisetJaccard).is_err());
        assert!(damaged.overlap(3, &query, Similarity::MultisetJaccard).is_err());
        assert_eq!(damaged.vector_for(3, Similarity::SetJaccard).unwrap(), set);
        assert_eq!(
            damaged.overlap(3, &query, Similarity::SetJaccard).unwrap(),
            Similarity::SetJaccard.overlap(&query, &stored)
        );
    }

    #[test]
    fn posting_keys_out_of_order_are_a_typed_error_on_both_walks() {
        let bytes = build_segment(42, 2, docs());
        let seg = Segment::parse(bytes.as_slice(), "seg").unwrap();
        let (keys, _, _) = seg.sections[SectionKind::PostingKeys as usize - 1];
        let mut damaged = bytes.clone();
        let (first, second) = damaged[keys..keys + 16].split_at_mut(8);
        first.swap_with_slice(second);
        let fixed = with_fresh_checksums(&damaged).unwrap();
        let seg = Segment::parse(fixed.as_slice(), "seg").unwrap();
        let items: Vec<_> = seg.posting_keys_between(0, u64::MAX).collect();
        let last = items.last().unwrap().as_ref().unwrap_err();
        assert!(last.to_string().contains("posting keys not ascending"), "{last}");
        assert_eq!(items.iter().filter(|i| i.is_err()).count(), 1, "the error ends the walk");
        let err = seg.for_each_posting_key_between(0, u64::MAX, |_| ()).unwrap_err();
        assert!(err.to_string().contains("posting keys not ascending"), "{err}");
        let err = seg.for_each_posting_entry_between(0, u64::MAX, |_, _, _| Ok(())).unwrap_err();
        assert!(err.to_string().contains("posting keys not ascending"), "{err}");
    }

    /// Documents whose frequencies need escapes (format 3 stores a byte).
    fn heavy_docs() -> Vec<SegmentDoc> {
        let mut docs = docs();
        docs.push(SegmentDoc {
            id: 20,
            vector: SignatureVector::from_pairs([(2, 255), (5, 256), (7, 1), (9, 70_000), (11, u32::MAX)]),
            band_keys: vec![9, 2],
            fingerprint: fp(20),
        });
        docs
    }

    #[test]
    fn frequencies_past_a_byte_are_escaped() {
        for width in [EntryWidth::Narrowest, EntryWidth::Wide] {
            let heavy = heavy_docs();
            let file =
                build(5, 2, heavy.iter().map(SegmentDoc::as_ref).collect(), width, None, &mut PairBuffers::default()).0;
            let bytes = file.to_bytes();
            let seg = Segment::parse(bytes.as_slice(), "seg").unwrap();
            seg.verify().unwrap();
            assert_eq!(seg.narrow, width == EntryWidth::Narrowest);
            assert_eq!(seg.section(SectionKind::FreqEscapes).len(), 3 * 16, "256, 70,000 and u32::MAX");
            let last = seg.doc_count() - 1;
            assert_eq!(seg.entry(last).unwrap().id, 20, "the longest document");
            let heavy = heavy_docs().pop().unwrap().vector;
            assert_eq!(seg.vector(last).unwrap(), heavy);
            let query = SignatureVector::from_pairs([(5, 300), (9, 1), (11, 7)]);
            for measure in [Similarity::MultisetJaccard, Similarity::SetJaccard, Similarity::Containment] {
                assert_eq!(seg.overlap(last, &query, measure).unwrap(), measure.overlap(&query, &heavy));
            }
            for (i, doc) in docs().iter().enumerate() {
                let ordinal = seg.ordinal_of(doc.id).unwrap().unwrap();
                assert_eq!(seg.vector(ordinal).unwrap(), doc.vector, "doc {i}");
            }
            assert_eq!(seg.postings(9).unwrap().unwrap().iter().collect::<Vec<_>>(), [2, 3, last]);
            assert_eq!(seg.posting_list(11).unwrap(), Some(PostingList::Single(last)));
            assert_eq!(seg.band_bucket(2).unwrap().unwrap().iter().collect::<Vec<_>>(), [2, 3, last]);
            let list = seg.band_list(2).unwrap().unwrap();
            assert_eq!(list.iter_in(0..seg.doc_count()).collect::<Vec<_>>(), [2, 3, last]);
        }
    }

    #[test]
    fn escapes_of_documents_in_every_run_of_the_first_part_keep_their_order() {
        // Three and a half runs of PROLOGUE_RUN documents, one in 300 with
        // frequencies past a byte, the lengths spread so that the length
        // order mixes them.
        let count = PROLOGUE_RUN as u64 * 7 / 2;
        let docs: Vec<SegmentDoc> = (0..count)
            .map(|id| {
                let heavy = id % 300 == 7;
                let pairs = (0..20 + id % 13)
                    .map(|i| (id * 1_000 + i, if heavy && i % 4 == 0 { 300 + i as u32 } else { 1 + (i % 3) as u32 }));
                SegmentDoc {
                    id,
                    vector: SignatureVector::from_pairs(pairs),
                    band_keys: vec![id % 5],
                    fingerprint: fp(id),
                }
            })
            .collect();
        let file = build(
            3,
            1,
            docs.iter().map(SegmentDoc::as_ref).collect(),
            EntryWidth::Narrowest,
            None,
            &mut PairBuffers::default(),
        )
        .0;
        let bytes = file.to_bytes();
        assert_eq!(file.crc(), crc32fast::hash(&bytes));
        let seg = Segment::parse(bytes.as_slice(), "seg").unwrap();
        seg.verify().unwrap();
        let escaped = docs.iter().flat_map(|d| d.vector.freqs()).filter(|&&f| f > FREQ_BYTE_MAX).count();
        assert!(escaped > 40, "{escaped}");
        assert_eq!(seg.section(SectionKind::FreqEscapes).len(), escaped * 16);
        for doc in &docs {
            let ordinal = seg.ordinal_of(doc.id).unwrap().unwrap();
            assert_eq!(seg.vector(ordinal).unwrap(), doc.vector, "doc {}", doc.id);
            assert_eq!(seg.entry(ordinal).unwrap().length, doc.vector.total());
        }
    }

    #[test]
    fn verify_finds_a_missing_or_misplaced_escape() {
        let bytes = build_segment(5, 2, heavy_docs());
        let seg = Segment::parse(bytes.as_slice(), "seg").unwrap();
        let (freqs, _, _) = seg.sections[SectionKind::Freqs as usize - 1];
        let (escapes, escapes_len, _) = seg.sections[SectionKind::FreqEscapes as usize - 1];
        let first_escaped = le_u64(&bytes, escapes) as usize;
        // With checksums made to match, only the cross-checks can tell.
        let rechecksummed = |mut damaged: Vec<u8>| {
            for kind in [SectionKind::Freqs, SectionKind::FreqEscapes] {
                match_checksum(&mut damaged, kind);
            }
            Segment::parse(damaged, "seg").unwrap().verify().unwrap_err().to_string()
        };
        // A zero byte in the freqs with no escape.
        let mut damaged = bytes.clone();
        damaged[freqs] = 0;
        assert!(rechecksummed(damaged).contains("zero frequency"));
        // An escape whose byte is not zero.
        let mut damaged = bytes.clone();
        damaged[freqs + first_escaped] = 3;
        assert!(rechecksummed(damaged).contains("escape disagrees"));
        // An escaped frequency a byte could have held.
        let mut damaged = bytes.clone();
        damaged[escapes + 8..escapes + 16].copy_from_slice(&200u64.to_le_bytes());
        assert!(rechecksummed(damaged).contains("escape disagrees"));
        // Escapes out of order.
        let mut damaged = bytes.clone();
        damaged[escapes..escapes + escapes_len].rotate_left(16);
        assert!(rechecksummed(damaged).contains("escape disagrees"));
    }

    #[test]
    fn every_bit_flip_and_truncation_is_detected() {
        // And one whose posting keys leave out their top 8 bits behind a
        // directory (1,100 keys).
        let many_keys = vec![SegmentDoc {
            id: 1,
            vector: SignatureVector::from_pairs((0..1_100u64).map(|k| (k.wrapping_mul(0x9E37_79B9_7F4A_7C15), 1))),
            band_keys: vec![1, 2],
            fingerprint: fp(1),
        }];
        let many_keys = build_segment(1, 2, many_keys);
        assert_eq!((many_keys[44], many_keys.len() > 20_000), (8, true));
        for bytes in [
            build_segment(1, 2, docs()),
            build(
                1,
                2,
                heavy_docs().iter().map(SegmentDoc::as_ref).collect(),
                EntryWidth::Wide,
                None,
                &mut PairBuffers::default(),
            )
            .0
            .to_bytes(),
            many_keys,
        ] {
            every_bit_flip_and_truncation_of(&bytes);
        }
    }

    fn every_bit_flip_and_truncation_of(bytes: &[u8]) {
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.to_vec();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let detected = match Segment::parse(flipped.as_slice(), "seg") {
                Err(_) => true,
                Ok(seg) => seg.verify().is_err(),
            };
            // Alignment padding between sections is covered by no checksum.
            let (_, in_section) = locate(bytes, bit / 8);
            assert!(detected || !in_section, "bit {bit} flipped went unnoticed");
        }
        for len in 0..bytes.len() {
            let truncated = &bytes[..len];
            assert!(
                Segment::parse(truncated, "seg").is_err_and(|e| matches!(e, IndexError::Corrupted { .. })),
                "{len}"
            );
        }
    }

    /// `pairs` as a table's [`Pair`]s.
    fn pairs_of(pairs: &[(u64, u32)]) -> Vec<Pair> {
        pairs.iter().map(|&p| Pair::from(p)).collect()
    }

    #[test]
    fn a_pair_is_12_bytes_and_sorts_as_its_tuple() {
        assert_eq!(std::mem::size_of::<Pair>(), 12);
        let mut next = crate::store::roaring_view::xorshift(0x2545_F491_4F6C_DD1D);
        let mut tuples: Vec<(u64, u32)> = (0..2_000).map(|i| (((next() % 300) << 40) | (next() % 7), i % 5)).collect();
        let mut pairs = pairs_of(&tuples);
        tuples.sort_unstable();
        pairs.sort_unstable();
        assert_eq!(pairs, pairs_of(&tuples));
    }

    #[test]
    fn radix_sort_of_pairs_equals_the_library_sort() {
        let mut next = crate::store::roaring_view::xorshift(0x9E37_79B9_7F4A_7C15);
        // Uniform hashes with repeated keys, then keys crowded into one top
        // byte (one huge bucket), both past the radix threshold.
        let uniform: Vec<(u64, u32)> =
            (0..200_000).map(|i| ((next() % 150_000).wrapping_mul(0x9E37_79B9_7F4A_7C15), (i % 1000) as u32)).collect();
        let skewed: Vec<(u64, u32)> = (0..100_000).map(|i| (next() >> 12, (next() % 50) as u32 + i % 3)).collect();
        for pairs in [uniform, skewed, vec![(3, 1), (1, 2), (3, 0)]] {
            let mut expected = pairs.clone();
            expected.sort_unstable();
            let mut got = pairs_of(&pairs);
            sort_pairs(&mut got);
            assert_eq!(got, pairs_of(&expected));
        }
    }

    #[test]
    fn a_bucket_sorted_by_groups_equals_the_library_sort() {
        let mut next = crate::store::roaring_view::xorshift(0xD1B5_4A32_D192_ED03);
        let mut scratch = BucketScratch::default();
        let top = 0xAB00_0000_0000_0000;
        // One top byte (a bucket): uniform keys with repeats and ordinals in
        // any order; every key in one group (its next 16 bits equal); a
        // few groups only; below the size that takes the library's sort;
        // and sizes that give 8, 12 and 16 bits of groups. Past
        // `SPLIT_MIN`, split into parts first: uniform (300,000), every
        // key in one part (its next 8 bits equal), a few groups of one
        // part, and parts of every size from empty to a few pairs.
        let uniform = |n: usize, next: &mut dyn FnMut() -> u64| -> Vec<(u64, u32)> {
            let keys: Vec<u64> = (0..n / 3 + 1).map(|_| top | next() >> 8).collect();
            (0..n).map(|_| (keys[(next() % keys.len() as u64) as usize], (next() % 5_000) as u32)).collect()
        };
        let mut cases = vec![
            uniform(3_000, &mut next),
            uniform(20_000, &mut next),
            uniform(300_000, &mut next),
            uniform(500, &mut next),
            (0..5_000).map(|i| (top | 0x00CD_EF00_0000_0000 | next() >> 40, i % 7)).collect(),
            (0..5_000).map(|i| (top | (next() % 3) << 40, (i * 13 % 101) as u32)).collect(),
            // Top bytes that differ (the one bucket of a small input).
            (0..5_000).map(|i| (next(), i)).collect(),
            (0..50_000).map(|i| (top | 0x0077_0000_0000_0000 | next() >> 16, i % 11)).collect(),
            (0..SPLIT_MIN as u32).map(|i| (top | 0x0001_0000_0000_0000 | (next() % 3) << 40, i % 5)).collect(),
            (1..SPLIT_MIN as u64 + 2)
                .map(|i| (top | u64::from(i.trailing_zeros() * 7 % 256) << 48 | next() >> 20, (i % 9) as u32))
                .collect(),
        ];
        cases.push(cases[2].iter().rev().copied().collect());
        for pairs in cases {
            let mut expected = pairs.clone();
            expected.sort_unstable();
            let shared_top_byte = pairs.iter().all(|p| top_byte(p.0) == top_byte(pairs[0].0));
            // Only the case made to differ leaves the groups unused.
            assert!(shared_top_byte || pairs.len() == 5_000);
            let mut got = pairs_of(&pairs);
            sort_bucket(&mut got, if shared_top_byte { 8 } else { 0 }, &mut scratch);
            assert_eq!(got, pairs_of(&expected));
        }
        // A flush's buckets, whose keys share their top 12 bits: below
        // `SPLIT_MIN` (the size of a 200,000-page word-3-shingle flush's)
        // and past it, uniform with repeats, and crowded into a few groups.
        let flush_top = 0xABC0_0000_0000_0000;
        let shared = |n: usize, next: &mut dyn FnMut() -> u64| -> Vec<(u64, u32)> {
            let keys: Vec<u64> = (0..n / 2 + 1).map(|_| flush_top | next() >> FLUSH_BUCKET_BITS).collect();
            (0..n).map(|i| (keys[(next() % keys.len() as u64) as usize], i as u32 / 7)).collect()
        };
        // Groups (the 16 bits below the bucket's 12) of keys and ordinals
        // descending, among uniform ones: their insertion's moves below the
        // bound that sorts by comparison instead, and past it.
        let crowded = |groups: &[(u64, u32)], next: &mut dyn FnMut() -> u64| {
            let mut pairs = shared(26_000, next);
            for &(group, n) in groups {
                pairs.extend((0..n).rev().map(|i| (flush_top | group << 36 | u64::from(i / 2) << 20, 1000 - i)));
            }
            pairs
        };
        let flush_cases = [
            shared(1_500, &mut next),
            shared(26_000, &mut next),
            shared(SPLIT_MIN + 3_000, &mut next),
            (0..40_000).map(|i| (flush_top | (next() % 5) << 30, i % 13)).collect(),
            crowded(&[(0x1234, 16), (0x4321, 17), (0x7777, 300)], &mut next),
            crowded(&[(0x1234, 800)], &mut next),
        ];
        for pairs in flush_cases {
            assert!(pairs.iter().all(|p| flush_bucket(p.0) == flush_bucket(flush_top)));
            let mut expected = pairs.clone();
            expected.sort_unstable();
            let mut got = pairs_of(&pairs);
            sort_bucket(&mut got, FLUSH_BUCKET_BITS, &mut scratch);
            assert_eq!(got, pairs_of(&expected));
        }
    }

    #[test]
    fn a_file_written_early_then_rest_then_head_is_the_file() {
        // One set of pair buffers for every build, as a bulk writer's chain
        // keeps them: a build after a larger one is the same file.
        let mut buffers = PairBuffers::default();
        for docs in [heavy_docs(), docs(), Vec::new(), heavy_docs()] {
            let expected = build_segment_file(7, 2, docs.clone()).to_bytes();
            let early = std::sync::Mutex::new(Vec::new());
            let write = |parts: &[&[u8]]| {
                early.lock().unwrap().extend(parts.iter().copied().flatten());
                Ok(())
            };
            let (file, written, len) =
                build_segment_file_writing(7, 2, docs.iter().map(SegmentDoc::as_ref).collect(), &write, &mut buffers);
            assert!(written.is_ok());
            let mut bytes = early.into_inner().unwrap();
            assert_eq!(bytes.len(), len);
            // The early bytes begin with zeros where the head goes.
            assert!(bytes[..file.head().len()].iter().all(|&b| b == 0));
            bytes.extend(file.parts_after(len).into_iter().flatten());
            bytes[..file.head().len()].copy_from_slice(file.head());
            assert_eq!(bytes, expected, "{} documents", docs.len());
            assert_eq!(file.crc(), crc32fast::hash(&expected));
            // Written: its sections' buffers serve the next build.
            buffers.keep_sections(file);
            // The buffers stay with their holder, with room for the
            // largest pass built so far.
            if !docs.is_empty() {
                assert!(buffers.capacity_bytes() > 0);
            }
        }
        // The early write's error comes back with the file.
        let failing = |_: &[&[u8]]| Err(std::io::Error::other("disk full"));
        let (_, written, _) = build_segment_file_writing(
            7,
            2,
            docs().iter().map(SegmentDoc::as_ref).collect(),
            &failing,
            &mut PairBuffers::default(),
        );
        assert_eq!(written.unwrap_err().to_string(), "disk full");
    }

    /// Documents of `n` hashes each, half of them drawn from 1,500 shared
    /// ones: enough for posting keys, entries, lists and freqs past
    /// [`KEPT_SECTION_MIN`] at 3,000 documents of 500.
    fn bulky_docs(count: u64, n: u64, seed: u64) -> Vec<SegmentDoc> {
        let mut next = crate::store::roaring_view::xorshift(seed);
        (0..count)
            .map(|id| SegmentDoc {
                id,
                vector: SignatureVector::from_hashes(
                    (0..n).map(|i| if i % 2 == 0 { next() % 1_500 } else { next() }).collect(),
                ),
                band_keys: vec![next(), next()],
                fingerprint: fp(id),
            })
            .collect()
    }

    #[test]
    fn a_table_writer_widens_its_entries_when_an_offset_does_not_fit_four_bytes() {
        // Lists of one ordinal (inline), of a few (packed) and of many
        // (bitmaps), in key order.
        let lists: Vec<(u64, Vec<u32>)> = (0..3_000u64)
            .map(|k| {
                let len = [1, 1, 3, 1, 40, 300][k as usize % 6];
                (
                    k * 7 + 1,
                    (0..len).map(|i| (k as u32 * 13 + i * 5) % 70_000).collect::<std::collections::BTreeSet<u32>>(),
                )
            })
            .map(|(k, set)| (k, set.into_iter().collect()))
            .collect();
        let write = |narrow: bool, narrow_offsets: u64| {
            let mut table = TableWriter::new(70_000, lists.len(), 0);
            table.narrow &= narrow;
            table.narrow_offsets = narrow_offsets;
            for (key, ordinals) in &lists {
                table.push(*key, ordinals);
            }
            table
        };
        let wide = write(false, u64::from(NARROW_PACKED));
        let narrow = write(true, u64::from(NARROW_PACKED));
        assert!(!wide.narrow && narrow.narrow);
        assert_eq!(wide.entries.len(), 2 * narrow.entries.len());
        assert_eq!((&narrow.keys, &narrow.data), (&wide.keys, &wide.data));
        // Widened by the writer once the data passes a lowered bound,
        // midway, and by `in_width` as a whole: the eight-byte entries.
        let midway = write(true, wide.data.len() as u64 / 2);
        assert!(!midway.narrow);
        assert_eq!(midway.entries, wide.entries);
        let as_file = |table: &TableWriter, narrow_file: bool| {
            TableEntries { bytes: table.entries.clone(), narrow: table.narrow }.in_width(narrow_file)
        };
        assert_eq!(as_file(&narrow, false), wide.entries);
        assert_eq!(as_file(&wide, true), narrow.entries);
        assert_eq!(as_file(&narrow, true), narrow.entries);
    }

    #[test]
    fn kept_section_buffers_serve_the_next_flush_and_change_no_byte() {
        let mut buffers = PairBuffers::default();
        let owned = |file: &SegmentFile| -> Vec<usize> {
            let owned = file.sections.iter().filter_map(|section| match section {
                SectionBytes::Owned(bytes, _) => Some(bytes.as_ptr() as usize),
                SectionBytes::Pieces(_) => None,
            });
            owned.collect()
        };
        // The same flush twice, then a larger one (a kept buffer a little
        // short still serves, and grows), then a smaller one.
        for (round, (count, seed)) in [(3_000, 1), (3_000, 1), (3_200, 2), (600, 3)].into_iter().enumerate() {
            let docs = bulky_docs(count, 500, seed);
            let expected = build_segment_file(9, 2, docs.clone()).to_bytes();
            let kept: Vec<usize> = buffers.bytes.iter().map(|b| b.as_ptr() as usize).collect();
            let refs = docs.iter().map(SegmentDoc::as_ref).collect();
            let file = build(9, 2, refs, EntryWidth::Narrowest, None, &mut buffers).0;
            assert_eq!(file.to_bytes(), expected, "{count} documents");
            if round == 1 {
                // The posting keys, entries and lists and the freqs are
                // built in the buffers the same flush left.
                let reused = owned(&file).into_iter().filter(|p| kept.contains(p)).count();
                assert_eq!(reused, 4, "{reused} of the {} kept buffers reused", kept.len());
                let SectionBytes::Owned(freqs, _) = &file.sections[3] else { panic!("freqs built in memory") };
                assert!(kept.contains(&(freqs.as_ptr() as usize)));
            }
            buffers.keep_sections(file);
            // Those four, each emptied; what the flush did not take is let
            // go (the small flush's freqs, lists and four-byte entries were
            // new, under the size kept, and so are not kept).
            assert_eq!(buffers.bytes.len(), if count == 600 { 1 } else { 4 }, "{count} documents");
            assert!(buffers.bytes.iter().all(|b| b.is_empty() && b.capacity() >= KEPT_SECTION_MIN));
        }
    }

    #[test]
    fn a_kept_buffer_is_the_smallest_with_room_and_small_sections_get_new_ones() {
        let mut buffers = PairBuffers::default();
        let sized = |n: usize| SectionBytes::Owned(Vec::with_capacity(n), 0);
        let mut filled = vec![7u8; KEPT_SECTION_MIN];
        filled.truncate(10);
        let file = SegmentFile {
            head: Vec::new(),
            sections: vec![
                sized(4 * KEPT_SECTION_MIN),
                sized(2 * KEPT_SECTION_MIN),
                sized(KEPT_SECTION_MIN / 2),
                SectionBytes::Owned(filled, 0),
            ],
        };
        buffers.keep_sections(file);
        let mut capacities: Vec<usize> = buffers.bytes.iter().map(Vec::capacity).collect();
        capacities.sort_unstable();
        assert_eq!(capacities.len(), 3, "the half-MiB one is not kept");
        assert!(buffers.bytes.iter().all(Vec::is_empty), "kept buffers are emptied");
        // Room for 1.5 MiB: the 2 MiB one, not the 4 MiB one.
        let taken = buffers.take_bytes(3 * KEPT_SECTION_MIN / 2, 3 * KEPT_SECTION_MIN / 2);
        assert_eq!(taken.capacity(), capacities[1]);
        // Nothing kept has room for 8 MiB: a new buffer of what is wanted.
        let fresh = buffers.take_bytes(8 * KEPT_SECTION_MIN, 9 * KEPT_SECTION_MIN);
        assert_eq!(fresh.capacity(), 9 * KEPT_SECTION_MIN);
        // A small section never takes a large kept buffer.
        assert_eq!(buffers.take_bytes(10, 100).capacity(), 100);
        assert_eq!(buffers.bytes.len(), 2);
    }

    #[test]
    fn a_posting_table_built_in_passes_is_the_table_of_its_pairs() {
        let mut next = crate::store::roaring_view::xorshift(0x5851_F42D_4C95_7F2D);
        // Documents of sorted, distinct hashes (a flush's vectors), some
        // shared, some crowded into one top byte, past the 2^16 pairs where
        // the in-place pass starts bucketing; one empty.
        let shared: Vec<u64> = (0..3_000).map(|_| next()).collect();
        let docs: Vec<Vec<u64>> = (0..400)
            .map(|d| {
                let mut hashes: Vec<u64> = (0..if d == 17 { 0 } else { 200 })
                    .map(|i| match i % 3 {
                        0 => shared[(next() % 3_000) as usize],
                        1 => next() >> 8,
                        _ => next(),
                    })
                    .collect();
                hashes.extend((d % 7 == 0).then_some(u64::MAX));
                hashes.sort_unstable();
                hashes.dedup();
                hashes
            })
            .collect();
        let pairs: Vec<(u64, u32)> =
            docs.iter().enumerate().flat_map(|(o, hashes)| hashes.iter().map(move |&h| (h, o as u32))).collect();
        assert!(pairs.len() >= 1 << 16);
        let whole = write_bitmap_table(pairs_of(&pairs), 400);
        let vectors: Vec<&[u64]> = docs.iter().map(Vec::as_slice).collect();
        // One bucket a pass (and the crowded bucket past the cap), a few,
        // and every pair in one pass.
        // The buffers of one pass size serve the next, larger or smaller.
        let mut buffers = PairBuffers::default();
        for pass_pairs in [1, 300, 5_000, pairs.len(), 300] {
            let passes = write_posting_table(&vectors, flush_counts(&vectors), 400, pass_pairs, &mut buffers);
            assert_eq!(passes.keys, whole.keys, "{pass_pairs}");
            assert_eq!(passes.entries, whole.entries, "{pass_pairs}");
            assert_eq!(passes.data, whole.data, "{pass_pairs}");
            assert_eq!(passes.lengths, whole.lengths, "{pass_pairs}");
        }
    }

    #[test]
    fn a_tables_reserved_bounds_hold_its_keys_and_data() {
        let mut next = crate::store::roaring_view::xorshift(0x2545_F491_4F6C_DD1D);
        // Lists of every kind: one ordinal, packed, small bitmaps, past
        // PACKED_MAX, a container past 4,096 ordinals (a bitmap container),
        // and ordinals in two or more containers (past 2^16 documents).
        for (doc_count, lengths) in [
            (50, vec![1, 2, 3, 7, 49]),
            (1_000, vec![1, 2, 40, 255, 256, 999]),
            (200_000, vec![1, 2, 300, 5_000, 150_000]),
        ] {
            let mut pairs = Vec::new();
            for (k, &n) in lengths.iter().enumerate() {
                let mut ordinals: Vec<u32> = (0..n).map(|_| (next() % u64::from(doc_count)) as u32).collect();
                ordinals.sort_unstable();
                ordinals.dedup();
                pairs.extend(ordinals.into_iter().map(|o| ((k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15), o)));
            }
            // Every ordinal of a dense list: containers of 65,536.
            pairs.extend((0..doc_count).map(|o| (u64::MAX, o)));
            pairs.sort_unstable();
            let pairs = pairs_of(&pairs);
            let (keys, data) = table_bounds(&pairs, doc_count);
            let table = write_bitmap_table(pairs, doc_count);
            assert_eq!(table.keys.len(), keys * 8, "{doc_count}");
            assert!(table.data.len() <= data, "{doc_count}: {} > {data}", table.data.len());
            // Reserved once: Vec::with_capacity's capacity is exact.
            assert_eq!((table.keys.capacity(), table.data.capacity()), (keys * 8, data), "{doc_count}");
        }
    }

    #[test]
    fn segment_file_parts_are_the_file() {
        let file = build_segment_file(9, 2, docs());
        let bytes = file.to_bytes();
        assert_eq!(file.len(), bytes.len());
        assert_eq!(file.crc(), crc32fast::hash(&bytes));
        assert_eq!(bytes, build_segment(9, 2, docs()));
        Segment::parse(bytes, "seg").unwrap().verify().unwrap();
    }

    /// Queries trust the length directory without reading the documents'
    /// entries, so a damaged one is refused at open, not only by `verify`.
    #[test]
    fn a_damaged_length_directory_is_refused_at_open() {
        let bytes = build_segment(1, 2, docs());
        let seg = Segment::parse(bytes.as_slice(), "seg").unwrap();
        let (offset, ..) = seg.sections[SectionKind::Lengths as usize - 1];
        let mut damaged = bytes.clone();
        // Entry 1's length (1) made 2: the walk would take ordinal 1 for
        // longer than it is.
        damaged[offset + 16] ^= 3;
        let err = Segment::parse(damaged.as_slice(), "seg").unwrap_err();
        assert!(matches!(err, IndexError::Corrupted { .. }), "{err:?}");
        assert!(err.to_string().contains("lengths"), "{err}");
    }

    #[test]
    fn verify_checks_the_length_directory_against_the_documents() {
        let bytes = build_segment(1, 2, docs());
        // Directory entry 1 is (length 1, ordinal 1); point it at ordinal 2
        // and give the section a matching checksum: only the cross-check
        // can tell.
        let seg = Segment::parse(bytes.as_slice(), "seg").unwrap();
        let (offset, _, _) = seg.sections[SectionKind::Lengths as usize - 1];
        let mut damaged = bytes.clone();
        damaged[offset + 24..offset + 32].copy_from_slice(&2u64.to_le_bytes());
        match_checksum(&mut damaged, SectionKind::Lengths);
        let seg = Segment::parse(damaged.as_slice(), "seg").unwrap();
        let err = seg.verify().unwrap_err();
        assert!(err.to_string().contains("length directory disagrees"), "{err}");
    }

    /// Whether byte `at` is in the header, the table or a section.
    fn locate(bytes: &[u8], at: usize) -> ((), bool) {
        if at < HEADER_LEN + SECTIONS.len() * TABLE_ENTRY_LEN {
            return ((), true);
        }
        let seg = Segment::parse(bytes, "seg").unwrap();
        ((), seg.sections.iter().any(|&(o, l, _)| (o..o + l).contains(&at)))
    }

    /// FORMAT.md §7, byte for byte: header fields at their offsets, the
    /// table after the header, sections 8-aligned with the sizes the
    /// header implies.
    #[test]
    fn frequent_section_lists_the_longest_lists() {
        // 2,000 keys held by 16 documents each, and keys 1,500..1,600 by
        // four more: the cap is max(1,024, 2,000 / 16) = 1,024 lists, the
        // longest first, ties by smaller hash.
        let mut docs: Vec<SegmentDoc> = (0..16)
            .map(|id| SegmentDoc {
                id,
                vector: SignatureVector::from_pairs((0..2000).map(|h| (h, 1))),
                band_keys: vec![1, 2],
                fingerprint: fp(id),
            })
            .collect();
        docs.extend((16..20).map(|id| SegmentDoc {
            id,
            vector: SignatureVector::from_pairs((1500..1600).map(|h| (h, 1))),
            band_keys: vec![1, 2],
            fingerprint: fp(id),
        }));
        docs.push(SegmentDoc {
            id: 99,
            vector: SignatureVector::from_pairs([(5000, 1)]),
            band_keys: vec![3, 4],
            fingerprint: fp(99),
        });
        let bytes = build_segment(1, 2, docs);
        let segment = Segment::parse(bytes.as_slice(), "seg").unwrap();
        segment.verify().unwrap();
        let frequent: Vec<(u64, u64)> = segment.frequent().collect();
        let mut expected: Vec<(u64, u64)> = (1500..1600)
            .map(|h| (h, 20))
            .chain((0..2000).filter(|h| !(1500..1600).contains(h)).map(|h| (h, 16)))
            .take(FREQUENT_FLOOR)
            .collect();
        expected.sort_unstable();
        assert_eq!(frequent, expected);
        assert_eq!(
            segment.posting_list(5000).unwrap(),
            Some(PostingList::Single(0)),
            "the shortest document is ordinal 0"
        );
        assert_eq!(segment.posting_list(4999).unwrap(), None);
    }

    #[test]
    fn key_directory_finds_what_the_search_finds() {
        let mut next = crate::store::roaring_view::xorshift(0x2545_F491_4F6C_DD1D);
        // Up to 1,023 keys store all their bits, from 1,024 all but the top
        // 8, from 262,144 all but the top 16 (format version 6).
        for n in [0usize, 1, 7, 8, 9, 100, 1_023, 1_024, 5_000, 262_144] {
            let hashes: Vec<u64> = (0..n).map(|_| next()).collect();
            let docs = vec![SegmentDoc {
                id: 1,
                vector: SignatureVector::from_pairs(hashes.iter().map(|&h| (h, 1))),
                band_keys: vec![1, 2],
                fingerprint: fp(1),
            }];
            let bytes = build_segment(1, 2, docs);
            let segment = Segment::parse(bytes.as_slice(), "seg").unwrap();
            assert_eq!(u32::from(bytes[44]), keys::dropped_bits(n), "{n} keys");
            segment.verify().unwrap();
            for &h in &hashes {
                assert_eq!(segment.posting_list(h).unwrap(), Some(PostingList::Single(0)), "{n} keys: {h:x}");
            }
            let mut sorted = hashes.clone();
            sorted.sort_unstable();
            let (lo, hi) = (sorted.get(n / 3).copied().unwrap_or(0), sorted.get(n / 2).copied().unwrap_or(0));
            let between: Vec<u64> = segment.posting_keys_between(lo, hi).map(|k| k.unwrap().0).collect();
            assert_eq!(between, sorted.iter().copied().filter(|k| (lo..=hi).contains(k)).collect::<Vec<_>>());
            let mut walked = Vec::new();
            segment.for_each_posting_key_between(lo, hi, |k| walked.push(k)).unwrap();
            assert_eq!(walked, between);
            // The entry walk hands over what the iterator yields.
            let items: Vec<_> = segment.posting_keys_between(lo, hi).map(Result::unwrap).collect();
            let mut entries = Vec::new();
            segment
                .for_each_posting_entry_between(lo, hi, |k, only, i| {
                    entries.push((k, only, i));
                    Ok(())
                })
                .unwrap();
            assert_eq!(entries, items);
            let probes: Vec<u64> = (0..2_000).map(|_| next()).chain([0, u64::MAX]).collect();
            for &probe in &probes {
                let found = segment.find_posting_key(probe);
                assert_eq!(found, segment.find_key(SectionKind::PostingKeys, probe), "{n} keys: {probe:x}");
            }
            // The staged look-up of many keys, held and absent, at once.
            let batch: Vec<u64> = probes.iter().chain(hashes.iter().step_by(7)).copied().collect();
            let lists = segment.posting_lists(batch.iter().map(|&h| Some(h))).unwrap();
            for (&h, list) in batch.iter().zip(&lists) {
                assert_eq!(list, &segment.posting_list(h).unwrap(), "{n} keys: {h:x}");
            }
            for &h in hashes.iter().step_by(97) {
                let at = sorted.binary_search(&h).ok();
                assert_eq!(segment.find_key(SectionKind::PostingKeys, h), at, "{n} keys: {h:x}");
                assert_eq!(segment.find_posting_key(h), at, "{n} keys: {h:x}");
            }
            // The band keys' directory, over one document's band keys.
            let band_keys: Vec<u64> = (0..n).map(|_| next()).collect();
            let docs = vec![SegmentDoc {
                id: 1,
                vector: SignatureVector::from_pairs([(1, 1)]),
                band_keys: band_keys.clone(),
                fingerprint: fp(1),
            }];
            let bytes = build_segment(1, n as u32, docs);
            let segment = Segment::parse(bytes.as_slice(), "seg").unwrap();
            assert_eq!(u32::from(bytes[45]), keys::dropped_bits(n), "{n} band keys");
            for &key in &band_keys {
                assert_eq!(segment.band_list(key).unwrap(), Some(PostingList::Single(0)), "{n} keys: {key:x}");
            }
            for probe in (0..2_000).map(|_| next()).chain([0, u64::MAX]) {
                let found = segment.find_through(&segment.band_directory, SectionKind::BandKeys, probe);
                assert_eq!(found, segment.find_key(SectionKind::BandKeys, probe), "{n} keys: {probe:x}");
            }
            // The LSH query's staged look-ups answer as one at a time, for
            // stored and absent keys mixed.
            let mixed: Vec<u64> =
                band_keys.iter().step_by(7).copied().chain((0..300).map(|_| next())).chain([0, u64::MAX]).collect();
            let one_at_a_time: Vec<_> = mixed.iter().map(|&key| segment.band_list(key).unwrap()).collect();
            assert_eq!(segment.band_lists(&mixed).unwrap(), one_at_a_time, "{n} band keys");
        }
    }

    /// Documents `0..doc_count` (ids 1 on), each with a signature of its
    /// own, and `lists` signatures (hashes 1 on) held by the documents at
    /// the given positions.
    fn listed_docs(doc_count: u32, lists: &[Vec<u32>]) -> Vec<SegmentDoc> {
        (0..doc_count)
            .map(|d| {
                let shared = lists.iter().enumerate().filter(|(_, l)| l.contains(&d)).map(|(k, _)| (k as u64 + 1, 1));
                SegmentDoc {
                    id: u64::from(d) + 1,
                    vector: SignatureVector::from_pairs(shared.chain([(1 << 40 | u64::from(d), 1)])),
                    band_keys: vec![],
                    fingerprint: fp(u64::from(d)),
                }
            })
            .collect()
    }

    /// Every list a segment stores (inline, packed or bitmap; narrow or
    /// wide entries) answers `len`, `contains`, `count_in` and `iter_in`
    /// like the ordinals it was written from, over ranges that cut it
    /// anywhere; and `verify` passes.
    fn check_lists(doc_count: u32, lists: &[Vec<u32>], cuts: &[(u32, u32)]) -> Result<usize, TestCaseError> {
        let mut packed = 0;
        for width in [EntryWidth::Narrowest, EntryWidth::Wide] {
            let docs = listed_docs(doc_count, lists);
            let bytes =
                build(1, 0, docs.iter().map(SegmentDoc::as_ref).collect(), width, None, &mut PairBuffers::default())
                    .0
                    .to_bytes();
            let segment = Segment::parse(bytes.as_slice(), "seg").unwrap();
            prop_assert!(segment.verify().is_ok());
            for (k, members) in lists.iter().enumerate() {
                let mut expected: Vec<u32> =
                    members.iter().map(|&d| segment.ordinal_of(u64::from(d) + 1).unwrap().unwrap()).collect();
                expected.sort_unstable();
                expected.dedup();
                let list = segment.posting_list(k as u64 + 1).unwrap();
                let Some(list) = list else {
                    prop_assert!(expected.is_empty());
                    continue;
                };
                packed += usize::from(matches!(list, PostingList::Packed(_)));
                prop_assert_eq!(list.len(), expected.len() as u64);
                prop_assert_eq!(list.iter_in(0..u32::MAX).collect::<Vec<_>>(), expected.clone());
                for &(a, b) in cuts {
                    let range = a.min(b)..a.max(b);
                    let inside: Vec<u32> = expected.iter().copied().filter(|o| range.contains(o)).collect();
                    prop_assert_eq!(list.count_in(range.clone()), inside.len() as u64);
                    prop_assert_eq!(list.iter_in(range.clone()).collect::<Vec<_>>(), inside);
                    prop_assert_eq!(list.contains(a), expected.contains(&a));
                }
            }
            // Looked up all at once, with hashes held, absent and left out
            // (`None`), the lists are those looked up one at a time.
            let hashes: Vec<Option<u64>> = (0..lists.len() as u64 + 2)
                .map(|k| Some(k + 1))
                .chain((0..doc_count.min(40)).map(|d| Some(1 << 40 | u64::from(d))))
                .chain([None, Some(u64::MAX), None])
                .collect();
            let batch = segment.posting_lists(hashes.iter().copied()).unwrap();
            prop_assert_eq!(batch.len(), hashes.len());
            for (hash, list) in hashes.iter().zip(&batch) {
                let one = hash.map(|h| segment.posting_list(h).unwrap()).unwrap_or(None);
                prop_assert_eq!(list, &one, "{:?}", hash);
            }
        }
        Ok(packed)
    }

    proptest::proptest! {
        #[test]
        fn lists_read_like_their_ordinals(
            doc_count in 1u32..700,
            lists in proptest::collection::vec(proptest::collection::vec(0u32..700, 0..300), 0..6),
            cuts in proptest::collection::vec((0u32..710, 0u32..710), 1..8),
        ) {
            let lists: Vec<Vec<u32>> =
                lists.into_iter().map(|l| l.into_iter().filter(|&d| d < doc_count).collect()).collect();
            check_lists(doc_count, &lists, &cuts)?;
        }
    }

    proptest::proptest! {
        /// A stored vector's overlap with a query is the measure's, under
        /// every measure: frequencies from 1 to past a byte (escaped),
        /// hashes drawn from a small range so that many are shared.
        #[test]
        fn stored_overlaps_are_the_measures(
            docs in proptest::collection::vec(
                proptest::collection::btree_map(0u64..60, proptest::prop_oneof![1u32..4, 250u32..70_000], 0..40), 1..8),
            query in proptest::collection::btree_map(0u64..60, proptest::prop_oneof![1u32..4, 250u32..70_000], 1..40),
            ppb in proptest::prop_oneof![0u32..=1_000_000_000, 300_000_000u32..900_000_000],
        ) {
            let tau = Threshold::from_ppb(ppb).unwrap();
            let vectors: Vec<SignatureVector> =
                docs.iter().map(|d| SignatureVector::from_pairs(d.iter().map(|(&h, &f)| (h, f)))).collect();
            let docs: Vec<SegmentDoc> = vectors
                .iter()
                .enumerate()
                .map(|(i, v)| SegmentDoc { id: i as u64 + 1, vector: v.clone(), band_keys: vec![], fingerprint: fp(i as u64) })
                .collect();
            let bytes = build_segment(3, 0, docs);
            let seg = Segment::parse(bytes.as_slice(), "seg").unwrap();
            let query = SignatureVector::from_pairs(query.iter().map(|(&h, &f)| (h, f)));
            for (i, vector) in vectors.iter().enumerate() {
                let ordinal = seg.ordinal_of(i as u64 + 1).unwrap().unwrap();
                for measure in [Similarity::MultisetJaccard, Similarity::SetJaccard, Similarity::Containment] {
                    let exact = measure.overlap(&query, vector);
                    prop_assert_eq!(seg.overlap(ordinal, &query, measure).unwrap(), exact);
                    // Stopped early or not, the overlap when it meets τ
                    // and nothing when it does not.
                    let entry = seg.entry(ordinal).unwrap();
                    let reaching = seg.overlap_reaching(entry, &query, measure, tau).unwrap();
                    prop_assert_eq!(reaching, Some(exact).filter(|o| o.meets(tau)), "{:?} at {:?}", measure, tau);
                }
                // Each stored vector as the probe, merged in place under
                // set Jaccard.
                for (p, probe) in vectors.iter().enumerate() {
                    let probe_entry = seg.entry(seg.ordinal_of(p as u64 + 1).unwrap().unwrap()).unwrap();
                    let exact = Similarity::SetJaccard.overlap(probe, vector);
                    let entry = seg.entry(ordinal).unwrap();
                    let reaching = seg.overlap_reaching_stored(entry, &seg, probe_entry, tau).unwrap();
                    prop_assert_eq!(reaching, Some(exact).filter(|o| o.meets(tau)), "probe {} at {:?}", p, tau);
                }
            }
        }
    }

    /// A stored vector whose hashes do not ascend is a typed error, not a
    /// wrong overlap.
    #[test]
    fn an_unsorted_stored_vector_is_corruption() {
        let docs = vec![SegmentDoc {
            id: 1,
            vector: SignatureVector::from_pairs([(3, 1), (5, 2), (9, 1), (12, 1)]),
            band_keys: vec![],
            fingerprint: fp(1),
        }];
        let bytes = build_segment(3, 0, docs);
        let seg = Segment::parse(bytes.as_slice(), "seg").unwrap();
        let (hashes, _, _) = seg.sections[SectionKind::Hashes as usize - 1];
        let mut damaged = bytes.clone();
        // 5 and 9 swapped: 3, 9, 5, 12.
        let (a, b) = damaged[hashes + 8..hashes + 24].split_at_mut(8);
        a.swap_with_slice(b);
        let damaged = with_fresh_checksums(&damaged).unwrap();
        let seg = Segment::parse(damaged.as_slice(), "seg").unwrap();
        let query = SignatureVector::from_pairs([(3, 1), (9, 1), (12, 1)]);
        let err = seg.overlap(0, &query, Similarity::MultisetJaccard).unwrap_err();
        assert!(err.to_string().contains("vector not strictly sorted"), "{err}");
    }

    /// A stored probe whose hashes do not ascend is a typed error when its
    /// candidate's vector is sound ([`Segment::overlap_reaching_stored`]).
    #[test]
    fn an_unsorted_stored_probe_is_corruption() {
        let vector = |pairs: &[(u64, u32)]| SignatureVector::from_pairs(pairs.iter().copied());
        let docs = vec![
            SegmentDoc {
                id: 1,
                vector: vector(&[(3, 1), (5, 1), (9, 1), (12, 1)]),
                band_keys: vec![],
                fingerprint: fp(1),
            },
            SegmentDoc { id: 2, vector: vector(&[(3, 1), (9, 1), (12, 1)]), band_keys: vec![], fingerprint: fp(2) },
        ];
        let bytes = build_segment(3, 0, docs);
        let seg = Segment::parse(bytes.as_slice(), "seg").unwrap();
        let probe = seg.entry(seg.ordinal_of(1).unwrap().unwrap()).unwrap();
        let candidate = seg.entry(seg.ordinal_of(2).unwrap().unwrap()).unwrap();
        let tau = Threshold::from_ppb(1).unwrap();
        let sound = seg.overlap_reaching_stored(candidate, &seg, probe, tau).unwrap();
        assert_eq!(sound, Some(Overlap { num: 3, den: 4 }));
        // The probe's 5 and 9 swapped: 3, 9, 5, 12.
        let (hashes, _, _) = seg.sections[SectionKind::Hashes as usize - 1];
        let at = hashes + probe.first as usize * 8;
        let mut damaged = bytes.clone();
        let (a, b) = damaged[at + 8..at + 24].split_at_mut(8);
        a.swap_with_slice(b);
        let damaged = with_fresh_checksums(&damaged).unwrap();
        let seg = Segment::parse(damaged.as_slice(), "seg").unwrap();
        let err = seg.overlap_reaching_stored(candidate, &seg, probe, tau).unwrap_err();
        assert!(err.to_string().contains("vector not strictly sorted"), "{err}");
    }

    proptest::proptest! {
        /// The computed size of a small bitmap is the `roaring` crate's.
        #[test]
        fn small_bitmap_sizes_are_roarings(
            ordinals in proptest::collection::btree_set(proptest::prop_oneof![0u32..300_000, 0u32..u32::MAX], 1..300),
        ) {
            let ordinals: Vec<u32> = ordinals.into_iter().collect();
            let bitmap: RoaringBitmap = ordinals.iter().copied().collect();
            prop_assert_eq!(small_bitmap_size(&ordinals), bitmap.serialized_size());
        }
    }

    /// Packed lists of every ordinal width: 1 byte up to 256 documents, 2
    /// up to 65,536, 3 beyond.
    #[test]
    fn packed_lists_of_every_width() {
        assert_eq!((packed_width(0), packed_width(256), packed_width(257)), (1, 1, 2));
        assert_eq!((packed_width(65_536), packed_width(65_537), packed_width(1 << 24)), (2, 3, 3));
        assert_eq!((packed_width((1 << 24) + 1), packed_width(u32::MAX)), (4, 4));
        for doc_count in [2, 256, 257, 65_536, 70_000] {
            let last = doc_count - 1;
            let lists = vec![vec![0, last], vec![1, last / 2, last - 1, last], vec![last / 3, last / 3 + 1]];
            let cuts = [(0, last), (1, last), (last / 2, last + 1), (last / 3 + 1, 0), (0, u32::MAX)];
            let packed = check_lists(doc_count, &lists, &cuts).unwrap();
            assert_eq!(packed, 2 * lists.len(), "{doc_count} documents: every list is packed");
        }
    }

    /// `verify` rejects a packed list whose ordinals do not strictly
    /// ascend, and one whose count runs past its section; the reads in
    /// place stay in bounds.
    #[test]
    fn damaged_packed_lists_are_detected() {
        let docs = listed_docs(10, &[vec![0, 5, 9]]);
        let bytes = build(
            1,
            0,
            docs.iter().map(SegmentDoc::as_ref).collect(),
            EntryWidth::Narrowest,
            None,
            &mut PairBuffers::default(),
        )
        .0
        .to_bytes();
        let seg = Segment::parse(bytes.as_slice(), "seg").unwrap();
        let (data, _, _) = seg.sections[SectionKind::PostingData as usize - 1];
        // The one list of the data section: count 3, then the ordinals of
        // the three longest documents.
        assert_eq!(bytes[data..data + 4], [3, 7, 8, 9]);
        let verified = |damaged: Vec<u8>| {
            let fixed = with_fresh_checksums(&damaged).unwrap();
            let segment = Segment::parse(fixed.as_slice(), "seg").unwrap();
            let list = segment.posting_list(1).unwrap().unwrap();
            let _ = (list.len(), list.contains(5), list.count_in(1..9), list.iter_in(0..10).count());
            segment.verify().unwrap_err().to_string()
        };
        let mut damaged = bytes.clone();
        damaged.swap(data + 1, data + 2);
        assert!(verified(damaged).contains("packed list not strictly ascending"));
        let mut damaged = bytes.clone();
        damaged[data + 3] = 8;
        assert!(verified(damaged).contains("packed list not strictly ascending"));
        let mut damaged = bytes.clone();
        damaged[data] = 200;
        let err = with_fresh_checksums(&damaged).map(|fixed| {
            let segment = Segment::parse(fixed.as_slice(), "seg").unwrap();
            segment.posting_list(1).unwrap_err().to_string()
        });
        assert!(err.unwrap().contains("packed list runs past its section"));
    }

    #[test]
    fn layout_matches_format_md() {
        let bytes = build_segment(0x0102_0304_0506_0708, 2, docs());
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        assert_eq!(&bytes[0..8], b"NDXSEGMT");
        assert_eq!(u32_at(8), 6);
        assert_eq!(u32_at(12), 15);
        assert_eq!(u64_at(16), 0x0102_0304_0506_0708);
        assert_eq!(u32_at(24), 4);
        assert_eq!(u32_at(28), 2);
        assert_eq!(u64_at(32), 6, "vector entries: 2 + 1 + 0 + 3");
        assert_eq!(u32_at(40), 4, "entry width");
        assert_eq!(bytes[44..46], [0, 0], "few keys: none of their bits dropped");
        assert!(bytes[46..60].iter().all(|&b| b == 0));
        assert_eq!(u32_at(60), crc32fast::hash(&bytes[..60]));
        let (n, e, k, b) = (4u64, 6u64, 4u64, 4u64); // docs, entries, distinct hashes {1,5,9,12}, band keys {1,2,3,7}; lengths {0,1,3}
        let expected_sizes =
            [24 * n, 16 * 3, 8 * e, e, 8 * k, 4 * k, u64::MAX, 0, 8 * b, 4 * b, u64::MAX, 16 * n, 0, 0, 20 * n];
        let mut previous_end = 424u64;
        for (i, expected) in expected_sizes.into_iter().enumerate() {
            let at = 64 + i * 24;
            assert_eq!(u32_at(at), i as u32 + 1, "kind of entry {i}");
            let (offset, length) = (u64_at(at + 8), u64_at(at + 16));
            assert_eq!(offset % 8, 0);
            assert_eq!(offset, previous_end.div_ceil(8) * 8, "section {} follows the previous one", i + 1);
            if expected != u64::MAX {
                assert_eq!(length, expected, "size of section {}", i + 1);
            }
            assert_eq!(u32_at(at + 4), crc32fast::hash(&bytes[offset as usize..(offset + length) as usize]));
            previous_end = offset + length;
        }
        assert_eq!(previous_end, bytes.len() as u64);
        // Sections 5 to 7: four-byte entries; bit 31 flags an inline
        // ordinal, bit 30 a packed list (a count byte, then one byte an
        // ordinal in a segment of 4 documents), else a bitmap's offset.
        let section = |kind: usize| {
            let at = 64 + (kind - 1) * 24;
            let offset = u64_at(at + 8) as usize;
            &bytes[offset..offset + u64_at(at + 16) as usize]
        };
        let segment = Segment::parse(bytes.as_slice(), "seg").unwrap();
        let mut packed = 0;
        for (key, entry) in section(5).chunks_exact(8).zip(section(6).chunks_exact(4)) {
            let key = u64::from_le_bytes(key.try_into().unwrap());
            let entry = u32::from_le_bytes(entry.try_into().unwrap());
            let expected: Vec<u32> = segment.postings(key).unwrap().unwrap().iter().collect();
            if entry & 1 << 31 != 0 {
                assert_eq!(expected, [entry & !(1 << 31)], "key {key}");
            } else if entry & 1 << 30 != 0 {
                let data = &section(7)[(entry & !(1 << 30)) as usize..];
                let count = data[0] as usize;
                let stored: Vec<u32> = data[1..=count].iter().map(|&o| u32::from(o)).collect();
                assert_eq!(stored, expected, "key {key}");
                packed += 1;
            } else {
                let at = entry as usize;
                let bitmap = RoaringBitmap::deserialize_from(&section(7)[at..]).unwrap();
                assert!(bitmap.serialized_size() <= 1 + bitmap.len() as usize, "packed would be smaller");
                assert_eq!(bitmap.iter().collect::<Vec<_>>(), expected, "key {key}");
            }
        }
        assert!(packed > 0, "a list of two ordinals is packed");
        // Section 15: (fingerprint, ordinal) ascending.
        let at = 64 + 14 * 24;
        let offset = u64_at(at + 8) as usize;
        let mut expected: Vec<(u128, u32)> =
            docs().iter().map(|d| (d.fingerprint.0, segment.ordinal_of(d.id).unwrap().unwrap())).collect();
        expected.sort_unstable();
        for (i, (fingerprint, ordinal)) in expected.into_iter().enumerate() {
            let entry = &bytes[offset + i * 20..offset + i * 20 + 20];
            assert_eq!(u128::from_le_bytes(entry[..16].try_into().unwrap()), fingerprint);
            assert_eq!(u32::from_le_bytes(entry[16..].try_into().unwrap()), ordinal);
        }
    }

    /// Fingerprint look-ups (through the segment's filter) find exactly the
    /// ordinals a scan finds, for hash-like fingerprints (where
    /// interpolation narrows the search), small clustered ones (where it
    /// cannot), and repeated ones.
    #[test]
    fn fingerprint_lookups_find_what_a_scan_finds() {
        let mut next = crate::store::roaring_view::xorshift(0x9E37_79B9_7F4A_7C15);
        for (n, spread) in [(0u64, true), (1, true), (15, true), (17, false), (3_000, true), (3_000, false)] {
            let mut fingerprints: Vec<Fingerprint> = (0..n)
                .map(|_| {
                    let value =
                        if spread { u128::from(next()) << 64 | u128::from(next()) } else { u128::from(next() % 64) };
                    Fingerprint(value)
                })
                .collect();
            // Every tenth document repeats an earlier one's fingerprint.
            for i in (10..n as usize).step_by(10) {
                fingerprints[i] = fingerprints[i / 3];
            }
            let docs: Vec<SegmentDoc> = fingerprints
                .iter()
                .enumerate()
                .map(|(i, &fingerprint)| SegmentDoc {
                    id: i as u64 * 3,
                    vector: SignatureVector::from_pairs([(i as u64 % 7, 1 + i as u32 % 5)]),
                    band_keys: vec![1, 2],
                    fingerprint,
                })
                .collect();
            let bytes = build_segment(1, 2, docs);
            let segment = Segment::parse(bytes.as_slice(), "seg").unwrap();
            segment.verify().unwrap();
            let by_ordinal = segment.fingerprints().unwrap().unwrap();
            let probes = fingerprints.iter().copied().chain((0..200).map(|_| Fingerprint(u128::from(next()) << 64)));
            for probe in probes.chain([Fingerprint(0), Fingerprint(u128::MAX), Fingerprint(65)]) {
                let expected: Vec<u32> = (0..n as u32).filter(|&o| by_ordinal[o as usize] == probe).collect();
                let found: Vec<u32> = segment.fingerprint_ordinals(probe).collect();
                assert_eq!(found, expected, "{n} documents: {probe:?}");
            }
            for (i, fingerprint) in fingerprints.iter().enumerate() {
                let ordinal = segment.ordinal_of(i as u64 * 3).unwrap().unwrap();
                assert_eq!(by_ordinal[ordinal as usize], *fingerprint);
            }
            // The filter (no false negatives: the look-ups above went
            // through it) rules most absent fingerprints out.
            if n == 3_000 && spread {
                let filter = segment.fingerprint_filter.get().expect("built by the look-ups");
                let passed =
                    (0..1_000).filter(|_| filter.may_hold(u128::from(next()) << 64 | u128::from(next()))).count();
                assert!(passed < 250, "{passed} of 1,000 absent fingerprints passed the filter");
            }
        }
    }

    #[test]
    fn verify_finds_fingerprints_out_of_order_or_repeated() {
        let bytes = build_segment(5, 2, docs());
        let seg = Segment::parse(bytes.as_slice(), "seg").unwrap();
        let (offset, length, _) = seg.sections[SectionKind::Fingerprints as usize - 1];
        let rechecksummed = |mut damaged: Vec<u8>| {
            match_checksum(&mut damaged, SectionKind::Fingerprints);
            Segment::parse(damaged, "seg").unwrap().verify().unwrap_err().to_string()
        };
        let mut damaged = bytes.clone();
        damaged[offset..offset + length].rotate_left(20);
        assert!(rechecksummed(damaged).contains("not strictly ascending"));
        // The second entry names the first one's ordinal.
        let mut damaged = bytes.clone();
        damaged.copy_within(offset + 16..offset + 20, offset + 36);
        assert!(rechecksummed(damaged).contains("repeated"));
        let mut damaged = bytes.clone();
        damaged[offset + 16..offset + 20].copy_from_slice(&9u32.to_le_bytes());
        assert!(rechecksummed(damaged).contains("out of range"));
    }

    /// A section large enough to be walked in parts gets the directory one
    /// walk gives, and every key is found through it; over a damaged
    /// (unsorted) section the build falls back to that one walk.
    #[test]
    fn key_directories_built_in_parts_equal_one_walk() {
        let n = KeyDirectory::PARALLEL_FROM + 4_321;
        let mut sorted: Vec<u64> = (0..n as u64).map(|k| k.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (k >> 7)).collect();
        sorted.sort_unstable();
        sorted.dedup();
        // With the writer's layout (16 bits dropped) and with whole keys.
        let mut bits = 0;
        for t in [keys::dropped_bits(sorted.len()), 0] {
            let section = keys::encode(&sorted, t);
            let keys = Keys::new(&section, t).unwrap();
            let directory = KeyDirectory::build(keys);
            let (one_walk, counted) = KeyDirectory::counted(keys, directory.bits, 1);
            assert_eq!(counted, sorted.len());
            assert!(directory.entries == one_walk, "t = {t}: entries differ from one walk's");
            // The parts themselves, not the fallback, count every key.
            let (in_parts, counted) = KeyDirectory::counted(keys, directory.bits, 8);
            assert_eq!(counted, sorted.len());
            assert!(in_parts == one_walk, "t = {t}: parts differ from one walk");
            for (i, &key) in sorted.iter().enumerate().step_by(97) {
                let range = directory.range(key).unwrap();
                assert!(range.contains(&i), "t = {t}: key {i} outside {range:?}");
            }
            bits = directory.bits;
        }
        // Two whole keys of different parts swapped: the parts' walks
        // stop early; the build counts what one walk counts.
        let mut damaged = sorted.clone();
        let last = damaged.len() - 1;
        damaged.swap(10, last - 10);
        let section = keys::encode(&damaged, 0);
        let keys = Keys::new(&section, 0).unwrap();
        let (in_parts, counted) = KeyDirectory::counted(keys, bits, 8);
        assert_ne!(counted, damaged.len(), "the damage is seen by the parts");
        let (one_walk, _) = KeyDirectory::counted(keys, bits, 1);
        assert!(in_parts != one_walk);
        let rebuilt = KeyDirectory::build(keys);
        assert_eq!(rebuilt.bits, bits);
        assert!(rebuilt.entries == one_walk);
        assert_eq!(rebuilt.entries.last().map(|e| e[0] as usize), Some(damaged.len()));
    }
}
