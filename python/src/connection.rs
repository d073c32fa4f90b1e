//! `ServerConnection` and `ClientConnection`: the core's connection
//! machines, driven as h11 drives HTTP/1.1. Bytes go in with
//! `receive_data` (`b""` for the end of the stream), events come out of
//! `next_event` until it gives `NEED_DATA` or `PAUSED`, answers go in with
//! `send_response` and friends, bytes to write come out of
//! `data_to_send`, and `poll_timeout`/`handle_timeout` run the timers
//! (D3). Every time is a float of `time.monotonic()`'s clock, read when
//! the caller gives none.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyBytes;

use jsontp_protocol::machine::{
    self, ClientConfig, ClientEvent, ContinuePolicy, PeerError, RequestId, ServerConfig, ServerEvent,
    UsageError,
};
use jsontp_protocol::message::{LanguageTag, MessageLimits, Validation};

use crate::messages::{Request, Response};
use crate::{LocalProtocolError, RemoteProtocolError, duration_of, now_of, seconds_of};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Limits>()?;
    m.add_class::<ServerConnection>()?;
    m.add_class::<ClientConnection>()?;
    m.add_class::<Sentinel>()?;
    m.add_class::<ContinueRequested>()?;
    m.add_class::<ContentHead>()?;
    m.add_class::<Content>()?;
    m.add_class::<ResponseSent>()?;
    m.add_class::<ContentDiscarded>()?;
    m.add_class::<Continue>()?;
    m.add_class::<ResponseHead>()?;
    m.add_class::<Closed>()?;
    m.add("NEED_DATA", sentinel(py, &NEED_DATA, "NEED_DATA")?)?;
    m.add("PAUSED", sentinel(py, &PAUSED, "PAUSED")?)?;
    Ok(())
}

/// `next_event`'s answer when nothing can happen until more bytes arrive.
static NEED_DATA: PyOnceLock<Py<Sentinel>> = PyOnceLock::new();
/// `next_event`'s answer when reading waits on this side: the peer owes
/// us nothing until we answer, write, or take the events we were given.
static PAUSED: PyOnceLock<Py<Sentinel>> = PyOnceLock::new();

/// A marker `next_event` returns: `NEED_DATA` or `PAUSED`.
#[pyclass(frozen, module = "jsontp_protocol", name = "Sentinel")]
pub struct Sentinel {
    name: &'static str,
}

#[pymethods]
impl Sentinel {
    fn __repr__(&self) -> &'static str {
        self.name
    }
}

/// Makes a marker, once, for the module to export.
fn sentinel<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<Sentinel>>,
    name: &'static str,
) -> PyResult<Bound<'py, Sentinel>> {
    Ok(cell
        .get_or_try_init(py, || Py::new(py, Sentinel { name }))?
        .bind(py)
        .clone())
}

/// A server's event: the first request of a 100-continue handshake (D10)
/// under `continue_policy="ask"`. Accept it with `accept_continue(id)`, or
/// answer it with a final response to refuse the content unseen.
#[pyclass(frozen, module = "jsontp_protocol")]
pub struct ContinueRequested {
    /// The exchange.
    #[pyo3(get)]
    id: u64,
    /// The preliminary request; its content is empty (D10).
    #[pyo3(get)]
    request: Py<Request>,
}

/// A server's event, with `stream_content=True`: the request whose content
/// is about to come in `Content` pieces (D19). It is advisory: the exchange
/// ends with the `Request` itself (content empty), the one to answer, or
/// with a `RemoteProtocolError` for it.
#[pyclass(frozen, module = "jsontp_protocol")]
pub struct ContentHead {
    /// The exchange.
    #[pyo3(get)]
    id: u64,
    /// The request as far as its envelope goes; its content is empty.
    #[pyo3(get)]
    request: Py<Request>,
}

/// The next piece of a message's decoded content, in order (D19), with
/// `stream_content=True`.
#[pyclass(frozen, module = "jsontp_protocol")]
pub struct Content {
    /// The exchange.
    #[pyo3(get)]
    id: u64,
    /// Decoded content bytes.
    #[pyo3(get)]
    data: Py<PyBytes>,
}

