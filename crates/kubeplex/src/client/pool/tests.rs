//! The pool: contexts to kubeconfig contexts, and what a client is configured with.
use super::*;

fn kubeconfig_json(contexts: &[&str]) -> serde_json::Value {
    let contexts: Vec<serde_json::Value> = contexts
        .iter()
        .map(|name| serde_json::json!({ "name": name, "context": { "cluster": name, "user": name } }))
        .collect();
    serde_json::json!({ "apiVersion": "v1", "kind": "Config", "contexts": contexts })
}

fn kubeconfig(contexts: &[&str]) -> Kubeconfig {
    serde_json::from_value(kubeconfig_json(contexts)).unwrap()
}

#[test]
fn a_context_maps_to_an_alias_else_the_environment_else_itself() {
    let mut config = PoolConfig::default();
    config
        .aliases
        .insert("control".into(), "kind-control".into());
    let env = |var: &str| (var == "KUBEPLEX_CONTEXT_CLUSTER_A").then(|| "prod-eu-1".to_owned());
    assert_eq!(config.kubeconfig_context_in("control", env), "kind-control");
    assert_eq!(config.kubeconfig_context_in("cluster-a", env), "prod-eu-1");
    assert_eq!(config.kubeconfig_context_in("cluster-b", env), "cluster-b");
    assert_eq!(
        context_env_var("eu.cluster-b"),
        "KUBEPLEX_CONTEXT_EU_CLUSTER_B"
    );
}

#[test]
fn kubeconfig_errors_name_the_file_and_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let none = load_default(None, Some(dir.path().to_owned()))
        .unwrap_err()
        .to_string();
    assert!(
        none.starts_with("no kubeconfig: KUBECONFIG is not set and")
            && none.contains(".kube/config"),
        "{none}"
    );

    let broken = dir.path().join("broken");
    std::fs::write(&broken, "clusters: [this is: not: valid").unwrap();
    let good = dir.path().join("good");
    std::fs::write(
        &good,
        serde_json::to_string(&kubeconfig_json(&["control"])).unwrap(),
    )
    .unwrap();
    let list = std::env::join_paths([&good, &broken]).unwrap();
    let invalid = load_default(Some(list), None).unwrap_err().to_string();
    assert!(
        invalid.starts_with(&format!("invalid kubeconfig: {}: ", broken.display())),
        "{invalid}"
    );

    let missing = dir.path().join("missing");
    let unreadable = load_default(Some(missing.clone().into_os_string()), None)
        .unwrap_err()
        .to_string();
    assert!(
        unreadable.contains(&missing.display().to_string()),
        "{unreadable}"
    );
}

#[test]
fn kubeconfig_files_are_merged_like_kubectl_does() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    std::fs::write(
        &first,
        serde_json::to_string(&kubeconfig_json(&["control"])).unwrap(),
    )
    .unwrap();
    std::fs::write(
        &second,
        serde_json::to_string(&kubeconfig_json(&["cluster-a", "control"])).unwrap(),
    )
    .unwrap();
    let merged =
        load_default(Some(std::env::join_paths([&first, &second]).unwrap()), None).unwrap();
    let names: Vec<&str> = merged.contexts.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["control", "cluster-a"]);
}

#[test]
fn each_client_gets_only_its_own_cluster_and_user() {
    let mut full: serde_json::Value = kubeconfig_json(&["control", "cluster-a", "cluster-b"]);
    full["clusters"] = serde_json::json!(["control", "cluster-a", "cluster-b"].map(
        |n| serde_json::json!({ "name": n, "cluster": { "server": format!("https://{n}") } })
    ));
    full["users"] = serde_json::json!(
        ["control", "cluster-a", "cluster-b"]
            .map(|n| serde_json::json!({ "name": n, "user": { "token": format!("secret-{n}") } }))
    );
    let full: Kubeconfig = serde_json::from_value(full).unwrap();
    let one = only_context(&full, "cluster-a");
    let names = |v: Vec<&str>| v.join(",");
    assert_eq!(
        names(one.contexts.iter().map(|c| c.name.as_str()).collect()),
        "cluster-a"
    );
    assert_eq!(
        names(one.clusters.iter().map(|c| c.name.as_str()).collect()),
        "cluster-a"
    );
    assert_eq!(
        names(one.auth_infos.iter().map(|c| c.name.as_str()).collect()),
        "cluster-a"
    );
    assert_eq!(one.current_context.as_deref(), Some("cluster-a"));
}

