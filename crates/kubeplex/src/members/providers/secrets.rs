//! Members from kubeconfig Secrets in a fixed context: one Secret, one member. The way a platform team
//! registers clusters (and Cluster API stores them).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Resource, ResourceExt};

use super::kubeconfig::{config_from_kubeconfig, kubeconfig_in};
use crate::core::chain;
use crate::members::changes::LeaveOutcome;
use crate::members::provider::{LeavePolicy, MemberProvider, MemberSink};

/// The label naming the member a Secret gives (default of [`KubeconfigSecrets::name_label`]); without
/// it the member is named as the Secret.
pub const MEMBER_NAME_LABEL: &str = "kubeplex.io/member";

use retries::Retries;

/// The data key holding the kubeconfig unless [`KubeconfigSecrets::key`] says otherwise.
const DEFAULT_KEY: &str = "kubeconfig";

/// Members from kubeconfig Secrets: every Secret in one namespace of a fixed context that matches a label
/// selector is a member, reached with the kubeconfig in its data.
///
/// ```yaml
/// apiVersion: v1
/// kind: Secret
/// metadata:
///   name: cluster-c-kubeconfig
///   namespace: fleet-system
///   labels:
///     fleet.example.com/cluster: "true"   # what the label selector matches
///     kubeplex.io/member: cluster-c       # the member's name; without it, the Secret's name
/// stringData:
///   kubeconfig: |                         # the key: `kubeconfig`, or the one `.key(..)` names
///     apiVersion: v1
///     kind: Config
///     current-context: cluster-c          # or the kubeconfig's only context
///     contexts: [{ name: cluster-c, context: { cluster: cluster-c, user: operator } }]
///     clusters: [{ name: cluster-c, cluster: { server: "https://10.0.0.7:6443", certificate-authority-data: "…" } }]
///     users: [{ name: operator, user: { token: "…" } }]
/// ```
///
/// - A Secret that appears (or is found when the watch lists) joins its member; a change of its
///   kubeconfig joins it again with the new credentials (its client is rebuilt, its watches list again);
///   a Secret deleted, or no longer matching the selector, makes the member leave. A member whose server
///   rejects its credentials (401) is read again from its Secret and joins again, changed or not.
/// - A Secret without the key, or whose kubeconfig is not UTF-8 or cannot be used, makes its member
///   unhealthy with the reason (one that had joined keeps its client). A kubeconfig may hold its
///   credentials inline only: one that names a local file, runs a command (`exec`, unless
///   [`Manager::member_exec_commands`](crate::Manager::member_exec_commands) lists it), or sets a proxy
///   or `insecure-skip-tls-verify` is refused, naming the field (docs/fleets.md). Whoever may write these
///   Secrets may add members and choose their credentials: it is the fleet's administration. Two Secrets naming one member: the
///   first keeps it, and the member is unhealthy, naming both, until one of them goes.
/// - Under [`LeavePolicy::Delete`] each member's Secret carries
///   [`MEMBER_FINALIZER`](crate::members::MEMBER_FINALIZER): deleting the Secret makes the member leave, its children
///   are deleted with the credentials still there, then the finalizer is removed and the Secret goes.
///
/// It needs `get`, `list` and `watch` on Secrets in the namespace, and `patch` for the finalizer.
///
/// ```no_run
/// # kubeplex::contexts! { pub enum Fleet { Control = "control" } }
/// use kubeplex::{members::KubeconfigSecrets, members::LeavePolicy, Manager};
/// let secrets = KubeconfigSecrets::new(Fleet::Control, "fleet-system", "fleet.example.com/cluster=true");
/// let manager = Manager::new().members(secrets, LeavePolicy::Delete);
/// // Or Cluster API's `<cluster>-kubeconfig` Secrets, one member per cluster.
/// let capi = KubeconfigSecrets::cluster_api(Fleet::Control, "fleet-system");
/// ```
#[derive(Clone, Debug)]
pub struct KubeconfigSecrets {
    context: String,
    namespace: String,
    selector: String,
    key: String,
    name_label: String,
    /// A field selector too (Cluster API's Secret type).
    fields: Option<String>,
    /// A Secret counts only when named `<member><suffix>` (Cluster API's `<cluster>-kubeconfig`).
    name_suffix: Option<String>,
}

