//! Reading and writing through every context of one shared three-cluster environment (its Widget kind in a
//! group of its own: the clusters may be attached to, and other programs' kinds there).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams,
    PostParams,
};
use kube::config::Kubeconfig;
use kubeplex_testenv::{Binaries, Credential, SharedTestEnv, TestEnv};

use crate::{GROUP, crd};

pub static CLUSTERS: SharedTestEnv = SharedTestEnv::new(|| {
    TestEnv::builder()
        .clusters(["control", "cluster-a", "cluster-b"])
        .crd("cluster-a", crd("Widget", "widgets", &[]))
        .audit_log(true)
});

fn widgets() -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: "v1".into(),
        api_version: format!("{GROUP}/v1"),
        kind: "Widget".into(),
        plural: "widgets".into(),
    }
}

fn config_map(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some([("cluster".to_owned(), value.to_owned())].into()),
        ..ConfigMap::default()
    }
}

fn status_code(error: kube::Error) -> u16 {
    match error {
        kube::Error::Api(status) => status.code,
        other => panic!("expected an API error status, got {other}"),
    }
}

#[tokio::test]
async fn each_context_reaches_its_own_independent_cluster() {
    let env = CLUSTERS.get().await.unwrap();
    let clusters = ["control", "cluster-a", "cluster-b"];
    let namespace = env
        .create_namespace(&clusters, "independent")
        .await
        .unwrap();
    for cluster in clusters {
        let api: Api<ConfigMap> = Api::namespaced(env.client(cluster).await.unwrap(), &namespace);
        api.create(&PostParams::default(), &config_map("whoami", cluster))
            .await
            .unwrap();
    }
    let a: Api<ConfigMap> = Api::namespaced(env.client("cluster-a").await.unwrap(), &namespace);
    a.create(
        &PostParams::default(),
        &config_map("only-in-a", "cluster-a"),
    )
    .await
    .unwrap();

    for cluster in clusters {
        let api: Api<ConfigMap> = Api::namespaced(env.client(cluster).await.unwrap(), &namespace);
        let whoami = api.get("whoami").await.unwrap();
        assert_eq!(
            whoami.data.unwrap()["cluster"],
            cluster,
            "context {cluster} reached another cluster"
        );
    }
    let b: Api<ConfigMap> = Api::namespaced(env.client("cluster-b").await.unwrap(), &namespace);
    assert_eq!(
        status_code(b.get("only-in-a").await.unwrap_err()),
        404,
        "cluster-b sees cluster-a's object"
    );
}

#[tokio::test]
async fn a_crd_is_served_only_where_it_was_installed() {
    let env = CLUSTERS.get().await.unwrap();
    let in_a: Api<DynamicObject> =
        Api::all_with(env.client("cluster-a").await.unwrap(), &widgets());
    in_a.list(&ListParams::default())
        .await
        .expect("cluster-a serves widgets");
    let in_b: Api<DynamicObject> =
        Api::all_with(env.client("cluster-b").await.unwrap(), &widgets());
    assert_eq!(
        status_code(in_b.list(&ListParams::default()).await.unwrap_err()),
        404
    );
}

#[tokio::test]
async fn version_reports_the_pinned_kubernetes_release() {
    let env = CLUSTERS.get().await.unwrap();
    let version = env
        .client("control")
        .await
        .unwrap()
        .apiserver_version()
        .await
        .unwrap();
    assert_eq!(version.git_version, Binaries::kubernetes_version());
}

#[tokio::test]
async fn a_user_without_permissions_gets_403_and_an_invalid_credential_401() {
    let env = CLUSTERS.get().await.unwrap();
    let nobody: Api<ConfigMap> = Api::default_namespaced(
        env.client_as("cluster-b", Credential::NoPermissions)
            .await
            .unwrap(),
    );
    assert_eq!(
        status_code(nobody.list(&ListParams::default()).await.unwrap_err()),
        403
    );
    let invalid: Api<ConfigMap> = Api::default_namespaced(
        env.client_as("cluster-b", Credential::Invalid)
            .await
            .unwrap(),
    );
    assert_eq!(
        status_code(invalid.list(&ListParams::default()).await.unwrap_err()),
        401
    );
}

#[tokio::test]
async fn the_kubeconfig_file_has_one_context_per_cluster() {
    let env = CLUSTERS.get().await.unwrap();
    let written = Kubeconfig::read_from(env.kubeconfig_path()).unwrap();
    let names: Vec<&str> = written.contexts.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["control", "cluster-a", "cluster-b"]);
    for context in &written.contexts {
        let cluster = &context.context.as_ref().unwrap().cluster;
        let entry = written
            .clusters
            .iter()
            .find(|c| &c.name == cluster)
            .unwrap()
            .cluster
            .as_ref()
            .unwrap();
        assert!(
            entry.certificate_authority_data.is_some(),
            "CA data of {cluster} must be inline"
        );
        assert_eq!(
            entry.server.as_deref(),
            Some(env.server_url(&context.name).unwrap().as_str())
        );
    }
    let unknown = env
        .client("cluster-c")
        .await
        .err()
        .expect("no such cluster")
        .to_string();
    assert!(
        unknown.contains("cluster-c") && unknown.contains("control, cluster-a, cluster-b"),
        "{unknown}"
    );
}

