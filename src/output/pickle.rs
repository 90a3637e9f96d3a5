//! A tiny pickle encoder: protocol 2, and only the opcodes that pytorch.org/memory_viz's
//! hand-written unpickler knows (`torch/utils/viz/MemoryViz.js`; see
//! /work/shared/docs/interception.md §5.2).
//!
//! Emitted opcodes: `PROTO 2`, `EMPTY_DICT`, `MARK`, `SETITEMS`, `EMPTY_LIST`, `APPENDS`,
//! `BININT1`, `BININT2`, `BININT`, `LONG1` (integers outside the signed
//! 32-bit range: addresses, sizes over 2 GiB), `SHORT_BINUNICODE`, `BINUNICODE`, `NONE`,
//! `NEWTRUE`, `NEWFALSE`, `BINFLOAT`, `TUPLE2` and `STOP`. No memo (nothing is shared), no
//! `FRAME`, no classes. Python's `pickle.load` reads the result too.
//!
//! Lists and dicts are written in CPython's batches: nothing after `EMPTY_LIST`/`EMPTY_DICT`
//! for an empty one, else `MARK … APPENDS`/`SETITEMS` per 1000 items (the viewer spreads each
//! batch into a JavaScript call's arguments, which browsers limit). [`Pickler`] writes as it
//! goes, with no tree in memory; [`encode`] writes a [`Value`].

/// A value the encoder can write.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    /// Any integer a `u64` or an `i64` can hold.
    Int(i128),
    Float(f64),
    Str(String),
    List(Vec<Value>),
    /// String keys, written in this order.
    Dict(Vec<(String, Value)>),
    Tuple2(Box<(Value, Value)>),
}

impl Value {
    /// A string value.
    pub fn str(s: impl Into<String>) -> Value {
        Value::Str(s.into())
    }
    /// An integer value.
    pub fn int(v: impl Into<i128>) -> Value {
        Value::Int(v.into())
    }
}

/// Opcodes (names as in CPython's `pickletools`).
pub mod op {
    pub const PROTO: u8 = 0x80;
    pub const STOP: u8 = b'.';
    pub const MARK: u8 = b'(';
    pub const EMPTY_DICT: u8 = b'}';
    pub const SETITEMS: u8 = b'u';
    pub const EMPTY_LIST: u8 = b']';
    pub const APPENDS: u8 = b'e';
    pub const BININT: u8 = b'J';
    pub const BININT1: u8 = b'K';
    pub const BININT2: u8 = b'M';
    pub const LONG1: u8 = 0x8a;
    pub const BINUNICODE: u8 = b'X';
    pub const SHORT_BINUNICODE: u8 = 0x8c;
    pub const NONE: u8 = b'N';
    pub const NEWTRUE: u8 = 0x88;
    pub const NEWFALSE: u8 = 0x89;
    pub const BINFLOAT: u8 = b'G';
    pub const TUPLE2: u8 = 0x86;
}

/// Items per `APPENDS`/`SETITEMS` batch (CPython's batch size).
const BATCH: usize = 1000;

/// Writes a pickle as it goes (no tree in memory): scalars directly, lists and dicts through
/// closures that add their items.
pub struct Pickler {
    out: Vec<u8>,
}

impl Default for Pickler {
    fn default() -> Self {
        Self::new()
    }
}

impl Pickler {
    /// A pickle that starts with `PROTO 2`.
    pub fn new() -> Self {
        Pickler {
            out: vec![op::PROTO, 2],
        }
    }

