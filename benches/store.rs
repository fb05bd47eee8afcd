//! Durable ingest and open time of the persistent index.
//!
//! Run: `cargo bench --bench store` (NEARDEX_BENCH_DOCS=N to change the
//! corpus size; default 200,000). The corpus: ~5 KB HTML pages built from
//! real English sentences (the gold texts of ../shared/data), one in ten a
//! near-copy of an earlier page. Reported, all from one run:
//!
//! - baseline: generating and signing the pages on both cores, no index;
//! - ingest: the same, with one writer inserting into an index, 1,000
//!   documents per durable commit, flushes and merges included: once with
//!   the defaults (maintenance inside the commits, one `insert` a
//!   document), once with background maintenance and one `insert_batch` a
//!   commit (the open-time figures use this index);
//! - for each ingest, the CPU it used (of the two cores; the writer thread,
//!   the background flush and merge threads), `commit()` latencies (p50,
//!   p99, max) and the process's peak resident memory so far
//!   (`NEARDEX_BENCH_RUNS=background` runs only the second ingest);
//! - the crawler's call: every page through `Writer::insert_if_new` at
//!   τ = 0.8, 1,000 a commit, with how many it refused (one page in ten is
//!   a near-copy), then each commit's pages through one
//!   `Writer::insert_batch_if_new`, and the ratio of the two
//!   (`NEARDEX_BENCH_RUNS=if_new` runs only these);
//! - a recrawl that finds every page unchanged: each page replaced (same
//!   key, same text) through one bulk writer, after the second ingest
//!   (`NEARDEX_BENCH_RUNS=background,replace`);
//! - the index's bytes on disk against its signature vectors, keys and
//!   metadata, after the ingest and after `Index::compact_catalog`;
//! - open time and resident memory right after `Index::open_read_only`,
//!   measured in a fresh child process (median of 5 opens), and the time
//!   of a writable open, which also checks every catalog page (median of 3).

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::mpsc::sync_channel;
use std::time::Instant;

use neardex::store::{Document, Index, IndexOptions, InsertIfNew, Metadata, Writer};
use neardex::{DocumentSignature, SignatureConfig, Signer, Threshold};

const BATCH: usize = 1_000;

struct Corpus {
    sentences: Vec<String>,
}

impl Corpus {
    fn load() -> Corpus {
        let data = common::shared_data().expect("the store benchmark needs ../shared/data for its sentences");
        let mut sentences = Vec::new();
        for page in common::article_benchmark(&data) {
            for s in page.gold.split_inclusive(". ") {
                let s = s.trim();
                if s.len() > 40 && s.len() < 400 {
                    sentences.push(s.to_owned());
                }
            }
        }
        Corpus { sentences }
    }

    /// Page `n`: about 5 KB of HTML, deterministic in `n`.
    fn page(&self, n: u64) -> String {
        // Every tenth page copies page n - 7 with its first sentence changed.
        let (seed, edited) = if n % 10 == 9 && n >= 7 { (n - 7, true) } else { (n, false) };
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut html = format!(
            "<html><head><title>Story {seed}</title><script>var id = {seed};</script></head><body>\
             <nav><a href=\"/\">Home</a> | <a href=\"/news\">News</a> | <a href=\"/sport\">Sport</a></nav><article>"
        );
        let mut first = true;
        while html.len() < 5_000 {
            let sentence = &self.sentences[(next() % self.sentences.len() as u64) as usize];
            html.push_str("<p>");
            if first && edited {
                html.push_str("Updated: an editor has rewritten this opening line of the story.");
            } else {
                html.push_str(sentence);
            }
            first = false;
            html.push_str("</p>\n");
        }
        html.push_str("</article><footer>&copy; The Daily Example</footer></body></html>");
        html
    }
}

