//! Fault injection through the storage seam: a crash at every mutating I/O
//! operation of a reference workload (process exit, power loss, torn
//! write), a second crash during recovery, an I/O error and a short write
//! at every operation, and a full disk. After each, the index must reopen,
//! verify, hold exactly what was acknowledged and answer exact queries as
//! the oracle does.
//!
//! `NEARDEX_SWEEP_STRIDE=N` checks every Nth recovery crash point only
//! (default 1: all of them).

#[path = "common/workload.rs"]
mod workload;

use std::sync::Arc;

use neardex::store::{CrashMode, Fault, FaultStorage, FsStorage, Index, IndexError, IndexOptions, MemStorage, Storage};
use workload::{check_recovered, reference_steps, run, Model, Outcome, Start, Step};

fn faulty(fault: Fault) -> (FaultStorage, Arc<dyn Storage>) {
    let storage = FaultStorage::new(MemStorage::new(), fault);
    let dyn_storage: Arc<dyn Storage> = Arc::new(storage.clone());
    (storage, dyn_storage)
}

/// Mutating and all operations of the clean reference run.
fn reference_counts() -> (u64, u64) {
    let (storage, dyn_storage) = faulty(Fault::None);
    let outcome = run(dyn_storage, Start::Create, Model::new(), &reference_steps());
    assert_eq!(outcome.error, None);
    let (ops, mutations) = storage.counts();
    (ops, mutations)
}

#[test]
fn the_reference_workload_gives_the_same_index_on_every_storage() {
    let steps = reference_steps();
    let mem = MemStorage::new();
    let outcome = run(Arc::new(mem.clone()), Start::Create, Model::new(), &steps);
    assert_eq!(outcome.error, None);
    assert!(outcome.acked.len() > 10, "the workload keeps documents: {}", outcome.acked.len());
    // insert_if_new both adds (k53, k57) and refuses (k52, k54, k56, k58).
    assert_eq!(outcome.refused, 4);
    for key in ["k53", "k57"] {
        assert!(outcome.acked.contains_key(key), "{key} was added");
    }
    check_recovered(Arc::new(mem), &outcome).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn Storage> = Arc::new(FsStorage::new(dir.path()));
    let on_disk = run(Arc::clone(&fs), Start::Create, Model::new(), &steps);
    assert_eq!(on_disk.acked, outcome.acked);
    check_recovered(fs, &on_disk).unwrap();
    let index = Index::open(dir.path()).unwrap();
    let stats = index.stats().unwrap();
    assert!(stats.segments >= 1 && stats.pending >= 1, "segments and a delta: {stats:?}");
}

/// Recovery after a crash: reopen, verify, continue with one more batch and
/// a flush. Returns the outcome of that continuation.
fn recover_and_continue(storage: Arc<dyn Storage>, state: Model) -> Outcome {
    let more = [Step::Insert(60, 3), Step::Delete(1), Step::Replace(7, 9), Step::Commit, Step::Flush];
    run(storage, Start::Recover, state, &more)
}

