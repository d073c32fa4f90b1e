//! The examples and exit statuses shown by `--help`, and the hint for a
//! URL given without its method. The exit statuses here are the ones
//! `client::run` and `serve::run` return; the tests check each of them.

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};

use super::target::as_url;

/// clap's error for a command line, with a hint when the word clap took
/// for a command is a URL or `host:port` (`jsontp localhost/x`, as curl
/// is called): the same line with `get` before it. `args` are the
/// command line's words after the program's name.
pub fn with_verb_hint(mut error: clap::Error, args: &[OsString]) -> clap::Error {
    if error.kind() != ErrorKind::InvalidSubcommand {
        return error;
    }
    let Some(ContextValue::String(word)) = error.get(ContextKind::InvalidSubcommand) else {
        return error;
    };
    let Some(url) = as_url(word) else {
        return error;
    };
    let word = word.clone();
    let line: Vec<String> = args
        .iter()
        .map(|arg| {
            let arg = arg.to_string_lossy();
            if arg == word.as_str() {
                shell_word(&url)
            } else {
                shell_word(&arg)
            }
        })
        .collect();
    let hint = format!(
        "did you mean `jsontp get {}`? (the method comes first: get, post, put, delete or options)",
        line.join(" ")
    );
    error.insert(
        ContextKind::Suggested,
        ContextValue::StyledStrs(vec![hint.into()]),
    );
    error
}

/// A word as a POSIX shell reads it back: as it is when it holds nothing
/// the shell would act on, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:@%+,=".contains(&b));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// A client command's examples, then the exit statuses all of them share.
macro_rules! client_help {
    ($examples:literal) => {
        concat!(
            $examples,
            "\n\n",
            "\
Exit status:
  0  the server answered with a 1xx-3xx status
  1  the server answered with a 4xx/5xx status (one line on stderr says which)
  2  no answer: a usage error, a connection or protocol error, a timeout,
     or content that could not be written (one line on stderr says which)"
        )
    };
}

/// `jsontp --help`.
pub const TOP: &str = "\
Examples:
  jsontp serve --root site                     serve ./site, read-only, on 127.0.0.1:8080
  jsontp get localhost/hello.txt               print a file
  jsontp get localhost/logo.png -o logo.png    save a file
  jsontp put localhost/logo.png --file logo.png  upload a file
  jsontp get localhost/hello.txt -s -o /dev/null -w '%{code}\\n'
                                               print only the status code

Exit status of the client commands: 0 for a 1xx-3xx answer, 1 for a 4xx/5xx
answer, 2 when no answer came (usage, connection or protocol error).
`jsontp serve` exits 0 after ctrl-c or SIGTERM, 1 when it cannot start.";

