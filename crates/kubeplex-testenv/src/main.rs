//! `kubeplex-testenv`: start real local clusters from the command line, or just build their programs.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory as _, Parser, Subcommand};
use kubeplex_testenv::{
    Binaries, ClusterInventory, Error, Helm, KUBEBUILDER_ASSETS, TestEnv, TestEnvBuilder,
};
use tokio::signal::unix::{SignalKind, signal};

/// Real local Kubernetes clusters: one upstream kube-apiserver with its own etcd per cluster.
#[derive(Debug, Parser)]
#[command(name = "kubeplex-testenv", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start one real kube-apiserver (with its own etcd) per cluster, write a kubeconfig with one context
    /// per cluster, print a line starting with `ready`, and run until SIGINT or SIGTERM.
    Up(UpArgs),
    /// Build (or locate) kube-apiserver, etcd and kube-controller-manager, and print their directory; with
    /// --helm and --inventory, those too, each printed on a line of its own in that order.
    ///
    /// With KUBEBUILDER_ASSETS set, nothing is built: that directory must hold kube-apiserver and etcd, and
    /// may hold kube-controller-manager (clusters that ask for one fail to start without it).
    Build(BuildArgs),
}

#[derive(Debug, Args)]
struct BuildArgs {
    /// Also build (or locate) helm, for tests of Helm charts, and print its path on a second line
    /// (KUBEPLEX_HELM names a ready one).
    #[arg(long)]
    helm: bool,
    /// Also build (or locate) sig-multicluster's Cluster Inventory API, for tests of ClusterProfile
    /// access: its secretreader and kubeconfig-secretreader credential plugins and its ClusterProfile CRD
    /// (clusterprofiles-crd.yaml), and print their directory on the next line (after helm's, with --helm).
    #[arg(long)]
    inventory: bool,
}

#[derive(Debug, Args)]
struct UpArgs {
    /// The clusters' names, comma-separated; each is also its kubeconfig context's name.
    #[arg(
        long,
        value_name = "NAME[,NAME...]",
        value_delimiter = ',',
        required = true
    )]
    clusters: Vec<String>,
    /// Where to write the kubeconfig [default: inside the environment's temporary directory].
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// Clusters that also run a kube-controller-manager (namespace deletion, garbage collection,
    /// Deployments...), comma-separated.
    #[arg(long, value_name = "NAME[,NAME...]", value_delimiter = ',')]
    controller_manager: Vec<String>,
    /// Every API server writes an audit log (`audit.log` in its cluster's directory).
    #[arg(long)]
    audit_log: bool,
    /// Once every cluster is ready, write here what other programs need to attach to them; test binaries
    /// run with KUBEPLEX_TESTENV_ATTACH set to it share these clusters instead of starting their own.
    #[arg(long, value_name = "PATH")]
    attach_file: Option<PathBuf>,
}

