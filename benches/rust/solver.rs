//! The propagation solver alone, in Rust (criterion): Shardy's user-priority pass over the
//! generated MLP stacks of `tests/rust/common/program.rs` at about 2.7k, 22k and 86k ops (the
//! sizes of the Python benchmark's transformer steps, `benches/bench_propagate.py`), without
//! reading, freezing or writing a program. Reported per program; divide by the op count for
//! seconds per op (printed once per size).
//!
//! `cargo bench --bench solver` measures; `cargo test --benches` (run by `scripts/test`) runs
//! each size once to check that it works.

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use shardwise::propagation::{propagate, Pass, PassOptions};

/// The extension module's allocator (`rust/src/py`), so that the figures are the module's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../../tests/rust/common/program.rs"]
#[allow(dead_code)]
mod program;

/// MLP blocks per program: 4 ops each, plus the func and its return.
const LAYERS: [usize; 3] = [680, 5_500, 21_500];

fn user_priority(c: &mut Criterion) {
    let options = PassOptions { pass: Pass::UserPriority, ..PassOptions::default() };
    let mut group = c.benchmark_group("user-priority propagation");
    group.sample_size(10);
    for layers in LAYERS {
        let (graph, input) = program::mlp_stack(layers);
        let ops = 4 * layers + 2;
        group.bench_with_input(BenchmarkId::from_parameter(format!("{ops} ops")), &ops, |b, _| {
            b.iter_batched(|| input.clone(), |i| propagate(&graph, i, &options).unwrap(), BatchSize::LargeInput)
        });
    }
    group.finish();
}

criterion_group!(benches, user_priority);
criterion_main!(benches);
