//! The deployment manifests in `examples/fleet/deploy/` stay valid and least-privileged.
//!
//! `manifests_are_complete_and_least_privileged` reads the YAML only (including the high-availability parts:
//! 3 replicas, a surge-first rolling update, a PodDisruptionBudget, the Lease rights). `manifests_pass_server_side_dry_run`
//! applies every manifest to real API servers from `kubeplex-testenv` with server-side apply in dry-run mode
//! (strict field validation): the control set to `control`, the child set to `cluster-a`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::config::Kubeconfig;
use kube::discovery::{Discovery, Scope};
use kube::{Client, ResourceExt};
use kubeplex_testenv::TestEnv;
use serde_json::{Value, json};

const FIELD_MANAGER: &str = "kubeplex-fleet-tests";
const SERVICE_ACCOUNT: &str = "kubeplex-fleet";
const OPERATOR_NAMESPACE: &str = "kubeplex-system";

/// One YAML document of a manifest file.
#[derive(Clone, Debug)]
struct Manifest {
    /// `file.yaml#index`, for messages.
    origin: String,
    value: Value,
}

impl Manifest {
    fn str_at(&self, pointer: &str) -> Option<&str> {
        self.value.pointer(pointer).and_then(Value::as_str)
    }

    fn api_version(&self) -> &str {
        self.str_at("/apiVersion")
            .unwrap_or_else(|| panic!("{}: no apiVersion", self.origin))
    }

    fn kind(&self) -> &str {
        self.str_at("/kind")
            .unwrap_or_else(|| panic!("{}: no kind", self.origin))
    }

    fn name(&self) -> &str {
        self.str_at("/metadata/name")
            .unwrap_or_else(|| panic!("{}: no metadata.name", self.origin))
    }

    fn namespace(&self) -> Option<&str> {
        self.str_at("/metadata/namespace")
    }

    fn gvk(&self) -> GroupVersionKind {
        let (group, version) = match self.api_version().split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", self.api_version()),
        };
        GroupVersionKind::gvk(group, version, self.kind())
    }

    fn describe(&self) -> String {
        match self.namespace() {
            Some(ns) => format!("{} {ns}/{} ({})", self.kind(), self.name(), self.origin),
            None => format!("{} {} ({})", self.kind(), self.name(), self.origin),
        }
    }
}

fn deploy_dir(set: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(set)
}

/// Every document of every `*.yaml`/`*.yml` file of `deploy/<set>/`, in file-name order.
fn load(set: &str) -> Vec<Manifest> {
    let dir = deploy_dir(set);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|ext| ext == "yaml" || ext == "yml")
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no manifests in {}", dir.display());

    let mut manifests = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let file_name = format!("{set}/{}", file.file_name().unwrap().to_string_lossy());
        let documents: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{file_name} is not valid YAML: {e}"));
        assert!(!documents.is_empty(), "{file_name} has no document");
        for (index, value) in documents.into_iter().enumerate() {
            let manifest = Manifest {
                origin: format!("{file_name}#{index}"),
                value,
            };
            // Panics with the origin if one of these is missing.
            let _ = (manifest.api_version(), manifest.kind(), manifest.name());
            manifests.push(manifest);
        }
    }
    manifests
}

fn of_kind<'a>(manifests: &'a [Manifest], kind: &str) -> Vec<&'a Manifest> {
    manifests.iter().filter(|m| m.kind() == kind).collect()
}

fn one<'a>(
    manifests: &'a [Manifest],
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> &'a Manifest {
    let found: Vec<_> = of_kind(manifests, kind)
        .into_iter()
        .filter(|m| m.namespace() == namespace && m.name() == name)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected exactly one {kind} {namespace:?}/{name}, found {}",
        found.len()
    );
    found[0]
}

