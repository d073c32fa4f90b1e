//! The transition table, every (role, state, input) in it: the allowed
//! moves are listed here by hand, and everything else must be refused with
//! the right reason. The diagram generated from the table is a snapshot,
//! which the table module's documentation includes.

use jsontp_protocol::machine::table::{
    ExchangeState as S, Input as I, Role, TransitionError, diagram, transition,
};

/// Every move the protocol allows (D10 for the handshake), by the role
/// that sends the input.
const ALLOWED: &[(Role, S, I, S)] = &[
    (Role::Client, S::Idle, I::Request, S::AwaitingResponse),
    (
        Role::Client,
        S::Idle,
        I::RequestExpectingContinue,
        S::AwaitingContinue,
    ),
    (Role::Server, S::AwaitingResponse, I::FinalResponse, S::Done),
    (
        Role::Server,
        S::AwaitingContinue,
        I::Continue,
        S::SendingFullRequest,
    ),
    // D10: a final 4xx/5xx instead of 100 ends the exchange.
    (Role::Server, S::AwaitingContinue, I::FinalResponse, S::Done),
    (
        Role::Client,
        S::AwaitingContinue,
        I::ContinueWaitExpired,
        S::ContinueWaitExpired,
    ),
    // D10: the full request; an `expect` in it is ignored.
    (
        Role::Client,
        S::SendingFullRequest,
        I::Request,
        S::AwaitingResponse,
    ),
    (
        Role::Client,
        S::SendingFullRequest,
        I::RequestExpectingContinue,
        S::AwaitingResponse,
    ),
    // D3: the server stops waiting for the full request; it owes its 408.
    (
        Role::Server,
        S::SendingFullRequest,
        I::FullRequestWaitExpired,
        S::AwaitingResponse,
    ),
    (
        Role::Client,
        S::ContinueWaitExpired,
        I::Request,
        S::AwaitingResponseUnacknowledged,
    ),
    (
        Role::Client,
        S::ContinueWaitExpired,
        I::RequestExpectingContinue,
        S::AwaitingResponseUnacknowledged,
    ),
    (
        Role::Server,
        S::ContinueWaitExpired,
        I::Continue,
        S::SendingFullRequest,
    ),
    (Role::Server, S::ContinueWaitExpired, I::FinalResponse, S::Done),
    (
        Role::Server,
        S::AwaitingResponseUnacknowledged,
        I::Continue,
        S::AwaitingResponse,
    ),
    (
        Role::Server,
        S::AwaitingResponseUnacknowledged,
        I::FinalResponse,
        S::Done,
    ),
    // D19: a streamed request: head, content, end; a full request too.
    (Role::Client, S::Idle, I::RequestHead, S::SendingRequestContent),
    (
        Role::Client,
        S::SendingFullRequest,
        I::RequestHead,
        S::SendingRequestContent,
    ),
    (
        Role::Client,
        S::ContinueWaitExpired,
        I::RequestHead,
        S::SendingRequestContentUnacknowledged,
    ),
    (
        Role::Client,
        S::SendingRequestContent,
        I::RequestContentEnd,
        S::AwaitingResponse,
    ),
    (
        Role::Client,
        S::SendingRequestContentUnacknowledged,
        I::RequestContentEnd,
        S::AwaitingResponseUnacknowledged,
    ),
    // A late 100 while the content of the full request goes out.
    (
        Role::Server,
        S::SendingRequestContentUnacknowledged,
        I::Continue,
        S::SendingRequestContent,
    ),
    // D3, D19: answered (413, 408) before the content ended.
    (Role::Server, S::SendingRequestContent, I::FinalResponse, S::Done),
    (
        Role::Server,
        S::SendingRequestContentUnacknowledged,
        I::FinalResponse,
        S::Done,
    ),
    // D19: a streamed response: head, content, end.
    (
        Role::Server,
        S::AwaitingResponse,
        I::ResponseHead,
        S::SendingResponseContent,
    ),
    (
        Role::Server,
        S::SendingResponseContent,
        I::ResponseContentEnd,
        S::Done,
    ),
];

const ROLES: [Role; 2] = [Role::Client, Role::Server];

#[test]
fn every_role_state_and_input() {
    let mut checked = 0;
    for role in ROLES {
        for state in S::ALL {
            for input in I::ALL {
                let got = transition(role, state, input);
                let allowed = ALLOWED
                    .iter()
                    .find(|(r, s, i, _)| (*r, *s, *i) == (role, state, input));
                let expected = match allowed {
                    Some(&(_, _, _, next)) => Ok(next),
                    // Requests are the client's, responses the server's,
                    // whatever the state.
                    None if input.sender() != role => Err(TransitionError::WrongRole { sender: role, input }),
                    None => Err(TransitionError::NotNow { state, input }),
                };
                assert_eq!(got, expected, "({role:?}, {state:?}, {input:?})");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 2 * S::ALL.len() * I::ALL.len());
    assert_eq!((S::ALL.len(), I::ALL.len()), (10, 10));
}

#[test]
fn the_senders_of_inputs() {
    assert_eq!(I::Request.sender(), Role::Client);
    assert_eq!(I::RequestExpectingContinue.sender(), Role::Client);
    assert_eq!(I::ContinueWaitExpired.sender(), Role::Client);
    assert_eq!(I::FullRequestWaitExpired.sender(), Role::Server);
    assert_eq!(I::Continue.sender(), Role::Server);
    assert_eq!(I::FinalResponse.sender(), Role::Server);
    assert_eq!(I::RequestHead.sender(), Role::Client);
    assert_eq!(I::RequestContentEnd.sender(), Role::Client);
    assert_eq!(I::ResponseHead.sender(), Role::Server);
    assert_eq!(I::ResponseContentEnd.sender(), Role::Server);
}

#[test]
fn done_and_idle_take_nothing_but_a_request() {
    for input in I::ALL {
        assert!(transition(input.sender(), S::Done, input).is_err(), "{input:?}");
    }
    // A response without a request is refused: the client reports it, the
    // server's application gets a usage error.
    assert!(transition(Role::Server, S::Idle, I::FinalResponse).is_err());
    assert!(transition(Role::Server, S::Idle, I::Continue).is_err());
    // No second handshake inside one exchange.
    assert!(transition(Role::Server, S::SendingFullRequest, I::Continue).is_err());
    assert!(transition(Role::Server, S::AwaitingResponse, I::Continue).is_err());
}

#[test]
fn the_diagram_lists_every_allowed_move() {
    // Every allowed move appears on its own line, by its input, sender and
    // next state; the diagram has no other moves.
    let text = diagram();
    let moves = text
        .lines()
        .filter(|line| line.contains("(client)") || line.contains("(server)"))
        .count();
    assert_eq!(moves, ALLOWED.len());
    for (role, _, input, next) in ALLOWED {
        let sender = if *role == Role::Client { "client" } else { "server" };
        let line = format!("{input:?} ({sender})");
        assert!(
            text.lines()
                .any(|l| l.contains(&line) && l.trim_end().ends_with(&format!("{next:?}"))),
            "{line} -> {next:?} missing"
        );
    }
}

#[test]
fn the_transition_diagram() {
    // The module documentation of `machine::table` includes this file.
    insta::with_settings!({ omit_expression => true }, {
        insta::assert_snapshot!("transition_diagram", diagram());
    });
}
