//! SSA value names as MLIR's printer gives them (`SSANameState` in MLIR's `AsmPrinter.cpp`):
//! entry-block arguments `%argN`, op results numbered `%N` (one number for all results of an
//! op, `%N#i`), the names ops suggest (`%cst`, `%c`, `%iterArg`, `%output_state`), made unique
//! with one conflict counter (`%cst_0`, `%c_1`). Each region is named after its parent region
//! is done, starting from the counters the parent left; sibling regions do not see each other's
//! names. Loops over an explicit stack only.

use crate::fast_hash::FastMap;
use crate::ir::Program;

/// A value's printed name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Name {
    Unnamed,
    /// `%N`, or `%N#i` for result `i > 0` of a multi-result op.
    Number(u32, Option<u32>),
    Named(String),
}

pub(crate) struct Names {
    pub(crate) of: Vec<Name>,
}

/// A scope of used names: its names and its parent scope.
struct Scope {
    parent: Option<usize>,
    names: FastMap<String, ()>,
}

struct Counters {
    value: u32,
    arg: u32,
    conflict: u32,
}

impl Names {
    pub(crate) fn new(p: &Program) -> Self {
        let mut owner = vec![u32::MAX; p.regions.len()];
        for (i, op) in p.ops.iter().enumerate() {
            for r in op.regions.0..op.regions.1 {
                owner[r as usize] = i as u32;
            }
        }
        let mut n = Namer { p, of: vec![Name::Unnamed; p.value_types.len()], scopes: Vec::new(), owner };
        n.run();
        Names { of: n.of }
    }

    /// `%name` of value `v`.
    pub(crate) fn text(&self, v: u32) -> String {
        match &self.of[v as usize] {
            Name::Number(n, None) => format!("%{n}"),
            Name::Number(n, Some(i)) => format!("%{n}#{i}"),
            Name::Named(s) => format!("%{s}"),
            Name::Unnamed => "%<<UNKNOWN SSA VALUE>>".to_string(),
        }
    }
}

struct Namer<'p> {
    p: &'p Program,
    of: Vec<Name>,
    scopes: Vec<Scope>,
    /// The op owning each region.
    owner: Vec<u32>,
}

impl Namer<'_> {
    fn run(&mut self) {
        let p = self.p;
        if p.ops.is_empty() {
            return;
        }
        self.scopes.push(Scope { parent: None, names: FastMap::default() });
        let mut c = Counters { value: 0, arg: 0, conflict: 0 };
        self.number_op(0, &mut c, 0);
        let mut stack: Vec<(u32, u32, u32, u32, usize)> = Vec::new();
        let (r0, r1) = p.ops[0].regions;
        for r in r0..r1 {
            stack.push((r, c.value, c.arg, c.conflict, 0));
        }
        while let Some((region, value, arg, conflict, parent)) = stack.pop() {
            let scope = self.scopes.len();
            self.scopes.push(Scope { parent: Some(parent), names: FastMap::default() });
            let mut c = Counters { value, arg, conflict };
            self.number_region(region, &mut c, scope);
            let (b0, b1) = p.regions[region as usize];
            for b in b0..b1 {
                let block = p.blocks[b as usize];
                for &op in &p.block_ops[block.ops.0 as usize..block.ops.1 as usize] {
                    let (q0, q1) = p.ops[op as usize].regions;
                    for q in q0..q1 {
                        stack.push((q, c.value, c.arg, c.conflict, scope));
                    }
                }
            }
        }
    }

    fn used(&self, scope: usize, name: &str) -> bool {
        let mut s = Some(scope);
        while let Some(i) = s {
            if self.scopes[i].names.contains_key(name) {
                return true;
            }
            s = self.scopes[i].parent;
        }
        false
    }

    fn unique(&mut self, name: &str, c: &mut Counters, scope: usize) -> String {
        let mut out = name.to_string();
        if self.used(scope, &out) {
            loop {
                out = format!("{name}_{}", c.conflict);
                c.conflict += 1;
                if !self.used(scope, &out) {
                    break;
                }
            }
        }
        self.scopes[scope].names.insert(out.clone(), ());
        out
    }

    fn set_name(&mut self, v: u32, name: &str, c: &mut Counters, scope: usize) {
        if name.is_empty() {
            self.of[v as usize] = Name::Number(c.value, None);
            c.value += 1;
        } else {
            let n = self.unique(name, c, scope);
            self.of[v as usize] = Name::Named(n);
        }
    }

    fn number_region(&mut self, region: u32, c: &mut Counters, scope: usize) {
        let p = self.p;
        let (b0, b1) = p.regions[region as usize];
        // Ops that name their regions' arguments (OpAsmOpInterface::getAsmBlockArgumentNames).
        let owner = self.owner[region as usize];
        if owner != u32::MAX && p.op_name(owner) == "stablehlo.while" && b1 > b0 {
            let args = p.blocks[b0 as usize].args;
            for a in args.0..args.1 {
                self.set_name(a, "iterArg", c, scope);
            }
        }
        for b in b0..b1 {
            let block = p.blocks[b as usize];
            let entry = b == b0;
            for a in block.args.0..block.args.1 {
                if self.of[a as usize] != Name::Unnamed {
                    continue;
                }
                if entry {
                    let name = format!("arg{}", c.arg);
                    c.arg += 1;
                    self.set_name(a, &name, c, scope);
                } else {
                    self.set_name(a, "", c, scope);
                }
            }
            for &op in &p.block_ops[block.ops.0 as usize..block.ops.1 as usize] {
                self.number_op(op, c, scope);
            }
        }
    }

    fn number_op(&mut self, op: u32, c: &mut Counters, scope: usize) {
        let p = self.p;
        let d = p.ops[op as usize];
        let (r0, r1) = d.results;
        if r1 == r0 {
            return;
        }
        // OpAsmOpInterface::getAsmResultNames of the ops that have one.
        let suggested: &[&str] = match p.op_name(op) {
            "stablehlo.constant" => {
                let t = p.strings.get(p.value_types[r0 as usize]);
                let elem = t.trim_end_matches('>').rsplit(['x', '<']).next().unwrap_or("");
                if elem.starts_with('i') || elem.starts_with("ui") {
                    &["c"]
                } else {
                    &["cst"]
                }
            }
            "stablehlo.rng_bit_generator" => &["output_state", "output"],
            "chlo.top_k" => &["values", "indices"],
            _ => &[],
        };
        for (k, name) in suggested.iter().enumerate() {
            if (r0 + k as u32) < r1 {
                self.set_name(r0 + k as u32, name, c, scope);
            }
        }
        if self.of[r0 as usize] == Name::Unnamed {
            let n = c.value;
            c.value += 1;
            let multi = r1 - r0 > 1;
            for v in r0..r1 {
                if self.of[v as usize] == Name::Unnamed {
                    self.of[v as usize] = Name::Number(n, multi.then_some(v - r0));
                }
            }
        }
    }
}
