//! Fault controls and cleanup; each test has a private environment because it breaks a cluster.

use std::time::Duration;

use crate::config_map;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kubeplex_testenv::TestEnv;

fn is_connection_error(error: &kube::Error) -> bool {
    // The client reports a refused connection as a hyper/HTTP error, never as an API status.
    let text = format!("{error:?}").to_lowercase();
    matches!(error, kube::Error::HyperError(_) | kube::Error::Service(_))
        && text.contains("connect")
}

fn alive(pid: u32) -> bool {
    // A zombie still has a /proc entry; a reaped or never-zombie process does not.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}

#[tokio::test]
async fn a_stopped_cluster_refuses_connections_keeps_its_port_and_its_data() {
    let env = TestEnv::builder()
        .clusters(["cluster-a", "cluster-b"])
        .start()
        .await
        .unwrap();
    let b: Api<ConfigMap> = Api::default_namespaced(env.client("cluster-b").await.unwrap());
    b.create(&PostParams::default(), &config_map("survivor"))
        .await
        .unwrap();

    let no_log = env.audit_events("cluster-b").unwrap_err().to_string();
    assert!(
        no_log.contains("cluster-b") && no_log.contains(".audit_log(true)"),
        "an environment started without audit logs says how to get them: {no_log}"
    );

    let url = env.server_url("cluster-b").unwrap();
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    env.stop("cluster-b").unwrap();
    let error = b.get("survivor").await.unwrap_err();
    assert!(
        is_connection_error(&error),
        "expected a connection error, got {error:?}"
    );
    // While it is down, nobody else can take its port (as an unrelated server or test might)...
    let taken = std::net::TcpListener::bind(("127.0.0.1", port));
    assert_eq!(
        taken.map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::AddrInUse,
        "the port of a stopped API server was free for anyone"
    );
    // ...while the other cluster works on.
    let a: Api<ConfigMap> = Api::default_namespaced(env.client("cluster-a").await.unwrap());
    a.create(&PostParams::default(), &config_map("still-working"))
        .await
        .unwrap();

    // It comes back on its port, with its data.
    env.start("cluster-b").await.unwrap();
    assert_eq!(env.server_url("cluster-b").unwrap(), url);
    let b: Api<ConfigMap> = Api::default_namespaced(env.client("cluster-b").await.unwrap());
    assert_eq!(
        b.get("survivor").await.unwrap().metadata.name.as_deref(),
        Some("survivor")
    );
}

#[tokio::test]
async fn a_frozen_cluster_hangs_until_thawed() {
    let env = TestEnv::builder()
        .cluster("cluster-a")
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client("cluster-a").await.unwrap());
    api.create(&PostParams::default(), &config_map("before"))
        .await
        .unwrap();

    env.freeze("cluster-a").unwrap();
    assert!(env.is_frozen("cluster-a").unwrap());
    let fresh: Api<ConfigMap> = Api::default_namespaced(env.client("cluster-a").await.unwrap());
    let hung = tokio::time::timeout(Duration::from_secs(2), fresh.get("before")).await;
    assert!(hung.is_err(), "a frozen API server answered: {hung:?}");

    env.thaw("cluster-a").unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(10), api.get("before")).await;
    assert_eq!(
        answered
            .expect("a thawed API server answers")
            .unwrap()
            .metadata
            .name
            .as_deref(),
        Some("before")
    );
}

#[tokio::test]
async fn dropping_the_environment_ends_every_process_even_on_panic() {
    let env = TestEnv::builder()
        .cluster("short-lived")
        .start()
        .await
        .unwrap();
    let pids = env.pids();
    assert_eq!(pids.len(), 2, "one kube-apiserver and one etcd");
    assert!(pids.iter().all(|&pid| alive(pid)));
    drop(env);
    assert!(
        pids.iter().all(|&pid| !alive(pid)),
        "processes survived the drop: {pids:?}"
    );

    // A test that panics unwinds through the environment: the same cleanup runs.
    let (sender, receiver) = std::sync::mpsc::channel();
    let panicked = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let env = runtime
            .block_on(TestEnv::builder().cluster("panics").start())
            .unwrap();
        sender.send(env.pids()).unwrap();
        panic!("the test failed");
    })
    .join();
    assert!(panicked.is_err());
    let pids = receiver.recv().unwrap();
    assert!(
        pids.iter().all(|&pid| !alive(pid)),
        "processes survived a panic: {pids:?}"
    );
}