/// Generates and signs pages `0..n` on two threads, handing each signature
/// to `consume` in order of arrival.
/// Generates and signs pages `0..n` on two threads and hands them to
/// `consume` in the calling thread; returns the seconds the two threads
/// spent waiting for room in the queue (the consumer falling behind).
fn produce(corpus: &Corpus, signer: &Signer, n: u64, mut consume: impl FnMut(u64, DocumentSignature)) -> f64 {
    // Handed over 100 at a time: one channel operation per page costs a
    // visible share of the time in thread wake-ups.
    let (tx, rx) = sync_channel::<Vec<(u64, DocumentSignature)>>(64);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2u64)
            .map(|worker| {
                let tx = tx.clone();
                scope.spawn(move || {
                    let mut scratch = neardex::Scratch::default();
                    let mut chunk = Vec::with_capacity(100);
                    let mut blocked = 0.0;
                    for i in (worker..n).step_by(2) {
                        let page = corpus.page(i);
                        chunk.push((i, signer.sign_html_with(page.as_bytes(), &mut scratch)));
                        if chunk.len() == 100 {
                            let sending = Instant::now();
                            if tx.send(std::mem::take(&mut chunk)).is_err() {
                                break;
                            }
                            blocked += sending.elapsed().as_secs_f64();
                        }
                    }
                    let _ = tx.send(chunk);
                    blocked
                })
            })
            .collect();
        drop(tx);
        for (i, signature) in rx.into_iter().flatten() {
            consume(i, signature);
        }
        workers.into_iter().map(|w| w.join().expect("signing thread")).sum()
    })
}

/// The key page `i` is stored under.
fn page_key(i: u64) -> String {
    format!("https://news.example/{i}")
}

fn rss_kib() -> u64 {
    common::proc_status_kib("VmRSS")
}

/// CPU seconds (user + system) this process has used so far, all threads.
fn cpu_seconds() -> f64 {
    cpu_seconds_of("/proc/self/stat")
}

/// CPU seconds used by the calling thread, by the process's threads named
/// `neardex-mainten…` (the index's flush thread) and by those named
/// `neardex-merges` (its merge thread). The rayon threads that sort a
/// flush's postings and build a merge's two tables side by side are not
/// counted in either (`main` starts them, so they carry its name).
fn thread_cpu_seconds() -> (f64, f64, f64) {
    let (mut flushes, mut merges) = (0.0, 0.0);
    for task in std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.starts_with("neardex-mainten") {
            flushes += cpu_seconds_of(task.path().join("stat"));
        } else if comm.starts_with("neardex-merges") {
            merges += cpu_seconds_of(task.path().join("stat"));
        }
    }
    (cpu_seconds_of("/proc/thread-self/stat"), flushes, merges)
}

/// The process's peak resident memory (VmHWM), in MiB.
fn peak_rss_mib() -> u64 {
    common::proc_status_kib("VmHWM") / 1024
}

/// utime + stime of a `/proc/…/stat` file, in seconds.
fn cpu_seconds_of(path: impl AsRef<std::path::Path>) -> f64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // The fields after the command name (which may hold spaces): utime and
    // stime are the 12th and 13th, in clock ticks (100 a second on Linux).
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: Vec<f64> = rest.split_whitespace().skip(11).take(2).filter_map(|t| t.parse().ok()).collect();
    ticks.iter().sum::<f64>() / 100.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// In the child: open the index read-only 5 times and print the median
/// open time and the resident memory added by the last open; then the
/// median of 3 writable opens.
fn open_only(dir: &str) {
    let mut times = Vec::new();
    let mut added = 0;
    for _ in 0..5 {
        let before = rss_kib();
        let start = Instant::now();
        let index = Index::open_read_only(dir).expect("open");
        let searcher = index.searcher().expect("searcher");
        times.push(start.elapsed().as_secs_f64() * 1e3);
        added = rss_kib().saturating_sub(before);
        assert!(!searcher.is_empty());
        drop((searcher, index));
    }
    let read_only = median(times);
    // A writable open also checks the checksum of every catalog page
    // (redb's integrity check), so that a damaged catalog is an error and
    // not a panic; it is measured apart.
    let mut writable = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        let index = Index::open(dir).expect("open for writing");
        writable.push(start.elapsed().as_secs_f64() * 1e3);
        drop(index);
    }
    println!(
        "open_ms {read_only:.2} rss_added_kib {added} rss_total_kib {} writable_open_ms {:.1}",
        rss_kib(),
        median(writable)
    );
}

