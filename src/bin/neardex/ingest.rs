//! Reading files, directories and standard input as text, HTML, WARC or
//! JSON Lines, signing their documents on every core, and handing them in
//! input order to a [`Sink`]: `neardex add` commits them in batches,
//! `neardex query` queries the index with each.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use neardex::store::{Document, Index, IndexError, InsertIfNew, Metadata, Searcher, Writer};
use neardex::{DocumentSignature, Signer, Threshold};
use serde_json::json;

/// Documents per durable commit, by default, through the writer.
pub const BATCH: usize = 1_000;
/// Documents per durable commit, by default, through a bulk writer
/// (`--bulk`), whose every commit writes a segment. Commits of 200,000
/// leave a load of up to 1.6M documents unmerged (eight segments of a
/// tier, 200,000 documents, are what the merge policy waits for): 500,000
/// generated pages as JSON Lines went in at 51,038-54,249 docs/s against
/// 43,777-51,532 with 50,000 a commit (three alternated pairs), in 0.93 GB
/// against 1.38-1.42 GB.
pub const BULK_BATCH: usize = 200_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Auto,
    Text,
    Html,
    Warc,
    Jsonl,
}

/// How inputs are read.
#[derive(Clone)]
pub struct InputOptions {
    pub format: Format,
    /// JSON Lines field holding the key; `None` keys each line by its
    /// file and line number (`FILE:LINE`).
    pub key_field: Option<String>,
    /// JSON Lines field holding the text.
    pub text_field: String,
    /// Keep what each JSON line or WARC record document was read from
    /// with it (for `add --kept`).
    pub keep_sources: bool,
}

pub struct AddOptions {
    pub input: InputOptions,
    pub replace: bool,
    /// Add a document only if no stored or earlier added one is at least
    /// this similar to it ([`Writer::insert_if_new`]).
    pub skip_similar: Option<Threshold>,
    /// Commit through [`Index::bulk_writer`].
    pub bulk: bool,
    /// Documents per commit.
    pub batch: usize,
    /// Where the JSON lines (or WARC records) of the documents added are
    /// written, as read.
    pub kept: Option<PathBuf>,
}

#[derive(Default)]
pub struct Summary {
    pub added: u64,
    pub exact_duplicates: u64,
    /// Documents not added for `AddOptions::skip_similar`.
    pub near_duplicates: u64,
    /// What was added without signatures, and what was left out as not a
    /// page.
    pub unsigned: Unsigned,
    /// Inputs skipped, each told on standard error when it is (a count
    /// only: re-adding a corpus of millions is millions of them).
    pub skipped: u64,
}

impl Summary {
    fn skip(&mut self, reason: &str) {
        self.skipped += 1;
        tell_skipped(reason);
    }
}

/// One input skipped, told on standard error when it is met.
pub fn tell_skipped(reason: &str) {
    eprintln!("neardex: skipped {reason}");
}

/// What the inputs held that no query can match: documents with no
/// signatures under the index's scheme (under SpotSigs a page without the
/// English stopwords its antecedents need: another language, or no running
/// text), and WARC records and files left out as not pages (a response
/// with a status other than 2xx or a payload not decoded, a payload whose
/// media type is not a page's, a binary file), by reason.
#[derive(Default)]
pub struct Unsigned {
    pub without_signatures: u64,
    not_pages: std::collections::BTreeMap<String, u64>,
}

impl Unsigned {
    pub fn not_a_page(&mut self, reason: String) {
        *self.not_pages.entry(reason).or_default() += 1;
    }

    pub fn not_pages(&self) -> u64 {
        self.not_pages.values().sum()
    }

    /// Tells standard error what of the `of` documents `verb` (added,
    /// queried) had no signatures, with the remedy, and what inputs were
    /// not pages, the most frequent reasons first.
    pub fn print_notes(&self, of: u64, verb: &str) {
        let n = self.without_signatures;
        if n > 0 {
            eprintln!(
                "neardex: {n} of {of} documents {verb} had no signatures under this index's scheme and match \
                 nothing (SpotSigs needs its antecedents, English stopwords by default, so pages in other languages \
                 or without running text have none). To sign them, create the index with --fallback words:3 (word \
                 shingles for such documents, SpotSigs for the rest), or with --antecedents set to that language's \
                 stopwords"
            );
        }
        if self.not_pages.is_empty() {
            return;
        }
        let mut types: Vec<(&String, &u64)> = self.not_pages.iter().collect();
        types.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let shown: Vec<String> = types.iter().take(5).map(|(t, n)| format!("{t} {n}")).collect();
        let more = if types.len() > 5 { ", ..." } else { "" };
        let total = self.not_pages();
        let what = if total == 1 { "input that is not a page" } else { "inputs that are not pages" };
        eprintln!(
            "neardex: left out {total} {what} ({}{more}): only HTML, XHTML and plain text of successful (2xx) \
             responses are signed",
            shown.join(", ")
        );
    }
}

/// Where `add` reports each document it did not add for being similar to
/// one stored or added before: `{"not_added": key, "url", "similar_to":
/// [{"key", "url", "similarity"}]}` (`url` where known).
pub type Report<'r> = &'r mut dyn FnMut(serde_json::Value) -> Result<(), String>;

struct Batch<'a> {
    index: &'a Index,
    writer: Option<Writer<'a>>,
    staged: usize,
    replace: bool,
    skip_similar: Option<(Threshold, Report<'a>)>,
    /// Under `skip_similar`, the documents not yet given to
    /// `Writer::insert_batch_if_new`.
    held: Vec<Signed>,
    /// Where the lines of the documents added go (`add --kept`).
    kept: Option<Kept>,
    bulk: bool,
    size: usize,
}

/// Documents given to `Writer::insert_batch_if_new` at once (or a
/// commit's, when fewer): their queries of the stored documents run on
/// every core.
const SIMILAR_BATCH: usize = 1024;

/// A document of the inputs, signed, as the pipeline hands it to a sink.
pub struct Signed {
    /// A file's path, a WARC record's id, a JSON line's key field.
    pub key: String,
    pub signature: DocumentSignature,
    pub metadata: Metadata,
    /// What the document was read from, when `InputOptions::keep_sources`
    /// asked for it.
    pub source: Option<Source>,
}

/// What a document was read from, as read, for `add --kept`.
pub enum Source {
    /// A JSON line, without its line end.
    Line(Vec<u8>),
    /// A WARC record ([`neardex::warc::WarcRecord::to_bytes`]).
    Record(Vec<u8>),
}

