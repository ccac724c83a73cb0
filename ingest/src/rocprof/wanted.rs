//! The correlation ids of the RCCL kernels that the rocprofv3 JSON reader holds back: noted
//! while the dispatches are read, asked about for every API record after them.
//!
//! Why not a set: it grew by an id per RCCL kernel of a process object (~3 % of the
//! dispatches of the corpus trace), for the whole object. The ids wait in a spool
//! (`kineto::spool`: a chunk in memory, the rest in an unnamed file in the staging
//! directory); the first question after new ids makes a membership lookup of them
//! (`kineto::launches`, every value `None`: an index of 16 bytes a block of 4,096 ids in
//! memory, the blocks in a file past 1 MiB). rocprofv3 writes the API arrays after the
//! dispatches, so the lookup is made once per process object.

use std::io;
use std::path::PathBuf;

use crate::kineto::launches::{Keep, LaunchSteps};
use crate::kineto::spool::Spool;

/// The ids held back (see the module docs).
#[derive(Debug)]
pub(super) struct Wanted {
    dir: PathBuf,
    ids: Spool<i64>,
    lookup: LaunchSteps,
    /// Ids noted since `lookup` was made.
    fresh: bool,
}

impl Wanted {
    /// No ids; their files, if they need any, go in `dir`.
    pub(super) fn new(dir: PathBuf) -> Wanted {
        Wanted {
            ids: Spool::in_dir(dir.clone()),
            lookup: LaunchSteps::in_dir(Some(dir.clone())),
            dir,
            fresh: false,
        }
    }

    /// Notes an id (none for a kernel without one).
    pub(super) fn extend(&mut self, corr: Option<i64>) -> io::Result<()> {
        if corr.is_some() {
            self.ids.extend(corr)?;
            self.fresh = true;
        }
        Ok(())
    }

    /// Whether `corr` was noted.
    pub(super) fn contains(&mut self, corr: i64) -> io::Result<bool> {
        if self.fresh {
            let mut lookup = LaunchSteps::in_dir(Some(self.dir.clone()));
            self.ids.replay(
                |ids| lookup.add_pairs(ids.iter().map(|&c| (c, None)).collect(), Keep::First),
                |e| e,
            )?;
            lookup.shrink();
            (self.lookup, self.fresh) = (lookup, false);
        }
        Ok(self.lookup.get(corr).is_some())
    }

    /// Forgets every id (the next process object).
    pub(super) fn clear(&mut self) {
        *self = Wanted::new(std::mem::take(&mut self.dir));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// Past a chunk (the spool's file) and past 1 MiB of blocks (the lookup's file), asked
    /// between notes and after `clear`: answers as a set.
    #[test]
    fn answers_as_a_set() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Wanted::new(dir.path().into());
        let mut set = HashSet::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let n = 3 * crate::kineto::spool::CHUNK;
        for i in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Sparse: a block of 4,096 ids each, most of them.
            let corr = (x % (1 << 40)) as i64 - (1 << 39);
            w.extend(Some(corr)).unwrap();
            set.insert(corr);
            if i == 1000 {
                assert!(w.contains(corr).unwrap());
                assert!(!w.contains(corr + 1).unwrap() || set.contains(&(corr + 1)));
            }
        }
        w.extend(None).unwrap();
        for &c in set.iter().step_by(13) {
            assert!(w.contains(c).unwrap(), "{c}");
            assert_eq!(w.contains(c + 1).unwrap(), set.contains(&(c + 1)), "{c}");
        }
        let (_, file, _, _) = w.lookup.stats();
        assert!(file > 0, "the lookup's blocks are in its file");
        assert!(w.lookup.heap_bytes() < 17 * n, "{}", w.lookup.heap_bytes());
        w.clear();
        assert!(!w.contains(*set.iter().next().unwrap()).unwrap());
    }
}
