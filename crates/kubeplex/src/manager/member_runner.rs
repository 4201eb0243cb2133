//! The manager's side of a member provider: each reported change becomes a client, an entry in `/readyz`,
//! pings, and the controllers' watches; a leave runs the leave policy before the member is forgotten.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::client::PoolConfig;
use crate::core::Error;
use crate::core::name_problem;
use crate::health::Pings;
use crate::members::{Command, FixedClients, LeavePolicy, MemberProvider, MemberSink};
use crate::runtime::Runtime;

/// How many provider changes may wait for the runner.
pub(super) const COMMANDS_WAITING: usize = 64;
/// How many rejected members may wait to be read again.
const RELOADS_WAITING: usize = 64;
/// After a reload, how long a member whose credentials are still rejected is only reported, not reloaded
/// again: a provider with nothing new would otherwise be asked in a loop.
const RELOAD_AGAIN_AFTER: Duration = Duration::from_secs(300);

/// What the runner needs besides the commands.
pub(super) struct MemberRunner {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) pool: PoolConfig,
    pub(crate) pings: Arc<Pings>,
    pub(crate) policy: LeavePolicy,
    /// The fixed contexts: a member never takes one's name.
    pub(crate) fixed: Vec<String>,
}

impl MemberRunner {
    /// Runs `provider` and this runner as background tasks of the manager.
    pub(crate) fn start(self, provider: Box<dyn MemberProvider>, tasks: &mut JoinSet<()>) {
        let (commands, received) = mpsc::channel(COMMANDS_WAITING);
        let runtime = self.runtime.clone();
        let clients: FixedClients = Arc::new(move |context: &str| runtime.pool.client(context));
        let (reload, reloads) = mpsc::channel(RELOADS_WAITING);
        let (rejections, rejected) = mpsc::channel(RELOADS_WAITING);
        self.pings.tell_rejections(rejections);
        let sink = MemberSink::new(commands, clients, self.policy).with_reloads(reloads);
        tasks.spawn(provider.run(sink));
        tasks.spawn(self.run(received, rejected, reload));
    }

    /// Carries out the provider's changes, one at a time, until it stops reporting; a member whose
    /// credentials are `rejected` is named to `reload` once (then again at most every
    /// [`RELOAD_AGAIN_AFTER`]).
    pub(crate) async fn run(
        self,
        mut commands: mpsc::Receiver<Command>,
        mut rejected: mpsc::Receiver<String>,
        reload: mpsc::Sender<String>,
    ) {
        // The last problem reported per member, so that a provider repeating it is logged once.
        let mut problems: BTreeMap<String, String> = BTreeMap::new();
        let mut reloaded: BTreeMap<String, Instant> = BTreeMap::new();
        loop {
            let command = tokio::select! {
                command = commands.recv() => match command {
                    Some(command) => command,
                    None => return,
                },
                Some(name) = rejected.recv() => {
                    let recently = reloaded.get(&name).is_some_and(|at| at.elapsed() < RELOAD_AGAIN_AFTER);
                    if !recently && self.runtime.members.client(&name).is_some() {
                        tracing::warn!(context = %name, "member's credentials were rejected: asking its provider to read them again");
                        reloaded.insert(name.clone(), Instant::now());
                        let _ = reload.try_send(name);
                    }
                    continue;
                }
            };
            match command {
                Command::Join { name, config } => {
                    let built = match name_problem(&name, &self.fixed) {
                        Some(problem) => Err(problem),
                        None => self.pool.finish(&name, *config).map_err(|e| e.to_string()),
                    };
                    match built {
                        Ok((client, config)) => {
                            let rejoined = self.runtime.members.client(&name).is_some();
                            let health = &self.runtime.health;
                            health.declare(&name, false);
                            health.connected(&name, None);
                            problems.remove(&name);
                            self.pings.add(&name, Arc::new(config));
                            if rejoined {
                                // Its watches list again with the new client: nothing is missed.
                                self.close_watches(&name);
                            }
                            self.runtime.members.joined(&name, client).await;
                            if rejoined {
                                tracing::info!(context = %name, "member's credentials changed: its client is rebuilt and its watches list again");
                            } else {
                                tracing::info!(context = %name, "member joined");
                            }
                        }
                        Err(reason) => self.unhealthy(&name, reason, &mut problems),
                    }
                }
                Command::Unhealthy { name, reason } => self.unhealthy(&name, reason, &mut problems),
                Command::Leave { name, done } => {
                    if self.runtime.members.client(&name).is_some() {
                        self.runtime.members.leave(&name, self.policy).await;
                        self.close_watches(&name);
                        tracing::info!(context = %name, policy = ?self.policy, "member left the fleet");
                    }
                    self.pings.remove(&name);
                    self.runtime.metrics.pings_ended(&name);
                    self.runtime.health.forget_context(&name);
                    problems.remove(&name);
                    reloaded.remove(&name);
                    let _ = done.send(());
                }
            }
        }
    }

    /// Closes every watch in member `name`, whichever controllers share it: their tasks end and their
    /// caches are freed.
    fn close_watches(&self, name: &str) {
        (self.runtime.watches).release_matching(|key| key.context == name);
    }

    /// Marks member `name` unhealthy with `reason` in `/readyz`; logged when the reason changes.
    fn unhealthy(&self, name: &str, reason: String, problems: &mut BTreeMap<String, String>) {
        let health = &self.runtime.health;
        health.declare(name, false);
        let error = Error::Member {
            context: name.to_owned(),
            reason: reason.clone(),
        };
        health.connected(name, Some(&error));
        if problems.get(name) != Some(&reason) {
            tracing::warn!(context = %name, problem = %reason, "member cannot be used");
            problems.insert(name.to_owned(), reason);
        }
    }
}