impl KubeconfigSecrets {
    /// Members from the Secrets in `namespace` of `context` that match `label_selector` (e.g.
    /// `fleet.example.com/cluster=true`).
    pub fn new(
        context: impl crate::core::Context,
        namespace: impl Into<String>,
        label_selector: impl Into<String>,
    ) -> Self {
        Self {
            context: context.name().to_owned(),
            namespace: namespace.into(),
            selector: label_selector.into(),
            key: DEFAULT_KEY.to_owned(),
            name_label: MEMBER_NAME_LABEL.to_owned(),
            fields: None,
            name_suffix: None,
        }
    }

    /// The data key holding the kubeconfig (default `kubeconfig`; Cluster API's Secrets use `value`).
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = key.into();
        self
    }

    /// The label naming a Secret's member (default [`MEMBER_NAME_LABEL`]); a Secret without it names its
    /// member by its own name.
    pub fn name_label(mut self, label: impl Into<String>) -> Self {
        self.name_label = label.into();
        self
    }
}

impl MemberProvider for KubeconfigSecrets {
    fn contexts(&self) -> Vec<String> {
        vec![self.context.clone()]
    }

    /// The Secrets are watched, and read and patched for the finalizer; an abandoned member's Secret gets
    /// an Event.
    fn grants(&self) -> Vec<crate::core::Grant> {
        let (context, namespace) = (Some(self.context.as_str()), Some(self.namespace.as_str()));
        let verbs = ["get", "list", "watch", "patch"];
        vec![
            crate::core::Grant::new(context, namespace, "", "secrets", &verbs),
            crate::core::events_grant(context, namespace),
        ]
    }

    fn run(self: Box<Self>, sink: MemberSink) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let client = match sink.client(&self.context) {
                Ok(client) => client,
                Err(error) => {
                    tracing::error!(cluster = %self.context, error = %error,
                        "kubeconfig Secrets cannot be read, so no member joins from them");
                    return;
                }
            };
            let api: Api<Secret> = Api::namespaced(client, &self.namespace);
            let mut config = watcher::Config::default().labels(&self.selector);
            if let Some(fields) = &self.fields {
                config = config.fields(fields);
            }
            let mut events = watcher(api.clone(), config).default_backoff().boxed();
            let mut secrets = Secrets::new(*self, api, sink);
            let mut failing: Option<String> = None;
            loop {
                // A deadline, not a delay per turn of the loop: a busy watch does not put the retries off.
                let due = secrets.retries.next_due();
                tokio::select! {
                    event = events.next() => match event {
                        Some(Ok(event)) => {
                            // `Init` precedes every retry of a failing watch too: only an object is progress.
                            if !matches!(event, Event::Init) && failing.take().is_some() {
                                let KubeconfigSecrets { context, namespace, .. } = &secrets.provider;
                                tracing::info!(cluster = %context, %namespace, "watching kubeconfig Secrets again");
                            }
                            secrets.event(event).await;
                        }
                        Some(Err(error)) => {
                            let problem = chain(&error);
                            if failing.as_ref() != Some(&problem) {
                                let KubeconfigSecrets { context, namespace, .. } = &secrets.provider;
                                tracing::warn!(cluster = %context, %namespace, %problem,
                                    "watching kubeconfig Secrets failed; retrying with backoff");
                                failing = Some(problem);
                            }
                        }
                        None => return,
                    },
                    member = secrets.sink.reload_requested() => secrets.reload(&member),
                    Some((secret, member, outcome)) = secrets.leaves.next(), if !secrets.leaves.is_empty() => {
                        secrets.left(secret, member, outcome).await;
                    }
                    _ = tokio::time::sleep_until(due.unwrap_or_else(tokio::time::Instant::now)), if due.is_some() => {
                        let again = secrets.retries.take_due();
                        secrets.revisit.extend(again);
                    }
                }
                secrets.revisit().await;
            }
        })
    }
}

/// The member a Secret gives, as last reported.
#[derive(Default)]
struct Owned {
    secret: String,
    /// The fingerprint of the kubeconfig last joined.
    joined: Option<u64>,
    /// The problem last reported since that join.
    reported: Option<String>,
}

