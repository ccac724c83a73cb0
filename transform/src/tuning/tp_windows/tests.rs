use serde_json::json;

use super::*;

fn inst(run: &str, rank: i64, step: i64, op: &str, phase: &str, ns: [i64; 4]) -> WindowInstance {
    WindowInstance {
        run: run.into(),
        rank,
        step: Some(step),
        operator: op.into(),
        phase: phase.into(),
        gemm_ns: ns[0],
        comm_ns: ns[1],
        overlap_ns: ns[2],
        e2e_ns: ns[3],
        num_gemm_events: 4,
        num_comm_events: 4,
    }
}

fn config(run: &str) -> Option<String> {
    match run {
        "a1" | "a2" => Some("A".into()),
        "b" => Some("B".into()),
        _ => None,
    }
}

/// A first step that waited 80 ms for the other ranks is one instance of eight: the medians
/// are those of the seven others (all equal), whatever the outlier's size.
#[test]
fn one_slow_instance_does_not_move_the_medians() {
    for slow in [500_000, 80_000_000] {
        let mut ws = Vec::new();
        for (run, rank) in [("a1", 0), ("a1", 1), ("a2", 0), ("a2", 1)] {
            for step in [4, 5] {
                ws.push(inst(
                    run,
                    rank,
                    step,
                    "qkv",
                    "fprop",
                    [400_000, 100_000, 80_000, 450_000],
                ));
            }
        }
        ws[0].e2e_ns = slow;
        ws[0].comm_ns = slow;
        let rows = by_config(&ws, &config);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!((r.config.as_str(), r.instances), ("A", 8));
        assert_eq!((r.e2e_us, r.comm_us, r.gemm_us), (450.0, 100.0, 400.0));
        assert_eq!(r.overlap_ratio, 80.0 / 100.0);
    }
}

#[test]
fn rows_group_by_configuration_operator_and_phase_and_skip_unnamed_runs() {
    let ws = [
        inst("a1", 0, 4, "fc1", "fprop", [10_000, 0, 0, 10_000]),
        inst("a2", 0, 4, "fc1", "fprop", [30_000, 0, 0, 30_000]),
        inst("a1", 0, 4, "fc1", "dgrad", [5_000, 5_000, 5_000, 6_000]),
        inst("b", 0, 4, "fc1", "fprop", [7_000, 2_000, 0, 9_000]),
        inst("stray", 0, 4, "fc1", "fprop", [1, 1, 1, 1]),
    ];
    let rows = by_config(&ws, &config);
    let keys: Vec<(&str, &str, &str, usize)> = rows
        .iter()
        .map(|r| {
            (
                r.config.as_str(),
                r.operator.as_str(),
                r.phase.as_str(),
                r.instances,
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            ("A", "fc1", "dgrad", 1),
            ("A", "fc1", "fprop", 2),
            ("B", "fc1", "fprop", 1)
        ]
    );
    // Even count: the mean of the two middles.
    assert_eq!(rows[1].e2e_us, 20.0);
    // No comm: ratio 0, not NaN.
    assert_eq!(rows[1].overlap_ratio, 0.0);
    assert_eq!(rows[0].overlap_ratio, 1.0);
    assert_eq!(median_count(vec![3, 1, 2, 4]), 2);
    assert_eq!(crate::summary::median(&[]), None);
}

#[test]
fn tuner_fields_fill_the_measured_pass_and_leave_the_other_null() {
    let ws = [
        inst(
            "b",
            0,
            4,
            "proj",
            "fprop",
            [200_000, 100_000, 50_000, 260_000],
        ),
        inst("b", 0, 4, "proj", "wgrad", [300_000, 0, 0, 300_000]),
    ];
    let rows = by_config(&ws, &config);
    let fwd = rows[0].tuner_fields();
    assert_eq!(rows[0].phase, "fprop");
    assert_eq!(fwd["forward_gemm_time_us"], json!(200.0));
    assert_eq!(fwd["forward_comm_time_us"], json!(100.0));
    assert_eq!(fwd["forward_overlap_time_us"], json!(50.0));
    assert_eq!(fwd["forward_overlap_ratio"], json!(0.5));
    assert_eq!(fwd["forward_e2e_time_us"], json!(260.0));
    assert_eq!(fwd["backward_e2e_time_us"], Value::Null);
    assert_eq!(fwd["operator_e2e_time_us"], json!(260.0));
    assert_eq!(fwd["total_overlap_ratio"], json!(0.5));
    assert_eq!(fwd["num_gemm_events"], json!(4));
    assert_eq!(fwd.len(), 14);
    let bwd = rows[1].tuner_fields();
    assert_eq!(bwd["backward_gemm_time_us"], json!(300.0));
    assert_eq!(bwd["forward_gemm_time_us"], Value::Null);
}

#[test]
fn timings_take_tp_and_method_from_the_params() {
    let ws = [
        inst("a1", 0, 4, "qkv", "fprop", [1, 1, 1, 500_000]),
        inst("b", 0, 4, "qkv", "fprop", [1, 1, 1, 300_000]),
    ];
    let rows = by_config(&ws, &config);
    let params = |c: &str| -> Option<Map<String, Value>> {
        match c {
            // aorta's workloads: under aorta_params; `--param`: a top-level string.
            "A" => json!({"aorta_params": {"tp": 1, "method": "serial"}})
                .as_object()
                .cloned(),
            "B" => json!({"tp": "2"}).as_object().cloned(),
            _ => None,
        }
    };
    let t = timings(&rows, &params);
    assert_eq!(t.len(), 2);
    assert_eq!(
        (t[0].tp, t[0].e2e_us, t[0].method.as_deref()),
        (1, 500.0, Some("serial"))
    );
    assert_eq!(
        (t[1].tp, t[1].e2e_us, t[1].method.as_deref()),
        (2, 300.0, None)
    );
    assert_eq!(t[1].phase.as_deref(), Some("fprop"));
    // No tp: no place on the scaling axis.
    let none = |_: &str| json!({"method": "bulk"}).as_object().cloned();
    assert!(timings(&rows, &none).is_empty());
}
