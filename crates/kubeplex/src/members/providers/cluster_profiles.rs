//! Members from sig-multicluster's Cluster Inventory API: every ClusterProfile in one namespace of a fixed
//! context is a member, reached through the exec credential plugin the consumer's access-providers file
//! names for an access provider the profile offers.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use kube::ResourceExt;
use kube::api::Api;
use kube::core::DynamicObject;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};

use super::kubeconfig::{fingerprint, trusted_config_of};
use crate::core::chain;
use crate::members::changes::LeaveOutcome;
use crate::members::provider::{MemberProvider, MemberSink};

mod access;
mod member_name;
mod profile;

pub use access::{AccessProviders, AccessProvidersError};
use member_name::member_name;
use profile::Profile;

/// Members from ClusterProfiles (`multicluster.x-k8s.io/v1alpha1`, sig-multicluster's Cluster Inventory
/// API, as Open Cluster Management, KubeFleet and GKE Fleet publish them): every ClusterProfile in one
/// namespace of a fixed context (optionally matching a label selector, e.g.
/// `x-k8s.io/cluster-manager=open-cluster-management`) is a member.
///
/// - Its credentials come from an exec plugin: the first provider of the [`AccessProviders`] file that the
///   profile's `status.accessProviders` (or the deprecated `status.credentialProviders`;
///   `accessProviders` wins on a name both have) offers. The offer's `cluster` gives the server and TLS
///   settings, read as a member kubeconfig's cluster is (one naming a file, a proxy or
///   `insecure-skip-tls-verify`, unless allowed, is refused; docs/fleets.md); kube runs the plugin,
///   never interactively, and runs it again when the server rejects its token (401) or before the
///   token's `expirationTimestamp`.
/// - It joins once its `ControlPlaneHealthy` condition is `True`. A member whose profile turns unhealthy
///   stays a member and is reported (in `/readyz`), as its cluster has not left the fleet: its children
///   stay, and its watches carry on where the server answers. It is joined again when the profile is
///   healthy again.
/// - A change of what reaches it (the offered cluster, the plugin's configuration and extensions) joins
///   it again: its client is rebuilt and its watches list again.
/// - The profile deleted (or no longer selected) makes the member leave under the manager's
///   [`LeavePolicy`](crate::members::LeavePolicy); under `Delete` its children are deleted with the plugin's
///   credentials, which outlive the profile.
/// - A profile offering no provider the file names, a plugin that fails (reported by its exit status,
///   never its output), a status that cannot be read: its member is reported unhealthy with the reason;
///   the others carry on. A plugin that fails when the member joins is run again by the manager, with
///   backoff, until it succeeds.
/// - The member is named after the profile's namespace and name (`<namespace>-<name>`, or with a hash
///   when that is no DNS label; see docs/fleets.md).
///
/// It needs `get`, `list` and `watch` on `clusterprofiles.multicluster.x-k8s.io` in the namespace.
///
/// ```no_run
/// # kubeplex::contexts! { pub enum Fleet { Control = "control" } }
/// # fn doc() -> Result<(), kubeplex::members::AccessProvidersError> {
/// use kubeplex::{members::AccessProviders, members::ClusterProfiles, members::LeavePolicy, Manager};
/// let access = AccessProviders::from_file("/etc/fleet/access-providers.json")?;
/// let profiles = ClusterProfiles::new(Fleet::Control, "fleet-system", access)
///     .label_selector("x-k8s.io/cluster-manager=open-cluster-management");
/// let manager = Manager::new().members(profiles, LeavePolicy::Delete);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ClusterProfiles {
    context: String,
    namespace: String,
    selector: Option<String>,
    access: AccessProviders,
}

impl ClusterProfiles {
    /// Members from the ClusterProfiles in `namespace` of `context`, reached with the plugins of `access`.
    pub fn new(
        context: impl crate::core::Context,
        namespace: impl Into<String>,
        access: AccessProviders,
    ) -> Self {
        Self {
            context: context.name().to_owned(),
            namespace: namespace.into(),
            selector: None,
            access,
        }
    }

    /// Only the ClusterProfiles matching `selector` (every one of the namespace by default).
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.selector = Some(selector.into());
        self
    }
}

