//! Code generation: a scheduled AST is arranged into a [`kernel::Kernel`], optimized, lowered to
//! UOps by the [`linearizer`] and rewritten by UOp passes — one sequence of passes, owned by
//! [`lower`] and checked between passes by [`verify`] in debug builds — and then interpreted or
//! rendered to C by [`c`].

pub mod c;
pub mod hoist;
pub mod kernel;
pub mod linearizer;
pub mod lower;
pub mod opt;
pub mod pad_bounds;
pub mod search_space;
pub mod split;
pub mod strategy;
pub mod strided_copy;
pub mod uops;
pub mod verify;
