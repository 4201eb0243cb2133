//! One controller's engine: what its reconciles share (the reconciler, the plan, its caches and clients),
//! and the key they are reconciled by.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use educe::Educe;
use futures::future::join_all;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Resource, ResourceExt};
use parking_lot::{Mutex, RwLock};

use crate::controller::DynReconcile;
use crate::core::Action;
use crate::core::ApiScope;
use crate::core::ClusterOutcome;
use crate::core::Context;
use crate::core::ParentRef;
use crate::core::{Cluster, Member};
use crate::engine::status::events::{EventPublisher, Note};
use crate::executor::QueueKey;
use crate::plan::Plan;
use crate::runtime::Runtime;
use crate::watch::ChildCache;
use crate::watch::{SharedWatch, WatchKey};

pub(super) type Primary<R> = <R as DynReconcile>::Resource;

/// How long syncing or cleaning up one cluster in one reconcile may take before it counts as unreachable,
/// so that a hung cluster delays only its own status.
pub const CLUSTER_TIMEOUT: Duration = Duration::from_secs(15);

/// What a reconcile is keyed by: where the object lives (one of the controller's typed contexts, or a
/// member of the fleet) and its reference; the same namespace/name in two clusters are two keys. (Derived
/// with the fields' bounds: `R` itself need not be `Clone`, `Eq` or `Hash`.)
#[derive(Educe)]
#[educe(Clone, PartialEq, Eq, Hash)]
pub(crate) struct ReconcileKey<R: DynReconcile> {
    pub(crate) context: Cluster<R::Context>,
    pub(crate) object: ObjectRef<Primary<R>>,
}

/// A controller's reconciles take turns by the cluster their object came from.
impl<R: DynReconcile> QueueKey for ReconcileKey<R> {
    type Group = Cluster<R::Context>;

    fn group(&self) -> Self::Group {
        self.context.clone()
    }

    fn group_name(group: &Self::Group) -> String {
        group.name().to_owned()
    }
}

/// A write to a parent: the object, the cluster it lives in, and the shard whose fence the write passes
/// as well (the parent's, in sharded mode).
pub(crate) type ParentWrite<'a, R> = (
    &'a Primary<R>,
    &'a Cluster<<R as DynReconcile>::Context>,
    Option<usize>,
);

/// Primary caches by (cluster, namespace); `None` is the all-namespaces watch.
pub(crate) type Primaries<R> =
    crate::engine::intake::primaries::PrimaryCaches<<R as DynReconcile>::Context, Primary<R>>;

/// One child kind's cache in one (cluster, namespace).
#[derive(Clone)]
pub(crate) struct ChildWatch {
    pub(crate) context: String,
    pub(crate) resource: kube::api::ApiResource,
    /// The namespace it watches; `None`: every namespace (or a cluster-scoped kind).
    pub(crate) namespace: Option<String>,
    pub(crate) cache: Arc<dyn ChildCache>,
    /// Children applied whose watch has not delivered them yet, as the apply's answer judged them.
    pub(crate) answered: Arc<crate::engine::children::answered::Answered>,
    /// What this controller last applied through it: a child still as applied is not applied again.
    pub(crate) applied: Arc<crate::engine::children::applied::Applied>,
}

impl ChildWatch {
    /// Whether it watches `namespace` (a child's; `None` for a cluster-scoped one).
    pub(crate) fn covers(&self, namespace: Option<&str>) -> bool {
        self.namespace.is_none() || self.namespace.as_deref() == namespace
    }

