//! `Request` and `Response`: the core's messages as Python objects, made
//! by the caller to send or by a connection from what it read. Their
//! fields read as Python values; made from Python values, they are judged
//! by the core's own rules (headers by D8's grammar, identity content as
//! UTF-8 text by D9), so that what is sent is what the peer can read.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyString};

use jsontp_protocol::message::{
    self, Body, Encoding, Headers, Method, Resource, Status, StatusCode, ValueError,
};

use crate::values::{dict_of, map_from_py};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Request>()?;
    m.add_class::<Response>()?;
    m.add_function(wrap_pyfunction!(parse_form, m)?)?;
    Ok(())
}

/// Form data (`application/x-www-form-urlencoded`, D11) as (name, value)
/// pairs, or None when the text is not form data: for content that
/// arrived in pieces.
#[pyfunction]
fn parse_form(text: &str) -> Option<Vec<(String, String)>> {
    message::form::parse_form(text)
}

/// A request: made to send with `ClientConnection.send_request`, or read
/// by a `ServerConnection` (then `id` names its exchange).
#[pyclass(frozen, module = "jsontp_protocol", name = "Request")]
pub struct Request {
    pub(crate) inner: Box<message::Request>,
    /// The exchange, for a request a connection read; `None` for one made.
    #[pyo3(get)]
    pub(crate) id: Option<u64>,
    headers: PyOnceLock<Py<PyDict>>,
}

impl Request {
    pub(crate) fn read(id: u64, inner: Box<message::Request>) -> Request {
        Request {
            inner,
            id: Some(id),
            headers: PyOnceLock::new(),
        }
    }
}

#[pymethods]
impl Request {
    /// `Request(method, resource, *, headers=None, content=None,
    /// encoding=None, body=None)`. `content` is bytes or str; `encoding`
    /// (`identity`, `gzip`, `deflate`, `br`) says how it travels, and
    /// `identity` content must be UTF-8 text (D9). `body` holds other body
    /// keys, such as form fields (D11).
    #[new]
    #[pyo3(signature = (method, resource, *, headers=None, content=None, encoding=None, body=None))]
    fn new(
        method: &str,
        resource: &str,
        headers: Option<&Bound<'_, PyDict>>,
        content: Option<&Bound<'_, PyAny>>,
        encoding: Option<&str>,
        body: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Request> {
        let method = Method::from_wire(method).ok_or_else(|| {
            let names: Vec<&str> = Method::ALL.iter().map(|m| m.as_str()).collect();
            PyValueError::new_err(format!(
                "method {method:?} is not one of the protocol's: {} (upper case)",
                names.join(", ")
            ))
        })?;
        let resource: Resource = resource
            .parse()
            .map_err(|e: ValueError| PyValueError::new_err(format!("resource {resource:?} {e}")))?;
        let inner = message::Request::new(method, resource)
            .with_headers(headers_of(headers)?)
            .with_body(body_of(content, encoding, body)?);
        Ok(Request {
            inner: Box::new(inner),
            id: None,
            headers: PyOnceLock::new(),
        })
    }

    /// The method, such as `"GET"`.
    #[getter]
    fn method(&self) -> &'static str {
        self.inner.method.as_str()
    }

    /// The resource as written (D7).
    #[getter]
    fn resource(&self) -> &str {
        self.inner.resource.as_str()
    }

    /// The resource's path, normalised (D7).
    #[getter]
    fn path(&self) -> &str {
        self.inner.resource.path()
    }

    /// The resource's query, without `?`, or None.
    #[getter]
    fn query(&self) -> Option<&str> {
        self.inner.resource.query()
    }

