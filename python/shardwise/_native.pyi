"""Type stubs of the PyO3 module ``shardwise._native`` (checked by ``mypy.stubtest`` in CI).

Values cross the FFI as plain tuples; see ``rust/src/py/wire.rs``."""

from typing import Any, TypeAlias, final

__version__: str
__all__ = [
    "BuiltinRule",
    "CandidateBatch",
    "ConversionError",
    "ForbiddenComponent",
    "FrozenGraph",
    "FuncTables",
    "InvalidRuleError",
    "InvalidShardingError",
    "LowerBound",
    "MeshError",
    "MlirReadError",
    "MlirVerifyError",
    "NativeCandidates",
    "NativeProgram",
    "ProgramFacts",
    "ProgramTables",
    "ProgramWalk",
    "PropagationOptions",
    "PropagationResult",
    "RuleRegistry",
    "ShardingError",
    "ShardingParseError",
    "ShardwiseError",
    "__version__",
    "axes_set_diff",
    "axes_sort_and_merge",
    "axes_sorted",
    "axis_op",
    "axis_parse",
    "axis_print",
    "builtin_rule",
    "collective_cost",
    "custom_call_target",
    "einsum_check",
    "factor_symbol",
    "from_hlo_sharding",
    "from_mindspore_layout",
    "mesh_new",
    "mesh_op_parse",
    "mesh_op_print",
    "mesh_parse",
    "mesh_print",
    "mlir_nesting",
    "mlir_quote",
    "mlir_unquote",
    "native_pass_options",
    "native_passes",
    "op_properties",
    "print_mlir",
    "propagate_shardings",
    "propagation_edges_text",
    "read_mlir",
    "redistribution_plan",
    "rule_build",
    "rule_check",
    "rule_from_einsum",
    "rule_parse",
    "rule_pointwise",
    "rule_print",
    "rule_registry",
    "rule_validate",
    "run_native_passes",
    "run_native_passes_many",
    "run_native_programs_many",
    "search_bound",
    "search_components",
    "search_local",
    "search_prices",
    "search_stop",
    "sharding_check_local",
    "sharding_device_ranges",
    "sharding_local_shape",
    "sharding_origins_text",
    "sharding_parse",
    "sharding_per_value_parse",
    "sharding_per_value_print",
    "sharding_print",
    "sharding_validate",
    "to_hlo_sharding",
    "to_mindspore_layout",
    "walk_program",
]

_AxisW: TypeAlias = tuple[str, tuple[int, int] | None]
_MeshW: TypeAlias = tuple[list[tuple[str, int]], list[int]]
_DimW: TypeAlias = tuple[list[_AxisW], bool, int | None]
_ShardingW: TypeAlias = tuple[str | None, _MeshW | None, list[_DimW], list[_AxisW], list[_AxisW], str]

class ShardwiseError(ValueError): ...
class ShardingError(ShardwiseError): ...
class ShardingParseError(ShardingError): ...
class InvalidShardingError(ShardingError): ...
class MeshError(ShardingError): ...
class ConversionError(ShardingError): ...

class MlirReadError(ShardwiseError):
    line: int
    column: int
    unsupported: bool

class MlirVerifyError(ShardwiseError):
    after_passes: bool
    op_index: int
    op_name: str
    location: str
    detail: str

@final
class FuncTables:
    @property
    def op(self) -> int: ...
    @property
    def arg_types(self) -> list[int]: ...
    @property
    def result_types(self) -> list[int]: ...
    @property
    def arg_attrs(self) -> list[list[tuple[int, int]]]: ...
    @property
    def result_attrs(self) -> list[list[tuple[int, int]]]: ...

