//! Section `fairness`'s figures and goal, from every run's outcome.

use std::collections::BTreeMap;

use super::spec::{
    FLOOD_WRITERS, FairnessOptions, FairnessOutcome, NAMESPACE, NOISY_CLUSTER, QUIET_CLUSTER,
    Variant,
};
use crate::figures::{Figure, Goal, Section, Spread, percentile};

/// Goal: with fair dispatch, the quiet context's p50 and p99 during the flood at most this many times
/// the same without it.
pub(super) const GOAL_RATIO: f64 = 1.5;

/// The per-run figures of one side.
fn samples(runs: &[FairnessOutcome], of: impl Fn(&FairnessOutcome) -> f64) -> Vec<f64> {
    runs.iter().map(of).collect()
}

fn p(latencies: &[f64], q: f64) -> f64 {
    percentile(latencies, q)
}

/// One run's quiet percentile `q` during the flood over the same without.
fn slowdown(run: &FairnessOutcome, q: f64) -> f64 {
    p(&run.flood_ms, q) / p(&run.reference_ms, q)
}

pub(super) fn report(
    options: &FairnessOptions,
    runs: &BTreeMap<Variant, Vec<FairnessOutcome>>,
) -> (Section, Goal) {
    let none = Vec::new();
    let baseline = runs.get(&Variant::Baseline).unwrap_or(&none);
    let mut figures = Vec::new();
    let mut notes = Vec::new();
    // (variant, p50 slowdown, p99 slowdown), medians over runs.
    let mut slowdowns = Vec::new();
    let base_p50 = Spread::of(&samples(baseline, |r| slowdown(r, 50.0))).median;
    let base_p99 = Spread::of(&samples(baseline, |r| slowdown(r, 99.0))).median;
    slowdowns.push((Variant::Baseline, base_p50, base_p99));
    for variant in [Variant::Fair, Variant::FairCapped, Variant::Fifo] {
        let ours = runs.get(&variant).unwrap_or(&none);
        let v = variant.name();
        let pair = |name: String, unit, of: &dyn Fn(&FairnessOutcome) -> f64| {
            Figure::new(name, unit, &samples(baseline, of), &samples(ours, of))
        };
        for q in [50.0, 99.0] {
            figures.push(pair(format!("quiet p{q} without flood, {v}"), "ms", &|r| {
                p(&r.reference_ms, q)
            }));
            figures.push(pair(format!("quiet p{q} during flood, {v}"), "ms", &|r| {
                p(&r.flood_ms, q)
            }));
            figures.push(pair(
                format!("quiet p{q} flood / no flood, {v}"),
                "x",
                &|r| slowdown(r, q),
            ));
        }
        figures.push(pair(format!("flood drained, {v}"), "s", &|r| {
            r.flood_drained_s
        }));
        slowdowns.push((
            variant,
            Spread::of(&samples(ours, |r| slowdown(r, 50.0))).median,
            Spread::of(&samples(ours, |r| slowdown(r, 99.0))).median,
        ));
    }
    for variant in Variant::ALL {
        let ours = runs.get(&variant).unwrap_or(&none);
        let most = |of: fn(&FairnessOutcome) -> usize| ours.iter().map(of).max().unwrap_or(0);
        let written = Spread::of(&samples(ours, |r| r.flood_written_s)).median;
        let during = Spread::of(&samples(ours, |r| r.flood_ms.len() as f64)).median;
        let delivery = |of: fn(&FairnessOutcome) -> &Vec<f64>, q| {
            Spread::of(&samples(ours, |r| p(of(r), q))).median
        };
        notes.push(format!(
            "{}: quiet change sent -> the process's own watch delivered it (before any dispatch): p50 {:.2} / \
             p99 {:.2} ms without the flood, {:.2} / {:.2} ms during it (medians over runs)",
            variant.name(),
            delivery(|r| &r.reference_delivery_ms, 50.0),
            delivery(|r| &r.reference_delivery_ms, 99.0),
            delivery(|r| &r.flood_delivery_ms, 50.0),
            delivery(|r| &r.flood_delivery_ms, 99.0),
        ));
        notes.push(format!(
            "{}: flood written in {written:.1} s (median), most flood changes waiting {}, {during:.0} quiet \
             changes during the flood (median), quiet changes handled only through a later one {} and never {} \
             (most in a run)",
            variant.name(),
            most(|r| r.flood_backlog),
            most(|r| r.coalesced),
            most(|r| r.unseen),
        ));
    }
    let section = Section {
        title: "fairness: a quiet context's latency while another floods".into(),
        method: format!(
            "two contexts in one controller: noisy = {NOISY_CLUSTER} with {n} ConfigMaps, quiet = {QUIET_CLUSTER} \
             with one (namespace {NAMESPACE}). The quiet object's data.seq is merge-patched every {period} ms: \
             {reference} s alone (the reference), then while the process patches data.seq of every noisy object \
             once ({n} changes the change filter passes, {writers} writes in flight), until the last of them was \
             reconciled. A reconcile of a change works {work} ms (a sleep holding its run slot; an object \
             unchanged since the initial list is no work), {c} reconciles at once for the controller: the flood \
             is written faster than {c} slots drain it, so it queues. Latency = quiet change sent -> start of \
             the work of the first reconcile that began after it was sent and saw it or a later change (changes \
             waiting together are handled by one reconcile); p50 and p99 per run, and the run's p during the \
             flood / p without. The process also watches the quiet object itself, to tell the servers' and \
             the watch's share of the latency (sent -> delivered) from the dispatch's. Baseline: one kube-runtime Controller per context, each with concurrency {c}, \
             and a shared {c}-permit semaphore around the work. kubeplex: Plan::concurrency({c}) with \
             Dispatch::Fair (fair), Dispatch::Fair + concurrency_per_cluster({cap}) (fair+cap), Dispatch::Fifo \
             (fifo); every side in the same repeat, the order rotating. The baseline column is the same \
             baseline runs in every row.",
            n = options.flood,
            period = options.quiet_period_ms,
            reference = options.reference_seconds,
            writers = FLOOD_WRITERS,
            work = options.work_ms,
            c = options.concurrency,
            cap = options.concurrency.saturating_sub(1).max(1),
        ),
        figures,
        notes,
    };
    let measured: Vec<String> = slowdowns
        .iter()
        .map(|(variant, p50, p99)| format!("{} p50 {p50:.2}x, p99 {p99:.2}x", variant.name()))
        .collect();
    let (_, fair_p50, fair_p99) = slowdowns[1];
    let goal = Goal {
        section: "fairness",
        goal: format!(
            "kubeplex Dispatch::Fair: the quiet context's p50 and p99 during a flood of {} changes <= \
             {GOAL_RATIO}x without",
            options.flood
        ),
        measured: measured.join("; "),
        met: fair_p50 <= GOAL_RATIO && fair_p99 <= GOAL_RATIO,
    };
    (section, goal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(reference_ms: &[f64], flood_ms: &[f64]) -> FairnessOutcome {
        FairnessOutcome {
            reference_ms: reference_ms.to_vec(),
            flood_ms: flood_ms.to_vec(),
            ..FairnessOutcome::default()
        }
    }

    #[test]
    fn the_goal_is_judged_on_fair_dispatch_against_its_own_reference() {
        let runs = |fair: FairnessOutcome| {
            BTreeMap::from([
                (Variant::Baseline, vec![run(&[1.0, 2.0], &[1.0, 2.0])]),
                (Variant::Fair, vec![fair]),
                (Variant::FairCapped, vec![run(&[1.0, 2.0], &[1.0, 2.0])]),
                (Variant::Fifo, vec![run(&[1.0, 2.0], &[900.0, 1800.0])]),
            ])
        };
        let options = FairnessOptions::quick();
        let (section, met) = report(&options, &runs(run(&[2.0, 4.0], &[2.8, 5.6])));
        assert!(met.met, "{met:?}");
        assert!(
            met.measured.contains("fair p50 1.40x, p99 1.40x")
                && met.measured.contains("fifo p50 900.00x"),
            "{met:?}"
        );
        let fifo = section
            .figures
            .iter()
            .find(|f| f.name == "quiet p99 flood / no flood, fifo")
            .expect("a fifo figure");
        assert_eq!((fifo.baseline.median, fifo.kubeplex.median), (1.0, 900.0));
        let (_, missed) = report(&options, &runs(run(&[2.0, 4.0], &[2.0, 6.4])));
        assert!(!missed.met, "p99 1.6x: {missed:?}");
    }
}
