//! Element types of StableHLO's element-wise ops, as their definitions in openxla/stablehlo
//! `StablehloOps.td` and the inference of `TypeInference.cpp` constrain them: the operands and
//! the result share one element type (`SameOperandsAndResultElementType` and the inferred
//! result types), but `convert` (any); `compare` and `is_finite` (an `i1` result);
//! `select` (an `i1` predicate, the rest one type); `abs`, `real`, `imag` (a `complex<T>`
//! operand gives `T`); `complex` (`T` operands give `complex<T>`). Ops on quantized element
//! types (`!quant.uniform`) are left to jaxlib.

use super::{Verifier, VerifyError};

/// `T` of `complex<T>`.
fn complex_part(t: &str) -> Option<&str> {
    t.strip_prefix("complex<")?.strip_suffix('>')
}

impl<'p> Verifier<'p> {
    /// Checks the element types of element-wise op `op` named `name` (`stablehlo.` stripped).
    pub(super) fn elementwise_types(&self, op: u32, name: &str) -> Result<(), VerifyError> {
        // An unranked tensor's type text is `tensor<*xT>`.
        let elem = |v: u32| self.elem(v).map(|t| t.strip_prefix("*x").unwrap_or(t));
        let types: Option<Vec<&str>> = self.operands(op).iter().copied().chain(self.results(op)).map(elem).collect();
        // A value that is no ranked or unranked tensor (a token, a tuple): not checked here.
        let Some(types) = types else { return Ok(()) };
        if types.iter().any(|t| t.starts_with("!quant")) {
            return Ok(());
        }
        let n = self.operands(op).len();
        let (ins, result) = (&types[..n], types.get(n).copied());
        let Some(result) = result else { return Ok(()) };
        let refuse = |what: String| Err(self.err(op, what));
        let all_same = |vals: &[&str], want: &str, what: &str| -> Result<(), VerifyError> {
            match vals.iter().find(|&&t| t != want) {
                Some(t) => refuse(format!("{what}: element type {t} differs from {want}")),
                None => Ok(()),
            }
        };
        match name {
            "convert" => Ok(()),
            "compare" => {
                all_same(ins, ins[0], "operands")?;
                if result != "i1" {
                    return refuse(format!("the result's element type must be i1, got {result}"));
                }
                Ok(())
            }
            "is_finite" => {
                if result != "i1" {
                    return refuse(format!("the result's element type must be i1, got {result}"));
                }
                Ok(())
            }
            "select" => {
                if ins[0] != "i1" {
                    return refuse(format!("the predicate's element type must be i1, got {}", ins[0]));
                }
                all_same(&[ins[2], result], ins[1], "on_false and result")
            }
            "abs" | "real" | "imag" => match complex_part(ins[0]) {
                Some(part) if result != part => {
                    refuse(format!("the result's element type must be {part} for a {} operand, got {result}", ins[0]))
                }
                Some(_) => Ok(()),
                None => all_same(&[result], ins[0], "result"),
            },
            "complex" => {
                all_same(ins, ins[0], "operands")?;
                let want = format!("complex<{}>", ins[0]);
                if result != want {
                    return refuse(format!("the result's element type must be {want}, got {result}"));
                }
                Ok(())
            }
            _ => {
                all_same(ins, ins[0], "operands")?;
                all_same(&[result], ins[0], "result")
            }
        }
    }
}
