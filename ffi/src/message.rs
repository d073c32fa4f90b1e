//! `jsontp_request` and `jsontp_response`: the core's messages, made by
//! the caller to send or by a connection from what it read (then borrowed
//! from the event that carries them). Made from C's values, they are
//! judged by the core's own rules (headers by D8's grammar, identity
//! content as UTF-8 text by D9), so that what is sent is what the peer can
//! read.

use std::ffi::c_char;
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

use jsontp_protocol::message::{
    self, Body, Encoding, Headers, Method, Resource, Status, StatusCode, ValueError,
};

use crate::{
    Fail, Outcome, borrow, borrow_mut, bytes_in, free, guard, jsontp_result, optional_text_in, out, put,
    put_text, text_in,
};

/// A request: made with `jsontp_request_new` to send, or read by a server
/// connection and borrowed from its event.
pub struct jsontp_request {
    pub(crate) inner: message::Request,
    headers: OnceLock<String>,
    body: OnceLock<String>,
}

/// A response: made with `jsontp_response_new` to answer with, or read by
/// a client connection and borrowed from its event.
pub struct jsontp_response {
    pub(crate) inner: message::Response,
    headers: OnceLock<String>,
    body: OnceLock<String>,
}

impl jsontp_request {
    pub(crate) fn of(inner: message::Request) -> jsontp_request {
        jsontp_request {
            inner,
            headers: OnceLock::new(),
            body: OnceLock::new(),
        }
    }
}

impl jsontp_response {
    pub(crate) fn of(inner: message::Response) -> jsontp_response {
        jsontp_response {
            inner,
            headers: OnceLock::new(),
            body: OnceLock::new(),
        }
    }
}

/// One JSON value given as text.
fn json_of(text: &str, what: &str) -> Result<Value, Fail> {
    serde_json::from_str(text).map_err(|e| Fail::invalid(format!("{what} is not one JSON value ({e})")))
}

fn set_header(headers: &mut Headers, name: &str, value: &Value) -> Outcome {
    headers
        .insert_json(name, value)
        .map_err(|e| Fail::invalid(format!("header {name:?}: {e}")))
}

fn encoding_of(name: Option<&str>) -> Result<Encoding, Fail> {
    match name {
        None => Ok(Encoding::Identity),
        Some(name) => name.parse().map_err(|_| {
            Fail::invalid(format!(
                "encoding {name:?} is not one of identity, gzip, deflate, br"
            ))
        }),
    }
}

fn content_error(e: ValueError) -> Fail {
    Fail::invalid(format!(
        "content {e}; give the encoding \"gzip\", \"deflate\" or \"br\" for content that is not UTF-8 text (D9)"
    ))
}

/// The body with new content, its other keys kept.
fn with_content(body: &Body, content: &[u8], encoding: Encoding) -> Result<Body, Fail> {
    let mut new = Body::shared(Arc::from(content), encoding).map_err(content_error)?;
    for (key, value) in body.extra() {
        new = new
            .with_extra(key.clone(), value.clone())
            .map_err(|e| Fail::invalid(format!("body key {key:?} {e}")))?;
    }
    Ok(new)
}

fn with_key(body: &Body, key: &str, value: Value) -> Result<Body, Fail> {
    body.clone()
        .with_extra(key.to_owned(), value)
        .map_err(|e| Fail::invalid(format!("body key {key:?} {e}")))
}

fn json_text(cache: &OnceLock<String>, map: impl FnOnce() -> Map<String, Value>) -> &str {
    cache.get_or_init(|| Value::Object(map()).to_string())
}

/// Writes a borrowed byte range.
///
/// # Safety
/// The output pointers as `put` requires (checked here).
unsafe fn put_bytes(bytes: &[u8], out_data: *mut *const u8, out_len: *mut usize) -> Outcome {
    let out_data = out(out_data, "out_data")?;
    let out_len = out(out_len, "out_len")?;
    // SAFETY: both checked non-NULL, writable as the caller promises.
    unsafe {
        put(out_data, bytes.as_ptr());
        put(out_len, bytes.len());
    }
    Ok(())
}

