// `#[controller]` on the `impl Reconcile` instead of the struct: its own error, and nothing else.
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kubeplex::ContextName;
use kubeplex::prelude::*;

struct Mirror;

#[controller(crd = ConfigMap, contexts = ["control"])]
impl Reconcile for Mirror {
    type Error = kubeplex::Error;

    async fn reconcile(&self, _cm: Arc<ConfigMap>, _cx: &Cx<ContextName>) -> Result<Action, Self::Error> {
        Ok(Action::await_change())
    }
}

fn main() {}
