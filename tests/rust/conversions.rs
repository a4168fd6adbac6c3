//! HLO sharding and MindSpore layout conversions of the pure Rust core. Exact agreement with
//! XLA's own printer is tested in Python against jaxlib (tests/python/test_convert_hlo.py).

use shardwise::convert::hlo::{canonicalize_iota, from_hlo, to_hlo};
use shardwise::convert::mindspore::{from_layout, to_layout};
use shardwise::text::{parse_mesh, parse_sharding, print_sharding};
use shardwise::{ErrorKind, Mesh};

fn m(text: &str) -> Mesh {
    parse_mesh(text).unwrap()
}

#[test]
fn iota_canonical_forms() {
    // Examples checked against XLA's printer.
    assert_eq!(canonicalize_iota(vec![3, 4, 5], vec![1, 2, 0]), (vec![3, 20], vec![1, 0]));
    assert_eq!(canonicalize_iota(vec![2, 2, 2, 2], vec![3, 1, 2, 0]), (vec![2, 4, 2], vec![2, 1, 0]));
    assert_eq!(canonicalize_iota(vec![1, 8], vec![1, 0]), (vec![8], vec![0]));
    assert_eq!(canonicalize_iota(vec![1, 1], vec![1, 0]), (vec![1], vec![0]));
    assert_eq!(canonicalize_iota(vec![3, 4, 5], vec![2, 1, 0]), (vec![3, 4, 5], vec![2, 1, 0]));
}

