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
    // One line at a time, so that reading a file never holds a second copy
    // of it (a line break is never inside a UTF-8 sequence, so decoding
    // each line is decoding the whole).
    bytes.split(|&b| b == b'\n').enumerate().filter_map(move |(n, raw)| {
        let body = String::from_utf8_lossy(raw);
        let body = body.strip_suffix('\r').unwrap_or(&body);
        (!body.trim().is_empty()).then(|| parse_line(n + 1, body, key_field, text_field))
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_numbered_decoded_and_split_as_text_lines_would_be() {
        let data: &[u8] = b"{\"id\": 1, \"text\": \"a\"}\r\n\n   \n{\"id\": \"b\", \"text\": \"caf\xc3\xa9 \xff end\"}\nnot json\r\n{\"id\": 3, \"text\": \"last\"}";
        let records: Vec<_> = read_jsonl(data, "id", "text").collect();
        let lines: Vec<usize> = records.iter().map(|r| r.as_ref().map_or_else(|p| p.line, |r| r.line)).collect();
        assert_eq!(lines, vec![1, 4, 5, 6]);
        let texts: Vec<&str> = records.iter().filter_map(|r| r.as_ref().ok()).map(|r| r.text.as_str()).collect();
        assert_eq!(texts, vec!["a", "café \u{FFFD} end", "last"]);
        assert!(records[2].as_ref().is_err_and(|p| p.reason.starts_with("not JSON")));
        // The same records as decoding the whole text and splitting it.
        let whole = String::from_utf8_lossy(data);
        let reference: Vec<_> = whole
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(n, l)| parse_line(n + 1, l, "id", "text"))
            .collect();
        assert_eq!(format!("{records:?}"), format!("{reference:?}"));
    }
}
