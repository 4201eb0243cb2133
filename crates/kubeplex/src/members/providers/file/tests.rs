//! The kubeconfig file provider, polled by hand against files in a temporary directory.
use std::sync::Arc;

use tokio::sync::mpsc;

use super::*;
use crate::core::Error;
use crate::members::KubeconfigAllowlist;
use crate::members::provider::{Command, FixedClients, LeavePolicy};

/// A command as the manager would receive it; a leave is acknowledged on receipt.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// The member and the server its configuration points at.
    Join(String, String),
    Unhealthy(String, String),
    Leave(String),
    /// Every member of the first read is reported.
    Listed,
}

fn seen(command: Command) -> Seen {
    match command {
        Command::Join { name, config } => Seen::Join(name, config.cluster_url.to_string()),
        Command::Unhealthy { name, reason } => Seen::Unhealthy(name, reason),
        Command::Leave { name, done } => {
            let _ = done.send(crate::members::LeaveOutcome::Done);
            Seen::Leave(name)
        }
        Command::Listed => Seen::Listed,
    }
}

fn sink() -> (MemberSink, mpsc::Receiver<Command>) {
    let (commands, received) = mpsc::channel(64);
    let clients: FixedClients = Arc::new(|context: &str| {
        Err(Error::UndeclaredContext {
            context: context.to_owned(),
        })
    });
    (
        MemberSink::new(commands, clients, LeavePolicy::Orphan),
        received,
    )
}

/// One poll, and everything it reported.
async fn poll(
    poller: &mut Poller,
    sink: &MemberSink,
    received: &mut mpsc::Receiver<Command>,
) -> Vec<Seen> {
    reported(poller.poll(sink), received).await
}

/// Everything `work` (a poll or a reload) reported.
async fn reported(
    work: impl std::future::Future<Output = ()>,
    received: &mut mpsc::Receiver<Command>,
) -> Vec<Seen> {
    let mut all = Vec::new();
    {
        tokio::pin!(work);
        loop {
            tokio::select! {
                Some(command) = received.recv() => all.push(seen(command)),
                () = &mut work => break,
            }
        }
    }
    while let Ok(command) = received.try_recv() {
        all.push(seen(command));
    }
    all
}

/// A kubeconfig with a context, cluster and user per `(name, port)`.
fn kubeconfig(contexts: &[(&str, u16)]) -> String {
    let mut text = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for (name, port) in contexts {
        text += &format!("- name: {name}\n  cluster:\n    server: https://127.0.0.1:{port}\n");
    }
    text += "users:\n";
    for (name, _) in contexts {
        text += &format!("- name: {name}\n  user:\n    token: token-{name}\n");
    }
    text += "contexts:\n";
    for (name, _) in contexts {
        text += &format!("- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n");
    }
    text
}

fn join(name: &str, port: u16) -> Seen {
    Seen::Join(name.into(), format!("https://127.0.0.1:{port}/"))
}

#[tokio::test]
async fn member_file_contexts_join_rotate_and_leave() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet");
    std::fs::write(&path, kubeconfig(&[("a", 1001), ("b", 1002)])).unwrap();
    let (sink, mut received) = sink();
    let mut poller = Poller::new(path.clone());
    let mut poll = async || poll(&mut poller, &sink, &mut received).await;

    assert_eq!(poll().await, [join("a", 1001), join("b", 1002)]);
    assert_eq!(poll().await, []);
    // Rotated: b points elsewhere (new credentials alike): it joins again; a is unchanged.
    std::fs::write(&path, kubeconfig(&[("a", 1001), ("b", 2002)])).unwrap();
    assert_eq!(poll().await, [join("b", 2002)]);
    // a removed: it leaves once the file reads the same twice.
    std::fs::write(&path, kubeconfig(&[("b", 2002)])).unwrap();
    assert_eq!(poll().await, []);
    assert_eq!(poll().await, [Seen::Leave("a".into())]);
    assert_eq!(poll().await, []);
}

