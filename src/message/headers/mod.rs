//! The `headers` object, typed (D8). Every header the protocol lists has a
//! field of its own type here, so a `Headers` value cannot hold a malformed
//! header. Names on the wire are case-insensitive; we write them lower-case.
//!
//! Also the names themselves ([`HeaderName`]); HTTP's weights are in
//! `weight.rs`.

pub(crate) mod cookies;
pub(crate) mod date;
pub(crate) mod iso_codes;
pub(crate) mod language;
pub(crate) mod media;
pub(crate) mod weight;

use std::fmt;
use std::str::FromStr;

use smallvec::SmallVec;

use crate::message::headers::weight::split_weight;
use crate::message::{
    Cookies, Date, Encoding, LanguageRange, LanguageTag, MediaRange, MediaType, ValueError, Weighted,
};

// ---------------------------------------------------------------------------
// names
// ---------------------------------------------------------------------------

/// A header name of the protocol's list (D8). Any other name is refused
/// (`400`), or dropped under `ignore-invalid-headers: true`.
///
/// `#[non_exhaustive]`: D6 makes every `1.x` version one we speak, and a
/// minor version is a compatible change that may list a new header; adding
/// it here must not break a `match` in an application.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum HeaderName {
    /// `content-type`: the media type of the body (both directions).
    ContentType,
    /// `accept`: media ranges the client takes.
    Accept,
    /// `accept-encoding`: body encodings the client takes.
    AcceptEncoding,
    /// `accept-language`: languages the client takes.
    AcceptLanguage,
    /// `authorization`: the client's credentials (D14).
    Authorization,
    /// `cookies`: the client's cookies (D15).
    Cookies,
    /// `if-modified-since` (D17).
    IfModifiedSince,
    /// `if-unmodified-since` (D17).
    IfUnmodifiedSince,
    /// `expect`: `100-continue` (D10).
    Expect,
    /// `ignore-invalid-headers`: drop unlisted names instead of refusing.
    IgnoreInvalidHeaders,
    /// `date`: when the response was made (D16).
    Date,
    /// `language`: the language of the response (D18).
    Language,
    /// `set-cookies`: cookies the server sets (D15).
    SetCookies,
}

impl HeaderName {
    /// Every name of the list, in the order messages are written.
    pub const ALL: [HeaderName; 13] = [
        HeaderName::ContentType,
        HeaderName::Accept,
        HeaderName::AcceptEncoding,
        HeaderName::AcceptLanguage,
        HeaderName::Authorization,
        HeaderName::Cookies,
        HeaderName::IfModifiedSince,
        HeaderName::IfUnmodifiedSince,
        HeaderName::Expect,
        HeaderName::IgnoreInvalidHeaders,
        HeaderName::Date,
        HeaderName::Language,
        HeaderName::SetCookies,
    ];

    /// The name as written on the wire, lower-case.
    pub const fn as_str(self) -> &'static str {
        match self {
            HeaderName::ContentType => "content-type",
            HeaderName::Accept => "accept",
            HeaderName::AcceptEncoding => "accept-encoding",
            HeaderName::AcceptLanguage => "accept-language",
            HeaderName::Authorization => "authorization",
            HeaderName::Cookies => "cookies",
            HeaderName::IfModifiedSince => "if-modified-since",
            HeaderName::IfUnmodifiedSince => "if-unmodified-since",
            HeaderName::Expect => "expect",
            HeaderName::IgnoreInvalidHeaders => "ignore-invalid-headers",
            HeaderName::Date => "date",
            HeaderName::Language => "language",
            HeaderName::SetCookies => "set-cookies",
        }
    }

    /// The listed name `name` is, when it is written lower-case (one jump
    /// on the length and one comparison).
    #[inline]
    pub fn from_lowercase(name: &str) -> Option<HeaderName> {
        Some(match name {
            "content-type" => HeaderName::ContentType,
            "accept" => HeaderName::Accept,
            "accept-encoding" => HeaderName::AcceptEncoding,
            "accept-language" => HeaderName::AcceptLanguage,
            "authorization" => HeaderName::Authorization,
            "cookies" => HeaderName::Cookies,
            "if-modified-since" => HeaderName::IfModifiedSince,
            "if-unmodified-since" => HeaderName::IfUnmodifiedSince,
            "expect" => HeaderName::Expect,
            "ignore-invalid-headers" => HeaderName::IgnoreInvalidHeaders,
            "date" => HeaderName::Date,
            "language" => HeaderName::Language,
            "set-cookies" => HeaderName::SetCookies,
            _ => return None,
        })
    }

    /// The listed name `name` is, compared case-insensitively as D8 says.
    /// Names are nearly always written lower-case: that match comes first.
    #[inline]
    pub fn from_name(name: &str) -> Option<HeaderName> {
        HeaderName::from_lowercase(name).or_else(|| {
            HeaderName::ALL
                .into_iter()
                .find(|known| known.as_str().eq_ignore_ascii_case(name))
        })
    }

    /// Whether a request uses this header. A request may carry every
    /// listed name; the others are accepted and ignored there (D8).
    pub const fn is_request_header(self) -> bool {
        !matches!(
            self,
            HeaderName::Date | HeaderName::Language | HeaderName::SetCookies
        )
    }

    /// Whether a response uses this header (`date`, `language`,
    /// `set-cookies`, `content-type`, D8).
    pub const fn is_response_header(self) -> bool {
        matches!(
            self,
            HeaderName::ContentType | HeaderName::Date | HeaderName::Language | HeaderName::SetCookies
        )
    }

    /// The name at `index` of [`HeaderName::ALL`] (and [`HEADER_NAMES`]).
    pub(crate) fn from_index(index: usize) -> Option<HeaderName> {
        HeaderName::ALL.get(index).copied()
    }
}

