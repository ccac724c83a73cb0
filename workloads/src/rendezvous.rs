//! The NCCL/RCCL unique id handed between ranks through a file.
//!
//! Both collective libraries use the same 128-byte `ncclUniqueId`, so the hand-over is written
//! once here and each backend only says how to make an id.

use crate::error::{Error, Result};
use std::path::Path;
use std::time::{Duration, Instant};

/// Bytes in an `ncclUniqueId` (NCCL and RCCL: `NCCL_UNIQUE_ID_BYTES`).
pub const ID_BYTES: usize = 128;

/// Rank 0 makes the id with `make` and writes it to `path` (the file must not exist yet, so a
/// stale id from an earlier run is never used; written to `path.tmp`, then renamed); the other
/// ranks poll `path` for up to `timeout`.
pub fn exchange(
    path: &Path,
    rank: usize,
    timeout: Duration,
    make: impl FnOnce() -> Result<[u8; ID_BYTES]>,
) -> Result<[u8; ID_BYTES]> {
    if rank == 0 {
        if path.exists() {
            return Err(Error::Rendezvous(format!(
                "file {} already exists (stale from an earlier run?): remove it",
                path.display()
            )));
        }
        let id = make()?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, id).map_err(Error::io("writing", &tmp))?;
        std::fs::rename(&tmp, path).map_err(Error::io("writing", path))?;
        return Ok(id);
    }
    let t0 = Instant::now();
    loop {
        if let Ok(bytes) = std::fs::read(path) {
            if let Ok(id) = <[u8; ID_BYTES]>::try_from(bytes.as_slice()) {
                return Ok(id);
            }
        }
        if t0.elapsed() > timeout {
            return Err(Error::Rendezvous(format!(
                "rank {rank}: no id in {} after {}s (is rank 0 running?)",
                path.display(),
                timeout.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank0_writes_and_others_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("id");
        let mut id = [0u8; ID_BYTES];
        id[0] = 7;
        id[127] = 200;
        let got = exchange(&p, 0, Duration::ZERO, || Ok(id)).unwrap();
        assert_eq!(got, id);
        let read = exchange(&p, 1, Duration::from_secs(1), || unreachable!()).unwrap();
        assert_eq!(read, id);
        let stale = exchange(&p, 0, Duration::ZERO, || Ok(id)).unwrap_err();
        assert!(
            stale.to_string().starts_with("rendezvous: file "),
            "{stale}"
        );
        assert!(stale
            .to_string()
            .ends_with("already exists (stale from an earlier run?): remove it"));
    }

    #[test]
    fn waiting_rank_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let e = exchange(
            &dir.path().join("none"),
            1,
            Duration::ZERO,
            || unreachable!(),
        );
        assert!(e.unwrap_err().to_string().contains("rank 1: no id in"));
    }
}
