//! Section `latency`: event to reconcile latency on one context.

use std::collections::BTreeMap;

use crate::child::{LatencySpec, Side};
use crate::config::Options;
use crate::figures::{Goal, Section, percentile};
use crate::harness::{Bench, contexts, figure, progress};

/// Event to reconcile latency on one context.
pub(crate) async fn latency(
    bench: &Bench,
    options: &Options,
    sections: &mut BTreeMap<&'static str, Section>,
    goals: &mut Vec<Goal>,
) -> Result<(), String> {
    progress("latency");
    let latency = LatencySpec {
        objects: options.latency_objects,
        rate_per_s: options.latency_rate_per_s,
        seconds: options.latency_seconds,
        tail_ms: options.latency_tail_ms,
    };
    let mut spec = bench.spec(Side::Baseline, &contexts(1, 1), "bench-lat");
    spec.expect = options.latency_objects;
    spec.latency = Some(latency);
    let runs = bench.pairs(&spec).await?;
    let p50 = figure("event to reconcile p50", "ms", &runs, |o| {
        percentile(&o.latencies_ms, 50.0)
    });
    let p99 = figure("event to reconcile p99", "ms", &runs, |o| {
        percentile(&o.latencies_ms, 99.0)
    });
    let missed = figure("writes coalesced (not seen)", "count", &runs, |o| {
        o.missed as f64
    });
    goals.push(Goal {
        section: "latency",
        goal: "kubeplex p50 and p99 <= 1.1x baseline".into(),
        measured: format!("p50 {:.2}x, p99 {:.2}x", p50.ratio, p99.ratio),
        met: p50.ratio <= 1.1 && p99.ratio <= 1.1,
    });
    sections.insert(
        "latency",
        Section {
            title: "event -> reconcile latency".into(),
            method: format!(
                "one context (cluster-0, namespace bench-lat, {} objects); after sync the child merge-patches \
                 data.seq on lat-(seq mod {}) at {}/s for {} s; latency = write sent -> start of the first \
                 reconcile that sees that seq and began after it was sent (the same process's monotonic clock); \
                 percentiles per run, spread over runs.",
                options.latency_objects, options.latency_objects, options.latency_rate_per_s, options.latency_seconds
            ),
            figures: vec![p50, p99, missed],
            notes: Vec::new(),
        },
    );
    Ok(())
}
