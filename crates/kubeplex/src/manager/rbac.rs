//! RBAC from the plans: the Roles, ClusterRoles and bindings each context needs, derived from what the
//! manager's controllers, member provider and leader election (or sharding) do there.

use std::collections::{BTreeMap, BTreeSet};

use indexmap::IndexSet;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::Manager;
use crate::client::{IDENTITY_NAMESPACE, IdentitySource, cluster_property};
use crate::core::Grant;

/// The verbs of a Lease under leader election: read, created once, renewed or taken over.
const ELECTION_VERBS: [&str; 3] = ["get", "create", "update"];
/// Sharded, the members' Leases are listed too, and a replica deletes its own when it stops.
const SHARDING_VERBS: [&str; 5] = ["get", "list", "create", "update", "delete"];
/// The order verbs are written in.
const VERB_ORDER: [&str; 8] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

impl Manager {
    /// The RBAC this manager needs to run, per context, bound to the ServiceAccount `service_account` in
    /// `namespace` ([docs/rbac.md]): read from the controllers' plans as registered (their run-time
    /// namespaces included), the member provider and the leader election or sharding. What members need
    /// is there only with a member provider ([`Manager::members`]). Print it with
    /// [`ContextRbac::objects`]; nothing is contacted.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kubeplex::{Child, ContextName, Plan};
    /// # use kubeplex::{Controller, Cx, Reconcile, Action};
    /// # struct Web;
    /// # impl Controller for Web {
    /// #     type Resource = k8s_openapi::api::apps::v1::Deployment;
    /// #     type Context = ContextName;
    /// #     fn plan() -> Plan<ContextName> {
    /// #         Plan::new("web").with_contexts([ContextName::new("control")]).with_namespaces(["apps"])
    /// #             .owns(Child::of::<ConfigMap>().with_contexts([ContextName::new("edge")]).with_namespaces(["web"]))
    /// #     }
    /// # }
    /// # impl Reconcile for Web {
    /// #     type Error = kubeplex::Error;
    /// #     async fn reconcile(&self, _: std::sync::Arc<Self::Resource>, _: &Cx<ContextName>) -> kubeplex::Result<Action> { Ok(Action::await_change()) }
    /// # }
    /// let rbac = kubeplex::Manager::new().controller(Web).rbac("web-operator", "operators");
    /// assert_eq!(rbac.contexts(), ["control", "edge"]);
    /// let edge = rbac.for_context("edge");
    /// let namespaces: Vec<_> = edge.roles.iter().map(|r| r.metadata.namespace.as_deref()).collect();
    /// assert_eq!(namespaces, [Some("kube-system"), Some("web")]);
    /// assert!(edge.cluster_roles.is_empty());
    /// ```
    ///
    /// [docs/rbac.md]: https://github.com/kubeplex/kubeplex/blob/main/docs/rbac.md
    pub fn rbac(&self, service_account: &str, namespace: &str) -> Rbac {
        let mut grants: Vec<Grant> = self.controllers.iter().flat_map(|c| c.grants()).collect();
        match &self.fleet.provider {
            Some((provider, _)) => grants.extend(provider.grants()),
            // Without a member provider there are no members to grant anything in.
            None => grants.retain(|g| g.context.is_some()),
        }
        // Every cluster is asked which it is: its kube-system Namespace, read by name.
        let clusters: BTreeSet<Option<String>> = grants.iter().map(|g| g.context.clone()).collect();
        let by_property = self.fleet.identity_source == IdentitySource::ClusterProperty;
        for cluster in clusters {
            let place = (cluster.as_deref(), Some(IDENTITY_NAMESPACE));
            grants.push(Grant::new(place.0, place.1, "", "namespaces", &["get"]));
            if by_property {
                let property = cluster_property();
                let (group, plural) = (&property.group, &property.plural);
                grants.push(Grant::new(place.0, None, group, plural, &["get"]));
            }
        }
        let leases = (self.election.as_ref().map(|e| (e, &ELECTION_VERBS[..]))).or(self
            .sharding
            .as_ref()
            .map(|s| (&s.lease, &SHARDING_VERBS[..])));
        if let Some((lease, verbs)) = leases {
            let place = (Some(lease.context.as_str()), Some(lease.namespace.as_str()));
            grants.push(Grant::new(
                place.0,
                place.1,
                "coordination.k8s.io",
                "leases",
                verbs,
            ));
        }
        let metrics = self.secure_metrics.as_ref().map(|m| m.context.clone());
        if let Some(context) = &metrics {
            // Each scrape's token is reviewed, and its user's access to /metrics.
            let place = (Some(context.as_str()), None);
            let reviews = [
                ("authentication.k8s.io", "tokenreviews"),
                ("authorization.k8s.io", "subjectaccessreviews"),
            ];
            for (group, resource) in reviews {
                grants.push(Grant::new(place.0, place.1, group, resource, &["create"]));
            }
        }
        if let Some(webhooks) = &self.webhooks {
            grants.extend(webhooks.grants());
        }
        Rbac {
            name: service_account.to_owned(),
            subject: (service_account.to_owned(), namespace.to_owned()),
            labels: BTreeMap::new(),
            grants,
            metrics,
        }
    }
}

