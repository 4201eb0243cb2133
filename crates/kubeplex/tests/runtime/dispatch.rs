//! Watches feed reconciles that carry their context; watches are shared between controllers.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::{Fleet, Recorder, WAIT, create_namespace, put_config_map, wait_started};
use k8s_openapi::api::core::v1::ConfigMap;
use kubeplex::{Action, Context, Controller, Cx, Manager, Plan, Reconcile};
use kubeplex_testenv::TestEnv;
use parking_lot::Mutex;

/// The suite's clusters, with this module's kinds installed.
pub(crate) async fn env() -> &'static TestEnv {
    crate::support::clusters([]).await
}

/// Declares a ConfigMap controller that records what it reconciles.
macro_rules! recording_controller {
    ($name:ident, $plan:expr) => {
        struct $name(Recorder);

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
                self.0.record(cx.cluster(), &object);
                Ok(Action::await_change())
            }
        }
    };
}

recording_controller!(
    FanOut,
    Plan::new("fan-out")
        .with_contexts([Fleet::ClusterA, Fleet::ClusterB])
        .with_namespaces(["fan-1", "fan-2"])
);
recording_controller!(
    SharedFirst,
    Plan::new("shared-first")
        .with_contexts([Fleet::ClusterA])
        .with_namespaces(["shared-1"])
);
recording_controller!(
    SharedSecond,
    Plan::new("shared-second")
        .with_contexts([Fleet::ClusterA])
        .with_namespaces(["shared-1"])
);
recording_controller!(
    OtherNamespace,
    Plan::new("other-namespace")
        .with_contexts([Fleet::ClusterA])
        .with_namespaces(["shared-2"])
);

#[tokio::test]
async fn each_request_carries_its_context_and_only_declared_namespaces_are_reconciled() {
    let env = env().await;
    for cluster in [Fleet::ClusterA, Fleet::ClusterB] {
        let client = env.client(cluster.name()).await.unwrap();
        for namespace in ["fan-1", "fan-2", "fan-other"] {
            create_namespace(&client, namespace).await;
            // The same name everywhere; the value says which cluster it was written to.
            put_config_map(&client, namespace, "same-name", cluster.name()).await;
        }
    }
    let seen = Recorder::default();
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(FanOut(seen.clone()))
        .start()
        .await
        .unwrap();
    wait_started(&running, "started in time").await;

    let expected: std::collections::BTreeSet<_> = [Fleet::ClusterA, Fleet::ClusterB]
        .into_iter()
        .flat_map(|c| ["fan-1", "fan-2"].map(|ns| (c, ns.to_owned(), "same-name".to_owned())))
        .collect();
    seen.wait_for("a reconcile in each of the 4 places", WAIT, |_| {
        seen.places() == expected
    })
    .await;
    for reconcile in seen.all() {
        assert_eq!(
            reconcile.value.as_deref(),
            Some(reconcile.context.name()),
            "wrong context: {reconcile:?}"
        );
    }

    // A change in an undeclared namespace is never reconciled; one in a declared namespace is.
    let a = env.client("cluster-a").await.unwrap();
    put_config_map(&a, "fan-other", "same-name", "cluster-a: changed").await;
    put_config_map(&a, "fan-1", "same-name", "cluster-a: changed").await;
    seen.wait_for("the change in fan-1", WAIT, |all| {
        all.iter()
            .any(|s| s.namespace == "fan-1" && s.value.as_deref() == Some("cluster-a: changed"))
    })
    .await;
    assert!(
        seen.all().iter().all(|s| s.namespace != "fan-other"),
        "reconciled an undeclared namespace"
    );
    crate::support::stop(running).await;
}

