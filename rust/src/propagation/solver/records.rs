//! The debug records of a solve (Shardy `debug-sharding-origins` and
//! `debug-propagation-edge-sharding`, `transforms/propagation/debugging/source_sharding.cc`):
//! origins of the user shardings, and the edges and conflicts of each step.

use super::{Solver, Tensor};
use crate::error::Result;
use crate::mesh::Mesh;
use crate::propagation::debug::{step_edges, DebugOptions, EdgeNode, EdgeNodeKind, Origin, OriginKind, ShardingDebug};
use crate::propagation::explain::{diagnose, Conflict, Hop, StepRecord, VisitInfo};
use crate::propagation::program::OpKind;
use crate::propagation::projection::ShardingProjection;
use crate::rule::OpShardingRule;

impl<'g> Solver<'g> {
    /// Shardy `SourceShardingHandler::prepareHandler`: the origins of the user shardings, in
    /// Shardy's order (the first recorded origin of an axis wins): sharding constraints (their
    /// sharding on their result and, if it has one, their operand's on the operand), manual
    /// computations (each in sharding on the edge of its body argument and on its operand,
    /// each out sharding on the edge of its result), then each function's arguments and
    /// results (on the returned values). And an empty edge list per function result.
    pub(super) fn prepare_debug(&mut self, options: DebugOptions) {
        let mut d = ShardingDebug::new(options);
        let n = self.alive.len() as u32;
        if d.options.origins {
            let mut id = 0i64;
            for op in 0..n {
                if self.prog.kind[op as usize] != OpKind::ShardingConstraint || d.options.skip_ops.contains(&op) {
                    continue;
                }
                let origin = Origin { kind: OriginKind::Constraint, index: 0, source_id: id };
                id += 1;
                d.origin_names.push((op, origin.to_string()));
                if let Some(&r) = self.prog.results(op).first() {
                    if let (Some(s), Some(slot)) = (&self.raw[r as usize], self.shardable(r)) {
                        d.save_origins(slot, s.dims.iter().flat_map(|dim| &dim.axes), origin);
                    }
                }
                if let Some(&x) = self.prog.operands(op).first() {
                    if let (Some(s), Some(slot)) = (self.get_sharding(x), self.shardable(x)) {
                        d.save_origins(slot, s.dims.iter().flat_map(|dim| &dim.axes), origin);
                    }
                }
            }
            let mut id = 0i64;
            for op in self.post_order() {
                if self.prog.kind[op as usize] != OpKind::ManualComputation {
                    continue;
                }
                for (i, &arg) in self.prog.block_args.row(op as usize).iter().enumerate() {
                    let origin = Origin { kind: OriginKind::ManualInput, index: i as i64, source_id: id };
                    let (Some(s), Some(edge)) = (&self.raw[arg as usize], self.edge_of(arg)) else { continue };
                    d.save_origins(self.edge_result(edge), s.dims.iter().flat_map(|dim| &dim.axes), origin);
                    if let Some(&x) = self.prog.operands(op).get(i) {
                        if let (Some(s), Some(slot)) = (self.get_sharding(x), self.shardable(x)) {
                            d.save_origins(slot, s.dims.iter().flat_map(|dim| &dim.axes), origin);
                        }
                    }
                }
                for (i, &r) in self.prog.results(op).iter().enumerate() {
                    let origin = Origin { kind: OriginKind::ManualOutput, index: i as i64, source_id: id };
                    if let (Some(s), Some(edge)) = (&self.raw[r as usize], self.edge_of(r)) {
                        d.save_origins(self.edge_result(edge), s.dims.iter().flat_map(|dim| &dim.axes), origin);
                    }
                }
                d.origin_names.push((op, format!("mc_{id}")));
                id += 1;
            }
        }
        for func in 0..n {
            if self.prog.kind[func as usize] != OpKind::Func || self.prog.parent(func).is_some() {
                continue;
            }
            let results = self.func_results.get(&func).cloned().unwrap_or_default();
            if d.options.edges {
                d.func_result_edges.push((func, vec![Default::default(); results.len()]));
            }
            if !d.options.origins {
                continue;
            }
            for (i, &arg) in self.prog.block_args.row(func as usize).iter().enumerate() {
                let origin = Origin { kind: OriginKind::Input, index: i as i64, source_id: 0 };
                if let Some(s) = self.get_sharding(arg) {
                    d.save_origins(arg, s.dims.iter().flat_map(|dim| &dim.axes), origin);
                }
            }
            let Some(ret) = self.prog.terminator(func, 0).filter(|&t| self.prog.kind[t as usize] == OpKind::FuncReturn)
            else {
                continue;
            };
            for (k, &v) in self.prog.operands(ret).iter().enumerate() {
                let origin = Origin { kind: OriginKind::Output, index: k as i64, source_id: 0 };
                if let (Some(Some(s)), Some(slot)) = (results.get(k), self.shardable(v)) {
                    d.save_origins(slot, s.dims.iter().flat_map(|dim| &dim.axes), origin);
                }
            }
        }
        self.debug = Some(d);
    }

