//! Cluster identity on real clusters: two contexts that reach one API server — the later one refused,
//! nothing written through it, and why in `/readyz`, the parent's status and an Event; allowed, both
//! written to. A context whose server is replaced by another cluster: [`replaced`]; a member whose
//! credentials reach another cluster: [`rotation`].

mod replaced;
mod rotation;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kubeplex::status::ClusterStatus;
use kubeplex::{ClusterState, ContextName, Manager};
use kubeplex_testenv::eventually;

use crate::children::env;
use crate::children::parent::{CLUSTER_A, Parent, ParentSpec, config_map_parents};
use crate::children::wait::{create_parent, wait_parent};
use crate::support::{create_namespace, polling, stop, wait_exists, wait_started};

const CLUSTER_B: ContextName = ContextName::new("cluster-b");
/// Where the children go, in cluster-a (which both names reach).
const KIDS: &str = "identity-kids";

config_map_parents!(
    Refused,
    "identity-refused",
    "identity-refused",
    [CLUSTER_A, CLUSTER_B],
    KIDS
);
config_map_parents!(
    Allowed,
    "identity-allowed",
    "identity-allowed",
    [CLUSTER_A, CLUSTER_B],
    KIDS
);
config_map_parents!(
    ByProperty,
    "identity-property",
    "identity-property",
    [CLUSTER_A, CLUSTER_B],
    KIDS
);

/// A manager whose context cluster-b reaches cluster-a's API server.
fn manager(env: &kubeplex_testenv::TestEnv) -> Manager {
    Manager::with_kubeconfig(env.kubeconfig().clone()).context_alias(CLUSTER_B, "cluster-a")
}

fn condition_ready(parent: &Parent) -> bool {
    crate::children::wait::condition(parent, "Applied").is_some_and(|c| c.status == "True")
}

fn cluster<'a>(parent: &'a Parent, name: &str) -> Option<&'a ClusterStatus> {
    parent.status.as_ref()?.fleet.clusters.get(name)
}

#[tokio::test]
async fn the_later_of_two_contexts_for_one_cluster_is_not_written_to_and_says_why() {
    let env = env().await;
    let control = env.client("control").await.unwrap();
    let cluster_a = env.client("cluster-a").await.unwrap();
    create_namespace(&cluster_a, KIDS).await;
    let running = manager(env).controller(Refused).start().await.unwrap();
    const SAME: &str = "reaches the same cluster as cluster-a";

    let report = eventually("cluster-b refused in /readyz", polling(), async || {
        let report = running.readiness();
        let refused = report.clusters["cluster-b"].reasons.iter();
        match refused.clone().any(|r| r.contains(SAME)) {
            true => Ok(report),
            false => Err(format!("{report:#?}")),
        }
    })
    .await;
    let identity = |name: &str| report.clusters[name].identity.clone();
    assert!(identity("cluster-a").is_some(), "{report:#?}");
    assert_eq!(identity("cluster-a"), identity("cluster-b"));
    assert_ne!(identity("control"), identity("cluster-a"));
    assert!(
        report.clusters["cluster-a"].reasons.is_empty(),
        "{report:#?}"
    );
    assert!(!report.ready, "a required context refused: not ready");

    let spec = ParentSpec {
        children: vec!["two-names-{cluster}".into()],
        ..ParentSpec::default()
    };
    create_parent(&control, "identity-refused", "two-names", spec).await;
    let parent = wait_parent(
        &control,
        "identity-refused",
        "two-names",
        "cluster-b refused",
        |p| {
            let refused = cluster(p, "cluster-b").is_some_and(|c| {
                c.state == ClusterState::Failed && c.message.as_deref().unwrap_or("").contains(SAME)
            });
            refused && cluster(p, "cluster-a").is_some_and(|c| c.state == ClusterState::Applied)
        },
    )
    .await;
    // Each entry names the cluster's identity: the two show one.
    for name in ["cluster-a", "cluster-b"] {
        let entry = cluster(&parent, name).unwrap();
        assert_eq!(entry.identity, identity("cluster-a"), "{name}: {entry:#?}");
    }
    let kids: Api<ConfigMap> = Api::namespaced(cluster_a, KIDS);
    wait_exists(&kids, "two-names-cluster-a").await;
    let through_b = kids.get_opt("two-names-cluster-b").await.unwrap();
    assert!(
        through_b.is_none(),
        "a child written through the refused name: {:#?}",
        parent.status
    );

    let events: Api<Event> = Api::namespaced(control, "identity-refused");
    eventually("an Event naming both names", polling(), async || {
        let list = events.list(&ListParams::default()).await.unwrap();
        let told = list.items.iter().any(|e| {
            let note = e.note.as_deref().unwrap_or_default();
            e.reason.as_deref() == Some("ChildApplyFailed")
                && note.contains("cluster-b")
                && note.contains(SAME)
        });
        told.then_some(())
            .ok_or_else(|| format!("{:#?}", list.items))
    })
    .await;
    stop(running).await;
}

