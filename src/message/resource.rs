//! The `resource` field (D7): seven shapes, parsed into their parts, the
//! original string kept for the echo.

use core::net::{Ipv4Addr, Ipv6Addr};
use std::fmt;
use std::str::FromStr;

use super::{ValueError, words};

/// A parsed `resource`.
///
/// One string holds everything: the resource as written, followed by the
/// normalised path only when that path is not already a slice of it (the
/// usual `/hello.txt` is). The parts are byte ranges into it, so a parse
/// makes one allocation at most, not one per part, and none when the
/// string is short enough to be held in place (nearly every path is).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Resource {
    /// The original string, then (sometimes) the normalised path.
    text: Text,
    /// Where the original string ends in `text`.
    original_end: usize,
    scheme: bool,
    host: Option<Span>,
    port: Option<u16>,
    path: Span,
    query: Option<Span>,
    fragment: Option<Span>,
}

/// How many bytes of text a [`Resource`] holds in place: a path as
/// requests usually name one fits, and costs no allocation to parse, to
/// copy or to drop.
const IN_PLACE: usize = 22;

/// The text of a [`Resource`]: in place when it is short, else on the
/// heap. Compared and hashed as the string it holds, however it holds it.
#[derive(Clone)]
enum Text {
    /// The first `len` bytes of `bytes`, copied from a `str`.
    InPlace {
        len: u8,
        bytes: [u8; IN_PLACE],
    },
    Heap(String),
}

impl Text {
    /// `s`, in place if it fits.
    #[inline]
    fn copied(s: &str) -> Text {
        match u8::try_from(s.len()) {
            Ok(len) if s.len() <= IN_PLACE => {
                let mut bytes = [0; IN_PLACE];
                bytes[..s.len()].copy_from_slice(s.as_bytes());
                Text::InPlace { len, bytes }
            }
            _ => Text::Heap(s.to_owned()),
        }
    }

    #[inline]
    fn as_str(&self) -> &str {
        match self {
            Text::InPlace { len, bytes } => {
                let bytes = bytes.get(..usize::from(*len)).unwrap_or_default();
                // SAFETY: the bytes were copied whole from a `str`
                // (`copied`), so they are UTF-8.
                #[allow(unsafe_code)]
                unsafe {
                    std::str::from_utf8_unchecked(bytes)
                }
            }
            Text::Heap(text) => text,
        }
    }

    #[inline]
    fn len(&self) -> usize {
        self.as_str().len()
    }

    #[inline]
    fn get<I: std::slice::SliceIndex<str>>(&self, range: I) -> Option<&I::Output> {
        self.as_str().get(range)
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

impl std::hash::Hash for Text {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

/// A byte range of [`Resource::text`]; always on character boundaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Span {
    start: usize,
    end: usize,
}

impl Span {
    /// The range that `part`, a slice of `whole`, occupies in it.
    fn of(whole: &str, part: &str) -> Span {
        let start = (part.as_ptr() as usize).wrapping_sub(whole.as_ptr() as usize);
        Span {
            start,
            end: start + part.len(),
        }
    }
}

impl Resource {
    /// The text of a span; `""` cannot happen (spans are made in `from_str`
    /// on character boundaries of `text`) but is safer than a panic.
    #[inline]
    fn part(&self, span: Span) -> &str {
        self.text.get(span.start..span.end).unwrap_or_default()
    }

    /// `text`, all of it a path from the root already in normal form:
    /// no host, no query, no fragment.
    fn path_only(text: Text) -> Resource {
        let end = text.len();
        Resource {
            text,
            original_end: end,
            scheme: false,
            host: None,
            port: None,
            path: Span { start: 0, end },
            query: None,
            fragment: None,
        }
    }

    /// The string exactly as the request wrote it; responses echo it (D7).
    #[inline]
    pub fn as_str(&self) -> &str {
        self.text.get(..self.original_end).unwrap_or_default()
    }

    /// Whether it was written with the `jsontp://` scheme.
    pub fn has_scheme(&self) -> bool {
        self.scheme
    }

    /// The host, if the shape carries one. Ignored by default (D7).
    pub fn host(&self) -> Option<&str> {
        self.host.map(|s| self.part(s))
    }

    /// The port, if written.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The path, percent-decoded and normalised, always starting with `/`
    /// and never climbing above the root.
    #[inline]
    pub fn path(&self) -> &str {
        self.part(self.path)
    }

    /// The query, without `?`, as written.
    pub fn query(&self) -> Option<&str> {
        self.query.map(|s| self.part(s))
    }

    /// The fragment, without `#`, as written.
    pub fn fragment(&self) -> Option<&str> {
        self.fragment.map(|s| self.part(s))
    }
}

impl fmt::Debug for Resource {
    /// The parts by name, as a derived `Debug` would show them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resource")
            .field("original", &self.as_str())
            .field("scheme", &self.scheme)
            .field("host", &self.host())
            .field("port", &self.port)
            .field("path", &self.path())
            .field("query", &self.query())
            .field("fragment", &self.fragment())
            .finish()
    }
}

impl FromStr for Resource {
    type Err = ValueError;

