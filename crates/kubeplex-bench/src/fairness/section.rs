//! Section `fairness`: creates the noisy and the quiet objects, runs every side `repeats` times (each run a
//! `__fairness` process, the order rotating) and reports.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::config::Kubeconfig;

use super::report::report;
use super::spec::{
    FLOOD_PREFIX, FLOOD_WRITERS, FairnessOptions, FairnessOutcome, FairnessSpec, NAMESPACE,
    NOISY_CLUSTER, QUIET_CLUSTER, QUIET_OBJECT, Variant,
};
use crate::figures::{Goal, Section};
use crate::harness::{Bench, create_namespace, progress};

/// How long one run may take, its own waits included.
const RUN_TIMEOUT: Duration = Duration::from_secs(900);

pub(crate) async fn run(
    bench: &Bench,
    options: &FairnessOptions,
    sections: &mut BTreeMap<&'static str, Section>,
    goals: &mut Vec<Goal>,
) -> Result<(), String> {
    progress(&format!(
        "fairness: creating {} flood objects",
        options.flood
    ));
    let kubeconfig = Kubeconfig::read_from(&bench.kubeconfig)
        .map_err(|e| format!("reading the kubeconfig: {e}"))?;
    let noisy = crate::child::client_for(&kubeconfig, NOISY_CLUSTER).await?;
    let quiet = crate::child::client_for(&kubeconfig, QUIET_CLUSTER).await?;
    create_namespace(&noisy, NAMESPACE).await?;
    create_namespace(&quiet, NAMESPACE).await?;
    create(&quiet, [QUIET_OBJECT.to_owned()]).await?;
    create(
        &noisy,
        (0..options.flood).map(|i| format!("{FLOOD_PREFIX}{i}")),
    )
    .await?;
    let mut runs: BTreeMap<Variant, Vec<FairnessOutcome>> = BTreeMap::new();
    for repeat in 0..bench.repeats {
        let mut order = Variant::ALL;
        order.rotate_left(repeat % Variant::ALL.len());
        for variant in order {
            progress(&format!("fairness: {} (repeat {repeat})", variant.name()));
            let spec = FairnessSpec {
                kubeconfig: bench.kubeconfig.clone(),
                variant,
                flood: options.flood,
                concurrency: options.concurrency,
                work_ms: options.work_ms,
                quiet_period_ms: options.quiet_period_ms,
                pause_ms: options.pause_ms,
                reference_seconds: options.reference_seconds,
                tail_ms: options.tail_ms,
            };
            let outcome = child(bench, &spec).await?;
            runs.entry(variant).or_default().push(outcome);
        }
    }
    let (section, goal) = report(options, &runs);
    sections.insert("fairness", section);
    goals.push(goal);
    Ok(())
}

/// Creates the ConfigMaps `names` in [`NAMESPACE`] ([`FLOOD_WRITERS`] at a time); one there already is fine.
async fn create(client: &Client, names: impl IntoIterator<Item = String>) -> Result<(), String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let creates = names.into_iter().map(|name| {
        let api = api.clone();
        async move {
            let object = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    ..ObjectMeta::default()
                },
                data: Some([("seq".to_owned(), String::new())].into()),
                ..ConfigMap::default()
            };
            match api.create(&PostParams::default(), &object).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
                Err(e) => Err(format!("creating {NAMESPACE}/{name}: {e}")),
            }
        }
    });
    let mut results = stream::iter(creates).buffer_unordered(FLOOD_WRITERS);
    while let Some(result) = results.next().await {
        result?;
    }
    Ok(())
}

/// Runs one `__fairness` process (under `KUBEPLEX_BENCH_CHILD_WRAPPER` if set) and reads its outcome.
async fn child(bench: &Bench, spec: &FairnessSpec) -> Result<FairnessOutcome, String> {
    let side = spec.variant.name();
    bench
        .run("__fairness", spec, side, "fairness run", RUN_TIMEOUT)
        .await
}
