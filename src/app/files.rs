//! The rules of a file server, shared by every file server on this
//! library: `jsontp serve`'s and the Python package's judge a file request
//! by this code, so that they answer it alike.
//!
//! The rules are pure: they read no file. The server gathers the facts
//! (what a `GET` or `POST` found at the path, or what place a `PUT`,
//! `DELETE` or `OPTIONS` names) and [`FileRules::judge`] weighs the
//! request against them in the order D5 gives, returning what to do
//! ([`Verdict`]) or the response to send. Opening, reading, caching,
//! streaming and writing stay with the server.
//!
//! The order of [`FileRules::judge`]:
//!
//! - Level 3: a resource name the server refuses whatever the folder
//!   holds ([`refused_name`], `400`).
//! - Level 5, what the server can offer: the request's `content-type`
//!   (`415`); `accept` against the file's media type (`415`, for `GET`
//!   and `POST`, the methods that return the file); `accept-encoding`
//!   (`412`), first as for text, then, once the content's kind is known,
//!   also when only `identity` is acceptable and the file is not UTF-8
//!   text (D8); a file that is there but cannot be read ([`Unreadable`]:
//!   `403`, `500`, `503`) between the two; `accept-language` (`406`).
//! - Level 6, the application: the token (`401`, D14); `405` for writes
//!   on a read-only server (D11); `409` for `PUT`/`DELETE` of a folder
//!   (D11); the conditional headers (`304`/`412`, D17), before `404`, so
//!   that a condition on a resource that cannot be provided is `412`;
//!   then `404`, or what to do.
//!
//! Beside the judgement: which methods a resource allows
//! ([`allowed_methods`], D11), a path's media type ([`media_type_of`]),
//! whether content may go as `identity` ([`is_utf8_text`], D9), and a
//! folder listing's format ([`ListingEntry`], [`listing_text`],
//! [`next_page`], [`LISTING_PAGE`]).

use std::io;

use serde::ser::{Serialize, SerializeStruct, Serializer};
use subtle::ConstantTimeEq;

use crate::message::form::parse_form;
use crate::message::negotiate::{self, ContentKind};
use crate::message::{
    Date, Encoding, Headers, LanguageTag, MediaType, Method, Request, Resource, Response, Status, StatusCode,
};

/// The media types a request's `content-type` may name: the file types a
/// file server sends, and form data for `POST` (D11); another is `415`
/// (D5).
pub const ACCEPTED_CONTENT_TYPES: [&str; 5] = [
    "text/plain",
    "text/html",
    "application/json",
    "application/octet-stream",
    "application/x-www-form-urlencoded",
];

/// The file a resource names when it is a folder (`/` → `index.html`).
pub const INDEX: &str = "index.html";

/// The most entries one listing answer holds: about 330 bytes of JSON
/// each at most (a 255-byte name), so a page stays within D3's 1 MiB of
/// held output whatever the folder's size; `?after=NAME` asks for the
/// next page, which the answer names in its body key `next-page`
/// ([`next_page`]).
pub const LISTING_PAGE: usize = 2000;

/// The methods of an existing resource, and of a missing one that `PUT`
/// could create, on a writable server and on a read-only one (D11).
const ALL_METHODS: &[Method] = &Method::ALL;
const READ_METHODS: &[Method] = &[Method::Get, Method::Post, Method::Options];
const CREATE_METHODS: &[Method] = &[Method::Put, Method::Options];
const OPTIONS_ONLY: &[Method] = &[Method::Options];

/// The rules one file server applies: whether it takes writes, the token
/// writes need, the languages it offers. Built with [`new`](Self::new)
/// and the `with_` methods; [`judge`](Self::judge) applies them.
#[derive(Debug, Clone)]
pub struct FileRules {
    writable: bool,
    token: Option<String>,
    languages: Vec<LanguageTag>,
    content_types: Vec<MediaType>,
}

impl Default for FileRules {
    fn default() -> Self {
        FileRules::new()
    }
}

/// What a `GET` or `POST` found at the resource's path, gathered by the
/// server before [`FileRules::judge`].
#[derive(Debug)]
pub enum Found {
    /// A file (a folder's `index.html` included): whether it is UTF-8
    /// text, and its last modification (D16; `None` when the file system
    /// does not say).
    File {
        /// Whether the content is UTF-8 text (D8, D9).
        kind: ContentKind,
        /// The file's last modification, for the conditional headers.
        modified: Option<Date>,
    },
    /// A folder without `index.html`, listed (JSON text): the latest
    /// modification of the folder and of the page's entries.
    Listing {
        /// The last modification the conditional headers see.
        modified: Option<Date>,
    },
    /// A file larger than the server's limit, not read: `500` once the
    /// conditional headers have passed.
    TooLarge {
        /// The file's last modification.
        modified: Option<Date>,
        /// The server's limit, in bytes, which the message names.
        limit: u64,
    },
    /// Nothing the server may send: `404` once the conditional headers
    /// have passed.
    Missing {
        /// Whether the path names a folder (one without `index.html`, on a
        /// server that does not list folders), which the message says.
        folder: bool,
    },
    /// Something there that could not be read: the refusal it earned.
    Unreadable(Unreadable),
}

