//! Building an `Api` for a kind whose scope is only known as a type parameter.

use kube::core::{ClusterResourceScope, NamespaceResourceScope};
use kube::{Api, Client, Resource};

/// The scope of a kind (`kube::Resource::Scope`): where its objects live, and so how to address them.
///
/// Implemented for namespaced and cluster-scoped kinds; the runtime uses it to watch a kind in one
/// namespace, or everywhere, without knowing its scope.
pub trait ApiScope: Sized {
    /// An `Api` for `K` in `namespace`, or across all namespaces (cluster-scoped kinds ignore the namespace).
    fn api<K: Resource<Scope = Self, DynamicType = ()>>(
        client: Client,
        namespace: Option<&str>,
    ) -> Api<K>;
}

impl ApiScope for NamespaceResourceScope {
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
    fn api<K: Resource<Scope = Self, DynamicType = ()>>(
        client: Client,
        _namespace: Option<&str>,
    ) -> Api<K> {
        Api::all(client)
    }
}