/// The RBAC a manager needs, per context: see [`Manager::rbac`].
#[derive(Clone, Debug)]
pub struct Rbac {
    name: String,
    subject: (String, String),
    labels: BTreeMap<String, String>,
    grants: Vec<Grant>,
    /// The context that reviews scrapes of the secure metrics, if they are on.
    metrics: Option<String>,
}

/// One context's share of [`Rbac`]: a Role and a RoleBinding per namespace, a ClusterRole and its binding
/// for what is needed cluster-wide.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContextRbac {
    /// What is needed cluster-wide: in every namespace, or of cluster-scoped kinds.
    pub cluster_roles: Vec<ClusterRole>,
    /// The ClusterRoles bound to the ServiceAccount.
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
    /// What is needed in one namespace, a Role per namespace.
    pub roles: Vec<Role>,
    /// The Roles bound to the ServiceAccount, each in its Role's namespace.
    pub role_bindings: Vec<RoleBinding>,
    /// In the context that reviews the secure metrics' scrapes: the ClusterRole `<name>-metrics-reader`
    /// (`get` on the non-resource URL `/metrics`), for you to bind to the scraper's ServiceAccount.
    pub metrics_reader: Option<ClusterRole>,
    /// For the members ([`Rbac::for_members`]): each cluster-wide grant of Secrets, or of a kind with
    /// `delete`, in one sentence — rights in every namespace of every member cluster, which a child kind
    /// without namespaces (or with `member_default_namespace`) gets without a word otherwise.
    pub warnings: Vec<String>,
}

impl Rbac {
    /// Names the Roles, ClusterRoles and bindings `name` (default: the ServiceAccount's name).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Puts the label `key: value` on every object.
    #[must_use]
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Every permission, where it is needed, as the runtime listed them.
    pub fn grants(&self) -> &[Grant] {
        &self.grants
    }

    /// The fixed contexts that need something, in the order first named.
    pub fn contexts(&self) -> Vec<String> {
        let all: IndexSet<&String> = self
            .grants
            .iter()
            .filter_map(|g| g.context.as_ref())
            .collect();
        all.into_iter().cloned().collect()
    }

    /// Whether the members of the fleet need something (see [`for_members`](Self::for_members)).
    pub fn in_members(&self) -> bool {
        self.grants.iter().any(|g| g.context.is_none())
    }

    /// What the fixed context `context` needs (nothing for a context the manager does not use).
    pub fn for_context(&self, context: &str) -> ContextRbac {
        let mut rbac = self.build(|g| g.context.as_deref() == Some(context));
        if self.metrics.as_deref() == Some(context) {
            let mut metadata = self.metadata(None);
            metadata.name = Some(format!("{}-metrics-reader", self.name));
            rbac.metrics_reader = Some(ClusterRole {
                metadata,
                rules: Some(vec![PolicyRule {
                    non_resource_urls: Some(vec!["/metrics".into()]),
                    verbs: vec!["get".into()],
                    ..PolicyRule::default()
                }]),
                ..ClusterRole::default()
            });
        }
        rbac
    }

    /// What every member of the fleet needs: the same in each, whichever joins; with a warning for each
    /// cluster-wide grant of Secrets or of a kind with `delete`.
    pub fn for_members(&self) -> ContextRbac {
        let mut rbac = self.build(|g| g.context.is_none());
        let rules = rbac
            .cluster_roles
            .iter()
            .flat_map(|r| r.rules.iter().flatten());
        rbac.warnings = rules.filter_map(broad_in_members).collect();
        rbac
    }

