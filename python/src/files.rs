//! The library's file-server rules (`app::files`) for a Python file
//! server: the server gathers what the path holds (a `Found` or a
//! `Place`), `FileRules.judge` gives the verdict or the response to send,
//! in D5's order, by the same code as `jsontp serve`'s.

use std::io;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use jsontp_protocol::app::files::{self, Action, Facts, ListingEntry, Unreadable};
use jsontp_protocol::message::negotiate::ContentKind;
use jsontp_protocol::message::{Date, LanguageTag, MediaType};

use crate::messages::{Request, Response};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FileRules>()?;
    m.add_class::<Found>()?;
    m.add_class::<Place>()?;
    m.add_class::<Verdict>()?;
    m.add_function(wrap_pyfunction!(media_type_of, m)?)?;
    m.add_function(wrap_pyfunction!(refused_name, m)?)?;
    m.add_function(wrap_pyfunction!(allowed_methods, m)?)?;
    m.add_function(wrap_pyfunction!(listing_text, m)?)?;
    m.add_function(wrap_pyfunction!(listing_after, m)?)?;
    m.add_function(wrap_pyfunction!(next_page, m)?)?;
    m.add_function(wrap_pyfunction!(write_failed, m)?)?;
    m.add_function(wrap_pyfunction!(access_failed, m)?)?;
    m.add("INDEX", files::INDEX)?;
    m.add("LISTING_PAGE", files::LISTING_PAGE)?;
    Ok(())
}

/// A last modification given as seconds since the epoch (`os.stat`'s
/// `st_mtime`), in whole seconds (D16).
fn date_of(modified: Option<f64>) -> PyResult<Option<Date>> {
    modified
        .map(|seconds| {
            if seconds.is_finite() {
                Ok(Date::from_unix_seconds(seconds.floor() as i64))
            } else {
                Err(PyValueError::new_err(format!(
                    "modified must be seconds since the epoch, not {seconds}"
                )))
            }
        })
        .transpose()
}

/// An `OSError` as the `io::Error` it came from (its errno kept, so that
/// "out of descriptors" is told apart).
fn io_error_of(error: &Bound<'_, PyAny>) -> io::Error {
    let errno: Option<i32> = error.getattr("errno").ok().and_then(|e| e.extract().ok());
    match errno {
        Some(errno) => io::Error::from_raw_os_error(errno),
        None => io::Error::other(error.to_string()),
    }
}

/// The language tag of a verdict's or an answer's language.
fn language_of(language: &str) -> PyResult<LanguageTag> {
    language
        .parse()
        .map_err(|e| PyValueError::new_err(format!("language {language:?} {e}")))
}

fn response_of(response: jsontp_protocol::message::Response) -> Response {
    crate::messages::made(response)
}

/// What a `GET` or `POST` found at a path, for `FileRules.judge`. Made
/// with its class methods: `Found.file(text, modified)`,
/// `Found.listing(modified)`, `Found.too_large(modified, limit)`,
/// `Found.missing(folder)`, `Found.not_a_file()`,
/// `Found.cannot_open(error)`, `Found.cannot_read(error)`,
/// `Found.changed()`.
#[pyclass(frozen, module = "jsontp_protocol")]
pub struct Found {
    kind: FoundKind,
}

enum FoundKind {
    File { text: bool, modified: Option<Date> },
    Listing { modified: Option<Date> },
    TooLarge { modified: Option<Date>, limit: u64 },
    Missing { folder: bool },
    NotAFile,
    CannotOpen(Option<i32>, String),
    CannotRead(Option<i32>, String),
    Changed,
}

