//! Attaching to clusters another environment runs: from this process ([`TestEnvBuilder::attach`]) and from
//! another one through the variable ([`SharedTestEnv`]), over the shared clusters of `clusters`.

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kubeplex_testenv::{ATTACH_VAR, Error, SharedTestEnv, TestEnv, output_within};

use crate::clusters::CLUSTERS;
use crate::{GROUP, config_map, crd};

/// Where the child process finds the ConfigMap its parent wrote.
const NAMESPACE_VAR: &str = "KUBEPLEX_TESTENV_ATTACH_TEST_NAMESPACE";

static ATTACHED: SharedTestEnv =
    SharedTestEnv::new(|| TestEnv::builder().cluster("cluster-a").audit_log(true));

/// A CRD of the kind `Attachment`, with `short_names`.
fn attachments(short_names: &[&str]) -> CustomResourceDefinition {
    crd("Attachment", "attachments", short_names)
}

/// `name`'s create in `namespace`, as the audit log has it.
fn creates(env: &TestEnv, namespace: &str, name: &str) -> usize {
    env.audit_events("cluster-a")
        .unwrap()
        .iter()
        .filter(|event| {
            let object = &event["objectRef"];
            event["verb"] == "create"
                && object["resource"] == "configmaps"
                && object["namespace"] == namespace
                && object["name"] == name
        })
        .count()
}

#[tokio::test]
async fn an_attached_environment_reaches_the_clusters_but_cannot_stop_them() {
    let env = CLUSTERS.get().await.unwrap();
    let namespace = env
        .create_namespace(&["cluster-a"], "attach")
        .await
        .unwrap();
    let owner_maps: Api<ConfigMap> =
        Api::namespaced(env.client("cluster-a").await.unwrap(), &namespace);
    owner_maps
        .create(&PostParams::default(), &config_map("before"))
        .await
        .unwrap();
    env.install_crd("cluster-a", attachments(&[]))
        .await
        .unwrap();
    // A name the attached environment's first try would take.
    let taken = format!("{namespace}-taken");
    let namespaces: Api<Namespace> = Api::all(env.client("cluster-a").await.unwrap());
    let mut first = Namespace::default();
    first.metadata.name = Some(format!("{taken}-0"));
    namespaces
        .create(&PostParams::default(), &first)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("attach.json");
    env.write_attach_file(&file).unwrap();

    let attached = TestEnv::builder()
        .cluster("cluster-a")
        .crd("cluster-a", attachments(&["att"]))
        .audit_log(true)
        .attach(&file)
        .await
        .unwrap();
    assert!(attached.pids().is_empty(), "it runs no process");
    assert_eq!(
        attached.server_url("cluster-a").unwrap(),
        env.server_url("cluster-a").unwrap()
    );
    let maps: Api<ConfigMap> =
        Api::namespaced(attached.client("cluster-a").await.unwrap(), &namespace);
    maps.get("before").await.unwrap();
    maps.create(&PostParams::default(), &config_map("after"))
        .await
        .unwrap();
    assert_eq!(creates(&attached, &namespace, "after"), 1);
    assert_eq!(
        creates(&attached, &namespace, "before"),
        0,
        "events from before the attach are not its own"
    );
    assert_eq!(creates(env, &namespace, "before"), 1);

    let crds: Api<CustomResourceDefinition> = Api::all(env.client("cluster-a").await.unwrap());
    let crd = crds.get(&format!("attachments.{GROUP}")).await.unwrap();
    assert_eq!(
        crd.spec.names.short_names,
        Some(vec!["att".to_owned()]),
        "the builder's CRD replaces the one of the same name"
    );
    assert_eq!(
        attached
            .create_namespace(&["cluster-a"], &taken)
            .await
            .unwrap(),
        format!("{taken}-1"),
        "a name another program took is passed over"
    );

    for refused in [
        attached.stop("cluster-a"),
        attached.freeze("cluster-a"),
        attached.thaw("cluster-a"),
    ] {
        assert!(
            matches!(&refused, Err(Error::Attached { cluster }) if cluster == "cluster-a"),
            "{refused:?}"
        );
    }
    drop(attached);
    owner_maps
        .get("after")
        .await
        .expect("the clusters outlive an environment attached to them");
}

#[tokio::test]
async fn programs_attaching_at_once_each_put_their_crd_in_place() {
    let env = CLUSTERS.get().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("attach.json");
    env.write_attach_file(&file).unwrap();
    env.install_crd("cluster-a", crd("Racer", "racers", &[]))
        .await
        .unwrap();
    // Each replaces the CRD of the same name: the reads and writes of the four interleave.
    let names: Vec<String> = (0..4).map(|i| format!("racer{i}")).collect();
    let attaches = names.iter().map(|name| {
        TestEnv::builder()
            .cluster("cluster-a")
            .crd("cluster-a", crd("Racer", "racers", &[name]))
            .attach(&file)
    });
    for attached in futures::future::join_all(attaches).await {
        attached.expect("attached, its CRD in place");
    }
}

#[tokio::test]
async fn attaching_names_what_the_clusters_lack() {
    let env = CLUSTERS.get().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("attach.json");
    env.write_attach_file(&file).unwrap();
    let cases = [
        (
            TestEnv::builder().clusters(["control", "elsewhere"]),
            "no cluster elsewhere",
        ),
        (
            TestEnv::builder()
                .cluster("cluster-b")
                .controller_manager("cluster-b"),
            "cluster cluster-b runs no kube-controller-manager",
        ),
    ];
    for (builder, problem) in cases {
        let error = builder.attach(&file).await.unwrap_err();
        assert!(
            matches!(&error, Error::Attach { problem: p, .. } if p.starts_with(problem)),
            "{error}"
        );
    }
    std::fs::write(&file, "{}").unwrap();
    let error = TestEnv::builder()
        .cluster("control")
        .attach(&file)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("not an attach file"), "{error}");
}

/// Run by the test below as a process of its own, with the variable naming the attach file.
#[tokio::test]
#[ignore = "runs only as the child process of the test below"]
async fn a_shared_environment_of_another_process() {
    let env = ATTACHED.get().await.unwrap();
    assert!(env.pids().is_empty(), "started clusters of its own");
    let namespace = std::env::var(NAMESPACE_VAR).unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(env.client("cluster-a").await.unwrap(), &namespace);
    maps.get("written-by-the-parent").await.unwrap();
}

#[test]
fn a_shared_environment_attaches_when_the_variable_names_a_file() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (file, namespace, _dir) = runtime.block_on(async {
        let env = CLUSTERS.get().await.unwrap();
        let namespace = env
            .create_namespace(&["cluster-a"], "attach-child")
            .await
            .unwrap();
        let maps: Api<ConfigMap> =
            Api::namespaced(env.client("cluster-a").await.unwrap(), &namespace);
        maps.create(&PostParams::default(), &config_map("written-by-the-parent"))
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("attach.json");
        env.write_attach_file(&file).unwrap();
        (file, namespace, dir)
    });
    let output = output_within(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "attach::a_shared_environment_of_another_process",
                "--exact",
                "--ignored",
            ])
            .env(ATTACH_VAR, &file)
            .env(NAMESPACE_VAR, &namespace),
        Duration::from_secs(120),
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}
