//! Every real page of `../shared/data` through the signature layer, a few
//! hand-checked extractions, and the sketches' estimators against exact
//! similarity on real text (mean error and spread printed; run with
//! `--nocapture` to see them).

mod common;

use std::sync::OnceLock;

use common::{article_benchmark, dragnet, shared_data, Page};
use neardex::similarity::{cosine, set_jaccard};
use neardex::sketch::{BottomK, MinHasher, ModSample, SimHash, SuperShingles};
use neardex::text::{html_bytes_to_text, Tokens};
use neardex::{SignatureConfig, SignatureVector, Signer, DEFAULT_HASH_SEED};

fn pages() -> Option<&'static (Vec<Page>, Vec<Page>)> {
    static PAGES: OnceLock<Option<(Vec<Page>, Vec<Page>)>> = OnceLock::new();
    PAGES.get_or_init(|| shared_data().map(|data| (article_benchmark(&data), dragnet(&data)))).as_ref()
}

/// Share of the gold text's distinct tokens that the extracted text has.
fn gold_token_recall(text: &str, gold: &str) -> Option<f64> {
    let have: std::collections::HashSet<String> = Tokens::from_text(text).iter().map(str::to_owned).collect();
    let gold = Tokens::from_text(gold);
    let wanted: std::collections::HashSet<&str> = gold.iter().collect();
    (!wanted.is_empty()).then(|| wanted.iter().filter(|t| have.contains(**t)).count() as f64 / wanted.len() as f64)
}

#[test]
fn every_page_extracts_and_signs() {
    let Some((articles, dragnet)) = pages() else { return };
    assert_eq!(articles.len(), 181);
    assert_eq!(dragnet.len(), 1381);
    let signers: Vec<Signer> =
        [SignatureConfig::default(), SignatureConfig::word_shingles(3), SignatureConfig::char_shingles(5)]
            .into_iter()
            .map(|c| Signer::new(c).unwrap())
            .collect();
    for (set, pages) in [("article-extraction-benchmark", articles), ("dragnet", dragnet)] {
        let (mut recall_sum, mut with_gold, mut empty, mut spot_sigs) = (0.0, 0usize, 0usize, 0u64);
        for page in pages {
            let text = html_bytes_to_text(&page.html);
            if text.is_empty() {
                empty += 1;
            }
            // Markup never leaks, unless the page shows it escaped as text
            // (one article prints a video embed code as `&lt;script ...`).
            let shows_markup = page.html.windows(4).any(|w| w.eq_ignore_ascii_case(b"&lt;"));
            if !shows_markup {
                assert!(!text.contains("<script") && !text.contains("</p>"), "{}: markup leaked", page.name);
            }
            if let Some(recall) = gold_token_recall(&text, &page.gold) {
                recall_sum += recall;
                with_gold += 1;
            }
            for signer in &signers {
                let signature = signer.sign_html(&page.html);
                assert_eq!(signature.vector, signer.sign_text(&text).vector, "{}", page.name);
            }
            spot_sigs += signers[0].sign_html(&page.html).vector.total();
        }
        let mean_recall = recall_sum / with_gold as f64;
        println!(
            "{set}: {} pages, {empty} without text, gold-token recall of the extracted text {mean_recall:.4}, \
             {:.1} spot signatures per page",
            pages.len(),
            spot_sigs as f64 / pages.len() as f64
        );
        // The main content a human extracted is visible text: nearly all of
        // its words must survive extraction.
        assert!(mean_recall > 0.97, "{set}: mean gold-token recall {mean_recall}");
        assert!(empty <= pages.len() / 100, "{set}: {empty} pages without text");
    }
}

