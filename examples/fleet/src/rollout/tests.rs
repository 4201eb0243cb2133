use kubeplex::health::Health::{Degraded, Healthy, Missing, Progressing, Unknown};

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
        let decision = decide(NEW, &NAMESPACES, &clusters, &BTreeMap::new());
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
    let decision = decide(NEW, &NAMESPACES, &clusters, &BTreeMap::new());
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
    let decision = decide(NEW, &NAMESPACES, &clusters, &BTreeMap::new());
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
    let decision = decide(NEW, &NAMESPACES, &clusters, &BTreeMap::new());
    assert_eq!(decision.image("cluster-a", "namespace-a"), Some(NEW));
    assert_eq!(decision.image("cluster-b", "namespace-a"), Some(OLD));
    assert!(
        decision.status.message.contains("another image"),
        "{:?}",
        decision.status
    );
}

/// The records of what each cluster was given, from `(cluster, image)`.
fn records(given: &[(&str, &str)]) -> BTreeMap<String, String> {
    (given.iter())
        .map(|(c, i)| ((*c).to_owned(), (*i).to_owned()))
        .collect()
}

#[test]
fn a_cluster_behind_keeps_what_it_was_given_whatever_its_cache_says() {
    type Case = (
        &'static str,
        [Option<(Health, &'static str)>; 3],
        &'static [(&'static str, &'static str)],
        [&'static str; 3],
    );
    const A: &str = "cluster-a";
    const B: &str = "cluster-b";
    const C: &str = "cluster-c";
    #[rustfmt::skip]
    let cases: [Case; 7] = [
        ("clusters behind whose caches have not listed",
         [Some((Progressing, NEW)), None, None], &[(A, NEW), (B, OLD), (C, OLD)], [NEW, OLD, OLD]),
        ("a cluster behind whose Deployments were deleted by hand, another one's cache has them",
         [Some((Progressing, NEW)), None, Some((Healthy, OLD))], &[(A, NEW), (B, OLD), (C, OLD)],
         [NEW, OLD, OLD]),
        ("a cluster behind whose cache shows the new image",
         [Some((Progressing, NEW)), Some((Healthy, NEW)), Some((Healthy, OLD))],
         &[(A, NEW), (B, OLD), (C, OLD)], [NEW, OLD, OLD]),
        ("a member that joins mid-rollout (no record, nothing cached) gets what the others behind were given",
         [Some((Progressing, NEW)), None, None], &[(A, NEW), (B, OLD)], [NEW, OLD, OLD]),
        ("a member that joins with none behind it: nothing to keep, the new image",
         [Some((Healthy, NEW)), Some((Progressing, NEW)), None], &[(A, NEW), (B, NEW)], [NEW, NEW, NEW]),
        ("a cluster given the new image keeps it when one before it degrades, cache or not",
         [Some((Degraded, NEW)), None, None], &[(A, NEW), (B, NEW), (C, NEW)], [NEW, NEW, NEW]),
        ("three images: each cluster behind keeps its own",
         [Some((Progressing, NEW)), None, None], &[(A, NEW), (B, "nginx:1.26"), (C, OLD)],
         [NEW, "nginx:1.26", OLD]),
    ];
    for (what, children, given, expected) in cases {
        let clusters: Vec<ClusterView> = [A, B, C]
            .iter()
            .zip(children)
            .map(|(name, children)| cluster(name, children))
            .collect();
        let decision = decide(NEW, &NAMESPACES, &clusters, &records(given));
        assert_eq!(images(&decision, &clusters), expected, "{what}");
        let recorded = [A, B, C].into_iter().zip(expected).collect::<Vec<_>>();
        assert_eq!(decision.status.clusters, records(&recorded), "{what}");
    }
}

#[test]
fn the_record_names_the_clusters_deployed_to_now() {
    let clusters = [cluster("cluster-a", Some((Healthy, OLD)))];
    let given = records(&[("cluster-a", OLD), ("left", OLD)]);
    let decision = decide(NEW, &NAMESPACES, &clusters, &given);
    assert_eq!(decision.status.clusters, records(&[("cluster-a", NEW)]));
    assert_eq!(decision.status.phase, RolloutPhase::Complete);
}

/// A rollout status in `phase` of `image`, waiting for `cluster`.
fn status(image: &str, phase: RolloutPhase, cluster: Option<&str>) -> RolloutStatus {
    RolloutStatus {
        image: image.to_owned(),
        phase,
        cluster: cluster.map(str::to_owned),
        message: format!("{} at {cluster:?}", phase.as_str()),
        clusters: BTreeMap::new(),
    }
}

#[test]
fn a_rollout_tells_when_it_halts_resumes_and_completes() {
    use RolloutPhase::{Complete, Halted, Progressing as Going};
    let (a, b) = (Some("cluster-a"), Some("cluster-b"));
    type Case = (
        &'static str,
        Option<(&'static str, RolloutPhase, Option<&'static str>)>,
        (&'static str, RolloutPhase, Option<&'static str>),
        &'static [&'static str],
    );
    #[rustfmt::skip]
    let cases: [Case; 13] = [
        ("a new parent", None, (NEW, Complete, None), &[]),
        ("spec.rollout added with a new image", None, (NEW, Going, a), &[]),
        ("a new image starts", Some((OLD, Complete, None)), (NEW, Going, a), &[]),
        ("the next cluster", Some((NEW, Going, a)), (NEW, Going, b), &[]),
        ("it halts", Some((NEW, Going, a)), (NEW, Halted, a), &["RolloutHalted"]),
        ("it stays halted", Some((NEW, Halted, a)), (NEW, Halted, a), &[]),
        ("it resumes", Some((NEW, Halted, a)), (NEW, Going, b), &["RolloutResumed"]),
        ("it resumes to the last cluster: complete", Some((NEW, Halted, a)), (NEW, Complete, None),
         &["RolloutResumed", "RolloutComplete"]),
        ("it completes", Some((NEW, Going, b)), (NEW, Complete, None), &["RolloutComplete"]),
        ("it stays complete", Some((NEW, Complete, None)), (NEW, Complete, None), &[]),
        ("a new image given to every cluster at once", Some((OLD, Complete, None)), (NEW, Complete, None),
         &["RolloutComplete"]),
        ("a halted rollout replaced by another image that halts", Some((OLD, Halted, a)), (NEW, Halted, a),
         &["RolloutHalted"]),
        ("a halted rollout replaced by another image", Some((OLD, Halted, a)), (NEW, Going, a), &[]),
    ];
    for (what, before, (image, phase, at), expected) in cases {
        let before = before.map(|(image, phase, at)| status(image, phase, at));
        let now = status(image, phase, at);
        let events = rollout_events(before.as_ref(), &now);
        let reasons: Vec<&str> = events.iter().map(|e| e.reason).collect();
        assert_eq!(reasons, expected, "{what}");
        for event in events {
            assert_eq!(event.warning, event.reason == "RolloutHalted", "{what}");
            assert!(
                event.message.starts_with(&format!("rollout of {image}: ")),
                "{what}: {event:?}"
            );
        }
    }
}

#[test]
fn a_halt_and_its_end_name_the_cluster_and_why() {
    let halted = decide(
        NEW,
        &NAMESPACES,
        &[
            cluster("cluster-a", Some((Degraded, NEW))),
            cluster("cluster-b", Some((Healthy, OLD))),
        ],
        &records(&[("cluster-a", NEW), ("cluster-b", OLD)]),
    )
    .status;
    let going = status(NEW, RolloutPhase::Progressing, Some("cluster-a"));
    let [event] = &rollout_events(Some(&going), &halted)[..] else {
        panic!("{halted:?}");
    };
    assert_eq!(
        event.message,
        "rollout of nginx:1.28: halted at cluster-a: namespace-a/web Degraded: progress deadline exceeded: \
         too slow; cluster-b not updated"
    );
    let resumed = status(NEW, RolloutPhase::Progressing, Some("cluster-b"));
    let [event] = &rollout_events(Some(&halted), &resumed)[..] else {
        panic!("{resumed:?}");
    };
    assert_eq!(
        event.message,
        "rollout of nginx:1.28: cluster-a is no longer Degraded; Progressing at Some(\"cluster-b\")"
    );
}

/// A parent `web` with this UID, resourceVersion and `status.rollout`, as the cache has it.
fn parent(uid: &str, version: &str, rollout: Option<&RolloutStatus>) -> crate::AppDeployment {
    let spec = crate::AppDeploymentSpec {
        image: NEW.into(),
        replicas: 1,
        namespaces: Vec::new(),
        rollout: None,
    };
    let mut app = crate::AppDeployment::new("web", spec);
    app.metadata.uid = Some(uid.into());
    app.metadata.resource_version = Some(version.into());
    app.status = Some(crate::AppDeploymentStatus {
        rollout: rollout.cloned(),
        ..Default::default()
    });
    app
}

#[test]
fn a_cache_that_trails_a_write_reads_what_was_written() {
    let written = RecentWrites::new();
    let complete = status(OLD, RolloutPhase::Complete, None);
    let halted = status(NEW, RolloutPhase::Halted, Some("cluster-a"));
    let cached = |uid, version| rollout_of(&parent(uid, version, Some(&complete)), &written);
    assert_eq!(
        cached("uid-1", "5"),
        Some(complete.clone()),
        "nothing written"
    );
    let before = parent("uid-1", "5", Some(&complete));
    written.record(&before, Some("7"), Some(halted.clone()));
    assert_eq!(
        cached("uid-1", "6"),
        Some(halted),
        "the cache at 6 trails the write at 7"
    );
    assert_eq!(
        cached("uid-2", "6"),
        Some(complete.clone()),
        "another parent"
    );
    let caught_up = parent("uid-1", "7", None);
    assert_eq!(
        rollout_of(&caught_up, &written),
        None,
        "the cache is the truth again"
    );
    assert_eq!(
        cached("uid-1", "6"),
        Some(complete),
        "the write is forgotten"
    );
}
