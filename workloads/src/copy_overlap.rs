//! `aorta-copy-overlap`: what it measures and how it reports it.
//!
//! The question is how much of the host↔device copy time a GEMM-heavy stream hides (on AMD the
//! copies go to the SDMA engines, on NVIDIA to the copy engines, so neither takes compute
//! units from the GEMMs). Both modes run in one process, on the same buffers: first serial
//! (copies wait for the iteration's GEMMs), then overlapped; the saving is the difference of
//! their mean iteration times.

use crate::backend::Backend;
use crate::bench::{self, Measured};
use crate::config::CopyConfig;
use crate::error::Result;
use crate::output::{self, Summary};
use serde_json::Value;

/// One measured mode.
#[derive(Clone, Debug)]
pub struct Mode {
    /// Whether this is the serial mode (copies wait for the iteration's GEMMs).
    pub serial: bool,
    /// The mode's measured iterations.
    pub measured: Measured,
    /// The JSONL lines of its iterations.
    pub lines: Vec<Value>,
    /// The means over its iterations.
    pub summary: Summary,
}

/// Both modes of one run.
#[derive(Clone, Debug)]
pub struct Comparison {
    pub(crate) serial: Mode,
    pub(crate) overlapped: Mode,
}

impl Comparison {
    /// Mean iteration time saved by overlapping, ms (negative if overlapping was slower).
    pub(crate) fn saving_ms(&self) -> f64 {
        self.serial.summary.iter_ms - self.overlapped.summary.iter_ms
    }

    /// [`Comparison::saving_ms`] as a percentage of the serial iteration.
    pub(crate) fn saving_pct(&self) -> f64 {
        let s = self.serial.summary.iter_ms;
        if s > 0.0 {
            100.0 * self.saving_ms() / s
        } else {
            0.0
        }
    }

    /// The mode whose trace and JSONL are written (`--serial` picks the serial one).
    pub fn written(&self, cfg: &CopyConfig) -> &Mode {
        if cfg.write_serial {
            &self.serial
        } else {
            &self.overlapped
        }
    }
}

fn measure_mode<B: Backend>(b: &mut B, cfg: &CopyConfig, serial: bool) -> Result<Mode> {
    let measured = bench::run(b, &cfg.schedule(serial))?;
    let lines = output::metrics_lines(cfg, &measured.iters);
    let summary = output::summary(cfg, &lines, &measured.iters);
    Ok(Mode {
        serial,
        measured,
        lines,
        summary,
    })
}

/// Run the serial mode, then the overlapped one (each with its warm-up).
pub fn measure<B: Backend>(b: &mut B, cfg: &CopyConfig) -> Result<Comparison> {
    let serial = measure_mode(b, cfg, true)?;
    let overlapped = measure_mode(b, cfg, false)?;
    Ok(Comparison { serial, overlapped })
}

/// The console summary: both modes, the saving, and the rates.
pub fn report(cfg: &CopyConfig, c: &Comparison) -> String {
    let (s, o) = (&c.serial.summary, &c.overlapped.summary);
    format!(
        "{} x{} + {} B {} copies x{} per iteration: serial {:.3} ms/iter, overlapped {:.3} \
         ms/iter, saving {:.3} ms ({:.1}%); copies {:.1} GB/s serial, {:.1} GB/s overlapped \
         ({:.1}% of copy time hidden); GEMM {:.1} TFLOP/s serial, {:.1} TFLOP/s overlapped",
        cfg.gemm.name(),
        cfg.gemms_per_iter,
        cfg.copy_bytes,
        cfg.direction.name(),
        cfg.copies_per_iter,
        s.iter_ms,
        o.iter_ms,
        c.saving_ms(),
        c.saving_pct(),
        s.side_gbs,
        o.side_gbs,
        100.0 * o.overlap_ratio,
        s.gemm_tflops,
        o.gemm_tflops,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::SimBackend;
    use crate::config::{test_copy_config, Direction};

    fn sim() -> SimBackend {
        let mut b = SimBackend::new(1.0, 0.0);
        (b.h2d_ms, b.d2h_ms) = (2.0, 0.5);
        b
    }

    #[test]
    fn overlapped_saves_the_hidden_copy_time() {
        // 3 GEMMs of 1 ms; one slot = H2D 2 ms + D2H 0.5 ms. Serial: 3 + 2.5 = 5.5 ms;
        // overlapped: max(3, 2.5) = 3 ms; saving 2.5 ms = 45.45 % of 5.5 ms.
        let mut cfg = test_copy_config();
        cfg.direction = Direction::Both;
        let c = measure(&mut sim(), &cfg).unwrap();
        assert_eq!(c.serial.summary.iter_ms, 5.5);
        assert_eq!(c.overlapped.summary.iter_ms, 3.0);
        assert_eq!(c.serial.summary.overlap_ms, 0.0);
        assert_eq!(c.overlapped.summary.overlap_ms, 2.5);
        assert_eq!(c.saving_ms(), 2.5);
        assert_eq!(c.saving_pct(), 100.0 * 2.5 / 5.5);
        assert!(!c.written(&cfg).serial);
        cfg.write_serial = true;
        assert!(c.written(&cfg).serial);
        assert_eq!(c.serial.lines.len(), 2);
    }

    #[test]
    fn copies_longer_than_gemms_are_partly_hidden() {
        // 3 GEMMs of 1 ms, two H2D copies of 2 ms: serial 7 ms, overlapped 4 ms, 3 ms hidden.
        let mut cfg = test_copy_config();
        cfg.copies_per_iter = 2;
        let c = measure(&mut sim(), &cfg).unwrap();
        assert_eq!(c.serial.summary.iter_ms, 7.0);
        assert_eq!(c.overlapped.summary.iter_ms, 4.0);
        assert_eq!(c.overlapped.summary.overlap_ms, 3.0);
        assert_eq!(c.overlapped.summary.overlap_ratio, 0.75);
        assert_eq!(c.saving_pct(), 100.0 * 3.0 / 7.0);
        let line = report(&cfg, &c);
        assert!(
            line.contains(
                "serial 7.000 ms/iter, overlapped 4.000 ms/iter, saving 3.000 ms (42.9%)"
            ),
            "{line}"
        );
        assert!(line.contains("(75.0% of copy time hidden)"), "{line}");
    }
}
