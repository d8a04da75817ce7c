//! Code generation: a scheduled AST is arranged into a [`kernel::Kernel`], lowered to UOps by the
//! [`linearizer`], and then interpreted or rendered to C by [`c`].

pub mod c;
pub mod hoist;
pub mod kernel;
pub mod linearizer;
pub mod opt;
pub(crate) mod opt_conv;
pub mod search_space;
pub mod split;
pub mod uops;
