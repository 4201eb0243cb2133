//! Section `throughput`: a full resync across the 3 clusters at several concurrencies.

use std::collections::BTreeMap;

use crate::child::Side;
use crate::config::Options;
use crate::figures::{Goal, Section};
use crate::harness::{Bench, contexts, figure, progress};

/// A full resync across the 3 clusters at several concurrencies.
pub(crate) async fn throughput(
    bench: &Bench,
    options: &Options,
    sections: &mut BTreeMap<&'static str, Section>,
    _goals: &mut Vec<Goal>,
) -> Result<(), String> {
    let mut section = Section {
        title: "reconcile throughput".into(),
        method: format!(
            "{} ConfigMaps across the 3 clusters (namespace bench-tp); each reconcile GETs its object from the API \
             server. Rate = objects / (last first-reconcile done - first reconcile start). Concurrency n is the total: \
             kubeplex Plan::concurrency(n); baseline one Controller per cluster with concurrency n and a shared \
             semaphore of n permits around the reconcile body.",
            options.throughput_objects
        ),
        ..Section::default()
    };
    for &n in &options.throughput_concurrency {
        progress(&format!("throughput: concurrency {n}"));
        let mut spec = bench.spec(Side::Baseline, &contexts(3, 3), "bench-tp");
        spec.concurrency = Some(n);
        spec.get_per_reconcile = true;
        spec.expect = options.throughput_objects;
        spec.distinct = true;
        let runs = bench.pairs(&spec).await?;
        let objects = options.throughput_objects as f64;
        section.figures.push(figure(
            format!("reconciles per second, concurrency {n}"),
            "1/s",
            &runs,
            |o| objects / (o.done_s.unwrap_or(f64::NAN) - o.first_reconcile_s.unwrap_or(f64::NAN)),
        ));
        section.figures.push(figure(
            format!("time to all reconciled, concurrency {n}"),
            "s",
            &runs,
            |o| o.done_s.unwrap_or(f64::NAN),
        ));
    }
    sections.insert("throughput", section);
    Ok(())
}
