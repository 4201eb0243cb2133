//! Loopback ports that stay ours from the moment they are chosen until their cluster (or relay) is gone.
//!
//! Choosing a free port by binding port 0 and closing the socket leaves a window, until the program binds
//! it, in which anyone can take it: another test environment or any server started on port 0 (and outgoing
//! connections, once the even ports Linux prefers for them run out). Then etcd or kube-apiserver fails
//! with `bind: address already in use`. Instead we keep a socket bound to the port with `SO_REUSEPORT` but never listening on
//! it. While it is bound, the kernel hands the port to no ephemeral bind and no outgoing connection, and a
//! bind without `SO_REUSEPORT` fails; etcd (`--socket-reuse-port`) and kube-apiserver
//! (`--permit-port-sharing`) bind it with `SO_REUSEPORT` as the same user, which Linux allows. Connections
//! only ever reach listening sockets, so the placeholder takes none of them. The reservation also covers
//! the time a stopped API server is down, so it restarts on its port.

use std::io;
use std::mem;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A loopback port reserved until this is dropped.
#[derive(Debug)]
pub(crate) struct ReservedPort {
    _socket: OwnedFd,
    port: u16,
}

impl ReservedPort {
    /// Reserves a free port on 127.0.0.1 chosen by the kernel.
    pub(crate) fn new() -> io::Result<Self> {
        let socket = port_sharing_socket()?;
        bind(&socket, 0)?;
        let mut address = loopback(0);
        let mut length = size_of_val(&address) as libc::socklen_t;
        // SAFETY: getsockname(2) writes at most `length` bytes into a sockaddr_in.
        let read = unsafe {
            libc::getsockname(
                socket.as_raw_fd(),
                (&raw mut address).cast(),
                &raw mut length,
            )
        };
        if read != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            _socket: socket,
            port: u16::from_be(address.sin_port),
        })
    }

    /// The port number.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }
}

/// A TCP socket with SO_REUSEPORT set, not yet bound.
fn port_sharing_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; the descriptor is owned right below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    // SAFETY: setsockopt(2) reads an int from a pointer valid for its size.
    let set = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEPORT,
            (&raw const one).cast(),
            size_of_val(&one) as libc::socklen_t,
        )
    };
    if set != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(socket)
}

/// Binds `socket` to 127.0.0.1:`port` (0: a free port of the kernel's choice).
fn bind(socket: &OwnedFd, port: u16) -> io::Result<()> {
    let address = loopback(port);
    // SAFETY: bind(2) on our socket with a sockaddr_in and its true length.
    let bound = unsafe {
        libc::bind(
            socket.as_raw_fd(),
            (&raw const address).cast(),
            size_of_val(&address) as libc::socklen_t,
        )
    };
    if bound != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn loopback(port: u16) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is plain data; all zeroes is a valid value.
    let mut address: libc::sockaddr_in = unsafe { mem::zeroed() };
    address.sin_family = libc::AF_INET as libc::sa_family_t;
    address.sin_port = port.to_be();
    address.sin_addr.s_addr = u32::from(Ipv4Addr::LOCALHOST).to_be();
    address
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::Duration;

    use super::*;

    /// The next connection of `listener`, waiting at most `limit`.
    fn accept_within(listener: &TcpListener, limit: Duration) -> Option<TcpStream> {
        listener.set_nonblocking(true).unwrap();
        let deadline = std::time::Instant::now() + limit;
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(false).unwrap();
                    return Some(stream);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if std::time::Instant::now() > deadline {
                        return None;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("accept: {e}"),
            }
        }
    }

    /// A listener bound as etcd and kube-apiserver bind theirs: with SO_REUSEPORT.
    fn listen_sharing(port: u16) -> io::Result<TcpListener> {
        let socket = port_sharing_socket()?;
        bind(&socket, port)?;
        // SAFETY: listen(2) on our own bound socket.
        if unsafe { libc::listen(socket.as_raw_fd(), 16) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(TcpListener::from(socket))
    }

    #[test]
    fn a_reserved_port_cannot_be_taken_by_a_plain_bind() {
        let reserved = ReservedPort::new().unwrap();
        let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, reserved.port()));
        assert_eq!(
            taken.map(|_| ()).unwrap_err().kind(),
            io::ErrorKind::AddrInUse
        );
        let port = reserved.port();
        drop(reserved);
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("free again once released");
    }

    #[test]
    fn a_sharing_listener_gets_every_connection_and_can_come_back() {
        let reserved = ReservedPort::new().unwrap();
        let port = reserved.port();
        // Nobody listens yet: the placeholder takes no connection.
        assert_eq!(
            TcpStream::connect((Ipv4Addr::LOCALHOST, port))
                .unwrap_err()
                .kind(),
            io::ErrorKind::ConnectionRefused
        );
        // A server started, stopped and started again, as `TestEnv::stop` and `start` do.
        for round in 0..2 {
            let listener = listen_sharing(port).unwrap();
            for connection in 0..10 {
                let mut client = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
                // Bounded: a connection that reached another socket must fail the test, not hang it.
                let mut served =
                    accept_within(&listener, Duration::from_secs(20)).unwrap_or_else(|| {
                        panic!(
                            "round {round}, connection {connection}: the listener got no connection"
                        )
                    });
                served.write_all(b"ok").unwrap();
                let mut answer = [0; 2];
                client
                    .set_read_timeout(Some(Duration::from_secs(20)))
                    .unwrap();
                client.read_exact(&mut answer).unwrap();
                assert_eq!(&answer, b"ok");
            }
        }
    }

    #[test]
    fn reserved_ports_are_distinct() {
        let ports: Vec<ReservedPort> = (0..50).map(|_| ReservedPort::new().unwrap()).collect();
        let mut numbers: Vec<u16> = ports.iter().map(ReservedPort::port).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), ports.len());
    }
}
