//! Request content as it arrives (D19): spooled (in memory, or a
//! temporary file past the spool's threshold), dropped once checked, or
//! refused, as the handler's check of its head decided; and, once the
//! request is complete, handed to it in the request or as an upload.

use super::super::spool::{MemoryHeld, Spool, SpoolError, Spooled};
use super::super::{HeadCheck, Upload};
use super::Driver;
use crate::machine::RequestId;
use crate::message::{Request, Response};

/// The content of the request being received (D19), as the handler's
/// check of its head decided ([`Handler::check_head`](super::super::Handler::check_head)). Whatever the
/// state, the machine still reads and checks every piece (D5's order
/// holds: a corrupt stream is still `400`, content past the limit `413`).
/// The head is checked once per exchange: a handshake's first request
/// under `ContinuePolicy::Ask`, or else the head before streamed content
/// (a full request after a `100` the policy gave included, D10).
///
/// ```text
///   Nothing ── head: Wanted, or a piece with no head ──► Spooling
///      │    ── head: Unwanted ──► Dropping ── the request ──► respond, content empty
///      │    ── head: Refused ───► Refused  ── the request ──► the answer
///      └─◄── the request, a rejection, or the connection's end
/// ```
#[derive(Debug)]
pub(super) enum Receiving {
    /// None arrives.
    Nothing,
    /// Exchange `id`'s content, spooled as it arrives; boxed, so that a
    /// connection receiving none does not carry it.
    Spooling { id: RequestId, spool: Box<Spool> },
    /// Exchange `id`'s answer does not depend on its content: each piece
    /// is dropped once the machine checked it, and the handler gets the
    /// request with empty content.
    Dropping { id: RequestId },
    /// Exchange `id` is refused whatever its content: each piece is
    /// dropped once checked, and `answer` goes out once the message has
    /// ended.
    Refused { id: RequestId, answer: Box<Response> },
}

impl Receiving {
    /// The exchange whose content this is, if any.
    pub(super) fn exchange(&self) -> Option<RequestId> {
        match self {
            Receiving::Nothing => None,
            Receiving::Spooling { id, .. } | Receiving::Dropping { id } | Receiving::Refused { id, .. } => {
                Some(*id)
            }
        }
    }

    /// What exchange `id`'s content becomes, as the check of its head
    /// decided; `None` when it is wanted (spooled as it comes).
    pub(super) fn decided(id: RequestId, check: HeadCheck) -> Option<Receiving> {
        match check {
            HeadCheck::Wanted => None,
            HeadCheck::Unwanted => Some(Receiving::Dropping { id }),
            HeadCheck::Refused(answer) => Some(Receiving::Refused { id, answer }),
        }
    }
}

/// What a complete request's content became.
pub(super) enum Taken {
    /// Its content, in the request (with its count against the memory
    /// budget, to drop once the handler has returned) or as an upload.
    Content(Option<Upload>, Option<MemoryHeld>),
    /// Nothing: it was refused from its envelope, with this answer.
    Refused(Box<Response>),
}

impl Driver {
    /// Spools a piece of exchange `id`'s content (D19), unless its head
    /// decided otherwise: then the piece, checked by the machine, is
    /// dropped here.
    pub(super) fn spool(&mut self, id: RequestId, data: &[u8]) {
        if self.receiving.exchange() != Some(id) {
            self.receiving = Receiving::Spooling {
                id,
                spool: Box::new(Spool::start(&self.settings.0.spool)),
            };
        }
        if let Receiving::Spooling { spool, .. } = &mut self.receiving {
            spool.push(data);
        }
    }

    /// Drops what was spooled for exchange `id` (a temporary file is
    /// deleted).
    pub(super) fn drop_spool(&mut self, id: RequestId) {
        if self.receiving.exchange() == Some(id) {
            self.receiving = Receiving::Nothing;
        }
    }

    /// The content spooled for exchange `id`, now that its request is
    /// complete and valid: put back into the request when it stayed in
    /// memory, an upload otherwise; or the answer decided from its
    /// envelope.
    pub(super) fn take_upload(&mut self, id: RequestId, request: &mut Request) -> Result<Taken, SpoolError> {
        let spool = match std::mem::replace(&mut self.receiving, Receiving::Nothing) {
            Receiving::Spooling { id: held, spool } if held == id => spool,
            Receiving::Refused { id: held, answer } if held == id => return Ok(Taken::Refused(answer)),
            // Unwanted: the request goes on with empty content.
            Receiving::Dropping { id: held } if held == id => return Ok(Taken::Content(None, None)),
            other => {
                self.receiving = other;
                return Ok(Taken::Content(None, None));
            }
        };
        match spool.finish()? {
            Spooled::Memory(bytes, held) => {
                request.body.replace_content(bytes);
                Ok(Taken::Content(None, Some(held)))
            }
            Spooled::File(upload) => Ok(Taken::Content(Some(upload), None)),
        }
    }
}
