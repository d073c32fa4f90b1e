//! The values of the `headers` object, judged by name (D8, D15, D16, D18).
//!
//! Each function walks the headers in document order and returns the first
//! problem as a `human-message` that names the header, e.g.
//! `header "accept-language": "english" is not a language tag like en-US`.

use std::collections::HashSet;
use std::str::FromStr;

use smallvec::SmallVec;

use crate::message::headers::weight::split_weight;
use crate::message::headers::weight::trim_ows;
use crate::message::headers::{EncodingList, HeaderName};
use crate::message::leniency::{Forgiven, Validation};
use crate::message::read::envelope::RawHeaders;
use crate::message::read::syntax::{Loose, loose_of};
use crate::message::{Cookies, Encoding, EncodingRange, Headers, ValueError, Weight, Weighted};

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

/// Checks a request's headers (D8) into `headers` (filled where it
/// stands: it is a few hundred bytes), and gives the `expect` value as
/// written, judged at D5 level 4 (`501`). Unknown names are refused unless
/// `ignore-invalid-headers` is `true`, wherever that flag stands in the
/// object, so the flag is looked up among all of them at the first
/// unknown name.
pub(crate) fn request_headers<'a>(
    raw: &'a RawHeaders<'_>,
    headers: &mut Headers,
) -> Result<Option<&'a str>, String> {
    // Nothing to look up or judge, nor to save registers for.
    if raw.entries.is_empty() {
        return Ok(None);
    }
    // Most requests have no unknown name, and look nothing up.
    let mut ignore_unknown = None;
    let mut expect = None;
    for (written, listed, value) in &raw.entries {
        let Some(name) = listed.and_then(HeaderName::from_index) else {
            if *ignore_unknown.get_or_insert_with(|| ignores_unknown(raw)) {
                continue;
            }
            return Err(format!(
                "header {} is not a header the protocol lists (send \"ignore-invalid-headers\": true to have such headers dropped)",
                quoted(&written.to_ascii_lowercase())
            ));
        };
        request_header(name, value, headers, &mut expect)?;
    }
    Ok(expect)
}

/// Whether `raw` holds `"ignore-invalid-headers": true`, wherever it
/// stands. Cold, out of the loop over the headers: few requests name an
/// unknown header.
#[cold]
fn ignores_unknown(raw: &RawHeaders<'_>) -> bool {
    raw.entries.iter().any(|(_, listed, value)| {
        listed.and_then(HeaderName::from_index) == Some(HeaderName::IgnoreInvalidHeaders)
            && *value == Loose::Bool(true)
    })
}

/// Checks one request header of the protocol's list (D8) into `headers`;
/// the value of `expect` goes to `expect`, as written.
#[inline(always)]
pub(crate) fn request_header<'a>(
    name: HeaderName,
    value: &'a Loose<'a>,
    headers: &mut Headers,
    expect: &mut Option<&'a str>,
) -> Result<(), String> {
    refuse_null(name, value)?;
    match name {
        HeaderName::ContentType => headers.content_type = Some(parse_string(name, value)?),
        HeaderName::Accept => {
            weighted_list(
                name,
                value,
                &mut headers.more_mut().accept,
                |item| item.parse(),
                Vec::push,
            )?;
        }
        HeaderName::AcceptEncoding => known_encodings(name, value, &mut headers.more_mut().accept_encoding)?,
        HeaderName::AcceptLanguage => {
            weighted_list(
                name,
                value,
                &mut headers.more_mut().accept_language,
                |item| item.parse(),
                SmallVec::push,
            )?;
        }
        HeaderName::Authorization => headers.more_mut().authorization = Some(string(name, value)?.to_owned()),
        HeaderName::Cookies => headers.more_mut().cookies = Some(cookies(name, value, true)?),
        HeaderName::IfModifiedSince => {
            headers.more_mut().if_modified_since = Some(parse_string(name, value)?)
        }
        HeaderName::IfUnmodifiedSince => {
            headers.more_mut().if_unmodified_since = Some(parse_string(name, value)?)
        }
        HeaderName::Expect => *expect = Some(string(name, value)?),
        HeaderName::IgnoreInvalidHeaders => match value {
            Loose::Bool(on) => headers.ignore_invalid_headers = *on,
            other => {
                return Err(format!(
                    "header \"{name}\" must be a boolean, not {}",
                    other.kind().described()
                ));
            }
        },
        // Response headers, accepted and ignored in a request whatever
        // their value, `null` aside (D8).
        HeaderName::Date | HeaderName::Language | HeaderName::SetCookies => {}
    }
    Ok(())
}

