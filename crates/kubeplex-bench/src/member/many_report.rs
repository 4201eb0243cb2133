//! What the `many_members` section measured, as figures, notes and goals.

use std::time::Duration;

use super::aliases::member_name;
use crate::figures::{Figure, Goal, Section, linear_fit};
use crate::fleet::Reading;

/// P: parents, each wanting one Deployment in every member.
pub(super) const PARENTS: usize = 10;

/// Goal: every child in every member within this long of the Secrets' creation.
const JOIN_GOAL_S: f64 = 60.0;
/// Goal: RSS per active member.
const PER_MEMBER_GOAL_KB: f64 = 1024.0;
/// Goal: requests of the process per member per 10 s in steady state, pings included.
const REQUESTS_GOAL: f64 = 1.0;
/// Goal: heap after every member left within this factor of the heap before the joins.
const HEAP_GOAL_RATIO: f64 = 1.10;
/// Goal: a start with the Secrets present is ready no later than this factor of a start without them
/// (plus [`READY_SLACK_S`]): it does not wait for members.
const READY_GOAL_RATIO: f64 = 1.5;
const READY_SLACK_S: f64 = 0.5;
const KB: f64 = 1024.0;

/// One operator process at M members.
#[derive(Clone, Debug, Default)]
pub(super) struct Size {
    pub members: usize,
    /// From the operator's start until ready, with no member Secret.
    pub ready_s: f64,
    /// The parent's creates of the M Secrets.
    pub created_s: f64,
    /// From the first Secret's create until every child is in every member.
    pub join_s: f64,
    /// The operator's CPU from before the joins until every child was in place.
    pub join_cpu_s: f64,
    /// The API servers' and etcds' CPU over the same span.
    pub servers_join_s: f64,
    /// Settled readings: before the joins, with every member joined, after every member left.
    pub before: Reading,
    pub joined: Reading,
    pub left: Reading,
    /// Once more after every member left, after the connection pools' idle timeout: the connections the
    /// leaves' bursts opened to the control cluster are closed by then (full runs only).
    pub idle: Option<Reading>,
    /// Once more, after every watch the operator held during the leaves was ended and started again: a
    /// watch's decode buffer keeps the size of the largest event it streamed (full runs only).
    pub restarted: Option<Reading>,
    /// Requests per second the API servers answered: with the operator and no member, and in steady state
    /// with M members.
    pub idle_rate: f64,
    pub steady_rate: f64,
    /// Pings per second the operator sent (not in the servers' counters): with no member, with M.
    pub idle_pings: f64,
    pub steady_pings: f64,
    /// The servers' requests per second by verb and resource that rose above the rates with no member,
    /// largest first.
    pub steady_kinds: Vec<(String, f64)>,
    /// From the Secrets' delete until no child and no Secret is left; NaN when children were left behind.
    pub leave_s: f64,
    pub left_behind: usize,
}

/// The start of an operator with the M Secrets present.
#[derive(Clone, Debug, Default)]
pub(super) struct Restart {
    pub members: usize,
    /// From the process's start until ready (its caches of the typed contexts synced).
    pub synced_s: f64,
    /// From the spawn, as the parent saw them: ready, and every child in every member.
    pub ready_s: f64,
    pub children_s: f64,
    pub joined: Reading,
    pub leave_s: f64,
    pub left_behind: usize,
}

impl Size {
    fn rss_per_member_kb(&self) -> f64 {
        (self.joined.rss as f64 - self.before.rss as f64) / self.members as f64 / KB
    }

    fn heap_per_member_kb(&self) -> f64 {
        (self.joined.heap as f64 - self.before.heap as f64) / self.members as f64 / KB
    }

    /// The process's requests per member per 10 s: those above the rates with no member, pings included.
    fn requests_per_member(&self) -> f64 {
        let added = (self.steady_rate - self.idle_rate) + (self.steady_pings - self.idle_pings);
        added / self.members as f64 * 10.0
    }

    fn heap_ratio(&self) -> f64 {
        self.of_before(&self.left)
    }

    /// The heap once the pools' idle connections are closed, against before the joins.
    fn heap_ratio_idle(&self) -> Option<f64> {
        self.idle.as_ref().map(|idle| self.of_before(idle))
    }

