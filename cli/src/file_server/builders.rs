//! The threads that make the file cache's costly forms apart from the
//! workers ([`super::small_files::SmallFiles::build_form`]). They start at
//! the first build and stay while the cache lives, so that a build pays
//! for no thread's start, and their stacks and allocator arenas are made
//! once: a thread made and dropped per build left the server's resident
//! memory a little higher after each burst of builds.
//!
//! How many builds run at once is the cache's to bound (one per path,
//! [`super::small_files::SmallFiles::MAX_BUILDS`] in all); the queue holds
//! no more than that.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

/// A build, with what it must hold until it ends.
type Job = Box<dyn FnOnce() + Send>;

/// A fixed set of threads that run jobs in turn.
#[derive(Debug)]
pub(super) struct Builders {
    /// Where jobs go: `None` until the first job, and again once no thread
    /// is left to take them.
    jobs: Mutex<Option<Sender<Job>>>,
    threads: usize,
}

impl Builders {
    /// Builders of `threads` threads, none started yet.
    pub(super) fn new(threads: usize) -> Builders {
        Builders {
            jobs: Mutex::new(None),
            threads: threads.max(1),
        }
    }

    /// Hands `job` to a thread, starting them first if need be; whether a
    /// thread will run it (else it is dropped, and what it holds with it).
    pub(super) fn run(&self, job: impl FnOnce() + Send + 'static) -> bool {
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        if jobs.is_none() {
            *jobs = self.start();
        }
        let Some(sender) = jobs.as_ref() else {
            return false;
        };
        if sender.send(Box::new(job)).is_ok() {
            return true;
        }
        // Every thread has ended: the next job starts them again.
        *jobs = None;
        false
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
                    .name(format!("jsontp-cache-build-{n}"))
                    .spawn(move || take_jobs(&receiver))
                    .is_ok()
            })
            .count();
        (started > 0).then_some(sender)
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
        let builders = Builders::new(2);
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

    #[test]
    fn a_job_lets_go_of_what_it_holds_when_it_ends() {
        let builders = Builders::new(1);
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
