//! Connections over HTTP/1.1: cluster-c behind a TLS-terminating proxy, as a load balancer may be. One that
//! offers only `http/1.1` gets it although kubeplex offers `h2` first, and children, watches and status work
//! through it; one that offers `h2` too gets HTTP/1.1 only from a manager told `http1_only` for it.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::config::{Kubeconfig, NamedCluster, NamedContext};
use kubeplex::{ClusterState, ContextName, Manager};

use crate::children::env;
use crate::children::parent::{ParentSpec, config_map_parents};
use crate::children::wait::{create_parent, wait_parent};
use crate::member_providers::accounts::{account_token, token_kubeconfig};
use crate::support::tls_proxy::{Seen, TlsProxy};
use crate::support::{create_namespace, stop, wait_exists};

/// cluster-c, reached through the proxy.
const EDGE: ContextName = ContextName::new("edge");
/// Where the children go, in cluster-c.
const KIDS: &str = "http1-kids";

config_map_parents!(Fallback, "http1-fallback", "http1-fallback", [EDGE], KIDS);
config_map_parents!(Forced, "http1-forced", "http1-forced", [EDGE], KIDS);

/// The suite's kubeconfig with context `edge`: cluster-c through `proxy`, with a token of its own (the proxy
/// passes no client certificate).
async fn through(env: &kubeplex_testenv::TestEnv, proxy: &TlsProxy, account: &str) -> Kubeconfig {
    let accounts = env.create_namespace(&["cluster-c"], "http1").await.unwrap();
    let token = account_token(env, &accounts, account).await;
    let edge = token_kubeconfig(env, &token);
    let mut kubeconfig = env.kubeconfig().clone();
    let mut cluster = edge.clusters[0].cluster.clone().unwrap();
    cluster.server = Some(proxy.url.clone());
    cluster.certificate_authority_data = Some(base64(proxy.ca_pem.as_bytes()));
    let mut context = edge.contexts[0].context.clone().unwrap();
    context.cluster = "edge".into();
    kubeconfig.clusters.push(NamedCluster {
        name: "edge".into(),
        cluster: Some(cluster),
        ..NamedCluster::default()
    });
    kubeconfig.auth_infos.extend(edge.auth_infos.clone());
    kubeconfig.contexts.push(NamedContext {
        name: "edge".into(),
        context: Some(context),
        ..NamedContext::default()
    });
    kubeconfig
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The API server behind cluster-c: its URL and the PEM of its authority.
fn cluster_c(env: &kubeplex_testenv::TestEnv) -> (String, Vec<u8>) {
    let kubeconfig = env.kubeconfig();
    let context = kubeconfig.contexts.iter().find(|c| c.name == "cluster-c");
    let cluster_name = context.unwrap().context.as_ref().unwrap().cluster.clone();
    let named = kubeconfig.clusters.iter().find(|c| c.name == cluster_name);
    let cluster = named.unwrap().cluster.clone().unwrap();
    let ca = cluster.certificate_authority_data.unwrap();
    use base64::Engine as _;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(ca)
        .unwrap();
    (cluster.server.unwrap(), pem)
}

/// Creates a parent with child `name` in `namespace` and waits until it is applied in `edge` and the child
/// is there.
async fn applied_through(env: &kubeplex_testenv::TestEnv, namespace: &str, name: &str) {
    let control = env.client("control").await.unwrap();
    let spec = ParentSpec {
        children: vec![name.to_owned()],
        ..ParentSpec::default()
    };
    create_parent(&control, namespace, name, spec).await;
    wait_parent(&control, namespace, name, "applied in edge", |p| {
        let clusters = &p.status.as_ref().map(|s| &s.fleet.clusters);
        clusters
            .and_then(|c| c.get("edge"))
            .is_some_and(|c| c.state == ClusterState::Applied)
    })
    .await;
    let kids: Api<ConfigMap> = Api::namespaced(env.client("cluster-c").await.unwrap(), KIDS);
    wait_exists(&kids, name).await;
}

#[tokio::test]
async fn a_proxy_offering_only_http1_gets_http1_and_everything_works_through_it() {
    let env = env().await;
    create_namespace(&env.client("cluster-c").await.unwrap(), KIDS).await;
    let (server, ca) = cluster_c(env);
    let proxy = TlsProxy::start(&server, &ca, &["http/1.1"]).await;
    let kubeconfig = through(env, &proxy, "fallback").await;
    let running = Manager::with_kubeconfig(kubeconfig)
        .controller(Fallback)
        .start()
        .await
        .unwrap();
    applied_through(env, "http1-fallback", "through-http1").await;
    let seen = proxy.seen();
    assert!(!seen.is_empty());
    // kubeplex offered HTTP/2 on its reads' connections and took the HTTP/1.1 it was given (its writes'
    // connections offer no ALPN: HTTP/1.1 by default).
    for connection in &seen {
        assert_ne!(connection.agreed.as_deref(), Some("h2"), "{seen:#?}");
    }
    let fell_back = |c: &Seen| {
        c.offered.first().map(String::as_str) == Some("h2")
            && c.agreed.as_deref() == Some("http/1.1")
    };
    assert!(seen.iter().any(fell_back), "{seen:#?}");
    assert!(running.readiness().clusters["edge"].reasons.is_empty());
    stop(running).await;
}

#[tokio::test]
async fn a_cluster_told_http1_only_is_never_offered_http2() {
    let env = env().await;
    create_namespace(&env.client("cluster-c").await.unwrap(), KIDS).await;
    let (server, ca) = cluster_c(env);
    let proxy = TlsProxy::start(&server, &ca, &["h2", "http/1.1"]).await;
    let kubeconfig = through(env, &proxy, "forced").await;
    let running = Manager::with_kubeconfig(kubeconfig)
        .http1_only(EDGE)
        .controller(Forced)
        .start()
        .await
        .unwrap();
    applied_through(env, "http1-forced", "forced-http1").await;
    let seen = proxy.seen();
    assert!(!seen.is_empty());
    for connection in &seen {
        assert!(!connection.offered.iter().any(|p| p == "h2"), "{seen:#?}");
        assert_ne!(connection.agreed.as_deref(), Some("h2"), "{seen:#?}");
    }
    stop(running).await;
}
