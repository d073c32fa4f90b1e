//! The spool's temporary files, made so that nothing but their handle
//! reaches them, and the fresh unpredictable names the spool uses.
//!
//! The file has no name while the content arrives: on Linux it is made
//! with `O_TMPFILE` in the spool folder, so no path reaches it (no listing
//! shows it, nothing can read, replace or delete it) and a process killed
//! mid-upload leaves nothing behind, since the kernel frees a file without
//! a name when its last descriptor closes. [`Upload::persist`] gives it a
//! name only once it is complete, by linking it into place.
//!
//! Elsewhere (or on a file system without `O_TMPFILE`) the file is created
//! under an unpredictable name and unlinked at once, before any byte is
//! written: for that instant an empty file is visible in the spool folder,
//! and a process killed within it leaves that empty file. Such a file
//! cannot be linked again, so persisting it copies it.
//!
//! [`Upload::persist`]: super::Upload::persist

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Runs `make` on a fresh, unpredictable path in `folder` until it creates
/// its file there: a name that is taken is skipped for another.
pub(super) fn under_fresh_name<T>(
    folder: &Path,
    mut make: impl FnMut(&Path) -> io::Result<T>,
) -> io::Result<(PathBuf, T)> {
    const ATTEMPTS: usize = 8;
    for _ in 0..ATTEMPTS {
        let path = folder.join(temporary_name());
        match make(&path) {
            Ok(made) => return Ok((path, made)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free name for a temporary file",
    ))
}

/// A name for a temporary file that no client can predict: 64 bits from
/// std's `RandomState`, whose keys come from the operating system's random
/// source, over a counter (so two names in one process never repeat).
fn temporary_name() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    format!(".jsontp-upload-{:016x}.tmp", hasher.finish())
}

/// A file without a name in `folder`, and whether it can be linked: made
/// with `O_TMPFILE` where the system and the file system have it, with the
/// permissions a new file gets, so that linking it into place gives those;
/// else created under an unpredictable name and unlinked at once.
fn anonymous_file(folder: &Path) -> io::Result<(File, bool)> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Not with `O_EXCL`, which would forbid linking it later.
        let made = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .mode(0o666)
            .custom_flags(rustix::fs::OFlags::TMPFILE.bits() as i32)
            .open(folder);
        // Kernels and file systems without it refuse in several ways; the
        // portable way answers for any failure, the folder's own included.
        if let Ok(file) = made {
            return Ok((file, true));
        }
    }
    unlinked_file(folder).map(|file| (file, false))
}

/// A file created exclusively under an unpredictable name in `folder`
/// and unlinked at once: only this handle reaches it, and nothing is left
/// when the process ends, however it ends.
pub(super) fn unlinked_file(folder: &Path) -> io::Result<File> {
    let (path, file) = under_fresh_name(folder, |path| {
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options.open(path)
    })?;
    std::fs::remove_file(path)?;
    Ok(file)
}

/// A new anonymous file in `folder` holding `memory` (emptied) then
/// `data`.
pub(super) fn open_with(folder: &Path, memory: &mut Vec<u8>, data: &[u8]) -> io::Result<(File, bool)> {
    use std::io::Write;
    let (mut file, linkable) = anonymous_file(folder)?;
    file.write_all(memory)?;
    *memory = Vec::new();
    file.write_all(data)?;
    Ok((file, linkable))
}
