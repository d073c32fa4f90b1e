//! A server that streams in both directions (D19): `GET /numbers/N`
//! answers N lines generated as the client reads them, never held whole;
//! `PUT` takes an upload of any size (spooled to a temporary file past
//! 1 MiB) and answers with its size and line count.
//!
//! ```text
//! cargo run --example stream_server
//! jsontp get jsontp://127.0.0.1:8080/numbers/10000000 | tail -1
//! seq 1 5000000 | jsontp put jsontp://127.0.0.1:8080/upload --file -
//! ```

use jsontp_protocol::io_adapters::server::{Handled, Incoming};
use std::io::{self, BufRead, BufReader, Read};

use jsontp_protocol::io_adapters::server::mio::MioServer;
use jsontp_protocol::io_adapters::server::{Handler, Reply, ServerOptions};
use jsontp_protocol::message::{Method, Response, Status, StatusCode};

/// `count` numbered lines, made as they are read.
struct Numbers {
    next: u64,
    count: u64,
    line: Vec<u8>,
    at: usize,
}

impl Read for Numbers {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.at == self.line.len() {
            if self.next == self.count {
                return Ok(0);
            }
            self.next += 1;
            self.line = format!("{}\n", self.next).into_bytes();
            self.at = 0;
        }
        let n = buf.len().min(self.line.len() - self.at);
        buf[..n].copy_from_slice(&self.line[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

struct Streams;

impl Handler for Streams {
    fn respond(&self, incoming: Incoming) -> Handled {
        let Incoming { request, upload, .. } = incoming;
        if request.method == Method::Put {
            // Small content is in the body; large content is the upload.
            let counted = match &upload {
                Some(upload) => upload.reader().and_then(count_lines),
                None => count_lines(request.body.content()),
            };
            return match counted {
                Ok((bytes, lines)) => Response::new(Status::new(
                    StatusCode::CREATED,
                    format!("{bytes} bytes, {lines} lines"),
                )),
                Err(e) => Response::internal_error(format!("cannot read the upload: {e}")),
            }
            .into();
        }
        let count = request
            .resource
            .path()
            .strip_prefix("/numbers/")
            .and_then(|n| n.parse().ok());
        let reply = match count {
            Some(count) => Reply::streamed(
                Response::new(Status::new(StatusCode::OK, "counting")),
                Numbers {
                    next: 0,
                    count,
                    line: Vec::new(),
                    at: 0,
                },
            ),
            None => Response::not_found("try /numbers/N").into(),
        };
        reply.into()
    }
}

fn count_lines(reader: impl Read) -> io::Result<(u64, u64)> {
    let (mut bytes, mut lines) = (0u64, 0u64);
    let mut reader = BufReader::new(reader);
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok((bytes, lines));
        }
        bytes += buf.len() as u64;
        lines += buf.iter().filter(|&&b| b == b'\n').count() as u64;
        let n = buf.len();
        reader.consume(n);
    }
}

fn main() -> io::Result<()> {
    let server = MioServer::bind("127.0.0.1:8080", Streams, ServerOptions::default())?;
    eprintln!("stream_server: listening on jsontp://{}", server.local_addr()?);
    server.run()
}
