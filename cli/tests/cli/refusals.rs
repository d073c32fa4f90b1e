//! What `jsontp serve` answers, as a user meets it through the command:
//! refusals that give the next step, names it refuses said as such, and
//! the points DECISIONS settles (D11's folder methods, D14's `Bearer`).
#![allow(clippy::disallowed_methods)] // the tests own their threads

use std::thread;

use crate::support::{Served, jsontp, spawn_serve, stderr, stdout, temp_root};

#[test]
fn a_read_only_server_and_a_folder_say_what_to_do() {
    let root = temp_root("refusals-read-only");
    std::fs::create_dir(root.join("docs")).expect("folder");
    let (_serve, addr, mut log) = spawn_serve(&root, &["--quiet"]);
    thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
    let put = jsontp(&["put", &format!("{addr}/new.txt"), "-d", "x"]);
    assert_eq!(put.status.code(), Some(1));
    let said = stderr(&put);
    assert!(said.starts_with("jsontp: 405 Method Not Allowed: "), "{said}");
    assert!(said.contains("--writable") && said.contains("--token"), "{said}");
    assert!(said.contains("allowed here: OPTIONS"), "{said}");
    assert!(put.stdout.is_empty(), "the allowed methods are in the message");

    let folder = jsontp(&["get", &format!("{addr}/docs")]);
    assert_eq!(folder.status.code(), Some(1));
    assert!(stderr(&folder).contains("--list"), "{}", stderr(&folder));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_name_with_a_backslash_is_refused_for_that_reason_and_not_listed() {
    let server = Served::start_with("refusals-backslash", &["--list"]);
    std::fs::create_dir(server.root.join("odd")).expect("folder");
    std::fs::write(server.root.join("odd/we\"ird\\name.txt"), "odd").expect("file");
    std::fs::write(server.root.join("odd/fine.txt"), "fine").expect("file");
    let listed = jsontp(&["get", &server.url("/odd/"), "--json"]);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    let entries: serde_json::Value = serde_json::from_str(&stdout(&listed)).expect("JSON");
    let names: Vec<&str> = entries
        .as_array()
        .expect("an array")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(names, ["fine.txt"]);
    for method in ["get", "put", "delete"] {
        let out = jsontp(&[
            method,
            &server.url("/odd/we%22ird%5Cname.txt"),
            "-H",
            "ignore-invalid-headers=false",
        ]);
        assert_eq!(out.status.code(), Some(1), "{method}");
        let said = stderr(&out);
        assert!(
            said.contains("400 Bad Request") && said.contains("backslash"),
            "{method}: {said}"
        );
    }
}

#[test]
fn d14_bearer_and_d11_folder_methods() {
    let server = Served::start_with("refusals-token", &["--token", "s3cret"]);
    let put = |auth: &str| {
        jsontp(&[
            "put",
            &server.url("/t.txt"),
            "-d",
            "x",
            "-H",
            &format!("authorization: {auth}"),
        ])
    };
    assert_eq!(put("s3cret").status.code(), Some(0));
    let bearer = put("Bearer s3cret");
    assert_eq!(bearer.status.code(), Some(0), "{}", stderr(&bearer));
    assert_eq!(put("Bearer nope").status.code(), Some(1));
    let without = jsontp(&["put", &server.url("/t.txt"), "-d", "x"]);
    assert_eq!(without.status.code(), Some(1));
    assert!(
        stderr(&without).contains("authorization: TOKEN"),
        "{}",
        stderr(&without)
    );

    let options = jsontp(&["options", &server.url("/")]);
    assert_eq!(options.status.code(), Some(0), "{}", stderr(&options));
    assert_eq!(stdout(&options), "GET, POST, OPTIONS\n");
}
