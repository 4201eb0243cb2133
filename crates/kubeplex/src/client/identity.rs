//! Which cluster a client reaches: the `kube-system` Namespace's UID (the de facto cluster id), or where
//! asked for its KEP-2149 `ClusterProperty` id, asked once per set of credentials and again after an outage,
//! and the gate a cluster's writes pass: held while its identity is being asked, shut when it is the same
//! cluster as another name's, or no longer the one it was.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::Api;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use tokio::sync::{Notify, watch};

/// The Namespace whose UID names a cluster: created with the cluster, never deleted.
pub(crate) const IDENTITY_NAMESPACE: &str = "kube-system";
/// The `ClusterProperty` (KEP-2149, `about.k8s.io`) whose value is the cluster's id in its ClusterSet.
pub(crate) const CLUSTER_ID_PROPERTY: &str = "cluster.clusterset.k8s.io";
/// The `ClusterProperty` resource.
pub(crate) fn cluster_property() -> ApiResource {
    let gvk = GroupVersionKind::gvk("about.k8s.io", "v1alpha1", "ClusterProperty");
    ApiResource::from_gvk_with_plural(&gvk, "clusterproperties")
}

/// Where a cluster's identity is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum IdentitySource {
    /// The `kube-system` Namespace's UID: one request.
    #[default]
    KubeSystem,
    /// The `cluster.clusterset.k8s.io` ClusterProperty's value where the cluster has one (one request),
    /// else the `kube-system` Namespace's UID (a second).
    ClusterProperty,
}

/// How long a write waits for its cluster's identity to be asked before it is refused (the request a
/// cluster is asked with takes at most 5 s).
pub(crate) const IDENTITY_WAIT: Duration = Duration::from_secs(10);

/// Asks the cluster behind `client` who it is: one `GET` of the `kube-system` Namespace's metadata, after
/// one of the ClusterProperty where `source` says so.
pub(crate) async fn ask(client: Client, source: IdentitySource) -> Result<String, kube::Error> {
    if source == IdentitySource::ClusterProperty {
        let properties: Api<DynamicObject> = Api::all_with(client.clone(), &cluster_property());
        match properties.get(CLUSTER_ID_PROPERTY).await {
            // A property without a value names nothing: the UID does.
            Ok(property) => match property.data["spec"]["value"].as_str() {
                Some(value) if !value.is_empty() => return Ok(value.to_owned()),
                _ => {}
            },
            // No such property, or no ClusterProperty CRD: the UID names it.
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error),
        }
    }
    let namespaces: Api<Namespace> = Api::all(client);
    let namespace = namespaces.get_metadata(IDENTITY_NAMESPACE).await?;
    Ok(namespace.metadata.uid.unwrap_or_default())
}

/// Whether a cluster's writes may go now.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Passage {
    /// Nobody asks the cluster who it is (credentials built outside a manager): writes go, and a new
    /// connection changes nothing.
    Unasked,
    /// Its identity is being asked: writes wait.
    Held,
    /// Known (or not knowable: no check stands in the way).
    Open,
    /// Not to be written to, and why.
    Shut(Arc<str>),
}

/// The gate every write to one cluster passes (reads never wait at it): held until the cluster's identity
/// is known, and again when the cluster's reads connect anew (another cluster may answer at its address);
/// shut when the name reaches a cluster another name already reaches, or another cluster than before. One
/// per set of credentials, shared by every client built on them.
#[derive(Debug)]
pub(crate) struct IdentityGate {
    passage: watch::Sender<Passage>,
    /// Told when the cluster should be asked again (its reads' connection was established anew).
    ask_again: Notify,
}

impl Default for IdentityGate {
    fn default() -> Self {
        Self::with(Passage::Unasked)
    }
}

impl IdentityGate {
    fn with(passage: Passage) -> Self {
        Self {
            passage: watch::channel(passage).0,
            ask_again: Notify::new(),
        }
    }

    /// A gate nobody asks about: writes pass until someone holds it to ask the cluster who it is.
    pub(crate) fn unasked() -> Self {
        Self::default()
    }

    /// Writes go from now on.
    pub(crate) fn pass(&self) {
        self.passage.send_if_modified(|p| replace(p, Passage::Open));
    }

    /// Writes wait from now on (the cluster is being asked again).
    pub(crate) fn hold(&self) {
        self.passage.send_if_modified(|p| replace(p, Passage::Held));
    }

    /// Writes are refused from now on, told `why`.
    pub(crate) fn shut(&self, why: &str) {
        self.passage
            .send_if_modified(|p| replace(p, Passage::Shut(why.into())));
    }

    /// The cluster's reads connected anew after losing every connection ([`super::reconnects`]): once its
    /// identity was known, writes wait until it is asked again ([`asked_again`](Self::asked_again)).
    pub(crate) fn reconnected(&self) {
        let held = self.passage.send_if_modified(|p| match p {
            Passage::Open => replace(p, Passage::Held),
            _ => false,
        });
        if held {
            self.ask_again.notify_one();
        }
    }

