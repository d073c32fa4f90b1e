//! Moving content of any size for the client commands (D19): the upload's
//! source and the encoding it travels in, the download's destination
//! (stdout, or `-o FILE` through a temporary file renamed on success), and
//! a progress bar on a terminal for transfers that last.

use std::fs::File;
use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use jsontp_cli::file_server::is_utf8_text;
use jsontp_protocol::message::Encoding;
use tempfile::NamedTempFile;

use super::output::{Destination, is_binary};
use super::request::Source;

/// Identity asked for content that is not text (D9).
const NOT_TEXT: &str = "the content is not UTF-8 text, so it cannot be sent as identity; leave out --encoding identity, or give gzip, deflate or br";

/// How much of stdin is looked at to choose the encoding.
const SNIFF: usize = 64 * 1024;

/// A progress bar shown only on a terminal, and only once a transfer has
/// lasted a second: short transfers print nothing.
pub struct Progress {
    enabled: bool,
    started: Instant,
    total: Option<u64>,
    done: u64,
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar for `total` bytes (when known); `silent` (`-s`) or a stderr
    /// that is not a terminal shows none.
    pub fn new(total: Option<u64>, silent: bool) -> Progress {
        Progress {
            enabled: !silent && io::stderr().is_terminal(),
            started: jsontp_protocol::io_adapters::now().instant,
            total,
            done: 0,
            bar: None,
        }
    }

    /// `n` more bytes moved.
    pub fn advance(&mut self, n: usize) {
        self.done += n as u64;
        if let Some(bar) = &self.bar {
            bar.set_position(self.done);
            return;
        }
        if self.enabled && self.started.elapsed() >= Duration::from_secs(1) {
            let bar = match self.total {
                Some(total) => ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
                    .with_style(style(
                        "{bytes}/{total_bytes} {wide_bar} {bytes_per_sec} ETA {eta}",
                    )),
                None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
                    .with_style(style("{bytes} {bytes_per_sec} {elapsed}")),
            };
            bar.set_position(self.done);
            self.bar = Some(bar);
        }
    }

    /// The transfer ended: the bar, if shown, is cleared.
    /// The bytes moved so far.
    pub fn done(&self) -> u64 {
        self.done
    }

    /// Clears the bar.
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// The content to upload, opened: a reader, its size when known, and the
/// encoding it travels in.
pub struct Upload {
    pub reader: Box<dyn Read>,
    pub len: Option<u64>,
    pub encoding: Encoding,
}

impl Upload {
    /// Opens `--file PATH` or stdin. The encoding is the one asked for,
    /// else `identity` for UTF-8 text and `gzip` for anything else (D9): a
    /// file is read through once to tell; stdin by its first 64 KiB (text
    /// that turns binary later fails: give `--encoding gzip`).
    pub fn open(source: &Source, asked: Option<Encoding>) -> Result<Upload, String> {
        match source {
            Source::Text(text) => Ok(Upload {
                len: Some(text.len() as u64),
                encoding: asked.unwrap_or(if std::str::from_utf8(text.as_bytes()).is_ok() {
                    Encoding::Identity
                } else {
                    Encoding::Gzip
                }),
                reader: Box::new(io::Cursor::new(text.clone().into_bytes())),
            }),
            Source::File(path) => {
                let cannot = |e: io::Error| format!("cannot read {}: {e}", path.display());
                let len = std::fs::metadata(path).map_err(cannot)?.len();
                let text = || -> Result<bool, String> {
                    is_utf8_text(&mut File::open(path).map_err(cannot)?).map_err(cannot)
                };
                let encoding = match asked {
                    Some(Encoding::Identity) if !text()? => return Err(NOT_TEXT.to_owned()),
                    Some(encoding) => encoding,
                    None if text()? => Encoding::Identity,
                    None => Encoding::Gzip,
                };
                Ok(Upload {
                    reader: Box::new(File::open(path).map_err(cannot)?),
                    len: Some(len),
                    encoding,
                })
            }
            Source::Stdin => {
                let mut head = Vec::with_capacity(SNIFF);
                io::stdin()
                    .lock()
                    .take(SNIFF as u64)
                    .read_to_end(&mut head)
                    .map_err(|e| format!("cannot read the standard input: {e}"))?;
                let encoding = match asked {
                    Some(Encoding::Identity) if !text_prefix(&head) => return Err(NOT_TEXT.to_owned()),
                    Some(encoding) => encoding,
                    None if text_prefix(&head) => Encoding::Identity,
                    None => Encoding::Gzip,
                };
                Ok(Upload {
                    reader: Box::new(io::Cursor::new(head).chain(io::stdin())),
                    len: None,
                    encoding,
                })
            }
        }
    }
}

/// Whether the bytes are UTF-8 text, allowing a character cut at the end.
fn text_prefix(bytes: &[u8]) -> bool {
    match std::str::from_utf8(bytes) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    }
}

