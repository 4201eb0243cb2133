//! The orphan sweep with caches made by hand and a stand-in API server.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, ObjectMeta};
use kube::runtime::reflector;
use kube::runtime::watcher::Event;

use super::*;
use crate::client::fake_api;
use crate::core::Action;
use crate::engine::test_engine::{CLUSTER_A, CONTROL_TARGET, FixedCache, engine};

fn orphan(name: &str, parent_namespace: &str) -> ObjectMeta {
    let parent = ParentRef {
        context: "control".into(),
        namespace: Some(parent_namespace.into()),
        name: format!("parent-of-{name}"),
        uid: format!("uid-parent-of-{name}"),
    };
    let (labels, annotations) = parent.stamp("test-controller", "ConfigMap/v1");
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some("ns".into()),
        uid: Some(format!("uid-{name}")),
        labels: Some(labels),
        annotations: Some(annotations),
        ..ObjectMeta::default()
    }
}

#[tokio::test]
async fn a_parent_cache_that_never_lists_holds_back_only_its_own_parents_children() {
    let (client, requests) = fake_api::client(|_, _, _| (200, serde_json::json!({})));
    let mut engine = engine(client);
    // `crds` never lists (its writer is kept, so it never gives up either); `other` lists, empty.
    let (stuck, _writer_kept) = reflector::store::<ConfigMap>();
    let (listed, mut writer) = reflector::store::<ConfigMap>();
    writer.apply_watcher_event(&Event::Init);
    writer.apply_watcher_event(&Event::InitDone);
    engine.primaries.insert(
        (CONTROL_TARGET, Some("crds".into())),
        Arc::new(SharedWatch::fed(stuck, None)),
    );
    engine.primaries.insert(
        (CONTROL_TARGET, Some("other".into())),
        Arc::new(SharedWatch::fed(listed, None)),
    );
    // The child whose parent cache is stuck comes first.
    engine.children.push(ChildWatch {
        context: crate::Context::name(&CLUSTER_A).into(),
        resource: ApiResource::erase::<ConfigMap>(&()),
        cache: Arc::new(FixedCache(vec![
            orphan("judged-never", "crds"),
            orphan("judged-now", "other"),
        ])),
        answered: Default::default(),
        applied: Default::default(),
    });
    let engine = Arc::new(engine);
    let _ = tokio::time::timeout(Duration::from_secs(2), engine.sweep_orphans()).await;
    let lines = requests.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("DELETE /api/v1/namespaces/ns/configmaps/judged-now"),
        "{lines:?}"
    );
}

