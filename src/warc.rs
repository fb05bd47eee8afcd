//! A tolerant WARC reader: plain or gzip-per-record files (WARC 1.0, 1.1
//! and the older 0.18 of ClueWeb), one [`WarcRecord`] at a time, with
//! malformed records reported and skipped rather than ending the file.
//!
//! Records are found by their version line (`WARC/x.y` at the start of a
//! line). `Content-Length` is honoured when the bytes after the block are a
//! record boundary; when they are not (real archives get it wrong), the
//! block runs to the next version line and the record carries a warning.

use std::io::Read;

/// One WARC record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarcRecord {
    /// Byte offset of the record in the (decompressed) stream.
    pub offset: u64,
    /// `WARC-Type` (lower-cased).
    pub kind: String,
    /// Header fields in order, names as written.
    pub headers: Vec<(String, String)>,
    /// The record block.
    pub block: Vec<u8>,
}

impl WarcRecord {
    /// The first header with this name (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// A problem with one record; reading goes on after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarcProblem {
    /// Byte offset in the (decompressed) stream.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

/// Decompresses (when the data is gzip) and splits a WARC file into
/// records. A gzip stream that breaks off is reported once and reading
/// stops at the last complete byte.
pub fn read_warc(data: &[u8]) -> (Vec<WarcRecord>, Vec<WarcProblem>) {
    let mut problems = Vec::new();
    let bytes = if data.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        if let Err(e) = flate2::read::MultiGzDecoder::new(data).read_to_end(&mut out) {
            problems.push(WarcProblem {
                offset: out.len() as u64,
                reason: format!("gzip stream broken ({e}); the rest of the file is unreadable"),
            });
        }
        out
    } else {
        data.to_vec()
    };
    let (records, mut more) = split_records(&bytes);
    problems.append(&mut more);
    (records, problems)
}

fn is_version_line_at(bytes: &[u8], at: usize) -> bool {
    (at == 0 || bytes[at - 1] == b'\n')
        && bytes[at..].starts_with(b"WARC/")
        && bytes[at..].iter().take(16).position(|&b| b == b'\n').is_some_and(|nl| {
            let line = &bytes[at + 5..at + nl];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            !line.is_empty() && line.iter().all(|b| b.is_ascii_digit() || *b == b'.')
        })
}

fn next_version_line(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(i) = memchr::memmem::find(&bytes[at..], b"WARC/") {
        let pos = at + i;
        if is_version_line_at(bytes, pos) {
            return Some(pos);
        }
        at = pos + 1;
    }
    None
}

fn split_records(bytes: &[u8]) -> (Vec<WarcRecord>, Vec<WarcProblem>) {
    let mut records = Vec::new();
    let mut problems = Vec::new();
    let mut at = match next_version_line(bytes, 0) {
        Some(0) => 0,
        Some(first) => {
            problems.push(WarcProblem { offset: 0, reason: format!("{first} bytes before the first record skipped") });
            first
        }
        None => {
            if !bytes.is_empty() {
                problems.push(WarcProblem { offset: 0, reason: "no WARC record found".into() });
            }
            return (records, problems);
        }
    };
    while at < bytes.len() {
        let next = next_version_line(bytes, at + 1);
        let end = next.unwrap_or(bytes.len());
        match parse_record(bytes, at, end) {
            Ok((record, consumed_to, warning)) => {
                if let Some(reason) = warning {
                    problems.push(WarcProblem { offset: at as u64, reason });
                }
                records.push(record);
                // A correct Content-Length ends exactly at the next record.
                at = match next {
                    Some(n) if consumed_to <= n => n,
                    Some(_) => next_version_line(bytes, consumed_to).unwrap_or(bytes.len()),
                    None => bytes.len(),
                };
            }
            Err(reason) => {
                problems.push(WarcProblem { offset: at as u64, reason });
                at = end;
            }
        }
    }
    (records, problems)
}