    /// The heap once every watch started again, against before the joins.
    fn heap_ratio_restarted(&self) -> Option<f64> {
        self.restarted.as_ref().map(|later| self.of_before(later))
    }

    /// A reading's heap against the heap before the joins.
    fn of_before(&self, reading: &Reading) -> f64 {
        reading.heap as f64 / self.before.heap as f64
    }

    /// The ratio the goal judges: the last reading taken.
    fn heap_ratio_judged(&self) -> f64 {
        (self.heap_ratio_restarted())
            .or_else(|| self.heap_ratio_idle())
            .unwrap_or_else(|| self.heap_ratio())
    }

    pub fn summary(&self) -> String {
        let mb = |reading: &Reading| reading.heap as f64 / KB / KB;
        let later = |reading: &Option<Reading>, after: &str| match reading {
            Some(reading) => {
                let ratio = self.of_before(reading);
                format!(" ({ratio:.2}x, {:.1} MB, after {after})", mb(reading))
            }
            None => String::new(),
        };
        let idle = later(&self.idle, "the pools' idle timeout");
        let restarted = later(&self.restarted, "the watches' restart");
        let heaps = format!(
            "{:.1} MB before, {:.1} MB after",
            mb(&self.before),
            mb(&self.left)
        );
        format!(
            "every child {:.2} s after the Secrets' creation; {:.0} KB RSS, {:.0} KB heap per member; {:.2} \
             requests per member per 10 s; all left in {:.2} s, heap {:.2}x of before ({heaps}){idle}{restarted}, {} child(ren) left",
            self.join_s,
            self.rss_per_member_kb(),
            self.heap_per_member_kb(),
            self.requests_per_member(),
            self.leave_s,
            self.heap_ratio(),
            self.left_behind
        )
    }
}