impl fmt::Display for HeaderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for HeaderName {
    type Err = ValueError;

    /// Case-insensitive (D8).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HeaderName::from_name(s).ok_or_else(|| ValueError::new("is not a header the protocol lists"))
    }
}

/// The names of [`HeaderName::ALL`] as strings, for the parser's look-up
/// by index.
pub(crate) const HEADER_NAMES: [&str; HeaderName::ALL.len()] = {
    let mut names = [""; HeaderName::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = HeaderName::ALL[i].as_str();
        i += 1;
    }
    names
};

impl From<Encoding> for Weighted<EncodingRange> {
    fn from(encoding: Encoding) -> Self {
        Weighted::new(EncodingRange::Encoding(encoding))
    }
}

impl From<LanguageTag> for Weighted<LanguageRange> {
    fn from(tag: LanguageTag) -> Self {
        Weighted::new(LanguageRange::Tag(tag))
    }
}

/// One entry of `accept-encoding`: an encoding, or `*` for any encoding
/// the entries do not name (RFC 9110 §12.5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EncodingRange {
    /// `*`.
    Any,
    /// One of the four encodings (D9).
    Encoding(Encoding),
}

impl From<Encoding> for EncodingRange {
    fn from(encoding: Encoding) -> Self {
        EncodingRange::Encoding(encoding)
    }
}

impl FromStr for EncodingRange {
    type Err = ValueError;

    /// `*` or one of the four names, compared exactly as `body.encoding` is
    /// (D9).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "*" {
            return Ok(EncodingRange::Any);
        }
        s.parse()
            .map(EncodingRange::Encoding)
            .map_err(|_| ValueError::new("is not one of gzip, deflate, br, identity or *"))
    }
}

impl fmt::Display for EncodingRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodingRange::Any => f.write_str("*"),
            EncodingRange::Encoding(e) => e.fmt(f),
        }
    }
}

impl FromStr for Weighted<EncodingRange> {
    type Err = ValueError;

    /// `gzip`, `*;q=0.5`, …
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        weighted(s)
    }
}

impl FromStr for Weighted<LanguageRange> {
    type Err = ValueError;

    /// `en-US`, `*;q=0.5`, …
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Most entries are a tag alone, which holds neither a `;` nor
        // whitespace: its weight is 1, as `weighted` would find.
        if let Ok(value) = s.parse() {
            return Ok(Weighted::new(value));
        }
        weighted(s)
    }
}

/// An entry of a weighted list: its weight split off, then the rest read
/// as a `T`.
fn weighted<T: FromStr<Err = ValueError>>(s: &str) -> Result<Weighted<T>, ValueError> {
    let (value, weight) = split_weight(s)?;
    Ok(Weighted {
        value: value.parse()?,
        weight,
    })
}

// ---------------------------------------------------------------------------
// the headers object
// ---------------------------------------------------------------------------

/// The entries of `accept-encoding`: a request lists a handful, held
/// without an allocation of their own.
pub(crate) type EncodingList = SmallVec<[Weighted<EncodingRange>; 8]>;

