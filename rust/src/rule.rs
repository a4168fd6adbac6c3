//! Operation sharding rules (Shardy `OpShardingRuleAttr`): factors with sizes, the factors of
//! each operand and result dimension, factor kinds. Filled in by the rules work.
