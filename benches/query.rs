//! The exact query and the self-join on the real pages of ../shared/data,
//! beside their slower but equally exact alternatives in the same run (the
//! effect the SpotSigs paper's Table 2 shows): full pruning, the length
//! window only, no pruning, and a brute-force scan of every document;
//! and the self-join of a small index beside its brute force.
//!
//! Run: `cargo bench --bench query`

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use neardex::store::{Document, Index, IndexOptions, Metadata, Pruning};
use neardex::{oracle, SignatureConfig, SignatureVector, Signer, Similarity, Threshold};

fn bench(c: &mut Criterion) {
    small_self_join(c);
    let Some(data) = common::shared_data() else { return };
    let pages = common::all_pages(&data);
    let dir = tempfile::tempdir().unwrap();
    let config = SignatureConfig::default();
    let signer = Signer::new(config.clone()).unwrap();
    let index =
        Index::create_with(dir.path(), config, IndexOptions { flush_threshold: 400, ..IndexOptions::default() })
            .unwrap();
    let mut vectors: Vec<(u64, SignatureVector)> = Vec::new();
    let mut w = index.writer().unwrap();
    for page in &pages {
        let signature = signer.sign_html(&page.html);
        let id = w.insert(&page.name, Document::Signatures(&signature), Metadata::default()).unwrap().id;
        vectors.push((id, signature.vector));
    }
    w.commit().unwrap();
    index.optimize().unwrap();
    let s = index.searcher().unwrap();
    let queries: Vec<&SignatureVector> = vectors.iter().step_by(7).map(|(_, v)| v).collect();
    for tau in [0.5, 0.8] {
        let t = Threshold::new(tau).unwrap();
        let mut group = c.benchmark_group(format!("query_tau_{tau}"));
        for (name, pruning) in [("full", Pruning::Full), ("window_only", Pruning::WindowOnly), ("none", Pruning::None)]
        {
            group.bench_function(name, |b| {
                b.iter(|| {
                    for q in &queries {
                        black_box(s.query_with(q, t, pruning).unwrap());
                    }
                })
            });
        }
        group.bench_function("brute_force_scan", |b| {
            b.iter(|| {
                for q in &queries {
                    black_box(oracle::query(vectors.iter().map(|(id, v)| (*id, v)), q, Similarity::MultisetJaccard, t));
                }
            })
        });
        group.finish();
    }
    let t = Threshold::new(0.8).unwrap();
    let mut group = c.benchmark_group("self_join_tau_0.8");
    group.sample_size(10);
    group.bench_function("indexed_parallel", |b| {
        b.iter(|| {
            let mut n = 0;
            s.self_join(t, |_| n += 1).unwrap();
            n
        })
    });
    let docs: Vec<(u64, &SignatureVector)> = vectors.iter().map(|(id, v)| (*id, v)).collect();
    group.bench_function("brute_force", |b| b.iter(|| oracle::self_join(&docs, Similarity::MultisetJaccard, t).len()));
    group.finish();
}

/// The self-join of a small index (15 short documents in three segments
/// and the pending ones), where a fixed cost of its build shows (its key
/// ranges: ARCHITECTURE.md), beside the brute-force pairs in the same run.
fn small_self_join(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let config = SignatureConfig::default();
    let index =
        Index::create_with(dir.path(), config, IndexOptions { flush_threshold: usize::MAX, ..IndexOptions::default() })
            .unwrap();
    for batch in 0..3 {
        let mut w = index.writer().unwrap();
        for i in 0..5 {
            let text = format!(
                "The council said that the new library number {i} will open in the spring of year {batch}, and that \
                 it is a gift to the town."
            );
            w.insert(&format!("{batch}-{i}"), Document::Text(&text), Metadata::default()).unwrap();
        }
        w.commit().unwrap();
        if batch < 2 {
            index.flush().unwrap();
        }
    }
    let s = index.searcher().unwrap();
    let mut ids = Vec::new();
    s.for_each_live(|id, _| ids.push(id)).unwrap();
    let vectors: Vec<(u64, SignatureVector)> =
        ids.iter().map(|&id| (id, s.get_by_id(id).unwrap().expect("a live document").vector)).collect();
    let docs: Vec<(u64, &SignatureVector)> = vectors.iter().map(|(id, v)| (*id, v)).collect();
    let t = Threshold::new(0.6).unwrap();
    let mut group = c.benchmark_group("small_self_join_tau_0.6");
    group.bench_function("indexed_parallel", |b| {
        b.iter(|| {
            let mut n = 0;
            s.self_join(t, |_| n += 1).unwrap();
            n
        })
    });
    group.bench_function("brute_force", |b| b.iter(|| oracle::self_join(&docs, Similarity::MultisetJaccard, t).len()));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
