//! Requests over HTTP/2, against a real API server: one connection carries every read and watch, another
//! every write, and a server that stops answering (frozen) fails the watches within seconds, where over
//! HTTP/1.1 each would wait for its read timeout (minutes).

use std::sync::atomic::{AtomicUsize, Ordering};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams, WatchParams};
use kube::config::KubeConfigOptions;
use kubeplex_testenv::TestEnv;

use super::super::*;

/// Longer than a PING's silence and answer together, far shorter than a watch's read timeout.
const WAIT: Duration = Duration::from_secs(30);

fn config_map(name: String) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

#[tokio::test]
async fn reads_share_one_connection_writes_another_and_a_frozen_server_fails_them_within_seconds() {
    let env = TestEnv::builder()
        .clusters(["cluster-a"])
        .start()
        .await
        .unwrap();
    let options = KubeConfigOptions {
        context: Some("cluster-a".into()),
        ..KubeConfigOptions::default()
    };
    let config = kube::Config::from_custom_kubeconfig(env.kubeconfig().clone(), &options)
        .await
        .unwrap();
    let access = Access::of("cluster-a", config, Duration::from_secs(30))
        .await
        .unwrap();
    // Counts the TCP connections the client opens.
    let connects = Arc::new(AtomicUsize::new(0));
    let counted = connects.clone();
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    let tcp = tower::service_fn(move |uri: Uri| {
        counted.fetch_add(1, Ordering::SeqCst);
        let mut tcp = tcp.clone();
        async move { tcp.call(uri).await }
    });
    let client = client_over(&access, &Fence::default(), tcp).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");

    // Requests that start together on a fresh client: the first connection is opened alone, tells by ALPN
    // that the server speaks HTTP/2, and every request shares it.
    let params = WatchParams::default();
    let watches = (0..3).map(|_| api.watch(&params, "0"));
    let reads = (0..20).map(|i| {
        let api = api.clone();
        async move { api.get_opt(&format!("web-{i}")).await }
    });
    let (watches, answered) = futures::future::join(
        futures::future::try_join_all(watches),
        futures::future::join_all(reads),
    )
    .await;
    let watches = watches.unwrap();
    assert!(
        answered.iter().all(|r| matches!(r, Ok(None))),
        "{answered:?}"
    );
    assert_eq!(
        connects.load(Ordering::SeqCst),
        1,
        "three watches and twenty reads in flight together, on one connection"
    );
    // Writes go over a connection of their own (the fence is a connection's), which they all share.
    let writes = (0..20).map(|i| {
        let api = api.clone();
        async move {
            let object = config_map(format!("web-{i}"));
            api.create(&PostParams::default(), &object).await
        }
    });
    let written = futures::future::join_all(writes).await;
    assert!(written.iter().all(Result::is_ok), "{written:?}");
    assert_eq!(
        connects.load(Ordering::SeqCst),
        2,
        "twenty writes in flight together, on a second connection"
    );

    env.freeze("cluster-a").unwrap();
    for (n, watch) in watches.into_iter().enumerate() {
        // The stream ends, or fails, once the PING goes unanswered.
        let ended = tokio::time::timeout(WAIT, watch.boxed().try_collect::<Vec<_>>()).await;
        assert!(
            ended.is_ok(),
            "watch {n} still open {WAIT:?} after its server froze"
        );
    }
    env.thaw("cluster-a").unwrap();
}
