//! The one-command demo: local real clusters, the operator, CRD-A and CRD-B, and a table of what exists
//! where; then a cluster joins the fleet and leaves it again ([`members`]), and a progressive rollout halts
//! at a Degraded cluster and resumes when it recovers ([`rollout`]).

pub mod kubelet;
pub mod members;
pub mod rollout;
pub mod webhooks;

use kube::CustomResourceExt as _;
use std::fmt::Write as _;
use std::io::Write as _;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kubeplex::{
    ClusterState, Context, Manager, members::KubeconfigSecrets, members::LeavePolicy,
    ownership::PARENT_ANNOTATION,
};
use kubeplex_testenv::TestEnv;

use crate::{
    AppDeployer, AppDeployment, CHILD_NAMESPACES, CRD_NAMESPACE, Fleet, MEMBER_SELECTOR,
    MEMBERS_NAMESPACE,
};

/// Anything the demo can fail with.
pub type DemoError = Box<dyn std::error::Error + Send + Sync>;

/// The two instances of the scenario: name, image, replicas. The second is written in `v2`.
pub const INSTANCES: [(&str, &str, i32); 2] =
    [("crd-a", "nginx:1.27", 2), ("crd-b", "redis:7.4", 1)];

/// Runs the scenario; with `exit_after_table`, returns once the last table is printed (cluster-c joined
/// and left, the rollout complete), else runs until Ctrl-C.
///
/// A closed stdout (`fleet demo | head`) ends it with the [`std::io::ErrorKind::BrokenPipe`] error.
pub async fn run(exit_after_table: bool) -> Result<(), DemoError> {
    let mut out = std::io::stdout();
    writeln!(
        out,
        "Starting four real Kubernetes API servers: control, cluster-a, cluster-b, and {} (it joins the \
         fleet later) ...",
        members::CLUSTER_C
    )?;
    let env = start_clusters(&[members::CLUSTER_C]).await?;
    members::create_namespaces(&env).await?;

    writeln!(
        out,
        "Starting the operator (probes on 127.0.0.1, watching {CRD_NAMESPACE} in control; members of the \
         fleet from the Secrets labelled {MEMBER_SELECTOR} in {MEMBERS_NAMESPACE}) ..."
    )?;
    // As `fleet run --members-from-secrets kubeplex.io/fleet=kubeplex-fleet` runs it.
    let secrets = KubeconfigSecrets::new(Fleet::Control, MEMBERS_NAMESPACE, MEMBER_SELECTOR);
    let owns = CHILD_NAMESPACES.map(str::to_owned).to_vec();
    let checks =
        crate::admission::webhooks(owns, "127.0.0.1:0".into(), None, MEMBERS_NAMESPACE, vec![]);
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .probes("127.0.0.1:0")
        .webhooks(checks)
        .controller(AppDeployer::default())
        .members(secrets, LeavePolicy::Delete)
        .start()
        .await?;
    tokio::time::timeout(Duration::from_secs(60), running.wait_started()).await??;
    let probes = running.probe_address().expect("probes were asked for");
    writeln!(
        out,
        "Operator started: every context is reachable, authorised and synced (http://{probes}/startupz)."
    )?;

    let control = env.client(Fleet::Control.name()).await?;
    let port = running
        .webhook_address()
        .expect("webhooks were asked for")
        .port();
    webhooks::register(&control, port).await?;
    let refusal = webhooks::refusal(&control, Duration::from_secs(60)).await?;
    writeln!(
        out,
        "Webhooks on https://127.0.0.1:{port} check every AppDeployment written to {CRD_NAMESPACE}: one whose \
         rollout order names cluster-x is refused: {refusal}"
    )?;
    let [(v1_name, image, replicas), (v2_name, v2_image, v2_replicas)] = INSTANCES;
    apply_instance(&control, CRD_NAMESPACE, v1_name, image, replicas).await?;
    writeln!(
        out,
        "Applied AppDeployment {CRD_NAMESPACE}/{v1_name} (image {image}, {replicas} replicas) to control, in v1."
    )?;
    let within = Duration::from_secs(60);
    webhooks::apply_v2(&control, v2_name, v2_image, v2_replicas, within).await?;
    writeln!(
        out,
        "Applied AppDeployment {CRD_NAMESPACE}/{v2_name} (image {v2_image}, {v2_replicas} replicas) to control, \
         in v2 (spec.workload instead of spec.image and spec.replicas)."
    )?;
    let mut clients = Clients::connect(&env).await?;
    wait_until_applied(&clients, Duration::from_secs(120)).await?;
    writeln!(out, "\n{}", table(&clients).await?)?;
    let (as_v2, as_v1) = webhooks::read_across(&control, v1_name, v2_name).await?;
    writeln!(
        out,
        "Either version reads either object, converted by the operator: {v1_name} in v2 has \
         spec.workload.image {as_v2}; {v2_name} in v1 has spec.image {as_v1}."
    )?;
    writeln!(out, "Metrics: http://{probes}/metrics")?;
    for line in crate::figures::summary(&crate::figures::scrape(probes).await?) {
        writeln!(out, "{line}")?;
    }
    members::join_and_leave(&env, &mut clients, &mut out).await?;
    rollout::progressive(&mut clients, &mut out).await?;

    if !exit_after_table {
        writeln!(
            out,
            "Try: KUBECONFIG={} kubectl --context cluster-b -n namespace-a delete deployment crd-a",
            env.kubeconfig_path().display()
        )?;
        writeln!(
            out,
            "     (the operator recreates it). Ctrl-C stops the operator and the clusters."
        )?;
        tokio::signal::ctrl_c().await?;
    }
    running.shutdown().await;
    Ok(())
}

