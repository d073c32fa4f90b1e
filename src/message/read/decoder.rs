//! The incremental reader of a stream of messages (D1, D3, D19): the
//! peer's bytes in, whole messages read and judged, streamed content in
//! pieces, and the faults of the stream out. The connection machine's two
//! roles call only this; which path reads a message is chosen here.
//!
//! - A message at the front of fresh input is offered to the one shortcut
//!   (`quick.rs`), which frames and reads the common message in one pass,
//!   or gives up; otherwise the lexer ([`Scanner`]) frames it and the text
//!   reader reads it. Both fill the same envelope for the same judge, so
//!   the path never changes an answer.
//! - With content streaming on, the text of a message's `body.content` is
//!   taken out of the input in runs as the lexer finds them, decoded
//!   piece by piece, and handed out before the message itself (D19). A
//!   content written before its encoding, or before the fields that make
//!   the role's head of the message ([`Grammar::read_head`]), is held
//!   within the message limit until the message ends.
//! - A message refused before its end (too deep, D3) is read to its end and
//!   dropped: nothing in it is answered again (D1, D5).
//!
//! The decoder keeps no clock: the machine times messages from what it
//! reports ([`Decoder::in_message`], [`Decoder::messages_ended`]).

use std::ops::Range;

use super::framing::{ContentRun, Fault, Frame, Scan, Scanner, leading_whitespace};
use super::{
    Parsed, RequestContext, named_encoding, parse_request, parse_request_framed, parse_request_quick,
    parse_response, parse_response_framed, parse_response_quick,
};
use crate::message::buffer::Buffer;
use crate::message::codec::DecodeError;
use crate::message::{
    ContentDecoder, Encoding, MessageLimits, Rejection, Request, Response, Validation, ValueError,
};

/// The most decoded content one [`Decoded::Content`] piece carries (D19):
/// what a decompression bomb can make the reader hold at once.
pub(crate) const PIECE_BYTES: usize = 64 * 1024;

/// How many times the decoded content limit its text may take on the wire
/// (D19): a `\u00XX` escape writes one byte in six. Past it, `413`.
const TEXT_PER_CONTENT_BYTE: u64 = 6;

/// What a role reads a whole message as. The decoder chooses the path;
/// the role says only what kind of message comes.
pub(crate) trait Grammar {
    /// A message read and judged.
    type Read;
    /// The message at the start of `bytes`, if the one shortcut takes it:
    /// its length and what it reads as.
    fn read_whole(&self, bytes: &[u8], streams_content: bool) -> Option<(usize, Self::Read)>;
    /// The message the lexer framed (`bytes` are exactly it).
    fn read_framed(&self, bytes: &[u8], frame: &Frame) -> Self::Read;
    /// The limits on a message (D3), the decoder's own.
    fn limits(&self) -> &MessageLimits;
    /// What the bytes of a message before its content make (D19):
    /// `envelope` is them closed as if the content were `""`, or the
    /// whole message with its content taken out.
    fn read_head(&self, envelope: &[u8]) -> Head<Self::Read>;
}

/// What a role makes of the fields before a message's content (D19).
#[derive(Debug)]
pub(crate) enum Head<T> {
    /// The head, read as the whole message will be: the content streams,
    /// and the role is told the head first ([`Decoded::ContentHead`]).
    Read(T),
    /// The content streams; the role takes no head.
    Unread,
    /// The fields before the content do not make a message the role would
    /// take (one is written after the content, or is wrong): nothing says
    /// yet what the content is for, so it is held within the message
    /// limit, as content before its encoding is, and the head is read
    /// again once the message has ended.
    Pending,
}

/// Requests, read in `context` (a server).
pub(crate) struct Requests<'a> {
    pub(crate) context: RequestContext,
    pub(crate) limits: &'a MessageLimits,
}

impl Grammar for Requests<'_> {
    type Read = Result<Box<Request>, Rejection>;

    #[inline]
    fn read_whole(&self, bytes: &[u8], streams_content: bool) -> Option<(usize, Self::Read)> {
        parse_request_quick(bytes, self.context, self.limits, streams_content)
    }

    fn read_framed(&self, bytes: &[u8], frame: &Frame) -> Self::Read {
        parse_request_framed(bytes, frame, self.context, self.limits)
    }

    fn limits(&self) -> &MessageLimits {
        self.limits
    }

    /// A request's content streams past the message limit only once the
    /// fields before it make a request (D19: streaming senders write
    /// `body` last and `content` last in it), so that the server can
    /// decide from the head what becomes of the content before any of it
    /// is stored.
    fn read_head(&self, envelope: &[u8]) -> Head<Self::Read> {
        match parse_request(envelope, self.context, self.limits) {
            Ok(head) => Head::Read(Ok(Box::new(head))),
            Err(_) => Head::Pending,
        }
    }
}

