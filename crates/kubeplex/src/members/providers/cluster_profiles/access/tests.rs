use kube::core::DynamicObject;
use serde_json::json;

use super::super::conditions::JoinConditions;
use super::super::profile::{Profile, Version};
use super::*;

const TOKEN: &str = "s3cr3t-in-an-env-var";

fn file(policies: serde_json::Value) -> AccessProviders {
    let mut ours = json!({ "name": "ours", "execConfig": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/ours", "args": ["--a"],
        "env": [{ "name": "KEEP", "value": "file" }, { "name": "BOTH", "value": "file" }],
        "provideClusterInfo": true } });
    ours.as_object_mut()
        .unwrap()
        .extend(policies.as_object().unwrap().clone());
    let text = json!({ "providers": [
        ours,
        { "name": "other", "execConfig": { "command": "/bin/other" } },
    ]});
    AccessProviders::from_json(&text.to_string()).unwrap()
}

fn profile(status: serde_json::Value) -> Profile {
    profile_in(Version::V1alpha1, status)
}

fn profile_in(version: Version, status: serde_json::Value) -> Profile {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("multicluster.x-k8s.io/{}", version.as_str()), "kind": "ClusterProfile",
        "metadata": { "name": "c", "namespace": "fleet" }, "status": status,
    }))
    .unwrap();
    Profile::of(&object, version, &JoinConditions::default()).unwrap()
}

fn offer(name: &str, server: &str) -> serde_json::Value {
    json!({ "name": name, "cluster": {
        "server": server, "tls-server-name": "api",
        "extensions": [
            { "name": "client.authentication.k8s.io/exec", "extension": { "audience": "fleet" } },
            { "name": ADDITIONAL_ARGS, "extension": ["--cluster", "c"] },
            { "name": ADDITIONAL_ENVS, "extension": { "BOTH": "profile", "NEW": "profile" } },
        ] } })
}

fn strict() -> KubeconfigAllowlist {
    KubeconfigAllowlist::default()
}

fn env(exec: &ExecConfig) -> Vec<(String, String)> {
    let vars = exec.env.iter().flatten();
    vars.map(|v| (v["name"].clone(), v["value"].clone()))
        .collect()
}

#[test]
fn cluster_profile_uses_the_first_provider_of_the_file_that_it_offers() {
    let access = file(json!({}));
    let offered = profile(json!({
        "conditions": [{ "type": "ControlPlaneHealthy", "status": "True" }],
        "accessProviders": [offer("other", "https://other"), offer("ours", "https://ours")],
    }));
    assert_eq!(offered.unhealthy, None);
    let kubeconfig = access
        .kubeconfig("fleet-c", &offered.offered, &strict())
        .unwrap();
    assert_eq!(kubeconfig.current_context.as_deref(), Some("fleet-c"));
    let cluster = kubeconfig.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.server.as_deref(), Some("https://ours"));
    assert_eq!(cluster.tls_server_name.as_deref(), Some("api"));
    let exec = kubeconfig.auth_infos[0].auth_info.as_ref().unwrap();
    let exec = exec.exec.as_ref().unwrap();
    assert_eq!(exec.command.as_deref(), Some("/bin/ours"));
    assert!(matches!(
        exec.interactive_mode,
        Some(ExecInteractiveMode::Never)
    ));
    assert!(exec.provide_cluster_info);
    // The profile's extra arguments and variables are ignored unless the file allows them.
    assert_eq!(exec.args.as_deref(), Some(&["--a".to_owned()][..]));
    assert_eq!(env(exec).len(), 2);
}

#[test]
fn cluster_profile_access_providers_win_over_credential_providers_by_name() {
    let access = file(json!({}));
    let offered = profile(json!({
        "credentialProviders": [offer("ours", "https://old"), offer("other", "https://other")],
        "accessProviders": [offer("ours", "https://new")],
    }));
    assert_eq!(
        offered.unhealthy.as_deref(),
        Some("it has no ControlPlaneHealthy condition yet")
    );
    let kubeconfig = access.kubeconfig("m", &offered.offered, &strict()).unwrap();
    let cluster = kubeconfig.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.server.as_deref(), Some("https://new"));
    // Only a deprecated offer: it is used.
    let old = json!({ "credentialProviders": [offer("other", "https://other")] });
    let read = profile(old.clone());
    let kubeconfig = access.kubeconfig("m", &read.offered, &strict()).unwrap();
    let cluster = kubeconfig.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.server.as_deref(), Some("https://other"));
    // v1alpha2 has no `credentialProviders`: a stray one is not read.
    let read = profile_in(Version::V1alpha2, old);
    assert_eq!(read.offered.names(), Vec::<&str>::new());
}

