//! Member providers: where a fleet's members come from. A provider reports joins, credential changes,
//! problems and leaves through a [`MemberSink`]; the manager turns them into clients, watches and
//! children. kubeplex ships three (kubeconfig Secrets, a kubeconfig file or directory, and [`Members`]
//! for your own inventory); implement [`MemberProvider`] for others (docs/fleets.md).

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::Client;
use tokio::sync::{mpsc, oneshot};

use super::changes::LeaveOutcome;
use super::kubeconfig_allowlist::KubeconfigAllowlist;
use crate::core::Result;

/// What happens to a leaving member's children.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeavePolicy {
    /// The children stay in the cluster, unmanaged; each parent's status records that the member left
    /// with its children orphaned.
    Orphan,
    /// The children are deleted before the member's client is dropped (a provider that can, like the
    /// Secret provider, keeps the member's credentials until then).
    Delete,
}

/// A change a provider reports.
pub(crate) enum Command {
    Join {
        name: String,
        config: Box<kube::Config>,
    },
    Unhealthy {
        name: String,
        reason: String,
    },
    Leave {
        name: String,
        done: oneshot::Sender<LeaveOutcome>,
    },
    /// The provider has reported every member it had when it started.
    Listed,
}

/// A fixed context's client, as the manager's pool has it.
pub(crate) type FixedClients = Arc<dyn Fn(&str) -> Result<Client> + Send + Sync>;

/// How a provider reports its members to the manager. Cloneable; every call waits while the manager is
/// busy with earlier changes (the channel is bounded).
#[derive(Clone)]
pub struct MemberSink {
    commands: mpsc::Sender<Command>,
    clients: FixedClients,
    policy: LeavePolicy,
    /// What a member kubeconfig may contain (the shipped providers read every one through it).
    allowlist: Arc<KubeconfigAllowlist>,
    /// The members whose credentials the manager wants read again (their server rejected them).
    reloads: Arc<tokio::sync::Mutex<Option<mpsc::Receiver<String>>>>,
}

impl MemberSink {
    pub(crate) fn new(
        commands: mpsc::Sender<Command>,
        clients: FixedClients,
        policy: LeavePolicy,
    ) -> Self {
        Self {
            commands,
            clients,
            policy,
            allowlist: Arc::default(),
            reloads: Arc::default(),
        }
    }

    /// The sink, with member kubeconfigs read through `allowlist` (the strict default otherwise).
    pub(crate) fn with_allowlist(self, allowlist: KubeconfigAllowlist) -> Self {
        Self {
            allowlist: Arc::new(allowlist),
            ..self
        }
    }

    /// What a member kubeconfig may contain, as the manager was told.
    pub(crate) fn kubeconfig_allowlist(&self) -> &KubeconfigAllowlist {
        &self.allowlist
    }

    /// The sink, with the manager's requests to read members' credentials again coming from `reloads`.
    pub(crate) fn with_reloads(self, reloads: mpsc::Receiver<String>) -> Self {
        Self {
            reloads: Arc::new(tokio::sync::Mutex::new(Some(reloads))),
            ..self
        }
    }

    /// Resolves with the name of a member whose server rejected its credentials (401): a provider that can
    /// read them again (a Secret, a file) should, and report the member with [`join`](Self::join) even if
    /// they are unchanged; the manager then reconnects once, and reports `credentials were rejected` in
    /// `/readyz` if they still are. Never resolves for a manager that asks for no reloads.
    pub async fn reload_requested(&self) -> String {
        let mut reloads = self.reloads.lock().await;
        match reloads.as_mut() {
            Some(reloads) => match reloads.recv().await {
                Some(name) => name,
                None => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    }

    /// What the manager does with a leaving member's children: a provider that can keep a member's
    /// credentials until they are deleted (a finalizer on its Secret) does so under [`LeavePolicy::Delete`].
    pub fn leave_policy(&self) -> LeavePolicy {
        self.policy
    }

    /// `name` is a member, reached with `config`: it joins, or, when it is one already, its client is
    /// rebuilt with the new credentials and its watches list again (nothing is missed). When its
    /// credentials cannot be had for a cause that may pass (an exec plugin that failed), the manager tries
    /// again by itself, with backoff, until it succeeds or a newer change of the member replaces it.
    pub async fn join(&self, name: &str, config: kube::Config) {
        let config = Box::new(config);
        let name = name.to_owned();
        let _ = self.commands.send(Command::Join { name, config }).await;
    }

    /// `name` cannot be used: `reason` shows in `/readyz` and the logs; it never holds back the others.
    /// A member that was joined keeps its watches and children until it leaves.
    pub async fn unhealthy(&self, name: &str, reason: impl Into<String>) {
        let (name, reason) = (name.to_owned(), reason.into());
        let _ = self
            .commands
            .send(Command::Unhealthy { name, reason })
            .await;
    }

    /// `name` leaves the fleet; returns once the leave policy is carried out (its children deleted or
    /// orphaned, its watches stopped and caches freed), or given up on (a member that does not answer
    /// under [`LeavePolicy::Delete`], past the manager's `abandon_unreachable_members_after`). Leaves of
    /// different members run side by side: a provider that must not wait for one calls this from a task
    /// of its own, or uses [`leave_started`](Self::leave_started).
    pub async fn leave(&self, name: &str) -> LeaveOutcome {
        self.leave_started(name).await.await
    }

    /// Reports that `name` leaves the fleet and returns at once (once the manager has taken the change),
    /// with what resolves when the leave ends, as [`leave`](Self::leave) would.
    pub async fn leave_started(
        &self,
        name: &str,
    ) -> impl Future<Output = LeaveOutcome> + Send + 'static {
        let (done, finished) = oneshot::channel();
        let name = name.to_owned();
        let sent = self.commands.send(Command::Leave { name, done }).await;
        async move {
            match sent {
                Ok(()) => finished.await.unwrap_or(LeaveOutcome::Done),
                Err(_) => LeaveOutcome::Done,
            }
        }
    }

    /// Every member the provider had when it started is reported (joined, or reported unhealthy): until
    /// then a parent being deleted keeps its finalizer, since a member not yet reported may hold its
    /// children. A provider that never says so is taken at its word after a minute.
    pub async fn listed(&self) {
        let _ = self.commands.send(Command::Listed).await;
    }

    /// The client of one of the manager's fixed contexts (one a provider reads from, like the control
    /// cluster holding kubeconfig Secrets; declare it with [`MemberProvider::contexts`]). Fails with
    /// [`Error::UndeclaredContext`](crate::Error::UndeclaredContext) for a context nothing declared, and
    /// [`Error::ClientConfig`](crate::Error::ClientConfig) for one whose client could not be configured.
    pub fn client(&self, context: &str) -> Result<Client> {
        (self.clients)(context)
    }
}

/// A source of members. The manager runs it once, for as long as it runs.
pub trait MemberProvider: Send + 'static {
    /// The fixed contexts the provider reads from: the manager connects them even when no controller
    /// declares them.
    fn contexts(&self) -> Vec<String> {
        Vec::new()
    }

