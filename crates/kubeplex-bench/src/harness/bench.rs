//! What every section shares: the running benchmark (its clusters' kubeconfig, the child processes it
//! runs on both sides).

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::child::{Outcome, Side, Spec};
use crate::figures::Figure;

pub(crate) const CLUSTERS: [&str; 3] = ["cluster-0", "cluster-1", "cluster-2"];
const CHILD_TIMEOUT: Duration = Duration::from_secs(600);

pub(crate) struct Bench {
    pub(crate) kubeconfig: PathBuf,
    pub(crate) exe: PathBuf,
    pub(crate) repeats: usize,
    /// Every kube-apiserver and etcd, whose CPU time each measurement reports.
    pub(crate) server_pids: Vec<u32>,
    /// `KUBEPLEX_BENCH_CHILD_WRAPPER`, split on whitespace: a profiler to run each child under.
    pub(crate) wrapper: Vec<String>,
    pub(crate) children: std::sync::atomic::AtomicUsize,
}

impl Bench {
    pub(crate) fn spec(&self, side: Side, contexts: &[(String, String)], namespace: &str) -> Spec {
        Spec {
            side,
            kubeconfig: self.kubeconfig.clone(),
            contexts: contexts.to_vec(),
            namespace: namespace.to_owned(),
            controllers: 1,
            concurrency: None,
            get_per_reconcile: false,
            expect: 0,
            distinct: false,
            latency: None,
            settle_ms: 0,
        }
    }

    /// Runs `spec` on both sides `repeats` times, alternating which goes first.
    pub(crate) async fn pairs(&self, spec: &Spec) -> Result<(Vec<Outcome>, Vec<Outcome>), String> {
        let (mut baseline, mut kubeplex) = (Vec::new(), Vec::new());
        for repeat in 0..self.repeats {
            let order = if repeat % 2 == 0 {
                [Side::Baseline, Side::Kubeplex]
            } else {
                [Side::Kubeplex, Side::Baseline]
            };
            for side in order {
                let spec = Spec {
                    side,
                    ..spec.clone()
                };
                let outcome = self.child(&spec).await?;
                match side {
                    Side::Baseline => baseline.push(outcome),
                    Side::Kubeplex => kubeplex.push(outcome),
                }
            }
        }
        Ok((baseline, kubeplex))
    }

    async fn child(&self, spec: &Spec) -> Result<Outcome, String> {
        let server_cpu_before = crate::system::processes_seconds(&self.server_pids);
        let outcome: Outcome = self
            .run("__child", spec, spec.side.name(), "child", CHILD_TIMEOUT)
            .await?;
        let server_cpu_s = crate::system::processes_seconds(&self.server_pids) - server_cpu_before;
        Ok(Outcome {
            server_cpu_s,
            ..outcome
        })
    }
}

pub(crate) fn figure(
    name: impl Into<String>,
    unit: &'static str,
    (baseline, kubeplex): &(Vec<Outcome>, Vec<Outcome>),
    f: impl Fn(&Outcome) -> f64,
) -> Figure {
    let b: Vec<f64> = baseline.iter().map(&f).collect();
    let k: Vec<f64> = kubeplex.iter().map(&f).collect();
    Figure::new(name, unit, &b, &k)
}

pub(crate) fn contexts(count: usize, clusters: usize) -> Vec<(String, String)> {
    (0..count)
        .map(|i| (format!("ctx-{i}"), CLUSTERS[i % clusters].to_owned()))
        .collect()
}

pub(crate) fn progress(message: &str) {
    eprintln!("[kubeplex-bench] {message}");
}

/// Creates namespace `name`; one that exists already is fine (a section may run after another).
pub(crate) async fn create_namespace(client: &Client, name: &str) -> Result<(), String> {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(e) => Err(format!("creating namespace {name}: {e}")),
    }
}

/// A random delay below `most` (no random crate: std's randomly keyed hasher is random enough here).
pub(crate) fn jitter(most: Duration) -> Duration {
    let random = std::hash::BuildHasher::hash_one(
        &std::collections::hash_map::RandomState::new(),
        std::time::Instant::now(),
    );
    let most = u64::try_from(most.as_millis()).unwrap_or(u64::MAX).max(1);
    Duration::from_millis(random % most)
}