#[tokio::test]
async fn member_file_torn_write_changes_no_member() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet");
    let full = kubeconfig(&[("a", 1001), ("b", 1002)]);
    std::fs::write(&path, &full).unwrap();
    let (sink, mut received) = sink();
    let mut poller = Poller::new(path.clone());
    let mut poll = async || poll(&mut poller, &sink, &mut received).await;
    assert_eq!(poll().await.len(), 2);

    // Cut mid-way: not YAML. Both members are unhealthy with the file and the reason, once.
    std::fs::write(&path, "clusters: [{name: a, cluster: {server: ").unwrap();
    let broken = poll().await;
    assert_eq!(broken.len(), 2, "{broken:?}");
    for (seen, name) in broken.iter().zip(["a", "b"]) {
        let Seen::Unhealthy(member, reason) = seen else {
            panic!("{seen:?}")
        };
        assert_eq!(member, name);
        let prefix = format!(
            "kubeconfig {}: not a valid kubeconfig: line ",
            path.display()
        );
        assert!(reason.starts_with(&prefix), "{reason}");
    }
    assert_eq!(poll().await, []);

    // Cut after its first context (valid YAML): a recovers, b is kept without a leave.
    let first = kubeconfig(&[("a", 1001)]);
    std::fs::write(&path, &first).unwrap();
    assert_eq!(poll().await, [join("a", 1001)]);
    // Truncated to nothing, then written whole: nobody leaves, b recovers.
    std::fs::write(&path, "").unwrap();
    assert_eq!(poll().await, []);
    std::fs::write(&path, &full).unwrap();
    assert_eq!(poll().await, [join("b", 1002)]);
    assert_eq!(poll().await, []);

    // The file itself gone: nothing changes (a single file is never "removed"), until it is back.
    std::fs::remove_file(&path).unwrap();
    let missing = poll().await;
    assert_eq!(missing.len(), 2, "{missing:?}");
    assert!(
        matches!(&missing[0], Seen::Unhealthy(m, r) if m == "a" && r.contains("cannot be read")),
        "{missing:?}"
    );
    assert_eq!(poll().await, []);
    std::fs::write(&path, &full).unwrap();
    assert_eq!(poll().await, [join("a", 1001), join("b", 1002)]);
}

#[tokio::test]
async fn member_file_directory_follows_kubelets_data_swap_and_skips_dot_entries() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // kubelet's layout: ..<timestamp>/<key>, ..data -> ..<timestamp>, <key> -> ..data/<key>.
    std::fs::create_dir(root.join("..2026_01_01")).unwrap();
    std::fs::write(root.join("..2026_01_01/fleet"), kubeconfig(&[("a", 1001)])).unwrap();
    std::os::unix::fs::symlink("..2026_01_01", root.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/fleet", root.join("fleet")).unwrap();
    std::fs::write(root.join(".hidden"), "not: [a kubeconfig").unwrap();
    std::fs::create_dir(root.join("subdirectory")).unwrap();
    let (sink, mut received) = sink();
    let mut poller = Poller::new(root.to_owned());
    let mut poll = async || poll(&mut poller, &sink, &mut received).await;
    assert_eq!(poll().await, [join("a", 1001)]);

    // The update: a new directory, a new ..data link renamed over the old one, the old directory removed.
    std::fs::create_dir(root.join("..2026_01_02")).unwrap();
    let rotated = kubeconfig(&[("a", 2001), ("b", 2002)]);
    std::fs::write(root.join("..2026_01_02/fleet"), rotated).unwrap();
    std::os::unix::fs::symlink("..2026_01_02", root.join("..data_tmp")).unwrap();
    std::fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
    std::fs::remove_dir_all(root.join("..2026_01_01")).unwrap();
    assert_eq!(poll().await, [join("a", 2001), join("b", 2002)]);

    // A second file; then it is removed: its member leaves once it is gone at two polls.
    std::fs::write(root.join("more"), kubeconfig(&[("c", 3003)])).unwrap();
    assert_eq!(poll().await, [join("c", 3003)]);
    std::fs::remove_file(root.join("more")).unwrap();
    assert_eq!(poll().await, []);
    assert_eq!(poll().await, [Seen::Leave("c".into())]);
    assert_eq!(poll().await, []);
}

