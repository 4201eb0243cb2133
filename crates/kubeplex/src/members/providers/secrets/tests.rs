//! The Secret provider against a real API server: the Secrets it is given, the commands it sends.
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kubeplex_testenv::TestEnv;
use tokio::sync::{mpsc, oneshot};

use super::super::secret_finalizer::MEMBER_FINALIZER;
use super::*;
use crate::core::ContextName;
use crate::members::provider::{Command, FixedClients};
use crate::testing::real_cluster::{self, CLUSTER};

const SELECTOR: (&str, &str) = ("fleet.test/member", "true");
const WAIT: Duration = Duration::from_secs(30);

/// A command as the manager would receive it, with the namespace its configuration defaults to; a
/// leave comes with its acknowledgement.
#[derive(Debug)]
enum Seen {
    Join(String, String),
    Unhealthy(String, String),
    Leave(String, oneshot::Sender<LeaveOutcome>),
}

struct Fixture {
    env: &'static TestEnv,
    secrets: Api<Secret>,
    namespace: String,
    received: mpsc::Receiver<Command>,
    /// Asks the provider to read a member's credentials again, as the manager does on a 401.
    reload: mpsc::Sender<String>,
    provider: tokio::task::JoinHandle<()>,
}

impl Fixture {
    /// The provider watching a namespace of its own in the cluster (its context `control` to the
    /// provider), under `policy`.
    async fn start(policy: LeavePolicy, before: impl AsyncFnOnce(&Api<Secret>)) -> Self {
        let env = real_cluster::env().await;
        let namespace = env.create_namespace(&[CLUSTER], "members").await.unwrap();
        let client = env.client(CLUSTER).await.unwrap();
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
        before(&secrets).await;
        let (commands, received) = mpsc::channel(16);
        let clients: FixedClients = Arc::new(move |context: &str| {
            assert_eq!(context, "control");
            Ok(client.clone())
        });
        let (reload, reloads) = mpsc::channel(4);
        let sink = MemberSink::new(commands, clients, policy).with_reloads(reloads);
        let selector = format!("{}={}", SELECTOR.0, SELECTOR.1);
        let provider = KubeconfigSecrets::new(ContextName::new("control"), &namespace, selector);
        assert_eq!(provider.contexts(), ["control"]);
        let provider = tokio::spawn(Box::new(provider).run(sink));
        Self {
            env,
            secrets,
            namespace,
            received,
            reload,
            provider,
        }
    }

    async fn next(&mut self) -> Seen {
        loop {
            let command = tokio::time::timeout(WAIT, self.received.recv()).await;
            return match command
                .expect("a command within 30 s")
                .expect("the provider runs")
            {
                Command::Join { name, config } => Seen::Join(name, config.default_namespace),
                Command::Unhealthy { name, reason } => Seen::Unhealthy(name, reason),
                Command::Leave { name, done } => Seen::Leave(name, done),
                Command::Listed => continue, // Once, after the first list.
            };
        }
    }

    async fn joined(&mut self, member: &str, default_namespace: &str) {
        match self.next().await {
            Seen::Join(name, ns) if name == member && ns == default_namespace => {}
            other => {
                panic!("expected {member} to join (namespace {default_namespace}), got {other:?}")
            }
        }
    }

    async fn unhealthy(&mut self, member: &str, expected: &str) {
        match self.next().await {
            Seen::Unhealthy(name, reason) if name == member && reason == expected => {}
            other => panic!("expected {member} unhealthy: {expected}, got {other:?}"),
        }
    }

    /// Waits for `member` to leave; returns the acknowledgement, not yet sent.
    async fn left(&mut self, member: &str) -> oneshot::Sender<LeaveOutcome> {
        match self.next().await {
            Seen::Leave(name, done) if name == member => done,
            other => panic!("expected {member} to leave, got {other:?}"),
        }
    }

