//! The tests of the pools' shared parts: URLs, retries, deadlines and the
//! bookkeeping.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::io_adapters::client::{ClientError, ClientOptions, Timeout};
use crate::message::Method;

#[test]
fn urls_split_into_an_origin_and_a_resource() {
    let split = |url: &str| {
        split_url(url)
            .map(|(o, r)| (o.to_string(), r.to_string()))
            .map_err(|e| e.to_string())
    };
    let pair = |o: &str, r: &str| Ok((o.to_owned(), r.to_owned()));
    assert_eq!(
        split("jsontp://Example.com:9000/a?x=1#f"),
        pair("jsontp://example.com:9000", "/a?x=1#f")
    );
    assert_eq!(split("JSONTPS://h/x"), pair("jsontps://h:8443", "/x"));
    assert_eq!(split("localhost:1"), pair("jsontp://localhost:1", "/"));
    assert_eq!(split("jsontp://[::1]/x"), pair("jsontp://[::1]:8080", "/x"));
    assert_eq!(split("[::1]:9/?q"), pair("jsontp://[::1]:9", "/?q"));
    for (url, why) in [
        ("http://h/x", "is not a jsontp:// or jsontps:// URL"),
        ("jsontp://:80/", "names no host"),
        ("jsontp://h:0/", "has a port that is not a number from 1 to 65535"),
        ("jsontp://[::1/", "has an unclosed ["),
    ] {
        let error = split_url(url).expect_err(url);
        assert_eq!(error.to_string(), format!("the URL {url:?} {why}"));
    }
    assert!(Origin::parse("jsontp://h:1/path").is_err());
    assert_eq!(
        Origin::from("127.0.0.1:7".parse::<std::net::SocketAddr>().unwrap()),
        Origin::parse("127.0.0.1:7").unwrap()
    );
}

#[test]
fn only_a_reused_idempotent_exchange_that_heard_nothing_is_retried() {
    use super::super::{Progress, Sent};
    let closed = |request, answer_began| ClientError::ClosedEarly {
        progress: Progress {
            request,
            answer_began,
        },
    };
    for method in [Method::Get, Method::Options, Method::Put, Method::Delete] {
        assert!(may_retry(&closed(Sent::Whole, false), method, true), "{method}");
        assert!(may_retry(&closed(Sent::Part, false), method, true), "{method}");
        assert!(!may_retry(&closed(Sent::Whole, true), method, true), "{method}");
        assert!(!may_retry(&closed(Sent::Whole, false), method, false), "{method}");
        assert!(!may_retry(&ClientError::TimedOut(Timeout::Read), method, true));
    }
    assert!(!may_retry(&closed(Sent::Whole, false), Method::Post, true));
    assert!(!may_retry(&closed(Sent::Nothing, false), Method::Post, true));
}

#[test]
fn a_step_under_the_deadline_takes_the_earlier_limit_and_the_blame() {
    let t0 = Instant::now();
    let second = Duration::from_secs(1);
    let deadline = Deadline::after(t0, Some(second * 5));
    let own = deadline.bound(t0, Some(second)).expect("time left");
    assert_eq!(own.limit, Some(second));
    assert!(matches!(
        own.blame(ClientError::TimedOut(Timeout::Connect)),
        ClientError::TimedOut(Timeout::Connect)
    ));
    let late = deadline
        .bound(t0 + second * 4, Some(second * 10))
        .expect("time left");
    assert_eq!(late.limit, Some(second));
    assert!(matches!(
        late.blame(ClientError::TimedOut(Timeout::Exchange)),
        ClientError::TimedOut(Timeout::Call)
    ));
    assert!(matches!(
        late.blame(ClientError::TimedOut(Timeout::Read)),
        ClientError::TimedOut(Timeout::Read)
    ));
    assert!(matches!(
        deadline.left(t0 + second * 5),
        Err(ClientError::TimedOut(Timeout::Call))
    ));
    assert_eq!(
        Deadline::after(t0, None)
            .bound(t0, None)
            .expect("no deadline")
            .limit,
        None
    );
}

struct Fake {
    closed: bool,
}

impl Pooled for Fake {
    fn is_closed(&self) -> bool {
        self.closed
    }
    fn server_spoke(&self) -> bool {
        false
    }
}

#[test]
fn the_bookkeeping_keeps_the_limit_and_the_idle_time() {
    use std::sync::{Condvar, Mutex as StdMutex};
    let time = Arc::new(StdMutex::new(crate::io_adapters::now()));
    let held = Arc::clone(&time);
    let clock = crate::io_adapters::Clock::from_fn(move || *held.lock().unwrap());
    let options = PoolOptions::default()
        .with_client(ClientOptions::default().with_clock(clock))
        .with_max_connections_per_host(2)
        .with_idle_timeout(Some(Duration::from_secs(10)));
    let shared: Arc<Shared<Fake, Condvar>> = Arc::new(Shared::new(options));
    let origin = Origin::parse("h:1").unwrap();
    assert!(matches!(shared.checkout(&origin), Checkout::Connect));
    assert!(matches!(shared.checkout(&origin), Checkout::Connect));
    let Checkout::Full(seen) = shared.checkout(&origin) else {
        panic!("two at most")
    };
    assert!(
        !shared.check_in(&origin, Fake { closed: false }),
        "no reaper on a clock of the caller's"
    );
    assert!(shared.hosts().changes > seen, "a waiting call sees the change");
    assert!(
        !shared.check_in(&origin, Fake { closed: true }),
        "a closed one is not kept"
    );
    assert_eq!((shared.idle_count(&origin), shared.open_count(&origin)), (1, 1));
    assert!(matches!(shared.checkout(&origin), Checkout::Reuse(_)));
    // A lease dropped mid-exchange frees its place.
    drop(Lease::new(
        Arc::clone(&shared),
        origin.clone(),
        Some(Fake { closed: false }),
    ));
    assert_eq!(shared.open_count(&origin), 0);

    assert!(matches!(shared.checkout(&origin), Checkout::Connect));
    shared.check_in(&origin, Fake { closed: false });
    assert_eq!(
        shared.reap().map(|at| at - time.lock().unwrap().instant),
        Some(Duration::from_secs(10))
    );
    time.lock().unwrap().instant += Duration::from_secs(10);
    assert_eq!(shared.reap(), None, "closed at its idle limit; the reaper stops");
    assert_eq!(shared.open_count(&origin), 0);
    assert_eq!(shared.hosts().reaper, Reaper::Stopped);
}
