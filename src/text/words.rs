//! A small table from words (stopwords, antecedents, tag names) to class
//! bits, looked up without a branch on whether the word is in it.

/// Words a bucket of the [`WordTable`] holds ([`WordTable::get_packed`]
/// compares both).
const SLOTS: usize = 2;

/// Word to class bits. Words of at most 16 bytes (every default stopword
/// and antecedent) are packed into a `u128` (tokens never contain NUL, so
/// zero padding is unambiguous) and stored in buckets of [`SLOTS`], with
/// at least twice as many buckets as words; the hash multiplier is chosen
/// at build time so that no bucket overflows (for the default lists: 512
/// buckets, 32 KiB), and a look-up compares the two keys of one bucket
/// without branching. A bucket is one 64-byte cache line: its keys, then
/// their classes and the miss's (a look-up loads one line; with the keys
/// and the classes in two arrays it loaded two: ARCHITECTURE.md,
/// "Tokenizer fast paths"). A list of thousands of words needs a sparser,
/// larger table to leave no bucket with three. Longer words live in a
/// short list that only tokens longer than 16 bytes consult.
#[derive(Debug, Clone)]
pub(crate) struct WordTable {
    buckets: Vec<Bucket>,
    multiplier: u64,
    shift: u32,
    long: Vec<(Box<str>, u64)>,
}

/// One bucket: its words' keys and classes side by side in one 64-byte
/// cache line, so that a look-up (the miss's class included) loads one line.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
struct Bucket {
    keys: [u128; SLOTS],
    /// The classes of the bucket's words, then 0: the class of a miss.
    classes: [u64; SLOTS + 1],
}

impl Default for WordTable {
    fn default() -> Self {
        WordTable { buckets: vec![Bucket::default(); 1], multiplier: 1, shift: 64, long: Vec::new() }
    }
}

/// The packed form of a word of 1 to 16 bytes: its bytes as a little-endian
/// `u128`, zero-padded. Built from fixed-width loads (overlapping when the
/// word is not a multiple of their width) rather than a variable-length copy,
/// which would cost a `memcpy` call per token.
#[inline]
pub(crate) fn pack(word: &[u8]) -> Option<u128> {
    let n = word.len();
    let le64 = |b: &[u8]| b.try_into().map_or(0, u64::from_le_bytes);
    let le32 = |b: &[u8]| b.try_into().map_or(0, u32::from_le_bytes);
    match n {
        0 => None,
        1..=3 => Some(word.iter().rev().fold(0u128, |acc, &b| acc << 8 | u128::from(b))),
        4..=8 => {
            let low = u64::from(le32(&word[..4]));
            let high = u64::from(le32(&word[n - 4..])) >> (8 * (8 - n));
            Some(u128::from(low | high << 32))
        }
        9..=16 => {
            let low = le64(&word[..8]);
            let high = le64(&word[n - 8..]) >> (8 * (16 - n));
            Some(u128::from(low) | u128::from(high) << 64)
        }
        _ => None,
    }
}