    /// The watch of `resource`'s children in `context` and `namespace`, through `cache`. A child the watch
    /// delivers is the cache's from then on: its apply's answer is forgotten, so that one deleted since is
    /// never taken for the object last applied.
    pub(crate) fn new(
        (context, namespace): (&str, Option<&str>),
        resource: kube::api::ApiResource,
        cache: Arc<dyn ChildCache>,
    ) -> Self {
        let answered: Arc<crate::engine::children::answered::Answered> = Arc::default();
        let held = Arc::downgrade(&answered);
        cache.subscribe_delivered(Box::new(move |namespace, name| {
            let Some(answered) = held.upgrade() else {
                return false;
            };
            answered.forget(namespace, name);
            true
        }));
        Self {
            context: context.to_owned(),
            resource,
            namespace: namespace.map(str::to_owned),
            cache,
            answered,
            applied: Arc::default(),
        }
    }
}

/// This controller's child watches in one cluster, lent: the engine's own of a fixed context, or a member's
/// shared list; a reconcile looks them up once per cluster for its sync and its children's health.
#[derive(Clone)]
pub(crate) enum ChildWatches<'a> {
    Fixed(Vec<&'a ChildWatch>),
    Member(Arc<Vec<ChildWatch>>),
}

impl ChildWatches<'_> {
    /// Each watch, borrowed.
    pub(crate) fn lent(&self) -> Vec<&ChildWatch> {
        match self {
            Self::Fixed(watches) => watches.clone(),
            Self::Member(watches) => watches.iter().collect(),
        }
    }
}

/// A controller's child watches in each joined member, and the members where they have listed (children
/// go only there: a member whose watches never list never holds a reconcile up).
#[derive(Default)]
pub(crate) struct MemberChildren(
    RwLock<BTreeMap<String, Arc<Vec<ChildWatch>>>>,
    RwLock<std::collections::BTreeSet<String>>,
);

impl MemberChildren {
    /// The child watches in member `name` (none when it is not one).
    pub(crate) fn of(&self, name: &str) -> Arc<Vec<ChildWatch>> {
        let members = self.0.read();
        members.get(name).cloned().unwrap_or_default()
    }

    /// Every member's child watches.
    pub(crate) fn all(&self) -> Vec<ChildWatch> {
        let members = self.0.read();
        members.values().flat_map(|w| w.iter().cloned()).collect()
    }

    pub(crate) fn set(&self, name: &str, watches: Vec<ChildWatch>) {
        let mut members = self.0.write();
        members.insert(name.to_owned(), Arc::new(watches));
    }

    pub(crate) fn take(&self, name: &str) -> Option<Arc<Vec<ChildWatch>>> {
        self.1.write().remove(name);
        let mut members = self.0.write();
        members.remove(name)
    }

    /// Member `name`'s child watches have listed (once: a rejoin keeps it so).
    pub(crate) fn listed(&self, name: &str) {
        let mut listed = self.1.write();
        listed.insert(name.to_owned());
    }

    /// Whether member `name`'s child watches have listed.
    pub(crate) fn has_listed(&self, name: &str) -> bool {
        self.1.read().contains(name)
    }
}

