//! Hand-made `aorta compare -o DIR` tables with known values, for the compare page's tests.
//! The expected numbers the tests check are computed by hand in the comments.

use std::path::Path;

use aorta_transform::compare::{
    ComparisonSummary, Levels, OperatorsSummary, PairEntry, PairsSummary, RunInfo, SideSummary,
    Summary,
};
use polars::prelude::*;

fn s(name: &str, v: Vec<&str>) -> Column {
    Column::new(name.into(), v)
}
fn f(name: &str, v: Vec<Option<f64>>) -> Column {
    Column::new(name.into(), v)
}
fn i(name: &str, v: Vec<Option<i64>>) -> Column {
    Column::new(name.into(), v)
}

fn write(dir: &Path, name: &str, cols: Vec<Column>) {
    let mut df = DataFrame::new_infer_height(cols).unwrap();
    let file = std::fs::File::create(dir.join(format!("{name}.parquet"))).unwrap();
    ParquetWriter::new(file).finish(&mut df).unwrap();
}

/// The five tables (and `summary.json`) in `dir`.
pub(crate) fn write_all(dir: &Path) {
    levels(dir);
    steps(dir);
    categories(dir);
    operators(dir);
    collectives(dir);
    let summary = serde_json::to_vec(&summary()).unwrap();
    std::fs::write(dir.join("summary.json"), summary).unwrap();
}

/// summary.json as `aorta compare` types it: both sides named, one pair refused as not
/// comparable (so no pair chart), and the Python tool's `comparison` block.
pub(crate) fn summary() -> Summary {
    Summary {
        datasets: Default::default(),
        comparison: ComparisonSummary {
            reference: "ref".into(),
            candidate: "cand".into(),
            reference_overlap_ratio: Some(0.8),
            candidate_overlap_ratio: Some(0.6),
            ratio_delta: Some(-0.2),
        },
        levels: Levels {
            steps: vec![],
            categories: vec![],
            subcategories: vec![],
            collectives: vec![],
        },
        operators: OperatorsSummary {
            matched: 0,
            reference_only: 0,
            candidate_only: 0,
            top: vec![],
        },
        pairs: Some(PairsSummary {
            pairs: vec![PairEntry {
                workload: "llama".into(),
                reference: "cuda/llama".into(),
                candidate: "rocm/llama".into(),
                reference_step_ms: Some(100.0),
                candidate_step_ms: Some(120.0),
                step_ratio: None,
                problems: vec!["world sizes differ (8 vs 4)".into()],
                mix_checked_by: "operators".into(),
            }],
            unpaired_reference: vec!["cuda/bert".into()],
            unpaired_candidate: vec![],
            step_ratio_geomean: None,
            step_ratio_spread: None,
            comparable: false,
            not_checked: vec![],
            reasons: vec!["llama: world sizes differ (8 vs 4)".into()],
            forced: false,
        }),
        sides: vec![
            side(
                "reference",
                "cuda",
                "cuda/llama",
                "NVIDIA H100 80GB HBM3",
                8,
            ),
            side("candidate", "rocm", "rocm/llama", "AMD Instinct MI300X", 4),
        ],
        regression: None,
    }
}

fn side(side: &str, platform: &str, run: &str, gpu: &str, world: i64) -> SideSummary {
    let info = RunInfo {
        platform: platform.into(),
        devices: [gpu.to_string()].into(),
        world_size: Some(world),
        files: 9,
        versions: [format!("{platform}_runtime_version=1")].into(),
        sources: (0..world)
            .map(|r| format!("/t/{run}/rank{r}.json"))
            .collect(),
    };
    SideSummary {
        side: side.into(),
        selector: platform.into(),
        runs: [(run.to_string(), info)].into(),
    }
}

/// The five table names.
pub(crate) const TABLES: [&str; 5] = [
    "compare_levels",
    "compare_steps",
    "compare_categories",
    "compare_operators",
    "compare_collectives",
];

/// level, key, unit, reference (median, p10, p90), candidate (same), ratio.
type LevelRow = (
    &'static str,
    &'static str,
    &'static str,
    [f64; 3],
    [f64; 3],
    Option<f64>,
);

