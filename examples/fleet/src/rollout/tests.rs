use kubeplex::Health::{Degraded, Healthy, Missing, Progressing, Unknown};

use super::*;

const NAMESPACES: [&str; 2] = ["namespace-a", "namespace-b"];
const OLD: &str = "nginx:1.27";
const NEW: &str = "nginx:1.28";

/// A cluster whose two Deployments have this health and image (`None`: not cached).
fn cluster(name: &str, children: Option<(Health, &str)>) -> ClusterView {
    let children = children.map_or_else(Vec::new, |(health, image)| {
        NAMESPACES
            .iter()
            .map(|namespace| seen(namespace, health, Some(image)))
            .collect()
    });
    ClusterView {
        name: name.to_owned(),
        children,
    }
}

fn seen(namespace: &str, health: Health, image: Option<&str>) -> Seen {
    let reason = match health {
        Healthy => "3/3 replicas available",
        Degraded => "progress deadline exceeded: too slow",
        Unknown => "the cluster cannot be asked now",
        _ => "1/3 replicas available",
    };
    Seen {
        namespace: namespace.to_owned(),
        name: "web".to_owned(),
        health,
        reason: reason.to_owned(),
        image: image.map(str::to_owned),
    }
}

/// The image each cluster's Deployments get, when both namespaces get the same.
fn images(decision: &Decision, clusters: &[ClusterView]) -> Vec<String> {
    clusters
        .iter()
        .map(|c| {
            let [a, b] = NAMESPACES.map(|n| decision.image(&c.name, n).unwrap().to_owned());
            assert_eq!(a, b, "{}: {decision:?}", c.name);
            a
        })
        .collect()
}

#[test]
fn the_clusters_take_turns_in_the_order_given_then_the_others() {
    let targets = ["cluster-a", "cluster-b", "cluster-c"];
    let order = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
    let cases: [(&[&str], [&str; 3]); 4] = [
        (&[], ["cluster-a", "cluster-b", "cluster-c"]),
        (&["cluster-c"], ["cluster-c", "cluster-a", "cluster-b"]),
        (
            &["cluster-b", "gone", "cluster-a", "cluster-b"],
            ["cluster-b", "cluster-a", "cluster-c"],
        ),
        (
            &["cluster-c", "cluster-b", "cluster-a"],
            ["cluster-c", "cluster-b", "cluster-a"],
        ),
    ];
    for (given, expected) in cases {
        assert_eq!(ordered(&targets, &order(given)), expected, "{given:?}");
    }
}