/// A server's event: exchange `id`'s response has wholly left
/// (`data_to_send` handed out its last byte); `bytes` is what it took.
#[pyclass(frozen, module = "jsontp_protocol")]
pub struct ResponseSent {
    /// The exchange.
    #[pyo3(get)]
    id: u64,
    /// Output bytes the response took, the interim `100` included.
    #[pyo3(get)]
    bytes: u64,
}

/// A server's event: drop the `Content` pieces of `id` received so far;
/// they belonged to the first request of a handshake (D10), which is
/// ignored. The exchange goes on.
#[pyclass(frozen, module = "jsontp_protocol")]
pub struct ContentDiscarded {
    /// The exchange.
    #[pyo3(get)]
    id: u64,
}

/// A client's event, with `stream_content=True`: the response whose
/// content is about to come in `Content` pieces, read as far as its
/// envelope goes (D19), so that a download knows its status first. It is
/// advisory: the exchange ends with the `Response` itself (content
/// empty), or with a `RemoteProtocolError`.
#[pyclass(frozen, module = "jsontp_protocol")]
pub struct ResponseHead {
    /// The exchange.
    #[pyo3(get)]
    id: u64,
    /// The response but its content.
    #[pyo3(get)]
    response: Py<Response>,
}

/// A client's event: the server acknowledged with `100`; the full request
/// is on its way (D10).
#[pyclass(frozen, module = "jsontp_protocol")]
pub struct Continue {
    /// The exchange.
    #[pyo3(get)]
    id: u64,
}

/// The connection is finished: write out what `data_to_send` gives, then
/// close the socket. `reason` says why it ended.
#[pyclass(frozen, module = "jsontp_protocol")]
pub struct Closed {
    /// Why the connection ended, for people.
    #[pyo3(get)]
    reason: String,
}

macro_rules! reprs {
    ($($name:ident: $fmt:literal, $($field:ident),*;)*) => {
        $(#[pymethods]
        impl $name {
            fn __repr__(&self) -> String {
                format!($fmt, $(self.$field),*)
            }
        })*
    };
}

reprs! {
    ContinueRequested: "<ContinueRequested id={}>", id;
    ContentHead: "<ContentHead id={}>", id;
    ResponseSent: "<ResponseSent id={} bytes={}>", id, bytes;
    ContentDiscarded: "<ContentDiscarded id={}>", id;
    ResponseHead: "<ResponseHead id={}>", id;
    Continue: "<Continue id={}>", id;
}

#[pymethods]
impl Content {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "<Content id={} {} bytes>",
            self.id,
            self.data.bind(py).as_bytes().len()
        )
    }
}

#[pymethods]
impl Closed {
    fn __repr__(&self) -> String {
        format!("<Closed: {}>", self.reason)
    }
}

/// The limits and timeouts of D3 one connection applies to what it reads;
/// every keyword defaults to D3's value. Times are seconds.
#[pyclass(frozen, module = "jsontp_protocol")]
#[derive(Clone)]
pub struct Limits {
    inner: machine::Limits,
}

#[pymethods]
impl Limits {
    /// `Limits(*, max_message_bytes=1 MiB, max_decoded_body=8 MiB,
    /// max_depth=64, max_headers=100, message_timeout=30,
    /// stall_timeout=30, max_content_bytes=1 GiB, content_gap_timeout=30,
    /// min_content_rate=16 KiB/s)`: D3's limits, and D19's for streamed
    /// content.
    #[new]
    #[pyo3(signature = (*, max_message_bytes=None, max_decoded_body=None, max_depth=None,
        max_headers=None, message_timeout=None, stall_timeout=None, max_content_bytes=None,
        content_gap_timeout=None, min_content_rate=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        max_message_bytes: Option<usize>,
        max_decoded_body: Option<usize>,
        max_depth: Option<usize>,
        max_headers: Option<usize>,
        message_timeout: Option<f64>,
        stall_timeout: Option<f64>,
        max_content_bytes: Option<usize>,
        content_gap_timeout: Option<f64>,
        min_content_rate: Option<u64>,
    ) -> PyResult<Limits> {
        let mut inner = machine::Limits::default();
        let defaults = MessageLimits::default();
        inner.message = MessageLimits {
            max_message_bytes: max_message_bytes.unwrap_or(defaults.max_message_bytes),
            max_decoded_body: max_decoded_body.unwrap_or(defaults.max_decoded_body),
            max_depth: max_depth.unwrap_or(defaults.max_depth),
            max_headers: max_headers.unwrap_or(defaults.max_headers),
        };
        if let Some(t) = message_timeout {
            inner.message_timeout = duration_of("message_timeout", t)?;
        }
        if let Some(t) = stall_timeout {
            inner.stall_timeout = duration_of("stall_timeout", t)?;
        }
        if let Some(n) = max_content_bytes {
            inner.max_content_bytes = n;
        }
        if let Some(t) = content_gap_timeout {
            inner.content_gap_timeout = duration_of("content_gap_timeout", t)?;
        }
        if let Some(rate) = min_content_rate {
            inner.min_content_rate = rate;
        }
        Ok(Limits { inner })
    }

    fn __repr__(&self) -> String {
        format!("<Limits {:?}>", self.inner)
    }
}

