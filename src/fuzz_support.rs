//! The bodies of the fuzz targets, kept in the library so that `cargo test`
//! replays every seed corpus file through exactly the code the fuzzer runs
//! (`tests/fuzz_corpus.rs`). Not part of the stable API.

use crate::store::Searcher;
use crate::{SignatureConfig, Signer};

/// Arbitrary bytes as an HTML page through the whole signature pipeline:
/// charset decoding, text extraction, tokenising, every scheme, sketches.
/// Checks what must hold for any input; panics (a fuzz finding) otherwise.
pub fn html_text(data: &[u8]) {
    let text = crate::text::html_bytes_to_text(data);
    let tokens = crate::text::Tokens::from_text(&text);
    for token in tokens.iter() {
        assert!(!token.is_empty(), "empty token from {data:?}");
    }
    let fallback = SignatureConfig { fallback: Some(crate::Scheme::CharShingles { k: 4 }), ..Default::default() };
    let configs =
        [SignatureConfig::default(), SignatureConfig::word_shingles(3), SignatureConfig::char_shingles(4), fallback];
    let mut vectors = Vec::new();
    for config in configs {
        let signer = Signer::new(config).expect("built-in configurations are valid");
        let signature = signer.sign_html(data);
        assert_eq!(signature.vector, signer.sign_text(&text).vector);
        assert_eq!(signature.band_keys.is_empty(), signature.vector.is_empty());
        vectors.push(signature.vector);
    }
    // SpotSigs, or character 4-shingles where it finds nothing.
    let expected = if vectors[0].is_empty() { &vectors[2] } else { &vectors[0] };
    assert_eq!(&vectors[3], expected, "the fallback signs what SpotSigs finds nothing in");
}

/// Arbitrary bytes as a stored configuration: decoding returns a value or
/// a typed error, and what decodes re-encodes to the same bytes.
pub fn config_decode(data: &[u8]) {
    if let Ok(config) = SignatureConfig::decode(data) {
        assert_eq!(config.encode(), data, "decode/encode is not the identity");
    }
}

/// Arbitrary bytes as each kind of catalog record (FORMAT.md §6.2–6.4): a
/// document record (of either record version), a pending record and a
/// manifest record each decode to a value or a typed error, and what
/// decodes encodes back to the same bytes (so each record has one
/// encoding: a varint length in more bytes than it needs is refused).
pub fn catalog_records(data: &[u8]) {
    use crate::store::catalog::{DocRecord, PendingRecord, SegmentRecord};
    if let Ok(doc) = DocRecord::decode(data, 1) {
        assert_eq!(doc.encode_as(data[0]), data, "document record of version {}", data[0]);
        if data[0] == 2 {
            assert_eq!(doc.encode(), data, "version 2 is the one written");
        }
    }
    if let Ok(pending) = PendingRecord::decode(data, 1) {
        assert_eq!(pending.encode(), data, "pending record");
    }
    if let Ok(segment) = SegmentRecord::decode(data, 1) {
        assert_eq!(segment.encode(), data, "manifest record");
    }
}

