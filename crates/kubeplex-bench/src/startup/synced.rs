//! Sections `startup` and `startup_remote`: time to synced at several context counts, against the API
//! servers directly or through delayed links.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use kube::config::Kubeconfig;

use super::link::DelayedLink;
use crate::child::{Outcome, Side};
use crate::config::Options;
use crate::figures::{Goal, Section, Spread};
use crate::harness::{Bench, contexts, figure, progress};

/// Startup again, each API server behind a [`DelayedLink`] of `--link-rtt-ms`: contexts whose lists wait on the
/// network, as with clusters in other regions, rather than on this machine's cores.
pub(crate) async fn startup_remote(
    bench: &Bench,
    options: &Options,
    sections: &mut BTreeMap<&'static str, Section>,
    goals: &mut Vec<Goal>,
) -> Result<(), String> {
    let rtt = Duration::from_millis(u64::from(options.link_rtt_ms));
    let mut kubeconfig = Kubeconfig::read_from(&bench.kubeconfig)
        .map_err(|e| format!("reading the kubeconfig: {e}"))?;
    let mut links = Vec::new();
    for named in &mut kubeconfig.clusters {
        let Some(cluster) = named.cluster.as_mut() else {
            continue;
        };
        let server = cluster.server.clone().unwrap_or_default();
        let upstream: std::net::SocketAddr = server
            .strip_prefix("https://")
            .and_then(|address| address.parse().ok())
            .ok_or_else(|| format!("cluster {}: cannot relay server {server:?}", named.name))?;
        let link = DelayedLink::start(upstream, rtt / 2)
            .await
            .map_err(|e| format!("starting a delayed link: {e}"))?;
        cluster.server = Some(format!("https://{}", link.address()));
        links.push(link);
    }
    let path = bench.kubeconfig.with_file_name("kubeconfig-delayed-link");
    // JSON is YAML: kubeconfig readers take it as it is.
    let json = serde_json::to_vec(&kubeconfig).map_err(|e| e.to_string())?;
    std::fs::write(&path, json).map_err(|e| format!("writing {}: {e}", path.display()))?;
    let result = startup_over(bench, options, Some(&path), sections, goals).await;
    drop(links);
    result
}

/// The startup section, against the servers directly or through the delayed links of `link_kubeconfig`.
pub(crate) async fn startup_over(
    bench: &Bench,
    options: &Options,
    link_kubeconfig: Option<&Path>,
    sections: &mut BTreeMap<&'static str, Section>,
    goals: &mut Vec<Goal>,
) -> Result<(), String> {
    let rtt = options.link_rtt_ms;
    let (key, title) = match link_kubeconfig {
        None => ("startup", "startup to synced".to_owned()),
        Some(_) => (
            "startup_remote",
            format!("startup to synced, every API server behind a {rtt} ms round trip"),
        ),
    };
    let mut section = Section {
        title,
        method: format!(
            "{} ConfigMaps per context; contexts ctx-i use cluster i mod 3, namespace bench-start (contexts on one \
             API server list the same namespace, each into its own cache). Baseline: one kube-runtime Controller and \
             Client per context, synced = every Controller store ready. kubeplex: one controller over C contexts, \
             synced = Running::wait_started (what /startupz reports). Times from process start.{}",
            options.startup_objects,
            match link_kubeconfig {
                Some(_) => format!(
                    " Every connection goes through a TCP relay in the parent that delays each byte by {} ms each \
                     way ({rtt} ms round trip), as for clusters in another region.",
                    f64::from(rtt) / 2.0
                ),
                None => String::new(),
            }
        ),
        ..Section::default()
    };
    let cores = std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64);
    let mut synced_medians = Vec::new();
    for &count in &options.startup_contexts {
        progress(&format!("{key}: {count} contexts"));
        let mut spec = bench.spec(Side::Baseline, &contexts(count, 3), "bench-start");
        if let Some(kubeconfig) = link_kubeconfig {
            spec.kubeconfig = kubeconfig.to_owned();
        }
        spec.expect = options.startup_objects * count;
        spec.distinct = true;
        let runs = bench.pairs(&spec).await?;
        let synced = figure(format!("time to synced, C={count}"), "s", &runs, |o| {
            o.synced_s
        });
        synced_medians.push((count, synced.baseline.median, synced.kubeplex.median));
        section.figures.push(synced);
        let done = figure(
            format!("time to every object reconciled, C={count}"),
            "s",
            &runs,
            |o| o.done_s.unwrap_or(f64::NAN),
        );
        let operator_cpu = figure(
            format!("operator CPU to synced, C={count}"),
            "s",
            &runs,
            |o| o.cpu_synced_s,
        );
        let server_cpu = figure(
            format!("API servers + etcds CPU, C={count}"),
            "s",
            &runs,
            |o| o.server_cpu_s,
        );
        // What the run would take if every core did nothing but this run's work, operator and servers alike.
        let floor = |side: &Vec<Outcome>| {
            let cpu: Vec<f64> = side.iter().map(|o| o.cpu_s + o.server_cpu_s).collect();
            Spread::of(&cpu).median / cores
        };
        section.notes.push(format!(
            "C={count}: CPU used (operator + servers) / {cores} cores = baseline {:.2} s, kubeplex {:.2} s; \
             every object reconciled after baseline {:.2} s, kubeplex {:.2} s",
            floor(&runs.0),
            floor(&runs.1),
            done.baseline.median,
            done.kubeplex.median
        ));
        section.figures.extend([done, operator_cpu, server_cpu]);
    }
    if let (Some(first), Some(last)) = (synced_medians.first(), synced_medians.last()) {
        let (b, k) = (last.1 / first.1, last.2 / first.2);
        section.notes.push(format!(
            "T({})/T({}) of the medians: baseline {b:.2}, kubeplex {k:.2}",
            last.0, first.0
        ));
        goals.push(Goal {
            section: key,
            goal: format!("kubeplex T({})/T({}) <= 1.3", last.0, first.0),
            measured: format!("{k:.2} (baseline {b:.2})"),
            met: k <= 1.3,
        });
    }
    sections.insert(key, section);
    Ok(())
}
