//! The NNNTP application: users, groups and posts in SQLite, served by a
//! jsontp router. `main.rs` runs it; the tests include this file (with
//! `passwords.rs` and `limits.rs`) as is.
//!
//! Every request names its operation in body key `nnntp`, an object with
//! `type`: `new` (a user), `post`, `list` and `comment` (a reply to a
//! post), each at the resource of its name. The organisation's client
//! sends them all as `GET` with the body key, so `GET` and `POST` are both
//! served.
//!
//! What keeps it within bounds, whoever asks ([`Settings`] has the
//! numbers):
//! - passwords are hashed and checked on a fixed pool of workers
//!   (`passwords.rs`), so hashing takes at most `workers × memory cost`;
//!   requests wait for it in a bounded queue, for a bounded time, and are
//!   refused `503` with nothing done past either;
//! - an unknown user costs the same check as a wrong password (against a
//!   dummy hash), so the time of a refusal does not tell who has an account;
//! - sign-ups and failed logins are limited per peer address (`limits.rs`),
//!   answered `429` with when to try again;
//! - the database is waited for at most [`Settings::db_wait`]: past it the
//!   answer is `503`, before anything is stored;
//! - `/list` answers a page at a time, bounded by count and by bytes;
//! - a post or comment may carry `nnntp.token`, the client's name for it:
//!   sending it again (a retry after a lost answer or a `504`) stores it
//!   once and answers the same id.

use std::net::IpAddr;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use jsontp_protocol::app::{Call, FromRequest, Keys, Peer, Refusal, Router, State, on};
use jsontp_protocol::message::{Method, StatusCode};
use rusqlite::{Connection, ErrorCode, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::limits::{PerPeer, Rate, seconds};
use super::passwords::{self, Failed, Passwords};

/// The bounds of the server; [`Settings::default`] gives the stated ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// The password pool: workers, queue, wait and Argon2 cost.
    pub passwords: passwords::Settings,
    /// Sign-ups (`/new`) per peer address: 10 an hour.
    pub signups: Rate,
    /// Failed logins (a post or comment with an unknown user or a wrong
    /// password) per peer address: 20 in 10 minutes.
    pub failed_logins: Rate,
    /// Addresses each of those two tables holds, at most: 10,000.
    pub peers: usize,
    /// How long a request waits for the database (another request
    /// holding it, or another process): 2 s.
    pub db_wait: Duration,
    /// The pages of `/list`.
    pub paging: Paging,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            passwords: passwords::Settings::default(),
            signups: Rate {
                at_most: 10,
                per: Duration::from_secs(3600),
            },
            failed_logins: Rate {
                at_most: 20,
                per: Duration::from_secs(600),
            },
            peers: 10_000,
            db_wait: Duration::from_secs(2),
            paging: Paging::default(),
        }
    }
}

/// How `/list` pages: `nnntp.limit` posts (`default` when absent, at most
/// `max`), and no more than `bytes` of posts as JSON — a page stops
/// before the post that would pass it, but always holds one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paging {
    /// Posts in a page when the request does not say: 50.
    pub default: u32,
    /// Posts in a page, at most: 200.
    pub max: u32,
    /// Bytes of posts in a page (their JSON), at most: 1 MiB.
    pub bytes: usize,
}

impl Default for Paging {
    fn default() -> Self {
        Paging {
            default: 50,
            max: 200,
            bytes: 1 << 20,
        }
    }
}

/// Where the news lives, and what guards it: one SQLite connection (one
/// writer at a time, so that concurrent posts each get their own id and
/// none is lost), the password pool and the per-address limits.
#[derive(Clone)]
pub struct Store {
    db: Arc<Db>,
    passwords: Passwords,
    signups: Arc<PerPeer>,
    failed_logins: Arc<PerPeer>,
    settings: Settings,
}

/// The connection, lent to one request at a time, and waited for within a
/// bound (a `Mutex` alone waits without one).
struct Db {
    slot: Mutex<Slot>,
    returned: Condvar,
}

enum Slot {
    Free(Connection),
    Lent,
}

/// The connection while a request has it; given back when dropped (a
/// handler that panics gives it back too, and SQLite rolls back whatever
/// statement it left half done).
struct Lent<'a> {
    db: &'a Db,
    connection: Option<Connection>,
}

impl std::ops::Deref for Lent<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        // Taken out only in `drop`.
        self.connection.as_ref().expect("a lent connection")
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take() {
            *self.db.slot.lock().unwrap_or_else(|p| p.into_inner()) = Slot::Free(connection);
            self.db.returned.notify_one();
        }
    }
}

