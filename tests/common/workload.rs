//! A reference workload over any storage, the model it must match, and the
//! checks run after a crash or an I/O failure: the index reopens,
//! `verify()` passes, it holds exactly the last acknowledged state (or,
//! when a commit was under way, exactly the state that commit would have
//! made), and exact queries (before and after the warm-up) and the
//! self-join equal the brute-force oracle's.
//!
//! Shared by `tests/faults.rs`, `tests/store.rs`, the `ops` fuzz target
//! and its corpus replay (`tests/fuzz_corpus.rs`).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use neardex::oracle;
use neardex::store::{
    CrashMode, Document, Fault, FaultStorage, Index, IndexError, IndexOptions, InsertIfNew, MemStorage, Metadata,
    Storage, WarmUp,
};
use neardex::{SignatureConfig, SignatureVector, Signer, Similarity, Threshold};

/// Live documents: key -> (text, metadata).
pub type Model = BTreeMap<String, (String, Metadata)>;

const ARTICLES: [&str; 4] = [
    "The city council voted on Tuesday to approve a plan for a new central library, ending a debate that had \
     lasted more than three years. The building will replace the old branch, which was closed after the flood.",
    "A small company in the north has built a battery that can be charged in a few minutes and is said to last \
     for the whole life of the car. It will be tested by a taxi firm in the spring.",
    "Scientists have found that the birds which spend the winter in the south are returning earlier than they \
     did in the past, and they say that the warmer weather is the most likely reason for the change.",
    "The team won its third game in a row on Sunday, and the coach said that the players were at their best \
     when the crowd was behind them. The next match is at home against the league leaders.",
];

const EDITS: [&str; 8] = ["new", "large", "quiet", "local", "famous", "early", "last", "modern"];

/// A document text: article `t % 4`, with the word edits `t / 4` selects,
/// so texts of one article are near-duplicates of each other.
pub fn text(t: u8) -> String {
    let mut words: Vec<String> = ARTICLES[usize::from(t % 4)].split(' ').map(str::to_owned).collect();
    let edits = usize::from(t / 4);
    for e in 0..edits.min(6) {
        let at = (e * 7 + edits * 3) % words.len();
        words[at] = EDITS[(e + edits) % EDITS.len()].to_owned();
    }
    words.join(" ")
}

/// Metadata derived from the key and text number.
pub fn meta(key: &str, t: u8) -> Metadata {
    Metadata { url: Some(format!("http://example.com/{key}")), user: vec![t], ..Metadata::default() }
}

/// One step of a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Insert key `k` with text `t` (skipped when `k` is live).
    Insert(u8, u8),
    /// Insert key `k` with text `t` through `Writer::insert_if_new` at
    /// τ = `p`/100: not added when a live or staged document is that
    /// similar (skipped when `k` is live).
    InsertIfNew(u8, u8, u8),
    /// Replace (or insert) key `k` with text `t`.
    Replace(u8, u8),
    /// Delete key `k`.
    Delete(u8),
    /// Commit the staged batch.
    Commit,
    /// Commit the staged batch through a bulk writer (its own segment).
    BulkCommit,
    /// Drop the staged batch.
    Abort,
    /// Flush pending documents to a segment.
    Flush,
    /// Merge every segment.
    Optimize,
    /// Close and reopen the index.
    Reopen,
}

/// The reference workload of the crash sweep: 8 batches of inserts,
/// replaces and deletes with flushes (threshold 5), an aborted batch, an
/// explicit flush, a merge and a reopen.
pub fn reference_steps() -> Vec<Step> {
    let mut steps = Vec::new();
    for b in 0u8..8 {
        for i in 0..3 {
            let k = 3 * b + i;
            steps.push(Step::Insert(k, k.wrapping_mul(5) % 32));
        }
        if b >= 2 {
            steps.push(Step::Delete(3 * (b - 2)));
            steps.push(Step::Replace(3 * (b - 1) + 1, b + 40));
        }
        if b == 4 {
            steps.push(Step::Abort);
            steps.push(Step::Insert(99, 1));
        }
        // The crawler's call, in a plain batch and in a bulk one: a copy
        // of a stored text (k1's) is refused, a text not yet stored goes
        // in, and a copy of that one in the same batch is refused again
        // (its match is staged).
        if b == 2 || b == 6 {
            steps.push(Step::InsertIfNew(50 + b, 5, 90));
            steps.push(Step::InsertIfNew(51 + b, 32 + b, 90));
            steps.push(Step::InsertIfNew(52 + b, 32 + b, 90));
        }
        // Two batches go through a bulk writer: one with a replace and a
        // delete of pending and segment documents, one before the merge.
        steps.push(if b == 3 || b == 6 { Step::BulkCommit } else { Step::Commit });
        match b {
            3 => steps.push(Step::Flush),
            5 => steps.push(Step::Reopen),
            6 => steps.push(Step::Optimize),
            _ => {}
        }
    }
    steps
}

