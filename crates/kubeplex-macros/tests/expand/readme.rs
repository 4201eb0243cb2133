// The README / api-sketch controller: a typed fleet, a child kind in two other clusters, a finalizer.
#[controller(
    crd = AppDeployment,
    contexts = [Fleet::Control],
    namespaces = ["crds"],
    owns(Deployment, contexts = [Fleet::ClusterA, Fleet::ClusterB],
         namespaces = ["namespace-a", "namespace-b"]),
    finalizer = "demo.kubeplex.dev/cleanup",
)]
pub struct AppDeployer;
