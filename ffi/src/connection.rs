//! `jsontp_server` and `jsontp_client`: the core's connection machines
//! for a caller that owns the socket and the clock. Bytes go in with
//! `_receive_data` (and `_receive_eof` at the end of the stream), events
//! come out of `_next_event` until it gives `JSONTP_DONE`, answers go in,
//! bytes to write come out of `_data_to_send` (a copy) or
//! `_pending_output` and `_consume_output` (borrowed), and
//! `_poll_timeout` / `_handle_timeout` run the timers (D3).

use std::ffi::c_char;
use std::time::Duration;

use jsontp_protocol::machine::{self, ClientConfig, ContinuePolicy, RequestId, ServerConfig, UsageError};
use jsontp_protocol::message::{LanguageTag, Validation};

use crate::event::jsontp_event;
use crate::message::{jsontp_request, jsontp_response};
use crate::{
    Fail, Outcome, borrow, borrow_mut, bytes_in, free, guard, jsontp_result, nanos_of, now_of, out, put,
    text_in,
};

/// What a server does with `expect: 100-continue` (D10).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum jsontp_continue_policy {
    /// Acknowledge with `100` at once (the default).
    JSONTP_CONTINUE_AUTO = 0,
    /// Give `JSONTP_EVENT_CONTINUE_REQUESTED`; the caller accepts or
    /// refuses.
    JSONTP_CONTINUE_ASK = 1,
    /// Answer `501` and close (a server "configured without
    /// 100-continue").
    JSONTP_CONTINUE_REFUSE = 2,
}

/// How strictly a client judges responses (D13).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum jsontp_validation {
    /// Every rule of the response message holds (the default).
    JSONTP_VALIDATION_STRICT = 0,
    /// Missing `date`/`language`, an empty `encoding` and unknown header
    /// names are forgiven (the published reference crate sends them).
    JSONTP_VALIDATION_LENIENT = 1,
}

/// A server connection's configuration: D3's limits and timers, the
/// 100-continue policy, the language, whether content streams.
pub struct jsontp_server_config {
    inner: ServerConfig,
}

/// A client connection's configuration.
pub struct jsontp_client_config {
    inner: ClientConfig,
}

/// Why a connection is closing, kept for its `Closed` event.
#[derive(Default)]
enum Ending {
    /// Nothing said yet: the connection is open, or closed quietly.
    #[default]
    Unsaid,
    /// The idle timer closed it (D3).
    IdleTimeout,
    /// The peer ended its stream.
    PeerEnded,
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

    fn reason(&self) -> String {
        match self {
            Ending::Error(said) => said.clone(),
            Ending::PeerEnded => "the peer ended its stream".to_owned(),
            Ending::IdleTimeout => "the connection was idle past its timeout (D3)".to_owned(),
            Ending::Unsaid => "the connection is closed".to_owned(),
        }
    }

    fn note(&mut self, event: &jsontp_event) {
        if let Some(error) = event.error()
            && error.closes()
        {
            *self = Ending::Error(error.text().to_owned());
        }
    }
}

/// One server connection: reads requests, writes responses in order (D2).
pub struct jsontp_server {
    inner: machine::ServerConnection,
    ending: Ending,
}

/// One client connection: writes requests, reads their responses in order.
pub struct jsontp_client {
    inner: machine::ClientConnection,
    ending: Ending,
}

fn usage<T>(result: Result<T, UsageError>) -> Result<T, Fail> {
    result.map_err(|e| Fail::usage(e.to_string()))
}

fn duration(ns: u64) -> Duration {
    Duration::from_nanos(ns)
}

/// Makes a server configuration with the defaults of D3 (60 s idle, 30 s
/// per message, 1 MiB per message, 16 responses pipelined),
/// `JSONTP_CONTINUE_AUTO`, language `en-US`, whole requests.
///
/// Ownership: the caller frees it with `jsontp_server_config_free`;
/// `jsontp_server_new` copies it, so one configuration makes any number of
/// connections. Thread-safety: it may move between threads, but not be
/// used by two at once.
///
/// # Safety
/// `out_config` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_config_new(
    out_config: *mut *mut jsontp_server_config,
) -> jsontp_result {
    guard("jsontp_server_config_new", || {
        let out_config = out(out_config, "out_config")?;
        let config = Box::new(jsontp_server_config {
            inner: ServerConfig::default(),
        });
        // SAFETY: checked non-NULL.
        unsafe { put(out_config, Box::into_raw(config)) };
        Ok(())
    })
}

/// Frees a server configuration. NULL is ignored. Thread-safety: no other
/// thread may use it.
///
/// # Safety
/// `config` is NULL or from `jsontp_server_config_new`, not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_config_free(config: *mut jsontp_server_config) {
    // SAFETY: as the caller promises.
    unsafe { free(config) }
}

/// Runs one change on a server configuration.
///
/// # Safety
/// `config` is NULL or a live configuration, not used elsewhere meanwhile.
unsafe fn with_server_config(
    what: &str,
    config: *mut jsontp_server_config,
    change: impl FnOnce(&mut ServerConfig) -> Outcome,
) -> jsontp_result {
    guard(what, || {
        // SAFETY: as the caller promises.
        let config = unsafe { borrow_mut(config, "config") }?;
        change(&mut config.inner)
    })
}

