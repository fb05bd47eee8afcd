//! Runs one signature stage in a loop, for a profiler.
//!
//! Run: `cargo run --release --example profile_signatures -- tokenize|spotsigs [ROUNDS]`
//! over the real pages of `../shared/data`, or
//! `cargo run --release --example profile_signatures -- pages FILE N [ROUNDS]`
//! to sign (HTML to whole signature, one thread) the first N pages of a
//! `pages.bin` that `neardex-compare gen` wrote (`benches/compare`), or
//! `cargo run --release --example profile_signatures -- lines FILE N [ROUNDS]`
//! to sign the first N lines of its `text.txt` (token text, as the
//! comparison's peers are given it).
use std::io::Read;

fn main() {
    let stage = std::env::args().nth(1).unwrap_or_else(|| "spotsigs".into());
    if stage == "pages" {
        return sign_pages();
    }
    if stage == "lines" {
        return sign_lines();
    }
    let rounds: usize = std::env::args().nth(2).and_then(|r| r.parse().ok()).unwrap_or(5);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/article-extraction-benchmark/html");
    let mut texts = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("shared data") {
        let mut html = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(entry.unwrap().path()).unwrap())
            .read_to_end(&mut html)
            .unwrap();
        texts.push(neardex::text::html_bytes_to_text(&html));
    }
    let bytes: usize = texts.iter().map(String::len).sum();
    let signer = neardex::Signer::new(neardex::SignatureConfig::default()).unwrap();
    let mut scratch = neardex::Scratch::default();
    let mut tokens = neardex::text::Tokens::new();
    let mut out = Vec::new();
    let start = std::time::Instant::now();
    for _ in 0..rounds {
        for t in &texts {
            match stage.as_str() {
                "tokenize" => tokens.tokenize(t),
                _ => {
                    out.clear();
                    signer.signature_hashes(t, &mut scratch, &mut out);
                }
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!("{stage}: {:.1} MB/s", (bytes * rounds) as f64 / secs / 1e6);
}

/// The `pages` stage: records of a u32 LE length and that many bytes,
/// signed from their HTML.
fn sign_pages() {
    let read = |file: &mut std::io::BufReader<std::fs::File>, n: usize| {
        let mut pages = Vec::with_capacity(n);
        let mut len = [0u8; 4];
        while pages.len() < n && file.read_exact(&mut len).is_ok() {
            let mut page = vec![0; u32::from_le_bytes(len) as usize];
            file.read_exact(&mut page).expect("a truncated record");
            pages.push(page);
        }
        pages
    };
    sign_file("pages", read, |signer, page: &Vec<u8>, scratch| signer.sign_html_with(page, scratch));
}

/// The `lines` stage: the first N lines of a token text file (`text.txt`
/// of `neardex-compare gen`), signed as text.
fn sign_lines() {
    use std::io::BufRead;
    let read = |file: &mut std::io::BufReader<std::fs::File>, n: usize| {
        file.lines().take(n).map(|l| l.expect("a line of UTF-8")).collect()
    };
    sign_file("lines", read, |signer, line: &String, scratch| signer.sign_text_with(line, scratch));
}

/// Reads the first N documents of FILE with `read` (`STAGE FILE N
/// [ROUNDS]`), then signs them whole with `sign` on one thread, ROUNDS
/// times.
fn sign_file<T>(
    stage: &str,
    read: impl FnOnce(&mut std::io::BufReader<std::fs::File>, usize) -> Vec<T>,
    sign: impl Fn(&neardex::Signer, &T, &mut neardex::Scratch) -> neardex::DocumentSignature,
) {
    let arg = |i: usize| std::env::args().nth(i);
    let usage = format!("profile_signatures {stage} FILE N [ROUNDS]");
    let path = arg(2).expect(&usage);
    let n: usize = arg(3).and_then(|v| v.parse().ok()).expect(&usage);
    let rounds: usize = arg(4).and_then(|v| v.parse().ok()).unwrap_or(1);
    let docs = read(&mut std::io::BufReader::new(std::fs::File::open(&path).expect("input file")), n);
    let signer = neardex::Signer::new(neardex::SignatureConfig::default()).unwrap();
    let mut scratch = neardex::Scratch::default();
    let mut signatures = 0u64;
    let start = std::time::Instant::now();
    for _ in 0..rounds {
        for doc in &docs {
            signatures += sign(&signer, doc, &mut scratch).vector.total();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let signed = (docs.len() * rounds) as f64;
    println!(
        "{stage}: {:.0} documents/s, {:.2} us a document, {:.0} signatures a document",
        signed / secs,
        secs * 1e6 / signed,
        signatures as f64 / signed
    );
}