/// Why something at a path could not be read: each answers as
/// [`Unreadable::response`] says, never `404`, which would tell the client
/// the file is gone.
#[derive(Debug)]
pub enum Unreadable {
    /// Not a regular file or folder (a pipe, a socket, a device): `403`.
    NotAFile,
    /// There, but opening it failed: `503` when the server is out of file
    /// descriptors (it may pass), `500` otherwise.
    CannotOpen(io::Error),
    /// Opened, but reading it (or listing the folder) failed: `500`.
    CannotRead(io::Error),
    /// The file changed while it was read, so what was read may mix two
    /// versions: `503`, to try again.
    Changed,
}

/// What a resource's path names for `PUT`, `DELETE` and `OPTIONS`, which
/// act on the path itself (a folder is not followed to its `index.html`,
/// a symlink is replaced or removed, not its target).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// An existing file (or symlink) in a folder inside the root.
    File {
        /// Its last modification (following a symlink), for the
        /// conditional headers.
        modified: Option<Date>,
    },
    /// An existing folder.
    Folder,
    /// Nothing yet, in an existing folder inside the root: `PUT` could
    /// create it.
    Missing,
    /// Nothing that could be: the folder is missing, or lies outside the
    /// root.
    Nowhere,
}

/// The facts of a request, gathered by the server for
/// [`FileRules::judge`]: what the request's method needs.
#[derive(Debug)]
pub enum Facts<'m> {
    /// For `GET` and `POST`: the media type of what the path sends (known
    /// from the name for a missing file too, since `accept` is checked
    /// before existence, D5; [`media_type_of`]), and what was found.
    Read {
        /// The media type sent.
        media: &'m MediaType,
        /// What the path holds.
        found: Found,
    },
    /// For `PUT`, `DELETE` and `OPTIONS`: the place the path names, and
    /// whether a `GET` of it would find something (a file, a listing, or
    /// something it cannot read), which [`allowed_methods`] weighs where
    /// the place is [`Missing`](Place::Missing) or
    /// [`Nowhere`](Place::Nowhere).
    Place {
        /// The place.
        place: Place,
        /// Whether a `GET` would find something there.
        exists: bool,
    },
}

/// A request that passed every rule: its negotiated language (D18) and
/// what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict<'m> {
    /// The language of the answer, for its `language` header.
    pub language: LanguageTag,
    /// What the server does.
    pub action: Action<'m>,
}

/// What a request that passed every rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action<'m> {
    /// `GET`, `POST`: send the file or the listing, of this media type
    /// (the one the facts gave), in this encoding (D8).
    Serve {
        /// The `content-type`.
        media: &'m MediaType,
        /// The body's encoding.
        encoding: Encoding,
    },
    /// `PUT`: write the file, atomically.
    Write,
    /// `DELETE`: remove the file.
    Remove,
    /// `OPTIONS`: list these methods (D11).
    Options(&'static [Method]),
}

impl FileRules {
    /// The rules of a server that takes writes without a token and offers
    /// `en-US` alone (D18).
    pub fn new() -> FileRules {
        FileRules {
            writable: true,
            token: None,
            languages: vec![LanguageTag::EN_US],
            content_types: ACCEPTED_CONTENT_TYPES.iter().map(|t| constant_media(t)).collect(),
        }
    }

    /// Whether `PUT` and `DELETE` are served (default: yes). A read-only
    /// server answers them `405` and lists `GET`, `POST`, `OPTIONS` for an
    /// existing resource, `OPTIONS` alone for a missing one (D11).
    pub fn with_writable(mut self, writable: bool) -> Self {
        self.writable = writable;
        self
    }

    /// Requires `authorization` equal to `token` on `PUT` and `DELETE`
    /// (D14): the value alone, or after `Bearer `.
    pub fn with_token(mut self, token: Option<String>) -> Self {
        self.token = token;
        self
    }

    /// The languages offered, the first being the default (D18). An empty
    /// list keeps the current one.
    pub fn with_languages(mut self, languages: Vec<LanguageTag>) -> Self {
        if !languages.is_empty() {
            self.languages = languages;
        }
        self
    }

    /// Whether `PUT` and `DELETE` are served.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// The languages offered, the default first.
    pub fn languages(&self) -> &[LanguageTag] {
        &self.languages
    }