/// Responses, checked as `validation` says (a client).
pub(crate) struct Responses<'a> {
    pub(crate) validation: Validation,
    pub(crate) limits: &'a MessageLimits,
}

impl Grammar for Responses<'_> {
    type Read = Result<Parsed<Response>, Rejection>;

    fn read_whole(&self, bytes: &[u8], streams_content: bool) -> Option<(usize, Self::Read)> {
        parse_response_quick(bytes, self.validation, self.limits, streams_content)
    }

    fn read_framed(&self, bytes: &[u8], frame: &Frame) -> Self::Read {
        parse_response_framed(bytes, frame, self.validation, self.limits)
    }

    fn limits(&self) -> &MessageLimits {
        self.limits
    }

    /// A client reads every response to its end: its content streams
    /// whatever comes before it, after the head when the fields before it
    /// make a response.
    fn read_head(&self, envelope: &[u8]) -> Head<Self::Read> {
        match parse_response(envelope, self.validation, self.limits) {
            Ok(head) => Head::Read(Ok(head)),
            Err(_) => Head::Unread,
        }
    }
}

/// What [`Decoder::next`] found in the input.
#[derive(Debug)]
pub(crate) enum Decoded<T> {
    /// No complete message (yet).
    Partial,
    /// A complete message, read.
    Message {
        /// What it reads as.
        read: T,
        /// How its content went, when it was streamed (D19): the message's
        /// own `body.content` then reads `""`.
        content: Option<ContentOutcome>,
    },
    /// The stream ended after the last complete message; `cut_short` when
    /// it ended inside one (D1).
    End {
        /// A message had begun.
        cut_short: bool,
    },
    /// A byte that cannot be framed (D1).
    Invalid {
        /// The byte, if the lexer pointed at one.
        byte: Option<u8>,
        /// What is wrong with it.
        fault: Fault,
    },
    /// The message passed the size limit (D3).
    TooLarge,
    /// The message, not ended yet, opened a level past the depth limit
    /// (D3). The rest of it is read and dropped, and the stream goes on
    /// with the next message; if it cannot end cleanly,
    /// [`Decoded::Abandoned`] follows.
    TooDeep,
    /// The message refused by [`Decoded::TooDeep`] cannot end cleanly: a
    /// framing fault, the size limit or the end of stream inside it. It
    /// had its one answer; the stream cannot be resynchronised (D1).
    Abandoned,
    /// The head of the message being received, before any piece of its
    /// content (D19), as [`Grammar::read_head`] read it: at the content's
    /// start when the fields before it make one, or, for content held
    /// until the message's end, then; at the end, a head that does not
    /// read comes too, as the refusal the whole message reads as. Its
    /// pieces follow as [`Decoded::Content`].
    ContentHead {
        /// The message but its content, read as the whole will be.
        head: T,
    },
    /// The next piece of the decoded content of the message being received
    /// (D19); never empty.
    Content(Vec<u8>),
    /// The content of the message being received passed the content limit
    /// (D19).
    ContentTooLarge {
        /// The limit, in decoded bytes.
        limit: usize,
    },
}

impl<T> Decoded<T> {
    /// Whether nothing more of the stream can be read after this: the
    /// decoder has dropped what it held, and the caller stops reading.
    pub(crate) fn ends_input(&self) -> bool {
        matches!(
            self,
            Decoded::End { .. }
                | Decoded::Invalid { .. }
                | Decoded::TooLarge
                | Decoded::Abandoned
                | Decoded::ContentTooLarge { .. }
        )
    }
}

/// How the streamed content of a message went (D19).
#[derive(Debug)]
pub(crate) enum ContentOutcome {
    /// Decoded whole; every piece went out as [`Decoded::Content`].
    Decoded,
    /// It did not decode: the rest was read and dropped. The message is
    /// refused at its end, in D5's order (level 4).
    Corrupt {
        /// The encoding it claimed.
        encoding: Encoding,
        /// What was wrong.
        why: ValueError,
    },
}

