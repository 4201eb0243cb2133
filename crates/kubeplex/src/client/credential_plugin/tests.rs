use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use super::*;
use crate::client::Access;

/// What the plugins print on stderr, and what no error may repeat.
const SECRET: &str = "stderr-s3cr3t-9f2e";

/// A plugin in `dir` whose shell `body` runs after it counted its run in `dir/runs`.
fn plugin(dir: &Path, body: &str) -> ExecConfig {
    let d = dir.display();
    let path = dir.join("plugin");
    std::fs::write(&path, format!("#!/bin/sh\necho run >> {d}/runs\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": path.to_string_lossy(),
    }))
    .unwrap()
}

/// A plugin printing a token.
fn token_plugin(dir: &Path) -> ExecConfig {
    plugin(
        dir,
        r#"echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t1"}}'"#,
    )
}

fn runs(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("runs"))
        .unwrap_or_default()
        .lines()
        .count()
}

fn config_with(exec: ExecConfig) -> kube::Config {
    let mut config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
    config.auth_info.exec = Some(exec);
    config
}

fn run_with(exec: ExecConfig, timeout: Duration) -> CredentialPlugin {
    let user = AuthInfo {
        exec: Some(exec),
        ..AuthInfo::default()
    };
    CredentialPlugin::of(&user, timeout).expect("the user's credentials come from the plugin")
}

#[tokio::test]
async fn a_plugin_runs_once_per_client_build() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with(token_plugin(dir.path()));
    let access = Access::of("cluster-a", config, DEFAULT_PLUGIN_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(
        runs(dir.path()),
        1,
        "kube ran it once more for TLS and once for the token"
    );
    // Clients of the built access share its token: none runs the plugin.
    crate::client::own_client(&access).unwrap();
    assert_eq!(runs(dir.path()), 1);

    // A client certificate is read once too, and kube is given it.
    let cert = rcgen::generate_simple_self_signed(vec!["kubeplex-test".to_owned()]).unwrap();
    let status = serde_json::json!({
        "clientCertificateData": cert.cert.pem(),
        "clientKeyData": cert.signing_key.serialize_pem(),
    });
    let printed = serde_json::json!({ "kind": "ExecCredential", "status": status });
    let other = tempfile::tempdir().unwrap();
    let answer = other.path().join("answer");
    std::fs::write(&answer, printed.to_string()).unwrap();
    let config = config_with(plugin(other.path(), &format!("cat {}", answer.display())));
    let access = Access::of("cluster-a", config, DEFAULT_PLUGIN_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(runs(other.path()), 1);
    assert!(
        !access.authorization.renews(),
        "a certificate authenticates on the connection"
    );
}

#[tokio::test]
async fn a_plugin_is_never_interactive_and_its_stderr_is_shown_nowhere() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    // It records its stdin, its stderr and the exec info, says a secret on stderr, and fails.
    let mut exec = plugin(
        dir.path(),
        &format!(
            "readlink /proc/self/fd/0 > {d}/stdin\nreadlink /proc/self/fd/2 > {d}/stderr\n\
             printf '%s' \"$KUBERNETES_EXEC_INFO\" > {d}/info\necho '{SECRET}' >&2\nexit 3"
        ),
    );
    // Whatever the kubeconfig asks for.
    exec.interactive_mode = Some(kube::config::ExecInteractiveMode::Always);
    let error = match Access::of("cluster-a", config_with(exec), DEFAULT_PLUGIN_TIMEOUT).await {
        Err(error) => error,
        Ok(_) => panic!("the plugin failed"),
    };
    assert!(error.reason.contains("exit status: 3"), "{error}");
    assert!(error.may_pass, "a failed plugin may succeed next time");
    for shown in [error.to_string(), format!("{error:?}")] {
        assert!(!shown.contains(SECRET), "{shown}");
    }
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    assert_eq!(read("stdin").trim(), "/dev/null", "no stdin");
    let ours = std::fs::read_link("/proc/self/fd/2").unwrap();
    let theirs = read("stderr");
    assert!(
        theirs.starts_with("pipe:") && Path::new(theirs.trim()) != ours,
        "the plugin's stderr is a pipe of its own, not this process's stderr ({ours:?}): {theirs}"
    );
    let info: serde_json::Value = serde_json::from_str(&read("info")).unwrap();
    assert_eq!(
        info,
        serde_json::json!({
            "apiVersion": "client.authentication.k8s.io/v1",
            "kind": "ExecCredential",
            "spec": { "interactive": false },
        })
    );
}

