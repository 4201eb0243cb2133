//! One cluster alone: its kubeconfig cut down to it, for an operator under test that takes it as the only
//! cluster, or as a member of its fleet from a kubeconfig Secret.

use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;
use kube::config::Kubeconfig;

use crate::env::TestEnv;
use crate::error::Result;

/// The key of a member Secret's kubeconfig, as kubeplex's `KubeconfigSecrets` reads it by default.
pub const MEMBER_KUBECONFIG_KEY: &str = "kubeconfig";

impl TestEnv {
    /// The kubeconfig cut down to `cluster`: its context (the current one), its cluster and its admin user.
    pub fn kubeconfig_for(&self, cluster: &str) -> Result<Kubeconfig> {
        drop(self.lock(cluster)?);
        let all = &self.kubeconfig;
        let context = all.contexts.iter().find(|c| c.name == cluster);
        let context = context.expect("every cluster has its context").clone();
        let inner = context.context.as_ref();
        let user = inner.and_then(|c| c.user.as_deref());
        Ok(Kubeconfig {
            clusters: (all.clusters.iter())
                .filter(|c| inner.is_some_and(|i| i.cluster == c.name))
                .cloned()
                .collect(),
            auth_infos: (all.auth_infos.iter())
                .filter(|a| user == Some(a.name.as_str()))
                .cloned()
                .collect(),
            contexts: vec![context],
            current_context: Some(cluster.to_owned()),
            ..Kubeconfig::default()
        })
    }

    /// A Secret `namespace/name` holding [`kubeconfig_for(cluster)`](Self::kubeconfig_for) under the key
    /// [`MEMBER_KUBECONFIG_KEY`]: a member of a fleet as kubeplex's `KubeconfigSecrets` takes it. Add the
    /// labels your provider selects (and `kubeplex.io/member` to name the member otherwise than `name`),
    /// then create it in the cluster the provider watches.
    pub fn member_secret(&self, cluster: &str, name: &str, namespace: &str) -> Result<Secret> {
        let kubeconfig = self.kubeconfig_for(cluster)?;
        let text = serde_json::to_string(&kubeconfig).expect("a kubeconfig serializes");
        Ok(Secret {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            type_: Some("Opaque".into()),
            string_data: Some([(MEMBER_KUBECONFIG_KEY.to_owned(), text)].into()),
            ..Secret::default()
        })
    }
}
