//! `jsontp serve`'s spooled uploads (D19), seen from outside: content past
//! the 1 MiB held in memory has no name anywhere under the root while it
//! arrives (not even through a symlink to the root), nothing of it
//! survives the server killed mid-upload, it is kept with the mode a small
//! upload gets, and `--max-spool` bounds all of it together (`503` past
//! it), shared fairly: uploads that hold it and then send bytes decoding
//! to nothing do not keep a new one out; content of a request refused
//! from its head, or of a method that ignores it, is never stored. Linux:
//! the tests find the server's spooled file through `/proc/PID/fd`.
#![allow(clippy::disallowed_methods)] // the tests own their threads

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ChildStderr;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Serve, spawn_serve, temp_root, temporaries};

const LIMIT: Duration = Duration::from_secs(10);

/// `jsontp serve --writable --quiet EXTRA…` on `root`, its stderr drained.
fn serve(root: &Path, extra: &[&str]) -> (Serve, SocketAddr) {
    let mut args = vec!["--writable", "--quiet"];
    args.extend_from_slice(extra);
    let (server, addr, log) = spawn_serve(root, &args);
    drain(log);
    (server, addr)
}

fn drain(mut log: BufReader<ChildStderr>) {
    thread::spawn(move || {
        let mut line = String::new();
        while log.read_line(&mut line).is_ok_and(|n| n > 0) {
            line.clear();
        }
    });
}

/// A `PUT` of `x`s under way on its own connection: the envelope first,
/// then the content in pieces, the message's end last (D19's order).
struct Upload(TcpStream);

impl Upload {
    fn start(addr: SocketAddr, resource: &str) -> Upload {
        Upload::start_with(addr, "PUT", resource)
    }

    /// A request of `method` carrying content, as [`Upload::start`].
    fn start_with(addr: SocketAddr, method: &str, resource: &str) -> Upload {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(LIMIT)).expect("timeout");
        stream.set_write_timeout(Some(LIMIT)).expect("timeout");
        let mut upload = Upload(stream);
        let head = format!(
            r#"{{"jsontp":"1.0","type":"request","resource":{},"method":{},"headers":{{}},"body":{{"encoding":"identity","content":""#,
            json!(resource),
            json!(method)
        );
        upload.0.write_all(head.as_bytes()).expect("head");
        upload
    }

    fn send(&mut self, bytes: usize) -> &mut Upload {
        let piece = vec![b'x'; 64 << 10];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(piece.len());
            self.0.write_all(&piece[..n]).expect("content");
            left -= n;
        }
        self
    }

    /// Ends the message and reads the answer.
    fn finish(&mut self) -> Value {
        self.0.write_all(br#""}}"#).expect("end");
        self.0.shutdown(Shutdown::Write).expect("half close");
        let mut answer = String::new();
        let _ = self.0.read_to_string(&mut answer);
        serde_json::Deserializer::from_str(&answer)
            .into_iter::<Value>()
            .next()
            .and_then(Result::ok)
            .unwrap_or_else(|| panic!("no answer: {answer:?}"))
    }
}

/// A whole `PUT` of `size` `x`s.
fn put(addr: SocketAddr, resource: &str, size: usize) -> Value {
    Upload::start(addr, resource).send(size).finish()
}

fn code(answer: &Value) -> u64 {
    answer["status"]["code"].as_u64().unwrap_or(0)
}

/// Waits until the server holds a file under `root` open other than the
/// root itself (its spooled upload, named or not), as `/proc/PID/fd`
/// shows: the content is then in the spool, not in a socket buffer.
fn wait_for_spooled_file(server: &Serve, root: &Path) -> String {
    let root = root.canonicalize().expect("root");
    let prefix = format!("{}/", root.display());
    let fds = PathBuf::from(format!("/proc/{}/fd", server.0.id()));
    let deadline = Instant::now() + LIMIT;
    loop {
        let open = std::fs::read_dir(&fds)
            .expect("the server's descriptors")
            .flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .map(|target| target.to_string_lossy().into_owned())
            .find(|target| target.starts_with(&prefix) && !target.ends_with(".txt"));
        if let Some(open) = open {
            return open;
        }
        assert!(Instant::now() < deadline, "the server never spooled the upload");
        thread::sleep(Duration::from_millis(10));
    }
}

