//! Declaring children: what is taken, what is refused and why, and the policies each child records.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::ObjectMeta;
use std::sync::Arc;

use super::*;
use crate::controller::test_controller::cx;
use crate::controller::test_controller::{CLUSTER_A, CONTROL, runtime};
use crate::plan::Plan;

fn config_map(namespace: Option<&str>, name: Option<&str>) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: name.map(str::to_owned),
            namespace: namespace.map(str::to_owned),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}
#[tokio::test]
async fn a_declared_child_is_taken_and_each_undeclared_one_is_refused_with_the_reason() {
    let cx = cx(CONTROL, 0);
    cx.child(CLUSTER_A, config_map(Some("ns"), Some("ok")))
        .unwrap();
    let refused = |result: Result<()>| result.unwrap_err().to_string();
    assert_eq!(
        refused(cx.child(CLUSTER_A, Deployment::default())),
        "cluster cluster-a: child Deployment: controller test-controller declares no owns(Deployment) in this context"
    );
    assert_eq!(
        refused(cx.child(CONTROL, config_map(Some("ns"), Some("x")))),
        "cluster control: child ConfigMap: controller test-controller declares no owns(ConfigMap) in this context"
    );
    assert_eq!(
        refused(cx.child(CLUSTER_A, config_map(Some("other"), Some("x")))),
        "cluster cluster-a: child ConfigMap: namespace other is not one of the declared ns"
    );
    assert!(
        refused(cx.child(CLUSTER_A, config_map(Some("ns"), None))).contains("has no metadata.name")
    );
    let mut owned = config_map(Some("ns"), Some("x"));
    owned.metadata.owner_references = Some(vec![OwnerReference::default()]);
    assert!(refused(cx.child(CLUSTER_A, owned)).contains("ownerReferences cannot span clusters"));
    let taken = cx.take_children();
    let names: Vec<(&str, Vec<&str>)> = (taken.iter())
        .map(|(context, children)| {
            (
                context.as_str(),
                children.iter().map(|c| c.name.as_str()).collect(),
            )
        })
        .collect();
    assert_eq!(names, [("cluster-a", vec!["ok"])]);
}

#[tokio::test]
async fn the_declared_places_of_a_child_kind_and_its_default_namespace() {
    let cx = cx(CONTROL, 0);
    assert_eq!(cx.contexts_of::<ConfigMap>(), [CLUSTER_A]);
    assert!(cx.contexts_of::<Deployment>().is_empty());
    assert_eq!(cx.namespaces_of::<ConfigMap>(CLUSTER_A), ["ns"]);
    // Exactly one namespace is declared: a child without one goes there.
    cx.child(CLUSTER_A, config_map(None, Some("defaulted")))
        .unwrap();
    let taken = cx.take_children();
    let child = &taken["cluster-a"][0];
    assert_eq!(child.namespace.as_deref(), Some("ns"));
    assert_eq!(child.object["metadata"]["namespace"], "ns");
}

#[tokio::test]
async fn children_are_split_by_context_as_they_are_declared() {
    let (client, _) = crate::testing::fake_api::client(|_, _, _| (200, serde_json::json!({})));
    let plan = Plan::new("split")
        .with_contexts([CONTROL])
        .owns(crate::plan::Child::of::<ConfigMap>().with_contexts([CLUSTER_A, CONTROL]));
    let cx = Cx::new(
        Cluster::Context(CONTROL),
        Arc::new(plan),
        runtime(client.clone(), client),
        0,
    );
    for (context, name) in [(CLUSTER_A, "a1"), (CONTROL, "c1"), (CLUSTER_A, "a2")] {
        cx.child(context, config_map(Some("ns"), Some(name)))
            .unwrap();
    }
    let taken = cx.take_children();
    let names =
        |context: &str| -> Vec<&str> { taken[context].iter().map(|c| c.name.as_str()).collect() };
    assert_eq!(taken.len(), 2);
    assert_eq!(names("cluster-a"), ["a1", "a2"]);
    assert_eq!(names("control"), ["c1"]);
    assert!(cx.take_children().is_empty(), "taken once");
}

/// A cx of a plan that owns ConfigMaps in cluster-a, kept on prune.
fn keeping_cx() -> Cx<crate::core::ContextName> {
    let (client, _) = crate::testing::fake_api::client(|_, _, _| (200, serde_json::json!({})));
    let plan = Plan::new("keeps").with_contexts([CONTROL]).owns(
        crate::plan::Child::of::<ConfigMap>()
            .with_contexts([CLUSTER_A])
            .keep_on_prune(),
    );
    Cx::new(
        Cluster::Context(CONTROL),
        Arc::new(plan),
        runtime(client.clone(), client),
        0,
    )
}

