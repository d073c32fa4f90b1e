//! The NNNTP application: users, groups and posts in SQLite, served by a
//! jsontp router. `main.rs` runs it; the tests include this file as is.
//!
//! Every request names its operation in body key `nnntp`, an object with
//! `type`: `new` (a user), `post`, `list` and `comment` (a reply to a
//! post), each at the resource of its name. The organisation's client
//! sends them all as `GET` with the body key, so `GET` and `POST` are both
//! served.

use std::path::Path;
use std::sync::{Arc, Mutex};

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use jsontp_protocol::app::{Call, Extract, Keys, Refusal, Router, State, on};
use jsontp_protocol::message::{Method, StatusCode};
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

/// Where the news lives: one SQLite connection, one writer at a time, so
/// that concurrent posts each get their own id and none is lost.
#[derive(Clone)]
pub struct Store {
    db: Arc<Mutex<Connection>>,
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
        parent INTEGER REFERENCES posts(id)
    );
    CREATE INDEX IF NOT EXISTS posts_by_group ON posts(group_name, id);
";

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

impl Store {
    /// Opens (or creates) the database at `path`.
    pub fn open(path: &Path) -> rusqlite::Result<Store> {
        let db = Connection::open(path)?;
        // Another process holding the file makes a writer wait, not fail.
        db.busy_timeout(std::time::Duration::from_secs(5))?;
        db.pragma_update(None, "journal_mode", "WAL")?;
        db.pragma_update(None, "foreign_keys", true)?;
        db.execute_batch(SCHEMA)?;
        Ok(Store {
            db: Arc::new(Mutex::new(db)),
        })
    }

