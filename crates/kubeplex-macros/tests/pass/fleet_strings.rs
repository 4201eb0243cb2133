//! String contexts checked against a declared fleet while compiling; the context type is the fleet.
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kubeplex::{Controller, controller};

mod fleet {
    kubeplex::contexts! {
        pub enum Fleet {
            Control = "control",
            ClusterA = "cluster-a",
            ClusterB = "cluster-b",
        }
    }
}
use fleet::Fleet;

#[controller(
    crd = ConfigMap,
    fleet = crate::fleet_strings::fleet::Fleet,
    contexts = ["control"],
    owns(Secret, contexts = ["cluster-a", "cluster-b"]),
)]
pub(crate) struct Mirror;

#[test]
fn builds_its_plan() {
    let plan: kubeplex::Plan<Fleet> = Mirror::plan();
    assert_eq!(plan.contexts(), [Fleet::Control]);
    assert_eq!(
        plan.children()[0].contexts(),
        [Fleet::ClusterA, Fleet::ClusterB]
    );
}