fn annotated(name: &str, key: &str, value: &str) -> ConfigMap {
    let mut child = config_map(Some("ns"), Some(name));
    child.metadata.annotations = Some([(key.to_owned(), value.to_owned())].into());
    child
}

/// The policy annotations each child taken carries, by name.
fn policies(cx: &Cx<crate::core::ContextName>) -> Vec<(String, serde_json::Value)> {
    let taken = cx.take_children();
    (taken.into_values().flatten())
        .map(|c| (c.name, c.object["metadata"]["annotations"].clone()))
        .collect()
}

#[tokio::test]
async fn a_childs_policies_come_from_its_options_else_its_annotations_else_its_kind() {
    use serde_json::json;
    let cx = keeping_cx();
    cx.child(CLUSTER_A, config_map(Some("ns"), Some("kind")))
        .unwrap();
    let options = ChildOptions::new()
        .orphan_on_delete()
        .with_prune(PrunePolicy::Delete);
    cx.child_with(
        CLUSTER_A,
        annotated("options", ON_PRUNE_ANNOTATION, "keep"),
        options,
    )
    .unwrap();
    cx.child(
        CLUSTER_A,
        annotated("annotated", ON_PRUNE_ANNOTATION, "delete"),
    )
    .unwrap();
    assert_eq!(
        policies(&cx),
        [
            ("kind".to_owned(), json!({ ON_PRUNE_ANNOTATION: "keep" })),
            (
                "options".to_owned(),
                json!({ ON_DELETE_ANNOTATION: "orphan" })
            ),
            ("annotated".to_owned(), json!({})),
        ]
    );

    // Without a policy in the plan, nothing is recorded; the object's own annotation is honoured.
    let cx = cx_of_test_controller();
    cx.child(CLUSTER_A, config_map(Some("ns"), Some("plain")))
        .unwrap();
    cx.child(
        CLUSTER_A,
        annotated("marked", ON_DELETE_ANNOTATION, "orphan"),
    )
    .unwrap();
    assert_eq!(
        policies(&cx),
        [
            ("plain".to_owned(), serde_json::Value::Null),
            (
                "marked".to_owned(),
                json!({ ON_DELETE_ANNOTATION: "orphan" })
            ),
        ]
    );
}

fn cx_of_test_controller() -> Cx<crate::core::ContextName> {
    cx(CONTROL, 0)
}

#[tokio::test]
async fn an_annotation_that_names_no_policy_is_refused_with_the_values_it_takes() {
    let cx = keeping_cx();
    let refused = cx
        .child(CLUSTER_A, annotated("typo", ON_PRUNE_ANNOTATION, "kep"))
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "cluster cluster-a: child ConfigMap: annotation kubeplex.dev/on-prune is \"kep\": write keep or delete (or leave it out)"
    );
    let refused = cx
        .child(CLUSTER_A, annotated("typo", ON_DELETE_ANNOTATION, "keep"))
        .unwrap_err();
    assert!(
        refused.to_string().contains("write orphan or delete"),
        "{refused}"
    );
    assert!(cx.take_children().is_empty());
}

#[tokio::test]
async fn in_a_member_a_child_kind_may_live_in_the_members_default_namespace() {
    let (client, _) = crate::testing::fake_api::client(|_, _, _| (200, serde_json::json!({})));
    let plan = Plan::new("own-namespace").with_contexts([CONTROL]).owns(
        crate::plan::Child::of::<ConfigMap>()
            .with_contexts([CLUSTER_A])
            .with_namespaces(["ns"])
            .member_default_namespace(),
    );
    let runtime = runtime(client.clone(), client);
    let member_client = crate::testing::fake_api::client_in("team-b");
    runtime.members.joined("member-b", member_client).await;
    let cx = Cx::new(Cluster::Context(CONTROL), Arc::new(plan), runtime, 0);
    let member = crate::core::Member::new("member-b");
    cx.child(&member, config_map(None, Some("defaulted")))
        .unwrap();
    let refused = cx
        .child(&member, config_map(Some("ns"), Some("elsewhere")))
        .unwrap_err()
        .to_string();
    assert!(
        refused.ends_with("namespace ns is not one of the declared team-b"),
        "{refused}"
    );
    // In the contexts, the declared namespaces still apply.
    cx.child(CLUSTER_A, config_map(None, Some("in-a"))).unwrap();
    let taken = cx.take_children();
    assert_eq!(taken["member-b"][0].namespace.as_deref(), Some("team-b"));
    assert_eq!(
        taken["member-b"][0].object["metadata"]["namespace"],
        "team-b"
    );
    assert_eq!(taken["cluster-a"][0].namespace.as_deref(), Some("ns"));
}
