//! [`SpoolOptions`]: where the servers spool request content (D19), how
//! much of it they hold in memory and on disk at once, and the budget the
//! clones of one options value share.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::budget::Budget;

/// Where the servers spool request content (D19), and how much of it they
/// may hold at once, in memory and on disk.
///
/// Clones share both budgets ([`max_memory`](Self::max_memory),
/// [`max_total`](Self::max_total)): the server clones its options into
/// every connection, so the bounds are server-wide. Two options made apart
/// ([`SpoolOptions::default`] twice) count apart. Equality compares the
/// settings, not the bytes held at the moment.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SpoolOptions {
    /// Content up to this many bytes is held in memory, and the handler
    /// sees it in the request's body as usual; larger content goes to a
    /// temporary file, and the handler gets it as an [`Upload`] beside the
    /// request ([`Incoming::upload`]). 1 MiB by default.
    ///
    /// Content within it may still go to a file when the server's memory
    /// for content is in use ([`max_memory`](Self::max_memory)).
    ///
    /// [`Incoming::upload`]: super::super::Incoming::upload
    /// [`Upload`]: super::Upload
    pub memory_limit: usize,
    /// The most bytes of request content all the connections sharing
    /// these options hold in memory at once: content within
    /// [`memory_limit`](Self::memory_limit) counts from its first byte
    /// until its handler has returned (for a service on tokio, until its
    /// answer is given). 64 MiB by default: as many contents of the
    /// default memory limit as handlers run at once by default
    /// ([`DEFAULT_MAX_HANDLERS`](super::super::DEFAULT_MAX_HANDLERS)). Without it,
    /// the bound would be the memory limit times the connection limit (10
    /// GiB with the defaults, D3).
    ///
    /// Past it, content goes to a temporary file as large content does,
    /// within [`max_total`](Self::max_total) (where its `503` says that
    /// both were short), and the handler gets it as an [`Upload`]. A
    /// handler that takes requests whole still gets it in the request:
    /// [`Incoming::into_request`] reads such content back while the
    /// handler runs, in one of the server's handler places
    /// ([`ServerOptions::max_handlers`](super::super::ServerOptions::max_handlers)),
    /// which bound that memory instead.
    ///
    /// [`Incoming::into_request`]: super::super::Incoming::into_request
    /// [`Upload`]: super::Upload
    pub max_memory: u64,
    /// The folder temporary files are made in; `None`: the system's
    /// ([`std::env::temp_dir`]). To keep an upload without copying it
    /// ([`Upload::persist`]), make it on the same file system as where it
    /// goes. On Linux the files have no name there (`O_TMPFILE`): no path
    /// reaches them, and a crash leaves nothing.
    ///
    /// [`Upload::persist`]: super::Upload::persist
    pub folder: Option<PathBuf>,
    /// The most bytes all the temporary files of the spools sharing these
    /// options hold at once (content held in memory is not counted: the
    /// memory limit bounds it per exchange). 4 GiB by default: four uploads
    /// as large as the servers take by default (1 GiB, D19) at once, or
    /// many smaller ones; without it the bound would be the content limit
    /// times the connection limit (D3), far beyond most disks.
    ///
    /// The budget is shared fairly: while it has room, any upload takes
    /// what it needs (one upload alone may have all of it); when it is
    /// short, each upload under way is entitled to an even share of what
    /// the uploads under way may hold (the budget less the uploads already
    /// handed to handlers). An upload within its share takes its room back
    /// from one past its share, the one whose content last arrived longest
    /// ago first: that upload is stopped, its file freed at once, and it is
    /// refused (`503 Service Unavailable`) when its message ends. An upload
    /// that would pass its share when the budget is short is refused the
    /// same way. So however long they stay, a few uploads never keep a new
    /// one out: with `n` under way, a new one always has room for a share
    /// of `1/(n+1)`.
    pub max_total: u64,
    /// The bytes the temporary files hold now, and the uploads being
    /// spooled, shared by the clones.
    pub(super) budget: Arc<Budget>,
}

impl Default for SpoolOptions {
    fn default() -> Self {
        SpoolOptions {
            memory_limit: 1 << 20,
            max_memory: DEFAULT_MAX_MEMORY,
            folder: None,
            max_total: DEFAULT_MAX_TOTAL,
            budget: Arc::default(),
        }
    }
}

/// [`SpoolOptions::max_total`] by default: four of the largest uploads
/// taken by default.
const DEFAULT_MAX_TOTAL: u64 = 4 << 30;

/// [`SpoolOptions::max_memory`] by default: as many contents of the
/// default memory limit as handlers run at once by default.
const DEFAULT_MAX_MEMORY: u64 = 64 << 20;

impl PartialEq for SpoolOptions {
    fn eq(&self, other: &Self) -> bool {
        self.memory_limit == other.memory_limit
            && self.max_memory == other.max_memory
            && self.folder == other.folder
            && self.max_total == other.max_total
    }
}

impl Eq for SpoolOptions {}

impl SpoolOptions {
    /// Sets the memory threshold (builder style).
    pub fn with_memory_limit(mut self, bytes: usize) -> Self {
        self.memory_limit = bytes;
        self
    }

    /// Sets the most bytes of content held in memory at once, all
    /// connections sharing these options together (builder style).
    pub fn with_max_memory(mut self, bytes: u64) -> Self {
        self.max_memory = bytes;
        self
    }

    /// Sets the folder of temporary files (builder style).
    pub fn with_folder(mut self, folder: impl Into<PathBuf>) -> Self {
        self.folder = Some(folder.into());
        self
    }

    /// Sets the most bytes the temporary files hold at once, all spools
    /// sharing these options together (builder style).
    pub fn with_max_total(mut self, bytes: u64) -> Self {
        self.max_total = bytes;
        self
    }

    /// The bytes the temporary files of the spools sharing these options
    /// hold now: uploads under way, and those a handler has not yet kept
    /// or dropped.
    pub fn spooled_bytes(&self) -> u64 {
        self.budget.used.load(Ordering::Acquire)
    }

    /// The bytes of content the connections sharing these options hold in
    /// memory now ([`max_memory`](Self::max_memory)).
    pub fn held_bytes(&self) -> u64 {
        self.budget.memory.load(Ordering::Acquire)
    }

    pub(super) fn folder(&self) -> PathBuf {
        self.folder.clone().unwrap_or_else(std::env::temp_dir)
    }
}
