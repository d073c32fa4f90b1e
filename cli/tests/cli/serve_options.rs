//! `jsontp serve`'s options as a new user meets them: read-only by default,
//! `--writable`, the token's three sources, `JSONTP_*` variables, the
//! `--addr` forms, `--max-connections` and `--list`; each run against
//! loopback and bounded in time.
#![allow(clippy::disallowed_methods)] // the tests own their threads

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{SERVE_ENV, Serve, serve_command, spawn_serve_with_env, temp_root};

/// One request on its own connection; the response, parsed.
fn exchange(addr: SocketAddr, method: &str, resource: &str, headers: Value, content: &str) -> Value {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let request = json!({
        "jsontp": "1.0", "type": "request", "resource": resource, "method": method,
        "headers": headers, "body": {"content": content, "encoding": "identity"}
    });
    stream
        .write_all(format!("{request}\n").as_bytes())
        .expect("write");
    stream.shutdown(std::net::Shutdown::Write).expect("half close");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("response then close");
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("one JSON response ({e}): {text:?}"))
}

fn put(addr: SocketAddr, resource: &str, headers: Value) -> Value {
    exchange(addr, "PUT", resource, headers, "written")
}

fn code(response: &Value) -> u64 {
    response["status"]["code"].as_u64().expect("a status code")
}