#[tokio::test]
async fn allowed_two_contexts_for_one_cluster_are_both_written_to() {
    let env = env().await;
    let control = env.client("control").await.unwrap();
    let cluster_a = env.client("cluster-a").await.unwrap();
    create_namespace(&cluster_a, KIDS).await;
    let running = manager(env)
        .allow_duplicate_clusters()
        .controller(Allowed)
        .start()
        .await
        .unwrap();
    wait_started(&running, "both names ready").await;
    let report = running.readiness();
    let identity = |name: &str| report.clusters[name].identity.clone();
    assert!(identity("cluster-b").is_some(), "{report:#?}");
    assert_eq!(identity("cluster-a"), identity("cluster-b"));

    // One object declared through both names (distinct ones would each be pruned through the other name
    // as undeclared there: what the refusal prevents).
    let spec = ParentSpec {
        children: vec!["one-object".into()],
        ..ParentSpec::default()
    };
    create_parent(&control, "identity-allowed", "both", spec).await;
    let parent = wait_parent(
        &control,
        "identity-allowed",
        "both",
        "applied through both",
        |p| {
            ["cluster-a", "cluster-b"].iter().all(|name| {
                cluster(p, name)
                    .is_some_and(|c| c.state == ClusterState::Applied && c.children == 1)
            })
        },
    )
    .await;
    let kids: Api<ConfigMap> = Api::namespaced(cluster_a, KIDS);
    wait_exists(&kids, "one-object").await;
    assert!(condition_ready(&parent), "{:#?}", parent.status);
    stop(running).await;
}

/// The ClusterProperty CRD of KEP-2149 (`about.k8s.io/v1alpha1`, cluster-scoped, a `spec.value`).
fn cluster_property_crd() -> CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": "clusterproperties.about.k8s.io", "annotations": {
            // A k8s.io group needs it; about-api's own CRD names its approval so.
            "api-approved.kubernetes.io":
                "https://github.com/kubernetes/enhancements/tree/master/keps/sig-multicluster/2149-clusterid" } },
        "spec": { "group": "about.k8s.io", "scope": "Cluster",
            "names": { "kind": "ClusterProperty", "listKind": "ClusterPropertyList",
                "plural": "clusterproperties", "singular": "clusterproperty" },
            "versions": [{ "name": "v1alpha1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "properties": {
                    "spec": { "type": "object", "required": ["value"], "properties": {
                        "value": { "type": "string", "minLength": 1, "maxLength": 128 } } } } } } }] },
    }))
    .unwrap()
}

#[tokio::test]
async fn a_cluster_property_names_its_cluster_where_asked_for() {
    let env = env().await;
    env.install_crd("cluster-a", cluster_property_crd())
        .await
        .unwrap();
    let gvk = GroupVersionKind::gvk("about.k8s.io", "v1alpha1", "ClusterProperty");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "clusterproperties");
    let cluster_a = env.client("cluster-a").await.unwrap();
    let properties: Api<DynamicObject> = Api::all_with(cluster_a, &resource);
    let mut property = DynamicObject::new("cluster.clusterset.k8s.io", &resource);
    property.data = serde_json::json!({ "spec": { "value": "cluster-a.fleet.test" } });
    let params = PatchParams::apply("identity-test").force();
    properties
        .patch(
            "cluster.clusterset.k8s.io",
            &params,
            &Patch::Apply(&property),
        )
        .await
        .unwrap();
    let control = env.client("control").await.unwrap();
    let namespaces: Api<Namespace> = Api::all(control);
    let control_uid = namespaces
        .get_metadata("kube-system")
        .await
        .unwrap()
        .metadata
        .uid;

    let running = manager(env)
        .identity_from_cluster_property()
        .controller(ByProperty)
        .start()
        .await
        .unwrap();
    let report = eventually("both names identified", polling(), async || {
        let report = running.readiness();
        let identity = |name: &str| report.clusters[name].identity.clone();
        match identity("cluster-a").is_some() && identity("cluster-b").is_some() {
            true => Ok(report),
            false => Err(format!("{report:#?}")),
        }
    })
    .await;
    let identity = |name: &str| report.clusters[name].identity.clone();
    // cluster-a has the property; control has none (nor its CRD): its UID names it.
    assert_eq!(
        identity("cluster-a").as_deref(),
        Some("cluster-a.fleet.test")
    );
    assert_eq!(identity("control"), control_uid);
    // The property tells the two names of cluster-a for one cluster too.
    let same = "reaches the same cluster as cluster-a (identity cluster-a.fleet.test)";
    eventually("cluster-b refused", polling(), async || {
        let report = running.readiness();
        let mut refused = report.clusters["cluster-b"].reasons.iter();
        match refused.any(|r| r.contains(same)) {
            true => Ok(()),
            false => Err(format!("{report:#?}")),
        }
    })
    .await;
    stop(running).await;
}
