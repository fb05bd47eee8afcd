//! Concurrency stress with real processes: one writer process ingests,
//! deletes, flushes and merges while reader processes reload and query.
//! Every snapshot a reader sees must be exactly the state after one of the
//! writer's commits (no half commit), and every exact query must equal the
//! brute-force oracle over that state, computed by the reader from the
//! writer's deterministic schedule.
//!
//! The children are this test binary re-run with `NEARDEX_STRESS_ROLE` set.
//! `NEARDEX_STRESS_SECONDS=N` runs longer (default 6).

use std::collections::{BTreeMap, HashMap};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use neardex::oracle;
use neardex::store::{Document, Index, IndexOptions, Metadata};
use neardex::{SignatureConfig, SignatureVector, Signer, Similarity, Threshold};

const ROLE: &str = "NEARDEX_STRESS_ROLE";
const DIR: &str = "NEARDEX_STRESS_DIR";
const PER_BATCH: u64 = 8;

fn seconds() -> u64 {
    std::env::var("NEARDEX_STRESS_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(6)
}

const WORDS: [&str; 24] = [
    "river", "market", "council", "school", "harbour", "station", "bridge", "garden", "museum", "library", "festival",
    "railway", "hospital", "airport", "factory", "stadium", "theatre", "castle", "village", "forest", "island",
    "valley", "tower", "square",
];

/// The text of document `i` of batch `b`: one of 24 stories, with a word
/// that varies by batch, so documents of a story are near-duplicates.
fn text(b: u64, i: u64) -> String {
    let story = ((b * PER_BATCH + i) % 24) as usize;
    let (w1, w2, w3) = (WORDS[story], WORDS[(story + 5) % 24], WORDS[(b % 24) as usize]);
    format!(
        "The {w1} near the {w2} was the subject of a long report in the paper this week. It said that the {w1} \
         would be closed for the winter and that the {w3} would be open on the first day of the spring, when the \
         people of the town are expected to come back to the {w2} in large numbers."
    )
}

fn key(b: u64, i: u64) -> String {
    format!("b{b}-{i}")
}

/// Live keys after the writer's commit of batch `last`: every document of
/// batches 0..=last, except document 0 of batch x-3, deleted by batch x.
fn live_after(last: u64) -> Vec<(u64, u64)> {
    let mut live = Vec::new();
    for b in 0..=last {
        for i in 0..PER_BATCH {
            let deleted = i == 0 && b + 3 <= last;
            if !deleted {
                live.push((b, i));
            }
        }
    }
    live
}

#[test]
fn stress_child() {
    let (Ok(role), Ok(dir)) = (std::env::var(ROLE), std::env::var(DIR)) else { return };
    let deadline = Instant::now() + Duration::from_secs(seconds());
    match role.as_str() {
        "writer" => writer(&dir, deadline),
        _ => reader(&dir, deadline),
    }
}

fn writer(dir: &str, deadline: Instant) {
    let index =
        Index::open_with(dir, IndexOptions { flush_threshold: 24, ..IndexOptions::default() }).expect("writer opens");
    let mut b = 0;
    while Instant::now() < deadline {
        let mut w = index.writer().unwrap();
        for i in 0..PER_BATCH {
            w.insert(&key(b, i), Document::Text(&text(b, i)), Metadata::default()).unwrap();
        }
        if b >= 3 {
            assert!(w.delete(&key(b - 3, 0)).unwrap());
        }
        w.commit().unwrap();
        if b % 10 == 9 {
            index.optimize().unwrap();
        }
        b += 1;
    }
    println!("writer committed {b} batches");
}

fn reader(dir: &str, deadline: Instant) {
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    let index = Index::open_read_only(dir).expect("reader opens");
    let mut vectors: HashMap<(u64, u64), SignatureVector> = HashMap::new();
    let (mut snapshots, mut queries, mut distinct) = (0u64, 0u64, std::collections::BTreeSet::new());
    while Instant::now() < deadline {
        index.reload().unwrap();
        let searcher = index.searcher().unwrap();
        // Which commit is this? The highest batch present.
        let mut found: BTreeMap<String, (u64, SignatureVector)> = BTreeMap::new();
        let mut ids = Vec::new();
        searcher.for_each_live(|id, _| ids.push(id)).unwrap();
        for id in ids {
            let doc = searcher.get_by_id(id).unwrap().expect("live id has a document");
            found.insert(doc.key, (doc.id, doc.vector));
        }
        let last = found.keys().filter_map(|k| k[1..].split('-').next()?.parse::<u64>().ok()).max();
        let Some(last) = last else { continue };
        let expected = live_after(last);
        assert_eq!(found.len(), expected.len(), "snapshot after batch {last} is not a whole commit");
        let mut docs = Vec::new();
        for (b, i) in expected {
            let vector = vectors.entry((b, i)).or_insert_with(|| signer.sign_text(&text(b, i)).vector);
            let (id, stored) = found.get(&key(b, i)).unwrap_or_else(|| panic!("{} missing after {last}", key(b, i)));
            assert_eq!(stored, vector, "{} has another vector", key(b, i));
            docs.push((*id, vector.clone()));
        }
        for (q, tau) in [(last, 0.5), (last / 2, 0.8), (last + 1, 0.3)] {
            let query = signer.sign_text(&text(q, q % PER_BATCH)).vector;
            let tau = Threshold::new(tau).unwrap();
            let got = searcher.query(&query, tau).unwrap();
            let want = oracle::query(docs.iter().map(|(id, v)| (*id, v)), &query, Similarity::MultisetJaccard, tau);
            assert_eq!(got, want, "query {q} at {tau:?} after batch {last}");
            queries += 1;
        }
        snapshots += 1;
        distinct.insert(last);
    }
    println!("reader checked {snapshots} snapshots ({} distinct commits), {queries} queries", distinct.len());
}

fn spawn(role: &str, dir: &std::path::Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "stress_child", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(DIR, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn child")
}

#[test]
fn one_writer_and_three_readers_in_separate_processes_agree_with_the_oracle() {
    let dir = tempfile::tempdir().unwrap();
    Index::create(dir.path(), SignatureConfig::default()).unwrap();
    let writer = spawn("writer", dir.path());
    std::thread::sleep(Duration::from_millis(200));
    let readers: Vec<_> = (0..3).map(|_| spawn("reader", dir.path())).collect();
    let mut reports = Vec::new();
    for child in std::iter::once(writer).chain(readers) {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "child failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        // libtest may print "test stress_child ... " before the report.
        let at = stdout.find("writer committed").or_else(|| stdout.find("reader checked"));
        let report = at.and_then(|at| stdout[at..].lines().next()).map(str::to_owned);
        reports.push(report.expect("child reported"));
    }
    for r in &reports {
        eprintln!("{r}");
    }
    let batches: u64 = reports[0].split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(batches >= 20, "the writer made progress: {batches} batches");
    for r in &reports[1..] {
        let distinct: u64 = r.split('(').nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
        assert!(distinct >= 2, "a reader saw the index change: {r}");
    }
    let index = Index::open(dir.path()).unwrap();
    index.verify().unwrap();
}
