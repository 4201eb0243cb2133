//! `build`: what a first build says (with helm and the Cluster Inventory API too), waiting for another
//! build, and `KUBEBUILDER_ASSETS`.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;

use kubeplex_testenv::{Binaries, ClusterInventory, HELM_VAR, Helm, Watched, output_within};

use super::{BUILD, CLI, WAIT};

/// A directory with a stand-in `go`: `list` names three packages to compile, `build -v` "compiles" them
/// and writes its `-o` file, `mod download -json` names the directory itself as the module's, with a
/// stand-in ClusterProfile CRD.
fn fake_go() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    std::fs::write(
        &go,
        r#"#!/bin/sh
case "$1" in
list) echo "go: downloading example.com/mod v1.0.0" >&2; printf 'example.com/a\nexample.com/b\nexample.com/c\n' ;;
build)
  while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
  for p in a b c; do echo "example.com/$p" >&2; done
  printf '#!/bin/sh\n' > "$out" ;;
mod) printf '{"Dir": "%s"}\n' "$(dirname "$0")" ;;
*) exit 1 ;;
esac
"#,
    )
    .unwrap();
    std::fs::set_permissions(&go, std::fs::Permissions::from_mode(0o755)).unwrap();
    let crds = dir.path().join("config/crd/bases");
    std::fs::create_dir_all(&crds).unwrap();
    std::fs::write(crds.join(UPSTREAM_CRD), "kind: CustomResourceDefinition\n").unwrap();
    dir
}

const UPSTREAM_CRD: &str = "multicluster.x-k8s.io_clusterprofiles.yaml";

fn build_with(go: &Path, cache: &Path) -> Command {
    let path = format!("{}:{}", go.display(), std::env::var("PATH").unwrap());
    let mut command = Command::new(CLI);
    command
        .arg("build")
        .env("PATH", path)
        .env("KUBEPLEX_TESTENV_CACHE", cache)
        .env_remove("KUBEBUILDER_ASSETS");
    command
}

#[test]
fn a_first_build_says_what_it_builds_how_long_it_takes_and_how_far_it_is() {
    let go = fake_go();
    let cache = tempfile::tempdir().unwrap();
    let output = output_within(&mut build_with(go.path(), cache.path()), WAIT);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let (kubernetes, etcd) = (Binaries::kubernetes_version(), Binaries::etcd_version());
    for expected in [
        format!(
            "first run: building kube-apiserver {kubernetes}, etcd {etcd} and \
             kube-controller-manager {kubernetes} from Go modules"
        ),
        "usually takes 11-20 minutes".into(),
        "[1/3] kube-apiserver: resolving its packages".into(),
        "[1/3] kube-apiserver: compiling 3 packages".into(),
        "[1/3] kube-apiserver: 3 packages compiled, linking".into(),
        "[1/3] kube-apiserver: built in".into(),
        "[2/3] etcd: built in".into(),
        "[3/3] kube-controller-manager: built in".into(),
    ] {
        assert!(
            stderr.contains(&expected),
            "expected {expected:?} in\n{stderr}"
        );
    }
    assert!(
        !stderr.contains('\x1b'),
        "terminal codes in a log:\n{stderr}"
    );
    let dir = String::from_utf8(output.stdout).unwrap();
    assert!(
        dir.trim().starts_with(&cache.path().display().to_string()),
        "{dir}"
    );

    // The second run finds the programs: nothing is built, nothing is said.
    let again = output_within(&mut build_with(go.path(), cache.path()), WAIT);
    assert!(again.status.success());
    assert_eq!(String::from_utf8_lossy(&again.stderr), "");
}

#[test]
fn build_with_helm_builds_it_into_the_cache_and_prints_its_path() {
    let go = fake_go();
    let cache = tempfile::tempdir().unwrap();
    let mut command = build_with(go.path(), cache.path());
    command.arg("--helm").env_remove(HELM_VAR);
    let output = output_within(&mut command, WAIT);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "first run: building helm {} from Go modules",
            Helm::version()
        )),
        "{stderr}"
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    let helm = cache
        .path()
        .join(format!("helm-{}", Helm::version()))
        .join("helm");
    assert_eq!(lines.len(), 2, "{stdout}");
    assert_eq!(lines[1], helm.display().to_string());
    assert!(helm.is_file());

    // The second run finds it: nothing is built, nothing is said.
    let again = output_within(&mut command, WAIT);
    assert!(again.status.success());
    assert_eq!(String::from_utf8_lossy(&again.stderr), "");
}