#[tokio::test]
async fn one_clusters_kubeconfig_reaches_it_alone_and_a_member_secret_carries_it() {
    let env = CLUSTERS.get().await.unwrap();
    let alone = env.kubeconfig_for("cluster-b").unwrap();
    assert_eq!(alone.current_context.as_deref(), Some("cluster-b"));
    assert_eq!(
        (
            alone.contexts.len(),
            alone.clusters.len(),
            alone.auth_infos.len()
        ),
        (1, 1, 1)
    );
    let secret = env.member_secret("cluster-b", "member-b", "fleet").unwrap();
    assert_eq!(secret.metadata.name.as_deref(), Some("member-b"));
    assert_eq!(secret.metadata.namespace.as_deref(), Some("fleet"));
    let data = secret.string_data.unwrap();
    let carried: Kubeconfig =
        serde_json::from_str(&data[kubeplex_testenv::MEMBER_KUBECONFIG_KEY]).unwrap();
    let json = |k: &Kubeconfig| serde_json::to_value(k).unwrap();
    assert_eq!(json(&carried), json(&alone));
    // It works: a client from it reaches cluster-b, where a ConfigMap written through the admin client is.
    let admin: Api<ConfigMap> = Api::namespaced(env.client("cluster-b").await.unwrap(), "default");
    admin
        .create(&PostParams::default(), &config_map("alone", "b"))
        .await
        .unwrap();
    let config = kube::Config::from_custom_kubeconfig(carried, &Default::default())
        .await
        .unwrap();
    let through: Api<ConfigMap> =
        Api::namespaced(kube::Client::try_from(config).unwrap(), "default");
    let read = through.get("alone").await.unwrap();
    assert_eq!(read.data.unwrap()["cluster"], "b");
    admin
        .delete("alone", &DeleteParams::default())
        .await
        .unwrap();
    assert!(env.kubeconfig_for("cluster-z").is_err());
}

/// `verb name code` of the ConfigMap requests in `namespace` that the audit log of `cluster` holds.
fn config_map_requests(env: &TestEnv, cluster: &str, namespace: &str) -> Vec<String> {
    env.audit_events(cluster)
        .unwrap()
        .iter()
        .filter(|e| e["objectRef"]["resource"] == "configmaps")
        .filter(|e| e["objectRef"]["namespace"] == namespace)
        .map(|e| {
            assert_eq!(e["stage"], "ResponseComplete", "{e:#}");
            assert_eq!(e["user"]["username"], "admin", "{e:#}");
            format!(
                "{} {} {}",
                e["verb"].as_str().unwrap(),
                e["objectRef"]["name"].as_str().unwrap_or("-"),
                e["responseStatus"]["code"]
            )
        })
        .collect()
}

#[tokio::test]
async fn the_audit_log_has_every_request_once_as_soon_as_it_is_answered() {
    let env = CLUSTERS.get().await.unwrap();
    let namespace = env
        .create_namespace(&["cluster-a", "cluster-b"], "audited")
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client("cluster-a").await.unwrap(), &namespace);
    api.create(&PostParams::default(), &config_map("audited", "one"))
        .await
        .unwrap();
    let patch = Patch::Merge(serde_json::json!({ "data": { "cluster": "two" } }));
    let first = api
        .patch("audited", &PatchParams::default(), &patch)
        .await
        .unwrap();
    // The same patch again changes nothing, so no resourceVersion shows it: only the audit log does.
    let again = api
        .patch("audited", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(
        first.metadata.resource_version,
        again.metadata.resource_version
    );
    api.get("audited").await.unwrap();
    assert_eq!(status_code(api.get("missing").await.unwrap_err()), 404);
    api.delete("audited", &DeleteParams::default())
        .await
        .unwrap();
    // Read at once, without waiting: each event is written before its response is sent.
    assert_eq!(
        config_map_requests(env, "cluster-a", &namespace),
        [
            "create audited 201",
            "patch audited 200",
            "patch audited 200",
            "get audited 200",
            "get missing 404",
            "delete audited 200",
        ]
    );
    assert_eq!(
        config_map_requests(env, "cluster-b", &namespace),
        Vec::<String>::new(),
        "each cluster has its own log"
    );
    assert!(
        env.audit_log_path("cluster-a")
            .unwrap()
            .ends_with("cluster-a/audit.log")
    );
}
