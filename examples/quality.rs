//! Detection quality on real web pages: precision, recall and F1 of every
//! signature scheme, exact and through LSH, against labels derived from the
//! human-extracted gold main content (issue 8; README "Detection quality").
//!
//! Run: `cargo run --release --example quality` (about two minutes on two
//! cores). Writes `target/quality/quality-results.csv` (every figure) and
//! `target/quality/quality-f1.svg` (F1 against τ per scheme); `--out DIR`
//! writes them elsewhere (README's copies: `--out docs`).
//!
//! Labels: a pair is a true near-duplicate when the Jaccard of the word
//! 5-shingle sets of the two gold texts is ≥ 0.8, clearly distinct when it
//! is < 0.3; pairs in between are left out. The system under test sees only
//! the raw HTML. Constructed pages put one page's gold article into another
//! page's real HTML in place of its own article; they are counted apart
//! from the real pages.

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use neardex::store::{Document, Index, Metadata};
use neardex::{
    DocumentSignature, Fingerprint, MinHashConfig, Scheme, SignatureConfig, SignatureVector, Signer, Similarity,
    SpotSigsConfig, SpotSpec, Threshold,
};
use rayon::prelude::*;

/// Thresholds evaluated: 0.3, 0.4, ..., 0.9.
const TAUS: [f64; 7] = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];
/// Gold Jaccard at or above which a pair is a near-duplicate.
const POSITIVE: f64 = 0.8;
/// Gold Jaccard below which a pair is clearly distinct.
const NEGATIVE: f64 = 0.3;
/// Framings per constructed article.
const FRAMINGS: usize = 3;
/// One article in this many real pages is placed into other framings.
const ARTICLE_EVERY: usize = 4;
/// Frozen frequency filters tried on the default SpotSigs scheme: drop
/// signatures found in more than this fraction of the training pages.
const FILTER_MAX_DF: [f64; 4] = [0.005, 0.01, 0.02, 0.05];

struct Page {
    name: String,
    site: String,
    html: Vec<u8>,
    gold: String,
    constructed: bool,
}

fn main() {
    let mut out = PathBuf::from("target/quality");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--out", Some(dir)) => out = PathBuf::from(dir),
            _ => {
                eprintln!("usage: quality [--out DIR]");
                std::process::exit(2);
            }
        }
    }
    let Some(data) = common::shared_data() else { std::process::exit(2) };
    std::fs::create_dir_all(&out).expect("create the output directory");

    let real = load_real_pages(&data);
    let (constructed, framings) = construct_pages(&real);
    println!(
        "{} real pages ({} sites); article located in {} of them; {} constructed pages",
        real.len(),
        real.iter().map(|p| p.site.as_str()).collect::<HashSet<_>>().len(),
        framings,
        constructed.len()
    );
    let mut pages = real;
    pages.extend(constructed);
    let labels = Labels::new(&pages, |p| p.gold.as_str(), |p| (p.site.as_str(), p.constructed));
    labels.describe();

    let mut results = Vec::new();
    for scheme in schemes() {
        evaluate_scheme("web", &scheme, &pages, &labels, &mut results, |signer, page| signer.sign_html(&page.html));
    }

    let spam = load_spam();
    let spam_labels = Labels::new(&spam, |(_, text)| text.as_str(), |_| ("mail", false));
    println!("\ndemo corpus: {} SpamAssassin messages", spam.len());
    spam_labels.describe();
    for scheme in schemes().into_iter().filter(|s| s.filter.is_none()) {
        evaluate_scheme("spam", &scheme, &spam, &spam_labels, &mut results, |signer, (_, text)| signer.sign_text(text));
    }

    write_csv(&out.join("quality-results.csv"), &results);
    write_svg(&out.join("quality-f1.svg"), &results);
    print_summary(&results);
    println!("\nwrote {} and {}", out.join("quality-results.csv").display(), out.join("quality-f1.svg").display());
}

// ---------------------------------------------------------------- corpora

