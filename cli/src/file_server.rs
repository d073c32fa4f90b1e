//! The file server behind `jsontp serve`: an application on jsontp's
//! [`Router`] that serves one folder: GET/POST read files, PUT writes them
//! atomically, DELETE removes them, OPTIONS lists what can be done (D11).
//!
//! Every path is the router's fallback, served by method
//! ([`Router::fallback_methods`]): the router captures nothing, and this
//! server answers every method itself, `OPTIONS` and `405` included, so
//! that D5's order holds (a `406` of level 5 before a read-only server's
//! `405` of level 6).
//!
//! Checks run in the order D5 gives, in one function, `plan`, which every
//! handler draws as an extractor of the request's head: it gathers what
//! the path holds and asks the rules of [`app::files`], which every file
//! server on the library shares, for the verdict. The router runs it when
//! a head arrives before its content ([`Router::check_head_of`]) and again
//! when it calls the handler, so that a 100-continue handshake, or a
//! request whose content streams in, is refused for exactly what the whole
//! request would be refused for, before the client sends its body (D10)
//! or any of it is stored (D19). Only `PUT`'s handler takes content
//! ([`app::Content`], in memory or spooled): on every other method it is
//! checked as the protocol requires and dropped, never stored.
//!
//! Level 5, what the server can offer: the request's `content-type`
//! (`415`); `accept` against the file's media type (`415`, for `GET` and
//! `POST`, the methods that return the file); `accept-encoding` (`412`),
//! also when only `identity` is acceptable and the file is not UTF-8 text
//! (D8), which needs the file, so `GET` and `POST` read it (or open it, to
//! stream) before the rules judge; `accept-language` (`406`).
//!
//! Level 6, the application: the token (`401`); `405` for writes on a
//! read-only server; `409` for `PUT`/`DELETE` of a folder (D11); `412` when
//! a conditional header names a resource that cannot be provided, before
//! `404` (D17); then `304`/`412` from the conditional headers, as D17
//! applies them to the method; then the answer.
//!
//! Decisions of this server:
//! - No resource reaches outside the root (D7): the resource's path is
//!   already normalised (no `..` above the root: 400 at validation); any
//!   other component that is not a plain name, and any symlink whose target
//!   lies outside the root, is answered `404`, as if the file did not
//!   exist, so that nothing about the outside is revealed.
//! - `PUT` writes a temporary file with an unpredictable name in the
//!   target's folder, created exclusively, then renames it over the target:
//!   readers see the old file or the new one, never half of one, and no
//!   client can prepare a file or a link under the name a write will use.
//!   It does not create folders: `PUT` into a missing folder is `404`.
//! - `POST` content is form data that this server ignores (D11).
//! - A file that is not UTF-8 goes out compressed: in the client's
//!   preferred compressed encoding, or `gzip` when it sent no
//!   `accept-encoding` (D8).
//! - Files of any size are served: those over 64 KiB stream from the open
//!   file as the peer takes them (D19), in constant memory; their UTF-8
//!   check (for `identity`, D8) reads the file once before. A text file of
//!   up to 64 MiB sent as `identity` goes out instead from its escaped
//!   form when the cache has room for it (Linux; read and escaped piece
//!   by piece into sealed in-memory files once per version of the file,
//!   on a thread of its own, one build per path at a time; the request
//!   that starts it and those that come meanwhile stream the file). A
//!   file whose
//!   size or times change after it was opened, or that ends early, is cut
//!   off rather than sent wrong (the peer sees the message end early, D1);
//!   one changed while read whole is `503`. A limit can be set
//!   ([`FileServer::with_max_file_bytes`], `jsontp serve --max-file`):
//!   larger files are `500`, saying so.
//! - `PUT` content over the server's memory threshold arrives spooled to a
//!   temporary file (D19) and is linked into place ([`Upload::persist`](jsontp_protocol::io_adapters::server::Upload::persist)),
//!   so an upload of any size is written atomically too, with the same
//!   permissions as a small one. While it arrives the file has no name
//!   (Linux), so no resource reaches it, whatever symlinks the root holds,
//!   and a crash leaves nothing. The name [`SPOOL_FOLDER`], where earlier
//!   versions spooled, is still refused at the root.
//! - Only regular files and folders are served, opened without blocking:
//!   a pipe, socket or device is `403`. A file that is there but cannot be
//!   opened is never `404`: `503` when the server is out of descriptors,
//!   `500` otherwise, each saying which. A `PUT` that cannot write for
//!   want of descriptors is `503` too: nothing was stored, so a retry is
//!   safe.
//! - Media types come from the file's extension (the `mime_guess` table);
//!   a folder sends its `index.html`, so `text/html`; an unknown extension
//!   is `application/octet-stream`. No `charset` parameter: a `.txt` file
//!   need not be UTF-8, and the server does not read it to find out.
//! - A folder without `index.html` is `404` (D11), unless listings are on
//!   ([`FileServer::with_listing`]): then `GET` answers a JSON array of its
//!   entries, `{"name", "size", "modified", "is-folder"}`, sorted by name,
//!   at most 2,000 at a time: a longer listing's answer names its next
//!   page in body key `next-page` (`?after=NAME`), so that one answer
//!   never holds more than D3's 1 MiB whatever the folder's size. A page
//!   costs about a page: a longer folder's sorted names are kept, in
//!   bounded memory, while it is unchanged.
//!   The listing shows what a `GET` could reach and nothing else: a symlink
//!   whose target lies outside the root, or that leads nowhere, is left
//!   out, as are names that are not UTF-8 (no resource can name them) and
//!   entries that are neither files nor folders.

use std::collections::hash_map::RandomState;
use std::ffi::OsString;
use std::fs;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

mod builders;
mod listings;
#[cfg(target_os = "linux")]
mod small_files;
mod steady;
use builders::Builders;
use listings::Listings;
#[cfg(target_os = "linux")]
use small_files::{Cached, Slot, SmallFiles, Stamp};
use steady::{Measure, Steady};

/// Where the small-file cache keeps a file: there is no cache off Linux.
#[cfg(not(target_os = "linux"))]
#[derive(Debug, Clone)]
enum Slot {}

use jsontp_protocol::app::files::{self, Facts, FileRules, Found, INDEX, Unreadable};
use jsontp_protocol::app::{self, FromRequestParts, IntoReply, Parts, Router, State};
use jsontp_protocol::io_adapters::server::Reply;
use jsontp_protocol::message::negotiate::ContentKind;
use jsontp_protocol::message::{
    Body, Date, Encoding, Headers, LanguageTag, MediaType, Method, Request, Response, StatusCode, ValueError,
};

/// The media type and UTF-8 rules of every file server, here since the
/// command's client and this server's tests name them from here.
pub use jsontp_protocol::app::files::{is_utf8_text, media_type_of};

/// A hidden folder at the root that no resource reaches and no listing
/// shows (as a first component only: a symlink to the root leads past
/// it). `jsontp serve` spooled uploads there under names before they were
/// anonymous (D19), and a crash left them for good; it removes those
/// leftovers at start, but a folder it could not empty may still hold
/// other clients' data. An application may also spool there: the files
/// have no name on Linux, and elsewhere an empty one for an instant.
pub const SPOOL_FOLDER: &str = ".jsontp-spool";

/// Files up to this size are read whole and sent in one message; larger
/// ones stream from the open file (D19).
const STREAM_ABOVE: u64 = 64 * 1024;