    /// One of the seven shapes of D7, with D7's host rule for a first
    /// segment without a leading `/`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        plain_path(s).map_or_else(|| parse_any(s), Ok)
    }
}

/// The resource nearly every request names: a path from the root, in
/// printable ASCII, already in normal form, with no query and no
/// fragment. One pass over it, where the general reading takes four; the
/// same [`Resource`] as the general reading gives, or `None` for it to
/// read.
#[inline]
fn plain_path(s: &str) -> Option<Resource> {
    let segments = s.strip_prefix('/')?.as_bytes();
    // Eight bytes at a time while every one is plain and none is a `/`:
    // the exact test runs from the first word that flags one, the
    // segment still starting at the first byte.
    let (from, _) = words::first_flagged(segments, 0, |word| {
        words::below(word, b'!')
            | words::high(word)
            | words::equal(word, 0x7f)
            | words::equal(word, b'%')
            | words::equal(word, b'?')
            | words::equal(word, b'#')
            | words::equal(word, b'/')
    });
    segments_in_normal_form(segments, from, |b| !plain_byte(b)).then(|| Resource::path_only(Text::copied(s)))
}

/// Printable ASCII, and none of the bytes that start an escape, a query
/// or a fragment.
#[inline]
fn plain_byte(b: u8) -> bool {
    matches!(b, b'!'..=b'~') && !matches!(b, b'%' | b'?' | b'#')
}

/// Any resource: one of the seven shapes of D7, with D7's host rule for a
/// first segment without a leading `/`.
fn parse_any(s: &str) -> Result<Resource, ValueError> {
    if s.is_empty() {
        return Err(refuse("is empty"));
    }
    if has_control_or_space(s) {
        return Err(refuse("contains a control character or a space"));
    }
    // The fragment starts at the first `#`, the query at the first `?`
    // before it (RFC 3986 §3.4, §3.5); both are kept as written.
    let (rest, fragment) = split_off(s, b'#');
    let (rest, query) = split_off(rest, b'?');

    let (scheme, host, port, raw_path) = if let Some(after) = strip_prefix_ignore_case(rest, "jsontp://") {
        let (authority, path) = after.split_at(find_byte(after, b'/').unwrap_or(after.len()));
        if authority.is_empty() {
            return Err(refuse("has jsontp:// without a host"));
        }
        let (host, port) = authority_parts(authority)?;
        (true, Some(host), port, path)
    } else if rest.starts_with('/') {
        // A scheme starts with a letter: no need to look for one.
        (false, None, None, rest)
    } else if has_scheme(rest) {
        return Err(refuse("uses another scheme than jsontp://"));
    } else {
        match rest.split_once('/') {
            Some((first, _)) if is_host_segment(first) => {
                let (host, port) = authority_parts(first)?;
                (false, Some(host), port, &rest[first.len()..])
            }
            // Not a host: the whole string is a path from the root.
            _ => (false, None, None, rest),
        }
    };

    let text;
    let path = match normal_form(raw_path) {
        // Already normal: a slice of the original.
        Some(NormalForm::AsWritten) => {
            text = Text::copied(s);
            Span::of(s, raw_path)
        }
        // Normal once a `/` is put in front.
        Some(NormalForm::WithRoot) => {
            let mut joined = String::with_capacity(s.len() + 1 + raw_path.len());
            joined.push_str(s);
            joined.push('/');
            joined.push_str(raw_path);
            text = Text::Heap(joined);
            Span {
                start: s.len(),
                end: text.len(),
            }
        }
        None => {
            let path = normalise_path(raw_path)?;
            let mut joined = String::with_capacity(s.len() + path.len());
            joined.push_str(s);
            joined.push_str(&path);
            text = Text::Heap(joined);
            Span {
                start: s.len(),
                end: text.len(),
            }
        }
    };
    Ok(Resource {
        text,
        original_end: s.len(),
        scheme,
        host: host.map(|h| Span::of(s, h)),
        port,
        path,
        query: query.map(|q| Span::of(s, q)),
        fragment: fragment.map(|f| Span::of(s, f)),
    })
}

