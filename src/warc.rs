//! A tolerant WARC reader: plain or gzip-per-record files (WARC 1.0, 1.1
//! and the older 0.18 of ClueWeb), one [`WarcRecord`] at a time, with
//! malformed records reported and skipped rather than ending the file.
//!
//! Records are found by their version line (`WARC/x.y` at the start of a
//! line). `Content-Length` is honoured when the bytes after the block are a
//! record boundary, also when the block holds lines that read as version
//! lines (a page that quotes WARC records); when they are not (real
//! archives get it wrong), the block runs to the next version line and the
//! record carries a warning.

use std::io::Read;

/// One WARC record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarcRecord {
    /// Byte offset of the record in the (decompressed) stream.
    pub offset: u64,
    /// The version line, `WARC/1.1`, `WARC/1.0` or `WARC/0.18`.
    pub version: String,
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

    /// The record as a WARC file holds it: its version line, its header
    /// fields in order (`Content-Length` set to the block's length, which
    /// a record whose declared length was wrong did not have), a blank
    /// line, the block, and the two line ends that end a record. Read
    /// back, it is this record again.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut head = format!("{}\r\n", self.version);
        for (name, value) in &self.headers {
            if name.eq_ignore_ascii_case("Content-Length") {
                head.push_str(&format!("{name}: {}\r\n", self.block.len()));
            } else {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
        }
        head.push_str("\r\n");
        [head.as_bytes(), &self.block, b"\r\n\r\n"].concat()
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
/// records: [`WarcReader`] over bytes in memory, its records and problems
/// collected. A gzip stream that breaks off is reported once and reading
/// stops at the last complete byte.
pub fn read_warc(data: &[u8]) -> (Vec<WarcRecord>, Vec<WarcProblem>) {
    let (mut records, mut problems) = (Vec::new(), Vec::new());
    // Reading a slice fails only as gzip data, which comes back as a problem.
    for item in WarcReader::new(data).map_while(Result::ok) {
        match item {
            WarcItem::Record(record) => records.push(record),
            WarcItem::Problem(problem) => problems.push(problem),
        }
    }
    (records, problems)
}

/// What a [`WarcReader`] yields, in stream order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WarcItem {
    /// A record.
    Record(WarcRecord),
    /// A problem; reading goes on after it (after a broken gzip stream,
    /// with what was decompressed before the break).
    Problem(WarcProblem),
}

/// Reads a WARC file (plain, or gzip: one stream or a stream per record)
/// one record at a time from any reader, holding only the record being
/// read: an archive of many gigabytes reads in the memory of its largest
/// record. Records and problems come back in stream order, exactly those
/// [`read_warc`] returns for the same bytes.
///
/// A record runs from its version line to the next one (or the end);
/// errors of the underlying reader end the iteration with that error
/// (damaged gzip data is a problem instead).
pub struct WarcReader<'r> {
    input: Box<dyn Read + 'r>,
    /// The stream from offset `base` on, as far as it has been read, is
    /// `buf[start..]`: consumed bytes are dropped once a read, not once a
    /// record. Positions below are in it.
    buf: Vec<u8>,
    start: usize,
    base: u64,
    /// No version line starts in `[..scanned]` (the record's own at 0
    /// aside).
    scanned: usize,
    /// Whether `buf` starts at a version line (else the first is sought).
    started: bool,
    /// Whether the gzip magic was checked (on the first bytes).
    sniffed: bool,
    eof: bool,
    /// A gzip break, reported after everything read before it.
    broken: Option<WarcProblem>,
    /// A record whose warning was returned first.
    queued: Option<WarcItem>,
    /// The input failed: the iteration has ended.
    failed: bool,
}

