//! HTML to visible text, in one forward pass with no DOM.
//!
//! What is dropped: markup, comments, doctype and processing instructions,
//! and the content of elements a reader does not see (`script`, `style`,
//! `noscript`, `template`, `svg`, `iframe`, `noembed`, `noframes`, `xmp`,
//! `object`). Character references are decoded (the full HTML5 named table,
//! the legacy names without `;`, decimal and hexadecimal forms with the HTML5
//! replacements for the C1 range and invalid code points). Block-level
//! elements separate words with a line break; inline elements do not, so
//! `in<b>line</b>` stays one word as a browser renders it. Runs of white
//! space collapse to one space (or one line break at a block boundary).
//!
//! The scanner works on `&str` and only ever slices at ASCII bytes, so every
//! slice is valid UTF-8; it never indexes past the end (all look-ups are
//! `get` or bounded by a length check), so no input can make it panic. The
//! fuzz target `html_text` exercises that claim.

use std::collections::HashMap;
use std::sync::LazyLock;

use memchr::{memchr, memchr2, memchr3, memmem};

use super::words::WordTable;

/// Extracts the visible text of an HTML document.
///
/// ```
/// let text = neardex::text::html_to_text("<p>Caf&eacute; <b>au</b> lait<script>x()</script></p><p>next</p>");
/// assert_eq!(text, "Café au lait\nnext");
/// ```
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 3);
    html_to_text_into(html, &mut out);
    out
}

/// Like [`html_to_text`], appending to `out` so that a caller can reuse one
/// buffer across documents.
pub fn html_to_text_into(html: &str, out: &mut String) {
    let mut writer = TextWriter::new(out);
    let bytes = html.as_bytes();
    let len = bytes.len();
    // `text_start..pos` is pending literal text not yet written.
    let mut text_start = 0;
    let mut pos = 0;
    while pos < len {
        let Some(offset) = memchr2(b'<', b'&', &bytes[pos..]) else {
            break;
        };
        let at = pos + offset;
        if bytes[at] == b'&' {
            writer.text(&html[text_start..at]);
            match decode_char_ref(&bytes[at..]) {
                Some((consumed, value)) => {
                    writer.char_ref(value);
                    pos = at + consumed;
                }
                None => {
                    writer.text("&");
                    pos = at + 1;
                }
            }
            text_start = pos;
            continue;
        }
        let Some(markup) = parse_markup(bytes, at) else {
            // A '<' that starts no markup is text.
            pos = at + 1;
            continue;
        };
        writer.text(&html[text_start..at]);
        pos = markup.end;
        if let Some(tag) = markup.tag {
            let name = TagName::new(&bytes[tag.name.0..tag.name.1]);
            // Few tags skip anything: test the class first, which is
            // predictable, and only then whether the tag is a start tag.
            if name.class & (RAW_TEXT | NESTED_SKIP) != 0 && !tag.is_end {
                if name.class & RAW_TEXT != 0 {
                    pos = skip_raw_text(bytes, pos, name.as_bytes());
                } else {
                    pos = skip_nested(bytes, pos, name.as_bytes());
                }
            }
            writer.separate(if name.class & BLOCK != 0 { Separator::Break } else { Separator::None });
        }
        text_start = pos;
    }
    if text_start < len {
        writer.text(&html[text_start..]);
    }
}

/// Appends text with white space collapsed.
struct TextWriter<'a> {
    out: &'a mut String,
    pending: Separator,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Separator {
    None,
    Space,
    Break,
}

impl<'a> TextWriter<'a> {
    fn new(out: &'a mut String) -> Self {
        // Text appended after earlier content is separated from it.
        let pending = if out.is_empty() { Separator::None } else { Separator::Break };
        TextWriter { out, pending }
    }

    fn separate(&mut self, separator: Separator) {
        self.pending = self.pending.max(separator);
    }

    fn flush(&mut self) {
        if !self.out.is_empty() {
            match self.pending {
                Separator::None => {}
                Separator::Space => self.out.push(' '),
                Separator::Break => self.out.push('\n'),
            }
        }
        self.pending = Separator::None;
    }

