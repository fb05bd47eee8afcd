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
//!   `[⌈τ|q|⌉, ⌊|q|/τ⌋]`.
//!
//! Thresholds are compared in integers (τ in parts per billion), as neardex
//! does, so the two exact answers can be compared pair for pair.

use std::collections::HashMap;
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

fn overlap(x: &[u32], y: &[u32]) -> u64 {
    let (mut i, mut j, mut o) = (0, 0, 0);
    while i < x.len() && j < y.len() {
        match x[i].cmp(&y[j]) {
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

/// Documents as sorted element ranks.
pub struct Sets {
    pub docs: Vec<Vec<u32>>,
}

impl Sets {
    fn build(raw: Vec<Vec<u64>>) -> Sets {
        let mut df: HashMap<u64, u32> = HashMap::new();
        for doc in &raw {
            for &e in doc {
                *df.entry(e).or_default() += 1;
            }
        }
        let mut order: Vec<(u32, u64)> = df.into_iter().map(|(e, f)| (f, e)).collect();
        order.sort_unstable();
        let rank: HashMap<u64, u32> = order.into_iter().enumerate().map(|(r, (_, e))| (e, r as u32)).collect();
        let docs = raw
            .into_iter()
            .map(|doc| {
                let mut ranks: Vec<u32> = doc.iter().map(|e| rank[e]).collect();
                ranks.sort_unstable();
                ranks
            })
            .collect();
        Sets { docs }
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
                    if meets(ppb, overlap(xs, ys), l, ys.len() as u64) {
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

    /// Documents with Jaccard ≥ τ to `q` (itself included).
    fn query(&self, sets: &Sets, q: &[u32], ppb: u64, score: &mut HashMap<u32, i32>) -> usize {
        let l = q.len() as u64;
        if l == 0 {
            return 0;
        }
        let (lo, hi) = (min_overlap_len(ppb, l) as usize, (l * BILLION / ppb) as usize);
        let probe = (l - min_overlap_len(ppb, l) + 1) as usize;
        score.clear();
        for (i, &w) in q.iter().take(probe).enumerate() {
            let Some(list) = self.lists.get(w as usize) else { continue };
            let first = list.partition_point(|&(y, _)| sets.docs[y as usize].len() < lo);
            for &(y, j) in &list[first..] {
                let ly = sets.docs[y as usize].len();
                if ly > hi {
                    break;
                }
                let s = score.entry(y).or_insert(0);
                if *s == i32::MIN {
                    continue;
                }
                let bound = (*s as u64) + (q.len() - i).min(ly - j as usize) as u64;
                *s = if bound >= needed(ppb, l, ly as u64) { *s + 1 } else { i32::MIN };
            }
        }
        score
            .iter()
            .filter(|(_, &s)| s > 0)
            .filter(|(&y, _)| {
                let ys = &sets.docs[y as usize];
                meets(ppb, overlap(q, ys), l, ys.len() as u64)
            })
            .count()
    }
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

pub fn run(dir: &Path, scheme: Scheme) {
    let signer = Signer::new(scheme.config()).unwrap();
    let ppb = u64::from(Threshold::new(TAU).unwrap().ppb());
    let start = Instant::now();
    let mut raw = Vec::new();
    sign_all(&scheme.input(dir), scheme, &signer, |chunk| {
        for (_, s) in chunk {
            raw.push(elements(scheme, s.vector.hashes(), s.vector.freqs()));
        }
    });
    let sign_secs = start.elapsed().as_secs_f64();
    let n = raw.len();
    let start = Instant::now();
    let sets = Sets::build(raw);
    let rank_secs = start.elapsed().as_secs_f64();

    let start = Instant::now();
    let pairs = sets.self_join(ppb);
    let join_secs = start.elapsed().as_secs_f64();
    write_pairs(&dir.join(format!("pairs-prefix-{}.txt", scheme.name())), &pairs);

    let start = Instant::now();
    let index = QueryIndex::build(&sets, ppb);
    let index_secs = start.elapsed().as_secs_f64();
    let mut score = HashMap::new();
    let mut times = Vec::new();
    let mut found = 0;
    for q in sample(n as u64) {
        let t = Instant::now();
        found += index.query(&sets, &sets.docs[q as usize], ppb, &mut score);
        times.push(t.elapsed().as_secs_f64());
    }
    let (p50, p99) = percentiles(times);
    println!(
        "{{\"tool\": \"prefix-{}\", \"documents\": {n}, \"sign_seconds\": {sign_secs:.2}, \"rank_seconds\": {rank_secs:.2}, \
         \"all_pairs_seconds\": {join_secs:.2}, \"pairs\": {}, \"query_index_seconds\": {index_secs:.2}, \
         \"query_p50_us\": {p50:.1}, \"query_p99_us\": {p99:.1}, \"sample_matches\": {found}, \"peak_rss_bytes\": {}, {}}}",
        scheme.name(),
        pairs.len(),
        peak_rss(),
        crate::peak_split()
    );
}