    /// The headers as a dict of their JSON values (lists as lists).
    #[getter]
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        cached_headers(py, &self.headers, &self.inner.headers)
    }

    /// The decoded content.
    #[getter]
    fn content<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.inner.body.content())
    }

    /// The content as text when it is UTF-8, else None.
    #[getter]
    fn text<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyString>> {
        text_of(py, &self.inner.body)
    }

    /// How the content travelled: `identity`, `gzip`, `deflate` or `br`.
    #[getter]
    fn encoding(&self) -> &'static str {
        self.inner.body.encoding().as_str()
    }

    /// The body's other keys (form fields and the like, D11).
    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        dict_of(py, self.inner.body.extra())
    }

    /// The form fields of a `POST` (D11) as (name, value) pairs, or None
    /// when the body holds no form.
    fn form(&self) -> Option<Vec<(String, String)>> {
        self.inner.form()
    }

    /// The request as it goes on the wire: compact JSON and `\n` (D1).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    fn __repr__(&self) -> String {
        let id = self.id.map(|id| format!("id={id}, ")).unwrap_or_default();
        format!(
            "<Request {id}{} {:?}, {} content bytes>",
            self.inner.method,
            self.inner.resource.as_str(),
            self.inner.body.content().len()
        )
    }
}

/// A response: made by a server to answer with, or read by a
/// `ClientConnection` (then `id` names its exchange, and `forgiven` what
/// lenient validation let pass, D13).
#[pyclass(frozen, module = "jsontp_protocol", name = "Response")]
pub struct Response {
    pub(crate) inner: message::Response,
    /// The exchange, for a response a connection read; None for one made.
    #[pyo3(get)]
    pub(crate) id: Option<u64>,
    /// What lenient validation forgave in a response read (D13).
    #[pyo3(get)]
    pub(crate) forgiven: Vec<String>,
    headers: PyOnceLock<Py<PyDict>>,
}

impl Response {
    pub(crate) fn read(id: u64, inner: message::Response, forgiven: Vec<String>) -> Response {
        Response {
            inner,
            id: Some(id),
            forgiven,
            headers: PyOnceLock::new(),
        }
    }
}

#[pymethods]
impl Response {
    /// `Response(status, message=None, *, headers=None, content=None,
    /// encoding=None, body=None)`. `message` is the `human-message`: what
    /// a person should know (D12); by default the status's reason phrase.
    /// The server adds `date`, `language` and the echoed `resource`.
    #[new]
    #[pyo3(signature = (status, message=None, *, headers=None, content=None, encoding=None, body=None))]
    fn new(
        status: u16,
        message: Option<String>,
        headers: Option<&Bound<'_, PyDict>>,
        content: Option<&Bound<'_, PyAny>>,
        encoding: Option<&str>,
        body: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Response> {
        let code = StatusCode::from_u16(status).ok_or_else(|| {
            PyValueError::new_err(format!("status {status} is not a status code (100 to 599)"))
        })?;
        let inner = message::Response::new(Status::new(code, message.unwrap_or_default()))
            .with_headers(headers_of(headers)?)
            .with_body(body_of(content, encoding, body)?);
        Ok(Response {
            inner,
            id: None,
            forgiven: Vec::new(),
            headers: PyOnceLock::new(),
        })
    }

    /// The status code.
    #[getter]
    fn status(&self) -> u16 {
        self.inner.status.code.as_u16()
    }

    /// The `human-message`.
    #[getter]
    fn message(&self) -> &str {
        &self.inner.status.human_message
    }

    /// The `formal-message`: the code's reason phrase.
    #[getter]
    fn reason(&self) -> &'static str {
        self.inner.status.formal_message()
    }

    /// The echoed resource (D13); `""` on a response made here.
    #[getter]
    fn resource(&self) -> &str {
        &self.inner.resource
    }

