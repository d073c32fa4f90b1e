//! The values of the `headers` object, judged by name (D8, D15, D16, D18).
//!
//! Each function walks the headers in document order and returns the first
//! problem as a `human-message` that names the header, e.g.
//! `header "accept-language": "english" is not a language tag like en-US`.

use std::collections::HashSet;
use std::str::FromStr;

use super::envelope::RawHeaders;
use super::headers::EncodingList;
use super::parse::{Forgiven, Validation};
use super::syntax::Loose;
use super::{Cookies, Encoding, Headers, ValueError};

/// A value quoted as JSON for a message, cut short when long (a megabyte of
/// resource must not come back in the `human-message`).
pub(crate) fn quoted(s: &str) -> String {
    const MAX: usize = 80;
    if s.len() <= MAX {
        return serde_json::to_string(s).unwrap_or_default();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut q = serde_json::to_string(&s[..end]).unwrap_or_default();
    q.insert(q.len() - 1, '…');
    q
}

/// What a request's headers say, typed.
#[derive(Debug)]
pub(crate) struct RequestHeaders<'a> {
    pub(crate) headers: Headers,
    /// The `expect` value as written; judged at D5 level 4 (`501`).
    pub(crate) expect: Option<&'a str>,
}

/// Checks a request's headers (D8). Unknown names are refused unless
/// `ignore-invalid-headers` is `true`, wherever that flag stands in the
/// object, so the flag is looked up first.
pub(crate) fn request_headers<'a>(raw: &'a RawHeaders<'_>) -> Result<RequestHeaders<'a>, String> {
    let ignore_unknown = raw.entries.iter().any(|(_, listed, value)| {
        listed.map(|i| super::headers::HEADER_NAMES[i]) == Some("ignore-invalid-headers")
            && *value == Loose::Bool(true)
    });
    let mut headers = Headers::new();
    let mut expect = None;
    for (written, listed, value) in &raw.entries {
        let Some(index) = *listed else {
            if ignore_unknown {
                continue;
            }
            return Err(format!(
                "header {} is not a header the protocol lists (send \"ignore-invalid-headers\": true to have such headers dropped)",
                quoted(&written.to_ascii_lowercase())
            ));
        };
        let name = listed_name(index, value)?;
        match name {
            "content-type" => headers.content_type = Some(parse_string(name, value)?),
            "accept" => headers.accept = Some(parse_list(name, value)?),
            "accept-encoding" => headers.accept_encoding = Some(known_encodings(name, value)?),
            "accept-language" => headers.accept_language = Some(parse_list(name, value)?),
            "authorization" => headers.authorization = Some(string(name, value)?.to_owned()),
            "cookies" => headers.cookies = Some(cookies(name, value, true)?),
            "if-modified-since" => headers.if_modified_since = Some(parse_string(name, value)?),
            "if-unmodified-since" => headers.if_unmodified_since = Some(parse_string(name, value)?),
            "expect" => expect = Some(string(name, value)?),
            "ignore-invalid-headers" => match value {
                Loose::Bool(on) => headers.ignore_invalid_headers = *on,
                other => {
                    return Err(format!(
                        "header \"{name}\" must be a boolean, not {}",
                        other.kind().described()
                    ));
                }
            },
            // `date`, `language`, `set-cookies`: response headers, accepted
            // and ignored in a request whatever their value (D8).
            _ => {}
        }
    }
    Ok(RequestHeaders { headers, expect })
}

