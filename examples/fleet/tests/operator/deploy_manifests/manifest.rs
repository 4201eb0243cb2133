//! The manifests of `deploy/<set>/`: one YAML document each, loaded from the files, and found by kind and name.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kube::api::GroupVersionKind;
use serde_json::Value;

/// One YAML document of a manifest file.
#[derive(Clone, Debug)]
pub(crate) struct Manifest {
    /// `file.yaml#index`, for messages.
    pub(crate) origin: String,
    pub(crate) value: Value,
}

impl Manifest {
    pub(crate) fn str_at(&self, pointer: &str) -> Option<&str> {
        self.value.pointer(pointer).and_then(Value::as_str)
    }

    pub(crate) fn api_version(&self) -> &str {
        self.str_at("/apiVersion")
            .unwrap_or_else(|| panic!("{}: no apiVersion", self.origin))
    }

    pub(crate) fn kind(&self) -> &str {
        self.str_at("/kind")
            .unwrap_or_else(|| panic!("{}: no kind", self.origin))
    }

    pub(crate) fn name(&self) -> &str {
        self.str_at("/metadata/name")
            .unwrap_or_else(|| panic!("{}: no metadata.name", self.origin))
    }

    pub(crate) fn namespace(&self) -> Option<&str> {
        self.str_at("/metadata/namespace")
    }

    pub(crate) fn gvk(&self) -> GroupVersionKind {
        let (group, version) = match self.api_version().split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", self.api_version()),
        };
        GroupVersionKind::gvk(group, version, self.kind())
    }

    pub(crate) fn describe(&self) -> String {
        match self.namespace() {
            Some(ns) => format!("{} {ns}/{} ({})", self.kind(), self.name(), self.origin),
            None => format!("{} {} ({})", self.kind(), self.name(), self.origin),
        }
    }
}

fn deploy_dir(set: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(set)
}

/// Every document of every `*.yaml`/`*.yml` file of `deploy/<set>/`, in file-name order.
pub(crate) fn load(set: &str) -> Vec<Manifest> {
    let dir = deploy_dir(set);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|ext| ext == "yaml" || ext == "yml")
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no manifests in {}", dir.display());

    let mut manifests = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let file_name = format!("{set}/{}", file.file_name().unwrap().to_string_lossy());
        let documents: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{file_name} is not valid YAML: {e}"));
        assert!(!documents.is_empty(), "{file_name} has no document");
        for (index, value) in documents.into_iter().enumerate() {
            let manifest = Manifest {
                origin: format!("{file_name}#{index}"),
                value,
            };
            // Panics with the origin if one of these is missing.
            let _ = (manifest.api_version(), manifest.kind(), manifest.name());
            manifests.push(manifest);
        }
    }
    manifests
}

pub(crate) fn of_kind<'a>(manifests: &'a [Manifest], kind: &str) -> Vec<&'a Manifest> {
    manifests.iter().filter(|m| m.kind() == kind).collect()
}

pub(crate) fn one<'a>(
    manifests: &'a [Manifest],
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> &'a Manifest {
    let found: Vec<_> = of_kind(manifests, kind)
        .into_iter()
        .filter(|m| m.namespace() == namespace && m.name() == name)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected exactly one {kind} {namespace:?}/{name}, found {}",
        found.len()
    );
    found[0]
}

pub(crate) fn assert_kinds_present(manifests: &[Manifest], kinds: &[&str]) {
    let present: BTreeSet<_> = manifests.iter().map(Manifest::kind).collect();
    for kind in kinds {
        assert!(
            present.contains(kind),
            "missing a {kind}; kinds present: {present:?}"
        );
    }
}

/// The port a probe's `httpGet.port` names (a number, or the name of a container port).
pub(crate) fn probe_port(container: &Value, probe: &str) -> i64 {
    let port = &container[probe]["httpGet"]["port"];
    if let Some(number) = port.as_i64() {
        return number;
    }
    let name = port
        .as_str()
        .unwrap_or_else(|| panic!("{probe}: no httpGet.port"));
    container["ports"]
        .as_array()
        .and_then(|ports| ports.iter().find(|p| p["name"] == name))
        .and_then(|p| p["containerPort"].as_i64())
        .unwrap_or_else(|| panic!("{probe}: port {name:?} is not a container port"))
}