/// The scenario's three real clusters — `control` with the `AppDeployment` CRD and namespace `crds`,
/// `cluster-a` and `cluster-b` with `namespace-a` and `namespace-b` — and the `extra` ones (without
/// namespaces yet).
async fn start_clusters(extra: &[&str]) -> Result<TestEnv, DemoError> {
    let fleet = <Fleet as kubeplex::ContextSet>::ALL
        .iter()
        .map(|c| c.name());
    let env = TestEnv::builder()
        .clusters(fleet.chain(extra.iter().copied()))
        .crd(Fleet::Control.name(), AppDeployment::crd())
        .start()
        .await?;
    create_namespaces(&env).await?;
    Ok(env)
}

/// Clients for the control cluster and the child clusters shown in the table.
pub struct Clients {
    control: Client,
    /// Each child cluster by name: cluster-a, cluster-b, then the members shown.
    children: Vec<(String, Client)>,
}

impl Clients {
    /// Clients with admin credentials from the environment.
    pub async fn connect(env: &TestEnv) -> Result<Self, DemoError> {
        let mut children = Vec::new();
        for cluster in [Fleet::ClusterA, Fleet::ClusterB] {
            let name = cluster.name();
            children.push((name.to_owned(), env.client(name).await?));
        }
        Ok(Self {
            control: env.client(Fleet::Control.name()).await?,
            children,
        })
    }
}

/// Creates the scenario's namespaces: `crds` in control, `namespace-a` and `namespace-b` in each child cluster.
pub async fn create_namespaces(env: &TestEnv) -> Result<(), DemoError> {
    let wanted = [(Fleet::Control, vec![CRD_NAMESPACE])]
        .into_iter()
        .chain([Fleet::ClusterA, Fleet::ClusterB].map(|c| (c, CHILD_NAMESPACES.to_vec())));
    for (cluster, namespaces) in wanted {
        create_namespaces_in(env, cluster.name(), &namespaces).await?;
    }
    Ok(())
}

