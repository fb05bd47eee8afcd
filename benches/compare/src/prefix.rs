//! The exact baseline: a prefix-filter set-similarity join (AllPairs with
//! PPJoin's positional filter), written for this benchmark, on neardex's
//! own signatures.
//!
//! A document is a set of elements: its distinct signature hashes under set
//! Jaccard; under multiset Jaccard each hash `h` of frequency `f` becomes
//! the `f` elements `(h, 0)..(h, f − 1)`, whose set Jaccard is the multiset
//! Jaccard of the vectors. Elements are ranked by ascending document
//! frequency (ties by value), each document is its sorted ranks, and:
//!
//! - the self-join visits documents by ascending size, probes the first
//!   `|x| − ⌈τ|x|⌉ + 1` ranks of each, keeps candidates whose size is at
//!   least `⌈τ|x|⌉` and whose positional bound can still reach the needed
//!   overlap `⌈τ(|x| + |y|)/(1 + τ)⌉`, verifies each by merging, and then
//!   indexes its first `|x| − ⌈2τ|x|/(1 + τ)⌉ + 1` ranks; one thread;
//! - a single query probes an index of every document's first
//!   `|y| − ⌈τ|y|⌉ + 1` ranks with its own prefix, inside the size window
//!   `[⌈τ|q|⌉, ⌊|q|/τ⌋]`. It starts, as neardex's query does, from a
//!   page's signature vector: its elements are looked up in the table of
//!   ranks (an element no document holds ranks first) and sorted, then
//!   probed. The same queries are also timed on the stored pages' ranks,
//!   which the join computed: the probe alone (`ranked_query_*`).
//!
//! Its tables hash with one multiplication ([`Mix`]) and a query's scores
//! sit in a dense array, as its join's do: a tuned baseline, not one slowed
//! by SipHash.
//!
//! Thresholds are compared in integers (τ in parts per billion), as neardex
//! does, so the two exact answers can be compared pair for pair.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Instant;

use neardex::{Signer, Similarity, Threshold};

use crate::{peak_rss, percentiles, sample, sign_all, write_pairs, Scheme, TAU};

const BILLION: u64 = 1_000_000_000;

fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

/// `⌈τ·l⌉`.
fn min_overlap_len(ppb: u64, l: u64) -> u64 {
    ceil_div(ppb * l, BILLION)
}

/// The overlap two sets of sizes `a` and `b` need: `⌈τ(a + b)/(1 + τ)⌉`.
fn needed(ppb: u64, a: u64, b: u64) -> u64 {
    ceil_div(ppb * (a + b), BILLION + ppb)
}

fn meets(ppb: u64, overlap: u64, a: u64, b: u64) -> bool {
    u128::from(overlap) * u128::from(BILLION) >= u128::from(ppb) * u128::from(a + b - overlap)
}

/// A hasher for keys that are already hash values or small integers: one
/// multiplication (Fibonacci hashing), so that the baseline's tables cost
/// what a tuned implementation's would, not SipHash's.
#[derive(Default, Clone, Copy)]
pub struct Mix(u64);

impl std::hash::Hasher for Mix {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type Fast<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<Mix>>;

/// Documents as sorted element ranks.
pub struct Sets {
    pub docs: Vec<Vec<u32>>,
}

impl Sets {
    /// The documents as ranks, and the elements in rank order (ascending
    /// document frequency, ties by value).
    fn build(raw: Vec<Vec<u64>>) -> (Sets, Vec<u64>) {
        let mut df: Fast<u64, u32> = Fast::default();
        for doc in &raw {
            for &e in doc {
                *df.entry(e).or_default() += 1;
            }
        }
        let mut order: Vec<(u32, u64)> = df.into_iter().map(|(e, f)| (f, e)).collect();
        order.sort_unstable();
        let order: Vec<u64> = order.into_iter().map(|(_, e)| e).collect();
        let rank = RankTable::of(&order);
        let docs = raw
            .into_iter()
            .map(|doc| {
                let mut ranks: Vec<u32> = doc.iter().map(|e| rank.0[e]).collect();
                ranks.sort_unstable();
                ranks
            })
            .collect();
        (Sets { docs }, order)
    }