fn load_real_pages(data: &Path) -> Vec<Page> {
    let mut pages = Vec::new();
    for page in common::article_benchmark(data) {
        let site =
            page.url.as_deref().and_then(host_of).map(|h| site_of(&h)).unwrap_or_else(|| format!("?{}", page.name));
        pages.push(Page {
            name: format!("aeb/{}", page.name),
            site,
            html: page.html,
            gold: page.gold,
            constructed: false,
        });
    }
    for page in common::dragnet(data) {
        let site = site_from_html(&page.html).unwrap_or_else(|| format!("?{}", page.name));
        pages.push(Page {
            name: format!("dragnet/{}", page.name),
            site,
            html: page.html,
            gold: page.gold,
            constructed: false,
        });
    }
    pages
}

fn load_spam() -> Vec<(String, String)> {
    use std::io::Read;
    let packed = include_bytes!("../src/bin/neardex/demo/spamassassin-sample.jsonl.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(&packed[..]).read_to_string(&mut text).expect("demo corpus");
    text.lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("demo line");
            (v["id"].as_str().unwrap_or_default().to_owned(), v["text"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

/// The host of an absolute http(s) URL, lower-cased.
fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let host = rest.split(['/', ':', '?', '#', '"', '\'', ' ']).next()?;
    (host.contains('.')).then(|| host.to_ascii_lowercase())
}

/// A site: the registrable domain (approximated: the last two labels, three
/// under a two-letter country code with a generic second level), or the
/// whole host on blog platforms where every blog is its own site.
fn site_of(host: &str) -> String {
    const PLATFORMS: [&str; 6] =
        ["blogspot.com", "typepad.com", "wordpress.com", "tumblr.com", "posterous.com", "livejournal.com"];
    let host = host.trim_start_matches("www.");
    let labels: Vec<&str> = host.split('.').collect();
    let n = labels.len();
    let keep =
        if n >= 3 && labels[n - 1].len() == 2 && ["co", "com", "org", "net", "ac", "gov"].contains(&labels[n - 2]) {
            3
        } else {
            2
        };
    let domain = labels[n.saturating_sub(keep)..].join(".");
    if PLATFORMS.contains(&domain.as_str()) {
        host.to_owned()
    } else {
        domain
    }
}

/// A dragnet page's site: its canonical or og:url link, else the host most
/// of its absolute links point to (social and sharing hosts excepted).
fn site_from_html(html: &[u8]) -> Option<String> {
    const NOT_THE_SITE: [&str; 14] = [
        "facebook.com",
        "twitter.com",
        "google.com",
        "addthis.com",
        "digg.com",
        "delicious.com",
        "stumbleupon.com",
        "reddit.com",
        "feedburner.com",
        "doubleclick.net",
        "linkedin.com",
        "youtube.com",
        "w3.org",
        "feedburner.google.com",
    ];
    let text = String::from_utf8_lossy(html).to_ascii_lowercase();
    for tag in text.split('<').filter(|t| t.starts_with("link") || t.starts_with("meta")) {
        let tag = tag.split('>').next().unwrap_or_default();
        let attr = if tag.contains("canonical") {
            "href="
        } else if tag.contains("og:url") {
            "content="
        } else {
            continue;
        };
        if let Some(host) = tag.split_once(attr).and_then(|(_, v)| host_of(v)) {
            return Some(site_of(&host));
        }
    }
    let mut counts: HashMap<String, usize> = HashMap::new();
    for link in text.split("href=").skip(1) {
        let value = link.trim_start_matches(['"', '\'']);
        if value.starts_with("http") {
            if let Some(host) = host_of(value) {
                let site = site_of(&host);
                if !NOT_THE_SITE.contains(&site.as_str()) {
                    *counts.entry(site).or_default() += 1;
                }
            }
        }
    }
    counts.into_iter().max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0))).map(|(site, _)| site)
}

