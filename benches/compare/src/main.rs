//! The Rust side of the comparison (issue 7): the corpus, neardex, gaoya,
//! the exact prefix-filter baseline, and scoring. `run.sh` drives it; every
//! measuring command prints one JSON object.
//!
//! ```text
//! neardex-compare gen N DIR                 pages.bin + text.txt for pages 0..N
//! neardex-compare real DIR                  pages.bin + text.txt for the real pages of ../shared/data
//! neardex-compare neardex DIR SCHEME        durable ingest, queries (of sample pages, and of 1,000 pages
//!                                           past N that the index does not hold), all pairs (SCHEME: shingles|spotsigs);
//!                                           with COMPARE_OPTIMIZE=1 then optimize, queries and all pairs again;
//!                                           with COMPARE_BULK=N commits of N through a bulk writer
//! neardex-compare requery DIR SCHEME        queries and all pairs again on the index `neardex` left
//!                                           (NO_QUERIES=1: the self-join alone, for its memory;
//!                                           REQUERY_NEW=1: pages past N too; REQUERY_REPEAT=K: each query
//!                                           run K times untimed before its timed run, its cache-warm time)
//!
//! `COMPARE_JOIN_MAPPED=MIB` makes every neardex self-join
//! `Searcher::self_join_within` that many MiB of mapped vectors (without
//! it, `Searcher::self_join` bounds itself only past the memory available);
//! `COMPARE_WARM_UP=directories` warms the `neardex` command's query
//! passes up without mapping every page in.
//! neardex-compare prefix DIR SCHEME         prefix-filter join on neardex's signatures
//! neardex-compare gaoya DIR                 gaoya MinHash LSH on word 3-shingles
//! neardex-compare score TRUTH PAIRS         recall and precision of PAIRS against TRUTH
//! ```
//!
//! Every command allocates with mimalloc, or with the system's malloc under
//! `COMPARE_ALLOCATOR=system` (src/alloc.rs).
//!
//! `pages.bin` holds each page's HTML as a little-endian u32 length and the
//! bytes; `text.txt` one line per page: its visible text as neardex's
//! tokens, lower-cased and joined by single spaces, which is the text every
//! tool is given (so word 3-shingles are the same sets in every tool; the
//! peers are spared HTML parsing). neardex signs SpotSigs from it too, which
//! gives the vectors the HTML gives (`run_neardex` checks its sample and
//! also times signing the HTML); `COMPARE_SPOTSIGS_INPUT=html` makes every
//! SpotSigs run read `pages.bin` instead.

#[path = "../../../tests/common/mod.rs"]
mod common;

use common::webcorpus;

mod alloc;
mod prefix;

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Mutex;
use std::time::Instant;

use neardex::store::{Document, Index, Metadata};
use neardex::{DocumentSignature, SignatureConfig, Signer, Similarity, Threshold};

/// The threshold every tool is asked for.
pub const TAU: f64 = 0.8;
/// Queries timed for latency: every (N / QUERIES)-th page.
pub const QUERIES: u64 = 1_000;
/// Corpus seed.
const SEED: u64 = 7;
/// Documents per durable commit (the store benchmark's batch).
const BATCH: usize = 1_000;

fn main() {
    let Some(allocator) = alloc::name() else {
        eprintln!("COMPARE_ALLOCATOR is system or mimalloc");
        usage();
    };
    eprintln!("allocator: {allocator}");
    start_memory_sampler();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or_else(|| usage());
    match arg(0) {
        "gen" => generate(arg(1).parse().unwrap_or_else(|_| usage()), Path::new(arg(2))),
        "real" => real_pages(Path::new(arg(1))),
        "neardex" => run_neardex(Path::new(arg(1)), scheme(arg(2))),
        "requery" => requery(Path::new(arg(1)), scheme(arg(2))),
        "lsh" => lsh_banding(
            Path::new(arg(1)),
            scheme(arg(2)),
            arg(3).parse().unwrap_or_else(|_| usage()),
            arg(4).parse().unwrap_or_else(|_| usage()),
        ),
        "prefix" => prefix::run(Path::new(arg(1)), scheme(arg(2))),
        "gaoya" => run_gaoya(Path::new(arg(1))),
        "ifnew" => if_new(Path::new(arg(1)), scheme(arg(2))),
        "score" => score(Path::new(arg(1)), Path::new(arg(2))),
        _ => usage(),
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: neardex-compare gen N DIR | real DIR | neardex DIR SCHEME | requery DIR SCHEME | lsh DIR SCHEME BANDS ROWS | prefix DIR SCHEME | gaoya DIR | ifnew DIR SCHEME | score TRUTH PAIRS"
    );
    std::process::exit(2)
}

/// The two signature set-ups every exact tool is measured with.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Scheme {
    /// Word 3-shingles, set Jaccard: the peers' signatures.
    Shingles,
    /// neardex's default: SpotSigs, multiset Jaccard, from the HTML.
    SpotSigs,
}

fn scheme(name: &str) -> Scheme {
    match name {
        "shingles" => Scheme::Shingles,
        "spotsigs" => Scheme::SpotSigs,
        _ => usage(),
    }
}

impl Scheme {
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Shingles => "shingles",
            Scheme::SpotSigs => "spotsigs",
        }
    }

    pub fn config(self) -> SignatureConfig {
        match self {
            Scheme::Shingles => {
                SignatureConfig { similarity: Similarity::SetJaccard, ..SignatureConfig::word_shingles(3) }
            }
            Scheme::SpotSigs => SignatureConfig::default(),
        }
    }

    /// The input file: the token text (`text.txt`), which every peer is
    /// given too; for SpotSigs with `COMPARE_SPOTSIGS_INPUT=html`, the
    /// pages' HTML (`pages.bin`: what a crawler hands it; the same vectors,
    /// which `run_neardex` checks on its sample).
    fn input(self, dir: &Path) -> PathBuf {
        match self {
            Scheme::SpotSigs if std::env::var("COMPARE_SPOTSIGS_INPUT").is_ok_and(|v| v == "html") => {
                dir.join("pages.bin")
            }
            _ => dir.join("text.txt"),
        }
    }
}

/// Signs one document of `input` (text.txt lines are token text, pages.bin
/// records HTML).
pub fn sign(signer: &Signer, input: &Path, doc: &[u8], scratch: &mut neardex::Scratch) -> DocumentSignature {
    if is_text(input) {
        signer.sign_text_with(std::str::from_utf8(doc).unwrap_or(""), scratch)
    } else {
        signer.sign_html_with(doc, scratch)
    }
}

fn is_text(input: &Path) -> bool {
    input.extension().is_some_and(|e| e == "txt")
}

/// Streams documents of `path` (pages.bin records or text.txt lines) in
/// order, in chunks.
pub struct Docs {
    reader: BufReader<File>,
    lines: bool,
    next: u64,
}

impl Docs {
    pub fn open(path: &Path) -> Docs {
        let file = File::open(path).unwrap_or_else(|e| panic!("{}: {e} (run `gen` first)", path.display()));
        Docs { reader: BufReader::with_capacity(1 << 20, file), lines: is_text(path), next: 0 }
    }

    /// Up to `n` documents: (page number, bytes).
    pub fn chunk(&mut self, n: usize) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let mut doc = Vec::new();
            if self.lines {
                if !self.line(&mut doc) {
                    break;
                }
            } else {
                let mut len = [0u8; 4];
                if self.reader.read_exact(&mut len).is_err() {
                    break;
                }
                doc.resize(u32::from_le_bytes(len) as usize, 0);
                self.reader.read_exact(&mut doc).expect("truncated pages.bin");
            }
            out.push((self.next, doc));
            self.next += 1;
        }
        out
    }

    /// The next line into `doc`, without its newline; false at the end
    /// (a read error ends the run, as a truncated pages.bin does). The
    /// newline is found with the memchr crate's vector search:
    /// `BufRead::read_until` searches a word at a time, and took a third
    /// of the reader thread's time in a 1M load (1.7% of the load's
    /// samples).
    fn line(&mut self, doc: &mut Vec<u8>) -> bool {
        let mut read = false;
        loop {
            let buffered = self.reader.fill_buf().expect("reading text.txt");
            if buffered.is_empty() {
                return read;
            }
            read = true;
            let (taken, done) = match memchr::memchr(b'\n', buffered) {
                Some(end) => (end, true),
                None => (buffered.len(), false),
            };
            doc.extend_from_slice(&buffered[..taken]);
            self.reader.consume(taken + usize::from(done));
            if done {
                return true;
            }
        }
    }
}