impl<'r> WarcReader<'r> {
    /// A reader of `input`; gzip is recognised by its first two bytes.
    pub fn new(input: impl Read + 'r) -> WarcReader<'r> {
        WarcReader {
            input: Box::new(input),
            buf: Vec::new(),
            start: 0,
            base: 0,
            scanned: 0,
            started: false,
            sniffed: false,
            eof: false,
            broken: None,
            queued: None,
            failed: false,
        }
    }

    /// Reads more of the stream into `buf` (at least as much again as it
    /// holds, so a long record is read in a few large reads), or sets
    /// `eof`. A gzip data error ends the stream and is kept for report.
    fn fill(&mut self) -> std::io::Result<()> {
        if !self.sniffed {
            let mut first = Vec::with_capacity(2);
            (&mut self.input).take(2).read_to_end(&mut first)?;
            self.sniffed = true;
            let rest = std::mem::replace(&mut self.input, Box::new(std::io::empty()));
            self.input = if starts_as("gzip", &first) {
                Box::new(flate2::read::MultiGzDecoder::new(std::io::Cursor::new(first).chain(rest)))
            } else {
                Box::new(std::io::Cursor::new(first).chain(rest))
            };
        }
        self.buf.drain(..self.start);
        self.start = 0;
        let len = self.buf.len();
        self.buf.resize(len + len.max(64 << 10), 0);
        let read = loop {
            match self.input.read(&mut self.buf[len..]) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        self.buf.truncate(len + *read.as_ref().unwrap_or(&0));
        match read {
            Ok(0) => self.eof = true,
            Ok(_) => {}
            // Damaged or cut gzip data (a plain stream never reports these
            // kinds of its own; the decoder does).
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::InvalidInput
                        | std::io::ErrorKind::InvalidData
                        | std::io::ErrorKind::UnexpectedEof
                ) =>
            {
                self.eof = true;
                self.broken = Some(WarcProblem {
                    offset: self.base + len as u64,
                    reason: format!("gzip stream broken ({e}); the rest of the file is unreadable"),
                });
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// The first version line at or after `from` in `buf`: `Ok(None)` when
    /// there is none and the stream has ended; `Err(())` when more of the
    /// stream is needed to tell. Positions before `scanned` are not
    /// searched again.
    fn version_line(&mut self, from: usize) -> Result<Option<usize>, ()> {
        let buf = &self.buf[self.start..];
        let mut at = from.max(self.scanned.min(buf.len()));
        // Position 0 of the buffer is sought only at the stream's start
        // (offset 0, where a line starts); later searches start at 1.
        while let Some(i) = memchr::memmem::find(&buf[at..], b"WARC/") {
            let pos = at + i;
            let line_start = if pos == 0 { self.base == 0 } else { buf[pos - 1] == b'\n' };
            if line_start {
                match version_line_ends(&buf[pos..]) {
                    Some(true) => return Ok(Some(pos)),
                    Some(false) => {}
                    None if self.eof => {}
                    None => {
                        self.scanned = pos;
                        return Err(());
                    }
                }
            }
            at = pos + 1;
        }
        if self.eof {
            return Ok(None);
        }
        // A version line may begin in the last bytes and end in the next read.
        self.scanned = buf.len().saturating_sub(16).max(from);
        Err(())
    }

    /// The bytes read and not yet consumed.
    fn data(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Consumes the first `n` bytes of the data.
    fn consume(&mut self, n: usize) {
        self.start += n;
        self.base += n as u64;
        self.scanned = self.scanned.saturating_sub(n);
    }

    fn next_item(&mut self) -> std::io::Result<Option<WarcItem>> {
        loop {
            if let Some(item) = self.queued.take() {
                return Ok(Some(item));
            }
            if !self.started {
                match self.version_line(0) {
                    Err(()) => {
                        // Bytes before the first record need not be held:
                        // keep from the last one checked (the byte before
                        // the search goes on) and read on.
                        self.consume(self.scanned.saturating_sub(1));
                        self.fill()?;
                    }
                    Ok(first) => {
                        self.started = true;
                        let first = first.unwrap_or(self.data().len());
                        let skipped = self.base + first as u64;
                        let found = first < self.data().len();
                        self.consume(first);
                        if skipped > 0 {
                            let reason = if found {
                                format!("{skipped} bytes before the first record skipped")
                            } else {
                                "no WARC record found".to_owned()
                            };
                            return Ok(Some(WarcItem::Problem(WarcProblem { offset: 0, reason })));
                        }
                    }
                }
                continue;
            }
            if self.data().is_empty() {
                if self.eof {
                    return Ok(self.broken.take().map(WarcItem::Problem));
                }
                self.fill()?;
                continue;
            }
            let Ok(next) = self.version_line(1) else {
                self.fill()?;
                continue;
            };
            let Some((end, resume)) = record_span(self.data(), 0, next, self.eof) else {
                self.fill()?;
                continue;
            };
            let at = self.base;
            let item = match parse_record(self.data(), 0, end) {
                Ok((mut record, _, warning)) => {
                    record.offset = at;
                    match warning {
                        // The warning first, then its record.
                        Some(reason) => {
                            self.queued = Some(WarcItem::Record(record));
                            WarcItem::Problem(WarcProblem { offset: at, reason })
                        }
                        None => WarcItem::Record(record),
                    }
                }
                Err(reason) => WarcItem::Problem(WarcProblem { offset: at, reason }),
            };
            self.consume(resume);
            return Ok(Some(item));
        }
    }
}

impl Iterator for WarcReader<'_> {
    type Item = std::io::Result<WarcItem>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = self.next_item();
        self.failed = item.is_err();
        item.transpose()
    }
}

/// Whether the bytes at a `WARC/` are a version line (`WARC/` and digits
/// and dots, ended by a line break within 16 bytes); `None` when they end
/// before that can be told.
fn version_line_ends(bytes: &[u8]) -> Option<bool> {
    match bytes.iter().take(16).position(|&b| b == b'\n') {
        Some(nl) => {
            let line = &bytes[5..nl];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            Some(!line.is_empty() && line.iter().all(|b| b.is_ascii_digit() || *b == b'.'))
        }
        None if bytes.len() >= 16 => Some(false),
        None => None,
    }
}

/// How far past the next version line a declared length is followed to
/// see whether a record boundary is there.
const LOOKAHEAD: usize = 64 << 20;

/// Where the record at `start` ends and where the next one begins, given
/// the first version line after its own (`next`): normally both at that
/// line. A block may hold a line that reads as a version line (a page
/// that quotes WARC records: the WARC specification, archived), so a
/// declared length that runs past `next`, by at most [`LOOKAHEAD`], ends
/// the record when a record boundary follows it (line ends, then a
/// version line or the end of the stream). `None` when more of the stream
/// is needed to tell.
fn record_span(bytes: &[u8], start: usize, next: Option<usize>, eof: bool) -> Option<(usize, usize)> {
    let Some(next) = next else { return Some((bytes.len(), bytes.len())) };
    let declared = split_head(&bytes[start..next]).and_then(|(head, block_start)| {
        let length = head.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.trim().eq_ignore_ascii_case("Content-Length").then(|| value.trim().parse::<usize>().ok())?
        })?;
        (start + block_start).checked_add(length)
    });
    let Some(end) = declared.filter(|&end| end > next && end - next <= LOOKAHEAD) else {
        return Some((next, next));
    };
    if end > bytes.len() {
        return if eof { Some((next, next)) } else { None };
    }
    let resume = end + bytes[end..].iter().take_while(|b| matches!(b, b'\r' | b'\n')).count();
    let after = &bytes[resume..];
    let boundary = if after.is_empty() {
        Some(true)
    } else if bytes[resume - 1] != b'\n' {
        Some(false)
    } else if after.starts_with(b"WARC/") {
        version_line_ends(after)
    } else if b"WARC/".starts_with(after) {
        None
    } else {
        Some(false)
    };
    match boundary {
        Some(true) if resume < bytes.len() || eof => Some((end, resume)),
        Some(true) | None if !eof => None,
        _ => Some((next, next)),
    }
}

/// A record's header as text (without the blank line that ends it) and
/// where its block starts in `region`; `None` when the header never ends.
fn split_head(region: &[u8]) -> Option<(std::borrow::Cow<'_, str>, usize)> {
    // The first blank line, CRLF or bare LF: a header of bare LF lines
    // ends before a CRLF blank line in its block.
    let (end, blank) = match memchr::memmem::find(region, b"\n\n") {
        Some(lf) => match memchr::memmem::find(&region[..=lf], b"\r\n\r\n") {
            Some(crlf) => (crlf, 4),
            None if lf > 0 && region[lf - 1] == b'\r' => (lf - 1, 3),
            None => (lf, 2),
        },
        None => memchr::memmem::find(region, b"\r\n\r\n").map(|i| (i, 4))?,
    };
    Some((String::from_utf8_lossy(&region[..end]), end + blank))
}

/// Parses the record at `start`; `limit` is where the next version line
/// begins (or the end). Returns the record, where its block ended, and a
/// warning when the declared length had to be corrected.
fn parse_record(bytes: &[u8], start: usize, limit: usize) -> Result<(WarcRecord, usize, Option<String>), String> {
    let (head, block_offset) = split_head(&bytes[start..limit]).ok_or("record header never ends (truncated record)")?;
    let mut lines = head.lines();
    let version = lines.next().unwrap_or("").trim_end().to_owned();
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
    let block_start = start + block_offset;
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
    let block = bytes[block_start..block_end].to_vec();
    let record = WarcRecord { offset: start as u64, version, kind, headers, block };
    Ok((record, block_end, warning))
}

/// The parts of an HTTP response block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status code (0 when the status line is unreadable).
    pub status: u16,
    /// Header fields.
    pub headers: Vec<(String, String)>,
    /// The payload, decoded as [`parse_http_response`] says; as recorded
    /// when `undecoded` holds why it could not be.
    pub payload: Vec<u8>,
    /// Why the payload could not be decoded: a `Content-Encoding` neardex
    /// does not know (`compress`, `exi`), one that decodes to more than
    /// [`MAX_DECODED_PAYLOAD`] bytes, or a gzip or zstd stream that breaks
    /// off before it gives anything.
    pub undecoded: Option<String>,
}

