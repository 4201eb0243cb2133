//! `kubeplex-testenv`: start real local clusters from the command line, or just build their programs.

use std::path::PathBuf;
use std::process::ExitCode;

use kubeplex_testenv::{Binaries, Error, TestEnv, TestEnvBuilder};
use tokio::signal::unix::{SignalKind, signal};

const USAGE: &str = "\
usage: kubeplex-testenv up --clusters NAME[,NAME...] [--kubeconfig PATH]
       kubeplex-testenv build

  up     start one real kube-apiserver (with its own etcd) per cluster, write a kubeconfig with one
         context per cluster, print a line starting with `ready`, and run until SIGINT or SIGTERM
  build  build (or locate) kube-apiserver and etcd, and print their directory";

/// A command line that cannot be acted on: reported with the usage, exit code 2.
struct UsageError(String);

enum Command {
    Up(TestEnvBuilder),
    Build,
    Help,
}

fn parse(args: &[String]) -> Result<Command, UsageError> {
    let Some((command, rest)) = args.split_first() else {
        return Err(UsageError("no command given".into()));
    };
    match command.as_str() {
        "build" if rest.is_empty() => Ok(Command::Build),
        "build" => Err(UsageError(format!(
            "`build` takes no arguments, got {rest:?}"
        ))),
        "-h" | "--help" | "help" => Ok(Command::Help),
        "up" => parse_up(rest).map(Command::Up),
        other => Err(UsageError(format!("unknown command {other:?}"))),
    }
}

fn parse_up(args: &[String]) -> Result<TestEnvBuilder, UsageError> {
    let mut clusters: Option<Vec<String>> = None;
    let mut kubeconfig: Option<PathBuf> = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_owned())),
            None => (arg.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next().cloned())
                .ok_or_else(|| UsageError(format!("{flag} needs a value")))
        };
        match flag {
            "--clusters" => clusters = Some(value()?.split(',').map(str::to_owned).collect()),
            "--kubeconfig" => kubeconfig = Some(PathBuf::from(value()?)),
            other => return Err(UsageError(format!("unknown option {other:?}"))),
        }
    }
    let clusters = clusters.ok_or_else(|| UsageError("--clusters is required".into()))?;
    let mut builder = TestEnv::builder().clusters(clusters);
    if let Some(path) = kubeconfig {
        builder = builder.kubeconfig_path(path);
    }
    builder.validate().map_err(|e| UsageError(e.to_string()))?;
    Ok(builder)
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber_init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match parse(&args) {
        Ok(command) => command,
        Err(UsageError(message)) => {
            eprintln!("kubeplex-testenv: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let result = match command {
        Command::Help => {
            println!("{USAGE}");
            Ok(())
        }
        Command::Build => build().await,
        Command::Up(builder) => up(builder).await,
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

async fn build() -> kubeplex_testenv::Result<()> {
    let binaries = tokio::task::spawn_blocking(Binaries::locate_or_build)
        .await
        .map_err(|e| Error::Binaries(format!("build task failed: {e}")))??;
    println!("{}", binaries.dir.display());
    Ok(())
}

async fn up(builder: TestEnvBuilder) -> kubeplex_testenv::Result<()> {
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
    // Progress (e.g. "building from Go modules") goes to stderr; RUST_LOG adjusts it. The client's own
    // errors are silenced: refused connections are expected while the API servers start.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,kube_client=off".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
