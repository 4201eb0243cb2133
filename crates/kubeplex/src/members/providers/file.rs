//! Members from a kubeconfig file, or a directory of them (a mounted Secret): every context a member.
//!
//! The path is polled rather than watched (inotify, the `notify` crate): kubelet updates a mounted Secret
//! by writing a new `..2024_…` directory and swapping the `..data` symlink to it atomically, and a watch
//! on the files of the old target sees nothing of that; reading through the path each time does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::future::BoxFuture;
use kube::config::{Kubeconfig, KubeconfigError};

use super::kubeconfig::{config_of, contexts_of, fingerprint};
use crate::core::kubeconfig_error;
use crate::members::provider::{MemberProvider, MemberSink};

/// How often the path is read unless [`KubeconfigFile::interval`] says otherwise.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(2);

/// Members from a kubeconfig file, or from a directory whose files are kubeconfigs: every context of
/// every file is a member, named by the context.
///
/// The path is read every [`interval`](Self::interval) (2 s by default): a new context joins; a changed
/// one (its cluster or credentials rotated) joins again, so its client is rebuilt and its watches list
/// again; a context removed from a file leaves, as do the contexts of a file removed from the directory.
///
/// - **Directories** are read as kubelet mounts a Secret: entries whose names start with `.` (`..data`,
///   `..2024_…`) are skipped and every other regular file (symlinks followed) is a kubeconfig.
/// - **Torn writes.** A file that cannot be read or parsed changes nothing about the members it gave: they
///   keep their clients and are reported unhealthy with the reason (and a warning is logged once) until
///   it parses again; then each joins again, changed or not, since a join is how a member is said to be
///   healthy (with the same configuration it only rebuilds the client and lists again, losing nothing).
///   A context is only taken away when the file reads the same at two polls in a row, so a file caught
///   half-written (truncated, or cut after its first context) removes no member.
/// - A context named in two files belongs to the file that had it first (else the first by path); the
///   member is reported unhealthy, naming both files, until one of them drops it.
/// - **Credentials inline.** A context's cluster and user are read as every member kubeconfig is: its
///   credentials inline (`token`, `client-certificate-data`, …); one that names a file
///   (`certificate-authority`, `tokenFile`, …), runs a command (`exec`, unless
///   [`Manager::member_exec_commands`](crate::Manager::member_exec_commands) lists it) or sets a proxy or
///   `insecure-skip-tls-verify` is reported unhealthy naming the field (docs/fleets.md). Whoever may
///   write the path may add members: it is the fleet's administration.
/// - **Rejected credentials.** When the manager asks for a member's credentials again (its server
///   answered 401), the path is read at once, without waiting for the interval, and the member joins
///   again from what its file says then, changed or not.
///
/// ```no_run
/// # use kubeplex::{members::KubeconfigFile, members::LeavePolicy, Manager};
/// let manager = Manager::new()
///     .members(KubeconfigFile::new("/etc/fleet/members"), LeavePolicy::Orphan);
/// ```
#[derive(Clone, Debug)]
pub struct KubeconfigFile {
    path: PathBuf,
    interval: Duration,
}

impl KubeconfigFile {
    /// Members from the kubeconfig file at `path`, or from every kubeconfig in the directory at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            interval: DEFAULT_INTERVAL,
        }
    }

    /// How often the path is read (default 2 s; at least 10 ms).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }
}

impl MemberProvider for KubeconfigFile {
    fn run(self: Box<Self>, sink: MemberSink) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let mut poller = Poller::new(self.path);
            let mut ticks = tokio::time::interval(self.interval.max(Duration::from_millis(10)));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut listed = false;
            loop {
                tokio::select! {
                    _ = ticks.tick() => {
                        poller.poll(&sink).await;
                        if !std::mem::replace(&mut listed, true) {
                            sink.listed().await; // The first poll reported every member the files had.
                        }
                    }
                    member = sink.reload_requested() => poller.reload(&sink, &member).await,
                }
            }
        })
    }
}

