//! The orphan sweep with caches made by hand and a stand-in API server.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, ObjectMeta};
use kube::runtime::reflector;
use kube::runtime::watcher::Event;

use super::*;
use crate::core::Action;
use crate::engine::test_engine::{CLUSTER_A, CONTROL_CLUSTER, FixedCache, TestController, engine};
use crate::testing::fake_api;

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

/// An engine whose primary cache of namespace `other` has listed and holds no parent.
fn with_listed_primaries(client: kube::Client) -> Engine<TestController> {
    let engine = engine(client);
    let (listed, mut writer) = reflector::store::<ConfigMap>();
    writer.apply_watcher_event(&Event::Init);
    writer.apply_watcher_event(&Event::InitDone);
    engine.primaries.insert(
        (CONTROL_CLUSTER, Some("other".into())),
        Arc::new(SharedWatch::fed(listed, None)),
    );
    engine
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
        (CONTROL_CLUSTER, Some("crds".into())),
        Arc::new(SharedWatch::fed(stuck, None)),
    );
    engine.primaries.insert(
        (CONTROL_CLUSTER, Some("other".into())),
        Arc::new(SharedWatch::fed(listed, None)),
    );
    // The child whose parent cache is stuck comes first.
    engine.children.push(ChildWatch {
        context: crate::core::Context::name(&CLUSTER_A).into(),
        resource: ApiResource::erase::<ConfigMap>(&()),
        namespace: None,
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
    let mut engine = with_listed_primaries(client);
    let recreated = orphan("recreated", "other");
    engine.children.push(ChildWatch {
        context: crate::core::Context::name(&CLUSTER_A).into(),
        resource: ApiResource::erase::<ConfigMap>(&()),
        namespace: None,
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
        context: CONTROL_CLUSTER,
        object: parent.object_ref(),
    };
    let mut without_uid = request.clone();
    without_uid.object.extra.uid = None;
    let action = tokio::time::timeout(
        Duration::from_secs(2),
        engine.clone().reconcile(without_uid, None),
    )
    .await
    .unwrap();
    assert_eq!(action, Action::await_change(), "a parent that is gone");
    assert_eq!(
        requests.lines(),
        Vec::<String>::new(),
        "no UID, no judgement"
    );

    let action = tokio::time::timeout(Duration::from_secs(2), engine.reconcile(request, None))
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
        (CONTROL_CLUSTER, Some("crds".into())),
        Arc::new(SharedWatch::fed(parents, None)),
    );
    let gone = orphan("gone", "crds");
    engine.children.push(ChildWatch {
        context: crate::core::Context::name(&CLUSTER_A).into(),
        resource: ApiResource::erase::<ConfigMap>(&()),
        namespace: None,
        cache: Arc::new(FixedCache(vec![gone.clone()])),
        answered: Default::default(),
        applied: Default::default(),
    });
    let engine = Arc::new(engine);
    let sweep = tokio::spawn(engine.clone().sweep_orphans());
    tokio::time::sleep(Duration::from_millis(10)).await; // the sweep waits for the parents' cache

    // The child's event asks for its parent before the parents' cache has listed: nothing is judged.
    let request = ReconcileKey {
        context: CONTROL_CLUSTER,
        object: ParentRef::of(&gone).unwrap().object_ref(),
    };
    let action = tokio::time::timeout(
        Duration::from_secs(2),
        engine.clone().reconcile(request, None),
    )
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
    let mut engine = with_listed_primaries(client);
    let mut spared = orphan("spared", "other");
    let annotations = spared.annotations.get_or_insert_default();
    annotations.insert(crate::core::ON_DELETE_ANNOTATION.into(), "orphan".into());
    engine.children.push(ChildWatch {
        context: crate::core::Context::name(&CLUSTER_A).into(),
        resource: ApiResource::erase::<ConfigMap>(&()),
        namespace: None,
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

/// `name` in `ns`, stamped as `parent`'s child by the test controller.
fn child_of(name: &str, parent: &ParentRef) -> ObjectMeta {
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

/// A child watch of ConfigMaps in `context` holding `children`.
fn watch_of(context: &str, children: Vec<ObjectMeta>) -> ChildWatch {
    ChildWatch {
        context: context.into(),
        resource: ApiResource::erase::<ConfigMap>(&()),
        namespace: None,
        cache: Arc::new(FixedCache(children)),
        answered: Default::default(),
        applied: Default::default(),
    }
}

/// The requests that wrote a child (deleted or unlinked it): any but the Events' POSTs.
fn child_writes(requests: &crate::testing::fake_api::Requests) -> Vec<String> {
    let lines = requests.lines().into_iter();
    lines.filter(|l| !l.contains("/events")).collect()
}

#[tokio::test]
async fn a_forged_child_naming_an_absent_parent_under_a_live_parents_uid_deletes_nothing() {
    let (client, requests) = fake_api::client(|_, _, _| (200, serde_json::json!({})));
    let mut engine = engine(client);
    // The real parent, live in its listed cache.
    let (parents, mut writer) = reflector::store::<ConfigMap>();
    writer.apply_watcher_event(&Event::Init);
    let live = crate::engine::test_engine::parent(&[]);
    writer.apply_watcher_event(&Event::InitApply(live));
    writer.apply_watcher_event(&Event::InitDone);
    engine.primaries.insert(
        (CONTROL_CLUSTER, Some("crds".into())),
        Arc::new(SharedWatch::fed(parents, None)),
    );
    let real = ParentRef {
        context: "control".into(),
        namespace: Some("crds".into()),
        name: "parent".into(),
        uid: "uid-parent".into(),
    };
    // The forged object: the real parent's UID, a parent that does not exist; first of its UID's children.
    let ghost = ParentRef {
        name: "ghost".into(),
        ..real.clone()
    };
    let forged = child_of("forged", &ghost);
    let cluster_a = crate::core::Context::name(&CLUSTER_A);
    engine.children.push(watch_of(
        cluster_a,
        vec![forged.clone(), child_of("web", &real)],
    ));
    engine
        .children
        .push(watch_of("control", vec![child_of("db", &real)]));
    let engine = Arc::new(engine);

    // Its event asks for the absent parent, under the real one's UID; asked twice, then the sweep.
    let request = ReconcileKey {
        context: CONTROL_CLUSTER,
        object: ParentRef::of(&forged).unwrap().object_ref(),
    };
    for _ in 0..2 {
        let reconcile = engine.clone().reconcile(request.clone(), None);
        let action = tokio::time::timeout(Duration::from_secs(2), reconcile).await;
        assert_eq!(action.unwrap(), Action::await_change());
    }
    tokio::time::timeout(Duration::from_secs(2), engine.clone().sweep_orphans())
        .await
        .unwrap();
    assert_eq!(
        child_writes(&requests),
        Vec::<String>::new(),
        "nothing deleted"
    );
    // Reported once, on the real parent.
    let events: Vec<String> = (requests.all().into_iter())
        .filter(|s| s.method == "POST" && s.uri.contains("/events"))
        .map(|s| s.body)
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].contains("ChildConflict"), "{events:?}");
    assert!(events[0].contains(r#""name":"parent""#), "{events:?}");
    assert!(
        events[0].contains("ConfigMap ns/forged in cluster-a carries this parent's UID"),
        "{events:?}"
    );
}

#[tokio::test]
async fn children_of_one_gone_uid_are_each_judged_by_their_own_reference() {
    let (client, requests) = fake_api::client(|_, _, _| (200, serde_json::json!({})));
    let mut engine = with_listed_primaries(client);
    // Two children of one UID that no parent has, naming different parents.
    let first = ParentRef {
        context: "control".into(),
        namespace: Some("other".into()),
        name: "first".into(),
        uid: "uid-gone".into(),
    };
    let second = ParentRef {
        name: "second".into(),
        ..first.clone()
    };
    let cluster_a = crate::core::Context::name(&CLUSTER_A);
    engine.children.push(watch_of(
        cluster_a,
        vec![child_of("of-second", &second), child_of("of-first", &first)],
    ));
    let engine = Arc::new(engine);
    let request = ReconcileKey {
        context: CONTROL_CLUSTER,
        object: first.object_ref(),
    };
    let reconcile = engine.clone().reconcile(request, None);
    let action = tokio::time::timeout(Duration::from_secs(2), reconcile).await;
    assert_eq!(
        action.unwrap(),
        Action::await_change(),
        "a parent that is gone"
    );
    let lines = child_writes(&requests);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("DELETE /api/v1/namespaces/ns/configmaps/of-first"),
        "{lines:?}"
    );
}