/// The (apiGroup, resource, verb) triples a Role grants; wildcards, resourceNames and nonResourceURLs fail.
fn grants(role: &Manifest) -> BTreeSet<(String, String, String)> {
    let rules = role
        .value
        .pointer("/rules")
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("{}: no rules", role.describe()));
    let strings = |rule: &Value, field: &str| -> Vec<String> {
        rule.get(field)
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("{}: a rule without {field}", role.describe()))
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    let mut triples = BTreeSet::new();
    for rule in rules {
        for field in ["resourceNames", "nonResourceURLs"] {
            assert!(
                rule.get(field).is_none(),
                "{}: unexpected {field}",
                role.describe()
            );
        }
        for group in strings(rule, "apiGroups") {
            for resource in strings(rule, "resources") {
                for verb in strings(rule, "verbs") {
                    for item in [&group, &resource, &verb] {
                        assert!(
                            !item.contains('*'),
                            "{}: wildcard {item:?}",
                            role.describe()
                        );
                    }
                    triples.insert((group.clone(), resource.clone(), verb.clone()));
                }
            }
        }
    }
    triples
}

fn triples(group: &str, resource: &str, verbs: &[&str]) -> Vec<(String, String, String)> {
    verbs
        .iter()
        .map(|verb| (group.to_owned(), resource.to_owned(), (*verb).to_owned()))
        .collect()
}

/// Each Role in `namespaces` grants exactly `expected`; each is bound, by a RoleBinding in the same
/// namespace, to the ServiceAccount kubeplex-system/kubeplex-fleet and nothing else; nothing cluster-wide.
fn assert_rbac(
    manifests: &[Manifest],
    namespaces: &[&str],
    expected: &BTreeSet<(String, String, String)>,
) {
    for kind in ["ClusterRole", "ClusterRoleBinding"] {
        assert!(
            of_kind(manifests, kind).is_empty(),
            "least privilege: no {kind} expected, found {:?}",
            of_kind(manifests, kind)
                .iter()
                .map(|m| m.describe())
                .collect::<Vec<_>>()
        );
    }
    let role_namespaces: BTreeSet<_> = of_kind(manifests, "Role")
        .iter()
        .map(|m| m.namespace().expect("a Role without namespace"))
        .collect();
    assert_eq!(
        role_namespaces,
        namespaces.iter().copied().collect(),
        "Roles in unexpected namespaces"
    );
    let binding_namespaces: BTreeSet<_> = of_kind(manifests, "RoleBinding")
        .iter()
        .map(|m| m.namespace().expect("a RoleBinding without namespace"))
        .collect();
    assert_eq!(
        binding_namespaces,
        namespaces.iter().copied().collect(),
        "RoleBindings in unexpected namespaces"
    );

    for role in of_kind(manifests, "Role") {
        assert_eq!(
            &grants(role),
            expected,
            "{} must grant exactly what the operator needs",
            role.describe()
        );
    }
    for binding in of_kind(manifests, "RoleBinding") {
        let namespace = binding.namespace();
        assert_eq!(
            binding.value["roleRef"],
            json!({ "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": binding.value["roleRef"]["name"] }),
            "{}: roleRef must name a Role",
            binding.describe()
        );
        let role_name = binding.value["roleRef"]["name"].as_str().unwrap();
        one(manifests, "Role", namespace, role_name);
        assert_eq!(
            binding.value["subjects"],
            json!([{ "kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": OPERATOR_NAMESPACE }]),
            "{}: must bind the operator's ServiceAccount only",
            binding.describe()
        );
    }
}

fn assert_kinds_present(manifests: &[Manifest], kinds: &[&str]) {
    let present: BTreeSet<_> = manifests.iter().map(Manifest::kind).collect();
    for kind in kinds {
        assert!(
            present.contains(kind),
            "missing a {kind}; kinds present: {present:?}"
        );
    }
}

/// The port a probe's `httpGet.port` names (a number, or the name of a container port).
fn probe_port(container: &Value, probe: &str) -> i64 {
    let port = &container[probe]["httpGet"]["port"];
    if let Some(number) = port.as_i64() {
        return number;
    }
    let name = port
        .as_str()
        .unwrap_or_else(|| panic!("{probe}: no httpGet.port"));
    container["ports"]
        .as_array()
        .and_then(|ports| ports.iter().find(|p| p["name"] == name))
        .and_then(|p| p["containerPort"].as_i64())
        .unwrap_or_else(|| panic!("{probe}: port {name:?} is not a container port"))
}