/// The provider's state: what each Secret names and what was reported.
struct Secrets {
    provider: KubeconfigSecrets,
    api: Api<Secret>,
    sink: MemberSink,
    /// Member name -> the Secret giving it.
    members: BTreeMap<String, Owned>,
    /// Every Secret seen -> the member it names (the owner's, or another one naming the same member).
    secrets: BTreeMap<String, String>,
    /// The Secrets listed since the watch (re)started, until the list is complete.
    relisted: BTreeSet<String>,
    /// Secrets being deleted whose member has left.
    released: BTreeSet<String>,
    /// Secrets to read again and handle now (a conflict ended, a retry is due).
    revisit: VecDeque<String>,
    /// Secrets whose handling failed, to handle again with backoff.
    retries: Retries,
    /// The leaves under way, each resolving with its Secret, its member and how it ended: none waits for
    /// another, and a Secret's finalizer goes when its own member has left.
    leaves: FuturesUnordered<BoxFuture<'static, (String, String, LeaveOutcome)>>,
    /// The Secrets whose member's leave is under way.
    leaving: BTreeSet<String>,
    /// Whether the manager was told that every member listed at the start is reported.
    listed: bool,
}

impl Secrets {
    fn new(provider: KubeconfigSecrets, api: Api<Secret>, sink: MemberSink) -> Self {
        Self {
            provider,
            api,
            sink,
            members: BTreeMap::new(),
            secrets: BTreeMap::new(),
            relisted: BTreeSet::new(),
            released: BTreeSet::new(),
            revisit: VecDeque::new(),
            retries: Retries::default(),
            leaves: FuturesUnordered::new(),
            leaving: BTreeSet::new(),
            listed: false,
        }
    }

    async fn event(&mut self, event: Event<Secret>) {
        match event {
            Event::Init => self.relisted.clear(),
            Event::InitApply(secret) => {
                self.relisted.insert(secret.name_any());
                match self.provider.takes(&secret) {
                    true => self.apply(secret).await,
                    false => self.unselected(secret).await,
                }
            }
            Event::InitDone => {
                let listed = std::mem::take(&mut self.relisted);
                let seen = self.secrets.keys();
                let missing: Vec<String> = seen.filter(|s| !listed.contains(*s)).cloned().collect();
                for secret in missing {
                    self.gone(&secret).await;
                }
                if !std::mem::replace(&mut self.listed, true) {
                    self.sink.listed().await;
                }
            }
            Event::Apply(secret) if self.provider.takes(&secret) => self.apply(secret).await,
            Event::Apply(secret) | Event::Delete(secret) => self.unselected(secret).await,
        }
    }

    /// A Secret deleted, or not (or no longer) selected.
    async fn unselected(&mut self, secret: Secret) {
        self.gone(&secret.name_any()).await;
        // Still there but no longer selected: it holds no member's credentials now.
        if secret.meta().deletion_timestamp.is_none() {
            self.set_finalizer(&secret, false).await;
        }
    }

    /// A Secret was added or changed (or is looked at again).
    async fn apply(&mut self, secret: Secret) {
        let name = secret.name_any();
        let member = match secret.labels().get(&self.provider.name_label) {
            Some(label) if !label.is_empty() => label.clone(),
            _ => name.clone(),
        };
        if self.secrets.get(&name).is_some_and(|m| *m != member) {
            self.gone(&name).await; // Relabelled: its former member goes first.
        }
        self.secrets.insert(name.clone(), member.clone());
        let owner = self.members.get(&member).map(|o| o.secret.clone());
        let deleting = secret.meta().deletion_timestamp.is_some();
        if let Some(owner) = owner.filter(|o| *o != name) {
            let reason = both(&self.provider.namespace, &member, &owner, &name);
            return match deleting {
                true => self.set_finalizer(&secret, false).await,
                false => self.report(&member, Some(reason)).await,
            };
        }
        if deleting {
            return self.release(&secret, &member).await;
        }
        match self.sink.leave_policy() {
            LeavePolicy::Delete => self.set_finalizer(&secret, true).await,
            LeavePolicy::Orphan => self.handled(&name),
        }
        let owned = self.members.entry(member.clone()).or_default();
        owned.secret.clone_from(&name);
        let (joined, reported) = (owned.joined, owned.reported.clone());
        let other = self
            .secrets
            .iter()
            .find(|(s, m)| **m == member && **s != name);
        let conflict = other.map(|(s, _)| both(&self.provider.namespace, &member, &name, s));
        let found = kubeconfig_in(secret.data.as_ref(), &self.provider.key)
            .map_err(|reason| format!("{}: {reason}", self.secret_name(&name)));
        let problem = match found {
            Err(reason) => Some(reason),
            // Joined with these bytes, and nothing reported since but the conflict that still stands.
            Ok((print, _)) if joined == Some(print) && reported == conflict => conflict,
            Ok((print, text)) => {
                match config_from_kubeconfig(text, None, self.sink.kubeconfig_allowlist()).await {
                    Ok(config) => {
                        tracing::debug!(cluster = %member, secret = %name, "member from kubeconfig Secret");
                        self.sink.join(&member, config).await;
                        let owned = self.members.get_mut(&member).expect("inserted above");
                        (owned.joined, owned.reported) = (Some(print), None);
                        conflict
                    }
                    Err(reason) => Some(format!("{}: {reason}", self.secret_name(&name))),
                }
            }
        };
        self.report(&member, problem).await;
    }

