//! `neardex add`: files, directories and standard input as text, HTML,
//! WARC or JSON Lines, committed in batches.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use neardex::store::{Document, Index, IndexError, Metadata, Writer};
use neardex::{DocumentSignature, Signer};

/// Documents per durable commit, by default: through the writer, and
/// through a bulk writer (`--bulk`), whose every commit writes a segment.
pub const BATCH: usize = 1_000;
pub const BULK_BATCH: usize = 50_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Auto,
    Text,
    Html,
    Warc,
    Jsonl,
}

pub struct AddOptions {
    pub format: Format,
    pub key_field: String,
    pub text_field: String,
    pub replace: bool,
    /// Commit through [`Index::bulk_writer`].
    pub bulk: bool,
    /// Documents per commit.
    pub batch: usize,
}

#[derive(Default)]
pub struct Summary {
    pub added: u64,
    pub exact_duplicates: u64,
    pub skipped: Vec<String>,
}

struct Batch<'a> {
    index: &'a Index,
    writer: Option<Writer<'a>>,
    staged: usize,
    replace: bool,
    bulk: bool,
    size: usize,
}

impl<'a> Batch<'a> {
    fn add(
        &mut self,
        key: &str,
        signature: &DocumentSignature,
        metadata: Metadata,
        summary: &mut Summary,
    ) -> Result<(), String> {
        if crate::progress::interrupted() {
            // Stop between documents; the caller commits what was added.
            return Ok(());
        }
        if self.writer.is_none() {
            let writer = if self.bulk { self.index.bulk_writer() } else { self.index.writer() };
            self.writer = Some(writer.map_err(|e| e.to_string())?);
        }
        let writer = self.writer.as_mut().ok_or("no writer")?;
        let document = Document::Signatures(signature);
        let outcome =
            if self.replace { writer.replace(key, document, metadata) } else { writer.insert(key, document, metadata) };
        match outcome {
            Ok(o) => {
                summary.added += 1;
                summary.exact_duplicates += u64::from(o.exact_duplicate_of.is_some());
            }
            Err(IndexError::DuplicateKey { key }) => {
                summary.skipped.push(format!("{key}: key already in the index (use --replace)"));
            }
            Err(e) => return Err(e.to_string()),
        }
        self.staged += 1;
        if self.staged >= self.size {
            self.commit()?;
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<(), String> {
        if let Some(writer) = self.writer.take() {
            writer.commit().map_err(|e| format!("committing: {e}"))?;
        }
        self.staged = 0;
        Ok(())
    }
}

fn detect(path: &Path, requested: Format) -> Format {
    if requested != Format::Auto {
        return requested;
    }
    let name = path.to_string_lossy().to_ascii_lowercase();
    if name.ends_with(".warc") || name.ends_with(".warc.gz") {
        Format::Warc
    } else if name.ends_with(".jsonl") || name.ends_with(".ndjson") {
        Format::Jsonl
    } else if name.ends_with(".html") || name.ends_with(".htm") {
        Format::Html
    } else {
        Format::Text
    }
}

/// Every file under `path` (itself if it is a file), sorted.
pub fn files_under(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for entry in entries {
            files_under(&entry, out)?;
        }
    } else {
        out.push(path.to_owned());
    }
    Ok(())
}

pub fn add(index: &Index, paths: &[PathBuf], options: &AddOptions) -> Result<Summary, String> {
    let started = Instant::now();
    let mut pipeline = Pipeline::new(index, options);
    let mut all_files = Vec::new();
    for path in paths {
        if path.as_os_str() != "-" {
            files_under(path, &mut all_files)?;
        }
    }
    let total: u64 = all_files.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum();
    let bar = crate::progress::bytes(total);
    crate::progress::catch_interrupt();
    for path in paths {
        if crate::progress::interrupted() {
            break;
        }
        if path.as_os_str() == "-" {
            let format = if options.format == Format::Auto { Format::Text } else { options.format };
            read_documents("-", std::io::stdin().lock(), format, options, &mut pipeline)?;
            continue;
        }
        let mut files = Vec::new();
        files_under(path, &mut files)?;
        for file in files {
            if crate::progress::interrupted() {
                break;
            }
            let name = file.to_string_lossy().into_owned();
            let opened = std::fs::File::open(&file).map_err(|e| format!("{name}: {e}"))?;
            let input = std::io::BufReader::with_capacity(1 << 20, Counted { inner: opened, bar: &bar });
            read_documents(&name, input, detect(&file, options.format), options, &mut pipeline)?;
        }
    }
    let summary = pipeline.finish()?;
    bar.finish_and_clear();
    if crate::progress::interrupted() {
        return Err(format!(
            "interrupted: the {} documents added before Ctrl-C are committed; the rest was not added",
            summary.added
        ));
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "added {} documents ({} exact duplicates), skipped {}, in {:.2} s ({:.0} docs/s)",
        summary.added,
        summary.exact_duplicates,
        summary.skipped.len(),
        secs,
        summary.added as f64 / secs.max(1e-9)
    );
    Ok(summary)
}

/// What the input holds at one place, in input order: a document to sign,
/// or something the inserting side handles.
enum Work {
    /// Plain text.
    Text(String),
    /// Bytes read as UTF-8, lossily.
    Bytes(Vec<u8>),
    /// An HTML page, with the charset an HTTP header declared if any.
    Html(Vec<u8>, Option<&'static encoding_rs::Encoding>),
    /// A signed document (the signing side's output).
    Signed(DocumentSignature),
    /// A WARC revisit of the record with this id; `at` names the record.
    Revisit { target: Option<String>, at: String },
    /// Not a document: a line for the summary's skipped list.
    Skip(String),
    /// The end of an input file: its records' signatures are forgotten.
    EndOfFile,
}

struct Item {
    key: String,
    metadata: Metadata,
    work: Work,
}

impl Item {
    fn skip(reason: String) -> Item {
        Item { key: String::new(), metadata: Metadata::default(), work: Work::Skip(reason) }
    }

