//! The `resource` field (D7): seven shapes, parsed into their parts, the
//! original string kept for the echo.

use core::net::{Ipv4Addr, Ipv6Addr};
use std::fmt;
use std::str::FromStr;

use super::ValueError;

/// A parsed `resource`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resource {
    original: String,
    scheme: bool,
    host: Option<String>,
    port: Option<u16>,
    path: String,
    query: Option<String>,
    fragment: Option<String>,
}

impl Resource {
    /// The string exactly as the request wrote it; responses echo it (D7).
    pub fn as_str(&self) -> &str {
        &self.original
    }

    /// Whether it was written with the `jsontp://` scheme.
    pub fn has_scheme(&self) -> bool {
        self.scheme
    }

    /// The host, if the shape carries one. Ignored by default (D7).
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// The port, if written.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The path, percent-decoded and normalised, always starting with `/`
    /// and never climbing above the root.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The query, without `?`, as written.
    pub fn query(&self) -> Option<&str> {
        self.query.as_deref()
    }

    /// The fragment, without `#`, as written.
    pub fn fragment(&self) -> Option<&str> {
        self.fragment.as_deref()
    }
}

impl FromStr for Resource {
    type Err = ValueError;

    /// One of the seven shapes of D7, with D7's host rule for a first
    /// segment without a leading `/`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(refuse("is empty"));
        }
        if s.chars().any(|c| c.is_control() || c == ' ') {
            return Err(refuse("contains a control character or a space"));
        }
        // The fragment starts at the first `#`, the query at the first `?`
        // before it (RFC 3986 §3.4, §3.5); both are kept as written.
        let (rest, fragment) = split_off(s, '#');
        let (rest, query) = split_off(rest, '?');

        let (scheme, host, port, raw_path) = if let Some(after) = strip_prefix_ignore_case(rest, "jsontp://")
        {
            let (authority, path) = after.split_at(after.find('/').unwrap_or(after.len()));
            if authority.is_empty() {
                return Err(refuse("has jsontp:// without a host"));
            }
            let (host, port) = authority_parts(authority)?;
            (true, Some(host), port, path)
        } else if has_scheme(rest) {
            return Err(refuse("uses another scheme than jsontp://"));
        } else if rest.starts_with('/') {
            (false, None, None, rest)
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

        Ok(Resource {
            original: s.to_owned(),
            scheme,
            host,
            port,
            path: normalise_path(raw_path)?,
            query: query.map(str::to_owned),
            fragment: fragment.map(str::to_owned),
        })
    }
}

fn refuse(reason: &'static str) -> ValueError {
    ValueError::new(reason)
}

/// `s` before the first `sep`, and what follows it if `sep` occurs.
fn split_off(s: &str, sep: char) -> (&str, Option<&str>) {
    match s.split_once(sep) {
        Some((before, after)) => (before, Some(after)),
        None => (s, None),
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &s[prefix.len()..])
}

/// Whether `s` starts with `scheme://` (RFC 3986 §3.1 scheme syntax).
fn has_scheme(s: &str) -> bool {
    let Some((scheme, _)) = s.split_once("://") else {
        return false;
    };
    let mut bytes = scheme.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
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
fn authority_parts(authority: &str) -> Result<(String, Option<u16>), ValueError> {
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
        let (host, port) = split_off(authority, ':');
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
    Ok((host.to_owned(), port))
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
        f.write_str(&self.original)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(s: &str) -> Resource {
        s.parse().unwrap_or_else(|e| panic!("{s:?}: {e}"))
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
}
