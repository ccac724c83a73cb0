//! Notes every dataset-reading command repeats on stderr: what ingest decided about job
//! identity (runs split because their files could not be one job), so the warning reaches a
//! user who never saw the ingest's terminal.

use std::path::Path;

/// Prints `note: …` for each split run among `runs` (all runs when empty).
pub(crate) fn print_job_notes(root: &Path, runs: &[String]) -> anyhow::Result<()> {
    for note in aorta_transform::dataset::job_notes(root, runs)? {
        eprintln!("note: {note}");
    }
    Ok(())
}
