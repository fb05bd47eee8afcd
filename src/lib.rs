//! neardex: an embedded, persistent, exact near-duplicate index for text and
//! web pages.
//!
//! This layer turns bytes into signatures and signatures into similarity,
//! with no I/O: HTML to visible text ([`text`]), spot signatures
//! ([`spotsigs`], the SpotSigs paper §3) and k-shingles ([`shingles`]),
//! pinned 64-bit hashes and a 128-bit exact-content [`Fingerprint`],
//! MinHash with LSH banding and the other classic sketches ([`sketch`]),
//! exact similarity with one threshold comparison ([`similarity`]), and the
//! brute-force [`oracle`] every exact path is tested against.
//!
//! ```
//! use neardex::{Signer, SignatureConfig, Similarity, Threshold};
//!
//! let signer = Signer::new(SignatureConfig::default())?;
//! let a = signer.sign_html(b"<html><body><nav>Home | World</nav><p>The senator said on Monday that the \
//!     bill would be signed, and the governor has promised to veto it if the vote is close.</p></body></html>");
//! let b = signer.sign_text("Breaking: the senator said on Monday that the bill would be signed, and the \
//!     governor has promised to veto it if the vote is close. Share this story.");
//! // The framing (navigation, "Breaking:", "Share this story") has no spot
//! // signatures; only the chains that run into it at the end differ.
//! let sim = Similarity::MultisetJaccard.overlap(&a.vector, &b.vector);
//! assert_eq!((sim.num, sim.den), (6, 9));
//! assert!(sim.meets(Threshold::new(0.6)?));
//! # Ok::<(), neardex::ConfigError>(())
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod config;
pub mod error;
pub mod hash;
#[cfg(feature = "jsonl")]
pub mod jsonl;
pub mod oracle;
pub mod shingles;
pub mod signer;
pub mod similarity;
pub mod sketch;
pub mod spotsigs;
pub mod store;
pub mod text;
pub mod vector;
#[cfg(feature = "warc")]
pub mod warc;

#[doc(hidden)]
pub mod fuzz_support;

pub use config::{FrequencyFilter, MinHashConfig, Scheme, SignatureConfig, SpotSigsConfig, SpotSpec};
pub use error::{ConfigDecodeError, ConfigError};
pub use hash::{Fingerprint, DEFAULT_HASH_SEED};
pub use signer::{DocumentSignature, ExplainedSignature, Scratch, Signer};
pub use similarity::{Overlap, Similarity, Threshold, DEFAULT_THRESHOLD};
pub use vector::SignatureVector;
