//! Threads that do a file server's slow work apart from the workers, so
//! that no other connection waits for it: the file cache's costly forms
//! ([`super::small_files::SmallFiles::build_form`]), and the disk work of
//! a `PUT` (writing, `fsync`, linking into place), whose answer the
//! handler awaits ([`Builders::answer`]). They start at the first job and
//! stay while their owner lives, so that a job pays for no thread's
//! start, and their stacks and allocator arenas are made once: a thread
//! made and dropped per job left the server's resident memory a little
//! higher after each burst.
//!
//! How many jobs wait is their owners' to bound: the cache starts one
//! build per path, [`super::small_files::SmallFiles::MAX_BUILDS`] in all;
//! a connection awaits one `PUT` at a time.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// A job, with what it must hold until it ends.
type Job = Box<dyn FnOnce() + Send>;

/// A fixed set of threads that run jobs in turn.
#[derive(Debug)]
pub(super) struct Builders {
    /// Where jobs go: `None` until the first job, and again once no thread
    /// is left to take them.
    jobs: Mutex<Option<Sender<Job>>>,
    threads: usize,
    /// The threads' name, before each one's number.
    name: &'static str,
}

impl Builders {
    /// Builders of `threads` threads named `name`, none started yet.
    pub(super) fn new(threads: usize, name: &'static str) -> Builders {
        Builders {
            jobs: Mutex::new(None),
            threads: threads.max(1),
            name,
        }
    }

    /// What `job` gives once a thread ran it, as a future: for an
    /// `async` answer, which holds no worker while the job runs. Where no
    /// thread can start, the job runs here. `None` if it panicked.
    pub(super) fn answer<T: Send + 'static>(&self, job: impl FnOnce() -> T + Send + 'static) -> Outcome<T> {
        let done = Arc::new(Mutex::new(Done::Running(None)));
        let giver = Giver(Arc::clone(&done));
        let job: Job = Box::new(move || giver.give(job()));
        if let Err(job) = self.send(job) {
            let _ = std::panic::catch_unwind(AssertUnwindSafe(job));
        }
        Outcome(done)
    }

    /// Hands `job` to a thread, starting them first if need be; whether a
    /// thread will run it (else it is dropped, and what it holds with it).
    pub(super) fn run(&self, job: impl FnOnce() + Send + 'static) -> bool {
        self.send(Box::new(job)).is_ok()
    }

    /// Hands `job` to a thread; back when none will run it.
    fn send(&self, job: Job) -> Result<(), Job> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        if jobs.is_none() {
            *jobs = self.start();
        }
        let Some(sender) = jobs.as_ref() else {
            return Err(job);
        };
        match sender.send(job) {
            Ok(()) => Ok(()),
            Err(mpsc::SendError(job)) => {
                // Every thread has ended: the next job starts them again.
                *jobs = None;
                Err(job)
            }
        }
    }

    /// Starts the threads; `None` when none could start. They end once the
    /// sender is dropped with the builders.
    fn start(&self) -> Option<Sender<Job>> {
        let (sender, receiver) = mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        let started = (0..self.threads)
            .filter(|n| {
                let receiver = Arc::clone(&receiver);
                std::thread::Builder::new()
                    .name(format!("{}-{n}", self.name))
                    .spawn(move || take_jobs(&receiver))
                    .is_ok()
            })
            .count();
        (started > 0).then_some(sender)
    }
}

/// The result of a job handed out by [`Builders::answer`]: ready with
/// `Some` once the job has returned, `None` if it panicked.
pub(super) struct Outcome<T>(Arc<Mutex<Done<T>>>);

enum Done<T> {
    /// Not yet run, or running; whom to wake when it ends.
    Running(Option<Waker>),
    Gave(T),
    /// It panicked, or no thread took it.
    Lost,
    /// Its result was taken.
    Taken,
}

fn lock<T>(done: &Mutex<Done<T>>) -> std::sync::MutexGuard<'_, Done<T>> {
    done.lock().unwrap_or_else(|p| p.into_inner())
}

