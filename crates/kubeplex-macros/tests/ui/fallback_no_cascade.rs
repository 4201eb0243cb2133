// A rejected attribute still implements `Controller`: the only error is the attribute's own (no E0277
// on `impl Reconcile`, no unused import of the types it names).
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kubeplex::prelude::*;

kubeplex::contexts! {
    pub enum Fleet { Control = "control", ClusterA = "cluster-a" }
}

#[controller(
    crd = ConfigMap,
    contexts = [Fleet::Control],
    owns(Deployment, contexts = [Fleet::ClusterA]),
    debounce = "soon",
)]
struct FanOut;

impl Reconcile for FanOut {
    type Error = kubeplex::Error;

    async fn reconcile(&self, _cm: Arc<ConfigMap>, _cx: &Cx<Fleet>) -> Result<Action, Self::Error> {
        Ok(Action::requeue(std::time::Duration::from_secs(60)))
    }
}

#[deny(unused_imports)]
fn main() {}
