//! The deployment manifests in `examples/fleet/deploy/` (the charts rendered with its values, and the
//! hand-written Namespaces and placeholder Secrets) stay valid and least-privileged.
//!
//! `manifests_are_complete_and_least_privileged` reads the YAML only (including the high-availability parts:
//! 3 replicas, a surge-first rolling update, a PodDisruptionBudget, the Lease rights; and the members: the
//! Secrets' Role, the flag, the example member Secret). `manifests_pass_server_side_dry_run` applies every
//! manifest to real API servers from `kubeplex-testenv` with server-side apply in dry-run mode (strict field
//! validation): the control and members sets to `control`, the child set to `cluster-a`.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::Api;
use kube::config::Kubeconfig;
use kube::discovery::Discovery;
use serde_json::{Value, json};

mod dry_run;
mod manifest;
mod members;
mod rbac;

use dry_run::{apply_set, dry_run_apply};
use manifest::{assert_kinds_present, load, one, probe_port};
use rbac::{Grants, assert_rbac, triples};

const SERVICE_ACCOUNT: &str = "kubeplex-fleet";
const OPERATOR_NAMESPACE: &str = "kubeplex-system";

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
            "NetworkPolicy",
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
                "ClusterRole",
                "ClusterRoleBinding",
                "Secret",
                "Deployment",
                "Service",
                "PodDisruptionBudget",
                "NetworkPolicy",
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

    // Least privilege, control cluster: a Role in `crds`, and one in the operator's namespace for the
    // member Secrets.
    let control_grants: Grants = [
        triples(
            "demo.kubeplex.dev",
            "appdeployments",
            &["get", "list", "watch", "patch"],
        ),
        triples("demo.kubeplex.dev", "appdeployments/status", &["patch"]),
        triples(
            "demo.kubeplex.dev",
            "appdeployments/finalizers",
            &["patch", "update"],
        ),
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
    // The member Secrets, and the Event recorded on one whose member is abandoned.
    let member_grants: Grants = [
        triples("", "secrets", &["get", "list", "watch", "patch"]),
        triples("events.k8s.io", "events", &["create", "patch"]),
    ]
    .concat()
    .into_iter()
    .collect();
    // Secure metrics: each scrape's token reviewed and its access checked by the control cluster.
    let review_grants: Grants = [
        triples("authentication.k8s.io", "tokenreviews", &["create"]),
        triples("authorization.k8s.io", "subjectaccessreviews", &["create"]),
    ]
    .concat()
    .into_iter()
    .collect();
    // Every cluster is asked which it is: its kube-system Namespace, read by name.
    let identity_grants: Grants = triples("", "namespaces", &["get"]).into_iter().collect();
    assert_rbac(
        &control,
        &[
            ("crds", &control_grants),
            ("kube-system", &identity_grants),
            (OPERATOR_NAMESPACE, &member_grants),
        ],
        &review_grants,
    );

    // Least privilege, child clusters: Deployments in namespace-a and namespace-b only, and the identity.
    let child_grants: Grants = triples(
        "apps",
        "deployments",
        &["get", "list", "watch", "create", "patch", "delete"],
    )
    .into_iter()
    .collect();
    assert_rbac(
        &child,
        &[
            ("kube-system", &identity_grants),
            ("namespace-a", &child_grants),
            ("namespace-b", &child_grants),
        ],
        &Grants::new(),
    );

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
    assert_eq!(
        container["args"],
        json!([
            "run",
            "--probe-address",
            "0.0.0.0:8080",
            "--namespace",
            "crds",
            "--child-namespaces",
            "namespace-a,namespace-b",
            "--leader-election",
            "--lease-namespace",
            "crds",
            "--members-from-secrets",
            kubeplex_fleet::MEMBER_SELECTOR,
            "--members-namespace",
            OPERATOR_NAMESPACE,
            "--member-leave-policy",
            "delete",
            "--secure-metrics-port",
            "8443",
            "--secure-metrics-cert-dir",
            "/etc/kubeplex/metrics-tls"
        ])
    );
    members::assert_member_secrets(&load("members"), container);

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

    // The Service a ServiceMonitor scrapes /metrics through: the secure metrics port of the Deployment's Pods
    // (tests/operator/dashboard.rs checks the ServiceMonitor against it); the probes stay on their own port.
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
        json!([{ "name": "https", "port": 8443, "targetPort": "metrics", "protocol": "TCP" }])
    );
    let metrics_port = container["ports"]
        .as_array()
        .and_then(|ports| ports.iter().find(|p| p["name"] == "metrics"))
        .expect("a container port named metrics");
    assert_eq!(metrics_port["containerPort"], 8443);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifests_pass_server_side_dry_run() {
    let control = load("control");
    let child = load("child");
    // The suite's clusters: the manifests' Namespaces are theirs alone, the rest a dry run.
    let env = crate::support::shared().await;

    let mut rejected = apply_set(env, "control", &control).await;
    rejected.extend(apply_set(env, "control", &load("members")).await);
    rejected.extend(apply_set(env, "cluster-a", &child).await);
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