    /// The Roles and bindings of the grants `wanted` picks.
    fn build(&self, wanted: impl Fn(&Grant) -> bool) -> ContextRbac {
        // Namespace (None: cluster-wide) → (group, resource) → verbs.
        let mut scopes: BTreeMap<Option<&str>, Rules<'_>> = BTreeMap::new();
        for grant in self.grants.iter().filter(|g| wanted(g)) {
            let rules = scopes.entry(grant.namespace.as_deref()).or_default();
            let verbs = rules.entry((&grant.group, &grant.resource)).or_default();
            verbs.extend(grant.verbs.iter().map(String::as_str));
        }
        let mut out = ContextRbac::default();
        for (namespace, rules) in scopes {
            let rules = rules
                .into_iter()
                .map(|((group, resource), verbs)| rule(group, resource, verbs));
            let rules = Some(rules.collect());
            let metadata = self.metadata(namespace);
            let subjects = Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: self.subject.0.clone(),
                namespace: Some(self.subject.1.clone()),
                ..Subject::default()
            }]);
            let role_ref = |kind: &str| RoleRef {
                // `.into()`: optional from Kubernetes 1.34 on, a `String` before (the application
                // chooses k8s-openapi's version).
                api_group: String::from("rbac.authorization.k8s.io").into(),
                kind: kind.into(),
                name: self.name.clone(),
            };
            if namespace.is_some() {
                out.roles.push(Role {
                    metadata: metadata.clone(),
                    rules,
                });
                let role_ref = role_ref("Role");
                out.role_bindings.push(RoleBinding {
                    metadata,
                    role_ref,
                    subjects,
                });
            } else {
                let role = ClusterRole {
                    metadata: metadata.clone(),
                    rules,
                    ..ClusterRole::default()
                };
                out.cluster_roles.push(role);
                let role_ref = role_ref("ClusterRole");
                out.cluster_role_bindings.push(ClusterRoleBinding {
                    metadata,
                    role_ref,
                    subjects,
                });
            }
        }
        out
    }

    /// The metadata of every object: the name, labels and (for a Role) `namespace`.
    fn metadata(&self, namespace: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.name.clone()),
            namespace: namespace.map(str::to_owned),
            labels: (!self.labels.is_empty()).then(|| self.labels.clone()),
            ..ObjectMeta::default()
        }
    }
}

/// The verbs granted on each (group, resource) of one scope.
type Rules<'a> = BTreeMap<(&'a str, &'a str), BTreeSet<&'a str>>;

/// What `rule`, of a ClusterRole in every member, lets the operator do everywhere there, when that is
/// Secrets or deleting something.
fn broad_in_members(rule: &PolicyRule) -> Option<String> {
    let resources = rule.resources.as_deref().unwrap_or_default().join(", ");
    let group = (rule.api_groups.iter().flatten())
        .find(|g| !g.is_empty())
        .map_or(String::new(), |g| format!(".{g}"));
    let secrets = rule.resources.iter().flatten().any(|r| r == "secrets");
    let deletes = rule
        .verbs
        .iter()
        .any(|v| v == "delete" || v == "deletecollection");
    let what = match (secrets, deletes) {
        (true, _) => "every Secret",
        (false, true) => "deleting any of them",
        (false, false) => return None,
    };
    Some(format!(
        "cluster-wide in every member: {} on {resources}{group} in every namespace ({what}); give the child \
         kind namespaces to grant less",
        rule.verbs.join(", ")
    ))
}

/// One rule: `verbs` on `resource` of `group`, the verbs in the usual order.
fn rule(group: &str, resource: &str, verbs: BTreeSet<&str>) -> PolicyRule {
    let rank = |v: &&str| {
        VERB_ORDER
            .iter()
            .position(|o| o == v)
            .unwrap_or(VERB_ORDER.len())
    };
    let mut verbs: Vec<&str> = verbs.into_iter().collect();
    verbs.sort_by_key(rank);
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(vec![resource.to_owned()]),
        verbs: verbs.into_iter().map(str::to_owned).collect(),
        ..PolicyRule::default()
    }
}

impl ContextRbac {
    /// Whether the context needs nothing.
    pub fn is_empty(&self) -> bool {
        self.cluster_roles.is_empty() && self.roles.is_empty() && self.metrics_reader.is_none()
    }

    /// Every object, in the order to apply them (roles before their bindings), each with its `apiVersion`
    /// and `kind`: serialize them as YAML documents or JSON.
    pub fn objects(&self) -> Vec<serde_json::Value> {
        let json = |v: serde_json::Result<serde_json::Value>| v.expect("RBAC objects serialize");
        let mut all = Vec::new();
        for (role, binding) in self.cluster_roles.iter().zip(&self.cluster_role_bindings) {
            all.push(json(serde_json::to_value(role)));
            all.push(json(serde_json::to_value(binding)));
        }
        for (role, binding) in self.roles.iter().zip(&self.role_bindings) {
            all.push(json(serde_json::to_value(role)));
            all.push(json(serde_json::to_value(binding)));
        }
        if let Some(reader) = &self.metrics_reader {
            all.push(json(serde_json::to_value(reader)));
        }
        all
    }
}

#[cfg(test)]
mod tests;
