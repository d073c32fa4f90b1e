//! The `headers` object, typed (D8). Every header the protocol lists has a
//! field of its own type here, so a `Headers` value cannot hold a malformed
//! header. Names on the wire are case-insensitive; we write them lower-case.

use smallvec::SmallVec;

use super::{Cookies, Date, Encoding, LanguageRange, LanguageTag, MediaRange, MediaType};

/// The encodings of `accept-encoding`: a request lists a handful, held
/// without an allocation of their own.
pub(crate) type EncodingList = SmallVec<[Encoding; 8]>;

/// The languages of `accept-language`: usually one or two.
pub(crate) type LanguageList = SmallVec<[LanguageRange; 2]>;

/// Header names the protocol lists (D8), lower-case, in the order we write
/// them.
pub const HEADER_NAMES: [&str; 13] = [
    "content-type",
    "accept",
    "accept-encoding",
    "accept-language",
    "authorization",
    "cookies",
    "if-modified-since",
    "if-unmodified-since",
    "expect",
    "ignore-invalid-headers",
    "date",
    "language",
    "set-cookies",
];

/// The headers of a request or a response.
///
/// Request-only and response-only headers share one type: the protocol
/// lists both kinds in one table (D8), and a request that carries `date` is
/// valid (the value is ignored by a server).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers {
    pub(crate) content_type: Option<MediaType>,
    pub(crate) accept: Option<Vec<MediaRange>>,
    pub(crate) accept_encoding: Option<EncodingList>,
    pub(crate) accept_language: Option<LanguageList>,
    pub(crate) authorization: Option<String>,
    pub(crate) cookies: Option<Cookies>,
    pub(crate) if_modified_since: Option<Date>,
    pub(crate) if_unmodified_since: Option<Date>,
    pub(crate) expect_continue: bool,
    pub(crate) ignore_invalid_headers: bool,
    pub(crate) date: Option<Date>,
    pub(crate) language: Option<LanguageTag>,
    pub(crate) set_cookies: Option<Cookies>,
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
                    // `Into`: a `Vec` becomes the field's `SmallVec`.
                    self.$field = value.into().map(Into::into);
                    self
                }
            )*
        }
    };
}

accessors! {
    /// `content-type`: the media type of the body.
    content_type, with_content_type: MediaType, &MediaType, as_ref;
    /// `accept`: the media ranges the client takes.
    accept, with_accept: Vec<MediaRange>, &[MediaRange], as_deref;
    /// `accept-encoding`: the known encodings the client lists, in its order
    /// (unknown ones are skipped, D8). `Some(&[])` when it listed only
    /// unknown ones.
    accept_encoding, with_accept_encoding: Vec<Encoding>, &[Encoding], as_deref;
    /// `accept-language`: the languages the client takes, in its order.
    accept_language, with_accept_language: Vec<LanguageRange>, &[LanguageRange], as_deref;
    /// `authorization`: the client's credentials (D14).
    authorization, with_authorization: String, &str, as_deref;
    /// `cookies`, from either form (D15).
    cookies, with_cookies: Cookies, &Cookies, as_ref;
    /// `if-modified-since` (D16, D17).
    if_modified_since, with_if_modified_since: Date, Date;
    /// `if-unmodified-since` (D16, D17).
    if_unmodified_since, with_if_unmodified_since: Date, Date;
    /// `date`: when the response was made (D16).
    date, with_date: Date, Date;
    /// `language`: the language of the response (D18).
    language, with_language: LanguageTag, LanguageTag;
    /// `set-cookies`: cookies the server sets (D15).
    set_cookies, with_set_cookies: Cookies, &Cookies, as_ref;
}

impl Headers {
    /// No headers.
    pub fn new() -> Self {
        Headers::default()
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

    /// How many headers are set.
    pub fn len(&self) -> usize {
        [
            self.content_type.is_some(),
            self.accept.is_some(),
            self.accept_encoding.is_some(),
            self.accept_language.is_some(),
            self.authorization.is_some(),
            self.cookies.is_some(),
            self.if_modified_since.is_some(),
            self.if_unmodified_since.is_some(),
            self.expect_continue,
            self.ignore_invalid_headers,
            self.date.is_some(),
            self.language.is_some(),
            self.set_cookies.is_some(),
        ]
        .into_iter()
        .filter(|set| *set)
        .count()
    }

    /// Whether no header is set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
