//! `fleet`: the example operator.
//!
//! - `fleet run [--probe-address ADDRESS] [--log-format text|json] [--otlp-endpoint URL] [--namespace NAMESPACE]
//!   [--child-namespaces NAMESPACES]`: the operator, against the kubeconfig as kubectl finds it (in a Pod: the
//!   service account for `control` with `KUBEPLEX_CONTEXT_CONTROL=in-cluster`, a mounted kubeconfig for the
//!   children); probes on `0.0.0.0:8080` unless told otherwise; spans to an OTLP collector when built with
//!   `--features otlp`; AppDeployments in `crds`, Deployments in `namespace-a` and `namespace-b` unless told
//!   otherwise (checked at start); until SIGTERM. `--leader-election [--lease-namespace NAMESPACE]
//!   [--identity NAME] [--lease-duration S] [--renew-deadline S] [--retry-period S]`: one of several replicas
//!   (docs/ha.md); `--shards N` instead of `--leader-election`: replicas that split the AppDeployments.
//!   `--members-from-secrets SELECTOR [--members-namespace NAMESPACE] [--member-leave-policy delete|orphan]`:
//!   more child clusters, each from a kubeconfig Secret in the control cluster (docs/fleets.md);
//!   `--members-from-cluster-profiles NAMESPACE [--access-providers FILE]` instead: each from a ClusterProfile;
//!   `--members-from-cluster-api NAMESPACE`: each from a Cluster API cluster's kubeconfig Secret.
//!   `--secure-metrics-port PORT [--secure-metrics-cert-dir DIR] [--secure-metrics-audience AUDIENCE]`:
//!   /metrics over HTTPS on its own port, to scrapers the control cluster authenticates and authorises
//!   (docs/observability.md).
//! - `fleet demo [--exit-after-table]`: the whole scenario on local real clusters, a cluster joining and
//!   leaving the fleet and a progressive rollout included.
//! - `fleet crd [--service NAME.NAMESPACE | --url URL]`: prints the `AppDeployment` CustomResourceDefinition,
//!   `v2` served and converted by the webhooks at that endpoint.
//! - `fleet rbac --context NAME [run's flags]`: prints the Roles, ClusterRoles and bindings `fleet run` with
//!   those flags needs in the cluster NAME, derived from the plan (the Helm charts render the same rules).
//! - `fleet webhooks (--service NAME.NAMESPACE | --url URL) [--namespace NAMESPACE] [--failure-policy
//!   Fail|Ignore] [--timeout-seconds S]`: prints the webhook configurations for `fleet run --webhook-port PORT
//!   [--webhook-cert-dir DIR] [--webhook-dns-name NAME]`, which refuses an AppDeployment naming a cluster the
//!   fleet does not have, or namespaces it does not own (docs/webhooks.md).

use std::error::Error;
use std::io::{self, IsTerminal as _, Write as _};
use std::net::SocketAddr;
use std::process::ExitCode;
#[cfg(test)]
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand, ValueEnum};
use kubeplex::Manager;
use kubeplex_fleet::demo::{self, DemoError};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::{Layer, Registry};

mod members_cli;
mod operator_cli;
mod rbac_cli;
mod webhooks_cli;
#[cfg(test)]
use members_cli::MemberFlags;
use operator_cli::OperatorFlags;
use rbac_cli::RbacFlags;
use webhooks_cli::{EndpointFlags, WebhookFlags};

