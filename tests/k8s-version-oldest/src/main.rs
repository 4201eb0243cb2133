//! Builds an operator against the oldest Kubernetes version k8s-openapi supports: see Cargo.toml.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kubeplex::prelude::*;

kubeplex::contexts! {
    enum Fleet { Control = "control", Child = "child" }
}

#[controller(
    crd = ConfigMap,
    contexts = [Fleet::Control],
    owns(Deployment, contexts = [Fleet::Child]),
)]
struct Copier;

impl Reconcile for Copier {
    type Error = kubeplex::Error;

    async fn reconcile(&self, _: Arc<ConfigMap>, _: &Cx<Fleet>) -> Result<Action, Self::Error> {
        Ok(Action::await_change())
    }
}

// The version this build chose is the oldest one, not one a dependency chose as well.
k8s_openapi::k8s_if_ge_1_34! {
    compile_error!("expected k8s-openapi's v1_33 to be the chosen Kubernetes version");
}

fn main() {
    // Nothing to run: that this compiles, with `v1_33` chosen here and by no one else, is the check.
    println!(
        "controller {} with {}",
        Copier::plan().name(),
        std::any::type_name::<kubeplex_testenv::TestEnv>(),
    );
}
