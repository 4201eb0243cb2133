//! Section `member_churn`: the leak check. A member whose children the operator caches (N Deployments:
//! N / 10 parents × 10 namespaces) joins and leaves again and again; a leave must close the member's
//! watches and free their caches, so the operator's memory after the last cycle is where it was after the
//! first. The operator (the member sections' `__fleet` process) reports its RSS (`VmRSS`) and live heap (the
//! bench's counting allocator) when the parent asks; with `KUBEPLEX_BENCH_MALLOC_TRIM=1` it returns freed
//! heap to the OS before each reading.

use std::time::{Duration, Instant};

use super::cluster::{MEMBER, MemberCluster, MemberOptions, Stray, stray_notes};
use super::fleet::Fleet;
use crate::child_cache::settled;
use crate::figures::{Figure, Goal, Section, linear_fit, percentile};
use crate::fleet::{Host, Operator, Reading};
use crate::harness::progress;

/// Goal: RSS after the cycles within this factor of where it started.
const GOAL_RATIO: f64 = 1.10;
/// The children's namespaces in the member; every parent wants a Deployment in each.
const NAMESPACES: usize = 10;
/// The longest the operator's heap may take to settle.
const SETTLE_LIMIT: Duration = Duration::from_secs(30);
const MB: f64 = 1024.0 * 1024.0;

/// What one cycle measured.
#[derive(Clone, Debug, Default)]
pub(super) struct Cycle {
    pub join_s: f64,
    /// Until no child and no Secret was left; NaN when the leave left children behind.
    pub leave_s: f64,
    /// Children the leave left behind (the parent deleted them).
    pub stray: Vec<Stray>,
    /// Once every child was in the member (caches full; not settled).
    pub joined: Reading,
    /// After the leave, settled.
    pub left: Reading,
}

pub(crate) async fn run(
    host: &Host<'_>,
    cluster: &MemberCluster,
    options: &MemberOptions,
) -> Result<(Section, Goal), String> {
    if options.churn_objects == 0 || options.churn_cycles == 0 {
        return Err("member_churn: at least one object and one cycle".into());
    }
    let parents = options.churn_objects.div_ceil(NAMESPACES);
    let namespaces: Vec<String> = (0..NAMESPACES)
        .map(|i| format!("members-churn-{i}"))
        .collect();
    cluster.create_namespaces(&namespaces).await?;
    progress(&format!(
        "member_churn: {} children ({parents} parents x {NAMESPACES} namespaces), a warm-up cycle and {} \
         counted",
        parents * NAMESPACES,
        options.churn_cycles
    ));
    let mut fleet = Fleet::start(host, cluster, parents, &namespaces, 4000).await?;
    let step = Duration::from_millis(options.settle_step_ms);
    let warm_up = cycle(cluster, &mut fleet, step).await?;
    progress(&format!("member_churn: warm-up: {}", warm_up.summary()));
    let mut cycles = Vec::new();
    for n in 0..options.churn_cycles {
        let done = cycle(cluster, &mut fleet, step).await?;
        progress(&format!(
            "member_churn: cycle {}/{}: {}",
            n + 1,
            options.churn_cycles,
            done.summary()
        ));
        cycles.push(done);
    }
    fleet.stop().await?;
    Ok(report(parents * NAMESPACES, step, &warm_up, &cycles))
}

impl Cycle {
    fn summary(&self) -> String {
        let leave = if self.stray.is_empty() {
            format!("leave {:.2} s", self.leave_s)
        } else {
            format!("the leave left {} child(ren) behind", self.stray.len())
        };
        format!(
            "join {:.2} s, {leave}, then RSS {:.1} MB, heap {:.1} MB",
            self.join_s,
            self.left.rss as f64 / MB,
            self.left.heap as f64 / MB
        )
    }
}

/// The member joins (the parent waits for every child) and leaves (until no child and no Secret is left).
async fn cycle(
    cluster: &MemberCluster,
    fleet: &mut Fleet,
    step: Duration,
) -> Result<Cycle, String> {
    let join_s = cluster.join(&fleet.observer, fleet.children).await?;
    let joined = fleet.operator.ask().await?;
    let leave = cluster.leave(&fleet.observer).await?;
    let left = settled_reading(&mut fleet.operator, step).await?;
    Ok(Cycle {
        join_s,
        // NaN (children left behind) stays NaN.
        leave_s: leave.children_gone_s + (leave.secret_gone_s - leave.children_gone_s).max(0.0),
        stray: leave.stray,
        joined,
        left,
    })
}

