//! Password hashing on a bounded pool. Argon2id is slow and large on
//! purpose: each hash holds [`Cost::memory_kib`] of memory while it runs,
//! so hashing on whatever thread a request happens to run on lets a crowd
//! of logins take as much memory as there are threads. Here a fixed set of
//! workers does all of it, each with one buffer of the memory cost
//! allocated when it starts and reused for every hash: the memory of
//! hashing is `workers × memory cost`, whatever the load.
//!
//! Requests wait for a worker in a bounded queue, and for a bounded time;
//! past either bound they are refused with nothing done ([`Failed::Busy`]).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{Output, ParamsString, PasswordHash, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};

/// The Argon2id cost of every hash the server makes, and the most a
/// stored hash may ask for when it is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    /// Memory per hash, in KiB: what each worker holds.
    pub memory_kib: u32,
    /// Passes over that memory: the time per hash grows with it.
    pub passes: u32,
}

impl Cost {
    /// 19 MiB and two passes, one lane: OWASP's recommended minimum for
    /// Argon2id, and the `argon2` crate's default (so hashes stored by
    /// earlier versions of this example check unchanged).
    pub const DEFAULT: Cost = Cost {
        memory_kib: 19 * 1024,
        passes: 2,
    };

    fn params(self) -> Result<Params, String> {
        Params::new(self.memory_kib, self.passes, 1, None).map_err(|e| format!("Argon2 parameters: {e}"))
    }
}

/// How much hashing the server does at once, and how long a request may
/// wait for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Hashes computed at once, at most.
    pub workers: usize,
    /// Requests waiting for a worker, at most; more are refused.
    pub queue: usize,
    /// How long a request may wait for a worker before it is refused.
    pub wait: Duration,
    /// The cost of each hash.
    pub cost: Cost,
}

impl Default for Settings {
    /// Half the cores (at least one): hashing is CPU work, so more at
    /// once than cores only adds memory and latency, and the other half
    /// stays free to answer everything else during a flood of logins.
    /// Sixteen waiting per worker, for at most two seconds.
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let workers = (cores / 2).max(1);
        Settings {
            workers,
            queue: 16 * workers,
            wait: Duration::from_secs(2),
            cost: Cost::DEFAULT,
        }
    }
}

/// Why a hash was not made or checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failed {
    /// Every worker was busy and the queue full, or the wait ran out:
    /// nothing was hashed or checked.
    Busy,
    /// The hash could not be made, or a stored hash is damaged or costs
    /// more memory than a worker holds (the text says which).
    Broken(String),
}

/// What the workers have done since the pool started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Hashes made (new passwords).
    pub hashed: u64,
    /// Passwords checked against a hash (the dummy one included).
    pub verified: u64,
    /// The most hashes that ever ran at once.
    pub most_at_once: usize,
}

/// The pool: a handle to its queue, cheap to clone. The workers stop when
/// the last handle is dropped.
#[derive(Clone)]
pub struct Passwords {
    queue: SyncSender<Job>,
    gauge: Arc<Gauge>,
    /// Checked when the user does not exist, so that an unknown name costs
    /// what a wrong password does and timing does not tell names apart.
    dummy: Arc<str>,
    wait: Duration,
}

/// A check handed to a worker; [`Pending::wait`] gives its result.
pub struct Pending {
    reply: Receiver<Result<Outcome, String>>,
    against: Against,
}

/// What a password is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Against {
    /// The user's own hash.
    Stored,
    /// The dummy hash, for a user who does not exist: never a match.
    Dummy,
}

impl Pending {
    /// Whether the password matched; blocks until a worker has checked it
    /// or dropped it (its wait ran out).
    pub fn wait(self) -> Result<bool, Failed> {
        match self.reply.recv() {
            Ok(Ok(Outcome::Matched)) => Ok(self.against == Against::Stored),
            Ok(Ok(Outcome::Mismatched)) => Ok(false),
            Ok(Ok(Outcome::Hashed(_))) => Err(Failed::Broken("a check came back as a hash".into())),
            Ok(Err(why)) => Err(Failed::Broken(why)),
            Err(mpsc::RecvError) => Err(Failed::Busy),
        }
    }
}

enum Work {
    Hash { password: String },
    Verify { password: String, stored: Arc<str> },
}

enum Outcome {
    Hashed(String),
    Matched,
    Mismatched,
}

struct Job {
    work: Work,
    /// A worker that takes the job after this drops it undone (`None`:
    /// no limit).
    start_by: Option<Instant>,
    reply: SyncSender<Result<Outcome, String>>,
}