/// Options of the workload's index: small flushes, so segments appear.
pub fn options() -> IndexOptions {
    IndexOptions { flush_threshold: 5, ..IndexOptions::default() }
}

/// What a run acknowledged.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    /// The state after the last acknowledged commit.
    pub acked: Model,
    /// When a commit failed: the state it would have made (the commit may
    /// or may not have landed).
    pub in_flight: Option<Model>,
    /// The first error, if the run stopped on one.
    pub error: Option<String>,
    /// Whether the index exists (its creation returned).
    pub created: bool,
    /// Documents `insert_if_new` did not add (their matches were the
    /// model's).
    pub refused: usize,
}

/// How a run gets its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Create it.
    Create,
    /// Open it.
    Open,
    /// Open it, or create it if it does not open (after a crash during
    /// creation, which acknowledged nothing).
    Recover,
}

/// Runs `steps` against the index in `storage`, starting from the
/// acknowledged state `start`. Stops at the first error.
pub fn run(storage: Arc<dyn Storage>, how: Start, start: Model, steps: &[Step]) -> Outcome {
    let mut out = Outcome { acked: start, ..Outcome::default() };
    if let Err(e) = run_inner(&storage, how, steps, &mut out) {
        out.error = Some(e.to_string());
    }
    out
}

fn open(storage: &Arc<dyn Storage>) -> Result<Index, IndexError> {
    Index::open_in(Arc::clone(storage), options())
}

fn create(storage: &Arc<dyn Storage>) -> Result<Index, IndexError> {
    Index::create_in(Arc::clone(storage), SignatureConfig::default(), options())
}

fn run_inner(storage: &Arc<dyn Storage>, how: Start, steps: &[Step], out: &mut Outcome) -> Result<(), IndexError> {
    let mut index = match how {
        Start::Create => create(storage)?,
        Start::Open => open(storage)?,
        Start::Recover => match open(storage) {
            Ok(index) => index,
            Err(_) if out.acked.is_empty() => create(storage)?,
            Err(e) => return Err(e),
        },
    };
    out.created = true;
    let mut staged: Vec<Step> = Vec::new();
    for &step in steps {
        match step {
            Step::Insert(..) | Step::InsertIfNew(..) | Step::Replace(..) | Step::Delete(..) => staged.push(step),
            Step::Abort => {
                let mut w = index.writer()?;
                apply(&mut w, &staged, &mut out.acked.clone(), &mut out.refused)?;
                drop(w);
                staged.clear();
            }
            Step::Commit | Step::BulkCommit => {
                let mut next = out.acked.clone();
                let mut w = if step == Step::BulkCommit { index.bulk_writer()? } else { index.writer()? };
                apply(&mut w, &staged, &mut next, &mut out.refused)?;
                staged.clear();
                out.in_flight = Some(next.clone());
                w.commit()?;
                out.acked = next;
                out.in_flight = None;
            }
            Step::Flush => index.flush()?,
            Step::Optimize => index.optimize()?,
            Step::Reopen => {
                drop(index);
                index = open(storage)?;
            }
        }
    }
    Ok(())
}

/// τ = `p`/100 (`p` in 1..=100).
pub fn percent(p: u8) -> Threshold {
    Threshold::new(f64::from(p) / 100.0).expect("τ in (0, 1]")
}

