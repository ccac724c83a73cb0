//! `aorta ingest --shard I/N`: one of N processes that together ingest one listing into one
//! dataset, each on its own machine or core, none waiting for another.
//!
//! **The partition.** Every process walks the whole listing (discovery is cheap next to
//! reading) and keeps the inputs whose key hashes to its index: the key is the input's run
//! label and its path under the root it was found from (`four-gpu/slow2` + `rank3.json.gz`),
//! never an absolute path, so machines that mount one shared file system at different
//! places, or are given the root by different absolute paths, still agree. A trace per rank
//! makes the key (run, rank). The hash (xxh3) of one input does not depend on the others, so
//! a file added later moves no other file to another shard.
//!
//! **The files.** A shard writes parts only for its own inputs (part paths are per input, so
//! no two shards write one file) and keeps its own manifest, journal, staging directory and
//! lock under `<dataset>/shards/<I>-of-<N>/`. It holds the dataset's lock shared (so no
//! whole-dataset writer runs meanwhile, and the shards run at once) and its own directory's
//! lock exclusive (so a shard started twice waits for itself). Readers merge the manifests
//! (`dataset::Manifest::load`); a whole-dataset writer folds them into `manifest.json`.
//!
//! **Run identity.** Run labels come from the listing (the directory), the same in every
//! shard. What a shard cannot do is the job check (`job`): whether a label's files are one
//! job is known only from all of them, read. So shards keep every file under its label, and
//! the check runs when the dataset is read (`dataset::shard_job_conflict`): a label whose
//! files are not one job is an error there, naming what to do.

use std::path::{Path, PathBuf};

use crate::error::{IngestError, Result};

/// The folder of the shards' own files inside the dataset.
pub(crate) const SHARDS: &str = "shards";

/// Shard `index` of `count` (`--shard I/N`, `0 <= I < N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard, from 0.
    pub index: u32,
    /// How many shards share the listing.
    pub count: u32,
}

impl Shard {
    /// Parses `I/N` (clap's value parser for `--shard`): the message names the value.
    pub fn parse(s: &str) -> std::result::Result<Shard, String> {
        let bad = |why: &str| why.to_string();
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| bad("expected I/N, shard I of N (0 <= I < N), e.g. 0/4"))?;
        let num = |x: &str, what: &str| {
            x.trim()
                .parse::<u32>()
                .map_err(|_| bad(&format!("{what} `{x}` is not a whole number")))
        };
        let (index, count) = (num(i, "the index")?, num(n, "the count")?);
        if count == 0 {
            return Err(bad("the count must be 1 or more"));
        }
        if index >= count {
            return Err(bad(&format!(
                "the index must be below the count (0 to {})",
                count - 1
            )));
        }
        Ok(Shard { index, count })
    }

    /// Whether the input of partition key `key` is this shard's.
    pub(crate) fn owns(&self, key: &str) -> bool {
        xxhash_rust::xxh3::xxh3_64(key.as_bytes()) % u64::from(self.count) == u64::from(self.index)
    }

    /// `<I>-of-<N>`: the shard's folder name under `shards/`.
    pub(crate) fn name(&self) -> String {
        format!("{}-of-{}", self.index, self.count)
    }

    /// The shard's folder, relative to the dataset root.
    pub(crate) fn home(&self) -> PathBuf {
        Path::new(SHARDS).join(self.name())
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The shard folders of the dataset at `out` (relative to it), sorted; none without `shards/`.
pub(crate) fn homes(out: &Path) -> Result<Vec<PathBuf>> {
    let dir = out.join(SHARDS);
    let rd = match std::fs::read_dir(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        r => r.map_err(|e| IngestError::io(&dir, e))?,
    };
    let mut out = Vec::new();
    for e in rd {
        let e = e.map_err(|e| IngestError::io(&dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().is_ok_and(|t| t.is_dir()) && !name.starts_with('.') {
            out.push(Path::new(SHARDS).join(name));
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_takes_i_of_n_and_names_what_is_wrong() {
        assert_eq!(Shard::parse("3/7").unwrap(), Shard { index: 3, count: 7 });
        for (bad, says) in [
            ("3/2", "below the count (0 to 1)"),
            ("2/0", "1 or more"),
            ("a/2", "the index `a`"),
            ("1", "expected I/N"),
            ("-1/2", "the index `-1`"),
        ] {
            let e = Shard::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// Every key falls to exactly one shard of a count, and the split is not lopsided.
    #[test]
    fn every_key_has_one_shard() {
        for n in [1u32, 2, 7] {
            let mut per = vec![0; n as usize];
            for r in 0..1000 {
                let key = format!("job\nrank{r}.json");
                let owners: Vec<u32> = (0..n)
                    .filter(|&i| Shard { index: i, count: n }.owns(&key))
                    .collect();
                assert_eq!(owners.len(), 1);
                per[owners[0] as usize] += 1;
            }
            let fair = 1000 / n as usize;
            assert!(per.iter().all(|&c| c > fair * 3 / 4), "{n}: {per:?}");
        }
    }
}
