//! Validating and mutating admission: the handler traits, their paths, and how each turns a request for
//! any object into a typed one and its answer into an [`Outcome`].

use std::sync::Arc;

use kube::Resource;
use kube::core::DynamicObject;
use kube::core::admission::AdmissionRequest;

use super::fleet_view::FleetView;
use super::merge::three_way;
use super::outcome::Outcome;
use super::route::Route;
use crate::core::{Context, PrimaryResource};
use crate::runtime::Runtime;

/// A validating admission handler for one kind: it sees the request (the object, the old object, the
/// operation, the user) and the fleet, and admits (`Ok`) or refuses with a message the API server's
/// client shows (`Err`). Called for every operation the webhook configuration names; on `DELETE` the
/// object is in `old_object`.
pub trait Validate: Send + Sync + 'static {
    /// The fleet the view names clusters by (a `contexts!` enum, or [`ContextName`](crate::ContextName)).
    type Context: Context;
    /// The kind validated.
    type Kind: PrimaryResource;

    /// Admits or refuses `request`.
    fn validate(
        &self,
        request: &AdmissionRequest<Self::Kind>,
        fleet: &FleetView<Self::Context>,
    ) -> impl Future<Output = Result<(), String>> + Send;
}

/// A mutating admission handler for one kind: it changes `object` (a copy of the request's) in place, and
/// the changes become the answer's JSON patch; `Err` refuses the object with a message. Called on `CREATE`
/// and `UPDATE` (the operations with an object to change).
pub trait Mutate: Send + Sync + 'static {
    /// The fleet the view names clusters by.
    type Context: Context;
    /// The kind mutated.
    type Kind: PrimaryResource;

    /// Changes `object`, the object of `request`.
    fn mutate(
        &self,
        object: &mut Self::Kind,
        request: &AdmissionRequest<Self::Kind>,
        fleet: &FleetView<Self::Context>,
    ) -> impl Future<Output = Result<(), String>> + Send;
}

/// Where objects of `K` are validated: `/validate-<group>-<version>-<kind>`, as controller-runtime names
/// it (the group's dots as dashes, the kind in lower case; the core group is empty).
pub fn validating_path<K: Resource<DynamicType = ()>>() -> String {
    path::<K>("validate")
}

/// Where objects of `K` are mutated: `/mutate-<group>-<version>-<kind>`.
pub fn mutating_path<K: Resource<DynamicType = ()>>() -> String {
    path::<K>("mutate")
}

fn path<K: Resource<DynamicType = ()>>(verb: &str) -> String {
    let group = K::group(&()).replace('.', "-");
    let kind = K::kind(&()).to_lowercase();
    format!("/{verb}-{group}-{}-{kind}", K::version(&()))
}

/// The request with its objects as `K`, or why they are not one.
fn typed<K: PrimaryResource>(
    request: &AdmissionRequest<DynamicObject>,
) -> Result<AdmissionRequest<K>, String> {
    let object = |object: &Option<DynamicObject>| -> Result<Option<K>, String> {
        let Some(object) = object else {
            return Ok(None);
        };
        let value = serde_json::to_value(object).map_err(|e| e.to_string())?;
        // serde_json names the field and the type expected, never the value.
        serde_json::from_value(value)
            .map(Some)
            .map_err(|e| format!("the object is not a {}: {e}", K::kind(&())))
    };
    Ok(AdmissionRequest {
        types: request.types.clone(),
        uid: request.uid.clone(),
        kind: request.kind.clone(),
        resource: request.resource.clone(),
        sub_resource: request.sub_resource.clone(),
        request_kind: request.request_kind.clone(),
        request_resource: request.request_resource.clone(),
        request_sub_resource: request.request_sub_resource.clone(),
        name: request.name.clone(),
        namespace: request.namespace.clone(),
        operation: request.operation.clone(),
        user_info: request.user_info.clone(),
        object: object(&request.object)?,
        old_object: object(&request.old_object)?,
        dry_run: request.dry_run,
        options: request.options.clone(),
    })
}

pub(super) fn validating_route<V: Validate>(validator: Arc<V>) -> Route {
    let path = validating_path::<V::Kind>();
    Route::new(path, move |request, runtime: Arc<Runtime>| {
        let validator = validator.clone();
        Box::pin(async move {
            let request = match typed::<V::Kind>(&request) {
                Ok(request) => request,
                Err(reason) => return Outcome::Invalid(reason),
            };
            let fleet = FleetView::new(runtime);
            match validator.validate(&request, &fleet).await {
                Ok(()) => Outcome::Allowed(None),
                Err(message) => Outcome::Denied(message),
            }
        })
    })
}

pub(super) fn mutating_route<M: Mutate>(mutator: Arc<M>) -> Route {
    let path = mutating_path::<M::Kind>();
    Route::new(path, move |request, runtime: Arc<Runtime>| {
        let mutator = mutator.clone();
        Box::pin(async move {
            let Some(original) = request.object.as_ref() else {
                return Outcome::Allowed(None);
            };
            let original = match serde_json::to_value(original) {
                Ok(original) => original,
                Err(error) => return Outcome::Invalid(error.to_string()),
            };
            let typed = match typed::<M::Kind>(&request) {
                Ok(typed) => typed,
                Err(reason) => return Outcome::Invalid(reason),
            };
            let Some(mut object) = typed.object.clone() else {
                return Outcome::Allowed(None);
            };
            let fleet = FleetView::new(runtime);
            if let Err(message) = mutator.mutate(&mut object, &typed, &fleet).await {
                return Outcome::Denied(message);
            }
            // The handler's changes, from its own type's view (what it did not touch compares equal),
            // laid over the object as the API server sent it (fields the type does not know are kept).
            let before = serde_json::to_value(typed.object.as_ref());
            let after = serde_json::to_value(&object);
            let (Ok(before), Ok(after)) = (before, after) else {
                return Outcome::Invalid("the mutated object cannot be written as JSON".into());
            };
            let mut target = original.clone();
            three_way(&mut target, &before, &after);
            let patch = json_patch::diff(&original, &target);
            Outcome::Allowed((!patch.0.is_empty()).then_some(patch))
        })
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    #[test]
    fn paths_are_controller_runtime_s() {
        assert_eq!(
            validating_path::<Deployment>(),
            "/validate-apps-v1-deployment"
        );
        assert_eq!(mutating_path::<ConfigMap>(), "/mutate--v1-configmap");
    }
}
