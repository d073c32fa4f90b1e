//! The library's file-server rules (`app::files`) for a C file server: the
//! server gathers what the path holds (a `jsontp_found` or a
//! `jsontp_place`), `jsontp_file_rules_judge_read` or `_judge_place` gives
//! the verdict or the response to send, in D5's order, by the same code as
//! `jsontp serve`'s and the Python package's.

use std::ffi::{c_char, c_int};
use std::io;

use jsontp_protocol::app::files::{self, Action, Facts, Unreadable};
use jsontp_protocol::message::negotiate::ContentKind;
use jsontp_protocol::message::{Date, Headers, LanguageTag, MediaType, Response};

use crate::message::{encoding_name, jsontp_request, jsontp_response};
use crate::{Fail, borrow, free, guard, jsontp_result, optional_text_in, out, put, put_text, text_in};

/// `jsontp_found.kind`: what a `GET` or `POST` found at the path.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum jsontp_found_kind {
    /// A file (a folder's `index.html` included): `text` says whether it
    /// is UTF-8 text (D8, D9); `modified` its last modification.
    JSONTP_FOUND_FILE = 0,
    /// A folder's listing (JSON text): `modified` the latest modification.
    JSONTP_FOUND_LISTING = 1,
    /// A file larger than the server's `limit` bytes, not read.
    JSONTP_FOUND_TOO_LARGE = 2,
    /// Nothing the server may send; `folder` when the path is a folder
    /// without `index.html` (the message says so).
    JSONTP_FOUND_MISSING = 3,
    /// Something that is not a regular file or folder (`403`).
    JSONTP_FOUND_NOT_A_FILE = 4,
    /// There, but opening failed with `os_error` (an errno): `503` when out
    /// of descriptors, `500` otherwise.
    JSONTP_FOUND_CANNOT_OPEN = 5,
    /// Opened, but reading failed with `os_error`: `500`.
    JSONTP_FOUND_CANNOT_READ = 6,
    /// The file changed while it was read: `503`, to try again.
    JSONTP_FOUND_CHANGED = 7,
}

/// What a `GET` or `POST` found at a path, for
/// `jsontp_file_rules_judge_read`. Fill `kind` (a `jsontp_found_kind`) and
/// the fields it names; the others are ignored.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct jsontp_found {
    /// A `jsontp_found_kind`.
    pub kind: u32,
    /// `JSONTP_FOUND_FILE`: whether the content is UTF-8 text.
    pub text: bool,
    /// Whether `modified` is known.
    pub has_modified: bool,
    /// The last modification, in seconds since the epoch (whole seconds,
    /// D16), for the conditional headers (D17).
    pub modified: i64,
    /// `JSONTP_FOUND_TOO_LARGE`: the server's limit, in bytes.
    pub limit: u64,
    /// `JSONTP_FOUND_MISSING`: whether the path names a folder.
    pub folder: bool,
    /// `JSONTP_FOUND_CANNOT_OPEN`, `_CANNOT_READ`: the `errno`.
    pub os_error: c_int,
}

/// `jsontp_place.kind`: what a path names for `PUT`, `DELETE`, `OPTIONS`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum jsontp_place_kind {
    /// An existing file (or symlink), with its last modification.
    JSONTP_PLACE_FILE = 0,
    /// An existing folder.
    JSONTP_PLACE_FOLDER = 1,
    /// Nothing yet, in an existing folder inside the root.
    JSONTP_PLACE_MISSING = 2,
    /// Nothing that could be: the folder is missing or outside the root.
    JSONTP_PLACE_NOWHERE = 3,
}

/// What a path names for `PUT`, `DELETE` and `OPTIONS`, for
/// `jsontp_file_rules_judge_place`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct jsontp_place {
    /// A `jsontp_place_kind`.
    pub kind: u32,
    /// `JSONTP_PLACE_FILE`: whether `modified` is known.
    pub has_modified: bool,
    /// `JSONTP_PLACE_FILE`: the last modification, seconds since the epoch.
    pub modified: i64,
}