    /// Signs a document; everything else passes through.
    fn signed(self, signer: &Signer) -> Item {
        let signature = match &self.work {
            Work::Text(text) => signer.sign_text(text),
            Work::Bytes(bytes) => signer.sign_text(&neardex::text::utf8_lossy(bytes)),
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
const TURN_BYTES: usize = 16 << 20;

/// Reading, signing and inserting overlapped: each turn signs the items
/// read since the last one on every core while this thread inserts the
/// items the last turn signed, in input order, committing every
/// `AddOptions::batch` documents.
struct Pipeline<'a> {
    signer: Signer,
    inserter: Inserter<'a>,
    unsigned: Vec<Item>,
    unsigned_bytes: usize,
    signed: Vec<Item>,
}

/// The inserting side: the batch, the summary, and the current file's
/// signatures by WARC record id (for revisits).
struct Inserter<'a> {
    batch: Batch<'a>,
    summary: Summary,
    seen: HashMap<String, DocumentSignature>,
}

impl<'a> Pipeline<'a> {
    fn new(index: &'a Index, options: &AddOptions) -> Self {
        Pipeline {
            signer: index.signer().clone(),
            inserter: Inserter {
                batch: Batch {
                    index,
                    writer: None,
                    staged: 0,
                    replace: options.replace,
                    bulk: options.bulk,
                    size: options.batch.max(1),
                },
                summary: Summary::default(),
                seen: HashMap::new(),
            },
            unsigned: Vec::new(),
            unsigned_bytes: 0,
            signed: Vec::new(),
        }
    }

    fn push(&mut self, item: Item) -> Result<(), String> {
        if crate::progress::interrupted() {
            return Ok(());
        }
        self.unsigned_bytes += item.size();
        self.unsigned.push(item);
        if self.unsigned.len() >= TURN_ITEMS || self.unsigned_bytes >= TURN_BYTES {
            self.turn()?;
        }
        Ok(())
    }

    /// Signs the unsigned items on the other threads while this one inserts
    /// the signed ones.
    fn turn(&mut self) -> Result<(), String> {
        let unsigned = std::mem::take(&mut self.unsigned);
        let signed = std::mem::take(&mut self.signed);
        self.unsigned_bytes = 0;
        let (signer, inserter) = (&self.signer, &mut self.inserter);
        let (next, inserted) = std::thread::scope(|scope| {
            let signing = scope.spawn(move || {
                use rayon::prelude::*;
                unsigned.into_par_iter().map(|item| item.signed(signer)).collect::<Vec<Item>>()
            });
            let inserted = signed.into_iter().try_for_each(|item| inserter.insert(item));
            (signing.join(), inserted)
        });
        inserted?;
        self.signed = next.map_err(|_| "a signing thread panicked".to_owned())?;
        Ok(())
    }

