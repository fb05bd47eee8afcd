//! Runs one signature stage over the real pages in a loop, for a profiler.
//!
//! Run: `cargo run --release --example profile_signatures -- tokenize|spotsigs [ROUNDS]`
use std::io::Read;

fn main() {
    let stage = std::env::args().nth(1).unwrap_or_else(|| "spotsigs".into());
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