/// What a request that passed every rule does.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum jsontp_action {
    /// `GET`, `POST`: send the file or listing, with `jsontp_verdict_media`
    /// as its `content-type`, in `jsontp_verdict_encoding` (D8).
    JSONTP_ACTION_SERVE = 0,
    /// `PUT`: write the file, atomically.
    JSONTP_ACTION_WRITE = 1,
    /// `DELETE`: remove the file.
    JSONTP_ACTION_REMOVE = 2,
    /// `OPTIONS`: send `jsontp_verdict_response` (`allowed-methods`, D11).
    JSONTP_ACTION_OPTIONS = 3,
}

/// One file server's rules: writable or not, the token writes need (D14),
/// the languages offered (D18).
pub struct jsontp_file_rules {
    inner: files::FileRules,
}

/// A request that passed every rule: its language and what to do.
pub struct jsontp_verdict {
    action: jsontp_action,
    /// NUL-terminated; the length given leaves the NUL out.
    language: String,
    media: Option<String>,
    encoding: Option<&'static str>,
    methods: Option<String>,
    response: Option<jsontp_response>,
}

fn date_of(known: bool, seconds: i64) -> Option<Date> {
    known.then(|| Date::from_unix_seconds(seconds))
}

fn os_error(code: c_int) -> io::Error {
    io::Error::from_raw_os_error(code)
}

fn found_of(found: &jsontp_found) -> Result<files::Found, Fail> {
    let modified = date_of(found.has_modified, found.modified);
    Ok(match found.kind {
        0 => files::Found::File {
            kind: if found.text {
                ContentKind::Text
            } else {
                ContentKind::Binary
            },
            modified,
        },
        1 => files::Found::Listing { modified },
        2 => files::Found::TooLarge {
            modified,
            limit: found.limit,
        },
        3 => files::Found::Missing { folder: found.folder },
        4 => files::Found::Unreadable(Unreadable::NotAFile),
        5 => files::Found::Unreadable(Unreadable::CannotOpen(os_error(found.os_error))),
        6 => files::Found::Unreadable(Unreadable::CannotRead(os_error(found.os_error))),
        7 => files::Found::Unreadable(Unreadable::Changed),
        other => {
            return Err(Fail::invalid(format!(
                "found.kind {other} is not a jsontp_found_kind"
            )));
        }
    })
}

fn place_of(place: &jsontp_place) -> Result<files::Place, Fail> {
    Ok(match place.kind {
        0 => files::Place::File {
            modified: date_of(place.has_modified, place.modified),
        },
        1 => files::Place::Folder,
        2 => files::Place::Missing,
        3 => files::Place::Nowhere,
        other => {
            return Err(Fail::invalid(format!(
                "place.kind {other} is not a jsontp_place_kind"
            )));
        }
    })
}

fn language_of(language: &str) -> Result<LanguageTag, Fail> {
    language
        .parse()
        .map_err(|e| Fail::invalid(format!("language {language:?} {e}")))
}

fn with_nul(text: impl Into<String>) -> String {
    let mut text = text.into();
    text.push('\0');
    text
}

fn without_nul(text: &str) -> &str {
    text.strip_suffix('\0').unwrap_or(text)
}

