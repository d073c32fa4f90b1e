//! The pooled clients (blocking and tokio) against real servers: reuse
//! across threads and tasks, the per-host limit, the idle timeout, a
//! deadline per call, D13's one retry when a server restarts behind a
//! front, TLS, and typed bodies through a `Router`. Loopback only; every
//! wait is bounded.

use jsontp_protocol::io_adapters::server::{Handled, Incoming};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jsontp_protocol::app::{Keys, Router, post};
use jsontp_protocol::io_adapters::client::blocking::Pool;
use jsontp_protocol::io_adapters::client::{
    Answer, ClientError, Origin, PoolOptions, Progress, Sent, Timeout,
};
use jsontp_protocol::io_adapters::server::{Handler, RequestInfo, ServerOptions};
use jsontp_protocol::message::{Method, Request, Response};
use serde::{Deserialize, Serialize};

use crate::support::{Echo, LIMIT, Runtime, api_request, get, quick, start};

/// [`Echo`], counting the connections its requests came on (by the peer's
/// address) and the most requests it handled at once; `/sleep/N` answers
/// after N ms.
#[derive(Clone, Default)]
struct Counted(Arc<Counts>);

#[derive(Default)]
struct Counts {
    peers: Mutex<HashSet<SocketAddr>>,
    requests: AtomicUsize,
    busy: AtomicUsize,
    most_busy: AtomicUsize,
}

impl Counted {
    fn handle(&self, request: &Request, info: &RequestInfo) -> Response {
        let counts = &self.0;
        counts.peers.lock().expect("peers").insert(info.peer);
        counts.requests.fetch_add(1, Ordering::SeqCst);
        let busy = counts.busy.fetch_add(1, Ordering::SeqCst) + 1;
        counts.most_busy.fetch_max(busy, Ordering::SeqCst);
        let path = request.resource.path();
        if let Some(ms) = path.strip_prefix("/sleep/").and_then(|n| n.parse().ok()) {
            std::thread::sleep(Duration::from_millis(ms));
        }
        let response = Echo.handle(request, info);
        counts.busy.fetch_sub(1, Ordering::SeqCst);
        response
    }
}

impl Handler for Counted {
    fn respond(&self, incoming: Incoming) -> Handled {
        let info = incoming.info;
        match incoming.into_request() {
            Ok(request) => self.handle(&request, &info).into(),
            Err(refused) => refused.into(),
        }
    }
}

impl Counted {
    /// The connections that carried a request.
    fn connections(&self) -> usize {
        self.0.peers.lock().expect("peers").len()
    }

    fn requests(&self) -> usize {
        self.0.requests.load(Ordering::SeqCst)
    }

    fn most_busy(&self) -> usize {
        self.0.most_busy.load(Ordering::SeqCst)
    }
}

/// Waits until `done` holds, for at most [`LIMIT`].
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < LIMIT, "waited too long for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A TCP front, as a load balancer keeps one: each connection it accepts
/// is joined to a new connection to the current backend. When the backend
/// closes its side (a restart), the front keeps the client's connection
/// open, as if nothing happened, until the client sends again; then it
/// closes it without a word. That is the stale connection D13's retry is
/// for: the pool cannot see it is dead before using it.
struct Front {
    addr: SocketAddr,
    state: Arc<FrontState>,
}

#[derive(Default)]
struct FrontState {
    backend: Mutex<Option<SocketAddr>>,
    accepted: AtomicUsize,
    backends_closed: AtomicUsize,
    /// Client bytes that came after their backend had gone: closed on.
    dropped: AtomicUsize,
    /// Client connections the client ended.
    clients_closed: AtomicUsize,
    /// Every socket, both sides, to close when the front goes.
    sockets: Mutex<Vec<TcpStream>>,
    /// The clients' sides.
    clients: Mutex<Vec<TcpStream>>,
    stopping: AtomicBool,
}

