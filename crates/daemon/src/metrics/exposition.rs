//! The metrics endpoint: a small HTTP/1.1 responder on its own thread that answers
//! `GET /metrics` with [`Metrics::encode`], loopback only unless the config says otherwise.
//!
//! A scrape is one short request, `Connection: close`, so no HTTP library is needed; but
//! any local user can connect, and a connection that sends nothing must not hold up the
//! scrape behind it. So each connection is served on a thread of its own, with limits:
//!
//! ```text
//!   accept ──► live connections < MAX_CONNECTIONS (32)? ── no ──► 503, closed at once
//!                 │ yes
//!                 ▼
//!   its own thread: the request head within HEAD_DEADLINE (2 s) and at most 8 KiB,
//!                   the whole exchange within DEADLINE (10 s), then closed
//! ```
//!
//! Idle connections cost their sender a socket each and are dropped after 2 s; to keep a
//! scrape out, one would have to hold 32 of them open, renewed every 2 s, all the time,
//! and even then the scrape's retry gets in when one slot frees. Threads rather than an
//! event loop because a scrape is rare and the bound on threads is small; a library
//! server would add a dependency for the same limits. Stopping the endpoint shuts every
//! open connection and joins its thread. What it answers:
//!
//! | request | answer |
//! |---|---|
//! | `GET /metrics` (any query string), `Accept:` names OpenMetrics | `200`, [`CONTENT_TYPE`], [`Metrics::encode`] |
//! | `GET /metrics`, any other `Accept:` | `200`, [`TEXT_CONTENT_TYPE`], [`Metrics::encode_text`] |
//! | `HEAD /metrics` | `200`, headers only |
//! | another path | `404` |
//! | another method | `405` |
//! | not HTTP, or a head over 8 KiB | `400` |
//! | a connection over [`MetricsServer::MAX_CONNECTIONS`] | `503` |
//!
//! ```text
//!   127.0.0.1:9464 ◄── GET /metrics ── Prometheus (the node's, or the cluster's through
//!                  ──► 200 text ──►    the pod's address when `metrics_remote = true`)
//! ```

use super::{CONTENT_TYPE, Metrics, TEXT_CONTENT_TYPE};
use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Who may reach the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposure {
    /// Loopback addresses only (the default): a non-loopback address is refused.
    Loopback,
    /// Any address, because the config says so (`metrics_remote = true`).
    Remote,
}

impl Exposure {
    /// What the config allows: [`Exposure::Remote`] only with `metrics_remote = true`.
    pub fn of(settings: &crate::DaemonSettings) -> Exposure {
        if settings.metrics_remote {
            Exposure::Remote
        } else {
            Exposure::Loopback
        }
    }
}

/// Why the endpoint could not be opened. One line each.
#[derive(Debug, thiserror::Error)]
pub enum ExpositionError {
    /// A non-loopback address without the config's permission.
    #[error(
        "metrics address {0} is not loopback; set metrics_remote = true in [daemon] to serve it beyond this machine"
    )]
    NotLoopback(SocketAddr),
    /// Binding or starting the thread failed.
    #[error("metrics address {addr}: {source}")]
    Io {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
}

/// The bound, not yet serving, endpoint.
#[derive(Debug)]
pub struct MetricsServer {
    listener: TcpListener,
    addr: SocketAddr,
    deadline: Duration,
    head_deadline: Duration,
}

impl MetricsServer {
    /// The time one connection has to send its request and read the answer.
    pub const DEADLINE: Duration = Duration::from_secs(10);
    /// The time one connection has to send its request head.
    pub const HEAD_DEADLINE: Duration = Duration::from_secs(2);
    /// The most connections served at once; more are answered `503` and closed.
    pub const MAX_CONNECTIONS: usize = 32;
    /// The longest request head read.
    pub const MAX_HEAD_BYTES: usize = 8192;