/// Makes one file server's rules: `writable` serves `PUT` and `DELETE`;
/// `token` (NUL-terminated, or NULL for none) is what their
/// `authorization` header must hold (D14); `languages` the languages
/// offered, comma-separated, the default first (NULL: `"en-US"`, D18).
///
/// Ownership: the caller frees the rules with `jsontp_file_rules_free`.
/// Thread-safety: the rules are never changed after this call, so any
/// number of threads may judge with them at once.
///
/// # Safety
/// The strings are NULL or NUL-terminated; `out_rules` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_file_rules_new(
    writable: bool,
    token: *const c_char,
    languages: *const c_char,
    out_rules: *mut *mut jsontp_file_rules,
) -> jsontp_result {
    guard("jsontp_file_rules_new", || {
        // SAFETY: as the caller promises.
        let token = unsafe { optional_text_in(token, "token") }?;
        // SAFETY: as the caller promises.
        let languages = unsafe { optional_text_in(languages, "languages") }?;
        let out_rules = out(out_rules, "out_rules")?;
        let languages = languages
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|tag| !tag.is_empty())
            .map(language_of)
            .collect::<Result<Vec<_>, Fail>>()?;
        let mut inner = files::FileRules::new()
            .with_writable(writable)
            .with_token(token.map(str::to_owned));
        if !languages.is_empty() {
            inner = inner.with_languages(languages);
        }
        // SAFETY: checked non-NULL.
        unsafe { put(out_rules, Box::into_raw(Box::new(jsontp_file_rules { inner }))) };
        Ok(())
    })
}

/// Frees file rules. NULL is ignored. Thread-safety: no other thread may
/// use them.
///
/// # Safety
/// `rules` is NULL or from `jsontp_file_rules_new`, not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_file_rules_free(rules: *mut jsontp_file_rules) {
    // SAFETY: as the caller promises.
    unsafe { free(rules) }
}

/// Whether `PUT` and `DELETE` are served, in `*out_writable`.
/// Thread-safety: any number of threads at once.
///
/// # Safety
/// `rules` is NULL or live; `out_writable` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_file_rules_writable(
    rules: *const jsontp_file_rules,
    out_writable: *mut bool,
) -> jsontp_result {
    guard("jsontp_file_rules_writable", || {
        // SAFETY: as the caller promises.
        let rules = unsafe { borrow(rules, "rules") }?;
        let out_writable = out(out_writable, "out_writable")?;
        // SAFETY: checked non-NULL.
        unsafe { put(out_writable, rules.inner.writable()) };
        Ok(())
    })
}

/// Judges, and writes the outcome: exactly one of `*out_verdict` and
/// `*out_refusal` is non-NULL.
///
/// # Safety
/// Both outputs checked non-NULL by the caller.
unsafe fn judged(
    outcome: Result<files::Verdict<'_>, Box<Response>>,
    out_verdict: *mut *mut jsontp_verdict,
    out_refusal: *mut *mut jsontp_response,
) {
    let (verdict, refusal) = match outcome {
        Err(response) => (None, Some(jsontp_response::of(*response))),
        Ok(verdict) => {
            let language = with_nul(verdict.language.to_string());
            let made = match verdict.action {
                Action::Serve { media, encoding } => jsontp_verdict {
                    action: jsontp_action::JSONTP_ACTION_SERVE,
                    language,
                    media: Some(with_nul(media.to_string())),
                    encoding: Some(encoding_name(encoding)),
                    methods: None,
                    response: None,
                },
                Action::Write | Action::Remove => jsontp_verdict {
                    action: if matches!(verdict.action, Action::Write) {
                        jsontp_action::JSONTP_ACTION_WRITE
                    } else {
                        jsontp_action::JSONTP_ACTION_REMOVE
                    },
                    language,
                    media: None,
                    encoding: None,
                    methods: None,
                    response: None,
                },
                Action::Options(methods) => {
                    let names: Vec<&str> = methods.iter().map(|m| m.as_str()).collect();
                    jsontp_verdict {
                        action: jsontp_action::JSONTP_ACTION_OPTIONS,
                        language,
                        media: None,
                        encoding: None,
                        methods: Some(with_nul(serde_json::to_string(&names).unwrap_or_default())),
                        response: Some(jsontp_response::of(
                            Response::allowed_methods(methods)
                                .with_headers(Headers::new().with_language(verdict.language)),
                        )),
                    }
                }
            };
            (Some(made), None)
        }
    };
    let verdict = verdict.map_or(std::ptr::null_mut(), |v| Box::into_raw(Box::new(v)));
    let refusal = refusal.map_or(std::ptr::null_mut(), |r| Box::into_raw(Box::new(r)));
    // SAFETY: the caller checked both non-NULL.
    unsafe {
        put(out_verdict, verdict);
        put(out_refusal, refusal);
    }
}

