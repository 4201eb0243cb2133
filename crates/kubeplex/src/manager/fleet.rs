//! The manager's fleet options: where members come from, what their kubeconfigs may contain beyond inline
//! credentials, what a leave does with their children, how many member changes run at once, when a leave
//! gives up on a member that does not answer, and whether two names may reach one cluster.

use std::time::Duration;

use super::Manager;
use crate::client::IdentitySource;
use crate::members::{LeavePolicy, MemberProvider};

impl Manager {
    /// Takes the fleet's members from `provider` (clusters that join and leave at run time: kubeconfig
    /// Secrets, a kubeconfig file, your own inventory); `policy` says what happens to a leaving member's
    /// children. Children declared with `owns(.., members)` live in every member ([docs/fleets.md]).
    ///
    /// [docs/fleets.md]: https://github.com/kubeplex/kubeplex/blob/main/docs/fleets.md
    pub fn members(mut self, provider: impl MemberProvider, policy: LeavePolicy) -> Self {
        self.fleet.provider = Some((Box::new(provider), policy));
        self
    }

    /// Lets a member kubeconfig authenticate with an exec credential plugin whose `command` is one of
    /// `commands`, compared exactly as written (`aws` matches `aws` only, not `/usr/bin/aws`; a
    /// relative name is looked up in the operator's `PATH`). Replaces any list given before; none by
    /// default, and an empty list allows none.
    ///
    /// A member kubeconfig is written by whoever may write its Secret (or file): the command then runs
    /// in the operator's container with the arguments and environment that kubeconfig gives it (never
    /// `PATH` or the dynamic loader's variables), so allow only plugins that are harmless whatever
    /// they are given. It always runs non-interactively. Without this, a member kubeconfig holds its
    /// credentials inline ([docs/fleets.md]).
    ///
    /// ```no_run
    /// # use kubeplex::Manager;
    /// let manager = Manager::new().member_exec_commands(["aws", "/usr/local/bin/kubelogin"]);
    /// ```
    ///
    /// [docs/fleets.md]: https://github.com/kubeplex/kubeplex/blob/main/docs/fleets.md
    pub fn member_exec_commands(
        mut self,
        commands: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        let commands = commands.into_iter().map(Into::into);
        self.fleet.allowlist.exec_commands = commands.filter(|c| !c.is_empty()).collect();
        self
    }

    /// Lets a member kubeconfig's cluster set `insecure-skip-tls-verify: true`: the member's server is
    /// then not verified, and anyone between the operator and it can read and change what is sent,
    /// credentials included. Refused by default ([docs/fleets.md]).
    ///
    /// [docs/fleets.md]: https://github.com/kubeplex/kubeplex/blob/main/docs/fleets.md
    pub fn allow_insecure_members(mut self) -> Self {
        self.fleet.allowlist.insecure = true;
        self
    }

    /// How many member joins and leaves may be at work at once (default 16; at least 1). Each member's
    /// changes are carried out in the order reported; different members' side by side, up to this many, so
    /// that a burst of a thousand new members neither waits one by one nor floods the API servers. A leave
    /// that only waits for its member to answer does not count.
    pub fn member_changes_at_once(mut self, limit: usize) -> Self {
        self.fleet.at_once = limit.max(1);
        self
    }

    /// Under [`LeavePolicy::Delete`], how long a leaving member that does not answer is waited for before
    /// its children there are abandoned (default: for as long as it takes). Meanwhile `/readyz` shows the
    /// member `leaving` with the reason, the parents' status lists it as `Leaving`, and a kubeconfig
    /// Secret keeps its finalizer; on giving up the leave ends, the Secret provider records a
    /// `MemberChildrenAbandoned` Event on the Secret and lets it go. No other member waits for it.
    pub fn abandon_unreachable_members_after(mut self, after: Duration) -> Self {
        self.fleet.give_up_after = Some(after);
        self
    }

    /// Lets several names — contexts, members — reach one cluster. Each cluster is asked which it is (the
    /// UID of its `kube-system` Namespace) when its credentials are read and whenever it answers again
    /// after an outage; by default, of two names that reach one cluster only the first is written to (the
    /// contexts that hold parents first, then the other contexts by name, then members in the order they
    /// joined), and the other is refused, in `/readyz`, its parents' status and an Event, naming both: its
    /// children would be applied and pruned twice in one place ([docs/fleets.md]). Allow it where it is
    /// meant (a test or a benchmark pointing contexts at one server).
    ///
    /// [docs/fleets.md]: https://github.com/kubeplex/kubeplex/blob/main/docs/fleets.md#cluster-identity
    pub fn allow_duplicate_clusters(mut self) -> Self {
        self.fleet.allow_duplicates = true;
        self
    }

    /// Names each cluster by its ClusterSet id where it has one: the value of its `ClusterProperty`
    /// `cluster.clusterset.k8s.io` (KEP-2149, `about.k8s.io/v1alpha1`), else the UID of its `kube-system`
    /// Namespace as by default. Each ask is then one request for a cluster with the property and two for one
    /// without. Set the property before the operator starts: one that appears or goes on a running cluster
    /// changes its identity, which fails closed like any other change (a context is no longer written to
    /// until the operator restarts, a member leaves and joins anew). [`Manager::rbac`] grants `get` on it.
    pub fn identity_from_cluster_property(mut self) -> Self {
        self.fleet.identity_source = IdentitySource::ClusterProperty;
        self
    }
}
