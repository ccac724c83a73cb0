//! The comparison's output directory: summary.json and the `compare_*` tables, written under
//! a temporary sibling and swapped into place, so a failure leaves an earlier comparison as
//! it was (the page is drawn afterwards by the report stage, from the committed directory).

use std::path::{Path, PathBuf};

use polars::prelude::*;

use super::{CompareError, Comparison};

impl Comparison {
    /// Writes summary.json and every table into `out`, replacing what was there atomically.
    pub fn write_dir(&self, out: &Path) -> Result<(), CompareError> {
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(io(&parent))?;
        let name = out
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
        let res = self
            .fill(&tmp)
            .and_then(|_| aorta_ingest::atomic::replace_dir(&tmp, out).map_err(io(out)));
        if res.is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        res
    }

    fn fill(&self, dir: &Path) -> Result<(), CompareError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let path = dir.join("summary.json");
        let summary = serde_json::to_vec_pretty(&self.summary).map_err(|e| CompareError::Io {
            path: path.clone(),
            source: e.into(),
        })?;
        std::fs::write(&path, summary).map_err(io(&path))?;
        for (name, df) in self.tables() {
            let path = dir.join(format!("{name}.parquet"));
            let f = std::fs::File::create(&path).map_err(io(&path))?;
            ParquetWriter::new(f)
                .with_compression(ParquetCompression::Zstd(None))
                .finish(&mut df.clone())
                .map_err(|source| CompareError::Polars { path, source })?;
        }
        Ok(())
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CompareError + '_ {
    move |source| CompareError::Io {
        path: path.to_path_buf(),
        source,
    }
}