#[tokio::test]
async fn a_plugin_is_given_the_cluster_when_it_asks() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let mut exec = plugin(
        dir.path(),
        &format!(
            "printf '%s' \"$KUBERNETES_EXEC_INFO\" > {d}/info\n\
             echo '{{\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"t\"}}}}'"
        ),
    );
    exec.provide_cluster_info = true;
    let missing = run_with(exec.clone(), DEFAULT_PLUGIN_TIMEOUT).run().await;
    assert!(
        matches!(missing, Err(PluginError::NoClusterInfo)),
        "not started without it"
    );
    exec.cluster = Some(kube::config::ExecAuthCluster {
        server: Some("https://member.example:6443".into()),
        config: Some(serde_json::json!({ "region": "eu-1" })),
        ..Default::default()
    });
    run_with(exec, DEFAULT_PLUGIN_TIMEOUT).run().await.unwrap();
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("info")).unwrap()).unwrap();
    assert_eq!(
        info["spec"]["cluster"],
        serde_json::json!({ "server": "https://member.example:6443", "config": { "region": "eu-1" } })
    );
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
fn ended(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

#[tokio::test]
async fn a_plugin_that_does_not_answer_is_stopped_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    // It starts a process of its own, says who they are, and waits for ever.
    let exec = plugin(
        dir.path(),
        &format!("sleep 600 &\necho $! > {d}/started\necho $$ > {d}/pid\nwait"),
    );
    let timeout = Duration::from_millis(300);
    let error = match Access::of("cluster-a", config_with(exec), timeout).await {
        Err(error) => error,
        Ok(_) => panic!("the plugin never answers"),
    };
    assert_eq!(
        error.reason,
        "the credential plugin did not answer within 0.3 s and was stopped"
    );
    assert!(error.may_pass);
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    let (pid, started) = (read("pid"), read("started"));
    // It is stopped with what it started: the signal is sent, their end may take a moment.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !(ended(pid.trim()) && ended(started.trim())) {
        assert!(
            std::time::Instant::now() < deadline,
            "the plugin, or what it started, still runs"
        );
        tokio::task::yield_now().await;
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test]
async fn what_a_plugin_prints_is_capped_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let endless = plugin(dir.path(), "yes kubeplex");
    let error = run_with(endless, DEFAULT_PLUGIN_TIMEOUT).run().await.err();
    assert!(matches!(error, Some(PluginError::TooLong)), "{error:?}");

    let cases = [
        ("echo 'token {SECRET}'", "not an ExecCredential"),
        (r#"echo '{"kind":"ExecCredential"}'"#, "has no status"),
        (r#"echo '{"status":{}}'"#, "neither a token"),
        (
            r#"echo '{"status":{"token":"t","expirationTimestamp":"tomorrow"}}'"#,
            "not an RFC 3339 time",
        ),
    ];
    for (body, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let exec = plugin(dir.path(), &body.replace("{SECRET}", SECRET));
        let error = run_with(exec, DEFAULT_PLUGIN_TIMEOUT)
            .run()
            .await
            .err()
            .unwrap();
        let text = error.to_string();
        assert!(text.contains(expected), "{text}");
        assert!(!text.contains(SECRET), "{text}");
    }

    // YAML, as client-go reads it, with an expiry: renewed a minute before it.
    let dir = tempfile::tempdir().unwrap();
    let at = SystemTime::now() + Duration::from_secs(3600);
    let at = k8s_openapi::jiff::Timestamp::try_from(at).unwrap();
    let exec = plugin(
        dir.path(),
        &format!(
            "printf 'kind: ExecCredential\\nstatus:\\n  token: t\\n  expirationTimestamp: \"{at}\"\\n'"
        ),
    );
    let credential = run_with(exec, DEFAULT_PLUGIN_TIMEOUT).run().await.unwrap();
    let renew_in = credential.renew_at.unwrap() - Instant::now();
    assert!(
        renew_in <= Duration::from_secs(3540) && renew_in > Duration::from_secs(3500),
        "{renew_in:?}"
    );
    assert!(credential.has_token());
}

#[test]
fn only_a_user_whose_credentials_come_from_the_plugin_runs_it() {
    let exec = Some(ExecConfig::default());
    let with_token = AuthInfo {
        exec: exec.clone(),
        token: Some("t".to_owned().into()),
        ..AuthInfo::default()
    };
    assert!(CredentialPlugin::of(&with_token, DEFAULT_PLUGIN_TIMEOUT).is_none());
    let only_exec = AuthInfo {
        exec,
        ..AuthInfo::default()
    };
    assert!(CredentialPlugin::of(&only_exec, DEFAULT_PLUGIN_TIMEOUT).is_some());
    assert!(CredentialPlugin::of(&AuthInfo::default(), DEFAULT_PLUGIN_TIMEOUT).is_none());
}

/// An executable in `dir` that exits 0, and a handle that holds it open for writing (so it is busy).
fn busy_program(dir: &Path) -> (std::path::PathBuf, std::fs::File) {
    let path = dir.join("busy");
    std::fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let writer = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    (path, writer)
}

// Real time, not paused: the other tests of this binary fork too, each holding the file open until its
// `exec`, and paused time would make every retry come at once, before such a fork has reached it.
#[tokio::test]
async fn a_plugin_file_busy_for_a_moment_is_started_once_it_is_free() {
    let dir = tempfile::tempdir().unwrap();
    let (path, writer) = busy_program(dir.path());
    let mut command = std::process::Command::new(&path);
    let started = tokio::spawn(async move { spawn(&mut command).await.map(|mut c| c.wait()) });
    // On a current-thread runtime the spawned task runs its first try here: refused, it pauses.
    tokio::task::yield_now().await;
    assert!(
        !started.is_finished(),
        "the first try waits out the busy file"
    );
    drop(writer);
    let status = started
        .await
        .unwrap()
        .expect("started once the file is free");
    assert!(status.unwrap().success());
}

#[tokio::test(start_paused = true)]
async fn a_plugin_file_busy_for_good_is_refused_after_a_few_tries() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _writer) = busy_program(dir.path());
    let began = tokio::time::Instant::now();
    let error = spawn(&mut std::process::Command::new(&path))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::ExecutableFileBusy);
    assert_eq!(began.elapsed(), BUSY_PAUSE * (BUSY_TRIES - 1));
}
