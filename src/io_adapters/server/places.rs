//! The bound on application work: handler places, taken before a handler
//! runs and given back only when its work has really ended; how far a
//! request got into the application, which decides what an answer given
//! without the application's may say (D13); and the sockets a shutdown
//! closes from outside the threads that serve them, when a handler holds
//! one of those threads past the drain deadline.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use super::{Handled, Handler, Incoming, RequestInfo};
use crate::message::{Request, Response, Status, StatusCode};

/// How many handler calls may run at once on a server, by default
/// ([`ServerOptions::max_handlers`](super::ServerOptions::max_handlers)).
pub const DEFAULT_MAX_HANDLERS: usize = 64;

/// The handler places of a synchronous server (std, mio): a counting
/// semaphore whose waiters give up once a shutdown's drain deadline has
/// passed.
#[derive(Debug)]
pub(crate) struct Places {
    room: Mutex<Room>,
    freed: Condvar,
}

#[derive(Debug)]
struct Room {
    free: usize,
    /// The drain deadline, once a shutdown began: a request still waiting
    /// then is never handed to its handler.
    closes: Option<Instant>,
}

/// A place taken; given back when dropped (after the handler returned or
/// unwound).
pub(crate) struct Place<'a>(&'a Places);

impl Places {
    pub(crate) fn new(places: usize) -> Places {
        Places {
            room: Mutex::new(Room {
                free: places.max(1),
                closes: None,
            }),
            freed: Condvar::new(),
        }
    }

    fn room(&self) -> MutexGuard<'_, Room> {
        self.room.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Waits for a place; `None` when the drain deadline passes first.
    pub(crate) fn take(&self) -> Option<Place<'_>> {
        let mut room = self.room();
        loop {
            if room.free > 0 {
                room.free -= 1;
                return Some(Place(self));
            }
            room = match room.closes {
                None => self.freed.wait(room).unwrap_or_else(|p| p.into_inner()),
                Some(at) => {
                    let left = at.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return None;
                    }
                    self.freed
                        .wait_timeout(room, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
    }

    /// A shutdown began: waiters give up at `until`.
    pub(crate) fn close_at(&self, until: Instant) {
        self.room().closes = Some(until);
        self.freed.notify_all();
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.0.room().free += 1;
        self.0.freed.notify_one();
    }
}

/// A handler whose calls each take a place first (std, mio): at most as
/// many run at once as there are places. Its hooks (`check_head`,
/// `log_exchange`) take none.
#[derive(Debug)]
pub(crate) struct Bounded<H> {
    handler: Arc<H>,
    /// `None`: the server's threads bound the calls already (a mio worker
    /// runs one at a time, and there are no more workers than places).
    places: Option<Arc<Places>>,
}

impl<H> Bounded<H> {
    pub(crate) fn new(handler: Arc<H>, places: Option<Arc<Places>>) -> Bounded<H> {
        Bounded { handler, places }
    }
}

impl<H: Handler> Bounded<H> {
    // Apart from `respond`, so that a server without places (mio) calls
    // its handler through no more than a check.
    #[inline(never)]
    fn respond_in_place(&self, places: &Places, incoming: Incoming) -> Handled {
        match places.take() {
            Some(_place) => self.handler.respond(incoming),
            None => Response::new(Status::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the server is shutting down and never began this request; try again later",
            ))
            .into(),
        }
    }
}

impl<H: Handler> Handler for Bounded<H> {
    fn check_head(&self, head: &Request, info: &RequestInfo) -> super::HeadCheck {
        self.handler.check_head(head, info)
    }

    /// Runs in a place until the handler returns; an `async` answer is
    /// awaited after it, in no place (dropping it cancels it, as on
    /// tokio). A request still
    /// waiting for a place when the drain deadline passes was never handed
    /// to the handler: `503` (D13), its upload dropped with it.
    fn respond(&self, incoming: Incoming) -> Handled {
        match &self.places {
            Some(places) => self.respond_in_place(places, incoming),
            // The server's threads bound the calls.
            None => self.handler.respond(incoming),
        }
    }