    fn text(&mut self, chunk: &str) {
        let bytes = chunk.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if is_html_space(bytes[i]) {
                self.separate(Separator::Space);
                i += 1;
                continue;
            }
            // A run of words separated by single plain spaces is already
            // collapsed: copy it whole rather than word by word.
            let start = i;
            i = collapsed_run_end(bytes, i);
            self.flush();
            self.out.push_str(&chunk[start..i]);
        }
    }

    fn char_ref(&mut self, value: CharRef) {
        match value {
            CharRef::Char(c) if c.is_whitespace() => self.separate(Separator::Space),
            CharRef::Char(c) => {
                self.flush();
                self.out.push(c);
            }
            CharRef::Str(s) => self.text(s),
        }
    }
}

fn is_html_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\x0c')
}

/// The end of the run of words separated by single plain spaces that
/// starts at `i` (a byte that is not white space): the first white space
/// byte that is not a plain space followed by a byte that is not white
/// space, or the end. Eight bytes at a time while they are plainly inside
/// the run (every byte below `!` is a space, and none is followed by
/// another byte below `!`), one at a time otherwise: most text is words and
/// single spaces.
fn collapsed_run_end(bytes: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    // 0x80 in each byte of `w` below `n` (at most 0x80): exact, as no sum
    // carries into the next byte.
    let below = |w: u64, n: u64| !(((w & (0x7F * ONES)) + (0x80 - n) * ONES) | w) & (0x80 * ONES);
    let word = |at: usize| bytes.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
    loop {
        // (Byte k of `next` is the one after byte k of `w`.)
        while let (Some(w), Some(next)) = (word(i), word(i + 1)) {
            if below(w, 0x20) != 0 || below(w, 0x21) & below(next, 0x21) != 0 {
                break;
            }
            i += 8;
        }
        match bytes.get(i) {
            Some(&b) if !is_html_space(b) => i += 1,
            Some(b' ') if bytes.get(i + 1).is_some_and(|&n| !is_html_space(n)) => i += 1,
            _ => return i,
        }
    }
}

struct Markup {
    /// Offset just past the markup.
    end: usize,
    /// Set for start and end tags; `None` for comments and the like.
    tag: Option<Tag>,
}

struct Tag {
    is_end: bool,
    name: (usize, usize),
}

/// Parses the markup that starts with the `<` at `at`, or returns `None`
/// when that `<` is plain text (`a < b`).
fn parse_markup(bytes: &[u8], at: usize) -> Option<Markup> {
    let len = bytes.len();
    let after = at + 1;
    match bytes.get(after) {
        Some(b'!') => {
            if bytes[after..].starts_with(b"!--") {
                let body = after + 3;
                let rest = &bytes[body..];
                let end = if rest.starts_with(b">") {
                    body + 1
                } else if rest.starts_with(b"->") {
                    body + 2
                } else {
                    memmem::find(rest, b"-->").map_or(len, |i| body + i + 3)
                };
                Some(Markup { end, tag: None })
            } else {
                Some(Markup { end: bogus_comment_end(bytes, after), tag: None })
            }
        }
        Some(b'?') => Some(Markup { end: bogus_comment_end(bytes, after), tag: None }),
        Some(b'/') => match bytes.get(after + 1) {
            Some(b) if b.is_ascii_alphabetic() => {
                let name_start = after + 1;
                let name_end = tag_name_end(bytes, name_start);
                let end = memchr(b'>', &bytes[name_end..]).map_or(len, |i| name_end + i + 1);
                Some(Markup { end, tag: Some(Tag { is_end: true, name: (name_start, name_end) }) })
            }
            Some(b'>') => Some(Markup { end: after + 2, tag: None }),
            Some(_) => Some(Markup { end: bogus_comment_end(bytes, after), tag: None }),
            None => None,
        },
        Some(b) if b.is_ascii_alphabetic() => {
            let name_end = tag_name_end(bytes, after);
            let end = start_tag_end(bytes, name_end);
            Some(Markup { end, tag: Some(Tag { is_end: false, name: (after, name_end) }) })
        }
        _ => None,
    }
}