/// The keys of `model`'s documents at least `tau` similar to `body`, in
/// key order: the matches `Writer::insert_if_new` must find, by brute force.
pub fn similar_keys(model: &Model, body: &str, tau: Threshold) -> Vec<String> {
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    let keys: Vec<&String> = model.keys().collect();
    let vectors: Vec<SignatureVector> = model.values().map(|(text, _)| signer.sign_text(text).vector).collect();
    let docs = (0u64..).zip(&vectors);
    let matches = oracle::query(docs, &signer.sign_text(body).vector, signer.config().similarity, tau);
    matches.iter().map(|m| keys[m.id as usize].clone()).collect()
}

/// Stages `steps` in `w` and applies them to `model`; counts in `refused`
/// the documents `insert_if_new` did not add. Panics when its answer is
/// not the model's.
fn apply(
    w: &mut neardex::store::Writer<'_>,
    steps: &[Step],
    model: &mut Model,
    refused: &mut usize,
) -> Result<(), IndexError> {
    for &step in steps {
        match step {
            Step::Insert(k, t) => {
                let key = format!("k{k}");
                if !model.contains_key(&key) {
                    let body = text(t);
                    w.insert(&key, Document::Text(&body), meta(&key, t))?;
                    model.insert(key.clone(), (body, meta(&key, t)));
                }
            }
            Step::InsertIfNew(k, t, p) => {
                let key = format!("k{k}");
                if !model.contains_key(&key) {
                    let body = text(t);
                    let tau = percent(p);
                    let expected = similar_keys(model, &body, tau);
                    match w.insert_if_new(&key, Document::Text(&body), meta(&key, t), tau)? {
                        InsertIfNew::Inserted(_) => {
                            assert_eq!(expected, Vec::<String>::new(), "{key} was added over similar documents");
                            model.insert(key.clone(), (body, meta(&key, t)));
                        }
                        InsertIfNew::Matches(matches) => {
                            let mut found = Vec::new();
                            for m in matches {
                                found.push(w.describe(m.id)?.expect("a match is described").key);
                            }
                            found.sort();
                            assert_eq!(found, expected, "the matches that kept {key} out");
                            *refused += 1;
                        }
                    }
                }
            }
            Step::Replace(k, t) => {
                let key = format!("k{k}");
                let body = text(t);
                w.replace(&key, Document::Text(&body), meta(&key, t))?;
                model.insert(key.clone(), (body, meta(&key, t)));
            }
            Step::Delete(k) => {
                let key = format!("k{k}");
                w.delete(&key)?;
                model.remove(&key);
            }
            _ => {}
        }
    }
    Ok(())
}

