//! A term's sources: every cache sends into the one queue, which holds each key once.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, ObjectMeta};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;

use crate::core::{PARENT_UID_LABEL, ParentRef};
use crate::engine::engine::{ChildWatch, ReconcileKey};
use crate::engine::test_engine::{CLUSTER_A, CONTROL_TARGET, TestController, engine, parent};
use crate::executor::key_queue;
use crate::watch::SharedWatch;

/// A watch whose cache holds `objects`.
fn cached(objects: Vec<ConfigMap>, index: Option<&'static str>) -> Arc<SharedWatch<ConfigMap>> {
    let (store, mut writer) = reflector::store::<ConfigMap>();
    for object in objects {
        writer.apply_watcher_event(&watcher::Event::Apply(object));
    }
    Arc::new(SharedWatch::fed(store, index))
}

/// A child of the test parent in cluster-a, called `name`.
fn child(name: &str) -> ConfigMap {
    let parent = ParentRef {
        context: "control".into(),
        namespace: Some("crds".into()),
        name: "parent".into(),
        uid: "uid-parent".into(),
    };
    let (labels, annotations) = parent.stamp("test-controller", "ConfigMap/v1");
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

#[tokio::test]
async fn a_term_queues_each_cached_parent_once_whichever_caches_name_it() {
    let (client, _) = crate::testing::fake_api::client(|_, _, _| (200, serde_json::json!({})));
    let mut engine = engine(client);
    engine.primaries.insert(
        (CONTROL_TARGET, Some("crds".into())),
        cached(vec![parent(&[])], None),
    );
    engine.children.push(ChildWatch {
        context: crate::core::Context::name(&CLUSTER_A).into(),
        resource: ApiResource::erase::<ConfigMap>(&()),
        cache: crate::watch::judged(
            cached(vec![child("a"), child("b")], Some(PARENT_UID_LABEL)),
            crate::core::builtin_rule("", "ConfigMap"),
        ),
        answered: Default::default(),
        applied: Default::default(),
    });
    let (keys, queue) = key_queue(Duration::ZERO, Default::default(), Default::default());
    engine.begin_term(&keys);
    let parent_key = ReconcileKey::<TestController> {
        context: CONTROL_TARGET,
        object: ObjectRef::from_obj(&parent(&[])),
    };
    assert!(
        queue.waiting() == [parent_key.clone()],
        "the primary's cache and both children name it: it waits once"
    );
    assert!(
        engine.term_keys.get().is_some(),
        "later caches find the term's queue"
    );

    // Each member change queues every parent again, into the same entry.
    engine.queue_every_parent();
    assert!(queue.waiting() == [parent_key]);
}
