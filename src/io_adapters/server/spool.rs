//! Where a streamed request's content goes while it arrives (D19): memory
//! up to a threshold, then a temporary file; deleted unless the handler
//! keeps it.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

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

    fn folder(&self) -> PathBuf {
        self.folder.clone().unwrap_or_else(std::env::temp_dir)
    }
}

/// The decoded content of a request too large to hold in memory, spooled
/// to a temporary file while it arrived (D19), complete and valid. The file
/// is deleted when the `Upload` is dropped, unless
/// [`persist`](Self::persist) moved it into place.
#[derive(Debug)]
pub struct Upload {
    file: NamedTempFile,
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
        self.file.path()
    }

    /// Reads the content from the start.
    pub fn reader(&self) -> io::Result<Box<dyn Read + Send>> {
        let mut file = self.file.reopen()?;
        file.seek(SeekFrom::Start(0))?;
        Ok(Box::new(file))
    }

    /// Moves the content to `to`, replacing what is there: atomically when
    /// `to` is on the spool's file system (a rename); otherwise copied to a
    /// temporary file beside `to`, synced, then renamed.
    pub fn persist(self, to: &Path) -> io::Result<()> {
        match self.file.persist(to) {
            Ok(_) => Ok(()),
            Err(e) if e.error.kind() == io::ErrorKind::CrossesDevices => {
                let from = e.file;
                let folder = to.parent().unwrap_or(Path::new("."));
                let mut copy = NamedTempFile::new_in(folder)?;
                let mut source = from.reopen()?;
                io::copy(&mut source, copy.as_file_mut())?;
                copy.as_file().sync_all()?;
                copy.persist(to).map(|_| ()).map_err(|e| e.error)
            }
            Err(e) => Err(e.error),
        }
    }
}

/// Content being spooled for one exchange.
#[derive(Debug)]
pub(crate) struct Spool {
    memory: Vec<u8>,
    file: Option<NamedTempFile>,
    len: u64,
    /// The first write that failed: the upload cannot be kept.
    failed: Option<io::Error>,
}

impl Spool {
    pub(crate) fn new() -> Spool {
        Spool {
            memory: Vec::new(),
            file: None,
            len: 0,
            failed: None,
        }
    }

    /// Takes the next piece: in memory up to the limit, then into a
    /// temporary file (the memory so far moved there first). A failed write
    /// is kept, and the rest is dropped.
    pub(crate) fn write(&mut self, data: &[u8], options: &SpoolOptions) {
        if self.failed.is_some() {
            return;
        }
        self.len += data.len() as u64;
        if self.file.is_none() && self.memory.len() + data.len() <= options.memory_limit {
            self.memory.extend_from_slice(data);
            return;
        }
        let result = (|| {
            if self.file.is_none() {
                let mut file = tempfile::Builder::new()
                    .prefix(".jsontp-upload-")
                    .tempfile_in(options.folder())?;
                file.write_all(&self.memory)?;
                self.memory = Vec::new();
                self.file = Some(file);
            }
            match &mut self.file {
                Some(file) => file.write_all(data),
                None => Ok(()),
            }
        })();
        if let Err(error) = result {
            self.failed = Some(error);
            self.memory = Vec::new();
            self.file = None;
        }
    }

    /// The content, whole: in memory, or as an upload in its file; the
    /// error of a write that failed.
    pub(crate) fn finish(self) -> Result<Spooled, io::Error> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        match self.file {
            None => Ok(Spooled::Memory(self.memory)),
            Some(mut file) => {
                file.flush()?;
                Ok(Spooled::File(Upload { file, len: self.len }))
            }
        }
    }
}

/// What a spool holds once the content is complete.
#[derive(Debug)]
pub(crate) enum Spooled {
    Memory(Vec<u8>),
    File(Upload),
}