/// The most content whose written form is made in the answer, on the
/// worker: gzip, the slowest encoding, makes it in well under a
/// millisecond, where a whole cached file (1 MiB) takes tens of them.
#[cfg(target_os = "linux")]
const PREPARE_HERE: usize = 16 * 1024;

/// How many `PUT`s write at once (each on a thread of its own, started at
/// the first): more wait for one of them, their connections' workers free
/// meanwhile.
const MAX_WRITES: usize = 2;

/// How much file content the cache keeps by default. A large text
/// file's escaped form costs about twice the file while it is kept (its
/// content and its escaped text, each in a sealed in-memory file: shared
/// memory, not the heap), so the default leaves large files to stream in
/// constant memory and keeps their escaped forms only up to about 7 MiB;
/// a server with memory to spare raises it
/// ([`FileServer::with_cache_bytes`]) to keep text files of up to
/// [`SmallFiles::MAX_ESCAPED`].
#[cfg(target_os = "linux")]
const DEFAULT_CACHE_BYTES: usize = 16 << 20;

/// Serves the files of one folder over jsontp: built with
/// [`new`](Self::new) and the `with_` methods, then served as a
/// [`Router`] ([`into_router`](Self::into_router)), which is the state
/// its handlers share.
#[derive(Debug)]
pub struct FileServer {
    root: PathBuf,
    /// The root, open, for opening resources beneath it (Linux).
    #[cfg(target_os = "linux")]
    root_fd: Option<std::os::fd::OwnedFd>,
    /// Small files kept in memory, checked on every use (Linux).
    #[cfg(target_os = "linux")]
    small_files: Option<Arc<SmallFiles>>,
    /// The rules a request is judged by: writes, token, languages.
    rules: FileRules,
    max_file_bytes: u64,
    listing: bool,
    /// The sorted names of folders longer than a page, between pages.
    listings: Listings,
    /// The threads that write `PUT`'s content.
    writes: Builders,
}

/// Reads what a [`FileServer`]'s cache of small files holds
/// ([`FileServer::cache_gauge`]).
#[derive(Debug, Clone, Default)]
pub struct CacheGauge {
    #[cfg(target_os = "linux")]
    cache: Option<Arc<SmallFiles>>,
}

/// What the cache of small files holds at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheUse {
    /// Bytes of content and of its prepared forms kept.
    pub bytes: u64,
    /// Files kept.
    pub files: u64,
    /// The most bytes it keeps.
    pub limit: u64,
    /// Bytes of the shared huge pages its forms' sendfile copies lie in
    /// (counted in `bytes` by the copies' own size): at most a quarter of
    /// `limit` more.
    pub shared_page_bytes: u64,
}

impl CacheGauge {
    /// What the cache holds now; `None` without a cache (off, or not
    /// Linux).
    pub fn read(&self) -> Option<CacheUse> {
        #[cfg(target_os = "linux")]
        if let Some(cache) = &self.cache {
            return Some(cache.usage());
        }
        None
    }
}

/// Why a request cannot be answered as asked: the response to send.
type Refusal = Box<Response>;

/// What a resource path names inside the root, for `PUT`, `DELETE` and
/// `OPTIONS` (which do not follow a folder to its `index.html`).
enum Place {
    /// An existing file, or a symlink, in a folder inside the root.
    File(PathBuf),
    /// An existing folder.
    Folder,
    /// Nothing yet, in an existing folder inside the root: `PUT` could
    /// create it.
    Missing { folder: PathBuf, name: OsString },
    /// Nothing that could be: the folder is missing, or lies outside the
    /// root.
    Nowhere,
}

/// What a `GET`/`POST` of a resource sends, found before the checks.
enum Source {
    /// A file inside the root (a folder's `index.html` included), open,
    /// with its metadata, and the path it may be cached under.
    File(fs::File, fs::Metadata, Option<PathBuf>),
    /// A small file as the cache kept it, still the file the path names:
    /// its content, whether it is UTF-8 text, its last modification.
    #[cfg(target_os = "linux")]
    Cached(Arc<[u8]>, ContentKind, Option<Date>, Slot),
    /// A folder inside the root without `index.html`, listed.
    Listing(PathBuf),
    /// Something there that is not a file or a folder (a pipe, a socket,
    /// a device): never served.
    NotAFile,
    /// Something there that could not be opened for another reason than
    /// its absence (no descriptor left, no permission, an I/O error).
    Failed(io::Error),
}

/// What opening a path beneath the root found.
enum Opened {
    /// Open, with the open handle's metadata.
    Found(fs::File, fs::Metadata),
    /// Nothing, or nothing inside the root.
    Missing,
    /// Something that cannot be opened as a file (a socket).
    NotAFile,
    /// Something that could not be opened or measured.
    Failed(io::Error),
}

/// A file's bytes read whole: its own, or shared with the cache of small
/// files and every answer that sends them.
enum Content {
    Owned(Vec<u8>),
    Shared(Arc<[u8]>),
}

impl Content {
    fn into_shared(self) -> Arc<[u8]> {
        match self {
            Content::Owned(bytes) => Arc::from(bytes),
            Content::Shared(bytes) => bytes,
        }
    }
}

/// How a file's content goes out: whole in one message, or streamed
/// from `R` (D19) ([`FileServer::form_of`], [`FileServer::escaped`]).
enum Form<R> {
    /// Its written form, in one message.
    Whole(Body),
    /// The content as `R` reads it, encoded as the transfer goes.
    Stream(R),
}

impl<R: io::Read + Send + 'static> Form<R> {
    /// The answer that sends it in `encoding`, with `headers`.
    fn into_reply(self, headers: Headers, encoding: Encoding) -> Reply {
        let head = Response::ok("here is the file").with_headers(headers);
        match self {
            Form::Whole(body) => Reply::from(head.with_body(body)),
            Form::Stream(reader) => {
                let body = Body::empty().with_encoding(encoding).unwrap_or_default();
                Reply::streamed(head.with_body(body), reader)
            }
        }
    }
}

/// A file that `GET`/`POST` return, as read in the checks.
enum Loaded {
    /// The file's content, read or from the cache.
    Content {
        /// Shared with the cache when it keeps it.
        content: Content,
        /// Whether it is UTF-8 text.
        kind: ContentKind,
        modified: Option<Date>,
        /// Where the cache keeps it.
        slot: Option<Slot>,
    },
    /// A file to stream (D19), open, with whether it is UTF-8 text.
    Large {
        file: Steady,
        text: bool,
        modified: Option<Date>,
        /// Where the cache keeps its escaped form.
        slot: Option<Slot>,
    },
    /// One page of a folder's listing, its last modification, and the
    /// resource of the next page when more entries follow.
    Listing(Vec<u8>, Option<Date>, Option<String>),
    /// Larger than the server's limit: not read.
    TooLarge(Option<Date>),
}

impl Loaded {
    /// What the rules are told of it; `limit` is the server's largest
    /// file.
    fn found(&self, limit: u64) -> Found {
        match self {
            Loaded::Content { kind, modified, .. } => Found::File {
                kind: *kind,
                modified: *modified,
            },
            Loaded::Large { text, modified, .. } => Found::File {
                kind: if *text {
                    ContentKind::Text
                } else {
                    ContentKind::Binary
                },
                modified: *modified,
            },
            Loaded::Listing(_, modified, _) => Found::Listing { modified: *modified },
            Loaded::TooLarge(modified) => Found::TooLarge {
                modified: *modified,
                limit,
            },
        }
    }
}

