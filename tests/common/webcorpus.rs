//! A deterministic generator of web-page-like documents for the
//! benchmarks (issue 7): real English sentences from text that ships on a
//! Debian machine, arranged into articles, wrapped in one of 300 site
//! templates, with near-duplicate clusters made by word edits and passage
//! drops.
//!
//! The sentences come from `/usr/share/common-licenses` (package
//! `base-files`) and the documentation of Perl's standard library
//! (`/usr/share/perl/<version>`, package `perl-modules`): every
//! paragraph of prose (no indented or markup line) is split into sentences,
//! and a sentence of 6 to 40 words made of letters and ordinary punctuation
//! is kept once. On Debian 12 that is about 9,200 sentences;
//! [`Corpus::digest`] names the pool, so two runs on different machines can
//! tell whether they saw the same documents.
//!
//! A page is a pure function of (pool, seed, number), so pages are
//! generated in any order on any thread. Each article draws about 450 words
//! of sentences, and then replaces about one word in eight by one of its own
//! names and numbers: real pages about different things share stock phrases
//! but not their subjects, and without this every signature of a million
//! pages would come from a few thousand sentences. 30% of pages copy an
//! earlier page's article (near-duplicate clusters): a light copy changes
//! 1–3 words, a medium one about 2% of the words and may drop a paragraph
//! (5% each), a heavy one about 6% and drops paragraphs more often (12%);
//! half the copies keep their origin's site template, half get their own.
#![allow(dead_code)]

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Site templates.
pub const TEMPLATES: u64 = 300;
/// Words of article text a page aims at.
pub const ARTICLE_WORDS: usize = 450;

/// The sentence pool and the site templates.
pub struct Corpus {
    sentences: Vec<String>,
    /// Lower-case words of the pool, for word edits.
    words: Vec<String>,
    templates: Vec<Template>,
    seed: u64,
}

struct Template {
    head: String,
    tail: String,
}

/// The files the pool is read from, in a fixed order.
pub fn source_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    collect(Path::new("/usr/share/common-licenses"), &mut files, &|_| true);
    if let Ok(dirs) = std::fs::read_dir("/usr/share/perl") {
        let mut dirs: Vec<_> = dirs.flatten().map(|e| e.path()).collect();
        dirs.sort();
        // The newest Perl only: one copy of its documentation.
        if let Some(dir) = dirs.last() {
            collect(dir, &mut files, &|p| p.extension().is_some_and(|e| e == "pod" || e == "pm"));
        }
    }
    files.sort();
    files.dedup();
    files
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>, keep: &dyn Fn(&Path) -> bool) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && !path.is_symlink() {
            collect(&path, out, keep);
        } else if path.is_file() && !path.is_symlink() && keep(&path) {
            out.push(path);
        }
    }
}

/// The sentences of one text, as [`Corpus`] keeps them.
pub fn sentences_of(text: &str, out: &mut BTreeSet<String>) {
    for paragraph in text.split("\n\n") {
        let lines: Vec<&str> = paragraph.lines().filter(|l| !l.trim().is_empty()).collect();
        if lines.is_empty() || lines.iter().any(|l| l.starts_with([' ', '\t', '=', '#'])) {
            continue;
        }
        let joined = lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
        let mut start = 0;
        let bytes = joined.as_bytes();
        for i in 0..bytes.len() {
            let end_of_sentence =
                matches!(bytes[i], b'.' | b'!' | b'?') && (i + 1 == bytes.len() || bytes[i + 1] == b' ');
            if end_of_sentence {
                keep_sentence(joined[start..=i].trim(), out);
                start = i + 1;
            }
        }
    }
}

fn keep_sentence(s: &str, out: &mut BTreeSet<String>) {
    let words = s.split_whitespace().count();
    let plain = s.bytes().all(|b| b.is_ascii_alphabetic() || b" ,;:'()-.!?\"".contains(&b));
    if (6..=40).contains(&words) && plain && s.as_bytes()[0].is_ascii_uppercase() {
        out.insert(s.to_owned());
    }
}

/// SplitMix64: the generator's only source of randomness.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, stream: u64, n: u64) -> Rng {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F) ^ n.wrapping_mul(0xE703_7ED1_A0B4_28DB));
        r.next();
        r
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (((self.next() >> 32) * n as u64) >> 32) as usize
    }
    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const SYLLABLES: [&str; 32] = [
    "ka", "lo", "mar", "ten", "vi", "sa", "dor", "bel", "ri", "an", "ost", "el", "mun", "da", "ker", "py", "zan", "ot",
    "hil", "ne", "gra", "wen", "tor", "i", "fal", "su", "ber", "ca", "nim", "re", "jas", "tu",
];