/// Words of HTML text nodes (outside tags, comments, scripts and styles)
/// with their byte ranges: runs of ASCII letters and digits and non-ASCII
/// bytes, ASCII lower-cased.
fn html_words(html: &[u8]) -> Vec<(u64, usize, usize)> {
    let mut words = Vec::new();
    let mut i = 0;
    let lower_starts =
        |at: usize, what: &[u8]| html.len() >= at + what.len() && html[at..at + what.len()].eq_ignore_ascii_case(what);
    while i < html.len() {
        if html[i] == b'<' {
            let close: &[u8] = if lower_starts(i, b"<!--") {
                b"-->"
            } else if lower_starts(i, b"<script") {
                b"</script"
            } else if lower_starts(i, b"<style") {
                b"</style"
            } else {
                b">"
            };
            i = find_ci(html, i + 1, close).map_or(html.len(), |at| at + close.len());
            continue;
        }
        if is_word_byte(html[i]) {
            let start = i;
            while i < html.len() && is_word_byte(html[i]) {
                i += 1;
            }
            words.push((word_hash(&html[start..i]), start, i));
        } else {
            i += 1;
        }
    }
    words
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b >= 0x80
}

fn word_hash(word: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(&word.to_ascii_lowercase())
}

fn find_ci(haystack: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    (from..=haystack.len().checked_sub(needle.len())?)
        .find(|&at| haystack[at..at + needle.len()].eq_ignore_ascii_case(needle))
}

/// The byte range of a page's own article in its HTML: from the text node
/// where the gold text's first words occur to the one where its last words
/// occur. None when either end is not found or the span is implausible.
fn article_span(page: &Page) -> Option<(usize, usize)> {
    const GRAM: usize = 4;
    let gold: Vec<u64> = text_words_bytes(page.gold.as_bytes());
    if gold.len() < 50 {
        return None;
    }
    let words = html_words(&page.html);
    let hashes: Vec<u64> = words.iter().map(|w| w.0).collect();
    let find = |gram: &[u64], last: bool| {
        let mut hits = hashes.windows(GRAM).enumerate().filter(|(_, w)| *w == gram).map(|(i, _)| i);
        if last {
            hits.next_back()
        } else {
            hits.next()
        }
    };
    let first = (0..20.min(gold.len() - GRAM)).find_map(|i| find(&gold[i..i + GRAM], false))?;
    let last = (0..20.min(gold.len() - GRAM))
        .find_map(|i| find(&gold[gold.len() - GRAM - i..gold.len() - i], true).map(|at| at + GRAM - 1))?;
    let span_words = last.checked_sub(first)? + 1;
    if span_words * 2 < gold.len() || span_words > gold.len() * 2 {
        return None;
    }
    let start = page.html[..words[first].1].iter().rposition(|&b| b == b'>').map_or(0, |at| at + 1);
    let end =
        page.html[words[last].2..].iter().position(|&b| b == b'<').map_or(page.html.len(), |at| words[last].2 + at);
    Some((start, end))
}