/// One durable ingest of pages `0..n` (signed on two threads, 1,000 per
/// commit), with inline or background maintenance; prints its figures and
/// returns its rate, directory and index.
fn ingest(
    corpus: &Corpus,
    signer: &Signer,
    n: u64,
    background: bool,
    baseline: f64,
) -> (f64, tempfile::TempDir, Index) {
    let dir = tempfile::tempdir_in(std::env::var("NEARDEX_BENCH_DIR").unwrap_or_else(|_| ".".into())).unwrap();
    let options = IndexOptions { background_maintenance: background, ..IndexOptions::default() };
    let index = Index::create_with(dir.path(), SignatureConfig::default(), options).unwrap();
    let start = Instant::now();
    let cpu_start = cpu_seconds();
    let writer_start = thread_cpu_seconds().0;
    let mut batch: Vec<(String, DocumentSignature)> = Vec::with_capacity(BATCH);
    let (mut logical, mut key_bytes) = (0u64, 0u64);
    let mut commit_secs = 0.0;
    let mut flush_secs = 0.0;
    let mut commit_times: Vec<f64> = Vec::new();
    let mut commit = |batch: &mut Vec<(String, DocumentSignature)>| {
        let mut w = index.writer().unwrap();
        if background {
            let docs = batch.iter().map(|(k, s)| (k.as_str(), Document::Signatures(s), Metadata::default()));
            w.insert_batch(docs).unwrap();
        } else {
            for (key, s) in batch.iter() {
                w.insert(key, Document::Signatures(s), Metadata::default()).unwrap();
            }
        }
        batch.clear();
        let committing = Instant::now();
        let pending = w.commit().unwrap();
        let spent = committing.elapsed().as_secs_f64();
        commit_secs += spent;
        commit_times.push(spent);
        if pending == 0 {
            flush_secs += spent;
        }
    };
    let blocked = produce(corpus, signer, n, |i, s| {
        let key = page_key(i);
        key_bytes += key.len() as u64;
        logical += s.vector.distinct() * 12;
        batch.push((key, s));
        if batch.len() == BATCH {
            commit(&mut batch);
        }
    });
    if !batch.is_empty() {
        commit(&mut batch);
    }
    // The ingest ends when every flush and merge has.
    index.wait_for_maintenance();
    assert_eq!(index.maintenance_error(), None);
    let wall = start.elapsed().as_secs_f64();
    let ingest = n as f64 / wall;
    let cpu = cpu_seconds() - cpu_start;
    let (writer_cpu, flush_cpu, merge_cpu) = thread_cpu_seconds();
    let writer_cpu = writer_cpu - writer_start;
    let stats = index.stats().unwrap();
    let mode = if background { "background maintenance, insert_batch" } else { "inline maintenance, insert" };
    println!(
        "ingest ({mode}): {n} pages, {BATCH} per durable commit, 2 signing threads + 1 writer: {ingest:.0} docs/s \
         ({:.2} of the baseline); {} segments, {} pending",
        ingest / baseline,
        stats.segments,
        stats.pending
    );
    let catalog = std::fs::metadata(dir.path().join("catalog.redb")).map(|m| m.len()).unwrap_or(0);
    println!(
        "  of which in commit(): {commit_secs:.1} s ({flush_secs:.1} s in commits that flushed inline) of {wall:.1} s; \
         CPU {cpu:.1} s ({:.0}% of 2 cores: writer thread {writer_cpu:.1} s, background flush thread \
         {flush_cpu:.1} s, merge thread {merge_cpu:.1} s); the signing threads waited {blocked:.1} s for \
         the writer; catalog {catalog} bytes, segments {} bytes; peak RSS of the process so far {} MiB",
        cpu / wall * 50.0,
        stats.bytes_on_disk - catalog,
        peak_rss_mib()
    );
    commit_times.sort_by(f64::total_cmp);
    let at = |q: f64| commit_times[((commit_times.len() - 1) as f64 * q) as usize] * 1e3;
    println!(
        "  commit() times: p50 {:.1} ms, p99 {:.1} ms, max {:.0} ms; {} of {} over 100 ms",
        at(0.5),
        at(0.99),
        at(1.0),
        commit_times.iter().filter(|&&t| t > 0.1).count(),
        commit_times.len()
    );
    let base = logical + key_bytes;
    println!(
        "  footprint: {} bytes on disk for {} bytes of vectors (12 B an entry) and keys: {:.2}x",
        stats.bytes_on_disk,
        base,
        stats.bytes_on_disk as f64 / base as f64
    );
    // At rest: the catalog's free space (its high-water mark of pending
    // documents) given back.
    let compacting = Instant::now();
    let compacted = index.compact_catalog().unwrap();
    let after = std::fs::metadata(dir.path().join("catalog.redb")).map(|m| m.len()).unwrap_or(0);
    let on_disk = stats.bytes_on_disk - catalog + after;
    println!(
        "  after Index::compact_catalog ({}, {:.0} ms): catalog {after} bytes, footprint {:.2}x",
        if compacted { "compacted" } else { "nothing to do" },
        compacting.elapsed().as_secs_f64() * 1e3,
        on_disk as f64 / base as f64
    );
    (ingest, dir, index)
}

