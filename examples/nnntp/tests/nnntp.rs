//! The NNNTP example over TCP: the published crate's client against the
//! binary started with its one command, our client against the same
//! router on every runtime, behind tower's timeout layer on tokio; and its
//! bounds: the password pool, the per-address limits, the pages of
//! `/list`, posts stored once, the database waited for within a bound.
#![allow(clippy::disallowed_methods)] // tests own threads and the clock

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use jsontp_protocol::io_adapters::server::ServerOptions;
use jsontp_protocol::message::{Method, Response, StatusCode};
use serde_json::{Value, json};

use crate::support::{LIMIT, RUNTIMES, ask, request, start};

#[path = "../src/limits.rs"]
mod limits;
#[path = "../src/news.rs"]
#[allow(dead_code)]
mod news;
#[path = "../../../tests/common/on_tokio.rs"]
mod on_tokio;
#[path = "../src/passwords.rs"]
mod passwords;
mod support;

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

/// The example, started as its one command on a free port, and killed
/// when dropped.
struct Example {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `command` (the binary with its options but `--addr`) on a free
/// port, once it says where it listens; `dir` is kept until it is dropped.
fn launch(mut command: Command, dir: tempfile::TempDir) -> Example {
    let child = command
        .args(["--addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the example");
    let mut example = Example {
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        _dir: dir,
    };
    let line = first_line(example.child.stdout.take().expect("stdout"));
    example.addr = line
        .trim()
        .strip_prefix("nnntp: listening on ")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    example
}

/// The first line `from` gives, waited for within [`LIMIT`].
fn first_line(from: impl std::io::Read + Send + 'static) -> String {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(from).read_line(&mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(LIMIT).expect("a line from the example in time")
}

fn run_example() -> Example {
    let dir = tempfile::tempdir().expect("temporary folder");
    let mut command = Command::new(env!("CARGO_BIN_EXE_nnntp"));
    command
        .arg("--db")
        .arg(dir.path().join("news.db"))
        .stderr(Stdio::inherit());
    launch(command, dir)
}

#[test]
fn without_db_the_news_is_kept_in_the_users_data_folder_not_where_it_was_started() {
    /// `XDG_DATA_HOME` in a case.
    enum Xdg {
        Unset,
        /// This folder beneath the test's.
        Beneath(&'static str),
        /// This value as it is.
        Literally(&'static str),
    }
    // What is set, and where the news goes beneath the test's folder.
    let cases = [
        ("XDG_DATA_HOME", Xdg::Beneath("data"), true, "data/nnntp/news.db"),
        ("HOME alone", Xdg::Unset, true, "home/.local/share/nnntp/news.db"),
        (
            "a relative XDG_DATA_HOME, which the XDG rule ignores",
            Xdg::Literally("data"),
            true,
            "home/.local/share/nnntp/news.db",
        ),
        (
            "no home: the temporary folder",
            Xdg::Unset,
            false,
            "tmp/nnntp/news.db",
        ),
    ];
    for (case, xdg, home, expected) in cases {
        let dir = tempfile::tempdir().expect("temporary folder");
        let started_in = dir.path().join("checkout");
        std::fs::create_dir(&started_in).expect("the folder it starts in");
        let expected = dir.path().join(expected);
        let mut command = Command::new(env!("CARGO_BIN_EXE_nnntp"));
        command
            .current_dir(&started_in)
            .env("TMPDIR", dir.path().join("tmp"))
            .stderr(Stdio::piped());
        match xdg {
            Xdg::Unset => command.env_remove("XDG_DATA_HOME"),
            Xdg::Beneath(folder) => command.env("XDG_DATA_HOME", dir.path().join(folder)),
            Xdg::Literally(value) => command.env("XDG_DATA_HOME", value),
        };
        if home {
            command.env("HOME", dir.path().join("home"));
        } else {
            command.env_remove("HOME");
        }
        let mut example = launch(command, dir);
        let said = first_line(example.child.stderr.take().expect("stderr"));
        assert_eq!(
            said,
            format!("nnntp: news kept in {}\n", expected.display()),
            "{case}"
        );
        let created = ask(example.addr, request(Method::Post, "/new", new_user("ada", "pw")));
        assert_eq!(created.status.code, StatusCode::OK, "{case}: {created:?}");
        assert!(expected.is_file(), "{case}: no {}", expected.display());
        let left: Vec<_> = std::fs::read_dir(&started_in).expect("read").collect();
        assert!(left.is_empty(), "{case}: {left:?} left where it was started");
    }
}

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

#[test]
fn the_example_refuses_a_bound_it_cannot_keep_on_its_command_line() {
    let refused = Command::new(env!("CARGO_BIN_EXE_nnntp"))
        .args([
            "--addr",
            "127.0.0.1:0",
            "--db",
            "unused.db",
            "--hash-workers",
            "0",
        ])
        .output()
        .expect("run the example");
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.starts_with("nnntp: --hash-workers is \"0\"; it takes a whole number from 1 up\n"),
        "{stderr}"
    );
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
        let store = news::Store::open(&db, news::Settings::default()).expect("open");
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
        // The stated cost: 19 MiB, two passes, one lane.
        assert!(hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{hash}");
        assert!(!hash.contains("hopper"));
    }
}

#[test]
fn concurrent_posts_through_a_timeout_layer_are_never_lost() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let store = news::Store::open(&dir.path().join("news.db"), quick()).expect("open");
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

/// Bounds for the tests: the stated ones, with a hash that costs little
/// (the pool and its counts are what these tests look at, not Argon2).
fn quick() -> news::Settings {
    let mut settings = news::Settings::default();
    settings.passwords.cost = passwords::Cost {
        memory_kib: 64,
        passes: 1,
    };
    settings
}

/// A store on a fresh database, served on the std server (one thread per
/// connection, so requests run at once).
fn serve(settings: news::Settings) -> (news::Store, crate::support::Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temporary folder");
    let store = news::Store::open(&dir.path().join("news.db"), settings).expect("open");
    let server = start(RUNTIMES[0], news::router(store.clone()), ServerOptions::default());
    (store, server, dir)
}

fn status(addr: SocketAddr, resource: &str, keys: Value) -> Response {
    ask(addr, request(Method::Get, resource, keys))
}

#[test]
fn an_unknown_user_is_refused_after_the_same_password_check_as_a_wrong_password() {
    let (store, server, _dir) = serve(quick());
    let addr = server.addr;
    assert_eq!(
        status(addr, "/new", new_user("ada", "pw")).status.code,
        StatusCode::OK
    );
    let checked = || store.passwords().stats().verified;

    let before = checked();
    let unknown = status(addr, "/post", new_post("g", "s", "nobody", "pw"));
    assert_eq!(unknown.status.code, StatusCode::UNAUTHORIZED);
    assert_eq!(checked(), before + 1, "an unknown user's password is checked too");

    let before = checked();
    let wrong = status(addr, "/post", new_post("g", "s", "ada", "wrong"));
    assert_eq!(wrong.status.code, StatusCode::UNAUTHORIZED);
    assert_eq!(checked(), before + 1);
    assert_eq!(unknown.status.human_message, wrong.status.human_message);

    let before = checked();
    assert_eq!(
        status(addr, "/post", new_post("g", "s", "ada", "pw")).status.code,
        StatusCode::OK
    );
    assert_eq!(checked(), before + 1);
}

#[test]
fn password_checks_never_run_more_than_the_workers_at_once() {
    let mut settings = quick();
    // Each check long enough (milliseconds) for checks to overlap.
    settings.passwords.cost = passwords::Cost {
        memory_kib: 4 * 1024,
        passes: 4,
    };
    settings.passwords.workers = 2;
    settings.passwords.queue = 64;
    settings.failed_logins.at_most = 1_000;
    let (store, server, _dir) = serve(settings);
    let addr = server.addr;
    assert_eq!(
        status(addr, "/new", new_user("ada", "pw")).status.code,
        StatusCode::OK
    );
    let before = store.passwords().stats().verified;
    let start = std::sync::Arc::new(std::sync::Barrier::new(16));
    let clients: Vec<_> = (0..16)
        .map(|n| {
            let start = std::sync::Arc::clone(&start);
            std::thread::spawn(move || {
                let mut client = crate::support::client(addr);
                start.wait();
                for _ in 0..3 {
                    let keys = new_post("g", "s", if n % 2 == 0 { "ada" } else { "bob" }, "wrong");
                    let answer = client.send(request(Method::Get, "/post", keys)).expect("answer");
                    assert_eq!(
                        answer.response.status.code,
                        StatusCode::UNAUTHORIZED,
                        "{answer:?}"
                    );
                }
            })
        })
        .collect();
    for client in clients {
        client.join().expect("client");
    }
    let stats = store.passwords().stats();
    assert_eq!(stats.verified, before + 48, "every login was checked");
    assert!(
        (1..=2).contains(&stats.most_at_once),
        "{} hashes ran at once on a pool of 2",
        stats.most_at_once
    );
}

/// A cost that takes tenths of a second or more: long against a request
/// queued at the same time.
fn slow() -> passwords::Cost {
    passwords::Cost {
        memory_kib: 8 * 1024,
        passes: 40,
    }
}

#[test]
fn a_full_password_queue_refuses_at_once_with_nothing_done() {
    let mut settings = quick();
    settings.passwords = passwords::Settings {
        workers: 1,
        queue: 1,
        wait: Duration::from_secs(60),
        // Half a second or more a check: long against one request on loopback.
        cost: passwords::Cost {
            memory_kib: 8 * 1024,
            passes: 100,
        },
    };
    let (store, server, _dir) = serve(settings);
    let pool = store.passwords();
    // The one worker busy with a check (it is counted as it starts) and
    // the one place in the queue taken.
    let running = pool.start_verify("pw", None).expect("the first check");
    let started = std::time::Instant::now();
    while pool.stats().verified == 0 {
        assert!(started.elapsed() < LIMIT, "the worker never took the check");
        std::thread::sleep(Duration::from_millis(1));
    }
    let queued = pool.start_verify("pw", None).expect("the queue's place");
    assert!(
        matches!(pool.start_verify("pw", None), Err(passwords::Failed::Busy)),
        "a third check refused at once"
    );
    let refused = status(server.addr, "/post", new_post("g", "s", "ada", "pw"));
    assert_eq!(
        refused.status.code,
        StatusCode::SERVICE_UNAVAILABLE,
        "{refused:?}"
    );
    assert_eq!(
        refused.status.human_message,
        "the server is checking too many passwords at once: nothing was done; try again in a few seconds"
    );
    // Only the two held checks ever ran, and none counted as a failed login.
    assert_eq!(running.wait(), Ok(false), "the dummy hash never matches");
    assert_eq!(queued.wait(), Ok(false));
    assert_eq!(pool.stats().verified, 2);
}

#[test]
fn a_check_that_waits_past_its_bound_is_dropped_undone() {
    let settings = passwords::Settings {
        workers: 1,
        queue: 4,
        wait: Duration::from_millis(50),
        cost: slow(),
    };
    let pool = passwords::Passwords::start(settings).expect("pool");
    let first = pool.start_verify("pw", None).expect("queued");
    let second = pool.start_verify("pw", None).expect("queued");
    assert_eq!(first.wait(), Ok(false));
    // Taken after its 50 ms had passed: dropped, nothing checked.
    assert_eq!(second.wait(), Err(passwords::Failed::Busy));
    assert_eq!(pool.stats().verified, 1);
}

#[test]
fn sign_ups_and_failed_logins_past_their_limits_are_refused_429_with_when_to_try_again() {
    let mut settings = quick();
    settings.signups.at_most = 2;
    settings.failed_logins.at_most = 2;
    let (store, server, _dir) = serve(settings);
    let addr = server.addr;
    assert_eq!(
        status(addr, "/new", new_user("ada", "pw")).status.code,
        StatusCode::OK
    );
    assert_eq!(
        status(addr, "/new", new_user("ada", "pw")).status.code,
        StatusCode::BAD_REQUEST
    );
    let third = status(addr, "/new", new_user("bob", "pw"));
    assert_eq!(third.status.code, StatusCode::TOO_MANY_REQUESTS, "{third:?}");
    let wait = third.body.extra()["retry-after"].as_u64().expect("retry-after");
    assert!((3590..=3600).contains(&wait), "{wait}");
    assert_eq!(
        third.status.human_message,
        format!("too many sign-ups from your address; try again in {wait} s")
    );

    // Logins that succeed do not count; failures do, and past the limit
    // even the right password is refused before any check.
    for _ in 0..3 {
        assert_eq!(
            status(addr, "/post", new_post("g", "s", "ada", "pw")).status.code,
            StatusCode::OK
        );
    }
    for _ in 0..2 {
        let wrong = status(addr, "/post", new_post("g", "s", "ada", "wrong"));
        assert_eq!(wrong.status.code, StatusCode::UNAUTHORIZED);
    }
    let checked = store.passwords().stats().verified;
    let blocked = status(addr, "/post", new_post("g", "s", "ada", "pw"));
    assert_eq!(blocked.status.code, StatusCode::TOO_MANY_REQUESTS, "{blocked:?}");
    assert!(
        blocked
            .status
            .human_message
            .starts_with("too many failed logins from your address; try again in "),
        "{}",
        blocked.status.human_message
    );
    assert_eq!(
        store.passwords().stats().verified,
        checked,
        "refused before any work"
    );
}

#[test]
fn the_per_address_table_is_bounded_and_forgets_windows_that_passed() {
    use std::net::{IpAddr, Ipv4Addr};
    let rate = limits::Rate {
        at_most: 2,
        per: Duration::from_secs(60),
    };
    let table = limits::PerPeer::new(rate, 8);
    let t0 = std::time::Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let v4 = |n: u32| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n));

    // A full window refuses, saying how long until it ends; then a new one.
    assert_eq!(table.take(v4(1), at(0)), Ok(()));
    assert_eq!(table.take(v4(1), at(10)), Ok(()));
    assert_eq!(table.take(v4(1), at(30)), Err(Duration::from_secs(30)));
    table.give_back(v4(1));
    assert_eq!(table.take(v4(1), at(31)), Ok(()));
    assert_eq!(table.take(v4(1), at(59)), Err(Duration::from_secs(1)));
    assert_eq!(table.take(v4(1), at(60)), Ok(()));

    // A thousand addresses at once: the table holds eight, the oldest
    // window forgotten first.
    for n in 0..1_000 {
        assert_eq!(table.take(v4(100 + n), at(61 + u64::from(n) / 100)), Ok(()));
        assert!(table.len() <= 8, "{} addresses held", table.len());
    }
    assert_eq!(table.len(), 8);
    // Windows that passed are forgotten before live ones.
    assert_eq!(table.take(v4(5_000), at(1_000)), Ok(()));
    assert_eq!(table.len(), 1);

    // IPv6 by its /64; an IPv4-mapped address as its IPv4 one.
    let v6 = |s: &str| s.parse::<IpAddr>().expect("address");
    assert_eq!(table.take(v6("2001:db8::1"), at(2_000)), Ok(()));
    assert_eq!(table.take(v6("2001:db8::ffff:2"), at(2_000)), Ok(()));
    assert!(table.take(v6("2001:db8::3"), at(2_000)).is_err());
    assert_eq!(table.take(v6("2001:db8:0:1::1"), at(2_000)), Ok(()));
    assert_eq!(table.take(v6("::ffff:10.0.19.136"), at(2_000)), Ok(()));
    assert_eq!(table.take(v4(5_000), at(2_000)), Ok(()));
    assert!(
        table.take(v4(5_000), at(2_000)).is_err(),
        "10.0.19.136 twice already"
    );
}

fn listed(answer: &Response) -> (Vec<i64>, Option<i64>) {
    let posts = answer.body.extra()["nnntp"].as_array().expect("posts");
    let ids = posts.iter().map(|p| p["id"].as_i64().expect("id")).collect();
    (
        ids,
        answer.body.extra().get("next").map(|n| n.as_i64().expect("next")),
    )
}

fn page(group: &str, after: Option<Value>, limit: Option<u32>) -> Value {
    let mut keys = json!({"type": "list", "group": group});
    if let Some(after) = after {
        keys["after"] = after;
    }
    if let Some(limit) = limit {
        keys["limit"] = json!(limit);
    }
    json!({ "nnntp": keys })
}

#[test]
fn list_answers_pages_by_count_and_by_bytes_with_a_cursor() {
    let stated = news::Paging::default();
    assert_eq!((stated.default, stated.max, stated.bytes), (50, 200, 1 << 20));
    let mut settings = quick();
    settings.paging.bytes = 32 * 1024;
    let (_store, server, dir) = serve(settings);
    let addr = server.addr;
    {
        let db = rusqlite::Connection::open(dir.path().join("news.db")).expect("database");
        db.execute_batch("BEGIN; INSERT INTO users VALUES ('ada', 'x');")
            .expect("user");
        for n in 0..130 {
            db.execute(
                "INSERT INTO posts (group_name, subject, body, author) VALUES ('small', ?1, 'short', 'ada')",
                [format!("post {n}")],
            )
            .expect("post");
        }
        for size in [10_000, 10_000, 10_000, 10_000, 40_000, 10] {
            db.execute(
                "INSERT INTO posts (group_name, subject, body, author) VALUES ('large', 's', ?1, 'ada')",
                ["x".repeat(size)],
            )
            .expect("post");
        }
        db.execute_batch("COMMIT;").expect("commit");
    }

    let first = status(addr, "/list", page("small", None, None));
    let (ids, next) = listed(&first);
    assert_eq!(ids, (1..=50).collect::<Vec<_>>(), "50 by default");
    assert_eq!(next, Some(50));
    let rest = status(addr, "/list", page("small", Some(json!(50)), Some(200)));
    let (ids, next) = listed(&rest);
    assert_eq!(ids, (51..=130).collect::<Vec<_>>());
    assert_eq!(next, None, "the last page has no next");
    let exact = status(addr, "/list", page("small", Some(json!("120")), Some(10)));
    assert_eq!(listed(&exact), ((121..=130).collect(), None));
    for limit in [0, 201] {
        let refused = status(addr, "/list", page("small", None, Some(limit)));
        assert_eq!(refused.status.code, StatusCode::BAD_REQUEST);
        assert_eq!(
            refused.status.human_message,
            format!("body key `nnntp.limit` is {limit}; a page holds 1 to 200 posts")
        );
    }

    // Three posts of 10,000 bytes fit 32 KiB, a fourth would not; a post
    // larger than the bound is a page of its own.
    let mut pages = Vec::new();
    let mut after = None;
    loop {
        let answer = status(addr, "/list", page("large", after.map(|a| json!(a)), None));
        let posts = answer.body.extra()["nnntp"].as_array().expect("posts");
        let bytes: usize = posts.iter().map(|p| p.to_string().len()).sum();
        let (ids, next) = listed(&answer);
        assert!(ids.len() == 1 || bytes <= 32 * 1024, "{bytes} bytes in {ids:?}");
        pages.push(ids);
        match next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, [vec![131, 132, 133], vec![134], vec![135], vec![136]]);
}

#[test]
fn a_post_sent_again_with_its_token_is_stored_once() {
    let (_store, server, dir) = serve(quick());
    let addr = server.addr;
    for user in ["ada", "bob"] {
        assert_eq!(
            status(addr, "/new", new_user(user, "pw")).status.code,
            StatusCode::OK
        );
    }
    let with_token = |user: &str, subject: &str, token: &str| {
        let mut keys = new_post("g", subject, user, "pw");
        keys["nnntp"]["token"] = json!(token);
        keys
    };
    let id = |answer: Response| {
        assert_eq!(answer.status.code, StatusCode::OK, "{answer:?}");
        answer.body.extra()["id"].as_i64().expect("id")
    };
    let first = id(status(addr, "/post", with_token("ada", "hello", "t-1")));
    let again = id(status(addr, "/post", with_token("ada", "hello", "t-1")));
    assert_eq!(again, first, "the retry answers the id stored the first time");
    let other = status(addr, "/post", with_token("ada", "changed", "t-1"));
    assert_eq!(other.status.code, StatusCode::CONFLICT);
    assert_eq!(
        other.status.human_message,
        format!(
            "body key `nnntp.token` names your post {first}, which has other text: a new post needs a new token"
        )
    );
    let bobs = id(status(addr, "/post", with_token("bob", "hello", "t-1")));
    assert_ne!(bobs, first, "a token is its author's own");

    let comment = json!({"nnntp": {"type": "comment", "parent": {"id": first}, "comment": {"body": "+1"},
                                   "author": {"username": "bob", "password": "pw"}, "token": "c-1"}});
    let reply = id(status(addr, "/comment", comment.clone()));
    assert_eq!(id(status(addr, "/comment", comment)), reply);

    let untokened = id(status(addr, "/post", new_post("g", "hello", "ada", "pw")));
    assert_ne!(
        id(status(addr, "/post", new_post("g", "hello", "ada", "pw"))),
        untokened
    );
    let mut empty = new_post("g", "s", "ada", "pw");
    empty["nnntp"]["token"] = json!("");
    assert_eq!(
        status(addr, "/post", empty).status.human_message,
        "body key `nnntp.token` is empty"
    );

    let db = rusqlite::Connection::open(dir.path().join("news.db")).expect("database");
    let stored: i64 = db
        .query_row("SELECT COUNT(*) FROM posts", [], |row| row.get(0))
        .expect("count");
    assert_eq!(
        stored, 5,
        "ada's hello, bob's hello, bob's reply, two without a token"
    );
}

#[test]
fn a_post_that_cannot_get_the_database_in_time_is_refused_before_anything_is_stored() {
    let mut settings = quick();
    settings.db_wait = Duration::from_millis(300);
    let dir = tempfile::tempdir().expect("temporary folder");
    let path = dir.path().join("news.db");
    let store = news::Store::open(&path, settings).expect("open");
    // The example's layers, with a shorter time limit (still ten times the
    // database's bound).
    let service = tower::ServiceBuilder::new()
        .timeout(Duration::from_secs(3))
        .concurrency_limit(64)
        .service(news::router(store));
    let server = crate::support::start_service(service, ServerOptions::default());
    let addr = server.addr;
    assert_eq!(
        status(addr, "/new", new_user("lin", "pw")).status.code,
        StatusCode::OK
    );

    // Another process writing: the database is locked past the time limit.
    let other = rusqlite::Connection::open(&path).expect("database");
    other.execute_batch("BEGIN IMMEDIATE;").expect("lock");
    let posts: Vec<_> = (0..3)
        .map(|n| {
            std::thread::spawn(move || {
                status(addr, "/post", new_post("alt.busy", &n.to_string(), "lin", "pw"))
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(4));
    other.execute_batch("ROLLBACK;").expect("unlock");
    for post in posts {
        let answer = post.join().expect("post");
        assert_eq!(answer.status.code, StatusCode::SERVICE_UNAVAILABLE, "{answer:?}");
        assert_eq!(
            answer.status.human_message,
            "the database is busy: nothing was stored; try again in a few seconds"
        );
    }
    // Whatever was still running has had its chance to store.
    std::thread::sleep(Duration::from_millis(500));
    let stored: i64 = other
        .query_row("SELECT COUNT(*) FROM posts", [], |row| row.get(0))
        .expect("count");
    assert_eq!(stored, 0, "a post answered 503 was stored");
}