fn levels(dir: &Path) {
    let n = |v: [f64; 3]| v.map(Some).to_vec();
    let rows: [LevelRow; 5] = [
        (
            "steps",
            "step_ms",
            "ms",
            [100.0, 95.0, 110.0],
            [120.0, 118.0, 130.0],
            Some(1.2),
        ),
        (
            "steps",
            "tp_overlap_ratio",
            "ratio",
            [0.8, 0.75, 0.85],
            [0.6, 0.55, 0.65],
            Some(0.75),
        ),
        (
            "categories",
            "gemm",
            "ms",
            [60.0, 58.0, 62.0],
            [70.0, 69.0, 72.0],
            Some(70.0 / 60.0),
        ),
        (
            "categories",
            "memset",
            "ms",
            [0.0, 0.0, 0.0],
            [0.5, 0.4, 0.6],
            None,
        ),
        (
            "collectives",
            "all_reduce 8388608 BFloat16 x8",
            "GB/s",
            [146.8, 140.0, 150.0],
            [117.44, 110.0, 120.0],
            Some(0.8),
        ),
    ];
    let col = |k: usize, side: usize| -> Vec<Option<f64>> {
        rows.iter()
            .map(|r| if side == 0 { n(r.3)[k] } else { n(r.4)[k] })
            .collect()
    };
    write(
        dir,
        "compare_levels",
        vec![
            s("level", rows.iter().map(|r| r.0).collect()),
            s("key", rows.iter().map(|r| r.1).collect()),
            s("unit", rows.iter().map(|r| r.2).collect()),
            f("reference_median", col(0, 0)),
            f("reference_p10", col(1, 0)),
            f("reference_p90", col(2, 0)),
            f("candidate_median", col(0, 1)),
            f("candidate_p10", col(1, 1)),
            f("candidate_p90", col(2, 1)),
            f("ratio", rows.iter().map(|r| r.5).collect()),
        ],
    );
}

/// Reference steps 1–3, candidate steps 11–13, ranks 0 and 1. Medians over the two ranks:
/// reference step_ms 101, 111, 121 (rank 0 100/110/120, rank 1 102/112/122); candidate 130,
/// 140, 150 (both ranks equal). Exposed comm: reference 10, candidate 20 everywhere.
fn steps(dir: &Path) {
    let mut side = vec![];
    let mut rank = vec![];
    let mut step = vec![];
    let mut ms = vec![];
    let mut exposed = vec![];
    for (k, base) in [1i64, 2, 3].into_iter().zip([100.0, 110.0, 120.0]) {
        for r in [0i64, 1] {
            side.push("reference");
            rank.push(Some(r));
            step.push(Some(k));
            ms.push(Some(base + 2.0 * r as f64));
            exposed.push(Some(10.0));
            side.push("candidate");
            rank.push(Some(r));
            step.push(Some(k + 10));
            ms.push(Some(120.0 + 10.0 * k as f64));
            exposed.push(Some(20.0));
        }
    }
    let len = side.len();
    write(
        dir,
        "compare_steps",
        vec![
            s("side", side),
            s("run", vec!["r"; len]),
            i("rank", rank),
            i("step", step),
            f("step_ms", ms),
            f("comm_ms", vec![Some(30.0); len]),
            f("exposed_comm_ms", exposed),
            f("tp_overlap_ratio", vec![Some(0.7); len]),
            f("comm_hidden_pct", vec![Some(70.0); len]),
            f("compute_overlap_ratio", vec![Some(0.3); len]),
        ],
    );
}

/// Reference gemm per rank-step 10, 20, 30, 40, 50: median 30, p10 14, p90 46 (numpy linear:
/// 10 + 0.4·10, 40 + 0.6·10). Candidate gemm 35 everywhere. comm: 5 on both sides.
fn categories(dir: &Path) {
    let mut side = vec![];
    let mut cat = vec![];
    let mut ms = vec![];
    let mut step = vec![];
    for (k, v) in [10.0, 20.0, 30.0, 40.0, 50.0].into_iter().enumerate() {
        for (sd, g) in [("reference", v), ("candidate", 35.0)] {
            for (c, x) in [("gemm", g), ("comm", 5.0)] {
                side.push(sd);
                cat.push(c);
                ms.push(x);
                step.push(Some(k as i64));
            }
        }
    }
    let len = side.len();
    write(
        dir,
        "compare_categories",
        vec![
            s("side", side),
            s("run", vec!["r"; len]),
            i("rank", vec![Some(0); len]),
            i("step", step),
            s("category", cat),
            Column::new("gpu_ms".into(), ms),
        ],
    );
}