#[tokio::test]
async fn a_child_that_appears_for_a_parent_already_gone_is_removed_when_its_event_asks() {
    let (client, requests) = fake_api::client(|_, _, _| (200, serde_json::json!({})));
    let mut engine = engine(client);
    let (listed, mut writer) = reflector::store::<ConfigMap>();
    writer.apply_watcher_event(&Event::Init);
    writer.apply_watcher_event(&Event::InitDone);
    engine.primaries.insert(
        (CONTROL_TARGET, Some("other".into())),
        Arc::new(SharedWatch::fed(listed, None)),
    );
    let recreated = orphan("recreated", "other");
    engine.children.push(ChildWatch {
        context: crate::Context::name(&CLUSTER_A).into(),
        resource: ApiResource::erase::<ConfigMap>(&()),
        cache: Arc::new(FixedCache(vec![
            recreated.clone(),
            orphan("another", "other"),
        ])),
        answered: Default::default(),
        applied: Default::default(),
    });
    let engine = Arc::new(engine);
    // The request its ADDED event makes: the parent, with the UID the child names.
    let parent = ParentRef::of(&recreated).unwrap();
    let request = ReconcileKey {
        context: CONTROL_TARGET,
        object: parent.object_ref(),
    };
    let mut without_uid = request.clone();
    without_uid.object.extra.uid = None;
    let action = tokio::time::timeout(
        Duration::from_secs(2),
        engine.clone().reconcile(without_uid),
    )
    .await
    .unwrap();
    assert_eq!(action, Action::await_change(), "a parent that is gone");
    assert_eq!(
        requests.lines(),
        Vec::<String>::new(),
        "no UID, no judgement"
    );

    let action = tokio::time::timeout(Duration::from_secs(2), engine.reconcile(request))
        .await
        .unwrap();
    assert_eq!(action, Action::await_change(), "a parent that is gone");
    let lines = requests.lines();
    assert_eq!(lines.len(), 1, "only the gone parent's child: {lines:?}");
    assert!(
        lines[0].starts_with("DELETE /api/v1/namespaces/ns/configmaps/recreated"),
        "{lines:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_sweep_waiting_for_the_parents_cache_judges_once_it_lists_though_a_request_looked_meanwhile()
 {
    let (client, requests) = fake_api::client(|_, _, _| (200, serde_json::json!({})));
    let mut engine = engine(client);
    let (parents, mut writer) = reflector::store::<ConfigMap>();
    engine.primaries.insert(
        (CONTROL_TARGET, Some("crds".into())),
        Arc::new(SharedWatch::fed(parents, None)),
    );
    let gone = orphan("gone", "crds");
    engine.children.push(ChildWatch {
        context: crate::Context::name(&CLUSTER_A).into(),
        resource: ApiResource::erase::<ConfigMap>(&()),
        cache: Arc::new(FixedCache(vec![gone.clone()])),
        answered: Default::default(),
        applied: Default::default(),
    });
    let engine = Arc::new(engine);
    let sweep = tokio::spawn(engine.clone().sweep_orphans());
    tokio::time::sleep(Duration::from_millis(10)).await; // the sweep waits for the parents' cache

    // The child's event asks for its parent before the parents' cache has listed: nothing is judged.
    let request = ReconcileKey {
        context: CONTROL_TARGET,
        object: ParentRef::of(&gone).unwrap().object_ref(),
    };
    let action = tokio::time::timeout(Duration::from_secs(2), engine.clone().reconcile(request))
        .await
        .unwrap();
    assert_eq!(action, Action::await_change());
    assert_eq!(requests.lines(), Vec::<String>::new(), "judged unlisted");

    writer.apply_watcher_event(&Event::Init);
    writer.apply_watcher_event(&Event::InitDone);
    tokio::time::timeout(Duration::from_secs(10), sweep)
        .await
        .expect("the sweep goes on once the parents' cache has listed")
        .unwrap();
    let lines = requests.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("DELETE /api/v1/namespaces/ns/configmaps/gone"),
        "{lines:?}"
    );
}

#[tokio::test]
async fn the_sweep_unlinks_a_child_its_policy_orphans_and_deletes_the_others() {
    let (client, requests) = fake_api::client(|_, _, _| (200, serde_json::json!({})));
    let mut engine = engine(client);
    let (listed, mut writer) = reflector::store::<ConfigMap>();
    writer.apply_watcher_event(&Event::Init);
    writer.apply_watcher_event(&Event::InitDone);
    engine.primaries.insert(
        (CONTROL_TARGET, Some("other".into())),
        Arc::new(SharedWatch::fed(listed, None)),
    );
    let mut spared = orphan("spared", "other");
    let annotations = spared.annotations.get_or_insert_default();
    annotations.insert(crate::core::ON_DELETE_ANNOTATION.into(), "orphan".into());
    engine.children.push(ChildWatch {
        context: crate::Context::name(&CLUSTER_A).into(),
        resource: ApiResource::erase::<ConfigMap>(&()),
        cache: Arc::new(FixedCache(vec![spared, orphan("deleted", "other")])),
        answered: Default::default(),
        applied: Default::default(),
    });
    let engine = Arc::new(engine);
    tokio::time::timeout(Duration::from_secs(2), engine.sweep_orphans())
        .await
        .unwrap();
    let mut lines: Vec<String> = (requests.lines().into_iter())
        .map(|l| l.split('?').next().unwrap_or_default().to_owned())
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "DELETE /api/v1/namespaces/ns/configmaps/deleted",
            "PATCH /api/v1/namespaces/ns/configmaps/spared",
        ]
    );
    let unlink = (requests.all().into_iter())
        .find(|s| s.method == "PATCH")
        .unwrap();
    let body: serde_json::Value = serde_json::from_str(&unlink.body).unwrap();
    assert!(body["metadata"]["labels"][crate::core::CONTROLLER_LABEL].is_null());
}
