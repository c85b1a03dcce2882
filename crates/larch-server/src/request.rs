//! Parsing a request's target: the route, the commit, the context path and the query.

use crate::error::ApiError;
use larch_core::Hash;

/// Most segments a context path may have.
pub(crate) const MAX_PATH_SEGMENTS: usize = 64;
/// Longest name (after percent-decoding) a path segment may have.
pub(crate) const MAX_NAME_BYTES: usize = 4096;

/// Which commit a request reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CommitRef {
    /// The commit the default branch points to.
    Head,
    /// A commit by hash.
    Hash(Hash),
}

/// What a request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    Health,
    Metrics,
    Commit(CommitRef),
    RawBytes { commit: CommitRef, path: Vec<Vec<u8>>, depth: Option<u32> },
    List { commit: CommitRef, path: Vec<Vec<u8>>, offset: u64, length: Option<u64> },
    Hash { commit: CommitRef, path: Vec<Vec<u8>> },
}

/// The metrics label of an endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Health = 0,
    Metrics = 1,
    Commits = 2,
    RawBytes = 3,
    List = 4,
    Hash = 5,
    Other = 6,
}

impl Endpoint {
    pub const ALL: [Endpoint; 7] = [
        Endpoint::Health,
        Endpoint::Metrics,
        Endpoint::Commits,
        Endpoint::RawBytes,
        Endpoint::List,
        Endpoint::Hash,
        Endpoint::Other,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Endpoint::Health => "health",
            Endpoint::Metrics => "metrics",
            Endpoint::Commits => "commits",
            Endpoint::RawBytes => "raw_bytes",
            Endpoint::List => "list",
            Endpoint::Hash => "hash",
            Endpoint::Other => "other",
        }
    }
}

/// The endpoint a path names, for metrics, even when the rest of the request is malformed.
pub(crate) fn endpoint_of(path: &str) -> Endpoint {
    let mut parts = path.trim_start_matches('/').split('/');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some("health"), None, ..) => Endpoint::Health,
        (Some("metrics"), None, ..) => Endpoint::Metrics,
        (Some("commits"), Some(_), None, _) => Endpoint::Commits,
        (Some("context"), Some(_), Some("raw"), Some("bytes")) => Endpoint::RawBytes,
        (Some("context"), Some(_), Some("list"), _) => Endpoint::List,
        (Some("context"), Some(_), Some("hash"), _) => Endpoint::Hash,
        _ => Endpoint::Other,
    }
}

/// Parses a request target (`path?query`, as sent).
pub(crate) fn parse(path: &str, query: Option<&str>) -> Result<Route, ApiError> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let route = match segments.as_slice() {
        ["health"] => Route::Health,
        ["metrics"] => Route::Metrics,
        ["commits", commit] | ["commits", commit, ""] => Route::Commit(parse_commit(commit)?),
        ["context", commit, "raw", "bytes", rest @ ..] => {
            let query = Query::parse(query, &["depth"])?;
            let depth = query.number("depth")?.map(|d| u32::try_from(d).unwrap_or(u32::MAX));
            Route::RawBytes { commit: parse_commit(commit)?, path: parse_path(rest)?, depth }
        }
        ["context", commit, "list", rest @ ..] => {
            let query = Query::parse(query, &["offset", "length"])?;
            Route::List {
                commit: parse_commit(commit)?,
                path: parse_path(rest)?,
                offset: query.number("offset")?.unwrap_or(0),
                length: query.number("length")?,
            }
        }
        ["context", commit, "hash", rest @ ..] => {
            Route::Hash { commit: parse_commit(commit)?, path: parse_path(rest)? }
        }
        _ => {
            return Err(ApiError::not_found(
                "unknown_endpoint",
                format!(
                    "no endpoint at {path:?} (see /health, /metrics, /commits/<commit>, /context/<commit>/raw/bytes/<path>, /context/<commit>/list/<path>, /context/<commit>/hash/<path>)"
                ),
            ));
        }
    };
    if matches!(route, Route::Health | Route::Metrics | Route::Commit(_)) {
        Query::parse(query, &[])?;
    }
    Ok(route)
}

