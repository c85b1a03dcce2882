//! A real S3-compatible server on loopback for the tests: `s3s-fs` (a file-system S3 server of
//! the s3s project, made for integration tests), started in-process on `127.0.0.1:0` with
//! authentication on, and stopped, restarted on the same port, or made to answer 503 to inject
//! faults. Objects are files under `root/BUCKET/`, so a test can damage one.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod proxy;

use hyper_util::rt::{TokioExecutor, TokioIo};
use larch_remote::ClientSettings;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The credentials the test server accepts.
pub const ACCESS_KEY: &str = "larch-test-key";
/// Its secret.
pub const SECRET_KEY: &str = "larch-test-secret";
/// The bucket the tests use.
pub const BUCKET: &str = "larch";

/// A running (or stopped) test server.
pub struct S3Server {
    pub root: tempfile::TempDir,
    pub addr: SocketAddr,
    runtime: tokio::runtime::Runtime,
    task: Option<tokio::task::JoinHandle<()>>,
    /// While set, every request is answered 503 Service Unavailable.
    pub failing: Arc<AtomicBool>,
    /// While set, every `GET` of a key ending with it is answered 503 (other requests served).
    pub failing_gets: Arc<Mutex<Option<String>>>,
}

impl S3Server {
    /// Starts a server on a free loopback port with an empty bucket [`BUCKET`].
    pub fn start() -> S3Server {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join(BUCKET)).unwrap();
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut server = S3Server {
            root,
            addr,
            runtime,
            task: None,
            failing: Arc::new(AtomicBool::new(false)),
            failing_gets: Arc::new(Mutex::new(None)),
        };
        server.serve(listener);
        server
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let fs = s3s_fs::FileSystem::new(self.root.path()).unwrap();
        let mut builder = s3s::service::S3ServiceBuilder::new(fs);
        builder.set_auth(s3s::auth::SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
        let service = builder.build();
        let failing = self.failing.clone();
        let failing_gets = self.failing_gets.clone();
        self.task = Some(self.runtime.spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((socket, _)) = listener.accept().await else { continue };
                // As S3 servers do: without it, an answer's headers and body, written apart, wait
                // for the client's delayed acknowledgement (40 ms on Linux) on every request.
                let _ = socket.set_nodelay(true);
                let service = service.clone();
                let failing = failing.clone();
                let failing_gets = failing_gets.clone();
                connections.spawn(async move {
                    let handler =
                        hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                            let service = service.clone();
                            let failing = failing.load(Ordering::SeqCst)
                                || (request.method() == http::Method::GET
                                    && failing_gets
                                        .lock()
                                        .unwrap()
                                        .as_ref()
                                        .is_some_and(|key| request.uri().path().ends_with(key.as_str())));
                            async move {
                                if failing {
                                    let mut response =
                                        http::Response::new(s3s::Body::from("unavailable".to_string()));
                                    *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
                                    return Ok(response);
                                }
                                hyper::service::Service::call(&service, request).await
                            }
                        });
                    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let _ = builder.serve_connection(TokioIo::new(socket), handler).await;
                });
            }
        }));
    }

    /// Stops the server: the listener and every connection are closed (requests are refused).
    pub fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = self.runtime.block_on(task);
        }
    }

    /// Starts the stopped server again on the same port, with the same objects.
    pub fn restart(&mut self) {
        let mut tries = 0;
        let listener = loop {
            match self.runtime.block_on(tokio::net::TcpListener::bind(self.addr)) {
                Ok(listener) => break listener,
                Err(e) if tries < 50 => {
                    tries += 1;
                    eprintln!("rebinding {}: {e}", self.addr);
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("rebinding {}: {e}", self.addr),
            }
        };
        self.serve(listener);
    }

    /// The endpoint URL.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Client settings for this server (no environment needed), with short timeouts.
    pub fn settings(&self) -> ClientSettings {
        ClientSettings {
            call_timeout: Duration::from_secs(5),
            max_retries: 2,
            connect_timeout: Duration::from_secs(1),
            config: self.config(),
        }
    }

    /// The client's configuration keys for this server.
    pub fn config(&self) -> Vec<(String, String)> {
        vec![
            ("aws_endpoint".into(), self.endpoint()),
            ("aws_access_key_id".into(), ACCESS_KEY.into()),
            ("aws_secret_access_key".into(), SECRET_KEY.into()),
            ("aws_region".into(), "us-east-1".into()),
            ("aws_allow_http".into(), "true".into()),
        ]
    }

    /// The environment a `larch` process needs to reach this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", self.endpoint()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }

    /// The file holding the object `key` of the bucket.
    pub fn object_file(&self, key: &str) -> PathBuf {
        self.root.path().join(BUCKET).join(key)
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}
