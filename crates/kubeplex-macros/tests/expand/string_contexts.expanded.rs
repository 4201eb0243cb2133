struct AppReconciler {
    image_registry: String,
}
const _: () = {
    fn kind(
        _: ::kubeplex::__private::Namespaced<
            <AppDeployment as ::kubeplex::__private::Resource>::Itself,
        >,
    ) {}
};
impl ::kubeplex::Controller for AppReconciler {
    type Resource = AppDeployment;
    type Context = ::kubeplex::ContextName;
    fn plan() -> ::kubeplex::Plan<Self::Context> {
        ::kubeplex::Plan::new("app-reconciler")
            .contexts([::kubeplex::ContextName::new("control")])
            .namespaces(["crds"])
    }
}
