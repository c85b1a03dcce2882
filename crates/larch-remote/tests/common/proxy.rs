//! A fault-injecting HTTP proxy on loopback, between larch's client and the test server: every
//! request is forwarded unchanged (the `Host` header kept, so the client's signature still
//! checks out), unless a rule, switchable at runtime, says to delay it, answer it with an error
//! status (500, 503, or S3's `SlowDown`), drop its connection without an answer, or flip a byte of
//! the answer's body. Each request is recorded (time, method, path, status) so that a test can
//! check the client's retries and their spacing.

use super::S3Server;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use larch_remote::ClientSettings;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Body = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// What the proxy does to a request a rule matches.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Waits this long, then forwards it.
    Delay(Duration),
    /// Answers this status (500, 503, ...) without forwarding.
    Status(u16),
    /// Answers 503 with S3's `SlowDown` error (throttling).
    SlowDown,
    /// Closes the connection without an answer.
    Drop,
    /// Forwards it and flips a bit in the middle of the answer's body.
    Corrupt,
}

/// A rule: requests of `method` (any: `None`) whose path contains `path` (any: `None`) get
/// `fault`, the next `times` of them (always: `None`).
#[derive(Clone, Debug)]
pub struct Rule {
    /// `GET`, `PUT`, `DELETE`, ...
    pub method: Option<&'static str>,
    /// A part of the path (`/BUCKET/PREFIX/NAME`).
    pub path: Option<String>,
    /// What to do.
    pub fault: Fault,
    /// How many requests it still applies to.
    pub times: Option<usize>,
}

impl Rule {
    /// Every request gets `fault`.
    pub fn all(fault: Fault) -> Rule {
        Rule { method: None, path: None, fault, times: None }
    }

    /// Requests of `method` whose path contains `path` get `fault`.
    pub fn on(method: &'static str, path: &str, fault: Fault) -> Rule {
        Rule { method: Some(method), path: Some(path.to_string()), fault, times: None }
    }
}

/// A request the proxy saw.
#[derive(Clone, Debug)]
pub struct Seen {
    /// When it arrived.
    pub at: Instant,
    /// Its method.
    pub method: String,
    /// Its path.
    pub path: String,
    /// The status answered (0: connection dropped, 502: the server unreachable).
    pub status: u16,
}

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    seen: Vec<Seen>,
    arrived: Vec<(String, String)>,
}

/// The proxy, running on its own runtime.
pub struct FaultProxy {
    /// Its loopback address.
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    _runtime: tokio::runtime::Runtime,
}

impl FaultProxy {
    /// Starts a proxy to `server` on a free loopback port, forwarding everything.
    pub fn start(server: &S3Server) -> FaultProxy {
        let upstream = server.addr;
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
        connector.set_nodelay(true);
        let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(connector);
        let shared = state.clone();
        runtime.spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else { continue };
                let _ = socket.set_nodelay(true);
                let (state, client) = (shared.clone(), client.clone());
                tokio::spawn(async move {
                    let handler = hyper::service::service_fn(move |request| {
                        handle(request, upstream, state.clone(), client.clone())
                    });
                    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let _ = builder.serve_connection(TokioIo::new(socket), handler).await;
                });
            }
        });
        FaultProxy { addr, state, _runtime: runtime }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a rule (the first matching rule applies).
    pub fn add(&self, rule: Rule) {
        self.lock().rules.push(rule);
    }

    /// Replaces every rule with `rule` (none: forward everything).
    pub fn set(&self, rule: Option<Rule>) {
        self.lock().rules = rule.into_iter().collect();
    }

    /// Removes every rule: everything is forwarded.
    pub fn clear(&self) {
        self.set(None);
    }

    /// The requests seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.lock().seen.clone()
    }

    /// The requests received so far (method, path), answered or not.
    pub fn arrived(&self) -> Vec<(String, String)> {
        self.lock().arrived.clone()
    }

    /// Client settings for the test server, through this proxy.
    pub fn settings(&self, server: &S3Server) -> ClientSettings {
        let mut settings = server.settings();
        for (key, value) in &mut settings.config {
            if key == "aws_endpoint" {
                *value = format!("http://{}", self.addr);
            }
        }
        settings
    }
}

fn full(status: u16, body: &str) -> http::Response<Body> {
    let mut response =
        http::Response::new(Full::new(Bytes::from(body.to_string())).map_err(|e| match e {}).boxed());
    *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
    response
}

async fn handle(
    request: http::Request<Incoming>,
    upstream: SocketAddr,
    state: Arc<Mutex<State>>,
    client: hyper_util::client::legacy::Client<hyper_util::client::legacy::connect::HttpConnector, Incoming>,
) -> Result<http::Response<Body>, std::io::Error> {
    let at = Instant::now();
    let (method, path) = (request.method().to_string(), request.uri().path().to_string());
    let fault = {
        let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
        state.arrived.push((method.clone(), path.clone()));
        let found = state.rules.iter().position(|rule| {
            rule.method.is_none_or(|m| m == method) && rule.path.as_ref().is_none_or(|p| path.contains(p))
        });
        found.map(|i| {
            let rule = &mut state.rules[i];
            let fault = rule.fault.clone();
            if let Some(times) = rule.times.as_mut() {
                *times -= 1;
                if *times == 0 {
                    state.rules.remove(i);
                }
            }
            fault
        })
    };
    let record = |status: u16| {
        let seen = Seen { at, method: method.clone(), path: path.clone(), status };
        state.lock().unwrap_or_else(|p| p.into_inner()).seen.push(seen);
    };
    match &fault {
        Some(Fault::Delay(delay)) => tokio::time::sleep(*delay).await,
        Some(Fault::Status(status)) => {
            record(*status);
            return Ok(full(*status, "<Error><Code>InternalError</Code><Message>injected</Message></Error>"));
        }
        Some(Fault::SlowDown) => {
            record(503);
            return Ok(full(
                503,
                "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>",
            ));
        }
        Some(Fault::Drop) => {
            record(0);
            return Err(std::io::Error::other("connection dropped by the fault proxy"));
        }
        Some(Fault::Corrupt) | None => {}
    }
    let (mut parts, body) = request.into_parts();
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    parts.uri = format!("http://{upstream}{target}").parse().unwrap();
    let response = match client.request(http::Request::from_parts(parts, body)).await {
        Ok(response) => response,
        Err(_) => {
            record(502);
            return Ok(full(502, "the server is unreachable"));
        }
    };
    record(response.status().as_u16());
    let (parts, body) = response.into_parts();
    if matches!(fault, Some(Fault::Corrupt)) {
        let bytes = body.collect().await.map_err(std::io::Error::other)?.to_bytes();
        let mut bytes = bytes.to_vec();
        if !bytes.is_empty() {
            let at = bytes.len() / 2;
            bytes[at] ^= 0x20;
        }
        let body = Full::new(Bytes::from(bytes)).map_err(|e| match e {}).boxed();
        return Ok(http::Response::from_parts(parts, body));
    }
    Ok(http::Response::from_parts(parts, body.map_err(|e| Box::new(e) as _).boxed()))
}
