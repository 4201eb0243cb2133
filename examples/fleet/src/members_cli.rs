//! `fleet run --members-from-secrets`: child clusters beside the typed ones, joining and leaving at run time.

use clap::ValueEnum;
use kubeplex::{Context as _, KubeconfigSecrets, LeavePolicy};
use kubeplex_fleet::Fleet;

/// Child clusters beside cluster-a and cluster-b: members of the fleet that join and leave while the operator
/// runs, each given by a kubeconfig Secret in the control cluster (docs/fleets.md).
#[derive(Debug, clap::Args)]
pub struct MemberFlags {
    /// Also put the Deployments in every cluster whose kubeconfig Secret in the control cluster matches this
    /// label selector, e.g. `kubeplex.io/fleet=prod`: one Secret, one member, named by its
    /// `kubeplex.io/member` label (else the Secret's name). Creating a Secret joins its cluster; deleting it
    /// makes the cluster leave.
    #[arg(
        long,
        value_name = "SELECTOR",
        value_parser = label_selector,
        env = "FLEET_MEMBERS_FROM_SECRETS"
    )]
    pub members_from_secrets: Option<String>,
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
        requires = "members_from_secrets"
    )]
    pub member_leave_policy: MemberLeavePolicy,
}

impl MemberFlags {
    /// The member provider and leave policy the flags ask for; none without `--members-from-secrets`.
    pub fn provider(self) -> Option<(KubeconfigSecrets, LeavePolicy)> {
        let selector = self.members_from_secrets?;
        let policy = match self.member_leave_policy {
            MemberLeavePolicy::Delete => LeavePolicy::Delete,
            MemberLeavePolicy::Orphan => LeavePolicy::Orphan,
        };
        tracing::info!(context = Fleet::Control.name(), namespace = %self.members_namespace, %selector,
            ?policy, "members of the fleet from kubeconfig Secrets");
        let secrets = KubeconfigSecrets::new(Fleet::Control, self.members_namespace, selector);
        Some((secrets, policy))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MemberLeavePolicy {
    /// Its Deployments are deleted first; its Secret keeps a finalizer until they are.
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
