//! Helpers shared by the integration tests: locating and reading the real
//! evaluation data in `../shared/data`.
#![allow(dead_code)]

pub mod webcorpus;

use std::io::Read;
use std::path::PathBuf;

/// A field of this process's `/proc/self/status` in KiB (`VmRSS`, the
/// resident memory; `VmHWM`, its peak so far); 0 where there is none
/// (not Linux).
pub fn proc_status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.strip_prefix(field).is_some_and(|rest| rest.starts_with(':')));
    line.and_then(|l| l.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0)
}

/// `../shared/data` beside the repository. Under CI (CI=true) its absence
/// fails the test; elsewhere the test is skipped with a message.
pub fn shared_data() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data");
    if dir.is_dir() {
        return Some(dir);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{} is missing: CI must have ../shared beside the checkout", dir.display());
    }
    eprintln!("skipping: {} not found (the real evaluation data lives beside the repository)", dir.display());
    None
}

/// One real page: a name, its raw HTML bytes, its human-extracted gold
/// main-content text, and its URL where the data set gives one.
pub struct Page {
    pub name: String,
    pub html: Vec<u8>,
    pub gold: String,
    pub url: Option<String>,
}

/// Every real page: the article benchmark's, then dragnet's.
pub fn all_pages(data: &std::path::Path) -> Vec<Page> {
    let mut pages = article_benchmark(data);
    pages.extend(dragnet(data));
    pages
}

/// The 181 pages of the article-extraction benchmark.
pub fn article_benchmark(data: &std::path::Path) -> Vec<Page> {
    let dir = data.join("article-extraction-benchmark");
    let truth: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("ground-truth.json")).expect("ground-truth.json"))
            .expect("ground truth is JSON");
    let mut pages = Vec::new();
    for entry in std::fs::read_dir(dir.join("html")).expect("html dir") {
        let path = entry.expect("dir entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let id = name.trim_end_matches(".html.gz").to_owned();
        let mut html = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&path).expect("open page"))
            .read_to_end(&mut html)
            .expect("gunzip page");
        let gold = truth[&id]["articleBody"].as_str().unwrap_or_default().to_owned();
        let url = truth[&id]["url"].as_str().map(str::to_owned);
        pages.push(Page { name: id, html, gold, url });
    }
    pages.sort_by(|a, b| a.name.cmp(&b.name));
    pages
}

/// The 1,381 dragnet pages, unpacked in memory from the tar.xz.
pub fn dragnet(data: &std::path::Path) -> Vec<Page> {
    let packed = std::fs::read(data.join("dragnet_data/dragnet_html_and_gold.tar.xz")).expect("dragnet tarball");
    let mut tar_bytes = Vec::new();
    lzma_rs::xz_decompress(&mut std::io::Cursor::new(packed), &mut tar_bytes).expect("xz");
    let mut html = std::collections::BTreeMap::new();
    let mut gold = std::collections::BTreeMap::new();
    let mut archive = tar::Archive::new(std::io::Cursor::new(tar_bytes));
    for entry in archive.entries().expect("tar entries") {
        let mut entry = entry.expect("tar entry");
        let path = entry.path().expect("entry path").to_string_lossy().into_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).expect("read entry");
        let Some(file) = path.rsplit('/').next() else { continue };
        if path.contains("/input/") && file.ends_with(".html") {
            html.insert(file.trim_end_matches(".html").to_owned(), bytes);
        } else if path.contains("/GoldStandard/") && file.ends_with(".txt") {
            let stem = file.trim_end_matches(".txt").trim_end_matches(".html").to_owned();
            gold.insert(stem, String::from_utf8_lossy(&bytes).into_owned());
        }
    }
    html.into_iter()
        .map(|(name, html)| {
            let gold = gold.get(&name).cloned().unwrap_or_default();
            Page { name, html, gold, url: None }
        })
        .collect()
}

/// One HTTP response payload from a WARC file: its target URI, the charset
/// its `Content-Type` header names (if any), and the payload bytes.
pub struct WarcPage {
    pub uri: String,
    pub charset: Option<String>,
    pub payload: Vec<u8>,
}

/// The `response` records of a (multi-member gzip) WARC file, split at every
/// line that starts a WARC header (`WARC/x.y` CRLF) rather than trusting
/// `Content-Length`, which the ClueWeb sample gets wrong. A deliberately
/// small reader for tests; the real WARC reader belongs to the CLI.
pub fn warc_responses(path: &std::path::Path) -> Vec<WarcPage> {
    let mut bytes = Vec::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(path).expect("open WARC"))
        .read_to_end(&mut bytes)
        .expect("gunzip WARC");
    let is_record_start = |at: usize| {
        (at == 0 || bytes[at - 1] == b'\n')
            && bytes[at..].starts_with(b"WARC/")
            && bytes[at..]
                .iter()
                .take(12)
                .position(|&b| b == b'\r')
                .is_some_and(|cr| bytes.get(at + cr + 1) == Some(&b'\n'))
    };
    let starts: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] == b'W' && is_record_start(i)).collect();
    let mut pages = Vec::new();
    for (n, &start) in starts.iter().enumerate() {
        let record = &bytes[start..starts.get(n + 1).copied().unwrap_or(bytes.len())];
        let Some(header_end) = find(record, b"\r\n\r\n") else { continue };
        let header = String::from_utf8_lossy(&record[..header_end]);
        let field = |name: &str| {
            header.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
            })
        };
        if field("WARC-Type").as_deref() != Some("response") {
            continue;
        }
        let block = &record[header_end + 4..];
        // HTTP headers end at the first empty line, CRLF or bare LF.
        let (http_end, sep) = match (find(block, b"\r\n\r\n"), find(block, b"\n\n")) {
            (Some(a), Some(b)) if b < a => (b, 2),
            (Some(a), _) => (a, 4),
            (None, Some(b)) => (b, 2),
            (None, None) => continue,
        };
        let http = String::from_utf8_lossy(&block[..http_end]).to_ascii_lowercase();
        let charset = http
            .lines()
            .find(|l| l.starts_with("content-type:"))
            .and_then(|l| l.split("charset=").nth(1))
            .map(|c| c.trim().trim_matches('"').to_owned());
        pages.push(WarcPage {
            uri: field("WARC-Target-URI").unwrap_or_default(),
            charset,
            payload: block[http_end + sep..].to_vec(),
        });
    }
    pages
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
