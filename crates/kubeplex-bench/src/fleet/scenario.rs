//! Section `fleet`: the scenario itself. P parents (`FleetApp`, like the example's `AppDeployment`) in the
//! control cluster, each wanting a Deployment in N namespaces of C child clusters; the kubeplex operator
//! against the kube-rs operator a user writes for the same job ([`super::baseline`]). Each run is one
//! fresh operator process; the parent creates the parents, then times every phase with its own watches.

use std::collections::BTreeMap;
use std::time::Instant;

use futures::{StreamExt, stream};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt};

use super::app::{FleetApp, FleetAppSpec, PARENT_NAMESPACE};
use super::child::{FleetSpec, Reading, Synced};
use super::observe::{ChildKey, Observer, ReadyzPoller, Requests, requests};
use super::process::Operator;
use super::setup::{FleetOptions, Host, PHASE, Sample};
use crate::child::Side;
use crate::figures::{Goal, Section};
use crate::harness::create_namespace;

/// The control cluster, then the clusters child context i lives in (`i mod 3`, from the second).
const CLUSTERS: [&str; 3] = ["cluster-0", "cluster-1", "cluster-2"];
const IN_FLIGHT: usize = 32;
/// How often the admission run's reviews are sent: 200 a second, one at a time.
const ADMISSION_EVERY: std::time::Duration = std::time::Duration::from_millis(5);

struct Clients {
    control: Client,
    children: Vec<Client>,
    /// Every API server once, for the request counters.
    servers: Vec<Client>,
}

pub(crate) async fn run(
    host: &Host<'_>,
    options: &FleetOptions,
) -> Result<(Section, Vec<Goal>), String> {
    if !(1..=3).contains(&options.clusters) || options.namespaces == 0 || options.parents == 0 {
        return Err("fleet: 1 to 3 child clusters, at least 1 namespace and 1 parent".into());
    }
    let clients = setup(host, options).await?;
    let mut sizes: Vec<usize> = options.scale.clone();
    sizes.push(options.parents);
    sizes.sort_unstable();
    sizes.dedup();
    let mut runs: BTreeMap<usize, (Vec<Sample>, Vec<Sample>)> = BTreeMap::new();
    let mut n = 0;
    for &parents in &sizes {
        for repeat in 0..host.repeats {
            let order = if repeat % 2 == 0 {
                [Side::Baseline, Side::Kubeplex]
            } else {
                [Side::Kubeplex, Side::Baseline]
            };
            for side in order {
                crate::harness::progress(&format!("fleet: P={parents}, {side:?}, repeat {repeat}"));
                let sample = run_once(host, options, &clients, side, parents, n, false).await?;
                n += 1;
                let entry = runs.entry(parents).or_default();
                match side {
                    Side::Baseline => entry.0.push(sample),
                    Side::Kubeplex => entry.1.push(sample),
                }
            }
        }
    }
    // Once more, kubeplex alone at P with its webhook called throughout: the admission figure, apart from
    // the ratios (the reviews' work would count in its CPU).
    crate::harness::progress(&format!("fleet: P={}, admission", options.parents));
    let admission = run_once(
        host,
        options,
        &clients,
        Side::Kubeplex,
        options.parents,
        n,
        true,
    )
    .await?;
    Ok(super::report::report(options, &runs, &admission))
}

async fn setup(host: &Host<'_>, options: &FleetOptions) -> Result<Clients, String> {
    host.env
        .install_crd(CLUSTERS[0], FleetApp::crd())
        .await
        .map_err(|e| e.to_string())?;
    let client = |cluster: &'static str| async move {
        host.env.client(cluster).await.map_err(|e| e.to_string())
    };
    let control = client(CLUSTERS[0]).await?;
    let mut children = Vec::new();
    for i in 0..options.clusters {
        children.push(client(CLUSTERS[(i + 1) % 3]).await?);
    }
    let mut servers = Vec::new();
    for cluster in CLUSTERS {
        servers.push(client(cluster).await?);
    }
    create_namespace(&control, PARENT_NAMESPACE).await?;
    for cluster in &children {
        for namespace in child_namespaces(options) {
            create_namespace(cluster, &namespace).await?;
        }
    }
    Ok(Clients {
        control,
        children,
        servers,
    })
}

pub(super) fn child_namespaces(options: &FleetOptions) -> Vec<String> {
    (0..options.namespaces)
        .map(|i| format!("fleet-{i}"))
        .collect()
}

pub(super) fn child_contexts(options: &FleetOptions) -> Vec<String> {
    (0..options.clusters)
        .map(|i| format!("child-{i}"))
        .collect()
}

