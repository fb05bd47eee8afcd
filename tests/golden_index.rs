//! The golden indexes of segment format versions 1 to 6
//! (`tests/data/golden-v1/` … `golden-v6/`, each written once by
//! `examples/write_golden_index.rs` from the same documents) must keep
//! opening and answering identically: their documents, metadata, vectors,
//! and an exact query. So must the same index written today (whose
//! catalog format may be newer than any checked-in one's).

use neardex::store::{Index, SEGMENT_VERSION};
use neardex::{SignatureConfig, Signer, Threshold};

#[path = "common/golden.rs"]
mod golden;
use golden::DOCS;

/// A copy of the golden index in a temporary directory (opening for writing
/// creates a lock file and may clean up; the checked-in files stay as they
/// are).
fn golden_copy(version: u32) -> tempfile::TempDir {
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/golden-v{version}"));
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&source).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

/// The golden index written by today's build, in a temporary directory.
fn golden_written_today() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    golden::write_today(std::sync::Arc::new(neardex::store::FsStorage::new(dir.path()))).unwrap();
    dir
}

#[test]
fn golden_index_v1_opens_and_answers_identically() {
    opens_and_answers_identically(1);
}

#[test]
fn golden_index_v2_opens_and_answers_identically() {
    opens_and_answers_identically(2);
}

#[test]
fn golden_index_v3_opens_and_answers_identically() {
    opens_and_answers_identically(3);
}

#[test]
fn golden_index_v4_opens_and_answers_identically() {
    opens_and_answers_identically(4);
}

#[test]
fn golden_index_v5_opens_and_answers_identically() {
    opens_and_answers_identically(5);
}

#[test]
fn golden_index_v6_opens_and_answers_identically() {
    opens_and_answers_identically(6);
}

#[test]
fn golden_index_written_today_answers_identically() {
    answers_identically(&golden_written_today(), SEGMENT_VERSION);
}

/// Exact duplicates are found in every golden index, whichever of the
/// catalog's table (segments before format 4, whose catalogs are of format
/// 1), the pending documents or a segment's fingerprint section holds the
/// original; and still after the writer has merged everything into one
/// segment of today's format.
#[test]
fn exact_duplicates_are_found_in_every_golden_index() {
    use neardex::store::{Document, Metadata};
    for (version, dir) in
        (1..=6).map(|v| (v.to_string(), golden_copy(v))).chain([("today".into(), golden_written_today())])
    {
        let index = Index::open(dir.path()).unwrap();
        // golden-0 (id 1) and golden-3 (id 4) are in the segment, golden-4
        // (id 5, golden-0's text) and golden-5 (id 6) pending; golden-2
        // (id 3) was deleted.
        let expected = [(0, Some(1)), (3, Some(4)), (5, Some(6)), (2, None)];
        for round in 0..2 {
            let mut w = index.writer().unwrap();
            for (n, expected) in expected {
                let key = format!("copy-{round}-{n}");
                let outcome = w.insert(&key, Document::Text(DOCS[n].1), Metadata::default()).unwrap();
                // In the second round the first round's copy of golden-2 is
                // the original.
                let expected = if round == 1 { expected.or_else(|| first_copy_of_golden_2(&index)) } else { expected };
                assert_eq!(outcome.exact_duplicate_of, expected, "v{version}, round {round}, golden-{n}");
            }
            w.commit().unwrap();
            index.verify().unwrap();
            // Everything into one segment of today's format.
            index.optimize().unwrap();
            index.verify().unwrap();
            assert_eq!(index.stats().unwrap().segments, 1);
        }
    }
}

/// The id the first round gave its copy of golden-2 (deleted in the golden
/// index, so that copy is the original the second round finds).
fn first_copy_of_golden_2(index: &Index) -> Option<u64> {
    index.searcher().unwrap().get("copy-0-2").unwrap().map(|d| d.id)
}

fn opens_and_answers_identically(version: u32) {
    answers_identically(&golden_copy(version), version);
}

fn answers_identically(dir: &tempfile::TempDir, version: u32) {
    let segment = std::fs::read(dir.path().join("seg-0000000000000001.nds")).unwrap();
    assert_eq!(u32::from_le_bytes(segment[8..12].try_into().unwrap()), version, "segment format version");
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    for index in [Index::open_read_only(dir.path()).unwrap(), Index::open(dir.path()).unwrap()] {
        index.verify().unwrap();
        assert_eq!(index.config(), &SignatureConfig::default());
        let stats = index.stats().unwrap();
        assert_eq!((stats.documents, stats.deleted, stats.pending, stats.segments), (5, 1, 2, 1));
        let searcher = index.searcher().unwrap();
        for (n, (key, text, url)) in DOCS.iter().enumerate() {
            let doc = searcher.get(key).unwrap();
            if *key == "golden-2" {
                assert!(doc.is_none(), "golden-2 was deleted");
                continue;
            }
            let doc = doc.unwrap_or_else(|| panic!("{key} missing"));
            assert_eq!(doc.id, n as u64 + 1);
            assert_eq!(doc.metadata.url.as_deref(), Some(*url));
            assert_eq!(doc.metadata.date.as_deref(), if n >= 4 { Some("2024-01-02") } else { None });
            // Signatures are part of the format: today's signer must agree.
            let expected = signer.sign_text(text);
            assert_eq!(doc.vector, expected.vector, "{key}");
            assert_eq!(doc.fingerprint, expected.fingerprint, "{key}");
        }
        let q = signer.sign_text(DOCS[0].1).vector;
        let answer: Vec<(u64, u64, u64)> = searcher
            .query_exhaustive(&q, Threshold::new(0.5).unwrap())
            .unwrap()
            .iter()
            .map(|m| (m.id, m.overlap.num, m.overlap.den))
            .collect();
        // golden-0 itself and its exact copy golden-4 (5/5), and golden-1,
        // one word different (4/6).
        assert_eq!(answer, [(1, 5, 5), (2, 4, 6), (5, 5, 5)]);
        drop(searcher);
    }
    // The writable open marked the catalog as today's format, so that an
    // older build refuses it rather than meet records it cannot read.
    let db = redb::Database::open(dir.path().join(neardex::store::CATALOG_FILE)).unwrap();
    let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
    let meta = txn.open_table(redb::TableDefinition::<&str, &[u8]>::new("meta")).unwrap();
    let format = meta.get("format").unwrap().unwrap().value().to_vec();
    assert_eq!(format, neardex::store::CATALOG_VERSION.to_le_bytes());
}
