//! `jsontp completions SHELL` and `jsontp man [COMMAND]`: generated from the
//! same definition as `--help`, so they know every command and option.

use std::process::{Command, Output};

use crate::support::{BIN, stderr, stdout};

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run jsontp")
}

#[test]
fn completions_for_bash_zsh_and_fish_know_serves_options() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef jsontp"),
        ("fish", "complete -c jsontp"),
    ] {
        let out = run(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        assert!(script.contains(marker), "{shell}: {marker}");
        for word in [
            "serve",
            "writable",
            "token-file",
            "max-connections",
            "completions",
        ] {
            assert!(script.contains(word), "{shell} lacks {word}");
        }
    }
    let out = run(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("bash"),
        "the error lists the shells: {}",
        stderr(&out)
    );
}

#[test]
fn man_writes_roff_for_jsontp_and_each_command() {
    let out = run(&["man"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let page = stdout(&out);
    assert!(page.contains(".TH jsontp 1"), "{page}");
    assert!(page.contains("jsontp\\-serve(1)"), "lists the commands: {page}");

    let out = run(&["man", "serve"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let page = stdout(&out);
    assert!(
        page.contains(".TH jsontp\\-serve 1") || page.contains(".TH jsontp-serve 1"),
        "{page}"
    );
    assert!(
        page.contains("\\fBjsontp serve\\fR"),
        "the synopsis names the command: {page}"
    );
    // Every option, its environment variable, and the safe default.
    for word in [
        "\\-\\-writable",
        "\\-\\-token\\-file",
        "JSONTP_ROOT",
        "JSONTP_MAX_CONNECTIONS",
    ] {
        assert!(page.contains(word), "serve's page lacks {word}");
    }
    assert!(page.contains("read\\-only"), "{page}");
    assert!(!page.contains("\\-\\-version"), "serve has no --version: {page}");

    let out = run(&["man", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("serve, get"), "{}", stderr(&out));
}
