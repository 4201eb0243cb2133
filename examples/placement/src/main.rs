//! `placement`: runs the placement operator with the kubeconfig kubectl would use (contexts `control`,
//! `cluster-a`, `cluster-b`), members joining from kubeconfig Secrets labelled
//! `placement.kubeplex.dev/member=true` in namespace `placements` of the control cluster.
//! `placement crd` prints the Placement CRD.

use kube::CustomResourceExt;
use kubeplex::Manager;
use kubeplex::members::{KubeconfigSecrets, LeavePolicy};
use kubeplex_placement::{Fleet, PLACEMENTS, Placement, Placer};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("crd") {
        println!("{}", serde_json::to_string_pretty(&Placement::crd())?);
        return Ok(());
    }
    let rust_log = std::env::var("RUST_LOG").unwrap_or_default();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(
            kubeplex::logging::log_filter(&rust_log),
        )?)
        .init();
    let members = KubeconfigSecrets::new(
        Fleet::Control,
        PLACEMENTS,
        "placement.kubeplex.dev/member=true",
    );
    Manager::new()
        .controller(Placer)
        .members(members, LeavePolicy::Delete)
        .run()
        .await?;
    Ok(())
}