/// Sets what the server does with `expect: 100-continue` (D10): `policy`
/// is a `jsontp_continue_policy` (an integer, so that a value outside the
/// enum is an error, not undefined behaviour). Thread-safety: no other thread may use the configuration meanwhile.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_config_set_continue_policy(
    config: *mut jsontp_server_config,
    policy: u32,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_server_config("jsontp_server_config_set_continue_policy", config, |c| {
            c.continue_policy = match policy {
                0 => ContinuePolicy::AutoAccept,
                1 => ContinuePolicy::Ask,
                2 => ContinuePolicy::Refuse,
                other => {
                    return Err(Fail::invalid(format!(
                        "policy {other} is not a jsontp_continue_policy"
                    )));
                }
            };
            Ok(())
        })
    }
}

/// Sets the language (NUL-terminated, such as `"fr-FR"`) of the responses
/// the connection writes itself, and of answers that leave it out (D18).
/// Thread-safety: no other thread may use the configuration meanwhile.
///
/// # Safety
/// `config` is NULL or a live configuration; `language` is NULL or
/// NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_config_set_language(
    config: *mut jsontp_server_config,
    language: *const c_char,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    let language = unsafe { text_in(language, "language") };
    // SAFETY: as the caller promises.
    unsafe {
        with_server_config("jsontp_server_config_set_language", config, |c| {
            let language = language?;
            c.language = language
                .parse::<LanguageTag>()
                .map_err(|e| Fail::invalid(format!("language {language:?} {e}")))?;
            Ok(())
        })
    }
}

/// Hands a request's content out in pieces as it arrives
/// (`JSONTP_EVENT_CONTENT_HEAD`, then `JSONTP_EVENT_CONTENT`, D19) instead
/// of holding each request whole. Thread-safety: no other thread may use
/// the configuration meanwhile.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_config_set_stream_content(
    config: *mut jsontp_server_config,
    stream: bool,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_server_config("jsontp_server_config_set_stream_content", config, |c| {
            c.stream_content = stream;
            Ok(())
        })
    }
}

/// Sets the idle time allowed between messages, in nanoseconds (D3: the
/// connection closes, with no response). Thread-safety: no other thread
/// may use the configuration meanwhile.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_config_set_idle_timeout(
    config: *mut jsontp_server_config,
    timeout_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_server_config("jsontp_server_config_set_idle_timeout", config, |c| {
            c.idle_timeout = duration(timeout_ns);
            Ok(())
        })
    }
}

/// Sets how long one message may take from its first byte to its last, in
/// nanoseconds (D3: `408` and close). Thread-safety: no other thread may
/// use the configuration meanwhile.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_config_set_message_timeout(
    config: *mut jsontp_server_config,
    timeout_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_server_config("jsontp_server_config_set_message_timeout", config, |c| {
            c.limits.message_timeout = duration(timeout_ns);
            Ok(())
        })
    }
}

/// Sets how long the full request may take after `100`, in nanoseconds
/// (D3, D10: `408` and close). Thread-safety: no other thread may use the
/// configuration meanwhile.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_config_set_continue_timeout(
    config: *mut jsontp_server_config,
    timeout_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_server_config("jsontp_server_config_set_continue_timeout", config, |c| {
            c.continue_timeout = duration(timeout_ns);
            Ok(())
        })
    }
}

/// Sets the largest message read, in bytes on the wire (D3: `413` and
/// close). Thread-safety: no other thread may use the configuration
/// meanwhile.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_config_set_max_message_bytes(
    config: *mut jsontp_server_config,
    bytes: usize,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_server_config("jsontp_server_config_set_max_message_bytes", config, |c| {
            c.limits.message.max_message_bytes = bytes;
            Ok(())
        })
    }
}

/// Sets how many responses may be owed and not yet taken by the peer
/// before the server stops reading (D3); at least 1. Thread-safety: no
/// other thread may use the configuration meanwhile.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_config_set_max_pipelined(
    config: *mut jsontp_server_config,
    responses: usize,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_server_config("jsontp_server_config_set_max_pipelined", config, |c| {
            if responses == 0 {
                return Err(Fail::invalid(
                    "max_pipelined must be at least 1: a connection that may owe no response reads nothing",
                ));
            }
            c.max_pipelined = responses;
            Ok(())
        })
    }
}

/// Makes a server connection at time `now_ns` (nanoseconds of
/// `CLOCK_MONOTONIC`), configured by a copy of `config` (NULL: the
/// defaults of `jsontp_server_config_new`).
///
/// Ownership: the caller frees it with `jsontp_server_free`. Thread-safety:
/// a connection may move between threads, but only one thread may use it
/// at a time; separate connections are independent.
///
/// # Safety
/// `config` is NULL or a live configuration; `out_server` is NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_new(
    config: *const jsontp_server_config,
    now_ns: u64,
    out_server: *mut *mut jsontp_server,
) -> jsontp_result {
    guard("jsontp_server_new", || {
        let out_server = out(out_server, "out_server")?;
        let config = if config.is_null() {
            ServerConfig::default()
        } else {
            // SAFETY: non-NULL, live as the caller promises.
            unsafe { borrow(config, "config") }?.inner.clone()
        };
        let server = Box::new(jsontp_server {
            inner: machine::ServerConnection::new(config, now_of(now_ns)?),
            ending: Ending::default(),
        });
        // SAFETY: checked non-NULL.
        unsafe { put(out_server, Box::into_raw(server)) };
        Ok(())
    })
}

