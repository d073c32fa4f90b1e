//! The jsontp protocol's C API: the library's sans-I/O core (message layer
//! and connection machine) and its file rules, for any event loop.
//!
//! The shape is quiche's: the caller owns the sockets and the clock. Bytes
//! read go in with `jsontp_server_receive_data`, events come out of
//! `jsontp_server_next_event`, answers go in, bytes to write come out of
//! `jsontp_server_data_to_send` (or `jsontp_server_pending_output` and
//! `jsontp_server_consume_output`), and `jsontp_server_poll_timeout` /
//! `jsontp_server_handle_timeout` run the timers (D3). Every time is a
//! `uint64_t` of nanoseconds on the caller's `CLOCK_MONOTONIC`.
//!
//! The conventions are rustls-ffi's: every fallible call returns a
//! [`jsontp_result`] and writes its outputs only when it returns
//! `JSONTP_OK`; opaque types are made by `_new` and released by `_free`;
//! a NULL pointer or a call the protocol does not allow now is an error
//! code, never undefined behaviour; no panic crosses the boundary. What
//! went wrong is told in words by [`jsontp_last_error`].
//!
//! Nothing of the protocol is decided here: every rule (D1–D21) is the
//! library's. This crate converts between C's values and the core's.

// The C names are the API: `jsontp_server`, `JSONTP_OK`.
#![allow(non_camel_case_types)]

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use jsontp_protocol::machine::Now;

mod connection;
mod event;
mod files;
mod message;

pub use connection::*;
pub use event::*;
pub use files::*;
pub use message::*;

/// What a call did. `JSONTP_OK` is success; every other value says why
/// the call wrote nothing, and [`jsontp_last_error`] says it in words.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum jsontp_result {
    /// Done; the outputs are written.
    JSONTP_OK = 0,
    /// Nothing to give now: no event until more bytes arrive, the caller
    /// answers, or the peer takes output. Not an error.
    JSONTP_DONE = 1,
    /// A pointer the call needs was NULL.
    JSONTP_NULL_PARAMETER = 2,
    /// A value the protocol does not allow: a method, resource, header,
    /// status, encoding or language that is not one, identity content
    /// that is not UTF-8 text (D9), a string that is not UTF-8.
    JSONTP_INVALID_ARGUMENT = 3,
    /// The connection does not allow this call now (the exchange was
    /// answered, is not streaming, the connection is closed): a bug in the
    /// caller, not the peer.
    JSONTP_USAGE = 4,
    /// The accessor does not apply to this object: the id of a `Closed`
    /// event, the status of a timeout, the media of a `write` verdict.
    JSONTP_NOT_APPLICABLE = 5,
    /// The caller's buffer is too small for the answer.
    JSONTP_BUFFER_TOO_SMALL = 6,
    /// The library failed inside (a panic, caught at the boundary). The
    /// object the call was given should be freed and not used again.
    JSONTP_PANIC = 7,
}

/// A failed call: its code and what to tell the caller.
pub(crate) struct Fail {
    code: jsontp_result,
    message: String,
}

pub(crate) type Outcome = Result<(), Fail>;

impl Fail {
    pub(crate) fn new(code: jsontp_result, message: impl Into<String>) -> Fail {
        Fail {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Fail {
        Fail::new(jsontp_result::JSONTP_INVALID_ARGUMENT, message)
    }

    pub(crate) fn not_applicable(message: impl Into<String>) -> Fail {
        Fail::new(jsontp_result::JSONTP_NOT_APPLICABLE, message)
    }

    pub(crate) fn usage(message: impl Into<String>) -> Fail {
        Fail::new(jsontp_result::JSONTP_USAGE, message)
    }

    pub(crate) fn done() -> Fail {
        Fail::new(jsontp_result::JSONTP_DONE, "")
    }
}

thread_local! {
    /// The words of the last failed call on this thread.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn remember(message: &str) {
    // A NUL inside a message (from a peer's text) would end it early.
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|last| *last.borrow_mut() = text);
}

/// Runs one entry point: its failure becomes a code and words, a panic
/// `JSONTP_PANIC`, and nothing unwinds into C.
pub(crate) fn guard(what: &str, body: impl FnOnce() -> Outcome) -> jsontp_result {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => jsontp_result::JSONTP_OK,
        Ok(Err(fail)) => {
            if fail.code != jsontp_result::JSONTP_DONE {
                remember(&format!("{what}: {}", fail.message));
            }
            fail.code
        }
        Err(_) => {
            remember(&format!(
                "{what}: the library failed inside (a panic); free the object"
            ));
            jsontp_result::JSONTP_PANIC
        }
    }
}

