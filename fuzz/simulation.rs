//! A whole server connection on simulated bytes and time, shared by
//! `tests/adapters/simulation.rs` (named schedules and proptest) and the
//! `serving` fuzz target (`fuzz/fuzz_targets/serving.rs`, which decodes
//! its input with [`Schedule::decode`]).
//!
//! The real [`Driver`], machine, spool and handler glue serve one
//! connection. Only the transport ([`SimTransport`]: the client's bytes
//! readable in the chunks the schedule chooses, a send window the
//! simulated peer drains when the schedule says, half-close, reset) and
//! the clock ([`Clock::from_fn`] over a shared offset) are simulated. A
//! [`Schedule`] is a client script ([`Item`]s: pipelined small and
//! streamed GETs, uploads in D19 order with or without `100-continue`,
//! refused uploads, too-deep and malformed messages) and the moves
//! ([`Move`]) made whenever the driver waits, then a [`Finish`]: a peer
//! that sends and reads everything and half-closes, or one that does
//! nothing while time runs.
//!
//! The loop is the runtimes' own: `step`; `Dispatch` → `dispatch`;
//! `Yield` → step again; `Wait { read, write, deadline }` → apply moves
//! until the transport is ready for an interest named or the clock has
//! reached the deadline (time stops at every deadline on its way, as a
//! runtime's timer wakes it); `Close` → the end.
//!
//! Invariants ([`run`] returns the first one broken):
//!
//! 1. Responses, read off the bytes the transport took, are valid (strict)
//!    and answer the requests in order: a `100` only for an accepted
//!    handshake, once, before its final response; one final response per
//!    request, with the expected status, echo and content; a message cut
//!    short (not wholly read by the server when answered) may get `400` or
//!    `408` instead; nothing after a closing `400`/`408`/`413`. At the
//!    close, unless the peer reset, a shutdown was asked for, or the peer
//!    left output untaken for the stall limit, every request sent whole
//!    has its final response, a message cut by the end of stream has its
//!    `400`, and no response is cut short.
//! 2. Every `Wait` can be woken: never `read: false, write: false,
//!    deadline: None`; never waiting to read while a read would not block
//!    (bytes, the end of stream or a reset are there: an edge-triggered
//!    runtime would sleep for ever), nor to write while the window has
//!    room; never waiting to write without a deadline (a peer that never
//!    reads must meet the stall limit); never the same deadline already
//!    passed again and again.
//! 3. Once `shut_down()` is called, the connection closes within
//!    [`SHUTDOWN_TIMEOUT`] + [`LINGER`] of simulated time.
//! 4. A streamed reply's content, decoded by the client, is exactly its
//!    reader's bytes; an upload the handler got is exactly what was sent;
//!    once closed, no reader is alive and the spool folder is empty
//!    (refused, too large, cut short and reset uploads included); the
//!    server never writes after `shutdown_write`.
//! 5. Output held by the server is bounded: the bytes the streamed
//!    readers gave, less the decoded content of what the transport has
//!    taken, stay under [`HELD_BOUND`] (512 KiB: the machine's 128 KiB
//!    content window, one 64 KiB piece, D3's owed output and the tail of
//!    the reply before, with room to spare), plus [`BR_HELD`] (1 MiB)
//!    while a `br` reply is queued, written or just was: Brotli, with its 512 KiB
//!    stream window, emits nothing for up to a window of input and then
//!    all of it at once, whatever the machine's window says. What the
//!    transport took beyond what the peer read is the window, by
//!    construction.
//!
//! And: once the schedule's moves are spent, the connection closes within
//! [`HORIZON`] of simulated time, whether the peer cooperates or does
//! nothing at all (the idle, message, continue and stall timers end it).
#![allow(dead_code)]

#[path = "client_simulation.rs"]
pub mod client;
#[path = "pair.rs"]
pub mod pair;

use jsontp_protocol::io_adapters::server::{Handled, HeadCheck, Incoming};
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pair::SimClock;

use jsontp_protocol::io_adapters::server::{
    Driver, Handler, Reply, RequestInfo, ServerOptions, SpoolOptions, Step,
};
use jsontp_protocol::io_adapters::{Clock, IoMode, Transport};
#[cfg(target_os = "linux")]
use jsontp_protocol::machine::OutputCopy;
use jsontp_protocol::machine::{Acknowledged, ContinuePolicy, Limits, ServerConfig};
use jsontp_protocol::message::{
    Body, ContentDecoder, Encoding, MessageLimits, Method, Request, Response, Status, StatusCode, Validation,
    codec, parse_response,
};

/// Nesting depth limit (D3): small, so that a too-deep message is short.
pub const MAX_DEPTH: usize = 16;
/// D3's message time, shortened.
pub const MESSAGE_TIMEOUT: Duration = Duration::from_secs(3);
/// D3's idle time, shortened.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(5);
/// D3's wait for the full request after `100`, shortened.
pub const CONTINUE_TIMEOUT: Duration = Duration::from_secs(10);
/// D3's stall limit, shortened.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(4);
/// D19's longest gap in streamed content, shortened.
pub const CONTENT_GAP_TIMEOUT: Duration = Duration::from_secs(3);
/// D19's slowest average rate, lowered.
pub const MIN_CONTENT_RATE: u64 = 1024;
/// D19's content limit of a streaming receiver, lowered: past it `413`.
pub const MAX_CONTENT: usize = 24 * 1024;
/// D3's output owed beyond the response being written, lowered.
pub const MAX_OUTPUT_OWED: usize = 16 * 1024;
/// Uploads past this many bytes are spooled to the simulation's folder.
pub const MEMORY_LIMIT: usize = 4 * 1024;
/// The drain deadline of a graceful shutdown.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a closing connection drains the peer's input (the driver's
/// linger).
pub const LINGER: Duration = Duration::from_millis(500);
/// Invariant 5: content read from streamed readers and not yet in the
/// transport.
pub const HELD_BOUND: u64 = 512 * 1024;
/// Invariant 5: what a Brotli compressor may hold besides.
pub const BR_HELD: u64 = 1 << 20;
/// How long an open connection may outlive the schedule's last move.
pub const HORIZON: Duration = Duration::from_secs(60);

const MAX_STEPS: usize = 2_000_000;
/// Steps in a row that move nothing (yields, dispatches, deadlines
/// already passed) before the driver counts as spinning.
const SPIN: usize = 10_000;

// ---------------------------------------------------------------------
// The schedule
// ---------------------------------------------------------------------

/// One message of the client's script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// `GET` of a small resource, answered whole (`200`, identity).
    SmallGet { len: usize },
    /// `GET` of a large resource, answered with [`Reply::streamed`]
    /// (`200`, content in `encoding`).
    StreamedGet { len: usize, encoding: Encoding },
    /// `GET` of a large resource answered whole with a prepared body, as
    /// a cache answers: on Linux its text is also in a sealed file, which
    /// the transport sends from (`Body::add_sendfile_copy`).
    PreparedGet { len: usize },
    /// `PUT` of `len` bytes in `encoding`, body last and content last
    /// (D19); `201` once the handler saw exactly those bytes. With
    /// `expect_continue`, the handshake first, the full request once the
    /// client has read the `100`.
    Put {
        len: usize,
        encoding: Encoding,
        expect_continue: bool,
    },
    /// A `PUT` the application refuses (`403`): at the handshake with
    /// `expect_continue` (the content is then never sent), after the
    /// upload without.
    DeniedPut {
        len: usize,
        encoding: Encoding,
        expect_continue: bool,
    },
    /// A `PUT` whose content passes [`MAX_CONTENT`]: `413` and close.
    TooLargePut { len: usize, encoding: Encoding },
    /// Nesting past [`MAX_DEPTH`], then a mismatched bracket: one `400`,
    /// then the close.
    TooDeepThenMismatch,
    /// Nesting past [`MAX_DEPTH`], then the client's end of stream: one
    /// `400`, then the close.
    TooDeepThenEof,
    /// A byte where a message must start (D1): one `400`, then the close.
    Garbage,
}

/// What the schedule does while the driver waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    /// The client sends up to this many more bytes of its script (not past
    /// a handshake whose `100` it has not read).
    Send(usize),
    /// The client sends the rest of the current message (or handshake).
    SendItem,
    /// The client sends all it can.
    SendAll,
    /// The peer reads up to this many bytes of what the server wrote.
    Read(usize),
    /// The peer reads everything the server wrote.
    ReadAll,
    /// The send window becomes this many bytes (what the transport holds
    /// beyond what the peer read).
    Window(usize),
    /// Time moves on by this much (stopping at each deadline on the way).
    Advance(Duration),
    /// Time moves on to the driver's deadline, if it has one.
    ToDeadline,
    /// The server shuts down: `Driver::shut_down`.
    Shutdown,
    /// The client ends its sending side (reads return 0).
    HalfClose,
    /// The connection is reset: reads and writes fail.
    Reset,
}