/// The seed inputs of [`catalog_records`]: a document record of each
/// version for `key` and `metadata`, a pending record and a manifest
/// record, each with its file name in `fuzz/corpus/catalog_records/`.
pub fn catalog_record_seeds(key: &str, metadata: crate::store::Metadata) -> Vec<(&'static str, Vec<u8>)> {
    use crate::store::catalog::{DocRecord, PendingRecord, SegmentRecord};
    let fingerprint = crate::hash::Fingerprint(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
    let doc = DocRecord { key: key.to_owned(), fingerprint, metadata };
    let pending = PendingRecord {
        vector: crate::vector::SignatureVector::from_pairs([(3, 1), (9, 4)]),
        band_keys: vec![11, 12],
        fingerprint: Some(fingerprint),
    };
    let segment = SegmentRecord { doc_count: 3, byte_len: 4096, file_crc: 0xdead_beef };
    vec![
        ("doc-v1.bin", doc.encode_as(1)),
        ("doc-v2.bin", doc.encode_as(2)),
        ("pending.bin", pending.encode()),
        ("manifest.bin", segment.encode()),
    ]
}

/// Arbitrary bytes as a segment file: opening, verifying and every read
/// either succeed or return a typed error; then the same bytes as the
/// segment of an index, under every query; nothing panics.
pub fn segment_open(data: &[u8]) {
    use crate::store::segment::Segment;
    let Ok(segment) = Segment::parse(data, "fuzz") else { return };
    let _ = segment.verify();
    for ordinal in 0..segment.doc_count().min(64) {
        let _ = segment.entry(ordinal);
        let _ = segment.vector(ordinal);
        if let Ok(entry) = segment.entry(ordinal) {
            let _ = segment.ordinal_of(entry.id);
        }
    }
    let frequent: Vec<u64> = segment.frequent().map(|(hash, _)| hash).take(8).collect();
    for key in [0, 1, 5, 9, u64::MAX].into_iter().chain(frequent) {
        let _ = segment.postings(key);
        let _ = segment.band_bucket(key);
        if let Ok(Some(list)) = segment.band_list(key) {
            let _ = list.iter_in(0..segment.doc_count()).take(10_000).count();
        }
        if let Ok(Some(list)) = segment.posting_list(key) {
            let _ = list.len();
            let _ = list.contains(3);
            let _ = list.count_in(1..segment.doc_count());
            let _ = list.iter_in(0..segment.doc_count()).take(10_000).count();
        }
    }
    let query = crate::vector::SignatureVector::from_pairs([(1, 2), (5, 1), (9, 3)]);
    for ordinal in 0..segment.doc_count().min(64) {
        let _ = segment.overlap(ordinal, &query, crate::similarity::Similarity::MultisetJaccard);
    }
    let _ = segment.length_range(0, u64::MAX);
    let _ = segment.length_range(3, 2);
    let stored: Vec<crate::hash::Fingerprint> = segment.fingerprints().ok().flatten().unwrap_or_default();
    let probes = [0, 1, u128::MAX, 1 << 127].map(crate::hash::Fingerprint);
    for fingerprint in stored.into_iter().take(8).chain(probes) {
        let _ = segment.fingerprint_ordinals(fingerprint).take(10_000).count();
    }
    merge_of_segment(data);
    index_over_segment(segment_base(), data, false);
    index_over_segment(two_segment_base(), data, true);
}

/// The same bytes, their checksums made valid, through a merge (which
/// checks them first, so that damaged structure gets this far only so):
/// a typed error or a segment; and a valid segment (one `verify` passes)
/// always merges, with deleted documents dropped, into a valid segment.
fn merge_of_segment(data: &[u8]) {
    use crate::store::segment::{merge_segments, with_fresh_checksums, Segment};
    let Some(fixed) = with_fresh_checksums(data) else { return };
    let Ok(segment) = Segment::parse(fixed.as_slice(), "fuzz") else { return };
    let valid = segment.verify().is_ok();
    let merged = merge_segments(7, segment.bands(), &[&segment], |id| id % 3 == 1);
    if valid && crate::store::segment::merges_in_place(&segment) {
        let merged = merged.expect("a valid segment merges");
        if let Some(file) = merged {
            let bytes = file.to_bytes();
            let out = Segment::parse(bytes.as_slice(), "merged").expect("a merged segment parses");
            out.verify().expect("a merged segment verifies");
        }
    }
}

/// The texts of the fuzzed indexes' first segment (a, b, c).
const SEGMENT_TEXTS: [(&str, &str); 3] = [
    ("a", "The council said that the new library will open in the spring, and that it is a gift to the town."),
    ("b", "The council said that the new library will open in the summer, and that it is a gift to the city."),
    ("c", "A storm is on its way to the coast, and the ferries will not sail until it has passed by."),
];

/// A small in-memory index whose one segment holds a, b, c (flushed)
/// while d stays pending; built once.
fn segment_base() -> &'static crate::store::MemStorage {
    static BASE: std::sync::OnceLock<crate::store::MemStorage> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        let d = [("d", SEGMENT_TEXTS[0].1)];
        small_index(&[&SEGMENT_TEXTS], &d)
    })
}

