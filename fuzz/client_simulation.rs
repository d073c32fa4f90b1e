//! Client schedules: a real client [`Driver`] against a real server
//! [`ServerDriver`] (machine, spool and the simulation's [`Application`]),
//! over a simulated network and clock, shared by
//! `tests/adapters/simulation.rs` and the `calling` fuzz target
//! (`fuzz/fuzz_targets/calling.rs`, which decodes its input with
//! [`ClientSchedule::decode`]).
//!
//! Only the network ([`Wire`]: a pipe each way with a window, reads of at
//! most so many bytes, a reset, a server that goes away) and the clock
//! ([`SimClock`]) are simulated. A [`ClientSchedule`] is a list of
//! [`Op`]s: calls ([`CallKind`]: GETs whole and pipelined, streamed
//! downloads, uploads whole and streamed from a source with or without
//! `100-continue`, refused uploads, `POST` and `DELETE`), queued and made
//! in order on one connection, a new one once it is closed; and moves
//! ([`Net`]) made whenever both sides wait: windows, read sizes, time, a
//! graceful shutdown of the server's side, a reset, a server restart. Once
//! the ops are spent the network opens up and time runs to the deadlines.
//!
//! The user of the client sends a call again, once, on a new connection,
//! when its error's [`Progress`] allows it ([`Progress::may_send_again`],
//! D13), as a pool does.
//!
//! Invariants ([`run`] returns the first one broken):
//!
//! 1. Every call ends with exactly one outcome per request: the answer
//!    the application gives (status, echo, content; a `408` only after the
//!    server's message time, a `503` only after a shutdown), or an error
//!    that names why, and only one the schedule can cause:
//!    [`ClientError::ClosedEarly`] once the server's side ended or the
//!    connection was reset, a [`ClientError::TimedOut`] once that clock's
//!    time has passed.
//! 2. An open client always has a deadline or an interest the peer can
//!    satisfy: never a wait for nothing; never waiting to read while a
//!    read would not block, nor to write while the pipe has room; never
//!    the same deadline already passed again and again; and every call
//!    ends within [`HORIZON`] of the schedule's last move.
//! 3. Downloads and uploads are byte-exact: content read into a sink or
//!    an answer is the application's, an upload the application got is
//!    what the source gave; once the connections are gone no streamed
//!    reader is alive and the spool folder is empty.
//! 4. How far an exchange got is told truly (D13): a request said
//!    unsent never reached the application; an answer said not begun had
//!    no byte read by the client (the responses the client read, framed
//!    and matched to the requests in order). A call sent again is an
//!    idempotent one, sent again once.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use jsontp_protocol::io_adapters::client::{
    Answer, Call, ClientError, ClientOptions, Driver, Progress, Sent, Step, Streams, Timeout,
};
use jsontp_protocol::io_adapters::server::{Driver as ServerDriver, ServerOptions, Step as ServerStep};
use jsontp_protocol::io_adapters::{Clock, IoMode, Transport};
use jsontp_protocol::machine::{Acknowledged, ClientConfig};
use jsontp_protocol::message::{
    Body, Encoding, Headers, MessageLimits, Method, Request, StatusCode, Validation, parse_response,
};

use super::pair::SimClock;
use super::{
    Application, CONTENT_GAP_TIMEOUT, ENCODINGS, Folder, HORIZON, MESSAGE_TIMEOUT, SCRATCH, Shared, Wait,
    chunk, duration, generated, interest, preview, put_len, server_options, small_len, streamed_len,
};

/// The client's silence limit, when its clocks are on.
pub const READ_TIMEOUT: Duration = Duration::from_secs(6);
/// The client's limit on one call, when its clocks are on.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(20);
/// The client machine's response time (D3), shortened.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(8);
/// The client machine's stall limit (D3), shortened.
pub const CLIENT_STALL_TIMEOUT: Duration = Duration::from_secs(4);
/// The client machine's longest gap in streamed content (D19), shortened.
pub const CLIENT_GAP_TIMEOUT: Duration = Duration::from_secs(6);
/// How much an upload's source gives per read.
const SOURCE_READ: usize = 700;

const MAX_STEPS: usize = 2_000_000;
/// Rounds in a row that move nothing before the simulation counts as
/// spinning.
const SPIN: usize = 10_000;

// ---------------------------------------------------------------------
// The schedule
// ---------------------------------------------------------------------

/// One call of the client's user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// `GET` of a small resource (`200`, identity).
    Get { len: usize },
    /// `count` such GETs at once (D2).
    Pipeline { count: usize, len: usize },
    /// `GET` of a streamed resource, its content written to a sink as it
    /// comes (D19).
    Download { len: usize, encoding: Encoding },
    /// `PUT` whose content a source gives as the server takes it (D19);
    /// `201`.
    Upload {
        len: usize,
        encoding: Encoding,
        expect_continue: bool,
    },
    /// `PUT` with its content in the body; `201`.
    Put {
        len: usize,
        encoding: Encoding,
        expect_continue: bool,
    },
    /// `PUT` the application refuses (`403`): at the handshake with
    /// `expect_continue`, after the content without.
    Deny { len: usize, expect_continue: bool },
    /// `POST` of a small resource (`200`): never sent again (D13).
    Post { len: usize },
    /// `DELETE` (`404`: the application deletes nothing).
    Delete,
}

/// What the schedule does to the network, the clock or the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
    /// The pipe from the client holds at most this many bytes.
    UpWindow(usize),
    /// The pipe to the client holds at most this many bytes.
    DownWindow(usize),
    /// The server's reads take at most this many bytes.
    UpReads(usize),
    /// The client's reads take at most this many bytes.
    DownReads(usize),
    /// Time moves on by this much (stopping at each deadline on the way).
    Advance(Duration),
    /// Time moves on to the nearest deadline, if there is one.
    ToDeadline,
    /// The server shuts the connection down gracefully.
    Shutdown,
    /// The connection is reset: every read and write fails.
    Reset,
    /// The server's process ends: its side of the connection closes
    /// where it stands (what it wrote stays readable, then the end; the
    /// client's writes are reset), and new connections meet a new server.
    Restart,
}

/// One step of a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// The user makes this call (after the calls before it).
    Call(CallKind),
    /// Made when both sides wait.
    Net(Net),
}

/// When the schedule's next op is made: whenever both sides wait, and
/// also every so many rounds, so that a reset or a restart can fall in the
/// middle of a transfer that would otherwise never stop for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Only when both sides wait.
    Waiting,
    /// Also every round (a client step and a server step).
    Every(usize),
}

