//! The parent: starts the clusters, creates the objects, runs each section (each measurement in alternating
//! child processes), and prints the table and the JSON.

use std::collections::BTreeMap;
use std::time::Instant;

use kubeplex_testenv::TestEnv;

use super::seed::seed;
use crate::config::Options;
use crate::controller::{latency, memory, throughput};
use crate::harness::{Bench, CLUSTERS, progress};
use crate::report::{Machine, Report, print_table, write_json};
use crate::startup::{startup_over, startup_remote};

pub(crate) async fn run(options: Options) -> Result<(), String> {
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
    let host = crate::fleet::Host {
        env: &env,
        kubeconfig: bench.kubeconfig.clone(),
        exe: bench.exe.clone(),
        wrapper: bench.wrapper.clone(),
        server_pids: bench.server_pids.clone(),
        repeats: bench.repeats,
    };
    let mut sections = BTreeMap::new();
    let mut goals = Vec::new();
    // The member sections' fourth cluster, started for the first of them (it idles through no other section).
    let mut member = None;

    for section in &options.sections {
        match section.as_str() {
            "startup" => startup_over(&bench, &options, None, &mut sections, &mut goals).await?,
            "startup_remote" => startup_remote(&bench, &options, &mut sections, &mut goals).await?,
            "latency" => latency(&bench, &options, &mut sections, &mut goals).await?,
            "memory" => memory(&bench, &options, &mut sections, &mut goals).await?,
            "many_contexts" => {
                crate::controller::many_contexts(&bench, &options, &mut sections, &mut goals)
                    .await?;
            }
            "child_cache" => {
                crate::child_cache::run(&bench, &options.child_cache, &mut sections, &mut goals)
                    .await?;
            }
            "throughput" => throughput(&bench, &options, &mut sections, &mut goals).await?,
            "fairness" => {
                crate::fairness::run(&bench, &options.fairness, &mut sections, &mut goals).await?;
            }
            "fleet" => {
                let (section, fleet_goals) = crate::fleet::run(&host, &options.fleet).await?;
                sections.insert("fleet", section);
                goals.extend(fleet_goals);
            }
            "failover" => {
                let (section, goal) = crate::fleet::failover(&host, &options.failover).await?;
                sections.insert("failover", section);
                goals.push(goal);
            }
            "detection" => {
                let (section, goal) = crate::fleet::detection(&host, &options.detection).await?;
                sections.insert("detection", section);
                goals.push(goal);
            }
            "member_join" | "member_churn" => {
                let cluster = match member.take() {
                    Some(cluster) => cluster,
                    None => crate::member::MemberCluster::start(&host).await?,
                };
                let (section_name, (section, goal)) = if section == "member_join" {
                    let run = crate::member::join(&host, &cluster, &options.members).await?;
                    ("member_join", run)
                } else {
                    let run = crate::member::churn(&host, &cluster, &options.members).await?;
                    ("member_churn", run)
                };
                sections.insert(section_name, section);
                goals.push(goal);
                member = Some(cluster);
            }
            "many_members" => {
                let (section, many_goals) = crate::member::many(&host, &options.members).await?;
                sections.insert("many_members", section);
                goals.extend(many_goals);
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
    drop(member);
    drop(env);
    Ok(())
}
