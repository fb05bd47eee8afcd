//! Bytes to text to tokens: charset decoding, HTML to visible text, and
//! Unicode-aware lower-cased word tokens. Pure functions, no I/O.

mod charset;
mod html;
pub mod stopwords;
mod tokens;
pub(crate) mod words;

pub use charset::{decode_html, decode_text, sniff_meta_charset, utf8_lossy};
pub use html::{html_to_text, html_to_text_into};
pub use tokens::Tokens;

/// Decodes HTML bytes (see [`decode_html`]) and extracts their visible text.
///
/// ```
/// let text = neardex::text::html_bytes_to_text(b"<p>caf\xE9</p>");
/// assert_eq!(text, "café"); // not UTF-8, no charset declared: windows-1252
/// ```
pub fn html_bytes_to_text(bytes: &[u8]) -> String {
    html_to_text(&decode_html(bytes, None))
}
