//! The transition table shared by both roles (in the manner of h11).
//!
//! Every exchange (one request and its final response, with the 100-continue
//! handshake of D10 in between when asked for) moves through the states of
//! [`ExchangeState`]. What moves it is an [`Input`]: a message sent by one
//! side, or the client's wait for `100` running out. The table is
//! role-blind: it is keyed by the role of the side that *sends* the input,
//! so a server checks the client's requests and its own responses with the
//! same function a client uses to check its own requests and the server's
//! responses. An input that the table refuses is the sender's fault: a
//! [`UsageError`](super::UsageError) when it is ours, a
//! [`PeerError`](super::PeerError) when it is the peer's.
//!
//! ```text
//!                    Request                         FinalResponse
//!   Idle ─────────────────────────► AwaitingResponse ─────────────► Done
//!    │                                    ▲
//!    │ RequestExpectingContinue           │ Request (the full request; its
//!    ▼                                    │ `expect` is ignored, D10)
//!   AwaitingContinue ── Continue ──► SendingFullRequest
//!    │   │
//!    │   └── FinalResponse (handshake rejected, 4xx/5xx) ─────────► Done
//!    │
//!    └── ContinueWaitExpired (client only) ─► ContinueWaitExpired
//!          ── Request ─► AwaitingResponseUnacknowledged
//!               ── Continue (late) ─► AwaitingResponse
//!               ── FinalResponse ───► Done
//! ```

use std::fmt;

/// Which side of the connection this machine plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Sends requests, receives responses.
    Client,
    /// Receives requests, sends responses.
    Server,
}

/// Where one exchange stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExchangeState {
    /// Nothing sent yet.
    Idle,
    /// A complete request was sent; its final response is owed.
    AwaitingResponse,
    /// The first request of a handshake was sent (D10); a `100` or a final
    /// response is owed.
    AwaitingContinue,
    /// The `100` was sent; the client owes the full request.
    SendingFullRequest,
    /// Client only: the wait for `100` ran out; the full request goes out
    /// anyway.
    ContinueWaitExpired,
    /// Client only: the full request went out without a `100`. A late `100`
    /// is taken; a final response ends the exchange, and the server will
    /// read the full request as a new exchange.
    AwaitingResponseUnacknowledged,
    /// The final response was sent.
    Done,
}

impl ExchangeState {
    /// Every state, for tables and tests.
    pub const ALL: [ExchangeState; 7] = [
        ExchangeState::Idle,
        ExchangeState::AwaitingResponse,
        ExchangeState::AwaitingContinue,
        ExchangeState::SendingFullRequest,
        ExchangeState::ContinueWaitExpired,
        ExchangeState::AwaitingResponseUnacknowledged,
        ExchangeState::Done,
    ];
}

/// What can move an exchange on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Input {
    /// A request without `expect: 100-continue` (or any full request after
    /// a `100`).
    Request,
    /// A request with `expect: 100-continue`.
    RequestExpectingContinue,
    /// The `100` acknowledgement (D10).
    Continue,
    /// A final response (any code but `1xx`).
    FinalResponse,
    /// The client's wait for `100` ran out.
    ContinueWaitExpired,
}

impl Input {
    /// Every input, for tables and tests.
    pub const ALL: [Input; 5] = [
        Input::Request,
        Input::RequestExpectingContinue,
        Input::Continue,
        Input::FinalResponse,
        Input::ContinueWaitExpired,
    ];

    /// The only role that may send this input.
    pub fn sender(self) -> Role {
        match self {
            Input::Request | Input::RequestExpectingContinue | Input::ContinueWaitExpired => Role::Client,
            Input::Continue | Input::FinalResponse => Role::Server,
        }
    }
}

/// An input the table refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransitionError {
    /// Only the other role sends this input.
    WrongRole {
        /// Who tried.
        sender: Role,
        /// What.
        input: Input,
    },
    /// The input does not fit the exchange's state.
    NotNow {
        /// Where the exchange stood.
        state: ExchangeState,
        /// What came.
        input: Input,
    },
}

impl fmt::Display for TransitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransitionError::WrongRole { sender, input } => {
                write!(f, "a {sender:?} does not send {input:?}")
            }
            TransitionError::NotNow { state, input } => {
                write!(f, "{input:?} does not fit an exchange in state {state:?}")
            }
        }
    }
}

impl std::error::Error for TransitionError {}

/// The table: where `input`, sent by `sender`, takes an exchange in `state`.
pub fn transition(
    sender: Role,
    state: ExchangeState,
    input: Input,
) -> Result<ExchangeState, TransitionError> {
    use ExchangeState as S;
    use Input as I;
    if input.sender() != sender {
        return Err(TransitionError::WrongRole { sender, input });
    }
    let next = match (state, input) {
        (S::Idle, I::Request) => S::AwaitingResponse,
        (S::Idle, I::RequestExpectingContinue) => S::AwaitingContinue,
        (S::AwaitingContinue, I::Continue) => S::SendingFullRequest,
        (S::AwaitingContinue, I::FinalResponse) => S::Done,
        (S::AwaitingContinue, I::ContinueWaitExpired) => S::ContinueWaitExpired,
        // The full request: its `expect` is ignored (D10).
        (S::SendingFullRequest, I::Request | I::RequestExpectingContinue) => S::AwaitingResponse,
        (S::ContinueWaitExpired, I::Request | I::RequestExpectingContinue) => {
            S::AwaitingResponseUnacknowledged
        }
        (S::ContinueWaitExpired, I::Continue) => S::SendingFullRequest,
        (S::ContinueWaitExpired, I::FinalResponse) => S::Done,
        (S::AwaitingResponseUnacknowledged, I::Continue) => S::AwaitingResponse,
        (S::AwaitingResponseUnacknowledged, I::FinalResponse) => S::Done,
        (S::AwaitingResponse, I::FinalResponse) => S::Done,
        _ => return Err(TransitionError::NotNow { state, input }),
    };
    Ok(next)
}

/// One exchange's state, moved only through [`transition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exchange {
    state: ExchangeState,
}

impl Exchange {
    pub(crate) fn new() -> Exchange {
        Exchange {
            state: ExchangeState::Idle,
        }
    }

    pub(crate) fn state(self) -> ExchangeState {
        self.state
    }

    /// Applies `input` sent by `sender`; the state is unchanged on error.
    pub(crate) fn apply(&mut self, sender: Role, input: Input) -> Result<ExchangeState, TransitionError> {
        self.state = transition(sender, self.state, input)?;
        Ok(self.state)
    }
}