/// Makes a request: `method` such as `"GET"` (upper case), `resource`
/// such as `"/hello.txt"` (D7), both NUL-terminated. No headers, empty
/// content. On success `*out_request` is the new request.
///
/// Ownership: the caller owns the request and frees it with
/// `jsontp_request_free`; sending it copies it (the content is shared, not
/// copied). Thread-safety: a request may move between threads, but not be
/// used by two at once.
///
/// # Safety
/// The strings are NULL or NUL-terminated; `out_request` is NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_request_new(
    method: *const c_char,
    resource: *const c_char,
    out_request: *mut *mut jsontp_request,
) -> jsontp_result {
    guard("jsontp_request_new", || {
        // SAFETY: as the caller promises.
        let name = unsafe { text_in(method, "method") }?;
        // SAFETY: as the caller promises.
        let resource_text = unsafe { text_in(resource, "resource") }?;
        let out_request = out(out_request, "out_request")?;
        let method = Method::from_wire(name).ok_or_else(|| {
            let names: Vec<&str> = Method::ALL.iter().map(|m| m.as_str()).collect();
            Fail::invalid(format!(
                "method {name:?} is not one of the protocol's: {} (upper case)",
                names.join(", ")
            ))
        })?;
        let resource: Resource = resource_text
            .parse()
            .map_err(|e: ValueError| Fail::invalid(format!("resource {resource_text:?} {e}")))?;
        let request = Box::new(jsontp_request::of(message::Request::new(method, resource)));
        // SAFETY: checked non-NULL.
        unsafe { put(out_request, Box::into_raw(request)) };
        Ok(())
    })
}

/// Frees a request made by `jsontp_request_new`. NULL is ignored. Never
/// free a request borrowed from an event. Thread-safety: no other thread
/// may use the request.
///
/// # Safety
/// `request` is NULL or a request from `jsontp_request_new`, not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_request_free(request: *mut jsontp_request) {
    // SAFETY: as the caller promises.
    unsafe { free(request) }
}

/// Sets header `name` (NUL-terminated, D8's names) to the JSON value
/// written as `json` (NUL-terminated text of one value: `"\"text/plain\""`,
/// `"[\"gzip\",\"br\"]"`, `"5"`), judged by the header's grammar. Replaces
/// a header of that name.
///
/// Ownership: the strings stay the caller's; the value is copied.
/// Thread-safety: no other thread may use the request during the call.
///
/// # Safety
/// `request` is NULL or a live request of the caller's; the strings are
/// NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_request_set_header(
    request: *mut jsontp_request,
    name: *const c_char,
    json: *const c_char,
) -> jsontp_result {
    guard("jsontp_request_set_header", || {
        // SAFETY: as the caller promises.
        let request = unsafe { borrow_mut(request, "request") }?;
        // SAFETY: as the caller promises.
        let name = unsafe { text_in(name, "name") }?;
        // SAFETY: as the caller promises.
        let value = json_of(unsafe { text_in(json, "json") }?, "the header's value")?;
        set_header(&mut request.inner.headers, name, &value)?;
        request.headers = OnceLock::new();
        Ok(())
    })
}

/// Sets header `name` to the string `value` (both NUL-terminated): the
/// same as `jsontp_request_set_header` with `value` quoted as a JSON
/// string, without escaping it by hand. Ownership and thread-safety as
/// `jsontp_request_set_header`.
///
/// # Safety
/// As `jsontp_request_set_header`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_request_set_header_string(
    request: *mut jsontp_request,
    name: *const c_char,
    value: *const c_char,
) -> jsontp_result {
    guard("jsontp_request_set_header_string", || {
        // SAFETY: as the caller promises.
        let request = unsafe { borrow_mut(request, "request") }?;
        // SAFETY: as the caller promises.
        let name = unsafe { text_in(name, "name") }?;
        // SAFETY: as the caller promises.
        let value = Value::String(unsafe { text_in(value, "value") }?.to_owned());
        set_header(&mut request.inner.headers, name, &value)?;
        request.headers = OnceLock::new();
        Ok(())
    })
}