/// Judges a `GET` or `POST` by every rule of D5 levels 3, 5 and 6, in
/// order: `media` (NUL-terminated) is the media type of what the path
/// sends (`jsontp_media_type_of`, known for a missing file too), `found`
/// what is there. On success exactly one output is non-NULL: a verdict
/// (`*out_verdict`: send the file) or the response to send
/// (`*out_refusal`).
///
/// Ownership: the caller frees the verdict with `jsontp_verdict_free` and
/// the refusal with `jsontp_response_free`. Thread-safety: any number of
/// threads may judge with the same rules at once.
///
/// # Safety
/// `rules`, `request` and `found` are NULL or live; `media` is NULL or
/// NUL-terminated; the outputs are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_file_rules_judge_read(
    rules: *const jsontp_file_rules,
    request: *const jsontp_request,
    media: *const c_char,
    found: *const jsontp_found,
    out_verdict: *mut *mut jsontp_verdict,
    out_refusal: *mut *mut jsontp_response,
) -> jsontp_result {
    guard("jsontp_file_rules_judge_read", || {
        // SAFETY: as the caller promises.
        let rules = unsafe { borrow(rules, "rules") }?;
        // SAFETY: as the caller promises.
        let request = unsafe { borrow(request, "request") }?;
        // SAFETY: as the caller promises.
        let media_text = unsafe { text_in(media, "media") }?;
        // SAFETY: as the caller promises.
        let found = found_of(unsafe { borrow(found, "found") }?)?;
        let out_verdict = out(out_verdict, "out_verdict")?;
        let out_refusal = out(out_refusal, "out_refusal")?;
        let media: MediaType = media_text
            .parse()
            .map_err(|e| Fail::invalid(format!("media {media_text:?} {e}")))?;
        let outcome = rules
            .inner
            .judge(&request.inner, Facts::Read { media: &media, found });
        // SAFETY: both checked non-NULL.
        unsafe { judged(outcome, out_verdict, out_refusal) };
        Ok(())
    })
}

/// Judges a `PUT`, `DELETE` or `OPTIONS` by every rule of D5 levels 3, 5
/// and 6, in order: `place` is what the path names, `exists` whether a
/// `GET` would find something there. Outputs, ownership and thread-safety
/// as `jsontp_file_rules_judge_read`.
///
/// # Safety
/// `rules`, `request` and `place` are NULL or live; the outputs are NULL
/// or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_file_rules_judge_place(
    rules: *const jsontp_file_rules,
    request: *const jsontp_request,
    place: *const jsontp_place,
    exists: bool,
    out_verdict: *mut *mut jsontp_verdict,
    out_refusal: *mut *mut jsontp_response,
) -> jsontp_result {
    guard("jsontp_file_rules_judge_place", || {
        // SAFETY: as the caller promises.
        let rules = unsafe { borrow(rules, "rules") }?;
        // SAFETY: as the caller promises.
        let request = unsafe { borrow(request, "request") }?;
        // SAFETY: as the caller promises.
        let place = place_of(unsafe { borrow(place, "place") }?)?;
        let out_verdict = out(out_verdict, "out_verdict")?;
        let out_refusal = out(out_refusal, "out_refusal")?;
        let outcome = rules.inner.judge(&request.inner, Facts::Place { place, exists });
        // SAFETY: both checked non-NULL.
        unsafe { judged(outcome, out_verdict, out_refusal) };
        Ok(())
    })
}

/// Frees a verdict. NULL is ignored. Thread-safety: no other thread may
/// use it.
///
/// # Safety
/// `verdict` is NULL or from a `jsontp_file_rules_judge_*` call, not used
/// again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_verdict_free(verdict: *mut jsontp_verdict) {
    // SAFETY: as the caller promises.
    unsafe { free(verdict) }
}

