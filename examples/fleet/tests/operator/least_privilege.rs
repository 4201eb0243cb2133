//! The operator runs under the grants the Helm charts render (`chart/`, `chart-child/`, with `deploy/`'s
//! values), and needs them.
//!
//! Each test applies the Namespaces of `deploy/control` and the ServiceAccount and (Cluster)Roles/Bindings
//! the operator's chart renders to the cluster `control`, those of `deploy/child` and the child clusters'
//! chart to `cluster-a` and `cluster-b`, gets a token of each cluster's
//! ServiceAccount `kubeplex-system/kubeplex-fleet` from the TokenRequest API, and runs the operator with
//! those tokens only: create, update, narrow (prune), conflict (status and an Event), delete. A test runs
//! with a grant removed and must fail with the API server's 403 naming it; another runs the `fleet run`
//! binary as the manifests do, `control` through the in-cluster service account, members from Secrets
//! included (it puts its finalizer on a member Secret and lets it go when it is deleted).

/// The RBAC the chart renders, in `least_privilege/`.
pub mod rbac;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::CustomResourceExt as _;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::Kubeconfig;
use kubeplex::{ClusterState, Context as _, Manager, Running, ownership::PARENT_UID_LABEL};
use kubeplex_fleet::{AppDeployer, AppDeployment, CHILD_NAMESPACES, CRD_NAMESPACE, Fleet};
use kubeplex_testenv::{SharedTestEnv, TestEnv};
use rbac::{
    MANAGER, SA_NAMESPACE, SA_USER, WAIT, eventually, install, token_kubeconfig, try_eventually,
};
use serde_json::json;

const CHILDREN: [Fleet; 2] = [Fleet::ClusterA, Fleet::ClusterB];

/// Clusters of their own, never attached to a set other binaries use: the manifests' grants and namespaces
/// have fixed names, which the chart's dry runs on the shared set would meet.
static CLUSTERS: SharedTestEnv = SharedTestEnv::private(|| {
    TestEnv::builder()
        .clusters(["control", "cluster-a", "cluster-b"])
        .crd("control", AppDeployment::crd())
});
/// The tests share the manifests' namespaces, ServiceAccounts and Roles, so they run one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn operator(kubeconfig: Kubeconfig) -> Running {
    let running = Manager::with_kubeconfig(kubeconfig)
        .controller(AppDeployer::default())
        .start()
        .await
        .expect("the operator starts");
    tokio::time::timeout(WAIT, running.wait_started())
        .await
        .expect("every context ready in time under the manifests' grants")
        .expect("started");
    running
}

async fn apps(env: &TestEnv) -> Api<AppDeployment> {
    Api::namespaced(env.client("control").await.unwrap(), CRD_NAMESPACE)
}

async fn apply_app(env: &TestEnv, name: &str, image: &str, replicas: i32, namespaces: &[&str]) {
    let object = json!({
        "apiVersion": "demo.kubeplex.dev/v1", "kind": "AppDeployment",
        "metadata": { "name": name },
        "spec": { "image": image, "replicas": replicas, "namespaces": namespaces },
    });
    apps(env)
        .await
        .patch(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("applying AppDeployment {name}: {e}"));
}

async fn deployments(env: &TestEnv, cluster: Fleet, namespace: &str) -> Api<Deployment> {
    Api::namespaced(env.client(cluster.name()).await.unwrap(), namespace)
}

/// The children of `name` are exactly one per cluster × `namespaces`, with this image and replicas.
async fn children_are(
    env: &TestEnv,
    name: &str,
    image: &str,
    replicas: i32,
    namespaces: &[&str],
) -> Result<(), String> {
    let uid = apps(env)
        .await
        .get(name)
        .await
        .map_err(|e| e.to_string())?
        .uid();
    for cluster in CHILDREN {
        for namespace in CHILD_NAMESPACES {
            let found = deployments(env, cluster, namespace)
                .await
                .get_opt(name)
                .await
                .map_err(|e| e.to_string())?;
            let wanted = namespaces.contains(&namespace);
            let actual = found.as_ref().map(|d| {
                let pod = d.spec.template.spec.as_ref();
                let image = pod
                    .and_then(|p| p.containers[0].image.clone())
                    .unwrap_or_default();
                (
                    d.spec.replicas,
                    image,
                    d.labels().get(PARENT_UID_LABEL).cloned(),
                )
            });
            let expected = wanted.then(|| (Some(replicas), image.to_owned(), uid.clone()));
            if actual != expected {
                return Err(format!(
                    "{cluster}/{namespace}/{name}: {actual:?}, expected {expected:?}"
                ));
            }
        }
    }
    Ok(())
}

