use super::*;

#[test]
fn microseconds_to_exact_nanoseconds() {
    assert_eq!(
        us_text_to_ns(b"1712195495507888.958"),
        Some(1_712_195_495_507_888_958)
    );
    assert_eq!(
        us_text_to_ns(b"1694128201428473"),
        Some(1_694_128_201_428_473_000)
    );
    assert_eq!(us_text_to_ns(b"147.3"), Some(147_300));
    assert_eq!(us_text_to_ns(b"0.0005"), Some(1));
    assert_eq!(us_text_to_ns(b"0.0004"), Some(0));
    assert_eq!(us_text_to_ns(b"-1"), Some(-1000));
    assert_eq!(us_text_to_ns(b"1.5e3"), Some(1_500_000));
    assert_eq!(us_text_to_ns(b"abc"), None);
    assert_eq!(us_text_to_ns(b""), None);
}

/// Found by the fuzzer (docs/FUZZING.md): `1e90` µs was cast to i64::MAX ns, a time that
/// is not in the trace. Out of range is unusable, with an exponent or without one.
#[test]
fn exponents_past_the_int64_range_are_unusable() {
    assert_eq!(us_text_to_ns(b"1e90"), None);
    assert_eq!(us_text_to_ns(b"-1e90"), None);
    assert_eq!(us_text_to_ns(b"1e400"), None);
    assert_eq!(us_text_to_ns(b"9223372036854775808"), None);
    // 9.2e15 µs = 9.2e18 ns fits in i64 but is past `TIME_LIMIT_NS` (a base time added to
    // it could overflow); 3e15 µs is the limit itself.
    assert_eq!(us_text_to_ns(b"9.2e15"), None);
    assert_eq!(us_text_to_ns(b"9200000000000000"), None);
    assert_eq!(us_text_to_ns(b"3e15"), Some(TIME_LIMIT_NS));
    assert_eq!(us_text_to_ns(b"-3000000000000000"), Some(-TIME_LIMIT_NS));
    assert_eq!(us_text_to_ns(b"3000000000000000.001"), None);
}

proptest::proptest! {
    /// The one-pass readers answer as the general ones wherever they answer at all.
    #[test]
    fn short_numbers_read_as_the_general_readers_do(
        t in "[-0-9.eEx\"]{0,24}",
    ) {
        let t = t.as_bytes();
        if let Some(ns) = short_us_to_ns(t) {
            proptest::prop_assert_eq!(Some(ns), us_text_to_ns_any(t));
        }
        if let Some(n) = short_int(t) {
            proptest::prop_assert_eq!(Some(n), int_from_any(t));
        }
    }

    #[test]
    fn short_times_cover_kineto_and_epoch_texts(
        int in 0u64..100_000_000_000_000_000, frac in "[0-9]{0,6}",
    ) {
        let text = if frac.is_empty() { int.to_string() } else { format!("{int}.{frac}") };
        let t = text.as_bytes();
        // Both overflow past i64 ns (int ≥ 9,223,372,036,854,776 µs).
        proptest::prop_assert_eq!(short_us_to_ns(t).is_some(), int < 9_000_000_000_000_000 || us_text_to_ns_any(t).is_some());
        proptest::prop_assert_eq!(short_us_to_ns(t), us_text_to_ns_any(t));
    }
}

#[test]
fn ints_in_every_spelling() {
    assert_eq!(int_from_value(b"42"), Some(42));
    assert_eq!(int_from_value(b"\"2560\""), Some(2560));
    assert_eq!(int_from_value(b"\"0x1f\""), Some(31));
    assert_eq!(int_from_value(b"-3"), Some(-3));
    assert_eq!(int_from_value(b"7.0"), Some(7));
    assert_eq!(int_from_value(b"7.5"), None);
    assert_eq!(int_from_value(b"null"), None);
}

#[test]
fn skips_nested_values_with_tricky_strings() {
    let s = br#"{"a": [1, "x]}\"", {"b": "}"}], "c": 2} ,"#;
    let mut c = Cursor::new(s);
    let v = c.skip_value().unwrap();
    assert_eq!(v, &s[..s.len() - 2]);
    assert_eq!(
        Cursor::new(br#"{"a": [1"#).skip_value(),
        Err(JsonError::Incomplete)
    );
}

#[test]
fn usual_members_take_the_fast_look() {
    let text = b",\n    \"ts\": 4464418948408.808, \"dur\": 14.027,\n";
    let mut c = Cursor::new(text);
    let ts = (&b"ts"[..], Some(&b"4464418948408.808"[..]));
    assert_eq!(c.member_fast(false), Some(ts));
    assert_eq!(text[c.i], b',');
    let text = b", \"args\": {\"a\": 1}, \"name\": \"x\"         ";
    let mut c = Cursor::new(text);
    assert_eq!(c.member_fast(false), Some((&b"args"[..], None)));
    assert_eq!(text[c.i], b'{');
    // An escaped key, or one whose value starts past the look, is left to the walk.
    let escaped = Cursor::new(b"\"t\\\"s\": 1,                           ").member_fast(true);
    assert_eq!(escaped, None);
    let far = Cursor::new(b"\"ts\":                                1").member_fast(true);
    assert_eq!(far, None);
}

proptest::proptest! {
    /// The 32-byte look reads every member as the byte walk does: the same key, the same
    /// value, the same cursor after them, the same error, whatever the bytes around them.
    #[test]
    fn fast_members_read_as_the_walk_does(
        body in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::strategy::Just(b'"'), proptest::strategy::Just(b'\\'),
                proptest::strategy::Just(b','), proptest::strategy::Just(b':'),
                proptest::strategy::Just(b' '), proptest::strategy::Just(b'\n'),
                proptest::strategy::Just(b'}'), proptest::strategy::Just(b'a'),
                proptest::strategy::Just(b'1'), proptest::strategy::Just(0xe9u8),
            ],
            0..48,
        ),
        lead in proptest::prop_oneof![
            proptest::strategy::Just(&b""[..]),
            proptest::strategy::Just(&b", \"ts\": "[..]),
            proptest::strategy::Just(&b",\n    \"args\": {"[..]),
            proptest::strategy::Just(&b"\"name\":\""[..]),
            proptest::strategy::Just(&b", \"ph\": \"X\", \"id\": 1"[..]),
            proptest::strategy::Just(&b", \"g\": [1, 2]"[..]),
        ],
        first in proptest::bool::ANY,
    ) {
        let mut b = lead.to_vec();
        b.extend(body);
        let (mut fast, mut walk) = (Cursor::new(&b), Cursor::new(&b));
        let got = fast.next_key_raw(first);
        let want = walk.key_walk(first);
        proptest::prop_assert_eq!(&got, &want);
        if want.is_ok() {
            proptest::prop_assert_eq!(fast.i, walk.i);
        }
        let mut fast = Cursor::new(&b);
        let got = fast.next_member_raw(first);
        let mut walk = Cursor::new(&b);
        let want = walk
            .key_walk(first)
            .and_then(|k| k.map(|k| walk.skip_value().map(|v| (k, v))).transpose());
        proptest::prop_assert_eq!(&got, &want);
        if want.is_ok() {
            proptest::prop_assert_eq!(fast.i, walk.i);
        }
    }
}

#[test]
fn strings_unescape_only_when_needed() {
    let mut c = Cursor::new(br#""plain" "a\"b\u00e9\ud83d\ude00""#);
    assert!(matches!(c.string().unwrap(), Cow::Borrowed("plain")));
    c.ws();
    assert_eq!(c.string().unwrap(), "a\"b\u{e9}\u{1F600}");
}