/// What to do, in `*out_action`. Thread-safety: reading a verdict from
/// several threads at once is safe.
///
/// # Safety
/// `verdict` is NULL or live; `out_action` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_verdict_action(
    verdict: *const jsontp_verdict,
    out_action: *mut jsontp_action,
) -> jsontp_result {
    guard("jsontp_verdict_action", || {
        // SAFETY: as the caller promises.
        let verdict = unsafe { borrow(verdict, "verdict") }?;
        let out_action = out(out_action, "out_action")?;
        // SAFETY: checked non-NULL.
        unsafe { put(out_action, verdict.action) };
        Ok(())
    })
}

/// The answer's language (D18), for its `language` header: borrowed from
/// the verdict, NUL-terminated too (`*out_len` leaves the NUL out).
/// Thread-safety as `jsontp_verdict_action`.
///
/// # Safety
/// `verdict` is NULL or live; the outputs are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_verdict_language(
    verdict: *const jsontp_verdict,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_verdict_language", || {
        // SAFETY: as the caller promises.
        let verdict = unsafe { borrow(verdict, "verdict") }?;
        // SAFETY: as the caller promises.
        unsafe { put_text(without_nul(&verdict.language), out_text, out_len) }
    })
}

/// `JSONTP_ACTION_SERVE`: the `content-type` to send, borrowed and
/// NUL-terminated too; `JSONTP_NOT_APPLICABLE` for other actions.
/// Thread-safety as `jsontp_verdict_action`.
///
/// # Safety
/// As `jsontp_verdict_language`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_verdict_media(
    verdict: *const jsontp_verdict,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_verdict_media", || {
        // SAFETY: as the caller promises.
        let verdict = unsafe { borrow(verdict, "verdict") }?;
        let media = verdict
            .media
            .as_deref()
            .ok_or_else(|| Fail::not_applicable("only a serve verdict has a media type"))?;
        // SAFETY: as the caller promises.
        unsafe { put_text(without_nul(media), out_text, out_len) }
    })
}

/// `JSONTP_ACTION_SERVE`: the encoding to send the content in (D8),
/// static and NUL-terminated too; `JSONTP_NOT_APPLICABLE` for other
/// actions. Thread-safety as `jsontp_verdict_action`.
///
/// # Safety
/// As `jsontp_verdict_language`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_verdict_encoding(
    verdict: *const jsontp_verdict,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_verdict_encoding", || {
        // SAFETY: as the caller promises.
        let verdict = unsafe { borrow(verdict, "verdict") }?;
        let encoding = verdict
            .encoding
            .ok_or_else(|| Fail::not_applicable("only a serve verdict has an encoding"))?;
        // SAFETY: as the caller promises.
        unsafe { put_text(encoding, out_text, out_len) }
    })
}

/// `JSONTP_ACTION_OPTIONS`: the allowed methods as the text of a JSON
/// array (D11), borrowed and NUL-terminated too; `JSONTP_NOT_APPLICABLE`
/// for other actions. Thread-safety as `jsontp_verdict_action`.
///
/// # Safety
/// As `jsontp_verdict_language`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_verdict_methods(
    verdict: *const jsontp_verdict,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_verdict_methods", || {
        // SAFETY: as the caller promises.
        let verdict = unsafe { borrow(verdict, "verdict") }?;
        let methods = verdict
            .methods
            .as_deref()
            .ok_or_else(|| Fail::not_applicable("only an options verdict lists methods"))?;
        // SAFETY: as the caller promises.
        unsafe { put_text(without_nul(methods), out_text, out_len) }
    })
}

/// `JSONTP_ACTION_OPTIONS`: the whole answer, `allowed-methods` in its
/// body (D11), in `*out_response`; `JSONTP_NOT_APPLICABLE` for other
/// actions. Ownership: borrowed from the verdict, valid until it is freed;
/// never free it. Thread-safety as `jsontp_verdict_action`.
///
/// # Safety
/// `verdict` is NULL or live; `out_response` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_verdict_response(
    verdict: *const jsontp_verdict,
    out_response: *mut *const jsontp_response,
) -> jsontp_result {
    guard("jsontp_verdict_response", || {
        // SAFETY: as the caller promises.
        let verdict = unsafe { borrow(verdict, "verdict") }?;
        let out_response = out(out_response, "out_response")?;
        let response = verdict
            .response
            .as_ref()
            .ok_or_else(|| Fail::not_applicable("only an options verdict carries its answer"))?;
        // SAFETY: checked non-NULL.
        unsafe { put(out_response, response as *const jsontp_response) };
        Ok(())
    })
}