/// Each child cluster's state and message in the status of `name`, and its `Ready` condition.
async fn status(
    env: &TestEnv,
    name: &str,
) -> Result<(Vec<(ClusterState, String)>, String), String> {
    let app = apps(env).await.get(name).await.map_err(|e| e.to_string())?;
    let fleet = app.status.map(|s| s.fleet).unwrap_or_default();
    let states = CHILDREN.iter().map(|c| {
        let state = fleet.clusters.get(c.name());
        state.map_or((ClusterState::NotTargeted, "no status".into()), |s| {
            (s.state, s.message.clone().unwrap_or_default())
        })
    });
    let ready = fleet
        .conditions
        .iter()
        .find(|c| c.type_ == "Applied")
        .map(|c| c.status.clone());
    Ok((states.collect(), ready.unwrap_or_default()))
}

async fn all_ready(env: &TestEnv, name: &str) -> Result<(), String> {
    match status(env, name).await? {
        (states, ready)
            if states.iter().all(|s| s.0 == ClusterState::Applied) && ready == "True" =>
        {
            Ok(())
        }
        other => Err(format!("{other:?}")),
    }
}

/// Deletes the `AppDeployment` `name` and waits until it is gone (its finalizer removed).
async fn try_delete(env: &TestEnv, name: &str) -> Result<(), String> {
    let deleted = apps(env).await.delete(name, &DeleteParams::default()).await;
    deleted.map_err(|e| format!("deleting {name}: {e}"))?;
    try_eventually(
        &format!("{name} deleted, its finalizer removed"),
        || async {
            match apps(env)
                .await
                .get_opt(name)
                .await
                .map_err(|e| e.to_string())?
            {
                None => Ok(()),
                Some(app) => Err(format!(
                    "still there: {:?} {:?}",
                    app.finalizers(),
                    app.status
                )),
            }
        },
    )
    .await
}