pub(super) fn report(
    sizes: &[Size],
    restart: &Restart,
    window: Duration,
    section_s: f64,
) -> (Section, Vec<Goal>) {
    let one = |name: String, unit: &'static str, value: f64| Figure::new(name, unit, &[], &[value]);
    let mut figures = Vec::new();
    for s in sizes {
        let m = s.members;
        figures.extend([
            one(
                format!("Secrets created -> every child in every member, M={m}"),
                "s",
                s.join_s,
            ),
            one(format!("creating the Secrets, M={m}"), "s", s.created_s),
            one(
                format!("operator RSS per member, M={m}"),
                "KB",
                s.rss_per_member_kb(),
            ),
            one(
                format!("operator heap per member, M={m}"),
                "KB",
                s.heap_per_member_kb(),
            ),
            one(
                format!("operator CPU during the join, M={m}"),
                "s",
                s.join_cpu_s,
            ),
            one(
                format!("API servers + etcds CPU during the join, M={m}"),
                "s",
                s.servers_join_s,
            ),
            one(
                format!("requests per second, no member, M={m}"),
                "req/s",
                s.idle_rate,
            ),
            one(
                format!("requests per second in steady state, M={m}"),
                "req/s",
                s.steady_rate,
            ),
            one(
                format!("operator pings per second, no member, M={m}"),
                "req/s",
                s.idle_pings,
            ),
            one(
                format!("operator pings per second in steady state, M={m}"),
                "req/s",
                s.steady_pings,
            ),
            one(
                format!("requests per member per 10 s in steady state, M={m}"),
                "req",
                s.requests_per_member(),
            ),
            one(
                format!("all members left: no child and no Secret, M={m}"),
                "s",
                s.leave_s,
            ),
            one(
                format!("heap after all left / before the joins, M={m}"),
                "x",
                s.heap_ratio(),
            ),
        ]);
        if let Some(ratio) = s.heap_ratio_idle() {
            figures.push(one(
                format!(
                    "heap after all left and the pools' idle timeout / before the joins, M={m}"
                ),
                "x",
                ratio,
            ));
        }
        if let Some(ratio) = s.heap_ratio_restarted() {
            figures.push(one(
                format!("heap after all left and the watches' restart / before the joins, M={m}"),
                "x",
                ratio,
            ));
        }
        figures.extend([one(
            format!("children left behind after all left, M={m}"),
            "count",
            s.left_behind as f64,
        )]);
    }
    let fit = |per: fn(&Reading) -> u64| {
        let points: Vec<(f64, f64)> = sizes
            .iter()
            .map(|s| {
                (
                    s.members as f64,
                    (per(&s.joined) as f64 - per(&s.before) as f64) / KB,
                )
            })
            .collect();
        (points.len() >= 2).then(|| linear_fit(&points))
    };
    let (rss_fit, heap_fit) = (fit(|r| r.rss), fit(|r| r.heap));
    if let (Some(rss), Some(heap)) = (rss_fit, heap_fit) {
        figures.push(one(
            "RSS per additional member (least squares)".into(),
            "KB",
            rss.slope,
        ));
        figures.push(one(
            "heap per additional member (least squares)".into(),
            "KB",
            heap.slope,
        ));
    }
    let m = restart.members;
    let largest = sizes.iter().find(|s| s.members == m);
    let no_member_ready = largest.map_or(f64::NAN, |s| s.ready_s);
    figures.extend([
        one(
            format!("start with no member Secret: ready, M={m}"),
            "s",
            no_member_ready,
        ),
        one(
            format!("start with {m} member Secrets: ready (typed contexts)"),
            "s",
            restart.synced_s,
        ),
        one(
            format!("start with {m} member Secrets: every child in every member"),
            "s",
            restart.children_s,
        ),
        one(
            format!("start with {m} member Secrets: operator RSS once joined"),
            "MB",
            restart.joined.rss as f64 / KB / KB,
        ),
        one("many_members section time".into(), "s", section_s),
    ]);
    let mut notes: Vec<String> = sizes
        .iter()
        .map(|s| format!("M={}: {}", s.members, s.summary()))
        .collect();
    for s in sizes.iter().filter(|s| !s.steady_kinds.is_empty()) {
        let kinds: Vec<String> = (s.steady_kinds.iter())
            .map(|(kind, rate)| format!("{kind} {rate:.1}"))
            .collect();
        notes.push(format!(
            "M={}: the servers' requests per second above the rates with no member, by verb and resource: {}",
            s.members,
            kinds.join(", ")
        ));
    }
    if let (Some(rss), Some(heap)) = (rss_fit, heap_fit) {
        notes.push(format!(
            "least-squares fit over M of the memory added by the joins: RSS {:.0} KB per member + {:.0} KB \
             (r^2 {:.3}), heap {:.0} KB per member + {:.0} KB (r^2 {:.3})",
            rss.slope, rss.intercept, rss.r_squared, heap.slope, heap.intercept, heap.r_squared
        ));
    }
    notes.push(format!(
        "start with {m} Secrets: ready {:.2} s after the spawn ({:.2} s in the process), every child {:.2} s \
         after the spawn; the last leave took {:.2} s, {} child(ren) left behind",
        restart.ready_s, restart.synced_s, restart.children_s, restart.leave_s, restart.left_behind
    ));
    let section = Section {
        title: "many members in one process (no baseline: kube-runtime has no members)".into(),
        method: format!(
            "M members ({}) are aliases of the three test API servers (member i -> cluster i mod 3), each \
             registered by a Secret in cluster-0 holding a kubeconfig of one context named after the member, \
             defaulting to a namespace of its own (named after the member too). The operator is the member \
             sections' (its own process; KubeconfigSecrets, LeavePolicy::Delete) with owns(Deployment, \
             members) declared with Child::member_default_namespace, so each member's child watch and \
             children are in its namespace; {PARENTS} FleetApp parents each want one Deployment in every \
             member. For each M, smallest first, a fresh operator: ready, every parent reconciled, settled \
             memory read (VmRSS and the counting allocator's live heap, in the operator's process); requests \
             counted over {w} s; the M Secrets created 32 at a time, timed from the first create until the \
             parent's watches of the three servers see all M x {PARENTS} children; memory read again once \
             settled; requests counted over {w} s; every Secret deleted, timed until no child and no Secret \
             is left; memory read once settled. Requests: apiserver_request_total of the three servers, \
             every verb but WATCH, less the parent's own readings, plus the operator's pings (GET /version, which those counters leave out) from its own \
             kubeplex_cluster_healthchecks_total; per member = (rates with M members - rates with the \
             operator and no member) / M x 10 s. The servers' own loops (their Leases) are in both rates. Memory per member = (joined - before) \
             / M; the fit is over the M values. Then, with the {m} Secrets created while no operator runs, a \
             new operator is started: time to ready (caches of the typed contexts synced) and to every child \
             in every member, from the spawn.",
            names_example(),
            w = window.as_secs()
        ),
        figures,
        notes,
    };
    (section, goals(sizes, restart, rss_fit.map(|f| f.slope)))
}

