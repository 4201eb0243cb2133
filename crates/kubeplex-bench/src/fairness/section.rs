//! Section `fairness`: creates the noisy and the quiet objects, runs every side `repeats` times (each run a
//! `__fairness` process, the order rotating) and reports.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
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
                reference_seconds: options.reference_seconds,
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
    let json = serde_json::to_string(spec).map_err(|e| e.to_string())?;
    let n = bench.children.fetch_add(1, Ordering::Relaxed).to_string();
    let side = spec.variant.name();
    let mut command = match bench.wrapper.split_first() {
        Some((program, args)) => {
            let mut command = tokio::process::Command::new(program);
            command.args(
                args.iter()
                    .map(|a| a.replace("{n}", &n).replace("{side}", side)),
            );
            command.arg(&bench.exe);
            command
        }
        None => tokio::process::Command::new(&bench.exe),
    };
    command.arg("__fairness").arg(json).kill_on_drop(true);
    let output = tokio::time::timeout(RUN_TIMEOUT, command.output())
        .await
        .map_err(|_| format!("a {side} fairness run did not finish in {RUN_TIMEOUT:?}"))?
        .map_err(|e| format!("cannot run {}: {e}", bench.exe.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!(
            "a {side} fairness run failed ({}): {}",
            output.status,
            tail.join("\n")
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    // A profiler wrapping the process may print after it: the outcome is the last JSON line.
    let line = stdout
        .lines()
        .rfind(|l| l.starts_with('{'))
        .unwrap_or_default();
    serde_json::from_str(line).map_err(|e| format!("a {side} fairness run printed {line:?}: {e}"))
}