/// `COMPARE_BULK=N`: the documents of a commit through a bulk writer
/// (each commit a segment of its own), or `None` for a commit per chunk
/// through the writer.
fn bulk_commit() -> Option<usize> {
    std::env::var("COMPARE_BULK").ok().map(|v| v.parse().expect("COMPARE_BULK=N"))
}

/// Reads `path` and signs every document on two threads, handing each
/// chunk to `consume` in page order.
///
/// The consumer of an ingest (inserting, committing: one thread, the
/// pipeline's serial stage) must not wait for a core while the signers
/// run ahead, and the signers must not stop while it commits. So the
/// signing threads run at a lower priority (nice `COMPARE_SIGNER_NICE`,
/// default 10; 0 leaves them as they are) and up to `COMPARE_QUEUE`
/// signed chunks of 1,000 documents wait for the consumer: by default 64,
/// or with `COMPARE_BULK=N` a commit's worth and a quarter more (250 for
/// 200,000), so that signing goes on through a whole commit.
/// With 4 chunks and no nice (before 2026-11-27), a 1M SpotSigs ingest kept
/// 1.64-1.68 cores busy; with these, 1.87-1.90 (HISTORY.md). With 200,000
/// documents a commit, 64 chunks kept 1.56 cores busy and 256 kept 1.76.
pub fn sign_all(path: &Path, signer: &Signer, mut consume: impl FnMut(Vec<(u64, DocumentSignature)>)) {
    let bulk_chunks = bulk_commit().map_or(0, |n| n / BATCH * 5 / 4);
    let depth: usize = std::env::var("COMPARE_QUEUE").ok().and_then(|v| v.parse().ok()).unwrap_or(bulk_chunks.max(64));
    let nice: i32 = std::env::var("COMPARE_SIGNER_NICE").ok().and_then(|v| v.parse().ok()).unwrap_or(10);
    let (raw_tx, raw_rx) = sync_channel::<(usize, Vec<(u64, Vec<u8>)>)>(4);
    let raw_rx = Mutex::new(raw_rx);
    let (signed_tx, signed_rx) = sync_channel::<(usize, Vec<(u64, DocumentSignature)>)>(depth.max(1));
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut docs = Docs::open(path);
            for seq in 0.. {
                let chunk = docs.chunk(BATCH);
                if chunk.is_empty() || raw_tx.send((seq, chunk)).is_err() {
                    return;
                }
            }
        });
        for _ in 0..2 {
            let (raw_rx, signed_tx) = (&raw_rx, signed_tx.clone());
            scope.spawn(move || {
                if nice != 0 {
                    lower_this_threads_priority(nice);
                }
                let mut scratch = neardex::Scratch::default();
                loop {
                    let next = raw_rx.lock().unwrap().recv();
                    let Ok((seq, chunk)) = next else { return };
                    let signed =
                        chunk.into_iter().map(|(i, doc)| (i, sign(signer, path, &doc, &mut scratch))).collect();
                    if signed_tx.send((seq, signed)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(signed_tx);
        in_order(signed_rx, &mut consume);
    });
}

/// Sets the nice value of the calling thread (Linux schedules threads
/// apart: `setpriority` on a thread id); a failure leaves it as it was.
fn lower_this_threads_priority(nice: i32) {
    // SAFETY: two system calls without pointers, on this thread's own id.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice);
    }
}

fn in_order<T>(rx: Receiver<(usize, T)>, consume: &mut impl FnMut(T)) {
    let mut waiting = std::collections::BTreeMap::new();
    let mut next = 0;
    for (seq, item) in rx {
        waiting.insert(seq, item);
        while let Some(item) = waiting.remove(&next) {
            consume(item);
            next += 1;
        }
    }
}

/// Page `i` of `corpus`: its HTML, and its visible text as neardex's
/// tokens joined by single spaces (a line of `text.txt`).
fn page_and_text(corpus: &webcorpus::Corpus, i: u64, tokens: &mut neardex::text::Tokens) -> (String, String) {
    let html = corpus.page(i);
    tokens.tokenize(&neardex::text::html_bytes_to_text(html.as_bytes()));
    (html, tokens.joined())
}

/// Writes the corpus of pages `0..n` into `dir`.
fn generate(n: u64, dir: &Path) {
    std::fs::create_dir_all(dir).expect("corpus directory");
    let start = Instant::now();
    let corpus = webcorpus::Corpus::load(SEED);
    let mut out = CorpusWriter::create(dir);
    let (tx, rx) = sync_channel::<(usize, Vec<(String, String)>)>(8);
    std::thread::scope(|scope| {
        for worker in 0..2usize {
            let (tx, corpus) = (tx.clone(), &corpus);
            scope.spawn(move || {
                let mut tokens = neardex::text::Tokens::new();
                let chunks = n.div_ceil(BATCH as u64) as usize;
                for seq in (worker..chunks).step_by(2) {
                    let from = (seq * BATCH) as u64;
                    let chunk =
                        (from..(from + BATCH as u64).min(n)).map(|i| page_and_text(corpus, i, &mut tokens)).collect();
                    if tx.send((seq, chunk)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        in_order(rx, &mut |chunk: Vec<(String, String)>| {
            for (html, line) in chunk {
                out.write(html.as_bytes(), &line);
            }
        });
    });
    let (html_bytes, words) = out.finish();
    let info = format!(
        "{{\"documents\": {n}, \"pool_sentences\": {}, \"digest\": \"{:016x}\", \"html_bytes\": {html_bytes}, \
         \"mean_html_bytes\": {}, \"mean_words\": {}, \"seconds\": {:.1}}}",
        corpus.sentences(),
        corpus.digest(),
        html_bytes / n.max(1),
        words / n.max(1),
        start.elapsed().as_secs_f64()
    );
    std::fs::write(dir.join("corpus.json"), &info).unwrap();
    println!("{info}");
}

/// A corpus directory's `pages.bin` (each page's HTML after its length,
/// `u32` little-endian) and `text.txt` (its token text, a line a page),
/// as `generate` and `real_pages` write them.
struct CorpusWriter {
    pages: BufWriter<File>,
    text: BufWriter<File>,
    html_bytes: u64,
    words: u64,
}

impl CorpusWriter {
    fn create(dir: &Path) -> CorpusWriter {
        let file = |name: &str| BufWriter::new(File::create(dir.join(name)).unwrap());
        CorpusWriter { pages: file("pages.bin"), text: file("text.txt"), html_bytes: 0, words: 0 }
    }

    fn write(&mut self, html: &[u8], line: &str) {
        self.pages.write_all(&(html.len() as u32).to_le_bytes()).unwrap();
        self.pages.write_all(html).unwrap();
        self.text.write_all(line.as_bytes()).unwrap();
        self.text.write_all(b"\n").unwrap();
        self.html_bytes += html.len() as u64;
        self.words += if line.is_empty() { 0 } else { line.split(' ').count() as u64 };
    }

    /// Flushes both files; the HTML bytes and words written.
    fn finish(mut self) -> (u64, u64) {
        self.pages.flush().unwrap();
        self.text.flush().unwrap();
        (self.html_bytes, self.words)
    }
}

/// Writes the real pages of `../shared/data` into `dir` as `generate`
/// writes its corpus: the article-extraction benchmark's 181 pages and
/// dragnet's 1,381 (`tests/common`), then the HTTP responses of the two
/// WARC samples (16 Common Crawl, 29 ClueWeb12), each decoded with the
/// charset its header names (ClueWeb's EUC-JP pages name it nowhere
/// else) and stored as UTF-8.
fn real_pages(dir: &Path) {
    // ../shared/data beside the repository (common::shared_data looks
    // beside this crate's manifest, two levels down).
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    if !data.is_dir() {
        eprintln!("{} not found: the real pages live beside the repository", data.display());
        std::process::exit(1);
    }
    std::fs::create_dir_all(dir).expect("corpus directory");
    let start = Instant::now();
    let mut pages: Vec<Vec<u8>> = common::all_pages(&data).into_iter().map(|page| page.html).collect();
    let html_pages = pages.len();
    for file in ["commoncrawl-sample.warc.gz", "clueweb12-quirk.warc.gz"] {
        for response in common::warc_responses(&data.join("warc-samples").join(file)) {
            let declared = response.charset.as_deref().and_then(|c| encoding_rs::Encoding::for_label(c.as_bytes()));
            pages.push(neardex::text::decode_html(&response.payload, declared).into_owned().into_bytes());
        }
    }
    let mut out = CorpusWriter::create(dir);
    let mut tokens = neardex::text::Tokens::new();
    let mut digest = 0u64;
    for html in &pages {
        tokens.tokenize(&neardex::text::html_bytes_to_text(html));
        out.write(html, &tokens.joined());
        digest = xxhash_rust::xxh3::xxh3_64_with_seed(html, digest);
    }
    let (html_bytes, words) = out.finish();
    let n = pages.len() as u64;
    let info = format!(
        "{{\"documents\": {n}, \"source\": \"the real pages of ../shared/data: {html_pages} HTML pages \
         (article-extraction benchmark, dragnet) and {} WARC responses (Common Crawl, ClueWeb12)\", \
         \"digest\": \"{digest:016x}\", \"html_bytes\": {html_bytes}, \"mean_html_bytes\": {}, \"mean_words\": {}, \
         \"seconds\": {:.1}}}",
        pages.len() - html_pages,
        html_bytes / n.max(1),
        words / n.max(1),
        start.elapsed().as_secs_f64()
    );
    std::fs::write(dir.join("corpus.json"), &info).unwrap();
    println!("{info}");
}

/// The warm-up before the query passes: `WarmUp::Pages` (every page of
/// the index mapped in), or under `COMPARE_WARM_UP=directories`
/// `WarmUp::Directories` (for a run that must stay in a memory budget).
fn warm_up_kind() -> neardex::store::WarmUp {
    match std::env::var("COMPARE_WARM_UP").as_deref() {
        Ok("directories") => neardex::store::WarmUp::Directories,
        _ => neardex::store::WarmUp::Pages,
    }
}

/// Every near-duplicate pair of `searcher` at `tau` to `emit`:
/// `Searcher::self_join` (bounded by itself when the index exceeds the
/// memory available), or under `COMPARE_JOIN_MAPPED=MIB`
/// `Searcher::self_join_within` that many MiB (the plain self-join when
/// the vectors fit).
fn self_join(searcher: &neardex::store::Searcher, tau: Threshold, emit: impl FnMut(neardex::oracle::Pair)) {
    match std::env::var("COMPARE_JOIN_MAPPED").ok().and_then(|v| v.parse::<usize>().ok()) {
        Some(mib) => searcher.self_join_within(tau, mib << 20, emit),
        None => searcher.self_join(tau, emit),
    }
    .unwrap();
}

/// Peak resident memory of this process so far (VmHWM), bytes.
pub fn peak_rss() -> u64 {
    common::proc_status_kib("VmHWM") * 1024
}

/// Resets this process's VmHWM to its resident memory now (`5` to
/// `/proc/self/clear_refs`, Linux 4.0 on), so that `peak_rss` gives the
/// peak of what follows.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The largest `RssAnon` and `RssFile` of `/proc/self/status` seen so far,
/// bytes: private memory, and the mapped files' pages (clean page cache,
/// which the kernel may reclaim) that VmHWM counts as well.
static PEAK_ANON: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static PEAK_FILE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Samples `RssAnon` and `RssFile` every 50 ms for the process's life
/// (shorter peaks can be missed; VmHWM cannot).
fn start_memory_sampler() {
    use std::sync::atomic::Ordering::Relaxed;
    let sample = || {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
                .unwrap_or(0)
                * 1024
        };
        PEAK_ANON.fetch_max(field("RssAnon:"), Relaxed);
        PEAK_FILE.fetch_max(field("RssFile:"), Relaxed);
    };
    std::thread::spawn(move || loop {
        sample();
        std::thread::sleep(std::time::Duration::from_millis(50));
    });
}

/// `"peak_anon_bytes": A, "peak_file_bytes": F` for a JSON record.
pub fn peak_split() -> String {
    use std::sync::atomic::Ordering::Relaxed;
    format!("\"peak_anon_bytes\": {}, \"peak_file_bytes\": {}", PEAK_ANON.load(Relaxed), PEAK_FILE.load(Relaxed))
}

/// This process's minor and major page faults so far (`/proc/self/stat`
/// fields 10 and 12; zeros where it cannot be read).
pub fn page_faults() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name, which may hold spaces, in
    // parentheses: field 3 (state) is the first.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse().ok()).unwrap_or(0);
    (field(10), field(12))
}

/// CPU seconds (user + system) of this process and of each of its live
/// threads, by thread id with its name (`/proc/self/stat` and
/// `/proc/self/task/*/stat`: fields 14 and 15, in ticks of 1/100 s, Linux's
/// `USER_HZ`). The process's count includes the threads that have ended.
pub struct CpuReading {
    process: f64,
    threads: std::collections::BTreeMap<u64, (String, f64)>,
}

fn stat_cpu(stat: &str) -> Option<(String, f64)> {
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(').map_or("", |(_, n)| n).to_string();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    Some((name, ticks(14) + ticks(15)))
}

/// What the committing thread of an ingest is doing, for the timeline of
/// `INGEST_TIMELINE=1`: an index into [`PHASES`].
static PHASE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
const PHASES: [&str; 4] = ["waiting for signatures", "inserting", "committing", "after the last commit"];

/// Samples, every 50 ms until `stop`, the process's CPU and the calling
/// thread's, and adds each interval's wall-clock time and CPU to the phase
/// [`PHASE`] names at its end; returns a line of each phase's time, the
/// cores the process kept busy in it and the committing thread's share.
fn ingest_timeline(stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> std::thread::JoinHandle<String> {
    use std::sync::atomic::Ordering::Relaxed;
    // `/proc/thread-self` links to `PID/task/TID`, relative to `/proc`.
    let task =
        std::fs::read_link("/proc/thread-self").map(|t| Path::new("/proc").join(t).join("stat")).unwrap_or_default();
    std::thread::spawn(move || {
        let process_stat = Path::new("/proc/self/stat");
        let mut sums = [(0.0f64, 0.0f64, 0.0f64); 4];
        let (mut at, mut process, mut main) = (Instant::now(), cpu_of(process_stat), cpu_of(&task));
        while !stop.load(Relaxed) {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let (now, p, m) = (Instant::now(), cpu_of(process_stat), cpu_of(&task));
            let sum = &mut sums[PHASE.load(Relaxed).min(3)];
            sum.0 += (now - at).as_secs_f64();
            sum.1 += p - process;
            sum.2 += m - main;
            (at, process, main) = (now, p, m);
        }
        let parts: Vec<String> = PHASES
            .iter()
            .zip(sums)
            .map(|(name, (wall, cpu, main))| {
                format!(
                    "{name} {wall:.1} s ({:.2} cores, this thread {:.2})",
                    cpu / wall.max(1e-9),
                    main / wall.max(1e-9)
                )
            })
            .collect();
        parts.join(", ")
    })
}

/// CPU seconds the calling thread has used (`/proc/thread-self/stat`).
pub fn this_thread_cpu() -> f64 {
    cpu_of(Path::new("/proc/thread-self/stat"))
}

/// CPU seconds of the process or thread whose `stat` file is `path` (0
/// when it cannot be read).
fn cpu_of(path: &Path) -> f64 {
    stat_cpu(&std::fs::read_to_string(path).unwrap_or_default()).map_or(0.0, |c| c.1)
}

pub fn cpu_reading() -> CpuReading {
    let process = cpu_of(Path::new("/proc/self/stat"));
    let mut threads = std::collections::BTreeMap::new();
    for task in std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten() {
        let Ok(tid) = task.file_name().to_string_lossy().parse::<u64>() else { continue };
        if let Some(cpu) = stat_cpu(&std::fs::read_to_string(task.path().join("stat")).unwrap_or_default()) {
            threads.insert(tid, cpu);
        }
    }
    CpuReading { process, threads }
}

/// The CPU this process used since `before` over `seconds` of wall-clock
/// time, and each live thread's share, busiest first (those under 0.1 s
/// left out), as one line; threads that ended in between (scoped ones)
/// are counted together.
pub fn cpu_since(before: &CpuReading, seconds: f64) -> String {
    let now = cpu_reading();
    let mut used: Vec<(f64, String)> = now
        .threads
        .iter()
        .map(|(tid, (name, cpu))| (cpu - before.threads.get(tid).map_or(0.0, |b| b.1), format!("{name}/{tid}")))
        .collect();
    used.sort_by(|a, b| b.0.total_cmp(&a.0));
    let total = now.process - before.process;
    let ended = total - used.iter().map(|u| u.0).sum::<f64>();
    let mut parts: Vec<String> =
        used.iter().filter(|u| u.0 >= 0.1).map(|(cpu, name)| format!("{name} {cpu:.1}")).collect();
    parts.push(format!("threads that ended {ended:.1}"));
    format!("{total:.1} s CPU in {seconds:.1} s ({:.2} cores; by thread: {})", total / seconds, parts.join(", "))
}

/// The machine's `Dirty` and `Writeback` lines of `/proc/meminfo`: file
/// data written and not yet on the disk.
pub fn dirty_memory() -> String {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let lines: Vec<String> = meminfo
        .lines()
        .filter(|l| l.starts_with("Dirty:") || l.starts_with("Writeback:"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    lines.join(", ")
}

/// p50 and p99 of latencies in seconds, as microseconds.
pub fn percentiles(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize] * 1e6;
    (at(0.5), at(0.99))
}

/// The pages whose queries are timed.
pub fn sample(n: u64) -> Vec<u64> {
    let step = (n / QUERIES).max(1);
    (0..n).step_by(step as usize).take(QUERIES as usize).collect()
}

/// Writes pairs of page numbers, `a < b`, one per line.
pub fn write_pairs(path: &Path, pairs: &[(u32, u32)]) {
    let mut out = BufWriter::new(File::create(path).unwrap());
    for (a, b) in pairs {
        writeln!(out, "{a} {b}").unwrap();
    }
    out.flush().unwrap();
}

fn read_pairs(path: &Path) -> HashSet<(u32, u32)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter_map(|l| {
            let (a, b) = l.split_once(' ')?;
            let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
            Some((a.min(b), a.max(b)))
        })
        .filter(|(a, b)| a != b)
        .collect()
}

fn score(truth: &Path, found: &Path) {
    let truth = read_pairs(truth);
    let found = read_pairs(found);
    let hits = found.intersection(&truth).count();
    let recall = if truth.is_empty() { 1.0 } else { hits as f64 / truth.len() as f64 };
    let precision = if found.is_empty() { 1.0 } else { hits as f64 / found.len() as f64 };
    println!(
        "{{\"truth_pairs\": {}, \"found_pairs\": {}, \"recall\": {recall:.5}, \"precision\": {precision:.5}}}",
        truth.len(),
        found.len()
    );
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map(|d| d.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum()).unwrap_or(0)
}

/// The query and all-pairs part of `neardex` again, on the index a
/// previous `neardex` run left (read-only): for profiling the query path
/// without re-ingesting. The sample's vectors come from the index.
fn requery(dir: &Path, scheme: Scheme) {
    let tau = Threshold::new(TAU).unwrap();
    let index = Index::open_read_only(dir.join(format!("neardex-{}", scheme.name()))).unwrap();
    let searcher = index.searcher().unwrap();
    let n = searcher.len();
    let first = searcher.get("0").unwrap().expect("page 0 is stored").id;
    let queries: Vec<_> = sample(n).iter().map(|i| searcher.get(&i.to_string()).unwrap().unwrap().vector).collect();
    // REQUERY_WARM_UP=directories|pages: Searcher::warm_up before the
    // first pass.
    if let Ok(v) = std::env::var("REQUERY_WARM_UP") {
        let warm_up = if v == "pages" { neardex::store::WarmUp::Pages } else { neardex::store::WarmUp::Directories };
        let t = Instant::now();
        searcher.warm_up(warm_up);
        eprintln!("warm-up {warm_up:?}: {:.1} ms, rss {} MB", t.elapsed().as_secs_f64() * 1e3, peak_rss() >> 20);
    }
    // Twice: the first pass maps pages and builds directories (cold), the
    // second is a long-running process's steady state (warm).
    // REQUERY_PASSES=N (default 2): more warm passes, for a profiler;
    // the figures are those of the first and the last.
    // NO_QUERIES=1: none at all (the self-join's memory alone).
    let no_queries = std::env::var_os("NO_QUERIES").is_some();
    let count = std::env::var("REQUERY_PASSES").ok().and_then(|v| v.parse().ok()).unwrap_or(2usize).max(2);
    let (count, queries) = if no_queries { (0, Vec::new()) } else { (count, queries) };
    let mut passes = Vec::new();
    let mut found = 0;
    // The mean query time of each warm pass (every pass after the first):
    // steadier than a pass's p50 for comparing two builds.
    let mut warm_means = Vec::new();
    let each = std::env::var_os("REQUERY_EACH").is_some();
    // REQUERY_REPEAT=N: each query run N times more, untimed, right before
    // its timed run, which then finds what it reads in the CPU's caches:
    // the query's time without its cache misses (a floor for any change
    // to how it reads memory). The untimed runs' mean is printed too.
    let repeat: u32 = std::env::var("REQUERY_REPEAT").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut spent = 0.0;
    for pass in 0..count {
        let mut times = Vec::new();
        found = 0;
        let mut untimed = 0.0;
        for q in &queries {
            if repeat > 0 {
                let t = Instant::now();
                for _ in 0..repeat {
                    searcher.query(q, tau).unwrap();
                }
                untimed += t.elapsed().as_secs_f64();
            }
            let t = Instant::now();
            found += searcher.query(q, tau).unwrap().len();
            times.push(t.elapsed().as_secs_f64());
        }
        if repeat > 0 && !queries.is_empty() {
            let runs = f64::from(repeat) * queries.len() as f64;
            eprintln!("pass {pass}: the untimed repeats' mean {:.2} us", untimed / runs * 1e6);
        }
        if pass > 0 && !times.is_empty() {
            warm_means.push(times.iter().sum::<f64>() / times.len() as f64 * 1e6);
        }
        // REQUERY_EACH=1: every pass's mean and elapsed time (to see when
        // the snapshot's segment masks arrive without a warm-up).
        if each && !times.is_empty() {
            let sum: f64 = times.iter().sum();
            spent += sum;
            eprintln!("pass {pass}: mean {:.2} us, {spent:.3} s of queries so far", sum / times.len() as f64 * 1e6);
        }
        passes.push(percentiles(times));
    }
    if !warm_means.is_empty() {
        warm_means.sort_by(f64::total_cmp);
        eprintln!(
            "warm passes: median of their mean query times {:.2} us ({} passes, {:.2}-{:.2})",
            warm_means[warm_means.len() / 2],
            warm_means.len(),
            warm_means[0],
            warm_means[warm_means.len() - 1]
        );
    }
    let ((cold50, cold99), (p50, p99)) = match passes.first() {
        Some(&first) => (first, passes[count - 1]),
        None => ((f64::NAN, f64::NAN), (f64::NAN, f64::NAN)),
    };
    let mut stats = neardex::store::QueryStats::default();
    for q in &queries {
        stats += searcher.query_with(q, tau, neardex::store::Pruning::Full).unwrap().1;
    }
    eprintln!("per query over {} queries: {stats:?}", queries.len());
    if std::env::var_os("REQUERY_DETAIL").is_some() {
        requery_detail(&searcher, &queries, scheme);
    }
    if std::env::var_os("REQUERY_LSH").is_some() {
        requery_lsh(&searcher, &queries, tau);
    }
    if std::env::var_os("REQUERY_NEW").is_some() {
        // REQUERY_NEW=1: the queries of pages the index does not hold
        // (`new_pages`), in two passes, as `neardex` times them.
        let new = new_pages(searcher.signer(), scheme, n);
        let passes = two_passes(&new, |_, q| searcher.query(&q.vector, tau).unwrap().len());
        eprintln!(
            "new pages: first pass p50 {:.1} / p99 {:.1} us, second {:.1} / {:.1} us, {} matches",
            passes.cold.0, passes.cold.1, passes.warm.0, passes.warm.1, passes.found
        );
    }
    if std::env::var_os("REQUERY_FRESH").is_some() {
        requery_fresh(&searcher, n, tau);
    }
    let skip_join = std::env::var_os("NO_JOIN").is_some();
    let start = Instant::now();
    let mut pairs = Vec::new();
    if !skip_join {
        self_join(&searcher, tau, |p| pairs.push(((p.a - first) as u32, (p.b - first) as u32)));
        write_pairs(&dir.join(format!("pairs-requery-{}.txt", scheme.name())), &pairs);
    }
    println!(
        "{{\"tool\": \"requery-{}\", \"documents\": {n}, \"found\": {found}, \"cold_query_p50_us\": {cold50:.1}, \
         \"cold_query_p99_us\": {cold99:.1}, \"query_p50_us\": {p50:.1}, \"query_p99_us\": {p99:.1}, \"all_pairs_seconds\": {:.2}, \"pairs\": {}, \"peak_rss_bytes\": {}, {}}}",
        scheme.name(),
        start.elapsed().as_secs_f64(),
        pairs.len(),
        peak_rss(),
        peak_split()
    );
}

/// REQUERY_FRESH=1: how much of a repeated pass's speed is the CPU
/// caches holding what the same queries touched the pass before. Ten
/// further sets of 1,000 pages (the sample moved by 1 to 10 pages), each
/// queried once, against the last set queried again: p50 and p99 of each.
fn requery_fresh(searcher: &neardex::store::Searcher, n: u64, tau: Threshold) {
    let set = |shift: u64| -> Vec<neardex::SignatureVector> {
        sample(n).iter().map(|i| searcher.get(&((i + shift) % n).to_string()).unwrap().unwrap().vector).collect()
    };
    let pass = |queries: &[neardex::SignatureVector]| {
        let times = queries
            .iter()
            .map(|q| {
                let t = Instant::now();
                std::hint::black_box(searcher.query(q, tau).unwrap());
                t.elapsed().as_secs_f64()
            })
            .collect();
        percentiles(times)
    };
    let sets: Vec<Vec<neardex::SignatureVector>> = (1..=10).map(set).collect();
    let fresh: Vec<(f64, f64)> = sets.iter().map(|queries| pass(queries)).collect();
    let repeated: Vec<(f64, f64)> = (0..3).map(|_| pass(&sets[9])).collect();
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    eprintln!(
        "fresh sets, each queried once: p50 {:.1} us (median of {}; {:.1}-{:.1}), p99 {:.1} us; the last set again: \
         p50 {:.1} us, p99 {:.1} us",
        median(fresh.iter().map(|f| f.0).collect()),
        fresh.len(),
        fresh.iter().map(|f| f.0).fold(f64::MAX, f64::min),
        fresh.iter().map(|f| f.0).fold(0.0, f64::max),
        median(fresh.iter().map(|f| f.1).collect()),
        median(repeated.iter().map(|f| f.0).collect()),
        median(repeated.iter().map(|f| f.1).collect()),
    );
}

/// REQUERY_LSH=1: the LSH query path on the same sample (band keys
/// recomputed from the stored vectors), three passes after the exact ones;
/// prints the p50 and p99 of each and the matches found.
fn requery_lsh(searcher: &neardex::store::Searcher, queries: &[neardex::SignatureVector], tau: Threshold) {
    let signatures: Vec<DocumentSignature> =
        queries.iter().map(|v| searcher.signer().sign_vector(v.clone(), neardex::Fingerprint(0))).collect();
    for pass in 0..3 {
        let mut times = Vec::new();
        let mut found = 0;
        for q in &signatures {
            let t = Instant::now();
            found += searcher.query_lsh(q, tau).unwrap().len();
            times.push(t.elapsed().as_secs_f64());
        }
        let (p50, p99) = percentiles(times);
        eprintln!("lsh pass {pass}: p50 {p50:.1} µs, p99 {p99:.1} µs, {found} matches");
    }
}

/// The pages a crawler would ask about before adding them: pages
/// `n..n + QUERIES` of the generated corpus, past the `n` an index holds
/// (generated as `gen` makes them: 30% copy an earlier page, mostly one of
/// the last 10,000, so some have near-duplicates stored and most have
/// none), signed as the harness signs the scheme's input. Their own
/// signatures are in no segment, where a stored sample page's are all in
/// its own: the query a crawler makes of a page it has not stored.
pub fn new_pages(signer: &Signer, scheme: Scheme, n: u64) -> Vec<(u64, DocumentSignature)> {
    let corpus = webcorpus::Corpus::load(SEED);
    let input = scheme.input(Path::new(""));
    let mut tokens = neardex::text::Tokens::new();
    let mut scratch = neardex::Scratch::default();
    (n..n + QUERIES)
        .map(|i| {
            let (html, text) = page_and_text(&corpus, i, &mut tokens);
            let doc = if is_text(&input) { text } else { html };
            (i, sign(signer, &input, doc.as_bytes(), &mut scratch))
        })
        .collect()
}

/// The sample pages (of `n`) signed as queries, each with its document id
/// (page number + `first`, the id of page 0).
fn sample_queries(input: &Path, signer: &Signer, n: u64, first: u64) -> Vec<(u64, DocumentSignature)> {
    let wanted: HashSet<u64> = sample(n).into_iter().collect();
    let mut queries = Vec::new();
    let mut docs = Docs::open(input);
    let mut scratch = neardex::Scratch::default();
    loop {
        let chunk = docs.chunk(BATCH);
        if chunk.is_empty() {
            return queries;
        }
        for (i, doc) in chunk {
            if wanted.contains(&i) {
                queries.push((first + i, sign(signer, input, &doc, &mut scratch)));
            }
        }
    }
}

/// Matches other than the query's own page (stored, so always its own
/// match): what the LSH recall counts.
fn other_matches(matches: Vec<neardex::oracle::Match>, own: u64) -> usize {
    matches.iter().filter(|m| m.id != own).count()
}

/// The sample queries through one path, in two passes of its own: the
/// first right after the warm-up, the second what a long-running reader
/// sees once its caches hold what the queries touch. The exact path's
/// passes come before the LSH path's, so that neither finds the other's
/// lists in the CPU caches: as the prefix filter times its two query forms
/// (until 2026-11-27 the harness alternated the two paths query by query).
struct Passes {
    /// p50 and p99 of the first pass, µs.
    cold: (f64, f64),
    /// p50 and p99 of the second pass, µs.
    warm: (f64, f64),
    /// Matches other than the query's own page, in one pass.
    found: usize,
    /// Page faults (minor, major) in the first pass and in the second.
    faults: [(u64, u64); 2],
}

fn two_passes(queries: &[(u64, DocumentSignature)], mut run: impl FnMut(u64, &DocumentSignature) -> usize) -> Passes {
    let mut pass = || {
        let (faults, mut times, mut found) = (page_faults(), Vec::with_capacity(queries.len()), 0);
        for (own, q) in queries {
            let t = Instant::now();
            found += run(*own, q);
            times.push(t.elapsed().as_secs_f64());
        }
        let after = page_faults();
        (percentiles(times), found, (after.0 - faults.0, after.1 - faults.1))
    };
    let (cold, found, cold_faults) = pass();
    let (warm, _, warm_faults) = pass();
    Passes { cold, warm, found, faults: [cold_faults, warm_faults] }
}

/// The sample queries through the exact path, then through the LSH path.
struct QueryTimes {
    exact: Passes,
    lsh: Passes,
}

fn time_queries(
    searcher: &neardex::store::Searcher,
    queries: &[(u64, DocumentSignature)],
    tau: Threshold,
) -> QueryTimes {
    let exact = two_passes(queries, |own, q| other_matches(searcher.query(&q.vector, tau).unwrap(), own));
    let lsh = two_passes(queries, |own, q| other_matches(searcher.query_lsh(q, tau).unwrap(), own));
    QueryTimes { exact, lsh }
}

/// The crawler's loop over the corpus: each chunk of 1,000 signed pages
/// through one `Writer::insert_batch_if_new` at τ = 0.8 and a durable
/// commit, with the index's default options (a flush every 50,000 pages,
/// merges inside the commits), into `neardex-ifnew-SCHEME`. Prints the
/// docs/s, the pages refused, and the segments at the end.
fn if_new(dir: &Path, scheme: Scheme) {
    let signer = Signer::new(scheme.config()).unwrap();
    let tau = Threshold::new(TAU).unwrap();
    let index_dir = dir.join(format!("neardex-ifnew-{}", scheme.name()));
    let _ = std::fs::remove_dir_all(&index_dir);
    let index = Index::create(&index_dir, scheme.config()).unwrap();
    let (mut n, mut refused) = (0u64, 0u64);
    let start = Instant::now();
    sign_all(&scheme.input(dir), &signer, |chunk| {
        n += chunk.len() as u64;
        let mut writer = index.writer().unwrap();
        let keys: Vec<String> = chunk.iter().map(|(i, _)| i.to_string()).collect();
        let batch =
            keys.iter().zip(&chunk).map(|(k, (_, s))| (k.as_str(), Document::Signatures(s), Metadata::default()));
        for result in writer.insert_batch_if_new(batch, tau) {
            refused += u64::from(matches!(result.unwrap(), neardex::store::InsertIfNew::Matches(_)));
        }
        writer.commit().unwrap();
    });
    let secs = start.elapsed().as_secs_f64();
    let stats = index.stats().unwrap();
    println!(
        "{{\"tool\": \"ifnew-{}\", \"documents\": {n}, \"seconds\": {secs:.2}, \"docs_per_s\": {:.0}, \"refused\": {refused}, \"segments\": {}, \"peak_rss_bytes\": {}}}",
        scheme.name(),
        n as f64 / secs,
        stats.segments,
        peak_rss()
    );
}

/// The LSH query path under another banding than the default (b bands of
/// r rows, b·r MinHash values): builds the scheme's index with it (as the
/// `neardex` run does, under `neardex-lsh-SCHEME-bBrR`), then runs the
/// sample queries through `query_lsh` and the exact query and prints their
/// p50/p99 and the LSH recall against the exact matches (LSH results are
/// verified: precision 1).
fn lsh_banding(dir: &Path, scheme: Scheme, bands: u32, rows: u32) {
    let minhash = neardex::MinHashConfig { permutations: bands * rows, bands, rows };
    let config = SignatureConfig { minhash, ..scheme.config() };
    let signer = Signer::new(config.clone()).unwrap();
    let tau = Threshold::new(TAU).unwrap();
    let input = scheme.input(dir);
    let index_dir = dir.join(format!("neardex-lsh-{}-b{bands}r{rows}", scheme.name()));
    let _ = std::fs::remove_dir_all(&index_dir);
    let options = neardex::store::IndexOptions { background_maintenance: true, ..Default::default() };
    let index = Index::create_with(&index_dir, config, options).unwrap();
    let mut n = 0u64;
    sign_all(&input, &signer, |chunk| {
        n += chunk.len() as u64;
        let mut writer = index.writer().unwrap();
        let batch = chunk.iter().map(|(i, s)| (i.to_string(), Document::Signatures(s), Metadata::default()));
        writer.insert_batch(batch).unwrap();
        writer.commit().unwrap();
    });
    index.wait_for_maintenance();
    let searcher = index.searcher().unwrap();
    let first = searcher.get("0").unwrap().expect("page 0 is stored").id;
    let queries = sample_queries(&input, &signer, n, first);
    // The second passes reported (warm, as `requery`).
    let QueryTimes { exact, lsh } = time_queries(&searcher, &queries, tau);
    let (exact_found, lsh_found) = (exact.found, lsh.found);
    let (exact, lsh) = (exact.warm, lsh.warm);
    println!(
        "{{\"tool\": \"lsh-{}-b{bands}r{rows}\", \"documents\": {n}, \"exact_p50_us\": {:.1}, \"exact_p99_us\": {:.1}, \
         \"lsh_p50_us\": {:.1}, \"lsh_p99_us\": {:.1}, \"exact_matches\": {exact_found}, \"lsh_matches\": {lsh_found}, \
         \"lsh_recall\": {:.5}, \"disk_bytes\": {}}}",
        scheme.name(),
        exact.0,
        exact.1,
        lsh.0,
        lsh.1,
        if exact_found == 0 { 1.0 } else { lsh_found as f64 / exact_found as f64 },
        dir_bytes(&index_dir)
    );
}

/// Issue 4's latency table on an existing index: at τ = 0.5, 0.8 and 0.9,
/// p50/p99 of the exact query with full pruning (the sample, warm: second
/// pass), with the length window only and with no pruning (the first 100
/// sample pages), and the brute-force scan (the first 5, every live vector
/// compared; one scan serves the three thresholds). One JSON line per τ.
fn requery_detail(searcher: &neardex::store::Searcher, queries: &[neardex::SignatureVector], scheme: Scheme) {
    use neardex::store::Pruning;
    let measure = scheme.config().similarity;
    let taus = [0.5, 0.8, 0.9];
    let mut brute = [Vec::new(), Vec::new(), Vec::new()];
    for q in queries.iter().take(5) {
        let t = Instant::now();
        let mut found = [0usize; 3];
        searcher
            .for_each_live(|_, d| {
                let overlap = measure.overlap(q, d);
                for (i, &tau) in taus.iter().enumerate() {
                    found[i] += usize::from(overlap.meets(Threshold::new(tau).unwrap()));
                }
            })
            .unwrap();
        let secs = t.elapsed().as_secs_f64();
        for (i, b) in brute.iter_mut().enumerate() {
            b.push((secs, found[i]));
        }
    }
    for (i, &tau) in taus.iter().enumerate() {
        let threshold = Threshold::new(tau).unwrap();
        let time = |pruning: Pruning, sample: &[neardex::SignatureVector], passes: usize| {
            let mut times = Vec::new();
            for _ in 0..passes {
                times.clear();
                for q in sample {
                    let t = Instant::now();
                    searcher.query_with(q, threshold, pruning).unwrap();
                    times.push(t.elapsed().as_secs_f64());
                }
            }
            percentiles(times)
        };
        let (full50, full99) = time(Pruning::Full, queries, 2);
        // REQUERY_FEW=N: the sample of the unpruned variants (default 100;
        // a word-3-shingle index needs fewer, its lists are long).
        let few_len = std::env::var("REQUERY_FEW").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
        let few = &queries[..queries.len().min(few_len)];
        let (window50, window99) = time(Pruning::WindowOnly, few, 1);
        let (none50, none99) = time(Pruning::None, few, 1);
        // Exactness spot check: the indexed query finds what the scan found.
        for (q, &(_, found)) in queries.iter().zip(&brute[i]) {
            assert_eq!(searcher.query(q, threshold).unwrap().len(), found, "indexed query differs from the scan");
        }
        let (brute50, _) = percentiles(brute[i].iter().map(|b| b.0).collect());
        println!(
            "{{\"tool\": \"requery-detail-{}\", \"tau\": {tau}, \"full_p50_us\": {full50:.1}, \"full_p99_us\": {full99:.1}, \
             \"window_p50_us\": {window50:.1}, \"window_p99_us\": {window99:.1}, \"none_p50_us\": {none50:.1}, \
             \"none_p99_us\": {none99:.1}, \"brute_p50_us\": {brute50:.1}}}",
            scheme.name()
        );
    }
}

fn run_neardex(dir: &Path, scheme: Scheme) {
    let config = scheme.config();
    let signer = Signer::new(config.clone()).unwrap();
    let tau = Threshold::new(TAU).unwrap();
    let input = scheme.input(dir);

    // Signatures alone, both cores (INGEST_ONLY=1 with NO_SIGN_ONLY=1:
    // not measured, a profiling aid that reaches the ingest sooner).
    let start = Instant::now();
    let mut n = 0u64;
    let skip_signing = std::env::var_os("INGEST_ONLY").is_some() && std::env::var_os("NO_SIGN_ONLY").is_some();
    if skip_signing {
        let mut docs = Docs::open(&input);
        loop {
            let chunk = docs.chunk(BATCH);
            if chunk.is_empty() {
                break;
            }
            n += chunk.len() as u64;
        }
    } else {
        sign_all(&input, &signer, |chunk| n += chunk.len() as u64);
    }
    let sign_rate = n as f64 / start.elapsed().as_secs_f64();
    // SpotSigs from the token text (the peers' input): what signing the
    // pages' HTML costs instead, and a check that the sample's vectors are
    // the same from either input.
    let html_sign_rate = if scheme == Scheme::SpotSigs && is_text(&input) && !skip_signing {
        let pages = dir.join("pages.bin");
        let start = Instant::now();
        let mut m = 0u64;
        sign_all(&pages, &signer, |chunk| m += chunk.len() as u64);
        let rate = m as f64 / start.elapsed().as_secs_f64();
        let vectors = |input: &Path| -> Vec<_> {
            sample_queries(input, &signer, n, 0).into_iter().map(|(i, s)| (i, s.vector)).collect()
        };
        assert_eq!(vectors(&pages), vectors(&input), "SpotSigs vectors differ between HTML and token text");
        format!("{rate:.0}")
    } else {
        "null".to_string()
    };

    // Text to durable index: 1,000 documents per commit, flushes and
    // merges included.
    let index_dir = dir.join(format!("neardex-{}", scheme.name()));
    let _ = std::fs::remove_dir_all(&index_dir);
    let start = Instant::now();
    let cpu_before = cpu_reading();
    // Flushes and merges on the index's own thread, so that the pipeline
    // keeps signing and committing while they run.
    let options = neardex::store::IndexOptions { background_maintenance: true, ..Default::default() };
    let index = Index::create_with(&index_dir, config, options).unwrap();
    let (mut vector_bytes, mut key_bytes) = (0u64, 0u64);
    // Where the committing thread's time goes (stderr).
    let (mut t_writer, mut t_insert, mut t_wait) = (0.0, 0.0, 0.0);
    // Each commit's seconds: the last one's follows the signing, with
    // nothing beside it (the ingest's tail).
    let mut commit_secs: Vec<f64> = Vec::new();
    // The committing thread's CPU in its inserts and its commits.
    let (mut cpu_insert, mut cpu_commit) = (0.0, 0.0);
    let bulk = bulk_commit();
    // The open writer and the documents it staged.
    let mut open: Option<(neardex::store::Writer<'_>, usize)> = None;
    let mut last = Instant::now();
    let timeline_stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let timeline = std::env::var_os("INGEST_TIMELINE").map(|_| ingest_timeline(timeline_stop.clone()));
    let phase = |p: usize| PHASE.store(p, std::sync::atomic::Ordering::Relaxed);
    sign_all(&input, &signer, |chunk| {
        t_wait += last.elapsed().as_secs_f64();
        phase(1);
        let t0 = Instant::now();
        let (mut writer, mut staged) = match open.take() {
            Some(open) => open,
            None if bulk.is_some() => (index.bulk_writer().unwrap(), 0),
            None => (index.writer().unwrap(), 0),
        };
        t_writer += t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let c0 = this_thread_cpu();
        for (i, signature) in &chunk {
            key_bytes += i.to_string().len() as u64;
            vector_bytes += signature.vector.distinct() * 12;
        }
        staged += chunk.len();
        // The signatures are the writer's: moved into its documents.
        let batch = chunk.into_iter().map(|(i, signature)| (i.to_string(), signature, Metadata::default()));
        writer.insert_batch_signed(batch).unwrap();
        t_insert += t0.elapsed().as_secs_f64();
        let c1 = this_thread_cpu();
        cpu_insert += c1 - c0;
        // Without COMPARE_BULK, a commit per chunk of 1,000.
        if staged >= bulk.unwrap_or(0) {
            let t0 = Instant::now();
            phase(2);
            if bulk.is_some() {
                // The next bulk writer keeps this one's pair buffers.
                let (_, next) = writer.commit_and_continue().unwrap();
                open = Some((next, 0));
            } else {
                writer.commit().unwrap();
            }
            commit_secs.push(t0.elapsed().as_secs_f64());
            cpu_commit += this_thread_cpu() - c1;
        } else {
            open = Some((writer, staged));
        }
        phase(0);
        last = Instant::now();
    });
    if let Some((writer, _)) = open.take() {
        let (t0, c0) = (Instant::now(), this_thread_cpu());
        phase(2);
        writer.commit().unwrap();
        commit_secs.push(t0.elapsed().as_secs_f64());
        cpu_commit += this_thread_cpu() - c0;
    }
    let t_commit: f64 = commit_secs.iter().sum();
    eprintln!(
        "ingest phases: {t_writer:.2} s opening writers (waiting for installs), {t_insert:.2} s inserting, \
         {t_commit:.2} s committing, {t_wait:.2} s waiting for signatures; the thread's CPU {cpu_insert:.1} s \
         inserting, {cpu_commit:.1} s committing"
    );
    // The ingest ends when every flush and merge has, too, and the catalog
    // has given back the space its pending documents took at their peak
    // (redb keeps it otherwise; what a bulk load does before it serves).
    phase(3);
    let t0 = Instant::now();
    index.wait_for_maintenance();
    let maintenance_secs = t0.elapsed().as_secs_f64();
    assert_eq!(index.maintenance_error(), None);
    let t0 = Instant::now();
    assert!(index.compact_catalog().unwrap(), "no reader holds the catalog");
    let compact_secs = t0.elapsed().as_secs_f64();
    let ingest_secs = start.elapsed().as_secs_f64();
    let ingest_peak = peak_rss();
    eprintln!("ingest: catalog compacted in {compact_secs:.2} s");
    let commits: Vec<String> = commit_secs.iter().map(|s| format!("{s:.2}")).collect();
    eprintln!("ingest: commits of {} s, then {maintenance_secs:.2} s waiting for maintenance", commits.join(" / "));
    eprintln!("ingest: {}", cpu_since(&cpu_before, ingest_secs));
    if let Some(timeline) = timeline {
        timeline_stop.store(true, std::sync::atomic::Ordering::Relaxed);
        eprintln!("ingest timeline: {}", timeline.join().unwrap());
    }
    if std::env::var_os("INGEST_ONLY").is_some() {
        // Profiling aid: the ingest figures alone.
        eprintln!("ingest: {n} documents in {ingest_secs:.2} s, {:.0} docs/s", n as f64 / ingest_secs);
        return;
    }
    let searcher = index.searcher().unwrap();
    let first = searcher.get("0").unwrap().expect("page 0 is stored").id;
    let page = |id: u64| (id - first) as u32;

    // Single queries: the sample pages' own signatures, exact and LSH,
    // after the warm-up a long-running process does once (timed apart).
    let queries = sample_queries(&input, &signer, n, first);
    let start = Instant::now();
    searcher.warm_up(warm_up_kind());
    let warm_up_secs = start.elapsed().as_secs_f64();
    // COMPARE_PAUSE_SECONDS=S: wait before the first pass (to tell what
    // right after the ingest slows it from what the queries warm).
    if let Some(pause) = std::env::var("COMPARE_PAUSE_SECONDS").ok().and_then(|v| v.parse().ok()) {
        std::thread::sleep(std::time::Duration::from_secs_f64(pause));
    }
    eprintln!("queries: before the first pass, {}", dirty_memory());
    let QueryTimes { exact, lsh } = time_queries(&searcher, &queries, tau);
    let ((exact_p50, exact_p99), (warm_p50, warm_p99), exact_found) = (exact.cold, exact.warm, exact.found);
    let ((lsh_p50, lsh_p99), (warm_lsh_p50, warm_lsh_p99), lsh_found) = (lsh.cold, lsh.warm, lsh.found);
    eprintln!("queries: after the second pass, {}", dirty_memory());
    let stats = index.stats().unwrap();
    eprintln!(
        "queries: second pass exact p50 {warm_p50:.1} / p99 {warm_p99:.1} us, LSH p50 {warm_lsh_p50:.1} / p99 \
         {warm_lsh_p99:.1} us; {} segments, {} documents pending; page faults (minor, major) in the first exact \
         pass {:?}, in the second {:?}",
        stats.segments, stats.pending, exact.faults[0], exact.faults[1]
    );

    // Pages the index does not hold, as a crawler asks before it adds
    // them (not part of the whole job).
    let fresh = new_pages(&signer, scheme, n);
    let new = two_passes(&fresh, |_, q| searcher.query(&q.vector, tau).unwrap().len());
    let ((new_p50, new_p99), new_found) = (new.warm, new.found);

    // Every near-duplicate pair, exact, on both cores; the join's own peak
    // from a VmHWM reset to the resident memory it starts with (a bounded
    // join's without the pages the query passes mapped in, which it
    // releases itself).
    let peak_before_join = peak_rss();
    if std::env::var_os("COMPARE_JOIN_MAPPED").is_some() {
        searcher.release_pages();
    }
    reset_peak_rss();
    let start = Instant::now();
    let mut pairs = Vec::new();
    self_join(&searcher, tau, |p| pairs.push((page(p.a), page(p.b))));
    let join_secs = start.elapsed().as_secs_f64();
    let join_peak = peak_rss();
    write_pairs(&dir.join(format!("pairs-neardex-{}.txt", scheme.name())), &pairs);
    let disk = dir_bytes(&index_dir);
    println!(
        "{{\"tool\": \"neardex-{}\", \"documents\": {n}, \"input\": \"{}\", \"sign_docs_per_s\": {sign_rate:.0}, \
         \"sign_html_docs_per_s\": {html_sign_rate}, \"insert_docs_per_s\": {:.0}, \"ingest_seconds\": {ingest_secs:.2}, \"warm_up_seconds\": {warm_up_secs:.3}, \"query_p50_us\": {exact_p50:.1}, \
         \"query_p99_us\": {exact_p99:.1}, \"warm_query_p50_us\": {warm_p50:.1}, \"warm_query_p99_us\": {warm_p99:.1}, \"lsh_query_p50_us\": {lsh_p50:.1}, \"lsh_query_p99_us\": {lsh_p99:.1}, \
         \"new_query_p50_us\": {new_p50:.1}, \"new_query_p99_us\": {new_p99:.1}, \"new_matches\": {new_found}, \
         \"lsh_sample_recall\": {:.5}, \"all_pairs_seconds\": {join_secs:.2}, \"pairs\": {}, \
         \"whole_job_seconds\": {:.2}, \"peak_rss_bytes\": {}, \"ingest_peak_rss_bytes\": {ingest_peak}, \"self_join_peak_rss_bytes\": {join_peak}, {}, \"disk_bytes\": {disk}, \"disk_over_vectors\": {:.3}}}",
        scheme.name(),
        input.file_name().map_or(String::new(), |f| f.to_string_lossy().into_owned()),
        n as f64 / ingest_secs,
        if exact_found == 0 { 1.0 } else { lsh_found as f64 / exact_found as f64 },
        pairs.len(),
        ingest_secs + join_secs,
        peak_before_join.max(join_peak),
        peak_split(),
        disk as f64 / (vector_bytes + key_bytes) as f64
    );
    // COMPARE_OPTIMIZE=1: then `Index::optimize` (every segment merged into
    // one, the catalog compacted), and queries and all pairs again over the
    // one segment: what a batch job that optimizes before its questions
    // gets, and what the optimize costs (counted in its whole job).
    if std::env::var_os("COMPARE_OPTIMIZE").is_some() {
        drop(searcher);
        let start = Instant::now();
        index.optimize().unwrap();
        let optimize_secs = start.elapsed().as_secs_f64();
        let searcher = index.searcher().unwrap();
        searcher.warm_up(warm_up_kind());
        let QueryTimes { exact, .. } = time_queries(&searcher, &queries, tau);
        let ((p50, p99), (warm_p50, warm_p99)) = (exact.cold, exact.warm);
        let start = Instant::now();
        let mut optimized_pairs = 0usize;
        self_join(&searcher, tau, |_| optimized_pairs += 1);
        let join_secs = start.elapsed().as_secs_f64();
        assert_eq!(optimized_pairs, pairs.len(), "the optimized index finds the same pairs");
        println!(
            "{{\"tool\": \"neardex-{}-optimized\", \"documents\": {n}, \"optimize_seconds\": {optimize_secs:.2}, \
             \"query_p50_us\": {p50:.1}, \"query_p99_us\": {p99:.1}, \"warm_query_p50_us\": {warm_p50:.1}, \
             \"warm_query_p99_us\": {warm_p99:.1}, \"all_pairs_seconds\": {join_secs:.2}, \
             \"pairs\": {optimized_pairs}, \"whole_job_seconds\": {:.2}, \"peak_rss_bytes\": {}, \"disk_bytes\": {}}}",
            scheme.name(),
            ingest_secs + optimize_secs + join_secs,
            peak_rss(),
            dir_bytes(&index_dir)
        );
    }
}

/// Word 3-shingles as slices of space-joined tokens (fewer than three
/// tokens: the whole text).
fn word_shingles(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let starts: Vec<usize> = std::iter::once(0).chain(text.match_indices(' ').map(|(i, _)| i + 1)).collect();
    let ends: Vec<usize> = text.match_indices(' ').map(|(i, _)| i).chain(std::iter::once(text.len())).collect();
    if starts.len() < 3 {
        return vec![text];
    }
    (0..=starts.len() - 3).map(|i| &text[starts[i]..ends[i + 2]]).collect()
}

/// gaoya's documented pipeline on word 3-shingles of the token text:
/// MinHasher32 signatures on all cores (rayon), a bulk insert, and every
/// document queried (bulk, all cores).
fn run_gaoya(dir: &Path) {
    use gaoya::minhash::{calculate_minhash_params, MinHashIndex, MinHasher, MinHasher32};
    use rayon::prelude::*;
    let (bands, rows) = calculate_minhash_params(TAU, 128);
    let hasher = MinHasher32::new(bands * rows);
    let input = Scheme::Shingles.input(dir);
    let signatures = |chunk: &[(u64, Vec<u8>)]| -> Vec<Vec<u32>> {
        chunk
            .par_iter()
            .map(|(_, doc)| hasher.create_signature(word_shingles(std::str::from_utf8(doc).unwrap()).into_iter()))
            .collect()
    };
    let read_all = || {
        let mut docs = Docs::open(&input);
        std::iter::from_fn(move || Some(docs.chunk(10_000)).filter(|c| !c.is_empty()))
    };

    let start = Instant::now();
    let mut n = 0u64;
    for chunk in read_all() {
        n += signatures(&chunk).len() as u64;
    }
    let sign_rate = n as f64 / start.elapsed().as_secs_f64();

    let start = Instant::now();
    let mut index: MinHashIndex<u32, u32> = MinHashIndex::new(bands, rows, TAU);
    for chunk in read_all() {
        let ids = chunk.iter().map(|(i, _)| *i as u32).collect();
        index.par_bulk_insert(ids, signatures(&chunk));
    }
    let insert_secs = start.elapsed().as_secs_f64();

    let wanted: HashSet<u64> = sample(n).into_iter().collect();
    let mut times = Vec::new();
    for chunk in read_all() {
        for (_, doc) in chunk.iter().filter(|(i, _)| wanted.contains(i)) {
            let signature = hasher.create_signature(word_shingles(std::str::from_utf8(doc).unwrap()).into_iter());
            let t = Instant::now();
            std::hint::black_box(index.query_owned(&signature));
            times.push(t.elapsed().as_secs_f64());
        }
    }
    let (p50, p99) = percentiles(times);

    // Every document queried: signatures again (gaoya keeps them, keyed by
    // id, so the bulk query by id uses the stored ones).
    let start = Instant::now();
    let ids: Vec<u32> = (0..n as u32).collect();
    let found: Vec<Vec<(u32, u32)>> = ids
        .par_chunks(10_000)
        .map(|chunk| {
            let mut out = Vec::new();
            for &a in chunk {
                for &b in index.query_by_id(&a) {
                    if b > a {
                        out.push((a, b));
                    }
                }
            }
            out
        })
        .collect();
    let pairs: Vec<(u32, u32)> = found.into_iter().flatten().collect();
    let join_secs = start.elapsed().as_secs_f64();
    write_pairs(&dir.join("pairs-gaoya.txt"), &pairs);
    println!(
        "{{\"tool\": \"gaoya\", \"documents\": {n}, \"bands\": {bands}, \"rows\": {rows}, \"sign_docs_per_s\": {sign_rate:.0}, \
         \"insert_docs_per_s\": {:.0}, \"ingest_seconds\": {insert_secs:.2}, \"query_p50_us\": {p50:.1}, \"query_p99_us\": {p99:.1}, \
         \"all_pairs_seconds\": {join_secs:.2}, \"pairs\": {}, \"whole_job_seconds\": {:.2}, \"peak_rss_bytes\": {}, {}}}",
        n as f64 / insert_secs,
        pairs.len(),
        insert_secs + join_secs,
        peak_rss(),
        peak_split()
    );
}