    /// Ends the pickle (`STOP`) and returns its bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.out.push(op::STOP);
        self.out
    }

    pub fn none(&mut self) {
        self.out.push(op::NONE);
    }

    pub fn bool(&mut self, b: bool) {
        self.out.push(if b { op::NEWTRUE } else { op::NEWFALSE });
    }

    pub fn float(&mut self, f: f64) {
        self.out.push(op::BINFLOAT);
        self.out.extend_from_slice(&f.to_be_bytes());
    }

    pub fn str(&mut self, s: &str) {
        let b = s.as_bytes();
        if b.len() < 256 {
            self.out.push(op::SHORT_BINUNICODE);
            self.out.push(b.len() as u8);
        } else {
            self.out.push(op::BINUNICODE);
            self.out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        }
        self.out.extend_from_slice(b);
    }

    pub fn int(&mut self, i: impl Into<i128>) {
        let i = i.into();
        let out = &mut self.out;
        if (0..=0xff).contains(&i) {
            out.extend_from_slice(&[op::BININT1, i as u8]);
        } else if (0..=0xffff).contains(&i) {
            out.push(op::BININT2);
            out.extend_from_slice(&(i as u16).to_le_bytes());
        } else if (i32::MIN as i128..=i32::MAX as i128).contains(&i) {
            out.push(op::BININT);
            out.extend_from_slice(&(i as i32).to_le_bytes());
        } else {
            // LONG1: length byte, then the shortest little-endian two's complement.
            let bytes = i.to_le_bytes();
            let mut n = bytes.len();
            while n > 1 {
                let top = bytes[n - 1];
                let sign_below = bytes[n - 2] & 0x80;
                if (top == 0 && sign_below == 0) || (top == 0xff && sign_below != 0) {
                    n -= 1;
                } else {
                    break;
                }
            }
            out.push(op::LONG1);
            out.push(n as u8);
            out.extend_from_slice(&bytes[..n]);
        }
    }

    /// A pair of values: `a` then `b`, as a tuple.
    pub fn tuple2(&mut self, a: impl FnOnce(&mut Self), b: impl FnOnce(&mut Self)) {
        a(self);
        b(self);
        self.out.push(op::TUPLE2);
    }

    /// A list whose items `f` adds with [`Items::item`].
    pub fn list(&mut self, f: impl FnOnce(&mut Items)) {
        self.out.push(op::EMPTY_LIST);
        let mut items = Items {
            p: self,
            n: 0,
            close: op::APPENDS,
        };
        f(&mut items);
        items.close();
    }

    /// A dict whose entries `f` adds with [`Items::entry`].
    pub fn dict(&mut self, f: impl FnOnce(&mut Items)) {
        self.out.push(op::EMPTY_DICT);
        let mut items = Items {
            p: self,
            n: 0,
            close: op::SETITEMS,
        };
        f(&mut items);
        items.close();
    }

    /// Any [`Value`].
    pub fn value(&mut self, v: &Value) {
        match v {
            Value::None => self.none(),
            Value::Bool(b) => self.bool(*b),
            Value::Int(i) => self.int(*i),
            Value::Float(f) => self.float(*f),
            Value::Str(s) => self.str(s),
            Value::List(items) => self.list(|l| {
                for it in items {
                    l.item(|p| p.value(it));
                }
            }),
            Value::Dict(pairs) => self.dict(|d| {
                for (k, v) in pairs {
                    d.entry(k, |p| p.value(v));
                }
            }),
            Value::Tuple2(pair) => self.tuple2(|p| p.value(&pair.0), |p| p.value(&pair.1)),
        }
    }
}

/// The items of a list or the entries of a dict being written: `MARK … APPENDS` (or
/// `SETITEMS`) per batch of up to 1000; nothing at all when empty.
pub struct Items<'a> {
    p: &'a mut Pickler,
    /// Items in the open batch.
    n: usize,
    close: u8,
}

impl Items<'_> {
    fn open(&mut self) {
        if self.n == 0 {
            self.p.out.push(op::MARK);
        }
    }

    fn added(&mut self) {
        self.n += 1;
        if self.n == BATCH {
            self.p.out.push(self.close);
            self.n = 0;
        }
    }

    fn close(self) {
        if self.n > 0 {
            self.p.out.push(self.close);
        }
    }

    /// Adds a list item written by `f`.
    pub fn item(&mut self, f: impl FnOnce(&mut Pickler)) {
        self.open();
        f(self.p);
        self.added();
    }

    /// Adds a dict entry: the string key, then the value written by `f`.
    pub fn entry(&mut self, key: &str, f: impl FnOnce(&mut Pickler)) {
        self.open();
        self.p.str(key);
        f(self.p);
        self.added();
    }
}

/// Encodes `v` as a complete pickle (protocol 2).
pub fn encode(v: &Value) -> Vec<u8> {
    let mut p = Pickler::new();
    p.value(v);
    p.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_use_the_smallest_opcode() {
        assert_eq!(encode(&Value::int(7)), [0x80, 2, b'K', 7, b'.']);
        assert_eq!(encode(&Value::int(300)), [0x80, 2, b'M', 0x2c, 1, b'.']);
        assert_eq!(
            encode(&Value::int(-1)),
            [0x80, 2, b'J', 0xff, 0xff, 0xff, 0xff, b'.']
        );
        assert_eq!(
            encode(&Value::int(1u64 << 31)),
            [0x80, 2, 0x8a, 5, 0, 0, 0, 0x80, 0, b'.']
        );
        assert_eq!(
            encode(&Value::int(-(1i64 << 40))),
            [0x80, 2, 0x8a, 6, 0, 0, 0, 0, 0, 0xff, b'.']
        );
        let big = encode(&Value::int(u64::MAX));
        assert_eq!(big[2..4], [0x8a, 9]);
    }

    #[test]
    fn containers_batch_like_cpython() {
        assert_eq!(encode(&Value::List(vec![])), [0x80, 2, b']', b'.']);
        assert_eq!(
            encode(&Value::List(vec![Value::int(1)])),
            [0x80, 2, b']', b'(', b'K', 1, b'e', b'.']
        );
        assert_eq!(
            encode(&Value::Dict(vec![
                ("a".into(), Value::None),
                ("b".into(), Value::Bool(true))
            ])),
            [0x80, 2, b'}', b'(', 0x8c, 1, b'a', b'N', 0x8c, 1, b'b', 0x88, b'u', b'.']
        );
        let long = encode(&Value::List(vec![Value::None; 2001]));
        assert_eq!(long.iter().filter(|&&b| b == b'(').count(), 3);
        assert_eq!(long.iter().filter(|&&b| b == b'e').count(), 3);
        let exact = encode(&Value::List(vec![Value::None; 2000]));
        assert_eq!(exact.iter().filter(|&&b| b == b'(').count(), 2);
        assert_eq!(exact.iter().filter(|&&b| b == b'e').count(), 2);
    }
}
