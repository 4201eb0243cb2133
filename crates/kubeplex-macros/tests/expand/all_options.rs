// Every option at once.
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
    abandon_unreachable_after = "2h",
    abandon_terminating_after = "30m",
    owns(ConfigMap, contexts = [Fleet::Control]),
    owns(Secret, contexts = [Fleet::Control], namespaces = ["audit"], prune = keep, on_delete = orphan, shared),
)]
pub struct DeploymentAuditor {
    client_timeout: std::time::Duration,
}
