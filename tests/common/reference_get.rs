//! The reference crate's client (`jsontp` 0.1.3), as the interop tests
//! of the library and of the command use it.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// The reference client's `GET`, run on a thread and bounded in time: it
/// stops reading at a read under 1024 bytes, so a server that wrote too
/// little would leave it waiting.
pub fn reference_get(port: u16, resource: &'static str) -> jsontp_ref::client::JsontpResponse {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let answer = jsontp_ref::client::Request::new()
            .method("GET")
            .resource(resource)
            .send("127.0.0.1", port);
        let _ = tx.send(answer);
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the reference client got its answer in time (it stops at a read under 1024 bytes)")
        .expect("the reference client parsed our response")
}
