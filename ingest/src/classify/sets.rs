//! The rule table's three `RegexSet`s, and for the shipped table, compiled on a thread of
//! their own while the ingest starts reading.
//!
//! Why: compiling them is the NFA of the patterns' Unicode classes, 11–18 ms on one core,
//! and it ran before a byte of any trace was read: ~4 % of a 1 GiB Kineto trace's ingest on
//! 16 cores (docs/PERFORMANCE.md, issue 33). The Kineto walk asks the classifier nothing
//! (its spill thread classifies, `kineto::pending`), so there the compile runs beside the
//! walk; the other readers wait for it at their first GPU activity.

use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use regex::RegexSet;

/// The compiled sets: the rules', the collective kinds' by kernel name, and by the
/// `Collective name` arg.
#[derive(Debug, Clone)]
pub(super) struct Sets {
    pub rule: RegexSet,
    pub op: RegexSet,
    pub coll: RegexSet,
}

impl Sets {
    /// Compiles the three lists of patterns (each checked alone already: `pattern`).
    pub(super) fn compile(
        rule: &[String],
        op: &[String],
        coll: &[String],
    ) -> Result<Sets, regex::Error> {
        Ok(Sets {
            rule: RegexSet::new(rule)?,
            op: RegexSet::new(op)?,
            coll: RegexSet::new(coll)?,
        })
    }
}

/// Sets that are compiled, or being compiled on a thread of their own.
#[derive(Debug)]
pub(super) struct Deferred {
    done: OnceLock<Sets>,
    compiling: Mutex<Option<JoinHandle<Sets>>>,
}

impl Deferred {
    pub(super) fn ready(sets: Sets) -> Deferred {
        Deferred {
            done: OnceLock::from(sets),
            compiling: Mutex::new(None),
        }
    }

    /// Starts compiling the shipped table's sets on a thread of their own (here, if no
    /// thread can start). The table is tested to compile (`classify` tests).
    pub(super) fn start(patterns: [Vec<String>; 3]) -> Deferred {
        let compile = |p: &[Vec<String>; 3]| {
            Sets::compile(&p[0], &p[1], &p[2]).expect("the shipped rule table compiles")
        };
        let patterns = Arc::new(patterns);
        let mine = patterns.clone();
        let worker = std::thread::Builder::new().name("aorta-rules".into());
        match worker.spawn(move || compile(&mine)) {
            Ok(h) => Deferred {
                done: OnceLock::new(),
                compiling: Mutex::new(Some(h)),
            },
            Err(_) => Deferred::ready(compile(&patterns)),
        }
    }

    /// The sets, once compiled (waiting for the compile the first time).
    pub(super) fn get(&self) -> &Sets {
        self.done.get_or_init(|| {
            let h = self.compiling.lock().expect("not poisoned").take();
            h.expect("a set being compiled until done")
                .join()
                .expect("the shipped rule table compiles")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compiled on a thread of its own or here, the sets answer alike, once and again.
    #[test]
    fn started_sets_answer_as_ready_ones() {
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let pats = [p(&["^nccl", r"(?i)gemm\w*"]), p(&["all_?reduce"]), p(&[])];
        let ready = Deferred::ready(Sets::compile(&pats[0], &pats[1], &pats[2]).unwrap());
        let started = Deferred::start(pats.clone());
        for name in ["ncclKernel_AllReduce", "sm90_GEMM_x", "", "allreduce"] {
            for d in [&started, &started, &ready] {
                let s = d.get();
                let r = ready.get();
                let got = (
                    s.rule.matches(name).into_iter().collect::<Vec<_>>(),
                    s.op.is_match(name),
                );
                let want = (
                    r.rule.matches(name).into_iter().collect::<Vec<_>>(),
                    r.op.is_match(name),
                );
                assert_eq!(got, want, "{name}");
            }
        }
        assert!(started.compiling.lock().unwrap().is_none(), "joined once");
    }
}