#[test]
fn cluster_profile_extensions_change_the_plugin_only_under_the_files_policies() {
    let offered = profile(json!({ "accessProviders": [offer("ours", "https://ours")] }));
    let exec = |policies| {
        let kubeconfig = file(policies)
            .kubeconfig("m", &offered.offered, &strict())
            .unwrap();
        kubeconfig.auth_infos[0]
            .auth_info
            .clone()
            .unwrap()
            .exec
            .unwrap()
    };
    let appended = exec(json!({ "profileSourcedCLIArgsPolicy": "Append",
        "profileSourcedEnvVarsPolicy": "AppendIfNotExists" }));
    assert_eq!(appended.args.clone().unwrap(), ["--a", "--cluster", "c"]);
    let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    };
    let kept = [("BOTH", "file"), ("KEEP", "file"), ("NEW", "profile")];
    assert_eq!(env(&appended), pairs(&kept));
    let replaced = exec(json!({ "profileSourcedEnvVarsPolicy": "Replace" }));
    let replaced_env = [("BOTH", "profile"), ("KEEP", "file"), ("NEW", "profile")];
    assert_eq!(env(&replaced), pairs(&replaced_env));
    assert_eq!(replaced.args.clone().unwrap(), ["--a"]);
}

#[test]
fn cluster_profile_without_a_known_provider_or_health_says_why() {
    let access = file(json!({}));
    let unknown = profile(json!({
        "conditions": [{ "type": "ControlPlaneHealthy", "status": "False",
            "reason": "Unreachable", "message": "no heartbeat" }],
        "accessProviders": [offer("theirs", "https://x")],
    }));
    assert_eq!(
        unknown.unhealthy.as_deref(),
        Some("its ControlPlaneHealthy condition is False (Unreachable: no heartbeat)")
    );
    let error = access
        .kubeconfig("m", &unknown.offered, &strict())
        .unwrap_err();
    assert_eq!(
        error,
        "offers access providers theirs, none of them known (the access-providers file names ours, other)"
    );
    let none = profile(serde_json::Value::Null);
    let error = access
        .kubeconfig("m", &none.offered, &strict())
        .unwrap_err();
    assert!(error.starts_with("offers no access provider, "), "{error}");
}

#[test]
fn access_providers_file_errors_do_not_quote_the_file() {
    let text = format!(
        r#"{{"providers": [{{"name": "x", "execConfig": {{"command": 1, "env": "{TOKEN}"}}}}]}}"#
    );
    let error = AccessProviders::from_json(&text).unwrap_err().to_string();
    assert!(
        error.starts_with("not an access-providers file: "),
        "{error}"
    );
    assert!(!error.contains(TOKEN), "{error}");
    let bad_policy = r#"{"providers": [{"name": "x", "execConfig": {"command": "c"},
        "profileSourcedCLIArgsPolicy": "Sometimes"}]}"#;
    assert!(AccessProviders::from_json(bad_policy).is_err());
    let no_command = r#"{"providers": [{"name": "x", "execConfig": {}}]}"#;
    let error = AccessProviders::from_json(no_command)
        .unwrap_err()
        .to_string();
    assert!(
        error.ends_with("provider x's execConfig has no command"),
        "{error}"
    );
}

#[test]
fn cluster_profile_cluster_is_read_as_a_member_kubeconfigs_cluster_is() {
    let access = file(json!({}));
    let mut offered = offer("ours", "https://ours");
    let cluster = offered["cluster"].as_object_mut().unwrap();
    cluster.insert(
        "certificate-authority".into(),
        json!("/var/run/secrets/token"),
    );
    cluster.insert("proxy-url".into(), json!("http://attacker:3128"));
    cluster.insert("insecure-skip-tls-verify".into(), json!(true));
    let offered = profile(json!({ "accessProviders": [offered] }));
    let refused = access
        .kubeconfig("m", &offered.offered, &strict())
        .unwrap_err();
    for field in [
        "certificate-authority",
        "proxy-url",
        "insecure-skip-tls-verify",
    ] {
        assert!(refused.contains(&format!("cluster's {field}")), "{refused}");
    }
    for value in ["/var/run/secrets/token", "attacker"] {
        assert!(!refused.contains(value), "{refused}");
    }
    // The operator's opt-in lets `insecure-skip-tls-verify` through, and nothing else.
    let insecure = KubeconfigAllowlist {
        insecure: true,
        ..strict()
    };
    let refused = access
        .kubeconfig("m", &offered.offered, &insecure)
        .unwrap_err();
    assert!(!refused.contains("insecure"), "{refused}");
    assert!(refused.contains("cluster's proxy-url"), "{refused}");
}