impl<'a> Batch<'a> {
    fn add(&mut self, document: Signed, summary: &mut Summary) -> Result<(), String> {
        if crate::progress::interrupted() {
            // Stop between documents; the caller commits what was added.
            return Ok(());
        }
        if self.skip_similar.is_some() {
            self.held.push(document);
            if self.held.len() >= SIMILAR_BATCH.min(self.size) {
                self.insert_held(summary)?;
            }
            return Ok(());
        }
        let Signed { key, signature, metadata, source } = document;
        let replace = self.replace;
        let without_signatures = signature.vector.is_empty();
        let writer = self.writer()?;
        // The signature is the writer's from here: moved, not copied.
        let outcome = if replace {
            writer.replace(&key, Document::Signatures(&signature), metadata)
        } else {
            writer.insert_signed(&key, signature, metadata)
        };
        self.count(outcome, without_signatures, source, summary)?;
        self.commit_when_full()
    }

    fn writer(&mut self) -> Result<&mut Writer<'a>, String> {
        if self.writer.is_none() {
            let writer = if self.bulk { self.index.bulk_writer() } else { self.index.writer() };
            self.writer = Some(writer.map_err(|e| e.to_string())?);
        }
        self.writer.as_mut().ok_or_else(|| "no writer".to_owned())
    }

    /// Inserts the held documents unless similar to one stored or added
    /// before, reporting each that is not.
    fn insert_held(&mut self, summary: &mut Summary) -> Result<(), String> {
        let Some((tau, _)) = self.skip_similar else { return Ok(()) };
        let held = std::mem::take(&mut self.held);
        let documents = held.iter().map(|h| (h.key.as_str(), Document::Signatures(&h.signature), h.metadata.clone()));
        let results = self.writer()?.insert_batch_if_new(documents, tau);
        for (document, result) in held.into_iter().zip(results) {
            let outcome = match result {
                Ok(InsertIfNew::Inserted(outcome)) => Ok(outcome),
                Ok(InsertIfNew::Matches(matches)) => {
                    self.report_similar(&document, &matches)?;
                    summary.near_duplicates += 1;
                    continue;
                }
                Err(e) => Err(e),
            };
            self.count(outcome, document.signature.vector.is_empty(), document.source, summary)?;
        }
        self.commit_when_full()
    }

    /// `{"not_added": key, "url", "similar_to": [{"key", "url",
    /// "similarity"}]}`, each `url` where the document has one.
    fn report_similar(&mut self, document: &Signed, matches: &[neardex::oracle::Match]) -> Result<(), String> {
        let writer = self.writer.as_ref().ok_or("no writer")?;
        let mut similar = Vec::with_capacity(matches.len());
        for m in matches {
            let (key, url) = match writer.describe(m.id).map_err(|e| e.to_string())? {
                Some(info) => (info.key, info.metadata.url),
                None => Default::default(),
            };
            similar.push(crate::query::similar(&key, url.as_deref(), m.overlap.value()));
        }
        let mut line = crate::query::named("not_added", &document.key, document.metadata.url.as_deref());
        line["similar_to"] = json!(similar);
        let (_, report) = self.skip_similar.as_mut().ok_or("no report")?;
        report(line)
    }

    /// Counts one insert's outcome, and writes an added document's line
    /// or record out under `--kept`.
    fn count(
        &mut self,
        outcome: Result<neardex::store::InsertOutcome, IndexError>,
        without_signatures: bool,
        source: Option<Source>,
        summary: &mut Summary,
    ) -> Result<(), String> {
        match outcome {
            Ok(o) => {
                summary.added += 1;
                summary.exact_duplicates += u64::from(o.exact_duplicate_of.is_some());
                summary.unsigned.without_signatures += u64::from(without_signatures);
                if let (Some(kept), Some(source)) = (&mut self.kept, source) {
                    kept.write(source)?;
                }
            }
            Err(IndexError::DuplicateKey { key }) => {
                summary.skip(&format!("{key}: key already in the index (use --replace)"));
            }
            Err(e) => return Err(e.to_string()),
        }
        self.staged += 1;
        Ok(())
    }

    fn commit_when_full(&mut self) -> Result<(), String> {
        if self.staged >= self.size {
            self.commit_staged(true)?;
        }
        Ok(())
    }

    /// Inserts what is held, then commits.
    fn commit(&mut self, summary: &mut Summary) -> Result<(), String> {
        self.insert_held(summary)?;
        self.commit_staged(false)
    }

    /// Commits the staged documents; a bulk load's writer, when more
    /// batches follow, hands the buffers its segment was built in to the
    /// next (`Writer::commit_and_continue`).
    fn commit_staged(&mut self, more: bool) -> Result<(), String> {
        if let Some(writer) = self.writer.take() {
            let committing = |e: neardex::store::IndexError| format!("committing: {e}");
            if more && self.bulk {
                self.writer = Some(writer.commit_and_continue().map_err(committing)?.1);
            } else {
                writer.commit().map_err(committing)?;
            }
        }
        self.staged = 0;
        Ok(())
    }
}

/// The file `add --kept` writes: the JSON lines of the documents added,
/// or their WARC records when its name ends in `.warc` (before a
/// compression suffix); plain, or compressed by its name's `.gz` or `.zst`
/// suffix (WARC records each in a gzip member or zstd frame of its own, as
/// WARC tools expect), on a thread of its own (compressing with zstd on
/// the inserting thread added a third to `add --skip-similar`'s time)
/// that takes them a mebibyte at a time.
struct Kept {
    /// WARC records, not JSON lines.
    records: bool,
    chunk: Chunk,
    sender: Option<std::sync::mpsc::SyncSender<Chunk>>,
    writer: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

/// Lines or records to write, and where each record ends.
#[derive(Default)]
struct Chunk {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Chunk {
    const SIZE: usize = 1 << 20;