const PACES: [Pace; 4] = [Pace::Waiting, Pace::Every(1), Pace::Every(4), Pace::Every(16)];

/// Whether the client's own clocks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clocks {
    /// [`READ_TIMEOUT`] and [`EXCHANGE_TIMEOUT`].
    On,
    /// Neither: the server's timers and the machine's end every wait.
    Off,
}

/// A whole simulated client session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSchedule {
    /// How the client's transport behaves.
    pub mode: IoMode,
    pub clocks: Clocks,
    /// The client's read buffer, one of [`SCRATCH`].
    pub scratch: usize,
    pub pace: Pace,
    pub ops: Vec<Op>,
}

impl ClientSchedule {
    /// A non-blocking client with its clocks on and the largest buffer.
    pub fn new(ops: Vec<Op>) -> ClientSchedule {
        ClientSchedule {
            mode: IoMode::NonBlocking,
            clocks: Clocks::On,
            scratch: SCRATCH[0],
            pace: Pace::Waiting,
            ops,
        }
    }

    /// The same with ops made at this pace.
    pub fn paced(mut self, pace: Pace) -> ClientSchedule {
        self.pace = pace;
        self
    }

    /// The same over a blocking transport.
    pub fn blocking(mut self) -> ClientSchedule {
        self.mode = IoMode::Blocking;
        self
    }

    /// The same with the client's own clocks off.
    pub fn without_clocks(mut self) -> ClientSchedule {
        self.clocks = Clocks::Off;
        self
    }

    /// Reads a schedule from arbitrary bytes (the fuzz target's input): a
    /// setup byte (bit 0: blocking; bit 1: the client's clocks off; bits
    /// 2–3: the read buffer; bits 4–5: the pace), then two bytes per op (a
    /// kind, an argument).
    /// Every input is a schedule.
    pub fn decode(data: &[u8]) -> ClientSchedule {
        let mut bytes = data.iter().copied();
        let setup = bytes.next().unwrap_or(0);
        let mut ops = Vec::new();
        while let (Some(kind), Some(arg)) = (bytes.next(), bytes.next()) {
            ops.push(Op::decode(kind, arg));
        }
        ClientSchedule {
            mode: if setup & 1 == 0 {
                IoMode::NonBlocking
            } else {
                IoMode::Blocking
            },
            clocks: if setup & 2 == 0 { Clocks::On } else { Clocks::Off },
            scratch: SCRATCH[usize::from(setup >> 2) & 3],
            pace: PACES[usize::from(setup >> 4) & 3],
            ops,
        }
    }

    /// The bytes [`decode`](Self::decode) reads back as this schedule.
    /// Panics when an op is not one the format can say.
    pub fn encode(&self) -> Vec<u8> {
        let scratch = SCRATCH
            .iter()
            .position(|&s| s == self.scratch)
            .expect("a buffer of SCRATCH");
        let pace = PACES
            .iter()
            .position(|&p| p == self.pace)
            .expect("a pace of PACES");
        let mut out = vec![
            u8::from(self.mode == IoMode::Blocking)
                | u8::from(self.clocks == Clocks::Off) << 1
                | (scratch as u8) << 2
                | (pace as u8) << 4,
        ];
        for op in &self.ops {
            out.extend_from_slice(&op.encode());
        }
        debug_assert_eq!(&ClientSchedule::decode(&out), self);
        out
    }
}

impl Op {
    fn decode(kind: u8, arg: u8) -> Op {
        let encoding = ENCODINGS[usize::from(kind >> 4) & 3];
        let expect_continue = kind & 0x40 != 0;
        match kind & 0x0f {
            0 => Op::Call(CallKind::Get { len: small_len(arg) }),
            1 => Op::Call(CallKind::Pipeline {
                count: 2 + usize::from(arg % 4),
                len: small_len(arg / 4),
            }),
            2 => Op::Call(CallKind::Download {
                len: streamed_len(arg),
                encoding,
            }),
            3 => Op::Call(CallKind::Upload {
                len: put_len(arg),
                encoding,
                expect_continue,
            }),
            4 => Op::Call(CallKind::Put {
                len: put_len(arg),
                encoding,
                expect_continue,
            }),
            5 if kind & 0x80 != 0 => Op::Call(CallKind::Post { len: small_len(arg) }),
            5 => Op::Call(CallKind::Deny {
                len: put_len(arg),
                expect_continue,
            }),
            6 => Op::Call(CallKind::Delete),
            7 => Op::Net(Net::UpWindow(chunk(arg))),
            8 => Op::Net(Net::DownWindow(chunk(arg))),
            9 => Op::Net(Net::UpReads(chunk(arg))),
            10 => Op::Net(Net::DownReads(chunk(arg))),
            13 => Op::Net(Net::ToDeadline),
            // The moves that end things are rarer than the others.
            14 => Op::Net(match arg % 4 {
                0 => Net::Shutdown,
                1 => Net::Reset,
                _ => Net::Restart,
            }),
            _ => Op::Net(Net::Advance(duration(arg))),
        }
    }

    /// The first two bytes that decode as this op.
    fn encode(&self) -> [u8; 2] {
        (0..=u8::MAX)
            .flat_map(|kind| (0..=u8::MAX).map(move |arg| [kind, arg]))
            .find(|&[kind, arg]| Op::decode(kind, arg) == *self)
            .unwrap_or_else(|| panic!("{self:?} cannot be written in a schedule"))
    }
}

// ---------------------------------------------------------------------
// The network
// ---------------------------------------------------------------------

/// One direction of a connection: what was sent and not yet read.
#[derive(Debug)]
struct Pipe {
    bytes: VecDeque<u8>,
    /// The most it holds (the sender's buffer and the receiver's).
    window: usize,
    /// The most one read takes.
    most_read: usize,
    /// The sender shut its side: once `bytes` is empty, reads answer 0.
    fin: bool,
    /// Bytes ever written into it.
    total: u64,
}

impl Pipe {
    fn new(window: usize, most_read: usize) -> Pipe {
        Pipe {
            bytes: VecDeque::new(),
            window,
            most_read,
            fin: false,
            total: 0,
        }
    }

    fn room(&self) -> usize {
        self.window.saturating_sub(self.bytes.len())
    }

