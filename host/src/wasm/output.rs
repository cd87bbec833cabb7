//! What a guest says: its stdout and stderr, drained after every call, and `host.log`, both written to the
//! scheduler's log under one rate limit per plugin. A guest can print as much as it likes without trapping; what
//! is over the per-call cap or the rate limit is dropped and counted, never silently.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

use super::WasmStats;

/// Output kept from one call on one stream; the rest of the call's output is dropped (and counted).
pub(super) const CALL_OUTPUT_CAP: usize = 64 * 1024;
/// The longest line written to the log; a longer one is cut (and marked so).
const MAX_LINE: usize = 4 * 1024;
/// Lines a plugin may log at once after a quiet spell.
const LOG_BURST: f64 = 1000.0;
/// Lines per second a plugin may log on average: a line per decision at a busy scheduler's pace passes (a PostBind
/// that logs every binding), a flood (millions of lines a second) does not.
const LOG_RATE: f64 = 500.0;

/// A guest's stdout or stderr: a buffer the host drains after each call. Writes never fail: past the cap, bytes
/// are counted as dropped.
#[derive(Clone, Default)]
pub(super) struct GuestOutput {
    buf: Arc<Mutex<Buffered>>,
}

#[derive(Default)]
struct Buffered {
    bytes: Vec<u8>,
    dropped: u64,
}

impl GuestOutput {
    fn push(&self, bytes: &[u8]) {
        let mut b = self.buf.lock().expect("guest output lock");
        let room = CALL_OUTPUT_CAP.saturating_sub(b.bytes.len());
        let kept = bytes.len().min(room);
        b.bytes.extend_from_slice(&bytes[..kept]);
        b.dropped += (bytes.len() - kept) as u64;
    }

    /// What was written since the last take, and how many bytes were dropped at the cap.
    pub(super) fn take(&self) -> (Vec<u8>, u64) {
        let mut b = self.buf.lock().expect("guest output lock");
        (std::mem::take(&mut b.bytes), std::mem::take(&mut b.dropped))
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestOutput {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }
    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }
    fn check_write(&mut self) -> StreamResult<usize> {
        // Always writable: what does not fit is dropped and counted, so the guest never blocks or traps on it.
        Ok(CALL_OUTPUT_CAP)
    }
}

impl AsyncWrite for GuestOutput {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Where a guest's line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// `host.log` at this level.
    Log(tracing::Level),
    /// The guest's stdout.
    Stdout,
    /// The guest's stderr.
    Stderr,
}

/// One plugin's log: every line its instances write goes through one token bucket, so a guest cannot flood the
/// scheduler's log; dropped lines are counted and reported when the bucket allows again.
#[derive(Debug)]
pub(super) struct GuestLog {
    plugin: Arc<str>,
    bucket: Mutex<Bucket>,
    /// Where the lines dropped by the rate limit and the bytes dropped at the per-call cap are counted.
    stats: Arc<WasmStats>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
    /// Dropped and not reported yet (reported with the next line that gets through, at most once a second).
    unreported: u64,
    /// When drops were last reported.
    reported_at: Instant,
}

/// How often drops are reported at most: a report per admitted line would be a flood of its own (up to `LOG_RATE`
/// warnings a second, which the log level does not hide).
const DROP_REPORT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

impl GuestLog {
    /// A full bucket for `plugin`, counting into `stats`.
    pub(super) fn new(plugin: Arc<str>, stats: Arc<WasmStats>) -> GuestLog {
        let now = Instant::now();
        let bucket = Bucket { tokens: LOG_BURST, at: now, unreported: 0, reported_at: now - DROP_REPORT_INTERVAL };
        GuestLog { plugin, bucket: Mutex::new(bucket), stats }
    }

    /// Takes a token; `Some(n)` when the line may be written, `n` being the lines dropped before it that are due
    /// to be reported now (0 until a second has passed since the last report).
    fn admit(&self) -> Option<u64> {
        let mut b = self.bucket.lock().expect("guest log lock");
        let now = Instant::now();
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * LOG_RATE).min(LOG_BURST);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            if b.unreported == 0 || now.duration_since(b.reported_at) < DROP_REPORT_INTERVAL {
                return Some(0);
            }
            b.reported_at = now;
            Some(std::mem::take(&mut b.unreported))
        } else {
            b.unreported += 1;
            None
        }
    }

    /// Writes one line (cut at 4 KiB) unless the rate limit says no.
    pub(super) fn line(&self, source: Source, line: &str) {
        // A line the log would filter out is not counted against the rate limit either.
        if !enabled(source) {
            return;
        }
        let Some(dropped) = self.admit() else {
            self.stats.log_lines_dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let plugin = &*self.plugin;
        if dropped > 0 {
            tracing::warn!(plugin, dropped, "wasm plugin log rate limit: {dropped} line(s) dropped");
        }
        let line = cut(line);
        match source {
            Source::Log(tracing::Level::ERROR) => tracing::error!(plugin, "{line}"),
            Source::Log(tracing::Level::WARN) => tracing::warn!(plugin, "{line}"),
            Source::Log(tracing::Level::DEBUG | tracing::Level::TRACE) => tracing::debug!(plugin, "{line}"),
            Source::Log(_) => tracing::info!(plugin, "{line}"),
            Source::Stdout => tracing::info!(plugin, stream = "stdout", "{line}"),
            Source::Stderr => tracing::info!(plugin, stream = "stderr", "{line}"),
        }
    }

    /// Writes what a stream received during a call, line by line, and counts what its cap dropped.
    pub(super) fn drain(&self, source: Source, output: &GuestOutput) {
        let (bytes, dropped) = output.take();
        if dropped > 0 {
            self.stats.output_bytes_dropped.fetch_add(dropped, Ordering::Relaxed);
            self.line(source, &format!("[{dropped} more byte(s) of output in this call dropped]"));
        }
        if !bytes.is_empty() {
            for line in String::from_utf8_lossy(&bytes).lines() {
                self.line(source, line);
            }
        }
    }
}

