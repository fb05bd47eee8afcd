//! JSON Lines input: one JSON object per line, a key field and a text
//! field (and optionally `url`). Lines that are not such an object come
//! back as problems with their line number; nothing panics. Behind the
//! `jsonl` feature (on with `cli`).

/// One document read from a JSON Lines file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonlRecord {
    /// 1-based line number.
    pub line: usize,
    /// The key: the key field, a string or a number.
    pub key: String,
    /// The text field.
    pub text: String,
    /// The `url` field, when it is a string.
    pub url: Option<String>,
}

/// A line that holds no document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonlProblem {
    /// 1-based line number.
    pub line: usize,
    /// Why it was skipped.
    pub reason: String,
}

/// The records of `bytes` (invalid UTF-8 is replaced), in line order, each
/// a record or a problem. Blank lines are skipped silently.
pub fn read_jsonl<'a>(
    bytes: &'a [u8],
    key_field: &'a str,
    text_field: &'a str,
) -> impl Iterator<Item = Result<JsonlRecord, JsonlProblem>> + 'a {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<(usize, String)> =
        text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).map(|(n, l)| (n + 1, l.to_owned())).collect();
    lines.into_iter().map(move |(line, body)| parse_line(line, &body, key_field, text_field))
}

fn parse_line(line: usize, body: &str, key_field: &str, text_field: &str) -> Result<JsonlRecord, JsonlProblem> {
    let problem = |reason: String| JsonlProblem { line, reason };
    let value: serde_json::Value = serde_json::from_str(body).map_err(|e| problem(format!("not JSON ({e})")))?;
    let key = match &value[key_field] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(x) => x.to_string(),
        _ => return Err(problem(format!("no {key_field:?} field to use as key"))),
    };
    let text = value[text_field].as_str().ok_or_else(|| problem(format!("no {text_field:?} text field")))?;
    Ok(JsonlRecord { line, key, text: text.to_owned(), url: value["url"].as_str().map(str::to_owned) })
}