/// `head`, a base58 `Co…` hash or 64 hex digits.
pub(crate) fn parse_commit(text: &str) -> Result<CommitRef, ApiError> {
    let text = std::str::from_utf8(&percent_decode(text)?)
        .map_err(|_| {
            ApiError::bad_request("malformed_hash", "a commit is `head`, a `Co…` hash or 64 hex digits")
        })?
        .to_string();
    if text == "head" {
        return Ok(CommitRef::Head);
    }
    let parsed = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        Hash::from_hex(&text)
    } else {
        Hash::from_base58(&text)
    };
    parsed.map(CommitRef::Hash).map_err(|err| {
        ApiError::bad_request(
            "malformed_hash",
            format!("{text:?} is not a commit (`head`, a `Co…` hash or 64 hex digits): {err}"),
        )
    })
}

/// The path segments after the endpoint, percent-decoded. A trailing `/` is ignored; an empty
/// segment elsewhere is an error.
fn parse_path(segments: &[&str]) -> Result<Vec<Vec<u8>>, ApiError> {
    let segments = match segments.split_last() {
        Some((&"", rest)) => rest,
        _ => segments,
    };
    if segments.len() > MAX_PATH_SEGMENTS {
        return Err(ApiError::bad_request(
            "malformed_path",
            format!("a path has at most {MAX_PATH_SEGMENTS} segments, this one {}", segments.len()),
        ));
    }
    segments
        .iter()
        .map(|segment| {
            if segment.is_empty() {
                return Err(ApiError::bad_request("malformed_path", "empty path segment (`//`)"));
            }
            let name = percent_decode(segment)?;
            if name.len() > MAX_NAME_BYTES {
                return Err(ApiError::bad_request(
                    "malformed_path",
                    format!("a path segment has at most {MAX_NAME_BYTES} bytes"),
                ));
            }
            Ok(name)
        })
        .collect()
}

/// Decodes `%XX` escapes to bytes (other bytes as they are; a `+` stays a `+` in a path); a `%`
/// not followed by two hex digits is an error.
pub(crate) fn percent_decode(text: &str) -> Result<Vec<u8>, ApiError> {
    // `percent-encoding` passes a malformed escape through as it is: refuse it first.
    let bytes = text.as_bytes();
    let malformed = bytes.iter().enumerate().find(|(i, byte)| {
        **byte == b'%'
            && !bytes.get(i + 1..i + 3).is_some_and(|digits| digits.iter().all(u8::is_ascii_hexdigit))
    });
    if let Some((i, _)) = malformed {
        return Err(ApiError::bad_request(
            "malformed_path",
            format!("bad percent escape at byte {i} of {text:?}"),
        ));
    }
    Ok(percent_encoding::percent_decode_str(text).collect())
}

