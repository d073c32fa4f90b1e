//! The file server behind `jsontp serve` (issue 4): a [`Handler`] that
//! serves one folder, exactly as `../shared/conformance/README.md` describes.
//!
//! Checks run in the order D5 gives. Level 5, what the server can offer:
//! the request's `content-type` (415), `accept` against the file's media
//! type (415, for `GET`/`POST`, the methods that return the file),
//! `accept-encoding` (412), `accept-language` (406). Level 6, the
//! application: the token (401), then the file itself: 404, or 412 when a
//! conditional header names a file that does not exist (D17), then 304/412
//! from the conditional headers, then the answer.
//!
//! Decisions of this server:
//! - No resource reaches outside the root (D7): the resource's path is
//!   already normalised (no `..` above the root: 400 at validation); any
//!   other component that is not a plain name, and any symlink whose target
//!   lies outside the root, is answered `404`, as if the file did not
//!   exist, so that nothing about the outside is revealed.
//! - `PUT` writes a temporary file in the target's folder, then renames it
//!   over the target: readers see the old file or the new one, never half
//!   of one. It does not create folders: `PUT` into a missing folder is
//!   `404`; onto a folder, `409`.
//! - `if-unmodified-since` also guards `PUT` and `DELETE` of an existing
//!   file (the lost-update check of HTTP); `if-modified-since` applies to
//!   `GET` and `POST` only.
//! - `POST` content is form data that this server ignores (D11).
//! - A file that is not UTF-8 goes out in the first compressed encoding the
//!   client accepts, and is `406` when it accepts only `identity`.
//! - Files larger than the D3 decoded-body limit (8 MiB by default) are not
//!   read into memory: `500`, saying so.

use std::fs;
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use crate::io_adapters::server::{Handler, RequestInfo};
use crate::message::negotiate;
use crate::message::{
    Body, Date, Encoding, Headers, LanguageTag, MediaType, MessageLimits, Method, Request, Response, Status,
    StatusCode,
};

/// The media types a request's `content-type` may name (conformance README).
const ACCEPTED_CONTENT_TYPES: [&str; 5] = [
    "text/plain",
    "text/html",
    "application/json",
    "application/octet-stream",
    "application/x-www-form-urlencoded",
];

/// The file a resource names when it is a folder (`/` → `index.html`).
const INDEX: &str = "index.html";

/// Serves the files of one folder over jsontp.
#[derive(Debug)]
pub struct FileServer {
    root: PathBuf,
    token: Option<String>,
    languages: Vec<LanguageTag>,
    max_file_bytes: u64,
    content_types: Vec<MediaType>,
}

/// Why a request cannot be answered with the file: the response to send.
type Refusal = Box<Response>;

