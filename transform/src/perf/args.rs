//! An operator's arguments as Kineto records them: `Input Dims`, `Input type`, `Concrete
//! Inputs` and `Input Strides`, four parallel JSON lists, one entry per argument.
//!
//! The models read arguments by position (a signature's `is_causal` is its sixth argument),
//! so a list is kept whole, `""` and `[]` entries included. Anything that is not the shape
//! Kineto writes reads as "missing", and the model that needed it says so; nothing panics.

use serde_json::Value;

/// One argument's shape: a tensor's dims, a tensor list's dims, or nothing (scalars).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Dims {
    Tensor(Vec<i64>),
    List(Vec<Vec<i64>>),
    None,
}

/// The four lists of one operator.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct OpArgs {
    pub dims: Vec<Dims>,
    pub types: Vec<String>,
    pub concrete: Vec<String>,
}

impl OpArgs {
    /// Parses the JSON texts as the dataset stores them; unparsable text gives empty lists.
    pub(crate) fn parse(dims: Option<&str>, types: Option<&str>, concrete: Option<&str>) -> OpArgs {
        OpArgs {
            dims: dims.map(parse_dims).unwrap_or_default(),
            types: types.map(parse_strings).unwrap_or_default(),
            concrete: concrete.map(parse_strings).unwrap_or_default(),
        }
    }

    /// Argument `i` as a tensor shape, when it is a tensor (a 0-dim tensor is `[]`).
    pub(crate) fn tensor(&self, i: usize) -> Option<&[i64]> {
        match self.dims.get(i)? {
            Dims::Tensor(d) if self.is_tensor(i) => Some(d),
            _ => None,
        }
    }

    /// Argument `i` is a tensor: its type is a dtype (scalars say `Scalar`, `ScalarList`, `""`).
    pub(crate) fn is_tensor(&self, i: usize) -> bool {
        self.types.get(i).is_some_and(|t| Dtype::parse(t).is_some())
    }

    /// The dtype of argument `i`.
    pub(crate) fn dtype(&self, i: usize) -> Option<Dtype> {
        Dtype::parse(self.types.get(i)?)
    }

    /// The bytes of tensor argument `i`.
    pub(crate) fn bytes(&self, i: usize) -> Option<i128> {
        let size = self.dtype(i)?.size();
        Some(numel(self.tensor(i)?) * i128::from(size))
    }

    /// Concrete input `i` as written (`""` for tensors and absent values).
    pub(crate) fn scalar(&self, i: usize) -> Option<&str> {
        self.concrete.get(i).map(String::as_str)
    }

    /// Concrete input `i` as a boolean (`True`/`False`, as PyTorch prints them).
    pub(crate) fn flag(&self, i: usize) -> Option<bool> {
        match self.scalar(i)? {
            "True" | "true" | "1" => Some(true),
            "False" | "false" | "0" => Some(false),
            _ => None,
        }
    }

    /// Concrete input `i` as an integer list (`[1, 1]`) or one integer (`2`).
    pub(crate) fn ints(&self, i: usize) -> Option<Vec<i64>> {
        let s = self.scalar(i)?.trim();
        if let Some(inner) = s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            if inner.trim().is_empty() {
                return Some(vec![]);
            }
            return inner.split(',').map(|x| x.trim().parse().ok()).collect();
        }
        s.parse().ok().map(|v| vec![v])
    }

    /// Concrete input `i` as an integer.
    pub(crate) fn int(&self, i: usize) -> Option<i64> {
        self.scalar(i)?.trim().parse().ok()
    }
}

/// The element count of a shape (1 for a 0-dim tensor).
pub(crate) fn numel(d: &[i64]) -> i128 {
    d.iter().map(|&x| x.max(0) as i128).product()
}

fn parse_dims(s: &str) -> Vec<Dims> {
    let Ok(Value::Array(items)) = serde_json::from_str::<Value>(s) else {
        return vec![];
    };
    items.iter().map(dims_of).collect()
}

fn ints_of(v: &[Value]) -> Option<Vec<i64>> {
    v.iter().map(Value::as_i64).collect()
}

fn dims_of(v: &Value) -> Dims {
    let Value::Array(a) = v else {
        return Dims::None;
    };
    if let Some(d) = ints_of(a) {
        return Dims::Tensor(d);
    }
    let list: Option<Vec<Vec<i64>>> = a
        .iter()
        .map(|x| x.as_array().and_then(|x| ints_of(x)))
        .collect();
    list.map_or(Dims::None, Dims::List)
}

fn parse_strings(s: &str) -> Vec<String> {
    let Ok(Value::Array(items)) = serde_json::from_str::<Value>(s) else {
        return vec![];
    };
    items
        .iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        })
        .collect()
}

/// The element types the models tell apart, with their size and the peak they are judged by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Dtype {
    Fp64,
    Fp32,
    Bf16,
    Fp16,
    Fp8,
    /// Two 4-bit values packed in a byte (`Float4_e2m1fn_x2`): a shape counts bytes, and a
    /// GEMM's K is twice the packed dimension.
    Fp4x2,
    /// Integer and boolean tensors: bytes only, no peak.
    Int(u8),
    /// Complex tensors: bytes only.
    Complex(u8),
}