/// Everything the reconciles of one controller share.
pub(crate) struct Engine<R: DynReconcile> {
    pub(crate) reconciler: R,
    pub(crate) plan: Arc<Plan<R::Context>>,
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) primaries: Arc<Primaries<R>>,
    pub(crate) children: Vec<ChildWatch>,
    /// The watches of the kinds watched without being reconciled or owned, in contexts and members.
    pub(crate) inputs: crate::engine::intake::inputs::Inputs<R::Context>,
    /// The child watches in each joined member, when children live in every member.
    pub(crate) member_children: MemberChildren,
    pub(crate) finalizer: Option<String>,
    /// `Kind.group/version` of the primary kind.
    pub(crate) parent_kind: String,
    /// Consecutive failed reconciles per object, for the default error policy's backoff.
    pub(crate) failures: Mutex<HashMap<ReconcileKey<R>, u32>>,
    pub(crate) events: EventPublisher,
    /// The primary kind turned out to have no status subresource: status writes are skipped.
    pub(crate) no_status: std::sync::atomic::AtomicBool,
    /// The queue of the current term as leader, where every source of keys sends.
    pub(crate) term_keys: crate::engine::intake::term_keys::TermKeys<ReconcileKey<R>>,
    /// kubeplex's part of the statuses this controller wrote lately, until the cache shows them.
    pub(crate) written_status: crate::core::RecentWrites<crate::core::FleetStatus>,
    /// The reconciles' own status fields this controller wrote lately, until the cache shows them.
    pub(crate) written_own: crate::core::RecentWrites<crate::controller::OwnStatus>,
    /// The parents whose finalizer was removed lately, so that a lagging cache does not finalize them twice.
    pub(crate) finalized: crate::engine::status::finalized::Finalized,
    /// The parents (UIDs) whose children in some cluster were abandoned by the abandon policy: a child of
    /// theirs that shows up again (its cluster answers again) is left where it is, as recorded.
    pub(crate) abandoned: parking_lot::Mutex<std::collections::HashSet<String>>,
    /// The waits of leaving members each parent was warned of.
    pub(crate) told_leaves: crate::engine::status::told_leaves::ToldLeaves,
    /// The children whose parent reference conflicts, reported once each.
    pub(crate) conflicts: crate::engine::children::conflicts::Conflicts,
    /// When each deletion under way was first seen, for the abandon bounds.
    pub(crate) deletions: crate::engine::deletions_seen::DeletionsSeen,
    /// The lists that find deleted parents' children, shared by the deletions under way.
    pub(crate) deletion_lists: crate::engine::children::deletion_lists::DeletionLists,
}

impl<R: DynReconcile> Engine<R> {
    /// An engine with nothing remembered yet: the one constructor of the running controller and of the
    /// unit tests' engine.
    pub(crate) fn new(
        reconciler: R,
        plan: Arc<Plan<R::Context>>,
        runtime: Arc<Runtime>,
        primaries: Primaries<R>,
        children: Vec<ChildWatch>,
    ) -> Self {
        Engine {
            reconciler,
            finalizer: plan.managed_finalizer().map(|f| f.into_owned()),
            parent_kind: crate::core::kind_label::<Primary<R>>(),
            events: EventPublisher::new(plan.name()),
            plan,
            runtime,
            primaries: Arc::new(primaries),
            children,
            inputs: Default::default(),
            member_children: MemberChildren::default(),
            failures: Mutex::default(),
            no_status: Default::default(),
            term_keys: Default::default(),
            written_status: Default::default(),
            written_own: Default::default(),
            finalized: Default::default(),
            deletions: Default::default(),
            abandoned: Default::default(),
            conflicts: Default::default(),
            deletion_lists: Default::default(),
            told_leaves: Default::default(),
        }
    }

    /// The cache that holds `object` of `context`: its namespace's watch, else the all-namespaces one.
    pub(crate) fn primary_cache(
        &self,
        context: &Cluster<R::Context>,
        namespace: Option<&str>,
    ) -> Option<Arc<SharedWatch<Primary<R>>>> {
        self.primaries.get(context, namespace)
    }

