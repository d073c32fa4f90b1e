//! A file sent as it was measured: each read checks, with one `fstat`,
//! that the file's size and times are still those measured when it was
//! opened, and reading stops at the measured size. A change, or an end
//! before that size, is an error: the streamed response is then cut off,
//! so the client sees an incomplete message (D1) instead of a complete
//! answer made of the old content and the new, or a short one. Reads are
//! positioned (on Unix), so that a second reader of the same open file
//! ([`Steady::reading_again`]) reads it through on its own.

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
#[cfg(any(target_os = "linux", test))]
pub(super) fn is_change(error: &io::Error) -> bool {
    error.get_ref().is_some_and(|inner| inner.is::<Changed>())
}

/// An open file read from its start up to its measured size, as long as
/// it stays as measured.
#[derive(Debug)]
pub(super) struct Steady {
    file: fs::File,
    measure: Measure,
    /// Where the next read starts.
    at: u64,
}

impl Steady {
    /// Reads `file` as `metadata` measured it.
    pub(super) fn new(file: fs::File, metadata: &fs::Metadata) -> Steady {
        Steady {
            file,
            measure: Measure::of(metadata),
            at: 0,
        }
    }

    /// The file's size as measured: all a whole read gives.
    pub(super) fn measured_len(&self) -> u64 {
        self.measure.len
    }

    /// A second reader of the same open file, from its start, held to the
    /// same measure; the two read apart (on Unix, where reads are
    /// positioned).
    #[cfg(target_os = "linux")]
    pub(super) fn reading_again(&self) -> io::Result<Steady> {
        Ok(Steady {
            file: self.file.try_clone()?,
            measure: self.measure.clone(),
            at: 0,
        })
    }
}

impl Read for Steady {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.measure.len.saturating_sub(self.at);
        if left == 0 || buf.is_empty() {
            return Ok(0);
        }
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = read_at(&self.file, &mut buf[..want], self.at)?;
        // Shorter than measured, or changed since: what was read may mix
        // two versions of the file.
        if n == 0 || !self.measure.holds_for(&self.file)? {
            return Err(changed());
        }
        self.at += n as u64;
        Ok(n)
    }
}

/// Reads `file` at `at`, leaving its offset alone.
#[cfg(unix)]
fn read_at(file: &fs::File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, at)
}

/// Reads `file` where its offset is: a `Steady` there is its file's only
/// reader, from the start.
#[cfg(not(unix))]
fn read_at(mut file: &fs::File, buf: &mut [u8], _at: u64) -> io::Result<usize> {
    file.read(buf)
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

    #[cfg(target_os = "linux")]
    #[test]
    fn a_second_reader_reads_the_file_through_on_its_own() {
        let content: Vec<u8> = (0..50_000u32).map(|n| (n % 251) as u8).collect();
        let (_temp, mut file, metadata) = file_with(&content);
        // The offset the first reader is given with does not matter.
        file.seek(io::SeekFrom::Start(123)).expect("seek");
        let mut first = Steady::new(file, &metadata);
        let mut head = vec![0u8; 20_000];
        first.read_exact(&mut head).expect("the first part");
        let mut second = first.reading_again().expect("a second reader");
        let mut whole = Vec::new();
        second.read_to_end(&mut whole).expect("read through");
        let mut rest = Vec::new();
        first.read_to_end(&mut rest).expect("the rest");
        assert!(whole == content, "the second reads it all, from the start");
        head.extend_from_slice(&rest);
        assert!(head == content, "the first goes on where it was");
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