/// Sets one header of the protocol's list as a sender gives it (D8),
/// request or response header alike, judged by the grammar the reader
/// uses: the same value read from the wire would give the same header.
/// `expect` may only be `100-continue` (D10).
pub(crate) fn sent_header(name: HeaderName, value: &Loose<'_>, headers: &mut Headers) -> Result<(), String> {
    refuse_null(name, value)?;
    match name {
        HeaderName::Date => headers.date = Some(parse_string(name, value)?),
        HeaderName::Language => headers.language = Some(parse_string(name, value)?),
        HeaderName::SetCookies => headers.more_mut().set_cookies = Some(cookies(name, value, false)?),
        HeaderName::Expect => {
            let written = string(name, value)?;
            if !written.eq_ignore_ascii_case("100-continue") {
                return Err(format!(
                    "header \"expect\": {} is not an expectation the protocol knows; the only one is \"100-continue\" (D10)",
                    quoted(written)
                ));
            }
            headers.expect_continue = true;
        }
        _ => request_header(name, value, headers, &mut None)?,
    }
    Ok(())
}

// Headers held as data (a binding's dicts, configuration) are read by the
// grammar that reads them from the wire.
impl Headers {
    /// Sets the header `name` from its JSON value, as a message would carry
    /// it: a string, a list as an array of strings or one comma-separated
    /// string, cookies as an object (D8, D15). Values are judged by the
    /// grammar the reader uses, so a header set here reads back the same
    /// from the wire. A name outside the protocol's list (compared in any
    /// case) is kept as given ([`with_unlisted`](Self::with_unlisted)). For
    /// programs that hold headers as data: bindings, configuration, tests.
    ///
    /// ```
    /// use jsontp_protocol::message::Headers;
    /// use serde_json::json;
    ///
    /// let mut headers = Headers::new();
    /// headers.insert_json("accept-encoding", &json!("br, gzip;q=0.5"))?;
    /// headers.insert_json("content-type", &json!("text/plain"))?;
    /// assert_eq!(headers.content_type().map(|t| t.to_string()).as_deref(), Some("text/plain"));
    /// assert!(headers.insert_json("language", &json!("english")).is_err());
    /// # Ok::<(), jsontp_protocol::message::ValueError>(())
    /// ```
    pub fn insert_json(&mut self, name: &str, value: &serde_json::Value) -> Result<(), ValueError> {
        let Some(listed) = HeaderName::from_name(name) else {
            self.more_mut().unlisted.push((name.to_owned(), value.clone()));
            return Ok(());
        };
        let loose = loose_of(value);
        sent_header(listed, &loose, self).map_err(ValueError::new)
    }
}