    fn records(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(start, &end)| &self.bytes[start..end])
    }
}

impl Kept {
    fn create(path: &Path) -> Result<Kept, String> {
        use std::io::Write;
        /// Writes every chunk that comes, then hands the writer back.
        fn pump<W: Write>(chunks: std::sync::mpsc::Receiver<Chunk>, mut out: W) -> std::io::Result<W> {
            for chunk in chunks {
                out.write_all(&chunk.bytes)?;
            }
            Ok(out)
        }
        let failed = |e: std::io::Error| format!("--kept {}: {e}", path.display());
        let mut file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).map_err(failed)?);
        let name = path.to_string_lossy().to_ascii_lowercase();
        let (compression, stem) = compression_suffix(&name).unwrap_or(("", &name));
        let records = stem.ends_with(".warc");
        let (gzip, zstd) = (compression == ".gz", matches!(compression, ".zst" | ".zstd"));
        let (sender, chunks) = std::sync::mpsc::sync_channel::<Chunk>(4);
        let writer = std::thread::Builder::new()
            .name("kept".into())
            .spawn(move || {
                // A compressed stream is ended, then the file written out,
                // also when the sender goes without `finish` (an error).
                let mut file = match (gzip, zstd, records) {
                    (true, _, false) => {
                        pump(chunks, flate2::write::GzEncoder::new(file, flate2::Compression::default()))?.finish()?
                    }
                    (_, true, false) => pump(chunks, zstd::stream::write::Encoder::new(file, 3)?)?.finish()?,
                    (true, _, true) => {
                        for chunk in chunks {
                            for record in chunk.records() {
                                let mut member =
                                    flate2::write::GzEncoder::new(&mut file, flate2::Compression::default());
                                member.write_all(record)?;
                                member.finish()?;
                            }
                        }
                        file
                    }
                    (_, true, true) => {
                        let mut compressor = zstd::bulk::Compressor::new(3)?;
                        for chunk in chunks {
                            for record in chunk.records() {
                                file.write_all(&compressor.compress(record)?)?;
                            }
                        }
                        file
                    }
                    _ => pump(chunks, file)?,
                };
                file.flush()
            })
            .map_err(failed)?;
        Ok(Kept { records, chunk: Chunk::default(), sender: Some(sender), writer: Some(writer) })
    }

    /// Why a document read from `source` cannot be written to this file.
    fn refuses(&self, key: &str, source: Option<&Source>) -> Option<String> {
        match (self.records, source) {
            (false, Some(Source::Line(_))) | (true, Some(Source::Record(_))) => None,
            (false, _) => {
                Some(format!("--kept writes the JSON lines of the documents added, and {key} is not a JSON line"))
            }
            (true, _) => Some(format!(
                "--kept names a WARC file, to which the WARC records of the documents added are written, and {key} is \
                 not a WARC record"
            )),
        }
    }

    fn write(&mut self, source: Source) -> Result<(), String> {
        let bytes = &mut self.chunk.bytes;
        match source {
            Source::Line(line) => {
                bytes.extend_from_slice(&line);
                bytes.push(b'\n');
            }
            Source::Record(record) => {
                bytes.extend_from_slice(&record);
                self.chunk.ends.push(bytes.len());
            }
        }
        if self.chunk.bytes.len() >= Chunk::SIZE {
            self.send()?;
        }
        Ok(())
    }

    fn send(&mut self) -> Result<(), String> {
        let chunk = std::mem::take(&mut self.chunk);
        self.chunk.bytes.reserve(Chunk::SIZE);
        let sent = self.sender.as_ref().is_some_and(|s| s.send(chunk).is_ok());
        if sent {
            Ok(())
        } else {
            // The writing thread stopped: its error says why.
            self.finish()
        }
    }

    /// Writes what is left and waits for the file to be written.
    fn finish(&mut self) -> Result<(), String> {
        if let Some(sender) = self.sender.take() {
            let _ = sender.send(std::mem::take(&mut self.chunk));
        }
        match self.writer.take().map(std::thread::JoinHandle::join) {
            Some(Ok(Ok(()))) | None => Ok(()),
            Some(Ok(Err(e))) => Err(format!("--kept: {e}")),
            Some(Err(_)) => Err("--kept: the writing thread panicked".to_owned()),
        }
    }
}

/// The compression suffix a (lower-case) file name ends in, `.gz`, `.zst`
/// or `.zstd`, and the name before it.
fn compression_suffix(name: &str) -> Option<(&'static str, &str)> {
    [".gz", ".zst", ".zstd"].into_iter().find_map(|suffix| Some((suffix, name.strip_suffix(suffix)?)))
}

fn detect(path: &Path, requested: Format) -> Format {
    if requested != Format::Auto {
        return requested;
    }
    let name = path.to_string_lossy().to_ascii_lowercase();
    // The format is the name's before a compression suffix (the bytes
    // tell the compression: `read_input`).
    let name = compression_suffix(&name).map_or(name.as_str(), |(_, before)| before);
    if name.ends_with(".warc") {
        Format::Warc
    } else if [".jsonl", ".ndjson", ".json"].iter().any(|e| name.ends_with(e)) {
        // Corpora name their JSON Lines .json too (C4's c4-train.*.json.gz).
        Format::Jsonl
    } else if name.ends_with(".html") || name.ends_with(".htm") {
        Format::Html
    } else {
        Format::Text
    }
}

/// Every file under `path` (itself if it is a file), sorted. Below `path`,
/// what cannot be read (a dangling symbolic link, a directory without
/// permission) and a directory reached again through a symbolic link (a
/// loop, or a second way in) are left out, each with a line in `skipped`;
/// `path` itself must be readable.
pub fn files_under(path: &Path, out: &mut Vec<PathBuf>, skipped: &mut Vec<String>) -> Result<(), String> {
    walk(path, out, skipped, &mut std::collections::HashSet::new()).map_err(|e| format!("{}: {e}", path.display()))
}