    /// Binds `addr` (port 0 picks a free port; see [`MetricsServer::local_addr`]).
    pub fn bind(addr: SocketAddr, exposure: Exposure) -> Result<MetricsServer, ExpositionError> {
        if exposure == Exposure::Loopback && !addr.ip().is_loopback() {
            return Err(ExpositionError::NotLoopback(addr));
        }
        let io = |source| ExpositionError::Io { addr, source };
        let listener = TcpListener::bind(addr).map_err(io)?;
        let addr = listener.local_addr().map_err(io)?;
        Ok(MetricsServer {
            listener,
            addr,
            deadline: Self::DEADLINE,
            head_deadline: Self::HEAD_DEADLINE,
        })
    }

    /// The same server with other deadlines: `head` to send the request head, `whole`
    /// for the whole exchange (tests use short ones).
    pub fn with_deadlines(mut self, head: Duration, whole: Duration) -> MetricsServer {
        self.head_deadline = head.min(whole);
        self.deadline = whole;
        self
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves scrapes on a thread of its own until [`ExpositionThread::stop`]. Errors of
    /// single connections go to `log`.
    pub fn spawn(
        self,
        metrics: Arc<Metrics>,
        log: impl Fn(&io::Error) + Send + Sync + 'static,
    ) -> Result<ExpositionThread, ExpositionError> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let addr = self.addr;
        let log: Log = Arc::new(log);
        let handle = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || self.accept_loop(&flag, &metrics, &log))
            .map_err(|source| ExpositionError::Io { addr, source })?;
        Ok(ExpositionThread {
            stop,
            addr,
            handle: Some(handle),
        })
    }
}

/// The connections being served: each one's thread, and a handle on its socket to shut it
/// when the endpoint stops.
type Connections = Vec<(JoinHandle<()>, TcpStream)>;

/// Where the errors of single connections go, shared by their threads.
type Log = Arc<dyn Fn(&io::Error) + Send + Sync>;

impl MetricsServer {
    /// Accepts until `stop`, each connection on its own thread (see the module docs);
    /// then shuts and joins those still open.
    fn accept_loop(self, stop: &AtomicBool, metrics: &Arc<Metrics>, log: &Log) {
        let mut live: Connections = Vec::new();
        loop {
            let conn = self.listener.accept();
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let stream = match conn {
                Ok((stream, _)) => stream,
                Err(e) => {
                    log(&e);
                    continue;
                }
            };
            // Threads that are done are joined, so `live` counts open connections only.
            let (done, open): (Connections, Connections) =
                live.into_iter().partition(|(h, _)| h.is_finished());
            for (h, _) in done {
                let _ = h.join();
            }
            live = open;
            if live.len() >= Self::MAX_CONNECTIONS {
                refuse_busy(&stream);
                continue;
            }
            let Ok(handle_on_socket) = stream.try_clone() else {
                continue;
            };
            let now = Instant::now();
            let deadlines = (now + self.head_deadline, now + self.deadline);
            let (metrics, conn_log) = (Arc::clone(metrics), Arc::clone(log));
            let spawned = std::thread::Builder::new()
                .name("metrics-conn".into())
                .spawn(move || {
                    if let Err(e) = serve(&stream, &metrics, deadlines) {
                        conn_log(&e);
                    }
                    // Closed now, though the accept loop still holds a handle on it.
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                });
            match spawned {
                Ok(h) => live.push((h, handle_on_socket)),
                Err(e) => log(&e),
            }
        }
        for (h, stream) in live {
            let _ = stream.shutdown(std::net::Shutdown::Both);
            let _ = h.join();
        }
    }
}

/// Answers `503` to a connection over the limit without reading from it, and closes it.
fn refuse_busy(stream: &TcpStream) {
    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
    let text = "too many connections\n";
    let out = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    let mut w = stream;
    let _ = w.write_all(out.as_bytes());
    // What the client already sent is dropped unread without waiting for more (unread
    // data at close would make the kernel reset the connection, answer and all).
    let _ = stream.shutdown(std::net::Shutdown::Write);
    if stream.set_nonblocking(true).is_ok() {
        let _ = (&mut w).read(&mut [0u8; 8192]);
    }
}

/// The endpoint serving on its own thread.
#[derive(Debug)]
pub struct ExpositionThread {
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
    handle: Option<JoinHandle<()>>,
}