/// Refuses a `null` value, which no header may have (D8), in a request or
/// a response alike.
#[inline]
fn refuse_null(name: HeaderName, value: &Loose<'_>) -> Result<(), String> {
    if matches!(value, Loose::Null) {
        return Err(format!("header \"{name}\" is null, which no header may be"));
    }
    Ok(())
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
        let Some(name) = listed.and_then(HeaderName::from_index) else {
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
        refuse_null(name, value)?;
        match name {
            HeaderName::ContentType => headers.content_type = Some(parse_string(name, value)?),
            HeaderName::Date => headers.date = Some(parse_string(name, value)?),
            HeaderName::Language => headers.language = Some(parse_string(name, value)?),
            HeaderName::SetCookies => headers.more_mut().set_cookies = Some(cookies(name, value, false)?),
            // Request headers in a response: accepted and ignored.
            _ => {}
        }
    }
    for (missing, name, what) in [
        (headers.date.is_none(), HeaderName::Date, Forgiven::MissingDate),
        (
            headers.language.is_none(),
            HeaderName::Language,
            Forgiven::MissingLanguage,
        ),
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

fn string<'v>(name: HeaderName, value: &'v Loose<'_>) -> Result<&'v str, String> {
    match value {
        Loose::Str(s) => Ok(s),
        other => Err(format!(
            "header \"{name}\" must be a string, not {}",
            other.kind().described()
        )),
    }
}

fn parse_one<T: FromStr<Err = ValueError>>(name: HeaderName, s: &str) -> Result<T, String> {
    s.parse().map_err(|e| refusal(name, s, &e))
}

/// `header "NAME": "value" reason`.
fn refusal(name: HeaderName, s: &str, e: &ValueError) -> String {
    format!("header \"{name}\": {} {e}", quoted(s))
}

fn parse_string<T: FromStr<Err = ValueError>>(name: HeaderName, value: &Loose<'_>) -> Result<T, String> {
    parse_one(name, string(name, value)?)
}

/// Calls `each` on every entry of a list header: a comma-separated string
/// or an array of strings (D8). Entries are trimmed of spaces and tabs
/// (HTTP OWS), and empty ones are skipped in both forms, as HTTP skips
/// empty list elements; so an empty string or array has no entry, which is
/// the header's absence (D8). No intermediate list is built.
fn for_each_item<'v>(
    name: HeaderName,
    value: &'v Loose<'v>,
    mut each: impl FnMut(&'v str) -> Result<(), String>,
) -> Result<(), String> {
    #[inline(always)]
    fn non_empty<'v>(
        item: &'v str,
        each: &mut impl FnMut(&'v str) -> Result<(), String>,
    ) -> Result<(), String> {
        let item = trim_ows(item);
        if item.is_empty() { Ok(()) } else { each(item) }
    }
    match value {
        Loose::Str(s) => {
            // `split(',')` by bytes: its searcher costs more to set up
            // than a short value takes to read.
            let mut rest: &'v str = s;
            while let Some(at) = rest.bytes().position(|b| b == b',') {
                non_empty(&rest[..at], &mut each)?;
                rest = &rest[at + 1..];
            }
            non_empty(rest, &mut each)
        }
        // Inlined into the walk: a call for each element costs more
        // than most elements take to judge.
        Loose::Array(items) => items.try_for_each(
            #[inline(always)]
            |i, item| match item {
                Ok(s) => non_empty(s, &mut each),
                Err(kind) => Err(format!(
                    "header \"{name}\": element {i} is {}, not a string",
                    kind.described()
                )),
            },
        ),
        other => Err(format!(
            "header \"{name}\" must be a string or an array of strings, not {}",
            other.kind().described()
        )),
    }
}

/// `accept` or `accept-language`, into `slot`: every entry parsed with its
/// weight and added by `push`; `None` when there is none (D8).
fn weighted_list<T, C: Default + AsRef<[T]>>(
    name: HeaderName,
    value: &Loose<'_>,
    slot: &mut Option<C>,
    parse: impl Fn(&str) -> Result<T, ValueError>,
    push: impl Fn(&mut C, T),
) -> Result<(), String> {
    let parsed = slot.insert(C::default());
    for_each_item(name, value, |item| {
        push(parsed, parse(item).map_err(|e| refusal(name, item, &e))?);
        Ok(())
    })?;
    if parsed.as_ref().is_empty() {
        *slot = None;
    }
    Ok(())
}

/// `accept-encoding`, into `slot`: the entries in the client's order with
/// their weights. Unknown encodings are skipped (D8), but their weight
/// must still be well-formed. A header that names only unknown encodings
/// is held as `*;q=0`: nothing this implementation knows is acceptable, so
/// `412` follows, and the header writes back with that meaning.
fn known_encodings(
    name: HeaderName,
    value: &Loose<'_>,
    slot: &mut Option<EncodingList>,
) -> Result<(), String> {
    let known = slot.insert(EncodingList::new());
    let mut listed = false;
    // Inlined into the walk over the entries, as in `for_each_item`.
    for_each_item(
        name,
        value,
        #[inline(always)]
        |item| {
            listed = true;
            // Most entries are a name alone.
            if let Ok(encoding) = item.parse::<Encoding>() {
                known.push(Weighted::from(encoding));
                return Ok(());
            }
            let (range, weight) = split_weight(item).map_err(|e| refusal(name, item, &e))?;
            if let Ok(value) = range.parse::<EncodingRange>() {
                known.push(Weighted { value, weight });
            }
            Ok(())
        },
    )?;
    if !listed {
        *slot = None;
    } else if known.is_empty() {
        known.push(Weighted::new(EncodingRange::Any).with_weight(Weight::ZERO));
    }
    Ok(())
}

/// `cookies` (object or string form) or `set-cookies` (object only), D15.
/// A cookie named twice in the object form is refused: two readers could
/// pick different values, as with duplicate keys (D4).
fn cookies(name: HeaderName, value: &Loose<'_>, string_form: bool) -> Result<Cookies, String> {
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
