//! The per-cluster fan-out of a reconcile: where its children live now (computed once), the work in each
//! place at once, bounded, and each place's outcome yielded as it arrives.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use futures::stream::{FuturesUnordered, Stream, StreamExt};
use kube::Client;

use crate::controller::DynReconcile;
use crate::core::Context;
use crate::core::Error;
use crate::core::deadline;
use crate::core::{ClusterOutcome, ClusterState};
use crate::engine::engine::{CLUSTER_TIMEOUT, ChildWatches, Engine};
use crate::members::SyncGuard;

/// How long the child clusters that answered wait for the others before their outcomes are written: a
/// cluster still working then, whose server has answered none of its clients for as long, is reported as
/// not answering yet (until its own outcome, at most [`CLUSTER_TIMEOUT`] later), so that a hung cluster
/// delays only its own status. A cluster whose server answers, only slowly (a burst), is waited for again:
/// an interim write would only add to the parents' writes.
pub(in crate::engine) const INTERIM_AFTER: Duration = Duration::from_secs(2);

/// One place a reconcile's children live: a fixed child context or a listed member, with this controller's
/// child watches there (lent) and, for a member, the guard that holds its gate open while its sync runs (a
/// leave waits for it before deleting children).
pub(crate) struct Place<'a> {
    pub(crate) name: Arc<str>,
    pub(crate) watches: ChildWatches<'a>,
    guard: Option<SyncGuard>,
}

/// What the fan-out yields, as it happens.
pub(crate) enum Arrival<'a> {
    /// A place's outcome, with its watches handed back for its children's health.
    Answered(String, ClusterOutcome, ChildWatches<'a>),
    /// Some places answered and others still work, their servers silent for [`INTERIM_AFTER`]: once, time for
    /// the interim write.
    InterimDue,
}

impl<R: DynReconcile> Engine<R> {
    /// Where this controller's children live now: the fixed child contexts, then every joined member whose
    /// child watches have listed, when its children live in every member.
    pub(crate) fn places(&self) -> Vec<Place<'_>> {
        let fixed = (self.plan.child_contexts().into_iter()).map(|c| (Arc::from(c.name()), None));
        let mut places: Vec<(Arc<str>, Option<SyncGuard>)> = fixed.collect();
        if self.plan.has_member_children() {
            let members = self.runtime.members.enter_all().into_iter();
            let listed = members.filter(|(name, _)| self.member_children.has_listed(name));
            places.extend(listed.map(|(name, guard)| (name.into(), Some(guard))));
        }
        (places.into_iter())
            .map(|(name, guard)| Place {
                watches: self.child_watches_in(&name),
                name,
                guard,
            })
            .collect()
    }

    /// Runs `work` in every place at once, each bounded by [`CLUSTER_TIMEOUT`] and given the place's client
    /// (behind `shard`'s fence as well), so that an unreachable or hung cluster holds back only its own
    /// outcome; yields each outcome as it arrives, and once [`Arrival::InterimDue`].
    pub(crate) fn fan_out<'a, F>(
        &'a self,
        places: Vec<Place<'a>>,
        shard: Option<usize>,
        work: impl FnMut(&Place<'a>, Client) -> F,
    ) -> impl Stream<Item = Arrival<'a>> + 'a
    where
        F: Future<Output = ClusterOutcome> + 'a,
    {
        let working: Vec<Arc<str>> = places.iter().map(|p| p.name.clone()).collect();
        let runs: FuturesUnordered<_> = self.runs(places, shard, work).into_iter().collect();
        let all = runs.len();
        let grace = Some(Box::pin(tokio::time::sleep(INTERIM_AFTER)));
        let last_answer = |cluster: &str| self.runtime.last_answer(cluster);
        futures::stream::unfold(
            (runs, grace, working),
            move |(mut runs, mut grace, mut working)| async move {
                loop {
                    let due = grace.is_some() && !working.is_empty() && working.len() < all;
                    let arrival = tokio::select! {
                        next = runs.next() => {
                            let (name, outcome, watches) = next?;
                            working.retain(|w| **w != *name);
                            Arrival::Answered(name, outcome, watches)
                        }
                        () = async { if let Some(grace) = grace.as_mut() { grace.await } }, if due => {
                            if let Some(grace) = grace.as_mut()
                                && all_answering(&working, last_answer)
                            {
                                grace.as_mut().reset(deadline(tokio::time::Instant::now(), INTERIM_AFTER));
                                continue;
                            }
                            grace = None;
                            Arrival::InterimDue
                        }
                    };
                    return Some((arrival, (runs, grace, working)));
                }
            },
        )
    }

    /// Runs `work` in every place at once, as [`Engine::fan_out`], and returns the outcomes once all are in.
    pub(crate) async fn per_child_context<'a, F>(
        &'a self,
        shard: Option<usize>,
        work: impl FnMut(&Place<'a>, Client) -> F,
    ) -> BTreeMap<String, ClusterOutcome>
    where
        F: Future<Output = ClusterOutcome> + 'a,
    {
        let runs = self.runs(self.places(), shard, work);
        let outcomes = join_all(runs).await.into_iter();
        outcomes.map(|(name, outcome, _)| (name, outcome)).collect()
    }

    /// One future per place: its name, its outcome bounded by [`CLUSTER_TIMEOUT`], and its watches.
    fn runs<'a, F>(
        &'a self,
        places: Vec<Place<'a>>,
        shard: Option<usize>,
        mut work: impl FnMut(&Place<'a>, Client) -> F,
    ) -> Vec<impl Future<Output = (String, ClusterOutcome, ChildWatches<'a>)> + 'a>
    where
        F: Future<Output = ClusterOutcome> + 'a,
    {
        (places.into_iter())
            .map(|place| {
                let run = (self.runtime.client(&place.name, shard)).map(|c| work(&place, c));
                async move {
                    let outcome = match run {
                        Ok(run) => timed(run).await,
                        Err(error) => unusable(&error),
                    };
                    let Place {
                        name,
                        watches,
                        guard,
                    } = place;
                    drop(guard);
                    (name.to_string(), outcome, watches)
                }
            })
            .collect()
    }
}