impl Found {
    fn facts(&self) -> files::Found {
        let error = |errno: &Option<i32>, message: &str| match errno {
            Some(errno) => io::Error::from_raw_os_error(*errno),
            None => io::Error::other(message.to_owned()),
        };
        match &self.kind {
            FoundKind::File { text, modified } => files::Found::File {
                kind: if *text {
                    ContentKind::Text
                } else {
                    ContentKind::Binary
                },
                modified: *modified,
            },
            FoundKind::Listing { modified } => files::Found::Listing { modified: *modified },
            FoundKind::TooLarge { modified, limit } => files::Found::TooLarge {
                modified: *modified,
                limit: *limit,
            },
            FoundKind::Missing { folder } => files::Found::Missing { folder: *folder },
            FoundKind::NotAFile => files::Found::Unreadable(Unreadable::NotAFile),
            FoundKind::CannotOpen(errno, message) => {
                files::Found::Unreadable(Unreadable::CannotOpen(error(errno, message)))
            }
            FoundKind::CannotRead(errno, message) => {
                files::Found::Unreadable(Unreadable::CannotRead(error(errno, message)))
            }
            FoundKind::Changed => files::Found::Unreadable(Unreadable::Changed),
        }
    }
}

#[pymethods]
impl Found {
    /// A file: whether its content is UTF-8 text (D8, D9), and its last
    /// modification (seconds since the epoch) or None.
    #[staticmethod]
    #[pyo3(signature = (text, modified=None))]
    fn file(text: bool, modified: Option<f64>) -> PyResult<Found> {
        Ok(Found {
            kind: FoundKind::File {
                text,
                modified: date_of(modified)?,
            },
        })
    }

    /// A folder without `index.html`, listed: the latest modification of
    /// the folder and the page's entries.
    #[staticmethod]
    #[pyo3(signature = (modified=None))]
    fn listing(modified: Option<f64>) -> PyResult<Found> {
        Ok(Found {
            kind: FoundKind::Listing {
                modified: date_of(modified)?,
            },
        })
    }

    /// A file larger than the server's limit (`limit` bytes), not read.
    #[staticmethod]
    #[pyo3(signature = (limit, modified=None))]
    fn too_large(limit: u64, modified: Option<f64>) -> PyResult<Found> {
        Ok(Found {
            kind: FoundKind::TooLarge {
                modified: date_of(modified)?,
                limit,
            },
        })
    }

    /// Nothing the server may send; `folder` when the path is a folder
    /// without `index.html` (the message says so).
    #[staticmethod]
    #[pyo3(signature = (folder=false))]
    fn missing(folder: bool) -> Found {
        Found {
            kind: FoundKind::Missing { folder },
        }
    }

    /// Something that is not a regular file or folder (`403`).
    #[staticmethod]
    fn not_a_file() -> Found {
        Found {
            kind: FoundKind::NotAFile,
        }
    }

    /// There, but opening it failed with `error` (an OSError): `503` when
    /// out of descriptors, `500` otherwise.
    #[staticmethod]
    fn cannot_open(error: &Bound<'_, PyAny>) -> Found {
        let e = io_error_of(error);
        Found {
            kind: FoundKind::CannotOpen(e.raw_os_error(), e.to_string()),
        }
    }

    /// Opened, but reading it failed with `error`: `500`.
    #[staticmethod]
    fn cannot_read(error: &Bound<'_, PyAny>) -> Found {
        let e = io_error_of(error);
        Found {
            kind: FoundKind::CannotRead(e.raw_os_error(), e.to_string()),
        }
    }

    /// The file changed while it was read: `503`, to try again.
    #[staticmethod]
    fn changed() -> Found {
        Found {
            kind: FoundKind::Changed,
        }
    }
}

/// What a path names for `PUT`, `DELETE` and `OPTIONS`:
/// `Place.file(modified)`, `Place.folder()`, `Place.missing()` (creatable
/// in an existing folder), `Place.nowhere()`.
#[pyclass(frozen, module = "jsontp_protocol")]
#[derive(Clone, Copy)]
pub struct Place {
    inner: files::Place,
}

#[pymethods]
impl Place {
    /// An existing file (or symlink), with its last modification.
    #[staticmethod]
    #[pyo3(signature = (modified=None))]
    fn file(modified: Option<f64>) -> PyResult<Place> {
        Ok(Place {
            inner: files::Place::File {
                modified: date_of(modified)?,
            },
        })
    }