/// The most bytes a compressed payload is decoded to: a page is far
/// smaller, and a decompression bomb stops here.
pub const MAX_DECODED_PAYLOAD: usize = 64 << 20;

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

    /// Why this response is not a page to sign, or `None` when it is one:
    /// a status other than 2xx (`"HTTP 404"`: redirects and error pages,
    /// whose bodies are a server's boilerplate), a payload that could not
    /// be decoded ([`HttpResponse::undecoded`]), or a media type that is
    /// not a page's (its [`media_type`], see [`is_page_type`]). A status
    /// line without a readable code (status 0) is taken as a page.
    pub fn why_not_a_page(&self) -> Option<String> {
        if self.status != 0 && !(200..300).contains(&self.status) {
            return Some(format!("HTTP {}", self.status));
        }
        if let Some(reason) = &self.undecoded {
            return Some(reason.clone());
        }
        let content_type = self.header("Content-Type");
        (!is_page_type(content_type)).then(|| media_type(content_type))
    }
}

/// Whether a payload of this `Content-Type` is a page to sign: HTML, XHTML
/// or plain text, or no type given. Images, PDFs, scripts, style sheets,
/// feeds and other data are not (signed as text they would give noise, or
/// under a shingle fallback near-duplicates of each other).
pub fn is_page_type(content_type: Option<&str>) -> bool {
    matches!(media_type(content_type).as_str(), "" | "text/html" | "application/xhtml+xml" | "text/plain")
}

/// The media type of a `Content-Type` (lower case, without parameters;
/// empty when there is none).
pub fn media_type(content_type: Option<&str>) -> String {
    content_type.and_then(|t| t.split(';').next()).unwrap_or("").trim().to_ascii_lowercase()
}

/// Splits an HTTP response into status, headers (CRLF or bare LF lines)
/// and payload, and decodes the payload as WARC writers record it: what
/// the server sent, byte for byte (wget, Heritrix, browser-based
/// crawlers), or already decoded with the headers renamed (Common
/// Crawl's `X-Crawler-Transfer-Encoding`).
///
/// - `Transfer-Encoding: chunked`: the chunks are joined; a body that does
///   not start with a chunk-size line is taken as already joined, and one
///   cut short keeps the chunks it has. Other transfer codings (`gzip,
///   chunked`) are undone after the chunks are joined, as content codings
///   are.
/// - `Content-Encoding`: `gzip`, `x-gzip`, `deflate` (zlib or raw), `br`
///   and `zstd` are decoded, in the reverse of the order listed; `identity` is
///   nothing to decode. Bytes that fail to decode and read as UTF-8 are
///   taken as already decoded; a stream cut short keeps what it decoded.
///   Another coding on bytes that are not UTF-8, or more than
///   [`MAX_DECODED_PAYLOAD`] bytes decoded, leaves the payload as recorded
///   with [`HttpResponse::undecoded`] saying why.
/// - No `Content-Encoding` and gzip's or zstd's magic bytes: decoded as
///   such when it decodes (servers and archives that drop the header).
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
    let mut response = HttpResponse { status, headers, payload: Vec::new(), undecoded: None };
    let body = &block[end + sep..];
    // Content codings are applied first, transfer codings (chunked last)
    // after them: undone in the reverse order.
    let listed = |name: &str| response.header(name).map(|field| codings(field).collect::<Vec<_>>());
    let (content, transfer) = (listed("Content-Encoding"), listed("Transfer-Encoding"));
    let mut payload = std::borrow::Cow::Borrowed(body);
    for coding in content.iter().flatten().chain(transfer.iter().flatten()).rev() {
        let undone = if coding == "chunked" { Ok(dechunk(&payload)) } else { decode(coding, &payload) };
        match undone {
            Ok(Some(decoded)) => payload = decoded.into(),
            Ok(None) => {}
            Err(reason) => {
                response.undecoded = Some(reason);
                break;
            }
        }
    }
    if content.is_none() {
        let sniffed = ["gzip", "zstd"].into_iter().find(|&coding| starts_as(coding, &payload));
        if let Some(Ok(Some(decoded))) = sniffed.map(|coding| decode(coding, &payload)) {
            payload = decoded.into();
        }
    }
    response.payload = payload.into_owned();
    Some(response)
}

