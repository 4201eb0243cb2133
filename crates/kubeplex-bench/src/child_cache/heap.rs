//! Section `child_cache`: the heap one cached child costs kubeplex, cached by its metadata and the projection
//! its health is judged from (the default) against cached whole (`Child::cache_objects()`).
//!
//! P ConfigMap parents in cluster-0 each want K Deployments in cluster-1 (built like the fleet's children).
//! Each run is a fresh operator process (`__child_cache`) that starts, waits until every child exists and
//! every parent was reconciled, settles, and reports its heap; the children were created by a first run
//! that is not counted, so every counted run finds them in place. A run whose children live in an empty
//! namespace (nothing cached) is the reference: heap per child = (heap delta - the reference's) / (P * K).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::config::Kubeconfig;
use serde::{Deserialize, Serialize};

use crate::figures::{Figure, Goal, Section, Spread};
use crate::harness::{Bench, create_namespace, progress};

/// The controller's name: its children carry it in [`CONTROLLER_LABEL`](kubeplex::ownership::CONTROLLER_LABEL).
pub(super) const CONTROLLER: &str = "child-cache-bench";
pub(super) const PARENT_CLUSTER: &str = "cluster-0";
pub(super) const CHILD_CLUSTER: &str = "cluster-1";
/// Parents in cluster-0 and children in cluster-1 live in this namespace.
pub(super) const NAMESPACE: &str = "bench-cc";
/// The reference run's children namespace, which stays empty.
pub(super) const EMPTY_NAMESPACE: &str = "bench-cc-none";
/// How long a run may take to see every child and reconcile every parent.
pub(super) const WAIT: Duration = Duration::from_secs(300);
/// Goal: a metadata-only cache costs at most this fraction of a whole-object cache per child.
const GOAL_RATIO: f64 = 0.3;

#[derive(Clone, Debug, Serialize)]
pub(crate) struct ChildCacheOptions {
    /// P parents.
    pub parents: usize,
    /// K children per parent.
    pub per_parent: usize,
    /// Least pause after the last write before the heap is read, which then waits until the heap stops
    /// falling: 1 s after the last apply it can still hold twice what it settles at seconds later.
    pub settle_ms: u64,
    /// How often the writes, then the heap, are read until they stop changing, in ms.
    pub step_ms: u64,
}

impl ChildCacheOptions {
    pub fn full() -> Self {
        Self {
            parents: 20,
            per_parent: 100,
            settle_ms: 3000,
            step_ms: 250,
        }
    }

    pub fn quick() -> Self {
        Self {
            parents: 10,
            per_parent: 30,
            settle_ms: 1000,
            step_ms: 250,
        }
    }

    /// Quick readings: every run waits for several in a row to agree, twice, and there are four runs.
    pub fn smoke() -> Self {
        Self {
            parents: 5,
            per_parent: 10,
            settle_ms: 250,
            step_ms: 50,
        }
    }
}

/// What the children are cached as in one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Cache {
    /// The reference: the children's namespace is empty.
    Empty,
    /// kubeplex's default.
    Metadata,
    /// `Child::cache_objects()`.
    Objects,
}

/// What a `__child_cache` process runs; the parent serialises it into the command line.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct CacheSpec {
    pub kubeconfig: PathBuf,
    pub cache: Cache,
    pub parents: usize,
    pub per_parent: usize,
    pub settle_ms: u64,
    pub step_ms: u64,
}

/// What a `__child_cache` process prints.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct CacheOutcome {
    /// Seconds from the last write counted to the heap reading (see `settle_ms`).
    pub settled_s: f64,
    pub synced_s: f64,
    pub children: usize,
    pub heap_before: u64,
    pub heap_after: u64,
    pub rss_before: u64,
    pub rss_after: u64,
}

impl CacheOutcome {
    fn heap_delta(&self) -> f64 {
        self.heap_after as f64 - self.heap_before as f64
    }
}

pub(crate) async fn run(
    bench: &Bench,
    options: &ChildCacheOptions,
    sections: &mut BTreeMap<&'static str, Section>,
    goals: &mut Vec<Goal>,
) -> Result<(), String> {
    progress("child cache: creating the parents and, in a first uncounted run, their children");
    let parents = crate::child::client_for(&kubeconfig(bench)?, PARENT_CLUSTER).await?;
    let children = crate::child::client_for(&kubeconfig(bench)?, CHILD_CLUSTER).await?;
    create_namespace(&parents, NAMESPACE).await?;
    create_namespace(&children, NAMESPACE).await?;
    create_namespace(&children, EMPTY_NAMESPACE).await?;
    let api: Api<ConfigMap> = Api::namespaced(parents, NAMESPACE);
    for i in 0..options.parents {
        let parent = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("parent-{i}")),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        match api.create(&PostParams::default(), &parent).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => return Err(format!("creating parent-{i}: {e}")),
        }
    }
    let spec = |cache, settle_ms| CacheSpec {
        kubeconfig: bench.kubeconfig.clone(),
        cache,
        parents: options.parents,
        per_parent: options.per_parent,
        settle_ms,
        step_ms: options.step_ms,
    };
    child(bench, &spec(Cache::Metadata, 0)).await?;
    // (reference, metadata, objects) per repeat, the order rotating.
    let mut runs: Vec<BTreeMap<&'static str, CacheOutcome>> = Vec::new();
    for repeat in 0..bench.repeats {
        progress(&format!("child cache: repeat {repeat}"));
        let mut order = [
            ("empty", Cache::Empty),
            ("metadata", Cache::Metadata),
            ("objects", Cache::Objects),
        ];
        order.rotate_left(repeat % 3);
        let mut run = BTreeMap::new();
        for (name, cache) in order {
            run.insert(name, child(bench, &spec(cache, options.settle_ms)).await?);
        }
        runs.push(run);
    }
    // The children carry the fleet section's app label (they are its Deployments): leave none for its
    // observer, which counts that label in every namespace. They have no finalizers, so they go at once.
    for namespace in [NAMESPACE, EMPTY_NAMESPACE] {
        Api::<Deployment>::namespaced(children.clone(), namespace)
            .delete_collection(&DeleteParams::background(), &ListParams::default())
            .await
            .map_err(|e| format!("removing the children in {namespace}: {e}"))?;
    }
    let (section, goal) = report(options, &runs);
    sections.insert("child_cache", section);
    goals.push(goal);
    Ok(())
}