/// Every path under `root`, relative, symlinks not followed.
fn walk(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("list").flatten() {
            let path = entry.path();
            found.push(path.strip_prefix(root).expect("under").display().to_string());
            if entry.file_type().expect("type").is_dir() {
                folders.push(path);
            }
        }
    }
    found.sort();
    found
}

#[test]
fn spool_an_upload_in_progress_has_no_name_under_the_root() {
    // A symlink to the root makes every name under it reachable twice; a
    // spooled file with a name could be listed, read, replaced or deleted
    // through it by another client.
    let root = temp_root("spool-unnamed");
    std::os::unix::fs::symlink(".", root.join("all")).expect("symlink");
    let (server, addr) = serve(&root, &["--list"]);
    let mut upload = Upload::start(addr, "/big.txt");
    upload.send(3 << 20);
    let open = wait_for_spooled_file(&server, &root);
    assert!(
        open.ends_with(" (deleted)"),
        "the spooled file has a name: {open}"
    );
    assert_eq!(walk(&root), ["all", "hello.txt"], "on disk, mid-upload");
    assert!(temporaries(&root).is_empty());
    // Nor through the server, by the symlink or not.
    for resource in ["/", "/all/"] {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(LIMIT)).expect("timeout");
        let get = format!(
            r#"{{"jsontp":"1.0","type":"request","resource":"{resource}","method":"GET","headers":{{}},"body":{{"encoding":"identity","content":""}}}}"#
        );
        stream.write_all(get.as_bytes()).expect("get");
        stream.shutdown(Shutdown::Write).expect("half close");
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        assert!(answer.contains("\"code\":200"), "{resource}: {answer}");
        assert!(answer.contains("hello.txt"), "{resource}: {answer}");
        assert!(!answer.contains(".jsontp"), "{resource}: {answer}");
    }
    // The upload completes as if nobody had looked.
    upload.send(1 << 20);
    let answer = upload.finish();
    assert_eq!(code(&answer), 201, "{answer}");
    assert_eq!(
        std::fs::metadata(root.join("big.txt")).expect("kept").len(),
        4 << 20
    );
    assert_eq!(walk(&root), ["all", "big.txt", "hello.txt"]);
    drop(server);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn spool_a_server_killed_mid_upload_leaves_nothing_behind() {
    let root = temp_root("spool-killed");
    let (mut server, addr) = serve(&root, &[]);
    let mut upload = Upload::start(addr, "/big.txt");
    upload.send(12 << 20);
    wait_for_spooled_file(&server, &root);
    server.0.kill().expect("SIGKILL");
    server.0.wait().expect("reaped");
    assert_eq!(temporaries(&root), Vec::<PathBuf>::new());
    assert_eq!(walk(&root), ["hello.txt"]);
    // A new server on the same root finds nothing either, and serves.
    let (_server, addr) = serve(&root, &[]);
    assert_eq!(code(&put(addr, "/big.txt", 2 << 20)), 201);
    assert_eq!(walk(&root), ["big.txt", "hello.txt"]);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn spool_a_large_put_gets_the_mode_of_a_small_one() {
    let root = temp_root("spool-mode");
    let (_server, addr) = serve(&root, &[]);
    assert_eq!(code(&put(addr, "/small.txt", 100)), 201);
    assert_eq!(code(&put(addr, "/large.txt", 3 << 20)), 201);
    let mode = |name: &str| {
        let mode = std::fs::metadata(root.join(name))
            .expect(name)
            .permissions()
            .mode()
            & 0o777;
        format!("{mode:o}")
    };
    // What a new file gets here: the server runs with this umask.
    std::fs::File::create(root.join("made.txt")).expect("create");
    assert_eq!(mode("small.txt"), mode("made.txt"));
    assert_eq!(mode("large.txt"), mode("made.txt"));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn spool_every_written_file_takes_its_mode_from_the_servers_umask() {
    // The server under a umask of its own, unlike the test's: small and
    // spooled uploads alike get 0666 less it, and nothing of the spool
    // shows in the folder.
    let root = temp_root("spool-umask");
    let mut command = std::process::Command::new("sh");
    command
        .arg("-c")
        .arg(format!(
            "umask 027 && exec {} serve --workers 1 --writable --quiet --addr 127.0.0.1:0 --root '{}'",
            crate::support::BIN,
            root.display()
        ))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for name in crate::support::SERVE_ENV {
        command.env_remove(name);
    }
    let mut child = command.spawn().expect("sh");
    let mut log = BufReader::new(child.stderr.take().expect("stderr"));
    let _server = Serve(child);
    let mut line = String::new();
    let _ = log.read_line(&mut line);
    let addr: SocketAddr = line
        .trim()
        .rsplit("://")
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("jsontp serve did not start: {line:?}"));
    drain(log);
    assert_eq!(code(&put(addr, "/small.txt", 100)), 201);
    assert_eq!(code(&put(addr, "/large.txt", 3 << 20)), 201);
    for name in ["small.txt", "large.txt"] {
        let mode = std::fs::metadata(root.join(name))
            .expect(name)
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(format!("{mode:o}"), "640", "{name}");
    }
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .expect("root")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["hello.txt", "large.txt", "small.txt"]);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn spool_old_leftovers_are_removed_at_start() {
    // Earlier versions spooled under names in ROOT/.jsontp-spool, where a
    // crash left them.
    let root = temp_root("spool-leftovers");
    let old = root.join(".jsontp-spool");
    std::fs::create_dir(&old).expect("old folder");
    std::fs::write(old.join(".jsontp-upload-abc123"), "partial").expect("leftover");
    // A read-only server writes nothing under its root.
    let (server, _addr, log) = spawn_serve(&root, &["--quiet"]);
    drain(log);
    drop(server);
    assert!(old.join(".jsontp-upload-abc123").exists());
    let (server, _addr) = serve(&root, &[]);
    drop(server);
    assert!(!old.exists(), "the emptied folder goes too");
    // What the server did not make stays, and the folder with it.
    std::fs::create_dir(&old).expect("old folder");
    std::fs::write(old.join(".jsontp-upload-def456"), "partial").expect("leftover");
    std::fs::write(old.join("notes.txt"), "mine").expect("other file");
    let (server, _addr) = serve(&root, &[]);
    drop(server);
    assert!(!old.join(".jsontp-upload-def456").exists());
    assert_eq!(
        std::fs::read_to_string(old.join("notes.txt")).expect("kept"),
        "mine"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// Needs the serving layer to answer a full spool with `503` (it answers
/// `500` until it tells a full spool from a failed one).
#[test]
fn spool_past_max_spool_is_503_and_frees_its_share() {
    let root = temp_root("spool-budget");
    // 2 MiB for every upload at once; each may be up to 1 GiB alone.
    let (server, addr) = serve(&root, &["--max-spool", "2M"]);
    // One upload larger than the budget.
    let answer = put(addr, "/huge.txt", 3 << 20);
    assert_eq!(code(&answer), 503, "{answer}");
    let why = answer["status"]["human-message"].as_str().unwrap_or_default();
    assert!(why.contains("full") && why.contains("try again later"), "{why}");
    assert!(!root.join("huge.txt").exists());
    // Two at once: 1.5 MiB held by the first leaves too little for the
    // second, which is refused while the first goes on.
    let mut first = Upload::start(addr, "/first.txt");
    first.send(3 << 19);
    wait_for_spooled_file(&server, &root);
    let second = put(addr, "/second.txt", 3 << 19);
    assert_eq!(code(&second), 503, "{second}");
    let answer = first.finish();
    assert_eq!(code(&answer), 201, "{answer}");
    // Each refusal gave its share back: the same size fits now.
    assert_eq!(code(&put(addr, "/second.txt", 3 << 19)), 201);
    assert_eq!(walk(&root), ["first.txt", "hello.txt", "second.txt"]);
    drop(server);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn spool_max_spool_reads_its_variable_and_sizes() {
    // A budget of nothing refuses every spooled upload, whichever way it
    // is given; content held in memory is not counted.
    let root = temp_root("spool-env");
    let (server, addr, log) = crate::support::spawn_serve_with_env(
        &root,
        &["--writable", "--quiet"],
        &[("JSONTP_MAX_SPOOL", "0K")],
    );
    drain(log);
    assert_eq!(code(&put(addr, "/small.txt", 1000)), 201);
    assert_ne!(code(&put(addr, "/large.txt", 2 << 20)), 201);
    assert!(!root.join("large.txt").exists());
    drop(server);
    let out = crate::support::serve_command(&["--max-spool", "lots"], &[])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--max-spool"));
    let _ = std::fs::remove_dir_all(&root);
}

/// The files the server holds open, other than its root and the files it
/// serves (`.txt`): spooled content, named or not.
fn open_files(server: &Serve, root: &Path) -> Vec<String> {
    let root = root.canonicalize().expect("root");
    let fds = PathBuf::from(format!("/proc/{}/fd", server.0.id()));
    std::fs::read_dir(&fds)
        .expect("the server's descriptors")
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|target| target.is_absolute() && *target != root && !target.starts_with("/dev"))
        .map(|target| target.to_string_lossy().into_owned())
        .filter(|target| !target.ends_with(".txt"))
        .collect()
}

#[test]
fn spool_an_upload_refused_from_its_envelope_is_never_stored() {
    // D19: a read-only server answers a PUT 405 and a token server answers
    // one without the token 401 whatever the content: the content is read
    // and checked, and nothing of it written anywhere.
    let root = temp_root("spool-refused");
    for (extra, status) in [(&[][..], 405), (&["--token", "s3cret"][..], 401)] {
        let mut args = vec!["--quiet"];
        args.extend_from_slice(extra);
        let (server, addr, log) = spawn_serve(&root, &args);
        drain(log);
        let mut upload = Upload::start(addr, "/big.txt");
        upload.send(6 << 20);
        // Long enough for a server that spooled to have a file open.
        thread::sleep(Duration::from_millis(300));
        assert_eq!(open_files(&server, &root), Vec::<String>::new(), "{extra:?}");
        upload.send(2 << 20);
        assert_eq!(open_files(&server, &root), Vec::<String>::new(), "{extra:?}");
        let answer = upload.finish();
        assert_eq!(code(&answer), status, "{extra:?}: {answer}");
        assert_eq!(walk(&root), ["hello.txt"]);
        drop(server);
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn spool_content_on_a_method_that_ignores_it_is_never_stored() {
    // D19: a read-only server answers GET, POST and OPTIONS the same
    // whatever content they carry, and refuses DELETE (405): the content is
    // read and checked, and nothing of it written anywhere.
    let root = temp_root("spool-ignored");
    let (server, addr, log) = spawn_serve(&root, &["--quiet"]);
    drain(log);
    for (method, status) in [("GET", 200), ("POST", 200), ("OPTIONS", 200), ("DELETE", 405)] {
        let mut upload = Upload::start_with(addr, method, "/hello.txt");
        upload.send(6 << 20);
        // Long enough for a server that spooled to have a file open.
        thread::sleep(Duration::from_millis(300));
        assert_eq!(open_files(&server, &root), Vec::<String>::new(), "{method}");
        upload.send(2 << 20);
        assert_eq!(open_files(&server, &root), Vec::<String>::new(), "{method}");
        let answer = upload.finish();
        assert_eq!(code(&answer), status, "{method}: {answer}");
        if method != "OPTIONS" && status == 200 {
            assert_eq!(answer["body"]["content"], "Hello, world!", "{method}");
        }
    }
    assert_eq!(walk(&root), ["hello.txt"]);
    drop(server);
    let _ = std::fs::remove_dir_all(&root);
}

/// A `deflate` content written by hand, as a sender that never ends it
/// writes it: a zlib header, `len` `x`s in one block of fixed codes, then
/// as many empty stored blocks as it likes (bytes that decode to nothing),
/// and at last the stream's end. The base64 text follows the bytes a whole
/// group at a time, so that each part continues the same text.
struct EmptyBlocks {
    bits: u64,
    count: u32,
    bytes: Vec<u8>,
    /// Compressed bytes not yet written as text (fewer than three).
    carry: Vec<u8>,
    len: usize,
}

impl EmptyBlocks {
    fn new(len: usize) -> EmptyBlocks {
        let mut blocks = EmptyBlocks {
            bits: 0,
            count: 0,
            bytes: vec![0x78, 0x01],
            carry: Vec::new(),
            len,
        };
        // Not the last block; fixed codes (RFC 1951 §3.2.6).
        blocks.put(0b010, 3);
        // One `x`, then copies of 258 from one back, then `x`s to `len`.
        let literal_x = 0x30 + u32::from(b'x');
        blocks.code(literal_x, 8);
        let copies = (len - 1) / 258;
        for _ in 0..copies {
            blocks.code(0xc0 + (285 - 280), 8);
            blocks.code(0, 5);
        }
        for _ in 0..(len - 1 - copies * 258) {
            blocks.code(literal_x, 8);
        }
        // The end of the block, and an empty stored block to align on a
        // byte, as a sync flush writes.
        blocks.code(0, 7);
        blocks.put(0b000, 3);
        if blocks.count > 0 {
            blocks.put(0, 8 - blocks.count);
        }
        blocks.bytes.extend_from_slice(&[0, 0, 0xff, 0xff]);
        blocks
    }

    /// `value`'s low `n` bits, least significant first.
    fn put(&mut self, value: u64, n: u32) {
        self.bits |= value << self.count;
        self.count += n;
        while self.count >= 8 {
            self.bytes.push(self.bits as u8);
            self.bits >>= 8;
            self.count -= 8;
        }
    }

    /// A Huffman code of `n` bits, most significant first.
    fn code(&mut self, code: u32, n: u32) {
        let reversed = code.reverse_bits() >> (32 - n);
        self.put(u64::from(reversed), n);
    }

    /// The text of what was written so far.
    fn text(&mut self) -> Vec<u8> {
        self.carry.append(&mut self.bytes);
        let whole = self.carry.len() / 3 * 3;
        let text = base64(&self.carry[..whole]);
        self.carry.drain(..whole);
        text
    }

    /// The text of `n` more empty stored blocks.
    fn empty(&mut self, n: usize) -> Vec<u8> {
        for _ in 0..n {
            self.bytes.extend_from_slice(&[0, 0, 0, 0xff, 0xff]);
        }
        self.text()
    }

    /// The rest of the text: the last (empty) block, the Adler-32 of the
    /// content (RFC 1950), the last group padded.
    fn end(&mut self) -> Vec<u8> {
        self.bytes.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
        let (mut a, mut b) = (1u32, 0u32);
        for _ in 0..self.len {
            a = (a + u32::from(b'x')) % 65521;
            b = (b + a) % 65521;
        }
        self.bytes.extend_from_slice(&((b << 16) | a).to_be_bytes());
        self.carry.append(&mut self.bytes);
        let text = base64(&self.carry);
        self.carry.clear();
        text
    }
}

/// Standard padded base64 (RFC 4648 §4).
fn base64(bytes: &[u8]) -> Vec<u8> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = Vec::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let n = group.iter().fold(0u32, |n, &b| (n << 8) | u32::from(b)) << (8 * (3 - group.len()));
        for i in 0..4 {
            if i <= group.len() {
                text.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]);
            } else {
                text.push(b'=');
            }
        }
    }
    text
}

/// The sizes of the files the server holds open for spooled uploads, as
/// `/proc/PID/fd` shows them (named or not).
fn spooled_sizes(server: &Serve, root: &Path) -> Vec<u64> {
    let root = root.canonicalize().expect("root");
    let prefix = format!("{}/", root.display());
    let fds = PathBuf::from(format!("/proc/{}/fd", server.0.id()));
    let mut sizes: Vec<u64> = std::fs::read_dir(&fds)
        .expect("the server's descriptors")
        .flatten()
        .filter(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|target| {
                let target = target.to_string_lossy();
                target.starts_with(&prefix) && !target.ends_with(".txt")
            })
        })
        .filter_map(|fd| std::fs::metadata(fd.path()).ok())
        .map(|file| file.len())
        .collect();
    sizes.sort_unstable();
    sizes
}

