//! The manager: registers controllers, connects their contexts, runs them, and serves the probes.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexSet;
use kube::config::Kubeconfig;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::registration::{Registered, Registration};
use super::running::Running;
use crate::client::{IN_CLUSTER, KubeconfigSource, PoolConfig};
use crate::controller::Reconcile;
use crate::core::Context;
use crate::core::{Error, Result};
use crate::ha::{Election, LeaderElection, ShardState, Sharding};
use crate::metrics::{Metrics, WebhookMetrics};
use crate::plan::Plan;
use crate::readiness::{DEFAULT_PING_INTERVAL, Readiness, SecureMetrics};
use crate::runtime::Runtime;
use crate::watch::WatchRegistry;
use crate::webhook::Webhooks;

/// Runs controllers across clusters: one client per cluster, shared watches, probes, graceful shutdown.
///
/// ```no_run
/// # use kubeplex::{Controller, Reconcile};
/// # async fn demo<R: Reconcile>(reconciler: R) -> kubeplex::Result<()> {
/// kubeplex::Manager::new()        // the kubeconfig as kubectl finds it
///     .probes("0.0.0.0:8080")     // /startupz /readyz /livez
///     .controller(reconciler)
///     .run()                      // until SIGINT or SIGTERM
///     .await
/// # }
/// ```
#[must_use = "a manager does nothing until it is run"]
pub struct Manager {
    pub(super) pool: PoolConfig,
    pub(super) controllers: Vec<Box<dyn Registration>>,
    optional: BTreeSet<String>,
    pub(super) probes: Option<String>,
    pub(super) secure_metrics: Option<SecureMetrics>,
    pub(super) webhooks: Option<Webhooks>,
    pub(super) registry: prometheus_client::registry::Registry,
    ping_interval: Duration,
    pub(super) election: Option<LeaderElection>,
    pub(super) sharding: Option<Sharding>,
    pub(super) fleet: super::members::options::FleetOptions,
}

impl Default for Manager {
    fn default() -> Self {
        Self::new()
    }
}

impl Manager {
    /// A manager using the kubeconfig as kubectl finds it: `KUBECONFIG` (several files merged), else
    /// `~/.kube/config`.
    pub fn new() -> Self {
        Self {
            pool: PoolConfig::default(),
            controllers: Vec::new(),
            optional: BTreeSet::new(),
            probes: None,
            secure_metrics: None,
            webhooks: None,
            ping_interval: DEFAULT_PING_INTERVAL,
            registry: prometheus_client::registry::Registry::default(),
            election: None,
            sharding: None,
            fleet: Default::default(),
        }
    }

    /// A manager using this kubeconfig instead.
    pub fn with_kubeconfig(kubeconfig: Kubeconfig) -> Self {
        let mut manager = Self::new();
        manager.pool.source = KubeconfigSource::Explicit(Box::new(kubeconfig));
        manager
    }

    /// Uses the kubeconfig context `kubeconfig_context` for `context`.
    ///
    /// Without this, `KUBEPLEX_CONTEXT_<NAME>` (the context's name upper-cased, `-` as `_`) remaps it, else it
    /// uses the kubeconfig context of its own name.
    pub fn context_alias(
        mut self,
        context: impl Context,
        kubeconfig_context: impl Into<String>,
    ) -> Self {
        self.pool
            .aliases
            .insert(context.name().to_owned(), kubeconfig_context.into());
        self
    }

    /// Uses the Pod's service account for `context` (the control cluster, when the operator runs in it).
    pub fn in_cluster(self, context: impl Context) -> Self {
        self.context_alias(context, IN_CLUSTER)
    }

    /// Starts without waiting for `context`: it is reported (degraded) but does not hold back `/startupz`.
    /// Contexts are required by default.
    pub fn optional(mut self, context: impl Context) -> Self {
        self.optional.insert(context.name().to_owned());
        self
    }

    /// How often each cluster's API server is pinged (default [`DEFAULT_PING_INTERVAL`]).
    pub fn ping_interval(mut self, interval: Duration) -> Self {
        self.ping_interval = interval;
        self
    }

