//! Integer expressions over size symbols, as shapes and workspace sizes use
//! them: `NI`, `H - K + 1`, `N * N * 8`, `(N + 1) / 2`.

use std::collections::BTreeMap;

/// Why an expression does not parse, or has no value at these sizes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExprError {
    /// A token the grammar has no place for (`token` as the tokenizer saw it).
    #[error("unexpected {token} in {text:?}")]
    Unexpected { token: String, text: String },
    #[error("unexpected {0:?}")]
    UnexpectedOperator(char),
    #[error("number {0} too large")]
    NumberTooLarge(String),
    #[error("expression ends too early")]
    EndsEarly,
    #[error("missing ')'")]
    MissingParen,
    #[error("unknown size symbol {0}")]
    UnknownSymbol(String),
    #[error("division by zero")]
    DivisionByZero,
    #[error("overflow")]
    Overflow,
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    Int(i64),
    Sym(String),
    Bin(Box<Expr>, Op, Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

impl Expr {
    pub fn parse(text: &str) -> Result<Expr, ExprError> {
        let tokens = tokenize(text)?;
        let mut parser = Parser { tokens, pos: 0 };
        let expr = parser.sum()?;
        if parser.pos != parser.tokens.len() {
            return Err(ExprError::Unexpected {
                token: format!("{:?}", parser.tokens[parser.pos]),
                text: text.to_string(),
            });
        }
        Ok(expr)
    }

    /// Symbols the expression mentions.
    pub fn symbols(&self, out: &mut Vec<String>) {
        match self {
            Expr::Int(_) => {}
            Expr::Sym(s) => {
                if !out.contains(s) {
                    out.push(s.clone());
                }
            }
            Expr::Bin(a, _, b) => {
                a.symbols(out);
                b.symbols(out);
            }
        }
    }

    pub fn eval(&self, sizes: &BTreeMap<String, i64>) -> Result<i64, ExprError> {
        match self {
            Expr::Int(n) => Ok(*n),
            Expr::Sym(s) => sizes
                .get(s)
                .copied()
                .ok_or_else(|| ExprError::UnknownSymbol(s.clone())),
            Expr::Bin(a, op, b) => {
                let (a, b) = (a.eval(sizes)?, b.eval(sizes)?);
                let r = match op {
                    Op::Add => a.checked_add(b),
                    Op::Sub => a.checked_sub(b),
                    Op::Mul => a.checked_mul(b),
                    Op::Div if b == 0 => return Err(ExprError::DivisionByZero),
                    Op::Div => Some(a.div_euclid(b)),
                };
                r.ok_or(ExprError::Overflow)
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Int(i64),
    Sym(String),
    Op(char),
}

fn tokenize(text: &str) -> Result<Vec<Token>, ExprError> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c.is_ascii_digit() {
            let mut n = String::new();
            while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                n.push(d);
                chars.next();
            }
            tokens.push(Token::Int(
                n.parse()
                    .map_err(|_| ExprError::NumberTooLarge(n.clone()))?,
            ));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let mut s = String::new();
            while let Some(&d) = chars
                .peek()
                .filter(|d| d.is_ascii_alphanumeric() || **d == '_')
            {
                s.push(d);
                chars.next();
            }
            tokens.push(Token::Sym(s));
        } else if "+-*/()".contains(c) {
            tokens.push(Token::Op(c));
            chars.next();
        } else {
            return Err(ExprError::Unexpected {
                token: format!("{c:?}"),
                text: text.to_string(),
            });
        }
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek_op(&self) -> Option<char> {
        match self.tokens.get(self.pos) {
            Some(Token::Op(c)) => Some(*c),
            _ => None,
        }
    }

    fn sum(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.product()?;
        while let Some(c @ ('+' | '-')) = self.peek_op() {
            self.pos += 1;
            let op = if c == '+' { Op::Add } else { Op::Sub };
            left = Expr::Bin(Box::new(left), op, Box::new(self.product()?));
        }
        Ok(left)
    }

    fn product(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.atom()?;
        while let Some(c @ ('*' | '/')) = self.peek_op() {
            self.pos += 1;
            let op = if c == '*' { Op::Mul } else { Op::Div };
            left = Expr::Bin(Box::new(left), op, Box::new(self.atom()?));
        }
        Ok(left)
    }

    fn atom(&mut self) -> Result<Expr, ExprError> {
        let token = self
            .tokens
            .get(self.pos)
            .cloned()
            .ok_or(ExprError::EndsEarly)?;
        self.pos += 1;
        match token {
            Token::Int(n) => Ok(Expr::Int(n)),
            Token::Sym(s) => Ok(Expr::Sym(s)),
            Token::Op('(') => {
                let inner = self.sum()?;
                if self.peek_op() != Some(')') {
                    return Err(ExprError::MissingParen);
                }
                self.pos += 1;
                Ok(inner)
            }
            Token::Op(c) => Err(ExprError::UnexpectedOperator(c)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluates_with_precedence_and_parentheses() {
        let sizes = BTreeMap::from([("H".to_string(), 10), ("K".to_string(), 3)]);
        let eval = |s: &str| Expr::parse(s).unwrap().eval(&sizes).unwrap();
        assert_eq!(eval("H - K + 1"), 8);
        assert_eq!(eval("H * K * 8"), 240);
        assert_eq!(eval("(H + 1) / 2"), 5);
        assert_eq!(eval("2 + H * K"), 32);
        assert!(Expr::parse("H +").is_err());
        assert!(Expr::parse("H $ 2").is_err());
        assert!(Expr::parse("Q").unwrap().eval(&sizes).is_err());
    }
}
