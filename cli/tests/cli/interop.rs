//! `jsontp serve` answering the published reference crate's client
//! (`jsontp` 0.1.3).

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crate::support::{spawn_serve, temp_root};

/// The reference client's GET, bounded in time: it stops reading at a
/// read under 1024 bytes, so a server that wrote too little would leave
/// it waiting.
fn reference_get(port: u16, resource: &'static str) -> jsontp_ref::client::JsontpResponse {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let answer = jsontp_ref::client::Request::new()
            .method("GET")
            .resource(resource)
            .send("127.0.0.1", port);
        let _ = tx.send(answer);
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the reference client got its answer in time")
        .expect("the reference client parsed our response")
}

#[test]
fn the_reference_client_gets_a_file_from_jsontp_serve() {
    let root = temp_root("interop");
    std::fs::write(root.join("hello.txt"), "Hello, world!").expect("fixture");
    let (_serve, addr, _log) = spawn_serve(&root, &["--quiet"]);
    let answer = reference_get(addr.port(), "/hello.txt");
    assert_eq!(answer.status.code, 200);
    assert_eq!(answer.resource, "/hello.txt");
    assert_eq!(answer.body.content, "Hello, world!");
    let missing = reference_get(addr.port(), "/nope.txt");
    assert_eq!(missing.status.code, 404);
    let _ = std::fs::remove_dir_all(&root);
}