    /// Every pair with Jaccard ≥ τ, one thread.
    pub fn self_join(&self, ppb: u64) -> Vec<(u32, u32)> {
        let mut order: Vec<u32> = (0..self.docs.len() as u32).collect();
        order.sort_by_key(|&d| (self.docs[d as usize].len(), d));
        let mut index: Vec<Vec<(u32, u32)>> = Vec::new();
        let mut starts: Vec<usize> = Vec::new();
        let mut score: Vec<i32> = vec![0; self.docs.len()];
        let mut touched: Vec<u32> = Vec::new();
        let mut pairs = Vec::new();
        for &x in &order {
            let xs = &self.docs[x as usize];
            let l = xs.len() as u64;
            if l == 0 {
                continue;
            }
            let min_len = min_overlap_len(ppb, l) as usize;
            let probe = (l - min_overlap_len(ppb, l) + 1) as usize;
            for (i, &w) in xs.iter().take(probe).enumerate() {
                let Some(list) = index.get(w as usize) else { continue };
                let start = &mut starts[w as usize];
                while *start < list.len() && self.docs[list[*start].0 as usize].len() < min_len {
                    *start += 1;
                }
                for &(y, j) in &list[*start..] {
                    let ly = self.docs[y as usize].len();
                    let s = &mut score[y as usize];
                    if *s == i32::MIN {
                        continue;
                    }
                    let bound = (*s as u64) + (xs.len() - i).min(ly - j as usize) as u64;
                    if bound >= needed(ppb, l, ly as u64) {
                        if *s == 0 {
                            touched.push(y);
                        }
                        *s += 1;
                    } else {
                        if *s == 0 {
                            touched.push(y);
                        }
                        *s = i32::MIN;
                    }
                }
            }
            for &y in &touched {
                if score[y as usize] > 0 {
                    let ys = &self.docs[y as usize];
                    if meets(ppb, overlap(xs, 0, ys), l, ys.len() as u64) {
                        pairs.push((x.min(y), x.max(y)));
                    }
                }
                score[y as usize] = 0;
            }
            touched.clear();
            let indexed = (l - ceil_div(2 * ppb * l, BILLION + ppb) + 1) as usize;
            for (i, &w) in xs.iter().take(indexed).enumerate() {
                if index.len() <= w as usize {
                    index.resize(w as usize + 1, Vec::new());
                    starts.resize(w as usize + 1, 0);
                }
                index[w as usize].push((x, i as u32));
            }
        }
        pairs.sort_unstable();
        pairs
    }
}

/// Each element's rank: what a query needs to put a new document's
/// elements in the join's order.
struct RankTable(Fast<u64, u32>);

impl RankTable {
    fn of(order: &[u64]) -> RankTable {
        RankTable(order.iter().enumerate().map(|(r, &e)| (e, r as u32)).collect())
    }

    /// A query document's elements as sorted ranks: what the query must do
    /// with a document's signatures before it can take its prefix. An
    /// element no stored document holds is rarer than all (document
    /// frequency 0), ranked below every known one.
    fn ranks_of(&self, elements: &[u64], out: &mut Vec<u32>) {
        out.clear();
        let mut unknown = 0u32;
        for e in elements {
            out.push(match self.0.get(e) {
                Some(&r) => r + elements.len() as u32,
                None => {
                    unknown += 1;
                    unknown - 1
                }
            });
        }
        out.sort_unstable();
    }
}

/// The query-side index: every document's probing prefix.
struct QueryIndex {
    lists: Vec<Vec<(u32, u32)>>,
}

impl QueryIndex {
    fn build(sets: &Sets, ppb: u64) -> QueryIndex {
        let mut order: Vec<u32> = (0..sets.docs.len() as u32).collect();
        order.sort_by_key(|&d| (sets.docs[d as usize].len(), d));
        let mut lists: Vec<Vec<(u32, u32)>> = Vec::new();
        for &y in &order {
            let ys = &sets.docs[y as usize];
            let l = ys.len() as u64;
            let prefix = if l == 0 { 0 } else { (l - min_overlap_len(ppb, l) + 1) as usize };
            for (j, &w) in ys.iter().take(prefix).enumerate() {
                if lists.len() <= w as usize {
                    lists.resize(w as usize + 1, Vec::new());
                }
                lists[w as usize].push((y, j as u32));
            }
        }
        QueryIndex { lists }
    }