    fn db(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A handler that panicked while holding it left no half-done
        // statement behind: SQLite rolls back on its own.
        self.db.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Creates a user; the password is stored only as an Argon2id hash.
    fn create_user(&self, username: &str, password: &str) -> Result<(), Refusal> {
        // Hashing is slow on purpose: done before taking the database.
        let salt = SaltString::generate(&mut OsRng);
        let hash = Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map_err(|e| Refusal::internal(format!("cannot hash the password: {e}")))?
            .to_string();
        let inserted = self.db().execute(
            "INSERT INTO users (username, password_hash) VALUES (?1, ?2) ON CONFLICT (username) DO NOTHING",
            params![username, hash],
        )?;
        if inserted == 0 {
            return Err(Refusal::bad_request("user already exists"));
        }
        Ok(())
    }

    /// `401` unless `username` exists and `password` is theirs.
    fn check_user(&self, username: &str, password: &str) -> Result<(), Refusal> {
        let stored: Option<String> = self
            .db()
            .query_row(
                "SELECT password_hash FROM users WHERE username = ?1",
                params![username],
                |row| row.get(0),
            )
            .optional()?;
        // The same answer for both: it does not tell who has an account.
        let refused = || Refusal::unauthorized("unknown user or wrong password");
        let stored = stored.ok_or_else(refused)?;
        let hash = PasswordHash::new(&stored)
            .map_err(|e| Refusal::internal(format!("a stored hash is damaged: {e}")))?;
        Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .map_err(|_| refused())
    }

    fn add_post(
        &self,
        group: &str,
        subject: &str,
        body: &str,
        author: &Author,
        parent: Option<i64>,
    ) -> rusqlite::Result<i64> {
        let db = self.db();
        db.execute(
            "INSERT INTO posts (group_name, subject, body, author, author_email, parent) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![group, subject, body, author.username, author.email, parent],
        )?;
        // Under the same lock as the insert: this post's id, not another's.
        Ok(db.last_insert_rowid())
    }

    fn post_in(&self, id: i64) -> rusqlite::Result<Option<(String, String)>> {
        self.db()
            .query_row(
                "SELECT group_name, subject FROM posts WHERE id = ?1",
                params![id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()
    }

    fn list(&self, group: &str) -> rusqlite::Result<Vec<Listed>> {
        let db = self.db();
        let mut query = db.prepare(
            "SELECT id, group_name, subject, body, author, author_email, parent FROM posts WHERE group_name = ?1 ORDER BY id",
        )?;
        let rows = query.query_map(params![group], |row| {
            Ok(Listed {
                id: row.get(0)?,
                group_name: row.get(1)?,
                subject: row.get(2)?,
                body: row.get(3)?,
                author: row.get(4)?,
                author_email: row.get(5)?,
                parent: row.get(6)?,
            })
        })?;
        rows.collect()
    }
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

impl<T: Named> Extract for Operation<T> {
    fn extract(call: &mut Call) -> Result<Self, Refusal> {
        let keys = call.request().body.extra();
        let found = keys.get("nnntp").and_then(|op| op.get("type"));
        match found.and_then(|t| t.as_str()) {
            Some(found) if found == T::TYPE => {}
            Some(found) => {
                return Err(Refusal::bad_request(format!(
                    "body key `nnntp.type` is \"{found}\", but this resource performs \"{}\"",
                    T::TYPE
                )));
            }
            None if found.is_some() => {
                return Err(Refusal::bad_request("body key `nnntp.type` is not a string"));
            }
            None => return Err(Refusal::bad_request("body key `nnntp.type` is missing")),
        }
        let Keys(Nnntp { nnntp }) = Keys::<Nnntp<T>>::extract(call)?;
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
}

#[derive(Deserialize)]
struct List {
    group: String,
}

/// A post's id as clients write it: a number, or a number in a string.
#[derive(Deserialize)]
#[serde(untagged)]
enum PostId {
    Number(i64),
    Text(String),
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
}

/// `400` for an empty value of a key that needs one.
fn not_empty(key: &str, value: &str) -> Result<(), Refusal> {
    if value.trim().is_empty() {
        return Err(Refusal::bad_request(format!("body key `{key}` is empty")));
    }
    Ok(())
}

fn new_user(
    State(store): State<Store>,
    Operation(user): Operation<NewUser>,
) -> Result<(StatusCode, &'static str), Refusal> {
    not_empty("nnntp.username", &user.username)?;
    not_empty("nnntp.password", &user.password)?;
    store.create_user(&user.username, &user.password)?;
    Ok((StatusCode::OK, "user created"))
}

fn post(State(store): State<Store>, Operation(new): Operation<NewPost>) -> Result<Keys<Created>, Refusal> {
    not_empty("nnntp.group", &new.group)?;
    not_empty("nnntp.post.subject", &new.post.subject)?;
    store.check_user(&new.author.username, &new.author.password)?;
    let id = store.add_post(&new.group, &new.post.subject, &new.post.body, &new.author, None)?;
    Ok(Keys(Created { id }))
}

fn comment(
    State(store): State<Store>,
    Operation(new): Operation<NewComment>,
) -> Result<Keys<Created>, Refusal> {
    let parent = match new.parent.id {
        PostId::Number(id) => id,
        PostId::Text(text) => text.trim().parse().map_err(|_| {
            Refusal::bad_request(format!(
                "body key `nnntp.parent.id` is \"{text}\", which is not a post id"
            ))
        })?,
    };
    not_empty("nnntp.comment.body", &new.comment.body)?;
    store.check_user(&new.author.username, &new.author.password)?;
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
    let id = store.add_post(&group, &subject, &new.comment.body, &new.author, Some(parent))?;
    Ok(Keys(Created { id }))
}

fn list(State(store): State<Store>, Operation(asked): Operation<List>) -> Result<Keys<Posts>, Refusal> {
    Ok(Keys(Posts {
        nnntp: store.list(&asked.group)?,
    }))
}

/// The NNNTP server's routes over `store`. Its handlers block on SQLite
/// and on password hashing: plain functions, which the tokio server runs
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
