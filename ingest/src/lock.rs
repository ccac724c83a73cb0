//! One writer at a time per dataset, and no reader in the middle of a commit.
//!
//! Without it two `aorta ingest` runs into one directory would each load the manifest, each
//! commit, and the second manifest would drop the first's entries (their parts left behind,
//! unlisted); `aorta overlap` could swap its tables in while an ingest moves parts. A writer
//! (`ingest`, `overlap`, `collectives`, `perf`, `run`) holds an exclusive lock from its first
//! read of the dataset to its last write; a reader (`report`, `compare`) a shared one.
//!
//! The lock is `flock(2)` on the dataset directory itself, so a reader creates nothing and a
//! read-only dataset can be locked too. A writer records itself (pid, host, start time,
//! command) in `<dataset>/.aorta.lock` for the message the next process prints, and removes
//! the file on release. The kernel drops a `flock` when its process dies, even by SIGKILL,
//! so a lock never blocks for a dead process; a `.aorta.lock` that still names a holder when
//! a writer gets the lock was left by a process that died (its pid is gone), and is reported
//! as such.
//!
//! A waiting process prints one line saying who holds the lock and waits up to
//! `AORTA_LOCK_WAIT` seconds (default 300; 0 fails at once), then fails with the holder named.

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{IngestError, Result};

/// The lock file's name inside the dataset (hidden: walks and table globs skip it).
pub const LOCK_FILE: &str = ".aorta.lock";

/// How long a process waits for the lock by default, in seconds (`AORTA_LOCK_WAIT`).
pub(crate) const DEFAULT_WAIT_S: u64 = 300;

/// Who holds (or held) a dataset's lock, as its lock file records it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Holder {
    pub(crate) pid: u32,
    pub(crate) host: String,
    /// Seconds since the Unix epoch.
    pub(crate) started: u64,
    pub(crate) command: String,
}

impl Holder {
    fn me(command: &str) -> Holder {
        Holder {
            pid: std::process::id(),
            host: hostname(),
            started: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            command: command.to_string(),
        }
    }

    /// `pid 123 (aorta ingest) on host h, started 2026-… (12 s ago)`.
    pub fn describe(&self) -> String {
        let now = Holder::me("").started;
        format!(
            "pid {} ({}) on host {}, started {} s ago",
            self.pid,
            self.command,
            self.host,
            now.saturating_sub(self.started)
        )
    }

    /// Whether the process is gone (only known for this host).
    pub fn is_dead(&self) -> bool {
        self.host == hostname() && !pid_alive(self.pid)
    }
}

/// Exclusive (a writer) or shared (a reader).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One writer at a time, and no readers while it writes.
    Exclusive,
    /// Any number of readers, no writer.
    Shared,
}

/// A held lock; released (and a writer's record removed) on drop.
#[derive(Debug)]
pub struct DatasetLock {
    /// The dataset directory, open: closing it releases the lock.
    _dir: File,
    record: PathBuf,
    mode: Mode,
    /// The holder a writer found recorded: a process that died holding the lock.
    pub(crate) stale: Option<Holder>,
}

impl Drop for DatasetLock {
    fn drop(&mut self) {
        // Removed while still locked; closing the directory after this releases the lock.
        if self.mode == Mode::Exclusive {
            let _ = std::fs::remove_file(&self.record);
        }
    }
}

/// What `acquire` found.
#[derive(Debug)]
pub enum Acquired {
    /// The lock is held until the guard is dropped.
    Locked(DatasetLock),
    /// A writer's lock on a dataset it cannot write (read-only file system, no permission):
    /// no other writer can change it either, so it is read without a lock, and not written.
    ReadOnly(std::io::Error),
}

