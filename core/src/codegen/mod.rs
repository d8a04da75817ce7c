//! Code generation: kernel ASTs are lowered to UOps ([`uops`]), which a device either interprets
//! or renders to C ([`c`]).

pub mod c;
pub mod uops;
