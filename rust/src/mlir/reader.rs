//! The reader's structure: the module, ops in the generic form, regions, blocks, SSA names and
//! locations. The custom forms of individual ops are in `ops.rs` (func, stablehlo, chlo) and
//! `sdy.rs`; each builds an [`OpBuild`] in the generic shape and hands it back here.
//!
//! Nesting is read with an explicit stack of open ops ([`Frame`]), so 10,000 nested regions
//! read without recursion.

use crate::fast_hash::FastMap;

use super::cursor::{unescape, Cursor, Res};
use super::ops;
use crate::ir::{BlockData, FuncData, ImplicitLocs, OpData, Program, Span};

/// An op being read, in MLIR's generic shape.
#[derive(Debug, Default)]
pub(crate) struct OpBuild<'a> {
    pub name: String,
    pub operands: Vec<u32>,
    pub result_types: Vec<u32>,
    pub attrs: Vec<(u32, u32)>,
    /// Blocks' argument types and names of each region still to be read (see [`Pending`]).
    pub regions: Vec<Pending<'a>>,
    pub func: Option<FuncData>,
    /// Where the op's name starts (its implicit location).
    pub at: usize,
    /// Whether the op is written in the generic form.
    pub generic: bool,
}

/// How one region of an op is to be read: its entry block's arguments when the op's custom
/// form declares them (`(%arg0: tensor<8xf32>)`, a function's signature), and, for the compact
/// form of `stablehlo.reduce` (`applies stablehlo.add`), a body made up instead of read.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pending<'a> {
    pub args: Option<Vec<(&'a str, u32)>>,
    pub synthesized: Option<Synthesized>,
}

/// The body of `stablehlo.reduce(...) applies OP`: `OP(%a, %b)` on 0-d tensors, returned.
#[derive(Debug, Clone)]
pub(crate) struct Synthesized {
    pub op: String,
    pub arg_type: u32,
    pub n_args: usize,
}

/// A result name: `%0` (count 1), `%0:3`, or one of `%a, %b`.
pub(crate) type ResultDef<'a> = (&'a str, u32);

/// One op whose regions are being read.
struct Frame<'a> {
    build: OpBuild<'a>,
    names: Vec<ResultDef<'a>>,
    loc: u32,
    op: u32,
    /// Regions read so far (ranges of `Program::blocks`), and the blocks of the one being read.
    regions: Vec<Span>,
    blocks: Vec<BlockData>,
    /// The ops of the block being read, and that block's arguments (`None`: no block open).
    ops: Vec<u32>,
    open_block: Option<Span>,
    /// The scope mark to return to when the region ends.
    mark: usize,
    /// Whether the op is in the generic form (its regions a list `({..}, {..})`); otherwise
    /// the custom form's `Tail` reads what comes between and after its regions.
    generic_list: bool,
    custom_tail: Option<ops::Tail>,
}