    /// How long an exec credential plugin (`users[].user.exec`) may take to answer before it is stopped and
    /// its client build fails (default [`DEFAULT_PLUGIN_TIMEOUT`](crate::client::DEFAULT_PLUGIN_TIMEOUT), 30 s);
    /// for the fixed contexts and the members alike ([docs/fleets.md]).
    ///
    /// [docs/fleets.md]: https://github.com/kubeplex/kubeplex/blob/main/docs/fleets.md#exec-credential-plugins
    pub fn credential_plugin_timeout(mut self, timeout: Duration) -> Self {
        self.pool.plugin_timeout = Some(timeout);
        self
    }

    /// Runs this replica under leader election ([docs/ha.md]): only the holder of the Lease reconciles; a
    /// standby keeps its watches and caches warm and takes over when the holder stops renewing. Every
    /// write of every client passes a fence that closes when a renewal is overdue, before the Lease can
    /// pass to another replica. Requests carry the replica's identity as their `User-Agent`.
    ///
    /// [docs/ha.md]: https://github.com/kubeplex/kubeplex/blob/main/docs/ha.md
    pub fn leader_election(mut self, election: LeaderElection) -> Self {
        self.election = Some(election);
        self
    }

    /// Runs this replica in sharded mode ([docs/ha.md]): the replicas of one group split the parents
    /// between them — by a hash of each parent's namespace/name, or by the context it lives in — each shard
    /// owned by the replica that rendezvous hashing over the live members' Leases names, and fenced by a
    /// Lease of its own: a parent is reconciled only by the holder of its shard, and every write made for
    /// it passes that shard's fence. Sharded by parent, every replica watches every parent (warm caches for
    /// the shards it may take over); sharded by context, a replica watches a context's primaries only while
    /// it holds that shard. Not together with [`leader_election`](Self::leader_election).
    ///
    /// [docs/ha.md]: https://github.com/kubeplex/kubeplex/blob/main/docs/ha.md
    pub fn sharding(mut self, sharding: Sharding) -> Self {
        self.sharding = Some(sharding);
        self
    }

    /// Adds a controller with the plan its attribute generated; its contexts join the startup probe's.
    pub fn controller<R: Reconcile>(self, reconciler: R) -> Self {
        self.controller_with(reconciler, |plan| plan)
    }

    /// Adds a controller whose plan depends on run-time configuration: `configure` gets `R::plan()` once, here,
    /// and returns the plan to run, e.g. `|plan| plan.with_namespaces([ns]).child_namespaces::<Deployment>(list)`
    /// with values from flags ([`Plan`]'s builders replace the attribute's). They are checked when the manager
    /// starts, in the attribute's words ([`Error::InvalidPlan`]).
    pub fn controller_with<R: Reconcile>(
        mut self,
        reconciler: R,
        configure: impl FnOnce(Plan<R::Context>) -> Plan<R::Context>,
    ) -> Self {
        let registered = Registered::new(reconciler, configure);
        self.controllers.push(Box::new(registered));
        self
    }