#[tokio::test]
async fn a_missing_context_is_named_with_the_ones_the_kubeconfig_has() {
    let config = PoolConfig {
        source: KubeconfigSource::Explicit(Box::new(kubeconfig(&["control", "cluster-a"]))),
        aliases: [("cluster-b".to_owned(), "kind-b".to_owned())].into(),
        ..PoolConfig::default()
    };
    let (pool, errors) = config.connect(&["cluster-b".to_owned()]).await.unwrap();
    let message = errors[0].to_string();
    assert_eq!(
        message,
        "context cluster-b: the kubeconfig given to the manager has no context \"kind-b\" \
         (remapped by Manager::context_alias) (it has: control, cluster-a)"
    );
    assert!(pool.client("cluster-b").is_err());
    assert!(matches!(
        pool.client("elsewhere"),
        Err(Error::UndeclaredContext { .. })
    ));
}

#[tokio::test]
async fn every_client_gives_up_on_an_answer_after_the_read_timeout() {
    let mut kubeconfig = kubeconfig_json(&["control"]);
    kubeconfig["clusters"] = serde_json::json!([
        { "name": "control", "cluster": { "server": "https://127.0.0.1:6443" } }
    ]);
    kubeconfig["users"] = serde_json::json!([{ "name": "control", "user": { "token": "t" } }]);
    let config = PoolConfig {
        source: KubeconfigSource::Explicit(Box::new(serde_json::from_value(kubeconfig).unwrap())),
        ..PoolConfig::default()
    };
    let (pool, errors) = config.connect(&["control".to_owned()]).await.unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    let (_, access) = pool.access().next().unwrap();
    let config = access.config();
    assert_eq!(config.read_timeout, Some(READ_TIMEOUT));
    assert!(
        config.reset_reader_on_write,
        "counted from the request, not from an idle connection"
    );
    assert!(
        READ_TIMEOUT > std::time::Duration::from_secs(290),
        "above the watches' own timeout"
    );
}

#[tokio::test]
async fn a_truncated_client_key_is_reported_naming_the_kubeconfig() {
    let mut kubeconfig = kubeconfig_json(&["cluster-b"]);
    kubeconfig["clusters"] = serde_json::json!([
        { "name": "cluster-b", "cluster": { "server": "https://127.0.0.1:6443" } }
    ]);
    // A key cut off mid-way: not even valid base64 any more.
    kubeconfig["users"] = serde_json::json!([{ "name": "cluster-b", "user": {
        "client-certificate-data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUI=",
        "client-key-data": "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSU",
    } }]);
    let config = PoolConfig {
        source: KubeconfigSource::Explicit(Box::new(serde_json::from_value(kubeconfig).unwrap())),
        ..PoolConfig::default()
    };
    let (_, errors) = config.connect(&["cluster-b".to_owned()]).await.unwrap();
    let message = errors[0].to_string();
    assert!(
        message.starts_with(
            "context cluster-b: cannot configure a client: the kubeconfig given to the manager: "
        ),
        "{message}"
    );
}

#[tokio::test]
async fn every_client_sends_a_user_agent_naming_kubeplex_and_the_replica() {
    let agent = default_user_agent();
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        agent.starts_with(&format!("kubeplex/{version} (")),
        "{agent}"
    );
    assert!(
        agent.ends_with(')') && agent.len() > format!("kubeplex/{version} ()").len(),
        "{agent}"
    );
    let config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
    let (_, built) = PoolConfig::default()
        .finish("cluster-b", config)
        .await
        .unwrap();
    let built = built.config();
    let sent: Vec<_> = built
        .headers
        .iter()
        .filter(|(name, _)| name == hyper::http::header::USER_AGENT)
        .collect();
    assert_eq!(sent.len(), 1, "{:?}", built.headers);
    assert_eq!(sent[0].1, agent.as_str());
    // With leader election the replica's identity is given: that one is sent instead.
    let elected = PoolConfig {
        user_agent: Some("kubeplex/1 (replica-a)".to_owned()),
        ..PoolConfig::default()
    };
    let config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
    let (_, built) = elected.finish("cluster-b", config).await.unwrap();
    let built = built.config();
    assert!(
        built
            .headers
            .iter()
            .any(|(_, value)| value == "kubeplex/1 (replica-a)")
    );
}