/// A parsed query string (`application/x-www-form-urlencoded`: `+` is a space, `%XX` a byte) with
/// only known parameters, each at most once.
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(query: Option<&str>, allowed: &[&str]) -> Result<Query, ApiError> {
        let mut params: Vec<(String, String)> = Vec::new();
        for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            if !allowed.contains(&key.as_ref()) {
                let expected = if allowed.is_empty() { "none".to_string() } else { allowed.join(", ") };
                return Err(ApiError::bad_request(
                    "malformed_query",
                    format!("unknown query parameter {key:?} (accepted: {expected})"),
                ));
            }
            if params.iter().any(|(k, _)| *k == key) {
                return Err(ApiError::bad_request(
                    "malformed_query",
                    format!("query parameter {key:?} repeated"),
                ));
            }
            params.push((key.into_owned(), value.into_owned()));
        }
        Ok(Query(params))
    }

    fn number(&self, key: &str) -> Result<Option<u64>, ApiError> {
        let Some((_, value)) = self.0.iter().find(|(k, _)| k == key) else {
            return Ok(None);
        };
        value.parse::<u64>().map(Some).map_err(|_| {
            ApiError::bad_request(
                "malformed_query",
                format!("query parameter {key} must be a non-negative integer, got {value:?}"),
            )
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn routes_parse() {
        let hash = Hash::of_bytes(b"x");
        assert_eq!(parse("/commits/head", None), Ok(Route::Commit(CommitRef::Head)));
        assert_eq!(
            parse(&format!("/commits/{}", hash.to_hex()), None),
            Ok(Route::Commit(CommitRef::Hash(hash)))
        );
        assert_eq!(parse(&format!("/commits/{hash}"), None), Ok(Route::Commit(CommitRef::Hash(hash))));
        assert_eq!(
            parse("/context/head/raw/bytes/a/b%2Fc/", Some("depth=2")),
            Ok(Route::RawBytes {
                commit: CommitRef::Head,
                path: vec![b"a".to_vec(), b"b/c".to_vec()],
                depth: Some(2)
            })
        );
        assert_eq!(
            parse("/context/head/raw/bytes", None),
            Ok(Route::RawBytes { commit: CommitRef::Head, path: vec![], depth: None })
        );
        assert_eq!(
            parse("/context/head/list/x", Some("offset=3&length=4")),
            Ok(Route::List {
                commit: CommitRef::Head,
                path: vec![b"x".to_vec()],
                offset: 3,
                length: Some(4)
            })
        );
    }

    #[test]
    fn malformed_requests_are_400_or_404() {
        let status = |path: &str, query: Option<&str>| parse(path, query).err().map(|e| (e.status, e.kind));
        assert_eq!(status("/commits/Cofoo", None), Some((400, "malformed_hash")));
        assert_eq!(status("/commits/abcd", None), Some((400, "malformed_hash")));
        assert_eq!(status("/context/head/raw/bytes/a//b", None), Some((400, "malformed_path")));
        assert_eq!(status("/context/head/raw/bytes/a%zz", None), Some((400, "malformed_path")));
        assert_eq!(status("/context/head/raw/bytes/a%4", None), Some((400, "malformed_path")));
        assert_eq!(status("/context/head/raw/bytes/a", Some("depth=-1")), Some((400, "malformed_query")));
        assert_eq!(status("/context/head/raw/bytes/a", Some("deep=1")), Some((400, "malformed_query")));
        assert_eq!(status("/context/head/list/a", Some("offset=1&offset=2")), Some((400, "malformed_query")));
        assert_eq!(status("/health", Some("x=1")), Some((400, "malformed_query")));
        assert_eq!(status("/nothing", None), Some((404, "unknown_endpoint")));
        let long = "/a".repeat(MAX_PATH_SEGMENTS + 1);
        assert_eq!(status(&format!("/context/head/hash{long}"), None), Some((400, "malformed_path")));
    }

    #[test]
    fn path_steps_are_percent_decoded_to_bytes() {
        assert_eq!(
            parse("/context/head/hash/a%2Fb/%C3%A9t%C3%A9/%00%ff/a+b/odd%20name", None),
            Ok(Route::Hash {
                commit: CommitRef::Head,
                path: vec![
                    b"a/b".to_vec(),
                    "été".as_bytes().to_vec(),
                    vec![0x00, 0xff],
                    b"a+b".to_vec(),
                    b"odd name".to_vec()
                ]
            })
        );
        let err = parse("/context/head/hash/ok/a%4g", None).err().map(|e| e.message).unwrap_or_default();
        assert!(err.contains("bad percent escape at byte 1"), "{err}");
    }

    #[test]
    fn query_values_are_form_decoded() {
        let list = |query: &str| parse("/context/head/list/x", Some(query));
        let route = |offset, length| {
            Ok(Route::List { commit: CommitRef::Head, path: vec![b"x".to_vec()], offset, length })
        };
        // `%2B` is a `+` (which `u64` parsing accepts before digits); a `+` itself is a space.
        assert_eq!(list("offset=%2B3&length=%34"), route(3, Some(4)));
        assert_eq!(list("&offset=3&&"), route(3, None));
        let err = list("offset=+3").err().map(|e| (e.status, e.kind, e.message));
        assert_eq!(
            err,
            Some((
                400,
                "malformed_query",
                "query parameter offset must be a non-negative integer, got \" 3\"".into()
            ))
        );
        let err = list("length=1+2").err().map(|e| e.message).unwrap_or_default();
        assert!(err.contains("got \"1 2\""), "{err}");
        // Keys are decoded too, and a bad escape is no parameter of ours.
        assert_eq!(list("off%73et=5"), route(5, None));
        assert_eq!(list("offset=1%zz").err().map(|e| (e.status, e.kind)), Some((400, "malformed_query")));
    }

    #[test]
    fn endpoints_are_labelled() {
        assert_eq!(endpoint_of("/context/x/raw/bytes/a"), Endpoint::RawBytes);
        assert_eq!(endpoint_of("/context/x/list"), Endpoint::List);
        assert_eq!(endpoint_of("/commits/x"), Endpoint::Commits);
        assert_eq!(endpoint_of("/zz"), Endpoint::Other);
    }
}