impl Db {
    /// The connection, if it is free before `deadline`; SQLite waits for
    /// another process's lock only until then too.
    fn lend(&self, deadline: Instant) -> Result<Lent<'_>, Refusal> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Slot::Free(connection) = std::mem::replace(&mut *slot, Slot::Lent) {
                drop(slot);
                // Lent first: given back even if setting its wait fails.
                let lent = Lent {
                    db: self,
                    connection: Some(connection),
                };
                let left = deadline.saturating_duration_since(Instant::now());
                lent.busy_timeout(left).map_err(db_error)?;
                return Ok(lent);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(db_busy());
            }
            slot = self
                .returned
                .wait_timeout(slot, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// `503`: the database was not had in time. Nothing was written, so
/// trying again is safe (D13: the request was not applied).
fn db_busy() -> Refusal {
    Refusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "the database is busy: nothing was stored; try again in a few seconds",
    )
}

/// A database error as its answer: SQLite's own busy or locked (its wait
/// ran out, the statement undone) as [`db_busy`], anything else `500`.
fn db_error(error: rusqlite::Error) -> Refusal {
    match error.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => db_busy(),
        _ => Refusal::from(error),
    }
}

/// `429` for a peer past a limit, saying when its window ends.
fn too_many(what: &str, wait: Duration) -> Refusal {
    let wait = seconds(wait);
    Refusal::new(
        StatusCode::TOO_MANY_REQUESTS,
        format!("too many {what} from your address; try again in {wait} s"),
    )
    .with_key("retry-after", wait)
}

/// The answer for a password the pool did not hash or check.
fn not_hashed(failed: Failed) -> Refusal {
    match failed {
        Failed::Busy => Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is checking too many passwords at once: nothing was done; try again in a few seconds",
        ),
        Failed::Broken(why) => {
            tracing::error!(why, "password hashing failed; answering 500");
            Refusal::internal("the server failed while answering this request")
        }
    }
}

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS users (
        username TEXT PRIMARY KEY,
        password_hash TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS posts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        group_name TEXT NOT NULL,
        subject TEXT NOT NULL,
        body TEXT NOT NULL,
        author TEXT NOT NULL REFERENCES users(username),
        author_email TEXT,
        parent INTEGER REFERENCES posts(id),
        token TEXT
    );
    CREATE INDEX IF NOT EXISTS posts_by_group ON posts(group_name, id);
";

/// A post's token is its author's name for it: unique per author (posts
/// without one, NULL, never collide).
const TOKENS: &str = "CREATE UNIQUE INDEX IF NOT EXISTS posts_by_token ON posts(author, token);";

/// A token's length, at most, in bytes.
const TOKEN_BYTES: usize = 128;

/// One post as `/list` gives it.
#[derive(Debug, Serialize)]
pub struct Listed {
    id: i64,
    group_name: String,
    subject: String,
    body: String,
    author: String,
    author_email: Option<String>,
    /// The post this one replies to, for a comment.
    #[serde(skip_serializing_if = "Option::is_none")]
    parent: Option<i64>,
}

/// A new post or comment: what a token's earlier post is compared with.
struct Draft<'a> {
    group: &'a str,
    subject: &'a str,
    body: &'a str,
    parent: Option<i64>,
}

impl Store {
    /// Opens (or creates) the database at `path` and starts the password
    /// pool, within `settings`.
    pub fn open(path: &Path, settings: Settings) -> Result<Store, String> {
        let db = open_db(path).map_err(|e| e.to_string())?;
        Ok(Store {
            db: Arc::new(Db {
                slot: Mutex::new(Slot::Free(db)),
                returned: Condvar::new(),
            }),
            passwords: Passwords::start(settings.passwords)?,
            signups: Arc::new(PerPeer::new(settings.signups, settings.peers)),
            failed_logins: Arc::new(PerPeer::new(settings.failed_logins, settings.peers)),
            settings,
        })
    }

    /// The password pool (its [`passwords::Stats`] tell what it did).
    pub fn passwords(&self) -> &Passwords {
        &self.passwords
    }

