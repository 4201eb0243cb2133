//! The progressive rollout of an `AppDeployment`'s image: which image each cluster's Deployments get,
//! given what the clusters run now, how healthy they are, and what each was last given.
//!
//! What each Deployment runs is read from its cached metadata: the deployer writes the image into an
//! annotation ([`IMAGE_ANNOTATION`]) in the same apply as the pod template, so a child whose annotation
//! names the new image and whose health is `Healthy` (the Deployment controller observed that generation
//! and every replica is updated and available) runs the new image. Which clusters are reached is decided
//! from the caches alone (no request). What a cluster not reached yet keeps comes from the parent's
//! `status.rollout.clusters`, the image each cluster was last given: a cache that has not listed yet, or a
//! Deployment deleted by hand, must not let the new image in early.

use std::collections::BTreeMap;

use kubeplex::status::RecentWrites;
use kubeplex::{health::ChildHealth, health::Health};

use crate::app::{AppDeployment, RolloutPhase, RolloutStatus};

mod events;

pub use events::{RolloutEvent, rollout_events};

/// The annotation on each Deployment naming the image the deployer gave it.
pub const IMAGE_ANNOTATION: &str = "demo.kubeplex.dev/image";

/// `app`'s `status.rollout` as the deployer last wrote it (`written`), while the cached `app` is older than
/// that write; else as the cached `app` has it.
pub(crate) fn rollout_of(
    app: &AppDeployment,
    written: &RecentWrites<Option<RolloutStatus>>,
) -> Option<RolloutStatus> {
    written
        .newer_than(app)
        .unwrap_or_else(|| app.status.as_ref().and_then(|s| s.rollout.clone()))
}

/// A Deployment of the parent as its cluster's cache has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its health.
    pub health: Health,
    /// Why (`1/3 replicas available`).
    pub reason: String,
    /// The image the deployer gave it ([`IMAGE_ANNOTATION`]), if it says.
    pub image: Option<String>,
}

impl Seen {
    /// What the rollout needs of a child from `cx.children`.
    pub fn of(child: &ChildHealth) -> Self {
        let annotations = (child.projection.as_ref()).and_then(|p| p.metadata.annotations.as_ref());
        Self {
            namespace: child.namespace.clone().unwrap_or_default(),
            name: child.name.clone(),
            health: child.health,
            reason: child.reason.clone(),
            image: annotations.and_then(|a| a.get(IMAGE_ANNOTATION)).cloned(),
        }
    }
}

/// A cluster in rollout order, with the parent's Deployments its cache has there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterView {
    /// The cluster's name.
    pub name: String,
    /// The parent's Deployments there.
    pub children: Vec<Seen>,
}

/// What a reconcile applies: the image of each (cluster, namespace), and where the rollout stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The image for the Deployment in each (cluster, namespace).
    pub images: BTreeMap<(String, String), String>,
    /// Where the rollout stands.
    pub status: RolloutStatus,
}

impl Decision {
    /// The image for the Deployment in `namespace` of `cluster`.
    pub fn image(&self, cluster: &str, namespace: &str) -> Option<&str> {
        (self.images.get(&(cluster.to_owned(), namespace.to_owned()))).map(String::as_str)
    }
}

/// The clusters in rollout order: those `order` names (that are `targets`), then the other targets as
/// they come.
pub fn ordered<'a>(targets: &[&'a str], order: &[String]) -> Vec<&'a str> {
    let named = order
        .iter()
        .filter_map(|o| targets.iter().find(|t| **t == o));
    let mut clusters: Vec<&str> = Vec::with_capacity(targets.len());
    for cluster in named.chain(targets) {
        if !clusters.contains(cluster) {
            clusters.push(cluster);
        }
    }
    clusters
}

