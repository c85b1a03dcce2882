//! The object-storage client behind a synchronous API: an `object_store` S3 client driven by a
//! small tokio runtime of its own. Each call runs on that runtime and the calling thread waits
//! for it on a channel (so it may be called from any thread, a tokio worker included), bounded by
//! a timeout; the client retries failed requests with backoff within that bound.

use crate::error::RemoteError;
use crate::url::RemoteUrl;
use bytes::Bytes;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{
    BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig,
};
use std::future::Future;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

/// How the client talks to the object store.
#[derive(Clone, Debug)]
pub struct ClientSettings {
    /// The longest one call may take, the client's retries included.
    pub call_timeout: Duration,
    /// The client's retries of a failed request (5xx, throttling, connection errors).
    pub max_retries: usize,
    /// The longest a connection attempt may take.
    pub connect_timeout: Duration,
    /// Configuration keys applied over the environment's (`aws_endpoint`, `aws_access_key_id`,
    /// ...: the names of `object_store`'s `AmazonS3ConfigKey`), for callers that do not configure
    /// through the environment.
    pub config: Vec<(String, String)>,
}

impl Default for ClientSettings {
    fn default() -> ClientSettings {
        ClientSettings {
            call_timeout: Duration::from_secs(30),
            max_retries: 3,
            connect_timeout: Duration::from_secs(2),
            config: Vec::new(),
        }
    }
}

/// A connection to one prefix of one bucket.
#[derive(Debug)]
pub struct Client {
    /// Always `Some` until the client is dropped (`Drop` takes it to shut it down).
    runtime: Option<tokio::runtime::Runtime>,
    store: Arc<dyn ObjectStore>,
    url: RemoteUrl,
    settings: ClientSettings,
}

impl Drop for Client {
    /// Shuts the runtime down without waiting for its tasks, so a client may be dropped anywhere,
    /// including inside another runtime's asynchronous context (a server shutting down), where
    /// dropping a runtime would panic.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Client {
    /// The runtime's handle (the runtime lives until the client is dropped).
    fn handle(&self) -> &tokio::runtime::Handle {
        match &self.runtime {
            Some(runtime) => runtime.handle(),
            None => unreachable!("the runtime is taken only by Drop"),
        }
    }

