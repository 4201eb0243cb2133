//! Members from sig-multicluster's Cluster Inventory API: every ClusterProfile in one namespace of a fixed
//! context is a member, reached through the exec credential plugin the consumer's access-providers file
//! names for an access provider the profile offers.

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use kube::api::Api;
use kube::core::DynamicObject;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};

use crate::core::{chain, watch_failure_label};
use crate::executor::RetryBackoff;
use crate::members::changes::LeaveOutcome;
use crate::members::provider::{MemberProvider, MemberSink};

mod access;
mod conditions;
mod member_name;
mod profile;
mod profiles;
mod served;

pub use access::{AccessProviders, AccessProvidersError};
pub use conditions::JoinCondition;
use conditions::JoinConditions;
use profile::Version;
use profiles::Profiles;
use served::served_version;

/// Members from ClusterProfiles (`multicluster.x-k8s.io`, sig-multicluster's Cluster Inventory API, as
/// Open Cluster Management, KubeFleet and GKE Fleet publish them): every ClusterProfile in one namespace of
/// a fixed context (optionally matching a label selector, e.g.
/// `x-k8s.io/cluster-manager=open-cluster-management`) is a member.
///
/// - The profiles are read in `v1alpha2` when the API server serves it, else in `v1alpha1` (asked by one
///   discovery request when the watch starts, and again after it fails).
/// - Profiles with one `multicluster.x-k8s.io/inventory-member-id` label value (one cluster published by
///   several cluster managers) are one member, named after that value; it joins through the profile it
///   joined with while that one reaches the cluster, else the first by name that does.
/// - Its credentials come from an exec plugin: the first provider of the [`AccessProviders`] file that the
///   profile's `status.accessProviders` offers (in `v1alpha1` also the deprecated
///   `status.credentialProviders`; `accessProviders` wins on a name both have). The offer's `cluster` gives the server and TLS
///   settings, read as a member kubeconfig's cluster is (one naming a file, a proxy or
///   `insecure-skip-tls-verify`, unless allowed, is refused; docs/fleets.md); kube runs the plugin,
///   never interactively, and runs it again when the server rejects its token (401) or before the
///   token's `expirationTimestamp`.
/// - It joins once its `ControlPlaneHealthy` condition is `True` and its `Joined` condition, where the
///   producer writes one, is too ([`join_condition`](Self::join_condition) changes which conditions a
///   join waits for). A member whose profile turns unhealthy
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
///   when that is no DNS label; see docs/fleets.md), or its namespace and member id.
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
    conditions: JoinConditions,
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
            conditions: JoinConditions::default(),
        }
    }

    /// What the profiles' condition `type_` means for a join: e.g. `join_condition("Joined",
    /// JoinCondition::Required)` for a producer that always writes `Joined`, or
    /// `join_condition("ControlPlaneHealthy", JoinCondition::Ignored)` to join every profile offering
    /// access. Checked in the order set, the defaults first.
    pub fn join_condition(mut self, type_: impl Into<String>, rule: JoinCondition) -> Self {
        self.conditions.set(type_.into(), rule);
        self
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
        let resource = profile::resource(Version::V1alpha2);
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
            let mut config = watcher::Config::default();
            if let Some(selector) = &self.selector {
                config = config.labels(selector);
            }
            let watch = |version: Version| -> BoxStream<'static, _> {
                let resource = profile::resource(version);
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), &namespace, &resource);
                watcher(api, config.clone()).default_backoff().boxed()
            };
            let read = (self.namespace, self.access, self.conditions);
            let mut profiles = Profiles::new(read, sink, Version::V1alpha2);
            // The version watched and its events; none while no version can be read.
            let mut watching: Option<(Version, BoxStream<'static, _>)> = None;
            let mut retry = RetryBackoff::default();
            let mut failing: Option<String> = None;
            loop {
                if watching.is_none() {
                    match served_version(&client).await {
                        Ok(version) => {
                            tracing::info!(cluster = %context, %namespace, version = version.as_str(),
                                "watching ClusterProfiles");
                            profiles.read_in(version);
                            watching = Some((version, watch(version)));
                            retry.reset();
                        }
                        Err(problem) => {
                            if failing.as_ref() != Some(&problem) {
                                tracing::warn!(cluster = %context, %namespace, %problem,
                                    "ClusterProfiles cannot be watched; retrying with backoff");
                                failing = Some(problem);
                            }
                        }
                    }
                }
                let retry_after = watching.is_none().then(|| retry.next_delay());
                tokio::select! {
                    event = async { watching.as_mut().expect("watching").1.next().await },
                        if watching.is_some() => match event
                    {
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
                            // A version no longer served: the CRD may serve another now. Other
                            // failures are the watcher's to retry.
                            let watched = watching.as_ref().map(|(version, _)| *version);
                            if watch_failure_label(&error) == "not_served"
                                && served_version(&client).await.is_ok_and(|v| Some(v) != watched)
                            {
                                watching = None;
                            }
                        }
                        None => return,
                    },
                    () = tokio::time::sleep(retry_after.unwrap_or_default()), if retry_after.is_some() => {}
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

#[cfg(test)]
mod tests;