impl FileServer {
    /// Serves `root`, which must be an existing folder. Languages default to
    /// `en-US` (D18); no token.
    pub fn new(root: impl AsRef<Path>) -> io::Result<FileServer> {
        let root = fs::canonicalize(root.as_ref())?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "the root is not a folder",
            ));
        }
        Ok(FileServer {
            root,
            token: None,
            languages: vec![LanguageTag::EN_US],
            max_file_bytes: MessageLimits::default().max_decoded_body as u64,
            content_types: ACCEPTED_CONTENT_TYPES.iter().map(|t| constant_media(t)).collect(),
        })
    }

    /// Requires `authorization` equal to `token` on `PUT` and `DELETE` (D14).
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

    /// The largest file served, in bytes (default: the D3 decoded-body
    /// limit).
    pub fn with_max_file_bytes(mut self, max: u64) -> Self {
        self.max_file_bytes = max;
        self
    }

    /// The served folder, canonical.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The languages offered.
    pub fn languages(&self) -> &[LanguageTag] {
        &self.languages
    }

    /// D5 level 5 and the token: everything that needs neither the body nor
    /// the file. Returns the negotiated encoding and language.
    fn negotiate(&self, request: &Request) -> Result<(Encoding, LanguageTag), Refusal> {
        let headers = &request.headers;
        let refused = |status: Status| Box::new(Response::new(status));
        negotiate::check_content_type(headers.content_type(), &self.content_types).map_err(refused)?;
        if matches!(request.method, Method::Get | Method::Post) {
            let media = media_type_of(request.resource.path());
            negotiate::check_accept(headers.accept(), &media).map_err(refused)?;
        }
        let encoding =
            negotiate::choose_encoding(headers.accept_encoding(), &Encoding::ALL).map_err(refused)?;
        let language =
            negotiate::choose_language(headers.accept_language(), &self.languages).map_err(refused)?;
        self.authorize(request)?;
        Ok((encoding, language))
    }

    /// D14: `PUT` and `DELETE` need the token when one is configured.
    fn authorize(&self, request: &Request) -> Result<(), Refusal> {
        let Some(token) = &self.token else { return Ok(()) };
        if !matches!(request.method, Method::Put | Method::Delete) {
            return Ok(());
        }
        match request.headers.authorization() {
            Some(given) if given == token => Ok(()),
            Some(_) => Err(refuse(
                StatusCode::UNAUTHORIZED,
                "authorization does not match the server's token",
            )),
            None => Err(refuse(
                StatusCode::UNAUTHORIZED,
                format!("authorization is required to {} on this server", request.method),
            )),
        }
    }

    /// The file a resource path names, inside the root; `None` when it
    /// names nothing we may serve (missing, or reaching outside the root).
    /// Folders resolve to their `index.html`.
    fn existing_file(&self, path: &str) -> Option<PathBuf> {
        let mut target = self.root.join(relative(path)?);
        if target.is_dir() {
            target.push(INDEX);
        }
        let real = fs::canonicalize(&target).ok()?;
        (real.starts_with(&self.root) && real.is_file()).then_some(real)
    }

    fn get(&self, request: &Request, encoding: Encoding, language: LanguageTag) -> Result<Response, Refusal> {
        let file = self.existing_file(request.resource.path());
        let last_modified = file
            .as_deref()
            .and_then(|f| fs::metadata(f).ok())
            .and_then(|m| modified(&m));
        let headers = &request.headers;
        // D5 level 6: a conditional header on a missing file is 412 (D17),
        // else 304/412 from the conditions; without one, a missing file is 404.
        if let Some(status) = negotiate::condition_status(
            headers.if_modified_since(),
            headers.if_unmodified_since(),
            last_modified,
        ) {
            let language_only = Headers::new().with_language(language);
            return Err(Box::new(Response::new(status).with_headers(language_only)));
        }
        let Some(file) = file else {
            return Err(not_found());
        };
        let metadata = fs::metadata(&file).map_err(|e| io_failure(&e))?;
        if metadata.len() > self.max_file_bytes {
            return Err(refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!(
                    "the file is larger than this server's limit of {} bytes",
                    self.max_file_bytes
                ),
            ));
        }
        let content = fs::read(&file).map_err(|e| io_failure(&e))?;
        let encoding = if encoding == Encoding::Identity && std::str::from_utf8(&content).is_err() {
            // Binary content travels only compressed (base64, D9).
            let compressed = request
                .headers
                .accept_encoding()
                .and_then(|list| list.iter().copied().find(|e| *e != Encoding::Identity));
            compressed.ok_or_else(|| {
                refuse(
                    StatusCode::NOT_ACCEPTABLE,
                    "the file is not UTF-8 text, so it can only be sent compressed: \
                     list gzip, deflate or br in accept-encoding",
                )
            })?
        } else {
            encoding
        };
        let body = Body::new(content, encoding)
            .map_err(|e| refuse(StatusCode::INTERNAL_SERVER_ERROR, format!("the file {e}")))?;
        let headers = Headers::new()
            .with_content_type(media_type_of(request.resource.path()))
            .with_language(language);
        Ok(Response::new(Status::new(StatusCode::OK, "here is the file"))
            .with_headers(headers)
            .with_body(body))
    }

    /// The if-unmodified-since guard of `PUT` and `DELETE` on an existing file.
    fn unmodified_since(&self, request: &Request, file: &Path) -> Result<(), Refusal> {
        let Some(since) = request.headers.if_unmodified_since() else {
            return Ok(());
        };
        let last_modified = fs::metadata(file).ok().and_then(|m| modified(&m));
        match negotiate::condition_status(None, Some(since), last_modified) {
            Some(status) => Err(Box::new(Response::new(status))),
            None => Ok(()),
        }
    }

    fn put(&self, request: &Request, language: LanguageTag) -> Result<Response, Refusal> {
        let path = request.resource.path();
        let Some(rel) = relative(path).filter(|r| r.file_name().is_some()) else {
            return Err(not_found());
        };
        let target = self.root.join(&rel);
        // The folder must exist and lie inside the root once symlinks are
        // resolved.
        let folder = target
            .parent()
            .and_then(|p| fs::canonicalize(p).ok())
            .filter(|p| p.starts_with(&self.root) && p.is_dir());
        let Some(folder) = folder else {
            return Err(refuse(
                StatusCode::NOT_FOUND,
                "the folder of this resource does not exist; PUT creates files, not folders",
            ));
        };
        let Some(name) = rel.file_name() else {
            return Err(not_found());
        };
        let target = folder.join(name);
        if let Ok(meta) = fs::symlink_metadata(&target) {
            // Replacing a symlink replaces the link itself (rename does not
            // follow it), so it cannot write outside the root.
            if meta.is_dir() {
                return Err(refuse(conflict(), "this resource is a folder; PUT writes files"));
            }
            self.unmodified_since(request, &target)?;
        }
        write_atomically(&folder, &target, request.body.content()).map_err(|e| io_failure(&e))?;
        let status = Status::new(StatusCode::CREATED, "the file was written");
        Ok(Response::new(status).with_headers(Headers::new().with_language(language)))
    }

    fn delete(&self, request: &Request, language: LanguageTag) -> Result<Response, Refusal> {
        let Some(rel) = relative(request.resource.path()) else {
            return Err(not_found());
        };
        let target = self.root.join(rel);
        let inside = target
            .parent()
            .and_then(|p| fs::canonicalize(p).ok())
            .is_some_and(|p| p.starts_with(&self.root));
        let meta = fs::symlink_metadata(&target).ok().filter(|_| inside);
        let Some(meta) = meta else {
            return Err(not_found());
        };
        if meta.is_dir() {
            return Err(refuse(
                conflict(),
                "this resource is a folder; DELETE removes files",
            ));
        }
        self.unmodified_since(request, &target)?;
        fs::remove_file(&target).map_err(|e| io_failure(&e))?;
        let status = Status::new(StatusCode::NO_CONTENT, "the file was deleted");
        Ok(Response::new(status).with_headers(Headers::new().with_language(language)))
    }

    fn options(&self, _request: &Request, language: LanguageTag) -> Response {
        let methods = Method::ALL.iter().map(|m| Value::from(m.as_str())).collect();
        let body = Body::empty().with_extra("allowed-methods", Value::Array(methods));
        let status = Status::new(StatusCode::OK, "these methods are allowed");
        let response = Response::new(status).with_headers(Headers::new().with_language(language));
        match body {
            Ok(body) => response.with_body(body),
            Err(_) => response,
        }
    }
}