/// Runs `jsontp serve ARGS` that is expected to stop at once (a usage or
/// start error); killed after 10 s if it does not.
fn serve_fails(args: &[&str], env: &[(&str, &str)]) -> Output {
    let child = serve_command(args, env)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start jsontp serve");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(output) => output.expect("jsontp serve output"),
        Err(_) => {
            let _ = std::process::Command::new("kill").arg(pid.to_string()).status();
            panic!("jsontp serve {args:?} kept running");
        }
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A server that must start, its stderr drained on a thread; stopped when
/// the returned guard drops.
fn start(root: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> (Serve, SocketAddr) {
    let (server, addr, mut log) = spawn_serve_with_env(root, args, env);
    std::thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
    (server, addr)
}

#[test]
fn d11_read_only_by_default_writes_answer_405() {
    let root = temp_root("read-only");
    let (_server, addr) = start(&root, &["--quiet"], &[]);
    let refused = put(addr, "/new.txt", json!({}));
    assert_eq!(code(&refused), 405, "{refused}");
    assert_eq!(refused["body"]["allowed-methods"], json!(["OPTIONS"]));
    assert!(!root.join("new.txt").exists());
    let delete = exchange(addr, "DELETE", "/hello.txt", json!({}), "");
    assert_eq!(code(&delete), 405);
    assert_eq!(
        delete["body"]["allowed-methods"],
        json!(["GET", "POST", "OPTIONS"])
    );
    assert!(root.join("hello.txt").exists());
    let options = exchange(addr, "OPTIONS", "/hello.txt", json!({}), "");
    assert_eq!(
        options["body"]["allowed-methods"],
        json!(["GET", "POST", "OPTIONS"])
    );
    let missing = exchange(addr, "OPTIONS", "/missing.txt", json!({}), "");
    assert_eq!(missing["body"]["allowed-methods"], json!(["OPTIONS"]));
    assert_eq!(code(&exchange(addr, "GET", "/hello.txt", json!({}), "")), 200);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn writable_serves_put_and_delete_to_anyone() {
    let root = temp_root("writable");
    let (_server, addr) = start(&root, &["--quiet", "--writable"], &[]);
    assert_eq!(code(&put(addr, "/new.txt", json!({}))), 201);
    assert_eq!(
        std::fs::read_to_string(root.join("new.txt")).expect("written"),
        "written"
    );
    let options = exchange(addr, "OPTIONS", "/missing.txt", json!({}), "");
    assert_eq!(options["body"]["allowed-methods"], json!(["PUT", "OPTIONS"]));
    assert_eq!(code(&exchange(addr, "DELETE", "/new.txt", json!({}), "")), 204);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn the_start_line_says_whether_writes_are_served() {
    let root = temp_root("mode");
    for (args, env, mode) in [
        (&[][..], &[][..], "(read-only)"),
        (&["--writable"], &[], "(writable by anyone)"),
        (&[], &[("JSONTP_TOKEN", "s3cret")], "(writable with the token)"),
    ] {
        let mut command = serve_command(&["--addr", "127.0.0.1:0", "--root"], env);
        command.arg(&root).args(args).stderr(std::process::Stdio::piped());
        let mut child = Serve(command.spawn().expect("start"));
        let mut line = String::new();
        let stderr = child.0.stderr.take().expect("piped stderr");
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stderr), &mut line).expect("start line");
        assert!(line.contains(mode), "{mode}: {line:?}");
    }
    let _ = std::fs::remove_dir_all(root);
}

/// D14: with a token, writes are served to the requests that carry it and
/// to no others, without `--writable`.
fn check_token_guards_writes(addr: SocketAddr, root: &std::path::Path, token: &str) {
    let anonymous = put(addr, "/guarded.txt", json!({}));
    assert_eq!(code(&anonymous), 401, "{anonymous}");
    let wrong = put(addr, "/guarded.txt", json!({"authorization": "nope"}));
    assert_eq!(code(&wrong), 401);
    assert!(!root.join("guarded.txt").exists());
    let holder = put(addr, "/guarded.txt", json!({"authorization": token}));
    assert_eq!(code(&holder), 201, "{holder}");
    assert_eq!(code(&exchange(addr, "GET", "/guarded.txt", json!({}), "")), 200);
}

#[test]
fn d14_a_token_opens_writes_to_its_holders_from_any_source() {
    let root = temp_root("token-flag");
    let (server, addr) = start(&root, &["--quiet", "--token", "s3cret"], &[]);
    check_token_guards_writes(addr, &root, "s3cret");
    drop(server);

    let root = temp_root("token-env");
    let (server, addr) = start(&root, &["--quiet"], &[("JSONTP_TOKEN", "from-env")]);
    check_token_guards_writes(addr, &root, "from-env");
    drop(server);

    // The file's first line, its line ending trimmed (CRLF too); the rest
    // is not part of the token.
    let root = temp_root("token-file");
    let file = root.join("token.secret");
    std::fs::write(&file, "from-file\r\nsecond line\n").expect("token file");
    let path = file.to_string_lossy().into_owned();
    let (server, addr) = start(&root, &["--quiet", "--token-file", &path], &[]);
    check_token_guards_writes(addr, &root, "from-file");
    let with_newline = put(addr, "/x.txt", json!({"authorization": "from-file\r\n"}));
    assert_eq!(code(&with_newline), 401);
    drop(server);

    let (server, addr) = start(&root, &["--quiet"], &[("JSONTP_TOKEN_FILE", &path)]);
    assert_eq!(
        code(&put(addr, "/y.txt", json!({"authorization": "from-file"}))),
        201
    );
    drop(server);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn two_token_sources_are_a_usage_error() {
    let file = temp_root("token-conflict").join("hello.txt");
    let file = file.to_string_lossy().into_owned();
    let base = ["--addr", "127.0.0.1:0", "--root", "."];
    /// Arguments, variables, and the two sources the error must name.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], [&'a str; 2]);
    let cases: [Case; 5] = [
        (
            &["--token", "a", "--token-file", &file],
            &[],
            ["--token", "--token-file"],
        ),
        (
            &["--token", "a"],
            &[("JSONTP_TOKEN", "b")],
            ["--token", "JSONTP_TOKEN"],
        ),
        // The same value twice is still two sources.
        (
            &["--token", "a"],
            &[("JSONTP_TOKEN", "a")],
            ["--token", "JSONTP_TOKEN"],
        ),
        (
            &["--token-file", &file],
            &[("JSONTP_TOKEN", "b")],
            ["JSONTP_TOKEN", "--token-file"],
        ),
        (
            &[],
            &[("JSONTP_TOKEN", "b"), ("JSONTP_TOKEN_FILE", &file)],
            ["JSONTP_TOKEN", "JSONTP_TOKEN_FILE"],
        ),
    ];
    for (args, env, named) in cases {
        let all: Vec<&str> = base.iter().chain(args).copied().collect();
        let out = serve_fails(&all, env);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {}", stderr(&out));
        let text = stderr(&out);
        assert!(text.contains("the token is given 2 ways"), "{text}");
        for name in named {
            assert!(text.contains(name), "{name}: {text}");
        }
        assert!(text.contains("Usage: jsontp serve"), "{text}");
        // Not a word about the token's value.
        assert!(!text.contains("\"a\"") && !text.contains(" b "), "{text}");
    }
}

#[test]
fn an_empty_or_unreadable_token_does_not_start_a_server() {
    let root = temp_root("token-bad");
    let empty = root.join("empty.secret");
    std::fs::write(&empty, "\nsecond line\n").expect("token file");
    let root_arg = root.to_string_lossy().into_owned();
    let base = ["--addr", "127.0.0.1:0", "--root", &root_arg];
    fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        base.iter().chain(extra).copied().collect()
    }
    // An empty token is a usage error, wherever it comes from.
    let out = serve_fails(&with(&base, &["--token", ""]), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = serve_fails(&base, &[("JSONTP_TOKEN", "")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // A file without a token in it, or no file: one line, exit 1.
    for file in [empty.clone(), root.join("missing.secret")] {
        let out = serve_fails(&with(&base, &["--token-file", &file.to_string_lossy()]), &[]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let text = stderr(&out);
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.contains("cannot read the token from"), "{text}");
        assert!(text.contains(&*file.to_string_lossy()), "{text}");
    }
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn every_option_reads_an_environment_variable_named_in_help() {
    let out = serve_command(&["--help"], &[]).output().expect("run");
    let help = String::from_utf8_lossy(&out.stdout);
    for name in SERVE_ENV {
        assert!(help.contains(&format!("[env: {name}")), "{name}:\n{help}");
    }
    // The token's value is never shown.
    let out = serve_command(&["--help"], &[("JSONTP_TOKEN", "hunter2")])
        .output()
        .expect("run");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("hunter2"));
}

#[test]
fn options_from_the_environment_take_effect() {
    let root = temp_root("env");
    std::fs::create_dir(root.join("folder")).expect("folder");
    let root_arg = root.to_string_lossy().into_owned();
    let env = [
        ("JSONTP_ROOT", root_arg.as_str()),
        ("JSONTP_ADDR", "127.0.0.1:0"),
        ("JSONTP_WRITABLE", "1"),
        ("JSONTP_LIST", "yes"),
        ("JSONTP_LANGUAGE", "fr-FR,en-US"),
        ("JSONTP_QUIET", "true"),
        ("JSONTP_MAX_CONNECTIONS", "50"),
        ("JSONTP_NO_CONTINUE", "on"),
    ];
    // spawn_serve_with_env adds only `--workers 1`: the rest comes from
    // the variables.
    let (_server, addr) = start(&root, &[], &env);
    let get = exchange(addr, "GET", "/hello.txt", json!({}), "");
    assert_eq!(get["headers"]["language"], "fr-FR", "{get}");
    assert_eq!(code(&put(addr, "/new.txt", json!({}))), 201);
    let listed = exchange(addr, "GET", "/folder/", json!({}), "");
    assert_eq!(code(&listed), 200, "{listed}");
    assert_eq!(listed["body"]["content"], "[]\n");
    let handshake = exchange(addr, "PUT", "/c.txt", json!({"expect": "100-continue"}), "x");
    assert_eq!(code(&handshake), 501, "{handshake}");
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn false_values_turn_a_flag_off() {
    let root = temp_root("env-off");
    let env = [("JSONTP_WRITABLE", "false"), ("JSONTP_LIST", "0")];
    let (_server, addr) = start(&root, &["--quiet"], &env);
    assert_eq!(code(&put(addr, "/new.txt", json!({}))), 405);
    std::fs::create_dir(root.join("folder")).expect("folder");
    assert_eq!(code(&exchange(addr, "GET", "/folder/", json!({}), "")), 404);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn the_command_line_wins_over_the_environment() {
    let root = temp_root("env-loses");
    let (_server, addr) = start(
        &root,
        &["--quiet", "--language", "de-DE"],
        &[("JSONTP_LANGUAGE", "fr-FR")],
    );
    let get = exchange(addr, "GET", "/hello.txt", json!({}), "");
    assert_eq!(get["headers"]["language"], "de-DE", "{get}");
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn addr_takes_a_bare_port_a_host_name_or_brackets() {
    let root = temp_root("addr");
    for (given, host) in [
        ("0", "127.0.0.1"),
        ("localhost:0", ""),
        ("127.0.0.1:0", "127.0.0.1"),
    ] {
        let (server, addr) = start(&root, &["--quiet"], &[("JSONTP_ADDR", given)]);
        if !host.is_empty() {
            assert_eq!(addr.ip().to_string(), host, "{given}");
        }
        assert!(addr.ip().is_loopback(), "{given}: {addr}");
        assert_eq!(
            code(&exchange(addr, "GET", "/hello.txt", json!({}), "")),
            200,
            "{given}"
        );
        drop(server);
    }
    // IPv6, where the machine has it.
    if std::net::TcpListener::bind("[::1]:0").is_ok() {
        let (_server, addr) = start(&root, &["--quiet"], &[("JSONTP_ADDR", "[::1]:0")]);
        assert_eq!(addr.to_string().split(']').next(), Some("[::1"), "{addr}");
        assert_eq!(code(&exchange(addr, "GET", "/hello.txt", json!({}), "")), 200);
    }
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_bad_addr_is_a_usage_error_that_shows_the_forms() {
    for bad in [
        "::1",
        "localhost:port",
        "70000",
        "jsontp://localhost",
        "a b:80",
        "[::1",
    ] {
        let out = serve_fails(&["--root", ".", "--addr", bad], &[]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        let text = stderr(&out);
        assert!(text.contains("--addr"), "{text}");
        assert!(
            text.contains("HOST:PORT, HOST (port 8080), PORT (on 127.0.0.1) or [IPV6]:PORT"),
            "{text}"
        );
    }
}

#[test]
fn max_connections_is_checked_before_starting() {
    for bad in ["0", "-3", "lots", ""] {
        let option = format!("--max-connections={bad}");
        let out = serve_fails(&["--root", ".", "--addr", "127.0.0.1:0", &option], &[]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        assert!(stderr(&out).contains("--max-connections"), "{}", stderr(&out));
    }
    let root = temp_root("max-connections");
    let (_server, addr) = start(&root, &["--quiet", "--max-connections", "1"], &[]);
    assert_eq!(code(&exchange(addr, "GET", "/hello.txt", json!({}), "")), 200);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn d11_list_answers_a_folder_listing_instead_of_404() {
    let root = temp_root("list");
    std::fs::create_dir(root.join("folder")).expect("folder");
    std::fs::write(root.join("folder/b.json"), "{}").expect("write");
    std::fs::create_dir(root.join("folder/a")).expect("folder");
    let (server, addr) = start(&root, &["--quiet"], &[]);
    assert_eq!(code(&exchange(addr, "GET", "/folder/", json!({}), "")), 404);
    drop(server);
    let (_server, addr) = start(&root, &["--quiet", "--list"], &[]);
    let listed = exchange(addr, "GET", "/folder", json!({}), "");
    assert_eq!(code(&listed), 200, "{listed}");
    assert_eq!(listed["headers"]["content-type"], "application/json");
    let content = listed["body"]["content"].as_str().expect("text content");
    let entries: Value = serde_json::from_str(content).expect("a JSON array");
    assert_eq!(entries[0]["name"], "a");
    assert_eq!(entries[0]["is-folder"], true);
    assert_eq!(entries[1]["name"], "b.json");
    assert_eq!(entries[1]["size"], 2);
    assert_eq!(entries.as_array().map(Vec::len), Some(2));
    let _ = std::fs::remove_dir_all(root);
}
