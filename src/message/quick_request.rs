//! The one-pass reader of `quick.rs`, straight into a typed [`Request`].
//!
//! Nearly every request a server reads is valid and written the common
//! way. For those, filling an [`Envelope`](super::envelope::Envelope) and
//! then judging it builds, walks and drops a picture of the message that
//! is read only once. This reader judges each field as it reads it, with
//! the functions the judging uses, and builds the [`Request`] as it goes.
//!
//! It is all or nothing. At the first thing it does not take it gives up
//! (`None`): anything the envelope reader leaves to the general path, a
//! field missing, a value the judging would refuse, a `status`, an
//! `expect` header (the handshake of D10 changes what the body means).
//! The caller then reads the message through the envelope, which gives the
//! same request or names the problem D5's order puts first; so the order
//! in which this reader meets problems never shows.

use std::borrow::Cow;
use std::mem::ManuallyDrop;

use smallvec::SmallVec;

use super::envelope::listed_header;
use super::header_values::{HeaderValue, request_header};
use super::headers::HeaderName;
use super::parse::decode_content;
use super::quick::{FIELDS, FOLLOWS, Reader, read_by};
use super::syntax::Loose;
use super::{Body, Encoding, Headers, MessageLimits, Method, Request, Version};

/// Reads the request at `start` of `bytes` (after the whitespace before
/// it): the offset one past its closing `}` and the request, or `None` to
/// leave it to the envelope. `streams_content`: as for [`super::quick::read`].
#[inline]
pub(crate) fn read<R: From<Request>>(
    bytes: &[u8],
    start: usize,
    limits: &MessageLimits,
    streams_content: bool,
) -> Option<(usize, R)> {
    let mut request = Request::placeholder();
    let end = read_into(bytes, start, limits, streams_content, &mut request)?;
    Some((end, R::from(request)))
}

/// [`read`] into `request`, a [`Request::placeholder`], filled where it
/// stands (it is a few hundred bytes): the offset one past the message's
/// closing `}`. On `None`, what `request` holds is not a request read.
#[inline]
pub(crate) fn read_into(
    bytes: &[u8],
    start: usize,
    limits: &MessageLimits,
    streams_content: bool,
    request: &mut Request,
) -> Option<usize> {
    read_by(
        bytes,
        start,
        limits,
        request,
        Request::placeholder,
        |reader, request| reader.request(limits, streams_content, request),
    )
}

/// How nearly every request begins: the version and the type, in the
/// protocol's order, compact.
const USUAL_START: &[u8] = br#"{"jsontp":"1.0","type":"request","#;

impl<'a> Reader<'a> {
    /// The fields in any order, each once, into `out`; all but `status`
    /// are needed.
    fn request(&mut self, limits: &MessageLimits, streams_content: bool, out: &mut Request) -> Option<()> {
        // The fields read so far, as bits of their indexes in FIELDS.
        let mut seen = 0u8;
        let mut body = None;
        let mut likely = 0;
        if self.take_literal(USUAL_START) {
            out.version = Version::V1_0;
            seen = 0b11;
            likely = 2;
        } else if !self.open(b'{', b'}')? {
            return None;
        }
        loop {
            let field = self.field(&FIELDS, likely)?;
            likely = FOLLOWS[field];
            let bit = 1 << field;
            // `status`, or a field written twice.
            if field == 6 || seen & bit != 0 {
                return None;
            }
            seen |= bit;
            match field {
                0 => out.version = self.version()?,
                1 => self.take_quoted("request", None).then_some(())?,
                2 => out.resource = self.string()?.parse().ok()?,
                3 => out.method = Method::from_wire(self.string()?)?,
                4 => self.request_headers(&mut out.headers, limits)?,
                _ => body = Some(self.request_body(streams_content)?),
            }
            if !self.more(b'}')? {
                break;
            }
        }
        if seen != 0b11_1111 {
            return None;
        }
        let (encoding, content) = body?;
        if streams_content && content.is_some() && encoding != Encoding::Identity {
            return None;
        }
        let content = match content {
            Some(content) => decode_content(content, encoding, limits).ok()?,
            None if out.method.requires_content() => return None,
            // D9: on other methods a missing `content` means "".
            None => Vec::new(),
        };
        out.body = Body::from_parts(content, encoding, None);
        Some(())
    }

