//! [`SignatureConfig`]: every parameter that turns a document into
//! signatures, its validation, and its stable byte encoding (FORMAT.md,
//! "Signature configuration"). An index stores the encoding at creation and
//! refuses to open with another one, because a document's signatures are a
//! pure function of its bytes and this configuration.

use crate::error::{ConfigDecodeError, ConfigError};
use crate::hash::DEFAULT_HASH_SEED;
use crate::similarity::Similarity;
use crate::sketch::LshParams;
use crate::spotsigs::MAX_SPOT_SPECS;
use crate::text::stopwords::{DEFAULT_ANTECEDENTS, DEFAULT_STOPWORDS};
use crate::text::Tokens;
use crate::vector::SignatureVector;

/// How documents become signatures, and how signatures are compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureConfig {
    /// The signature scheme.
    pub scheme: Scheme,
    /// The similarity measure of threshold queries.
    pub similarity: Similarity,
    /// The seed of every hash (signatures, fingerprints, sketches).
    pub hash_seed: u64,
    /// MinHash sketch size and LSH banding.
    pub minhash: MinHashConfig,
    /// Signatures dropped from every document (empty: none). A frozen
    /// frequency filter, learned once from a sample with
    /// [`FrequencyFilter::learn`] and never updated: the signatures of a
    /// stored document stay a pure function of its bytes.
    pub frequency_filter: FrequencyFilter,
    /// How a document is signed when `scheme` finds no signatures in it
    /// (under SpotSigs: a page in a language its antecedents do not cover,
    /// or one without running text): word or character shingles. `None`
    /// (the default): such a document has no signatures and matches
    /// nothing. Signatures of the two kinds are hashes of different
    /// strings, so a document of one kind matches documents of its own kind.
    pub fallback: Option<Scheme>,
}

/// A frozen frequency filter: signature hashes that are dropped from every
/// document, typically those found in more than a small fraction of a
/// sample (site boilerplate, stock phrases). Sorted and distinct.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FrequencyFilter {
    hashes: Vec<u64>,
}

impl FrequencyFilter {
    /// A filter dropping exactly `hashes` (any order, repeats ignored).
    pub fn new(hashes: impl IntoIterator<Item = u64>) -> Self {
        let mut hashes: Vec<u64> = hashes.into_iter().collect();
        hashes.sort_unstable();
        hashes.dedup();
        FrequencyFilter { hashes }
    }

    /// The filter that drops every signature found in more than
    /// `max_fraction` of the `sample` vectors (and in at least two of them).
    /// The evaluation in README ("Detection quality") measured
    /// `max_fraction` = 0.01 learned from half of a collection.
    pub fn learn<'a>(sample: impl IntoIterator<Item = &'a SignatureVector>, max_fraction: f64) -> Self {
        let mut df: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
        let mut docs = 0u64;
        for vector in sample {
            docs += 1;
            for &hash in vector.hashes() {
                *df.entry(hash).or_default() += 1;
            }
        }
        let limit = ((max_fraction.clamp(0.0, 1.0) * docs as f64).floor() as u64).max(1);
        Self::new(df.into_iter().filter(|&(_, n)| n > limit).map(|(hash, _)| hash))
    }

    /// The dropped hashes, ascending.
    pub fn hashes(&self) -> &[u64] {
        &self.hashes
    }

    /// Whether `hash` is dropped.
    pub fn contains(&self, hash: u64) -> bool {
        self.hashes.binary_search(&hash).is_ok()
    }

    /// How many hashes are dropped.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Whether the filter drops nothing.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }
}

/// A signature scheme.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Scheme {
    /// Spot signatures (the paper's §3).
    SpotSigs(SpotSigsConfig),
    /// Word k-shingles.
    WordShingles {
        /// Words per shingle.
        k: u32,
    },
    /// Character k-shingles of the normalised text.
    CharShingles {
        /// Characters per shingle.
        k: u32,
    },
}

