//! The RBAC side of `least_privilege/main.rs`: the ServiceAccounts and grants the charts render (one removed
//! on request; `tests/chart` checks they are what `fleet rbac` derives from the plan) and the deploy
//! manifests' Namespaces applied to the test clusters, in force, and a ServiceAccount token per cluster.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::Kubeconfig;
use kubeplex_testenv::{Polling, TestEnv};
use serde_json::{Value, json};

use crate::support::helm;

/// How long anything the clusters do may take.
pub const WAIT: Duration = Duration::from_secs(60);
pub const SA_NAMESPACE: &str = "kubeplex-system";
pub const SA_NAME: &str = "kubeplex-fleet";
pub const SA_USER: &str = "system:serviceaccount:kubeplex-system:kubeplex-fleet";
/// The field manager of everything the tests apply.
pub const MANAGER: &str = "least-privilege-test";
const CLUSTERS: [&str; 3] = ["control", "cluster-a", "cluster-b"];
const RBAC_KINDS: [&str; 6] = [
    "Namespace",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
];

/// A grant: (manifest set, apiGroup, resource, verb).
pub type Grant = (&'static str, &'static str, &'static str, &'static str);

/// The RBAC the charts render for `set`, with `deploy/`'s values: the operator's chart (leader election,
/// members from Secrets; what the least-privilege tests run) for the control cluster, the child clusters'
/// chart for the children.
fn rendered(set: &str) -> Vec<Value> {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let (chart, values) = match set {
        "control" => (helm::CONTROL_CHART, deploy.join("values.yaml")),
        _ => (helm::CHILD_CHART, deploy.join("child-values.yaml")),
    };
    helm::template(chart, &["--values", values.to_str().expect("a UTF-8 path")])
        .into_iter()
        .map(|document| document.value)
        .collect()
}

/// The `fleet run` arguments of the Deployment the operator's chart renders with `deploy/`'s values, the
/// probes and the secure metrics moved to free ports.
pub fn deployment_args() -> Vec<String> {
    let values = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/values.yaml");
    let documents = helm::template(
        helm::CONTROL_CHART,
        &["--values", values.to_str().expect("a UTF-8 path")],
    );
    let deployment = documents
        .iter()
        .find(|d| d.kind() == "Deployment")
        .expect("the chart renders a Deployment");
    let mut args: Vec<String> = serde_json::from_value(
        deployment.value["spec"]["template"]["spec"]["containers"][0]["args"].clone(),
    )
    .expect("the container's args");
    let probes = args
        .iter()
        .position(|a| a == "--probe-address")
        .expect("the chart passes --probe-address");
    args[probes + 1] = "127.0.0.1:0".into();
    // Any free port for the secure metrics, so that runs side by side do not collide.
    if let Some(metrics) = args.iter().position(|a| a == "--secure-metrics-port") {
        args[metrics + 1] = "0".into();
    }
    // The certificate the pod mounts from a Secret is not on this machine: the operator signs its own.
    if let Some(dir) = args.iter().position(|a| a == "--secure-metrics-cert-dir") {
        args.drain(dir..dir + 2);
    }
    args
}

/// The Namespaces of `deploy/<set>/*.yaml`, in file order, then the ServiceAccount and RBAC the chart
/// renders for it; `removed` taken out of every (Cluster)Role.
fn rbac_manifests(set: &str, removed: Option<Grant>) -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(set);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    let mut manifests = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a readable manifest");
        let documents: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", file.display()));
        manifests.extend(documents.into_iter().filter(|d| d["kind"] == "Namespace"));
    }
    manifests.extend(
        rendered(set)
            .into_iter()
            .filter(|d| RBAC_KINDS.iter().any(|k| d["kind"] == *k)),
    );
    for kind in ["ServiceAccount", "RoleBinding"] {
        assert!(
            manifests.iter().any(|m| m["kind"] == kind),
            "deploy/{set} has no {kind}"
        );
    }
    if let Some((grant_set, group, resource, verb)) = removed.filter(|g| g.0 == set) {
        let mut found = false;
        for role in manifests
            .iter_mut()
            .filter(|m| m["kind"] == "Role" || m["kind"] == "ClusterRole")
        {
            let before = grants(role);
            let after: BTreeSet<_> = before
                .iter()
                .filter(|g| (g.0.as_str(), g.1.as_str(), g.2.as_str()) != (group, resource, verb))
                .cloned()
                .collect();
            if after.len() < before.len() {
                found = true;
                role["rules"] = rules(&after);
            }
        }
        assert!(
            found,
            "deploy/{grant_set} grants no {verb} on {group}/{resource}"
        );
    }
    manifests
}

