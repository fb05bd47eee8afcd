//! Helpers shared by the integration tests: locating and reading the real
//! evaluation data in `../shared/data`.
#![allow(dead_code)]

use std::io::Read;
use std::path::PathBuf;

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

/// One real page: a name, its raw HTML bytes and its human-extracted gold
/// main-content text.
pub struct Page {
    pub name: String,
    pub html: Vec<u8>,
    pub gold: String,
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
        pages.push(Page { name: id, html, gold });
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
            Page { name, html, gold }
        })
        .collect()
}