/// The kubeplex example operator: each AppDeployment in namespace `crds` of the control cluster becomes a
/// Deployment in `namespace-a` and `namespace-b` of cluster-a and cluster-b (`fleet run` takes other
/// namespaces, and more clusters from kubeconfig Secrets).
#[derive(Debug, Parser)]
#[command(name = "fleet", version)]
struct Cli {
    /// How log lines are written (to stderr); RUST_LOG filters them [default filter: warn].
    #[arg(
        long,
        value_enum,
        global = true,
        default_value_t = LogFormat::Text,
        env = "FLEET_LOG_FORMAT"
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the operator against the kubeconfig as kubectl finds it, until SIGTERM or Ctrl-C.
    Run {
        /// Where to serve the probes (/startupz, /readyz, /livez), and /metrics without
        /// --secure-metrics-port.
        #[arg(
            long,
            value_name = "ADDRESS",
            default_value = "0.0.0.0:8080",
            env = "FLEET_PROBE_ADDRESS"
        )]
        probe_address: SocketAddr,
        /// Export spans to this OTLP/HTTP collector, e.g. `http://otel-collector:4318` (`/v1/traces` is
        /// appended); needs a build with `--features otlp`.
        #[arg(long, value_name = "URL", env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
        otlp_endpoint: Option<String>,
        #[command(flatten)]
        operator: OperatorFlags,
    },
    /// Run the whole scenario on local real clusters and print what exists where, then let cluster-c join
    /// the fleet and leave it again (its kubeconfig Secret created, then deleted); until Ctrl-C.
    Demo {
        /// Stop after printing the last table (the rollout complete) instead of waiting for Ctrl-C.
        #[arg(long)]
        exit_after_table: bool,
    },
    /// Print the AppDeployment CustomResourceDefinition (JSON) to install in the control cluster: `v1`, and
    /// `v2` served and converted by `fleet run --webhook-port` when given where the API server reaches it
    /// (else not served).
    Crd {
        #[command(flatten)]
        endpoint: EndpointFlags,
    },
    /// Print the RBAC (YAML) `fleet run` with these flags needs in one cluster, derived from the
    /// controller's plan: Roles where the plan names namespaces, ClusterRoles where it does not (docs/rbac.md).
    Rbac {
        #[command(flatten)]
        rbac: RbacFlags,
        #[command(flatten)]
        operator: OperatorFlags,
    },
    /// Print the Validating- and MutatingWebhookConfiguration (YAML) that make the control cluster's API
    /// server call `fleet run --webhook-port` for AppDeployments (docs/webhooks.md).
    Webhooks {
        #[command(flatten)]
        webhooks: WebhookFlags,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// Human-readable lines; coloured only on a terminal.
    Text,
    /// One JSON object per line, for log pipelines.
    Json,
}

