//! Cluster API's convention for a cluster's kubeconfig Secret, as a way to configure the Secret provider.

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

use super::KubeconfigSecrets;

/// The label Cluster API puts on a cluster's Secrets, naming the cluster.
const CAPI_CLUSTER_NAME: &str = "cluster.x-k8s.io/cluster-name";
/// The type of Cluster API's Secrets.
const CAPI_SECRET_TYPE: &str = "cluster.x-k8s.io/secret";

impl KubeconfigSecrets {
    /// Members from the clusters Cluster API manages in `namespace` of `context` (its management
    /// cluster): each cluster's `<cluster>-kubeconfig` Secret, of type `cluster.x-k8s.io/secret`, with
    /// the kubeconfig under `value` and the cluster's name in label `cluster.x-k8s.io/cluster-name`. The
    /// member is named as the cluster. Cluster API's other Secrets of a cluster (its CAs, a
    /// `<cluster>-user-kubeconfig`) are not members.
    pub fn cluster_api(context: impl crate::core::Context, namespace: impl Into<String>) -> Self {
        Self {
            fields: Some(format!("type={CAPI_SECRET_TYPE}")),
            name_suffix: Some("-kubeconfig".to_owned()),
            ..Self::new(context, namespace, CAPI_CLUSTER_NAME)
                .key("value")
                .name_label(CAPI_CLUSTER_NAME)
        }
    }

    /// Whether `secret` gives a member (beyond the selectors): named as the member requires.
    pub(super) fn takes(&self, secret: &Secret) -> bool {
        let Some(suffix) = &self.name_suffix else {
            return true;
        };
        let member = secret.labels().get(&self.name_label);
        member.is_some_and(|m| secret.name_any() == format!("{m}{suffix}"))
    }
}
