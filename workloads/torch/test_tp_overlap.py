"""Tests of tp_overlap.py (knobs, shapes, chunk order: no torch needed) and of tp_run.py's
operators (only where PyTorch is installed: on CPU, with ranks as threads and a stand-in for
NCCL's all-gather and reduce-scatter; the results are held against the products written out
in full, not against each other only).

Run: python3 -m unittest discover -s workloads/torch   (tests/it/workloads.rs does)
"""

import contextlib
import gzip
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import warnings
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tp_overlap as tpo  # noqa: E402
import tp_report  # noqa: E402

try:
    import torch
except ImportError:
    torch = None


def args_of(*argv):
    return tpo.parse_args(["--method", "serial", *argv] if "--method" not in argv else list(argv))


class Shapes(unittest.TestCase):
    def test_llama_7b_at_tp4(self):
        s = tpo.op_shapes(args_of(), 4)
        # [tokens, k, n] of each rank's GEMM, written out from the Llama-2-7B sizes.
        self.assertEqual(s["qkv"]["gemm"], [4096, 4096, 3072])
        self.assertEqual(s["proj"]["gemm"], [4096, 1024, 4096])
        self.assertEqual(s["fc1"]["gemm"], [4096, 4096, 5504])
        self.assertEqual(s["fc2"]["gemm"], [4096, 2752, 4096])
        self.assertEqual([s[o]["comm"] for o in tpo.OPS],
                         ["all_gather", "reduce_scatter", "all_gather", "reduce_scatter"])
        self.assertEqual(s["qkv"]["comm_bytes"], 4096 * 4096 * 2)  # 32 MiB of bf16
        self.assertEqual(s["fc2"]["shard_tokens"], 1024)
        self.assertEqual(s["qkv"]["flops"], 2 * 4096 * 4096 * 3072)

    def test_tp1_has_no_collective(self):
        s = tpo.op_shapes(args_of("--no-fc1-gated", "--dtype", "fp32"), 1)
        self.assertEqual({s[o]["comm"] for o in tpo.OPS}, {"none"})
        self.assertEqual({s[o]["comm_bytes"] for o in tpo.OPS}, {0})
        self.assertEqual(s["fc1"]["gemm"], [4096, 4096, 11008])
        self.assertEqual(s["fc2"]["gemm"], [4096, 11008, 4096])

    def test_the_sum_of_gemm_flops_shrinks_as_one_over_tp(self):
        a = args_of("--batch", "2")
        total = {tp: sum(tpo.op_shapes(a, tp)[o]["flops"] for o in tpo.OPS) for tp in (1, 2, 4)}
        self.assertEqual(total[1], 2 * total[2])
        self.assertEqual(total[1], 4 * total[4])
        # 2 x 8192 tokens x (4096x12288 + 4096x4096 + 4096x22016 + 11008x4096)
        self.assertEqual(total[1], 2 * 8192 * 4096 * (12288 + 4096 + 22016 + 11008))

    def test_tp_problems(self):
        self.assertEqual(tpo.tp_problems(args_of(), 4), [])
        self.assertEqual(tpo.tp_problems(args_of("--method", "overlap", "--chunks", "8"), 4), [])
        p = tpo.tp_problems(args_of("--heads", "30", "--hidden", "4080"), 4)
        self.assertEqual(p, ["--heads 30 is not a multiple of TP 4"])
        p = tpo.tp_problems(args_of("--method", "overlap", "--seq-len", "100"), 2)
        self.assertEqual(p, ["tokens (--seq-len x --batch = 100) are not a multiple of TP x chunks = 2 x 4"])
        self.assertIn("--ffn 11008 is not a multiple of TP 3", tpo.tp_problems(args_of(), 3))