impl UpArgs {
    /// The environment to start; names that cannot be clusters are a usage error naming `--clusters`.
    fn builder(self) -> Result<TestEnvBuilder, clap::Error> {
        let mut builder = TestEnv::builder()
            .clusters(self.clusters)
            .controller_managers(self.controller_manager)
            .audit_log(self.audit_log);
        if let Some(path) = self.kubeconfig {
            builder = builder.kubeconfig_path(path);
        }
        builder.validate().map_err(|error| {
            let mut cli = Cli::command();
            cli.build();
            let up = cli.find_subcommand_mut("up").expect("`up` is a subcommand");
            let flag = match error {
                Error::UnknownCluster { .. } => "--controller-manager",
                _ => "--clusters",
            };
            up.error(ErrorKind::ValueValidation, format!("{flag}: {error}"))
        })?;
        Ok(builder)
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber_init();
    let result = match Cli::parse().command {
        Command::Build(args) => build(args).await,
        Command::Up(args) => match (args.attach_file.clone(), args.builder()) {
            (attach_file, Ok(builder)) => up(builder, attach_file).await,
            (_, Err(usage)) => usage.exit(),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // An unwritable kubeconfig path is discovered only when it is written: still the caller's mistake.
        Err(error @ Error::KubeconfigPath { .. }) => {
            eprintln!("kubeplex-testenv: {error}");
            ExitCode::from(2)
        }
        Err(error) => {
            eprintln!("kubeplex-testenv: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn build(args: BuildArgs) -> kubeplex_testenv::Result<()> {
    // KUBEBUILDER_ASSETS is used as it is: setup-envtest's directories hold no kube-controller-manager.
    let given = std::env::var_os(KUBEBUILDER_ASSETS).is_some();
    let locate = if given {
        Binaries::locate_or_build
    } else {
        Binaries::locate_or_build_all
    };
    let binaries = tokio::task::spawn_blocking(locate)
        .await
        .map_err(|e| Error::Binaries(format!("build task failed: {e}")))??;
    if binaries.kube_controller_manager.is_none() {
        eprintln!(
            "kubeplex-testenv: {KUBEBUILDER_ASSETS}={} holds no kube-controller-manager: clusters that \
             ask for one will not start",
            binaries.dir.display()
        );
    }
    println!("{}", binaries.dir.display());
    if args.helm {
        let helm = tokio::task::spawn_blocking(Helm::locate_or_build)
            .await
            .map_err(|e| Error::Binaries(format!("build task failed: {e}")))??;
        println!("{}", helm.display());
    }
    if args.inventory {
        let inventory = tokio::task::spawn_blocking(ClusterInventory::locate_or_build)
            .await
            .map_err(|e| Error::Binaries(format!("build task failed: {e}")))??;
        let dir = inventory.secretreader().parent().unwrap_or(Path::new("."));
        println!("{}", dir.display());
    }
    Ok(())
}

async fn up(builder: TestEnvBuilder, attach_file: Option<PathBuf>) -> kubeplex_testenv::Result<()> {
    let mut interrupt = signal(SignalKind::interrupt()).map_err(signal_error)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(signal_error)?;
    let env = tokio::select! {
        env = builder.start() => env?,
        _ = interrupt.recv() => return Ok(()),
        _ = terminate.recv() => return Ok(()),
    };
    for name in env.cluster_names() {
        println!("cluster {name}: {}", env.server_url(name)?);
    }
    if let Some(path) = &attach_file {
        env.write_attach_file(path)?;
        println!("attach file: {}", path.display());
    }
    let names: Vec<&str> = env.cluster_names().collect();
    println!(
        "ready: {} ({}); KUBECONFIG={}",
        names.len(),
        names.join(", "),
        env.kubeconfig_path().display()
    );
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    eprintln!("kubeplex-testenv: shutting down");
    drop(env);
    Ok(())
}

fn signal_error(source: std::io::Error) -> Error {
    Error::Io {
        what: "installing signal handlers".into(),
        source,
    }
}

fn tracing_subscriber_init() {
    // Logs go to stderr; RUST_LOG adjusts them. The client's own errors are silenced: refused connections
    // are expected while the API servers start.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,kube_client=off".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn clusters_are_comma_separated() {
        let cli = Cli::try_parse_from(["kubeplex-testenv", "up", "--clusters", "a,b"]).unwrap();
        let Command::Up(args) = cli.command else {
            panic!("not `up`: {cli:?}");
        };
        assert_eq!(args.clusters, ["a", "b"]);
        assert_eq!(args.kubeconfig, None);
        assert!(args.controller_manager.is_empty());
        assert!(!args.audit_log);
        assert_eq!(args.attach_file, None);
    }

    #[test]
    fn controller_managers_are_named_by_cluster() {
        let cli = Cli::try_parse_from([
            "kubeplex-testenv",
            "up",
            "--clusters",
            "a,b",
            "--controller-manager",
            "b",
        ])
        .unwrap();
        let Command::Up(args) = cli.command else {
            panic!("not `up`: {cli:?}");
        };
        assert_eq!(args.controller_manager, ["b"]);
        args.builder().unwrap();
        let cli = Cli::try_parse_from([
            "kubeplex-testenv",
            "up",
            "--clusters",
            "a",
            "--controller-manager",
            "c",
        ])
        .unwrap();
        let Command::Up(args) = cli.command else {
            panic!("not `up`: {cli:?}");
        };
        let error = args.builder().unwrap_err().to_string();
        assert!(
            error.contains("--controller-manager") && error.contains("\"c\""),
            "{error}"
        );
    }
}