    /// A version this implementation speaks (D6).
    fn version(&mut self) -> Option<Version> {
        if self.take_quoted("1.0", None) {
            return Some(Version::V1_0);
        }
        self.string()?
            .parse::<Version>()
            .ok()
            .filter(|version| version.is_supported())
    }

    /// Listed names only (D8), each once, no more than the limit (D3), no
    /// `expect`, each value as the judging takes it.
    fn request_headers(&mut self, headers: &mut Headers, limits: &MessageLimits) -> Option<()> {
        if !self.open(b'{', b'}')? {
            return Some(());
        }
        let mut seen = 0u16;
        let mut count = 0;
        loop {
            let listed = listed_header(self.key()?)?;
            let bit = 1u16 << listed;
            count += 1;
            if seen & bit != 0 || count > limits.max_headers {
                return None;
            }
            seen |= bit;
            let name = HeaderName::from_index(listed)?;
            if name == HeaderName::Expect {
                return None;
            }
            // A string or a boolean is judged as the envelope holds it,
            // an array of strings from a list on the stack. The first two
            // hold nothing to drop: the enum's drop glue is not called.
            let (string, flag);
            let mut items = SmallVec::<[&str; 8]>::new();
            let value = match self.peek()? {
                b'"' => {
                    string = ManuallyDrop::new(Loose::Str(Cow::Borrowed(self.string()?)));
                    HeaderValue::Loose(&string)
                }
                b'[' => {
                    self.strings_with(|item| items.push(item))?;
                    HeaderValue::Strings(&items)
                }
                _ => {
                    flag = ManuallyDrop::new(Loose::Bool(self.boolean()?));
                    HeaderValue::Loose(&flag)
                }
            };
            request_header(name, value, headers, &mut None).ok()?;
            if !self.more(b'}')? {
                return Some(());
            }
        }
    }

    /// The body's encoding, which must be there (D9) and be one of the
    /// four, and its content, as written (see [`Reader::body_object`]).
    fn request_body(&mut self, streams_content: bool) -> Option<(Encoding, Option<&'a str>)> {
        let mut encoding = None;
        let mut content = None;
        self.body_object(
            streams_content,
            |reader| Self::fill(&mut encoding, reader.encoding()?),
            |text| Self::fill(&mut content, text),
        )?;
        Some((encoding?, content))
    }

    fn encoding(&mut self) -> Option<Encoding> {
        if self.take_quoted("identity", None) {
            return Some(Encoding::Identity);
        }
        self.string()?.parse().ok()
    }
}