#[test]
fn hand_checked_extractions() {
    let Some((articles, dragnet)) = pages() else { return };
    let page = |pages: &'static [Page], name: &str| {
        let p = pages.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("{name} missing"));
        html_bytes_to_text(&p.html)
    };

    // A TypePad blog post (dragnet R162): 22 script elements, none of which
    // may leak; the title first; the post's abstract as one line.
    let blog = page(dragnet, "R162");
    assert!(blog.starts_with("Experimental Philosophy: The problem of ESEE knowledge\n"));
    assert!(blog.contains(
        "\nShort abstract: I report five experiments and three basic findings on ESEE. First, I confirm earlier \
         findings on the effect."
    ));
    for script_text in ["TPApp", "_gaq", "switchTo5x", "Recaptcha", "extra_happy", "COMSCORE"] {
        assert!(!blog.contains(script_text), "script text {script_text:?} leaked");
    }
    // Navigation entries are separate lines (block elements separate words).
    assert!(blog.contains("\nHome\nArchives\nProfile\nSubscribe\n"));

    // A WSJ article: curly quotes decoded, JSON-LD and inline style dropped.
    let wsj = page(articles, "042bb7b5fedab6eac7db576522b89b93904c237d344bcbe14a6a5ab7f7335856");
    assert!(wsj.starts_with("Google Stadia, Microsoft xCloud, Apple Arcade: So Many Ways to Play…and Pay - WSJ\n"));
    assert!(wsj.contains(
        "\nGaming used to be so simple. We’d buy a game, sit down in front of a console or PC, grind our way to the \
         end, then repeat.\n"
    ));
    for hidden in ["schema.org", "supportsPreload", "blockquote,body", "use strict"] {
        assert!(!wsj.contains(hidden), "{hidden:?} leaked");
    }
}

/// A deterministic generator for the edits below.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() % 1_000_000) as f64 / 1_000_000.0 < p
    }
}

fn summary(errors: &[f64]) -> (f64, f64, f64) {
    let n = errors.len() as f64;
    let mean = errors.iter().sum::<f64>() / n;
    let mean_abs = errors.iter().map(|e| e.abs()).sum::<f64>() / n;
    let sd = (errors.iter().map(|e| (e - mean).powi(2)).sum::<f64>() / n).sqrt();
    (mean, mean_abs, sd)
}

/// Pairs of real gold texts and edited copies (words replaced and dropped at
/// rates from 0 to 60%), so exact similarities spread over (0, 1]; each
/// estimator is compared with the exact value on word 3-shingles.
#[test]
fn sketch_estimators_track_exact_similarity_on_real_text() {
    let Some((articles, dragnet)) = pages() else { return };
    let signer = Signer::new(SignatureConfig::word_shingles(3)).unwrap();
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut vectors: Vec<(SignatureVector, SignatureVector)> = Vec::new();
    for (i, page) in articles.iter().chain(dragnet.iter()).filter(|p| p.gold.len() > 2000).take(300).enumerate() {
        let rate = (i % 7) as f64 * 0.1;
        let edited: Vec<String> = Tokens::from_text(&page.gold)
            .iter()
            .filter_map(|t| {
                if rng.chance(rate / 2.0) {
                    None
                } else if rng.chance(rate / 2.0) {
                    Some(format!("edit{}", rng.next() % 1000))
                } else {
                    Some(t.to_owned())
                }
            })
            .collect();
        vectors.push((signer.sign_text(&page.gold).vector, signer.sign_text(&edited.join(" ")).vector));
    }
    assert!(vectors.len() >= 200, "only {} pages with long gold text", vectors.len());

    let minhash = MinHasher::new(128, DEFAULT_HASH_SEED);
    let wide = MinHasher::new(256, DEFAULT_HASH_SEED);
    let (mut mh, mut bk, mut mn, mut ss, mut sh) = (vec![], vec![], vec![], vec![], vec![]);
    for (a, b) in &vectors {
        let exact = set_jaccard(a, b).value();
        mh.push(minhash.sketch(a.hashes()).estimate(&minhash.sketch(b.hashes())) - exact);
        bk.push(
            BottomK::new(a.hashes(), 128, DEFAULT_HASH_SEED).estimate(&BottomK::new(
                b.hashes(),
                128,
                DEFAULT_HASH_SEED,
            )) - exact,
        );
        if let Some(e) =
            ModSample::new(a.hashes(), 8, DEFAULT_HASH_SEED).estimate(&ModSample::new(b.hashes(), 8, DEFAULT_HASH_SEED))
        {
            mn.push(e - exact);
        }
        let (sa, sb) = (wide.sketch(a.hashes()), wide.sketch(b.hashes()));
        ss.push(
            SuperShingles::new(&sa, 2, DEFAULT_HASH_SEED).estimate(&SuperShingles::new(&sb, 2, DEFAULT_HASH_SEED))
                - exact,
        );
        let cos = cosine(a, b);
        sh.push(
            SimHash::new(a.iter(), DEFAULT_HASH_SEED).estimate_cosine(SimHash::new(b.iter(), DEFAULT_HASH_SEED)) - cos,
        );
    }
    let exact: Vec<f64> = vectors.iter().map(|(a, b)| set_jaccard(a, b).value()).collect();
    println!(
        "{} pairs, exact Jaccard from {:.3} to {:.3}",
        exact.len(),
        exact.iter().cloned().fold(1.0, f64::min),
        exact.iter().cloned().fold(0.0, f64::max)
    );
    for (name, errors, max_bias, max_abs) in [
        ("MinHash P=128 (densified OPH) vs Jaccard", &mh, 0.01, 0.04),
        ("bottom-k m=128 vs Jaccard", &bk, 0.01, 0.04),
        ("mod-8 sampling vs Jaccard", &mn, 0.01, 0.04),
        ("super-shingles 128 of 2 vs Jaccard", &ss, 0.03, 0.08),
        ("SimHash 64 bits vs cosine", &sh, 0.10, 0.15),
    ] {
        let (mean, mean_abs, sd) = summary(errors);
        println!("{name}: mean error {mean:+.4}, mean |error| {mean_abs:.4}, sd {sd:.4}, n = {}", errors.len());
        assert!(mean.abs() < max_bias, "{name}: bias {mean}");
        assert!(mean_abs < max_abs, "{name}: mean |error| {mean_abs}");
    }
}