/// Sets the content: `len` bytes at `data` (NULL with 0 for none),
/// travelling in `encoding` (`"identity"`, `"gzip"`, `"deflate"`, `"br"`;
/// NULL is identity, whose content must be UTF-8 text, D9). Body keys set
/// before are kept.
///
/// Ownership: the bytes are copied once; the request shares them with
/// every copy sent. Thread-safety: no other thread may use the request
/// during the call.
///
/// # Safety
/// `request` is NULL or a live request of the caller's; `data` points to
/// `len` readable bytes (or is NULL with 0); `encoding` is NULL or
/// NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_request_set_content(
    request: *mut jsontp_request,
    data: *const u8,
    len: usize,
    encoding: *const c_char,
) -> jsontp_result {
    guard("jsontp_request_set_content", || {
        // SAFETY: as the caller promises.
        let request = unsafe { borrow_mut(request, "request") }?;
        // SAFETY: as the caller promises.
        let data = unsafe { bytes_in(data, len, "data") }?;
        // SAFETY: as the caller promises.
        let encoding = encoding_of(unsafe { optional_text_in(encoding, "encoding") }?)?;
        request.inner.body = with_content(&request.inner.body, data, encoding)?;
        Ok(())
    })
}

/// Sets the body key `key` (not `content` or `encoding`; form fields and
/// the like, D11) to the JSON value written as `json` (NUL-terminated).
/// Ownership and thread-safety as `jsontp_request_set_header`.
///
/// # Safety
/// As `jsontp_request_set_header`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_request_set_body_key(
    request: *mut jsontp_request,
    key: *const c_char,
    json: *const c_char,
) -> jsontp_result {
    guard("jsontp_request_set_body_key", || {
        // SAFETY: as the caller promises.
        let request = unsafe { borrow_mut(request, "request") }?;
        // SAFETY: as the caller promises.
        let key = unsafe { text_in(key, "key") }?;
        // SAFETY: as the caller promises.
        let value = json_of(unsafe { text_in(json, "json") }?, "the body key's value")?;
        request.inner.body = with_key(&request.inner.body, key, value)?;
        request.body = OnceLock::new();
        Ok(())
    })
}

/// The method, such as `"GET"`: `*out_text` and `*out_len` (not
/// NUL-terminated).
///
/// Ownership: the text is borrowed from the request, valid while it lives
/// and is not changed. Thread-safety: reading from several threads at once
/// is safe when none changes the request.
///
/// # Safety
/// `request` is NULL or a live request; the outputs are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_request_method(
    request: *const jsontp_request,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_request_method", || {
        // SAFETY: as the caller promises.
        let request = unsafe { borrow(request, "request") }?;
        // SAFETY: as the caller promises.
        unsafe { put_text(request.inner.method.as_str(), out_text, out_len) }
    })
}

/// The resource as written (D7). Ownership, thread-safety and safety as
/// `jsontp_request_method`.
///
/// # Safety
/// As `jsontp_request_method`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_request_resource(
    request: *const jsontp_request,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_request_resource", || {
        // SAFETY: as the caller promises.
        let request = unsafe { borrow(request, "request") }?;
        // SAFETY: as the caller promises.
        unsafe { put_text(request.inner.resource.as_str(), out_text, out_len) }
    })
}

/// The resource's path, normalised (D7). Ownership, thread-safety and
/// safety as `jsontp_request_method`.
///
/// # Safety
/// As `jsontp_request_method`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_request_path(
    request: *const jsontp_request,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_request_path", || {
        // SAFETY: as the caller promises.
        let request = unsafe { borrow(request, "request") }?;
        // SAFETY: as the caller promises.
        unsafe { put_text(request.inner.resource.path(), out_text, out_len) }
    })
}

/// The resource's query, without `?`; `JSONTP_NOT_APPLICABLE` when it has
/// none. Ownership, thread-safety and safety as `jsontp_request_method`.
///
/// # Safety
/// As `jsontp_request_method`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_request_query(
    request: *const jsontp_request,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_request_query", || {
        // SAFETY: as the caller promises.
        let request = unsafe { borrow(request, "request") }?;
        let query = request
            .inner
            .resource
            .query()
            .ok_or_else(|| Fail::not_applicable("the resource has no query"))?;
        // SAFETY: as the caller promises.
        unsafe { put_text(query, out_text, out_len) }
    })
}

