//! A file sent as it was measured: each read checks, with one `fstat`,
//! that the file's size and times are still those measured when it was
//! opened, and reading stops at the measured size. A change, or an end
//! before that size, is an error: the streamed response is then cut off,
//! so the client sees an incomplete message (D1) instead of a complete
//! answer made of the old content and the new, or a short one.

use std::fs;
use std::io::{self, Read};
use std::time::SystemTime;

/// What says a file is still the one measured: its size, its modification
/// time and, on Unix, its change time (which every write moves too, and
/// which no one can set back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Measure {
    len: u64,
    modified: Option<SystemTime>,
    #[cfg(unix)]
    changed: (i64, i64),
}

impl Measure {
    /// The measure of `metadata`.
    pub(super) fn of(metadata: &fs::Metadata) -> Measure {
        Measure {
            len: metadata.len(),
            modified: metadata.modified().ok(),
            #[cfg(unix)]
            changed: {
                use std::os::unix::fs::MetadataExt;
                (metadata.ctime(), metadata.ctime_nsec())
            },
        }
    }

    /// Whether the open `file` is still as measured.
    pub(super) fn holds_for(&self, file: &fs::File) -> io::Result<bool> {
        Ok(Measure::of(&file.metadata()?) == *self)
    }
}

/// The error of a file that changed while it was read.
pub(super) fn changed() -> io::Error {
    io::Error::other(Changed)
}

/// What [`changed`] carries, so that a reader can tell a change from a
/// failure to read.
#[derive(Debug)]
struct Changed;

impl std::fmt::Display for Changed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the file changed while it was sent; the answer is cut off")
    }
}

impl std::error::Error for Changed {}

/// Whether `error` says the file changed while it was read ([`changed`]).
pub(super) fn is_change(error: &io::Error) -> bool {
    error.get_ref().is_some_and(|inner| inner.is::<Changed>())
}

/// An open file read up to its measured size, as long as it stays as
/// measured.
#[derive(Debug)]
pub(super) struct Steady {
    file: fs::File,
    measure: Measure,
    left: u64,
}

impl Steady {
    /// Reads `file` as `metadata` measured it.
    pub(super) fn new(file: fs::File, metadata: &fs::Metadata) -> Steady {
        let measure = Measure::of(metadata);
        Steady {
            file,
            left: measure.len,
            measure,
        }
    }
}

impl Steady {
    /// The file's size as measured: all a whole read gives.
    pub(super) fn measured_len(&self) -> u64 {
        self.measure.len
    }
}

impl Read for Steady {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 || buf.is_empty() {
            return Ok(0);
        }
        let want = buf.len().min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.file.read(&mut buf[..want])?;
        // Shorter than measured, or changed since: what was read may mix
        // two versions of the file.
        if n == 0 || !self.measure.holds_for(&self.file)? {
            return Err(changed());
        }
        self.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, Write};

    fn file_with(content: &[u8]) -> (tempfile::NamedTempFile, fs::File, fs::Metadata) {
        let mut temp = tempfile::NamedTempFile::new().expect("temp");
        temp.write_all(content).expect("write");
        temp.flush().expect("flush");
        let file = fs::File::open(temp.path()).expect("open");
        let metadata = file.metadata().expect("stat");
        (temp, file, metadata)
    }

    #[test]
    fn an_unchanged_file_reads_whole() {
        let (_temp, file, metadata) = file_with(b"hello, steady world");
        let mut read = String::new();
        Steady::new(file, &metadata)
            .read_to_string(&mut read)
            .expect("read");
        assert_eq!(read, "hello, steady world");
    }

    #[test]
    fn a_file_rewritten_or_truncated_while_read_is_an_error() {
        let (temp, file, metadata) = file_with(&[b'a'; 100_000]);
        let mut steady = Steady::new(file, &metadata);
        let mut buf = [0u8; 1000];
        assert_eq!(steady.read(&mut buf).expect("first piece"), 1000);
        // Rewritten in place, same size: the times tell.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut writer = fs::OpenOptions::new()
            .write(true)
            .open(temp.path())
            .expect("open");
        writer.write_all(&[b'b'; 100_000]).expect("rewrite");
        writer.flush().expect("flush");
        let error = steady.read(&mut buf).expect_err("changed");
        assert!(error.to_string().contains("changed"), "{error}");
        assert!(is_change(&error));

        let (temp, file, metadata) = file_with(&[b'a'; 100_000]);
        let mut steady = Steady::new(file, &metadata);
        let mut writer = fs::OpenOptions::new()
            .write(true)
            .open(temp.path())
            .expect("open");
        writer.set_len(10).expect("truncate");
        writer.rewind().expect("rewind");
        let mut all = Vec::new();
        assert!(
            steady.read_to_end(&mut all).is_err(),
            "a short file is not complete"
        );
    }
}
