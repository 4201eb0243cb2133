//! The parent: starts the clusters, creates the objects, runs each measurement in alternating child
//! processes, and prints the table and the JSON.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::config::Kubeconfig;
use kubeplex_testenv::TestEnv;
use serde::Serialize;

use crate::bench::{Bench, CLUSTERS, Goal, Section, contexts, figure, progress};
use crate::child::{LatencySpec, Outcome, Side};
use crate::link::DelayedLink;
use crate::machine::Machine;
use crate::options::{Options, SECTIONS};
use crate::stats::percentile;

#[derive(Serialize)]
struct Report {
    date: String,
    machine: Machine,
    options: Options,
    setup: BTreeMap<&'static str, f64>,
    sections: BTreeMap<&'static str, Section>,
    goals: Vec<Goal>,
    total_seconds: f64,
}

const MB: f64 = 1024.0 * 1024.0;

fn config_map(namespace: &str, name: String, index: usize) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.to_owned()),
            labels: Some([("app".to_owned(), "kubeplex-bench".to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some(
            [
                ("index".to_owned(), index.to_string()),
                // A few hundred bytes, like a small real ConfigMap.
                ("payload".to_owned(), "x".repeat(256)),
            ]
            .into(),
        ),
        ..ConfigMap::default()
    }
}

/// Creates the namespaces and objects every section uses, concurrently.
async fn seed(env: &TestEnv, options: &Options) -> Result<usize, String> {
    let mut clients = Vec::new();
    for cluster in CLUSTERS {
        clients.push(env.client(cluster).await.map_err(|e| e.to_string())?);
    }
    // (cluster index, namespace, name prefix, count)
    let mut plan: Vec<(usize, &str, &str, usize)> = Vec::new();
    for c in 0..3 {
        if options.runs("startup") || options.runs("startup_remote") {
            plan.push((c, "bench-start", "obj", options.startup_objects));
        }
        if options.runs("throughput") {
            let share =
                options.throughput_objects / 3 + usize::from(c < options.throughput_objects % 3);
            plan.push((c, "bench-tp", "obj", share));
        }
        if options.runs("many_contexts") {
            plan.push((c, "bench-idle", "obj", 0));
        }
    }
    if options.runs("memory") {
        plan.push((0, "bench-mem", "obj", options.memory_objects));
    }
    if options.runs("latency") {
        plan.push((0, "bench-lat", "lat", options.latency_objects));
    }
    for (c, namespace, _, _) in &plan {
        let namespaces: Api<Namespace> = Api::all(clients[*c].clone());
        let object = Namespace {
            metadata: ObjectMeta {
                name: Some((*namespace).to_owned()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        match namespaces.create(&PostParams::default(), &object).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => return Err(format!("creating namespace {namespace}: {e}")),
        }
    }
    let creates = plan.iter().flat_map(|(c, namespace, prefix, count)| {
        let client: Client = clients[*c].clone();
        (0..*count).map(move |i| {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
            let object = config_map(namespace, format!("{prefix}-{i}"), i);
            async move {
                match api.create(&PostParams::default(), &object).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
                    Err(e) => Err(format!("creating {namespace}/{prefix}-{i}: {e}")),
                }
            }
        })
    });
    let results: Vec<Result<(), String>> =
        stream::iter(creates).buffer_unordered(32).collect().await;
    let created = results.len();
    results.into_iter().collect::<Result<(), String>>()?;
    Ok(created)
}

pub async fn run(options: Options) -> Result<(), String> {
    let total = Instant::now();
    let machine = Machine::describe();
    let mut setup = BTreeMap::new();
    progress("starting 3 clusters");
    let started = Instant::now();
    let env = TestEnv::builder()
        .clusters(CLUSTERS)
        .start()
        .await
        .map_err(|e| e.to_string())?;
    setup.insert("clusters_start_s", started.elapsed().as_secs_f64());
    let created_at = Instant::now();
    let created = seed(&env, &options).await?;
    setup.insert("objects_created", created as f64);
    setup.insert("create_s", created_at.elapsed().as_secs_f64());
    progress(&format!(
        "created {created} objects in {:.1}s",
        created_at.elapsed().as_secs_f64()
    ));
    let bench = Bench {
        kubeconfig: env.kubeconfig_path().to_owned(),
        exe: std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?,
        repeats: options.repeats,
        server_pids: env.pids(),
        wrapper: std::env::var("KUBEPLEX_BENCH_CHILD_WRAPPER")
            .map(|w| w.split_whitespace().map(String::from).collect())
            .unwrap_or_default(),
        children: std::sync::atomic::AtomicUsize::new(0),
    };
    let mut sections = BTreeMap::new();
    let mut goals = Vec::new();

    for section in &options.sections {
        match section.as_str() {
            "startup" => startup_over(&bench, &options, None, &mut sections, &mut goals).await?,
            "startup_remote" => startup_remote(&bench, &options, &mut sections, &mut goals).await?,
            "latency" => latency(&bench, &options, &mut sections, &mut goals).await?,
            "memory" => memory(&bench, &options, &mut sections, &mut goals).await?,
            "many_contexts" => {
                crate::many_contexts::run(&bench, &options, &mut sections, &mut goals).await?;
            }
            "child_cache" => {
                crate::child_cache::run(&bench, &options.child_cache, &mut sections, &mut goals)
                    .await?;
            }
            "throughput" => throughput(&bench, &options, &mut sections, &mut goals).await?,
            "fleet" | "failover" => {
                let host = crate::fleet_setup::Host {
                    env: &env,
                    kubeconfig: bench.kubeconfig.clone(),
                    exe: bench.exe.clone(),
                    wrapper: bench.wrapper.clone(),
                    server_pids: bench.server_pids.clone(),
                    repeats: bench.repeats,
                };
                if section == "fleet" {
                    let (section, fleet_goals) = crate::fleet::run(&host, &options.fleet).await?;
                    sections.insert("fleet", section);
                    goals.extend(fleet_goals);
                } else {
                    let (section, goal) = crate::failover::run(&host, &options.failover).await?;
                    sections.insert("failover", section);
                    goals.push(goal);
                }
            }
            other => return Err(format!("no section {other:?}")),
        }
    }
    let report = Report {
        date: k8s_openapi::jiff::Timestamp::now().to_string(),
        machine,
        options: options.clone(),
        setup,
        sections,
        goals,
        total_seconds: total.elapsed().as_secs_f64(),
    };
    print_table(&report);
    if let Some(path) = &options.json {
        write_json(path, &report)?;
    }
    drop(env);
    Ok(())
}

/// Startup again, each API server behind a [`DelayedLink`] of `--link-rtt-ms`: contexts whose lists wait on the
/// network, as with clusters in other regions, rather than on this machine's cores.
async fn startup_remote(
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
async fn startup_over(
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
            crate::stats::Spread::of(&cpu).median / cores
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

/// Event to reconcile latency on one context.
async fn latency(
    bench: &Bench,
    options: &Options,
    sections: &mut BTreeMap<&'static str, Section>,
    goals: &mut Vec<Goal>,
) -> Result<(), String> {
    progress("latency");
    let latency = LatencySpec {
        objects: options.latency_objects,
        rate_per_s: options.latency_rate_per_s,
        seconds: options.latency_seconds,
    };
    let mut spec = bench.spec(Side::Baseline, &contexts(1, 1), "bench-lat");
    spec.expect = options.latency_objects;
    spec.latency = Some(latency);
    let runs = bench.pairs(&spec).await?;
    let p50 = figure("event to reconcile p50", "ms", &runs, |o| {
        percentile(&o.latencies_ms, 50.0)
    });
    let p99 = figure("event to reconcile p99", "ms", &runs, |o| {
        percentile(&o.latencies_ms, 99.0)
    });
    let missed = figure("writes coalesced (not seen)", "count", &runs, |o| {
        o.missed as f64
    });
    goals.push(Goal {
        section: "latency",
        goal: "kubeplex p50 and p99 <= 1.1x baseline".into(),
        measured: format!("p50 {:.2}x, p99 {:.2}x", p50.ratio, p99.ratio),
        met: p50.ratio <= 1.1 && p99.ratio <= 1.1,
    });
    sections.insert(
        "latency",
        Section {
            title: "event -> reconcile latency".into(),
            method: format!(
                "one context (cluster-0, namespace bench-lat, {} objects); after sync the child merge-patches \
                 data.seq on lat-(seq mod {}) at {}/s for {} s; latency = write response -> start of the first \
                 reconcile that sees that seq (the same process's monotonic clock); percentiles per run, spread over runs.",
                options.latency_objects, options.latency_objects, options.latency_rate_per_s, options.latency_seconds
            ),
            figures: vec![p50, p99, missed],
            notes: Vec::new(),
        },
    );
    Ok(())
}

/// Memory with K = 1 controller, and shared watches with K = 1 and 4.
async fn memory(
    bench: &Bench,
    options: &Options,
    sections: &mut BTreeMap<&'static str, Section>,
    goals: &mut Vec<Goal>,
) -> Result<(), String> {
    let mut memory = Section {
        title: "memory".into(),
        method: format!(
            "one context (cluster-0, namespace bench-mem, {} ConfigMaps of ~0.6 KB); RSS (/proc/self/status VmRSS) \
             and live heap bytes (a counting global allocator) read in the child before the controller starts \
             and again once every object was reconciled plus 1 s; each side in its own process.",
            options.memory_objects
        ),
        ..Section::default()
    };
    let mut shared = Section {
        title: "shared watches".into(),
        method: "K controllers on the same (context, kind, namespace) as in memory. Baseline: K kube-runtime \
                 Controllers (each opens its own watch and cache). kubeplex: K controllers in one Manager."
            .into(),
        ..Section::default()
    };
    let mut heap_by_k = Vec::new();
    for &k in &options.shared_controllers {
        progress(&format!("memory: {k} controller(s)"));
        let mut spec = bench.spec(Side::Baseline, &contexts(1, 1), "bench-mem");
        spec.controllers = k;
        spec.expect = options.memory_objects * k;
        spec.settle_ms = 1000;
        let runs = bench.pairs(&spec).await?;
        let n = options.memory_objects as f64;
        let rss = figure(format!("RSS delta, K={k}"), "MB", &runs, |o| {
            (o.rss_after as f64 - o.rss_before as f64) / MB
        });
        let heap = figure(format!("heap delta, K={k}"), "MB", &runs, |o| {
            (o.heap_after as f64 - o.heap_before as f64) / MB
        });
        let per_object = figure(format!("heap per cached object, K={k}"), "B", &runs, |o| {
            (o.heap_after as f64 - o.heap_before as f64) / n
        });
        let watches = figure(format!("watches opened, K={k}"), "count", &runs, |o| {
            o.watches_opened as f64
        });
        let synced = figure(format!("time to synced, K={k}"), "s", &runs, |o| o.synced_s);
        heap_by_k.push((
            k,
            heap.baseline.median,
            heap.kubeplex.median,
            watches.kubeplex.median,
        ));
        if k == 1 {
            goals.push(Goal {
                section: "memory",
                goal: "kubeplex RSS and heap per cached object <= 1.0x baseline".into(),
                measured: format!(
                    "RSS {:.2}x, heap/object {:.2}x",
                    rss.ratio, per_object.ratio
                ),
                met: rss.ratio <= 1.0 && per_object.ratio <= 1.0,
            });
            memory.figures.extend([
                rss.clone(),
                heap.clone(),
                per_object.clone(),
                synced.clone(),
            ]);
        }
        shared.figures.extend([watches, rss, heap, per_object]);
    }
    if let (Some(one), Some(many)) = (heap_by_k.first(), heap_by_k.last())
        && many.0 > one.0
    {
        let (b, k) = (many.1 / one.1, many.2 / one.2);
        shared.notes.push(format!(
            "heap K={}/K={}: baseline {b:.2}, kubeplex {k:.2}",
            many.0, one.0
        ));
        goals.push(Goal {
            section: "shared_watches",
            goal: format!(
                "kubeplex K={} opens 1 watch and heap ~= K={} (<= 1.2x)",
                many.0, one.0
            ),
            measured: format!("{} watch(es), heap {k:.2}x", many.3),
            met: many.3 == 1.0 && k <= 1.2,
        });
    }
    sections.insert("memory", memory);
    sections.insert("shared_watches", shared);
    Ok(())
}

/// A full resync across the 3 clusters at several concurrencies.
async fn throughput(
    bench: &Bench,
    options: &Options,
    sections: &mut BTreeMap<&'static str, Section>,
    _goals: &mut Vec<Goal>,
) -> Result<(), String> {
    let mut section = Section {
        title: "reconcile throughput".into(),
        method: format!(
            "{} ConfigMaps across the 3 clusters (namespace bench-tp); each reconcile GETs its object from the API \
             server. Rate = objects / (last first-reconcile done - first reconcile start). Concurrency n is the total: \
             kubeplex Plan::concurrency(n); baseline one Controller per cluster with concurrency n and a shared \
             semaphore of n permits around the reconcile body.",
            options.throughput_objects
        ),
        ..Section::default()
    };
    for &n in &options.throughput_concurrency {
        progress(&format!("throughput: concurrency {n}"));
        let mut spec = bench.spec(Side::Baseline, &contexts(3, 3), "bench-tp");
        spec.concurrency = Some(n);
        spec.get_per_reconcile = true;
        spec.expect = options.throughput_objects;
        spec.distinct = true;
        let runs = bench.pairs(&spec).await?;
        let objects = options.throughput_objects as f64;
        section.figures.push(figure(
            format!("reconciles per second, concurrency {n}"),
            "1/s",
            &runs,
            |o| objects / (o.done_s.unwrap_or(f64::NAN) - o.first_reconcile_s.unwrap_or(f64::NAN)),
        ));
        section.figures.push(figure(
            format!("time to all reconciled, concurrency {n}"),
            "s",
            &runs,
            |o| o.done_s.unwrap_or(f64::NAN),
        ));
    }
    sections.insert("throughput", section);
    Ok(())
}

fn write_json(path: &Path, report: &Report) -> Result<(), String> {
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    std::fs::write(path, json).map_err(|e| format!("writing {}: {e}", path.display()))
}

fn num(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn print_table(report: &Report) {
    let m = &report.machine;
    println!(
        "kubeplex-bench {}  {} cores, {:.0} GiB, {}, Linux {}, {}",
        report.date,
        m.cores,
        m.memory_bytes as f64 / (1024.0 * MB),
        m.cpu_model,
        m.kernel,
        m.rustc
    );
    println!(
        "repeats {} (min/median/max), ratio = kubeplex median / baseline median{}",
        report.options.repeats,
        if report.options.quick {
            ", --quick sizes"
        } else {
            ""
        }
    );
    // In the order the sections run (the map is sorted by name).
    let order = SECTIONS
        .iter()
        .flat_map(|s| match *s {
            "memory" => vec!["memory", "shared_watches"],
            other => vec![other],
        })
        .filter_map(|key| report.sections.get(key).map(|section| (key, section)));
    for (key, section) in order {
        println!("\n## {} ({key})", section.title);
        println!(
            "{:<42} {:>5}  {:>22}  {:>22}  {:>6}",
            "figure", "unit", "baseline min/med/max", "kubeplex min/med/max", "ratio"
        );
        for f in &section.figures {
            let spread = |s: &crate::stats::Spread| {
                format!("{}/{}/{}", num(s.min), num(s.median), num(s.max))
            };
            println!(
                "{:<42} {:>5}  {:>22}  {:>22}  {:>6}",
                f.name,
                f.unit,
                spread(&f.baseline),
                spread(&f.kubeplex),
                num(f.ratio)
            );
        }
        for note in &section.notes {
            println!("  {note}");
        }
    }
    println!("\n## goals");
    for goal in &report.goals {
        println!(
            "[{}] {}: {} — measured {}",
            if goal.met { "met" } else { "MISSED" },
            goal.section,
            goal.goal,
            goal.measured
        );
    }
    println!("\ntotal {:.0} s", report.total_seconds);
}