/// A recrawl that finds every page unchanged: each replaced (the same key,
/// the same text) through one bulk writer and one durable commit. Every
/// staged page's exact-duplicate check meets the document it replaces,
/// which the writer has just deleted (until session 104 a list, searched
/// once a page: quadratic in the pages replaced).
fn replace_unchanged(corpus: &Corpus, signer: &Signer, n: u64, index: &Index, baseline: f64) {
    let start = Instant::now();
    let mut bulk = index.bulk_writer().unwrap();
    produce(corpus, signer, n, |i, s| {
        let key = page_key(i);
        bulk.replace(&key, Document::Signatures(&s), Metadata::default()).unwrap();
    });
    let staged = start.elapsed().as_secs_f64();
    bulk.commit().unwrap();
    index.wait_for_maintenance();
    assert_eq!(index.maintenance_error(), None);
    let wall = start.elapsed().as_secs_f64();
    let stats = index.stats().unwrap();
    assert_eq!((stats.documents, stats.deleted), (n, 0), "every page replaced once, the old segments dropped");
    println!(
        "replace, every page unchanged, one bulk writer: {:.0} docs/s ({:.2} of the baseline; staging {staged:.1} s, \
         the commit and merges {:.1} s); {} segments",
        n as f64 / wall,
        n as f64 / wall / baseline,
        wall - staged,
        stats.segments
    );
}