/// What one file was at a poll.
enum Read {
    /// Parsed: the kubeconfig and its fingerprint.
    Parsed(Box<Kubeconfig>, u64),
    /// Could not be read or parsed, and why.
    Broken(String),
    /// No longer in the directory.
    Gone,
}

/// What is known of one file from earlier polls.
#[derive(Default)]
struct FileState {
    /// The fingerprint of its last good read (`None`: gone from the directory), to tell a stable file.
    last: Option<Option<u64>>,
    /// Why it could not be used, as last logged.
    broken: Option<String>,
}

/// A member as last reported.
#[derive(PartialEq, Eq)]
struct Known {
    file: PathBuf,
    fingerprint: u64,
    /// A join was sent for this fingerprint (its configuration could be built).
    joined: bool,
    /// Why it was last reported unhealthy over and above its configuration (its file is broken, or a
    /// second file names it).
    problem: Option<String>,
}

/// What a member should be after this poll.
struct Desired<'a> {
    file: &'a Path,
    /// Its kubeconfig and fingerprint; `None` when its file is broken (it keeps what it had).
    source: Option<(u64, &'a Kubeconfig)>,
    problem: Option<String>,
}

/// The provider's state between polls.
pub(super) struct Poller {
    path: PathBuf,
    files: BTreeMap<PathBuf, FileState>,
    members: BTreeMap<String, Known>,
    /// Why the path itself could not be read, as last logged.
    unlisted: Option<String>,
}