/// What the peer does once the schedule's moves are spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// Sends what is left, reads everything, then half-closes.
    Cooperative,
    /// Does nothing at all: only time moves.
    Silent,
}

/// A whole simulated connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The send window at the start, one of [`WINDOWS`].
    pub window: usize,
    /// The driver's read buffer, one of [`SCRATCH`].
    pub scratch: usize,
    pub finish: Finish,
    pub items: Vec<Item>,
    pub moves: Vec<Move>,
}

/// The send windows a schedule starts with.
pub const WINDOWS: [usize; 8] = [
    512,
    2048,
    8192,
    32 * 1024,
    64 * 1024,
    128 * 1024,
    256 * 1024,
    1 << 20,
];
/// The read buffers a driver may be given.
pub const SCRATCH: [usize; 4] = [64 * 1024, 4096, 512, 16 * 1024];
const ENCODINGS: [Encoding; 4] = [
    Encoding::Identity,
    Encoding::Gzip,
    Encoding::Br,
    Encoding::Deflate,
];
/// Steps of time: around the timers' edges, mostly short.
const MILLIS: [u64; 16] = [
    1, 5, 10, 50, 100, 250, 499, 500, 501, 1000, 1500, 2000, 2999, 3001, 4001, 5001,
];
/// How much the high nibble of an argument stretches a step of time.
const STRETCH: [u64; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 2, 3, 4, 5, 10, 20, 60, 100];

impl Schedule {
    /// A schedule with the largest window and read buffer.
    pub fn new(items: Vec<Item>, moves: Vec<Move>, finish: Finish) -> Schedule {
        Schedule {
            window: 64 * 1024,
            scratch: 64 * 1024,
            finish,
            items,
            moves,
        }
    }

    /// The same with another initial window (one of [`WINDOWS`]).
    pub fn with_window(mut self, window: usize) -> Schedule {
        self.window = window;
        self
    }

    /// Reads a schedule from arbitrary bytes (the fuzz target's input):
    /// a setup byte (bit 0: the finish; bits 1–3: the window; bits 4–5:
    /// the read buffer), a count of items (mod 24), two bytes per item
    /// (kind: the low nibble the type, bits 4–5 the encoding, bit 6
    /// `expect: 100-continue`; then a size), two bytes per move (an
    /// operation, an argument). Every input is a schedule.
    pub fn decode(data: &[u8]) -> Schedule {
        let mut bytes = data.iter().copied();
        let setup = bytes.next().unwrap_or(0);
        let count = bytes.next().map_or(0, |b| usize::from(b % 24));
        let mut items = Vec::new();
        for _ in 0..count {
            let (Some(kind), Some(arg)) = (bytes.next(), bytes.next()) else {
                break;
            };
            items.push(Item::decode(kind, arg));
        }
        let mut moves = Vec::new();
        while let (Some(op), Some(arg)) = (bytes.next(), bytes.next()) {
            moves.push(Move::decode(op, arg));
        }
        Schedule {
            window: WINDOWS[usize::from(setup >> 1) & 7],
            scratch: SCRATCH[usize::from(setup >> 4) & 3],
            finish: if setup & 1 == 0 {
                Finish::Cooperative
            } else {
                Finish::Silent
            },
            items,
            moves,
        }
    }

    /// The bytes [`decode`](Self::decode) reads back as this schedule.
    /// Panics when a length or duration is not one the format can say.
    pub fn encode(&self) -> Vec<u8> {
        let window = WINDOWS
            .iter()
            .position(|&w| w == self.window)
            .expect("a window of WINDOWS");
        let scratch = SCRATCH
            .iter()
            .position(|&s| s == self.scratch)
            .expect("a buffer of SCRATCH");
        let finish = u8::from(self.finish == Finish::Silent);
        let mut out = vec![finish | (window as u8) << 1 | (scratch as u8) << 4];
        assert!(self.items.len() < 24, "at most 23 items");
        out.push(self.items.len() as u8);
        for item in &self.items {
            out.extend_from_slice(&item.encode());
        }
        for m in &self.moves {
            out.extend_from_slice(&m.encode());
        }
        debug_assert_eq!(&Schedule::decode(&out), self);
        out
    }
}

fn encoding_bits(encoding: Encoding) -> u8 {
    (ENCODINGS
        .iter()
        .position(|&e| e == encoding)
        .expect("an encoding") as u8)
        << 4
}

/// The byte `arg` whose `decode(arg)` is `want`.
fn arg_for<T: PartialEq + std::fmt::Debug>(want: T, decode: impl Fn(u8) -> T) -> u8 {
    (0..=u8::MAX)
        .find(|&arg| decode(arg) == want)
        .unwrap_or_else(|| panic!("{want:?} cannot be written in a schedule"))
}

fn small_len(arg: u8) -> usize {
    1 + usize::from(arg) * 16
}
fn streamed_len(arg: u8) -> usize {
    // Streamed replies go out in pieces whatever their size: past
    // MAX_OUTPUT_OWED they take several, and small ones keep a fuzz run
    // fast (compression dominates its time).
    1 + usize::from(arg) * 512
}
fn prepared_len(arg: u8) -> usize {
    // Large enough to be a piece of the output of its own (16 KiB), which
    // goes from its file.
    16 * 1024 + usize::from(arg) * 1024
}
fn put_len(arg: u8) -> usize {
    // Past MEMORY_LIMIT it is spooled; all of them stay under MAX_CONTENT.
    1 + usize::from(arg) * 64
}
fn too_large_len(arg: u8) -> usize {
    MAX_CONTENT + 1 + usize::from(arg) * 64
}
fn chunk(arg: u8) -> usize {
    if arg < 128 {
        usize::from(arg) + 1
    } else {
        (usize::from(arg) - 127) * 1024
    }
}
fn duration(arg: u8) -> Duration {
    Duration::from_millis(MILLIS[usize::from(arg % 16)] * STRETCH[usize::from(arg / 16)])
}

impl Item {
    fn decode(kind: u8, arg: u8) -> Item {
        let encoding = ENCODINGS[usize::from(kind >> 4) & 3];
        let expect_continue = kind & 0x40 != 0;
        match kind & 0x0f {
            4..=7 => Item::StreamedGet {
                len: streamed_len(arg),
                encoding,
            },
            8..=10 => Item::Put {
                len: put_len(arg),
                encoding,
                expect_continue,
            },
            11 => Item::DeniedPut {
                len: put_len(arg),
                encoding,
                expect_continue,
            },
            12 => Item::TooLargePut {
                len: too_large_len(arg),
                encoding,
            },
            13 => Item::TooDeepThenMismatch,
            14 => Item::TooDeepThenEof,
            15 => Item::Garbage,
            1..=3 => Item::PreparedGet {
                len: prepared_len(arg),
            },
            _ => Item::SmallGet { len: small_len(arg) },
        }
    }

    fn encode(&self) -> [u8; 2] {
        let cont = |on: bool| if on { 0x40 } else { 0 };
        match *self {
            Item::SmallGet { len } => [0, arg_for(len, small_len)],
            Item::PreparedGet { len } => [1, arg_for(len, prepared_len)],
            Item::StreamedGet { len, encoding } => [4 | encoding_bits(encoding), arg_for(len, streamed_len)],
            Item::Put {
                len,
                encoding,
                expect_continue,
            } => [
                8 | encoding_bits(encoding) | cont(expect_continue),
                arg_for(len, put_len),
            ],
            Item::DeniedPut {
                len,
                encoding,
                expect_continue,
            } => [
                11 | encoding_bits(encoding) | cont(expect_continue),
                arg_for(len, put_len),
            ],
            Item::TooLargePut { len, encoding } => {
                [12 | encoding_bits(encoding), arg_for(len, too_large_len)]
            }
            Item::TooDeepThenMismatch => [13, 0],
            Item::TooDeepThenEof => [14, 0],
            Item::Garbage => [15, 0],
        }
    }

