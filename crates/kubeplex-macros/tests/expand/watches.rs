// Kinds watched without being reconciled or owned: every parent on a change, or the parents a map names.
#[controller(
    crd = Placement,
    contexts = [Fleet::Control],
    namespaces = ["crds"],
    ignore_readiness_flips,
    watches(Node, contexts = [Fleet::ClusterA], members, label_selector = "tier=web"),
    watches(Secret, members, namespaces = ["apps"], map = placements_of),
)]
pub struct Placer;
