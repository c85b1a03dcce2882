//! The larch command.
fn main() {}
