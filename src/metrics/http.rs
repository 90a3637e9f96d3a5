//! A small HTTP/1.1 server for `/metrics`, on `std::net` alone.
//!
//! One thread per connection up to [`MAX_CONNECTIONS`] (more are answered 503 at once), read
//! and write timeouts so a slow or silent client holds a thread for seconds at most, a bounded
//! request head, `GET` and `HEAD`, `404` for other paths, `405` for other methods, and
//! `Connection: close` on every answer (scrapers open one connection per scrape anyway).
//! The body is made by the caller's function, which is called with no lock of this module
//! held and whose result is written after it returned.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::exposition::Format;

/// Connections served at the same time; the next ones get 503.
pub const MAX_CONNECTIONS: usize = 32;
/// The longest request head read (request line and headers).
pub const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take to read the answer.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds `addr` (`HOST:PORT`; a name such as `localhost` is resolved). Errors are one line
/// for a person: a busy port, an address this machine does not have, a bad spelling.
pub fn bind(addr: &str) -> Result<TcpListener, String> {
    let addrs: Vec<SocketAddr> = match addr.to_socket_addrs() {
        Ok(a) => a.collect(),
        Err(e) => {
            return Err(format!(
                "--listen {addr:?} is not an address to listen on ({e}); give HOST:PORT, e.g. 127.0.0.1:9464"
            ))
        }
    };
    let Some(first) = addrs.first() else {
        return Err(format!("--listen {addr:?} names no address"));
    };
    match TcpListener::bind(&addrs[..]) {
        Ok(l) => Ok(l),
        Err(e) => Err(match e.kind() {
            io::ErrorKind::AddrInUse => format!(
                "cannot listen on {first}: the port is already in use (another exporter, or an earlier serve?); pick another with --listen"
            ),
            io::ErrorKind::AddrNotAvailable => format!(
                "cannot listen on {first}: this machine has no such address"
            ),
            io::ErrorKind::PermissionDenied => format!(
                "cannot listen on {first}: permission denied (ports below 1024 need privileges)"
            ),
            _ => format!("cannot listen on {first}: {e}"),
        }),
    }
}

/// What a request asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// The format its `Accept` header prefers.
    pub format: Format,
}

/// Why a request head could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum HeadError {
    /// Over [`MAX_HEAD`] bytes.
    TooLarge,
    /// Not an HTTP request line.
    Malformed,
    /// The client closed, or took too long.
    Gone,
}

/// The q-value the `Accept` header gives a media type (`None`: not named; `*/*` counts
/// when `wildcard`).
fn q_of(accept: &str, media: &str, wildcard: bool) -> Option<f32> {
    let mut any = None;
    for part in accept.split(',') {
        let mut fields = part.split(';');
        let ty = fields.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = fields
            .filter_map(|f| f.trim().strip_prefix("q="))
            .find_map(|v| v.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        if ty == media {
            return Some(q);
        }
        if wildcard && ty == "*/*" {
            any = Some(q);
        }
    }
    any
}

/// OpenMetrics when the client names it and ranks it at least as high as the Prometheus text
/// format; the text format otherwise.
pub fn negotiate(accept: Option<&str>) -> Format {
    let Some(a) = accept else {
        return Format::Prometheus;
    };
    let text = q_of(a, "text/plain", true).unwrap_or(0.0);
    match q_of(a, "application/openmetrics-text", false) {
        Some(o) if o > 0.0 && o >= text => Format::OpenMetrics,
        _ => Format::Prometheus,
    }
}

/// Parses a request head (everything before the blank line).
pub fn parse_head(head: &str) -> Result<Request, HeadError> {
    let mut lines = head.split("\r\n");
    let line = lines.next().ok_or(HeadError::Malformed)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::Malformed);
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || !target.starts_with('/') {
        return Err(HeadError::Malformed);
    }
    let mut accept = None;
    for h in lines {
        if let Some((name, value)) = h.split_once(':') {
            if name.trim().eq_ignore_ascii_case("accept") {
                accept = Some(value.trim().to_string());
            }
        }
    }
    let path = target.split(['?', '#']).next().unwrap_or("/").to_string();
    Ok(Request {
        method: method.to_string(),
        path,
        format: negotiate(accept.as_deref()),
    })
}

fn read_head(s: &mut TcpStream) -> Result<String, HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = s.read(&mut chunk).map_err(|_| HeadError::Gone)?;
        if n == 0 {
            return Err(HeadError::Gone);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return String::from_utf8(buf[..end].to_vec()).map_err(|_| HeadError::Malformed);
        }
        if buf.len() > MAX_HEAD {
            return Err(HeadError::TooLarge);
        }
    }
}

/// One answer.
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    pub extra: Vec<(&'static str, &'static str)>,
}

impl Response {
    fn text(status: u16, body: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.to_string(),
            extra: Vec::new(),
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    }
}

fn write_response(s: &mut TcpStream, r: &Response, head_only: bool) -> io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    for (k, v) in &r.extra {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    s.write_all(out.as_bytes())?;
    if !head_only {
        s.write_all(r.body.as_bytes())?;
    }
    s.flush()
}