    /// Documents with Jaccard ≥ τ to `q` (itself included), `q` as sorted
    /// ranks from [`RankTable::ranks_of`] (shifted by `shift`: the ranks of
    /// stored documents are `rank`, a query's `rank + shift` so that its
    /// unknown elements fit below). `score` holds a zero for every
    /// document and is left so.
    fn query(&self, sets: &Sets, q: &[u32], shift: u32, ppb: u64, score: &mut [i32], touched: &mut Vec<u32>) -> usize {
        let l = q.len() as u64;
        if l == 0 {
            return 0;
        }
        let (lo, hi) = (min_overlap_len(ppb, l) as usize, (l * BILLION / ppb) as usize);
        let probe = (l - min_overlap_len(ppb, l) + 1) as usize;
        for (i, &w) in q.iter().take(probe).enumerate() {
            let Some(w) = w.checked_sub(shift) else { continue };
            let Some(list) = self.lists.get(w as usize) else { continue };
            let first = list.partition_point(|&(y, _)| sets.docs[y as usize].len() < lo);
            for &(y, j) in &list[first..] {
                let ly = sets.docs[y as usize].len();
                if ly > hi {
                    break;
                }
                let s = &mut score[y as usize];
                if *s == i32::MIN {
                    continue;
                }
                if *s == 0 {
                    touched.push(y);
                }
                let bound = (*s as u64) + (q.len() - i).min(ly - j as usize) as u64;
                *s = if bound >= needed(ppb, l, ly as u64) { *s + 1 } else { i32::MIN };
            }
        }
        let mut found = 0;
        for &y in touched.iter() {
            if score[y as usize] > 0 {
                let ys = &sets.docs[y as usize];
                if meets(ppb, overlap(q, shift, ys), l, ys.len() as u64) {
                    found += 1;
                }
            }
            score[y as usize] = 0;
        }
        touched.clear();
        found
    }
}

/// The overlap of two sorted rank lists: a stored document's ranks `y`,
/// and `x`, a stored document's (`shift` 0) or a query's from
/// [`RankTable::ranks_of`] (ranks shifted by `shift`; those below it are
/// elements no stored document holds).
fn overlap(x: &[u32], shift: u32, y: &[u32]) -> u64 {
    let (mut i, mut j, mut o) = (x.partition_point(|&r| r < shift), 0, 0);
    while i < x.len() && j < y.len() {
        match (x[i] - shift).cmp(&y[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                o += 1;
                i += 1;
                j += 1;
            }
        }
    }
    o
}

/// Elements of a signature vector under the scheme's measure.
fn elements(scheme: Scheme, hashes: &[u64], freqs: &[u32]) -> Vec<u64> {
    match scheme.config().similarity {
        Similarity::MultisetJaccard => hashes
            .iter()
            .zip(freqs)
            .flat_map(|(&h, &f)| {
                (0..u64::from(f)).map(move |k| xxhash_rust::xxh3::xxh3_64_with_seed(&h.to_le_bytes(), k))
            })
            .collect(),
        _ => hashes.to_vec(),
    }
}

/// Runs `query(k)` for `k` in `0..count`, twice: the second pass's p50
/// and p99 (µs) and the matches it found (as neardex's warm pass).
fn two_passes(count: usize, mut query: impl FnMut(usize) -> usize) -> ((f64, f64), usize) {
    let (mut times, mut found) = (Vec::new(), 0);
    for _pass in 0..2 {
        times.clear();
        found = 0;
        for k in 0..count {
            let t = Instant::now();
            found += query(k);
            times.push(t.elapsed().as_secs_f64());
        }
    }
    (percentiles(times), found)
}

pub fn run(dir: &Path, scheme: Scheme) {
    let signer = Signer::new(scheme.config()).unwrap();
    let ppb = u64::from(Threshold::new(TAU).unwrap().ppb());
    // The sample pages whose queries are timed (corpus.json's count: the
    // sample is taken before the signing, which keeps its vectors).
    let corpus = std::fs::read_to_string(dir.join("corpus.json")).expect("corpus.json (run `gen` first)");
    let documents: u64 = corpus
        .split("\"documents\": ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .expect("corpus.json names its documents");
    let wanted = sample(documents);
    let mut vectors = Vec::with_capacity(wanted.len());
    let start = Instant::now();
    let mut raw = Vec::new();
    sign_all(&scheme.input(dir), &signer, |chunk| {
        for (i, s) in chunk {
            raw.push(elements(scheme, s.vector.hashes(), s.vector.freqs()));
            if wanted.get(vectors.len()) == Some(&i) {
                vectors.push(s.vector);
            }
        }
    });
    let sign_secs = start.elapsed().as_secs_f64();
    let n = raw.len();
    assert_eq!(n as u64, documents, "corpus.json's count");
    let start = Instant::now();
    let (sets, order) = Sets::build(raw);
    let rank_secs = start.elapsed().as_secs_f64();
    // The rank table is not held through the join (whose memory is the
    // figure compared with neardex's all-pairs run): the elements in rank
    // order wait in a file and the table is built again for the queries.
    let mut spill = std::io::BufWriter::new(tempfile::tempfile().expect("a temporary file"));
    for e in &order {
        spill.write_all(&e.to_le_bytes()).expect("writing the rank order");
    }
    let mut spill = spill.into_inner().expect("writing the rank order");
    drop(order);

    let start = Instant::now();
    let pairs = sets.self_join(ppb);
    let join_secs = start.elapsed().as_secs_f64();
    let join_peak = peak_rss();
    write_pairs(&dir.join(format!("pairs-prefix-{}.txt", scheme.name())), &pairs);
    let rank = {
        let mut bytes = Vec::new();
        spill.seek(SeekFrom::Start(0)).and_then(|_| spill.read_to_end(&mut bytes)).expect("reading the rank order");
        let order: Vec<u64> = bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap())).collect();
        RankTable::of(&order)
    };