/// The entries of `accept-language`: usually one or two.
pub(crate) type LanguageList = SmallVec<[Weighted<LanguageRange>; 2]>;

/// The headers of a request or a response.
///
/// Request-only and response-only headers share one type: the protocol
/// lists both kinds in one table (D8), and a request that carries `date` is
/// valid (the value is ignored by a server).
///
/// The three negotiation lists (`accept`, `accept-encoding`,
/// `accept-language`) are never empty: D8 reads an empty list as no header,
/// so an empty list given to their setters removes the header.
#[derive(Clone, Default, Eq)]
pub struct Headers {
    // What a response carries (`content-type`, and the `date` and
    // `language` every response gets) is held here; the others, which
    // most messages lack, behind one pointer, so that a message moves as
    // a small value and its headers cost no allocation until one of them
    // is set.
    pub(crate) content_type: Option<MediaType>,
    pub(crate) date: Option<Date>,
    pub(crate) language: Option<LanguageTag>,
    pub(crate) expect_continue: bool,
    pub(crate) ignore_invalid_headers: bool,
    more: Option<Box<MoreHeaders>>,
}

/// The headers a [`Headers`] keeps behind a pointer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MoreHeaders {
    pub(crate) accept: Option<Vec<Weighted<MediaRange>>>,
    pub(crate) accept_encoding: Option<EncodingList>,
    pub(crate) accept_language: Option<LanguageList>,
    pub(crate) authorization: Option<String>,
    pub(crate) cookies: Option<Cookies>,
    pub(crate) if_modified_since: Option<Date>,
    pub(crate) if_unmodified_since: Option<Date>,
    pub(crate) set_cookies: Option<Cookies>,
    /// Names outside the protocol's list, to send as given (never filled
    /// from a received message: D8 drops or refuses those).
    pub(crate) unlisted: Vec<(String, serde_json::Value)>,
}

/// What a [`Headers`] without the boxed ones reads as.
static NO_MORE: MoreHeaders = MoreHeaders {
    accept: None,
    accept_encoding: None,
    accept_language: None,
    authorization: None,
    cookies: None,
    if_modified_since: None,
    if_unmodified_since: None,
    set_cookies: None,
    unlisted: Vec::new(),
};

impl Headers {
    /// The headers kept behind the pointer (all unset when there is none).
    #[inline]
    pub(crate) fn more(&self) -> &MoreHeaders {
        self.more.as_deref().unwrap_or(&NO_MORE)
    }

    /// The headers kept behind the pointer, to set one.
    #[inline]
    pub(crate) fn more_mut(&mut self) -> &mut MoreHeaders {
        self.more.get_or_insert_with(Box::default)
    }

    /// Sets or removes one of the boxed headers; removing one where none
    /// was ever set allocates nothing.
    #[inline]
    fn set_more<T>(&mut self, value: Option<T>, field: impl FnOnce(&mut MoreHeaders) -> &mut Option<T>) {
        if value.is_some() || self.more.is_some() {
            *field(self.more_mut()) = value;
        }
    }

    /// The boxed headers, if any was ever set: a writer skips them all
    /// when there are none.
    #[inline]
    pub(crate) fn more_if_any(&self) -> Option<&MoreHeaders> {
        self.more.as_deref()
    }
}

// Equal headers are the same headers set, however they are stored: a
// pointer to headers all unset equals no pointer.
impl PartialEq for Headers {
    fn eq(&self, other: &Headers) -> bool {
        self.content_type == other.content_type
            && self.date == other.date
            && self.language == other.language
            && self.expect_continue == other.expect_continue
            && self.ignore_invalid_headers == other.ignore_invalid_headers
            && self.more() == other.more()
    }
}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let more = self.more();
        f.debug_struct("Headers")
            .field("content_type", &self.content_type)
            .field("accept", &more.accept)
            .field("accept_encoding", &more.accept_encoding)
            .field("accept_language", &more.accept_language)
            .field("authorization", &more.authorization)
            .field("cookies", &more.cookies)
            .field("if_modified_since", &more.if_modified_since)
            .field("if_unmodified_since", &more.if_unmodified_since)
            .field("expect_continue", &self.expect_continue)
            .field("ignore_invalid_headers", &self.ignore_invalid_headers)
            .field("date", &self.date)
            .field("language", &self.language)
            .field("set_cookies", &more.set_cookies)
            .field("unlisted", &more.unlisted)
            .finish()
    }
}