impl Dtype {
    /// A Kineto `Input type` (`c10::BFloat16`, `float`, `long int`) or a workload's own name
    /// (`bf16`, `fp32`). Non-tensor types (`Scalar`, `ScalarList`, `TensorList`, `""`) are
    /// `None`.
    pub(crate) fn parse(s: &str) -> Option<Dtype> {
        Some(match s.trim() {
            "c10::BFloat16" | "bf16" | "bfloat16" | "BFloat16" => Dtype::Bf16,
            "c10::Half" | "fp16" | "half" | "float16" | "Half" => Dtype::Fp16,
            "float" | "fp32" | "float32" | "Float" => Dtype::Fp32,
            "double" | "fp64" | "float64" | "Double" => Dtype::Fp64,
            "c10::Float4_e2m1fn_x2" | "fp4" => Dtype::Fp4x2,
            "long int" | "long" | "int64_t" | "unsigned long" => Dtype::Int(8),
            "int" | "unsigned int" => Dtype::Int(4),
            "short int" | "short" | "unsigned short" => Dtype::Int(2),
            "signed char" | "unsigned char" | "bool" | "char" => Dtype::Int(1),
            "c10::complex<float>" => Dtype::Complex(8),
            "c10::complex<double>" => Dtype::Complex(16),
            "c10::complex<c10::Half>" => Dtype::Complex(4),
            t if t.starts_with("c10::Float8_") || t == "fp8" => Dtype::Fp8,
            _ => return None,
        })
    }

    /// Bytes per element (per packed pair for fp4).
    pub(crate) fn size(self) -> u8 {
        match self {
            Dtype::Fp64 => 8,
            Dtype::Fp32 => 4,
            Dtype::Bf16 | Dtype::Fp16 => 2,
            Dtype::Fp8 | Dtype::Fp4x2 => 1,
            Dtype::Int(n) | Dtype::Complex(n) => n,
        }
    }

    /// The key of the peak table this dtype's FLOPs are judged by; `None` for integer and
    /// complex tensors.
    pub(crate) fn peak_key(self) -> Option<&'static str> {
        Some(match self {
            Dtype::Fp64 => "fp64",
            Dtype::Fp32 => "fp32",
            Dtype::Bf16 => "bf16",
            Dtype::Fp16 => "fp16",
            Dtype::Fp8 => "fp8",
            Dtype::Fp4x2 => "fp4",
            Dtype::Int(_) | Dtype::Complex(_) => return None,
        })
    }

    /// A PyTorch `ScalarType` code as `Concrete Inputs` print it (`15` is bfloat16).
    pub(crate) fn from_scalar_type(code: i64) -> Option<Dtype> {
        Some(match code {
            0 | 1 | 11 => Dtype::Int(1),
            2 => Dtype::Int(2),
            3 => Dtype::Int(4),
            4 => Dtype::Int(8),
            5 => Dtype::Fp16,
            6 => Dtype::Fp32,
            7 => Dtype::Fp64,
            8 => Dtype::Complex(4),
            9 => Dtype::Complex(8),
            10 => Dtype::Complex(16),
            15 => Dtype::Bf16,
            23..=26 => Dtype::Fp8,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kineto_lists_parse_by_position() {
        let a = OpArgs::parse(
            Some("[[1, 141, 512], [512, 512], [], [[2, 3], [4, 5]]]"),
            Some(r#"["c10::BFloat16", "c10::BFloat16", "Scalar", "TensorList"]"#),
            Some(r#"["", "", "0.125", ""]"#),
        );
        assert_eq!(a.tensor(0), Some(&[1, 141, 512][..]));
        assert_eq!(a.tensor(2), None, "a scalar's [] is not a 0-dim tensor");
        assert_eq!(a.dims[3], Dims::List(vec![vec![2, 3], vec![4, 5]]));
        assert_eq!(a.bytes(1), Some(512 * 512 * 2));
        assert_eq!(a.scalar(2), Some("0.125"));
        assert_eq!(a.tensor(9), None);
    }

    #[test]
    fn concrete_values_read_as_flags_and_integer_lists() {
        let a = OpArgs::parse(
            None,
            None,
            Some(r#"["True", "False", "[2, 2]", "3", "[]", "x"]"#),
        );
        assert_eq!(
            (a.flag(0), a.flag(1), a.flag(5)),
            (Some(true), Some(false), None)
        );
        assert_eq!(a.ints(2), Some(vec![2, 2]));
        assert_eq!(a.ints(3), Some(vec![3]));
        assert_eq!(a.ints(4), Some(vec![]));
        assert_eq!(a.ints(5), None);
        assert_eq!(a.int(3), Some(3));
    }

    #[test]
    fn broken_text_reads_as_missing() {
        let a = OpArgs::parse(Some("[[1, 2"), Some("not json"), Some("{}"));
        assert_eq!(a, OpArgs::default());
        assert_eq!(Dtype::parse("c10::Float8_e4m3fn"), Some(Dtype::Fp8));
        assert_eq!(Dtype::parse("Scalar"), None);
        assert_eq!(Dtype::parse("long int"), Some(Dtype::Int(8)));
    }
}
