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

/// The tokens of one text: lower-cased token text stored end to end with the
/// span of each token.
#[derive(Debug, Default, Clone)]
pub struct Tokens {
    text: String,
    ends: Vec<u32>,
}

impl Tokens {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Tokenises `text`, replacing what the buffer held.
    pub fn from_text(text: &str) -> Self {
        let mut tokens = Tokens::new();
        tokens.tokenize(text);
        tokens
    }

    /// Tokenises `text` into this buffer, replacing its contents.
    ///
    /// Token text longer than 4 GiB in total is cut at the last token that
    /// fits (spans are `u32`).
    pub fn tokenize(&mut self, text: &str) {
        self.text.clear();
        self.ends.clear();
        self.text.reserve(text.len());
        let bytes = text.as_bytes();
        let mut in_token = false;
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b < 0x80 {
                if b.is_ascii_alphanumeric() {
                    // ASCII fast path: copy the whole run at once.
                    let start = i;
                    while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
                        i += 1;
                    }
                    let run = &text[start..i];
                    if run.bytes().any(|b| b.is_ascii_uppercase()) {
                        self.text.extend(run.bytes().map(|b| b.to_ascii_lowercase() as char));
                    } else {
                        self.text.push_str(run);
                    }
                    in_token = true;
                    continue;
                }
                if in_token {
                    self.end_token();
                    in_token = false;
                }
                i += 1;
                continue;
            }
            // Multi-byte character: `i` is at a char boundary because every
            // step above advances by whole ASCII bytes or whole characters.
            let c = text[i..].chars().next().unwrap_or(char::REPLACEMENT_CHARACTER);
            i += c.len_utf8();
            match classify(c) {
                CharClass::Word => {
                    push_lowercase(&mut self.text, c);
                    in_token = true;
                }
                CharClass::Mark if in_token => self.text.push(c),
                CharClass::Mark | CharClass::Separator => {
                    if in_token {
                        self.end_token();
                        in_token = false;
                    }
                }
                CharClass::Ideograph => {
                    if in_token {
                        self.end_token();
                    }
                    push_lowercase(&mut self.text, c);
                    self.end_token();
                    in_token = false;
                }
            }
        }
        if in_token {
            self.end_token();
        }
    }

    fn end_token(&mut self) {
        match u32::try_from(self.text.len()) {
            Ok(end) => self.ends.push(end),
            Err(_) => {
                let keep = self.ends.last().copied().unwrap_or(0) as usize;
                self.text.truncate(keep);
            }
        }
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when the text had no tokens.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The `i`-th token. Panics if `i >= self.len()`, like slice indexing.
    pub fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    /// The tokens in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.len()).map(move |i| self.get(i))
    }

    /// The tokens joined by single spaces: the normalised text that the
    /// exact-content fingerprint and character shingles are computed over.
    pub fn joined(&self) -> String {
        let mut out = String::with_capacity(self.text.len() + self.len());
        for (i, token) in self.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(token);
        }
        out
    }
}

enum CharClass {
    Word,
    Mark,
    Ideograph,
    Separator,
}

fn classify(c: char) -> CharClass {
    let cp = c as u32;
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
    }

    #[test]
    fn joined_normalises_whitespace_and_case() {
        assert_eq!(Tokens::from_text("  Hello,\n\tWORLD  ").joined(), "hello world");
    }

    #[test]
    fn buffer_is_reusable() {
        let mut t = Tokens::new();
        t.tokenize("one two");
        t.tokenize("three");
        assert_eq!(t.iter().collect::<Vec<_>>(), ["three"]);
    }
}
