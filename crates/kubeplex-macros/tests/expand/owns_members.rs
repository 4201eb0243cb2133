// Children in every member of the fleet (`members`), beside typed contexts and in the members only.
#[controller(
    crd = AppDeployment,
    contexts = [Fleet::Control],
    namespaces = ["crds"],
    owns(Deployment, members, contexts = [Fleet::ClusterA, Fleet::ClusterB],
         namespaces = ["namespace-a", "namespace-b"]),
    owns(Secret, members, namespaces = ["namespace-a"]),
    owns(ConfigMap, members),
)]
pub struct AppDeployer;
