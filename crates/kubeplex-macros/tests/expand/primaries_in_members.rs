// The primary resource watched in every member of the fleet too (`members` at the top level).
#[controller(
    crd = AppDeployment,
    contexts = [Fleet::Control],
    members,
    namespaces = ["crds"],
    owns(Deployment, members, namespaces = ["apps"]),
)]
pub struct AppDeployer;
