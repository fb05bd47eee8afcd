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
        let distinct = hashes.len() - sort_hashes(hashes);
        // A vector that repeats no hash: a copy with frequencies of 1.
        if distinct == hashes.len() {
            return SignatureVector { hashes: hashes.to_vec(), freqs: vec![1; distinct] };
        }
        // A run's hash written once at its slot, every frequency 1 but a
        // repeated hash's: indexed writes into arrays of the final length
        // (pushing each run kept both lengths in memory, a store and a
        // load each a hash; 0.83 against 1.32-1.61 us for a page's 550
        // word 3-shingles, of which 7 repeat), the branch on a repeat
        // rarely taken.
        let mut out = SignatureVector { hashes: vec![0; distinct], freqs: vec![1; distinct] };
        let Some((&first, rest)) = hashes.split_first() else { return out };
        let mut slot = 0;
        let mut previous = first;
        if let Some(h) = out.hashes.first_mut() {
            *h = first;
        }
        for &hash in rest {
            if hash == previous {
                if let Some(f) = out.freqs.get_mut(slot) {
                    *f = f.saturating_add(1);
                }
            } else {
                slot += 1;
                previous = hash;
                if let Some(h) = out.hashes.get_mut(slot) {
                    *h = hash;
                }
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

/// Sorts each run of `items` longer than `longer_than`, the runs ending
/// at `ends` (ascending, the last at most `items.len()`): the runs of a
/// counting scatter, each sorted once its items are placed
/// ([`bucket_sort`]'s crowded buckets).
#[inline]
fn sort_runs_longer_than<T: Ord>(items: &mut [T], ends: &[u32], longer_than: usize) {
    let mut start = 0;
    for &end in ends {
        let end = end as usize;
        if end - start > longer_than {
            items[start..end].sort_unstable();
        }
        start = end;
    }
}

/// Vectors shorter than this are sorted by comparison ([`sort_hashes`]).
const BUCKETED_MIN: usize = 64;
/// Vectors longer than this too (their buckets would outgrow the
/// thread's scratch).
const BUCKETED_MAX: usize = 1 << 16;
/// More hashes than this in one bucket: not spread over the hash space
/// (a caller's own values), sorted by comparison instead.
const BUCKET_CROWDED: u32 = 16;

std::thread_local! {
    /// [`sort_hashes`]'s bucket starts and output, kept for the thread's
    /// next vector.
    static SORT_SCRATCH: std::cell::RefCell<(Vec<u32>, Vec<u64>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// Sorts `hashes` ascending and returns how many of them equal the one
/// before them (the count less the distinct ones). Signature hashes are
/// spread evenly over `u64`, so a vector of a few hundred (a page's word
/// shingles) is sorted by one counting pass on the top bits, two to four
/// buckets a hash, then an insertion pass that moves each hash only
/// within its bucket (and counts the repeats): less than half a
/// comparison sort's time. Short and very long vectors are sorted by
/// comparison, and so is each bucket that holds more than a few hashes
/// (a hash a page repeats, or a caller's own values that are not
/// spread); their repeats are counted in a pass of their own.
fn sort_hashes(hashes: &mut [u64]) -> usize {
    if (BUCKETED_MIN..=BUCKETED_MAX).contains(&hashes.len()) {
        let bucketed = SORT_SCRATCH.with(|cell| {
            let mut scratch = cell.try_borrow_mut().ok()?;
            let (starts, out) = &mut *scratch;
            bucket_sort(hashes, starts, out)
        });
        if let Some(repeats) = bucketed {
            return repeats;
        }
    }
    hashes.sort_unstable();
    hashes.windows(2).filter(|w| w[0] == w[1]).count()
}

/// [`sort_hashes`] by buckets of the top ⌈log2 n⌉ + 1 bits, with the
/// thread's scratch: each crowded bucket sorted by comparison before the
/// insertion pass, which then moves nothing in it. With ⌈log2 n⌉ bits a
/// page's 450 hashes filled 512 buckets 0.88 deep, and the insertion
/// pass's loop exits, one for each pair of hashes sharing a bucket, were
/// mispredicted about 200 times a page; twice the buckets halve them for
/// a counting array of 4 KiB, still in the first-level cache (20,000
/// vectors of random hashes: 6.2–6.4 ns a hash against 7.1–7.2 at 450,
/// 6.0–6.2 against 6.4–6.6 at 600, the same at 300). Returns the repeats
/// ([`sort_hashes`]).
fn bucket_sort(hashes: &mut [u64], starts: &mut Vec<u32>, out: &mut Vec<u64>) -> Option<usize> {
    let n = hashes.len();
    let bits = usize::BITS - (n - 1).leading_zeros() + 1;
    let shift = u64::BITS - bits;
    starts.clear();
    starts.resize((1 << bits) + 1, 0);
    for &h in hashes.iter() {
        starts[(h >> shift) as usize + 1] += 1;
    }
    let mut crowded = false;
    let mut sum = 0;
    for start in starts.iter_mut() {
        crowded |= *start > BUCKET_CROWDED;
        sum += *start;
        *start = sum;
    }
    out.clear();
    out.resize(n, 0);
    for &h in hashes.iter() {
        let at = &mut starts[(h >> shift) as usize];
        out[*at as usize] = h;
        *at += 1;
    }
    if crowded {
        // Each bucket's next position is now its end. (Rare: a page that
        // repeats a shingle more than a few times; every hash at once
        // when the hashes are not spread.)
        sort_runs_longer_than(out, starts, BUCKET_CROWDED as usize);
    }
    // Buckets are in order; within one, insertion, which counts the
    // repeats as it goes (no pass of its own for them). It has no bound
    // on its moves, so it always gives them; were it not to, `hashes`,
    // untouched, would go to `sort_hashes`'s comparison sort.
    let repeats = insertion_pass(out, usize::MAX)?;
    hashes.copy_from_slice(out);
    Some(repeats)
}

/// Insertion sort of `items`, for items that stand near their place (a
/// counting scatter's runs, in order, each of a few items). Equal items
/// keep their order and cost no move. Returns how many items equal the
/// one before them once sorted (an item placed after an equal one: equal
/// items are placed next to each other, so each such item is counted
/// once), or `None` as soon as it has moved items more than `most_moves`
/// times, leaving them a permutation not yet in order (the caller sorts
/// them another way).
#[inline]
pub(crate) fn insertion_pass<T: Ord + Copy>(items: &mut [T], most_moves: usize) -> Option<usize> {
    let mut moved = 0usize;
    let mut repeats = 0usize;
    for i in 1..items.len() {
        let item = items[i];
        let mut j = i;
        while j > 0 && items[j - 1] > item {
            items[j] = items[j - 1];
            j -= 1;
        }
        items[j] = item;
        repeats += usize::from(j > 0 && items[j - 1] == item);
        moved += i - j;
        if moved > most_moves {
            return None;
        }
    }
    Some(repeats)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The bucketed sort is a sort, and counts the hashes that repeat
        /// the one before them, for hashes spread over `u64`, crowded in a
        /// few buckets, or repeated, at every length around its bounds.
        #[test]
        fn hashes_are_sorted_whatever_their_spread(
            spread in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..1200),
            small in proptest::collection::vec(0u64..64, 0..300),
            repeats in 0usize..4,
        ) {
            for input in [spread.clone(), small.clone(), [spread.clone(), small].concat(), spread.repeat(repeats)] {
                let mut sorted = input.clone();
                let repeats = sort_hashes(&mut sorted);
                let mut expected = input;
                expected.sort_unstable();
                proptest::prop_assert_eq!(&sorted, &expected);
                expected.dedup();
                proptest::prop_assert_eq!(repeats, sorted.len() - expected.len());
            }
        }

        /// A vector holds each distinct hash once, ascending, with the
        /// number of times the input holds it: against a count in a map,
        /// for hashes spread, crowded, repeated or both.
        #[test]
        fn a_vector_counts_every_hash(
            spread in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..700),
            small in proptest::collection::vec(0u64..8, 0..40),
            repeats in 1usize..3,
        ) {
            let mut input = spread.repeat(repeats);
            input.extend(&small);
            let third = input.len() / 3;
            input.rotate_left(third);
            let mut expected = std::collections::BTreeMap::<u64, u32>::new();
            for &h in &input {
                *expected.entry(h).or_default() += 1;
            }
            let vector = SignatureVector::from_hashes(input);
            proptest::prop_assert_eq!(vector.iter().collect::<Vec<_>>(), expected.into_iter().collect::<Vec<_>>());
        }
    }

    #[test]
    fn vectors_at_the_bucketed_bounds_are_sorted() {
        // A deterministic spread (an odd multiplier walks all of u64).
        let spread = |n: usize| (0..n as u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect::<Vec<_>>();
        for n in [BUCKETED_MIN - 1, BUCKETED_MIN, BUCKETED_MIN + 1, 550, BUCKETED_MAX, BUCKETED_MAX + 1] {
            let input = spread(n);
            let mut sorted = input.clone();
            sort_hashes(&mut sorted);
            let mut expected = input;
            expected.sort_unstable();
            assert_eq!(sorted, expected, "{n} hashes");
        }
        // One bucket crowded (its bucket sorted by comparison), then a
        // hash repeated among spread ones, buckets crowded at both ends of
        // the hash space, and a bucket of exactly the crowding bound.
        let mut crowded: Vec<u64> = (0..100).rev().collect();
        crowded.extend(spread(100));
        let mut repeated = spread(500);
        repeated.extend([0x8000_0000_0000_0000; 40]);
        repeated.rotate_left(230);
        let mut ends: Vec<u64> = (0..30).map(|i| u64::MAX - i * 7).collect();
        ends.extend((0..30u64).map(|i| i * 5));
        ends.extend(spread(200));
        let mut bound: Vec<u64> = (0..u64::from(BUCKET_CROWDED)).map(|i| 0x4000_0000_0000_0000 + i).rev().collect();
        bound.extend(spread(300));
        for mut input in [crowded, repeated, ends, bound] {
            let mut expected = input.clone();
            expected.sort_unstable();
            let repeats = sort_hashes(&mut input);
            assert_eq!(input, expected);
            expected.dedup();
            assert_eq!(repeats, input.len() - expected.len());
        }
    }

    #[test]
    fn a_run_of_one_hash_is_its_frequency() {
        let mut hashes = vec![7u64; 300];
        hashes.extend((0..300u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1 << 63));
        let vector = SignatureVector::from_hash_buffer(&mut hashes);
        assert_eq!(vector.freq(7), 300);
        assert_eq!(vector.distinct(), 301);
        assert_eq!(vector.total(), 600);
    }
}