/// The content of the message being received, arriving in runs (D19).
#[derive(Debug)]
struct Inbound {
    /// `None` once the content failed to decode.
    decoder: Option<ContentDecoder>,
    encoding: Encoding,
    /// The content came before its encoding, or before the fields that
    /// make its head ([`Head::Pending`], D19): nothing can be decoded, or
    /// nothing says what the content is for, until the message has ended,
    /// so its text is held here, and the message is bounded by the
    /// message limit as if it were held whole (`413`, D3): only content
    /// written last streams past it.
    held_text: Option<Vec<u8>>,
    /// That held text passed the message limit.
    past_message_limit: bool,
    /// The closing quote has been seen; the decoder is being finished.
    ended: bool,
    /// The decoder is finished: every piece is out.
    finished: bool,
    /// Content text taken so far, and how much it may be (D19).
    text_bytes: u64,
    max_text_bytes: u64,
    /// Why the content failed to decode, once it has.
    fault: Option<ValueError>,
    /// The content passed the limit (D19).
    too_large: bool,
    /// Decoded bytes not yet handed out.
    ready: Vec<u8>,
}

impl Inbound {
    /// Content in `encoding`, within `limit` decoded bytes.
    fn new(encoding: Encoding, limit: usize) -> Inbound {
        Inbound {
            decoder: Some(ContentDecoder::new(encoding, limit)),
            encoding,
            held_text: None,
            past_message_limit: false,
            ended: false,
            finished: false,
            text_bytes: 0,
            // Past it, `413` without decoding on.
            max_text_bytes: (limit as u64)
                .saturating_mul(TEXT_PER_CONTENT_BYTE)
                .saturating_add(PIECE_BYTES as u64),
            fault: None,
            too_large: false,
            ready: Vec::new(),
        }
    }

    /// Takes in `text`, the next of the content's text (`last`: the
    /// closing quote follows it): decoded at once, up to a piece's worth,
    /// the rest kept by the decoder; past the bound on text, too large.
    fn feed(&mut self, text: &[u8], last: bool) {
        self.text_bytes += text.len() as u64;
        if self.text_bytes > self.max_text_bytes {
            self.too_large = true;
        } else if let Some(decoder) = &mut self.decoder {
            let result = decoder.decode(text, &mut self.ready, PIECE_BYTES);
            self.settle(result.map(|()| false));
        }
        self.ended = last;
    }

    /// How the content went, at the message's end.
    fn outcome(self) -> ContentOutcome {
        match self.fault {
            Some(why) => ContentOutcome::Corrupt {
                encoding: self.encoding,
                why,
            },
            None => ContentOutcome::Decoded,
        }
    }

    /// Takes in what a call of the decoder said: `Ok(true)` when it is
    /// finished.
    fn settle(&mut self, result: Result<bool, DecodeError>) {
        match result {
            Ok(finished) => self.finished |= finished,
            Err(DecodeError::TooLarge { .. }) => self.too_large = true,
            Err(DecodeError::Corrupt(why)) => {
                // The rest of the content is read and dropped; the message
                // is refused at its end (D5 level 4).
                self.fault = Some(why);
                self.decoder = None;
                self.ready.clear();
            }
        }
    }
}

/// What becomes of the bytes of the message being received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Intake {
    /// They are framed and read.
    Framing,
    /// The message was refused before its end (too deep, D3) and answered
    /// then: the rest of it is read and dropped, and nothing in it is
    /// answered again (D1, D5: one answer per message).
    Discarding,
}

/// A message that ended while the content it named the encoding of is
/// decoded: its bytes, copied out of the input, wait for the last piece.
#[derive(Debug)]
struct Held {
    bytes: Vec<u8>,
    frame: Frame,
}

/// The reader of one peer's stream of messages; see the module
/// documentation.
#[derive(Debug)]
pub(crate) struct Decoder {
    /// Received bytes not yet read.
    input: Buffer,
    scanner: Scanner,
    streams_content: bool,
    /// Up to how many decoded bytes a message's streamed content may
    /// carry (D19).
    max_content_bytes: usize,
    /// The content of the message being received, when it streams; boxed,
    /// so that a connection between messages does not carry it.
    inbound: Option<Box<Inbound>>,
    /// A message that ended while its content is decoded (D19); boxed, as
    /// `inbound`.
    held: Option<Box<Held>>,
    /// Whether the message being received is still read.
    intake: Intake,
    /// Messages ended so far, read or dropped.
    ended: u64,
}