/// What a request will do once every check has passed.
enum Action {
    /// Send the file (`GET`, `POST`).
    Serve {
        content: Content,
        encoding: Encoding,
        media: MediaType,
        slot: Option<Slot>,
        /// A listing's next page (body key `next-page`).
        next: Option<String>,
    },
    /// Stream the open file (`GET`, `POST` of a large file, D19), or
    /// send its escaped form, kept by the cache, when it is text sent as
    /// `identity`.
    Stream {
        file: Steady,
        encoding: Encoding,
        media: MediaType,
        text: bool,
        slot: Option<Slot>,
    },
    /// Write `folder/name` (`PUT`).
    Write { folder: PathBuf, name: OsString },
    /// Remove the file (`DELETE`).
    Remove(PathBuf),
    /// List the methods (`OPTIONS`).
    Options(&'static [Method]),
}

/// A request that passed every check, with its negotiated language.
struct Plan {
    language: LanguageTag,
    action: Action,
}

impl FileServer {
    /// Serves `root`, which must be an existing folder. Languages default to
    /// `en-US` (D18); no token; writes allowed; no folder listings.
    pub fn new(root: impl AsRef<Path>) -> io::Result<FileServer> {
        let root = fs::canonicalize(root.as_ref())?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "the root is not a folder",
            ));
        }
        #[cfg(target_os = "linux")]
        let root_fd = rustix::fs::open(
            &root,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .ok();
        Ok(FileServer {
            root,
            #[cfg(target_os = "linux")]
            root_fd,
            #[cfg(target_os = "linux")]
            small_files: Some(Arc::new(SmallFiles::new(DEFAULT_CACHE_BYTES))),
            rules: FileRules::new(),
            max_file_bytes: u64::MAX,
            listing: false,
            listings: Listings::new(LISTING_CACHE_BYTES),
            writes: Builders::new(MAX_WRITES, "jsontp-write"),
        })
    }

    /// Requires `authorization` equal to `token` on `PUT` and `DELETE` (D14).
    pub fn with_token(mut self, token: Option<String>) -> Self {
        self.rules = self.rules.with_token(token);
        self
    }

    /// The languages offered, the first being the default (D18). An empty
    /// list keeps the current one.
    pub fn with_languages(mut self, languages: Vec<LanguageTag>) -> Self {
        self.rules = self.rules.with_languages(languages);
        self
    }

    /// The largest file served, in bytes (default: no limit; larger files
    /// stream, D19).
    pub fn with_max_file_bytes(mut self, max: u64) -> Self {
        self.max_file_bytes = max;
        self
    }

    /// Keeps files of up to 1 MiB in memory, each with every written form
    /// sent of it (escaped text or compressed, so that a file is prepared
    /// once per version, not once per request, and sent without a copy;
    /// a form of 16 KiB or more also in a sealed file for `sendfile`,
    /// counted twice), and text files of up to 64 MiB with their escaped
    /// form alone, the form `identity` sends (their compressed forms
    /// stream), `max_bytes` in all. Such an escaped form costs its content
    /// and its escaped text once each, about twice the file, in sealed
    /// in-memory files that plain TCP sends with `sendfile`, never in the
    /// heap: it is made piece by piece. A form that takes long to make (an
    /// escaped form, or another of content over 16 KiB) is made on a
    /// thread of its own, one build per path at a time and two in all,
    /// while requests for the file stream it. So a
    /// 64 MiB text file is kept with `max_bytes` of 136 MiB or more (its
    /// content, and room for its text an eighth longer). Default 16 MiB (large files stream, see
    /// `DEFAULT_CACHE_BYTES`); `0` keeps none; a file that would not fit
    /// streams. Also kept, of larger files, whether they are UTF-8 text
    /// (else each request reads the file through before sending it).
    /// Each use checks, with one `stat`, that the path still names the very
    /// same file (device, inode, size, modification and change times); any
    /// change is read afresh. Linux only; elsewhere every request reads the
    /// file.
    pub fn with_cache_bytes(mut self, max_bytes: usize) -> Self {
        #[cfg(target_os = "linux")]
        {
            self.small_files = (max_bytes > 0).then(|| Arc::new(SmallFiles::new(max_bytes)));
        }
        #[cfg(not(target_os = "linux"))]
        let _ = max_bytes;
        self
    }

    /// Whether `PUT` and `DELETE` are served (default: yes). A read-only
    /// server answers them `405` and lists `GET`, `POST`, `OPTIONS` for an
    /// existing resource, `OPTIONS` alone for a missing one (D11).
    pub fn with_writes(mut self, writable: bool) -> Self {
        self.rules = self.rules.with_writable(writable);
        self
    }

    /// Whether `GET` of a folder without `index.html` answers a listing of
    /// it (default: no, `404` as D11 says). The listing is a JSON array,
    /// `content-type: application/json`, of `{"name", "size", "modified",
    /// "is-folder"}` sorted by name, at most 2,000 entries an answer (body
    /// key `next-page` names the next page, `?after=NAME`); it never shows
    /// what lies outside the root, nor a name this server refuses.
    pub fn with_listing(mut self, listing: bool) -> Self {
        self.listing = listing;
        self
    }

    /// How many times a listing has read a folder through. A folder longer
    /// than one page is read once and its sorted names kept (32 MiB of
    /// names in all, the least recently used folder dropped first) while
    /// the folder is unchanged, so that its other pages read only their
    /// own entries; this counts the reads that could not be spared.
    pub fn folder_reads(&self) -> u64 {
        self.listings.reads()
    }

    /// The served folder, canonical.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The languages offered.
    pub fn languages(&self) -> &[LanguageTag] {
        self.rules.languages()
    }

    /// Every check of D5 levels 3, 5 and 6, in order ([`FileRules::judge`],
    /// on what the path holds); what the request will do when they all
    /// pass. Nothing is written or removed here.
    fn plan(&self, request: &Request) -> Result<Plan, Refusal> {
        match request.method {
            Method::Get | Method::Post => self.plan_read(request),
            Method::Put | Method::Delete | Method::Options => self.plan_place(request),
        }
    }

    /// [`plan`](Self::plan) for `GET` and `POST`: the file (or listing)
    /// found, read or opened, and judged.
    fn plan_read(&self, request: &Request) -> Result<Plan, Refusal> {
        let path = request.resource.path();
        let (media, source) = self.resolve(path);
        let (found, loaded) = match source.map(|source| self.load(source, &media, request)) {
            None => {
                let folder = matches!(self.place(path), Place::Folder);
                (Found::Missing { folder }, None)
            }
            Some(Err(why)) => (Found::Unreadable(why), None),
            Some(Ok(loaded)) => (loaded.found(self.max_file_bytes), Some(loaded)),
        };
        let verdict = self.rules.judge(request, Facts::Read { media: &media, found })?;
        let language = verdict.language;
        let (files::Action::Serve { encoding, .. }, Some(loaded)) = (verdict.action, loaded) else {
            unreachable!("the rules serve what was found, and only that");
        };
        let action = match loaded {
            Loaded::Content { content, slot, .. } => Action::Serve {
                content,
                encoding,
                media,
                slot,
                next: None,
            },
            Loaded::Listing(content, _, next) => Action::Serve {
                content: Content::Owned(content),
                encoding,
                media,
                slot: None,
                next,
            },
            Loaded::Large { file, text, slot, .. } => Action::Stream {
                file,
                encoding,
                media,
                text,
                slot,
            },
            Loaded::TooLarge(_) => unreachable!("the rules refuse a file over the limit"),
        };
        Ok(Plan { language, action })
    }

    /// [`plan`](Self::plan) for `PUT`, `DELETE` and `OPTIONS`: the place
    /// the path names, judged.
    fn plan_place(&self, request: &Request) -> Result<Plan, Refusal> {
        let path = request.resource.path();
        let place = self.place(path);
        // Whether a GET finds something weighs only where nothing is at
        // the place itself (files::allowed_methods).
        let (judged, exists) = match &place {
            Place::File(file) => (
                files::Place::File {
                    modified: last_modified(file),
                },
                true,
            ),
            Place::Folder => (files::Place::Folder, true),
            Place::Missing { .. } => (files::Place::Missing, self.resolve(path).1.is_some()),
            Place::Nowhere => (files::Place::Nowhere, self.resolve(path).1.is_some()),
        };
        let verdict = self.rules.judge(
            request,
            Facts::Place {
                place: judged,
                exists,
            },
        )?;
        let language = verdict.language;
        let action = match (verdict.action, place) {
            (files::Action::Options(allowed), _) => Action::Options(allowed),
            (files::Action::Write, Place::Missing { folder, name }) => Action::Write { folder, name },
            (files::Action::Write, Place::File(file)) => {
                let (Some(folder), Some(name)) = (file.parent(), file.file_name()) else {
                    return Err(refuse(StatusCode::NOT_FOUND, "no file by this name", language));
                };
                Action::Write {
                    folder: folder.to_path_buf(),
                    name: name.to_os_string(),
                }
            }
            (files::Action::Remove, Place::File(file)) => Action::Remove(file),
            _ => unreachable!("the rules write and remove only files, and serve no place"),
        };
        Ok(Plan { language, action })
    }

    /// Carries out a plan: the answer to the request. `content` is a
    /// `PUT`'s, in memory or spooled (D19); no other method takes any.
    fn act(&self, plan: Plan, content: Option<app::Content>) -> Result<Reply, Refusal> {
        let language = plan.language;
        let headers = language_header(language);
        if let Action::Stream {
            file,
            encoding,
            media,
            text,
            slot,
        } = plan.action
        {
            let headers = headers.with_content_type(media);
            return Ok(self
                .escaped(file, encoding, text, slot)
                .into_reply(headers, encoding));
        }
        let response = match plan.action {
            Action::Serve {
                content,
                encoding,
                media,
                slot,
                next,
            } => {
                let headers = headers.with_content_type(media);
                let failed = |e: ValueError| {
                    refuse(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("the file {e}"),
                        language,
                    )
                };
                let form = match (self.form_of(content, encoding, slot).map_err(failed)?, next) {
                    (Form::Whole(body), Some(next)) => Form::Whole(
                        body.with_extra("next-page", serde_json::Value::String(next))
                            .map_err(failed)?,
                    ),
                    (form, _) => form,
                };
                return Ok(form.into_reply(headers, encoding));
            }
            Action::Write { folder, name } => {
                // Only PUT plans a write, and PUT's handler takes the
                // content: none here would be a route given wrong.
                let Some(content) = content else {
                    return Err(refuse(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "the server did not receive the content to write",
                        language,
                    ));
                };
                store(content, &folder, &folder.join(&name))
                    .map_err(|e| Box::new(files::write_failed(&e, language)))?;
                Ok(Response::created("the file was written").with_headers(headers))
            }
            Action::Remove(file) => {
                fs::remove_file(&file).map_err(|e| Box::new(files::access_failed(&e, language)))?;
                Ok(Response::no_content("the file was deleted").with_headers(headers))
            }
            Action::Options(allowed) => Ok(Response::allowed_methods(allowed).with_headers(headers)),
            Action::Stream { .. } => unreachable!("streamed above"),
        };
        response.map(Reply::from)
    }

    /// A resource path as `GET` and `POST` read it: the media type of what
    /// it sends, and what that is; `None` when it names nothing we may serve
    /// (missing, or reaching outside the root). A folder resolves to its
    /// `index.html`, or to its listing when there is none and listings are
    /// on. The media type is known for a missing file too (from its name),
    /// since `accept` is checked before existence (D5).
    fn resolve(&self, path: &str) -> (MediaType, Option<Source>) {
        let by_name = || media_type_of(path);
        let Some(rel) = relative(path) else {
            return (by_name(), None);
        };
        #[cfg(target_os = "linux")]
        if let (Some(cache), Some(root)) = (&self.small_files, &self.root_fd) {
            let stamp = Stamp::of_path(root, &rel);
            if let Some((stamp, (kept, forms))) =
                stamp.and_then(|stamp| Some((stamp, cache.get(&rel, stamp)?)))
            {
                let slot = Slot { rel, stamp, forms };
                let Cached {
                    content,
                    modified,
                    media,
                    kind,
                } = kept;
                return (media, Some(Source::Cached(content, kind, modified, slot)));
            }
        }
        let (file, metadata) = match self.open_beneath(&rel) {
            Opened::Found(file, metadata) => (file, metadata),
            Opened::Missing => return (by_name(), None),
            Opened::NotAFile => return (by_name(), Some(Source::NotAFile)),
            Opened::Failed(e) => return (by_name(), Some(Source::Failed(e))),
        };
        if metadata.is_file() {
            return (by_name(), Some(Source::File(file, metadata, Some(rel))));
        }
        if !metadata.is_dir() {
            return (by_name(), Some(Source::NotAFile));
        }
        match self.open_beneath(&rel.join(INDEX)) {
            Opened::Found(index, metadata) if metadata.is_file() => {
                (index_media(), Some(Source::File(index, metadata, None)))
            }
            Opened::Failed(e) => (index_media(), Some(Source::Failed(e))),
            _ if self.listing => (
                files::listing_media_type(),
                Some(Source::Listing(self.root.join(rel))),
            ),
            _ => (index_media(), None),
        }
    }

    /// Opens `rel` (plain names only, [`relative`]) beneath the root,
    /// following symlinks only while they stay inside it (D7);
    /// [`Opened::Missing`] for what does not exist or lies outside. On
    /// Linux one `openat2` with `RESOLVE_BENEATH` asks the kernel to refuse
    /// any way out; what it refuses as a way out (an absolute symlink,
    /// which may still lead to a file under the root), and every path
    /// elsewhere or before Linux 5.6, is canonicalised and checked.
    /// Opened without blocking: a pipe with no writer would otherwise hold
    /// the worker in `open` for good.
    fn open_beneath(&self, rel: &Path) -> Opened {
        let measured = |file: fs::File| match file.metadata() {
            Ok(metadata) => Opened::Found(file, metadata),
            Err(e) => Opened::Failed(e),
        };
        #[cfg(target_os = "linux")]
        if let Some(root) = &self.root_fd {
            use rustix::fs::{Mode, OFlags, ResolveFlags};
            let opened = rustix::fs::openat2(
                root,
                if rel.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    rel
                },
                OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
                Mode::empty(),
                ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
            );
            match opened {
                Ok(fd) => return measured(fs::File::from(fd)),
                // No openat2 in this kernel, or a way out that may yet
                // land inside (an absolute symlink to a file under the
                // root): the portable way below decides.
                Err(rustix::io::Errno::NOSYS | rustix::io::Errno::XDEV) => {}
                Err(e) => return open_failure(e.into()),
            }
        }
        let Some(real) = self.inside(&self.root.join(rel)) else {
            return Opened::Missing;
        };
        let mut options = fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(
            &mut options,
            rustix::fs::OFlags::NONBLOCK.bits() as i32,
        );
        match options.open(real) {
            Ok(file) => measured(file),
            Err(e) => open_failure(e),
        }
    }

    /// `path` with every symlink followed, when that lies inside the root.
    fn inside(&self, path: &Path) -> Option<PathBuf> {
        fs::canonicalize(path)
            .ok()
            .filter(|real| real.starts_with(&self.root))
    }

    /// What a resource path names for writing: the last component is not
    /// followed (replacing or removing a symlink acts on the link itself,
    /// which lies inside the root), every folder before it must resolve
    /// inside the root.
    fn place(&self, path: &str) -> Place {
        let Some(rel) = relative(path) else {
            return Place::Nowhere;
        };
        let Some(name) = rel.file_name() else {
            // The root itself.
            return Place::Folder;
        };
        let folder = self
            .root
            .join(&rel)
            .parent()
            .and_then(|p| fs::canonicalize(p).ok())
            .filter(|p| p.starts_with(&self.root) && p.is_dir());
        let Some(folder) = folder else {
            return Place::Nowhere;
        };
        let target = folder.join(name);
        match fs::symlink_metadata(&target) {
            Err(_) => Place::Missing {
                folder,
                name: name.to_os_string(),
            },
            Ok(meta) if meta.is_dir() => Place::Folder,
            Ok(_) => Place::File(target),
        }
    }

    /// Reads a file or lists a folder, unless the content passes the size
    /// limit. `media` is kept with a file the cache keeps: it comes from
    /// the name, which mime_guess looks up at some cost.
    fn load(&self, source: Source, media: &MediaType, request: &Request) -> Result<Loaded, Unreadable> {
        let failed = Unreadable::CannotRead;
        let (mut opened, metadata, key) = match source {
            Source::File(file, metadata, key) => (file, metadata, key),
            #[cfg(target_os = "linux")]
            Source::Cached(content, kind, modified, slot) => {
                return Ok(Loaded::Content {
                    content: Content::Shared(content),
                    kind,
                    modified,
                    slot: Some(slot),
                });
            }
            Source::NotAFile => return Err(Unreadable::NotAFile),
            Source::Failed(e) => return Err(Unreadable::CannotOpen(e)),
            Source::Listing(folder) => {
                let after = files::listing_after(&request.resource);
                let page = self.list(&folder, after.as_deref()).map_err(failed)?;
                if page.content.len() as u64 > self.max_file_bytes {
                    return Ok(Loaded::TooLarge(page.modified));
                }
                let next = page
                    .last
                    .map(|last| files::next_page(request.resource.path(), &last));
                return Ok(Loaded::Listing(page.content, page.modified, next));
            }
        };
        // The open handle's own metadata: the file measured is the file sent.
        let modified = metadata.modified().ok().map(Date::from_system_time);
        if metadata.len() > self.max_file_bytes {
            return Ok(Loaded::TooLarge(modified));
        }
        if metadata.len() > STREAM_ABOVE && !self.caches(metadata.len(), key.is_some()) {
            let slot = self.slot_of(&opened, key);
            let text = self.is_text(&mut opened, slot.as_ref()).map_err(failed)?;
            return Ok(Loaded::Large {
                file: Steady::new(opened, &metadata),
                text,
                modified,
                slot,
            });
        }
        // Stamped before reading: a change during the read leaves a stamp
        // older than the file, so the next use reads it afresh.
        #[cfg(target_os = "linux")]
        let stamp = Stamp::of_file(&opened);
        let mut content = Vec::with_capacity(metadata.len() as usize);
        io::Read::read_to_end(&mut opened, &mut content).map_err(failed)?;
        // Changed while read: the content may mix two versions.
        let measure = Measure::of(&metadata);
        if content.len() as u64 != metadata.len() || !measure.holds_for(&opened).map_err(failed)? {
            return Err(Unreadable::Changed);
        }
        let kind = ContentKind::of(&content);
        #[cfg(target_os = "linux")]
        if let (Some(cache), Some(rel), Some(stamp)) = (&self.small_files, key, stamp) {
            // Shared with the cache and with every answer that sends it.
            let content: Arc<[u8]> = Arc::from(content);
            let kept = Cached {
                content: Arc::clone(&content),
                modified,
                media: media.clone(),
                kind,
            };
            cache.put(&rel, stamp, kept);
            return Ok(Loaded::Content {
                content: Content::Shared(content),
                kind,
                modified,
                slot: Some(Slot::new(rel, stamp)),
            });
        }
        #[cfg(not(target_os = "linux"))]
        let _ = key;
        Ok(Loaded::Content {
            content: Content::Owned(content),
            kind,
            modified,
            slot: None,
        })
    }

    /// Whether a file of `len` bytes is read whole into the cache (it has a
    /// place there, `keyed`) rather than streamed.
    fn caches(&self, len: u64, keyed: bool) -> bool {
        #[cfg(target_os = "linux")]
        if let Some(cache) = &self.small_files {
            return keyed && cache.would_keep(len);
        }
        let _ = (len, keyed);
        false
    }

    /// Where the cache keeps what it knows of the open `file` at `rel`:
    /// the version stamped now, before any read, so that a change while
    /// it is read leaves the stamp older than the file.
    fn slot_of(&self, file: &fs::File, rel: Option<PathBuf>) -> Option<Slot> {
        #[cfg(target_os = "linux")]
        if self.small_files.is_some() {
            return Some(Slot::new(rel?, Stamp::of_file(file)?));
        }
        let _ = (file, rel);
        None
    }

    /// Whether a large file is UTF-8 text (then it may go out as
    /// `identity`): read through unless the cache knows this version of
    /// the file, at `slot`.
    fn is_text(&self, file: &mut fs::File, slot: Option<&Slot>) -> io::Result<bool> {
        #[cfg(target_os = "linux")]
        if let (Some(cache), Some(slot)) = (&self.small_files, slot) {
            if let Some(text) = cache.is_text(slot) {
                return Ok(text);
            }
            let text = is_utf8(file)?;
            cache.put_is_text(slot, text);
            return Ok(text);
        }
        let _ = slot;
        is_utf8(file)
    }

    /// A large file sent as `identity`: its escaped form, if the cache
    /// keeps it for this version of the file; else the file itself, to
    /// stream. When the cache would keep the form, this answer starts
    /// making it, on a thread of its own (the file read again, whole, as
    /// it was measured), for the answers after it.
    fn escaped(&self, file: Steady, encoding: Encoding, text: bool, slot: Option<Slot>) -> Form<Steady> {
        #[cfg(target_os = "linux")]
        if let (Some(cache), Some(slot), Encoding::Identity, true) =
            (&self.small_files, &slot, encoding, text)
            && cache.would_keep_escaped(file.measured_len())
        {
            if let Some(body) = cache.escaped(slot) {
                return Form::Whole(body);
            }
            // Without a second descriptor, nothing is kept: this answer
            // streams all the same.
            cache.build_escaped(slot, || file.reading_again());
            return Form::Stream(file);
        }
        let _ = (encoding, text, slot);
        Form::Stream(file)
    }

    /// How a file read whole goes out. A cached file's written form is
    /// kept with it: escaped or compressed once per version of the file,
    /// not once per request. A form longer to make than a worker should
    /// keep its other connections waiting (content over
    /// [`PREPARE_HERE`]) is made on a thread of its own, and the answers
    /// that come before it is kept stream the content, encoded as the
    /// transfer goes.
    fn form_of(
        &self,
        content: Content,
        encoding: Encoding,
        slot: Option<Slot>,
    ) -> Result<Form<io::Cursor<Arc<[u8]>>>, ValueError> {
        #[cfg(target_os = "linux")]
        if let (Some(cache), Some(slot)) = (&self.small_files, &slot) {
            if let Some(body) = slot.form(encoding) {
                return Ok(Form::Whole(body.clone()));
            }
            let content = content.into_shared();
            if content.len() > PREPARE_HERE {
                cache.build_form(slot, Arc::clone(&content), encoding);
                return Ok(Form::Stream(io::Cursor::new(content)));
            }
            let mut body = Body::prepared(content, encoding)?;
            // Large text goes out with sendfile from a sealed copy, as
            // nginx sends files.
            cache.add_copy(&mut body);
            cache.put_encoded(slot, &body);
            return Ok(Form::Whole(body));
        }
        let _ = slot;
        match content {
            Content::Owned(bytes) => Body::new(bytes, encoding),
            Content::Shared(bytes) => Body::shared(bytes, encoding),
        }
        .map(Form::Whole)
    }

    /// One page of a folder's listing: the first [`files::LISTING_PAGE`] entries
    /// by name after `after` (all names when `None`), as JSON text, and
    /// their last modification for the conditional headers (D17): the
    /// latest of the folder's and the page's entries', since changing a
    /// file's content leaves its folder's time alone. A folder longer
    /// than a page is read through once and its sorted names kept while
    /// it is unchanged ([`Listings`]), so that a page costs about a page;
    /// memory stays bounded whatever the folder's size. Only what a `GET`
    /// could reach is listed: symlinks are followed only when they stay
    /// inside the root.
    fn list(&self, folder: &Path, after: Option<&str>) -> io::Result<Page> {
        let metadata = fs::metadata(folder)?;
        let mut latest = metadata.modified().ok().map(Date::from_system_time);
        let at_root = folder == self.root;
        // What a GET could not fetch is not offered.
        let keep = |name: &str, kind: &fs::FileType| {
            !(at_root && name == SPOOL_FOLDER)
                && files::refused_name(name).is_none()
                && (kind.is_symlink() || kind.is_file() || kind.is_dir())
        };
        let (chosen, more) = self
            .listings
            .page(folder, &metadata, after, files::LISTING_PAGE, keep)?;
        // The next page starts after the last name chosen, even when that
        // one is left out below.
        let last = if more {
            chosen.last().map(|(name, _)| name.clone())
        } else {
            None
        };
        let mut entries = Vec::with_capacity(chosen.len());
        for (name, symlink) in chosen {
            let path = folder.join(&name);
            let metadata = if symlink {
                match self.inside(&path).map(fs::metadata) {
                    Some(Ok(metadata)) => metadata,
                    _ => continue,
                }
            } else {
                match fs::symlink_metadata(&path) {
                    Ok(metadata) => metadata,
                    // Gone since the folder was read.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                }
            };
            if !(metadata.is_file() || metadata.is_dir()) {
                continue;
            }
            let modified = metadata.modified().ok().map(Date::from_system_time);
            latest = latest.max(modified);
            entries.push(files::ListingEntry {
                name,
                size: if metadata.is_dir() { 0 } else { metadata.len() },
                modified,
                is_folder: metadata.is_dir(),
            });
        }
        Ok(Page {
            content: files::listing_text(&entries),
            modified: latest,
            last,
        })
    }
}