/// Whether the general path gives the same request, framed at the same
/// end, whenever [`read`] reads one from `bytes`, in either context and
/// whether content streams or not. See [`super::quick::agrees_with_general`].
pub(crate) fn agrees_with_general(bytes: &[u8], limits: &MessageLimits) -> bool {
    use super::RequestContext;
    use super::framing::{Scan, Scanner, leading_whitespace};
    use super::parse::parse_request_framed;
    [false, true].into_iter().all(|streams_content| {
        let Some((end, request)) = read::<Request>(bytes, leading_whitespace(bytes), limits, streams_content)
        else {
            return true;
        };
        let Scan::Complete(frame) = Scanner::with_limit(limits.max_message_bytes).scan(bytes) else {
            return false;
        };
        frame.end() == end
            && [RequestContext::Fresh, RequestContext::AfterContinue]
                .into_iter()
                .all(|context| {
                    parse_request_framed::<Request>(&bytes[frame.range()], &frame, context, limits).as_ref()
                        == Ok(&request)
                })
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::message::framing::leading_whitespace;
    use crate::message::{RejectionKind, RequestContext, parse_request};

    const GET: &str = r#"{"jsontp":"1.0","type":"request","resource":"/hello.txt","method":"GET","headers":{"accept-encoding":["gzip","identity"],"accept-language":"en-US","if-modified-since":"2021-06-01T00:00:00Z+0000"},"body":{"content":"","encoding":"identity"}}"#;

    fn reads(text: &str, streams_content: bool) -> Option<(usize, Request)> {
        let limits = MessageLimits::default();
        assert!(agrees_with_general(text.as_bytes(), &limits), "{text}");
        read::<Request>(
            text.as_bytes(),
            leading_whitespace(text.as_bytes()),
            &limits,
            streams_content,
        )
    }

    #[test]
    fn reads_valid_requests_as_the_envelope_does() {
        let (end, request) = reads(GET, false).expect("the typical GET");
        assert_eq!(end, GET.len());
        assert_eq!(request.resource.path(), "/hello.txt");
        assert_eq!(request.method, Method::Get);
        assert_eq!(
            request.headers.accept_language().map(|l| l.len()),
            Some(1),
            "{request:?}"
        );
        assert!(request.headers.if_modified_since().is_some());
        // Any order, whitespace, a pipelined message behind, other values.
        let others = [
            format!(" {}\n{GET}", GET.replace(',', " ,\n ").replace("\":", "\" :")),
            r#"{"body":{"encoding":"gzip","content":"H4sIAAAAAAAAA8tIzcnJBwCGphA2BQAAAA=="},"headers":{},"method":"PUT","resource":"/a/b?c=d","type":"request","jsontp":"1.2-rc3"}"#.to_owned(),
            r#"{"jsontp":"1.0","type":"request","resource":"/","method":"DELETE","headers":{"Accept":"text/*;q=0.5","cookies":"a=b","ignore-invalid-headers":false,"date":"x"},"body":{"encoding":"identity"}}"#.to_owned(),
        ];
        // `reads` checks each against the general path, in both contexts.
        for text in &others {
            assert!(reads(text, false).is_some(), "{text}");
        }
        let (_, put) = reads(&others[1], false).expect("gzip");
        assert_eq!(put.body.content(), b"hello");
        // D19: content to stream is left to the lexer; none, or "" in
        // identity, is read.
        assert!(reads(GET, true).is_some());
        assert!(reads(&others[1], true).is_none());
        assert!(reads(&others[2], true).is_some());
    }

    #[test]
    fn leaves_every_refusal_and_the_handshake_to_the_envelope() {
        let limits = MessageLimits::default();
        // What the general path answers for each: the refusal this reader
        // must not hide, or (`None`) a request it must leave alone.
        let cases: [(String, Option<RejectionKind>); 16] = [
            (
                GET.replacen("1.0", "2.0", 1),
                Some(RejectionKind::UnsupportedVersion),
            ),
            (GET.replacen("1.0", "one", 1), Some(RejectionKind::Version)),
            (
                GET.replacen("\"request\"", "\"response\"", 1),
                Some(RejectionKind::Envelope),
            ),
            (
                GET.replacen("/hello.txt", "http://x/", 1),
                Some(RejectionKind::Envelope),
            ),
            (GET.replacen("GET", "get", 1), Some(RejectionKind::Envelope)),
            (GET.replacen("en-US", "english", 1), Some(RejectionKind::Envelope)),
            (
                GET.replacen("2021-06-01", "2021-13-01", 1),
                Some(RejectionKind::Envelope),
            ),
            (
                GET.replacen("\"gzip\"", "\"gzip;q=2\"", 1),
                Some(RejectionKind::Envelope),
            ),
            (
                GET.replacen("\"identity\"}", "\"zip\"}", 1),
                Some(RejectionKind::Encoding),
            ),
            (
                GET.replacen(",\"method\":\"GET\"", "", 1),
                Some(RejectionKind::Envelope),
            ),
            (
                GET.replacen("\"encoding\":\"identity\"", "\"content\":\"\"", 1)
                    .replacen("\"content\":\"\",", "", 1),
                Some(RejectionKind::Envelope),
            ),
            (
                GET.replacen("\"GET\"", "\"PUT\"", 1)
                    .replacen("\"content\":\"\",", "", 1),
                Some(RejectionKind::Content),
            ),
            (
                GET.replacen("}}", "},\"status\":{\"code\":200}}", 1),
                Some(RejectionKind::Envelope),
            ),
            (
                GET.replacen("\"identity\"}", "\"gzip\"}", 1).replacen(
                    "\"content\":\"\"",
                    "\"content\":\"@@\"",
                    1,
                ),
                Some(RejectionKind::Content),
            ),
            (
                GET.replacen("{\"accept", "{\"expect\":\"100-continue\",\"accept", 1),
                None,
            ),
            (
                GET.replacen("{\"accept", "{\"expect\":\"magic\",\"accept", 1),
                Some(RejectionKind::Expectation),
            ),
        ];
        for (text, refusal) in &cases {
            assert_ne!(text, GET);
            assert!(reads(text, false).is_none(), "{text}");
            let parsed = parse_request(text.as_bytes(), RequestContext::Fresh, &limits);
            assert_eq!(
                parsed.as_ref().err().map(|r| r.kind()),
                *refusal,
                "{text}: {parsed:?}"
            );
        }
        // More headers than the limit (D3): 431 from the general path.
        let few = MessageLimits {
            max_headers: 2,
            ..limits
        };
        assert!(read::<Request>(GET.as_bytes(), 0, &few, false).is_none());
        assert!(agrees_with_general(GET.as_bytes(), &few));
    }

    proptest! {
        #[test]
        fn agrees_on_requests_made_of_valid_and_invalid_pieces(
            version in prop::sample::select(vec!["1.0", "1.1", "2.0", "x"]),
            resource in prop::sample::select(vec!["/", "/a/../b", "/%41?x=1", "a", "//", "/a b"]),
            method in prop::sample::select(vec!["GET", "PUT", "POST", "DELETE", "OPTIONS", "get"]),
            headers in prop::collection::vec(
                prop::sample::select(vec![
                    r#""accept":"text/plain;q=0.5""#, r#""accept":["*/*",""]"#, r#""accept":"text""#,
                    r#""accept-encoding":"gzip, br;q=0""#, r#""accept-encoding":["zip"]"#,
                    r#""accept-encoding":"gzip;q=x""#, r#""accept-language":"en-US, fr""#,
                    r#""accept-language":"xx-YY""#, r#""if-unmodified-since":"2021-06-01T00:00:00Z+0000""#,
                    r#""if-modified-since":"yesterday""#, r#""content-type":"text/plain; charset=utf-8""#,
                    r#""content-type":"plain""#, r#""authorization":"Bearer x""#, r#""cookies":"a=b; c=d""#,
                    r#""ignore-invalid-headers":true"#, r#""ignore-invalid-headers":"yes""#,
                    r#""expect":"100-continue""#, r#""date":"any""#, r#""Accept":"*/*""#,
                ]),
                0..5,
            ),
            body in prop::sample::select(vec![
                r#"{"content":"","encoding":"identity"}"#, r#"{"encoding":"identity"}"#,
                r#"{"content":"hi","encoding":"identity"}"#, r#"{"content":"aGk=","encoding":"gzip"}"#,
                r#"{"content":"eJzLyAQAAQsA1g==","encoding":"deflate"}"#, r#"{"encoding":"br","content":""}"#,
                r#"{"content":""}"#, r#"{}"#,
            ]),
            order in prop::sample::select(vec![[0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [1, 0, 3, 2, 5, 4]]),
        ) {
            let fields = [
                format!(r#""jsontp":"{version}""#),
                r#""type":"request""#.to_owned(),
                format!(r#""resource":"{resource}""#),
                format!(r#""method":"{method}""#),
                format!(r#""headers":{{{}}}"#, headers.join(",")),
                format!(r#""body":{body}"#),
            ];
            let text = format!("{{{}}}", order.map(|i| fields[i].as_str()).join(","));
            prop_assert!(agrees_with_general(text.as_bytes(), &MessageLimits::default()), "{}", text);
        }
    }
}
