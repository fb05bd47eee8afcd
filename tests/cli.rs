//! The real `neardex` binary on real inputs: every command, every input
//! format, bad input, and the JSON output parsed and checked.
#![cfg(feature = "cli")]

mod common;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn neardex(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_neardex")).args(args).output().expect("run neardex")
}

fn json_lines(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout).lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect()
}

fn ok(args: &[&str]) -> Vec<Value> {
    let output = neardex(args);
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    json_lines(&output)
}

fn fails(args: &[&str], code: i32, message: &str) {
    let output = neardex(args);
    assert_eq!(output.status.code(), Some(code), "{args:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(message), "{args:?}: {stderr}");
}

/// A temporary directory and the path of an index inside it (not created).
fn index_dir() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx").to_str().unwrap().to_owned();
    (dir, idx)
}

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/bin/neardex/demo");
const PAGES: [&str; 6] = [
    "harbor-chronicle.html",
    "valley-times.html",
    "harbor-chronicle-ferry.html",
    "market-monday.html",
    "market-tuesday.html",
    "library-notes.txt",
];

/// The six demo pages, as a directory of their own under `dir`.
fn demo_pages(dir: &Path) -> std::path::PathBuf {
    let pages = dir.join("pages");
    std::fs::create_dir(&pages).unwrap();
    for name in PAGES {
        std::fs::copy(Path::new(DEMO).join(name), pages.join(name)).unwrap();
    }
    pages
}

