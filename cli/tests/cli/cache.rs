//! The file cache's large text forms as `jsontp serve` keeps them (Linux):
//! a kept escaped form is sent byte for byte as the file, as the answer
//! that streamed it before sent it, and neither making it nor sending it
//! holds the file in the server's memory; the
//! copies of small files, packed into shared huge pages, each go out as
//! their own file.
#![allow(clippy::disallowed_methods)] // the tests own their threads

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use crate::admin::{free_port, http_get};
use crate::pki::Pki;
use crate::support::{Serve, jsontp, spawn_serve, stderr, temp_root};

const WAIT: Duration = Duration::from_secs(60);

/// The answer to a GET of `resource` asking for identity, on its own
/// connection: the response's line, as it came.
fn get_identity(addr: SocketAddr, resource: &str) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("timeout");
    let request = serde_json::json!({
        "jsontp": "1.0", "type": "request", "resource": resource, "method": "GET",
        "headers": {"accept-encoding": "identity"},
        "body": {"content": "", "encoding": "identity"}
    });
    stream.write_all(format!("{request}\n").as_bytes()).expect("ask");
    let mut line = Vec::new();
    BufReader::new(stream)
        .read_until(b'\n', &mut line)
        .expect("an answer");
    line
}

/// The most memory the process `pid` has held resident, in bytes
/// (`VmHWM`).
fn peak_resident(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kib| kib.trim().parse().ok())
        .expect("VmHWM");
    kib * 1024
}

/// About `len` bytes of text rich in escapes and in UTF-8 of every
/// length.
fn rich_text(len: usize) -> String {
    let unit = "a \"quoted\" line \\ with\ttabs, é, € and 𝄞\n";
    unit.repeat(len / unit.len())
}

/// The bytes the file cache keeps, as the admin listener at `admin`
/// shows them.
fn kept_bytes(admin: SocketAddr) -> f64 {
    let (status, metrics) = http_get(admin, "/metrics");
    assert_eq!(status, 200);
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("jsontp_file_cache_bytes "))
        .and_then(|n| n.parse().ok())
        .expect("the cache's bytes")
}

