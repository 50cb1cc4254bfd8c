//! The Python expressions a manifest writes over a case's symbols: its
//! `constraints` (`LEN_2D % S == 0`, `n == 1 or geom == 2`) and a `fuzzed`
//! preset's derived sizes (`max(1, (3 * nblks_c) // 2)`), evaluated without
//! Python, with Python's arithmetic (floor division and modulo, `**`).

use std::collections::BTreeMap;

/// A value of an expression.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Value {
    fn number(self) -> f64 {
        match self {
            Value::Int(i) => i as f64,
            Value::Float(f) => f,
            Value::Bool(b) => f64::from(u8::from(b)),
        }
    }

    fn int(self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(i),
            Value::Bool(b) => Some(i64::from(b)),
            Value::Float(_) => None,
        }
    }

    pub fn truth(self) -> bool {
        match self {
            Value::Int(i) => i != 0,
            Value::Float(f) => f != 0.0,
            Value::Bool(b) => b,
        }
    }
}

/// Why an expression has no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PyExprError {
    #[error("{0:?} is not an expression the judge evaluates")]
    Syntax(String),
    #[error("unknown symbol {0}")]
    Unknown(String),
    #[error("division by zero")]
    DivisionByZero,
    #[error("overflow")]
    Overflow,
}

/// Evaluates `text` with `symbols` bound.
pub fn eval(text: &str, symbols: &BTreeMap<String, Value>) -> Result<Value, PyExprError> {
    let tokens = tokenize(text).ok_or_else(|| PyExprError::Syntax(text.to_string()))?;
    let mut parser = Parser {
        tokens,
        pos: 0,
        symbols,
        text,
    };
    let value = parser.or()?;
    if parser.pos != parser.tokens.len() {
        return Err(parser.syntax());
    }
    Ok(value)
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Int(i64),
    Float(f64),
    Name(String),
    Op(&'static str),
}

const OPERATORS: [&str; 16] = [
    "**", "//", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "(", ")", ",",
];

fn tokenize(text: &str) -> Option<Vec<Token>> {
    let mut tokens = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let c = rest.chars().next()?;
        if c.is_ascii_digit() || (c == '.' && rest[1..].starts_with(|d: char| d.is_ascii_digit())) {
            let end = rest
                .find(|d: char| !(d.is_ascii_alphanumeric() || d == '.' || d == '_'))
                .unwrap_or(rest.len());
            let literal = rest[..end].replace('_', "");
            tokens.push(match literal.parse::<i64>() {
                Ok(i) => Token::Int(i),
                Err(_) => Token::Float(literal.parse().ok()?),
            });
            rest = &rest[end..];
        } else if c.is_alphabetic() || c == '_' {
            let end = rest
                .find(|d: char| !(d.is_alphanumeric() || d == '_'))
                .unwrap_or(rest.len());
            tokens.push(Token::Name(rest[..end].to_string()));
            rest = &rest[end..];
        } else {
            let op = OPERATORS.iter().find(|op| rest.starts_with(**op))?;
            tokens.push(Token::Op(op));
            rest = &rest[op.len()..];
        }
        rest = rest.trim_start();
    }
    Some(tokens)
}

struct Parser<'a> {
    tokens: Vec<Token>,
    pos: usize,
    symbols: &'a BTreeMap<String, Value>,
    text: &'a str,
}

