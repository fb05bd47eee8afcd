//! The `neardex` command: build an index from text, HTML, WARC and JSON
//! Lines; query it; list near-duplicate pairs and clusters. JSON Lines on
//! standard output (one object per line) by default, `--format table` for
//! people. Exit codes: 0 success, 1 failure, 2 usage.

mod ingest;
mod progress;
mod query;

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use neardex::store::{Index, IndexOptions};
use neardex::{oracle, MinHashConfig, Scheme, SignatureConfig, Signer, Similarity, SpotSpec, Threshold};
use serde_json::json;

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

#[derive(clap::Args, Clone, Copy)]
struct OutputArgs {
    /// Output: JSON Lines for programs (default) or an aligned table for people.
    #[arg(long, value_enum, default_value = "json")]
    format: OutputFormat,
}

/// How JSON Lines inputs are keyed and where their text is (add, query).
#[derive(clap::Args)]
struct JsonlArgs {
    /// JSON Lines field holding the key.
    #[arg(long, default_value = "id")]
    key_field: String,
    /// Key each JSON line by its file and line number (FILE:LINE), for corpora without an id field.
    #[arg(long, conflicts_with = "key_field")]
    line_keys: bool,
    /// JSON Lines field holding the text.
    #[arg(long, default_value = "text")]
    text_field: String,
}