    fn log_exchange(&self, record: &super::AccessRecord<'_>) {
        self.handler.log_exchange(record);
    }
}

/// The open connections' sockets of a synchronous server (std, mio), so
/// that a shutdown can close them from outside the thread that serves
/// them once its drain deadline has passed: a handler may hold that thread
/// for as long as it likes, but not the connection.
///
/// A socket is added once its connection is served and removed before it
/// is closed, both under the lock, so a descriptor shut down here is
/// always still the connection's own.
#[derive(Debug, Default)]
pub(crate) struct OpenSockets {
    #[cfg(unix)]
    fds: Mutex<std::collections::HashSet<std::os::fd::RawFd>>,
}

impl OpenSockets {
    #[cfg(unix)]
    fn fds(&self) -> MutexGuard<'_, std::collections::HashSet<std::os::fd::RawFd>> {
        self.fds.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds a connection's socket: remove it before closing it.
    #[cfg(unix)]
    pub(crate) fn add(&self, socket: &impl std::os::fd::AsRawFd) {
        self.fds().insert(socket.as_raw_fd());
    }

    /// Removes a socket, before it is closed.
    #[cfg(unix)]
    pub(crate) fn remove(&self, socket: &impl std::os::fd::AsRawFd) {
        self.fds().remove(&socket.as_raw_fd());
    }

    /// Elsewhere the sockets close when their threads let go of them.
    #[cfg(not(unix))]
    pub(crate) fn add<S>(&self, _socket: &S) {}

    #[cfg(not(unix))]
    pub(crate) fn remove<S>(&self, _socket: &S) {}

    /// Shuts every socket still open down both ways: its peer sees the
    /// connection end, and the thread that serves it (once its handler
    /// returns) finds it closed.
    pub(crate) fn shut_all(&self) {
        #[cfg(unix)]
        for &fd in self.fds().iter() {
            // SAFETY: the descriptor is open: it is removed from the set,
            // under this same lock, before its owner closes it.
            #[allow(unsafe_code)]
            let socket = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            let _ = rustix::net::shutdown(socket, rustix::net::Shutdown::Both);
        }
    }
}

/// How far a request got into the application, as an answer the server
/// gives without the application's tells it (D13): `503` ("try again
/// later") only when no handler ever had it, `504` (the outcome unknown)
/// once one may have begun.
#[cfg(feature = "tower")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Reached {
    /// A service has it and has said no more: it may have begun.
    Service = 0,
    /// A router holds it until a handler place is free: no handler has
    /// seen it.
    Queue = 1,
    /// A handler has it.
    Handler = 2,
}

#[cfg(feature = "tower")]
impl Reached {
    /// The answer when the server, or a layer in front of the
    /// application, stopped waiting for it (D13): `503`, try again later,
    /// while no handler had the request; `504`, its outcome unknown, once
    /// one may have begun.
    pub(crate) fn timed_out(self) -> Response {
        match self {
            Reached::Queue => {
                tracing::warn!("no handler was free in time; answering 503");
                Response::from_code(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the server was too busy to begin this request in time, and never did; try again later",
                )
            }
            Reached::Service | Reached::Handler => {
                tracing::warn!("the application did not answer in time; answering 504");
                Response::from_code(
                    StatusCode::GATEWAY_TIMEOUT,
                    "the server stopped waiting for its application, which may still finish: \
                     the request may or may not have been applied",
                )
            }
        }
    }
}

/// The hand-off mark an [`Incoming`](super::Incoming) carries, shared
/// between the server (which reads it when the service gives an error
/// instead of an answer) and the router (which sets it), and the server's
/// places for blocking handlers.
///
/// Both are `None` for an `Incoming` made outside the tokio server (the
/// std and mio servers, a test): the mark is made only when something
/// will read it ([`Handing::watch`]), so that a request served without a
/// reader pays no allocation for it.
#[cfg(feature = "tower")]
#[derive(Debug, Clone, Default)]
pub(crate) struct Handing {
    reached: Option<Arc<std::sync::atomic::AtomicU8>>,
    /// `None`: no bound.
    places: Option<Arc<tokio::sync::Semaphore>>,
}

#[cfg(feature = "tower")]
impl Handing {
    pub(crate) fn new(places: Arc<tokio::sync::Semaphore>) -> Handing {
        Handing {
            reached: Some(Arc::default()),
            places: Some(places),
        }
    }

    /// A handle that sees how far the request gets from now on: the mark
    /// is made here if nobody keeps one yet. Whoever reads
    /// [`reached`](Self::reached) takes its handle this way.
    pub(crate) fn watch(&mut self) -> Handing {
        self.reached.get_or_insert_with(Arc::default);
        self.clone()
    }

