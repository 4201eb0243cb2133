//! The bounds on the kinds kubeplex handles, and what it derives from a kind's type: its scope (how to
//! address it) and its `Kind.group/version` label.

use std::fmt::Debug;

use kube::core::{ClusterResourceScope, NamespaceResourceScope};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// What `#[controller(crd = ..)]` and `owns(..)` accept: a `kube::Resource` whose type is known at compile
/// time (`DynamicType = ()`), with serde support — a `#[derive(CustomResource)]` type or a k8s-openapi kind.
///
/// Implemented for every such type; it only names the bounds and explains a mismatch.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the primary resource of a controller",
    label = "not a `kube::Resource<DynamicType = ()>` with serde support",
    note = "`crd = ..` takes a kind known at compile time: a `#[derive(CustomResource)]` type or a k8s-openapi kind such as `k8s_openapi::api::apps::v1::Deployment`"
)]
pub trait PrimaryResource:
    Resource<DynamicType = (), Scope: ApiScope>
    + Clone
    + Debug
    + DeserializeOwned
    + Serialize
    + Send
    + Sync
    + 'static
{
}

impl<K> PrimaryResource for K where
    K: Resource<DynamicType = (), Scope: ApiScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Serialize
        + Send
        + Sync
        + 'static
{
}

/// `Kind.group/version` of a kind (`Kind/version` for the core group), as probes, logs and annotations
/// show it.
pub(crate) fn kind_label<K: Resource<DynamicType = ()>>() -> String {
    format_kind(&K::kind(&()), &K::group(&()), &K::version(&()))
}

/// `Kind.group/version` from its parts.
pub(crate) fn format_kind(kind: &str, group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("{kind}/{version}")
    } else {
        format!("{kind}.{group}/{version}")
    }
}

/// The cache key of the object `name` in `namespace` (`None` for a cluster-scoped kind).
pub(crate) fn object_ref<K: Resource<DynamicType = ()>>(
    namespace: Option<&str>,
    name: &str,
) -> ObjectRef<K> {
    let object = ObjectRef::new(name);
    match namespace {
        Some(namespace) => object.within(namespace),
        None => object,
    }
}

/// `namespace/name`, as errors name a Lease and the blocked-deletion gauge names a parent (`/name` for a
/// cluster-scoped object).
pub(crate) fn namespaced_name(namespace: Option<&str>, name: &str) -> String {
    format!("{}/{name}", namespace.unwrap_or(""))
}

/// A `resourceVersion` as a number, to tell which of two versions of one object is newer. They are opaque
/// to clients by contract, but etcd's are integers that grow with every write; one that is not (another
/// storage) is never taken as newer or current.
pub(crate) fn version_number(version: Option<&str>) -> Option<u64> {
    version?.parse().ok()
}

/// The scope of a kind (`kube::Resource::Scope`): where its objects live, and so how to address them.
///
/// Implemented for namespaced and cluster-scoped kinds; the runtime uses it to watch a kind in one
/// namespace, or everywhere, without knowing its scope.
pub trait ApiScope: Sized {
    /// Whether objects of this scope live in a namespace.
    const NAMESPACED: bool;

    /// An `Api` for `K` in `namespace`, or across all namespaces (cluster-scoped kinds ignore the namespace).
    fn api<K: Resource<Scope = Self, DynamicType = ()>>(
        client: Client,
        namespace: Option<&str>,
    ) -> Api<K>;
}

impl ApiScope for NamespaceResourceScope {
    const NAMESPACED: bool = true;

    fn api<K: Resource<Scope = Self, DynamicType = ()>>(
        client: Client,
        namespace: Option<&str>,
    ) -> Api<K> {
        match namespace {
            Some(namespace) => Api::namespaced(client, namespace),
            None => Api::all(client),
        }
    }
}

impl ApiScope for ClusterResourceScope {
    const NAMESPACED: bool = false;

    fn api<K: Resource<Scope = Self, DynamicType = ()>>(
        client: Client,
        _namespace: Option<&str>,
    ) -> Api<K> {
        Api::all(client)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn kinds_are_labelled_with_group_and_version() {
        assert_eq!(super::kind_label::<Deployment>(), "Deployment.apps/v1");
        assert_eq!(super::kind_label::<ConfigMap>(), "ConfigMap/v1");
    }
}