macro_rules! accessors {
    ($( $(#[$doc:meta])* $field:ident, $setter:ident: $ty:ty, $get:ty $(, $via:ident)?; )*) => {
        impl Headers {
            $(
                $(#[$doc])*
                pub fn $field(&self) -> Option<$get> {
                    // Copy values are returned as they are; others by reference.
                    self.$field$(.$via())?
                }

                #[doc = concat!("Sets `", stringify!($field), "` (builder style); `None` removes it.")]
                pub fn $setter(mut self, value: impl Into<Option<$ty>>) -> Self {
                    self.$field = value.into();
                    self
                }
            )*
        }
    };
}

/// As `accessors!`, for the headers kept behind the pointer: removing one
/// that was never set allocates nothing.
macro_rules! boxed_accessors {
    ($( $(#[$doc:meta])* $field:ident, $setter:ident: $ty:ty, $get:ty $(, $via:ident)?; )*) => {
        impl Headers {
            $(
                $(#[$doc])*
                pub fn $field(&self) -> Option<$get> {
                    // Copy values are returned as they are; others by reference.
                    self.more().$field$(.$via())?
                }

                #[doc = concat!("Sets `", stringify!($field), "` (builder style); `None` removes it.")]
                pub fn $setter(mut self, value: impl Into<Option<$ty>>) -> Self {
                    self.set_more(value.into(), |more| &mut more.$field);
                    self
                }
            )*
        }
    };
}

accessors! {
    /// `content-type`: the media type of the body.
    content_type, with_content_type: MediaType, &MediaType, as_ref;
    /// `date`: when the response was made (D16).
    date, with_date: Date, Date;
    /// `language`: the language of the response (D18).
    language, with_language: LanguageTag, LanguageTag;
}

boxed_accessors! {
    /// `authorization`: the client's credentials (D14).
    authorization, with_authorization: String, &str, as_deref;
    /// `cookies`, from either form (D15).
    cookies, with_cookies: Cookies, &Cookies, as_ref;
    /// `if-modified-since` (D16, D17).
    if_modified_since, with_if_modified_since: Date, Date;
    /// `if-unmodified-since` (D16, D17).
    if_unmodified_since, with_if_unmodified_since: Date, Date;
    /// `set-cookies`: cookies the server sets (D15).
    set_cookies, with_set_cookies: Cookies, &Cookies, as_ref;
}

/// The list, or `None` when it is empty (D8: an empty list is no header).
fn non_empty<T, C: FromIterator<Weighted<T>> + AsRef<[Weighted<T>]>>(
    list: impl IntoIterator<Item = impl Into<Weighted<T>>>,
) -> Option<C> {
    let list: C = list.into_iter().map(Into::into).collect();
    (!list.as_ref().is_empty()).then_some(list)
}

impl Headers {
    /// No headers.
    pub fn new() -> Self {
        Headers::default()
    }

    /// `accept`: the media ranges the client takes, with their weights, in
    /// its order (D8, D18). Never an empty slice.
    pub fn accept(&self) -> Option<&[Weighted<MediaRange>]> {
        self.more().accept.as_deref()
    }

    /// Sets `accept` (builder style): media ranges, weighted or not. An
    /// empty list removes the header (D8).
    pub fn with_accept(mut self, ranges: impl IntoIterator<Item = impl Into<Weighted<MediaRange>>>) -> Self {
        self.set_more(non_empty(ranges), |more| &mut more.accept);
        self
    }

    /// `accept-encoding`: the entries the client lists, with their weights,
    /// in its order. Names of encodings this implementation does not know
    /// are skipped (D8); a header that names only such encodings reads as
    /// `*;q=0`, "nothing known is acceptable", so that `412` follows and the
    /// header writes back with the same meaning. Never an empty slice.
    pub fn accept_encoding(&self) -> Option<&[Weighted<EncodingRange>]> {
        self.more().accept_encoding.as_deref()
    }

    /// Sets `accept-encoding` (builder style): encodings or ranges,
    /// weighted or not, e.g. `[Encoding::Br, Encoding::Gzip]`. An empty
    /// list removes the header (D8).
    pub fn with_accept_encoding(
        mut self,
        encodings: impl IntoIterator<Item = impl Into<Weighted<EncodingRange>>>,
    ) -> Self {
        self.set_more(non_empty(encodings), |more| &mut more.accept_encoding);
        self
    }

    /// `accept-language`: the language ranges the client takes, with their
    /// weights, in its order (D18). Never an empty slice.
    pub fn accept_language(&self) -> Option<&[Weighted<LanguageRange>]> {
        self.more().accept_language.as_deref()
    }

    /// Sets `accept-language` (builder style): tags or ranges, weighted or
    /// not. An empty list removes the header (D8).
    pub fn with_accept_language(
        mut self,
        languages: impl IntoIterator<Item = impl Into<Weighted<LanguageRange>>>,
    ) -> Self {
        self.set_more(non_empty(languages), |more| &mut more.accept_language);
        self
    }

    /// Whether the request carries `expect: 100-continue` (D10). Any other
    /// `expect` value is refused with `501` at validation.
    pub fn expect_continue(&self) -> bool {
        self.expect_continue
    }

    /// Sets or clears `expect: 100-continue`.
    pub fn with_expect_continue(mut self, on: bool) -> Self {
        self.expect_continue = on;
        self
    }

    /// `ignore-invalid-headers`: unknown header names were dropped (D8).
    pub fn ignore_invalid_headers(&self) -> bool {
        self.ignore_invalid_headers
    }

    /// Sets `ignore-invalid-headers`.
    pub fn with_ignore_invalid_headers(mut self, on: bool) -> Self {
        self.ignore_invalid_headers = on;
        self
    }

    /// Adds a header whose name is outside the protocol's list, sent as
    /// given after the listed ones: a receiver answers `400` for it unless
    /// `ignore-invalid-headers` is on, and then drops it (D8). `name` is
    /// sent as it is (names are compared in lower case).
    pub fn with_unlisted(mut self, name: impl Into<String>, value: serde_json::Value) -> Self {
        self.more_mut().unlisted.push((name.into(), value));
        self
    }

    /// The headers outside the protocol's list that will be sent.
    pub fn unlisted(&self) -> &[(String, serde_json::Value)] {
        &self.more().unlisted
    }

    /// Whether the header `name` is set. `expect` and
    /// `ignore-invalid-headers` count as set when they are on.
    pub fn contains(&self, name: HeaderName) -> bool {
        let more = self.more();
        match name {
            HeaderName::ContentType => self.content_type.is_some(),
            HeaderName::Accept => more.accept.is_some(),
            HeaderName::AcceptEncoding => more.accept_encoding.is_some(),
            HeaderName::AcceptLanguage => more.accept_language.is_some(),
            HeaderName::Authorization => more.authorization.is_some(),
            HeaderName::Cookies => more.cookies.is_some(),
            HeaderName::IfModifiedSince => more.if_modified_since.is_some(),
            HeaderName::IfUnmodifiedSince => more.if_unmodified_since.is_some(),
            HeaderName::Expect => self.expect_continue,
            HeaderName::IgnoreInvalidHeaders => self.ignore_invalid_headers,
            HeaderName::Date => self.date.is_some(),
            HeaderName::Language => self.language.is_some(),
            HeaderName::SetCookies => more.set_cookies.is_some(),
        }
    }

    /// The names of the headers that are set, in the order they are written.
    pub fn names(&self) -> impl Iterator<Item = HeaderName> + '_ {
        HeaderName::ALL.into_iter().filter(|name| self.contains(*name))
    }

    /// How many headers are set.
    pub fn len(&self) -> usize {
        self.names().count()
    }

    /// Whether no header is set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Weight;
    use crate::message::headers::weight::BAD_WEIGHT;

    #[test]
    fn d8_names_from_the_enum() {
        for (i, name) in HeaderName::ALL.into_iter().enumerate() {
            assert_eq!(HEADER_NAMES[i], name.as_str());
            assert_eq!(HeaderName::from_index(i), Some(name));
            assert_eq!(HeaderName::from_lowercase(name.as_str()), Some(name));
            let upper = name.as_str().to_ascii_uppercase();
            assert_eq!(HeaderName::from_lowercase(&upper), None);
            assert_eq!(HeaderName::from_name(&upper), Some(name));
            assert_eq!(upper.parse::<HeaderName>(), Ok(name));
            assert_eq!(name.to_string(), name.as_str());
        }
        assert_eq!(HeaderName::from_index(13), None);
        assert_eq!(HeaderName::from_name("x-custom"), None);
        assert_eq!(HeaderName::from_name("content-typ"), None);
        assert_eq!(HeaderName::from_name(""), None);
        assert!(HeaderName::ContentType.is_request_header() && HeaderName::ContentType.is_response_header());
        assert!(!HeaderName::Date.is_request_header() && HeaderName::Date.is_response_header());
        assert!(HeaderName::Expect.is_request_header() && !HeaderName::Expect.is_response_header());
    }

    #[test]
    fn d8_weighted_entries() {
        let e = |s: &str| s.parse::<Weighted<EncodingRange>>();
        assert_eq!(e("gzip"), Ok(Encoding::Gzip.into()));
        let half = Weight::from_thousandths(500).unwrap();
        assert_eq!(
            e(" br ; q=0.5 "),
            Ok(Weighted::new(EncodingRange::Encoding(Encoding::Br)).with_weight(half))
        );
        assert_eq!(
            e("*;Q=0"),
            Ok(Weighted::new(EncodingRange::Any).with_weight(Weight::ZERO))
        );
        for bad in [
            "gzip;q=2",
            "gzip;q=",
            "gzip;q = 1",
            "gzip;level=1",
            "gzip;",
            "gzip;q=1;q=1",
        ] {
            assert_eq!(e(bad).unwrap_err().reason(), BAD_WEIGHT, "{bad:?}");
        }
        assert!(e("compress").is_err());
        let l = "en-US;q=0.8".parse::<Weighted<LanguageRange>>().unwrap();
        assert_eq!(l.value, LanguageRange::Tag(LanguageTag::EN_US));
        assert_eq!(l.to_string(), "en-US;q=0.8");
        assert_eq!(
            Weighted::<EncodingRange>::from(Encoding::Gzip).to_string(),
            "gzip"
        );
    }

    proptest::proptest! {
        #[test]
        fn a_language_entry_reads_as_its_weight_split_off_then_its_tag(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![
                    "en-US", "eN-uS", "fr-CH", "xx-US", "en-XX", "*", "en", "-", "e", "US", "1", ";", "q=",
                    "Q=", "0.5", "0", " ", "\t", ".", ",", "\u{e9}",
                ]),
                0..6,
            )
        ) {
            let s = pieces.concat();
            proptest::prop_assert_eq!(s.parse::<Weighted<LanguageRange>>(), weighted::<LanguageRange>(&s), "{:?}", s);
        }
    }

    #[test]
    fn headers_behind_the_pointer_are_equal_however_stored() {
        // Removing a header never set makes no room for it.
        let none = Headers::new()
            .with_authorization(None)
            .with_accept_encoding(None::<Encoding>);
        assert!(none.more_if_any().is_none());
        // Set and removed again, it reads and compares as never set.
        let emptied = Headers::new()
            .with_authorization("token".to_owned())
            .with_authorization(None);
        assert!(emptied.more_if_any().is_some());
        assert_eq!(emptied, Headers::new());
        assert!(emptied.is_empty());
        assert_eq!(format!("{emptied:?}"), format!("{:?}", Headers::new()));
        let set = Headers::new().with_if_modified_since(Date::from_unix_seconds(1));
        assert_ne!(set, Headers::new());
        assert_eq!(set.names().collect::<Vec<_>>(), [HeaderName::IfModifiedSince]);
    }

    #[test]
    fn a_message_moves_as_a_small_value() {
        // Every response moves several times between a handler and the
        // writer: the headers most messages lack are boxed so that it
        // stays small.
        assert!(
            std::mem::size_of::<Headers>() <= 96,
            "{}",
            std::mem::size_of::<Headers>()
        );
        assert!(
            std::mem::size_of::<crate::message::Response>() <= 216,
            "{}",
            std::mem::size_of::<crate::message::Response>()
        );
    }

    #[test]
    fn d8_empty_lists_are_no_header() {
        let h = Headers::new()
            .with_accept_encoding([Encoding::Gzip])
            .with_accept_language(Vec::<LanguageTag>::new());
        assert_eq!(h.accept_encoding().map(<[_]>::len), Some(1));
        assert_eq!(h.accept_language(), None);
        assert_eq!(h.names().collect::<Vec<_>>(), [HeaderName::AcceptEncoding]);
        let h = h.with_accept_encoding(None::<Encoding>);
        assert!(h.is_empty());
    }
}