    /// An existing folder.
    #[staticmethod]
    fn folder() -> Place {
        Place {
            inner: files::Place::Folder,
        }
    }

    /// Nothing yet, in an existing folder inside the root.
    #[staticmethod]
    fn missing() -> Place {
        Place {
            inner: files::Place::Missing,
        }
    }

    /// Nothing that could be: the folder is missing or outside the root.
    #[staticmethod]
    fn nowhere() -> Place {
        Place {
            inner: files::Place::Nowhere,
        }
    }
}

/// A request that passed every rule: `language`, and `action` (`"serve"`
/// with `media` and `encoding`, `"write"`, `"remove"`, or `"options"` with
/// `methods`).
#[pyclass(frozen, module = "jsontp_protocol")]
pub struct Verdict {
    /// The answer's language (D18).
    #[pyo3(get)]
    language: String,
    /// `serve`, `write`, `remove` or `options`.
    #[pyo3(get)]
    action: &'static str,
    /// `serve`: the content-type.
    #[pyo3(get)]
    media: Option<String>,
    /// `serve`: the encoding (D8).
    #[pyo3(get)]
    encoding: Option<&'static str>,
    /// `options`: the allowed methods (D11).
    #[pyo3(get)]
    methods: Option<Vec<&'static str>>,
    /// `options`: the whole answer, `allowed-methods` in its body (D11).
    #[pyo3(get)]
    response: Option<Py<Response>>,
}

#[pymethods]
impl Verdict {
    fn __repr__(&self) -> String {
        format!(
            "<Verdict {} language={} media={:?} encoding={:?} methods={:?}>",
            self.action, self.language, self.media, self.encoding, self.methods
        )
    }
}

/// One file server's rules: `FileRules(*, writable=True, token=None,
/// languages=["en-US"])`.
#[pyclass(frozen, module = "jsontp_protocol")]
pub struct FileRules {
    inner: files::FileRules,
}

#[pymethods]
impl FileRules {
    #[new]
    #[pyo3(signature = (*, writable=true, token=None, languages=None))]
    fn new(writable: bool, token: Option<String>, languages: Option<Vec<String>>) -> PyResult<FileRules> {
        let languages = languages
            .unwrap_or_default()
            .iter()
            .map(|l| language_of(l))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(FileRules {
            inner: files::FileRules::new()
                .with_writable(writable)
                .with_token(token)
                .with_languages(languages),
        })
    }

    /// Whether `PUT` and `DELETE` are served.
    #[getter]
    fn writable(&self) -> bool {
        self.inner.writable()
    }

    /// Every rule of D5 levels 3, 5 and 6 in order: a `Verdict`, or the
    /// `Response` to send. `GET`/`POST` give `media` (the path's media
    /// type, `media_type_of`) and `found`; `PUT`, `DELETE` and `OPTIONS`
    /// give `place` and `exists` (whether a `GET` would find something).
    #[pyo3(signature = (request, *, media=None, found=None, place=None, exists=false))]
    fn judge(
        &self,
        py: Python<'_>,
        request: &Bound<'_, Request>,
        media: Option<&str>,
        found: Option<&Bound<'_, Found>>,
        place: Option<&Bound<'_, Place>>,
        exists: bool,
    ) -> PyResult<Py<PyAny>> {
        let media: Option<MediaType> = media
            .map(|m| {
                m.parse()
                    .map_err(|e| PyValueError::new_err(format!("media {m:?} {e}")))
            })
            .transpose()?;
        let facts = match (&media, found, place) {
            (Some(media), Some(found), None) => Facts::Read {
                media,
                found: found.get().facts(),
            },
            (None, None, Some(place)) => Facts::Place {
                place: place.get().inner,
                exists,
            },
            _ => {
                return Err(PyValueError::new_err(
                    "judge takes media= and found= (GET, POST) or place= and exists= (PUT, DELETE, OPTIONS)",
                ));
            }
        };
        match self.inner.judge(&request.get().inner, facts) {
            Err(response) => Ok(Py::new(py, response_of(*response))?.into_any()),
            Ok(verdict) => {
                let options = match verdict.action {
                    Action::Options(methods) => Some(Py::new(
                        py,
                        response_of(
                            jsontp_protocol::message::Response::allowed_methods(methods).with_headers(
                                jsontp_protocol::message::Headers::new().with_language(verdict.language),
                            ),
                        ),
                    )?),
                    _ => None,
                };
                let (action, media, encoding, methods) = match verdict.action {
                    Action::Serve { media, encoding } => {
                        ("serve", Some(media.to_string()), Some(encoding.as_str()), None)
                    }
                    Action::Write => ("write", None, None, None),
                    Action::Remove => ("remove", None, None, None),
                    Action::Options(methods) => (
                        "options",
                        None,
                        None,
                        Some(methods.iter().map(|m| m.as_str()).collect()),
                    ),
                };
                Ok(Py::new(
                    py,
                    Verdict {
                        language: verdict.language.to_string(),
                        action,
                        media,
                        encoding,
                        methods,
                        response: options,
                    },
                )?
                .into_any())
            }
        }
    }
}

