//! Worked examples for `json.rs`.

use super::*;

#[test]
fn parses_a_config_shape() {
    let v = parse(
        r#"{"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32,
            "rope_theta": 500000.0, "eps": 1e-05, "tie": false, "x": null,
            "text_config": {"head_dim": 128}}"#,
    )
    .unwrap();
    assert_eq!(v.get("num_hidden_layers").unwrap().as_u64(), Some(32));
    assert_eq!(v.get("rope_theta").unwrap().as_u64(), None);
    assert_eq!(v.get("rope_theta").unwrap().as_f64(), Some(500000.0));
    assert_eq!(v.get("eps").unwrap().as_f64(), Some(1e-5));
    assert_eq!(v.get("tie").unwrap().as_bool(), Some(false));
    assert_eq!(v.get("x"), Some(&Value::Null));
    let arch = v.get("architectures").unwrap().as_array().unwrap();
    assert_eq!(arch[0].as_str(), Some("LlamaForCausalLM"));
    let tc = v.get("text_config").unwrap();
    assert_eq!(tc.get("head_dim").unwrap().as_u64(), Some(128));
}

#[test]
fn unescapes_strings() {
    let v = parse(r#"["a\"b\\c\/d\n", "\u00e9\ud83d\ude00", "\ud800x"]"#).unwrap();
    let items = v.as_array().unwrap();
    assert_eq!(items[0].as_str(), Some("a\"b\\c/d\n"));
    assert_eq!(items[1].as_str(), Some("é😀"));
    assert_eq!(items[2].as_str(), Some("\u{FFFD}x"));
}

#[test]
fn last_duplicate_key_wins_like_python() {
    let v = parse(r#"{"a": 1, "a": 2}"#).unwrap();
    assert_eq!(v.get("a").unwrap().as_u64(), Some(2));
}

#[test]
fn python_specials() {
    let v = parse("[NaN, Infinity, -Infinity, -0.5]").unwrap();
    let items = v.as_array().unwrap();
    assert!(items[0].as_f64().unwrap().is_nan());
    assert_eq!(items[1].as_f64(), Some(f64::INFINITY));
    assert_eq!(items[2].as_f64(), Some(f64::NEG_INFINITY));
    assert_eq!(items[3].as_f64(), Some(-0.5));
}

#[test]
fn rejects_bad_input_with_an_offset() {
    for (text, offset) in [
        ("{\"a\" 1}", 5),
        ("[1, 2", 5),
        ("01", 1),
        ("\"abc", 4),
        ("{} x", 3),
        ("[1.]", 3),
        ("", 0),
    ] {
        let err = parse(text).unwrap_err();
        assert_eq!(err.offset, offset, "{text:?}: {err}");
    }
    let deep = "[".repeat(300) + &"]".repeat(300);
    assert!(parse(&deep).is_err());
}

#[test]
fn never_panics_on_truncations() {
    let text = r#"{"a": [1, 2.5e3, "x\u0041", {"b": null}], "c": true}"#;
    for end in 0..text.len() {
        let _ = parse(&text[..end]);
    }
    assert!(parse(text).is_ok());
}