pub(crate) struct Reader<'a> {
    pub(crate) c: Cursor<'a>,
    pub(crate) p: Program,
    /// Visible SSA names: name -> (first value, count); `undo` restores shadowed ones. Names
    /// `%N` (MLIR's printer numbers most values) are kept by `N` in `numbered` instead
    /// (`UNBOUND` where none is visible).
    pub(crate) scope: FastMap<&'a str, (u32, u32)>,
    numbered: Vec<(u32, u32)>,
    pub(crate) undo: Vec<(&'a str, Option<(u32, u32)>)>,
    pub(crate) loc_aliases: FastMap<String, String>,
    /// Incremental line counting for implicit locations (ops are read in text order).
    pub(crate) line_pos: usize,
    pub(crate) line: usize,
    pub(crate) line_start: usize,
    /// The interned canonical text of each attribute value read (by its text as written and,
    /// for a constant's literal, its type): a program repeats few.
    canonical: FastMap<(&'a str, u32), u32>,
    /// The attributes of each distinct keyword section of a dot (by whether it is a plain
    /// `dot` and the section's text), built once (`ops::dot`).
    pub(crate) keyword_attrs: FastMap<(bool, &'a str), Vec<(u32, u32)>>,
    /// The input and result types of each function type read (by its text).
    function_types: FastMap<&'a str, (Vec<u32>, Vec<u32>)>,
}

/// No value bound to a number in [`Reader::numbered`].
const UNBOUND: (u32, u32) = (u32::MAX, 0);

/// The deepest nesting of regions read (each level is an op and its region on the stack).
pub const MAX_DEPTH: usize = 100_000;

/// The number of `\n` in `b`, counted in blocks of 255 bytes with a byte counter (which the
/// compiler vectorizes, unlike a `filter().count()` over the bytes).
fn count_lines(b: &[u8]) -> usize {
    b.chunks(255).map(|c| c.iter().fold(0u8, |n, &x| n + u8::from(x == b'\n')) as usize).sum()
}

impl<'a> Reader<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        // About one value per line in the custom form: the scope of SSA names sized once
        // (its regrowth copies made the reading's peak; sizing the program's arrays the same
        // way made the peak of reading and printing higher, measured).
        let lines = count_lines(text.as_bytes());
        let scope = FastMap::default();
        let numbered = Vec::with_capacity(lines);
        Reader {
            c: Cursor::new(text),
            p: Program {
                implicit_locs: ImplicitLocs { source: "\"-\"".to_string(), at: Vec::new() },
                ..Program::default()
            },
            scope,
            numbered,
            undo: Vec::new(),
            loc_aliases: FastMap::default(),
            line_pos: 0,
            line: 1,
            line_start: 0,
            canonical: FastMap::default(),
            keyword_attrs: FastMap::default(),
            function_types: FastMap::default(),
        }
    }

    pub(crate) fn intern(&mut self, s: &str) -> u32 {
        self.p.strings.intern(s)
    }

    pub(crate) fn attr(&mut self, name: &str, value: &str) -> (u32, u32) {
        (self.intern(name), self.intern(value))
    }

    /// The interned canonical text ([`super::attr::canonical`]) of attribute value `value`
    /// (with `ty`, the interned type of a literal `value : ty`; `u32::MAX` for none), worked
    /// out once per distinct text; an unsupported value fails at `at`.
    pub(crate) fn canonical_id(&mut self, value: &'a str, ty: u32, at: usize) -> Res<u32> {
        if let Some(&id) = self.canonical.get(&(value, ty)) {
            return Ok(id);
        }
        let text = if ty == u32::MAX {
            super::attr::canonical(value)
        } else {
            super::attr::canonical(&format!("{value} : {}", self.p.strings.get(ty)))
        };
        let id = self.intern(&text.map_err(|m| self.c.unsupported(at, m))?);
        self.canonical.insert((value, ty), id);
        Ok(id)
    }

    // ---------------------------------------------------------------------------------------
    // The module

    pub(crate) fn module(mut self) -> Result<Program, super::ReadError> {
        self.aliases()?;
        self.c.ws();
        let at = self.c.pos;
        let mut build = OpBuild { name: "builtin.module".into(), at, ..Default::default() };
        let explicit = self.c.eat_kw("module") || self.c.eat_kw("builtin.module");
        if explicit {
            if let Some(name) = self.c.symbol()? {
                let quoted = quote(&name);
                build.attrs.push(self.attr("sym_name", &quoted));
            }
            if self.c.eat_kw("attributes") {
                let attrs = self.attr_dict()?;
                build.attrs.extend(attrs);
            }
            self.c.expect("{")?;
        }
        // jaxlib's parser gives an implicit module line 0, column 0.
        let loc = if explicit { self.implicit_loc(at) } else { self.p.implicit_loc(0, 0) };
        let module_op = self.p.ops.len() as u32;
        self.p.ops.push(placeholder());
        let mut top: Vec<u32> = Vec::new();
        loop {
            if explicit && self.c.eat("}") {
                break;
            }
            if self.c.at_end() {
                if explicit {
                    return self.c.fail("'}' closing the module");
                }
                break;
            }
            if self.c.peek() == Some(b'#') || self.c.peek() == Some(b'!') {
                if explicit {
                    return self.c.fail("an op");
                }
                self.skip_alias()?;
                continue;
            }
            let op = self.op_tree()?;
            top.push(op);
        }
        if explicit {
            self.trailing_loc()?;
            loop {
                if self.c.at_end() {
                    break;
                }
                if self.c.peek() == Some(b'#') || self.c.peek() == Some(b'!') {
                    self.skip_alias()?;
                } else {
                    return self.c.fail("end of input after the module");
                }
            }
        }
        // Text holding one generic `"builtin.module"` op is that module (as for jaxlib).
        if !explicit && top.len() == 1 && self.p.op_name(top[0]) == "builtin.module" {
            self.p.ops[module_op as usize] = self.p.ops[top[0] as usize];
            return Ok(self.p);
        }
        let b0 = self.p.block_ops.len() as u32;
        self.p.block_ops.extend_from_slice(&top);
        let blk = self.p.blocks.len() as u32;
        let nv = self.p.value_types.len() as u32;
        self.p.blocks.push(BlockData { args: (nv, nv), ops: (b0, self.p.block_ops.len() as u32) });
        let r = self.p.regions.len() as u32;
        self.p.regions.push((blk, blk + 1));
        let a0 = self.p.attrs.len() as u32;
        self.p.attrs.extend(build.attrs);
        let name = self.intern("builtin.module");
        self.p.ops[module_op as usize] = OpData {
            name,
            operands: (0, 0),
            results: (nv, nv),
            attrs: (a0, self.p.attrs.len() as u32),
            regions: (r, r + 1),
            loc,
        };
        Ok(self.p)
    }

    // ---------------------------------------------------------------------------------------
    // SSA names

    pub(crate) fn mark(&self) -> usize {
        self.undo.len()
    }

    pub(crate) fn pop_to(&mut self, mark: usize) {
        while self.undo.len() > mark {
            let (name, prev) = self.undo.pop().expect("undo entry");
            if let Some(n) = self.number(name) {
                self.numbered[n] = prev.unwrap_or(UNBOUND);
                continue;
            }
            match prev {
                Some(v) => self.scope.insert(name, v),
                None => self.scope.remove(name),
            };
        }
    }

    /// `N` of a name `%N` (decimal, no leading zero) kept in `numbered`: `N` below a quarter of
    /// the text's length (so that `numbered` never outgrows the text), else `None`.
    fn number(&self, name: &str) -> Option<usize> {
        let d = name.as_bytes().get(1..)?;
        if d.is_empty() || d.len() > 9 || (d[0] == b'0' && d.len() > 1) || !d.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let n = d.iter().fold(0usize, |n, &c| n * 10 + usize::from(c - b'0'));
        (n < self.c.b.len() / 4).then_some(n)
    }

    pub(crate) fn bind(&mut self, name: &'a str, first: u32, count: u32) {
        let prev = match self.number(name) {
            Some(n) => {
                if n >= self.numbered.len() {
                    self.numbered.resize(n + 1, UNBOUND);
                }
                let prev = std::mem::replace(&mut self.numbered[n], (first, count));
                (prev != UNBOUND).then_some(prev)
            }
            None => self.scope.insert(name, (first, count)),
        };
        self.undo.push((name, prev));
    }

    /// The (first value, count) bound to `name`, if any.
    fn lookup(&self, name: &str) -> Option<(u32, u32)> {
        match self.number(name) {
            Some(n) => self.numbered.get(n).copied().filter(|&b| b != UNBOUND),
            None => self.scope.get(name).copied(),
        }
    }

    pub(crate) fn new_value(&mut self, ty: u32) -> u32 {
        self.p.value_types.push(ty);
        (self.p.value_types.len() - 1) as u32
    }

    /// A value use `%name` or `%name#i`, or `None` when no `%` is here.
    pub(crate) fn use_opt(&mut self) -> Res<Option<u32>> {
        let at = self.c.pos;
        let Some(name) = self.c.sigil_id(b'%') else { return Ok(None) };
        let index = if self.c.b.get(self.c.pos) == Some(&b'#') {
            self.c.pos += 1;
            self.c.expect_int("a result number after '#'")? as u32
        } else {
            0
        };
        match self.lookup(name) {
            Some((first, count)) if index < count => Ok(Some(first + index)),
            Some((_, count)) => Err(self.c.error(at, format!("{name} has {count} results, not #{index}"))),
            None => Err(self
                .c
                .error(at, format!("use of undefined value {name} (defined outside the module or after its use)"))),
        }
    }

    pub(crate) fn use_(&mut self) -> Res<u32> {
        match self.use_opt()? {
            Some(v) => Ok(v),
            None => self.c.fail("a value ('%name')"),
        }
    }

    /// Comma-separated uses; stops before a `,` that is not followed by `%` (which it takes:
    /// the keyword items of custom forms follow). Returns the uses and whether that comma was
    /// taken.
    pub(crate) fn uses(&mut self) -> Res<(Vec<u32>, bool)> {
        if self.c.peek() != Some(b'%') {
            return Ok((Vec::new(), false));
        }
        let mut out = Vec::with_capacity(2);
        loop {
            out.push(self.use_()?);
            if !self.c.eat(",") {
                return Ok((out, false));
            }
            if self.c.peek() != Some(b'%') {
                return Ok((out, true));
            }
        }
    }

    /// `(%a, %b)`.
    pub(crate) fn paren_uses(&mut self) -> Res<Vec<u32>> {
        self.c.expect("(")?;
        let mut out = Vec::new();
        if self.c.eat(")") {
            return Ok(out);
        }
        loop {
            out.push(self.use_()?);
            if self.c.eat(")") {
                return Ok(out);
            }
            self.c.expect(",")?;
        }
    }

    /// Checks that `values` have `types` (the uses' types written in the op).
    pub(crate) fn check_types(&mut self, values: &[u32], types: &[u32], at: usize) -> Res<()> {
        if values.len() != types.len() {
            return Err(self.c.error(at, format!("{} operands but {} operand types", values.len(), types.len())));
        }
        for (&v, &t) in values.iter().zip(types) {
            let have = self.p.value_types[v as usize];
            if have != t {
                return Err(self.c.error(
                    at,
                    format!(
                        "use of a value of type {} where {} is written",
                        self.p.strings.get(have),
                        self.p.strings.get(t)
                    ),
                ));
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------------------------------
    // Types and attributes

    pub(crate) fn ty(&mut self) -> Res<u32> {
        let t = self.c.type_text()?;
        Ok(self.intern(t))
    }

    /// `(T, U)` (possibly empty).
    pub(crate) fn type_list_paren(&mut self) -> Res<Vec<u32>> {
        self.c.expect("(")?;
        let mut out = Vec::new();
        if self.c.eat(")") {
            return Ok(out);
        }
        loop {
            out.push(self.ty()?);
            if self.c.eat(")") {
                return Ok(out);
            }
            self.c.expect(",")?;
        }
    }

    /// A function type `(A, B) -> C` or `(A) -> (B, C)`; each distinct text is read once (a
    /// program's ops repeat a few signatures).
    pub(crate) fn function_type(&mut self) -> Res<(Vec<u32>, Vec<u32>)> {
        self.c.ws();
        let start = self.c.pos;
        if let Ok(raw) = self.c.type_text() {
            if let Some(hit) = self.function_types.get(raw) {
                return Ok(hit.clone());
            }
        }
        self.c.pos = start;
        let inputs = self.type_list_paren()?;
        self.c.expect("->")?;
        let results = if self.c.peek() == Some(b'(') { self.type_list_paren()? } else { vec![self.ty()?] };
        let raw = &self.c.src[start..self.c.pos];
        self.function_types.insert(raw, (inputs.clone(), results.clone()));
        Ok((inputs, results))
    }

    /// `{name = value, unit_name, "quoted" = value}`: (interned name, interned canonical text).
    pub(crate) fn attr_dict(&mut self) -> Res<Vec<(u32, u32)>> {
        self.c.expect("{")?;
        let mut out = Vec::new();
        if self.c.eat("}") {
            return Ok(out);
        }
        loop {
            let at = self.c.pos;
            let name = if let Some(raw) = self.c.string_lit()? {
                unescape(raw)
            } else {
                match self.c.ident() {
                    Some(n) => n.to_string(),
                    None => return self.c.fail("an attribute name"),
                }
            };
            let value = if self.c.eat("=") {
                let v = self.c.balanced(b",}")?;
                if v.is_empty() {
                    return self.c.fail("an attribute value");
                }
                self.canonical_id(v, u32::MAX, at)?
            } else {
                self.intern("unit")
            };
            out.push((self.intern(&name), value));
            if self.c.eat("}") {
                return Ok(out);
            }
            self.c.expect(",")?;
        }
    }

    /// An optional attribute dictionary (`{...}` here).
    pub(crate) fn opt_attr_dict(&mut self, into: &mut Vec<(u32, u32)>) -> Res<()> {
        if self.c.peek() == Some(b'{') {
            let attrs = self.attr_dict()?;
            into.extend(attrs);
        }
        Ok(())
    }

    // ---------------------------------------------------------------------------------------
    // Ops and regions

    /// Reads one op and everything nested in it; returns its id.
    fn op_tree(&mut self) -> Res<u32> {
        let mut stack: Vec<Frame<'a>> = Vec::new();
        let mut done: Option<u32> = None;
        // Start: read the first op's head.
        self.push_op(&mut stack, &mut done)?;
        loop {
            if let Some(op) = done.take() {
                match stack.last_mut() {
                    None => return Ok(op),
                    Some(f) => {
                        if f.open_block.is_none() {
                            let nv = self.p.value_types.len() as u32;
                            f.open_block = Some((nv, nv));
                        }
                        f.ops.push(op)
                    }
                }
            }
            // Inside a region of the top frame: a block label, the region's end, or an op.
            if self.c.at("^") {
                self.block_label(&mut stack)?;
                continue;
            }
            if self.c.eat("}") {
                if self.region_end(&mut stack)? {
                    let op = self.finish_frame(&mut stack)?;
                    done = Some(op);
                }
                continue;
            }
            if self.c.at_end() {
                return self.c.fail("'}' closing a region");
            }
            if stack.len() > MAX_DEPTH {
                let at = self.c.pos;
                return Err(self.c.error(at, format!("regions nest more than {MAX_DEPTH} levels deep")));
            }
            self.push_op(&mut stack, &mut done)?;
        }
    }

    /// Reads an op's head. An op without regions (or with only made-up ones) is finished
    /// (`done`); one with regions is pushed with its first region opened.
    fn push_op(&mut self, stack: &mut Vec<Frame<'a>>, done: &mut Option<u32>) -> Res<()> {
        let names = self.result_defs()?;
        self.c.ws();
        let at = self.c.pos;
        let op_id = self.p.ops.len() as u32;
        self.p.ops.push(placeholder());
        let in_func = stack.last().is_some_and(|f| f.build.name == "func.func");
        let (build, tail) = if self.c.peek() == Some(b'"') {
            (self.generic_head(at)?, None)
        } else {
            let name = self.c.expect_ident("an op name")?;
            let name = qualify(name, in_func);
            let (build, tail) = ops::custom_head(self, &name, at, &names)?;
            (build, Some(tail))
        };
        // StableHLO's reduce parser takes its location after the op name (jaxlib 0.10.2).
        let loc_at = if frame_name_is_reduce(&build) { at + "stablehlo.reduce".len() } else { at };
        let implicit = self.implicit_loc(loc_at);
        let mut frame = Frame {
            build,
            names,
            loc: implicit,
            op: op_id,
            regions: Vec::new(),
            blocks: Vec::new(),
            ops: Vec::new(),
            open_block: None,
            mark: 0,
            generic_list: tail.is_none(),
            custom_tail: tail,
        };
        if frame.build.regions.iter().all(|r| r.synthesized.is_some()) {
            for i in 0..frame.build.regions.len() {
                let s = frame.build.regions[i].synthesized.clone().expect("synthesized");
                self.synthesize(&mut frame, &s);
            }
            *done = Some(self.finish_op(frame)?);
            return Ok(());
        }
        self.open_region(&mut frame)?;
        stack.push(frame);
        Ok(())
    }

    /// `%a, %b:2 =` before an op, or nothing.
    fn result_defs(&mut self) -> Res<Vec<ResultDef<'a>>> {
        if self.c.peek() != Some(b'%') {
            return Ok(Vec::new());
        }
        // Sized for the usual one name (growing an empty vector costs more than sizing it).
        let mut out = Vec::with_capacity(1);
        loop {
            let Some(name) = self.c.sigil_id(b'%') else { return self.c.fail("a result name") };
            let count = if self.c.eat(":") { self.c.expect_int("a result count")? as u32 } else { 1 };
            out.push((name, count));
            if self.c.eat("=") {
                return Ok(out);
            }
            self.c.expect(",")?;
        }
    }

    /// `"name"(operands) <{props}> ({regions})` up to the regions; the rest (`{attrs} : type`)
    /// is read by `generic_tail` once the regions are read.
    fn generic_head(&mut self, at: usize) -> Res<OpBuild<'a>> {
        let raw = self.c.string_lit()?.expect("peeked '\"'");
        let name = unescape(raw);
        let operands = self.paren_uses()?;
        if self.c.at("[") {
            let at = self.c.pos;
            return Err(self.c.unsupported(at, format!("{name}: successor blocks are not supported")));
        }
        let mut build = OpBuild { name, operands, at, generic: true, ..Default::default() };
        if self.c.eat("<") {
            let props = self.attr_dict()?;
            build.attrs.extend(props);
            self.c.expect(">")?;
        }
        if self.c.eat("(") {
            if self.c.peek() != Some(b'{') {
                return self.c.fail("'{' opening a region");
            }
            build.regions.push(Pending::default());
        } else {
            self.generic_tail(&mut build)?;
        }
        Ok(build)
    }

    fn generic_tail(&mut self, build: &mut OpBuild<'a>) -> Res<()> {
        let mut attrs = Vec::new();
        self.opt_attr_dict(&mut attrs)?;
        build.attrs.extend(attrs);
        self.c.expect(":")?;
        let at = self.c.pos;
        let (inputs, results) = self.function_type()?;
        self.check_types(&build.operands.clone(), &inputs, at)?;
        build.result_types = results;
        if build.name == "func.func" {
            build.func = Some(self.generic_func(build, at)?);
        }
        Ok(())
    }

    /// The `FuncData` of a `func.func` in the generic form, from its `function_type`,
    /// `arg_attrs` and `res_attrs` (which leave its attributes).
    fn generic_func(&mut self, build: &mut OpBuild<'a>, at: usize) -> Res<FuncData> {
        let mut func = FuncData::default();
        let mut keep = Vec::new();
        for &(n, v) in &build.attrs {
            let (name, value) = (self.p.strings.get(n).to_string(), self.p.strings.get(v).to_string());
            match name.as_str() {
                "function_type" => {
                    let mut sub = Reader::new(&value);
                    let (i, r) = sub.function_type().map_err(|e| self.c.error(at, e.message))?;
                    func.arg_types = i.iter().map(|&t| self.intern(sub.p.strings.get(t))).collect();
                    func.result_types = r.iter().map(|&t| self.intern(sub.p.strings.get(t))).collect();
                }
                "arg_attrs" | "res_attrs" => {
                    let mut sub = Reader::new(&value);
                    let dicts = sub.dict_list().map_err(|e| self.c.error(at, e.message))?;
                    let spans = dicts
                        .into_iter()
                        .map(|d| {
                            let a = self.p.attrs.len() as u32;
                            for (n, v) in d {
                                let pair = (self.intern(sub.p.strings.get(n)), self.intern(sub.p.strings.get(v)));
                                self.p.attrs.push(pair);
                            }
                            (a, self.p.attrs.len() as u32)
                        })
                        .collect();
                    if name == "arg_attrs" {
                        func.arg_attrs = spans;
                    } else {
                        func.result_attrs = spans;
                    }
                }
                _ => keep.push((n, v)),
            }
        }
        build.attrs = keep;
        Ok(func)
    }

    /// `[{...}, {...}]`.
    fn dict_list(&mut self) -> Res<Vec<Vec<(u32, u32)>>> {
        self.c.expect("[")?;
        let mut out = Vec::new();
        if self.c.eat("]") {
            return Ok(out);
        }
        loop {
            out.push(self.attr_dict()?);
            if self.c.eat("]") {
                return Ok(out);
            }
            self.c.expect(",")?;
        }
    }

    /// Opens the next pending region of `frame`: `{`, and the entry block with the arguments
    /// the custom form declared, or an argument-less one when ops follow directly.
    fn open_region(&mut self, frame: &mut Frame<'a>) -> Res<()> {
        let index = frame.regions.len();
        let pending = frame.build.regions[index].clone();
        frame.mark = self.mark();
        frame.blocks.clear();
        frame.ops.clear();
        frame.open_block = None;
        if let Some(s) = pending.synthesized {
            return Err(self.c.unsupported(frame.build.at, format!("{}: a made-up region among read ones", s.op)));
        }
        self.c.expect("{")?;
        if let Some(args) = pending.args {
            let first = self.p.value_types.len() as u32;
            for (name, ty) in args {
                let v = self.new_value(ty);
                self.bind(name, v, 1);
            }
            frame.open_block = Some((first, self.p.value_types.len() as u32));
        } else if !self.c.at("^") && !self.c.at("}") {
            let nv = self.p.value_types.len() as u32;
            frame.open_block = Some((nv, nv));
        }
        Ok(())
    }

    /// `^bb1(%a: T, %b: U):`: ends the current block and starts another.
    fn block_label(&mut self, stack: &mut [Frame<'a>]) -> Res<()> {
        let frame = stack.last_mut().expect("open frame");
        Self::close_block(&mut self.p, frame);
        self.c.sigil_id(b'^');
        let first = self.p.value_types.len() as u32;
        if self.c.eat("(") && !self.c.eat(")") {
            loop {
                let Some(name) = self.c.sigil_id(b'%') else { return self.c.fail("a block argument") };
                self.c.expect(":")?;
                let t = self.ty()?;
                self.trailing_loc()?;
                let v = self.new_value(t);
                self.bind(name, v, 1);
                if self.c.eat(")") {
                    break;
                }
                self.c.expect(",")?;
            }
        }
        self.c.expect(":")?;
        let frame = stack.last_mut().expect("open frame");
        frame.open_block = Some((first, self.p.value_types.len() as u32));
        Ok(())
    }

    /// Stores the open block (its arguments and the ops read into it), if any.
    fn close_block(p: &mut Program, frame: &mut Frame<'a>) {
        if let Some(args) = frame.open_block.take() {
            let a = p.block_ops.len() as u32;
            p.block_ops.extend_from_slice(&frame.ops);
            frame.blocks.push(BlockData { args, ops: (a, p.block_ops.len() as u32) });
        }
        frame.ops.clear();
    }

    /// After a region's `}`: stores the region; opens the next one or, when none is left,
    /// says the op's regions are read.
    fn region_end(&mut self, stack: &mut [Frame<'a>]) -> Res<bool> {
        let frame = stack.last_mut().expect("open frame");
        Self::close_block(&mut self.p, frame);
        self.store_region(frame);
        if frame.generic_list {
            if self.c.eat(",") {
                frame.build.regions.push(Pending::default());
                self.open_region(frame)?;
                return Ok(false);
            }
            self.c.expect(")")?;
            return Ok(true);
        }
        let tail = frame.custom_tail.take().expect("custom op");
        let more = ops::custom_between(self, &mut frame.build, &tail, frame.regions.len())?;
        frame.custom_tail = Some(tail);
        if more {
            self.open_region(frame)?;
            return Ok(false);
        }
        Ok(true)
    }

    fn store_region(&mut self, frame: &mut Frame<'a>) {
        let b0 = self.p.blocks.len() as u32;
        self.p.blocks.append(&mut frame.blocks);
        frame.regions.push((b0, self.p.blocks.len() as u32));
        self.pop_to(frame.mark);
    }

    fn finish_frame(&mut self, stack: &mut Vec<Frame<'a>>) -> Res<u32> {
        let mut frame = stack.pop().expect("open frame");
        if frame.generic_list {
            let mut build = std::mem::take(&mut frame.build);
            self.generic_tail(&mut build)?;
            frame.build = build;
        } else {
            let tail = frame.custom_tail.take().expect("custom op");
            ops::custom_tail(self, &mut frame.build, &tail)?;
        }
        self.finish_op(frame)
    }

    /// The body of `stablehlo.reduce ... applies OP`: `^bb0(%a: T, %b: T)`, `OP(%a, %b)`,
    /// `stablehlo.return`.
    fn synthesize(&mut self, frame: &mut Frame<'a>, s: &Synthesized) {
        let first = self.p.value_types.len() as u32;
        for _ in 0..s.n_args {
            self.new_value(s.arg_type);
        }
        let half = s.n_args as u32 / 2;
        let mut ops_ = Vec::new();
        let mut results = Vec::new();
        for i in 0..half {
            let name = self.intern(&s.op);
            let r = self.new_value(s.arg_type);
            ops_.push(self.push_op_data(name, &[first + i, first + half + i], (r, r + 1), frame.loc));
            results.push(r);
        }
        let ret = self.intern("stablehlo.return");
        let nv = self.p.value_types.len() as u32;
        ops_.push(self.push_op_data(ret, &results, (nv, nv), frame.loc));
        let a = self.p.block_ops.len() as u32;
        self.p.block_ops.extend_from_slice(&ops_);
        let b0 = self.p.blocks.len() as u32;
        let args = (first, first + s.n_args as u32);
        self.p.blocks.push(BlockData { args, ops: (a, self.p.block_ops.len() as u32) });
        frame.regions.push((b0, b0 + 1));
    }

    /// A region-less, attribute-less op made up by the reader.
    fn push_op_data(&mut self, name: u32, operands: &[u32], results: Span, loc: u32) -> u32 {
        let o0 = self.p.operands.len() as u32;
        self.p.operands.extend_from_slice(operands);
        let (a0, r0) = (self.p.attrs.len() as u32, self.p.regions.len() as u32);
        self.p.ops.push(OpData {
            name,
            operands: (o0, self.p.operands.len() as u32),
            results,
            attrs: (a0, a0),
            regions: (r0, r0),
            loc,
        });
        (self.p.ops.len() - 1) as u32
    }

    /// Allocates the op's results, binds its result names, reads its location and stores it.
    fn finish_op(&mut self, frame: Frame<'a>) -> Res<u32> {
        let Frame { build, names, mut loc, op, regions, .. } = frame;
        if let Some(l) = self.trailing_loc()? {
            loc = l;
        }
        let declared: u32 = names.iter().map(|&(_, n)| n).sum();
        if !names.is_empty() && declared as usize != build.result_types.len() {
            return Err(self.c.error(
                build.at,
                format!("{} names {} results but has {}", build.name, declared, build.result_types.len()),
            ));
        }
        let first = self.p.value_types.len() as u32;
        for &t in &build.result_types {
            self.new_value(t);
        }
        let mut next = first;
        for (name, count) in names {
            self.bind(name, next, count);
            next += count;
        }
        let name = self.intern(&build.name);
        let o0 = self.p.operands.len() as u32;
        self.p.operands.extend_from_slice(&build.operands);
        let a0 = self.p.attrs.len() as u32;
        self.p.attrs.extend_from_slice(&build.attrs);
        let r0 = self.p.regions.len() as u32;
        self.p.regions.extend_from_slice(&regions);
        self.p.ops[op as usize] = OpData {
            name,
            operands: (o0, self.p.operands.len() as u32),
            results: (first, self.p.value_types.len() as u32),
            attrs: (a0, self.p.attrs.len() as u32),
            regions: (r0, self.p.regions.len() as u32),
            loc,
        };
        if let Some(mut f) = build.func {
            f.op = op;
            self.p.funcs.push(f);
        }
        Ok(op)
    }
}

/// Whether `b` is a `stablehlo.reduce` in its custom form.
fn frame_name_is_reduce(b: &OpBuild<'_>) -> bool {
    b.name == "stablehlo.reduce" && !b.generic
}

fn placeholder() -> OpData {
    OpData { name: 0, operands: (0, 0), results: (0, 0), attrs: (0, 0), regions: (0, 0), loc: 0 }
}

/// The full name of an op written without its dialect: `return` in a function is
/// `func.return`, `call` is `func.call`.
fn qualify(name: &str, in_func: bool) -> String {
    if name.contains('.') {
        return name.to_string();
    }
    match (name, in_func) {
        ("return" | "call" | "call_indirect" | "constant", _) => format!("func.{name}"),
        ("func", _) => "func.func".to_string(),
        ("module", _) => "builtin.module".to_string(),
        _ => name.to_string(),
    }
}

pub(crate) use crate::text::quote;
