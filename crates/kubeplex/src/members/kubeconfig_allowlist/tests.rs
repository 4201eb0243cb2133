use serde_json::{Value, json};

use super::*;

/// In every value a test sets: a reason that repeats a value shows it.
const SECRET: &str = "s3cr3t-7f3a91";

fn strict() -> KubeconfigAllowlist {
    KubeconfigAllowlist::default()
}

/// A kubeconfig whose context `m` has `cluster` and `user`, beside a context `other` that sets
/// everything a member may not.
fn kubeconfig(cluster: Value, user: Value) -> Kubeconfig {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "m",
        "clusters": [
            { "name": "c", "cluster": cluster },
            { "name": "other", "cluster": { "server": "https://other", "proxy-url": SECRET } },
        ],
        "users": [
            { "name": "u", "user": user },
            { "name": "other", "user": { "exec": { "command": SECRET } } },
        ],
        "contexts": [
            { "name": "m", "context": { "cluster": "c", "user": "u", "namespace": "apps" } },
            { "name": "other", "context": { "cluster": "other", "user": "other" } },
        ],
    }))
    .unwrap()
}

fn inline_cluster() -> Value {
    json!({ "server": "https://m.example:6443", "certificate-authority-data": "Q0E=",
            "tls-server-name": "api.m" })
}

fn inline_user() -> Value {
    json!({ "token": "t", "client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ" })
}

/// Why `allowlist` refuses `m` with `cluster` and `user`.
fn refused(allowlist: &KubeconfigAllowlist, cluster: Value, user: Value) -> String {
    let kubeconfig = kubeconfig(cluster, user);
    let refused = allowlist.member_kubeconfig(&kubeconfig, "m").unwrap_err();
    let reason = refused.to_string();
    assert!(
        !reason.contains(SECRET),
        "the reason shows a value: {reason}"
    );
    assert!(reason.ends_with("see docs/fleets.md"), "{reason}");
    reason
}

/// `cluster` and `user` with `field` of `part` set to `value`.
fn with(part: &str, field: &str, value: Value) -> (Value, Value) {
    let (mut cluster, mut user) = (inline_cluster(), inline_user());
    let target = if part == "cluster" {
        &mut cluster
    } else {
        &mut user
    };
    target.as_object_mut().unwrap().insert(field.into(), value);
    (cluster, user)
}

#[test]
fn member_kubeconfig_fields_that_read_files_run_commands_or_weaken_tls_are_refused_by_name() {
    let cases = [
        (
            "user",
            "exec",
            json!({ "command": SECRET, "args": [SECRET] }),
        ),
        (
            "user",
            "auth-provider",
            json!({ "name": "gcp", "config": { "cmd-path": SECRET } }),
        ),
        ("user", "tokenFile", json!(SECRET)),
        ("user", "token-file", json!(SECRET)),
        ("user", "client-certificate", json!(SECRET)),
        ("user", "client-key", json!(SECRET)),
        ("user", "username", json!(SECRET)),
        ("user", "password", json!(SECRET)),
        ("user", "as", json!(SECRET)),
        ("user", "as-uid", json!(SECRET)),
        ("user", "as-groups", json!([SECRET])),
        ("user", "as-user-extra", json!({ "k": [SECRET] })),
        ("cluster", "certificate-authority", json!(SECRET)),
        ("cluster", "proxy-url", json!(SECRET)),
        ("cluster", "insecure-skip-tls-verify", json!(true)),
    ];
    for (part, field, value) in cases {
        let (cluster, user) = with(part, field, value);
        let reason = refused(&strict(), cluster, user);
        assert!(
            reason.starts_with(&format!("its kubeconfig sets the {part}'s {field} (")),
            "{reason}"
        );
    }
    // Every field refused is named at once.
    let (cluster, _) = with("cluster", "proxy-url", json!(SECRET));
    let user = json!({ "tokenFile": SECRET, "exec": { "command": SECRET } });
    assert_eq!(
        refused(&strict(), cluster, user),
        "its kubeconfig sets the cluster's proxy-url (a proxy), the user's tokenFile (a local \
         file) and the user's exec (a command), which member kubeconfigs may not; see docs/fleets.md"
    );
}