/// Whether the server of every cluster in `working` answered one of its clients within the last
/// [`INTERIM_AFTER`] (by `last_answer`): they are slow, not silent.
fn all_answering(
    working: &[Arc<str>],
    last_answer: impl Fn(&str) -> Option<tokio::time::Instant>,
) -> bool {
    (working.iter()).all(|c| last_answer(c).is_some_and(|at| at.elapsed() < INTERIM_AFTER))
}

/// The interim outcome of a child cluster still working after [`INTERIM_AFTER`].
pub(in crate::engine) fn not_answering_yet() -> ClusterOutcome {
    ClusterOutcome {
        fenced: None,
        state: ClusterState::Unreachable,
        children: 0,
        message: Some(format!(
            "no answer yet after {INTERIM_AFTER:?} (waiting up to {CLUSTER_TIMEOUT:?})"
        )),
    }
}

/// Bounds one cluster's work, so that a hung server counts as unreachable instead of stalling the rest.
async fn timed(work: impl Future<Output = ClusterOutcome>) -> ClusterOutcome {
    tokio::time::timeout(CLUSTER_TIMEOUT, work)
        .await
        .unwrap_or_else(|_| ClusterOutcome {
            fenced: None,
            state: ClusterState::Unreachable,
            children: 0,
            message: Some(format!("unreachable: no answer within {CLUSTER_TIMEOUT:?}")),
        })
}

/// The outcome for a context the pool has no client for.
fn unusable(error: &Error) -> ClusterOutcome {
    ClusterOutcome {
        fenced: None,
        state: ClusterState::Failed,
        children: 0,
        message: Some(error.detail()),
    }
}

#[cfg(test)]
mod tests {
    //! The fan-out's arrivals in paused time, and the fence its clients write behind.

