//! Benchmark of the overlap scan: N synthetic kernels on 8 streams of one rank.
//!
//! `cargo run --release -p aorta-transform --example overlap_bench -- [N] [steps] [in-order]`
//! (default 10 M, 100). The kernels are generated stream by stream, each stream in start order, as a
//! dataset holds them; the timed work is `intervals::rank`: the whole window, every step's window
//! and every step's per-stream view. A second run times the same kernels shuffled (the worst
//! case: they must be regrouped by stream and step first) unless `in-order` is given.
//! Numbers: docs/PERFORMANCE.md.

use std::time::Instant;

use aorta_transform::intervals::{self, Act, Class};

/// A small deterministic generator (xorshift), so every run times the same input.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> i64 {
        (self.next() % n) as i64
    }
}

/// Streams 0–3 compute (gemm, attention, other), 4–5 collectives, 6 copies, 7 mixed.
fn class_of(stream: u16, rng: &mut Rng) -> (Class, u8) {
    match stream {
        0 | 1 => (Class::Gemm, 0),
        2 => (Class::Attention, 0),
        3 => (Class::OtherCompute, 0),
        4 | 5 => (Class::Comm, rng.below(3) as u8),
        6 => (Class::Memcpy, 0),
        _ => (Class::ALL[rng.below(6) as usize], rng.below(8) as u8),
    }
}

fn generate(n: usize, steps: u32) -> Vec<Act> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let per_stream = n / 8;
    let mut acts = Vec::with_capacity(n);
    for stream in 0..8u16 {
        let mut t = 1_700_000_000_000_000_000i64 + rng.below(1000);
        for i in 0..per_stream {
            t += rng.below(2_000); // gap
            let dur = 500 + rng.below(20_000);
            let (class, op) = class_of(stream, &mut rng);
            let step = (i as u64 * steps as u64 / per_stream as u64) as u32;
            acts.push(Act {
                start: t,
                end: t + dur,
                class,
                op,
                stream,
                step,
            });
            t += dur;
        }
    }
    acts
}

fn time(label: &str, acts: &[Act], steps: usize) {
    let mut best = f64::MAX;
    let mut check = 0;
    for _ in 0..3 {
        let mut v = acts.to_vec();
        let t = Instant::now();
        let r = intervals::rank(&mut v, steps);
        best = best.min(t.elapsed().as_secs_f64());
        check = r.whole.compute_comm_overlap_ns + r.steps.len() as i64;
    }
    println!(
        "{label:<9} {:>11} kernels  {:>8.1} ms  {:>7.1} M kernels/s  (check {check})",
        acts.len(),
        best * 1e3,
        acts.len() as f64 / best / 1e6
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(10_000_000, |a| a.parse().expect("N"));
    let steps: u32 = args.next().map_or(100, |a| a.parse().expect("steps"));
    let in_order_only = args.next().as_deref() == Some("in-order");
    let acts = generate(n, steps);
    time("in-order", &acts, steps as usize);
    if in_order_only {
        return;
    }
    let mut shuffled = acts.clone();
    let mut rng = Rng(7);
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, rng.below(i as u64 + 1) as usize);
    }
    time("shuffled", &shuffled, steps as usize);
}
