//! What a curl user types, and what it should do: `-o`, `--data @FILE`,
//! `--file -`, `-H 'name: value'`, `-s`, `-w`, a wrong peer, and binary
//! content meeting a terminal.

use std::process::Command;

use crate::support::{
    BIN, Served, binary, jsontp, jsontp_with_stdin, one_answer_peer, stderr, stdout, temp_root,
};

#[test]
fn output_writes_the_content_to_a_file_and_leaves_it_alone_on_an_error() {
    let server = Served::start("output");
    let saved = server.root.join("saved.txt");
    let saved_arg = saved.to_string_lossy().into_owned();
    for flag in ["-o", "--output"] {
        let _ = std::fs::remove_file(&saved);
        let out = jsontp(&["get", &server.url("/hello.txt"), flag, &saved_arg]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(out.stdout.is_empty(), "{flag}: nothing on stdout");
        assert_eq!(std::fs::read_to_string(&saved).expect("saved"), "Hello, world!");
    }
    // A 404 does not empty the file that is there.
    let missing = jsontp(&["get", &server.url("/nope.txt"), "-o", &saved_arg]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).starts_with("jsontp: 404 Not Found"),
        "{}",
        stderr(&missing)
    );
    assert_eq!(std::fs::read_to_string(&saved).expect("kept"), "Hello, world!");
    // A file that cannot be created is a failure of ours: exit 2.
    let nowhere = server.root.join("no-such-folder").join("x.txt");
    let out = jsontp(&["get", &server.url("/hello.txt"), "-o", &nowhere.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("jsontp: cannot write "),
        "{}",
        stderr(&out)
    );
}

#[test]
fn data_at_a_file_and_file_dash_send_those_bytes() {
    let server = Served::start("sources");
    let source = server.root.join("source.bin");
    std::fs::write(&source, binary()).expect("source");
    let at_file = format!("@{}", source.to_string_lossy());
    for data in ["--data", "-d"] {
        let _ = std::fs::remove_file(server.root.join("from-data.bin"));
        let put = jsontp(&["put", &server.url("/from-data.bin"), data, &at_file]);
        assert_eq!(put.status.code(), Some(0), "{}", stderr(&put));
        assert_eq!(
            std::fs::read(server.root.join("from-data.bin")).expect("written"),
            binary()
        );
    }

    let stdin = jsontp_with_stdin(
        &["put", &server.url("/from-stdin.txt"), "--file", "-"],
        b"piped in\n",
    );
    assert_eq!(stdin.status.code(), Some(0), "{}", stderr(&stdin));
    assert_eq!(
        std::fs::read_to_string(server.root.join("from-stdin.txt")).expect("written"),
        "piped in\n",
        "the bytes as they are, newline kept"
    );
    let at_dash = jsontp_with_stdin(&["put", &server.url("/at-dash.bin"), "--data", "@-"], &binary());
    assert_eq!(at_dash.status.code(), Some(0), "{}", stderr(&at_dash));
    assert_eq!(
        std::fs::read(server.root.join("at-dash.bin")).expect("written"),
        binary()
    );

    let missing = jsontp(&["put", &server.url("/x.txt"), "--data", "@/definitely/not/here"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("cannot read /definitely/not/here"),
        "{}",
        stderr(&missing)
    );
}

#[test]
fn headers_may_be_written_as_curl_writes_them() {
    let server = Served::start("colon-headers");
    let ok = jsontp(&["get", &server.url("/hello.txt"), "-H", "Accept-Language: en-US"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    // Sent, and read by the server: it cannot answer in German.
    let german = jsontp(&["get", &server.url("/hello.txt"), "-H", "accept-language: de-DE"]);
    assert_eq!(german.status.code(), Some(1), "{}", stderr(&german));
    assert!(stderr(&german).starts_with("jsontp: 406 "), "{}", stderr(&german));
}

#[test]
fn silent_leaves_the_error_status_to_the_exit_code() {
    let server = Served::start("silent");
    for flag in ["-s", "--silent"] {
        let out = jsontp(&["get", &server.url("/nope.txt"), flag]);
        assert_eq!(out.status.code(), Some(1));
        assert!(out.stderr.is_empty(), "{flag}: {}", stderr(&out));
    }
    // A failure that exits 2 still says why.
    let refused = jsontp(&["get", "127.0.0.1:1/", "-s"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("could not connect"),
        "{}",
        stderr(&refused)
    );
}

#[test]
fn write_out_prints_the_status_code_for_scripts() {
    let server = Served::start("write-out");
    // Not /dev/null: a regression of the test below would replace the
    // machine's with a file.
    let sink = temp_root("write-out-sink").join("out");
    let sink = sink.to_string_lossy().into_owned();
    let found = jsontp(&[
        "get",
        &server.url("/hello.txt"),
        "-s",
        "-o",
        &sink,
        "-w",
        "%{code}\\n",
    ]);
    assert_eq!(found.status.code(), Some(0), "{}", stderr(&found));
    assert_eq!(stdout(&found), "200\n");
    let missing = jsontp(&[
        "get",
        &server.url("/nope.txt"),
        "-s",
        "-o",
        &sink,
        "--write-out",
        "%{http_code} %{formal_message}",
    ]);
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(stdout(&missing), "404 Not Found");
    assert!(missing.stderr.is_empty(), "{}", stderr(&missing));
    // After the content, as curl writes it.
    let both = jsontp(&["get", &server.url("/hello.txt"), "-w", "\\n%{code}"]);
    assert_eq!(stdout(&both), "Hello, world!\n200");
    // An unknown variable is refused before anything is sent.
    let unknown = jsontp(&["get", "127.0.0.1:1/", "-w", "%{size_download}"]);
    assert_eq!(unknown.status.code(), Some(2));
    let err = stderr(&unknown);
    assert!(
        err.contains("%{size_download}") && !err.contains("connect"),
        "{err}"
    );
}

#[test]
fn a_peer_that_speaks_http_is_named() {
    let peer = one_answer_peer(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    let out = jsontp(&["get", &format!("{peer}/")]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.starts_with("jsontp: the peer answered in HTTP, not jsontp"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");

    // An HTTP server that reads our request line as HTTP/0.9 answers with
    // a bare page, no status line.
    let peer = one_answer_peer(b"<!DOCTYPE HTML>\n<html lang=\"en\"><body>Error 400</body></html>\n");
    let out = jsontp(&["get", &format!("{peer}/")]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("HTML page, not jsontp"), "{err}");
}

/// Runs `jsontp ARGS…` with its stdout on a terminal, through util-linux
/// `script`; returns the exit status and what the terminal showed.
#[cfg(target_os = "linux")]
fn on_a_terminal(args: &[&str]) -> (Option<i32>, Vec<u8>) {
    let mut line = format!("'{BIN}'");
    for arg in args.iter().chain(&["--timeout", "10"]) {
        line.push_str(&format!(" '{arg}'"));
    }
    let out = Command::new("script")
        .args(["--quiet", "--return", "--command", &line, "/dev/null"])
        .output()
        .expect("util-linux script runs the command on a terminal");
    (out.status.code(), out.stdout)
}

#[cfg(target_os = "linux")]
#[test]
fn binary_content_is_not_written_to_a_terminal_unless_asked() {
    let server = Served::start("terminal");
    let contains = |haystack: &[u8], needle: &[u8]| haystack.windows(needle.len()).any(|w| w == needle);
    let (code, shown) = on_a_terminal(&["get", &server.url("/binary.bin")]);
    assert_eq!(code, Some(2), "{}", String::from_utf8_lossy(&shown));
    assert!(
        contains(
            &shown,
            b"binary output can mess up your terminal; use -o FILE or --output -"
        ),
        "{}",
        String::from_utf8_lossy(&shown)
    );
    assert!(
        !contains(&shown, &binary()[200..]),
        "no raw bytes on the terminal"
    );

    // Asked for: written. (The terminal turns \n into \r\n; a run of high
    // bytes passes through.)
    let (code, shown) = on_a_terminal(&["get", &server.url("/binary.bin"), "--output", "-"]);
    assert_eq!(code, Some(0), "{}", String::from_utf8_lossy(&shown));
    assert!(contains(&shown, &binary()[200..]), "the bytes were written");

    // Text goes to the terminal as usual.
    let (code, shown) = on_a_terminal(&["get", &server.url("/hello.txt")]);
    assert_eq!(code, Some(0));
    assert!(contains(&shown, b"Hello, world!"));
}

/// `-o /dev/null`, as curl users write it: something that is not a
/// regular file is written as it is, never renamed over (which, as root,
/// would replace the device with a file). A named pipe stands in for the
/// device here; its read end is open before the command runs, without
/// blocking, so that a command that never writes to it fails the test
/// instead of hanging it.
#[test]
fn output_to_a_device_or_pipe_writes_into_it_and_leaves_it_in_place() {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

    let server = Served::start("output-fifo");
    let fifo = temp_root("output-fifo-pipe").join("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success());
    let mut read_end = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(&fifo)
        .expect("the pipe's read end");
    let out = jsontp(&["get", &server.url("/hello.txt"), "-o", &fifo.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut got = String::new();
    let _ = read_end.read_to_string(&mut got);
    assert_eq!(got, "Hello, world!");
    let kind = std::fs::metadata(&fifo).expect("still there").file_type();
    assert!(kind.is_fifo(), "the pipe was replaced: {kind:?}");
    let mut names: Vec<String> = std::fs::read_dir(fifo.parent().expect("a folder"))
        .expect("readable")
        .map(|e| e.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["hello.txt", "pipe"], "no temporary file left beside it");
}