impl Parser<'_> {
    fn syntax(&self) -> PyExprError {
        PyExprError::Syntax(self.text.to_string())
    }

    fn peek_op(&self) -> Option<&'static str> {
        match self.tokens.get(self.pos) {
            Some(Token::Op(op)) => Some(op),
            _ => None,
        }
    }

    fn eat_op(&mut self, op: &str) -> bool {
        let found = self.peek_op() == Some(op);
        self.pos += usize::from(found);
        found
    }

    fn eat_name(&mut self, word: &str) -> bool {
        let found = matches!(self.tokens.get(self.pos), Some(Token::Name(n)) if n == word);
        self.pos += usize::from(found);
        found
    }

    fn or(&mut self) -> Result<Value, PyExprError> {
        let mut value = self.and()?;
        while self.eat_name("or") {
            let right = self.and()?;
            value = Value::Bool(value.truth() || right.truth());
        }
        Ok(value)
    }

    fn and(&mut self) -> Result<Value, PyExprError> {
        let mut value = self.not()?;
        while self.eat_name("and") {
            let right = self.not()?;
            value = Value::Bool(value.truth() && right.truth());
        }
        Ok(value)
    }

    fn not(&mut self) -> Result<Value, PyExprError> {
        if self.eat_name("not") {
            return Ok(Value::Bool(!self.not()?.truth()));
        }
        self.comparison()
    }

    /// `a < b <= c` is `a < b and b <= c`, as in Python.
    fn comparison(&mut self) -> Result<Value, PyExprError> {
        let mut left = self.sum()?;
        let mut all = None;
        while let Some(op @ ("==" | "!=" | "<" | "<=" | ">" | ">=")) = self.peek_op() {
            self.pos += 1;
            let right = self.sum()?;
            let (a, b) = (left.number(), right.number());
            let holds = match op {
                "==" => a == b,
                "!=" => a != b,
                "<" => a < b,
                "<=" => a <= b,
                ">" => a > b,
                _ => a >= b,
            };
            all = Some(all.unwrap_or(true) && holds);
            left = right;
        }
        Ok(all.map_or(left, Value::Bool))
    }

    fn sum(&mut self) -> Result<Value, PyExprError> {
        let mut value = self.term()?;
        while let Some(op @ ("+" | "-")) = self.peek_op() {
            self.pos += 1;
            let right = self.term()?;
            value = arithmetic(op, value, right)?;
        }
        Ok(value)
    }

    fn term(&mut self) -> Result<Value, PyExprError> {
        let mut value = self.unary()?;
        while let Some(op @ ("*" | "/" | "//" | "%")) = self.peek_op() {
            self.pos += 1;
            let right = self.unary()?;
            value = arithmetic(op, value, right)?;
        }
        Ok(value)
    }

    fn unary(&mut self) -> Result<Value, PyExprError> {
        if self.eat_op("-") {
            return arithmetic("-", Value::Int(0), self.unary()?);
        }
        if self.eat_op("+") {
            return self.unary();
        }
        self.power()
    }

    /// `**` binds tighter than a unary minus on its left, looser on its right.
    fn power(&mut self) -> Result<Value, PyExprError> {
        let base = self.atom()?;
        if self.eat_op("**") {
            let exponent = self.unary()?;
            return arithmetic("**", base, exponent);
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<Value, PyExprError> {
        let token = self
            .tokens
            .get(self.pos)
            .cloned()
            .ok_or_else(|| self.syntax())?;
        self.pos += 1;
        match token {
            Token::Int(i) => Ok(Value::Int(i)),
            Token::Float(f) => Ok(Value::Float(f)),
            Token::Op("(") => {
                let value = self.or()?;
                self.eat_op(")")
                    .then_some(value)
                    .ok_or_else(|| self.syntax())
            }
            Token::Name(name) if self.peek_op() == Some("(") => self.call(&name),
            Token::Name(name) => match name.as_str() {
                "True" => Ok(Value::Bool(true)),
                "False" => Ok(Value::Bool(false)),
                _ => self
                    .symbols
                    .get(&name)
                    .copied()
                    .ok_or(PyExprError::Unknown(name)),
            },
            Token::Op(_) => Err(self.syntax()),
        }
    }

    /// `max`, `min` and `abs`, the functions manifests call.
    fn call(&mut self, name: &str) -> Result<Value, PyExprError> {
        self.pos += 1;
        let mut args = vec![self.or()?];
        while self.eat_op(",") {
            args.push(self.or()?);
        }
        if !self.eat_op(")") {
            return Err(self.syntax());
        }
        let by = |a: &&Value, b: &&Value| a.number().total_cmp(&b.number());
        match (name, args.as_slice()) {
            ("max", [_, ..]) => Ok(*args.iter().max_by(by).expect("one argument")),
            ("min", [_, ..]) => Ok(*args.iter().min_by(by).expect("one argument")),
            ("abs", [Value::Float(f)]) => Ok(Value::Float(f.abs())),
            ("abs", [v]) => v
                .int()
                .and_then(i64::checked_abs)
                .map(Value::Int)
                .ok_or(PyExprError::Overflow),
            _ => Err(self.syntax()),
        }
    }
}

/// `a op b` as Python computes it: integers stay integers except under `/`.
fn arithmetic(op: &str, a: Value, b: Value) -> Result<Value, PyExprError> {
    if let (Some(x), Some(y)) = (a.int(), b.int()) {
        let value = match op {
            "+" => x.checked_add(y),
            "-" => x.checked_sub(y),
            "*" => x.checked_mul(y),
            "//" | "%" if y == 0 => return Err(PyExprError::DivisionByZero),
            "//" => x.checked_div(y).map(|_| floor_div(x, y)),
            "%" => x.checked_div(y).map(|_| x - y * floor_div(x, y)),
            "**" if y >= 0 => u32::try_from(y).ok().and_then(|e| x.checked_pow(e)),
            _ => None,
        };
        match (op, value) {
            ("/", _) => {}
            ("**", None) if y < 0 => {}
            (_, Some(v)) => return Ok(Value::Int(v)),
            (_, None) => return Err(PyExprError::Overflow),
        }
    }
    let (x, y) = (a.number(), b.number());
    let value = match op {
        "+" => x + y,
        "-" => x - y,
        "*" => x * y,
        "/" | "//" | "%" if y == 0.0 => return Err(PyExprError::DivisionByZero),
        "/" => x / y,
        "//" => (x / y).floor(),
        "%" => x - y * (x / y).floor(),
        _ => x.powf(y),
    };
    Ok(Value::Float(value))
}

/// Python's `x // y`: the quotient rounded down, not toward zero.
fn floor_div(x: i64, y: i64) -> i64 {
    let q = x / y;
    if x % y != 0 && (x < 0) != (y < 0) {
        q - 1
    } else {
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn constraints_evaluate_with_python_s_arithmetic() {
        let s = at(&[
            ("N", Value::Int(64)),
            ("nlevels", Value::Int(3)),
            ("geom", Value::Int(2)),
            ("m", Value::Int(1)),
        ]);
        let holds = |text| eval(text, &s).unwrap().truth();
        assert!(holds("N % 2 ** nlevels == 0"));
        assert!(holds("N >= 2**(nlevels + 1)"));
        assert!(!holds("N % 2 ** nlevels != 0"));
        assert!(holds("m == 2 or geom == 2"));
        assert!(!holds("m == 2 and geom == 2"));
        assert!(holds("not m == 2"));
        assert!(holds("1 <= m < N"));
        assert!(!holds("1 < m < N"));
        assert_eq!(eval("-7 // 2", &s), Ok(Value::Int(-4)));
        assert_eq!(eval("-7 % 3", &s), Ok(Value::Int(2)));
        assert_eq!(eval("7 % -3", &s), Ok(Value::Int(-2)));
        assert_eq!(eval("-2 ** 2", &s), Ok(Value::Int(-4)));
        assert_eq!(eval("7 / 2", &s), Ok(Value::Float(3.5)));
        assert_eq!(eval("max(1, (3 * N) // 2)", &s), Ok(Value::Int(96)));
        assert_eq!(eval("min(N, 2.5)", &s), Ok(Value::Float(2.5)));
        assert_eq!(
            eval("N * (N + 1) * (N + 2) // 6", &s),
            Ok(Value::Int(64 * 65 * 66 / 6))
        );
    }

    #[test]
    fn what_cannot_be_evaluated_says_why() {
        let s = at(&[("N", Value::Int(4))]);
        assert_eq!(eval("K >= 1", &s), Err(PyExprError::Unknown("K".into())));
        assert_eq!(eval("N // 0", &s), Err(PyExprError::DivisionByZero));
        assert!(matches!(eval("N >=", &s), Err(PyExprError::Syntax(_))));
        assert!(matches!(eval("len(N)", &s), Err(PyExprError::Syntax(_))));
    }
}
