//! A folder listing (`jsontp serve --list`) as the command shows it: JSON
//! with a trailing newline through a pipe, `--json` or `-s`; an aligned
//! table on a terminal (a pseudo-terminal made by `script`).

use std::process::Command;

use crate::support::{BIN, Served, jsontp, stderr, stdout};

#[test]
fn a_listing_is_json_through_a_pipe_and_a_table_on_a_terminal() {
    let server = Served::start_with("listing-table", &["--list"]);
    std::fs::create_dir(server.root.join("docs")).expect("folder");
    std::fs::write(server.root.join("docs/a-long-name.txt"), "12345").expect("file");
    std::fs::create_dir(server.root.join("docs/sub")).expect("folder");
    let url = server.url("/docs/");

    let piped = jsontp(&["get", &url]);
    assert_eq!(piped.status.code(), Some(0), "{}", stderr(&piped));
    let text = stdout(&piped);
    assert!(text.ends_with("]\n"), "JSON and a line break: {text:?}");
    let entries: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(entries[0]["name"], "a-long-name.txt");
    for raw in ["--json", "-s"] {
        assert_eq!(stdout(&jsontp(&["get", &url, raw])), text, "{raw}");
    }

    // On a terminal: the table. `script` gives the command one.
    let line = |args: &str| format!("{BIN} get {url} --timeout 10 {args}");
    let on_terminal = |args: &str| {
        Command::new("script")
            .args(["-qec", &line(args), "/dev/null"])
            .output()
    };
    let Ok(shown) = on_terminal("") else {
        eprintln!("no `script` here: the table is checked by the unit tests only");
        return;
    };
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let shown = String::from_utf8_lossy(&shown.stdout).replace("\r\n", "\n");
    let rows: Vec<&str> = shown.lines().collect();
    assert_eq!(rows.len(), 3, "{shown}");
    assert!(
        rows[0].starts_with("NAME             SIZE  MODIFIED (UTC)"),
        "{shown}"
    );
    assert!(rows[1].starts_with("a-long-name.txt     5  20"), "{shown}");
    assert!(rows[2].starts_with("sub/                -  20"), "{shown}");
    let raw = on_terminal("--json").expect("script");
    let raw = String::from_utf8_lossy(&raw.stdout).replace("\r\n", "\n");
    assert_eq!(raw, text, "--json keeps the JSON on a terminal");
}

#[test]
fn a_long_listing_comes_in_pages_each_within_the_output_limit() {
    let server = Served::start_with("listing-pages", &["--list"]);
    let folder = server.root.join("many");
    std::fs::create_dir(&folder).expect("folder");
    let mut expected: Vec<String> = (0..4500).map(|i| format!("file {i:05} +&%.txt")).collect();
    for name in &expected {
        std::fs::write(folder.join(name), "x").expect("file");
    }
    expected.sort();
    let mut url = server.url("/many/");
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        pages += 1;
        assert!(pages <= 3, "4500 entries in pages of 2000");
        let out = jsontp(&["get", &url]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(out.stdout.len() < 1 << 20, "a page is {} bytes", out.stdout.len());
        let entries: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("JSON");
        assert!(entries.len() <= 2000);
        seen.extend(
            entries
                .iter()
                .filter_map(|e| e["name"].as_str().map(str::to_owned)),
        );
        let said = stderr(&out);
        let Some(next) = said
            .split("jsontp get '")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
        else {
            assert_eq!(said, "", "the last page says nothing more");
            break;
        };
        url = next.to_owned();
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, expected, "every name once, in order");
}
