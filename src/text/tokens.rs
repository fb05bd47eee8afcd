//! Unicode-aware, lower-cased word tokens.
//!
//! A token is a maximal run of alphanumeric characters (Unicode `Alphabetic`
//! or `Numeric`), lower-cased with full Unicode case mapping. Combining marks
//! (U+0300..U+036F and the other combining-diacritic blocks) continue a token,
//! so decomposed accents stay inside their word. Han ideographs, Hiragana and
//! Katakana are written without spaces, so each such character is a token of
//! its own. Everything else (punctuation, symbols, white space, apostrophes,
//! U+FFFD) separates tokens: "don't" is the two tokens "don" and "t".
//!
//! The tokens of a document are written into one [`Tokens`] buffer (the
//! lower-cased text of all tokens, end to end, plus their spans), so that
//! tokenising allocates nothing per token and a buffer can be reused.

/// The tokens of one text: the lower-cased text (ASCII stretches copied
/// whole, so separators may remain between tokens) with the span of each
/// token in it.
#[derive(Debug, Default, Clone)]
pub struct Tokens {
    text: String,
    spans: Vec<(u32, u32)>,
    /// Start of the token still being read, while tokenising.
    open: Option<u32>,
}

/// Sixteen NUL bytes after the last token (see [`Tokens::packed`]).
const PADDING: &str = "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";

impl Tokens {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Tokenises `text` into a new buffer.
    pub fn from_text(text: &str) -> Self {
        let mut tokens = Tokens::new();
        tokens.tokenize(text);
        tokens
    }

    /// Bytes the buffer holds allocated (to bound what a reused one keeps).
    pub fn capacity_bytes(&self) -> usize {
        self.text.capacity() + self.spans.capacity() * std::mem::size_of::<(u32, u32)>()
    }