    /// The manager asks for `member`'s credentials again (its server rejected them): the Secret giving it
    /// is read now, and it joins from it even unchanged (or is unhealthy, or leaves if the Secret is gone).
    fn reload(&mut self, member: &str) {
        if let Some(owned) = self.members.get_mut(member) {
            owned.joined = None; // What makes `apply` join again.
            self.revisit.push_back(owned.secret.clone());
        }
    }

    /// The Secret is gone (deleted, no longer selected, missing from a relist, or names another member).
    async fn gone(&mut self, secret: &str) {
        self.released.remove(secret);
        self.retries.forget(secret);
        let Some(member) = self.secrets.remove(secret) else {
            return;
        };
        match self.members.get(&member) {
            Some(owned) if owned.secret == secret => {
                self.members.remove(&member);
                tracing::debug!(cluster = %member, %secret, "member's Secret is gone; leaving");
                self.start_leave(&member, secret).await;
            }
            // Its conflict with the owner ended.
            Some(owned) => self.revisit.push_back(owned.secret.clone()),
            None => {}
        }
    }

    /// Reads again the other Secrets naming `member`: one of them takes it over.
    fn revisit_others(&mut self, member: &str, except: &str) {
        let others = self
            .secrets
            .iter()
            .filter(|(s, m)| *m == member && *s != except);
        self.revisit.extend(others.map(|(s, _)| s.clone()));
    }

    /// Handles the Secrets to look at again, as they are now.
    async fn revisit(&mut self) {
        while let Some(name) = self.revisit.pop_front() {
            match self.api.get_opt(&name).await {
                Ok(Some(secret)) if self.secrets.contains_key(&name) => self.apply(secret).await,
                // Not (or no longer) selected as the watch last said: only a finalizer left to remove.
                Ok(Some(secret)) if secret.meta().deletion_timestamp.is_none() => {
                    self.set_finalizer(&secret, false).await;
                }
                Ok(Some(_)) => self.retries.forget(&name),
                Ok(None) => self.gone(&name).await,
                Err(error) => self.failed(&name, "reading the Secret failed", &chain(&error)),
            }
        }
    }

    /// Reports `problem` for `member` unless it was the last thing reported.
    async fn report(&mut self, member: &str, problem: Option<String>) {
        if let Some(owned) = self.members.get_mut(member)
            && let Some(reason) = problem.as_ref().filter(|_| owned.reported != problem)
        {
            self.sink.unhealthy(member, reason.clone()).await;
            owned.reported = problem;
        }
    }

    fn secret_name(&self, secret: &str) -> String {
        format!("Secret {}/{secret}", self.provider.namespace)
    }
}

/// Why a member named by two Secrets is unhealthy.
fn both(namespace: &str, member: &str, owner: &str, other: &str) -> String {
    format!(
        "Secrets {namespace}/{owner} and {namespace}/{other} both name member {member}; {namespace}/{other} is ignored"
    )
}

mod cluster_api;
mod handling;
mod leaves;
mod retries;
#[cfg(test)]
mod tests;
