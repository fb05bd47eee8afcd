//! Throughput of the signature layer on the real pages of `../shared/data`,
//! one core: HTML to text, tokenising, SpotSigs, shingling, whole-document
//! signing, a page's vector from its hashes, and MinHash. Each
//! byte-throughput stage is reported next to a baseline measured in the
//! same run on the same bytes (UTF-8 validation, the cheapest pass over
//! text there is), the vectors next to the library's sort of the same
//! hashes, and MinHash next to classic MinHash (P hash evaluations per
//! signature), so ratios are comparable across noisy machines.
//!
//! Run: `cargo bench --bench signatures`

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use neardex::hash::{derive_seed, hash_u64};
use neardex::sketch::MinHasher;
use neardex::text::{decode_html, html_to_text, Tokens};
use neardex::{Scratch, SignatureConfig, SignatureVector, Signer, DEFAULT_HASH_SEED};

struct Corpus {
    /// Every page's HTML, decoded to text once (the HTML stage's input).
    html: Vec<String>,
    /// Every page's visible text (the plain-text stages' input).
    text: Vec<String>,
}

fn corpus() -> Option<Corpus> {
    let data = common::shared_data()?;
    let pages = common::all_pages(&data);
    let html: Vec<String> = pages.iter().map(|p| decode_html(&p.html, None).into_owned()).collect();
    let text = html.iter().map(|h| html_to_text(h)).collect();
    Some(Corpus { html, text })
}

fn bytes_of(docs: &[String]) -> u64 {
    docs.iter().map(|d| d.len() as u64).sum()
}

fn text_stages(c: &mut Criterion) {
    let Some(corpus) = corpus() else { return };
    let mut group = c.benchmark_group("html");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes_of(&corpus.html)));
    group.bench_function("baseline_utf8_validate", |b| {
        b.iter(|| {
            corpus.html.iter().map(|h| std::str::from_utf8(black_box(h.as_bytes())).is_ok() as usize).sum::<usize>()
        })
    });
    group.bench_function("html_to_text", |b| {
        let mut out = String::new();
        b.iter(|| {
            for h in &corpus.html {
                out.clear();
                neardex::text::html_to_text_into(black_box(h), &mut out);
            }
        })
    });
    group.finish();

    let mut group = c.benchmark_group("text");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes_of(&corpus.text)));
    group.bench_function("baseline_utf8_validate", |b| {
        b.iter(|| {
            corpus.text.iter().map(|t| std::str::from_utf8(black_box(t.as_bytes())).is_ok() as usize).sum::<usize>()
        })
    });
    group.bench_function("tokenize", |b| {
        let mut tokens = Tokens::new();
        b.iter(|| {
            for t in &corpus.text {
                tokens.tokenize(black_box(t));
            }
        })
    });
    for (name, config) in [
        ("spotsigs", SignatureConfig::default()),
        ("word_shingles_3", SignatureConfig::word_shingles(3)),
        ("char_shingles_5", SignatureConfig::char_shingles(5)),
    ] {
        let signer = Signer::new(config).unwrap();
        group.bench_function(name, |b| {
            let (mut scratch, mut out) = (Scratch::default(), Vec::new());
            b.iter(|| {
                for t in &corpus.text {
                    out.clear();
                    signer.signature_hashes(black_box(t), &mut scratch, &mut out);
                }
            })
        });
    }
    for (name, config) in [
        ("sign_text_spotsigs_full", SignatureConfig::default()),
        ("sign_text_word_shingles_3_full", SignatureConfig::word_shingles(3)),
    ] {
        let signer = Signer::new(config).unwrap();
        group.bench_function(name, |b| {
            let mut scratch = Scratch::default();
            b.iter(|| {
                for t in &corpus.text {
                    black_box(signer.sign_text_with(black_box(t), &mut scratch));
                }
            })
        });
    }
    group.finish();

    // The same pages given as tokens (lower case, one space between them:
    // the text every tool of benches/compare is handed), signed whole.
    let given: Vec<String> = corpus.text.iter().map(|t| Tokens::from_text(t).joined()).collect();
    let mut group = c.benchmark_group("tokens");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes_of(&given)));
    let signer = Signer::new(SignatureConfig::word_shingles(3)).unwrap();
    group.bench_function("sign_tokens_word_shingles_3_full", |b| {
        let mut scratch = Scratch::default();
        b.iter(|| {
            for t in &given {
                black_box(signer.sign_text_with(black_box(t), &mut scratch));
            }
        })
    });
    group.finish();

    // A page's signature hashes made into its vector (sorted, each
    // distinct hash with its count), against the library's sort of the
    // same hashes; both copy the page's hashes into a kept buffer first.
    let signer = Signer::new(SignatureConfig::word_shingles(3)).unwrap();
    let mut scratch = Scratch::default();
    let hashes: Vec<Vec<u64>> = corpus
        .text
        .iter()
        .map(|t| {
            let mut out = Vec::new();
            signer.signature_hashes(t, &mut scratch, &mut out);
            out
        })
        .collect();
    let mut group = c.benchmark_group("vectors");
    group.throughput(Throughput::Elements(hashes.iter().map(|h| h.len() as u64).sum()));
    group.bench_function("baseline_sort_unstable", |b| {
        let mut buffer = Vec::new();
        b.iter(|| {
            each_copied(&hashes, &mut buffer, |h| {
                h.sort_unstable();
                black_box(h);
            })
        })
    });
    group.bench_function("from_hash_buffer_word_shingles_3", |b| {
        let mut buffer = Vec::new();
        b.iter(|| each_copied(&hashes, &mut buffer, |h| drop(black_box(SignatureVector::from_hash_buffer(h)))))
    });
    group.finish();

    // Documents per second for the whole HTML-to-signature path.
    let mut group = c.benchmark_group("documents");
    group.sample_size(10);
    group.throughput(Throughput::Elements(corpus.html.len() as u64));
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    group.bench_function("sign_html_spotsigs", |b| {
        let mut scratch = Scratch::default();
        b.iter(|| {
            for h in &corpus.html {
                black_box(signer.sign_html_with(black_box(h.as_bytes()), &mut scratch));
            }
        })
    });
    group.finish();
}