/// A shared reference from a pointer the caller gave, or a NULL failure.
///
/// # Safety
/// `pointer` is NULL or points to a live `T` made by this library, used
/// by no other thread during the call.
pub(crate) unsafe fn borrow<'a, T>(pointer: *const T, name: &str) -> Result<&'a T, Fail> {
    // SAFETY: the caller promises a NULL or a live object; NULL is refused.
    unsafe { pointer.as_ref() }.ok_or_else(|| null(name))
}

/// A unique reference from a pointer the caller gave, or a NULL failure.
///
/// # Safety
/// As [`borrow`], and no other reference to the object is in use.
pub(crate) unsafe fn borrow_mut<'a, T>(pointer: *mut T, name: &str) -> Result<&'a mut T, Fail> {
    // SAFETY: the caller promises a NULL or a live object it does not use
    // elsewhere during the call; NULL is refused.
    unsafe { pointer.as_mut() }.ok_or_else(|| null(name))
}

/// Checks that an output pointer is not NULL, to write through it later.
pub(crate) fn out<T>(pointer: *mut T, name: &str) -> Result<*mut T, Fail> {
    if pointer.is_null() {
        Err(null(name))
    } else {
        Ok(pointer)
    }
}

/// Writes an output that [`out`] checked.
///
/// # Safety
/// `pointer` is a non-NULL, aligned pointer to writable memory for a `T`.
pub(crate) unsafe fn put<T>(pointer: *mut T, value: T) {
    // SAFETY: the caller promises a writable place; `write` drops nothing.
    unsafe { pointer.write(value) }
}

pub(crate) fn null(name: &str) -> Fail {
    Fail::new(jsontp_result::JSONTP_NULL_PARAMETER, format!("{name} is NULL"))
}

/// A NUL-terminated UTF-8 string the caller gave.
///
/// # Safety
/// `pointer` is NULL or points to a NUL-terminated string that stays
/// unchanged during the call.
pub(crate) unsafe fn text_in<'a>(pointer: *const c_char, name: &str) -> Result<&'a str, Fail> {
    if pointer.is_null() {
        return Err(null(name));
    }
    // SAFETY: non-NULL and NUL-terminated, as the caller promises.
    let text = unsafe { CStr::from_ptr(pointer) };
    text.to_str()
        .map_err(|_| Fail::invalid(format!("{name} is not UTF-8 text")))
}

/// A NUL-terminated string the caller may leave out (NULL).
///
/// # Safety
/// As [`text_in`].
pub(crate) unsafe fn optional_text_in<'a>(
    pointer: *const c_char,
    name: &str,
) -> Result<Option<&'a str>, Fail> {
    if pointer.is_null() {
        return Ok(None);
    }
    // SAFETY: as the caller promises.
    unsafe { text_in(pointer, name) }.map(Some)
}

/// Bytes the caller gave as a pointer and a length; NULL with 0 is empty.
///
/// # Safety
/// `pointer` is NULL with `len` 0, or points to `len` readable bytes that
/// stay unchanged during the call.
pub(crate) unsafe fn bytes_in<'a>(pointer: *const u8, len: usize, name: &str) -> Result<&'a [u8], Fail> {
    if len == 0 {
        return Ok(&[]);
    }
    if pointer.is_null() {
        return Err(null(name));
    }
    // SAFETY: `len` readable bytes at a non-NULL pointer, as promised.
    Ok(unsafe { std::slice::from_raw_parts(pointer, len) })
}

/// Writes a borrowed string's pointer and length.
///
/// # Safety
/// Both pointers as [`put`] requires (checked by [`out`]).
pub(crate) unsafe fn put_text(text: &str, out_text: *const *const c_char, out_len: *mut usize) -> Outcome {
    let out_text = out(out_text.cast_mut(), "the string's output")?;
    let out_len = out(out_len, "the length's output")?;
    // SAFETY: both checked non-NULL; the caller gave writable places.
    unsafe {
        put(out_text, text.as_ptr().cast());
        put(out_len, text.len());
    }
    Ok(())
}

