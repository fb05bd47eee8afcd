//! Deduplicates a WARC file with the library: a page is kept unless a page
//! kept before it, in this run or in the index, is at least τ similar, and
//! the kept pages' records are written to a new WARC file. What `neardex add
//! INDEX IN --skip-similar TAU --kept OUT.warc` does, as library calls:
//! `WarcReader`, `parse_http_response`, `Writer::insert_batch_if_new`,
//! `WarcRecord::to_bytes`.
//!
//! Run: `cargo run --release --example dedup_warc -- INDEX IN.warc[.gz] OUT.warc [TAU]`
//! (the index is created when it does not exist; TAU defaults to 0.8).
use std::error::Error;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;

use neardex::store::{Document, Index, IndexError, InsertIfNew, Metadata};
use neardex::warc::{parse_http_response, WarcItem, WarcReader, WarcRecord};
use neardex::{SignatureConfig, Threshold};

/// Pages given to `insert_batch_if_new` at once (their queries of the
/// index run on every core), and committed together.
const BATCH: usize = 1000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [index, input, output, rest @ ..] = args.as_slice() else {
        eprintln!("usage: dedup_warc INDEX IN.warc[.gz] OUT.warc [TAU]");
        std::process::exit(2);
    };
    let tau = rest.first().map_or("0.8", String::as_str);
    if let Err(e) = run(Path::new(index), Path::new(input), Path::new(output), tau) {
        eprintln!("dedup_warc: {e}");
        std::process::exit(1);
    }
}

fn run(index: &Path, input: &Path, output: &Path, tau: &str) -> Result<(), Box<dyn Error>> {
    let tau = Threshold::new(tau.parse()?)?;
    let index = if index.exists() { Index::open(index)? } else { Index::create(index, SignatureConfig::default())? };
    let mut out = BufWriter::new(File::create(output)?);
    let mut counts = Counts::default();
    let mut batch = Vec::with_capacity(BATCH);
    for item in WarcReader::new(BufReader::new(File::open(input)?)) {
        // Damaged records are reported by the reader and passed over here.
        let WarcItem::Record(record) = item? else { continue };
        if record.kind != "response" || record.header("WARC-Record-ID").is_none() {
            continue;
        }
        // Redirects, error pages, images and the like are not pages.
        let Some(http) = parse_http_response(&record.block).filter(|http| http.why_not_a_page().is_none()) else {
            continue;
        };
        batch.push((record, http.payload));
        if batch.len() == BATCH {
            dedup(&index, &mut batch, tau, &mut out, &mut counts)?;
        }
    }
    dedup(&index, &mut batch, tau, &mut out, &mut counts)?;
    out.flush()?;
    println!("kept {}, near-duplicates {}, already in the index {}", counts.kept, counts.similar, counts.stored);
    Ok(())
}

#[derive(Default)]
struct Counts {
    kept: u64,
    similar: u64,
    stored: u64,
}

/// Inserts the batch's pages unless similar to one before them, commits,
/// and only then writes the kept pages' records: what is written is durable
/// in the index.
fn dedup(
    index: &Index,
    batch: &mut Vec<(WarcRecord, Vec<u8>)>,
    tau: Threshold,
    out: &mut impl Write,
    counts: &mut Counts,
) -> Result<(), Box<dyn Error>> {
    let mut writer = index.writer()?;
    let pages = batch.iter().map(|(record, payload)| {
        let key = record.header("WARC-Record-ID").unwrap_or_default();
        let metadata = Metadata {
            url: record.header("WARC-Target-URI").map(str::to_owned),
            warc_record_id: Some(key.to_owned()),
            date: record.header("WARC-Date").map(str::to_owned),
            ..Metadata::default()
        };
        // Signed on every core inside the call; the charset is the page's
        // own (neardex add also weighs the HTTP header's:
        // `Signer::sign_html_declared`).
        (key, Document::Html(payload), metadata)
    });
    let results = writer.insert_batch_if_new(pages, tau);
    let mut kept = Vec::new();
    // One result a page, in order, until an error that ends the batch.
    for ((record, _), result) in batch.iter().zip(results) {
        match result {
            Ok(InsertIfNew::Inserted(_)) => kept.push(record),
            Ok(InsertIfNew::Matches(_)) => counts.similar += 1,
            Err(IndexError::DuplicateKey { .. }) => counts.stored += 1,
            Err(e) => return Err(e.into()),
        }
    }
    writer.commit()?;
    for record in kept {
        out.write_all(&record.to_bytes())?;
        counts.kept += 1;
    }
    batch.clear();
    Ok(())
}
