//! `neardex query`: one line per query document, read from files,
//! directories, standard input, WARC records or JSON lines, signed on every
//! core while this thread queries (`ingest::Pipeline`).

use neardex::store::Searcher;
use neardex::{DocumentSignature, Threshold};
use serde_json::json;

/// How each document is queried.
#[derive(Clone, Copy)]
pub struct How {
    pub tau: Threshold,
    /// The LSH band tables instead of the exact query.
    pub lsh: bool,
    /// Only the K most similar.
    pub top: Option<usize>,
    /// Leave out a stored document under the query document's own key.
    pub exclude_self: bool,
}

/// The matches of `signature` as `{"key", "url", "similarity"}` objects
/// (`url` when the stored document has one), the most similar first when
/// `how.top` cuts them; `own_key` (a stored document queried with itself)
/// is left out, and does not count against `how.top`.
pub fn matches(
    searcher: &Searcher,
    signature: &DocumentSignature,
    how: How,
    own_key: Option<&str>,
) -> Result<Vec<serde_json::Value>, String> {
    let top = how.top.map(|k| k + usize::from(own_key.is_some()));
    let mut matches = match (how.lsh, top) {
        (true, _) => searcher.query_lsh(signature, how.tau),
        (false, Some(k)) => searcher.top_k(&signature.vector, k, how.tau),
        (false, None) => searcher.query(&signature.vector, how.tau),
    }
    .map_err(|e| e.to_string())?;
    if how.lsh {
        if let Some(k) = top {
            matches.sort_by(|a, b| b.overlap.value().total_cmp(&a.overlap.value()).then(a.id.cmp(&b.id)));
            matches.truncate(k);
        }
    }
    let mut list = Vec::with_capacity(matches.len());
    for m in matches {
        if how.top.is_some_and(|k| list.len() == k) {
            break; // own_key was not among the K + 1
        }
        let (key, url) = match searcher.describe(m.id).map_err(|e| e.to_string())? {
            Some(doc) => (doc.key, doc.metadata.url),
            None => Default::default(),
        };
        if own_key == Some(key.as_str()) {
            continue; // a stored document is not its own near-duplicate
        }
        list.push(similar(&key, url.as_deref(), m.overlap.value()));
    }
    Ok(list)
}

/// A match: `{"key", "url", "similarity"}`, without `url` when there is
/// none.
pub fn similar(key: &str, url: Option<&str>, similarity: f64) -> serde_json::Value {
    let mut value = named("key", key, url);
    value["similarity"] = json!(similarity);
    value
}

/// `{field: key, "url": url}`, without `url` when there is none.
pub fn named(field: &str, key: &str, url: Option<&str>) -> serde_json::Value {
    let mut value = json!({ field: key });
    if let Some(url) = url {
        value["url"] = json!(url);
    }
    value
}

/// Documents a sink queries at once, on every core.
const QUERY_BATCH: usize = 256;

/// Queries the index with each document of the inputs and emits
/// `{"query": key, "url": ..., "matches": [...]}` (`url` when the record
/// names one) in input order; reports what is not a document on standard
/// error. Documents are queried [`QUERY_BATCH`] at a time on every core
/// (beside the next turn's signing).
pub struct Queries<'s, E> {
    searcher: &'s Searcher,
    how: How,
    emit: E,
    /// Documents queried.
    pub queried: u64,
    /// Inputs that were not documents.
    pub skipped: u64,
    /// Documents queried without signatures, inputs not pages.
    pub unsigned: crate::ingest::Unsigned,
    /// Documents not queried yet: key, url, signature.
    held: Vec<(String, Option<String>, DocumentSignature)>,
}

impl<'s, E: FnMut(serde_json::Value) -> Result<(), String>> Queries<'s, E> {
    pub fn new(searcher: &'s Searcher, how: How, emit: E) -> Self {
        Queries { searcher, how, emit, queried: 0, skipped: 0, unsigned: Default::default(), held: Vec::new() }
    }

    /// Queries the held documents and emits their lines in order.
    fn flush(&mut self) -> Result<(), String> {
        use rayon::prelude::*;
        let (searcher, how) = (self.searcher, self.how);
        let lines: Vec<Result<serde_json::Value, String>> = self
            .held
            .par_iter()
            .map(|(key, url, signature)| {
                let list = matches(searcher, signature, how, how.exclude_self.then_some(key.as_str()))?;
                let mut line = named("query", key, url.as_deref());
                line["matches"] = json!(list);
                Ok(line)
            })
            .collect();
        self.queried += self.held.len() as u64;
        self.held.clear();
        lines.into_iter().try_for_each(|line| (self.emit)(line?))
    }
}

impl<E: FnMut(serde_json::Value) -> Result<(), String>> crate::ingest::Sink for Queries<'_, E> {
    fn document(&mut self, document: crate::ingest::Signed) -> Result<(), String> {
        let crate::ingest::Signed { key, signature, metadata, .. } = document;
        self.unsigned.without_signatures += u64::from(signature.vector.is_empty());
        self.held.push((key, metadata.url, signature));
        if self.held.len() >= QUERY_BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn skipped(&mut self, reason: String) {
        self.skipped += 1;
        crate::ingest::tell_skipped(&reason);
    }

    fn not_a_page(&mut self, reason: String) {
        self.unsigned.not_a_page(reason);
    }

    fn stored(&self, key: &str) -> Result<Option<DocumentSignature>, String> {
        crate::ingest::stored_signature(self.searcher, key)
    }

    fn finish(&mut self) -> Result<(), String> {
        self.flush()
    }
}