    fn mark(&self, reached: Reached) {
        if let Some(mark) = &self.reached {
            mark.store(reached as u8, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// How far the request got (as far as the service, when nobody keeps
    /// the mark).
    pub(crate) fn reached(&self) -> Reached {
        let mark = self.reached.as_ref();
        match mark.map_or(0, |m| m.load(std::sync::atomic::Ordering::SeqCst)) {
            0 => Reached::Service,
            1 => Reached::Queue,
            _ => Reached::Handler,
        }
    }

    /// An `async` handler takes the request now; dropping its future
    /// cancels it.
    pub(crate) fn to_handler(&self) {
        self.mark(Reached::Handler);
    }

    /// The request waits for a place to run a blocking handler.
    pub(crate) fn queued(&self) {
        self.mark(Reached::Queue);
    }

    /// Runs blocking `work` on tokio's blocking pool once a place is free.
    /// The wait is part of this future: dropped meanwhile (a timeout, a
    /// peer gone, a shutdown's deadline), the work never begins. Once it
    /// has, it cannot be stopped: the place stays taken until it ends,
    /// whatever becomes of this future, so no timeout lets more blocking
    /// handlers run than there are places.
    pub(crate) async fn run_blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        self.queued();
        let place = match &self.places {
            // Never closed, so never an error.
            Some(places) => Arc::clone(places).acquire_owned().await.ok(),
            None => None,
        };
        self.to_handler();
        tokio::task::spawn_blocking(move || {
            let _place = place;
            work()
        })
        .await
    }
}

/// The open connections of a server as its connection cap sees them
/// (D3): which are idle, and for how long, so that at the cap the one idle
/// longest is closed to admit a new client, as nginx reuses idle
/// keep-alive connections when it runs out of them.
///
/// Each connection is a [`Member`] whose standing is one word: the
/// connection moves it between busy and idle, an acceptor holding a new
/// client at the cap asks the member idle longest to close
/// ([`Roster::make_room`]), and the connection answers. It closes only if
/// it is still idle when it reads the request (as its idle timeout would:
/// no response, D2); one that received bytes meanwhile declines, and the
/// acceptor asks another. So a connection with an exchange under way, or
/// anything owed to its peer, is never closed for a newcomer.
///
/// `W` wakes a connection's owner (its thread, event loop or task) to read
/// a request.
#[derive(Debug)]
pub(crate) struct Roster<W> {
    members: Mutex<HashMap<u64, Arc<Member<W>>>>,
    next_key: AtomicU64,
}

impl<W> Default for Roster<W> {
    fn default() -> Self {
        Roster {
            members: Mutex::new(HashMap::new()),
            next_key: AtomicU64::new(0),
        }
    }
}

/// Counts the moves to idle of every member of every roster: a member's
/// count at its last move says how long it has been idle, without a clock.
static IDLE_ORDER: AtomicU64 = AtomicU64::new(0);

/// Wakes the owner of a connection asked to close.
pub(crate) trait Wake {
    fn wake(&self);
}

/// A connection whose thread looks at its standing after every blocking
/// call (the std server: within [`BLOCKING_SLICE`](super::drive::BLOCKING_SLICE)).
impl Wake for () {
    fn wake(&self) {}
}

#[cfg(feature = "tokio")]
impl Wake for tokio::sync::Notify {
    fn wake(&self) {
        // Kept as a permit if the task is not waiting: nothing is lost.
        self.notify_one();
    }
}

/// One connection of a [`Roster`].
pub(crate) struct Member<W> {
    /// The roster it leaves when it closes.
    roster: Arc<Roster<W>>,
    key: u64,
    /// A [`Standing`], as one word that other threads read and move.
    standing: AtomicU64,
    pub(crate) wake: W,
}

impl<W> std::fmt::Debug for Member<W> {
    // Not its roster, which lists it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("key", &self.key)
            .field("standing", &self.standing())
            .finish_non_exhaustive()
    }
}

/// Where a member stands. The connection moves it between `Busy` and
/// `Idle`, answers `Asked` with `Closing` or `Busy`, and leaves `Gone`; an
/// acceptor moves `Idle` to `Asked`, and nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    /// Something is under way, or owed.
    Busy,
    /// Between messages, nothing under way, since the `order`th move to
    /// idle.
    Idle { order: u64 },
    /// Asked to close to make room; the connection has not answered yet.
    Asked,
    /// Closing for the acceptor that asked: room is made when it is gone.
    Closing,
    /// Closed, and out of the roster.
    Gone,
}