    /// Every rule of D5 levels 3, 5 and 6 in order (see the module's
    /// account), applied to `request` and the `facts` the server gathered
    /// for it: what to do, or the response to send. Facts of the wrong
    /// kind for the method (a place for a `GET`) are the server's fault:
    /// `500`, saying so.
    pub fn judge<'m>(&self, request: &Request, facts: Facts<'m>) -> Result<Verdict<'m>, Box<Response>> {
        let headers = &request.headers;
        let path = request.resource.path();
        let method = request.method;
        let refused = |status: Status| Box::new(Response::new(status));
        // Level 3: a resource this server never serves, said as such.
        if let Some(why) = refused_name(path) {
            return Err(Box::new(Response::from_code(StatusCode::BAD_REQUEST, why)));
        }

        // Level 5: content-type, accept, accept-encoding, accept-language.
        negotiate::check_content_type(headers.content_type(), &self.content_types).map_err(refused)?;
        let reads = matches!(method, Method::Get | Method::Post);
        if reads != matches!(facts, Facts::Read { .. }) {
            return Err(Box::new(Response::internal_error(format!(
                "the server gathered the wrong facts to judge a {method} request; this is a fault \
                 of the server"
            ))));
        }
        if let Facts::Read { media, .. } = &facts {
            negotiate::check_accept(headers.accept(), media).map_err(refused)?;
        }
        // What needs no content first: text fits every encoding.
        let mut encoding =
            negotiate::choose_encoding(headers.accept_encoding(), &Encoding::ALL, ContentKind::Text)
                .map_err(refused)?;
        if let Facts::Read { found, .. } = &facts {
            match found {
                Found::Unreadable(why) => return Err(Box::new(why.response())),
                Found::File {
                    kind: ContentKind::Binary,
                    ..
                } => {
                    encoding = negotiate::choose_encoding(
                        headers.accept_encoding(),
                        &Encoding::ALL,
                        ContentKind::Binary,
                    )
                    .map_err(refused)?;
                }
                // Text, a listing (text), or no content: as chosen above.
                _ => {}
            }
        }
        let language =
            negotiate::choose_language(headers.accept_language(), &self.languages).map_err(refused)?;

        // Level 6: the token, the method, then the resource and its conditions.
        let refuse = |code: StatusCode, message: &str| {
            Box::new(Response::from_code(code, message.to_owned()).with_headers(language_header(language)))
        };
        self.authorize(request)?;
        let conditions = |last_modified: Option<Date>| {
            negotiate::check_conditions(method, headers, last_modified)
                .map_err(|status| Box::new(Response::new(status).with_headers(language_header(language))))
        };
        let action = match facts {
            Facts::Read { media, found } => {
                let modified = match &found {
                    Found::File { modified, .. }
                    | Found::Listing { modified }
                    | Found::TooLarge { modified, .. } => *modified,
                    // Answered at level 5, above.
                    Found::Missing { .. } | Found::Unreadable(_) => None,
                };
                conditions(modified)?;
                match found {
                    Found::File { .. } | Found::Listing { .. } => Action::Serve { media, encoding },
                    Found::Missing { folder: true } => {
                        return Err(refuse(
                            StatusCode::NOT_FOUND,
                            "this is a folder without index.html, and this server does not list \
                             folders (jsontp serve --list does)",
                        ));
                    }
                    Found::Missing { folder: false } => {
                        return Err(refuse(StatusCode::NOT_FOUND, "no file by this name"));
                    }
                    Found::Unreadable(why) => return Err(Box::new(why.response())),
                    Found::TooLarge { limit, .. } => {
                        return Err(refuse(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            &format!("the file is larger than this server's limit of {limit} bytes"),
                        ));
                    }
                }
            }
            Facts::Place { place, exists } => {
                if !self.writable && matches!(method, Method::Put | Method::Delete) {
                    return Err(Box::new(
                        read_only(method, allowed_methods(false, place, exists))
                            .with_headers(language_header(language)),
                    ));
                }
                match (method, place) {
                    (Method::Put, Place::Folder) => {
                        return Err(refuse(
                            StatusCode::CONFLICT,
                            "this resource is a folder; PUT writes files",
                        ));
                    }
                    (Method::Delete, Place::Folder) => {
                        return Err(refuse(
                            StatusCode::CONFLICT,
                            "this resource is a folder; DELETE removes files",
                        ));
                    }
                    (Method::Put, Place::Nowhere) => {
                        conditions(None)?;
                        return Err(refuse(
                            StatusCode::NOT_FOUND,
                            "the folder of this resource does not exist; PUT creates files, not \
                             folders",
                        ));
                    }
                    (Method::Put, Place::Missing) => {
                        conditions(None)?;
                        Action::Write
                    }
                    (Method::Put, Place::File { modified }) => {
                        conditions(modified)?;
                        Action::Write
                    }
                    (Method::Delete, Place::Nowhere | Place::Missing) => {
                        conditions(None)?;
                        return Err(refuse(StatusCode::NOT_FOUND, "no file by this name"));
                    }
                    (Method::Delete, Place::File { modified }) => {
                        conditions(modified)?;
                        Action::Remove
                    }
                    // OPTIONS: GET and POST came with what they found.
                    _ => Action::Options(allowed_methods(self.writable, place, exists)),
                }
            }
        };
        Ok(Verdict { language, action })
    }

    /// D14: `PUT` and `DELETE` need the token when one is configured.
    fn authorize(&self, request: &Request) -> Result<(), Box<Response>> {
        let Some(token) = &self.token else { return Ok(()) };
        if !matches!(request.method, Method::Put | Method::Delete) {
            return Ok(());
        }
        // Constant time: how long the comparison takes must not tell how
        // many leading bytes of a guess were right. The value as given is
        // compared too, for a token that itself starts with "Bearer ".
        let matches = |given: &str| {
            let alone = given.as_bytes().ct_eq(token.as_bytes());
            let after_scheme = bearer_token(given).as_bytes().ct_eq(token.as_bytes());
            bool::from(alone | after_scheme)
        };
        let message = match request.headers.authorization() {
            Some(given) if matches(given) => return Ok(()),
            Some(_) => "authorization does not match the server's token".to_owned(),
            None => format!(
                "authorization is required to {} on this server: send its token \
                 (jsontp: -H 'authorization: TOKEN')",
                request.method
            ),
        };
        Err(Box::new(Response::unauthorized(message)))
    }
}