#[tokio::test]
async fn member_file_context_in_two_files_is_unhealthy_until_one_drops_it() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("1-first"), dir.path().join("2-second"));
    std::fs::write(&first, kubeconfig(&[("a", 1001)])).unwrap();
    let (sink, mut received) = sink();
    let mut poller = Poller::new(dir.path().to_owned());
    let mut poll = async || poll(&mut poller, &sink, &mut received).await;
    assert_eq!(poll().await, [join("a", 1001)]);

    std::fs::write(&second, kubeconfig(&[("a", 2001), ("b", 2002)])).unwrap();
    let both = format!(
        "context a is in both kubeconfig {} and {}; the one in {} is ignored",
        first.display(),
        second.display(),
        second.display()
    );
    assert_eq!(
        poll().await,
        [Seen::Unhealthy("a".into(), both), join("b", 2002)]
    );
    assert_eq!(poll().await, []);
    // Dropped from the second file: a is healthy again (joined again with the first file's).
    std::fs::write(&second, kubeconfig(&[("b", 2002)])).unwrap();
    assert_eq!(poll().await, [join("a", 1001)]);
    assert_eq!(poll().await, []);
}

#[tokio::test]
async fn member_file_context_that_cannot_configure_a_client_is_unhealthy_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet");
    let text = "contexts:\n- name: a\n  context:\n    cluster: nowhere\n";
    std::fs::write(&path, text).unwrap();
    let (sink, mut received) = sink();
    let mut poller = Poller::new(path.clone());
    let mut poll = async || poll(&mut poller, &sink, &mut received).await;
    let reported = poll().await;
    let prefix = format!("kubeconfig {}: context a: ", path.display());
    assert!(
        matches!(&reported[..], [Seen::Unhealthy(m, r)] if m == "a" && r.starts_with(&prefix)),
        "{reported:?}"
    );
    assert_eq!(poll().await, []);
    std::fs::write(&path, kubeconfig(&[("a", 1001)])).unwrap();
    assert_eq!(poll().await, [join("a", 1001)]);
}

#[tokio::test]
async fn member_file_provider_polls_at_its_interval() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet");
    std::fs::write(&path, kubeconfig(&[("a", 1001)])).unwrap();
    let (sink, mut received) = sink();
    let provider = KubeconfigFile::new(&path).interval(Duration::from_millis(20));
    assert!(provider.contexts().is_empty());
    let running = tokio::spawn(Box::new(provider).run(sink));
    let next = async |received: &mut mpsc::Receiver<Command>| {
        let command = tokio::time::timeout(Duration::from_secs(10), received.recv());
        seen(command.await.expect("a command within 10 s").unwrap())
    };
    assert_eq!(next(&mut received).await, join("a", 1001));
    assert_eq!(
        next(&mut received).await,
        Seen::Listed,
        "after the first read"
    );
    std::fs::write(&path, kubeconfig(&[("a", 2001)])).unwrap();
    assert_eq!(next(&mut received).await, join("a", 2001));
    running.abort();
}