/// Why a connection is closing, kept for its `Closed` event.
#[derive(Default)]
enum Ending {
    /// Nothing said yet: the connection is open, or closed quietly.
    #[default]
    Unsaid,
    /// The peer ended its stream.
    PeerEnded,
    /// The idle timer closed it (D3).
    IdleTimeout,
    /// What the peer did wrong, as the error said it.
    Error(String),
}

impl Ending {
    /// The peer ended its stream: the reason, unless one was said before.
    fn peer_ended(&mut self) {
        if matches!(self, Ending::Unsaid) {
            *self = Ending::PeerEnded;
        }
    }

    /// A peer's error as the exception to raise, kept as the reason when
    /// it ends the connection.
    fn told(&mut self, py: Python<'_>, error: &PeerError) -> PyErr {
        let closes = closes_connection(error);
        if closes {
            *self = Ending::Error(error.to_string());
        }
        remote_error(py, error, closes)
    }

    fn reason(&self) -> String {
        match self {
            Ending::Error(said) => said.clone(),
            Ending::PeerEnded => "the peer ended its stream".to_owned(),
            Ending::IdleTimeout => "the connection was idle past its timeout (D3)".to_owned(),
            Ending::Unsaid => "the connection is closed".to_owned(),
        }
    }
}

/// One server connection: reads requests, writes responses (D2: in
/// order).
///
/// `ServerConnection(*, continue_policy="auto", language="en-US",
/// stream_content=False, limits=None, idle_timeout=60,
/// continue_timeout=300, max_pipelined=16, max_output_owed=1 MiB,
/// now=None)`.
#[pyclass(module = "jsontp_protocol")]
pub struct ServerConnection {
    inner: machine::ServerConnection,
    ending: Ending,
}

