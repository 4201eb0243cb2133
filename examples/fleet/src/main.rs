//! `fleet`: the example operator.
//!
//! - `fleet run`: the operator, against the kubeconfig as kubectl finds it (in a Pod: the service account
//!   for `control` with `KUBEPLEX_CONTEXT_CONTROL=in-cluster`, a mounted kubeconfig for the children);
//!   probes on `0.0.0.0:8080`; until SIGTERM.
//! - `fleet demo [--exit-after-table]`: the whole scenario on three local real clusters.
//! - `fleet crd`: prints the `AppDeployment` CustomResourceDefinition.

use std::process::ExitCode;

use kube::CustomResourceExt;
use kubeplex::Manager;
use kubeplex_fleet::{AppDeployer, AppDeployment, demo};

const USAGE: &str = "usage: fleet run | fleet demo [--exit-after-table] | fleet crd";

#[tokio::main]
async fn main() -> ExitCode {
    // kubeplex reports each failure once, naming its context; the client's own per-request errors (many while
    // local clusters start) would only repeat them.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "warn,kube_client::client::builder=off".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["run"] => Manager::new()
            .probes("0.0.0.0:8080")
            .controller(AppDeployer)
            .run()
            .await
            .map_err(Into::into),
        ["demo"] => demo::run(false).await,
        ["demo", "--exit-after-table"] => demo::run(true).await,
        ["crd"] => serde_json::to_string_pretty(&AppDeployment::crd())
            .map(|crd| println!("{crd}"))
            .map_err(Into::into),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("fleet: {error}");
            ExitCode::FAILURE
        }
    }
}
