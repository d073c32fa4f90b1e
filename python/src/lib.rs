//! `jsontp_protocol._core`: the library's sans-I/O core in Python's words.
//!
//! Nothing of the protocol is decided here: every rule (D1–D21) is the
//! library's. This module converts between Python values and the core's
//! types, reads the clock when the caller gives no time, and turns the
//! core's errors into Python exceptions.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;

use jsontp_protocol::machine::Now;

mod connection;
mod files;
mod messages;
mod values;

create_exception!(
    jsontp_protocol,
    ProtocolError,
    PyException,
    "A jsontp protocol error: the base of RemoteProtocolError and LocalProtocolError."
);
create_exception!(
    jsontp_protocol,
    RemoteProtocolError,
    ProtocolError,
    "The peer broke the protocol, or went missing. Attributes: `kind`, `status` (the status the \
     protocol gives, or None), `human_message`, `id` (the exchange, or None) and `closes`."
);
create_exception!(
    jsontp_protocol,
    LocalProtocolError,
    ProtocolError,
    "This program asked the connection for something the protocol does not allow now: a bug in \
     the caller, not the peer."
);

/// Where the caller's clock (`time.monotonic()`, in seconds) and Rust's
/// `Instant` were read together, so that a time given as a float maps to an
/// instant and back.
struct Origin {
    instant: Instant,
    seconds: f64,
}

static ORIGIN: OnceLock<Origin> = OnceLock::new();

fn origin() -> &'static Origin {
    ORIGIN
        .get()
        .expect("the module's initialisation set the clock's origin")
}

/// The core's time for a caller's `now` (seconds of `time.monotonic()`),
/// or the clock's when it gives none. The wall clock is always read: it
/// only writes `date` headers (D16).
pub(crate) fn now_of(now: Option<f64>) -> PyResult<Now> {
    let mut current = jsontp_protocol::io_adapters::now();
    if let Some(seconds) = now {
        if !seconds.is_finite() {
            return Err(PyValueError::new_err(format!(
                "now must be a finite number of seconds (time.monotonic()), not {seconds}"
            )));
        }
        let origin = origin();
        let offset = seconds - origin.seconds;
        current.instant = if offset >= 0.0 {
            origin.instant + Duration::from_secs_f64(offset)
        } else {
            origin
                .instant
                .checked_sub(Duration::from_secs_f64(-offset))
                .unwrap_or(origin.instant)
        };
    }
    Ok(current)
}

/// An instant as seconds of the caller's clock.
pub(crate) fn seconds_of(instant: Instant) -> f64 {
    let origin = origin();
    match instant.checked_duration_since(origin.instant) {
        Some(after) => origin.seconds + after.as_secs_f64(),
        None => origin.seconds - origin.instant.duration_since(instant).as_secs_f64(),
    }
}

/// A duration given in seconds, checked.
pub(crate) fn duration_of(what: &str, seconds: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(seconds).map_err(|_| {
        PyValueError::new_err(format!(
            "{what} must be a non-negative number of seconds, not {seconds}"
        ))
    })
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let monotonic: f64 = py.import("time")?.getattr("monotonic")?.call0()?.extract()?;
    let _ = ORIGIN.set(Origin {
        instant: jsontp_protocol::io_adapters::now().instant,
        seconds: monotonic,
    });
    m.add("ProtocolError", py.get_type::<ProtocolError>())?;
    m.add("RemoteProtocolError", py.get_type::<RemoteProtocolError>())?;
    m.add("LocalProtocolError", py.get_type::<LocalProtocolError>())?;
    messages::register(m)?;
    connection::register(m)?;
    files::register(m)?;
    Ok(())
}