impl Decoder {
    /// A reader of messages within `limits` (D3); `streams_content`: hand
    /// `body.content` out in pieces, within `max_content_bytes` decoded
    /// bytes (D19).
    pub(crate) fn new(limits: &MessageLimits, max_content_bytes: usize, streams_content: bool) -> Decoder {
        let scanner = Scanner::with_limit(limits.max_message_bytes).with_depth_limit(limits.max_depth);
        Decoder {
            input: Buffer::default(),
            scanner: if streams_content {
                scanner.with_content_runs()
            } else {
                scanner
            },
            streams_content,
            max_content_bytes,
            inbound: None,
            held: None,
            intake: Intake::Framing,
            ended: 0,
        }
    }

    /// Bytes from the peer.
    pub(crate) fn receive(&mut self, data: &[u8]) {
        self.input.compact();
        self.input.bytes.extend_from_slice(data);
    }

    /// Received bytes not yet read.
    pub(crate) fn buffered(&self) -> usize {
        self.input.len()
    }

    /// Whether a message has begun and its end is not yet read.
    pub(crate) fn in_message(&self) -> bool {
        self.scanner.in_message()
    }

    /// How many messages have ended so far (read or dropped).
    pub(crate) fn messages_ended(&self) -> u64 {
        self.ended
    }

    /// Whether the message being received streams its content (D19).
    pub(crate) fn is_streaming(&self) -> bool {
        self.inbound.is_some()
    }

    /// Whether the message being received was refused before its end and
    /// is being read to its end and dropped.
    pub(crate) fn is_discarding(&self) -> bool {
        self.intake == Intake::Discarding
    }

    /// Whether part of a message has been received (read or not): the
    /// input holds more than whitespace between messages.
    pub(crate) fn holds_input(&self) -> bool {
        let live = self.input.live();
        self.scanner.in_message() || leading_whitespace(live) < live.len()
    }

    /// Nothing more is read: what was buffered is dropped.
    pub(crate) fn stop(&mut self) {
        self.input.discard();
        self.inbound = None;
        self.held = None;
        self.intake = Intake::Framing;
    }

    /// Bytes of memory the input holds (capacity, not content).
    pub(crate) fn capacity(&self) -> usize {
        self.input.bytes.capacity()
    }

    /// Gives back input memory: all of it when nothing is buffered
    /// (`all`), or what is beyond the capacity kept for the next message.
    pub(crate) fn release(&mut self, all: bool) {
        if all && self.input.is_empty() {
            self.input.discard();
        } else {
            self.input.release();
        }
    }

    /// The next thing the stream has to say; `peer_ended`: no more bytes
    /// will come. After an item that [ends input](Decoded::ends_input),
    /// nothing more is read.
    #[inline]
    pub(crate) fn next<G: Grammar>(&mut self, grammar: &G, peer_ended: bool) -> Decoded<G::Read> {
        if let Some(decoded) = self.read_whole(grammar) {
            return decoded;
        }
        loop {
            if let Some(decoded) = self.next_piece() {
                return decoded;
            }
            if let Some(held) = self.held.take() {
                // Its content is all out: the message follows.
                let read = grammar.read_framed(&held.bytes, &held.frame);
                return Decoded::Message {
                    read,
                    content: self.inbound.take().map(|inbound| inbound.outcome()),
                };
            }
            if self.input.is_empty() && !self.scanner.in_message() && !peer_ended {
                return Decoded::Partial;
            }
            let found = self.scanner.scan(self.input.live());
            if self.intake == Intake::Discarding {
                match found {
                    Scan::Content(run) => {
                        let start = self.input.start;
                        self.input.bytes.drain(start + run.start()..start + run.end());
                        continue;
                    }
                    Scan::Complete(frame) => {
                        // The end of the message refused before it ended.
                        self.intake = Intake::Framing;
                        self.input.start += frame.end();
                        self.ended += 1;
                        continue;
                    }
                    // D1: its end is in doubt, or never comes; it had its
                    // one answer.
                    Scan::Error { .. } | Scan::TooLarge { .. } => return self.stopped(Decoded::Abandoned),
                    Scan::Partial if peer_ended => return self.stopped(Decoded::Abandoned),
                    // Reported once per message; never answered twice.
                    Scan::TooDeep { .. } => continue,
                    Scan::Partial => {}
                }
            }
            match found {
                Scan::Content(run) => {
                    // The envelope is still in the input: read before the
                    // run is taken.
                    let head = self
                        .content_envelope(&run)
                        .map_or(Head::Unread, |envelope| grammar.read_head(&envelope));
                    let hold = run.encoding().is_none() || matches!(head, Head::Pending);
                    self.take_run(run, grammar.limits(), hold);
                    if let Head::Read(head) = head {
                        return Decoded::ContentHead { head };
                    }
                }
                Scan::TooDeep { .. } => {
                    self.intake = Intake::Discarding;
                    self.inbound = None;
                    return Decoded::TooDeep;
                }
                found => return self.framed(found, grammar, peer_ended),
            }
        }
    }