    /// Tokenises `text` into this buffer, replacing its contents.
    ///
    /// Lower-cased text of more than 4 GiB is cut at the last token that
    /// ends before 4 GiB (spans are `u32`).
    pub fn tokenize(&mut self, text: &str) {
        self.text.clear();
        self.spans.clear();
        self.open = None;
        self.text.reserve(text.len());
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let ascii_end = i + ascii_prefix_len(&bytes[i..]);
            if ascii_end > i {
                self.ascii_stretch(&text[i..ascii_end]);
                i = ascii_end;
                continue;
            }
            // A multi-byte character: `i` is at a char boundary because
            // stretches end at the first byte >= 0x80 and characters are
            // consumed whole.
            let b = bytes[i];
            if b < 0xF0 {
                // A character of the Basic Multilingual Plane: class and lower
                // case from a precomputed table.
                let (cp, width) = if b < 0xE0 {
                    ((u32::from(b & 0x1F) << 6) | continuation(bytes, i + 1), 2)
                } else {
                    ((u32::from(b & 0x0F) << 12) | (continuation(bytes, i + 1) << 6) | continuation(bytes, i + 2), 3)
                };
                i += width;
                let c = char::from_u32(cp).unwrap_or(char::REPLACEMENT_CHARACTER);
                match BMP[cp as usize & 0xFFFF] {
                    SEPARATOR => self.close(),
                    MARK => self.mark(Some(c)),
                    COMPLEX => self.word(c),
                    IDEOGRAPH => {
                        self.close();
                        self.word(c);
                        self.close();
                    }
                    lower => {
                        self.open_at_end();
                        self.text.push(char::from_u32(u32::from(lower)).unwrap_or(char::REPLACEMENT_CHARACTER));
                    }
                }
                continue;
            }
            let c = text[i..].chars().next().unwrap_or(char::REPLACEMENT_CHARACTER);
            i += c.len_utf8();
            match classify(c) {
                CharClass::Word => self.word(c),
                CharClass::Mark => self.mark(Some(c)),
                CharClass::Separator => self.close(),
                CharClass::Ideograph => {
                    self.close();
                    self.word(c);
                    self.close();
                }
            }
        }
        self.close();
        // Padding so that `packed` can always load 16 bytes; it belongs to no
        // token.
        self.text.push_str(PADDING);
    }

    /// Appends an ASCII stretch lower-cased in bulk, then finds its token
    /// boundaries 64 bytes at a time from a bit mask of word characters.
    fn ascii_stretch(&mut self, stretch: &str) {
        let base = self.text.len();
        self.text.push_str(stretch);
        self.text[base..].make_ascii_lowercase();
        scan_ascii(&self.text.as_bytes()[base..], base, &mut self.open, &mut self.spans);
    }

    fn open_at_end(&mut self) {
        if self.open.is_none() {
            self.open = u32::try_from(self.text.len()).ok();
        }
    }

    /// A word character outside ASCII: lower-cased onto the open token.
    fn word(&mut self, c: char) {
        self.open_at_end();
        push_lowercase(&mut self.text, c);
    }

    /// A combining mark continues an open token and is dropped otherwise.
    fn mark(&mut self, c: Option<char>) {
        if self.open.is_some() {
            self.text.push(c.unwrap_or(char::REPLACEMENT_CHARACTER));
        }
    }

    fn close(&mut self) {
        self.close_at(self.text.len());
    }

    fn close_at(&mut self, end: usize) {
        if let (Some(start), Ok(end)) = (self.open.take(), u32::try_from(end)) {
            self.spans.push((start, end));
        }
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// True when the text had no tokens.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The `i`-th token. Panics if `i >= self.len()`, like slice indexing.
    #[inline]
    pub fn get(&self, i: usize) -> &str {
        let (start, end) = self.spans[i];
        &self.text[start as usize..end as usize]
    }

    /// The length in bytes of the `i`-th token. Panics if `i >= self.len()`.
    #[inline]
    pub fn token_len(&self, i: usize) -> usize {
        let (start, end) = self.spans[i];
        (end - start) as usize
    }

    /// The `i`-th token packed into a `u128` (its bytes little-endian,
    /// zero-padded; tokens never contain NUL, so this is unambiguous), or
    /// `None` when it is longer than 16 bytes. Branch-free for short tokens:
    /// the buffer is padded, so 16 bytes can always be loaded and masked.
    #[inline]
    pub fn packed(&self, i: usize) -> Option<u128> {
        let (start, end) = self.spans[i];
        let len = (end - start) as usize;
        if len > 16 {
            return None;
        }
        let start = start as usize;
        let word = self.text.as_bytes().get(start..start + 16)?.try_into().map_or(0, u128::from_le_bytes);
        let mask = u128::MAX.checked_shr(128 - 8 * len as u32).unwrap_or(0);
        Some(word & mask)
    }

    /// The tokens in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.spans.iter().map(move |&(start, end)| &self.text[start as usize..end as usize])
    }

    /// The tokens joined by single spaces: the normalised text that the
    /// exact-content fingerprint and character shingles are computed over.
    pub fn joined(&self) -> String {
        let mut out = String::with_capacity(self.text.len());
        self.join_into(&mut out);
        out
    }

    /// [`Self::joined`] into a reusable buffer.
    pub fn join_into(&self, out: &mut String) {
        let mut bytes = std::mem::take(out).into_bytes();
        self.join_bytes_into(&mut bytes);
        // Whole tokens of valid text and spaces: valid UTF-8.
        *out = String::from_utf8(bytes).unwrap_or_else(|_| self.iter().collect::<Vec<_>>().join(" "));
    }

    /// [`Self::join_into`] as bytes, not checked again as UTF-8 (they are
    /// whole tokens of a `str` and spaces): what a fingerprint hashes. The
    /// output is sized once, with a block of slack past its end, and each
    /// token is moved a 16-byte block at a time (one block for nearly all
    /// tokens), then cut to its length. Text that already is its join
    /// (text given as tokens: lower case, one space between them) is
    /// copied whole instead, after one count of its spaces (about 0.4
    /// against 1.1 µs for a 550-word page).
    pub fn join_bytes_into(&self, bytes: &mut Vec<u8>) {
        let text = self.text.as_bytes();
        let total: usize = self.spans.iter().map(|&(start, end)| (end - start) as usize + 1).sum();
        bytes.clear();
        if let Some(joined) = self.already_joined(total) {
            bytes.extend_from_slice(joined);
            return;
        }
        bytes.resize(total + BLOCK, 0);
        let mut at = 0;
        for &(start, end) in &self.spans {
            at = move_token(text, (start as usize, end as usize), bytes, at);
            bytes[at] = b' ';
            at += 1;
        }
        bytes.truncate(at.saturating_sub(1));
    }

    /// The lower-cased text when it already is its tokens joined by single
    /// spaces, as text given as tokens is (one space between tokens,
    /// nothing before the first or after the last): then the join is one
    /// copy. `total` is the join's length plus one. The tokens ascend
    /// without overlapping, but may touch (an ideograph is a token of its
    /// own, next to a word's). When the first starts the text, the last
    /// ends it and the text is `total - 1` bytes long, the gaps between
    /// tokens hold one byte fewer than tokens in all. A token holds no
    /// ASCII space, so when the text holds that many spaces, every gap
    /// byte is one; and when no two spaces are next to each other, no gap
    /// holds two, so every gap holds exactly one (one gap of none and one
    /// of two spaces, as in "中a 0  a", would otherwise pass).
    fn already_joined(&self, total: usize) -> Option<&[u8]> {
        let text = self.text.as_bytes();
        let body = text.get(..text.len().checked_sub(PADDING.len())?)?;
        let (&(first, _), &(_, last)) = (self.spans.first()?, self.spans.last()?);
        let joined = first == 0 && last as usize == body.len() && total - 1 == body.len();
        if !joined {
            return None;
        }
        // Counted in byte lanes, 255 bytes at a time, which the compiler
        // vectorises (a count into a `usize` it did not: slower than the
        // join it spares).
        let spaces: usize = body
            .chunks(255)
            .map(|chunk| usize::from(chunk.iter().fold(0u8, |n, &b| n.wrapping_add(u8::from(b == b' ')))))
            .sum();
        if spaces != self.spans.len() - 1 {
            return None;
        }
        // Two spaces in a row (memchr's SIMD search for a pair of bytes).
        memchr::memmem::find(body, b"  ").is_none().then_some(body)
    }

    /// Writes token `i` into `out` at `at` (as [`move_token`] does, `out`
    /// first made at least [`BLOCK`] bytes longer than the token's end) and
    /// returns where it ends.
    #[inline]
    pub(crate) fn copy_token(&self, i: usize, out: &mut Vec<u8>, at: usize) -> usize {
        let (start, end) = self.spans[i];
        let (start, end) = (start as usize, end as usize);
        let stop = at + (end - start);
        if out.len() < stop + BLOCK {
            out.resize(stop + BLOCK, 0);
        }
        move_token(self.text.as_bytes(), (start, end), out, at)
    }
}