impl Standing {
    fn word(self) -> u64 {
        match self {
            Standing::Busy => 0,
            Standing::Asked => 1,
            Standing::Closing => 2,
            Standing::Gone => 3,
            Standing::Idle { order } => order.saturating_add(4),
        }
    }

    fn from_word(word: u64) -> Standing {
        match word {
            0 => Standing::Busy,
            1 => Standing::Asked,
            2 => Standing::Closing,
            3 => Standing::Gone,
            n => Standing::Idle { order: n - 4 },
        }
    }
}

/// What the owner of a connection is to do once it told its member how
/// the connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Told {
    Nothing,
    /// An acceptor asked it to close: close it if it is idle
    /// (`Driver::close_idle`), and [`answer`](Member::answer) either way.
    Close,
}

impl<W> Member<W> {
    fn standing(&self) -> Standing {
        Standing::from_word(self.standing.load(Ordering::Acquire))
    }

    /// The connection is idle (`true`) or has something under way or owed:
    /// the member follows. [`Told::Close`] when an acceptor asked it to
    /// close.
    pub(crate) fn tell(&self, idle: bool) -> Told {
        let now = self.standing.load(Ordering::Acquire);
        match Standing::from_word(now) {
            Standing::Asked => Told::Close,
            Standing::Busy if idle => {
                // Only the connection moves a busy member.
                let order = IDLE_ORDER.fetch_add(1, Ordering::Relaxed);
                self.standing
                    .store(Standing::Idle { order }.word(), Ordering::Release);
                Told::Nothing
            }
            Standing::Idle { .. } if !idle => {
                let busy = Standing::Busy.word();
                match self
                    .standing
                    .compare_exchange(now, busy, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => Told::Nothing,
                    // Asked meanwhile: it declines, being busy.
                    Err(_) => Told::Close,
                }
            }
            _ => Told::Nothing,
        }
    }