/// One page of a folder's listing.
struct Page {
    /// The JSON text.
    content: Vec<u8>,
    /// The latest modification of the folder and the page's entries.
    modified: Option<Date>,
    /// The page's last name, when more entries follow it.
    last: Option<String>,
}

/// How many bytes of folder names the listings keep between pages: about
/// a million names of 20 bytes.
const LISTING_CACHE_BYTES: usize = 32 << 20;

/// The file server as its handlers take it: shared by the router's
/// routes, and by every request.
type Files = Arc<FileServer>;

impl FileServer {
    /// A reader of what the cache of small files holds, for an
    /// operator's metrics; it stays valid after [`into_router`](Self::into_router).
    pub fn cache_gauge(&self) -> CacheGauge {
        CacheGauge {
            #[cfg(target_os = "linux")]
            cache: self.small_files.clone(),
        }
    }

    /// The router that serves these files: every path, by method
    /// ([`Router::fallback_methods`]); `PUT`'s handler alone takes the
    /// content. What `jsontp serve` serves.
    pub fn into_router(self) -> Router {
        Arc::new(self).router()
    }

    /// [`into_router`](Self::into_router) for a server shared with its
    /// caller, who may still read its counters ([`folder_reads`](Self::folder_reads)).
    pub fn router(self: Arc<Self>) -> Router {
        Router::new()
            .fallback_methods(
                app::on(
                    &[Method::Get, Method::Post, Method::Delete, Method::Options],
                    answer,
                )
                .put(write),
            )
            .with_state(self)
    }
}