async fn delete_and_wait(env: &TestEnv, name: &str) {
    if let Err(problem) = try_delete(env, name).await {
        panic!("{problem}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_runs_under_the_deploy_manifests_grants() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let env = CLUSTERS.get().await.unwrap();
    scenario(env).await;
}

/// Create, update, narrow, conflict, delete: every step under the manifests' grants.
async fn scenario(env: &TestEnv) {
    let kubeconfig = token_kubeconfig(env, &install(env, None).await).await;
    let running = operator(kubeconfig).await;
    let both = &CHILD_NAMESPACES[..];

    apply_app(env, "lp-app", "nginx:1.27", 2, both).await;
    eventually("children created", || {
        children_are(env, "lp-app", "nginx:1.27", 2, both)
    })
    .await;
    eventually("status Ready in both clusters", || all_ready(env, "lp-app")).await;
    apply_app(env, "lp-app", "nginx:1.28", 3, both).await;
    eventually("children updated", || {
        children_are(env, "lp-app", "nginx:1.28", 3, both)
    })
    .await;
    apply_app(env, "lp-app", "nginx:1.28", 3, &["namespace-a"]).await;
    eventually("namespace-b's children pruned", || {
        children_are(env, "lp-app", "nginx:1.28", 3, &["namespace-a"])
    })
    .await;

    // A name taken by a Deployment that is not the operator's: Conflict in the status, and an Event.
    let taken = serde_json::from_value::<Deployment>(json!({
        "metadata": { "name": "lp-taken" },
        "spec": { "selector": { "matchLabels": { "app": "x" } },
                  "template": { "metadata": { "labels": { "app": "x" } },
                                "spec": { "containers": [{ "name": "x", "image": "x" }] } } },
    }))
    .unwrap();
    deployments(env, Fleet::ClusterA, "namespace-a")
        .await
        .create(&PostParams::default(), &taken)
        .await
        .unwrap();
    apply_app(env, "lp-taken", "redis:7.4", 1, &["namespace-a"]).await;
    eventually("Conflict in the status", || async {
        match status(env, "lp-taken").await? {
            (states, _)
                if states[0].0 == ClusterState::Conflict
                    && states[1].0 == ClusterState::Applied =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let events: Api<Event> = Api::namespaced(env.client("control").await.unwrap(), CRD_NAMESPACE);
    eventually("a ChildConflict Event on lp-taken", || async {
        let list = events
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let found = list.items.iter().any(|e| {
            e.reason.as_deref() == Some("ChildConflict")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("lp-taken")
                && e.reporting_controller.is_some()
        });
        found
            .then_some(())
            .ok_or_else(|| format!("{} events, none for lp-taken", list.items.len()))
    })
    .await;

    for name in ["lp-app", "lp-taken"] {
        delete_and_wait(env, name).await;
    }
    // The operator's children went with their parents; the Deployment that was not the operator's stays.
    for cluster in CHILDREN {
        for namespace in CHILD_NAMESPACES {
            for name in ["lp-app", "lp-taken"] {
                let api = deployments(env, cluster, namespace).await;
                let left = api.get_opt(name).await.unwrap();
                if (cluster, namespace, name) == (Fleet::ClusterA, "namespace-a", "lp-taken") {
                    let kept = left.expect("the Deployment that was not the operator's stays");
                    assert!(
                        !kept.labels().contains_key(PARENT_UID_LABEL),
                        "never taken over"
                    );
                } else {
                    assert!(left.is_none(), "{cluster}/{namespace}/{name} left behind");
                }
            }
        }
    }
    tokio::time::timeout(std::time::Duration::from_secs(60), running.shutdown())
        .await
        .expect("the operator shuts down within 60 s");
}

/// The test above can fail: without `patch` on Deployments in the child clusters' Roles, applying a
/// child is refused with a 403 naming the verb, the resource and the ServiceAccount, and the status says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_patch_on_deployments_the_children_are_refused_with_403() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let env = CLUSTERS.get().await.unwrap();
    let removed = ("child", "apps", "deployments", "patch");
    let kubeconfig = token_kubeconfig(env, &install(env, Some(removed)).await).await;
    let running = operator(kubeconfig).await;

    apply_app(env, "lp-denied", "nginx:1.27", 1, &CHILD_NAMESPACES).await;
    let refused = format!(
        "User \"{SA_USER}\" cannot patch resource \"deployments\" in API group \"apps\" in the namespace \"namespace-a\""
    );
    eventually("both clusters Failed with the 403", || async {
        let (states, ready) = status(env, "lp-denied").await?;
        let named = states.iter().all(|(state, message)| {
            *state == ClusterState::Failed
                && message.contains(&refused)
                && message.ends_with("(403 Forbidden)")
        });
        if named && ready == "False" {
            Ok(())
        } else {
            Err(format!("{states:?}, Ready {ready:?}"))
        }
    })
    .await;
    for cluster in CHILDREN {
        let child = deployments(env, cluster, "namespace-a")
            .await
            .get_opt("lp-denied")
            .await
            .unwrap();
        assert!(
            child.is_none(),
            "{cluster}: a child was created without the grant"
        );
    }
    tokio::time::timeout(std::time::Duration::from_secs(60), running.shutdown())
        .await
        .expect("the operator shuts down within 60 s");
    // Out of the next test's way: without the operator the finalizer is removed by hand.
    let unfinalize = json!({ "metadata": { "finalizers": null } });
    apps(env)
        .await
        .patch(
            "lp-denied",
            &PatchParams::default(),
            &Patch::Merge(unfinalize),
        )
        .await
        .unwrap();
    delete_and_wait(env, "lp-denied").await;
}

/// Under the members Role, the operator watches a member Secret in its namespace and patches its finalizer
/// onto it (leave policy delete), then removes it once the Secret is deleted. The Secret holds no kubeconfig:
/// its member is only reported unhealthy.
async fn member_secret_handled(env: &TestEnv) -> Result<(), String> {
    let control = env.client("control").await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(control, SA_NAMESPACE);
    let (key, value) = kubeplex_fleet::MEMBER_SELECTOR.split_once('=').unwrap();
    let secret = json!({
        "metadata": { "name": "lp-member", "labels": { key: value } },
        "stringData": { "not-a-kubeconfig": "-" },
    });
    let secret: Secret = serde_json::from_value(secret).unwrap();
    let created = secrets.create(&PostParams::default(), &secret).await;
    created.map_err(|e| format!("creating the member Secret: {e}"))?;
    try_eventually(
        "the member Secret carries the operator's finalizer",
        || async {
            let secret = secrets.get("lp-member").await.map_err(|e| e.to_string())?;
            let finalizers = secret.finalizers();
            match finalizers
                .iter()
                .any(|f| f == kubeplex::members::MEMBER_FINALIZER)
            {
                true => Ok(()),
                false => Err(format!("finalizers {finalizers:?}")),
            }
        },
    )
    .await?;
    let deleted = secrets.delete("lp-member", &DeleteParams::default()).await;
    deleted.map_err(|e| format!("deleting the member Secret: {e}"))?;
    try_eventually("the member Secret released and gone", || async {
        match secrets
            .get_opt("lp-member")
            .await
            .map_err(|e| e.to_string())?
        {
            None => Ok(()),
            Some(secret) => Err(format!("finalizers {:?}", secret.finalizers())),
        }
    })
    .await
}

/// `fleet run` as the chart's Deployment runs it (its arguments, with `deploy/`'s values; the probes on a free
/// local port): `control` through the in-cluster service
/// account (`KUBEPLEX_CONTEXT_CONTROL=in-cluster`; the token, CA and namespace in the directory
/// `KUBEPLEX_SERVICE_ACCOUNT_DIR` names, the API server at `KUBERNETES_SERVICE_HOST/PORT`), the children
/// through a kubeconfig with their tokens. Its own process, since the environment is the process's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_run_reaches_control_through_the_in_cluster_service_account() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let env = CLUSTERS.get().await.unwrap();
    let tokens = install(env, None).await;
    let dir = tempfile::tempdir().unwrap();
    let account = dir.path().join("serviceaccount");
    std::fs::create_dir(&account).unwrap();
    std::fs::write(account.join("token"), &tokens[0].1).unwrap();
    std::fs::write(
        account.join("ca.crt"),
        env.ca_certificate_pem("control").unwrap(),
    )
    .unwrap();
    std::fs::write(account.join("namespace"), SA_NAMESPACE).unwrap();
    let kubeconfig = dir.path().join("children.kubeconfig");
    let children = token_kubeconfig(env, &tokens[1..]).await;
    std::fs::write(&kubeconfig, serde_json::to_string(&children).unwrap()).unwrap();
    let server: http::Uri = env.server_url("control").unwrap().parse().unwrap();

    let log_path = dir.path().join("fleet.log");
    let args = rbac::deployment_args();
    assert!(
        args.windows(2)
            .any(|w| w == ["--members-from-secrets", kubeplex_fleet::MEMBER_SELECTOR]),
        "{args:?}"
    );
    let mut fleet = tokio::process::Command::new(env!("CARGO_BIN_EXE_fleet"))
        .args(args)
        .env("KUBECONFIG", &kubeconfig)
        .env("KUBEPLEX_CONTEXT_CONTROL", kubeplex::client::IN_CLUSTER)
        .env("KUBEPLEX_SERVICE_ACCOUNT_DIR", &account)
        .env("KUBERNETES_SERVICE_HOST", server.host().unwrap())
        .env(
            "KUBERNETES_SERVICE_PORT",
            server.port_u16().unwrap().to_string(),
        )
        .env_remove("KUBEPLEX_CONTEXT_CLUSTER_A")
        .env_remove("KUBEPLEX_CONTEXT_CLUSTER_B")
        .env("RUST_LOG", "info")
        .stderr(std::fs::File::create(&log_path).unwrap())
        .kill_on_drop(true)
        .spawn()
        .expect("fleet starts");
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();

    let both = &CHILD_NAMESPACES[..];
    apply_app(env, "lp-in-cluster", "nginx:1.27", 1, both).await;
    let outcome = async {
        try_eventually("children created", || {
            children_are(env, "lp-in-cluster", "nginx:1.27", 1, both)
        })
        .await?;
        try_eventually("status Ready", || all_ready(env, "lp-in-cluster")).await?;
        member_secret_handled(env).await?;
        try_delete(env, "lp-in-cluster").await
    };
    if let Err(problem) = outcome.await {
        panic!("{problem}\n--- fleet's log ---\n{}", log());
    }
    let exited = fleet.try_wait().unwrap();
    assert!(exited.is_none(), "fleet exited ({exited:?}):\n{}", log());
    fleet.kill().await.unwrap();
}