fn text_words_bytes(text: &[u8]) -> Vec<u64> {
    text.split(|&b| !is_word_byte(b)).filter(|w| !w.is_empty()).map(word_hash).collect()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Every `ARTICLE_EVERY`-th real page's article placed into `FRAMINGS`
/// other real pages from other sites (each framing's own article cut out).
/// Returns the pages and how many real pages can serve as a framing.
fn construct_pages(real: &[Page]) -> (Vec<Page>, usize) {
    let spans: Vec<Option<(usize, usize)>> = real.par_iter().map(article_span).collect();
    let framings: Vec<usize> = (0..real.len()).filter(|&i| spans[i].is_some()).collect();
    let mut out = Vec::new();
    for (a, article) in real.iter().enumerate().filter(|(i, p)| i % ARTICLE_EVERY == 0 && p.gold.len() > 300) {
        let mut used_sites: HashSet<&str> = HashSet::from([article.site.as_str()]);
        let mut probe = xxhash_rust::xxh3::xxh3_64(article.name.as_bytes()) as usize;
        let mut chosen = 0;
        for _ in 0..framings.len() {
            if chosen == FRAMINGS {
                break;
            }
            probe = probe.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let f = framings[(probe >> 17) % framings.len()];
            let frame = &real[f];
            if f == a || !used_sites.insert(frame.site.as_str()) {
                continue;
            }
            let (start, end) = spans[f].expect("framings have spans");
            let mut html = frame.html[..start].to_vec();
            for paragraph in article.gold.lines().map(str::trim).filter(|l| !l.is_empty()) {
                html.extend_from_slice(format!("<p>{}</p>\n", escape(paragraph)).as_bytes());
            }
            html.extend_from_slice(&frame.html[end..]);
            out.push(Page {
                name: format!("{}@{}", article.name, frame.name),
                site: frame.site.clone(),
                html,
                gold: article.gold.clone(),
                constructed: true,
            });
            chosen += 1;
        }
    }
    (out, framings.len())
}

// ---------------------------------------------------------------- labels

/// Pair categories: real pages only or with a constructed page, same site
/// or not.
const CATEGORIES: [&str; 4] = ["real same-site", "real cross-site", "constructed same-site", "constructed cross-site"];

struct Labels {
    category: Vec<Vec<u8>>,
    positives: HashSet<(u32, u32)>,
    excluded: HashSet<(u32, u32)>,
    totals: [(u64, u64); 4],
}

/// Word 5-shingle set of a gold text (an independent tokenizer: Unicode
/// alphanumeric runs, lower-cased).
fn gold_shingles(text: &str) -> HashSet<u64> {
    let words: Vec<String> =
        text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
    words.windows(5).map(|w| xxhash_rust::xxh3::xxh3_64(w.join(" ").as_bytes())).collect()
}

impl Labels {
    fn new<T: Sync>(docs: &[T], gold: impl Fn(&T) -> &str + Sync, site: impl Fn(&T) -> (&str, bool)) -> Labels {
        let n = docs.len();
        let sets: Vec<HashSet<u64>> = docs.par_iter().map(|d| gold_shingles(gold(d))).collect();
        let mut postings: HashMap<u64, Vec<u32>> = HashMap::new();
        for (i, set) in sets.iter().enumerate() {
            for &h in set {
                postings.entry(h).or_default().push(i as u32);
            }
        }
        let mut shared: HashMap<(u32, u32), u32> = HashMap::new();
        for list in postings.values() {
            for (x, &a) in list.iter().enumerate() {
                for &b in &list[x + 1..] {
                    *shared.entry((a, b)).or_default() += 1;
                }
            }
        }
        let mut positives = HashSet::new();
        let mut excluded = HashSet::new();
        for (&(a, b), &common) in &shared {
            let union = sets[a as usize].len() + sets[b as usize].len() - common as usize;
            let jaccard = f64::from(common) / union as f64;
            if jaccard >= POSITIVE {
                positives.insert((a, b));
            } else if jaccard >= NEGATIVE {
                excluded.insert((a, b));
            }
        }
        // Two empty gold texts have no Jaccard: left out.
        for a in 0..n {
            for b in a + 1..n {
                if sets[a].is_empty() && sets[b].is_empty() {
                    excluded.insert((a as u32, b as u32));
                }
            }
        }
        let sites: Vec<(&str, bool)> = docs.iter().map(site).collect();
        let mut category = Vec::with_capacity(n);
        let mut totals = [(0u64, 0u64); 4];
        for a in 0..n {
            let row: Vec<u8> = (0..n)
                .map(|b| {
                    let constructed = sites[a].1 || sites[b].1;
                    let same = sites[a].0 == sites[b].0;
                    u8::from(!same) + 2 * u8::from(constructed)
                })
                .collect();
            for (b, &c) in row.iter().enumerate().skip(a + 1) {
                let key = (a as u32, b as u32);
                let c = usize::from(c);
                if positives.contains(&key) {
                    totals[c].0 += 1;
                } else if !excluded.contains(&key) {
                    totals[c].1 += 1;
                }
            }
            category.push(row);
        }
        Labels { category, positives, excluded, totals }
    }

    fn describe(&self) {
        println!("labelled pairs (gold word 5-shingle Jaccard ≥ {POSITIVE} positive, < {NEGATIVE} negative):");
        for (name, (pos, neg)) in CATEGORIES.iter().zip(self.totals) {
            if pos + neg > 0 {
                println!("  {name:24} {pos:6} positive {neg:10} negative");
            }
        }
        println!("  left out (in between)    {:6}", self.excluded.len());
    }

    /// True positives and false positives per category of `predicted`
    /// pairs (page indices, a < b).
    fn score(&self, predicted: impl Iterator<Item = (u32, u32)>) -> [(u64, u64); 4] {
        let mut counts = [(0u64, 0u64); 4];
        for key in predicted {
            let c = usize::from(self.category[key.0 as usize][key.1 as usize]);
            if self.positives.contains(&key) {
                counts[c].0 += 1;
            } else if !self.excluded.contains(&key) {
                counts[c].1 += 1;
            }
        }
        counts
    }
}

// ---------------------------------------------------------------- schemes

struct SchemeUnderTest {
    name: String,
    scheme: Scheme,
    /// Frozen frequency filter: the largest document frequency kept, as a
    /// fraction of the training pages.
    filter: Option<f64>,
}

fn spot(name: &str, antecedents: &[&str], distance: u32, chain: u32) -> SchemeUnderTest {
    let mut config = SpotSigsConfig::default();
    if !antecedents.is_empty() {
        config.specs[0].antecedents = antecedents.iter().map(|s| s.to_string()).collect();
    }
    config.specs[0] = SpotSpec { distance, chain, ..config.specs[0].clone() };
    SchemeUnderTest { name: name.to_owned(), scheme: Scheme::SpotSigs(config), filter: None }
}

fn schemes() -> Vec<SchemeUnderTest> {
    let mut all = vec![
        spot("spotsigs d2 c3 (paper)", &[], 2, 3),
        spot("spotsigs d1 c2", &[], 1, 2),
        spot("spotsigs d2 c2", &[], 2, 2),
        spot("spotsigs d3 c4", &[], 3, 4),
        spot("spotsigs a/an/the d2 c3", &["a", "an", "the"], 2, 3),
        spot("spotsigs is/was/are d1 c3", &["is", "are", "was", "were"], 1, 3),
        SchemeUnderTest { name: "words k=3".into(), scheme: Scheme::WordShingles { k: 3 }, filter: None },
        SchemeUnderTest { name: "words k=5".into(), scheme: Scheme::WordShingles { k: 5 }, filter: None },
        SchemeUnderTest { name: "chars k=5".into(), scheme: Scheme::CharShingles { k: 5 }, filter: None },
    ];
    for max_df in FILTER_MAX_DF {
        let mut filtered = spot("", &[], 2, 3);
        filtered.name = format!("spotsigs d2 c3 + filter df>{}%", max_df * 100.0);
        filtered.filter = Some(max_df);
        all.push(filtered);
    }
    all.push(SchemeUnderTest {
        name: "words k=3 + filter df>1%".into(),
        scheme: Scheme::WordShingles { k: 3 },
        filter: Some(0.01),
    });
    all
}

// ---------------------------------------------------------------- evaluation

struct Row {
    corpus: &'static str,
    scheme: String,
    measure: &'static str,
    path: &'static str,
    tau: f64,
    counts: [(u64, u64); 4],
    totals: [(u64, u64); 4],
}

impl Row {
    /// Precision, recall and F1 over the categories selected by `mask`.
    fn prf(&self, mask: [bool; 4]) -> (f64, f64, f64, u64, u64, u64) {
        let (mut tp, mut fp, mut pos) = (0, 0, 0);
        for ((selected, counts), totals) in mask.iter().zip(self.counts).zip(self.totals) {
            if *selected {
                tp += counts.0;
                fp += counts.1;
                pos += totals.0;
            }
        }
        let precision = if tp + fp == 0 { 1.0 } else { tp as f64 / (tp + fp) as f64 };
        let recall = if pos == 0 { 1.0 } else { tp as f64 / pos as f64 };
        let f1 = if precision + recall == 0.0 { 0.0 } else { 2.0 * precision * recall / (precision + recall) };
        (precision, recall, f1, tp, fp, pos - tp)
    }
}

const ALL: [bool; 4] = [true; 4];

fn measure_name(m: Similarity) -> &'static str {
    match m {
        Similarity::SetJaccard => "set",
        _ => "multiset",
    }
}