/// Frees a server connection. NULL is ignored. Events taken from it stay
/// valid until freed themselves. Thread-safety: no other thread may use it.
///
/// # Safety
/// `server` is NULL or from `jsontp_server_new`, not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_free(server: *mut jsontp_server) {
    // SAFETY: as the caller promises.
    unsafe { free(server) }
}

/// Runs one call on a server connection.
///
/// # Safety
/// `server` is NULL or a live connection, not used elsewhere meanwhile.
unsafe fn with_server(
    what: &str,
    server: *mut jsontp_server,
    body: impl FnOnce(&mut jsontp_server) -> Outcome,
) -> jsontp_result {
    guard(what, || {
        // SAFETY: as the caller promises.
        let server = unsafe { borrow_mut(server, "server") }?;
        body(server)
    })
}

/// Runs one call on a client connection.
///
/// # Safety
/// `client` is NULL or a live connection, not used elsewhere meanwhile.
unsafe fn with_client(
    what: &str,
    client: *mut jsontp_client,
    body: impl FnOnce(&mut jsontp_client) -> Outcome,
) -> jsontp_result {
    guard(what, || {
        // SAFETY: as the caller promises.
        let client = unsafe { borrow_mut(client, "client") }?;
        body(client)
    })
}

/// Gives the connection `len` bytes received from the peer at `now_ns`.
/// Read them only while `jsontp_server_wants_read` says so: bytes given
/// meanwhile are held until it reads again.
///
/// Ownership: the bytes are copied. Thread-safety: one thread at a time
/// per connection.
///
/// # Safety
/// `server` is NULL or a live connection; `data` points to `len` readable
/// bytes (or is NULL with 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_receive_data(
    server: *mut jsontp_server,
    data: *const u8,
    len: usize,
    now_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    let data = unsafe { bytes_in(data, len, "data") };
    // SAFETY: as the caller promises.
    unsafe {
        with_server("jsontp_server_receive_data", server, |s| {
            s.inner.receive_data(data?, now_of(now_ns)?);
            Ok(())
        })
    }
}

/// Tells the connection the peer ended its stream (a read gave 0 bytes).
/// What it sent before is still answered (D1). Thread-safety: one thread
/// at a time per connection.
///
/// # Safety
/// `server` is NULL or a live connection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_receive_eof(server: *mut jsontp_server, now_ns: u64) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_server("jsontp_server_receive_eof", server, |s| {
            s.ending.peer_ended();
            s.inner.receive_eof(now_of(now_ns)?);
            Ok(())
        })
    }
}

/// The next event, in `*out_event`; `JSONTP_DONE` when there is none now
/// (more bytes must come, or the caller must answer or write first).
///
/// Ownership: the caller owns the event and frees it with
/// `jsontp_event_free`. Thread-safety: one thread at a time per connection.
///
/// # Safety
/// `server` is NULL or a live connection; `out_event` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_next_event(
    server: *mut jsontp_server,
    now_ns: u64,
    out_event: *mut *mut jsontp_event,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_server("jsontp_server_next_event", server, |s| {
            let out_event = out(out_event, "out_event")?;
            let now = now_of(now_ns)?;
            loop {
                let Some(event) = s.inner.next_event(now) else {
                    return Err(Fail::done());
                };
                let ending = &s.ending;
                // An event of a later core that this binding does not know
                // is skipped: every event it knows still comes.
                if let Some(event) = jsontp_event::of_server(event, || ending.reason()) {
                    s.ending.note(&event);
                    // SAFETY: checked non-NULL.
                    put(out_event, Box::into_raw(Box::new(event)));
                    return Ok(());
                }
            }
        })
    }
}

/// Answers exchange `id` with a whole response (a copy of `response`;
/// the caller still owns and frees it). The connection adds `date`,
/// `language` and the echoed `resource`. `JSONTP_USAGE` when the exchange
/// cannot take it now. Thread-safety: one thread at a time per connection.
///
/// # Safety
/// `server` is NULL or a live connection; `response` is NULL or a live
/// response.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_send_response(
    server: *mut jsontp_server,
    id: u64,
    response: *const jsontp_response,
    now_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    let response = unsafe { borrow(response, "response") };
    // SAFETY: as the caller promises.
    unsafe {
        with_server("jsontp_server_send_response", server, |s| {
            let response = response?.inner.clone();
            usage(
                s.inner
                    .send_response(RequestId::from_index(id), response, now_of(now_ns)?),
            )
        })
    }
}