/// A small in-memory index of two segments, a, b, c in the first and
/// d, e in the second, with nothing pending; built once. Its queries
/// read the segments' masks (built over both) and its self-join builds
/// the shared keys of two segments, neither of which one segment takes.
fn two_segment_base() -> &'static crate::store::MemStorage {
    static BASE: std::sync::OnceLock<crate::store::MemStorage> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        let second = [
            ("d", SEGMENT_TEXTS[0].1),
            ("e", "A storm is on its way to the coast, and the ferries will not sail until it has gone by."),
        ];
        small_index(&[&SEGMENT_TEXTS, &second], &[])
    })
}

/// An in-memory index with a segment for each batch of `segments`
/// (flushed in order: ids 1, 2, ...) and `pending` committed after them.
fn small_index(segments: &[&[(&str, &str)]], pending: &[(&str, &str)]) -> crate::store::MemStorage {
    use crate::store::{Document, Index, IndexOptions, MemStorage, Metadata};
    let storage = MemStorage::new();
    let options = IndexOptions { flush_threshold: usize::MAX, ..IndexOptions::default() };
    let index = Index::create_in(std::sync::Arc::new(storage.clone()), SignatureConfig::default(), options)
        .expect("an in-memory index");
    let insert = |texts: &[(&str, &str)]| {
        let mut w = index.writer().expect("writer");
        for &(key, text) in texts {
            w.insert(key, Document::Text(text), Metadata::default()).expect("insert");
        }
        w.commit().expect("commit");
    };
    for texts in segments {
        insert(texts);
        index.flush().expect("flush");
    }
    if !pending.is_empty() {
        insert(pending);
    }
    drop(index);
    storage
}

/// Arbitrary bytes in place of the first segment of `base`: opening the
/// index, every query kind (after the warm-up that builds the segments'
/// masks when `warm`), the self-join, clusters, top-k, explain, lookups
/// and `verify` return answers or typed errors; nothing panics.
fn index_over_segment(base: &crate::store::MemStorage, data: &[u8], warm: bool) {
    use crate::store::{Index, IndexOptions};
    use crate::Threshold;
    let storage = base.deep_copy();
    if storage.overwrite_file(&crate::store::segment_file_name(1), data.to_vec()).is_err() {
        return;
    }
    let Ok(index) = Index::open_in(
        std::sync::Arc::new(storage),
        IndexOptions { flush_threshold: usize::MAX, ..IndexOptions::default() },
    ) else {
        return;
    };
    let _ = index.verify();
    let Ok(searcher) = index.searcher() else { return };
    if warm {
        searcher.warm_up(crate::store::WarmUp::Pages);
    }
    let signature = index.signer().sign_text("The council said that the new library will open in the spring.");
    for tau in [0.2, 0.5, 1.0] {
        let tau = Threshold::new(tau).expect("a valid threshold");
        let _ = searcher.query(&signature.vector, tau);
        let _ = searcher.query_lsh(&signature, tau);
        let _ = searcher.query_key("a", tau);
        let _ = searcher.query_key("d", tau);
        // At τ = 0.5, the bounded self-join, in blocks of a few bytes,
        // finds the self-join's pairs whenever both read the segment
        // without error.
        let (mut whole, mut bounded) = (Vec::new(), Vec::new());
        if searcher.self_join(tau, |p| whole.push(p)).is_ok()
            && tau.ppb() == 500_000_000
            && self_join_deferred(&searcher, tau, 32, |p| bounded.push(p)).is_ok()
        {
            assert_eq!(whole, bounded, "the bounded self-join's pairs");
        }
        let _ = searcher.clusters(tau);
        let _ = searcher.top_k(&signature.vector, 2, tau);
    }
    for key in ["a", "b", "c", "d", "e"] {
        let _ = searcher.get(key);
    }
    let _ = searcher.explain("a", "b");
    let _ = index.stats();
    drop(searcher);
    // An insert looks its fingerprint up in the segment; a merge reads
    // every document of it.
    if let Ok(mut writer) = index.writer() {
        let document = crate::store::Document::Signatures(&signature);
        if writer.insert("fuzz", document, crate::store::Metadata::default()).is_ok() {
            let _ = writer.commit();
        }
    }
    let _ = index.optimize();
}