/// The section from the runs: "baseline" is the whole-object cache, "kubeplex" the metadata-only one.
fn report(
    options: &ChildCacheOptions,
    runs: &[BTreeMap<&'static str, CacheOutcome>],
) -> (Section, Goal) {
    let n = (options.parents * options.per_parent) as f64;
    // Each run against the reference run of its own repeat.
    let per_child = |cache: &str| -> Vec<f64> {
        runs.iter()
            .map(|run| (run[cache].heap_delta() - run["empty"].heap_delta()) / n)
            .collect()
    };
    let seconds = |cache: &str, of: fn(&CacheOutcome) -> f64| -> Vec<f64> {
        runs.iter().map(|run| of(&run[cache])).collect()
    };
    let synced = |cache: &str| seconds(cache, |o| o.synced_s);
    let settled = |cache: &str| seconds(cache, |o| o.settled_s);
    let heap = Figure::new(
        "heap per cached child",
        "B",
        &per_child("objects"),
        &per_child("metadata"),
    );
    let reference: Vec<f64> = runs
        .iter()
        .map(|run| run["empty"].heap_delta() / 1024.0)
        .collect();
    let reference = Spread::of(&reference);
    let section = Section {
        title: "child cache: whole objects (baseline column) vs metadata and health projection (kubeplex column)"
            .into(),
        method: format!(
            "{} ConfigMap parents in cluster-0 (namespace {NAMESPACE}), each wanting {} Deployments in cluster-1 \
             (as the fleet's children: labels, selector, one container); one kubeplex operator process per run. \
             Baseline column: Child::cache_objects() (whole objects); kubeplex column: the default cache of \
             metadata and health projection. Heap per cached child = (live heap after every child exists, every parent \
             was reconciled, the server answered an apply of every child, {} ms passed and the heap stopped falling - before the manager \
             started - the same for a reference run whose children namespace is empty) / {n}. The test servers run no controller-manager: the Deployments have \
             no status beyond the empty one the API server writes; a real cluster's would add to the whole objects, and \
             its scalars and conditions to the projection.",
            options.parents, options.per_parent, options.settle_ms
        ),
        figures: vec![
            heap.clone(),
            Figure::new(
                "time to synced",
                "s",
                &synced("objects"),
                &synced("metadata"),
            ),
            Figure::new(
                "heap settled after the last apply",
                "s",
                &settled("objects"),
                &settled("metadata"),
            ),
        ],
        notes: vec![format!(
            "reference run (nothing cached): heap delta {:.0} KB (median)",
            reference.median
        )],
    };
    let goal = Goal {
        section: "child_cache",
        goal: format!("heap per cached child, metadata only <= {GOAL_RATIO}x whole objects"),
        measured: format!(
            "{:.0} B vs {:.0} B per child: {:.2}x",
            heap.kubeplex.median, heap.baseline.median, heap.ratio
        ),
        met: heap.ratio <= GOAL_RATIO,
    };
    (section, goal)
}

fn kubeconfig(bench: &Bench) -> Result<Kubeconfig, String> {
    Kubeconfig::read_from(&bench.kubeconfig).map_err(|e| format!("reading the kubeconfig: {e}"))
}

/// Runs one `__child_cache` process (under `KUBEPLEX_BENCH_CHILD_WRAPPER` if set) and reads its outcome.
async fn child(bench: &Bench, spec: &CacheSpec) -> Result<CacheOutcome, String> {
    let side = serde_json::to_value(spec.cache)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    let timeout = WAIT + Duration::from_secs(60);
    bench
        .run("__child_cache", spec, &side, "child-cache run", timeout)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(heap_delta: u64) -> CacheOutcome {
        CacheOutcome {
            settled_s: 0.0,
            synced_s: 0.1,
            children: 0,
            heap_before: 1000,
            heap_after: 1000 + heap_delta,
            rss_before: 0,
            rss_after: 0,
        }
    }

    #[test]
    fn heap_per_child_is_measured_against_the_reference_of_the_same_repeat() {
        let options = ChildCacheOptions {
            parents: 2,
            per_parent: 5,
            settle_ms: 0,
            step_ms: 250,
        };
        let run = |empty, metadata, objects| {
            BTreeMap::from([
                ("empty", outcome(empty)),
                ("metadata", outcome(metadata)),
                ("objects", outcome(objects)),
            ])
        };
        // 10 children: 1 000 and 4 000 B each above the reference, whatever the reference.
        let runs = [run(500, 10_500, 40_500), run(900, 10_900, 40_900)];
        let (section, goal) = report(&options, &runs);
        let heap = &section.figures[0];
        assert_eq!(heap.name, "heap per cached child");
        assert_eq!(heap.kubeplex.samples, [1000.0, 1000.0]);
        assert_eq!(heap.baseline.samples, [4000.0, 4000.0]);
        assert!((heap.ratio - 0.25).abs() < 1e-9, "{}", heap.ratio);
        assert!(goal.met, "{goal:?}");
        let (_, missed) = report(&options, &[run(0, 3500, 10_000)]);
        assert!(!missed.met, "{missed:?}");
    }
}