/// The words of the last call on this thread that failed (not counting
/// `JSONTP_DONE`): a NUL-terminated string, empty when none failed yet.
///
/// Ownership: the string is the library's, valid until the next call into
/// the library on this thread; copy it to keep it. Thread-safety: each
/// thread has its own.
#[unsafe(no_mangle)]
pub extern "C" fn jsontp_last_error() -> *const c_char {
    catch_unwind(|| LAST_ERROR.with(|last| last.borrow().as_ptr())).unwrap_or(c"".as_ptr())
}

/// The name of a result code, such as `"JSONTP_USAGE"`: a static
/// NUL-terminated string (never freed). Thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn jsontp_result_name(result: jsontp_result) -> *const c_char {
    let name: &CStr = match result {
        jsontp_result::JSONTP_OK => c"JSONTP_OK",
        jsontp_result::JSONTP_DONE => c"JSONTP_DONE",
        jsontp_result::JSONTP_NULL_PARAMETER => c"JSONTP_NULL_PARAMETER",
        jsontp_result::JSONTP_INVALID_ARGUMENT => c"JSONTP_INVALID_ARGUMENT",
        jsontp_result::JSONTP_USAGE => c"JSONTP_USAGE",
        jsontp_result::JSONTP_NOT_APPLICABLE => c"JSONTP_NOT_APPLICABLE",
        jsontp_result::JSONTP_BUFFER_TOO_SMALL => c"JSONTP_BUFFER_TOO_SMALL",
        jsontp_result::JSONTP_PANIC => c"JSONTP_PANIC",
    };
    name.as_ptr()
}

/// Where the caller's clock (`CLOCK_MONOTONIC`, in nanoseconds) and
/// Rust's `Instant` were read together, so that a time in nanoseconds maps
/// to an instant and back.
struct Origin {
    instant: Instant,
    nanos: u64,
}

static ORIGIN: OnceLock<Origin> = OnceLock::new();

fn origin() -> &'static Origin {
    ORIGIN.get_or_init(|| Origin {
        instant: jsontp_protocol::io_adapters::now().instant,
        nanos: monotonic_nanos(),
    })
}

fn monotonic_nanos() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec to write; CLOCK_MONOTONIC always
    // exists on the systems this library builds for.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    (now.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(now.tv_nsec as u64)
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock every `now_ns` of this
/// API is read on. A caller may read the clock itself instead (its event
/// loop's cached time, say), or count time of its own making in tests.
/// Thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn jsontp_now_ns() -> u64 {
    monotonic_nanos()
}

/// The core's time for a caller's `now_ns`. The wall clock is always
/// read: it only writes `date` headers (D16).
pub(crate) fn now_of(now_ns: u64) -> Result<Now, Fail> {
    let origin = origin();
    let instant = if now_ns >= origin.nanos {
        origin
            .instant
            .checked_add(Duration::from_nanos(now_ns - origin.nanos))
    } else {
        // A made-up clock may start before the real one's origin; the
        // earliest instant the platform has is as far back as it goes.
        Some(
            origin
                .instant
                .checked_sub(Duration::from_nanos(origin.nanos - now_ns))
                .unwrap_or(origin.instant),
        )
    };
    let instant =
        instant.ok_or_else(|| Fail::invalid(format!("now_ns {now_ns} is past what the clock can hold")))?;
    let mut current = jsontp_protocol::io_adapters::now();
    current.instant = instant;
    Ok(current)
}

/// An instant as nanoseconds of the caller's clock.
pub(crate) fn nanos_of(instant: Instant) -> u64 {
    let origin = origin();
    match instant.checked_duration_since(origin.instant) {
        Some(after) => origin
            .nanos
            .saturating_add(after.as_nanos().min(u128::from(u64::MAX)) as u64),
        None => origin.nanos.saturating_sub(
            origin
                .instant
                .duration_since(instant)
                .as_nanos()
                .min(u128::from(u64::MAX)) as u64,
        ),
    }
}

/// Frees an object made by `Box::into_raw`; a panic in its drop stays on
/// this side of the boundary (a `_free` has no result to report it in).
///
/// # Safety
/// `pointer` is NULL or was made by this library as a `Box<T>` and is not
/// used again.
pub(crate) unsafe fn free<T>(pointer: *mut T) {
    if !pointer.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: made by `Box::into_raw` and given back once, as promised.
            drop(unsafe { Box::from_raw(pointer) });
        }));
    }
}