    /// A kubeconfig for the test cluster whose context defaults to `namespace`.
    fn kubeconfig(&self, namespace: &str) -> String {
        let mut kubeconfig = self.env.kubeconfig().clone();
        for context in &mut kubeconfig.contexts {
            if let Some(context) = &mut context.context {
                context.namespace = Some(namespace.to_owned());
            }
        }
        serde_json::to_string(&kubeconfig).unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.provider.abort();
    }
}

/// A Secret: `selected` carries the selector's label, `member` the member-name label; `data` as given.
fn secret(name: &str, selected: bool, member: Option<&str>, data: &[(&str, &[u8])]) -> Secret {
    let mut labels = serde_json::Map::new();
    if selected {
        labels.insert(SELECTOR.0.into(), SELECTOR.1.into());
    }
    if let Some(member) = member {
        labels.insert(MEMBER_NAME_LABEL.into(), member.into());
    }
    let data: serde_json::Map<String, serde_json::Value> = data
        .iter()
        .map(|(key, value)| {
            let value = k8s_openapi::ByteString(value.to_vec());
            (key.to_string(), serde_json::to_value(value).unwrap())
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": name, "labels": labels }, "data": data,
    }))
    .unwrap()
}

async fn create(secrets: &Api<Secret>, secret: &Secret) {
    secrets
        .create(&PostParams::default(), secret)
        .await
        .unwrap();
}

#[tokio::test]
async fn member_secrets_join_rotate_report_problems_and_leave() {
    let mut fx = Fixture::start(LeavePolicy::Orphan, async |_| {}).await;
    let ns = fx.namespace.clone();
    let text = fx.kubeconfig("first");
    let a = secret(
        "s-a",
        true,
        Some("cluster-x"),
        &[("kubeconfig", text.as_bytes())],
    );
    create(&fx.secrets, &a).await;
    fx.joined("cluster-x", "first").await;

    // New bytes: joins again. A change that leaves them alone (a label) and an unselected Secret: nothing,
    // as the next command shows.
    let rotated = fx.kubeconfig("second");
    let data = serde_json::json!({ "data": { "kubeconfig": k8s_openapi::ByteString(rotated.into_bytes()) } });
    let params = PatchParams::default();
    fx.secrets
        .patch("s-a", &params, &Patch::Merge(&data))
        .await
        .unwrap();
    fx.joined("cluster-x", "second").await;
    let label = serde_json::json!({ "metadata": { "labels": { "unrelated": "yes" } } });
    fx.secrets
        .patch("s-a", &params, &Patch::Merge(&label))
        .await
        .unwrap();
    let unselected = secret(
        "s-unselected",
        false,
        None,
        &[("kubeconfig", text.as_bytes())],
    );
    create(&fx.secrets, &unselected).await;

    create(
        &fx.secrets,
        &secret("s-nokey", true, None, &[("value", b"x")]),
    )
    .await;
    let expected = format!("Secret {ns}/s-nokey: has no key kubeconfig; its keys are: value");
    fx.unhealthy("s-nokey", &expected).await;
    create(
        &fx.secrets,
        &secret("s-binary", true, None, &[("kubeconfig", &[0xff, 0xfe])]),
    )
    .await;
    let expected = format!("Secret {ns}/s-binary: key kubeconfig is not UTF-8 text");
    fx.unhealthy("s-binary", &expected).await;
    let broken = secret(
        "s-broken",
        true,
        None,
        &[("kubeconfig", b"users: [{name: a, user: {token: \"s3cr3t\"")],
    );
    create(&fx.secrets, &broken).await;
    match fx.next().await {
        Seen::Unhealthy(name, reason) if name == "s-broken" => {
            let prefix = format!("Secret {ns}/s-broken: not a valid kubeconfig: line ");
            assert!(
                reason.starts_with(&prefix) && !reason.contains("s3cr3t"),
                "{reason}"
            );
        }
        other => panic!("expected s-broken unhealthy, got {other:?}"),
    }

    // A second Secret for the member: the member is unhealthy, naming both; the first keeps it.
    let b = secret(
        "s-b",
        true,
        Some("cluster-x"),
        &[("kubeconfig", text.as_bytes())],
    );
    create(&fx.secrets, &b).await;
    let both =
        format!("Secrets {ns}/s-a and {ns}/s-b both name member cluster-x; {ns}/s-b is ignored");
    fx.unhealthy("cluster-x", &both).await;

    // The first goes: the member leaves, and the second takes it over.
    fx.secrets
        .delete("s-a", &DeleteParams::default())
        .await
        .unwrap();
    fx.left("cluster-x").await.send(LeaveOutcome::Done).unwrap();
    fx.joined("cluster-x", "first").await;
    fx.secrets
        .delete("s-b", &DeleteParams::default())
        .await
        .unwrap();
    fx.left("cluster-x").await.send(LeaveOutcome::Done).unwrap();
}

