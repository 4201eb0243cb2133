//! Shared children on real clusters: parents that declare the same object (`owns(Kind, shared)`) all get
//! it, created once and naming each of them, without a conflict between them — even when they reconcile at
//! once; it stays while one of them still declares it and goes with the last. A parent that declares it
//! otherwise, and an object someone else created, are conflicts, and nothing of theirs is written.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::CustomResourceExt;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kubeplex::ownership::{CONTROLLER_LABEL, PARENT_UID_LABEL, SHARED_LABEL};
use kubeplex::prelude::*;
use kubeplex::{ClusterState, Manager};
use kubeplex_testenv::{TestEnv, eventually};

use crate::spread::{APPS, Spread, SpreadSpec, create_spread, prepare};
use crate::support::{Fleet, WAIT, wait_started};

/// Where the parents live in the control cluster.
const PARENTS: &str = "sharing";

async fn env() -> &'static TestEnv {
    crate::support::clusters([("control", Spread::crd())]).await
}

/// Every parent declares the ConfigMap its value names: `shared-<value>` in `apps`, the same for all
/// parents of one value; value `differ` declares `shared-v1` with other data.
#[controller(
    crd = Spread,
    contexts = [Fleet::Control],
    namespaces = ["sharing"],
    owns(ConfigMap, contexts = [Fleet::ClusterA], namespaces = ["apps"], shared),
)]
struct Sharer;

impl Reconcile for Sharer {
    type Error = kubeplex::Error;

    async fn reconcile(&self, parent: Arc<Spread>, cx: &Cx<Fleet>) -> Result<Action, Self::Error> {
        let (name, data) = match parent.spec.value.as_str() {
            "differ" => ("shared-v1".to_owned(), "otherwise"),
            value => (format!("shared-{value}"), "alike"),
        };
        let settings = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name),
                ..ObjectMeta::default()
            },
            data: Some([("settings".to_owned(), data.to_owned())].into()),
            ..ConfigMap::default()
        };
        cx.child(Fleet::ClusterA, settings)?;
        Ok(Action::await_change())
    }
}

/// The UIDs of the parents `object` records as sharing it.
fn sharers(object: &ConfigMap) -> Vec<String> {
    let prefix = format!("{PARENT_UID_LABEL}.");
    let keys = object.labels().keys();
    let mut uids: Vec<String> = keys
        .filter_map(|k| k.strip_prefix(&prefix).map(str::to_owned))
        .collect();
    uids.sort();
    uids
}

#[tokio::test]
async fn parents_share_a_child_which_goes_with_the_last_and_others_stay_conflicts() {
    let env = env().await;
    prepare(env).await;
    let control = env.client("control").await.unwrap();
    let cluster_a = env.client("cluster-a").await.unwrap();
    let settings: Api<ConfigMap> = Api::namespaced(cluster_a.clone(), APPS);
    // Someone else's object, of the name one parent declares.
    let foreign = ConfigMap {
        metadata: ObjectMeta {
            name: Some("shared-foreign".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    settings
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();
    // Two parents that declare the same child, created together so that they reconcile at once.
    for name in ["first", "second"] {
        create_spread(env, PARENTS, name).await;
    }
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Sharer)
        .start()
        .await
        .unwrap();
    wait_started(&running, "started").await;
    let spreads: Api<Spread> = Api::namespaced(control, PARENTS);
    let uid = async |name: &str| spreads.get(name).await.unwrap().uid().unwrap();
    let state_of = async |name: &str| {
        let spread = spreads.get(name).await.map_err(|e| e.to_string())?;
        let status = spread.status.unwrap_or_default();
        let cluster = status.fleet.clusters.get("cluster-a").cloned();
        cluster.ok_or_else(|| format!("{name}: no cluster-a yet"))
    };
    let (first, second) = (uid("first").await, uid("second").await);
    let mut both = vec![first.clone(), second.clone()];
    both.sort();

    eventually(
        "both parents Ready, both recorded on one child",
        WAIT,
        async || {
            for (name, other) in [("first", "second"), ("second", "first")] {
                // Each one's status names the other as sharing the child.
                let state = state_of(name).await?;
                let message = state.message.clone().unwrap_or_default();
                let names = message.contains("shared with other parents: ConfigMap apps/shared-v1")
                    && message.contains(&format!("control/sharing/{other}"));
                if state.state != ClusterState::Applied || !names {
                    return Err(format!("{name}: {state:?}"));
                }
            }
            let child = settings.get("shared-v1").await.map_err(|e| e.to_string())?;
            if sharers(&child) == both {
                Ok(())
            } else {
                Err(format!("{:?}", child.metadata))
            }
        },
    )
    .await;
    let child = settings.get("shared-v1").await.unwrap();
    let labels = child.labels();
    assert_eq!(labels.get(SHARED_LABEL).map(String::as_str), Some("true"));
    assert_eq!(
        labels.get(CONTROLLER_LABEL).map(String::as_str),
        Some("sharer")
    );
    assert!(
        !labels.contains_key(PARENT_UID_LABEL),
        "no single parent: {labels:?}"
    );

    // One that declares it otherwise: a conflict, not recorded, nothing of its own written. And one that
    // declares the foreign object's name: a conflict too, the object untouched.
    for (name, value) in [("third", "differ"), ("fourth", "foreign")] {
        let spread = Spread::new(
            name,
            SpreadSpec {
                value: value.into(),
            },
        );
        spreads
            .create(&PostParams::default(), &spread)
            .await
            .unwrap();
    }
    for (name, says) in [
        ("third", "declare it otherwise"),
        ("fourth", "created by someone else"),
    ] {
        eventually(format!("{name} in conflict"), WAIT, async || {
            let state = state_of(name).await?;
            let message = state.message.clone().unwrap_or_default();
            if state.state == ClusterState::Conflict && message.contains(says) {
                Ok(())
            } else {
                Err(format!("{state:?}"))
            }
        })
        .await;
    }
    let child = settings.get("shared-v1").await.unwrap();
    assert_eq!(sharers(&child), both);
    assert_eq!(child.data.unwrap()["settings"], "alike");
    let untouched = settings.get("shared-foreign").await.unwrap();
    assert!(untouched.labels().is_empty() && untouched.data.is_none());

    // The first parent goes: the child stays, naming the second only.
    let delete = DeleteParams::default();
    spreads.delete("first", &delete).await.unwrap();
    eventually("first gone, the child left to second", WAIT, async || {
        if spreads
            .get_opt("first")
            .await
            .map_err(|e| e.to_string())?
            .is_some()
        {
            return Err("first still there".into());
        }
        let child = settings.get("shared-v1").await.map_err(|e| e.to_string())?;
        if sharers(&child) == [second.clone()] {
            Ok(())
        } else {
            Err(format!("{:?}", child.metadata.labels))
        }
    })
    .await;

    // The conflicting parents go without touching it; the last parent takes it along.
    for name in ["third", "fourth", "second"] {
        spreads.delete(name, &delete).await.unwrap();
    }
    eventually(
        "every parent gone, and the shared child with the last",
        WAIT,
        async || {
            let left = spreads
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            if !left.items.is_empty() {
                return Err(format!("{} parents left", left.items.len()));
            }
            match settings
                .get_opt("shared-v1")
                .await
                .map_err(|e| e.to_string())?
            {
                None => Ok(()),
                Some(child) => Err(format!("still there: {:?}", child.metadata.labels)),
            }
        },
    )
    .await;
    assert!(settings.get_opt("shared-foreign").await.unwrap().is_some());
    crate::support::stop(running).await;
}