#[tokio::test]
async fn member_file_reload_joins_the_member_again_from_the_file_as_it_is_now() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet");
    std::fs::write(&path, kubeconfig(&[("a", 1001), ("b", 1002)])).unwrap();
    let (sink, mut received) = sink();
    let mut poller = Poller::new(path.clone());
    let rx = &mut received;
    assert_eq!(reported(poller.poll(&sink), rx).await.len(), 2);

    // Unchanged: the member asked for joins again, and no other.
    assert_eq!(
        reported(poller.reload(&sink, "a"), rx).await,
        [join("a", 1001)]
    );
    assert_eq!(reported(poller.poll(&sink), rx).await, []);
    // Changed since the last poll: read at once; the changed member joins with its new credentials, the
    // one asked for with what it has.
    std::fs::write(&path, kubeconfig(&[("a", 2001), ("b", 1002)])).unwrap();
    assert_eq!(
        reported(poller.reload(&sink, "b"), rx).await,
        [join("a", 2001), join("b", 1002)]
    );
    // A member that is not in the file: nothing to read again.
    assert_eq!(reported(poller.reload(&sink, "nobody"), rx).await, []);
    // The file broken: the member asked for is unhealthy again, with the reason.
    std::fs::write(&path, "clusters: [{name: a, cluster: {server: ").unwrap();
    assert_eq!(reported(poller.poll(&sink), rx).await.len(), 2);
    let again = reported(poller.reload(&sink, "a"), rx).await;
    assert!(
        matches!(&again[..], [Seen::Unhealthy(m, r)] if m == "a" && r.contains("not a valid kubeconfig")),
        "{again:?}"
    );
}

#[tokio::test]
async fn member_file_provider_reads_at_once_when_the_manager_asks_to_reload() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet");
    std::fs::write(&path, kubeconfig(&[("a", 1001)])).unwrap();
    let (sink, mut received) = sink();
    let (reload, reloads) = mpsc::channel(4);
    let sink = sink.with_reloads(reloads);
    // An interval no test waits for: only a reload reads the file again.
    let provider = KubeconfigFile::new(&path).interval(Duration::from_secs(3600));
    let running = tokio::spawn(Box::new(provider).run(sink));
    let next = async |received: &mut mpsc::Receiver<Command>| {
        let command = tokio::time::timeout(Duration::from_secs(10), received.recv());
        seen(command.await.expect("a command within 10 s").unwrap())
    };
    assert_eq!(next(&mut received).await, join("a", 1001));
    assert_eq!(next(&mut received).await, Seen::Listed);
    std::fs::write(&path, kubeconfig(&[("a", 2001)])).unwrap();
    reload.send("a".into()).await.unwrap();
    assert_eq!(next(&mut received).await, join("a", 2001));
    // Asked again with nothing new: it joins again all the same (the manager reconnects once).
    reload.send("a".into()).await.unwrap();
    assert_eq!(next(&mut received).await, join("a", 2001));
    running.abort();
}

#[tokio::test]
async fn member_file_context_that_reads_a_file_or_runs_a_command_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet");
    // `tokenFile` relative to the kubeconfig's directory, as kubelet's mounts have it.
    let text = kubeconfig(&[("a", 1001), ("b", 1002)])
        .replace("token: token-a", "tokenFile: token")
        .replace("token: token-b", "exec:\n      command: /bin/plugin");
    std::fs::write(&path, &text).unwrap();
    std::fs::write(dir.path().join("token"), "s3cr3t-in-a-file").unwrap();
    let refusal = |member: &str, field: &str, why: &str| {
        Seen::Unhealthy(
            member.into(),
            format!(
                "kubeconfig {}: context {member}: its kubeconfig sets the user's {field} ({why}), \
                 which member kubeconfigs may not; see docs/fleets.md",
                path.display()
            ),
        )
    };
    let (strict, mut received) = sink();
    let mut poller = Poller::new(path.clone());
    assert_eq!(
        poll(&mut poller, &strict, &mut received).await,
        [
            refusal("a", "tokenFile", "a local file"),
            refusal("b", "exec", "a command")
        ]
    );
    // The manager's opt-in lets the listed command through; the file still is not.
    let allowlist = KubeconfigAllowlist {
        exec_commands: ["/bin/plugin".to_owned()].into(),
        ..KubeconfigAllowlist::default()
    };
    let (allowing, mut received) = sink();
    let allowing = allowing.with_allowlist(allowlist);
    let mut poller = Poller::new(path.clone());
    assert_eq!(
        poll(&mut poller, &allowing, &mut received).await,
        [refusal("a", "tokenFile", "a local file"), join("b", 1002)]
    );
}
