//! Every single-bit flip and every truncation of the golden index's files
//! (its segment and its catalog) is detected: opening fails with a typed
//! error, or `verify()` does, or every answer is what the undamaged index
//! gives. Never a panic, never a silently wrong answer.
//!
//! The catalog sweep flips every bit of every byte the undamaged run reads
//! (its read set, recorded by `FaultStorage`): a flip of a byte that is
//! never read cannot change what the program does, so this covers every
//! bit of the file. `NEARDEX_FLIP_STRIDE=N` tries every Nth bit only.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;

use neardex::store::{Fault, FaultStorage, Index, IndexError, IndexOptions, MemStorage, Metadata, Storage};
use neardex::{SignatureVector, Threshold};
use rayon::prelude::*;

#[path = "common/golden.rs"]
mod golden;

const CATALOG: &str = "catalog.redb";
const SEGMENT: &str = "seg-0000000000000001.nds";

type Matches = Vec<(u64, u64, u64)>;

/// Everything the index answers: each live document, and two exact
/// queries (τ = 0.3 and 0.9) by each document's vector.
#[derive(Debug, PartialEq)]
struct Answers {
    docs: Vec<(u64, String, Metadata, SignatureVector)>,
    queries: Vec<Matches>,
}

/// The golden index of segment format `version` (its catalog is of format
/// 1 for segment formats 1 to 3, of format 2 after).
fn golden(version: u32) -> MemStorage {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/golden-v{version}"));
    MemStorage::load_dir(dir).unwrap()
}

/// The golden index written by today's build: a catalog (and a segment) of
/// today's formats.
fn golden_written_today() -> MemStorage {
    let storage = MemStorage::new();
    golden::write_today(Arc::new(storage.clone())).expect("writing the golden index");
    storage
}

fn answers(storage: Arc<dyn Storage>) -> Result<Answers, IndexError> {
    let index = Index::open_in(storage, IndexOptions::default())?;
    let searcher = index.searcher()?;
    let mut ids = Vec::new();
    searcher.for_each_live(|id, _| ids.push(id))?;
    let mut docs = Vec::new();
    let mut queries = Vec::new();
    for id in ids {
        let Some(doc) = searcher.get_by_id(id)? else { continue };
        for tau in [0.3, 0.9] {
            let found = searcher.query(&doc.vector, Threshold::new(tau).unwrap())?;
            queries.push(found.iter().map(|m| (m.id, m.overlap.num, m.overlap.den)).collect());
        }
        docs.push((doc.id, doc.key, doc.metadata, doc.vector));
    }
    drop(searcher);
    index.verify()?;
    Ok(Answers { docs, queries })
}

#[derive(Debug, Default)]
struct Tally {
    trials: u64,
    detected: u64,
    harmless: u64,
    failures: Vec<String>,
}

impl Tally {
    fn add(mut self, other: Tally) -> Tally {
        self.trials += other.trials;
        self.detected += other.detected;
        self.harmless += other.harmless;
        self.failures.extend(other.failures);
        self
    }
}

/// Runs `answers` on `damaged` and classifies the result.
fn trial(reference: &Answers, damaged: MemStorage, what: &str) -> Tally {
    let mut tally = Tally { trials: 1, ..Tally::default() };
    match catch_unwind(AssertUnwindSafe(|| answers(Arc::new(damaged)))) {
        Err(_) => tally.failures.push(format!("{what}: panic")),
        Ok(Err(_)) => tally.detected += 1,
        Ok(Ok(found)) if found == *reference => tally.harmless += 1,
        Ok(Ok(_)) => tally.failures.push(format!("{what}: undetected, answers differ")),
    }
    tally
}

fn damaged(base: &MemStorage, file: &str, bytes: Vec<u8>) -> MemStorage {
    let copy = base.deep_copy();
    copy.overwrite_file(file, bytes).unwrap();
    copy
}

fn stride() -> u64 {
    std::env::var("NEARDEX_FLIP_STRIDE").ok().and_then(|v| v.parse().ok()).unwrap_or(1)
}

/// Flips every `stride`-th bit among `bits` of `file`, and truncates it at
/// every length in `lengths`.
fn sweep(base: &MemStorage, file: &str, bits: Vec<u64>, lengths: Vec<u64>) -> Tally {
    let reference = answers(Arc::new(base.deep_copy())).expect("the golden index answers");
    let original = base.read_file(file).unwrap();
    let flips = bits.par_iter().map(|&bit| {
        let mut bytes = original.clone();
        bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
        trial(&reference, damaged(base, file, bytes), &format!("{file} bit {bit}"))
    });
    let cuts = lengths.par_iter().map(|&len| {
        trial(&reference, damaged(base, file, original[..len as usize].to_vec()), &format!("{file} cut at {len}"))
    });
    let tally = flips.chain(cuts).reduce(Tally::default, Tally::add);
    assert!(tally.failures.is_empty(), "{} of {} trials: {:?}", tally.failures.len(), tally.trials, tally.failures);
    tally
}

#[test]
fn every_bit_flip_and_truncation_of_the_segment_is_detected() {
    for version in [1, 2, 3, 4, 5, 6] {
        let base = golden(version);
        let len = base.read_file(SEGMENT).unwrap().len() as u64;
        let bits: Vec<u64> = (0..len * 8).step_by(stride() as usize).collect();
        let tally = sweep(&base, SEGMENT, bits, (0..len).collect());
        eprintln!(
            "segment (format {version}): {} trials, {} detected, {} harmless",
            tally.trials, tally.detected, tally.harmless
        );
        assert_eq!(tally.harmless, 0, "every byte of a format {version} segment is checked");
    }
}

#[test]
fn every_bit_flip_and_truncation_of_the_catalog_is_detected_or_harmless() {
    // The oldest catalog format (which opening for writing upgrades) and
    // today's.
    for (name, base) in [("golden-v1", golden(1)), ("the golden index written today", golden_written_today())] {
        let probe = FaultStorage::new(base.deep_copy(), Fault::None);
        answers(Arc::new(probe.clone())).unwrap();
        let ranges = probe.read_ranges(CATALOG);
        let read: u64 = ranges.iter().map(|r| r.end - r.start).sum();
        let len = base.read_file(CATALOG).unwrap().len() as u64;
        let bits: Vec<u64> = ranges.iter().flat_map(|r| r.start * 8..r.end * 8).step_by(stride() as usize).collect();
        let lengths: Vec<u64> = (0..len).step_by(stride() as usize).collect();
        let tally = sweep(&base, CATALOG, bits, lengths);
        eprintln!(
            "catalog of {name}: {len} bytes, {read} of them read; {} trials, {} detected, {} harmless",
            tally.trials, tally.detected, tally.harmless
        );
        assert!(tally.detected > 0);
    }
}
