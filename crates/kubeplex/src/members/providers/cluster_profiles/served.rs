//! Which ClusterProfile version the control cluster serves: one discovery request for the API group.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroup;
use kube::Client;

use super::profile::{GROUP, Version};
use crate::core::chain;

/// The newest ClusterProfile version `client`'s API server serves that kubeplex reads, or why there is none.
pub(super) async fn served_version(client: &Client) -> Result<Version, String> {
    let request = http::Request::get(format!("/apis/{GROUP}"))
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    match client.request::<APIGroup>(request).await {
        Ok(group) => {
            let served = group.versions.iter().map(|v| v.version.as_str());
            Version::newest_of(served).ok_or_else(|| {
                let served = shown(group.versions.iter().map(|v| v.version.as_str()));
                format!("the API server serves {GROUP} in {served}, neither v1alpha2 nor v1alpha1")
            })
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Err(format!(
            "the API server does not serve the API group {GROUP}: is the ClusterProfile CRD installed?"
        )),
        Err(error) => Err(format!("discovering {GROUP}: {}", chain(&error))),
    }
}

/// How many of the served versions an error names.
const SHOWN_VERSIONS: usize = 8;

/// The served versions as an error names them: the server's words are untrusted, so only what looks like a
/// version (1–32 ASCII letters and digits) is quoted, and at most a few.
fn shown<'a>(versions: impl Iterator<Item = &'a str>) -> String {
    let looks_like_a_version =
        |v: &str| (1..=32).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_alphanumeric());
    let versions: Vec<&str> = versions.collect();
    let mut shown: Vec<&str> = versions
        .iter()
        .take(SHOWN_VERSIONS)
        .map(|v| {
            if looks_like_a_version(v) {
                v
            } else {
                "(unreadable)"
            }
        })
        .collect();
    if versions.len() > SHOWN_VERSIONS {
        shown.push("…");
    }
    if shown.is_empty() {
        return "no version".into();
    }
    shown.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_looks_like_a_version_is_quoted_from_the_server() {
        assert_eq!(shown(["v1beta1", "v2"].into_iter()), "v1beta1, v2");
        let hostile = ["v1\n\u{1b}[31mlevel=error", "token: abc", &"v".repeat(33)];
        assert_eq!(
            shown(hostile.into_iter()),
            "(unreadable), (unreadable), (unreadable)"
        );
        let many: Vec<String> = (0..20).map(|i| format!("v{i}")).collect();
        let many = shown(many.iter().map(String::as_str));
        assert!(
            many.starts_with("v0, v1,") && many.ends_with("v7, …"),
            "{many}"
        );
        assert_eq!(shown(std::iter::empty()), "no version");
    }

    #[test]
    fn the_newest_version_read_is_chosen() {
        let newest = |served: &[&str]| Version::newest_of(served.iter().copied());
        assert_eq!(newest(&["v1alpha1"]), Some(Version::V1alpha1));
        assert_eq!(newest(&["v1alpha1", "v1alpha2"]), Some(Version::V1alpha2));
        assert_eq!(newest(&["v1alpha2", "v1alpha1"]), Some(Version::V1alpha2));
        assert_eq!(newest(&["v1beta1", "v1alpha1"]), Some(Version::V1alpha1));
        assert_eq!(newest(&["v1beta1"]), None);
    }
}