/// Creates `namespaces` in `cluster`.
async fn create_namespaces_in(
    env: &TestEnv,
    cluster: &str,
    namespaces: &[&str],
) -> Result<(), DemoError> {
    let api: Api<Namespace> = Api::all(env.client(cluster).await?);
    for name in namespaces {
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some((*name).into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        api.create(&PostParams::default(), &namespace).await?;
    }
    Ok(())
}

/// Creates or updates an `AppDeployment` in `namespace` of the control cluster (server-side apply).
pub async fn apply_instance(
    control: &Client,
    namespace: &str,
    name: &str,
    image: &str,
    replicas: i32,
) -> Result<(), DemoError> {
    let spec = serde_json::json!({ "image": image, "replicas": replicas });
    apply_spec(control, namespace, name, spec).await
}

/// Applies an `AppDeployment` called `name` with `spec` in `namespace` of the control cluster (server-side
/// apply).
async fn apply_spec(
    control: &Client,
    namespace: &str,
    name: &str,
    spec: serde_json::Value,
) -> Result<(), DemoError> {
    let api: Api<AppDeployment> = Api::namespaced(control.clone(), namespace);
    let object = serde_json::json!({
        "apiVersion": "demo.kubeplex.dev/v1", "kind": "AppDeployment",
        "metadata": { "name": name },
        "spec": spec,
    });
    api.patch(
        name,
        &PatchParams::apply("kubeplex-fleet-demo"),
        &Patch::Apply(&object),
    )
    .await?;
    Ok(())
}

/// Waits until every instance is applied, and `Applied` in each child cluster of `clients`.
async fn wait_until_applied(clients: &Clients, timeout: Duration) -> Result<(), DemoError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let api: Api<AppDeployment> = Api::namespaced(clients.control.clone(), CRD_NAMESPACE);
    loop {
        let apps = api.list(&ListParams::default()).await?.items;
        let everywhere = |app: &AppDeployment| {
            let states = app.status.as_ref().map(|s| &s.fleet.clusters);
            (clients.children.iter()).all(|(cluster, _)| {
                let state = states.and_then(|c| c.get(cluster)).map(|c| c.state);
                state == Some(ClusterState::Applied)
            })
        };
        let ready = apps.len() == INSTANCES.len()
            && apps
                .iter()
                .all(|app| condition(app, "Applied") == "True" && everywhere(app));
        if ready {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "the AppDeployments were not Applied after {timeout:?}:\n{}",
                table(clients).await?
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The status of the condition `type_` of `app`, `-` when it has none.
fn condition(app: &AppDeployment, type_: &str) -> String {
    let conditions = app
        .status
        .as_ref()
        .map(|s| s.fleet.conditions.as_slice())
        .unwrap_or_default();
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map_or_else(|| "-".to_owned(), |c| c.status.clone())
}

/// What exists where: the Deployments of every child cluster and namespace, and each `AppDeployment`'s
/// per-cluster status.
pub async fn table(clients: &Clients) -> Result<String, DemoError> {
    let mut out = String::new();
    writeln!(out, "Deployments in the child clusters")?;
    writeln!(
        out,
        "{:<10} {:<12} {:<8} {:>8} {:>9}  {:<11} PARENT",
        "CLUSTER", "NAMESPACE", "NAME", "REPLICAS", "AVAILABLE", "IMAGE"
    )?;
    for (cluster, client) in &clients.children {
        for namespace in CHILD_NAMESPACES {
            let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
            let mut deployments = api.list(&ListParams::default()).await?.items;
            deployments.sort_by_key(ResourceExt::name_any);
            for deployment in deployments {
                let spec = &deployment.spec;
                let image = spec
                    .template
                    .spec
                    .as_ref()
                    .and_then(|p| p.containers.first())
                    .and_then(|c| c.image.clone());
                let image = image.unwrap_or_default();
                let replicas = spec.replicas.unwrap_or_default();
                // Nothing runs pods in the demo's clusters: what the rollout's part plays, else 0.
                let available = (deployment.status.as_ref())
                    .and_then(|s| s.available_replicas)
                    .unwrap_or_default();
                let parent = deployment
                    .annotations()
                    .get(PARENT_ANNOTATION)
                    .cloned()
                    .unwrap_or_else(|| "-".into());
                writeln!(
                    out,
                    "{cluster:<10} {namespace:<12} {:<8} {replicas:>8} {available:>9}  {image:<11} {parent}",
                    deployment.name_any()
                )?;
            }
        }
    }
    writeln!(
        out,
        "\nAppDeployments in control, namespace {CRD_NAMESPACE}"
    )?;
    // The Applied and Ready conditions, the rollout's phase, then one column per child cluster: its state
    // in each AppDeployment's status, as wide as its widest cell (at least 24).
    let names: Vec<&String> = clients.children.iter().map(|(name, _)| name).collect();
    let api: Api<AppDeployment> = Api::namespaced(clients.control.clone(), CRD_NAMESPACE);
    let apps = api.list(&ListParams::default()).await?.items;
    let mut rows = vec![(
        "NAME".to_owned(),
        ["APPLIED".to_owned(), "READY".to_owned()],
        "ROLLOUT".to_owned(),
        names.iter().map(|n| n.to_uppercase()).collect::<Vec<_>>(),
    )];
    for app in &apps {
        let cluster = |name: &&String| {
            let status = app
                .status
                .as_ref()
                .and_then(|s| s.fleet.clusters.get(*name));
            status.map_or_else(|| "-".to_owned(), kubeplex::status::ClusterStatus::line)
        };
        let rollout = app.status.as_ref().and_then(|s| s.rollout.as_ref());
        rows.push((
            app.name_any(),
            ["Applied", "Ready"].map(|c| condition(app, c)),
            rollout.map_or("-", |r| r.phase.as_str()).to_owned(),
            names.iter().map(cluster).collect(),
        ));
    }
    let widths: Vec<usize> = (0..names.len())
        .map(|i| rows.iter().map(|row| row.3[i].len()).fold(24, usize::max))
        .collect();
    for (name, [applied, ready], rollout, clusters) in &rows {
        let clusters = clusters
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"));
        let line = format!(
            "{name:<8} {applied:<7} {ready:<7} {rollout:<11} {}",
            clusters.collect::<Vec<_>>().join(" ")
        );
        writeln!(out, "{}", line.trim_end())?;
    }
    for app in &apps {
        if let Some(rollout) = app.status.as_ref().and_then(|s| s.rollout.as_ref()) {
            writeln!(
                out,
                "{} rollout of {}: {}",
                app.name_any(),
                rollout.image,
                rollout.message
            )?;
        }
    }
    Ok(out)
}
