//! The children path on real clusters: status written beside other writers (in generated orders, in
//! [`writers`]), failed reconciles in the status, children whose name is taken, and parent links from
//! contexts whose names contain `/`.

pub mod parent;
pub mod wait;
mod writers;

use crate::support::audit;
use crate::support::{create_namespace, polling, wait_exists, wait_started};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{CustomResourceExt, ResourceExt};
use kubeplex::{Context, Manager};
use kubeplex_testenv::{TestEnv, eventually};
use parent::{ARN, Conflicts, Failing, Narrowing, Parent, ParentSpec, Slashes};
use wait::{condition, create_parent, wait_parent};

/// The suite's clusters, with this module's kinds installed.
pub(crate) async fn env() -> &'static TestEnv {
    crate::support::clusters([("control", Parent::crd())]).await
}

#[tokio::test]
async fn a_failed_reconcile_turns_ready_false_with_the_servers_message() {
    let env = env().await;
    let control = env.client("control").await.unwrap();
    create_namespace(&env.client("cluster-a").await.unwrap(), "kids").await;
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Failing)
        .start()
        .await
        .unwrap();
    wait_started(&running, "failing started").await;
    let spec = ParentSpec {
        children: vec!["failing-child".into()],
        ..ParentSpec::default()
    };
    create_parent(&control, "failing", "flaky", spec).await;
    wait_parent(&control, "failing", "flaky", "Ready=True", |p| {
        condition(p, "Ready").is_some_and(|c| c.status == "True")
    })
    .await;

    let api: Api<Parent> = Api::namespaced(control.clone(), "failing");
    let patch = serde_json::json!({ "spec": { "fail": true } });
    api.patch("flaky", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let parent = wait_parent(&control, "failing", "flaky", "Ready=False", |p| {
        condition(p, "Ready").is_some_and(|c| c.status == "False")
    })
    .await;
    let ready = condition(&parent, "Ready").unwrap();
    assert_eq!(ready.reason, "ReconcileFailed");
    assert!(
        ready.message.contains("reading the settings failed")
            && ready
                .message
                .contains("\"settings-that-do-not-exist\" not found (404 NotFound)"),
        "{}",
        ready.message
    );
    assert!(
        !ready.message.contains("Status {"),
        "a Debug dump in the status: {}",
        ready.message
    );
    // The clusters keep their last known state.
    let clusters = &parent.status.as_ref().unwrap().fleet.clusters;
    assert_eq!(clusters["cluster-a"].state, kubeplex::ClusterState::Applied);
    crate::support::stop(running).await;
}

#[tokio::test]
async fn a_child_whose_name_is_taken_is_a_conflict_and_is_left_alone() {
    let env = env().await;
    let control = env.client("control").await.unwrap();
    let cluster_a = env.client("cluster-a").await.unwrap();
    create_namespace(&cluster_a, "kids").await;
    // Someone else's ConfigMap, and another parent's child, both with names our parent wants.
    let theirs = ConfigMap {
        metadata: ObjectMeta {
            name: Some("conflicts-theirs".into()),
            ..ObjectMeta::default()
        },
        data: Some([("owner".to_owned(), "someone else".to_owned())].into()),
        ..ConfigMap::default()
    };
    let kids: Api<ConfigMap> = Api::namespaced(cluster_a.clone(), "kids");
    kids.create(&PostParams::default(), &theirs).await.unwrap();
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Conflicts)
        .start()
        .await
        .unwrap();
    wait_started(&running, "conflicts started").await;
    let first = ParentSpec {
        children: vec!["conflicts-shared".into()],
        ..ParentSpec::default()
    };
    create_parent(&control, "conflicts", "first", first).await;
    wait_parent(&control, "conflicts", "first", "first Ready", |p| {
        condition(p, "Ready").is_some_and(|c| c.status == "True")
    })
    .await;
    let second = ParentSpec {
        children: vec![
            "conflicts-shared".into(),
            "conflicts-theirs".into(),
            "conflicts-free".into(),
        ],
        ..ParentSpec::default()
    };
    create_parent(&control, "conflicts", "second", second).await;
    let parent = wait_parent(&control, "conflicts", "second", "a conflict", |p| {
        p.status.as_ref().is_some_and(|s| {
            s.fleet
                .clusters
                .get("cluster-a")
                .is_some_and(|c| c.state == kubeplex::ClusterState::Conflict)
        })
    })
    .await;
    let requests = audit::requests(env, "cluster-a");
    let message = parent.status.unwrap().fleet.clusters["cluster-a"]
        .message
        .clone()
        .unwrap();
    assert!(message.contains("ConfigMap kids/conflicts-shared already exists and belongs to another parent (control/conflicts/first)"), "{message}");
    assert!(
        message.contains(
            "ConfigMap kids/conflicts-theirs already exists and belongs to no kubeplex parent"
        ),
        "{message}"
    );

    // Neither taken object changed hands; the free name was created for the second parent.
    let shared = kids.get("conflicts-shared").await.unwrap();
    assert_eq!(shared.data.unwrap()["from"], "first");
    let untouched = kids.get("conflicts-theirs").await.unwrap();
    assert!(untouched.labels().is_empty(), "{:?}", untouched.labels());
    assert_eq!(
        kids.get("conflicts-free").await.unwrap().data.unwrap()["from"],
        "second"
    );

    // A free name cost one request: an apply that only a missing object lets through created it. A name
    // taken by an object the cache does not know was refused by that apply (409), then read: never written.
    let asked = |name: &str| -> Vec<(String, i64)> {
        let what = format!("configmaps kids/{name}");
        let operators = requests
            .iter()
            .filter(|r| r.what == what && r.verb != "create");
        operators.map(|r| (r.verb.clone(), r.code)).collect()
    };
    let free = asked("conflicts-free");
    assert_eq!(free.first(), Some(&("patch".to_owned(), 201)), "{free:?}");
    let taken = asked("conflicts-theirs");
    assert_eq!(taken.first(), Some(&("patch".to_owned(), 409)), "{taken:?}");
    assert!(taken.contains(&("get".to_owned(), 200)), "{taken:?}");
    let written = |(verb, code): &(String, i64)| verb == "patch" && (200..300).contains(code);
    assert!(!taken.iter().any(written), "{taken:?}");

    // And the parent has an Event saying so.
    let events: Api<Event> = Api::namespaced(control.clone(), "conflicts");
    let event = eventually("a ChildConflict event", polling(), async || {
        let list = events.list(&ListParams::default()).await.unwrap();
        let conflict = list.items.iter().find(|e| {
            e.reason.as_deref() == Some("ChildConflict")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("second")
        });
        conflict
            .cloned()
            .ok_or_else(|| format!("{:#?}", list.items))
    })
    .await;
    assert!(
        event
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("conflicts-theirs")
    );
    crate::support::stop(running).await;
}