class ChunkOrder(unittest.TestCase):
    def test_chunk_major_rows_by_hand(self):
        # 2 ranks x 2 pieces x 1 row: serial rows r0p0 r0p1 r1p0 r1p1 = 0 1 2 3;
        # the overlap method holds p0 of r0, p0 of r1, p1 of r0, p1 of r1.
        self.assertEqual(tpo.chunk_major_rows(2, 2, 1), [0, 2, 1, 3])
        self.assertEqual(tpo.chunk_major_rows(2, 2, 2), [0, 1, 4, 5, 2, 3, 6, 7])
        self.assertEqual(tpo.chunk_major_rows(3, 1, 2), list(range(6)))
        self.assertEqual(tpo.chunk_major_rows(1, 3, 2), list(range(6)))
        rows = tpo.chunk_major_rows(4, 4, 3)
        self.assertEqual(sorted(rows), list(range(48)))


class Helpers(unittest.TestCase):
    def test_median(self):
        self.assertEqual(tpo.median([3.0, 1.0, 2.0]), 2.0)
        self.assertEqual(tpo.median([4.0, 1.0, 3.0, 2.0]), 2.5)

    def test_op_summary_skips_warmup_steps(self):
        shape = {"flops": 2e12}
        s = tpo.op_summary(shape, [50.0, 9.0, 2.0, 4.0, 3.0], 2)
        self.assertEqual(s["median_ms"], 3.0)
        self.assertAlmostEqual(s["window_tflops"], 2e12 / 3e-3 / 1e12)
        self.assertEqual(s["event_ms"], [50.0, 9.0, 2.0, 4.0, 3.0])

    def test_env_knobs_keeps_the_collective_ones(self):
        env = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "HOME": "/root",
               "CUDA_DEVICE_MAX_CONNECTIONS": "1", "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
               "PATH": "/bin", "NVSHMEM_DISABLE_NVLS": "1"}
        k = tpo.knob_values(tpo.parse_args(["--method", "serial"]), 2, env)
        self.assertEqual([n for n in k if n.isupper()], [
            "CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_NVLS_ENABLE", "NVSHMEM_DISABLE_NVLS",
            "TORCH_NCCL_AVOID_RECORD_STREAMS", "TORCH_SYMM_MEM_DISABLE_MULTICAST"])

    def test_summary_line(self):
        s = dict(tpo.op_shapes(args_of(), 2)["qkv"], median_ms=0.4567)
        self.assertEqual(tpo.summary_line(1, 2, "overlap", 4, "qkv", s),
                         "tp_overlap rank 1: tp 2 overlap chunks 4 qkv: median 0.457 ms "
                         "(GEMM 4096x4096x6144; all-gather then GEMM, 32 MiB collective)")
        s = dict(tpo.op_shapes(args_of(), 1)["fc2"], median_ms=1.0)
        self.assertIn("no collective at TP 1", tpo.summary_line(0, 1, "serial", 1, "fc2", s))


