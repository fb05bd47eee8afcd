//! Replays every file of every fuzz seed corpus (`fuzz/corpus/<target>/`)
//! through the fuzz target's body, so an ordinary `cargo test` keeps each
//! input that ever mattered passing.

use std::path::Path;

#[path = "common/workload.rs"]
mod workload;

fn replay(target: &str, body: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let result = std::panic::catch_unwind(|| body(&bytes));
        assert!(result.is_ok(), "{} panicked", path.display());
        count += 1;
    }
    assert!(count > 0, "{target}: empty seed corpus");
    println!("{target}: {count} inputs replayed");
}

#[test]
fn html_text_corpus() {
    replay("html_text", neardex::fuzz_support::html_text);
}

/// Each of `seeds` (a file name and the bytes today's build writes) is a
/// file of `target`'s corpus with exactly those bytes.
fn check_seeds(target: &str, seeds: impl IntoIterator<Item = (&'static str, Vec<u8>)>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    for (name, bytes) in seeds {
        let path = dir.join(name);
        if std::fs::read(&path).ok().as_deref() != Some(&bytes[..]) {
            panic!("{} is missing or stale: it must hold the encoding of {name}", path.display());
        }
    }
}

#[test]
fn config_decode_corpus() {
    // Valid encodings of every scheme belong in the corpus too.
    check_seeds(
        "config_decode",
        [
            ("default.bin", neardex::SignatureConfig::default()),
            ("words3.bin", neardex::SignatureConfig::word_shingles(3)),
            ("chars5.bin", neardex::SignatureConfig::char_shingles(5)),
        ]
        .map(|(name, config)| (name, config.encode())),
    );
    replay("config_decode", neardex::fuzz_support::config_decode);
}

#[test]
fn catalog_records_corpus() {
    // A record of each kind and version, as today's build writes it (the
    // fuzzer starts from them).
    use neardex::store::Metadata;
    let metadata = Metadata { url: Some("http://example.com/".into()), user: vec![7], ..Metadata::default() };
    check_seeds("catalog_records", neardex::fuzz_support::catalog_record_seeds("page-1", metadata));
    replay("catalog_records", neardex::fuzz_support::catalog_records);
}

#[test]
fn segment_open_corpus() {
    replay("segment_open", neardex::fuzz_support::segment_open);
}

#[cfg(feature = "warc")]
#[test]
fn warc_parse_corpus() {
    replay("warc_parse", neardex::fuzz_support::warc_parse);
}

#[cfg(feature = "jsonl")]
#[test]
fn jsonl_parse_corpus() {
    replay("jsonl_parse", neardex::fuzz_support::jsonl_parse);
}

#[test]
fn ops_corpus() {
    replay("ops", workload::fuzz_ops);
}