fn walk(
    path: &Path,
    out: &mut Vec<PathBuf>,
    skipped: &mut Vec<String>,
    seen: &mut std::collections::HashSet<PathBuf>,
) -> std::io::Result<()> {
    if !std::fs::metadata(path)?.is_dir() {
        out.push(path.to_owned());
        return Ok(());
    }
    if !seen.insert(std::fs::canonicalize(path)?) {
        skipped.push(format!("{}: a directory already read (through a symbolic link)", path.display()));
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for entry in entries {
        if let Err(e) = walk(&entry, out, skipped, seen) {
            skipped.push(format!("{}: {e}", entry.display()));
        }
    }
    Ok(())
}

/// What takes the documents of the inputs, signed, in input order.
pub trait Sink {
    /// A document, signed.
    fn document(&mut self, document: Signed) -> Result<(), String>;
    /// Something in the input that is not a document, and why.
    fn skipped(&mut self, reason: String);
    /// A WARC record that is not a page (by its HTTP status, an encoding
    /// not decoded, or its media type: `HttpResponse::why_not_a_page`), or
    /// a binary file; `reason` is what it is counted under.
    fn not_a_page(&mut self, reason: String);
    /// The stored signature of `key`: the target of a WARC revisit record
    /// not seen earlier in its file.
    fn stored(&self, key: &str) -> Result<Option<DocumentSignature>, String>;
    /// A record that is no document but goes with the documents kept
    /// (`add --kept`): a WARC file's warcinfo record.
    fn kept_as_read(&mut self, _source: Source) -> Result<(), String> {
        Ok(())
    }
    /// The inputs are done: finish what is held back.
    fn finish(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// Reads every input (files, directories recursively, `-` for standard
/// input) into `pipeline`, with a progress bar of the files' bytes on a
/// terminal; stops between documents after Ctrl-C when the caller catches
/// it ([`crate::progress::catch_interrupt`]). Three stages, each on its
/// own thread: the reading (decompressing a WARC file, parsing records and
/// lines), the signing (each turn on every core, in a pool of lower
/// priority: [`signing_pool`]) and this thread, which hands the signed
/// items to the sink in input order. Up to [`SIGNED_AHEAD`] signed turns
/// wait for the sink, so that signing goes on while it commits.
pub fn read_inputs<S: Sink>(
    paths: &[PathBuf],
    options: &InputOptions,
    pipeline: &mut Pipeline<S>,
) -> Result<(), String> {
    // One turn waits in the channel while the reader fills the next: at
    // most three turns' bytes are read and not yet being signed.
    let (sender, turns) = std::sync::mpsc::sync_channel::<Vec<Item>>(1);
    let (paths, options) = (paths.to_vec(), options.clone());
    let reader = std::thread::Builder::new()
        .name("reader".into())
        .spawn(move || {
            let mut turn = Turn { sender, items: Vec::new(), bytes: 0 };
            read_all(&paths, &options, &mut turn)?;
            turn.send()
        })
        .map_err(|e| format!("starting the reading thread: {e}"))?;
    let (signed_sender, signed_turns) = std::sync::mpsc::sync_channel::<Vec<Item>>(SIGNED_AHEAD);
    let signer = pipeline.signer.clone();
    let signing = std::thread::Builder::new()
        .name("signing".into())
        .spawn(move || {
            use rayon::prelude::*;
            let pool = signing_pool();
            for items in turns {
                let sign = || items.into_par_iter().map(|item| item.signed(&signer)).collect::<Vec<Item>>();
                let signed = match &pool {
                    Some(pool) => pool.install(sign),
                    None => sign(),
                };
                // The sink has stopped: so does the signing, and the
                // reader at its next send.
                if signed_sender.send(signed).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| format!("starting the signing thread: {e}"))?;
    // The sink's error ends the command at once: the signing thread stops
    // at its next send, the reader at its own, or, waiting on an input that
    // has nothing to give (a terminal, a pipe kept open), goes with the
    // process.
    signed_turns.iter().try_for_each(|items| pipeline.deliver_turn(items))?;
    signing.join().map_err(|_| "a signing thread panicked".to_owned())?;
    reader.join().map_err(|_| "the reading thread panicked".to_owned())?
}

/// Signed turns that may wait for the sink (each of at most
/// [`TURN_ITEMS`] documents or about [`TURN_BYTES`] of input): 16,384
/// generated pages, in at most 64 MiB of input. With bulk commits of
/// 200,000, 128 and 512 turns were no faster beyond the noise (500,000
/// pages, three alternated runs each) and held 0.1 GB more.
const SIGNED_AHEAD: usize = 32;

/// A pool of every core's worth of threads for signing, at a lower
/// priority than the rest of the process: the thread that inserts and
/// commits (the pipeline's one serial stage), the index's maintenance and
/// its table builds come first, and signing takes the cores they leave.
/// `None` when the threads cannot be started (then the signing thread
/// signs alone).
fn signing_pool() -> Option<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("signing-{i}"))
        .start_handler(|_| lower_this_threads_priority())
        .build()
        .ok()
}

/// The nice value the signing threads take: 10, a tenth of a nice-0
/// thread's share of a core when both want it.
const SIGNING_NICE: i32 = 10;

/// Lowers the calling thread's priority to [`SIGNING_NICE`] (Linux
/// schedules threads apart: `setpriority` on the thread's id; raising a
/// nice value needs no privilege). A failure leaves it as it was: only the
/// speed depends on it.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn lower_this_threads_priority() {
    // SAFETY: two system calls that take no pointers, on this thread's
    // own id; neither touches memory of the process.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid);
        if let Ok(tid) = libc::id_t::try_from(tid) {
            libc::setpriority(libc::PRIO_PROCESS, tid, SIGNING_NICE);
        }
    }
}

/// Elsewhere `setpriority` would change the whole process: left alone.
#[cfg(not(target_os = "linux"))]
fn lower_this_threads_priority() {}

fn read_all(paths: &[PathBuf], options: &InputOptions, turn: &mut Turn) -> Result<(), String> {
    // Each path's files (none for standard input) and what its walk left out.
    let mut listings = Vec::with_capacity(paths.len());
    for path in paths {
        let (mut files, mut skipped) = (Vec::new(), Vec::new());
        if path.as_os_str() != "-" {
            files_under(path, &mut files, &mut skipped)?;
        }
        listings.push((files, skipped));
    }
    let total: u64 =
        listings.iter().flat_map(|(files, _)| files).filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum();
    let bar = crate::progress::bytes(total);
    for (path, (files, skipped)) in paths.iter().zip(listings) {
        if crate::progress::interrupted() {
            break;
        }
        if path.as_os_str() == "-" {
            let format = if options.format == Format::Auto { Format::Text } else { options.format };
            read_input("-", std::io::stdin().lock(), format, options, turn)?;
            continue;
        }
        for reason in skipped {
            turn.push(Item::skip(reason))?;
        }
        for file in files {
            if crate::progress::interrupted() {
                break;
            }
            let name = file.to_string_lossy().into_owned();
            let opened = match std::fs::File::open(&file) {
                Ok(opened) => opened,
                // A file the walk found may be gone or unreadable: left
                // out, as the walk leaves such entries out.
                Err(e) if file != *path => {
                    turn.push(Item::skip(format!("{name}: {e}")))?;
                    continue;
                }
                Err(e) => return Err(format!("{name}: {e}")),
            };
            let input = std::io::BufReader::with_capacity(1 << 20, Counted { inner: opened, bar: &bar });
            read_input(&name, input, detect(&file, options.format), options, turn)?;
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// The items of the next turn, as the reading thread collects them.
struct Turn {
    sender: std::sync::mpsc::SyncSender<Vec<Item>>,
    items: Vec<Item>,
    bytes: usize,
}

impl Turn {
    fn push(&mut self, item: Item) -> Result<(), String> {
        if crate::progress::interrupted() {
            return Ok(());
        }
        self.bytes += item.size();
        self.items.push(item);
        if self.items.len() >= TURN_ITEMS || self.bytes >= TURN_BYTES {
            self.send()?;
        }
        Ok(())
    }

    /// Hands the items to the pipeline's thread; fails when it has
    /// stopped taking them (its error is the one reported).
    fn send(&mut self) -> Result<(), String> {
        self.bytes = 0;
        self.sender.send(std::mem::take(&mut self.items)).map_err(|_| "the pipeline stopped".to_owned())
    }
}

/// Whether the inputs may hold more than one document: more than one
/// path, standard input, a directory, or a file read as WARC or JSON Lines.
pub fn may_hold_many(paths: &[PathBuf], format: Format) -> bool {
    match paths {
        [path] => {
            path.as_os_str() == "-" || path.is_dir() || matches!(detect(path, format), Format::Warc | Format::Jsonl)
        }
        _ => paths.len() > 1,
    }
}

pub fn add<'a>(
    index: &'a Index,
    paths: &[PathBuf],
    options: &AddOptions,
    report: Report<'a>,
) -> Result<Summary, String> {
    let started = Instant::now();
    let inserter = Inserter {
        batch: Batch {
            index,
            writer: None,
            staged: 0,
            replace: options.replace,
            skip_similar: options.skip_similar.map(|tau| (tau, report)),
            held: Vec::new(),
            kept: options.kept.as_deref().map(Kept::create).transpose()?,
            bulk: options.bulk,
            size: options.batch.max(1),
        },
        summary: Summary::default(),
    };
    let mut pipeline = Pipeline::new(index.signer().clone(), inserter);
    crate::progress::catch_interrupt();
    read_inputs(paths, &options.input, &mut pipeline)?;
    let mut inserter = pipeline.finish()?;
    inserter.batch.commit(&mut inserter.summary)?;
    if !crate::progress::interrupted() {
        // The flushes and merges the commits asked for, on the index's
        // thread (after Ctrl-C only a running one finishes, as the index
        // closes).
        index.wait_for_maintenance();
    }
    if let Some(error) = index.maintenance_error() {
        // Nothing committed is lost: documents a flush failed to write stay
        // pending (durable in the catalog) and the next commit retries it.
        eprintln!("warning: index maintenance failed: {error}; every document added is committed");
    }
    if let Some(mut kept) = inserter.batch.kept.take() {
        kept.finish()?;
    }
    let summary = inserter.summary;
    if crate::progress::interrupted() {
        return Err(format!(
            "interrupted: the {} documents added before Ctrl-C are committed; the rest was not added",
            summary.added
        ));
    }
    let secs = started.elapsed().as_secs_f64();
    let similar = match options.skip_similar {
        Some(tau) => format!(", {} not added as at least {} similar to another", summary.near_duplicates, tau.value()),
        None => String::new(),
    };
    eprintln!(
        "added {} documents ({} exact duplicates){similar}, skipped {}, in {:.2} s ({:.0} docs/s)",
        summary.added,
        summary.exact_duplicates,
        summary.skipped,
        secs,
        summary.added as f64 / secs.max(1e-9)
    );
    summary.unsigned.print_notes(summary.added, "added");
    Ok(summary)
}

/// What the input holds at one place, in input order: a document to sign,
/// or something the inserting side handles.
enum Work {
    /// Plain text.
    Text(String),
    /// Plain-text bytes: by their byte-order mark, else as UTF-8, lossily
    /// (`neardex::text::decode_text`).
    Bytes(Vec<u8>),
    /// An HTML page, with the charset an HTTP header declared if any.
    Html(Vec<u8>, Option<&'static encoding_rs::Encoding>),
    /// A signed document (the signing side's output).
    Signed(DocumentSignature),
    /// A WARC revisit: of the record with the id `target` (its
    /// `WARC-Refers-To`, sought in the file and in the index), or of one
    /// earlier in the file with one of these `names` (see `Item::names`);
    /// `at` names the revisit.
    Revisit { target: Option<String>, names: Vec<u64>, at: String },
    /// Not a document: told as skipped, and counted.
    Skip(String),
    /// A WARC record that is not a page (an error page or redirect, an
    /// image, a PDF, a script), or a binary file: counted by its reason
    /// (`HTTP 404`, a media type, `binary file`), not listed one by one.
    NotPage(String),
    /// The end of an input file: its records' signatures are forgotten.
    EndOfFile,
    /// A record kept with the documents, not one (a warcinfo record, read
    /// under `--kept`).
    Info,
}

struct Item {
    key: String,
    metadata: Metadata,
    work: Work,
    /// What the item was read from, when sources are kept.
    source: Option<Source>,
    /// Other names by which a later revisit in the same file may name
    /// this WARC record (`record_name`): its target URI and date, its
    /// payload digest, its target URI (the latest record of a URI).
    names: Vec<u64>,
}

impl Item {
    fn skip(reason: String) -> Item {
        Item {
            key: String::new(),
            metadata: Metadata::default(),
            work: Work::Skip(reason),
            source: None,
            names: Vec::new(),
        }
    }

    /// Signs a document; everything else passes through.
    fn signed(self, signer: &Signer) -> Item {
        let signature = match &self.work {
            Work::Text(text) => signer.sign_text(text),
            Work::Bytes(bytes) => signer.sign_text(&neardex::text::decode_text(bytes)),
            Work::Html(html, declared) => signer.sign_html_declared(html, *declared),
            _ => return self,
        };
        Item { work: Work::Signed(signature), ..self }
    }

    fn size(&self) -> usize {
        match &self.work {
            Work::Text(text) => text.len(),
            Work::Bytes(bytes) | Work::Html(bytes, _) => bytes.len(),
            _ => 0,
        }
    }
}

/// Items signed per turn of the pipeline, and the bytes that end a turn
/// sooner (large documents).
const TURN_ITEMS: usize = 512;
const TURN_BYTES: usize = 2 << 20;

/// The signing and the sink of the pipeline ([`read_inputs`]): the sink
/// takes the signed items in input order, WARC revisits resolved against
/// the records before them.
pub struct Pipeline<S> {
    signer: Signer,
    sink: S,
    /// The current file's WARC records, for its revisits.
    seen: Seen,
}

impl<S: Sink> Pipeline<S> {
    pub fn new(signer: Signer, sink: S) -> Self {
        Pipeline { signer, sink, seen: Seen::default() }
    }

    /// Hands the items of a signed turn to the sink, in order.
    fn deliver_turn(&mut self, signed: Vec<Item>) -> Result<(), String> {
        let (sink, seen) = (&mut self.sink, &mut self.seen);
        signed.into_iter().try_for_each(|item| deliver(sink, seen, item))
    }

    /// Finishes the sink and returns it.
    pub fn finish(mut self) -> Result<S, String> {
        self.sink.finish()?;
        Ok(self.sink)
    }
}

/// The signatures of the current file's WARC records, by record id and
/// by the other names a revisit may use (`Item::names`).
#[derive(Default)]
struct Seen {
    signatures: Vec<DocumentSignature>,
    by_id: HashMap<String, usize>,
    by_name: HashMap<u64, usize>,
}

impl Seen {
    fn remember(&mut self, id: &str, names: Vec<u64>, signature: &DocumentSignature) {
        let at = self.signatures.len();
        self.signatures.push(signature.clone());
        self.by_id.insert(id.to_owned(), at);
        self.by_name.extend(names.into_iter().map(|name| (name, at)));
    }

    /// The signature of the record `target` names, or else of the first
    /// of `names` known.
    fn find(&self, target: Option<&str>, names: &[u64]) -> Option<&DocumentSignature> {
        let by_id = target.and_then(|id| self.by_id.get(id));
        let at = by_id.or_else(|| names.iter().find_map(|name| self.by_name.get(name)))?;
        self.signatures.get(*at)
    }

    fn clear(&mut self) {
        self.signatures.clear();
        self.by_id.clear();
        self.by_name.clear();
    }
}

/// Hands one signed item to `sink`: a revisit as the signature of its
/// target (from `seen`, the current file's records, or the sink's stored
/// documents).
fn deliver(sink: &mut impl Sink, seen: &mut Seen, item: Item) -> Result<(), String> {
    let Item { key, metadata, work, source, names } = item;
    let signature = match work {
        Work::Signed(signature) => signature,
        Work::Revisit { target, names: wanted, at } => {
            let found = match (seen.find(target.as_deref(), &wanted), &target) {
                (Some(s), _) => Some(s.clone()),
                (None, Some(t)) => sink.stored(t)?,
                (None, None) => None,
            };
            match found {
                Some(s) => s,
                None => {
                    sink.skipped(format!("{at}: revisit of a record not in the index"));
                    return Ok(());
                }
            }
        }
        Work::Skip(reason) => {
            sink.skipped(reason);
            return Ok(());
        }
        Work::NotPage(reason) => {
            sink.not_a_page(reason);
            return Ok(());
        }
        Work::EndOfFile => {
            seen.clear();
            return Ok(());
        }
        Work::Info => return source.map_or(Ok(()), |source| sink.kept_as_read(source)),
        Work::Text(_) | Work::Bytes(_) | Work::Html(..) => return Err("an item was not signed".to_owned()),
    };
    // Only WARC records may be the target of a revisit later in the
    // same file.
    if metadata.warc_record_id.is_some() {
        seen.remember(&key, names, &signature);
    }
    sink.document(Signed { key, signature, metadata, source })
}

/// The inserting side of `neardex add`: the batch and the summary.
struct Inserter<'a> {
    batch: Batch<'a>,
    summary: Summary,
}

impl Sink for Inserter<'_> {
    fn document(&mut self, document: Signed) -> Result<(), String> {
        if let Some(refused) = self.batch.kept.as_ref().and_then(|k| k.refuses(&document.key, document.source.as_ref()))
        {
            return Err(refused);
        }
        self.batch.add(document, &mut self.summary)
    }

    fn skipped(&mut self, reason: String) {
        self.summary.skip(&reason);
    }

    fn not_a_page(&mut self, reason: String) {
        self.summary.unsigned.not_a_page(reason);
    }

    fn stored(&self, key: &str) -> Result<Option<DocumentSignature>, String> {
        stored_signature(&self.batch.index.searcher().map_err(|e| e.to_string())?, key)
    }

    /// Written where it stands among the documents: after those held for
    /// `--skip-similar`, which are inserted first.
    fn kept_as_read(&mut self, source: Source) -> Result<(), String> {
        if self.batch.kept.as_ref().is_some_and(|kept| kept.records) {
            self.batch.insert_held(&mut self.summary)?;
            if let Some(kept) = &mut self.batch.kept {
                kept.write(source)?;
            }
        }
        Ok(())
    }
}

/// A reader that advances the progress bar by the bytes it reads.
struct Counted<'b, R> {
    inner: R,
    bar: &'b indicatif::ProgressBar,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(out)?;
        self.bar.inc(n as u64);
        Ok(n)
    }
}