/// A request that passed every check of D5 levels 5 and 6 (`plan`), as an
/// extractor of its head: refused there, the request is refused before its
/// content is sent (D10) or stored (D19). It opens and reads files but
/// writes or removes none (it fills the caches only), as an extractor of
/// the head must, since it runs again when the handler is called.
struct Planned(Plan);

/// A refusal of this server, as a handler's answer.
struct Refused(Refusal);

impl IntoReply for Refused {
    fn into_reply(self) -> Reply {
        (*self.0).into()
    }
}

impl FromRequestParts<Files> for Planned {
    type Rejection = Refused;

    fn from_request_parts(parts: &Parts<'_>, files: &Files) -> Result<Self, Refused> {
        files.plan(parts.request()).map(Planned).map_err(Refused)
    }
}

/// `GET`, `POST`, `DELETE`, `OPTIONS`: they answer the same whatever the
/// content holds (`POST` form data is ignored here, D11), so they take
/// none and it is dropped as it is checked.
fn answer(State(files): State<Files>, Planned(plan): Planned) -> Result<Reply, Refused> {
    files.act(plan, None).map_err(Refused)
}

/// `PUT`: the content, in memory or spooled (D19), written atomically on
/// one of the server's writing threads. The disk's work (`fsync`, linking
/// into place) holds no worker: the answer is awaited.
async fn write(
    State(files): State<Files>,
    Planned(plan): Planned,
    content: app::Content,
) -> Result<Reply, Refused> {
    let language = plan.language;
    let server = Arc::clone(&files);
    let written = files.writes.answer(move || server.act(plan, Some(content))).await;
    written
        .unwrap_or_else(|| {
            Err(refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the server failed while writing the file",
                language,
            ))
        })
        .map_err(Refused)
}

