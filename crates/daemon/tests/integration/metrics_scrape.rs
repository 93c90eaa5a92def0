//! The metrics endpoint as Prometheus sees it: the HTTP answers, `promtool check metrics`
//! on the text, and a real Prometheus server (Debian's `prometheus` package, which CI
//! installs) scraping it on loopback until the target is up and the values arrive.
//!
//! Without `prometheus` and `promtool` on the PATH these tests fail, saying so: they are
//! what shows the exposition works with the real thing.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use threadbalance_daemon::metrics::Metrics;
use threadbalance_daemon::metrics::exposition::{ExpositionThread, Exposure, MetricsServer};

/// Status line, headers and body of one HTTP/1.1 GET.
fn get(addr: SocketAddr, path: &str) -> (String, String, String) {
    try_get(addr, path).unwrap()
}

/// The same, or None when the server is not there (yet) or the answer is cut.
fn try_get(addr: SocketAddr, path: &str) -> Option<(String, String, String)> {
    try_get_accept(addr, path, "*/*")
}

/// A GET with this `Accept:` header.
fn try_get_accept(addr: SocketAddr, path: &str, accept: &str) -> Option<(String, String, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    Some((status.to_string(), headers.to_string(), body.to_string()))
}

/// Percent-encodes a query parameter.
fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'_' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Metrics with a known window recorded, served on a free loopback port.
fn serve() -> (Arc<Metrics>, ExpositionThread) {
    let m = Arc::new(Metrics::new());
    m.set_managed(2, 7);
    for _ in 0..3 {
        m.record_move("speed-rotate");
    }
    m.set_domain_utilization("node0", 0.5);
    m.record_decision("speed");
    m.set_own_cpu_seconds(0.25);
    let server = MetricsServer::bind("127.0.0.1:0".parse().unwrap(), Exposure::Loopback).unwrap();
    let t = server
        .spawn(m.clone(), |e| eprintln!("metrics: {e}"))
        .unwrap();
    (m, t)
}

fn tool(name: &str) -> String {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()));
    assert!(
        found,
        "`{name}` is not installed: install Debian's `prometheus` package \
         (apt-get install -y prometheus), as .ci/run does; this test needs the real server"
    );
    name.to_string()
}

#[test]
fn exposition_get_metrics_serves_the_registry() {
    let (m, t) = serve();
    let om = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
    let (status, headers, body) = try_get_accept(t.local_addr(), "/metrics", om).unwrap();
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers
            .contains("Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    assert!(headers.contains(&format!("Content-Length: {}", body.len())));
    assert_eq!(body, m.encode().unwrap());
    // Any other client gets the text format 0.0.4.
    let (status, headers, body) = get(t.local_addr(), "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(headers.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"));
    assert_eq!(body, m.encode_text().unwrap());
    assert!(body.contains("# TYPE threadbalance_moves_total counter\n"));
    let (status, _, _) = get(t.local_addr(), "/");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    // Garbage instead of HTTP: a 400, and the server goes on serving.
    let mut s = TcpStream::connect(t.local_addr()).unwrap();
    s.write_all(b"\x16\x03\x01 hello\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
    assert_eq!(get(t.local_addr(), "/metrics").0, "HTTP/1.1 200 OK");
    t.stop();
}

#[test]
fn exposition_text_format_passes_promtool_check_metrics() {
    let promtool = tool("promtool");
    let (_m, t) = serve();
    let (_, _, body) = get(t.local_addr(), "/metrics");
    t.stop();
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool check metrics:\n{said}\n---\n{body}"
    );
    assert_eq!(said.trim(), "", "promtool found lint problems:\n{said}");
}

/// A Prometheus server this test started; stopped (SIGTERM, then waited for) when dropped,
/// whatever the test's outcome.
struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `result` of a Prometheus instant query, or None while it cannot answer yet.
fn query(addr: SocketAddr, q: &str) -> Option<Vec<serde_json::Value>> {
    let (status, _, body) = try_get(addr, &format!("/api/v1/query?query={}", encode(q)))?;
    if !status.contains("200") {
        return None;
    }
    // The body may be chunked; the JSON object is between the first `{` and the last `}`.
    let json = &body[body.find('{')?..=body.rfind('}')?];
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v["data"]["result"].as_array().cloned()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits (up to two minutes, a bound and not a measurement) for `q` to give one sample,
/// and returns its value.
fn wait_for(addr: SocketAddr, q: &str, log: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if let Some(r) = query(addr, q)
            && let Some(v) = r.first().and_then(|s| s["value"][1].as_str())
        {
            return v.to_string();
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!(
        "Prometheus never answered {q}; its log:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

#[test]
fn exposition_scraped_by_a_real_prometheus_target_up_and_values_arrive() {
    let prometheus = tool("prometheus");
    let (_m, t) = serve();
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: threadbalance\n    scrape_interval: 1s\n    \
             static_configs:\n      - targets: ['{}']\n",
            t.local_addr()
        ),
    )
    .unwrap();
    let web: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let log = tmp.path().join("prometheus.log");
    let child = Command::new(prometheus)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            tmp.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(tmp.path().join("prometheus.err")).unwrap())
        .spawn()
        .unwrap();
    let server = Prometheus(child);
    let err_log = tmp.path().join("prometheus.err");
    let job = "{job=\"threadbalance\"}";
    assert_eq!(wait_for(web, &format!("up{job}"), &err_log), "1");
    assert_eq!(
        wait_for(
            web,
            "threadbalance_moves_total{reason=\"speed-rotate\"}",
            &err_log
        ),
        "3"
    );
    assert_eq!(
        wait_for(web, "threadbalance_managed_threads", &err_log),
        "7"
    );
    assert_eq!(
        wait_for(
            web,
            "threadbalance_domain_utilization_ratio{domain=\"node0\"}",
            &err_log
        ),
        "0.5"
    );
    drop(server);
    t.stop();
}
