//! One server connection, whole stack (the real driver, machine, spool and
//! handler glue), on simulated bytes and time: named schedules, one per
//! defect known or fixed, and proptest schedules. The harness and its
//! invariants are in `fuzz/simulation.rs`, shared with the `serving` fuzz
//! target.

#[path = "../../fuzz/simulation.rs"]
mod harness;

use std::path::PathBuf;
use std::time::Duration;

use harness::{
    Finish, Item, LINGER, Move, Outcome, SHUTDOWN_TIMEOUT, STALL_TIMEOUT, Schedule, check, regression,
    regressions,
};
use jsontp_protocol::message::Encoding;
use proptest::prelude::*;

fn named(name: &str) -> Outcome {
    check(&regression(name))
}

// The harness itself: the simplest exchanges pass, and a broken
// expectation is caught.

#[test]
fn a_single_small_get_is_answered() {
    let outcome = named("single_small_get");
    assert_eq!(outcome.finals, [200]);
    assert!(outcome.shut_write, "closed gracefully");
}

#[test]
fn a_single_streamed_get_is_answered() {
    let outcome = named("single_streamed_get");
    assert_eq!(outcome.finals, [200]);
    assert!(outcome.written > 32 * 1024, "{} bytes", outcome.written);
}

#[test]
fn an_upload_arrives_spooled_and_whole() {
    let schedule = Schedule::new(
        vec![Item::Put {
            len: 1 + 40 * 256,
            encoding: Encoding::Gzip,
            expect_continue: false,
        }],
        vec![Move::Send(1000), Move::Send(1000), Move::SendAll],
        Finish::Cooperative,
    );
    let outcome = check(&schedule);
    assert_eq!(outcome.finals, [201]);
    assert_eq!((outcome.uploads, outcome.spooled), (1, 1));
}

#[test]
fn a_client_that_resets_mid_upload_leaves_the_spool_empty() {
    let schedule = Schedule::new(
        vec![Item::Put {
            len: 1 + 200 * 256,
            encoding: Encoding::Identity,
            expect_continue: false,
        }],
        vec![Move::Send(16 * 1024), Move::Reset],
        Finish::Silent,
    );
    let outcome = check(&schedule);
    assert!(outcome.finals.is_empty());
}

#[test]
fn schedules_survive_their_byte_form() {
    for (name, schedule) in regressions() {
        assert_eq!(Schedule::decode(&schedule.encode()), schedule, "{name}");
    }
}

/// Every named schedule is in the fuzz corpus, byte for byte. With
/// `JSONTP_WRITE_CORPUS=1` the test writes them instead.
#[test]
fn named_schedules_are_in_the_fuzz_corpus() {
    let named = regressions().into_iter().map(|(name, s)| (name, s.encode()));
    corpus_holds("serving", "schedule", named);
}

/// Checks that `fuzz/corpus/<target>/regression-<name>` holds each named
/// schedule's bytes; with `JSONTP_WRITE_CORPUS=1` writes them instead.
fn corpus_holds<'a>(target: &str, what: &str, named: impl Iterator<Item = (&'a str, Vec<u8>)>) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let write = std::env::var_os("JSONTP_WRITE_CORPUS").is_some();
    for (name, bytes) in named {
        let path = dir.join(format!("regression-{name}"));
        if write {
            std::fs::create_dir_all(&dir).expect("the corpus folder");
            std::fs::write(&path, &bytes).expect("a corpus file");
        }
        let stored = std::fs::read(&path).unwrap_or_default();
        assert_eq!(
            stored,
            bytes,
            "{} differs from the {what} {name} (JSONTP_WRITE_CORPUS=1 rewrites it)",
            path.display()
        );
    }
}

// One test per defect, named as the schedules are.

#[test]
fn two_pipelined_streamed_downloads_identity() {
    assert_eq!(
        named("two_pipelined_streamed_downloads_identity").finals,
        [200, 200]
    );
}

#[test]
fn two_pipelined_streamed_downloads_gzip() {
    assert_eq!(named("two_pipelined_streamed_downloads_gzip").finals, [200, 200]);
}

#[test]
fn two_pipelined_streamed_downloads_br() {
    assert_eq!(named("two_pipelined_streamed_downloads_br").finals, [200, 200]);
}

#[test]
fn prepared_get_read_slowly_then_a_small_get() {
    let outcome = named("prepared_get_read_slowly_then_a_small_get");
    assert_eq!(outcome.finals, [200, 200]);
    // The prepared text went from its sealed copy, in the window's pieces.
    #[cfg(target_os = "linux")]
    assert!(
        outcome.from_files > 40 * 1024,
        "{} bytes from files",
        outcome.from_files
    );
}

#[test]
fn big_small_big() {
    assert_eq!(named("big_small_big").finals, [200, 200, 200]);
}

