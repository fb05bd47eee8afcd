//! A crawler's loop over an index: for each generated page, a fresh
//! searcher and an exact query at τ = 0.8, an insert, a durable commit.
//! Prints the time per page of each part over each 5,000 pages, so that a
//! cost growing with the pending documents shows, with the pending count
//! and the process's resident memory (Linux). With `HOLD=1` the
//! searcher is kept across the commit (as a reader thread would hold one),
//! which before the delta's shared runs made every commit copy every
//! pending document (ARCHITECTURE.md, the paragraph on `State`).
//!
//! With `REPLACE=STORED`, STORED pages are first loaded in one bulk commit
//! (one segment) and each streamed page then replaces one of them (the
//! same key, the next page's text), as a recrawl would: each commit
//! deletes a document from the segment. With `KEYS=K` the streamed pages
//! are stored under K keys in turn (page i replaces key i mod K): past the
//! first K pages each commit replaces a pending document, as a crawler
//! revisiting a page it stored lately would.
//!
//! Run: `[HOLD=1] [REPLACE=STORED | KEYS=K] [N=20000] cargo run --release --example streaming_commits`

#[path = "../tests/common/mod.rs"]
mod common;

use common::webcorpus::Corpus;
use neardex::store::{Document, Index, Metadata};
use neardex::{SignatureConfig, Signer, Threshold};
use std::time::Instant;

fn main() {
    let n: u64 = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let hold = std::env::var_os("HOLD").is_some();
    let stored: u64 = std::env::var("REPLACE").ok().map_or(0, |v| v.parse().expect("REPLACE is a page count"));
    let keys: Option<u64> = std::env::var("KEYS").ok().map(|v| v.parse().expect("KEYS is a key count"));
    let keys = keys.or((stored > 0).then_some(stored));
    let corpus = Corpus::load(7);
    let signer = Signer::new(SignatureConfig::default()).expect("the default configuration");
    let sign = |i: u64| signer.sign_html(corpus.page(i).as_bytes());
    let dir = tempfile::tempdir().expect("a temporary directory");
    let index = Index::create(dir.path(), SignatureConfig::default()).expect("an index");
    if stored > 0 {
        let mut bulk = index.bulk_writer().expect("the bulk writer");
        for i in 0..stored {
            bulk.insert(&i.to_string(), Document::Signatures(&sign(i)), Metadata::default()).expect("an insert");
        }
        bulk.commit().expect("the bulk commit");
    }
    let signatures: Vec<_> = (stored..stored + n).map(sign).collect();
    let tau = Threshold::new(0.8).expect("a threshold");
    let mut writer = index.writer().expect("the writer");
    let (mut found, mut window) = (0, [0.0f64; 4]);
    for (i, signature) in signatures.iter().enumerate() {
        let start = Instant::now();
        let searcher = index.searcher().expect("a searcher");
        let opened = Instant::now();
        found += searcher.query(&signature.vector, tau).expect("a query").len();
        let held = hold.then_some(searcher);
        let queried = Instant::now();
        let document = Document::Signatures(signature);
        if let Some(keys) = keys {
            let key = (i as u64 % keys).to_string();
            writer.replace(&key, document, Metadata::default()).expect("a replacement");
        } else {
            writer.insert(&i.to_string(), document, Metadata::default()).expect("an insert");
        }
        let inserted = Instant::now();
        writer = writer.commit_and_continue().expect("a commit").1;
        drop(held);
        let committed = Instant::now();
        for (sum, span) in
            window.iter_mut().zip([opened - start, queried - opened, inserted - queried, committed - inserted])
        {
            *sum += span.as_secs_f64();
        }
        if (i + 1) % 5_000 == 0 || i + 1 == signatures.len() {
            let pages = (i % 5_000 + 1) as f64;
            let [open, query, insert, commit] = window.map(|sum| sum / pages * 1e6);
            println!(
                "pages to {}: a page's searcher {open:.1} us, query {query:.1} us, insert {insert:.1} us, \
                 commit {commit:.1} us \
                 ({found} matches so far; {} pending; resident {} MiB)",
                i + 1,
                index.stats().expect("the index's figures").pending,
                common::proc_status_kib("VmRSS") / 1024
            );
            window = [0.0; 4];
        }
    }
}
