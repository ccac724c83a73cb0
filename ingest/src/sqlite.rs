//! Opening an input SQLite database (nsys export, rocpd) without writing beside it.
//!
//! A read-only connection to a database in WAL mode still makes SQLite create `<db>-wal`
//! and `<db>-shm` next to it (where the directory is writable): a write outside the output
//! directory, found by fuzzing (docs/FUZZING.md). When the header says WAL and no `-wal`
//! file exists, nothing can be waiting to be checkpointed, so the database is opened
//! `immutable=1`: SQLite then takes no locks and creates no file. With a `-wal` file beside
//! it (a writer has it open, or one died), the plain read-only open reads the committed
//! pages that file holds, which `immutable` would silently skip.

use std::path::{Path, PathBuf};

use percent_encoding::{percent_encode, AsciiSet, CONTROLS};
use rusqlite::{Connection, OpenFlags};

/// What SQLite's URI filenames give a meaning to, escaped (`?` starts the parameters, `#`
/// a fragment, `%` an escape), with the control bytes.
const URI_PATH: &AsciiSet = &CONTROLS.add(b'?').add(b'#').add(b'%');

/// Byte 18 of the header (the write format version) is 2 for WAL.
const WAL_FORMAT: u8 = 2;

/// Opens `path` read-only; a WAL-mode database with no `-wal` file as immutable.
pub(crate) fn open_read_only(path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if !is_wal(path) || sidecar(path, "-wal").exists() {
        return Connection::open_with_flags(path, flags);
    }
    let uri = format!("file:{}?immutable=1", uri_path(path));
    Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)
}

/// Whether the file's header declares WAL mode (false for anything unreadable: the plain
/// open then reports the problem).
fn is_wal(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 20];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| head.starts_with(b"SQLite format 3\0") && head[18] == WAL_FORMAT)
}

fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    percent_encode(path.as_os_str().as_bytes(), URI_PATH).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files_in(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// A WAL-mode database of `rows` rows in `dir`, closed (so checkpointed, no `-wal`).
    fn wal_db(dir: &Path, name: &str, rows: i64) -> PathBuf {
        let p = dir.join(name);
        let c = Connection::open(&p).unwrap();
        let mode: String = c
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        c.execute("CREATE TABLE t(x INTEGER)", []).unwrap();
        for i in 0..rows {
            c.execute("INSERT INTO t VALUES (?1)", [i]).unwrap();
        }
        p
    }

    fn count(c: &Connection) -> i64 {
        c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_closed_wal_database_is_read_without_a_file_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        // `?`, `#` and `%` in the name: the URI form must not cut or decode them.
        let p = wal_db(dir.path(), "a?b#c%41.db", 5);
        assert!(is_wal(&p));
        assert_eq!(files_in(dir.path()), ["a?b#c%41.db"]);
        let c = open_read_only(&p).unwrap();
        assert_eq!(count(&c), 5);
        drop(c);
        assert_eq!(files_in(dir.path()), ["a?b#c%41.db"]);
    }

    #[test]
    fn pages_still_in_a_live_wal_file_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = wal_db(dir.path(), "live.db", 2);
        let writer = Connection::open(&p).unwrap();
        writer.execute_batch("PRAGMA wal_autocheckpoint=0").unwrap();
        for i in 0..3 {
            writer.execute("INSERT INTO t VALUES (?1)", [i]).unwrap();
        }
        assert!(sidecar(&p, "-wal").exists());
        // Immutable would see the 2 checkpointed rows only.
        assert_eq!(count(&open_read_only(&p).unwrap()), 5);
    }

    #[test]
    fn a_rollback_journal_database_opens_as_before() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plain.db");
        let c = Connection::open(&p).unwrap();
        c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
            .unwrap();
        drop(c);
        assert!(!is_wal(&p));
        assert_eq!(count(&open_read_only(&p).unwrap()), 1);
        assert_eq!(files_in(dir.path()), ["plain.db"]);
    }
}
