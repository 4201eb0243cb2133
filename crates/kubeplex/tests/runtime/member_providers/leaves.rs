//! Member changes that do not wait for each other: bad members' leaves hold back no good member's leave,
//! and a member that does not answer holds back no other member's join.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{DeleteParams, PostParams};
use kubeplex::members::LeavePolicy;
use kubeplex::prelude::*;
use kubeplex_testenv::{TestEnv, eventually};

use super::accounts::{MEMBER, admin_kubeconfig, text, token_kubeconfig};
use super::proxy::{Mode, Proxy, closed_port};
use super::{env, member_secret, secrets_provider, start};
use crate::spread::{Spread, children, create_spread, spreader, wait_child};
use crate::support::{Fleet, probe};

spreader!(BadLeaves, "spread-bad-leaves");
spreader!(SilentJoin, "spread-silent-join");

/// cluster-c's admin kubeconfig, with its server at `url` instead.
pub fn kubeconfig_at(env: &TestEnv, url: &str) -> String {
    let mut kubeconfig = admin_kubeconfig(env);
    for cluster in &mut kubeconfig.clusters {
        if let Some(cluster) = cluster.cluster.as_mut() {
            cluster.server = Some(url.to_owned());
        }
    }
    text(&kubeconfig)
}

/// Polls `/readyz` until each of `members` is listed with a reason; returns the body.
async fn wait_failing(address: std::net::SocketAddr, members: &[&str]) -> serde_json::Value {
    eventually(
        "the bad members reported",
        crate::support::WAIT,
        async || {
            let body = probe(address, "/readyz").await.1;
            let reported = members.iter().all(|member| {
                let reasons = &body["clusters"][member]["reasons"];
                reasons.as_array().is_some_and(|r| !r.is_empty())
            });
            if reported {
                Ok(body)
            } else {
                Err(format!("{body:#}"))
            }
        },
    )
    .await
}

#[tokio::test]
async fn three_bad_members_deleted_with_a_good_one_do_not_hold_back_its_leave() {
    let env = env().await;
    let (secrets, provider) = secrets_provider(env).await;
    let running = start(env, BadLeaves, provider, LeavePolicy::Delete).await;
    let address = running.probe_address().unwrap();
    create_spread(env, "spread-bad-leaves", "web").await;
    let child = "web-bad-leaves";
    wait_child(env, "cluster-a", child, true).await;

    // A kubeconfig that is no kubeconfig, a server that refuses connections, a token it rejects.
    let closed = format!("https://127.0.0.1:{}", closed_port());
    let bad = [
        ("bad-garbage", "garbage: [".to_owned()),
        ("bad-closed", kubeconfig_at(env, &closed)),
        ("bad-token", text(&token_kubeconfig(env, "not-a-token"))),
    ];
    let params = PostParams::default();
    for (member, kubeconfig) in &bad {
        let secret = member_secret(member, Some(member), kubeconfig);
        secrets.create(&params, &secret).await.unwrap();
    }
    let good = member_secret("good", Some(MEMBER), &text(&admin_kubeconfig(env)));
    secrets.create(&params, &good).await.unwrap();
    wait_child(env, MEMBER, child, true).await;
    wait_failing(address, &["bad-garbage", "bad-closed", "bad-token"]).await;

    // All deleted at once, the bad ones first.
    let started = tokio::time::Instant::now();
    for secret in ["bad-garbage", "bad-closed", "bad-token", "good"] {
        secrets
            .delete(secret, &DeleteParams::default())
            .await
            .unwrap();
    }
    let members_children = children(env, MEMBER).await;
    // Far above what the good member's leave takes alone: a failure here names what still stood.
    eventually(
        "the good member left",
        Duration::from_secs(45),
        async || {
            let child = members_children
                .get_opt(child)
                .await
                .map_err(|e| e.to_string())?;
            let secret = secrets.get_opt("good").await.map_err(|e| e.to_string())?;
            match (
                child.filter(|c| c.metadata.deletion_timestamp.is_none()),
                secret,
            ) {
                (None, None) => Ok(()),
                (child, secret) => Err(format!(
                    "child present: {}, Secret finalizers: {:?}",
                    child.is_some(),
                    secret.map(|s| s.finalizers().to_vec())
                )),
            }
        },
    )
    .await;
    let took = started.elapsed();
    println!("the good member's leave took {took:?} beside three bad members' leaves");
    // Alone it takes a second or two; one bad member's leave that it waited for would cost 30 s.
    assert!(
        took < Duration::from_secs(15),
        "the good member's leave took {took:?}"
    );
    crate::support::stop(running).await;
}

#[tokio::test]
async fn a_member_that_does_not_answer_holds_back_no_other_members_join() {
    let env = env().await;
    let (secrets, provider) = secrets_provider(env).await;
    let running = start(env, SilentJoin, provider, LeavePolicy::Orphan).await;
    let address = running.probe_address().unwrap();
    create_spread(env, "spread-silent-join", "web").await;
    let child = "web-silent-join";
    wait_child(env, "cluster-a", child, true).await;

    // A member whose server takes connections and never answers joins first.
    let server = env.server_url(MEMBER).unwrap();
    let silent = Proxy::start(&server, Mode::Blackhole).await;
    let params = PostParams::default();
    let secret = member_secret("silent", Some("silent"), &kubeconfig_at(env, &silent.url()));
    secrets.create(&params, &secret).await.unwrap();
    eventually(
        "the silent member in /readyz",
        crate::support::WAIT,
        async || {
            let body = probe(address, "/readyz").await.1;
            match body["clusters"].get("silent") {
                Some(_) => Ok(()),
                None => Err(format!("{body:#}")),
            }
        },
    )
    .await;

    // Then a healthy one, while the silent one's join hangs: its child appears as soon as it would alone.
    let started = tokio::time::Instant::now();
    let good = member_secret("good", Some(MEMBER), &text(&admin_kubeconfig(env)));
    secrets.create(&params, &good).await.unwrap();
    let members_children = children(env, MEMBER).await;
    eventually(
        "the healthy member's child",
        Duration::from_secs(45),
        async || match members_children.get_opt(child).await {
            Ok(Some(found)) => Ok(found),
            Ok(None) => Err("absent".to_owned()),
            Err(error) => Err(error.to_string()),
        },
    )
    .await;
    let took = started.elapsed();
    println!(
        "the healthy member's child appeared {took:?} after its Secret, beside a silent member"
    );
    // Alone it takes a second or two; waiting for the silent member's join would cost its
    // `kubeplex::CLUSTER_TIMEOUT` (15 s) at least.
    assert!(
        took < Duration::from_secs(10),
        "the healthy member's child took {took:?}"
    );
    drop(silent);
    crate::support::stop(running).await;
}
