//! Section `member_join`: how soon a cluster that joins the fleet gets its children, and how soon they are
//! gone when it leaves. P parents want a Deployment in every member; the member cluster joins by its
//! kubeconfig Secret being created in the control cluster and leaves by the Secret being deleted
//! (`LeavePolicy::Delete`: kubeplex deletes the children, then removes its finalizer from the Secret), J times.
//! There is no baseline column: kube-runtime has no members (a kube-rs operator would need its own Secret
//! watch, clients and reflectors per cluster).

use std::time::Duration;

use super::cluster::{Leave, MEMBER, MemberCluster, MemberOptions, stray_notes};
use super::fleet::Fleet;
use crate::figures::{Figure, Goal, Section, percentile};
use crate::fleet::Host;
use crate::harness::progress;

/// Goal: children appear in a new cluster within this long of its Secret being created.
const GOAL_S: f64 = 5.0;
/// The children's namespace in the member.
const NAMESPACE: &str = "members-join";
/// A pause after each leave, so that each join starts from an operator done with the last leave.
const PAUSE: Duration = Duration::from_secs(1);

pub(crate) async fn run(
    host: &Host<'_>,
    cluster: &MemberCluster,
    options: &MemberOptions,
) -> Result<(Section, Goal), String> {
    if options.parents == 0 || options.joins == 0 {
        return Err("member_join: at least one parent and one join".into());
    }
    let namespaces = vec![NAMESPACE.to_owned()];
    cluster.create_namespaces(&namespaces).await?;
    progress(&format!(
        "member_join: {} parents, {} joins",
        options.parents, options.joins
    ));
    let fleet = Fleet::start(host, cluster, options.parents, &namespaces, 3000).await?;
    let (mut joins, mut leaves) = (Vec::new(), Vec::new());
    for join in 0..options.joins {
        let joined_s = cluster.join(&fleet.observer, fleet.children).await?;
        let leave = cluster.leave(&fleet.observer).await?;
        let children = if leave.stray.is_empty() {
            format!("no child after {:.2} s", leave.children_gone_s)
        } else {
            format!("{} child(ren) left behind", leave.stray.len())
        };
        progress(&format!(
            "member_join: join {}/{}: every child after {joined_s:.2} s; after the leave, {children}, no \
             Secret after {:.2} s",
            join + 1,
            options.joins,
            leave.secret_gone_s
        ));
        joins.push(joined_s);
        leaves.push(leave);
        tokio::time::sleep(PAUSE).await;
    }
    fleet.stop().await?;
    Ok(report(options, &joins, &leaves))
}

fn report(options: &MemberOptions, joins: &[f64], leaves: &[Leave]) -> (Section, Goal) {
    let children: Vec<f64> = leaves.iter().map(|l| l.children_gone_s).collect();
    let secret: Vec<f64> = leaves.iter().map(|l| l.secret_gone_s).collect();
    let p50_max = |values: &[f64]| {
        format!(
            "p50 {:.2} s, max {:.2} s",
            percentile(values, 50.0),
            percentile(values, 100.0)
        )
    };
    let section = Section {
        title: "a member joins and leaves (no baseline: kube-runtime has no members)".into(),
        method: format!(
            "{} FleetApp parents in cluster-0, each wanting a Deployment in namespace {NAMESPACE} of every member; \
             the fleet section's kubeplex operator (its own process) with owns(Deployment, members, namespaces = \
             [{NAMESPACE}]) and members from KubeconfigSecrets (Secrets in cluster-0 labelled \
             bench.kubeplex.dev/member=true, LeavePolicy::Delete). The member is one more test cluster ({MEMBER}); \
             its Secret holds a kubeconfig of that one context. {} times: create the Secret and time until the \
             parent's own watch of {MEMBER} sees all {} children (with the parents' image); delete the Secret and \
             time until the watch sees none and the Secret is gone (kubeplex removes its finalizer after deleting \
             the children; polled every 20 ms); pause {} s. Every parent was reconciled once before the first join. \
             Children still in the member 10 s after the Secret went are counted as left behind, named in the \
             notes and deleted by hand (that leave has no children-gone time).",
            options.parents,
            options.joins,
            options.parents,
            PAUSE.as_secs()
        ),
        figures: vec![
            Figure::new("Secret created -> every child in member", "s", &[], joins),
            Figure::new("Secret deleted -> no child in member", "s", &[], &children),
            Figure::new("Secret deleted -> Secret gone", "s", &[], &secret),
            Figure::new(
                "children left behind per leave",
                "count",
                &[],
                &leaves.iter().map(|l| l.stray.len() as f64).collect::<Vec<_>>(),
            ),
        ],
        notes: vec![
            format!(
                "join, {} children: {} over {} joins; leave: children gone {}, Secret gone {}",
                options.parents,
                p50_max(joins),
                joins.len(),
                p50_max(&children),
                p50_max(&secret)
            ),
            "no baseline: kube-runtime has no members; a kube-rs operator would need its own Secret watch, \
             client and reflectors per cluster, so the ratio column is empty"
                .into(),
        ]
        .into_iter()
        .chain(stray_notes(1, leaves.iter().map(|l| &l.stray[..])))
        .collect(),
    };
    let max = percentile(joins, 100.0);
    let goal = Goal {
        section: "member_join",
        goal: format!(
            "children in a new member within {GOAL_S} s of its Secret being created ({} parents)",
            options.parents
        ),
        measured: p50_max(joins),
        met: max <= GOAL_S,
    };
    (section, goal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leave(children_gone_s: f64, secret_gone_s: f64) -> Leave {
        Leave {
            children_gone_s,
            secret_gone_s,
            stray: Vec::new(),
        }
    }

    #[test]
    fn the_goal_is_judged_on_the_slowest_join() {
        let options = MemberOptions::quick();
        let leaves = [leave(0.5, 0.6), leave(0.7, 0.9)];
        let (section, goal) = report(&options, &[0.8, 1.2], &leaves);
        assert!(goal.met, "{goal:?}");
        assert_eq!(goal.measured, "p50 0.80 s, max 1.20 s");
        assert_eq!(section.figures.len(), 4);
        assert_eq!(section.figures[3].kubeplex.samples, [0.0, 0.0]);
        assert_eq!(section.figures[2].kubeplex.samples, [0.6, 0.9]);
        assert!(
            section
                .figures
                .iter()
                .all(|f| f.baseline.samples.is_empty())
        );
        let (_, missed) = report(&options, &[0.8, 5.5], &leaves);
        assert!(!missed.met, "{missed:?}");
    }
}