/// Waits until the cache at `admin` keeps more than `bytes`: the escaped
/// form a first answer starts making is made apart from it.
fn wait_kept(admin: SocketAddr, bytes: usize) {
    let began = std::time::Instant::now();
    while kept_bytes(admin) <= bytes as f64 {
        assert!(began.elapsed() < WAIT, "the escaped form is kept within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `jsontp serve --quiet --admin ADDR EXTRA…` on a fresh folder named
/// after `name` holding `large.txt`, `text`: the server, its address,
/// its admin listener's and the folder.
fn serve_large(name: &str, text: &str, extra: &[&str]) -> (Serve, SocketAddr, SocketAddr, PathBuf) {
    let root = temp_root(name);
    std::fs::write(root.join("large.txt"), text).expect("the file");
    let (serve, addr, admin) = serve_with_admin(&root, extra);
    (serve, addr, admin, root)
}

/// `jsontp serve --quiet --admin ADDR EXTRA…` on `root`: the server, its
/// address and its admin listener's.
fn serve_with_admin(root: &std::path::Path, extra: &[&str]) -> (Serve, SocketAddr, SocketAddr) {
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
    let admin_arg = admin.to_string();
    let mut args = vec!["--quiet", "--admin", &admin_arg];
    args.extend_from_slice(extra);
    let (serve, addr, mut log) = spawn_serve(root, &args);
    std::thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
    (serve, addr, admin)
}

#[test]
fn a_kept_40_mib_text_goes_out_byte_exact_while_the_server_stays_under_32_mib() {
    let text = rich_text(40 << 20);
    // Room for the content and its escaped text.
    let (serve, addr, admin, root) = serve_large("cache-resident", &text, &["--cache-bytes", "96M"]);
    let pid = serve.0.id();

    // The first answer streams the file and starts making its escaped
    // form; the others send the form kept, the same bytes.
    let mut first = None;
    for round in 0..4 {
        if round == 1 {
            wait_kept(admin, 2 * text.len());
        }
        let answer = get_identity(addr, "/large.txt");
        let value: serde_json::Value = serde_json::from_slice(&answer).expect("JSON");
        assert_eq!(value["status"]["code"], 200, "{round}: {}", value["status"]);
        assert_eq!(value["body"]["encoding"], "identity");
        assert!(
            value["body"]["content"].as_str() == Some(text.as_str()),
            "{round}: the file, byte for byte"
        );
        // The body as written, the same each time (the head's date may
        // move on).
        let body = answer
            .windows(7)
            .position(|w| w == b"\"body\":")
            .map(|at| answer[at..].to_vec())
            .expect("a body");
        match &first {
            None => first = Some(body),
            Some(first) => assert!(*first == body, "{round}: the same bytes on the wire"),
        }
    }
    // Kept: the content and its escaped text, each once.
    let kept = kept_bytes(admin);
    assert!(kept > 2.0 * text.len() as f64, "kept {kept} bytes");
    let peak = peak_resident(pid);
    assert!(peak < 32 << 20, "the server's peak resident memory: {peak} bytes");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn over_tls_a_kept_escaped_form_is_read_from_its_mapping_byte_exact() {
    // TLS cannot send from the sealed file: it encrypts the text the
    // body maps.
    let pki = Pki::new();
    let text = rich_text(3 << 20);
    let (cert, key) = (pki.path("server.pem"), pki.path("server.key"));
    let tls = [
        "--tls-cert",
        cert.to_str().expect("path"),
        "--tls-key",
        key.to_str().expect("path"),
    ];
    let (_serve, addr, admin, root) = serve_large("cache-tls", &text, &tls);
    let url = format!("jsontps://localhost:{}/large.txt", addr.port());
    let ca = pki.path("ca.pem").to_string_lossy().into_owned();
    // The first answer streams and starts making the form, the others
    // send it as kept.
    for round in 0..3 {
        if round == 1 {
            wait_kept(admin, 2 * text.len());
        }
        let got = jsontp(&["get", "--cacert", &ca, &url, "-H", "accept-encoding=identity"]);
        assert_eq!(got.status.code(), Some(0), "{round}: {}", stderr(&got));
        assert!(got.stdout == text.as_bytes(), "{round}: the file, byte for byte");
    }
    assert!(
        kept_bytes(admin) > 2.0 * text.len() as f64,
        "sent from the kept form"
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn small_files_whose_copies_share_huge_pages_each_go_out_as_the_file() {
    // Forms of 16 KiB and more get sendfile copies; these lie one after
    // another in the cache's shared huge pages (where the kernel makes
    // them), each sent from where it starts.
    let root = temp_root("cache-shared-pages");
    let texts: Vec<String> = (0..5)
        .map(|n| format!("file {n}: {}", rich_text((40 + 70 * n) << 10)))
        .collect();
    for (n, text) in texts.iter().enumerate() {
        std::fs::write(root.join(format!("f{n}.txt")), text).expect("a file");
    }
    let (_serve, addr, admin) = serve_with_admin(&root, &[]);
    // The first round streams each file and starts making its form and
    // copy; the others send them as kept, in another order.
    let total: usize = texts.iter().map(String::len).sum();
    for round in 0..3 {
        if round == 1 {
            // Each file's content and its escaped form.
            wait_kept(admin, 2 * total);
        }
        for n in (0..texts.len()).rev().cycle().skip(round).take(texts.len()) {
            let answer = get_identity(addr, &format!("/f{n}.txt"));
            let value: serde_json::Value = serde_json::from_slice(&answer).expect("JSON");
            assert_eq!(value["status"]["code"], 200, "{round} f{n}: {}", value["status"]);
            assert!(
                value["body"]["content"].as_str() == Some(texts[n].as_str()),
                "{round} f{n}: the file, byte for byte"
            );
        }
    }
    // Where the kernel made huge pages of the copies, the metric shows
    // them, whole pages within a quarter of the bound.
    let (status, metrics) = http_get(admin, "/metrics");
    assert_eq!(status, 200);
    let gauge = |name: &str| -> u64 {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {metrics}"))
    };
    let pages = gauge("jsontp_file_cache_shared_page_bytes");
    assert!(
        pages % (2 << 20) == 0 && pages <= gauge("jsontp_file_cache_limit_bytes") / 4,
        "{pages} bytes of shared pages"
    );
    let _ = std::fs::remove_dir_all(&root);
}
