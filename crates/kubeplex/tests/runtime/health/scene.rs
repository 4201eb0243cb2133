//! What every test here does around its own steps: an operator running one controller, the parent it
//! reconciles, the children's statuses the test plays as the clusters' controllers would, and reading the
//! parent's health and conditions back.

use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::Kubeconfig;
use kubeplex::{Manager, Reconcile, Running, health::Health, status::ClusterHealth};
use kubeplex_testenv::TestEnv;
use serde::de::DeserializeOwned;

use super::parent::{Workload, WorkloadSpec};
use crate::support::{create_namespace, wait_exists, wait_started, wait_status};

/// One test's operator and the parent `name` in `namespace` of control.
pub struct Scene<'a> {
    pub env: &'a TestEnv,
    pub namespace: &'static str,
    name: &'static str,
    running: Running,
}

impl<'a> Scene<'a> {
    /// Starts an operator running `controller`, then creates the parent `name` in `namespace` of control
    /// (and that namespace in cluster-a, for its children).
    pub async fn start<R: Reconcile>(
        env: &'a TestEnv,
        controller: R,
        namespace: &'static str,
        name: &'static str,
        spec: WorkloadSpec,
    ) -> Self {
        Self::start_with(
            env,
            env.kubeconfig().clone(),
            controller,
            namespace,
            name,
            spec,
        )
        .await
    }

    /// [`Scene::start`] with the operator reaching the clusters through `kubeconfig` (a relay's, say).
    pub async fn start_with<R: Reconcile>(
        env: &'a TestEnv,
        kubeconfig: Kubeconfig,
        controller: R,
        namespace: &'static str,
        name: &'static str,
        spec: WorkloadSpec,
    ) -> Self {
        let running = Manager::with_kubeconfig(kubeconfig)
            .controller(controller)
            .start()
            .await
            .unwrap();
        wait_started(&running, "the controller started").await;
        let control = env.client("control").await.unwrap();
        create_namespace(&control, namespace).await;
        create_namespace(&env.client("cluster-a").await.unwrap(), namespace).await;
        let api: Api<Workload> = Api::namespaced(control, namespace);
        api.create(&PostParams::default(), &Workload::new(name, spec))
            .await
            .unwrap();
        Self {
            env,
            namespace,
            name,
            running,
        }
    }

    pub fn running(&self) -> &Running {
        &self.running
    }

    /// The parents' API in control, in this test's namespace.
    pub async fn parents(&self) -> Api<Workload> {
        Api::namespaced(self.env.client("control").await.unwrap(), self.namespace)
    }

    /// The API of the children of kind `K` in cluster-a, in this test's namespace.
    pub async fn children<K>(&self) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
    {
        Api::namespaced(self.env.client("cluster-a").await.unwrap(), self.namespace)
    }

    /// Once the parent's reconcile has created the child `name`, writes `status` into its status
    /// subresource, as its controller would; a null `observedGeneration` is filled in with the child's.
    pub async fn play<K>(&self, name: &str, mut status: serde_json::Value)
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        let api = self.children::<K>().await;
        let child = wait_exists(&api, name).await;
        if status
            .get("observedGeneration")
            .is_some_and(serde_json::Value::is_null)
        {
            status["observedGeneration"] = child.meta().generation.into();
        }
        let patch = serde_json::json!({ "status": status });
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    /// Polls the parent until `done` holds; fails the test with its last status after the tests' wait.
    pub async fn wait(&self, what: &str, done: impl Fn(&Workload) -> bool) -> Workload {
        wait_status(&self.parents().await, self.name, what, done).await
    }

    /// Polls the parent until its cluster-a health is `state` with `worst` as its worst child's line.
    pub async fn wait_health(&self, what: &str, state: Health, worst: Option<&str>) -> Workload {
        self.wait(what, |p| reads(p, state, worst)).await
    }

    /// Polls the parent until its `Ready` condition is `True`.
    pub async fn wait_ready(&self, what: &str) -> Workload {
        self.wait(what, |p| {
            condition(p, "Ready").is_some_and(|c| c.0 == "True")
        })
        .await
    }

    pub async fn stop(self) {
        crate::support::stop(self.running).await;
    }
}

/// A condition of the parent: (status, reason, message).
pub fn condition(parent: &Workload, type_: &str) -> Option<(String, String, String)> {
    let conditions = &parent.status.as_ref()?.fleet.conditions;
    let c = conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// The parent's `Ready` condition: (status, reason).
pub fn ready(parent: &Workload) -> (&str, &str) {
    let conditions = parent.status.as_ref().map(|s| &s.fleet.conditions);
    let ready = conditions.and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    let ready = ready.expect("a Ready condition");
    (&ready.status, &ready.reason)
}

/// The parent's children's health in cluster-a, as its status says.
pub fn health(parent: &Workload) -> Option<&ClusterHealth> {
    parent
        .status
        .as_ref()?
        .fleet
        .clusters
        .get("cluster-a")?
        .health
        .as_ref()
}

/// Whether the parent's cluster-a health is `state` with `worst` as its worst child's line.
pub fn reads(parent: &Workload, state: Health, worst: Option<&str>) -> bool {
    health(parent).is_some_and(|h| h.state == state && h.worst.as_deref() == worst)
}