fn evaluate_scheme<T: Sync>(
    corpus: &'static str,
    scheme: &SchemeUnderTest,
    docs: &[T],
    labels: &Labels,
    results: &mut Vec<Row>,
    sign: impl Fn(&Signer, &T) -> DocumentSignature + Sync,
) {
    let started = std::time::Instant::now();
    let mut base = SignatureConfig { scheme: scheme.scheme.clone(), ..SignatureConfig::default() };
    let sign_all = |config: &SignatureConfig| -> Vec<(SignatureVector, Fingerprint)> {
        let signer = Signer::new(config.clone()).expect("valid scheme");
        docs.par_iter()
            .map(|d| {
                let s = sign(&signer, d);
                (s.vector, s.fingerprint)
            })
            .collect()
    };
    let mut signed = sign_all(&base);
    if let Some(max_df) = scheme.filter {
        // Frozen: learned from every other document, then part of the
        // configuration that signs every document.
        let training = signed.iter().step_by(2).map(|(vector, _)| vector);
        base.frequency_filter = neardex::FrequencyFilter::learn(training, max_df);
        signed = sign_all(&base);
    }
    for measure in [Similarity::MultisetJaccard, Similarity::SetJaccard] {
        let config = SignatureConfig { similarity: measure, ..base.clone() };
        // Exact: one self-join at the lowest τ; each higher τ keeps the
        // pairs whose exact overlap meets it.
        let (index, ids, _signatures, _dir) = build_index(&config, &signed);
        let searcher = index.searcher().expect("searcher");
        let mut pairs = Vec::new();
        searcher
            .self_join(Threshold::new(TAUS[0]).expect("τ"), |p| pairs.push((ids[&p.a], ids[&p.b], p.overlap)))
            .expect("self-join");
        for tau in TAUS {
            let t = Threshold::new(tau).expect("τ");
            let predicted = pairs.iter().filter(|p| p.2.meets(t)).map(|p| ordered(p.0, p.1));
            results.push(Row {
                corpus,
                scheme: scheme.name.clone(),
                measure: measure_name(measure),
                path: "exact",
                tau,
                counts: labels.score(predicted),
                totals: labels.totals,
            });
        }
        // LSH: an index banded for each τ, every document queried.
        for tau in TAUS {
            let t = Threshold::new(tau).expect("τ");
            let minhash = MinHashConfig::for_threshold(tau, 128).expect("banding");
            let config = SignatureConfig { minhash, ..config.clone() };
            let (index, ids, signatures, _dir) = build_index(&config, &signed);
            let searcher = index.searcher().expect("searcher");
            let found: HashSet<(u32, u32)> = signatures
                .par_iter()
                .enumerate()
                .flat_map_iter(|(i, signature)| {
                    let matches = searcher.query_lsh(signature, t).expect("LSH query");
                    let ids = &ids;
                    matches.into_iter().map(move |m| (i as u32, ids[&m.id])).filter(|(i, j)| i != j)
                })
                .map(|(i, j)| ordered(i, j))
                .collect();
            results.push(Row {
                corpus,
                scheme: scheme.name.clone(),
                measure: measure_name(measure),
                path: "lsh",
                tau,
                counts: labels.score(found.into_iter()),
                totals: labels.totals,
            });
        }
    }
    let best = results
        .iter()
        .filter(|r| r.corpus == corpus && r.scheme == scheme.name && r.path == "exact")
        .map(|r| (r.prf(ALL).2, r.tau, r.measure))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((f1, tau, measure)) = best {
        println!(
            "{corpus:5} {:34} best exact F1 {f1:.3} at τ={tau} ({measure})  [{:.1} s]",
            scheme.name,
            started.elapsed().as_secs_f64()
        );
    }
}

