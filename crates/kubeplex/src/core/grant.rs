//! One permission a running operator needs, as the runtime knows it: the raw material of
//! [`Manager::rbac`](crate::Manager::rbac).

/// `verbs` on `resource` (with its subresource, e.g. `appdeployments/status`) of the API group `group`, in
/// `namespace` (`None`: cluster-wide) of `context` (`None`: every member of the fleet).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Grant {
    /// The fixed context the grant is needed in; `None` is every member of the fleet.
    pub context: Option<String>,
    /// The namespace; `None` is every namespace (a ClusterRole), or a cluster-scoped kind.
    pub namespace: Option<String>,
    /// The API group (`""` is the core group).
    pub group: String,
    /// The resource's plural name, `/subresource` appended when it is one.
    pub resource: String,
    /// The verbs, e.g. `get`, `list`, `watch`, `patch`.
    pub verbs: Vec<String>,
}

impl Grant {
    /// `verbs` on `resource` of `group`, in `namespace` of `context` (`None`: every member).
    pub fn new(
        context: Option<&str>,
        namespace: Option<&str>,
        group: &str,
        resource: &str,
        verbs: &[&str],
    ) -> Self {
        Self {
            context: context.map(str::to_owned),
            namespace: namespace.map(str::to_owned),
            group: group.to_owned(),
            resource: resource.to_owned(),
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        }
    }
}

/// The Events kubeplex records (`events.k8s.io/v1`, created once and patched as a series repeats) in
/// `namespace` of `context`.
pub(crate) fn events_grant(context: Option<&str>, namespace: Option<&str>) -> Grant {
    Grant::new(
        context,
        namespace,
        "events.k8s.io",
        "events",
        &["create", "patch"],
    )
}