/// Crashes at every mutating operation in `mode`, each followed by a
/// second crash during recovery; returns (crash points, of which the
/// interrupted commit landed, second crashes).
fn sweep(mode: CrashMode, mutations: u64, stride: u64) -> (u64, u64, u64) {
    let steps = reference_steps();
    let (mut first, mut landed, mut second) = (0, 0, 0);
    for n in 0..mutations {
        let (storage, dyn_storage) = faulty(Fault::Crash(n, mode));
        let outcome = run(dyn_storage, Start::Create, Model::new(), &steps);
        let image = storage.crash_image().unwrap_or_else(|| panic!("crash {n} {mode:?} never happened"));
        let state = check_recovered(Arc::new(image.deep_copy()), &outcome)
            .unwrap_or_else(|e| panic!("crash before mutating operation {n} ({mode:?}): {e}"));
        first += 1;
        landed += u64::from(outcome.in_flight.as_ref() == Some(&state));
        // A second crash, during recovery and the work that follows it.
        let counting = FaultStorage::new(image.deep_copy(), Fault::None);
        let cont = recover_and_continue(Arc::new(counting.clone()), state.clone());
        assert_eq!(cont.error, None, "recovery after crash {n} ({mode:?}) fails");
        let (_, recovery_mutations) = counting.counts();
        for m in (0..recovery_mutations).filter(|m| (m + n) % stride == 0) {
            let mode2 = CrashMode::ALL[((n + m) % 3) as usize];
            let again = FaultStorage::new(image.deep_copy(), Fault::Crash(m, mode2));
            let outcome2 = recover_and_continue(Arc::new(again.clone()), state.clone());
            let image2 = again.crash_image().expect("second crash happened");
            check_recovered(Arc::new(image2), &outcome2)
                .unwrap_or_else(|e| panic!("crash {n} ({mode:?}), then crash {m} ({mode2:?}) during recovery: {e}"));
            second += 1;
        }
    }
    (first, landed, second)
}

#[test]
fn crash_at_every_io_operation_loses_nothing_acknowledged() {
    let stride: u64 = std::env::var("NEARDEX_SWEEP_STRIDE").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let (_, mutations) = reference_counts();
    assert!(mutations > 50, "the workload does real I/O: {mutations} mutating operations");
    let results: Vec<(u64, u64, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> =
            CrashMode::ALL.into_iter().map(|mode| scope.spawn(move || sweep(mode, mutations, stride))).collect();
        handles.into_iter().map(|h| h.join().expect("sweep thread")).collect()
    });
    let first: u64 = results.iter().map(|r| r.0).sum();
    let landed: u64 = results.iter().map(|r| r.1).sum();
    let second: u64 = results.iter().map(|r| r.2).sum();
    eprintln!(
        "crash sweep: {mutations} mutating operations × 3 modes = {first} crash points \
         ({landed} with the interrupted commit landed), {second} second crashes during recovery"
    );
    assert_eq!(first, 3 * mutations);
    assert!(landed > 0 && landed < first, "both sides of the commit point are exercised");
}

#[test]
fn an_io_error_or_short_write_at_any_operation_is_typed_and_loses_nothing() {
    let (ops, _) = reference_counts();
    let steps = reference_steps();
    let (mut failed, mut short) = (0u64, 0u64);
    for n in 0..ops {
        for fault in [Fault::Fail(n), Fault::ShortWrite(n)] {
            let (storage, dyn_storage) = faulty(fault);
            let outcome = run(dyn_storage, Start::Create, Model::new(), &steps);
            if !storage.triggered() {
                continue; // a short write at an operation that is not a write
            }
            // The process lives on: it dropped the index and opens it again.
            check_recovered(Arc::new(storage.inner().deep_copy()), &outcome)
                .unwrap_or_else(|e| panic!("{fault:?} ({:?}): {e}", outcome.error));
            match fault {
                Fault::Fail(_) => failed += 1,
                _ => short += 1,
            }
        }
    }
    eprintln!("I/O errors injected at {failed} of {ops} operations, short writes at {short} writes");
    assert_eq!(failed, ops);
    assert!(short > 20, "short writes were injected: {short}");
}

#[test]
fn a_full_disk_is_a_typed_error_and_ingest_resumes_when_space_returns() {
    // Flushes every 5 documents: the disk may fill during a flush.
    fill_the_disk(IndexOptions { flush_threshold: 5, ..IndexOptions::default() }, false);
    // No flushes: the disk fills during a commit.
    fill_the_disk(IndexOptions { flush_threshold: usize::MAX, ..IndexOptions::default() }, true);
    // Flushes on the background thread, which may hit the full disk first.
    fill_the_disk(IndexOptions { flush_threshold: 5, background_maintenance: true, ..IndexOptions::default() }, false);
}

