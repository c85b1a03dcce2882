//! `s3://BUCKET[/PREFIX]`: where a store's lower layer lives in object storage.

use crate::error::RemoteError;

/// A parsed object-storage URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteUrl {
    /// The bucket.
    pub bucket: String,
    /// The prefix inside the bucket, without leading or trailing `/` (may be empty).
    pub prefix: String,
}

impl RemoteUrl {
    /// Whether `text` looks like an object-storage URL (`s3://`), as opposed to a directory.
    pub fn is_remote(text: &str) -> bool {
        text.starts_with("s3://")
    }

    /// Parses `s3://BUCKET[/PREFIX]`.
    pub fn parse(text: &str) -> Result<RemoteUrl, RemoteError> {
        let bad = |reason: &str| RemoteError::BadUrl { url: text.to_string(), reason: reason.to_string() };
        let rest = text.strip_prefix("s3://").ok_or_else(|| bad("it does not start with s3://"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad("no bucket"));
        }
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|part| part == "." || part == "..")
            || (!prefix.is_empty() && prefix.split('/').any(str::is_empty))
        {
            return Err(bad("the prefix has an empty, `.` or `..` component"));
        }
        Ok(RemoteUrl { bucket: bucket.to_string(), prefix: prefix.to_string() })
    }

    /// The object key of `name` under the prefix.
    pub fn key(&self, name: &str) -> String {
        if self.prefix.is_empty() { name.to_string() } else { format!("{}/{name}", self.prefix) }
    }
}

impl std::fmt::Display for RemoteUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.prefix.is_empty() {
            write!(f, "s3://{}", self.bucket)
        } else {
            write!(f, "s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_print_back() {
        let url = RemoteUrl::parse("s3://bucket/a/b/").ok();
        assert_eq!(url, Some(RemoteUrl { bucket: "bucket".into(), prefix: "a/b".into() }));
        assert_eq!(
            url.map(|u| (u.to_string(), u.key("chunk.1"))),
            Some(("s3://bucket/a/b".into(), "a/b/chunk.1".into()))
        );
        let bare = RemoteUrl::parse("s3://bucket").ok();
        assert_eq!(bare.map(|u| u.key("x")), Some("x".to_string()));
        for bad in ["s3://", "s3:///p", "/tmp/x", "s3://b/a//c", "s3://b/../c"] {
            assert!(RemoteUrl::parse(bad).is_err(), "{bad}");
        }
        assert!(RemoteUrl::is_remote("s3://b") && !RemoteUrl::is_remote("dir/s3://"));
    }
}