#[pymethods]
impl ServerConnection {
    #[new]
    #[pyo3(signature = (*, continue_policy="auto", language="en-US", stream_content=false,
        limits=None, idle_timeout=60.0, continue_timeout=300.0, max_pipelined=16,
        max_output_owed=1 << 20, now=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        continue_policy: &str,
        language: &str,
        stream_content: bool,
        limits: Option<Bound<'_, Limits>>,
        idle_timeout: f64,
        continue_timeout: f64,
        max_pipelined: usize,
        max_output_owed: usize,
        now: Option<f64>,
    ) -> PyResult<ServerConnection> {
        let continue_policy = match continue_policy {
            "auto" => ContinuePolicy::AutoAccept,
            "ask" => ContinuePolicy::Ask,
            "refuse" => ContinuePolicy::Refuse,
            other => {
                return Err(PyValueError::new_err(format!(
                    "continue_policy {other:?} is not \"auto\" (acknowledge with 100 at once), \"ask\" \
                     (a ContinueRequested event) or \"refuse\" (501, D10)"
                )));
            }
        };
        let language: LanguageTag = language
            .parse()
            .map_err(|e| PyValueError::new_err(format!("language {language:?} {e}")))?;
        if max_pipelined == 0 {
            return Err(PyValueError::new_err(
                "max_pipelined must be at least 1: a connection that may owe no response reads nothing",
            ));
        }
        let config = ServerConfig {
            limits: limits.map(|l| l.get().inner).unwrap_or_default(),
            idle_timeout: duration_of("idle_timeout", idle_timeout)?,
            continue_timeout: duration_of("continue_timeout", continue_timeout)?,
            max_pipelined,
            max_output_owed,
            continue_policy,
            language,
            stream_content,
        };
        Ok(ServerConnection {
            inner: machine::ServerConnection::new(config, now_of(now)?),
            ending: Ending::default(),
        })
    }

    /// Bytes received from the peer; `b""` says its stream ended (as h11).
    #[pyo3(signature = (data, now=None))]
    fn receive_data(&mut self, data: &[u8], now: Option<f64>) -> PyResult<()> {
        let now = now_of(now)?;
        if data.is_empty() {
            self.ending.peer_ended();
            self.inner.receive_eof(now);
        } else {
            self.inner.receive_data(data, now);
        }
        Ok(())
    }

    /// The next event: a `Request`, `ContinueRequested`, `ContentHead`,
    /// `Content`, `ResponseSent`, `ContentDiscarded` or `Closed`; else
    /// `NEED_DATA` (more bytes are needed) or `PAUSED` (reading waits on
    /// us: answer what is owed, write what is pending). Raises
    /// `RemoteProtocolError` for a request the connection refused itself:
    /// its answer is already queued (send `data_to_send()`), and unless
    /// `closes` is true the connection goes on.
    #[pyo3(signature = (now=None))]
    fn next_event(&mut self, py: Python<'_>, now: Option<f64>) -> PyResult<Py<PyAny>> {
        let Some(event) = self.inner.next_event(now_of(now)?) else {
            return marker(py, self.inner.wants_read() && !self.inner.is_closed());
        };
        Ok(match event {
            ServerEvent::Request { id, request } => {
                Py::new(py, Request::read(id.index(), request))?.into_any()
            }
            ServerEvent::ContinueRequested { id, request } => Py::new(
                py,
                ContinueRequested {
                    id: id.index(),
                    request: Py::new(py, Request::read(id.index(), request))?,
                },
            )?
            .into_any(),
            ServerEvent::ContentHead { id, head } => Py::new(
                py,
                ContentHead {
                    id: id.index(),
                    request: Py::new(py, Request::read(id.index(), head))?,
                },
            )?
            .into_any(),
            ServerEvent::Content { id, data } => Py::new(
                py,
                Content {
                    id: id.index(),
                    data: PyBytes::new(py, &data).unbind(),
                },
            )?
            .into_any(),
            ServerEvent::ResponseSent { id, bytes } => Py::new(
                py,
                ResponseSent {
                    id: id.index(),
                    bytes,
                },
            )?
            .into_any(),
            ServerEvent::ContentDiscarded { id } => {
                Py::new(py, ContentDiscarded { id: id.index() })?.into_any()
            }
            ServerEvent::PeerError(error) => return Err(self.ending.told(py, &error)),
            ServerEvent::Closed => Py::new(
                py,
                Closed {
                    reason: self.ending.reason(),
                },
            )?
            .into_any(),
            _ => return Err(LocalProtocolError::new_err("an event this binding does not know")),
        })
    }

    /// Answers exchange `id` with a whole response.
    #[pyo3(signature = (id, response, now=None))]
    fn send_response(&mut self, id: u64, response: &Bound<'_, Response>, now: Option<f64>) -> PyResult<()> {
        let response = response.get().inner.clone();
        usage(
            self.inner
                .send_response(RequestId::from_index(id), response, now_of(now)?),
        )
    }

    /// Accepts a 100-continue handshake (D10): `100` is queued, the full
    /// request follows.
    #[pyo3(signature = (id, now=None))]
    fn accept_continue(&mut self, id: u64, now: Option<f64>) -> PyResult<()> {
        usage(
            self.inner
                .accept_continue(RequestId::from_index(id), now_of(now)?),
        )
    }

    /// Begins a response whose content follows in pieces (D19): its
    /// content is ignored; `send_content` and `end_content` carry it.
    #[pyo3(signature = (id, response, now=None))]
    fn send_response_head(
        &mut self,
        id: u64,
        response: &Bound<'_, Response>,
        now: Option<f64>,
    ) -> PyResult<()> {
        let response = response.get().inner.clone();
        usage(
            self.inner
                .send_response_head(RequestId::from_index(id), response, now_of(now)?),
        )
    }

    /// How many more content bytes exchange `id` takes before its output
    /// must drain (backpressure for `send_content`).
    fn content_room(&self, id: u64) -> usize {
        self.inner.content_room(RequestId::from_index(id))
    }

    /// The next piece of a streamed response's content.
    #[pyo3(signature = (id, data, now=None))]
    fn send_content(&mut self, id: u64, data: &[u8], now: Option<f64>) -> PyResult<()> {
        usage(
            self.inner
                .send_content(RequestId::from_index(id), data, now_of(now)?),
        )
    }

    /// Ends a streamed response.
    #[pyo3(signature = (id, now=None))]
    fn end_content(&mut self, id: u64, now: Option<f64>) -> PyResult<()> {
        usage(self.inner.end_content(RequestId::from_index(id), now_of(now)?))
    }

    /// Gives up a streamed response half-way (its source failed): the
    /// message is cut off and the connection closes (D1).
    #[pyo3(signature = (id, now=None))]
    fn abort_content(&mut self, id: u64, now: Option<f64>) -> PyResult<()> {
        self.inner.abort_content(RequestId::from_index(id), now_of(now)?);
        Ok(())
    }

    /// The bytes to write, taken off the connection: up to `max` of them
    /// when given (write them all, or give back what was not written by
    /// asking for less next time).
    #[pyo3(signature = (now=None, max=None))]
    fn data_to_send<'py>(
        &mut self,
        py: Python<'py>,
        now: Option<f64>,
        max: Option<usize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let (bytes, n) = output(py, self.inner.pending_output(), max);
        if n > 0 {
            self.inner.consume_output(n, now_of(now)?);
        }
        Ok(bytes)
    }

    /// How many bytes wait to be written.
    #[getter]
    fn pending_bytes(&self) -> usize {
        self.inner.pending_output().len()
    }

    /// The next moment (`time.monotonic()` seconds) at which
    /// `handle_timeout` must be called, or None.
    fn poll_timeout(&self) -> Option<f64> {
        self.inner.poll_timeout().map(seconds_of)
    }

    /// Runs the timers that are due.
    #[pyo3(signature = (now=None))]
    fn handle_timeout(&mut self, now: Option<f64>) -> PyResult<()> {
        let was_closed = self.inner.is_closed();
        self.inner.handle_timeout(now_of(now)?);
        if !was_closed && self.inner.is_closed() && matches!(self.ending, Ending::Unsaid) {
            self.ending = Ending::IdleTimeout;
        }
        Ok(())
    }

    /// Whether the connection reads: False while it waits on us (D3's
    /// backpressure, a handshake to decide) or once it stopped reading.
    #[getter]
    fn wants_read(&self) -> bool {
        self.inner.wants_read()
    }

    /// Whether nothing is under way: no request unanswered, no output
    /// pending. A graceful shutdown closes idle connections.
    #[getter]
    fn is_idle(&self) -> bool {
        self.inner.is_idle()
    }

    /// Whether the connection is closed (after `Closed`).
    #[getter]
    fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}

