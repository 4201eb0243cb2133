//! A controller's side of a leave: its parents are reconciled once the member is forgotten, not before,
//! and its events' recorders about the member go.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use tokio::sync::{mpsc, oneshot};

use super::follow;
use kube::Resource;

use crate::engine::engine::ReconcileKey;
use crate::engine::status::events::Note;
use crate::engine::test_engine::{CONTROL_CLUSTER, TestController, engine, parent};
use crate::executor::key_queue;
use crate::members::{LeavePolicy, LeaveProgress, MemberChange, Slot};
use crate::readiness::Readiness;
use crate::watch::SharedWatch;

#[tokio::test(start_paused = true)]
async fn a_leave_reconciles_the_parents_once_the_member_is_forgotten_not_while_it_still_counts_as_leaving()
 {
    let (client, _) = crate::testing::fake_api::client(|_, _, _| (200, serde_json::json!({})));
    let engine = engine(client);
    let (store, mut writer) = reflector::store();
    writer.apply_watcher_event(&watcher::Event::Apply(parent(&[])));
    let primary = Arc::new(SharedWatch::fed(store, None));
    engine
        .primaries
        .insert((CONTROL_CLUSTER, Some("crds".into())), primary);
    let (keys, queue) = key_queue(Duration::ZERO, Default::default(), Default::default());
    engine.begin_term(&keys);
    let parent_key = ReconcileKey::<TestController> {
        context: CONTROL_CLUSTER,
        object: ObjectRef::from_obj(&parent(&[])),
    };
    // The term's first run of the parent is over: the queue is empty.
    let first = tokio::time::timeout(Duration::from_secs(1), queue.next()).await;
    assert!(first.is_ok_and(|key| key == parent_key));
    queue.finished(&parent_key, None);
    assert!(queue.waiting().is_empty());

    // An event about the member: its recorder goes with the member.
    let (events, _) = crate::testing::fake_api::client(|_, _, _| (201, serde_json::json!({})));
    let note = Note::normal(
        "ClusterUnreachable",
        "Apply",
        "member-a cannot be reached".into(),
    );
    let about = parent(&[]).object_ref(&());
    (engine.events)
        .publish("control", events, &about, note.about("member-a"))
        .await;
    assert!(engine.events.keeps("control", Some("member-a")));

    let (changes, received) = mpsc::channel(1);
    let engine = Arc::new(engine);
    let following = tokio::spawn(follow(engine.clone(), received));
    let health = Arc::new(Readiness::default());
    let progress = Arc::new(LeaveProgress::new(
        "member-a",
        Slot::default(),
        None,
        health,
    ));
    let (done, answer) = oneshot::channel();
    let change = MemberChange::Left {
        name: "member-a".into(),
        policy: LeavePolicy::Orphan,
        progress: progress.clone(),
        done,
    };
    changes.send(change).await.unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(10), answer).await;
    assert!(matches!(answered, Ok(Ok(()))), "the controller's part ends");

    // Other controllers' parts still run: the member counts as leaving, so a reconcile now would say so,
    // and none would follow to say it left.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(
        queue.waiting().is_empty(),
        "no parent is reconciled while the member is not forgotten"
    );

    progress.forget();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while queue.waiting() != [parent_key.clone()] {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the parent is reconciled once the member is forgotten"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!engine.events.keeps("control", Some("member-a")));
    following.abort();
}

#[tokio::test(start_paused = true)]
async fn a_leave_that_is_dropped_counts_as_forgotten() {
    let progress = LeaveProgress::new(
        "member-a",
        Slot::default(),
        None,
        Arc::new(Readiness::default()),
    );
    let forgotten = progress.forgotten();
    drop(progress);
    let ended = tokio::time::timeout(Duration::from_secs(1), forgotten).await;
    assert!(ended.is_ok(), "nothing counts a dropped leave as leaving");
}

#[tokio::test(start_paused = true)]
async fn a_leave_deletes_once_the_caches_hold_the_children_just_applied() {
    use crate::engine::engine::ChildWatch;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ApiResource;

    let (store, mut writer) = reflector::store::<ConfigMap>();
    let watch = ChildWatch {
        context: "member-a".into(),
        resource: ApiResource::erase::<ConfigMap>(&()),
        namespace: None,
        cache: crate::watch::judged(
            Arc::new(SharedWatch::fed(store, Some(crate::core::PARENT_UID_LABEL))),
            crate::core::builtin_rule("", "ConfigMap"),
        ),
        answered: Default::default(),
        applied: Default::default(),
    };
    let health = crate::core::ChildHealth::without_projection(
        Some("ns"),
        "web",
        crate::core::Assessment::new(crate::core::Health::Healthy, "exists"),
    );
    let web = kube::api::ObjectMeta {
        uid: Some("uid-web".into()),
        ..kube::api::ObjectMeta::default()
    };
    watch
        .answered
        .record(Some("ns"), "web", (&web, "uid-parent"), health);
    let watches = [watch];
    let began = tokio::time::Instant::now();
    let arrives = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let child = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some("uid-web".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        writer.apply_watcher_event(&watcher::Event::Apply(child));
    };
    let (_, caught) = tokio::join!(arrives, super::caught_up(&watches));
    assert_eq!(caught.len(), 1);
    let waited = began.elapsed();
    assert!(
        (Duration::from_secs(1)..Duration::from_secs(2)).contains(&waited),
        "waited for the watch to deliver the child: {waited:?}"
    );

    // A child the watch never delivers holds the leave back only so long.
    let lost = kube::api::ObjectMeta {
        uid: Some("uid-lost".into()),
        ..kube::api::ObjectMeta::default()
    };
    watches[0].answered.record(
        Some("ns"),
        "lost",
        (&lost, "uid-parent"),
        crate::core::ChildHealth::without_projection(
            Some("ns"),
            "lost",
            crate::core::Assessment::new(crate::core::Health::Healthy, "exists"),
        ),
    );
    let began = tokio::time::Instant::now();
    super::caught_up(&watches).await;
    assert_eq!(began.elapsed().as_secs(), super::LIST_PATIENCE.as_secs());
}