    /// The value whose origins a tensor of a step has (Shardy `getShardableValue` of the
    /// tensor; for a function result, of the returned value).
    pub(super) fn origin_slot(&self, t: Tensor) -> Option<u32> {
        match t {
            Tensor::Value(v) => self.shardable(v),
            Tensor::EdgeTarget(e) => Some(self.edge_result(e)),
            Tensor::FuncResult(f, k) => {
                let ret = self.prog.terminator(f, 0)?;
                self.shardable(*self.prog.operands(ret).get(k as usize)?)
            }
        }
    }

    /// Shardy `SourceShardingHandler::operator()`: after a step through `action` that changed
    /// some sharding, the axes that came to each tensor (see [`step_edges`]) are recorded as
    /// edges of the op (of the function's result 0 for a function result) and as origins of
    /// the tensor's value, looked up in the source tensor's origins.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record_step(
        &mut self,
        action: u32,
        operands: &[Tensor],
        results: &[Tensor],
        before: &ShardingProjection,
        after: &ShardingProjection,
        rule: &OpShardingRule,
        mesh: &Mesh,
    ) -> Result<()> {
        let Some(mut d) = self.debug.take() else { return Ok(()) };
        let step = d.next_step;
        d.next_step += 1;
        let edges = match step_edges(before, after, rule, mesh, step) {
            Ok(e) => e,
            Err(e) => {
                self.debug = Some(d);
                return Err(e);
            }
        };
        let is_func = self.prog.kind[action as usize] == OpKind::Func;
        if d.options.explain {
            d.steps.push(StepRecord { step, op: action, layer: self.layer });
        }
        for (tensors, maps, news) in
            [(operands, &edges.operands, &after.operands), (results, &edges.results, &after.results)]
        {
            for (i, map) in maps.iter().enumerate() {
                let slot = tensors.get(i).and_then(|&t| self.origin_slot(t));
                for (axis, edge) in map.iter() {
                    if d.options.explain {
                        let source_value = match edge.source.kind {
                            EdgeNodeKind::Operand => operands.get(edge.source.index as usize),
                            EdgeNodeKind::Result => results.get(edge.source.index as usize),
                        }
                        .and_then(|&t| self.origin_slot(t));
                        let factor = news.get(i).and_then(|t| {
                            t.iter()
                                .find(|(_, s)| s.axes.iter().any(|a| a.contains(axis) || axis.contains(a)))
                                .map(|(f, _)| f)
                        });
                        d.hops.push(Hop {
                            step,
                            op: action,
                            axis: axis.clone(),
                            factor,
                            source: edge.source,
                            target: edge.target,
                            source_value,
                            target_value: slot,
                        });
                    }
                    if d.options.edges {
                        if is_func {
                            let per_result = d.func_result_edges.iter_mut().find(|(f, _)| *f == action);
                            if let Some(m) = per_result.and_then(|(_, r)| r.get_mut(i)) {
                                m.entry(axis, Vec::new).push(*edge);
                            }
                        } else {
                            d.edges_mut(action).entry(axis, Vec::new).push(*edge);
                        }
                    }
                    if !d.options.origins {
                        continue;
                    }
                    let Some(slot) = slot else { continue };
                    let source = |EdgeNode { kind, index }: EdgeNode| match kind {
                        EdgeNodeKind::Operand => operands.get(index as usize).copied(),
                        EdgeNodeKind::Result => results.get(index as usize).copied(),
                    };
                    let origin = source(edge.source)
                        .and_then(|t| self.origin_slot(t))
                        .and_then(|s| d.origins_of(s))
                        .and_then(|m| m.lookup(axis));
                    match origin {
                        Some(origin) => {
                            d.origins_mut(slot).try_insert(axis, origin);
                        }
                        None => d.missing_origins.push((slot, axis.clone())),
                    }
                }
            }
        }
        self.debug = Some(d);
        Ok(())
    }

    /// Records the axes each tensor of a visit could not take (see [`crate::propagation::explain`]), when
    /// recording for `shardwise.explain`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record_conflicts(
        &mut self,
        action: u32,
        operands: &[Tensor],
        results: &[Tensor],
        before: &ShardingProjection,
        after: &ShardingProjection,
        info: &VisitInfo<'_>,
        step: Option<i64>,
    ) -> Result<()> {
        if !self.debug.as_ref().is_some_and(|d| d.options.explain) {
            return Ok(());
        }
        let found = diagnose(before, after, info)?;
        let value = |n: EdgeNode| {
            match n.kind {
                EdgeNodeKind::Operand => operands.get(n.index as usize),
                EdgeNodeKind::Result => results.get(n.index as usize),
            }
            .and_then(|&t| self.origin_slot(t))
        };
        let records: Vec<Conflict> = found
            .into_iter()
            .map(|c| Conflict {
                visit: self.stats.visits,
                step,
                op: action,
                layer: self.layer,
                target_value: value(c.target),
                source_value: value(c.source),
                with_value: c.with.as_ref().and_then(|w| value(w.tensor)),
                conflict: c,
            })
            .collect();
        if let Some(d) = self.debug.as_mut() {
            for c in records {
                d.add_conflict(c);
            }
        }
        Ok(())
    }
}