/// The (apiGroup, resource, verb) triples a Role grants.
fn grants(role: &Value) -> BTreeSet<(String, String, String)> {
    let list = |rule: &Value, field: &str| -> Vec<String> {
        let values = rule[field].as_array();
        let values =
            values.unwrap_or_else(|| panic!("{}: a rule without {field}", role["metadata"]));
        values
            .iter()
            .map(|v| v.as_str().expect("a string").to_owned())
            .collect()
    };
    let mut triples = BTreeSet::new();
    for rule in role["rules"].as_array().into_iter().flatten() {
        assert!(rule.get("resourceNames").is_none());
        // The metrics reader's `/metrics`: a URL, not a resource; nothing here runs as its scraper.
        if rule.get("nonResourceURLs").is_some() {
            continue;
        }
        for group in list(rule, "apiGroups") {
            for resource in list(rule, "resources") {
                for verb in list(rule, "verbs") {
                    triples.insert((group.clone(), resource.clone(), verb));
                }
            }
        }
    }
    triples
}

/// One rule per (apiGroup, resource) granting `triples`.
fn rules(triples: &BTreeSet<(String, String, String)>) -> Value {
    let pairs: BTreeSet<_> = triples.iter().map(|(g, r, _)| (g, r)).collect();
    let rules: Vec<Value> = pairs
        .into_iter()
        .map(|(group, resource)| {
            let verbs: Vec<&str> = triples
                .iter()
                .filter(|(g, r, _)| (g, r) == (group, resource))
                .map(|(_, _, v)| v.as_str())
                .collect();
            json!({ "apiGroups": [group], "resources": [resource], "verbs": verbs })
        })
        .collect();
    json!(rules)
}

/// Applies `manifests` to `cluster` as admin, then waits until the ServiceAccount may do exactly what each
/// Role grants (RBAC follows its objects through a watch, a moment later), and may not do `removed`.
async fn apply_rbac(env: &TestEnv, cluster: &str, manifests: &[Value], removed: Option<Grant>) {
    let client = env.client(cluster).await.expect("an admin client");
    for manifest in manifests {
        let (group, version) = match manifest["apiVersion"]
            .as_str()
            .expect("apiVersion")
            .split_once('/')
        {
            Some((group, version)) => (group, version),
            None => ("", manifest["apiVersion"].as_str().expect("apiVersion")),
        };
        let gvk = kube::api::GroupVersionKind::gvk(
            group,
            version,
            manifest["kind"].as_str().expect("kind"),
        );
        let (resource, _) = kube::discovery::pinned_kind(&client, &gvk)
            .await
            .unwrap_or_else(|e| panic!("{cluster}: {gvk:?} is not served: {e}"));
        let name = manifest["metadata"]["name"].as_str().expect("a name");
        let api: Api<DynamicObject> = match manifest["metadata"]["namespace"].as_str() {
            Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        api.patch(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(manifest),
        )
        .await
        .unwrap_or_else(|e| panic!("{cluster}: applying {} {name}: {e}", gvk.kind));
    }
    let mut expected = Vec::new();
    for role in manifests
        .iter()
        .filter(|m| m["kind"] == "Role" || m["kind"] == "ClusterRole")
    {
        let namespace = role["metadata"]["namespace"].as_str().map(str::to_owned);
        for (group, resource, verb) in grants(role) {
            expected.push((namespace.clone(), group, resource, verb, true));
        }
        if let Some((_, group, resource, verb)) = removed {
            expected.push((
                namespace.clone(),
                group.into(),
                resource.into(),
                verb.into(),
                false,
            ));
        }
    }
    let reviews: Api<SubjectAccessReview> = Api::all(client);
    eventually(&format!("{cluster}: RBAC in force"), || async {
        for (namespace, group, resource, verb, allowed) in &expected {
            let (resource, subresource) = match resource.split_once('/') {
                Some((r, s)) => (r.to_owned(), Some(s.to_owned())),
                None => (resource.clone(), None),
            };
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(SA_USER.into()),
                    groups: Some(vec![
                        "system:serviceaccounts".into(),
                        "system:authenticated".into(),
                    ]),
                    resource_attributes: Some(ResourceAttributes {
                        namespace: namespace.clone(),
                        group: Some(group.clone()),
                        resource: Some(resource.clone()),
                        subresource,
                        verb: Some(verb.clone()),
                        ..ResourceAttributes::default()
                    }),
                    ..SubjectAccessReviewSpec::default()
                },
                ..SubjectAccessReview::default()
            };
            let answer = reviews
                .create(&PostParams::default(), &review)
                .await
                .map_err(|e| e.to_string())?;
            if answer.status.map(|s| s.allowed) != Some(*allowed) {
                return Err(format!(
                    "{verb} {group}/{resource} in {namespace:?}: not yet {allowed}"
                ));
            }
        }
        Ok(())
    })
    .await;
}