/// One client connection: writes requests, reads their responses in order.
///
/// `ClientConnection(*, validation="strict", continue_wait=1.0,
/// stream_content=False, limits=None, now=None)`; the default limit on
/// one response is 32 MiB (a client reads what it asked for).
#[pyclass(module = "jsontp_protocol")]
pub struct ClientConnection {
    inner: machine::ClientConnection,
    ending: Ending,
}

#[pymethods]
impl ClientConnection {
    #[new]
    #[pyo3(signature = (*, validation="strict", continue_wait=1.0, stream_content=false, limits=None, now=None))]
    fn new(
        validation: &str,
        continue_wait: f64,
        stream_content: bool,
        limits: Option<Bound<'_, Limits>>,
        now: Option<f64>,
    ) -> PyResult<ClientConnection> {
        let validation = match validation {
            "strict" => Validation::Strict,
            "lenient" => Validation::Lenient,
            other => {
                return Err(PyValueError::new_err(format!(
                    "validation {other:?} is not \"strict\" or \"lenient\" (D13)"
                )));
            }
        };
        let mut config = ClientConfig {
            validation,
            continue_wait: duration_of("continue_wait", continue_wait)?,
            stream_content,
            ..ClientConfig::default()
        };
        if let Some(limits) = limits {
            config.limits = limits.get().inner;
        }
        Ok(ClientConnection {
            inner: machine::ClientConnection::new(config, now_of(now)?),
            ending: Ending::default(),
        })
    }

