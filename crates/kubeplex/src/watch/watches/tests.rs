//! The watch task's own logic, driven by made-up watcher events (no API server).

use std::collections::BTreeMap;
use std::time::Duration;

use futures::stream;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::ObjectMeta;

use super::*;
use crate::executor::{QueueKey, key_queue};

fn config_map(name: &str, value: &str, parent: Option<&str>) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            labels: parent.map(|p| BTreeMap::from([("parent".to_owned(), p.to_owned())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("value".to_owned(), value.to_owned())])),
        ..ConfigMap::default()
    }
}

/// A watch over `events`, run to their end; returns the watch.
async fn drive(
    events: Vec<Result<Event<ConfigMap>, watcher::Error>>,
    index_label: Option<&'static str>,
    before: impl FnOnce(&Arc<SharedWatch<ConfigMap>>),
) -> Arc<SharedWatch<ConfigMap>> {
    drive_measured(events, index_label, before, &Metrics::default()).await
}

/// [`drive`], recording into `metrics`.
async fn drive_measured(
    events: Vec<Result<Event<ConfigMap>, watcher::Error>>,
    index_label: Option<&'static str>,
    before: impl FnOnce(&Arc<SharedWatch<ConfigMap>>),
    metrics: &Metrics,
) -> Arc<SharedWatch<ConfigMap>> {
    let (store, writer) = reflector::store();
    let watch = Arc::new(SharedWatch::new(store, index_label));
    before(&watch);
    let readiness = Arc::new(Readiness::default()).watch_started(
        "test",
        Some("ns"),
        "ConfigMap/v1".into(),
        "configmaps".into(),
    );
    run(
        stream::iter(events).reflect(writer),
        watch.clone(),
        readiness,
        metrics.watch("test", "ConfigMap/v1", Some("ns")),
        RetryBackoff::default(),
    )
    .await;
    watch
}

fn listed(objects: Vec<ConfigMap>) -> Vec<Result<Event<ConfigMap>, watcher::Error>> {
    let mut events = vec![Ok(Event::Init)];
    events.extend(objects.into_iter().map(|o| Ok(Event::InitApply(o))));
    events.push(Ok(Event::InitDone));
    events
}

#[tokio::test]
async fn an_object_missing_from_a_relist_is_published_as_deleted() {
    let mut events = listed(vec![config_map("a", "1", None), config_map("b", "1", None)]);
    events.extend(listed(vec![config_map("b", "2", None)]));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let watch = drive(events, None, |watch| {
        let seen = seen.clone();
        watch.subscribe(move |change| {
            let deleted = matches!(change, ObjectChange::Deleted(_));
            let mut seen = seen.lock();
            seen.push((deleted, change.object().name_any()));
            true
        });
    })
    .await;
    let mut seen = seen.lock().clone();
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen,
        [
            (false, "a".to_owned()),
            (false, "b".to_owned()),
            (true, "a".to_owned())
        ]
    );
    assert_eq!(watch.store().state().len(), 1);
}

#[tokio::test]
async fn a_child_caches_subscriber_hears_every_child_delivered_created_changed_or_deleted() {
    let mut events = listed(vec![config_map("a", "1", None)]);
    events.push(Ok(Event::Apply(config_map("b", "1", None))));
    events.push(Ok(Event::Apply(config_map("a", "2", None))));
    events.push(Ok(Event::Delete(config_map("a", "2", None))));
    let heard = Arc::new(Mutex::new(Vec::new()));
    drive(events, None, |watch| {
        let cache = crate::watch::judged(watch.clone(), crate::core::builtin_rule("", "ConfigMap"));
        let heard = heard.clone();
        cache.subscribe_delivered(Box::new(move |namespace, name| {
            heard
                .lock()
                .push(format!("{}/{name}", namespace.unwrap_or_default()));
            true
        }));
    })
    .await;
    assert_eq!(*heard.lock(), ["ns/a", "ns/b", "ns/a", "ns/a"]);
}

#[tokio::test]
async fn ten_thousand_updates_to_a_hundred_objects_wait_as_a_hundred_keys() {
    let mut events = listed(Vec::new());
    for round in 0..100 {
        for object in 0..100 {
            events.push(Ok(Event::Apply(config_map(
                &format!("o{object}"),
                &round.to_string(),
                None,
            ))));
        }
    }
    let (keys, queue) = key_queue(Duration::ZERO, Default::default(), Default::default());
    let watch = drive(events, None, |watch| {
        watch.subscribe(move |change| keys.send(ObjectRef::from_obj(change.object())));
    })
    .await;
    let waiting = queue.waiting();
    assert_eq!(
        waiting.len(),
        100,
        "a key waits once however often it changed"
    );
    for key in waiting {
        let latest = watch.store().get(&key).unwrap();
        assert_eq!(
            latest.data.as_ref().unwrap()["value"],
            "99",
            "the cache has the latest state"
        );
    }
}

