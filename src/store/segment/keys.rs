//! The key sections of a segment's bitmap tables (FORMAT.md §7, kinds 5
//! and 9), read in place. Keys are hash values, ascending. Since format
//! version 6 a section of many keys leaves out their top `t` bits (8 or 16,
//! a header field): a directory of `2^t + 1` starts (`u32`) says where the
//! keys of each value of those bits begin, and each key stores only its
//! other `64 − t` bits, in `8 − t/8` bytes. With `t` = 0 (every older
//! version, and sections of few keys) there is no directory and each key
//! takes 8 bytes.
//!
//! Nothing here panics on damaged bytes: starts past the end are clamped and
//! a directory that does not ascend only makes look-ups miss keys;
//! `Segment::verify` checks the directory and the order of the keys.

use std::ops::Range;

/// The key counts from which a writer drops the top 8 and 16 bits of each
/// key: where the directory (1 KB, 256 KB) costs less than the bytes saved.
const DROP_8_FROM: usize = 1 << 10;
const DROP_16_FROM: usize = 1 << 18;

/// The top bits a writer drops from the keys of a section of `count` keys.
pub(super) fn dropped_bits(count: usize) -> u32 {
    if count >= DROP_16_FROM {
        16
    } else if count >= DROP_8_FROM {
        8
    } else {
        0
    }
}

/// Whether a reader accepts `t` dropped bits.
pub(super) fn valid_dropped_bits(t: u32) -> bool {
    matches!(t, 0 | 8 | 16)
}

/// The bytes of a key section holding `keys` (ascending) with `t` dropped
/// bits (the writers build it in place, [`encode_in_place`]).
#[cfg(test)]
pub(super) fn encode(keys: &[u64], t: u32) -> Vec<u8> {
    let mut bytes: Vec<u8> = keys.iter().flat_map(|key| key.to_le_bytes()).collect();
    encode_in_place(&mut bytes, t);
    bytes
}

/// The key section of the keys `bytes` holds (ascending, eight
/// little-endian bytes each) with `t` dropped bits, made in place: no
/// second section of a merge's tens of millions of keys at once. One
/// pass reads each key, notes the buckets it starts in the directory (at
/// most 256 KB) and moves its stored bytes, its low `8 − t/8`, down to
/// `i · width` (at or before where it was read); the directory then goes
/// in front (one move of the keys).
pub(super) fn encode_in_place(bytes: &mut Vec<u8>, t: u32) {
    if t == 0 {
        return;
    }
    let (width, directory_len) = layout(t);
    let count = bytes.len() / 8;
    let mut directory = Vec::with_capacity(directory_len);
    for i in 0..count {
        let key: [u8; 8] = bytes[i * 8..i * 8 + 8].try_into().unwrap_or_default();
        // Key `i` starts every bucket up to its own not yet started.
        let bucket = (u64::from_le_bytes(key) >> (64 - t)) as usize;
        while directory.len() / 4 <= bucket {
            directory.extend_from_slice(&(i as u32).to_le_bytes());
        }
        // All eight bytes written, the top ones overwritten by the next
        // key (or cut): a fixed-size copy, where a `width`-byte one
        // compiles to a `memcpy` call per key. They end at `i · width + 8`,
        // at or before key `i + 1`'s bytes, not yet read.
        bytes[i * width..i * width + 8].copy_from_slice(&key);
    }
    // The buckets past the last key's, and the end.
    while directory.len() < directory_len {
        directory.extend_from_slice(&(count as u32).to_le_bytes());
    }
    bytes.truncate(count * width);
    bytes.splice(0..0, directory);
}

/// The bytes of a stored key and of the directory with `t` dropped bits.
fn layout(t: u32) -> (usize, usize) {
    (8 - (t / 8) as usize, if t == 0 { 0 } else { ((1usize << t) + 1) * 4 })
}

/// A key section, borrowed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Keys<'a> {
    /// `2^t + 1` starts, `u32` each; empty when `t` = 0.
    directory: &'a [u8],
    /// The keys' stored bits, `width` bytes each.
    stored: &'a [u8],
    t: u32,
    width: usize,
    /// `stored.len() / width`, computed once.
    count: usize,
}

