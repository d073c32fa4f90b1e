//! `--help`: each subcommand lists the options it uses and no others,
//! shows examples and the exit statuses, and speaks without the rule
//! numbers of the project's decisions file.

use std::process::Command;

use crate::support::{BIN, jsontp, stderr};

fn help(command: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(command)
        .arg("--help")
        .output()
        .expect("run jsontp --help");
    assert_eq!(out.status.code(), Some(0), "{command:?} --help");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const COMMANDS: [&str; 8] = [
    "serve",
    "get",
    "post",
    "put",
    "delete",
    "options",
    "completions",
    "man",
];

/// `D` and digits, not inside a word: `D13`, `(D7)`.
fn rule_numbers(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    for (i, _) in text.match_indices('D') {
        let starts_word = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        let digits = bytes[i + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
        if starts_word && digits > 0 {
            found.push(text[i..i + 1 + digits].to_owned());
        }
    }
    found
}

#[test]
fn no_help_text_cites_a_rule_number() {
    assert_eq!(rule_numbers("see D13 and (D7), not DELETE or ID3"), ["D13", "D7"]);
    for command in [&[][..]]
        .into_iter()
        .chain(COMMANDS.iter().map(std::slice::from_ref))
    {
        let text = help(command);
        assert!(
            rule_numbers(&text).is_empty(),
            "{command:?}: {:?}\n{text}",
            rule_numbers(&text)
        );
    }
}

#[test]
fn each_command_lists_the_options_curl_users_expect() {
    // As in curl, content and -X go with every method: `get -d` is a POST,
    // `get -T` a PUT.
    let everywhere = [
        "--data",
        "--upload-file",
        "--key",
        "--request",
        "--include",
        "--head",
        "--remote-name",
        "--output",
        "--header",
        "--lenient",
        "--verbose",
        "--silent",
        "--write-out",
        "--timeout",
    ];
    for command in ["get", "post", "put", "delete", "options"] {
        let text = help(&[command]);
        for option in everywhere {
            assert!(text.contains(option), "{command} --help lacks {option}");
        }
        // curl's flags that mean nothing here are answered, not listed.
        for hidden in ["--location", "--form", "--proxy"] {
            assert!(!text.contains(hidden), "{command} --help lists {hidden}");
        }
        assert!(!text.contains("--root"), "{command}");
    }
    let serve = help(&["serve"]);
    for option in ["--data", "--header", "--output", "--timeout"] {
        assert!(!serve.contains(option), "serve --help lists {option}");
    }
    // And the parser agrees: options that contradict each other are a
    // usage error, exit 2, before any connection.
    for args in [
        &["get", "127.0.0.1:1/", "--data", "x", "-T", "f"][..],
        &["get", "127.0.0.1:1/", "-I", "-o", "x"],
        &["get", "127.0.0.1:1/", "-O", "-o", "x"],
    ] {
        let out = jsontp(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!stderr(&out).contains("connect"), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn help_shows_examples_and_the_exit_statuses() {
    for command in ["get", "post", "put", "delete", "options"] {
        let text = help(&[command]);
        assert!(text.contains("Examples:\n  jsontp "), "{command}:\n{text}");
        for line in [
            "Exit status:",
            "0  the server answered with a 1xx-3xx status",
            "1  the server answered with a 4xx/5xx status",
            "2  no answer: a usage error, a connection or protocol error",
        ] {
            assert!(text.contains(line), "{command} --help lacks {line:?}:\n{text}");
        }
    }
    let top = help(&[]);
    assert!(top.contains("Examples:") && top.contains("Exit status"), "{top}");
    assert!(top.contains("-w '%{code}\\n'"), "the script example: {top}");
    let serve = help(&["serve"]);
    assert!(
        serve.contains("Examples:") && serve.contains("Exit status:"),
        "{serve}"
    );
    // The safe default, and why the token is better not on the command line.
    assert!(serve.contains("read-only"), "{serve}");
    assert!(
        serve.contains("`ps`") && serve.contains("JSONTP_TOKEN"),
        "{serve}"
    );
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["get"][..],
        &["fetch", "localhost/"],
        &["get", "localhost/", "--timeout", "soon"],
        &["get", "localhost/", "--timeout", "0"],
        &["get", "http://localhost/"],
    ] {
        let out = Command::new(BIN).args(args).output().expect("run jsontp");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
}