class Script(unittest.TestCase):
    """tp_overlap.py's knobs and errors, without importing torch."""

    def run_script(self, *args, env=None):
        return subprocess.run(
            [sys.executable, os.path.join(HERE, "tp_overlap.py"), *args],
            capture_output=True, text=True, check=False, env=dict(os.environ, **(env or {})),
        )

    def test_dry_run_prints_the_trace_metadata(self):
        p = self.run_script("--dry-run", "--method", "overlap", "--chunks", "2",
                            env={"WORLD_SIZE": "2", "NCCL_NVLS_ENABLE": "0"})
        self.assertEqual(p.returncode, 0, p.stderr)
        k = json.loads(p.stdout)
        self.assertEqual((k["tp"], k["method"], k["chunks"], k["dtype"]), (2, "overlap", 2, "bf16"))
        self.assertEqual(k["shapes"]["qkv"]["gemm"], [4096, 4096, 6144])
        self.assertEqual(k["NCCL_NVLS_ENABLE"], "0")
        self.assertEqual(k["ops"], ["qkv", "proj", "fc1", "fc2"])

    def test_serial_is_one_chunk(self):
        p = self.run_script("--dry-run", "--method", "serial", env={"WORLD_SIZE": "1"})
        self.assertEqual(p.returncode, 0, p.stderr)
        k = json.loads(p.stdout)
        self.assertEqual((k["tp"], k["chunks"], k["shapes"]["qkv"]["comm"]), (1, 1, "none"))

    def test_errors_are_one_line(self):
        for argv, env, code, says in (
            (["--method", "serial", "--chunks", "4"], {}, 2, "--chunks applies to --method overlap"),
            (["--method", "sideways"], {}, 2, "invalid choice"),
            ([], {}, 2, "--method"),
            (["--method", "overlap", "--chunks", "0"], {}, 2, "--chunks 0 must be >= 1"),
            (["--method", "serial", "--steps", "5"], {}, 2, "shorter than the profiler schedule"),
            (["--method", "serial", "--timing-skip", "12"], {}, 2, "leaves no step"),
            (["--method", "overlap", "--seq-len", "4095"], {"WORLD_SIZE": "4"}, 1, "not a multiple of TP x chunks"),
            (["--method", "serial"], {"WORLD_SIZE": "x"}, 1, "WORLD_SIZE='x' is not a number"),
        ):
            p = self.run_script("--dry-run", *argv, env=env)
            self.assertEqual(p.returncode, code, (argv, p.stderr))
            lines = p.stderr.strip().splitlines()
            # argparse prints its usage first; the script's own errors are the one line
            self.assertTrue(lines[-1].startswith("tp_overlap.py: error: "), lines)
            self.assertIn(says, lines[-1])
            if code == 1:
                self.assertEqual(len(lines), 1, p.stderr)

    @unittest.skipIf(torch is not None, "PyTorch is installed")
    def test_no_torch_is_one_line(self):
        p = self.run_script("--method", "serial", "--output-dir", os.devnull)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stderr.strip().splitlines(),
                         ["tp_overlap.py: error: PyTorch is not installed in this Python (pip install torch)"])

    @unittest.skipIf(torch is None, "PyTorch is not installed")
    def test_no_gpu_is_one_line(self):
        if torch.cuda.is_available():
            self.skipTest("this machine has a GPU")
        p = self.run_script("--method", "serial", "--output-dir", os.devnull)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stderr.strip().splitlines()[-1],
                         "tp_overlap.py: error: no GPU visible to PyTorch (torch.cuda.is_available() is False)")


def write_summary(outdir, run, rank, tp, method, chunks, ms):
    """A tp_summary_rank{r}.json with the fields tp_report.py reads; `ms` per window."""
    os.makedirs(os.path.join(outdir, run), exist_ok=True)
    s = {"tp": tp, "method": method, "chunks": chunks, "fprop": {"median_ms": ms["fprop"]},
         "ops": {op: {"median_ms": ms[op]} for op in tpo.OPS}}
    with open(os.path.join(outdir, run, f"tp_summary_rank{rank}.json"), "w") as f:
        json.dump(s, f)


