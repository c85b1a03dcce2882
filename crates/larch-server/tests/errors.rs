//! Errors over real HTTP: 404, 400, 405, 413 and 429 with their JSON bodies, and the metrics text.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{TestServer, request};
use larch_core::{CommitInfo, Hash};
use larch_server::{Limits, ServerConfig};
use larch_store::Repo;

fn store() -> (tempfile::TempDir, std::path::PathBuf, Hash) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let mut repo = Repo::open(&path).unwrap();
    let mut tree = repo.empty_tree();
    for i in 0..50 {
        tree.add(&["dir", &format!("v{i:02}")], vec![i as u8; 100]).unwrap();
    }
    tree.add(&["value"], b"x".to_vec()).unwrap();
    let head = repo.commit(&tree, &[], CommitInfo::tezos(1_600_000_000, "one")).unwrap();
    repo.close().unwrap();
    (dir, path, head)
}

/// Asserts the status and the JSON error's kind; returns the message.
fn expect_error(server: &TestServer, target: &str, status: u16, kind: &str) -> String {
    let (actual, body) = server.json(target);
    assert_eq!((actual, body["kind"].as_str()), (status, Some(kind)), "{target}: {body}");
    body["error"].as_str().unwrap().to_string()
}

#[test]
fn unknown_commits_and_paths_are_404() {
    let (_dir, path, _) = store();
    let server = TestServer::start(&path, ServerConfig::default());
    let absent = Hash::of_bytes(b"not a commit");
    let message = expect_error(&server, &format!("/commits/{absent}"), 404, "unknown_commit");
    assert!(message.contains(&absent.to_base58()), "{message}");
    expect_error(&server, &format!("/context/{}/raw/bytes/value", absent.to_hex()), 404, "unknown_commit");
    expect_error(&server, "/context/head/raw/bytes/nothing", 404, "unknown_path");
    expect_error(&server, "/context/head/list/nothing/deeper", 404, "unknown_path");
    expect_error(&server, "/context/head/hash/nothing", 404, "unknown_path");
    // A path through a value does not exist.
    expect_error(&server, "/context/head/raw/bytes/value/below", 404, "unknown_path");
    expect_error(&server, "/nowhere", 404, "unknown_endpoint");
}

#[test]
fn malformed_requests_are_400() {
    let (_dir, path, head) = store();
    let server = TestServer::start(&path, ServerConfig::default());
    let mut bad_checksum = head.to_base58();
    bad_checksum.pop();
    bad_checksum.push('z');
    for target in [
        format!("/commits/{bad_checksum}"),
        "/commits/xyz".to_string(),
        format!("/commits/{}", &head.to_hex()[..63]),
        "/context/Co0OIl/raw/bytes".to_string(),
    ] {
        expect_error(&server, &target, 400, "malformed_hash");
    }
    expect_error(&server, "/context/head/raw/bytes/dir//v01", 400, "malformed_path");
    expect_error(&server, "/context/head/raw/bytes/dir/%zz", 400, "malformed_path");
    expect_error(&server, "/context/head/raw/bytes/dir?depth=two", 400, "malformed_query");
    expect_error(&server, "/context/head/raw/bytes/dir?depth=-1", 400, "malformed_query");
    expect_error(&server, "/context/head/raw/bytes/dir?colour=red", 400, "malformed_query");
    expect_error(&server, "/context/head/list/dir?offset=1&offset=2", 400, "malformed_query");
    // A query is form-encoded: `+` is a space, not part of a number.
    expect_error(&server, "/context/head/list/dir?offset=1+", 400, "malformed_query");
    expect_error(&server, "/context/head/raw/bytes/dir?depth=1000", 400, "depth_too_large");
    expect_error(&server, "/context/head/list/value", 400, "not_a_directory");
    let post = request(server.addr, "POST", "/context/head/raw/bytes/value");
    assert_eq!(post.status, 405);
    let body: serde_json::Value = serde_json::from_slice(&post.body).unwrap();
    assert_eq!(body["kind"], "method_not_allowed");
}

#[test]
fn oversized_responses_are_413() {
    let (_dir, path, _) = store();
    let limits = Limits { max_nodes: 20, max_response_bytes: 4000, ..Limits::default() };
    let server = TestServer::start(&path, ServerConfig { limits, ..ServerConfig::default() });
    // 50 entries of `dir` are above 20 entries.
    expect_error(&server, "/context/head/raw/bytes/dir", 413, "response_too_large");
    expect_error(&server, "/context/head/list/dir", 413, "response_too_large");
    // A page within the limit is served, a cut-off too (root + dir + value, and dir's 50 cut
    // entries would be too many only at depth 2).
    let (status, page) = server.json("/context/head/list/dir?offset=10&length=20");
    assert_eq!((status, page.as_array().map(Vec::len)), (200, Some(20)));
    assert_eq!(server.json("/context/head/raw/bytes?depth=1").0, 200);
    expect_error(&server, "/context/head/raw/bytes?depth=2", 413, "response_too_large");
    // 50 values of 100 bytes are 10,000 hex digits: above 4000 bytes even with room for entries.
    let limits = Limits { max_nodes: 1000, max_response_bytes: 4000, ..Limits::default() };
    let server = TestServer::start(&path, ServerConfig { limits, ..ServerConfig::default() });
    expect_error(&server, "/context/head/raw/bytes/dir", 413, "response_too_large");
    assert_eq!(server.json("/context/head/raw/bytes/dir/v03").0, 200);
}