/// Locks the dataset at `dir` (which must exist) for `command`, waiting up to
/// `AORTA_LOCK_WAIT` seconds; `on_wait` is called once, with the holder, when it has to wait.
pub fn acquire(
    dir: &Path,
    mode: Mode,
    command: &str,
    on_wait: &mut dyn FnMut(&Holder, Duration),
) -> Result<Acquired> {
    let record = dir.join(LOCK_FILE);
    let handle = File::open(dir).map_err(|e| IngestError::io(dir, e))?;
    let wait = wait_limit();
    let t0 = Instant::now();
    let mut told = false;
    loop {
        match try_flock(&handle, mode) {
            Ok(true) => break,
            Ok(false) => {
                let holder = read_holder(&record);
                let who = holder
                    .as_ref()
                    .map_or_else(|| "another aorta process".to_string(), |h| h.describe());
                if t0.elapsed() >= wait {
                    return Err(IngestError::file(
                        dir,
                        format!(
                            "dataset is locked by {who}; waited {} s (AORTA_LOCK_WAIT); try again when it is done",
                            wait.as_secs()
                        ),
                    ));
                }
                if !told {
                    if let Some(h) = &holder {
                        on_wait(h, wait);
                        told = true;
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            // No flock on this file system (some network mounts): go on unlocked.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOLCK | libc::EOPNOTSUPP)) => break,
            Err(e) => return Err(IngestError::io(dir, e)),
        }
    }
    let mut lock = DatasetLock {
        _dir: handle,
        record,
        mode,
        stale: None,
    };
    if mode == Mode::Exclusive {
        lock.stale = read_holder(&lock.record);
        if let Err(e) = write_holder(&lock.record, &Holder::me(command)) {
            // Not ours to remove: keep what a dead holder left (and do not report it).
            lock.mode = Mode::Shared;
            if is_read_only(&e) {
                return Ok(Acquired::ReadOnly(e));
            }
            return Err(IngestError::io(&lock.record, e));
        }
    }
    Ok(Acquired::Locked(lock))
}

/// `acquire` for a command that must write: a read-only dataset is an error.
pub fn acquire_for_write(
    dir: &Path,
    command: &str,
    on_wait: &mut dyn FnMut(&Holder, Duration),
) -> Result<DatasetLock> {
    match acquire(dir, Mode::Exclusive, command, on_wait)? {
        Acquired::Locked(l) => Ok(l),
        Acquired::ReadOnly(e) => Err(IngestError::io(&dir.join(LOCK_FILE), e)),
    }
}

/// Prints the one line a waiting process shows.
pub fn say_waiting(dir: &Path) -> impl FnMut(&Holder, Duration) + '_ {
    move |h: &Holder, wait: Duration| {
        eprintln!(
            "aorta: waiting up to {} s for {}: locked by {}",
            wait.as_secs(),
            dir.display(),
            h.describe()
        );
    }
}

fn wait_limit() -> Duration {
    let s = std::env::var("AORTA_LOCK_WAIT")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_WAIT_S);
    Duration::from_secs(s)
}

fn is_read_only(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EROFS | libc::EACCES | libc::EPERM)
    )
}

/// `flock` without blocking: `Ok(false)` when another process holds it.
fn try_flock(file: &File, mode: Mode) -> std::io::Result<bool> {
    let op = match mode {
        Mode::Exclusive => libc::LOCK_EX,
        Mode::Shared => libc::LOCK_SH,
    } | libc::LOCK_NB;
    // SAFETY: `flock` takes a file descriptor and flags only; `file` keeps the descriptor
    // open for the duration of the call.
    let r = unsafe { libc::flock(file.as_raw_fd(), op) };
    if r == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

fn read_holder(record: &Path) -> Option<Holder> {
    serde_json::from_slice(&std::fs::read(record).ok()?).ok()
}

/// Records the holder through a temporary file and a rename, so a waiter never reads half of
/// it.
fn write_holder(record: &Path, h: &Holder) -> std::io::Result<()> {
    let text = serde_json::to_vec(h).map_err(std::io::Error::other)?;
    crate::atomic::write_bytes(record, &text)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// Whether a process with this pid exists (signal 0 checks without sending).
pub(crate) fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 sends nothing; `kill` only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(dir: &Path, mode: Mode) -> DatasetLock {
        match acquire(dir, mode, "test", &mut |_, _| {}).unwrap() {
            Acquired::Locked(l) => l,
            Acquired::ReadOnly(e) => panic!("{e}"),
        }
    }

    fn try_dir(dir: &Path, mode: Mode) -> bool {
        try_flock(&File::open(dir).unwrap(), mode).unwrap()
    }

    /// An exclusive lock records its holder, excludes a second one (a second open of the
    /// directory conflicts as another process's would), and its record goes on release.
    #[test]
    fn exclusive_excludes_and_records_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let l = lock(dir.path(), Mode::Exclusive);
        let h = read_holder(&dir.path().join(LOCK_FILE)).unwrap();
        assert_eq!((h.pid, h.command.as_str()), (std::process::id(), "test"));
        assert!(!try_dir(dir.path(), Mode::Shared));
        drop(l);
        assert!(!dir.path().join(LOCK_FILE).exists());
        assert!(try_dir(dir.path(), Mode::Exclusive), "released");
    }

    /// Readers share, write nothing, and keep a writer out.
    #[test]
    fn shared_locks_share_and_exclude_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let a = lock(dir.path(), Mode::Shared);
        let _b = lock(dir.path(), Mode::Shared);
        assert!(!try_dir(dir.path(), Mode::Exclusive));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        drop(a);
    }

    /// A lock file naming a process that is gone is taken over and reported.
    #[test]
    fn a_dead_holder_is_reported_as_stale() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let h = Holder {
            pid: dead,
            host: hostname(),
            started: 1,
            command: "aorta ingest".into(),
        };
        assert!(h.is_dead());
        std::fs::write(
            dir.path().join(LOCK_FILE),
            serde_json::to_string(&h).unwrap(),
        )
        .unwrap();
        let l = lock(dir.path(), Mode::Exclusive);
        assert_eq!(l.stale.as_ref(), Some(&h));
        assert!(!Holder::me("x").is_dead());
    }
}