/// Writes `content` at `target` in `folder`, atomically: spooled content
/// is linked into place when on the same file system (D19), content in
/// memory is written to a temporary file renamed over the target.
fn store(content: app::Content, folder: &Path, target: &Path) -> io::Result<()> {
    if !content.is_spooled() {
        // Moved out of the request, not copied.
        return write_atomically(folder, target, &content.into_bytes()?);
    }
    match content.into_upload() {
        Some(upload) => upload.persist(target),
        None => Err(io::Error::other("spooled content without its file")),
    }
}

/// The media type a folder sends: its `index.html`'s.
fn index_media() -> MediaType {
    media_type_of("/")
}

/// Whether `file` is UTF-8 text, read through once (D8: only text may go
/// as `identity`); the file is then rewound for sending.
fn is_utf8(file: &mut fs::File) -> io::Result<bool> {
    use io::Seek;
    let text = is_utf8_text(file)?;
    file.seek(io::SeekFrom::Start(0))?;
    Ok(text)
}

/// A resource path as a path relative to the root, made only of plain
/// names; `None` for anything else (D7), and for the spool folder.
fn relative(path: &str) -> Option<PathBuf> {
    let trimmed = path.trim_start_matches('/');
    let rel = Path::new(trimmed);
    if trimmed.bytes().any(|b| b == b'\\' || b == 0) {
        return None;
    }
    // The usual path: names between single slashes, none `.` or `..`.
    // Those are exactly its components, found without parsing them.
    let mut names = trimmed.as_bytes().split(|&b| b == b'/');
    if names.clone().all(|name| !matches!(name, b"" | b"." | b"..")) {
        return (names.next() != Some(SPOOL_FOLDER.as_bytes())).then(|| rel.to_path_buf());
    }
    if rel.components().next() == Some(Component::Normal(SPOOL_FOLDER.as_ref())) {
        return None;
    }
    rel.components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then(|| rel.to_path_buf())
}

