//! The fleet section's figures and goals, from the samples of every run.

use std::collections::BTreeMap;

use super::setup::{FleetOptions, Sample};
use crate::figures::{Figure, Goal, Section, Spread, percentile};

const MB: f64 = 1024.0 * 1024.0;

type Runs = BTreeMap<usize, (Vec<Sample>, Vec<Sample>)>;

fn figure(
    name: impl Into<String>,
    unit: &'static str,
    (baseline, kubeplex): &(Vec<Sample>, Vec<Sample>),
    f: impl Fn(&Sample) -> f64,
) -> Figure {
    let b: Vec<f64> = baseline.iter().map(&f).collect();
    let k: Vec<f64> = kubeplex.iter().map(&f).collect();
    Figure::new(name, unit, &b, &k)
}

pub(super) fn report(
    options: &FleetOptions,
    runs: &Runs,
    admission: &Sample,
) -> (Section, Vec<Goal>) {
    let p = options.parents;
    let (c, n) = (options.clusters, options.namespaces);
    let children = p * c * n;
    let victims = children.div_ceil(10);
    let mut section = Section {
        title: "the fleet scenario".into(),
        method: format!(
            "P FleetApp parents (spec image, replicas, namespaces; like the example's AppDeployment) in namespace \
             fleet of cluster-0, each wanting a Deployment in {n} namespaces of {c} child contexts (cluster-1, \
             cluster-2); P = {p}, scaling row P = {sizes}. Per run: the parent creates the P parents (32 in \
             flight), starts a fresh operator process and times, with its own watches and from the operator's \
             start: every child present with the right image; every parent with the finalizer and a Ready \
             status (Applied=True, AllClustersApplied, every cluster Applied with {n} children). Then it deletes every \
             tenth child by hand ({victims} at P = {p}) and times until each is back with a new UID, then \
             deletes every parent (one delete-collection) and times until parents and children are gone. \
             kubeplex: the operator written as examples/fleet (cx.child per cluster and namespace; the runtime \
             applies, prunes, keeps the finalizer and writes the status). Baseline: a kube-runtime Controller \
             on the parents (generation + finalizers predicate) with the stock finalizer helper, one reflector \
             per child cluster fed back through watches_stream, server-side apply of each child, prune by \
             label, the same status written only when it changed. Both unbounded concurrency, requeue 1 h, \
             error requeue 5 s. CPU: the operator's own (getrusage) at each point; the API servers' and \
             etcds' from /proc. Requests and 409s: the API servers' apiserver_request_total (watches and the \
             parent's own deletes excepted). /readyz (kubeplex only): polled by the parent every 250 ms, a \
             failure is an answer other than 200 or none within 1 s.",
            sizes = runs
                .keys()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        ..Section::default()
    };
    let mut goals = Vec::new();
    let Some(main) = runs.get(&p) else {
        return (section, goals);
    };
    let children_s = figure(
        format!("every child with the right image, P={p}"),
        "s",
        main,
        |s| s.children_s,
    );
    let ready_s = figure(
        format!("every parent finalizer + Ready, P={p}"),
        "s",
        main,
        |s| s.ready_s,
    );
    let cpu_repaired = figure("operator CPU, to converged + repaired", "s", main, |s| {
        s.repaired.cpu_s
    });
    let conflicts = figure("409 Conflict responses", "count", main, |s| s.conflicts);
    let readyz = figure("/readyz failures (kubeplex)", "count", main, |s| {
        s.readyz.as_ref().map_or(f64::NAN, |r| r.failures as f64)
    });
    section.figures.extend([
        figure("time to synced", "s", main, |s| s.synced_s),
        children_s.clone(),
        ready_s.clone(),
        figure(
            "status lag: every parent ready after every child",
            "s",
            main,
            |s| s.ready_s - s.children_s,
        ),
        figure(
            format!("reconverge after deleting {victims} children"),
            "s",
            main,
            |s| s.repair_s,
        ),
        figure(
            "delete all parents: parents+children gone",
            "s",
            main,
            |s| s.delete_s,
        ),
        figure("operator CPU, to converged", "s", main, |s| {
            s.converged.cpu_s
        }),
        cpu_repaired.clone(),
        figure("operator CPU, whole scenario", "s", main, |s| {
            s.deleted.cpu_s
        }),
        figure("operator CPU, deleting every parent", "s", main, |s| {
            s.deleted.cpu_s - s.repaired.cpu_s
        }),
        figure("operator RSS after converging", "MB", main, |s| {
            s.converged.rss as f64 / MB
        }),
        figure("operator heap after converging", "MB", main, |s| {
            s.converged.heap as f64 / MB
        }),
        figure(
            "connections to one API server, most at once to converged",
            "count",
            main,
            |s| f64::from(s.converged.connections_peak),
        ),
        figure(
            "connections to one API server, once converged",
            "count",
            main,
            |s| f64::from(s.converged.connections),
        ),
        figure("API servers + etcds CPU, to converged", "s", main, |s| {
            s.server_cpu_converged_s
        }),
        figure("API servers + etcds CPU, whole scenario", "s", main, |s| {
            s.server_cpu_s
        }),
        figure("API requests by the operator", "count", main, |s| {
            s.requests
        }),
        conflicts.clone(),
        readyz.clone(),
    ]);
    for (size, runs) in runs {
        section.figures.push(figure(
            format!("scaling: every parent ready, P={size}"),
            "s",
            runs,
            |s| s.ready_s,
        ));
        section.figures.push(figure(
            format!("scaling: operator CPU to converged, P={size}"),
            "s",
            runs,
            |s| s.converged.cpu_s,
        ));
        // The servers' share tells a server-bound convergence from an operator-bound one.
        section.figures.push(figure(
            format!("scaling: servers' CPU to converged, P={size}"),
            "s",
            runs,
            |s| s.server_cpu_converged_s,
        ));
    }
    if let Some(log) = main
        .1
        .iter()
        .filter_map(|s| s.readyz.as_ref())
        .find(|log| log.failures > 0)
    {
        section.notes.push(format!(
            "kubeplex /readyz: {} of {} polls failed in one run; slowest answer {:.0} ms; first failure: {}",
            log.failures,
            log.polls,
            log.slowest_ms,
            log.first_failure.as_deref().unwrap_or_default()
        ));
    }

    goals.push(Goal {
        section: "fleet",
        goal: format!("kubeplex converge time <= 1.0x baseline at P={p}"),
        measured: format!(
            "children {:.2}x, every parent ready {:.2}x",
            children_s.ratio, ready_s.ratio
        ),
        met: children_s.ratio <= 1.0 && ready_s.ratio <= 1.0,
    });
    goals.push(Goal {
        section: "fleet",
        goal: format!("kubeplex operator CPU <= 1.0x baseline at P={p}"),
        measured: format!(
            "{:.2}x (operator start -> converged -> repaired)",
            cpu_repaired.ratio
        ),
        met: cpu_repaired.ratio <= 1.0,
    });
    if let Some(note) = requests_by_kind(main) {
        section.notes.push(note);
    }
    if let (Some((&small, first)), Some((&big, last))) =
        (runs.first_key_value(), runs.last_key_value())
        && big > small
    {
        let median = |samples: &[Sample]| {
            let t: Vec<f64> = samples.iter().map(|s| s.ready_s).collect();
            Spread::of(&t).median
        };
        let (b, k) = (
            median(&last.0) / median(&first.0),
            median(&last.1) / median(&first.1),
        );
        let linear = big as f64 / small as f64;
        section.notes.push(format!(
            "T({big})/T({small}) of every parent ready: baseline {b:.2}, kubeplex {k:.2} (linear: {linear:.1})"
        ));
        goals.push(Goal {
            section: "fleet",
            goal: format!(
                "kubeplex T({big})/T({small}) <= {:.1} (linear + 10 %)",
                linear * 1.1
            ),
            measured: format!("{k:.2} (baseline {b:.2})"),
            met: k <= linear * 1.1,
        });
    }
    let storm = (p as f64 / 100.0).max(1.0);
    goals.push(Goal {
        section: "fleet",
        goal: format!(
            "no 409 storms: kubeplex <= {storm:.0} Conflict responses per run (1 % of P)"
        ),
        measured: format!(
            "max {:.0} per run (baseline max {:.0})",
            conflicts.kubeplex.max, conflicts.baseline.max
        ),
        met: conflicts.kubeplex.max <= storm,
    });
    goals.push(Goal {
        section: "fleet",
        goal: "kubeplex /readyz stays 200 throughout".into(),
        measured: format!("max {:.0} failed polls per run", readyz.kubeplex.max),
        met: readyz.kubeplex.max == 0.0,
    });
    // The admission run: kubeplex alone, its webhook called while it converged.
    let times = &admission.admission_ms;
    let (p50, p99) = (percentile(times, 50.0), percentile(times, 99.0));
    let max = times.iter().copied().fold(f64::NAN, f64::max);
    let (count, within) = admission.admission_served;
    let served = if count > 0.0 {
        100.0 * within / count
    } else {
        f64::NAN
    };
    section.notes.push(format!(
        "Admission (one more kubeplex run at P={p}, not in the ratios): a validating webhook for the parents \
         (each child namespace a DNS label, each child context a cluster of the fleet, the cached parents \
         counted), called by the parent over one kept-alive HTTPS connection every 5 ms from the operator's \
         start until every parent was ready: {} answers, p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms \
         (round trips over loopback TLS, the handler's time included); at the server (its \
         controller_runtime_webhook_latency_seconds, the request read to the answer written) {served:.1} % \
         within 5 ms; every parent ready in {:.1} s.",
        times.len(),
        admission.ready_s
    ));
    goals.push(Goal {
        section: "fleet",
        goal: format!("admission p99 <= 5 ms at the handler under the fleet's load at P={p}"),
        measured: format!(
            "{served:.1} % within 5 ms at the server; round trip p99 {p99:.2} ms over {} answers",
            times.len()
        ),
        met: count > 0.0 && within / count >= 0.99,
    });
    (section, goals)
}

/// Where the two sides' requests differ, by verb and resource (medians over the runs), the largest
/// differences first: what to look at when the request count's ratio moves.
fn requests_by_kind((baseline, kubeplex): &(Vec<Sample>, Vec<Sample>)) -> Option<String> {
    let median = |samples: &[Sample], kind: &str| {
        let counts: Vec<f64> = samples
            .iter()
            .map(|s| s.requests_by_kind.get(kind).copied().unwrap_or(0.0))
            .collect();
        Spread::of(&counts).median
    };
    let kinds: std::collections::BTreeSet<&String> = baseline
        .iter()
        .chain(kubeplex)
        .flat_map(|s| s.requests_by_kind.keys())
        .collect();
    let mut rows: Vec<(f64, String)> = kinds
        .into_iter()
        .map(|kind| (median(baseline, kind), median(kubeplex, kind), kind))
        .filter(|(b, k, _)| b != k)
        .map(|(b, k, kind)| ((k - b).abs(), format!("{kind} {b:.0} -> {k:.0}")))
        .collect();
    if rows.is_empty() {
        return None;
    }
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    let rows: Vec<String> = rows.into_iter().map(|(_, row)| row).collect();
    Some(format!(
        "API requests by verb and resource where the sides differ (medians, baseline -> kubeplex): {}",
        rows.join(", ")
    ))
}