#[test]
fn which_cluster_gets_which_image() {
    type Case = (
        &'static str,
        [Option<(Health, &'static str)>; 3],
        [&'static str; 3],
        RolloutPhase,
        Option<&'static str>,
        &'static str,
    );
    #[rustfmt::skip]
    let cases: [Case; 12] = [
        ("a new parent goes everywhere at once",
         [None, None, None], [NEW, NEW, NEW], RolloutPhase::Complete, None, "nginx:1.28 given to every cluster"),
        ("a new parent whose first cluster's cache has it already, the others' not yet",
         [Some((Progressing, NEW)), None, None], [NEW, NEW, NEW], RolloutPhase::Complete, None, "every cluster"),
        ("a changed image goes to the first cluster only",
         [Some((Healthy, OLD)), Some((Healthy, OLD)), Some((Healthy, OLD))], [NEW, OLD, OLD],
         RolloutPhase::Progressing, Some("cluster-a"),
         "waiting for cluster-a: namespace-a/web: nginx:1.27 until it is applied; cluster-b, cluster-c not updated"),
        ("the first cluster applied it and is progressing: the others wait",
         [Some((Progressing, NEW)), Some((Healthy, OLD)), Some((Healthy, OLD))], [NEW, OLD, OLD],
         RolloutPhase::Progressing, Some("cluster-a"),
         "waiting for cluster-a: namespace-a/web Progressing: 1/3 replicas available; cluster-b, cluster-c not updated"),
        ("healthy with the old image is not done",
         [Some((Healthy, OLD)), Some((Healthy, OLD)), Some((Healthy, OLD))], [NEW, OLD, OLD],
         RolloutPhase::Progressing, Some("cluster-a"), "waiting for cluster-a"),
        ("the first cluster is healthy with the new image: the second gets it",
         [Some((Healthy, NEW)), Some((Healthy, OLD)), Some((Healthy, OLD))], [NEW, NEW, OLD],
         RolloutPhase::Progressing, Some("cluster-b"), "waiting for cluster-b: namespace-a/web: nginx:1.27 until it is applied; cluster-c not updated"),
        ("a Degraded cluster halts the rollout",
         [Some((Degraded, NEW)), Some((Healthy, OLD)), Some((Healthy, OLD))], [NEW, OLD, OLD],
         RolloutPhase::Halted, Some("cluster-a"),
         "halted at cluster-a: namespace-a/web Degraded: progress deadline exceeded: too slow; cluster-b, cluster-c not updated"),
        ("an unreachable cluster holds the rollout without halting it",
         [Some((Unknown, NEW)), Some((Healthy, OLD)), Some((Healthy, OLD))], [NEW, OLD, OLD],
         RolloutPhase::Progressing, Some("cluster-a"), "namespace-a/web Unknown: the cluster cannot be asked now"),
        ("a Deployment deleted in the cluster the rollout waits for",
         [Some((Missing, NEW)), Some((Healthy, OLD)), Some((Healthy, OLD))], [NEW, OLD, OLD],
         RolloutPhase::Progressing, Some("cluster-a"), "namespace-a/web Missing"),
        ("a cluster not reached whose cache has nothing gets what the others not reached carry",
         [Some((Progressing, NEW)), None, Some((Healthy, OLD))], [NEW, OLD, OLD],
         RolloutPhase::Progressing, Some("cluster-a"), "cluster-b, cluster-c not updated"),
        ("the last cluster has it: complete while it becomes healthy",
         [Some((Healthy, NEW)), Some((Healthy, NEW)), Some((Progressing, NEW))], [NEW, NEW, NEW],
         RolloutPhase::Complete, None, "every cluster"),
        ("a cluster that degrades after the rollout takes nothing back",
         [Some((Degraded, NEW)), Some((Healthy, NEW)), Some((Healthy, NEW))], [NEW, NEW, NEW],
         RolloutPhase::Complete, None, "every cluster"),
    ];
    for (what, children, expected, phase, at, message) in cases {
        let clusters: Vec<ClusterView> = ["cluster-a", "cluster-b", "cluster-c"]
            .iter()
            .zip(children)
            .map(|(name, children)| cluster(name, children))
            .collect();
        let decision = decide(NEW, &NAMESPACES, &clusters);
        assert_eq!(images(&decision, &clusters), expected, "{what}");
        let status = &decision.status;
        assert_eq!(
            (
                status.phase,
                status.cluster.as_deref(),
                status.image.as_str()
            ),
            (phase, at, NEW),
            "{what}: {status:?}"
        );
        assert!(status.message.contains(message), "{what}: {status:?}");
    }
}

#[test]
fn a_namespace_not_there_yet_in_a_reached_cluster_holds_the_next() {
    // cluster-a runs the new image healthily in namespace-a; namespace-b was just added to the spec.
    let clusters = [
        ClusterView {
            name: "cluster-a".into(),
            children: vec![seen("namespace-a", Healthy, Some(NEW))],
        },
        ClusterView {
            name: "cluster-b".into(),
            children: vec![seen("namespace-a", Healthy, Some(OLD))],
        },
    ];
    let decision = decide(NEW, &NAMESPACES, &clusters);
    assert_eq!(decision.image("cluster-a", "namespace-b"), Some(NEW));
    // cluster-b's new namespace gets the image its other Deployment carries.
    assert_eq!(decision.image("cluster-b", "namespace-a"), Some(OLD));
    assert_eq!(decision.image("cluster-b", "namespace-b"), Some(OLD));
    assert_eq!(
        decision.status.message,
        "waiting for cluster-a: namespace-b: not there yet; cluster-b not updated"
    );
}

#[test]
fn a_degraded_child_is_named_before_a_progressing_one() {
    let clusters = [
        ClusterView {
            name: "cluster-a".into(),
            children: vec![
                seen("namespace-a", Progressing, Some(NEW)),
                seen("namespace-b", Degraded, Some(NEW)),
            ],
        },
        cluster("cluster-b", Some((Healthy, OLD))),
    ];
    let decision = decide(NEW, &NAMESPACES, &clusters);
    assert_eq!(decision.status.phase, RolloutPhase::Halted);
    assert!(
        decision
            .status
            .message
            .starts_with("halted at cluster-a: namespace-b/web Degraded: "),
        "{:?}",
        decision.status
    );
}

#[test]
fn a_child_without_the_annotation_does_not_run_the_new_image() {
    let clusters = [
        ClusterView {
            name: "cluster-a".into(),
            children: NAMESPACES.iter().map(|n| seen(n, Healthy, None)).collect(),
        },
        cluster("cluster-b", Some((Healthy, OLD))),
    ];
    let decision = decide(NEW, &NAMESPACES, &clusters);
    assert_eq!(decision.image("cluster-a", "namespace-a"), Some(NEW));
    assert_eq!(decision.image("cluster-b", "namespace-a"), Some(OLD));
    assert!(
        decision.status.message.contains("another image"),
        "{:?}",
        decision.status
    );
}