fn refuse(reason: &'static str) -> ValueError {
    ValueError::new(reason)
}

/// Whether `s` holds a space or a control character (Unicode `Cc`: C0,
/// DEL, and C1, which UTF-8 writes `C2 80`-`C2 9F`), in one pass over the
/// bytes.
fn has_control_or_space(s: &str) -> bool {
    let bytes = s.as_bytes();
    // Eight bytes at a time while none can be one: a byte at or below
    // `' '`, DEL or `C2` (which may begin a C1 control) flags the word, and
    // the exact test runs from there.
    let (from, _) = words::first_flagged(bytes, 0, |word| {
        words::below(word, 0x21) | words::equal(word, 0x7f) | words::equal(word, 0xC2)
    });
    bytes[from..].iter().enumerate().any(|(i, &b)| {
        b <= b' ' || b == 0x7f || (b == 0xC2 && bytes.get(from + i + 1).is_some_and(|&next| next < 0xA0))
    })
}

/// The index of the first `byte` in `s`. A resource is short: a plain loop
/// beats setting up a vectorised search.
fn find_byte(s: &str, byte: u8) -> Option<usize> {
    s.bytes().position(|b| b == byte)
}

/// `s` before the first `sep`, and what follows it if `sep` occurs.
fn split_off(s: &str, sep: u8) -> (&str, Option<&str>) {
    match find_byte(s, sep) {
        // `sep` is ASCII, so both sides are on character boundaries.
        Some(at) => (&s[..at], Some(&s[at + 1..])),
        None => (s, None),
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &s[prefix.len()..])
}

/// Whether `s` starts with `scheme://` (RFC 3986 §3.1 scheme syntax): a
/// letter, then letters, digits, `+`, `-`, `.`, then `://`.
fn has_scheme(s: &str) -> bool {
    let bytes = s.as_bytes();
    if !bytes.first().is_some_and(|b| b.is_ascii_alphabetic()) {
        return false;
    }
    let end = bytes
        .iter()
        .position(|&b| !(b.is_ascii_alphanumeric() || b"+-.".contains(&b)))
        .unwrap_or(bytes.len());
    bytes[end..].starts_with(b"://")
}

/// How a raw path (no `%`) relates to its normal form, when it needs no
/// decoding and no segment removed.
enum NormalForm {
    /// The path is its own normal form.
    AsWritten,
    /// The normal form is `/` followed by the path.
    WithRoot,
}

