//! The blocking client: std only, one connection, requests in, answers out.
//!
//! ```no_run
//! use jsontp_protocol::io_adapters::client::ClientOptions;
//! use jsontp_protocol::io_adapters::client::blocking::Client;
//! use jsontp_protocol::message::{Method, Request};
//!
//! let mut client = Client::connect("127.0.0.1:8080", ClientOptions::default())?;
//! let request = Request::new(Method::Get, "/hello.txt".parse()?);
//! let answer = client.send(request)?;
//! println!("{}", answer.response.body.as_text().unwrap_or(""));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The socket stays blocking, every call bounded by a timeout: a request
//! being written goes out in slices of at most 20 ms, and when the server
//! stops taking it the client reads what the server sent meanwhile, then
//! writes again. So a client pipelining many requests keeps reading
//! responses while it writes (otherwise both sides could stop with full
//! buffers), without a thread or a poller of its own; with nothing to
//! write it blocks in one read until the nearest deadline, so an answer is
//! taken the moment it arrives.

use std::fmt;
use std::net::{TcpStream, ToSocketAddrs};

use super::drive::READ_CHUNK;
use super::{Answer, ClientError, ClientOptions, Direction, connect, only};
use super::{Call, Driver, Step, Streams};
use crate::io_adapters::transport::{IoMode, Transport};
use crate::message::Request;

/// A blocking client on one connection (keep-alive: every request on it
/// until one side closes), over TCP or any blocking [`Transport`].
pub struct Client<S = TcpStream> {
    stream: S,
    driver: Driver,
    scratch: Box<[u8]>,
}

impl<S> fmt::Debug for Client<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("options", self.driver.options())
            .field("closed", &self.driver.is_closed())
            .finish_non_exhaustive()
    }
}

impl Client<TcpStream> {
    /// Connects to `addr` (`"host:port"` or a `SocketAddr`), each address
    /// tried bounded by [`ClientOptions::connect_timeout`].
    pub fn connect(
        addr: impl ToSocketAddrs + fmt::Display,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        let stream = connect(addr, options.connect_timeout)?;
        Ok(Client::from_stream(stream, options))
    }
}

#[cfg(feature = "tls")]
impl Client<crate::io_adapters::tls::TlsStream<TcpStream>> {
    /// Connects to `addr` over TLS (D20), checking the server's certificate
    /// against `server_name` (a DNS name or an IP address) as `tls` says.
    /// The handshake is done here, bounded by
    /// [`ClientOptions::connect_timeout`]: a failure is
    /// [`ClientError::Tls`].
    pub fn connect_tls(
        addr: impl ToSocketAddrs + fmt::Display,
        server_name: &str,
        tls: &crate::io_adapters::tls::ClientTls,
        options: ClientOptions,
    ) -> Result<Self, ClientError> {
        let shown = addr.to_string();
        let failed = |source| ClientError::Tls {
            addr: shown.clone(),
            source,
        };
        let stream = connect(addr, options.connect_timeout)?;
        let mut stream = tls.connect(server_name, stream).map_err(failed)?;
        stream.handshake(options.connect_timeout).map_err(|e| {
            if crate::io_adapters::transport::would_block(&e) {
                ClientError::TimedOut(super::Timeout::Connect)
            } else {
                failed(e)
            }
        })?;
        Ok(Client::from_stream(stream, options))
    }
}

impl<S: Transport> Client<S> {
    /// Runs a client over a connected, blocking stream (TCP, a Unix
    /// socket, a TLS stream). Set `TCP_NODELAY` on a TCP stream first:
    /// requests are written whole, and Nagle would only delay them.
    pub fn from_stream(stream: S, options: ClientOptions) -> Client<S> {
        Client {
            stream,
            driver: Driver::new(options, IoMode::Blocking),
            scratch: vec![0; READ_CHUNK].into_boxed_slice(),
        }
    }