#[tokio::test]
async fn member_secrets_keep_a_finalizer_until_the_member_has_left() {
    // A Secret already being deleted with the finalizer, as a restarted process finds it.
    let found = async |secrets: &Api<Secret>| {
        let mut old = secret("s-old", true, None, &[]);
        old.metadata.finalizers = Some(vec![MEMBER_FINALIZER.to_owned()]);
        let text = {
            let env = real_cluster::env().await;
            serde_json::to_string(env.kubeconfig()).unwrap()
        };
        let data = [(
            "kubeconfig".to_owned(),
            k8s_openapi::ByteString(text.into_bytes()),
        )];
        old.data = Some(data.into_iter().collect());
        create(secrets, &old).await;
        secrets
            .delete("s-old", &DeleteParams::default())
            .await
            .unwrap();
    };
    let mut fx = Fixture::start(LeavePolicy::Delete, found).await;
    fx.joined("s-old", "default").await;
    fx.left("s-old").await.send(LeaveOutcome::Done).unwrap();
    wait_gone(&fx.secrets, "s-old").await;

    let text = fx.kubeconfig("default");
    create(
        &fx.secrets,
        &secret("s-d", true, None, &[("kubeconfig", text.as_bytes())]),
    )
    .await;
    fx.joined("s-d", "default").await;
    // The finalizer was added before the join was reported.
    let current = fx.secrets.get("s-d").await.unwrap();
    assert_eq!(current.finalizers(), [MEMBER_FINALIZER]);

    fx.secrets
        .delete("s-d", &DeleteParams::default())
        .await
        .unwrap();
    let done = fx.left("s-d").await;
    // Until the leave is carried out, the credentials stay.
    let current = fx.secrets.get("s-d").await.unwrap();
    assert!(current.metadata.deletion_timestamp.is_some());
    assert_eq!(current.finalizers(), [MEMBER_FINALIZER]);
    done.send(LeaveOutcome::Done).unwrap();
    wait_gone(&fx.secrets, "s-d").await;
}

#[tokio::test]
async fn member_secrets_read_a_members_secret_again_when_the_manager_asks() {
    let mut fx = Fixture::start(LeavePolicy::Orphan, async |_| {}).await;
    let text = fx.kubeconfig("first");
    let kubeconfig = [("kubeconfig", text.as_bytes())];
    create(
        &fx.secrets,
        &secret("s-r", true, Some("cluster-r"), &kubeconfig),
    )
    .await;
    fx.joined("cluster-r", "first").await;

    // Unchanged, yet it joins again: the manager reconnects with what the Secret holds now.
    fx.reload.send("cluster-r".into()).await.unwrap();
    fx.joined("cluster-r", "first").await;
    // A name no Secret gives: nothing (the next command is the next Secret's join).
    fx.reload.send("cluster-unknown".into()).await.unwrap();
    create(&fx.secrets, &secret("s-next", true, None, &kubeconfig)).await;
    fx.joined("s-next", "first").await;
}

/// Waits until the Secret is gone (its finalizer removed); fails after [`WAIT`].
async fn wait_gone(secrets: &Api<Secret>, name: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while secrets.get_opt(name).await.unwrap().is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Secret {name} is still there"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