#[test]
fn spool_uploads_kept_alive_with_empty_blocks_do_not_keep_a_put_out() {
    // D19: four uploads fill the 64 MiB budget with 16 MiB each at once,
    // then go on with empty compressed blocks, bytes that decode to
    // nothing. A fifth upload is entitled to a fifth of the budget: it
    // takes its room back from the one past its share whose content came
    // longest ago, and is stored at once.
    let root = temp_root("spool-fair");
    let (server, addr) = serve(&root, &["--max-spool", "64M", "--max-upload", "32M"]);
    let head = |resource: &str| {
        format!(
            r#"{{"jsontp":"1.0","type":"request","resource":"{resource}","method":"PUT","headers":{{}},"body":{{"encoding":"deflate","content":""#
        )
    };
    let mut held: Vec<(TcpStream, EmptyBlocks)> = (0..4)
        .map(|i| {
            let mut stream = TcpStream::connect(addr).expect("connect");
            stream.set_read_timeout(Some(LIMIT)).expect("timeout");
            stream.set_write_timeout(Some(LIMIT)).expect("timeout");
            let mut blocks = EmptyBlocks::new(16 << 20);
            stream
                .write_all(head(&format!("/held{i}.txt")).as_bytes())
                .expect("head");
            stream.write_all(&blocks.text()).expect("content");
            (stream, blocks)
        })
        .collect();
    let deadline = Instant::now() + LIMIT;
    while spooled_sizes(&server, &root) != [16 << 20; 4] {
        assert!(
            Instant::now() < deadline,
            "spooled: {:?}",
            spooled_sizes(&server, &root)
        );
        thread::sleep(Duration::from_millis(10));
    }
    // Kept alive: a few empty blocks to each, ten times a second.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let alive = {
        let stop = std::sync::Arc::clone(&stop);
        thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for (stream, blocks) in &mut held {
                    stream.write_all(&blocks.empty(3)).expect("empty blocks");
                }
                thread::sleep(Duration::from_millis(100));
            }
            held
        })
    };
    thread::sleep(Duration::from_millis(300));
    let began = Instant::now();
    let answer = put(addr, "/legit.txt", 8 << 20);
    let took = began.elapsed();
    assert_eq!(code(&answer), 201, "{answer}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(
        std::fs::metadata(root.join("legit.txt")).expect("kept").len(),
        8 << 20
    );
    // The four end their content: the one evicted is refused, naming the
    // budget; the other three are stored.
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let held = alive.join().expect("kept alive");
    let mut refused = Vec::new();
    for (i, (mut stream, mut blocks)) in held.into_iter().enumerate() {
        stream.write_all(&blocks.end()).expect("end");
        stream.write_all(br#""}}"#).expect("end");
        stream.shutdown(Shutdown::Write).expect("half close");
        let mut text = String::new();
        let _ = stream.read_to_string(&mut text);
        let answer: Value = serde_json::Deserializer::from_str(&text)
            .into_iter::<Value>()
            .next()
            .and_then(Result::ok)
            .unwrap_or_else(|| panic!("no answer: {text:?}"));
        match code(&answer) {
            201 => assert_eq!(
                std::fs::metadata(root.join(format!("held{i}.txt")))
                    .expect("kept")
                    .len(),
                16 << 20
            ),
            503 => refused.push(
                answer["status"]["human-message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            ),
            _ => panic!("held{i}: {answer}"),
        }
    }
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].contains("stopped to make room") && refused[0].contains("budget of 64 MiB"),
        "{}",
        refused[0]
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&root);
}
