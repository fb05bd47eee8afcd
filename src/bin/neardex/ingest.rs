//! `neardex add`: files, directories and standard input as text, HTML,
//! WARC or JSON Lines, committed in batches.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use neardex::store::{Document, Index, IndexError, Metadata, Writer};
use neardex::{DocumentSignature, Signer};

/// Documents per durable commit.
const BATCH: usize = 1_000;

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
            self.writer = Some(self.index.writer().map_err(|e| e.to_string())?);
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
        if self.staged >= BATCH {
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
    let signer = index.signer().clone();
    let mut summary = Summary::default();
    let mut batch = Batch { index, writer: None, staged: 0, replace: options.replace };
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
            let mut bytes = Vec::new();
            std::io::stdin().read_to_end(&mut bytes).map_err(|e| format!("standard input: {e}"))?;
            let format = if options.format == Format::Auto { Format::Text } else { options.format };
            ingest_bytes("-", &bytes, format, options, &signer, &mut batch, &mut summary)?;
            continue;
        }
        let mut files = Vec::new();
        files_under(path, &mut files)?;
        for file in files {
            if crate::progress::interrupted() {
                break;
            }
            let bytes = std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let name = file.to_string_lossy().into_owned();
            ingest_bytes(&name, &bytes, detect(&file, options.format), options, &signer, &mut batch, &mut summary)?;
            bar.inc(bytes.len() as u64);
        }
    }
    batch.commit()?;
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

#[allow(clippy::too_many_arguments)]
fn ingest_bytes(
    name: &str,
    bytes: &[u8],
    format: Format,
    options: &AddOptions,
    signer: &Signer,
    batch: &mut Batch<'_>,
    summary: &mut Summary,
) -> Result<(), String> {
    match format {
        Format::Auto | Format::Text => {
            let signature = signer.sign_text(&String::from_utf8_lossy(bytes));
            batch.add(name, &signature, Metadata::default(), summary)
        }
        Format::Html => batch.add(name, &signer.sign_html(bytes), Metadata::default(), summary),
        Format::Jsonl => ingest_jsonl(name, bytes, options, signer, batch, summary),
        Format::Warc => ingest_warc(name, bytes, signer, batch, summary),
    }
}

fn ingest_jsonl(
    name: &str,
    bytes: &[u8],
    options: &AddOptions,
    signer: &Signer,
    batch: &mut Batch<'_>,
    summary: &mut Summary,
) -> Result<(), String> {
    for record in neardex::jsonl::read_jsonl(bytes, &options.key_field, &options.text_field) {
        match record {
            Ok(record) => {
                let metadata = Metadata { url: record.url, ..Metadata::default() };
                batch.add(&record.key, &signer.sign_text(&record.text), metadata, summary)?;
            }
            Err(problem) => summary.skipped.push(format!("{name}:{}: {}", problem.line, problem.reason)),
        }
    }
    Ok(())
}

fn ingest_warc(
    name: &str,
    bytes: &[u8],
    signer: &Signer,
    batch: &mut Batch<'_>,
    summary: &mut Summary,
) -> Result<(), String> {
    let (records, problems) = neardex::warc::read_warc(bytes);
    for p in problems {
        summary.skipped.push(format!("{name} at byte {}: {}", p.offset, p.reason));
    }
    // Signatures of this file's records by record id, for revisits.
    let mut seen: HashMap<String, DocumentSignature> = HashMap::new();
    for record in records {
        let Some(id) = record.header("WARC-Record-ID").map(str::to_owned) else {
            summary.skipped.push(format!("{name} at byte {}: record has no WARC-Record-ID", record.offset));
            continue;
        };
        let metadata = Metadata {
            url: record.header("WARC-Target-URI").map(str::to_owned),
            warc_record_id: Some(id.clone()),
            date: record.header("WARC-Date").map(str::to_owned),
            ..Metadata::default()
        };
        let signature = match record.kind.as_str() {
            "response" => {
                let Some(http) = neardex::warc::parse_http_response(&record.block) else {
                    summary.skipped.push(format!("{name} at byte {}: unreadable HTTP response", record.offset));
                    continue;
                };
                let declared = http.charset().and_then(|c| encoding_rs::Encoding::for_label(c.as_bytes()));
                let text = neardex::text::html_to_text(&neardex::text::decode_html(&http.payload, declared));
                signer.sign_text(&text)
            }
            "resource" | "conversion" => {
                let html = record.header("Content-Type").is_some_and(|t| t.contains("html"));
                if html {
                    signer.sign_html(&record.block)
                } else {
                    signer.sign_text(&String::from_utf8_lossy(&record.block))
                }
            }
            "revisit" => {
                let target = record.header("WARC-Refers-To").map(str::to_owned);
                let found = match &target {
                    Some(t) => match seen.get(t) {
                        Some(s) => Some(s.clone()),
                        None => stored_signature(batch.index, signer, t)?,
                    },
                    None => None,
                };
                match found {
                    Some(s) => s,
                    None => {
                        summary
                            .skipped
                            .push(format!("{name} at byte {}: revisit of a record not in the index", record.offset));
                        continue;
                    }
                }
            }
            _ => continue, // request, metadata, warcinfo
        };
        batch.add(&id, &signature, metadata, summary)?;
        seen.insert(id, signature);
    }
    Ok(())
}

/// The signature of a stored document, rebuilt from its vector.
fn stored_signature(index: &Index, signer: &Signer, key: &str) -> Result<Option<DocumentSignature>, String> {
    let searcher = index.searcher().map_err(|e| e.to_string())?;
    let Some(doc) = searcher.get(key).map_err(|e| e.to_string())? else { return Ok(None) };
    Ok(Some(signer.sign_vector(doc.vector, doc.fingerprint)))
}