    let start = Instant::now();
    let index = QueryIndex::build(&sets, ppb);
    let index_secs = start.elapsed().as_secs_f64();
    // Single queries, each from a sample page's signature vector (what
    // neardex's queries are given, signed before the timing as there):
    // its elements, their ranks, then the prefix probe. Two passes, the
    // second reported, as neardex's warm pass.
    let mut score = vec![0i32; n];
    let (mut touched, mut ranks) = (Vec::new(), Vec::new());
    let mut from_vector = |vector: &neardex::SignatureVector, score: &mut [i32], touched: &mut Vec<u32>| {
        let elements = elements(scheme, vector.hashes(), vector.freqs());
        rank.ranks_of(&elements, &mut ranks);
        index.query(&sets, &ranks, elements.len() as u32, ppb, score, touched)
    };
    let ((p50, p99), found) = two_passes(vectors.len(), |k| from_vector(&vectors[k], &mut score, &mut touched));
    // The same queries on the stored pages' ranks, computed at build time:
    // the probe alone, in passes of their own (so that neither form finds
    // the other's lists in the CPU caches).
    let ((ranked_p50, ranked_p99), ranked_found) = two_passes(wanted.len(), |k| {
        index.query(&sets, &sets.docs[wanted[k] as usize], 0, ppb, &mut score, &mut touched)
    });
    assert_eq!(found, ranked_found, "the two query forms find the same matches");
    // Pages no stored document is (`new_pages`), as neardex's are timed:
    // their elements no stored document holds rank first, and are probed
    // without a list.
    let fresh = crate::new_pages(&signer, scheme, documents);
    let ((new_p50, new_p99), new_found) =
        two_passes(fresh.len(), |k| from_vector(&fresh[k].1.vector, &mut score, &mut touched));
    println!(
        "{{\"tool\": \"prefix-{}\", \"documents\": {n}, \"sign_seconds\": {sign_secs:.2}, \"rank_seconds\": {rank_secs:.2}, \
         \"all_pairs_seconds\": {join_secs:.2}, \"pairs\": {}, \"query_index_seconds\": {index_secs:.2}, \
         \"query_p50_us\": {p50:.1}, \"query_p99_us\": {p99:.1}, \"ranked_query_p50_us\": {ranked_p50:.1}, \"ranked_query_p99_us\": {ranked_p99:.1}, \"sample_matches\": {found}, \"new_query_p50_us\": {new_p50:.1}, \"new_query_p99_us\": {new_p99:.1}, \"new_matches\": {new_found}, \"join_peak_rss_bytes\": {join_peak}, \"peak_rss_bytes\": {}, {}}}",
        scheme.name(),
        pairs.len(),
        peak_rss(),
        crate::peak_split()
    );
}