#[test]
fn member_kubeconfig_inline_credentials_round_trip_and_nothing_else_reaches_kube() {
    let (cluster, user) = (inline_cluster(), inline_user());
    let mut with_extras = user.clone();
    let extension = json!([{ "name": "note", "extension": { "owner": "platform" } }]);
    with_extras["extensions"] = extension.clone();
    let mut cluster_extras = cluster.clone();
    cluster_extras["extensions"] = extension.clone();
    cluster_extras["disable-compression"] = json!(true);
    cluster_extras["insecure-skip-tls-verify"] = json!(false);
    let given = kubeconfig(cluster_extras, with_extras);
    let allowed = strict().member_kubeconfig(&given, "m").unwrap();
    let allowed = serde_json::to_value(&allowed).unwrap();
    let mut expected_cluster = cluster;
    expected_cluster["extensions"] = extension;
    expected_cluster["disable-compression"] = json!(true);
    assert_eq!(
        allowed,
        json!({
            "clusters": [{ "name": "c", "cluster": expected_cluster }],
            "users": [{ "name": "u", "user": user }],
            "contexts": [{ "name": "m", "context": { "cluster": "c", "user": "u", "namespace": "apps" } }],
            "current-context": "m",
        })
    );
}

#[test]
fn member_kubeconfig_exec_is_allowed_only_for_the_commands_listed() {
    let exec = |command: &str, env: Value| {
        json!({ "exec": { "apiVersion": "client.authentication.k8s.io/v1", "command": command,
                          "args": ["eks", "get-token"], "env": env, "interactiveMode": "Always",
                          "installHint": SECRET } })
    };
    let listed = KubeconfigAllowlist {
        exec_commands: ["aws".to_owned(), "/usr/local/bin/kubelogin".to_owned()].into(),
        ..strict()
    };
    for command in ["aws", "/usr/local/bin/kubelogin"] {
        let given = kubeconfig(inline_cluster(), exec(command, json!([])));
        let allowed = listed.member_kubeconfig(&given, "m").unwrap();
        let user = allowed.auth_infos[0].auth_info.as_ref().unwrap();
        let allowed = user.exec.as_ref().unwrap();
        assert_eq!(allowed.command.as_deref(), Some(command));
        assert_eq!(allowed.args.as_ref().unwrap(), &["eks", "get-token"]);
        // Never interactive, whatever the kubeconfig says.
        assert_eq!(allowed.interactive_mode, Some(ExecInteractiveMode::Never));
        assert_eq!(allowed.install_hint, None);
    }
    // Compared as written: another path to the same name, or a name for a path, is another command.
    for command in ["/usr/bin/aws", "./aws", "kubelogin", "aws ", "", SECRET] {
        let reason = refused(&listed, inline_cluster(), exec(command, json!([])));
        assert!(
            reason.starts_with(
                "its kubeconfig sets the user's exec (a command the operator does not allow)"
            ),
            "{command:?}: {reason}"
        );
    }
    // Nor may the kubeconfig change which program the allowed command is.
    for name in [
        "PATH",
        "LD_PRELOAD",
        "ld_library_path",
        "DYLD_INSERT_LIBRARIES",
    ] {
        let env = json!([{ "name": name, "value": SECRET }]);
        let reason = refused(&listed, inline_cluster(), exec("aws", env));
        assert!(reason.contains("the user's exec env ("), "{name}: {reason}");
    }
    let env = json!([{ "name": "AWS_REGION", "value": "eu-west-1" }]);
    let given = kubeconfig(inline_cluster(), exec("aws", env));
    assert!(listed.member_kubeconfig(&given, "m").is_ok());
    // Without a list, no command at all.
    let reason = refused(&strict(), inline_cluster(), exec("aws", json!([])));
    assert!(
        reason.starts_with("its kubeconfig sets the user's exec (a command),"),
        "{reason}"
    );
}

#[test]
fn member_kubeconfig_skips_tls_verification_only_when_allowed() {
    let (cluster, user) = with("cluster", "insecure-skip-tls-verify", json!(true));
    refused(&strict(), cluster.clone(), user.clone());
    let insecure = KubeconfigAllowlist {
        insecure: true,
        ..strict()
    };
    let allowed = insecure
        .member_kubeconfig(&kubeconfig(cluster, user), "m")
        .unwrap();
    let cluster = allowed.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.insecure_skip_tls_verify, Some(true));
    // The opt-in allows that, nothing else.
    let (cluster, user) = with("user", "tokenFile", json!(SECRET));
    refused(&insecure, cluster, user);
}
