//! Where a client command puts what it received: the content (stdout or
//! `-o FILE`) and the `-w` line for scripts.

use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};

use jsontp_protocol::message::Response;

/// Where the content goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Standard output, unless it is a terminal and the content is binary.
    Stdout,
    /// `--output -`: standard output, whatever the content.
    StdoutAnyway,
    /// `-o FILE`.
    File(PathBuf),
}

impl Destination {
    /// From `-o`: absent is stdout, `-` is stdout on purpose.
    pub fn from_arg(output: Option<&Path>) -> Destination {
        match output {
            None => Destination::Stdout,
            Some(path) if path == Path::new("-") => Destination::StdoutAnyway,
            Some(path) => Destination::File(path.to_path_buf()),
        }
    }
}

/// Why the content was not written.
#[derive(Debug)]
pub enum WriteError {
    /// Binary content, and stdout is a terminal.
    BinaryToTerminal,
    /// The file could not be created or written.
    File(PathBuf, io::Error),
    /// Stdout failed (a closed pipe is not reported: `| head` is fine).
    Stdout(io::Error),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // curl's words, for the same guard.
            WriteError::BinaryToTerminal => f.write_str(
                "binary output can mess up your terminal; use -o FILE or --output - to write it anyway",
            ),
            WriteError::File(path, e) => write!(f, "cannot write {}: {e}", path.display()),
            WriteError::Stdout(e) => write!(f, "cannot write the content: {e}"),
        }
    }
}

/// Whether bytes would upset a terminal: not UTF-8 text, or carrying a
/// NUL (curl's test).
pub fn is_binary(content: &[u8]) -> bool {
    content.contains(&0) || std::str::from_utf8(content).is_err()
}

/// Writes the content where it goes. A file is written only for a `2xx`
/// answer: an error or a `304` leaves an existing file as it was, as curl
/// leaves it when no content comes.
pub fn write_content(
    destination: &Destination,
    response: &Response,
    content: &[u8],
) -> Result<(), WriteError> {
    match destination {
        Destination::File(path) => {
            if !(200..300).contains(&response.status.code.as_u16()) {
                return Ok(());
            }
            File::create(path)
                .and_then(|mut file| file.write_all(content))
                .map_err(|e| WriteError::File(path.clone(), e))
        }
        Destination::Stdout if io::stdout().is_terminal() && is_binary(content) => {
            Err(WriteError::BinaryToTerminal)
        }
        Destination::Stdout | Destination::StdoutAnyway => {
            let mut out = io::stdout().lock();
            match out.write_all(content).and_then(|()| out.flush()) {
                Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(WriteError::Stdout(e)),
                _ => Ok(()),
            }
        }
    }
}

/// `-w FORMAT`: text with `%{name}` variables, written to stdout after the
/// content, as curl's `--write-out`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOut {
    pieces: Vec<Piece>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Code,
    FormalMessage,
    HumanMessage,
    Resource,
}

/// The variables `-w` knows, for the help and the error message.
pub const WRITE_OUT_VARIABLES: &str =
    "%{code} (also %{http_code}, %{response_code}), %{formal_message}, %{human_message}, %{resource}";

impl WriteOut {
    /// Reads the format; an unknown variable is refused before anything is
    /// sent. `\n`, `\t`, `\\` and `%%` are the escapes.
    pub fn parse(format: &str) -> Result<WriteOut, String> {
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut rest = format;
        while let Some(c) = rest.chars().next() {
            rest = &rest[c.len_utf8()..];
            match c {
                '%' if rest.starts_with('%') => {
                    text.push('%');
                    rest = &rest[1..];
                }
                '%' if rest.starts_with('{') => {
                    let Some(end) = rest.find('}') else {
                        return Err(format!("-w {format:?}: a %{{ without its }}"));
                    };
                    let piece = match &rest[1..end] {
                        "code" | "http_code" | "response_code" => Piece::Code,
                        "formal_message" => Piece::FormalMessage,
                        "human_message" => Piece::HumanMessage,
                        "resource" => Piece::Resource,
                        other => {
                            return Err(format!(
                                "-w: unknown variable %{{{other}}}; known: {WRITE_OUT_VARIABLES}"
                            ));
                        }
                    };
                    if !text.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut text)));
                    }
                    pieces.push(piece);
                    rest = &rest[end + 1..];
                }
                '\\' => {
                    match rest.chars().next() {
                        Some('n') => text.push('\n'),
                        Some('t') => text.push('\t'),
                        Some('r') => text.push('\r'),
                        Some('\\') => text.push('\\'),
                        _ => {
                            text.push('\\');
                            continue;
                        }
                    }
                    rest = &rest[1..];
                }
                c => text.push(c),
            }
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(WriteOut { pieces })
    }

    /// The line for this response.
    pub fn render(&self, response: &Response) -> String {
        let mut line = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => line.push_str(text),
                Piece::Code => line.push_str(&response.status.code.as_u16().to_string()),
                Piece::FormalMessage => line.push_str(response.status.formal_message()),
                Piece::HumanMessage => line.push_str(&response.status.human_message),
                Piece::Resource => line.push_str(&response.resource),
            }
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsontp_protocol::message::{Status, StatusCode};

    fn response(code: u16, human: &str) -> Response {
        let code = StatusCode::from_u16(code).expect("a status code");
        Response::new(Status::new(code, human.to_owned())).with_resource("/x")
    }

    #[test]
    fn write_out_fills_in_the_variables() {
        let format = WriteOut::parse("%{code}").expect("valid");
        assert_eq!(format.render(&response(404, "no file")), "404");
        let format = WriteOut::parse("%{http_code} %{formal_message}: %{human_message} (%{resource})\\n")
            .expect("valid");
        assert_eq!(
            format.render(&response(404, "no file")),
            "404 Not Found: no file (/x)\n"
        );
        let format = WriteOut::parse("100%% \\t%{response_code}\\\\\\q é").expect("valid");
        assert_eq!(format.render(&response(200, "ok")), "100% \t200\\\\q é");
    }

    #[test]
    fn write_out_refuses_what_it_does_not_know() {
        let unknown = WriteOut::parse("%{size}").unwrap_err();
        assert!(
            unknown.contains("%{size}") && unknown.contains("%{code}"),
            "{unknown}"
        );
        assert!(WriteOut::parse("%{code").unwrap_err().contains("without"));
        // A lone % that starts no variable is text.
        assert_eq!(
            WriteOut::parse("50%")
                .expect("valid")
                .render(&response(200, "ok")),
            "50%"
        );
    }

    #[test]
    fn binary_is_what_is_not_text_or_holds_a_nul() {
        assert!(!is_binary(b"Hello, world!\n"));
        assert!(!is_binary("héllo\t\r\n".as_bytes()));
        assert!(!is_binary(b""));
        assert!(is_binary(&[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a]));
        assert!(is_binary(b"text\0more"));
    }

    #[test]
    fn dash_is_stdout_on_purpose() {
        assert_eq!(Destination::from_arg(None), Destination::Stdout);
        assert_eq!(
            Destination::from_arg(Some(Path::new("-"))),
            Destination::StdoutAnyway
        );
        assert_eq!(
            Destination::from_arg(Some(Path::new("logo.png"))),
            Destination::File("logo.png".into())
        );
    }
}