impl<'a> Keys<'a> {
    /// The keys of `section`, with `t` dropped bits; `None` when the
    /// section cannot hold the directory and whole keys.
    pub(super) fn new(section: &'a [u8], t: u32) -> Option<Keys<'a>> {
        let (width, directory_len) = layout(t);
        let (directory, stored) = section.split_at_checked(directory_len)?;
        let count = stored.len() / width;
        stored.len().is_multiple_of(width).then_some(Keys { directory, stored, t, width, count })
    }

    /// The keys of `section`, which [`Keys::new`] found to hold `count`
    /// keys with `t` dropped bits, without dividing again (a look-up's
    /// path); no keys if it does not.
    pub(super) fn of(section: &'a [u8], t: u32, count: usize) -> Keys<'a> {
        let (width, directory_len) = layout(t);
        let parts = section.split_at_checked(directory_len).filter(|(_, stored)| stored.len() == count * width);
        match parts {
            Some((directory, stored)) => Keys { directory, stored, t, width, count },
            None => Keys::empty(),
        }
    }

    /// A section of no keys.
    pub(super) fn empty() -> Keys<'a> {
        Keys { directory: &[], stored: &[], t: 0, width: 8, count: 0 }
    }

    /// Number of keys.
    pub(super) fn len(&self) -> usize {
        self.count
    }

    /// How many top bits each key leaves out (its bucket stands for them).
    pub(super) fn dropped(&self) -> u32 {
        self.t
    }

    /// Where key `i`'s bytes start in the section.
    pub(super) fn offset_of(&self, i: usize) -> usize {
        self.directory.len() + i * self.width
    }

    /// The stored bits of key `i` (`i` below [`Keys::len`]).
    #[inline]
    fn low(&self, i: usize) -> u64 {
        let at = i * self.width;
        // One unaligned load and a mask where a whole word follows (all
        // keys but the last few).
        if let Some(word) = self.stored.get(at..at + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()) {
            return u64::from_le_bytes(word) & (u64::MAX >> self.t);
        }
        let mut word = [0u8; 8];
        word[..self.width].copy_from_slice(&self.stored[at..at + self.width]);
        u64::from_le_bytes(word)
    }

    /// The bits of `key` a key of this section stores.
    #[inline]
    fn rest(&self, key: u64) -> u64 {
        key & (u64::MAX >> self.t)
    }

    /// The bucket of `key`: its dropped bits.
    #[inline]
    fn bucket_of_key(&self, key: u64) -> usize {
        key.checked_shr(64 - self.t).unwrap_or(0) as usize
    }

    /// Where bucket `b`'s keys start (clamped to the keys).
    fn start(&self, b: usize) -> usize {
        if self.t == 0 {
            return if b == 0 { 0 } else { self.len() };
        }
        let at = b * 4;
        let start =
            self.directory.get(at..at + 4).map_or(u32::MAX, |s| u32::from_le_bytes(s.try_into().unwrap_or_default()));
        (start as usize).min(self.len())
    }

    /// The index range of `key`'s bucket: the keys that may equal it and
    /// that [`Keys::position_in`] may search. The whole section when no
    /// bits are dropped.
    pub(super) fn bucket(&self, key: u64) -> Range<usize> {
        let b = self.bucket_of_key(key);
        let start = self.start(b);
        start..self.start(b + 1).max(start)
    }

    /// The bucket key `i` lies in: the last whose start is at most `i`.
    fn bucket_of_index(&self, i: usize) -> usize {
        if self.t == 0 {
            return 0;
        }
        let (mut lo, mut hi) = (0usize, 1usize << self.t);
        // Invariant: the answer is in lo..hi.
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.start(mid) <= i {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Key `i` of bucket `b`.
    #[inline]
    fn key_in(&self, b: usize, i: usize) -> u64 {
        if self.t == 0 {
            self.low(i)
        } else {
            (b as u64) << (64 - self.t) | self.low(i)
        }
    }

    /// Key `i`, which must lie in `key`'s bucket ([`Keys::bucket`]).
    #[inline]
    pub(super) fn in_bucket_of(&self, key: u64, i: usize) -> u64 {
        self.key_in(self.bucket_of_key(key), i)
    }

    /// Key `i` (`i` below [`Keys::len`]).
    #[cfg(test)]
    fn get(&self, i: usize) -> u64 {
        self.key_in(self.bucket_of_index(i), i)
    }

    /// Asks for the cache line of key `i`'s first byte (nothing past the
    /// end), ahead of a search that will need it.
    #[inline]
    pub(super) fn prefetch(&self, i: usize) {
        crate::store::mmap::prefetch_line(self.stored, i * self.width);
    }

    /// The position of `key` among the keys of `range`, which all lie in
    /// `key`'s bucket (a scan: the callers' ranges are a few keys).
    #[inline]
    pub(super) fn position_in(&self, range: Range<usize>, key: u64) -> Option<usize> {
        let (rest, end) = (self.rest(key), range.end.min(self.len()));
        (range.start..end).find(|&i| self.low(i) == rest)
    }

    /// The first index whose key is at least `key`.
    pub(super) fn lower_bound(&self, key: u64) -> usize {
        let (rest, range) = (self.rest(key), self.bucket(key));
        super::first_not_below(range.start, range.end, |i| self.low(i) < rest)
    }

    /// The keys from index `i` on, ascending.
    pub(super) fn iter_from(&self, i: usize) -> Iter<'a> {
        let bucket = self.bucket_of_index(i);
        Iter { keys: *self, next: i, bucket, bucket_end: self.start(bucket + 1) }
    }

    /// Calls `f(i, key)` for each key `i` from index `from` on, in index
    /// order, until it returns `Ok(false)` or an error (which is
    /// returned): [`Keys::iter_from`] a bucket at a time, the bucket's
    /// bits and end found once for all its keys rather than checked at
    /// each. Keys past a damaged directory's last start are walked as
    /// the iterator reads them.
    #[inline]
    pub(super) fn try_walk_from<E>(
        &self,
        from: usize,
        mut f: impl FnMut(usize, u64) -> Result<bool, E>,
    ) -> Result<(), E> {
        let last = 1usize << self.t;
        let (mut bucket, mut i) = (self.bucket_of_index(from), from);
        while i < self.count {
            let (high, end) = if self.t > 0 && bucket < last {
                ((bucket as u64) << (64 - self.t), self.start(bucket + 1))
            } else {
                // No directory, or past a damaged one's last start (the
                // iterator's last bucket, whose bits are shifted out).
                (0, self.count)
            };
            while i < end {
                if !f(i, high | self.low(i))? {
                    return Ok(());
                }
                i += 1;
            }
            bucket += 1;
        }
        Ok(())
    }

    /// Whether the directory starts at 0, ascends and ends at the key
    /// count (always, without one).
    pub(super) fn directory_is_sound(&self) -> bool {
        if self.t == 0 {
            return true;
        }
        let starts = self.directory.chunks_exact(4).map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize);
        let mut previous = 0;
        for start in starts {
            if start < previous {
                return false;
            }
            previous = start;
        }
        self.directory.get(..4) == Some(&[0; 4]) && previous == self.len()
    }
}

/// The keys of a section from an index on (see [`Keys::iter_from`]).
#[derive(Debug, Clone)]
pub(super) struct Iter<'a> {
    keys: Keys<'a>,
    next: usize,
    bucket: usize,
    /// Where the keys of the bucket after `bucket` start.
    bucket_end: usize,
}

