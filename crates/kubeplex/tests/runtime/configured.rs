//! Configuration at run time, on real clusters: a controller registered with `Manager::controller_with`
//! watches the namespace chosen when the process runs and puts its children in the namespaces chosen
//! then, not in those its attribute names.

use std::sync::Arc;
use std::time::Duration;

use crate::support::{Fleet, Recorder, WAIT, create_namespace, put_config_map, wait_started};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta};
use kubeplex::prelude::*;
use kubeplex_testenv::TestEnv;

/// The suite's clusters, with this module's kinds installed.
pub(crate) async fn env() -> &'static TestEnv {
    crate::support::clusters([]).await
}

/// What the attribute says; the test replaces both lists at registration.
#[controller(
    crd = ConfigMap,
    contexts = [Fleet::Control],
    namespaces = ["from-the-attribute"],
    owns(ServiceAccount, contexts = [Fleet::ClusterA], namespaces = ["kids-from-the-attribute"]),
)]
#[derive(Clone, Default)]
struct Configured {
    seen: Recorder,
}

impl Reconcile for Configured {
    type Error = kubeplex::Error;

    /// One ServiceAccount, named after the ConfigMap, in each namespace the plan gives the children.
    async fn reconcile(
        &self,
        object: Arc<ConfigMap>,
        cx: &Cx<Fleet>,
    ) -> Result<Action, Self::Error> {
        self.seen.record(cx.cluster(), &object);
        for namespace in cx.namespaces_of::<ServiceAccount>(Fleet::ClusterA) {
            let child = ServiceAccount {
                metadata: ObjectMeta {
                    name: Some(object.name_any()),
                    namespace: Some(namespace.to_owned()),
                    ..ObjectMeta::default()
                },
                ..ServiceAccount::default()
            };
            cx.child(Fleet::ClusterA, child)?;
        }
        Ok(Action::await_change())
    }
}

/// Polls until the ServiceAccount `namespace/name` exists in `client`'s cluster; panics after [`WAIT`].
async fn wait_exists(client: &kube::Client, namespace: &str, name: &str) {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let deadline = tokio::time::Instant::now() + WAIT;
    while api.get_opt(name).await.unwrap().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{namespace}/{name} never appeared"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn namespaces_chosen_at_run_time_replace_the_attributes() {
    let env = env().await;
    let control = env.client(Fleet::Control.name()).await.unwrap();
    let cluster_a = env.client(Fleet::ClusterA.name()).await.unwrap();
    // Values that exist only at run time (owned Strings, as from a flag or a Helm value).
    let run = std::process::id();
    let watched = format!("watched-{run}");
    let kids = vec![format!("kids-{run}-a"), format!("kids-{run}-b")];
    for namespace in ["from-the-attribute", watched.as_str()] {
        create_namespace(&control, namespace).await;
    }
    for namespace in kids
        .iter()
        .map(String::as_str)
        .chain(["kids-from-the-attribute"])
    {
        create_namespace(&cluster_a, namespace).await;
    }
    put_config_map(&control, "from-the-attribute", "ignored", "1").await;
    put_config_map(&control, &watched, "chosen", "1").await;

    let controller = Configured::default();
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller_with(controller.clone(), |plan| {
            plan.with_namespaces([watched.clone()])
                .child_namespaces::<ServiceAccount>(kids.clone())
        })
        .start()
        .await
        .unwrap();
    wait_started(&running, "started in time").await;

    controller
        .seen
        .wait_for("the object in the chosen namespace", WAIT, |all| {
            all.iter().any(|s| s.name == "chosen")
        })
        .await;
    for namespace in &kids {
        wait_exists(&cluster_a, namespace, "chosen").await;
    }
    // The watches are the chosen ones: the attribute's namespaces are not watched at all.
    let health = running.readiness();
    let watched_namespaces = |context: &str| -> Vec<String> {
        let mut namespaces: Vec<String> = health.clusters[context]
            .watches
            .iter()
            .map(|w| w.namespace.clone())
            .collect();
        namespaces.sort();
        namespaces
    };
    assert_eq!(
        watched_namespaces("control"),
        std::slice::from_ref(&watched)
    );
    assert_eq!(watched_namespaces("cluster-a"), kids);
    // A change in the attribute's namespace reaches nobody, while one in the chosen namespace does.
    put_config_map(&control, "from-the-attribute", "ignored", "2").await;
    put_config_map(&control, &watched, "chosen", "2").await;
    controller
        .seen
        .wait_for("the change in the chosen namespace", WAIT, |all| {
            all.iter()
                .any(|s| s.name == "chosen" && s.value.as_deref() == Some("2"))
        })
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let namespaces: Vec<String> = controller
        .seen
        .all()
        .into_iter()
        .map(|s| s.namespace)
        .collect();
    assert!(
        namespaces.iter().all(|ns| *ns == watched),
        "reconciled outside {watched}: {namespaces:?}"
    );
    let attribute_kids: Api<ServiceAccount> =
        Api::namespaced(cluster_a.clone(), "kids-from-the-attribute");
    assert!(attribute_kids.get_opt("chosen").await.unwrap().is_none());
    crate::support::stop(running).await;
}