#[tokio::main]
async fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit());
    let otlp = otlp_endpoint(&cli, &matches);
    let exporter = match init_logging(
        cli.log_format,
        io::stderr().is_terminal(),
        io::stderr,
        otlp.as_ref(),
    ) {
        Ok(exporter) => exporter,
        Err(error) => {
            eprintln!("fleet: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        Command::Run {
            probe_address,
            operator,
            ..
        } => match operator.manager(Manager::new().probes(probe_address.to_string())) {
            Ok(manager) => manager.run().await.map_err(Into::into),
            Err(error) => Err(error.into()),
        },
        Command::Demo { exit_after_table } => demo::run(exit_after_table).await,
        Command::Crd { endpoint } => endpoint.print_crd(),
        Command::Rbac { rbac, operator } => rbac.print(operator),
        Command::Webhooks { webhooks } => webhooks.print(),
    };
    // The last batch of spans, with the reconciles of the shutdown.
    let result = result.and(exporter.stop());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader stopped reading (`fleet crd | head`): it has what it wanted.
        Err(error) if is_broken_pipe(&*error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("fleet: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Writes `text` to stdout, whole; a closed stdout is the io::Error it is.
fn print(text: &str) -> Result<(), DemoError> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

fn is_broken_pipe(error: &(dyn Error + 'static)) -> bool {
    error
        .downcast_ref::<io::Error>()
        .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

/// Where `fleet run` sends its spans: `--otlp-endpoint`, or `OTEL_EXPORTER_OTLP_ENDPOINT`.
#[derive(Debug, PartialEq, Eq)]
struct OtlpEndpoint {
    url: String,
    /// Set by the environment rather than on the command line.
    from_env: bool,
}

fn otlp_endpoint(cli: &Cli, matches: &clap::ArgMatches) -> Option<OtlpEndpoint> {
    let Command::Run {
        otlp_endpoint: Some(url),
        ..
    } = &cli.command
    else {
        return None;
    };
    let source = matches
        .subcommand_matches("run")
        .and_then(|run| run.value_source("otlp_endpoint"));
    Some(OtlpEndpoint {
        url: url.clone(),
        from_env: source == Some(ValueSource::EnvVariable),
    })
}

/// A layer of the subscriber next to the log lines (the OTLP exporter's).
type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// What keeps the span exporter running, if any; [`Exporter::stop`] sends its last batch.
struct Exporter {
    #[cfg(feature = "otlp")]
    guard: Option<kubeplex::otlp::Guard>,
}

impl Exporter {
    fn stop(self) -> Result<(), Box<dyn Error + Send + Sync>> {
        #[cfg(feature = "otlp")]
        if let Some(guard) = self.guard {
            guard.shutdown()?;
        }
        Ok(())
    }
}

/// Logs to `writer` in `format`; text has colour codes only when `ansi` (stderr is a terminal). Spans also go
/// to `otlp` when it is given.
fn init_logging<W>(
    format: LogFormat,
    ansi: bool,
    writer: W,
    otlp: Option<&OtlpEndpoint>,
) -> Result<Exporter, Box<dyn Error + Send + Sync>>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let (layers, exporter) = otlp_layers(otlp)?;
    tracing::subscriber::set_global_default(subscriber(format, ansi, writer, layers))
        .expect("logging is set up once");
    if !cfg!(feature = "otlp") && otlp.is_some() {
        tracing::warn!(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set, but fleet was built without the otlp feature: spans are not \
             exported (rebuild with --features otlp)"
        );
    }
    Ok(exporter)
}

#[cfg(feature = "otlp")]
fn otlp_layers(
    otlp: Option<&OtlpEndpoint>,
) -> Result<(Vec<BoxedLayer>, Exporter), Box<dyn Error + Send + Sync>> {
    let Some(otlp) = otlp else {
        return Ok((Vec::new(), Exporter { guard: None }));
    };
    let (layer, guard) = kubeplex::otlp::layer::<Registry>(&otlp.url, None)?;
    Ok((vec![layer.boxed()], Exporter { guard: Some(guard) }))
}

/// Without the feature, `--otlp-endpoint` is refused; `OTEL_EXPORTER_OTLP_ENDPOINT` (which an
/// OpenTelemetry operator may set in every Pod) only earns a warning.
#[cfg(not(feature = "otlp"))]
fn otlp_layers(
    otlp: Option<&OtlpEndpoint>,
) -> Result<(Vec<BoxedLayer>, Exporter), Box<dyn Error + Send + Sync>> {
    match otlp {
        Some(otlp) if !otlp.from_env => Err(
            "--otlp-endpoint: built without the otlp feature; rebuild with --features otlp".into(),
        ),
        _ => Ok((Vec::new(), Exporter {})),
    }
}

/// The log lines (filtered by `RUST_LOG`, or kubeplex's default) and `layers`, each with its own filter.
fn subscriber<W>(
    format: LogFormat,
    ansi: bool,
    writer: W,
    layers: Vec<BoxedLayer>,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    // kubeplex reports each failure once, naming its context; the client libraries' own per-request lines
    // would only repeat them.
    // RUST_LOG's directives keep kubeplex's quiet ones unless they name those targets themselves.
    let rust_log = std::env::var("RUST_LOG").unwrap_or_default();
    let filter = tracing_subscriber::EnvFilter::try_new(kubeplex::logging::log_filter(&rust_log))
        .unwrap_or_else(|_| kubeplex::logging::DEFAULT_LOG_FILTER.into());
    let lines = tracing_subscriber::fmt::layer().with_writer(writer);
    let lines = match format {
        LogFormat::Text => lines.with_ansi(ansi).with_filter(filter).boxed(),
        LogFormat::Json => lines.json().flatten_event(true).with_filter(filter).boxed(),
    };
    let mut all = vec![lines];
    all.extend(layers);
    Box::new(tracing_subscriber::registry().with(all))
}

#[cfg(test)]
mod tests;