@final
class ProgramTables:
    @property
    def strings(self) -> list[str]: ...
    @property
    def op_names(self) -> list[int]: ...
    @property
    def op_locs(self) -> list[int]: ...
    @property
    def operand_offsets(self) -> list[int]: ...
    @property
    def operands(self) -> list[int]: ...
    @property
    def result_offsets(self) -> list[int]: ...
    @property
    def attr_offsets(self) -> list[int]: ...
    @property
    def attr_names(self) -> list[int]: ...
    @property
    def attr_values(self) -> list[int]: ...
    @property
    def region_offsets(self) -> list[int]: ...
    @property
    def region_blocks(self) -> list[int]: ...
    @property
    def block_args(self) -> list[int]: ...
    @property
    def block_op_offsets(self) -> list[int]: ...
    @property
    def block_ops(self) -> list[int]: ...
    @property
    def value_types(self) -> list[int]: ...
    @property
    def funcs(self) -> list[FuncTables]: ...

def read_mlir(text: str, source_name: str = "-", *, verify: bool = False) -> ProgramTables: ...

@final
class NativeProgram:
    @staticmethod
    def read(text: str, source_name: str = "-") -> NativeProgram: ...
    def run(self, passes: list[str]) -> NativeProgram: ...
    def print(self, *, strict: bool = False) -> str: ...
    def tables(self) -> ProgramTables: ...
    def meshes(self) -> list[tuple[str, str]]: ...
    def main_signature(self) -> tuple[str, list[str], list[str]]: ...
    def main_shardings(self) -> tuple[list[_ShardingW | None], list[_ShardingW | None]]: ...
    def guarded_args(self) -> list[int] | None: ...
    def annotated(self, annotations: list[_AnnotationW]) -> NativeProgram: ...
    def __len__(self) -> int: ...

# CandidateBatch on a native program (rust/src/py/candidates.rs)
_AnnotationW: TypeAlias = tuple[bool, int, _ShardingW | None]

@final
class NativeCandidates:
    def __new__(cls, program: NativeProgram, before: list[str], conservative: bool) -> NativeCandidates: ...
    def propagate(self, candidates: list[list[_AnnotationW]], threads: int = 1) -> list[PropagationResult]: ...
    def main_shardings(self, result: PropagationResult) -> tuple[list[_ShardingW | None], list[_ShardingW | None]]: ...
    def materialize(
        self, annotations: list[_AnnotationW], result: PropagationResult, after: list[str]
    ) -> NativeProgram: ...

def run_native_programs_many(programs: list[NativeProgram], passes: list[str], threads: int) -> list[NativeProgram]: ...
def run_native_passes(text: str, passes: list[str], name: str = "-") -> str: ...
def run_native_passes_many(texts: list[str], passes: list[str], threads: int) -> list[str]: ...
def native_passes() -> list[str]: ...
def native_pass_options() -> dict[str, list[str]]: ...
def op_properties() -> dict[str, list[str]]: ...
def print_mlir(text: str, *, verify: bool = False, strict: bool = False) -> str: ...
def mlir_nesting(text: str, max_braces: int, max_brackets: int) -> tuple[tuple[int, int], tuple[int, int]]: ...

@final
class ProgramWalk:
    @property
    def class_reps(self) -> list[int]: ...
    @property
    def op_classes(self) -> list[int]: ...
    @property
    def sharded_results(self) -> list[int]: ...
    @property
    def block_args(self) -> list[int]: ...
    @property
    def non_tensor_values(self) -> list[int]: ...
    @property
    def symbol_ops(self) -> list[int]: ...
    @property
    def num_ops(self) -> int: ...
    @property
    def num_values(self) -> int: ...

def walk_program(
    top_ops: list[Any], singletons: set[str], tensor_type: type
) -> tuple[ProgramWalk, list[Any], list[Any], tuple[int, int] | None]: ...

