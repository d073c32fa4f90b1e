//! Typed bodies both ways: a serde value sent as body keys, an answer's
//! keys read into a type, with the key at fault named when they do not fit
//! (as the server's [`Keys`](crate::app::Keys) extractor names it).

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Answer, ClientError};
use crate::message::Body;

/// Which message's body keys did not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The value given to send as the request's keys.
    Request,
    /// The answer's keys, read into the type asked for.
    Answer,
}

/// Body keys that do not fit: the key at fault, when one is, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeysError {
    /// Which message's keys.
    pub side: Side,
    /// The key at fault, as a path (`author.name`, `tags[2]`); `None` when
    /// the fault is with the keys as a whole (a value that is not a map).
    pub key: Option<String>,
    /// What is wrong with it, as serde says it (`invalid type: string
    /// "seven", expected u64`, ``missing field `id` ``).
    pub reason: String,
}

impl fmt::Display for KeysError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whose = match self.side {
            Side::Request => "the request's",
            Side::Answer => "the answer's",
        };
        match &self.key {
            Some(key) => write!(f, "{whose} body key `{key}` does not fit: {}", self.reason),
            None => write!(f, "{whose} body keys do not fit: {}", self.reason),
        }
    }
}

impl std::error::Error for KeysError {}

/// The path serde_path_to_error reports, `None` for the value as a whole.
fn key_of(path: &serde_path_to_error::Path) -> Option<String> {
    let path = path.to_string();
    (path != ".").then_some(path)
}

/// A body whose keys are `value`'s fields (D9), with empty content: what
/// reqwest's `.json(&value)` is to HTTP. A field that serialises to `null`
/// is left out (a body key may not be `null`); `content` and `encoding` are
/// the body's own and refused as keys, as is anything that does not
/// serialise to a map.
///
/// ```
/// use jsontp_protocol::io_adapters::client::body_from_keys;
/// use serde::Serialize;
///
/// #[derive(Serialize)]
/// struct NewPost<'a> { title: &'a str, tags: Vec<&'a str>, draft: Option<bool> }
///
/// let body = body_from_keys(&NewPost { title: "hello", tags: vec!["rust"], draft: None })?;
/// assert_eq!(body.extra()["title"], "hello");
/// assert!(!body.extra().contains_key("draft"));
/// # Ok::<(), jsontp_protocol::io_adapters::client::ClientError>(())
/// ```
pub fn body_from_keys<T: Serialize + ?Sized>(value: &T) -> Result<Body, ClientError> {
    keys_into(Body::empty(), value)
}

/// `body` with `value`'s fields added as keys, its content kept.
pub(crate) fn keys_into<T: Serialize + ?Sized>(mut body: Body, value: &T) -> Result<Body, ClientError> {
    let refused = |key: Option<String>, reason: String| {
        ClientError::Keys(KeysError {
            side: Side::Request,
            key,
            reason,
        })
    };
    let value = serde_path_to_error::serialize(value, serde_json::value::Serializer)
        .map_err(|e| refused(key_of(e.path()), e.inner().to_string()))?;
    let Value::Object(map) = value else {
        return Err(refused(
            None,
            format!("body keys are a map of names, and this is {}", kind(&value)),
        ));
    };
    for (key, value) in map {
        if value.is_null() {
            continue;
        }
        body = body
            .with_extra(key.as_str(), value)
            .map_err(|e| refused(Some(key), e.to_string()))?;
    }
    Ok(body)
}

/// What a JSON value is, in words.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

impl Answer {
    /// The answer's body keys (all but `content` and `encoding`, D9) read
    /// into `T`: what reqwest's `.json::<T>()` is to HTTP. When they do not
    /// fit, the error names the key at fault ([`KeysError`]).
    ///
    /// The status is not looked at: an error answer's keys are read as
    /// any other's, so check
    /// [`response.status`](crate::message::Response::status) first where
    /// an error answer carries other keys.
    pub fn keys<T: DeserializeOwned>(&self) -> Result<T, ClientError> {
        let keys = Value::Object(self.response.body.extra().clone());
        serde_path_to_error::deserialize(keys).map_err(|e| {
            ClientError::Keys(KeysError {
                side: Side::Answer,
                key: key_of(e.path()),
                reason: e.inner().to_string(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Response, Status, StatusCode};
    use serde::Deserialize;
    use std::collections::BTreeMap;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct Author {
        name: String,
    }

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct Post {
        id: u64,
        author: Author,
        tags: Vec<String>,
    }

    fn answer(body: Body) -> Answer {
        Answer {
            response: Response::new(Status::new(StatusCode::OK, "fine")).with_body(body),
            forgiven: Vec::new(),
            continued: false,
        }
    }

    #[test]
    fn a_value_goes_out_as_keys_and_comes_back_as_itself() {
        let post = Post {
            id: 7,
            author: Author { name: "Ada".into() },
            tags: vec!["rust".into()],
        };
        let body = body_from_keys(&post).expect("keys");
        assert_eq!(body.extra()["author"]["name"], "Ada");
        assert_eq!(answer(body).keys::<Post>().expect("fits"), post);
    }

    #[test]
    fn a_mismatch_names_the_key() {
        let body = Body::empty()
            .with_extra("id", serde_json::json!(7))
            .and_then(|b| b.with_extra("author", serde_json::json!({"name": 3})))
            .and_then(|b| b.with_extra("tags", serde_json::json!([])))
            .expect("body");
        let error = answer(body).keys::<Post>().expect_err("name is a number");
        let ClientError::Keys(keys) = &error else {
            panic!("{error:?}")
        };
        assert_eq!(keys.key.as_deref(), Some("author.name"));
        assert_eq!(
            error.to_string(),
            "the answer's body key `author.name` does not fit: invalid type: integer `3`, expected a string"
        );
        let missing = answer(Body::empty()).keys::<Post>().expect_err("no keys");
        assert_eq!(
            missing.to_string(),
            "the answer's body keys do not fit: missing field `id`"
        );
    }

    #[test]
    fn keys_that_cannot_be_sent_are_refused_by_name() {
        let mut reserved = BTreeMap::new();
        reserved.insert("content", 1);
        let error = body_from_keys(&reserved).expect_err("reserved");
        assert_eq!(
            error.to_string(),
            "the request's body key `content` does not fit: is a reserved body key"
        );
        let error = body_from_keys(&[1, 2]).expect_err("a list");
        assert_eq!(
            error.to_string(),
            "the request's body keys do not fit: body keys are a map of names, and this is a list"
        );
        let mut bad = BTreeMap::new();
        bad.insert("nested", BTreeMap::from([((1, 2), "a tuple key")]));
        let error = body_from_keys(&bad).expect_err("a map key that is not a string");
        let ClientError::Keys(keys) = &error else {
            panic!("{error:?}")
        };
        assert_eq!(keys.key.as_deref(), Some("nested"), "{error}");
    }
}