class Report(unittest.TestCase):
    def test_slowest_rank_and_scaling_by_hand(self):
        with tempfile.TemporaryDirectory() as d:
            write_summary(d, "tp1_serial", 0, 1, "serial", 1,
                          {"qkv": 4.0, "proj": 1.0, "fc1": 6.0, "fc2": 3.0, "fprop": 14.0})
            write_summary(d, "tp2_overlap", 0, 2, "overlap", 4,
                          {"qkv": 2.2, "proj": 0.55, "fc1": 3.0, "fc2": 1.5, "fprop": 7.5})
            write_summary(d, "tp2_overlap", 1, 2, "overlap", 4,
                          {"qkv": 2.6, "proj": 0.50, "fc1": 3.3, "fc2": 1.5, "fprop": 7.0})
            runs = tp_report.load_runs(d)
            self.assertEqual(runs["tp2_overlap"]["ranks"], 2)
            self.assertEqual(runs["tp2_overlap"]["ms"],
                             {"qkv": 2.6, "proj": 0.55, "fc1": 3.3, "fc2": 1.5, "fprop": 7.5})
            r = tp_report.scaling(runs)
            # T(2) / (T(1) / 2): qkv 2.6 / 2.0, proj 0.55 / 0.5, fc1 3.3 / 3.0, fprop 7.5 / 7.0
            self.assertAlmostEqual(r["tp2_overlap"]["qkv"], 1.3)
            self.assertAlmostEqual(r["tp2_overlap"]["proj"], 1.1)
            self.assertAlmostEqual(r["tp2_overlap"]["fc1"], 1.1)
            self.assertAlmostEqual(r["tp2_overlap"]["fc2"], 1.0)
            self.assertAlmostEqual(r["tp2_overlap"]["fprop"], 7.5 / 7.0)
            self.assertEqual(r["tp1_serial"], {w: 1.0 for w in tp_report.WINDOWS})
            lines = tp_report.report(runs)
            row = next(line for line in lines[3:] if line.startswith("tp2_overlap") and "*" in line)
            self.assertEqual(row.split()[1:3], ["1.30", "1.10*"])  # 1.3 > 1 + 0.2, 1.1 within

    def test_missing_rank_mismatch_and_no_baseline(self):
        with tempfile.TemporaryDirectory() as d:
            ms = {w: 1.0 for w in tp_report.WINDOWS}
            write_summary(d, "tp4_serial", 0, 4, "serial", 1, ms)
            runs = tp_report.load_runs(d)
            self.assertEqual(tp_report.scaling(runs), {})
            lines = tp_report.report(runs)
            self.assertIn("(only 1 of 4 ranks)", lines[2])
            self.assertEqual(lines[-1], "no TP 1 serial run: no scaling")
            write_summary(d, "tp4_serial", 1, 4, "overlap", 4, ms)
            with self.assertRaisesRegex(SystemExit, "tp_summary_rank1.json: tp/method/chunks"):
                tp_report.load_runs(d)
            with open(os.path.join(d, "tp4_serial", "tp_summary_rank1.json"), "w") as f:
                f.write("{}")
            with self.assertRaisesRegex(SystemExit, "tp_summary_rank1.json: not a tp_overlap summary"):
                tp_report.load_runs(d)
        p = subprocess.run([sys.executable, os.path.join(HERE, "tp_report.py"), os.devnull],
                           capture_output=True, text=True, check=False)
        self.assertEqual((p.returncode, p.stderr.strip()),
                         (1, f"tp_report.py: error: {os.devnull}: no */tp_summary_rank*.json"))


class ThreadComm:
    """NCCL's all-gather and reduce-scatter for `size` ranks that are threads of this process:
    every call is a rendezvous of all ranks (the same calls in the same order on every rank,
    as with NCCL); `async_op` calls are done when they return."""

    class Done:
        def wait(self):
            pass

    def __init__(self, shared, rank):
        self.shared, self.rank, self.size = shared, rank, shared["size"]

    def _exchange(self, inp):
        slots, barrier = self.shared["slots"], self.shared["barrier"]
        slots[self.rank] = inp
        barrier.wait()
        return slots

    def all_gather(self, out, inp, async_op):
        slots = self._exchange(inp)
        out.copy_(torch.cat(slots))
        self.shared["barrier"].wait()
        return self.Done() if async_op else None

    def reduce_scatter(self, out, inp, async_op):
        slots = self._exchange(inp)
        total = slots[0].view(self.size, -1, inp.shape[1])[self.rank].clone()
        for s in slots[1:]:
            total += s.view(self.size, -1, inp.shape[1])[self.rank]
        out.copy_(total)
        self.shared["barrier"].wait()
        return self.Done() if async_op else None


