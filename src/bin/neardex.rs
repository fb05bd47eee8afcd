//! The `neardex` command. Until the index and its full command line land,
//! it offers the signature layer: `demo` finds the near-duplicate pairs of a
//! small embedded corpus by brute force, `signatures` prints a document's
//! signatures, and `compare` prints the similarity of two documents.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use neardex::{oracle, Scheme, SignatureConfig, Signer, Similarity, Threshold};

/// The embedded demo corpus: the same article under two sites' framing, a
/// different article under the first site's framing (the SpotSigs paper's
/// Figure 2 case), two market tables with no prose, and a note that quotes
/// part of the article.
const DEMO: &[(&str, &str)] = &[
    ("harbor-chronicle.html", include_str!("demo/harbor-chronicle.html")),
    ("valley-times.html", include_str!("demo/valley-times.html")),
    ("harbor-chronicle-ferry.html", include_str!("demo/harbor-chronicle-ferry.html")),
    ("market-monday.html", include_str!("demo/market-monday.html")),
    ("market-tuesday.html", include_str!("demo/market-tuesday.html")),
    ("library-notes.txt", include_str!("demo/library-notes.txt")),
];

#[derive(Parser)]
#[command(name = "neardex", version, about = "Exact near-duplicate detection for text and web pages")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct SchemeArgs {
    /// Signature scheme: spotsigs, words:K or chars:K.
    #[arg(long, default_value = "spotsigs")]
    scheme: String,
    /// Similarity: multiset or set (Jaccard), or containment.
    #[arg(long, default_value = "multiset")]
    similarity: String,
}

#[derive(Subcommand)]
enum Command {
    /// Find every near-duplicate pair of the embedded demo corpus (brute force).
    ///
    /// Example: neardex demo --threshold 0.5 --scheme words:3
    Demo {
        /// Similarity threshold in (0, 1].
        #[arg(long, short, default_value_t = 0.5)]
        threshold: f64,
        #[command(flatten)]
        scheme: SchemeArgs,
    },
    /// Print the signatures of a document (a file, or - for standard input) as JSON lines.
    ///
    /// Example: neardex signatures page.html --html
    Signatures {
        /// The document.
        path: PathBuf,
        /// Treat the input as HTML (default: by extension .htm/.html).
        #[arg(long)]
        html: bool,
        #[command(flatten)]
        scheme: SchemeArgs,
    },
    /// Print the similarity of two documents as JSON.
    ///
    /// Example: neardex compare a.html b.html
    Compare {
        /// First document.
        a: PathBuf,
        /// Second document.
        b: PathBuf,
        #[command(flatten)]
        scheme: SchemeArgs,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            let _ = writeln!(io::stderr(), "neardex: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    let mut out = io::BufWriter::new(io::stdout().lock());
    match cli.command {
        Command::Demo { threshold, scheme } => {
            let tau = Threshold::new(threshold).map_err(|e| e.to_string())?;
            let (signer, measure) = signer_for(&scheme)?;
            let signed: Vec<_> = DEMO.iter().map(|(name, body)| sign(&signer, name, body.as_bytes())).collect();
            let docs: Vec<(u64, &neardex::SignatureVector)> =
                signed.iter().enumerate().map(|(i, s)| (i as u64, &s.vector)).collect();
            for pair in oracle::self_join(&docs, measure, tau) {
                let line = serde_json::json!({
                    "a": DEMO[pair.a as usize].0,
                    "b": DEMO[pair.b as usize].0,
                    "similarity": pair.overlap.value(),
                });
                writeln!(out, "{line}").map_err(|e| e.to_string())?;
            }
        }
        Command::Signatures { path, html, scheme } => {
            let (signer, _) = signer_for(&scheme)?;
            let bytes = read_input(&path)?;
            let text = if html || is_html_path(&path) {
                neardex::text::html_bytes_to_text(&bytes)
            } else {
                String::from_utf8_lossy(&bytes).into_owned()
            };
            for s in signer.explain(&text) {
                let line = serde_json::json!({ "signature": s.text, "hash": format!("{:016x}", s.hash) });
                writeln!(out, "{line}").map_err(|e| e.to_string())?;
            }
        }
        Command::Compare { a, b, scheme } => {
            let (signer, measure) = signer_for(&scheme)?;
            let sa = sign(&signer, &a.display().to_string(), &read_input(&a)?);
            let sb = sign(&signer, &b.display().to_string(), &read_input(&b)?);
            let overlap = measure.overlap(&sa.vector, &sb.vector);
            let line = serde_json::json!({
                "similarity": overlap.value(),
                "intersection": overlap.num,
                "union": overlap.den,
                "signatures_a": sa.vector.total(),
                "signatures_b": sb.vector.total(),
                "exact_duplicate": sa.fingerprint == sb.fingerprint,
                "minhash_estimate": sa.minhash.estimate(&sb.minhash),
            });
            writeln!(out, "{line}").map_err(|e| e.to_string())?;
        }
    }
    out.flush().map_err(|e| e.to_string())
}

fn signer_for(args: &SchemeArgs) -> Result<(Signer, Similarity), String> {
    let mut config = SignatureConfig::default();
    config.scheme = match args.scheme.split_once(':') {
        None if args.scheme == "spotsigs" => config.scheme,
        Some(("words", k)) => Scheme::WordShingles { k: k.parse().map_err(|_| format!("bad shingle size {k:?}"))? },
        Some(("chars", k)) => Scheme::CharShingles { k: k.parse().map_err(|_| format!("bad shingle size {k:?}"))? },
        _ => return Err(format!("unknown scheme {:?} (use spotsigs, words:K or chars:K)", args.scheme)),
    };
    config.similarity = match args.similarity.as_str() {
        "multiset" => Similarity::MultisetJaccard,
        "set" => Similarity::SetJaccard,
        "containment" => Similarity::Containment,
        other => return Err(format!("unknown similarity {other:?} (use multiset, set or containment)")),
    };
    let measure = config.similarity;
    Ok((Signer::new(config).map_err(|e| e.to_string())?, measure))
}

fn is_html_path(path: &std::path::Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"))
}

fn sign(signer: &Signer, name: &str, bytes: &[u8]) -> neardex::DocumentSignature {
    if is_html_path(std::path::Path::new(name)) {
        signer.sign_html(bytes)
    } else {
        signer.sign_text(&String::from_utf8_lossy(bytes))
    }
}

fn read_input(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    if path.as_os_str() == "-" {
        io::stdin().read_to_end(&mut bytes).map_err(|e| format!("reading standard input: {e}"))?;
    } else {
        bytes = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    }
    Ok(bytes)
}
