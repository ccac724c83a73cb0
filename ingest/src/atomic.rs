//! Write-then-rename, the one way aorta replaces a file or a directory that readers may have
//! open: they see the old content or the new, never half of either, and a failure leaves the
//! old one in place.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Makes a write past the file-size limit (`ulimit -f`, RLIMIT_FSIZE) fail with EFBIG, like a
/// full disk, instead of killing the process with SIGXFSZ: the error names the file and the
/// staged output is removed, where a kill would leave it for the next run to clean.
pub fn file_size_limit_is_an_error() {
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code; it is
    // called once at start-up, before any thread that could race on the disposition.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// The temporary sibling `path` is written through: `.<name>.tmp-<pid>` in the same
/// directory (a rename within one file system is atomic).
pub(crate) fn temp_sibling(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Writes `path` through a buffered temporary sibling filled by `fill`, then renames it into
/// place; the temporary file is removed when anything fails.
pub fn write_file(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = temp_sibling(path);
    let res = File::create(&tmp)
        .and_then(|f| {
            let mut w = BufWriter::with_capacity(1 << 20, f);
            fill(&mut w)?;
            w.flush()?;
            Ok(())
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// `write_file` of a byte string.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_file(path, |w| w.write_all(bytes))
}

/// Replaces directory `out` by the finished directory `new`: the old one is moved aside,
/// put back if the swap fails, and removed once it succeeded.
pub fn replace_dir(new: &Path, out: &Path) -> io::Result<()> {
    let old = temp_sibling(out).with_extension("old");
    let had = out.exists();
    if had {
        std::fs::rename(out, &old)?;
    }
    if let Err(e) = std::fs::rename(new, out) {
        if had {
            let _ = std::fs::rename(&old, out);
        }
        return Err(e);
    }
    if had {
        let _ = std::fs::remove_dir_all(&old);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_keeps_the_old_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.json");
        write_bytes(&p, b"old").unwrap();
        let err = write_file(&p, |w| {
            w.write_all(b"half")?;
            Err(io::Error::other("disk full"))
        });
        assert!(err.is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "{names:?}");
        write_bytes(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
    }

    #[test]
    fn a_directory_is_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (out, new) = (dir.path().join("cmp"), dir.path().join(".cmp.new"));
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("stale.parquet"), b"x").unwrap();
        std::fs::create_dir_all(&new).unwrap();
        std::fs::write(new.join("summary.json"), b"{}").unwrap();
        replace_dir(&new, &out).unwrap();
        assert!(out.join("summary.json").exists());
        assert!(!out.join("stale.parquet").exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