impl JsonlArgs {
    fn input(self, format: ingest::Format) -> ingest::InputOptions {
        let key_field = (!self.line_keys).then_some(self.key_field);
        ingest::InputOptions { format, key_field, text_field: self.text_field, keep_sources: false }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OutputFormat {
    Json,
    Table,
}

#[derive(clap::Args)]
struct SchemeArgs {
    /// Signature scheme: spotsigs, words:K or chars:K.
    #[arg(long, default_value = "spotsigs")]
    scheme: String,
    /// Similarity: multiset or set (Jaccard), or containment.
    #[arg(long, default_value = "multiset")]
    similarity: String,
    /// SpotSigs antecedents, comma-separated (default: the paper's best set).
    #[arg(long, value_delimiter = ',')]
    antecedents: Option<Vec<String>>,
    /// SpotSigs spot distance d.
    #[arg(long)]
    spot_distance: Option<u32>,
    /// SpotSigs chain length c.
    #[arg(long)]
    chain: Option<u32>,
    /// Sign a document in which the scheme finds no signatures (under
    /// SpotSigs: another language, or no running text) with words:K or
    /// chars:K instead (default: none; such a document matches nothing).
    #[arg(long)]
    fallback: Option<String>,
    /// Band the MinHash sketches for LSH queries at this τ (default 0.8;
    /// query --lsh finds few matches far below it).
    #[arg(long)]
    lsh_threshold: Option<f64>,
    /// Band so that a pair at the LSH threshold becomes a candidate of
    /// query --lsh with at least this probability, e.g. 0.99 (default: the
    /// banding that weighs missed and false candidates alike, which misses
    /// more near τ).
    #[arg(long)]
    lsh_recall: Option<f64>,
}

#[derive(Subcommand)]
enum Command {
    /// Create an index directory.
    ///
    /// Example: neardex create crawl.ndx --scheme spotsigs --similarity multiset
    /// Example: neardex create crawl.ndx --filter-sample sample-pages/
    Create {
        /// The index directory (created).
        index: PathBuf,
        #[command(flatten)]
        scheme: SchemeArgs,
        /// Learn a frozen frequency filter from these files or directories
        /// (HTML by extension, else text): signatures found in more than
        /// --filter-max-df of them are dropped from every document, for good.
        #[arg(long, num_args = 1..)]
        filter_sample: Vec<PathBuf>,
        /// The share of sample documents above which a signature is dropped.
        #[arg(long, default_value_t = 0.01, requires = "filter_sample")]
        filter_max_df: f64,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Add files, directories (recursively) or - (standard input).
    ///
    /// Keys: a file's path; a WARC record's WARC-Record-ID; a JSON line's key field (or FILE:LINE with
    /// --line-keys).
    ///
    /// Example: neardex add crawl.ndx pages/ archive.warc.gz
    ///
    /// Deduplicating a corpus: neardex add corpus.ndx pile.jsonl.zst --line-keys --skip-similar 0.8 --kept
    /// deduplicated.jsonl.zst
    ///
    /// Deduplicating a crawl: neardex add crawl.ndx crawl.warc.gz --skip-similar 0.8 --kept deduplicated.warc.gz
    Add {
        /// The index directory.
        index: PathBuf,
        /// Files, directories, or - for standard input.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Input format (auto: by extension, before any .gz or .zst; .warc, .jsonl/.ndjson/.json, .html/.htm, else
        /// text). Inputs compressed with gzip or zstd are read as what they hold.
        #[arg(long = "format", visible_alias = "input-format", value_enum, default_value = "auto")]
        input_format: ingest::Format,
        #[command(flatten)]
        jsonl: JsonlArgs,
        /// Replace documents whose key is already stored.
        #[arg(long)]
        replace: bool,
        /// Add a document only if no stored or earlier added one is at least
        /// this similar; each one not added is a line on standard output
        /// ({"not_added": key, "url", "similar_to": [...]}) before the summary.
        #[arg(long, value_name = "THRESHOLD", conflicts_with = "replace")]
        skip_similar: Option<f64>,
        /// Load in bulk: each commit writes its documents straight to a
        /// segment of their own instead of the catalog's pending table
        /// (faster for large loads; use batches of thousands).
        #[arg(long)]
        bulk: bool,
        /// Documents per durable commit [default: 1000, with --bulk 200000].
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        batch: Option<u64>,
        /// Write the JSON line of each document added, as it was read, to
        /// this file (gzip or zstd compressed when it ends in .gz or .zst):
        /// with --skip-similar, the deduplicated corpus. A file named .warc
        /// (.warc.gz, .warc.zst) gets the WARC records of the pages added
        /// instead (and each input's warcinfo), each compressed on its own.
        /// JSON Lines or WARC inputs only, as the file's name says. Complete when add succeeds; after
        /// a failure, start again with a fresh index.
        #[arg(long, value_name = "FILE")]
        kept: Option<PathBuf>,
    },
    /// Query with documents or a stored key: one line per query document.
    ///
    /// Inputs are read as `add` reads them: files, directories, - for
    /// standard input; a WARC file gives one query per record, a JSON Lines
    /// file one per line.
    /// Example: neardex query crawl.ndx --threshold 0.8 page.html
    /// Example: neardex query crawl.ndx -t 0.8 new-crawl.warc.gz
    Query {
        /// The index directory.
        index: PathBuf,
        /// Similarity threshold in (0, 1] (default: README, "Detection quality").
        #[arg(long, short, default_value_t = neardex::DEFAULT_THRESHOLD)]
        threshold: f64,
        /// Use the LSH band tables (fast, verified, may miss matches).
        #[arg(long)]
        lsh: bool,
        /// Keep only the K most similar.
        #[arg(long)]
        top: Option<usize>,
        /// Query with the stored document of this key (which is not listed
        /// among its matches), or, when no document has this key, with each
        /// stored with this URL (a scan of the catalog).
        #[arg(long, value_name = "KEY|URL")]
        key: Option<String>,
        /// Leave out of each document's matches a stored document under the
        /// document's own key (querying an index with the files or records it
        /// was built from).
        #[arg(long)]
        exclude_self: bool,
        /// Query documents: files, directories, or - for standard input.
        paths: Vec<PathBuf>,
        /// Input format (auto: by extension, before any .gz or .zst; .warc, .jsonl/.ndjson/.json, .html/.htm, else
        /// text). Inputs compressed with gzip or zstd are read as what they hold.
        #[arg(long, value_enum, default_value = "auto")]
        input_format: ingest::Format,
        #[command(flatten)]
        jsonl: JsonlArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Every near-duplicate pair: one line per pair.
    ///
    /// Example: neardex pairs crawl.ndx --threshold 0.8
    Pairs {
        /// The index directory.
        index: PathBuf,
        /// Similarity threshold in (0, 1] (default: README, "Detection quality").
        #[arg(long, short, default_value_t = neardex::DEFAULT_THRESHOLD)]
        threshold: f64,
        /// Compute the same answer by comparing every pair (an audit).
        #[arg(long)]
        brute_force: bool,
        /// Keep at most about this much of the index's vectors in memory
        /// (e.g. 2G, 512M; at least 2M), for an index larger than the
        /// memory to use: the same pairs, a little slower (README,
        /// "Pairs in bounded memory"). Default: the whole index when it
        /// fits in the memory available (the cgroup's limit counted),
        /// else half that memory.
        #[arg(long, value_parser = memory_size, conflicts_with = "brute_force")]
        memory: Option<usize>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Clusters of two or more near-duplicates: one line per cluster.
    ///
    /// Example: neardex clusters crawl.ndx --threshold 0.8
    Clusters {
        /// The index directory.
        index: PathBuf,
        /// Similarity threshold in (0, 1] (default: README, "Detection quality").
        #[arg(long, short, default_value_t = neardex::DEFAULT_THRESHOLD)]
        threshold: f64,
        /// As for pairs: keep at most about this much of the index's
        /// vectors in memory.
        #[arg(long, value_parser = memory_size)]
        memory: Option<usize>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// The stored documents, in the order they were added (a replaced one
    /// where it was replaced): one line each, {"key", "url", "date",
    /// "fingerprint"} (url and date where stored; exact duplicates share a
    /// fingerprint).
    ///
    /// Example: neardex list crawl.ndx --format table
    List {
        /// The index directory.
        index: PathBuf,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Counts and the configuration, as one JSON object.
    Stats {
        /// The index directory.
        index: PathBuf,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Why two stored documents are or are not near-duplicates.
    Explain {
        /// The index directory.
        index: PathBuf,
        /// First key (or the URL of one stored document).
        a: String,
        /// Second key (or the URL of one stored document).
        b: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Check every checksum and cross-check catalog and segments.
    Verify {
        /// The index directory.
        index: PathBuf,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete documents by key.
    Delete {
        /// The index directory.
        index: PathBuf,
        /// Keys to delete.
        #[arg(required = true)]
        keys: Vec<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Merge all segments into one, dropping deleted documents, and compact the catalog file.
    Optimize {
        /// The index directory.
        index: PathBuf,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Index 526 real spam messages (SpamAssassin corpus, embedded) in a
    /// temporary directory and print the near-duplicate clusters found.
    ///
    /// With --pages: every near-duplicate pair of six embedded web pages, by brute force.
    /// Example: neardex demo --threshold 0.6; neardex demo --pages --scheme words:3
    Demo {
        /// Similarity threshold in (0, 1] (default: README, "Detection quality").
        #[arg(long, short, default_value_t = neardex::DEFAULT_THRESHOLD)]
        threshold: f64,
        /// The six-page demo of the SpotSigs paper's two figures instead.
        #[arg(long)]
        pages: bool,
        #[command(flatten)]
        scheme: SchemeArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Print the signatures of a document (a file, or -).
    Signatures {
        /// The document.
        path: PathBuf,
        /// Treat the input as HTML (default: by extension .htm/.html).
        #[arg(long)]
        html: bool,
        #[command(flatten)]
        scheme: SchemeArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Print the similarity of two documents.
    Compare {
        /// First document.
        a: PathBuf,
        /// Second document.
        b: PathBuf,
        #[command(flatten)]
        scheme: SchemeArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let format = match &cli.command {
        Command::Add { .. } => OutputFormat::Json,
        Command::Create { output, .. }
        | Command::Query { output, .. }
        | Command::Pairs { output, .. }
        | Command::Clusters { output, .. }
        | Command::List { output, .. }
        | Command::Stats { output, .. }
        | Command::Explain { output, .. }
        | Command::Verify { output, .. }
        | Command::Delete { output, .. }
        | Command::Optimize { output, .. }
        | Command::Demo { output, .. }
        | Command::Signatures { output, .. }
        | Command::Compare { output, .. } => output.format,
    };
    let mut out = Output { format, rows: Vec::new(), stdout: io::BufWriter::new(io::stdout().lock()) };
    let result = run(cli.command, &mut out);
    let flushed = out.finish();
    match result.and(flushed) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            let _ = writeln!(io::stderr(), "neardex: {message}");
            ExitCode::from(1)
        }
    }
}

/// The stored documents `name` names: the one with that key, else those
/// stored with that URL (in the order added).
fn stored_as(searcher: &neardex::store::Searcher, name: &str) -> Result<Vec<String>, String> {
    if searcher.get(name).map_err(|e| e.to_string())?.is_some() {
        return Ok(vec![name.to_owned()]);
    }
    let keys: Vec<String> =
        searcher.find_by_url(name).map_err(|e| e.to_string())?.into_iter().map(|info| info.key).collect();
    if keys.is_empty() {
        return Err(format!("no document has key or URL {name:?}"));
    }
    Ok(keys)
}

/// The key of the one stored document `name` names (a key or a URL).
fn key_of(searcher: &neardex::store::Searcher, name: &str) -> Result<String, String> {
    match stored_as(searcher, name)?.as_mut_slice() {
        [one] => Ok(std::mem::take(one)),
        many => Err(format!("{} documents have URL {name:?}: name one by its key", many.len())),
    }
}

/// JSON Lines straight out, or rows collected for a table at the end.
struct Output<'a> {
    format: OutputFormat,
    rows: Vec<serde_json::Value>,
    stdout: io::BufWriter<io::StdoutLock<'a>>,
}

impl Output<'_> {
    fn emit(&mut self, value: serde_json::Value) -> Result<(), String> {
        match self.format {
            OutputFormat::Json => quiet_on_broken_pipe(writeln!(self.stdout, "{value}")),
            OutputFormat::Table => {
                self.rows.push(value);
                Ok(())
            }
        }
    }

    fn finish(mut self) -> Result<(), String> {
        if self.format == OutputFormat::Table && !self.rows.is_empty() {
            // Every field of any row, in the order first met (a URL that
            // only some documents have is a column all the same).
            let mut columns: Vec<String> = Vec::new();
            for row in &self.rows {
                match row {
                    serde_json::Value::Object(map) => {
                        columns.extend(map.keys().filter(|k| !columns.contains(k)).cloned().collect::<Vec<_>>())
                    }
                    _ if columns.is_empty() => columns.push("value".into()),
                    _ => {}
                }
            }
            let cell = |row: &serde_json::Value, c: &str| match &row[c] {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Null => String::new(),
                other => other.to_string(),
            };
            let widths: Vec<usize> = columns
                .iter()
                .map(|c| self.rows.iter().map(|r| cell(r, c).chars().count()).max().unwrap_or(0).max(c.len()))
                .collect();
            let line = |cells: Vec<String>| {
                cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect::<Vec<_>>().join("  ")
            };
            let header = line(columns.clone());
            quiet_on_broken_pipe(writeln!(self.stdout, "{}", header.trim_end()))?;
            for row in &self.rows {
                let text = line(columns.iter().map(|c| cell(row, c)).collect());
                quiet_on_broken_pipe(writeln!(self.stdout, "{}", text.trim_end()))?;
            }
        }
        quiet_on_broken_pipe(self.stdout.flush())
    }
}

/// A reader that stops reading (`neardex pairs ... | head`) ends the
/// output quietly, as other command-line tools do.
fn quiet_on_broken_pipe(result: io::Result<()>) -> Result<(), String> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => std::process::exit(0),
        other => other.map_err(|e| format!("writing output: {e}")),
    }
}

/// The keys and URLs of a set of documents, looked up at once
/// (`Searcher::describe_many`): what a whole self-join's output names.
struct Names {
    /// Ascending, distinct.
    ids: Vec<u64>,
    keys: Vec<String>,
    /// The URL each was stored with (a WARC record's target URI, a JSON
    /// line's `url`).
    urls: Vec<Option<String>>,
}

impl Names {
    fn of(searcher: &neardex::store::Searcher, ids: impl IntoIterator<Item = u64>) -> Result<Names, String> {
        let mut ids: Vec<u64> = ids.into_iter().collect();
        ids.sort_unstable();
        ids.dedup();
        let infos = searcher.describe_many(&ids).map_err(|e| e.to_string())?;
        let (keys, urls) =
            infos.into_iter().map(|d| d.map_or_else(Default::default, |d| (d.key, d.metadata.url))).unzip();
        Ok(Names { ids, keys, urls })
    }

    /// The key of document `id` (empty if it is gone).
    fn key(&self, id: u64) -> &str {
        self.ids.binary_search(&id).map_or("", |i| &self.keys[i])
    }

    /// The URL document `id` was stored with, if any.
    fn url(&self, id: u64) -> Option<&str> {
        self.ids.binary_search(&id).ok().and_then(|i| self.urls[i].as_deref())
    }

    /// `{"representative", "size", "members"}`, and `"urls"` beside the
    /// members (null where unknown) when any member has one.
    fn cluster(&self, members: &[u64]) -> serde_json::Value {
        let keys: Vec<&str> = members.iter().map(|&id| self.key(id)).collect();
        let mut line = json!({ "representative": keys[0], "size": keys.len(), "members": keys });
        let urls: Vec<Option<&str>> = members.iter().map(|&id| self.url(id)).collect();
        if urls.iter().any(Option::is_some) {
            line["urls"] = json!(urls);
        }
        line
    }
}

/// Whether `file` (which may not exist yet) is one of `paths` or lies
/// under one of them.
fn among(file: &Path, paths: &[PathBuf]) -> bool {
    let parent = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let (Ok(dir), Some(name)) = (parent.canonicalize(), file.file_name()) else { return false };
    let file = dir.join(name);
    paths.iter().filter(|p| p.as_os_str() != "-").filter_map(|p| p.canonicalize().ok()).any(|p| file.starts_with(p))
}

/// The `--memory` of a join over `searcher`'s segments: the one given, or
/// the library's own choice (`Searcher::join_memory`: when they are larger
/// than the memory this process can have, half that memory), said on
/// stderr when it bounds the join.
fn join_memory(searcher: &neardex::store::Searcher, given: Option<usize>) -> Option<usize> {
    if given.is_some() {
        return given;
    }
    let bytes = searcher.segment_bytes();
    let chosen = searcher.join_memory();
    if let (Some(chosen), Some(available)) = (chosen, neardex::store::available_memory()) {
        let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
        eprintln!(
            "note: the index ({:.1} GiB) is larger than the memory available ({:.1} GiB): the join keeps about \
             {:.1} GiB of its vectors mapped (--memory chooses)",
            gib(bytes),
            gib(available),
            gib(chosen as u64)
        );
    }
    chosen
}

/// A `--memory` size: a whole number of bytes, or with a suffix K, M, G or
/// T (powers of 1024; B or iB after it allowed, any case), at least 2M.
fn memory_size(s: &str) -> Result<usize, String> {
    let upper = s.trim().to_ascii_uppercase();
    let unit = upper.strip_suffix("IB").or_else(|| upper.strip_suffix('B')).unwrap_or(&upper);
    let (number, shift) = match unit.char_indices().last() {
        Some((at, 'K')) => (&unit[..at], 10),
        Some((at, 'M')) => (&unit[..at], 20),
        Some((at, 'G')) => (&unit[..at], 30),
        Some((at, 'T')) => (&unit[..at], 40),
        _ => (unit, 0),
    };
    let bytes = number
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("{s:?} is not a size (e.g. 2G, 512M or a number of bytes)"))?;
    if bytes < neardex::store::Searcher::LEAST_MAPPED {
        return Err(format!("{s:?} is less than the least the join can keep to, 2M"));
    }
    Ok(bytes)
}

fn threshold(t: f64) -> Result<Threshold, String> {
    Threshold::new(t).map_err(|e| format!("{e} (use --threshold with a number such as 0.8)"))
}

fn open(path: &Path) -> Result<Index, String> {
    Index::open(path).map_err(|e| e.to_string())
}

/// Opened for `add`: flushes and merges on the index's own thread while
/// the documents go on being signed and inserted (`ingest::add` waits for
/// them before it reports).
fn open_for_ingest(path: &Path) -> Result<Index, String> {
    let options = IndexOptions { background_maintenance: true, ..IndexOptions::default() };
    Index::open_with(path, options).map_err(|e| e.to_string())
}

fn open_read_only(path: &Path) -> Result<Index, String> {
    Index::open_read_only(path).map_err(|e| e.to_string())
}

fn run(command: Command, out: &mut Output<'_>) -> Result<(), String> {
    match command {
        Command::Create { index, scheme, filter_sample, filter_max_df, .. } => {
            let mut config = config_for(&scheme)?;
            let mut sample_size = 0;
            if !filter_sample.is_empty() {
                if !(filter_max_df > 0.0 && filter_max_df <= 1.0) {
                    return Err(format!("--filter-max-df {filter_max_df} is not in (0, 1]"));
                }
                let signer = Signer::new(config.clone()).map_err(|e| e.to_string())?;
                let mut files = Vec::new();
                for path in &filter_sample {
                    let mut skipped = Vec::new();
                    ingest::files_under(path, &mut files, &mut skipped)?;
                    skipped.iter().for_each(|reason| ingest::tell_skipped(reason));
                }
                let mut vectors = Vec::with_capacity(files.len());
                for file in &files {
                    let bytes = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
                    vectors.push(sign(&signer, &file.to_string_lossy(), &bytes).vector);
                }
                sample_size = vectors.len();
                config.frequency_filter = neardex::FrequencyFilter::learn(&vectors, filter_max_df);
            }
            Index::create_with(&index, config.clone(), IndexOptions::default()).map_err(|e| e.to_string())?;
            let mut created = json!({ "created": index.display().to_string() });
            if sample_size > 0 {
                created["filter_sample"] = json!(sample_size);
                created["filtered_signatures"] = json!(config.frequency_filter.len());
            }
            out.emit(created)?;
        }
        Command::Add { index, paths, input_format, jsonl, replace, skip_similar, bulk, batch, kept } => {
            let skip_similar =
                skip_similar.map(|t| Threshold::new(t).map_err(|e| format!("--skip-similar: {e}"))).transpose()?;
            let index = open_for_ingest(&index)?;
            let batch = match batch {
                Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
                None if bulk => ingest::BULK_BATCH,
                None => ingest::BATCH,
            };
            if let Some(kept) = kept.as_deref().filter(|kept| among(kept, &paths)) {
                return Err(format!("--kept {} is among the inputs: it would be read while written", kept.display()));
            }
            let input = ingest::InputOptions { keep_sources: kept.is_some(), ..jsonl.input(input_format) };
            let options = ingest::AddOptions { input, replace, skip_similar, bulk, batch, kept };
            let summary = ingest::add(&index, &paths, &options, &mut |line| out.emit(line))?;
            out.emit(json!({
                "added": summary.added,
                "exact_duplicates": summary.exact_duplicates,
                "near_duplicates": summary.near_duplicates,
                "without_signatures": summary.unsigned.without_signatures,
                "not_pages": summary.unsigned.not_pages(),
                "skipped": summary.skipped,
            }))?;
        }
        Command::Query { index, threshold: t, lsh, top, key, exclude_self, paths, input_format, jsonl, .. } => {
            let how = query::How { tau: threshold(t)?, lsh, top, exclude_self };
            let index = open_read_only(&index)?;
            let searcher = index.searcher().map_err(|e| e.to_string())?;
            if key.is_none() && paths.is_empty() {
                return Err("nothing to query: give files, - for standard input, or --key KEY".into());
            }
            let many = (key.is_some() && !paths.is_empty()) || ingest::may_hold_many(&paths, input_format);
            if !lsh && many {
                // Every segment's key directory at once, on all cores,
                // rather than one at a time inside the first query.
                searcher.warm_up(neardex::store::WarmUp::Directories);
            }
            if let Some(key) = &key {
                // Its key's document, or each stored with it as URL.
                for stored in stored_as(&searcher, key)? {
                    let signature =
                        ingest::stored_signature(&searcher, &stored)?.ok_or(format!("{stored} went missing"))?;
                    let mut line = query::named("query", &stored, (stored != *key).then_some(key.as_str()));
                    line["matches"] = json!(query::matches(&searcher, &signature, how, Some(&stored))?);
                    out.emit(line)?;
                }
            }
            let sink = query::Queries::new(&searcher, how, |line| out.emit(line));
            let mut pipeline = ingest::Pipeline::new(searcher.signer().clone(), sink);
            ingest::read_inputs(&paths, &jsonl.input(input_format), &mut pipeline)?;
            let queries = pipeline.finish()?;
            if key.is_none() && queries.queried == 0 {
                return Err(format!(
                    "nothing to query: the inputs held no document ({} skipped, {} not pages)",
                    queries.skipped,
                    queries.unsigned.not_pages()
                ));
            }
            queries.unsigned.print_notes(queries.queried, "queried");
        }
        Command::Pairs { index, threshold: t, brute_force, memory, .. } => {
            let tau = threshold(t)?;
            let index = open_read_only(&index)?;
            let searcher = index.searcher().map_err(|e| e.to_string())?;
            let memory = if brute_force { None } else { join_memory(&searcher, memory) };
            let mut pairs = Vec::new();
            if brute_force {
                let mut docs = Vec::new();
                searcher.for_each_live(|id, v| docs.push((id, v.clone()))).map_err(|e| e.to_string())?;
                let refs: Vec<(u64, &neardex::SignatureVector)> = docs.iter().map(|(id, v)| (*id, v)).collect();
                pairs = oracle::self_join(&refs, index.config().similarity, tau);
            } else {
                let spinner = progress::spinner("pairs");
                let found = |p| {
                    spinner.inc(1);
                    pairs.push(p)
                };
                match memory {
                    Some(memory) => searcher.self_join_within(tau, memory, found),
                    None => searcher.self_join(tau, found),
                }
                .map_err(|e| e.to_string())?;
                spinner.finish_and_clear();
                // The self-join groups pairs by their shorter document; the
                // command prints them by id, as the brute force does.
                pairs.sort_unstable_by_key(|p| (p.a, p.b));
            }
            let names = Names::of(&searcher, pairs.iter().flat_map(|p| [p.a, p.b]))?;
            for p in pairs {
                let mut line = json!({ "a": names.key(p.a), "b": names.key(p.b), "similarity": p.overlap.value() });
                for (field, id) in [("a_url", p.a), ("b_url", p.b)] {
                    if let Some(url) = names.url(id) {
                        line[field] = json!(url);
                    }
                }
                out.emit(line)?;
            }
        }
        Command::Clusters { index, threshold: t, memory, .. } => {
            let tau = threshold(t)?;
            let index = open_read_only(&index)?;
            let searcher = index.searcher().map_err(|e| e.to_string())?;
            let memory = join_memory(&searcher, memory);
            let spinner = progress::spinner("clustering");
            let clusters = match memory {
                Some(memory) => searcher.clusters_within(tau, memory),
                None => searcher.clusters(tau),
            }
            .map_err(|e| e.to_string())?;
            spinner.finish_and_clear();
            let names = Names::of(&searcher, clusters.iter().flat_map(|c| c.members.iter().copied()))?;
            for cluster in clusters {
                out.emit(names.cluster(&cluster.members))?;
            }
        }
        Command::List { index, .. } => {
            let index = open_read_only(&index)?;
            let searcher = index.searcher().map_err(|e| e.to_string())?;
            let ids = searcher.live_ids().map_err(|e| e.to_string())?;
            // Ids ascend in the order documents were added.
            for chunk in ids.chunks(1 << 16) {
                for info in searcher.describe_many(chunk).map_err(|e| e.to_string())?.into_iter().flatten() {
                    let mut line = query::named("key", &info.key, info.metadata.url.as_deref());
                    if let Some(date) = &info.metadata.date {
                        line["date"] = json!(date);
                    }
                    line["fingerprint"] = json!(info.fingerprint.to_string());
                    out.emit(line)?;
                }
            }
        }
        Command::Stats { index, .. } => {
            let index = open_read_only(&index)?;
            let stats = index.stats().map_err(|e| e.to_string())?;
            let config = index.config();
            out.emit(json!({
                "documents": stats.documents,
                "deleted": stats.deleted,
                "pending": stats.pending,
                "segments": stats.segments,
                "bytes_on_disk": stats.bytes_on_disk,
                "signatures": stats.signatures,
                "without_signatures": stats.without_signatures,
                "scheme": scheme_name(&config.scheme),
                "fallback": config.fallback.as_ref().map(scheme_name),
                "similarity": format!("{:?}", config.similarity),
                "minhash": { "permutations": config.minhash.permutations, "bands": config.minhash.bands, "rows": config.minhash.rows },
                "filtered_signatures": config.frequency_filter.len(),
            }))?;
        }
        Command::Explain { index, a, b, .. } => {
            let index = open_read_only(&index)?;
            let searcher = index.searcher().map_err(|e| e.to_string())?;
            let (a, b) = (key_of(&searcher, &a)?, key_of(&searcher, &b)?);
            let e = searcher.explain(&a, &b).map_err(|e| e.to_string())?.ok_or("both keys must be stored")?;
            out.emit(json!({
                "a": a, "b": b,
                "measure": format!("{:?}", e.measure),
                "length_a": e.lengths.0, "length_b": e.lengths.1,
                "shared_signatures": e.shared.len(),
                "intersection": e.overlap.num, "union": e.overlap.den,
                "similarity": e.overlap.value(),
            }))?;
        }
        Command::Verify { index, .. } => {
            let index = open_read_only(&index)?;
            index.verify().map_err(|e| e.to_string())?;
            out.emit(json!({ "verified": true }))?;
        }
        Command::Delete { index, keys, .. } => {
            let index = open(&index)?;
            let mut writer = index.writer().map_err(|e| e.to_string())?;
            let mut deleted = 0;
            for key in &keys {
                deleted += u64::from(writer.delete(key).map_err(|e| e.to_string())?);
            }
            writer.commit().map_err(|e| e.to_string())?;
            out.emit(json!({ "deleted": deleted, "not_found": keys.len() as u64 - deleted }))?;
        }
        Command::Optimize { index, .. } => {
            let index = open(&index)?;
            let spinner = progress::spinner("merging segments");
            index.optimize().map_err(|e| e.to_string())?;
            spinner.finish_and_clear();
            let stats = index.stats().map_err(|e| e.to_string())?;
            out.emit(json!({ "segments": stats.segments, "documents": stats.documents }))?;
        }
        Command::Demo { threshold: t, pages: false, scheme, .. } => {
            demo_corpus(threshold(t)?, config_for(&scheme)?, out)?
        }
        Command::Demo { threshold: t, pages: true, scheme, .. } => {
            let tau = threshold(t)?;
            let config = config_for(&scheme)?;
            let measure = config.similarity;
            let signer = Signer::new(config).map_err(|e| e.to_string())?;
            let signed: Vec<_> = DEMO.iter().map(|(name, body)| sign(&signer, name, body.as_bytes())).collect();
            let docs: Vec<(u64, &neardex::SignatureVector)> =
                signed.iter().enumerate().map(|(i, s)| (i as u64, &s.vector)).collect();
            for pair in oracle::self_join(&docs, measure, tau) {
                out.emit(json!({
                    "a": DEMO[pair.a as usize].0,
                    "b": DEMO[pair.b as usize].0,
                    "similarity": pair.overlap.value(),
                }))?;
            }
        }
        Command::Signatures { path, html, scheme, .. } => {
            let signer = Signer::new(config_for(&scheme)?).map_err(|e| e.to_string())?;
            let bytes = read_input(&path)?;
            let text = if html || is_html_path(&path) {
                neardex::text::html_bytes_to_text(&bytes)
            } else {
                neardex::text::decode_text(&bytes).into_owned()
            };
            for s in signer.explain(&text) {
                out.emit(json!({ "signature": s.text, "hash": format!("{:016x}", s.hash) }))?;
            }
        }
        Command::Compare { a, b, scheme, .. } => {
            let config = config_for(&scheme)?;
            let measure = config.similarity;
            let signer = Signer::new(config).map_err(|e| e.to_string())?;
            let sa = sign(&signer, &a.display().to_string(), &read_input(&a)?);
            let sb = sign(&signer, &b.display().to_string(), &read_input(&b)?);
            let overlap = measure.overlap(&sa.vector, &sb.vector);
            out.emit(json!({
                "similarity": overlap.value(),
                "intersection": overlap.num,
                "union": overlap.den,
                "signatures_a": sa.vector.total(),
                "signatures_b": sb.vector.total(),
                "exact_duplicate": sa.fingerprint == sb.fingerprint,
                "minhash_estimate": sa.minhash.estimate(&sb.minhash),
            }))?;
        }
    }
    Ok(())
}

/// The SpamAssassin sample (see demo/SOURCE.md).
const DEMO_CORPUS: &[u8] = include_bytes!("demo/spamassassin-sample.jsonl.gz");

fn demo_corpus(tau: Threshold, config: SignatureConfig, out: &mut Output<'_>) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| format!("creating a temporary directory: {e}"))?;
    // Written as it is embedded: add reads gzip.
    let jsonl = dir.path().join("spamassassin-sample.jsonl.gz");
    std::fs::write(&jsonl, DEMO_CORPUS).map_err(|e| format!("{}: {e}", jsonl.display()))?;
    let started = std::time::Instant::now();
    let index = Index::create(dir.path().join("index"), config).map_err(|e| e.to_string())?;
    let options = ingest::AddOptions {
        input: ingest::InputOptions {
            format: ingest::Format::Jsonl,
            key_field: Some("id".into()),
            text_field: "text".into(),
            keep_sources: false,
        },
        replace: false,
        skip_similar: None,
        // One load of an archive: straight to a segment.
        bulk: true,
        batch: ingest::BULK_BATCH,
        kept: None,
    };
    let summary = ingest::add(&index, &[jsonl], &options, &mut |_| Ok(()))?;
    let indexed = started.elapsed();
    let searcher = index.searcher().map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    let clusters = searcher.clusters(tau).map_err(|e| e.to_string())?;
    let clustered = started.elapsed();
    let mut in_clusters = 0;
    let names = Names::of(&searcher, clusters.iter().flat_map(|c| c.members.iter().copied()))?;
    for cluster in &clusters {
        in_clusters += cluster.members.len();
        out.emit(names.cluster(&cluster.members))?;
    }
    eprintln!(
        "demo: {} SpamAssassin messages indexed in {:.0} ms; {} clusters of near-duplicates (τ = {tau}) \
         holding {in_clusters} messages, found in {:.0} ms",
        summary.added,
        indexed.as_secs_f64() * 1e3,
        clusters.len(),
        clustered.as_secs_f64() * 1e3
    );
    Ok(())
}

fn scheme_name(scheme: &Scheme) -> String {
    match scheme {
        Scheme::SpotSigs(_) => "spotsigs".into(),
        Scheme::WordShingles { k } => format!("words:{k}"),
        Scheme::CharShingles { k } => format!("chars:{k}"),
        _ => "other".into(),
    }
}

fn config_for(args: &SchemeArgs) -> Result<SignatureConfig, String> {
    let mut config = SignatureConfig::default();
    config.scheme = match args.scheme.split_once(':') {
        None if args.scheme == "spotsigs" => {
            let Scheme::SpotSigs(mut spot) = config.scheme else { unreachable!("the default scheme is SpotSigs") };
            let default = SpotSpec::default();
            spot.specs = vec![SpotSpec {
                antecedents: args.antecedents.clone().unwrap_or(default.antecedents),
                distance: args.spot_distance.unwrap_or(default.distance),
                chain: args.chain.unwrap_or(default.chain),
            }];
            Scheme::SpotSigs(spot)
        }
        _ => shingles(&args.scheme, "scheme", "spotsigs, words:K or chars:K")?,
    };
    if let Some(fallback) = &args.fallback {
        config.fallback = Some(shingles(fallback, "fallback", "words:K or chars:K")?);
    }
    config.similarity = match args.similarity.as_str() {
        "multiset" => Similarity::MultisetJaccard,
        "set" => Similarity::SetJaccard,
        "containment" => Similarity::Containment,
        other => return Err(format!("unknown similarity {other:?} (use multiset, set or containment)")),
    };
    match (args.lsh_threshold, args.lsh_recall) {
        (tau, Some(recall)) => {
            let tau = tau.unwrap_or(MinHashConfig::DEFAULT_LSH_THRESHOLD);
            config.minhash = MinHashConfig::for_recall(tau, recall, MinHashConfig::DEFAULT_LSH_BUDGET)
                .map_err(|e| format!("--lsh-recall: {e}"))?;
        }
        (Some(tau), None) => {
            config.minhash = MinHashConfig::for_threshold(tau, MinHashConfig::DEFAULT_LSH_BUDGET)
                .map_err(|e| format!("--lsh-threshold: {e}"))?;
        }
        (None, None) => {}
    }
    config.validate().map_err(|e| e.to_string())?;
    Ok(config)
}

/// `words:K` or `chars:K` as a scheme; anything else is an unknown `what`
/// (the error names the `choices`).
fn shingles(spec: &str, what: &str, choices: &str) -> Result<Scheme, String> {
    let (kind, k) = spec.split_once(':').unwrap_or((spec, ""));
    let k = || k.parse().map_err(|_| format!("bad shingle size {k:?}"));
    match kind {
        "words" => Ok(Scheme::WordShingles { k: k()? }),
        "chars" => Ok(Scheme::CharShingles { k: k()? }),
        _ => Err(format!("unknown {what} {spec:?} (use {choices})")),
    }
}

fn is_html_path(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"))
}

fn sign(signer: &Signer, name: &str, bytes: &[u8]) -> neardex::DocumentSignature {
    if is_html_path(Path::new(name)) {
        signer.sign_html(bytes)
    } else {
        signer.sign_text(&neardex::text::decode_text(bytes))
    }
}

fn read_input(path: &Path) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    if path.as_os_str() == "-" {
        io::stdin().read_to_end(&mut bytes).map_err(|e| format!("reading standard input: {e}"))?;
    } else {
        bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(bytes)
}