#[test]
fn manifests_are_complete_and_least_privileged() {
    let control = load("control");
    let child = load("child");

    // What item 6 asks for, per cluster.
    assert_kinds_present(
        &control,
        &[
            "Namespace",
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "Secret",
            "Deployment",
            "Service",
            "PodDisruptionBudget",
        ],
    );
    assert_kinds_present(
        &child,
        &["Namespace", "ServiceAccount", "Role", "RoleBinding"],
    );
    for (set, manifests, allowed) in [
        (
            "control",
            &control,
            &[
                "Namespace",
                "ServiceAccount",
                "Role",
                "RoleBinding",
                "Secret",
                "Deployment",
                "Service",
                "PodDisruptionBudget",
            ][..],
        ),
        (
            "child",
            &child,
            &["Namespace", "ServiceAccount", "Role", "RoleBinding"][..],
        ),
    ] {
        for m in manifests {
            assert!(
                allowed.contains(&m.kind()),
                "{set}: unexpected {}",
                m.describe()
            );
        }
    }

    // Namespaces.
    for ns in [OPERATOR_NAMESPACE, "crds"] {
        one(&control, "Namespace", None, ns);
    }
    for ns in [OPERATOR_NAMESPACE, "namespace-a", "namespace-b"] {
        one(&child, "Namespace", None, ns);
    }
    for set in [&control, &child] {
        one(
            set,
            "ServiceAccount",
            Some(OPERATOR_NAMESPACE),
            SERVICE_ACCOUNT,
        );
    }

    // Least privilege, control cluster: a Role in `crds` only.
    let control_grants: BTreeSet<_> = [
        triples(
            "demo.kubeplex.dev",
            "appdeployments",
            &["get", "list", "watch", "patch", "update"],
        ),
        triples(
            "demo.kubeplex.dev",
            "appdeployments/status",
            &["patch", "update"],
        ),
        triples(
            "demo.kubeplex.dev",
            "appdeployments/finalizers",
            &["patch", "update"],
        ),
        triples("", "events", &["create", "patch"]),
        triples("events.k8s.io", "events", &["create", "patch"]),
        // Leader election's Lease (`fleet run --leader-election`, Lease namespace `crds`).
        triples(
            "coordination.k8s.io",
            "leases",
            &["get", "create", "update"],
        ),
    ]
    .concat()
    .into_iter()
    .collect();
    assert_rbac(&control, &["crds"], &control_grants);

    // Least privilege, child clusters: Deployments in namespace-a and namespace-b only.
    let child_grants: BTreeSet<_> = triples(
        "apps",
        "deployments",
        &[
            "get", "list", "watch", "create", "update", "patch", "delete",
        ],
    )
    .into_iter()
    .collect();
    assert_rbac(&child, &["namespace-a", "namespace-b"], &child_grants);

    // The kubeconfig Secret: a placeholder, but a well-formed kubeconfig with the two child contexts.
    let secret = one(
        &control,
        "Secret",
        Some(OPERATOR_NAMESPACE),
        "kubeplex-fleet-kubeconfig",
    );
    assert!(
        secret.value.get("data").is_none(),
        "the placeholder goes in stringData"
    );
    let config = secret
        .str_at("/stringData/config")
        .expect("the Secret carries the kubeconfig under the key `config`");
    assert!(
        config.contains("PLACEHOLDER") && config.contains("REPLACE_WITH_"),
        "the kubeconfig must be marked as a placeholder"
    );
    let kubeconfig = Kubeconfig::from_yaml(config).expect("the placeholder is a kubeconfig");
    let contexts: BTreeSet<_> = kubeconfig
        .contexts
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(contexts, BTreeSet::from(["cluster-a", "cluster-b"]));

    // The Deployment.
    let deployment = one(
        &control,
        "Deployment",
        Some(OPERATOR_NAMESPACE),
        "kubeplex-fleet",
    );
    let pod = &deployment.value["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], SERVICE_ACCOUNT);
    assert_ne!(
        pod["automountServiceAccountToken"], false,
        "the control context needs the token"
    );
    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1);
    let container = &containers[0];
    assert_eq!(container["image"], "ghcr.io/kubeplex/fleet:0.1.0");
    assert_eq!(container["args"], json!(["run", "--leader-election"]));

    // Several replicas (docs/ha.md): a surge replica first, never one less; a budget that always leaves a
    // standby; each replica named by its Pod in the Lease.
    let spec = &deployment.value["spec"];
    assert_eq!(spec["replicas"], 3);
    assert_eq!(
        spec["strategy"],
        json!({ "type": "RollingUpdate", "rollingUpdate": { "maxUnavailable": 0, "maxSurge": 1 } })
    );
    let budget = one(
        &control,
        "PodDisruptionBudget",
        Some(OPERATOR_NAMESPACE),
        "kubeplex-fleet",
    );
    assert_eq!(budget.value["spec"]["maxUnavailable"], 1);
    assert_eq!(
        budget.value["spec"]["selector"]["matchLabels"], spec["selector"]["matchLabels"],
        "the budget selects the operator's Pods"
    );
    let pod_name = container["env"]
        .as_array()
        .and_then(|env| env.iter().find(|e| e["name"] == "POD_NAME"))
        .expect("POD_NAME in the environment");
    assert_eq!(
        pod_name["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name",
        "POD_NAME from the downward API"
    );

    for (probe, path) in [
        ("startupProbe", "/startupz"),
        ("readinessProbe", "/readyz"),
        ("livenessProbe", "/livez"),
    ] {
        assert_eq!(container[probe]["httpGet"]["path"], path, "{probe} path");
        assert_eq!(probe_port(container, probe), 8080, "{probe} port");
    }
    // docs/probes.md: startup 2 s × 150, readiness 10 s × 3, liveness 20 s.
    assert_eq!(container["startupProbe"]["periodSeconds"], 2);
    assert_eq!(container["startupProbe"]["failureThreshold"], 150);
    assert_eq!(container["readinessProbe"]["periodSeconds"], 10);
    assert_eq!(container["readinessProbe"]["failureThreshold"], 3);
    assert_eq!(container["livenessProbe"]["periodSeconds"], 20);

    let env: BTreeMap<_, _> = container["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["value"].as_str()))
        .collect();
    assert_eq!(env["KUBECONFIG"], Some("/etc/kubeplex/kubeconfig/config"));
    assert_eq!(env["KUBEPLEX_CONTEXT_CONTROL"], Some("in-cluster"));

    let security = &container["securityContext"];
    assert_eq!(security["runAsNonRoot"], true);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    assert!(security["capabilities"].get("add").is_none());
    assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault");
    for bound in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            assert!(
                container["resources"][bound][resource].is_string(),
                "resources.{bound}.{resource} missing"
            );
        }
    }

    // The Service a ServiceMonitor scrapes /metrics through: the probe port of the Deployment's Pods
    // (tests/dashboard.rs checks the ServiceMonitor and the scrape annotations against it).
    let service = one(
        &control,
        "Service",
        Some(OPERATOR_NAMESPACE),
        "kubeplex-fleet",
    );
    let selector = service.value["spec"]["selector"]
        .as_object()
        .expect("the Service has a selector");
    for (key, value) in selector {
        assert_eq!(
            &deployment.value["spec"]["template"]["metadata"]["labels"][key], value,
            "the Service selects {key}={value}, which the operator's Pods lack"
        );
    }
    assert_eq!(
        service.value["spec"]["ports"],
        json!([{ "name": "metrics", "port": 8080, "targetPort": "probes", "protocol": "TCP" }])
    );
    assert_eq!(probe_port(container, "readinessProbe"), 8080);
    assert_eq!(container["readinessProbe"]["httpGet"]["port"], "probes");

    let volume = pod["volumes"]
        .as_array()
        .and_then(|vs| {
            vs.iter()
                .find(|v| v["secret"]["secretName"] == "kubeplex-fleet-kubeconfig")
        })
        .expect("a volume from the kubeconfig Secret");
    let mount = container["volumeMounts"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["name"] == volume["name"]))
        .expect("the kubeconfig volume is mounted");
    assert_eq!(mount["mountPath"], "/etc/kubeplex/kubeconfig");
    assert_eq!(mount["readOnly"], true);
}