/// Why `cluster` does not run `image` healthily in every one of `namespaces` yet; `None` when it does. A
/// `Degraded` child is named first (it halts the rollout).
fn not_done(cluster: &ClusterView, image: &str, namespaces: &[&str]) -> Option<(bool, String)> {
    let child = |namespace: &str| cluster.children.iter().find(|c| c.namespace == namespace);
    if let Some(bad) =
        (namespaces.iter().filter_map(|n| child(n))).find(|c| c.health == Health::Degraded)
    {
        let why = format!("{}/{} Degraded: {}", bad.namespace, bad.name, bad.reason);
        return Some((true, why));
    }
    namespaces
        .iter()
        .find_map(|namespace| match child(namespace) {
            None => Some((false, format!("{namespace}: not there yet"))),
            Some(c) if c.image.as_deref() != Some(image) => Some((
                false,
                format!(
                    "{}/{}: {} until it is applied",
                    c.namespace,
                    c.name,
                    c.image.as_deref().unwrap_or("another image")
                ),
            )),
            Some(c) if c.health != Health::Healthy => Some((
                false,
                format!(
                    "{}/{} {}: {}",
                    c.namespace,
                    c.name,
                    c.health.as_str(),
                    c.reason
                ),
            )),
            Some(_) => None,
        })
}

/// Which image each cluster gets: `image` goes to the clusters in order up to and including the first
/// that does not run it healthily in all `namespaces` (the one the rollout waits for, or is halted at
/// when a Deployment there is `Degraded`). Each cluster after it keeps what it was last `given` (the
/// parent's `status.rollout.clusters`), whatever its cache shows. A cluster without a record (a parent
/// written before the record existed, a member that joins mid-rollout) keeps what its Deployments carry;
/// a Deployment it does not have gets the image the other clusters behind were given or carry, or `image`
/// when none is behind with one (a new parent goes to every cluster at once).
pub fn decide(
    image: &str,
    namespaces: &[&str],
    clusters: &[ClusterView],
    given: &BTreeMap<String, String>,
) -> Decision {
    let gate = (clusters.iter().enumerate())
        .find_map(|(i, c)| not_done(c, image, namespaces).map(|why| (i, why)));
    let reached = gate.as_ref().map_or(clusters.len(), |(i, _)| i + 1);
    let behind = &clusters[reached..];
    let recorded = |cluster: &ClusterView| given.get(&cluster.name).map(String::as_str);
    let fallback = (behind.iter().find_map(recorded))
        .or_else(|| (behind.iter().flat_map(|c| &c.children)).find_map(|c| c.image.as_deref()))
        .unwrap_or(image);
    let mut images = BTreeMap::new();
    let mut records = BTreeMap::new();
    let mut waiting = Vec::new();
    for (i, cluster) in clusters.iter().enumerate() {
        for namespace in namespaces {
            let given = if i < reached {
                image
            } else if let Some(record) = recorded(cluster) {
                record
            } else {
                let child = cluster.children.iter().find(|c| c.namespace == *namespace);
                child.and_then(|c| c.image.as_deref()).unwrap_or(fallback)
            };
            if given != image && !waiting.contains(&cluster.name.as_str()) {
                waiting.push(cluster.name.as_str());
            }
            records
                .entry(cluster.name.clone())
                .or_insert_with(|| given.to_owned());
            images.insert(
                (cluster.name.clone(), (*namespace).to_owned()),
                given.to_owned(),
            );
        }
    }
    let status = match gate {
        Some((i, (degraded, why))) if !waiting.is_empty() => {
            let (cluster, others) = (&clusters[i].name, waiting.join(", "));
            let (phase, message) = if degraded {
                (
                    RolloutPhase::Halted,
                    format!("halted at {cluster}: {why}; {others} not updated"),
                )
            } else {
                (
                    RolloutPhase::Progressing,
                    format!("waiting for {cluster}: {why}; {others} not updated"),
                )
            };
            RolloutStatus {
                image: image.to_owned(),
                phase,
                cluster: Some(cluster.clone()),
                message,
                clusters: records,
            }
        }
        _ => RolloutStatus {
            image: image.to_owned(),
            phase: RolloutPhase::Complete,
            cluster: None,
            message: format!("{image} given to every cluster"),
            clusters: records,
        },
    };
    Decision { images, status }
}

#[cfg(test)]
mod tests;