    fn db(&self) -> Result<Lent<'_>, Refusal> {
        // The machine's clock: the wait is real time.
        self.db.lend(Instant::now() + self.settings.db_wait)
    }

    /// Creates a user; the password is stored only as an Argon2id hash.
    fn create_user(&self, peer: IpAddr, username: &str, password: &str) -> Result<(), Refusal> {
        self.signups
            .take(peer, Instant::now())
            .map_err(|wait| too_many("sign-ups", wait))?;
        // Hashing is slow on purpose: done before taking the database.
        let hash = self.passwords.hash(password).map_err(|failed| {
            if failed == Failed::Busy {
                // Nothing was done: it does not count.
                self.signups.give_back(peer);
            }
            not_hashed(failed)
        })?;
        let inserted = self
            .db()?
            .execute(
                "INSERT INTO users (username, password_hash) VALUES (?1, ?2) ON CONFLICT (username) DO NOTHING",
                params![username, hash],
            )
            .map_err(db_error)?;
        if inserted == 0 {
            return Err(Refusal::bad_request("user already exists"));
        }
        Ok(())
    }

    /// `401` unless `username` exists and `password` is theirs; the same
    /// work either way. A refusal counts against the peer's failed logins,
    /// and a peer past them is refused `429` before any work.
    fn check_user(&self, peer: IpAddr, username: &str, password: &str) -> Result<(), Refusal> {
        self.failed_logins
            .take(peer, Instant::now())
            .map_err(|wait| too_many("failed logins", wait))?;
        let checked = self.lookup(username).and_then(|stored| {
            self.passwords
                .verify(password, stored.as_deref())
                .map_err(not_hashed)
        });
        match checked {
            Ok(true) => {
                self.failed_logins.give_back(peer);
                Ok(())
            }
            // The same answer for both: it does not tell who has an account.
            Ok(false) => Err(Refusal::unauthorized("unknown user or wrong password")),
            Err(refusal) => {
                // Not a failed login: the password was not checked.
                self.failed_logins.give_back(peer);
                Err(refusal)
            }
        }
    }

    fn lookup(&self, username: &str) -> Result<Option<String>, Refusal> {
        self.db()?
            .query_row(
                "SELECT password_hash FROM users WHERE username = ?1",
                params![username],
                |row| row.get(0),
            )
            .optional()
            .map_err(db_error)
    }

    /// Stores a post once: with a token its author used before for the
    /// same text, the id stored then; for other text, `409`.
    fn add_post(&self, draft: &Draft<'_>, author: &Author, token: Option<&str>) -> Result<i64, Refusal> {
        let db = self.db()?;
        let inserted = db
            .execute(
                "INSERT INTO posts (group_name, subject, body, author, author_email, parent, token)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (author, token) DO NOTHING",
                params![
                    draft.group,
                    draft.subject,
                    draft.body,
                    author.username,
                    author.email,
                    draft.parent,
                    token
                ],
            )
            .map_err(db_error)?;
        if inserted == 1 {
            // Under the same loan as the insert: this post's id, not another's.
            return Ok(db.last_insert_rowid());
        }
        let (id, group, subject, body, parent): (i64, String, String, String, Option<i64>) = db
            .query_row(
                "SELECT id, group_name, subject, body, parent FROM posts WHERE author = ?1 AND token = ?2",
                params![author.username, token],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?)),
            )
            .map_err(db_error)?;
        if (group.as_str(), subject.as_str(), body.as_str(), parent)
            == (draft.group, draft.subject, draft.body, draft.parent)
        {
            return Ok(id);
        }
        Err(Refusal::new(
            StatusCode::CONFLICT,
            format!(
                "body key `nnntp.token` names your post {id}, which has other text: a new post needs a new token"
            ),
        ))
    }

    fn post_in(&self, id: i64) -> Result<Option<(String, String)>, Refusal> {
        self.db()?
            .query_row(
                "SELECT group_name, subject FROM posts WHERE id = ?1",
                params![id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()
            .map_err(db_error)
    }

    /// Up to `limit` posts of `group` after post `after`, within the byte
    /// bound; and the `after` of the next page, when there may be one.
    fn list(&self, group: &str, after: i64, limit: u32) -> Result<(Vec<Listed>, Option<i64>), Refusal> {
        let db = self.db()?;
        let mut query = db
            .prepare(
                "SELECT id, group_name, subject, body, author, author_email, parent FROM posts
                 WHERE group_name = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
            )
            .map_err(db_error)?;
        // One more than the page: whether another page follows.
        let mut rows = query
            .query(params![group, after, i64::from(limit) + 1])
            .map_err(db_error)?;
        let (mut page, mut bytes, mut more) = (Vec::new(), 0, false);
        while let Some(row) = rows.next().map_err(db_error)? {
            let listed = Listed {
                id: row.get(0).map_err(db_error)?,
                group_name: row.get(1).map_err(db_error)?,
                subject: row.get(2).map_err(db_error)?,
                body: row.get(3).map_err(db_error)?,
                author: row.get(4).map_err(db_error)?,
                author_email: row.get(5).map_err(db_error)?,
                parent: row.get(6).map_err(db_error)?,
            };
            let size = json_len(&listed);
            if page.len() == limit as usize || (!page.is_empty() && bytes + size > self.settings.paging.bytes)
            {
                more = true;
                break;
            }
            bytes += size;
            page.push(listed);
        }
        let next = if more { page.last().map(|p| p.id) } else { None };
        Ok((page, next))
    }
}

fn open_db(path: &Path) -> rusqlite::Result<Connection> {
    let db = Connection::open(path)?;
    db.pragma_update(None, "journal_mode", "WAL")?;
    db.pragma_update(None, "foreign_keys", true)?;
    db.execute_batch(SCHEMA)?;
    // A database made before posts had tokens gets the column.
    let has_token: bool = db.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info('posts') WHERE name = 'token'",
        [],
        |row| row.get(0),
    )?;
    if !has_token {
        db.execute_batch("ALTER TABLE posts ADD COLUMN token TEXT;")?;
    }
    db.execute_batch(TOKENS)?;
    Ok(db)
}

