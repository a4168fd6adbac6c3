"""Programs for tests and benchmarks, shared by shardwise's own tests (``tests/python``) and
benchmarks (``benches/``), and usable by anyone who wants the same inputs (as ``numpy.testing``).

| module            | what it makes                                                              |
|-------------------|----------------------------------------------------------------------------|
| ``programs``      | an N-layer transformer training step lowered from JAX (2.7k to 87k ops)   |
| ``real_models``   | training steps of flax models with optax optimizers, lowered raw from JAX |
| ``auto_programs`` | Builder programs (an MLP, a transformer block) for the sharding search    |
| ``textbook``      | the textbook plans (data, tensor, FSDP parallel) of the real models       |
| ``iopddl``        | the IOPDDL contest's example instance                                     |
| ``faults``        | the fault corpus: broken inputs, run in memory-limited worker processes   |

They need the test extra (``pip install 'shardwise[test]'``: jax, flax, optax), imported when a
program is made, and 8 host devices: ``XLA_FLAGS=--xla_force_host_platform_device_count=8``
before jax is imported.
"""
