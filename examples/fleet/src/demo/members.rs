//! The demo's second part: a third child cluster, `cluster-c`, joins the fleet when its kubeconfig Secret is
//! created in the control cluster, gets the Deployments cluster-a and cluster-b have, and leaves again when
//! the Secret is deleted (leave policy `delete`: its Deployments go first).

use std::io::Write;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kubeplex::{Context as _, members::MEMBER_FINALIZER, members::MEMBER_NAME_LABEL};
use kubeplex_testenv::TestEnv;

use super::{Clients, DemoError, create_namespaces_in, table, wait_until_applied};
use crate::{
    AppDeployment, CHILD_NAMESPACES, CRD_NAMESPACE, Fleet, MEMBER_SELECTOR, MEMBERS_NAMESPACE,
};

/// The cluster that joins the fleet at run time; not one of [`Fleet`]'s contexts.
pub const CLUSTER_C: &str = "cluster-c";

/// How long the joining and the leaving may each take.
const WAIT: Duration = Duration::from_secs(120);

/// Creates the member Secrets' namespace in control, and the child namespaces in cluster-c.
pub(super) async fn create_namespaces(env: &TestEnv) -> Result<(), DemoError> {
    create_namespaces_in(env, Fleet::Control.name(), &[MEMBERS_NAMESPACE]).await?;
    create_namespaces_in(env, CLUSTER_C, &CHILD_NAMESPACES).await
}

/// cluster-c joins (its Secret created), the table shows its Deployments; it leaves (the Secret deleted),
/// and the table shows them gone. `clients` shows cluster-c from then on.
pub(super) async fn join_and_leave(
    env: &TestEnv,
    clients: &mut Clients,
    out: &mut impl Write,
) -> Result<(), DemoError> {
    let secrets: Api<Secret> = Api::namespaced(clients.control.clone(), MEMBERS_NAMESPACE);
    let created = Instant::now();
    secrets
        .create(&PostParams::default(), &member_secret(env, CLUSTER_C)?)
        .await?;
    writeln!(
        out,
        "\nCreated Secret {MEMBERS_NAMESPACE}/{CLUSTER_C} in control, labelled {MEMBER_SELECTOR} and \
         {MEMBER_NAME_LABEL}={CLUSTER_C}, with the kubeconfig of {CLUSTER_C}: it joins the fleet ..."
    )?;
    clients
        .children
        .push((CLUSTER_C.to_owned(), env.client(CLUSTER_C).await?));
    wait_until_applied(clients, WAIT).await?;
    let joined = created.elapsed().as_secs_f64();
    writeln!(
        out,
        "{CLUSTER_C} has its Deployments, {joined:.1} s after its Secret was created.\n\n{}",
        table(clients).await?
    )?;

    secrets.delete(CLUSTER_C, &DeleteParams::default()).await?;
    writeln!(
        out,
        "Deleted Secret {MEMBERS_NAMESPACE}/{CLUSTER_C}: {CLUSTER_C} leaves the fleet (leave policy delete: \
         its Deployments are deleted, then the finalizer {MEMBER_FINALIZER} lets the Secret go) ..."
    )?;
    wait_until_left(&secrets, clients).await?;
    writeln!(
        out,
        "{CLUSTER_C} left: its Secret is gone, and so are its Deployments and its status.\n\n{}",
        table(clients).await?
    )?;
    Ok(())
}

/// A member Secret as a platform team would create it: selected by the fleet's label, naming its member,
/// holding a kubeconfig with `cluster`'s context only.
fn member_secret(env: &TestEnv, cluster: &str) -> Result<Secret, DemoError> {
    let (key, value) = MEMBER_SELECTOR
        .split_once('=')
        .expect("the selector is key=value");
    let labels = [
        (key.to_owned(), value.to_owned()),
        (MEMBER_NAME_LABEL.to_owned(), cluster.to_owned()),
    ];
    let mut secret = env.member_secret(cluster, cluster, MEMBERS_NAMESPACE)?;
    secret.metadata.labels = Some(labels.into());
    Ok(secret)
}

/// Waits until cluster-c's Secret is gone (its finalizer removed once the cleanup was done), cluster-c has
/// no Deployment left, and no AppDeployment's status names it.
async fn wait_until_left(secrets: &Api<Secret>, clients: &Clients) -> Result<(), DemoError> {
    let deadline = tokio::time::Instant::now() + WAIT;
    let (_, cluster_c) = (clients.children.iter())
        .find(|(name, _)| name == CLUSTER_C)
        .expect("cluster-c is shown");
    let apps: Api<AppDeployment> = Api::namespaced(clients.control.clone(), CRD_NAMESPACE);
    loop {
        let mut left = Vec::new();
        if secrets.get_opt(CLUSTER_C).await?.is_some() {
            left.push("its Secret".to_owned());
        }
        for namespace in CHILD_NAMESPACES {
            let api: Api<Deployment> = Api::namespaced(cluster_c.clone(), namespace);
            let count = api.list_metadata(&ListParams::default()).await?.items.len();
            if count > 0 {
                left.push(format!("{count} Deployments in {namespace}"));
            }
        }
        for app in apps.list(&ListParams::default()).await?.items {
            let status = app.status.as_ref().map(|s| &s.fleet.clusters);
            if status.is_some_and(|c| c.contains_key(CLUSTER_C)) {
                left.push(format!(
                    "{CLUSTER_C} in the status of {}",
                    app.metadata.name.unwrap_or_default()
                ));
            }
        }
        if left.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "{CLUSTER_C} did not leave within {WAIT:?}; still there: {}\n{}",
                left.join(", "),
                table(clients).await?
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