impl Iter<'_> {
    /// The index of the key [`Iterator::next`] returns next.
    pub(super) fn index(&self) -> usize {
        self.next
    }

    /// The next key, without moving on.
    #[inline]
    pub(super) fn peek(&mut self) -> Option<u64> {
        let i = self.next;
        if i >= self.keys.len() {
            return None;
        }
        if self.keys.t > 0 && self.bucket_end <= i {
            let last = 1usize << self.keys.t;
            while self.bucket < last && self.keys.start(self.bucket + 1) <= i {
                self.bucket += 1;
            }
            self.bucket_end = self.keys.start(self.bucket + 1);
        }
        Some(self.keys.key_in(self.bucket, i))
    }
}

impl Iterator for Iter<'_> {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        let key = self.peek()?;
        self.next += 1;
        Some(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The first `take` keys [`Keys::try_walk_from`] walks from `from`,
    /// with their indices.
    fn walked(section: &Keys<'_>, from: usize, take: usize) -> Vec<(usize, u64)> {
        let mut seen = Vec::new();
        let walk = section.try_walk_from(from, |i, key| {
            seen.push((i, key));
            Ok::<_, ()>(seen.len() < take)
        });
        assert_eq!(walk, Ok(()));
        seen
    }

    /// The keys [`Keys::iter_from`] reads from `from`, with their indices.
    fn iterated(section: &Keys<'_>, from: usize) -> Vec<(usize, u64)> {
        section.iter_from(from).enumerate().map(|(i, key)| (from + i, key)).collect()
    }

    proptest! {
        /// Every form reads back the keys it was written from: by index, in
        /// order from any index, by look-up (present and absent keys) and
        /// by lower bound.
        #[test]
        fn keys_read_back(
            mut keys in proptest::collection::vec(any::<u64>(), 0..3_000),
            narrow_top in any::<bool>(),
            probes in proptest::collection::vec(any::<u64>(), 1..50),
            t in prop_oneof![Just(0u32), Just(8), Just(16)],
        ) {
            if narrow_top {
                // Keys crowded into a few buckets, as well as spread.
                for key in &mut keys {
                    *key &= 0x0300_ffff_ffff_ffff;
                }
            }
            keys.sort_unstable();
            keys.dedup();
            let bytes = encode(&keys, t);
            let section = Keys::new(&bytes, t).unwrap();
            prop_assert!(section.directory_is_sound());
            prop_assert_eq!(section.len(), keys.len());
            for (i, &key) in keys.iter().enumerate().step_by(7) {
                prop_assert_eq!(section.get(i), key);
                prop_assert_eq!(section.iter_from(i).collect::<Vec<_>>(), keys[i..].to_vec());
                prop_assert_eq!(walked(&section, i, usize::MAX), iterated(&section, i));
                // Stopping after a few keys, possibly inside a bucket.
                prop_assert_eq!(walked(&section, i, 3), iterated(&section, i).into_iter().take(3).collect::<Vec<_>>());
                prop_assert_eq!(section.position_in(section.bucket(key), key), Some(i));
            }
            if !keys.is_empty() {
                prop_assert_eq!(section.try_walk_from(0, |_, _| Err::<bool, u8>(7)), Err(7));
            }
            for probe in probes.into_iter().chain(keys.iter().map(|k| k.wrapping_add(1))) {
                let expected = keys.partition_point(|&k| k < probe);
                prop_assert_eq!(section.lower_bound(probe), expected);
                let found = section.position_in(section.bucket(probe), probe);
                prop_assert_eq!(found, keys.binary_search(&probe).ok());
            }
        }
    }

    #[test]
    fn writers_drop_bits_only_for_many_keys() {
        assert_eq!((dropped_bits(0), dropped_bits(1023), dropped_bits(1024)), (0, 0, 8));
        assert_eq!((dropped_bits((1 << 18) - 1), dropped_bits(1 << 18)), (8, 16));
        let keys: Vec<u64> = (0..5u64).map(|k| k << 60 | k).collect();
        let bytes = encode(&keys, 8);
        assert_eq!(bytes.len(), 257 * 4 + 5 * 7);
        // Bucket 0x10 (key 1) starts at index 1, the last entry is the count.
        assert_eq!(bytes[0x10 * 4..0x10 * 4 + 4], 1u32.to_le_bytes());
        assert_eq!(bytes[256 * 4..257 * 4], 5u32.to_le_bytes());
        assert_eq!(bytes[257 * 4 + 7..257 * 4 + 14], [1, 0, 0, 0, 0, 0, 0]);
    }

    /// A damaged directory (not ascending, past the end) misses keys or
    /// finds others, and `directory_is_sound` says so; nothing panics.
    #[test]
    fn damaged_directories_are_caught() {
        let keys: Vec<u64> = (0..2_000u64).map(|k| k.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
        let mut keys = keys;
        keys.sort_unstable();
        let bytes = encode(&keys, 8);
        for (at, value) in [(4 * 5, u32::MAX), (4 * 200, 0), (0, 1), (4 * 256, 1_999)] {
            let mut damaged = bytes.clone();
            damaged[at..at + 4].copy_from_slice(&value.to_le_bytes());
            let section = Keys::new(&damaged, 8).unwrap();
            assert!(!section.directory_is_sound(), "start {at} set to {value}");
            for (i, &key) in keys.iter().enumerate() {
                let _ = (section.get(i), section.lower_bound(key), section.position_in(section.bucket(key), key));
            }
            assert!(section.iter_from(0).count() <= keys.len());
            for from in [0, 1, 1_000, 1_998, 1_999, 2_000] {
                assert_eq!(walked(&section, from, usize::MAX), iterated(&section, from), "start {at} set to {value}");
            }
        }
        assert!(Keys::new(&bytes[..100], 8).is_none(), "shorter than its directory");
        assert!(Keys::new(&bytes[..bytes.len() - 1], 8).is_none(), "not whole keys");
    }
}
