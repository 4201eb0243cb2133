//! The wait of a term's first reconciles for the child caches' first lists, in paused time.

use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{FIRST_LISTS_WAIT, first_lists};

/// A cache that lists after `delay`.
fn lists_after(delay: Duration) -> BoxFuture<'static, ()> {
    tokio::time::sleep(delay).boxed()
}

/// A cache that never lists (its context does not answer).
fn never_lists() -> BoxFuture<'static, ()> {
    futures::future::pending().boxed()
}

#[tokio::test(start_paused = true)]
async fn the_first_reconciles_wait_for_the_last_cache_to_list() {
    let (_end, term) = watch::channel(false);
    let start = Instant::now();
    let caches = vec![
        lists_after(Duration::from_millis(300)),
        lists_after(Duration::from_millis(700)),
    ];
    first_lists(caches, term).await;
    assert_eq!(start.elapsed(), Duration::from_millis(700));
}

#[tokio::test(start_paused = true)]
async fn a_cache_that_never_lists_holds_them_back_no_longer_than_the_bound() {
    let (_end, term) = watch::channel(false);
    let start = Instant::now();
    first_lists(vec![lists_after(Duration::ZERO), never_lists()], term).await;
    assert_eq!(start.elapsed(), FIRST_LISTS_WAIT);
    assert_eq!(FIRST_LISTS_WAIT, Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn the_end_of_the_term_ends_the_wait() {
    let (end, term) = watch::channel(false);
    let start = Instant::now();
    let waiting = tokio::spawn(first_lists(vec![never_lists()], term));
    tokio::time::sleep(Duration::from_millis(100)).await;
    end.send_replace(true);
    waiting.await.expect("the wait ended");
    assert_eq!(start.elapsed(), Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn no_child_cache_waits_for_nothing() {
    let (_end, term) = watch::channel(false);
    let start = Instant::now();
    first_lists(Vec::new(), term).await;
    assert_eq!(start.elapsed(), Duration::ZERO);
}

/// A parent of a shard whose fence lapsed while the Lease loop still holds the shard (a renewal came late)
/// is tried again shortly: nothing else queues it when the fence reopens. One of a shard another replica
/// holds is left to it.
#[tokio::test]
async fn work_refused_by_a_lapsed_fence_of_a_shard_still_held_is_tried_again() {
    use std::sync::Arc;

    use crate::core::Action;

    use crate::engine::engine::ReconcileKey;
    use crate::engine::test_engine::{CONTROL_TARGET, engine, parent};
    use crate::ha::{FENCE_LAPSE_RETRY, ShardBy, ShardState};

    let (client, requests) =
        crate::testing::fake_api::client(|_, _, _| (404, serde_json::json!({})));
    let mut engine = engine(client);
    // One shard: every parent is in it. Its fence is closed (never renewed) whatever is held.
    let shards = Arc::new(ShardState::new(ShardBy::Parent(1), vec!["0".into()]));
    let mut runtime = Arc::try_unwrap(engine.runtime)
        .ok()
        .expect("the engine's runtime alone");
    runtime.shards = Some(shards.clone());
    engine.runtime = Arc::new(runtime);
    let engine = Arc::new(engine);
    let key = ReconcileKey {
        context: CONTROL_TARGET,
        object: kube::runtime::reflector::ObjectRef::from_obj(&parent(&[])),
    };

    shards.set_held(vec![true]);
    let action = super::work(&engine)(key.clone()).await;
    assert_eq!(action, Action::requeue(FENCE_LAPSE_RETRY));

    shards.set_held(vec![false]);
    let action = super::work(&engine)(key).await;
    assert_eq!(action, Action::await_change());
    assert!(
        requests.all().is_empty(),
        "reconciled: {:?}",
        requests.lines()
    );
}