    /// Sends a whole request; returns its exchange's id.
    #[pyo3(signature = (request, now=None))]
    fn send_request(&mut self, request: &Bound<'_, Request>, now: Option<f64>) -> PyResult<u64> {
        let request = (*request.get().inner).clone();
        usage(self.inner.send_request(request, now_of(now)?)).map(RequestId::index)
    }

    /// Begins a request whose content follows with `send_content` and
    /// `end_content` (D19); returns its exchange's id.
    #[pyo3(signature = (request, now=None))]
    fn send_request_head(&mut self, request: &Bound<'_, Request>, now: Option<f64>) -> PyResult<u64> {
        let request = (*request.get().inner).clone();
        usage(self.inner.send_request_head(request, now_of(now)?)).map(RequestId::index)
    }

    /// How many more content bytes exchange `id` takes now.
    fn content_room(&self, id: u64) -> usize {
        self.inner.content_room(RequestId::from_index(id))
    }

    /// The next piece of a streamed request's content.
    #[pyo3(signature = (id, data, now=None))]
    fn send_content(&mut self, id: u64, data: &[u8], now: Option<f64>) -> PyResult<()> {
        usage(
            self.inner
                .send_content(RequestId::from_index(id), data, now_of(now)?),
        )
    }

    /// Ends a streamed request.
    #[pyo3(signature = (id, now=None))]
    fn end_content(&mut self, id: u64, now: Option<f64>) -> PyResult<()> {
        usage(self.inner.end_content(RequestId::from_index(id), now_of(now)?))
    }

    /// Gives up a streamed request half-way: the connection closes.
    #[pyo3(signature = (id, now=None))]
    fn abort_content(&mut self, id: u64, now: Option<f64>) -> PyResult<()> {
        self.inner.abort_content(RequestId::from_index(id), now_of(now)?);
        Ok(())
    }

    /// Bytes received from the server; `b""` says its stream ended.
    #[pyo3(signature = (data, now=None))]
    fn receive_data(&mut self, data: &[u8], now: Option<f64>) -> PyResult<()> {
        let now = now_of(now)?;
        if data.is_empty() {
            self.ending.peer_ended();
            self.inner.receive_eof(now);
        } else {
            self.inner.receive_data(data, now);
        }
        Ok(())
    }

    /// The next event: a `Response`, `ResponseHead`, `Continue`, `Content`
    /// or `Closed`;
    /// else `NEED_DATA` or `PAUSED`. Raises `RemoteProtocolError` when the
    /// server broke the protocol or went missing (`kind` says how).
    #[pyo3(signature = (now=None))]
    fn next_event(&mut self, py: Python<'_>, now: Option<f64>) -> PyResult<Py<PyAny>> {
        let Some(event) = self.inner.next_event(now_of(now)?) else {
            return marker(py, self.inner.wants_read() && !self.inner.is_closed());
        };
        Ok(match event {
            ClientEvent::Response {
                id,
                response,
                forgiven,
            } => {
                let forgiven = forgiven.iter().map(|f| format!("{f:?}")).collect();
                Py::new(py, Response::read(id.index(), response, forgiven))?.into_any()
            }
            ClientEvent::Continue { id } => Py::new(py, Continue { id: id.index() })?.into_any(),
            ClientEvent::ContentHead { id, head } => Py::new(
                py,
                ResponseHead {
                    id: id.index(),
                    response: Py::new(py, Response::read(id.index(), *head, Vec::new()))?,
                },
            )?
            .into_any(),
            ClientEvent::Content { id, data } => Py::new(
                py,
                Content {
                    id: id.index(),
                    data: PyBytes::new(py, &data).unbind(),
                },
            )?
            .into_any(),
            ClientEvent::PeerError(error) => return Err(self.ending.told(py, &error)),
            ClientEvent::Closed => Py::new(
                py,
                Closed {
                    reason: self.ending.reason(),
                },
            )?
            .into_any(),
            _ => return Err(LocalProtocolError::new_err("an event this binding does not know")),
        })
    }

