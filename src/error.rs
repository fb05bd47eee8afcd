//! Error types of the signature layer.

use std::fmt;
use std::ops::RangeInclusive;

/// A [`SignatureConfig`](crate::SignatureConfig) or a threshold that cannot
/// be used. Each variant names the parameter and the accepted range.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// τ is not a number in (0, 1].
    Threshold {
        /// The value given.
        value: f64,
    },
    /// The SpotSigs scheme has no `a(d, c)` specification.
    NoSpotSpecs,
    /// More specifications than the extractor supports.
    TooManySpotSpecs {
        /// How many were given.
        count: usize,
        /// How many are supported.
        max: usize,
    },
    /// A specification has no antecedents.
    EmptyAntecedents {
        /// Index of the specification.
        spec: usize,
    },
    /// A numeric parameter is outside its range (`d`, `c`, `k`, MinHash sizes).
    OutOfRange {
        /// The parameter's name.
        parameter: &'static str,
        /// The value given.
        value: u64,
        /// The accepted values.
        range: RangeInclusive<u64>,
    },
    /// The MinHash sketch of `permutations` values cannot be cut into
    /// `bands` bands of `rows` rows.
    Banding {
        /// Sketch size P.
        permutations: u32,
        /// Bands b.
        bands: u32,
        /// Rows per band r.
        rows: u32,
    },
    /// An antecedent or stopword is not exactly one lower-case token, so no
    /// document token could ever equal it.
    InvalidWord {
        /// Which list ("antecedent", "stopword").
        list: &'static str,
        /// The entry.
        word: String,
    },
    /// A word appears twice in one list.
    DuplicateWord {
        /// Which list.
        list: &'static str,
        /// The entry.
        word: String,
    },
    /// An encoded frequency filter is empty or not in strictly ascending
    /// order (its encoding is canonical).
    FilterOrder {
        /// Position of the first hash out of order (0 when empty).
        position: usize,
    },
    /// The fallback scheme is not word or character shingles (SpotSigs
    /// finding no signatures would find none again).
    FallbackScheme,
    /// An LSH recall target outside (0, 1), or one that no banding of at
    /// most `max_permutations` MinHash values reaches at τ
    /// ([`LshParams::for_recall`](crate::sketch::LshParams::for_recall)).
    LshRecall {
        /// The recall asked for.
        recall: f64,
        /// The similarity it is asked at.
        tau: f64,
        /// The largest sketch allowed.
        max_permutations: u32,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Threshold { value } => write!(f, "similarity threshold {value} is not in (0, 1]"),
            ConfigError::NoSpotSpecs => write!(f, "the SpotSigs scheme needs at least one a(d,c) specification"),
            ConfigError::TooManySpotSpecs { count, max } => {
                write!(f, "{count} SpotSigs specifications given, at most {max} are supported")
            }
            ConfigError::EmptyAntecedents { spec } => write!(f, "SpotSigs specification {spec} has no antecedents"),
            ConfigError::OutOfRange { parameter, value, range } => {
                write!(f, "{parameter} = {value} is outside {}..={}", range.start(), range.end())
            }
            ConfigError::Banding { permutations, bands, rows } => write!(
                f,
                "a MinHash sketch of {permutations} values cannot be cut into {bands} bands of {rows} rows \
                 (bands x rows must equal the number of permutations)"
            ),
            ConfigError::InvalidWord { list, word } => {
                write!(f, "{list} entry {word:?} is not a single lower-case word token")
            }
            ConfigError::DuplicateWord { list, word } => write!(f, "{list} entry {word:?} appears twice"),
            ConfigError::FilterOrder { position } => {
                write!(f, "frequency filter hash {position} is out of order (hashes must be distinct and ascending)")
            }
            ConfigError::FallbackScheme => write!(f, "the fallback scheme must be word or character shingles"),
            ConfigError::LshRecall { recall, .. } if !(*recall > 0.0 && *recall < 1.0) => {
                write!(f, "LSH recall {recall} is not in (0, 1)")
            }
            ConfigError::LshRecall { recall, tau, max_permutations } => write!(
                f,
                "no banding of at most {max_permutations} MinHash values makes a pair of similarity {tau} \
                 an LSH candidate with probability {recall} or more"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A stored configuration encoding that cannot be read back.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ConfigDecodeError {
    /// The bytes end before the field at `offset` is complete.
    Truncated {
        /// Byte offset of the incomplete field.
        offset: usize,
    },
    /// The bytes do not start with the configuration magic.
    BadMagic {
        /// The first four bytes.
        found: [u8; 4],
    },
    /// The encoding version is not one this build reads.
    Incompatible {
        /// The version found.
        found: u16,
        /// The versions this build reads.
        supported: RangeInclusive<u16>,
    },
    /// The CRC32 trailer does not match the bytes.
    Checksum {
        /// The CRC32 in the trailer.
        stored: u32,
        /// The CRC32 of the bytes.
        computed: u32,
    },
    /// An enumeration field holds an unknown code.
    UnknownCode {
        /// The field.
        field: &'static str,
        /// The code found.
        code: u8,
    },
    /// A word list entry at `offset` is not UTF-8.
    InvalidUtf8 {
        /// Byte offset of the word.
        offset: usize,
    },
    /// Bytes follow the checksum.
    TrailingBytes {
        /// How many.
        count: usize,
    },
    /// The encoding is well-formed but describes an invalid configuration.
    Invalid(ConfigError),
}

impl fmt::Display for ConfigDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigDecodeError::Truncated { offset } => write!(f, "configuration truncated at byte {offset}"),
            ConfigDecodeError::BadMagic { found } => write!(f, "not a neardex configuration (magic {found:02x?})"),
            ConfigDecodeError::Incompatible { found, supported } => write!(
                f,
                "configuration encoding version {found} is not supported (this build reads {}..={})",
                supported.start(),
                supported.end()
            ),
            ConfigDecodeError::Checksum { stored, computed } => {
                write!(f, "configuration checksum mismatch (stored {stored:08x}, computed {computed:08x})")
            }
            ConfigDecodeError::UnknownCode { field, code } => write!(f, "unknown {field} code {code}"),
            ConfigDecodeError::InvalidUtf8 { offset } => write!(f, "word at byte {offset} is not UTF-8"),
            ConfigDecodeError::TrailingBytes { count } => write!(f, "{count} unexpected bytes after the checksum"),
            ConfigDecodeError::Invalid(e) => write!(f, "stored configuration is invalid: {e}"),
        }
    }
}

impl std::error::Error for ConfigDecodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigDecodeError::Invalid(e) => Some(e),
            _ => None,
        }
    }
}
