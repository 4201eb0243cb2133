//! Sections `memory` and `shared_watches`: RSS and heap with one controller, and K controllers on one watch.

use std::collections::BTreeMap;

use crate::child::Side;
use crate::config::Options;
use crate::figures::{Goal, Section};
use crate::harness::{Bench, contexts, figure, progress};

const MB: f64 = 1024.0 * 1024.0;

/// Memory with K = 1 controller, and shared watches with K = 1 and 4.
pub(crate) async fn memory(
    bench: &Bench,
    options: &Options,
    sections: &mut BTreeMap<&'static str, Section>,
    goals: &mut Vec<Goal>,
) -> Result<(), String> {
    let mut memory = Section {
        title: "memory".into(),
        method: format!(
            "one context (cluster-0, namespace bench-mem, {} ConfigMaps of ~0.6 KB); RSS (/proc/self/status VmRSS) \
             and live heap bytes (a counting global allocator) read in the child before the controller starts \
             and again once every object was reconciled plus {} ms; each side in its own process.",
            options.memory_objects, options.memory_settle_ms
        ),
        ..Section::default()
    };
    let mut shared = Section {
        title: "shared watches".into(),
        method: "K controllers on the same (context, kind, namespace) as in memory. Baseline: K kube-runtime \
                 Controllers (each opens its own watch and cache). kubeplex: K controllers in one Manager."
            .into(),
        ..Section::default()
    };
    let mut heap_by_k = Vec::new();
    for &k in &options.shared_controllers {
        progress(&format!("memory: {k} controller(s)"));
        let mut spec = bench.spec(Side::Baseline, &contexts(1, 1), "bench-mem");
        spec.controllers = k;
        spec.expect = options.memory_objects * k;
        spec.settle_ms = options.memory_settle_ms;
        let runs = bench.pairs(&spec).await?;
        let n = options.memory_objects as f64;
        let rss = figure(format!("RSS delta, K={k}"), "MB", &runs, |o| {
            (o.rss_after as f64 - o.rss_before as f64) / MB
        });
        let heap = figure(format!("heap delta, K={k}"), "MB", &runs, |o| {
            (o.heap_after as f64 - o.heap_before as f64) / MB
        });
        let per_object = figure(format!("heap per cached object, K={k}"), "B", &runs, |o| {
            (o.heap_after as f64 - o.heap_before as f64) / n
        });
        let watches = figure(format!("watches opened, K={k}"), "count", &runs, |o| {
            o.watches_opened as f64
        });
        let synced = figure(format!("time to synced, K={k}"), "s", &runs, |o| o.synced_s);
        heap_by_k.push((
            k,
            heap.baseline.median,
            heap.kubeplex.median,
            watches.kubeplex.median,
        ));
        if k == 1 {
            goals.push(Goal {
                section: "memory",
                goal: "kubeplex RSS and heap per cached object <= 1.0x baseline".into(),
                measured: format!(
                    "RSS {:.2}x, heap/object {:.2}x",
                    rss.ratio, per_object.ratio
                ),
                met: rss.ratio <= 1.0 && per_object.ratio <= 1.0,
            });
            memory.figures.extend([
                rss.clone(),
                heap.clone(),
                per_object.clone(),
                synced.clone(),
            ]);
        }
        shared.figures.extend([watches, rss, heap, per_object]);
    }
    if let (Some(one), Some(many)) = (heap_by_k.first(), heap_by_k.last())
        && many.0 > one.0
    {
        let (b, k) = (many.1 / one.1, many.2 / one.2);
        shared.notes.push(format!(
            "heap K={}/K={}: baseline {b:.2}, kubeplex {k:.2}",
            many.0, one.0
        ));
        goals.push(Goal {
            section: "shared_watches",
            goal: format!(
                "kubeplex K={} opens 1 watch and heap ~= K={} (<= 1.2x)",
                many.0, one.0
            ),
            measured: format!("{} watch(es), heap {k:.2}x", many.3),
            met: many.3 == 1.0 && k <= 1.2,
        });
    }
    sections.insert("memory", memory);
    sections.insert("shared_watches", shared);
    Ok(())
}
