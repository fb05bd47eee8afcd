//! A document's signature multiset as a sparse vector: distinct signature
//! hashes in ascending order, each with its frequency.

/// Sorted `(hash, frequency)` pairs stored as two parallel arrays, the form
/// that segments store and verification reads. Hashes are strictly
/// ascending; every frequency is at least 1.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SignatureVector {
    hashes: Vec<u64>,
    freqs: Vec<u32>,
}

impl SignatureVector {
    /// The empty vector (a document with no signatures).
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds the multiset of `hashes` (in any order, with repeats).
    /// Frequencies saturate at `u32::MAX`.
    pub fn from_hashes(mut hashes: Vec<u64>) -> Self {
        Self::from_hash_buffer(&mut hashes)
    }

    /// [`Self::from_hashes`] from a caller's buffer, which is left sorted:
    /// signing reuses one buffer for every document, and the vector gets two
    /// allocations of exactly its size instead of a series of regrowths.
    pub fn from_hash_buffer(hashes: &mut [u64]) -> Self {
        hashes.sort_unstable();
        let distinct = hashes.windows(2).filter(|w| w[0] != w[1]).count() + usize::from(!hashes.is_empty());
        let mut out = SignatureVector { hashes: Vec::with_capacity(distinct), freqs: Vec::with_capacity(distinct) };
        for &h in hashes.iter() {
            if out.hashes.last() == Some(&h) {
                if let Some(f) = out.freqs.last_mut() {
                    *f = f.saturating_add(1);
                }
            } else {
                out.hashes.push(h);
                out.freqs.push(1);
            }
        }
        out
    }

    /// The vector of `hashes` and `freqs` as they stand, when the hashes are
    /// strictly ascending and every frequency is at least 1 (a stored
    /// vector, which readers check as they read it); `None` otherwise.
    pub fn from_sorted(hashes: Vec<u64>, freqs: Vec<u32>) -> Option<Self> {
        let valid = hashes.len() == freqs.len() && hashes.windows(2).all(|w| w[0] < w[1]) && !freqs.contains(&0);
        valid.then_some(SignatureVector { hashes, freqs })
    }

    /// Builds a vector from `(hash, frequency)` pairs in any order; repeated
    /// hashes add up and zero frequencies are dropped.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (u64, u32)>) -> Self {
        let mut pairs: Vec<(u64, u32)> = pairs.into_iter().filter(|&(_, f)| f > 0).collect();
        pairs.sort_unstable_by_key(|&(h, _)| h);
        let mut out = SignatureVector::new();
        for (h, f) in pairs {
            if out.hashes.last() == Some(&h) {
                if let Some(last) = out.freqs.last_mut() {
                    *last = last.saturating_add(f);
                }
            } else {
                out.hashes.push(h);
                out.freqs.push(f);
            }
        }
        out
    }

    /// The distinct hashes, ascending.
    pub fn hashes(&self) -> &[u64] {
        &self.hashes
    }

    /// The frequency of each hash in [`Self::hashes`].
    pub fn freqs(&self) -> &[u32] {
        &self.freqs
    }

    /// `(hash, frequency)` pairs in ascending hash order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (u64, u32)> + Clone + '_ {
        self.hashes.iter().copied().zip(self.freqs.iter().copied())
    }

    /// The frequency of `hash` (0 when absent).
    pub fn freq(&self, hash: u64) -> u32 {
        self.hashes.binary_search(&hash).map_or(0, |i| self.freqs[i])
    }

    /// Number of distinct signatures: the length under set Jaccard.
    pub fn distinct(&self) -> u64 {
        self.hashes.len() as u64
    }

    /// Sum of frequencies, `|d|` in the paper: the length under multiset
    /// Jaccard.
    pub fn total(&self) -> u64 {
        self.freqs.iter().map(|&f| u64::from(f)).sum()
    }

    /// True when the document has no signatures.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// The same signatures with every frequency 1 (the set view).
    pub fn to_set(&self) -> Self {
        SignatureVector { hashes: self.hashes.clone(), freqs: vec![1; self.hashes.len()] }
    }
}
