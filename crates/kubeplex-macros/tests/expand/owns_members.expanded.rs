pub struct AppDeployer;
const _: () = {
    fn kind(
        _: ::kubeplex::__private::Namespaced<
            <AppDeployment as ::kubeplex::__private::Resource>::Itself,
        >,
    ) {}
};
const _: () = {
    fn kind(
        _: ::kubeplex::__private::Namespaced<
            <Deployment as ::kubeplex::__private::Resource>::Itself,
        >,
    ) {}
};
const _: () = {
    fn kind(
        _: ::kubeplex::__private::Namespaced<
            <Secret as ::kubeplex::__private::Resource>::Itself,
        >,
    ) {}
};
const _: () = {
    fn kind(_: <ConfigMap as ::kubeplex::__private::Resource>::Itself) {}
};
impl ::kubeplex::Controller for AppDeployer {
    type Resource = AppDeployment;
    type Context = <Fleet as ::kubeplex::__private::Fleet>::Itself;
    fn plan() -> ::kubeplex::Plan<Self::Context> {
        ::kubeplex::Plan::new("app-deployer")
            .contexts([Fleet::Control])
            .namespaces(["crds"])
            .owns(
                ::kubeplex::Child::of::<Deployment>()
                    .contexts([Fleet::ClusterA, Fleet::ClusterB])
                    .members()
                    .namespaces(["namespace-a", "namespace-b"]),
            )
            .owns(
                ::kubeplex::Child::of::<Secret>().members().namespaces(["namespace-a"]),
            )
            .owns(::kubeplex::Child::of::<ConfigMap>().members())
    }
}