impl Poller {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            files: BTreeMap::new(),
            members: BTreeMap::new(),
            unlisted: None,
        }
    }

    /// Reads the path once and reports what changed since the last poll.
    pub(crate) async fn poll(&mut self, sink: &MemberSink) {
        self.read_and_report(sink, None).await;
    }

    /// Reads the path now because the manager wants `member`'s credentials again (its server rejected
    /// them): reports what changed, as a poll does, and `member` joins from what its file says now even
    /// if that is unchanged.
    pub(crate) async fn reload(&mut self, sink: &MemberSink, member: &str) {
        let path = self.path.display();
        tracing::debug!(cluster = %member, %path, "reading the member's kubeconfig again");
        self.read_and_report(sink, Some(member)).await;
    }

    /// A poll; `reloaded` joins again even if unchanged.
    async fn read_and_report(&mut self, sink: &MemberSink, reloaded: Option<&str>) {
        let reads = self.read_all().await;
        // Each file's contexts, split; a broken file's members are kept with its reason.
        let mut listed: BTreeMap<&Path, Vec<(String, Kubeconfig, u64)>> = BTreeMap::new();
        let mut leaving = BTreeSet::new();
        let mut desired: BTreeMap<String, Desired> = BTreeMap::new();
        let mut gone = Vec::new();
        for (path, read) in &reads {
            let state = self.files.entry(path.clone()).or_default();
            match read {
                Read::Broken(reason) => {
                    if state.broken.as_ref() != Some(reason) {
                        let members = members_of(&self.members, path);
                        tracing::warn!(path = %path.display(), %reason, members = %members.join(", "),
                            "kubeconfig file cannot be used; its members keep their clients until it can");
                        state.broken = Some(reason.clone());
                    }
                    for name in members_of(&self.members, path) {
                        let problem = Some(format!("kubeconfig {}: {reason}", path.display()));
                        let want = Desired {
                            file: path,
                            source: None,
                            problem,
                        };
                        desired.insert(name, want);
                    }
                }
                Read::Parsed(kubeconfig, whole) => {
                    let stable = state.last == Some(Some(*whole));
                    if state.broken.take().is_some() {
                        tracing::info!(path = %path.display(), "kubeconfig file can be used again");
                    }
                    state.last = Some(Some(*whole));
                    let contexts: Vec<_> = contexts_of(kubeconfig)
                        .into_iter()
                        .map(|(name, only)| {
                            let print = fingerprint(&only);
                            (name, only, print)
                        })
                        .collect();
                    if stable {
                        let names: BTreeSet<&str> =
                            contexts.iter().map(|(n, _, _)| n.as_str()).collect();
                        leaving.extend(
                            members_of(&self.members, path)
                                .into_iter()
                                .filter(|m| !names.contains(m.as_str())),
                        );
                    }
                    listed.insert(path, contexts);
                }
                Read::Gone => {
                    if state.last == Some(None) {
                        leaving.extend(members_of(&self.members, path));
                        gone.push(path.clone());
                    }
                    state.last = Some(None);
                }
            }
        }
        assign(&listed, &self.members, &mut desired);
        for (name, want) in desired {
            leaving.remove(&name);
            let again = reloaded == Some(name.as_str());
            self.report(sink, name, want, again).await;
        }
        for name in leaving {
            tracing::debug!(cluster = %name, "member is no longer in its kubeconfig file; leaving");
            self.members.remove(&name);
            // Not waited for: the manager carries it out beside the other members' changes.
            drop(sink.leave_started(&name).await);
        }
        // A file gone at two polls in a row has no members left to keep.
        for path in gone {
            self.files.remove(&path);
        }
    }

    /// Reports `name` if it changed: joins when its kubeconfig is new or changed, or when it recovers
    /// from a problem (a join is the one way to say it is healthy again; joining with an unchanged
    /// configuration only rebuilds its client and relists its watches, which loses nothing). `again`: it
    /// joins (or is reported unhealthy) even if nothing changed.
    async fn report(&mut self, sink: &MemberSink, name: String, want: Desired<'_>, again: bool) {
        let previous = self.members.get(&name);
        let fingerprint = want
            .source
            .map(|(print, _)| print)
            .or(previous.map(|k| k.fingerprint))
            .unwrap_or_default();
        let mut known = Known {
            file: want.file.to_owned(),
            fingerprint,
            joined: previous.is_some_and(|k| k.joined && k.fingerprint == fingerprint),
            problem: want.problem,
        };
        if previous == Some(&known) && !again {
            return;
        }
        let healthy = previous.is_some_and(|k| k.joined && k.problem.is_none());
        if let Some((_, kubeconfig)) = want.source
            && (again || !(healthy && known.joined))
        {
            match config_of(kubeconfig, Some(&name), sink.kubeconfig_allowlist()).await {
                Ok(config) => {
                    let path = want.file.display();
                    tracing::debug!(cluster = %name, %path, "member from kubeconfig file");
                    sink.join(&name, config).await;
                    known.joined = true;
                }
                Err(reason) => {
                    let reason = format!("kubeconfig {}: {reason}", want.file.display());
                    sink.unhealthy(&name, reason).await;
                    known.joined = false;
                }
            }
        }
        if let Some(problem) = &known.problem {
            sink.unhealthy(&name, problem.clone()).await;
        }
        self.members.insert(name, known);
    }

    /// Every file of the path, read; files known before and no longer listed are [`Read::Gone`]. When the
    /// path itself cannot be read, every known file is broken with that reason (nothing changes).
    async fn read_all(&mut self) -> Vec<(PathBuf, Read)> {
        let files = match list(&self.path).await {
            Ok(files) => files,
            Err(reason) => {
                let reason = format!("{}: {reason}", self.path.display());
                // Said once for the path, not once per file.
                if self.unlisted.as_ref() != Some(&reason) {
                    let members: Vec<&str> = self.members.keys().map(String::as_str).collect();
                    tracing::warn!(path = %self.path.display(), %reason, members = %members.join(", "),
                        "kubeconfig path cannot be read; its members keep their clients until it can");
                }
                for state in self.files.values_mut() {
                    state.broken = Some(reason.clone());
                }
                self.unlisted = Some(reason.clone());
                let paths = self.files.keys().cloned();
                return paths.map(|p| (p, Read::Broken(reason.clone()))).collect();
            }
        };
        self.unlisted = None;
        let mut reads = Vec::new();
        for path in &files {
            reads.push((path.clone(), read(path.clone()).await));
        }
        for path in self.files.keys() {
            if !files.contains(path) {
                reads.push((path.clone(), Read::Gone));
            }
        }
        reads
    }
}