/// The codings a `Transfer-Encoding` or `Content-Encoding` lists, lower
/// case, in order.
fn codings(field: &str) -> impl Iterator<Item = String> + '_ {
    field.split(',').map(|c| c.trim().to_ascii_lowercase()).filter(|c| !c.is_empty())
}

/// The chunks of a chunked body joined; `None` when the body does not
/// start with a chunk (a size line, then that many bytes and a line end):
/// a body already joined. Chunk extensions and trailers are dropped; a
/// body cut short, or one whose chunks stop making sense, ends with the
/// chunks before.
fn dechunk(body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(body.len());
    let mut rest = body;
    let mut chunks = 0;
    while let Some(line_end) = memchr::memchr(b'\n', rest) {
        let line = std::str::from_utf8(&rest[..line_end]).ok();
        let digits = line.map(|l| l.split(';').next().unwrap_or("").trim());
        let Some(size) = digits
            .filter(|d| !d.is_empty() && d.len() <= 16)
            .and_then(|d| u64::from_str_radix(d, 16).ok())
            .map(|size| usize::try_from(size).unwrap_or(usize::MAX))
        else {
            break;
        };
        let data = &rest[line_end + 1..];
        if size == 0 {
            chunks += 1;
            break;
        }
        let take = data.len().min(size);
        let after = &data[take..];
        let after = after.strip_prefix(b"\r").unwrap_or(after);
        let line_ends = after.is_empty() || after[0] == b'\n';
        if !line_ends {
            break;
        }
        out.extend_from_slice(&data[..take]);
        chunks += 1;
        rest = after.get(1..).unwrap_or_default();
    }
    (chunks > 0).then_some(out)
}

/// One content coding undone: `Ok(None)` when there is nothing to undo
/// (`identity`; bytes not in that coding, which a writer that decoded
/// them and kept the header leaves: they fail to decode and read as
/// UTF-8; a coding neardex does not know on bytes that read as UTF-8); the
/// decoded bytes, as far as they go, when they are; `Err` for a coding
/// neardex does not know on other bytes, a gzip or zstd stream (its magic
/// bytes first) that breaks off before it gives a byte, or more than
/// [`MAX_DECODED_PAYLOAD`] bytes decoded.
fn decode(coding: &str, bytes: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let (out, read) = match coding {
        "identity" => return Ok(None),
        "gzip" | "x-gzip" => read_capped(flate2::read::MultiGzDecoder::new(bytes)),
        // The standard says zlib; some servers send raw deflate.
        "deflate" => match read_capped(flate2::read::ZlibDecoder::new(bytes)) {
            (out, Err(_)) if out.is_empty() => read_capped(flate2::read::DeflateDecoder::new(bytes)),
            zlib => zlib,
        },
        "br" => read_capped(brotli_decompressor::Decompressor::new(bytes, 4096)),
        // Every frame; windows up to libzstd's default limit (128 MiB; RFC
        // 9659 holds HTTP senders to 8 MiB).
        "zstd" => match zstd::stream::read::Decoder::with_buffer(bytes) {
            Ok(decoder) => read_capped(decoder),
            Err(e) => (Vec::new(), Err(e)),
        },
        // Servers send nonsense here too (`utf-8`, `none`): text is kept.
        _ if reads_as_utf8(bytes) => return Ok(None),
        other => return Err(format!("content-encoding {other}")),
    };
    if out.len() > MAX_DECODED_PAYLOAD {
        return Err(format!("{coding} payload over {} MiB decoded", MAX_DECODED_PAYLOAD >> 20));
    }
    // A stream with its coding's magic bytes that gives nothing (cut or
    // damaged inside its first block: zstd's are 128 KiB) is no page.
    if read.is_err() && out.is_empty() && starts_as(coding, bytes) {
        return Err(format!("{coding} payload broken"));
    }
    // A stream that breaks off (a truncated record) keeps what it gave.
    let decoded = read.is_ok() || !(out.is_empty() || reads_as_utf8(bytes));
    Ok(decoded.then_some(out))
}

/// Whether `bytes` start with the magic bytes of a `gzip` (`x-gzip`) or
/// `zstd` stream; false for other codings, which have none.
pub fn starts_as(coding: &str, bytes: &[u8]) -> bool {
    let magic: &[u8] = match coding {
        "gzip" | "x-gzip" => &[0x1f, 0x8b],
        "zstd" => &[0x28, 0xb5, 0x2f, 0xfd],
        _ => return false,
    };
    bytes.starts_with(magic)
}