/// A file's modification time, in whole seconds (D16), following a
/// symlink; `None` when it cannot be read.
fn last_modified(file: &Path) -> Option<Date> {
    fs::metadata(file)
        .ok()
        .and_then(|m| m.modified().ok())
        .map(Date::from_system_time)
}

/// A name for a temporary file that no client can predict: 64 bits from
/// std's `RandomState`, whose keys come from the operating system's random
/// source, over a counter (so two names in one process never repeat).
fn temporary_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    format!(".jsontp-put-{:016x}.tmp", hasher.finish())
}

/// Writes `content` to a temporary file in `folder`, then renames it over
/// `target`, so that a failure never leaves a half-written file. The
/// temporary file is created exclusively (`create_new` does not follow a
/// symlink either), under a name no client can predict; a name that is
/// taken after all is skipped for another.
fn write_atomically(folder: &Path, target: &Path, content: &[u8]) -> io::Result<()> {
    const ATTEMPTS: usize = 8;
    for _ in 0..ATTEMPTS {
        let temp = folder.join(temporary_name());
        let mut file = match fs::OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        let written = file
            .write_all(content)
            .and_then(|()| file.sync_all())
            .and_then(|()| fs::rename(&temp, target));
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        return written;
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free name for a temporary file",
    ))
}

/// An error of `open`: what it says of the path. Absence (or a way out of
/// the root, or a name too long to exist) is [`Opened::Missing`]; a
/// socket, which cannot be opened at all, is something that is not a
/// file; anything else is a failure, never passed off as absence.
#[cfg(unix)]
fn open_failure(e: io::Error) -> Opened {
    use rustix::io::Errno;
    let errno = e.raw_os_error().map(Errno::from_raw_os_error);
    match errno {
        Some(Errno::NOENT | Errno::NOTDIR | Errno::LOOP | Errno::NAMETOOLONG | Errno::XDEV) => {
            Opened::Missing
        }
        // A socket: `open` answers ENXIO.
        Some(Errno::NXIO) => Opened::NotAFile,
        _ => Opened::Failed(e),
    }
}

/// [`open_failure`] where only the error's kind says what happened.
#[cfg(not(unix))]
fn open_failure(e: io::Error) -> Opened {
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => Opened::Missing,
        _ => Opened::Failed(e),
    }
}

/// `language` as the response's only header.
fn language_header(language: LanguageTag) -> Headers {
    Headers::new().with_language(language)
}

