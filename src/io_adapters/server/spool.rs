//! Where a streamed request's content goes while it arrives (D19): memory
//! up to a threshold, then a temporary file; deleted unless the handler
//! keeps it.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Where the servers spool request content (D19).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpoolOptions {
    /// Content up to this many bytes is held in memory, and the handler
    /// sees it in the request's body as usual ([`Handler::handle`]); larger
    /// content goes to a temporary file, and the handler gets it as an
    /// [`Upload`] ([`Handler::respond`]). 1 MiB by default.
    ///
    /// [`Handler::handle`]: super::Handler::handle
    /// [`Handler::respond`]: super::Handler::respond
    pub memory_limit: usize,
    /// The folder temporary files are made in; `None`: the system's
    /// ([`std::env::temp_dir`]). To keep an upload without copying it
    /// ([`Upload::persist`]), make it on the same file system as where it
    /// goes.
    pub folder: Option<PathBuf>,
}

impl Default for SpoolOptions {
    fn default() -> Self {
        SpoolOptions {
            memory_limit: 1 << 20,
            folder: None,
        }
    }
}

impl SpoolOptions {
    /// Sets the memory threshold (builder style).
    pub fn with_memory_limit(mut self, bytes: usize) -> Self {
        self.memory_limit = bytes;
        self
    }

    /// Sets the folder of temporary files (builder style).
    pub fn with_folder(mut self, folder: impl Into<PathBuf>) -> Self {
        self.folder = Some(folder.into());
        self
    }
}

/// The decoded content of a request too large to hold in memory, spooled
/// to a temporary file while it arrived (D19), complete and valid. The file
/// is deleted when the `Upload` is dropped, unless
/// [`persist`](Self::persist) moved it into place.
#[derive(Debug)]
pub struct Upload {
    path: PathBuf,
    len: u64,
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

    /// Where the temporary file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the content from the start.
    pub fn reader(&self) -> io::Result<Box<dyn Read + Send>> {
        todo!("spool")
    }

    /// Moves the content to `to`, replacing what is there, atomically when
    /// `to` is on the spool's file system (a rename); otherwise copied to a
    /// temporary file beside `to`, then renamed.
    pub fn persist(self, to: &Path) -> io::Result<()> {
        let _ = to;
        todo!("spool")
    }
}