/// Parses the record at `start`; `limit` is where the next version line
/// begins (or the end). Returns the record, where its block ended, and a
/// warning when the declared length had to be corrected.
fn parse_record(bytes: &[u8], start: usize, limit: usize) -> Result<(WarcRecord, usize, Option<String>), String> {
    let region = &bytes[start..limit];
    let header_end = memchr::memmem::find(region, b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| memchr::memmem::find(region, b"\n\n").map(|i| (i, 2)))
        .ok_or("record header never ends (truncated record)")?;
    let head = String::from_utf8_lossy(&region[..header_end.0]);
    let mut lines = head.lines();
    lines.next(); // the version line
    let mut headers = Vec::new();
    for line in lines {
        match line.split_once(':') {
            Some((k, v)) => headers.push((k.trim().to_owned(), v.trim().to_owned())),
            None if line.trim().is_empty() => {}
            None => return Err(format!("malformed header line {line:?}")),
        }
    }
    let find = |name: &str| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
    let kind = find("WARC-Type").ok_or("record has no WARC-Type")?.to_ascii_lowercase();
    let length: usize = find("Content-Length")
        .ok_or("record has no Content-Length")?
        .parse()
        .map_err(|_| "Content-Length is not a number".to_owned())?;
    let block_start = start + header_end.0 + header_end.1;
    let declared_end = block_start.saturating_add(length);
    let (block_end, warning) = if declared_end <= limit {
        (declared_end, None)
    } else if limit == bytes.len() {
        return Err(format!("record truncated: {length} bytes declared, {} present", limit - block_start));
    } else {
        let mut end = limit;
        while end > block_start && matches!(bytes[end - 1], b'\r' | b'\n') {
            end -= 1;
        }
        (end, Some(format!("Content-Length {length} runs past the next record; block cut at it")))
    };
    let record = WarcRecord { offset: start as u64, kind, headers, block: bytes[block_start..block_end].to_vec() };
    Ok((record, block_end, warning))
}

/// The parts of an HTTP response block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status code (0 when the status line is unreadable).
    pub status: u16,
    /// Header fields.
    pub headers: Vec<(String, String)>,
    /// The payload.
    pub payload: Vec<u8>,
}

impl HttpResponse {
    /// The first header with this name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The charset named by `Content-Type`, if any.
    pub fn charset(&self) -> Option<&str> {
        let content_type = self.header("Content-Type")?;
        let at = content_type.to_ascii_lowercase().find("charset=")?;
        Some(content_type[at + 8..].split(';').next().unwrap_or("").trim().trim_matches('"'))
    }
}

/// Splits an HTTP response into status, headers (CRLF or bare LF lines)
/// and payload; a gzip payload (by its magic bytes, whatever the headers
/// say) is decompressed.
pub fn parse_http_response(block: &[u8]) -> Option<HttpResponse> {
    let crlf = memchr::memmem::find(block, b"\r\n\r\n").map(|i| (i, 4));
    let lf = memchr::memmem::find(block, b"\n\n").map(|i| (i, 2));
    let (end, sep) = match (crlf, lf) {
        (Some(a), Some(b)) => {
            if b.0 < a.0 {
                b
            } else {
                a
            }
        }
        (a, b) => a.or(b)?,
    };
    let head = String::from_utf8_lossy(&block[..end]);
    let mut lines = head.lines();
    let status_line = lines.next()?;
    if !status_line.starts_with("HTTP/") {
        return None;
    }
    let status = status_line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers =
        lines.filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))).collect();
    let mut payload = block[end + sep..].to_vec();
    if payload.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        if flate2::read::MultiGzDecoder::new(payload.as_slice()).read_to_end(&mut out).is_ok() {
            payload = out;
        }
    }
    Some(HttpResponse { status, headers, payload })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: &str, body: &str) -> String {
        format!(
            "WARC/1.0\r\nWARC-Type: {kind}\r\nWARC-Record-ID: <urn:x>\r\nContent-Length: {}\r\n\r\n{body}\r\n\r\n",
            body.len()
        )
    }

    #[test]
    fn splits_records_and_tolerates_damage() {
        let good = record("response", "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>hi</p>");
        let mut file = format!("{}{}", record("warcinfo", "software: x"), good);
        file.push_str("WARC/1.0\r\nWARC-Type: response\r\n\r\nno length\r\n\r\n");
        file.push_str(&good);
        file.push_str("WARC/1.0\r\nWARC-Type: resource\r\nContent-Length: 500\r\n\r\ncut short");
        let (records, problems) = read_warc(file.as_bytes());
        let kinds: Vec<&str> = records.iter().map(|r| r.kind.as_str()).collect();
        assert_eq!(kinds, ["warcinfo", "response", "response"]);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].reason.contains("no Content-Length"));
        assert!(problems[1].reason.contains("truncated"));
        let http = parse_http_response(&records[1].block).unwrap();
        assert_eq!((http.status, http.charset(), http.payload.as_slice()), (200, Some("utf-8"), &b"<p>hi</p>"[..]));
    }

    #[test]
    fn garbage_and_broken_gzip_are_reported() {
        let (records, problems) = read_warc(b"\x00\x01 not a warc file at all");
        assert!(records.is_empty() && problems.len() == 1);
        let (records, problems) = read_warc(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3]);
        assert!(records.is_empty());
        assert!(problems[0].reason.contains("gzip"));
    }
}