fn bogus_comment_end(bytes: &[u8], from: usize) -> usize {
    memchr(b'>', &bytes[from..]).map_or(bytes.len(), |i| from + i + 1)
}

fn tag_name_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start;
    while i < bytes.len() && !is_html_space(bytes[i]) && bytes[i] != b'/' && bytes[i] != b'>' {
        i += 1;
    }
    i
}

/// Finds the `>` that closes a start tag, stepping over quoted attribute
/// values (a quote counts as opening a value only right after `=`).
fn start_tag_end(bytes: &[u8], from: usize) -> usize {
    let len = bytes.len();
    let mut i = from;
    while i < len {
        let Some(offset) = memchr3(b'>', b'"', b'\'', &bytes[i..]) else {
            return len;
        };
        let at = i + offset;
        let quote = bytes[at];
        if quote == b'>' {
            return at + 1;
        }
        let mut before = at;
        while before > from && is_html_space(bytes[before - 1]) {
            before -= 1;
        }
        if before > from && bytes[before - 1] == b'=' {
            match memchr(quote, &bytes[at + 1..]) {
                Some(close) => i = at + 1 + close + 1,
                None => return len,
            }
        } else {
            i = at + 1;
        }
    }
    len
}

/// Skips the content of a raw-text element up to and including its end tag.
fn skip_raw_text(bytes: &[u8], from: usize, name: &[u8]) -> usize {
    let len = bytes.len();
    let mut i = from;
    while let Some(offset) = memchr(b'<', &bytes[i..]) {
        let at = i + offset;
        let name_start = at + 2;
        let name_end = name_start + name.len();
        if bytes.get(at + 1) == Some(&b'/')
            && bytes.get(name_start..name_end).is_some_and(|n| n.eq_ignore_ascii_case(name))
            && bytes.get(name_end).is_none_or(|&b| is_html_space(b) || b == b'>' || b == b'/')
        {
            return memchr(b'>', &bytes[name_end..]).map_or(len, |j| name_end + j + 1);
        }
        i = at + 1;
    }
    len
}

/// Skips an element whose content is markup (`template`, `svg`) up to its
/// matching end tag, counting nested elements of the same name.
fn skip_nested(bytes: &[u8], from: usize, name: &[u8]) -> usize {
    let len = bytes.len();
    let mut depth = 1usize;
    let mut i = from;
    while let Some(offset) = memchr(b'<', &bytes[i..]) {
        let at = i + offset;
        let Some(markup) = parse_markup(bytes, at) else {
            i = at + 1;
            continue;
        };
        i = markup.end.max(at + 1);
        if let Some(tag) = markup.tag {
            let self_closing = !tag.is_end && i >= 2 && bytes.get(i - 2) == Some(&b'/');
            if bytes[tag.name.0..tag.name.1].eq_ignore_ascii_case(name) && !self_closing {
                if tag.is_end {
                    depth -= 1;
                    if depth == 0 {
                        return i;
                    }
                } else {
                    depth += 1;
                }
            }
        }
    }
    len
}

/// Elements whose content is raw text, skipped up to their end tag.
const RAW_TEXT_TAGS: [&str; 7] = ["script", "style", "noscript", "iframe", "noembed", "noframes", "xmp"];
/// Elements skipped with everything nested in them.
const NESTED_SKIP_TAGS: [&str; 3] = ["template", "svg", "object"];
/// Elements that separate the words before and after them.
const BLOCK_TAGS: [&str; 56] = [
    "address",
    "article",
    "aside",
    "blockquote",
    "body",
    "br",
    "caption",
    "center",
    "dd",
    "details",
    "dialog",
    "dir",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "frameset",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "head",
    "header",
    "hgroup",
    "hr",
    "html",
    "input",
    "legend",
    "li",
    "main",
    "menu",
    "nav",
    "ol",
    "optgroup",
    "option",
    "p",
    "pre",
    "section",
    "select",
    "summary",
    "table",
    "tbody",
    "td",
    "textarea",
    "tfoot",
    "th",
    "thead",
    "title",
    "tr",
    "ul",
];