fn warc_text(page: &common::WarcPage) -> String {
    let declared = page.charset.as_deref().and_then(|c| encoding_rs::Encoding::for_label(c.as_bytes()));
    neardex::text::html_to_text(&neardex::text::decode_html(&page.payload, declared))
}

#[test]
fn every_warc_response_extracts_and_signs() {
    let Some(data) = shared_data() else { return };
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    for (file, expected) in [("commoncrawl-sample.warc.gz", 16), ("clueweb12-quirk.warc.gz", 29)] {
        let pages = common::warc_responses(&data.join("warc-samples").join(file));
        assert_eq!(pages.len(), expected, "{file}: response records");
        let mut with_text = 0;
        for page in &pages {
            let text = warc_text(page);
            with_text += usize::from(!text.is_empty());
            let signature = signer.sign_text(&text);
            assert_eq!(signature.band_keys.is_empty(), signature.vector.is_empty(), "{}", page.uri);
        }
        println!("{file}: {} responses, {with_text} with visible text", pages.len());
        assert!(with_text * 10 >= pages.len() * 9, "{file}: only {with_text} responses with text");
    }
}

#[test]
fn hand_checked_warc_page_in_euc_jp() {
    let Some(data) = shared_data() else { return };
    let pages = common::warc_responses(&data.join("warc-samples/clueweb12-quirk.warc.gz"));
    let page =
        pages.iter().find(|p| p.uri == "http://www.uraharajuku.st/shopdetail/001005000005/019/000/order/").unwrap();
    assert_eq!(page.charset.as_deref(), Some("euc-jp"));
    let text = warc_text(page);
    // The HTTP header's EUC-JP, not windows-1252 or UTF-8, gives this title.
    assert!(text.starts_with("ブラウニー ブリーフケース【ヘッドポーター HEADPORTER 吉田かばん】"), "{text:.80}");
    assert!(text.contains("\nヘッドポーター 吉田カバン PORTER 限定品 取扱専門 通販店【e-brand】\n"));
    // Kana and Han are one token per character; Latin words stay whole.
    let tokens = Tokens::from_text(&text);
    let first: Vec<&str> = tokens.iter().take(6).collect();
    assert_eq!(first, ["ブ", "ラ", "ウ", "ニ", "ー", "ブ"]);
    assert!(tokens.iter().any(|t| t == "headporter"));
}

/// The library's WARC reader on both real samples: every response record is
/// found, with no problem reported, and its HTTP parts parse.
#[cfg(feature = "warc")]
#[test]
fn warc_reader_reads_the_real_samples_completely() {
    let Some(data) = shared_data() else { return };
    for (file, responses) in [("commoncrawl-sample.warc.gz", 16), ("clueweb12-quirk.warc.gz", 29)] {
        let bytes = std::fs::read(data.join("warc-samples").join(file)).unwrap();
        let (records, problems) = neardex::warc::read_warc(&bytes);
        let found: Vec<_> = records.iter().filter(|r| r.kind == "response").collect();
        println!("{file}: {} records, {} responses, problems {problems:?}", records.len(), found.len());
        assert_eq!(found.len(), responses, "{file}");
        for r in found {
            let http = neardex::warc::parse_http_response(&r.block).expect("HTTP response");
            assert!(http.status > 0, "{file} at {}", r.offset);
        }
    }
}