/// Hashes running now, and the most ever.
#[derive(Default)]
struct Gauge {
    running: AtomicUsize,
    most: AtomicUsize,
    hashed: AtomicU64,
    verified: AtomicU64,
}

/// One hash running; counted out when dropped.
struct Running<'a>(&'a Gauge);

impl Gauge {
    fn enter(&self) -> Running<'_> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        Running(self)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Passwords {
    /// Starts `settings.workers` threads, each holding its buffer of the
    /// memory cost, and makes the dummy hash on them.
    pub fn start(settings: Settings) -> Result<Passwords, String> {
        if settings.workers == 0 {
            return Err("the password pool needs at least one worker".into());
        }
        let params = settings.cost.params()?;
        let (queue, jobs) = mpsc::sync_channel::<Job>(settings.queue);
        let jobs = Arc::new(Mutex::new(jobs));
        let gauge = Arc::new(Gauge::default());
        for n in 0..settings.workers {
            let mut worker = Worker {
                memory: vec![Block::default(); params.block_count()],
                params: params.clone(),
                gauge: Arc::clone(&gauge),
            };
            let jobs = Arc::clone(&jobs);
            std::thread::Builder::new()
                .name(format!("nnntp-hash-{n}"))
                .spawn(move || worker.serve(&jobs))
                .map_err(|e| format!("cannot start a hashing thread: {e}"))?;
        }
        let mut passwords = Passwords {
            queue,
            gauge,
            dummy: Arc::from(""),
            wait: settings.wait,
        };
        // A password no one knows: 16 random bytes, as a salt string is.
        let secret = SaltString::generate(&mut OsRng);
        let dummy = passwords
            .hash_waiting(secret.as_str(), None)
            .map_err(|e| format!("cannot make the dummy hash: {e:?}"))?;
        passwords.dummy = Arc::from(dummy);
        Ok(passwords)
    }

    /// A new hash of `password` (PHC string form, `$argon2id$…`).
    pub fn hash(&self, password: &str) -> Result<String, Failed> {
        self.hash_waiting(password, Some(self.wait))
    }

    fn hash_waiting(&self, password: &str, wait: Option<Duration>) -> Result<String, Failed> {
        let work = Work::Hash {
            password: password.to_owned(),
        };
        match self.submit(work, wait)?.recv() {
            Ok(Ok(Outcome::Hashed(hash))) => Ok(hash),
            Ok(Ok(_)) => Err(Failed::Broken("a hash came back as a check".into())),
            Ok(Err(why)) => Err(Failed::Broken(why)),
            Err(mpsc::RecvError) => Err(Failed::Busy),
        }
    }

    /// Whether `password` matches `stored`; for a user who does not exist
    /// (`None`), the same work against the dummy hash, and `false`.
    pub fn verify(&self, password: &str, stored: Option<&str>) -> Result<bool, Failed> {
        self.start_verify(password, stored)?.wait()
    }

    /// Queues the check of [`Passwords::verify`] and returns at once:
    /// [`Failed::Busy`] if the queue is full.
    pub fn start_verify(&self, password: &str, stored: Option<&str>) -> Result<Pending, Failed> {
        let work = Work::Verify {
            password: password.to_owned(),
            stored: stored.map_or_else(|| Arc::clone(&self.dummy), Arc::from),
        };
        Ok(Pending {
            reply: self.submit(work, Some(self.wait))?,
            against: if stored.is_some() {
                Against::Stored
            } else {
                Against::Dummy
            },
        })
    }

    /// Queues `work` for at most `wait` (a full queue refuses it at once);
    /// with no `wait`, waits for room and lets it wait for a worker as long
    /// as it takes (the dummy hash, made before the server listens).
    fn submit(
        &self,
        work: Work,
        wait: Option<Duration>,
    ) -> Result<Receiver<Result<Outcome, String>>, Failed> {
        let (reply, answer) = mpsc::sync_channel(1);
        let stopped = || Failed::Broken("the hashing workers have stopped".into());
        let Some(wait) = wait else {
            let job = Job {
                work,
                start_by: None,
                reply,
            };
            return self.queue.send(job).map(|()| answer).map_err(|_| stopped());
        };
        let job = Job {
            work,
            // The machine's clock: the wait is real time.
            start_by: Instant::now().checked_add(wait),
            reply,
        };
        match self.queue.try_send(job) {
            Ok(()) => Ok(answer),
            Err(TrySendError::Full(_)) => Err(Failed::Busy),
            Err(TrySendError::Disconnected(_)) => Err(stopped()),
        }
    }