    use std::sync::Arc;
    use std::time::Duration;

    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, DeleteParams};

    use super::{Arrival, INTERIM_AFTER};
    use crate::controller::Controller;
    use crate::controller::test_controller::{CLUSTER_A, TestController, runtime_of};
    use crate::core::{ClusterOutcome, ClusterState};
    use crate::engine::test_engine::engine;
    use crate::ha::{ShardBy, ShardState};
    use crate::testing::fake_api;

    const CLUSTER_B: crate::core::ContextName = crate::core::ContextName::new("cluster-b");

    fn ready() -> ClusterOutcome {
        ClusterOutcome {
            fenced: None,
            state: ClusterState::Applied,
            children: 0,
            message: None,
        }
    }

    /// An engine with children in cluster-a and cluster-b, whose `answers` (if any) stamp cluster-b's server.
    fn two_clusters(
        answers: Option<crate::client::LastAnswer>,
    ) -> crate::engine::engine::Engine<TestController> {
        let (client, _) = fake_api::client(|_, _, _| (200, serde_json::json!({})));
        let mut engine = engine(client.clone());
        let child = crate::plan::Child::of::<ConfigMap>().with_contexts([CLUSTER_A, CLUSTER_B]);
        engine.plan = Arc::new(TestController::plan().owns(child));
        engine.runtime = runtime_of([("cluster-a", client.clone()), ("cluster-b", client)]);
        if let Some(answers) = answers {
            engine.runtime.members.answers_on("cluster-b", answers);
        }
        engine
    }

    /// What the fan-out of `engine` yields, and when, with cluster-a answering at once and cluster-b after 5 s.
    async fn arrivals_with_b_late(
        engine: &crate::engine::engine::Engine<TestController>,
    ) -> Vec<(String, Duration)> {
        let start = tokio::time::Instant::now();
        let arrivals = engine.fan_out(engine.places(), None, |place, _| {
            let late = &*place.name == "cluster-b";
            async move {
                if late {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
                ready()
            }
        });
        (arrivals.map(|arrival| {
            let what = match arrival {
                Arrival::Answered(name, _, _) => name,
                Arrival::InterimDue => "interim".to_owned(),
            };
            (what, start.elapsed())
        }))
        .collect()
        .await
    }

    fn at(name: &str, secs: u64) -> (String, Duration) {
        (name.to_owned(), Duration::from_secs(secs))
    }

    /// cluster-a answers at once, cluster-b after 5 s, its server silent meanwhile: the fan-out yields
    /// cluster-a's outcome, the interim once after [`INTERIM_AFTER`], then cluster-b's, each when it happens.
    #[tokio::test(start_paused = true)]
    async fn outcomes_are_yielded_as_they_arrive_and_the_interim_once_between() {
        let seen = arrivals_with_b_late(&two_clusters(None)).await;
        assert_eq!(
            seen,
            [at("cluster-a", 0), at("interim", 2), at("cluster-b", 5)]
        );
        assert_eq!(INTERIM_AFTER, Duration::from_secs(2));
    }

    /// The same, cluster-b's server answering its other clients all along: slow, not silent, so no interim
    /// comes between the two outcomes.
    #[tokio::test(start_paused = true)]
    async fn a_cluster_slow_but_answering_others_gets_no_interim() {
        let answers = crate::client::LastAnswer::default();
        let engine = two_clusters(Some(answers.clone()));
        let stamping = tokio::spawn(async move {
            loop {
                answers.stamp(hyper::StatusCode::OK);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        let seen = arrivals_with_b_late(&engine).await;
        stamping.abort();
        assert_eq!(seen, [at("cluster-a", 0), at("cluster-b", 5)]);
    }

    /// The interim waits again while the clusters still working answer others, slowly: only a silent one
    /// (or one never heard from) is told as not answering yet.
    #[tokio::test(start_paused = true)]
    async fn only_clusters_silent_for_the_interim_delay_are_not_answering_yet() {
        let now = tokio::time::Instant::now();
        tokio::time::advance(Duration::from_secs(10)).await;
        let working: Vec<Arc<str>> = vec!["cluster-a".into(), "cluster-b".into()];
        let answered = |a: u64, b: u64| {
            move |c: &str| {
                let ago = if c == "cluster-a" { a } else { b };
                Some(now + Duration::from_secs(10) - Duration::from_millis(ago))
            }
        };
        assert!(super::all_answering(&working, answered(100, 1_900)));
        assert!(!super::all_answering(&working, answered(100, 2_000)));
        assert!(!super::all_answering(&working, |c: &str| (c
            == "cluster-a")
            .then_some(now)));
        assert!(super::all_answering(&[], |_: &str| None));
    }

    /// Each place's client writes behind the fence of the shard handed to the fan-out: a closed one refuses
    /// the write before it is sent, and without a shard it goes out.
    #[tokio::test]
    async fn the_clients_write_behind_the_fence_of_the_shard_handed_in() {
        let (client, requests) = fake_api::client(|_, _, _| (200, serde_json::json!({})));
        let mut engine = engine(client.clone());
        let mut runtime = Arc::try_unwrap(engine.runtime)
            .ok()
            .expect("the engine's runtime alone");
        runtime.shards = Some(Arc::new(ShardState::new(
            ShardBy::Parent(1),
            vec!["0".into()],
        )));
        engine.runtime = Arc::new(runtime);
        let delete = |_: &super::Place<'_>, client| async move {
            let api: Api<ConfigMap> = Api::namespaced(client, "ns");
            match api.delete("web", &DeleteParams::default()).await {
                Ok(_) => ready(),
                Err(_) => ClusterOutcome {
                    fenced: Some("refused"),
                    ..ready()
                },
            }
        };
        let fenced = engine.per_child_context(Some(0), delete).await;
        assert!(fenced["cluster-a"].fenced.is_some());
        assert!(requests.all().is_empty(), "{:?}", requests.lines());
        let unfenced = engine.per_child_context(None, delete).await;
        assert!(unfenced["cluster-a"].fenced.is_none());
        assert_eq!(requests.all().len(), 1);
    }
}
