//! `fleet run --members-from-secrets`, `--members-from-cluster-profiles`, `--members-from-cluster-api`:
//! child clusters beside the typed ones, joining and leaving at run time.

use std::path::PathBuf;

use clap::ValueEnum;
use kubeplex::{
    Context as _, Manager, members::AccessProviders, members::ClusterProfiles,
    members::KubeconfigSecrets, members::LeavePolicy,
};
use kubeplex_fleet::Fleet;

/// Child clusters beside cluster-a and cluster-b: members of the fleet that join and leave while the operator
/// runs, each given by a kubeconfig Secret, a ClusterProfile or a Cluster API cluster's Secret in the control
/// cluster (docs/fleets.md). One source at a time.
#[derive(Debug, clap::Args)]
#[group(skip)]
pub struct MemberFlags {
    /// Also put the Deployments in every cluster whose kubeconfig Secret in the control cluster matches this
    /// label selector, e.g. `kubeplex.io/fleet=prod`: one Secret, one member, named by its
    /// `kubeplex.io/member` label (else the Secret's name). Creating a Secret joins its cluster; deleting it
    /// makes the cluster leave.
    #[arg(
        long,
        value_name = "SELECTOR",
        value_parser = label_selector,
        env = "FLEET_MEMBERS_FROM_SECRETS",
        group = "member_source"
    )]
    pub members_from_secrets: Option<String>,
    /// Also put the Deployments in every cluster published as a ClusterProfile (sig-multicluster's Cluster
    /// Inventory API) in this namespace of the control cluster, once its `ControlPlaneHealthy` condition is
    /// `True`; reached through the exec plugins of `--access-providers`.
    #[arg(
        long,
        value_name = "NAMESPACE",
        env = "FLEET_MEMBERS_FROM_CLUSTER_PROFILES",
        group = "member_source"
    )]
    pub members_from_cluster_profiles: Option<String>,
    /// The access-providers file (`{"providers": [{"name": .., "execConfig": {..}}]}`): the exec plugin for
    /// each access provider a ClusterProfile may offer. Without it, no profile can be reached (each is
    /// reported).
    #[arg(
        long,
        value_name = "FILE",
        env = "FLEET_ACCESS_PROVIDERS",
        requires = "members_from_cluster_profiles"
    )]
    pub access_providers: Option<PathBuf>,
    /// Also put the Deployments in every cluster Cluster API manages in this namespace of the control
    /// cluster, from its `<cluster>-kubeconfig` Secret; the member is named as the cluster.
    #[arg(
        long,
        value_name = "NAMESPACE",
        env = "FLEET_MEMBERS_FROM_CLUSTER_API",
        group = "member_source"
    )]
    pub members_from_cluster_api: Option<String>,
    /// The namespace of the control cluster holding the member Secrets (the operator's own in deploy/).
    #[arg(
        long,
        value_name = "NAMESPACE",
        default_value = kubeplex_fleet::MEMBERS_NAMESPACE,
        env = "FLEET_MEMBERS_NAMESPACE",
        requires = "members_from_secrets"
    )]
    pub members_namespace: String,
    /// What happens to a leaving member's Deployments.
    #[arg(
        long,
        value_enum,
        value_name = "POLICY",
        default_value_t = MemberLeavePolicy::Delete,
        env = "FLEET_MEMBER_LEAVE_POLICY",
        requires = "member_source"
    )]
    pub member_leave_policy: MemberLeavePolicy,
    /// Lets a member kubeconfig authenticate with an exec credential plugin running this command, compared
    /// exactly as written (`aws` is not `/usr/bin/aws`); repeat the flag (or separate with commas in the
    /// variable) for several. None by default: a member kubeconfig holds its credentials inline, since
    /// whoever writes it would choose what runs in the operator's container (docs/fleets.md).
    #[arg(
        long,
        value_name = "COMMAND",
        value_delimiter = ',',
        env = "FLEET_MEMBER_EXEC_COMMANDS",
        requires = "member_source"
    )]
    pub member_exec_command: Vec<String>,
    /// Lets a member kubeconfig set `insecure-skip-tls-verify: true` (its server then goes unverified,
    /// credentials included); refused by default.
    #[arg(long, env = "FLEET_ALLOW_INSECURE_MEMBERS", requires = "member_source")]
    pub allow_insecure_members: bool,
    /// Lets several contexts or members reach one cluster (its `kube-system` Namespace's UID); by default
    /// only the first is written to and the others are refused (docs/fleets.md).
    #[arg(long, env = "FLEET_ALLOW_DUPLICATE_CLUSTERS")]
    pub allow_duplicate_clusters: bool,
}