/// The headers as the text of one JSON object (names to their JSON
/// values, lists as arrays). Ownership, thread-safety and safety as
/// `jsontp_request_method`.
///
/// # Safety
/// As `jsontp_request_method`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_request_headers(
    request: *const jsontp_request,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_request_headers", || {
        // SAFETY: as the caller promises.
        let request = unsafe { borrow(request, "request") }?;
        let text = json_text(&request.headers, || request.inner.headers.to_json());
        // SAFETY: as the caller promises.
        unsafe { put_text(text, out_text, out_len) }
    })
}

/// The body's other keys (form fields and the like, D11) as the text of
/// one JSON object. Ownership, thread-safety and safety as
/// `jsontp_request_method`.
///
/// # Safety
/// As `jsontp_request_method`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_request_body(
    request: *const jsontp_request,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_request_body", || {
        // SAFETY: as the caller promises.
        let request = unsafe { borrow(request, "request") }?;
        let text = json_text(&request.body, || request.inner.body.extra().clone());
        // SAFETY: as the caller promises.
        unsafe { put_text(text, out_text, out_len) }
    })
}

/// The decoded content: `*out_data` and `*out_len`. Ownership: borrowed
/// from the request, valid while it lives and is not changed.
/// Thread-safety as `jsontp_request_method`.
///
/// # Safety
/// `request` is NULL or a live request; the outputs are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_request_content(
    request: *const jsontp_request,
    out_data: *mut *const u8,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_request_content", || {
        // SAFETY: as the caller promises.
        let request = unsafe { borrow(request, "request") }?;
        // SAFETY: as the caller promises.
        unsafe { put_bytes(request.inner.body.content(), out_data, out_len) }
    })
}

/// How the content travelled: `"identity"`, `"gzip"`, `"deflate"` or
/// `"br"`, a static string (NUL-terminated too). Thread-safety as
/// `jsontp_request_method`.
///
/// # Safety
/// As `jsontp_request_method`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_request_encoding(
    request: *const jsontp_request,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_request_encoding", || {
        // SAFETY: as the caller promises.
        let request = unsafe { borrow(request, "request") }?;
        // SAFETY: as the caller promises.
        unsafe { put_text(encoding_name(request.inner.body.encoding()), out_text, out_len) }
    })
}

/// An encoding's name, NUL-terminated in static memory (the length given
/// leaves the NUL out).
pub(crate) fn encoding_name(encoding: Encoding) -> &'static str {
    match encoding {
        Encoding::Identity => "identity\0",
        Encoding::Gzip => "gzip\0",
        Encoding::Deflate => "deflate\0",
        Encoding::Br => "br\0",
    }
    .trim_end_matches('\0')
}

/// Makes a response: `status` (100 to 599) and `message`, the
/// `human-message`: what a person should know (D12); NULL or `""` gives the
/// status's reason phrase. No headers, empty content. The server adds
/// `date`, `language` and the echoed `resource`.
///
/// Ownership: the caller owns the response and frees it with
/// `jsontp_response_free`; sending it copies it (the content is shared).
/// Thread-safety: a response may move between threads, but not be used by
/// two at once.
///
/// # Safety
/// `message` is NULL or NUL-terminated; `out_response` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_response_new(
    status: u16,
    message: *const c_char,
    out_response: *mut *mut jsontp_response,
) -> jsontp_result {
    guard("jsontp_response_new", || {
        // SAFETY: as the caller promises.
        let message = unsafe { optional_text_in(message, "message") }?.unwrap_or("");
        let out_response = out(out_response, "out_response")?;
        let code = StatusCode::from_u16(status)
            .ok_or_else(|| Fail::invalid(format!("status {status} is not a status code (100 to 599)")))?;
        let response = Box::new(jsontp_response::of(message::Response::new(Status::new(
            code,
            message.to_owned(),
        ))));
        // SAFETY: checked non-NULL.
        unsafe { put(out_response, Box::into_raw(response)) };
        Ok(())
    })
}

