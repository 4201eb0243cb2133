use std::os::unix::fs::PermissionsExt as _;

use super::*;

#[tokio::test(flavor = "current_thread")]
async fn an_auth_providers_command_runs_off_the_async_workers() {
    // A gcp provider whose command waits until this test, on the runtime's only thread, releases it.
    let dir = tempfile::tempdir().unwrap();
    let (started, release) = (dir.path().join("started"), dir.path().join("release"));
    let script = format!(
        "#!/bin/sh\ntouch {}\nfor i in $(seq 100); do [ -e {} ] && break; sleep 0.05; done\nprintf token",
        started.display(),
        release.display()
    );
    let command = dir.path().join("gcp");
    std::fs::write(&command, script).unwrap();
    std::fs::set_permissions(&command, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
    config.auth_info = serde_json::from_value(serde_json::json!({ "auth-provider": {
        "name": "gcp",
        "config": { "cmd-path": command.to_string_lossy() },
    }}))
    .unwrap();
    let build = tokio::spawn(Access::of("cluster-a", config, Duration::from_secs(30)));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !started.exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the command never ran"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !build.is_finished(),
        "the build ended before the command was released: it held the runtime's only thread"
    );
    std::fs::write(&release, "").unwrap();
    build.await.unwrap().unwrap();
}