fn fill_the_disk(options: IndexOptions, commit_fails: bool) {
    let mem = MemStorage::new();
    let storage = FaultStorage::new(mem.clone(), Fault::None);
    let dyn_storage: Arc<dyn Storage> = Arc::new(storage.clone());
    let index = Index::create_in(Arc::clone(&dyn_storage), neardex::SignatureConfig::default(), options).unwrap();
    storage.set_fault(Fault::Capacity(mem.total_len() + 3 * 1024 * 1024));
    let mut acked = Vec::new();
    // The key of a commit that failed: redb may fail a commit after its
    // commit point (it frees pages after it, and may have to grow the file
    // to do so), so the commit may have landed. It was not acknowledged.
    let mut in_flight = None;
    let err = loop {
        let n = acked.len();
        let mut w = match index.writer() {
            Ok(w) => w,
            Err(e) => break e,
        };
        let key = format!("doc{n}");
        let body = format!("{} number {n}", workload::text((n % 200) as u8));
        if let Err(e) = w.insert(&key, neardex::store::Document::Text(&body), Default::default()) {
            break e;
        }
        match w.commit() {
            Ok(_) => acked.push(key),
            Err(e) => {
                in_flight = Some(key);
                break e;
            }
        }
        assert!(n < 100_000, "the disk never filled");
    };
    // The commit that fills the disk fails with DiskFull; or the flush after
    // a commit does (the commit stands) and the catalog then asks to be
    // reopened.
    match &err {
        IndexError::DiskFull { .. } => {}
        IndexError::ReopenRequired { .. } if !commit_fails => {
            // (A background flush stores its error when its job ends.)
            index.wait_for_maintenance();
            let flush = index.maintenance_error().expect("the failed flush is reported");
            assert!(flush.contains("disk full"), "{flush}");
        }
        other => panic!("untyped: {other}"),
    }
    assert!(acked.len() > 10, "ingest ran before the disk filled: {}", acked.len());
    drop(index);
    // Still full: the index opens and holds everything acknowledged.
    let index = Index::open_in(Arc::clone(&dyn_storage), options).unwrap();
    let searcher = index.searcher().unwrap();
    for key in &acked {
        assert!(searcher.get(key).unwrap().is_some(), "{key} lost");
    }
    let landed = match &in_flight {
        Some(key) => searcher.get(key).unwrap().is_some(),
        None => false,
    };
    eprintln!("full disk: {} commits acknowledged, then \"{err}\"; the failed commit landed: {landed}", acked.len());
    drop((searcher, index));
    // Space returns: ingest resumes.
    storage.set_fault(Fault::None);
    let index = Index::open_in(dyn_storage, options).unwrap();
    let mut w = index.writer().unwrap();
    w.insert("after", neardex::store::Document::Text(&workload::text(3)), Default::default()).unwrap();
    w.commit().unwrap();
    index.verify().unwrap();
    // Everything acknowledged, the document after, and the failed commit's
    // document if it landed: nothing else.
    assert_eq!(index.searcher().unwrap().len(), acked.len() as u64 + 1 + u64::from(landed));
}

/// An index whose keys table has a repack to do at its compaction: long
/// keys (so that the table is most of the catalog) inserted out of order
/// (decimal numbers first, which do not ascend as text), in 8 commits.
fn index_with_unpacked_keys(options: IndexOptions) -> (Vec<String>, MemStorage, FaultStorage, Index) {
    let keys: Vec<String> = (0..2_000).map(|n| format!("{n}-{}", "k".repeat(200))).collect();
    let mem = MemStorage::new();
    let storage = FaultStorage::new(mem.clone(), Fault::None);
    let index = Index::create_in(Arc::new(storage.clone()), neardex::SignatureConfig::default(), options).unwrap();
    for chunk in keys.chunks(250) {
        let mut w = index.writer().unwrap();
        for (n, key) in chunk.iter().enumerate() {
            w.insert(key, neardex::store::Document::Text(&workload::text(n as u8)), Default::default()).unwrap();
        }
        w.commit().unwrap();
    }
    (keys, mem, storage, index)
}