    /// Answers the request to close: `closing` when the connection closes
    /// for it, else it declines (it is busy) and the acceptor asks another.
    pub(crate) fn answer(&self, closing: bool) {
        let to = if closing {
            Standing::Closing
        } else {
            Standing::Busy
        };
        let _ = self.standing.compare_exchange(
            Standing::Asked.word(),
            to.word(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// Whether the request to close it is still to bring room: not yet
    /// answered, or answered by closing and not yet closed.
    fn brings_room(&self) -> bool {
        matches!(self.standing(), Standing::Asked | Standing::Closing)
    }
}

impl<W: Wake> Roster<W> {
    /// Adds a connection, busy; it leaves when the [`Enrolled`] is dropped.
    pub(crate) fn enroll(self: &Arc<Self>, wake: W) -> Enrolled<W> {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let member = Arc::new(Member {
            roster: Arc::clone(self),
            key,
            standing: AtomicU64::new(Standing::Busy.word()),
            wake,
        });
        self.members().insert(key, Arc::clone(&member));
        Enrolled { member }
    }

    fn members(&self) -> MutexGuard<'_, HashMap<u64, Arc<Member<W>>>> {
        self.members
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// For an acceptor holding a client at the cap: unless the member it
    /// asked before (`asked`) is still to bring room, asks the member idle
    /// longest to close, and wakes its owner. `asked` is then that member,
    /// or `None` when none is idle (ask again later: one may become idle).
    pub(crate) fn make_room(&self, asked: &mut Option<Arc<Member<W>>>) {
        if asked.as_ref().is_some_and(|member| member.brings_room()) {
            return;
        }
        *asked = None;
        let members = self.members();
        loop {
            let longest = members
                .values()
                .filter_map(|member| match member.standing.load(Ordering::Acquire) {
                    word @ 4.. => Some((word, member)),
                    _ => None,
                })
                .min_by_key(|&(word, _)| word);
            let Some((word, member)) = longest else {
                return;
            };
            let to = Standing::Asked.word();
            // Busy meanwhile: the next one idle longest, then.
            if member
                .standing
                .compare_exchange(word, to, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                member.wake.wake();
                *asked = Some(Arc::clone(member));
                return;
            }
        }
    }
}

/// A connection's place in its [`Roster`]: it leaves the roster, and its
/// member stands gone, when this is dropped (the connection closed). One
/// pointer: every connection holds one.
#[derive(Debug)]
pub(crate) struct Enrolled<W> {
    member: Arc<Member<W>>,
}

impl<W> std::ops::Deref for Enrolled<W> {
    type Target = Member<W>;

    fn deref(&self) -> &Member<W> {
        &self.member
    }
}

impl<W> Drop for Enrolled<W> {
    fn drop(&mut self) {
        self.member
            .standing
            .store(Standing::Gone.word(), Ordering::Release);
        let mut members = self
            .member
            .roster
            .members
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        members.remove(&self.member.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[cfg(feature = "tower")]
    #[test]
    fn how_far_a_request_got_is_seen_by_whoever_watched_before_the_router_marked_it() {
        // Made outside the tokio server, nobody watches: marks go nowhere.
        let mut handing = Handing::default();
        handing.to_handler();
        assert_eq!(handing.reached(), Reached::Service);
        assert!(handing.reached.is_none(), "no mark is made for nobody");
        // A layer watches, then the router marks its own clone.
        let watched = handing.watch();
        let routers = handing.clone();
        routers.queued();
        assert_eq!(watched.reached(), Reached::Queue);
        routers.to_handler();
        assert_eq!(watched.reached(), Reached::Handler);
    }

    /// Counts its wake-ups.
    #[derive(Debug, Default)]
    struct Woken(std::sync::atomic::AtomicUsize);

    impl Wake for Woken {
        fn wake(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn woken(member: &Member<Woken>) -> usize {
        member.wake.0.load(Ordering::SeqCst)
    }

    #[test]
    fn the_roster_asks_the_member_idle_longest_and_never_a_busy_one() {
        let roster: Arc<Roster<Woken>> = Arc::default();
        let [first, second, third] = [(); 3].map(|()| roster.enroll(Woken::default()));
        let mut asked = None;
        // None idle: nobody is asked.
        roster.make_room(&mut asked);
        assert!(asked.is_none());
        // Idle in this order; the first then busy again.
        for member in [&first, &second, &third] {
            assert_eq!(member.tell(true), Told::Nothing);
        }
        assert_eq!(first.tell(false), Told::Nothing);
        roster.make_room(&mut asked);
        let asked_member = asked.clone().expect("one asked");
        assert!(Arc::ptr_eq(&asked_member, &second.member), "idle longest");
        assert_eq!((woken(&first), woken(&second), woken(&third)), (0, 1, 0));
        // Still to bring room: asking again asks nobody more.
        roster.make_room(&mut asked);
        assert_eq!(woken(&third), 0);
        // It became busy meanwhile: it declines, and the next is asked.
        assert_eq!(second.tell(false), Told::Close);
        second.answer(false);
        roster.make_room(&mut asked);
        assert!(Arc::ptr_eq(asked.as_ref().expect("asked"), &third.member));
        // It closes: room comes once it is gone.
        assert_eq!(third.tell(true), Told::Close);
        third.answer(true);
        assert_eq!(third.tell(false), Told::Nothing, "closing, not asked again");
        roster.make_room(&mut asked);
        assert_eq!(woken(&second), 1, "nobody more while it closes");
        drop(third);
        assert_eq!(roster.members().len(), 2);
        // Gone: the next look asks anew, and none is idle.
        roster.make_room(&mut asked);
        assert!(asked.is_none());
    }

    #[test]
    fn a_waiter_gets_the_place_given_back_or_gives_up_at_the_deadline() {
        let places = Arc::new(Places::new(1));
        let held = places.take().expect("a free place");
        let waiting = {
            let places = Arc::clone(&places);
            std::thread::spawn(move || places.take().is_some())
        };
        std::thread::sleep(Duration::from_millis(20));
        drop(held);
        assert!(waiting.join().unwrap(), "the place given back is taken");

        let _held = places.take().expect("free again");
        places.close_at(Instant::now() + Duration::from_millis(30));
        let started = Instant::now();
        assert!(places.take().is_none(), "none free before the deadline");
        assert!(started.elapsed() >= Duration::from_millis(25));
    }
}