    /// This controller's child watches in `context`, a fixed context or a member, lent.
    pub(crate) fn child_watches_in(&self, context: &str) -> ChildWatches<'_> {
        let fixed: Vec<&ChildWatch> = (self.children.iter())
            .filter(|w| w.context == context)
            .collect();
        if fixed.is_empty() {
            return ChildWatches::Member(self.member_children.of(context));
        }
        ChildWatches::Fixed(fixed)
    }

    /// Every child watch of this controller, the fixed contexts' and the members'.
    pub(crate) fn all_child_watches(&self) -> Vec<ChildWatch> {
        let mut watches = self.children.clone();
        watches.extend(self.member_children.all());
        watches
    }

    /// The key of the primary watch of `plan` in `context` (a typed context's or a member's name) and
    /// `namespace`.
    pub(crate) fn primary_key(
        plan: &Plan<R::Context>,
        context: &str,
        namespace: Option<&str>,
    ) -> WatchKey {
        WatchKey {
            context: context.to_owned(),
            kind: std::any::TypeId::of::<Primary<R>>(),
            namespace: namespace.map(str::to_owned),
            label_selector: plan.label_selector().map(str::to_owned),
            field_selector: plan.field_selector().map(str::to_owned),
            index_label: None,
        }
    }

    /// The key of the parent a child's reference points at, if the parent is one of this controller's.
    /// A parent in a member is one when the plan watches its primaries in every member.
    pub(crate) fn key_for(plan: &Plan<R::Context>, parent: &ParentRef) -> Option<ReconcileKey<R>> {
        let fixed = plan.contexts().iter().find(|c| c.name() == parent.context);
        let context = match fixed {
            Some(context) => Cluster::Context(*context),
            None if plan.in_members() => Cluster::Member(Member::new(parent.context.as_str())),
            None => return None,
        };
        Some(ReconcileKey {
            context,
            object: parent.object_ref(),
        })
    }

    /// The client of the cluster `context` whose writes pass the fence of `shard` as well, or why it has
    /// none.
    pub(crate) fn client(
        &self,
        context: &str,
        shard: Option<usize>,
    ) -> crate::core::Result<Client> {
        self.runtime.client(context, shard)
    }

    /// An `Api` for the primary kind where `object` lives, its writes behind `shard`'s fence as well.
    pub(crate) fn parent_api(
        &self,
        object: &Primary<R>,
        context: &Cluster<R::Context>,
        shard: Option<usize>,
    ) -> crate::core::Result<Api<Primary<R>>> {
        Ok(<<Primary<R> as Resource>::Scope as ApiScope>::api(
            self.client(context.name(), shard)?,
            object.namespace().as_deref(),
        ))
    }

    /// The reference its children carry to `object`.
    pub(crate) fn parent_ref(
        &self,
        object: &Primary<R>,
        context: &Cluster<R::Context>,
    ) -> ParentRef {
        ParentRef {
            context: context.name().to_owned(),
            namespace: object.namespace(),
            name: object.name_any(),
            uid: object.uid().unwrap_or_default(),
        }
    }

    /// Publishes an event about `object` in its own cluster (behind `shard`'s fence as well).
    pub(crate) async fn publish(
        &self,
        object: &Primary<R>,
        context: &Cluster<R::Context>,
        shard: Option<usize>,
        note: Note,
    ) {
        self.publish_all(object, context, shard, vec![note]).await;
    }

    /// Publishes events about `object` in its own cluster, at once (behind `shard`'s fence as well).
    pub(crate) async fn publish_all(
        &self,
        object: &Primary<R>,
        context: &Cluster<R::Context>,
        shard: Option<usize>,
        notes: Vec<Note>,
    ) {
        if notes.is_empty() {
            return;
        }
        if let Ok(client) = self.client(context.name(), shard) {
            let reference = object.object_ref(&());
            join_all(notes.into_iter().map(|note| {
                self.events
                    .publish(context.name(), client.clone(), &reference, note)
            }))
            .await;
        }
    }

    /// After a write refused by this replica's fence: no status, no Event, nothing abandoned; the parent is
    /// left to the fence's holder, or tried again shortly when that is still this replica (its fence
    /// lapsed for a moment), since nothing else queues it. Logged once per reconcile.
    pub(crate) fn stands_down(
        &self,
        shard: Option<usize>,
        outcomes: &BTreeMap<String, ClusterOutcome>,
    ) -> Option<Action> {
        let (cluster, refusal) = outcomes
            .iter()
            .find_map(|(name, o)| o.fenced.map(|refusal| (name, refusal)))?;
        if self.runtime.still_holds_fence(shard) {
            tracing::info!(%cluster, refusal, "a write was fenced while this replica still holds the fence (it lapsed for a moment): the parent is tried again");
            return Some(Action::requeue(crate::ha::FENCE_LAPSE_RETRY));
        }
        tracing::info!(%cluster, refusal, "a write was fenced; the parent is left to the replica that holds the fence");
        Some(Action::await_change())
    }
}