/// Class bits of a tag name.
const RAW_TEXT: u64 = 1;
const NESTED_SKIP: u64 = 2;
const BLOCK: u64 = 4;

/// Tag name to class bits. Start and end tags of many kinds alternate in
/// a page, so a tag is classified by one branch-free look-up rather than by
/// comparing its name with each list.
static TAG_CLASSES: LazyLock<WordTable> = LazyLock::new(|| {
    let lists = [(&RAW_TEXT_TAGS[..], RAW_TEXT), (&NESTED_SKIP_TAGS[..], NESTED_SKIP), (&BLOCK_TAGS[..], BLOCK)];
    let entries: Vec<(&str, u64)> =
        lists.iter().flat_map(|&(names, class)| names.iter().map(move |&name| (name, class))).collect();
    WordTable::build(&entries)
});

/// A tag name, lower-cased into a fixed buffer, and its class. Names longer
/// than [`TAG_NAME_MAX`] bytes are never ones this module acts on.
struct TagName {
    /// The name, zero-padded: its packed form for the [`WordTable`].
    buf: [u8; 16],
    len: usize,
    class: u64,
}

/// The longest tag name kept (`figcaption` has 10 bytes).
const TAG_NAME_MAX: usize = 12;

impl TagName {
    fn new(raw: &[u8]) -> Self {
        let mut buf = [0u8; 16];
        if raw.len() > TAG_NAME_MAX {
            return TagName { buf, len: 0, class: 0 };
        }
        let mut nul = false;
        for (slot, &b) in buf.iter_mut().zip(raw) {
            *slot = b.to_ascii_lowercase();
            nul |= b == 0;
        }
        // A name with a NUL byte in it would pack like a shorter one, and is
        // no tag this module knows.
        let class = if raw.is_empty() || nul { 0 } else { TAG_CLASSES.get_packed(u128::from_le_bytes(buf)) };
        TagName { buf, len: raw.len(), class }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The value of a character reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CharRef {
    Char(char),
    Str(&'static str),
}

/// Longest name in the HTML5 table (`CounterClockwiseContourIntegral`).
const MAX_ENTITY_NAME: usize = 32;
/// Longest legacy name that may appear without `;` (`middot`, `frac12`...).
const MAX_LEGACY_NAME: usize = 6;

/// Entity names (without `&`, with `;` where the table has it) to their text.
/// Legacy names appear twice in the HTML5 table, with and without `;`.
static NAMED: LazyLock<HashMap<&'static [u8], &'static str>> = LazyLock::new(|| {
    entities::ENTITIES
        .iter()
        .filter_map(|e| e.entity.as_bytes().strip_prefix(b"&").map(|name| (name, e.characters)))
        .collect()
});

/// Decodes the character reference at the start of `bytes` (which begins with
/// `&`); returns the bytes consumed and the value, or `None` when the `&` is
/// literal text.
fn decode_char_ref(bytes: &[u8]) -> Option<(usize, CharRef)> {
    if bytes.get(1) == Some(&b'#') {
        return decode_numeric_ref(bytes);
    }
    let name_len = bytes[1..].iter().take(MAX_ENTITY_NAME + 1).take_while(|b| b.is_ascii_alphanumeric()).count();
    if name_len == 0 {
        return None;
    }
    if bytes.get(1 + name_len) == Some(&b';') {
        if let Some(&text) = NAMED.get(&bytes[1..2 + name_len]) {
            return Some((name_len + 2, char_ref_of(text)));
        }
    }
    // Legacy references may omit the ';' and may run into following letters
    // ("&copy2024", "&ampx"): take the longest legacy name that is a prefix.
    for n in (2..=name_len.min(MAX_LEGACY_NAME)).rev() {
        if let Some(&text) = NAMED.get(&bytes[1..1 + n]) {
            return Some((n + 1, char_ref_of(text)));
        }
    }
    None
}

fn char_ref_of(text: &'static str) -> CharRef {
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => CharRef::Char(c),
        _ => CharRef::Str(text),
    }
}

/// `&#123;` and `&#x7B;`, with or without the closing `;`.
fn decode_numeric_ref(bytes: &[u8]) -> Option<(usize, CharRef)> {
    let (radix, digits_start) = match bytes.get(2) {
        Some(b'x' | b'X') => (16, 3),
        _ => (10, 2),
    };
    let mut value: u32 = 0;
    let mut i = digits_start;
    while let Some(digit) = bytes.get(i).and_then(|&b| (b as char).to_digit(radix)) {
        // Saturate above the Unicode range; the value only needs to be known
        // to be invalid.
        value = value.saturating_mul(radix).saturating_add(digit).min(0x11_0000);
        i += 1;
    }
    if i == digits_start {
        return None;
    }
    if bytes.get(i) == Some(&b';') {
        i += 1;
    }
    Some((i, CharRef::Char(numeric_ref_char(value))))
}

/// The HTML5 numeric character reference rules: NUL, surrogates and values
/// past U+10FFFF become U+FFFD; 0x80..=0x9F are read as windows-1252.
fn numeric_ref_char(value: u32) -> char {
    const C1: [u32; 32] = [
        0x20AC, 0x81, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x8D,
        0x017D, 0x8F, 0x90, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A,
        0x0153, 0x9D, 0x017E, 0x0178,
    ];
    let value = match value {
        0x80..=0x9F => C1[(value - 0x80) as usize],
        other => other,
    };
    if value == 0 {
        return char::REPLACEMENT_CHARACTER;
    }
    char::from_u32(value).unwrap_or(char::REPLACEMENT_CHARACTER)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`collapsed_run_end`] one byte at a time.
    fn collapsed_run_end_bytewise(bytes: &[u8], mut i: usize) -> usize {
        loop {
            while i < bytes.len() && !is_html_space(bytes[i]) {
                i += 1;
            }
            if i + 1 < bytes.len() && bytes[i] == b' ' && !is_html_space(bytes[i + 1]) {
                i += 1;
                continue;
            }
            return i;
        }
    }

    proptest::proptest! {
        #[test]
        fn collapsed_runs_end_where_the_bytewise_scan_says(
            parts in proptest::collection::vec("[a-z]{0,12}|[ ]{1,2}|[\\t\\n\\r\\x0c\\x01\\x1f!]|\\PC{1,2}", 0..30),
            start in 0usize..16,
        ) {
            let text = parts.concat();
            let bytes = text.as_bytes();
            for i in (start.min(bytes.len())..bytes.len()).filter(|&i| !is_html_space(bytes[i])) {
                proptest::prop_assert_eq!(collapsed_run_end(bytes, i), collapsed_run_end_bytewise(bytes, i), "{:?} at {}", text, i);
            }
        }
    }

    #[test]
    fn a_collapsed_run_ends_at_double_or_other_white_space() {
        let text = "words with single spaces, then  two; a\ttab and an end ";
        let b = text.as_bytes();
        assert_eq!(collapsed_run_end(b, 0), text.find("  ").unwrap());
        let after = text.find("two").unwrap();
        assert_eq!(collapsed_run_end(b, after), text.find('\t').unwrap());
        let tab = text.find("tab").unwrap();
        assert_eq!(collapsed_run_end(b, tab), text.len() - 1);
    }

    #[test]
    fn drops_markup_scripts_styles_and_comments() {
        let html = "<html><head><title>T</title><style>p{color:red}</style>\
                    <script type=\"text/javascript\">var x = '</p>'; if (a<b) {}</script></head>\
                    <body><!-- a comment <p>hidden</p> --><p class=\"x>y\">Hello <i>wor</i>ld</p></body></html>";
        assert_eq!(html_to_text(html), "T\nHello world");
    }

    #[test]
    fn tag_classes_are_the_lists() {
        let class_of = |name: &str| {
            let bit = |list: &[&str], class: u64| if list.contains(&name) { class } else { 0 };
            bit(&RAW_TEXT_TAGS, RAW_TEXT) | bit(&NESTED_SKIP_TAGS, NESTED_SKIP) | bit(&BLOCK_TAGS, BLOCK)
        };
        let listed = RAW_TEXT_TAGS.iter().chain(&NESTED_SKIP_TAGS).chain(&BLOCK_TAGS);
        for &name in listed.clone() {
            assert_ne!(class_of(name), 0);
            assert_eq!(TagName::new(name.as_bytes()).class, class_of(name), "{name}");
            assert_eq!(TagName::new(name.to_ascii_uppercase().as_bytes()).class, class_of(name), "{name}");
            // Near misses: a byte more, a byte less, a NUL inside or after.
            for other in [
                format!("{name}x"),
                name[1..].to_owned(),
                format!("{name}\0"),
                format!("{}\0{}", &name[..1], &name[1..]),
            ] {
                assert_eq!(TagName::new(other.as_bytes()).class, class_of(&other), "{other:?}");
            }
        }
        for name in ["", "a", "span", "b", "i", "em", "strong", "h7", "divx", "blockquotes", "figcaptionxyz"] {
            assert_eq!(TagName::new(name.as_bytes()).class, class_of(name), "{name:?}");
        }
        assert_eq!(TagName::new(b"\xC3\xA9p").class, 0);
    }

    #[test]
    fn blocks_separate_words_inline_elements_do_not() {
        assert_eq!(html_to_text("<div>one</div><div>two</div>"), "one\ntwo");
        assert_eq!(html_to_text("<td>a</td><td>b</td>"), "a\nb");
        assert_eq!(html_to_text("line<br>break"), "line\nbreak");
        assert_eq!(html_to_text("in<b>li</b><span>ne</span>"), "inline");
    }

    #[test]
    fn decodes_character_references() {
        assert_eq!(html_to_text("a &amp; b &lt;c&gt; &quot;d&quot;"), "a & b <c> \"d\"");
        assert_eq!(html_to_text("&eacute;t&#233; &#xE9;t&#XE9"), "été été");
        assert_eq!(html_to_text("&copy2024 &notit; &ampx"), "©2024 ¬it; &x");
        assert_eq!(html_to_text("&#150; &#0; &#xD800; &#99999999999;"), "\u{2013} \u{FFFD} \u{FFFD} \u{FFFD}");
        assert_eq!(html_to_text("&nosuchentity; & &# &#x;"), "&nosuchentity; & &# &#x;");
        assert_eq!(html_to_text("a&nbsp;b"), "a b");
        assert_eq!(html_to_text("&NotEqualTilde;"), "\u{2242}\u{338}");
    }

    #[test]
    fn skips_nested_and_raw_elements() {
        assert_eq!(html_to_text("a<svg><svg><text>x</text></svg><text>y</text></svg>b"), "ab");
        assert_eq!(html_to_text("a<template><p>x</p></template>b"), "ab");
        assert_eq!(html_to_text("a<noscript><img src=x></noscript>b"), "ab");
        assert_eq!(html_to_text("a<SCRIPT>x</scriptx></SCRIPT >b"), "ab");
    }

    #[test]
    fn literal_angle_brackets_and_odd_markup() {
        assert_eq!(html_to_text("1 < 2 and 3 > 2"), "1 < 2 and 3 > 2");
        assert_eq!(html_to_text("a<!DOCTYPE html>b<?xml x?>c</>d<!-->e<!--->f"), "abcdef");
        assert_eq!(html_to_text("a</ b>c"), "ac");
        assert_eq!(html_to_text("<p a='1' b=\"2\" c=3 d>x</p>"), "x");
    }

    #[test]
    fn unterminated_constructs_consume_the_rest() {
        assert_eq!(html_to_text("a<!-- never closed"), "a");
        assert_eq!(html_to_text("a<script>never closed"), "a");
        assert_eq!(html_to_text("a<p title=\"never closed>b"), "a");
        assert_eq!(html_to_text("a<"), "a<");
        assert_eq!(html_to_text("a&"), "a&");
        assert_eq!(html_to_text("a</"), "a</");
    }

    #[test]
    fn plain_text_passes_through_with_whitespace_collapsed() {
        assert_eq!(html_to_text("  Just   some\n\ttext.  "), "Just some text.");
        assert_eq!(html_to_text("Grüße, 東京"), "Grüße, 東京");
    }
}
