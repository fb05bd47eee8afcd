//! The golden index: its documents and how it is written. The example
//! `write_golden_index` writes it into `tests/data/golden-vN/` once per
//! segment format version; the tests also write it afresh, so that a
//! catalog or segment of today's format is always among those they check.
#![allow(dead_code)]

use std::sync::Arc;

use neardex::store::{Document, Index, IndexError, IndexOptions, Metadata, Storage};

/// The documents of the golden index: (key, text, url).
pub const DOCS: &[(&str, &str, &str)] = include!("../data/golden-v1-docs.in");

/// The options it is created with: a flush after four documents.
pub fn options() -> IndexOptions {
    IndexOptions { flush_threshold: 4, ..IndexOptions::default() }
}

/// Creates the golden index in `storage` (empty) with today's build, and
/// closes it: a catalog and a segment of today's formats.
pub fn write_today(storage: Arc<dyn Storage>) -> Result<(), IndexError> {
    let index = Index::create_in(storage, neardex::SignatureConfig::default(), options())?;
    write(&index)
}

/// Writes the golden documents into `index` (empty, created with
/// [`options`]): four flushed to a segment, then two pending, then one
/// deletion from the segment, so that every table and both locations of a
/// document are used.
pub fn write(index: &Index) -> Result<(), IndexError> {
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
    index.verify()
}