#[test]
fn every_command_on_text_html_and_jsonl() {
    let (dir, idx) = index_dir();
    let idx = idx.as_str();
    assert_eq!(ok(&["create", idx])[0]["created"], idx);
    let jsonl = dir.path().join("docs.jsonl");
    std::fs::write(
        &jsonl,
        "{\"id\": 1, \"text\": \"The city council voted on Tuesday to approve a plan for a new central library.\"}\n\
         not json at all\n\
         {\"id\": \"two\", \"body\": \"missing the text field\"}\n\
         {\"id\": \"three\", \"text\": \"The city council voted on Tuesday to approve a plan for a new central library.\"}\n",
    )
    .unwrap();
    let pages = demo_pages(dir.path());
    let pages_dir = pages.to_str().unwrap();
    let added = ok(&["add", idx, pages_dir, jsonl.to_str().unwrap()]);
    assert_eq!(added[0]["added"], 8);
    assert_eq!(added[0]["without_signatures"], 2, "the two number tables have no running text");
    assert_eq!(added[0]["exact_duplicates"], 1, "the two JSON lines with the same text");
    assert_eq!(added[0]["skipped"], 2);
    let again = neardex(&["add", idx, jsonl.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("already in the index (use --replace)"));
    ok(&["add", idx, "--replace", jsonl.to_str().unwrap()]);

    let stats = &ok(&["stats", idx])[0];
    assert_eq!((stats["documents"].as_u64(), stats["scheme"].as_str()), (Some(8), Some("spotsigs")));

    let chronicle = format!("{pages_dir}/harbor-chronicle.html");
    let valley = format!("{pages_dir}/valley-times.html");
    let pairs = ok(&["pairs", idx, "--threshold", "0.5"]);
    assert_eq!(pairs, ok(&["pairs", idx, "--threshold", "0.5", "--brute-force"]));
    assert_eq!(pairs, ok(&["pairs", idx, "--threshold", "0.5", "--memory", "2M"]));
    assert!(pairs.iter().any(|p| p["a"] == chronicle.as_str() && p["b"] == valley.as_str()));
    let clusters = ok(&["clusters", idx, "--threshold", "0.5"]);
    assert!(clusters.iter().any(|c| c["representative"] == chronicle.as_str()));
    assert_eq!(clusters, ok(&["clusters", idx, "--threshold", "0.5", "--memory", "1gib"]));
    fails(&["pairs", idx, "--memory", "1M"], 2, "less than the least the join can keep to, 2M");
    fails(&["clusters", idx, "--memory", "lots"], 2, "is not a size");

    let q = ok(&["query", idx, "--threshold", "0.6", &valley]);
    assert_eq!(q[0]["query"], valley.as_str());
    let keys: Vec<&str> = q[0]["matches"].as_array().unwrap().iter().map(|m| m["key"].as_str().unwrap()).collect();
    assert!(keys.contains(&chronicle.as_str()) && keys.contains(&valley.as_str()));
    let by_key = ok(&["query", idx, "--threshold", "0.6", "--key", &valley]);
    let keys: Vec<&str> = by_key[0]["matches"].as_array().unwrap().iter().map(|m| m["key"].as_str().unwrap()).collect();
    assert_eq!(keys, [chronicle.as_str()], "a stored document is not its own match");
    let top = ok(&["query", idx, "--threshold", "0.1", "--top", "1", &valley]);
    assert_eq!(top[0]["matches"].as_array().unwrap().len(), 1);
    ok(&["query", idx, "--threshold", "0.6", "--lsh", &valley]);

    let e = &ok(&["explain", idx, &chronicle, &valley])[0];
    assert_eq!(e["similarity"], 0.7);
    assert_eq!(ok(&["verify", idx])[0]["verified"], true);
    assert_eq!(ok(&["delete", idx, &chronicle, "no-such-key"])[0]["deleted"], 1);
    assert_eq!(ok(&["optimize", idx])[0]["documents"], 7);

    // Standard input, read as HTML by --format.
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardex"))
        .args(["add", idx, "-", "--format", "html"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"<p>A page read from <b>standard input</b>.</p>")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    assert_eq!(json_lines(&output)[0]["added"], 1);
    assert!(ok(&["stats", idx])[0]["documents"].as_u64().unwrap() >= 8);
    fails(&["add", idx, "-", "--format", "pdf"], 2, "invalid value 'pdf'");

    let table = neardex(&["stats", idx, "--format", "table"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.lines().next().unwrap().starts_with("documents"), "{text}");

    let clusters = ok(&["demo"]);
    assert!(clusters.len() > 20, "the real corpus is full of near-duplicates: {}", clusters.len());
    for c in &clusters {
        let members = c["members"].as_array().unwrap();
        assert!(members.len() >= 2 && c["representative"] == members[0] && c["size"] == members.len());
    }
    let pages = ok(&["demo", "--pages", "--threshold", "0.5"]);
    assert_eq!(pages.len(), 1);
    assert_eq!((pages[0]["a"].as_str(), pages[0]["similarity"].as_f64()), (Some("harbor-chronicle.html"), Some(0.7)));
    assert!(!ok(&["signatures", &chronicle]).is_empty());
    assert_eq!(ok(&["compare", &chronicle, &valley])[0]["similarity"], 0.7);
}

#[test]
fn the_real_warc_samples_ingest_completely() {
    let Some(data) = common::shared_data() else { return };
    let (_dir, idx) = index_dir();
    let idx = idx.as_str();
    ok(&["create", idx]);
    // Pages without English stopwords have no spot signatures: the
    // summary counts them and a note on stderr says what that means.
    for (file, responses, unsigned) in [("commoncrawl-sample.warc.gz", 16, 11), ("clueweb12-quirk.warc.gz", 29, 29)] {
        let path = data.join("warc-samples").join(file);
        let output = neardex(&["add", idx, path.to_str().unwrap()]);
        assert!(output.status.success(), "{file}");
        let added = json_lines(&output);
        assert_eq!((added[0]["added"].as_u64(), added[0]["skipped"].as_u64()), (Some(responses), Some(0)), "{file}");
        assert_eq!(added[0]["without_signatures"].as_u64(), Some(unsigned), "{file}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let note = format!("{unsigned} of {responses} documents added had no signatures");
        assert!(stderr.contains(&note), "{file}: {stderr}");
    }
    let stats = &ok(&["stats", idx])[0];
    assert_eq!((&stats["documents"], &stats["without_signatures"]), (&Value::from(45), &Value::from(11 + 29)));
    assert_eq!(ok(&["verify", idx])[0]["verified"], true);
    // One query per response record: a record with signatures finds
    // itself at similarity 1, with the URL it was stored with.
    let path = data.join("warc-samples").join("commoncrawl-sample.warc.gz");
    let output = neardex(&["query", idx, "-t", "1", path.to_str().unwrap()]);
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("11 of 16 documents queried had no signatures"));
    let lines = json_lines(&output);
    assert_eq!(lines.len(), 16);
    let mut found_itself = 0;
    for line in &lines {
        for m in line["matches"].as_array().unwrap() {
            if m["key"] == line["query"] {
                assert_eq!((&m["url"], &m["similarity"]), (&line["url"], &Value::from(1.0)), "{line}");
                found_itself += 1;
            }
        }
    }
    // The other eleven pages (Chinese, Russian, ...) have no spot
    // signatures, and a document without signatures matches nothing.
    assert_eq!(found_itself, 5, "{lines:?}");
}

/// One WARC 1.1 record, uncompressed.
#[test]
fn a_fallback_scheme_signs_the_pages_spotsigs_cannot() {
    let Some(data) = common::shared_data() else { return };
    let (_dir, idx) = index_dir();
    let idx = idx.as_str();
    ok(&["create", idx, "--fallback", "words:3"]);
    assert_eq!(ok(&["stats", idx])[0]["fallback"], "words:3");
    for file in ["commoncrawl-sample.warc.gz", "clueweb12-quirk.warc.gz"] {
        let path = data.join("warc-samples").join(file);
        let output = neardex(&["add", idx, path.to_str().unwrap()]);
        assert!(output.status.success(), "{file}");
        assert_eq!(json_lines(&output)[0]["without_signatures"], 0, "{file}");
        assert!(!String::from_utf8_lossy(&output.stderr).contains("no signatures"), "{file}");
    }
    assert_eq!(ok(&["stats", idx])[0]["without_signatures"], 0);
    // The pages of each kind pair among themselves, exactly.
    let pairs = ok(&["pairs", idx, "-t", "0.5"]);
    assert!(pairs.len() > 10, "the Japanese shop pages share their framing: {}", pairs.len());
    assert_eq!(pairs, ok(&["pairs", idx, "-t", "0.5", "--brute-force"]));
    fails(&["create", &format!("{idx}2"), "--fallback", "spotsigs"], 1, "unknown fallback");
    fails(&["create", &format!("{idx}3"), "--fallback", "chars:0"], 1, "fallback character shingle size");
}

/// The keys of each pair `neardex pairs` finds at `tau`.
fn pair_keys(idx: &str, tau: &str) -> Vec<(String, String)> {
    ok(&["pairs", idx, "-t", tau])
        .iter()
        .map(|p| (p["a"].as_str().unwrap().to_owned(), p["b"].as_str().unwrap().to_owned()))
        .collect()
}

fn warc_record(kind: &str, id: &str, extra: &[(&str, &str)], block: impl AsRef<[u8]>) -> Vec<u8> {
    let block = block.as_ref();
    let mut head = format!("WARC/1.1\r\nWARC-Type: {kind}\r\nWARC-Record-ID: {id}\r\n");
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", block.len()));
    [head.as_bytes(), block, b"\r\n\r\n"].concat()
}

/// A demo page as the block of a WARC response record: a 200 with its
/// HTML.
fn demo_response(name: &str) -> String {
    let page = std::fs::read_to_string(Path::new(DEMO).join(name)).unwrap();
    format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n{page}")
}

/// Writes `warc` to `crawl.warc` in `dir` and adds it to `idx`: the file,
/// the summary line and standard error.
fn add_warc(dir: &Path, idx: &str, warc: Vec<u8>) -> (std::path::PathBuf, Value, String) {
    let path = dir.join("crawl.warc");
    std::fs::write(&path, warc).unwrap();
    let output = neardex(&["add", idx, path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    (path, json_lines(&output).remove(0), stderr)
}

#[test]
fn warc_records_that_are_not_pages_are_counted_and_left_out() {
    let (dir, idx) = index_dir();
    let idx = idx.as_str();
    ok(&["create", idx, "--fallback", "chars:4"]);
    let page = std::fs::read_to_string(Path::new(DEMO).join("harbor-chronicle.html")).unwrap();
    let html = format!("HTTP/1.1 200 OK\r\nContent-Type: Text/HTML; charset=utf-8\r\n\r\n{page}");
    // Under a character-shingle fallback, two like images would be
    // near-duplicates of each other.
    let png = "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\n\r\n\u{89}PNG IHDR IDAT pixels pixels pixels";
    let mut warc = warc_record("response", "<urn:uuid:page>", &[], &html);
    warc.extend(warc_record("response", "<urn:uuid:png1>", &[], png));
    warc.extend(warc_record("response", "<urn:uuid:png2>", &[], png));
    warc.extend(warc_record("resource", "<urn:uuid:pdf>", &[("Content-Type", "application/pdf")], "%PDF-1.4 stream"));
    warc.extend(warc_record("resource", "<urn:uuid:txt>", &[("Content-Type", "text/plain")], "A note on the ferry."));
    let (path, added, stderr) = add_warc(dir.path(), idx, warc);
    assert_eq!(
        (&added["added"], &added["not_pages"], &added["skipped"]),
        (&Value::from(2), &Value::from(3), &Value::from(0))
    );
    let note = "left out 3 inputs that are not pages (image/png 2, application/pdf 1)";
    assert!(stderr.contains(note), "{stderr}");
    assert!(ok(&["pairs", idx, "-t", "0.5"]).is_empty(), "no image pairs with another");
    let output = neardex(&["query", idx, path.to_str().unwrap()]);
    assert!(output.status.success());
    let queried: Vec<Value> = json_lines(&output).iter().map(|l| l["query"].clone()).collect();
    assert_eq!(queried, ["<urn:uuid:page>", "<urn:uuid:txt>"]);
    assert!(String::from_utf8_lossy(&output.stderr).contains(note));
    // Files too: a binary file (a NUL byte early on) is not a page; UTF-16
    // text, whose NUL bytes follow a byte order mark, is.
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    std::fs::write(files.join("photo.txt"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR the ferry").unwrap();
    let utf16: Vec<u8> = [0xFF, 0xFE]
        .into_iter()
        .chain("The ferry was late again today.".encode_utf16().flat_map(u16::to_le_bytes))
        .collect();
    std::fs::write(files.join("note.txt"), utf16).unwrap();
    let output = neardex(&["add", idx, files.to_str().unwrap()]);
    assert!(output.status.success());
    let added = &json_lines(&output)[0];
    assert_eq!((&added["added"], &added["not_pages"]), (&Value::from(1), &Value::from(1)));
    assert!(String::from_utf8_lossy(&output.stderr).contains("left out 1 input that is not a page (binary file 1)"));
    fails(&["query", idx, files.join("photo.txt").to_str().unwrap()], 1, "held no document (0 skipped, 1 not pages)");
    // The UTF-16 file was read as its text: the same words in UTF-8 match
    // it exactly.
    let utf8 = dir.path().join("note-utf8.txt");
    std::fs::write(&utf8, "The ferry was late again today.").unwrap();
    let matches = &ok(&["query", idx, "-t", "1", utf8.to_str().unwrap()])[0]["matches"];
    assert_eq!(matches[0]["key"].as_str(), files.join("note.txt").to_str(), "{matches}");
}

/// The page sent as wget, Heritrix and browser-based crawlers record it:
/// chunked, gzip, brotli, zstd. A redirect, an error page and a payload
/// that cannot be decoded (a zstd stream cut inside its first block) are
/// left out and counted.
#[test]
fn warc_payloads_are_decoded_as_recorded_and_error_pages_left_out() {
    use std::io::Write;
    let (dir, idx) = index_dir();
    let idx = idx.as_str();
    ok(&["create", idx]);
    let page = std::fs::read(Path::new(DEMO).join("harbor-chronicle.html")).unwrap();
    let head = |status: &str, fields: &str| format!("HTTP/1.1 {status}\r\nContent-Type: text/html\r\n{fields}\r\n");
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzip.write_all(&page).unwrap();
    let gzip = gzip.finish().unwrap();
    let mut chunked = Vec::new();
    for chunk in gzip.chunks(1000) {
        chunked.extend([format!("{:x}\r\n", chunk.len()).as_bytes(), chunk, b"\r\n"].concat());
    }
    chunked.extend(b"0\r\n\r\n");
    let mut br = Vec::new();
    brotli::CompressorWriter::new(&mut br, 4096, 5, 22).write_all(&page).unwrap();
    let zstd = zstd::encode_all(page.as_slice(), 3).unwrap();
    let responses: [(&str, String, &[u8]); 7] = [
        ("plain", head("200 OK", ""), &page),
        ("wire", head("200 OK", "Transfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n"), &chunked),
        ("br", head("200 OK", "Content-Encoding: br\r\n"), &br),
        ("zstd", head("200 OK", "Content-Encoding: zstd\r\n"), &zstd),
        (
            "moved",
            head("301 Moved Permanently", "Location: /elsewhere\r\n"),
            b"<p>Moved <a href=/elsewhere>here</a></p>",
        ),
        ("missing", head("404 Not Found", ""), b"<p>The page you were looking for is not here.</p>"),
        ("cut", head("200 OK", "Content-Encoding: zstd\r\n"), &zstd[..10]),
    ];
    let mut warc = Vec::new();
    for (id, head, body) in &responses {
        warc.extend(warc_record("response", &format!("<urn:uuid:{id}>"), &[], [head.as_bytes(), body].concat()));
    }
    let (path, added, stderr) = add_warc(dir.path(), idx, warc);
    assert_eq!(
        (&added["added"], &added["exact_duplicates"], &added["not_pages"]),
        (&Value::from(4), &Value::from(3), &Value::from(3))
    );
    let note = "left out 3 inputs that are not pages (HTTP 301 1, HTTP 404 1, zstd payload broken 1)";
    assert!(stderr.contains(note), "{stderr}");
    // The four copies of the page are one page.
    let pairs = pair_keys(idx, "1");
    assert_eq!(pairs.len(), 6, "{pairs:?}");
    // Queried from the same file: one line per page, none for the rest.
    let queried: Vec<Value> = ok(&["query", idx, path.to_str().unwrap()]).iter().map(|l| l["query"].clone()).collect();
    assert_eq!(queried, ["<urn:uuid:plain>", "<urn:uuid:wire>", "<urn:uuid:br>", "<urn:uuid:zstd>"]);
}

/// Inputs compressed with gzip or zstd (as text corpora ship: `.jsonl.gz`,
/// `.jsonl.zst`) are read as their contents, found by their first bytes;
/// a stream cut short gives what came before the cut and a skipped line.
#[test]
fn compressed_inputs_are_read_as_what_they_hold() {
    use std::io::Write;
    let (dir, idx) = index_dir();
    let idx = idx.as_str();
    ok(&["create", idx]);
    let gzip = |bytes: &[u8]| {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    };
    let texts = [
        "The ferry to the island was late again today, and the harbour master said it would be late tomorrow.",
        "A storm is expected over the hills by the evening, and the farmers have brought the sheep in early.",
        "The library on the corner will close for the summer while its roof is repaired by the town council.",
    ];
    let lines = |prefix: &str| -> String {
        texts.iter().enumerate().map(|(i, t)| format!("{{\"id\":\"{prefix}{i}\",\"text\":\"{t}\"}}\n")).collect()
    };
    // Named as C4 names its JSON Lines.
    std::fs::write(dir.path().join("a.json.gz"), gzip(lines("a").as_bytes())).unwrap();
    // Two zstd frames, one file (as `cat x.zst y.zst` or a parallel
    // compressor writes).
    let b = lines("b");
    let (first, second) = b.split_at(b.len() / 2);
    let zst =
        [zstd::encode_all(first.as_bytes(), 3).unwrap(), zstd::encode_all(second.as_bytes(), 3).unwrap()].concat();
    std::fs::write(dir.path().join("b.jsonl.zst"), zst).unwrap();
    let page = std::fs::read(Path::new(DEMO).join("harbor-chronicle.html")).unwrap();
    std::fs::write(dir.path().join("page.html.gz"), gzip(&page)).unwrap();
    std::fs::write(dir.path().join("page.html"), &page).unwrap();
    let files: Vec<String> = ["a.json.gz", "b.jsonl.zst", "page.html.gz", "page.html"]
        .iter()
        .map(|f| dir.path().join(f).to_string_lossy().into_owned())
        .collect();
    let mut args = vec!["add", idx];
    args.extend(files.iter().map(String::as_str));
    let added = &ok(&args)[0];
    assert_eq!(
        (&added["added"], &added["exact_duplicates"], &added["skipped"]),
        (&Value::from(8), &Value::from(4), &Value::from(0))
    );
    let pairs = pair_keys(idx, "1");
    let mut expected: Vec<(String, String)> = (0..3).map(|i| (format!("a{i}"), format!("b{i}"))).collect();
    expected.push((files[2].clone(), files[3].clone()));
    assert_eq!(pairs.len(), 4, "{pairs:?}");
    for (a, b) in &expected {
        assert!(pairs.iter().any(|(x, y)| (x, y) == (a, b) || (y, x) == (a, b)), "{a} {b} in {pairs:?}");
    }
    // A .warc.zst as Archive Team writes them (the IIPC's Zstandard
    // compression for WARC files): a dictionary frame, itself compressed,
    // then a frame per record, each compressed with the dictionary.
    let dictionary = warc_record("warcinfo", "<urn:uuid:dict>", &[], "software: a dictionary of WARC headers and HTML");
    let mut warc_zst = vec![0x5d, 0x2a, 0x4d, 0x18];
    let packed = zstd::encode_all(dictionary.as_slice(), 3).unwrap();
    warc_zst.extend((packed.len() as u32).to_le_bytes());
    warc_zst.extend(&packed);
    let mut compressor = zstd::bulk::Compressor::with_dictionary(3, &dictionary).unwrap();
    for (i, text) in texts.iter().enumerate() {
        let response = format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n{text}");
        let record = warc_record("response", &format!("<urn:uuid:z{i}>"), &[], response);
        warc_zst.extend(compressor.compress(&record).unwrap());
    }
    let warc_zst_path = dir.path().join("crawl.warc.zst");
    std::fs::write(&warc_zst_path, &warc_zst).unwrap();
    let added = &ok(&["add", idx, warc_zst_path.to_str().unwrap()])[0];
    assert_eq!(
        (&added["added"], &added["exact_duplicates"], &added["skipped"]),
        (&Value::from(3), &Value::from(3), &Value::from(0))
    );
    // Cut short: the lines before the cut, and the break reported.
    let long: String = (0..2000).map(|i| format!("{{\"id\":\"c{i}\",\"text\":\"{} {i}\"}}\n", texts[i % 3])).collect();
    let whole = gzip(long.as_bytes());
    let cut = dir.path().join("c.jsonl.gz");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let output = neardex(&["add", idx, cut.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let added = json_lines(&output)[0]["added"].as_u64().unwrap();
    assert!(added > 100 && added < 2000, "{added}");
    assert!(stderr.contains("c.jsonl.gz: gzip stream broken"), "{stderr}");
    // The line the cut fell in is the other skipped input.
    assert_eq!(json_lines(&output)[0]["skipped"], 2, "{stderr}");
}

/// A corpus without ids (The Pile, SlimPajama: text and meta) is keyed by
/// file and line with --line-keys.
#[test]
fn json_lines_without_ids_are_keyed_by_file_and_line() {
    let (dir, idx) = index_dir();
    let idx = idx.as_str();
    ok(&["create", idx]);
    let text = "The ferry to the island was late again today, and the harbour master said it would be late tomorrow.";
    let other = "A storm is expected over the hills by the evening, and the farmers have brought the sheep in early.";
    let corpus = dir.path().join("pile.jsonl");
    let lines = [text, other, text].map(|t| format!("{{\"text\":\"{t}\",\"meta\":{{\"set\":\"web\"}}}}\n"));
    std::fs::write(&corpus, lines.concat()).unwrap();
    let path = corpus.to_str().unwrap();
    // Without: every line lacks the key field.
    assert_eq!(ok(&["add", idx, path])[0]["skipped"], 3);
    let added = &ok(&["add", idx, path, "--line-keys"])[0];
    assert_eq!((&added["added"], &added["exact_duplicates"]), (&Value::from(3), &Value::from(1)));
    let pairs = ok(&["pairs", idx, "-t", "1"]);
    assert_eq!(pairs.len(), 1, "{pairs:?}");
    assert_eq!(
        (pairs[0]["a"].as_str(), pairs[0]["b"].as_str()),
        (Some(&*format!("{path}:1")), Some(&*format!("{path}:3")))
    );
    // Queries are named so too.
    let queried: Vec<Value> =
        ok(&["query", idx, path, "--line-keys", "--exclude-self"]).iter().map(|l| l["query"].clone()).collect();
    assert_eq!(queried, [format!("{path}:1"), format!("{path}:2"), format!("{path}:3")]);
    fails(&["add", idx, path, "--line-keys", "--key-field", "id"], 2, "cannot be used with");
}

/// A directory walk leaves out, and reports, what it cannot read and a
/// directory it reaches again through a symbolic link (a loop), instead of
/// failing the whole add.
#[cfg(unix)]
#[test]
fn a_directory_walk_survives_symbolic_link_loops_and_dangling_links() {
    let (dir, idx) = index_dir();
    let idx = idx.as_str();
    ok(&["create", idx]);
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("sub/a.txt"), "The ferry to the island was late again today.").unwrap();
    std::os::unix::fs::symlink("..", tree.join("sub/up")).unwrap();
    std::os::unix::fs::symlink("nowhere.txt", tree.join("gone.txt")).unwrap();
    let output = neardex(&["add", idx, tree.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let added = &json_lines(&output)[0];
    assert_eq!((&added["added"], &added["skipped"]), (&Value::from(1), &Value::from(2)), "{stderr}");
    assert!(stderr.contains("sub/up: a directory already read (through a symbolic link)"), "{stderr}");
    assert!(stderr.contains("gone.txt: No such file or directory"), "{stderr}");
    // The path given must be there.
    fails(&["add", idx, tree.join("gone.txt").to_str().unwrap()], 1, "No such file or directory");
}

/// An output that fails (a full disk) ends the command at once, even while
/// its input, still open, has nothing more to give.
#[cfg(target_os = "linux")]
#[test]
fn a_failing_output_ends_the_command_while_the_input_stays_open() {
    use std::io::Write;
    let (dir, idx) = index_dir();
    let idx = idx.as_str();
    ok(&["create", idx]);
    let text = "The ferry to the island was late again today, and the harbour master said so.";
    let page = dir.path().join("page.txt");
    std::fs::write(&page, text).unwrap();
    ok(&["add", idx, page.to_str().unwrap()]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardex"))
        .args(["query", idx, "--input-format", "jsonl", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // More than a turn of lines, so that matches are written; then the
    // input stays open.
    let mut stdin = child.stdin.take().unwrap();
    for i in 0..1200 {
        writeln!(stdin, "{{\"id\":\"{i}\",\"text\":\"{text}\"}}").unwrap();
    }
    stdin.flush().unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > std::time::Duration::from_secs(20) {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let status = status.expect("neardex still running 20 s after its output failed");
    assert_eq!(status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("No space left on device"));
}

#[test]
fn revisits_resolve_in_input_order_and_unknown_ones_are_skipped() {
    let (dir, idx) = index_dir();
    let idx = idx.as_str();
    ok(&["create", idx]);
    let page = std::fs::read_to_string(Path::new(DEMO).join("harbor-chronicle.html")).unwrap();
    let response = format!("HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n{page}");
    let mut warc = warc_record("response", "<urn:uuid:a>", &[("WARC-Target-URI", "http://a.example/")], &response);
    warc.extend(warc_record("revisit", "<urn:uuid:b>", &[("WARC-Refers-To", "<urn:uuid:a>")], ""));
    warc.extend(warc_record("revisit", "<urn:uuid:c>", &[("WARC-Refers-To", "<urn:uuid:nowhere>")], ""));
    warc.extend(warc_record("request", "<urn:uuid:d>", &[], "GET / HTTP/1.1\r\n\r\n"));
    let path = dir.path().join("crawl.warc");
    std::fs::write(&path, warc).unwrap();
    let output = neardex(&["add", idx, path.to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let added = json_lines(&output);
    assert_eq!((added[0]["added"].as_u64(), added[0]["skipped"].as_u64()), (Some(2), Some(1)));
    assert_eq!(added[0]["exact_duplicates"], 1, "the revisit carries the page's signatures");
    assert!(String::from_utf8_lossy(&output.stderr).contains("revisit of a record not in the index"));
    let pairs = ok(&["pairs", idx, "--threshold", "1"]);
    assert_eq!(pairs.len(), 1);
    assert_eq!((pairs[0]["a"].as_str(), pairs[0]["b"].as_str()), (Some("<urn:uuid:a>"), Some("<urn:uuid:b>")));
    // Pairs and clusters name the URLs documents were stored with (the
    // revisit has none of its own here).
    assert_eq!((pairs[0]["a_url"].as_str(), pairs[0].get("b_url")), (Some("http://a.example/"), None));
    let clusters = ok(&["clusters", idx, "--threshold", "1"]);
    assert_eq!(clusters[0]["size"], 2);
    assert_eq!(clusters[0]["urls"], serde_json::json!(["http://a.example/", null]));
    let table = neardex(&["pairs", idx, "--threshold", "1", "--format", "table"]);
    let header = String::from_utf8_lossy(&table.stdout).lines().next().unwrap_or_default().to_owned();
    assert_eq!(header.split_whitespace().collect::<Vec<_>>(), ["a", "b", "similarity", "a_url"]);
}

/// Revisits that name no record (WARC 1.1's target URI and date,
/// Heritrix's identical-payload-digest revisits, a server's 304) are
/// resolved in their file; the revisit of an image is not a page.
#[test]
fn revisits_resolve_by_target_uri_and_date_digest_or_uri() {
    let (dir, idx) = index_dir();
    let idx = idx.as_str();
    ok(&["create", idx]);
    let profile = |name: &str| ("WARC-Profile", format!("http://netpreserve.org/warc/1.1/revisit/{name}"));
    let (digest, not_modified) = (profile("identical-payload-digest"), profile("server-not-modified"));
    let (digest, not_modified) = ((digest.0, digest.1.as_str()), (not_modified.0, not_modified.1.as_str()));
    let (a, b) = (("WARC-Target-URI", "http://a.example/"), ("WARC-Target-URI", "http://b.example/"));
    let date = ("WARC-Date", "2026-01-01T00:00:00Z");
    let headers_only = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n";
    let records = [
        warc_record("response", "<urn:a>", &[a, date, ("WARC-Payload-Digest", "sha1:AAA")], demo_response(PAGES[0])),
        warc_record("response", "<urn:b>", &[b, date, ("WARC-Payload-Digest", "sha1:BBB")], demo_response(PAGES[1])),
        // WARC 1.1: the target's URI and date.
        warc_record(
            "revisit",
            "<urn:by-uri-date>",
            &[digest, ("WARC-Refers-To-Target-URI", a.1), ("WARC-Refers-To-Date", date.1)],
            headers_only,
        ),
        // Heritrix: the payload digest alone.
        warc_record("revisit", "<urn:by-digest>", &[digest, b, ("WARC-Payload-Digest", "sha1:BBB")], headers_only),
        // A 304: the latest record of its URI.
        warc_record("revisit", "<urn:not-modified>", &[not_modified, a], "HTTP/1.1 304 Not Modified\r\n\r\n"),
        // An image fetched again, and a digest nothing in the file has.
        warc_record(
            "revisit",
            "<urn:image>",
            &[digest, ("WARC-Payload-Digest", "sha1:PNG")],
            "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\n\r\n",
        ),
        warc_record("revisit", "<urn:unknown>", &[digest, ("WARC-Payload-Digest", "sha1:ZZZ")], headers_only),
    ];
    let (_, added, stderr) = add_warc(dir.path(), idx, records.concat());
    assert_eq!(
        (&added["added"], &added["exact_duplicates"], &added["not_pages"], &added["skipped"]),
        (&Value::from(5), &Value::from(3), &Value::from(1), &Value::from(1)),
        "{stderr}"
    );
    assert_eq!(stderr.matches("revisit of a record not in the index").count(), 1, "{stderr}");
    let mut pairs: Vec<(String, String)> =
        pair_keys(idx, "1").into_iter().map(|(x, y)| if x < y { (x, y) } else { (y, x) }).collect();
    pairs.sort();
    let expected = [
        ("<urn:a>", "<urn:by-uri-date>"),
        ("<urn:a>", "<urn:not-modified>"),
        ("<urn:b>", "<urn:by-digest>"),
        ("<urn:by-uri-date>", "<urn:not-modified>"),
    ];
    let expected: Vec<(String, String)> = expected.iter().map(|(x, y)| (x.to_string(), y.to_string())).collect();
    assert_eq!(pairs, expected);
    // The page and its 304 revisit share a URL: a query by it is one line
    // each, and explain asks for a key.
    let by_url = ok(&["query", idx, "-t", "1", "--key", a.1]);
    let queried: Vec<&str> = by_url.iter().map(|l| l["query"].as_str().unwrap()).collect();
    assert_eq!(queried, ["<urn:a>", "<urn:not-modified>"]);
    fails(&["explain", idx, a.1, "<urn:b>"], 1, "2 documents have URL");
}

/// `list`: the stored documents in the order they were added, deleted
/// ones left out, replaced ones where they were replaced.
#[test]
fn list_gives_the_stored_documents_in_the_order_they_were_added() {
    let (dir, idx) = index_dir();
    let idx = idx.as_str();
    ok(&["create", idx]);
    let date = ("WARC-Date", "2026-01-01T00:00:00Z");
    let records = [
        warc_record("response", "<urn:a>", &[("WARC-Target-URI", "http://a.example/"), date], demo_response(PAGES[0])),
        warc_record("response", "<urn:b>", &[("WARC-Target-URI", "http://b.example/"), date], demo_response(PAGES[1])),
        warc_record("response", "<urn:c>", &[], demo_response(PAGES[3])),
        warc_record("revisit", "<urn:again>", &[("WARC-Refers-To", "<urn:a>")], ""),
    ];
    add_warc(dir.path(), idx, records.concat());
    ok(&["delete", idx, "<urn:b>"]);
    // Replacing <urn:c> moves it to the end.
    let page = dir.path().join("c.warc");
    std::fs::write(&page, warc_record("response", "<urn:c>", &[], demo_response(PAGES[4]))).unwrap();
    ok(&["add", idx, page.to_str().unwrap(), "--replace"]);
    let listed = ok(&["list", idx]);
    let keys: Vec<&str> = listed.iter().map(|l| l["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["<urn:a>", "<urn:again>", "<urn:c>"]);
    assert_eq!((listed[0]["url"].as_str(), listed[0]["date"].as_str()), (Some("http://a.example/"), Some(date.1)));
    assert_eq!((listed[2].get("url"), listed[2].get("date")), (None, None));
    // A revisit is a copy of its target: one fingerprint.
    assert_eq!(listed[0]["fingerprint"], listed[1]["fingerprint"]);
    assert_ne!(listed[0]["fingerprint"], listed[2]["fingerprint"]);
    assert_eq!(listed[0]["fingerprint"].as_str().unwrap().len(), 32);
    let table = neardex(&["list", idx, "--format", "table"]);
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    let header: Vec<&str> = table.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["key", "url", "date", "fingerprint"]);
    assert_eq!(table.lines().count(), 4);
    // A query by URL is the query by the key of the document stored with it.
    let by_url = ok(&["query", idx, "-t", "0.5", "--key", "http://a.example/"]);
    let by_key = ok(&["query", idx, "-t", "0.5", "--key", "<urn:a>"]);
    assert_eq!(by_url.len(), 1);
    assert_eq!((&by_url[0]["query"], &by_url[0]["url"]), (&Value::from("<urn:a>"), &Value::from("http://a.example/")));
    assert_eq!(by_url[0]["matches"], by_key[0]["matches"]);
    assert_eq!(by_url[0]["matches"][0]["key"], "<urn:again>");
    fails(&["query", idx, "--key", "http://nowhere.example/"], 1, "no document has key or URL");
    // explain takes URLs as well.
    let explained = ok(&["explain", idx, "http://a.example/", "<urn:again>"]);
    assert_eq!((&explained[0]["a"], &explained[0]["similarity"]), (&Value::from("<urn:a>"), &Value::from(1.0)));
    fails(&["explain", idx, "http://nowhere.example/", "<urn:a>"], 1, "no document has key or URL");
}

#[test]
fn query_reads_warc_records_json_lines_and_directories_as_add_does() {
    let (dir, idx) = index_dir();
    let idx = idx.as_str();
    ok(&["create", idx]);
    let pages = demo_pages(dir.path());
    ok(&["add", idx, pages.to_str().unwrap()]);
    let tau = "0.3";
    // What a query with each page's file finds.
    let by_file = |name: &str| {
        let path = pages.join(name);
        let found = ok(&["query", idx, "-t", tau, path.to_str().unwrap()]);
        assert_eq!(found.len(), 1);
        found[0]["matches"].clone()
    };
    // The HTML pages as WARC responses, a revisit of the first, and a
    // request (not a document): one line per response and revisit.
    let html: Vec<&str> = PAGES.iter().copied().filter(|p| p.ends_with(".html")).collect();
    let mut warc = Vec::new();
    for (i, name) in html.iter().enumerate() {
        let page = std::fs::read_to_string(pages.join(name)).unwrap();
        let response = format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n{page}");
        let uri = format!("http://example.com/{name}");
        warc.extend(warc_record("response", &format!("<urn:uuid:{i}>"), &[("WARC-Target-URI", &uri)], &response));
    }
    warc.extend(warc_record("revisit", "<urn:uuid:again>", &[("WARC-Refers-To", "<urn:uuid:0>")], ""));
    warc.extend(warc_record("request", "<urn:uuid:get>", &[], "GET / HTTP/1.1\r\n\r\n"));
    let path = dir.path().join("crawl.warc");
    std::fs::write(&path, warc).unwrap();
    let lines = ok(&["query", idx, "-t", tau, path.to_str().unwrap()]);
    assert_eq!(lines.len(), html.len() + 1);
    for (i, name) in html.iter().enumerate() {
        assert_eq!(lines[i]["query"], format!("<urn:uuid:{i}>"));
        assert_eq!(lines[i]["url"], format!("http://example.com/{name}"));
        assert_eq!(lines[i]["matches"], by_file(name), "{name}");
    }
    assert!(!lines[0]["matches"].as_array().unwrap().is_empty());
    assert_eq!(lines[html.len()]["query"], "<urn:uuid:again>");
    assert_eq!(lines[html.len()]["matches"], lines[0]["matches"], "a revisit is its target's page");
    // --top applies to every record.
    for line in ok(&["query", idx, "-t", tau, "--top", "1", path.to_str().unwrap()]) {
        assert!(line["matches"].as_array().unwrap().len() <= 1, "{line}");
    }
    // A directory: one line per file, in path order, each its file's.
    let lines = ok(&["query", idx, "-t", tau, pages.to_str().unwrap()]);
    let mut sorted = PAGES.to_vec();
    sorted.sort();
    assert_eq!(lines.len(), sorted.len());
    for (line, name) in lines.iter().zip(&sorted) {
        assert_eq!(line["query"], pages.join(name).to_str().unwrap());
        assert_eq!(line["matches"], by_file(name), "{name}");
    }
    // The files the index was built from, each without itself: the same
    // matches less the one under the query's own key, which every file
    // with signatures finds (similarity 1).
    let others = ok(&["query", idx, "-t", tau, "--exclude-self", pages.to_str().unwrap()]);
    let mut selves = 0;
    for (line, other) in lines.iter().zip(&others) {
        let mut expected = line["matches"].as_array().unwrap().clone();
        expected.retain(|m| m["key"] != line["query"]);
        selves += line["matches"].as_array().unwrap().len() - expected.len();
        assert_eq!((&other["query"], other["matches"].as_array().unwrap()), (&line["query"], &expected));
    }
    assert_eq!(selves, 4, "the pages with signatures (the two number tables have none)");
    // With --top 1, the most similar other document, not nothing.
    let harbor = pages.join("harbor-chronicle.html");
    let top = ok(&["query", idx, "-t", tau, "--top", "1", "--exclude-self", harbor.to_str().unwrap()]);
    let best = &others.iter().find(|l| l["query"] == harbor.to_str().unwrap()).unwrap()["matches"];
    let best = best
        .as_array()
        .unwrap()
        .iter()
        .max_by(|a, b| a["similarity"].as_f64().partial_cmp(&b["similarity"].as_f64()).unwrap());
    assert!(best.is_some(), "the harbor page has a near-duplicate at {tau}");
    assert_eq!(top[0]["matches"].as_array().unwrap().as_slice(), std::slice::from_ref(best.unwrap()));
    let key = harbor.to_str().unwrap();
    let by_key = ok(&["query", idx, "-t", tau, "--top", "1", "--key", key]);
    assert_eq!(by_key[0]["matches"], top[0]["matches"], "--key leaves itself out and still gives one");
    // JSON Lines: one query per line, keyed by its id field, as a text file.
    let notes = std::fs::read_to_string(Path::new(DEMO).join("library-notes.txt")).unwrap();
    let jsonl = dir.path().join("q.jsonl");
    let line = serde_json::json!({ "name": "notes", "body": notes });
    std::fs::write(&jsonl, format!("{line}\nnot json\n")).unwrap();
    let output =
        neardex(&["query", idx, "-t", tau, "--key-field", "name", "--text-field", "body", jsonl.to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let lines = json_lines(&output);
    assert_eq!(lines.len(), 1);
    assert_eq!((&lines[0]["query"], &lines[0]["matches"]), (&Value::from("notes"), &by_file("library-notes.txt")));
    assert!(String::from_utf8_lossy(&output.stderr).contains("neardex: skipped"));
    // Inputs without a document to query are an error.
    let empty = dir.path().join("empty.warc");
    std::fs::write(&empty, warc_record("request", "<urn:uuid:get>", &[], "GET / HTTP/1.1\r\n\r\n")).unwrap();
    fails(&["query", idx, empty.to_str().unwrap()], 1, "held no document");
}

/// A text file in `dir`, for commands that must refuse it.
fn page_path(dir: &tempfile::TempDir) -> String {
    let path = dir.path().join("page.txt");
    std::fs::write(&path, "The ferry to the island was late again today.").unwrap();
    path.to_string_lossy().into_owned()
}

/// What `add --skip-similar τ` must leave out, by brute force over `all`
/// (an index of every document): every pair at τ, then in input order
/// (`position` of a key) a document is kept unless it reaches τ with one
/// kept before it. For each document, the kept ones before it that it
/// reaches, with their similarity, by position: empty for one kept.
fn refused_by_brute_force(
    all: &str,
    tau: &str,
    documents: usize,
    position: impl Fn(&Value) -> usize,
) -> Vec<Vec<(usize, f64)>> {
    let mut similar = vec![Vec::new(); documents];
    for p in ok(&["pairs", all, "--threshold", tau, "--brute-force"]) {
        let (a, b) = (position(&p["a"]), position(&p["b"]));
        similar[a.max(b)].push((a.min(b), p["similarity"].as_f64().unwrap()));
    }
    let mut refused_by: Vec<Vec<(usize, f64)>> = Vec::with_capacity(documents);
    for earlier in similar {
        let mut by: Vec<(usize, f64)> = earlier.into_iter().filter(|&(j, _)| refused_by[j].is_empty()).collect();
        by.sort_by_key(|&(j, _)| j);
        refused_by.push(by);
    }
    refused_by
}

/// `examples/dedup_warc.rs`, the same deduplication through the library,
/// keeps what `add --skip-similar --kept` keeps, byte for byte.
#[test]
fn the_dedup_warc_example_keeps_what_add_keeps() {
    let exe = std::env::current_exe().unwrap();
    let name = format!("dedup_warc{}", std::env::consts::EXE_SUFFIX);
    let example = exe.parent().and_then(Path::parent).unwrap().join("examples").join(name);
    assert!(example.exists(), "cargo test builds the examples first: {}", example.display());
    let (dir, idx) = index_dir();
    let mut warc = Vec::new();
    for (i, name) in PAGES.iter().chain(&PAGES[..2]).enumerate() {
        warc.extend(warc_record(
            "response",
            &format!("<urn:uuid:{i}>"),
            &[("WARC-Target-URI", name)],
            demo_response(name),
        ));
    }
    let crawl = dir.path().join("crawl.warc");
    std::fs::write(&crawl, &warc).unwrap();
    let (by_add, by_example) = (dir.path().join("add.warc"), dir.path().join("example.warc"));
    ok(&["create", &idx]);
    let path = |p: &Path| p.to_str().unwrap().to_owned();
    ok(&["add", &idx, &path(&crawl), "--skip-similar", "0.5", "--kept", &path(&by_add)]);
    let run = Command::new(&example)
        .args([dir.path().join("example.ndx"), crawl.clone(), by_example.clone()])
        .arg("0.5")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let (added, example) = (std::fs::read(&by_add).unwrap(), std::fs::read(&by_example).unwrap());
    assert!(!added.is_empty() && added.len() < warc.len(), "some pages kept, some not");
    assert_eq!(String::from_utf8_lossy(&example), String::from_utf8_lossy(&added));
}

/// `add --skip-similar --kept out.warc.gz` on a crawl: the WARC records
/// of the pages kept, as read, each in a gzip member of its own, and the
/// pages kept are those brute force keeps.
#[test]
fn add_kept_writes_the_warc_records_of_the_pages_added() {
    use std::io::Read;
    let (dir, idx) = index_dir();
    let all = dir.path().join("all");
    let (idx, all) = (idx.as_str(), all.to_str().unwrap());
    // The documents, in input order, in two files: each page, a copy of
    // the first, and a revisit of the third.
    let mut documents = Vec::new();
    for (i, name) in PAGES.iter().enumerate() {
        let id = format!("<urn:uuid:page{i}>");
        documents.push((id.clone(), warc_record("response", &id, &[("WARC-Target-URI", name)], demo_response(name))));
    }
    documents
        .push(("<urn:uuid:copy>".into(), warc_record("response", "<urn:uuid:copy>", &[], demo_response(PAGES[0]))));
    let revisit = warc_record("revisit", "<urn:uuid:again>", &[("WARC-Refers-To", "<urn:uuid:page2>")], "");
    documents.push(("<urn:uuid:again>".into(), revisit));
    // Each file starts with its warcinfo record, which --kept writes where
    // it stands; requests are not written.
    let infos: Vec<Vec<u8>> =
        (1..=2).map(|f| warc_record("warcinfo", &format!("<urn:uuid:info{f}>"), &[], format!("file: {f}"))).collect();
    let split = 2;
    let mut paths = Vec::new();
    for (f, part) in [&documents[..split], &documents[split..]].into_iter().enumerate() {
        let mut warc = infos[f].clone();
        for (i, (_, record)) in part.iter().enumerate() {
            warc.extend(warc_record("request", &format!("<urn:uuid:request{f}.{i}>"), &[], "GET / HTTP/1.1\r\n\r\n"));
            warc.extend(record);
        }
        let path = dir.path().join(format!("crawl{f}.warc"));
        std::fs::write(&path, &warc).unwrap();
        paths.push(path.to_str().unwrap().to_owned());
    }
    let (first, second) = (paths[0].as_str(), paths[1].as_str());
    for path in [idx, all] {
        ok(&["create", path]);
    }
    let kept_file = dir.path().join("kept.warc.gz");
    let kept_path = kept_file.to_str().unwrap();
    let tau = "0.5";
    let out = ok(&["add", idx, first, second, "--skip-similar", tau, "--kept", kept_path]);
    ok(&["add", all, first, second]);
    let position = |key: &Value| documents.iter().position(|(id, _)| key.as_str() == Some(id)).unwrap();
    let kept: Vec<bool> =
        refused_by_brute_force(all, tau, documents.len(), position).iter().map(Vec::is_empty).collect();
    let refused = kept.iter().filter(|k| !**k).count();
    assert!(refused >= 3 && refused < documents.len() - 2, "{kept:?}: a test that exercises both outcomes");
    assert_eq!(out.len() - 1, refused, "{out:?}");
    // The kept records, byte for byte, in order, one gzip member each.
    let kept_of = |range: std::ops::Range<usize>| -> Vec<u8> {
        range.filter(|&i| kept[i]).flat_map(|i| documents[i].1.clone()).collect()
    };
    let expected = [infos[0].clone(), kept_of(0..split), infos[1].clone(), kept_of(split..documents.len())].concat();
    let packed = std::fs::read(&kept_file).unwrap();
    let mut written = Vec::new();
    flate2::read::MultiGzDecoder::new(packed.as_slice()).read_to_end(&mut written).unwrap();
    assert_eq!(String::from_utf8_lossy(&written), String::from_utf8_lossy(&expected));
    let mut member = Vec::new();
    flate2::read::GzDecoder::new(packed.as_slice()).read_to_end(&mut member).unwrap();
    assert_eq!(member, infos[0], "the first member is the first record alone");
    // And they are a WARC file neardex reads: the kept pages again.
    let (again, _) = index_dir();
    let again = again.path().join("again");
    let again = again.to_str().unwrap();
    ok(&["create", again]);
    let added = ok(&["add", again, kept_path]);
    assert_eq!(added[0]["added"].as_u64(), Some((documents.len() - refused) as u64));
    // A JSON Lines input cannot go to a WARC file, nor a WARC input to JSON lines.
    let jsonl = dir.path().join("docs.jsonl");
    std::fs::write(&jsonl, "{\"id\": \"a\", \"text\": \"the ferry was late\"}\n").unwrap();
    let out_warc = dir.path().join("out.warc");
    fails(&["add", idx, jsonl.to_str().unwrap(), "--kept", out_warc.to_str().unwrap()], 1, "is not a WARC record");
    let out_jsonl = dir.path().join("out.jsonl");
    fails(&["add", idx, first, "--kept", out_jsonl.to_str().unwrap()], 1, "is not a JSON line");
}

#[test]
fn add_skip_similar_keeps_what_brute_force_keeps() {
    // 400 texts over a small vocabulary (many pairs reach τ), in commits of
    // 50 (so matches are staged in the same writer or committed before).
    let (dir, idx) = index_dir();
    let all = dir.path().join("all");
    let (idx, all) = (idx.as_str(), all.to_str().unwrap());
    let mut lines = String::new();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..400 {
        let words: Vec<String> = (0..6)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                format!("w{}", state % 14)
            })
            .collect();
        // Fields neardex does not read, which --kept writes back as read.
        lines.push_str(&format!(
            "{{\"id\": \"k{i}\", \"text\": \"{}\", \"url\": \"https://example.com/k{i}\", \"meta\": {{\"n\": {i}}}}}\n",
            words.join(" ")
        ));
    }
    let jsonl = dir.path().join("docs.jsonl");
    std::fs::write(&jsonl, &lines).unwrap();
    let jsonl = jsonl.to_str().unwrap();
    for path in [idx, all] {
        ok(&["create", path, "--scheme", "words:1", "--similarity", "set"]);
    }
    let kept_file = dir.path().join("deduplicated.jsonl.zst");
    let kept_path = kept_file.to_str().unwrap();
    let out = ok(&["add", idx, jsonl, "--batch", "50", "--skip-similar", "0.6", "--kept", kept_path]);
    let (summary, refused) = out.split_last().unwrap();
    ok(&["add", all, jsonl]);
    let index_of = |k: &Value| k.as_str().unwrap()[1..].parse::<usize>().unwrap();
    let refused_by = refused_by_brute_force(all, "0.6", 400, index_of);
    let kept: Vec<bool> = refused_by.iter().map(Vec::is_empty).collect();
    let expected: Vec<(String, Vec<(usize, f64)>)> = refused_by
        .into_iter()
        .enumerate()
        .filter(|(_, by)| !by.is_empty())
        .map(|(i, by)| (format!("k{i}"), by))
        .collect();
    let found: Vec<(String, Vec<(usize, f64)>)> = refused
        .iter()
        .map(|r| {
            let by = r["similar_to"].as_array().unwrap().iter();
            (
                r["not_added"].as_str().unwrap().to_owned(),
                by.map(|m| (index_of(&m["key"]), m["similarity"].as_f64().unwrap())).collect(),
            )
        })
        .collect();
    assert!(
        expected.len() > 50 && expected.len() < 350,
        "{} refused: a test that exercises both outcomes",
        expected.len()
    );
    assert_eq!(found, expected);
    // Each line names the URLs the documents came with.
    for r in refused {
        assert_eq!(r["url"].as_str().unwrap(), format!("https://example.com/{}", r["not_added"].as_str().unwrap()));
        for m in r["similar_to"].as_array().unwrap() {
            assert_eq!(m["url"].as_str().unwrap(), format!("https://example.com/{}", m["key"].as_str().unwrap()));
        }
    }
    let kept_count = kept.iter().filter(|&&k| k).count() as u64;
    assert_eq!(
        (summary["added"].as_u64(), summary["near_duplicates"].as_u64()),
        (Some(kept_count), Some(400 - kept_count))
    );
    assert_eq!(ok(&["stats", idx])[0]["documents"].as_u64(), Some(kept_count));
    // What was kept has no pair at τ left.
    assert!(ok(&["pairs", idx, "--threshold", "0.6"]).is_empty());
    // --kept wrote the kept documents' lines, byte for byte, in order.
    let written = zstd::decode_all(std::fs::File::open(&kept_file).unwrap()).unwrap();
    let expected_lines: String = lines.lines().zip(&kept).filter(|(_, &k)| k).map(|(l, _)| format!("{l}\n")).collect();
    assert_eq!(String::from_utf8(written).unwrap(), expected_lines);
    fails(&["add", idx, &page_path(&dir), "--kept", kept_path], 1, "is not a JSON line");
    // The file --kept writes must not be an input, nor lie under one.
    fails(&["add", idx, jsonl, "--kept", jsonl], 1, "is among the inputs");
    let inside = dir.path().join("out.jsonl");
    fails(&["add", idx, dir.path().to_str().unwrap(), "--kept", inside.to_str().unwrap()], 1, "is among the inputs");
    assert_eq!(std::fs::read_to_string(jsonl).unwrap(), lines, "the input is untouched");
    fails(&["add", idx, jsonl, "--skip-similar", "1.5"], 1, "--skip-similar");
    fails(&["add", idx, jsonl, "--skip-similar", "0.5", "--replace"], 2, "cannot be used with");
}

#[test]
fn many_documents_keep_their_order_keys_and_problems() {
    // More documents than one turn of the signing pipeline signs, with bad
    // lines among them: each key gets its own text's signatures, and the
    // problems are reported in input order.
    let (dir, idx) = index_dir();
    let idx = idx.as_str();
    ok(&["create", idx, "--scheme", "words:1", "--similarity", "set"]);
    let mut lines = String::new();
    for i in 0..1_500u32 {
        if i % 400 == 7 {
            lines.push_str("not json\n");
        }
        lines.push_str(&format!("{{\"id\": \"k{i}\", \"text\": \"w{i} x{} y{}\"}}\n", i / 2, i / 3));
    }
    let jsonl = dir.path().join("docs.jsonl");
    std::fs::write(&jsonl, lines).unwrap();
    let output = neardex(&["add", idx, jsonl.to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let added = json_lines(&output);
    assert_eq!((added[0]["added"].as_u64(), added[0]["skipped"].as_u64()), (Some(1_500), Some(4)));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let skipped_lines: Vec<u64> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("neardex: skipped "))
        .map(|l| l.split(':').nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(skipped_lines, vec![8, 409, 810, 1211]);
    // Each text is stored under its own key: at similarity 1 a text finds
    // that key alone (every text has its own w word).
    for i in [0u32, 511, 512, 513, 1_023, 1_499] {
        let query = dir.path().join("q.txt");
        std::fs::write(&query, format!("w{i} x{} y{}", i / 2, i / 3)).unwrap();
        let found = ok(&["query", idx, "--threshold", "1", query.to_str().unwrap()]);
        let keys: Vec<&str> =
            found[0]["matches"].as_array().unwrap().iter().filter_map(|m| m["key"].as_str()).collect();
        assert_eq!(keys, vec![format!("k{i}").as_str()], "{found:?}");
    }
    // The same file as queries: a line per document in input order across
    // the pipeline's turns, each finding its own key alone.
    let output = neardex(&["query", idx, "--threshold", "1", jsonl.to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let lines = json_lines(&output);
    assert_eq!(lines.len(), 1_500);
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["query"], format!("k{i}"));
        assert_eq!(line["matches"].as_array().unwrap().len(), 1, "{line}");
        assert_eq!(line["matches"][0]["key"], format!("k{i}"));
    }
    assert_eq!(String::from_utf8_lossy(&output.stderr).matches("neardex: skipped").count(), 4);
}

#[test]
fn a_bulk_add_writes_segments_and_finds_what_a_plain_add_finds() {
    // The same 1,500 documents added through the writer (pending, 1,000 a
    // commit) and with --bulk in commits of 400 (a segment each): the same
    // pairs, duplicate keys and replacements handled alike.
    let (dir, plain) = index_dir();
    let bulk = dir.path().join("bulk.ndx").to_str().unwrap().to_owned();
    let (plain, bulk) = (plain.as_str(), bulk.as_str());
    let mut lines = String::new();
    for i in 0..1_500u32 {
        lines.push_str(&format!("{{\"id\": \"k{i}\", \"text\": \"w{i} x{} y{}\"}}\n", i / 2, i / 3));
    }
    let jsonl = dir.path().join("docs.jsonl");
    std::fs::write(&jsonl, lines).unwrap();
    let jsonl = jsonl.to_str().unwrap();
    for idx in [plain, bulk] {
        ok(&["create", idx, "--scheme", "words:1", "--similarity", "set"]);
    }
    ok(&["add", plain, jsonl]);
    let added = ok(&["add", bulk, "--bulk", "--batch", "400", jsonl]);
    assert_eq!(added[0]["added"].as_u64(), Some(1_500));
    let plain_stats = ok(&["stats", plain]);
    let bulk_stats = ok(&["stats", bulk]);
    assert_eq!((plain_stats[0]["pending"].as_u64(), plain_stats[0]["segments"].as_u64()), (Some(1_500), Some(0)));
    assert_eq!(bulk_stats[0]["pending"].as_u64(), Some(0));
    assert!(bulk_stats[0]["segments"].as_u64().unwrap() >= 1, "{bulk_stats:?}");
    assert_eq!(bulk_stats[0]["documents"].as_u64(), Some(1_500));
    let pairs = |idx: &str| {
        let output = neardex(&["pairs", idx, "--threshold", "0.5"]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let mut lines: Vec<String> = String::from_utf8(output.stdout).unwrap().lines().map(str::to_owned).collect();
        lines.sort();
        lines
    };
    let expected = pairs(plain);
    assert!(expected.len() > 100, "{}", expected.len());
    assert_eq!(pairs(bulk), expected);
    // Keys already stored are skipped, and replaced with --replace.
    let again = ok(&["add", bulk, "--bulk", jsonl]);
    assert_eq!((again[0]["added"].as_u64(), again[0]["skipped"].as_u64()), (Some(0), Some(1_500)));
    let replaced = ok(&["add", bulk, "--bulk", "--replace", jsonl]);
    assert_eq!(replaced[0]["added"].as_u64(), Some(1_500));
    assert_eq!(ok(&["stats", bulk])[0]["documents"].as_u64(), Some(1_500));
    assert_eq!(pairs(bulk), expected);
    ok(&["verify", bulk]);
    fails(&["add", bulk, "--batch", "0", jsonl], 2, "--batch");
    // In commits of 100, fifteen segments: the tiered policy merges eight
    // of them on the index's thread while the add goes on, and the add
    // waits for its merges before it reports (one segment of 800 and seven
    // of 100 are left).
    let merged = dir.path().join("merged.ndx").to_str().unwrap().to_owned();
    ok(&["create", &merged, "--scheme", "words:1", "--similarity", "set"]);
    let added = ok(&["add", &merged, "--bulk", "--batch", "100", jsonl]);
    assert_eq!(added[0]["added"].as_u64(), Some(1_500));
    let merged_stats = ok(&["stats", &merged]);
    assert_eq!(merged_stats[0]["segments"].as_u64(), Some(8), "{merged_stats:?}");
    assert_eq!(merged_stats[0]["documents"].as_u64(), Some(1_500));
    assert_eq!(pairs(&merged), expected);
    ok(&["verify", &merged]);
}

#[test]
fn bad_input_gives_one_clear_line_and_the_right_exit_code() {
    let (dir, idx) = index_dir();
    let idx = idx.as_str();
    fails(&["stats", idx], 1, "holds no neardex index (create one first)");
    ok(&["create", idx]);
    fails(&["create", idx], 1, "already holds an index");
    fails(&["add", idx, "/no/such/file.txt"], 1, "/no/such/file.txt");
    fails(&["query", idx, "--threshold", "1.5", "x"], 1, "not in (0, 1]");
    fails(&["query", idx, "--threshold", "0.5"], 1, "nothing to query");
    fails(&["create", "x", "--scheme", "words:0"], 1, "word shingle size k");
    fails(&["frobnicate"], 2, "unrecognized subcommand");
    // Binary garbage as text, broken gzip as WARC: reported, never a crash.
    let garbage = dir.path().join("garbage.bin");
    std::fs::write(&garbage, (0..=255u8).cycle().take(5000).collect::<Vec<_>>()).unwrap();
    ok(&["add", idx, garbage.to_str().unwrap()]);
    let broken = dir.path().join("broken.warc.gz");
    std::fs::write(&broken, [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3]).unwrap();
    let output = neardex(&["add", idx, broken.to_str().unwrap()]);
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("gzip stream broken"));
    // A locked index: another writer holds it.
    let holder = neardex::store::Index::open(Path::new(idx)).unwrap();
    fails(&["add", idx, garbage.to_str().unwrap()], 1, "locked by another writer");
    // Read-only commands still work beside the writer.
    ok(&["stats", idx]);
    drop(holder);
}

#[test]
fn create_learns_a_frozen_frequency_filter_from_a_sample() {
    let (dir, idx) = index_dir();
    let idx = idx.as_str();
    // Six pages; at --filter-max-df 0.2 a signature in two or more of them goes.
    let sample = dir.path().join("sample");
    std::fs::create_dir(&sample).unwrap();
    for page in PAGES {
        std::fs::copy(Path::new(DEMO).join(page), sample.join(page)).unwrap();
    }
    let sample = sample.to_str().unwrap();
    let created = ok(&["create", idx, "--filter-sample", sample, "--filter-max-df", "0.2"]);
    assert_eq!(created[0]["filter_sample"], PAGES.len());
    let filtered = created[0]["filtered_signatures"].as_u64().unwrap();
    assert!(filtered > 0, "the demo pages share signatures (two carry the same article)");
    assert_eq!(ok(&["stats", idx])[0]["filtered_signatures"], filtered);
    // Unfiltered, nothing is filtered; a share outside (0, 1] is refused.
    let plain = dir.path().join("plain");
    ok(&["create", plain.to_str().unwrap()]);
    assert_eq!(ok(&["stats", plain.to_str().unwrap()])[0]["filtered_signatures"], 0);
    // Banding for another LSH threshold: more, shorter bands at 0.5.
    let banded = dir.path().join("banded");
    ok(&["create", banded.to_str().unwrap(), "--lsh-threshold", "0.5"]);
    let stats = &ok(&["stats", banded.to_str().unwrap()])[0];
    assert!(stats["minhash"]["bands"].as_u64().unwrap() > 9, "{stats}");
    // Banding for a recall at the LSH threshold (0.8 unless given).
    let recall = dir.path().join("recall");
    ok(&["create", recall.to_str().unwrap(), "--lsh-recall", "0.99"]);
    let minhash = &ok(&["stats", recall.to_str().unwrap()])[0]["minhash"];
    let (b, r) = (minhash["bands"].as_u64().unwrap() as u32, minhash["rows"].as_u64().unwrap() as u32);
    assert!(b * r <= 128 && neardex::sketch::s_curve(0.8, b, r) >= 0.99, "{minhash}");
    let low = dir.path().join("low");
    ok(&["create", low.to_str().unwrap(), "--lsh-recall", "0.99", "--lsh-threshold", "0.5"]);
    let minhash = &ok(&["stats", low.to_str().unwrap()])[0]["minhash"];
    let (b, r) = (minhash["bands"].as_u64().unwrap() as u32, minhash["rows"].as_u64().unwrap() as u32);
    assert!(neardex::sketch::s_curve(0.5, b, r) >= 0.99, "{minhash}");
    let other = dir.path().join("other");
    fails(&["create", other.to_str().unwrap(), "--lsh-recall", "1.5"], 1, "not in (0, 1)");
    fails(&["create", other.to_str().unwrap(), "--filter-sample", sample, "--filter-max-df", "0"], 1, "not in (0, 1]");
}

/// Ctrl-C (SIGINT) during `add`: what was added is committed, the command
/// says so, exits 1, and the index holds exactly that many documents.
#[cfg(unix)]
#[test]
fn ctrl_c_during_add_commits_what_was_added_and_says_so() {
    let (dir, idx) = index_dir();
    let idx = idx.as_str();
    ok(&["create", idx]);
    let big = dir.path().join("big.jsonl");
    let lines: String = (0..400_000)
        .map(|i| {
            format!(
                "{{\"id\": {i}, \"text\": \"Document {i} is about the council and the library of the year {}.\"}}\n",
                i % 97
            )
        })
        .collect();
    std::fs::write(&big, lines).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_neardex"))
        .args(["add", idx, big.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for a first committed batch (read-only stats work beside the writer).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let stats = neardex(&["stats", idx]);
        let docs = json_lines(&stats).first().and_then(|s| s["documents"].as_u64()).unwrap_or(0);
        if docs >= 1_000 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no batch committed within a minute");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let committed: u64 = stderr
        .split("interrupted: the ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no interruption message: {stderr}"));
    assert!((1_000..400_000).contains(&committed), "{committed}");
    assert_eq!(ok(&["stats", idx])[0]["documents"], committed);
    assert_eq!(ok(&["verify", idx])[0]["verified"], true);
}
