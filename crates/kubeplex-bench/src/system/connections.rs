//! The TCP connections this process holds to each server, told apart by the server's port (each API server
//! of the bench listens on one of its own): its sockets' inodes from `/proc/self/fd`, the established
//! connections from `/proc/self/net/tcp` and `tcp6`. A sampler keeps the most seen at once.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// How often the sampler looks: reading the tables costs about a millisecond, counted in the process's CPU
/// on either side alike.
const EVERY: Duration = Duration::from_millis(200);

static PEAK: AtomicU32 = AtomicU32::new(0);

/// The most connections to one server now.
pub(crate) fn connections_per_server() -> u32 {
    by_port().into_values().max().unwrap_or(0)
}

/// The most connections to one server seen at once since [`sample_connections`] started.
pub(crate) fn peak_connections_per_server() -> u32 {
    PEAK.load(Ordering::Relaxed).max(connections_per_server())
}

/// Starts the sampler behind [`peak_connections_per_server`], for the rest of the process.
pub(crate) fn sample_connections() {
    std::thread::spawn(|| {
        loop {
            PEAK.fetch_max(connections_per_server(), Ordering::Relaxed);
            std::thread::sleep(EVERY);
        }
    });
}

/// This process's established connections, by the remote port.
fn by_port() -> BTreeMap<u16, u32> {
    let inodes = socket_inodes();
    let mut by_port = BTreeMap::new();
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for (port, inode) in text.lines().skip(1).filter_map(established) {
            if inodes.contains(&inode) {
                *by_port.entry(port).or_default() += 1;
            }
        }
    }
    by_port
}

/// The inodes of this process's sockets.
fn socket_inodes() -> HashSet<u64> {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return HashSet::new();
    };
    (entries.filter_map(Result::ok))
        .filter_map(|entry| {
            let link = std::fs::read_link(entry.path()).ok()?;
            let inode = link.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?;
            inode.parse().ok()
        })
        .collect()
}

/// The remote port and the inode of a line of `/proc/net/tcp` that is an established connection
/// (`sl local rem st queues timer retransmits uid timeout inode ...`, `st` 01).
fn established(line: &str) -> Option<(u16, u64)> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if *fields.get(3)? != "01" {
        return None;
    }
    let (_, port) = fields.get(2)?.rsplit_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    Some((port, fields.get(9)?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_established_line_gives_its_remote_port_and_inode_and_others_nothing() {
        let line = "   3: 0100007F:A2C4 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 123456 1 0000000000000000 20 4 30 10 -1";
        assert_eq!(established(line), Some((0x1F90, 123_456)));
        let listening = "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 654321 1 0000000000000000 100 0 0 10 0";
        assert_eq!(established(listening), None);
        assert_eq!(established("garbage"), None);
    }

    #[test]
    fn a_connection_of_this_process_is_counted_under_its_servers_port() {
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        let before = by_port().get(&port).copied().unwrap_or(0);
        let _one = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _two = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        assert_eq!(by_port().get(&port).copied().unwrap_or(0), before + 2);
    }
}