/// Frees a response made by `jsontp_response_new` or given by
/// `jsontp_file_rules_judge_*`, `jsontp_write_failed` or
/// `jsontp_access_failed`. NULL is ignored. Never free a response
/// borrowed from an event or a verdict. Thread-safety: no other thread may
/// use the response.
///
/// # Safety
/// `response` is NULL or a response the caller owns, not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_response_free(response: *mut jsontp_response) {
    // SAFETY: as the caller promises.
    unsafe { free(response) }
}

/// Sets header `name` to the JSON value written as `json`, as
/// `jsontp_request_set_header` does for a request.
///
/// # Safety
/// `response` is NULL or a live response of the caller's; the strings are
/// NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_response_set_header(
    response: *mut jsontp_response,
    name: *const c_char,
    json: *const c_char,
) -> jsontp_result {
    guard("jsontp_response_set_header", || {
        // SAFETY: as the caller promises.
        let response = unsafe { borrow_mut(response, "response") }?;
        // SAFETY: as the caller promises.
        let name = unsafe { text_in(name, "name") }?;
        // SAFETY: as the caller promises.
        let value = json_of(unsafe { text_in(json, "json") }?, "the header's value")?;
        set_header(&mut response.inner.headers, name, &value)?;
        response.headers = OnceLock::new();
        Ok(())
    })
}

/// Sets header `name` to the string `value`, as
/// `jsontp_request_set_header_string` does for a request.
///
/// # Safety
/// As `jsontp_response_set_header`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_response_set_header_string(
    response: *mut jsontp_response,
    name: *const c_char,
    value: *const c_char,
) -> jsontp_result {
    guard("jsontp_response_set_header_string", || {
        // SAFETY: as the caller promises.
        let response = unsafe { borrow_mut(response, "response") }?;
        // SAFETY: as the caller promises.
        let name = unsafe { text_in(name, "name") }?;
        // SAFETY: as the caller promises.
        let value = Value::String(unsafe { text_in(value, "value") }?.to_owned());
        set_header(&mut response.inner.headers, name, &value)?;
        response.headers = OnceLock::new();
        Ok(())
    })
}

/// Sets the content and its encoding, as `jsontp_request_set_content`
/// does for a request. For a response sent with
/// `jsontp_server_send_response_head`, give no bytes: only the encoding
/// counts, the content follows with `jsontp_server_send_content`.
///
/// # Safety
/// `response` is NULL or a live response of the caller's; `data` points to
/// `len` readable bytes (or is NULL with 0); `encoding` is NULL or
/// NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_response_set_content(
    response: *mut jsontp_response,
    data: *const u8,
    len: usize,
    encoding: *const c_char,
) -> jsontp_result {
    guard("jsontp_response_set_content", || {
        // SAFETY: as the caller promises.
        let response = unsafe { borrow_mut(response, "response") }?;
        // SAFETY: as the caller promises.
        let data = unsafe { bytes_in(data, len, "data") }?;
        // SAFETY: as the caller promises.
        let encoding = encoding_of(unsafe { optional_text_in(encoding, "encoding") }?)?;
        response.inner.body = with_content(&response.inner.body, data, encoding)?;
        Ok(())
    })
}

/// Sets the body key `key` to the JSON value written as `json`, as
/// `jsontp_request_set_body_key` does for a request.
///
/// # Safety
/// As `jsontp_response_set_header`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_response_set_body_key(
    response: *mut jsontp_response,
    key: *const c_char,
    json: *const c_char,
) -> jsontp_result {
    guard("jsontp_response_set_body_key", || {
        // SAFETY: as the caller promises.
        let response = unsafe { borrow_mut(response, "response") }?;
        // SAFETY: as the caller promises.
        let key = unsafe { text_in(key, "key") }?;
        // SAFETY: as the caller promises.
        let value = json_of(unsafe { text_in(json, "json") }?, "the body key's value")?;
        response.inner.body = with_key(&response.inner.body, key, value)?;
        response.body = OnceLock::new();
        Ok(())
    })
}

