//! Section `many_contexts`: C idle contexts in one process, what each costs and how long the process takes
//! to be ready; at C >= 1 000 (aliases of the three test servers) against the goals for a thousand contexts
//! (ready within 2 s, at most 100 KB RSS per idle context).

use std::collections::BTreeMap;

use crate::child::Side;
use crate::config::Options;
use crate::figures::{Figure, Goal, Section, linear_fit};
use crate::harness::{Bench, contexts, figure, progress};

/// From this many contexts on, the largest C is held to the goals for a thousand contexts.
const MANY: usize = 1000;
/// Goal: time to ready at C >= 1 000.
const READY_GOAL_S: f64 = 2.0;
/// Goal: RSS per idle context at C >= 1 000.
const PER_CONTEXT_GOAL_KB: f64 = 100.0;

/// Idle contexts: memory and time to ready per context.
pub(crate) async fn run(
    bench: &Bench,
    options: &Options,
    sections: &mut BTreeMap<&'static str, Section>,
    goals: &mut Vec<Goal>,
) -> Result<(), String> {
    let mut section = Section {
        title: "many contexts".into(),
        method: "C idle contexts (ctx-i -> cluster i mod 3, empty namespace bench-idle) in one process. Baseline: one \
                 Client and kube-runtime Controller per context. kubeplex: one controller over C contexts (one \
                 client, watch and ping per context). Per-context = (RSS after - RSS before) / C, for VmRSS and for \
                 RssAnon (without the file pages, which shared libraries blur)."
            .into(),
        ..Section::default()
    };
    let mut per_context = Vec::new();
    // (C, baseline total KB, kubeplex total KB): the slope is the cost of one more context, the intercept
    // what the process pays once (threads, probe server), which the per-context division spreads over C.
    let mut totals: Vec<(f64, f64, f64)> = Vec::new();
    // (C, time to ready, RSS per context, heap per context) at the largest C.
    let mut largest: Option<(usize, Figure, Figure, Figure)> = None;
    for &count in &options.idle_contexts {
        progress(&format!("many contexts: {count}"));
        let mut spec = bench.spec(Side::Baseline, &contexts(count, 3), "bench-idle");
        spec.settle_ms = options.idle_settle_ms;
        let runs = bench.pairs(&spec).await?;
        let c = count as f64;
        let rss = figure(format!("RSS per context, C={count}"), "KB", &runs, |o| {
            (o.rss_after as f64 - o.rss_before as f64) / c / 1024.0
        });
        let anon = figure(
            format!("RssAnon per context, C={count}"),
            "KB",
            &runs,
            |o| (o.rss_anon_after as f64 - o.rss_anon_before as f64) / c / 1024.0,
        );
        let heap = figure(format!("heap per context, C={count}"), "KB", &runs, |o| {
            (o.heap_after as f64 - o.heap_before as f64) / c / 1024.0
        });
        let ready = figure(format!("time to ready, C={count}"), "s", &runs, |o| {
            o.synced_s
        });
        per_context.push((count, rss.kubeplex.median));
        totals.push((c, rss.baseline.median * c, rss.kubeplex.median * c));
        if largest.as_ref().is_none_or(|l| l.0 < count) {
            largest = Some((count, ready.clone(), rss.clone(), heap.clone()));
        }
        section.figures.extend([ready, rss, anon, heap]);
    }
    let marginal = (totals.len() >= 2).then(|| {
        let baseline = linear_fit(&totals.iter().map(|t| (t.0, t.1)).collect::<Vec<_>>());
        let kubeplex = linear_fit(&totals.iter().map(|t| (t.0, t.2)).collect::<Vec<_>>());
        section.notes.push(format!(
            "least-squares fit of RSS delta over C: baseline {:.0} KB per context + {:.0} KB once, kubeplex \
             {:.0} KB per context + {:.0} KB once (r^2 {:.3})",
            baseline.slope, baseline.intercept, kubeplex.slope, kubeplex.intercept, kubeplex.r_squared
        ));
        kubeplex
    });
    if let Some(&(count, kb)) = per_context.last() {
        let spread: Vec<String> = per_context
            .iter()
            .map(|(c, kb)| format!("C={c}: {kb:.0} KB"))
            .collect();
        section
            .notes
            .push(format!("kubeplex RSS per context: {}", spread.join(", ")));
        goals.push(Goal {
            section: "many_contexts",
            goal: "kubeplex <= 1 MB RSS per idle context, growing linearly".into(),
            measured: match &marginal {
                Some(fit) => format!(
                    "{:.0} KB per additional context (r^2 {:.3}); {kb:.0} KB per context at C={count} ({})",
                    fit.slope,
                    fit.r_squared,
                    spread.join(", ")
                ),
                None => format!("{kb:.0} KB per context at C={count}"),
            },
            met: kb <= 1024.0
                && marginal
                    .as_ref()
                    .is_none_or(|fit| fit.slope <= 1024.0 && fit.r_squared >= 0.95),
        });
    }
    if let Some((count, ready, rss, heap)) = largest
        && count >= MANY
    {
        goals.extend(thousand_goals(count, &ready, &rss, &heap));
    }
    sections.insert("many_contexts", section);
    Ok(())
}

/// The goals for a thousand contexts (time to ready, RSS per idle context), judged on the kubeplex medians at the largest C.
fn thousand_goals(count: usize, ready: &Figure, rss: &Figure, heap: &Figure) -> [Goal; 2] {
    let (ready_s, rss_kb) = (ready.kubeplex.median, rss.kubeplex.median);
    [
        Goal {
            section: "many_contexts",
            goal: format!("kubeplex ready <= {READY_GOAL_S} s at C={count}"),
            measured: format!(
                "{ready_s:.2} s (baseline {:.2} s, {:.2}x)",
                ready.baseline.median, ready.ratio
            ),
            met: ready_s <= READY_GOAL_S,
        },
        Goal {
            section: "many_contexts",
            goal: format!("kubeplex <= {PER_CONTEXT_GOAL_KB} KB RSS per idle context at C={count}"),
            measured: format!(
                "RSS {rss_kb:.0} KB (baseline {:.0} KB, {:.2}x), heap {:.0} KB (baseline {:.0} KB, {:.2}x)",
                rss.baseline.median,
                rss.ratio,
                heap.kubeplex.median,
                heap.baseline.median,
                heap.ratio
            ),
            met: rss_kb <= PER_CONTEXT_GOAL_KB,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(baseline: f64, kubeplex: f64) -> Figure {
        Figure::new("f", "x", &[baseline], &[kubeplex])
    }

    #[test]
    fn a_thousand_contexts_are_judged_on_the_kubeplex_medians() {
        let [ready, memory] = thousand_goals(
            1000,
            &figure(1.5, 1.8),
            &figure(70.0, 95.0),
            &figure(60.0, 80.0),
        );
        assert!(ready.met && memory.met, "{ready:?} {memory:?}");
        assert!(
            ready.measured.starts_with("1.80 s (baseline 1.50 s"),
            "{ready:?}"
        );
        let [slow, big] = thousand_goals(
            1000,
            &figure(1.0, 2.1),
            &figure(70.0, 101.0),
            &figure(60.0, 80.0),
        );
        assert!(!slow.met && !big.met, "{slow:?} {big:?}");
        assert!(big.goal.contains("C=1000"), "{big:?}");
    }
}
