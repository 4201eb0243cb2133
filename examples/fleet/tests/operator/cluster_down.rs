//! What `fleet run` logs while a child cluster is down, read as an SRE would: few lines for an outage of half
//! a minute with work arriving all along (the first failure, and a repeat at most each minute; a line per
//! retry, with backoff capped at 8 s, would be far more), each naming the cluster, none a client library's
//! raw dump; and it recovers without a restart. The operator reaches cluster-b through a relay, which takes
//! the cluster from it alone (connections refused, as a stopped API server's are).

use std::time::Duration;

use crate::output::Operator;
use crate::support::{WAIT, stage};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use kubeplex::Context as _;
use kubeplex_fleet::Fleet;
use kubeplex_fleet::demo::apply_instance;
use kubeplex_testenv::{Polling, TestEnv, eventually};

/// How long the cluster stays down while changes keep coming.
const OUTAGE: Duration = Duration::from_secs(30);
/// At most this many lines for the whole outage.
const MAX_LINES: usize = 10;

async fn wait_for_deployment(
    env: &TestEnv,
    cluster: Fleet,
    namespace: &str,
    name: &str,
    image: &str,
) {
    let api: Api<Deployment> =
        Api::namespaced(env.client(cluster.name()).await.unwrap(), namespace);
    let what = format!("a Deployment {name} with {image} in {cluster}");
    let polling = Polling::within(WAIT).every(Duration::from_millis(200));
    eventually(what, polling, async || {
        let current = api.get_opt(name).await.unwrap();
        current
            .and_then(|d| d.spec.template.spec?.containers.into_iter().next()?.image)
            .is_some_and(|i| i == image)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_down_for_half_a_minute_is_told_in_a_few_lines_that_name_it() {
    let stage = stage("down").await;
    let (env, parents, children) = (stage.env, &stage.parents, &stage.children[0]);
    let relay = env.relay(Fleet::ClusterB.name()).await.unwrap();
    let kubeconfig = env.kubeconfig_path_via(&relay).unwrap();
    let control = stage.control().await;
    let operator = Operator::start_with(&kubeconfig, "127.0.0.1:0", None, &stage.run_flags());
    apply_instance(&control, parents, "web", "nginx:1.27", 1)
        .await
        .unwrap();
    wait_for_deployment(env, Fleet::ClusterB, children, "web", "nginx:1.27").await;
    let before = operator.lines();
    assert!(
        before.is_empty(),
        "a healthy fleet logs nothing at the default level: {before:#?}"
    );

    relay.refuse();
    // Work keeps arriving for the stopped cluster: each change is a reconcile that cannot reach it.
    let started = tokio::time::Instant::now();
    for (i, image) in ["nginx:1.28", "nginx:1.29", "nginx:1.30"]
        .into_iter()
        .enumerate()
    {
        apply_instance(&control, parents, "web", image, 1)
            .await
            .unwrap();
        apply_instance(&control, parents, &format!("api-{i}"), image, 1)
            .await
            .unwrap();
        wait_for_deployment(env, Fleet::ClusterA, children, "web", image).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    tokio::time::sleep(OUTAGE.saturating_sub(started.elapsed())).await;
    let during = operator.lines();
    relay.open();

    assert!(!during.is_empty(), "an outage logged nothing at all");
    assert!(
        during.len() <= MAX_LINES,
        "{} lines for one cluster down for {OUTAGE:?} (at most {MAX_LINES}):\n{}",
        during.len(),
        during.join("\n")
    );
    for line in &during {
        assert!(
            line.contains("cluster-b"),
            "a line that does not name the failing cluster: {line}"
        );
        for noise in [
            "Api(",
            "Status {",
            "eof in poll",
            "ErrorResponse",
            "hyper::",
        ] {
            assert!(
                !line.contains(noise),
                "a client library's raw output ({noise}) in the default log: {line}"
            );
        }
    }
    // And it recovers without a restart.
    wait_for_deployment(env, Fleet::ClusterB, children, "web", "nginx:1.30").await;
}