    fn readable(&self) -> bool {
        self.fin || !self.bytes.is_empty()
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.bytes.is_empty() {
            return if self.fin {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let n = buf.len().min(self.most_read).min(self.bytes.len());
        for (slot, byte) in buf.iter_mut().zip(self.bytes.drain(..n)) {
            *slot = byte;
        }
        Ok(n)
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        match buf.len().min(self.room()) {
            0 => Err(io::ErrorKind::WouldBlock.into()),
            n => {
                self.bytes.extend(&buf[..n]);
                self.total += n as u64;
                Ok(n)
            }
        }
    }
}

/// A connection between the client and the server.
#[derive(Debug)]
struct Wire {
    /// From the client to the server.
    up: Pipe,
    /// From the server to the client.
    down: Pipe,
    /// Reset: every read and write fails.
    reset: bool,
    /// The server's side is gone (closed, or its process ended): the
    /// client reads what was sent before, then the end, and its writes
    /// meet a reset.
    server_gone: bool,
    /// A write of the server's after it shut its sending side.
    misuse: Option<String>,
}

impl Wire {
    fn new(net: &NetSettings) -> Wire {
        Wire {
            up: Pipe::new(net.up_window, net.up_reads),
            down: Pipe::new(net.down_window, net.down_reads),
            reset: false,
            server_gone: false,
            misuse: None,
        }
    }

    fn server_leaves(&mut self) {
        self.server_gone = true;
        self.down.fin = true;
    }

    fn client_readable(&self) -> bool {
        self.reset || self.down.readable()
    }

    fn client_writable(&self) -> bool {
        self.reset || self.server_gone || self.up.room() > 0
    }

    fn server_readable(&self) -> bool {
        self.reset || self.up.readable()
    }

    fn server_writable(&self) -> bool {
        self.reset || self.down.fin || self.down.room() > 0
    }

    /// Whether the client can still learn anything from the server.
    fn ended(&self) -> bool {
        self.reset || self.server_gone || self.down.fin
    }
}

/// The client's end of a [`Wire`]; what it reads is kept for the checks.
struct ClientEnd<'a> {
    wire: &'a mut Wire,
    received: &'a mut Vec<u8>,
}

impl Read for ClientEnd<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.wire.reset {
            return Err(io::ErrorKind::ConnectionReset.into());
        }
        let n = self.wire.down.read(buf)?;
        self.received.extend_from_slice(&buf[..n]);
        Ok(n)
    }
}

impl Write for ClientEnd<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.wire.reset || self.wire.server_gone {
            return Err(io::ErrorKind::ConnectionReset.into());
        }
        self.wire.up.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Transport for ClientEnd<'_> {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.wire.up.fin = true;
        Ok(())
    }

    fn set_timeout(&mut self, _limit: Option<Duration>) -> io::Result<()> {
        Ok(())
    }
}

/// The server's end of a [`Wire`].
struct ServerEnd<'a>(&'a mut Wire);

impl Read for ServerEnd<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.0.reset {
            return Err(io::ErrorKind::ConnectionReset.into());
        }
        self.0.up.read(buf)
    }
}

impl Write for ServerEnd<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.0.reset {
            return Err(io::ErrorKind::ConnectionReset.into());
        }
        if self.0.down.fin {
            self.0.misuse = Some(format!(
                "the server wrote {} bytes after shutdown_write",
                buf.len()
            ));
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        self.0.down.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Transport for ServerEnd<'_> {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.0.down.fin = true;
        Ok(())
    }

    fn set_timeout(&mut self, _limit: Option<Duration>) -> io::Result<()> {
        Ok(())
    }

    /// What the client read is what it acknowledged.
    fn acknowledged(&self) -> Option<Acknowledged> {
        let down = &self.0.down;
        Some(Acknowledged {
            bytes: down.total - down.bytes.len() as u64,
            holds_more: !down.bytes.is_empty(),
        })
    }
}

/// The windows and read sizes new connections get.
#[derive(Debug, Clone, Copy)]
struct NetSettings {
    up_window: usize,
    down_window: usize,
    up_reads: usize,
    down_reads: usize,
}

impl Default for NetSettings {
    fn default() -> Self {
        NetSettings {
            up_window: 64 * 1024,
            down_window: 64 * 1024,
            up_reads: 64 * 1024,
            down_reads: 64 * 1024,
        }
    }
}

// ---------------------------------------------------------------------
// Calls
// ---------------------------------------------------------------------