/// Every page through `Writer::insert_if_new` at τ = 0.8, 1,000 a durable
/// commit, maintenance inside the commits (the defaults); with `batched`,
/// each commit's pages through one `Writer::insert_batch_if_new`. Returns
/// the docs/s.
fn ingest_if_new(corpus: &Corpus, signer: &Signer, n: u64, baseline: f64, batched: bool) -> f64 {
    let dir = tempfile::tempdir_in(std::env::var("NEARDEX_BENCH_DIR").unwrap_or_else(|_| ".".into())).unwrap();
    let index = Index::create(dir.path(), SignatureConfig::default()).unwrap();
    let tau = Threshold::new(0.8).unwrap();
    let start = Instant::now();
    let mut writer = Some(index.writer().unwrap());
    let mut held: Vec<(String, DocumentSignature)> = Vec::with_capacity(BATCH);
    let mut refused = 0u64;
    let mut insert = |held: &mut Vec<(String, DocumentSignature)>, writer: &mut Option<Writer<'_>>| {
        let w = writer.as_mut().expect("a writer is open");
        if batched {
            let documents = held.iter().map(|(key, s)| (key.as_str(), Document::Signatures(s), Metadata::default()));
            for result in w.insert_batch_if_new(documents, tau) {
                refused += u64::from(matches!(result.unwrap(), InsertIfNew::Matches(_)));
            }
        } else {
            for (key, s) in held.iter() {
                let result = w.insert_if_new(key, Document::Signatures(s), Metadata::default(), tau);
                refused += u64::from(matches!(result.unwrap(), InsertIfNew::Matches(_)));
            }
        }
        held.clear();
        writer.take().expect("a writer is open").commit().unwrap();
    };
    produce(corpus, signer, n, |i, s| {
        held.push((page_key(i), s));
        if held.len() == BATCH {
            insert(&mut held, &mut writer);
            writer = Some(index.writer().unwrap());
        }
    });
    insert(&mut held, &mut writer);
    let wall = start.elapsed().as_secs_f64();
    let rate = n as f64 / wall;
    let how = if batched { "insert_batch_if_new, a commit's pages a call" } else { "insert_if_new, a page a call" };
    println!(
        "{how}, at 0.8: {n} pages, {BATCH} per durable commit: {rate:.0} docs/s ({:.2} of the baseline); \
         {refused} refused as near-duplicates of stored or staged pages",
        rate / baseline
    );
    rate
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--open-only") {
        open_only(&args[at + 1]);
        return;
    }
    if args.iter().any(|a| a == "--list") {
        return; // `cargo bench -- --list` asks benches for their names.
    }
    let n: u64 = std::env::var("NEARDEX_BENCH_DOCS").ok().and_then(|v| v.parse().ok()).unwrap_or(200_000);
    let corpus = Corpus::load();
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    // Start the global rayon pool (which segment builds use) from this
    // thread: a thread is named after the one that spawns it, and the CPU
    // figures below tell threads apart by name.
    neardex::store::segment::build_segment_file(0, 1, Vec::new());

    let start = Instant::now();
    let cpu_start = cpu_seconds();
    let mut signatures = 0u64;
    let _ = produce(&corpus, &signer, n, |_, s| signatures += s.vector.total());
    let wall = start.elapsed().as_secs_f64();
    let baseline = n as f64 / wall;
    println!(
        "baseline: generate + sign {n} pages on 2 threads: {baseline:.0} docs/s (CPU {:.0}% of 2 cores)",
        (cpu_seconds() - cpu_start) / wall * 50.0
    );

    // Inline maintenance and one insert call a document (the defaults),
    // then background maintenance with one insert_batch call a commit.
    // NEARDEX_BENCH_RUNS=background skips the first (for profiling).
    let runs = |name: &str| std::env::var("NEARDEX_BENCH_RUNS").map_or(true, |runs| runs.contains(name));
    if runs("inline") {
        drop(ingest(&corpus, &signer, n, false, baseline));
    }
    if runs("if_new") {
        let one = ingest_if_new(&corpus, &signer, n, baseline, false);
        let batched = ingest_if_new(&corpus, &signer, n, baseline, true);
        println!("insert_batch_if_new against insert_if_new: {:.2}x the docs/s", batched / one);
    }
    if !runs("background") {
        return;
    }
    let (_, dir, index) = ingest(&corpus, &signer, n, true, baseline);
    if runs("replace") {
        replace_unchanged(&corpus, &signer, n, &index, baseline);
    }
    drop(index);
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--open-only", dir.path().to_str().unwrap()])
        .output()
        .expect("child");
    let report = String::from_utf8_lossy(&child.stdout);
    println!("open in a fresh process ({n} documents): {}", report.trim());
}
