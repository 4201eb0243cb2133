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
impl ::kubeplex::Controller for AppDeployer {
    type Resource = AppDeployment;
    type Context = <Fleet as ::kubeplex::__private::Fleet>::Itself;
    fn plan() -> ::kubeplex::Plan<Self::Context> {
        ::kubeplex::Plan::new("app-deployer")
            .contexts([Fleet::Control])
            .namespaces(["crds"])
            .members()
            .owns(::kubeplex::Child::of::<Deployment>().members().namespaces(["apps"]))
    }
}