/// Whether a line from `source` would be written at the log's level (as [`GuestLog::line`] writes it).
pub(super) fn enabled(source: Source) -> bool {
    match source {
        Source::Log(tracing::Level::ERROR) => tracing::enabled!(tracing::Level::ERROR),
        Source::Log(tracing::Level::WARN) => tracing::enabled!(tracing::Level::WARN),
        Source::Log(tracing::Level::DEBUG | tracing::Level::TRACE) => tracing::enabled!(tracing::Level::DEBUG),
        Source::Log(_) | Source::Stdout | Source::Stderr => tracing::enabled!(tracing::Level::INFO),
    }
}

/// The line, or its first 4 KiB (at a character boundary) marked as cut.
fn cut(line: &str) -> std::borrow::Cow<'_, str> {
    if line.len() <= MAX_LINE {
        return line.into();
    }
    let mut end = MAX_LINE;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} byte(s) cut]", &line[..end], line.len() - end).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_cap_is_counted_not_an_error() {
        let mut out = GuestOutput::default();
        for _ in 0..(CALL_OUTPUT_CAP / 100 + 10) {
            out.write(Bytes::from(vec![b'x'; 100])).unwrap();
        }
        assert_eq!(out.check_write().unwrap(), CALL_OUTPUT_CAP);
        let (bytes, dropped) = out.take();
        assert_eq!(bytes.len(), CALL_OUTPUT_CAP);
        assert_eq!(dropped as usize, (CALL_OUTPUT_CAP / 100 + 10) * 100 - CALL_OUTPUT_CAP);
        // Drained: the next call starts empty.
        assert_eq!(out.take(), (Vec::new(), 0));
    }

    #[test]
    fn a_flood_is_cut_to_the_burst_and_counted() {
        // Lines the log's level filters out are not counted: write at info, to nowhere.
        let subscriber = tracing_subscriber::fmt().with_max_level(tracing::Level::INFO).with_writer(std::io::sink);
        let _log = tracing::subscriber::set_default(subscriber.finish());
        let log = GuestLog::new(Arc::from("Flood"), Arc::default());
        for i in 0..20_000 {
            log.line(Source::Stdout, &format!("line {i}"));
        }
        let dropped = log.stats.log_lines_dropped.load(Ordering::Relaxed);
        // The burst, plus what the rate refilled while the loop ran.
        assert!((20_000 - dropped) >= LOG_BURST as u64, "{dropped}");
        assert!(dropped > 15_000, "{dropped}");
    }

    #[test]
    fn lines_below_the_level_are_neither_written_nor_counted() {
        let subscriber = tracing_subscriber::fmt().with_max_level(tracing::Level::WARN).with_writer(std::io::sink);
        let _log = tracing::subscriber::set_default(subscriber.finish());
        let log = GuestLog::new(Arc::from("Quiet"), Arc::default());
        assert!(!enabled(Source::Log(tracing::Level::INFO)) && enabled(Source::Log(tracing::Level::WARN)));
        for i in 0..20_000 {
            log.line(Source::Log(tracing::Level::DEBUG), &format!("line {i}"));
        }
        assert_eq!(log.stats.log_lines_dropped.load(Ordering::Relaxed), 0, "filtered out, not rate-limited");
        assert_eq!(log.bucket.lock().unwrap().tokens, LOG_BURST, "no token spent");
    }

    #[test]
    fn drops_are_reported_at_most_once_a_second() {
        let log = GuestLog::new(Arc::from("Flood"), Arc::default());
        let set_tokens = |t: f64| log.bucket.lock().unwrap().tokens = t;
        set_tokens(0.0);
        assert!((0..5).all(|_| log.admit().is_none()));
        set_tokens(10.0);
        assert_eq!(log.admit(), Some(5), "the first drops are reported with the next line");
        set_tokens(0.0);
        assert!((0..3).all(|_| log.admit().is_none()));
        set_tokens(10.0);
        assert_eq!(log.admit(), Some(0), "within the second: counted, not reported");
        log.bucket.lock().unwrap().reported_at -= DROP_REPORT_INTERVAL;
        assert_eq!(log.admit(), Some(3), "a second later: reported");
    }

    #[test]
    fn long_lines_are_cut_at_a_char_boundary() {
        let long = "é".repeat(MAX_LINE);
        let c = cut(&long);
        assert!(c.len() < MAX_LINE + 40 && c.ends_with("byte(s) cut]"), "{}", c.len());
        assert_eq!(cut("short"), "short");
    }
}