/// A reader that moves a progress bar.
pub struct Counted<'a, R> {
    pub inner: R,
    pub progress: &'a mut Progress,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n);
        Ok(n)
    }
}

/// Where downloaded content goes as it arrives.
pub enum Sink {
    /// Standard output; binary content is refused on a terminal (checked
    /// on the first piece, as curl does), unless `-o -`.
    /// `tables`: on a terminal (and without `--json`), content that starts
    /// as a JSON array is held to be shown as a table if it is a folder
    /// listing.
    Stdout {
        guard: bool,
        checked: bool,
        tables: bool,
    },
    /// A terminal's stdout, content that may be a folder listing: held
    /// (up to [`LISTING_HELD`]) to be shown as a table once complete.
    Listing { held: Vec<u8> },
    /// `-o FILE`: a temporary file beside it, renamed over it only when the
    /// answer is a 2xx and complete; removed otherwise.
    File { target: PathBuf, temp: NamedTempFile },
    /// `-o` naming something that is not a regular file (`/dev/null`, a
    /// pipe, a terminal): written as it is, as curl does. Renaming over it
    /// would replace the device with a file.
    Device { file: File },
    /// Content that is not to be kept (an `OPTIONS` answer's).
    Discard,
    /// `-i` to stdout: the content held in an anonymous temporary file
    /// until the answer's envelope is printed, then copied out.
    Held { file: File, stdout: Box<Sink> },
}

/// The most content held to be shown as a listing's table; past it, the
/// content goes out as it came.
const LISTING_HELD: usize = 16 << 20;

/// Refusing binary content on a terminal.
pub const BINARY_TO_TERMINAL: &str =
    "binary output can mess up your terminal; use -o FILE or --output - to write it anyway";

impl Sink {
    /// The sink for `destination`; `raw` (`--json`, `-s`) never shows a
    /// listing as a table.
    pub fn new(destination: &Destination, raw: bool) -> Result<Sink, String> {
        let terminal = io::stdout().is_terminal();
        Ok(match destination {
            Destination::Stdout => Sink::Stdout {
                guard: terminal,
                checked: false,
                tables: terminal && !raw,
            },
            Destination::StdoutAnyway => Sink::Stdout {
                guard: false,
                checked: true,
                tables: false,
            },
            Destination::File(target)
                if std::fs::metadata(target).is_ok_and(|m| !m.is_file() && !m.is_dir()) =>
            {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(target)
                    .map_err(|e| format!("cannot write {}: {e}", target.display()))?;
                Sink::Device { file }
            }
            Destination::File(target) => {
                let folder = match target.parent() {
                    Some(parent) if !parent.as_os_str().is_empty() => parent,
                    _ => Path::new("."),
                };
                let name = target
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let temp = tempfile::Builder::new()
                    .prefix(&format!(".{name}."))
                    .suffix(".part")
                    .tempfile_in(folder)
                    .map_err(|e| cannot_write(target, folder, &e))?;
                Sink::File {
                    target: target.clone(),
                    temp,
                }
            }
        })
    }

    /// A sink that holds the content (on disk, whatever its size) until
    /// [`finish`](Self::finish) writes it to `destination`, stdout.
    pub fn held(destination: &Destination) -> Result<Sink, String> {
        let file = tempfile::tempfile().map_err(|e| format!("cannot hold the content: {e}"))?;
        Ok(Sink::Held {
            file,
            stdout: Box::new(Sink::new(destination, true)?),
        })
    }

