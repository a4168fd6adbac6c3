//! Reading and writing the sharding of one [`Tensor`] of a propagation step (a value, an edge's
//! targets or a function result), and the reads recorded for memoised steps.

use std::borrow::Cow;

use super::{Shared, Solver, Tensor};
use crate::propagation::step_memo::Stored;
use crate::propagation::transforms::erase_manual_axes;
use crate::sharding::TensorSharding;

impl<'g> Solver<'g> {
    pub(super) fn tensor_get(&self, t: Tensor) -> Option<TensorSharding> {
        match t {
            Tensor::Value(v) => self.get_sharding(v),
            Tensor::EdgeTarget(e) => self.edge_target_get(e),
            Tensor::FuncResult(f, k) => self.func_results.get(&f).and_then(|r| r.get(k as usize)?.as_deref().cloned()),
        }
    }

    /// `tensor_get` without a copy where the stored sharding is the tensor's sharding (no
    /// manual axes to erase or add).
    pub(super) fn tensor_cow(&self, t: Tensor) -> Option<Cow<'_, TensorSharding>> {
        match t {
            Tensor::Value(v) => {
                let slot = self.shardable(v)?;
                let raw = self.raw[slot as usize].as_ref()?;
                match self.manual_arg_axes(slot) {
                    Some(manual) => Some(Cow::Owned(erase_manual_axes(raw, manual))),
                    None => Some(Cow::Borrowed(raw)),
                }
            }
            Tensor::EdgeTarget(e) if self.edge_manual(e).is_none() => {
                self.raw[self.edge_result(e) as usize].as_deref().map(Cow::Borrowed)
            }
            _ => self.tensor_get(t).map(Cow::Owned),
        }
    }

    pub(super) fn tensor_set(&mut self, t: Tensor, s: Shared) {
        match t {
            Tensor::Value(v) => self.set_sharding(v, s),
            Tensor::EdgeTarget(e) => self.edge_target_set(e, s),
            Tensor::FuncResult(f, k) => {
                if let Some(slot) = self.func_results.get_mut(&f).and_then(|r| r.get_mut(k as usize)) {
                    *slot = Some(s);
                }
                if Some(f) == self.prog.main_func {
                    self.cache.wrote_func_result(k);
                }
            }
        }
    }

    /// Calls `f` with each value whose stored sharding reading `t` reads; `false` when it
    /// reads a function result sharding (not a value's).
    pub(super) fn for_each_read(&self, t: Tensor, mut f: impl FnMut(u32)) -> bool {
        match t {
            Tensor::Value(v) => {
                if let Some(slot) = self.shardable(v) {
                    f(slot);
                }
            }
            Tensor::EdgeTarget(e) => {
                f(self.edge_result(e));
                if let Some((owner, _)) = self.edge_manual(e) {
                    f(owner);
                }
            }
            Tensor::FuncResult(..) => return false,
        }
        true
    }

    /// Calls `f` with each stored sharding reading `t` reads: where it is stored, and what.
    pub(super) fn for_each_stored(&self, t: Tensor, mut f: impl FnMut(Stored, Option<&Shared>)) {
        if let Tensor::FuncResult(func, k) = t {
            let s = self.func_results.get(&func).and_then(|r| r.get(k as usize)).and_then(Option::as_ref);
            f(Stored::FuncResult(func, k), s);
        } else {
            self.for_each_read(t, |slot| f(Stored::Value(slot), self.raw[slot as usize].as_ref()));
        }
    }

    /// Tells the visit memo which stored shardings reading `t` reads.
    pub(super) fn record_read(&mut self, t: Tensor) {
        let mut slots = [0u32; 2];
        let mut n = 0;
        let tracked = self.for_each_read(t, |s| {
            slots[n] = s;
            n += 1;
        });
        if !tracked {
            self.cache.read_untracked();
        }
        for &s in &slots[..n] {
            self.cache.read(s);
        }
    }

    /// Whether reading `t` finds a sharding.
    pub(super) fn has_sharding(&self, t: Tensor) -> bool {
        match t {
            Tensor::Value(v) => self.shardable(v).is_some_and(|slot| self.raw[slot as usize].is_some()),
            Tensor::EdgeTarget(e) => self.raw[self.edge_result(e) as usize].is_some(),
            Tensor::FuncResult(f, k) => {
                self.func_results.get(&f).and_then(|r| r.get(k as usize)).is_some_and(Option::is_some)
            }
        }
    }
}