/// `jsontp get --help`.
pub const GET: &str = client_help!(
    "\
Examples:
  jsontp get localhost/hello.txt
  jsontp get jsontp://example.com:9000/docs/?page=2 -v
  jsontp get localhost/logo.png -o logo.png
  jsontp get localhost/logo.png -O                  (saved as logo.png)
  jsontp get localhost/hello.txt -i                 (the answer's envelope, then the content)
  jsontp get localhost/hello.txt -H 'accept-language: fr-FR'
  jsontp get localhost/notes.txt -T notes.txt       (a PUT, as curl -T)
  jsontp get localhost/form -d 'name=Ada'           (a POST, as curl -d)
  jsontp get localhost/list --key 'nnntp={\"type\":\"list\"}'   (a body key, JSON)
  jsontp get localhost/hello.txt -s -o /dev/null -w '%{code}\\n'"
);

/// `jsontp post --help`.
pub const POST: &str = client_help!(
    "\
Examples:
  jsontp post localhost/form --data 'name=Ada&lang=en'
  jsontp post localhost/form --data @form.txt
  echo 'name=Ada' | jsontp post localhost/form --file -"
);

/// `jsontp put --help`.
pub const PUT: &str = client_help!(
    "\
Examples:
  jsontp put localhost/notes.txt --data 'remember the milk'
  jsontp put localhost/logo.png --file logo.png      (binary: sent as gzip)
  jsontp put localhost/big.txt --file big.txt --encoding br --continue
  jsontp put localhost/notes.txt --file - -H 'authorization: s3cret' < notes.txt"
);

/// `jsontp delete --help`.
pub const DELETE: &str = client_help!(
    "\
Examples:
  jsontp delete localhost/notes.txt
  jsontp delete localhost/notes.txt -H 'authorization: s3cret'"
);

/// `jsontp options --help`.
pub const OPTIONS: &str = client_help!(
    "\
Examples:
  jsontp options localhost/notes.txt      prints: GET, POST, PUT, DELETE, OPTIONS"
);

/// `jsontp serve --help`.
pub const SERVE: &str = "\
By default the server is read-only (PUT and DELETE answer 405) and listens on
127.0.0.1 only. --writable opens writes to anyone who can connect; a token
opens them to the requests that carry it. Give the token in JSONTP_TOKEN or
--token-file rather than --token, which every user sees in `ps`; giving it
two ways is a usage error.

A file goes out in the encoding the client's accept-encoding picks. A large
file (over 64 KiB) streams, compressed only as hard as the link repays: its
bytes as they are while the client takes them as fast as they come, more
compression as the link backs up (random-looking bytes are never compressed).

Examples:
  jsontp serve                                  the current folder, read-only, on 127.0.0.1:8080
  jsontp serve --root site --addr 0.0.0.0:9000  every interface, port 9000
  jsontp serve --addr 9000 --list               127.0.0.1:9000, folders listed
  jsontp serve --writable                       PUT and DELETE for anyone
  JSONTP_TOKEN=s3cret jsontp serve              PUT and DELETE need `authorization: s3cret`
  jsontp serve --token-file /etc/jsontp/token   the same, the token read from a file
  jsontp serve --config /etc/jsontp/jsontp.toml the settings from a TOML file; flags and
                                                JSONTP_* win over it; SIGHUP reloads it
  jsontp serve --config FILE --check-config     check the settings, print one line, exit 0 or 1
  jsontp serve --admin 127.0.0.1:9101          /metrics (Prometheus), /live, /ready on that port
  jsontp serve --drain-grace 2                  on SIGTERM, serve 2 s more while the health
                                                check (OPTIONS *) says 503, then drain

Signals:
  SIGTERM, ctrl-c  stop: finish the exchanges under way (--shutdown-timeout)
  SIGHUP           read the settings and certificates again; a bad one is refused
  SIGUSR2          upgrade in place: the program at the same path starts on the same
                   sockets; once it serves, this process hands over and drains

Exit status:
  0    stopped by ctrl-c or SIGTERM, after finishing the exchanges under way
  1    could not start (the folder is missing, the address is in use, ...),
       or --check-config found the settings not valid
  2    a usage error
  130  a second ctrl-c or SIGTERM: stopped at once";

/// `jsontp completions --help`.
pub const COMPLETIONS: &str = "\
Examples:
  jsontp completions bash > ~/.local/share/bash-completion/completions/jsontp
  jsontp completions zsh > ~/.zfunc/_jsontp
  jsontp completions fish > ~/.config/fish/completions/jsontp.fish";

/// `jsontp man --help`.
pub const MAN: &str = "\
Examples:
  jsontp man > jsontp.1 && man ./jsontp.1
  jsontp man serve > jsontp-serve.1";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_the_shell_would_act_on_them() {
        assert_eq!(shell_word("localhost:8080/a.txt"), "localhost:8080/a.txt");
        // zsh refuses an unmatched glob: brackets are quoted.
        assert_eq!(shell_word("[::1]:9000/x"), "'[::1]:9000/x'");
        assert_eq!(shell_word("host/x?a=1&b=2"), "'host/x?a=1&b=2'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