#[tokio::test]
async fn controllers_on_the_same_kind_context_and_namespace_share_one_watch() {
    let env = env().await;
    let a = env.client("cluster-a").await.unwrap();
    for namespace in ["shared-1", "shared-2"] {
        create_namespace(&a, namespace).await;
        put_config_map(&a, namespace, "watched", namespace).await;
    }

    let (first, second) = (Recorder::default(), Recorder::default());
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(SharedFirst(first.clone()))
        .controller(SharedSecond(second.clone()))
        .start()
        .await
        .unwrap();
    wait_started(&running, "started in time").await;
    for recorder in [&first, &second] {
        recorder
            .wait_for("the shared object", WAIT, |all| {
                all.iter().any(|s| s.name == "watched")
            })
            .await;
    }
    assert_eq!(
        running.watches_opened(),
        1,
        "two controllers, one (context, kind, namespace): one watch"
    );
    crate::support::stop(running).await;

    // A different namespace is a different watch.
    let other = Recorder::default();
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(SharedFirst(Recorder::default()))
        .controller(OtherNamespace(other.clone()))
        .start()
        .await
        .unwrap();
    other
        .wait_for("the object in shared-2", WAIT, |all| {
            all.iter().any(|s| s.namespace == "shared-2")
        })
        .await;
    assert_eq!(running.watches_opened(), 2);
    crate::support::stop(running).await;
}

/// Honours the plan's options: selector, concurrency, requeue; sees the cache.
#[derive(Clone, Default)]
struct Options {
    seen: Recorder,
    running: Arc<AtomicUsize>,
    most_at_once: Arc<AtomicUsize>,
    cache_sizes: Arc<Mutex<Vec<usize>>>,
    /// When each reconcile of each object started.
    started: Arc<Mutex<Vec<(String, Instant)>>>,
}

impl Controller for Options {
    type Resource = ConfigMap;
    type Context = Fleet;
    fn plan() -> Plan<Fleet> {
        Plan::new("options")
            .with_contexts([Fleet::ClusterA])
            .with_namespaces(["options"])
            .with_label_selector("kubeplex-test=selected")
            .with_concurrency(1)
            .with_requeue_after(Duration::from_millis(300))
    }
}

impl Reconcile for Options {
    type Error = Infallible;
    async fn reconcile(
        &self,
        object: Arc<ConfigMap>,
        cx: &Cx<Fleet>,
    ) -> Result<Action, Infallible> {
        self.started.lock().push((
            object.metadata.name.clone().unwrap_or_default(),
            Instant::now(),
        ));
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_at_once.fetch_max(now, Ordering::SeqCst);
        self.cache_sizes.lock().push(
            cx.cached::<ConfigMap>(Fleet::ClusterA)
                .map_or(0, |c| c.len()),
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.seen.record(cx.cluster(), &object);
        self.running.fetch_sub(1, Ordering::SeqCst);
        Ok(Action::await_change()) // the plan's requeue_after applies
    }
}

/// Always fails; records when, and what the default error policy says it will wait.
#[derive(Clone, Default)]
struct Failing(Arc<Mutex<Vec<(u32, Duration, Instant)>>>);

#[derive(Debug, thiserror::Error)]
#[error("always fails")]
struct AlwaysFails;

impl Controller for Failing {
    type Resource = ConfigMap;
    type Context = Fleet;
    fn plan() -> Plan<Fleet> {
        Plan::new("failing")
            .with_contexts([Fleet::ClusterB])
            .with_namespaces(["failing"])
            .with_error_requeue(Duration::from_millis(50))
    }
}

impl Reconcile for Failing {
    type Error = AlwaysFails;
    async fn reconcile(&self, _: Arc<ConfigMap>, cx: &Cx<Fleet>) -> Result<Action, AlwaysFails> {
        self.0
            .lock()
            .push((cx.failures(), cx.error_requeue(), Instant::now()));
        Err(AlwaysFails)
    }
}

#[tokio::test]
async fn the_plan_options_are_honoured_and_failures_back_off() {
    let env = env().await;
    let a = env.client("cluster-a").await.unwrap();
    create_namespace(&a, "options").await;
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(a.clone(), "options");
    for (name, selected) in [
        ("one", true),
        ("two", true),
        ("three", true),
        ("other", false),
    ] {
        let label = if selected { "selected" } else { "ignored" };
        let object = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": name, "labels": { "kubeplex-test": label } },
        });
        api.patch(
            name,
            &kube::api::PatchParams::apply("kubeplex-tests"),
            &kube::api::Patch::Apply(&object),
        )
        .await
        .unwrap();
    }
    let b = env.client("cluster-b").await.unwrap();
    create_namespace(&b, "failing").await;
    put_config_map(&b, "failing", "doomed", "x").await;

    let options = Options::default();
    let failing = Failing::default();
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(options.clone())
        .controller(failing.clone())
        .start()
        .await
        .unwrap();
    options
        .seen
        .wait_for(
            "each selected object reconciled 3 times (requeue_after)",
            WAIT,
            |all| {
                ["one", "two", "three"]
                    .iter()
                    .all(|name| all.iter().filter(|s| s.name == *name).count() >= 3)
            },
        )
        .await;
    assert!(
        options.seen.all().iter().all(|s| s.name != "other"),
        "the label selector was ignored"
    );
    assert_eq!(
        options.most_at_once.load(Ordering::SeqCst),
        1,
        "concurrency = 1 ran reconciles at once"
    );
    assert!(
        options.cache_sizes.lock().contains(&3),
        "cx.cached sees the selected objects"
    );
    // Bounded from below too: consecutive reconciles of one object (nothing changed it) are at least
    // requeue_after apart, so a hot loop fails here.
    let started = options.started.lock().clone();
    for name in ["one", "two", "three"] {
        let times: Vec<Instant> = started
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, t)| *t)
            .collect();
        for pair in times.windows(2) {
            let gap = pair[1] - pair[0];
            assert!(
                gap >= Duration::from_millis(290),
                "{name} reconciled again after {gap:?}, before requeue_after (300 ms)"
            );
        }
    }

    let deadline = tokio::time::Instant::now() + WAIT;
    while failing.0.lock().len() < 4 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the failing object was not retried"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let attempts = failing.0.lock()[..4].to_vec();
    let said: Vec<(u32, Duration)> = attempts.iter().map(|(n, d, _)| (*n, *d)).collect();
    let expected: Vec<(u32, Duration)> = (0..4)
        .map(|n| (n, Duration::from_millis(50 << n)))
        .collect();
    assert_eq!(
        said, expected,
        "the default error policy doubles the delay after each failure"
    );
    // And the retries really wait that long: measured between attempts, not read back from `cx`. Timers
    // never fire early, so the lower bound is exact; the upper one only catches a delay that did not apply.
    for (pair, (_, delay)) in attempts.windows(2).zip(&expected) {
        let gap = pair[1].2 - pair[0].2;
        assert!(
            gap >= *delay - Duration::from_millis(5) && gap < *delay + Duration::from_secs(2),
            "retry {} came {gap:?} after the failure, not {delay:?}",
            pair[1].0
        );
    }
    crate::support::stop(running).await;
}

