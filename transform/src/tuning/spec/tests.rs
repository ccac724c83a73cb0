//! The spec's parsing, its errors' lines, the run order and the bisection.

use super::*;

const GRID: &str = r#"
workload = "overlap-bench"
ranks = 2
repeats = 3
seed = 7
args = ["--iters", "8"]

[flags]
bytes = [4194304, 67108864]
gemms-per-iter = [1, 4, 8]
serial = [true, false]

[env]
NCCL_MAX_NCHANNELS = "4"
"#;

#[test]
fn a_grid_is_the_product_of_its_values_in_spec_order() {
    let s = parse(GRID, "s.toml").unwrap();
    assert_eq!(s.points.len(), 2 * 3 * 2);
    // serde's map is sorted by name: bytes, gemms-per-iter, serial, then env.
    assert_eq!(
        s.points[0].key(),
        "bytes=4194304,gemms-per-iter=1,serial=true,NCCL_MAX_NCHANNELS=4"
    );
    assert_eq!(
        s.points[0].flag_args(),
        ["--bytes", "4194304", "--gemms-per-iter", "1", "--serial"]
    );
    assert_eq!(
        s.points[1].flag_args(),
        ["--bytes", "4194304", "--gemms-per-iter", "1"]
    );
    assert_eq!(
        s.points[0].env(),
        [("NCCL_MAX_NCHANNELS".into(), "4".into())]
    );
    assert_eq!(s.ranks, 2);
    assert_eq!(s.args, ["--iters", "8"]);
    let keys: std::collections::HashSet<String> = s.points.iter().map(Point::key).collect();
    assert_eq!(keys.len(), 12);
}

#[test]
fn a_bad_spec_names_its_line() {
    let bad = GRID.replace("serial = [true, false]", "serial = [true, [1]]");
    let e = parse(&bad, "s.toml").unwrap_err().to_string();
    assert!(e.starts_with("s.toml: line 11: "), "{e}");
    let bad = GRID.replace("repeats = 3", "repeats = \"three\"");
    let e = parse(&bad, "s.toml").unwrap_err().to_string();
    assert!(e.starts_with("s.toml: line 4: "), "{e}");
    let bad = GRID.replace("[env]", "[env]\nnccl_algo = [\"ring\"]");
    let e = parse(&bad, "s.toml").unwrap_err().to_string();
    assert!(e.contains("line 14") && e.contains("upper-case"), "{e}");
    let bad = GRID.replace("overlap-bench", "nope");
    let e = parse(&bad, "s.toml").unwrap_err().to_string();
    assert!(e.contains("`nope` is not one of"), "{e}");
    let bad = format!("wat = 1{GRID}");
    let e = parse(&bad, "s.toml").unwrap_err().to_string();
    assert!(e.contains("line 1:") && e.contains("wat"), "{e}");
}

#[test]
fn a_point_list_and_a_search() {
    let s = parse(
        r#"
command = "python3 train.py --out {out}"
[[point]]
flags = { lr = 0.1 }
[[point]]
flags = { lr = 0.2 }
env = { NCCL_ALGO = "Ring" }
"#,
        "p.toml",
    )
    .unwrap();
    assert_eq!(s.points.len(), 2);
    assert_eq!(s.points[1].key(), "lr=0.2,NCCL_ALGO=Ring");
    assert_eq!(s.repeats, 3);
    let s = parse(
        "workload = \"fsdp\"\n[env]\nNCCL_MIN_CTAS = { search = \"bisect\", min = 1, max = 32 }\n",
        "b.toml",
    )
    .unwrap();
    assert_eq!(s.points, [Point { settings: vec![] }]);
    assert_eq!(s.search.as_ref().unwrap().max, 32);
    let e = parse(
        "workload = \"fsdp\"\n[env]\nNCCL_MIN_CTAS = { search = \"bisect\", min = 9, max = 3 }\n",
        "b.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("line 3") && e.contains("below max"), "{e}");
}

/// Every point once per round, and the order a function of the seed alone.
#[test]
fn the_order_is_interleaved_random_and_seeded() {
    let o = order(12, 3, 7);
    assert_eq!(o.len(), 36);
    for (k, round) in o.chunks(12).enumerate() {
        let mut pts: Vec<usize> = round.iter().map(|s| s.point).collect();
        pts.sort_unstable();
        assert_eq!(pts, (0..12).collect::<Vec<_>>());
        assert!(round.iter().all(|s| s.repeat == k + 1));
    }
    assert_eq!(o, order(12, 3, 7));
    assert_ne!(o, order(12, 3, 8));
    let first: Vec<usize> = o[..12].iter().map(|s| s.point).collect();
    assert_ne!(first, (0..12).collect::<Vec<_>>(), "not shuffled");
}

/// The bisection finds the least value of any one-valley function, in fewer measurements
/// than the grid (brute force over every valley position).
#[test]
fn bisect_finds_the_valley_with_few_points() {
    for best in 1..=32i64 {
        let f = |x: i64| ((x - best) * (x - best)) as f64 + 0.5 * x as f64;
        let want = (1..=32).min_by(|a, b| f(*a).total_cmp(&f(*b))).unwrap();
        let mut b = Bisect::new(1, 32);
        let mut measured = std::collections::BTreeSet::new();
        while let Some((m, n)) = b.next() {
            measured.insert(m);
            measured.insert(n);
            b.narrow(f(m), f(n));
        }
        assert_eq!(b.lo, want, "valley at {best}");
        assert!(measured.len() <= 10, "{} points", measured.len());
    }
}