/// Whether a file's bytes are binary, as git decides: a NUL byte in the
/// first 8,000, unless a UTF-16 byte order mark starts them.
fn looks_binary(bytes: &[u8]) -> bool {
    let utf16 = bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]);
    !utf16 && memchr::memchr(0, &bytes[..bytes.len().min(8000)]).is_some()
}

/// Reads one input into the turn, decompressed as its first bytes say:
/// zstd (every frame; long-mode windows; the dictionary frame that may
/// start a `.warc.zst` file), or gzip unless it is a WARC file
/// (whose reader takes gzip member by member, and reports where a stream
/// breaks). A compressed stream that breaks off or is damaged ends the
/// input with what was read before it, and is reported as skipped.
fn read_input(
    name: &str,
    mut input: impl std::io::BufRead,
    format: Format,
    options: &InputOptions,
    turn: &mut Turn,
) -> Result<(), String> {
    let head = input.fill_buf().map_err(|e| format!("{name}: {e}"))?;
    let zstd = neardex::warc::starts_as("zstd", head);
    let dictionary_frame = head.starts_with(&ZSTD_DICTIONARY_MAGIC);
    let (kind, decoder): (&str, Box<dyn Read + '_>) = if zstd || dictionary_frame {
        let dictionary = if dictionary_frame {
            zstd_dictionary(&mut input).map_err(|e| format!("{name}: {e}"))?
        } else {
            Vec::new()
        };
        let mut decoder =
            zstd::stream::read::Decoder::with_dictionary(input, &dictionary).map_err(|e| format!("{name}: {e}"))?;
        decoder.window_log_max(31).map_err(|e| format!("{name}: {e}"))?;
        ("zstd", Box::new(decoder))
    } else if neardex::warc::starts_as("gzip", head) && format != Format::Warc {
        ("gzip", Box::new(flate2::read::MultiGzDecoder::new(input)))
    } else {
        return read_documents(name, input, format, options, turn);
    };
    let mut decoded = std::io::BufReader::with_capacity(1 << 20, UntilBroken { inner: decoder, error: None });
    read_documents(name, &mut decoded, format, options, turn)?;
    if let Some(e) = decoded.into_inner().error {
        turn.push(Item::skip(format!("{name}: {kind} stream broken ({e}); the rest of the file is unreadable")))?;
    }
    Ok(())
}

