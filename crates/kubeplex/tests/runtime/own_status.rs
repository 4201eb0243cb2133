//! A reconcile's own status fields, written with kubeplex's part in one server-side apply by the
//! controller's field manager, and not rewritten while nothing changes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::CustomResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kubeplex::Manager;
use kubeplex::prelude::*;
use kubeplex_testenv::{TestEnv, eventually};

use crate::spread::{APPS, Spread, child, create_spread, prepare, set_value};
use crate::support::{Fleet, WAIT, audit, wait_started};

async fn env() -> &'static TestEnv {
    crate::support::clusters([("control", Spread::crd())]).await
}

/// Notes the parent's value in its status beside kubeplex's clusters.
#[controller(
    crd = Spread,
    contexts = [Fleet::Control],
    namespaces = ["own-status"],
    owns(ConfigMap, contexts = [Fleet::ClusterA], namespaces = ["apps"]),
)]
struct Noting {
    reconciles: Arc<AtomicUsize>,
}

impl Reconcile for Noting {
    type Error = kubeplex::Error;

    async fn reconcile(&self, parent: Arc<Spread>, cx: &Cx<Fleet>) -> Result<Action, Self::Error> {
        self.reconciles.fetch_add(1, Ordering::SeqCst);
        cx.set_status(serde_json::json!({ "note": format!("value {}", parent.spec.value) }))?;
        cx.child(Fleet::ClusterA, child(&parent, cx.controller()))?;
        Ok(Action::await_change())
    }
}

/// The status fields the controller's manager owns, as `f:` keys of its status entry.
fn owned_fields(spread: &Spread) -> Vec<String> {
    let entries = spread.metadata.managed_fields.iter().flatten();
    let ours = entries.filter(|e| e.manager.as_deref() == Some("noting"));
    let ours: Vec<_> = ours
        .filter(|e| e.subresource.as_deref() == Some("status"))
        .collect();
    assert_eq!(
        ours.len(),
        1,
        "one status entry of the controller's: {ours:#?}"
    );
    let fields = ours[0]
        .fields_v1
        .as_ref()
        .map(|f| f.0.clone())
        .unwrap_or_default();
    let status = fields.get("f:status").and_then(|s| s.as_object());
    status.into_iter().flat_map(|s| s.keys().cloned()).collect()
}

#[tokio::test]
async fn the_reconciles_own_status_fields_are_written_with_kubeplexs_part_in_one_apply() {
    let env = env().await;
    prepare(env).await;
    crate::support::create_namespace(&env.client("cluster-a").await.unwrap(), APPS).await;
    create_spread(env, "own-status", "noted").await;
    let reconciles = Arc::new(AtomicUsize::new(0));
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Noting {
            reconciles: reconciles.clone(),
        })
        .start()
        .await
        .unwrap();
    wait_started(&running, "started").await;
    let spreads: Api<Spread> = Api::namespaced(env.client("control").await.unwrap(), "own-status");
    let wait_note = async |note: &str| {
        eventually(
            format!("status note {note:?} beside cluster-a Ready"),
            WAIT,
            async || {
                let spread = spreads.get("noted").await.map_err(|e| e.to_string())?;
                let status = spread.status.clone().unwrap_or_default();
                let ready = status.fleet.clusters.get("cluster-a").map(|c| c.state);
                if status.note.as_deref() == Some(note)
                    && ready == Some(kubeplex::ClusterState::Applied)
                {
                    Ok(spread)
                } else {
                    Err(format!("{status:#?}"))
                }
            },
        )
        .await
    };
    let spread = wait_note("value v1").await;
    // One writer of both: the controller's field manager owns kubeplex's fields and the reconcile's.
    let fields = owned_fields(&spread);
    for field in ["f:note", "f:clusters", "f:conditions"] {
        assert!(fields.iter().any(|f| f == field), "{field} in {fields:?}");
    }

    // A change of the spec changes the note, in the same write.
    set_value(env, "own-status", "noted", "v2").await;
    let spread = wait_note("value v2").await;
    assert_eq!(owned_fields(&spread).len(), fields.len());

    // Reconciled again with nothing changed (a label edit): no status write is sent.
    let status_writes = || {
        let writes = audit::writes(env, "control").into_iter();
        writes
            .filter(|w| w.what == "spreads/status own-status/noted")
            .count()
    };
    let written = status_writes();
    assert!(written >= 2, "one write per change at least: {written}");
    let before = reconciles.load(Ordering::SeqCst);
    let patch = serde_json::json!({ "metadata": { "labels": { "touched": "yes" } } });
    spreads
        .patch("noted", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("the label's reconcile", WAIT, async || {
        let now = reconciles.load(Ordering::SeqCst);
        if now > before {
            Ok(())
        } else {
            Err(format!("{now} reconciles"))
        }
    })
    .await;
    crate::support::stop(running).await;
    assert_eq!(
        status_writes(),
        written,
        "no status write after the label's reconcile"
    );
}