/// What `reader` decodes, up to one byte past [`MAX_DECODED_PAYLOAD`], and
/// whether it ended without an error.
fn read_capped(reader: impl Read) -> (Vec<u8>, std::io::Result<usize>) {
    let mut out = Vec::new();
    let read = reader.take(MAX_DECODED_PAYLOAD as u64 + 1).read_to_end(&mut out);
    (out, read)
}

/// Whether the first 4 KiB of `bytes` are UTF-8 (a sequence cut at the
/// end allowed): text, not compressed bytes.
fn reads_as_utf8(bytes: &[u8]) -> bool {
    match std::str::from_utf8(&bytes[..bytes.len().min(4096)]) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_html_xhtml_plain_text_or_untyped() {
        for page in [None, Some("text/html"), Some("TEXT/HTML; charset=utf-8"), Some(" application/xhtml+xml ")] {
            assert!(is_page_type(page), "{page:?}");
        }
        assert!(is_page_type(Some("text/plain;charset=us-ascii")));
        for other in ["image/jpeg", "application/pdf", "text/css", "application/javascript", "application/rss+xml"] {
            assert!(!is_page_type(Some(other)), "{other}");
        }
        assert_eq!(media_type(Some("Image/PNG; q=1")), "image/png");
    }

    fn record(kind: &str, body: &str) -> String {
        format!(
            "WARC/1.0\r\nWARC-Type: {kind}\r\nWARC-Record-ID: <urn:x>\r\nContent-Length: {}\r\n\r\n{body}\r\n\r\n",
            body.len()
        )
    }

    use proptest::prelude::*;

    /// The whole-buffer splitter [`WarcReader`] replaced: the reference
    /// its records and problems are checked against.
    mod whole {
        use super::super::{parse_record, record_span, WarcProblem, WarcRecord};

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

        pub fn split_records(bytes: &[u8]) -> (Vec<WarcRecord>, Vec<WarcProblem>) {
            let mut records = Vec::new();
            let mut problems = Vec::new();
            let mut at = match next_version_line(bytes, 0) {
                Some(0) => 0,
                Some(first) => {
                    problems.push(WarcProblem {
                        offset: 0,
                        reason: format!("{first} bytes before the first record skipped"),
                    });
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
                let (end, resume) = record_span(bytes, at, next, true).unwrap();
                match parse_record(bytes, at, end) {
                    Ok((record, _, warning)) => {
                        if let Some(reason) = warning {
                            problems.push(WarcProblem { offset: at as u64, reason });
                        }
                        records.push(record);
                    }
                    Err(reason) => problems.push(WarcProblem { offset: at as u64, reason }),
                }
                at = resume;
            }
            (records, problems)
        }
    }

    /// A reader that hands out at most `sizes[i]` bytes on its i-th read
    /// (cycling): the record boundaries fall anywhere in its reads.
    struct Trickle<'a> {
        data: &'a [u8],
        sizes: Vec<usize>,
        n: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let size = self.sizes[self.n % self.sizes.len()].min(out.len()).min(self.data.len());
            self.n += 1;
            out[..size].copy_from_slice(&self.data[..size]);
            self.data = &self.data[size..];
            Ok(size)
        }
    }

    fn streamed(data: &[u8], sizes: Vec<usize>) -> Vec<WarcItem> {
        WarcReader::new(Trickle { data, sizes, n: 0 }).collect::<std::io::Result<_>>().unwrap()
    }

    fn split(items: &[WarcItem]) -> (Vec<WarcRecord>, Vec<WarcProblem>) {
        let (mut records, mut problems) = (Vec::new(), Vec::new());
        for item in items {
            match item {
                WarcItem::Record(r) => records.push(r.clone()),
                WarcItem::Problem(p) => problems.push(p.clone()),
            }
        }
        (records, problems)
    }

    /// Pieces of WARC-like files: good records, damaged ones, version lines
    /// inside blocks and in odd places, junk.
    fn arb_piece() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z <>]{0,40}".prop_map(|body| record("response", &body)),
            "[a-z]{0,10}".prop_map(|body| record("revisit", &body)),
            // A block that quotes a record: a version line inside it.
            ("[a-z]{0,10}", 0usize..3).prop_map(|(b, n)| record(
                "resource",
                &format!("{b}\nWARC/1.0\r\nWARC-Type: quoted\r\n{}", "\n".repeat(n))
            )),
            "[a-z ]{0,30}"
                .prop_map(|b| format!("WARC/1.0\nWARC-Type: resource\nContent-Length: {}\n\n{b}\n\n", b.len())),
            (0usize..60, "[a-z]{0,20}")
                .prop_map(|(n, b)| format!("WARC/1.1\r\nWARC-Type: metadata\r\nContent-Length: {n}\r\n\r\n{b}")),
            Just("WARC/1.0\r\nWARC-Type: response\r\n\r\nno length\r\n\r\n".to_owned()),
            Just("WARC/0.18\nbroken header line\n\n".to_owned()),
            Just("\nWARC/1.0".to_owned()),
            Just("WARC/1.0\n".to_owned()),
            Just("WARC/".to_owned()),
            Just("WARC/12345678901234567890\n".to_owned()),
            "[a-zA-Z0-9/\r\n .:]{0,30}",
        ]
    }

    proptest! {
        /// Streamed in reads of any sizes, plain or gzip, the records and
        /// problems are the whole-buffer splitter's, in stream order.
        #[test]
        fn the_reader_finds_what_the_whole_buffer_splitter_finds(
            pieces in prop::collection::vec(arb_piece(), 0..12),
            sizes in prop::collection::vec(1usize..40, 1..6),
            gzip in any::<bool>(),
        ) {
            let data = pieces.concat().into_bytes();
            let (records, problems) = whole::split_records(&data);
            let input = if gzip {
                let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                std::io::Write::write_all(&mut encoder, &data).unwrap();
                encoder.finish().unwrap()
            } else {
                data.clone()
            };
            let items = streamed(&input, sizes);
            let offsets: Vec<u64> = items
                .iter()
                .map(|i| match i {
                    WarcItem::Record(r) => r.offset,
                    WarcItem::Problem(p) => p.offset,
                })
                .collect();
            prop_assert!(offsets.windows(2).all(|w| w[0] <= w[1]), "{offsets:?}");
            prop_assert_eq!(split(&items), (records.clone(), problems.clone()));
            prop_assert_eq!(read_warc(&input), (records, problems));
        }

        /// Records written with `to_bytes` read back as themselves, at
        /// the offsets they were written at, with no problem (a declared
        /// length that was wrong now says the block's): the fuzz target's
        /// check, on WARC-like pieces.
        #[test]
        fn written_records_read_back(pieces in prop::collection::vec(arb_piece(), 0..12)) {
            // With the fuzz target's other checks.
            crate::fuzz_support::warc_parse(pieces.concat().as_bytes());
        }

        /// A gzip file cut short: the records before the cut, then the
        /// break, reported once.
        #[test]
        fn a_cut_gzip_file_gives_the_records_before_the_cut(
            pieces in prop::collection::vec(arb_piece(), 1..12),
            keep in 0.0f64..1.0,
            sizes in prop::collection::vec(1usize..400, 1..4),
        ) {
            let data = pieces.concat().into_bytes();
            let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            std::io::Write::write_all(&mut encoder, &data).unwrap();
            let gz = encoder.finish().unwrap();
            let cut = &gz[..((gz.len() as f64 * keep) as usize).max(2)];
            let items = streamed(cut, sizes);
            let (records, problems) = split(&items);
            let breaks = problems.iter().filter(|p| p.reason.contains("gzip stream broken")).count();
            prop_assert_eq!(breaks, 1);
            prop_assert!(matches!(items.last(), Some(WarcItem::Problem(p)) if p.reason.contains("gzip")));
            // What came before the break is what the splitter finds in the
            // bytes decompressed before it.
            let mut decompressed = Vec::new();
            let _ = flate2::read::MultiGzDecoder::new(cut).read_to_end(&mut decompressed);
            let (expected, _) = whole::split_records(&decompressed);
            prop_assert_eq!(records, expected);
        }
    }

    #[test]
    fn an_input_error_ends_the_records_with_it() {
        let good = record("response", "HTTP/1.1 200 OK\r\n\r\nhi");
        let failing = std::io::Cursor::new(format!("{good}{good}")).chain(FailingRead);
        let items: Vec<_> = WarcReader::new(failing).collect();
        // The first record is whole before the error; the second is not
        // known to end until the input says so, which it never does.
        assert_eq!(items.len(), 2, "{items:?}");
        assert!(matches!(&items[0], Ok(WarcItem::Record(r)) if r.kind == "response"));
        assert!(items[1].as_ref().is_err_and(|e| e.to_string() == "disk gone"));
    }

    struct FailingRead;

    impl Read for FailingRead {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk gone"))
        }
    }

    /// A header of bare LF lines ends at its blank line, also when its
    /// block holds a CRLF blank line; mixed line ends too.
    #[test]
    fn a_header_ends_at_its_first_blank_line() {
        let lf = "WARC/1.0\nWARC-Type: resource\nContent-Length: 12\n\nab\r\n\r\ncd\r\nef\n\n";
        let mixed = "WARC/1.0\r\nWARC-Type: resource\r\nContent-Length: 12\r\n\nab\r\n\r\ncd\r\nef\n\n";
        let crlf_then_lf = "WARC/1.0\r\nWARC-Type: resource\r\nContent-Length: 12\r\n\r\nab\r\n\r\ncd\r\nef\n\n";
        for data in [lf, mixed, crlf_then_lf] {
            let (records, problems) = read_warc(data.as_bytes());
            assert!(problems.is_empty(), "{data:?}: {problems:?}");
            assert_eq!(records[0].block, b"ab\r\n\r\ncd\r\nef", "{data:?}");
        }
    }

    /// The WARC specification, archived: its examples are version lines
    /// inside a block, at the starts of lines. The declared length holds.
    #[test]
    fn a_block_may_quote_records() {
        let page = "<pre>\nWARC/1.1\r\nWARC-Type: warcinfo\r\nContent-Length: 9\r\n\r\nsoftware\r\n\r\n</pre>\n";
        let data = [record("resource", page), record("response", "after")].concat();
        for sizes in [vec![1], vec![7], vec![4096]] {
            let (records, problems) = split(&streamed(data.as_bytes(), sizes));
            assert!(problems.is_empty(), "{problems:?}");
            let blocks: Vec<&[u8]> = records.iter().map(|r| r.block.as_slice()).collect();
            assert_eq!(blocks, [page.as_bytes(), b"after"]);
        }
        // A declared length that ends where no record starts is wrong: the
        // block is cut at the version line, as before.
        let wrong = "WARC/1.0\r\nWARC-Type: resource\r\nContent-Length: 30\r\n\r\nabc\nWARC/1.0\r\nWARC-Type: x\r\nContent-Length: 0\r\n\r\n\r\n\r\nmore bytes";
        let (records, problems) = read_warc(wrong.as_bytes());
        assert_eq!(records.iter().map(|r| r.kind.as_str()).collect::<Vec<_>>(), ["resource", "x"]);
        assert_eq!(records[0].block, b"abc");
        assert!(problems[0].reason.contains("runs past the next record"), "{problems:?}");
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

    /// `payload` in `coding` (one of `parse_http_response`'s).
    fn encoded(coding: &str, payload: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut out = Vec::new();
        match coding {
            "gzip" | "x-gzip" => {
                let mut e = flate2::write::GzEncoder::new(&mut out, flate2::Compression::fast());
                e.write_all(payload).unwrap();
                e.finish().unwrap();
            }
            "deflate" => {
                let mut e = flate2::write::ZlibEncoder::new(&mut out, flate2::Compression::fast());
                e.write_all(payload).unwrap();
                e.finish().unwrap();
            }
            "raw-deflate" => {
                let mut e = flate2::write::DeflateEncoder::new(&mut out, flate2::Compression::fast());
                e.write_all(payload).unwrap();
                e.finish().unwrap();
            }
            "br" => {
                let mut e = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
                e.write_all(payload).unwrap();
                e.flush().unwrap();
                drop(e);
            }
            "zstd" => out = zstd::encode_all(payload, 3).unwrap(),
            "identity" => out.extend_from_slice(payload),
            other => panic!("no encoder for {other}"),
        }
        out
    }

    /// `body` cut into chunks of these sizes (the last runs to the end),
    /// with a chunk extension on the first, and the last chunk.
    fn chunked(body: &[u8], sizes: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rest = body;
        for (i, &size) in sizes.iter().chain(std::iter::repeat(&usize::MAX)).enumerate() {
            if rest.is_empty() {
                break;
            }
            let take = size.clamp(1, rest.len());
            let extension = if i == 0 { ";name=value" } else { "" };
            out.extend_from_slice(format!("{take:X}{extension}\r\n").as_bytes());
            out.extend_from_slice(&rest[..take]);
            out.extend_from_slice(b"\r\n");
            rest = &rest[take..];
        }
        out.extend_from_slice(b"0\r\nX-Trailer: yes\r\n\r\n");
        out
    }

    fn response(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
        let mut block = format!("HTTP/1.1 {status} Whatever\r\n");
        for (name, value) in headers {
            block.push_str(&format!("{name}: {value}\r\n"));
        }
        block.push_str("\r\n");
        let mut block = block.into_bytes();
        block.extend_from_slice(body);
        block
    }

    const PAGE: &[u8] =
        b"<html><body><p>The ferry to the island was late again, and the harbour master said so.</p></body></html>";

    #[test]
    fn payloads_are_decoded_as_recorded() {
        for coding in ["gzip", "x-gzip", "deflate", "raw-deflate", "br", "zstd", "identity"] {
            let header = if coding == "raw-deflate" { "deflate" } else { coding };
            let body = encoded(coding, PAGE);
            let http = parse_http_response(&response(200, &[("Content-Encoding", header)], &body)).unwrap();
            assert_eq!((http.payload.as_slice(), &http.undecoded), (PAGE, &None), "{coding}");
            // Chunked on the wire, in chunks of 7 bytes.
            let wire = chunked(&body, &[7; 64]);
            let headers = [("Transfer-Encoding", "chunked"), ("Content-Encoding", header)];
            let http = parse_http_response(&response(200, &headers, &wire)).unwrap();
            assert_eq!((http.payload.as_slice(), http.why_not_a_page()), (PAGE, None), "chunked {coding}");
        }
        // Two codings, applied in the order listed: undone in reverse.
        let twice = encoded("br", &encoded("gzip", PAGE));
        let http = parse_http_response(&response(200, &[("Content-Encoding", "gzip, br")], &twice)).unwrap();
        assert_eq!(http.payload, PAGE);
        // A transfer coding besides chunked, over a content coding.
        let wire = chunked(&encoded("gzip", &encoded("br", PAGE)), &[9; 64]);
        let headers = [("Content-Encoding", "br"), ("Transfer-Encoding", "gzip, chunked")];
        let http = parse_http_response(&response(200, &headers, &wire)).unwrap();
        assert_eq!((http.payload.as_slice(), http.undecoded), (PAGE, None));
        // No header, but gzip's or zstd's magic bytes.
        for coding in ["gzip", "zstd"] {
            let http = parse_http_response(&response(200, &[], &encoded(coding, PAGE))).unwrap();
            assert_eq!(http.payload, PAGE, "{coding}");
        }
        // Several zstd frames, as a server that flushes sends them.
        let frames = [encoded("zstd", &PAGE[..40]), encoded("zstd", &PAGE[40..])].concat();
        let http = parse_http_response(&response(200, &[("Content-Encoding", "zstd")], &frames)).unwrap();
        assert_eq!(http.payload, PAGE);
    }

    #[test]
    fn payloads_already_decoded_are_kept() {
        // Writers that decode and keep the headers (or rename them, as
        // Common Crawl does, which needs nothing here).
        for coding in ["gzip", "deflate", "br", "zstd"] {
            let headers = [("Transfer-Encoding", "chunked"), ("Content-Encoding", coding)];
            let http = parse_http_response(&response(200, &headers, PAGE)).unwrap();
            assert_eq!((http.payload.as_slice(), &http.undecoded), (PAGE, &None), "{coding}");
        }
        // A first line that is not a chunk size: no chunks at all.
        let http = parse_http_response(&response(200, &[("Transfer-Encoding", "chunked")], b"hello\r\nworld")).unwrap();
        assert_eq!(http.payload, b"hello\r\nworld");
        // The size line says 3, but no line end follows 3 bytes.
        let http = parse_http_response(&response(200, &[("Transfer-Encoding", "chunked")], b"3\r\nabcdef")).unwrap();
        assert_eq!(http.payload, b"3\r\nabcdef");
    }

    #[test]
    fn payloads_cut_short_keep_what_they_have() {
        // 600,000 bytes of words in an order that does not repeat, so that
        // half of each compressed stream holds some of them (zstd decodes
        // in blocks of 128 KiB).
        let words: Vec<&[u8]> = PAGE.split(|&b| b == b' ').collect();
        let mut state = 1u64;
        let long: Vec<u8> = std::iter::repeat_with(|| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            [words[(state >> 33) as usize % words.len()], b" "].concat()
        })
        .flatten()
        .take(600_000)
        .collect();
        // A chunked body cut inside its third chunk.
        let wire = chunked(&long, &[1000, 1000, 1000]);
        let http = parse_http_response(&response(200, &[("Transfer-Encoding", "chunked")], &wire[..2500])).unwrap();
        assert!(http.payload.len() > 2000 && long.starts_with(&http.payload), "{}", http.payload.len());
        // A compressed stream cut short (a truncated record).
        for coding in ["gzip", "deflate", "br", "zstd"] {
            let body = encoded(coding, &long);
            let cut = &body[..body.len() / 2];
            let http = parse_http_response(&response(200, &[("Content-Encoding", coding)], cut)).unwrap();
            assert!(!http.payload.is_empty() && long.starts_with(&http.payload), "{coding}");
            assert_eq!(http.why_not_a_page(), None, "{coding}");
        }
        // Cut before the first byte it would give: compressed noise is no
        // page (a stream without its magic bytes may be a page that was
        // decoded already, and is kept).
        for coding in ["gzip", "zstd"] {
            let body = encoded(coding, &long);
            let http = parse_http_response(&response(200, &[("Content-Encoding", coding)], &body[..10])).unwrap();
            let why = format!("{coding} payload broken");
            assert_eq!((&http.payload[..], http.why_not_a_page()), (&body[..10], Some(why)));
        }
    }

    #[test]
    fn what_cannot_be_decoded_is_not_a_page() {
        // Unix compress (LZW), which no server sends any more.
        let lzw = b"\x1f\x9d\x90\x3c\x00\xff\xfe";
        let http = parse_http_response(&response(200, &[("Content-Encoding", "compress")], lzw)).unwrap();
        assert_eq!(http.payload, lzw);
        assert_eq!(http.why_not_a_page().as_deref(), Some("content-encoding compress"));
        // A coding that is nonsense on a payload that is text.
        let http = parse_http_response(&response(200, &[("Content-Encoding", "UTF-8")], PAGE)).unwrap();
        assert_eq!((http.payload.as_slice(), http.why_not_a_page()), (PAGE, None));
        // A decompression bomb: 65 MiB of zeros in 65 KiB (gzip) or less.
        for coding in ["gzip", "zstd"] {
            let bomb = encoded(coding, &vec![0; MAX_DECODED_PAYLOAD + (1 << 20)]);
            assert!(bomb.len() < 1 << 20);
            let http = parse_http_response(&response(200, &[("Content-Encoding", coding)], &bomb)).unwrap();
            let why = format!("{coding} payload over 64 MiB decoded");
            assert_eq!((http.payload.len(), http.why_not_a_page()), (bomb.len(), Some(why)));
        }
        // Exactly the limit decodes.
        let full = encoded("gzip", &vec![b'a'; MAX_DECODED_PAYLOAD]);
        let http = parse_http_response(&response(200, &[("Content-Encoding", "gzip")], &full)).unwrap();
        assert_eq!((http.payload.len(), http.undecoded), (MAX_DECODED_PAYLOAD, None));
    }

    #[test]
    fn only_successful_responses_are_pages() {
        let html = [("Content-Type", "text/html")];
        for (status, why) in [
            (200, None),
            (203, None),
            (204, None),
            (0, None),
            (301, Some("HTTP 301")),
            (404, Some("HTTP 404")),
            (503, Some("HTTP 503")),
        ] {
            let http = parse_http_response(&response(status, &html, PAGE)).unwrap();
            assert_eq!(http.why_not_a_page().as_deref(), why, "{status}");
        }
        let http = parse_http_response(&response(200, &[("Content-Type", "image/png")], b"\x89PNG")).unwrap();
        assert_eq!(http.why_not_a_page().as_deref(), Some("image/png"));
        // The status decides first: a 404's image is counted as a 404.
        let http = parse_http_response(&response(404, &[("Content-Type", "image/png")], b"\x89PNG")).unwrap();
        assert_eq!(http.why_not_a_page().as_deref(), Some("HTTP 404"));
    }

    proptest! {
        /// Any payload, in any of the codings, chunked in any sizes or
        /// not, reads back as it was.
        #[test]
        fn encoded_payloads_read_back(
            payload in prop::collection::vec(any::<u8>(), 0..3000),
            coding in prop::sample::select(vec!["gzip", "deflate", "raw-deflate", "br", "zstd", "identity"]),
            sizes in prop::option::of(prop::collection::vec(1usize..600, 0..8)),
            as_transfer in any::<bool>(),
        ) {
            let header = if coding == "raw-deflate" { "deflate" } else { coding };
            let mut body = encoded(coding, &payload);
            // The coding as a content coding, or as a transfer coding
            // before chunked.
            let transfer = match (as_transfer, &sizes) {
                (true, Some(_)) => format!("{header}, chunked"),
                (true, None) => header.to_owned(),
                (false, _) => "chunked".to_owned(),
            };
            let mut headers = Vec::new();
            if !as_transfer {
                headers.push(("Content-Encoding", header));
            }
            if let Some(sizes) = &sizes {
                body = chunked(&body, sizes);
            }
            if as_transfer || sizes.is_some() {
                headers.push(("Transfer-Encoding", transfer.as_str()));
            }
            let http = parse_http_response(&response(200, &headers, &body)).unwrap();
            prop_assert_eq!(http.undecoded, None);
            prop_assert_eq!(http.payload, payload);
        }
    }
}
