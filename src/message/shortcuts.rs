//! Shortcuts for the responses handlers write most: one call instead of
//! `Response::new(Status::new(StatusCode::…, "…"))`, and the `405` and
//! `OPTIONS` answers of D11 with their `allowed-methods` body.

use std::borrow::Cow;

use serde_json::Value;

use super::{Body, Method, Response, Status, StatusCode};

impl From<Status> for Response {
    /// A response with this status, no headers and an empty body.
    fn from(status: Status) -> Self {
        Response::new(status)
    }
}

macro_rules! shortcuts {
    ($( $name:ident => $code:ident ),* $(,)?) => {
        impl Response {
            $(
                #[doc = concat!(
                    "A `", stringify!($code), "` response with this `human-message` ",
                    "(never empty: an empty one becomes the reason phrase, D12)."
                )]
                pub fn $name(human_message: impl Into<Cow<'static, str>>) -> Response {
                    Response::from_code(StatusCode::$code, human_message)
                }
            )*
        }
    };
}

shortcuts! {
    ok => OK,
    created => CREATED,
    no_content => NO_CONTENT,
    bad_request => BAD_REQUEST,
    unauthorized => UNAUTHORIZED,
    forbidden => FORBIDDEN,
    not_found => NOT_FOUND,
    conflict => CONFLICT,
    internal_error => INTERNAL_SERVER_ERROR,
}

/// The `allowed-methods` body key of D11: the method names, in `allowed`'s
/// order.
fn allowed_methods_body(allowed: &[Method]) -> Body {
    let names = allowed.iter().map(|m| Value::from(m.as_str())).collect();
    // The key is not `content`/`encoding` and the value is not null, so
    // `with_extra` cannot refuse it.
    Body::empty()
        .with_extra("allowed-methods", Value::Array(names))
        .unwrap_or_default()
}

impl Response {
    /// A response with `code` and this `human-message`, no headers and an
    /// empty body.
    pub fn from_code(code: StatusCode, human_message: impl Into<Cow<'static, str>>) -> Response {
        Response::new(Status::new(code, human_message))
    }

    /// The `200` answer to `OPTIONS` (D11): body key `allowed-methods`
    /// listing `allowed`.
    pub fn allowed_methods(allowed: &[Method]) -> Response {
        Response::ok(format!("allowed here: {}", names(allowed))).with_body(allowed_methods_body(allowed))
    }

    /// `405` for a method the application does not serve on a resource
    /// (D11), with `allowed-methods` in the body.
    pub fn method_not_allowed(method: Method, allowed: &[Method]) -> Response {
        Response::from_code(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{method} is not allowed here; allowed: {}", names(allowed)),
        )
        .with_body(allowed_methods_body(allowed))
    }
}

/// `GET, POST`, or `none` for an empty list.
fn names(methods: &[Method]) -> String {
    if methods.is_empty() {
        return "none".to_owned();
    }
    methods.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortcuts_carry_their_code_and_message() {
        let cases = [
            (Response::ok("fine"), 200),
            (Response::created("stored"), 201),
            (Response::no_content("gone"), 204),
            (Response::bad_request("no"), 400),
            (Response::unauthorized("who"), 401),
            (Response::forbidden("never"), 403),
            (Response::not_found("nothing"), 404),
            (Response::conflict("a folder"), 409),
            (Response::internal_error("oops"), 500),
            (
                Response::from_code(StatusCode::TOO_MANY_REQUESTS, "slow down"),
                429,
            ),
        ];
        for (response, code) in cases {
            assert_eq!(response.status.code.as_u16(), code);
            assert!(!response.status.human_message.is_empty());
            assert!(response.body.content().is_empty());
        }
        assert_eq!(Response::not_found("").status.human_message, "Not Found");
        assert_eq!(
            Response::from(Status::new(StatusCode::OK, "x")),
            Response::ok("x")
        );
    }

    #[test]
    fn d11_allowed_methods_in_the_body() {
        let options = Response::allowed_methods(&[Method::Put, Method::Options]);
        assert_eq!(options.status.code, StatusCode::OK);
        assert_eq!(
            options.body.extra()["allowed-methods"],
            serde_json::json!(["PUT", "OPTIONS"])
        );
        let refused = Response::method_not_allowed(Method::Delete, &[Method::Get, Method::Post]);
        assert_eq!(refused.status.code, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(
            refused.status.human_message,
            "DELETE is not allowed here; allowed: GET, POST"
        );
        assert_eq!(
            refused.body.extra()["allowed-methods"],
            serde_json::json!(["GET", "POST"])
        );
        assert_eq!(
            Response::method_not_allowed(Method::Get, &[])
                .status
                .human_message,
            "GET is not allowed here; allowed: none"
        );
    }
}