/// The status code, in `*out_status`. Thread-safety: reading from several
/// threads at once is safe when none changes the response.
///
/// # Safety
/// `response` is NULL or a live response; `out_status` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_response_status(
    response: *const jsontp_response,
    out_status: *mut u16,
) -> jsontp_result {
    guard("jsontp_response_status", || {
        // SAFETY: as the caller promises.
        let response = unsafe { borrow(response, "response") }?;
        let out_status = out(out_status, "out_status")?;
        // SAFETY: checked non-NULL.
        unsafe { put(out_status, response.inner.status.code.as_u16()) };
        Ok(())
    })
}

/// The `human-message` (D12). Ownership: borrowed from the response,
/// valid while it lives and is not changed. Thread-safety as
/// `jsontp_response_status`.
///
/// # Safety
/// `response` is NULL or a live response; the outputs are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_response_message(
    response: *const jsontp_response,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_response_message", || {
        // SAFETY: as the caller promises.
        let response = unsafe { borrow(response, "response") }?;
        // SAFETY: as the caller promises.
        unsafe { put_text(&response.inner.status.human_message, out_text, out_len) }
    })
}

/// The `formal-message`: the status code's reason phrase, such as
/// `"Not Found"`, a static string (not NUL-terminated). Thread-safety as
/// `jsontp_response_status`.
///
/// # Safety
/// As `jsontp_response_message`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_response_reason(
    response: *const jsontp_response,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_response_reason", || {
        // SAFETY: as the caller promises.
        let response = unsafe { borrow(response, "response") }?;
        let reason = response.inner.status.formal_message();
        // SAFETY: as the caller promises.
        unsafe { put_text(reason, out_text, out_len) }
    })
}

/// The echoed resource (D13); empty on a response made here. Ownership,
/// thread-safety and safety as `jsontp_response_message`.
///
/// # Safety
/// As `jsontp_response_message`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_response_resource(
    response: *const jsontp_response,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_response_resource", || {
        // SAFETY: as the caller promises.
        let response = unsafe { borrow(response, "response") }?;
        // SAFETY: as the caller promises.
        unsafe { put_text(&response.inner.resource, out_text, out_len) }
    })
}

/// The headers as the text of one JSON object. Ownership, thread-safety
/// and safety as `jsontp_response_message`.
///
/// # Safety
/// As `jsontp_response_message`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_response_headers(
    response: *const jsontp_response,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_response_headers", || {
        // SAFETY: as the caller promises.
        let response = unsafe { borrow(response, "response") }?;
        let text = json_text(&response.headers, || response.inner.headers.to_json());
        // SAFETY: as the caller promises.
        unsafe { put_text(text, out_text, out_len) }
    })
}

/// The body's other keys (such as `allowed-methods`, D11) as the text of
/// one JSON object. Ownership, thread-safety and safety as
/// `jsontp_response_message`.
///
/// # Safety
/// As `jsontp_response_message`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_response_body(
    response: *const jsontp_response,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_response_body", || {
        // SAFETY: as the caller promises.
        let response = unsafe { borrow(response, "response") }?;
        let text = json_text(&response.body, || response.inner.body.extra().clone());
        // SAFETY: as the caller promises.
        unsafe { put_text(text, out_text, out_len) }
    })
}

/// The decoded content. Ownership: borrowed from the response, valid
/// while it lives and is not changed. Thread-safety as
/// `jsontp_response_status`.
///
/// # Safety
/// `response` is NULL or a live response; the outputs are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_response_content(
    response: *const jsontp_response,
    out_data: *mut *const u8,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_response_content", || {
        // SAFETY: as the caller promises.
        let response = unsafe { borrow(response, "response") }?;
        // SAFETY: as the caller promises.
        unsafe { put_bytes(response.inner.body.content(), out_data, out_len) }
    })
}

/// How the content travels: `"identity"`, `"gzip"`, `"deflate"` or
/// `"br"` (static, and NUL-terminated too). Thread-safety as
/// `jsontp_response_status`.
///
/// # Safety
/// As `jsontp_response_message`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_response_encoding(
    response: *const jsontp_response,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_response_encoding", || {
        // SAFETY: as the caller promises.
        let response = unsafe { borrow(response, "response") }?;
        // SAFETY: as the caller promises.
        unsafe { put_text(encoding_name(response.inner.body.encoding()), out_text, out_len) }
    })
}