fn name(rng: &mut Rng) -> String {
    let mut s = String::new();
    for _ in 0..2 + rng.below(2) {
        s.push_str(SYLLABLES[rng.below(SYLLABLES.len())]);
    }
    let mut c = s.chars();
    c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
}

/// The stream numbers of [`Rng::new`].
const ARTICLE: u64 = 1;
const COPY: u64 = 2;
const PAGE: u64 = 3;
const SITE: u64 = 4;

/// Whether page `n` copies an earlier page, and which.
pub fn origin(seed: u64, n: u64) -> Option<u64> {
    let mut rng = Rng::new(seed, PAGE, n);
    if n == 0 || !rng.chance(30) {
        return None;
    }
    // Mostly recent pages (a crawl sees syndicated copies close together),
    // sometimes anything earlier.
    let window = if rng.chance(80) { n.min(10_000) } else { n };
    Some(n - 1 - rng.below(window as usize) as u64)
}

/// The fresh page whose article page `n` carries.
pub fn root(seed: u64, mut n: u64) -> u64 {
    while let Some(m) = origin(seed, n) {
        n = m;
    }
    n
}

impl Corpus {
    /// Reads the pool from [`source_files`].
    ///
    /// # Panics
    /// When the machine has fewer than 1,000 such sentences: the
    /// benchmarks' documents would not be the documented ones.
    pub fn load(seed: u64) -> Corpus {
        let mut pool = BTreeSet::new();
        for file in source_files() {
            if let Ok(bytes) = std::fs::read(&file) {
                sentences_of(&String::from_utf8_lossy(&bytes), &mut pool);
            }
        }
        assert!(
            pool.len() >= 1_000,
            "only {} sentences in /usr/share/common-licenses and /usr/share/perl: the corpus generator needs \
             Debian's base-files and perl-modules",
            pool.len()
        );
        Corpus::from_sentences(pool.into_iter().collect(), seed)
    }

    /// A corpus over the given sentences (tests use a small pool).
    pub fn from_sentences(sentences: Vec<String>, seed: u64) -> Corpus {
        let words: BTreeSet<String> = sentences
            .iter()
            .flat_map(|s| s.split(|c: char| !c.is_ascii_alphabetic()))
            .filter(|w| w.len() >= 3)
            .map(str::to_ascii_lowercase)
            .collect();
        let mut corpus = Corpus { sentences, words: words.into_iter().collect(), templates: Vec::new(), seed };
        corpus.templates = (0..TEMPLATES).map(|t| corpus.template(t)).collect();
        corpus
    }

    /// Sentences in the pool.
    pub fn sentences(&self) -> usize {
        self.sentences.len()
    }

    /// XXH3-64 of the pool and the seed: equal digests, equal pages.
    pub fn digest(&self) -> u64 {
        let mut all = self.sentences.join("\n");
        let _ = write!(all, "\n{}", self.seed);
        xxhash_rust::xxh3::xxh3_64(all.as_bytes())
    }

    fn sentence(&self, rng: &mut Rng) -> &str {
        &self.sentences[rng.below(self.sentences.len())]
    }

    fn template(&self, t: u64) -> Template {
        let mut rng = Rng::new(self.seed, SITE, t);
        let site =
            format!("{} {}", name(&mut rng), ["News", "Times", "Post", "Daily", "Review", "Journal"][rng.below(6)]);
        let layout = t % 4;
        let mut head = String::new();
        let (open, close) = match layout {
            0 => ("<div class=\"content\">", "</div>"),
            1 => ("<table><tr><td class=\"main\">", "</td></tr></table>"),
            2 => ("<main><article>", "</article></main>"),
            _ => ("<section id=\"story\">", "</section>"),
        };
        let _ = write!(
            head,
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{site}</title>\
             <link rel=\"stylesheet\" href=\"/s{t}.css\"><script>window.site={t};</script></head>\n<body><header><h1>{site}</h1><p class=\"tagline\">{}</p></header>\n<nav>",
            self.sentence(&mut rng).split_whitespace().take(4).collect::<Vec<_>>().join(" ")
        );
        for _ in 0..5 + rng.below(8) {
            let w = &self.words[rng.below(self.words.len())];
            let _ = write!(head, "<a href=\"/{w}\">{}</a> ", w.to_uppercase());
        }
        head.push_str("</nav>\n");
        head.push_str(open);
        let mut tail = String::from(close);
        tail.push_str("\n<aside><h3>Related</h3><ul>");
        for _ in 0..2 + rng.below(3) {
            let words: Vec<&str> = self.sentence(&mut rng).split_whitespace().take(6).collect();
            let _ = write!(tail, "<li><a href=\"/r{}\">{}</a></li>", rng.below(100_000), words.join(" "));
        }
        let _ = write!(
            tail,
            "</ul></aside>\n<footer><p>{}</p><p>&copy; {} {site}. All rights reserved.</p></footer></body></html>\n",
            self.sentence(&mut rng),
            2000 + rng.below(25)
        );
        Template { head, tail }
    }

