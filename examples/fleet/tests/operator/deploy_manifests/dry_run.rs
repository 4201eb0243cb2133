//! Server-side dry-run apply of the manifests to a real API server, with strict field validation.

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::{Discovery, Scope};
use kubeplex_testenv::TestEnv;

use super::manifest::{Manifest, of_kind};

const FIELD_MANAGER: &str = "kubeplex-fleet-tests";

/// Server-side applies `manifest` in dry-run mode with strict field validation.
pub(crate) async fn dry_run_apply(
    client: &Client,
    discovery: &Discovery,
    manifest: &Manifest,
) -> Result<DynamicObject, String> {
    let (resource, capabilities) = discovery.resolve_gvk(&manifest.gvk()).ok_or_else(|| {
        format!(
            "{}: the API server does not serve {:?}",
            manifest.describe(),
            manifest.gvk()
        )
    })?;
    let api: Api<DynamicObject> = match (capabilities.scope, manifest.namespace()) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
        (Scope::Namespaced, None) => {
            return Err(format!(
                "{}: namespaced, so it must name its namespace",
                manifest.describe()
            ));
        }
        (Scope::Cluster, None) => Api::all_with(client.clone(), &resource),
        (Scope::Cluster, Some(_)) => {
            return Err(format!(
                "{}: cluster-scoped, but names a namespace",
                manifest.describe()
            ));
        }
    };
    let params = PatchParams::apply(FIELD_MANAGER)
        .dry_run()
        .validation_strict();
    api.patch(manifest.name(), &params, &Patch::Apply(&manifest.value))
        .await
        .map_err(|e| format!("{} rejected: {e}", manifest.describe()))
}

/// Creates the set's Namespaces for real (dry-run creates nothing, and namespaced objects need their
/// namespace), then dry-runs every manifest. Returns each rejection.
pub(crate) async fn apply_set(env: &TestEnv, cluster: &str, manifests: &[Manifest]) -> Vec<String> {
    let client = env.client(cluster).await.unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for manifest in of_kind(manifests, "Namespace") {
        namespaces
            .patch(
                manifest.name(),
                &PatchParams::apply(FIELD_MANAGER).validation_strict(),
                &Patch::Apply(&manifest.value),
            )
            .await
            .unwrap_or_else(|e| panic!("{cluster}: creating {}: {e}", manifest.describe()));
    }
    let discovery = Discovery::new(client.clone()).run().await.unwrap();

    let mut rejected = Vec::new();
    for manifest in manifests {
        match dry_run_apply(&client, &discovery, manifest).await {
            Ok(object) => assert_eq!(object.name_any(), manifest.name()),
            Err(reason) => rejected.push(format!("{cluster}: {reason}")),
        }
    }
    rejected
}