impl WordTable {
    /// The number of buckets.
    #[cfg(test)]
    pub(crate) fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// Builds the table of `(word, class bits)` entries; bits of repeated
    /// words are ORed together.
    pub(crate) fn build(entries: &[(&str, u64)]) -> Self {
        let mut long: Vec<(Box<str>, u64)> = Vec::new();
        let mut short: Vec<(u128, u64)> = Vec::new();
        for &(word, bits) in entries {
            match pack(word.as_bytes()) {
                Some(key) => match short.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, b)) => *b |= bits,
                    None => short.push((key, bits)),
                },
                None => match long.iter_mut().find(|(w, _)| **w == *word) {
                    Some((_, b)) => *b |= bits,
                    None => long.push((word.into(), bits)),
                },
            }
        }
        // At most a word per two buckets; double until some multiplier of a
        // fixed sequence leaves no bucket with more than SLOTS words.
        let mut buckets = (2 * short.len()).next_power_of_two().max(1);
        loop {
            let shift = 64 - buckets.trailing_zeros();
            let mut multiplier = 0x9E37_79B9_7F4A_7C15u64;
            for _ in 0..64 {
                multiplier = multiplier.wrapping_mul(0xD6E8_FEB8_6659_FD93).wrapping_add(0xA076_1D64_78BD_642F) | 1;
                let mut table =
                    WordTable { buckets: vec![Bucket::default(); buckets], multiplier, shift, long: Vec::new() };
                if short.iter().all(|&(key, bits)| table.place(key, bits)) {
                    table.long = long;
                    return table;
                }
            }
            buckets *= 2;
        }
    }

    #[inline]
    fn bucket_of(&self, key: u128) -> usize {
        let mixed = (key as u64) ^ ((key >> 64) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        mixed.wrapping_mul(self.multiplier).checked_shr(self.shift).unwrap_or(0) as usize
    }

    /// Puts a key in its bucket; false when the bucket is full.
    fn place(&mut self, key: u128, bits: u64) -> bool {
        let b = self.bucket_of(key);
        let bucket = &mut self.buckets[b];
        match bucket.keys.iter().position(|&k| k == 0) {
            Some(slot) => {
                bucket.keys[slot] = key;
                bucket.classes[slot] = bits;
                true
            }
            None => false,
        }
    }

    /// The class bits of `word` (0 for an ordinary word).
    pub(crate) fn get(&self, word: &str) -> u64 {
        match pack(word.as_bytes()) {
            Some(key) => self.get_packed(key),
            None => self.long.iter().find(|(w, _)| **w == *word).map_or(0, |&(_, b)| b),
        }
    }

    /// The class bits of a packed word of at most 16 bytes. Whether the
    /// word is in the table is a coin toss in prose (about half its tokens
    /// are stopwords), so the look-up has no branch on it: both keys are
    /// compared, and the outcome indexes the class to load, the miss's 0
    /// included (a masked or selected load compiles to a branch).
    #[inline]
    pub(crate) fn get_packed(&self, key: u128) -> u64 {
        let b = self.bucket_of(key);
        let Bucket { keys, classes } = &self.buckets[b];
        // Slot 0, slot 1, or the miss (2): at most one key matches.
        let slot = 2 - 2 * usize::from(keys[0] == key) - usize::from(keys[1] == key);
        classes[slot]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_table_handles_long_words_and_growth() {
        let words: Vec<String> = (0..2000).map(|i| format!("w{i}")).collect();
        let mut entries: Vec<(&str, u64)> = words.iter().enumerate().map(|(i, w)| (w.as_str(), i as u64 + 1)).collect();
        entries.push(("incomprehensibilities", 7));
        entries.push(("w3", 1 << 40));
        let table = WordTable::build(&entries);
        for (i, w) in words.iter().enumerate() {
            let extra = if w == "w3" { 1 << 40 } else { 0 };
            assert_eq!(table.get(w), (i as u64 + 1) | extra, "{w}");
        }
        assert_eq!(table.get("incomprehensibilities"), 7);
        assert_eq!(table.get("incomprehensibility"), 0);
        assert_eq!(table.get("w2000"), 0);
        assert_eq!(table.get("exactlysixteenby"), 0);
        assert_eq!(WordTable::build(&[]).get("the"), 0);
    }

    #[test]
    fn a_bucket_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Bucket>(), 64);
        assert_eq!(std::mem::align_of::<Bucket>(), 64);
    }

    #[test]
    fn pack_is_the_zero_padded_little_endian_word() {
        for n in 1..=16 {
            let word: Vec<u8> = (1..=n as u8).map(|b| b + b'a').collect();
            let mut buf = [0u8; 16];
            buf[..n].copy_from_slice(&word);
            assert_eq!(pack(&word), Some(u128::from_le_bytes(buf)), "length {n}");
        }
        assert_eq!(pack(b""), None);
        assert_eq!(pack(&[b'x'; 17]), None);
    }
}
