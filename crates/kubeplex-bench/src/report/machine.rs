//! What machine the figures come from.

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub(crate) struct Machine {
    pub cores: usize,
    pub memory_bytes: u64,
    pub cpu_model: String,
    pub kernel: String,
    pub rustc: String,
    pub kubernetes: &'static str,
    pub etcd: &'static str,
}

impl Machine {
    pub fn describe() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map_or_else(|| "unknown".to_owned(), |(_, v)| v.trim().to_owned());
        let memory_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
            .map_or(0, |kb| kb * 1024);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "unknown".to_owned(), |k| k.trim().to_owned());
        let rustc =
            std::process::Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
                .arg("--version")
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map_or_else(
                    || "unknown".to_owned(),
                    |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
                );
        Self {
            cores: std::thread::available_parallelism().map_or(0, usize::from),
            memory_bytes,
            cpu_model,
            kernel,
            rustc,
            kubernetes: kubeplex_testenv::Binaries::kubernetes_version(),
            etcd: kubeplex_testenv::Binaries::etcd_version(),
        }
    }
}