/// Accepts a 100-continue handshake (D10): `100` is queued, the full
/// request follows. Thread-safety: one thread at a time per connection.
///
/// # Safety
/// `server` is NULL or a live connection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_accept_continue(
    server: *mut jsontp_server,
    id: u64,
    now_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_server("jsontp_server_accept_continue", server, |s| {
            usage(
                s.inner
                    .accept_continue(RequestId::from_index(id), now_of(now_ns)?),
            )
        })
    }
}

/// Begins a response whose content follows in pieces (D19): the content
/// of `response` is ignored, its encoding kept; `jsontp_server_send_content`
/// and `jsontp_server_end_content` carry the content. The caller still
/// owns `response`. Thread-safety: one thread at a time per connection.
///
/// # Safety
/// `server` is NULL or a live connection; `response` is NULL or a live
/// response.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_send_response_head(
    server: *mut jsontp_server,
    id: u64,
    response: *const jsontp_response,
    now_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    let response = unsafe { borrow(response, "response") };
    // SAFETY: as the caller promises.
    unsafe {
        with_server("jsontp_server_send_response_head", server, |s| {
            let response = response?.inner.clone();
            usage(
                s.inner
                    .send_response_head(RequestId::from_index(id), response, now_of(now_ns)?),
            )
        })
    }
}

/// How many more content bytes exchange `id` takes before its output must
/// drain (backpressure for `jsontp_server_send_content`), in `*out_room`.
/// Thread-safety: one thread at a time per connection.
///
/// # Safety
/// `server` is NULL or a live connection; `out_room` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_content_room(
    server: *const jsontp_server,
    id: u64,
    out_room: *mut usize,
) -> jsontp_result {
    guard("jsontp_server_content_room", || {
        // SAFETY: as the caller promises.
        let server = unsafe { borrow(server, "server") }?;
        let out_room = out(out_room, "out_room")?;
        // SAFETY: checked non-NULL.
        unsafe { put(out_room, server.inner.content_room(RequestId::from_index(id))) };
        Ok(())
    })
}

/// The next piece of a streamed response's content (`len` bytes, copied).
/// Keep within `jsontp_server_content_room`. Thread-safety: one thread at
/// a time per connection.
///
/// # Safety
/// `server` is NULL or a live connection; `data` points to `len` readable
/// bytes (or is NULL with 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_send_content(
    server: *mut jsontp_server,
    id: u64,
    data: *const u8,
    len: usize,
    now_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    let data = unsafe { bytes_in(data, len, "data") };
    // SAFETY: as the caller promises.
    unsafe {
        with_server("jsontp_server_send_content", server, |s| {
            usage(
                s.inner
                    .send_content(RequestId::from_index(id), data?, now_of(now_ns)?),
            )
        })
    }
}

/// Ends a streamed response. Thread-safety: one thread at a time per
/// connection.
///
/// # Safety
/// `server` is NULL or a live connection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_end_content(
    server: *mut jsontp_server,
    id: u64,
    now_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_server("jsontp_server_end_content", server, |s| {
            usage(s.inner.end_content(RequestId::from_index(id), now_of(now_ns)?))
        })
    }
}

/// Gives up a streamed response half-way (its source failed): the message
/// is cut off and the connection closes (D1). Thread-safety: one thread at
/// a time per connection.
///
/// # Safety
/// `server` is NULL or a live connection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_abort_content(
    server: *mut jsontp_server,
    id: u64,
    now_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_server("jsontp_server_abort_content", server, |s| {
            s.inner.abort_content(RequestId::from_index(id), now_of(now_ns)?);
            Ok(())
        })
    }
}

/// Copies up to `len` bytes to write into `buf`, takes them off the
/// connection, and says how many in `*out_written` (0 when nothing waits).
/// Write them all to the socket; ask for less next time when it takes
/// less. Thread-safety: one thread at a time per connection.
///
/// # Safety
/// `server` is NULL or a live connection; `buf` points to `len` writable
/// bytes (or is NULL with 0); `out_written` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_data_to_send(
    server: *mut jsontp_server,
    buf: *mut u8,
    len: usize,
    now_ns: u64,
    out_written: *mut usize,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_server("jsontp_server_data_to_send", server, |s| {
            let out_written = out(out_written, "out_written")?;
            let n = copy_out(s.inner.pending_output(), buf, len)?;
            if n > 0 {
                s.inner.consume_output(n, now_of(now_ns)?);
            }
            put(out_written, n);
            Ok(())
        })
    }
}

/// Copies the start of `pending` into the caller's buffer.
///
/// # Safety
/// `buf` points to `len` writable bytes, or is NULL with 0.
unsafe fn copy_out(pending: &[u8], buf: *mut u8, len: usize) -> Result<usize, Fail> {
    let n = pending.len().min(len);
    if n > 0 {
        if buf.is_null() {
            return Err(crate::null("buf"));
        }
        // SAFETY: `buf` has room for `len >= n` bytes and is not the
        // connection's own memory (the caller's buffer).
        unsafe { std::ptr::copy_nonoverlapping(pending.as_ptr(), buf, n) };
    }
    Ok(n)
}