/// Moves the token at `start..end` of a token buffer's `text` into `out` at
/// `at`, which has [`BLOCK`] bytes of room past the token's end, and returns
/// where it ends. A token of at most [`BLOCK`] bytes (nearly all) is one
/// fixed-size move: the text ends in as much padding, and the bytes the
/// block writes past the token are slack that what follows overwrites or
/// the caller ignores. A longer token is copied whole (the only branch on
/// the text, rarely taken), instead of a call per token to copy a few bytes.
#[inline]
fn move_token(text: &[u8], (start, end): (usize, usize), out: &mut [u8], at: usize) -> usize {
    let len = end - start;
    let block = text.get(start..start + BLOCK).and_then(|b| <&[u8; BLOCK]>::try_from(b).ok());
    let slot = out.get_mut(at..at + BLOCK).and_then(|b| <&mut [u8; BLOCK]>::try_from(b).ok());
    let moved = match (block, slot) {
        (Some(block), Some(slot)) => {
            *slot = *block;
            true
        }
        // Not reached (the padding and the room are there).
        _ => false,
    };
    if len > BLOCK || !moved {
        out[at..at + len].copy_from_slice(&text[start..end]);
    }
    at + len
}

/// The block in which [`move_token`] moves tokens, and the padding the
/// text buffer ends in.
const BLOCK: usize = PADDING.len();

