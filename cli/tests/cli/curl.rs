//! curl's vocabulary where it means the same in jsontp: `-X`, `-d` and
//! `--data-binary` (a POST on `get`), `-T` (a PUT), `-i`, `-I`, `-O`, `-v`
//! with `>` and `<`; curl's flags that mean nothing here, said in one
//! line; and body keys sent with `--key` and shown.
#![allow(clippy::disallowed_methods)] // the tests own their threads

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crate::support::{BIN, Served, jsontp, stderr, stdout, temp_root};

#[test]
fn data_on_get_posts_upload_file_puts_and_x_names_the_method() {
    let server = Served::start("curl-methods");
    // -d on a plain request is a POST, as in curl; the file server
    // answers a POST with the file (D11).
    for flag in ["-d", "--data-binary"] {
        let post = jsontp(&["get", &server.url("/hello.txt"), flag, "a=1", "-v"]);
        assert_eq!(post.status.code(), Some(0), "{}", stderr(&post));
        assert_eq!(stdout(&post), "Hello, world!");
        assert!(
            stderr(&post).contains("> jsontp 1.0 POST /hello.txt"),
            "{flag}: {}",
            stderr(&post)
        );
    }
    // -T FILE is a PUT of that file.
    let source = server.root.join("source.txt");
    std::fs::write(&source, "uploaded with -T").expect("source");
    let put = jsontp(&["get", &server.url("/t.txt"), "-T", &source.to_string_lossy()]);
    assert_eq!(put.status.code(), Some(0), "{}", stderr(&put));
    assert_eq!(
        std::fs::read_to_string(server.root.join("t.txt")).expect("written"),
        "uploaded with -T"
    );
    // -X wins over the command's method, in any case.
    let delete = jsontp(&["get", &server.url("/t.txt"), "-X", "delete"]);
    assert_eq!(delete.status.code(), Some(0), "{}", stderr(&delete));
    assert!(!server.root.join("t.txt").exists());
    let unknown = jsontp(&["get", &server.url("/hello.txt"), "--request", "PATCH"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert_eq!(
        stderr(&unknown),
        "jsontp: -X PATCH: jsontp has the methods GET, POST, PUT, DELETE and OPTIONS\n"
    );
}

#[test]
fn include_head_and_verbose_show_the_envelopes_as_curl_does() {
    let server = Served::start("curl-envelope");
    let include = jsontp(&["get", &server.url("/hello.txt"), "-i"]);
    assert_eq!(include.status.code(), Some(0), "{}", stderr(&include));
    let out = stdout(&include);
    assert!(out.starts_with("jsontp 1.0 200 OK ("), "{out}");
    assert!(out.contains("\nlanguage: en-US\n"), "{out}");
    assert!(
        out.ends_with("\n\nHello, world!"),
        "envelope, blank line, content: {out}"
    );

    let head = jsontp(&["get", &server.url("/hello.txt"), "--head"]);
    assert_eq!(head.status.code(), Some(0), "{}", stderr(&head));
    let out = stdout(&head);
    assert!(out.starts_with("jsontp 1.0 200 OK ("), "{out}");
    assert!(!out.contains("Hello, world!"), "no content: {out}");

    let verbose = jsontp(&["get", &server.url("/hello.txt"), "-v"]);
    let err = stderr(&verbose);
    let request = err.find("> jsontp 1.0 GET /hello.txt").expect(&err);
    let response = err.find("< jsontp 1.0 200 OK").expect(&err);
    assert!(request < response, "{err}");
    assert!(err.contains("> accept-encoding: "), "{err}");
    assert_eq!(stdout(&verbose), "Hello, world!");
}

#[test]
fn remote_name_saves_under_the_urls_last_segment() {
    let server = Served::start("curl-remote-name");
    let here = temp_root("curl-remote-name-cwd");
    std::fs::remove_file(here.join("hello.txt")).expect("an empty folder");
    let out = Command::new(BIN)
        .args(["get", &server.url("/hello.txt?x=1"), "-O", "--timeout", "10"])
        .current_dir(&here)
        .output()
        .expect("run jsontp");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert_eq!(
        std::fs::read_to_string(here.join("hello.txt")).expect("saved"),
        "Hello, world!"
    );
    let folder = jsontp(&["get", &server.url("/"), "-O"]);
    assert_eq!(folder.status.code(), Some(2));
    assert!(stderr(&folder).contains("give -o FILE"), "{}", stderr(&folder));
    let _ = std::fs::remove_dir_all(&here);
}

#[test]
fn curl_flags_without_a_meaning_here_say_so_in_one_line() {
    let server = Served::start("curl-foreign");
    for (args, said) in [
        (&["-F", "a=b"][..], "-F/--form: jsontp has no multipart forms"),
        (&["--user", "ada:pw"][..], "-H 'authorization: TOKEN'"),
        (&["-x", "proxy:3128"][..], "-x/--proxy"),
        (&["-b", "a=1"][..], "-H 'cookies: name=value"),
        (&["-G"][..], "write the query in the URL"),
        (&["-r", "0-99"][..], "jsontp has no ranges"),
        (&["-C", "-"][..], "jsontp has no ranges"),
        (&["-c", "jar.txt"][..], "keeps no cookie jar"),
        (&["--http2"][..], "jsontp is not HTTP"),
    ] {
        let mut all = vec!["get", "URL"];
        let url = server.url("/hello.txt");
        all[1] = &url;
        all.extend_from_slice(args);
        let out = jsontp(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(said) && !err.contains("tip:"), "{args:?}: {err}");
    }
    // What changes nothing here works, with a note (none with -s).
    let out = jsontp(&["get", &server.url("/hello.txt"), "-L", "--compressed", "-f"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Hello, world!");
    assert!(
        stderr(&out).contains("-L: jsontp has no redirects"),
        "{}",
        stderr(&out)
    );
    let out = jsontp(&["get", &server.url("/hello.txt"), "-fsSL"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    // curl's --max-time is the timeout.
    let out = std::process::Command::new(BIN)
        .args(["get", &server.url("/hello.txt"), "--max-time", "5"])
        .output()
        .expect("run jsontp");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A peer that answers one request with `body` as its extra body keys,
/// and hands over the request it read.
fn keys_peer(keys: serde_json::Value) -> (String, mpsc::Receiver<serde_json::Value>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (sent, received) = mpsc::channel();
    thread::spawn(move || {
        let Ok((stream, _)) = listener.accept() else {
            return;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() {
            return;
        }
        let request: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        let mut body = serde_json::json!({"content": "", "encoding": "identity"});
        if let (Some(body), Some(keys)) = (body.as_object_mut(), keys.as_object()) {
            body.extend(keys.clone());
        }
        let response = serde_json::json!({
            "jsontp": "1.0", "type": "response",
            "status": {"code": 200, "formal-message": "OK", "human-message": "listed"},
            "resource": request["resource"],
            "headers": {"date": "2026-11-22T01:58:36Z+0000", "language": "en-US"},
            "body": body,
        });
        let _ = sent.send(request);
        let mut stream = reader.into_inner();
        let _ = stream.write_all(format!("{response}\n").as_bytes());
    });
    (addr.to_string(), received)
}

#[test]
fn body_keys_are_sent_as_json_and_the_answers_are_shown() {
    let posts = serde_json::json!({"nnntp": [{"id": 1, "subject": "hello"}]});
    let (addr, request) = keys_peer(posts.clone());
    let out = jsontp(&[
        "get",
        &format!("{addr}/list"),
        "--key",
        r#"nnntp={"type":"list","group":"comp.lang.rust"}"#,
        "--key",
        "page=2",
        "--key",
        "note=not json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let request = request.recv_timeout(Duration::from_secs(5)).expect("the request");
    assert_eq!(request["method"], "GET");
    assert_eq!(
        request["body"]["nnntp"],
        serde_json::json!({"type": "list", "group": "comp.lang.rust"})
    );
    assert_eq!(request["body"]["page"], 2);
    assert_eq!(request["body"]["note"], "not json");
    // The answer is its body keys: printed as JSON, one line.
    assert_eq!(stdout(&out), format!("{posts}\n"));

    for (arg, said) in [
        ("nnntp", "name=JSON"),
        ("content=x", "--key content"),
        ("a=null", "--key a"),
    ] {
        let out = jsontp(&["get", "127.0.0.1:9/x", "--key", arg]);
        assert_eq!(out.status.code(), Some(2), "{arg}");
        assert!(stderr(&out).contains(said), "{arg}: {}", stderr(&out));
    }
}

#[test]
fn a_header_outside_the_list_is_sent_as_written_beside_ignore_invalid_headers() {
    let (addr, request) = keys_peer(serde_json::json!({}));
    let out = jsontp(&[
        "get",
        &format!("{addr}/x"),
        "-H",
        "X-Trace: abc-123",
        "-H",
        "x-meta={\"a\":1}",
        "-H",
        "ignore-invalid-headers: true",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let request = request.recv_timeout(Duration::from_secs(5)).expect("the request");
    assert_eq!(request["headers"]["x-trace"], "abc-123");
    assert_eq!(request["headers"]["x-meta"], serde_json::json!({"a": 1}));
    assert_eq!(request["headers"]["ignore-invalid-headers"], true);

    // Without it, the command says how to send it anyway.
    let refused = jsontp(&["get", &format!("{addr}/x"), "-H", "x-trace: abc"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("-H 'ignore-invalid-headers: true'"),
        "{}",
        stderr(&refused)
    );

    // A real server drops it, as D8 says, and answers.
    let server = Served::start("curl-unlisted");
    let out = jsontp(&[
        "get",
        &server.url("/hello.txt"),
        "-H",
        "x-trace: abc",
        "-H",
        "ignore-invalid-headers: true",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Hello, world!");
}
