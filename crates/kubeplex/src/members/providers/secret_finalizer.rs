//! The finalizer a member's kubeconfig Secret carries under `LeavePolicy::Delete`, so that its credentials
//! stay until the member's children are deleted.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};

/// The finalizer kubeplex keeps on a member's Secret under
/// [`LeavePolicy::Delete`](crate::members::LeavePolicy::Delete), so that its credentials stay until the member's
/// children are deleted.
pub const MEMBER_FINALIZER: &str = "kubeplex.io/member-cleanup";

/// How often a conflicting patch is made again from a fresh copy.
const ATTEMPTS: u32 = 3;

/// Whether `secret` carries [`MEMBER_FINALIZER`].
pub(super) fn has_finalizer(secret: &Secret) -> bool {
    secret.finalizers().iter().any(|f| f == MEMBER_FINALIZER)
}

/// Adds or removes [`MEMBER_FINALIZER`]. The patch carries the resourceVersion it was made from, so it
/// never clobbers another writer's finalizers; on a conflict it is made again from a fresh copy. A Secret
/// that is gone is done; no finalizer is added to one being deleted.
pub(super) async fn set_member_finalizer(
    api: &Api<Secret>,
    secret: &Secret,
    present: bool,
) -> kube::Result<()> {
    let (name, mut current, mut attempts) = (secret.name_any(), secret.clone(), 0);
    loop {
        let deleting = current.meta().deletion_timestamp.is_some();
        if has_finalizer(&current) == present || (present && deleting) {
            return Ok(());
        }
        let mut finalizers = current.finalizers().to_vec();
        finalizers.retain(|f| f != MEMBER_FINALIZER);
        finalizers.extend(present.then(|| MEMBER_FINALIZER.to_owned()));
        let version = current.resource_version();
        let patch = Patch::Merge(serde_json::json!({ "metadata": {
            "finalizers": finalizers, "resourceVersion": version } }));
        attempts += 1;
        match api.patch(&name, &PatchParams::default(), &patch).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 && attempts < ATTEMPTS => {
                match api.get_opt(&name).await? {
                    Some(fresh) => current = fresh,
                    None => return Ok(()),
                }
            }
            Err(error) => return Err(error),
        }
    }
}

/// Records on Secret `namespace/secret` that member `member`'s children were abandoned, and why: a Warning
/// Event (`MemberChildrenAbandoned`), as `kubectl describe secret` shows it.
pub(super) async fn abandoned_event(
    api: &Api<Secret>,
    namespace: &str,
    secret: &str,
    member: &str,
    reason: &str,
) -> kube::Result<()> {
    use k8s_openapi::api::events::v1::Event;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    let Some(found) = api.get_opt(secret).await? else {
        return Ok(());
    };
    let events: Api<Event> = Api::namespaced(api.clone().into_client(), namespace);
    let mut note = format!("member {member}: {reason}");
    note.truncate(1024);
    let event = Event {
        metadata: kube::api::ObjectMeta {
            generate_name: Some(format!("{secret}-")),
            namespace: Some(namespace.to_owned()),
            ..Default::default()
        },
        event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
        type_: Some("Warning".to_owned()),
        reason: Some("MemberChildrenAbandoned".to_owned()),
        action: Some("Leave".to_owned()),
        note: Some(note),
        reporting_controller: Some("kubeplex.io/members".to_owned()),
        reporting_instance: Some("kubeplex".to_owned()),
        regarding: Some(found.object_ref(&())),
        ..Default::default()
    };
    events.create(&Default::default(), &event).await?;
    Ok(())
}