#[tokio::test]
async fn the_index_follows_applies_relabels_deletes_and_relists() {
    let mut events = listed(vec![
        config_map("a", "1", Some("p1")),
        config_map("b", "1", Some("p1")),
    ]);
    events.push(Ok(Event::Apply(config_map("c", "1", Some("p2")))));
    events.push(Ok(Event::Apply(config_map("b", "2", Some("p2")))));
    events.push(Ok(Event::Delete(config_map("a", "1", Some("p1")))));
    let watch = drive(events, Some("parent"), |_| {}).await;
    let names = |value| {
        let mut names: Vec<String> = watch.indexed(value).iter().map(|o| o.name_any()).collect();
        names.sort();
        names
    };
    assert_eq!(names("p1"), Vec::<String>::new());
    assert_eq!(names("p2"), ["b", "c"]);
    assert_eq!(watch.index_values(), ["p2"]);
}

#[tokio::test(start_paused = true)]
async fn a_failing_watch_backs_off_and_an_init_is_no_progress() {
    // A watcher that cannot list emits `Init` before every attempt, then the error.
    let started = tokio::time::Instant::now();
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let recorded = attempts.clone();
    let events = stream::iter(0..).flat_map(move |_| {
        recorded.lock().push(started.elapsed());
        stream::iter([Ok(Event::Init), Err(watcher::Error::NoResourceVersion)])
    });
    let (store, _writer) = reflector::store::<ConfigMap>();
    let watch = Arc::new(SharedWatch::new(store, None));
    let readiness = Arc::new(Readiness::default()).watch_started(
        "test",
        None,
        "ConfigMap/v1".into(),
        "configmaps".into(),
    );
    let _ = tokio::time::timeout(
        Duration::from_secs(60),
        run(
            events,
            watch,
            readiness,
            Metrics::default().watch("test", "ConfigMap/v1", None),
            RetryBackoff::default(),
        ),
    )
    .await;
    let attempts = attempts.lock().clone();
    // 0.5, 1, 2, 4, 8, 8, … seconds (each up to twice that with jitter): at most a dozen tries in a minute.
    assert!((5..=12).contains(&attempts.len()), "{attempts:?}");
    let gaps: Vec<Duration> = attempts.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps[3] >= Duration::from_secs(4),
        "the interval grows: {gaps:?}"
    );
    assert!(
        gaps.iter().all(|g| *g < Duration::from_secs(16)),
        "and is capped: {gaps:?}"
    );
}