fn ordered(a: u32, b: u32) -> (u32, u32) {
    (a.min(b), a.max(b))
}

/// A fresh index holding every document, flushed to one segment (so the
/// LSH path reads the band tables), with the map from doc id to position.
fn build_index(
    config: &SignatureConfig,
    signed: &[(SignatureVector, Fingerprint)],
) -> (Index, HashMap<u64, u32>, Vec<DocumentSignature>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let index = Index::create(dir.path().join("index"), config.clone()).expect("create index");
    let signer = Signer::new(config.clone()).expect("valid config");
    let signatures: Vec<DocumentSignature> = signed.iter().map(|(v, f)| signer.sign_vector(v.clone(), *f)).collect();
    let mut ids = HashMap::new();
    let mut writer = index.writer().expect("writer");
    for (i, signature) in signatures.iter().enumerate() {
        let outcome =
            writer.insert(&i.to_string(), Document::Signatures(signature), Metadata::default()).expect("insert");
        ids.insert(outcome.id, i as u32);
    }
    writer.commit().expect("commit");
    index.optimize().expect("flush to one segment");
    (index, ids, signatures, dir)
}

// ---------------------------------------------------------------- output

fn write_csv(path: &Path, results: &[Row]) {
    let mut csv = String::from("corpus,scheme,measure,path,tau,category,tp,fp,fn,precision,recall,f1\n");
    for r in results {
        let mut views: Vec<(&str, [bool; 4])> = vec![("all", ALL)];
        for c in 0..4 {
            if r.totals[c].0 + r.totals[c].1 > 0 {
                let mut mask = [false; 4];
                mask[c] = true;
                views.push((CATEGORIES[c], mask));
            }
        }
        for (name, mask) in views {
            let (p, rc, f1, tp, fp, fneg) = r.prf(mask);
            let _ = writeln!(
                csv,
                "{},\"{}\",{},{},{},{},{tp},{fp},{fneg},{p:.4},{rc:.4},{f1:.4}",
                r.corpus, r.scheme, r.measure, r.path, r.tau, name
            );
        }
    }
    std::fs::write(path, csv).expect("write quality-results.csv");
}

