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
                let served: Vec<&str> = group.versions.iter().map(|v| v.version.as_str()).collect();
                format!(
                    "the API server serves {GROUP} in {}, neither v1alpha2 nor v1alpha1",
                    served.join(", ")
                )
            })
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Err(format!(
            "the API server does not serve the API group {GROUP}: is the ClusterProfile CRD installed?"
        )),
        Err(error) => Err(format!("discovering {GROUP}: {}", chain(&error))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
