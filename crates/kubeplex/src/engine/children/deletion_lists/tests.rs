//! Shared lists: the parents that ask while a list runs are named together by the next one, each gets its
//! own children only, a failure reaches every parent named, and a parent whose list was cancelled asks again.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject};
use tokio::sync::{Semaphore, mpsc};

use super::DeletionLists;
use crate::core::PARENT_UID_LABEL;

/// The UIDs a list's label selector names (`parent-uid in (a,b)`), from its request's query.
fn named(uri: &str) -> Vec<String> {
    let query = uri
        .replace("%28", "(")
        .replace("%29", ")")
        .replace("%2C", ",")
        .replace("%2F", "/")
        .replace('+', " ");
    let inner = query
        .split_once(" in (")
        .and_then(|(_, rest)| rest.split_once(')'));
    inner.map_or_else(Vec::new, |(uids, _)| {
        uids.split(',').map(str::to_owned).collect()
    })
}

/// A fake server whose lists each wait for a permit of `gate`, answering two children per named parent
/// (and one of a parent nobody asked for); the lists' URIs go to the returned receiver as they arrive.
fn server(gate: Arc<Semaphore>) -> (Api<DynamicObject>, mpsc::UnboundedReceiver<String>) {
    let (seen, lists) = mpsc::unbounded_channel();
    let client = crate::testing::fake_api::answered_by(move |request| {
        let (gate, seen) = (gate.clone(), seen.clone());
        async move {
            let _ = seen.send(request.uri.clone());
            gate.acquire().await.unwrap().forget();
            let mut uids = named(&request.uri);
            if uids == ["fail"] {
                return (
                    500,
                    serde_json::json!({ "kind": "Status", "code": 500, "message": "etcd" }),
                );
            }
            uids.push("stranger".into());
            let items: Vec<_> = (uids.iter())
                .flat_map(|uid| (0..2).map(move |i| (uid.clone(), i)))
                .map(|(uid, i)| serde_json::json!({
                    "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                    "metadata": { "name": format!("{uid}-{i}"), "labels": { PARENT_UID_LABEL: uid } },
                }))
                .collect();
            (
                200,
                serde_json::json!({ "apiVersion": "meta.k8s.io/v1",
                "kind": "PartialObjectMetadataList", "metadata": {}, "items": items }),
            )
        }
    });
    let resource = ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "apps",
        "v1",
        "Deployment",
    ));
    (Api::namespaced_with(client, "ns", &resource), lists)
}

/// The next list the server saw, within 10 s.
async fn next(seen: &mut mpsc::UnboundedReceiver<String>) -> String {
    let next = tokio::time::timeout(Duration::from_secs(10), seen.recv()).await;
    next.expect("a list within 10 s").unwrap()
}

/// The names of what `children_of` found.
fn names(found: super::Found) -> Vec<String> {
    let found = found.unwrap_or_else(|e| panic!("{e}"));
    found.into_iter().filter_map(|c| c.metadata.name).collect()
}

/// Waits (at most 10 s) until `lists` has `count` parents waiting.
async fn until_waiting(lists: &DeletionLists, count: usize) {
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        while lists.waiting() != count {
            tokio::task::yield_now().await;
        }
    });
    waited.await.expect("the parents queued");
}

#[tokio::test]
async fn parents_asking_while_a_list_runs_are_named_together_by_the_next_each_getting_its_own() {
    let gate = Arc::new(Semaphore::new(0));
    let (api, mut seen) = server(gate.clone());
    let lists = Arc::new(DeletionLists::default());
    let ask = |uid: String| {
        let (lists, api) = (lists.clone(), api.clone());
        tokio::spawn(async move { names(lists.children_of("cluster-a", &api, &uid).await) })
    };
    let first = ask("uid-0".into());
    assert_eq!(named(&next(&mut seen).await), ["uid-0"]);
    let others: Vec<_> = (1..10).map(|i| ask(format!("uid-{i}"))).collect();
    until_waiting(&lists, 9).await;
    gate.add_permits(2);
    assert_eq!(first.await.unwrap(), ["uid-0-0", "uid-0-1"]);
    let second = named(&next(&mut seen).await);
    assert_eq!(
        second.len(),
        9,
        "one list names every parent that waited: {second:?}"
    );
    for (i, other) in (1..).zip(others) {
        assert_eq!(
            other.await.unwrap(),
            [format!("uid-{i}-0"), format!("uid-{i}-1")]
        );
    }
    assert!(seen.try_recv().is_err(), "two lists in all");
    assert_eq!(lists.places(), 0, "an idle place is let go");
}

#[tokio::test]
async fn a_failed_list_fails_every_parent_it_named() {
    let (api, _seen) = server(Arc::new(Semaphore::new(Semaphore::MAX_PERMITS)));
    let lists = DeletionLists::default();
    let failed = lists.children_of("cluster-a", &api, "fail").await;
    assert!(failed.is_err_and(|e| e.to_string().contains("etcd")));
}

#[tokio::test]
async fn a_parent_named_by_a_list_that_was_cancelled_asks_again_and_never_reads_it_as_empty() {
    let gate = Arc::new(Semaphore::new(0));
    let (api, mut seen) = server(gate.clone());
    let lists = Arc::new(DeletionLists::default());
    let ask = |uid: &'static str| {
        let (lists, api) = (lists.clone(), api.clone());
        tokio::spawn(async move { names(lists.children_of("cluster-a", &api, uid).await) })
    };
    // A first list holds the place while two parents queue; the first of them (the lock is fair) then
    // runs the list naming both, and its reconcile is dropped mid-list.
    let holder = ask("uid-h");
    next(&mut seen).await;
    let (dropped, asked) = (ask("uid-a"), ask("uid-b"));
    until_waiting(&lists, 2).await;
    gate.add_permits(1);
    holder.await.unwrap();
    assert_eq!(named(&next(&mut seen).await), ["uid-a", "uid-b"]);
    dropped.abort();
    let again = named(&next(&mut seen).await);
    assert_eq!(again, ["uid-b"], "asked again");
    // Two permits: the dropped list's may still be waiting for one.
    gate.add_permits(2);
    assert_eq!(asked.await.unwrap(), ["uid-b-0", "uid-b-1"]);
}