/// F1 against τ, one line per scheme, exact path: one panel per measure.
fn write_svg(path: &Path, results: &[Row]) {
    const COLOURS: [&str; 13] = [
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
        "#393b79", "#637939", "#843c39",
    ];
    let (pw, ph, left, top) = (380.0, 300.0, 60.0, 40.0);
    let width = left + 2.0 * (pw + 40.0) + 260.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
        top + ph + 60.0
    );
    let names: Vec<String> = schemes().into_iter().map(|s| s.name).collect();
    for (panel, measure) in ["multiset", "set"].iter().enumerate() {
        let x0 = left + panel as f64 * (pw + 40.0);
        let x = |tau: f64| x0 + (tau - 0.3) / 0.6 * pw;
        let y = |f1: f64| top + (1.0 - f1) * ph;
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"14\">web pages, exact, {measure} Jaccard: F1 (all labelled pairs)</text>",
            x0 + pw / 2.0,
            top - 15.0
        );
        let _ = writeln!(
            svg,
            "<rect x=\"{x0}\" y=\"{top}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"black\"/>"
        );
        for i in 0..=10 {
            let f = f64::from(i) / 10.0;
            let _ = writeln!(
                svg,
                "<line x1=\"{x0}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{f:.1}</text>",
                x0 + pw,
                x0 - 5.0,
                y(f) + 4.0,
                y = y(f)
            );
        }
        for tau in TAUS {
            let _ =
                writeln!(svg, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{tau}</text>", x(tau), top + ph + 18.0);
        }
        let _ =
            writeln!(svg, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">τ</text>", x0 + pw / 2.0, top + ph + 38.0);
        for (s, name) in names.iter().enumerate() {
            let points: Vec<String> = results
                .iter()
                .filter(|r| r.corpus == "web" && &r.scheme == name && r.measure == *measure && r.path == "exact")
                .map(|r| format!("{:.1},{:.1}", x(r.tau), y(r.prf(ALL).2)))
                .collect();
            let dash = if name.contains("filter") { " stroke-dasharray=\"5,3\"" } else { "" };
            let _ = writeln!(
                svg,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{dash}/>",
                points.join(" "),
                COLOURS[s % COLOURS.len()]
            );
        }
    }
    let lx = left + 2.0 * (pw + 40.0);
    for (s, name) in names.iter().enumerate() {
        let ly = top + 10.0 + s as f64 * 20.0;
        let dash = if name.contains("filter") { " stroke-dasharray=\"5,3\"" } else { "" };
        let _ = writeln!(
            svg,
            "<line x1=\"{lx}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"{}\" stroke-width=\"2\"{dash}/><text x=\"{}\" y=\"{}\">{}</text>",
            lx + 25.0,
            COLOURS[s % COLOURS.len()],
            lx + 30.0,
            ly + 4.0,
            name
        );
    }
    svg.push_str("</svg>\n");
    std::fs::write(path, svg).expect("write quality-f1.svg");
}

