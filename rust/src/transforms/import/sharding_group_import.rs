//! `sdy-sharding-group-import` (Shardy `transforms/import/sharding_group_import.cc`): merges
//! the sharding groups that share a value (transitively), renumbers them `0..N-1` in the
//! order their first members appear, and removes duplicate `sdy.sharding_group` ops of a value
//! within a group.

use crate::error::{Error, Result};
use crate::fast_hash::{FastMap, FastSet};
use crate::ir::{types, Program};
use crate::transforms::common::{post_order_of, where_};
use crate::transforms::PassContext;

const SHARDING_GROUP: &str = "sdy.sharding_group";

fn group_id(p: &Program, op: u32) -> i64 {
    let text = p.attr(op, "group_id").unwrap_or("0");
    text.split(':').next().unwrap_or("").trim().parse().unwrap_or(0)
}

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let mut groups_pre: Vec<u32> = p.walk(0).into_iter().filter(|&o| p.op_name(o) == SHARDING_GROUP).collect();
    if groups_pre.is_empty() {
        return Ok(());
    }
    let parents = p.parents(0);
    let enclosing_manual = |mut op: u32| -> Option<u32> {
        while let Some(up) = parents.get(&op).map(|w| w.op) {
            if p.op_name(up) == "sdy.manual_computation" {
                return Some(up);
            }
            op = up;
        }
        None
    };
    let mut by_value: FastMap<u32, Vec<u32>> = FastMap::default();
    let mut order: Vec<u32> = Vec::new();
    let mut group_manual: FastMap<i64, Option<u32>> = FastMap::default();
    let mut group_shape: FastMap<i64, Option<Vec<i64>>> = FastMap::default();
    groups_pre.retain(|&op| !p.op_operands(op).is_empty());
    for op in post_order_of(p, &groups_pre) {
        let v = p.op_operands(op)[0];
        by_value
            .entry(v)
            .or_insert_with(|| {
                order.push(v);
                Vec::new()
            })
            .push(op);
        let gid = group_id(p, op);
        let manual = enclosing_manual(op);
        if *group_manual.entry(gid).or_insert(manual) != manual {
            return Err(Error::program(format!(
                "{}: ShardingGroupOps values cannot cross ManualComputationOp boundaries for groupId: {gid}",
                where_(p, op)
            )));
        }
        let shape = types::tensor_shape(p.strings.get(p.value_types[v as usize]));
        if *group_shape.entry(gid).or_insert_with(|| shape.clone()) != shape {
            return Err(Error::program(format!(
                "{}: ShardingGroupOps values must have the same shape for groupId: {gid}",
                where_(p, op)
            )));
        }
    }
    // LLVM's EquivalenceClasses: the leader of a union is the leader of the first set; the
    // classes in the order their first member was added.
    let mut parent: FastMap<i64, i64> = FastMap::default();
    let mut seen_order: Vec<i64> = Vec::new();
    fn find(parent: &mut FastMap<i64, i64>, seen: &mut Vec<i64>, mut x: i64) -> i64 {
        if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(x) {
            e.insert(x);
            seen.push(x);
        }
        while parent[&x] != x {
            let up = parent[&parent[&x]];
            parent.insert(x, up);
            x = up;
        }
        x
    }
    for v in &order {
        let ops = &by_value[v];
        let canon = group_id(p, ops[0]);
        for &o in ops {
            let (a, b) =
                (find(&mut parent, &mut seen_order, canon), find(&mut parent, &mut seen_order, group_id(p, o)));
            if a != b {
                parent.insert(b, a);
            }
        }
    }
    let leaders: Vec<i64> = seen_order.iter().copied().filter(|g| parent[g] == *g).collect();
    let reindex: FastMap<i64, usize> = leaders.iter().enumerate().map(|(i, &g)| (g, i)).collect();
    let mut groups: Vec<Vec<u32>> = vec![Vec::new(); leaders.len()];
    for v in &order {
        for &o in &by_value[v] {
            let leader = find(&mut parent, &mut seen_order, group_id(p, o));
            let new = reindex[&leader];
            p.set_attr(o, "group_id", &format!("{new} : i64"));
            groups[new].push(o);
        }
    }
    let mut erased: FastSet<u32> = FastSet::default();
    for members in groups {
        let mut seen: FastSet<u32> = FastSet::default();
        for o in members {
            if !seen.insert(p.op_operands(o)[0]) {
                erased.insert(o);
            }
        }
    }
    p.remove_ops(&erased, erased.iter().filter_map(|o| parents.get(o).map(|w| w.block)));
    Ok(())
}