/// The bytes waiting to be written, borrowed: `*out_data` and `*out_len`
/// (0 when none). Write what the socket takes, then say how much with
/// `jsontp_server_consume_output`.
///
/// Ownership: the bytes are the connection's, valid until the next call
/// that changes it. Thread-safety: one thread at a time per connection.
///
/// # Safety
/// `server` is NULL or a live connection; the outputs are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_pending_output(
    server: *const jsontp_server,
    out_data: *mut *const u8,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_server_pending_output", || {
        // SAFETY: as the caller promises.
        let server = unsafe { borrow(server, "server") }?;
        // SAFETY: as the caller promises.
        unsafe { put_pending(server.inner.pending_output(), out_data, out_len) }
    })
}

/// # Safety
/// The outputs are NULL or writable.
unsafe fn put_pending(pending: &[u8], out_data: *mut *const u8, out_len: *mut usize) -> Outcome {
    let out_data = out(out_data, "out_data")?;
    let out_len = out(out_len, "out_len")?;
    // SAFETY: both checked non-NULL.
    unsafe {
        put(out_data, pending.as_ptr());
        put(out_len, pending.len());
    }
    Ok(())
}

/// Takes the first `n` pending bytes off the connection: the socket took
/// them. More than are pending is `JSONTP_INVALID_ARGUMENT`. Thread-safety:
/// one thread at a time per connection.
///
/// # Safety
/// `server` is NULL or a live connection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_consume_output(
    server: *mut jsontp_server,
    n: usize,
    now_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_server("jsontp_server_consume_output", server, |s| {
            let pending = s.inner.pending_output().len();
            if n > pending {
                return Err(Fail::invalid(format!(
                    "{n} bytes consumed, but only {pending} are pending"
                )));
            }
            if n > 0 {
                s.inner.consume_output(n, now_of(now_ns)?);
            }
            Ok(())
        })
    }
}

/// When `jsontp_server_handle_timeout` must next be called, in
/// nanoseconds of `CLOCK_MONOTONIC`, in `*out_deadline_ns`; `UINT64_MAX`
/// when no timer runs. Thread-safety: one thread at a time per connection.
///
/// # Safety
/// `server` is NULL or a live connection; `out_deadline_ns` is NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_poll_timeout(
    server: *const jsontp_server,
    out_deadline_ns: *mut u64,
) -> jsontp_result {
    guard("jsontp_server_poll_timeout", || {
        // SAFETY: as the caller promises.
        let server = unsafe { borrow(server, "server") }?;
        let out_deadline_ns = out(out_deadline_ns, "out_deadline_ns")?;
        let deadline = server.inner.poll_timeout().map_or(u64::MAX, nanos_of);
        // SAFETY: checked non-NULL.
        unsafe { put(out_deadline_ns, deadline) };
        Ok(())
    })
}

/// Runs the timers that are due at `now_ns` (D3): a `408`, or the idle
/// close. Then take events and write. Thread-safety: one thread at a time
/// per connection.
///
/// # Safety
/// `server` is NULL or a live connection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_handle_timeout(
    server: *mut jsontp_server,
    now_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_server("jsontp_server_handle_timeout", server, |s| {
            let was_closed = s.inner.is_closed();
            s.inner.handle_timeout(now_of(now_ns)?);
            if !was_closed && s.inner.is_closed() && matches!(s.ending, Ending::Unsaid) {
                s.ending = Ending::IdleTimeout;
            }
            Ok(())
        })
    }
}

/// Writes one of a server's yes-or-no answers.
///
/// # Safety
/// `server` is NULL or a live connection; `out_answer` is NULL or writable.
unsafe fn server_says(
    what: &str,
    server: *const jsontp_server,
    out_answer: *mut bool,
    ask: impl FnOnce(&machine::ServerConnection) -> bool,
) -> jsontp_result {
    guard(what, || {
        // SAFETY: as the caller promises.
        let server = unsafe { borrow(server, "server") }?;
        let out_answer = out(out_answer, "out_answer")?;
        // SAFETY: checked non-NULL.
        unsafe { put(out_answer, ask(&server.inner)) };
        Ok(())
    })
}

/// Whether the connection reads now, in `*out_answer`: false while it
/// waits on this side (D3's backpressure, a handshake to decide) or once
/// it stopped reading. Thread-safety: one thread at a time per connection.
///
/// # Safety
/// `server` is NULL or a live connection; `out_answer` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_wants_read(
    server: *const jsontp_server,
    out_answer: *mut bool,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe { server_says("jsontp_server_wants_read", server, out_answer, |s| s.wants_read()) }
}

/// Whether nothing is under way (no request unanswered, no output
/// pending), in `*out_answer`: a graceful shutdown closes idle
/// connections. Thread-safety: one thread at a time per connection.
///
/// # Safety
/// `server` is NULL or a live connection; `out_answer` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_is_idle(
    server: *const jsontp_server,
    out_answer: *mut bool,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe { server_says("jsontp_server_is_idle", server, out_answer, |s| s.is_idle()) }
}

/// Whether the connection is closed, in `*out_answer`: once what is
/// pending is written, close the socket. Thread-safety: one thread at a
/// time per connection.
///
/// # Safety
/// `server` is NULL or a live connection; `out_answer` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_server_is_closed(
    server: *const jsontp_server,
    out_answer: *mut bool,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe { server_says("jsontp_server_is_closed", server, out_answer, |s| s.is_closed()) }
}