/// Panics on its first reconcile, then works.
#[derive(Clone, Default)]
struct PanicsOnce(Arc<AtomicUsize>, Recorder);

impl Controller for PanicsOnce {
    type Resource = ConfigMap;
    type Context = Fleet;
    fn plan() -> Plan<Fleet> {
        Plan::new("panics-once")
            .with_contexts([Fleet::ClusterA])
            .with_namespaces(["panics"])
            .with_error_requeue(Duration::from_millis(100))
    }
}

impl Reconcile for PanicsOnce {
    type Error = Infallible;
    async fn reconcile(
        &self,
        object: Arc<ConfigMap>,
        cx: &Cx<Fleet>,
    ) -> Result<Action, Infallible> {
        assert_ne!(
            self.0.fetch_add(1, Ordering::SeqCst),
            0,
            "the first reconcile panics"
        );
        self.1.record(cx.cluster(), &object);
        Ok(Action::await_change())
    }
}

#[tokio::test]
async fn a_panicking_reconcile_is_retried_and_the_controller_lives_on() {
    let env = env().await;
    let a = env.client("cluster-a").await.unwrap();
    create_namespace(&a, "panics").await;
    put_config_map(&a, "panics", "fragile", "1").await;
    let controller = PanicsOnce::default();
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(controller.clone())
        .start()
        .await
        .unwrap();
    controller
        .1
        .wait_for("the retry after the panic", WAIT, |all| {
            all.iter().any(|s| s.name == "fragile")
        })
        .await;
    put_config_map(&a, "panics", "fragile", "2").await;
    controller
        .1
        .wait_for("later changes", WAIT, |all| {
            all.iter().any(|s| s.value.as_deref() == Some("2"))
        })
        .await;
    crate::support::stop(running).await;
}