/// The length of `value` as JSON.
fn json_len(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Strings, numbers and options: it cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The body key every request carries.
#[derive(Deserialize)]
struct Nnntp<T> {
    nnntp: T,
}

/// An operation's keys, as its resource takes them.
trait Named: serde::de::DeserializeOwned {
    /// What `nnntp.type` says for it.
    const TYPE: &'static str;
}

/// The operation in body key `nnntp`: its `type` checked first (a request
/// sent to the wrong resource is told so, not that some other key is
/// missing), then its keys deserialised into `T`.
struct Operation<T>(T);

impl<T: Named> Operation<T> {
    /// Refuses a request whose `nnntp.type` is not `T`'s.
    fn check_type(request: &jsontp_protocol::message::Request) -> Result<(), Refusal> {
        let found = request.body.extra().get("nnntp").and_then(|op| op.get("type"));
        match found.and_then(|t| t.as_str()) {
            Some(found) if found == T::TYPE => Ok(()),
            Some(found) => Err(Refusal::bad_request(format!(
                "body key `nnntp.type` is \"{found}\", but this resource performs \"{}\"",
                T::TYPE
            ))),
            None if found.is_some() => Err(Refusal::bad_request("body key `nnntp.type` is not a string")),
            None => Err(Refusal::bad_request("body key `nnntp.type` is missing")),
        }
    }
}

// Drawn from the body keys, which the last argument takes: no request of
// NNNTP has content, so none is kept for it.
impl<S, T: Named> FromRequest<S> for Operation<T> {
    type Rejection = Refusal;
    const TAKES_CONTENT: bool = false;

    fn from_request(call: Call, state: &S) -> Result<Self, Refusal> {
        Self::check_type(call.request())?;
        let Keys(Nnntp { nnntp }) = Keys::<Nnntp<T>>::from_request(call, state)?;
        Ok(Operation(nnntp))
    }
}

#[derive(Deserialize)]
struct NewUser {
    username: String,
    password: String,
}

#[derive(Deserialize)]
struct Author {
    username: String,
    password: String,
    email: Option<String>,
}

#[derive(Deserialize)]
struct PostText {
    subject: String,
    body: String,
}

#[derive(Deserialize)]
struct NewPost {
    group: String,
    post: PostText,
    author: Author,
    token: Option<String>,
}

#[derive(Deserialize)]
struct List {
    group: String,
    after: Option<PostId>,
    limit: Option<u32>,
}

/// A post's id as clients write it: a number, or a number in a string.
#[derive(Deserialize)]
#[serde(untagged)]
enum PostId {
    Number(i64),
    Text(String),
}

impl PostId {
    /// The id, or `400` naming `key`.
    fn read(self, key: &str) -> Result<i64, Refusal> {
        match self {
            PostId::Number(id) => Ok(id),
            PostId::Text(text) => text.trim().parse().map_err(|_| {
                Refusal::bad_request(format!("body key `{key}` is \"{text}\", which is not a post id"))
            }),
        }
    }
}

#[derive(Deserialize)]
struct Parent {
    id: PostId,
}

#[derive(Deserialize)]
struct CommentText {
    body: String,
}

#[derive(Deserialize)]
struct NewComment {
    parent: Parent,
    comment: CommentText,
    author: Author,
    token: Option<String>,
}

impl Named for NewUser {
    const TYPE: &'static str = "new";
}

impl Named for NewPost {
    const TYPE: &'static str = "post";
}

impl Named for NewComment {
    const TYPE: &'static str = "comment";
}

impl Named for List {
    const TYPE: &'static str = "list";
}

#[derive(Serialize)]
struct Created {
    id: i64,
}

#[derive(Serialize)]
struct Posts {
    nnntp: Vec<Listed>,
    /// The `nnntp.after` of the next page; no key on the last one.
    next: Option<i64>,
}

/// `400` for an empty value of a key that needs one.
fn not_empty(key: &str, value: &str) -> Result<(), Refusal> {
    if value.trim().is_empty() {
        return Err(Refusal::bad_request(format!("body key `{key}` is empty")));
    }
    Ok(())
}

/// `400` for a token that is empty or too long.
fn token(token: Option<&str>) -> Result<(), Refusal> {
    match token {
        Some("") => Err(Refusal::bad_request("body key `nnntp.token` is empty")),
        Some(token) if token.len() > TOKEN_BYTES => Err(Refusal::bad_request(format!(
            "body key `nnntp.token` is {} bytes long; at most {TOKEN_BYTES}",
            token.len()
        ))),
        _ => Ok(()),
    }
}

fn new_user(
    State(store): State<Store>,
    Peer(peer): Peer,
    Operation(user): Operation<NewUser>,
) -> Result<(StatusCode, &'static str), Refusal> {
    not_empty("nnntp.username", &user.username)?;
    not_empty("nnntp.password", &user.password)?;
    store.create_user(peer.ip(), &user.username, &user.password)?;
    Ok((StatusCode::OK, "user created"))
}

fn post(
    State(store): State<Store>,
    Peer(peer): Peer,
    Operation(new): Operation<NewPost>,
) -> Result<Keys<Created>, Refusal> {
    not_empty("nnntp.group", &new.group)?;
    not_empty("nnntp.post.subject", &new.post.subject)?;
    token(new.token.as_deref())?;
    store.check_user(peer.ip(), &new.author.username, &new.author.password)?;
    let draft = Draft {
        group: &new.group,
        subject: &new.post.subject,
        body: &new.post.body,
        parent: None,
    };
    let id = store.add_post(&draft, &new.author, new.token.as_deref())?;
    Ok(Keys(Created { id }))
}

fn comment(
    State(store): State<Store>,
    Peer(peer): Peer,
    Operation(new): Operation<NewComment>,
) -> Result<Keys<Created>, Refusal> {
    let parent = new.parent.id.read("nnntp.parent.id")?;
    not_empty("nnntp.comment.body", &new.comment.body)?;
    token(new.token.as_deref())?;
    store.check_user(peer.ip(), &new.author.username, &new.author.password)?;
    let Some((group, subject)) = store.post_in(parent)? else {
        return Err(Refusal::not_found(format!(
            "there is no post {parent} to comment on"
        )));
    };
    let subject = if subject.starts_with("Re: ") {
        subject
    } else {
        format!("Re: {subject}")
    };
    let draft = Draft {
        group: &group,
        subject: &subject,
        body: &new.comment.body,
        parent: Some(parent),
    };
    let id = store.add_post(&draft, &new.author, new.token.as_deref())?;
    Ok(Keys(Created { id }))
}

fn list(State(store): State<Store>, Operation(asked): Operation<List>) -> Result<Keys<Posts>, Refusal> {
    let paging = store.settings.paging;
    let limit = asked.limit.unwrap_or(paging.default);
    if limit == 0 || limit > paging.max {
        return Err(Refusal::bad_request(format!(
            "body key `nnntp.limit` is {limit}; a page holds 1 to {} posts",
            paging.max
        )));
    }
    let after = match asked.after {
        Some(after) => after.read("nnntp.after")?,
        None => 0,
    };
    let (posts, next) = store.list(&asked.group, after, limit)?;
    Ok(Keys(Posts { nnntp: posts, next }))
}

/// The NNNTP server's routes over `store`. Its handlers block on SQLite
/// and on the password pool: plain functions, which the tokio server runs
/// on its blocking pool.
pub fn router(store: Store) -> Router {
    const EITHER: &[Method] = &[Method::Get, Method::Post];
    Router::new()
        .route("/new", on(EITHER, new_user))
        .route("/post", on(EITHER, post))
        .route("/comment", on(EITHER, comment))
        .route("/list", on(EITHER, list))
        .with_state(store)
}