impl Handler for FileServer {
    fn handle(&self, request: &Request, _info: &RequestInfo) -> Response {
        let answer = self
            .negotiate(request)
            .and_then(|(encoding, language)| match request.method {
                // POST content is form data this server ignores (D11).
                Method::Get | Method::Post => self.get(request, encoding, language),
                Method::Put => self.put(request, language),
                Method::Delete => self.delete(request, language),
                Method::Options => Ok(self.options(request, language)),
            });
        answer.unwrap_or_else(|refusal| *refusal)
    }

    /// Refuses a handshake that would be refused anyway (415, 412, 406,
    /// 401) before the client sends its body (D10).
    #[allow(clippy::result_large_err)] // the trait's signature
    fn check_continue(&self, request: &Request, _info: &RequestInfo) -> Result<(), Response> {
        self.negotiate(request).map(|_| ()).map_err(|refusal| *refusal)
    }
}

/// The media type sent for a file, from its extension.
pub fn media_type_of(path: &str) -> MediaType {
    let extension = path
        .rsplit('/')
        .next()
        .and_then(|name| name.rsplit_once('.'))
        .map(|(_, ext)| ext);
    let name = match extension.map(str::to_ascii_lowercase).as_deref() {
        Some("txt") => "text/plain",
        Some("html") => "text/html",
        Some("json") => "application/json",
        _ if path.ends_with('/') => "text/html", // a folder serves its index.html
        _ => "application/octet-stream",
    };
    let name = if path == "/" { "text/html" } else { name };
    constant_media(name)
}

/// Parses one of this file's constant media types.
fn constant_media(name: &str) -> MediaType {
    name.parse()
        .unwrap_or_else(|_| unreachable!("{name} is a valid media type"))
}

/// A resource path as a path relative to the root, made only of plain
/// names; `None` for anything else (D7).
fn relative(path: &str) -> Option<PathBuf> {
    let trimmed = path.trim_start_matches('/');
    let rel = Path::new(trimmed);
    if trimmed.contains('\\') || trimmed.contains('\0') {
        return None;
    }
    rel.components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then(|| rel.to_path_buf())
}

/// The file's modification time, in whole seconds (D16).
fn modified(metadata: &fs::Metadata) -> Option<Date> {
    metadata.modified().ok().map(Date::from_system_time)
}

/// Writes `content` to a temporary file in `folder`, then renames it over
/// `target`, so that a failure never leaves a half-written file.
fn write_atomically(folder: &Path, target: &Path, content: &[u8]) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let temp = folder.join(format!(".jsontp-put-{}-{n}.tmp", std::process::id()));
    let written = (|| {
        let mut file = fs::OpenOptions::new().write(true).create_new(true).open(&temp)?;
        file.write_all(content)?;
        file.sync_all()?;
        fs::rename(&temp, target)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

fn refuse(code: StatusCode, message: impl Into<String>) -> Refusal {
    Box::new(Response::new(Status::new(code, message)))
}

fn not_found() -> Refusal {
    refuse(StatusCode::NOT_FOUND, "no file by this name")
}

fn conflict() -> StatusCode {
    StatusCode::from_u16(409).unwrap_or(StatusCode::METHOD_NOT_ALLOWED)
}

fn io_failure(error: &io::Error) -> Refusal {
    refuse(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("the server could not access the file: {error}"),
    )
}