/// A skippable frame of magic 0x184D2A5D: a `.warc.zst` file's dictionary.
const ZSTD_DICTIONARY_MAGIC: [u8; 4] = [0x5d, 0x2a, 0x4d, 0x18];
/// The largest dictionary frame read (Archive Team's are a few hundred KB).
const MAX_ZSTD_DICTIONARY: u32 = 256 << 20;

/// Reads the dictionary frame that starts a `.warc.zst` file (the IIPC's
/// Zstandard compression for WARC files 1.0): its size, then the
/// dictionary, itself zstd-compressed when it starts with zstd's magic.
fn zstd_dictionary(input: &mut impl std::io::BufRead) -> std::io::Result<Vec<u8>> {
    let mut header = [0; 8];
    input.read_exact(&mut header)?;
    let size = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if size > MAX_ZSTD_DICTIONARY {
        return Err(std::io::Error::other(format!("a zstd dictionary frame of {size} bytes")));
    }
    let mut dictionary = Vec::new();
    input.take(u64::from(size)).read_to_end(&mut dictionary)?;
    if dictionary.len() < size as usize {
        return Err(std::io::Error::other("the zstd dictionary frame is cut short"));
    }
    if neardex::warc::starts_as("zstd", &dictionary) {
        let mut decoded = Vec::new();
        let decoder = zstd::stream::read::Decoder::new(dictionary.as_slice())?;
        decoder.take(u64::from(MAX_ZSTD_DICTIONARY) + 1).read_to_end(&mut decoded)?;
        if decoded.len() > MAX_ZSTD_DICTIONARY as usize {
            return Err(std::io::Error::other("a zstd dictionary of more than 256 MiB"));
        }
        dictionary = decoded;
    }
    Ok(dictionary)
}

