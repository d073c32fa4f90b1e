//! What a handler answers with: a whole [`Response`], or a response head
//! whose content a reader streams (D19), such as a large file.

use std::fmt;
use std::io::Read;

use crate::message::Response;

/// A handler's answer.
///
/// Any [`Response`] converts into one (`response.into()`): its content is
/// held in memory and sent whole. [`Reply::streamed`] sends the content a
/// reader yields instead, piece by piece, with memory that does not grow
/// with its size.
pub struct Reply {
    response: Response,
    content: Option<Box<dyn Read + Send>>,
}

impl Reply {
    /// A response whose content `reader` yields, read and sent as the peer
    /// takes it (D19). `head` gives the status, the headers, and the body's
    /// encoding and other keys; content it holds is ignored. A `reader`
    /// that fails midway closes the connection once what was read has gone
    /// out, so that the peer sees a message cut short rather than a wrong
    /// one (D1); `identity` content must be UTF-8 text throughout, or the
    /// same happens.
    pub fn streamed(head: Response, reader: impl Read + Send + 'static) -> Reply {
        Reply {
            response: head,
            content: Some(Box::new(reader)),
        }
    }

    /// The response, or the head of a streamed one.
    pub fn response(&self) -> &Response {
        &self.response
    }

    /// Whether the content is streamed from a reader.
    pub fn is_streamed(&self) -> bool {
        self.content.is_some()
    }

    /// The response (or head) and the reader of a streamed content.
    pub fn into_parts(self) -> (Response, Option<Box<dyn Read + Send>>) {
        (self.response, self.content)
    }
}

impl From<Response> for Reply {
    fn from(response: Response) -> Reply {
        Reply {
            response,
            content: None,
        }
    }
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reply")
            .field("response", &self.response)
            .field("streamed", &self.content.is_some())
            .finish()
    }
}

/// The future of an `async` answer ([`Handled::Later`]).
pub type ReplyFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Reply> + Send>>;

/// What a [`Handler`](super::Handler) gives for a request: its reply, or
/// the future of one.
///
/// [`Handler::respond`](super::Handler::respond) runs where it may block
/// (a std connection's thread, a mio or io_uring worker, tokio's blocking
/// pool), so a synchronous answer is simply [`Now`](Handled::Now). An
/// `async` one is [`Later`](Handled::Later), and holds no thread while it
/// waits: the tokio server awaits it on the runtime; a mio or io_uring
/// worker polls it between its other connections' turns, whenever its
/// waker is woken. Either watches the connection meanwhile: a peer gone
/// drops the future, which cancels it, and so does a shutdown's drain
/// deadline. The std server runs it to its end on the connection's
/// thread. On mio, io_uring and std the future must need no runtime of
/// its own (no tokio timers or sockets): it may await anything woken from
/// another thread (a channel, a pool's job, a lock).
// Made and taken apart once per request, mostly `Now`: boxing the reply
// would cost every synchronous answer an allocation.
#[allow(clippy::large_enum_variant)]
pub enum Handled {
    /// The reply, ready.
    Now(Reply),
    /// The reply, once this future is ready.
    Later(ReplyFuture),
}

impl Handled {
    /// The reply `future` will give.
    pub fn later(future: impl std::future::Future<Output = Reply> + Send + 'static) -> Handled {
        Handled::Later(Box::pin(future))
    }

    /// The reply, awaited on this thread if it comes later: how the std
    /// server answers with an `async` handler. A future that panics
    /// answers `500`, as a handler that panics does.
    pub fn wait(self) -> Reply {
        match self {
            Handled::Now(reply) => reply,
            Handled::Later(mut future) => block_on(std::future::poll_fn(|cx| poll_caught(&mut future, cx))),
        }
    }
}

impl From<Reply> for Handled {
    fn from(reply: Reply) -> Handled {
        Handled::Now(reply)
    }
}

impl From<Response> for Handled {
    fn from(response: Response) -> Handled {
        Handled::Now(response.into())
    }
}

impl fmt::Debug for Handled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Handled::Now(reply) => f.debug_tuple("Now").field(reply).finish(),
            Handled::Later(_) => f.write_str("Later(..)"),
        }
    }
}

/// Polls an `async` answer once: its reply, or `500` if the future
/// panicked (the panic is logged; the connection goes on).
pub(crate) fn poll_caught(
    future: &mut ReplyFuture,
    cx: &mut std::task::Context<'_>,
) -> std::task::Poll<Reply> {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
        Ok(polled) => polled,
        Err(_) => {
            tracing::error!("the application panicked; answering 500");
            std::task::Poll::Ready(failed())
        }
    }
}

/// The answer to a request whose application failed: `500`.
pub(crate) fn failed() -> Reply {
    Response::from_code(
        crate::message::StatusCode::INTERNAL_SERVER_ERROR,
        "the server failed while answering this request",
    )
    .into()
}

/// Runs `future` to its end on this thread, parking it while the future
/// waits.
fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(value) => return value,
            Poll::Pending => std::thread::park(),
        }
    }
}