fn goals(sizes: &[Size], restart: &Restart, rss_slope: Option<f64>) -> Vec<Goal> {
    let Some(largest) = sizes.iter().max_by_key(|s| s.members) else {
        return Vec::new();
    };
    let m = largest.members;
    let goal = |goal: String, measured: String, met: bool| Goal {
        section: "many_members",
        goal,
        measured,
        met,
    };
    let per_member = largest.rss_per_member_kb();
    let rss_measured = match rss_slope {
        Some(slope) => format!(
            "{slope:.0} KB per additional member (fit); {per_member:.0} KB per member at M={m}"
        ),
        None => format!("{per_member:.0} KB per member at M={m}"),
    };
    let worst_heap = (sizes.iter())
        .map(Size::heap_ratio_judged)
        .fold(f64::NAN, f64::max);
    let after = if sizes.iter().all(|s| s.restarted.is_some()) {
        "once the watches restarted and the pools' idle timeout passed"
    } else if sizes.iter().all(|s| s.idle.is_some()) {
        "once the connection pools' idle timeout passed"
    } else {
        "at once (the pools' idle connections still open)"
    };
    let left_behind: usize =
        sizes.iter().map(|s| s.left_behind).sum::<usize>() + restart.left_behind;
    let after_ready = restart.children_s - restart.ready_s;
    vec![
        goal(
            format!(
                "every child in every member <= {JOIN_GOAL_S} s after the Secrets of M={m} members are created"
            ),
            format!("{:.2} s", largest.join_s),
            largest.join_s <= JOIN_GOAL_S,
        ),
        goal(
            format!("<= {PER_MEMBER_GOAL_KB:.0} KB operator RSS per active member (M={m})"),
            rss_measured,
            rss_slope.unwrap_or(per_member) <= PER_MEMBER_GOAL_KB,
        ),
        goal(
            format!(
                "steady-state requests of the process <= {REQUESTS_GOAL} per member per 10 s (M={m})"
            ),
            format!(
                "{:.2} (servers: {:.1} req/s with {m} members, {:.1} with none; the operator's pings: {:.1}/s \
                 and {:.1}/s)",
                largest.requests_per_member(),
                largest.steady_rate,
                largest.idle_rate,
                largest.steady_pings,
                largest.idle_pings
            ),
            largest.requests_per_member() <= REQUESTS_GOAL,
        ),
        goal(
            format!(
                "all members leaving: heap <= {HEAP_GOAL_RATIO}x of before the joins, no child left"
            ),
            format!(
                "heap at most {worst_heap:.2}x over M={:?}, read {after}; {left_behind} child(ren) left",
                sizes.iter().map(|s| s.members).collect::<Vec<_>>()
            ),
            worst_heap <= HEAP_GOAL_RATIO && left_behind == 0,
        ),
        goal(
            format!(
                "a start with {} member Secrets is ready without waiting for them, and has every member's \
                 children <= {JOIN_GOAL_S} s after ready",
                restart.members
            ),
            format!(
                "ready {:.2} s (with no Secret {:.2} s), every child {after_ready:.2} s after ready",
                restart.synced_s, largest.ready_s
            ),
            restart.synced_s <= largest.ready_s * READY_GOAL_RATIO + READY_SLACK_S
                && after_ready <= JOIN_GOAL_S,
        ),
    ]
}

/// The members' names, for the method text.
fn names_example() -> String {
    format!("{}, {}, ..", member_name(0), member_name(1))
}

#[cfg(test)]
mod tests;