/// The bounded self-join's deferring run in blocks of `block_bytes`
/// (chunks of 3 probes, the deferred candidates verified every 5), whatever
/// the index's size: [`Searcher::self_join_within`] runs the plain
/// self-join when the vectors fit, so the tests of the deferral over small
/// indexes call this.
///
/// # Errors
/// As [`Searcher::self_join`].
pub fn self_join_deferred(
    searcher: &Searcher,
    tau: crate::Threshold,
    block_bytes: usize,
    emit: impl FnMut(crate::oracle::Pair),
) -> Result<(), crate::store::IndexError> {
    searcher.self_join_bounded(tau, block_bytes.saturating_mul(2), 3, 5, emit)
}

/// Arbitrary bytes as a WARC file: records and problems come back, every
/// record's HTTP block parses or is refused; read a few bytes at a time,
/// the same records and problems come back; nothing panics.
#[cfg(feature = "warc")]
pub fn warc_parse(data: &[u8]) {
    let (records, problems) = crate::warc::read_warc(data);
    assert!(records.windows(2).all(|w| w[0].offset < w[1].offset), "records out of order");
    /// Reads of at most 7 bytes: record boundaries fall inside reads.
    struct Trickle<'a>(&'a [u8]);
    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = out.len().min(self.0.len()).min(7);
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let (mut streamed_records, mut streamed_problems) = (Vec::new(), Vec::new());
    for item in crate::warc::WarcReader::new(Trickle(data)) {
        match item.expect("reading a slice does not fail") {
            crate::warc::WarcItem::Record(r) => streamed_records.push(r),
            crate::warc::WarcItem::Problem(p) => streamed_problems.push(p),
        }
    }
    // A damaged gzip stream gives up some bytes early or late depending on
    // how its input arrives (the decoder's, not the reader's, doing).
    if !problems.iter().chain(&streamed_problems).any(|p| p.reason.starts_with("gzip stream broken")) {
        assert_eq!(streamed_records, records, "records differ with short reads");
        assert_eq!(streamed_problems, problems, "problems differ with short reads");
    }
    // Records written back read back as themselves, at the offsets they
    // were written at (`Content-Length` now the block's), with no problem.
    let mut written = Vec::new();
    let mut expected = Vec::new();
    for record in &records {
        let mut again = record.clone();
        again.offset = written.len() as u64;
        for (name, value) in &mut again.headers {
            if name.eq_ignore_ascii_case("Content-Length") {
                *value = record.block.len().to_string();
            }
        }
        expected.push(again);
        written.extend(record.to_bytes());
    }
    assert_eq!(crate::warc::read_warc(&written), (expected, Vec::new()), "written records read back otherwise");
    // The HTTP layer too, on each block and on the input itself (chunked
    // and compressed payloads): a payload decodes to at most the limit, and
    // what is left undecoded is not a page.
    for block in records.iter().map(|r| r.block.as_slice()).chain([data]) {
        if let Some(http) = crate::warc::parse_http_response(block) {
            let _ = http.charset();
            assert!(http.payload.len() <= crate::warc::MAX_DECODED_PAYLOAD.max(block.len()));
            assert!(http.undecoded.is_none() || http.why_not_a_page().is_some());
        }
    }
}

/// Arbitrary bytes as a JSON Lines file (key field `id`, text field
/// `text`): every line is a record or a problem with its line number, in
/// order; a record written back as JSON reads back the same; its text
/// signs. Nothing panics.
#[cfg(feature = "jsonl")]
pub fn jsonl_parse(data: &[u8]) {
    let signer = Signer::new(SignatureConfig::default()).expect("the default configuration is valid");
    let mut last = 0;
    for item in crate::jsonl::read_jsonl(data, "id", "text") {
        let line = match &item {
            Ok(record) => record.line,
            Err(problem) => problem.line,
        };
        assert!(line > last, "line numbers out of order");
        last = line;
        if let Ok(record) = item {
            let again = serde_json::json!({ "id": record.key, "text": record.text, "url": record.url }).to_string();
            let back: Vec<_> = crate::jsonl::read_jsonl(again.as_bytes(), "id", "text").collect();
            assert_eq!(back.len(), 1);
            let back = back[0].as_ref().expect("a written record reads back");
            assert_eq!((&back.key, &back.text, &back.url), (&record.key, &record.text, &record.url));
            let _ = signer.sign_text(&record.text);
        }
    }
}