/// Makes a client configuration: D3's limits with 32 MiB per response
/// (a client reads what it asked for), strict validation (D13), a 1 s wait
/// for `100` (D10), whole responses.
///
/// Ownership: the caller frees it with `jsontp_client_config_free`;
/// `jsontp_client_new` copies it. Thread-safety: it may move between
/// threads, but not be used by two at once.
///
/// # Safety
/// `out_config` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_config_new(
    out_config: *mut *mut jsontp_client_config,
) -> jsontp_result {
    guard("jsontp_client_config_new", || {
        let out_config = out(out_config, "out_config")?;
        let config = Box::new(jsontp_client_config {
            inner: ClientConfig::default(),
        });
        // SAFETY: checked non-NULL.
        unsafe { put(out_config, Box::into_raw(config)) };
        Ok(())
    })
}

/// Frees a client configuration. NULL is ignored. Thread-safety: no other
/// thread may use it.
///
/// # Safety
/// `config` is NULL or from `jsontp_client_config_new`, not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_config_free(config: *mut jsontp_client_config) {
    // SAFETY: as the caller promises.
    unsafe { free(config) }
}

/// Runs one change on a client configuration.
///
/// # Safety
/// `config` is NULL or a live configuration, not used elsewhere meanwhile.
unsafe fn with_client_config(
    what: &str,
    config: *mut jsontp_client_config,
    change: impl FnOnce(&mut ClientConfig) -> Outcome,
) -> jsontp_result {
    guard(what, || {
        // SAFETY: as the caller promises.
        let config = unsafe { borrow_mut(config, "config") }?;
        change(&mut config.inner)
    })
}

/// Sets how strictly responses are judged (D13): `validation` is a
/// `jsontp_validation`. Thread-safety: no other
/// thread may use the configuration meanwhile.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_config_set_validation(
    config: *mut jsontp_client_config,
    validation: u32,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_client_config("jsontp_client_config_set_validation", config, |c| {
            c.validation = match validation {
                0 => Validation::Strict,
                1 => Validation::Lenient,
                other => {
                    return Err(Fail::invalid(format!(
                        "validation {other} is not a jsontp_validation"
                    )));
                }
            };
            Ok(())
        })
    }
}

/// Sets how long to wait for `100` before sending the full request anyway,
/// in nanoseconds (D10). Thread-safety: no other thread may use the
/// configuration meanwhile.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_config_set_continue_wait(
    config: *mut jsontp_client_config,
    wait_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_client_config("jsontp_client_config_set_continue_wait", config, |c| {
            c.continue_wait = duration(wait_ns);
            Ok(())
        })
    }
}

/// Hands a response's content out in pieces as it arrives
/// (`JSONTP_EVENT_CONTENT`, D19) instead of holding it whole.
/// Thread-safety: no other thread may use the configuration meanwhile.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_config_set_stream_content(
    config: *mut jsontp_client_config,
    stream: bool,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_client_config("jsontp_client_config_set_stream_content", config, |c| {
            c.stream_content = stream;
            Ok(())
        })
    }
}

/// Sets how long one response may take from its first byte to its last,
/// in nanoseconds (D3). Thread-safety: no other thread may use the
/// configuration meanwhile.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_config_set_message_timeout(
    config: *mut jsontp_client_config,
    timeout_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_client_config("jsontp_client_config_set_message_timeout", config, |c| {
            c.limits.message_timeout = duration(timeout_ns);
            Ok(())
        })
    }
}

/// Makes a client connection at `now_ns`, configured by a copy of
/// `config` (NULL: the defaults of `jsontp_client_config_new`).
///
/// Ownership: the caller frees it with `jsontp_client_free`. Thread-safety:
/// one thread at a time per connection.
///
/// # Safety
/// `config` is NULL or a live configuration; `out_client` is NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_new(
    config: *const jsontp_client_config,
    now_ns: u64,
    out_client: *mut *mut jsontp_client,
) -> jsontp_result {
    guard("jsontp_client_new", || {
        let out_client = out(out_client, "out_client")?;
        let config = if config.is_null() {
            ClientConfig::default()
        } else {
            // SAFETY: non-NULL, live as the caller promises.
            unsafe { borrow(config, "config") }?.inner.clone()
        };
        let client = Box::new(jsontp_client {
            inner: machine::ClientConnection::new(config, now_of(now_ns)?),
            ending: Ending::default(),
        });
        // SAFETY: checked non-NULL.
        unsafe { put(out_client, Box::into_raw(client)) };
        Ok(())
    })
}

/// Frees a client connection. NULL is ignored. Thread-safety: no other
/// thread may use it.
///
/// # Safety
/// `client` is NULL or from `jsontp_client_new`, not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_free(client: *mut jsontp_client) {
    // SAFETY: as the caller promises.
    unsafe { free(client) }
}

