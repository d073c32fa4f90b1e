//! The NNNTP example over TCP: the published crate's client against the
//! example binary started with its one command, our client against the
//! same router on every runtime, behind tower's timeout layer on tokio.

use std::net::SocketAddr;
#[cfg(feature = "tower")]
use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use jsontp_protocol::io_adapters::server::ServerOptions;
use jsontp_protocol::message::{Method, Response, StatusCode};
use serde_json::{Value, json};

#[cfg(feature = "tower")]
use crate::support::LIMIT;
use crate::support::{RUNTIMES, ask, request, start};

#[path = "../../examples/nnntp/news.rs"]
#[allow(dead_code)]
mod news;

fn new_user(username: &str, password: &str) -> Value {
    json!({"nnntp": {"type": "new", "username": username, "password": password}})
}

fn new_post(group: &str, subject: &str, username: &str, password: &str) -> Value {
    json!({"nnntp": {
        "type": "post",
        "group": group,
        "post": {"subject": subject, "body": format!("about {subject}")},
        "author": {"username": username, "password": password, "email": format!("{username}@example.org")},
    }})
}

fn list(group: &str) -> Value {
    json!({"nnntp": {"type": "list", "group": group}})
}

#[cfg(feature = "tower")]
/// The example, started as its one command on a free port, and killed
/// when dropped.
struct Example {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

#[cfg(feature = "tower")]
impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(feature = "tower")]
/// `target/…/examples/nnntp`, built first when this test binary was built
/// without the examples (`cargo test --test app`).
fn example_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary");
    let profile = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target profile folder");
    let binary = profile.join("examples").join("nnntp");
    if !binary.exists() {
        let built = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "--example", "nnntp", "--features", "tower"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo build");
        assert!(built.success(), "building the nnntp example failed");
    }
    binary
}

#[cfg(feature = "tower")]
fn run_example() -> Example {
    let dir = tempfile::tempdir().expect("temporary folder");
    let db = dir.path().join("news.db");
    let mut child = Command::new(example_binary())
        .args(["--addr", "127.0.0.1:0", "--db"])
        .arg(&db)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the example");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(LIMIT).expect("the example says where it listens");
    let addr = line
        .trim()
        .strip_prefix("nnntp: listening on ")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    Example {
        child,
        addr,
        _dir: dir,
    }
}

#[cfg(feature = "tower")]
/// One request with the published crate's client (`GET`, the body key
/// `nnntp`, version `1.0-rc1`, as the organisation's own client sends).
fn reference(addr: SocketAddr, resource: &'static str, keys: Value) -> jsontp_ref::client::JsontpResponse {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut request = jsontp_ref::client::Request::new()
            .method("GET")
            .resource(resource);
        for (key, value) in keys.as_object().expect("keys").clone() {
            request = request.body_key(key, value);
        }
        let _ = tx.send(request.send("127.0.0.1", addr.port()));
    });
    rx.recv_timeout(LIMIT)
        .expect("the reference client got its answer in time")
        .expect("the reference client parsed our response")
}

// The example is built only with the feature `tower` (it serves on tokio).
#[cfg(feature = "tower")]
#[test]
fn the_published_client_creates_a_user_posts_and_lists_against_the_example() {
    let example = run_example();
    let addr = example.addr;

    let created = reference(addr, "/new", new_user("ada", "correct horse"));
    assert_eq!(created.status.code, 200, "{}", created.status.human_message);
    let again = reference(addr, "/new", new_user("ada", "other"));
    assert_eq!(again.status.code, 400);
    assert_eq!(again.status.human_message, "user already exists");

    let posted = reference(
        addr,
        "/post",
        new_post("comp.lang.rust", "tower layers", "ada", "correct horse"),
    );
    assert_eq!(posted.status.code, 200, "{}", posted.status.human_message);
    let id = posted
        .body
        .other
        .get("id")
        .and_then(Value::as_i64)
        .expect("a numeric id");
    let second = reference(
        addr,
        "/post",
        new_post("comp.lang.rust", "extractors", "ada", "correct horse"),
    );
    assert!(second.body.other["id"].as_i64().expect("id") > id);

    let wrong = reference(addr, "/post", new_post("comp.lang.rust", "x", "ada", "wrong"));
    assert_eq!(wrong.status.code, 401);
    let unknown = reference(addr, "/post", new_post("comp.lang.rust", "x", "bob", "pw"));
    assert_eq!(unknown.status.code, 401);
    let missing = reference(
        addr,
        "/post",
        json!({"nnntp": {"type": "post", "group": "g", "author": {"username": "ada", "password": "correct horse"}}}),
    );
    assert_eq!(missing.status.code, 400);
    assert_eq!(
        missing.status.human_message,
        "body key `nnntp`: missing field `post`"
    );

    let listed = reference(addr, "/list", list("comp.lang.rust"));
    assert_eq!(listed.status.code, 200);
    let posts = listed.body.other["nnntp"]
        .as_array()
        .expect("an array of posts")
        .clone();
    assert_eq!(posts.len(), 2);
    assert_eq!(
        posts[0],
        json!({"id": id, "group_name": "comp.lang.rust", "subject": "tower layers",
               "body": "about tower layers", "author": "ada", "author_email": "ada@example.org"})
    );
    let empty = reference(addr, "/list", list("alt.nothing"));
    assert_eq!(empty.body.other["nnntp"], json!([]));
}

