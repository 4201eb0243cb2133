//! The executor's promises at run time, on a real cluster: a field selector filters at the server, debounce
//! merges a burst, a key never runs twice at once even with unbounded concurrency, and a slow controller
//! does not hold back another on the same watch.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::{Fleet, Recorder, WAIT, create_namespace, put_config_map, wait_started};
use k8s_openapi::api::core::v1::ConfigMap;
use kubeplex::{Action, Context, Controller, Cx, Manager, Plan, Reconcile};
use kubeplex_testenv::TestEnv;
use parking_lot::Mutex;
use tokio::sync::Semaphore;

/// The suite's clusters, with this module's kinds installed.
pub(crate) async fn env() -> &'static TestEnv {
    crate::support::clusters([]).await
}

/// Declares a ConfigMap controller in `cluster-a` that records each reconcile and awaits `work` in it.
macro_rules! recording {
    ($name:ident, $work:expr, $plan:expr) => {
        #[derive(Clone, Default)]
        struct $name {
            seen: Recorder,
            /// Reconciles running now, per object name, and the most ever at once for one name.
            running: Arc<Mutex<HashMap<String, usize>>>,
            most_at_once_per_key: Arc<AtomicUsize>,
            finished: Arc<AtomicUsize>,
        }

        impl Controller for $name {
            type Resource = ConfigMap;
            type Context = Fleet;
            fn plan() -> Plan<Fleet> {
                $plan
            }
        }

        impl Reconcile for $name {
            type Error = Infallible;
            async fn reconcile(
                &self,
                object: Arc<ConfigMap>,
                cx: &Cx<Fleet>,
            ) -> Result<Action, Infallible> {
                let name = object.metadata.name.clone().unwrap_or_default();
                let now = {
                    let mut running = self.running.lock();
                    let count = running.entry(name.clone()).or_default();
                    *count += 1;
                    *count
                };
                self.most_at_once_per_key.fetch_max(now, Ordering::SeqCst);
                self.seen.record(cx.cluster(), &object);
                $work.await;
                *self.running.lock().get_mut(&name).unwrap() -= 1;
                self.finished.fetch_add(1, Ordering::SeqCst);
                Ok(Action::await_change())
            }
        }
    };
}

recording!(
    Selected,
    tokio::time::sleep(Duration::ZERO),
    Plan::new("selected")
        .with_contexts([Fleet::ClusterA])
        .with_namespaces(["selector"])
        .with_field_selector("metadata.name=picked")
);
recording!(
    Debounced,
    tokio::time::sleep(Duration::ZERO),
    Plan::new("debounced")
        .with_contexts([Fleet::ClusterA])
        .with_namespaces(["debounce"])
        .with_debounce(Duration::from_secs(2))
);
recording!(
    Unbounded,
    tokio::time::sleep(Duration::from_millis(300)),
    Plan::new("unbounded")
        .with_contexts([Fleet::ClusterA])
        .with_namespaces(["unbounded"])
);
recording!(
    Slow,
    held(),
    Plan::new("slow")
        .with_contexts([Fleet::ClusterA])
        .with_namespaces(["shared-watch"])
        .with_concurrency(1)
);
recording!(
    Fast,
    tokio::time::sleep(Duration::ZERO),
    Plan::new("fast")
        .with_contexts([Fleet::ClusterA])
        .with_namespaces(["shared-watch"])
);

/// Lets the slow controller's reconciles finish, once the test has seen what it waits for.
static RELEASED: Semaphore = Semaphore::const_new(0);

/// The slow controller's work: busy until [`RELEASED`] (at most 20 s).
async fn held() {
    let _ = tokio::time::timeout(Duration::from_secs(20), RELEASED.acquire()).await;
}

async fn manager_with(controller: impl Reconcile) -> kubeplex::Running {
    let env = env().await;
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(controller)
        .start()
        .await
        .unwrap();
    wait_started(&running, "started in time").await;
    running
}

fn values_of(seen: &Recorder, name: &str) -> Vec<String> {
    seen.all()
        .into_iter()
        .filter(|s| s.name == name)
        .filter_map(|s| s.value)
        .collect()
}

