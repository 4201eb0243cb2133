//! The flags that say what `fleet run` runs (namespaces, leader election or shards, members), shared with
//! `fleet rbac`, which prints what that needs.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kubeplex::{Manager, SecureMetrics, ha::LeaderElection, ha::Sharding};
use kubeplex_fleet::{AppDeployer, Fleet, admission};

use crate::members_cli::MemberFlags;

/// What the operator runs: where its AppDeployments and Deployments are, how its replicas share the work,
/// and which members it takes.
#[derive(Debug, clap::Args)]
pub struct OperatorFlags {
    /// The namespace of the control cluster whose AppDeployments are reconciled.
    #[arg(
        long,
        value_name = "NAMESPACE",
        default_value = "crds",
        env = "FLEET_NAMESPACE"
    )]
    pub namespace: String,
    /// The namespaces of the child clusters that receive the Deployments, comma-separated.
    #[arg(
        long,
        value_name = "NAMESPACES",
        value_delimiter = ',',
        default_value = "namespace-a,namespace-b",
        env = "FLEET_CHILD_NAMESPACES"
    )]
    pub child_namespaces: Vec<String>,
    /// Run as one of several replicas: only the holder of the Lease `<control>/<NAMESPACE>/<NAME>`
    /// reconciles, the others stand by with warm caches (docs/ha.md).
    #[arg(long, env = "FLEET_LEADER_ELECTION")]
    pub leader_election: bool,
    /// Run as one of several replicas that split the AppDeployments between them: by a hash of each
    /// one's namespace/name into SHARDS shards, each shard owned by one replica at a time and fenced by
    /// the Lease `fleet-operator-shard-<i>` (docs/ha.md). A few shards per replica you expect.
    #[arg(
        long,
        value_name = "SHARDS",
        env = "FLEET_SHARDS",
        conflicts_with = "leader_election",
        value_parser = clap::value_parser!(u16).range(1..)
    )]
    pub shards: Option<u16>,
    /// The namespace of the leader election's (or the shards') Leases in the control cluster.
    #[arg(
        long,
        value_name = "NAMESPACE",
        default_value = "crds",
        env = "FLEET_LEASE_NAMESPACE"
    )]
    pub lease_namespace: String,
    /// This replica's identity in the Lease [default: POD_NAME or the host name, plus a random suffix].
    #[arg(long, value_name = "NAME", env = "FLEET_IDENTITY")]
    pub identity: Option<String>,
    /// How long the Lease holds without renewal, in whole seconds [default: 15].
    #[arg(long, value_name = "SECONDS", value_parser = seconds, env = "FLEET_LEASE_DURATION")]
    pub lease_duration: Option<Duration>,
    /// How long the leader goes on writing after it sent its last successful renewal, in seconds;
    /// shorter than the lease duration [default: 10].
    #[arg(long, value_name = "SECONDS", value_parser = seconds, env = "FLEET_RENEW_DEADLINE")]
    pub renew_deadline: Option<Duration>,
    /// How often the Lease is renewed, or tried by a standby, in seconds; shorter than the renew deadline
    /// [default: 2].
    #[arg(long, value_name = "SECONDS", value_parser = seconds, env = "FLEET_RETRY_PERIOD")]
    pub retry_period: Option<Duration>,
    /// Serve /metrics over HTTPS on this port (on every address) instead of the probe port, only to
    /// scrapers whose bearer token the control cluster authenticates and allows `get` on /metrics
    /// (docs/observability.md, "Secure metrics").
    #[arg(long, value_name = "PORT", env = "FLEET_SECURE_METRICS_PORT")]
    pub secure_metrics_port: Option<u16>,
    /// The secure metrics' certificate: `tls.crt` and `tls.key` in this directory [default: a certificate
    /// signed by itself, made at start].
    #[arg(
        long,
        value_name = "DIR",
        env = "FLEET_SECURE_METRICS_CERT_DIR",
        requires = "secure_metrics_port"
    )]
    pub secure_metrics_cert_dir: Option<PathBuf>,
    /// Accept only scrapers' tokens valid for one of these audiences (the TokenReview's `audiences`;
    /// repeated or comma-separated) [default: the control cluster's API server's own].
    #[arg(
        long = "secure-metrics-audience",
        value_name = "AUDIENCE",
        env = "FLEET_SECURE_METRICS_AUDIENCES",
        value_delimiter = ',',
        requires = "secure_metrics_port"
    )]
    pub secure_metrics_audiences: Vec<String>,
    /// Serve the admission webhooks (docs/webhooks.md) over HTTPS on this port (on every address): an
    /// AppDeployment whose rollout order names a cluster the fleet does not have, or whose namespaces the
    /// operator does not own, is refused when written; a rollout's strategy is written in.
    #[arg(long, value_name = "PORT", env = "FLEET_WEBHOOK_PORT")]
    pub webhook_port: Option<u16>,
    /// The webhooks' certificate: `tls.crt` and `tls.key` in this directory (cert-manager's) [default: one
    /// signed by a CA the operator keeps in the Secret fleet-operator-webhook-ca of --lease-namespace, and
    /// writes into the caBundle of the webhook configurations named fleet-operator].
    #[arg(
        long,
        value_name = "DIR",
        env = "FLEET_WEBHOOK_CERT_DIR",
        requires = "webhook_port"
    )]
    pub webhook_cert_dir: Option<PathBuf>,
    /// A DNS name of the webhook Service (`<service>.<namespace>.svc`), for the certificate the operator
    /// signs; repeated or comma-separated.
    #[arg(
        long = "webhook-dns-name",
        value_name = "NAME",
        env = "FLEET_WEBHOOK_DNS_NAMES",
        value_delimiter = ',',
        requires = "webhook_port"
    )]
    pub webhook_dns_names: Vec<String>,
    #[command(flatten)]
    pub members: MemberFlags,
}