    /// What the provider itself reads and writes in its fixed contexts, for
    /// [`Manager::rbac`](crate::Manager::rbac) (e.g. the kubeconfig Secrets it watches); nothing by default.
    fn grants(&self) -> Vec<crate::core::Grant> {
        Vec::new()
    }

    /// Reports members to `sink` until the manager stops (the future is dropped then).
    fn run(self: Box<Self>, sink: MemberSink) -> BoxFuture<'static, ()>;
}

/// Members from your own inventory: a handle to add and remove them while the manager runs.
///
/// ```no_run
/// # async fn doc(config: kube::Config) {
/// use kubeplex::{members::LeavePolicy, Manager, members::Members};
/// let members = Members::new();
/// let manager = Manager::new().members(members.clone(), LeavePolicy::Delete);
/// // ... later, from your inventory:
/// members.add("cluster-c", config).await;
/// members.remove("cluster-c").await;
/// # }
/// ```
#[derive(Clone)]
pub struct Members {
    edits: mpsc::Sender<Edit>,
    /// The receiving end, until the manager's provider task takes it.
    inbox: Arc<parking_lot::Mutex<Option<mpsc::Receiver<Edit>>>>,
}

/// What the handle asks of the manager.
enum Edit {
    Add(String, Box<kube::Config>),
    Remove(String, oneshot::Sender<()>),
}

impl Members {
    /// A handle with no members yet.
    pub fn new() -> Self {
        let (edits, inbox) = mpsc::channel(64);
        Self {
            edits,
            inbox: Arc::new(parking_lot::Mutex::new(Some(inbox))),
        }
    }

    /// Adds `name`, or replaces its credentials; returns once the manager has taken it.
    pub async fn add(&self, name: &str, config: kube::Config) {
        let edit = Edit::Add(name.to_owned(), Box::new(config));
        let _ = self.edits.send(edit).await;
    }

    /// Removes `name`; returns once the leave policy is carried out.
    pub async fn remove(&self, name: &str) {
        let (done, finished) = oneshot::channel();
        let edit = Edit::Remove(name.to_owned(), done);
        if self.edits.send(edit).await.is_ok() {
            let _ = finished.await;
        }
    }
}

impl Default for Members {
    fn default() -> Self {
        Self::new()
    }
}

impl MemberProvider for Members {
    fn run(self: Box<Self>, sink: MemberSink) -> BoxFuture<'static, ()> {
        let inbox = self.inbox.lock().take();
        Box::pin(async move {
            let Some(mut inbox) = inbox else {
                return; // Given to a second manager: the first one has its edits.
            };
            // The members added before the manager started are its members as it starts.
            while let Ok(edit) = inbox.try_recv() {
                handle(&sink, edit).await;
            }
            sink.listed().await;
            while let Some(edit) = inbox.recv().await {
                handle(&sink, edit).await;
            }
        })
    }
}

/// Carries out one edit of a [`Members`] handle; a removal is answered once the member left, without
/// holding back the edits after it.
async fn handle(sink: &MemberSink, edit: Edit) {
    match edit {
        Edit::Add(name, config) => sink.join(&name, *config).await,
        Edit::Remove(name, done) => {
            let left = sink.leave_started(&name).await;
            tokio::spawn(async move {
                left.await;
                let _ = done.send(());
            });
        }
    }
}