/// One side at one size: create the parents, start the operator, converge, repair, delete. With
/// `admission` (kubeplex), the operator serves a webhook the parent calls every [`ADMISSION_EVERY`] from
/// its start until every parent is ready.
async fn run_once(
    host: &Host<'_>,
    options: &FleetOptions,
    clients: &Clients,
    side: Side,
    parents: usize,
    n: usize,
    admission: bool,
) -> Result<Sample, String> {
    let image = format!("registry.example/app:run-{n}");
    let contexts = child_contexts(options);
    let per_cluster = options.namespaces as u32;
    let observer = Observer::start(
        clients.control.clone(),
        &clients.children,
        &image,
        contexts.clone(),
        per_cluster,
    )
    .await?;
    if observer.with(|w| w.parents() + w.children()) > 0 {
        clean(clients, options).await?;
        observer
            .until("nothing left from an earlier run", PHASE, |w| {
                w.parents() == 0 && w.children() == 0
            })
            .await?;
    }
    create_parents(clients, options, &image, parents).await?;
    let total_children = parents * options.clusters * options.namespaces;

    let requests_before = requests(&clients.servers).await?;
    let server_cpu_before = crate::system::processes_seconds(&host.server_pids);
    let spec = FleetSpec {
        side,
        kubeconfig: host.kubeconfig.clone(),
        control: CLUSTERS[0].to_owned(),
        children: contexts
            .iter()
            .enumerate()
            .map(|(i, c)| (c.clone(), CLUSTERS[(i + 1) % 3].to_owned()))
            .collect(),
        namespaces: child_namespaces(options),
        concurrency: None,
        election: None,
        members: None,
        admission,
    };
    let started = Instant::now();
    let mut operator = Operator::spawn(host, &spec, n)?;
    let synced: Synced = operator.next("its caches synced").await?;
    let poller = synced.probe.clone().map(ReadyzPoller::start);
    let (stop_load, stopped) = tokio::sync::watch::channel(false);
    let load = (synced.webhook.clone()).map(|(address, ca)| {
        tokio::spawn(super::admission::load(
            address,
            ca,
            ADMISSION_EVERY,
            stopped,
        ))
    });

    let children_at = observer
        .until("every child", PHASE, |w| w.good == total_children)
        .await?;
    let ready_at = observer
        .until("every parent ready", PHASE, |w| w.ready == parents)
        .await?;
    let converged: Reading = operator.ask().await?;
    let _ = stop_load.send(true);
    let admission_ms = match load {
        Some(load) => load.await.map_err(|e| e.to_string())??,
        None => Vec::new(),
    };
    let admission_served = match (&synced.webhook, &synced.probe) {
        (Some(_), Some(probe)) => {
            super::admission::served_within_5ms(&crate::harness::operator_metrics(probe).await?)
        }
        _ => (0.0, 0.0),
    };
    let server_cpu_converged = crate::system::processes_seconds(&host.server_pids);

    let victims = observer.with(|w| w.pick_tenth());
    let repair_from = Instant::now();
    delete_children(clients, &victims).await?;
    let repaired_at = observer
        .until("every deleted child back", PHASE, |w| {
            w.back == victims.len()
        })
        .await?;
    let repaired: Reading = operator.ask().await?;

    let delete_from = Instant::now();
    Api::<FleetApp>::namespaced(clients.control.clone(), PARENT_NAMESPACE)
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .map_err(|e| format!("deleting the parents: {e}"))?;
    let deleted_at = observer
        .until("every parent and child gone", PHASE, |w| {
            w.parents() == 0 && w.children() == 0
        })
        .await?;
    let deleted: Reading = operator.ask().await?;
    let readyz = poller.map(ReadyzPoller::stop);
    operator.exit().await?;
    let server_cpu = crate::system::processes_seconds(&host.server_pids);
    let counted: Requests = requests(&clients.servers).await? - requests_before;
    // The parent's own deletes of a tenth of the children and of the parents are not the operator's.
    let own = (victims.len() + 1) as f64;
    Ok(Sample {
        synced_s: synced.synced_s,
        children_s: (children_at - started).as_secs_f64(),
        ready_s: (ready_at - started).as_secs_f64(),
        repair_s: (repaired_at - repair_from).as_secs_f64(),
        delete_s: (deleted_at - delete_from).as_secs_f64(),
        converged,
        repaired,
        deleted,
        rss_before: synced.rss_before,
        heap_before: synced.heap_before,
        server_cpu_converged_s: server_cpu_converged - server_cpu_before,
        server_cpu_s: server_cpu - server_cpu_before,
        requests: counted.total - own,
        conflicts: counted.conflicts,
        requests_by_kind: counted.by_kind,
        readyz,
        admission_ms,
        admission_served,
    })
}

async fn create_parents(
    clients: &Clients,
    options: &FleetOptions,
    image: &str,
    parents: usize,
) -> Result<(), String> {
    let api: Api<FleetApp> = Api::namespaced(clients.control.clone(), PARENT_NAMESPACE);
    let namespaces = child_namespaces(options);
    let creates = (0..parents).map(|i| {
        let app = FleetApp::new(
            &format!("app-{i:04}"),
            FleetAppSpec {
                image: image.to_owned(),
                replicas: 1,
                namespaces: namespaces.clone(),
            },
        );
        let api = api.clone();
        async move {
            api.create(&PostParams::default(), &app)
                .await
                .map(drop)
                .map_err(|e| format!("creating parent {i}: {e}"))
        }
    });
    stream::iter(creates)
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

async fn delete_children(clients: &Clients, victims: &[ChildKey]) -> Result<(), String> {
    let deletes = victims.iter().map(|(cluster, namespace, name)| {
        let api: Api<Deployment> = Api::namespaced(clients.children[*cluster].clone(), namespace);
        async move {
            match api.delete(name, &DeleteParams::background()).await {
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                other => other
                    .map(drop)
                    .map_err(|e| format!("deleting child {namespace}/{name}: {e}")),
            }
        }
    });
    stream::iter(deletes)
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

/// Removes whatever a failed run left: parents (their finalizers first) and children.
async fn clean(clients: &Clients, options: &FleetOptions) -> Result<(), String> {
    let api: Api<FleetApp> = Api::namespaced(clients.control.clone(), PARENT_NAMESPACE);
    let unfinalize = serde_json::json!({ "metadata": { "finalizers": null } });
    for app in api
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
    {
        let name = kube::ResourceExt::name_any(&app);
        let _ = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&unfinalize))
            .await;
    }
    let _ = api
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    for cluster in &clients.children {
        for namespace in child_namespaces(options) {
            let _ = Api::<Deployment>::namespaced(cluster.clone(), &namespace)
                .delete_collection(&DeleteParams::background(), &ListParams::default())
                .await;
        }
    }
    Ok(())
}