#[test]
fn requests_above_the_rate_are_429() {
    let (_dir, path, _) = store();
    // A burst of 5 and a refill of one token every 1000 s: the 6th request in a row is refused.
    let limits = Limits { rate_per_second: 0.001, burst: 5.0, ..Limits::default() };
    let server = TestServer::start(&path, ServerConfig { limits, ..ServerConfig::default() });
    let statuses: Vec<u16> = (0..8).map(|_| server.get("/context/head/raw/bytes/value").status).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429, 429]);
    let refused = server.get("/health");
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("retry-after"), Some("1"));
    let body: serde_json::Value = serde_json::from_slice(&refused.body).unwrap();
    assert_eq!(body["kind"], "rate_limited");
    assert_eq!(server.state.config().limits.burst, 5.0);
}

#[test]
fn metrics_count_requests_latencies_cache_and_head() {
    let (_dir, path, head) = store();
    let server = TestServer::start(&path, ServerConfig::default());
    for _ in 0..7 {
        assert_eq!(server.get("/context/head/raw/bytes/value").status, 200);
    }
    for _ in 0..3 {
        assert_eq!(server.get("/context/head/raw/bytes/missing").status, 404);
    }
    assert_eq!(server.get("/commits/head").status, 200);
    let response = server.get("/metrics");
    assert_eq!(response.status, 200);
    assert!(response.header("content-type").unwrap().starts_with("text/plain; version=0.0.4"));
    let text = response.text();
    let value = |prefix: &str| -> f64 {
        let line = text
            .lines()
            .find(|line| line.starts_with(prefix))
            .unwrap_or_else(|| panic!("{prefix} in\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(value("larch_http_requests_total{endpoint=\"raw_bytes\",status=\"200\"}"), 7.0);
    assert_eq!(value("larch_http_requests_total{endpoint=\"raw_bytes\",status=\"404\"}"), 3.0);
    assert_eq!(value("larch_http_requests_total{endpoint=\"commits\",status=\"200\"}"), 1.0);
    assert_eq!(value("larch_http_request_duration_seconds_count{endpoint=\"raw_bytes\"}"), 10.0);
    assert_eq!(value("larch_http_request_duration_seconds_bucket{endpoint=\"raw_bytes\",le=\"+Inf\"}"), 10.0);
    assert!(value("larch_http_request_duration_seconds_sum{endpoint=\"raw_bytes\"}") > 0.0);
    let ratio = value("larch_store_cache_hit_ratio ");
    assert!((0.0..=1.0).contains(&ratio), "{ratio}");
    let stats = server.state.store_stats();
    assert!(stats.cache_hits + stats.cache_misses > 0);
    assert!(value("larch_store_cache_hits_total ") + value("larch_store_cache_misses_total ") > 0.0);
    assert_eq!(value("larch_store_nodes_read_ahead_total "), stats.nodes_read_ahead as f64);
    assert_eq!(value("larch_store_commits "), 1.0);
    assert_eq!(value(&format!("larch_head_info{{hash=\"{}\"}}", head.to_base58())), 1.0);
    assert_eq!(value("larch_head_date_seconds "), 1_600_000_000.0);
    // Every line is a comment or `name{labels} number`.
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let number = line.rsplit(' ').next().unwrap();
        assert!(number.parse::<f64>().is_ok(), "{line}");
    }
}

#[test]
fn a_directory_that_is_not_a_store_fails_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let err = larch_server::ServerState::open(dir.path(), ServerConfig::default()).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("cannot open the store") && message.contains("not a larch store"), "{message}");
    let missing =
        larch_server::ServerState::open(dir.path().join("absent"), ServerConfig::default()).unwrap_err();
    assert!(missing.to_string().contains("absent"), "{missing}");
    // Nothing was created in the directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn a_client_that_never_finishes_its_headers_is_disconnected() {
    use std::io::{Read, Write};
    let (_dir, path, _) = store();
    let config = ServerConfig {
        header_read_timeout: std::time::Duration::from_millis(300),
        ..ServerConfig::default()
    };
    let server = TestServer::start(&path, config);
    let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    stream.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n").unwrap();
    let start = std::time::Instant::now();
    let mut rest = Vec::new();
    // The server closes the connection (possibly after a 408) instead of waiting forever.
    let _ = stream.read_to_end(&mut rest);
    let waited = start.elapsed();
    assert!(waited < std::time::Duration::from_secs(5), "still open after {waited:?}");
    assert!(rest.is_empty() || rest.starts_with(b"HTTP/1.1 408"), "{:?}", String::from_utf8_lossy(&rest));
    // Other clients are still served.
    assert_eq!(server.get("/health").status, 200);
}