/// The spot set `A = {a_j(d_j, c_j)}` and the stopwords skipped in chains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpotSigsConfig {
    /// The `a(d, c)` specifications, applied together.
    pub specs: Vec<SpotSpec>,
    /// Words skipped inside chains (antecedents are skipped too).
    pub stopwords: Vec<String>,
}

/// One spot signature specification: antecedents sharing a spot distance
/// `d` and chain length `c`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpotSpec {
    /// Lower-case antecedent words.
    pub antecedents: Vec<String>,
    /// Spot distance d ≥ 1.
    pub distance: u32,
    /// Chain length c ≥ 1.
    pub chain: u32,
}

/// MinHash sketch size P and its LSH banding into b bands of r rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinHashConfig {
    /// Sketch values per document, P = b · r.
    pub permutations: u32,
    /// Bands, b.
    pub bands: u32,
    /// Rows per band, r.
    pub rows: u32,
}

/// Largest accepted spot distance, chain length and shingle size.
pub const MAX_SPAN: u32 = 64;
/// Largest accepted MinHash sketch.
pub const MAX_PERMUTATIONS: u32 = 4096;
/// Largest accepted frequency filter (8 MiB encoded).
pub const MAX_FILTER_HASHES: u32 = 1 << 20;

impl MinHashConfig {
    /// The similarity the default banding is chosen for, and the LSH
    /// threshold `neardex create` bands for unless told another.
    pub const DEFAULT_LSH_THRESHOLD: f64 = 0.8;
    /// The most MinHash values the default banding, and `neardex create`'s
    /// `--lsh-threshold` and `--lsh-recall`, may use.
    pub const DEFAULT_LSH_BUDGET: u32 = 128;

    /// The banding that [`LshParams::optimal`] picks for `tau` with at most
    /// `max_permutations` values and equal false-positive and
    /// false-negative weights.
    ///
    /// # Errors
    /// As [`LshParams::optimal`].
    pub fn for_threshold(tau: f64, max_permutations: u32) -> Result<Self, ConfigError> {
        LshParams::optimal(tau, max_permutations, 0.5, 0.5).map(Self::from)
    }

    /// The banding that [`LshParams::for_recall`] picks: a pair of
    /// similarity `tau` becomes a candidate with probability at least
    /// `recall`, with at most `max_permutations` values.
    ///
    /// # Errors
    /// As [`LshParams::for_recall`].
    pub fn for_recall(tau: f64, recall: f64, max_permutations: u32) -> Result<Self, ConfigError> {
        LshParams::for_recall(tau, recall, max_permutations).map(Self::from)
    }

    /// The banding as [`LshParams`].
    pub fn lsh(self) -> LshParams {
        LshParams { bands: self.bands, rows: self.rows }
    }
}

impl From<LshParams> for MinHashConfig {
    /// A sketch of exactly the values the banding uses, b·r.
    fn from(p: LshParams) -> Self {
        MinHashConfig { permutations: p.permutations(), bands: p.bands, rows: p.rows }
    }
}

impl Default for MinHashConfig {
    /// 9 bands of 13 rows (117 values): [`LshParams::optimal`] for
    /// [`MinHashConfig::DEFAULT_LSH_THRESHOLD`] (0.8) with at most
    /// [`MinHashConfig::DEFAULT_LSH_BUDGET`] (128) values (a test keeps the
    /// two in step).
    fn default() -> Self {
        MinHashConfig { permutations: 117, bands: 9, rows: 13 }
    }
}

impl Default for SpotSpec {
    /// The paper's best antecedents (§5.3.2) with its best spot distance 2
    /// and chain length 3.
    fn default() -> Self {
        SpotSpec { antecedents: DEFAULT_ANTECEDENTS.iter().map(|s| s.to_string()).collect(), distance: 2, chain: 3 }
    }
}

impl Default for SpotSigsConfig {
    fn default() -> Self {
        SpotSigsConfig {
            specs: vec![SpotSpec::default()],
            stopwords: DEFAULT_STOPWORDS.iter().map(|s| s.to_string()).collect(),
        }
    }
}