#[test]
fn build_with_inventory_builds_the_plugins_and_copies_the_crd_into_the_cache() {
    let go = fake_go();
    let cache = tempfile::tempdir().unwrap();
    let mut command = build_with(go.path(), cache.path());
    command.arg("--inventory");
    let output = output_within(&mut command, WAIT);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    for expected in [
        format!(
            "first run: building the Cluster Inventory API {} (secretreader, kubeconfig-secretreader \
             and the ClusterProfile CRD) from Go modules",
            ClusterInventory::version()
        ),
        "[1/2] secretreader: built in".into(),
        "[2/2] kubeconfig-secretreader: built in".into(),
        "built the Cluster Inventory API in".into(),
    ] {
        assert!(
            stderr.contains(&expected),
            "expected {expected:?} in\n{stderr}"
        );
    }
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    let dir = cache
        .path()
        .join(format!("cluster-inventory-{}", ClusterInventory::version()));
    assert_eq!(lines.len(), 2, "{stdout}");
    assert_eq!(lines[1], dir.display().to_string());
    for plugin in ["secretreader", "kubeconfig-secretreader"] {
        assert!(dir.join(plugin).is_file(), "{plugin}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("clusterprofiles-crd.yaml")).unwrap(),
        "kind: CustomResourceDefinition\n"
    );

    // The second run finds them: nothing is built, nothing is said.
    let again = output_within(&mut command, WAIT);
    assert!(again.status.success());
    assert_eq!(String::from_utf8_lossy(&again.stderr), "");
}

#[test]
fn a_build_waiting_for_another_says_so() {
    let go = fake_go();
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().join(format!(
        "kubernetes-{}-etcd-{}",
        Binaries::kubernetes_version(),
        Binaries::etcd_version()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    // Another process is building: it holds the lock.
    let lock = std::fs::File::create(dir.join(".lock")).unwrap();
    // SAFETY: flock on a descriptor we own.
    assert_eq!(
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) },
        0
    );
    let mut waiting = Watched::spawn(
        "kubeplex-testenv build",
        &mut build_with(go.path(), cache.path()),
    )
    .unwrap();
    let line = waiting.wait_for_line(|line| !line.trim().is_empty(), WAIT);
    assert!(
        line.contains(
            "waiting for another process that is building kube-apiserver, etcd and \
             kube-controller-manager"
        ) && line.contains("first run only"),
        "{line}"
    );
    // The other process finishes: the waiting one uses its programs.
    for program in ["kube-apiserver", "etcd", "kube-controller-manager"] {
        std::fs::write(dir.join(program), "").unwrap();
    }
    drop(lock);
    let (status, lines) = waiting.wait(WAIT);
    assert!(status.success(), "{lines:#?}");
    let rest = &lines[1..];
    assert!(rest.iter().all(|l| !l.contains("building")), "{rest:#?}");
    assert_eq!(
        rest.iter().map(|l| l.trim()).collect::<Vec<_>>(),
        [dir.display().to_string()],
        "stdout is the directory, and nothing else is said"
    );
}

#[test]
fn build_prints_the_directory_holding_the_programs() {
    let output = output_within(Command::new(CLI).arg("build"), BUILD);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let dir = std::path::PathBuf::from(String::from_utf8(output.stdout).unwrap().trim());
    for program in ["kube-apiserver", "etcd", "kube-controller-manager"] {
        assert!(
            dir.join(program).is_file(),
            "{program} in {}",
            dir.display()
        );
    }
}

/// A directory laid out as setup-envtest's: kube-apiserver and etcd (the cache's, built if need be).
fn assets_of_setup_envtest() -> tempfile::TempDir {
    let built = output_within(
        Command::new(CLI)
            .arg("build")
            .env_remove("KUBEBUILDER_ASSETS"),
        BUILD,
    );
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let cache = String::from_utf8(built.stdout).unwrap().trim().to_owned();
    let assets = tempfile::tempdir().unwrap();
    for program in ["kube-apiserver", "etcd"] {
        std::os::unix::fs::symlink(Path::new(&cache).join(program), assets.path().join(program))
            .unwrap();
    }
    assets
}

#[test]
fn kubebuilder_assets_is_used_as_is_when_it_holds_both_programs() {
    // setup-envtest's layout: a directory with kube-apiserver and etcd; nothing is built.
    let assets = assets_of_setup_envtest();
    let used = output_within(
        Command::new(CLI)
            .arg("build")
            .env("KUBEBUILDER_ASSETS", assets.path()),
        WAIT,
    );
    assert!(
        used.status.success(),
        "{}",
        String::from_utf8_lossy(&used.stderr)
    );
    assert_eq!(
        String::from_utf8(used.stdout).unwrap().trim(),
        assets.path().display().to_string()
    );
    // setup-envtest's directories hold no kube-controller-manager: fine, until a cluster asks for one.
    let stderr = String::from_utf8_lossy(&used.stderr);
    assert!(
        stderr.contains("holds no kube-controller-manager"),
        "{stderr}"
    );
    let dir = tempfile::tempdir().unwrap();
    let refused = output_within(
        Command::new(CLI)
            .args(["up", "--clusters", "a", "--controller-manager", "a"])
            .arg("--kubeconfig")
            .arg(dir.path().join("kubeconfig"))
            .env("KUBEBUILDER_ASSETS", assets.path()),
        WAIT,
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("holds no kube-controller-manager, which a cluster asks for"),
        "{stderr}"
    );

    let empty = tempfile::tempdir().unwrap();
    let refused = output_within(
        Command::new(CLI)
            .arg("build")
            .env("KUBEBUILDER_ASSETS", empty.path()),
        WAIT,
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("KUBEBUILDER_ASSETS")
            && stderr.contains("does not hold both kube-apiserver and etcd"),
        "{stderr}"
    );
}

#[test]
fn a_controller_manager_that_exits_fails_the_start_with_its_log() {
    let assets = assets_of_setup_envtest();
    let fake = assets.path().join("kube-controller-manager");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho \"fake controller manager: cannot start ($1)\" >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let failed = output_within(
        Command::new(CLI)
            .args(["up", "--clusters", "a,b", "--controller-manager", "b"])
            .arg("--kubeconfig")
            .arg(dir.path().join("kubeconfig"))
            .env("KUBEBUILDER_ASSETS", assets.path()),
        WAIT,
    );
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(1), "{stderr}");
    for expected in [
        "cluster b: kube-controller-manager exited (exit status: 3)",
        "last lines of kube-controller-manager's log",
        "fake controller manager: cannot start (--kubeconfig=",
    ] {
        assert!(
            stderr.contains(expected),
            "expected {expected:?} in\n{stderr}"
        );
    }
}
