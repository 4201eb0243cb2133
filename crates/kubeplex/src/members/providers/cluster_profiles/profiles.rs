//! The provider's state: the profiles seen, grouped by the member each gives, and what was last told of
//! each member — from a watch's events to the joins, reports and leaves sent to the manager.

use std::collections::{BTreeMap, BTreeSet};

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use kube::ResourceExt;
use kube::core::DynamicObject;
use kube::runtime::watcher::Event;

use super::access::AccessProviders;
use super::conditions::JoinConditions;
use super::member_name::member_name;
use super::profile::{MemberKey, Profile, Version};
use crate::members::changes::LeaveOutcome;
use crate::members::provider::MemberSink;
use crate::members::providers::kubeconfig::{fingerprint, trusted_config_of};

/// One member: its profiles, and what was last told of it.
struct Member {
    key: MemberKey,
    /// Its profiles by name, as last seen.
    profiles: BTreeMap<String, DynamicObject>,
    /// The profile last joined with, and the fingerprint of its kubeconfig.
    joined: Option<(String, u64)>,
    /// The problem last reported since then.
    reported: Option<String>,
}

/// The provider's state.
pub(super) struct Profiles {
    /// The profiles' namespace.
    namespace: String,
    access: AccessProviders,
    conditions: JoinConditions,
    pub(super) sink: MemberSink,
    /// The version the profiles are read in.
    version: Version,
    /// Member name -> its profiles.
    members: BTreeMap<String, Member>,
    /// Profile name -> the member it gives.
    member_of: BTreeMap<String, String>,
    /// The profiles listed since the watch (re)started, until the list is complete.
    relisted: BTreeSet<String>,
    /// Profiles ignored because another member has their member name, as last seen.
    clashes: BTreeMap<String, DynamicObject>,
    pub(super) leaves: FuturesUnordered<BoxFuture<'static, (String, LeaveOutcome)>>,
    listed: bool,
}

impl Profiles {
    pub(super) fn new(
        (namespace, access, conditions): (String, AccessProviders, JoinConditions),
        sink: MemberSink,
        version: Version,
    ) -> Self {
        Self {
            namespace,
            access,
            conditions,
            sink,
            version,
            members: BTreeMap::new(),
            member_of: BTreeMap::new(),
            relisted: BTreeSet::new(),
            clashes: BTreeMap::new(),
            leaves: FuturesUnordered::new(),
            listed: false,
        }
    }

    /// The profiles are read in `version` from now on (a new watch lists them all again).
    pub(super) fn read_in(&mut self, version: Version) {
        self.version = version;
    }

    pub(super) async fn event(&mut self, event: Event<DynamicObject>) {
        match event {
            Event::Init => self.relisted.clear(),
            Event::InitApply(object) => {
                self.relisted.insert(object.name_any());
                self.apply(object).await;
            }
            Event::InitDone => {
                let listed = std::mem::take(&mut self.relisted);
                let missing: Vec<String> = (self.member_of.keys())
                    .filter(|p| !listed.contains(*p))
                    .cloned()
                    .collect();
                for profile in missing {
                    self.gone(&profile).await;
                }
                self.clashes.retain(|profile, _| listed.contains(profile));
                if !std::mem::replace(&mut self.listed, true) {
                    self.sink.listed().await;
                }
            }
            Event::Apply(object) => self.apply(object).await,
            Event::Delete(object) => self.gone(&object.name_any()).await,
        }
    }

    /// The member name `object` gives.
    fn member_of_object(&self, object: &DynamicObject) -> (MemberKey, String) {
        let key = MemberKey::of(object);
        let member = member_name(&self.namespace, key.value());
        (key, member)
    }

    /// A profile was added or changed.
    async fn apply(&mut self, object: DynamicObject) {
        let name = object.name_any();
        let (key, member) = self.member_of_object(&object);
        // Its member id changed: it no longer gives the member it gave.
        if let Some(previous) = self.member_of.get(&name).filter(|m| **m != member).cloned() {
            self.member_of.remove(&name);
            self.remove(&name, &previous).await;
        }
        if let Some(other) = self.members.get(&member).filter(|m| m.key != key) {
            if self.clashes.insert(name.clone(), object).is_none() {
                let owner = other.profiles.keys().next().cloned().unwrap_or_default();
                let namespace = &self.namespace;
                tracing::warn!(cluster = %member, profile = %name, %owner,
                    "ClusterProfiles {namespace}/{owner} and {namespace}/{name} give one member name; \
                     {name} is ignored");
            }
            return;
        }
        self.clashes.remove(&name);
        self.member_of.insert(name.clone(), member.clone());
        let entry = self
            .members
            .entry(member.clone())
            .or_insert_with(|| Member {
                key,
                profiles: BTreeMap::new(),
                joined: None,
                reported: None,
            });
        entry.profiles.insert(name, object);
        self.handle(&member).await;
    }