/// Whether [`normalise_path`] would give back `raw` itself (or `/` then
/// `raw`): no `%`, and no empty, `.` or `..` segment except an empty last
/// one (a trailing `/`, which the normal form keeps). `None`: the full
/// normalisation is needed.
fn normal_form(raw: &str) -> Option<NormalForm> {
    let (segments, form) = match raw.strip_prefix('/') {
        Some(after) => (after, NormalForm::AsWritten),
        None => (raw, NormalForm::WithRoot),
    };
    segments_in_normal_form(segments.as_bytes(), 0, |b| b == b'%').then_some(form)
}

/// Whether the segments of a path (what follows its first `/`) are in
/// normal form, in one pass: no empty, `.` or `..` segment but an empty
/// last one (a trailing `/`, or the root), and no byte `refused` flags.
/// The bytes before `from` are known to be neither refused nor `/`.
#[inline]
fn segments_in_normal_form(segments: &[u8], from: usize, refused: impl Fn(u8) -> bool) -> bool {
    let mut start = 0;
    for (i, &b) in segments.iter().enumerate().skip(from) {
        if refused(b) {
            return false;
        }
        if b == b'/' {
            if matches!(&segments[start..i], b"" | b"." | b"..") {
                return false;
            }
            start = i + 1;
        }
    }
    !matches!(&segments[start..], b"." | b"..")
}

/// D7: a first segment followed by `/` is a host when it is `localhost`, an
/// IPv4 literal, a bracketed IPv6 literal, carries `:port`, or is a dotted
/// name whose last label is alphabetic. (`readme.md/x` is therefore the host
/// `readme.md`: `md` is alphabetic.)
fn is_host_segment(segment: &str) -> bool {
    segment.eq_ignore_ascii_case("localhost")
        || segment.starts_with('[')
        || segment.contains(':')
        || segment.parse::<Ipv4Addr>().is_ok()
        || is_dotted_name(segment)
}

/// `label.label…` of letters, digits and `-`, the last label letters only.
fn is_dotted_name(s: &str) -> bool {
    let Some((_, last)) = s.rsplit_once('.') else {
        return false;
    };
    !last.is_empty()
        && last.bytes().all(|b| b.is_ascii_alphabetic())
        && s.split('.')
            .all(|label| !label.is_empty() && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
}

/// `host` or `host:port`, the host a name, an IPv4 literal or `[IPv6]`.
/// The host is returned as written (an IPv6 literal with its brackets).
fn authority_parts(authority: &str) -> Result<(&str, Option<u16>), ValueError> {
    let (host, port) = if authority.starts_with('[') {
        let Some(end) = authority.find(']') else {
            return Err(refuse("has an IPv6 host without its closing ]"));
        };
        let (host, after) = authority.split_at(end + 1);
        if host[1..end].parse::<Ipv6Addr>().is_err() {
            return Err(refuse("has a host in [ ] that is not an IPv6 address"));
        }
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err(refuse("has characters after the IPv6 host's ]")),
            },
        }
    } else {
        let (host, port) = split_off(authority, b':');
        let is_name = |h: &str| {
            h.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
        };
        if host.is_empty() {
            return Err(refuse("has a port without a host"));
        }
        if !is_name(host) {
            return Err(refuse("has a host that is not a host name or address"));
        }
        (host, port)
    };
    let port = match port {
        None => None,
        Some(p) if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) => {
            return Err(refuse("has a port that is not a number from 1 to 65535"));
        }
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n != 0 => Some(n),
            _ => return Err(refuse("has a port outside 1-65535")),
        },
    };
    Ok((host, port))
}

/// Percent-decodes `raw` and resolves it from the root: `.` and empty
/// segments dropped, `..` removing the previous segment. A decoded `/` is a
/// separator like any other, so `%2e%2e%2f` climbs too. The result starts
/// with `/` and ends with `/` when the last segment was empty, `.` or `..`
/// (a directory), except for the root itself.
fn normalise_path(raw: &str) -> Result<String, ValueError> {
    let decoded = percent_decode(raw)?;
    let mut segments: Vec<&str> = Vec::new();
    let mut directory = false;
    for segment in decoded.split('/') {
        directory = matches!(segment, "" | "." | "..");
        match segment {
            "" | "." => {}
            ".." => {
                if segments.pop().is_none() {
                    return Err(refuse("climbs above the root with .."));
                }
            }
            _ => segments.push(segment),
        }
    }
    let mut path = String::with_capacity(decoded.len() + 1);
    for segment in &segments {
        path.push('/');
        path.push_str(segment);
    }
    if path.is_empty() || directory {
        path.push('/');
    }
    Ok(path)
}

