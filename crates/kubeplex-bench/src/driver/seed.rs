//! The objects every section uses: the namespaces and ConfigMaps created on the clusters before the first run.

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use kubeplex_testenv::TestEnv;

use crate::config::Options;
use crate::harness::CLUSTERS;

fn config_map(namespace: &str, name: String, index: usize) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.to_owned()),
            labels: Some([("app".to_owned(), "kubeplex-bench".to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some(
            [
                ("index".to_owned(), index.to_string()),
                // A few hundred bytes, like a small real ConfigMap.
                ("payload".to_owned(), "x".repeat(256)),
            ]
            .into(),
        ),
        ..ConfigMap::default()
    }
}

/// Creates the namespaces and objects every section uses, concurrently.
pub(super) async fn seed(env: &TestEnv, options: &Options) -> Result<usize, String> {
    let mut clients = Vec::new();
    for cluster in CLUSTERS {
        clients.push(env.client(cluster).await.map_err(|e| e.to_string())?);
    }
    // (cluster index, namespace, name prefix, count)
    let mut plan: Vec<(usize, &str, &str, usize)> = Vec::new();
    for c in 0..3 {
        if options.runs("startup") || options.runs("startup_remote") {
            plan.push((c, "bench-start", "obj", options.startup_objects));
        }
        if options.runs("throughput") {
            let share =
                options.throughput_objects / 3 + usize::from(c < options.throughput_objects % 3);
            plan.push((c, "bench-tp", "obj", share));
        }
        if options.runs("many_contexts") {
            plan.push((c, "bench-idle", "obj", 0));
        }
    }
    if options.runs("memory") {
        plan.push((0, "bench-mem", "obj", options.memory_objects));
    }
    if options.runs("latency") {
        plan.push((0, "bench-lat", "lat", options.latency_objects));
    }
    for (c, namespace, _, _) in &plan {
        let namespaces: Api<Namespace> = Api::all(clients[*c].clone());
        let object = Namespace {
            metadata: ObjectMeta {
                name: Some((*namespace).to_owned()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        match namespaces.create(&PostParams::default(), &object).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => return Err(format!("creating namespace {namespace}: {e}")),
        }
    }
    let creates = plan.iter().flat_map(|(c, namespace, prefix, count)| {
        let client: Client = clients[*c].clone();
        (0..*count).map(move |i| {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
            let object = config_map(namespace, format!("{prefix}-{i}"), i);
            async move {
                match api.create(&PostParams::default(), &object).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
                    Err(e) => Err(format!("creating {namespace}/{prefix}-{i}: {e}")),
                }
            }
        })
    });
    let results: Vec<Result<(), String>> =
        stream::iter(creates).buffer_unordered(32).collect().await;
    let created = results.len();
    results.into_iter().collect::<Result<(), String>>()?;
    Ok(created)
}