    /// The headers as a dict of their JSON values.
    #[getter]
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        cached_headers(py, &self.headers, &self.inner.headers)
    }

    /// The decoded content.
    #[getter]
    fn content<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.inner.body.content())
    }

    /// The content as text when it is UTF-8, else None.
    #[getter]
    fn text<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyString>> {
        text_of(py, &self.inner.body)
    }

    /// How the content travels: `identity`, `gzip`, `deflate` or `br`.
    #[getter]
    fn encoding(&self) -> &'static str {
        self.inner.body.encoding().as_str()
    }

    /// The body's other keys.
    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        dict_of(py, self.inner.body.extra())
    }

    fn __repr__(&self) -> String {
        let id = self.id.map(|id| format!("id={id}, ")).unwrap_or_default();
        format!(
            "<Response {id}{} {:?}, {} content bytes>",
            self.inner.status.code.as_u16(),
            self.inner.status.human_message,
            self.inner.body.content().len()
        )
    }
}

/// A response made in Rust (by the library's rules), as Python's.
pub(crate) fn made(inner: message::Response) -> Response {
    Response {
        inner,
        id: None,
        forgiven: Vec::new(),
        headers: PyOnceLock::new(),
    }
}

fn cached_headers<'py>(
    py: Python<'py>,
    cache: &PyOnceLock<Py<PyDict>>,
    headers: &Headers,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = cache.get_or_try_init(py, || dict_of(py, &headers.to_json()).map(Bound::unbind))?;
    // A copy: the message is immutable, the dict a caller gets is theirs.
    dict.bind(py).copy()
}

fn text_of<'py>(py: Python<'py>, body: &Body) -> Option<Bound<'py, PyString>> {
    std::str::from_utf8(body.content())
        .ok()
        .map(|text| PyString::new(py, text))
}

/// Headers from a dict of JSON values, each judged by D8's grammar.
pub(crate) fn headers_of(dict: Option<&Bound<'_, PyDict>>) -> PyResult<Headers> {
    let mut headers = Headers::new();
    let Some(dict) = dict else { return Ok(headers) };
    for (name, value) in map_from_py(dict, "headers", 0)? {
        headers
            .insert_json(&name, &value)
            .map_err(|e| PyValueError::new_err(format!("header {name:?}: {e}")))?;
    }
    Ok(headers)
}

/// A body from content (bytes or str), its encoding and other keys.
pub(crate) fn body_of(
    content: Option<&Bound<'_, PyAny>>,
    encoding: Option<&str>,
    extra: Option<&Bound<'_, PyDict>>,
) -> PyResult<Body> {
    let encoding = encoding_of(encoding)?;
    let mut body = match content {
        None => Body::empty().with_encoding(encoding).map_err(content_error)?,
        Some(content) => {
            let bytes: Arc<[u8]> = if let Ok(text) = content.cast::<PyString>() {
                Arc::from(text.to_cow()?.as_bytes())
            } else if let Ok(bytes) = content.cast::<PyBytes>() {
                Arc::from(bytes.as_bytes())
            } else {
                let bytes: Vec<u8> = content.extract().map_err(|_| {
                    PyValueError::new_err("content must be bytes, bytearray, memoryview or str")
                })?;
                Arc::from(bytes)
            };
            Body::shared(bytes, encoding).map_err(content_error)?
        }
    };
    if let Some(extra) = extra {
        for (key, value) in map_from_py(extra, "body", 0)? {
            body = body
                .with_extra(key.clone(), value)
                .map_err(|e| PyValueError::new_err(format!("body key {key:?} {e}")))?;
        }
    }
    Ok(body)
}

fn content_error(e: ValueError) -> PyErr {
    PyValueError::new_err(format!(
        "content {e}; give encoding=\"gzip\", \"deflate\" or \"br\" for content that is not UTF-8 text (D9)"
    ))
}

/// An encoding's name, `identity` when None.
pub(crate) fn encoding_of(name: Option<&str>) -> PyResult<Encoding> {
    match name {
        None => Ok(Encoding::Identity),
        Some(name) => name.parse().map_err(|_| {
            PyValueError::new_err(format!(
                "encoding {name:?} is not one of identity, gzip, deflate, br"
            ))
        }),
    }
}
