pub struct AppDeployer;
impl ::kubeplex::Controller for AppDeployer {
    type Resource = AppDeployment;
    type Context = Fleet;
    fn plan() -> ::kubeplex::Plan<Self::Context> {
        ::kubeplex::Plan::new("app-deployer")
            .contexts([Fleet::Control])
            .namespaces(["crds"])
            .finalizer("demo.kubeplex.dev/cleanup")
            .owns(
                ::kubeplex::Child::of::<Deployment>()
                    .contexts([Fleet::ClusterA, Fleet::ClusterB])
                    .namespaces(["namespace-a", "namespace-b"]),
            )
    }
}