    /// Joins `member`, joins it again with what changed, or reports why it cannot. Of its profiles, the
    /// one it joined with is used while it reaches the cluster, else the first by name that does.
    async fn handle(&mut self, member: &str) {
        let namespace = self.namespace.clone();
        let Some(tracked) = self.members.get_mut(member) else {
            return;
        };
        let joined = tracked.joined.as_ref().map(|(profile, _)| profile.as_str());
        let mut order: Vec<&String> = tracked.profiles.keys().collect();
        order.sort_by_key(|profile| Some(profile.as_str()) != joined);
        let mut chosen = None;
        let mut first_problem = None;
        for profile in order {
            let object = &tracked.profiles[profile];
            let conditions = &self.conditions;
            let kubeconfig = Profile::of(object, self.version, conditions).and_then(|read| {
                match read.unhealthy {
                    Some(unhealthy) => Err(unhealthy),
                    None => {
                        let allowlist = self.sink.kubeconfig_allowlist();
                        self.access.kubeconfig(member, &read.offered, allowlist)
                    }
                }
            });
            match kubeconfig {
                Ok(kubeconfig) => {
                    chosen = Some((profile.clone(), kubeconfig));
                    break;
                }
                Err(problem) => _ = first_problem.get_or_insert((profile.clone(), problem)),
            }
        }
        let (profile, problem) = match chosen {
            Some((profile, kubeconfig)) => {
                let print = fingerprint(&kubeconfig);
                let unchanged = tracked.joined.as_ref().is_some_and(|(_, p)| *p == print);
                if unchanged && tracked.reported.is_none() {
                    return; // Nothing that reaches it changed (a condition's time, a property).
                }
                // Its cluster came through the allowlist; its user is the operator's own plugin.
                match trusted_config_of(kubeconfig, member).await {
                    Ok(config) => {
                        tracing::debug!(cluster = %member, %profile, "member from ClusterProfile");
                        self.sink.join(member, config).await;
                        (tracked.joined, tracked.reported) = (Some((profile, print)), None);
                        return;
                    }
                    Err(problem) => (profile, problem),
                }
            }
            None => first_problem.expect("a member has a profile"),
        };
        let reason = format!("ClusterProfile {namespace}/{profile}: {problem}");
        if tracked.reported.as_ref() != Some(&reason) {
            self.sink.unhealthy(member, reason.clone()).await;
            tracked.reported = Some(reason);
        }
    }

    /// The manager asks for `member`'s credentials again (its server rejected them): it joins again.
    pub(super) async fn reload(&mut self, member: &str) {
        if let Some(tracked) = self.members.get_mut(member) {
            tracked.joined = None;
            self.handle(member).await;
        }
    }

    /// The profile is gone (deleted, no longer selected, or missing from a relist).
    async fn gone(&mut self, profile: &str) {
        if self.clashes.remove(profile).is_some() {
            return;
        }
        if let Some(member) = self.member_of.remove(profile) {
            self.remove(profile, &member).await;
        }
    }

    /// `profile` no longer gives `member`: the member carries on with its other profiles, or leaves.
    async fn remove(&mut self, profile: &str, member: &str) {
        let Some(tracked) = self.members.get_mut(member) else {
            return;
        };
        tracked.profiles.remove(profile);
        if !tracked.profiles.is_empty() {
            return Box::pin(self.handle(member)).await;
        }
        self.members.remove(member);
        tracing::debug!(cluster = %member, %profile, "member's ClusterProfile is gone; leaving");
        let left = self.sink.leave_started(member).await;
        let leaving = member.to_owned();
        self.leaves
            .push(Box::pin(async move { (leaving, left.await) }));
        // A profile ignored for this name takes it now.
        let waiting: Vec<String> = (self.clashes.iter())
            .filter(|(_, object)| self.member_of_object(object).1 == member)
            .map(|(name, _)| name.clone())
            .collect();
        for name in waiting {
            if let Some(object) = self.clashes.remove(&name) {
                Box::pin(self.apply(object)).await;
            }
        }
    }
}
