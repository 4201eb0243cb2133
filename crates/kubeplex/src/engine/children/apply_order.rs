//! The order in which one cluster's children are applied, and its reverse for deleting them: the kinds
//! others depend on first (a namespace before what lives in it, a CRD before its objects, a ServiceAccount
//! and its RBAC before the pods that run as it), as Helm orders an install and an uninstall. This file is
//! the one place the order is kept; `docs/ownership.md` and `Cx::child` describe it.

use kube::api::ApiResource;

/// The kinds applied before the others, tier by tier, each kind by (API group, kind).
const FIRST: &[&[(&str, &str)]] = &[
    &[("", "Namespace")],
    &[("apiextensions.k8s.io", "CustomResourceDefinition")],
    // What the workloads made later are admitted or scheduled under.
    &[
        ("scheduling.k8s.io", "PriorityClass"),
        ("storage.k8s.io", "StorageClass"),
        ("", "ResourceQuota"),
        ("", "LimitRange"),
        ("networking.k8s.io", "NetworkPolicy"),
    ],
    &[("", "ServiceAccount")],
    &[
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "Role"),
    ],
    &[
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("rbac.authorization.k8s.io", "RoleBinding"),
    ],
    &[("", "ConfigMap"), ("", "Secret")],
];

/// The kinds applied after all others: they send the API server's own requests to a service, which should
/// be running before the server depends on it.
const LAST: &[(&str, &str)] = &[
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("apiregistration.k8s.io", "APIService"),
];

/// Where a kind comes in the apply order: the lower, the earlier. Every kind not named above shares the
/// rank between [`FIRST`] and [`LAST`].
pub(crate) fn rank(resource: &ApiResource) -> usize {
    let is = |&(group, kind): &(&str, &str)| resource.group == group && resource.kind == kind;
    if let Some(tier) = FIRST.iter().position(|tier| tier.iter().any(is)) {
        return tier;
    }
    FIRST.len() + usize::from(LAST.iter().any(is)) // The rest, or last.
}

/// Sorts `items` into the apply order; items of one rank keep their order (as they were declared).
pub(crate) fn sort_for_apply<T>(items: &mut [T], resource: impl Fn(&T) -> &ApiResource) {
    items.sort_by_key(|item| rank(resource(item)));
}

/// Sorts `items` into the delete order, the apply order reversed (what depends on others goes first);
/// items of one rank keep their order.
pub(crate) fn sort_for_delete<T>(items: &mut [T], resource: impl Fn(&T) -> &ApiResource) {
    items.sort_by_key(|item| std::cmp::Reverse(rank(resource(item))));
}

#[cfg(test)]
mod tests;