#[tokio::test]
async fn children_of_a_parent_in_a_context_named_with_slashes_reach_their_parent() {
    let env = env().await;
    let control = env.client("control").await.unwrap();
    let cluster_a = env.client("cluster-a").await.unwrap();
    create_namespace(&cluster_a, "kids").await;
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .context_alias(ARN, "control")
        .controller(Slashes)
        .start()
        .await
        .unwrap();
    wait_started(&running, "slashes started").await;
    let spec = ParentSpec {
        children: vec!["slashes-child".into()],
        ..ParentSpec::default()
    };
    create_parent(&control, "slashes", "eks", spec).await;
    let kids: Api<ConfigMap> = Api::namespaced(cluster_a.clone(), "kids");
    let child = wait_exists(&kids, "slashes-child").await;
    assert_eq!(
        child.annotations()[kubeplex::ownership::PARENT_ANNOTATION],
        format!("{}/slashes/eks", ARN.name())
    );
    // A child deleted by hand is an event of its parent: the parent is reconciled and the child returns.
    kids.delete("slashes-child", &Default::default())
        .await
        .unwrap();
    let back = wait_exists(&kids, "slashes-child").await;
    assert_ne!(back.uid(), child.uid());
    crate::support::stop(running).await;
}

#[tokio::test]
async fn a_context_the_parent_stops_targeting_is_pruned_and_says_not_targeted() {
    let env = env().await;
    let control = env.client("control").await.unwrap();
    let cluster_a = env.client("cluster-a").await.unwrap();
    create_namespace(&cluster_a, "kids").await;
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Narrowing)
        .start()
        .await
        .unwrap();
    wait_started(&running, "narrowing started").await;
    let spec = ParentSpec {
        children: vec!["narrowing-gone".into(), "narrowing-kept".into()],
        ..ParentSpec::default()
    };
    create_parent(&control, "narrowing", "narrow", spec).await;
    let kids: Api<ConfigMap> = Api::namespaced(cluster_a.clone(), "kids");
    wait_exists(&kids, "narrowing-gone").await;
    let kept = wait_exists(&kids, "narrowing-kept").await;

    // Narrowed to one child: only the other is pruned.
    let api: Api<Parent> = Api::namespaced(control.clone(), "narrowing");
    let narrowed = serde_json::json!({ "spec": { "children": ["narrowing-kept"] } });
    api.patch("narrow", &PatchParams::default(), &Patch::Merge(&narrowed))
        .await
        .unwrap();
    wait_parent(&control, "narrowing", "narrow", "one child", |p| {
        p.status.as_ref().is_some_and(|s| {
            s.fleet
                .clusters
                .get("cluster-a")
                .is_some_and(|c| c.children == 1)
        })
    })
    .await;
    assert!(
        kids.get_opt("narrowing-gone").await.unwrap().is_none(),
        "the undeclared child is pruned"
    );
    assert_eq!(
        kids.get("narrowing-kept").await.unwrap().uid(),
        kept.uid(),
        "the other is untouched"
    );

    // No children wanted in the cluster any more: pruned, and the status says so instead of "Ready, 0".
    let none = serde_json::json!({ "spec": { "children": [] } });
    api.patch("narrow", &PatchParams::default(), &Patch::Merge(&none))
        .await
        .unwrap();
    let parent = wait_parent(&control, "narrowing", "narrow", "NotTargeted", |p| {
        p.status.as_ref().is_some_and(|s| {
            s.fleet
                .clusters
                .get("cluster-a")
                .is_some_and(|c| c.state == kubeplex::ClusterState::NotTargeted)
        })
    })
    .await;
    assert!(kids.get_opt("narrowing-kept").await.unwrap().is_none());
    assert_eq!(condition(&parent, "Ready").unwrap().status, "True");
    crate::support::stop(running).await;
}