/// `%XX` to the byte `XX`; the result must be UTF-8 without NUL.
fn percent_decode(raw: &str) -> Result<String, ValueError> {
    if !raw.contains('%') {
        return Ok(raw.to_owned());
    }
    let mut bytes = Vec::with_capacity(raw.len());
    let mut rest = raw.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        if b != b'%' {
            bytes.push(b);
            continue;
        }
        let decoded = rest
            .first_chunk::<2>()
            .and_then(|&[hi, lo]| Some(hex(hi)? << 4 | hex(lo)?));
        let Some(decoded) = decoded else {
            return Err(refuse("has a % not followed by two hex digits"));
        };
        if decoded == 0 {
            return Err(refuse("has a percent-encoded NUL (%00)"));
        }
        bytes.push(decoded);
        rest = &rest[2..];
    }
    String::from_utf8(bytes).map_err(|_| refuse("is not UTF-8 once percent-decoded"))
}

fn hex(digit: u8) -> Option<u8> {
    char::from(digit).to_digit(16).map(|d| d as u8)
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(s: &str) -> Resource {
        s.parse().unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    #[test]
    fn short_text_is_held_in_place_and_reads_as_the_same_string_either_way() {
        use std::hash::{BuildHasher, RandomState};
        let hasher = RandomState::new();
        // Around the in-place size, in characters of one to four bytes.
        for filler in ["a", "é", "€", "😀"] {
            for count in 0..=IN_PLACE + 2 {
                let path = format!("/{}", filler.repeat(count));
                let parsed = res(&path);
                assert_eq!(parsed.as_str(), path);
                assert_eq!(parsed.path(), path);
                let in_place = matches!(parsed.text, Text::InPlace { .. });
                assert_eq!(in_place, path.len() <= IN_PLACE, "{path}");
                // However the text is held, the same string is the same
                // resource, with the same hash.
                let mut other = parsed.clone();
                other.text = Text::Heap(path.clone());
                assert_eq!(parsed, other);
                assert_eq!(hasher.hash_one(&parsed), hasher.hash_one(&other));
            }
        }
        // A resource whose normal path is appended to it: on the heap.
        let joined = res("/a/../b");
        assert_eq!((joined.as_str(), joined.path()), ("/a/../b", "/b"));
        assert_ne!(res("/ab"), res("/a"));
    }

    fn refusal(s: &str) -> String {
        match s.parse::<Resource>() {
            Ok(r) => panic!("{s:?} was accepted as {r:?}"),
            Err(e) => e.reason().to_owned(),
        }
    }

    /// (host, port, path, query, fragment, scheme)
    type Parts<'a> = (
        Option<&'a str>,
        Option<u16>,
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
        bool,
    );

    fn parts(r: &Resource) -> Parts<'_> {
        (
            r.host(),
            r.port(),
            r.path(),
            r.query(),
            r.fragment(),
            r.has_scheme(),
        )
    }

    #[test]
    fn d7_the_seven_shapes() {
        assert_eq!(
            parts(&res("/sub/page.txt")),
            (None, None, "/sub/page.txt", None, None, false)
        );
        assert_eq!(
            parts(&res("/hello.txt?x=1&y=2")),
            (None, None, "/hello.txt", Some("x=1&y=2"), None, false)
        );
        assert_eq!(
            parts(&res("hello.txt")),
            (None, None, "/hello.txt", None, None, false)
        );
        assert_eq!(
            parts(&res("localhost/hello.txt")),
            (Some("localhost"), None, "/hello.txt", None, None, false)
        );
        assert_eq!(
            parts(&res("localhost:8080/hello.txt")),
            (Some("localhost"), Some(8080), "/hello.txt", None, None, false)
        );
        assert_eq!(
            parts(&res("localhost:8080/hello.txt?q=1#top")),
            (
                Some("localhost"),
                Some(8080),
                "/hello.txt",
                Some("q=1"),
                Some("top"),
                false
            )
        );
        assert_eq!(
            parts(&res("jsontp://localhost:8080/hello.txt")),
            (Some("localhost"), Some(8080), "/hello.txt", None, None, true)
        );
    }

    #[test]
    fn d7_original_is_kept_for_the_echo() {
        for s in ["/a/../b", "localhost:8080/x?q#f", "JSONTP://h/%41", "x"] {
            assert_eq!(res(s).as_str(), s);
            assert_eq!(res(s).to_string(), s);
        }
    }

    #[test]
    fn d7_scheme_forms() {
        assert_eq!(
            parts(&res("jsontp://host/path")),
            (Some("host"), None, "/path", None, None, true)
        );
        assert_eq!(
            parts(&res("jsontp://host")),
            (Some("host"), None, "/", None, None, true)
        );
        assert_eq!(
            parts(&res("JsonTP://h:1?q")),
            (Some("h"), Some(1), "/", Some("q"), None, true)
        );
        assert_eq!(
            parts(&res("jsontp://[::1]:9/x")),
            (Some("[::1]"), Some(9), "/x", None, None, true)
        );
    }

    #[test]
    fn d7_host_rule() {
        assert_eq!(res("example.com/x").host(), Some("example.com"));
        assert_eq!(res("sub.example.org/x").path(), "/x");
        assert_eq!(res("127.0.0.1/x").host(), Some("127.0.0.1"));
        assert_eq!(
            (res("[::1]:8080/x").host(), res("[::1]:8080/x").port()),
            (Some("[::1]"), Some(8080))
        );
        assert_eq!(res("[::1]/x").host(), Some("[::1]"));
        assert_eq!(res("LocalHost/x").host(), Some("LocalHost"));
        assert_eq!(res("myhost:80/x").host(), Some("myhost"));
        // `md` is alphabetic, so by D7 `readme.md/x` names the host readme.md.
        assert_eq!(
            parts(&res("readme.md/x")),
            (Some("readme.md"), None, "/x", None, None, false)
        );
        // Not hosts: the whole string is a path from the root.
        assert_eq!(
            parts(&res("index.html")),
            (None, None, "/index.html", None, None, false)
        );
        assert_eq!(
            parts(&res("sub/page.txt")),
            (None, None, "/sub/page.txt", None, None, false)
        );
        assert_eq!(res("v1.2/x").path(), "/v1.2/x"); // last label not alphabetic
        assert_eq!(res("999.1.1.1/x").path(), "/999.1.1.1/x"); // not an IPv4 address
        assert_eq!(res("a..b/x").path(), "/a..b/x"); // empty label
        assert_eq!(res("localhost").path(), "/localhost"); // no `/` follows
        assert_eq!(res("localhost:8080").path(), "/localhost:8080");
        assert_eq!(res("example.com?q").path(), "/example.com");
    }

    #[test]
    fn d7_paths_are_decoded_and_normalised() {
        assert_eq!(res("/").path(), "/");
        assert_eq!(res("//").path(), "/");
        assert_eq!(res("/a/../b").path(), "/b");
        assert_eq!(res("/a//b///c").path(), "/a/b/c");
        assert_eq!(res("/./a/./b/.").path(), "/a/b/");
        assert_eq!(res("/a/b/..").path(), "/a/");
        assert_eq!(res("/a/").path(), "/a/");
        assert_eq!(res("/a/..").path(), "/");
        assert_eq!(res("/%41%62c%20d").path(), "/Abc d");
        assert_eq!(res("/caf%C3%A9").path(), "/café");
        assert_eq!(res("/a%2Fb").path(), "/a/b");
        assert_eq!(res("/a/%2e%2E/b").path(), "/b");
        assert_eq!(res("/ü/x").path(), "/ü/x");
        assert_eq!(res("/a?b/../../c#d/..").path(), "/a"); // `..` in the query is not a path
        assert_eq!(res("/p#f?g").query(), None);
        assert_eq!(res("/p#f?g").fragment(), Some("f?g"));
        assert_eq!(res("/p?").query(), Some(""));
    }

    #[test]
    fn d7_the_fast_path_agrees_with_the_full_normalisation() {
        // Every path of up to four segments drawn from awkward pieces, with
        // and without a leading `/`: when `normal_form` says the path needs
        // no work, the full normalisation must give the same text.
        let pieces = ["", ".", "..", "a", "b.", ".c", "...", "%41"];
        let mut paths = vec![String::new()];
        for _ in 0..4 {
            let longer: Vec<String> = paths
                .iter()
                .flat_map(|p| pieces.iter().map(move |piece| format!("{p}/{piece}")))
                .collect();
            paths.extend(longer);
        }
        let mut fast = 0;
        for path in &paths {
            for raw in [path.as_str(), path.strip_prefix('/').unwrap_or(path)] {
                let expected = match normal_form(raw) {
                    None => continue,
                    Some(NormalForm::AsWritten) => raw.to_owned(),
                    Some(NormalForm::WithRoot) => format!("/{raw}"),
                };
                fast += 1;
                assert_eq!(normalise_path(raw).as_deref(), Ok(&*expected), "{raw:?}");
                assert_eq!(
                    res(&format!("/{}", expected.trim_start_matches('/'))).path(),
                    expected
                );
            }
        }
        assert!(fast > 100, "{fast}");
    }

    #[test]
    fn d7_control_characters_outside_ascii_are_found() {
        assert!(has_control_or_space("/a\u{80}"));
        assert!(has_control_or_space("/a\u{9f}b"));
        assert!(!has_control_or_space("/a\u{a0}b/é/ü"));
        assert!(!has_control_or_space("/a/b"));
        // Every position of the word-at-a-time search, and a `C2` that
        // ends one word while its C1 byte begins the next.
        for len in 0..20 {
            for at in 0..len {
                for bad in [" ", "\u{0}", "\u{1f}", "\u{7f}", "\u{85}"] {
                    let mut text = "a".repeat(len);
                    text.replace_range(at..at + 1, bad);
                    assert!(has_control_or_space(&text), "{text:?}");
                }
                let mut text = "b".repeat(len);
                text.replace_range(at..at + 1, "\u{a0}");
                assert!(!has_control_or_space(&text), "{text:?}");
            }
        }
        assert!(has_control_or_space("/abcdef\u{90}"));
    }

    #[test]
    fn d7_refusals() {
        assert_eq!(refusal(""), "is empty");
        for s in ["/a b", "/a\tb", "/a\nb", "/a\u{7f}", "/a\u{85}", " /a"] {
            assert_eq!(refusal(s), "contains a control character or a space", "{s:?}");
        }
        for s in [
            "http://localhost/hello.txt",
            "https://x/y",
            "ftp://x",
            "git+ssh://x/y",
        ] {
            assert_eq!(refusal(s), "uses another scheme than jsontp://", "{s:?}");
        }
        assert_eq!(refusal("jsontp://"), "has jsontp:// without a host");
        assert_eq!(refusal("jsontp:///x"), "has jsontp:// without a host");
        assert_eq!(refusal("jsontp://:80/x"), "has a port without a host");
        assert_eq!(refusal(":80/x"), "has a port without a host");
        for s in [
            "localhost:0/x",
            "localhost:65536/x",
            "localhost:99999/x",
            "jsontp://h:0",
        ] {
            assert_eq!(refusal(s), "has a port outside 1-65535", "{s:?}");
        }
        for s in [
            "localhost:/x",
            "localhost:8o/x",
            "localhost:+80/x",
            "h:123456/x",
            "[::1]:/x",
            "http:/x",
        ] {
            assert_eq!(
                refusal(s),
                "has a port that is not a number from 1 to 65535",
                "{s:?}"
            );
        }
        assert_eq!(refusal("[::1/x"), "has an IPv6 host without its closing ]");
        assert_eq!(
            refusal("[nope]/x"),
            "has a host in [ ] that is not an IPv6 address"
        );
        assert_eq!(refusal("[::1]x/y"), "has characters after the IPv6 host's ]");
        assert_eq!(
            refusal("jsontp://a%20b/x"),
            "has a host that is not a host name or address"
        );
        for s in [
            "/../hello.txt",
            "/a/../../b",
            "..",
            "../x",
            "/%2e%2e/x",
            "/a/%2E%2E%2F%2e%2e/x",
            "/..%2fx",
        ] {
            assert_eq!(refusal(s), "climbs above the root with ..", "{s:?}");
        }
        for s in ["/%", "/%4", "/%zz", "/a%g0"] {
            assert_eq!(refusal(s), "has a % not followed by two hex digits", "{s:?}");
        }
        assert_eq!(refusal("/a%00b"), "has a percent-encoded NUL (%00)");
        assert_eq!(refusal("/%ff"), "is not UTF-8 once percent-decoded");
    }

    #[test]
    fn the_plain_path_reading_takes_only_what_the_general_one_reads_alike() {
        for s in [
            "/",
            "/hello.txt",
            "/a/b/",
            "/a.b/c-d_e~f",
            "/.well-known/x",
            "/a..b",
            "/...",
            "/a/.b",
        ] {
            let plain = plain_path(s).unwrap_or_else(|| panic!("{s:?} is plain"));
            assert_eq!(Ok(plain), parse_any(s), "{s:?}");
        }
        for s in [
            "",
            "a",
            "//",
            "/a//b",
            "/./a",
            "/a/.",
            "/a/..",
            "/a?b",
            "/a#b",
            "/%41",
            "/a b",
            "/\u{e9}",
            "/\u{7f}",
            "jsontp://h/a",
            "localhost/a",
        ] {
            assert_eq!(plain_path(s), None, "{s:?}");
        }
    }

    #[test]
    fn the_plain_path_reading_takes_what_a_byte_by_byte_reading_takes() {
        // The plain reading as a byte loop: every byte plain, every
        // segment but an empty last one neither empty nor a dot segment.
        let bytewise = |s: &str| {
            let Some(segments) = s.strip_prefix('/') else {
                return false;
            };
            let parts: Vec<&str> = segments.split('/').collect();
            segments.bytes().all(plain_byte)
                && parts[..parts.len() - 1]
                    .iter()
                    .all(|p| !matches!(*p, "" | "." | ".."))
                && !matches!(*parts.last().unwrap_or(&""), "." | "..")
        };
        // Every byte at every position of three words, in paths made of
        // plain bytes, dots and slashes.
        for base in [
            "/abcdefghijklmnopqrstuvw",
            "/a/b/c/d/e/f/g/h/i/j/k/l",
            "/./../../.a/b./.c./d../",
        ] {
            for at in 1..base.len() {
                for byte in 0..=0x80u8 {
                    let mut bytes = base.as_bytes().to_vec();
                    bytes[at] = byte;
                    let text = String::from_utf8(bytes).unwrap_or_else(|_| format!("{base}\u{e9}"));
                    for s in [&text[..], &text[..at + 1]] {
                        assert_eq!(plain_path(s).is_some(), bytewise(s), "{s:?}");
                    }
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn the_plain_path_reading_agrees_with_the_general_one(
            s in "/?([a.%?#/ ~-]|\\u{e9}|\\u{85}){0,12}"
        ) {
            if let Some(plain) = plain_path(&s) {
                proptest::prop_assert_eq!(Ok(plain), parse_any(&s), "{:?}", s);
            }
        }
    }
}