/// 25 operators `op_k`, k = 0..24, |diff_ms| = k (negative for odd k), written in a shuffled
/// order: the top 20 are op_5 … op_24. op_24 ran only on the candidate, op_23 only on the
/// reference; the others: reference 100 ms, candidate 100 + diff (ratio (100 + diff) / 100).
fn operators(dir: &Path) {
    let order: Vec<usize> = (0..25).map(|k| (k * 7) % 25).collect();
    let (mut name, mut refs, mut cands, mut ratio): (
        Vec<String>,
        Vec<Option<f64>>,
        Vec<_>,
        Vec<_>,
    ) = Default::default();
    let (mut diff, mut status, mut rc, mut cc) = (vec![], vec![], vec![], vec![]);
    // op_22 alone has FLOPs: 612.5 / 800.3 TFLOP/s, 61.9 / 61.2 % of each side's peak.
    let (mut rt, mut ct, mut rp, mut cp) = (vec![], vec![], vec![], vec![]);
    for k in order {
        let d = if k % 2 == 0 { k as f64 } else { -(k as f64) };
        let (r, c, st) = match k {
            24 => (None, Some(24.0), "candidate_only"),
            23 => (Some(23.0), None, "reference_only"),
            _ => (Some(100.0), Some(100.0 + d), "matched"),
        };
        name.push(format!("op_{k}"));
        refs.push(r);
        cands.push(c);
        ratio.push(match (r, c) {
            (Some(r), Some(c)) => Some(c / r),
            _ => None,
        });
        diff.push(d);
        status.push(st);
        rc.push(r.map(|_| 4i64));
        cc.push(c.map(|_| 4i64));
        let with = |v: f64| (k == 22).then_some(v);
        rt.push(with(612.5));
        ct.push(with(800.3));
        rp.push(with(61.9));
        cp.push(with(61.2));
    }
    let len = diff.len();
    write(
        dir,
        "compare_operators",
        vec![
            Column::new("op".into(), name),
            s("input_dims", vec!["[[8192,4096],[4096,4096]]"; len]),
            s("input_types", vec!["c10::BFloat16,c10::BFloat16"; len]),
            f("reference_ms", refs),
            f("candidate_ms", cands),
            i("reference_calls", rc),
            i("candidate_calls", cc),
            f("ratio", ratio),
            Column::new("diff_ms".into(), diff),
            s("status", status),
            f("reference_tflops", rt),
            f("candidate_tflops", ct),
            f("reference_peak_pct", rp),
            f("candidate_peak_pct", cp),
        ],
    );
}

/// all_reduce of 8 MiB (8388608 B) in BFloat16 over 8 ranks: reference 0.1 ms (algbw
/// 8388608 / 1e-4 s = 83.89 GB/s, busbw × 2·7/8 = 146.80), candidate 0.125 ms (67.11, 117.44;
/// time ratio 1.250). An all_gather seen on the reference only.
fn collectives(dir: &Path) {
    let algbw = |ms: f64| 8388608.0 / (ms * 1e-3) / 1e9;
    write(
        dir,
        "compare_collectives",
        vec![
            s("side", vec!["reference", "candidate", "reference"]),
            s("comm_op", vec!["all_reduce", "all_reduce", "all_gather"]),
            i("bytes", vec![Some(8388608), Some(8388608), Some(4194304)]),
            Column::new(
                "dtype".into(),
                vec![Some("BFloat16"), Some("BFloat16"), None::<&str>],
            ),
            i("group_size", vec![Some(8), Some(8), Some(8)]),
            i("count", vec![Some(10), Some(10), Some(3)]),
            f("mean_ms", vec![Some(0.1), Some(0.125), Some(0.05)]),
            // Median skew across ranks; unmatched kernels (one traced rank) have none.
            f("median_skew_ms", vec![Some(0.02), None, Some(0.01)]),
            f(
                "algbw_gbps",
                vec![Some(algbw(0.1)), Some(algbw(0.125)), None],
            ),
            f(
                "busbw_gbps",
                vec![Some(algbw(0.1) * 1.75), Some(algbw(0.125) * 1.75), None],
            ),
        ],
    );
}