    /// A client of `url`, configured from the environment (`AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_ENDPOINT` or `AWS_ENDPOINT_URL`, `AWS_REGION`,
    /// `AWS_ALLOW_HTTP`, ...). No request is sent.
    pub fn connect(url: &RemoteUrl, settings: ClientSettings) -> Result<Client, RemoteError> {
        let config = |source| RemoteError::Config { url: url.to_string(), source };
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(50),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: settings.max_retries,
            retry_timeout: settings.call_timeout,
        };
        let options = ClientOptions::new()
            .with_timeout(settings.call_timeout)
            .with_connect_timeout(settings.connect_timeout);
        // The client options first: the environment's keys (`AWS_ALLOW_HTTP`, ...) go into them.
        let mut builder = AmazonS3Builder::new().with_client_options(options);
        for (key, value) in std::env::vars() {
            if key.starts_with("AWS_")
                && let Ok(key) = key.to_ascii_lowercase().parse::<AmazonS3ConfigKey>()
            {
                builder = builder.with_config(key, value);
            }
        }
        let mut builder = builder.with_bucket_name(&url.bucket).with_retry(retry);
        // AWS_ENDPOINT_URL is the name the AWS tools use; `from_env` reads AWS_ENDPOINT.
        if std::env::var_os("AWS_ENDPOINT").is_none()
            && let Ok(endpoint) = std::env::var("AWS_ENDPOINT_URL")
        {
            builder = builder.with_endpoint(endpoint);
        }
        for (key, value) in &settings.config {
            let key = key.parse::<AmazonS3ConfigKey>().map_err(config)?;
            builder = builder.with_config(key, value);
        }
        let store = builder.build().map_err(config)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("larch-s3")
            .enable_all()
            .build()
            .map_err(|e| RemoteError::Local { path: "tokio runtime".into(), op: "start", source: e })?;
        Ok(Client { runtime: Some(runtime), store: Arc::new(store), url: url.clone(), settings })
    }

    /// The URL of the prefix.
    pub fn url(&self) -> &RemoteUrl {
        &self.url
    }

    fn path(&self, name: &str) -> ObjectPath {
        ObjectPath::from(self.url.key(name))
    }

    /// Runs `call` on the client's runtime, waiting at most the call timeout.
    fn run<T, F>(&self, name: &str, op: &'static str, call: F) -> Result<T, RemoteError>
    where
        T: Send + 'static,
        F: Future<Output = object_store::Result<T>> + Send + 'static,
    {
        let error = |message: String, not_found| RemoteError::Request {
            url: self.url.to_string(),
            name: name.to_string(),
            op,
            message,
            not_found,
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let timeout = self.settings.call_timeout;
        self.handle().spawn(async move {
            let result = tokio::time::timeout(timeout, call).await;
            let _ = tx.send(result);
        });
        match rx.recv() {
            Ok(Ok(Ok(value))) => Ok(value),
            Ok(Ok(Err(e))) => Err(error(describe(&e), matches!(e, object_store::Error::NotFound { .. }))),
            Ok(Err(_)) => Err(error(format!("no answer within {timeout:?}"), false)),
            Err(_) => Err(error("the client's runtime stopped".into(), false)),
        }
    }

    /// The whole object `name`.
    pub fn get(&self, name: &str) -> Result<Bytes, RemoteError> {
        let (store, path) = (self.store.clone(), self.path(name));
        self.run(name, "get", async move { store.get(&path).await?.bytes().await })
    }

    /// The whole object `name`, `None` when it does not exist.
    pub fn get_opt(&self, name: &str) -> Result<Option<Bytes>, RemoteError> {
        match self.get(name) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The whole objects `names`, in order, with at most `in_flight` requests at once (each bounded
    /// by the call timeout, the client's retries included). The first failure ends the call: its
    /// error names its object, and the requests still running are dropped.
    pub fn get_many(&self, names: &[String], in_flight: usize) -> Result<Vec<Bytes>, RemoteError> {
        use futures_util::stream::{self, StreamExt, TryStreamExt};
        let timeout = self.settings.call_timeout;
        let paths: Vec<(usize, ObjectPath)> = names.iter().map(|name| self.path(name)).enumerate().collect();
        let store = self.store.clone();
        let calls = paths.into_iter().map(move |(i, path)| {
            let store = store.clone();
            async move {
                match tokio::time::timeout(timeout, async move { store.get(&path).await?.bytes().await })
                    .await
                {
                    Ok(Ok(bytes)) => Ok(bytes),
                    Ok(Err(e)) => Err((i, Some(e))),
                    Err(_) => Err((i, None)),
                }
            }
        });
        let all = stream::iter(calls).buffered(in_flight.max(1)).try_collect::<Vec<Bytes>>();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle().spawn(async move {
            let _ = tx.send(all.await);
        });
        let error = |i: usize, message: String, not_found| RemoteError::Request {
            url: self.url.to_string(),
            name: names.get(i).cloned().unwrap_or_default(),
            op: "get",
            message,
            not_found,
        };
        match rx.recv() {
            Ok(Ok(all)) => Ok(all),
            Ok(Err((i, Some(e)))) => {
                Err(error(i, describe(&e), matches!(e, object_store::Error::NotFound { .. })))
            }
            Ok(Err((i, None))) => Err(error(i, format!("no answer within {timeout:?}"), false)),
            Err(_) => Err(error(0, "the client's runtime stopped".into(), false)),
        }
    }

    /// The bytes `range` of the object `name` (a range request).
    pub fn get_range(&self, name: &str, range: Range<u64>) -> Result<Bytes, RemoteError> {
        let (store, path) = (self.store.clone(), self.path(name));
        self.run(name, "get (range)", async move { store.get_range(&path, range).await })
    }

    /// Writes the object `name` (replacing it).
    pub fn put(&self, name: &str, bytes: Bytes) -> Result<(), RemoteError> {
        let (store, path) = (self.store.clone(), self.path(name));
        self.run(name, "put", async move { store.put(&path, PutPayload::from(bytes)).await.map(|_| ()) })
    }

    /// Writes the object `name` only if it does not exist (`If-None-Match: *`); `false` when it
    /// existed.
    pub fn put_new(&self, name: &str, bytes: Bytes) -> Result<bool, RemoteError> {
        let (store, path) = (self.store.clone(), self.path(name));
        self.run(name, "put (if absent)", async move {
            match store.put_opts(&path, PutPayload::from(bytes), PutOptions::from(PutMode::Create)).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
                    Ok(false)
                }
                Err(e) => Err(e),
            }
        })
    }

    /// Deletes the object `name` (no error when absent).
    pub fn delete(&self, name: &str) -> Result<(), RemoteError> {
        let (store, path) = (self.store.clone(), self.path(name));
        self.run(name, "delete", async move {
            match store.delete(&path).await {
                Err(object_store::Error::NotFound { .. }) => Ok(()),
                other => other,
            }
        })
    }

    /// The objects directly under the prefix: names and lengths.
    pub fn list(&self) -> Result<Vec<(String, u64)>, RemoteError> {
        let store = self.store.clone();
        let prefix = (!self.url.prefix.is_empty()).then(|| ObjectPath::from(self.url.prefix.as_str()));
        let listed = self.run("", "list", async move { store.list_with_delimiter(prefix.as_ref()).await })?;
        Ok(listed
            .objects
            .into_iter()
            .filter_map(|meta| meta.location.filename().map(|name| (name.to_string(), meta.size)))
            .collect())
    }
}

/// The message of `e` with its whole chain of causes: the client's outer messages hide the cause
/// ("builder error").
fn describe(e: &object_store::Error) -> String {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server stops inside its own runtime and drops its replica's client there: dropping a
    /// runtime in an asynchronous context panics unless the client shuts its own down first.
    #[test]
    fn a_client_dropped_inside_another_runtime_does_not_panic() -> Result<(), RemoteError> {
        let url = RemoteUrl::parse("s3://bucket/prefix")?;
        let client = Client::connect(&url, ClientSettings::default())?;
        let outer = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| RemoteError::Local { path: "tokio runtime".into(), op: "start", source: e })?;
        outer.block_on(async move { drop(client) });
        Ok(())
    }
}
