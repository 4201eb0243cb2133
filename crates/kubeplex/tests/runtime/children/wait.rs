//! Creating a parent, polling it until it is as a test wants it, and reading its conditions.

use kube::api::{Api, PostParams};

use super::parent::{Parent, ParentSpec};
use crate::support::{create_namespace, wait_status};

pub async fn create_parent(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    spec: ParentSpec,
) -> Parent {
    create_namespace(client, namespace).await;
    let api: Api<Parent> = Api::namespaced(client.clone(), namespace);
    api.create(&PostParams::default(), &Parent::new(name, spec))
        .await
        .unwrap()
}

/// Polls the parent until `done` holds; panics with its last status after [`WAIT`](crate::support::WAIT).
pub async fn wait_parent(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    what: &str,
    done: impl Fn(&Parent) -> bool,
) -> Parent {
    let api: Api<Parent> = Api::namespaced(client.clone(), namespace);
    wait_status(&api, name, what, done).await
}

pub fn condition<'a>(parent: &'a Parent, type_: &str) -> Option<&'a kubeplex::status::Condition> {
    parent
        .status
        .as_ref()?
        .fleet
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}