#[test]
fn streamed_download_read_partly_then_a_second_large_get() {
    assert_eq!(
        named("streamed_download_read_partly_then_a_second_large_get").finals,
        [200, 200]
    );
}

#[test]
fn sixteen_pipelined_streamed_gets_peer_never_reads() {
    let outcome = named("sixteen_pipelined_streamed_gets_peer_never_reads");
    // The peer took nothing from the first write on: the stall limit (D3)
    // ends it.
    assert_eq!(outcome.peer_read, 0);
    assert!(
        outcome.closed_at <= STALL_TIMEOUT + LINGER,
        "closed at {:?}, the stall limit is {STALL_TIMEOUT:?}",
        outcome.closed_at
    );
}

#[test]
fn too_deep_then_mismatched_bracket() {
    assert_eq!(named("too_deep_then_mismatched_bracket").finals, [400]);
}

#[test]
fn too_deep_then_eof() {
    assert_eq!(named("too_deep_then_eof").finals, [400]);
}

#[test]
fn shutdown_during_a_slow_download() {
    let outcome = named("shutdown_during_a_slow_download");
    let at = outcome.shutdown_at.expect("shut down");
    assert!(outcome.closed_at <= at + SHUTDOWN_TIMEOUT + LINGER);
}

#[test]
fn shutdown_during_a_stalled_upload() {
    let outcome = named("shutdown_during_a_stalled_upload");
    let at = outcome.shutdown_at.expect("shut down");
    assert!(outcome.closed_at <= at + SHUTDOWN_TIMEOUT + LINGER);
    assert_eq!(outcome.uploads, 0, "the upload never ended");
}

#[test]
fn shutdown_while_idle() {
    let outcome = named("shutdown_while_idle");
    assert_eq!(outcome.finals, [200]);
    // Idle: closed at once, after the linger at most.
    let at = outcome.shutdown_at.expect("shut down");
    assert!(
        outcome.closed_at <= at + LINGER,
        "closed at {:?}",
        outcome.closed_at
    );
}

#[test]
fn upload_pipelined_behind_a_download() {
    let outcome = named("upload_pipelined_behind_a_download");
    assert_eq!(outcome.finals, [200, 201]);
    assert_eq!(outcome.spooled, 1);
}

#[test]
fn continue_put_behind_a_streamed_get() {
    let outcome = named("continue_put_behind_a_streamed_get");
    assert_eq!(outcome.finals, [200, 201]);
    assert_eq!(outcome.continues, 1);
}

// Random schedules: small items (the byte form's size argument below 32),
// any moves, either finish.