/// Reopens the index in `storage` and checks it against `outcome`: it
/// opens, verifies, holds `acked` or (only when a commit was under way)
/// `in_flight` exactly, and answers exact queries as the oracle does over
/// that state. Returns the state found.
pub fn check_recovered(storage: Arc<dyn Storage>, outcome: &Outcome) -> Result<Model, String> {
    let index = match open(&storage) {
        Ok(index) => index,
        // A crash before creation returned: creating again must work.
        Err(_) if !outcome.created => {
            create(&storage).map_err(|e| format!("neither reopen nor create works after a crash during create: {e}"))?
        }
        Err(e) => return Err(format!("reopen failed: {e}")),
    };
    index.verify().map_err(|e| format!("verify failed: {e}"))?;
    let searcher = index.searcher().map_err(|e| e.to_string())?;
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    let mut found: BTreeMap<String, (u64, neardex::SignatureVector, Metadata)> = BTreeMap::new();
    let mut ids = Vec::new();
    searcher.for_each_live(|id, _| ids.push(id)).map_err(|e| e.to_string())?;
    for id in ids {
        let doc = searcher.get_by_id(id).map_err(|e| e.to_string())?.ok_or("live id without a document")?;
        found.insert(doc.key.clone(), (id, doc.vector, doc.metadata));
    }
    let matches = |model: &Model| {
        model.len() == found.len()
            && model.iter().all(|(k, (body, m))| {
                found.get(k).is_some_and(|(_, v, fm)| fm == m && *v == signer.sign_text(body).vector)
            })
    };
    let state = if matches(&outcome.acked) {
        outcome.acked.clone()
    } else if let Some(next) = outcome.in_flight.as_ref().filter(|n| matches(n)) {
        next.clone()
    } else {
        let keys: Vec<&String> = found.keys().collect();
        return Err(format!(
            "recovered {} documents {keys:?}; acknowledged {:?}, in flight {:?}",
            found.len(),
            outcome.acked.keys().collect::<Vec<_>>(),
            outcome.in_flight.as_ref().map(|m| m.keys().collect::<Vec<_>>())
        ));
    };
    // Exact queries over the recovered state against the oracle: before
    // the warm-up, and after it, when queries over several segments read
    // the masks it builds; then the self-join.
    let docs: Vec<(u64, &neardex::SignatureVector)> = found.values().map(|(id, v, _)| (*id, v)).collect();
    for warmed in [false, true] {
        if warmed {
            searcher.warm_up(WarmUp::Pages);
        }
        for t in [0u8, 1, 6, 13, 40] {
            let q = signer.sign_text(&text(t)).vector;
            for tau in [0.3, 0.6, 0.9, 1.0] {
                let tau = Threshold::new(tau).unwrap();
                let got = searcher.query(&q, tau).map_err(|e| format!("query failed: {e}"))?;
                let want = oracle::query(docs.iter().copied(), &q, Similarity::MultisetJaccard, tau);
                if got != want {
                    return Err(format!("query {t} at {tau:?} (warmed up: {warmed}): index {got:?}, oracle {want:?}"));
                }
            }
        }
    }
    let tau = Threshold::new(0.6).unwrap();
    let mut got = Vec::new();
    searcher.self_join(tau, |p| got.push(p)).map_err(|e| format!("self-join failed: {e}"))?;
    got.sort_unstable_by_key(|p| (p.a, p.b));
    let want = oracle::self_join(&docs, Similarity::MultisetJaccard, tau);
    if got != want {
        return Err(format!("self-join at {tau:?}: index {got:?}, oracle {want:?}"));
    }
    Ok(state)
}

/// Decodes two bytes into a step (keys 0..12, texts 0..22; the high
/// nibble of `op` gives `insert_if_new`'s τ, 0.25..=1.0).
fn decode_step(op: u8, arg: u8) -> Step {
    let (k, t) = (arg % 12, arg / 12 % 48);
    match op % 16 {
        0..=4 => Step::Insert(k, t),
        5 => Step::InsertIfNew(k, t, 25 + 5 * (op >> 4)),
        6 | 7 => Step::Replace(k, t),
        8 | 9 => Step::Delete(k),
        10 | 11 => Step::Commit,
        12 => Step::Abort,
        13 => Step::Flush,
        14 => Step::Optimize,
        _ => Step::Reopen,
    }
}

/// The body of the `ops` fuzz target. Bytes 0-1: the mutating operation
/// to crash before (0xFFFF: none); byte 2: the crash mode; then pairs of
/// bytes, each a step. Runs the steps on a `FaultStorage` and checks the
/// index against the model: after a crash with [`check_recovered`],
/// otherwise it must hold exactly the acknowledged state. Panics on any
/// difference (a fuzz finding).
pub fn fuzz_ops(data: &[u8]) {
    let [c0, c1, mode, rest @ ..] = data else { return };
    let crash_at = u64::from(u16::from_le_bytes([*c0, *c1]));
    let mode = CrashMode::ALL[usize::from(*mode % 3)];
    let steps: Vec<Step> = rest.chunks_exact(2).take(64).map(|p| decode_step(p[0], p[1])).collect();
    let fault = if crash_at == 0xFFFF { Fault::None } else { Fault::Crash(crash_at, mode) };
    let storage = FaultStorage::new(MemStorage::new(), fault);
    let outcome = run(Arc::new(storage.clone()), Start::Create, Model::new(), &steps);
    match storage.crash_image() {
        Some(image) => {
            if let Err(e) = check_recovered(Arc::new(image), &outcome) {
                panic!("after a crash at {crash_at} ({mode:?}) in {steps:?}: {e}");
            }
        }
        None => {
            assert_eq!(outcome.error, None, "no fault, yet an error in {steps:?}");
            let found = check_recovered(Arc::new(storage.inner().deep_copy()), &outcome)
                .unwrap_or_else(|e| panic!("{steps:?}: {e}"));
            assert_eq!(found, outcome.acked);
        }
    }
}