impl MemberProvider for ClusterProfiles {
    fn contexts(&self) -> Vec<String> {
        vec![self.context.clone()]
    }

    /// The ClusterProfiles are watched; nothing is written.
    fn grants(&self) -> Vec<crate::core::Grant> {
        let (context, namespace) = (Some(self.context.as_str()), Some(self.namespace.as_str()));
        let resource = profile::resource();
        let verbs = ["get", "list", "watch"];
        vec![crate::core::Grant::new(
            context,
            namespace,
            &resource.group,
            &resource.plural,
            &verbs,
        )]
    }

    fn run(self: Box<Self>, sink: MemberSink) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let (context, namespace) = (self.context.clone(), self.namespace.clone());
            let client = match sink.client(&context) {
                Ok(client) => client,
                Err(error) => {
                    tracing::error!(cluster = %context, error = %error,
                        "ClusterProfiles cannot be read, so no member joins from them");
                    return;
                }
            };
            let api: Api<DynamicObject> =
                Api::namespaced_with(client, &namespace, &profile::resource());
            let mut config = watcher::Config::default();
            if let Some(selector) = &self.selector {
                config = config.labels(selector);
            }
            let mut events = watcher(api, config).default_backoff().boxed();
            let mut profiles = Profiles::new(*self, sink);
            let mut failing: Option<String> = None;
            loop {
                tokio::select! {
                    event = events.next() => match event {
                        Some(Ok(event)) => {
                            if !matches!(event, Event::Init) && failing.take().is_some() {
                                tracing::info!(cluster = %context, %namespace, "watching ClusterProfiles again");
                            }
                            profiles.event(event).await;
                        }
                        Some(Err(error)) => {
                            let problem = chain(&error);
                            if failing.as_ref() != Some(&problem) {
                                tracing::warn!(cluster = %context, %namespace, %problem,
                                    "watching ClusterProfiles failed; retrying with backoff");
                                failing = Some(problem);
                            }
                        }
                        None => return,
                    },
                    member = profiles.sink.reload_requested() => profiles.reload(&member).await,
                    Some((member, outcome)) = profiles.leaves.next(), if !profiles.leaves.is_empty() => {
                        if let LeaveOutcome::Abandoned(reason) = outcome {
                            tracing::warn!(cluster = %member, %reason,
                                "member of a deleted ClusterProfile left with its children abandoned");
                        }
                    }
                }
            }
        })
    }
}

/// A profile, and what was last reported of its member.
struct Tracked {
    member: String,
    object: DynamicObject,
    /// The fingerprint of the kubeconfig last joined.
    joined: Option<u64>,
    /// The problem last reported since then.
    reported: Option<String>,
}

/// The provider's state.
struct Profiles {
    provider: ClusterProfiles,
    sink: MemberSink,
    /// Profile name -> its member.
    profiles: BTreeMap<String, Tracked>,
    /// Member name -> the profile giving it.
    owners: BTreeMap<String, String>,
    /// The profiles listed since the watch (re)started, until the list is complete.
    relisted: BTreeSet<String>,
    /// Profiles ignored because another profile has their member name, as last seen.
    clashes: BTreeMap<String, DynamicObject>,
    leaves: FuturesUnordered<BoxFuture<'static, (String, LeaveOutcome)>>,
    listed: bool,
}

impl Profiles {
    fn new(provider: ClusterProfiles, sink: MemberSink) -> Self {
        Self {
            provider,
            sink,
            profiles: BTreeMap::new(),
            owners: BTreeMap::new(),
            relisted: BTreeSet::new(),
            clashes: BTreeMap::new(),
            leaves: FuturesUnordered::new(),
            listed: false,
        }
    }

    async fn event(&mut self, event: Event<DynamicObject>) {
        match event {
            Event::Init => self.relisted.clear(),
            Event::InitApply(object) => {
                self.relisted.insert(object.name_any());
                self.apply(object).await;
            }
            Event::InitDone => {
                let listed = std::mem::take(&mut self.relisted);
                let missing: Vec<String> = (self.profiles.keys())
                    .filter(|p| !listed.contains(*p))
                    .cloned()
                    .collect();
                for profile in missing {
                    self.gone(&profile).await;
                }
                self.clashes.retain(|profile, _| listed.contains(profile));
                if !std::mem::replace(&mut self.listed, true) {
                    self.sink.listed().await;
                }
            }
            Event::Apply(object) => self.apply(object).await,
            Event::Delete(object) => self.gone(&object.name_any()).await,
        }
    }

