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
