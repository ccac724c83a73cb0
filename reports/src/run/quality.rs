//! The data-quality section: what ingest counted as worth a look (`aorta info`'s findings)
//! and what the collective matching found incomplete, per run, so the headline's last verdict
//! has somewhere to point.

use aorta_transform::collectives::Job;
use aorta_transform::info::RunSummary;

use crate::page::Page;

pub(crate) fn section(page: &mut Page, info: &[RunSummary], jobs: &[Job]) {
    page.section_id("Data quality", super::headline::QUALITY);
    page.note(
        "Findings per code (aorta info): trouble is worth a look before trusting the numbers; \
         noise is what healthy traces have on purpose. Collective findings (aorta collectives) \
         say which collectives could not be matched across ranks, so their waits are missing. \
         Every code is explained in docs/SCHEMA.md and docs/COLLECTIVES.md.",
    );
    let rows: Vec<Vec<String>> = info
        .iter()
        .flat_map(|s| {
            s.findings.iter().map(|f| {
                vec![
                    s.run.clone(),
                    "aorta ingest".into(),
                    f.severity.to_string(),
                    f.code.clone(),
                    f.count.to_string(),
                    f.files.to_string(),
                    f.example.clone(),
                ]
            })
        })
        .chain(jobs.iter().flat_map(|j| {
            j.findings().into_iter().map(|f| {
                vec![
                    j.run.clone(),
                    "aorta collectives".into(),
                    collective_severity(f.code).into(),
                    f.code.to_string(),
                    f.count.to_string(),
                    "-".into(),
                    f.example,
                ]
            })
        }))
        .collect();
    if rows.is_empty() {
        page.note("No findings.");
        return;
    }
    // Trouble first and on its own, so the noise of a healthy trace does not bury it.
    let header = [
        "run", "found by", "severity", "code", "count", "files", "example",
    ];
    let (trouble, noise): (Vec<Vec<String>>, Vec<Vec<String>>) =
        rows.into_iter().partition(|r| r[2] == "trouble");
    if trouble.is_empty() {
        page.note("Nothing to check: no trouble findings.");
    } else {
        page.table(&header, &trouble);
    }
    if !noise.is_empty() {
        page.note("Noise (expected in healthy traces):");
        page.table(&header, &noise);
    }
}

/// A collective finding is trouble (waits missing or doubtful) except the note that RCCL's
/// generic kernels took their kind from the launching operator, which loses nothing.
pub(crate) fn collective_severity(code: &str) -> &'static str {
    if code == "collective_kind_from_op" {
        "noise"
    } else {
        "trouble"
    }
}
