//! Streamed replies (D19): a reply whose content a reader gives is read
//! as the machine makes room for it, a piece at a time, in response order
//! (D2); its reader ends it, or cuts it short by failing.

use std::collections::VecDeque;
use std::io::Read;

use super::Driver;
use crate::machine::{Now, RequestId};

/// The most a streamed reply's reader is asked for at once (D19): the one
/// buffer a streaming connection holds besides the machine's.
pub(super) const READ_PIECE: usize = 64 * 1024;

/// The replies whose content is read from their readers (D19).
#[derive(Debug, Default)]
pub(super) struct Streaming {
    /// In response order (D2): the machine takes content for the front one
    /// only; the next goes on when it ends.
    pub(super) replies: VecDeque<Streamed>,
    /// The buffer the content is read into.
    pub(super) piece: Vec<u8>,
}

/// A reply whose content a reader gives, as the machine takes it (D19).
pub(super) struct Streamed {
    pub(super) id: RequestId,
    pub(super) reader: Box<dyn std::io::Read + Send>,
}

impl std::fmt::Debug for Streamed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streamed")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Driver {
    /// Whether a reply's content is still being read from its reader.
    pub(super) fn streams(&self) -> bool {
        self.streaming.is_some()
    }

    /// Whether the streamed reply in front can give more content now (D19).
    pub(super) fn content_due(&self) -> bool {
        self.streaming
            .as_ref()
            .and_then(|streaming| streaming.replies.front())
            .is_some_and(|front| self.conn.content_room(front.id) > 0)
    }

    /// Reads the streamed replies' content while the machine has room for
    /// it, up to a turn's worth; ends or aborts each when its reader does
    /// (D19). When one ends, the next streamed reply in line takes its
    /// place.
    pub(super) fn send_content(&mut self, at: Now) {
        let Some(mut streaming) = self.streaming.take() else {
            return;
        };
        let mut budget = 4 * READ_PIECE;
        let Streaming { replies, piece } = &mut *streaming;
        while let Some(front) = replies.front_mut()
            && budget > 0
        {
            let id = front.id;
            let room = self.conn.content_room(id).min(READ_PIECE);
            if room == 0 {
                break;
            }
            if piece.len() < room {
                piece.resize(room, 0);
            }
            match front.reader.read(&mut piece[..room]) {
                Ok(0) => {
                    // The reader (a file) is closed now, not with the log.
                    replies.pop_front();
                    let _ = self.conn.end_content(id, at);
                }
                Ok(n) => {
                    budget = budget.saturating_sub(n);
                    self.count_content(id, n);
                    if let Err(error) = self.conn.send_content(id, &piece[..n], at) {
                        tracing::error!(%error, "the streamed reply cannot be sent; closing");
                        replies.pop_front();
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => {
                    // The peer sees the message cut short, not a wrong one
                    // (D1).
                    tracing::error!(%error, "reading the streamed reply failed; closing");
                    replies.pop_front();
                    self.conn.abort_content(id, at);
                }
            }
        }
        // Nothing streams any more: the buffer goes too.
        if !replies.is_empty() {
            self.streaming = Some(streaming);
        }
    }
}
