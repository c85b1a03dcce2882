//! Test harness: a server on 127.0.0.1:0 in a runtime of its own, and a minimal blocking HTTP/1.1
//! client over `TcpStream` (one request per connection).

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use larch_server::{ServerConfig, ServerState};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A running server; dropping it shuts it down and waits for it.
pub struct TestServer {
    pub addr: SocketAddr,
    pub state: Arc<ServerState>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TestServer {
    pub fn start(store: &Path, config: ServerConfig) -> TestServer {
        TestServer::serve(ServerState::open(store, config).expect("open the store read-only"))
    }

    /// Serves `state` (a replica's, say).
    pub fn serve(state: Arc<ServerState>) -> TestServer {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = state.clone();
        let thread = std::thread::spawn(move || {
            runtime
                .block_on(larch_server::serve(listener, served, async {
                    let _ = stopped.await;
                }))
                .unwrap();
        });
        TestServer { addr, state, stop: Some(stop), thread: Some(thread) }
    }

    pub fn get(&self, target: &str) -> HttpResponse {
        request(self.addr, "GET", target)
    }

    pub fn json(&self, target: &str) -> (u16, serde_json::Value) {
        let response = self.get(target);
        let value = serde_json::from_slice(&response.body)
            .unwrap_or_else(|e| panic!("{target}: body is not JSON ({e}): {:?}", response.text()));
        (response.status, value)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A parsed response.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Sends one request with `Connection: close` and reads the whole response.
pub fn request(addr: SocketAddr, method: &str, target: &str) -> HttpResponse {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(stream, "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    parse_response(&raw)
}

pub fn parse_response(raw: &[u8]) -> HttpResponse {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("end of headers");
    let head = String::from_utf8(raw[..split].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let body = raw[split + 4..].to_vec();
    let response = HttpResponse { status, headers, body };
    if let Some(length) = response.header("content-length") {
        assert_eq!(length.parse::<usize>().unwrap(), response.body.len(), "content-length");
    }
    response
}
