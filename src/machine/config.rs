//! Configuration of a connection, one type per role: limits and timeouts
//! (D3), the server's 100-continue policy (D10) and language, the client's
//! validation mode (D13) and wait for `100`; and the caller's time.

use std::time::{Duration, Instant};

use crate::message::{Date, LanguageTag, MessageLimits, Validation};

/// The current time, handed in by the caller: the machine reads no clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// A monotonic instant, for timers.
    pub instant: Instant,
    /// The wall-clock time, written as the `date` header (D16).
    pub wall: Date,
}

/// What a server does with `expect: 100-continue` (D10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ContinuePolicy {
    /// Acknowledge with `100` without asking the application. With
    /// [`ServerConfig::stream_content`], the full request's head then
    /// comes before its content, as any streamed request's
    /// ([`ServerEvent::ContentHead`]): the application's first look at the
    /// exchange.
    ///
    /// [`ServerEvent::ContentHead`]: super::ServerEvent::ContentHead
    #[default]
    AutoAccept,
    /// Surface the preliminary request as
    /// [`ServerEvent::ContinueRequested`] and let the application accept or
    /// reject it.
    ///
    /// [`ServerEvent::ContinueRequested`]: super::ServerEvent::ContinueRequested
    Ask,
    /// Answer `501` and close (a server "configured without 100-continue").
    Refuse,
}

/// Limits and timeouts (D3) both roles apply to what they read. Every one
/// configurable; defaults as D3. What only a server bounds is in
/// [`ServerConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Limits on one message.
    pub message: MessageLimits,
    /// From a message's first byte to its last (`408` and close).
    pub message_timeout: Duration,
    /// How long the peer may leave our output untaken (not one byte of it
    /// read) before the connection closes: nothing more is written and the
    /// pending output is dropped.
    pub stall_timeout: Duration,
    /// Streamed content (D19): the most decoded bytes one message's
    /// `body.content` may carry (`413` past it, and close; decoding stops
    /// there). Its text on the wire may be at most six times as long (a
    /// `\u00XX` escape per byte), as long as nothing else bounds it.
    pub max_content_bytes: usize,
    /// Streamed content (D19): the longest gap without a byte of decoded
    /// content (`408` and close); also the grace at the start of a
    /// streamed message, and the most time a burst of content pays for
    /// ahead. It replaces `message_timeout` once a message's content
    /// streams.
    pub content_gap_timeout: Duration,
    /// Streamed content (D19): the least average rate, in decoded bytes per
    /// second, that a streamed message's content must keep after its first
    /// `content_gap_timeout`, counted from its start and over every later
    /// stretch, falling behind by at most `content_gap_timeout`'s worth
    /// (`408` and close). Decoded bytes: what the content decoder gives,
    /// so that wire bytes decoding to nothing do not count.
    pub min_content_rate: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            message: MessageLimits::default(),
            message_timeout: Duration::from_secs(30),
            stall_timeout: Duration::from_secs(30),
            max_content_bytes: 1 << 30,
            content_gap_timeout: Duration::from_secs(30),
            min_content_rate: 16 * 1024,
        }
    }
}

/// The configuration of a [`ServerConnection`](super::ServerConnection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Limits and timeouts (D3) on the requests read.
    pub limits: Limits,
    /// Idle time between messages (D3: close, no response).
    pub idle_timeout: Duration,
    /// How long to wait for the full request after `100` (D3, D10: `408`
    /// and close).
    pub continue_timeout: Duration,
    /// Responses owed but not yet taken by the peer before the server
    /// stops reading and handling requests (D3).
    pub max_pipelined: usize,
    /// Bytes of output queued beyond the response being written before
    /// the server stops reading and handling requests, until the peer
    /// catches up (D3).
    pub max_output_owed: usize,
    /// What to do with `expect: 100-continue` (D10).
    pub continue_policy: ContinuePolicy,
    /// The `language` of responses the machine writes itself (errors,
    /// `100`), and of application responses that leave it out.
    pub language: LanguageTag,
    /// Hand out the `body.content` of requests in pieces as it arrives
    /// ([`ServerEvent::Content`](super::ServerEvent::Content)), after
    /// the request's head
    /// ([`ServerEvent::ContentHead`](super::ServerEvent::ContentHead)),
    /// instead of holding each request whole (D19). Content written before
    /// the rest of its head is held within the message limit, and handed
    /// out once the message has ended. Off by default.
    pub stream_content: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            limits: Limits::default(),
            idle_timeout: Duration::from_secs(60),
            continue_timeout: Duration::from_secs(300),
            max_pipelined: 16,
            max_output_owed: 1 << 20,
            continue_policy: ContinuePolicy::default(),
            language: LanguageTag::EN_US,
            stream_content: false,
        }
    }
}

/// The configuration of a [`ClientConnection`](super::ClientConnection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// Limits and timeouts (D3) on the responses read; the size of one
    /// response on the wire defaults to
    /// [`MAX_RESPONSE_BYTES`](Self::MAX_RESPONSE_BYTES).
    pub limits: Limits,
    /// Strict or lenient response validation (D13).
    pub validation: Validation,
    /// How long to wait for `100` before sending the full request anyway
    /// (D10).
    pub continue_wait: Duration,
    /// Hand out the `body.content` of responses in pieces as it arrives
    /// ([`ClientEvent::Content`](super::ClientEvent::Content)) instead of
    /// holding each response whole (D19). Off by default.
    pub stream_content: bool,
}

impl ClientConfig {
    /// The default limit on the size of one response on the wire: 32 MiB.
    ///
    /// D3's 1 MiB is what a server takes from a client it does not know; a
    /// client downloads from the server it chose, whose responses carry
    /// whole resources. The decoded content keeps D3's 8 MiB limit, and its
    /// wire form can be larger (base64 adds a third, JSON escapes more),
    /// hence four times that.
    pub const MAX_RESPONSE_BYTES: usize = 32 << 20;
}

impl Default for ClientConfig {
    fn default() -> Self {
        let mut limits = Limits::default();
        limits.message.max_message_bytes = ClientConfig::MAX_RESPONSE_BYTES;
        ClientConfig {
            limits,
            validation: Validation::default(),
            continue_wait: Duration::from_secs(1),
            stream_content: false,
        }
    }
}
