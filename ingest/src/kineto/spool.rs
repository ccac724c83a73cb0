//! Fixed-size records that wait, in file order, for the end of the walk: the last
//! `CHUNK` in memory, the rest in an unnamed temporary file.
//!
//! Why: what the walk notes per event (a launch, a `[memory]` event) is needed only once the
//! step spans are known, at the end of the file; held in memory it grew with the trace. In
//! the file it sits in the page cache, not in the process, and is read back a chunk at a
//! time. A trace with fewer than `CHUNK` records writes no file.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use bytemuck::Pod;

/// Records held in memory before they are appended to the file, and read back at once.
pub(crate) const CHUNK: usize = 1 << 16;

/// Records in file order (see the module docs).
pub(crate) struct Spool<T> {
    /// Where the file goes (the system's temporary directory if none).
    dir: Option<PathBuf>,
    /// Records are not kept at all (a walk that only looks for the first error).
    discard: bool,
    buf: Vec<T>,
    file: Option<File>,
    /// Records in the file.
    spilled: u64,
}

impl<T> Default for Spool<T> {
    fn default() -> Self {
        Spool {
            dir: None,
            discard: false,
            buf: Vec::new(),
            file: None,
            spilled: 0,
        }
    }
}

impl<T> fmt::Debug for Spool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spool")
            .field("held", &self.buf.len())
            .field("spilled", &self.spilled)
            .finish()
    }
}

impl<T: Pod> Spool<T> {
    /// A spool whose file goes in `dir` (made if missing).
    pub(crate) fn in_dir(dir: PathBuf) -> Self {
        Spool {
            dir: Some(dir),
            ..Spool::default()
        }
    }

    /// A spool that keeps nothing.
    pub(crate) fn discarding() -> Self {
        Spool {
            discard: true,
            ..Spool::default()
        }
    }

    /// Where the file goes: `None` for the system's temporary directory.
    pub(crate) fn dir(&self) -> Option<&std::path::Path> {
        self.dir.as_deref()
    }

    /// Records held, in memory or in the file.
    pub(crate) fn len(&self) -> u64 {
        self.spilled + self.buf.len() as u64
    }

    /// Appends records, in file order.
    pub(crate) fn extend(&mut self, records: impl IntoIterator<Item = T>) -> io::Result<()> {
        if self.discard {
            return Ok(());
        }
        self.buf.extend(records);
        if self.buf.len() >= CHUNK {
            let file = match &mut self.file {
                Some(f) => f,
                None => self.file.insert(match &self.dir {
                    Some(d) => {
                        std::fs::create_dir_all(d)?;
                        tempfile::tempfile_in(d)?
                    }
                    None => tempfile::tempfile()?,
                }),
            };
            file.write_all(bytemuck::cast_slice(&self.buf))?;
            self.spilled += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }

    /// Hands every record to `f`, in file order, at most `CHUNK` at a time, and keeps them:
    /// more may be appended, and all read again. `io` turns a failed read of the file into
    /// `f`'s error.
    pub(crate) fn replay<E>(
        &mut self,
        mut f: impl FnMut(&[T]) -> Result<(), E>,
        io: impl Fn(io::Error) -> E,
    ) -> Result<(), E> {
        if let Some(file) = &mut self.file {
            file.seek(SeekFrom::Start(0)).map_err(&io)?;
            let mut left = self.spilled;
            let mut chunk = Vec::new();
            chunk.resize(CHUNK.min(left as usize), T::zeroed());
            while left > 0 {
                let n = left.min(CHUNK as u64) as usize;
                file.read_exact(bytemuck::cast_slice_mut(&mut chunk[..n]))
                    .map_err(&io)?;
                f(&chunk[..n])?;
                left -= n as u64;
            }
            // At the end again, where the next records go.
        }
        if self.buf.is_empty() {
            return Ok(());
        }
        f(&self.buf)
    }

    /// Hands every record to `f`, in file order, at most `CHUNK` at a time; `io` turns a
    /// failed read of the file into `f`'s error.
    pub(crate) fn drain<E>(
        mut self,
        f: impl FnMut(&[T]) -> Result<(), E>,
        io: impl Fn(io::Error) -> E,
    ) -> Result<(), E> {
        self.replay(f, io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records come back in the order they went in, whether they stayed in memory or not,
    /// in chunks of at most `CHUNK`.
    #[test]
    fn records_come_back_in_order() {
        for n in [0, 1, CHUNK - 1, CHUNK, 2 * CHUNK + 5] {
            let dir = tempfile::tempdir().unwrap();
            let mut s = Spool::in_dir(dir.path().join("made"));
            for part in (0..n as u64).collect::<Vec<_>>().chunks(1000) {
                s.extend(part.iter().copied()).unwrap();
            }
            assert_eq!(s.len(), n as u64);
            let mut back = Vec::new();
            s.drain(
                |c: &[u64]| {
                    assert!(!c.is_empty() && c.len() <= CHUNK);
                    back.extend_from_slice(c);
                    Ok::<_, io::Error>(())
                },
                |e| e,
            )
            .unwrap();
            assert_eq!(back, (0..n as u64).collect::<Vec<_>>());
        }
        // Replayed, appended to, replayed: every record each time, in order.
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::in_dir(dir.path().into());
        let mut want = Vec::new();
        for round in 0..3u64 {
            let more: Vec<u64> = (0..CHUNK as u64 + 7).map(|i| i * 3 + round).collect();
            s.extend(more.iter().copied()).unwrap();
            want.extend(more);
            let mut back = Vec::new();
            s.replay(
                |c: &[u64]| {
                    back.extend_from_slice(c);
                    Ok::<_, io::Error>(())
                },
                |e| e,
            )
            .unwrap();
            assert_eq!(back, want, "round {round}");
        }
        let mut d = Spool::<u64>::discarding();
        d.extend(0..10).unwrap();
        assert_eq!(d.len(), 0);
    }
}
