//! CPU time, so that a wall-clock figure can be told apart from the work behind it: the operator's own CPU
//! (user + system) and that of the API servers and etcds it talks to.

/// CPU seconds (user + system) this process has used so far, at microsecond resolution.
pub(crate) fn own_seconds() -> f64 {
    // SAFETY: `getrusage` writes into the zeroed struct we own and reads nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return f64::NAN;
        }
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// CPU seconds (user + system, every thread) the processes `pids` have used so far, from `/proc/PID/stat`
/// (clock-tick resolution, 10 ms on Linux). A process that is gone counts as zero.
pub(crate) fn processes_seconds(pids: &[u32]) -> f64 {
    // SAFETY: `sysconf` only reads a constant of the system.
    let ticks_per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .filter_map(|stat| {
            // The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
            let rest = &stat[stat.rfind(')')? + 2..];
            let fields: Vec<&str> = rest.split(' ').collect();
            // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
            let utime: u64 = fields.get(11)?.parse().ok()?;
            let stime: u64 = fields.get(12)?.parse().ok()?;
            Some((utime + stime) as f64 / ticks_per_second)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Spins until this process has used `cpu` more CPU seconds (getrusage), or `limit` of wall time
    /// passed; returns the CPU seconds used. Bounded by CPU, not wall time, so a loaded machine (where 50 ms
    /// of wall time may be 5 ms of CPU) only makes it take longer.
    fn spin_for_cpu(cpu: f64, limit: Duration) -> f64 {
        let before = own_seconds();
        let start = Instant::now();
        let mut x = 0u64;
        while own_seconds() - before < cpu && start.elapsed() < limit {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        }
        own_seconds() - before
    }

    #[test]
    fn own_cpu_time_grows_with_work() {
        let used = spin_for_cpu(0.05, Duration::from_secs(60));
        assert!(used >= 0.05, "a minute of spinning showed {used} s of CPU");
    }

    #[test]
    fn reads_the_cpu_time_of_this_process_from_proc() {
        let before = processes_seconds(&[std::process::id()]);
        let used = spin_for_cpu(0.1, Duration::from_secs(60));
        let read = processes_seconds(&[std::process::id()]) - before;
        // /proc counts in clock ticks (10 ms); other test threads only add to it.
        assert!(
            read >= used - 0.03,
            "getrusage says {used} s were used, /proc shows {read} s"
        );
        assert_eq!(
            processes_seconds(&[u32::MAX]),
            0.0,
            "a missing process counts as zero"
        );
    }
}