/// `405` for a write on a read-only server, listing what is allowed.
fn read_only(method: Method, allowed: &'static [Method]) -> Response {
    let mut response = Response::method_not_allowed(method, allowed);
    let names: Vec<&str> = allowed.iter().map(|m| m.as_str()).collect();
    response.status.human_message = format!(
        "this server is read-only, so {method} is not allowed (allowed here: {}); its operator can \
         allow writes (jsontp serve --writable, or --token TOKEN to require a token for them)",
        names.join(", ")
    )
    .into();
    response
}

impl Unreadable {
    /// The answer it earns, with a message that says which.
    pub fn response(&self) -> Response {
        match self {
            Unreadable::NotAFile => Response::from_code(
                StatusCode::FORBIDDEN,
                "this is not a regular file (a pipe, a socket or a device): this server serves \
                 files and folders only",
            ),
            Unreadable::CannotOpen(e) if out_of_descriptors(e) => Response::from_code(
                StatusCode::SERVICE_UNAVAILABLE,
                "the server has too many files open to open this one; try again shortly",
            ),
            Unreadable::CannotOpen(e) if e.kind() == io::ErrorKind::PermissionDenied => Response::from_code(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the server is not permitted to read this file (permission denied)",
            ),
            Unreadable::CannotOpen(e) => Response::from_code(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the server could not open this file: {e}"),
            ),
            Unreadable::CannotRead(e) => {
                Response::internal_error(format!("the server could not access the file: {e}"))
            }
            Unreadable::Changed => Response::from_code(
                StatusCode::SERVICE_UNAVAILABLE,
                "the file changed while it was read; try again",
            ),
        }
    }
}

/// The answer when a `PUT` could not write its file, which leaves the old
/// file (or none) in place: `503` when the server is out of descriptors,
/// as for a `GET` (it may pass, and a retry is safe since nothing was
/// stored), `500` otherwise; in `language`.
pub fn write_failed(error: &io::Error, language: LanguageTag) -> Response {
    if out_of_descriptors(error) {
        return Response::from_code(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is out of file descriptors (too many files open), so nothing was written; \
             try again shortly",
        )
        .with_headers(language_header(language));
    }
    access_failed(error, language)
}

/// The answer when the file system refused what a verdict said to do (a
/// `DELETE`'s removal, say): `500`, naming the error; in `language`.
pub fn access_failed(error: &io::Error, language: LanguageTag) -> Response {
    Response::from_code(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("the server could not access the file: {error}"),
    )
    .with_headers(language_header(language))
}

/// Whether `e` says the process or the system has no file descriptor left
/// (EMFILE, ENFILE): a condition that passes.
fn out_of_descriptors(e: &io::Error) -> bool {
    #[cfg(unix)]
    return e
        .raw_os_error()
        .map(rustix::io::Errno::from_raw_os_error)
        .is_some_and(|errno| matches!(errno, rustix::io::Errno::MFILE | rustix::io::Errno::NFILE));
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

/// `language` as the response's only header.
fn language_header(language: LanguageTag) -> Headers {
    Headers::new().with_language(language)
}

/// The token of an `authorization` value: the value alone, or after the
/// scheme as HTTP writes it (`Bearer s3cret`, the scheme in any case, one
/// space), D14.
fn bearer_token(value: &str) -> &str {
    match value.split_at_checked(7) {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer ") => token,
        _ => value,
    }
}

/// Why a file server refuses a resource path (or a name in a listing)
/// whatever the folder holds (`400`, D5 level 3), where the name would
/// otherwise look missing; `None` for a name it may serve.
pub fn refused_name(path: &str) -> Option<&'static str> {
    path.contains('\\').then_some(
        "this server refuses resource names that hold a backslash (\\), which some systems read \
         as a folder separator; such a file cannot be served: rename it",
    )
}

/// The methods a resource allows (D11), for `OPTIONS`'s
/// `allowed-methods` and a read-only server's `405`: never `404`, a
/// missing resource lists what could be done there. `exists`: whether a
/// `GET` of the path finds something (see [`Facts::Place`]), weighed only
/// where `place` is [`Missing`](Place::Missing) or
/// [`Nowhere`](Place::Nowhere).
///
/// | place | writable | read-only |
/// |---|---|---|
/// | folder | `GET`, `POST`, `OPTIONS` (`PUT`/`DELETE` of a folder are `409`) | `GET`, `POST`, `OPTIONS` |
/// | file, or something a `GET` finds | all | `GET`, `POST`, `OPTIONS` |
/// | missing, creatable | `PUT`, `OPTIONS` | `OPTIONS` |
/// | nowhere | `OPTIONS` | `OPTIONS` |
pub fn allowed_methods(writable: bool, place: Place, exists: bool) -> &'static [Method] {
    match (place, exists || matches!(place, Place::File { .. }), writable) {
        (Place::Folder, _, _) => READ_METHODS,
        (_, true, true) => ALL_METHODS,
        (_, true, false) => READ_METHODS,
        (Place::Missing, false, true) => CREATE_METHODS,
        (_, false, _) => OPTIONS_ONLY,
    }
}