#[test]
fn to_hlo_examples() {
    let mesh = m(r#"<["x"=2, "y"=4]>"#);
    let cases = [
        (r#"<@m, [{"x"}, {}]>"#, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"),
        (r#"<@m, [{"y"}, {"x"}]>"#, "{devices=[4,2]<=[2,4]T(1,0)}"),
        (r#"<@m, [{}, {}]>"#, "{replicated}"),
        (r#"<@m, [{"x", "y"}]>"#, "{devices=[8]<=[8]}"),
        (r#"<@m, [{}], unreduced={"y"}>"#, "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dims={unreduced, replicated}}"),
        (r#"<@m, [{}], unreduced={"x", "y"}>"#, "{unreduced}"),
        (r#"<@m, [{"y":(2)2}, {"x"}]>"#, "{devices=[2,2,2]<=[4,2]T(1,0) last_tile_dim_replicate}"),
    ];
    for (s, want) in cases {
        assert_eq!(to_hlo(&parse_sharding(s).unwrap(), &mesh).unwrap(), want, "{s}");
    }
    let ordered = m(r#"<["x"=2, "y"=2], device_ids=[0, 2, 1, 3]>"#);
    assert_eq!(
        to_hlo(&parse_sharding(r#"<@m, [{"x"}, {"y"}]>"#).unwrap(), &ordered).unwrap(),
        "{devices=[2,2]0,2,1,3}"
    );
    assert_eq!(to_hlo(&parse_sharding("<@m, []>").unwrap(), &Mesh::maximal(3).unwrap()).unwrap(), "{maximal device=3}");
}

#[test]
fn from_hlo_onto_a_mesh_inverts_to_hlo() {
    let mesh = m(r#"<["x"=2, "y"=4, "z"=2]>"#);
    for s in [
        r#"<@m, [{"x"}, {}]>"#,
        r#"<@m, [{"y", "x"}, {"z"}]>"#,
        r#"<@m, [{"y":(2)2}, {"x", "y":(1)2}]>"#,
        r#"<@m, [{"z"}, {}], unreduced={"x"}>"#,
        r#"<@m, [{}, {}]>"#,
    ] {
        let t = parse_sharding(s).unwrap();
        let hlo = to_hlo(&t, &mesh).unwrap();
        let (back, _) = from_hlo(&hlo, 2, Some(&mesh), Some("m".into())).unwrap();
        assert_eq!(print_sharding(&back), print_sharding(&t), "{s} via {hlo}");
    }
}

#[test]
fn from_hlo_derives_a_mesh() {
    let (t, mesh) = from_hlo("{devices=[4,2]<=[2,4]T(1,0)}", 2, None, None).unwrap();
    assert_eq!(print_sharding(&t), r#"#sdy.sharding<mesh<["axis_0"=2, "axis_1"=4]>, [{"axis_1"}, {"axis_0"}]>"#);
    assert_eq!(mesh.total_size(), 8);
    let (t, _) = from_hlo("{devices=[2,2]0,3,1,2}", 2, None, Some("m".into())).unwrap();
    assert_eq!(print_sharding(&t), r#"#sdy.sharding<@m, [{"axis_0"}, {"axis_1"}]>"#);
    let (_, mesh) = from_hlo("{devices=[2,2]0,3,1,2}", 2, None, None).unwrap();
    assert_eq!(mesh.device_ids(), &[0, 3, 1, 2]);
}

#[test]
fn from_hlo_errors() {
    let mesh = m(r#"<["x"=2, "y"=3]>"#);
    for (text, rank) in
        [("{manual}", 1), ("{{replicated}, {replicated}}", 1), ("{devices=[2,3]<=[6]}", 1), ("{unreduced}", 1)]
    {
        let e = from_hlo(text, rank, None, None).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Conversion, "{text}: {e}");
    }
    // A device order the mesh cannot express: pairs across the size-3 axis.
    let e = from_hlo("{devices=[2,3]0,2,4,1,3,5}", 2, Some(&mesh), None).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conversion, "{e}");
    for text in [
        "{devices=[2]<=[3]}",
        "{devices=[2]0}",
        "{devices=[2]<=[2]T(0,0)}",
        "{bogus}",
        "{devices=[99999999,99999999]<=[8]}",
        "{devices=[2]<=[4294967296,4294967296]}",
    ] {
        assert!(matches!(from_hlo(text, 1, None, None).unwrap_err().kind, ErrorKind::Parse { .. }), "{text}");
    }
}

#[test]
fn mindspore_layouts() {
    let mesh = m(r#"<["x"=2, "y"=4]>"#);
    let t = parse_sharding(r#"<@m, [{"x"}, {}]>"#).unwrap();
    assert_eq!(to_layout(&t, &mesh).unwrap(), (vec![2, 4], vec![vec![1], vec![]]));
    let t = parse_sharding(r#"<@m, [{"y":(2)2}, {"x", "y":(1)2}]>"#).unwrap();
    let (dm, tm) = to_layout(&t, &mesh).unwrap();
    assert_eq!((dm.clone(), tm.clone()), (vec![2, 2, 2], vec![vec![0], vec![2, 1]]));
    let (back, _) = from_layout(&dm, &tm, Some(&mesh), None, Some("m".into())).unwrap();
    assert_eq!(print_sharding(&back), print_sharding(&t));
    // The MatMul example of the MindSpore doc: W with strategy (1, 4) on device matrix [2, 1, 4]
    // (the size-1 device dimension stays named, so the layout round-trips).
    let (w, wm) = from_layout(&[2, 1, 4], &[vec![1], vec![0]], None, None, None).unwrap();
    assert_eq!(print_sharding(&w), r#"#sdy.sharding<mesh<["d2"=2, "d1"=1, "d0"=4]>, [{"d1"}, {"d0"}]>"#);
    assert_eq!(wm.total_size(), 8);
    assert!(from_layout(&[2, 4], &[vec![2]], None, None, None).is_err());
    assert!(from_layout(&[4, 2], &[vec![1]], Some(&mesh), None, None).is_err());
    assert!(from_layout(&[1 << 62, 1 << 62], &[vec![1]], Some(&mesh), None, None).is_err());
    assert!(from_layout(&[1 << 62, 1 << 62], &[vec![1]], None, None, None).is_err());
    let u = parse_sharding(r#"<@m, [{}], unreduced={"x"}>"#).unwrap();
    assert_eq!(to_layout(&u, &mesh).unwrap_err().kind, ErrorKind::Conversion);
}