/// The media type sent for a resource path, from its extension (`.txt`
/// is `text/plain`, an unknown one `application/octet-stream`).
#[pyfunction]
fn media_type_of(path: &str) -> String {
    files::media_type_of(path).to_string()
}

/// Why a file server refuses a resource path whatever the folder holds
/// (`400`), or None.
#[pyfunction]
fn refused_name(path: &str) -> Option<&'static str> {
    files::refused_name(path)
}

/// The methods a resource allows (D11).
#[pyfunction]
fn allowed_methods(writable: bool, place: &Bound<'_, Place>, exists: bool) -> Vec<&'static str> {
    files::allowed_methods(writable, place.get().inner, exists)
        .iter()
        .map(|m| m.as_str())
        .collect()
}

/// One page of a folder's listing as sent: entries are dicts with `name`,
/// `size`, `modified` (seconds since the epoch, or None) and `is_folder`,
/// sorted by name; the JSON text ends with a line break.
#[pyfunction]
fn listing_text<'py>(py: Python<'py>, entries: Vec<Bound<'py, PyDict>>) -> PyResult<Bound<'py, PyBytes>> {
    let mut listed = Vec::with_capacity(entries.len());
    for entry in entries {
        let field = |name: &str| -> PyResult<Bound<'_, PyAny>> {
            entry
                .get_item(name)?
                .ok_or_else(|| PyValueError::new_err(format!("a listing entry lacks {name:?}")))
        };
        listed.push(ListingEntry {
            name: field("name")?.extract()?,
            size: field("size")?.extract()?,
            modified: date_of(field("modified")?.extract()?)?,
            is_folder: field("is_folder")?.extract()?,
        });
    }
    Ok(PyBytes::new(py, &files::listing_text(&listed)))
}

/// The name a listing's page starts after (`?after=NAME`), or None.
#[pyfunction]
fn listing_after(request: &Bound<'_, Request>) -> Option<String> {
    files::listing_after(&request.get().inner.resource)
}

/// The resource of a listing's next page (`PATH/?after=NAME`).
#[pyfunction]
fn next_page(path: &str, last: &str) -> String {
    files::next_page(path, last)
}

/// The answer when a `PUT` could not write (an OSError): `503` when out of
/// descriptors, else `500`.
#[pyfunction]
fn write_failed(error: &Bound<'_, PyAny>, language: &str) -> PyResult<Response> {
    if !error.is_instance_of::<PyOSError>() {
        return Err(PyValueError::new_err("write_failed takes an OSError"));
    }
    Ok(response_of(files::write_failed(
        &io_error_of(error),
        language_of(language)?,
    )))
}

/// The answer when the file system refused what a verdict said to do: `500`.
#[pyfunction]
fn access_failed(error: &Bound<'_, PyAny>, language: &str) -> PyResult<Response> {
    Ok(response_of(files::access_failed(
        &io_error_of(error),
        language_of(language)?,
    )))
}