fn schedule() -> impl Strategy<Value = Schedule> {
    let item = (any::<u8>(), 0u8..32).prop_map(|(kind, arg)| [kind, arg]);
    let step = (any::<u8>(), any::<u8>()).prop_map(|(op, arg)| [op, arg]);
    (
        any::<u8>(),
        prop::collection::vec(item, 1..6),
        prop::collection::vec(step, 0..40),
    )
        .prop_map(|(setup, items, moves)| {
            let mut bytes = vec![setup, items.len() as u8];
            bytes.extend(items.iter().flatten());
            bytes.extend(moves.iter().flatten());
            Schedule::decode(&bytes)
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_schedules_keep_every_invariant(schedule in schedule()) {
        if let Err(why) = harness::run(&schedule) {
            return Err(TestCaseError::fail(why));
        }
    }
}

#[test]
fn a_silent_peer_is_closed_by_a_timer() {
    // Half a request, then nothing: the message timer (D3) ends it with
    // a 408.
    let schedule = Schedule::new(
        vec![Item::SmallGet { len: 17 }],
        vec![Move::Send(40)],
        Finish::Silent,
    );
    let outcome = check(&schedule);
    assert_eq!(outcome.finals, [408]);
    assert!(outcome.closed_at < Duration::from_secs(10));
}

// Client schedules: a real client driver against a real server driver on
// the same simulated network and clock (`fuzz/client_simulation.rs`).

mod clients {
    use super::harness::client::{ClientSchedule, READ_TIMEOUT, check, regression, regressions, run};
    use super::*;

    fn named(name: &str) -> harness::client::ClientOutcome {
        check(&regression(name))
    }

    #[test]
    fn client_schedules_survive_their_byte_form() {
        for (name, schedule) in regressions() {
            assert_eq!(ClientSchedule::decode(&schedule.encode()), schedule, "{name}");
        }
    }

    /// Every named client schedule is in the fuzz corpus, byte for byte.
    /// With `JSONTP_WRITE_CORPUS=1` the test writes them instead.
    #[test]
    fn named_client_schedules_are_in_the_fuzz_corpus() {
        let named = regressions().into_iter().map(|(name, s)| (name, s.encode()));
        super::corpus_holds("calling", "client schedule", named);
    }

    #[test]
    fn one_get() {
        let outcome = named("one_get");
        assert_eq!(outcome.statuses, [200]);
        assert!(outcome.errors.is_empty());
    }

    #[test]
    fn pipeline_download_upload_put() {
        let outcome = named("pipeline_download_upload_put");
        assert_eq!(outcome.statuses, [200, 200, 200, 200, 201, 201, 403, 200, 404]);
        assert_eq!(outcome.connections, 1, "one keep-alive connection");
    }

    #[test]
    fn short_reads_and_writes_both_ways() {
        assert_eq!(named("short_reads_and_writes_both_ways").statuses, [200, 201]);
    }

    #[test]
    fn idle_timeout_between_calls_then_a_get_goes_again() {
        // The server closed the idle connection (D3); the reused one fails
        // before any byte of the answer, and the GET goes again once (D13).
        let outcome = named("idle_timeout_between_calls_then_a_get_goes_again");
        assert_eq!(outcome.statuses, [200, 200]);
        assert_eq!(outcome.errors.len(), 1, "{:?}", outcome.errors);
        assert!(outcome.errors[0].contains("was not sent"), "{:?}", outcome.errors);
        assert_eq!(outcome.sent_again, 1);
        assert_eq!(outcome.connections, 2);
    }

    #[test]
    fn restart_between_calls_then_a_post_is_not_sent_again() {
        let outcome = named("restart_between_calls_then_a_post_is_not_sent_again");
        // The POST meets the dead connection and fails, saying why; the
        // GET after it has a new connection.
        assert_eq!(outcome.statuses, [200, 200]);
        assert_eq!(outcome.sent_again, 0);
        assert_eq!(outcome.errors.len(), 1, "{:?}", outcome.errors);
        assert!(
            outcome.errors[0].contains("closed the connection"),
            "{:?}",
            outcome.errors
        );
        assert_eq!(outcome.connections, 2);
    }

    #[test]
    fn restart_in_the_middle_of_a_download() {
        // Part of the answer had come: the download is not sent again
        // (D13), and the GET after it has a new connection.
        let outcome = named("restart_in_the_middle_of_a_download");
        assert_eq!(outcome.connections, 2);
        assert_eq!(outcome.statuses, [200]);
        assert_eq!(outcome.sent_again, 0);
        assert_eq!(
            outcome.errors,
            ["the server closed the connection in the middle of its answer"]
        );
    }

    #[test]
    fn reset_in_the_middle_of_an_upload() {
        // Cut while being sent, no byte of an answer: a PUT goes again,
        // once, on a new connection (D13).
        let outcome = named("reset_in_the_middle_of_an_upload");
        assert_eq!(
            outcome.errors,
            ["the server closed the connection before answering, while the request was being sent"]
        );
        assert_eq!((outcome.sent_again, outcome.connections), (1, 2));
        assert_eq!(outcome.statuses, [201, 200]);
    }

    #[test]
    fn restart_when_a_read_ends_one_answer_and_begins_the_next() {
        // The read that ended the first answer held the start of the
        // second: the second counts as begun, and is not sent again (D13).
        let outcome = named("restart_when_a_read_ends_one_answer_and_begins_the_next");
        assert_eq!(outcome.statuses, [200]);
        assert_eq!(outcome.sent_again, 0);
        assert_eq!(
            outcome.errors[0],
            "the server closed the connection in the middle of its answer"
        );
    }

    #[test]
    fn shutdown_during_a_pipeline() {
        // A graceful shutdown lets the exchanges under way finish.
        let outcome = named("shutdown_during_a_pipeline");
        assert_eq!(outcome.statuses, [200; 4]);
    }

    #[test]
    fn a_silent_server_meets_the_read_timeout() {
        let outcome = named("a_silent_server_meets_the_read_timeout");
        assert_eq!(outcome.statuses.len() + outcome.errors.len(), outcome.calls);
        assert!(outcome.ended_at >= READ_TIMEOUT, "{outcome:?}");
    }

    #[test]
    fn blocking_client_without_clocks_against_a_stalled_server() {
        let outcome = named("blocking_client_without_clocks_against_a_stalled_server");
        assert_eq!(outcome.statuses.len() + outcome.errors.len(), outcome.calls);
    }

    fn client_schedule() -> impl Strategy<Value = ClientSchedule> {
        let op = (any::<u8>(), any::<u8>()).prop_map(|(kind, arg)| [kind, arg]);
        (any::<u8>(), prop::collection::vec(op, 1..40)).prop_map(|(setup, ops)| {
            let mut bytes = vec![setup];
            bytes.extend(ops.iter().flatten());
            ClientSchedule::decode(&bytes)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 128,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn random_client_schedules_keep_every_invariant(schedule in client_schedule()) {
            if let Err(why) = run(&schedule) {
                return Err(TestCaseError::fail(why));
            }
        }
    }
}