/// The routes: `/metrics` from `metrics`, a short index at `/`, 404 elsewhere.
pub fn route(req: &Request, metrics: &dyn Fn(Format) -> String) -> Response {
    if req.method != "GET" && req.method != "HEAD" {
        let mut r = Response::text(405, "only GET and HEAD\n");
        r.extra.push(("Allow", "GET, HEAD"));
        return r;
    }
    match req.path.as_str() {
        "/metrics" => Response {
            status: 200,
            content_type: req.format.content_type(),
            body: metrics(req.format),
            extra: Vec::new(),
        },
        "/" => Response::text(
            200,
            "vramledger: GPU memory by owner and stage; scrape /metrics (docs/metrics.md)\n",
        ),
        _ => Response::text(404, "not found; the metrics are at /metrics\n"),
    }
}

fn serve_one(mut s: TcpStream, metrics: &dyn Fn(Format) -> String) {
    let _ = s.set_read_timeout(Some(READ_TIMEOUT));
    let _ = s.set_write_timeout(Some(WRITE_TIMEOUT));
    let (r, head_only) = match read_head(&mut s).and_then(|h| parse_head(&h)) {
        Ok(req) => (route(&req, metrics), req.method == "HEAD"),
        Err(HeadError::Gone) => return,
        Err(HeadError::TooLarge) => (Response::text(431, "request head too large\n"), false),
        Err(HeadError::Malformed) => (Response::text(400, "not an HTTP/1.x request\n"), false),
    };
    if write_response(&mut s, &r, head_only).is_ok() {
        linger(&mut s);
    }
}

/// At most this much of what the client sent past the head is read (and dropped).
const LINGER_BYTES: usize = 64 * 1024;
/// For at most this long in all.
const LINGER_WAIT: Duration = Duration::from_millis(200);

/// After an answer: bytes the client sent that were not read (the rest of a head too large
/// or not HTTP, a request's body) would make the kernel reset the connection on close, and
/// a client whose read comes after the reset loses the answer. So our end is shut first and
/// the client's remaining bytes are read and dropped, bounded in bytes and in time (a client
/// that closes, as `Connection: close` asks, ends it at once), before the socket is closed.
fn linger(s: &mut TcpStream) {
    let _ = s.shutdown(std::net::Shutdown::Write);
    let deadline = std::time::Instant::now() + LINGER_WAIT;
    let mut buf = [0u8; 4096];
    let mut left = LINGER_BYTES;
    while left > 0 {
        let wait = deadline.saturating_duration_since(std::time::Instant::now());
        if wait.is_zero() || s.set_read_timeout(Some(wait)).is_err() {
            break;
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

/// A connection's place among [`MAX_CONNECTIONS`], given back when dropped.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Serves connections from `listener` for ever (until the process ends).
pub fn run(listener: TcpListener, metrics: Arc<dyn Fn(Format) -> String + Send + Sync>) {
    let active = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let Ok(mut s) = conn else {
            // EMFILE and friends: back off a little rather than spin.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        if active.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::AcqRel);
            let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = write_response(&mut s, &Response::text(503, "busy; try again\n"), false);
            continue;
        }
        let (m, a) = (Arc::clone(&metrics), Arc::clone(&active));
        let spawned = std::thread::Builder::new()
            .name("vramledger-http".into())
            .spawn(move || {
                let _slot = Slot(a); // given back even if the body panics
                serve_one(s, &*m);
            });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_accept_header_gets_openmetrics() {
        let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(negotiate(Some(prom)), Format::OpenMetrics);
        assert_eq!(negotiate(None), Format::Prometheus);
        assert_eq!(negotiate(Some("*/*")), Format::Prometheus);
        assert_eq!(negotiate(Some("text/plain")), Format::Prometheus);
        assert_eq!(
            negotiate(Some("text/plain;q=1,application/openmetrics-text;q=0.5")),
            Format::Prometheus
        );
        assert_eq!(
            negotiate(Some("application/openmetrics-text;q=0")),
            Format::Prometheus
        );
    }

    #[test]
    fn heads_parse_or_say_why_not() {
        let r = parse_head(
            "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: application/openmetrics-text",
        )
        .unwrap();
        assert_eq!(
            (r.method.as_str(), r.path.as_str(), r.format),
            ("GET", "/metrics", Format::OpenMetrics)
        );
        assert_eq!(parse_head("GET /metrics"), Err(HeadError::Malformed));
        assert_eq!(
            parse_head("GET metrics HTTP/1.1"),
            Err(HeadError::Malformed)
        );
        assert_eq!(parse_head("\x16\x03\x01 binary"), Err(HeadError::Malformed));
    }

    #[test]
    fn routes() {
        let m = |f: Format| format!("{f:?}\n");
        let req = |method: &str, path: &str| Request {
            method: method.into(),
            path: path.into(),
            format: Format::Prometheus,
        };
        let r = route(&req("GET", "/metrics"), &m);
        assert_eq!((r.status, r.body.as_str()), (200, "Prometheus\n"));
        assert_eq!(route(&req("HEAD", "/metrics"), &m).status, 200);
        assert_eq!(route(&req("GET", "/metricsx"), &m).status, 404);
        let r = route(&req("POST", "/metrics"), &m);
        assert_eq!(
            (r.status, r.extra.clone()),
            (405, vec![("Allow", "GET, HEAD")])
        );
    }

    #[test]
    fn busy_ports_and_bad_addresses_are_one_clear_line() {
        let l = bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let e = bind(&format!("127.0.0.1:{port}")).unwrap_err();
        assert!(e.contains("already in use"), "{e}");
        let e = bind("127.0.0.1").unwrap_err();
        assert!(e.contains("HOST:PORT"), "{e}");
        let e = bind("127.0.0.1:99999").unwrap_err();
        assert!(e.contains("HOST:PORT"), "{e}");
    }
}
