//! The member sections' operator and its parents: P `FleetApp` parents in the control cluster, each wanting a
//! Deployment in each of the section's namespaces of every member, and the fleet section's kubeplex operator
//! (`__fleet`) with its children declared in every member and its members from kubeconfig Secrets.

use futures::{StreamExt, stream};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};

use super::cluster::{
    CONTROL, IMAGE, LIMIT, MEMBER, MemberCluster, SECRETS_NAMESPACE, SELECTOR_LABEL,
};
use crate::child::Side;
use crate::fleet::{
    FleetApp, FleetAppSpec, FleetSpec, Host, MembersSpec, Observer, Operator, PARENT_NAMESPACE,
    Synced,
};

const IN_FLIGHT: usize = 32;

/// The operator with its parents, and the parent's watches of the parents and of the member.
pub(super) struct Fleet {
    pub operator: Operator,
    pub observer: Observer,
    /// Children the member holds once joined: parents × namespaces.
    pub children: usize,
    control: Client,
}

impl Fleet {
    /// Creates `parents` parents each wanting a Deployment in each of `namespaces` of every member, starts
    /// the operator (`n` numbers it for a profiler) and waits until it synced and reconciled every parent
    /// (finalizer and `Ready`, with no member yet).
    pub async fn start(
        host: &Host<'_>,
        cluster: &MemberCluster,
        parents: usize,
        namespaces: &[String],
        n: usize,
    ) -> Result<Self, String> {
        let observer = Observer::start(
            cluster.control.clone(),
            std::slice::from_ref(&cluster.member),
            IMAGE,
            Vec::new(),
            0,
        )
        .await?;
        if observer.with(|w| w.parents() + w.children()) > 0 {
            return Err(format!(
                "members: parents in {CONTROL}/{PARENT_NAMESPACE} or children in {MEMBER} left from an \
                 earlier section"
            ));
        }
        create_parents(&cluster.control, parents, namespaces).await?;
        let spec = FleetSpec {
            side: Side::Kubeplex,
            kubeconfig: host.kubeconfig.clone(),
            control: CONTROL.to_owned(),
            children: Vec::new(),
            namespaces: namespaces.to_vec(),
            concurrency: None,
            election: None,
            members: Some(MembersSpec {
                namespace: SECRETS_NAMESPACE.to_owned(),
                selector: format!("{SELECTOR_LABEL}=true"),
                own_namespace: false,
            }),
            admission: false,
        };
        let mut operator = Operator::spawn(host, &spec, n)?;
        let _: Synced = operator.next("its caches synced").await?;
        observer
            .until("every parent reconciled", LIMIT, |w| w.ready == parents)
            .await?;
        Ok(Self {
            operator,
            observer,
            children: parents * namespaces.len(),
            control: cluster.control.clone(),
        })
    }

    /// Deletes the parents while the operator runs (it removes their finalizers), then ends it.
    pub async fn stop(self) -> Result<(), String> {
        let api: Api<FleetApp> = Api::namespaced(self.control.clone(), PARENT_NAMESPACE);
        api.delete_collection(&DeleteParams::default(), &ListParams::default())
            .await
            .map_err(|e| format!("deleting the parents: {e}"))?;
        let gone = self
            .observer
            .until("every parent gone", LIMIT, |w| w.parents() == 0)
            .await;
        if gone.is_err() {
            // Whatever happened, leave no parent for a later section: drop the finalizers.
            let unfinalize = serde_json::json!({ "metadata": { "finalizers": null } });
            for app in api.list(&ListParams::default()).await.into_iter().flatten() {
                let _ = api
                    .patch(
                        &app.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(&unfinalize),
                    )
                    .await;
            }
        }
        self.operator.exit().await?;
        gone.map(drop)
    }
}

async fn create_parents(
    control: &Client,
    parents: usize,
    namespaces: &[String],
) -> Result<(), String> {
    let api: Api<FleetApp> = Api::namespaced(control.clone(), PARENT_NAMESPACE);
    let creates = (0..parents).map(|i| {
        let app = FleetApp::new(
            &format!("member-app-{i:04}"),
            FleetAppSpec {
                image: IMAGE.to_owned(),
                replicas: 1,
                namespaces: namespaces.to_vec(),
            },
        );
        let api = api.clone();
        async move {
            api.create(&PostParams::default(), &app)
                .await
                .map(drop)
                .map_err(|e| format!("creating parent {i}: {e}"))
        }
    });
    stream::iter(creates)
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}