    /// The stream underneath.
    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    /// The options in use.
    pub fn options(&self) -> &ClientOptions {
        self.driver.options()
    }

    /// Calls `tracer` with every byte written and read (for `-vv`).
    pub fn set_tracer(&mut self, tracer: impl FnMut(Direction, &[u8]) + Send + 'static) {
        self.driver.set_tracer(Box::new(tracer));
    }

    /// Whether the connection can take no more requests.
    pub fn is_closed(&self) -> bool {
        self.driver.is_closed()
    }

    /// Sends one request and waits for its answer.
    pub fn send(&mut self, request: Request) -> Result<Answer, ClientError> {
        only(self.send_all([request]))
    }

    /// Sends every request at once (pipelining, D2) and waits for all the
    /// answers. One outcome per request, in order; an error that ends the
    /// connection is the outcome of every request still unanswered.
    pub fn send_all(
        &mut self,
        requests: impl IntoIterator<Item = Request>,
    ) -> Vec<Result<Answer, ClientError>> {
        let call = self.driver.begin(requests);
        self.run(call, Streams::default())
    }

    /// Sends `request` and writes the response's content to `sink` as it
    /// arrives, in constant memory whatever its size (D19); the answer's
    /// own body is then empty. Needs
    /// [`ClientConfig::stream_content`](crate::machine::ClientConfig::stream_content)
    /// on (else the content is held in memory and returned in the answer,
    /// as [`send`](Self::send) does). If the response is refused after
    /// content went to `sink`, the error says so and what `sink` holds is
    /// to be discarded.
    pub fn download(
        &mut self,
        request: Request,
        sink: &mut dyn std::io::Write,
    ) -> Result<Answer, ClientError> {
        let call = self.driver.begin([request]);
        let outcome = only(self.run(call, Streams::new(None, Some(&mut *sink))));
        whole_content_to(outcome, sink)
    }

    /// Sends `request` with the content `source` yields, read and sent as
    /// the server takes it (D19), encoded as `request.body`'s encoding says
    /// (its own content is ignored); the response's content goes to `sink`
    /// when given, else into the answer.
    pub fn upload<'s>(
        &mut self,
        request: Request,
        source: &'s mut dyn std::io::Read,
        sink: Option<&'s mut dyn std::io::Write>,
    ) -> Result<Answer, ClientError> {
        let call = self.driver.begin_upload(request);
        match sink {
            Some(sink) => {
                let outcome = only(self.run(call, Streams::new(Some(source), Some(&mut *sink))));
                whole_content_to(outcome, sink)
            }
            None => only(self.run(call, Streams::new(Some(source), None))),
        }
    }

    /// Steps `call` to its end.
    fn run(&mut self, mut call: Call, mut streams: Streams<'_>) -> Vec<Result<Answer, ClientError>> {
        loop {
            match self
                .driver
                .step(&mut self.stream, &mut self.scratch, &mut call, &mut streams)
            {
                Step::Done => break,
                // Waiting for neither direction: only a timer can move.
                Step::Wait {
                    read: false,
                    write: false,
                    deadline,
                } => {
                    let now = self.driver.now().instant;
                    if let Some(left) = deadline.map(|d| d.saturating_duration_since(now)) {
                        std::thread::sleep(left);
                    }
                }
                // The timed-out read or write was the wait. Drain and Fill
                // are only for staged streams, which this client does not
                // use: its sink and source are written and read in the
                // step.
                Step::Wait { .. } | Step::Drain | Step::Fill => {}
            }
        }
        self.driver.finish(call)
    }
}

/// A download's answer: content that did not stream goes to the sink too
/// ([`Answer::take_whole_content`]).
fn whole_content_to(
    outcome: Result<Answer, ClientError>,
    sink: &mut dyn std::io::Write,
) -> Result<Answer, ClientError> {
    let mut answer = outcome?;
    sink.write_all(&answer.take_whole_content())
        .map_err(ClientError::Sink)?;
    Ok(answer)
}