/// The index in `storage`, which must open with every one of `keys`.
fn opens_with_every_key(storage: Arc<dyn Storage>, keys: &[String], options: IndexOptions, what: &str) -> Index {
    let index = Index::open_in(storage, options).unwrap_or_else(|e| panic!("{what}: {e}"));
    let searcher = index.searcher().unwrap();
    assert_eq!(searcher.len(), keys.len() as u64, "{what}");
    for key in keys {
        assert!(searcher.get(key).unwrap().is_some(), "{what}: a key lost");
    }
    drop(searcher);
    index
}

/// After a compaction that met a fault: the index in `storage` opens with
/// every one of `keys` and verifies, and with the fault gone one
/// compaction leaves a catalog no larger than `compacted` bytes (and a
/// sixteenth), the size one without a fault left.
fn compaction_recovers(storage: MemStorage, keys: &[String], options: IndexOptions, compacted: u64, what: &str) {
    let index = opens_with_every_key(Arc::new(storage.clone()), keys, options, what);
    index.verify().unwrap_or_else(|e| panic!("{what}: {e}"));
    index.compact_catalog().unwrap();
    index.verify().unwrap();
    let len = storage.read_file(neardex::store::CATALOG_FILE).unwrap().len() as u64;
    assert!(len <= compacted + compacted / 16, "{what}: the catalog {len} bytes against {compacted}");
}

/// The catalog's size after a compaction that met no fault, and the
/// loaded index's counts of operations and of mutating ones.
fn compaction_reference(options: IndexOptions) -> (u64, u64, (u64, u64), (u64, u64)) {
    let (_, mem, storage, index) = index_with_unpacked_keys(options);
    let loaded = mem.read_file(neardex::store::CATALOG_FILE).unwrap().len() as u64;
    let before = storage.counts();
    assert!(index.compact_catalog().unwrap());
    let after = storage.counts();
    (loaded, mem.read_file(neardex::store::CATALOG_FILE).unwrap().len() as u64, before, after)
}

/// `compact_catalog` on a full disk: the compaction needs room to move
/// the catalog's pages, and its repack of the keys table room for new
/// copies of the table. With every margin of free space from none to
/// three catalogs' worth, the call returns or fails with a typed error,
/// and the index reopens with every document; once space returns a
/// compaction leaves the catalog as small as one that never met a full
/// disk.
#[test]
fn compacting_the_catalog_on_a_full_disk_is_typed_and_loses_nothing() {
    let options = IndexOptions { flush_threshold: 500, ..IndexOptions::default() };
    let (loaded, compacted, ..) = compaction_reference(options);
    let mut outcomes = std::collections::BTreeSet::new();
    for step in 0..=24u64 {
        let (keys, mem, storage, index) = index_with_unpacked_keys(options);
        storage.set_fault(Fault::Capacity(mem.total_len() + loaded * step / 8));
        match index.compact_catalog() {
            Ok(_) => outcomes.insert("compacted".to_owned()),
            Err(IndexError::DiskFull { context }) => outcomes.insert(format!("disk full while {context}")),
            Err(IndexError::ReopenRequired { context }) => outcomes.insert(format!("reopen required: {context}")),
            Err(other) => panic!("untyped: {other}"),
        };
        drop(index);
        // Still full: the index opens with every document.
        drop(opens_with_every_key(Arc::new(storage.clone()), &keys, options, &format!("still full, step {step}")));
        // Space returns (the keys repacked even when the file had been
        // compacted already).
        storage.set_fault(Fault::None);
        compaction_recovers(mem, &keys, options, compacted, &format!("full disk, step {step}"));
    }
    eprintln!("catalog {loaded} bytes, compacted {compacted}; outcomes on the full disk: {outcomes:?}");
    // The sweep reached the repack: some margins let the compaction move
    // the pages but not the repack copy the table, and some let both.
    assert!(outcomes.contains("compacted"), "{outcomes:?}");
    assert!(outcomes.iter().any(|o| o.contains("repack")), "{outcomes:?}");
}

