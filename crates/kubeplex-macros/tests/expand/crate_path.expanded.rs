pub struct WidgetController;
const _: () = {
    fn kind(_: <Widget as my_kubeplex::__private::Resource>::Itself) {}
};
impl my_kubeplex::Controller for WidgetController {
    type Resource = Widget;
    type Context = my_kubeplex::ContextName;
    fn plan() -> my_kubeplex::Plan<Self::Context> {
        my_kubeplex::Plan::new("widgets")
            .with_contexts([
                my_kubeplex::ContextName::new("prod-eu"),
                my_kubeplex::ContextName::new("prod-us"),
            ])
    }
}