    /// Drops what is held, for an item that ends input.
    fn stopped<T>(&mut self, decoded: Decoded<T>) -> Decoded<T> {
        self.stop();
        decoded
    }

    /// The message at the front of fresh input (nothing of it scanned or
    /// taken), read whole by the one shortcut if it takes it.
    #[inline]
    fn read_whole<G: Grammar>(&mut self, grammar: &G) -> Option<Decoded<G::Read>> {
        let fresh = !self.input.is_empty()
            && self.inbound.is_none()
            && self.held.is_none()
            && self.intake == Intake::Framing
            && self.scanner.at_boundary();
        if !fresh {
            return None;
        }
        let (len, read) = grammar.read_whole(self.input.live(), self.streams_content)?;
        // The whitespace after it goes too, as the lexer would drop it (D1).
        let after = self.input.live().get(len..).unwrap_or_default();
        self.input.start += len + leading_whitespace(after);
        self.scanner.message_read_elsewhere();
        self.ended += 1;
        Some(Decoded::Message { read, content: None })
    }

    /// What a scan found, other than content.
    fn framed<G: Grammar>(&mut self, found: Scan, grammar: &G, peer_ended: bool) -> Decoded<G::Read> {
        match found {
            Scan::Partial => {
                let idle = self.scanner.idle_prefix();
                self.scanner.drop_prefix(idle);
                self.input.start += idle;
                if peer_ended {
                    let cut_short = self.scanner.in_message();
                    return self.stopped(Decoded::End { cut_short });
                }
                Decoded::Partial
            }
            Scan::Complete(frame) => {
                let (start, end) = (frame.start(), frame.end());
                let base = self.input.start;
                let range = base + start..base + end;
                self.input.start += end;
                self.ended += 1;
                if self.name_content(range.clone(), &frame, grammar.limits()) {
                    return self.stopped(Decoded::TooLarge);
                }
                if let Some(held) = &self.held {
                    // Its head, now that every field is in, then its
                    // pieces; the call after them returns the held
                    // message. An empty content has none, as when the
                    // shortcut reads the message whole.
                    let text = self
                        .inbound
                        .as_ref()
                        .is_some_and(|inbound| inbound.text_bytes > 0);
                    if text {
                        match grammar.read_head(&held.bytes) {
                            Head::Read(head) => return Decoded::ContentHead { head },
                            // Every field is in, and they make no head: the
                            // message is refused whatever its content, as
                            // its read says, and the role knows it before
                            // the pieces it checks.
                            Head::Pending => {
                                let head = grammar.read_framed(&held.bytes, &held.frame);
                                return Decoded::ContentHead { head };
                            }
                            Head::Unread => {}
                        }
                    }
                    return self.next(grammar, peer_ended);
                }
                let read = grammar.read_framed(&self.input.bytes[range], &frame);
                Decoded::Message {
                    read,
                    content: self.inbound.take().map(|inbound| inbound.outcome()),
                }
            }
            Scan::Error { at, fault } => {
                let byte = self.input.live().get(at).copied();
                self.stopped(Decoded::Invalid { byte, fault })
            }
            Scan::TooLarge { .. } => self.stopped(Decoded::TooLarge),
            // Taken by `next` before it gets here.
            Scan::Content(_) | Scan::TooDeep { .. } => Decoded::Partial,
        }
    }