    /// What the workers have done so far.
    pub fn stats(&self) -> Stats {
        Stats {
            hashed: self.gauge.hashed.load(Ordering::SeqCst),
            verified: self.gauge.verified.load(Ordering::SeqCst),
            most_at_once: self.gauge.most.load(Ordering::SeqCst),
        }
    }
}

/// A hashing thread: its buffer of the memory cost, reused for every job.
struct Worker {
    memory: Vec<Block>,
    params: Params,
    gauge: Arc<Gauge>,
}

impl Worker {
    fn serve(&mut self, jobs: &Mutex<Receiver<Job>>) {
        loop {
            // One worker waits on the queue at a time; the lock is released
            // before the job runs.
            let job = match jobs.lock().unwrap_or_else(|p| p.into_inner()).recv() {
                Ok(job) => job,
                Err(mpsc::RecvError) => return, // every handle dropped
            };
            if job.start_by.is_some_and(|by| Instant::now() > by) {
                // Dropping `reply` tells the waiting request: busy, nothing done.
                continue;
            }
            let outcome = self.run(job.work);
            let _ = job.reply.send(outcome);
        }
    }

    /// The only place a hash is computed: counted on the gauge.
    fn run(&mut self, work: Work) -> Result<Outcome, String> {
        let gauge = Arc::clone(&self.gauge);
        let _running = gauge.enter();
        match work {
            Work::Hash { password } => {
                self.gauge.hashed.fetch_add(1, Ordering::SeqCst);
                self.hash(&password).map(Outcome::Hashed)
            }
            Work::Verify { password, stored } => {
                self.gauge.verified.fetch_add(1, Ordering::SeqCst);
                let matched = self.verify(&password, &stored)?;
                Ok(if matched {
                    Outcome::Matched
                } else {
                    Outcome::Mismatched
                })
            }
        }
    }

    fn hash(&mut self, password: &str) -> Result<String, String> {
        let salt = SaltString::generate(&mut OsRng);
        let mut salt_bytes = [0; 64];
        let salt_bytes = salt
            .decode_b64(&mut salt_bytes)
            .map_err(|e| format!("salt: {e}"))?;
        let mut out = [0; Params::DEFAULT_OUTPUT_LEN];
        Argon2::new(Algorithm::Argon2id, Version::V0x13, self.params.clone())
            .hash_password_into_with_memory(password.as_bytes(), salt_bytes, &mut out, &mut self.memory)
            .map_err(|e| format!("cannot hash the password: {e}"))?;
        let hash = PasswordHash {
            algorithm: Algorithm::Argon2id.ident(),
            version: Some(Version::V0x13.into()),
            params: ParamsString::try_from(&self.params).map_err(|e| format!("parameters: {e}"))?,
            salt: Some(salt.as_salt()),
            hash: Some(Output::new(&out).map_err(|e| format!("output: {e}"))?),
        };
        Ok(hash.to_string())
    }

    fn verify(&mut self, password: &str, stored: &str) -> Result<bool, String> {
        let damaged = |e: argon2::password_hash::Error| format!("a stored hash is damaged: {e}");
        let hash = PasswordHash::new(stored).map_err(damaged)?;
        let algorithm = Algorithm::try_from(hash.algorithm).map_err(damaged)?;
        let version = match hash.version {
            Some(v) => Version::try_from(v).map_err(|e| format!("a stored hash is damaged: {e}"))?,
            None => Version::default(),
        };
        let params = Params::try_from(&hash).map_err(damaged)?;
        // The buffer is the bound on memory: a hash that needs more is
        // refused, never given a larger one.
        if params.block_count() > self.memory.len() {
            return Err(format!(
                "a stored hash asks for {} KiB, more than the {} KiB a worker holds",
                params.m_cost(),
                self.memory.len()
            ));
        }
        let (Some(expected), Some(salt)) = (hash.hash, hash.salt) else {
            return Err("a stored hash has no salt or no output".into());
        };
        let mut salt_bytes = [0; 64];
        let salt_bytes = salt.decode_b64(&mut salt_bytes).map_err(damaged)?;
        let mut out = vec![0; expected.len()];
        Argon2::new(algorithm, version, params)
            .hash_password_into_with_memory(password.as_bytes(), salt_bytes, &mut out, &mut self.memory)
            .map_err(|e| format!("cannot check the password: {e}"))?;
        // `Output`'s comparison takes the same time wherever they differ.
        Ok(Output::new(&out).map_err(damaged)? == expected)
    }
}