/// An upload's source: the content, given a few hundred bytes per read.
struct Source {
    content: Vec<u8>,
    at: usize,
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(SOURCE_READ).min(self.content.len() - self.at);
        buf[..n].copy_from_slice(&self.content[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// A call to make: which, its place in the schedule, which attempt.
#[derive(Debug, Clone, Copy)]
struct Planned {
    kind: CallKind,
    /// Its place among the schedule's calls: the seed of its resources.
    index: usize,
    /// 1, or 2 when sent again (D13).
    attempt: u8,
}

/// One request of a call.
#[derive(Debug)]
struct Sending {
    method: Method,
    resource: String,
    /// Its place among the exchanges of the connection.
    exchange: usize,
    /// How often the application had seen it when the call began.
    seen_before: usize,
}

/// The call under way.
struct Running {
    planned: Planned,
    call: Call,
    requests: Vec<Sending>,
    started: Duration,
    source: Option<Source>,
    sink: Option<Vec<u8>>,
}

impl CallKind {
    /// Its requests, the upload's head, its source, and whether a sink
    /// takes the content.
    fn requests(&self, index: usize) -> (Vec<Request>, Option<Source>, bool) {
        let seed = index * 8;
        let resource = |path: String| path.parse().expect("a resource");
        let expect = |request: Request, on: bool| {
            if on {
                request.with_headers(Headers::new().with_expect_continue(true))
            } else {
                request
            }
        };
        let get =
            |seed: usize, len: usize| Request::new(Method::Get, resource(format!("/small/{seed}/{len}")));
        let body = |seed: usize, len: usize, encoding: Encoding| {
            Body::new(generated(seed as u64, len, encoding), encoding).expect("content")
        };
        match *self {
            CallKind::Get { len } => (vec![get(seed, len)], None, false),
            CallKind::Pipeline { count, len } => {
                ((0..count).map(|i| get(seed + i, len)).collect(), None, false)
            }
            CallKind::Download { len, encoding } => {
                let path = format!("/big/{seed}/{len}/{encoding}");
                (vec![Request::new(Method::Get, resource(path))], None, true)
            }
            CallKind::Upload {
                len,
                encoding,
                expect_continue,
            } => {
                let path = format!("/put/{seed}/{len}/{encoding}");
                let head = Request::new(Method::Put, resource(path))
                    .with_body(Body::empty().with_encoding(encoding).expect("an empty body"));
                let source = Source {
                    content: generated(seed as u64, len, encoding),
                    at: 0,
                };
                (vec![expect(head, expect_continue)], Some(source), false)
            }
            CallKind::Put {
                len,
                encoding,
                expect_continue,
            } => {
                let path = format!("/put/{seed}/{len}/{encoding}");
                let request = Request::new(Method::Put, resource(path)).with_body(body(seed, len, encoding));
                (vec![expect(request, expect_continue)], None, false)
            }
            CallKind::Deny { len, expect_continue } => {
                let path = format!("/deny/{seed}/{len}/identity");
                let request =
                    Request::new(Method::Put, resource(path)).with_body(body(seed, len, Encoding::Identity));
                (vec![expect(request, expect_continue)], None, false)
            }
            CallKind::Post { len } => {
                let path = format!("/small/{seed}/{len}");
                (vec![Request::new(Method::Post, resource(path))], None, false)
            }
            CallKind::Delete => {
                let path = format!("/small/{seed}/1");
                (vec![Request::new(Method::Delete, resource(path))], None, false)
            }
        }
    }

    /// The status the application answers request `i` with.
    fn expected(&self) -> StatusCode {
        match self {
            CallKind::Get { .. }
            | CallKind::Pipeline { .. }
            | CallKind::Download { .. }
            | CallKind::Post { .. } => StatusCode::OK,
            CallKind::Upload { .. } | CallKind::Put { .. } => StatusCode::CREATED,
            CallKind::Deny { .. } => StatusCode::FORBIDDEN,
            CallKind::Delete => StatusCode::NOT_FOUND,
        }
    }

    /// The content of the answer to request `i`, where it has one.
    fn content(&self, index: usize, i: usize) -> Option<Vec<u8>> {
        let seed = (index * 8 + i) as u64;
        match *self {
            CallKind::Get { len } | CallKind::Pipeline { len, .. } | CallKind::Post { len } => {
                Some(generated(seed, len, Encoding::Identity))
            }
            CallKind::Download { len, encoding } => Some(generated(seed, len, encoding)),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------
// The simulation
// ---------------------------------------------------------------------

/// What a simulation that kept every invariant saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientOutcome {
    /// Calls made, each attempt counted.
    pub calls: usize,
    /// Outcomes that were answers, and their statuses in order.
    pub statuses: Vec<u16>,
    /// Outcomes that were errors, as they said it.
    pub errors: Vec<String>,
    /// Calls sent again (D13).
    pub sent_again: usize,
    /// Connections opened.
    pub connections: usize,
    /// Simulated time at the end.
    pub ended_at: Duration,
}

/// One connection and both its ends.
struct Connection {
    wire: Wire,
    client: Driver,
    /// `None` once the server's side is gone.
    server: Option<ServerDriver>,
    /// The server's last wait; `None` when it may move.
    server_wait: Option<Wait>,
    /// What the client read.
    received: Vec<u8>,
    /// The resources of the requests begun on it, in order.
    exchanges: Vec<String>,
    /// A shutdown was asked of its server.
    shut_down: bool,
}

struct ClientSim {
    time: SimClock,
    /// Simulated time since the start.
    now: Duration,
    shared: Arc<Shared>,
    application: Application,
    folder: Folder,
    server_options: ServerOptions,
    client_options: ClientOptions,
    mode: IoMode,
    pace: Pace,
    scratch: Vec<u8>,
    server_scratch: Vec<u8>,
    net: NetSettings,
    conn: Option<Connection>,
    queue: VecDeque<Planned>,
    running: Option<Running>,
    /// The client's last wait; `None` when it may move.
    client_wait: Option<Wait>,
    calls: usize,
    /// When the schedule's ops ran out.
    finish_from: Option<Duration>,
    /// Time the schedule asked to move to.
    advancing: Option<Duration>,
    trace: VecDeque<String>,
    steps: usize,
    idle: usize,
    past_deadlines: usize,
    outcome: ClientOutcome,
}

fn client_options(clock: Clock, clocks: Clocks) -> ClientOptions {
    let mut config = ClientConfig {
        stream_content: true,
        ..ClientConfig::default()
    };
    config.limits.message_timeout = RESPONSE_TIMEOUT;
    config.limits.stall_timeout = CLIENT_STALL_TIMEOUT;
    config.limits.content_gap_timeout = CLIENT_GAP_TIMEOUT;
    config.limits.min_content_rate = 1024;
    let on = clocks == Clocks::On;
    ClientOptions {
        config,
        connect_timeout: None,
        read_timeout: on.then_some(READ_TIMEOUT),
        exchange_timeout: on.then_some(EXCHANGE_TIMEOUT),
        ..ClientOptions::default()
    }
    .with_clock(clock)
}

impl ClientSim {
    fn new(schedule: &ClientSchedule) -> ClientSim {
        let time = SimClock::new();
        let held = time.clone();
        let clock = Clock::from_fn(move || held.now());
        let folder = Folder::new();
        let shared = Arc::new(Shared::default());
        ClientSim {
            now: Duration::ZERO,
            application: Application(Arc::clone(&shared)),
            shared,
            server_options: server_options(clock.clone(), &folder.0),
            client_options: client_options(clock, schedule.clocks),
            folder,
            time,
            mode: schedule.mode,
            pace: schedule.pace,
            scratch: vec![0; schedule.scratch],
            server_scratch: vec![0; 16 * 1024],
            net: NetSettings::default(),
            conn: None,
            queue: VecDeque::new(),
            running: None,
            client_wait: None,
            calls: 0,
            finish_from: None,
            advancing: None,
            trace: VecDeque::new(),
            steps: 0,
            idle: 0,
            past_deadlines: 0,
            outcome: ClientOutcome::default(),
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
        let mut message = format!("{why}\n  at {:.3}s", self.now.as_secs_f64());
        if let Some(conn) = &self.conn {
            let _ = write!(
                message,
                "; connection {}: up {} bytes ({} unread), down {} ({} unread), reset {}, server gone {}",
                self.outcome.connections,
                conn.wire.up.total,
                conn.wire.up.bytes.len(),
                conn.wire.down.total,
                conn.wire.down.bytes.len(),
                conn.wire.reset,
                conn.wire.server_gone,
            );
        }
        message.push_str("\n  recent events:");
        for event in &self.trace {
            let _ = write!(message, "\n    {event}");
        }
        message
    }

    /// What moving looks like: bytes written and read, time, calls,
    /// connections.
    fn marker(&self) -> ([u64; 4], Duration, usize, usize) {
        let bytes = self.conn.as_ref().map_or([0; 4], |c| {
            let (up, down) = (&c.wire.up, &c.wire.down);
            [
                up.total,
                up.bytes.len() as u64,
                down.total,
                down.bytes.len() as u64,
            ]
        });
        (bytes, self.now, self.outcome.calls, self.outcome.connections)
    }

    /// Moves the clock to `to` (never back).
    fn set_time(&mut self, to: Duration) -> Result<(), String> {
        if to <= self.now {
            return Ok(());
        }
        self.now = to;
        self.time.set(to);
        if let Some(from) = self.finish_from
            && self.now > from + HORIZON
        {
            return Err(format!(
                "invariant 2: a call still under way {}s after the schedule's last move",
                HORIZON.as_secs()
            ));
        }
        Ok(())
    }

    fn connect(&mut self) {
        // The old connection, if any, is dropped: its server side with it.
        self.conn = None;
        self.outcome.connections += 1;
        let peer: SocketAddr = "192.0.2.1:40000".parse().expect("an address");
        self.conn = Some(Connection {
            wire: Wire::new(&self.net),
            client: Driver::new(self.client_options.clone(), self.mode),
            server: Some(ServerDriver::new(peer, &self.server_options, IoMode::NonBlocking)),
            server_wait: None,
            received: Vec::new(),
            exchanges: Vec::new(),
            shut_down: false,
        });
        self.note(|| "connect".into());
    }

    fn start(&mut self, planned: Planned) -> Result<(), String> {
        if planned.attempt > 1 {
            let method = planned.kind.requests(planned.index).0[0].method;
            if planned.attempt > 2 || matches!(method, Method::Post) {
                return Err(format!(
                    "invariant 4: attempt {} of a {method} call: only idempotent calls go again, once",
                    planned.attempt
                ));
            }
        }
        if self.conn.as_ref().is_none_or(|c| c.client.is_closed()) {
            self.connect();
        }
        let (requests, source, sinks) = planned.kind.requests(planned.index);
        let seen = self.shared.seen.lock().expect("seen").clone();
        let Some(conn) = self.conn.as_mut() else {
            return Err("no connection".into());
        };
        let sending = requests
            .iter()
            .map(|r| {
                let resource = r.resource.as_str().to_owned();
                conn.exchanges.push(resource.clone());
                Sending {
                    method: r.method,
                    seen_before: seen.iter().filter(|(_, s)| *s == resource).count(),
                    resource,
                    exchange: conn.exchanges.len() - 1,
                }
            })
            .collect();
        let call = if source.is_some() {
            conn.client
                .begin_upload(requests.into_iter().next().expect("one request"))
        } else {
            conn.client.begin(requests)
        };
        self.outcome.calls += 1;
        self.running = Some(Running {
            planned,
            call,
            requests: sending,
            started: self.now,
            source,
            sink: sinks.then(Vec::new),
        });
        self.client_wait = None;
        self.note(|| format!("call {planned:?}"));
        Ok(())
    }

    fn step_client(&mut self) -> Result<(), String> {
        let (Some(conn), Some(running)) = (self.conn.as_mut(), self.running.as_mut()) else {
            return Ok(());
        };
        let step = {
            let mut streams = Streams::new(
                running.source.as_mut().map(|s| s as &mut dyn Read),
                running.sink.as_mut().map(|s| s as &mut dyn Write),
            );
            let mut end = ClientEnd {
                wire: &mut conn.wire,
                received: &mut conn.received,
            };
            conn.client
                .step(&mut end, &mut self.scratch, &mut running.call, &mut streams)
        };
        match step {
            Step::Done => {
                self.client_wait = None;
                self.end_call()
            }
            Step::Wait {
                read,
                write,
                deadline,
            } => {
                let wait = Wait {
                    read,
                    write,
                    deadline: deadline.map(|d| self.time.since_start(d)),
                };
                self.check_wait(wait)?;
                self.client_wait = Some(wait);
                Ok(())
            }
            other => Err(format!(
                "the client asked for {other:?} with streams it reads and writes itself"
            )),
        }
    }

    /// Invariant 2 at every wait of the client's.
    fn check_wait(&mut self, wait: Wait) -> Result<(), String> {
        let Some(conn) = self.conn.as_ref() else {
            return Ok(());
        };
        if !wait.read && !wait.write && wait.deadline.is_none() {
            return Err("invariant 2: the client waits for nothing: no interest and no deadline".into());
        }
        if wait.read && conn.wire.client_readable() {
            return Err(
                "invariant 2: the client waits to read while a read would not block (bytes, the end or a \
                 reset are there)"
                    .into(),
            );
        }
        if wait.write && conn.wire.client_writable() {
            return Err("invariant 2: the client waits to write while the pipe has room".into());
        }
        if wait.deadline.is_none() && conn.server.is_none() {
            return Err("invariant 2: the client waits with no deadline on a server that is gone".into());
        }
        match wait.deadline {
            Some(d) if d <= self.now => {
                self.past_deadlines += 1;
                if self.past_deadlines > 100 {
                    return Err(format!(
                        "invariant 2: the client keeps waiting for a deadline already passed ({:.3}s, now \
                         {:.3}s): does the driver read ClientOptions::clock?",
                        d.as_secs_f64(),
                        self.now.as_secs_f64()
                    ));
                }
            }
            _ => self.past_deadlines = 0,
        }
        Ok(())
    }

    fn step_server(&mut self) -> Result<(), String> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(());
        };
        let Some(server) = conn.server.as_mut() else {
            conn.server_wait = None;
            return Ok(());
        };
        let step = server.step(&mut ServerEnd(&mut conn.wire), &mut self.server_scratch);
        match step {
            ServerStep::Dispatch => {
                server.dispatch(&self.application);
                conn.server_wait = None;
            }
            ServerStep::Yield => conn.server_wait = None,
            ServerStep::Wait {
                read,
                write,
                deadline,
            } => {
                conn.server_wait = Some(Wait {
                    read,
                    write,
                    deadline: deadline.map(|d| self.time.since_start(d)),
                });
            }
            ServerStep::Close => {
                conn.server = None;
                conn.server_wait = None;
                conn.wire.server_leaves();
                self.note(|| "the server closed its side".into());
            }
            other => return Err(format!("an unknown server step {other:?}")),
        }
        Ok(())
    }

    /// Checks after every round: what the application saw of uploads,
    /// and the server's writes.
    fn observe(&self) -> Result<(), String> {
        if let Some(misuse) = self.conn.as_ref().and_then(|c| c.wire.misuse.as_ref()) {
            return Err(format!("invariant 3: {misuse}"));
        }
        let uploads = self.shared.uploads.lock().expect("uploads");
        if let Some((resource, _, Some(problem))) = uploads.iter().find(|u| u.2.is_some()) {
            return Err(format!(
                "invariant 3: the upload of {resource} arrived as {problem}"
            ));
        }
        Ok(())
    }

    fn end_call(&mut self) -> Result<(), String> {
        let Some(running) = self.running.take() else {
            return Ok(());
        };
        let Some(conn) = self.conn.as_mut() else {
            return Err("a call ended without a connection".into());
        };
        let Running {
            planned,
            call,
            requests,
            started,
            sink,
            ..
        } = running;
        let outcomes = conn.client.finish(call);
        self.note(|| format!("call ended: {} outcomes", outcomes.len()));
        if outcomes.len() != requests.len() {
            return Err(format!(
                "invariant 1: {} outcomes for {} requests of {:?}",
                outcomes.len(),
                requests.len(),
                planned.kind
            ));
        }
        let elapsed = self.now - started;
        let mut again = None;
        for (i, (outcome, sending)) in outcomes.into_iter().zip(&requests).enumerate() {
            let who = format!(
                "{} {} ({:?}, attempt {})",
                sending.method, sending.resource, planned.kind, planned.attempt
            );
            match outcome {
                Ok(answer) => {
                    self.check_answer(&planned, i, &answer, sink.as_deref(), elapsed)
                        .map_err(|why| format!("{who}: {why}"))?;
                    self.outcome.statuses.push(answer.response.status.code.as_u16());
                }
                Err(error) => {
                    self.check_error(sending, &error, elapsed)
                        .map_err(|why| format!("{who}: {why}"))?;
                    let single = requests.len() == 1;
                    if single
                        && planned.attempt == 1
                        && error.progress().is_some_and(|p| p.may_send_again(sending.method))
                    {
                        again = Some(Planned {
                            attempt: 2,
                            ..planned
                        });
                    }
                    self.outcome.errors.push(error.to_string());
                }
            }
        }
        if let Some(planned) = again {
            self.outcome.sent_again += 1;
            self.note(|| "sent again (D13)".into());
            self.queue.push_front(planned);
        }
        Ok(())
    }

    /// Invariants 1 and 3 for an answer.
    fn check_answer(
        &self,
        planned: &Planned,
        i: usize,
        answer: &Answer,
        sink: Option<&[u8]>,
        elapsed: Duration,
    ) -> Result<(), String> {
        let code = answer.response.status.code;
        let expected = planned.kind.expected();
        let shut_down = self.conn.as_ref().is_some_and(|c| c.shut_down);
        if code != expected {
            let late = elapsed >= MESSAGE_TIMEOUT.min(CONTENT_GAP_TIMEOUT);
            return match code {
                StatusCode::REQUEST_TIMEOUT if late => Ok(()),
                StatusCode::SERVICE_UNAVAILABLE if shut_down => Ok(()),
                _ => Err(format!(
                    "invariant 1: answered {} ({}), {} expected",
                    code.as_u16(),
                    answer.response.status.human_message,
                    expected.as_u16()
                )),
            };
        }
        if let Some(want) = planned.kind.content(planned.index, i) {
            let mut got = sink.map(<[u8]>::to_vec).unwrap_or_default();
            got.extend_from_slice(answer.response.body.content());
            if got != want {
                let at = got.iter().zip(&want).position(|(a, b)| a != b);
                return Err(format!(
                    "invariant 3: {} bytes of content where the application gave {}, first difference at {at:?}",
                    got.len(),
                    want.len()
                ));
            }
        }
        Ok(())
    }

    /// Invariants 1 and 4 for an error.
    fn check_error(&self, sending: &Sending, error: &ClientError, elapsed: Duration) -> Result<(), String> {
        let Some(conn) = self.conn.as_ref() else {
            return Err("no connection".into());
        };
        if error.to_string().is_empty() {
            return Err(format!("invariant 1: an error that says nothing: {error:?}"));
        }
        let options = &self.client_options;
        let limits = &options.config.limits;
        match error {
            ClientError::ClosedEarly { progress } => {
                if !conn.wire.ended() {
                    return Err(format!(
                        "invariant 1: {error} ({progress:?}), yet the server's side is open"
                    ));
                }
                self.check_progress(conn, sending, *progress)
            }
            ClientError::TimedOut(timeout) => {
                let least = match timeout {
                    Timeout::Read => options.read_timeout,
                    Timeout::Exchange => Some(
                        options
                            .exchange_timeout
                            .map_or(limits.stall_timeout, |t| t.min(limits.stall_timeout)),
                    ),
                    Timeout::Message => Some(limits.message_timeout.min(limits.content_gap_timeout)),
                    _ => None,
                };
                match least {
                    Some(least) if elapsed >= least => Ok(()),
                    _ => Err(format!(
                        "invariant 1: {error} after {:.3}s, before its clock ran out",
                        elapsed.as_secs_f64()
                    )),
                }
            }
            other => Err(format!(
                "invariant 1: an error the schedule cannot cause: {other:?} ({other})"
            )),
        }
    }

    /// Invariant 4: what the error says of the request and its answer is
    /// true.
    fn check_progress(&self, conn: &Connection, sending: &Sending, progress: Progress) -> Result<(), String> {
        if progress.request == Sent::Nothing {
            let seen = self.shared.seen.lock().expect("seen");
            let now = seen.iter().filter(|(_, r)| *r == sending.resource).count();
            if now > sending.seen_before {
                return Err(format!(
                    "invariant 4: said unsent ({progress:?}), yet the application got it"
                ));
            }
        }
        if !progress.answer_began && heard(&conn.received, &conn.exchanges, sending.exchange) == Some(true) {
            return Err(format!(
                "invariant 4: said no byte of the answer came ({progress:?}), yet the client read some: {}",
                preview(&conn.received[conn.received.len().saturating_sub(300)..])
            ));
        }
        Ok(())
    }

    /// Whether either side can move without help.
    fn woken(&self) -> bool {
        let Some(conn) = self.conn.as_ref() else {
            return false;
        };
        let due = |w: &Wait| w.deadline.is_some_and(|d| d <= self.now);
        let client = self.running.is_some()
            && self.client_wait.as_ref().is_none_or(|w| {
                due(w) || (w.read && conn.wire.client_readable()) || (w.write && conn.wire.client_writable())
            });
        let server = conn.server.is_some()
            && conn.server_wait.as_ref().is_none_or(|w| {
                due(w) || (w.read && conn.wire.server_readable()) || (w.write && conn.wire.server_writable())
            });
        client || server
    }

    /// The nearest deadline either side waits for.
    fn next_deadline(&self) -> Option<Duration> {
        let client = self
            .client_wait
            .as_ref()
            .filter(|_| self.running.is_some())
            .and_then(|w| w.deadline);
        let server = self
            .conn
            .as_ref()
            .and_then(|c| c.server_wait.as_ref())
            .and_then(|w| w.deadline);
        [client, server].into_iter().flatten().min()
    }

    fn apply(&mut self, net: Net) {
        self.note(|| format!("move {net:?}"));
        let wire = self.conn.as_mut().map(|c| &mut c.wire);
        match net {
            Net::UpWindow(n) => {
                self.net.up_window = n.max(1);
                if let Some(wire) = wire {
                    wire.up.window = n.max(1);
                }
            }
            Net::DownWindow(n) => {
                self.net.down_window = n.max(1);
                if let Some(wire) = wire {
                    wire.down.window = n.max(1);
                }
            }
            Net::UpReads(n) => {
                self.net.up_reads = n.max(1);
                if let Some(wire) = wire {
                    wire.up.most_read = n.max(1);
                }
            }
            Net::DownReads(n) => {
                self.net.down_reads = n.max(1);
                if let Some(wire) = wire {
                    wire.down.most_read = n.max(1);
                }
            }
            Net::Advance(d) => self.advancing = Some(self.now + d),
            Net::ToDeadline => self.advancing = self.next_deadline().filter(|&d| d > self.now),
            Net::Shutdown => {
                if let Some(conn) = self.conn.as_mut()
                    && let Some(server) = conn.server.as_mut()
                {
                    server.shut_down();
                    conn.shut_down = true;
                    conn.server_wait = None;
                }
            }
            Net::Reset => {
                if let Some(wire) = wire {
                    wire.reset = true;
                }
            }
            Net::Restart => {
                if let Some(conn) = self.conn.as_mut() {
                    conn.server = None;
                    conn.server_wait = None;
                    conn.wire.server_leaves();
                }
            }
        }
    }

    /// The peer's part once the ops are spent: the network opens up and
    /// time runs to the deadlines. `true` once nothing is left to do.
    fn finish_move(&mut self) -> Result<bool, String> {
        if self.finish_from.is_none() {
            self.finish_from = Some(self.now);
            self.note(|| "the schedule's ops are spent".into());
        }
        if self.running.is_none() && self.queue.is_empty() {
            return Ok(true);
        }
        let open = NetSettings {
            up_window: self.net.up_window.max(256 * 1024),
            down_window: self.net.down_window.max(256 * 1024),
            up_reads: self.net.up_reads.max(64 * 1024),
            down_reads: self.net.down_reads.max(64 * 1024),
        };
        if let Some(conn) = self.conn.as_mut() {
            let wire = &mut conn.wire;
            let opened = (
                wire.up.window,
                wire.down.window,
                wire.up.most_read,
                wire.down.most_read,
            ) != (open.up_window, open.down_window, open.up_reads, open.down_reads);
            if opened {
                (wire.up.window, wire.down.window) = (open.up_window, open.down_window);
                (wire.up.most_read, wire.down.most_read) = (open.up_reads, open.down_reads);
                self.net = open;
                self.note(|| "the network opens up".into());
                return Ok(false);
            }
        }
        self.net = open;
        match self.next_deadline() {
            Some(deadline) => {
                self.advancing = Some(deadline.max(self.now));
                Ok(false)
            }
            None => Err(format!(
                "invariant 2: a call that never ends: the client waits ({}) with no deadline, the server \
                 ({})",
                self.client_wait.map_or("not at all".into(), interest),
                self.conn
                    .as_ref()
                    .and_then(|c| c.server_wait)
                    .map_or("is gone or moves".into(), interest)
            )),
        }
    }

    fn run(&mut self, schedule: &ClientSchedule) -> Result<ClientOutcome, String> {
        let mut ops = schedule.ops.iter();
        loop {
            self.steps += 1;
            self.idle += 1;
            if self.steps > MAX_STEPS {
                return Err(format!("no end after {MAX_STEPS} rounds"));
            }
            if self.idle > SPIN {
                return Err(format!("spins: {SPIN} rounds in a row with nothing moving"));
            }
            if self.running.is_none()
                && let Some(planned) = self.queue.pop_front()
            {
                self.start(planned)?;
            }
            let before = self.marker();
            self.step_client()?;
            self.step_server()?;
            self.observe()?;
            if self.marker() != before {
                self.idle = 0;
            }
            let quiet = !self.woken() && (self.running.is_some() || self.queue.is_empty());
            let paced = matches!(self.pace, Pace::Every(n) if self.steps.is_multiple_of(n));
            if quiet && let Some(target) = self.advancing {
                match self.next_deadline().filter(|&d| d > self.now) {
                    Some(deadline) if deadline < target => self.set_time(deadline)?,
                    _ => {
                        self.advancing = None;
                        self.set_time(target)?;
                    }
                }
                continue;
            }
            if !quiet && !paced {
                continue;
            }
            match ops.next() {
                Some(Op::Call(kind)) => {
                    self.idle = 0;
                    self.queue.push_back(Planned {
                        kind: *kind,
                        index: self.calls,
                        attempt: 1,
                    });
                    self.calls += 1;
                }
                Some(Op::Net(net)) => {
                    self.idle = 0;
                    self.apply(*net);
                }
                None if quiet && self.finish_move()? => return self.end(),
                None => {}
            }
        }
    }

    /// The checks at the end: every connection gone, nothing left behind.
    fn end(&mut self) -> Result<ClientOutcome, String> {
        self.conn = None;
        let readers = self.shared.readers.load(Ordering::SeqCst);
        if readers > 0 {
            return Err(format!(
                "invariant 3: {readers} streamed readers outlived the connections"
            ));
        }
        let left = self.folder.entries();
        if !left.is_empty() {
            return Err(format!("invariant 3: the spool folder holds {left:?} at the end"));
        }
        self.outcome.ended_at = self.now;
        Ok(self.outcome.clone())
    }
}

/// Whether any byte of the answer to exchange `k` is among `received`,
/// framed as the server writes responses (one line each) and matched to
/// `exchanges` in order (D2); `None` where that cannot be told (a line
/// that is not a response, or one for another resource: the answer to a
/// full request the server read as a new exchange, D10).
fn heard(received: &[u8], exchanges: &[String], k: usize) -> Option<bool> {
    let limits = MessageLimits {
        max_message_bytes: usize::MAX,
        max_decoded_body: usize::MAX,
        ..MessageLimits::default()
    };
    let mut finals = 0;
    let mut continued = false;
    let mut at = 0;
    while let Some(nl) = memchr::memchr(b'\n', &received[at..]) {
        let line = &received[at..at + nl + 1];
        at += nl + 1;
        if line.trim_ascii().is_empty() {
            continue;
        }
        let response = parse_response(line, Validation::Strict, &limits).ok()?.message;
        if response.status.code == StatusCode::CONTINUE {
            continued |= finals == k;
            continue;
        }
        let expected = exchanges.get(finals)?;
        if !response.resource.is_empty() && response.resource != *expected {
            return None;
        }
        finals += 1;
    }
    let partial = !received[at..].trim_ascii().is_empty();
    Some(k < finals || (k == finals && (partial || continued)))
}

/// Runs `schedule`: the outcome, or the first invariant broken (with the
/// recent events).
pub fn run(schedule: &ClientSchedule) -> Result<ClientOutcome, String> {
    let mut sim = ClientSim::new(schedule);
    let outcome = sim.run(schedule);
    outcome.map_err(|why| sim.fail(why))
}

/// Runs `schedule` and panics with the broken invariant and the schedule.
pub fn check(schedule: &ClientSchedule) -> ClientOutcome {
    match run(schedule) {
        Ok(outcome) => outcome,
        Err(why) => panic!("{why}\n  schedule: {schedule:?}"),
    }
}

/// The fuzz target: arbitrary bytes as a schedule
/// ([`ClientSchedule::decode`]).
pub fn calling(data: &[u8]) {
    check(&ClientSchedule::decode(data));
}

// ---------------------------------------------------------------------
// Named schedules
// ---------------------------------------------------------------------

/// The named client schedules, also committed as
/// `fuzz/corpus/calling/regression-<name>`.
pub fn regressions() -> Vec<(&'static str, ClientSchedule)> {
    use CallKind::*;
    use Encoding::{Br, Gzip, Identity};
    use Net::*;
    let call = Op::Call;
    let net = Op::Net;
    vec![
        (
            "one_get",
            ClientSchedule::new(vec![call(Get { len: small_len(6) })]),
        ),
        (
            "pipeline_download_upload_put",
            ClientSchedule::new(vec![
                call(Pipeline {
                    count: 3,
                    len: small_len(10),
                }),
                call(Download {
                    len: streamed_len(80),
                    encoding: Gzip,
                }),
                call(Upload {
                    len: put_len(100),
                    encoding: Br,
                    expect_continue: true,
                }),
                call(Put {
                    len: put_len(20),
                    encoding: Identity,
                    expect_continue: false,
                }),
                call(Deny {
                    len: put_len(20),
                    expect_continue: true,
                }),
                call(Post { len: small_len(3) }),
                call(Delete),
            ]),
        ),
        (
            "short_reads_and_writes_both_ways",
            ClientSchedule::new(vec![
                net(UpWindow(chunk(2))),
                net(DownWindow(chunk(6))),
                net(UpReads(chunk(0))),
                net(DownReads(chunk(4))),
                call(Download {
                    len: streamed_len(20),
                    encoding: Identity,
                }),
                call(Upload {
                    len: put_len(30),
                    encoding: Gzip,
                    expect_continue: false,
                }),
            ]),
        ),
        (
            "idle_timeout_between_calls_then_a_get_goes_again",
            ClientSchedule::new(vec![
                call(Get { len: small_len(1) }),
                // Past the server's idle time (D3): it closes the connection.
                net(Advance(duration(155))),
                call(Get { len: small_len(2) }),
            ]),
        ),
        (
            "restart_between_calls_then_a_post_is_not_sent_again",
            ClientSchedule::new(vec![
                call(Get { len: small_len(1) }),
                net(Restart),
                call(Post { len: small_len(2) }),
                call(Get { len: small_len(3) }),
            ]),
        ),
        (
            "restart_in_the_middle_of_a_download",
            ClientSchedule::new(vec![
                net(DownWindow(chunk(8))),
                call(Download {
                    len: streamed_len(60),
                    encoding: Identity,
                }),
                net(DownReads(chunk(3))),
                net(Restart),
                call(Get { len: small_len(1) }),
            ])
            .paced(Pace::Every(1)),
        ),
        (
            // Each read takes a window of 128 bytes: the second ends the
            // first answer and begins the second, and the server goes
            // away right after it.
            "restart_when_a_read_ends_one_answer_and_begins_the_next",
            ClientSchedule::new(vec![
                net(DownWindow(chunk(127))),
                call(Pipeline {
                    count: 3,
                    len: small_len(0),
                }),
                net(UpReads(chunk(191))),
                net(UpReads(chunk(191))),
                net(Restart),
            ])
            .paced(Pace::Every(1)),
        ),
        (
            "reset_in_the_middle_of_an_upload",
            ClientSchedule::new(vec![
                net(UpWindow(chunk(3))),
                call(Upload {
                    len: put_len(200),
                    encoding: Identity,
                    expect_continue: false,
                }),
                net(Reset),
                call(Get { len: small_len(1) }),
            ])
            .paced(Pace::Every(4)),
        ),
        (
            "shutdown_during_a_pipeline",
            ClientSchedule::new(vec![
                net(DownWindow(chunk(2))),
                call(Pipeline {
                    count: 4,
                    len: small_len(40),
                }),
                net(Shutdown),
            ])
            .paced(Pace::Every(4)),
        ),
        (
            "a_silent_server_meets_the_read_timeout",
            ClientSchedule::new(vec![
                net(DownWindow(chunk(0))),
                call(Download {
                    len: streamed_len(100),
                    encoding: Gzip,
                }),
                // Past the client's silence limit.
                net(Advance(duration(201))),
            ]),
        ),
        (
            "blocking_client_without_clocks_against_a_stalled_server",
            ClientSchedule::new(vec![
                net(UpWindow(chunk(0))),
                net(DownWindow(chunk(0))),
                call(Put {
                    len: put_len(80),
                    encoding: Identity,
                    expect_continue: true,
                }),
                net(Advance(duration(217))),
            ])
            .blocking()
            .without_clocks(),
        ),
    ]
}

/// The named schedule `name`.
pub fn regression(name: &str) -> ClientSchedule {
    regressions()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no client schedule named {name}"))
        .1
}
