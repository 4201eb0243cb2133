//! The environment itself, on real clusters, in one binary: each file a concern, run side by side — a shared
//! environment read and written through every context (`clusters`), attached to from another environment and
//! another process (`attach`), controller managers (`controller_manager`),
//! faults and cleanup on private environments (`faults`), repeated starts while other programs take ports
//! (`starts`), and the test deadline (`deadline`).

mod attach;
mod clusters;
mod controller_manager;
mod deadline;
mod faults;
mod starts;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;

/// An empty ConfigMap called `name`.
pub fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}
