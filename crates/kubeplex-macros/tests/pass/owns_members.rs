//! Children in every member of the fleet: with contexts, and in the members only (the context type is
//! still the primary's fleet, inferred without any `.contexts(..)` on the child).
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kubeplex::prelude::*;

kubeplex::contexts! {
    pub enum Fleet { Control = "control", ClusterA = "cluster-a" }
}

#[controller(
    crd = ConfigMap,
    contexts = [Fleet::Control],
    owns(Deployment, members, contexts = [Fleet::ClusterA], namespaces = ["apps"]),
    owns(Secret, members),
)]
struct FleetWide;

impl Reconcile for FleetWide {
    type Error = kubeplex::Error;

    async fn reconcile(&self, _: Arc<ConfigMap>, _: &Cx<Fleet>) -> Result<Action, Self::Error> {
        Ok(Action::await_change())
    }
}

#[controller(crd = ConfigMap, contexts = ["control"], owns(Secret, members, namespaces = ["apps"]))]
struct MembersOnly;

// The primary resource watched in every member too: `cx.cluster()` says which member an object came from.
#[controller(crd = ConfigMap, contexts = [Fleet::Control], members, owns(Secret, members))]
struct Everywhere;

impl Reconcile for Everywhere {
    type Error = kubeplex::Error;

    async fn reconcile(
        &self,
        object: Arc<ConfigMap>,
        cx: &Cx<Fleet>,
    ) -> Result<Action, Self::Error> {
        let _typed_or_member: Option<Fleet> = cx.cluster().as_context();
        cx.child(
            cx.cluster(),
            Secret {
                metadata: object.metadata.clone(),
                ..Secret::default()
            },
        )?;
        Ok(Action::await_change())
    }
}

#[test]
fn builds_its_plan() {
    let plan = FleetWide::plan();
    let [deployments, secrets] = plan.children() else {
        panic!("two children")
    };
    assert!(deployments.in_members() && secrets.in_members());
    assert_eq!(deployments.watches().count(), 1);
    assert_eq!(secrets.watches().count(), 0);
    assert_eq!(plan.all_contexts(), [Fleet::Control, Fleet::ClusterA]);

    let plan = MembersOnly::plan();
    assert!(plan.children()[0].in_members());
    assert!(!plan.in_members());
    assert!(Everywhere::plan().in_members());
    assert_eq!(plan.all_contexts(), [kubeplex::ContextName::new("control")]);
}