    /// The article of fresh page `a`: paragraphs of words.
    fn article(&self, a: u64) -> Vec<Vec<Cow<'_, str>>> {
        let mut rng = Rng::new(self.seed, ARTICLE, a);
        let names: Vec<String> = (0..6).map(|_| name(&mut rng)).collect();
        let numbers: Vec<String> = (0..3).map(|_| (rng.below(9_000) + 10).to_string()).collect();
        let mut paragraphs = Vec::new();
        let mut words = 0;
        while words < ARTICLE_WORDS {
            let mut paragraph = Vec::new();
            for _ in 0..2 + rng.below(4) {
                for (i, w) in self.sentence(&mut rng).split_whitespace().enumerate() {
                    let w = if i > 0 && rng.chance(12) {
                        // Keep the punctuation that ends the word.
                        let tail: String = w.chars().skip_while(|c| c.is_ascii_alphabetic()).collect();
                        let subject = if rng.chance(75) {
                            &names[rng.below(names.len())]
                        } else {
                            &numbers[rng.below(numbers.len())]
                        };
                        Cow::Owned(format!("{subject}{tail}"))
                    } else {
                        Cow::Borrowed(w)
                    };
                    paragraph.push(w);
                    words += 1;
                }
            }
            paragraphs.push(paragraph);
        }
        paragraphs
    }

    /// The article text of page `n` as paragraphs of words: its root's
    /// article, edited if `n` is a copy.
    pub fn paragraphs(&self, n: u64) -> Vec<Vec<Cow<'_, str>>> {
        let root = root(self.seed, n);
        let mut paragraphs = self.article(root);
        if root == n {
            return paragraphs;
        }
        let mut rng = Rng::new(self.seed, COPY, n);
        let total: usize = paragraphs.iter().map(Vec::len).sum();
        let (edits, drop_percent) = match rng.below(10) {
            0..=4 => (1 + rng.below(3), 0),
            5..=7 => (total / 50, 5),
            _ => (total * 6 / 100, 12),
        };
        if drop_percent > 0 {
            let mut kept = Vec::new();
            let count = paragraphs.len();
            for (i, p) in paragraphs.into_iter().enumerate() {
                if !rng.chance(drop_percent) || (kept.is_empty() && i + 1 == count) {
                    kept.push(p);
                }
            }
            paragraphs = kept;
        }
        for _ in 0..edits {
            let p = rng.below(paragraphs.len());
            let paragraph = &mut paragraphs[p];
            let at = rng.below(paragraph.len());
            let word = Cow::Borrowed(self.words[rng.below(self.words.len())].as_str());
            match rng.below(3) {
                0 => paragraph[at] = word,
                1 => paragraph.insert(at, word),
                _ if paragraph.len() > 1 => {
                    paragraph.remove(at);
                }
                _ => paragraph[at] = word,
            }
        }
        paragraphs
    }

    /// The template of page `n`: its own, or for half the copies (the same
    /// story at two addresses of one site) its origin's.
    pub fn site(&self, n: u64) -> usize {
        let mut rng = Rng::new(self.seed, SITE ^ 0xFF, n);
        match origin(self.seed, n) {
            Some(m) if rng.chance(50) => self.site(m),
            _ => (rng.next() % TEMPLATES) as usize,
        }
    }

    /// Page `n` as HTML.
    pub fn page(&self, n: u64) -> String {
        let paragraphs = self.paragraphs(n);
        let mut rng = Rng::new(self.seed, PAGE ^ 0xFF, n);
        let template = &self.templates[self.site(n)];
        let mut html = String::with_capacity(6_000);
        html.push_str(&template.head);
        let title: Vec<&str> = paragraphs[0].iter().take(7).map(|w| w.as_ref()).collect();
        let _ = write!(
            html,
            "\n<h2>{}</h2><p class=\"byline\">Published 20{:02}-{:02}-{:02}</p>\n",
            title.join(" "),
            10 + rng.below(16),
            1 + rng.below(12),
            1 + rng.below(28)
        );
        for paragraph in &paragraphs {
            html.push_str("<p>");
            for (i, w) in paragraph.iter().enumerate() {
                if i > 0 {
                    html.push(' ');
                }
                html.push_str(w);
            }
            html.push_str("</p>\n");
        }
        html.push_str(&template.tail);
        html
    }
}
