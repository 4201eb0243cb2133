pub struct Judged;
const _: () = {
    fn kind(_: <AppDeployment as ::kubeplex::__private::Resource>::Itself) {}
};
const _: () = {
    fn kind(_: <Deployment as ::kubeplex::__private::Resource>::Itself) {}
};
impl ::kubeplex::Controller for Judged {
    type Resource = AppDeployment;
    type Context = <Fleet as ::kubeplex::__private::Fleet>::Itself;
    fn plan() -> ::kubeplex::Plan<Self::Context> {
        ::kubeplex::Plan::new("judged")
            .owns(
                ::kubeplex::Child::of::<Deployment>()
                    .with_health(rules::web)
                    .with_contexts([Fleet::ClusterA]),
            )
            .with_contexts([Fleet::Control])
    }
}
