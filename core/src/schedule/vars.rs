//! The last scheduling pass: unbinding. Each kernel's AST is rewritten over unbound variables
//! (so equal kernels over different values of a [`Variable`](crate::symbolic::Variable) are one
//! AST, lowered and compiled once), and the values go to [`ScheduleItem::var_vals`], which the
//! realizer passes to the program as its variable arguments.
//!
//! Invariant: after this pass no AST holds a bound variable; an item's `var_vals` binds every
//! variable its AST mentions that was bound, each name to one value (two values for one name in
//! one kernel are an error).

use super::ScheduleItem;
use crate::ast::Ast;
use crate::error::Result;
use crate::symbolic::{merge_val, VarVals};

/// Unbinds every item's AST (and its pre-layout AST), recording the values.
pub(super) fn unbind_items(items: &mut [ScheduleItem]) -> Result<()> {
    for it in items.iter_mut() {
        let mut vals = VarVals::new();
        it.ast = unbind_ast(&it.ast, &mut vals)?;
        if let Some((plain, n)) = it.plain.take() {
            it.plain = Some((unbind_ast(&plain, &mut vals)?, n));
        }
        it.var_vals = vals;
    }
    Ok(())
}

fn unbind_ast(ast: &Ast, vals: &mut VarVals) -> Result<Ast> {
    let mut err = None;
    let out = ast.map_sts(&mut |st, _| {
        match st.var_vals() {
            Ok(vs) => {
                for (k, v) in vs {
                    if let Err(e) = merge_val(vals, &k, v) {
                        err.get_or_insert(e);
                    }
                }
            }
            Err(e) => {
                err.get_or_insert(e);
            }
        }
        st.unbind()
    });
    match err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}
