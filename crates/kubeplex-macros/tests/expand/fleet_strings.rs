// String contexts checked against a fleet at compile time: `type Context = Fleet`.
#[controller(
    crd = ConfigMap,
    fleet = crate::fleet::Fleet,
    contexts = ["control"],
    owns(Secret, contexts = ["cluster-a", "cluster-b"]),
)]
pub(crate) struct Mirror;