    /// The transfer is over: `keep` (a 2xx answer, complete) renames the
    /// temporary file into place; otherwise it is removed and the target
    /// left as it was. Held content goes out now.
    pub fn finish(self, keep: bool) -> Result<(), String> {
        match self {
            Sink::Held { mut file, mut stdout } => {
                use io::Seek;
                file.seek(io::SeekFrom::Start(0))
                    .and_then(|_| io::copy(&mut file, &mut *stdout))
                    .map_err(|e| format!("cannot write the content: {e}"))?;
                stdout.finish(keep)
            }
            Sink::Listing { held } => {
                let shown = super::listing::table(&held).map_or(held, String::into_bytes);
                let mut out = io::stdout().lock();
                match out.write_all(&shown).and_then(|()| out.flush()) {
                    Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
                        Err(format!("cannot write the content: {e}"))
                    }
                    _ => Ok(()),
                }
            }
            Sink::File { target, temp } if keep => temp
                .persist(&target)
                .map(|_| ())
                .map_err(|e| format!("cannot write {}: {}", target.display(), e.error)),
            _ => {
                let _ = io::stdout().flush();
                Ok(())
            }
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Stdout {
                tables: true,
                checked: false,
                ..
            } if buf.starts_with(b"[") => {
                *self = Sink::Listing { held: buf.to_vec() };
                Ok(buf.len())
            }
            Sink::Listing { held } => {
                held.extend_from_slice(buf);
                if held.len() > LISTING_HELD {
                    let held = std::mem::take(held);
                    *self = Sink::Stdout {
                        guard: false,
                        checked: true,
                        tables: false,
                    };
                    self.write_all(&held)?;
                }
                Ok(buf.len())
            }
            Sink::Stdout { guard, checked, .. } => {
                if *guard && !*checked && is_binary(&buf[..buf.len().min(SNIFF)]) {
                    return Err(io::Error::other(BINARY_TO_TERMINAL));
                }
                *checked = true;
                match io::stdout().lock().write_all(buf) {
                    // A reader that went away (`| head`) is not our failure.
                    Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(buf.len()),
                    Err(e) => Err(e),
                    Ok(()) => Ok(buf.len()),
                }
            }
            // The file's own handle: the temporary file's wrapper would name
            // its hidden path in errors, which the user never gave.
            Sink::File { target, temp } => temp
                .as_file_mut()
                .write(buf)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", target.display()))),
            Sink::Device { file } => file.write(buf),
            Sink::Held { file, .. } => file.write(buf),
            Sink::Discard => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Stdout { .. } | Sink::Listing { .. } => io::stdout().flush(),
            Sink::File { temp, .. } => temp.as_file_mut().flush(),
            Sink::Device { file } => file.flush(),
            Sink::Held { file, .. } => file.flush(),
            Sink::Discard => Ok(()),
        }
    }
}

/// Why `-o FILE` cannot be written, naming the path the user gave and
/// never the hidden temporary file beside it: a folder that does not
/// exist, or is not a folder, is said so.
fn cannot_write(target: &Path, folder: &Path, error: &io::Error) -> String {
    let shown = if folder == Path::new(".") {
        "the current folder".to_owned()
    } else {
        format!("the folder {}", folder.display())
    };
    match std::fs::metadata(folder) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            format!("cannot write {}: {shown} does not exist", target.display())
        }
        Ok(meta) if !meta.is_dir() => {
            format!("cannot write {}: {shown} is not a folder", target.display())
        }
        _ => {
            // The temporary file's error adds its own path; the cause is
            // the error it wraps.
            let cause = error
                .get_ref()
                .and_then(|inner| inner.source())
                .map_or_else(|| error.to_string(), ToString::to_string);
            format!("cannot write {} (in {shown}): {cause}", target.display())
        }
    }
}

/// A writer that moves a progress bar.
pub struct CountedSink<'a> {
    pub inner: &'a mut Sink,
    pub progress: &'a mut Progress,
}

impl Write for CountedSink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.progress.advance(n);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
