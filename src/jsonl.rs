//! JSON Lines input: one JSON object per line, a key field (or, when the
//! key field asked for is empty, the line number) and a text field (and
//! optionally `url`). Lines that are not such an object come
//! back as problems with their line number; nothing panics. Behind the
//! `jsonl` feature (on with `cli`).

/// One document read from a JSON Lines file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonlRecord {
    /// 1-based line number.
    pub line: usize,
    /// The key: the key field, a string or a number; the line number
    /// when the key field asked for is empty (a corpus without ids).
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
    // Reading a slice never fails.
    read_jsonl_from(bytes, key_field, text_field).map_while(Result::ok)
}

/// [`read_jsonl`] from any buffered reader, one line at a time: a file of
/// many gigabytes reads in the memory of its longest line. An error of
/// the reader ends the iteration with that error.
pub fn read_jsonl_from<'a>(
    reader: impl std::io::BufRead + 'a,
    key_field: &'a str,
    text_field: &'a str,
) -> impl Iterator<Item = std::io::Result<Result<JsonlRecord, JsonlProblem>>> + 'a {
    read_jsonl_lines_from(reader, key_field, text_field).map(|item| item.map(|(_, record)| record))
}

/// [`read_jsonl_from`], each record or problem with the bytes of its line
/// as read (without the line break): what a filter writes back out for
/// the records it keeps, whatever other fields they hold.
pub fn read_jsonl_lines_from<'a>(
    mut reader: impl std::io::BufRead + 'a,
    key_field: &'a str,
    text_field: &'a str,
) -> impl Iterator<Item = std::io::Result<(Vec<u8>, Result<JsonlRecord, JsonlProblem>)>> + 'a {
    // A line break is never inside a UTF-8 sequence, so decoding each line
    // is decoding the whole.
    let mut line = 0;
    let mut failed = false;
    // Each line is handed out in a buffer of its own, sized by the line
    // before it: one allocation a line, not a doubling series.
    let mut size_hint = 256;
    std::iter::from_fn(move || loop {
        if failed {
            return None;
        }
        let mut raw = Vec::with_capacity(size_hint);
        match reader.read_until(b'\n', &mut raw) {
            Ok(0) => return None,
            Ok(_) => {}
            // (`read_until` retries interrupted reads itself.)
            Err(e) => {
                failed = true;
                return Some(Err(e));
            }
        }
        line += 1;
        size_hint = raw.len() + 1;
        if raw.last() == Some(&b'\n') {
            raw.pop();
        }
        let body = crate::text::utf8_lossy(&raw);
        let body = body.strip_suffix('\r').unwrap_or(&body);
        if !body.trim().is_empty() {
            let record = parse_line(line, body, key_field, text_field);
            return Some(Ok((raw, record)));
        }
    })
}

fn parse_line(line: usize, body: &str, key_field: &str, text_field: &str) -> Result<JsonlRecord, JsonlProblem> {
    let problem = |reason: String| JsonlProblem { line, reason };
    let value: serde_json::Value = serde_json::from_str(body).map_err(|e| problem(format!("not JSON ({e})")))?;
    let key = match &value[key_field] {
        _ if key_field.is_empty() => line.to_string(),
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
        // Without a key field, each record is keyed by its line.
        let keys: Vec<String> = read_jsonl(data, "", "text").filter_map(Result::ok).map(|r| r.key).collect();
        assert_eq!(keys, ["1", "4", "6"]);
        // With their lines as read.
        let lines: Vec<Vec<u8>> = read_jsonl_lines_from(data, "id", "text").map(|item| item.unwrap().0).collect();
        assert_eq!(lines[0], b"{\"id\": 1, \"text\": \"a\"}\r");
        assert_eq!(lines[2], b"not json\r");
        assert_eq!(lines[3], b"{\"id\": 3, \"text\": \"last\"}");
        // Through a reader whose buffer holds three bytes: lines longer
        // than it read whole.
        let streamed: Vec<_> =
            read_jsonl_from(std::io::BufReader::with_capacity(3, data), "id", "text").map(Result::unwrap).collect();
        assert_eq!(streamed, records);
    }

    #[test]
    fn a_reader_error_ends_the_records_with_it() {
        struct Failing(usize);
        impl std::io::Read for Failing {
            fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
                if self.0 == 0 {
                    return Err(std::io::Error::other("disk gone"));
                }
                self.0 -= 1;
                out[..1].copy_from_slice(if self.0 == 0 { b"\n" } else { b" " });
                Ok(1)
            }
        }
        let items: Vec<_> = read_jsonl_from(std::io::BufReader::new(Failing(3)), "id", "text").collect();
        assert_eq!(items.len(), 1);
        assert!(items[0].as_ref().is_err_and(|e| e.to_string() == "disk gone"));
    }
}
