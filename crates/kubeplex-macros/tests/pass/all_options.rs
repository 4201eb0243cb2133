//! Every key at once.
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kubeplex::{Controller, controller};

kubeplex::contexts! {
    pub enum Fleet {
        Control = "control",
        ClusterA = "cluster-a",
        ClusterB = "cluster-b",
    }
}

#[controller(
    crd = k8s_openapi::api::apps::v1::Deployment,
    contexts = [Fleet::ClusterA, Fleet::ClusterB],
    namespaces = ["team-a", "team-b"],
    name = "deployment-auditor",
    label_selector = "app.kubernetes.io/managed-by=kubeplex,tier in (web, api)",
    field_selector = "metadata.namespace!=kube-system",
    concurrency = 16,
    debounce = "500ms",
    requeue_after = "1h30m",
    error_requeue = "30s",
    finalizer = "audit.example.com/report",
    owns(ConfigMap, contexts = [Fleet::Control]),
    owns(Secret, contexts = [Fleet::Control], namespaces = ["audit"]),
)]
pub struct DeploymentAuditor {
    pub client_timeout: Duration,
}

#[test]
fn builds_its_plan() {
    // The attribute leaves the struct's own fields as they are.
    let auditor = DeploymentAuditor {
        client_timeout: Duration::from_secs(5),
    };
    assert_eq!(auditor.client_timeout, Duration::from_secs(5));
    let plan = DeploymentAuditor::plan();
    assert_eq!(plan.name(), "deployment-auditor");
    assert_eq!(plan.primary_watches().count(), 4);
    assert_eq!(plan.concurrency(), Some(16));
    assert_eq!(plan.debounce(), Some(Duration::from_millis(500)));
    assert_eq!(plan.requeue_after(), Some(Duration::from_secs(5400)));
    assert_eq!(plan.error_requeue(), Some(Duration::from_secs(30)));
    assert_eq!(
        plan.label_selector(),
        Some("app.kubernetes.io/managed-by=kubeplex,tier in (web, api)")
    );
    assert_eq!(
        plan.field_selector(),
        Some("metadata.namespace!=kube-system")
    );
    assert_eq!(plan.children().len(), 2);
    assert_eq!(
        plan.all_contexts(),
        [Fleet::ClusterA, Fleet::ClusterB, Fleet::Control]
    );
}