impl<T> Future for Outcome<T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut done = lock(&self.0);
        match std::mem::replace(&mut *done, Done::Taken) {
            Done::Running(_) => {
                *done = Done::Running(Some(cx.waker().clone()));
                Poll::Pending
            }
            Done::Gave(value) => Poll::Ready(Some(value)),
            Done::Lost | Done::Taken => Poll::Ready(None),
        }
    }
}

/// A job's side of its outcome: gives the result, or, dropped without
/// giving one (the job panicked or was never run), tells the outcome it
/// is lost.
struct Giver<T>(Arc<Mutex<Done<T>>>);

impl<T> Giver<T> {
    fn give(self, value: T) {
        self.end(Done::Gave(value));
    }

    fn end(&self, with: Done<T>) {
        let waker = {
            let mut done = lock(&self.0);
            match std::mem::replace(&mut *done, with) {
                Done::Running(waker) => waker,
                // Ended already: keep what it gave.
                ended => {
                    *done = ended;
                    None
                }
            }
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Drop for Giver<T> {
    fn drop(&mut self) {
        self.end(Done::Lost);
    }
}

/// Runs jobs as they come until the builders are dropped. A job that
/// panics ends alone: the thread goes on to the next.
fn take_jobs(jobs: &Mutex<Receiver<Job>>) {
    loop {
        // The lock is held while waiting: the other threads wait for the
        // lock, and the next job goes to whichever takes it.
        let next = jobs.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok(job) = next else {
            return;
        };
        let _ = std::panic::catch_unwind(AssertUnwindSafe(job));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::sync::mpsc::channel;
    use std::time::Duration;

    const WAIT: Duration = Duration::from_secs(30);

    #[test]
    fn jobs_run_at_once_on_the_threads_which_stay_for_the_next() {
        let builders = Builders::new(2, "test-build");
        // Two jobs that each wait for the other: they run at once.
        let both = Arc::new(Barrier::new(2));
        let (done, finished) = channel();
        for _ in 0..2 {
            let (both, done) = (Arc::clone(&both), done.clone());
            assert!(builders.run(move || {
                both.wait();
                done.send(std::thread::current().id()).expect("the test waits");
            }));
        }
        let first: Vec<_> = (0..2)
            .map(|_| finished.recv_timeout(WAIT).expect("ran"))
            .collect();
        assert_ne!(first[0], first[1], "on two threads");
        // Later jobs, even after one that panicked, run on the same
        // threads: none is started again.
        assert!(builders.run(|| panic!("a build that fails")));
        for _ in 0..4 {
            let done = done.clone();
            assert!(builders.run(move || {
                done.send(std::thread::current().id()).expect("the test waits");
            }));
            let on = finished.recv_timeout(WAIT).expect("ran");
            assert!(first.contains(&on), "a thread of the first two");
        }
    }

    /// Polls `outcome` until it is ready, at most 30 s.
    fn outcome_of<T>(outcome: Outcome<T>) -> Option<T> {
        let mut outcome = std::pin::pin!(outcome);
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..3000 {
            if let Poll::Ready(value) = outcome.as_mut().poll(&mut cx) {
                return value;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("no outcome within 30 s");
    }

    #[test]
    fn an_answer_is_what_its_job_gave_or_none_if_it_panicked() {
        let builders = Builders::new(1, "test-build");
        assert_eq!(outcome_of(builders.answer(|| 6 * 7)), Some(42));
        assert_eq!(
            outcome_of(builders.answer(|| -> u32 { panic!("a job that fails") })),
            None
        );
        // The thread goes on.
        assert_eq!(outcome_of(builders.answer(|| "next")), Some("next"));
    }

    #[test]
    fn a_job_lets_go_of_what_it_holds_when_it_ends() {
        let builders = Builders::new(1, "test-build");
        let held = Arc::new(());
        let (done, finished) = channel();
        let job_held = Arc::clone(&held);
        assert!(builders.run(move || {
            let _held = job_held;
            done.send(()).expect("the test waits");
        }));
        finished.recv_timeout(WAIT).expect("ran");
        // The job has returned; give its drop a moment.
        super::super::tests::eventually("the job lets go of what it took", || {
            Arc::strong_count(&held) == 1
        });
    }
}