/// Gives each listed context to a file: the one that had it before, else the first listing it. A second
/// file naming it makes the member unhealthy, naming both, unless it has a problem already.
fn assign<'a>(
    listed: &'a BTreeMap<&'a Path, Vec<(String, Kubeconfig, u64)>>,
    members: &BTreeMap<String, Known>,
    desired: &mut BTreeMap<String, Desired<'a>>,
) {
    for (path, contexts) in listed {
        for (name, only, print) in contexts {
            let source = Some((*print, only));
            let had_it = members.get(name).is_some_and(|k| k.file == *path);
            match desired.get_mut(name) {
                None => {
                    let want = Desired {
                        file: path,
                        source,
                        problem: None,
                    };
                    desired.insert(name.clone(), want);
                }
                Some(first) if had_it => {
                    let problem = Some(both(name, path, first.file));
                    *first = Desired {
                        file: path,
                        source,
                        problem,
                    };
                }
                Some(owner) => {
                    if owner.problem.is_none() {
                        owner.problem = Some(both(name, owner.file, path));
                    }
                }
            }
        }
    }
}

/// The kubeconfig files of `path`: itself, or the regular files of the directory not starting with `.`.
async fn list(path: &Path) -> Result<Vec<PathBuf>, String> {
    let unreadable = |e: std::io::Error| format!("cannot be read: {e}");
    if !tokio::fs::metadata(path)
        .await
        .map_err(unreadable)?
        .is_dir()
    {
        return Ok(vec![path.to_owned()]);
    }
    let mut entries = tokio::fs::read_dir(path).await.map_err(unreadable)?;
    let mut files = Vec::new();
    while let Some(entry) = entries.next_entry().await.map_err(unreadable)? {
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        // Followed: kubelet's files are symlinks through `..data`. One that cannot be followed (caught
        // mid-swap) is listed, so that reading it fails and changes nothing.
        match tokio::fs::metadata(entry.path()).await {
            Ok(meta) if !meta.is_file() => {}
            _ => files.push(entry.path()),
        }
    }
    files.sort();
    Ok(files)
}

/// One file, read off the async workers (relative paths in it resolved against its directory).
async fn read(path: PathBuf) -> Read {
    let read = tokio::task::spawn_blocking(move || Kubeconfig::read_from(path)).await;
    match read {
        Ok(Ok(kubeconfig)) => {
            let whole = fingerprint(&kubeconfig);
            Read::Parsed(Box::new(kubeconfig), whole)
        }
        Ok(Err(KubeconfigError::ReadConfig(error, _))) => {
            Read::Broken(format!("cannot be read: {error}"))
        }
        Ok(Err(error)) => Read::Broken(kubeconfig_error(&error)),
        Err(error) => Read::Broken(format!("reading it stopped: {error}")),
    }
}

/// The members `path` provided.
fn members_of(members: &BTreeMap<String, Known>, path: &Path) -> Vec<String> {
    members
        .iter()
        .filter(|(_, known)| known.file == path)
        .map(|(name, _)| name.clone())
        .collect()
}

/// Why a member named in two files is unhealthy.
fn both(name: &str, owner: &Path, other: &Path) -> String {
    format!(
        "context {name} is in both kubeconfig {} and {}; the one in {} is ignored",
        owner.display(),
        other.display(),
        other.display()
    )
}

#[cfg(test)]
mod tests;
