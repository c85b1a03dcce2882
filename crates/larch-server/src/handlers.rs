//! Answering one request: rate limit, method, route, then the endpoint.

use crate::Body;
use crate::error::ApiError;
use crate::render::{self, Budget};
use crate::request::{self, Route};
use crate::state::ServerState;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

const JSON: &str = "application/json";
const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A successful body and its content type.
struct Reply {
    content_type: &'static str,
    body: Vec<u8>,
}

impl Reply {
    fn json(body: Vec<u8>) -> Reply {
        Reply { content_type: JSON, body }
    }

    fn value(value: &serde_json::Value) -> Reply {
        Reply::json(value.to_string().into_bytes())
    }
}

/// Answers `request`, counting it in the metrics.
pub(crate) async fn handle(state: Arc<ServerState>, request: Request<Incoming>) -> Response<Body> {
    let start = Instant::now();
    let path = request.uri().path().to_string();
    let query = request.uri().query().map(str::to_string);
    let endpoint = request::endpoint_of(&path);
    let result = if !state.bucket.try_acquire() {
        state.metrics.rate_limited.fetch_add(1, Ordering::Relaxed);
        Err(ApiError::new(
            429,
            "rate_limited",
            "too many requests: the server's request rate limit is reached",
        ))
    } else if request.method() != Method::GET && request.method() != Method::HEAD {
        Err(ApiError::new(405, "method_not_allowed", format!("{} is not allowed: use GET", request.method())))
    } else if state.config().blocking_reads {
        offload(&state, path, query).await
    } else {
        match respond(&state, &path, query.as_deref(), true) {
            Err(err) if err.is_offload() => offload(&state, path, query).await,
            other => other,
        }
    };
    let response = match result {
        Ok(reply) => build(StatusCode::OK, reply.content_type, reply.body),
        Err(err) => {
            let status = StatusCode::from_u16(err.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = build(status, JSON, err.body().into_bytes());
            if err.status == 429 {
                response.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("1"));
            }
            response
        }
    };
    let elapsed = start.elapsed();
    state.metrics.record(endpoint, response.status().as_u16(), elapsed);
    tracing::trace!(
        endpoint = endpoint.label(),
        status = response.status().as_u16(),
        micros = elapsed.as_micros() as u64,
        "request"
    );
    response
}

/// Answers on the blocking pool, at most one large request per core at a time.
async fn offload(state: &Arc<ServerState>, path: String, query: Option<String>) -> Result<Reply, ApiError> {
    let _permit = state
        .heavy
        .acquire()
        .await
        .map_err(|_| ApiError::new(503, "shutting_down", "the server is stopping"))?;
    let state = state.clone();
    tokio::task::spawn_blocking(move || respond(&state, &path, query.as_deref(), false)).await.unwrap_or_else(
        |err| Err(ApiError::new(500, "internal_error", format!("request task failed: {err}"))),
    )
}

fn build(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// The answer to a GET of `path?query`; `inline` bounds the work (see [`render::INLINE_ENTRIES`]).
fn respond(state: &ServerState, path: &str, query: Option<&str>, inline: bool) -> Result<Reply, ApiError> {
    let limits = state.limits();
    match request::parse(path, query)? {
        Route::Health => {
            let head = state.head().map(|hash| hash.to_base58());
            let mut health = serde_json::json!({
                "status": "ok",
                "store": state.path().display().to_string(),
                "head": head,
                "commits": state.commit_count(),
                "seconds_since_reload": state.seconds_since_reload(),
            });
            if let (Some(replica), Some(fields)) = (state.replica_health(), health.as_object_mut()) {
                fields.insert("replica".into(), replica);
            }
            Ok(Reply::value(&health))
        }
        Route::Metrics => Ok(Reply {
            content_type: PROMETHEUS,
            body: state.metrics.render(&state.store_view()).into_bytes(),
        }),
        Route::Commit(commit) => {
            let (details, _) = state.resolve(commit)?;
            Ok(Reply::value(&render::commit_json(&details)))
        }
        Route::RawBytes { commit, path, depth } => {
            let depth = depth.unwrap_or(limits.max_depth);
            if depth > limits.max_depth {
                return Err(ApiError::bad_request(
                    "depth_too_large",
                    format!("depth {depth} is above the server's limit {}", limits.max_depth),
                ));
            }
            let tree = subtree(state, commit, &path)?;
            let mut out = Vec::with_capacity(64);
            let mut budget = Budget::new(limits.max_nodes, limits.max_response_bytes, inline);
            render::raw_context(&tree, depth, &mut out, &mut budget)?;
            Ok(Reply::json(out))
        }
        Route::List { commit, path, offset, length } => {
            let tree = subtree(state, commit, &path)?;
            if tree.kind() != larch_core::Kind::Node {
                return Err(ApiError::bad_request(
                    "not_a_directory",
                    format!("{} is a value, not a directory", display_path(&path)),
                ));
            }
            let mut out = Vec::with_capacity(256);
            let mut budget = Budget::new(limits.max_nodes, limits.max_response_bytes, inline);
            render::list(&tree, offset, length, &mut out, &mut budget)?;
            Ok(Reply::json(out))
        }
        Route::Hash { commit, path } => {
            let tree = subtree(state, commit, &path)?;
            Ok(Reply::value(&serde_json::json!({
                "hash": tree.hash().to_base58(),
                "kind": render::kind_name(tree.kind()),
            })))
        }
    }
}

/// The tree at `path` in `commit`; 404 when the commit or the path does not exist (a path through
/// a value does not exist).
fn subtree(
    state: &ServerState,
    commit: request::CommitRef,
    path: &[Vec<u8>],
) -> Result<larch_core::Tree, ApiError> {
    let (_, tree) = state.resolve(commit)?;
    if path.is_empty() {
        return Ok(tree);
    }
    tree.find_tree(path).map_err(|e| ApiError::tree(&e))?.ok_or_else(|| {
        ApiError::not_found("unknown_path", format!("no value or directory at {}", display_path(path)))
    })
}

fn display_path(path: &[Vec<u8>]) -> String {
    if path.is_empty() {
        return "/".to_string();
    }
    path.iter().map(|name| String::from_utf8_lossy(name)).collect::<Vec<_>>().join("/")
}