@final
class FrozenGraph:
    def __new__(
        cls,
        names: list[str],
        op_name: list[int],
        op_parent: list[int],
        operand_counts: list[int],
        operands: list[int],
        result_counts: list[int],
        results: list[int],
        ranks: list[int],
        dims: list[int],
        value_block_owner: list[int],
        rules: list[Any],
        op_rule: list[int],
    ) -> FrozenGraph: ...
    @staticmethod
    def from_walk(walk: ProgramWalk, rules: list[Any], class_rule: list[int]) -> FrozenGraph: ...
    @property
    def num_ops(self) -> int: ...
    @property
    def num_values(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    def op_name(self, op: int) -> str: ...
    def operands(self, op: int) -> list[int]: ...
    def results(self, op: int) -> list[int]: ...
    def users(self, value: int) -> list[int]: ...
    def shape(self, value: int) -> list[int]: ...
    def defining_op(self, value: int) -> int | None: ...
    def parent(self, op: int) -> int | None: ...
    def rule(self, op: int) -> str | None: ...
    @property
    def op_rules(self) -> list[int]: ...
    def ops_named(self, names: list[str]) -> list[int]: ...
    @property
    def num_rules(self) -> int: ...

def mesh_new(mesh: _MeshW) -> _MeshW: ...
def mesh_parse(text: str) -> _MeshW: ...
def mesh_op_parse(text: str) -> tuple[str, _MeshW]: ...
def mesh_print(mesh: _MeshW) -> str: ...
def mesh_op_print(name: str, mesh: _MeshW) -> str: ...
def mlir_quote(s: str) -> str: ...
def mlir_unquote(s: str) -> str: ...
def sharding_parse(text: str, meshes: dict[str, _MeshW] | None = None) -> _ShardingW: ...
def sharding_per_value_parse(text: str, meshes: dict[str, _MeshW] | None = None) -> list[_ShardingW]: ...
def sharding_print(sharding: _ShardingW) -> str: ...
def sharding_per_value_print(shardings: list[_ShardingW]) -> str: ...
def sharding_check_local(sharding: _ShardingW) -> None: ...
def sharding_validate(
    sharding: _ShardingW, mesh: _MeshW, shape: list[int] | None = None, user: bool = False
) -> None: ...
def sharding_local_shape(sharding: _ShardingW, mesh: _MeshW, shape: list[int]) -> list[int]: ...
def sharding_device_ranges(
    sharding: _ShardingW, mesh: _MeshW, shape: list[int], device: int
) -> list[tuple[int, int]]: ...
def axes_sorted(axes: list[_AxisW], mesh: _MeshW) -> list[_AxisW]: ...
def axis_op(op: str, a: _AxisW, b: _AxisW | None = None, mesh: _MeshW | None = None) -> Any: ...
def axis_print(a: _AxisW) -> str: ...
def axis_parse(text: str) -> _AxisW: ...
def to_hlo_sharding(sharding: _ShardingW, mesh: _MeshW) -> str: ...
def from_hlo_sharding(
    text: str, rank: int, mesh: _MeshW | None = None, mesh_name: str | None = None
) -> tuple[_ShardingW, _MeshW]: ...
def to_mindspore_layout(sharding: _ShardingW, mesh: _MeshW) -> tuple[list[int], list[list[int]]]: ...
def from_mindspore_layout(
    device_matrix: list[int],
    tensor_map: list[list[int]],
    mesh: _MeshW | None = None,
    axis_names: list[str] | None = None,
    mesh_name: str | None = None,
) -> tuple[_ShardingW, _MeshW]: ...

# ---- operation sharding rules (rust/src/py/rule.rs)

_RuleW: TypeAlias = tuple[
    list[int], list[list[list[int]]], list[list[list[int]]], list[int], list[int], list[int], list[int], bool
]
_StepW: TypeAlias = tuple[str, list[int], list[int], int, str, bool]

class InvalidRuleError(InvalidShardingError): ...

def rule_parse(text: str) -> _RuleW: ...
def rule_print(r: _RuleW) -> str: ...
def rule_check(r: _RuleW) -> None: ...
def rule_validate(
    r: _RuleW, operand_shapes: list[list[int] | None], result_shapes: list[list[int] | None], exact_sizes: bool = False
) -> None: ...
def rule_build(operand_ranks: list[int], result_ranks: list[int], steps: list[_StepW]) -> _RuleW: ...
def rule_pointwise(operand_ranks: list[int], result_ranks: list[int], shape: list[int]) -> _RuleW: ...
def einsum_check(
    spec: str,
    reduction: list[str] = ...,
    need_replication: list[str] = ...,
    permutation: list[str] = ...,
    blocked: list[str] = ...,
    factor_sizes: list[tuple[str, int]] = ...,
) -> None: ...
def rule_from_einsum(
    spec: str,
    operand_shapes: list[list[int]],
    result_shapes: list[list[int]],
    reduction: list[str] = ...,
    need_replication: list[str] = ...,
    permutation: list[str] = ...,
    blocked: list[str] = ...,
    factor_sizes: list[tuple[str, int]] = ...,
) -> _RuleW: ...
def factor_symbol(index: int) -> str: ...

# Builtin sharding rule registry (rust/src/py/registry.rs)
@final
class BuiltinRule:
    @property
    def status(self) -> str: ...
    @property
    def rule(self) -> _RuleW | None: ...

@final
class RuleRegistry:
    @property
    def builtin_ops(self) -> list[str]: ...
    @property
    def custom_call_targets(self) -> list[str]: ...
    @property
    def no_rule_ops(self) -> list[str]: ...
    @property
    def terminator_ops(self) -> list[str]: ...
    @property
    def no_rule_targets(self) -> list[str]: ...
    @property
    def context_ops(self) -> list[str]: ...

def builtin_rule(op: Any, conservative: bool = False) -> BuiltinRule: ...
def custom_call_target(name: str, attributes: list[tuple[str, str]]) -> str: ...
def rule_registry() -> RuleRegistry: ...

# Propagation (rust/src/py/propagation.rs)

_LayerW: TypeAlias = tuple[int | None, int | None, str]
_NodeW: TypeAlias = tuple[str, int, int | None]
_ConflictW: TypeAlias = tuple[
    int,
    int | None,
    int,
    _LayerW,
    int,
    _NodeW,
    _NodeW,
    list[_AxisW],
    str,
    tuple[_NodeW, int | None, _AxisW | None] | None,
]

@final
class PropagationResult:
    @property
    def shardings(self) -> list[_ShardingW | None]: ...
    @property
    def sharding_table(self) -> tuple[list[_ShardingW], list[int]]: ...
    def write_result_shardings(self, graph: FrozenGraph, values: list[Any], objects: list[Any]) -> list[int]: ...
    def shardings_of(self, values: list[int]) -> list[_ShardingW | None]: ...
    @property
    def func_results(self) -> list[tuple[int, list[_ShardingW | None]]]: ...
    @property
    def erased_ops(self) -> list[int]: ...
    @property
    def rule_ops(self) -> list[int]: ...
    @property
    def group_conflicts(self) -> list[tuple[int, list[int], _ShardingW]]: ...
    @property
    def rounds(self) -> int: ...
    @property
    def visits(self) -> int: ...
    @property
    def updates(self) -> int: ...
    @property
    def has_debug(self) -> bool: ...
    @property
    def debug_origins(self) -> list[tuple[int, list[tuple[_AxisW, tuple[str, int, int]]]]]: ...
    @property
    def debug_edges(self) -> list[tuple[int, list[tuple[_AxisW, list[tuple[str, int, str, int, int]]]]]]: ...
    @property
    def debug_func_result_edges(
        self,
    ) -> list[tuple[int, list[list[tuple[_AxisW, list[tuple[str, int, str, int, int]]]]]]]: ...
    @property
    def debug_origin_names(self) -> list[tuple[int, str]]: ...
    @property
    def debug_missing_origins(self) -> list[tuple[int, _AxisW]]: ...
    @property
    def debug_steps(self) -> list[tuple[int, int, _LayerW]]: ...
    @property
    def debug_hops(self) -> list[tuple[int, int, _AxisW, int | None, _NodeW, _NodeW]]: ...
    @property
    def debug_conflicts(self) -> list[_ConflictW]: ...
    @property
    def debug_next_step(self) -> int | None: ...

@final
class ProgramFacts:
    def __new__(
        cls,
        *,
        main_func: int | None = None,
        callees: list[tuple[int, int]] = ...,
        symbol_users: list[int] = ...,
        manual_axes: list[tuple[int, list[str]]] = ...,
        sharding_groups: list[tuple[int, int]] = ...,
        barrier_directions: list[tuple[int, str]] = ...,
        side_effecting_ops: list[int] = ...,
        offload_ops: list[int] = ...,
        non_tensor_values: list[int] = ...,
        forward_use_order_values: list[int] = ...,
    ) -> ProgramFacts: ...

@final
class PropagationOptions:
    def __new__(
        cls,
        *,
        pass_name: str = "basic",
        strategy: str = "aggressive",
        conservative: bool = False,
        run_op_priority: bool = True,
        debug_sharding_origins: bool = False,
        debug_propagation_edges: bool = False,
        debug_first_step: int = 0,
        debug_skip_ops: list[int] = ...,
        debug_explain: bool = False,
    ) -> PropagationOptions: ...

def propagate_shardings(
    graph: FrozenGraph,
    meshes: dict[str, _MeshW],
    shardings: list[_ShardingW | None],
    func_results: list[tuple[int, list[_ShardingW | None]]],
    facts: ProgramFacts,
    options: PropagationOptions,
) -> PropagationResult: ...

@final
class CandidateBatch:
    def __new__(
        cls,
        graph: FrozenGraph,
        meshes: dict[str, _MeshW],
        shardings: list[_ShardingW | None],
        func_results: list[tuple[int, list[_ShardingW | None]]],
        facts: ProgramFacts,
        options: PropagationOptions,
    ) -> CandidateBatch: ...
    def propagate(
        self,
        candidates: list[tuple[list[tuple[int, _ShardingW | None]], list[tuple[int, int, _ShardingW | None]]]],
        threads: int = 1,
    ) -> list[PropagationResult]: ...

def sharding_origins_text(entries: list[tuple[_AxisW, str]]) -> str: ...
def propagation_edges_text(entries: list[tuple[_AxisW, list[tuple[str, int, str, int, int]]]]) -> str | None: ...

_CostModelW: TypeAlias = tuple[tuple[float, float], list[tuple[str, float, float]]]
_ReshardStepW: TypeAlias = tuple[
    str, list[list[_AxisW]], list[_AxisW], int | None, int | None, str | None, _ShardingW, float, float, str
]

def redistribution_plan(
    mesh: _MeshW, shape: list[int], dtype_bytes: int, src: _ShardingW, tgt: _ShardingW, model: _CostModelW
) -> tuple[list[_ReshardStepW], float, float, float, float]: ...
def collective_cost(
    kind: str, mesh: _MeshW, axes: list[_AxisW], local_bytes: float, model: _CostModelW
) -> tuple[float, float]: ...

# axis lists (rust/src/py/axes.rs)
def axes_set_diff(a: list[_AxisW], b: list[_AxisW], mesh: _MeshW) -> list[_AxisW]: ...
def axes_sort_and_merge(a: list[_AxisW], mesh: _MeshW) -> list[_AxisW]: ...

# search (rust/src/py/search.rs): a strategy graph as (offsets, cost, usage, intervals, edges,
# edge_offsets, edge_cost, usage_limit), the int64 arrays as little-endian bytes
_GraphW: TypeAlias = tuple[
    list[int], bytes, bytes, list[tuple[int, int]], list[tuple[int, int]], list[int], bytes, int | None
]

def search_local(
    graph: _GraphW,
    time_limit: float,
    seed: int = 0,
    initial: list[int] | None = None,
    max_rounds: int | None = None,
    lagrange_share: float = 0.8,
) -> tuple[list[int], int, int, bool, int, int]: ...
def search_prices(
    graph: _GraphW, time_limit: float, seed: int = 0, max_cycles: int | None = None
) -> tuple[list[float], float] | None: ...
def search_stop(stop: bool) -> None: ...

@final
class LowerBound:
    @property
    def bound(self) -> int: ...
    @property
    def unpriced(self) -> int: ...
    @property
    def forests(self) -> int: ...
    @property
    def rounds(self) -> int: ...
    @property
    def assignment(self) -> list[int]: ...

@final
class ForbiddenComponent:
    @property
    def nodes(self) -> list[int]: ...
    @property
    def joints(self) -> list[int]: ...
    @property
    def count(self) -> int: ...

def search_components(graph: _GraphW) -> list[ForbiddenComponent]: ...
def search_bound(
    graph: _GraphW, time_limit: float, target: int | None = None, max_rounds: int | None = None
) -> LowerBound: ...