/// New user, post, comment, list with our client; the password kept only
/// as a slow hash.
fn exercise(addr: SocketAddr, what: &str) {
    let ok = |r: &Response| assert_eq!(r.status.code, StatusCode::OK, "{what}: {r:?}");
    ok(&ask(
        addr,
        request(Method::Post, "/new", new_user("grace", "hopper")),
    ));
    let posted = ask(
        addr,
        request(
            Method::Post,
            "/post",
            new_post("comp.lang.cobol", "bugs", "grace", "hopper"),
        ),
    );
    ok(&posted);
    let parent = posted.body.extra()["id"].as_i64().expect("id");
    let comment = json!({"nnntp": {
        "type": "comment",
        "parent": {"id": parent.to_string()},
        "comment": {"body": "found one"},
        "author": {"username": "grace", "password": "hopper"},
    }});
    let commented = ask(addr, request(Method::Get, "/comment", comment));
    ok(&commented);
    let listed = ask(addr, request(Method::Get, "/list", list("comp.lang.cobol")));
    let posts = listed.body.extra()["nnntp"].as_array().expect("posts").clone();
    assert_eq!(posts.len(), 2, "{what}");
    assert_eq!(posts[1]["subject"], "Re: bugs", "{what}");
    assert_eq!(posts[1]["parent"], parent, "{what}");

    let mismatched = ask(addr, request(Method::Get, "/list", new_user("x", "y")));
    assert_eq!(mismatched.status.code, StatusCode::BAD_REQUEST, "{what}");
    assert_eq!(
        mismatched.status.human_message,
        "body key `nnntp.type` is \"new\", but this resource performs \"list\""
    );
    let orphan = json!({"nnntp": {"type": "comment", "parent": {"id": 999_999}, "comment": {"body": "?"},
                                  "author": {"username": "grace", "password": "hopper"}}});
    assert_eq!(
        ask(addr, request(Method::Get, "/comment", orphan)).status.code,
        StatusCode::NOT_FOUND
    );
}

#[test]
fn the_news_router_serves_on_every_runtime_and_stores_only_password_hashes() {
    for &runtime in RUNTIMES {
        let dir = tempfile::tempdir().expect("temporary folder");
        let db = dir.path().join("news.db");
        let store = news::Store::open(&db).expect("open");
        let server = start(runtime, news::router(store), ServerOptions::default());
        exercise(server.addr, &format!("{runtime:?}"));
        drop(server);
        let db = rusqlite::Connection::open(&db).expect("reopen");
        let hash: String = db
            .query_row(
                "SELECT password_hash FROM users WHERE username = 'grace'",
                [],
                |row| row.get(0),
            )
            .expect("grace");
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(!hash.contains("hopper"));
    }
}

#[cfg(feature = "tower")]
#[test]
fn concurrent_posts_through_a_timeout_layer_are_never_lost() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let store = news::Store::open(&dir.path().join("news.db")).expect("open");
    let service = tower::ServiceBuilder::new()
        .timeout(Duration::from_secs(15))
        .service(news::router(store));
    let server = crate::support::start_service(service, ServerOptions::default());
    let addr = server.addr;
    assert_eq!(
        ask(addr, request(Method::Get, "/new", new_user("lin", "pw")))
            .status
            .code,
        StatusCode::OK
    );
    let writers: Vec<_> = (0..6)
        .map(|writer| {
            std::thread::spawn(move || {
                let mut client = crate::support::client(addr);
                (0..5)
                    .map(|n| {
                        let keys = new_post("alt.busy", &format!("{writer}-{n}"), "lin", "pw");
                        let answer = client.send(request(Method::Get, "/post", keys)).expect("answer");
                        assert_eq!(answer.response.status.code, StatusCode::OK, "{answer:?}");
                        answer.response.body.extra()["id"].as_i64().expect("id")
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut ids: Vec<i64> = writers
        .into_iter()
        .flat_map(|w| w.join().expect("writer"))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 30, "every post got its own id");
    let listed = ask(addr, request(Method::Get, "/list", list("alt.busy")));
    let posts = listed.body.extra()["nnntp"].as_array().expect("posts").clone();
    let listed_ids: Vec<i64> = posts.iter().map(|p| p["id"].as_i64().expect("id")).collect();
    assert_eq!(listed_ids, ids, "every post is listed, in order");
}
