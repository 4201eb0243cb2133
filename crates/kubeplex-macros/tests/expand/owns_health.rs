// A child kind judged by the user's health rule.
#[controller(
    crd = AppDeployment,
    contexts = [Fleet::Control],
    owns(Deployment, contexts = [Fleet::ClusterA], health = rules::web),
)]
pub struct Judged;