/// Finds the token boundaries of a lower-cased ASCII stretch that starts at
/// `base` in the buffer, 64 bytes at a time from a bit mask of word bytes:
/// a token starts at a word byte whose predecessor is not one and ends at
/// the first byte after it that is not, so the starts and ends of a chunk
/// are two masks, read in pairs. A token open when the chunk begins (its
/// predecessor counts as a word byte) takes the chunk's first end; one
/// still open at the chunk's end stays open. Positions past `u32` (text of
/// more than 4 GiB) make no span.
fn scan_ascii(stretch: &[u8], base: usize, open_token: &mut Option<u32>, token_spans: &mut Vec<(u32, u32)>) {
    // Worked on as locals and put back at the end: pushing through the
    // caller's `&mut Vec` stored its length to memory and loaded it again
    // at every token, since a store into its buffer might, for all the
    // compiler knew, have changed it.
    let mut spans = std::mem::take(token_spans);
    let mut open = *open_token;
    for (chunk_index, chunk) in stretch.chunks(64).enumerate() {
        let mask = word_mask(chunk);
        let chunk_base = base + chunk_index * 64;
        // Chunks hold 1 to 64 bytes; no end lies past the last one.
        let valid = u64::MAX >> (64 - chunk.len());
        let before = mask << 1 | u64::from(open.is_some());
        let mut starts = mask & !before;
        let mut ends = !mask & before & valid;
        let next_end = |ends: &mut u64| {
            let end = (*ends != 0).then(|| chunk_base + ends.trailing_zeros() as usize);
            *ends &= ends.wrapping_sub(1);
            end
        };
        if let Some(start) = open {
            let Some(end) = next_end(&mut ends) else {
                // The open token runs through the whole chunk.
                continue;
            };
            open = None;
            if let Ok(end) = u32::try_from(end) {
                spans.push((start, end));
            }
        }
        while starts != 0 {
            let start = u32::try_from(chunk_base + starts.trailing_zeros() as usize);
            starts &= starts - 1;
            match (start, next_end(&mut ends)) {
                (Ok(start), Some(end)) => {
                    if let Ok(end) = u32::try_from(end) {
                        spans.push((start, end));
                    }
                }
                (Ok(start), None) => open = Some(start),
                (Err(_), _) => {}
            }
        }
    }
    *open_token = open;
    *token_spans = spans;
}

/// Bit `j` is set when byte `j` of `chunk` (at most 64 bytes, lower-cased
/// ASCII) is a word byte: a digit or a lower-case letter. The flags are
/// computed in a loop the compiler vectorises, then packed eight at a time:
/// multiplying eight 0/1 bytes by `0x0102_0408_1020_4080` puts byte `k`'s
/// flag at bit `56 + k` (every partial product lands on a distinct bit, so
/// nothing carries into the top byte).
#[inline]
fn word_mask(chunk: &[u8]) -> u64 {
    let mut flags = [0u8; 64];
    for (flag, &b) in flags.iter_mut().zip(chunk) {
        *flag = u8::from((b.wrapping_sub(b'0') < 10) | (b.wrapping_sub(b'a') < 26));
    }
    let mut mask = 0u64;
    for (g, group) in flags.chunks_exact(8).enumerate() {
        let x = group.try_into().map_or(0, u64::from_le_bytes);
        mask |= (x.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * g);
    }
    mask
}