impl Default for SignatureConfig {
    /// SpotSigs with the paper's best settings, multiset Jaccard, the
    /// default seed, and the MinHash banding for τ = 0.8.
    fn default() -> Self {
        SignatureConfig {
            scheme: Scheme::SpotSigs(SpotSigsConfig::default()),
            similarity: Similarity::MultisetJaccard,
            hash_seed: DEFAULT_HASH_SEED,
            minhash: MinHashConfig::default(),
            frequency_filter: FrequencyFilter::default(),
            fallback: None,
        }
    }
}

fn check_range(parameter: &'static str, value: u32, max: u32) -> Result<(), ConfigError> {
    if value == 0 || value > max {
        return Err(ConfigError::OutOfRange { parameter, value: u64::from(value), range: 1..=u64::from(max) });
    }
    Ok(())
}

/// Every entry must be exactly one token as the tokenizer produces it, and
/// appear once.
fn check_words(list: &'static str, words: &[String]) -> Result<(), ConfigError> {
    let mut seen = std::collections::HashSet::new();
    for word in words {
        let tokens = Tokens::from_text(word);
        if tokens.len() != 1 || tokens.get(0) != word {
            return Err(ConfigError::InvalidWord { list, word: word.clone() });
        }
        if !seen.insert(word.as_str()) {
            return Err(ConfigError::DuplicateWord { list, word: word.clone() });
        }
    }
    Ok(())
}

impl SignatureConfig {
    /// The default configuration with word k-shingles.
    pub fn word_shingles(k: u32) -> Self {
        SignatureConfig { scheme: Scheme::WordShingles { k }, ..Self::default() }
    }

    /// The default configuration with character k-shingles.
    pub fn char_shingles(k: u32) -> Self {
        SignatureConfig { scheme: Scheme::CharShingles { k }, ..Self::default() }
    }