fn print_summary(results: &[Row]) {
    for corpus in ["web", "spam"] {
        println!("\n### {corpus}: exact path at the τ of best F1, per scheme and measure\n");
        let web = corpus == "web";
        if web {
            println!("| scheme | measure | τ | P | R | F1 | recall, cross-site copies | FP, real same-site | FP, same framing | LSH F1 |");
            println!("|---|---|---|---|---|---|---|---|---|---|");
        } else {
            println!("| scheme | measure | τ | P | R | F1 | LSH F1 |");
            println!("|---|---|---|---|---|---|---|");
        }
        let mut seen = Vec::new();
        for r in results.iter().filter(|r| r.corpus == corpus && r.path == "exact") {
            if seen.contains(&(&r.scheme, r.measure)) {
                continue;
            }
            seen.push((&r.scheme, r.measure));
            let same = |b: &&Row| b.corpus == corpus && b.scheme == r.scheme && b.measure == r.measure;
            let best = results
                .iter()
                .filter(|b| same(b) && b.path == "exact")
                .max_by(|a, b| a.prf(ALL).2.total_cmp(&b.prf(ALL).2))
                .expect("rows");
            let lsh = results
                .iter()
                .find(|l| same(l) && l.path == "lsh" && l.tau == best.tau)
                .map_or(f64::NAN, |l| l.prf(ALL).2);
            let (p, rc, f1, ..) = best.prf(ALL);
            if web {
                let copies = best.prf([false, false, false, true]).1;
                let real_fp = best.prf([true, false, false, false]).4;
                let framing_fp = best.prf([false, false, true, false]).4;
                println!(
                    "| {} | {} | {} | {p:.3} | {rc:.3} | {f1:.3} | {copies:.3} | {real_fp} of {} | {framing_fp} of {} | {lsh:.3} |",
                    r.scheme, r.measure, best.tau, best.totals[0].1, best.totals[2].1
                );
            } else {
                println!("| {} | {} | {} | {p:.3} | {rc:.3} | {f1:.3} | {lsh:.3} |", r.scheme, r.measure, best.tau);
            }
        }
    }
    let default =
        results.iter().filter(|r| r.corpus == "web" && r.scheme == "spotsigs d2 c3 (paper)" && r.measure == "multiset");
    println!("\n### web, default scheme (SpotSigs d2 c3, multiset): every τ\n");
    println!("| path | τ | P | R | F1 | FP, real same-site | FP, same framing |");
    println!("|---|---|---|---|---|---|---|");
    for r in default {
        let (p, rc, f1, ..) = r.prf(ALL);
        let real_fp = r.prf([true, false, false, false]).4;
        let framing_fp = r.prf([false, false, true, false]).4;
        println!("| {} | {} | {p:.3} | {rc:.3} | {f1:.3} | {real_fp} | {framing_fp} |", r.path, r.tau);
    }
}