def on_ranks(size, fn):
    """fn(comm, rank) on `size` threads; their results by rank (a failure re-raised here)."""
    shared = {"size": size, "slots": [None] * size, "barrier": threading.Barrier(size, timeout=20)}
    results, errors = [None] * size, []

    def body(rank):
        try:
            results[rank] = fn(ThreadComm(shared, rank), rank)
        except BaseException as e:  # noqa: BLE001 - re-raised in the test thread
            errors.append(e)
            shared["barrier"].abort()

    threads = [threading.Thread(target=body, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


@unittest.skipIf(torch is None, "PyTorch is not installed")
class Operators(unittest.TestCase):
    """Both methods of every operator against the product written out in full, in float64."""

    def setUp(self):
        import tp_run
        self.tp_run = tp_run

    def small(self, method, chunks):
        argv = ["--method", method, "--hidden", "8", "--heads", "4", "--ffn", "12",
                "--seq-len", "8", "--batch", "2", "--dtype", "fp32"]
        return tpo.parse_args(argv + (["--chunks", str(chunks)] if method == "overlap" else []))

    def operators(self, tp, chunks):
        args = self.small("overlap", chunks)
        shapes = tpo.op_shapes(args, tp)
        built = []
        for rank in range(tp):
            gen = torch.Generator().manual_seed(rank)
            built.append({op: self.tp_run.Operator(op, shapes[op], tp, torch.float64, "cpu", gen)
                          for op in tpo.OPS})
        return built

    def expected(self, ops, tp, rank, name):
        """The operator's result on `rank`, written out: column-parallel, the whole sequence
        (every rank's shard, rank by rank) times this rank's weight columns; row-parallel, this
        rank's rows of the sum over ranks of input x weight."""
        if ops[rank][name].kind == "column":
            return torch.cat([ops[j][name].inp for j in range(tp)]) @ ops[rank][name].w
        full = sum(ops[j][name].inp @ ops[j][name].w for j in range(tp))
        shard = full.shape[0] // tp
        return full[rank * shard:(rank + 1) * shard]

    def test_both_methods_give_the_written_out_product(self):
        for tp, chunks in ((1, 1), (1, 4), (2, 1), (2, 2), (2, 4), (4, 2), (4, 4)):
            ops = self.operators(tp, chunks)
            order = tpo.chunk_major_rows(tp, chunks, 16 // (tp * chunks))

            def both(comm, rank):
                got = {}
                for name, op in ops[rank].items():
                    op.run(comm, "serial", 1)
                    serial = op.out.clone()
                    if op.kind == "column":
                        op.run(comm, "overlap", chunks)
                    else:  # the overlap method takes its full-sequence input in chunk-major order
                        op.run(comm, "overlap", chunks, inp=op.inp[order])
                    got[name] = (serial, op.out.clone())
                return got

            results = on_ranks(tp, both)
            for rank in range(tp):
                for name in tpo.OPS:
                    want = self.expected(ops, tp, rank, name)
                    serial, overlapped = results[rank][name]
                    msg = f"tp {tp} chunks {chunks} rank {rank} {name}"
                    torch.testing.assert_close(serial, want, rtol=1e-12, atol=1e-12, msg=msg)
                    if ops[rank][name].kind == "column":
                        want = want[order]  # the overlap method's rows are chunk-major
                    torch.testing.assert_close(overlapped, want, rtol=1e-12, atol=1e-12, msg=msg)

    def test_chunk_major_order_matters(self):
        # Without the reordering the overlapped column result is not the serial one: the
        # comparison above could not pass by accident.
        ops = self.operators(2, 2)
        results = on_ranks(2, lambda comm, r: (ops[r]["qkv"].run(comm, "overlap", 2), ops[r]["qkv"].out.clone())[1])
        self.assertFalse(torch.allclose(results[0], self.expected(ops, 2, 0, "qkv")))

    def test_check_op_and_to_chunk_major(self):
        t = torch.arange(16.0).reshape(16, 1)
        self.assertEqual(self.tp_run.to_chunk_major(t, 2, 4).flatten().tolist(),
                         [float(i) for i in tpo.chunk_major_rows(2, 4, 2)])
        ops = self.operators(4, 2)
        diffs = on_ranks(4, lambda comm, r: [self.tp_run.check_op(op, comm, 4, 2) for op in ops[r].values()])
        for rank in range(4):
            for diff, scale in diffs[rank]:
                self.assertLess(diff, 1e-12)
                self.assertGreater(scale, 0.1)


class WallClockEvent:
    """torch.cuda.Event's two calls, on the CPU clock: bench() on a machine without a GPU."""

    def __init__(self, enable_timing=False):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


@unittest.skipIf(torch is None, "PyTorch is not installed")
class BenchOnCpu(unittest.TestCase):
    """tp_run.bench end to end at TP 1 under gloo, CUDA events on the CPU clock: the outputs a
    trace analysis reads (windows, steps, aorta_params, summary, JSONL) have the promised form."""

    def test_outputs(self):
        import torch.distributed as dist
        import tp_run
        with tempfile.TemporaryDirectory() as d:
            args = tpo.parse_args(["--method", "overlap", "--chunks", "2", "--hidden", "64",
                                   "--heads", "4", "--ffn", "96", "--seq-len", "32", "--dtype", "fp32",
                                   "--steps", "7", "--output-dir", d])
            knobs = dict(tpo.knob_values(args, 1, {"NCCL_NVLS_ENABLE": "0"}), gpu="none")
            store = dist.FileStore(os.path.join(d, "store"), 1)
            dist.init_process_group("gloo", store=store, rank=0, world_size=1)
            try:
                with mock.patch.object(torch.cuda, "Event", WallClockEvent), \
                        mock.patch.object(torch.cuda, "synchronize", lambda *a: None), \
                        warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()) as out:
                    warnings.simplefilter("ignore")  # the profiler's "CUDA is not available"
                    tp_run.bench(args, knobs, 0, 1, tp_run.DistComm(dist.group.WORLD, 1), "cpu")
            finally:
                dist.destroy_process_group()
            with open(os.path.join(d, "tp_summary_rank0.json")) as f:
                s = json.load(f)
            printed = out.getvalue().splitlines()
            self.assertEqual([line.split(": ")[1].split()[-1] for line in printed],
                             list(tpo.OPS) + ["fprop"])
            self.assertTrue(printed[0].startswith("tp_overlap rank 0: tp 1 overlap chunks 2 qkv: median "))
            self.assertEqual((s["tp"], s["method"], s["chunks"]), (1, "overlap", 2))
            self.assertEqual(s["profiled_steps"], [4, 5])  # wait 2, warmup 2, active 2
            self.assertEqual(s["timed_steps"], [2, 3, 4, 5, 6])
            self.assertEqual(set(s["ops"]), set(tpo.OPS))
            for op in tpo.OPS:
                self.assertEqual(len(s["ops"][op]["event_ms"]), 7)
                self.assertTrue(all(t > 0 for t in s["ops"][op]["event_ms"]))
                self.assertEqual(s["ops"][op]["median_ms"], tpo.median(s["ops"][op]["event_ms"][2:]))
                self.assertLess(s["check"][op]["max_abs_diff"], 1e-4)
            for step in range(7):  # the fprop window encloses the four operator windows
                self.assertGreaterEqual(s["fprop"]["event_ms"][step],
                                        sum(s["ops"][op]["event_ms"][step] for op in tpo.OPS))
            with open(os.path.join(d, "rank_00_metrics.jsonl")) as f:
                lines = [json.loads(line) for line in f]
            self.assertEqual([(x["step"], x["profiled"]) for x in lines],
                             [(i, i in (4, 5)) for i in range(7)])
            self.assertEqual(lines[3]["window_ms"]["qkv"], s["ops"]["qkv"]["event_ms"][3])
            self.assertEqual(sorted(f for f in os.listdir(d) if "trace" in f), ["rank0_trace_step6.json.gz"])
            with gzip.open(os.path.join(d, "rank0_trace_step6.json.gz")) as f:
                trace = json.load(f)
            params = trace["aorta_params"]
            params = json.loads(params) if isinstance(params, str) else params
            self.assertEqual((params["tp"], params["method"], params["chunks"]), (1, "overlap", 2))
            self.assertEqual({n: v for n, v in params.items() if n.isupper()},
                             {"NCCL_NVLS_ENABLE": "0"})
            names = [e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]
            self.assertEqual(names, ["ProfilerStep#4", "fprop", "qkv", "proj", "fc1", "fc2"] +
                             ["ProfilerStep#5", "fprop", "qkv", "proj", "fc1", "fc2"])
            mms = [e for e in trace["traceEvents"] if e.get("name") == "aten::mm"]
            self.assertEqual(len(mms), 2 * 4 * 2)  # 2 steps x 4 operators x 2 chunks


if __name__ == "__main__":
    unittest.main()
