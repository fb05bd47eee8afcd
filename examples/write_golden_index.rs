//! Writes the golden index of the current segment format version into
//! `tests/data/golden-vN/` (N = `SEGMENT_VERSION`; run only when a new format
//! version is created; the test `tests/golden_index.rs` keeps every
//! checked-in one opening and answering identically forever). The documents
//! are the same for every version.
//!
//! Run: `cargo run --example write_golden_index`
use neardex::store::{Document, Index, IndexOptions, Metadata, SEGMENT_VERSION};
use neardex::SignatureConfig;

/// The documents of the golden index: (key, text, url). Shared with the test
/// by `include!`.
const DOCS: &[(&str, &str, &str)] = include!("../tests/data/golden-v1-docs.in");

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/golden-v{SEGMENT_VERSION}"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let index = Index::create_with(
        &dir,
        SignatureConfig::default(),
        IndexOptions { flush_threshold: 4, ..IndexOptions::default() },
    )?;
    // Four documents flushed to a segment, then two pending, then one
    // deletion from the segment: every table and both locations are used.
    let mut w = index.writer()?;
    for (key, text, url) in &DOCS[..4] {
        let meta = Metadata { url: Some(url.to_string()), ..Metadata::default() };
        w.insert(key, Document::Text(text), meta)?;
    }
    w.commit()?;
    let mut w = index.writer()?;
    for (key, text, url) in &DOCS[4..] {
        let meta = Metadata { url: Some(url.to_string()), date: Some("2024-01-02".into()), ..Metadata::default() };
        w.insert(key, Document::Text(text), meta)?;
    }
    w.delete("golden-2")?;
    w.commit()?;
    index.verify()?;
    drop(index);
    std::fs::remove_file(dir.join("LOCK"))?;
    println!("wrote {}", dir.display());
    Ok(())
}