/// Classic MinHash: P seeded hash functions, each evaluated on every
/// signature (P·n evaluations), the baseline for one-permutation hashing.
fn classic_minhash(hashes: &[u64], seeds: &[u64], out: &mut [u64]) {
    out.fill(u64::MAX);
    for &h in hashes {
        for (slot, &seed) in out.iter_mut().zip(seeds) {
            *slot = (*slot).min(hash_u64(h, seed));
        }
    }
}

fn minhash(c: &mut Criterion) {
    // A 500-signature document of real signatures: word 3-shingles of the
    // longest extracted page (synthetic hashes if the data is missing).
    let hashes: Vec<u64> = match corpus() {
        Some(corpus) => {
            let signer = Signer::new(SignatureConfig::word_shingles(3)).unwrap();
            let longest = corpus.text.iter().max_by_key(|t| t.len()).unwrap();
            signer.sign_text(longest).vector.hashes().iter().copied().take(500).collect()
        }
        None => (0..500u64).map(|i| hash_u64(i, 7)).collect(),
    };
    assert_eq!(hashes.len(), 500);
    let mut group = c.benchmark_group("minhash_p128_500_signatures");
    let hasher = MinHasher::new(128, DEFAULT_HASH_SEED);
    group.bench_function("one_permutation_densified", |b| b.iter(|| black_box(hasher.sketch(black_box(&hashes)))));
    let seeds: Vec<u64> = (0..128u64).map(|i| derive_seed(DEFAULT_HASH_SEED, &i.to_le_bytes())).collect();
    group.bench_function("baseline_classic_p_hash_functions", |b| {
        b.iter_batched_ref(
            || vec![0u64; 128],
            |out| classic_minhash(black_box(&hashes), &seeds, out),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// Calls `f` with each page's hashes copied into `buffer` (the vectors
/// group's shared first step, so that both its measures copy alike).
fn each_copied(hashes: &[Vec<u64>], buffer: &mut Vec<u64>, mut f: impl FnMut(&mut [u64])) {
    for h in hashes {
        buffer.clear();
        buffer.extend_from_slice(h);
        f(buffer);
    }
}

criterion_group!(benches, text_stages, minhash);
criterion_main!(benches);
