//! Inserts precomputed signatures as fast as the writer takes them, 1,000
//! per commit, to profile the writer alone.
//!
//! Run: `cargo run --release --example profile_writer -- [DOCS]`
use std::time::Instant;

use neardex::store::{Document, Index, IndexOptions, Metadata};
use neardex::{SignatureConfig, Signer};

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    let signatures: Vec<_> = (0..200)
        .map(|i| {
            signer.sign_text(&format!(
                "The council has voted {i} times and the library is being built. {}",
                "It is a long story that is told here again and the town is happy with it. ".repeat(20)
            ))
        })
        .collect();
    let dir = tempfile::tempdir_in(".").unwrap();
    let index = Index::create_with(
        dir.path(),
        SignatureConfig::default(),
        IndexOptions { flush_threshold: usize::MAX, ..IndexOptions::default() },
    )
    .unwrap();
    let start = Instant::now();
    let mut commit = 0.0;
    for batch in 0..n / 1000 {
        let mut w = index.writer().unwrap();
        for i in 0..1000 {
            let key = format!("key-{batch}-{i}");
            w.insert(&key, Document::Signatures(&signatures[i % 200]), Metadata::default()).unwrap();
        }
        let t = Instant::now();
        w.commit().unwrap();
        commit += t.elapsed().as_secs_f64();
    }
    let secs = start.elapsed().as_secs_f64();
    println!("{n} inserts: {:.0} docs/s; {commit:.2} s of {secs:.2} s in commit", n as f64 / secs);
}
