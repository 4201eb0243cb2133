//! What section `fairness` measures and how much (its options), what one `__fairness` process is told to do
//! (its spec, on its command line) and what it reports (one JSON line).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The noisy context: every flood object lives in this test cluster.
pub(super) const NOISY_CLUSTER: &str = "cluster-0";
/// The quiet context: its one object lives in another test cluster, so its watch and API server are not
/// the flood's.
pub(super) const QUIET_CLUSTER: &str = "cluster-1";
/// The namespace of the flood objects (in cluster-0) and of the quiet object (in cluster-1).
pub(super) const NAMESPACE: &str = "bench-fair";
/// The quiet context's one object.
pub(super) const QUIET_OBJECT: &str = "quiet-0";
/// Flood object `i` is `flood-i`.
pub(super) const FLOOD_PREFIX: &str = "flood-";
/// Flood writes in flight at once (as many as the bench's own creates).
pub(super) const FLOOD_WRITERS: usize = 32;

#[derive(Clone, Debug, Serialize)]
pub(crate) struct FairnessOptions {
    /// N: flood objects in the noisy context, each changed once per flood.
    pub flood: usize,
    /// Reconciles at once, for the whole controller (both contexts).
    pub concurrency: u16,
    /// The work of one reconcile of a change (a sleep holding its run slot), in ms.
    pub work_ms: u64,
    /// The quiet context changes its object this often, in ms.
    pub quiet_period_ms: u64,
    /// Once every object was reconciled the first time, the pause before the reference begins, in ms.
    pub pause_ms: u64,
    /// Seconds of quiet changes without a flood (the reference).
    pub reference_seconds: u32,
    /// After the last quiet change of each phase, time for its reconcile before the latencies are read,
    /// in ms; a change it leaves unreconciled counts as unseen.
    pub tail_ms: u64,
}

impl FairnessOptions {
    pub fn full() -> Self {
        Self {
            flood: 10_000,
            concurrency: 2,
            work_ms: 5,
            quiet_period_ms: 100,
            pause_ms: 500,
            reference_seconds: 10,
            tail_ms: 1000,
        }
    }

    pub fn quick() -> Self {
        Self {
            flood: 1000,
            reference_seconds: 3,
            ..Self::full()
        }
    }

    /// A flood still long enough for a few quiet changes to wait behind it; short pauses, which every
    /// one of the four runs pays.
    pub fn smoke() -> Self {
        Self {
            flood: 200,
            pause_ms: 100,
            reference_seconds: 1,
            tail_ms: 150,
            ..Self::full()
        }
    }
}

/// Who reconciles in one run: the baseline, or kubeplex in one of its dispatch orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Variant {
    /// One kube-runtime `Controller` per context, a shared semaphore bounding the total concurrency.
    Baseline,
    /// kubeplex, `Dispatch::Fair` (the default).
    Fair,
    /// kubeplex, `Dispatch::Fair` and `concurrency_per_cluster(concurrency - 1)`: one run slot the noisy
    /// context cannot take.
    FairCapped,
    /// kubeplex, `Dispatch::Fifo`.
    Fifo,
}

impl Variant {
    pub(super) const ALL: [Variant; 4] = [
        Variant::Baseline,
        Variant::Fair,
        Variant::FairCapped,
        Variant::Fifo,
    ];

    /// The variant's name in figures and in a profiler's `{side}`.
    pub(super) fn name(self) -> &'static str {
        match self {
            Variant::Baseline => "baseline",
            Variant::Fair => "fair",
            Variant::FairCapped => "fair+cap",
            Variant::Fifo => "fifo",
        }
    }
}

/// What a `__fairness` process does; the parent serialises it into the command line.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct FairnessSpec {
    pub kubeconfig: PathBuf,
    pub variant: Variant,
    pub flood: usize,
    pub concurrency: u16,
    pub work_ms: u64,
    pub quiet_period_ms: u64,
    pub pause_ms: u64,
    pub reference_seconds: u32,
    pub tail_ms: u64,
}

/// What a `__fairness` process prints.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct FairnessOutcome {
    /// The quiet context's latencies without a flood, in ms: change sent → start of the work of the first
    /// reconcile that began after it was sent and saw it or a later change.
    pub reference_ms: Vec<f64>,
    /// The same for the quiet changes sent from the flood's first write until its last change was reconciled.
    pub flood_ms: Vec<f64>,
    /// Quiet change sent -> the process's own watch of the quiet object delivered it, in ms, without and
    /// during the flood: the part of the latency before any dispatch.
    pub reference_delivery_ms: Vec<f64>,
    pub flood_delivery_ms: Vec<f64>,
    /// Quiet changes no reconcile saw by itself, only through a later one (coalesced while waiting).
    pub coalesced: usize,
    /// Quiet changes no reconcile saw at all.
    pub unseen: usize,
    /// The flood's first write → its last write answered, in s.
    pub flood_written_s: f64,
    /// The flood's first write → its last change reconciled, in s.
    pub flood_drained_s: f64,
    /// Most flood changes waiting (written, not yet reconciled) at once, sampled with every quiet change.
    pub flood_backlog: usize,
}