impl OperatorFlags {
    /// `manager` with the controller, its leader election or shards and its members as the flags say.
    /// Fails when the access-providers file cannot be used.
    pub fn manager(
        self,
        manager: Manager,
    ) -> Result<Manager, kubeplex::members::AccessProvidersError> {
        let Self {
            namespace,
            child_namespaces,
            leader_election,
            shards,
            lease_namespace,
            identity,
            lease_duration,
            renew_deadline,
            retry_period,
            secure_metrics_port,
            secure_metrics_cert_dir,
            secure_metrics_audiences,
            webhook_port,
            webhook_cert_dir,
            webhook_dns_names,
            members,
        } = self;
        // Timings that cannot fence are refused when the manager starts, in words.
        macro_rules! configure {
            ($leases:expr) => {{
                let mut leases = $leases;
                if let Some(identity) = identity {
                    leases = leases.with_identity(identity);
                }
                if let Some(duration) = lease_duration {
                    leases = leases.lease_duration(duration);
                }
                if let Some(deadline) = renew_deadline {
                    leases = leases.renew_deadline(deadline);
                }
                if let Some(period) = retry_period {
                    leases = leases.retry_period(period);
                }
                leases
            }};
        }
        let manager = match webhook_port {
            Some(port) => manager.webhooks(admission::webhooks(
                child_namespaces.clone(),
                format!("0.0.0.0:{port}"),
                webhook_cert_dir,
                &lease_namespace,
                webhook_dns_names,
            )),
            None => manager,
        };
        let (namespace_of_leases, name) = (lease_namespace, "fleet-operator");
        let manager = match (leader_election, shards) {
            (_, Some(shards)) => manager.sharding(configure!(Sharding::by_parent(
                Fleet::Control,
                namespace_of_leases,
                name,
                shards
            ))),
            (true, None) => manager.leader_election(configure!(LeaderElection::new(
                Fleet::Control,
                namespace_of_leases,
                name
            ))),
            (false, None) => manager,
        };
        let manager = match secure_metrics_port {
            Some(port) => {
                let metrics = SecureMetrics::new(Fleet::Control, format!("0.0.0.0:{port}"))
                    .audiences(secure_metrics_audiences);
                manager.secure_metrics(match secure_metrics_cert_dir {
                    Some(dir) => metrics.cert_dir(dir),
                    None => metrics,
                })
            }
            None => manager,
        };
        let manager = members.add_to(manager)?;
        // The attribute's namespaces, replaced by the flags' (checked when the manager starts).
        Ok(manager.controller_with(AppDeployer::default(), |plan| {
            plan.with_namespaces([namespace])
                .child_namespaces::<Deployment>(child_namespaces)
        }))
    }
}

/// A timing flag: a positive number of seconds (`1.5` allowed where the runtime takes it).
pub fn seconds(text: &str) -> Result<Duration, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s < 86_400.0 => Ok(Duration::from_secs_f64(s)),
        _ => Err("a positive number of seconds (below a day)".into()),
    }
}