fn refuse(
    code: StatusCode,
    message: impl Into<std::borrow::Cow<'static, str>>,
    language: LanguageTag,
) -> Refusal {
    Box::new(Response::from_code(code, message).with_headers(language_header(language)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits until `done`, at most 30 s; `what` says what it waits for.
    pub(super) fn eventually(what: &str, mut done: impl FnMut() -> bool) {
        for _ in 0..6000 {
            if done() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!("{what}: not within 30 s");
    }

    /// The answer of `router` to a `GET` of `path` with `headers`: whether
    /// it streams, and its body.
    #[cfg(target_os = "linux")]
    fn get(router: &Router, path: &str, headers: Headers) -> (bool, Body) {
        use jsontp_protocol::io_adapters::server::{Handler, Incoming, RequestInfo};
        let request = Request::new(Method::Get, path.parse().expect("resource")).with_headers(headers);
        let info = RequestInfo::new("127.0.0.1:1".parse().expect("addr"));
        let (response, reader) = router.respond(Incoming::new(request, info)).wait().into_parts();
        (reader.is_some(), response.body)
    }

    /// A `PUT` whose write waits for the disk (here: for every writing
    /// thread to be free) is awaited apart from the worker: the worker's
    /// other connections are served meanwhile, and the `PUT` is answered
    /// once its content is written.
    #[test]
    fn a_put_waiting_for_the_disk_holds_no_other_connection() {
        use jsontp_protocol::io_adapters::server::ServerOptions;
        use jsontp_protocol::io_adapters::server::mio::MioServer;
        use std::io::{BufRead, BufReader};
        use std::net::TcpStream;
        use std::time::Duration;

        let folder = tempfile::tempdir().expect("folder");
        fs::write(folder.path().join("small.txt"), "small").expect("write");
        let server = Arc::new(FileServer::new(folder.path()).expect("server").with_writes(true));
        // Every writing thread busy until `release` is dropped.
        let (release, released) = std::sync::mpsc::channel::<()>();
        let released = Arc::new(std::sync::Mutex::new(released));
        for _ in 0..MAX_WRITES {
            let released = Arc::clone(&released);
            assert!(server.writes.run(move || {
                let _ = released
                    .lock()
                    .expect("lock")
                    .recv_timeout(Duration::from_secs(30));
            }));
        }
        let options = ServerOptions::default().with_workers(1);
        let mio = MioServer::bind("127.0.0.1:0", Arc::clone(&server).router(), options).expect("bind");
        let addr = mio.local_addr().expect("addr");
        let stop = mio.shutdown_handle();
        let served = std::thread::Builder::new()
            .spawn(move || mio.run())
            .expect("the server's thread");
        let ask = |method: &str, path: &str, content: &str| {
            let stream = TcpStream::connect(addr).expect("connect");
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            let request = serde_json::json!({
                "jsontp": "1.0", "type": "request", "resource": path, "method": method,
                "headers": {}, "body": {"content": content, "encoding": "identity"}
            });
            (&stream)
                .write_all(format!("{request}\n").as_bytes())
                .expect("send");
            BufReader::new(stream)
        };
        let answer = |reader: &mut BufReader<TcpStream>| {
            let mut line = String::new();
            reader.read_line(&mut line).expect("an answer in time");
            let answer: serde_json::Value = serde_json::from_str(&line).expect("JSON");
            answer["status"]["code"].as_u64().expect("a code")
        };
        let mut put = ask("PUT", "/new.txt", "written");
        // The worker serves another connection while the PUT waits.
        assert_eq!(answer(&mut ask("GET", "/small.txt", "")), 200);
        assert!(!folder.path().join("new.txt").exists(), "not written yet");
        drop(release);
        assert!(matches!(answer(&mut put), 200 | 201));
        assert_eq!(
            fs::read_to_string(folder.path().join("new.txt")).expect("written"),
            "written"
        );
        stop.shutdown();
        served.join().expect("the server's thread").expect("the server");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_escaped_form_is_made_apart_while_requests_stream_the_file() {
        let folder = tempfile::tempdir().expect("folder");
        let text = "a \"line\"\n".repeat(SmallFiles::MAX_FILE / 4);
        fs::write(folder.path().join("large.txt"), &text).expect("write");
        fs::write(folder.path().join("other.txt"), &text).expect("write");
        let server = FileServer::new(folder.path()).expect("server");
        let cache = server.small_files.clone().expect("a cache");
        let router = server.into_router();
        let get = |path: &str| get(&router, path, Headers::new());
        let root = fs::File::open(folder.path()).expect("root");
        let slot_of = |name: &str| {
            let stamp = Stamp::of_path(&root, Path::new(name)).expect("a file");
            Slot::new(PathBuf::from(name), stamp)
        };
        let (large, other) = (slot_of("large.txt"), slot_of("other.txt"));
        // Another request is making its escaped form.
        let building = cache.build(&large).expect("room to build");
        for _ in 0..3 {
            assert!(get("/large.txt").0, "streamed while another request builds");
        }
        assert!(cache.escaped(&large).is_none(), "no second build");
        drop(building);
        // The next answer streams too, and starts the build, which ends
        // without another request.
        assert!(get("/large.txt").0, "the answer does not wait for the build");
        eventually("the build ends", || cache.escaped(&large).is_some());
        let (streamed, body) = get("/large.txt");
        assert!(!streamed, "made, and sent whole");
        assert!(body.has_sendfile_copy() && body.content() == text.as_bytes());
        // Past the builds that may run at once, a request streams and
        // starts none: the path is free to build once they end.
        let others: Vec<_> = (0..SmallFiles::MAX_BUILDS)
            .map(|n| {
                cache
                    .build(&Slot::new(PathBuf::from(n.to_string()), other.stamp))
                    .expect("room")
            })
            .collect();
        assert!(get("/other.txt").0, "no room for a build: streamed");
        drop(others);
        assert!(cache.build(&other).is_some(), "no build of it was started");
        assert!(cache.escaped(&other).is_none());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_long_cached_file_streams_while_its_written_form_is_made_apart() {
        let folder = tempfile::tempdir().expect("folder");
        let long = "a \"line\" of text\n".repeat(200 * 1024 / 18);
        let short = &long[..PREPARE_HERE];
        fs::write(folder.path().join("long.txt"), &long).expect("write");
        fs::write(folder.path().join("short.txt"), short).expect("write");
        let server = FileServer::new(folder.path()).expect("server");
        let cache = server.small_files.clone().expect("a cache");
        let router = server.into_router();
        let get = |path: &str| {
            get(
                &router,
                path,
                Headers::new().with_accept_encoding([Encoding::Gzip]),
            )
        };
        let root = fs::File::open(folder.path()).expect("root");
        let gzip_kept = |name: &str| {
            let stamp = Stamp::of_path(&root, Path::new(name)).expect("a file");
            cache
                .get(Path::new(name), stamp)
                .is_some_and(|(_, forms)| forms.iter().any(|form| form.encoding() == Encoding::Gzip))
        };
        // Short content is made in the answer, and kept.
        let (streamed, body) = get("/short.txt");
        assert!(!streamed && body.encoding() == Encoding::Gzip && body.content() == short.as_bytes());
        assert!(gzip_kept("short.txt"));
        // Longer content streams, its form made apart.
        let (streamed, body) = get("/long.txt");
        assert!(streamed && body.encoding() == Encoding::Gzip, "streamed, in gzip");
        eventually("the build ends", || gzip_kept("long.txt"));
        let (streamed, body) = get("/long.txt");
        assert!(!streamed, "sent whole, as kept");
        assert!(body.encoding() == Encoding::Gzip && body.content() == long.as_bytes());
    }

    #[test]
    fn temporary_names_are_hidden_unpredictable_and_distinct() {
        let names: std::collections::HashSet<String> = (0..1000).map(|_| temporary_name()).collect();
        assert_eq!(names.len(), 1000);
        for name in &names {
            let hex = name
                .strip_prefix(".jsontp-put-")
                .and_then(|n| n.strip_suffix(".tmp"))
                .expect("the name's shape");
            assert_eq!(hex.len(), 16);
            assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()));
        }
        // Not a counter: consecutive names are far apart (two random 64-bit
        // values are within 2^32 of each other once in 2^31 runs).
        let value = |n: String| u64::from_str_radix(&n[12..28], 16).expect("hex");
        let (a, b) = (value(temporary_name()), value(temporary_name()));
        assert!(a.abs_diff(b) > 1 << 32, "{a:x} {b:x}");
    }

    #[cfg(unix)]
    #[test]
    fn a_failed_open_is_never_told_as_absence() {
        use rustix::io::Errno;
        let os = |errno: Errno| io::Error::from_raw_os_error(errno.raw_os_error());
        for absent in [Errno::NOENT, Errno::NOTDIR, Errno::LOOP, Errno::NAMETOOLONG] {
            assert!(matches!(open_failure(os(absent)), Opened::Missing), "{absent:?}");
        }
        assert!(matches!(open_failure(os(Errno::NXIO)), Opened::NotAFile));
        for (errno, code, words) in [
            (Errno::MFILE, 503, "too many files open"),
            (Errno::NFILE, 503, "too many files open"),
            (Errno::ACCESS, 500, "permission denied"),
            (Errno::PERM, 500, "permission denied"),
            (Errno::IO, 500, "could not open this file"),
        ] {
            let Opened::Failed(e) = open_failure(os(errno)) else {
                panic!("{errno:?} is a failure");
            };
            let answer = Unreadable::CannotOpen(e).response();
            assert_eq!(answer.status.code.as_u16(), code, "{errno:?}");
            assert!(
                answer.status.human_message.contains(words),
                "{errno:?}: {}",
                answer.status.human_message
            );
        }
    }

    #[test]
    fn d7_relative_paths_are_plain_names() {
        assert_eq!(relative("/a/b.txt"), Some(PathBuf::from("a/b.txt")));
        assert_eq!(relative("/"), Some(PathBuf::new()));
        assert_eq!(relative("/a\\b"), None);
        assert_eq!(relative("/a/../b"), None);
        // The plain names of the quick path and what `components` makes of
        // the rest agree.
        for path in [
            "/a",
            "/a/b",
            "//a//b/",
            "/a/./b",
            "/./a",
            "/.",
            "/..",
            "/a/..",
            "/a/.b",
            "/..a/b..",
            "/a\0b",
            "/.jsontp-spool",
            "/.jsontp-spool/x",
            "//.jsontp-spool",
            "/a/.jsontp-spool",
            "/.jsontp-spool2",
        ] {
            let trimmed = path.trim_start_matches('/');
            let rel = Path::new(trimmed);
            let expected = (!trimmed.contains(['\\', '\0'])
                && rel.components().next() != Some(Component::Normal(SPOOL_FOLDER.as_ref()))
                && rel.components().all(|c| matches!(c, Component::Normal(_))))
            .then(|| rel.to_path_buf());
            assert_eq!(relative(path), expected, "{path}");
        }
    }
}
