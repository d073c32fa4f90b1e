//! Configuration of a connection: limits and timeouts (D3), the
//! 100-continue policy (D10), validation mode (D13), and the caller's time.

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
pub enum ContinuePolicy {
    /// Acknowledge with `100` without asking the application.
    #[default]
    AutoAccept,
    /// Surface the preliminary request as [`Event::ContinueRequested`]
    /// and let the application accept or reject it.
    ///
    /// [`Event::ContinueRequested`]: super::Event::ContinueRequested
    Ask,
    /// Answer `501` and close (a server "configured without 100-continue").
    Refuse,
}

/// Limits and timeouts (D3). Every one configurable; defaults as D3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Limits on one message.
    pub message: MessageLimits,
    /// From a message's first byte to its last (`408` and close).
    pub message_timeout: Duration,
    /// Idle time between messages (close, no response).
    pub idle_timeout: Duration,
    /// Wait for the full request after `100` (`408` and close).
    pub continue_timeout: Duration,
    /// Responses owed but not yet taken by the peer before the server stops
    /// reading.
    pub max_pipelined: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            message: MessageLimits::default(),
            message_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            continue_timeout: Duration::from_secs(300),
            max_pipelined: 16,
        }
    }
}

/// The configuration of one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Limits and timeouts (D3).
    pub limits: Limits,
    /// Server: what to do with `expect: 100-continue` (D10).
    pub continue_policy: ContinuePolicy,
    /// Server: the `language` of responses the machine writes itself (errors,
    /// `100`), and of application responses that leave it out.
    pub language: LanguageTag,
    /// Client: strict or lenient response validation (D13).
    pub validation: Validation,
    /// Client: how long to wait for `100` before sending the full request
    /// anyway.
    pub continue_wait: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            limits: Limits::default(),
            continue_policy: ContinuePolicy::default(),
            language: LanguageTag::EN_US,
            validation: Validation::default(),
            continue_wait: Duration::from_secs(1),
        }
    }
}