/// Sends a whole request (a copy; the caller still owns and frees it);
/// its exchange's id in `*out_id`. A request with header `expect:
/// "100-continue"` waits for `100` (D10). Thread-safety: one thread at a
/// time per connection.
///
/// # Safety
/// `client` is NULL or a live connection; `request` is NULL or a live
/// request; `out_id` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_send_request(
    client: *mut jsontp_client,
    request: *const jsontp_request,
    now_ns: u64,
    out_id: *mut u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    let request = unsafe { borrow(request, "request") };
    // SAFETY: as the caller promises.
    unsafe {
        with_client("jsontp_client_send_request", client, |c| {
            let request = request?.inner.clone();
            let out_id = out(out_id, "out_id")?;
            let id = usage(c.inner.send_request(request, now_of(now_ns)?))?;
            put(out_id, id.index());
            Ok(())
        })
    }
}

/// Begins a request whose content follows with `jsontp_client_send_content`
/// and `jsontp_client_end_content` (D19; the request's own content is
/// ignored, its encoding kept); its exchange's id in `*out_id`.
/// Thread-safety: one thread at a time per connection.
///
/// # Safety
/// As `jsontp_client_send_request`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_send_request_head(
    client: *mut jsontp_client,
    request: *const jsontp_request,
    now_ns: u64,
    out_id: *mut u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    let request = unsafe { borrow(request, "request") };
    // SAFETY: as the caller promises.
    unsafe {
        with_client("jsontp_client_send_request_head", client, |c| {
            let request = request?.inner.clone();
            let out_id = out(out_id, "out_id")?;
            let id = usage(c.inner.send_request_head(request, now_of(now_ns)?))?;
            put(out_id, id.index());
            Ok(())
        })
    }
}

/// How many more content bytes exchange `id` takes now, in `*out_room`.
/// Thread-safety: one thread at a time per connection.
///
/// # Safety
/// `client` is NULL or a live connection; `out_room` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_content_room(
    client: *const jsontp_client,
    id: u64,
    out_room: *mut usize,
) -> jsontp_result {
    guard("jsontp_client_content_room", || {
        // SAFETY: as the caller promises.
        let client = unsafe { borrow(client, "client") }?;
        let out_room = out(out_room, "out_room")?;
        // SAFETY: checked non-NULL.
        unsafe { put(out_room, client.inner.content_room(RequestId::from_index(id))) };
        Ok(())
    })
}

/// The next piece of a streamed request's content (copied). Keep within
/// `jsontp_client_content_room`. Thread-safety: one thread at a time per
/// connection.
///
/// # Safety
/// `client` is NULL or a live connection; `data` points to `len` readable
/// bytes (or is NULL with 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_send_content(
    client: *mut jsontp_client,
    id: u64,
    data: *const u8,
    len: usize,
    now_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    let data = unsafe { bytes_in(data, len, "data") };
    // SAFETY: as the caller promises.
    unsafe {
        with_client("jsontp_client_send_content", client, |c| {
            usage(
                c.inner
                    .send_content(RequestId::from_index(id), data?, now_of(now_ns)?),
            )
        })
    }
}

/// Ends a streamed request. Thread-safety: one thread at a time per
/// connection.
///
/// # Safety
/// `client` is NULL or a live connection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_end_content(
    client: *mut jsontp_client,
    id: u64,
    now_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_client("jsontp_client_end_content", client, |c| {
            usage(c.inner.end_content(RequestId::from_index(id), now_of(now_ns)?))
        })
    }
}

/// Gives up a streamed request half-way: the connection closes.
/// Thread-safety: one thread at a time per connection.
///
/// # Safety
/// `client` is NULL or a live connection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_abort_content(
    client: *mut jsontp_client,
    id: u64,
    now_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_client("jsontp_client_abort_content", client, |c| {
            c.inner.abort_content(RequestId::from_index(id), now_of(now_ns)?);
            Ok(())
        })
    }
}

/// Gives the connection `len` bytes received from the server (copied).
/// Thread-safety: one thread at a time per connection.
///
/// # Safety
/// `client` is NULL or a live connection; `data` points to `len` readable
/// bytes (or is NULL with 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_receive_data(
    client: *mut jsontp_client,
    data: *const u8,
    len: usize,
    now_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    let data = unsafe { bytes_in(data, len, "data") };
    // SAFETY: as the caller promises.
    unsafe {
        with_client("jsontp_client_receive_data", client, |c| {
            c.inner.receive_data(data?, now_of(now_ns)?);
            Ok(())
        })
    }
}

/// Tells the connection the server ended its stream. Thread-safety: one
/// thread at a time per connection.
///
/// # Safety
/// `client` is NULL or a live connection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_receive_eof(client: *mut jsontp_client, now_ns: u64) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_client("jsontp_client_receive_eof", client, |c| {
            c.ending.peer_ended();
            c.inner.receive_eof(now_of(now_ns)?);
            Ok(())
        })
    }
}