    /// Checks every parameter.
    ///
    /// # Errors
    /// The first problem found, as a [`ConfigError`] naming the parameter.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match &self.scheme {
            Scheme::SpotSigs(spot) => {
                if spot.specs.is_empty() {
                    return Err(ConfigError::NoSpotSpecs);
                }
                if spot.specs.len() > MAX_SPOT_SPECS {
                    return Err(ConfigError::TooManySpotSpecs { count: spot.specs.len(), max: MAX_SPOT_SPECS });
                }
                for (i, spec) in spot.specs.iter().enumerate() {
                    if spec.antecedents.is_empty() {
                        return Err(ConfigError::EmptyAntecedents { spec: i });
                    }
                    check_range("spot distance d", spec.distance, MAX_SPAN)?;
                    check_range("chain length c", spec.chain, MAX_SPAN)?;
                    check_words("antecedent", &spec.antecedents)?;
                }
                check_words("stopword", &spot.stopwords)?;
            }
            Scheme::WordShingles { k } => check_range("word shingle size k", *k, MAX_SPAN)?,
            Scheme::CharShingles { k } => check_range("character shingle size k", *k, MAX_SPAN)?,
        }
        match &self.fallback {
            None => {}
            Some(Scheme::WordShingles { k }) => check_range("fallback word shingle size k", *k, MAX_SPAN)?,
            Some(Scheme::CharShingles { k }) => check_range("fallback character shingle size k", *k, MAX_SPAN)?,
            Some(_) => return Err(ConfigError::FallbackScheme),
        }
        let m = self.minhash;
        check_range("MinHash permutations P", m.permutations, MAX_PERMUTATIONS)?;
        if m.bands == 0 || m.rows == 0 || u64::from(m.bands) * u64::from(m.rows) != u64::from(m.permutations) {
            return Err(ConfigError::Banding { permutations: m.permutations, bands: m.bands, rows: m.rows });
        }
        if self.frequency_filter.len() > MAX_FILTER_HASHES as usize {
            return Err(ConfigError::OutOfRange {
                parameter: "frequency filter size",
                value: self.frequency_filter.len() as u64,
                range: 0..=u64::from(MAX_FILTER_HASHES),
            });
        }
        Ok(())
    }

    /// The stable encoding (FORMAT.md, "Signature configuration"): version
    /// 1 without a frequency filter or fallback, 2 with a filter, 3 with a
    /// fallback.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256 + 8 * self.frequency_filter.len());
        out.extend_from_slice(&CONFIG_MAGIC);
        let version: u16 = match (self.fallback.is_some(), self.frequency_filter.is_empty()) {
            (true, _) => 3,
            (false, false) => 2,
            (false, true) => 1,
        };
        out.extend_from_slice(&version.to_le_bytes());
        let (code, k) = scheme_code(&self.scheme);
        out.push(code);
        out.push(self.similarity.code());
        out.extend_from_slice(&self.hash_seed.to_le_bytes());
        for v in [self.minhash.permutations, self.minhash.bands, self.minhash.rows] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        match &self.scheme {
            Scheme::SpotSigs(spot) => {
                put_u32(&mut out, spot.specs.len());
                for spec in &spot.specs {
                    out.extend_from_slice(&spec.distance.to_le_bytes());
                    out.extend_from_slice(&spec.chain.to_le_bytes());
                    put_words(&mut out, &spec.antecedents);
                }
                put_words(&mut out, &spot.stopwords);
            }
            _ => out.extend_from_slice(&k.to_le_bytes()),
        }
        if version >= 2 {
            put_u32(&mut out, self.frequency_filter.len());
            for hash in self.frequency_filter.hashes() {
                out.extend_from_slice(&hash.to_le_bytes());
            }
        }
        if let Some(fallback) = &self.fallback {
            let (code, k) = scheme_code(fallback);
            out.push(code);
            out.extend_from_slice(&k.to_le_bytes());
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Reads an encoding back and validates it.
    ///
    /// # Errors
    /// A [`ConfigDecodeError`] saying what is wrong and where.
    pub fn decode(bytes: &[u8]) -> Result<Self, ConfigDecodeError> {
        if bytes.len() < 4 {
            return Err(ConfigDecodeError::Truncated { offset: bytes.len() });
        }
        let mut magic = [0u8; 4];
        magic.copy_from_slice(&bytes[..4]);
        if magic != CONFIG_MAGIC {
            return Err(ConfigDecodeError::BadMagic { found: magic });
        }
        if bytes.len() < 6 {
            return Err(ConfigDecodeError::Truncated { offset: bytes.len() });
        }
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        if !(1..=CONFIG_VERSION).contains(&version) {
            return Err(ConfigDecodeError::Incompatible { found: version, supported: 1..=CONFIG_VERSION });
        }
        if bytes.len() < 10 {
            return Err(ConfigDecodeError::Truncated { offset: bytes.len() });
        }
        let body_len = bytes.len() - 4;
        let stored =
            u32::from_le_bytes([bytes[body_len], bytes[body_len + 1], bytes[body_len + 2], bytes[body_len + 3]]);
        let computed = crc32fast::hash(&bytes[..body_len]);
        if stored != computed {
            return Err(ConfigDecodeError::Checksum { stored, computed });
        }
        let mut r = Reader { bytes: &bytes[..body_len], at: 6 };
        let scheme_code = r.u8()?;
        let similarity_code = r.u8()?;
        let similarity = Similarity::from_code(similarity_code)
            .ok_or(ConfigDecodeError::UnknownCode { field: "similarity", code: similarity_code })?;
        let hash_seed = r.u64()?;
        let minhash = MinHashConfig { permutations: r.u32()?, bands: r.u32()?, rows: r.u32()? };
        let scheme = match scheme_code {
            1 => {
                let count = r.u32()?;
                let mut specs = Vec::new();
                for _ in 0..count {
                    let distance = r.u32()?;
                    let chain = r.u32()?;
                    specs.push(SpotSpec { antecedents: r.words()?, distance, chain });
                }
                Scheme::SpotSigs(SpotSigsConfig { specs, stopwords: r.words()? })
            }
            2 => Scheme::WordShingles { k: r.u32()? },
            3 => Scheme::CharShingles { k: r.u32()? },
            code => return Err(ConfigDecodeError::UnknownCode { field: "scheme", code }),
        };
        let mut frequency_filter = FrequencyFilter::default();
        if version >= 2 {
            let count = r.u32()?;
            if count > MAX_FILTER_HASHES {
                return Err(ConfigDecodeError::Invalid(ConfigError::OutOfRange {
                    parameter: "frequency filter size",
                    value: u64::from(count),
                    range: 0..=u64::from(MAX_FILTER_HASHES),
                }));
            }
            let mut hashes = Vec::with_capacity(count as usize);
            for position in 0..count as usize {
                let hash = r.u64()?;
                if hashes.last().is_some_and(|&last| last >= hash) {
                    return Err(ConfigDecodeError::Invalid(ConfigError::FilterOrder { position }));
                }
                hashes.push(hash);
            }
            // Version 2 exists for a filter; version 3 holds one or none.
            if hashes.is_empty() && version == 2 {
                return Err(ConfigDecodeError::Invalid(ConfigError::FilterOrder { position: 0 }));
            }
            frequency_filter = FrequencyFilter { hashes };
        }
        let fallback = if version >= 3 {
            match r.u8()? {
                2 => Some(Scheme::WordShingles { k: r.u32()? }),
                3 => Some(Scheme::CharShingles { k: r.u32()? }),
                code => return Err(ConfigDecodeError::UnknownCode { field: "fallback scheme", code }),
            }
        } else {
            None
        };
        if r.at != body_len {
            return Err(ConfigDecodeError::TrailingBytes { count: body_len - r.at });
        }
        let config = SignatureConfig { scheme, similarity, hash_seed, minhash, frequency_filter, fallback };
        config.validate().map_err(ConfigDecodeError::Invalid)?;
        Ok(config)
    }
}

