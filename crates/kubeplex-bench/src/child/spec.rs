//! What a measurement child is told to do (its spec, on its command line) and what it reports (one JSON line).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Side {
    Baseline,
    Kubeplex,
}

impl Side {
    /// As the reports and the wrapper's `{side}` name it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Side::Baseline => "baseline",
            Side::Kubeplex => "kubeplex",
        }
    }
}

/// What a child does; the parent serialises it into the command line.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Spec {
    pub side: Side,
    pub kubeconfig: PathBuf,
    /// (logical context, kubeconfig context): several logical contexts may share one API server.
    pub contexts: Vec<(String, String)>,
    pub namespace: String,
    /// Controllers on the same (context, kind, namespace).
    pub controllers: usize,
    /// Per-controller reconcile concurrency (`None`: unbounded).
    pub concurrency: Option<u16>,
    /// Each reconcile GETs its object from the API server (one round trip of real work).
    pub get_per_reconcile: bool,
    /// Wait until this many reconciles (or distinct objects, with `distinct`) after the caches synced.
    pub expect: usize,
    pub distinct: bool,
    pub latency: Option<LatencySpec>,
    /// Pause before the final memory reading.
    pub settle_ms: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct LatencySpec {
    /// Objects `lat-0..` written round-robin.
    pub objects: usize,
    pub rate_per_s: u32,
    pub seconds: u32,
    /// After the last write, time for its reconcile before the latencies are read, in ms.
    pub tail_ms: u64,
}

/// What a child reports.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Outcome {
    /// Process start to every cache synced (kubeplex: `wait_started`, i.e. `/startupz` 200).
    pub synced_s: f64,
    /// CPU seconds (user + system) the child had used when the caches synced.
    pub cpu_synced_s: f64,
    /// CPU seconds the child had used when it reported.
    pub cpu_s: f64,
    /// CPU seconds the API servers and etcds used while the child ran (filled in by the parent).
    #[serde(default)]
    pub server_cpu_s: f64,
    /// Process start to `expect` reconciles.
    pub done_s: Option<f64>,
    pub first_reconcile_s: Option<f64>,
    pub last_reconcile_s: Option<f64>,
    pub rss_before: u64,
    pub rss_after: u64,
    /// `RssAnon` before and after: the resident set without file pages.
    #[serde(default)]
    pub rss_anon_before: u64,
    #[serde(default)]
    pub rss_anon_after: u64,
    pub heap_before: u64,
    pub heap_after: u64,
    pub watches_opened: usize,
    pub reconciles: usize,
    /// Write sent → start of the first reconcile that saw it and began after it was sent, in ms.
    pub latencies_ms: Vec<f64>,
    /// Writes whose value no reconcile saw (coalesced with a later one).
    pub missed: usize,
}