    /// The bytes to write, taken off the connection (at most `max`).
    #[pyo3(signature = (now=None, max=None))]
    fn data_to_send<'py>(
        &mut self,
        py: Python<'py>,
        now: Option<f64>,
        max: Option<usize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let (bytes, n) = output(py, self.inner.pending_output(), max);
        if n > 0 {
            self.inner.consume_output(n, now_of(now)?);
        }
        Ok(bytes)
    }

    /// How many bytes wait to be written.
    #[getter]
    fn pending_bytes(&self) -> usize {
        self.inner.pending_output().len()
    }

    /// The next moment `handle_timeout` must be called, or None.
    fn poll_timeout(&self) -> Option<f64> {
        self.inner.poll_timeout().map(seconds_of)
    }

    /// Runs the timers that are due.
    #[pyo3(signature = (now=None))]
    fn handle_timeout(&mut self, now: Option<f64>) -> PyResult<()> {
        self.inner.handle_timeout(now_of(now)?);
        Ok(())
    }

    /// Whether the connection reads.
    #[getter]
    fn wants_read(&self) -> bool {
        self.inner.wants_read()
    }

    /// Whether the connection is closed.
    #[getter]
    fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}

/// `NEED_DATA` while the connection reads, `PAUSED` otherwise.
fn marker(py: Python<'_>, reads: bool) -> PyResult<Py<PyAny>> {
    let cell = if reads { &NEED_DATA } else { &PAUSED };
    let marker = cell
        .get(py)
        .expect("the module's initialisation made the markers");
    Ok(marker.clone_ref(py).into_any())
}

/// Up to `max` bytes of the pending output as Python bytes, and how many.
fn output<'py>(py: Python<'py>, pending: &[u8], max: Option<usize>) -> (Bound<'py, PyBytes>, usize) {
    let n = max.map_or(pending.len(), |max| max.min(pending.len()));
    (PyBytes::new(py, &pending[..n]), n)
}

/// Whether a peer error ends the connection.
fn closes_connection(error: &PeerError) -> bool {
    match error {
        PeerError::Rejected { closes, .. } => *closes,
        PeerError::ResourceMismatch { .. } => false,
        _ => true,
    }
}

/// A peer's error as `RemoteProtocolError`, with its status and
/// `human-message` as attributes.
fn remote_error(py: Python<'_>, error: &PeerError, closes: bool) -> PyErr {
    let err = RemoteProtocolError::new_err(error.to_string());
    let (kind, status, message, id): (&str, Option<u16>, String, Option<u64>) = match error {
        PeerError::Rejected { id, rejection, .. } => (
            "rejected",
            Some(rejection.status().as_u16()),
            rejection.message.clone(),
            id.map(RequestId::index),
        ),
        PeerError::ResourceMismatch { id, response, .. } => (
            "resource-mismatch",
            Some(response.status.code.as_u16()),
            error.to_string(),
            Some(id.index()),
        ),
        PeerError::TimedOut { id } => ("timed-out", None, error.to_string(), id.map(RequestId::index)),
        PeerError::UnexpectedEof => ("unexpected-eof", None, error.to_string(), None),
        PeerError::OutputStalled => ("output-stalled", None, error.to_string(), None),
        _ => ("other", None, error.to_string(), None),
    };
    let value = err.value(py);
    let set = || -> PyResult<()> {
        value.setattr("kind", kind)?;
        value.setattr("status", status)?;
        value.setattr("human_message", message)?;
        value.setattr("id", id)?;
        value.setattr("closes", closes)?;
        if let PeerError::ResourceMismatch { id, response, .. } = error {
            let response = Response::read(id.index(), (**response).clone(), Vec::new());
            value.setattr("response", Py::new(py, response)?)?;
        }
        Ok(())
    };
    match set() {
        Ok(()) => err,
        Err(e) => e,
    }
}

/// A caller's mistake as `LocalProtocolError`.
fn usage<T>(result: Result<T, UsageError>) -> PyResult<T> {
    result.map_err(|e| LocalProtocolError::new_err(e.to_string()))
}