/// A kubeconfig of `cluster-b` at `server` with `cluster` settings besides, and a token.
fn kubeconfig_at(server: &str, cluster: serde_json::Value) -> KubeconfigSource {
    let mut kubeconfig = kubeconfig_json(&["cluster-b"]);
    let mut settings = cluster;
    settings["server"] = server.into();
    kubeconfig["clusters"] = serde_json::json!([{ "name": "cluster-b", "cluster": settings }]);
    kubeconfig["users"] = serde_json::json!([{ "name": "cluster-b", "user": { "token": "t" } }]);
    KubeconfigSource::Explicit(Box::new(serde_json::from_value(kubeconfig).unwrap()))
}

#[tokio::test]
async fn a_certificate_authority_with_insecure_skip_tls_verify_is_refused_naming_the_context() {
    use base64::Engine as _;
    let ca = rcgen::generate_simple_self_signed(vec!["ca.example".to_owned()]).unwrap();
    let ca = base64::engine::general_purpose::STANDARD.encode(ca.cert.pem());
    let config = PoolConfig {
        source: kubeconfig_at(
            "https://127.0.0.1:6443",
            serde_json::json!({ "insecure-skip-tls-verify": true, "certificate-authority-data": ca }),
        ),
        ..PoolConfig::default()
    };
    let (pool, errors) = config.connect(&["cluster-b".to_owned()]).await.unwrap();
    let message = errors[0].to_string();
    assert!(
        message.starts_with(
            "context cluster-b: cannot configure a client: the kubeconfig given to the manager: \
             insecure-skip-tls-verify is set together with a certificate authority"
        ),
        "{message}"
    );
    assert!(!message.contains(&ca[..40]), "{message}");
    assert!(pool.client("cluster-b").is_err());
}

/// Every log line written while it is held, as text.
struct Logs {
    written: std::sync::Arc<parking_lot::Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

impl Logs {
    fn capture() -> Self {
        #[derive(Clone)]
        struct Writer(std::sync::Arc<parking_lot::Mutex<Vec<u8>>>);
        impl std::io::Write for Writer {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let written = std::sync::Arc::default();
        let writer = Writer(std::sync::Arc::clone(&written));
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        Self {
            written,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    fn lines(&self, containing: &str) -> Vec<String> {
        String::from_utf8_lossy(&self.written.lock())
            .lines()
            .filter(|line| line.contains(containing))
            .map(str::to_owned)
            .collect()
    }
}

#[tokio::test]
async fn insecure_connections_are_said_once_per_context() {
    let logs = Logs::capture();
    for (server, cluster, expected) in [
        (
            "http://127.0.0.1:6443",
            serde_json::json!({}),
            "plain http://",
        ),
        (
            "https://127.0.0.1:6443",
            serde_json::json!({ "insecure-skip-tls-verify": true }),
            "insecure-skip-tls-verify is set",
        ),
    ] {
        let config = PoolConfig {
            source: kubeconfig_at(server, cluster),
            ..PoolConfig::default()
        };
        // Built again and again (a member's retries and rejoins): said once.
        for _ in 0..3 {
            let (_, errors) = config.connect(&["cluster-b".to_owned()]).await.unwrap();
            assert!(errors.is_empty(), "{errors:?}");
        }
        let said = logs.lines(expected);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].contains("WARN") && said[0].contains("cluster=cluster-b"),
            "{said:?}"
        );
    }
    let secure = PoolConfig {
        source: kubeconfig_at("https://127.0.0.1:6443", serde_json::json!({})),
        ..PoolConfig::default()
    };
    let before = logs.lines("not secure").len();
    secure.connect(&["cluster-b".to_owned()]).await.unwrap();
    assert_eq!(logs.lines("not secure").len(), before);
}