/// An I/O error at every operation of `compact_catalog` (its compactions
/// and the keys table's repack), and a power cut before every mutating
/// one: the index reopens with every document, and a compaction then
/// leaves the catalog as small as one that met no fault.
#[test]
fn an_io_error_or_a_crash_anywhere_in_a_compaction_loses_nothing() {
    use rayon::prelude::*;
    let options = IndexOptions { flush_threshold: 500, ..IndexOptions::default() };
    let (_, compacted, before, after) = compaction_reference(options);
    let failures = (before.0..after.0).into_par_iter().map(|op| {
        let (keys, mem, storage, index) = index_with_unpacked_keys(options);
        assert_eq!(storage.counts(), before, "the load is deterministic");
        storage.set_fault(Fault::Fail(op));
        let _ = index.compact_catalog();
        let failed = storage.triggered();
        drop(index);
        compaction_recovers(mem, &keys, options, compacted, &format!("I/O error at operation {op}"));
        usize::from(failed)
    });
    let crashes = (before.1..after.1).into_par_iter().map(|mutation| {
        let (keys, _, storage, index) = index_with_unpacked_keys(options);
        storage.set_fault(Fault::Crash(mutation, CrashMode::PowerLoss));
        assert!(index.compact_catalog().is_err(), "the crash at mutation {mutation} stops the compaction");
        drop(index);
        let image = storage.crash_image().expect("the crash happened");
        compaction_recovers(image, &keys, options, compacted, &format!("power cut at mutation {mutation}"));
        1
    });
    let (failed, crashed): (usize, usize) = (failures.sum(), crashes.sum());
    eprintln!("compaction: {failed} I/O errors, {crashed} power cuts, each recovered");
    assert_eq!(failed as u64, after.0 - before.0);
    assert_eq!(crashed as u64, after.1 - before.1);
}

/// A flush whose segment file cannot be written, synced or renamed (an I/O
/// error at each of its operations in turn) leaves no file behind: each
/// retry takes a new segment id, so leftovers would pile up on a failing
/// disk. The commit stands, its documents stay pending, and the next flush
/// succeeds.
#[test]
fn a_flush_that_fails_writing_its_segment_leaves_no_file() {
    let options = IndexOptions { flush_threshold: 40, background_maintenance: false, ..IndexOptions::default() };
    let setup = || {
        let mem = MemStorage::new();
        let storage = FaultStorage::new(mem, Fault::None);
        let dyn_storage: Arc<dyn Storage> = Arc::new(storage.clone());
        let index = Index::create_in(Arc::clone(&dyn_storage), neardex::SignatureConfig::default(), options).unwrap();
        let mut w = index.writer().unwrap();
        for n in 0..39 {
            let body = format!("{} number {n}", workload::text((n % 200) as u8));
            w.insert(&format!("doc{n}"), neardex::store::Document::Text(&body), Default::default()).unwrap();
        }
        w.commit().unwrap();
        (storage, dyn_storage, index)
    };
    let last = |index: &Index, key: &str| {
        let mut w = index.writer().unwrap();
        w.insert(key, neardex::store::Document::Text(&workload::text(7)), Default::default()).unwrap();
        w.commit()
    };
    let segment_files =
        |storage: &Arc<dyn Storage>| storage.list().unwrap().into_iter().filter(|n| n.starts_with("seg-")).count();
    // The operations of the commit that flushes.
    let (storage, dyn_storage, index) = setup();
    let (first, _) = storage.counts();
    assert_eq!(last(&index, "doc39").unwrap(), 0);
    let (end, _) = storage.counts();
    assert_eq!(segment_files(&dyn_storage), 1);
    drop(index);
    let mut failed_writes = 0;
    for op in first..end {
        let (storage, dyn_storage, index) = setup();
        storage.set_fault(Fault::Fail(op));
        let Ok(pending) = last(&index, "doc39") else { continue };
        let Some(error) = index.maintenance_error() else { continue };
        let in_the_file_write = ["writing seg-", "syncing seg-", "renaming seg-"].iter().any(|c| error.contains(c));
        if in_the_file_write {
            failed_writes += 1;
            assert_eq!(pending, 40, "op {op}: {error}");
            assert_eq!(segment_files(&dyn_storage), 0, "op {op} left a file: {error}");
            // The next commit retries the flush, with another id, and succeeds.
            assert_eq!(last(&index, "doc40").unwrap(), 0, "op {op}");
            assert_eq!(segment_files(&dyn_storage), 1, "op {op}");
            index.verify().unwrap();
            assert_eq!(index.searcher().unwrap().len(), 41);
        }
    }
    assert!(failed_writes >= 3, "only {failed_writes} operations failed the segment write");
}