impl Front {
    fn start(backend: SocketAddr) -> Front {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(FrontState::default());
        *state.backend.lock().expect("backend") = Some(backend);
        let accepting = Arc::clone(&state);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if accepting.stopping.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                accepting.accepted.fetch_add(1, Ordering::SeqCst);
                let backend = accepting.backend.lock().expect("backend").expect("a backend");
                let Ok(backend) = TcpStream::connect(backend) else {
                    continue;
                };
                join(&accepting, client, backend);
            }
        });
        Front { addr, state }
    }

    /// New connections go to `backend` from now on.
    fn set_backend(&self, backend: SocketAddr) {
        *self.state.backend.lock().expect("backend") = Some(backend);
    }

    fn accepted(&self) -> usize {
        self.state.accepted.load(Ordering::SeqCst)
    }

    fn dropped(&self) -> usize {
        self.state.dropped.load(Ordering::SeqCst)
    }

    fn clients_closed(&self) -> usize {
        self.state.clients_closed.load(Ordering::SeqCst)
    }

    /// Waits until `n` backend connections have closed in all.
    fn wait_backends_closed(&self, n: usize) {
        wait_until("the backend to close its connections", || {
            self.state.backends_closed.load(Ordering::SeqCst) >= n
        });
    }

    /// Closes every client connection now, as a server does with its idle
    /// ones.
    fn close_clients(&self) {
        for socket in self.state.clients.lock().expect("clients").iter() {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        self.state.stopping.store(true, Ordering::SeqCst);
        for socket in self.state.sockets.lock().expect("sockets").iter() {
            let _ = socket.shutdown(Shutdown::Both);
        }
        // Wakes the accepting thread, which then ends.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Pumps bytes both ways between `client` and `backend`, as [`Front`]
/// says.
fn join(state: &Arc<FrontState>, client: TcpStream, backend: TcpStream) {
    let gone = Arc::new(AtomicBool::new(false));
    let clones = (
        client.try_clone().expect("clone"),
        backend.try_clone().expect("clone"),
    );
    state.sockets.lock().expect("sockets").extend([
        client.try_clone().expect("clone"),
        backend.try_clone().expect("clone"),
    ]);
    state
        .clients
        .lock()
        .expect("clients")
        .push(client.try_clone().expect("clone"));
    let (up_state, up_gone) = (Arc::clone(state), Arc::clone(&gone));
    let (mut from_client, mut to_backend) = (client, backend);
    std::thread::spawn(move || {
        let mut buffer = [0u8; 16 * 1024];
        loop {
            let n = match from_client.read(&mut buffer) {
                Ok(0) | Err(_) => {
                    up_state.clients_closed.fetch_add(1, Ordering::SeqCst);
                    let _ = to_backend.shutdown(Shutdown::Write);
                    return;
                }
                Ok(n) => n,
            };
            if up_gone.load(Ordering::SeqCst) || to_backend.write_all(&buffer[..n]).is_err() {
                up_state.dropped.fetch_add(1, Ordering::SeqCst);
                let _ = from_client.shutdown(Shutdown::Both);
                return;
            }
        }
    });
    let down_state = Arc::clone(state);
    let (mut to_client, mut from_backend) = clones;
    std::thread::spawn(move || {
        let mut buffer = [0u8; 16 * 1024];
        loop {
            match from_backend.read(&mut buffer) {
                Ok(0) | Err(_) => {
                    // The client is not told: its next bytes are.
                    gone.store(true, Ordering::SeqCst);
                    down_state.backends_closed.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                Ok(n) => {
                    if to_client.write_all(&buffer[..n]).is_err() {
                        return;
                    }
                }
            }
        }
    });
}

/// A pool kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PoolKind {
    Blocking,
    #[cfg(feature = "tokio")]
    Tokio,
}

const POOLS: &[PoolKind] = &[
    PoolKind::Blocking,
    #[cfg(feature = "tokio")]
    PoolKind::Tokio,
];

/// Either pool behind one blocking face; the async one on a runtime of
/// its own, whose workers keep running between calls (its idle reaper
/// among them).
enum AnyPool {
    Blocking(Pool),
    #[cfg(feature = "tokio")]
    Tokio(
        tokio::runtime::Runtime,
        jsontp_protocol::io_adapters::client::tokio::Pool,
    ),
}

impl AnyPool {
    fn new(kind: PoolKind, options: PoolOptions) -> AnyPool {
        match kind {
            PoolKind::Blocking => AnyPool::Blocking(Pool::new(options)),
            #[cfg(feature = "tokio")]
            PoolKind::Tokio => AnyPool::Tokio(
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("runtime"),
                jsontp_protocol::io_adapters::client::tokio::Pool::new(options),
            ),
        }
    }

    fn send(&self, origin: &Origin, request: Request) -> Result<Answer, ClientError> {
        match self {
            AnyPool::Blocking(pool) => pool.send(origin, request),
            #[cfg(feature = "tokio")]
            AnyPool::Tokio(runtime, pool) => runtime.block_on(bounded(pool.send(origin, request))),
        }
    }

    /// A `GET` of `url` with a deadline of its own.
    fn get_within(&self, url: &str, limit: Duration) -> Result<Answer, ClientError> {
        match self {
            AnyPool::Blocking(pool) => pool.get(url).timeout(limit).send(),
            #[cfg(feature = "tokio")]
            AnyPool::Tokio(runtime, pool) => runtime.block_on(bounded(pool.get(url).timeout(limit).send())),
        }
    }

    /// `callers` threads (or tasks) at once, each sending `each` requests
    /// one after the other; every outcome.
    fn by_many(
        &self,
        origin: &Origin,
        callers: usize,
        each: usize,
        request: fn() -> Request,
    ) -> Vec<Result<Answer, ClientError>> {
        match self {
            AnyPool::Blocking(pool) => std::thread::scope(|threads| {
                let callers: Vec<_> = (0..callers)
                    .map(|_| {
                        threads.spawn(|| {
                            (0..each)
                                .map(|_| pool.send(origin, request()))
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                callers
                    .into_iter()
                    .flat_map(|caller| caller.join().expect("caller"))
                    .collect()
            }),
            #[cfg(feature = "tokio")]
            AnyPool::Tokio(runtime, pool) => runtime.block_on(async {
                let tasks: Vec<_> = (0..callers)
                    .map(|_| {
                        let (pool, origin) = (pool.clone(), origin.clone());
                        tokio::spawn(async move {
                            let mut outcomes = Vec::new();
                            for _ in 0..each {
                                outcomes.push(pool.send(&origin, request()).await);
                            }
                            outcomes
                        })
                    })
                    .collect();
                let mut outcomes = Vec::new();
                for task in tasks {
                    outcomes.extend(bounded(task).await.expect("task"));
                }
                outcomes
            }),
        }
    }

    fn idle(&self, origin: &Origin) -> usize {
        match self {
            AnyPool::Blocking(pool) => pool.idle_connections(origin),
            #[cfg(feature = "tokio")]
            AnyPool::Tokio(_, pool) => pool.idle_connections(origin),
        }
    }

    fn open(&self, origin: &Origin) -> usize {
        match self {
            AnyPool::Blocking(pool) => pool.open_connections(origin),
            #[cfg(feature = "tokio")]
            AnyPool::Tokio(_, pool) => pool.open_connections(origin),
        }
    }
}

/// `future`, failing the test if it takes longer than [`LIMIT`] twice.
#[cfg(feature = "tokio")]
async fn bounded<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(LIMIT * 2, future)
        .await
        .expect("the async pool finishes in time")
}

fn pool_options() -> PoolOptions {
    PoolOptions::default().with_client(quick())
}

fn text(outcome: Result<Answer, ClientError>, what: &str) -> String {
    let answer = outcome.unwrap_or_else(|e| panic!("{what}: {e}"));
    answer.response.body.as_text().unwrap_or_default().to_owned()
}

#[test]
fn a_server_restarted_behind_a_front_costs_a_get_one_retry_and_a_post_its_answer() {
    for &kind in POOLS {
        let first = Counted::default();
        let server = start(Runtime::Std, first.clone(), ServerOptions::default());
        let front = Front::start(server.addr);
        let origin = Origin::from(front.addr);
        let pool = AnyPool::new(kind, pool_options());
        assert_eq!(text(pool.send(&origin, get("/a")), "first"), "echo /a ");
        assert_eq!(pool.idle(&origin), 1, "{kind:?}: kept for the next call");
        assert_eq!(first.requests(), 1, "{kind:?}");

        // The server restarts between calls; the front keeps the pooled
        // connection open until it is used.
        server.shutdown_and_join();
        front.wait_backends_closed(1);
        let second = Counted::default();
        let server = start(Runtime::Std, second.clone(), ServerOptions::default());
        front.set_backend(server.addr);

        let answer = pool.send(&origin, api_request(Method::Put, "/b", "content"));
        assert_eq!(
            text(answer, "the PUT after the restart"),
            "echo /b content",
            "{kind:?}"
        );
        assert_eq!(
            front.dropped(),
            1,
            "{kind:?}: the stale connection carried it first"
        );
        assert_eq!(front.accepted(), 2, "{kind:?}: then one new connection, once");
        assert_eq!(
            (second.connections(), second.requests()),
            (1, 1),
            "{kind:?}: the new server saw it once"
        );

        // Again, with a POST: not sent again (D13), and its error says
        // that it may have been applied.
        server.shutdown_and_join();
        front.wait_backends_closed(2);
        let third = Counted::default();
        let server = start(Runtime::Std, third.clone(), ServerOptions::default());
        front.set_backend(server.addr);
        let error = pool
            .send(&origin, api_request(Method::Post, "/c", "once"))
            .expect_err("the POST's connection closed under it");
        assert!(
            matches!(
                error,
                ClientError::ClosedEarly {
                    progress: Progress {
                        request: Sent::Whole,
                        answer_began: false
                    }
                }
            ),
            "{kind:?}: {error:?}"
        );
        assert!(
            error.to_string().contains("may or may not have been applied"),
            "{kind:?}: {error}"
        );
        assert_eq!(front.dropped(), 2, "{kind:?}");
        assert_eq!(front.accepted(), 2, "{kind:?}: no new connection for the POST");
        assert_eq!(third.requests(), 0, "{kind:?}");

        // The pool goes on: the next call has a new connection.
        assert_eq!(
            text(pool.send(&origin, get("/d")), "after"),
            "echo /d ",
            "{kind:?}"
        );
        assert_eq!(third.connections(), 1, "{kind:?}");
        drop(front);
        server.shutdown_and_join();
    }
}

#[test]
fn a_connection_the_server_closed_while_idle_is_never_used() {
    for &kind in POOLS {
        let counted = Counted::default();
        let server = start(Runtime::Std, counted.clone(), ServerOptions::default());
        let front = Front::start(server.addr);
        let origin = Origin::from(front.addr);
        let pool = AnyPool::new(kind, pool_options());
        assert_eq!(
            text(pool.send(&origin, api_request(Method::Post, "/a", "1")), "first"),
            "echo /a 1"
        );
        // As a server ends an idle connection (its idle limit, D3).
        front.close_clients();
        wait_until("the front to see the close", || front.clients_closed() == 1);
        // A POST is never sent again: it succeeds only if the closed
        // connection was left alone.
        let answer = pool.send(&origin, api_request(Method::Post, "/b", "2"));
        assert_eq!(text(answer, "the POST after the close"), "echo /b 2", "{kind:?}");
        assert_eq!(front.accepted(), 2, "{kind:?}");
        assert_eq!(
            front.dropped(),
            0,
            "{kind:?}: nothing was written to the closed one"
        );
        assert_eq!(pool.open(&origin), 1, "{kind:?}: the closed one is gone");
        drop(front);
        server.shutdown_and_join();
    }
}

#[test]
fn calls_from_many_threads_and_tasks_share_a_few_connections() {
    for &kind in POOLS {
        let counted = Counted::default();
        let server = start(Runtime::Std, counted.clone(), ServerOptions::default());
        let origin = Origin::from(server.addr);
        let pool = AnyPool::new(kind, pool_options().with_max_connections_per_host(3));
        let outcomes = pool.by_many(&origin, 4, 8, || get("/shared"));
        assert_eq!(outcomes.len(), 32);
        for outcome in outcomes {
            assert_eq!(text(outcome, "a shared call"), "echo /shared ", "{kind:?}");
        }
        let connections = counted.connections();
        assert!(
            (1..=3).contains(&connections),
            "{kind:?}: 32 calls on {connections} connections"
        );
        assert_eq!(pool.open(&origin), connections, "{kind:?}: all kept");
        assert_eq!(pool.idle(&origin), connections, "{kind:?}");
        server.shutdown_and_join();
    }
}

#[test]
fn the_per_host_limit_holds_while_calls_wait_for_a_connection() {
    for &kind in POOLS {
        let counted = Counted::default();
        let server = start(Runtime::Std, counted.clone(), ServerOptions::default());
        let origin = Origin::from(server.addr);
        let pool = AnyPool::new(kind, pool_options().with_max_connections_per_host(2));
        // Six slow calls at once (300 ms each): two at a time.
        let outcomes = pool.by_many(&origin, 6, 1, || get("/sleep/300"));
        for outcome in outcomes {
            assert_eq!(text(outcome, "a slow call"), "echo /sleep/300 ", "{kind:?}");
        }
        assert!(
            counted.most_busy() <= 2,
            "{kind:?}: {} at once",
            counted.most_busy()
        );
        assert_eq!(counted.connections(), 2, "{kind:?}");
        server.shutdown_and_join();
    }
}

#[test]
fn idle_connections_are_closed_at_the_idle_timeout() {
    const IDLE: Duration = Duration::from_millis(300);
    for &kind in POOLS {
        let server = start(Runtime::Std, Echo, ServerOptions::default());
        let front = Front::start(server.addr);
        let origin = Origin::from(front.addr);
        let pool = AnyPool::new(kind, pool_options().with_idle_timeout(Some(IDLE)));
        assert_eq!(text(pool.send(&origin, get("/a")), "a call"), "echo /a ");
        let idle_since = Instant::now();
        assert_eq!(pool.idle(&origin), 1, "{kind:?}");
        // The pool closes it on its own, with no call to notice.
        wait_until("the pool to close its idle connection", || {
            front.clients_closed() == 1
        });
        let waited = idle_since.elapsed();
        assert!(
            waited >= IDLE - Duration::from_millis(50),
            "{kind:?}: closed after {waited:?}"
        );
        assert_eq!((pool.idle(&origin), pool.open(&origin)), (0, 0), "{kind:?}");
        // And the next call connects again.
        assert_eq!(text(pool.send(&origin, get("/b")), "a call after"), "echo /b ");
        assert_eq!(front.accepted(), 2, "{kind:?}");
        drop(front);
        server.shutdown_and_join();
    }
}

#[test]
fn on_a_clock_of_its_own_the_pool_closes_what_idled_too_long_when_next_used() {
    use jsontp_protocol::io_adapters::{Clock, now};
    let time = Arc::new(Mutex::new(now()));
    let held = Arc::clone(&time);
    let clock = Clock::from_fn(move || *held.lock().expect("time"));
    let counted = Counted::default();
    let server = start(Runtime::Std, counted.clone(), ServerOptions::default());
    let origin = Origin::from(server.addr);
    let options = PoolOptions::default()
        .with_client(quick().with_clock(clock))
        .with_idle_timeout(Some(Duration::from_secs(30)));
    let pool = Pool::new(options);
    let call = |path: &str| text(pool.send(&origin, get(path)), path);
    call("/a");
    time.lock().expect("time").instant += Duration::from_secs(29);
    call("/b");
    assert_eq!(counted.connections(), 1, "29 s idle: reused");
    time.lock().expect("time").instant += Duration::from_secs(30);
    assert_eq!(pool.idle_connections(&origin), 1, "no reaper on this clock");
    call("/c");
    assert_eq!(counted.connections(), 2, "30 s idle: closed, and a new one made");
    assert_eq!(pool.open_connections(&origin), 1);
    server.shutdown_and_join();
}

#[test]
fn a_call_has_a_deadline_of_its_own_waiting_included() {
    // Answers that take a second, calls that may take a tenth of one:
    // the margin keeps a loaded machine from blurring the two.
    const SHORT: Duration = Duration::from_millis(100);
    const GAVE_UP: Duration = Duration::from_millis(700);
    for &kind in POOLS {
        let server = start(Runtime::Std, Counted::default(), ServerOptions::default());
        let url = |path: &str| format!("jsontp://{}{path}", server.addr);
        let pool = AnyPool::new(kind, pool_options().with_max_connections_per_host(1));

        let started = Instant::now();
        let error = pool.get_within(&url("/sleep/1000"), SHORT).expect_err("too slow");
        assert!(
            matches!(error, ClientError::TimedOut(Timeout::Call)),
            "{kind:?}: {error:?}"
        );
        assert_eq!(
            error.to_string(),
            "timed out: the call took longer than its deadline"
        );
        assert!(started.elapsed() < GAVE_UP, "{kind:?}: {:?}", started.elapsed());

        // The one connection is busy with a slow call: waiting for it
        // counts against the deadline too.
        let origin = Origin::from(server.addr);
        let (slow, waiting, waited) = std::thread::scope(|threads| {
            let slow = threads.spawn(|| pool.send(&origin, get("/sleep/1000")));
            wait_until("the slow call to take the connection", || pool.open(&origin) == 1);
            let started = Instant::now();
            let waiting = pool.get_within(&url("/a"), SHORT);
            let waited = started.elapsed();
            (slow.join().expect("slow call"), waiting, waited)
        });
        assert_eq!(text(slow, "the slow call"), "echo /sleep/1000 ", "{kind:?}");
        assert!(
            matches!(waiting, Err(ClientError::TimedOut(Timeout::Call))),
            "{kind:?}: {waiting:?}"
        );
        assert!(waited < GAVE_UP, "{kind:?}: {waited:?}");
        // With time enough, the same call is answered.
        assert_eq!(
            text(pool.get_within(&url("/a"), LIMIT), "in time"),
            "echo /a ",
            "{kind:?}"
        );
        server.shutdown_and_join();
    }
}

#[cfg(feature = "tls")]
#[test]
fn a_jsontps_origin_is_pooled_over_tls() {
    let pki = crate::pki::Pki::new();
    for &kind in POOLS {
        let counted = Counted::default();
        let server = start(
            Runtime::Std,
            counted.clone(),
            ServerOptions::default().with_tls(pki.server(false)),
        );
        let url = |path: &str| format!("jsontps://localhost:{}{path}", server.addr.port());
        let pool = AnyPool::new(kind, pool_options().with_tls(pki.client()));
        for n in 0..3 {
            let answer = pool.get_within(&url(&format!("/{n}")), LIMIT);
            assert_eq!(text(answer, "over TLS"), format!("echo /{n} "), "{kind:?}");
        }
        assert_eq!(
            counted.connections(),
            1,
            "{kind:?}: one TLS session for three calls"
        );
        // A plain pool asking for TLS gets the certificate refused.
        let untrusting = AnyPool::new(kind, pool_options());
        let error = untrusting
            .get_within(&url("/x"), LIMIT)
            .expect_err("the test CA is not a system root");
        assert!(matches!(error, ClientError::Tls { .. }), "{kind:?}: {error:?}");
        server.shutdown_and_join();
    }
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct NewPost {
    title: String,
    tags: Vec<String>,
    author: Author,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Author {
    name: String,
    karma: u32,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Created {
    id: u64,
    post: NewPost,
}

fn posts() -> Router {
    Router::new().route(
        "/posts",
        post(|Keys(post): Keys<NewPost>| Keys(Created { id: 7, post })),
    )
}

#[test]
fn typed_bodies_round_trip_through_a_router_and_a_mismatch_names_the_key() {
    let server = start(Runtime::Std, posts(), ServerOptions::default());
    let url = format!("jsontp://{}/posts", server.addr);
    let pool = Pool::new(pool_options());
    let sent = NewPost {
        title: "pooled".into(),
        tags: vec!["rust".into(), "jsontp".into()],
        author: Author {
            name: "Ada".into(),
            karma: 3,
        },
    };
    let created: Created = pool
        .post(&url)
        .keys(&sent)
        .send()
        .expect("answered")
        .keys()
        .expect("the answer fits");
    assert_eq!(created, Created { id: 7, post: sent });

    // The answer read into a type it does not fit: the key is named.
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Misread {
        id: u64,
        post: MisreadPost,
    }
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct MisreadPost {
        author: MisreadAuthor,
    }
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct MisreadAuthor {
        karma: String,
    }
    let answer = pool.post(&url).keys(&created.post).send().expect("answered");
    let error = answer.keys::<Misread>().expect_err("karma is a number");
    assert_eq!(
        error.to_string(),
        "the answer's body key `post.author.karma` does not fit: invalid type: integer `3`, expected a string"
    );

    // Keys the server cannot read: its 400 names the key too.
    let answer = pool
        .post(&url)
        .keys(&serde_json::json!({"title": "t", "tags": [], "author": {"name": "Ada"}}))
        .send()
        .expect("answered");
    assert_eq!(answer.response.status.code.as_u16(), 400);
    assert!(
        answer.response.status.human_message.contains("`author`")
            && answer.response.status.human_message.contains("karma"),
        "{}",
        answer.response.status.human_message
    );
    server.shutdown_and_join();
}

#[test]
fn urls_and_keys_that_cannot_be_sent_fail_before_connecting() {
    let pool = Pool::new(pool_options());
    let error = pool.get("http://127.0.0.1:1/").send().expect_err("not jsontp");
    assert_eq!(
        error.to_string(),
        "the URL \"http://127.0.0.1:1/\" is not a jsontp:// or jsontps:// URL"
    );
    let error = pool
        .put("jsontp://127.0.0.1:1/x")
        .keys(&serde_json::json!({"encoding": "gzip"}))
        .send()
        .expect_err("a reserved key");
    assert_eq!(
        error.to_string(),
        "the request's body key `encoding` does not fit: is a reserved body key"
    );
}