/// Applies the manifests (`removed` taken out) and returns a token of each cluster's ServiceAccount:
/// `control`, `cluster-a`, `cluster-b`, in this order.
pub async fn install(env: &TestEnv, removed: Option<Grant>) -> Vec<(&'static str, String)> {
    for (set, clusters) in [("control", &CLUSTERS[..1]), ("child", &CLUSTERS[1..])] {
        let removed = removed.filter(|grant| grant.0 == set);
        let manifests = rbac_manifests(set, removed);
        for cluster in clusters {
            apply_rbac(env, cluster, &manifests, removed).await;
        }
    }
    let mut tokens = Vec::new();
    for cluster in CLUSTERS {
        let token = env.service_account_token(cluster, SA_NAMESPACE, SA_NAME);
        tokens.push((cluster, token.await.expect("a ServiceAccount token")));
    }
    tokens
}

/// A kubeconfig whose contexts authenticate with `tokens` only; checks each is the ServiceAccount.
pub async fn token_kubeconfig(env: &TestEnv, tokens: &[(&'static str, String)]) -> Kubeconfig {
    let pairs: Vec<(&str, &str)> = tokens.iter().map(|(c, t)| (*c, t.as_str())).collect();
    let kubeconfig = env
        .kubeconfig_with_tokens(&pairs)
        .expect("a token kubeconfig");
    for (cluster, _) in tokens {
        let options = kube::config::KubeConfigOptions {
            context: Some((*cluster).into()),
            ..Default::default()
        };
        let config = kube::Config::from_custom_kubeconfig(kubeconfig.clone(), &options)
            .await
            .unwrap();
        let client = Client::try_from(config).unwrap();
        let review = Api::<SelfSubjectReview>::all(client)
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
            .unwrap_or_else(|e| panic!("{cluster}: who am I: {e}"));
        let user = review
            .status
            .and_then(|s| s.user_info)
            .and_then(|u| u.username);
        assert_eq!(
            user.as_deref(),
            Some(SA_USER),
            "{cluster}: the token's user"
        );
    }
    kubeconfig
}

/// Polls `check` until it returns `Ok`; panics with `what` and its last complaint after [`WAIT`].
pub async fn eventually(what: &str, check: impl AsyncFnMut() -> Result<(), String>) {
    if let Err(message) = try_eventually(what, check).await {
        panic!("{message}");
    }
}

/// Polls `check` until it returns `Ok`; after [`WAIT`], `what` and its last complaint.
pub async fn try_eventually(
    what: &str,
    check: impl AsyncFnMut() -> Result<(), String>,
) -> Result<(), String> {
    let polling = Polling::within(WAIT).every(Duration::from_millis(200));
    kubeplex_testenv::try_eventually(what, polling, check)
        .await
        .map_err(|timeout| timeout.to_string())
}