/// The media type sent for a resource path (NUL-terminated), from its
/// extension: `.txt` is `text/plain`, an unknown one
/// `application/octet-stream`. Copied into `buf` (`len` bytes) with a
/// NUL; its length without the NUL in `*out_len`. `JSONTP_BUFFER_TOO_SMALL`
/// when it does not fit (64 bytes always do for the types a file server
/// sends). Thread-safe.
///
/// # Safety
/// `path` is NULL or NUL-terminated; `buf` points to `len` writable bytes;
/// `out_len` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_media_type_of(
    path: *const c_char,
    buf: *mut c_char,
    len: usize,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_media_type_of", || {
        // SAFETY: as the caller promises.
        let path = unsafe { text_in(path, "path") }?;
        let out_len = out(out_len, "out_len")?;
        let buf = out(buf, "buf")?;
        let media = files::media_type_of(path).to_string();
        if media.len() >= len {
            return Err(Fail::new(
                jsontp_result::JSONTP_BUFFER_TOO_SMALL,
                format!("the media type {media:?} needs {} bytes", media.len() + 1),
            ));
        }
        // SAFETY: `buf` has room for `len > media.len()` bytes, as promised.
        unsafe {
            std::ptr::copy_nonoverlapping(media.as_ptr(), buf.cast::<u8>(), media.len());
            put(buf.add(media.len()), 0);
            put(out_len, media.len());
        }
        Ok(())
    })
}

/// Makes an answer from an `errno` and a language (NUL-terminated).
///
/// # Safety
/// `language` is NULL or NUL-terminated; `out_response` is NULL or writable.
unsafe fn failure_answer(
    what: &str,
    os_error_code: c_int,
    language: *const c_char,
    out_response: *mut *mut jsontp_response,
    answer: fn(&io::Error, LanguageTag) -> Response,
) -> jsontp_result {
    guard(what, || {
        // SAFETY: as the caller promises.
        let language = language_of(unsafe { text_in(language, "language") }?)?;
        let out_response = out(out_response, "out_response")?;
        let response = jsontp_response::of(answer(&os_error(os_error_code), language));
        // SAFETY: checked non-NULL.
        unsafe { put(out_response, Box::into_raw(Box::new(response))) };
        Ok(())
    })
}

/// The answer when a `PUT` could not write its file (`errno`, such as
/// `ENOSPC`): `503` when out of descriptors, else `500`; in `language`
/// (the verdict's). Ownership: the caller frees the response with
/// `jsontp_response_free`. Thread-safe.
///
/// # Safety
/// `language` is NULL or NUL-terminated; `out_response` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_write_failed(
    os_error_code: c_int,
    language: *const c_char,
    out_response: *mut *mut jsontp_response,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        failure_answer(
            "jsontp_write_failed",
            os_error_code,
            language,
            out_response,
            files::write_failed,
        )
    }
}

/// The answer when the file system refused what a verdict said to do (a
/// `DELETE`'s removal): `500`, naming the error; in `language`. Ownership:
/// the caller frees the response with `jsontp_response_free`. Thread-safe.
///
/// # Safety
/// `language` is NULL or NUL-terminated; `out_response` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_access_failed(
    os_error_code: c_int,
    language: *const c_char,
    out_response: *mut *mut jsontp_response,
) -> jsontp_result {
    // SAFETY: as the caller promises.
    unsafe {
        failure_answer(
            "jsontp_access_failed",
            os_error_code,
            language,
            out_response,
            files::access_failed,
        )
    }
}
