//! The dataset lock as the commands take it (`aorta_ingest::lock`): the commands that write
//! tables into the dataset (`overlap`, `collectives`, `perf`, `run`) hold it exclusively from
//! their first read to their last write, the readers (`report`, `compare`) shared, so none
//! reads an ingest's commit half done. A dataset the process cannot write is still read:
//! its tables are computed in memory, and a note says they were not saved.

use std::path::Path;

use anyhow::Result;
use aorta_ingest::lock::{self, Acquired, DatasetLock, Mode};
use aorta_transform::dataset;

/// May this command write into the dataset?
pub(crate) enum Access {
    /// Yes, under this lock (held until the command drops it).
    Write { _lock: DatasetLock },
    /// No: a read-only file system or no permission.
    ReadOnly,
}

impl Access {
    pub(crate) fn writable(&self) -> bool {
        matches!(self, Access::Write { .. })
    }
}

/// Locks `root` for `command`, which writes tables into it; `ReadOnly` when it cannot.
pub(crate) fn for_write(root: &Path, command: &str) -> Result<Access> {
    Ok(match take(root, Mode::Exclusive, command)? {
        Acquired::Locked(l) => Access::Write { _lock: l },
        Acquired::ReadOnly(_) => Access::ReadOnly,
    })
}

/// Locks `root` shared for `command`, which only reads it (no lock on a read-only dataset:
/// no writer can hold one there).
pub(crate) fn for_read(root: &Path, command: &str) -> Result<Option<DatasetLock>> {
    Ok(match take(root, Mode::Shared, command)? {
        Acquired::Locked(l) => Some(l),
        Acquired::ReadOnly(_) => None,
    })
}

/// The dataset checked first where it is not one (a missing directory gets "not an aorta
/// dataset", not a lock error), then locked, a commit a killed ingest left finished (by a
/// writer), then checked whole (damaged parts).
fn take(root: &Path, mode: Mode, command: &str) -> Result<Acquired> {
    if !root.join(aorta_ingest::dataset::MANIFEST).is_file() {
        dataset::check(root)?;
    }
    let got = lock::acquire(root, mode, command, &mut lock::say_waiting(root))?;
    if matches!(got, Acquired::Locked(_)) && mode == Mode::Exclusive {
        aorta_ingest::commit::recover(root)?;
    }
    dataset::check(root)?;
    Ok(got)
}

/// The note a command prints when it could not save what it computed.
pub(crate) fn not_saved(root: &Path, what: &str) {
    eprintln!(
        "aorta: note: {} is read-only: the {what} were computed in memory and not saved",
        root.display()
    );
}