impl ExpositionThread {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving: open connections are shut and their threads joined.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept with a connection of our own, on loopback if bound to all.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for ExpositionThread {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn set_deadline(stream: &TcpStream, deadline: Instant) -> io::Result<()> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::Error::new(
            ErrorKind::TimedOut,
            "scrape deadline passed",
        ));
    }
    stream.set_read_timeout(Some(left))?;
    stream.set_write_timeout(Some(left))
}

/// The request line and the headers, up to the blank line; `None` if it is too long or
/// the client closed first.
fn read_head(stream: &TcpStream, deadline: Instant) -> io::Result<Option<String>> {
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    loop {
        set_deadline(stream, deadline)?;
        let mut line = String::new();
        let n = (&mut reader)
            .take((MetricsServer::MAX_HEAD_BYTES - head.len() + 1) as u64)
            .read_line(&mut line);
        let n = match n {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::InvalidData => return Ok(None),
            Err(e) => return Err(e),
        };
        if n == 0 || head.len() + line.len() > MetricsServer::MAX_HEAD_BYTES {
            return Ok(None);
        }
        if line == "\r\n" || line == "\n" {
            return Ok(Some(head));
        }
        head.push_str(&line);
    }
}

/// Answers one connection: its head must come by the first deadline, the whole exchange
/// be done by the second.
fn serve(
    stream: &TcpStream,
    metrics: &Metrics,
    (head_deadline, deadline): (Instant, Instant),
) -> io::Result<()> {
    let head = read_head(stream, head_deadline.min(deadline))?;
    let (status, body) = match head.as_deref().map(route) {
        None => ("400 Bad Request", Body::Text("bad request\n")),
        Some(r) => r,
    };
    let (content_type, text, head_only) = match body {
        Body::Text(t) => ("text/plain; charset=utf-8", t.to_string(), false),
        Body::Metrics { head_only } => match encode(metrics, head.as_deref().unwrap_or("")) {
            Ok((content_type, t)) => (content_type, t, head_only),
            Err(_) => (
                "text/plain; charset=utf-8",
                "encoding failed\n".into(),
                false,
            ),
        },
    };
    set_deadline(stream, deadline)?;
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        text.len()
    );
    if !head_only {
        out.push_str(&text);
    }
    let mut w = stream;
    w.write_all(out.as_bytes())?;
    w.flush()
}

/// OpenMetrics when the client's `Accept:` names it, the text format 0.0.4 otherwise.
fn encode(metrics: &Metrics, head: &str) -> Result<(&'static str, String), std::fmt::Error> {
    let openmetrics = head.lines().skip(1).any(|h| {
        h.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("accept") && v.contains("application/openmetrics-text")
        })
    });
    if openmetrics {
        Ok((CONTENT_TYPE, metrics.encode()?))
    } else {
        Ok((TEXT_CONTENT_TYPE, metrics.encode_text()?))
    }
}