    /// A profile was added or changed.
    async fn apply(&mut self, object: DynamicObject) {
        let name = object.name_any();
        let member = member_name(&self.provider.namespace, &name);
        if let Some(owner) = self.owners.get(&member).filter(|o| **o != name) {
            if self.clashes.insert(name.clone(), object).is_none() {
                let namespace = &self.provider.namespace;
                tracing::warn!(cluster = %member, profile = %name, %owner,
                    "ClusterProfiles {namespace}/{owner} and {namespace}/{name} give one member name; \
                     {name} is ignored");
            }
            return;
        }
        self.owners.insert(member.clone(), name.clone());
        match self.profiles.get_mut(&name) {
            Some(tracked) => tracked.object = object,
            None => {
                let tracked = Tracked {
                    member,
                    object,
                    joined: None,
                    reported: None,
                };
                self.profiles.insert(name.clone(), tracked);
            }
        }
        self.handle(&name).await;
    }

    /// Joins `profile`'s member, joins it again with what changed, or reports why it cannot.
    async fn handle(&mut self, profile: &str) {
        let namespace = self.provider.namespace.clone();
        let Some(tracked) = self.profiles.get_mut(profile) else {
            return;
        };
        let member = tracked.member.clone();
        let kubeconfig = Profile::of(&tracked.object).and_then(|read| match read.unhealthy {
            Some(unhealthy) => Err(unhealthy),
            None => {
                let allowlist = self.sink.kubeconfig_allowlist();
                self.provider
                    .access
                    .kubeconfig(&member, &read.offered, allowlist)
            }
        });
        let problem = match kubeconfig {
            Err(problem) => problem,
            Ok(kubeconfig) => {
                let print = fingerprint(&kubeconfig);
                if tracked.joined == Some(print) && tracked.reported.is_none() {
                    return; // Nothing that reaches it changed (a condition's time, a property).
                }
                // Its cluster came through the allowlist; its user is the operator's own plugin.
                match trusted_config_of(kubeconfig, &member).await {
                    Ok(config) => {
                        tracing::debug!(cluster = %member, %profile, "member from ClusterProfile");
                        self.sink.join(&member, config).await;
                        (tracked.joined, tracked.reported) = (Some(print), None);
                        return;
                    }
                    Err(problem) => problem,
                }
            }
        };
        let reason = format!("ClusterProfile {namespace}/{profile}: {problem}");
        if tracked.reported.as_ref() != Some(&reason) {
            self.sink.unhealthy(&member, reason.clone()).await;
            tracked.reported = Some(reason);
        }
    }

    /// The manager asks for `member`'s credentials again (its server rejected them): it joins again.
    async fn reload(&mut self, member: &str) {
        if let Some(profile) = self.owners.get(member).cloned() {
            if let Some(tracked) = self.profiles.get_mut(&profile) {
                tracked.joined = None;
            }
            self.handle(&profile).await;
        }
    }

    /// The profile is gone (deleted, no longer selected, or missing from a relist): its member leaves.
    async fn gone(&mut self, profile: &str) {
        if self.clashes.remove(profile).is_some() {
            return;
        }
        let Some(tracked) = self.profiles.remove(profile) else {
            return;
        };
        self.owners.remove(&tracked.member);
        let member = tracked.member;
        tracing::debug!(cluster = %member, %profile, "member's ClusterProfile is gone; leaving");
        let left = self.sink.leave_started(&member).await;
        let leaving = member.clone();
        self.leaves
            .push(Box::pin(async move { (leaving, left.await) }));
        // A profile ignored for this name takes it now.
        let waiting: Vec<String> = (self.clashes.keys())
            .filter(|p| member_name(&self.provider.namespace, p) == member)
            .cloned()
            .collect();
        for name in waiting {
            if let Some(object) = self.clashes.remove(&name) {
                Box::pin(self.apply(object)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests;