/// The protocol's name for a listed header, refusing a `null` value, which
/// no header may have (D8), in a request or a response alike.
fn listed_name(index: usize, value: &Loose<'_>) -> Result<&'static str, String> {
    let name = super::headers::HEADER_NAMES[index];
    if *value == Loose::Null {
        return Err(format!("header \"{name}\" is null, which no header may be"));
    }
    Ok(name)
}

/// Checks a response's headers (D8, D12, D13). `date` and `language` must
/// be there; lenient mode forgives their absence. The request-only names of
/// the protocol's list are accepted and ignored, as the response-only ones
/// are in a request. A name outside the list is refused in strict mode and
/// dropped (and reported) in lenient mode.
pub(crate) fn response_headers(
    raw: &RawHeaders<'_>,
    validation: Validation,
    forgiven: &mut Vec<Forgiven>,
) -> Result<Headers, String> {
    let mut headers = Headers::new();
    for (written, listed, value) in &raw.entries {
        let Some(index) = *listed else {
            if validation == Validation::Lenient {
                if !forgiven.contains(&Forgiven::UnknownHeader) {
                    forgiven.push(Forgiven::UnknownHeader);
                }
                continue;
            }
            return Err(format!(
                "header {} is not a header the protocol lists",
                quoted(&written.to_ascii_lowercase())
            ));
        };
        let name = listed_name(index, value)?;
        match name {
            "content-type" => headers.content_type = Some(parse_string(name, value)?),
            "date" => headers.date = Some(parse_string(name, value)?),
            "language" => headers.language = Some(parse_string(name, value)?),
            "set-cookies" => headers.set_cookies = Some(cookies(name, value, false)?),
            // Request headers in a response: accepted and ignored.
            _ => {}
        }
    }
    for (missing, name, what) in [
        (headers.date.is_none(), "date", Forgiven::MissingDate),
        (headers.language.is_none(), "language", Forgiven::MissingLanguage),
    ] {
        if missing {
            if validation == Validation::Strict {
                return Err(format!(
                    "header \"{name}\" is missing; every response must carry it (D12)"
                ));
            }
            forgiven.push(what);
        }
    }
    Ok(headers)
}

fn string<'v>(name: &str, value: &'v Loose<'_>) -> Result<&'v str, String> {
    match value {
        Loose::Str(s) => Ok(s),
        other => Err(format!(
            "header \"{name}\" must be a string, not {}",
            other.kind().described()
        )),
    }
}

fn parse_one<T: FromStr<Err = ValueError>>(name: &str, s: &str) -> Result<T, String> {
    s.parse()
        .map_err(|e: ValueError| format!("header \"{name}\": {} {e}", quoted(s)))
}

fn parse_string<T: FromStr<Err = ValueError>>(name: &str, value: &Loose<'_>) -> Result<T, String> {
    parse_one(name, string(name, value)?)
}

/// Calls `each` on every entry of a list header: a comma-separated string
/// or an array of strings (D8). Items are trimmed of spaces and tabs (HTTP
/// OWS), and empty items of the string form are skipped,
/// as HTTP does. No intermediate list is built.
fn for_each_item<'v>(
    name: &str,
    value: &'v Loose<'_>,
    mut each: impl FnMut(&'v str) -> Result<(), String>,
) -> Result<(), String> {
    match value {
        Loose::Str(s) => s
            .split(',')
            .map(|item| item.trim_matches([' ', '\t']))
            .filter(|item| !item.is_empty())
            .try_for_each(each),
        Loose::Array(items) => items.iter().enumerate().try_for_each(|(i, item)| match item {
            Ok(s) => each(s),
            Err(kind) => Err(format!(
                "header \"{name}\": element {i} is {}, not a string",
                kind.described()
            )),
        }),
        other => Err(format!(
            "header \"{name}\" must be a string or an array of strings, not {}",
            other.kind().described()
        )),
    }
}

fn parse_list<T: FromStr<Err = ValueError>, C: Default + Extend<T>>(
    name: &str,
    value: &Loose<'_>,
) -> Result<C, String> {
    let mut parsed = C::default();
    for_each_item(name, value, |item| {
        parsed.extend(Some(parse_one(name, item)?));
        Ok(())
    })?;
    Ok(parsed)
}

/// `accept-encoding`: the known encodings in the client's order; unknown
/// ones are skipped (D8), so the result may be empty.
fn known_encodings(name: &str, value: &Loose<'_>) -> Result<EncodingList, String> {
    let mut known = EncodingList::new();
    for_each_item(name, value, |item| {
        known.extend(item.parse::<Encoding>().ok());
        Ok(())
    })?;
    Ok(known)
}

/// `cookies` (object or string form) or `set-cookies` (object only), D15.
/// A cookie named twice in the object form is refused: two readers could
/// pick different values, as with duplicate keys (D4).
fn cookies(name: &str, value: &Loose<'_>, string_form: bool) -> Result<Cookies, String> {
    match value {
        Loose::Object(entries) => {
            let mut pairs = Vec::with_capacity(entries.len());
            let mut seen = HashSet::with_capacity(entries.len());
            for (cookie, v) in entries {
                if !seen.insert(&**cookie) {
                    return Err(format!(
                        "header \"{name}\": cookie {} is named twice",
                        quoted(cookie)
                    ));
                }
                match v {
                    Ok(v) => pairs.push((&**cookie, &**v)),
                    Err(kind) => {
                        return Err(format!(
                            "header \"{name}\": cookie {} is {}, not a string",
                            quoted(cookie),
                            kind.described()
                        ));
                    }
                }
            }
            Ok(pairs.into_iter().collect())
        }
        Loose::Str(s) if string_form => parse_one(name, s),
        other => Err(format!(
            "header \"{name}\" must be an object of strings{}, not {}",
            if string_form { " or a string" } else { "" },
            other.kind().described()
        )),
    }
}