impl MemberFlags {
    /// Whether a member source is given.
    #[cfg(test)]
    pub fn takes_members(&self) -> bool {
        self.members_from_secrets.is_some()
            || self.members_from_cluster_profiles.is_some()
            || self.members_from_cluster_api.is_some()
    }

    /// What happens to a leaving member's Deployments.
    pub fn leave_policy(&self) -> LeavePolicy {
        match self.member_leave_policy {
            MemberLeavePolicy::Delete => LeavePolicy::Delete,
            MemberLeavePolicy::Orphan => LeavePolicy::Orphan,
        }
    }

    /// `manager` with the members the flags ask for; as it is without a member source.
    pub fn add_to(
        self,
        manager: Manager,
    ) -> Result<Manager, kubeplex::members::AccessProvidersError> {
        let policy = self.leave_policy();
        if !self.member_exec_command.is_empty() {
            let commands = self.member_exec_command.join(", ");
            tracing::info!(%commands, "member kubeconfigs may run these exec credential plugins");
        }
        let mut manager = manager.member_exec_commands(self.member_exec_command);
        if self.allow_insecure_members {
            tracing::warn!("member kubeconfigs may skip verifying their servers' TLS certificates");
            manager = manager.allow_insecure_members();
        }
        if self.allow_duplicate_clusters {
            tracing::warn!("several contexts or members may reach one cluster: each is written to");
            manager = manager.allow_duplicate_clusters();
        }
        let context = Fleet::Control.name();
        if let Some(selector) = self.members_from_secrets {
            let namespace = self.members_namespace;
            tracing::info!(cluster = %context, %namespace, %selector, ?policy,
                "members of the fleet from kubeconfig Secrets");
            let secrets = KubeconfigSecrets::new(Fleet::Control, namespace, selector);
            return Ok(manager.members(secrets, policy));
        }
        if let Some(namespace) = self.members_from_cluster_profiles {
            let access = match &self.access_providers {
                Some(path) => AccessProviders::from_file(path)?,
                None => AccessProviders::default(),
            };
            let providers = access.names().join(", ");
            tracing::info!(cluster = %context, %namespace, %providers, ?policy,
                "members of the fleet from ClusterProfiles");
            let profiles = ClusterProfiles::new(Fleet::Control, namespace, access);
            return Ok(manager.members(profiles, policy));
        }
        if let Some(namespace) = self.members_from_cluster_api {
            tracing::info!(cluster = %context, %namespace, ?policy,
                "members of the fleet from Cluster API's kubeconfig Secrets");
            let secrets = KubeconfigSecrets::cluster_api(Fleet::Control, namespace);
            return Ok(manager.members(secrets, policy));
        }
        Ok(manager)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MemberLeavePolicy {
    /// Its Deployments are deleted first (a Secret keeps a finalizer until they are).
    Delete,
    /// Its Deployments stay, no longer managed; the AppDeployments' status says `Left`.
    Orphan,
}

/// A label selector for the member Secrets; never empty, which would take every Secret of the namespace.
pub fn label_selector(text: &str) -> Result<String, String> {
    match text.trim() {
        "" => Err(
            "a label selector such as kubeplex.io/fleet=prod (an empty one would take every \
                   Secret of the namespace)"
                .into(),
        ),
        selector => Ok(selector.to_owned()),
    }
}