/// Length of the leading run of ASCII bytes, eight at a time.
#[inline]
fn ascii_prefix_len(bytes: &[u8]) -> usize {
    let mut n = 0;
    for word in bytes.chunks_exact(8) {
        let w = word.try_into().map_or(u64::MAX, u64::from_le_bytes);
        let high = w & 0x8080_8080_8080_8080;
        if high != 0 {
            return n + (high.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n + bytes[n..].iter().take_while(|b| b.is_ascii()).count()
}

enum CharClass {
    Word,
    Mark,
    Ideograph,
    Separator,
}

/// [`BMP`] entries: a separator, a combining mark, a word character whose
/// lower case is not one BMP character, an ideograph (a token by itself), or
/// else the lower-case code point of a word character.
const SEPARATOR: u16 = 0;
const MARK: u16 = 1;
const COMPLEX: u16 = 2;
const IDEOGRAPH: u16 = 3;

/// Class and lower case of every code point below U+10000 (128 KiB),
/// computed once from the standard library's Unicode tables by the same
/// [`classify`] the other characters go through.
static BMP: std::sync::LazyLock<Vec<u16>> = std::sync::LazyLock::new(|| {
    (0u32..0x1_0000)
        .map(|cp| match char::from_u32(cp).map(|c| (c, classify(c))) {
            Some((c, CharClass::Word)) => {
                let mut lower = c.to_lowercase();
                match (lower.next(), lower.next()) {
                    (Some(l), None) if (4..0x1_0000).contains(&(l as u32)) => l as u16,
                    _ => COMPLEX,
                }
            }
            Some((_, CharClass::Mark)) => MARK,
            Some((_, CharClass::Ideograph)) => IDEOGRAPH,
            _ => SEPARATOR,
        })
        .collect()
});

/// The six payload bits of the UTF-8 continuation byte at `at`.
#[inline]
fn continuation(bytes: &[u8], at: usize) -> u32 {
    bytes.get(at).map_or(0, |b| u32::from(b & 0x3F))
}

fn classify(c: char) -> CharClass {
    let cp = c as u32;
    if (0x2000..=0x206F).contains(&cp) {
        // General Punctuation (curly quotes, dashes, ellipsis, spaces):
        // frequent in prose, never part of a word.
        return CharClass::Separator;
    }
    if matches!(cp, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x3FFFF) {
        CharClass::Ideograph
    } else if c.is_alphanumeric() {
        CharClass::Word
    } else if matches!(cp, 0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F) {
        CharClass::Mark
    } else {
        CharClass::Separator
    }
}

fn push_lowercase(out: &mut String, c: char) {
    if c.is_lowercase() || !c.is_alphabetic() {
        out.push(c);
    } else {
        out.extend(c.to_lowercase());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<String> {
        Tokens::from_text(text).iter().map(str::to_owned).collect()
    }

    #[test]
    fn splits_on_punctuation_and_lowercases() {
        assert_eq!(
            tokens("My name is Inigo Montoya. You killed my father!"),
            ["my", "name", "is", "inigo", "montoya", "you", "killed", "my", "father"]
        );
        assert_eq!(tokens("don't e-mail 3.14"), ["don", "t", "e", "mail", "3", "14"]);
        assert!(tokens("  ,;!?  ").is_empty());
    }

    #[test]
    fn unicode_letters_marks_and_ideographs() {
        assert_eq!(tokens("ÉCOLE Straße ΣΟΦΊΑ"), ["école", "straße", "σοφία"]);
        // Decomposed "é" (e + U+0301) stays one token.
        assert_eq!(tokens("cafe\u{301} noir"), ["cafe\u{301}", "noir"]);
        assert_eq!(tokens("東京タワーへ"), ["東", "京", "タ", "ワ", "ー", "へ"]);
        assert_eq!(tokens("İstanbul"), ["i\u{307}stanbul"]);
        assert_eq!(tokens("a\u{FFFD}b"), ["a", "b"]);
        assert_eq!(tokens("It\u{2019}s \u{201C}quoted\u{201D}\u{2014}yes\u{A0}no"), ["it", "s", "quoted", "yes", "no"]);
        assert_eq!(tokens("ΑΘΗΝΑ Москва ĲSSEL"), ["αθηνα", "москва", "ĳssel"]);
    }

    #[test]
    fn joined_normalises_whitespace_and_case() {
        assert_eq!(Tokens::from_text("  Hello,\n\tWORLD  ").joined(), "hello world");
        let t = Tokens::from_text("a Bc sixteen_bytes_ok seventeen_bytes_no");
        assert_eq!(t.packed(0), Some(u128::from(b'a')));
        assert_eq!(t.packed(1), Some(u128::from(u16::from_le_bytes(*b"bc"))));
        assert_eq!(t.packed(2), Some(u128::from_le_bytes(*b"sixteen\0\0\0\0\0\0\0\0\0")));
        assert_eq!(t.get(3), "bytes");
        assert_eq!(t.packed(4), Some(u128::from_le_bytes(*b"ok\0\0\0\0\0\0\0\0\0\0\0\0\0\0")));
        let long = Tokens::from_text("abcdefghijklmnopq abcdefghijklmnop");
        assert_eq!(long.packed(0), None);
        assert_eq!(long.packed(1), Some(u128::from_le_bytes(*b"abcdefghijklmnop")));
    }

    #[test]
    fn buffer_is_reusable() {
        let mut t = Tokens::new();
        t.tokenize("one two");
        t.tokenize("three");
        assert_eq!(t.iter().collect::<Vec<_>>(), ["three"]);
    }

    /// The reference definition: one character at a time, no fast paths.
    fn reference(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut current: Option<String> = None;
        for c in text.chars() {
            match classify(c) {
                CharClass::Word => current.get_or_insert_with(String::new).extend(c.to_lowercase()),
                CharClass::Mark => {
                    if let Some(t) = current.as_mut() {
                        t.push(c);
                    }
                }
                CharClass::Separator => out.extend(current.take()),
                CharClass::Ideograph => {
                    out.extend(current.take());
                    out.push(c.to_lowercase().collect());
                }
            }
        }
        out.extend(current);
        out
    }

    #[test]
    fn tokens_cross_chunk_and_stretch_boundaries() {
        let long = "x".repeat(200);
        assert_eq!(tokens(&format!("{long} y")), [long.clone(), "y".to_owned()]);
        let text = format!("{}caf\u{e9}{} \u{c9}T\u{c9}", "a".repeat(63), "b".repeat(70));
        assert_eq!(tokens(&text), reference(&text));
    }

    proptest::proptest! {
        #[test]
        fn fast_paths_agree_with_the_reference(text in "(\\PC|[a-zA-Z0-9 .,'])*") {
            proptest::prop_assert_eq!(tokens(&text), reference(&text));
        }

        #[test]
        fn fast_paths_agree_on_long_mixed_text(parts in proptest::collection::vec("[a-zA-Z]{0,70}|[ .,]{1,3}|\\PC{1,3}", 0..40)) {
            let text: String = parts.concat();
            proptest::prop_assert_eq!(tokens(&text), reference(&text));
        }

        #[test]
        fn join_is_the_tokens_with_single_spaces(parts in proptest::collection::vec("[a-zA-Z]{0,40}|[ .,]{1,3}|\\PC{1,3}", 0..40)) {
            let text: String = parts.concat();
            let tokens = Tokens::from_text(&text);
            let expected = tokens.iter().collect::<Vec<_>>().join(" ");
            // A reused buffer, longer than the result, must not leak into it.
            let mut out = "x".repeat(500);
            tokens.join_into(&mut out);
            proptest::prop_assert_eq!(&out, &expected);
            proptest::prop_assert_eq!(tokens.joined(), expected);
        }
    }

    proptest::proptest! {
        /// Text that is, or nearly is, its tokens joined by single spaces
        /// (upper case, a separator other than one space, adjacent
        /// ideographs, a space before or after): the join is the tokens
        /// with single spaces, whether or not it is the text itself.
        #[test]
        fn join_of_text_given_as_tokens(
            words in proptest::collection::vec("[a-zA-Z0-9\u{e9}\u{4e2d}]{1,8}", 1..30),
            separators in proptest::collection::vec(proptest::sample::select(vec![" ", " ", " ", " ", ",", "\t", "  ", "\u{2014}"]), 30),
            ends in proptest::sample::select(vec![("", ""), ("", ""), (" ", ""), ("", " "), (".", "!")]),
        ) {
            let mut text = String::from(ends.0);
            for (i, word) in words.iter().enumerate() {
                if i > 0 {
                    text.push_str(separators[i]);
                }
                text.push_str(word);
            }
            text.push_str(ends.1);
            let tokens = Tokens::from_text(&text);
            let expected = tokens.iter().collect::<Vec<_>>().join(" ");
            let mut out = vec![b'x'; 500];
            tokens.join_bytes_into(&mut out);
            proptest::prop_assert_eq!(out, expected.as_bytes());
        }
    }

    /// Text given as tokens is its own join (the one-copy path is taken);
    /// text that is not, is joined token by token.
    #[test]
    fn text_given_as_tokens_is_its_own_join() {
        let total = |tokens: &Tokens| tokens.spans.iter().map(|&(s, e)| (e - s) as usize + 1).sum();
        for given in ["the quick brown fox 42 jumps", "The Quick", "caf\u{e9} \u{4e2d} x"] {
            let tokens = Tokens::from_text(given);
            assert_eq!(tokens.already_joined(total(&tokens)), Some(given.to_lowercase().as_bytes()), "{given:?}");
        }
        for other in [
            "the quick,brown",
            " the quick",
            "the  quick",
            "the quick.",
            "\u{4e2d}\u{4e2d} a",
            "\u{4e2d}a 0  a",
            "a b  c d\u{4e2d}",
            "a\tb",
            "",
        ] {
            let tokens = Tokens::from_text(other);
            assert_eq!(tokens.already_joined(total(&tokens)), None, "{other:?}");
            let mut out = Vec::new();
            tokens.join_bytes_into(&mut out);
            assert_eq!(out, tokens.iter().collect::<Vec<_>>().join(" ").as_bytes());
        }
    }

    #[test]
    fn word_mask_marks_exactly_the_word_bytes() {
        let chunk: Vec<u8> =
            (0..64u8).map(|i| [b'a', b' ', b'9', b'.', b'z', b'{', b'0', b'/'][usize::from(i % 8)]).collect();
        let expected = (0..64).filter(|&j| matches!(chunk[j], b'a'..=b'z' | b'0'..=b'9')).fold(0u64, |m, j| m | 1 << j);
        assert_eq!(word_mask(&chunk), expected);
        assert_eq!(word_mask(b"ab cd"), 0b11011);
        assert_eq!(word_mask(b""), 0);
    }
}