/// The next event (`JSONTP_EVENT_RESPONSE`, `_CONTINUE`, `_CONTENT`,
/// `_PEER_ERROR`, `_CLOSED`), in `*out_event`; `JSONTP_DONE` when there is
/// none now.
///
/// Ownership: the caller frees the event with `jsontp_event_free`.
/// Thread-safety: one thread at a time per connection.
///
/// # Safety
/// `client` is NULL or a live connection; `out_event` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_next_event(
    client: *mut jsontp_client,
    now_ns: u64,
    out_event: *mut *mut jsontp_event,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_client("jsontp_client_next_event", client, |c| {
            let out_event = out(out_event, "out_event")?;
            let now = now_of(now_ns)?;
            loop {
                let Some(event) = c.inner.next_event(now) else {
                    return Err(Fail::done());
                };
                let ending = &c.ending;
                if let Some(event) = jsontp_event::of_client(event, || ending.reason()) {
                    c.ending.note(&event);
                    // SAFETY: checked non-NULL.
                    put(out_event, Box::into_raw(Box::new(event)));
                    return Ok(());
                }
            }
        })
    }
}

/// Copies up to `len` bytes to write into `buf` and takes them off the
/// connection; how many in `*out_written`. As `jsontp_server_data_to_send`.
///
/// # Safety
/// `client` is NULL or a live connection; `buf` points to `len` writable
/// bytes (or is NULL with 0); `out_written` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_data_to_send(
    client: *mut jsontp_client,
    buf: *mut u8,
    len: usize,
    now_ns: u64,
    out_written: *mut usize,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_client("jsontp_client_data_to_send", client, |c| {
            let out_written = out(out_written, "out_written")?;
            let n = copy_out(c.inner.pending_output(), buf, len)?;
            if n > 0 {
                c.inner.consume_output(n, now_of(now_ns)?);
            }
            put(out_written, n);
            Ok(())
        })
    }
}

/// The bytes waiting to be written, borrowed, as
/// `jsontp_server_pending_output`.
///
/// # Safety
/// `client` is NULL or a live connection; the outputs are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_pending_output(
    client: *const jsontp_client,
    out_data: *mut *const u8,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_client_pending_output", || {
        // SAFETY: as the caller promises.
        let client = unsafe { borrow(client, "client") }?;
        // SAFETY: as the caller promises.
        unsafe { put_pending(client.inner.pending_output(), out_data, out_len) }
    })
}

/// Takes the first `n` pending bytes off the connection, as
/// `jsontp_server_consume_output`.
///
/// # Safety
/// `client` is NULL or a live connection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_consume_output(
    client: *mut jsontp_client,
    n: usize,
    now_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_client("jsontp_client_consume_output", client, |c| {
            let pending = c.inner.pending_output().len();
            if n > pending {
                return Err(Fail::invalid(format!(
                    "{n} bytes consumed, but only {pending} are pending"
                )));
            }
            if n > 0 {
                c.inner.consume_output(n, now_of(now_ns)?);
            }
            Ok(())
        })
    }
}

/// When `jsontp_client_handle_timeout` must next be called, as
/// `jsontp_server_poll_timeout`.
///
/// # Safety
/// `client` is NULL or a live connection; `out_deadline_ns` is NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_poll_timeout(
    client: *const jsontp_client,
    out_deadline_ns: *mut u64,
) -> jsontp_result {
    guard("jsontp_client_poll_timeout", || {
        // SAFETY: as the caller promises.
        let client = unsafe { borrow(client, "client") }?;
        let out_deadline_ns = out(out_deadline_ns, "out_deadline_ns")?;
        let deadline = client.inner.poll_timeout().map_or(u64::MAX, nanos_of);
        // SAFETY: checked non-NULL.
        unsafe { put(out_deadline_ns, deadline) };
        Ok(())
    })
}

/// Runs the timers due at `now_ns` (D3, and the wait for `100`, D10).
/// Thread-safety: one thread at a time per connection.
///
/// # Safety
/// `client` is NULL or a live connection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_handle_timeout(
    client: *mut jsontp_client,
    now_ns: u64,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        with_client("jsontp_client_handle_timeout", client, |c| {
            c.inner.handle_timeout(now_of(now_ns)?);
            Ok(())
        })
    }
}

/// Writes one of a client's yes-or-no answers.
///
/// # Safety
/// `client` is NULL or a live connection; `out_answer` is NULL or writable.
unsafe fn client_says(
    what: &str,
    client: *const jsontp_client,
    out_answer: *mut bool,
    ask: impl FnOnce(&machine::ClientConnection) -> bool,
) -> jsontp_result {
    guard(what, || {
        // SAFETY: as the caller promises.
        let client = unsafe { borrow(client, "client") }?;
        let out_answer = out(out_answer, "out_answer")?;
        // SAFETY: checked non-NULL.
        unsafe { put(out_answer, ask(&client.inner)) };
        Ok(())
    })
}

/// Whether the connection reads now, in `*out_answer`. Thread-safety: one
/// thread at a time per connection.
///
/// # Safety
/// `client` is NULL or a live connection; `out_answer` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_wants_read(
    client: *const jsontp_client,
    out_answer: *mut bool,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe { client_says("jsontp_client_wants_read", client, out_answer, |c| c.wants_read()) }
}

/// Whether the connection is closed, in `*out_answer`. Thread-safety: one
/// thread at a time per connection.
///
/// # Safety
/// `client` is NULL or a live connection; `out_answer` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_client_is_closed(
    client: *const jsontp_client,
    out_answer: *mut bool,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe { client_says("jsontp_client_is_closed", client, out_answer, |c| c.is_closed()) }
}