#[test]
fn a_bulk_commit_that_fails_at_any_operation_acknowledges_nothing_and_leaves_no_file() {
    let options = IndexOptions { flush_threshold: 1000, background_maintenance: false, ..IndexOptions::default() };
    let setup = || {
        let storage = FaultStorage::new(MemStorage::new(), Fault::None);
        let dyn_storage: Arc<dyn Storage> = Arc::new(storage.clone());
        let index = Index::create_in(Arc::clone(&dyn_storage), neardex::SignatureConfig::default(), options).unwrap();
        let mut w = index.writer().unwrap();
        w.insert("pending", neardex::store::Document::Text(&workload::text(3)), Default::default()).unwrap();
        w.commit().unwrap();
        (storage, dyn_storage, index)
    };
    let bulk = |index: &Index| -> Result<usize, IndexError> {
        let mut w = index.bulk_writer()?;
        for n in 0..30u8 {
            let body = format!("{} number {n}", workload::text(n));
            w.insert(&format!("bulk{n}"), neardex::store::Document::Text(&body), Default::default())?;
        }
        w.commit()
    };
    let segment_files =
        |storage: &Arc<dyn Storage>| storage.list().unwrap().into_iter().filter(|n| n.starts_with("seg-")).count();
    let (storage, dyn_storage, index) = setup();
    let (first, _) = storage.counts();
    assert_eq!(bulk(&index).unwrap(), 1, "the earlier document stays pending");
    let (end, _) = storage.counts();
    assert_eq!(segment_files(&dyn_storage), 1);
    assert_eq!(index.stats().unwrap().segments, 1);
    drop(index);
    let mut failed = 0;
    for op in first..end {
        let (storage, dyn_storage, index) = setup();
        storage.set_fault(Fault::Fail(op));
        let outcome = bulk(&index);
        storage.set_fault(Fault::None);
        let searcher = index.searcher().unwrap();
        match outcome {
            Ok(_) => assert_eq!(searcher.len(), 31, "op {op}"),
            Err(e) => {
                failed += 1;
                // Nothing acknowledged, and the index as before; a file the
                // commit may have left is unlisted and goes at the next open.
                assert!(!matches!(e, IndexError::Corrupted { .. }), "op {op}: {e}");
                assert_eq!(searcher.len(), 1, "op {op}: {e}");
                assert!(searcher.get("bulk0").unwrap().is_none(), "op {op}");
                drop((searcher, index));
                let reopened = Index::open_in(Arc::clone(&dyn_storage), options).unwrap();
                assert_eq!(segment_files(&dyn_storage), reopened.stats().unwrap().segments as usize, "op {op}");
                let reader = reopened.searcher().unwrap();
                assert!(reader.len() == 1 || reader.len() == 31, "op {op}: {}", reader.len());
                reopened.verify().unwrap();
                // The batch again, through a bulk writer, lands.
                if reader.len() == 1 {
                    drop(reader);
                    assert_eq!(bulk(&reopened).unwrap(), 1, "op {op}");
                    assert_eq!(reopened.searcher().unwrap().len(), 31, "op {op}");
                    reopened.verify().unwrap();
                }
            }
        }
    }
    assert!(failed >= 5, "only {failed} operations failed the bulk commit");
}
