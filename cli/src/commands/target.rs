//! The URL of a client command: where to connect and which `resource` to
//! send.

/// The port when the URL gives none.
pub const DEFAULT_PORT: u16 = 8080;

/// The port of `jsontps://` URLs when they give none (D20).
pub const DEFAULT_TLS_PORT: u16 = 8443;

/// The scheme, matched in any case as D7 reads it (`JSONTP://` is
/// `jsontp://`).
const SCHEME: &str = "jsontp://";

/// The scheme of jsontp over TLS (D20): a client-side address only.
const TLS_SCHEME: &str = "jsontps://";

/// Where the URL points: the address to connect to and the `resource` to
/// send.
#[derive(Debug, PartialEq, Eq)]
pub struct Target {
    /// `host:port`, or `[v6]:port`.
    pub address: String,
    /// The path with its query and fragment, from `/`.
    pub resource: String,
    /// The host alone (no brackets, no port): the name a TLS certificate
    /// is checked against.
    pub host: String,
    /// `jsontps://`: connect over TLS (D20).
    pub tls: bool,
}

impl Target {
    /// Parses `jsontp://host:port/path`, `jsontps://host:port/path`,
    /// `host:port/path` or `host/path`.
    pub fn parse(url: &str) -> Result<Target, String> {
        let has = |scheme: &str| {
            url.get(..scheme.len())
                .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
        };
        let (rest, tls) = if has(SCHEME) {
            (&url[SCHEME.len()..], false)
        } else if has(TLS_SCHEME) {
            (&url[TLS_SCHEME.len()..], true)
        } else if url.contains("://") {
            return Err(format!(
                "{url:?} is not a jsontp:// or jsontps:// URL (write jsontp://host:port/path or host:port/path)"
            ));
        } else {
            (url, false)
        };
        let (authority, path) = match rest.find(['/', '?', '#']) {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        let resource = match path.chars().next() {
            Some('/') => path.to_owned(),
            _ => format!("/{path}"),
        };
        let default = if tls { DEFAULT_TLS_PORT } else { DEFAULT_PORT };
        let (host, port) =
            split_host_port(authority, default).map_err(|why| format!("the URL {url:?} {why}"))?;
        let address = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        Ok(Target {
            address,
            resource,
            host: host.to_owned(),
            tls,
        })
    }
}

/// What a word typed where the method belongs (`jsontp localhost:8080/x`)
/// means as a URL, when it looks like one: the URL to suggest after
/// `jsontp get`. A URL this client reads is itself; curl's `http://` and
/// `https://` become `jsontp://` and `jsontps://`. A bare word (a mistyped
/// command such as `serv`) is not a URL: it needs a scheme, a port, a
/// path, a dotted host name, an IP address or `localhost`.
pub fn as_url(word: &str) -> Option<String> {
    let scheme = |name: &str| {
        word.get(..name.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(name))
    };
    let url = if scheme("http://") {
        format!("jsontp://{}", &word["http://".len()..])
    } else if scheme("https://") {
        format!("jsontps://{}", &word["https://".len()..])
    } else {
        word.to_owned()
    };
    let target = Target::parse(&url).ok()?;
    let rest = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let has_port = authority
        .rsplit_once(':')
        .is_some_and(|(_, port)| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()));
    let url_like = url.contains("://")
        || rest.len() > authority.len()
        || has_port
        || target.host.eq_ignore_ascii_case("localhost")
        || target.host.parse::<std::net::IpAddr>().is_ok()
        || target.host.contains('.');
    url_like.then_some(url)
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`.
fn split_host_port(authority: &str, default: u16) -> Result<(&str, u16), &'static str> {
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']').ok_or("has an unclosed [")?;
        match after {
            "" => (host, None),
            _ => (host, Some(after.strip_prefix(':').ok_or("has text after ]")?)),
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("names no host");
    }
    let port = match port {
        None => default,
        Some(port) => match port.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return Err("has a port that is not a number from 1 to 65535"),
        },
    };
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Result<(String, String), String> {
        Target::parse(url).map(|t| (t.address, t.resource))
    }

    fn pair(address: &str, resource: &str) -> Result<(String, String), String> {
        Ok((address.to_owned(), resource.to_owned()))
    }

    #[test]
    fn url_forms_with_a_host() {
        assert_eq!(
            target("jsontp://example.com:9000/a/b?x=1"),
            pair("example.com:9000", "/a/b?x=1")
        );
        assert_eq!(target("jsontp://example.com/a"), pair("example.com:8080", "/a"));
        assert_eq!(
            target("localhost:9000/index.html"),
            pair("localhost:9000", "/index.html")
        );
        assert_eq!(
            target("localhost/index.html"),
            pair("localhost:8080", "/index.html")
        );
        assert_eq!(target("127.0.0.1:1"), pair("127.0.0.1:1", "/"));
        assert_eq!(target("host?q#f"), pair("host:8080", "/?q#f"));
        assert_eq!(target("[::1]:9000/x"), pair("[::1]:9000", "/x"));
        assert_eq!(target("jsontp://[::1]/x"), pair("[::1]:8080", "/x"));
    }

    #[test]
    fn the_scheme_is_read_in_any_case() {
        // D7: `JSONTP://` is `jsontp://`.
        for url in ["JSONTP://h:1/x", "Jsontp://h:1/x", "jsonTP://h:1/x"] {
            assert_eq!(target(url), pair("h:1", "/x"), "{url}");
        }
        // Not a scheme at all: a multi-byte character where it would end.
        assert_eq!(target("héllo.example/x"), pair("héllo.example:8080", "/x"));
    }

    #[test]
    fn jsontps_means_tls_on_port_8443_by_default() {
        // D20: `jsontps://`, default port 8443, the scheme in any case.
        let t = Target::parse("jsontps://example.com/a").expect("parses");
        assert_eq!(
            (t.address.as_str(), t.resource.as_str()),
            ("example.com:8443", "/a")
        );
        assert_eq!((t.host.as_str(), t.tls), ("example.com", true));
        let t = Target::parse("JSONTPS://[::1]:9443/x").expect("parses");
        assert_eq!(
            (t.address.as_str(), t.host.as_str(), t.tls),
            ("[::1]:9443", "::1", true)
        );
        let plain = Target::parse("jsontp://example.com/a").expect("parses");
        assert!(!plain.tls);
        assert_eq!(plain.host, "example.com");
    }

    #[test]
    fn a_url_or_host_port_is_told_from_a_mistyped_command() {
        for (word, url) in [
            ("localhost:8080/hello.txt", "localhost:8080/hello.txt"),
            ("jsontp://example.com/a", "jsontp://example.com/a"),
            ("JSONTPS://example.com", "JSONTPS://example.com"),
            ("127.0.0.1:9000", "127.0.0.1:9000"),
            ("[::1]:9000/x", "[::1]:9000/x"),
            ("localhost", "localhost"),
            ("example.com", "example.com"),
            ("host/path", "host/path"),
            ("host?q=1", "host?q=1"),
            ("10.0.0.1", "10.0.0.1"),
            ("http://example.com:8080/a", "jsontp://example.com:8080/a"),
            ("HTTPS://example.com/a", "jsontps://example.com/a"),
        ] {
            assert_eq!(as_url(word).as_deref(), Some(url), "{word}");
        }
        // Mistyped commands, and what no URL is.
        for word in [
            "serv",
            "gett",
            "help",
            "ftp://example.com/",
            "host:x/",
            "",
            "-v",
            "/path",
        ] {
            assert_eq!(as_url(word), None, "{word}");
        }
    }

    #[test]
    fn bad_urls_say_why() {
        let http = target("http://example.com/").unwrap_err();
        assert!(http.contains("not a jsontp:// or jsontps:// URL"), "{http}");
        assert!(http.contains("host:port/path"), "{http}");
        assert!(target("/path").unwrap_err().contains("names no host"));
        assert!(target("jsontp:///path").unwrap_err().contains("names no host"));
        assert!(target("host:0/").unwrap_err().contains("port"));
        assert!(target("host:70000/").unwrap_err().contains("port"));
        assert!(target("host:x/").unwrap_err().contains("port"));
        assert!(target("[::1/").unwrap_err().contains("unclosed"));
    }
}