    /// The final status the request must get when the server reads it
    /// whole.
    fn expected(&self) -> StatusCode {
        match self {
            Item::SmallGet { .. } | Item::StreamedGet { .. } | Item::PreparedGet { .. } => StatusCode::OK,
            Item::Put { .. } => StatusCode::CREATED,
            Item::DeniedPut { .. } => StatusCode::FORBIDDEN,
            Item::TooLargePut { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Item::TooDeepThenMismatch | Item::TooDeepThenEof | Item::Garbage => StatusCode::BAD_REQUEST,
        }
    }

    /// Whether a `100` may come before the final response.
    fn may_continue(&self) -> bool {
        matches!(
            self,
            Item::Put {
                expect_continue: true,
                ..
            }
        )
    }

    /// The resource it names (its index is the seed of its content).
    fn resource(&self, index: usize) -> String {
        match *self {
            Item::SmallGet { len } => format!("/small/{index}/{len}"),
            Item::PreparedGet { len } => format!("/prepared/{index}/{len}"),
            Item::StreamedGet { len, encoding } => format!("/big/{index}/{len}/{encoding}"),
            Item::Put { len, encoding, .. } => format!("/put/{index}/{len}/{encoding}"),
            Item::DeniedPut { len, encoding, .. } => format!("/deny/{index}/{len}/{encoding}"),
            Item::TooLargePut { len, encoding } => format!("/put/{index}/{len}/{encoding}"),
            Item::TooDeepThenMismatch | Item::TooDeepThenEof => format!("/deep/{index}"),
            Item::Garbage => String::new(),
        }
    }

    /// The bytes the client sends: one segment, or the handshake and the
    /// full request.
    fn segments(&self, index: usize) -> Vec<Vec<u8>> {
        let resource = self.resource(index);
        let envelope = |method: &str, headers: &str| {
            format!(
                r#"{{"jsontp":"1.0","type":"request","resource":"{resource}","method":"{method}","headers":{headers},"body":"#
            )
        };
        let upload = |len: usize, encoding: Encoding| {
            let content = generated(index as u64, len, encoding);
            let text = codec::encode(&content, encoding);
            format!(
                r#"{}{{"encoding":"{encoding}","content":"{text}"}}}}"#,
                envelope("PUT", "{}")
            ) + "\n"
        };
        let deep = || {
            format!(
                r#"{}{{"encoding":"identity","content":"","x":{}"#,
                envelope("GET", "{}"),
                "[".repeat(MAX_DEPTH + 4)
            )
        };
        let whole = |text: String| vec![text.into_bytes()];
        match *self {
            Item::SmallGet { .. } | Item::StreamedGet { .. } | Item::PreparedGet { .. } => {
                whole(envelope("GET", "{}") + r#"{"encoding":"identity","content":""}}"# + "\n")
            }
            Item::Put {
                len,
                encoding,
                expect_continue,
            }
            | Item::DeniedPut {
                len,
                encoding,
                expect_continue,
            } => {
                if expect_continue {
                    let handshake = envelope("PUT", r#"{"expect":"100-continue"}"#) + "{}}\n";
                    vec![handshake.into_bytes(), upload(len, encoding).into_bytes()]
                } else {
                    whole(upload(len, encoding))
                }
            }
            Item::TooLargePut { len, encoding } => whole(upload(len, encoding)),
            Item::TooDeepThenMismatch => whole(deep() + "}\n"),
            Item::TooDeepThenEof => whole(deep()),
            Item::Garbage => whole("nonsense\n".to_owned()),
        }
    }
}

impl Move {
    fn decode(op: u8, arg: u8) -> Move {
        // The moves that end things are rarer than the others.
        match op % 64 {
            61 => Move::Shutdown,
            62 => Move::HalfClose,
            63 => Move::Reset,
            op => match op % 8 {
                0 => Move::Send(chunk(arg)),
                1 => Move::SendItem,
                2 => Move::SendAll,
                3 => Move::Read(chunk(arg)),
                4 => Move::ReadAll,
                5 => Move::Window(chunk(arg)),
                6 => Move::Advance(duration(arg)),
                _ if arg < 64 => Move::ToDeadline,
                _ => Move::Read(chunk(arg)),
            },
        }
    }

    fn encode(&self) -> [u8; 2] {
        match *self {
            Move::Send(n) => [0, arg_for(n, chunk)],
            Move::SendItem => [1, 0],
            Move::SendAll => [2, 0],
            Move::Read(n) => [3, arg_for(n, chunk)],
            Move::ReadAll => [4, 0],
            Move::Window(n) => [5, arg_for(n, chunk)],
            Move::Advance(d) => [6, arg_for(d, duration)],
            Move::ToDeadline => [7, 0],
            Move::Shutdown => [61, 0],
            Move::HalfClose => [62, 0],
            Move::Reset => [63, 0],
        }
    }
}

// ---------------------------------------------------------------------
// Content
// ---------------------------------------------------------------------

/// The characters of identity content: JSON needs no escape for any.
const TEXT: &[u8; 64] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .";

fn splitmix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Bytes `from..from + buf.len()` of content `seed`: text for identity,
/// incompressible bytes otherwise (so that compressed output keeps pace
/// with the content, invariant 5).
fn fill(seed: u64, text: bool, from: u64, buf: &mut [u8]) {
    // A word of eight bytes per eight positions, little end first.
    let key = seed.wrapping_mul(0x0001_0000_0001);
    let mut i = 0;
    while i < buf.len() {
        let pos = from + i as u64;
        let word = splitmix(key ^ (pos / 8).wrapping_mul(0x9E37)).to_le_bytes();
        let skip = (pos % 8) as usize;
        let n = (8 - skip).min(buf.len() - i);
        for (b, &w) in buf[i..i + n].iter_mut().zip(&word[skip..skip + n]) {
            *b = if text { TEXT[usize::from(w & 63)] } else { w };
        }
        i += n;
    }
}

/// The whole content `seed` of `len` bytes for `encoding`.
pub fn generated(seed: u64, len: usize, encoding: Encoding) -> Vec<u8> {
    let mut out = vec![0; len];
    fill(seed, encoding == Encoding::Identity, 0, &mut out);
    out
}

/// A streamed reply's reader: the content, in reads of at most 10 000
/// bytes, counted as it is given and as long as it lives.
struct Generated {
    seed: u64,
    text: bool,
    at: u64,
    len: u64,
    shared: Arc<Shared>,
}

impl Read for Generated {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min((self.len - self.at) as usize).min(10_000);
        fill(self.seed, self.text, self.at, &mut buf[..n]);
        self.at += n as u64;
        self.shared.served.fetch_add(n as u64, Ordering::SeqCst);
        Ok(n)
    }
}

impl Drop for Generated {
    fn drop(&mut self) {
        self.shared.readers.fetch_sub(1, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------------
// The application
// ---------------------------------------------------------------------

/// What the handler saw, for the checks.
#[derive(Debug, Default)]
struct Shared {
    /// Content bytes the streamed readers gave.
    served: AtomicU64,
    /// Streamed readers alive.
    readers: AtomicUsize,
    /// Uploads handled: (resource, spooled, what was wrong).
    uploads: Mutex<Vec<(String, bool, Option<String>)>>,
    /// Every request handed to the application (or asked about at a
    /// handshake): its method and resource.
    seen: Mutex<Vec<(Method, String)>>,
}

impl Shared {
    fn saw(&self, request: &Request) {
        let seen = (request.method, request.resource.as_str().to_owned());
        self.seen.lock().expect("seen").push(seen);
    }
}

/// `GET /small/SEED/LEN` (or `POST`) answers whole; `GET /prepared/SEED/LEN` whole
/// with a prepared body (and its sendfile copy, on Linux);
/// `GET /big/SEED/LEN/ENC` streams;
/// `PUT /put/SEED/LEN/ENC` compares what came with what was sent (`201`);
/// `/deny/…` is refused (`403`) at the handshake or after the upload.
struct Application(Arc<Shared>);

/// The parts of a resource path: kind, seed, length, encoding.
fn parts(path: &str) -> Option<(&str, u64, usize, Encoding)> {
    let mut parts = path.trim_start_matches('/').split('/');
    let kind = parts.next()?;
    let seed = parts.next()?.parse().ok()?;
    let len = parts.next()?.parse().ok()?;
    let encoding = parts
        .next()
        .map_or(Some(Encoding::Identity), |e| e.parse().ok())?;
    Some((kind, seed, len, encoding))
}

impl Application {
    /// The answer to `incoming`.
    fn reply(&self, incoming: Incoming) -> Reply {
        let Incoming { request, upload, .. } = incoming;
        let request = &*request;
        self.0.saw(request);
        let not_found = || Response::new(Status::new(StatusCode::NOT_FOUND, "no such thing")).into();
        let Some((kind, seed, len, encoding)) = parts(request.resource.path()) else {
            return not_found();
        };
        match (request.method, kind) {
            (Method::Get | Method::Post, "small") => {
                let text = String::from_utf8(generated(seed, len, Encoding::Identity)).expect("text");
                Response::new(Status::new(StatusCode::OK, "small"))
                    .with_body(Body::text(text))
                    .into()
            }
            (Method::Get, "prepared") => {
                let content = generated(seed, len, Encoding::Identity);
                #[allow(unused_mut, reason = "the copy is made on Linux only")]
                let mut body = Body::prepared(Arc::from(content), Encoding::Identity).expect("text");
                #[cfg(target_os = "linux")]
                body.add_sendfile_copy().expect("a memfd");
                Response::new(Status::new(StatusCode::OK, "prepared"))
                    .with_body(body)
                    .into()
            }
            (Method::Get, "big") => {
                self.0.readers.fetch_add(1, Ordering::SeqCst);
                let reader = Generated {
                    seed,
                    text: encoding == Encoding::Identity,
                    at: 0,
                    len: len as u64,
                    shared: Arc::clone(&self.0),
                };
                let head = Response::new(Status::new(StatusCode::OK, "streamed"))
                    .with_body(Body::empty().with_encoding(encoding).expect("an empty body"));
                Reply::streamed(head, reader)
            }
            (Method::Put, "put" | "deny") => {
                let spooled = upload.is_some();
                let got = match &upload {
                    Some(upload) => {
                        let mut got = Vec::new();
                        upload
                            .reader()
                            .and_then(|mut r| r.read_to_end(&mut got))
                            .map(|_| got)
                            .map_err(|e| format!("the spooled upload cannot be read: {e}"))
                    }
                    None => Ok(request.body.content().to_vec()),
                };
                let want = generated(seed, len, encoding);
                let problem = match got {
                    Err(e) => Some(e),
                    Ok(got) if got != want => {
                        let at = got.iter().zip(&want).position(|(a, b)| a != b);
                        Some(format!(
                            "{} bytes where {} were sent, first difference at {at:?}",
                            got.len(),
                            want.len()
                        ))
                    }
                    Ok(_) => None,
                };
                let resource = request.resource.as_str().to_owned();
                self.0
                    .uploads
                    .lock()
                    .expect("uploads")
                    .push((resource, spooled, problem));
                drop(upload);
                if kind == "deny" {
                    Response::new(Status::new(StatusCode::FORBIDDEN, "denied after the upload")).into()
                } else {
                    Response::new(Status::new(StatusCode::CREATED, "stored")).into()
                }
            }
            _ => not_found(),
        }
    }
}

impl Handler for Application {
    fn respond(&self, incoming: Incoming) -> Handled {
        self.reply(incoming).into()
    }

    fn check_head(&self, head: &Request, _info: &RequestInfo) -> HeadCheck {
        self.0.saw(head);
        if head.resource.path().starts_with("/deny/") {
            return HeadCheck::Refused(Box::new(Response::new(Status::new(
                StatusCode::FORBIDDEN,
                "denied at the handshake",
            ))));
        }
        HeadCheck::Wanted
    }
}

// ---------------------------------------------------------------------
// The transport
// ---------------------------------------------------------------------

/// The in-memory transport: what the client sent and the server has not
/// read, and what the server wrote (all of it, and how much the peer
/// read).
#[derive(Debug, Default)]
pub struct SimTransport {
    inbox: VecDeque<u8>,
    /// The client half-closed: once `inbox` is empty, reads answer 0.
    eof: bool,
    reset: bool,
    /// Bytes the server read.
    read_total: u64,
    /// Everything the server wrote.
    out: Vec<u8>,
    /// How much of `out` the peer read.
    peer_read: usize,
    /// What the transport holds beyond what the peer read, at most.
    window: usize,
    write_shut: bool,
    /// A write after `shutdown_write`.
    misuse: Option<String>,
    /// Bytes sent from copies ([`Transport::send_copy`]).
    from_files: usize,
}

impl SimTransport {
    fn unread(&self) -> usize {
        self.out.len() - self.peer_read
    }

    fn room(&self) -> usize {
        self.window.saturating_sub(self.unread())
    }

    /// A read would not block.
    fn readable(&self) -> bool {
        self.reset || self.eof || !self.inbox.is_empty()
    }

    /// A write would not block.
    fn writable(&self) -> bool {
        self.reset || self.write_shut || self.room() > 0
    }
}

impl Read for SimTransport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.reset {
            return Err(io::ErrorKind::ConnectionReset.into());
        }
        if self.inbox.is_empty() {
            return if self.eof {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let n = buf.len().min(self.inbox.len());
        for (slot, byte) in buf.iter_mut().zip(self.inbox.drain(..n)) {
            *slot = byte;
        }
        self.read_total += n as u64;
        Ok(n)
    }
}

impl SimTransport {
    /// How many of `len` bytes a write or a send from a copy puts out
    /// now, or why none.
    fn accepts(&mut self, len: usize) -> io::Result<usize> {
        if self.reset {
            return Err(io::ErrorKind::ConnectionReset.into());
        }
        if self.write_shut {
            self.misuse = Some(format!("wrote {len} bytes after shutdown_write"));
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        if len == 0 {
            return Ok(0);
        }
        match len.min(self.room()) {
            0 => Err(io::ErrorKind::WouldBlock.into()),
            n => Ok(n),
        }
    }
}

impl Write for SimTransport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.accepts(buf.len())?;
        self.out.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Transport for SimTransport {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.write_shut = true;
        Ok(())
    }

    fn set_timeout(&mut self, _limit: Option<Duration>) -> io::Result<()> {
        Ok(())
    }

    /// What the peer read is what it acknowledged.
    fn acknowledged(&self) -> Option<Acknowledged> {
        Some(Acknowledged {
            bytes: self.peer_read as u64,
            holds_more: self.unread() > 0,
        })
    }

    /// As a write, but from the file: at most what the window has room
    /// for.
    #[cfg(target_os = "linux")]
    fn send_copy(&mut self, pending: OutputCopy<'_>) -> Option<io::Result<usize>> {
        use std::os::unix::fs::FileExt;
        let (file, at) = pending.file()?;
        let n = match self.accepts(pending.len) {
            Ok(n) => n,
            Err(e) => return Some(Err(e)),
        };
        let mut piece = vec![0; n];
        let sent = file.read_at(&mut piece, at).inspect(|&read| {
            self.out.extend_from_slice(&piece[..read]);
            self.from_files += read;
        });
        Some(sent)
    }
}

// ---------------------------------------------------------------------
// The client
// ---------------------------------------------------------------------

/// One request of the script, as far as it went.
#[derive(Debug)]
struct Exchange {
    item: Item,
    resource: String,
    /// Its segments: the message, or the handshake and the full request.
    segments: Vec<Vec<u8>>,
    /// Bytes of each segment sent.
    sent: Vec<usize>,
    /// Where its first byte is in the client's stream, once sent.
    began: Option<u64>,
    /// Where its bytes end in the client's stream, once all are sent.
    end: Option<u64>,
    /// Where its `100` ends in the server's output.
    continued: Option<usize>,
    /// Its final status, and where it ends in the server's output.
    answered: Option<(StatusCode, usize)>,
}

impl Exchange {
    fn started(&self) -> bool {
        self.sent[0] > 0
    }

    /// The handshake went whole (through its closing brace: the newline
    /// after it belongs to no message, D1) and the full request not at all.
    fn awaits_full(&self) -> bool {
        self.segments.len() == 2
            && self.sent[0] >= self.segments[0].trim_ascii_end().len()
            && self.sent[1] == 0
    }
}

/// The client's side: the script and how far it went.
#[derive(Debug)]
struct Client {
    exchanges: Vec<Exchange>,
    /// The next segment to send: (exchange, segment, offset).
    at: (usize, usize, usize),
    /// Bytes sent.
    sent: u64,
    half_closed: bool,
}

/// Whether the client may send segment `seg` of `ex`: `Some(true)` yes,
/// `Some(false)` skip it (a final response was read instead of `100`),
/// `None` not yet.
fn gate(ex: &Exchange, seg: usize, peer_read: usize) -> Option<bool> {
    if seg == 0 {
        return Some(true);
    }
    if ex.answered.is_some_and(|(_, end)| end <= peer_read) {
        return Some(false);
    }
    if ex.continued.is_some_and(|end| end <= peer_read) {
        return Some(true);
    }
    None
}

impl Client {
    fn new(items: &[Item]) -> Client {
        let exchanges = items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let segments = item.segments(i);
                Exchange {
                    item: *item,
                    resource: item.resource(i),
                    sent: vec![0; segments.len()],
                    began: None,
                    segments,
                    end: None,
                    continued: None,
                    answered: None,
                }
            })
            .collect();
        Client {
            exchanges,
            at: (0, 0, 0),
            sent: 0,
            half_closed: false,
        }
    }

    /// Moves past skipped segments; whether a segment can be sent now.
    fn ready(&mut self, peer_read: usize) -> bool {
        loop {
            let (e, s, off) = self.at;
            let Some(ex) = self.exchanges.get(e) else {
                return false;
            };
            // A segment begun is sent to its end.
            let open = if off > 0 {
                Some(true)
            } else {
                gate(ex, s, peer_read)
            };
            match open {
                Some(true) => return !self.half_closed,
                None => return false,
                Some(false) => {
                    // A final response came instead of `100`: the full
                    // request is never sent.
                    self.at = (e + 1, 0, 0);
                }
            }
        }
    }

    /// Whether the client waits for a `100` (or a final response) to go
    /// on.
    fn gated(&mut self, peer_read: usize) -> bool {
        !self.ready(peer_read) && self.exchanges.get(self.at.0).is_some()
    }

    /// Sends up to `most` bytes, not past the current segment when
    /// `item_only`.
    fn send(&mut self, io: &mut SimTransport, mut most: usize, item_only: bool) -> usize {
        let mut total = 0;
        while most > 0 && !io.reset && self.ready(io.peer_read) {
            let (e, s, off) = self.at;
            let ex = &mut self.exchanges[e];
            let bytes = &ex.segments[s];
            let n = most.min(bytes.len() - off);
            ex.began.get_or_insert(self.sent);
            io.inbox.extend(&bytes[off..off + n]);
            ex.sent[s] += n;
            self.sent += n as u64;
            total += n;
            most -= n;
            if off + n < bytes.len() {
                self.at = (e, s, off + n);
                continue;
            }
            if s + 1 < ex.segments.len() {
                self.at = (e, s + 1, 0);
            } else {
                ex.end = Some(self.sent);
                self.at = (e + 1, 0, 0);
                if ex.item == Item::TooDeepThenEof {
                    self.half_close(io);
                }
            }
            if item_only {
                break;
            }
        }
        total
    }

    fn half_close(&mut self, io: &mut SimTransport) {
        self.half_closed = true;
        io.eof = true;
    }
}

// ---------------------------------------------------------------------
// What the client reads
// ---------------------------------------------------------------------

/// The content of the response being written, decoded as it comes
/// (invariant 5).
struct Partial {
    /// Its decoder, and how far its text was fed, once the content began.
    decoder: Option<(ContentDecoder, usize)>,
    ended: bool,
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The responses read off the server's output and matched to the
/// exchanges (invariant 1).
struct Responses {
    /// The output up to here is whole responses, checked.
    scanned: usize,
    /// The output up to here holds no line end past `scanned`: a long
    /// response is searched once, not at every step.
    searched: usize,
    /// The exchange the next final response answers.
    next: usize,
    /// A closing response was read (`400`, `408`, `413`).
    closing: Option<String>,
    /// Decoded content of the streamed responses read whole.
    streamed_done: u64,
    partial: Option<Partial>,
    limits: MessageLimits,
    finals: Vec<u16>,
    continues: usize,
}

impl Responses {
    fn new() -> Responses {
        Responses {
            scanned: 0,
            searched: 0,
            next: 0,
            closing: None,
            streamed_done: 0,
            partial: None,
            limits: MessageLimits {
                max_message_bytes: usize::MAX,
                max_decoded_body: usize::MAX,
                ..MessageLimits::default()
            },
            finals: Vec::new(),
            continues: 0,
        }
    }

    /// Checks every whole response written since last time. `read_before`:
    /// how much of the client's stream the server had read before the step
    /// that wrote them.
    fn scan(&mut self, out: &[u8], client: &mut Client, read_before: u64) -> Result<(), String> {
        loop {
            let from = self.searched.max(self.scanned);
            let Some(nl) = memchr::memchr(b'\n', &out[from..]) else {
                self.searched = out.len();
                break;
            };
            let end = from + nl + 1;
            let line = &out[self.scanned..end];
            let response = parse_response(line, Validation::Strict, &self.limits)
                .map_err(|e| {
                    format!(
                        "invariant 1: the client read a message that is not a valid response ({e}): {}",
                        preview(line)
                    )
                })?
                .message;
            self.accept(response, end, client, read_before)?;
            self.scanned = end;
            self.partial = None;
        }
        self.follow_content(out, client)
    }

    fn accept(
        &mut self,
        response: Response,
        end: usize,
        client: &mut Client,
        read_before: u64,
    ) -> Result<(), String> {
        let code = response.status.code;
        let said = format!("{} ({})", code.as_u16(), response.status.human_message);
        if let Some(closing) = &self.closing {
            return Err(format!(
                "invariant 1: a response {said} after the closing response to {closing}"
            ));
        }
        let Some(ex) = client.exchanges.get_mut(self.next) else {
            return Err(format!(
                "invariant 1: a response {said} to no request (all {} answered)",
                self.next
            ));
        };
        let who = format!("request {} ({:?})", self.next, ex.item);
        if !ex.started() {
            return Err(format!(
                "invariant 1: a response {said} to {who} before any byte of it was sent"
            ));
        }
        if code == StatusCode::CONTINUE {
            // The handshake ends at its closing brace (D1): its trailing
            // newline may still be unsent when the 100 comes.
            let handshake = ex.segments[0].trim_ascii_end().len();
            if !ex.item.may_continue() || ex.continued.is_some() || ex.sent[0] < handshake {
                return Err(format!("invariant 1: an unexpected 100 for {who}"));
            }
            ex.continued = Some(end);
            self.continues += 1;
            return Ok(());
        }
        let read_whole = ex.end.is_some_and(|e| e <= read_before);
        let expected = ex.item.expected();
        if code == expected {
            check_answer(ex, &response).map_err(|why| format!("invariant 4: {who}: {why}"))?;
            if let Item::StreamedGet { len, .. } = ex.item {
                self.streamed_done += len as u64;
            }
        } else if !read_whole && matches!(code, StatusCode::BAD_REQUEST | StatusCode::REQUEST_TIMEOUT) {
            // A message cut short by the end of stream or by time.
        } else {
            return Err(format!(
                "invariant 1: {who} answered {said}, expected {}",
                expected.as_u16()
            ));
        }
        if matches!(
            code,
            StatusCode::BAD_REQUEST | StatusCode::REQUEST_TIMEOUT | StatusCode::PAYLOAD_TOO_LARGE
        ) {
            self.closing = Some(who);
        }
        ex.answered = Some((code, end));
        self.finals.push(code.as_u16());
        self.next += 1;
        Ok(())
    }

    /// Decodes the content of a streamed response being written.
    fn follow_content(&mut self, out: &[u8], client: &Client) -> Result<(), String> {
        let streaming = client
            .exchanges
            .get(self.next)
            .is_some_and(|ex| matches!(ex.item, Item::StreamedGet { .. }));
        if !streaming || self.scanned == out.len() {
            return Ok(());
        }
        let start = self.scanned;
        let partial = self.partial.get_or_insert(Partial {
            decoder: None,
            ended: false,
        });
        if partial.ended {
            return Ok(());
        }
        if partial.decoder.is_none() {
            let line = &out[start..];
            let Some(at) = find(line, br#""content":""#) else {
                return Ok(());
            };
            let encoding = find(&line[..at], br#""encoding":""#)
                .and_then(|e| {
                    let rest = &line[e + 12..at];
                    let name = &rest[..rest.iter().position(|&b| b == b'"')?];
                    std::str::from_utf8(name).ok()?.parse::<Encoding>().ok()
                })
                .ok_or_else(|| format!("a streamed response without an encoding: {}", preview(line)))?;
            partial.decoder = Some((ContentDecoder::new(encoding, usize::MAX), start + at + 11));
        }
        let Some((decoder, fed)) = &mut partial.decoder else {
            return Ok(());
        };
        let text = &out[*fed..];
        let (text, ended) = match text.iter().position(|&b| b == b'"') {
            Some(quote) => (&text[..quote], true),
            None => (text, false),
        };
        let mut sink = Vec::new();
        let mut piece = text;
        loop {
            decoder
                .decode(piece, &mut sink, 1 << 20)
                .map_err(|e| format!("invariant 4: the streamed content does not decode: {e}"))?;
            sink.clear();
            piece = &[];
            if !decoder.has_pending() {
                break;
            }
        }
        *fed += text.len();
        partial.ended = ended;
        Ok(())
    }

    /// Decoded content of the streamed responses the transport took.
    fn streamed_decoded(&self) -> u64 {
        let partial = self
            .partial
            .as_ref()
            .and_then(|p| p.decoder.as_ref())
            .map_or(0, |(d, _)| d.decoded_bytes());
        self.streamed_done + partial
    }
}

/// Whether a final response with the expected status is the right one.
fn check_answer(ex: &Exchange, response: &Response) -> Result<(), String> {
    if !matches!(
        ex.item,
        Item::SmallGet { .. }
            | Item::StreamedGet { .. }
            | Item::PreparedGet { .. }
            | Item::Put { .. }
            | Item::DeniedPut { .. }
    ) {
        // The connection's own refusals: the resource may be unknown (D12).
        return Ok(());
    }
    if response.resource != ex.resource {
        return Err(format!("echoes {:?}", response.resource));
    }
    let index = ex
        .resource
        .split('/')
        .nth(2)
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0);
    let want = match ex.item {
        Item::SmallGet { len } | Item::PreparedGet { len } => generated(index, len, Encoding::Identity),
        Item::StreamedGet { len, encoding } => {
            if response.body.encoding() != encoding {
                return Err(format!(
                    "content in {}, {encoding} expected",
                    response.body.encoding()
                ));
            }
            generated(index, len, encoding)
        }
        _ => return Ok(()),
    };
    let got = response.body.content();
    if got != want.as_slice() {
        let at = got.iter().zip(&want).position(|(a, b)| a != b);
        return Err(format!(
            "content of {} bytes where the reader gave {}, first difference at {at:?}",
            got.len(),
            want.len()
        ));
    }
    Ok(())
}

fn preview(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
    if bytes.len() > 300 {
        format!("{text}… ({} bytes)", bytes.len())
    } else {
        text
    }
}

// ---------------------------------------------------------------------
// The simulation
// ---------------------------------------------------------------------

/// What a simulation that kept every invariant saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The final statuses, in order.
    pub finals: Vec<u16>,
    /// `100`s read.
    pub continues: usize,
    /// Simulated time at the close.
    pub closed_at: Duration,
    /// Simulated time of the shutdown, if any.
    pub shutdown_at: Option<Duration>,
    /// Simulated time the peer last read a byte (zero if never).
    pub peer_last_read: Duration,
    /// Uploads handled, and how many of them were spooled.
    pub uploads: usize,
    pub spooled: usize,
    /// Bytes the server wrote, and how many the peer read.
    pub written: usize,
    pub peer_read: usize,
    /// The server shut its sending side before closing.
    pub shut_write: bool,
    /// The most streamed content the server held (invariant 5).
    pub max_held: u64,
    /// Bytes the server sent from files rather than from memory.
    pub from_files: usize,
    /// Steps taken.
    pub steps: usize,
}

/// A temporary folder for the spool, removed when dropped.
struct Folder(PathBuf);

impl Folder {
    fn new() -> Folder {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "jsontp-simulation-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).expect("a spool folder");
        Folder(path)
    }

    fn entries(&self) -> Vec<String> {
        std::fs::read_dir(&self.0)
            .map(|dir| {
                dir.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The configuration every simulated connection runs with.
pub fn server_options(clock: Clock, spool: &Path) -> ServerOptions {
    let limits = Limits {
        message: MessageLimits {
            max_message_bytes: 64 * 1024,
            max_depth: MAX_DEPTH,
            ..MessageLimits::default()
        },
        message_timeout: MESSAGE_TIMEOUT,
        stall_timeout: STALL_TIMEOUT,
        max_content_bytes: MAX_CONTENT,
        content_gap_timeout: CONTENT_GAP_TIMEOUT,
        min_content_rate: MIN_CONTENT_RATE,
    };
    let config = ServerConfig {
        limits,
        idle_timeout: IDLE_TIMEOUT,
        continue_timeout: CONTINUE_TIMEOUT,
        max_output_owed: MAX_OUTPUT_OWED,
        continue_policy: ContinuePolicy::Ask,
        ..ServerConfig::default()
    };
    ServerOptions::default()
        .with_config(config)
        .with_spool(
            SpoolOptions::default()
                .with_memory_limit(MEMORY_LIMIT)
                .with_folder(spool),
        )
        .with_shutdown_timeout(SHUTDOWN_TIMEOUT)
        .with_clock(clock)
}

/// What the driver last asked to wait for.
#[derive(Debug, Clone, Copy)]
struct Wait {
    read: bool,
    write: bool,
    deadline: Option<Duration>,
}

struct Sim {
    /// The simulated clock the driver reads.
    time: SimClock,
    /// Simulated time since the start, as the clock reads it.
    now: Duration,
    io: SimTransport,
    driver: Driver,
    shared: Arc<Shared>,
    application: Application,
    client: Client,
    responses: Responses,
    folder: Folder,
    finish: Finish,
    shutdown_at: Option<Duration>,
    /// Since when the peer has left output untaken, if it has.
    untaken_since: Option<Duration>,
    /// The peer left output untaken for the stall limit.
    stalled: bool,
    peer_last_read: Duration,
    /// How much the client had sent when the server shut its sending
    /// side: what it sent after cannot be answered.
    sent_at_fin: Option<u64>,
    /// When the schedule's moves ran out.
    finish_from: Option<Duration>,
    /// Time the schedule asked to move to.
    advancing: Option<Duration>,
    /// The step after `shut_down` comes at once.
    woken: bool,
    /// Recent events, for the failure message.
    trace: VecDeque<String>,
    steps: usize,
    idle_steps: usize,
    past_deadlines: usize,
    read_before: u64,
    max_held: u64,
}

impl Sim {
    fn new(schedule: &Schedule) -> Sim {
        let time = SimClock::new();
        let held = time.clone();
        let clock = Clock::from_fn(move || held.now());
        let folder = Folder::new();
        let options = server_options(clock, &folder.0);
        let peer = "192.0.2.1:40000".parse().expect("an address");
        let shared = Arc::new(Shared::default());
        Sim {
            time,
            now: Duration::ZERO,
            io: SimTransport {
                window: schedule.window.max(1),
                ..SimTransport::default()
            },
            driver: Driver::new(peer, &options, IoMode::NonBlocking),
            application: Application(Arc::clone(&shared)),
            shared,
            client: Client::new(&schedule.items),
            responses: Responses::new(),
            folder,
            finish: schedule.finish,
            shutdown_at: None,
            untaken_since: None,
            stalled: false,
            peer_last_read: Duration::ZERO,
            sent_at_fin: None,
            finish_from: None,
            advancing: None,
            woken: false,
            trace: VecDeque::new(),
            steps: 0,
            idle_steps: 0,
            past_deadlines: 0,
            read_before: 0,
            max_held: 0,
        }
    }

    fn note(&mut self, event: impl FnOnce() -> String) {
        if self.trace.len() == 40 {
            self.trace.pop_front();
        }
        let event = event();
        self.trace
            .push_back(format!("{:>9.3}s {event}", self.now.as_secs_f64()));
    }

    fn fail(&self, why: String) -> String {
        let mut message = format!(
            "{why}\n  at {:.3}s; client sent {} bytes (server read {}), server wrote {} (peer read {}); \
             half-closed {}, reset {}, shutdown {:?}\n  recent events:",
            self.now.as_secs_f64(),
            self.client.sent,
            self.io.read_total,
            self.io.out.len(),
            self.io.peer_read,
            self.client.half_closed,
            self.io.reset,
            self.shutdown_at,
        );
        for event in &self.trace {
            let _ = write!(message, "\n    {event}");
        }
        message
    }

    fn deadline_offset(&self, deadline: Instant) -> Duration {
        self.time.since_start(deadline)
    }

    /// Moves the clock to `to` (never back), checking invariant 3.
    fn set_time(&mut self, to: Duration) -> Result<(), String> {
        if to <= self.now {
            return Ok(());
        }
        self.now = to;
        self.time.set(to);
        self.idle_steps = 0;
        if let Some(since) = self.untaken_since
            && self.now.saturating_sub(since) >= STALL_TIMEOUT
        {
            self.stalled = true;
        }
        if let Some(at) = self.shutdown_at {
            let bound = at + SHUTDOWN_TIMEOUT + LINGER;
            if self.now > bound {
                return Err(format!(
                    "invariant 3: still open {:.3}s after the shutdown (bound {:.3}s)",
                    (self.now - at).as_secs_f64(),
                    (bound - at).as_secs_f64()
                ));
            }
        }
        if let Some(from) = self.finish_from
            && self.now > from + HORIZON
        {
            return Err(format!(
                "still open {}s after the schedule's last move ({:?} peer)",
                HORIZON.as_secs(),
                self.finish
            ));
        }
        Ok(())
    }

    /// The peer reads up to `most` bytes.
    fn peer_reads(&mut self, most: usize) {
        if self.io.reset {
            return;
        }
        let n = most.min(self.io.unread());
        if n == 0 {
            return;
        }
        self.io.peer_read += n;
        self.peer_last_read = self.now;
        self.untaken_since = (self.io.unread() > 0).then_some(self.now);
    }

    /// Checks after every step and dispatch: invariants 1, 4 (as far as
    /// they can be seen mid-way) and 5.
    fn observe(&mut self) -> Result<(), String> {
        if self.io.write_shut && self.sent_at_fin.is_none() {
            self.sent_at_fin = Some(self.client.sent);
        }
        if self.untaken_since.is_none() && self.io.unread() > 0 {
            self.untaken_since = Some(self.now);
        }
        if let Some(misuse) = &self.io.misuse {
            return Err(format!("invariant 4: {misuse}"));
        }
        self.responses
            .scan(&self.io.out, &mut self.client, self.read_before)?;
        let served = self.shared.served.load(Ordering::SeqCst);
        let decoded = self.responses.streamed_decoded();
        self.max_held = self.max_held.max(served.saturating_sub(decoded));
        let next = self.responses.next;
        // A `br` reply queued, being written, or just written.
        let brotli = self.client.exchanges[next.saturating_sub(1).min(self.client.exchanges.len())..]
            .iter()
            .any(|ex| {
                ex.started()
                    && matches!(
                        ex.item,
                        Item::StreamedGet {
                            encoding: Encoding::Br,
                            ..
                        }
                    )
            });
        let bound = HELD_BOUND + if brotli { BR_HELD } else { 0 };
        if served > decoded + bound {
            return Err(format!(
                "invariant 5: the server holds {} bytes of streamed content (readers gave {served}, \
                 the transport took {decoded}), over the bound of {bound}",
                served - decoded
            ));
        }
        let uploads = self.shared.uploads.lock().expect("uploads");
        if let Some((resource, _, Some(problem))) = uploads.iter().find(|u| u.2.is_some()) {
            return Err(format!(
                "invariant 4: the upload of {resource} arrived as {problem}"
            ));
        }
        Ok(())
    }

    fn wait_check(&self, wait: Wait) -> Result<(), String> {
        let Wait {
            read,
            write,
            deadline,
        } = wait;
        if !read && !write && deadline.is_none() {
            return Err("invariant 2: Step::Wait for nothing: no interest and no deadline".into());
        }
        if read && self.io.readable() {
            return Err(
                "invariant 2: waits to read while a read would not block (bytes, the end of stream or a \
                 reset are there): an edge-triggered runtime sleeps for ever"
                    .into(),
            );
        }
        if write && self.io.writable() {
            return Err("invariant 2: waits to write while the transport has room".into());
        }
        if write && deadline.is_none() {
            return Err(
                "invariant 2: waits to write with no deadline: a peer that never reads holds the connection \
                 for ever (D3 stall limit)"
                    .into(),
            );
        }
        Ok(())
    }

    fn is_woken(&self, wait: Wait) -> bool {
        self.woken
            || (wait.read && self.io.readable())
            || (wait.write && self.io.writable())
            || wait.deadline.is_some_and(|d| d <= self.now)
    }

    fn apply(&mut self, m: Move, wait: Wait) -> Result<(), String> {
        self.note(|| format!("move {m:?}"));
        self.idle_steps = 0;
        match m {
            Move::Send(n) => {
                self.client.send(&mut self.io, n, false);
            }
            Move::SendItem => {
                self.client.send(&mut self.io, usize::MAX, true);
            }
            Move::SendAll => {
                self.client.send(&mut self.io, usize::MAX, false);
            }
            Move::Read(n) => self.peer_reads(n),
            Move::ReadAll => self.peer_reads(usize::MAX),
            Move::Window(n) => self.io.window = n.max(1),
            Move::Advance(d) => self.advancing = Some(self.now + d),
            Move::ToDeadline => self.advancing = wait.deadline.filter(|&d| d > self.now),
            Move::Shutdown => {
                if self.shutdown_at.is_none() {
                    self.shutdown_at = Some(self.now);
                    self.driver.shut_down();
                    self.woken = true;
                }
            }
            Move::HalfClose => {
                if !self.client.half_closed {
                    self.client.half_close(&mut self.io);
                }
            }
            Move::Reset => self.io.reset = true,
        }
        Ok(())
    }

    /// The peer's part once the schedule's moves are spent.
    fn finish_move(&mut self, wait: Wait) -> Result<(), String> {
        if self.finish_from.is_none() {
            self.finish_from = Some(self.now);
            self.note(|| "the schedule's moves are spent".into());
        }
        if self.finish == Finish::Cooperative && !self.io.reset {
            if self.client.ready(self.io.peer_read) {
                self.io.window = self.io.window.max(256 * 1024);
                return self.apply(Move::SendAll, wait);
            }
            if self.io.unread() > 0 {
                self.io.window = self.io.window.max(256 * 1024);
                return self.apply(Move::ReadAll, wait);
            }
            if !self.client.half_closed && !self.client.gated(self.io.peer_read) {
                return self.apply(Move::HalfClose, wait);
            }
        }
        match wait.deadline {
            Some(deadline) => {
                self.note(|| "time to the deadline".into());
                self.advancing = Some(deadline.max(self.now));
                Ok(())
            }
            None => Err(format!(
                "an open connection that never closes: it waits ({}) with no deadline, and the peer \
                 ({:?}) does nothing more",
                interest(wait),
                self.finish
            )),
        }
    }

    /// Applies moves until the driver is woken.
    fn wake(&mut self, wait: Wait, moves: &mut std::slice::Iter<'_, Move>) -> Result<(), String> {
        loop {
            if self.is_woken(wait) {
                self.woken = false;
                return Ok(());
            }
            if let Some(target) = self.advancing {
                match wait.deadline {
                    Some(deadline) if deadline <= target => {
                        self.set_time(deadline)?;
                        if deadline == target {
                            self.advancing = None;
                        }
                        continue;
                    }
                    _ => {
                        self.advancing = None;
                        self.set_time(target)?;
                        continue;
                    }
                }
            }
            match moves.next() {
                Some(&m) => self.apply(m, wait)?,
                None => self.finish_move(wait)?,
            }
        }
    }

    fn run(&mut self, schedule: &Schedule) -> Result<Outcome, String> {
        let mut scratch = vec![0u8; schedule.scratch];
        let mut moves = schedule.moves.iter();
        loop {
            self.steps += 1;
            self.idle_steps += 1;
            if self.steps > MAX_STEPS {
                return Err(format!("no end after {MAX_STEPS} steps"));
            }
            if self.idle_steps > SPIN {
                return Err(format!("spins: {SPIN} steps in a row with nothing moving"));
            }
            self.read_before = self.io.read_total;
            let (read, written) = (self.io.read_total, self.io.out.len());
            let step = self.driver.step(&mut self.io, &mut scratch);
            if (read, written) != (self.io.read_total, self.io.out.len()) {
                self.idle_steps = 0;
            }
            self.observe()?;
            match step {
                Step::Close => {
                    self.note(|| "Close".into());
                    return self.closed();
                }
                Step::Dispatch => {
                    self.driver.dispatch(&self.application);
                    self.observe()?;
                }
                Step::Yield => {}
                Step::Wait {
                    read,
                    write,
                    deadline,
                } => {
                    let wait = Wait {
                        read,
                        write,
                        deadline: deadline.map(|d| self.deadline_offset(d)),
                    };
                    self.note(|| {
                        format!(
                            "Wait {{ {}, deadline {} }}",
                            interest(wait),
                            wait.deadline
                                .map_or("none".into(), |d| format!("{:.3}s", d.as_secs_f64()))
                        )
                    });
                    match wait.deadline {
                        Some(d) if d <= self.now => {
                            self.past_deadlines += 1;
                            if self.past_deadlines > 100 {
                                return Err(format!(
                                    "invariant 2: Step::Wait keeps returning a deadline already passed \
                                     ({:.3}s, now {:.3}s): does the driver read ServerOptions::clock?",
                                    d.as_secs_f64(),
                                    self.now.as_secs_f64()
                                ));
                            }
                        }
                        _ => self.past_deadlines = 0,
                    }
                    self.wait_check(wait)?;
                    self.wake(wait, &mut moves)?;
                }
                other => return Err(format!("an unknown step {other:?}")),
            }
        }
    }

    /// The checks once the driver said `Close`.
    fn closed(&mut self) -> Result<Outcome, String> {
        if !self.driver.is_closed() {
            return Err("Step::Close, yet is_closed() is false".into());
        }
        let readers = self.shared.readers.load(Ordering::SeqCst);
        if readers > 0 {
            return Err(format!(
                "invariant 4: {readers} streamed readers outlived the connection"
            ));
        }
        let left = self.folder.entries();
        if !left.is_empty() {
            return Err(format!(
                "invariant 4: the spool folder holds {left:?} after the close"
            ));
        }
        let excused = self.io.reset || self.shutdown_at.is_some() || self.stalled;
        if !excused {
            self.complete()?;
            let rest = &self.io.out[self.responses.scanned..];
            if !rest.is_empty() {
                return Err(format!("invariant 1: a response cut short: {}", preview(rest)));
            }
        }
        let uploads = self.shared.uploads.lock().expect("uploads");
        Ok(Outcome {
            finals: self.responses.finals.clone(),
            continues: self.responses.continues,
            closed_at: self.now,
            shutdown_at: self.shutdown_at,
            peer_last_read: self.peer_last_read,
            uploads: uploads.len(),
            spooled: uploads.iter().filter(|u| u.1).count(),
            written: self.io.out.len(),
            peer_read: self.io.peer_read,
            shut_write: self.io.write_shut,
            max_held: self.max_held,
            from_files: self.io.from_files,
            steps: self.steps,
        })
    }

    /// Invariant 1 at the close: every request the client sent whole was
    /// answered; a message cut by the end of stream got its `400`.
    fn complete(&self) -> Result<(), String> {
        for (i, ex) in self.client.exchanges.iter().enumerate() {
            if ex.answered.is_some() {
                continue;
            }
            if self.responses.closing.is_some() || !ex.started() {
                return Ok(());
            }
            if ex
                .began
                .is_some_and(|b| self.sent_at_fin.is_some_and(|fin| b >= fin))
            {
                // Sent after the server had begun to close (an idle
                // timeout, say): the client sees the end of stream.
                return Ok(());
            }
            let who = format!("request {i} ({:?})", ex.item);
            if ex.end.is_some() {
                return Err(format!("invariant 1: {who} was sent whole and never answered"));
            }
            if ex.awaits_full() && self.client.half_closed {
                // The client left after the handshake: nothing is owed.
                return Ok(());
            }
            return Err(if self.client.half_closed {
                format!("invariant 1: {who} was cut short by the end of stream and got no 400")
            } else {
                format!("invariant 1: {who} was cut short and the connection closed without a 408")
            });
        }
        Ok(())
    }
}

fn interest(wait: Wait) -> String {
    match (wait.read, wait.write) {
        (true, true) => "read and write".into(),
        (true, false) => "read".into(),
        (false, true) => "write".into(),
        (false, false) => "no I/O".into(),
    }
}

/// Runs `schedule`: the outcome, or the first invariant broken (with the
/// recent events).
pub fn run(schedule: &Schedule) -> Result<Outcome, String> {
    let mut sim = Sim::new(schedule);
    let outcome = sim.run(schedule);
    outcome.map_err(|why| sim.fail(why))
}

/// Runs `schedule` and panics with the broken invariant and the schedule.
pub fn check(schedule: &Schedule) -> Outcome {
    match run(schedule) {
        Ok(outcome) => outcome,
        Err(why) => panic!("{why}\n  schedule: {schedule:?}"),
    }
}

/// The fuzz target: arbitrary bytes as a schedule ([`Schedule::decode`]).
pub fn serving(data: &[u8]) {
    check(&Schedule::decode(data));
}

// ---------------------------------------------------------------------
// Named schedules: one per defect known or fixed
// ---------------------------------------------------------------------

/// The named regression schedules, also committed as
/// `fuzz/corpus/serving/<name>`.
pub fn regressions() -> Vec<(&'static str, Schedule)> {
    use Encoding::{Br, Gzip, Identity};
    use Finish::{Cooperative, Silent};
    let big = |encoding| Item::StreamedGet {
        len: streamed_len(80),
        encoding,
    };
    let put = |encoding, expect_continue| Item::Put {
        len: put_len(200),
        encoding,
        expect_continue,
    };
    let second = Duration::from_secs(1);
    let mut slow_reads = vec![
        Move::SendAll,
        Move::Read(1024),
        Move::Advance(second),
        Move::Shutdown,
    ];
    for _ in 0..12 {
        slow_reads.extend([Move::Read(1024), Move::Advance(second)]);
    }
    vec![
        (
            "prepared_get_read_slowly_then_a_small_get",
            Schedule::new(
                vec![
                    Item::PreparedGet {
                        len: prepared_len(40),
                    },
                    Item::SmallGet { len: small_len(6) },
                ],
                [Move::SendAll]
                    .into_iter()
                    .chain([Move::Read(1024), Move::Advance(second)].repeat(12))
                    .collect(),
                Cooperative,
            ),
        ),
        (
            "single_small_get",
            Schedule::new(
                vec![Item::SmallGet { len: small_len(6) }],
                vec![Move::SendAll],
                Cooperative,
            ),
        ),
        (
            "single_streamed_get",
            Schedule::new(vec![big(Gzip)], vec![Move::SendAll], Cooperative),
        ),
        (
            "two_pipelined_streamed_downloads_identity",
            Schedule::new(
                vec![big(Identity), big(Identity)],
                vec![Move::SendAll],
                Cooperative,
            ),
        ),
        (
            "two_pipelined_streamed_downloads_gzip",
            Schedule::new(vec![big(Gzip), big(Gzip)], vec![Move::SendAll], Cooperative),
        ),
        (
            "two_pipelined_streamed_downloads_br",
            Schedule::new(vec![big(Br), big(Br)], vec![Move::SendAll], Cooperative),
        ),
        (
            "big_small_big",
            Schedule::new(
                vec![big(Gzip), Item::SmallGet { len: small_len(6) }, big(Br)],
                vec![Move::SendAll],
                Cooperative,
            ),
        ),
        (
            "streamed_download_read_partly_then_a_second_large_get",
            Schedule::new(
                // Identity first: its 40 KiB go out as they are, so the
                // reads below leave it half sent. At these sizes its reader
                // ends within one turn, so the old driver's lost reader
                // does not show here; the real-socket test
                // `a_download_asked_for_mid_download_lets_the_first_finish`
                // pins that defect.
                vec![big(Identity), big(Gzip)],
                vec![
                    Move::SendItem,
                    Move::Read(8 * 1024),
                    Move::Read(8 * 1024),
                    Move::SendItem,
                    Move::Read(8 * 1024),
                ],
                Cooperative,
            )
            .with_window(8192),
        ),
        (
            "sixteen_pipelined_streamed_gets_peer_never_reads",
            Schedule::new(vec![big(Gzip); 16], vec![Move::SendAll], Silent),
        ),
        (
            "too_deep_then_mismatched_bracket",
            Schedule::new(vec![Item::TooDeepThenMismatch], vec![Move::SendAll], Cooperative),
        ),
        (
            "too_deep_then_eof",
            Schedule::new(vec![Item::TooDeepThenEof], vec![Move::SendAll], Cooperative),
        ),
        (
            "shutdown_during_a_slow_download",
            Schedule::new(vec![big(Gzip)], slow_reads, Silent).with_window(2048),
        ),
        (
            "shutdown_during_a_stalled_upload",
            Schedule::new(
                vec![put(Gzip, false)],
                vec![Move::Send(8 * 1024), Move::Shutdown],
                Silent,
            ),
        ),
        (
            "shutdown_while_idle",
            Schedule::new(
                vec![Item::SmallGet { len: small_len(6) }],
                vec![
                    Move::SendAll,
                    Move::ReadAll,
                    Move::Advance(second),
                    Move::Shutdown,
                ],
                Silent,
            ),
        ),
        (
            "upload_pipelined_behind_a_download",
            Schedule::new(vec![big(Gzip), put(Br, false)], vec![Move::SendAll], Cooperative),
        ),
        (
            "continue_put_behind_a_streamed_get",
            Schedule::new(vec![big(Gzip), put(Gzip, true)], vec![Move::SendAll], Cooperative),
        ),
    ]
}

/// The named schedule `name`.
pub fn regression(name: &str) -> Schedule {
    regressions()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no schedule named {name}"))
        .1
}
