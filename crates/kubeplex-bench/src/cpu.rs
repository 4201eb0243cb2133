//! CPU time, so that a wall-clock figure can be told apart from the work behind it: the operator's own CPU
//! (user + system) and that of the API servers and etcds it talks to.

/// CPU seconds (user + system) this process has used so far, at microsecond resolution.
pub fn own_seconds() -> f64 {
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
pub fn processes_seconds(pids: &[u32]) -> f64 {
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

    #[test]
    fn own_cpu_time_grows_with_work() {
        let before = own_seconds();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        assert!(
            own_seconds() - before >= 0.03,
            "50 ms of spinning used under 30 ms of CPU"
        );
    }

    #[test]
    fn reads_the_cpu_time_of_this_process_from_proc() {
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let seconds = processes_seconds(&[std::process::id()]);
        assert!(seconds >= 0.03, "read {seconds} s");
        assert_eq!(
            processes_seconds(&[u32::MAX]),
            0.0,
            "a missing process counts as zero"
        );
    }
}