    /// Connects every context, starts the watches, the controllers and the probe server, and returns at once;
    /// use [`Running::wait_started`] to wait for the contexts.
    ///
    /// Fails only when a controller's plan is invalid, the probe address cannot be bound or no kubeconfig
    /// can be read at all; a context that cannot be configured is reported by [`Running::wait_started`]
    /// and the probes.
    pub async fn start(mut self) -> Result<Running> {
        for registration in &self.controllers {
            registration.check()?;
        }
        let readiness = Arc::new(Readiness::default());
        let metrics = Metrics::register(&mut self.registry);
        let up = readiness.clone();
        metrics.contexts_up(move || {
            let report = up.report();
            let up = |c: &crate::readiness::ClusterReport| {
                c.status == crate::readiness::ClusterReadiness::Ready
            };
            report
                .clusters
                .iter()
                .map(|(name, c)| (name.clone(), up(c)))
                .collect()
        });
        let webhook_metrics =
            (self.webhooks.as_ref()).map(|_| WebhookMetrics::register(&mut self.registry));
        let registry = Arc::new(std::mem::take(&mut self.registry));
        // Every context once, in the order first named.
        let mut contexts: IndexSet<String> =
            self.controllers.iter().flat_map(|r| r.contexts()).collect();
        if let Some((provider, _)) = &self.fleet.provider {
            contexts.extend(provider.contexts());
        }
        if let Some(sharding) = &self.sharding {
            let reason = match &self.election {
                Some(_) => Some("leader election is on as well; choose one of the two".to_owned()),
                None if sharding.by == crate::ha::ShardBy::Context && self.controllers.iter().any(|c| c.primaries_in_members()) => {
                    Some("sharded by context, the primaries watched in members would have no shard; shard by parent".into())
                }
                None => sharding.problem(),
            };
            if let Some(reason) = reason {
                return Err(Error::Sharding {
                    group: sharding.group(),
                    reason,
                });
            }
        }
        let coordination = (self.election.as_ref()).or(self.sharding.as_ref().map(|s| &s.lease));
        if let Some(metrics) = &self.secure_metrics {
            contexts.insert(metrics.context.clone());
        }
        if let Some(context) = self.webhooks.as_ref().and_then(|w| w.context()) {
            contexts.insert(context.to_owned());
        }
        if let Some(election) = coordination {
            if let Some(reason) = election.problem() {
                let lease = election.lease();
                return Err(Error::LeaderElection { lease, reason });
            }
            contexts.insert(election.context.clone());
            self.pool.fence = crate::client::Fence::closed();
            let agent = format!(
                "kubeplex/{} ({})",
                env!("CARGO_PKG_VERSION"),
                election.identity
            );
            self.pool.user_agent.get_or_insert(agent);
        }
        let contexts = Vec::from_iter(contexts);
        for context in &contexts {
            readiness.declare_fixed(context, !self.optional.contains(context));
        }
        let mut background = JoinSet::new();
        let probes = self.probes.as_deref();
        let secure = self.secure_metrics.as_ref();
        let servers =
            super::servers::Servers::bind(probes, secure, &readiness, registry, &mut background);
        let mut servers = servers.await?;
        servers
            .bind_webhooks(self.webhooks.as_ref(), webhook_metrics)
            .await?;
        let probe_address = servers.probe_address;

        let (pool, errors) = match self.pool.connect(&contexts).await {
            Ok(connected) => connected,
            Err(error) => {
                // Without a kubeconfig no context can work: report it for each, and fail.
                for context in &contexts {
                    readiness.connected(context, Some(&error));
                }
                return Err(error);
            }
        };
        for context in &contexts {
            let error = errors
                .iter()
                .find(|e| error_context(e) == Some(context.as_str()));
            // A required context's error is returned by `wait_started` (and `run`), for the caller to report
            // once; an optional one's is only in the probes, so it is logged here.
            if let Some(error) = error
                && self.optional.contains(context)
            {
                tracing::warn!(cluster = %context, %error, "optional context cannot be used");
            }
            readiness.connected(context, error);
        }
        let primary_contexts = super::registration::primary_contexts(&self.controllers);
        let identity = (self.fleet.allow_duplicates, self.fleet.identity_source);
        super::identities::ask(&pool, &primary_contexts, &readiness, identity);
        let secure_metrics_address = servers.serve_metrics(&pool, &mut background)?;
        let targets = pool
            .access()
            .map(|(context, access)| (context.to_owned(), access.clone()))
            .collect();
        let (interval, members) = (self.ping_interval, self.fleet.provider.is_some());
        let pings = crate::readiness::start_pings(
            targets,
            readiness.clone(),
            interval,
            metrics.clone(),
            members,
        );
        let pings = Arc::new(pings);
        let mut shards = None;
        let election = match (self.election, self.sharding) {
            (None, None) => Election::none(),
            (_, Some(sharding)) => {
                let Some(access) = pool.access().find(|(c, _)| *c == sharding.lease.context) else {
                    let reason = format!("context {} has no client", sharding.lease.context);
                    let group = sharding.group();
                    return Err(Error::Sharding { group, reason });
                };
                let (names, leases) = sharding.shards(&primary_contexts).into_iter().unzip();
                let state = Arc::new(ShardState::new(sharding.by, names));
                shards = Some(state.clone());
                let (access, member) = (access.1.clone(), self.pool.fence.clone());
                Election::start_sharded(sharding, leases, access, member, state, readiness.clone())?
            }
            (Some(election), None) => {
                let lease = election.lease();
                let Some(access) = pool.access().find(|(c, _)| *c == election.context) else {
                    let reason = format!("context {} has no client", election.context);
                    return Err(Error::LeaderElection { lease, reason });
                };
                let (access, fence) = (access.1.clone(), self.pool.fence.clone());
                Election::start(election, access, fence, readiness.clone())?
            }
        };
        let runtime = Arc::new(Runtime {
            pool,
            watches: WatchRegistry::new(readiness.clone(), metrics.clone()),
            readiness: readiness.clone(),
            metrics,
            role: election.role(),
            shards,
            members: Default::default(),
        });
        let (webhook_address, webhook_ca_bundle) =
            servers.serve_webhooks(&runtime, &mut background);
        if self.fleet.provider.is_none() {
            // No provider, no members: none can hold children a deletion must wait for; a controller
            // declared for members is told so at start (no compile-time check sees the provider).
            runtime.members.settle();
            for registration in self.controllers.iter().filter(|r| r.works_in_members()) {
                tracing::info!(controller = %registration.name(), "declares members, but the manager has no member provider: it works in its fixed contexts only");
            }
        }
        let (stop, stopped) = watch::channel(false);
        let mut controllers = JoinSet::new();
        for registration in self.controllers {
            let name = registration.name();
            let run = registration.start(runtime.clone(), stopped.clone());
            controllers.spawn(super::supervise::supervise(
                name,
                run,
                stopped.clone(),
                readiness.clone(),
            ));
        }
        if let Some((provider, policy)) = self.fleet.provider {
            let runner = super::members::runner::MemberRunner {
                runtime: runtime.clone(),
                pool: self.pool.clone(),
                pings: pings.clone(),
                policy,
                fixed: contexts.clone(),
                at_once: self.fleet.at_once,
                give_up_after: self.fleet.give_up_after,
                allowlist: self.fleet.allowlist,
            };
            runner.start(provider, &mut background);
        }
        // Every watch is registered now: readiness can be judged cluster by cluster.
        readiness.arm();
        Ok(Running {
            _pings: pings,
            election,
            runtime,
            stop,
            controllers,
            background,
            probe_address,
            secure_metrics_address,
            webhook_address,
            webhook_ca_bundle,
        })
    }

