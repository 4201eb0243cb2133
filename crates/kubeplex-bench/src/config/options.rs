//! What to measure and how much: the full sizes, `--quick`'s, `--smoke`'s, and the sections (the command
//! line in `cli.rs` starts from one of these presets).

use std::path::PathBuf;

use serde::Serialize;

use crate::child_cache::ChildCacheOptions;
use crate::fairness::FairnessOptions;
use crate::fleet::{DetectionOptions, FailoverOptions, FleetOptions};
use crate::member::MemberOptions;

pub(super) const USAGE: &str = "usage: kubeplex-bench [--quick | --smoke] [--json PATH] [--repeats R] \
[--startup-objects N] [--memory-objects N] [--throughput-objects N] [--idle-contexts C[,C..]] \
[--latency-seconds S] [--link-rtt-ms MS] [--member-parents P] [--member-joins J] [--churn-objects N] \
[--churn-cycles C] [--fairness-flood N] [--members M[,M..]] \
[--sections startup,startup_remote,latency,memory,many_contexts,child_cache,throughput,fairness,fleet,\
failover,detection,member_join,member_churn,many_members]

KUBEPLEX_BENCH_CHILD_WRAPPER=\"CMD ARGS..\" runs every measurement under CMD (e.g. `perf record -g -o \
/tmp/child-{n}.data --`, `heaptrack -o /tmp/child-{n}`); {n} is the child's number, {side} baseline or kubeplex. \
KUBEPLEX_BENCH_MALLOC_TRIM=1 makes the fleet and member sections' operators return freed heap to the OS before each RSS reading.";

/// Every section, in the order they run; `--sections` picks some.
pub(crate) const SECTIONS: [&str; 14] = [
    "startup",
    "startup_remote",
    "latency",
    "memory",
    "many_contexts",
    "child_cache",
    "throughput",
    "fairness",
    "fleet",
    "failover",
    "detection",
    "member_join",
    "member_churn",
    "many_members",
];

#[derive(Clone, Debug, Serialize)]
pub(crate) struct Options {
    pub quick: bool,
    /// The smallest sizes that still run every part of every section: whether the bench works, not what
    /// it measures.
    pub smoke: bool,
    #[serde(skip)]
    pub json: Option<PathBuf>,
    pub repeats: usize,
    pub startup_objects: usize,
    pub startup_contexts: Vec<usize>,
    pub latency_objects: usize,
    pub latency_rate_per_s: u32,
    pub latency_seconds: u32,
    /// After the last latency write, time for its reconcile before the latencies are read, in ms.
    pub latency_tail_ms: u64,
    pub memory_objects: usize,
    /// Once every object was reconciled, the pause before memory's last reading, in ms.
    pub memory_settle_ms: u64,
    pub shared_controllers: Vec<usize>,
    pub idle_contexts: Vec<usize>,
    /// Once the idle contexts are ready, the pause before many_contexts' last reading, in ms.
    pub idle_settle_ms: u64,
    pub throughput_objects: usize,
    pub throughput_concurrency: Vec<u16>,
    /// Round trip of the delayed link in front of every API server in `startup_remote`.
    pub link_rtt_ms: u32,
    /// The sections to run (`memory` includes shared watches).
    pub sections: Vec<String>,
    pub fleet: FleetOptions,
    pub child_cache: ChildCacheOptions,
    pub failover: FailoverOptions,
    pub detection: DetectionOptions,
    pub members: MemberOptions,
    pub fairness: FairnessOptions,
}

impl Options {
    pub(crate) fn full() -> Self {
        Self {
            quick: false,
            smoke: false,
            json: None,
            repeats: 5,
            startup_objects: 1000,
            startup_contexts: vec![1, 2, 4, 8],
            latency_objects: 50,
            latency_rate_per_s: 50,
            latency_seconds: 10,
            latency_tail_ms: 1000,
            memory_objects: 10_000,
            memory_settle_ms: 1000,
            shared_controllers: vec![1, 4],
            idle_contexts: vec![10, 50, 100],
            idle_settle_ms: 500,
            throughput_objects: 10_000,
            throughput_concurrency: vec![1, 8, 32],
            link_rtt_ms: 50,
            sections: SECTIONS.map(String::from).to_vec(),
            fleet: FleetOptions::full(),
            child_cache: ChildCacheOptions::full(),
            failover: FailoverOptions::full(),
            detection: DetectionOptions::full(),
            members: MemberOptions::full(),
            fairness: FairnessOptions::full(),
        }
    }

    pub(crate) fn quick() -> Self {
        Self {
            quick: true,
            repeats: 2,
            startup_objects: 100,
            latency_objects: 20,
            latency_rate_per_s: 20,
            latency_seconds: 2,
            memory_objects: 1000,
            idle_contexts: vec![10, 20],
            throughput_objects: 300,
            fleet: FleetOptions::quick(),
            child_cache: ChildCacheOptions::quick(),
            failover: FailoverOptions::quick(),
            detection: DetectionOptions::quick(),
            members: MemberOptions::quick(),
            fairness: FairnessOptions::quick(),
            ..Self::full()
        }
    }

    /// One run a side and the smallest sizes at which every section still does all it does (two sizes
    /// where a section fits a line or compares sizes): the gate's end-to-end test, in the debug profile.
    /// Its pauses and settle times are shorter too, since its figures are not read.
    pub(crate) fn smoke() -> Self {
        Self {
            smoke: true,
            repeats: 1,
            startup_objects: 100,
            startup_contexts: vec![1, 4],
            latency_objects: 10,
            latency_rate_per_s: 10,
            latency_seconds: 1,
            latency_tail_ms: 250,
            memory_objects: 100,
            memory_settle_ms: 250,
            shared_controllers: vec![1, 2],
            idle_contexts: vec![3, 6],
            idle_settle_ms: 100,
            throughput_objects: 60,
            throughput_concurrency: vec![1, 8],
            fleet: FleetOptions::smoke(),
            child_cache: ChildCacheOptions::smoke(),
            failover: FailoverOptions::smoke(),
            detection: DetectionOptions::smoke(),
            members: MemberOptions::smoke(),
            fairness: FairnessOptions::smoke(),
            ..Self::full()
        }
    }

    pub(crate) fn runs(&self, section: &str) -> bool {
        self.sections.iter().any(|s| s == section)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_section_runs_unless_some_are_picked() {
        let all = Options::full();
        assert!(SECTIONS.iter().all(|s| all.runs(s)));
        let some = Options {
            sections: vec!["startup".into(), "throughput".into()],
            ..Options::quick()
        };
        assert!(some.runs("startup") && some.runs("throughput"));
        assert!(!some.runs("memory") && !some.runs("latency") && !some.runs("many_contexts"));
    }
}
