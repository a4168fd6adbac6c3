//! Representation invariants, text form and per-device view of the pure Rust core.

use shardwise::text::{
    parse_mesh, parse_mesh_op, parse_sharding, parse_sharding_per_value, print_mesh, print_sharding,
    print_sharding_per_value,
};
use shardwise::{AxisRef, ErrorKind, Mesh, MeshAxis, TensorSharding};

fn mesh(axes: &[(&str, i64)]) -> Mesh {
    Mesh::new(axes.iter().map(|(n, s)| MeshAxis { name: n.to_string(), size: *s }).collect(), vec![]).unwrap()
}

fn rule_of(t: &TensorSharding, m: &Mesh, shape: Option<&[i64]>, user: bool) -> Option<&'static str> {
    t.validate(m, shape, user).err().and_then(|e| e.rule())
}

#[test]
fn mesh_text_round_trips() {
    for text in [
        r#"#sdy.mesh<["x"=2, "y"=4]>"#,
        r#"#sdy.mesh<[]>"#,
        r#"#sdy.mesh<[], device_ids=[3]>"#,
        r#"#sdy.mesh<["a"=3, "b"=2], device_ids=[0, 2, 4, 1, 3, 5]>"#,
        r#"#sdy.mesh<["we\22ird\\name"=2]>"#,
    ] {
        assert_eq!(print_mesh(&parse_mesh(text).unwrap()), text);
    }
    let (name, m) = parse_mesh_op(r#"sdy.mesh @"my mesh" = <["x"=8]>"#).unwrap();
    assert_eq!((name.as_str(), m.total_size()), ("my mesh", 8));
}

#[test]
fn mesh_errors() {
    for (text, needle) in [
        (r#"#sdy.mesh<["x"=0]>"#, "size >= 1"),
        (r#"#sdy.mesh<["x"=2, "x"=2]>"#, "duplicate"),
        (r#"#sdy.mesh<["x"=2], device_ids=[0, 1]>"#, "iota"),
        (r#"#sdy.mesh<["x"=2], device_ids=[0, 0]>"#, "permutation"),
        (r#"#sdy.mesh<["x"=2], device_ids=[1]>"#, "device ids"),
        (r#"#sdy.mesh<[], device_ids=[1, 0]>"#, "at most one"),
        (r#"#sdy.mesh<[], device_ids=[-1]>"#, "non-negative"),
        (r#"#sdy.mesh<["x"=4611686018427387904, "y"=4]>"#, "overflows"),
    ] {
        let e = parse_mesh(text).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Mesh, "{text}");
        assert!(e.message.contains(needle), "{text}: {}", e.message);
    }
    // The builder drops iota device ids instead.
    let m = Mesh::new(vec![MeshAxis { name: "x".into(), size: 2 }], vec![0, 1]).unwrap();
    assert!(m.device_ids().is_empty());
}

#[test]
fn sharding_text_round_trips() {
    for text in [
        r#"#sdy.sharding<@mesh, [{"x", "y":(2)2, ?}p1, {}], replicated={"z"}>"#,
        r#"#sdy.sharding<@mesh, [{?}, {"x"}p0], unreduced={"y"}>"#,
        r#"#sdy.sharding<@mesh, [], replicated={"x", "y":(1)2}, unreduced=max{"z"}>"#,
        r#"#sdy.sharding<mesh<["a"=2]>, [{"a"}]>"#,
        r#"#sdy.sharding<mesh<[], device_ids=[3]>, []>"#,
        r#"#sdy.sharding<@"mesh-1", [{}]>"#,
    ] {
        assert_eq!(print_sharding(&parse_sharding(text).unwrap()), text);
    }
    let pv = r#"#sdy.sharding_per_value<[<@mesh, [{"x"}]>, <@mesh, []>]>"#;
    assert_eq!(print_sharding_per_value(&parse_sharding_per_value(pv).unwrap()), pv);
    assert_eq!(
        print_sharding_per_value(&parse_sharding_per_value("#sdy.sharding_per_value<[]>").unwrap()),
        "#sdy.sharding_per_value<[]>"
    );
    // Whitespace and comments are tolerated, output is canonical.
    let loose = "#sdy.sharding< @mesh ,[ {\"a\",\"b\",?} // c\n, {?} ]>";
    assert_eq!(print_sharding(&parse_sharding(loose).unwrap()), r#"#sdy.sharding<@mesh, [{"a", "b", ?}, {?}]>"#);
}

#[test]
fn malformed_text_is_a_parse_error() {
    for text in [
        "",
        "#sdy.sharding<@mesh",
        "#sdy.sharding<@mesh, [{\"x\"}",
        "#sdy.sharding<@mesh, [{x}]>",
        "#sdy.sharding<@mesh, [{\"x\":(1}]>",
        "#sdy.sharding<@mesh, [{\"x\":(1)99999999999999999999}]>",
        "#sdy.sharding<@mesh, [{}]> trailing",
        "#sdy.sharding<@mesh, [{\"unterminated}]>",
        "#sdy.sharding<@mesh, [], replicated=\"x\">",
        "#sdy.sharding<@mesh, [], bogus={}>",
        "#sdy.sharding<@, []>",
    ] {
        let e = parse_sharding(text).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::Parse { .. }), "{text:?}: {e:?}");
    }
}

#[test]
fn each_invariant_has_its_rule() {
    let m = mesh(&[("x", 2), ("y", 8), ("z", 2)]);
    let cases: &[(&str, Option<&[i64]>, bool, &str)] = &[
        (r#"<@m, [{"x"}, {"x"}]>"#, None, false, "duplicate-axis"),
        (r#"<@m, [{"w"}]>"#, None, false, "unknown-axis"),
        (r#"<@m, [{"y":(1)2, "y":(2)2}]>"#, None, false, "mergeable-sub-axes"),
        (r#"<@m, [{"y":(1)4}, {"y":(2)4}]>"#, None, false, "overlapping-sub-axes"),
        (r#"<@m, [{"y":(1)8}]>"#, None, false, "sub-axis-is-full-axis"),
        (r#"<@m, [{"y":(3)2}]>"#, None, false, "sub-axis-divisibility"),
        (r#"<@m, [{"y":(0)2}]>"#, None, false, "sub-axis-pre-size"),
        (r#"<@m, [{"y":(2)1}]>"#, None, false, "sub-axis-size"),
        (r#"<@m, [{"y"}, {"y":(2)2}]>"#, None, false, "full-and-sub-axis"),
        (r#"<@m, [{}], replicated={"z", "x"}>"#, None, false, "unsorted-replicated"),
        (r#"<@m, [{}], unreduced={"y":(4)2, "y":(1)2}>"#, None, false, "unsorted-unreduced"),
        (r#"<@m, [{}p1]>"#, None, false, "priority-on-empty-closed-dim"),
        (r#"<@m, [{"x"}, {}]>"#, Some(&[4]), false, "rank-mismatch"),
        (r#"<@m, [{"x"}, {"y", "z"}]>"#, Some(&[1, 4]), true, "dim-exhausted"),
        (r#"<@m, [{"x"}]>"#, Some(&[0]), true, "zero-size-dim-sharded"),
        (r#"<@m, [{"y":(2)2}]>"#, None, true, "sub-axis-in-user-sharding"),
    ];
    for (text, shape, user, rule) in cases {
        // Mesh-free rules already fail while parsing.
        let got = match parse_sharding(text) {
            Ok(t) => rule_of(&t, &m, *shape, *user),
            Err(e) => e.rule(),
        };
        assert_eq!(got, Some(*rule), "{text}");
    }
    // Negative priorities are rejected while parsing (mesh-free check).
    assert_eq!(parse_sharding(r#"<@m, [{"x"}p-1]>"#).map(|_| ()).unwrap_err().rule(), None);
    // Valid: the RFC's own examples.
    let t = parse_sharding(r#"<@m, [{"x"}, {"y":(2)2}], replicated={"y":(1)2}>"#).unwrap();
    assert_eq!(rule_of(&t, &m, Some(&[4, 8]), false), None);
    let t = parse_sharding(r#"<@m, [{"x"}, {"z", "y"}]>"#).unwrap();
    assert_eq!(rule_of(&t, &m, Some(&[4, 8]), true), None);
    // Non-divisible dimensions are allowed: x=8, y=2, z=3 on tensor<7x3x8>.
    let m2 = mesh(&[("x", 8), ("y", 2), ("z", 3)]);
    let t = parse_sharding(r#"<@m, [{"x"}, {"y"}, {"z"}]>"#).unwrap();
    assert_eq!(rule_of(&t, &m2, Some(&[7, 3, 8]), true), None);
    assert_eq!(t.local_shape(&m2, &[7, 3, 8]).unwrap(), vec![1, 2, 3]);
    // Shardy's propagation itself can exceed a dimension; only user annotations reject that.
    let t = parse_sharding(r#"<@m, [{"x", "z"}]>"#).unwrap();
    assert_eq!(rule_of(&t, &m, Some(&[2]), false), None);
    assert_eq!(rule_of(&t, &m, Some(&[2]), true), Some("dim-exhausted"));
}

#[test]
fn maximal_and_empty_meshes() {
    let maximal = Mesh::maximal(3).unwrap();
    let t = parse_sharding("#sdy.sharding<mesh<[], device_ids=[3]>, []>").unwrap();
    assert!(t.validate(&maximal, None, false).is_ok());
    assert_eq!(t.device_ranges(&maximal, &[4, 4], 3).unwrap(), vec![(0, 4), (0, 4)]);
    assert!(t.device_ranges(&maximal, &[4, 4], 0).is_err());
    let bad = parse_sharding(r#"<@m, [{}]>"#).unwrap();
    assert_eq!(bad.validate(&maximal, None, false).unwrap_err().rule(), Some("maximal-mesh-sharding"));
    assert_eq!(Mesh::empty().total_size(), 0);
}

#[test]
fn local_shape_and_device_ranges() {
    let m = mesh(&[("x", 2), ("y", 4), ("z", 2)]);
    // The RFC example: tensor<4x8> sharded [{"x"}, {"z", "y"}] has local shape 2x1.
    let t = parse_sharding(r#"<@m, [{"x"}, {"z", "y"}]>"#).unwrap();
    assert_eq!(t.local_shape(&m, &[4, 8]).unwrap(), vec![2, 1]);
    // Device 1 is x=0, y=0, z=1: dim 1 shard index z*4 + y = 4.
    assert_eq!(t.device_ranges(&m, &[4, 8], 1).unwrap(), vec![(0, 2), (4, 5)]);
    // Padding: 7 elements over 2 shards is 4 + 3.
    let p = parse_sharding(r#"<@m, [{"x"}]>"#).unwrap();
    assert_eq!(p.local_shape(&m, &[7]).unwrap(), vec![4]);
    assert_eq!(p.device_ranges(&m, &[7], 8).unwrap(), vec![(4, 7)]);
    // Sub-axis "y":(2)2 of y=4 is the coordinate (y / 1) % 2... of a [2, 2] split: minor half.
    let s = parse_sharding(r#"<@m, [{"y":(2)2}]>"#).unwrap();
    let ys: Vec<i64> = (0..4).map(|y| s.device_ranges(&m, &[8], y * 2).unwrap()[0].0).collect();
    assert_eq!(ys, vec![0, 4, 0, 4]);
    // Explicit device order.
    let md = Mesh::new(vec![MeshAxis { name: "x".into(), size: 2 }], vec![1, 0]).unwrap();
    let t = parse_sharding(r#"<@m, [{"x"}]>"#).unwrap();
    assert_eq!(t.device_ranges(&md, &[4], 1).unwrap(), vec![(0, 2)]);
    assert!(t.device_ranges(&md, &[4], 2).is_err());
}

#[test]
fn axis_ref_relations() {
    let m = mesh(&[("x", 8)]);
    let full = AxisRef::full("x");
    let a = AxisRef::sub("x", 1, 2);
    let b = AxisRef::sub("x", 2, 4);
    assert!(full.contains(&a) && full.strictly_contains(&b) && !a.contains(&full));
    assert!(a.prefix_of(&full) && b.suffix_of(&full, &m).unwrap() && !a.suffix_of(&full, &m).unwrap());
    assert!(a.can_merge(&b) && !b.can_merge(&a));
    assert_eq!(a.merge(&b, &m).unwrap(), full);
    assert!(!a.overlaps(&b) && AxisRef::sub("x", 1, 4).overlaps(&b));
    assert_eq!(AxisRef::sub("x", 1, 4).overlap(&b), Some(AxisRef::sub("x", 2, 2)));
    let mut v = vec![b.clone(), full.clone(), a.clone()];
    v.sort_by(|p, q| p.mesh_cmp(q, &m));
    assert_eq!(v, vec![a, full, b]);
}

#[test]
fn quoted_spans_find_each_string_literal_with_escapes_and_stop_at_an_unterminated_one() {
    use shardwise::text::quoted_spans;
    let text = r#"{"x":(1)2, "y\"z", "w"} "open"#;
    let spans: Vec<&str> = quoted_spans(text).map(|(a, b)| &text[a..b]).collect();
    assert_eq!(spans, [r#""x""#, r#""y\"z""#, r#""w""#]);
    assert_eq!(quoted_spans("no strings").count(), 0);
    assert_eq!(quoted_spans(r#""""#).collect::<Vec<_>>(), [(0, 2)]);
}
