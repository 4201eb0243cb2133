pub(crate) struct Mirror;
const _: () = {
    fn kind(_: <ConfigMap as ::kubeplex::__private::Resource>::Itself) {}
};
const _: () = {
    fn kind(_: <Secret as ::kubeplex::__private::Resource>::Itself) {}
};
impl ::kubeplex::Controller for Mirror {
    type Resource = ConfigMap;
    type Context = <crate::fleet::Fleet as ::kubeplex::__private::Fleet>::Itself;
    fn plan() -> ::kubeplex::Plan<Self::Context> {
        ::kubeplex::Plan::new("mirror")
            .owns(
                ::kubeplex::Child::of::<Secret>()
                    .with_contexts([
                        ::kubeplex::__private::member::<
                            crate::fleet::Fleet,
                        >("cluster-a"),
                        ::kubeplex::__private::member::<crate::fleet::Fleet>("cluster-b"),
                    ]),
            )
            .with_contexts([
                ::kubeplex::__private::member::<crate::fleet::Fleet>("control"),
            ])
    }
}
const _: () = {
    ::kubeplex::__private::check_members::<
        crate::fleet::Fleet,
    >("crate::fleet::Fleet", &["control"]);
    ::kubeplex::__private::check_members::<
        crate::fleet::Fleet,
    >("crate::fleet::Fleet", &["cluster-a"]);
    ::kubeplex::__private::check_members::<
        crate::fleet::Fleet,
    >("crate::fleet::Fleet", &["cluster-b"]);
};