/// Asks every `step` until the heap stopped falling (the last readings agree): what a leave left behind
/// once the parents' status writes after it are done; the last reading.
pub(super) async fn settled_reading(
    operator: &mut Operator,
    step: Duration,
) -> Result<Reading, String> {
    let start = Instant::now();
    let mut heaps = Vec::new();
    loop {
        let reading = operator.ask().await?;
        heaps.push(reading.heap as f64);
        if settled(&heaps) || start.elapsed() > SETTLE_LIMIT {
            return Ok(reading);
        }
        tokio::time::sleep(step).await;
    }
}

fn report(children: usize, step: Duration, warm_up: &Cycle, cycles: &[Cycle]) -> (Section, Goal) {
    let last = cycles.last().unwrap_or(warm_up);
    let (before, after) = (warm_up.left, last.left);
    let rss_ratio = after.rss as f64 / before.rss as f64;
    let heap_ratio = after.heap as f64 / before.heap as f64;
    let mb = |bytes: u64| bytes as f64 / MB;
    let series = |of: fn(&Reading) -> u64| -> Vec<f64> {
        std::iter::once(warm_up)
            .chain(cycles)
            .map(|c| mb(of(&c.left)))
            .collect()
    };
    let (rss, heap) = (series(|r| r.rss), series(|r| r.heap));
    // Per cycle, over the readings after each leave (the warm-up's is cycle 0).
    let slope = |values: &[f64]| {
        let points: Vec<(f64, f64)> = values
            .iter()
            .enumerate()
            .map(|(i, v)| (i as f64, *v))
            .collect();
        if points.len() < 2 {
            f64::NAN
        } else {
            linear_fit(&points).slope * 1024.0
        }
    };
    let of = |f: fn(&Cycle) -> f64| -> Vec<f64> { cycles.iter().map(f).collect() };
    let list = |values: &[f64]| {
        values
            .iter()
            .map(|v| format!("{v:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let trim = std::env::var_os("KUBEPLEX_BENCH_MALLOC_TRIM").is_some_and(|v| v == "1");
    let section = Section {
        title: "memory after members join and leave (no baseline: kube-runtime has no members)"
            .into(),
        method: format!(
            "{children} Deployments in {MEMBER} ({} parents in cluster-0 x {NAMESPACES} namespaces), cached by the \
             member sections' kubeplex operator (metadata only) while the member is joined. A warm-up cycle, then \
             {} counted cycles: create the member's Secret, wait until every child is in the member, read the \
             operator's memory, delete the Secret, wait until no child and no Secret is left, read again every \
             {} ms until the heap stopped falling (4 readings within 2 %). RSS is VmRSS, heap the live bytes of \
             the bench's counting allocator, both read in the operator process{}. Children still in the member \
             10 s after the Secret went are counted as left behind, named in the notes (leave 0 is the warm-up's) \
             and deleted by hand.",
            children / NAMESPACES,
            cycles.len(),
            step.as_millis(),
            if trim {
                ", after malloc_trim(0) (KUBEPLEX_BENCH_MALLOC_TRIM=1)"
            } else {
                ""
            }
        ),
        figures: vec![
            Figure::new("RSS after the warm-up cycle", "MB", &[], &[mb(before.rss)]),
            Figure::new("RSS after the last cycle", "MB", &[], &[mb(after.rss)]),
            Figure::new("RSS after the last / after warm-up", "x", &[], &[rss_ratio]),
            Figure::new(
                "heap after the warm-up cycle",
                "MB",
                &[],
                &[mb(before.heap)],
            ),
            Figure::new("heap after the last cycle", "MB", &[], &[mb(after.heap)]),
            Figure::new(
                "heap after the last / after warm-up",
                "x",
                &[],
                &[heap_ratio],
            ),
            Figure::new(
                "heap growth per cycle (least squares)",
                "KB",
                &[],
                &[slope(&heap)],
            ),
            Figure::new(
                "RSS growth per cycle (least squares)",
                "KB",
                &[],
                &[slope(&rss)],
            ),
            // A leak grows every cycle; an allocator settling into its working set grows early and stops.
            Figure::new(
                "RSS growth per cycle, last half",
                "KB",
                &[],
                &[slope(&rss[rss.len() / 2..])],
            ),
            Figure::new(
                "heap while joined",
                "MB",
                &[],
                &cycles.iter().map(|c| mb(c.joined.heap)).collect::<Vec<_>>(),
            ),
            Figure::new(
                "join: every child in the member",
                "s",
                &[],
                &of(|c| c.join_s),
            ),
            Figure::new(
                "leave: no child and no Secret left",
                "s",
                &[],
                &of(|c| c.leave_s),
            ),
            Figure::new(
                "children left behind per leave",
                "count",
                &[],
                &of(|c| c.stray.len() as f64),
            ),
        ],
        notes: vec![
            format!("RSS after each leave, warm-up first (MB): {}", list(&rss)),
            format!("heap after each leave, warm-up first (MB): {}", list(&heap)),
            format!(
                "join of {children} children: p50 {:.2} s, max {:.2} s",
                percentile(&of(|c| c.join_s), 50.0),
                percentile(&of(|c| c.join_s), 100.0)
            ),
        ]
        .into_iter()
        .chain(stray_notes(
            0,
            std::iter::once(warm_up).chain(cycles).map(|c| &c.stray[..]),
        ))
        .collect(),
    };
    let goal = Goal {
        section: "member_churn",
        goal: format!(
            "RSS after {} join/leave cycles of a member with {children} cached children <= {GOAL_RATIO}x after warm-up",
            cycles.len()
        ),
        measured: format!(
            "RSS {:.1} -> {:.1} MB ({rss_ratio:.2}x), heap {:.1} -> {:.1} MB ({heap_ratio:.2}x)",
            mb(before.rss),
            mb(after.rss),
            mb(before.heap),
            mb(after.heap)
        ),
        met: rss_ratio <= GOAL_RATIO,
    };
    (section, goal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cycle(rss_mb: u64, heap_mb: u64) -> Cycle {
        let reading = |rss: u64, heap: u64| Reading {
            cpu_s: 0.0,
            rss: rss << 20,
            heap: heap << 20,
            ..Reading::default()
        };
        Cycle {
            join_s: 1.0,
            leave_s: 2.0,
            stray: Vec::new(),
            joined: reading(rss_mb + 10, heap_mb + 10),
            left: reading(rss_mb, heap_mb),
        }
    }

    #[test]
    fn the_last_cycle_is_judged_against_the_warm_up() {
        let mut stray = cycle(104, 41);
        stray.leave_s = f64::NAN;
        stray.stray = vec![Stray {
            namespace: "ns".into(),
            name: "app".into(),
            recreated: true,
        }];
        let (section, goal) = report(
            1000,
            Duration::from_millis(250),
            &cycle(100, 40),
            &[stray, cycle(108, 42)],
        );
        assert!(goal.met, "{goal:?}");
        let named = |name: &str| {
            section
                .figures
                .iter()
                .find(|f| f.name == name)
                .unwrap_or_else(|| panic!("no figure {name}"))
                .kubeplex
                .median
        };
        assert!((named("RSS after the last / after warm-up") - 1.08).abs() < 1e-9);
        assert!((named("heap after the last / after warm-up") - 1.05).abs() < 1e-9);
        assert!((named("heap growth per cycle (least squares)") - 1024.0).abs() < 1e-6);
        // After 100, 104 and 108 MB, the last half is 104 and 108.
        assert!((named("RSS growth per cycle, last half") - 4096.0).abs() < 1e-6);
        assert!((named("leave: no child and no Secret left") - 2.0).abs() < 1e-9);
        assert!(
            section
                .notes
                .iter()
                .any(|n| n.starts_with("leave 1: 1 child")
                    && n.ends_with("ns/app: created again during the leave (new UID)")),
            "{:?}",
            section.notes
        );
        let (_, missed) = report(
            1000,
            Duration::from_millis(250),
            &cycle(100, 40),
            &[cycle(111, 40)],
        );
        assert!(!missed.met, "{missed:?}");
    }
}