/// The first four bytes of a configuration encoding.
pub const CONFIG_MAGIC: [u8; 4] = *b"NDXC";
/// The newest configuration encoding version this build writes and reads
/// (1: no frequency filter; 2: with one; 3: with a fallback scheme, and a
/// filter that may be empty). The oldest version that can hold a
/// configuration is written, so configurations without the newer fields
/// encode as before.
pub const CONFIG_VERSION: u16 = 3;

/// A scheme's code in the encoding and its shingle size (0 for SpotSigs).
fn scheme_code(scheme: &Scheme) -> (u8, u32) {
    match scheme {
        Scheme::SpotSigs(_) => (1, 0),
        Scheme::WordShingles { k } => (2, *k),
        Scheme::CharShingles { k } => (3, *k),
    }
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_words(out: &mut Vec<u8>, words: &[String]) {
    put_u32(out, words.len());
    for w in words {
        put_u32(out, w.len());
        out.extend_from_slice(w.as_bytes());
    }
}

/// A bounds-checked little-endian cursor.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], ConfigDecodeError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or(ConfigDecodeError::Truncated { offset: self.at })?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn u8(&mut self) -> Result<u8, ConfigDecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, ConfigDecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, ConfigDecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn words(&mut self) -> Result<Vec<String>, ConfigDecodeError> {
        let count = self.u32()? as usize;
        // Each word takes at least 4 bytes: a count beyond that is a lie, and
        // must not drive an allocation.
        if count > (self.bytes.len() - self.at) / 4 {
            return Err(ConfigDecodeError::Truncated { offset: self.bytes.len() });
        }
        let mut words = Vec::with_capacity(count);
        for _ in 0..count {
            let len = self.u32()? as usize;
            let offset = self.at;
            let bytes = self.take(len)?;
            let word = std::str::from_utf8(bytes).map_err(|_| ConfigDecodeError::InvalidUtf8 { offset })?;
            words.push(word.to_owned());
        }
        Ok(words)
    }
}
