//! [`Upload`]: a request's content spooled to a temporary file, complete,
//! as its handler gets it: read from the start as often as wanted, and
//! kept by putting it in place atomically (linked where it can be, else
//! copied), or freed when dropped.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use super::anonymous::under_fresh_name;
use super::budget::Reservation;

/// The decoded content of a request too large to hold in memory, spooled
/// to a temporary file while it arrived (D19), complete and valid. The file
/// has no name (on Linux): it is freed when the `Upload` is dropped,
/// unless [`persist`](Self::persist) gave it one. Its bytes count against
/// the server's spool budget ([`SpoolOptions::max_total`]) until then.
///
/// [`SpoolOptions::max_total`]: super::SpoolOptions::max_total
#[derive(Debug)]
pub struct Upload {
    pub(super) file: File,
    pub(super) len: u64,
    /// Whether the file may be linked into place: made with `O_TMPFILE`.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) linkable: bool,
    /// Whether the content is within the memory limit: spooled only because
    /// the server's memory for content was in use.
    pub(super) small: bool,
    pub(super) _reserved: Reservation,
}

impl Upload {
    /// The content's size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the content is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the content is within [`SpoolOptions::memory_limit`], and
    /// was spooled only because the server's memory for content
    /// ([`SpoolOptions::max_memory`]) was in use.
    ///
    /// [`SpoolOptions::memory_limit`]: super::SpoolOptions::memory_limit
    /// [`SpoolOptions::max_memory`]: super::SpoolOptions::max_memory
    pub(crate) fn is_small(&self) -> bool {
        self.small
    }

    /// Reads the content from the start. Each reader reads on its own
    /// (on Unix; elsewhere the readers share one position).
    pub fn reader(&self) -> io::Result<Box<dyn Read + Send>> {
        let file = self.file.try_clone()?;
        #[cfg(unix)]
        return Ok(Box::new(ReadAt { file, at: 0 }));
        #[cfg(not(unix))]
        {
            let mut file = file;
            file.seek(SeekFrom::Start(0))?;
            Ok(Box::new(file))
        }
    }

    /// Puts the content at `to`, replacing what is there, atomically: on
    /// Linux, when `to` is on the spool's file system, the file is linked
    /// under a fresh unpredictable name beside `to`, then renamed over it
    /// (no copy); otherwise it is copied to such a file, synced, then
    /// renamed. Either way the file gets the permissions a new file gets
    /// (`0666` less the umask, as [`File::create`]), whatever the size,
    /// and is on disk before it has a name. The temporary name exists only
    /// between the link (or the copy) and the rename.
    pub fn persist(mut self, to: &Path) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        if self.linkable {
            // A crash after the rename must not leave the name on a file
            // whose content never reached the disk.
            self.file.sync_all()?;
            let mut linked = false;
            let placed = beside(to, |temp| {
                link(&self.file, temp)?;
                linked = true;
                Ok(())
            });
            // Linking is impossible (another file system, no `/proc`):
            // copied below, where a fault of `to`'s folder shows again.
            if placed.is_ok() || linked {
                return placed;
            }
        }
        self.file.seek(SeekFrom::Start(0))?;
        let source = &mut self.file;
        beside(to, |temp| {
            let mut copy = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(temp)?;
            let copied = io::copy(source, &mut copy).and_then(|_| copy.sync_all());
            if copied.is_err() {
                let _ = std::fs::remove_file(temp);
            }
            copied
        })
    }
}

/// A reader of a file at its own position, whatever other readers of the
/// same open file do.
#[cfg(unix)]
struct ReadAt {
    file: File,
    at: u64,
}

#[cfg(unix)]
impl Read for ReadAt {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = std::os::unix::fs::FileExt::read_at(&self.file, buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// Links the anonymous `file` (made with `O_TMPFILE`) at `temp`, through
/// its `/proc` entry: unlike `AT_EMPTY_PATH`, this needs no privilege.
#[cfg(target_os = "linux")]
fn link(file: &File, temp: &Path) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let proc = format!("/proc/self/fd/{}", file.as_raw_fd());
    rustix::fs::linkat(
        rustix::fs::CWD,
        proc.as_str(),
        rustix::fs::CWD,
        temp,
        rustix::fs::AtFlags::SYMLINK_FOLLOW,
    )
    .map_err(io::Error::from)
}

/// Makes a file under a fresh, unpredictable name in `to`'s folder with
/// `make`, which must create it exclusively and leave nothing when it
/// fails, then renames it over `to` (removed if that fails).
fn beside(to: &Path, make: impl FnMut(&Path) -> io::Result<()>) -> io::Result<()> {
    let folder = match to.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("."),
    };
    let (temp, ()) = under_fresh_name(folder, make)?;
    let renamed = std::fs::rename(&temp, to);
    if renamed.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    renamed
}