/// A decompressor's reads, its first error kept and turned into the end
/// of the input, so that what came before a break is read.
struct UntilBroken<R> {
    inner: R,
    error: Option<std::io::Error>,
}

impl<R: Read> Read for UntilBroken<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.error.is_some() {
            return Ok(0);
        }
        match self.inner.read(out) {
            Err(e) if e.kind() != std::io::ErrorKind::Interrupted => {
                self.error = Some(e);
                Ok(0)
            }
            read => read,
        }
    }
}

/// Reads the documents of one input into the turn: a text or HTML
/// input is one document, read whole; JSON Lines and WARC are read as they
/// stream in (the memory of one line or record, not of the file).
fn read_documents(
    name: &str,
    mut input: impl std::io::BufRead,
    format: Format,
    options: &InputOptions,
    turn: &mut Turn,
) -> Result<(), String> {
    let mut whole = || {
        let mut bytes = Vec::new();
        input.read_to_end(&mut bytes).map(|_| bytes).map_err(|e| format!("{name}: {e}"))
    };
    let document =
        |work| Item { key: name.to_owned(), metadata: Metadata::default(), work, source: None, names: Vec::new() };
    match format {
        Format::Auto | Format::Text | Format::Html => {
            let bytes = whole()?;
            let work = if looks_binary(&bytes) {
                Work::NotPage("binary file".to_owned())
            } else if format == Format::Html {
                Work::Html(bytes, None)
            } else {
                Work::Bytes(bytes)
            };
            turn.push(document(work))?
        }
        Format::Jsonl => read_jsonl(name, input, options, turn)?,
        Format::Warc => read_warc(name, input, options.keep_sources, turn)?,
    }
    turn.push(Item {
        key: String::new(),
        metadata: Metadata::default(),
        work: Work::EndOfFile,
        source: None,
        names: Vec::new(),
    })
}

fn read_jsonl(name: &str, input: impl std::io::BufRead, options: &InputOptions, turn: &mut Turn) -> Result<(), String> {
    let key_field = options.key_field.as_deref().unwrap_or("");
    for read in neardex::jsonl::read_jsonl_lines_from(input, key_field, &options.text_field) {
        if crate::progress::interrupted() {
            break;
        }
        let (line, record) = read.map_err(|e| format!("{name}: {e}"))?;
        let item = match record {
            Ok(record) => Item {
                key: if key_field.is_empty() { format!("{name}:{}", record.line) } else { record.key },
                metadata: Metadata { url: record.url, ..Metadata::default() },
                work: Work::Text(record.text),
                source: options.keep_sources.then_some(Source::Line(line)),
                names: Vec::new(),
            },
            Err(problem) => Item::skip(format!("{name}:{}: {}", problem.line, problem.reason)),
        };
        turn.push(item)?;
    }
    Ok(())
}

fn read_warc(name: &str, input: impl std::io::BufRead, keep_sources: bool, turn: &mut Turn) -> Result<(), String> {
    use neardex::warc::WarcItem;
    for item in neardex::warc::WarcReader::new(input) {
        if crate::progress::interrupted() {
            break;
        }
        let mut record = match item.map_err(|e| format!("{name}: {e}"))? {
            WarcItem::Record(record) => record,
            WarcItem::Problem(p) => {
                turn.push(Item::skip(format!("{name} at byte {}: {}", p.offset, p.reason)))?;
                continue;
            }
        };
        let at = format!("{name} at byte {}", record.offset);
        let Some(id) = record.header("WARC-Record-ID").map(str::to_owned) else {
            turn.push(Item::skip(format!("{at}: record has no WARC-Record-ID")))?;
            continue;
        };
        let metadata = Metadata {
            url: record.header("WARC-Target-URI").map(str::to_owned),
            warc_record_id: Some(id.clone()),
            date: record.header("WARC-Date").map(str::to_owned),
            ..Metadata::default()
        };
        // What --kept writes: a page's record, as read.
        let keep = |record: &neardex::warc::WarcRecord| keep_sources.then(|| Source::Record(record.to_bytes()));
        let mut source = None;
        let work = match record.kind.as_str() {
            "response" => {
                let Some(http) = neardex::warc::parse_http_response(&record.block) else {
                    turn.push(Item::skip(format!("{at}: unreadable HTTP response")))?;
                    continue;
                };
                match http.why_not_a_page() {
                    Some(reason) => Work::NotPage(reason),
                    None => {
                        source = keep(&record);
                        let declared = http.charset().and_then(|c| encoding_rs::Encoding::for_label(c.as_bytes()));
                        Work::Html(http.payload, declared)
                    }
                }
            }
            "resource" | "conversion" => {
                let content_type = record.header("Content-Type");
                if !neardex::warc::is_page_type(content_type) {
                    Work::NotPage(neardex::warc::media_type(content_type))
                } else {
                    source = keep(&record);
                    let html = content_type.is_some_and(|t| t.contains("html"));
                    let block = std::mem::take(&mut record.block);
                    if html {
                        Work::Html(block, None)
                    } else {
                        Work::Bytes(block)
                    }
                }
            }
            "revisit" => revisit(&record, at),
            "warcinfo" if keep_sources => {
                source = keep(&record);
                Work::Info
            }
            _ => continue, // request, metadata, warcinfo
        };
        let names = match work {
            Work::Html(..) | Work::Bytes(_) => record_names(&record),
            _ => Vec::new(),
        };
        if let Work::Revisit { .. } = work {
            source = keep(&record);
        }
        turn.push(Item { key: id, metadata, work, source, names })?;
    }
    Ok(())
}