#[tokio::test]
async fn events_objects_and_restarts_are_counted_per_watch() {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Metrics::register(&mut registry);
    let mut events = listed(vec![config_map("a", "1", None), config_map("b", "1", None)]);
    events.push(Ok(Event::Apply(config_map("c", "1", None))));
    events.push(Ok(Event::Apply(config_map("a", "2", None))));
    events.push(Ok(Event::Delete(config_map("b", "1", None))));
    let gone = kube::core::Status {
        code: 410,
        ..Default::default()
    };
    events.push(Err(watcher::Error::WatchError(Box::new(gone))));
    drive_measured(events, None, |_| {}, &metrics).await;
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let labels = r#"cluster="test",kind="ConfigMap/v1",namespace="ns""#;
    for line in [
        format!(r#"kubeplex_watch_events_total{{{labels},type="applied"}} 2"#),
        format!(r#"kubeplex_watch_events_total{{{labels},type="deleted"}} 1"#),
        format!(r#"kubeplex_cache_objects{{{labels}}} 2"#),
        format!(r#"kubeplex_watch_restarts_total{{{labels},reason="expired"}} 1"#),
    ] {
        assert!(text.contains(&line), "missing {line} in\n{text}");
    }
}

#[tokio::test]
async fn a_released_watch_ends_leaves_the_health_report_and_the_metrics_and_frees_its_cache() {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Metrics::register(&mut registry);
    let readiness = Arc::new(Readiness::default());
    readiness.declare("test", true);
    let watches = WatchRegistry::new(readiness.clone(), metrics);
    // A server that answers every list with one object and every watch with nothing new.
    let (client, _) = crate::testing::fake_api::client(|_, uri, _| {
        if uri.contains("watch=true") {
            (
                200,
                serde_json::json!({"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}}}),
            )
        } else {
            let item = serde_json::to_value(config_map("a", "1", None)).unwrap();
            (
                200,
                serde_json::json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": [item]}),
            )
        }
    });
    let key = WatchKey {
        context: "test".into(),
        kind: TypeId::of::<ConfigMap>(),
        namespace: Some("ns".into()),
        label_selector: None,
        field_selector: None,
        index_label: None,
    };
    let watch = watches.watch::<ConfigMap>(key.clone(), client);
    let listed = tokio::time::timeout(Duration::from_secs(10), watch.listed()).await;
    assert_eq!(listed, Ok(true));
    let watched = || readiness.report().clusters["test"].watches.len();
    assert_eq!(watched(), 1);
    let scrape = || {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text.contains("kubeplex_cache_objects{")
    };
    assert!(scrape(), "the cache's size is reported while open");

    let cache = Arc::downgrade(&watch);
    drop(watch);
    watches.release(&key);
    assert_eq!(watched(), 0, "the watch left the readiness report");
    assert!(!scrape(), "the cache's size is no longer reported");
    tokio::time::timeout(Duration::from_secs(10), async {
        while cache.strong_count() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the cache was not freed: its task still holds it");
    watches.release(&key); // closing a closed watch does nothing
}

#[tokio::test(start_paused = true)]
async fn every_task_waiting_for_a_watch_to_list_is_woken_when_it_lists() {
    let (store, mut writer) = reflector::store::<ConfigMap>();
    let watch = Arc::new(SharedWatch::fed(store, None));
    let waiting: Vec<_> = (0..3).map(|_| tokio::spawn(watch.listed())).collect();
    tokio::time::sleep(Duration::from_millis(10)).await; // each has polled, and waits
    // A look that does not wait (a request for a gone parent asks whether the cache has listed).
    assert!(!watch.has_listed());

    writer.apply_watcher_event(&Event::Init);
    writer.apply_watcher_event(&Event::InitDone);
    assert!(watch.has_listed());
    for (i, waiter) in waiting.into_iter().enumerate() {
        let woken = tokio::time::timeout(Duration::from_secs(10), waiter).await;
        assert!(
            matches!(woken, Ok(Ok(true))),
            "waiter {i} was not woken: {woken:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_ends_before_it_lists_tells_its_waiters() {
    let (store, writer) = reflector::store::<ConfigMap>();
    let watch = Arc::new(SharedWatch::fed(store, None));
    let waiter = tokio::spawn(watch.listed());
    tokio::time::sleep(Duration::from_millis(10)).await;
    drop(writer); // the watch task ended (its watch was released)
    let woken = tokio::time::timeout(Duration::from_secs(10), waiter).await;
    assert!(matches!(woken, Ok(Ok(false))), "{woken:?}");
    assert!(!watch.has_listed());
}

#[tokio::test]
async fn a_watch_counts_as_listed_only_once_its_list_was_handed_out_and_indexed() {
    let events = listed(vec![
        config_map("a", "1", Some("p")),
        config_map("b", "1", Some("p")),
    ]);
    let seen_listed = Arc::new(Mutex::new(Vec::new()));
    let watch = drive(events, Some("parent"), |watch| {
        let seen_listed = seen_listed.clone();
        let listed = Mutex::new(Some(Box::pin(watch.listed())));
        watch.subscribe(move |_| {
            // What a task waiting for the list would see while the list is being handed out.
            let mut waiting = listed.lock();
            let done = match waiting.as_mut() {
                Some(wait) => futures::FutureExt::now_or_never(wait).is_some(),
                None => true,
            };
            if done {
                *waiting = None; // a finished wait is not polled again
            }
            seen_listed.lock().push(done);
            true
        });
    })
    .await;
    assert_eq!(*seen_listed.lock(), [false, false]);
    assert!(watch.has_listed());
    assert_eq!(watch.indexed("p").len(), 2);
}

/// The queue above groups nothing: every object in one group.
impl QueueKey for ObjectRef<ConfigMap> {
    type Group = ();
    fn group(&self) -> Self::Group {}
    fn group_name((): &Self::Group) -> String {
        String::new()
    }
}