    /// Inserts everything still in the pipeline and commits.
    fn finish(mut self) -> Result<Summary, String> {
        self.turn()?;
        self.turn()?;
        self.inserter.batch.commit()?;
        Ok(self.inserter.summary)
    }
}

impl Inserter<'_> {
    fn insert(&mut self, item: Item) -> Result<(), String> {
        let signature = match item.work {
            Work::Signed(signature) => signature,
            Work::Revisit { target, at } => {
                let found = match &target {
                    Some(t) => match self.seen.get(t) {
                        Some(s) => Some(s.clone()),
                        None => stored_signature(self.batch.index, t)?,
                    },
                    None => None,
                };
                match found {
                    Some(s) => s,
                    None => {
                        self.summary.skipped.push(format!("{at}: revisit of a record not in the index"));
                        return Ok(());
                    }
                }
            }
            Work::Skip(reason) => {
                self.summary.skipped.push(reason);
                return Ok(());
            }
            Work::EndOfFile => {
                self.seen.clear();
                return Ok(());
            }
            Work::Text(_) | Work::Bytes(_) | Work::Html(..) => return Err("an item was not signed".to_owned()),
        };
        // Only WARC records may be the target of a revisit later in the
        // same file.
        let warc_record = item.metadata.warc_record_id.is_some();
        self.batch.add(&item.key, &signature, item.metadata, &mut self.summary)?;
        if warc_record {
            self.seen.insert(item.key, signature);
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

/// Reads the documents of one input into the pipeline: a text or HTML
/// input is one document, read whole; JSON Lines and WARC are read as they
/// stream in (the memory of one line or record, not of the file).
fn read_documents(
    name: &str,
    mut input: impl std::io::BufRead,
    format: Format,
    options: &AddOptions,
    pipeline: &mut Pipeline<'_>,
) -> Result<(), String> {
    let mut whole = || {
        let mut bytes = Vec::new();
        input.read_to_end(&mut bytes).map(|_| bytes).map_err(|e| format!("{name}: {e}"))
    };
    let document = |work| Item { key: name.to_owned(), metadata: Metadata::default(), work };
    match format {
        Format::Auto | Format::Text => pipeline.push(document(Work::Bytes(whole()?)))?,
        Format::Html => pipeline.push(document(Work::Html(whole()?, None)))?,
        Format::Jsonl => read_jsonl(name, input, options, pipeline)?,
        Format::Warc => read_warc(name, input, pipeline)?,
    }
    pipeline.push(Item { key: String::new(), metadata: Metadata::default(), work: Work::EndOfFile })
}

fn read_jsonl(
    name: &str,
    input: impl std::io::BufRead,
    options: &AddOptions,
    pipeline: &mut Pipeline<'_>,
) -> Result<(), String> {
    for record in neardex::jsonl::read_jsonl_from(input, &options.key_field, &options.text_field) {
        if crate::progress::interrupted() {
            break;
        }
        let item = match record.map_err(|e| format!("{name}: {e}"))? {
            Ok(record) => Item {
                key: record.key,
                metadata: Metadata { url: record.url, ..Metadata::default() },
                work: Work::Text(record.text),
            },
            Err(problem) => Item::skip(format!("{name}:{}: {}", problem.line, problem.reason)),
        };
        pipeline.push(item)?;
    }
    Ok(())
}

fn read_warc(name: &str, input: impl std::io::BufRead, pipeline: &mut Pipeline<'_>) -> Result<(), String> {
    use neardex::warc::WarcItem;
    for item in neardex::warc::WarcReader::new(input) {
        if crate::progress::interrupted() {
            break;
        }
        let record = match item.map_err(|e| format!("{name}: {e}"))? {
            WarcItem::Record(record) => record,
            WarcItem::Problem(p) => {
                pipeline.push(Item::skip(format!("{name} at byte {}: {}", p.offset, p.reason)))?;
                continue;
            }
        };
        let at = format!("{name} at byte {}", record.offset);
        let Some(id) = record.header("WARC-Record-ID").map(str::to_owned) else {
            pipeline.push(Item::skip(format!("{at}: record has no WARC-Record-ID")))?;
            continue;
        };
        let metadata = Metadata {
            url: record.header("WARC-Target-URI").map(str::to_owned),
            warc_record_id: Some(id.clone()),
            date: record.header("WARC-Date").map(str::to_owned),
            ..Metadata::default()
        };
        let work = match record.kind.as_str() {
            "response" => {
                let Some(http) = neardex::warc::parse_http_response(&record.block) else {
                    pipeline.push(Item::skip(format!("{at}: unreadable HTTP response")))?;
                    continue;
                };
                let declared = http.charset().and_then(|c| encoding_rs::Encoding::for_label(c.as_bytes()));
                Work::Html(http.payload.to_vec(), declared)
            }
            "resource" | "conversion" => {
                if record.header("Content-Type").is_some_and(|t| t.contains("html")) {
                    Work::Html(record.block, None)
                } else {
                    Work::Bytes(record.block)
                }
            }
            "revisit" => Work::Revisit { target: record.header("WARC-Refers-To").map(str::to_owned), at },
            _ => continue, // request, metadata, warcinfo
        };
        pipeline.push(Item { key: id, metadata, work })?;
    }
    Ok(())
}

/// The signature of a stored document, rebuilt from its vector.
fn stored_signature(index: &Index, key: &str) -> Result<Option<DocumentSignature>, String> {
    let searcher = index.searcher().map_err(|e| e.to_string())?;
    let Some(doc) = searcher.get(key).map_err(|e| e.to_string())? else { return Ok(None) };
    Ok(Some(index.signer().sign_vector(doc.vector, doc.fingerprint)))
}