/// A name by which a revisit may name a WARC record: its kind and the
/// header values that make it, hashed (xxh3; two names of a file's n
/// records meet by chance with a probability of about n² / 2⁶⁵).
fn record_name(kind: u8, values: &[&str]) -> u64 {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    hasher.update(&[kind]);
    for value in values {
        hasher.update(value.as_bytes());
        hasher.update(&[0]);
    }
    hasher.digest()
}

/// The kinds of `record_name`.
const URI_DATE: u8 = 1;
const DIGEST: u8 = 2;
const URI: u8 = 3;

/// The names by which a later revisit may name a WARC record: its target
/// URI and date, its payload digest, its target URI.
fn record_names(record: &neardex::warc::WarcRecord) -> Vec<u64> {
    let uri = record.header("WARC-Target-URI");
    names(uri, record.header("WARC-Date"), record.header("WARC-Payload-Digest"), uri)
}

/// The `record_name`s of a URI and date, of a payload digest and of a
/// URI (its latest record), those given.
fn names(uri: Option<&str>, date: Option<&str>, digest: Option<&str>, latest_of: Option<&str>) -> Vec<u64> {
    let mut names = Vec::with_capacity(3);
    if let (Some(uri), Some(date)) = (uri, date) {
        names.push(record_name(URI_DATE, &[uri, date]));
    }
    if let Some(digest) = digest {
        names.push(record_name(DIGEST, &[digest]));
    }
    if let Some(uri) = latest_of {
        names.push(record_name(URI, &[uri]));
    }
    names
}

/// A revisit record: of the record its `WARC-Refers-To` names, else (WARC
/// 1.1) of the one its `WARC-Refers-To-Target-URI` and
/// `WARC-Refers-To-Date` name, else of the record with the same payload
/// digest (Heritrix's identical-payload-digest revisits often name no
/// record), else, when the server said the page was not modified, of the
/// latest record of its URI. A revisit whose HTTP headers give a media
/// type that is not a page's (an image fetched again) is not a page.
fn revisit(record: &neardex::warc::WarcRecord, at: String) -> Work {
    if let Some(http) = neardex::warc::parse_http_response(&record.block) {
        let content_type = http.header("Content-Type");
        if !neardex::warc::is_page_type(content_type) {
            return Work::NotPage(neardex::warc::media_type(content_type));
        }
    }
    let refers_to = record.header("WARC-Refers-To-Target-URI");
    let not_modified = record.header("WARC-Profile").is_some_and(|p| p.ends_with("/server-not-modified"));
    let latest_of = not_modified.then(|| refers_to.or(record.header("WARC-Target-URI"))).flatten();
    let names = names(refers_to, record.header("WARC-Refers-To-Date"), record.header("WARC-Payload-Digest"), latest_of);
    Work::Revisit { target: record.header("WARC-Refers-To").map(str::to_owned), names, at }
}

/// The signature of a stored document, rebuilt from its vector.
pub fn stored_signature(searcher: &Searcher, key: &str) -> Result<Option<DocumentSignature>, String> {
    let Some(doc) = searcher.get(key).map_err(|e| e.to_string())? else { return Ok(None) };
    Ok(Some(searcher.signer().sign_vector(doc.vector, doc.fingerprint)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes documents until the `fail_at`-th, which it refuses.
    struct Taker {
        keys: Vec<String>,
        fail_at: Option<usize>,
    }

    impl Sink for Taker {
        fn document(&mut self, Signed { key, .. }: Signed) -> Result<(), String> {
            if Some(self.keys.len()) == self.fail_at {
                return Err("the sink failed".to_owned());
            }
            self.keys.push(key);
            Ok(())
        }
        fn skipped(&mut self, _: String) {}
        fn not_a_page(&mut self, _: String) {}
        fn stored(&self, _: &str) -> Result<Option<DocumentSignature>, String> {
            Ok(None)
        }
    }

    fn take(paths: &[PathBuf], fail_at: Option<usize>) -> Result<Vec<String>, String> {
        let options = InputOptions {
            format: Format::Auto,
            key_field: Some("id".into()),
            text_field: "text".into(),
            keep_sources: false,
        };
        let signer = Signer::new(neardex::SignatureConfig::default()).unwrap();
        let mut pipeline = Pipeline::new(signer, Taker { keys: Vec::new(), fail_at });
        read_inputs(paths, &options, &mut pipeline)?;
        Ok(pipeline.finish()?.keys)
    }

    /// The reading thread runs turns ahead: what it reads comes out in
    /// input order, and a sink that fails stops it (no hang) with the
    /// sink's error.
    #[test]
    fn the_reading_thread_keeps_input_order_and_stops_when_the_sink_fails() {
        let dir = tempfile::tempdir().unwrap();
        let lines: Vec<String> = (0..3 * TURN_ITEMS + 7)
            .map(|i| format!("{{\"id\":\"line {i}\",\"text\":\"the ferry {i} was late\"}}"))
            .collect();
        let jsonl = dir.path().join("docs.jsonl");
        std::fs::write(&jsonl, lines.join("\n")).unwrap();
        let text = dir.path().join("note.txt");
        std::fs::write(&text, "a note on the ferry").unwrap();
        let paths = [jsonl, text.clone()];
        let mut expected: Vec<String> = (0..3 * TURN_ITEMS + 7).map(|i| format!("line {i}")).collect();
        expected.push(text.to_string_lossy().into_owned());
        assert_eq!(take(&paths, None).unwrap(), expected);
        for fail_at in [0, TURN_ITEMS + 3, 3 * TURN_ITEMS + 7] {
            assert_eq!(take(&paths, Some(fail_at)), Err("the sink failed".to_owned()), "{fail_at}");
        }
    }
}
