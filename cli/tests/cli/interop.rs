//! `jsontp serve` answering the published reference crate's client
//! (`jsontp` 0.1.3).

use crate::reference_get::reference_get;
use crate::support::{spawn_serve, temp_root};

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