#[tokio::test]
async fn a_field_selector_reconciles_only_what_it_selects() {
    let env = env().await;
    let a = env.client(Fleet::ClusterA.name()).await.unwrap();
    create_namespace(&a, "selector").await;
    put_config_map(&a, "selector", "other", "1").await;
    put_config_map(&a, "selector", "picked", "1").await;
    let controller = Selected::default();
    let running = manager_with(controller.clone()).await;
    controller
        .seen
        .wait_for("the picked object", WAIT, |all| {
            all.iter().any(|s| s.name == "picked")
        })
        .await;
    // A later change of the other object is not seen either; one of the picked one is.
    put_config_map(&a, "selector", "other", "2").await;
    put_config_map(&a, "selector", "picked", "2").await;
    controller
        .seen
        .wait_for("the picked object's change", WAIT, |_| {
            values_of(&controller.seen, "picked").contains(&"2".to_owned())
        })
        .await;
    assert!(
        values_of(&controller.seen, "other").is_empty(),
        "reconciled an object the field selector excludes"
    );
    crate::support::stop(running).await;
}

#[tokio::test]
async fn debounce_merges_a_burst_of_changes_into_one_reconcile() {
    let env = env().await;
    let a = env.client(Fleet::ClusterA.name()).await.unwrap();
    create_namespace(&a, "debounce").await;
    put_config_map(&a, "debounce", "busy", "0").await;
    let controller = Debounced::default();
    let running = manager_with(controller.clone()).await;
    controller
        .seen
        .wait_for("the first reconcile", WAIT, |_| {
            !values_of(&controller.seen, "busy").is_empty()
        })
        .await;
    let before = values_of(&controller.seen, "busy").len();
    // Ten changes 100 ms apart: each would be a reconcile of its own without the 2 s debounce.
    for value in 1..=10 {
        put_config_map(&a, "debounce", "busy", &value.to_string()).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    controller
        .seen
        .wait_for("the burst's last value", WAIT, |_| {
            values_of(&controller.seen, "busy").contains(&"10".to_owned())
        })
        .await;
    let during = values_of(&controller.seen, "busy")[before..].to_vec();
    assert!(
        during.len() <= 2,
        "a burst of 10 changes within the debounce took {} reconciles: {during:?}",
        during.len()
    );
    crate::support::stop(running).await;
}

#[tokio::test]
async fn with_unbounded_concurrency_one_object_is_never_reconciled_twice_at_once() {
    let env = env().await;
    let a = env.client(Fleet::ClusterA.name()).await.unwrap();
    create_namespace(&a, "unbounded").await;
    for name in ["hot", "other-1", "other-2"] {
        put_config_map(&a, "unbounded", name, "0").await;
    }
    let controller = Unbounded::default();
    let running = manager_with(controller.clone()).await;
    // Changes arrive faster than a reconcile (300 ms) finishes.
    for value in 1..=8 {
        put_config_map(&a, "unbounded", "hot", &value.to_string()).await;
        put_config_map(&a, "unbounded", "other-1", &value.to_string()).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    controller
        .seen
        .wait_for("the last change of the hot object", WAIT, |_| {
            values_of(&controller.seen, "hot").contains(&"8".to_owned())
        })
        .await;
    assert_eq!(
        controller.most_at_once_per_key.load(Ordering::SeqCst),
        1,
        "one object was reconciled twice at once"
    );
    crate::support::stop(running).await;
}

#[tokio::test]
async fn a_slow_controller_does_not_hold_back_another_on_the_same_watch() {
    let env = env().await;
    let a = env.client(Fleet::ClusterA.name()).await.unwrap();
    create_namespace(&a, "shared-watch").await;
    let (slow, fast) = (Slow::default(), Fast::default());
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(slow.clone())
        .controller(fast.clone())
        .start()
        .await
        .unwrap();
    wait_started(&running, "started in time").await;
    assert_eq!(
        running.watches_opened(),
        1,
        "the two controllers share one watch"
    );
    put_config_map(&a, "shared-watch", "first", "1").await;
    slow.seen
        .wait_for("the slow controller's reconcile", WAIT, |all| {
            !all.is_empty()
        })
        .await;
    // The slow one is busy with its only worker until released; the fast one sees every change meanwhile.
    for value in 2..=4 {
        put_config_map(&a, "shared-watch", "first", &value.to_string()).await;
        put_config_map(&a, "shared-watch", &format!("next-{value}"), "1").await;
    }
    fast.seen
        .wait_for("the fast controller's reconciles", WAIT, |_| {
            values_of(&fast.seen, "first").contains(&"4".to_owned())
                && (2..=4).all(|v| !values_of(&fast.seen, &format!("next-{v}")).is_empty())
        })
        .await;
    assert_eq!(
        slow.finished.load(Ordering::SeqCst),
        0,
        "the fast controller waited for the slow one"
    );
    RELEASED.add_permits(1);
    crate::support::stop(running).await;
}