    /// Resolves when the cluster should be asked again who it is.
    pub(crate) async fn asked_again(&self) {
        self.ask_again.notified().await;
    }

    /// Why writes are refused now, if they are.
    #[cfg(test)]
    pub(crate) fn refusal(&self) -> Option<Arc<str>> {
        match &*self.passage.borrow() {
            Passage::Shut(why) => Some(why.clone()),
            _ => None,
        }
    }

    /// Whether writes wait now.
    pub(crate) fn is_held(&self) -> bool {
        *self.passage.borrow() == Passage::Held
    }

    /// Waits while the gate is held, at most `within`; then `Err` with why a write may not go.
    pub(crate) async fn passage(&self, within: Duration) -> Result<(), Arc<str>> {
        let mut seen = self.passage.subscribe();
        let settled = seen.wait_for(|p| *p != Passage::Held);
        match tokio::time::timeout(within, settled).await {
            Ok(Ok(passage)) => match &*passage {
                Passage::Shut(why) => Err(why.clone()),
                _ => Ok(()),
            },
            Ok(Err(_)) => Ok(()),
            Err(_) => Err(format!(
                "the cluster's identity is not known yet (its server has not answered who it is within {within:?})"
            )
            .into()),
        }
    }
}

/// Sets `passage` to `to`; whether it changed.
fn replace(passage: &mut Passage, to: Passage) -> bool {
    if *passage == to {
        return false;
    }
    *passage = to;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fake_api;

    #[tokio::test]
    async fn a_cluster_property_without_a_value_leaves_the_uid_to_name_the_cluster() {
        let answer = |property: serde_json::Value| {
            let (client, requests) = fake_api::client(move |_, uri, _| match uri {
                u if u.contains("clusterproperties") => (200, property.clone()),
                _ => (
                    200,
                    serde_json::json!({
                    "apiVersion": "v1", "kind": "Namespace",
                    "metadata": { "name": "kube-system", "uid": "8c1f0e4e-uid" } }),
                ),
            });
            async move { (ask(client, IdentitySource::ClusterProperty).await, requests) }
        };
        let property = |spec: serde_json::Value| {
            serde_json::json!({
            "apiVersion": "about.k8s.io/v1alpha1", "kind": "ClusterProperty",
            "metadata": { "name": CLUSTER_ID_PROPERTY }, "spec": spec })
        };
        let (named, requests) = answer(property(serde_json::json!({ "value": "a.fleet" }))).await;
        assert_eq!(named.unwrap(), "a.fleet");
        assert_eq!(requests.all().len(), 1, "a value needs no second request");
        for spec in [
            serde_json::json!({ "value": "" }),
            serde_json::json!({}),
            serde_json::json!({ "value": 7 }),
        ] {
            let (named, requests) = answer(property(spec.clone())).await;
            assert_eq!(named.unwrap(), "8c1f0e4e-uid", "{spec}");
            assert_eq!(requests.all().len(), 2);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_gate_holds_writes_until_it_opens_or_shuts_and_bounds_the_wait() {
        let gate = Arc::new(IdentityGate::default());
        gate.hold();
        let waiting = tokio::spawn({
            let gate = gate.clone();
            async move { gate.passage(IDENTITY_WAIT).await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished(), "a held gate lets no write pass");
        gate.pass();
        assert_eq!(waiting.await.unwrap(), Ok(()));

        gate.shut("cluster-b reaches the same cluster as cluster-a");
        let refused = gate.passage(IDENTITY_WAIT).await.unwrap_err();
        assert_eq!(&*refused, "cluster-b reaches the same cluster as cluster-a");
        assert_eq!(gate.refusal().as_deref(), Some(&*refused));

        gate.hold();
        let began = tokio::time::Instant::now();
        let late = gate.passage(IDENTITY_WAIT).await.unwrap_err();
        assert_eq!(began.elapsed(), IDENTITY_WAIT);
        assert!(late.contains("identity is not known yet"), "{late}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_connection_holds_writes_of_a_known_cluster_until_it_is_asked_again() {
        let unasked = IdentityGate::unasked();
        unasked.reconnected();
        assert!(
            !unasked.is_held(),
            "nobody asks about it: nothing to wait for"
        );

        let gate = Arc::new(IdentityGate::default());
        gate.hold();
        gate.reconnected();
        assert!(gate.is_held());
        let asked = tokio::time::timeout(Duration::from_secs(1), gate.asked_again()).await;
        assert!(
            asked.is_err(),
            "its first connection: it is being asked already"
        );

        gate.pass();
        gate.reconnected();
        assert!(gate.is_held(), "connected anew: writes wait");
        gate.asked_again().await;
        gate.shut("now reaches another cluster");
        gate.reconnected();
        assert_eq!(
            gate.refusal().as_deref(),
            Some("now reaches another cluster")
        );
    }
}
