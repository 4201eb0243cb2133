//! A member that does not answer while it leaves under `delete`: its Secret keeps the finalizer and it
//! shows `leaving`, with the reason, in `/readyz` and in the parents' status until it answers (its children
//! are deleted then, and the Secret goes) or until the manager gives up on it (its children stay, an Event
//! says so, the Secret goes). And a parent deleted while the operator was down loses its children in the
//! members as well as in the fixed contexts.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use kubeplex::prelude::*;
use kubeplex::{members::LeavePolicy, members::MEMBER_FINALIZER, readiness::MemberPhase};
use kubeplex_testenv::{TestEnv, eventually};

use super::accounts::{MEMBER, admin_kubeconfig, text};
use super::leaves::kubeconfig_at;
use super::proxy::{Mode, Proxy};
use super::{env, member_secret, secrets_provider, start};
use crate::spread::{Spread, children, create_spread, prepare, spreader, wait_child};
use crate::support::{Fleet, WAIT, wait_started};

spreader!(SilentLeave, "spread-silent-leave");
spreader!(GiveUp, "spread-give-up");
spreader!(DownDelete, "spread-down-delete");

/// The Secret registering cluster-c through `proxy`.
const VIA_PROXY: &str = "cluster-c-via-proxy";

/// Polls until `running` shows `member` leaving with a reason; returns the reason.
pub async fn wait_leaving(running: &kubeplex::Running, member: &str) -> String {
    eventually(format!("{member} leaving in /readyz"), WAIT, async || {
        let report = running.readiness();
        let phase = report.clusters.get(member).and_then(|c| c.member.clone());
        match phase {
            Some(p) if p.phase == MemberPhase::Leaving && p.waiting_for.is_some() => {
                Ok(p.waiting_for.unwrap_or_default())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

/// Polls the parent `namespace/web` until `member`'s entry in its status is `state`; returns its message.
pub async fn wait_state(env: &TestEnv, namespace: &str, member: &str, state: &str) -> String {
    let api: Api<Spread> = Api::namespaced(env.client("control").await.unwrap(), namespace);
    eventually(
        format!("{member} {state} in the status"),
        WAIT,
        async || {
            let status = api.get("web").await.map_err(|e| e.to_string())?.status;
            let entry = status.as_ref().and_then(|s| s.fleet.clusters.get(member));
            match entry {
                Some(entry) if entry.state.as_str() == state => {
                    Ok(entry.message.clone().unwrap_or_default())
                }
                _ => Err(format!("{status:#?}")),
            }
        },
    )
    .await
}

/// The Secret's finalizers, or `None` once it is gone.
pub async fn finalizers(secrets: &Api<Secret>, name: &str) -> Option<Vec<String>> {
    let found = secrets.get_opt(name).await.unwrap();
    found.map(|s| s.finalizers().to_vec())
}

#[tokio::test]
async fn an_unreachable_members_leave_keeps_its_secret_and_says_leaving_until_it_answers() {
    let env = env().await;
    let (secrets, provider) = secrets_provider(env).await;
    let running = start(env, SilentLeave, provider, LeavePolicy::Delete).await;
    create_spread(env, "spread-silent-leave", "web").await;
    let child = "web-silent-leave";
    let proxy = Proxy::start(&env.server_url(MEMBER).unwrap(), Mode::Forward).await;
    let secret = member_secret(VIA_PROXY, Some(MEMBER), &kubeconfig_at(env, &proxy.url()));
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    wait_child(env, MEMBER, child, true).await;

    // The member stops answering, then its Secret is deleted.
    proxy.close();
    secrets
        .delete(VIA_PROXY, &DeleteParams::default())
        .await
        .unwrap();
    let why = wait_leaving(&running, MEMBER).await;
    println!("/readyz: {MEMBER} leaving, waiting for {why}");
    // The entry is the member's own, so its text names the child it cannot delete, not the member again.
    assert!(
        why.contains(child) && !why.contains(&format!("cluster {MEMBER}")),
        "{why}"
    );
    let message = wait_state(env, "spread-silent-leave", MEMBER, "Leaving").await;
    assert!(message.contains("once it answers"), "{message}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        finalizers(&secrets, VIA_PROXY).await,
        Some(vec![MEMBER_FINALIZER.to_owned()])
    );
    assert!(
        crate::spread::has_child(env, MEMBER, child).await,
        "deleted while unreachable?"
    );

    // It answers again: its children are deleted, then the Secret goes.
    proxy.listen(Mode::Forward).await;
    let members_children = children(env, MEMBER).await;
    eventually("the child deleted and the Secret gone", WAIT, async || {
        let child = members_children
            .get_opt(child)
            .await
            .map_err(|e| e.to_string())?;
        let child = child.filter(|c| c.metadata.deletion_timestamp.is_none());
        match (child, finalizers(&secrets, VIA_PROXY).await) {
            (None, None) => Ok(()),
            (child, held) => Err(format!(
                "child present: {}, Secret: {held:?}",
                child.is_some()
            )),
        }
    })
    .await;
    let report = running.readiness();
    assert!(!report.clusters.contains_key(MEMBER), "{report:#?}");
    crate::support::stop(running).await;
}

#[tokio::test]
async fn a_leave_gives_up_on_a_member_that_does_not_answer_after_the_time_allowed() {
    let env = env().await;
    let (secrets, provider) = secrets_provider(env).await;
    prepare(env).await;
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .probes("127.0.0.1:0")
        .controller(GiveUp)
        .members(provider, LeavePolicy::Delete)
        .abandon_unreachable_members_after(Duration::from_secs(6))
        .start()
        .await
        .unwrap();
    wait_started(&running, "the manager started").await;
    create_spread(env, "spread-give-up", "web").await;
    let child = "web-give-up";
    let proxy = Proxy::start(&env.server_url(MEMBER).unwrap(), Mode::Forward).await;
    let secret = member_secret(VIA_PROXY, Some(MEMBER), &kubeconfig_at(env, &proxy.url()));
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    wait_child(env, MEMBER, child, true).await;

    proxy.close();
    let started = tokio::time::Instant::now();
    secrets
        .delete(VIA_PROXY, &DeleteParams::default())
        .await
        .unwrap();
    wait_leaving(&running, MEMBER).await;
    eventually("the Secret released", WAIT, async || {
        match finalizers(&secrets, VIA_PROXY).await {
            None => Ok(()),
            Some(held) => Err(format!("{held:?}")),
        }
    })
    .await;
    let took = started.elapsed();
    println!("gave up on the unreachable member after {took:?}");
    assert!(took >= Duration::from_secs(5), "gave up after {took:?}");
    // Its children stay where they were, and an Event on the Secret says so.
    assert!(crate::spread::has_child(env, MEMBER, child).await);
    let events: Api<Event> = Api::namespaced(
        env.client("control").await.unwrap(),
        secrets.namespace().unwrap(),
    );
    let event = eventually("the Event about the abandoned children", WAIT, async || {
        let list = events
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let found = list
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("MemberChildrenAbandoned"));
        found.ok_or_else(|| "none yet".to_owned())
    })
    .await;
    let regarding = event.regarding.unwrap_or_default();
    assert_eq!(regarding.name.as_deref(), Some(VIA_PROXY));
    assert!(event.note.unwrap_or_default().contains(MEMBER));
    crate::support::stop(running).await;
    children(env, MEMBER)
        .await
        .delete(child, &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_parent_deleted_while_the_operator_was_down_loses_its_children_in_members_too() {
    let env = env().await;
    let (secrets, provider) = secrets_provider(env).await;
    let running = start(env, DownDelete, provider.clone(), LeavePolicy::Delete).await;
    create_spread(env, "spread-down-delete", "web").await;
    let child = "web-down-delete";
    let secret = member_secret("cluster-c", Some(MEMBER), &text(&admin_kubeconfig(env)));
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    wait_child(env, MEMBER, child, true).await;
    wait_child(env, "cluster-a", child, true).await;
    crate::support::stop(running).await;

    // Deleted while no operator runs: its finalizer keeps it.
    let parents: Api<Spread> =
        Api::namespaced(env.client("control").await.unwrap(), "spread-down-delete");
    parents
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    assert!(parents.get_opt("web").await.unwrap().is_some());

    // Back up: the parent goes only once its children are gone everywhere, the member's included.
    let running = start(env, DownDelete, provider, LeavePolicy::Delete).await;
    let members_children: Api<ConfigMap> = children(env, MEMBER).await;
    eventually("the parent gone", WAIT, async || {
        if parents
            .get_opt("web")
            .await
            .map_err(|e| e.to_string())?
            .is_some()
        {
            return Err("still there".to_owned());
        }
        Ok(())
    })
    .await;
    let left = members_children.get_opt(child).await.unwrap();
    assert!(
        left.is_none_or(|c| c.metadata.deletion_timestamp.is_some()),
        "the parent's finalizer went while its child in the member stayed"
    );
    crate::support::stop(running).await;
}
