//! `fleet`: the example operator.
//!
//! - `fleet run [--probe-address ADDRESS] [--log-format text|json]`: the operator, against the kubeconfig as
//!   kubectl finds it (in a Pod: the service account for `control` with `KUBEPLEX_CONTEXT_CONTROL=in-cluster`,
//!   a mounted kubeconfig for the children); probes on `0.0.0.0:8080` unless told otherwise; until SIGTERM.
//! - `fleet demo [--exit-after-table]`: the whole scenario on three local real clusters.
//! - `fleet crd`: prints the `AppDeployment` CustomResourceDefinition.

use std::error::Error;
use std::io::{self, IsTerminal as _, Write as _};
use std::net::SocketAddr;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use kubeplex::Manager;
use kubeplex_fleet::demo::{self, DemoError};
use kubeplex_fleet::{AppDeployer, AppDeployment};
use tracing_subscriber::fmt::MakeWriter;

/// The kubeplex example operator: each AppDeployment in namespace `crds` of the control cluster becomes a
/// Deployment in `namespace-a` and `namespace-b` of cluster-a and cluster-b.
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
        /// Where to serve the probes (/startupz, /readyz, /livez).
        #[arg(
            long,
            value_name = "ADDRESS",
            default_value = "0.0.0.0:8080",
            env = "FLEET_PROBE_ADDRESS"
        )]
        probe_address: SocketAddr,
    },
    /// Run the whole scenario on three local real clusters and print what exists where; until Ctrl-C.
    Demo {
        /// Stop after printing the table.
        #[arg(long)]
        exit_after_table: bool,
    },
    /// Print the AppDeployment CustomResourceDefinition (JSON) to install in the control cluster.
    Crd,
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
    let cli = Cli::parse();
    init_logging(cli.log_format, io::stderr().is_terminal(), io::stderr);
    let result = match cli.command {
        Command::Run { probe_address } => Manager::new()
            .probes(probe_address.to_string())
            .controller(AppDeployer)
            .run()
            .await
            .map_err(Into::into),
        Command::Demo { exit_after_table } => demo::run(exit_after_table).await,
        Command::Crd => print_crd(),
    };
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

fn print_crd() -> Result<(), DemoError> {
    // Serialized first, so that a closed stdout shows as the io::Error it is.
    let crd = serde_json::to_string_pretty(&AppDeployment::installable_crd())?;
    let mut out = io::stdout().lock();
    writeln!(out, "{crd}")?;
    out.flush()?;
    Ok(())
}

fn is_broken_pipe(error: &(dyn Error + 'static)) -> bool {
    error
        .downcast_ref::<io::Error>()
        .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

/// Logs to `writer` in `format`; text has colour codes only when `ansi` (stderr is a terminal).
fn init_logging<W>(format: LogFormat, ansi: bool, writer: W)
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing::subscriber::set_global_default(subscriber(format, ansi, writer))
        .expect("logging is set up once");
}

fn subscriber<W>(
    format: LogFormat,
    ansi: bool,
    writer: W,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    // kubeplex reports each failure once, naming its context; the client libraries' own per-request lines
    // would only repeat them.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| kubeplex::DEFAULT_LOG_FILTER.into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    match format {
        LogFormat::Text => Box::new(builder.with_ansi(ansi).finish()),
        LogFormat::Json => Box::new(builder.json().flatten_event(true).finish()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use clap::CommandFactory as _;

    use super::*;

    /// Collects what the subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn log_one_warning(format: LogFormat, ansi: bool) -> String {
        let captured = Captured::default();
        let writer = captured.clone();
        tracing::subscriber::with_default(subscriber(format, ansi, move || writer.clone()), || {
            tracing::warn!(context = "cluster-a", "cannot reach the cluster");
        });
        String::from_utf8(captured.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_defaults_to_probes_on_port_8080_and_text_logs() {
        let cli = Cli::try_parse_from(["fleet", "run"]).unwrap();
        assert_eq!(cli.log_format, LogFormat::Text);
        let Command::Run { probe_address } = cli.command else {
            panic!("not `run`: {cli:?}");
        };
        assert_eq!(probe_address, "0.0.0.0:8080".parse().unwrap());
        let cli = Cli::try_parse_from([
            "fleet",
            "run",
            "--probe-address",
            "127.0.0.1:9090",
            "--log-format",
            "json",
        ])
        .unwrap();
        assert_eq!(cli.log_format, LogFormat::Json);
        assert!(
            matches!(cli.command, Command::Run { probe_address } if probe_address.port() == 9090)
        );
    }

    #[test]
    fn text_logs_have_colour_codes_only_on_a_terminal() {
        let plain = log_one_warning(LogFormat::Text, false);
        assert!(plain.contains("WARN"), "{plain}");
        assert!(
            plain.contains("cannot reach the cluster context=\"cluster-a\""),
            "{plain}"
        );
        assert!(!plain.contains('\x1b'), "{plain:?}");
        assert!(log_one_warning(LogFormat::Text, true).contains('\x1b'));
    }

    #[test]
    fn json_logs_are_one_object_per_line_with_the_fields_on_top() {
        let out = log_one_warning(LogFormat::Json, true);
        let line: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(line["level"], "WARN", "{line}");
        assert_eq!(line["message"], "cannot reach the cluster", "{line}");
        assert_eq!(line["context"], "cluster-a", "{line}");
        assert!(!out.contains('\x1b'), "{out:?}");
    }
}
