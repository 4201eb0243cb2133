//! The member name of a ClusterProfile: a DNS-1123 label (what kubeplex's labels, metrics and status keys
//! take), derived from the profile's namespace and name alone, so a restart gives the same one.

/// The longest member name (a label value, a DNS label).
const MAX: usize = 63;
/// Hex digits of the hash a name carries when it is not the plain form.
const HASH_DIGITS: usize = 10;

/// The member name of ClusterProfile `namespace/name`:
///
/// - `<namespace>-<name>` when `name` is a DNS-1123 label and the two fit in 63 characters;
/// - otherwise `<namespace>-<name>` with every character a label cannot hold turned into `-`, cut to
///   leave room, then `-` and the first ten hex digits of the FNV-1a 64-bit hash of `<namespace>/<name>`.
///
/// The provider watches one namespace, so distinct profiles give distinct plain names, and a hashed name
/// differs from the others by its hash. Should two profiles still meet on one name, the provider keeps the
/// first and reports the other.
pub(super) fn member_name(namespace: &str, name: &str) -> String {
    let plain = format!("{namespace}-{name}");
    if kubeplex_names::dns_label(name).is_ok() && kubeplex_names::dns_label(&plain).is_ok() {
        return plain;
    }
    let hash = fnv1a(format!("{namespace}/{name}").as_bytes());
    let hash = format!("{hash:016x}");
    let mut prefix: String = plain
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .take(MAX - HASH_DIGITS - 1)
        .collect();
    while prefix.ends_with('-') {
        prefix.pop();
    }
    format!("{prefix}-{}", &hash[..HASH_DIGITS])
}

/// FNV-1a, 64 bits: a hash fixed by its definition, so names stay the same across builds and versions.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_profile_member_names_are_labels_stable_and_distinct() {
        assert_eq!(member_name("fleet", "cluster-c"), "fleet-cluster-c");
        // FNV-1a's published test vector: the hash is the algorithm's, not this build's.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        let dotted = member_name("fleet", "eu.cluster-1");
        assert!(dotted.starts_with("fleet-eu-cluster-1-"), "{dotted}");
        assert_ne!(dotted, member_name("fleet", "eu-cluster-1"));
        assert_ne!(dotted, member_name("fleet", "eu.cluster.1"));
        let long = "x".repeat(250);
        let named = member_name("fleet", &long);
        assert_eq!(named.len(), MAX);
        assert_ne!(named, member_name("fleet", &format!("{long}y")));
        for name in [dotted, named, member_name("ns", "Upper.Case")] {
            assert_eq!(kubeplex_names::dns_label(&name), Ok(()), "{name}");
        }
        assert_eq!(
            member_name("fleet", "eu.cluster-1"),
            member_name("fleet", "eu.cluster-1")
        );
    }
}