/// The media type sent for a resource path, from its extension (the
/// `mime_guess` table, extensions in any case): `.txt` is `text/plain`,
/// `.html` `text/html`, `.json` `application/json`; a path ending in `/`
/// names a folder, which sends its `index.html`, so `text/html`; an unknown
/// extension, or none, is `application/octet-stream`.
pub fn media_type_of(path: &str) -> MediaType {
    const UNKNOWN: &str = "application/octet-stream";
    if path.ends_with('/') {
        return constant_media("text/html");
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    let guessed = name
        .rsplit_once('.')
        .and_then(|(_, extension)| mime_guess::from_ext(extension).first_raw())
        .unwrap_or(UNKNOWN);
    // The table's names are registered media types; one this crate would
    // not parse is sent as what it is to us: bytes.
    guessed.parse().unwrap_or_else(|_| constant_media(UNKNOWN))
}

/// The media type of a folder's listing: `application/json`.
pub fn listing_media_type() -> MediaType {
    constant_media("application/json")
}

/// Parses one of this module's constant media types.
fn constant_media(name: &str) -> MediaType {
    name.parse()
        .unwrap_or_else(|_| unreachable!("{name} is a valid media type"))
}

/// Whether everything `reader` yields is UTF-8 text, read through in
/// 64 KiB pieces (a character cut between two reads is carried over), in
/// constant memory: whether content of any size may travel as `identity`
/// (D9).
pub fn is_utf8_text(reader: &mut impl io::Read) -> io::Result<bool> {
    let mut buffer = vec![0u8; 64 * 1024];
    let mut carried = 0;
    loop {
        let n = reader.read(&mut buffer[carried..])?;
        let filled = carried + n;
        match std::str::from_utf8(&buffer[..filled]) {
            Ok(_) if n == 0 => return Ok(true),
            Ok(_) => carried = 0,
            Err(e) if e.error_len().is_some() || n == 0 => return Ok(false),
            Err(e) => {
                let valid = e.valid_up_to();
                buffer.copy_within(valid..filled, 0);
                carried = filled - valid;
            }
        }
    }
}

/// One entry of a folder listing, as sent:
/// `{"name", "size", "modified", "is-folder"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListingEntry {
    /// The entry's name in its folder.
    pub name: String,
    /// Bytes; `0` for a folder.
    pub size: u64,
    /// The last modification, sent as a D16 date, `null` when the file
    /// system does not say.
    pub modified: Option<Date>,
    /// Whether it is a folder.
    pub is_folder: bool,
}

impl Serialize for ListingEntry {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut entry = serializer.serialize_struct("ListingEntry", 4)?;
        entry.serialize_field("name", &self.name)?;
        entry.serialize_field("size", &self.size)?;
        entry.serialize_field("modified", &self.modified.map(|date| date.to_string()))?;
        entry.serialize_field("is-folder", &self.is_folder)?;
        entry.end()
    }
}

/// One page of a listing as sent: its entries (at most [`LISTING_PAGE`],
/// sorted by name) as a JSON array, ending in a line break, so that a
/// listing printed in a terminal ends its line.
pub fn listing_text(entries: &[ListingEntry]) -> Vec<u8> {
    // Strings, numbers and booleans: serde_json cannot fail on them.
    let mut text = serde_json::to_vec(entries).unwrap_or_else(|e| unreachable!("a listing is JSON: {e}"));
    text.push(b'\n');
    text
}

/// The `after` of a listing's request (`?after=NAME`): the name its page
/// starts after, `None` for the first page.
pub fn listing_after(resource: &Resource) -> Option<String> {
    resource
        .query()
        .and_then(parse_form)
        .and_then(|pairs| pairs.into_iter().find(|(k, _)| k == "after"))
        .map(|(_, v)| v)
}

/// The resource of a listing's next page (body key `next-page`), for the
/// folder at resource `path` whose page ended with `last`:
/// `PATH/?after=NAME`, the name percent-encoded.
pub fn next_page(path: &str, last: &str) -> String {
    let slash = if path.ends_with('/') { "" } else { "/" };
    format!("{path}{slash}?after={}", percent_encode(last))
}