/// Server-side applies `manifest` in dry-run mode with strict field validation.
async fn dry_run_apply(
    client: &Client,
    discovery: &Discovery,
    manifest: &Manifest,
) -> Result<DynamicObject, String> {
    let (resource, capabilities) = discovery.resolve_gvk(&manifest.gvk()).ok_or_else(|| {
        format!(
            "{}: the API server does not serve {:?}",
            manifest.describe(),
            manifest.gvk()
        )
    })?;
    let api: Api<DynamicObject> = match (capabilities.scope, manifest.namespace()) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
        (Scope::Namespaced, None) => {
            return Err(format!(
                "{}: namespaced, so it must name its namespace",
                manifest.describe()
            ));
        }
        (Scope::Cluster, None) => Api::all_with(client.clone(), &resource),
        (Scope::Cluster, Some(_)) => {
            return Err(format!(
                "{}: cluster-scoped, but names a namespace",
                manifest.describe()
            ));
        }
    };
    let params = PatchParams::apply(FIELD_MANAGER)
        .dry_run()
        .validation_strict();
    api.patch(manifest.name(), &params, &Patch::Apply(&manifest.value))
        .await
        .map_err(|e| format!("{} rejected: {e}", manifest.describe()))
}

/// Creates the set's Namespaces for real (dry-run creates nothing, and namespaced objects need their
/// namespace), then dry-runs every manifest. Returns each rejection.
async fn apply_set(env: &TestEnv, cluster: &str, manifests: &[Manifest]) -> Vec<String> {
    let client = env.client(cluster).await.unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for manifest in of_kind(manifests, "Namespace") {
        namespaces
            .patch(
                manifest.name(),
                &PatchParams::apply(FIELD_MANAGER).validation_strict(),
                &Patch::Apply(&manifest.value),
            )
            .await
            .unwrap_or_else(|e| panic!("{cluster}: creating {}: {e}", manifest.describe()));
    }
    let discovery = Discovery::new(client.clone()).run().await.unwrap();

    let mut rejected = Vec::new();
    for manifest in manifests {
        match dry_run_apply(&client, &discovery, manifest).await {
            Ok(object) => assert_eq!(object.name_any(), manifest.name()),
            Err(reason) => rejected.push(format!("{cluster}: {reason}")),
        }
    }
    rejected
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifests_pass_server_side_dry_run() {
    let control = load("control");
    let child = load("child");
    let env = TestEnv::builder()
        .clusters(["control", "cluster-a"])
        .start()
        .await
        .unwrap();

    let mut rejected = apply_set(&env, "control", &control).await;
    rejected.extend(apply_set(&env, "cluster-a", &child).await);
    assert!(
        rejected.is_empty(),
        "manifests rejected:\n{}",
        rejected.join("\n")
    );

    // Dry run really created nothing but the Namespaces.
    let client = env.client("control").await.unwrap();
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), OPERATOR_NAMESPACE);
    assert!(
        deployments
            .get_opt("kubeplex-fleet")
            .await
            .unwrap()
            .is_none()
    );

    // The check has teeth: the API server rejects a broken copy of each kind of mistake.
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let deployment = one(
        &control,
        "Deployment",
        Some(OPERATOR_NAMESPACE),
        "kubeplex-fleet",
    );
    let broken = |origin: &str, edit: &dyn Fn(&mut Value)| {
        let mut copy = deployment.clone();
        copy.origin = origin.to_owned();
        edit(&mut copy.value);
        copy
    };
    let mistakes = [
        broken("unknown field", &|v| {
            v["spec"]["template"]["spec"]["containers"][0]["startupProbe"]["httpGett"] =
                json!({ "path": "/startupz", "port": 8080 });
        }),
        broken("a probe port name longer than 15 characters", &|v| {
            v["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"] =
                json!("no-such-port-name-longer-than-15");
        }),
        broken("wrong apiVersion", &|v| {
            v["apiVersion"] = json!("apps/v1beta1")
        }),
        broken("negative period", &|v| {
            v["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["periodSeconds"] =
                json!(-1);
        }),
    ];
    let role = one(&control, "Role", Some("crds"), "kubeplex-fleet");
    let mut misspelled_role = role.clone();
    misspelled_role.origin = "a misspelled rule field".to_owned();
    misspelled_role.value["rules"][0]["apiGroup"] = json!("demo.kubeplex.dev");
    for mistake in mistakes.iter().chain([&misspelled_role]) {
        assert!(
            dry_run_apply(&client, &discovery, mistake).await.is_err(),
            "{} was accepted",
            mistake.describe()
        );
    }
}
