// A renamed dependency (`my_kubeplex = { package = "kubeplex", .. }`) and an explicit name.
#[controller(crate = my_kubeplex, crd = Widget, contexts = ["prod-eu", "prod-us"], name = "widgets")]
pub struct WidgetController;