/// `text` percent-encoded for a query value: all but RFC 3986's
/// unreserved characters.
fn percent_encode(text: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{MessageLimits, RequestContext, parse_request};

    const EARLIER: Date = Date::from_unix_seconds(1_700_000_000);
    const LATER: Date = Date::from_unix_seconds(1_800_000_000);

    /// A request as a client writes it, headers given as JSON.
    fn request(method: &str, resource: &str, headers: serde_json::Value) -> Request {
        let text = serde_json::json!({
            "jsontp": "1.0", "type": "request", "resource": resource, "method": method,
            "headers": headers, "body": {"content": "", "encoding": "identity"},
        });
        parse_request(
            text.to_string().as_bytes(),
            RequestContext::Fresh,
            &MessageLimits::default(),
        )
        .expect("a valid request")
    }

    fn text_file(modified: Option<Date>) -> Found {
        Found::File {
            kind: ContentKind::Text,
            modified,
        }
    }

    /// The status of a refusal; the verdict's action otherwise, as text.
    fn code(judged: Result<Verdict<'_>, Box<Response>>) -> u16 {
        match judged {
            Ok(verdict) => panic!("expected a refusal, got {verdict:?}"),
            Err(response) => response.status.code.as_u16(),
        }
    }

    fn read<'m>(media: &'m MediaType, found: Found) -> Facts<'m> {
        Facts::Read { media, found }
    }

    fn at(place: Place) -> Facts<'static> {
        Facts::Place {
            place,
            exists: matches!(place, Place::File { .. } | Place::Folder),
        }
    }

    #[test]
    fn a_file_that_passes_is_served_in_the_negotiated_encoding_and_language() {
        let rules = FileRules::new().with_languages(vec!["en-US".parse().unwrap(), "fr-FR".parse().unwrap()]);
        let media = media_type_of("/a.bin");
        let binary = Found::File {
            kind: ContentKind::Binary,
            modified: Some(EARLIER),
        };
        let get = request(
            "GET",
            "/a.bin",
            serde_json::json!({"accept-encoding": ["identity", "br;q=0.5"], "accept-language": ["fr-FR"]}),
        );
        let verdict = rules.judge(&get, read(&media, binary)).expect("served");
        assert_eq!(verdict.language, "fr-FR".parse().unwrap());
        // Binary cannot go as identity (D8): the next the client accepts.
        assert_eq!(
            verdict.action,
            Action::Serve {
                media: &media,
                encoding: Encoding::Br
            }
        );
        // Only identity acceptable, and the file is not text: 412.
        let get = request(
            "GET",
            "/a.bin",
            serde_json::json!({"accept-encoding": ["identity"]}),
        );
        let binary = Found::File {
            kind: ContentKind::Binary,
            modified: None,
        };
        assert_eq!(code(rules.judge(&get, read(&media, binary))), 412);
        let verdict = rules.judge(&get, read(&media, text_file(None))).expect("text");
        assert_eq!(
            verdict.action,
            Action::Serve {
                media: &media,
                encoding: Encoding::Identity
            }
        );
    }

    #[test]
    fn d5_the_token_comes_before_the_missing_file_and_the_read_only_405() {
        let rules = FileRules::new().with_token(Some("s3cret".into()));
        let put = request("PUT", "/missing/a.txt", serde_json::json!({}));
        assert_eq!(code(rules.judge(&put, at(Place::Nowhere))), 401);
        let bad = request("PUT", "/a.txt", serde_json::json!({"authorization": "guess"}));
        let refused = rules.judge(&bad, at(Place::Missing)).expect_err("a wrong token");
        assert_eq!(refused.status.code.as_u16(), 401);
        assert_eq!(
            refused.status.human_message,
            "authorization does not match the server's token"
        );
        // The token alone, or after `Bearer ` in any case.
        for given in ["s3cret", "Bearer s3cret", "bearer s3cret"] {
            let put = request("PUT", "/a.txt", serde_json::json!({"authorization": given}));
            let verdict = rules.judge(&put, at(Place::Missing)).expect(given);
            assert_eq!(verdict.action, Action::Write, "{given}");
        }
        // GET needs no token.
        let get = request("GET", "/a.txt", serde_json::json!({}));
        let media = media_type_of("/a.txt");
        let missing = Found::Missing { folder: false };
        assert_eq!(code(rules.judge(&get, read(&media, missing))), 404);
        // Read-only: a bad token is 401 before the 405.
        let read_only = rules.with_writable(false);
        assert_eq!(
            code(read_only.judge(&bad, at(Place::File { modified: None }))),
            401
        );
        let put = request("PUT", "/a.txt", serde_json::json!({"authorization": "s3cret"}));
        let refused = read_only
            .judge(&put, at(Place::File { modified: None }))
            .expect_err("read-only");
        assert_eq!(refused.status.code.as_u16(), 405);
        assert!(
            refused.status.human_message.starts_with(
                "this server is read-only, so PUT is not allowed (allowed here: GET, POST, OPTIONS)"
            ),
            "{}",
            refused.status.human_message
        );
    }

    #[test]
    fn d5_level_5_comes_before_existence_and_the_unreadable() {
        let rules = FileRules::new();
        let media = media_type_of("/a.txt");
        // accept names another type: 415 before the 404.
        let get = request("GET", "/a.txt", serde_json::json!({"accept": ["image/png"]}));
        let missing = Found::Missing { folder: false };
        assert_eq!(code(rules.judge(&get, read(&media, missing))), 415);
        assert_eq!(
            code(rules.judge(&get, read(&media, Found::Unreadable(Unreadable::NotAFile)))),
            415
        );
        // A content-type no file server takes: 415, on every method.
        let put = request("PUT", "/a.txt", serde_json::json!({"content-type": "image/png"}));
        assert_eq!(code(rules.judge(&put, at(Place::Nowhere))), 415);
        // Something unreadable earns its own answer, after the encoding
        // needing no content and before the language.
        let get = request("GET", "/a.txt", serde_json::json!({"accept-language": ["de-DE"]}));
        assert_eq!(
            code(rules.judge(&get, read(&media, Found::Unreadable(Unreadable::Changed)))),
            503
        );
        let get = request("GET", "/a.txt", serde_json::json!({"accept-encoding": ["zstd"]}));
        assert_eq!(
            code(rules.judge(&get, read(&media, Found::Unreadable(Unreadable::Changed)))),
            412
        );
        // The language: 406, before a missing file's 404.
        let get = request("GET", "/a.txt", serde_json::json!({"accept-language": ["de-DE"]}));
        let missing = Found::Missing { folder: false };
        assert_eq!(code(rules.judge(&get, read(&media, missing))), 406);
        // A name refused whatever the folder holds: 400 before all.
        let get = request("GET", "/a\\b.txt", serde_json::json!({"accept": ["image/png"]}));
        let missing = Found::Missing { folder: false };
        assert_eq!(code(rules.judge(&get, read(&media, missing))), 400);
    }

    #[test]
    fn d17_conditions_come_after_409_and_before_404() {
        let rules = FileRules::new();
        let since = serde_json::json!({"if-unmodified-since": EARLIER.to_string()});
        // A folder is 409 whatever the conditions.
        let put = request("PUT", "/folder", since.clone());
        assert_eq!(code(rules.judge(&put, at(Place::Folder))), 409);
        let delete = request("DELETE", "/folder", since.clone());
        assert_eq!(code(rules.judge(&delete, at(Place::Folder))), 409);
        // A condition on what cannot be provided is 412, not 404.
        let delete = request("DELETE", "/gone.txt", since.clone());
        assert_eq!(code(rules.judge(&delete, at(Place::Missing))), 412);
        let get = request("GET", "/gone.txt", since.clone());
        let media = media_type_of("/gone.txt");
        assert_eq!(
            code(rules.judge(&get, read(&media, Found::Missing { folder: false }))),
            412
        );
        // Without one: 404, saying which.
        let get = request("GET", "/folder/", serde_json::json!({}));
        let media = media_type_of("/folder/");
        let refused = rules
            .judge(&get, read(&media, Found::Missing { folder: true }))
            .expect_err("a folder without index.html");
        assert_eq!(refused.status.code.as_u16(), 404);
        assert!(refused.status.human_message.contains("folder without index.html"));
        // Modified since the condition's date: 412; unmodified: written.
        let put = request("PUT", "/a.txt", since);
        assert_eq!(
            code(rules.judge(
                &put,
                at(Place::File {
                    modified: Some(LATER)
                })
            )),
            412
        );
        let written = rules.judge(
            &put,
            at(Place::File {
                modified: Some(EARLIER),
            }),
        );
        assert_eq!(written.expect("unmodified").action, Action::Write);
        // GET of an unmodified file: 304; of a listing as of a file.
        let get = request(
            "GET",
            "/a.txt",
            serde_json::json!({"if-modified-since": LATER.to_string()}),
        );
        let media = media_type_of("/a.txt");
        assert_eq!(
            code(rules.judge(&get, read(&media, text_file(Some(EARLIER))))),
            304
        );
        let listing = Found::Listing {
            modified: Some(EARLIER),
        };
        assert_eq!(code(rules.judge(&get, read(&media, listing))), 304);
        // Over the limit: 500 naming it, after the conditions.
        let too_large = || Found::TooLarge {
            modified: Some(EARLIER),
            limit: 10,
        };
        assert_eq!(code(rules.judge(&get, read(&media, too_large()))), 304);
        let get = request("GET", "/a.txt", serde_json::json!({}));
        let refused = rules
            .judge(&get, read(&media, too_large()))
            .expect_err("too large");
        assert_eq!(refused.status.code.as_u16(), 500);
        assert!(refused.status.human_message.contains("limit of 10 bytes"));
        // Every refusal of level 6 but the token's is in the language.
        assert_eq!(refused.headers.language(), Some(LanguageTag::EN_US));
    }

    #[test]
    fn facts_of_the_wrong_kind_are_the_servers_fault() {
        let rules = FileRules::new();
        let get = request("GET", "/a.txt", serde_json::json!({}));
        assert_eq!(code(rules.judge(&get, at(Place::Missing))), 500);
        let media = media_type_of("/a.txt");
        let put = request("PUT", "/a.txt", serde_json::json!({}));
        assert_eq!(code(rules.judge(&put, read(&media, text_file(None)))), 500);
    }

    #[test]
    fn d11_allowed_methods_by_place_and_existence() {
        use Method::*;
        let file = Place::File { modified: None };
        for (writable, place, exists, allowed) in [
            (true, Place::Folder, true, &[Get, Post, Options][..]),
            (false, Place::Folder, true, &[Get, Post, Options][..]),
            (true, file, false, &Method::ALL[..]),
            (false, file, false, &[Get, Post, Options][..]),
            (true, Place::Missing, false, &[Put, Options][..]),
            (false, Place::Missing, false, &[Options][..]),
            (true, Place::Nowhere, false, &[Options][..]),
            (false, Place::Nowhere, false, &[Options][..]),
            // Something a GET finds, where the place shows nothing (a
            // folder that may not be searched).
            (true, Place::Missing, true, &Method::ALL[..]),
            (false, Place::Nowhere, true, &[Get, Post, Options][..]),
        ] {
            assert_eq!(
                allowed_methods(writable, place, exists),
                allowed,
                "{writable} {place:?} {exists}"
            );
        }
        // OPTIONS answers the same table.
        let options = request("OPTIONS", "/a.txt", serde_json::json!({}));
        let verdict = FileRules::new().with_writable(false).judge(
            &options,
            Facts::Place {
                place: Place::Missing,
                exists: false,
            },
        );
        assert_eq!(verdict.expect("options").action, Action::Options(&[Options]));
    }

    #[test]
    fn unreadable_answers_say_which() {
        #[cfg(unix)]
        {
            let os = |errno: rustix::io::Errno| io::Error::from_raw_os_error(errno.raw_os_error());
            let busy = Unreadable::CannotOpen(os(rustix::io::Errno::MFILE)).response();
            assert_eq!(busy.status.code.as_u16(), 503);
            let written = write_failed(&os(rustix::io::Errno::NFILE), LanguageTag::EN_US);
            assert_eq!(written.status.code.as_u16(), 503);
            assert!(written.status.human_message.contains("nothing was written"));
            let full = write_failed(&os(rustix::io::Errno::NOSPC), LanguageTag::EN_US);
            assert_eq!(full.status.code.as_u16(), 500);
        }
        let denied = Unreadable::CannotOpen(io::ErrorKind::PermissionDenied.into()).response();
        assert_eq!(denied.status.code.as_u16(), 500);
        assert!(denied.status.human_message.contains("permission denied"));
        assert_eq!(Unreadable::NotAFile.response().status.code.as_u16(), 403);
        assert_eq!(Unreadable::Changed.response().status.code.as_u16(), 503);
    }

    #[test]
    fn a_listing_page_is_json_text_with_a_line_break() {
        let entries = [
            ListingEntry {
                name: "a b.txt".into(),
                size: 3,
                modified: Some(EARLIER),
                is_folder: false,
            },
            ListingEntry {
                name: "sub".into(),
                size: 0,
                modified: None,
                is_folder: true,
            },
        ];
        let text = String::from_utf8(listing_text(&entries)).expect("UTF-8");
        assert_eq!(
            text,
            format!(
                "[{{\"name\":\"a b.txt\",\"size\":3,\"modified\":\"{EARLIER}\",\"is-folder\":false}},\
                 {{\"name\":\"sub\",\"size\":0,\"modified\":null,\"is-folder\":true}}]\n"
            )
        );
        assert_eq!(listing_text(&[]), b"[]\n");
        assert_eq!(LISTING_PAGE, 2000);
    }

    #[test]
    fn the_next_page_is_named_after_the_last_name_percent_encoded() {
        assert_eq!(next_page("/docs", "a b&c=d"), "/docs/?after=a%20b%26c%3Dd");
        assert_eq!(next_page("/docs/", "x-y_z.~1"), "/docs/?after=x-y_z.~1");
        assert_eq!(next_page("/", "é"), "/?after=%C3%A9");
        // And what a request for it asks for.
        let next = request("GET", &next_page("/docs", "a b&c=d"), serde_json::json!({}));
        assert_eq!(listing_after(&next.resource).as_deref(), Some("a b&c=d"));
        let first = request("GET", "/docs/", serde_json::json!({}));
        assert_eq!(listing_after(&first.resource), None);
    }

    #[test]
    fn media_types_come_from_the_extension() {
        for (path, expected) in [
            ("/a.txt", "text/plain"),
            ("/A.HTML", "text/html"),
            ("/d/x.json", "application/json"),
            ("/folder/", "text/html"),
            ("/", "text/html"),
            ("/noextension", "application/octet-stream"),
            ("/a.unknownext", "application/octet-stream"),
            ("/dir.txt/file", "application/octet-stream"),
        ] {
            assert_eq!(media_type_of(path).essence(), expected, "{path}");
        }
        assert_eq!(listing_media_type().essence(), "application/json");
    }

    #[test]
    fn utf8_text_is_found_across_reads() {
        // A character cut by a read is carried over; a bad byte is not.
        struct Bytewise<'a>(&'a [u8]);
        impl io::Read for Bytewise<'_> {
            fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
                let Some((first, rest)) = self.0.split_first() else {
                    return Ok(0);
                };
                buffer[0] = *first;
                self.0 = rest;
                Ok(1)
            }
        }
        assert!(is_utf8_text(&mut Bytewise("héllo €".as_bytes())).unwrap());
        assert!(!is_utf8_text(&mut Bytewise(b"h\xffllo")).unwrap());
        assert!(!is_utf8_text(&mut Bytewise(b"cut \xe2\x82")).unwrap());
    }
}
