"""Tests of aorta_metrics.py and of fsdp_overlap.py's torch-free half (values by hand).

Run: python3 -m unittest discover -s workloads/torch   (tests/it/workloads.rs does)
"""

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import aorta_metrics as am  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def r(stream, a, b):
    return am.make_range(stream, "x", a, b)


class GemmSummary(unittest.TestCase):
    def test_rate_is_total_flops_over_total_event_time(self):
        # Two linears of 2*8192*4096*16384 FLOPs in 1.5 and 1.6 ms.
        f = 2 * 8192 * 4096 * 16384
        s = am.gemm_summary(1, 2, "o/run", [(1.5, f), (1.6, f)])["aorta_summary"]
        self.assertEqual((s["rank"], s["world_size"], s["gemm"]["count"]), (1, 2, 2))
        self.assertEqual(s["gemm"]["flops"], 2 * f)
        self.assertEqual(s["output_dir"], "o/run")
        self.assertAlmostEqual(s["gemm"]["tflops"], 2 * f / 3.1e-3 / 1e12)
        self.assertIsNone(am.gemm_summary(0, 1, "o", [])["aorta_summary"]["gemm"]["tflops"])
        json.dumps(s)  # one JSON line


class Overlap(unittest.TestCase):
    def test_overlapping_streams(self):
        # compute 0-4, allreduce 2-6, total 8: overlap 2, no gap so the tail 6..8 is idle.
        o = am.overlap([r("compute", 0, 4), r("allreduce", 2, 6)], 8.0)
        self.assertEqual(o["per_stream_ms"], {"compute": 4.0, "allreduce": 4.0})
        self.assertEqual(o["overlap_ms"], {"compute_comm": 2.0, "compute_allreduce": 2.0, "idle": 2.0})
        segs = [(s["start_ms"], s["end_ms"], "+".join(s["active_streams"])) for s in o["active_segments"]]
        self.assertEqual(segs, [(0, 2, "compute"), (2, 4, "allreduce+compute"), (4, 6, "allreduce")])
        self.assertEqual(o["utilization"]["compute"], 0.5)
        self.assertEqual(o["utilization"]["aux"], 0.0)

    def test_gap_counts_not_tail(self):
        # compute 0-1 and 1-2 merge; gap 2-3 is idle; aux 3-5; tail 5..9 not counted.
        o = am.overlap([r("compute", 0, 1), r("compute", 1, 2), r("aux", 3, 5)], 9.0)
        self.assertNotIn("compute_comm", o["overlap_ms"])
        self.assertEqual(o["overlap_ms"]["idle"], 1.0)
        self.assertEqual(len(o["active_segments"]), 2)
        self.assertEqual(o["active_segments"][0]["end_ms"], 2)

    def test_reducescatter_and_aux(self):
        # compute 0-10; aux 1-3; reducescatter 2-5; tail 10..12 idle.
        o = am.overlap([r("compute", 0, 10), r("aux", 1, 3), r("reducescatter", 2, 5)], 12.0)
        self.assertEqual(o["overlap_ms"]["compute_comm"], 4.0)  # 1..5
        self.assertEqual(o["overlap_ms"]["compute_reducescatter"], 3.0)
        self.assertNotIn("compute_allreduce", o["overlap_ms"])
        self.assertEqual(o["overlap_ms"]["idle"], 2.0)

    def test_empty(self):
        self.assertEqual(am.overlap([], 1.0)["overlap_ms"], {})

    def test_metrics_line_shape(self):
        line = am.metrics_line(1, 2, 3, 0.5, None, 1e-4, 8.0, [r("compute", 0, 4)], [])
        self.assertEqual(line["rank"], 1)
        self.assertEqual(line["profile"]["index"], 3)
        self.assertEqual(line["profile"]["overlap"]["per_stream_ms"], {"compute": 4.0})
        json.dumps(line)  # serializable as is


class Script(unittest.TestCase):
    """fsdp_overlap.py parses its knobs and prints the trace metadata without importing torch."""

    def run_script(self, *args):
        return subprocess.run(
            [sys.executable, os.path.join(HERE, "fsdp_overlap.py"), *args],
            capture_output=True, text=True, check=False,
        )

    def test_dry_run_prints_knobs(self):
        p = self.run_script("--dry-run", "--no-forward-prefetch", "--backward-prefetch", "BACKWARD_POST",
                            "--batch-size", "3", "--gradient-accumulation", "2",
                            "--mixed-precision", "fp16", "--profile-active", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        knobs = json.loads(p.stdout)
        self.assertEqual(knobs["fsdp.forward_prefetch"], False)
        self.assertEqual(knobs["fsdp.limit_all_gathers"], True)
        self.assertEqual(knobs["fsdp.backward_prefetch"], "BACKWARD_POST")
        self.assertEqual(knobs["training.batch_size"], 3)
        self.assertEqual(knobs["training.gradient_accumulation"], 2)
        self.assertEqual(knobs["training.mixed_precision"], "fp16")
        self.assertEqual(knobs["profiler.active"], 2)

    def test_bad_knob_is_one_line(self):
        p = self.run_script("--dry-run", "--backward-prefetch", "SIDEWAYS")
        self.assertEqual(p.returncode, 2)
        self.assertIn("invalid choice", p.stderr)

    def test_inconsistent_schedule(self):
        p = self.run_script("--dry-run", "--steps", "3", "--profile-wait", "2", "--profile-warmup", "2")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--steps", p.stderr)

    def test_environment_knobs_join_the_flags(self):
        env = dict(os.environ, NCCL_MAX_NCHANNELS="4", RCCL_NUM_CHANNELS="8", HOME="/nowhere")
        p = subprocess.run([sys.executable, os.path.join(HERE, "fsdp_overlap.py"), "--dry-run"],
                           capture_output=True, text=True, check=False, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        knobs = json.loads(p.stdout)
        self.assertEqual((knobs["NCCL_MAX_NCHANNELS"], knobs["RCCL_NUM_CHANNELS"]), ("4", "8"))
        self.assertNotIn("HOME", knobs)
        self.assertEqual(am.env_knobs({"CUDA_DEVICE_MAX_CONNECTIONS": "1", "PATH": "/bin",
                                       "HSA_ENABLE_SDMA": "0"}),
                         {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "HSA_ENABLE_SDMA": "0"})

    def test_straggler_knobs(self):
        p = self.run_script("--dry-run", "--slow-rank", "3", "--slow-ms", "5")
        self.assertEqual(p.returncode, 0, p.stderr)
        knobs = json.loads(p.stdout)
        self.assertEqual((knobs["straggler.rank"], knobs["straggler.delay_ms"]), (3, 5.0))
        p = self.run_script("--dry-run")
        self.assertEqual(json.loads(p.stdout)["straggler.rank"], None)
        for bad, says in ((["--slow-rank", "1"], "go together"),
                          (["--slow-ms", "5"], "go together"),
                          (["--slow-rank", "1", "--slow-ms", "0"], "--slow-ms 0.0 must be > 0"),
                          (["--slow-rank", "-1", "--slow-ms", "5"], "--slow-rank -1 must be >= 0")):
            p = self.run_script("--dry-run", *bad)
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn(says, p.stderr)


if __name__ == "__main__":
    unittest.main()
