//! What the fleet section's parts share: its sizes, where it runs, and one run's sample.

use std::path::PathBuf;
use std::time::Duration;

use kubeplex_testenv::TestEnv;
use serde::Serialize;

use super::child::Reading;
use super::observe::ProbeLog;

/// How long one phase (converging, repairing, deleting) may take.
pub(super) const PHASE: Duration = Duration::from_secs(600);
#[derive(Clone, Debug, Serialize)]
pub(crate) struct FleetOptions {
    /// P, the size of the main row.
    pub parents: usize,
    /// Further sizes of the scaling row (the main P is added).
    pub scale: Vec<usize>,
    /// C child contexts (at most 3: one per test API server).
    pub clusters: usize,
    /// N namespaces per child context.
    pub namespaces: usize,
}

impl FleetOptions {
    pub fn full() -> Self {
        Self {
            parents: 1000,
            scale: vec![100, 300],
            clusters: 2,
            namespaces: 2,
        }
    }

    pub fn quick() -> Self {
        Self {
            parents: 100,
            scale: vec![30],
            ..Self::full()
        }
    }

    /// Still two sizes for the scaling row, two child contexts and two namespaces in each.
    pub fn smoke() -> Self {
        Self {
            parents: 10,
            scale: vec![5],
            ..Self::full()
        }
    }
}

/// Where the section runs: the clusters and how to start a child process.
pub(crate) struct Host<'a> {
    pub env: &'a TestEnv,
    pub kubeconfig: PathBuf,
    pub exe: PathBuf,
    pub wrapper: Vec<String>,
    pub server_pids: Vec<u32>,
    pub repeats: usize,
}

/// One run of one side at one size.
#[derive(Clone, Debug, Default, Serialize)]
pub(super) struct Sample {
    pub synced_s: f64,
    /// From the operator's start: every child present with the right image; every parent ready.
    pub children_s: f64,
    pub ready_s: f64,
    /// After a tenth of the children were deleted by hand: each back (new UID, right image).
    pub repair_s: f64,
    /// After every parent was deleted: parents and children gone.
    pub delete_s: f64,
    pub converged: Reading,
    pub repaired: Reading,
    pub deleted: Reading,
    pub rss_before: u64,
    pub heap_before: u64,
    pub server_cpu_converged_s: f64,
    pub server_cpu_s: f64,
    pub requests: f64,
    /// `requests` by verb and resource, the parent's own deletes included.
    pub requests_by_kind: std::collections::BTreeMap<String, f64>,
    pub conflicts: f64,
    pub readyz: Option<ProbeLog>,
    /// The admission run's (kubeplex only): each AdmissionReview's answer while the operator converged, ms.
    pub admission_ms: Vec<f64>,
    /// The admission run's answers timed at the operator's webhook server: how many, how many within 5 ms.
    pub admission_served: (f64, f64),
}

/// The kubeplex side of the fleet operator over `control` and one child cluster (`child-0`), its children in
/// `namespace`: no election, no members.
pub(super) fn one_child_spec(
    host: &Host<'_>,
    (control, child): (&str, &str),
    namespace: &str,
) -> super::child::FleetSpec {
    super::child::FleetSpec {
        side: crate::child::Side::Kubeplex,
        kubeconfig: host.kubeconfig.clone(),
        control: control.to_owned(),
        children: vec![("child-0".to_owned(), child.to_owned())],
        namespaces: vec![namespace.to_owned()],
        concurrency: None,
        election: None,
        members: None,
        admission: false,
    }
}

/// The control cluster and one child cluster, for a section that runs one operator over them: the parents'
/// kind installed, the parents' namespace in the control cluster, and `namespace` in both.
pub(super) async fn control_and_child(
    host: &Host<'_>,
    (control, child): (&'static str, &'static str),
    namespace: &str,
) -> Result<(kube::Client, kube::Client), String> {
    use kube::CustomResourceExt as _;
    host.env
        .install_crd(control, super::app::FleetApp::crd())
        .await
        .map_err(|e| e.to_string())?;
    let client = |cluster: &'static str| async move {
        host.env.client(cluster).await.map_err(|e| e.to_string())
    };
    let (control, child) = (client(control).await?, client(child).await?);
    crate::harness::create_namespace(&control, namespace).await?;
    crate::harness::create_namespace(&control, super::app::PARENT_NAMESPACE).await?;
    crate::harness::create_namespace(&child, namespace).await?;
    Ok((control, child))
}