    /// The message at `range` ended. If its content was held (written
    /// before its encoding or its head, D19), the held text is decoded in
    /// the encoding the message names, and the message is [`Held`] until
    /// the last piece; `true` when the message, text included, is past the
    /// message limit (D3).
    fn name_content(&mut self, range: Range<usize>, frame: &Frame, limits: &MessageLimits) -> bool {
        let Some(inbound) = self.inbound.as_mut() else {
            return false;
        };
        let Some(text) = inbound.held_text.take() else {
            return false;
        };
        let bytes = &self.input.bytes[range];
        if text.len() + bytes.len() > limits.max_message_bytes {
            return true;
        }
        // Read as the role will read it; a message that does not read, or
        // names no encoding it knows, is refused on its own account.
        let named = named_encoding(bytes, frame, limits).unwrap_or(Encoding::Identity);
        self.held = Some(Box::new(Held {
            bytes: bytes.to_vec(),
            frame: *frame,
        }));
        **inbound = Inbound::new(named, self.max_content_bytes);
        inbound.feed(&text, true);
        false
    }

    /// At the first run of a content whose encoding was named before it
    /// (D19: the order streaming senders use), the message's bytes up to
    /// the content string closed as if the content were `""`: the whole
    /// envelope, when the sender wrote `body` last and `content` last in
    /// it. The content string is at level 2, in `body`, so a quote and two
    /// braces close it. Nothing of the message before the run has left the
    /// input yet: only runs are taken out of it, and the lexer drops
    /// nothing after the message's `{`.
    fn content_envelope(&self, run: &ContentRun) -> Option<Vec<u8>> {
        if !run.is_first() || run.encoding().is_none() {
            return None;
        }
        let start = self.scanner.message_start()?;
        let before = self.input.live().get(start..run.start())?;
        let mut envelope = Vec::with_capacity(before.len() + 3);
        envelope.extend_from_slice(before);
        envelope.extend_from_slice(b"\"}}");
        Some(envelope)
    }

    /// Takes a run of content text out of the input into the decoder
    /// (D19); the scan goes on where the run began. `hold`, at the first
    /// run: the content is held until the message ends, not decoded.
    fn take_run(&mut self, run: ContentRun, limits: &MessageLimits, hold: bool) {
        if run.is_first() {
            let mut inbound = Inbound::new(
                run.encoding().unwrap_or(Encoding::Identity),
                self.max_content_bytes,
            );
            if hold {
                inbound.held_text = Some(Vec::new());
            }
            self.inbound = Some(Box::new(inbound));
        }
        let range = self.input.start + run.start()..self.input.start + run.end();
        if let Some(inbound) = &mut self.inbound {
            let text = &self.input.bytes[range.clone()];
            let limit = limits.max_message_bytes;
            match &mut inbound.held_text {
                Some(held) if held.len() + text.len() <= limit => held.extend_from_slice(text),
                Some(_) => {
                    inbound.held_text = None;
                    inbound.past_message_limit = true;
                }
                None => inbound.feed(text, run.is_last()),
            }
        }
        self.input.bytes.drain(range);
    }

    /// The next thing the streamed content has to say, if any: a decoded
    /// piece, or the limit passed (D19).
    fn next_piece<T>(&mut self) -> Option<Decoded<T>> {
        let inbound = self.inbound.as_mut()?;
        if inbound.past_message_limit {
            return Some(self.stopped(Decoded::TooLarge));
        }
        if inbound.held_text.is_some() {
            // Nothing is decoded until the encoding is named.
            return None;
        }
        loop {
            if inbound.too_large {
                let limit = self.max_content_bytes;
                return Some(self.stopped(Decoded::ContentTooLarge { limit }));
            }
            if !inbound.ready.is_empty() {
                return Some(Decoded::Content(std::mem::take(&mut inbound.ready)));
            }
            let decoder = inbound.decoder.as_mut()?;
            if decoder.has_pending() {
                let result = decoder.decode(&[], &mut inbound.ready, PIECE_BYTES);
                inbound.settle(result.map(|()| false));
            } else if inbound.ended && !inbound.finished {
                let result = decoder.finish(&mut inbound.ready, PIECE_BYTES);
                inbound.settle(result);
            } else {
                return None;
            }
        }
    }
}