    /// Starts, waits until every required context is ready, and runs until SIGINT or SIGTERM; then stops
    /// taking new reconciles and lets those in flight finish (a second signal ends them at once).
    ///
    /// Returns an error naming the context when a required context cannot be configured (for example, it
    /// is not in the kubeconfig). A context that is merely unreachable is not an error: the controllers
    /// run in the others, and the probes report it.
    pub async fn run(self) -> Result<()> {
        let mut signals = super::signals::Signals::new().map_err(Error::Signals)?;
        let running = self.start().await?;
        let signalled = tokio::select! {
            started = running.wait_started() => {
                if let Err(error) = started {
                    running.shutdown().await;
                    return Err(error);
                }
                tracing::info!("started: every required context is ready");
                false
            }
            () = signals.next() => true,
        };
        if !signalled {
            signals.next().await;
        }
        tracing::info!(
            "shutting down: finishing reconciles in flight (signal again to stop at once)"
        );
        tokio::select! {
            () = running.shutdown() => {}
            () = signals.next() => tracing::warn!("second signal: stopping without waiting"),
        }
        Ok(())
    }
}

/// The context an error of the pool concerns.
fn error_context(error: &Error) -> Option<&str> {
    match error {
        Error::ContextNotFound { context, .. } | Error::ClientConfig { context, .. } => {
            Some(context)
        }
        _ => None,
    }
}