enum Body {
    Text(&'static str),
    Metrics { head_only: bool },
}

/// What a request head asks for.
fn route(head: &str) -> (&'static str, Body) {
    let mut parts = head.lines().next().unwrap_or("").split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return ("400 Bad Request", Body::Text("bad request\n"));
    };
    if !version.starts_with("HTTP/1.") {
        return ("400 Bad Request", Body::Text("bad request\n"));
    }
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET", "/metrics") => ("200 OK", Body::Metrics { head_only: false }),
        ("HEAD", "/metrics") => ("200 OK", Body::Metrics { head_only: true }),
        (_, "/metrics") => ("405 Method Not Allowed", Body::Text("only GET\n")),
        _ => (
            "404 Not Found",
            Body::Text("not found; metrics are at /metrics\n"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(head: &str) -> &'static str {
        route(head).0
    }

    #[test]
    fn route_each_request_gets_its_status() {
        assert_eq!(status("GET /metrics HTTP/1.1\r\nHost: x\r\n"), "200 OK");
        assert_eq!(status("GET /metrics?x=1 HTTP/1.0\r\n"), "200 OK");
        assert_eq!(status("HEAD /metrics HTTP/1.1\r\n"), "200 OK");
        assert_eq!(
            status("POST /metrics HTTP/1.1\r\n"),
            "405 Method Not Allowed"
        );
        assert_eq!(status("GET / HTTP/1.1\r\n"), "404 Not Found");
        assert_eq!(status("GET /metrics\r\n"), "400 Bad Request");
        assert_eq!(status("GET /metrics SPDY/3\r\n"), "400 Bad Request");
        assert_eq!(status(""), "400 Bad Request");
    }

    #[test]
    fn bind_non_loopback_refused_without_remote() {
        let addr: SocketAddr = "0.0.0.0:0".parse().unwrap();
        let e = MetricsServer::bind(addr, Exposure::Loopback).unwrap_err();
        assert_eq!(
            e.to_string(),
            "metrics address 0.0.0.0:0 is not loopback; set metrics_remote = true in [daemon] \
             to serve it beyond this machine"
        );
        let v6: SocketAddr = "[::]:0".parse().unwrap();
        assert!(MetricsServer::bind(v6, Exposure::Loopback).is_err());
    }

    #[test]
    fn exposure_of_config_remote_only_when_it_says_so() {
        let parse = |t: &str| crate::Config::parse("t.toml", t).unwrap().daemon;
        assert_eq!(Exposure::of(&parse("")), Exposure::Loopback);
        let remote = parse("[daemon]\nmetrics = \"0.0.0.0:9464\"\nmetrics_remote = true\n");
        assert_eq!(Exposure::of(&remote), Exposure::Remote);
    }

    /// One GET of /metrics; the answer's text, or the error when none came within `limit`.
    fn scrape(addr: SocketAddr, limit: Duration) -> io::Result<String> {
        let mut s = TcpStream::connect_timeout(&addr, limit)?;
        s.set_read_timeout(Some(limit))?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")?;
        let mut text = String::new();
        s.read_to_string(&mut text)?;
        Ok(text)
    }

    fn loopback() -> MetricsServer {
        MetricsServer::bind("127.0.0.1:0".parse().unwrap(), Exposure::Loopback).unwrap()
    }

    // See: issue 39, item 3: 3 idle connections kept a scrape unanswered for 20 s.
    #[test]
    fn spawn_three_idle_connections_do_not_hold_up_a_scrape() {
        let server = loopback().spawn(Arc::new(Metrics::new()), |_| {}).unwrap();
        let addr = server.local_addr();
        let idle: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect();
        // Served one at a time, this scrape waited for each idle one's 10 s deadline.
        let answer = scrape(addr, Duration::from_secs(3)).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        drop(idle);
        server.stop();
    }

    #[test]
    fn spawn_connections_over_the_limit_get_503_and_idle_ones_are_closed() {
        let server = loopback()
            .with_deadlines(Duration::from_secs(2), Duration::from_secs(3))
            .spawn(Arc::new(Metrics::new()), |_| {})
            .unwrap();
        let addr = server.local_addr();
        let mut idle: Vec<TcpStream> = (0..MetricsServer::MAX_CONNECTIONS)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        // Accepted after all of those (accept takes them in order): over the limit, and
        // answered without waiting for a request.
        let mut over = TcpStream::connect(addr).unwrap();
        over.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut answer = String::new();
        over.read_to_string(&mut answer).unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 503 Service Unavailable"),
            "{answer}"
        );
        // An idle connection is closed by the server at its head deadline (2 s).
        idle[0]
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(idle[0].read(&mut buf).unwrap(), 0);
        // And with the idle ones gone, scrapes are answered again (a bounded retry: the
        // server joins the threads of closed connections as it accepts the next).
        let served = (0..50).any(|_| {
            let ok = scrape(addr, Duration::from_secs(3))
                .is_ok_and(|a| a.starts_with("HTTP/1.1 200 OK"));
            if !ok {
                std::thread::sleep(Duration::from_millis(100));
            }
            ok
        });
        assert!(served);
        drop(idle);
        server.stop();
    }

    #[test]
    fn bind_loopback_and_explicit_remote_allowed() {
        let s = MetricsServer::bind("127.0.0.1:0".parse().unwrap(), Exposure::Loopback).unwrap();
        assert_ne!(s.local_addr().port(), 0);
        let r = MetricsServer::bind("0.0.0.0:0".parse().unwrap(), Exposure::Remote).unwrap();
        assert!(r.local_addr().ip().is_unspecified());
    }
}
